"""ManiSkill's batched scene behind the host batch protocol (diffrl.envs.maniskill_batch).

The class is written for the GPU scene (``physx_cuda``); without a GPU the same code runs here on
SAPIEN's CPU PhysX with one env per scene, the real simulator, which is what these tests step.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("mani_skill")  # the maniskill extra: `make test` installs it

from diffrl.envs.host import first_step_counts  # noqa: E402
from diffrl.envs.maniskill_batch import ManiSkillBatchVecEnv, resolve_backend  # noqa: E402
from diffrl.config.overrides import set_field  # noqa: E402
from diffrl.config.presets import resolve  # noqa: E402

TASK = "PushCube-v1"


def batch(length=6):
    return ManiSkillBatchVecEnv(TASK, 1, episode_length=length, sim_backend="physx_cpu")


def actions(n, size=8, seed=0):
    return np.random.default_rng(seed).uniform(-1.5, 1.5, (n, 1, size)).astype(np.float32)


def test_episodes_end_at_the_time_limit_with_their_true_final_observation_and_totals():
    env = batch(length=6)
    first = env.reset(seed=3, spread_counters=False)
    assert all(isinstance(x, jax.Array) for x in first)  # DLPack: JAX arrays, on the simulator's device
    assert first.obs.shape == (1, env.spec.obs_size) and first.obs.dtype == jnp.float32
    assert env.spec.action_low == (-1.0,) * 8 and env.spec.episode_length == 6
    starts, total, length = [np.asarray(first.obs)], 0.0, 0
    for t, a in enumerate(actions(13)):
        out = env.step(jnp.asarray(a))
        total += float(out.reward[0])
        length += 1
        assert 0.0 <= float(out.reward[0]) <= 1.0  # the normalised dense reward
        ended = (t + 1) % 6 == 0
        assert out.done.tolist() == [ended] and out.truncated.tolist() == [ended] and not out.terminated[0]
        if ended:
            assert np.isclose(float(out.episode_return[0]), total, rtol=1e-5) and int(out.episode_length[0]) == length
            assert float(out.episode_success[0]) in (0.0, 1.0)  # PushCube reports success
            assert not np.array_equal(np.asarray(out.obs), np.asarray(out.final_obs))  # obs: the next episode's
            starts.append(np.asarray(out.obs))
            total, length = 0.0, 0
        else:
            assert float(out.episode_return[0]) == 0.0 and int(out.episode_length[0]) == 0
            assert np.array_equal(np.asarray(out.obs), np.asarray(out.final_obs))
    # every episode starts from a fresh draw (a partial reset seeded alike would repeat the first)
    assert len(starts) == 3 and all(not np.array_equal(a, b) for i, a in enumerate(starts) for b in starts[i + 1:])
    env.close()


def test_reproducible_for_a_seed_and_actions_clipped_to_the_bounds():
    """Two scenes, one given actions beyond [-1, 1] and one the clipped actions: the same steps, bit for
    bit; another seed starts elsewhere. Training batches spread their first time-limit counters."""
    a_env, b_env = batch(), batch()
    a, b = a_env.reset(seed=5), b_env.reset(seed=5)
    assert np.array_equal(np.asarray(a.obs), np.asarray(b.obs))
    for raw in actions(8, seed=1):
        a, b = a_env.step(raw), b_env.step(np.clip(raw, -1.0, 1.0))
        for x, y in zip(a, b):
            assert np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
    c_env = batch()
    assert not np.array_equal(np.asarray(c_env.reset(seed=6).obs), np.asarray(a_env.reset(seed=5).obs))
    for env, seed in ((a_env, 5), (c_env, 6)):  # the worker batch's counters for the same seed
        assert env._step_count.tolist() == first_step_counts(seed, 1, 6).tolist()
    for env in (a_env, b_env, c_env):
        env.close()


def test_one_cpu_scene_holds_one_env_and_a_gpu_request_is_refused_here():
    with pytest.raises(ValueError, match="one env per scene"):
        ManiSkillBatchVecEnv(TASK, 2, sim_backend="physx_cpu")
    assert resolve_backend("workers", 1) == "workers"
    if jax.default_backend() == "gpu":
        pytest.skip("a GPU machine: gpu is allowed")
    assert resolve_backend("auto", 1) == "workers"
    with pytest.raises(ValueError, match="JAX runs on cpu"):
        resolve_backend("gpu", 1)


def test_config_refuses_an_unknown_backend_and_a_gpu_it_cannot_run_before_compiling():
    from diffrl.config import ConfigError
    from diffrl.core.trainer import Trainer

    config = resolve("reppo", f"maniskill/{TASK}", None)
    with pytest.raises(ConfigError, match="--maniskill-backend must be one of auto, workers, gpu"):
        Trainer(config.replace(maniskill_backend="cuda"))
    if jax.default_backend() != "gpu":
        with pytest.raises(ConfigError, match="--maniskill-backend gpu cannot run here"):
            Trainer(config.replace(maniskill_backend="gpu"))


def test_trains_and_evaluates_through_the_trainer_on_the_batched_scene(tmp_path, monkeypatch):
    """The trainer's host loop on the batched scene (arrays that stay JAX arrays from the simulator to
    the update): REPPO, 1 seed x 1 env, a checkpoint, evaluations with a success rate."""
    from diffrl.core import build
    from diffrl.core.trainer import Trainer
    from diffrl.envs import host_registry

    made = []

    def cpu_scene(task, sim_backend, num_envs, episode_length):
        made.append((task, sim_backend, num_envs, episode_length))
        return ManiSkillBatchVecEnv(task, num_envs, episode_length, sim_backend="physx_cpu")

    monkeypatch.setattr(build, "_maniskill_backend", lambda config: "gpu")
    monkeypatch.setattr(host_registry, "maniskill_batch", cpu_scene)
    config = resolve("reppo", f"maniskill/{TASK}", None).replace(
        num_envs=1, num_steps=10, num_seeds=1, total_env_steps=40, num_evals=2, eval_envs=1,
        out=str(tmp_path / "run"), progress=False, tensorboard=False)
    for field, value in (("reppo.num_minibatches", 2), ("reppo.num_epochs", 1), ("critic.hidden", 32),
                         ("gaussian.hidden", (32, 32))):
        config = set_field(config, field, value)
    summary = Trainer(config).run()
    assert summary["env_steps"] == 40 and not summary["interrupted"]
    assert made == [(TASK, "physx_cuda", 1, 50), (TASK, "physx_cuda", 1, 50)]  # training batch, evaluation batch
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/seed_returns" in r]
    assert len(evals) == 3 and all(0.0 <= r["eval/episode_return"] <= 50.0 for r in evals)
    assert all(r["eval/success_rate"] in (0.0, 1.0) for r in evals)
    trained = [r for r in rows if "critic/q_mse" in r]
    assert trained and all(np.isfinite(r["critic/q_mse"]) for r in trained)


def test_throughput_benchmark_measures_the_scene(tmp_path):
    """benchmarks/host_throughput.py --scene-sizes, rehearsed on the CPU scene (one env). Two envs in
    the in-process batch: what is checked is that every column is measured and tabled, and each
    ManiSkill env takes seconds to build (the default 32 took most of this test's minutes)."""
    import host_throughput

    assert host_throughput.main(["--tasks", f"maniskill/{TASK}", "--workers", "0", "--seconds", "0.3",
                                 "--num-envs", "2",
                                 "--scene-sizes", "1", "--scene-backend", "physx_cpu", "--out", str(tmp_path)]) == 0
    row = json.loads((tmp_path / "throughput.json").read_text())["rows"][0]
    assert row["scene_1"] > 0 and row["workers_0"] > 0
    assert "ManiSkill scene of 1 (physx_cpu, DLPack)" in (tmp_path / "table.md").read_text()


def test_gpu_presets_are_the_references_settings_and_are_refused_without_a_gpu():
    """reppo-maniskill: REPPO's ManiSkill runs (1024 x 128, 128 minibatches, 4 epochs, lambda 0.95,
    gamma 1 - 10/50, support [-15, 15]); ppo-maniskill: ManiSkill's PPO baseline (512 x 50, 32
    minibatches); both, and their variants, ask for the GPU scene."""
    from diffrl.config import ConfigError
    from diffrl.core.trainer import Trainer
    from diffrl.config.presets import PRESETS

    reppo = resolve("reppo", f"maniskill/{TASK}", "reppo-maniskill")
    assert (reppo.num_envs, reppo.num_steps, reppo.reppo.num_minibatches, reppo.reppo.num_epochs) == (1024, 128, 128, 4)
    assert (reppo.reppo.gamma, reppo.reppo.td_lambda, reppo.critic.vmin, reppo.critic.vmax) == (0.8, 0.95, -15.0, 15.0)
    ppo = resolve("ppo", f"maniskill/{TASK}", "ppo-maniskill")
    assert (ppo.num_envs, ppo.num_steps, ppo.ppo.num_minibatches, ppo.ppo.gamma, ppo.ppo.gae_lambda) == (512, 50, 32, 0.8, 0.9)
    for algo in ("reppo", "trudi", "amdp", "dime", "ppo", "spo", "fpo", "dppo"):
        assert PRESETS[f"{algo}-maniskill"]["maniskill_backend"] == "gpu", algo
    if jax.default_backend() != "gpu":
        with pytest.raises(ConfigError, match="--maniskill-backend gpu cannot run here"):
            Trainer(resolve("trudi", f"maniskill/{TASK}", "trudi-maniskill"))


def test_a_scene_taken_to_nan_is_a_termination_from_the_last_finite_observation_then_a_reset():
    """PhysX propagates a NaN velocity into the cube's pose: ManiSkill returns NaN observations and rewards
    from then on without ending the episode. The batch ends it (reward 0, the last finite observation as
    its final one, ``nonfinite`` set) and resets it, so the next steps are finite again."""
    import torch

    env = batch(length=6)
    first = env.reset(seed=3, spread_counters=False)
    env.env.unwrapped.obj.set_linear_velocity(torch.tensor([[float("nan"), 0.0, 0.0]]))
    out = env.step(jnp.zeros((1, 8)))
    assert bool(out.nonfinite[0]) and bool(out.terminated[0]) and not bool(out.truncated[0])
    assert float(out.reward[0]) == 0.0 and float(out.episode_return[0]) == 0.0 and int(out.episode_length[0]) == 1
    np.testing.assert_array_equal(np.asarray(out.final_obs), np.asarray(first.obs))
    assert np.isfinite(np.asarray(out.obs)).all()  # a fresh episode
    for _ in range(3):
        out = env.step(jnp.zeros((1, 8)))
        assert not bool(out.nonfinite[0]) and np.isfinite(np.asarray(out.obs)).all()
        assert np.isfinite(np.asarray(out.reward)).all()
    env.close()
