"""diffrl bench cost: bad input refused before compiling, ratios derived from the raw timings,
the JSON record's schema and the markdown table (timings themselves are never asserted)."""
import json
import statistics

import pytest

from diffrl import bench_cost
from diffrl.bench_cost_report import markdown, ratio, summarise_row, with_summaries
from diffrl.cli import main

TINY = ["--env", "toy/MirrorGoals", "--num-envs", "8", "--num-steps", "4", "--repeats", "2",
        "--set", "reppo.num_minibatches=2", "--set", "reppo.num_epochs=1", "--set", "critic.hidden=32",
        "--set", "gaussian.hidden=(16,16)", "--set", "adjoint.hidden=(16,16)", "--set", "diffusion.hidden=(16,16)"]


@pytest.mark.parametrize("args, message", [
    (["--algos", "amdp,ampd"], "did you mean amdp"),
    (["--algos", "ppo"], "choose from reppo, trudi, amdp, amdp-backprop"),
    (["--diffusion-steps", "4,0"], "N must be >= 1 (got 0)"),
    (["--diffusion-steps", "4,eight"], "'eight' is not an integer"),
    (["--env", "toy/MirrorGoal"], "Did you mean: toy/MirrorGoals"),
    (["--repeats", "0"], "--repeats must be positive"),
    (["--warmup", "-1"], "--warmup must be >= 0"),
    (["--time-limit-min", "-1"], "--time-limit-min must be >= 0"),
    (["--set", "adjoint.num_steps=4"], "use the dedicated flag"),
    (["--set", "reppo.no_such_field=1"], "--set reppo.no_such_field: unknown field"),
    (["--num-envs", "9", "--num-steps", "3"], "must divide the batch"),
    (["--preset", "dmc-tiny"], "unknown preset 'reppo-dmc-tiny'"),
])
def test_bad_input_refused_before_compiling(args, message, tmp_path, capsys, monkeypatch):
    def never(*a, **k):
        raise AssertionError("compiled despite bad input")

    monkeypatch.setattr(bench_cost.Contender, "prepare", never)
    out = tmp_path / "cost.json"
    rc = main(["bench", "cost"] + TINY + args + ["--json", str(out)])
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_bench_subcommands():
    assert main(["bench"]) == 0
    assert main(["bench", "costs"]) == 2


def _row(algo, n, iteration, update, peak, status="ok", error=None):
    return {"algo": algo, "diffusion_steps": n, "status": status, "error": error,
            "iteration_s": iteration, "update_s": update, "compile_s": {"iteration": 1.0, "update": 0.5},
            "memory": {"iteration_compiled": {"peak_estimate_bytes": peak},
                       "update_compiled": {"peak_estimate_bytes": peak // 2}}}


def _record(rows):
    return {"results": rows, "machine": {"cpu_count": 2, "jax_backend": "cpu", "device_kind": "cpu"},
            "batch": {"num_envs": 8, "num_steps": 4}, "versions": {"jax": "x"}, "command": "diffrl bench cost",
            "request": {"env": "toy/MirrorGoals", "repeats": 3, "warmup": 1}}


def test_ratios_are_medians_and_minima_of_the_raw_timings():
    reppo = summarise_row(_row("reppo", 16, [1.0, 3.0, 2.0], [0.5, 0.7, 0.6], 1000))
    amdp = summarise_row(_row("amdp", 16, [2.6, 2.2, 2.4], [0.9, 0.66, 0.7], 1500))
    assert reppo["summary"]["iteration_s"] == {"median": 2.0, "min": 1.0, "calls": 3}
    assert reppo["summary"]["rollout_s"] == pytest.approx({"median": 1.4, "min": 0.5})
    r = ratio(amdp, reppo)
    assert r["status"] == "ok"
    assert r["iteration_median"] == pytest.approx(2.4 / 2.0)
    assert r["iteration_min"] == pytest.approx(2.2 / 1.0)
    assert r["update_median"] == pytest.approx(0.7 / 0.6)
    assert r["update_min"] == pytest.approx(0.66 / 0.5)
    assert r["iteration_peak_memory"] == pytest.approx(1.5)
    assert r["update_peak_memory"] == pytest.approx(750 / 500)


def test_failed_contender_gives_no_ratio_and_is_listed():
    rows = [_row("reppo", 128, [1.0], [0.5], 1000), _row("amdp", 128, [1.1], [0.6], 1000),
            _row("amdp-backprop", 128, [], [], 1000, status="failed",
                 error="out_of_memory: XlaRuntimeError: RESOURCE_EXHAUSTED")]
    record = with_summaries(_record(rows))
    entry = record["ratios"][0]
    assert entry["amdp/reppo"]["iteration_median"] == pytest.approx(1.1)
    assert entry["amdp-backprop/amdp"]["status"] == "unavailable"
    assert "RESOURCE_EXHAUSTED" in entry["amdp-backprop/amdp"]["reason"]
    assert "trudi/reppo" not in entry  # not requested, not reported
    assert record["headline"]["N=128"]["amdp/reppo"]["iteration"] == pytest.approx(1.1)
    text = markdown(record)
    assert "| 128 | 1000.0 | 1100.0 | OOM |" in text
    assert "N=128 amdp-backprop: out_of_memory" in text


def test_measures_every_group_and_records_raw_timings(tmp_path, capsys):
    out = tmp_path / "cost.json"
    rc = main(["bench", "cost"] + TINY + ["--algos", "amdp", "--diffusion-steps", "2,4", "--json", str(out)])
    assert rc == 0
    record = json.loads(out.read_text())
    assert record["schema"] == "diffrl.bench_cost/1"
    assert record["machine"]["jax_backend"] == "cpu" and record["machine"]["cpu_count"] >= 1
    assert record["versions"]["jax"] and record["batch"] == {"num_envs": 8, "num_steps": 4}
    assert record["configs"]["amdp@N=4"]["adjoint"]["num_steps"] == 4
    assert record["configs"]["amdp@N=2"]["reppo"] == record["configs"]["reppo"]["reppo"]  # same SGD schedule
    rows = {(r["algo"], r["diffusion_steps"]): r for r in record["results"]}
    assert set(rows) == {("reppo", 2), ("amdp", 2), ("reppo", 4), ("amdp", 4)}
    for row in rows.values():
        assert row["status"] == "ok" and row["error"] is None
        assert len(row["iteration_s"]) == 2 and len(row["update_s"]) == 2
        mem = row["memory"]["iteration_compiled"]
        assert mem["peak_estimate_bytes"] == (mem["argument_size_in_bytes"] + mem["output_size_in_bytes"]
                                              - mem["alias_size_in_bytes"] + mem["temp_size_in_bytes"]) > 0
        assert row["memory"]["device_peak_bytes_in_use"] is None  # CPU: no allocator statistics
    # REPPO is compiled once and re-timed in every group.
    assert rows[("reppo", 2)]["compile_s"] == rows[("reppo", 4)]["compile_s"]
    assert rows[("reppo", 2)]["iteration_s"] != rows[("reppo", 4)]["iteration_s"]
    for entry in record["ratios"]:
        n = entry["diffusion_steps"]
        a, b = rows[("amdp", n)], rows[("reppo", n)]
        for program in ("iteration", "update"):
            expect = statistics.median(a[f"{program}_s"]) / statistics.median(b[f"{program}_s"])
            assert entry["amdp/reppo"][f"{program}_median"] == pytest.approx(expect)
            expect = min(a[f"{program}_s"]) / min(b[f"{program}_s"])
            assert entry["amdp/reppo"][f"{program}_min"] == pytest.approx(expect)
    table = (tmp_path / "cost.md").read_text()
    assert "| N | REPPO iter | AMDP iter |" in table
    assert table in capsys.readouterr().out


def test_a_contender_that_fails_is_recorded_and_the_rest_still_run(tmp_path, monkeypatch):
    """amdp-backprop runs out of memory while being built; reppo is measured all the same, and
    --time-limit-min 0 lets the first group run but starts no further one."""
    import diffrl.core.build as build_module

    real_build = build_module.build

    def build_or_run_out_of_memory(config):
        if config.algo == "amdp-backprop":
            raise MemoryError("RESOURCE_EXHAUSTED: injected for the test")
        return real_build(config)

    monkeypatch.setattr(build_module, "build", build_or_run_out_of_memory)
    out = tmp_path / "cost.json"
    rc = main(["bench", "cost"] + TINY + ["--algos", "amdp-backprop", "--diffusion-steps", "2,4",
                                          "--time-limit-min", "0", "--json", str(out)])
    assert rc == 0
    record = json.loads(out.read_text())
    rows = {r["algo"]: r for r in record["results"]}
    assert rows["reppo"]["status"] == "ok" and len(rows["reppo"]["iteration_s"]) == 2
    assert rows["amdp-backprop"]["status"] == "failed"
    assert rows["amdp-backprop"]["error"].startswith("out_of_memory: MemoryError")
    assert record["ratios"][0]["amdp-backprop/reppo"]["status"] == "unavailable"
    assert [g["diffusion_steps"] for g in record["skipped_groups"]] == [4]
    assert "N=4: not run (--time-limit-min 0.0 reached" in (tmp_path / "cost.md").read_text()
