"""Host environments (diffrl.envs.host, diffrl.core.host_loop): wrapper semantics, worker processes,
the host loop against the JAX loop, dm_control tasks, train and resume from the CLI's trainer."""
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.core.host_loop import HostStepper
from diffrl.core.loop import make_components
from diffrl.envs.base import EnvSpec, EnvState
from diffrl.envs.host import JaxHostEnv, ProcessVecEnv, SerialVecEnv, native_action
from diffrl.envs.host_registry import HostEnvMaker
from diffrl.envs.wrappers import wrap
from diffrl.config.presets import resolve

pytest.importorskip("dm_control")  # the dmc extra: `make test` installs it


class Drift:
    """A deterministic JAX task: x' = x + 0.3 a, reward -|x|^2, terminates when |x|_inf > 1.2.

    Reset ignores its key (always x0), so the host loop and the JAX loop see the same episodes."""

    spec = EnvSpec(name="test/Drift", obs_size=2, action_size=2, action_low=(-2.0, -1.0),
                   action_high=(2.0, 1.0), episode_length=7)

    def reset(self, key):
        return EnvState.create(inner=jnp.array([0.5, -0.5]), obs=jnp.array([0.5, -0.5]))

    def step(self, state, action):
        x = state.inner + 0.3 * action
        return state.replace(inner=x, obs=x, final_obs=x, final_critic_obs=x, critic_obs=x,
                             reward=-jnp.sum(x**2), terminated=jnp.max(jnp.abs(x)) > 1.2)


class CountEnv:
    """A numpy host env: obs = [step in episode, episode seed % 7], reward 1, terminates at step
    ``stop`` when the episode seed is even, truncated by the simulator at step 9 otherwise."""

    spec = EnvSpec(name="test/Count", obs_size=2, action_size=1, action_low=(0.0,), action_high=(10.0,),
                   episode_length=9)

    def __init__(self, stop=4):
        self.stop = stop
        self.actions = []

    def reset(self, seed):
        self.t, self.even = 0, seed % 2 == 0
        self.tag = seed % 7
        return np.array([0.0, self.tag])

    def step(self, action):
        self.actions.append(float(action[0]))
        self.t += 1
        return np.array([float(self.t), self.tag]), 1.0, self.even and self.t == self.stop, self.t == 9


def test_batch_semantics_time_limit_termination_final_obs_and_stats():
    vec = SerialVecEnv(CountEnv, num_envs=6, episode_length=5)
    assert vec.spec.action_low == (-1.0,) and vec.spec.episode_length == 5
    first = vec.reset(seed=3, spread_counters=False)
    assert np.all(first.obs[:, 0] == 0) and not first.done.any()
    seen_term = seen_trunc = False
    for t in range(1, 12):
        out = vec.step(np.full((6, 1), 0.5))
        for i, env in enumerate(s.env for s in vec._slots):
            assert env.actions[-1] == pytest.approx(7.5)  # [-1, 1] -> [0, 10]
        assert not np.any(out.terminated & out.truncated)
        done = out.done
        # The true last observation is kept; the next one is a fresh episode's.
        np.testing.assert_array_equal(out.final_obs[~done], out.obs[~done])
        assert np.all(out.obs[done, 0] == 0) and np.all(out.final_obs[done, 0] > 0)
        np.testing.assert_array_equal(out.episode_length[done], out.final_obs[done, 0])
        np.testing.assert_array_equal(out.episode_return[done], out.final_obs[done, 0])  # reward 1 per step
        assert np.all(out.episode_length[~done] == 0)
        seen_term |= out.terminated.any()
        seen_trunc |= out.truncated.any()
        # the time limit of 5 truncates unless a termination (step 4, even seeds) came first
        assert np.all(out.final_obs[out.truncated, 0] == 5)
        assert np.all(out.final_obs[out.terminated, 0] == 4)
    assert seen_term and seen_trunc


def test_spread_counters_shorten_only_the_first_episodes():
    vec = SerialVecEnv(functools.partial(CountEnv, stop=99), num_envs=32, episode_length=5)
    vec.reset(seed=1)
    lengths = []
    for _ in range(5):
        out = vec.step(np.zeros((32, 1)))
        lengths.extend(out.episode_length[out.done])
    assert len(set(lengths)) > 2 and max(lengths) <= 5  # desynchronised first episodes
    for _ in range(10):
        out = vec.step(np.zeros((32, 1)))
        assert np.all(out.episode_length[out.done] == 5)


def test_native_action_matches_the_jax_wrapper():
    from diffrl.envs.wrappers import RescaleAction

    a = np.array([[-3.0, 0.25], [0.9, 2.0]], np.float32)
    low, high = np.array([-2.0, -1.0], np.float32), np.array([2.0, 1.0], np.float32)
    jax_native = jax.vmap(RescaleAction(Drift()).native_action)(a)
    np.testing.assert_array_equal(native_action(a, low, high), np.asarray(jax_native))


def test_worker_processes_give_the_serial_result():
    """Same seed and batch: the same steps, whatever the number of workers (dm_control's cartpole)."""
    from diffrl.envs.registry import single_env_factory

    make = single_env_factory("dmc/cartpole-swingup")
    actions = np.random.default_rng(0).uniform(-1, 1, (30, 5, 1))
    runs = []
    for vec in (SerialVecEnv(make, 5, episode_length=12), ProcessVecEnv(make, 5, 2, episode_length=12)):
        try:
            steps = [vec.reset(seed=11)] + [vec.step(a) for a in actions]
        finally:
            vec.close()
        runs.append(steps)
    for a, b in zip(*runs):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    assert any(s.truncated.any() for s in runs[0])


def _explodes():
    raise RuntimeError("simulator exploded")


def test_a_failing_worker_reports_its_error():
    """A worker's exception reaches the trainer as a HostEnvError with the worker's own message."""
    from diffrl.envs.host import HostEnvError

    with pytest.raises(HostEnvError, match="RuntimeError: simulator exploded"):
        ProcessVecEnv(_explodes, 2, 1, episode_length=5)
    with pytest.raises(HostEnvError, match="unknown dm_control task"):
        from diffrl.envs.registry import _make_dmc

        ProcessVecEnv(functools.partial(_make_dmc, "cartpole-nope"), 2, 1, episode_length=5)


def _config(**kw):
    config = resolve("reppo", "gymnax/Pendulum-v1", None).replace(
        num_envs=4, num_steps=9, num_seeds=2, total_env_steps=2 * 36, num_evals=2, eval_envs=3,
        progress=False, tensorboard=False, **kw)
    return config.replace(reppo=config.reppo.__class__(**{**config.reppo.__dict__, "num_minibatches": 2,
                                                          "num_epochs": 1}))


def test_host_loop_learns_as_the_jax_loop(monkeypatch):
    """A deterministic JAX task stepped through the host path (JaxHostEnv in a SerialVecEnv) gives
    the JAX loop's transitions, so two iterations of REPPO (2 seeds) end in the same parameters and
    metrics, up to float rounding (the update is compiled in a different program; a wrong key, reward,
    final observation or normaliser step would differ by orders of magnitude more). The first time-limit counters are drawn differently by the two paths (numpy, JAX), so
    both start at 0 here."""
    from diffrl.core.build import make_algorithm
    from diffrl.envs import host, wrappers

    monkeypatch.setattr(wrappers, "randomize_step_counters", lambda state, key, length: state)
    monkeypatch.setattr(host, "first_step_counts", lambda seed, n, length: np.zeros(n, np.int64))
    config = _config()
    env = wrap(Drift())
    algo = make_algorithm(config, env.spec)
    keys = jnp.stack([jax.random.PRNGKey(5), jax.random.PRNGKey(6)])

    jax_parts = make_components(config, env, algo)
    ts = jax.jit(jax.vmap(jax_parts.init))(keys)
    iterate = jax.jit(jax.vmap(jax_parts.iteration))
    jax_metrics = []
    for _ in range(2):
        ts, m = iterate(ts)
        jax_metrics.append(m)

    maker = HostEnvMaker("test/Drift", lambda: JaxHostEnv(Drift()), Drift.spec, env.spec, num_workers=0)
    host_parts = HostStepper(config, maker, algo)
    hs = host_parts.init(keys)
    host_metrics = []
    for _ in range(2):
        hs, m = host_parts.iteration(hs)
        host_metrics.append(m)
    host_parts.close()

    assert int(hs.iteration[0]) == 2
    for a, b in zip(jax.tree.leaves(ts.algo), jax.tree.leaves(hs.algo)):
        # Rounding: the env step compiled alone may contract x + 0.3 a into an FMA differently than
        # inside the scan; a 1-ulp change that moves one ReLU across its kink shifts one hidden unit's
        # gradient (seen: up to 1e-4 of an array's norm). So: relative error of each array as a whole.
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        assert np.linalg.norm(a - b) <= 1e-3 * max(np.linalg.norm(a), 1e-6), np.abs(a - b).max()
    np.testing.assert_allclose(ts.obs_stats.mean, hs.obs_stats.mean, rtol=1e-6)
    for m_jax, m_host in zip(jax_metrics, host_metrics):
        for name in ("train/episode_return", "train/episode_length", "train/episodes", "train/reward",
                     "train/nonfinite_states"):
            np.testing.assert_allclose(m_jax[name], m_host[name], rtol=1e-5, err_msg=name)
    assert float(jnp.sum(jax_metrics[1]["train/episodes"])) > 0  # episodes ended (and reset) inside rollouts


@pytest.mark.parametrize("task, sizes", [("cartpole-balance", (5, 1)), ("dog-run", (223, 38)),
                                         ("humanoid_CMU-stand", (137, 56))])
def test_dm_control_specs(task, sizes):
    from diffrl.envs import registry

    env = registry.make(f"dmc/{task}")
    assert (env.spec.obs_size, env.spec.action_size, env.spec.episode_length) == (*sizes, 1000)
    obs = env.reset(3)
    assert obs.shape == (sizes[0],) and obs.dtype == np.float32
    obs, reward, terminated, truncated = env.step(np.zeros(sizes[1]))
    assert 0.0 <= reward <= 1.0 and not terminated and not truncated
    np.testing.assert_array_equal(env.reset(3), env.reset(3))  # episodes are reproducible from the seed


def test_dm_control_catalogue_mirrors_the_suite():
    from dm_control import suite

    from diffrl.envs.dmc import DMC_TASKS

    assert DMC_TASKS == tuple(f"{d}-{t}" for d, t in suite.ALL_TASKS)


@pytest.mark.heavy(27)  # seconds measured on one core with a warm compile cache (tests/conftest.py starts heavy tests first)
@pytest.mark.timeout(400)
def test_train_and_resume_on_dm_control(tmp_path):
    """REPPO on dmc/cartpole-balance through the trainer (2 workers), interrupted after the first
    chunk and resumed: the learned state resumes exactly, the simulators with fresh episodes."""
    from diffrl.plumbing.checkpoint import latest_valid_checkpoint, read_metadata
    from diffrl.core.run_dir import resume_config
    from diffrl.core.trainer import Trainer

    config = resolve("reppo", "dmc/cartpole-balance", None).replace(
        num_envs=4, num_steps=8, num_seeds=2, total_env_steps=3 * 32, num_evals=3, eval_envs=2,
        episode_length=40, host_workers=2, out=str(tmp_path / "run"), progress=False, tensorboard=False)
    config = config.replace(reppo=config.reppo.__class__(**{**config.reppo.__dict__, "num_minibatches": 2,
                                                              "num_epochs": 1}))
    trainer = Trainer(config)
    trainer.progress_fn = lambda row: trainer.request_stop() if row["env_steps"] == 32 else None
    summary = trainer.run()
    assert summary["interrupted"] and summary["env_steps"] == 32
    saved = trainer.state
    path = latest_valid_checkpoint(tmp_path / "run")
    assert read_metadata(path)["env_steps"] == 32
    resumed = Trainer(resume_config(tmp_path / "run"))
    restored_state = {}
    original_restore = resumed._restore

    def spy(state, path, meta):
        out = original_restore(state, path, meta)
        restored_state["state"] = jax.tree.map(np.asarray, out[0])  # the first chunk donates it
        return out

    resumed._restore = spy
    final = resumed.run()
    assert final["env_steps"] == 96 and not final["interrupted"]
    for a, b in zip(jax.tree.leaves(saved), jax.tree.leaves(restored_state["state"])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in rows] == [0, 32, 64, 96]
    assert all(len(r["eval/seed_returns"]) == 2 and np.all(np.isfinite(r["eval/seed_returns"])) for r in rows)
    assert 0 < rows[-1]["eval/episode_return"] <= 40  # dm_control rewards are in [0, 1]; 40-step episodes


@pytest.mark.parametrize("name, act", [("dmc/cartpole-balance", 1), ("gym/HalfCheetah-v5", 6)])
def test_video_of_a_host_task(name, act):
    from diffrl.artefacts.video import render_rollout

    frames = render_rollout(name, lambda obs, key: jnp.zeros(act), jax.random.PRNGKey(0),
                            num_steps=3, height=48, width=64)
    assert len(frames) == 4 and frames[0].shape == (48, 64, 3) and frames[0].dtype == np.uint8
    assert frames[0].std() > 0  # not a blank image


def test_gymnasium_tasks_through_the_batch():
    """gym/HalfCheetah-v5 (MuJoCo v5): sizes, reproducible episodes, gymnasium's own time limit kept
    as a truncation (Reacher-v5: 50 steps) when the batch's limit is longer."""
    from diffrl.envs import registry
    from diffrl.envs.gymnasium_env import GymnasiumHostEnv
    from diffrl.envs.registry import single_env_factory

    env = registry.make("gym/HalfCheetah-v5")
    assert (env.spec.obs_size, env.spec.action_size, env.spec.episode_length) == (17, 6, 1000)
    np.testing.assert_array_equal(env.reset(4), env.reset(4))
    vec = SerialVecEnv(single_env_factory("gym/Reacher-v5"), 2, episode_length=80)
    vec.reset(seed=0, spread_counters=False)
    ends = [vec.step(np.zeros((2, 2))) for _ in range(50)][-1]
    assert ends.truncated.all() and not ends.terminated.any() and np.all(ends.episode_length == 50)
    with pytest.raises(ValueError, match="Box"):
        import gymnasium as gym

        GymnasiumHostEnv(gym.make("CartPole-v1"), name="gym/CartPole")


def test_an_invalid_dm_control_physics_state_ends_the_episode_instead_of_the_run():
    """MuJoCo flags a huge velocity as an invalid state and dm_control raises PhysicsError; the env reports a
    non-finite step and the batch turns it into a termination with reward 0 from the last observation,
    then resets: the worker keeps stepping."""
    from diffrl.envs.dmc import DmControlEnv
    from diffrl.envs.host import SerialVecEnv

    env = DmControlEnv("cartpole-balance")
    env.reset(0)
    env.physics.data.qvel[:] = 1e30
    obs, reward, terminated, truncated = env.step(np.zeros(1))
    assert np.isnan(obs).all() and np.isnan(reward) and terminated and not truncated

    batch = SerialVecEnv(lambda: DmControlEnv("cartpole-balance"), 2, episode_length=20)
    first = batch.reset(5)
    batch._slots[1].env.physics.data.qvel[:] = 1e30
    out = batch.step(np.zeros((2, 1), np.float32))
    np.testing.assert_array_equal(out.nonfinite, [False, True])
    np.testing.assert_array_equal(out.terminated, [False, True])
    assert out.reward[1] == 0.0 and out.reward[0] > 0.0
    np.testing.assert_array_equal(out.final_obs[1], first.obs[1])
    assert np.isfinite(out.obs).all() and out.episode_length[1] == 1
    out = batch.step(np.zeros((2, 1), np.float32))  # the reset env steps on
    assert not out.nonfinite.any() and np.isfinite(out.obs).all()
    batch.close()
