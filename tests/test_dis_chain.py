"""Oracle tests of the DIME chain math (diffrl.policies.dis_chain): schedule, squashing, the chain's
marginals, replay, the pseudo log-probability (E7) and the trajectory KL (E8) and its estimators.

The chain under a linear control has closed forms (tests/linear_chain.py). Monte-Carlo checks
use fixed seeds and a 4-standard-error tolerance (two-sided false-alarm rate ~6e-5 under
the CLT if the code were right but the seed unlucky).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.policies import dis_chain
from linear_chain import (D, ETA_NEW, ETA_OLD, N, PATHS, SIGMA0, exact_expected_ell, exact_trajectory_kl, gaussian_kl_full,
                          linear_control, make_linear, marginals)


def test_cosine_schedule_matches_formula():
    s, m = 0.008, 0.001
    got = np.asarray(dis_chain.cosine_schedule(8, s, m))
    for n in range(8):
        t = (8 - n) / 8
        want = (1 - m) * math.cos(0.5 * math.pi * (1 + s - t) / (1 + s)) ** 2 + m
        assert got[n] == pytest.approx(want, rel=1e-5)
    assert np.all(np.diff(got) < 0) and got[0] > 0.99


def test_gaussian_kl_diag_matches_scalar_formula_with_different_variances():
    m1, v1, m2, v2 = [0.3, -1.0], [0.5, 2.0], [1.1, -0.2], [1.7, 0.4]
    want = sum(0.5 * (math.log(b / a) + (a + (x - y) ** 2) / b - 1) for x, a, y, b in zip(m1, v1, m2, v2))
    got = dis_chain.gaussian_kl_diag(*(jnp.array(z) for z in (m1, v1, m2, v2)))
    assert float(got) == pytest.approx(want, rel=1e-5)
    # equal means: only the log-variance terms remain, and they are strictly positive
    assert float(dis_chain.gaussian_kl_diag(jnp.array(m1), jnp.array(v1), jnp.array(m1), jnp.array(v2))) > 0.1


@pytest.mark.parametrize("kind", ["tanh", "erf"])
def test_squash_log_det_matches_autodiff_and_stays_finite(kind):
    k = 0.3
    x = jnp.linspace(-6.0, 6.0, 41)
    got = jax.vmap(lambda z: dis_chain.squash_log_det(z[None], kind, k))(x)
    # float64 derivative: d tanh = 1 / cosh^2, d erf(kx) = 2k / sqrt(pi) exp(-k^2 x^2)
    deriv = (lambda z: 1 / math.cosh(z) ** 2) if kind == "tanh" else (
        lambda z: 2 * k / math.sqrt(math.pi) * math.exp(-(k * z) ** 2))
    np.testing.assert_allclose(got, [math.log(deriv(float(z))) for z in x], rtol=1e-5, atol=1e-5)
    # and the squash itself is the function whose derivative this is (autodiff, mid-range)
    grads = jax.vmap(jax.grad(lambda z: dis_chain.squash(z, kind, k)))(x[10:31])
    np.testing.assert_allclose(got[10:31], jnp.log(grads), rtol=1e-4, atol=1e-4)
    far = dis_chain.squash_log_det(jnp.array([40.0, -40.0]), kind, k)
    assert jnp.isfinite(far)
    if kind == "tanh":  # log(1 - tanh^2 x) -> 2 log 2 - 2|x|
        assert float(far) == pytest.approx(2 * (2 * math.log(2) - 80.0), rel=1e-6)


def _chains(A, b, eta, seed, paths=PATHS, return_path=False):
    noise = dis_chain.draw_noise(jax.random.key(seed), N, (paths,), D)
    return dis_chain.sample_chain(linear_control(A, b), jnp.asarray(eta, jnp.float32), SIGMA0, noise, return_path), noise


def test_sampler_marginal_matches_linear_gaussian_recursion():
    A, b = make_linear(0)
    chain, _ = _chains(A, b, ETA_OLD, seed=1)
    means, covs = marginals(A, b, ETA_OLD)
    x = np.asarray(chain.x_final, np.float64)
    se_mean = np.sqrt(np.diag(covs[-1]) / PATHS)
    assert np.all(np.abs(x.mean(0) - means[-1]) < 4 * se_mean)
    # sample covariance entries: SE <= sqrt(2/PATHS) * max variance
    tol = 4 * math.sqrt(2 / PATHS) * np.max(np.diag(covs[-1]))
    np.testing.assert_allclose(np.cov(x.T), covs[-1], atol=tol)


def test_replay_from_noise_is_exact_and_from_path_matches():
    control, eta = linear_control(*make_linear(0)), jnp.asarray(ETA_OLD, jnp.float32)
    noise = dis_chain.draw_noise(jax.random.key(2), N, (64,), D)
    run = jax.jit(lambda z: dis_chain.sample_chain(control, eta, SIGMA0, z, return_path=True))
    chain, again = run(noise), run(noise)
    np.testing.assert_array_equal(again.x_final, chain.x_final)
    np.testing.assert_array_equal(again.log_weight, chain.log_weight)
    assert chain.path.shape == (N + 1, 64, D)
    np.testing.assert_array_equal(chain.path[-1], chain.x_final)
    from_path = dis_chain.path_log_weight(control, eta, SIGMA0, chain.path)
    np.testing.assert_allclose(from_path, chain.log_weight, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("scale", [0.8, 0.0])
def test_pseudo_log_prob_mean_is_exact_and_bounds_entropy(scale):
    """scale 0.8: a random control, loose bound; scale 0: f = 0 (b = 0), where forward and
    backward chains nearly reverse each other and the bound is tight to ~1e-3 nats."""
    A, b = make_linear(3, scale=scale)
    b = b * (scale > 0)
    chain, _ = _chains(A, b, ETA_OLD, seed=4)
    ell, running_cost = dis_chain.pseudo_log_prob(chain, SIGMA0, None)
    ell = np.asarray(ell, np.float64)
    se = ell.std() / math.sqrt(PATHS)
    expected = exact_expected_ell(A, b, ETA_OLD)
    assert abs(ell.mean() - expected) < 4 * se
    np.testing.assert_allclose(ell - running_cost, dis_chain.prior_log_prob(chain.x0, SIGMA0), rtol=1e-6)
    entropy = 0.5 * np.linalg.slogdet(2 * math.pi * math.e * marginals(A, b, ETA_OLD)[1][-1])[1]
    assert -expected <= entropy  # DIME's bound, exactly
    assert -ell.mean() < entropy + 4 * se  # and as estimated by the sampler
    if scale == 0:
        assert entropy + expected < 0.01


def test_trajectory_kl_estimators_match_exact_and_bound_marginal_kl():
    old, new = make_linear(5), make_linear(6)
    noise = dis_chain.draw_noise(jax.random.key(7), N, (PATHS,), D)
    closed, sampled = dis_chain.trajectory_kl(
        linear_control(*old), linear_control(*new),
        jnp.asarray(ETA_OLD, jnp.float32), jnp.asarray(ETA_NEW, jnp.float32), SIGMA0, noise)
    exact = exact_trajectory_kl(old, new, ETA_OLD, ETA_NEW)
    for est in (np.asarray(closed, np.float64), np.asarray(sampled, np.float64)):
        assert abs(est.mean() - exact) < 4 * est.std() / math.sqrt(PATHS)
    mo, Co = marginals(*old, ETA_OLD)
    mn, Cn = marginals(*new, ETA_NEW)
    marginal = gaussian_kl_full(mo[-1], Co[-1], mn[-1], Cn[-1])
    assert marginal <= exact
    assert float(jnp.mean(closed)) - 4 * float(jnp.std(closed)) / math.sqrt(PATHS) > marginal


def test_trajectory_kl_closed_form_matches_plain_loop_with_log_variance_terms():
    old, new = make_linear(8), make_linear(9)
    noise = dis_chain.draw_noise(jax.random.key(10), N, (3,), D)
    closed, _ = dis_chain.trajectory_kl(
        linear_control(*old), linear_control(*new),
        jnp.asarray(ETA_OLD, jnp.float32), jnp.asarray(ETA_NEW, jnp.float32), SIGMA0, noise)
    z = np.asarray(noise, np.float64)
    for path in range(3):
        x, total = SIGMA0 * z[0, path], 0.0
        for n in range(N):
            mu = []
            for (A, b), eta in ((old, ETA_OLD[n]), (new, ETA_NEW[n])):
                mu.append(x + eta * (-x / SIGMA0**2 + A[n] @ x + b[n]))
            for i in range(D):
                v1, v2 = 2 * ETA_OLD[n, i], 2 * ETA_NEW[n, i]
                total += 0.5 * (math.log(v2 / v1) + (v1 + (mu[0][i] - mu[1][i]) ** 2) / v2 - 1)
            x = mu[0] + np.sqrt(2 * ETA_OLD[n]) * z[n + 1, path]
        assert float(closed[path]) == pytest.approx(total, rel=1e-4)


def test_trajectory_kl_gradient_only_through_new_and_zero_at_equality():
    old = make_linear(11)
    eta = jnp.asarray(ETA_OLD, jnp.float32)
    noise = dis_chain.draw_noise(jax.random.key(12), N, (16,), D)

    @jax.jit
    def kl(A_old, A_new):  # (closed form, sampled) means
        out = dis_chain.trajectory_kl(linear_control(A_old, old[1]), linear_control(A_new, old[1]),
                                      eta, eta, SIGMA0, noise)
        return jnp.stack([jnp.mean(out[0]), jnp.mean(out[1])])

    A = jnp.asarray(old[0], jnp.float32)
    assert float(jnp.max(jnp.abs(kl(A, A)))) < 1e-5
    g_old, g_new = jax.jit(jax.jacrev(kl, argnums=(0, 1)))(A, A + 0.1)  # (2, N, D, D) each
    assert float(jnp.max(jnp.abs(g_old))) == 0.0
    assert float(jnp.min(jnp.max(jnp.abs(g_new), axis=(1, 2, 3)))) > 1e-3


def test_stored_path_kl_is_the_trajectory_kl_of_the_path_the_old_chain_took():
    """Along the path that the old chain simulated from ``noise`` (as a rollout stores it), the
    one-call estimator equals trajectory_kl on the same noise (same old path) and, over many paths,
    the exact trajectory KL; it needs the new control only, evaluated on all steps at once."""
    old, new = make_linear(5), make_linear(6)
    eta_old, eta_new = jnp.asarray(ETA_OLD, jnp.float32), jnp.asarray(ETA_NEW, jnp.float32)
    noise = dis_chain.draw_noise(jax.random.key(7), N, (PATHS,), D)
    path = dis_chain.sample_chain(linear_control(*old), eta_old, SIGMA0, noise, return_path=True).path
    calls = []

    def all_steps(A, b):  # the linear control on every step at once: x (N, PATHS, D), n (N, 1)
        A, b = jnp.asarray(A, jnp.float32), jnp.asarray(b, jnp.float32)

        def control(x, n):
            calls.append(x.shape)
            return jnp.einsum("...ij,...j->...i", A[n], x) + b[n]
        return control

    closed, sampled = dis_chain.stored_path_kl(all_steps(*new), eta_old, eta_new, SIGMA0, path, noise)
    assert calls == [(N, PATHS, D)]
    ref_closed, ref_sampled = dis_chain.trajectory_kl(
        linear_control(*old), linear_control(*new), eta_old, eta_new, SIGMA0, noise)
    np.testing.assert_allclose(closed, ref_closed, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(sampled, ref_sampled, rtol=1e-4, atol=1e-4)
    exact = exact_trajectory_kl(old, new, ETA_OLD, ETA_NEW)
    for est in (np.asarray(closed, np.float64), np.asarray(sampled, np.float64)):
        assert abs(est.mean() - exact) < 4 * est.std() / math.sqrt(PATHS)
    same, _ = dis_chain.stored_path_kl(all_steps(*old), eta_old, eta_old, SIGMA0, path, noise)
    assert float(jnp.max(jnp.abs(same))) < 1e-4


def test_fresh_path_kl_is_trajectory_kl_in_two_passes_with_its_gradient():
    """The two-pass form (old chain alone, then the new control on all its states in one call) gives
    trajectory_kl's values from the same noise, and the same gradient w.r.t. the new control and
    step sizes (none w.r.t. the old); the new control is called once, on (N, paths, D)."""
    old, new = make_linear(5), make_linear(6)
    eta_old, eta_new = jnp.asarray(ETA_OLD, jnp.float32), jnp.asarray(ETA_NEW, jnp.float32)
    noise = dis_chain.draw_noise(jax.random.key(13), N, (64,), D)
    calls = []

    def control(A, b, record=False):
        def f(x, n):
            if record:
                calls.append(x.shape)
            return jnp.einsum("...ij,...j->...i", A[n], x) + b[n]
        return f

    def both(A_old, A_new, eta_n):
        b = jnp.asarray(old[1], jnp.float32)
        two = dis_chain.fresh_path_kl(control(A_old, b), control(A_new, b, record=True), eta_old, eta_n,
                                      SIGMA0, noise)
        seq = dis_chain.trajectory_kl(control(A_old, b), control(A_new, b), eta_old, eta_n, SIGMA0, noise)
        return jnp.stack([jnp.mean(two[0]), jnp.mean(two[1]), jnp.mean(seq[0]), jnp.mean(seq[1])])

    A_old, A_new = jnp.asarray(old[0], jnp.float32), jnp.asarray(new[0], jnp.float32)
    values = both(A_old, A_new, eta_new)
    assert calls == [(N, 64, D)]
    np.testing.assert_allclose(values[:2], values[2:], rtol=1e-5)
    exact = exact_trajectory_kl(old, new, ETA_OLD, ETA_NEW)
    assert float(values[0]) == pytest.approx(exact, rel=0.5)  # 64 paths: the estimate, roughly
    jac = jax.jit(jax.jacrev(both, argnums=(0, 1, 2)))(A_old, A_new, eta_new)
    g_old, g_new, g_eta = (np.asarray(j) for j in jac)
    assert np.max(np.abs(g_old)) == 0.0
    for g in (g_new, g_eta):
        assert np.max(np.abs(g[:2])) > 1e-3
        np.testing.assert_allclose(g[:2], g[2:], rtol=1e-4, atol=1e-6)
