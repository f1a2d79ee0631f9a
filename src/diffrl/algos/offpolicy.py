"""Off-policy max-entropy actor-critics on a replay buffer: ``sac``, ``dime-off``, ``amdp-off``.

The training core is the on-policy one (``diffrl.core.loop``): an iteration collects
num_envs x num_steps transitions with the current policy and hands them to ``update``. Here
``update`` writes them into the replay buffer held in the algorithm state (``diffrl.maths.replay``:
checkpointed, vmapped and sharded with the rest) and then takes ``utd x num_envs x num_steps``
gradient steps on minibatches drawn uniformly from it, once the buffer holds
``learning_starts`` transitions. Per step (CrossQ, Bhatt et al. 2024; DIME, Celik et al. 2025,
arXiv 2502.02316, off-policy recipe of github.com/ALRhub/DIME):

  critic:  a' ~ pi(.|s') fresh, with its log-density term l' (exact, or an upper-bound estimate);
           CrossQ (``--offpolicy.target-networks false``, DIME's): one joint batch-renormalised pass
           over (s, a) and (s', a') (``critics.crossq``), the next values from the critics themselves;
           SAC (``--offpolicy.target-networks true``, the ``sac`` presets; Haarnoja et al. 2018, arXiv
           1812.05905, Sec. 5 and Alg. 1): Q_e(s', a') from target critics theta'_e, Polyak-averaged
           after every critic step, theta'_e <- (1 - tau) theta'_e + tau theta_e (tau = 0.005),
           reduced by the minimum over the two (clipped double Q, ``--offpolicy.ensemble-reduce min``);
           scalar:       y = r + gamma (1 - term) (reduce_e Q_e(s', a') - alpha l'),
                         loss = mean_e 1/2 (Q_e(s, a) - sg(y))^2;
           categorical:  each member's next distribution projected through
                         r + gamma (1 - term)(z - alpha l') (C51), the projections combined by
                         ``ensemble_reduce`` (mean: DIME's average), loss = cross-entropy of every
                         member + critic_entropy_coef * sum_i p_i log p_i;
  actor and temperature, every ``policy_delay`` critic steps, against the critic in evaluation
  mode (running statistics):
    * ``sac`` (Haarnoja et al. 2018, arXiv 1812.05905) and ``dime-off`` (DIME): the reverse-KL
      loss mean(sg(alpha) log pi(a~|s) - reduce_e Q_e(s, a~)) through a reparameterised sample
      (for DIME, backpropagated through all N denoising steps; ``log pi`` its upper bound);
    * ``amdp-off`` (AMDP, Thilges et al. 2026, arXiv 2606.22630, off-policy setting): reciprocal
      adjoint matching on the REPLAYED terminal pre-squash actions X_1 (the regression target
      needs only X_1 and grad_a Q there: no chain is simulated or differentiated), the per-sample
      score clip a quantile over the drawn batch, and the drift trust region
      (--offpolicy.kl-multiplier closed_form or none, radius --offpolicy.kl-bound) against the actor at
      the start of the iteration;
  temperature: L = alpha sg(H - H*), H = -mean of the fresh next-state samples' dual_log_prob.
Without target networks (CrossQ) the next-state values come from the same pass as the current ones.

Deviations from the papers and their reference code (each a choice made here, with its reason):
* all three: before ``learning_starts`` the agent acts with its initial policy, where SAC's and
  DIME's code (and CrossQ's, through Stable-Baselines3) act uniformly at random: one acting path for
  every algorithm and for evaluation; the temperature statistic H comes from the critic step's
  next-state draws, not a separate actor-step sample (the same estimator, no extra chain); the
  temperature loss alpha sg(H - H*) has SAC's fixed point (its step differs by the factor alpha,
  which Adam normalises away).
* sac: the paper's settings at paper scale (``diffrl.algos.offpolicy_presets``) except the
  transitions before learning (5,000, DIME's; not in SAC's Table 1) and the policy's log-std range
  (a floor of 1e-3 on the std and log-std <= 2, where SAC's code clips the log-std to [-20, 2]). The
  CPU presets shrink the networks and the batch, take 0.5 gradient steps per transition and start
  the temperature at 0.1 (measured: 1.0 spent a third of a Pendulum run decaying).
* dime-off: the control network is TruDi's (32 Fourier time frequencies, a 16-wide time embedding;
  DIME's code uses 256 and 256), shared with the on-policy chain; the CPU presets run 8 denoising
  steps (DIME: 16), narrower networks and a policy delay of 2 (an iteration's critic steps must be a
  multiple of it).
* amdp-off: AMDP's off-policy setting as the paper describes it (no public code); the drift trust
  region's anchor is the actor at the start of each iteration (utd x num_envs x num_steps critic
  steps earlier).
"""
from __future__ import annotations

import abc
import math
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from diffrl.algos.amdp import drift_trust_region
from diffrl.algos.base import Rollout
from diffrl.algos.offpolicy_losses import (categorical_td_loss, pathwise_actor_loss, polyak_update, reduce_ensemble,
                                           scalar_td_loss)
from diffrl.algos.spec import AlgorithmSpec
from diffrl.algos.trudi import DPPO_ONLY_SETTINGS
from diffrl.algos.soft_critic import SoftActorCritic
from diffrl.critics.crossq import CrossQCritic, atoms, joint_forward
from diffrl.envs.base import EnvSpec
from diffrl.policies import AdjointMatchingPolicy, PathwisePolicy, require
from diffrl.maths.replay import ReplayBuffer, add, init_buffer, sample, slots_for
from diffrl.maths.trust_region import temperature_loss


@struct.dataclass
class OffPolicyState:
    actor_params: Any
    critic_params: Any  # flax variables: {"params": ..., "batch_stats": ...}
    log_alpha: jax.Array
    actor_opt: Any
    critic_opt: Any
    alpha_opt: Any
    buffer: ReplayBuffer
    critic_steps: jax.Array  # () int32, gradient steps of the critic so far
    target_critic_params: Any = None  # Polyak-averaged copy of critic_params (target_networks), else None


def _cond_or_zeros(pred: jax.Array, fn, operand):
    """``fn(operand) -> (operand', metrics)`` where ``pred``, else ``(operand, zero metrics)``: nothing of
    ``fn`` is computed on the skipping branch."""
    zeros = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(fn, operand)[1])
    return jax.lax.cond(pred, fn, lambda x: (x, zeros), operand)


class OffPolicy(SoftActorCritic, abc.ABC):
    """What the three algorithms share: buffer, critic, schedule; acting and evaluation (the policy's
    samplers and best-of-K by Q) are :class:`SoftActorCritic`'s. Subclasses define ``next_sample`` and
    ``actor_step_loss``, and may store more of the acting aux (``stored_aux``)."""

    # The batch-renormalised CrossQ critic is not in the export format (a CategoricalCritic):
    # exports hold the policy alone, and best-of-K runs from checkpoints (diffrl eval).
    exports_critic = False

    def __init__(self, config, spec: EnvSpec, policy, name: str, default_target_mult: float):
        c = config.offpolicy
        if config.normalize_obs:
            raise ValueError("off-policy algorithms replay stored observations, which running normalisation "
                             "statistics would make stale; use --normalize-obs false (the critics batch-"
                             "renormalise their inputs)")
        self.name, self.config, self.c, self.policy = name, config, c, policy
        self.critic = CrossQCritic(hidden=tuple(c.critic_hidden), num_critics=c.num_critics,
                                   num_bins=c.num_bins if c.critic == "categorical" else 0,
                                   momentum=c.renorm_momentum, warmup=c.renorm_warmup, norm=c.critic_norm)
        self.support = atoms(c.vmin, c.vmax, c.num_bins) if c.critic == "categorical" else None
        mult = c.entropy_target_mult if c.entropy_target_mult is not None else default_target_mult
        self.target_entropy = mult * spec.action_size
        self.asymmetric = config.asymmetric_critic
        self.capacity = slots_for(c.buffer_size, config.num_envs)
        self.updates_per_iteration = c.updates_per_iteration(config.batch_size)
        if config.num_steps > self.capacity:
            raise ValueError(f"--num-steps ({config.num_steps}) exceeds the buffer's {self.capacity} slots per env "
                             f"(--offpolicy.buffer-size {c.buffer_size} / --num-envs {config.num_envs})")
        actor_chain = [optax.clip(c.actor_clip)] if c.actor_clip > 0 else []
        self.actor_optimizer = optax.chain(*actor_chain, optax.adam(c.actor_lr, b1=c.adam_b1))
        self.critic_optimizer = optax.adam(c.critic_lr, b1=c.adam_b1)
        self.alpha_optimizer = optax.adam(c.alpha_lr)

    # -- state ---------------------------------------------------------------------------
    def stored_aux(self, aux) -> dict:
        """The part of the acting aux the actor update replays (none by default)."""
        return {}

    def _transitions(self, batch: Rollout) -> dict:
        items = {"obs": batch.obs, "action": batch.action, "reward": batch.reward,
                 "terminated": batch.terminated.astype(jnp.float32), "next_obs": batch.next_obs,
                 **self.stored_aux(batch.policy_aux)}
        if self.asymmetric:  # otherwise critic_obs == obs: not stored twice
            items.update(critic_obs=batch.critic_obs, next_critic_obs=batch.next_critic_obs)
        return items

    def init(self, key, spec: EnvSpec) -> OffPolicyState:
        key_actor, key_critic, key_aux = jax.random.split(key, 3)
        actor = self.policy.init(key_actor, spec.obs_size)
        variables = self.critic.init(key_critic, jnp.zeros((1, spec.critic_size)), jnp.zeros((1, spec.action_size)))
        critic_params = {"params": variables["params"], "batch_stats": variables.get("batch_stats", {})}
        log_alpha = jnp.asarray(math.log(self.c.ent_start), jnp.float32)
        b = self.config.num_envs
        obs = jnp.zeros((b, spec.obs_size))
        _, aux = jax.eval_shape(lambda: self.policy.sample(actor, obs, key_aux))
        aux = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), aux)
        example = Rollout(obs=obs, critic_obs=jnp.zeros((b, spec.critic_size)),
                          action=jnp.zeros((b, spec.action_size)), reward=jnp.zeros((b,)),
                          terminated=jnp.zeros((b,), bool), truncated=jnp.zeros((b,), bool), next_obs=obs,
                          next_critic_obs=jnp.zeros((b, spec.critic_size)), policy_aux=aux)
        buffer = init_buffer(self._transitions(example), self.capacity)
        return OffPolicyState(actor, critic_params, log_alpha, self.actor_optimizer.init(actor),
                              self.critic_optimizer.init(critic_params["params"]), self.alpha_optimizer.init(log_alpha),
                              buffer, jnp.zeros((), jnp.int32), critic_params if self.c.target_networks else None)

    # -- values --------------------------------------------------------------------------
    def member_values(self, critic_params, critic_obs, action) -> jax.Array:
        """(E, ...) each member's Q(s, a) with the running statistics (evaluation mode)."""
        out = self.critic.apply(critic_params, critic_obs, action, False)
        return jnp.sum(jax.nn.softmax(out, -1) * self.support, -1) if self.support is not None else out

    def q_value(self, critic_params, critic_obs, action) -> jax.Array:
        """(...,) the ensemble's Q(s, a) (``ensemble_reduce``)."""
        return reduce_ensemble(self.member_values(critic_params, critic_obs, action), self.c.ensemble_reduce)

    # -- update ----------------------------------------------------------------------------
    def critic_loss(self, params, batch_stats, mb, next_action, next_log_prob, alpha, target_params=None):
        """The TD loss of the critics ``params`` at the minibatch ``mb``; the next-state outputs come from
        the same training-mode pass (CrossQ) or, given ``target_params``, from the target critics with
        their running statistics (SAC). Returns (loss, (new batch_stats, metrics))."""
        c = self.c
        variables = {"params": params, "batch_stats": batch_stats}
        if target_params is None:
            out, next_out, stats = joint_forward(self.critic, variables, mb["critic_obs"], mb["action"],
                                                 mb["next_critic_obs"], next_action)
        else:
            out, updates = self.critic.apply(variables, mb["critic_obs"], mb["action"], True, mutable=["batch_stats"])
            stats = updates.get("batch_stats", {})
            next_out = self.critic.apply(target_params, mb["next_critic_obs"], next_action, False)
        next_out = jax.lax.stop_gradient(next_out)
        if self.support is None:
            loss, metrics = scalar_td_loss(out, next_out, mb["reward"], mb["terminated"], next_log_prob, alpha,
                                           c.gamma, c.ensemble_reduce)
        else:
            loss, metrics = categorical_td_loss(out, next_out, mb["reward"], mb["terminated"], next_log_prob, alpha,
                                                c.gamma, self.support, c.ensemble_reduce, c.critic_entropy_coef)
        return loss, (stats, metrics)

    @abc.abstractmethod
    def next_sample(self, params, obs, key) -> tuple[jax.Array, jax.Array, jax.Array]:
        """(a' (N, d), l' (N,) for the soft target, dual l' (N,) for the temperature), stop-gradient."""

    @abc.abstractmethod
    def actor_step_loss(self, params, old_params, critic_params, mb, alpha, key) -> tuple[jax.Array, dict]:
        """(scalar loss, metrics) of one actor step on a minibatch ``mb`` from the buffer (its obs and
        critic_obs (N, ...), action, reward, ...), against the critic in evaluation mode."""

    def _minibatch(self, buffer: ReplayBuffer, key) -> dict:
        """``batch_size`` transitions from the buffer; the critic's observations are the actor's ones
        unless the critic is asymmetric (then they were stored separately)."""
        mb = sample(buffer, key, self.c.batch_size)
        if not self.asymmetric:
            mb.update(critic_obs=mb["obs"], next_critic_obs=mb["next_obs"])
        return mb

    def update(self, state: OffPolicyState, batch: Rollout, key):
        c = self.c
        buffer = add(state.buffer, self._transitions(batch))
        old_params = state.actor_params  # the trust region's anchor (amdp-off)

        def critic_step(carry, key_step):
            """One critic step; returns the minibatch, alpha, entropy and the actor's key for an actor step."""
            actor, critic_params, target_params, log_alpha, actor_opt, critic_opt, alpha_opt, steps = carry
            key_batch, key_next, key_actor = jax.random.split(key_step, 3)
            mb = self._minibatch(buffer, key_batch)
            alpha = jnp.exp(log_alpha)
            next_action, next_lp, next_dual_lp = self.next_sample(actor, mb["next_obs"], key_next)
            (critic_loss, (stats, critic_metrics)), grads = jax.value_and_grad(self.critic_loss, has_aux=True)(
                critic_params["params"], critic_params["batch_stats"], mb, next_action, next_lp, alpha, target_params)
            updates, critic_opt = self.critic_optimizer.update(grads, critic_opt, critic_params["params"])
            critic_params = {"params": optax.apply_updates(critic_params["params"], updates), "batch_stats": stats}
            if target_params is not None:
                target_params = polyak_update(target_params, critic_params, c.target_tau)
            critic_metrics.update({"critic/loss": critic_loss, "critic/grad_norm": optax.tree.norm(grads)})
            entropy = -jnp.mean(next_dual_lp)
            every_step = {**critic_metrics, "actor/entropy_estimate": entropy, "dual/alpha": alpha}
            carry = (actor, critic_params, target_params, log_alpha, actor_opt, critic_opt, alpha_opt, steps + 1)
            return carry, every_step, (mb, alpha, entropy, key_actor)

        def actor_step(carry, mb, alpha, entropy, key_actor):
            actor, critic_params, target_params, log_alpha, actor_opt, critic_opt, alpha_opt, steps = carry
            (_, metrics), grads = jax.value_and_grad(self.actor_step_loss, has_aux=True)(
                actor, old_params, critic_params, mb, alpha, key_actor)
            updates, actor_opt = self.actor_optimizer.update(grads, actor_opt, actor)
            actor = optax.apply_updates(actor, updates)
            metrics["actor/grad_norm"] = optax.tree.norm(grads)
            if c.learn_alpha:
                alpha_grad = jax.grad(temperature_loss)(log_alpha, entropy, self.target_entropy)
                alpha_update, alpha_opt = self.alpha_optimizer.update(alpha_grad, alpha_opt)
                log_alpha = optax.apply_updates(log_alpha, alpha_update)
            return (actor, critic_params, target_params, log_alpha, actor_opt, critic_opt, alpha_opt, steps), metrics

        def critic_only(carry, key_step):
            carry, every_step, _ = critic_step(carry, key_step)
            return carry, every_step

        def group(carry, keys):
            """policy_delay critic steps, the actor stepping after the first of them: the schedule of
            steps s with s % policy_delay == 0, as every iteration starts at a multiple of the delay
            (batch_errors). A structural schedule, not a ``lax.cond`` on the step counter: vmapped
            over seeds, a cond whose predicate is per-seed state becomes a select that computes the
            actor step at every critic step."""
            carry, first, (mb, alpha, entropy, key_actor) = critic_step(carry, keys[0])
            carry, actor_metrics = actor_step(carry, mb, alpha, entropy, key_actor)
            if c.policy_delay == 1:
                return carry, (jax.tree_util.tree_map(lambda x: x[None], first), actor_metrics)
            carry, rest = jax.lax.scan(critic_only, carry, keys[1:])
            every_step = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)
            return carry, (every_step, actor_metrics)

        def learn(carry):
            keys = jax.random.split(key, self.updates_per_iteration)
            keys = keys.reshape(self.updates_per_iteration // c.policy_delay, c.policy_delay, *keys.shape[1:])
            carry, (every_step, actor_metrics) = jax.lax.scan(group, carry, keys)
            means = {k: jnp.mean(v) for k, v in every_step.items()}
            means.update({k: jnp.mean(v) for k, v in actor_metrics.items()})
            return carry, means

        carry = (state.actor_params, state.critic_params, state.target_critic_params, state.log_alpha,
                 state.actor_opt, state.critic_opt, state.alpha_opt, state.critic_steps)
        learning = buffer.transitions >= max(c.learning_starts, 1)
        carry, metrics = _cond_or_zeros(learning, learn, carry)
        actor, critic_params, target_params, log_alpha, actor_opt, critic_opt, alpha_opt, steps = carry
        metrics["offpolicy/buffer_transitions"] = buffer.transitions.astype(jnp.float32)
        metrics["offpolicy/learning"] = learning.astype(jnp.float32)
        return OffPolicyState(actor, critic_params, log_alpha, actor_opt, critic_opt, alpha_opt, buffer, steps,
                              target_params), metrics


class PathwiseOffPolicy(OffPolicy):
    """``sac`` (Gaussian policy) and ``dime-off`` (DIME chain): reverse KL through a
    reparameterised sample."""

    def __init__(self, config, spec, policy, name, default_target_mult):
        require(policy, PathwisePolicy, name)
        super().__init__(config, spec, policy, name, default_target_mult)

    def next_sample(self, params, obs, key):
        out = jax.lax.stop_gradient(self.policy.rsample(params, obs, key))
        return out.action, out.log_prob, out.dual_log_prob

    def actor_step_loss(self, params, old_params, critic_params, mb, alpha, key):
        out = self.policy.rsample(params, mb["obs"], key)
        q = self.q_value(critic_params, mb["critic_obs"], out.action)
        loss = pathwise_actor_loss(out.log_prob, q, alpha)
        return loss, {"actor/loss": loss, "actor/q": jnp.mean(q), "actor/log_prob": jnp.mean(out.log_prob)}


class AdjointOffPolicy(OffPolicy):
    """``amdp-off``: reciprocal adjoint matching on replayed terminal actions."""

    def __init__(self, config, spec, policy, name="amdp-off"):
        require(policy, AdjointMatchingPolicy, name)
        if config.offpolicy.kl_multiplier == "dual":
            raise ValueError("--offpolicy.kl-multiplier dual is not offered off-policy (its multiplier would need "
                             "a dual step per iteration); use closed_form or none")
        super().__init__(config, spec, policy, name, policy.config.entropy_target_mult)

    def stored_aux(self, aux) -> dict:
        return {"pre_squash": aux.pre_squash}

    def next_sample(self, params, obs, key):
        action, aux = self.policy.sample(params, obs, key)
        return action, aux.log_prob_bound, aux.log_prob_bound

    def actor_step_loss(self, params, old_params, critic_params, mb, alpha, key):
        grad_q = jax.grad(lambda a: jnp.sum(self.q_value(critic_params, mb["critic_obs"], a)))(mb["action"])
        grad_q = jax.lax.stop_gradient(grad_q)
        limit = self.policy.score_clip_limit(mb["pre_squash"], grad_q)  # over the drawn batch
        score, score_metrics = self.policy.matching_scores(mb["pre_squash"], grad_q, limit)
        loss, metrics = self.policy.matching_loss(params, old_params, mb["obs"], mb["pre_squash"], score, key, alpha)
        return loss, {**metrics, **{f"actor/{k}": v for k, v in score_metrics.items()}, "actor/loss": loss}


SAC_ENTROPY_TARGET_MULT = -1.0  # SAC: H* = -d
DIME_ENTROPY_TARGET_MULT = -4.0  # DIME's code: alpha grows while the running cost exceeds 4 d


def make_sac(config, spec: EnvSpec) -> PathwiseOffPolicy:
    from diffrl.policies.gaussian import GaussianPolicy

    return PathwiseOffPolicy(config, spec, GaussianPolicy(config.gaussian, spec.action_size), "sac",
                             SAC_ENTROPY_TARGET_MULT)


def make_dime_off(config, spec: EnvSpec) -> PathwiseOffPolicy:
    from diffrl.policies.diffusion import DiffusionPolicy

    return PathwiseOffPolicy(config, spec, DiffusionPolicy(config.diffusion, spec.action_size), "dime-off",
                             DIME_ENTROPY_TARGET_MULT)


def make_amdp_off(config, spec: EnvSpec) -> AdjointOffPolicy:
    from diffrl.policies.adjoint import AdjointPolicy

    policy = AdjointPolicy(config.adjoint, spec.action_size, trust_region=drift_trust_region(config.offpolicy))
    return AdjointOffPolicy(config, spec, policy)


# Only amdp-off has a trust region off-policy (AMDP's, on the drift).
_NO_DRIFT_TRUST_REGION = {f"offpolicy.{name}": "it sets amdp-off's drift trust region (--algo amdp-off)"
                          for name in ("kl_multiplier", "kl_bound")}

# DIME's off-policy recipe has no trust region; the noise floor and denoising discount are DPPO's.
_DIME_OFF_UNREAD = {**DPPO_ONLY_SETTINGS, **_NO_DRIFT_TRUST_REGION}

SPECS = (
    AlgorithmSpec("sac", make_sac, ("offpolicy", "gaussian"), "gaussian", "SAC",
                  "SAC (Haarnoja et al. 2018) on the off-policy core: tanh-Gaussian, automatic temperature",
                  unused_settings={"gaussian.kl_samples": "SAC has no trust region", **_NO_DRIFT_TRUST_REGION},
                  off_policy=True,
                  cost_default=True),
    AlgorithmSpec("amdp-off", make_amdp_off, ("offpolicy", "adjoint"), "adjoint", "AMDP-off",
                  "AMDP's off-policy setting: reciprocal adjoint matching on replayed terminal actions",
                  unused_settings={
                      "adjoint.matching_steps": "each critic step's batch is fresh from the buffer; raise "
                                                "--offpolicy.utd instead"},
                  diffusion_steps="adjoint.num_steps", off_policy=True, cost_baselines=("sac",),
                  cost_headline=("sac",), cost_default=True),
    AlgorithmSpec("dime-off", make_dime_off, ("offpolicy", "diffusion"), "diffusion", "DIME-off",
                  "DIME's off-policy recipe (Celik et al. 2025): reverse KL through the chain, replay buffer",
                  unused_settings=_DIME_OFF_UNREAD, diffusion_steps="diffusion.num_steps", off_policy=True,
                  cost_baselines=("sac", "amdp-off"), cost_headline=("amdp-off",), cost_default=True),
)
"""The off-policy family's registrations (diffrl.algos.registry)."""
