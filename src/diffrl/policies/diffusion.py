"""DIME diffusion policy with a whole-trajectory trust region (TruDi's actor).

TruDi (Le et al. 2026, arXiv 2606.15260) = REPPO with the DIME diffusion actor (Celik et al.
2025, arXiv 2502.02316) and the per-state KL measured on the whole denoising path. The chain
math (eqs. E1-E9) lives in :mod:`diffrl.policies.dis_chain`; this module binds it to a
:class:`~diffrl.nets.control.ControlNet` f_theta(x, s, n) (integer step index n as time,
near-zero output at init, so the initial policy is the Langevin chain towards p0) and to the
learned step sizes, and implements :class:`~diffrl.policies.base.PathwisePolicy`.

* ``rsample``: reparameterised chain; ``log_prob`` = DIME's ell (E7), an estimate of an
  upper bound on log pi(a|s); ``dual_log_prob`` = its running-cost part (ell - log p0(x_0),
  what the reference temperature dual uses) or ell itself (``dual_uses="full"``).
* ``trust_region_kl``: trajectory KL(old || new) (E8), closed form (E9, with log-variance terms
  when dt / friction are learned) or the sampled log-ratio, along old chains: ``kl_paths="fresh"``
  simulates K new old-policy chains per state (the reference; N sequential calls of the old
  network without gradient, then the new one on all N states of the chains in one batched call,
  :func:`dis_chain.fresh_path_kl`: the reference's values, cheaper to differentiate than its
  interleaved scan), ``"behaviour"`` reuses the acting chain the rollout stored (an old-policy draw
  at exactly that state, so the estimate stays unbiased; the same batched call and no call of the
  old network). The region chooses what is bounded (TruDi's ablation, and the on-policy
  DIME baseline): "trajectory" as above; "action", the KL of the action marginals only, which has
  no closed form and is replaced by the KL of their moment-matched Gaussians (E12), estimated
  without bias (for Gaussian marginals; consistently otherwise) from K >= 6 old and K new chains on
  common noise; "none", no trust region (the trajectory KL is logged). These are the training
  algorithm's settings (``--reppo.trust-region``, ``--reppo.kl-paths``...): its builder hands them
  to the policy as a :class:`DiffusionTrustRegion`.
* ``eval_action`` samplers (:mod:`diffrl.policies.dis_chain`, eqs. E10, E11):
  - "sde": the acting chain (E4); its end point is the policy.
  - "reversal-ode": x_{n+1} = x_n + eta_n f / 2 (:func:`dis_samplers.reversal_ode`), the
    probability-flow ODE the chain would have if it were the exact time reversal of its OU
    reference. A heuristic: DIME's chain (sum of eta = 0.089 sigma0^2 at the default schedule)
    is not, and at the DIME optimum for a N(0.5, 0.3^2) target its end-point variance is 4.21x
    the SDE's (closed form, N = 8). Exact only when grad log p_n = grad log p0 + f / 2 holds.
  - "noise-free": the acting chain with its noise dropped and the control scaled by c =
    ``noise_free_coef`` (:func:`dis_samplers.noise_free_chain`; the reference code's deterministic
    sampler, c = 1): at c = 1 the chain of conditional means, a mode-seeking deterministic policy
    (SDE's mean, less variance).
  No deterministic sampler built from f and eta step by step has the SDE's marginals in general:
  that needs the scores of the chain's own marginals (dis_chain's module docstring).
  The former names of the two, "ode" and "ode-c", are refused with a pointer to the new ones
  (:data:`RENAMED_SAMPLERS`); run directories and exports that stored them load mapped.

Deviations (``dime``, on-policy DIME): DIME's paper trains its chain off-policy (``dime-off``); the
on-policy ``dime`` baseline is TruDi's ablation, REPPO's loop with DIME's chain and loss and the trust
region on the action marginals, which no paper specifies further. Its KL is that of the marginals'
moment-matched Gaussians (E12): a change of the marginals that keeps their means and variances goes
unseen, and per state the estimate is noisy (K = 8: standard deviation 0.82x a pure mean shift's
KL), though unbiased for Gaussian marginals. The chain keeps REPPO-DIME's fixed step dt = 1/N
(``learn_dt`` False, the reference's default; DIME's off-policy code learns it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import struct

from diffrl.nets.control import ControlNet
from diffrl.nets.mlp import check_architecture
from diffrl.policies import dis_action_kl, dis_chain, dis_samplers
from diffrl.policies.base import Params, PathwiseSample, renamed_sampler_note

KL_ESTIMATORS = ("closed_form", "sampled")
TRUST_REGIONS = ("trajectory", "action", "none")
KL_PATHS = ("fresh", "behaviour")
DUAL_USES = ("running_cost", "full")
RENAMED_SAMPLERS = {"ode": "reversal-ode", "ode-c": "noise-free"}
"""TruDi's retired sampler names -> current ones (same computations). "ode" claimed to be the
chain's exact probability-flow ODE, which it is only under the time-reversal relation; a name
typed by a user is refused with this hint, a name stored by an older run or export is mapped."""


@dataclass(frozen=True)
class DiffusionPolicyConfig:
    num_steps: int = 8
    """N denoising steps (TruDi/REPPO-DIME 8; DIME 16)."""
    sigma0: float = 2.5
    """Standard deviation of the prior p0 = N(0, sigma0^2 I) (not learned)."""
    hidden: tuple[int, ...] = (256, 256, 256)
    """Hidden widths of the control network's main MLP."""
    act: str = "gelu"
    """Activation of the control network."""
    norm: str = "none"
    """Normalisation in the control MLP: 'none' (reference), 'layer' or 'rms'."""
    num_frequencies: int = 32
    """Fourier time frequencies of the control network (reference 32)."""
    arch: str = "mlp"
    """Control network architecture: "mlp" (hidden widths, the reference) or "residual"
    (pre-LayerNorm residual blocks of width hidden[0], one per entry of hidden, 4x inner width:
    the stack that scales to the AMDP paper's ~100M parameters)."""
    matmul_dtype: str = "float32"
    """Dtype of the control network's matrix products: float32, or bfloat16 (parameters, gradients
    and optimiser state stay float32)."""
    time_dim: int = 16
    """Time-embedding width (reference 32 -> 16)."""
    output_scale: float = 1e-8
    """Scale of the control net's output-kernel init (f ~ 0 at init)."""
    squash: str = "tanh"
    """Squashing a = tanh(x_N) ('tanh', reference) or erf(k x_N) ('erf')."""
    erf_scale: float | None = None
    """k of the erf squash; None -> 1/(sqrt(2) sigma0), which maps p0 exactly to U(-1, 1)."""
    friction_init: float = 1.0
    """Initial friction; sigma^2 = 1/friction per action dim."""
    learn_friction: bool = True
    """Learn the per-dim friction (softplus-parameterised), as the reference does."""
    dt_init: float | None = None
    """Base step dt (multiplied by the cosine schedule); None -> 1/num_steps (REPPO-DIME 0.125)."""
    learn_dt: bool = False
    """Learn dt (softplus-parameterised); reference REPPO-DIME default False (DIME: True)."""
    per_step_dt: bool = False
    """With learn_dt, one learned dt per step instead of one scalar."""
    schedule_s: float = 0.008
    """Offset s of the cosine dt schedule."""
    schedule_min: float = 0.001
    """Floor m of the cosine dt schedule."""
    noise_free_coef: float = 1.0
    """Control scale c of the 'noise-free' evaluation sampler (reference shipped 1.0)."""
    step_std_min: float = 0.0
    """Floor on each denoising step's noise std (DPPO's clipped denoising noise, which keeps the late,
    small steps exploring; 0 keeps DIME's chain). Read by dppo only: TruDi's and DIME's KL and entropy
    bound assume the chain without it."""
    denoising_discount: float = 1.0
    """dppo: weight gamma_d^(N - 1 - n) on the ratio of denoising step n (DPPO's denoising discount:
    early, noisier steps count less); 1 weighs all steps alike."""
    dual_uses: str = "running_cost"
    """dual_log_prob: 'running_cost' (ell - log p0(x_0), reference) or 'full' (ell)."""

    renamed_fields: ClassVar[dict[str, str]] = {"ode_coef": "noise_free_coef"}
    """Old -> new field names; configs stored under an old name load (records.config_from_json)."""
    moved_fields: ClassVar[dict[str, str]] = {
        "trust_region": "reppo.trust_region", "kl_estimator": "reppo.kl_estimator",
        "kl_samples": "reppo.kl_samples", "kl_paths": "reppo.kl_paths"}
    """Fields that moved to the algorithm that enforces them (diffrl.config.MOVED_FIELDS): a policy
    config stored with them (an export) loads without them, as acting never read them."""

    def __post_init__(self):
        if self.squash not in dis_chain.SQUASHES:
            raise ValueError(f"squash must be one of {dis_chain.SQUASHES}, got '{self.squash}'")
        if self.dual_uses not in DUAL_USES:
            raise ValueError(f"dual_uses must be one of {DUAL_USES}, got '{self.dual_uses}'")
        if self.num_steps < 1:
            raise ValueError("num_steps must be >= 1")
        if self.step_std_min < 0 or not 0 < self.denoising_discount <= 1:
            raise ValueError("diffusion.step_std_min must be >= 0 and diffusion.denoising_discount in (0, 1]")
        if self.sigma0 <= 0 or self.friction_init <= 0 or (self.dt_init is not None and self.dt_init <= 0):
            raise ValueError("sigma0, friction_init and dt_init must be > 0")

    def validate(self) -> None:
        check_architecture(self.arch, self.hidden, self.matmul_dtype, "diffusion")
        if self.num_steps < 1:
            raise ValueError("diffusion.num_steps must be >= 1")


@dataclass(frozen=True)
class DiffusionTrustRegion:
    """The trust region the algorithm training the chain enforces (TruDi, arXiv 2606.15260): handed
    to :class:`DiffusionPolicy` by its builder from the algorithm's settings (``--reppo.trust-region``,
    ``--reppo.kl-estimator``, ``--reppo.kl-samples``, ``--reppo.kl-paths``), which document each."""

    region: str = "trajectory"
    """What :meth:`DiffusionPolicy.trust_region_kl` bounds: 'trajectory' (E8), 'action' (E12) or 'none'."""
    kl_estimator: str = "closed_form"
    """The trajectory KL returned: 'closed_form' (E9) or 'sampled'."""
    kl_samples: int = 4
    """K fresh old paths per state (trajectory KL with 'fresh'), or K old and K new chains ('action')."""
    kl_paths: str = "fresh"
    """Old paths of the trajectory KL: 'fresh' (simulated) or 'behaviour' (the stored acting chain)."""

    def __post_init__(self):
        if self.region not in TRUST_REGIONS:
            raise ValueError(f"trust region must be one of {TRUST_REGIONS}, got '{self.region}'")
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got '{self.kl_estimator}'")
        if self.kl_paths not in KL_PATHS:
            raise ValueError(f"kl_paths must be one of {KL_PATHS}, got '{self.kl_paths}'")
        if self.region == "action" and self.kl_paths == "behaviour":
            raise ValueError("the 'action' trust region draws K fresh old and new chains per state; "
                             "kl_paths='behaviour' (one stored path) applies to 'trajectory' and 'none'")
        if self.kl_samples < 1 or (self.region == "action" and self.kl_samples < dis_action_kl.MIN_ACTION_KL_SAMPLES):
            raise ValueError(f"kl_samples must be >= 1, and >= {dis_action_kl.MIN_ACTION_KL_SAMPLES} for the 'action' "
                             f"trust region (got {self.kl_samples})")


@struct.dataclass
class DiffusionAux:
    """What ``sample`` returns besides the action (stop-gradient; leading axes as obs).

    noise: (..., N + 1, d) the chain's standard-normal draws (row 0 -> x_0), enough to
      replay the path exactly (:meth:`DiffusionPolicy.replay`); step axis second to last so
      rollouts can stack and shuffle leading (T, B) axes.
    x_final: (..., d) pre-squash x_N.  log_prob, dual_log_prob: (...,) as in rsample.
    path: (..., N + 1, d) the states x_0..x_N, stored only with ``kl_paths="behaviour"`` (the
      trust-region KL is measured along them); None otherwise.
    """

    noise: jax.Array
    x_final: jax.Array
    log_prob: jax.Array
    dual_log_prob: jax.Array
    path: jax.Array | None = None


def _softplus_inverse(y: float) -> float:
    return y + math.log(-math.expm1(-y))


class DiffusionPolicy:
    """DIME chain policy implementing ``PathwisePolicy``. Params: {'control', ['dt_raw'], ['friction_raw']}.

    Only learned step-size parameters are stored (softplus pre-activations), so optimisers
    never touch constants.
    """

    samplers = ("sde", "reversal-ode", "noise-free")
    acting_sampler = "sde"
    """The evaluation sampler that reproduces ``sample`` (acting) from the same draws."""
    renamed_samplers = RENAMED_SAMPLERS

    def __init__(self, config: DiffusionPolicyConfig, action_size: int, store_path: bool = False,
                 trust_region: DiffusionTrustRegion | None = None):
        """``trust_region``: the trust region of the algorithm that trains the chain through
        :meth:`trust_region_kl` (TruDi's, DIME's); None for one that does not call it (acting only,
        DPPO, off-policy DIME)."""
        config.validate()
        self.config = config
        self.action_size = action_size
        self.trust_region = trust_region
        self.store_path = store_path or (trust_region is not None and trust_region.kl_paths == "behaviour")
        """Whether ``sample`` stores the acting chain's states (the behaviour KL and DPPO's ratios read them)."""
        self.var_floor = config.step_std_min ** 2
        self.net = ControlNet(
            action_size=action_size,
            hidden=tuple(config.hidden),
            act=config.act,
            norm=config.norm,
            num_frequencies=config.num_frequencies,
            time_dim=config.time_dim,
            output_scale=config.output_scale,
            arch=config.arch,
            matmul_dtype=config.matmul_dtype,
        )
        self.dt_init = config.dt_init if config.dt_init is not None else 1.0 / config.num_steps
        self.erf_scale = config.erf_scale if config.erf_scale is not None else 1.0 / (math.sqrt(2.0) * config.sigma0)
        self.schedule = dis_chain.cosine_schedule(config.num_steps, config.schedule_s, config.schedule_min)

    # ---------------------------------------------------------------- parameters
    def init(self, key: jax.Array, obs_size: int) -> Params:
        d = self.action_size
        params = {"control": self.net.init(key, jnp.zeros((1, d)), jnp.zeros((1, obs_size)), jnp.zeros((1,)))}
        if self.config.learn_dt:
            shape = (self.config.num_steps,) if self.config.per_step_dt else ()
            params["dt_raw"] = jnp.full(shape, _softplus_inverse(self.dt_init), jnp.float32)
        if self.config.learn_friction:
            params["friction_raw"] = jnp.full((d,), _softplus_inverse(self.config.friction_init), jnp.float32)
        return params

    def step_sizes(self, params: Params) -> jax.Array:
        """(N, d) eta_n = dt_n sigma^2, eq. (E2)."""
        dt = jax.nn.softplus(params["dt_raw"]) if "dt_raw" in params else jnp.float32(self.dt_init)
        if "friction_raw" in params:
            friction = jax.nn.softplus(params["friction_raw"])
        else:
            friction = jnp.full((self.action_size,), self.config.friction_init, jnp.float32)
        return dis_chain.step_sizes(dt, friction, self.schedule)

    def diagnostics(self, params: Params) -> dict:
        """Scalar summaries of the learned step sizes for logging."""
        eta = self.step_sizes(params)
        return {"eta_total_mean": jnp.mean(jnp.sum(eta, axis=0)), "eta_last_mean": jnp.mean(eta[-1])}

    def _control_fn(self, params: Params, obs: jax.Array) -> dis_chain.ControlFn:
        return lambda x, n: self.net.apply(params["control"], x, obs, n)

    # ---------------------------------------------------------------- sampling
    def _squash(self, x: jax.Array) -> jax.Array:
        return dis_chain.squash(x, self.config.squash, self.erf_scale)

    def _run(self, params: Params, obs: jax.Array, noise: jax.Array,
             return_path: bool = False) -> tuple[PathwiseSample, dis_chain.ChainSample]:
        """Chain from noise (N + 1, ..., d): (PathwiseSample, the ChainSample)."""
        cfg = self.config
        chain = dis_chain.sample_chain(self._control_fn(params, obs), self.step_sizes(params), cfg.sigma0, noise,
                                       return_path=return_path, var_floor=self.var_floor)
        ell, running_cost = dis_chain.pseudo_log_prob(chain, cfg.sigma0, cfg.squash, self.erf_scale)
        dual = running_cost if cfg.dual_uses == "running_cost" else ell
        sample = PathwiseSample(action=self._squash(chain.x_final), log_prob=ell, dual_log_prob=dual)
        return sample, chain

    def _noise(self, key: jax.Array, batch_shape: tuple[int, ...]) -> jax.Array:
        return dis_chain.draw_noise(key, self.config.num_steps, batch_shape, self.action_size)

    def rsample(self, params: Params, obs: jax.Array, key: jax.Array) -> PathwiseSample:
        """Reparameterised chain sample; all fields differentiable w.r.t. params (E4, E7)."""
        return self._run(params, obs, self._noise(key, obs.shape[:-1]))[0]

    def sample(self, params: Params, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, DiffusionAux]:
        """Acting: (action (..., d), DiffusionAux), stop-gradient."""
        noise = self._noise(key, obs.shape[:-1])
        out, chain = self._run(params, obs, noise, return_path=self.store_path)
        path = jnp.moveaxis(chain.path, 0, -2) if self.store_path else None
        aux = DiffusionAux(jnp.moveaxis(noise, 0, -2), chain.x_final, out.log_prob, out.dual_log_prob, path)
        return jax.lax.stop_gradient((out.action, aux))

    def replay(self, params: Params, obs: jax.Array, aux: DiffusionAux) -> PathwiseSample:
        """Re-run the chain of a stored sample's noise under ``params`` (differentiable).

        Under the params that produced ``aux`` this reproduces its action and ell exactly.
        """
        return self._run(params, obs, jnp.moveaxis(aux.noise, -2, 0))[0]

    def ratio_log_terms(self, params: Params, obs: jax.Array, aux: DiffusionAux) -> jax.Array:
        """(..., N) DPPO's per-step terms: log F_n(x_{n+1} | x_n) of the stored acting chain under
        ``params`` (eq. E4, each step's variance floored at ``step_std_min``^2), averaged over the
        action dimensions as DPPO's code does (so a ratio's scale does not grow with d). New minus
        old terms are the log ratios of the denoising MDP's actions; the new control is evaluated
        at all N stored states in one call."""
        if aux.path is None:
            raise ValueError("the per-step ratios need the stored acting chain: build the policy with "
                             "store_path=True (the dppo algorithm does)")
        path = jax.lax.stop_gradient(jnp.moveaxis(aux.path, -2, 0))  # (N + 1, ..., d)
        per_step = dis_chain.stored_path_log_probs(self._control_fn(params, obs), self.step_sizes(params),
                                                   self.config.sigma0, path, self.var_floor)  # (N, ...)
        return jnp.moveaxis(per_step / self.action_size, 0, -1)

    @property
    def ratio_weights(self) -> jax.Array | None:
        """(N,) DPPO's denoising discount gamma_d^(N - 1 - n) on each step's ratio (None when 1)."""
        if self.config.denoising_discount == 1.0:
            return None
        n = self.config.num_steps
        return self.config.denoising_discount ** jnp.arange(n - 1, -1, -1, dtype=jnp.float32)

    def eval_action(self, params: Params, obs: jax.Array, key: jax.Array, sampler: str) -> jax.Array:
        """(..., d) evaluation action: 'sde', 'reversal-ode' (E10) or 'noise-free' (E11)."""
        noise = self.draw_eval_noise(key, obs.shape[:-1], sampler)
        return self.eval_action_from_noise(params, obs, noise, sampler)

    # ---------------------------------------------------------------- explicit noise
    def eval_noise_shape(self, sampler: str) -> tuple[int, ...]:
        """'sde': (N + 1, d), x_0's and every step's normals; deterministic samplers: (d,), x_0's."""
        self._check_sampler(sampler)
        if sampler == "sde":
            return (self.config.num_steps + 1, self.action_size)
        return (self.action_size,)

    def draw_eval_noise(self, key: jax.Array, batch_shape: tuple[int, ...], sampler: str) -> jax.Array:
        """The same draws as acting (:meth:`sample`) and as before the noise was explicit."""
        self._check_sampler(sampler)
        if sampler == "sde":  # drawn step-major (as rsample), handed over batch-major
            return jnp.moveaxis(self._noise(key, tuple(batch_shape)), 0, -2)
        return jax.random.normal(key, (*batch_shape, self.action_size), jnp.float32)

    def eval_action_from_noise(self, params: Params, obs: jax.Array, noise: jax.Array, sampler: str) -> jax.Array:
        """(..., d) evaluation action from standard normals (..., *eval_noise_shape(sampler))."""
        cfg = self.config
        self._check_sampler(sampler)
        if sampler == "sde":
            return jax.lax.stop_gradient(self._run(params, obs, jnp.moveaxis(noise, -2, 0))[0].action)
        x0 = cfg.sigma0 * noise
        control_fn, eta = self._control_fn(params, obs), self.step_sizes(params)
        if sampler == "reversal-ode":
            x_final = dis_samplers.reversal_ode(control_fn, eta, x0)
        else:
            x_final = dis_samplers.noise_free_chain(control_fn, eta, cfg.sigma0, x0, cfg.noise_free_coef)
        return jax.lax.stop_gradient(self._squash(x_final))

    def _check_sampler(self, sampler: str) -> None:
        if sampler not in self.samplers:
            raise ValueError(f"unknown sampler {sampler!r}; choose from {self.samplers}"
                             + renamed_sampler_note([sampler], self))

    # ---------------------------------------------------------------- trust region
    def trust_region_kl(
        self, old_params: Params, params: Params, obs: jax.Array, key: jax.Array,
        behaviour: DiffusionAux | None = None, current: None = None,
    ) -> tuple[jax.Array, dict]:
        """(...,) per-state KL(old || new) that the trust region bounds (``trust_region.region``):
        the trajectory KL, eq. (E8) ('trajectory'); the unbiased moment-matched action KL, eq. (E12),
        from K fresh old and new chains ('action'); or 0 ('none', the trajectory KL logged only).

        Trajectory KL: ``trust_region.kl_paths="fresh"``: averaged over K old chains simulated from ``key``;
        ``"behaviour"``: along the stored acting chain ``behaviour`` (the aux ``sample`` returned
        under ``old_params`` at these ``obs``), which this mode requires.
        Differentiable w.r.t. ``params`` only. Metrics log both estimators' means. ``current``
        is not used: the new control is needed at other states than those of any rsample.
        """
        if self.trust_region is None:
            raise ValueError("trust_region_kl needs the algorithm's trust region: build the policy with "
                             "trust_region=DiffusionTrustRegion(...) (trudi and dime do)")
        region = self.trust_region.region
        old_params = jax.lax.stop_gradient(old_params)
        if region == "action":
            kl = self._action_kl(old_params, params, obs, key)
            return kl, {"kl_action": jax.lax.stop_gradient(jnp.mean(kl))}
        if region == "none":  # plain DIME: no constraint; how far the path moved is still logged
            _, metrics = self._trajectory_kl(old_params, jax.lax.stop_gradient(params), obs, key, behaviour)
            return jnp.zeros(obs.shape[:-1], jnp.float32), metrics
        return self._trajectory_kl(old_params, params, obs, key, behaviour)

    def _action_kl(self, old_params: Params, params: Params, obs: jax.Array, key: jax.Array) -> jax.Array:
        """(...,) moment-matched KL of the action marginals, eq. (E12), estimated without bias from K
        old and K new chains per state driven by the same noise (the new ones reparameterised, so the
        gradient flows; :func:`dis_action_kl.moment_matched_kl`)."""
        cfg = self.config
        noise = self._noise(key, (self.trust_region.kl_samples, *obs.shape[:-1]))
        old = dis_chain.sample_chain(self._control_fn(old_params, obs), self.step_sizes(old_params), cfg.sigma0, noise)
        new = dis_chain.sample_chain(self._control_fn(params, obs), self.step_sizes(params), cfg.sigma0, noise)
        return dis_action_kl.moment_matched_kl(jax.lax.stop_gradient(old.x_final), new.x_final)

    def _trajectory_kl(self, old_params, params, obs, key, behaviour) -> tuple[jax.Array, dict]:
        cfg, tr = self.config, self.trust_region
        if tr.kl_paths == "behaviour":
            if behaviour is None or behaviour.path is None:
                raise ValueError("kl_paths='behaviour' needs the stored acting chain: pass the "
                                 "aux that sample() returned (with its path) as `behaviour`")
            closed, sampled = dis_chain.stored_path_kl(
                self._control_fn(params, obs),  # called once, on all steps: x (N, ..., d), n (N, 1, ...)
                self.step_sizes(old_params),
                self.step_sizes(params),
                cfg.sigma0,
                jnp.moveaxis(behaviour.path, -2, 0),
                jnp.moveaxis(behaviour.noise, -2, 0),
            )
        else:
            noise = self._noise(key, (tr.kl_samples, *obs.shape[:-1]))
            closed, sampled = dis_chain.fresh_path_kl(
                self._control_fn(old_params, obs),
                self._control_fn(params, obs),  # called once, on all steps of the old chains
                self.step_sizes(old_params),
                self.step_sizes(params),
                cfg.sigma0,
                noise,
            )
            closed, sampled = jnp.mean(closed, axis=0), jnp.mean(sampled, axis=0)
        metrics = jax.lax.stop_gradient({"kl_closed_form": jnp.mean(closed), "kl_sampled": jnp.mean(sampled)})
        return (closed if tr.kl_estimator == "closed_form" else sampled), metrics
