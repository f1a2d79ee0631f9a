"""Control (drift) network of diffusion policies, with a Fourier time embedding.

Follows DIME's ``PISGRADNet`` (Celik et al. 2025, arXiv 2502.02316, and its code,
github.com/ALRhub/DIME) as used by TruDi and AMDP: time features sin/cos(c * t + phi) with
frequencies c = linspace(0.1, 100, F) and a learnable phase phi, a small time MLP,
then an MLP on concat(x, obs, time_embedding) whose output layer starts near zero,
so that the initial policy equals the reference (prior) process.

``t`` is a float array broadcastable to the batch: TruDi passes the integer step
index n (as DIME does), AMDP passes continuous time in [0, 1].
"""
from __future__ import annotations

from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from diffrl.nets.mlp import MLP, activation


class FourierTimeEmbedding(nn.Module):
    """(...,) -> (..., out): sin/cos features with learnable phase, then an MLP."""

    num_frequencies: int = 32
    hidden: int = 64
    out: int = 32
    max_frequency: float = 100.0

    @nn.compact
    def __call__(self, t: jax.Array) -> jax.Array:
        freqs = jnp.linspace(0.1, self.max_frequency, self.num_frequencies)
        phase = self.param("phase", nn.initializers.zeros, (self.num_frequencies,))
        arg = t[..., None] * freqs + phase
        feats = jnp.concatenate([jnp.sin(arg), jnp.cos(arg)], axis=-1)
        h = nn.gelu(nn.Dense(self.hidden)(feats))
        return nn.Dense(self.out)(h)


class ControlNet(nn.Module):
    """f_theta(x, s, t): (..., d), (..., obs), (...,) -> (..., d), the three batch shapes broadcastable.

    The output layer's kernel is scaled by ``output_scale`` (1e-8 in DIME) and its
    bias is zero, so f is near zero at initialisation. Outputs are clipped to
    +-``clip`` for numerical safety, as in the reference.
    """

    action_size: int
    hidden: Sequence[int] = (256, 256, 256)
    act: str = "gelu"
    norm: str = "none"
    num_frequencies: int = 32
    time_dim: int = 32
    output_scale: float = 1e-8
    clip: float = 1e4
    bound: float = 0.0
    """If > 0, the output is ``bound * tanh(out / bound)``: |f| < bound with a gradient everywhere
    (0: only the hard ``clip``)."""
    arch: str = "mlp"
    """Main network: "mlp" (DIME's) or "residual" (pre-LayerNorm blocks, diffrl.nets.mlp)."""
    matmul_dtype: str = "float32"
    """Dtype of the main network's matrix products (parameters stay float32)."""

    @nn.compact
    def __call__(self, x: jax.Array, obs: jax.Array, t: jax.Array) -> jax.Array:
        # The time embedding runs at t's own shape (a scalar per step of a chain, (N, 1, ..) for
        # all steps at once) and the first layer multiplies obs and time at their own shapes
        # (nets.mlp.Dense): only x's product and the hidden layers are computed per (state, step)
        # row. The same function as embedding every row and concatenating [x, obs, temb].
        t = jnp.asarray(t, jnp.float32)
        # a scalar t is embedded as one row (the embedding's Dense layers then stay rank-2 products,
        # as ONNX's Gemm requires) and broadcast from there
        temb = FourierTimeEmbedding(self.num_frequencies, 2 * self.time_dim, self.time_dim)(
            t.reshape(1) if t.ndim == 0 else t)
        activation(self.act)  # validate the name early
        out = MLP(
            hidden=tuple(self.hidden),
            out=self.action_size,
            act=self.act,
            norm=self.norm,
            output_scale=self.output_scale,
            arch=self.arch,
            matmul_dtype=self.matmul_dtype,
        )((x, obs, temb))
        out = out.reshape(jnp.broadcast_shapes(x.shape[:-1], obs.shape[:-1], t.shape) + out.shape[-1:])
        if self.bound > 0:
            out = self.bound * jnp.tanh(out / self.bound)
        return jnp.clip(out, -self.clip, self.clip)
