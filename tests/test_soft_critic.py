"""The soft TD targets of the REPPO family (diffrl.algos.soft_critic.soft_targets) against a
plain computation: K next-action draws per next state average Q and the log-density term."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.algos.base import Rollout
from diffrl.algos.soft_critic import soft_targets
from diffrl.algos.reppo_config import REPPOConfig
from diffrl.critics.categorical import CategoricalCritic, CriticConfig
from diffrl.maths.returns import soft_lambda_returns, soft_rewards

T, B, OBS, ACT = 5, 3, 4, 2
GAMMA, LAM, ALPHA = 0.9, 0.8, 0.3


def sample_fn(obs, key):
    """A state-dependent Gaussian stand-in for a policy: (action, log-density)."""
    noise = jax.random.normal(key, obs.shape[:-1] + (ACT,))
    action = jnp.tanh(0.5 * obs[..., :ACT] + noise)
    return action, -0.5 * jnp.sum(noise**2, axis=-1)


@pytest.fixture(scope="module")
def setup():
    critic = CategoricalCritic(CriticConfig(hidden=16, num_bins=21, vmin=-5.0, vmax=5.0))
    params = critic.init(jax.random.PRNGKey(0), jnp.zeros((1, OBS)), jnp.zeros((1, ACT)))
    rng = np.random.default_rng(0)
    f = lambda *shape: jnp.asarray(rng.normal(size=shape), jnp.float32)  # noqa: E731
    batch = Rollout(obs=f(T, B, OBS), critic_obs=f(T, B, OBS), action=f(T, B, ACT), reward=f(T, B),
                    terminated=jnp.asarray(rng.random((T, B)) < 0.2), truncated=jnp.asarray(rng.random((T, B)) < 0.2),
                    next_obs=f(T, B, OBS), next_critic_obs=f(T, B, OBS), policy_aux=None)
    return critic, params, batch


@pytest.mark.parametrize("k", [1, 4])
def test_targets_average_q_and_log_density_over_k_draws(setup, k):
    critic, params, batch = setup
    key = jax.random.PRNGKey(7)
    targets, features, _ = soft_targets(sample_fn, critic, params, batch, ALPHA, GAMMA, LAM, key, k)
    keys = [key] if k == 1 else list(jax.random.split(key, k))
    qs, lps, feats = [], [], []
    for kk in keys:  # the plain loop over draws
        a, lp = sample_fn(batch.next_obs, kk)
        out = critic.apply(params, batch.next_critic_obs, a)
        qs.append(out.q_value), lps.append(lp), feats.append(out.features)
    v_next, lp_next = sum(qs) / k, sum(lps) / k
    want = soft_lambda_returns(soft_rewards(batch.reward, lp_next, batch.terminated, GAMMA, ALPHA), v_next,
                               batch.terminated, batch.truncated, GAMMA, LAM)
    np.testing.assert_allclose(targets, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(features, feats[0], rtol=1e-5, atol=1e-5)


def test_more_draws_lower_the_targets_variance(setup):
    """Over fresh keys the K = 16 targets vary less than the one-draw ones (the reason for K)."""
    critic, params, batch = setup

    def spread(k):
        keys = jax.random.split(jax.random.PRNGKey(1), 64)
        ts = jax.vmap(lambda kk: soft_targets(sample_fn, critic, params, batch, ALPHA, GAMMA, LAM, kk, k)[0])(keys)
        return float(jnp.mean(jnp.var(ts, axis=0)))

    assert spread(16) < 0.25 * spread(1)


def test_next_action_samples_must_be_positive():
    with pytest.raises(ValueError, match="next-action-samples"):
        REPPOConfig(next_action_samples=0).validate()
