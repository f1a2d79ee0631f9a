"""Every baseline of the papers' comparisons trains from ``diffrl train --algo NAME`` on every
environment family: Playground DM Control and humanoids, Brax, gymnax, the toy tasks and bandits,
and the host suites dm_control and ManiSkill3 (when their extras are installed).

One short run per pair (a few iterations, tiny batch, 16-step evaluation episodes) through the CLI,
so each pair resolves its family's preset, validates, compiles, trains, evaluates and writes its run
directory. Long tier: 40 short runs, 14-100 s each here except G1 (4-6 min each; about 35 min in all).
"""
import importlib.util
import json
import math

import pytest

from diffrl.cli import main
from multiseed import long_only

BASELINES = ("spo", "fpo", "fpo++", "dppo", "dime")
FAMILIES = {  # a representative task per family, and the module its suite needs
    "playground/CartpoleBalance": None,
    "playground/G1JoystickFlatTerrain": None,
    "brax/ant": None,
    "gymnax/Pendulum-v1": None,
    "toy/MirrorGoals": None,
    "toy/BimodalBandit": None,
    "dmc/cartpole-balance": "dm_control",
    "maniskill/PushCube-v1": "mani_skill",
}


@pytest.mark.slow
@pytest.mark.timeout(900)
@long_only("one short training per (baseline, family): 40 runs, about 45 min of one core")
@pytest.mark.parametrize("env", list(FAMILIES))
@pytest.mark.parametrize("algo", BASELINES)
def test_baseline_trains_on_every_family(tmp_path, algo, env):
    needs = FAMILIES[env]
    if needs and importlib.util.find_spec(needs) is None:
        pytest.skip(f"{env} needs {needs} (the extra `make test` installs)")
    out = tmp_path / "run"
    rc = main(["train", "--algo", algo, "--env", env, "--num-envs", "4", "--num-steps", "8",
               "--total-env-steps", "64", "--num-evals", "1", "--eval-envs", "2", "--episode-length", "16",
               "--checkpoint-every", "0", "--no-progress", "--out", str(out)])
    assert rc == 0
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["algo"] == algo and config["preset"].startswith(f"{algo}-")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["env_steps"] == 64 and math.isfinite(rows[-1]["eval/episode_return"])
