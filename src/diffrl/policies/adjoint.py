"""AMDP's diffusion policy: a controlled SDE on pre-squash actions, erf-squashed.

AMDP (Thilges, Celik, Blessing, Gospodinov, Neumann 2026, arXiv 2606.22630). pi(a|s) is the
law of a = erf(k X_1) for the controlled process
dX = sigma_t u_theta(X_t, t, s) dt + sigma_t dW, X_0 = 0 (``reference_sde``, eqs. R1-R9);
the actor is trained by reciprocal adjoint matching (``diffrl.maths.adjoint_matching``, A1-A6).

DECISION (parameterisation): u_theta(x, s, t) = sigma_t f_theta(x, s, t) with f_theta a
``ControlNet`` (continuous t in [0, 1], near-zero output at init, so the initial policy is
the reference and pi_a is uniform on the box). The optimal f* = -E[a | X_t] (the negative
lean adjoint, A2) is O(1) at all t, whereas u* = sigma_t f* spans the 200x range of sigma_t.

Capabilities: Policy (``sample``, ``eval_action`` with "sde" or "ode") and PathwisePolicy
(``rsample`` = a differentiable chain whose ``log_prob`` is the upper-bound estimate
C - d log 2 of log pi(a|s), R7; ``trust_region_kl`` = the exact KL of the discrete chains
estimated on one old path), so the reverse-KL baseline (A7) is REPPO's own update on this
policy (algorithm ``amdp-backprop``).
The AMDP update itself uses :meth:`score_clip_limit`, :meth:`matching_scores` and
:meth:`matching_loss`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from diffrl.maths import adjoint_matching as am
from diffrl.nets.control import ControlNet
from diffrl.nets.mlp import check_architecture
from diffrl.policies.base import PathwiseSample
from diffrl.policies.reference_sde import (
    ChainSample,
    ReferenceSDE,
    erf_squash,
    probability_flow_ode_from_noise,
    sample_bridge,
    simulate_controlled,
    simulate_controlled_from_noise,
)

BRIDGE_TIMES = ("uniform", "grid")


@dataclass(frozen=True)
class AdjointPolicyConfig:
    num_steps: int = 16
    """Euler-Maruyama steps N of the acting chain (and of the PF-ODE evaluation sampler)."""
    sigma_min: float = 0.01
    """Geometric schedule's small end (sigma_t at t = 1 up to sqrt(2 ln r))."""
    sigma_max: float = 2.0
    """Geometric schedule's large end; the reference end point is ~N(0, sigma_max^2)."""
    hidden: tuple[int, ...] = (256, 256, 256)
    """Hidden widths of the control network f_theta."""
    act: str = "gelu"
    """Hidden activation of f_theta."""
    norm: str = "none"
    """Normalisation after hidden layers of f_theta: none, layer or rms."""
    num_frequencies: int = 16
    """Fourier time features of the control network (the port uses 16)."""
    arch: str = "mlp"
    """Control network architecture: "mlp" (hidden widths, the reference) or "residual"
    (pre-LayerNorm residual blocks of width hidden[0], one per entry of hidden, 4x inner width:
    the stack that scales to the AMDP paper's ~100M parameters)."""
    matmul_dtype: str = "float32"
    """Dtype of the control network's matrix products: float32, or bfloat16 (parameters, gradients
    and optimiser state stay float32)."""
    output_scale: float = 1e-8
    """Scale of f_theta's output-layer init (near-zero control: initial policy = reference)."""
    control_bound: float = 0.0
    """If > 0, a smooth bound B on each coordinate of f_theta (B tanh(f / B)), so the control cost
    of a chain, C = sum_n 1/2 sigma(t_n)^2 |f|^2 / N < 1/2 B^2 d sum_n sigma(t_n)^2 / N (43.8 d for
    B = 4, N = 16; 1/2 B^2 sigma_max^2 d = 32 d as N grows), and with it the entropy estimate
    d log 2 - C are bounded: the analogue of a Gaussian policy's floor on its log std. The mean end
    point (about int sigma_t^2 f dt) stays free up to about +-B sigma_max^2 (B = 4, sigma_max = 2:
    +-16 = 8 sigma_max, far into the erf's saturation), so every action stays reachable.
    0: unbounded (only the network's numerical clip at 1e4)."""
    grad_clip_quantile: float = 0.95
    """Per-sample score norms are clipped at min(this quantile of the update batch's norms,
    grad_clip_max)."""
    grad_clip_max: float = 5.0
    """Absolute cap of the per-sample score norm."""
    loss_sigma_power: float = -1.0
    """p in the matching weight w(t) = alpha^2 sigma_t^p (A4); -1 as in the port."""
    matching_steps: int = 1
    """Gradient steps per minibatch of stored (s, X_1, score), each with fresh bridge draws
    (t, X_t); >1 reuses the critic gradients without simulating or querying Q again."""
    bridge_time: str = "uniform"
    """Bridge times: uniform on [0, 1) (AMDP) or on the sampler grid {n / N}."""
    ode_coef: float = 1.0
    """c scaling the control in the PF-ODE sampler (1: the probability-flow ODE)."""
    entropy_target_mult: float = -3.5
    """Entropy target H* = entropy_target_mult * action_size for the temperature dual (the same
    convention as --reppo.entropy-target-mult)."""

    moved_fields: ClassVar[dict[str, str]] = {
        "trust_region": "reppo.kl_multiplier", "kl_bound": "reppo.kl_bound", "lambda_init": "reppo.lambda_init"}
    """Fields that moved to the algorithm that enforces them (diffrl.config.MOVED_FIELDS; amdp-off's
    home is its offpolicy section): a policy config stored with them (an export) loads without them,
    as acting never read them."""

    def validate(self) -> None:
        if self.num_steps < 1:
            raise ValueError("adjoint.num_steps must be >= 1")
        if self.bridge_time not in BRIDGE_TIMES:
            raise ValueError(f"adjoint.bridge_time must be one of {BRIDGE_TIMES}, got {self.bridge_time!r}")
        check_architecture(self.arch, self.hidden, self.matmul_dtype, "adjoint")
        if self.control_bound < 0.0:
            raise ValueError(f"adjoint.control_bound must be >= 0 (got {self.control_bound})")
        if not 0.0 < self.grad_clip_quantile <= 1.0:
            raise ValueError("adjoint.grad_clip_quantile must be in (0, 1]")
        if self.matching_steps < 1:
            raise ValueError("adjoint.matching_steps must be >= 1")
        ReferenceSDE(self.sigma_min, self.sigma_max)


@dataclass(frozen=True)
class DriftTrustRegion:
    """The trust region on the drift (A5, A6) that the algorithm fitting the policy by adjoint matching
    enforces (AMDP, arXiv 2606.22630): handed to :class:`AdjointPolicy` by its builder from the
    algorithm's settings (``--reppo.kl-multiplier``, ``--reppo.kl-bound``; amdp-off's
    ``--offpolicy.*``), which document each."""

    multiplier: str = "closed_form"
    """How the multiplier lambda is chosen: dual (the algorithm's learned log lambda), closed_form
    (solved per minibatch, A6) or none."""
    kl_bound: float = 0.1
    """eps, the bound on the mean drift KL (A5) per update."""

    def __post_init__(self):
        if self.multiplier not in am.TRUST_REGIONS:
            raise ValueError(f"the drift trust region's multiplier must be one of {am.TRUST_REGIONS}, "
                             f"got {self.multiplier!r}")
        if not self.kl_bound > 0.0:
            raise ValueError(f"the drift trust region's kl_bound must be > 0 (got {self.kl_bound})")


@struct.dataclass
class AdjointAux:
    """What a rollout stores per action.

    pre_squash: (..., d) X_1, the regression data of the next update.
    log_prob_bound: (...,) C - d log 2, an upper-bound estimate of log pi(a|s) (R7).
    """

    pre_squash: jax.Array
    log_prob_bound: jax.Array


class AdjointPolicy:
    """Implements Policy and PathwisePolicy (see policies/base.py) plus AMDP's matching loss."""

    samplers = ("sde", "ode")
    acting_sampler = "sde"
    """The evaluation sampler that reproduces ``sample`` (acting) from the same draws."""

    def __init__(self, config: AdjointPolicyConfig, action_size: int, trust_region: DriftTrustRegion | None = None):
        """``trust_region``: the drift trust region of the algorithm that calls :meth:`matching_loss`
        (amdp, amdp-off); None for one that does not (acting only, amdp-backprop)."""
        config.validate()
        self.config = config
        self.action_size = action_size
        self.trust_region = trust_region
        self.ref = ReferenceSDE(config.sigma_min, config.sigma_max)
        self.net = ControlNet(
            action_size=action_size,
            hidden=tuple(config.hidden),
            act=config.act,
            norm=config.norm,
            num_frequencies=config.num_frequencies,
            output_scale=config.output_scale,
            bound=config.control_bound,
            arch=config.arch,
            matmul_dtype=config.matmul_dtype,
        )
        # one compilation of the initialisers instead of eager dispatch of every op
        self._init = jax.jit(self.net.init)

    # -- network ----------------------------------------------------------------------
    def init(self, key: jax.Array, obs_size: int):
        return self._init(key, jnp.zeros((1, self.action_size)), jnp.zeros((1, obs_size)), jnp.zeros((1,)))

    def control(self, params, x: jax.Array, obs: jax.Array, t: jax.Array) -> jax.Array:
        """u_theta = sigma_t f_theta(x, s, t). x: (..., d), obs: (..., o), t broadcastable to (...)."""
        t = jnp.asarray(t, jnp.float32)  # not broadcast: the net embeds each distinct t once
        return self.ref.sigma(t)[..., None] * self.net.apply(params, x, obs, t)

    def _control_fn(self, params, obs) -> Callable[[jax.Array, jax.Array], jax.Array]:
        return lambda x, t: self.control(params, x, obs, t)

    # -- sampling ---------------------------------------------------------------------
    def simulate(self, params, obs: jax.Array, key: jax.Array, return_path: bool = False) -> ChainSample:
        """The acting chain for observations (..., o) (differentiable w.r.t. params)."""
        shape = obs.shape[:-1] + (self.action_size,)
        return simulate_controlled(
            self._control_fn(params, obs), self.ref, self.config.num_steps, key, shape, return_path=return_path
        )

    def squash(self, x: jax.Array) -> jax.Array:
        return erf_squash(x, self.ref.erf_scale)

    def log_prob_bound(self, control_cost: jax.Array) -> jax.Array:
        """(...,) C - d log 2: estimate of an upper bound on log pi(a|s) (R7)."""
        return control_cost - self.action_size * math.log(2.0)

    @property
    def target_entropy(self) -> float:
        """H* = entropy_target_mult * d (AMDP: -3.5 d), compared with -log_prob_bound."""
        return self.config.entropy_target_mult * self.action_size

    def sample(self, params, obs, key):
        chain = jax.lax.stop_gradient(self.simulate(params, obs, key))
        aux = AdjointAux(pre_squash=chain.x1, log_prob_bound=self.log_prob_bound(chain.control_cost))
        return self.squash(chain.x1), aux

    def eval_action(self, params, obs, key, sampler: str = "sde"):
        noise = self.draw_eval_noise(key, obs.shape[:-1], sampler)
        return self.eval_action_from_noise(params, obs, noise, sampler)

    # -- explicit noise -----------------------------------------------------------------
    def eval_noise_shape(self, sampler: str) -> tuple[int, ...]:
        """'sde': (N, d), every step's normals; 'ode': (d,), the bridge noise z of the first step."""
        self._check_sampler(sampler)
        return (self.config.num_steps, self.action_size) if sampler == "sde" else (self.action_size,)

    def draw_eval_noise(self, key, batch_shape, sampler: str):
        """The same draws as acting (:meth:`sample`) and as before the noise was explicit."""
        self._check_sampler(sampler)
        if sampler == "sde":  # drawn step-major (simulate_controlled), handed over batch-major
            eps = jax.random.normal(key, (self.config.num_steps, *batch_shape, self.action_size))
            return jnp.moveaxis(eps, 0, -2)
        return jax.random.normal(key, (*batch_shape, self.action_size))

    def eval_action_from_noise(self, params, obs, noise, sampler: str):
        self._check_sampler(sampler)
        control_fn = self._control_fn(params, obs)
        if sampler == "sde":
            chain = simulate_controlled_from_noise(control_fn, self.ref, jnp.moveaxis(noise, -2, 0))
            return jax.lax.stop_gradient(self.squash(chain.x1))
        x1 = probability_flow_ode_from_noise(control_fn, self.ref, self.config.num_steps, noise,
                                             self.config.ode_coef)
        return self.squash(x1)

    def _check_sampler(self, sampler: str) -> None:
        if sampler not in self.samplers:
            raise ValueError(f"adjoint policy has no sampler {sampler!r}; choose from {self.samplers}")

    # -- PathwisePolicy (reverse-KL baseline, REPPO-style code) -------------------------
    def rsample(self, params, obs, key) -> PathwiseSample:
        chain = self.simulate(params, obs, key)
        lp = self.log_prob_bound(chain.control_cost)
        return PathwiseSample(action=self.squash(chain.x1), log_prob=lp, dual_log_prob=lp)

    def trust_region_kl(self, old_params, params, obs, key, behaviour=None, current=None):
        """(...,) KL(P_old || P_theta) of the discrete chains on one old path, and metrics.

        The path is simulated afresh (``behaviour``, the stored acting aux, and ``current`` are
        not used).

        Both chains share the step noise sbar_n, so the per-step Gaussian KL is exactly
        1/2 ||u_theta(x_n, t_n) - u_old(x_n, t_n)||^2 dt: the sum is an unbiased estimate of
        the path KL, an upper bound on KL(pi_old(.|s) || pi_theta(.|s)) by data processing.
        """
        chain = jax.lax.stop_gradient(self.simulate(old_params, obs, key, return_path=True))
        n = self.config.num_steps
        t = (jnp.arange(n, dtype=jnp.float32) / n).reshape((n,) + (1,) * (obs.ndim - 1))
        u_new = self.control(params, chain.path[:-1], obs, t)  # (N, ..., d), all steps at once
        kl = jnp.sum(am.drift_kl(u_new, chain.controls), axis=0) / n
        return kl, {"kl/path": jnp.mean(kl)}

    # -- AMDP update ---------------------------------------------------------------------
    def score_clip_limit(self, pre_squash: jax.Array, grad_q_action: jax.Array) -> jax.Array:
        """() the norm clip limit of the scores grad_x Q(s, erf(k X_1)) (A2): min(grad_clip_quantile
        of their norms, grad_clip_max). Call it on the whole stored batch (a batch statistic)."""
        score = am.pre_squash_score(pre_squash, grad_q_action, self.ref.erf_scale)
        return am.score_clip_limit(score, self.config.grad_clip_quantile, self.config.grad_clip_max)

    def matching_scores(
        self, pre_squash: jax.Array, grad_q_action: jax.Array, limit: jax.Array
    ) -> tuple[jax.Array, dict]:
        """(..., d) grad_x Q(s, erf(k X_1)) from grad_a Q at the stored actions (A2), each
        norm-clipped at ``limit`` (from :meth:`score_clip_limit`)."""
        return am.clip_score_norm(am.pre_squash_score(pre_squash, grad_q_action, self.ref.erf_scale), limit)

    def matching_loss(
        self,
        params,
        old_params,
        obs: jax.Array,
        pre_squash: jax.Array,
        score: jax.Array,
        key_bridge: jax.Array,
        alpha: jax.Array,
        log_lambda: jax.Array | float = 0.0,
    ) -> tuple[jax.Array, dict]:
        """RAM loss with the algorithm's drift trust region (``trust_region``) on one minibatch (B, ...).

        Draws (t, X_t) from the reference bridge of the stored X_1 (``pre_squash``);
        ``score`` from :meth:`matching_scores`. See ``adjoint_matching.trust_region_matching_loss``.
        """
        c, tr = self.config, self.trust_region
        if tr is None:
            raise ValueError("matching_loss needs the algorithm's drift trust region: build the policy with "
                             "trust_region=DriftTrustRegion(...) (amdp and amdp-off do)")
        grid = c.num_steps if c.bridge_time == "grid" else None
        t, x_t = sample_bridge(key_bridge, self.ref, pre_squash, grid)
        return am.trust_region_matching_loss(
            self.control, params, old_params, obs, score, t, x_t, alpha, self.ref,
            mode=tr.multiplier, kl_bound=tr.kl_bound, log_lambda=log_lambda, sigma_power=c.loss_sigma_power,
        )
