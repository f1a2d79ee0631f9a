"""CrossQ-style Q ensemble for off-policy training: batch renormalisation, no target network.

Bhatt et al. 2024, "CrossQ: Batch Normalization in Deep RL for Greater Sample Efficiency and
Simplicity" (ICLR 2024, arXiv 1902.05605): every layer of the critic is batch-(re)normalised
and the current and next (state, action) batches go through ONE forward pass in training
mode, so both are normalised by the same statistics; the next-state values are then used as
targets directly (stop-gradient), with no target network. DIME (Celik et al. 2025, arXiv
2502.02316, github.com/ALRhub/DIME) trains its off-policy diffusion actor on this critic
with two members and a categorical (C51) value distribution.

Batch Renormalization (Ioffe 2017, arXiv 1702.03275), per feature:
  train:  x_hat = (x - mu_B) / s_B * r + d,  r = clip(s_B / s, 1/r_max, r_max),
          d = clip((mu_B - mu) / s, -d_max, d_max)   (r, d stop-gradient; r = 1, d = 0
          during the first ``warmup`` updates: plain batch norm while mu, s settle);
          mu <- mu + (1 - momentum)(mu_B - mu), s^2 likewise with the batch variance;
  eval:   x_hat = (x - mu) / s;     y = gamma * x_hat + beta.
Network per member (CrossQ's): BRN(input) -> [Dense -> BRN -> relu] x len(hidden) -> Dense(out)
(no bias before a BRN, which would cancel it),
out = 1 (scalar Q) or ``num_bins`` logits over atoms linspace(vmin, vmax, num_bins).
"""
from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


class BatchRenorm(nn.Module):
    """Batch renormalisation over the leading axes of (..., features)."""

    use_running_average: bool
    momentum: float = 0.99
    epsilon: float = 1e-3
    r_max: float = 3.0
    d_max: float = 5.0
    warmup: int = 100_000
    use_bias: bool = True

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        features = x.shape[-1]
        mean = self.variable("batch_stats", "mean", lambda: jnp.zeros((features,), jnp.float32))
        var = self.variable("batch_stats", "var", lambda: jnp.ones((features,), jnp.float32))
        steps = self.variable("batch_stats", "steps", lambda: jnp.zeros((), jnp.int32))
        scale = self.param("scale", nn.initializers.ones, (features,))
        bias = self.param("bias", nn.initializers.zeros, (features,)) if self.use_bias else 0.0
        if self.use_running_average:
            x_hat = (x - mean.value) / jnp.sqrt(var.value + self.epsilon)
        else:
            axes = tuple(range(x.ndim - 1))
            batch_mean = jnp.mean(x, axis=axes)
            batch_var = jnp.var(x, axis=axes)
            batch_std = jnp.sqrt(batch_var + self.epsilon)
            running_std = jnp.sqrt(var.value + self.epsilon)
            r = jax.lax.stop_gradient(jnp.clip(batch_std / running_std, 1.0 / self.r_max, self.r_max))
            d = jax.lax.stop_gradient(jnp.clip((batch_mean - mean.value) / running_std, -self.d_max, self.d_max))
            warm = steps.value >= self.warmup
            r, d = jnp.where(warm, r, 1.0), jnp.where(warm, d, 0.0)
            x_hat = (x - batch_mean) / batch_std * r + d
            if not self.is_initializing():
                m = self.momentum
                mean.value = m * mean.value + (1 - m) * jax.lax.stop_gradient(batch_mean)
                var.value = m * var.value + (1 - m) * jax.lax.stop_gradient(batch_var)
                steps.value = steps.value + 1
        return x_hat * scale + bias


class _QNet(nn.Module):
    hidden: Sequence[int]
    out: int
    train: bool
    momentum: float
    warmup: int
    norm: str = "batch_renorm"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        if self.norm == "none":  # SAC's critic: Dense -> relu, a plain MLP
            for width in self.hidden:
                x = nn.relu(nn.Dense(width)(x))
            return nn.Dense(self.out)(x)

        def norm(h, use_bias=True):
            return BatchRenorm(use_running_average=not self.train, momentum=self.momentum, warmup=self.warmup,
                               use_bias=use_bias)(h)

        # DECISION: no bias where a batch renormalisation follows (the input's and each hidden Dense's):
        # the normalisation subtracts any constant shift, so such a bias has a zero gradient up to
        # rounding, which Adam would scale up to full-size steps of noise.
        x = norm(x, use_bias=False)
        for width in self.hidden:
            x = nn.relu(norm(nn.Dense(width, use_bias=False)(x)))
        return nn.Dense(self.out)(x)


class CrossQCritic(nn.Module):
    """``num_critics`` independent Q networks on concat(obs, action); ``norm="none"`` makes each a plain
    ReLU MLP (SAC's critic: no batch statistics, ``batch_stats`` empty).

    ``apply(variables, obs (..., o), action (..., d), train)`` -> (E, ..., out): E members,
    out = 1 for a scalar critic (squeezed: (E, ...)) or ``num_bins`` logits. In training mode
    pass ``mutable=["batch_stats"]``; the statistics are those of THIS call's batch, so feed
    the current and next pairs together (:func:`joint_forward`).
    """

    hidden: Sequence[int]
    num_critics: int = 2
    num_bins: int = 0
    momentum: float = 0.99
    warmup: int = 100_000
    norm: str = "batch_renorm"

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array, train: bool = False) -> jax.Array:
        out = max(self.num_bins, 1)
        ensemble = nn.vmap(_QNet, variable_axes={"params": 0, "batch_stats": 0}, split_rngs={"params": True},
                           in_axes=None, out_axes=0, axis_size=self.num_critics)
        y = ensemble(tuple(self.hidden), out, train, self.momentum, self.warmup, self.norm)(
            jnp.concatenate([obs, action], -1))
        return y if self.num_bins else y[..., 0]


def joint_forward(critic: CrossQCritic, variables, obs, action, next_obs, next_action):
    """CrossQ's joint training-mode pass: (s, a) and (s', a') (each (N, ...)) normalised by the
    statistics of their union. Returns (outputs at (s, a), outputs at (s', a'), new batch_stats),
    outputs (E, N[, bins])."""
    n = obs.shape[0]
    out, updates = critic.apply(variables, jnp.concatenate([obs, next_obs]), jnp.concatenate([action, next_action]),
                                True, mutable=["batch_stats"])
    return out[:, :n], out[:, n:], updates.get("batch_stats", {})


def atoms(vmin: float, vmax: float, num_bins: int) -> jax.Array:
    """(K,) the support of the categorical critic."""
    return jnp.linspace(vmin, vmax, num_bins)


def categorical_projection(next_probs: jax.Array, reward: jax.Array, discount: jax.Array, shift: jax.Array,
                           support: jax.Array) -> jax.Array:
    """C51's projection (Bellemare et al. 2017, arXiv 1707.06887, Alg. 1) of the distribution of
    r + discount * (Z' - shift) onto the fixed support.

    next_probs: (N, K) probabilities of Z' on ``support`` (K,); reward, discount, shift: (N,)
    (shift = alpha * log pi(a'|s'), the soft term). Each target atom's mass is split between
    the two support atoms around it, linearly; atoms outside the support go to its ends.
    Returns (N, K) probabilities.
    """
    vmin, vmax = support[0], support[-1]
    k = support.shape[0]
    delta = (vmax - vmin) / (k - 1)
    target = reward[:, None] + discount[:, None] * (support[None, :] - shift[:, None])
    b = (jnp.clip(target, vmin, vmax) - vmin) / delta  # (N, K) fractional index in [0, K - 1]
    lower = jnp.clip(jnp.floor(b), 0, k - 2).astype(jnp.int32)  # b = K - 1 is the upper atom of the last gap
    w_upper = b - lower  # in [0, 1]: the mass fraction of the atom above ``lower``
    # A scatter-add of the 2 K shares per row (not the (N, K, K) one-hot mass tensor of a dense
    # formulation: on CPU that was a quarter of an off-policy critic step).
    rows = jnp.broadcast_to(jnp.arange(b.shape[0])[:, None], b.shape)
    out = jnp.zeros_like(next_probs).at[rows, lower].add(next_probs * (1.0 - w_upper))
    return out.at[rows, lower + 1].add(next_probs * w_upper)
