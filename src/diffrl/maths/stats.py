"""Aggregate statistics for benchmark results: IQM and (stratified) bootstrap intervals.

Follows the recommendations of Agarwal et al., "Deep Reinforcement Learning at the Edge
of the Statistical Precipice" (NeurIPS 2021):

* the **interquartile mean** (IQM, Sec. 4.3) is the mean of the middle 50% of all
  scores pooled over tasks and runs; like ``scipy.stats.trim_mean(x, 0.25)`` it drops
  ``floor(n / 4)`` scores from each end of the sorted scores (so with ``n`` not a
  multiple of 4 slightly more than half are kept);
* **percentile bootstrap** confidence intervals (Efron & Tibshirani 1993, ch. 13):
  resample the runs with replacement, recompute the statistic, take the
  ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the resampled statistics;
* the **stratified bootstrap** (Sec. 4.2) resamples runs *within each task*, so every
  resample keeps the task mix of the data (a task's runs never stand in for another's);
* the **probability of improvement** (Sec. 4.3) of one algorithm over another, the mean over
  tasks of the Mann-Whitney statistic between their runs.

Scores are normalised per task before pooling (:func:`normalize`), e.g. DM Control
returns by their range [0, 1000].

Everything is plain NumPy, deterministic given ``seed``.
"""
from __future__ import annotations

import warnings
from typing import Callable, Sequence

import numpy as np

DEFAULT_RESAMPLES = 2000


def iqm(scores, axis: int | None = None) -> np.ndarray | float:
    """Interquartile mean: mean after dropping ``floor(n/4)`` lowest and highest scores.

    ``axis=None`` pools every score; otherwise the statistic is taken along ``axis``.
    """
    x = np.asarray(scores, np.float64)
    if axis is None:
        x, axis = x.reshape(-1), 0
    x = np.moveaxis(x, axis, -1)
    n = x.shape[-1]
    if n == 0:
        raise ValueError("iqm of an empty set of scores")
    cut = n // 4
    kept = np.sort(x, axis=-1)[..., cut:n - cut]
    out = kept.mean(axis=-1)
    return float(out) if out.ndim == 0 else out


def normalize(scores, low: float, high: float) -> np.ndarray:
    """Scores mapped affinely so that ``low -> 0`` and ``high -> 1``."""
    if not high > low:
        raise ValueError(f"normalisation range must have high > low (got [{low}, {high}])")
    return (np.asarray(scores, np.float64) - low) / (high - low)


def _quantiles(resampled: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(resampled, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level}")


def stratified_bootstrap_ci(
    groups: Sequence,
    statistic: Callable[[np.ndarray], np.ndarray] = lambda x: iqm(x, axis=-1),
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(point estimate, low, high) of ``statistic`` over the pooled scores of ``groups``.

    ``groups`` is one 1-D array of run scores per task (stratum; sizes may differ).
    Each resample draws, for every task independently, as many runs as it has, with
    replacement; ``statistic`` maps a (resamples, pooled runs) array to (resamples,)
    and is applied to the pooled resampled scores (default: IQM).
    """
    _check_level(level)
    groups = [np.asarray(g, np.float64).reshape(-1) for g in groups]
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("stratified bootstrap needs at least one task with at least one run per task")
    rng = np.random.default_rng(seed)
    pooled = np.concatenate(groups)
    parts = [g[rng.integers(0, len(g), size=(resamples, len(g)))] for g in groups]
    resampled = np.asarray(statistic(np.concatenate(parts, axis=1)), np.float64)
    point = float(np.asarray(statistic(pooled[None, :]), np.float64).reshape(-1)[0])
    return (point, *_quantiles(resampled, level))


def bootstrap_ci(
    samples,
    statistic: Callable[[np.ndarray], np.ndarray] = lambda x: np.mean(x, axis=-1),
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(point estimate, low, high): percentile bootstrap of ``statistic`` (default the mean)
    over the 1-D ``samples`` (one task's runs: a stratified bootstrap with one stratum).
    With a single sample the interval collapses to it."""
    return stratified_bootstrap_ci([samples], statistic, level, resamples, seed)


def _mann_whitney(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(x > y) + P(x = y) / 2 over all pairs of x (..., n) and y (..., m) -> (...)."""
    greater = (x[..., :, None] > y[..., None, :]).mean(axis=(-1, -2))
    equal = (x[..., :, None] == y[..., None, :]).mean(axis=(-1, -2))
    return greater + 0.5 * equal


def probability_of_improvement(
    xs: Sequence,
    ys: Sequence,
    level: float = 0.95,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(point estimate, low, high) of P(X > Y): the probability that algorithm X beats Y on a
    task drawn at random (Agarwal et al. 2021, Sec. 4.3, as rliable's
    ``probability_of_improvement``): the mean over tasks of the Mann-Whitney statistic
    P(x > y) + P(x = y) / 2 between X's runs ``xs[i]`` and Y's runs ``ys[i]`` on task ``i``.

    The interval is a stratified percentile bootstrap: each algorithm's runs are resampled
    within each task, independently."""
    _check_level(level)
    if len(xs) != len(ys) or not xs:
        raise ValueError(f"need the same, non-zero number of tasks for both algorithms (got {len(xs)} and {len(ys)})")
    xs = [np.asarray(x, np.float64).reshape(-1) for x in xs]
    ys = [np.asarray(y, np.float64).reshape(-1) for y in ys]
    if any(len(v) == 0 for v in xs + ys):
        raise ValueError("probability of improvement needs at least one run per task and algorithm")
    rng = np.random.default_rng(seed)
    point = float(np.mean([_mann_whitney(x, y) for x, y in zip(xs, ys)]))
    per_task = []
    for x, y in zip(xs, ys):
        x_resampled = x[rng.integers(0, len(x), size=(resamples, len(x)))]
        y_resampled = y[rng.integers(0, len(y), size=(resamples, len(y)))]
        per_task.append(_mann_whitney(x_resampled, y_resampled))
    return (point, *_quantiles(np.mean(per_task, axis=0), level))


def mean_ci_along_last_axis(values, level: float = 0.95, resamples: int = DEFAULT_RESAMPLES,
                            seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """values (points, runs) -> (mean, low, high), each (points,): a bootstrap interval of
    the mean over runs at every point of a curve (the same resampled runs at every point,
    so the band is that of whole curves). NaNs (a run without a value at a point) are left
    out of each mean; with one run the band collapses to its curve. The one implementation
    behind ``diffrl plot`` and ``benchmarks/aggregate.py``."""
    _check_level(level)
    values = np.asarray(values, np.float64)
    if values.ndim != 2 or values.shape[1] == 0:
        raise ValueError(f"expected a (points, runs) array with at least one run, got shape {values.shape}")
    with warnings.catch_warnings():  # a resample may hold only a point's missing values
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=1)
        n = values.shape[1]
        if n < 2:
            return mean, mean.copy(), mean.copy()
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(resamples, n))
        means = np.nanmean(values[:, idx], axis=2)  # (points, resamples)
        alpha = (1.0 - level) / 2.0
        return mean, np.nanquantile(means, alpha, axis=1), np.nanquantile(means, 1.0 - alpha, axis=1)


CURVE_GRID_POINTS = 100
"""Points of the common grid onto which curves on different x values are interpolated."""


def align_curves(curves, grid_points: int = CURVE_GRID_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Curves ``(x (points,), values (points,) or (points, k))`` of several runs -> ``(grid,
    values (grid points, total columns))``: the one alignment behind ``diffrl plot`` and
    ``benchmarks/aggregate.py``.

    Curves on the same x stay as they are (columns side by side); otherwise every column is
    linearly interpolated onto ``grid_points`` points of the x range that all curves cover
    (never extrapolated). Empty curves are skipped; curves without a common range are refused.
    """
    prepared = []
    for x, y in curves:
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if len(x) == 0:
            continue
        prepared.append((x, y[:, None] if y.ndim == 1 else y))
    if not prepared:
        return np.zeros((0,)), np.zeros((0, 0))
    first = prepared[0][0]
    if all(len(x) == len(first) and np.array_equal(x, first) for x, _ in prepared):
        return first, np.concatenate([y for _, y in prepared], axis=1)
    lo, hi = max(x[0] for x, _ in prepared), min(x[-1] for x, _ in prepared)
    if not hi > lo:
        raise ValueError(f"the curves share no common x range (their ranges: "
                         f"{[(float(x[0]), float(x[-1])) for x, _ in prepared]})")
    grid = np.linspace(lo, hi, grid_points)
    columns = [np.interp(grid, x, y[:, j]) for x, y in prepared for j in range(y.shape[1])]
    return grid, np.stack(columns, axis=1)
