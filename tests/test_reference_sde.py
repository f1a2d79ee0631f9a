"""Oracle tests of AMDP's reference SDE, bridge, erf squashing and samplers (reference_sde.py)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.policies.reference_sde import (
    ReferenceSDE,
    bridge_mean_std,
    entropy_lower_bound,
    erf_squash,
    probability_flow_ode,
    sample_bridge,
    simulate_controlled,
    time_grid,
)

REF = ReferenceSDE(0.01, 2.0)


def zero_control(x, t):
    return jnp.zeros_like(x)


def gaussian_optimal_control(m, v, ref=REF):
    """Closed-form optimal control for the terminal target pi*_x = N(m, v) (per dim).

    The optimal process is the reciprocal one, with marginals p_t = N(rho m, rho^2 v + h^2 (1 - rho))
    (bridge mixture); u* = sigma_t (grad log p_t - grad log p_t^ref) simplifies to
    sigma_t [m + x (v / h1^2 - 1)] / (h1^2 D_t), D_t = rho v / h1^2 + 1 - rho (finite at t = 0).
    """
    h1_sq = ref.terminal_std**2

    def control(x, t):
        rho = ref.marginal_var(t) / h1_sq
        denom = h1_sq * (rho * v / h1_sq + 1.0 - rho)
        return ref.sigma(t) * (m + x * (v / h1_sq - 1.0)) / denom

    kl = 0.5 * (v / h1_sq + m**2 / h1_sq - 1.0 - math.log(v / h1_sq))  # KL(N(m, v) || N(0, h1^2))
    return control, kl


def ks_uniform(a):
    """Kolmogorov-Smirnov distance of 1-D samples in (-1, 1) to Uniform(-1, 1)."""
    a = np.sort(np.asarray(a, np.float64))
    n = a.size
    cdf = (a + 1.0) / 2.0
    return max(np.max(np.arange(1, n + 1) / n - cdf), np.max(cdf - np.arange(n) / n))


def test_schedule_closed_form_matches_quadrature():
    # h(t)^2 = int_0^t sigma_u^2 du (R3), checked by a fine trapezoid rule (error ~1e-7).
    for t in (0.05, 0.3, 0.7, 1.0):
        u = np.linspace(0.0, t, 200_001)
        sig = np.asarray(REF.sigma(jnp.asarray(u)), np.float64)
        quad = np.trapezoid(sig**2, u)
        assert float(REF.marginal_var(t)) == pytest.approx(quad, rel=1e-4)
    assert REF.terminal_std == pytest.approx(2.0 * math.sqrt(1.0 - 200.0**-2), rel=1e-12)
    assert float(REF.marginal_var(1.0)) == pytest.approx(REF.terminal_std**2, rel=1e-6)
    # exact step variances telescope to h(1)^2
    grid = time_grid(16)
    sbar = REF.step_sigma(grid[:-1], grid[1:])
    assert float(jnp.sum(sbar**2 / 16)) == pytest.approx(REF.terminal_std**2, rel=1e-5)
    with pytest.raises(ValueError):
        ReferenceSDE(2.0, 0.01)


def test_squashed_reference_end_point_is_uniform():
    # u = 0: X_1 ~ N(0, h(1)^2) exactly (exact increments), erf(k X_1) ~ U(-1, 1)^d (R6).
    n, d = 20_000, 3
    chain = simulate_controlled(zero_control, REF, 16, jax.random.PRNGKey(0), (n, d))
    a = erf_squash(chain.x1, REF.erf_scale)
    for i in range(d):
        # 99.9 % critical value of the one-sample KS statistic: 1.95 / sqrt(n) = 0.0138.
        assert ks_uniform(a[:, i]) < 1.95 / math.sqrt(n)
    # a wrong scale (k from sigma_max / 2) is far from uniform: the test has power
    assert ks_uniform(erf_squash(chain.x1[:, 0], 2.0 * REF.erf_scale)) > 0.05


def test_zero_control_entropy_bound_is_exact():
    # With u = 0, C = 0 and the bound d log 2 - C equals H(Uniform(-1, 1)^d) = d log 2.
    chain = simulate_controlled(zero_control, REF, 8, jax.random.PRNGKey(1), (64, 4))
    np.testing.assert_allclose(chain.control_cost, 0.0)
    np.testing.assert_allclose(entropy_lower_bound(chain.control_cost, 4), 4 * math.log(2.0), rtol=1e-7)


def test_bridge_matches_simulated_reference_paths():
    # Regress X_{t_n} on X_1 over simulated reference paths: slope rho_t = h_t^2 / h_1^2 and
    # residual variance h_t^2 (1 - rho_t) (R8). Tolerances: 5 standard errors.
    n, steps = 40_000, 16
    chain = simulate_controlled(zero_control, REF, steps, jax.random.PRNGKey(2), (n, 1), return_path=True)
    x1 = np.asarray(chain.x1[:, 0], np.float64)
    for step in (1, 2, 4, 8, 12):
        t = step / steps
        xt = np.asarray(chain.path[step, :, 0], np.float64)
        slope = np.dot(x1, xt) / np.dot(x1, x1)
        resid = xt - slope * x1
        mean, std = bridge_mean_std(REF, jnp.asarray(t), jnp.ones((1,)))
        rho, var_cond = float(mean[0]), float(std[0]) ** 2
        slope_se = math.sqrt(var_cond / np.dot(x1, x1))
        assert abs(slope - rho) < 5 * slope_se, (t, slope, rho)
        var_se = var_cond * math.sqrt(2.0 / n)
        assert abs(resid.var() - var_cond) < 5 * var_se, (t, resid.var(), var_cond)


def test_sample_bridge_of_reference_end_points_has_reference_marginals():
    # X_1 ~ p_1^ref and X_t ~ bridge(0, X_1) => X_t ~ N(0, h_t^2): X_t / h_t is standard normal,
    # for continuous and for grid times.
    n = 50_000
    x1 = REF.terminal_std * jax.random.normal(jax.random.PRNGKey(3), (n, 2))
    for grid in (None, 16):
        t, xt = jax.jit(sample_bridge, static_argnums=(1, 3))(jax.random.PRNGKey(4), REF, x1, grid)
        assert t.shape == (n,) and xt.shape == (n, 2)
        t, xt = np.asarray(t, np.float64), np.asarray(xt, np.float64)
        assert t.min() >= 0.0 and t.max() < 1.0
        keep = t > 0  # t = 0 is the Dirac at 0
        h_t = REF.sigma_max * np.sqrt(-np.expm1(-2.0 * REF.log_ratio * t[keep]))
        z = xt[keep] / h_t[:, None]
        # var of a N(0,1) sample variance over ~1e5 numbers: sd 0.0045; 4 sd margin.
        assert abs(z.var() - 1.0) < 0.02 and abs(z.mean()) < 0.02
        if grid is not None:
            np.testing.assert_allclose(t * grid, np.round(t * grid), atol=1e-5)


def test_sampler_is_replayable_and_cost_matches_controls():
    control, _ = gaussian_optimal_control(0.5, 0.2)
    key = jax.random.PRNGKey(5)
    c1 = simulate_controlled(control, REF, 8, key, (10, 2), return_path=True)
    c2 = simulate_controlled(control, REF, 8, key, (10, 2))
    # The same draws (to float32 rounding: the two calls are separately compiled programs, which XLA
    # does not promise to round alike; on an AMD EPYC they differed by 9e-8).
    np.testing.assert_allclose(c1.x1, c2.x1, rtol=2e-6, atol=2e-6)
    assert c1.path.shape == (9, 10, 2) and c1.controls.shape == (8, 10, 2)
    np.testing.assert_allclose(c1.path[-1], c1.x1)
    cost = 0.5 * np.sum(np.asarray(c1.controls) ** 2, axis=(0, 2)) / 8
    np.testing.assert_allclose(c1.control_cost, cost, rtol=1e-5)
    # the controls are the control function evaluated on the path at t_n = n / N
    t = (jnp.arange(8) / 8)[:, None, None]
    np.testing.assert_allclose(c1.controls, control(c1.path[:-1], t), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m,v", [(0.8, 0.3), (1.5, 0.05)])
def test_optimal_control_reaches_target_and_control_cost_is_its_kl(m, v):
    # Closed-form u*: the chain's end point is N(m, v), and E[C] -> KL(N(m, v) || p_1^ref), the
    # Girsanov KL with factor 1/2 ||u||^2 (R5), tight at the optimum (reciprocal process).
    control, kl = gaussian_optimal_control(m, v)
    n = 40_000
    chain = jax.jit(lambda k: simulate_controlled(control, REF, 128, k, (n, 1)))(jax.random.PRNGKey(6))
    x = np.asarray(chain.x1[:, 0], np.float64)
    # Euler error at N = 128 is ~0.5 % on mean and ~1 % on var (measured: N=16 gives +3.5 %, +5 %);
    # sampling error sd: mean sqrt(v / n) <= 0.003, var v sqrt(2 / n) <= 0.7 %.
    assert x.mean() == pytest.approx(m, abs=0.02 * m + 4 * math.sqrt(v / n))
    assert x.var() == pytest.approx(v, rel=0.04)
    cost = float(jnp.mean(chain.control_cost))
    # The discrete cost is the exact KL of the discrete chains, >= KL of the end points
    # (data processing), and converges to the continuous KL (measured +4 % at N = 128).
    assert kl <= cost < 1.08 * kl
    # The full log-ratio C + M has the same mean: E[M] = 0.
    noise = np.asarray(chain.noise_term, np.float64)
    assert abs(noise.mean()) < 4 * noise.std() / math.sqrt(n)


@pytest.mark.parametrize("m,v", [(0.8, 0.3), (1.5, 0.05), (0.0, 0.01)])
def test_probability_flow_ode_reaches_optimal_target(m, v):
    # For the optimal control the PF-ODE (DDIM-type step + Heun) transports N(0, I) noise to
    # pi*_x = N(m, v). Measured at N = 32: mean exact, var within 1 %; allow 4 % (+ sampling 1 %).
    control, _ = gaussian_optimal_control(m, v)
    n = 20_000
    x = jax.jit(lambda k: probability_flow_ode(control, REF, 32, k, (n, 1)))(jax.random.PRNGKey(7))
    x = np.asarray(x[:, 0], np.float64)
    assert x.mean() == pytest.approx(m, abs=5 * math.sqrt(v / n) + 1e-3)
    assert x.var() == pytest.approx(v, rel=0.05)
    # deterministic given the key
    x2 = probability_flow_ode(control, REF, 32, jax.random.PRNGKey(7), (n, 1))
    np.testing.assert_allclose(np.asarray(x2[:, 0]), x, rtol=1e-5, atol=1e-6)
