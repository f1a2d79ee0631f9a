"""Oracle tests of reciprocal adjoint matching and the drift trust region."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from diffrl.maths import adjoint_matching as am
from diffrl.policies.reference_sde import (
    ReferenceSDE,
    bridge_mean_std,
    erf_jacobian,
    erf_log_det_jacobian,
    erf_squash,
)
from diffrl.maths.trust_region import kl_multiplier_loss

REF = ReferenceSDE(0.01, 2.0)
H1_SQ = REF.terminal_std**2


def affine_control(params, x, obs, t):
    """u = sigma_t (p0 + p1 x): linear in the parameters, so the losses are quadratics."""
    return REF.sigma(jnp.broadcast_to(t, x.shape[:-1]))[..., None] * (params[0] + params[1] * x)


def test_matched_erf_cancels_reference_score_and_jacobian():
    # (A1): log|J_erf(x)| = d log 2 + log N(x; 0, h1^2 I), so g = -Q/alpha + const.
    x = 3.0 * jax.random.normal(jax.random.PRNGKey(0), (50, 3))
    k = REF.erf_scale
    log_ref = jnp.sum(-0.5 * jnp.log(2 * jnp.pi * H1_SQ) - x**2 / (2 * H1_SQ), axis=-1)
    np.testing.assert_allclose(erf_log_det_jacobian(x, k), 3 * math.log(2.0) + log_ref, rtol=1e-5, atol=1e-5)
    # the Jacobian diagonal is the derivative of erf(k x)
    jac = jax.vmap(jax.grad(lambda xi: erf_squash(xi, k)))(x[:, 0])
    np.testing.assert_allclose(erf_jacobian(x[:, 0], k), jac, rtol=1e-5)


def test_pre_squash_score_is_chain_rule_gradient():
    def q(a):
        return -jnp.sum((a - 0.3) ** 2 * jnp.arange(1.0, 4.0), axis=-1)

    x = jax.random.normal(jax.random.PRNGKey(1), (20, 3))
    k = REF.erf_scale
    grad_a = jax.vmap(jax.grad(q))(erf_squash(x, k))
    expected = jax.vmap(jax.grad(lambda xi: q(erf_squash(xi, k))))(x)
    np.testing.assert_allclose(am.pre_squash_score(x, grad_a, k), expected, rtol=1e-5, atol=1e-7)


def test_clip_score_norm_matches_python_loop():
    score = jax.random.normal(jax.random.PRNGKey(2), (200, 4)) * jnp.linspace(0.1, 4.0, 200)[:, None]
    for quantile, max_norm in ((0.95, 5.0), (0.95, 1.0), (1.0, 1e9)):
        clipped, metrics = am.clip_score_norm(score, am.score_clip_limit(score, quantile, max_norm))
        norms = np.linalg.norm(np.asarray(score), axis=-1)
        limit = min(np.quantile(norms, quantile), max_norm)
        assert float(metrics["am/score_clip_limit"]) == pytest.approx(limit, rel=1e-5)
        for row, out, nrm in zip(np.asarray(score), np.asarray(clipped), norms):
            expect = row if nrm <= limit else row * limit / nrm
            np.testing.assert_allclose(out, expect, rtol=1e-5)


def test_matching_loss_matches_python_loop_and_vanishes_at_target():
    key = jax.random.split(jax.random.PRNGKey(3), 4)
    b, alpha, power = 16, 0.3, -1.0
    obs = jnp.zeros((b, 2))
    score = jax.random.normal(key[0], (b, 1))
    t = jax.random.uniform(key[1], (b,))
    x_t = jax.random.normal(key[2], (b, 1))
    params = jnp.array([0.2, -0.4])
    loss_fn = jax.jit(lambda p, sc: am.adjoint_matching_loss(affine_control, p, obs, sc, t, x_t, alpha, REF, power)[0])
    loss = loss_fn(params, score)
    total = 0.0
    lr = math.log(REF.sigma_max / REF.sigma_min)
    for ti, xi, si in zip(np.asarray(t, np.float64), np.asarray(x_t[:, 0]), np.asarray(score[:, 0])):
        sig = REF.sigma_min * math.exp((1.0 - ti) * lr) * math.sqrt(2.0 * lr)  # (R2)
        u = sig * (0.2 - 0.4 * xi)
        target = sig * si / alpha  # u* = -sigma a, a = -score / alpha
        total += 0.5 * alpha**2 * sig**power * (u - target) ** 2
    assert float(loss) == pytest.approx(total / b, rel=1e-5)
    # u_theta = u* exactly (score constant in x): zero loss and zero gradient
    const = jnp.full((b, 1), 0.7)
    exact = jnp.array([0.7 / alpha, 0.0])
    loss0, grad0 = jax.jit(jax.value_and_grad(loss_fn))(exact, const)
    assert float(loss0) < 1e-10 and float(jnp.max(jnp.abs(grad0))) < 1e-5


@jax.jit
def _newton_fit(score, t, x_t, alpha):
    """Exact minimiser over p of the RAM loss for u = sigma_t (p0 + p1 x): one Newton step (quadratic)."""
    obs = jnp.zeros(x_t.shape[:-1] + (1,))

    def loss(p):
        return am.adjoint_matching_loss(affine_control, p, obs, score, t, x_t, alpha, REF)[0]

    p0 = jnp.zeros(2)
    return p0 - jnp.linalg.solve(jax.hessian(loss)(p0), jax.grad(loss)(p0))


@pytest.mark.parametrize("t_value", [0.05, 0.2, 0.5, 0.9])
def test_regression_on_bridge_recovers_optimal_control(t_value):
    # Terminal samples from pi*_x = N(m, v) with the score of a Q whose max-ent optimum is that
    # Gaussian (score = grad_x Q = alpha (grad log pi* + x / h1^2), A1). The minimiser of the RAM
    # loss over u = sigma_t (p0 + p1 x) at fixed t is the optimal control, known in closed form:
    # f*(x, t) = [m + x (v / h1^2 - 1)] / (h1^2 D_t), D_t = rho v / h1^2 + 1 - rho.
    m, v, alpha, n = 0.7, 0.1, 0.3, 40_000
    key_x1, key_xt = jax.random.split(jax.random.PRNGKey(4))
    x1 = m + math.sqrt(v) * jax.random.normal(key_x1, (n, 1))
    score = alpha * (-(x1 - m) / v + x1 / H1_SQ)
    t = jnp.full((n,), t_value)
    mean, std = bridge_mean_std(REF, t, x1)
    x_t = mean + std * jax.random.normal(key_xt, (n, 1))
    fit = np.asarray(_newton_fit(score, t, x_t, alpha), np.float64)
    rho = float(REF.marginal_var(t_value)) / H1_SQ
    denom = H1_SQ * (rho * v / H1_SQ + 1.0 - rho)
    # 5 standard errors of the least-squares slope / intercept of score / alpha on x_t.
    xt, y = np.asarray(x_t[:, 0], np.float64), np.asarray(score[:, 0], np.float64) / alpha
    resid = y - fit[0] - fit[1] * xt
    se_slope = resid.std() / (math.sqrt(n) * xt.std())
    se_icept = resid.std() * math.sqrt(1.0 / n + xt.mean() ** 2 / (n * xt.var()))
    assert abs(fit[1] - (v / H1_SQ - 1.0) / denom) < 5 * se_slope
    assert abs(fit[0] - m / denom) < 5 * se_icept


def test_closed_form_multiplier_meets_bound_and_matches_float64_bisection():
    key_w, key_g = jax.random.split(jax.random.PRNGKey(5))
    weight = jnp.exp(jax.random.normal(key_w, (256,)))  # spread like sigma_t^p
    gap = jax.random.exponential(key_g, (256,))
    bound = 0.1
    solve = jax.jit(am.closed_form_multiplier, static_argnums=2)
    lam = float(solve(weight, gap, bound))
    w, g = np.asarray(weight, np.float64), np.asarray(gap, np.float64)

    def kl(l):
        return np.mean((w / (w + l)) ** 2 * g)

    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if kl(mid) > bound else (lo, mid)
    assert lam == pytest.approx(hi, rel=1e-4)
    assert kl(lam) == pytest.approx(bound, rel=1e-4) and kl(lam) <= bound * (1 + 1e-6)
    # inactive constraint: lambda = 0
    assert float(solve(weight, gap * 0.01, bound)) == 0.0


# one compiled trust-region loss per (mode, bound); u_fn and ref are static
_TR_LOSS = jax.jit(am.trust_region_matching_loss, static_argnums=(0,), static_argnames=("ref", "mode", "kl_bound"))
_MATCH_LOSS = jax.jit(am.adjoint_matching_loss, static_argnums=(0, 7))


def _trust_region_batch(scale):
    keys = jax.random.split(jax.random.PRNGKey(6), 4)
    b = 64
    return dict(
        obs=jnp.zeros((b, 1)),
        score=scale * jax.random.normal(keys[0], (b, 1)),
        t=jax.random.uniform(keys[1], (b,)),
        x_t=jax.random.normal(keys[2], (b, 1)),
        alpha=0.5,
        ref=REF,
    )


def test_closed_form_trust_region_meets_bound_and_equals_penalised_gradient():
    batch = _trust_region_batch(scale=3.0)
    params, old = jnp.array([0.1, 0.2]), jnp.array([0.0, 0.1])

    def closed(p):
        return _TR_LOSS(affine_control, p, old, **batch, mode="closed_form", kl_bound=0.05)

    def penalised(p, log_lam):
        return _TR_LOSS(affine_control, p, old, **batch, mode="dual", kl_bound=0.1, log_lambda=log_lam)[0]

    _, metrics = closed(params)
    assert float(metrics["am/unconstrained_kl"]) > 0.05  # the constraint is active...
    assert float(metrics["am/target_kl"]) == pytest.approx(0.05, rel=1e-3)  # ...and met by the target
    lam = metrics["am/lambda"]
    assert float(lam) > 0
    # (w + lam)/2 ||u - u~||^2 = w/2 ||u - u*||^2 + lam/2 ||u - u_old||^2 + const: same gradient as
    # the dual-mode loss with the same multiplier.
    grad_closed = jax.grad(lambda p: closed(p)[0])(params)
    grad_penalised = jax.grad(penalised)(params, jnp.log(lam))
    np.testing.assert_allclose(grad_closed, grad_penalised, rtol=1e-3)
    # inactive constraint: lambda = 0 and the plain matching loss
    small = _trust_region_batch(scale=0.01)
    near = jnp.array([0.0, 0.1001])
    loss_cf, m_cf = _TR_LOSS(affine_control, near, old, **small, mode="closed_form", kl_bound=10.0)
    plain, _ = _MATCH_LOSS(affine_control, near, small["obs"], small["score"], small["t"], small["x_t"],
                           small["alpha"], REF)
    assert float(m_cf["am/lambda"]) == 0.0 and float(loss_cf) == pytest.approx(float(plain), rel=1e-5)
    with pytest.raises(ValueError):
        am.trust_region_matching_loss(affine_control, near, old, **small, mode="bogus")


def test_dual_trust_region_drives_lambda_to_keep_drift_change_at_bound():
    # All samples share one t and one score, and u = sigma_t p0 is a free constant: the penalised
    # problem has the scalar solution of (A6), so the multiplier that makes the KL equal the bound
    # is lambda* = sqrt(gap / eps) - 1 (in units of the mean matching weight w). Alternate primal Adam steps and dual steps on
    # kl_multiplier_loss; lambda must converge there and the measured KL to the bound.
    b, alpha, eps = 32, 0.5, 0.05
    t = jnp.full((b,), 0.4)
    batch = dict(obs=jnp.zeros((b, 1)), score=jnp.full((b, 1), 1.0), t=t, x_t=jnp.zeros((b, 1)), alpha=alpha, ref=REF)
    old = jnp.zeros(2)
    sigma = float(REF.sigma(0.4))
    gap = 0.5 * (sigma * 1.0 / alpha) ** 2
    # lambda is relative to the mean matching weight (here every sample has weight w)
    lam_star = math.sqrt(gap / eps) - 1.0

    def primal(p, log_lam):
        return am.trust_region_matching_loss(affine_control, p, old, **batch, mode="dual", log_lambda=log_lam)

    # one dual step: KL > eps raises lambda, KL < eps lowers it
    _, m_far = primal(jnp.array([1.0 / alpha, 0.0]), 0.0)  # u = u*: kl = gap > eps
    _, m_near = primal(jnp.array([0.01, 0.0]), 0.0)
    assert float(jax.grad(kl_multiplier_loss)(0.0, m_far["am/kl"], eps)) < 0
    assert float(jax.grad(kl_multiplier_loss)(0.0, m_near["am/kl"], eps)) > 0

    opt_p, opt_l = optax.adam(3e-2), optax.adam(3e-2)

    @jax.jit
    def step(carry, _):
        p, log_lam, sp, sl = carry
        for _ in range(5):  # inner steps so that p tracks its lambda-dependent optimum
            g, m = jax.grad(primal, has_aux=True)(p, log_lam)
            up, sp = opt_p.update(g, sp)
            p = optax.apply_updates(p, up)
        gl = jax.grad(kl_multiplier_loss)(log_lam, m["am/kl"], eps)
        ul, sl = opt_l.update(gl, sl)
        return (p, optax.apply_updates(log_lam, ul), sp, sl), m["am/kl"]

    p0, log_lam0 = jnp.zeros(2), jnp.asarray(math.log(10.0))
    (p, log_lam, _, _), kls = jax.lax.scan(step, (p0, log_lam0, opt_p.init(p0), opt_l.init(log_lam0)), None, length=600)
    assert float(jnp.exp(log_lam)) == pytest.approx(lam_star, rel=0.1)
    assert float(jnp.mean(kls[-100:])) == pytest.approx(eps, rel=0.1)
