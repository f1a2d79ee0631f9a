"""Oracle tests of the env wrappers with a deterministic counter env."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.envs.base import EnvSpec, EnvState
from diffrl.envs.wrappers import (
    AutoReset,
    EpisodeStats,
    NonFiniteGuard,
    RescaleAction,
    TimeLimit,
    VmapWrapper,
    randomize_step_counters,
    strip_weak_types,
    wrap,
)


class CounterEnv:
    """obs = (count, start); reward = count after the step; terminates at ``terminate_at``.

    ``start`` is drawn from the reset key so that a test can see which key reset it.
    ``step`` builds its result with ``EnvState.create`` (neutral bookkeeping), the
    hardest case for the wrappers, which must carry their own fields over.
    The last native action is kept in ``info['action']``.
    """

    def __init__(self, terminate_at=None, episode_length=1000, low=(-1.0,), high=(1.0,)):
        self.terminate_at = terminate_at
        self.spec = EnvSpec("test/Counter", 2, len(low), tuple(low), tuple(high), episode_length)

    def _state(self, count, start, action):
        terminated = (
            jnp.zeros((), bool) if self.terminate_at is None else count >= self.terminate_at
        )
        obs = jnp.stack([count.astype(jnp.float32), start])
        return EnvState.create(
            inner={"count": count, "start": start},
            obs=obs,
            reward=count.astype(jnp.float32),
            terminated=terminated,
            info={"action": action},
        )

    def reset(self, key):
        start = jax.random.randint(key, (), 0, 1_000_000).astype(jnp.float32)
        zeros = jnp.zeros((self.spec.action_size,), jnp.float32)
        return self._state(jnp.zeros((), jnp.int32), start, zeros)

    def step(self, state, action):
        count = state.inner["count"] + 1
        return self._state(count, state.inner["start"], jnp.asarray(action, jnp.float32))


def rollout(env, state, num_steps, action_size=1):
    """Run ``num_steps`` batched steps with zero actions; returns the stacked states."""

    def body(s, _):
        s = env.step(s, jnp.zeros(s.obs.shape[:-1] + (action_size,)))
        return s, s

    run = jax.jit(lambda s: jax.lax.scan(body, s, None, length=num_steps)[1])
    return jax.device_get(run(state))


def oracle(num_steps, episode_length, terminate_at, first_step_count=0):
    """Plain-Python reference for the wrapped counter env (one env)."""
    rows = []
    count, step_count, ret, length = 0, first_step_count, 0.0, 0
    for _ in range(num_steps):
        count += 1
        step_count += 1
        ret += count
        length += 1
        terminated = terminate_at is not None and count >= terminate_at
        truncated = step_count >= episode_length and not terminated
        done = terminated or truncated
        rows.append(
            dict(
                reward=count, terminated=terminated, truncated=truncated,
                final_count=count, obs_count=0 if done else count,
                step_count=0 if done else step_count,
                returned=done, returned_return=ret if done else 0.0,
                returned_length=length if done else 0,
            )
        )
        if done:
            count, step_count, ret, length = 0, 0, 0.0, 0
    return rows


@pytest.mark.parametrize(
    "episode_length, terminate_at",
    [(5, None), (5, 3), (4, 7), (4, 4)],  # time-outs only, terminations first, truncations first, coinciding
)
def test_wrapped_counter_matches_oracle(episode_length, terminate_at):
    env = wrap(CounterEnv(terminate_at), episode_length)
    assert env.spec.episode_length == episode_length
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 3))
    traj = rollout(env, state, 13)
    for t, row in enumerate(oracle(13, episode_length, terminate_at)):
        msg = f"step {t}: {row}"
        np.testing.assert_array_equal(traj.reward[t], row["reward"], err_msg=msg)
        np.testing.assert_array_equal(traj.terminated[t], row["terminated"], err_msg=msg)
        np.testing.assert_array_equal(traj.truncated[t], row["truncated"], err_msg=msg)
        np.testing.assert_array_equal(traj.final_obs[t, :, 0], row["final_count"], err_msg=msg)
        np.testing.assert_array_equal(traj.final_critic_obs[t, :, 0], row["final_count"])
        np.testing.assert_array_equal(traj.obs[t, :, 0], row["obs_count"], err_msg=msg)
        np.testing.assert_array_equal(traj.step_count[t], row["step_count"], err_msg=msg)
        info = traj.info
        np.testing.assert_array_equal(info["returned_episode"][t], row["returned"], err_msg=msg)
        np.testing.assert_allclose(info["returned_episode_return"][t], row["returned_return"])
        np.testing.assert_array_equal(info["returned_episode_length"][t], row["returned_length"])
    # never both flags at once
    assert not np.any(traj.terminated & traj.truncated)


def test_auto_reset_uses_fresh_keys_and_keeps_final_obs():
    env = wrap(CounterEnv(terminate_at=2), episode_length=100)
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(1), 2))
    # The start value identifies the reset key; both envs got different ones.
    assert state.obs[0, 1] != state.obs[1, 1]
    traj = rollout(env, state, 8)
    done = traj.terminated | traj.truncated
    assert done[1::2].all() and not done[0::2].any()
    # Non-done steps: final_obs == obs. Done steps: final_obs is the pre-reset obs
    # (same episode's start value), obs is a new episode (new start value).
    np.testing.assert_array_equal(traj.final_obs[0::2], traj.obs[0::2])
    np.testing.assert_array_equal(traj.final_obs[1::2, :, 1], traj.obs[0::2, :, 1])
    starts = traj.obs[1::2, :, 1]  # one start value per new episode
    assert len(np.unique(starts)) == starts.size
    assert not np.any(starts == np.asarray(state.obs[:, 1])[None])
    # The stored key advances every step.
    keys = np.asarray(traj.key).reshape(8, 2, -1)
    assert len({k.tobytes() for k in keys[:, 0]}) == 8


class BlowUpEnv(CounterEnv):
    """The counter env whose simulation goes NaN on the step that reaches ``blow_up_at``, as MJX can:
    the observation (actor and critic) and the reward turn NaN and the step reports termination,
    as Playground's DM Control tasks do on a NaN state (``which`` picks what goes NaN)."""

    def __init__(self, blow_up_at, which=("obs", "reward")):
        super().__init__()
        self.blow_up_at, self.which = blow_up_at, which

    def step(self, state, action):
        out = super().step(state, action)
        bad = out.inner["count"] == self.blow_up_at
        nan = jnp.float32(jnp.nan)
        obs = jnp.where(bad & ("obs" in self.which), nan, out.obs)
        critic = jnp.where(bad & ("critic_obs" in self.which), nan, out.critic_obs)
        reward = jnp.where(bad & ("reward" in self.which), nan, out.reward)
        return out.replace(obs=obs, critic_obs=critic, final_obs=obs, final_critic_obs=critic, reward=reward,
                           terminated=bad & ("obs" in self.which))


@pytest.mark.parametrize("which", [("obs", "reward"), ("reward",), ("critic_obs",)])
def test_a_step_whose_simulation_went_non_finite_is_a_finite_termination_from_the_last_finite_obs(which):
    """On the step the counter reaches 3 the simulation goes NaN: that transition is a termination with
    reward 0 whose final observation is the one the step started from (count 2), the episode's return
    leaves the NaN out, the environment resets, and every other step is the finite env's own."""
    env = wrap(BlowUpEnv(blow_up_at=3, which=which), episode_length=100)
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    assert not state.info["nonfinite_state"].any()
    traj = rollout(env, state, 7)
    for leaf in (traj.obs, traj.critic_obs, traj.final_obs, traj.final_critic_obs, traj.reward,
                 traj.info["returned_episode_return"], traj.episode_return):
        assert np.isfinite(leaf).all()
    blown = traj.info["nonfinite_state"]
    np.testing.assert_array_equal(blown[:, 0], [False, False, True, False, False, True, False])
    np.testing.assert_array_equal(traj.terminated, blown)
    assert not traj.truncated.any()
    np.testing.assert_array_equal(traj.reward[:, 0], [1, 2, 0, 1, 2, 0, 1])
    np.testing.assert_array_equal(traj.final_obs[2, :, 0], 2.0)  # the last finite observation
    np.testing.assert_array_equal(traj.final_critic_obs[2, :, 0], 2.0)
    np.testing.assert_array_equal(traj.obs[2, :, 0], 0.0)  # reset
    np.testing.assert_array_equal(traj.info["returned_episode_return"][2], 3.0)  # 1 + 2 + 0
    np.testing.assert_array_equal(traj.info["returned_episode_length"][2], 3)


def test_a_non_finite_action_is_not_guarded_so_a_diverged_policy_shows():
    """The simulator is not to blame for a NaN action: its NaN step passes through to the learner's check."""
    class Echo(CounterEnv):  # observes and is rewarded by the action it was given
        def step(self, state, action):
            out = super().step(state, action)
            a = jnp.asarray(action, jnp.float32)[0]
            obs = out.obs.at[1].set(a)
            return out.replace(obs=obs, critic_obs=obs, final_obs=obs, final_critic_obs=obs, reward=a)

    env = wrap(Echo(), episode_length=100)
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    step = jax.jit(env.step)(state, jnp.array([[jnp.nan], [0.5]]))
    assert not step.info["nonfinite_state"].any() and not step.terminated.any()
    assert np.isnan(step.reward[0]) and np.isnan(step.obs[0, 1])  # passed through, as the policy sent it
    np.testing.assert_array_equal(step.reward[1], 0.5)


def test_the_guard_returns_a_finite_step_unchanged():
    """Bit for bit, including values that are large but finite."""
    class Huge(CounterEnv):
        def step(self, state, action):
            out = super().step(state, action)
            return out.replace(reward=out.reward * jnp.float32(3e38), obs=out.obs.at[0].multiply(-3e38))

    base = Huge()
    guarded = NonFiniteGuard(base)
    state = jax.jit(guarded.reset)(jax.random.PRNGKey(4))
    plain = jax.jit(base.step)(state, jnp.ones((1,)))
    out = jax.jit(guarded.step)(state, jnp.ones((1,)))
    assert not out.info.pop("nonfinite_state")
    plain.info.pop("nonfinite_state", None)  # CounterEnv builds a fresh info
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(out)):
        np.testing.assert_array_equal(a, b)


def test_reset_stores_key_and_neutral_info():
    env = AutoReset(EpisodeStats(TimeLimit(CounterEnv(), 10)))
    state = jax.jit(env.reset)(jax.random.PRNGKey(3))
    assert state.key.shape == jax.random.PRNGKey(0).shape
    assert not np.array_equal(state.key, jax.random.PRNGKey(0))
    assert set(state.info) >= {"returned_episode", "returned_episode_return", "returned_episode_length"}
    assert not state.info["returned_episode"]
    np.testing.assert_array_equal(state.final_obs, state.obs)
    # The pytree (incl. dtypes and weak types) is the same before and after a step,
    # so the state can be a scan carry and a jitted step compiles once.
    stepped = jax.jit(env.step)(state, jnp.zeros((1,)))
    assert jax.tree.structure(state) == jax.tree.structure(stepped)
    assert jax.tree.map(jax.typeof, state) == jax.tree.map(jax.typeof, stepped)


def test_rescale_action_maps_bounds():
    low, high = (-2.0, 0.0, 10.0), (2.0, 1.0, 30.0)
    env = RescaleAction(CounterEnv(low=low, high=high))
    assert env.spec.action_low == (-1.0, -1.0, -1.0)
    assert env.spec.action_high == (1.0, 1.0, 1.0)
    units = jnp.array([[-1.0, -1.0, -1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [5.0, -7.0, 0.5]])
    expected = np.array([low, high, [0.0, 0.5, 20.0], [2.0, 0.0, 25.0]])
    np.testing.assert_allclose(jax.vmap(env.native_action)(units), expected, rtol=1e-6)
    # The mapped action is what the inner env receives.
    state = jax.jit(lambda k, a: env.step(env.reset(k), a))(jax.random.PRNGKey(0), units[3])
    np.testing.assert_allclose(state.info["action"], expected[3], rtol=1e-6)


def test_time_limit_spec_and_default_length():
    base = CounterEnv(episode_length=7)
    assert TimeLimit(base).spec.episode_length == 7
    assert TimeLimit(base, 3).spec.episode_length == 3
    assert wrap(base).spec.episode_length == 7


def test_randomized_step_counters_in_range_and_truncate_early():
    episode_length, num_envs = 6, 64
    env = wrap(CounterEnv(), episode_length)
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), num_envs))
    state = jax.jit(randomize_step_counters, static_argnums=2)(
        state, jax.random.PRNGKey(5), episode_length
    )
    counters = np.asarray(state.step_count)
    assert counters.dtype == np.int32
    assert counters.min() >= 0 and counters.max() < episode_length
    assert len(np.unique(counters)) > 1
    # P(some value in [0, 6) never drawn among 64) < 6 * (5/6)^64 ~ 5e-5: all appear.
    assert len(np.unique(counters)) == episode_length
    traj = rollout(env, state, episode_length)
    first_end = np.argmax(np.asarray(traj.truncated), axis=0)
    np.testing.assert_array_equal(first_end, episode_length - counters - 1)


def test_vmap_wrapper_shapes():
    env = VmapWrapper(CounterEnv(low=(-1.0, -1.0), high=(1.0, 1.0)))
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 5))
    assert state.obs.shape == (5, 2) and state.reward.shape == (5,)
    state = jax.jit(env.step)(state, jnp.ones((5, 2)))
    np.testing.assert_array_equal(state.obs[:, 0], 1.0)
    assert state.info["action"].shape == (5, 2)


def test_strip_weak_types():
    tree = {"a": jnp.asarray(1.0), "b": 3, "c": jnp.zeros(2, jnp.int32)}
    assert jax.typeof(tree["a"]).weak_type
    strong = strip_weak_types(tree)
    assert not any(jax.typeof(x).weak_type for x in jax.tree.leaves(strong))
    assert strong["a"].dtype == jnp.float32 and strong["c"].dtype == jnp.int32
