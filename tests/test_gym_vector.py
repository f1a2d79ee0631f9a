"""Gymnasium vector envs as host batches (diffrl.envs.gym_vector) and host environments registered
from Python (diffrl.envs.register_host)."""
import functools
import json

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from diffrl.envs.gym_vector import GymVectorBatch, vector_batch_maker  # noqa: E402
from diffrl.envs.gymnasium_env import GymnasiumHostEnv  # noqa: E402
from diffrl.envs.host import SerialVecEnv  # noqa: E402
from diffrl.envs.registry import is_host_env, register_host, unregister_host  # noqa: E402
from diffrl.config.presets import resolve  # noqa: E402
from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402


def pendulum_vector(num_envs, mode=AutoresetMode.DISABLED):
    return SyncVectorEnv([functools.partial(gym.make, "Pendulum-v1")] * num_envs, autoreset_mode=mode)


def test_a_vector_env_steps_exactly_as_the_worker_batch_of_its_envs():
    """The oracle: the worker batch of single gymnasium envs (diffrl.envs.host), same seed and actions:
    every field of every step equal, through time limits (the run's 7 steps, spread counters) and
    actions beyond [-1, 1]."""
    vector = GymVectorBatch(pendulum_vector(3), episode_length=7, name="gym/Pendulum-v1")
    serial = SerialVecEnv(functools.partial(GymnasiumHostEnv, "Pendulum-v1"), 3, episode_length=7)
    assert vector.spec == serial.spec
    rng = np.random.default_rng(0)
    pairs = [(vector.reset(11), serial.reset(11))]
    pairs += [(vector.step(a), serial.step(a)) for a in rng.uniform(-1.5, 1.5, (30, 3, 1)).astype(np.float32)]
    ended = 0
    for got, want in pairs:
        for name, x, y in zip(got._fields, got, want):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name
        ended += int(want.done.sum())
    assert ended >= 12  # every env ended several episodes (7-step limit, spread first counters)
    vector.close()
    serial.close()


def test_a_vector_env_that_resets_itself_is_refused():
    with pytest.raises(ValueError, match="autoreset_mode=AutoresetMode.DISABLED"):
        GymVectorBatch(pendulum_vector(2, AutoresetMode.NEXT_STEP))
    with pytest.raises(ValueError, match="async or sync"):
        vector_batch_maker("Pendulum-v1", "threads")


@pytest.fixture
def registered():
    names = []

    def add(name, *args, **kwargs):
        register_host(name, *args, **kwargs)
        names.append(name)

    yield add
    for name in names:  # those a test has not removed itself
        try:
            unregister_host(name)
        except ValueError:
            pass


def test_a_registered_vector_env_trains_through_the_trainer(tmp_path, registered):
    from diffrl.core.trainer import Trainer
    from diffrl.envs import list_envs, make

    name = "test/PendulumVec"
    registered(name, functools.partial(GymnasiumHostEnv, "Pendulum-v1", name=name),
               make_batch=vector_batch_maker("Pendulum-v1", "sync", name=name))
    assert is_host_env(name) and name in list_envs() and make(name).spec.obs_size == 3
    config = resolve("reppo", name, "reppo-gymnax").replace(
        num_envs=4, num_steps=8, num_seeds=2, total_env_steps=2 * 32, num_evals=2, eval_envs=2,
        out=str(tmp_path / "run"), progress=False, tensorboard=False)
    summary = Trainer(config).run()
    assert summary["env_steps"] == 64
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r["eval/seed_returns"] for r in rows if "eval/seed_returns" in r]
    assert len(evals) == 3 and all(len(e) == 2 and all(-2000.0 < x <= 0.0 for x in e) for e in evals)
    assert all("eval/success_rate" not in r for r in rows)  # Pendulum reports no success


def test_registration_refuses_duplicates_and_unpicklable_makers_for_workers(tmp_path, registered):
    from diffrl.config import ConfigError
    from diffrl.core.trainer import Trainer

    name = "test/PendulumLambda"
    registered(name, lambda: GymnasiumHostEnv("Pendulum-v1", name=name))
    with pytest.raises(ValueError, match="already registered"):
        register_host(name, lambda: None)
    config = resolve("reppo", name, "reppo-gymnax").replace(out=str(tmp_path / "run"), progress=False)
    with pytest.raises(ConfigError, match="cannot be sent to worker processes"):
        Trainer(config.replace(host_workers=2))
    Trainer(config.replace(host_workers=0))  # in this process any callable is fine
    with pytest.raises(ValueError, match="not added with register_host"):
        unregister_host("test/Never")


def test_a_listed_task_can_be_overridden_and_a_downloaded_one_added_then_removed(registered):
    """register_host over maniskill/ names (no simulator is built here): the registration is what
    single_env_factory hands the workers, and unregistering restores the listing."""
    from diffrl.envs import list_envs, make
    from diffrl.envs.registry import single_env_factory
    from diffrl.envs.maniskill import ManiSkillEnv

    default = single_env_factory("maniskill/PushCube-v1")
    mine = functools.partial(ManiSkillEnv, "PushCube-v1", bootstrap_at_termination=False)
    registered("maniskill/PushCube-v1", mine, overwrite=True)
    assert single_env_factory("maniskill/PushCube-v1") is mine
    ycb = functools.partial(ManiSkillEnv, "PickSingleYCB-v1", offline_only=False)
    with pytest.raises(ValueError, match="needs the YCB object models"):
        make("maniskill/PickSingleYCB-v1")
    registered("maniskill/PickSingleYCB-v1", ycb)
    assert "maniskill/PickSingleYCB-v1" in list_envs() and single_env_factory("maniskill/PickSingleYCB-v1") is ycb
    unregister_host("maniskill/PickSingleYCB-v1")
    unregister_host("maniskill/PushCube-v1")
    assert "maniskill/PickSingleYCB-v1" not in list_envs() and "maniskill/PushCube-v1" in list_envs()
    restored = single_env_factory("maniskill/PushCube-v1")
    assert (restored.func, restored.args) == (default.func, default.args)
    with pytest.raises(ValueError, match="needs the YCB object models"):
        make("maniskill/PickSingleYCB-v1")


class Unstable(gym.Env):
    """x' = x + a on [-1, 1]^1 actions; past |x| = 1.5 the "integration" returns NaN (observation and reward),
    as an unstable simulator does, without terminating: the batch must do that."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x = float(self.np_random.uniform(-0.5, 0.5))
        return np.array([self.x, 1.0], np.float32), {}

    def step(self, action):
        self.x += float(np.asarray(action).ravel()[0])
        if abs(self.x) > 1.5:
            return np.full(2, np.nan, np.float32), float("nan"), False, False, {}
        return np.array([self.x, 1.0], np.float32), -self.x ** 2, False, False, {}


def test_a_step_that_returns_nan_is_a_termination_from_the_last_finite_observation_in_both_host_batches():
    """The vector batch and the worker batch of single envs agree field by field, NaN steps included, and
    each NaN step is a termination with reward 0, its final observation the last finite one, then a reset."""
    gym.register(id="DiffrlTestUnstable-v0", entry_point=Unstable, max_episode_steps=50)
    try:
        vector = GymVectorBatch(SyncVectorEnv([lambda: gym.make("DiffrlTestUnstable-v0")] * 3,
                                              autoreset_mode=AutoresetMode.DISABLED), name="gym/unstable")
        serial = SerialVecEnv(functools.partial(GymnasiumHostEnv, "DiffrlTestUnstable-v0", name="gym/unstable"),
                              3)
        pairs = [(vector.reset(3), serial.reset(3))]
        before = pairs[0][1].obs
        blow_ups = 0
        for a in np.full((12, 3, 1), 0.4, np.float32):
            pairs.append((vector.step(a), serial.step(a)))
            got, want = pairs[-1]
            for name, x, y in zip(got._fields, got, want):
                assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name
            bad = want.nonfinite
            for field in (want.obs, want.final_obs, want.reward, want.episode_return):
                assert np.isfinite(field).all()
            np.testing.assert_array_equal(want.terminated[bad], True)
            np.testing.assert_array_equal(want.reward[bad], 0.0)
            np.testing.assert_array_equal(want.final_obs[bad], before[bad])  # the last finite observation
            assert (np.abs(want.obs[bad, 0]) <= 0.5).all()  # a fresh episode
            before = want.obs
            blow_ups += int(bad.sum())
        assert blow_ups >= 6  # x grows by 0.4 a step from |x| <= 0.5: every env blows up every 3-5 steps
        vector.close()
        serial.close()
    finally:
        gym.registry.pop("DiffrlTestUnstable-v0", None)
