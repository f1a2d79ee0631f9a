"""Oracle tests of the moment-matched action KL (E12, diffrl.policies.dis_action_kl): unbiased for
two Gaussians and for linear chains (closed forms: tests/linear_chain.py), its closed-form distribution
under a pure mean shift, and its refusals. Monte-Carlo checks use fixed seeds and a 4-standard-error
tolerance.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.policies import dis_action_kl, dis_chain
from linear_chain import D, ETA_NEW, ETA_OLD, N, SIGMA0, exact_trajectory_kl, linear_control, make_linear, marginals


K_PRESET = 8  # the dime preset's reppo.kl_samples
STATES = 50_000  # independent states, each estimated from K_PRESET old and new end points


def _exact_marginal_kl(old, new):
    """Per-dimension KL of the exact end-point marginals of two linear chains (float64), summed."""
    (m_o, c_o), (m_n, c_n) = ((z[0][-1], z[1][-1]) for z in (marginals(*old, ETA_OLD), marginals(*new, ETA_NEW)))
    v_o, v_n = np.diag(c_o), np.diag(c_n)
    return 0.5 * (np.log(v_n / v_o) + (v_o + (m_o - m_n) ** 2) / v_n - 1)


def _assert_unbiased(est, exact):
    """Mean over states within 4 standard errors of the exact KL, and within 5 % of it."""
    est = np.asarray(est, np.float64)
    se = est.std() / math.sqrt(est.size)
    assert abs(est.mean() - exact) < 4 * se, (est.mean(), exact, se)
    assert est.mean() == pytest.approx(exact, rel=0.05)


@pytest.mark.parametrize("shift, scale_new, rho", [(0.3, 1.0, 1.0), (0.3, 1.2, 0.95), (0.5, 0.8, 0.6), (0.0, 1.3, 0.9)])
def test_action_kl_is_unbiased_for_two_gaussians_at_the_preset_k(shift, scale_new, rho):
    """(E12) at the dime preset's K = 8, per state, against KL(N(0, 1) || N(shift, scale^2)) in closed
    form: the old end points z ~ N(0, 1), the new ones shift + scale (rho z + sqrt(1 - rho^2) w) (common
    noise: rho = 1 is a pure change of location and scale). The plug-in of sample moments, which the
    estimator replaces, is biased by 1.4-2.5x at this K (and by (K - 1) / (K - 3) = 3x at K = 4)."""
    rng = np.random.default_rng(3)
    z, w = rng.normal(size=(2, K_PRESET, STATES, 1))
    x_new = shift + scale_new * (rho * z + math.sqrt(1 - rho**2) * w)
    est = dis_action_kl.moment_matched_kl(jnp.asarray(z, jnp.float32), jnp.asarray(x_new, jnp.float32))
    exact = 0.5 * (2 * math.log(scale_new) + (1 + shift**2) / scale_new**2 - 1)
    assert est.shape == (STATES,)
    _assert_unbiased(est, exact)


def test_action_kl_of_a_pure_mean_shift_has_its_closed_form_distribution():
    """A pure mean shift delta under common noise: the estimate is exactly (K - 3) delta^2 / (2 s^2 (K - 1))
    per dimension, s^2 ~ chi2_{K-1} / (K - 1), so its quantiles are chi-square quantiles (a bounded
    variance: relative variance 2 / (K - 5) = 0.67 at K = 8), unlike the plug-in's 1 / s^2 with
    K - 1 = 3 degrees of freedom at K = 4 (no finite variance)."""
    from scipy import stats

    delta, nu = 0.4, K_PRESET - 1
    x_old = np.random.default_rng(4).normal(size=(K_PRESET, STATES, 1))
    est = np.asarray(dis_action_kl.moment_matched_kl(jnp.asarray(x_old, jnp.float32),
                                                     jnp.asarray(x_old + delta, jnp.float32)))
    exact = 0.5 * delta**2
    _assert_unbiased(est, exact)
    for q in (0.01, 0.5, 0.99):  # est = exact (K - 3) / chi2_{K-1}: the (1 - q) quantile of chi2 gives est's q
        closed = exact * (K_PRESET - 3) / stats.chi2.ppf(1 - q, nu)
        assert np.quantile(est, q) == pytest.approx(closed, rel=0.03)
    assert est.var() / exact**2 == pytest.approx(2 / (nu - 4), rel=0.25)  # sample variance: heavy tail, loose


def test_action_kl_is_unbiased_for_a_linear_chain_at_the_preset_k():
    """(E12) at K = 8 on end points of the DIME chain (E4) with linear controls, whose marginals are
    Gaussian with the closed forms of :func:`marginals` (the new chain's control and step sizes moved):
    the mean of the per-state estimates is the exact moment-matched KL; 0 when the chains agree; each
    dimension's exact marginal KL is at most the trajectory KL (E8), by data processing."""
    old, new = make_linear(2), make_linear(2)
    new = (new[0] + 0.2 * np.random.default_rng(9).normal(size=new[0].shape), new[1] + 0.6)
    noise = dis_chain.draw_noise(jax.random.key(21), N, (K_PRESET, STATES), D)
    ends = {name: dis_chain.sample_chain(linear_control(A, b), jnp.asarray(eta, jnp.float32), SIGMA0, noise).x_final
            for name, (A, b), eta in (("old", old, ETA_OLD), ("new", new, ETA_NEW))}
    exact = _exact_marginal_kl(old, new)
    assert exact.sum() > 0.05
    _assert_unbiased(dis_action_kl.moment_matched_kl(ends["old"], ends["new"]), exact.sum())
    for d in range(D):
        _assert_unbiased(dis_action_kl.moment_matched_kl(ends["old"][..., d:d + 1], ends["new"][..., d:d + 1]), exact[d])
        assert exact[d] <= exact_trajectory_kl(old, new, ETA_OLD, ETA_NEW)
    assert float(jnp.max(jnp.abs(dis_action_kl.moment_matched_kl(ends["old"], ends["old"])))) < 1e-6


def test_action_kl_refuses_too_few_end_points_and_mismatched_shapes():
    x = jnp.zeros((5, 3, D))
    with pytest.raises(ValueError, match=">= 6 end points"):
        dis_action_kl.moment_matched_kl(x, x)
    with pytest.raises(ValueError, match="same shape"):
        dis_action_kl.moment_matched_kl(jnp.zeros((6, 3, D)), jnp.zeros((6, 2, D)))
