"""benchmarks/aggregate.py on hand-made records: statistics against direct computations, outputs."""
import json

import numpy as np
import pytest
from PIL import Image

import aggregate
from suite_records import SCHEMA, record_name

from diffrl.maths.stats import iqm

TASKS = ("playground/CartpoleSwingup", "playground/PendulumSwingup", "playground/CheetahRun")


def write_record(folder, algo, task, seed, finals_scale, steps=(0, 500, 1000), walltime_scale=1.0):
    returns = [0.0, 0.5 * finals_scale, finals_scale]
    record = {"schema": SCHEMA, "algo": algo, "task": task, "seed": seed, "base_seed": 0, "sampler": "mean",
              "env_steps": list(steps), "walltime": [0.0, 5.0 * walltime_scale, 10.0 * walltime_scale],
              "returns": returns, "final_return": returns[-1], "final_env_steps": steps[-1],
              "program": {"compile_s": 3.0}, "config": {"algo": algo, "env": task}, "preset": f"{algo}-x"}
    path = folder / "runs" / record_name(algo, task, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return record


@pytest.fixture
def suite_dir(tmp_path):
    rng = np.random.default_rng(0)
    finals = {}
    for t, task in enumerate(TASKS):
        for algo, base in (("ppo", 300.0), ("reppo", 600.0)):
            for seed in range(4):
                value = base + 100.0 * t + rng.normal(0, 30)
                finals[(algo, task, seed)] = value
                write_record(tmp_path, algo, task, seed, value, walltime_scale=1.0 if algo == "ppo" else 3.0)
    return tmp_path, finals


def test_statistics_match_direct_computations(suite_dir):
    folder, finals = suite_dir
    stats = aggregate.aggregate(folder, folder / "agg", resamples=500)
    for cell in stats["per_task"]:
        values = [v for (a, t, _), v in finals.items() if a == cell["algo"] and t == cell["task"]]
        assert cell["mean"] == pytest.approx(np.mean(values)) and cell["seeds"] == 4
        assert min(values) <= cell["ci_low"] <= cell["mean"] <= cell["ci_high"] <= max(values)
    for algo in ("ppo", "reppo"):
        pooled = np.array([v for (a, _, _), v in finals.items() if a == algo]) / 1000.0  # DMC range [0, 1000]
        agg = stats["aggregate"][algo]
        assert agg["iqm"] == pytest.approx(iqm(pooled)) and agg["mean"] == pytest.approx(pooled.mean())
        assert agg["iqm_ci"][0] <= agg["iqm"] <= agg["iqm_ci"][1] and agg["runs"] == 12
        assert sorted(agg["tasks"]) == sorted(TASKS)
    assert stats["aggregate"]["reppo"]["iqm_ci"][0] > stats["aggregate"]["ppo"]["iqm_ci"][1]
    assert stats["score_ranges"][TASKS[0]] == [0.0, 1000.0] and not stats["unnormalised_tasks"]
    table = (folder / "agg" / "table.md").read_text()
    assert "| playground/CheetahRun |" in table and "| reppo | 3 | 12 |" in table
    # deterministic given the bootstrap seed
    again = aggregate.aggregate(folder, folder / "agg2", resamples=500)
    assert again == json.loads((folder / "agg" / "aggregate.json").read_text())


def test_plots_are_drawn(suite_dir):
    folder, _ = suite_dir
    aggregate.aggregate(folder, folder / "agg", resamples=200)
    for name in ("curves_env_steps.png", "curves_walltime.png", "iqm.png", "iqm_curve.png"):
        img = np.asarray(Image.open(folder / "agg" / name).convert("RGB"))
        assert img.shape[0] > 200 and len(np.unique(img.reshape(-1, 3), axis=0)) > 10


def test_align_interpolates_onto_the_common_range():
    grid, values = aggregate.align([(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0])),
                                    (np.array([0.0, 0.5, 1.5]), np.array([0.0, 5.0, 15.0]))])
    assert grid[0] == 0.0 and grid[-1] == 1.5 and values.shape == (aggregate.GRID_POINTS, 2)
    np.testing.assert_allclose(values[:, 0], grid)
    np.testing.assert_allclose(values[:, 1], 10 * grid)
    same, stacked = aggregate.align([([0, 1], [1.0, 2.0]), ([0, 1], [3.0, 4.0])])
    np.testing.assert_array_equal(stacked, [[1.0, 3.0], [2.0, 4.0]])


def test_unknown_tasks_take_a_given_range_or_are_flagged_raw(tmp_path, capsys):
    for seed in range(2):
        write_record(tmp_path, "ppo", "toy/MirrorGoals", seed, 20.0 + seed)
    stats = aggregate.aggregate(tmp_path, tmp_path / "a", resamples=100)
    assert stats["unnormalised_tasks"] == ["toy/MirrorGoals"]
    assert stats["aggregate"]["ppo"]["mean"] == pytest.approx(20.5)
    assert aggregate.main([str(tmp_path), "--out", str(tmp_path / "b"), "--score-range", "toy/MirrorGoals=0:40"]) == 0
    stats = json.loads((tmp_path / "b" / "aggregate.json").read_text())
    assert stats["aggregate"]["ppo"]["mean"] == pytest.approx(20.5 / 40) and not stats["unnormalised_tasks"]
    capsys.readouterr()
    assert aggregate.main([str(tmp_path), "--score-range", "toy/MirrorGoals"]) == 2
    assert "TASK=LOW:HIGH" in capsys.readouterr().err
    assert aggregate.main([str(tmp_path / "empty")]) == 2
    assert "no run records" in capsys.readouterr().err


def test_duplicate_and_malformed_records_are_rejected(tmp_path):
    write_record(tmp_path, "ppo", TASKS[0], 0, 1.0)
    record = json.loads((tmp_path / "runs" / record_name("ppo", TASKS[0], 0)).read_text())
    (tmp_path / "runs" / "copy.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="two records"):
        aggregate.aggregate(tmp_path, tmp_path / "a")
    del record["returns"]
    (tmp_path / "runs" / "copy.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="missing fields"):
        aggregate.aggregate(tmp_path, tmp_path / "a")
