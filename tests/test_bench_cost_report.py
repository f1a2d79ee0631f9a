"""Ratios, summaries and tables of a bench-cost record, against hand-computed values."""
import pytest

from diffrl.commands.bench_cost_report import markdown, ratio, summarise_row, with_summaries


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
