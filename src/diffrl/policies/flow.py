"""Flow-matching policy for FPO (Flow Policy Optimization, McAllister et al. 2025, arXiv 2507.21053).

A rectified flow in the pre-squash action x (shape (..., d)) conditioned on the observation s:

(F1) interpolation   x_t = t eps + (1 - t) x,  eps ~ N(0, I),  t in [0, 1]  (t = 1 noise, t = 0 action)
(F2) velocity target d x_t / dt = eps - x;  v_theta(x_t, s, t) regresses onto it
(F3) sampling        x_1 ~ N(0, I), then K Euler steps x <- x - v_theta(x, s, t) / K, t = 1, 1 - 1/K, ..., 1/K
(F4) CFM loss        l_i = w(t_i) mean_d (v_theta(x_{t_i}, s, t_i) - (eps_i - x))^2  for M draws (t_i, eps_i)
     per action, w(t) = (1 - t)^2 (``loss_weighting="eps"``, FPO's code: the network predicts the
     velocity but is supervised through the noise it implies, eps^ = x_t + (1 - t) v, and
     eps - eps^ = (1 - t)(eps - x - v)) or w = 1 (``"velocity"``, FPO's output mode "u")
(F5) FPO ratio       rho = exp(L_old - L_new), L = mean_i l_i (FPO, McAllister et al. 2025, Sec. 3, Alg. 1;
     ``ratio="averaged"``): minus the CFM loss stands in for log pi (an ELBO up to constants and
     weighting), so a lower loss under the new flow means a likelier action.

The M draws (t_i, eps_i) are made once, when the action is taken, and stored with it, so the old
and new losses of a sample are measured on the same draws; t_i ~ U[0, 1) (FPO's code default) or,
``time_sampling="grid"``, uniform on the sampler's K Euler times {1, 1 - 1/K, ..., 1/K} (its
``discretize_t_for_training``). The flow's density is never computed, so the policy has no entropy and
no log-density: PPO's loop reads ``ratio_log_terms`` instead. As in FPO's code the velocity network's
output is multiplied by 0.25 at every call (``output_multiplier``).

FPO++ (Yi, Choi et al., "Flow Policy Gradients for Robot Control", code github.com/amazon-far/fpo-control),
the ``fpo++`` algorithm (:mod:`diffrl.algos.ppo`); its policy-side parts are options here:
* ``ratio="per_sample"``: one ratio per draw, rho_i = exp(l_old,i - l_new,i), each entering the
  surrogate on its own (FPO as published averages the losses first: ``ratio="averaged"``). A single
  draw with a large loss change then moves only its own term, not the whole sample's ratio; FPO++
  also clamps each draw's log ratio (``--ppo.log-ratio-clip``) and uses an asymmetric surrogate.
* the ``zero-noise`` evaluation sampler integrates (F3) from x_1 = 0 instead of a random draw: a
  deterministic policy for evaluation and deployment (``sample`` keeps the random start).

The l_i average over action dimensions (not a sum), so the scale of the exponent in (F5), and so
how far one update moves the ratio, does not grow with d; the velocity network is
:class:`~diffrl.nets.control.ControlNet` with continuous time t.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from diffrl.nets.control import ControlNet
from diffrl.nets.mlp import check_architecture
from diffrl.policies.base import Params

RATIOS = ("per_sample", "averaged")
SQUASHES = ("clip", "tanh")
LOSS_WEIGHTINGS = ("eps", "velocity")
TIME_SAMPLINGS = ("uniform", "grid")


@dataclass(frozen=True)
class FlowPolicyConfig:
    num_steps: int = 10
    """K Euler steps from noise (t = 1) to the action (t = 0) (FPO reference 10)."""
    hidden: tuple[int, ...] = (32, 32, 32, 32)
    """Hidden widths of the velocity network (FPO reference 4 x 32)."""
    act: str = "silu"
    """Activation of the velocity network."""
    norm: str = "none"
    """Normalisation in the velocity MLP: 'none', 'layer' or 'rms'."""
    arch: str = "mlp"
    """Velocity network architecture: "mlp" or "residual" (pre-LayerNorm blocks)."""
    matmul_dtype: str = "float32"
    """Dtype of the velocity network's matrix products (parameters stay float32)."""
    num_frequencies: int = 8
    """Fourier time frequencies of the velocity network."""
    time_dim: int = 8
    """Time-embedding width."""
    output_scale: float = 1.0
    """Scale of the output layer's initial kernel, times its default (lecun-normal) init."""
    output_multiplier: float = 0.25
    """Constant the velocity network's output is multiplied by at every call (FPO's code:
    policy_mlp_output_scale 0.25; with output_scale 1 the initial flow moves noise little)."""
    mc_samples: int = 8
    """M (t, eps) draws per action for the CFM loss (FPO reference 8)."""
    ratio: str = "averaged"
    """'averaged': exp of the mean loss change (FPO, eq. F5); 'per_sample': one ratio per draw (FPO++)."""
    loss_weighting: str = "eps"
    """Weight of each draw's CFM loss (F4): 'eps', (1 - t)^2, the error of the noise the predicted
    velocity implies (FPO's code, output mode u_but_supervise_as_eps), or 'velocity', 1 (output mode u)."""
    time_sampling: str = "uniform"
    """t of the CFM draws: 'uniform' on [0, 1) (FPO's code default) or 'grid', uniform on the
    sampler's K Euler times {1, 1 - 1/K, ..., 1/K} (FPO's discretize_t_for_training)."""
    squash: str = "clip"
    """Action from the flow's x: 'clip' to [-1, 1] (FPO reference) or 'tanh'."""

    absent_field_values: ClassVar[dict[str, object]] = {"output_multiplier": 1.0, "loss_weighting": "velocity"}
    """Values a flow config stored before these fields existed loads with (records.config_from_json): the
    unscaled velocity output and the unweighted CFM loss it was trained with."""

    def __post_init__(self):
        if self.ratio not in RATIOS:
            raise ValueError(f"flow.ratio must be one of {RATIOS}, got {self.ratio!r}")
        if self.squash not in SQUASHES:
            raise ValueError(f"flow.squash must be one of {SQUASHES}, got {self.squash!r}")
        if self.loss_weighting not in LOSS_WEIGHTINGS:
            raise ValueError(f"flow.loss_weighting must be one of {LOSS_WEIGHTINGS}, got {self.loss_weighting!r}")
        if self.time_sampling not in TIME_SAMPLINGS:
            raise ValueError(f"flow.time_sampling must be one of {TIME_SAMPLINGS}, got {self.time_sampling!r}")
        if self.num_steps < 1 or self.mc_samples < 1:
            raise ValueError("flow.num_steps and flow.mc_samples must be >= 1")
        if not self.output_multiplier > 0 or not self.output_scale > 0:
            raise ValueError("flow.output_multiplier and flow.output_scale must be > 0")

    def validate(self) -> None:
        check_architecture(self.arch, self.hidden, self.matmul_dtype, "flow")


@struct.dataclass
class FlowAux:
    """What ``sample`` stores with an action (leading axes as obs).

    x: (..., d) the flow's pre-squash sample; eps: (..., M, d) and t: (..., M) the CFM draws (F4)
    on which the old and the new loss of this sample are compared.
    """

    x: jax.Array
    eps: jax.Array
    t: jax.Array


class FlowPolicy:
    """Rectified-flow policy (F1-F5); implements ``Policy``, ``RatioPolicy`` and explicit eval noise."""

    samplers = ("zero-noise", "sample")
    acting_sampler = "sample"

    def __init__(self, config: FlowPolicyConfig, action_size: int):
        config.validate()
        self.config = config
        self.action_size = action_size
        self.net = ControlNet(action_size=action_size, hidden=tuple(config.hidden), act=config.act,
                              norm=config.norm, num_frequencies=config.num_frequencies, time_dim=config.time_dim,
                              output_scale=config.output_scale, arch=config.arch, matmul_dtype=config.matmul_dtype)

    def init(self, key: jax.Array, obs_size: int) -> Params:
        d = self.action_size
        return {"velocity": self.net.init(key, jnp.zeros((1, d)), jnp.zeros((1, obs_size)), jnp.zeros((1,)))}

    def velocity(self, params: Params, x: jax.Array, obs: jax.Array, t: jax.Array) -> jax.Array:
        """v_theta(x, s, t): (..., d), (..., o) broadcastable, t broadcastable to x's batch -> (..., d);
        the network's output times ``output_multiplier``."""
        return self.config.output_multiplier * self.net.apply(params["velocity"], x, obs, t)

    def squash(self, x: jax.Array) -> jax.Array:
        return jnp.clip(x, -1.0, 1.0) if self.config.squash == "clip" else jnp.tanh(x)

    def integrate(self, params: Params, obs: jax.Array, x1: jax.Array) -> jax.Array:
        """(F3): K Euler steps from x_1 (..., d) at t = 1 down to t = 0; returns x_0."""
        k = self.config.num_steps
        times = 1.0 - jnp.arange(k, dtype=jnp.float32) / k

        def step(x, t):
            return x - self.velocity(params, x, obs, t) / k, None

        x0, _ = jax.lax.scan(step, x1, times)
        return x0

    def sample(self, params: Params, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, FlowAux]:
        """Acting: a random start x_1, the flow (F3), and the M CFM draws stored with the action."""
        key_x1, key_eps, key_t = jax.random.split(key, 3)
        batch, d, m = obs.shape[:-1], self.action_size, self.config.mc_samples
        x = self.integrate(params, obs, jax.random.normal(key_x1, (*batch, d), jnp.float32))
        eps = jax.random.normal(key_eps, (*batch, m, d), jnp.float32)
        if self.config.time_sampling == "grid":  # the Euler times of (F3): 1, 1 - 1/K, ..., 1/K
            k = self.config.num_steps
            t = 1.0 - jax.random.randint(key_t, (*batch, m), 0, k).astype(jnp.float32) / k
        else:
            t = jax.random.uniform(key_t, (*batch, m), jnp.float32)
        return jax.lax.stop_gradient((self.squash(x), FlowAux(x, eps, t)))

    def cfm_losses(self, params: Params, obs: jax.Array, aux: FlowAux) -> jax.Array:
        """(F4): (..., M) per-draw conditional flow-matching losses of the stored samples, weighted by
        (1 - t)^2 (``loss_weighting="eps"``) or not."""
        x = jax.lax.stop_gradient(aux.x)[..., None, :]  # (..., 1, d)
        t = aux.t[..., None]
        x_t = t * aux.eps + (1.0 - t) * x
        v = self.velocity(params, x_t, obs[..., None, :], aux.t)
        losses = jnp.mean((v - (aux.eps - x)) ** 2, axis=-1)
        return losses * (1.0 - aux.t) ** 2 if self.config.loss_weighting == "eps" else losses

    def ratio_log_terms(self, params: Params, obs: jax.Array, aux: FlowAux) -> jax.Array:
        """(..., R) terms whose new-minus-old differences are the log ratios (F5): minus the CFM
        losses, one per draw (R = M, ``per_sample``) or their mean (R = 1, ``averaged``)."""
        losses = self.cfm_losses(params, obs, aux)
        if self.config.ratio == "per_sample":
            return -losses
        return -jnp.mean(losses, axis=-1, keepdims=True)

    # ---------------------------------------------------------------- evaluation
    def eval_action(self, params: Params, obs: jax.Array, key: jax.Array, sampler: str) -> jax.Array:
        noise = self.draw_eval_noise(key, obs.shape[:-1], sampler)
        return self.eval_action_from_noise(params, obs, noise, sampler)

    def eval_noise_shape(self, sampler: str) -> tuple[int, ...] | None:
        """'sample': x_1's normals (d,); 'zero-noise': None (x_1 = 0)."""
        self._check_sampler(sampler)
        return (self.action_size,) if sampler == "sample" else None

    def draw_eval_noise(self, key: jax.Array, batch_shape: tuple[int, ...], sampler: str) -> jax.Array | None:
        self._check_sampler(sampler)
        if sampler == "zero-noise":
            return None
        return jax.random.normal(key, (*batch_shape, self.action_size), jnp.float32)

    def eval_action_from_noise(self, params: Params, obs: jax.Array, noise: jax.Array | None,
                               sampler: str) -> jax.Array:
        self._check_sampler(sampler)
        x1 = jnp.zeros((*obs.shape[:-1], self.action_size), jnp.float32) if noise is None else noise
        return jax.lax.stop_gradient(self.squash(self.integrate(params, obs, x1)))

    def _check_sampler(self, sampler: str) -> None:
        if sampler not in self.samplers:
            raise ValueError(f"flow policy has no sampler {sampler!r}; choose from {self.samplers}")
