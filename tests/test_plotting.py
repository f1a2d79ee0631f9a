"""Learning-curve plots from run directories written in the trainer's format."""
import json

import numpy as np
import pytest
from PIL import Image

from diffrl.artefacts.plotting import bootstrap_mean_ci, plot_run, plot_runs, read_metrics, run_curve


def fake_run(path, algo, env, seed_offset, num_seeds=3, chunks=6, steps_per_chunk=1000, torn=False):
    """A run directory as Trainer writes it: config.json record + metrics.jsonl rows."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"config": {"algo": algo, "env": env, "num_seeds": num_seeds},
                                                  "versions": {}}))
    rng = np.random.default_rng(seed_offset)
    with open(path / "metrics.jsonl", "w") as f:
        for c in range(chunks + 1):
            returns = 10.0 * c + seed_offset + rng.normal(0, 1, num_seeds)
            row = {"env_steps": c * steps_per_chunk, "walltime": 0.5 * c + 0.1 * seed_offset,
                   "eval/episode_return": float(np.mean(returns)),
                   "eval/episode_return_std": 1.0, "eval/seed_returns": [float(r) for r in returns]}
            f.write(json.dumps(row) + "\n")
            if c == 2:  # a training-only row without eval fields is skipped
                f.write(json.dumps({"env_steps": c * steps_per_chunk + 1, "train/sps": 5.0}) + "\n")
        if torn:
            f.write('{"env_steps": 99')
    return path


def assert_nontrivial_png(path):
    assert path.exists() and path.stat().st_size > 5000
    img = np.asarray(Image.open(path).convert("RGB"))
    assert img.shape[0] > 200 and img.shape[1] > 300
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 10  # more than a blank canvas


def test_read_metrics_and_run_curve(tmp_path):
    run = fake_run(tmp_path / "a", "ppo", "toy/MirrorGoals", 0, torn=True)
    rows = read_metrics(run)
    assert len(rows) == 8  # 7 eval rows + 1 train row; torn line ignored
    x, values = run_curve(run)
    assert values.shape == (7, 3) and np.all(np.diff(x) > 0)
    np.testing.assert_allclose(values.mean(axis=1), [r["eval/episode_return"] for r in rows if "eval/episode_return" in r])
    with pytest.raises(ValueError, match="x must be"):
        run_curve(run, x="iteration")


def test_bootstrap_band_covers_the_mean_and_shrinks_with_more_seeds():
    rng = np.random.default_rng(0)
    few, many = rng.normal(0, 1, (1, 4)), rng.normal(0, 1, (1, 400))
    lo_f, hi_f = bootstrap_mean_ci(few)
    lo_m, hi_m = bootstrap_mean_ci(many)
    assert lo_f[0] <= few.mean() <= hi_f[0] and lo_m[0] <= many.mean() <= hi_m[0]
    # the 95% band of a mean of 400 N(0,1) draws has width about 2*1.96/20 = 0.196
    assert 0.15 < hi_m[0] - lo_m[0] < 0.25 and hi_f[0] - lo_f[0] > hi_m[0] - lo_m[0]
    lo, hi = bootstrap_mean_ci(np.array([[1.0], [2.0]]))
    np.testing.assert_array_equal(lo, hi)


def test_plot_runs_groups_by_env_and_algo(tmp_path):
    runs = [fake_run(tmp_path / "r1", "ppo", "playground/CartpoleBalance", 0),
            fake_run(tmp_path / "r2", "ppo", "playground/CartpoleBalance", 1),
            fake_run(tmp_path / "r3", "trudi", "playground/CartpoleBalance", 5, num_seeds=2),
            fake_run(tmp_path / "r4", "trudi", "toy/MirrorGoals", 2, chunks=4, steps_per_chunk=500)]
    out = plot_runs(runs, tmp_path / "plots" / "curves.png")
    assert_nontrivial_png(out)


def test_walltime_axis_interpolates_different_grids(tmp_path):
    runs = [fake_run(tmp_path / "r1", "ppo", "toy/MirrorGoals", 0),
            fake_run(tmp_path / "r2", "ppo", "toy/MirrorGoals", 3)]
    out = plot_runs(runs, tmp_path / "wall.png", x="walltime")
    assert_nontrivial_png(out)


def test_plot_run_writes_curve_png(tmp_path):
    run = fake_run(tmp_path / "one", "reppo", "brax/ant", 0, num_seeds=1)
    out = plot_run(run)
    assert out == run / "curve.png"
    assert_nontrivial_png(out)
