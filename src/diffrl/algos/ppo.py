"""PPO (Schulman et al. 2017, arXiv 1707.06347): clipped surrogate, GAE, minibatch epochs.

Losses (per minibatch, advantages A optionally standardised):
  L_pi = -mean(min(rho A, clip(rho, 1-eps, 1+eps) A)),  rho = exp(log pi(a|s) - log pi_old(a|s))
  L_V  = 0.5 mean((V(s) - R)^2)  (or the clipped variant around V_old),
  L    = L_pi + vf_coef L_V - ent_coef H.
GAE bootstraps from the value of the TRUE next observation, so a time-out (truncation)
is not mistaken for a terminal state (``diffrl.maths.returns.gae``).

SPO (Simple Policy Optimization, Xie et al., ICML 2025, arXiv 2401.16025) is the same loop with
the clipping replaced by a quadratic penalty that keeps the ratio near the trust region
|rho - 1| <= eps (a total-variation argument, their Eq. 11):
  L_pi = -mean(rho A - |A| / (2 eps) (rho - 1)^2).
Unlike the clip, its gradient never vanishes: a ratio that left the region is pulled back.

DPPO (Diffusion Policy Policy Optimization, Ren et al. 2024, arXiv 2409.00588) is PPO on the
two-level MDP whose actions are the denoising steps: a diffusion policy's per-step Gaussian
log-densities along the stored acting chain give N ratios per sample, each clipped with the
sample's advantage (weighted by the denoising discount gamma_d^(N - 1 - n)).

FPO (Flow Policy Optimization, McAllister et al. 2025, arXiv 2507.21053) is PPO's clipped surrogate
on a flow policy (:mod:`diffrl.policies.flow`), whose ratio exponentiates a change of conditional
flow-matching losses instead of log-densities (averaged over the sample's draws, as FPO's code does).

FPO++ (Yi, Choi et al., "Flow Policy Gradients for Robot Control", code github.com/amazon-far/fpo-control;
``fpo++``) keeps one ratio per draw (``--flow.ratio per_sample``), clamps each draw's log ratio to
[-c, c] before exponentiating (``--ppo.log-ratio-clip``) and replaces the surrogate by ASPO, PPO's
clip where the advantage is positive and SPO's penalty where it is negative:
  L_pi = -mean( A >= 0:  min(rho A, clip(rho, 1-eps, 1+eps) A)
                A <  0:  rho A - |A| / (2 eps) (rho - 1)^2 ).
With A < 0 and rho > 1 + eps (a draw whose CFM loss fell: the action got likelier despite its negative
advantage) PPO's min keeps the unclipped rho A, whose pull back grows only like rho = e^(l_old - l_new);
SPO's penalty adds |A| rho (rho - 1) / eps, and the clamp bounds rho itself.

Deviations from the papers and their reference code (each a choice made here, with its reason):
* PPO: advantages standardised per minibatch (the common implementation choice; the paper leaves
  it open); a global gradient-norm clip; GAE bootstraps through time-outs (``diffrl.maths.returns``).
* SPO: the paper's hyperparameters are PPO's, and so are the presets' (eps = the clip range).
* FPO: the shared PPO loop (its code's own loop is brax-PPO's, the same structure); a global
  gradient-norm clip (FPO's code clips nothing); each log ratio clamped to [-20, 20] in the presets
  (``--ppo.log-ratio-clip``): without it the exponential overflows float32 once a sample's averaged
  CFM loss falls by more than 88 in one update (FPO's code has no such guard; on gymnax Pendulum one
  seed of four reached a non-finite gradient at 323k steps, with the output multiplier of FPO's code
  then applied to the initial kernel only), and a ratio of e^20 is far outside every
  clip range, so nothing else changes; on the CPU presets the family's sizes and step size instead of
  FPO's 3e-4.
* FPO++: the per-draw log-ratio clamp is symmetric, [-c, c] with c = 3 in the presets (FPO's code's
  per-draw clip): the per-task values of FPO++'s configs were not reproduced; its code's other knobs
  (an EMA of the policy weights for evaluation, clamps of the CFM losses and of the advantages) are
  not offered.
* DPPO (from scratch): the denoising chain is DIME's Langevin chain (TruDi's policy), not DDPM, so
  the baselines differ only in how the chain is trained; one clip range for every denoising step,
  the family's PPO clip (0.2-0.3), where DPPO's code grows it exponentially over the steps from
  ``clip_ploss_coef_base`` to ``clip_ploss_coef`` (0.01 in its fine-tuning configs); no clamp of the
  per-step log-densities and no clip of the sampling noise (its code: +-3 standard deviations);
  the per-dimension friction stays learned (so the step noise is learned too, where DPPO's is fixed).
  Why not DPPO's values: its clip ranges were tuned for fine-tuning a pretrained policy, not for
  learning from the prior; the ablation's DPPO diagnostic (benchmarks/results/ablation/README.md)
  found 0.3 % of terms clipped at 0.3, so the clip is not what limits DPPO there. Not yet measured
  with DPPO's schedule.

Needs a :class:`~diffrl.policies.base.RatioPolicy`: its ``ratio_log_terms`` (N, R) give R ratios
per sample (R = 1 for a Gaussian; FPO++'s per-draw ratios; DPPO's per-step ones), each entering the
surrogate with the sample's advantage times the policy's ``ratio_weights`` (R,), if it has any.
Old terms are recomputed from the rollout-time parameters, so the policy's aux pytree is opaque
here. The entropy bonus needs a policy with ``entropy`` (a flow and the DIME chain have none).
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from diffrl.algos.base import Rollout
from diffrl.algos.epochs import flatten_time_batch, minibatch_epochs
from diffrl.algos.spec import AlgorithmSpec
from diffrl.envs.base import EnvSpec
from diffrl.nets.mlp import MLP
from diffrl.policies import RatioPolicy, require
from diffrl.maths.returns import gae


@struct.dataclass
class PPOState:
    policy_params: Any
    value_params: Any
    opt_state: Any


def ppo_policy_loss(log_prob, old_log_prob, advantages, clip_eps):
    """(N, ...), (N, ...), (N, ...) -> scalar clipped surrogate loss and clip fraction (means over
    every ratio; advantages broadcast against the ratios)."""
    ratio = jnp.exp(log_prob - old_log_prob)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    clip_frac = jnp.mean((jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32))
    return -jnp.mean(jnp.minimum(unclipped, clipped)), clip_frac


def spo_policy_loss(log_prob, old_log_prob, advantages, eps):
    """(N, ...) x 3 -> scalar SPO loss -mean(rho A - |A| / (2 eps) (rho - 1)^2) and the fraction
    of ratios outside [1 - eps, 1 + eps] (which SPO penalises instead of clipping)."""
    ratio = jnp.exp(log_prob - old_log_prob)
    penalty = jnp.abs(advantages) / (2.0 * eps) * (ratio - 1.0) ** 2
    out_frac = jnp.mean((jnp.abs(ratio - 1.0) > eps).astype(jnp.float32))
    return -jnp.mean(ratio * advantages - penalty), out_frac


def aspo_policy_loss(log_prob, old_log_prob, advantages, eps):
    """(N, ...) x 3 -> scalar ASPO loss (FPO++): PPO's clipped term where A >= 0, SPO's penalised term
    where A < 0, -mean over every ratio; and the fraction of ratios outside [1 - eps, 1 + eps]."""
    ratio = jnp.exp(log_prob - old_log_prob)
    ppo_term = jnp.minimum(ratio * advantages, jnp.clip(ratio, 1.0 - eps, 1.0 + eps) * advantages)
    spo_term = ratio * advantages - jnp.abs(advantages) / (2.0 * eps) * (ratio - 1.0) ** 2
    out_frac = jnp.mean((jnp.abs(ratio - 1.0) > eps).astype(jnp.float32))
    return -jnp.mean(jnp.where(advantages >= 0, ppo_term, spo_term)), out_frac


def ratio_surrogate(policy_loss, log_terms, old_log_terms, advantages, weights, eps, log_ratio_clip=0.0):
    """(N, R), (N, R), (N,), (R,) or None -> the surrogate over every sample and term: term r of
    sample i has log ratio log_terms[i, r] - old_log_terms[i, r] and advantage advantages[i] *
    weights[r] (DPPO: -mean_{i,n} min(rho A gamma_d^(N-1-n), clip(rho) A gamma_d^(N-1-n))).
    ``log_ratio_clip`` c > 0 clamps each log ratio to [-c, c] first (FPO++; no gradient beyond)."""
    adv = advantages[:, None] if weights is None else advantages[:, None] * weights
    if log_ratio_clip > 0:
        log_terms = old_log_terms + jnp.clip(log_terms - old_log_terms, -log_ratio_clip, log_ratio_clip)
    return policy_loss(log_terms, old_log_terms, adv, eps)


def ppo_value_loss(values, old_values, returns, clip_eps):
    """(N,) x3 -> scalar; clip_eps None means the plain squared error."""
    err = (values - returns) ** 2
    if clip_eps is not None:
        clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
        err = jnp.maximum(err, (clipped - returns) ** 2)
    return 0.5 * jnp.mean(err)


class PPO:
    """PPO's loop on any policy with ratio terms; ``policy_loss`` is the surrogate, a value: SPO is
    PPO with :func:`spo_policy_loss`, FPO a flow policy with PPO's clip, FPO++ a flow policy with
    :func:`aspo_policy_loss`, DPPO a diffusion policy's per-step ratios with PPO's clip.

    policy_loss: (log_prob, old_log_prob, advantages, eps) -> (loss, fraction of ratios outside
    [1 - eps, 1 + eps]).
    """

    def __init__(self, config, spec: EnvSpec, policy, name: str = "ppo", policy_loss=ppo_policy_loss):
        require(policy, RatioPolicy, name)
        self.name = name
        self.policy_loss = policy_loss
        self.config = config
        self.c = config.ppo
        self.has_entropy = hasattr(policy, "entropy")
        self.ratio_weights = getattr(policy, "ratio_weights", None)  # (R,) or None: every term alike
        if self.c.ent_coef != 0 and not self.has_entropy:
            raise ValueError(f"--ppo.ent-coef {self.c.ent_coef}: {name}'s {type(policy).__name__} has no entropy "
                             "to reward; set --ppo.ent-coef 0")
        self.policy = policy
        self.value_net = MLP(self.c.value_hidden, 1, self.c.value_act)
        num_updates = config.num_iterations * self.c.num_epochs * self.c.num_minibatches
        lr = (optax.linear_schedule(self.c.learning_rate, 0.0, num_updates)
              if self.c.anneal_lr else self.c.learning_rate)
        self.optimizer = optax.chain(optax.clip_by_global_norm(self.c.max_grad_norm), optax.adam(lr))

    @property
    def samplers(self):
        return self.policy.samplers

    def init(self, key, spec: EnvSpec) -> PPOState:
        key_pi, key_v = jax.random.split(key)
        pp = self.policy.init(key_pi, spec.obs_size)
        vp = self.value_net.init(key_v, jnp.zeros((1, spec.critic_size)))
        return PPOState(pp, vp, self.optimizer.init({"policy": pp, "value": vp}))

    def act(self, state: PPOState, obs, key):
        return self.policy.sample(state.policy_params, obs, key)

    def eval_action(self, state: PPOState, obs, critic_obs, key, sampler):
        return self.policy.eval_action(state.policy_params, obs, key, sampler)

    def value(self, params, critic_obs):
        return self.value_net.apply(params, critic_obs)[..., 0]

    def minibatch_loss(self, params, data, key_ent):
        """(scalar loss, metrics) of one minibatch: the surrogate ``policy_loss`` over every
        ratio term, + vf_coef x the value loss, - ent_coef x the entropy (if the policy has one).

        params: {"policy", "value"}; data: (obs (N, o), critic_obs (N, c), policy aux, old ratio terms
        (N, R), old values (N,), advantages (N,), returns (N,)), advantages standardised here over the
        minibatch when ``normalize_advantages``.
        """
        c = self.c
        obs, cobs, aux, old_lp, old_v, adv, ret = data
        if c.normalize_advantages:
            adv = (adv - jnp.mean(adv)) / (jnp.std(adv) + 1e-8)
        lp = self.policy.ratio_log_terms(params["policy"], obs, aux)  # (N, R)
        pi_loss, clip_frac = ratio_surrogate(self.policy_loss, lp, old_lp, adv, self.ratio_weights, c.clip_eps,
                                             c.log_ratio_clip)
        v_loss = ppo_value_loss(self.value(params["value"], cobs), old_v, ret, c.value_clip_eps)
        loss = pi_loss + c.vf_coef * v_loss
        metrics = {"loss/policy": pi_loss, "loss/value": v_loss, "policy/clip_fraction": clip_frac,
                   "policy/approx_kl": jnp.mean(old_lp - lp)}
        if self.has_entropy:
            metrics["policy/entropy"] = jnp.mean(self.policy.entropy(params["policy"], obs, key_ent))
            loss = loss - c.ent_coef * metrics["policy/entropy"]
        return loss, metrics

    def update(self, state: PPOState, batch: Rollout, key):
        c = self.c
        values = self.value(state.value_params, batch.critic_obs)
        next_values = self.value(state.value_params, batch.next_critic_obs)
        advantages, returns = gae(batch.reward, values, next_values, batch.terminated,
                                  batch.truncated, c.gamma, c.gae_lambda)
        old_log_prob = self.policy.ratio_log_terms(state.policy_params, batch.obs, batch.policy_aux)
        data = flatten_time_batch((batch.obs, batch.critic_obs, batch.policy_aux, old_log_prob,
                                   values, advantages, returns))

        def sgd_step(carry, minibatch, key_step):
            params, opt_state = carry
            (_, metrics), grads = jax.value_and_grad(self.minibatch_loss, has_aux=True)(params, minibatch, key_step)
            updates, opt_state = self.optimizer.update(grads, opt_state, params)
            metrics["optim/grad_norm"] = optax.tree.norm(grads)
            return (optax.apply_updates(params, updates), opt_state), metrics

        params = {"policy": state.policy_params, "value": state.value_params}
        (params, opt_state), metrics = minibatch_epochs(
            key, data, (params, state.opt_state), sgd_step, c.num_epochs, c.num_minibatches)
        metrics["value/mean"] = jnp.mean(values)
        metrics["value/advantage_std"] = jnp.std(advantages)
        return PPOState(params["policy"], params["value"], opt_state), metrics


def make_fpo(config, spec: EnvSpec, name: str = "fpo", policy_loss=ppo_policy_loss) -> PPO:
    from diffrl.policies.flow import FlowPolicy

    return PPO(config, spec, FlowPolicy(config.flow, spec.action_size), name=name, policy_loss=policy_loss)


def make_fpo_pp(config, spec: EnvSpec) -> PPO:
    """FPO++: the flow policy with per-draw ratios (its presets) and the ASPO surrogate."""
    return make_fpo(config, spec, name="fpo++", policy_loss=aspo_policy_loss)


def make_dppo(config, spec: EnvSpec) -> PPO:
    from diffrl.policies.diffusion import DiffusionPolicy

    return PPO(config, spec, DiffusionPolicy(config.diffusion, spec.action_size, store_path=True), name="dppo")


def make_ppo(config, spec: EnvSpec, name: str = "ppo", policy_loss=ppo_policy_loss) -> PPO:
    from diffrl.policies.gaussian import GaussianPolicy

    return PPO(config, spec, GaussianPolicy(config.gaussian, spec.action_size), name=name, policy_loss=policy_loss)


def make_spo(config, spec: EnvSpec) -> PPO:
    """SPO: PPO's loop and settings with the quadratic ratio penalty instead of the clip."""
    return make_ppo(config, spec, name="spo", policy_loss=spo_policy_loss)


_NO_KL_DRAWS = {"gaussian.kl_samples": "it draws REPPO's KL trust-region estimate; this algorithm bounds its "
                                        "update through the ratio (--ppo.clip-eps)"}

SPECS = (
    AlgorithmSpec("ppo", make_ppo, ("ppo", "gaussian"), "gaussian", "PPO",
                  "PPO (Schulman et al. 2017): clipped surrogate, GAE, minibatch epochs", cost_baselines=("reppo",),
                  unused_settings=_NO_KL_DRAWS),
    AlgorithmSpec("spo", make_spo, ("ppo", "gaussian"), "gaussian", "SPO",
                  "SPO (Xie et al. 2025): PPO with a quadratic ratio penalty instead of the clip",
                  cost_baselines=("reppo",), unused_settings=_NO_KL_DRAWS),
    AlgorithmSpec("fpo", make_fpo, ("ppo", "flow"), "flow", "FPO",
                  "FPO (McAllister et al. 2025): PPO's clip on a flow policy's CFM-loss ratio",
                  cost_baselines=("reppo",)),
    AlgorithmSpec("fpo++", make_fpo_pp, ("ppo", "flow"), "flow", "FPO++",
                  "FPO++ (Yi, Choi et al.): per-draw clamped ratios and the ASPO surrogate",
                  cost_baselines=("reppo",)),
    AlgorithmSpec("dppo", make_dppo, ("ppo", "diffusion"), "diffusion", "DPPO",
                  "DPPO (Ren et al. 2024): PPO on the denoising MDP of the DIME chain (per-step ratios)",
                  unused_settings={"diffusion.dual_uses": "DPPO has no temperature dual"},
                  diffusion_steps="diffusion.num_steps", cost_baselines=("reppo",)),
)
"""The PPO family's registrations (diffrl.algos.registry)."""
