"""benchmarks/seed_summary.py: per-seed finals, medians with bootstrap intervals, curves, from run dirs."""
import json

import numpy as np

import seed_summary


def _run_dir(path, returns, success=None):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"config": {"algo": "reppo", "env": "maniskill/PushCube-v1"}}))
    rows = [{"env_steps": 0, "walltime": 0.0, "train/sps": 0.0}]  # a training row without evaluation
    for i, r in enumerate(returns):
        row = {"env_steps": 1000 * i, "walltime": 10.0 * i, "eval/seed_returns": r}
        if success is not None:
            row["eval/seed_success_rate"] = success[i]
        rows.append(row)
    (path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_table_gives_final_medians_intervals_and_curves(tmp_path):
    run = _run_dir(tmp_path / "a", [[1, 2, 3, 4, 5], [10, 20, 30, 40, 50]],
                   success=[[0, 0, 0, 0, 0], [0.5, 1, 0, 1, 1]])
    runs = [seed_summary.read_run(run, ["seed_returns", "seed_success_rate"])]
    assert runs[0]["seed_returns"].shape == (2, 5) and list(runs[0]["env_steps"]) == [0, 1000]
    text = seed_summary.table(runs, ["seed_returns", "seed_success_rate"])
    assert "(5 seeds, 1,000 env steps" in text
    returns_line = next(line for line in text.splitlines() if line.startswith("| seed_returns"))
    cells = [c.strip() for c in returns_line.split("|")]
    assert cells[2].startswith("30 [") and cells[3] == "30" and cells[4] == "10 20 30 40 50" and cells[5] == "3, 30"
    low, high = (float(x) for x in cells[2][cells[2].index("[") + 1:-1].split(","))
    assert 10 <= low <= 30 <= high <= 50
    assert "| seed_success_rate | 1 [" in text


def test_main_writes_table_and_plot_and_skips_missing_metrics(tmp_path):
    a = _run_dir(tmp_path / "a", [[1.0, 2.0], [3.0, 4.0]])
    assert seed_summary.main([str(a), "--out", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "table.md").read_text()
    assert "seed_returns" in table and "seed_success_rate" not in table  # this run has none
    assert (tmp_path / "out" / "curves.png").stat().st_size > 0
    assert np.isfinite(seed_summary.read_run(a, ["seed_returns"])["walltime"]).all()
