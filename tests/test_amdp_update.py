"""AMDP's update: the score clip limit is a whole-batch statistic; only a dual multiplier is learned.

Oracles: the scores recomputed per sample (vmapped per-sample critic gradients, the erf
Jacobian in closed form) and numpy's quantile of their norms over the whole batch; the
trust-region modes' bookkeeping (closed_form and none leave log_lambda alone and log no
dual/lambda).
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.algos.amdp import make_amdp
from diffrl.algos.base import Rollout
from diffrl.algos.reppo_config import REPPOConfig
from diffrl.config import TrainConfig
from diffrl.critics.categorical import CriticConfig
from diffrl.envs.base import EnvSpec
from diffrl.policies.adjoint import AdjointAux, AdjointPolicyConfig
from param_fixtures import without_value_prior

SPEC = EnvSpec("synthetic", obs_size=3, action_size=2, action_low=(-1.0, -1.0), action_high=(1.0, 1.0),
               episode_length=100)
T, B, MINIBATCHES = 4, 64, 8  # 256 stored samples, minibatches of 32


def make(kl_multiplier: str):
    adjoint = AdjointPolicyConfig(hidden=(16, 16), num_steps=4,
                                  grad_clip_quantile=0.95, grad_clip_max=1e9)  # the quantile is the limit
    config = TrainConfig(algo="amdp", adjoint=adjoint, critic=CriticConfig(hidden=32, num_bins=51),
                         reppo=REPPOConfig(num_epochs=2, num_minibatches=MINIBATCHES, kl_multiplier=kl_multiplier))
    return make_amdp(config, SPEC)


def init_state(algo):
    """Initial state with a critic that has action gradients (see ``without_value_prior``)."""
    state = algo.init(jax.random.PRNGKey(1), SPEC)
    return state.replace(critic_params=without_value_prior(state.critic_params))


def synthetic_rollout(k: float) -> Rollout:
    """A rollout whose score norms spread over orders of magnitude: |k X_1|^2 is uniform on
    [0, 12], so the erf Jacobian exp(-k^2 X_1^2) (a factor of the score) spans e^-12..1."""
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    obs = jax.random.normal(keys[0], (T, B, SPEC.obs_size))
    u = jax.random.uniform(keys[1], (T, B, SPEC.action_size), maxval=12.0)
    x1 = jnp.sign(jax.random.normal(keys[2], u.shape)) * jnp.sqrt(u) / k
    return Rollout(
        obs=obs, critic_obs=obs, action=jax.scipy.special.erf(k * x1),
        reward=jax.random.normal(keys[3], (T, B)), terminated=jnp.zeros((T, B), bool),
        truncated=jnp.zeros((T, B), bool), next_obs=jax.random.normal(keys[4], obs.shape),
        next_critic_obs=jax.random.normal(keys[4], obs.shape),
        policy_aux=AdjointAux(pre_squash=x1, log_prob_bound=-jax.random.uniform(keys[5], (T, B))))


def oracle_scores(algo, critic_params, batch):
    """Per sample: grad_a Q at the stored action (one sample at a time), times the erf Jacobian
    2k/sqrt(pi) exp(-k^2 x^2); the norms and their numpy 95 % quantile over ALL 256 samples."""
    def q_one(obs, action):
        return algo.q_value(critic_params, obs[None], action[None])[0]

    obs = batch.critic_obs.reshape(-1, SPEC.obs_size)
    grad_q = np.asarray(jax.vmap(jax.grad(q_one, argnums=1))(obs, batch.action.reshape(-1, 2)), np.float64)
    k = algo.policy.ref.erf_scale
    x1 = np.asarray(batch.policy_aux.pre_squash, np.float64).reshape(-1, 2)
    score = 2 * k / math.sqrt(math.pi) * np.exp(-(k * x1) ** 2) * grad_q
    norms = np.linalg.norm(score, axis=-1)
    return score, norms, np.quantile(norms, 0.95)


def test_score_clip_limit_is_a_whole_batch_quantile_of_the_start_critic():
    algo = make("closed_form")
    state = init_state(algo)
    batch = synthetic_rollout(algo.policy.ref.erf_scale)
    score, norms, limit = oracle_scores(algo, state.critic_params, batch)
    assert np.all(norms > 0) and np.max(norms) / np.min(norms) > 1e4, "norms must spread for this test"
    # A per-minibatch quantile would be told apart: over minibatches of 32 it scatters widely
    # around the batch's (numpy's 95 % quantile of 32 norms lies between the 2nd and 3rd largest).
    per_minibatch = np.array([np.quantile(m, 0.95) for m in norms.reshape(MINIBATCHES, -1)])
    assert np.max(per_minibatch) / np.min(per_minibatch) > 1.5 and abs(np.mean(per_minibatch) / limit - 1) > 0.01

    computed = jax.jit(algo.score_clip_limit)(state.critic_params, batch)
    assert float(computed) == pytest.approx(limit, rel=1e-4)
    # clipping at it: the 13 largest of 256 norms are cut to the limit, the rest kept
    grad_q = algo.grad_q(state.critic_params, batch.critic_obs, batch.action)
    clipped, metrics = algo.policy.matching_scores(batch.policy_aux.pre_squash, grad_q, computed)
    expected = score * np.minimum(1.0, limit / norms)[:, None]
    np.testing.assert_allclose(np.asarray(clipped).reshape(-1, 2), expected, rtol=2e-4, atol=1e-12)
    assert float(metrics["am/score_clipped_frac"]) == pytest.approx(13 / 256)

    # The update clips every minibatch's scores (from the critic of that step) at this one
    # limit: the logged limit, a mean over the 16 steps, is the whole-batch value.
    new_state, update_metrics = jax.jit(algo.update)(state, batch, jax.random.PRNGKey(2))
    assert float(update_metrics["actor/am/score_clip_limit"]) == pytest.approx(limit, rel=1e-4)
    moved_limit = jax.jit(algo.score_clip_limit)(new_state.critic_params, batch)
    assert abs(float(moved_limit) / limit - 1) > 1e-3  # the critic did change: the start one was used


@pytest.mark.parametrize("mode", ["closed_form", "dual", "none"])
def test_only_the_dual_mode_learns_and_logs_a_dual_lambda(mode):
    algo = make(mode)
    state = init_state(algo)
    batch = synthetic_rollout(algo.policy.ref.erf_scale)
    new_state, metrics = jax.jit(algo.update)(state, batch, jax.random.PRNGKey(2))
    assert float(new_state.log_alpha) != float(state.log_alpha)  # the temperature dual still learns
    assert bool(jnp.isfinite(metrics["am/lambda"]))
    if mode == "dual":
        assert float(new_state.log_lambda) != float(state.log_lambda)
        assert float(metrics["dual/lambda"]) == pytest.approx(float(jnp.exp(state.log_lambda)), rel=0.1)
    else:
        assert float(new_state.log_lambda) == float(state.log_lambda)
        assert "dual/lambda" not in metrics
    if mode == "none":
        assert float(metrics["am/lambda"]) == 0.0
    if mode == "closed_form":  # alpha = 0.01 puts the raw target far away: the bound binds
        assert float(metrics["am/lambda"]) > 0.0
        assert float(metrics["am/target_kl"]) == pytest.approx(algo.c.kl_bound, rel=1e-3)
