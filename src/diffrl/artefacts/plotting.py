"""Learning curves from run directories (``config.json`` + ``metrics.jsonl``).

Each run directory is one trainer run, possibly with several vmapped seeds whose
per-seed evaluation returns are logged as ``eval/seed_returns`` (a list per row).
:func:`plot_runs` groups runs by (env, algo) from ``config.json``, pools the seeds of
all runs in a group, and draws the mean across seeds with a 95% percentile-bootstrap
confidence band of that mean (Efron & Tibshirani 1993, ch. 13; 2000 resamples,
fixed seed so plots are reproducible). One panel per environment, one line per
algorithm.

Runs of a group are aligned on their x values; when the grids differ (always for
``walltime``) every seed's curve is linearly interpolated onto 100 points of the range
that all of them cover (never extrapolated). Alignment and band are
:func:`diffrl.maths.stats.align_curves` and :func:`diffrl.maths.stats.mean_ci_along_last_axis`, the same
functions ``benchmarks/aggregate.py`` uses.

Uses matplotlib's Agg backend (no display needed).
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from diffrl.maths.stats import align_curves, mean_ci_along_last_axis

X_AXES = ("env_steps", "walltime")
BOOTSTRAP_SAMPLES = 2000
GRID_POINTS = 100


def read_metrics(run_dir: str | Path) -> list[dict]:
    """Rows of ``run_dir/metrics.jsonl``; a torn last line (crash mid-write) is ignored."""
    rows = []
    path = Path(run_dir) / "metrics.jsonl"
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def read_run_config(run_dir: str | Path) -> dict:
    """The ``config`` part of ``run_dir/config.json`` (the trainer's run record)."""
    record = json.loads((Path(run_dir) / "config.json").read_text())
    return record.get("config", record)


def _as_float(value) -> float:
    try:
        return float(value)  # the logger writes non-finite numbers as "nan"/"inf" strings
    except (TypeError, ValueError):
        return math.nan


def _seeds_key(y: str) -> str | None:
    """'eval/episode_return' -> 'eval/seed_returns'; 'eval/ode/episode_return' -> 'eval/ode/seed_returns'."""
    if y.endswith("episode_return"):
        return y[: -len("episode_return")] + "seed_returns"
    return None


def run_curve(run_dir: str | Path, x: str = "env_steps", y: str = "eval/episode_return"):
    """(x (n,), values (n, seeds)) of one run: rows that have both x and y, sorted by x.

    Uses the per-seed list ``eval/seed_returns`` when present (and of constant length),
    else the logged mean as a single seed.
    """
    if x not in X_AXES:
        raise ValueError(f"x must be one of {X_AXES}, got {x!r}")
    seeds_key = _seeds_key(y)
    xs, values = [], []
    for row in read_metrics(run_dir):
        if x not in row or y not in row:
            continue
        per_seed = row.get(seeds_key) if seeds_key else None
        vals = [_as_float(v) for v in per_seed] if isinstance(per_seed, list) and per_seed else [_as_float(row[y])]
        xs.append(_as_float(row[x]))
        values.append(vals)
    if not xs:
        return np.zeros((0,)), np.zeros((0, 1))
    width = len(values[0])
    if any(len(v) != width for v in values):  # inconsistent logging: fall back to means
        values = [[float(np.mean(v))] for v in values]
    order = np.argsort(xs, kind="stable")
    return np.asarray(xs)[order], np.asarray(values, np.float64)[order]


def bootstrap_mean_ci(samples: np.ndarray, level: float = 0.95, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """samples (n_points, n_seeds) -> (low, high) (n_points,) percentile-bootstrap CI of
    the mean over seeds (:func:`diffrl.maths.stats.mean_ci_along_last_axis`). With one seed the band
    collapses to the mean."""
    _, low, high = mean_ci_along_last_axis(samples, level, BOOTSTRAP_SAMPLES, seed)
    return low, high


def plot_runs(
    run_dirs: list,
    out: str | Path,
    x: str = "env_steps",
    y: str = "eval/episode_return",
    title: str | None = None,
) -> Path:
    """Learning curves of ``run_dirs`` into the image ``out`` (format from its suffix).

    One panel per environment (titled by env), one line per algorithm (legend), mean
    over all seeds of all runs of that (env, algo) with a 95% bootstrap band.
    Returns ``out``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not run_dirs:
        raise ValueError("plot_runs needs at least one run directory")
    groups: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for run_dir in run_dirs:
        cfg = read_run_config(run_dir)
        groups[cfg.get("env", "?")][cfg.get("algo", "?")].append(run_curve(run_dir, x, y))

    envs = sorted(groups)
    algo_colors = {a: f"C{i % 10}" for i, a in enumerate(sorted({a for g in groups.values() for a in g}))}
    cols = min(3, len(envs))
    rows = math.ceil(len(envs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.0 * cols, 3.6 * rows), squeeze=False)
    for ax, env in zip(axes.flat, envs):
        for algo in sorted(groups[env]):
            grid, values = align_curves(groups[env][algo], GRID_POINTS)
            if len(grid) == 0:
                continue
            mean, low, high = mean_ci_along_last_axis(values, 0.95, BOOTSTRAP_SAMPLES)
            color = algo_colors[algo]  # the same colour for an algorithm in every panel
            n = values.shape[1]
            ax.plot(grid, mean, color=color, label=f"{algo} ({n} seed{'s' if n != 1 else ''})")
            if n > 1:
                ax.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0)
        ax.set_title(env)
        ax.set_xlabel("environment steps" if x == "env_steps" else "wall-clock time (s)")
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(envs):]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    return save_figure(fig, out)


def save_figure(fig, out: str | Path, dpi: int = 100) -> Path:
    """Lay out, write ``fig`` to ``out`` (creating its folder) and close it; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def plot_run(run_dir: str | Path, x: str = "env_steps", y: str = "eval/episode_return") -> Path:
    """``run_dir/curve.png``: the learning curve of one run (mean over its seeds)."""
    return plot_runs([run_dir], Path(run_dir) / "curve.png", x=x, y=y)
