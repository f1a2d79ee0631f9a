"""The off-policy family's losses (``diffrl.algos.offpolicy``: ``sac``, ``dime-off``, ``amdp-off``) as free
functions: the soft TD losses of a scalar ensemble (SAC, Haarnoja et al. 2018, arXiv 1812.05905, Eq. 5
with clipped double Q) and of a categorical one (DIME, Celik et al. 2025, arXiv 2502.02316: C51
projections of the members' next distributions), SAC's Polyak target update and the reverse-KL actor loss.
Shapes: E ensemble members, N samples, K atoms.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from diffrl.critics.crossq import categorical_projection


def polyak_update(target, online, tau: float):
    """SAC's target update (Haarnoja et al. 2018, arXiv 1812.05905, Alg. 1): every parameter of the
    flax variables ``target`` becomes (1 - tau) target + tau online; running statistics
    (``batch_stats``, if any) are copied from ``online``, as they are estimates, not parameters."""
    params = jax.tree_util.tree_map(lambda t, o: (1.0 - tau) * t + tau * o, target["params"], online["params"])
    return {"params": params, "batch_stats": online["batch_stats"]}


def reduce_ensemble(values: jax.Array, how: str) -> jax.Array:
    """(E, ...) -> (...): the members' mean or minimum."""
    return jnp.min(values, axis=0) if how == "min" else jnp.mean(values, axis=0)


def scalar_td_loss(q: jax.Array, next_q: jax.Array, reward: jax.Array, terminated: jax.Array,
                   next_log_prob: jax.Array, alpha: jax.Array, gamma: float, reduce: str) -> tuple[jax.Array, dict]:
    """Soft TD loss of a scalar ensemble.

    q, next_q: (E, N) Q_e(s, a), Q_e(s', a'); reward, terminated, next_log_prob: (N,).
    Returns mean_e,n 1/2 (q - sg(y))^2 with y = r + gamma (1 - term)(reduce_e next_q - alpha l').
    """
    y = reward + gamma * (1.0 - terminated) * (reduce_ensemble(next_q, reduce) - alpha * next_log_prob)
    y = jax.lax.stop_gradient(y)
    loss = 0.5 * jnp.mean(jnp.square(q - y[None]))
    return loss, {"critic/target_mean": jnp.mean(y), "critic/q_mean": jnp.mean(q)}


def categorical_td_loss(logits: jax.Array, next_logits: jax.Array, reward: jax.Array, terminated: jax.Array,
                        next_log_prob: jax.Array, alpha: jax.Array, gamma: float, support: jax.Array,
                        reduce: str, entropy_coef: float) -> tuple[jax.Array, dict]:
    """Soft C51 loss of a categorical ensemble (DIME's).

    logits, next_logits: (E, N, K) at (s, a) and (s', a'); reward, terminated, next_log_prob:
    (N,); support: (K,). Each member's next distribution is projected through
    r + gamma (1 - term)(z - alpha l'); the target is the members' average projection
    (``reduce`` = mean) or the projection of the member with the lowest expected next value
    (min). Loss: mean over members and samples of the cross-entropy to sg(target), plus
    ``entropy_coef`` * sum_k p_k log p_k of the member's own distribution.
    """
    discount = gamma * (1.0 - terminated)
    next_probs = jax.nn.softmax(jax.lax.stop_gradient(next_logits), axis=-1)
    projected = jax.vmap(lambda p: categorical_projection(p, reward, discount, alpha * next_log_prob, support))(
        next_probs)  # (E, N, K)
    if reduce == "min":
        lowest = jnp.argmin(jnp.sum(next_probs * support, axis=-1), axis=0)  # (N,)
        target = jnp.take_along_axis(projected, lowest[None, :, None], axis=0)[0]
    else:
        target = jnp.mean(projected, axis=0)
    target = jax.lax.stop_gradient(target)
    log_p = jax.nn.log_softmax(logits, axis=-1)
    ce = -jnp.sum(target[None] * log_p, axis=-1)
    neg_entropy = jnp.sum(jnp.exp(log_p) * log_p, axis=-1)
    loss = jnp.mean(ce + entropy_coef * neg_entropy)
    q = jnp.sum(jnp.exp(log_p) * support, axis=-1)
    return loss, {"critic/target_mean": jnp.mean(jnp.sum(target * support, -1)), "critic/q_mean": jnp.mean(q),
                  "critic/ce_loss": jnp.mean(ce), "critic/entropy": -jnp.mean(neg_entropy)}


def pathwise_actor_loss(log_prob: jax.Array, q: jax.Array, alpha: jax.Array) -> jax.Array:
    """The reverse-KL (SAC/DIME) actor loss mean(sg(alpha) log pi(a~|s) - Q(s, a~)); (N,) inputs."""
    return jnp.mean(jax.lax.stop_gradient(alpha) * log_prob - q)
