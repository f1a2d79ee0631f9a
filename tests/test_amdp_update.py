"""AMDP's update: the score clip is a whole-batch statistic; only a dual multiplier is learned.

Oracles: the clipped scores recomputed per sample (vmapped per-sample critic gradients, the
erf Jacobian in closed form, numpy's quantile over the whole batch), and the trust-region
modes' bookkeeping (closed_form and none leave log_lambda alone and log no dual/lambda).
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


def make(trust_region: str):
    adjoint = AdjointPolicyConfig(hidden=(16, 16), num_steps=4, trust_region=trust_region,
                                  grad_clip_quantile=0.95, grad_clip_max=1e9)  # the quantile is the limit
    config = TrainConfig(algo="amdp", adjoint=adjoint, critic=CriticConfig(hidden=32, num_bins=51),
                         reppo=REPPOConfig(num_epochs=2, num_minibatches=MINIBATCHES))
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
    2k/sqrt(pi) exp(-k^2 x^2), norm-clipped at numpy's 95 % quantile of ALL 256 norms."""
    def q_one(obs, action):
        return algo.q_value(critic_params, obs[None], action[None])[0]

    obs = batch.critic_obs.reshape(-1, SPEC.obs_size)
    grad_q = np.asarray(jax.vmap(jax.grad(q_one, argnums=1))(obs, batch.action.reshape(-1, 2)), np.float64)
    k = algo.policy.ref.erf_scale
    x1 = np.asarray(batch.policy_aux.pre_squash, np.float64).reshape(-1, 2)
    score = 2 * k / math.sqrt(math.pi) * np.exp(-(k * x1) ** 2) * grad_q
    norms = np.linalg.norm(score, axis=-1)
    limit = np.quantile(norms, 0.95)
    clipped = score * np.minimum(1.0, limit / norms)[:, None]
    return clipped, norms, limit


def test_scores_are_clipped_at_a_whole_batch_quantile_with_the_start_critic():
    algo = make("closed_form")
    state = init_state(algo)
    batch = synthetic_rollout(algo.policy.ref.erf_scale)
    expected, norms, limit = oracle_scores(algo, state.critic_params, batch)
    assert np.all(norms > 0) and np.max(norms) / np.min(norms) > 1e4, "norms must spread for this test"
    scores, metrics = jax.jit(algo.stored_scores)(state.critic_params, batch)
    assert scores.shape == (T, B, 2)
    np.testing.assert_allclose(np.asarray(scores).reshape(-1, 2), expected, rtol=2e-4, atol=1e-12)
    assert float(metrics["am/score_clip_limit"]) == pytest.approx(limit, rel=1e-4)

    # Per-minibatch clipping would be told apart: with 32 distinct norms, numpy's 95 % quantile
    # lies between the 2nd and 3rd largest, so exactly 2 / 32 = 6.25 % of every minibatch is
    # clipped whatever the shuffle; over the whole batch of 256, 13 / 256 = 5.08 %.
    assert np.mean(norms > limit) == pytest.approx(13 / 256)
    per_minibatch = np.mean([np.mean(m > np.quantile(m, 0.95)) for m in norms.reshape(MINIBATCHES, -1)])
    assert per_minibatch == pytest.approx(2 / 32)

    # The update logs the limit and clipped fraction it regressed with: one whole-batch value
    # from the critic at the START of the update (the critic moves during the epochs).
    new_state, update_metrics = jax.jit(algo.update)(state, batch, jax.random.PRNGKey(2))
    assert float(update_metrics["actor/am/score_clip_limit"]) == pytest.approx(limit, rel=1e-4)
    assert float(update_metrics["actor/am/score_clipped_frac"]) == pytest.approx(13 / 256)
    _, moved_limit = jax.jit(algo.stored_scores)(new_state.critic_params, batch)
    assert abs(float(moved_limit["am/score_clip_limit"]) / limit - 1) > 1e-3  # the critic did change


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
        assert float(metrics["am/target_kl"]) == pytest.approx(algo.policy.config.kl_bound, rel=1e-3)
