"""PPO (Schulman et al. 2017, arXiv 1707.06347): clipped surrogate, GAE, minibatch epochs.

Losses (per minibatch, advantages A optionally standardised):
  L_pi = -mean(min(rho A, clip(rho, 1-eps, 1+eps) A)),  rho = exp(log pi(a|s) - log pi_old(a|s))
  L_V  = 0.5 mean((V(s) - R)^2)  (or the clipped variant around V_old),
  L    = L_pi + vf_coef L_V - ent_coef H.
GAE bootstraps from the value of the TRUE next observation, so a time-out (truncation)
is not mistaken for a terminal state (``diffrl.returns.gae``).

Needs a :class:`~diffrl.policies.base.LogProbPolicy`; old log-densities are
recomputed from the rollout-time parameters, so the policy's aux pytree is opaque here.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from diffrl.algos.base import Rollout
from diffrl.algos.epochs import flatten_time_batch, minibatch_epochs
from diffrl.envs.base import EnvSpec
from diffrl.nets.mlp import MLP
from diffrl.policies import LogProbPolicy, require
from diffrl.returns import gae


@struct.dataclass
class PPOState:
    policy_params: Any
    value_params: Any
    opt_state: Any


def ppo_policy_loss(log_prob, old_log_prob, advantages, clip_eps):
    """(N,), (N,), (N,) -> scalar clipped surrogate loss and clip fraction."""
    ratio = jnp.exp(log_prob - old_log_prob)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    clip_frac = jnp.mean((jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32))
    return -jnp.mean(jnp.minimum(unclipped, clipped)), clip_frac


def ppo_value_loss(values, old_values, returns, clip_eps):
    """(N,) x3 -> scalar; clip_eps None means the plain squared error."""
    err = (values - returns) ** 2
    if clip_eps is not None:
        clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
        err = jnp.maximum(err, (clipped - returns) ** 2)
    return 0.5 * jnp.mean(err)


class PPO:
    name = "ppo"

    def __init__(self, config, spec: EnvSpec, policy):
        require(policy, LogProbPolicy, "ppo")
        self.config = config
        self.c = config.ppo
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

    def update(self, state: PPOState, batch: Rollout, key):
        c = self.c
        values = self.value(state.value_params, batch.critic_obs)
        next_values = self.value(state.value_params, batch.next_critic_obs)
        advantages, returns = gae(batch.reward, values, next_values, batch.terminated,
                                  batch.truncated, c.gamma, c.gae_lambda)
        old_log_prob = self.policy.log_prob(state.policy_params, batch.obs, batch.policy_aux)
        data = flatten_time_batch((batch.obs, batch.critic_obs, batch.policy_aux, old_log_prob,
                                   values, advantages, returns))

        def loss_fn(params, data, key_ent):
            obs, cobs, aux, old_lp, old_v, adv, ret = data
            if c.normalize_advantages:
                adv = (adv - jnp.mean(adv)) / (jnp.std(adv) + 1e-8)
            lp = self.policy.log_prob(params["policy"], obs, aux)
            pi_loss, clip_frac = ppo_policy_loss(lp, old_lp, adv, c.clip_eps)
            v_loss = ppo_value_loss(self.value(params["value"], cobs), old_v, ret, c.value_clip_eps)
            entropy = jnp.mean(self.policy.entropy(params["policy"], obs, key_ent))
            loss = pi_loss + c.vf_coef * v_loss - c.ent_coef * entropy
            approx_kl = jnp.mean(old_lp - lp)
            return loss, {"loss/policy": pi_loss, "loss/value": v_loss, "policy/entropy": entropy,
                          "policy/clip_fraction": clip_frac, "policy/approx_kl": approx_kl}

        def sgd_step(carry, minibatch, key_step):
            params, opt_state = carry
            (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, minibatch, key_step)
            updates, opt_state = self.optimizer.update(grads, opt_state, params)
            metrics["optim/grad_norm"] = optax.global_norm(grads)
            return (optax.apply_updates(params, updates), opt_state), metrics

        params = {"policy": state.policy_params, "value": state.value_params}
        (params, opt_state), metrics = minibatch_epochs(
            key, data, (params, state.opt_state), sgd_step, c.num_epochs, c.num_minibatches)
        metrics["value/mean"] = jnp.mean(values)
        metrics["value/advantage_std"] = jnp.std(advantages)
        return PPOState(params["policy"], params["value"], opt_state), metrics


def make_ppo(config, spec: EnvSpec) -> PPO:
    from diffrl.policies.gaussian import GaussianPolicy

    return PPO(config, spec, GaussianPolicy(config.gaussian, spec.action_size))
