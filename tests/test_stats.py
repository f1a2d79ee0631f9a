"""IQM and bootstrap intervals against plain-Python computations and known distributions."""
import numpy as np
import pytest

from diffrl.maths.stats import (bootstrap_ci, iqm, mean_ci_along_last_axis, normalize,
                                probability_of_improvement, stratified_bootstrap_ci)


def plain_iqm(values):
    """The definition, written out: sort, drop floor(n/4) from each end, average the rest."""
    ordered = sorted(float(v) for v in values)
    cut = len(ordered) // 4
    kept = ordered[cut:len(ordered) - cut]
    return sum(kept) / len(kept)


def test_iqm_matches_the_plain_definition():
    assert iqm([1, 2, 3, 4, 5, 6, 7, 8]) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    assert iqm([5.0]) == 5.0
    assert iqm([1, 2, 3]) == pytest.approx(2.0)  # n < 4: nothing is dropped
    rng = np.random.default_rng(0)
    for n in (4, 5, 7, 10, 33, 100):
        x = rng.standard_cauchy(n)
        assert iqm(x) == pytest.approx(plain_iqm(x), rel=1e-12)
    # pooled over a (runs, tasks) matrix, and per row along an axis
    m = rng.normal(size=(6, 5))
    assert iqm(m) == pytest.approx(plain_iqm(m.ravel()))
    np.testing.assert_allclose(iqm(m, axis=1), [plain_iqm(row) for row in m])
    with pytest.raises(ValueError, match="empty"):
        iqm([])


def test_iqm_ignores_outliers_that_move_the_mean():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1e6])
    assert iqm(x) == pytest.approx(4.5) and np.mean(x) > 1e5


def test_normalize():
    np.testing.assert_allclose(normalize([0.0, 500.0, 1000.0], 0.0, 1000.0), [0.0, 0.5, 1.0])
    np.testing.assert_allclose(normalize([-1200.0, 0.0], -1200.0, 0.0), [0.0, 1.0])
    with pytest.raises(ValueError, match="high > low"):
        normalize([1.0], 1.0, 1.0)


def test_bootstrap_ci_covers_the_true_mean_at_about_the_nominal_rate():
    rng = np.random.default_rng(1)
    trials, n = 300, 30
    covered = 0
    for t in range(trials):
        x = rng.exponential(2.0, n)  # skewed, true mean 2
        _, lo, hi = bootstrap_ci(x, resamples=1000, seed=t)
        covered += lo <= 2.0 <= hi
    # percentile intervals under-cover slightly for small skewed samples; 95% nominal
    assert 0.87 <= covered / trials <= 0.99


def test_bootstrap_ci_shrinks_with_more_runs_like_one_over_sqrt_n():
    rng = np.random.default_rng(2)
    widths = {}
    for n in (25, 400):
        point, lo, hi = bootstrap_ci(rng.normal(0.0, 1.0, n))
        assert lo <= point <= hi
        widths[n] = hi - lo
    assert widths[400] < widths[25]
    assert widths[400] == pytest.approx(2 * 1.96 / 20, rel=0.25)  # normal theory: 2 * 1.96 / sqrt(n)


def test_bootstrap_is_deterministic_given_the_seed():
    x = np.random.default_rng(3).normal(size=12)
    assert bootstrap_ci(x, seed=7) == bootstrap_ci(x, seed=7)
    assert bootstrap_ci(x, seed=7) != bootstrap_ci(x, seed=8)
    assert bootstrap_ci([4.0]) == (4.0, 4.0, 4.0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci(x, level=1.5)


def test_stratified_bootstrap_keeps_each_tasks_share_of_the_runs():
    # Task A's runs all score 0, task B's all score 1. Resampling within tasks keeps exactly
    # half zeros and half ones in every resample, so the mean's interval is the single point
    # 0.5; resampling the pooled runs would mix the tasks and give a wide interval.
    groups = [np.zeros(5), np.ones(5)]
    mean = lambda x: np.mean(x, axis=-1)  # noqa: E731
    assert stratified_bootstrap_ci(groups, mean) == (0.5, 0.5, 0.5)
    _, lo, hi = bootstrap_ci(np.concatenate(groups))
    assert hi - lo > 0.3
    # the default statistic is the IQM of the pooled scores
    rng = np.random.default_rng(4)
    groups = [rng.normal(i, 1.0, 8) for i in range(4)]
    point, lo, hi = stratified_bootstrap_ci(groups)
    assert point == pytest.approx(plain_iqm(np.concatenate(groups)))
    assert lo < point < hi
    with pytest.raises(ValueError, match="at least one run"):
        stratified_bootstrap_ci([np.zeros(3), np.zeros(0)])


def plain_probability_of_improvement(xs, ys):
    """Every pair of runs on every task counted by hand: a win 1, a tie 1/2, a loss 0."""
    per_task = []
    for x, y in zip(xs, ys):
        wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in x for b in y)
        per_task.append(wins / (len(x) * len(y)))
    return sum(per_task) / len(per_task)


def test_probability_of_improvement_counts_wins_and_ties_per_task():
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=5).round(1) for _ in range(4)]  # rounded: ties happen
    ys = [rng.normal(size=3).round(1) for _ in range(4)]
    point, lo, hi = probability_of_improvement(xs, ys)
    assert point == pytest.approx(plain_probability_of_improvement(xs, ys))
    assert lo <= point <= hi
    assert probability_of_improvement([np.ones(3)], [np.zeros(3)]) == (1.0, 1.0, 1.0)
    assert probability_of_improvement([np.ones(3)], [np.ones(3)]) == (0.5, 0.5, 0.5)
    # the tasks are averaged, not the pooled pairs: a sure win on one task and a sure loss
    # on another with ten times the runs is 1/2
    assert probability_of_improvement([np.ones(2), np.zeros(20)], [np.zeros(2), np.ones(20)])[0] == 0.5
    assert probability_of_improvement(xs, ys, seed=1) != probability_of_improvement(xs, ys, seed=2)
    with pytest.raises(ValueError, match="same, non-zero number of tasks"):
        probability_of_improvement(xs, ys[:2])
    with pytest.raises(ValueError, match="at least one run"):
        probability_of_improvement([np.zeros(0)], [np.ones(2)])


def test_curve_band_is_the_mean_over_runs_with_an_interval_around_it():
    rng = np.random.default_rng(5)
    values = rng.normal(size=(6, 50)) + np.arange(6)[:, None]
    mean, lo, hi = mean_ci_along_last_axis(values)
    np.testing.assert_allclose(mean, values.mean(axis=1))
    assert np.all(lo <= mean) and np.all(mean <= hi)
    # about 2 * 1.96 / sqrt(50) = 0.55 wide for unit-variance runs
    assert np.all((hi - lo > 0.35) & (hi - lo < 0.8))
    mean, lo, hi = mean_ci_along_last_axis(np.array([[1.0], [2.0]]))
    np.testing.assert_array_equal(lo, hi)


def test_one_curve_alignment_and_band_for_plot_and_aggregate():
    """diffrl plot and benchmarks/aggregate.py share diffrl.maths.stats.align_curves and
    mean_ci_along_last_axis: the same curves give the same grid and band."""
    import aggregate

    from diffrl.artefacts import plotting
    from diffrl.maths.stats import CURVE_GRID_POINTS, align_curves, mean_ci_along_last_axis

    assert aggregate.GRID_POINTS == plotting.GRID_POINTS == CURVE_GRID_POINTS
    curves = [(np.array([0.0, 1.0, 2.0]), np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]])),
              (np.array([0.5, 1.5, 3.0]), np.array([5.0, 15.0, 30.0]))]
    grid, values = align_curves(curves)
    assert grid[0] == 0.5 and grid[-1] == 2.0 and values.shape == (CURVE_GRID_POINTS, 3)
    np.testing.assert_allclose(values[:, 0], grid)
    np.testing.assert_allclose(values[:, 2], 10 * grid)
    g2, v2 = aggregate.align([(x, y[:, 0] if y.ndim == 2 else y) for x, y in curves])
    np.testing.assert_array_equal(g2, grid)
    mean, lo, hi = mean_ci_along_last_axis(values, 0.95, 500, seed=3)
    lo_p, hi_p = plotting.bootstrap_mean_ci(values, 0.95, seed=3)
    assert np.all(lo <= mean) and np.all(mean <= hi) and lo_p.shape == lo.shape
    with pytest.raises(ValueError, match="no common x range"):
        align_curves([(np.array([0.0, 1.0]), np.array([1.0, 2.0])), (np.array([2.0, 3.0]), np.array([1.0, 2.0]))])
    nan_values = np.array([[1.0, np.nan, 3.0], [2.0, 2.0, 2.0]])
    m, lo1, hi1 = mean_ci_along_last_axis(nan_values, 0.95, 200)
    assert m[0] == 2.0 and np.all(np.isfinite(lo1)) and np.all(np.isfinite(hi1))
    single = mean_ci_along_last_axis(np.array([[1.0], [2.0]]))
    np.testing.assert_array_equal(single[1], single[2])
