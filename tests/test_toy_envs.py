"""Toy multimodal tasks: both modes are equally good, and modes are reported."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.envs import make, wrap
from diffrl.envs.toy import BimodalBandit, CornerBandit, MirrorGoals, OctahedronGoals


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


def test_point_mass_start_spread_draws_starts_in_the_box_and_zero_is_the_origin():
    import pytest

    from diffrl.envs.toy import MirrorGoalsConfig

    keys = jax.random.split(jax.random.PRNGKey(3), 64)
    for cls, dim in ((MirrorGoals, 2), (OctahedronGoals, 3)):
        fixed = jax.vmap(cls().reset)(keys)
        assert np.array_equal(np.asarray(fixed.obs), np.zeros((64, 2 * dim)))  # bit for bit, no -0.0 games
        spread = jax.vmap(cls(MirrorGoalsConfig(start_spread=0.5)).reset)(keys)
        position, velocity = np.asarray(spread.obs[:, :dim]), np.asarray(spread.obs[:, dim:])
        assert np.all(np.abs(position) <= 0.5) and np.all(velocity == 0)
        assert np.array_equal(np.asarray(spread.inner["position"]), position)
        # spread over the box: every axis takes both signs and the starts differ by key
        assert np.all((position > 0.1).any(0)) and np.all((position < -0.1).any(0))
        assert len(np.unique(position[:, 0])) == 64
        # the reported mode is that of the start (a start within mode_radius of a goal counts)
        near = np.linalg.norm(position[:, None] - np.asarray(cls().goals)[None], axis=-1).min(-1) < 0.3
        assert np.array_equal(np.asarray(spread.info["mode"]) >= 0, near)
        with pytest.raises(ValueError, match="start_spread must be >= 0"):
            cls(MirrorGoalsConfig(start_spread=-0.1))


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


def _signed_permutation(perm, signs):
    """(d, d) matrix P with (P x)_i = signs[i] * x[perm[i]]."""
    d = len(perm)
    m = np.zeros((d, d), np.float32)
    m[np.arange(d), perm] = signs
    return m


def _goal_permutation(goals, matrix):
    """Index of the image of every goal under x -> matrix @ x."""
    images = goals @ matrix.T
    return np.array([int(np.argmin(np.linalg.norm(goals - g, axis=1))) for g in images])


def test_octahedron_goals_six_goals_equal_return_and_modes():
    env = wrap(make("toy/OctahedronGoals"))
    spec = env.spec
    assert (spec.obs_size, spec.action_size, spec.modes, spec.episode_length) == (6, 3, 6, 40)
    goals = np.asarray(OctahedronGoals().goals)
    np.testing.assert_array_equal(goals, [[-1, 0, 0], [1, 0, 0], [0, -1, 0], [0, 1, 0], [0, 0, -1], [0, 0, 1]])
    targets = jnp.concatenate([jnp.asarray(goals), jnp.zeros((1, 3))])  # env 6 hedges (zero action)

    def body(state, _):
        position, velocity = state.obs[:, :3], state.obs[:, 3:]
        action = jnp.clip(8.0 * (targets - position) - 4.0 * velocity, -1.0, 1.0)
        state = env.step(state, action.at[6].set(0.0))
        return state, state

    @jax.jit
    def run(keys):
        return jax.lax.scan(body, env.reset(keys), None, length=spec.episode_length)[1]

    traj = jax.device_get(run(jax.random.split(jax.random.PRNGKey(0), 7)))
    last = spec.episode_length - 1
    returns = traj.info["returned_episode_return"][last]
    # Every goal is exactly as good: the six goal-seeking episodes have identical returns.
    np.testing.assert_array_equal(returns[:6], returns[0])
    assert returns[0] > 0.7 * spec.episode_length
    assert returns[6] < 0.01  # staying between the goals earns nothing
    np.testing.assert_array_equal(traj.info["mode"][last], [0, 1, 2, 3, 4, 5, -1])
    np.testing.assert_allclose(traj.final_obs[last, :6, :3], goals, atol=0.02)


def test_octahedron_goals_symmetric_under_axis_permutations_and_flips():
    """A noisy goal-seeking controller and its image under a symmetry of the cube (goal and
    noise mapped, the controller is equivariant) earn the same rewards, and the modes they
    reach are the images of each other."""
    env = OctahedronGoals()
    goals = np.asarray(env.goals)
    rng = np.random.default_rng(0)
    targets = goals[rng.integers(0, 6, size=64)]
    noise = (0.7 * rng.standard_normal((64, 40, 3))).astype(np.float32)  # some episodes miss

    def rollout(target, noise):
        def body(state, eps):
            position, velocity = state.obs[:3], state.obs[3:]
            state = env.step(state, jnp.clip(8.0 * (target - position) - 4.0 * velocity + eps, -1.0, 1.0))
            return state, (state.reward, state.info["mode"])

        return jax.lax.scan(body, env.reset(jax.random.PRNGKey(0)), noise)[1]

    run = jax.jit(jax.vmap(rollout))
    rewards, modes = jax.device_get(run(jnp.asarray(targets), jnp.asarray(noise)))
    assert len(np.unique(modes[:, -1])) == 6  # the check covers every goal
    for perm, signs in [((0, 1, 2), (-1, 1, 1)), ((1, 2, 0), (1, 1, 1)), ((2, 0, 1), (1, -1, -1)),
                        ((1, 0, 2), (-1, -1, -1))]:
        m = _signed_permutation(perm, signs)
        image_rewards, image_modes = jax.device_get(run(jnp.asarray(targets @ m.T), jnp.asarray(noise @ m.T)))
        np.testing.assert_allclose(image_rewards, rewards, rtol=1e-5, atol=1e-6)
        mapped = np.where(modes >= 0, _goal_permutation(goals, m)[modes], -1)
        np.testing.assert_array_equal(image_modes, mapped)


def test_corner_bandit_four_equal_peaks_and_modes():
    env = wrap(make("toy/CornerBandit"))
    spec = env.spec
    assert (spec.obs_size, spec.action_size, spec.modes, spec.episode_length) == (1, 2, 4, 1)
    c = 0.5
    actions = jnp.array([[-c, -c], [c, -c], [-c, c], [c, c], [0.0, 0.0], [c, 0.0], [0.6, 0.6], [0.7, 0.7],
                         [-0.9, 0.9]])
    step = jax.jit(lambda k, a: env.step(env.reset(k), a))
    state = jax.device_get(step(jax.random.split(jax.random.PRNGKey(0), len(actions)), actions))
    a = np.asarray(actions, np.float64)
    s = CornerBandit().config.width
    corners = np.array([[sx * c, sy * c] for sx in (-1, 1) for sy in (-1, 1)])
    expected = np.exp(-np.sum((a[:, None, :] - corners) ** 2, -1) / (2 * s * s)).sum(-1)  # the four bumps
    np.testing.assert_allclose(state.reward, expected, rtol=1e-5)
    np.testing.assert_array_equal(state.reward[:4], state.reward[0])  # equal peaks, bit for bit
    assert state.reward[0] > 0.99 and state.reward[4] < 1e-4  # the mean of the optima is bad
    assert state.reward[5] < 1e-5  # so is the midpoint between two neighbouring peaks
    # Modes: within 0.2 of a corner (0.6, 0.6 is 0.14 away; 0.7, 0.7 is 0.28 away).
    np.testing.assert_array_equal(state.info["mode"], [0, 1, 2, 3, -1, -1, 3, -1, -1])
    assert state.terminated.all() and not state.truncated.any()


def test_corner_bandit_symmetric_under_flips_and_swap():
    env = CornerBandit()
    a = jax.random.uniform(jax.random.PRNGKey(1), (4096, 2), minval=-1.0, maxval=1.0)
    a = jnp.concatenate([a, 0.5 + 0.1 * jax.random.normal(jax.random.PRNGKey(2), (512, 2))])
    reward, mode = env.reward(a), env.mode(a)
    assert set(np.unique(np.asarray(mode)).tolist()) == {-1, 0, 1, 2, 3}
    # flip axis 0 (modes 0 <-> 1, 2 <-> 3), flip axis 1 (0 <-> 2, 1 <-> 3), swap the axes (1 <-> 2)
    for image, table in [(a * jnp.array([-1.0, 1.0]), [1, 0, 3, 2]), (a * jnp.array([1.0, -1.0]), [2, 3, 0, 1]),
                         (a[:, ::-1], [0, 2, 1, 3])]:
        np.testing.assert_array_equal(env.reward(image), reward)  # exact, not just close
        expected = np.where(mode >= 0, np.asarray(table)[np.asarray(mode)], -1)
        np.testing.assert_array_equal(env.mode(image), expected)
