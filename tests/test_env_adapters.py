"""Brax and gymnax adapters run wrapped, batched and jitted on the CPU.

Each test compiles one reset + ``lax.scan`` of wrapped steps at a small batch size.
Tests run under a timeout because Brax/MJX can hang at large batch sizes (see
docs/environments.md). The Playground adapter has its own file (its compile alone takes
~20 s of CPU), tests/test_playground.py, which reuses :func:`run_wrapped` from here.
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.envs import make, wrap


def run_wrapped(env, num_envs, num_steps, seed=0):
    """Reset ``num_envs`` envs and take ``num_steps`` uniform random actions in [-1, 1]."""
    wrapped = wrap(env)

    @jax.jit
    def run(key):
        key_reset, key_actions = jax.random.split(key)
        state = wrapped.reset(jax.random.split(key_reset, num_envs))

        def body(s, k):
            a = jax.random.uniform(k, (num_envs, wrapped.spec.action_size), minval=-1.0, maxval=1.0)
            s = wrapped.step(s, a)
            return s, s

        return state, jax.lax.scan(body, state, jax.random.split(key_actions, num_steps))[1]

    first, traj = run(jax.random.PRNGKey(seed))
    return wrapped, jax.device_get(first), jax.device_get(traj)


def check_batch(spec, first, traj, num_envs, num_steps):
    """Shapes, dtypes and finiteness of a wrapped rollout."""
    assert first.obs.shape == (num_envs, spec.obs_size)
    assert first.critic_obs.shape == (num_envs, spec.critic_size)
    assert traj.obs.shape == (num_steps, num_envs, spec.obs_size)
    assert traj.final_obs.shape == traj.obs.shape
    assert traj.reward.shape == (num_steps, num_envs) and traj.reward.dtype == np.float32
    assert traj.terminated.dtype == np.bool_ and traj.truncated.dtype == np.bool_
    for x in (first.obs, traj.obs, traj.final_obs, traj.critic_obs, traj.reward):
        assert np.all(np.isfinite(x))
    assert not np.any(traj.terminated & traj.truncated)


@pytest.mark.timeout(300)
def test_brax_inverted_pendulum():
    env = make("brax/inverted_pendulum")
    spec = env.spec
    assert (spec.obs_size, spec.action_size, spec.episode_length) == (4, 1, 1000)
    assert spec.action_low == (-3.0,) and spec.action_high == (3.0,)  # actuator ctrlrange
    wrapped, first, traj = run_wrapped(env, num_envs=4, num_steps=40)
    check_batch(wrapped.spec, first, traj, 4, 40)
    # Random torques topple the pole: terminations happen, and auto-reset restarts.
    assert traj.terminated.any() and not traj.truncated.any()
    t, i = np.argwhere(traj.terminated)[0]
    assert traj.step_count[t, i] == 0 and traj.info["returned_episode"][t, i]
    assert traj.info["returned_episode_length"][t, i] == t + 1
    assert not np.array_equal(traj.final_obs[t, i], traj.obs[t, i])


@pytest.mark.timeout(300)
def test_gymnax_pendulum_truncates_at_200():
    env = make("gymnax/Pendulum-v1")
    spec = env.spec
    assert (spec.obs_size, spec.action_size, spec.episode_length) == (3, 1, 200)
    assert spec.action_low == (-2.0,) and spec.action_high == (2.0,)
    wrapped, first, traj = run_wrapped(env, num_envs=4, num_steps=205)
    check_batch(wrapped.spec, first, traj, 4, 205)
    assert not traj.terminated.any()
    expected = np.zeros((205, 4), bool)
    expected[199] = True
    np.testing.assert_array_equal(traj.truncated, expected)
    np.testing.assert_array_equal(traj.info["returned_episode_length"][199], 200)
    np.testing.assert_allclose(
        traj.info["returned_episode_return"][199], traj.reward[:200].sum(0), rtol=1e-4
    )
    # gymnax's own auto-reset is not used: the true final observation is kept.
    assert np.all(traj.final_obs[199] != traj.obs[199])
    np.testing.assert_array_equal(traj.step_count[200], 1)


@pytest.mark.timeout(300)
def test_gymnax_mountain_car_continuous_terminates_at_goal():
    env = make("gymnax/MountainCarContinuous-v0")
    spec = env.spec
    assert (spec.obs_size, spec.action_size, spec.episode_length) == (2, 1, 999)
    assert spec.action_low == (-1.0,) and spec.action_high == (1.0,)
    # Put one env just before the goal moving right: the next step terminates it.
    state = env.reset(jax.random.PRNGKey(0))
    inner = dict(state.inner)
    inner["env_state"] = inner["env_state"].replace(
        position=jnp.float32(0.44), velocity=jnp.float32(0.05)
    )
    state = state.replace(inner=inner)
    stepped = jax.jit(env.step)(state, jnp.array([1.0]))
    assert bool(stepped.terminated)
    assert float(stepped.reward) > 99.0
    assert float(stepped.obs[0]) >= 0.45


@pytest.mark.timeout(300)
def test_gymnax_misc_specs_and_step():
    expected = {"PointRobot-misc": (6, 2, 100), "Reacher-misc": (8, 2, 100), "Swimmer-misc": (16, 2, 500)}
    for task, (obs_size, action_size, episode_length) in expected.items():
        env = make(f"gymnax/{task}")
        spec = env.spec
        assert (spec.obs_size, spec.action_size, spec.episode_length) == expected[task]
        state = jax.jit(lambda k: env.step(env.reset(k), jnp.full((action_size,), 0.05)))(
            jax.random.PRNGKey(0)
        )
        assert state.obs.shape == (obs_size,) and np.all(np.isfinite(state.obs))
        assert state.reward.shape == () and not bool(state.terminated)
