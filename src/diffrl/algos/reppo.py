"""REPPO: Relative Entropy Pathwise Policy Optimization (Voelcker et al. 2025, arXiv 2507.11019).

On-policy, max-entropy, Q-learning actor-critic with a per-state KL trust region
(arXiv 2507.11019, reference code github.com/cvoelcker/reppo). Per minibatch, after the critic step (``soft_critic.critic_step``):

  actor:  l(s) = alpha_sg log pi(a~|s) - Q(s, a~)        if KL(s) < eps   ("clipped" rule)
                 beta_sg KL(s)                           otherwise
          with a~ a reparameterised sample of the current policy and KL(s) the policy's
          estimate of KL(pi_old(.|s) || pi(.|s)), pi_old frozen at the iteration start;
  duals:  L_alpha = alpha sg(H - H*), L_beta = -beta sg(mean KL - eps)  (trust_region.py).

The algorithm only asks the policy for the :class:`PathwisePolicy` capability, so the
same code is TruDi when the policy is the DIME diffusion chain (``log_prob`` is then
DIME's bound and ``trust_region_kl`` the whole-trajectory KL; see algos/__init__.py).
"""
from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from diffrl.algos.base import Rollout
from diffrl.algos.epochs import flatten_time_batch, minibatch_epochs
from diffrl.algos.spec import AlgorithmSpec
from diffrl.algos.soft_critic import (SoftActorCritic, critic_batch, critic_optimizer, critic_step, soft_targets,
                                      step_size, total_updates)
from diffrl.critics.categorical import CategoricalCritic
from diffrl.envs.base import EnvSpec
from diffrl.policies import PathwisePolicy, require
from diffrl.maths.trust_region import actor_loss_per_state, kl_multiplier_loss, temperature_loss


@struct.dataclass
class REPPOState:
    actor_params: Any
    critic_params: Any
    log_alpha: jax.Array
    log_beta: jax.Array
    actor_opt: Any
    critic_opt: Any


class REPPO(SoftActorCritic):
    def __init__(self, config, spec: EnvSpec, policy, name: str = "reppo"):
        require(policy, PathwisePolicy, name)
        self.name = name
        self.config = config
        self.c = config.reppo
        self.policy = policy
        self.critic = CategoricalCritic(config.critic)
        self.target_entropy = self.c.entropy_target_mult * spec.action_size
        updates = total_updates(config)
        self.actor_optimizer = optax.chain(optax.clip_by_global_norm(self.c.max_grad_norm),
                                           optax.adam(step_size(self.c.actor_lr, self.c, updates)))
        self.critic_optimizer = critic_optimizer(self.c, updates)

    def init(self, key, spec: EnvSpec) -> REPPOState:
        key_actor, key_critic = jax.random.split(key)
        actor = self.policy.init(key_actor, spec.obs_size)
        critic = self.critic.init(key_critic, jnp.zeros((1, spec.critic_size)), jnp.zeros((1, spec.action_size)))
        log_alpha = jnp.asarray(math.log(self.c.ent_start), jnp.float32)
        log_beta = jnp.asarray(math.log(self.c.kl_start), jnp.float32)
        return REPPOState(actor, critic, log_alpha, log_beta,
                          self.actor_optimizer.init((actor, log_alpha, log_beta)),
                          self.critic_optimizer.init(critic))




    # -- update ---------------------------------------------------------------------
    def actor_loss(self, actor_vars, old_params, critic_params, mb, key):
        params, log_alpha, log_beta = actor_vars
        c = self.c
        key_sample, key_kl = jax.random.split(key)
        sample = self.policy.rsample(params, mb["obs"], key_sample)
        q = self.q_value(critic_params, mb["critic_obs"], sample.action)
        alpha = jnp.exp(log_alpha) if c.learn_alpha else jnp.exp(jax.lax.stop_gradient(log_alpha))
        value_loss = jax.lax.stop_gradient(alpha) * sample.log_prob - q
        kl, kl_metrics = self.policy.trust_region_kl(old_params, params, mb["obs"], key_kl, mb["policy_aux"],
                                                     current=sample.kl_context)
        beta = jnp.exp(log_beta)
        per_state = actor_loss_per_state(value_loss, kl, c.kl_bound, beta, c.actor_loss_mode)
        loss = jnp.mean(per_state) + kl_multiplier_loss(log_beta, kl, c.kl_bound)
        if c.learn_alpha:
            loss = loss + temperature_loss(log_alpha, -sample.dual_log_prob, self.target_entropy)
        metrics = {
            "actor/loss": jnp.mean(per_state),
            "actor/q": jnp.mean(q),
            "actor/log_prob": jnp.mean(sample.log_prob),
            "actor/entropy_estimate": -jnp.mean(sample.dual_log_prob),
            "actor/kl": jnp.mean(kl),
            "actor/kl_max": jnp.max(kl),
            "actor/out_of_trust_region": jnp.mean((kl >= c.kl_bound).astype(jnp.float32)),
            "dual/alpha": alpha,
            "dual/beta": beta,
            **{f"actor/{k}": v for k, v in kl_metrics.items()},
        }
        return loss, metrics

    def sgd_data(self, state: REPPOState, batch: Rollout, key) -> tuple[dict, dict]:
        """The iteration's fixed SGD data: soft lambda-return targets from the critic and policy at
        the iteration start, flattened to (T * B, ...) minibatch rows; plus the targets' metrics."""
        c = self.c

        def sample_next(obs, k):
            out = self.policy.rsample(state.actor_params, obs, k)
            return jax.lax.stop_gradient(out.action), jax.lax.stop_gradient(out.log_prob)

        targets, next_features, target_metrics = soft_targets(
            sample_next, self.critic, state.critic_params, batch, jnp.exp(state.log_alpha), c.gamma,
            c.td_lambda, key, c.next_action_samples)
        data = critic_batch(batch, targets, next_features)
        data["policy_aux"] = batch.policy_aux  # the acting samples of old_params (trust-region KL)
        return flatten_time_batch(data), target_metrics

    def update(self, state: REPPOState, batch: Rollout, key):
        c = self.c
        key_targets, key_epochs = jax.random.split(key)
        data, target_metrics = self.sgd_data(state, batch, key_targets)
        old_params = state.actor_params

        def sgd_step(carry, mb, key_step):
            actor_vars, critic_params, actor_opt, critic_opt = carry
            critic_params, critic_opt, critic_metrics = critic_step(
                self.critic, self.config.critic, self.critic_optimizer, critic_params, critic_opt, mb)
            (_, actor_metrics), grads = jax.value_and_grad(self.actor_loss, has_aux=True)(
                actor_vars, old_params, critic_params, mb, key_step)
            updates, actor_opt = self.actor_optimizer.update(grads, actor_opt, actor_vars)
            actor_vars = optax.apply_updates(actor_vars, updates)
            if c.kl_min > 0:
                params, log_alpha, log_beta = actor_vars
                actor_vars = (params, log_alpha, jnp.maximum(log_beta, math.log(c.kl_min)))
            if c.alpha_max > 0:
                params, log_alpha, log_beta = actor_vars
                actor_vars = (params, jnp.minimum(log_alpha, math.log(c.alpha_max)), log_beta)
            actor_metrics["actor/grad_norm"] = optax.tree.norm(grads[0])
            return (actor_vars, critic_params, actor_opt, critic_opt), {**critic_metrics, **actor_metrics}

        carry = ((state.actor_params, state.log_alpha, state.log_beta), state.critic_params,
                 state.actor_opt, state.critic_opt)
        carry, metrics = minibatch_epochs(key_epochs, data, carry, sgd_step, c.num_epochs, c.num_minibatches)
        (actor, log_alpha, log_beta), critic_params, actor_opt, critic_opt = carry
        metrics.update(target_metrics)
        return REPPOState(actor, critic_params, log_alpha, log_beta, actor_opt, critic_opt), metrics


# The reppo section holds the trust-region settings of every algorithm in REPPO's family; each reads
# those of its own trust region (a change of another's is refused with the reason).
CHAIN_KL_SETTINGS = {
    f"reppo.{name}": "it sets the trust-region KL of the DIME chain (--algo trudi, dime)"
    for name in ("trust_region", "kl_estimator", "kl_samples", "kl_paths")}
"""The DIME chain's trust-region settings: read by trudi and dime only."""
DRIFT_MULTIPLIER_SETTINGS = {
    "reppo.kl_multiplier": "it chooses the multiplier of AMDP's drift trust region (--algo amdp); "
                           "REPPO's KL multiplier beta is a learned dual (--reppo.kl-start)",
    "reppo.lambda_init": "it starts the learned multiplier of AMDP's drift trust region (--algo amdp); "
                         "REPPO's KL multiplier beta starts at --reppo.kl-start",
}
"""AMDP's drift-multiplier settings: read by amdp only."""


def make_reppo(config, spec: EnvSpec) -> REPPO:
    from diffrl.policies.gaussian import GaussianPolicy

    return REPPO(config, spec, GaussianPolicy(config.gaussian, spec.action_size), name="reppo")


SPECS = (
    AlgorithmSpec("reppo", make_reppo, ("reppo", "gaussian", "critic"), "gaussian", "REPPO",
                  "REPPO (Voelcker et al. 2025): max-entropy pathwise actor-critic with a KL trust region",
                  unused_settings={**CHAIN_KL_SETTINGS, **DRIFT_MULTIPLIER_SETTINGS}, cost_default=True),
)
"""REPPO's registration (diffrl.algos.registry); TruDi and DIME are in diffrl.algos.trudi."""
