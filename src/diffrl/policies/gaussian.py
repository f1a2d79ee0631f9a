"""Diagonal Gaussian policy, tanh-squashed (SAC/REPPO) or clipped (PPO baselines).

pi(a|s): u ~ N(mu(s), diag sigma(s)^2), a = tanh(u) (``squash="tanh"``) or
a = clip(u, -1, 1) (``squash="clip"``, the un-squashed Gaussian of PureJaxRL-style
PPO, whose log-density is that of u). For tanh,
log pi(a|s) = log N(u; mu, sigma) - sum_i log(1 - tanh(u_i)^2), with the Jacobian
term written as 2 (log 2 - u - softplus(-2u)) for stability.

REPPO's trust-region KL (Voelcker et al. 2025, arXiv 2507.11019) is the
forward KL(pi_old || pi) estimated from K samples of pi_old. Because both policies
share the same squashing, the Jacobian terms cancel and the estimator is evaluated
on the pre-squash samples u directly (no atanh of clipped actions needed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from diffrl.nets.mlp import MLP, check_architecture
from diffrl.policies.base import PathwiseSample

LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class GaussianPolicyConfig:
    hidden: tuple[int, ...] = (512, 512, 512)
    """Hidden layer widths of the policy MLP."""
    act: str = "swish"
    """Hidden activation."""
    norm: str = "layer"
    """Normalisation after each hidden layer: none, layer or rms."""
    squash: str = "tanh"
    """tanh (squashed Gaussian) or clip (Gaussian whose samples are clipped to [-1, 1])."""
    state_dependent_std: bool = True
    """Network outputs log-std; otherwise a learned state-independent log-std vector."""
    init_log_std: float = 0.0
    """Initial log-std (offset added to the network output, or initial vector value)."""
    min_std: float = 1e-3
    """Floor added to the standard deviation."""
    max_log_std: float = 2.0
    """Upper clip of the log-std."""
    kl_samples: int = 16
    """Old-policy samples per state for the trust-region KL estimate (REPPO: 16)."""
    arch: str = "mlp"
    """Network architecture: "mlp" (hidden widths, the reference) or "residual" (pre-LayerNorm
    residual blocks of width hidden[0], one per entry of hidden, 4x inner width: the stack that
    scales to ~100M parameters)."""
    matmul_dtype: str = "float32"
    """Dtype of the network's matrix products: float32, or bfloat16 (parameters, gradients and
    optimiser state stay float32)."""

    def validate(self) -> None:
        if self.squash not in ("tanh", "clip"):
            raise ValueError(f"gaussian.squash must be 'tanh' or 'clip', got {self.squash!r}")
        if self.kl_samples < 1:
            raise ValueError("gaussian.kl_samples must be >= 1")
        check_architecture(self.arch, self.hidden, self.matmul_dtype, "gaussian")


@struct.dataclass
class GaussianAux:
    """What a rollout stores for each action: pre-squash sample and its log-density."""

    raw_action: jax.Array  # (..., d)
    log_prob: jax.Array  # (...,)


class _GaussianNet(nn.Module):
    config: GaussianPolicyConfig
    action_size: int

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        c = self.config
        d = self.action_size
        out = MLP(c.hidden, 2 * d if c.state_dependent_std else d, c.act, c.norm, output_scale=0.01,
                  arch=c.arch, matmul_dtype=c.matmul_dtype)(obs)
        if c.state_dependent_std:
            mean, log_std = out[..., :d], out[..., d:] + c.init_log_std
        else:
            mean = out
            vec = self.param("log_std", nn.initializers.constant(c.init_log_std), (d,))
            log_std = jnp.broadcast_to(vec, mean.shape)
        log_std = jnp.minimum(log_std, c.max_log_std)
        return mean, log_std


def normal_log_prob(u: jax.Array, mean: jax.Array, std: jax.Array) -> jax.Array:
    """(..., d) -> (...,) log N(u; mean, diag std^2)."""
    z = (u - mean) / std
    return jnp.sum(-0.5 * z**2 - jnp.log(std) - 0.5 * LOG_2PI, axis=-1)


def tanh_log_det_jacobian(u: jax.Array) -> jax.Array:
    """(..., d) -> (...,) sum_i log(1 - tanh(u_i)^2), numerically stable."""
    return jnp.sum(2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u)), axis=-1)


class GaussianPolicy:
    """Implements Policy, LogProbPolicy and PathwisePolicy (see policies/base.py)."""

    samplers = ("mean", "sample")
    acting_sampler = "sample"
    """The evaluation sampler that reproduces ``sample`` (acting) from the same draws."""

    def __init__(self, config: GaussianPolicyConfig, action_size: int):
        config.validate()
        self.config = config
        self.action_size = action_size
        self.net = _GaussianNet(config, action_size)

    # -- distribution -------------------------------------------------------
    def init(self, key: jax.Array, obs_size: int):
        return self.net.init(key, jnp.zeros((1, obs_size), jnp.float32))

    def dist(self, params, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(..., o) -> mean (..., d), std (..., d) of the pre-squash Gaussian."""
        mean, log_std = self.net.apply(params, obs)
        return mean, jnp.exp(log_std) + self.config.min_std

    def squash(self, u: jax.Array) -> jax.Array:
        return jnp.tanh(u) if self.config.squash == "tanh" else jnp.clip(u, -1.0, 1.0)

    def _log_prob_raw(self, u, mean, std) -> jax.Array:
        lp = normal_log_prob(u, mean, std)
        if self.config.squash == "tanh":
            lp = lp - tanh_log_det_jacobian(u)
        return lp

    # -- Policy ---------------------------------------------------------------
    def sample(self, params, obs, key):
        mean, std = self.dist(params, obs)
        u = mean + std * jax.random.normal(key, mean.shape)
        u = jax.lax.stop_gradient(u)
        aux = GaussianAux(raw_action=u, log_prob=jax.lax.stop_gradient(self._log_prob_raw(u, mean, std)))
        return self.squash(u), aux

    def eval_action(self, params, obs, key, sampler: str = "mean"):
        noise = self.draw_eval_noise(key, obs.shape[:-1], sampler)
        return self.eval_action_from_noise(params, obs, noise, sampler)

    # -- ExplicitNoisePolicy ----------------------------------------------------
    def eval_noise_shape(self, sampler: str) -> tuple[int, ...] | None:
        """'mean' uses no noise; 'sample' one standard normal per action dimension."""
        self._check_sampler(sampler)
        return None if sampler == "mean" else (self.action_size,)

    def draw_eval_noise(self, key, batch_shape, sampler: str):
        shape = self.eval_noise_shape(sampler)
        return None if shape is None else jax.random.normal(key, (*batch_shape, *shape))

    def eval_action_from_noise(self, params, obs, noise, sampler: str):
        self._check_sampler(sampler)
        mean, std = self.dist(params, obs)
        if sampler == "mean":
            return self.squash(mean)
        return jax.lax.stop_gradient(self.squash(mean + std * noise))

    def _check_sampler(self, sampler: str) -> None:
        if sampler not in self.samplers:
            raise ValueError(f"Gaussian policy has no sampler {sampler!r}; choose from {self.samplers}")

    # -- LogProbPolicy --------------------------------------------------------
    def log_prob(self, params, obs, aux: GaussianAux) -> jax.Array:
        mean, std = self.dist(params, obs)
        return self._log_prob_raw(aux.raw_action, mean, std)

    def ratio_log_terms(self, params, obs, aux: GaussianAux) -> jax.Array:
        """(..., 1): log pi of the stored sample, the one term of PPO's ratio."""
        return self.log_prob(params, obs, aux)[..., None]

    def entropy(self, params, obs, key) -> jax.Array:
        """Gaussian entropy of u plus a one-sample estimate of E[log|J_tanh|]."""
        mean, std = self.dist(params, obs)
        ent = jnp.sum(0.5 + 0.5 * LOG_2PI + jnp.log(std), axis=-1)
        if self.config.squash == "tanh":
            u = mean + std * jax.random.normal(key, mean.shape)
            ent = ent + tanh_log_det_jacobian(u)
        return ent

    # -- PathwisePolicy -------------------------------------------------------
    def rsample(self, params, obs, key) -> PathwiseSample:
        mean, std = self.dist(params, obs)
        u = mean + std * jax.random.normal(key, mean.shape)
        lp = self._log_prob_raw(u, mean, std)
        return PathwiseSample(action=self.squash(u), log_prob=lp, dual_log_prob=lp, kl_context=(mean, std))

    def trust_region_kl(self, old_params, params, obs, key, behaviour=None, current=None):
        """Forward KL(pi_old || pi) per state from K old samples: (...,).

        ``behaviour`` (the stored acting aux) is not needed: the old Gaussian is recomputed
        in one network call. ``current``, the (mean, std) of an :meth:`rsample` under ``params``
        at ``obs``, spares the network pass on ``params``: the actor's value and KL terms then
        share one forward and one backward pass (the reference REPPO code shares it too)."""
        k = self.config.kl_samples
        old_mean, old_std = jax.lax.stop_gradient(self.dist(old_params, obs))
        mean, std = self.dist(params, obs) if current is None else current
        eps = jax.random.normal(key, (k,) + old_mean.shape)
        u = old_mean + old_std * eps  # (K, ..., d), pre-squash: Jacobians cancel
        kl = jnp.mean(normal_log_prob(u, old_mean, old_std) - normal_log_prob(u, mean, std), axis=0)
        closed = gaussian_kl(old_mean, old_std, mean, std)
        return kl, {"kl/sampled": jnp.mean(kl), "kl/closed_form": jnp.mean(closed)}


def gaussian_kl(mean1, std1, mean2, std2) -> jax.Array:
    """(..., d) -> (...,) closed-form KL(N(mean1, std1^2) || N(mean2, std2^2))."""
    var1, var2 = std1**2, std2**2
    return jnp.sum(0.5 * (jnp.log(var2 / var1) + (var1 + (mean1 - mean2) ** 2) / var2 - 1.0), axis=-1)
