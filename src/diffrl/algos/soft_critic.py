"""The soft Q critic shared by REPPO, TruDi and AMDP.

Per iteration (REPPO, Voelcker et al. 2025, arXiv 2507.11019; github.com/cvoelcker/reppo):
  1. at every true next state s'_t draw K actions a'_{t,k} ~ pi(.|s'_t) with their log-density
     terms l'_{t,k} (exact for Gaussians, an upper-bound estimate for diffusion chains);
  2. V'_t = mean_k Q(s'_t, a'_{t,k}) and phi(s'_t, a'_{t,1}) from the critic at the START of the
     update, l'_t = mean_k l'_{t,k} (K = 1: one draw, as the reference's hydra version; its
     single-file version averages Q over 64 draws, which lowers the targets' variance where the
     policy is wide);
  3. soft lambda-returns from r~_t = r_t - gamma alpha (1 - term_t) l'_t (fixed for all epochs);
  4. each minibatch: one HL-Gauss cross-entropy (+ self-predictive auxiliary) step.
No target network. The policy is abstracted as ``sample_fn(obs, key) -> (action, log_prob)``.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from diffrl.algos.base import Rollout
from diffrl.critics.categorical import CategoricalCritic, CriticConfig, critic_loss
from diffrl.maths.returns import soft_lambda_returns, soft_rewards


def soft_targets(
    sample_fn: Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]],
    critic: CategoricalCritic,
    critic_params: Any,
    batch: Rollout,
    alpha: jax.Array,
    gamma: float,
    td_lambda: float,
    key: jax.Array,
    num_samples: int = 1,
) -> tuple[jax.Array, jax.Array, dict]:
    """Returns (targets (T, B), next_features (T, B, h), metrics); all stop-gradient.

    ``num_samples`` K: next actions drawn per next state (step 2 of the module docstring); with
    K = 1 the one draw uses ``key`` itself."""
    if num_samples == 1:
        next_action, next_log_prob = sample_fn(batch.next_obs, key)
        out = critic.apply(critic_params, batch.next_critic_obs, next_action)
        next_q, next_features = out.q_value, out.features
    else:
        keys = jax.random.split(key, num_samples)
        actions, log_probs = jax.vmap(lambda k: sample_fn(batch.next_obs, k))(keys)  # (K, T, B, ...)
        outs = jax.vmap(lambda a: critic.apply(critic_params, batch.next_critic_obs, a))(actions)
        next_q, next_log_prob = jnp.mean(outs.q_value, axis=0), jnp.mean(log_probs, axis=0)
        next_features = outs.features[0]
    rewards = soft_rewards(batch.reward, next_log_prob, batch.terminated, gamma, alpha)
    targets = soft_lambda_returns(rewards, next_q, batch.terminated, batch.truncated, gamma, td_lambda)
    metrics = {
        "critic/target_mean": jnp.mean(targets),
        "critic/next_q_mean": jnp.mean(next_q),
        "policy/next_log_prob": jnp.mean(next_log_prob),
    }
    return jax.lax.stop_gradient(targets), jax.lax.stop_gradient(next_features), metrics


def critic_step(
    critic: CategoricalCritic,
    config: CriticConfig,
    optimizer: optax.GradientTransformation,
    params: Any,
    opt_state: Any,
    minibatch: dict,
) -> tuple[Any, Any, dict]:
    """One gradient step on a minibatch dict with keys critic_obs (N, o), action (N, d),
    target (N,), next_features (N, h), reward (N,), terminated (N,)."""

    def loss_fn(p):
        return critic_loss(critic, p, minibatch["critic_obs"], minibatch["action"], minibatch["target"],
                           minibatch["next_features"], minibatch["reward"], minibatch["terminated"],
                           jnp.ones_like(minibatch["target"]), config)

    (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    metrics = {f"critic/{k}": v for k, v in metrics.items()}
    metrics["critic/grad_norm"] = optax.tree.norm(grads)
    return optax.apply_updates(params, updates), opt_state, metrics


def critic_batch(batch: Rollout, targets: jax.Array, next_features: jax.Array) -> dict:
    """The (T, B, ...) arrays the critic and actor steps read, as one dict."""
    return {
        "obs": batch.obs,
        "critic_obs": batch.critic_obs,
        "action": batch.action,
        "target": targets,
        "next_features": next_features,
        "reward": batch.reward,
        "terminated": batch.terminated.astype(jnp.float32),
    }


def best_of_k(sample_fn, q_fn, obs: jax.Array, critic_obs: jax.Array, key: jax.Array, k: int) -> jax.Array:
    """Best-of-K evaluation sampler: draw K actions per state, keep the argmax of Q.

    sample_fn(obs (K, B, o), key) -> actions (K, B, d); q_fn(critic_obs, actions) -> (K, B).
    """
    obs_k = jnp.broadcast_to(obs, (k,) + obs.shape)
    actions = sample_fn(obs_k, key)
    q = q_fn(jnp.broadcast_to(critic_obs, (k,) + critic_obs.shape), actions)
    best = jnp.argmax(q, axis=0)
    return jnp.take_along_axis(actions, best[None, ..., None], axis=0)[0]


def step_size(lr: float, c, total_updates: int) -> float | optax.Schedule:
    """Adam's step size ``lr``, or, with ``c.anneal_lr``, a schedule that decays it linearly to
    0 over ``total_updates`` optimizer steps (the reference's ``anneal_lr`` option, off there;
    CleanRL's PPO default). The schedule's position is Adam's own step count, held in the
    optimizer state, so a resumed run continues it exactly."""
    if not c.anneal_lr:
        return lr
    return optax.linear_schedule(lr, 0.0, max(1, total_updates))


def total_updates(config) -> int:
    """SGD steps over a whole run of ``config`` (iterations x epochs x minibatches)."""
    c = config.reppo
    return config.num_chunks * config.iterations_per_chunk * c.num_epochs * c.num_minibatches


def critic_optimizer(c, total_updates: int = 1) -> optax.GradientTransformation:
    """The critic's optimizer from a REPPOConfig ``c``: global-norm clip, then Adam, or AdamW
    (decoupled weight decay, Loshchilov & Hutter 2019) when ``c.critic_weight_decay > 0``; its
    step size anneals over ``total_updates`` steps with ``c.anneal_lr``."""
    clip = optax.clip_by_global_norm(c.max_grad_norm)
    lr = step_size(c.critic_lr, c, total_updates)
    if c.critic_weight_decay > 0:
        return optax.chain(clip, optax.adamw(lr, weight_decay=c.critic_weight_decay))
    return optax.chain(clip, optax.adam(lr))


class SoftActorCritic:
    """What REPPO, TruDi, AMDP and the off-policy family share besides the losses: acting with the
    policy, the learned Q, and evaluation samplers (the policy's own plus best-of-K by Q).

    Subclasses set ``self.policy``, ``self.critic`` and ``self.c`` (a config with ``best_of_k``); their
    state has ``actor_params`` and ``critic_params``. ``q_value`` reads a CategoricalCritic; a subclass
    with another critic overrides it (``diffrl.algos.offpolicy``).
    """

    # The export format holds a CategoricalCritic (diffrl.artefacts.export_critic): an export of such a run
    # carries its critic, so that the deployed policy offers best-of-K too.
    exports_critic = True

    @property
    def samplers(self) -> tuple[str, ...]:
        return tuple(self.policy.samplers) + ("best-of-k",)

    def act(self, state, obs, key):
        return self.policy.sample(state.actor_params, obs, key)

    def q_value(self, critic_params, critic_obs, action):
        return self.critic.apply(critic_params, critic_obs, action, method=CategoricalCritic.q_value)

    def eval_action(self, state, obs, critic_obs, key, sampler):
        if sampler == "best-of-k":
            return best_of_k(lambda o, k: self.policy.sample(state.actor_params, o, k)[0],
                             lambda co, a: self.q_value(state.critic_params, co, a),
                             obs, critic_obs, key, self.c.best_of_k)
        return self.policy.eval_action(state.actor_params, obs, key, sampler)
