"""The off-policy presets on the AMDP paper's off-policy tasks run from a fresh clone (smoke budget).

Paper scale (``*-dmc``: DIME's recipe, 2048-wide critics, 24 envs; SAC's own 256-wide target critics) on dm_control's Dog and Humanoid
through the host adapter, and on Playground's JAX-native humanoid: each run builds the preset's
real networks and buffer layout, fills the buffer, takes its gradient steps and evaluates. Only
the budget (one iteration: 24 env steps, then the preset's 48 critic steps and its actor steps), the batch
and the episode length are cut (and the buffer, whose size does not change the program). CI runs
AMDP on dog-run (67 s of one core; 131 s with three iterations, as the 2048-wide critics' steps run
slowly at the tests' XLA optimisation level 0); the long tier runs every pair (a Playground
humanoid's MJX compile alone takes ~1 min here).
"""
import dataclasses
import json

import numpy as np
import pytest

from diffrl.core.trainer import Trainer
from diffrl.config.presets import resolve
from multiseed import long_only

PAIRS = [("amdp-off", "dmc/dog-run")]
LONG_PAIRS = [(algo, env) for algo in ("sac", "dime-off", "amdp-off")
              for env in ("dmc/dog-run", "dmc/humanoid-run", "playground/HumanoidStand") if (algo, env) not in PAIRS]


def smoke(algo, env, out):
    config = resolve(algo, env, f"{algo}-dmc")
    off = dataclasses.replace(config.offpolicy, buffer_size=4096, batch_size=32, learning_starts=16)
    return config.replace(total_env_steps=config.num_envs * config.num_steps,  # one iteration
                          num_evals=1, eval_envs=2, episode_length=16, out=str(out),
                          progress=False, tensorboard=False, host_workers=0, offpolicy=off)


def check(algo, env, tmp_path):
    config = smoke(algo, env, tmp_path / "run")
    width = (256, 256) if algo == "sac" else (2048, 2048)  # SAC's own critics; DIME's for the others
    assert config.offpolicy.critic_hidden == width and config.num_envs == 24 and not config.normalize_obs
    summary = Trainer(config).run()
    assert summary["env_steps"] == 24 and "policy_dir" in summary
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    assert last["offpolicy/learning"] > 0 and last["offpolicy/buffer_transitions"] > 16, last
    assert np.isfinite(last["critic/loss"]) and np.isfinite(last["eval/episode_return"])


@pytest.mark.slow
@pytest.mark.heavy(67)  # compiles the paper-scale programs (tests/conftest.py starts it early)
@pytest.mark.parametrize("algo, env", PAIRS)
def test_paper_preset_smoke(tmp_path, algo, env):
    check(algo, env, tmp_path)


@pytest.mark.slow
@long_only("each pair compiles the paper-scale programs (1-2 min each); CI runs amdp-off on dog-run")
@pytest.mark.parametrize("algo, env", LONG_PAIRS)
def test_paper_preset_smoke_every_pair(tmp_path, algo, env):
    check(algo, env, tmp_path)
