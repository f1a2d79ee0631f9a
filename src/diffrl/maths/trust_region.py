"""REPPO's per-state KL trust-region actor loss and its two dual variables.

Voelcker et al. 2025, "Relative Entropy Pathwise Policy Optimization", arXiv
2507.11019, Sec. 4 (constrained pathwise update) and reference ``src/jaxrl/reppo.py``;
see the REPPO paper (arXiv 2507.11019) and its reference code (github.com/cvoelcker/reppo). Reused unchanged by TruDi (KL = the diffusion chain's
trajectory-KL bound) and AMDP.

Per state s, with value_loss(s) = alpha log pi(a~|s) - Q(s, a~) (a~ reparameterised)
and kl(s) an estimate of KL(pi_old(.|s) || pi(.|s)):

* "clipped" (default): l(s) = value_loss(s) if kl(s) < eps else beta kl(s). States
  that left the trust region only get pulled back; states inside it follow Q.
* "full": l(s) = value_loss(s) + beta kl(s) (plain Lagrangian penalty).
* "value": l(s) = value_loss(s) (no trust region; ablation).

beta is a constant inside the actor loss; it and the temperature alpha are adapted by
their own dual losses (both parameterised by their logarithms, which keeps them
positive):

* temperature: L(log alpha) = alpha * sg(H - H*), H = mean entropy estimate.
  dL/dlog alpha = alpha (H - H*) < 0 when H < H*, so gradient DESCENT raises alpha
  when the policy is less random than the target (SAC's automatic temperature,
  Haarnoja et al. 2018, arXiv 1812.05905, Eq. 18 with H = -log pi);
* KL multiplier: L(log beta) = -beta * sg(KL - eps). dL/dlog beta = -beta (KL - eps)
  < 0 when KL > eps, so descent raises beta when the trust region is violated
  (dual ascent on the Lagrangian of max E[Q] s.t. KL <= eps).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

ACTOR_LOSS_MODES = ("clipped", "full", "value")


def actor_loss_per_state(
    value_loss: jax.Array,
    kl: jax.Array,
    kl_bound: float,
    beta: float | jax.Array,
    mode: str = "clipped",
) -> jax.Array:
    """(...,) per-state actor loss under the KL trust region (average it yourself).

    Args:
      value_loss: (...,) alpha log pi(a~|s) - Q(s, a~), built by the caller (with a
        stop-gradient alpha), differentiable w.r.t. the actor.
      kl: (...,) per-state KL(old || new) estimate, differentiable w.r.t. the actor.
      kl_bound: eps, the per-state trust-region radius.
      beta: KL multiplier (> 0); stop-gradient is applied here.
      mode: "clipped", "full" or "value" (static).
    """
    if mode not in ACTOR_LOSS_MODES:
        raise ValueError(f"unknown actor loss mode '{mode}'; choose from {ACTOR_LOSS_MODES}")
    beta = jax.lax.stop_gradient(beta)
    if mode == "value":
        return value_loss
    if mode == "full":
        return value_loss + beta * kl
    # The branch is chosen on the stop-gradient KL: the selection itself carries no
    # gradient, each state receives exactly one of the two gradients.
    inside = jax.lax.stop_gradient(kl) < kl_bound
    return jnp.where(inside, value_loss, beta * kl)


def temperature_loss(
    log_alpha: jax.Array,
    entropy_estimate: jax.Array,
    target_entropy: float | jax.Array,
) -> jax.Array:
    """Scalar dual loss for alpha = exp(log_alpha): exp(log_alpha) * sg(mean(H) - H*).

    Args:
      log_alpha: () the trainable log-temperature.
      entropy_estimate: (...,) per-state entropy estimates, e.g. -log pi(a~|s) (or,
        for diffusion policies, minus ``PathwiseSample.dual_log_prob``).
      target_entropy: H*, e.g. :func:`default_target_entropy`.

    Gradient descent on log_alpha increases alpha while mean(H) < H* and decreases it
    while mean(H) > H*.
    """
    gap = jax.lax.stop_gradient(jnp.mean(entropy_estimate) - target_entropy)
    return jnp.exp(log_alpha) * gap


def kl_multiplier_loss(
    log_beta: jax.Array,
    kl: jax.Array,
    kl_bound: float,
) -> jax.Array:
    """Scalar dual loss for beta = exp(log_beta): -exp(log_beta) * sg(mean(KL) - eps).

    Args:
      log_beta: () the trainable log-multiplier.
      kl: (...,) per-state KL estimates.
      kl_bound: eps.

    Gradient descent on log_beta increases beta while mean(KL) > eps and decreases it
    while mean(KL) < eps.
    """
    violation = jax.lax.stop_gradient(jnp.mean(kl) - kl_bound)
    return -jnp.exp(log_beta) * violation


def default_target_entropy(action_size: int, entropy_target_mult: float = -0.5) -> float:
    """Entropy target H* = entropy_target_mult * action_size (REPPO's reference: -0.5 d)."""
    return entropy_target_mult * action_size
