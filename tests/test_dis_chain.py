"""Oracle tests of the DIME chain math (diffrl.policies.dis_chain).

With a control LINEAR in x, f_n(x) = A_n x + b_n, every transition of the chain (E4) is
affine-Gaussian, so the marginals of x_n, the exact trajectory KL (E8), the exact E[ell]
(E7) and the entropy of x_N are closed forms (numpy, float64, below); so are the end points of
the deterministic samplers (E10), (E11) (affine maps of x_0) and, for a Gaussian target, the
control minimising DIME's objective (a linear-quadratic problem). Monte-Carlo checks
use fixed seeds and a 4-standard-error tolerance (two-sided false-alarm rate ~6e-5 under
the CLT if the code were right but the seed unlucky).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.policies import dis_chain

jax.config.update("jax_platforms", "cpu")

D, N, SIGMA0 = 2, 4, 1.5
PATHS = 20_000


def make_linear(seed: int, scale: float = 0.4):
    rng = np.random.default_rng(seed)
    return scale * rng.normal(size=(N, D, D)), rng.normal(size=(N, D))


def linear_control(A, b):
    A, b = jnp.asarray(A, jnp.float32), jnp.asarray(b, jnp.float32)
    return lambda x, n: jnp.einsum("ij,...j->...i", A[n], x) + b[n]


def step_matrices(A, b, eta, sigma0=SIGMA0):
    """x_{n+1} = M_n x_n + c_n + N(0, diag(2 eta_n)) for the linear control (float64); eta: (N, D)."""
    eye = np.eye(eta.shape[1])[None]
    M = eye + eta[:, :, None] * (A - eye / sigma0**2)
    return M, eta * b


def marginals(A, b, eta, sigma0=SIGMA0):
    """Lists of exact means / covariances of x_0..x_N."""
    M, c = step_matrices(A, b, eta, sigma0)
    d = eta.shape[1]
    means, covs = [np.zeros(d)], [sigma0**2 * np.eye(d)]
    for n in range(len(eta)):
        means.append(M[n] @ means[-1] + c[n])
        covs.append(M[n] @ covs[-1] @ M[n].T + np.diag(2 * eta[n]))
    return means, covs


def gaussian_kl_full(m1, C1, m2, C2):
    C2inv = np.linalg.inv(C2)
    dm = m2 - m1
    return 0.5 * (np.trace(C2inv @ C1) + dm @ C2inv @ dm - len(m1)
                  + np.linalg.slogdet(C2)[1] - np.linalg.slogdet(C1)[1])


def exact_trajectory_kl(old, new, eta_old, eta_new):
    means, covs = marginals(*old, eta_old)
    M_o, c_o = step_matrices(*old, eta_old)
    M_n, c_n = step_matrices(*new, eta_new)
    total = 0.0
    for n in range(len(eta_old)):
        v_o, v_n = 2 * eta_old[n], 2 * eta_new[n]
        Dm, e = M_o[n] - M_n[n], c_o[n] - c_n[n]
        mean_diff = Dm @ means[n] + e
        quad = np.trace(np.diag(1 / v_n) @ Dm @ covs[n] @ Dm.T) + mean_diff @ (mean_diff / v_n)
        total += 0.5 * np.sum(np.log(v_n / v_o) + v_o / v_n - 1) + 0.5 * quad
    return total


def exact_expected_ell(A, b, eta, sigma0=SIGMA0):
    """E[ell] without squashing: E log p0(x0) + sum_n E[log F_n - log B_n]."""
    means, covs = marginals(A, b, eta, sigma0)
    M, _ = step_matrices(A, b, eta, sigma0)
    total = -0.5 * eta.shape[1] * (1 + math.log(2 * math.pi * sigma0**2))
    for n in range(len(eta)):
        var = 2 * eta[n]
        total += -0.5 * np.sum(1 + np.log(2 * math.pi * var))  # + E log F_n
        P = np.diag(1 - eta[n] / sigma0**2)  # residual r = x_n - P x_{n+1} under B_n
        cross = M[n] @ covs[n]  # Cov(x_{n+1}, x_n)
        cov_r = covs[n] - cross.T @ P - P @ cross + P @ covs[n + 1] @ P
        mean_r = means[n] - P @ means[n + 1]
        second = np.diag(cov_r) + mean_r**2
        total += 0.5 * np.sum(second / var + np.log(2 * math.pi * var))  # - E log B_n
    return total


ETA_OLD = np.array([[0.30, 0.25], [0.25, 0.20], [0.15, 0.12], [0.05, 0.04]])
ETA_NEW = ETA_OLD * np.array([1.3, 0.8])  # learned friction moved: variances differ


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


# -- deterministic samplers: reversal-ode (E10) and noise-free (E11) ---------------------------
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
        return dis_chain.reversal_ode(control, eta, x0)
    return dis_chain.noise_free_chain(control, eta, sigma0, x0, coef)


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
    ode = np.asarray(dis_chain.reversal_ode(control, eta, DIME_SIGMA0 * noise[0])[:, 0], np.float64)
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
    reversal-ode is the chain's probability-flow ODE (dis_chain.reversal_ode's derivation).

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
    xN = np.asarray(dis_chain.reversal_ode(control, eta, x0))[:, 0]
    assert xN[0] == pytest.approx(m_end, abs=2e-3)  # Euler error O(eta) ~ 1e-3
    assert xN[1] - xN[0] == pytest.approx(sd_end, abs=2e-3)
    # the SDE chain with the same f has (up to Euler error) the same marginal: exact recursion
    mean, var = m0, v0
    for n in range(steps):
        a = 1 + (total_u / steps) * (-1 / sigma0**2 + float(gain[n]))
        mean, var = a * mean + (total_u / steps) * float(offset[n]), a * a * var + 2 * total_u / steps
    assert mean == pytest.approx(m_end, abs=5e-3) and math.sqrt(var) == pytest.approx(sd_end, abs=5e-3)
    for coef in (0.5, 1.0):
        xc = np.asarray(dis_chain.noise_free_chain(control, eta, sigma0, x0, coef))[:, 0]
        assert abs(xc[0] - m_end) + abs(xc[1] - xc[0] - sd_end) > 0.05


def test_reversal_ode_is_deterministic_and_keeps_prior_with_zero_control():
    zero = lambda x, n: jnp.zeros_like(x)
    eta = jnp.asarray(ETA_OLD, jnp.float32)
    x0 = SIGMA0 * jax.random.normal(jax.random.key(13), (PATHS, D))
    out = dis_chain.reversal_ode(zero, eta, x0)
    np.testing.assert_array_equal(out, dis_chain.reversal_ode(zero, eta, x0))
    x = np.asarray(out, np.float64)
    assert np.all(np.abs(x.mean(0)) < 4 * SIGMA0 / math.sqrt(PATHS))
    np.testing.assert_allclose(x.std(0), SIGMA0, atol=4 * SIGMA0 / math.sqrt(2 * PATHS))
    # the noise-free chain contracts towards 0 instead (it drops the noise that keeps p0)
    contracted = np.asarray(dis_chain.noise_free_chain(zero, eta, SIGMA0, x0, 1.0)).std(0)
    assert np.all(contracted < 0.8 * SIGMA0)


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
    est = dis_chain.moment_matched_kl(jnp.asarray(z, jnp.float32), jnp.asarray(x_new, jnp.float32))
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
    est = np.asarray(dis_chain.moment_matched_kl(jnp.asarray(x_old, jnp.float32), jnp.asarray(x_old + delta, jnp.float32)))
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
    _assert_unbiased(dis_chain.moment_matched_kl(ends["old"], ends["new"]), exact.sum())
    for d in range(D):
        _assert_unbiased(dis_chain.moment_matched_kl(ends["old"][..., d:d + 1], ends["new"][..., d:d + 1]), exact[d])
        assert exact[d] <= exact_trajectory_kl(old, new, ETA_OLD, ETA_NEW)
    assert float(jnp.max(jnp.abs(dis_chain.moment_matched_kl(ends["old"], ends["old"])))) < 1e-6


def test_action_kl_refuses_too_few_end_points_and_mismatched_shapes():
    x = jnp.zeros((5, 3, D))
    with pytest.raises(ValueError, match=">= 6 end points"):
        dis_chain.moment_matched_kl(x, x)
    with pytest.raises(ValueError, match="same shape"):
        dis_chain.moment_matched_kl(jnp.zeros((6, 3, D)), jnp.zeros((6, 2, D)))
