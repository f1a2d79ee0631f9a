"""AMDP's actor loss: reciprocal adjoint matching and the drift trust region.

AMDP (Thilges et al. 2026, arXiv 2606.22630) fits the control of the SOC problem of
``diffrl.policies.reference_sde`` by Reciprocal Adjoint Matching (Adjoint Sampling,
Havens et al. 2025, arXiv 2504.11713; Adjoint Matching, Domingo-Enrich et al. 2025,
arXiv 2409.08861, eqs. 34, 37-39). Equations (AMDP, arXiv 2606.22630; adjoint matching, arXiv 2409.08861):

(A1) terminal cost  g(x) = log p_1^ref(x) - log pi*_x(x|s),
                    pi*_x(x|s) = exp(Q(s, erf(k x)) / alpha) |J_erf(x)| / Z(s).
     With the matched k = 1 / (sqrt 2 h(1)): log|J_erf(x)| = sum_i [log(2k / sqrt(pi)) - k^2 x_i^2]
     = d log 2 + log p_1^ref(x) (2k / sqrt(pi) = 2 / (sqrt(2 pi) h(1)), k^2 = 1 / (2 h(1)^2)), so
     g(x) = -Q(s, erf(k x)) / alpha - d log 2 + log Z(s): the reference score and the
     Jacobian term cancel exactly.
(A2) lean adjoint   a(t) = grad_x g(X_1) = -(1/alpha) J_erf(X_1) grad_a Q(s, a), constant in t
                    (no reference drift, no running cost).
(A3) target         u*(X_t, t) = -sigma_t a = sigma_t grad_x Q / alpha   (grad_x Q := "score").
(A4) RAM loss       L = E_{X_1 ~ pi_old, t ~ U, X_t ~ bridge(0, X_1)} w(t) 1/2 ||u_theta(X_t, t, s) - u*||^2,
                    w(t) = alpha^2 sigma_t^p. DECISION: p is ``sigma_power`` (the public port uses
                    p = -1). alpha^2 makes the loss alpha-free in the target: with the policy's
                    u_theta = sigma_t f_theta, w 1/2 ||u - u*||^2 = 1/2 sigma_t^(p+2) ||alpha f_theta - score||^2,
                    so p = -1 weights the network residual by sigma_t, p = -2 uniformly in t.
(A5) drift KL       kl = 1/2 ||u_theta(X_t, t, s) - u_old(X_t, t, s)||^2 at the same (t, X_t).
     Both controlled processes have drift sigma_t u and diffusion sigma_t, so by Girsanov
     KL(P^old || P^theta) = E_{P^old} int_0^1 1/2 ||u_theta - u_old||^2 dt (no sigma factor; in
     network units 1/2 sigma_t^2 ||f_theta - f_old||^2). mean(kl) over t ~ U[0, 1] and the
     bridge is an unbiased estimate of this integral under the RECIPROCAL PROJECTION
     P^ref(.|X_1) pi_old(X_1) of P^old; it equals KL(P^old || P^theta) when P^old is reciprocal
     (the RAM fixed point), an approximation otherwise. Unweighted by w(t).
(A6) multiplier     L_lambda = L + lambda mean(kl) (lambda stop-gradient).
     "dual": lambda = exp(log lambda), adapted by ``trust_region.kl_multiplier_loss``.
     "closed_form": per sample, argmin_u w/2 ||u - u*||^2 + lambda/2 ||u - u_old||^2 is
     u~ = (w u* + lambda u_old) / (w + lambda) with kl(u~) = (w / (w + lambda))^2 1/2 ||u* - u_old||^2;
     lambda >= 0 solves mean_i kl_i(lambda) = eps (bisection; 0 if the unconstrained target
     already satisfies the bound) and the loss is mean (w + lambda)/2 ||u_theta - u~||^2
     (= w/2 ||u - u*||^2 + lambda/2 ||u - u_old||^2 + const). DECISION: no extra learned factor
     on top of lambda* (the port multiplies by one; we do not).
(A7) baseline       L_rkl = mean[alpha (C - d log 2) - Q(s, erf(k X_1))], X_1 and C from a
                    differentiable Euler-Maruyama simulation (backprop through all N steps).
     Not in this module: it is REPPO's pathwise actor loss on ``AdjointPolicy.rsample``
     (algorithm ``amdp-backprop``, ``diffrl.algos``).

Shapes: batch axes (B,) (any leading axes work, losses average over all of them).
``u_fn(params, x (B, d), obs (B, o), t (B,)) -> (B, d)`` is the control u (not f).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from diffrl.policies.reference_sde import ReferenceSDE, erf_jacobian

ControlApply = Callable[[Any, jax.Array, jax.Array, jax.Array], jax.Array]
TRUST_REGIONS = ("dual", "closed_form", "none")
sg = jax.lax.stop_gradient


def pre_squash_score(x1: jax.Array, grad_q_action: jax.Array, k: float) -> jax.Array:
    """(B, d) grad_x Q(s, erf(k x)) at x = X_1 = J_erf(X_1) grad_a Q (the Jacobian is diagonal)."""
    return erf_jacobian(x1, k) * grad_q_action


def score_clip_limit(score: jax.Array, quantile: float = 0.95, max_norm: float = 5.0) -> jax.Array:
    """() min(``quantile`` of the per-sample norms of (..., d) scores, max_norm).

    Pass the whole update batch: the limit is a batch statistic (a minibatch's 95 % quantile
    of 32-64 norms is its 2nd-4th largest, a different and noisy statistic).
    """
    return jnp.minimum(jnp.quantile(jnp.linalg.norm(score, axis=-1), quantile), max_norm)


def clip_score_norm(score: jax.Array, limit: jax.Array) -> tuple[jax.Array, dict]:
    """Per-sample norm clipping of (..., d) scores at ``limit`` (from :func:`score_clip_limit`).

    DECISION: the pre-squash score grad_x Q (the quantity in the target) is clipped, as in the port.
    """
    norms = jnp.linalg.norm(score, axis=-1)
    scale = jnp.minimum(1.0, limit / jnp.maximum(norms, 1e-12))
    metrics = {"am/score_norm": jnp.mean(norms), "am/score_clip_limit": limit,
               "am/score_clipped_frac": jnp.mean(norms > limit)}
    return score * scale[..., None], metrics


def matching_target(score: jax.Array, sigma_t: jax.Array, alpha: jax.Array) -> jax.Array:
    """(B, d) u* = -sigma_t a = sigma_t score / alpha, eqs. (A2)-(A3). sigma_t: (B,)."""
    return sigma_t[..., None] * score / alpha


def matching_weight(sigma_t: jax.Array, alpha: jax.Array, sigma_power: float) -> jax.Array:
    """(B,) w(t) = alpha^2 sigma_t^p, eq. (A4)."""
    return alpha**2 * sigma_t**sigma_power


def adjoint_matching_loss(
    u_fn: ControlApply,
    params: Any,
    obs: jax.Array,
    score: jax.Array,
    t: jax.Array,
    x_t: jax.Array,
    alpha: jax.Array,
    ref: ReferenceSDE,
    sigma_power: float = -1.0,
) -> tuple[jax.Array, dict]:
    """Reciprocal adjoint matching loss (A4). Scalar loss and metrics.

    Args:
      obs: (B, o); score: (B, d) clipped grad_x Q at the stored X_1; t: (B,); x_t: (B, d)
        bridge samples (``reference_sde.sample_bridge``); alpha: temperature (stop-gradient).
    """
    u, target, weight = _regression_terms(u_fn, params, obs, score, t, x_t, alpha, ref, sigma_power)
    loss = _weighted_matching(u, target, weight)
    return loss, {"am/loss": loss, "am/control_norm": jnp.mean(jnp.linalg.norm(u, axis=-1))}


def _regression_terms(u_fn, params, obs, score, t, x_t, alpha, ref, sigma_power):
    """(u (B, d), target (B, d), weight (B,)) of the A4 regression at bridge samples."""
    alpha = sg(alpha)
    sigma_t = ref.sigma(t)
    target = sg(matching_target(score, sigma_t, alpha))
    return u_fn(params, x_t, obs, t), target, matching_weight(sigma_t, alpha, sigma_power)


def _weighted_matching(u: jax.Array, target: jax.Array, weight: jax.Array) -> jax.Array:
    """mean_b 1/2 w_b ||u_b - target_b||^2."""
    return jnp.mean(0.5 * weight * jnp.sum((u - target) ** 2, axis=-1))


def drift_kl(u: jax.Array, u_old: jax.Array) -> jax.Array:
    """(B, d), (B, d) -> (B,) 1/2 ||u - u_old||^2, the integrand of the path KL (A5)."""
    return 0.5 * jnp.sum((u - u_old) ** 2, axis=-1)


def closed_form_multiplier(
    weight: jax.Array, gap: jax.Array, kl_bound: float, num_iters: int = 40
) -> jax.Array:
    """lambda >= 0 with mean_i (w_i / (w_i + lambda))^2 gap_i = kl_bound, eq. (A6); 0 if mean(gap) <= bound.

    weight, gap: (B,), gap_i = 1/2 ||u*_i - u_old,i||^2 (both stop-gradient). The left side
    decreases in lambda and is bracketed by (w / (w + lambda))^2 mean(gap) for w = min w, max w,
    so lambda* lies in [w_min (sqrt(r) - 1), w_max (sqrt(r) - 1)], r = mean(gap) / bound.
    Bisection (jittable, fixed ``num_iters``) returns the upper end, so the bound is met.
    """
    weight, gap = sg(weight), sg(gap)
    root = jnp.sqrt(jnp.maximum(jnp.mean(gap) / kl_bound, 1.0)) - 1.0

    def kl_at(lam):
        return jnp.mean((weight / (weight + lam)) ** 2 * gap)

    def bisect(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        too_far = kl_at(mid) > kl_bound
        return jnp.where(too_far, mid, lo), jnp.where(too_far, hi, mid)

    _, hi = jax.lax.fori_loop(0, num_iters, bisect, (jnp.min(weight) * root, jnp.max(weight) * root))
    return hi


def trust_region_matching_loss(
    u_fn: ControlApply,
    params: Any,
    old_params: Any,
    obs: jax.Array,
    score: jax.Array,
    t: jax.Array,
    x_t: jax.Array,
    alpha: jax.Array,
    ref: ReferenceSDE,
    *,
    mode: str = "dual",
    kl_bound: float = 0.1,
    log_lambda: jax.Array | float = 0.0,
    sigma_power: float = -1.0,
) -> tuple[jax.Array, dict]:
    """RAM loss (A4) with the drift trust region (A5)-(A6). Scalar loss and metrics.

    The multiplier lambda is expressed RELATIVE to the batch-mean matching weight
    w_bar = mean w(t) (DECISION): the penalty is lambda * w_bar * mean kl. The matching
    weight carries alpha^2 (A4), so an absolute multiplier would have to track alpha over
    orders of magnitude (a dual with Adam on log lambda cannot: the policy froze); relative
    to w_bar, lambda = 1 weighs the trust region like the regression, whatever alpha is.
    The closed-form solve reports its multiplier in the same units.

    mode: "dual" (loss + exp(log_lambda) w_bar mean kl; adapt log_lambda with
    ``trust_region.kl_multiplier_loss(log_lambda, metrics['am/kl'], kl_bound)``),
    "closed_form" (regression onto the per-minibatch blended target) or "none".
    Metrics: am/kl (measured mean drift KL of u_theta vs u_old, no gradient), am/lambda,
    am/unconstrained_kl (mean 1/2 ||u* - u_old||^2), am/target_kl (KL of the regression target).
    """
    if mode not in TRUST_REGIONS:
        raise ValueError(f"unknown trust region '{mode}'; choose from {TRUST_REGIONS}")
    u, target, weight = _regression_terms(u_fn, params, obs, score, t, x_t, alpha, ref, sigma_power)
    u_old = sg(u_fn(old_params, x_t, obs, t))
    kl = drift_kl(u, u_old)
    gap = drift_kl(target, u_old)
    mean_weight = sg(jnp.mean(weight))
    if mode == "closed_form":
        lam_abs = closed_form_multiplier(weight, gap, kl_bound)
        blended = (weight[..., None] * target + lam_abs * u_old) / (weight + lam_abs)[..., None]
        loss = _weighted_matching(u, blended, weight + lam_abs)
        target_kl = jnp.mean(drift_kl(blended, u_old))
        lam = lam_abs / mean_weight
    else:
        lam = jnp.exp(sg(jnp.asarray(log_lambda, jnp.float32))) if mode == "dual" else jnp.zeros(())
        matching = _weighted_matching(u, target, weight)
        loss = matching + lam * mean_weight * jnp.mean(kl)
        target_kl = jnp.mean(gap)
    metrics = {
        "am/loss": loss,
        "am/kl": sg(jnp.mean(kl)),
        "am/lambda": lam,
        "am/unconstrained_kl": jnp.mean(gap),
        "am/target_kl": target_kl,
        "am/control_norm": jnp.mean(jnp.linalg.norm(u, axis=-1)),
    }
    return loss, metrics
