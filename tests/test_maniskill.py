"""ManiSkill3 tasks (``maniskill/<Task>``, diffrl.envs.maniskill) as host environments.

``make test`` installs the extra (``make setup-maniskill``: CPU torch, mani-skill 3.0.1, a Vulkan
driver); tests/test_env_catalog.py builds and steps every listed task through the trainer's batch.
"""
import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("mani_skill")  # the maniskill extra: `make test` installs it

from diffrl.envs import registry  # noqa: E402
from diffrl.envs.maniskill import MANISKILL_TASKS, NEEDS_DOWNLOAD, ManiSkillEnv  # noqa: E402
from diffrl.config.overrides import set_field  # noqa: E402
from diffrl.config.presets import resolve  # noqa: E402

# Registered ManiSkill 3.0.1 tasks that build offline but have no reward to learn from (no dense
# reward mode, or none at all): not listed.
NO_DENSE_REWARD = ("Empty-v1", "DrawTriangle-v1", "DrawSVG-v1", "TableTopFreeDraw-v1", "FMBAssembly1Easy-v1",
                   "PlugCharger-v1", "StackPyramid-v1", "UnitreeG1Stand-v1", "TwoRobotPickCube-v1",
                   "TwoRobotStackCube-v1")


def test_catalogue_accounts_for_every_registered_task():
    """Each registered task is listed, refused for its downloads, or has no dense reward (a new
    ManiSkill release must be sorted before its tasks appear)."""
    from mani_skill.utils.registration import REGISTERED_ENVS

    registered = set(REGISTERED_ENVS)
    assert set(MANISKILL_TASKS) <= registered and set(NEEDS_DOWNLOAD) <= registered
    assert registered == set(MANISKILL_TASKS) | set(NEEDS_DOWNLOAD) | set(NO_DENSE_REWARD)
    for task in MANISKILL_TASKS:
        assert "normalized_dense" in REGISTERED_ENVS[task].cls.SUPPORTED_REWARD_MODES, task


def test_spec_reward_range_and_reproducible_episodes():
    env = registry.make("maniskill/PushCube-v1")
    assert (env.spec.obs_size, env.spec.action_size, env.spec.episode_length) == (35, 8, 50)
    assert env.spec.action_low == (-1.0,) * 8 and env.spec.action_high == (1.0,) * 8
    first = env.reset(3)
    assert first.shape == (35,) and first.dtype == np.float32
    rewards = []
    for _ in range(5):
        obs, reward, terminated, truncated = env.step(np.full(8, 0.3, np.float32))
        rewards.append(reward)
        assert not terminated and not truncated
    assert all(0.0 <= r <= 1.0 for r in rewards)  # normalized_dense
    np.testing.assert_array_equal(env.reset(3), first)  # an episode is reproducible from its seed
    assert not np.array_equal(env.reset(4), first)
    env.close()


@pytest.mark.parametrize("batched", [False, True])
def test_building_and_closing_a_task_skip_the_older_objects_in_maniskills_full_collections(monkeypatch, batched):
    """ManiSkill's full ``gc.collect()`` before each scene and in ``close`` (seconds in a process
    holding many compiled programs) sees only the objects made since; afterwards nothing stays
    frozen, and a freeze of the caller's own is left as it was. For the single-env task and the
    batched scene."""
    from diffrl.envs.maniskill_batch import ManiSkillBatchVecEnv

    def build():
        if batched:
            return ManiSkillBatchVecEnv("PushCube-v1", 1, sim_backend="physx_cpu")
        return ManiSkillEnv("PushCube-v1")

    import gc

    import mani_skill.envs.sapien_env as sapien_env

    seen = []
    real_collect = gc.collect

    class RecordingGC:  # ManiSkill's module-level `gc`, with its collect calls recorded
        def __getattr__(self, name):
            return getattr(gc, name)

        def collect(self, *args):
            seen.append(gc.get_freeze_count())
            return real_collect(*args)

    monkeypatch.setattr(sapien_env, "gc", RecordingGC())
    held = [[i] for i in range(1000)]  # objects that exist before the build
    build().close()
    # the build's collection and the close's (ManiSkill's _clear runs in both): the older objects frozen
    assert len(seen) >= 2 and min(seen) >= len(held), seen
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        build().close()
        assert gc.get_freeze_count() > 0  # still frozen (less what died meanwhile): the caller's freeze kept
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("bootstrap", [True, False])
def test_a_task_termination_is_a_truncation_unless_asked(bootstrap, monkeypatch):
    """A success ends the episode; by default it is reported as a truncation (bootstrapped), as in
    ManiSkill's PPO baseline and REPPO's wrapper."""
    import torch

    env = ManiSkillEnv("PushCube-v1", bootstrap_at_termination=bootstrap)
    env.reset(0)
    inner_step = env.env.step

    def succeed(action):
        obs, reward, _, truncated, info = inner_step(action)
        return obs, reward, torch.tensor([True]), truncated, info

    monkeypatch.setattr(env.env, "step", succeed)
    _, _, terminated, truncated = env.step(np.zeros(8, np.float32))
    assert (terminated, truncated) == ((False, True) if bootstrap else (True, False))
    env.close()


def test_a_task_that_downloads_assets_is_refused_before_anything_starts(tmp_path):
    """`diffrl train` on a task that needs a download stops at once, naming what is missing, and
    never imports ManiSkill."""
    code = ("import sys\nfrom diffrl.cli import main\n"
            "rc = main(['train', '--algo', 'reppo', '--env', 'maniskill/PickSingleYCB-v1', "
            f"'--out', {str(tmp_path / 'run')!r}])\n"
            "print('MANISKILL_IMPORTED', 'mani_skill' in sys.modules)\nsys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "YCB" in proc.stderr and "download_asset ycb" in proc.stderr, proc.stderr[-2000:]
    assert "MANISKILL_IMPORTED True" not in proc.stdout
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="Did you mean: maniskill/PickCube-v1"):
        registry.make("maniskill/PickCub-v1")


@pytest.mark.heavy(40)  # measured seconds, one core (tests/conftest.py starts heavy tests first)
@pytest.mark.timeout(300)
def test_trains_evaluates_and_records_through_the_trainer(tmp_path):
    """REPPO on maniskill/PushCube-v1 through the trainer, 2 seeds, 2 worker processes: finite
    evaluations with returns within the 50-step episode's [0, 50] and a success rate per seed; then
    a video of the policy."""
    from diffrl.core.trainer import Trainer
    from diffrl.artefacts.video import render_rollout

    config = resolve("reppo", "maniskill/PushCube-v1", None).replace(
        num_envs=4, num_steps=10, num_seeds=2, total_env_steps=2 * 40, num_evals=2, eval_envs=2,
        host_workers=2, out=str(tmp_path / "run"), progress=False, tensorboard=False)
    for field, value in (("reppo.num_minibatches", 2), ("reppo.num_epochs", 1), ("critic.hidden", 32),
                         ("gaussian.hidden", (32, 32))):  # small programs: compiling is most of the cost
        config = set_field(config, field, value)
    summary = Trainer(config).run()
    assert summary["env_steps"] == 80 and not summary["interrupted"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r["eval/seed_returns"] for r in rows if "eval/seed_returns" in r]
    assert len(evals) == 3 and all(len(e) == 2 for e in evals)
    assert all(0.0 <= x <= 50.0 for e in evals for x in e)
    assert all(len(r["eval/seed_success_rate"]) == 2 and 0.0 <= r["eval/success_rate"] <= 1.0
               for r in rows if "eval/seed_returns" in r)

    frames = render_rollout("maniskill/PushCube-v1", lambda obs, key: jnp.zeros(8), jax.random.PRNGKey(0),
                            num_steps=2, height=48, width=64)
    assert len(frames) == 3 and frames[0].shape == (48, 64, 3) and frames[0].dtype == np.uint8
    assert frames[0].std() > 0  # not a blank image


def test_success_is_reported_when_an_episode_ends_and_only_for_tasks_that_have_one():
    """The batch carries ManiSkill's success of an episode (any step) on the step it ends; a task
    without one (dm_control) gives NaN, and evaluation then logs no success rate."""
    from diffrl.envs.host import SerialVecEnv
    from diffrl.envs.registry import single_env_factory

    vec = SerialVecEnv(single_env_factory("maniskill/PushCube-v1"), num_envs=2, episode_length=3)
    vec.reset(seed=0, spread_counters=False)
    vec._slots[0].env.success_once = True  # as if env 0 had reached the goal during this episode
    steps = [vec.step(np.zeros((2, 8))) for _ in range(3)]
    assert [s.done.tolist() for s in steps] == [[False, False], [False, False], [True, True]]
    assert steps[-1].episode_success.tolist() == [1.0, 0.0] and steps[0].episode_success.tolist() == [0.0, 0.0]
    assert vec._slots[0].env.success_once is False  # the next episode starts without it
    vec.close()
    vec = SerialVecEnv(single_env_factory("dmc/cartpole-balance"), num_envs=1, episode_length=2)
    vec.reset(seed=0, spread_counters=False)
    assert np.isnan([vec.step(np.zeros((1, 1))) for _ in range(2)][-1].episode_success).all()
    vec.close()
