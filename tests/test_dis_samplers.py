"""Oracle tests of the deterministic evaluation samplers (diffrl.policies.dis_samplers): reversal-ode
(E10) and noise-free (E11).

Under a linear control each is an affine map of x_0, and for a Gaussian target the control
minimising DIME's objective is a linear-quadratic problem, so their end points have closed forms
(below and tests/linear_chain.py). Monte-Carlo checks use fixed seeds and a 4-standard-error tolerance.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.policies import dis_chain, dis_samplers
from linear_chain import (D, ETA_OLD, PATHS, SIGMA0, exact_expected_ell, gaussian_kl_full, linear_control,
                          make_linear, marginals)


def sampler_affine_map(A, b, eta, kind, coef=1.0, sigma0=SIGMA0):
    """(G, h) with x_N = G x_0 + h for a deterministic sampler under the linear control (float64).

    reversal: x <- x + eta (A x + b) / 2;  noise-free: x <- x + eta (-x / sigma0^2 + c (A x + b)).
    """
    d = eta.shape[1]
    G, h = np.eye(d), np.zeros(d)
    for n in range(len(eta)):
        E = np.diag(eta[n])
        if kind == "reversal":
            R, r = np.eye(d) + E @ A[n] / 2, eta[n] * b[n] / 2
        else:
            R, r = np.eye(d) + E @ (coef * A[n] - np.eye(d) / sigma0**2), coef * eta[n] * b[n]
        G, h = R @ G, R @ h + r
    return G, h


def run_sampler(kind, control, eta, x0, coef=1.0, sigma0=SIGMA0):
    eta = jnp.asarray(eta, jnp.float32)
    if kind == "reversal":
        return dis_samplers.reversal_ode(control, eta, x0)
    return dis_samplers.noise_free_chain(control, eta, sigma0, x0, coef)


@pytest.mark.parametrize("kind, coef", [("reversal", 1.0), ("noise-free", 1.0), ("noise-free", 0.5)])
def test_deterministic_sampler_end_point_matches_its_affine_closed_form(kind, coef):
    """Under a linear control each deterministic sampler is an affine map of x_0, so from
    x_0 ~ p0 its end point is N(h, sigma0^2 G G^T): checked per sample, then in law."""
    A, b = make_linear(0)
    G, h = sampler_affine_map(A, b, ETA_OLD, kind, coef)
    x0 = SIGMA0 * jax.random.normal(jax.random.key(14), (PATHS, D))
    x = np.asarray(run_sampler(kind, linear_control(A, b), ETA_OLD, x0, coef), np.float64)
    np.testing.assert_allclose(x, np.asarray(x0, np.float64) @ G.T + h, atol=1e-4)
    cov = SIGMA0**2 * G @ G.T
    assert np.all(np.abs(x.mean(0) - h) < 4 * np.sqrt(np.diag(cov) / PATHS))
    np.testing.assert_allclose(np.cov(x.T), cov, atol=4 * math.sqrt(2 / PATHS) * np.max(np.diag(cov)))
    if kind == "noise-free" and coef == 1.0:  # the conditional-mean chain keeps the SDE's mean
        np.testing.assert_allclose(h, marginals(A, b, ETA_OLD)[0][-1], rtol=1e-12)


def dime_optimal_control(eta, sigma0, mu, var):
    """The affine control (A (N, 1, 1), b (N, 1)) minimising DIME's objective for the 1-D target
    pi = N(mu, var) on x_N: J = E_P[ell] - E_P[log pi(x_N)] = KL(P || Q), Q = pi(x_N) prod_n B_n.

    Dynamic programming: with cost-to-go V_{n+1}(y) = P y^2 / 2 - q y + const and the forward
    mean u = k x + eta f (k = 1 - eta / sigma0^2), step n costs E[log F_n - log B_n | x_n] =
    -1/2 + ((x - k u)^2 + 2 eta k^2) / (4 eta); minimising it plus E V_{n+1}(u + noise) over u
    gives u = (k x + 2 eta q) / D, D = k^2 + 2 eta P, and V_n with P / D, k q / D. So
    f = a x + b, a = k (1/D - 1) / eta, b = 2 q / D. Kernels are Gaussian and log-densities
    quadratic (a linear-quadratic problem), so this affine control is optimal among all controls.
    """
    P, q = 1.0 / var, mu / var
    a, b = np.zeros(len(eta)), np.zeros(len(eta))
    for n in reversed(range(len(eta))):
        e = float(eta[n, 0])
        k = 1.0 - e / sigma0**2
        D = k * k + 2.0 * e * P
        a[n], b[n] = k * (1.0 / D - 1.0) / e, 2.0 * q / D
        P, q = P / D, k * q / D
    return a[:, None, None], b[:, None]


def dime_objective(A, b, eta, sigma0, mu, var):
    """J = E[ell] + E[-log pi(x_N)] in closed form (E[ell] as tested above)."""
    m, v = (z[-1] for z in marginals(A, b, eta, sigma0))
    neg_log_pi = 0.5 * ((v[0, 0] + (m[0] - mu) ** 2) / var + math.log(2 * math.pi * var))
    return exact_expected_ell(A, b, eta, sigma0) + neg_log_pi


def end_points(A, b, eta, sigma0):
    """(mean, variance) of x_N under the SDE, reversal-ode and noise-free (c = 1), 1-D closed forms."""
    m, v = (z[-1] for z in marginals(A, b, eta, sigma0))
    out = {"sde": (m[0], v[0, 0])}
    for kind in ("reversal", "noise-free"):
        G, h = sampler_affine_map(A, b, eta, kind, sigma0=sigma0)
        out[kind] = (h[0], sigma0**2 * G[0, 0] ** 2)
    return out


DIME_SIGMA0 = 2.5
# DIME's schedule: N = 8, cosine schedule, dt = 1/8, friction 1 -> sum eta = 0.559 = 0.089 sigma0^2
DIME_ETA = np.asarray(dis_chain.step_sizes(jnp.float32(1 / 8), jnp.ones(1), dis_chain.cosine_schedule(8)),
                      np.float64)


@pytest.mark.parametrize("mu, std, ratio", [(0.5, 0.3, 4.21), (0.0, 1.0, 1.63), (0.0, 0.1, 5.92)])
def test_reversal_ode_variance_at_the_dime_optimum_of_dimes_schedule(mu, std, ratio):
    """The figures of dis_chain's docstring: at DIME's schedule the DIME-optimal control leaves
    the reversal-ode's end-point variance `ratio` times the SDE's."""
    assert DIME_ETA.sum() == pytest.approx(0.559, abs=1e-3)
    assert DIME_ETA.sum() / DIME_SIGMA0**2 == pytest.approx(0.089, abs=1e-3)
    A, b = dime_optimal_control(DIME_ETA, DIME_SIGMA0, mu, std**2)
    J = dime_objective(A, b, DIME_ETA, DIME_SIGMA0, mu, std**2)
    for n in range(8):  # the oracle is the optimum: every one-coordinate move raises J
        for delta in (0.05, -0.05):
            bump = delta * (np.arange(8) == n)
            assert dime_objective(A + bump[:, None, None], b, DIME_ETA, DIME_SIGMA0, mu, std**2) > J
            assert dime_objective(A, b + bump[:, None], DIME_ETA, DIME_SIGMA0, mu, std**2) > J
    # ... and it cannot reach 0: J >= KL(p0 || q_0), q_0 the target run back through B_n (E5)
    mq, vq = mu, std**2
    for n in reversed(range(8)):
        k = 1 - DIME_ETA[n, 0] / DIME_SIGMA0**2
        mq, vq = k * mq, k * k * vq + 2 * DIME_ETA[n, 0]
    kl_prior = gaussian_kl_full(np.zeros(1), np.eye(1) * DIME_SIGMA0**2, np.array([mq]), np.eye(1) * vq)
    assert J >= kl_prior > 0.5
    ends = end_points(A, b, DIME_ETA, DIME_SIGMA0)
    assert ends["reversal"][1] / ends["sde"][1] == pytest.approx(ratio, abs=0.01)
    assert ends["noise-free"][0] == pytest.approx(ends["sde"][0], abs=1e-12)  # c = 1: same mean
    assert ends["noise-free"][1] < ends["sde"][1]  # ... but without the variance the noise adds
    if std == 0.3:  # the docstring's numbers for this target
        assert ends["sde"] == pytest.approx((0.466, 0.154), abs=1e-3)
        assert ends["reversal"] == pytest.approx((0.353, 0.648), abs=1e-3)
        assert ends["noise-free"][1] == pytest.approx(0.034, abs=1e-3)
        assert (mq, vq) == pytest.approx((0.457, 1.114), abs=1e-3)


def test_the_dime_schedule_case_holds_for_the_float32_samplers():
    """Monte Carlo through the library's own chains for the N(0.5, 0.3^2) target: the SDE and
    the reversal ODE reach the closed-form end points the test above compares."""
    A, b = dime_optimal_control(DIME_ETA, DIME_SIGMA0, 0.5, 0.09)
    control, eta = linear_control(A, b), jnp.asarray(DIME_ETA, jnp.float32)
    noise = dis_chain.draw_noise(jax.random.key(15), 8, (PATHS,), 1)
    sde = np.asarray(dis_chain.sample_chain(control, eta, DIME_SIGMA0, noise).x_final[:, 0], np.float64)
    ode = np.asarray(dis_samplers.reversal_ode(control, eta, DIME_SIGMA0 * noise[0])[:, 0], np.float64)
    ends = end_points(A, b, DIME_ETA, DIME_SIGMA0)
    for x, (m, v) in ((sde, ends["sde"]), (ode, ends["reversal"])):
        assert abs(x.mean() - m) < 4 * math.sqrt(v / PATHS)
        assert abs(x.var() - v) < 4 * math.sqrt(2 / PATHS) * v


@pytest.mark.parametrize("sigma0, total, steps, ratio", [(1.0, 6.0, 6000, 1.0), (2.5, 0.559, 800, 4.29)])
def test_reversal_ode_is_exact_only_when_the_reference_mixes(sigma0, total, steps, ratio):
    """DIME-optimal control, target N(0.5, 0.3^2), uniform steps. With sum eta = 6 sigma0^2 the
    reference forgets its start, q_0 ~ p0, relation (R) holds for the chain, and reversal-ode
    has the SDE's end point up to Euler error; with DIME's sigma0 and total time (0.089 sigma0^2)
    the gap stays with 800 steps (4.29 against 4.21 at N = 8): it is not a discretisation error."""
    eta = np.full((steps, 1), total / steps)
    A, b = dime_optimal_control(eta, sigma0, 0.5, 0.09)
    ends = end_points(A, b, eta, sigma0)
    assert ends["reversal"][1] / ends["sde"][1] == pytest.approx(ratio, abs=0.01)
    if ratio == 1.0:
        assert ends["reversal"][0] == pytest.approx(ends["sde"][0], abs=1e-3)
        assert ends["sde"] == pytest.approx((0.5, 0.09), abs=2e-3)  # and both reach the target


def test_reversal_ode_transports_a_path_that_satisfies_the_reversal_relation():
    """When the control is built from the chain's own marginal scores, relation (R) holds and
    reversal-ode is the chain's probability-flow ODE (dis_samplers.reversal_ode's derivation).

    In u = cumulative eta, the SDE dx = (grad log p0 + f) du + sqrt(2) dW with
    f(x, u) = 2(grad log p_u - grad log p0) and Gaussian p_u = N(m(u), v(u)) is consistent
    iff m' = m / sigma0^2, v' = 2 (v / sigma0^2 - 1). reversal-ode must carry mean and std
    (two points, the map being affine) to m(U), sqrt(v(U)); the noise-free chain must not.
    """
    sigma0, m0, v0, total_u, steps = 1.0, 0.5, 0.5, 0.25, 400
    u = np.arange(steps) * total_u / steps
    m = m0 * np.exp(u / sigma0**2)
    v = sigma0**2 + (v0 - sigma0**2) * np.exp(2 * u / sigma0**2)
    gain, offset = jnp.asarray(2 * (-1 / v + 1 / sigma0**2), jnp.float32), jnp.asarray(2 * m / v, jnp.float32)
    control = lambda x, n: gain[n] * x + offset[n]
    eta = jnp.full((steps, 1), total_u / steps, jnp.float32)
    m_end = m0 * math.exp(total_u / sigma0**2)
    sd_end = math.sqrt(sigma0**2 + (v0 - sigma0**2) * math.exp(2 * total_u / sigma0**2))
    x0 = jnp.array([[m0], [m0 + math.sqrt(v0)]], jnp.float32)
    xN = np.asarray(dis_samplers.reversal_ode(control, eta, x0))[:, 0]
    assert xN[0] == pytest.approx(m_end, abs=2e-3)  # Euler error O(eta) ~ 1e-3
    assert xN[1] - xN[0] == pytest.approx(sd_end, abs=2e-3)
    # the SDE chain with the same f has (up to Euler error) the same marginal: exact recursion
    mean, var = m0, v0
    for n in range(steps):
        a = 1 + (total_u / steps) * (-1 / sigma0**2 + float(gain[n]))
        mean, var = a * mean + (total_u / steps) * float(offset[n]), a * a * var + 2 * total_u / steps
    assert mean == pytest.approx(m_end, abs=5e-3) and math.sqrt(var) == pytest.approx(sd_end, abs=5e-3)
    for coef in (0.5, 1.0):
        xc = np.asarray(dis_samplers.noise_free_chain(control, eta, sigma0, x0, coef))[:, 0]
        assert abs(xc[0] - m_end) + abs(xc[1] - xc[0] - sd_end) > 0.05


def test_reversal_ode_is_deterministic_and_keeps_prior_with_zero_control():
    zero = lambda x, n: jnp.zeros_like(x)
    eta = jnp.asarray(ETA_OLD, jnp.float32)
    x0 = SIGMA0 * jax.random.normal(jax.random.key(13), (PATHS, D))
    out = dis_samplers.reversal_ode(zero, eta, x0)
    np.testing.assert_array_equal(out, dis_samplers.reversal_ode(zero, eta, x0))
    x = np.asarray(out, np.float64)
    assert np.all(np.abs(x.mean(0)) < 4 * SIGMA0 / math.sqrt(PATHS))
    np.testing.assert_allclose(x.std(0), SIGMA0, atol=4 * SIGMA0 / math.sqrt(2 * PATHS))
    # the noise-free chain contracts towards 0 instead (it drops the noise that keeps p0)
    contracted = np.asarray(dis_samplers.noise_free_chain(zero, eta, SIGMA0, x0, 1.0)).std(0)
    assert np.all(contracted < 0.8 * SIGMA0)
