"""AMDP: max-entropy diffusion policies trained by reciprocal adjoint matching.

Thilges, Celik, Blessing, Gospodinov, Neumann 2026, "Scalable Maximum Entropy RL for
Diffusion Policies via Adjoint Matching" (arXiv 2606.22630). REPPO's critic, soft TD(lambda)
targets and temperature dual (``soft_critic``, ``trust_region``) with a different actor update:

  * the entropy term of the soft reward uses the Girsanov bound log pi <= C - d log 2
    (C the control cost of a fresh chain at s');
  * per minibatch, after the critic step: the lean adjoint of each stored end point X_1 from
    grad_a Q(s, erf(k X_1)), norm-clipped per sample at a limit computed once per update
    over the whole batch (:meth:`AMDP.score_clip_limit`), then ``matching_steps`` regression
    steps of u_theta(X_t, t, s) onto -sigma_t * adjoint / alpha at fresh reference-bridge
    draws (t, X_t) given X_1: no simulation of the chain and no backprop through it, so the
    update cost does not grow with the number of diffusion steps N;
  * the trust region on the drift change (mean 1/2 ||u_theta - u_old||^2 <= eps = ``reppo.kl_bound``),
    with the multiplier from dual descent (``reppo.kl_multiplier = dual``: log_lambda starts at
    ``reppo.lambda_init``, is learned and logged as ``dual/lambda``), from the per-minibatch
    closed-form solve (``closed_form``: log_lambda is neither updated nor logged, the multiplier the
    loss used is ``am/lambda``) or none; u_old is the policy at the start of the iteration. The
    trust region is the algorithm's: its builder hands it to the policy as a
    :class:`~diffrl.policies.adjoint.DriftTrustRegion`.

The policy must provide the adjoint-matching capability (:class:`AdjointMatchingPolicy`).
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
from diffrl.algos.reppo import CHAIN_KL_SETTINGS, DRIFT_MULTIPLIER_SETTINGS, REPPO
from diffrl.algos.spec import AlgorithmSpec
from diffrl.algos.soft_critic import (SoftActorCritic, critic_batch, critic_optimizer, critic_step, soft_targets,
                                      step_size, total_updates)
from diffrl.critics.categorical import CategoricalCritic
from diffrl.envs.base import EnvSpec
from diffrl.policies import AdjointMatchingPolicy, require
from diffrl.maths.trust_region import kl_multiplier_loss, temperature_loss


@struct.dataclass
class AMDPState:
    actor_params: Any
    critic_params: Any
    log_alpha: jax.Array
    log_lambda: jax.Array
    actor_opt: Any
    critic_opt: Any
    dual_opt: Any


class AMDP(SoftActorCritic):
    name = "amdp"

    def __init__(self, config, spec: EnvSpec, policy):
        require(policy, AdjointMatchingPolicy, "amdp")
        self.config = config
        self.c = config.reppo
        self.policy = policy
        self.critic = CategoricalCritic(config.critic)
        self.target_entropy = policy.target_entropy
        clip = optax.clip_by_global_norm(self.c.max_grad_norm)
        updates = total_updates(config)
        actor_lr = step_size(self.c.actor_lr, self.c, updates)
        self.actor_optimizer = optax.chain(clip, optax.adam(actor_lr))
        self.critic_optimizer = critic_optimizer(self.c, updates)
        self.dual_optimizer = optax.adam(actor_lr)

    def init(self, key, spec: EnvSpec) -> AMDPState:
        key_actor, key_critic = jax.random.split(key)
        actor = self.policy.init(key_actor, spec.obs_size)
        critic = self.critic.init(key_critic, jnp.zeros((1, spec.critic_size)), jnp.zeros((1, spec.action_size)))
        log_alpha = jnp.asarray(math.log(self.c.ent_start), jnp.float32)
        log_lambda = jnp.asarray(math.log(self.c.lambda_init), jnp.float32)
        return AMDPState(actor, critic, log_alpha, log_lambda, self.actor_optimizer.init(actor),
                         self.critic_optimizer.init(critic), self.dual_optimizer.init((log_alpha, log_lambda)))

    def grad_q(self, critic_params, critic_obs: jax.Array, action: jax.Array) -> jax.Array:
        """(..., d) grad_a Q(s, a) at every (s, a) of a batch."""
        return jax.grad(lambda a: jnp.sum(self.q_value(critic_params, critic_obs, a)))(action)

    def score_clip_limit(self, critic_params, batch: Rollout) -> jax.Array:
        """() the norm clip limit of this update's scores: a quantile over the WHOLE stored batch.

        DECISION: the limit is computed once per update batch, from the scores of every stored
        end point under the critic at the start of the update (the critic of the TD targets);
        the scores themselves are recomputed in each minibatch step with the critic of that
        step and clipped at this limit. A minibatch's own 95 % quantile (its 2nd-4th largest of
        32-64 norms) would be a different, noisy statistic. The alternative that also fixes the
        scores, computing them once with the start critic as a regression data set for all
        epochs, makes the actor follow a critic that is up to num_epochs x num_minibatches
        steps stale: measured on Playground CartpoleBalance (amdp-dmc-cpu, 8 x 16 steps per
        update, 246k env steps, seed 0) it reached 574 where per-minibatch scores reach > 850
        (tests/test_learning_maxent.py), so the scores follow the current critic.
        """
        grad_q = self.grad_q(critic_params, batch.critic_obs, batch.action)
        return self.policy.score_clip_limit(batch.policy_aux.pre_squash, grad_q)

    def update(self, state: AMDPState, batch: Rollout, key):
        c = self.c
        mode = c.kl_multiplier
        key_targets, key_epochs = jax.random.split(key)
        alpha = jnp.exp(state.log_alpha)

        def sample_next(obs, k):
            action, aux = self.policy.sample(state.actor_params, obs, k)
            return action, aux.log_prob_bound

        targets, next_features, target_metrics = soft_targets(
            sample_next, self.critic, state.critic_params, batch, alpha, c.gamma, c.td_lambda, key_targets,
            c.next_action_samples)
        clip_limit = self.score_clip_limit(state.critic_params, batch)
        data = critic_batch(batch, targets, next_features)
        data["pre_squash"] = batch.policy_aux.pre_squash
        data = flatten_time_batch(data)
        old_params = state.actor_params
        # Temperature dual on the rollout's own entropy estimates -(C - d log 2).
        entropy = -jnp.mean(batch.policy_aux.log_prob_bound)

        def matching_step(carry, key_bridge, mb, score, alpha, log_lambda):
            params, opt = carry
            (_, metrics), grads = jax.value_and_grad(self.policy.matching_loss, has_aux=True)(
                params, old_params, mb["obs"], mb["pre_squash"], score, key_bridge, alpha, log_lambda)
            updates, opt = self.actor_optimizer.update(grads, opt, params)
            metrics["actor/grad_norm"] = optax.tree.norm(grads)
            return (optax.apply_updates(params, updates), opt), metrics

        def dual_loss(duals, drift_kl):
            # Only the duals in use get a gradient: with closed_form or none the multiplier is
            # not learned (Adam's step on a zero gradient is exactly zero, so log_lambda stays).
            log_alpha, log_lambda = duals
            loss = jnp.zeros(())
            if mode == "dual":
                loss = loss + kl_multiplier_loss(log_lambda, drift_kl, c.kl_bound)
            if c.learn_alpha:
                loss = loss + temperature_loss(log_alpha, entropy, self.target_entropy)
            return loss

        def sgd_step(carry, mb, key_step):
            actor, critic_params, duals, actor_opt, critic_opt, dual_opt = carry
            critic_params, critic_opt, critic_metrics = critic_step(
                self.critic, self.config.critic, self.critic_optimizer, critic_params, critic_opt, mb)
            grad_q = self.grad_q(critic_params, mb["critic_obs"], mb["action"])
            score, score_metrics = self.policy.matching_scores(mb["pre_squash"], grad_q, clip_limit)
            log_alpha, log_lambda = duals
            alpha_now = jnp.exp(log_alpha)
            (actor, actor_opt), am_metrics = jax.lax.scan(
                lambda cr, k: matching_step(cr, k, mb, score, alpha_now, log_lambda),
                (actor, actor_opt), jax.random.split(key_step, self.policy.config.matching_steps))
            am_metrics = jax.tree_util.tree_map(jnp.mean, am_metrics)
            if mode == "dual" or c.learn_alpha:
                grads = jax.grad(dual_loss)(duals, am_metrics["am/kl"])
                updates, dual_opt = self.dual_optimizer.update(grads, dual_opt, duals)
                duals = optax.apply_updates(duals, updates)
                if c.alpha_max > 0:
                    duals = (jnp.minimum(duals[0], math.log(c.alpha_max)), duals[1])
            metrics = {**critic_metrics, **am_metrics, **{f"actor/{k}": v for k, v in score_metrics.items()},
                       "dual/alpha": alpha_now}
            if mode == "dual":  # otherwise log_lambda means nothing (am/lambda is the multiplier)
                metrics["dual/lambda"] = jnp.exp(log_lambda)
            return (actor, critic_params, duals, actor_opt, critic_opt, dual_opt), metrics

        carry = (state.actor_params, state.critic_params, (state.log_alpha, state.log_lambda),
                 state.actor_opt, state.critic_opt, state.dual_opt)
        carry, metrics = minibatch_epochs(key_epochs, data, carry, sgd_step, c.num_epochs, c.num_minibatches)
        actor, critic_params, (log_alpha, log_lambda), actor_opt, critic_opt, dual_opt = carry
        metrics.update(target_metrics)
        metrics["actor/entropy_estimate"] = entropy
        return AMDPState(actor, critic_params, log_alpha, log_lambda, actor_opt, critic_opt, dual_opt), metrics


def drift_trust_region(settings):
    """AMDP's drift trust region from the algorithm's settings (``reppo``, or amdp-off's ``offpolicy``)."""
    from diffrl.policies.adjoint import DriftTrustRegion

    return DriftTrustRegion(multiplier=settings.kl_multiplier, kl_bound=settings.kl_bound)


def make_amdp(config, spec: EnvSpec) -> AMDP:
    from diffrl.policies.adjoint import AdjointPolicy

    policy = AdjointPolicy(config.adjoint, spec.action_size, trust_region=drift_trust_region(config.reppo))
    return AMDP(config, spec, policy)


def make_amdp_backprop(config, spec: EnvSpec):
    """The reverse-KL baseline AMDP is measured against: REPPO's pathwise actor loss (alpha * log-pi bound
    - Q, backpropagated through the simulated chain) on AMDP's policy and reference process; the trust
    region uses the path KL of the chain."""
    from diffrl.policies.adjoint import AdjointPolicy

    return REPPO(config, spec, AdjointPolicy(config.adjoint, spec.action_size), name="amdp-backprop")


# AMDP shares REPPO's critic, temperature, SGD settings and trust-region radius (--reppo.kl-bound), but its
# trust region is on the drift, with its own multiplier (--reppo.kl-multiplier, --reppo.lambda-init), and
# its own entropy target (--adjoint.entropy-target-mult): REPPO's KL multiplier beta, its actor-loss rule
# and the DIME chain's KL settings do not exist there.
_REPPO_TRUST_REGION_UNREAD = {
    **CHAIN_KL_SETTINGS,
    "reppo.kl_start": "its trust-region multiplier starts at --reppo.lambda-init",
    "reppo.kl_min": "its trust-region multiplier is chosen by --reppo.kl-multiplier",
    "reppo.entropy_target_mult": "its entropy target is --adjoint.entropy-target-mult",
    "reppo.actor_loss_mode": "its trust-region rule is --reppo.kl-multiplier",
}

# The backprop baseline is REPPO's update on AMDP's policy: REPPO's KL dual enforces its trust region (the
# path KL of the chain, on one fresh old path); neither the drift multiplier nor the DIME chain's KL exists.
_BACKPROP_UNREAD = {**CHAIN_KL_SETTINGS, **DRIFT_MULTIPLIER_SETTINGS}

SPECS = (
    AlgorithmSpec("amdp", make_amdp, ("reppo", "adjoint", "critic"), "adjoint", "AMDP",
                  "AMDP (Thilges et al. 2026): reciprocal adjoint matching, erf squashing, a trust region on "
                  "the drift", unused_settings=_REPPO_TRUST_REGION_UNREAD, diffusion_steps="adjoint.num_steps",
                  cost_baselines=("reppo",), cost_headline=("reppo",), cost_default=True),
    AlgorithmSpec("amdp-backprop", make_amdp_backprop, ("reppo", "adjoint", "critic"), "adjoint", "backprop",
                  "the reverse-KL update through AMDP's chain that adjoint matching avoids",
                  unused_settings=_BACKPROP_UNREAD, diffusion_steps="adjoint.num_steps",
                  cost_baselines=("amdp", "reppo"), cost_headline=("amdp",), cost_default=True),
)
"""AMDP's and its backprop baseline's registrations (diffrl.algos.registry)."""
