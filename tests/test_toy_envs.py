"""Toy multimodal tasks: both modes are equally good, and modes are reported."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.envs import make, wrap
from diffrl.envs.toy import BimodalBandit, MirrorGoals


def goal_seeking_action(obs, side):
    """PD controller toward the goal at (side * g, 0) with g = 1: near-optimal."""
    position, velocity = obs[..., :2], obs[..., 2:]
    goal = jnp.stack([side, jnp.zeros_like(side)], axis=-1)
    return jnp.clip(8.0 * (goal - position) - 4.0 * velocity, -1.0, 1.0)


def test_mirror_goals_both_goals_equal_return_and_modes():
    env = wrap(make("toy/MirrorGoals"))
    spec = env.spec
    assert (spec.obs_size, spec.action_size, spec.modes) == (4, 2, 2)
    # env 0 goes left (mode 0), env 1 right (mode 1), env 2 hedges (zero action).
    sides = jnp.array([-1.0, 1.0, 0.0])

    def body(state, _):
        action = goal_seeking_action(state.obs, sides)
        action = jnp.where(sides[:, None] == 0.0, 0.0, action)
        state = env.step(state, action)
        return state, state

    @jax.jit
    def run(keys):
        return jax.lax.scan(body, env.reset(keys), None, length=spec.episode_length)[1]

    traj = jax.device_get(run(jax.random.split(jax.random.PRNGKey(0), 3)))
    last = spec.episode_length - 1
    # No termination; one truncation at the time limit, then auto-reset.
    assert not traj.terminated.any()
    np.testing.assert_array_equal(traj.truncated[:, 0], np.arange(spec.episode_length) == last)
    returns = traj.info["returned_episode_return"][last]
    # Mirror symmetry: identical (not just close) returns for the two goals.
    assert returns[0] == returns[1]
    assert returns[0] > 0.7 * spec.episode_length  # most steps near the goal
    assert returns[2] < 0.01  # hedging between the goals earns nothing
    np.testing.assert_array_equal(traj.info["mode"][last], [0, 1, -1])  # the hedger reached none
    final_position = traj.final_obs[last, :, :2]
    np.testing.assert_allclose(final_position[:2], [[-1.0, 0.0], [1.0, 0.0]], atol=0.02)
    assert np.all(traj.info["goal_distance"][last, :2] < 0.02)
    # After the auto-reset every env is back at rest at the origin.
    np.testing.assert_array_equal(traj.obs[last], 0.0)


def test_mirror_goals_reward_and_mode_oracle():
    env = MirrorGoals()
    state = env.reset(jax.random.PRNGKey(0))
    state = env.step(state, jnp.array([0.5, -1.0]))
    c = env.config
    velocity = c.dt * c.max_acceleration * np.array([0.5, -1.0])
    position = c.dt * velocity
    distance = np.linalg.norm(position - np.array([c.goal_distance, 0.0]))
    reward = np.exp(-distance**2 / c.reward_width) - c.action_cost * 1.25
    np.testing.assert_allclose(state.obs, np.concatenate([position, velocity]), rtol=1e-6)
    np.testing.assert_allclose(state.reward, reward, rtol=1e-5)
    # one step from the origin reaches no goal (mode -1; the reaching case is tested above)
    assert state.info["mode"] == -1 and state.info["mode"].dtype == jnp.int32


def test_bimodal_bandit_peaks_modes_and_one_step_episodes():
    env = wrap(make("toy/BimodalBandit"))
    assert env.spec.modes == 2 and env.spec.episode_length == 1
    actions = jnp.array([[-0.5], [0.5], [0.0], [-0.2], [0.9]])
    step = jax.jit(lambda k, a: env.step(env.reset(k), a))
    state = step(jax.random.split(jax.random.PRNGKey(0), 5), actions)
    a = np.asarray(actions[:, 0], np.float64)
    s = BimodalBandit().config.width
    expected = np.exp(-((a - 0.5) ** 2) / (2 * s * s)) + np.exp(-((a + 0.5) ** 2) / (2 * s * s))
    np.testing.assert_allclose(state.reward, expected, rtol=1e-5)
    assert state.reward[0] == state.reward[1]  # equal peaks
    assert state.reward[2] < 1e-4  # the mean of the two optima is bad
    # modes count only near a peak (within mode_radius 0.2): the valley and the edge are -1
    np.testing.assert_array_equal(state.info["mode"], [0, 1, -1, -1, -1])
    # every step ends an episode by termination, never by truncation
    assert state.terminated.all() and not state.truncated.any()
    assert state.info["returned_episode"].all()
    np.testing.assert_array_equal(state.info["returned_episode_length"], 1)
    np.testing.assert_array_equal(state.obs, 1.0)
