"""diffrl bench cost: bad input refused before compiling, ratios derived from the raw timings,
the JSON record's schema and the markdown table (timings themselves are never asserted)."""
import json
import statistics

import pytest

from diffrl.commands import bench_cost
from diffrl.cli import main
from multiseed import long_only

TINY = ["--env", "toy/MirrorGoals", "--num-envs", "8", "--num-steps", "4", "--repeats", "2",
        "--set", "reppo.num_minibatches=2", "--set", "reppo.num_epochs=1", "--set", "critic.hidden=32",
        "--set", "gaussian.hidden=(16,16)", "--set", "adjoint.hidden=(16,16)", "--set", "diffusion.hidden=(16,16)"]


@pytest.mark.parametrize("args, message", [
    (["--algos", "amdp,ampd"], "did you mean amdp"),
    (["--algos", "sac"], "choose from reppo, trudi, dime, amdp, amdp-backprop, ppo, spo, fpo, fpo++, dppo"),
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
    (["--setting", "off-policy", "--algos", "trudi"], "'trudi' is not an algorithm of the off-policy setting"),
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


@pytest.mark.heavy(34)
def test_measures_every_group_and_records_raw_timings(tmp_path, capsys):
    out = tmp_path / "cost.json"
    rc = main(["bench", "cost"] + TINY + ["--algos", "amdp", "--diffusion-steps", "2,4", "--json", str(out)])
    assert rc == 0
    record = json.loads(out.read_text())
    assert record["schema"] == "diffrl.commands.bench_cost/1"
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


def test_memory_only_compiles_from_shapes_and_runs_nothing(tmp_path, monkeypatch):
    """--memory-only records XLA's memory analysis and the policy size without allocating the
    state or calling any program (docs/benchmarks.md#memory-at-scale has the measured table)."""
    def refuse(*args, **kwargs):
        raise AssertionError("nothing may run in --memory-only")

    monkeypatch.setattr(bench_cost.Contender, "call", refuse)
    out = tmp_path / "mem.json"
    rc = main(["bench", "cost"] + TINY + ["--algos", "amdp-backprop", "--diffusion-steps", "8",
                                          "--memory-only", "--json", str(out)])
    assert rc == 0
    record = json.loads(out.read_text())
    rows = {r["algo"]: r for r in record["results"]}
    assert set(rows) == {"reppo", "amdp-backprop"}
    assert all(r["status"] == "ok" and r["iteration_s"] == [] for r in rows.values())
    for row in rows.values():
        for program in ("iteration", "update"):
            assert row["memory"][f"{program}_compiled"]["peak_estimate_bytes"] > 0
        assert row["policy_parameters"] > 0
    # backpropagating through 8 chain steps keeps their activations: more than REPPO's Gaussian update
    assert (rows["amdp-backprop"]["memory"]["update_compiled"]["peak_estimate_bytes"]
            > rows["reppo"]["memory"]["update_compiled"]["peak_estimate_bytes"])
    assert "Policy parameters" in out.with_suffix(".md").read_text()


@long_only("compiles three off-policy contenders (~40 s); the parsing of --setting is checked in CI above")
def test_off_policy_setting_times_the_replay_algorithms_against_sac(tmp_path, capsys):
    """--setting off-policy: SAC the baseline, dime-off and amdp-off at each N, each timed update a
    real learning phase (learning_starts 0: utd x batch gradient steps on the buffer)."""
    out = tmp_path / "cost.json"
    off = ["--set", "offpolicy.critic_hidden=(16,)", "--set", "offpolicy.num_bins=11", "--set",
           "offpolicy.batch_size=16", "--set", "offpolicy.utd=0.25"]
    rc = main(["bench", "cost", "--setting", "off-policy", "--diffusion-steps", "2"] + TINY + off
              + ["--repeats", "1", "--warmup", "0", "--json", str(out)])
    assert rc == 0
    record = json.loads(out.read_text())
    rows = {(r["algo"], r["diffusion_steps"]): r for r in record["results"]}
    assert set(rows) == {("sac", 2), ("dime-off", 2), ("amdp-off", 2)}
    assert all(r["status"] == "ok" for r in rows.values())
    assert record["configs"]["amdp-off@N=2"]["offpolicy"]["learning_starts"] == 0
    assert record["configs"]["dime-off@N=2"]["diffusion"]["num_steps"] == 2
    assert {"amdp-off/sac", "dime-off/sac", "dime-off/amdp-off"} <= set(record["ratios"][0])
    table = (tmp_path / "cost.md").read_text()
    assert table.startswith("# Compute cost of the diffusion actors relative to SAC")
    assert "AMDP-off/SAC" in table
