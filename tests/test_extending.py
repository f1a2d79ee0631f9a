"""An algorithm written outside src/ trains through ``Trainer`` and through ``diffrl train`` without
editing diffrl: examples/custom_algorithm.py, a PPO variant with a config section of its own, registered
as a ``module:attribute`` spec and as an installed entry point (docs/extending.md)."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SPEC = "custom_algorithm:SCALED_PPO"
SMALL = dict(env="toy/MirrorGoals", num_envs=8, num_steps=8, total_env_steps=256, num_evals=1, eval_envs=4,
             progress=False, tensorboard=False)


@pytest.fixture
def example_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    yield
    from diffrl.algos import registry

    registry.unregister(SPEC)
    sys.modules.pop("custom_algorithm", None)
    from diffrl.config import presets

    presets.sync()  # its presets leave the catalogue with it (other tests list every preset)


def _train(algo: str, out: Path, **settings):
    from diffrl.config import config_type
    from diffrl.core.trainer import Trainer
    from diffrl.config.overrides import set_field

    config = config_type(algo)(algo=algo, out=str(out), **SMALL)
    for dotted, value in settings.items():
        config = set_field(config, dotted, value)
    metrics = []
    Trainer(config, metrics_fn=lambda first, m: metrics.append({k: np.asarray(v) for k, v in m.items()})).run()
    return metrics


@pytest.mark.heavy(45)
def test_an_outside_algorithm_trains_through_the_trainer_and_reads_its_own_setting(example_on_path, tmp_path):
    # policy_scale 1 is PPO exactly: the same numbers, bit for bit, as --algo ppo with the same settings
    scaled = _train(SPEC, tmp_path / "scaled1", **{"scaled.policy_scale": 1.0})
    ppo = _train("ppo", tmp_path / "ppo")
    assert scaled[0].keys() == ppo[0].keys()
    for name in ppo[0]:
        np.testing.assert_array_equal(scaled[0][name], ppo[0][name], err_msg=name)
    # its own field is read: a doubled policy term moves the policy differently
    doubled = _train(SPEC, tmp_path / "scaled2", **{"scaled.policy_scale": 2.0})
    assert not np.array_equal(doubled[0]["loss/policy"], ppo[0]["loss/policy"])
    stored = json.loads((tmp_path / "scaled2" / "config.json").read_text())["config"]
    assert stored["algo"] == SPEC and stored["scaled"] == {"policy_scale": 2.0}


def test_its_own_setting_is_validated_before_compiling(example_on_path):
    from diffrl.config import ConfigError, config_type
    from diffrl.config.overrides import set_field

    config = set_field(config_type(SPEC)(algo=SPEC, **SMALL), "scaled.policy_scale", -1.0)
    with pytest.raises(ConfigError, match="--scaled.policy-scale must be positive"):
        config.validate()


def test_a_reimported_module_parses_with_its_new_section_class(example_on_path):
    # a module imported again brings new section classes: the flags parse into them, not into a class
    # built around the old ones (which tyro would take for a subcommand and refuse the flag)
    import importlib

    from diffrl.algos import registry
    from diffrl.commands.train_flags import parse_config
    from diffrl.config import config_type

    argv = ["--algo", SPEC, "--env", "toy/MirrorGoals", "--scaled.policy-scale", "2"]
    first = parse_config(config_type(SPEC)(algo=SPEC), argv)
    registry.unregister(SPEC)
    sys.modules.pop("custom_algorithm", None)
    from diffrl.config import presets

    presets.sync()  # its presets leave the catalogue with it (other tests list every preset)
    again = parse_config(config_type(SPEC)(algo=SPEC), argv)
    assert again.scaled.policy_scale == first.scaled.policy_scale == 2.0
    assert type(again.scaled) is importlib.import_module("custom_algorithm").ScaledConfig
    assert type(again.scaled) is not type(first.scaled)


def _cli(*args, env=None, cwd=None):
    env = dict(os.environ, JAX_PLATFORMS="cpu", **(env or {}))
    return subprocess.run([sys.executable, "-m", "diffrl.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=900)


@pytest.mark.heavy(60)
def test_diffrl_train_runs_it_from_a_module_spec_and_resumes_it(tmp_path):
    env = {"PYTHONPATH": str(EXAMPLES)}
    out = tmp_path / "run"
    flags = ["--env", "toy/MirrorGoals", "--num-envs", "8", "--num-steps", "8", "--total-env-steps", "256",
             "--num-evals", "1", "--eval-envs", "4", "--no-progress", "--no-tensorboard"]
    done = _cli("train", "--algo", SPEC, "--scaled.policy-scale", "2", "--out", str(out), *flags, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "config.json").read_text())["config"]["scaled"]["policy_scale"] == 2.0
    # the run directory names the spec: it continues wherever the module is importable
    more = _cli("train", "--resume", str(out), "--total-env-steps", "512", "--no-progress", env=env)
    assert more.returncode == 0, more.stderr[-3000:]
    # its --help lists its own section and PPO's, and none of the sections it does not read
    helped = _cli("train", "--algo", SPEC, "--help", env=env)
    assert "--scaled.policy-scale" in helped.stdout and "--ppo.clip-eps" in helped.stdout
    assert "--reppo." not in helped.stdout and "--diffusion." not in helped.stdout
    # a spec that names nothing is refused in one line, before anything is built
    bad = _cli("train", "--algo", "custom_algorithm:NOPE", *flags, env=env)
    assert bad.returncode == 2 and "has no attribute 'NOPE'" in bad.stderr


def test_an_installed_entry_point_registers_it_by_name(tmp_path):
    # a distribution on the path whose entry_points.txt names the example, as `pip install` would write it
    dist = tmp_path / "scaled_ppo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: scaled-ppo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[diffrl.algorithms]\nscaled-ppo = custom_algorithm:SCALED_PPO\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(EXAMPLES)])}
    # the installed name selects the record (its own section among the flags); training from a name is
    # the same code path as from a spec, trained above
    helped = _cli("train", "--algo", "scaled-ppo", "--help", env=env)
    assert helped.returncode == 0 and "--scaled.policy-scale" in helped.stdout, helped.stderr[-2000:]
    listed = _cli("train", "--algo", "scaled-pp", env=env)  # a typo: the installed name is suggested
    assert listed.returncode == 2 and "scaled-ppo" in listed.stderr


def test_its_presets_resolve_once_it_is_registered(example_on_path):
    from diffrl.algos import registry
    from diffrl.algos.preset import Preset
    from diffrl.algos.spec import AlgorithmSpec
    from diffrl.config import ConfigError
    from diffrl.config.presets import PRESETS, every_preset, resolve

    # picked by default on its family (toy/*), built on diffrl's ppo-toy: PPO's values and its own
    config = resolve(SPEC, "toy/MirrorGoals", None)
    assert config.preset == "scaled-ppo-toy" and config.algo == SPEC and config.scaled.policy_scale == 2.0
    assert config.ppo.learning_rate == PRESETS["ppo-toy"]["ppo.learning_rate"] and config.gaussian.hidden == (64, 64)
    assert every_preset()["scaled-ppo-toy"]["algo"] == "scaled-ppo" and "scaled-ppo-toy" not in PRESETS  # not built in
    assert resolve(SPEC, "gymnax/Pendulum-v1", None).preset is None  # no preset claims gymnax for it
    # a preset of another algorithm's, or one that would resolve to another algorithm, is refused
    example = sys.modules["custom_algorithm"]
    clash = Preset("ppo-toy", "a name diffrl has", settings={"here": {"algo": "clash-ppo"}})
    other = Preset("other-ppo-toy", "forgets its algo", base="ppo-toy", settings={"here": {"ppo.ent_coef": 0.0}})
    for preset, message in ((clash, "is already a preset built into diffrl"), (other, "resolves to --algo ppo")):
        spec = dataclasses.replace(example.SCALED_PPO, name="clash-ppo", own_sections={}, presets=(preset,))
        registry.register(spec)
        try:
            with pytest.raises(ConfigError, match=message):
                resolve("ppo", "toy/MirrorGoals", None)
        finally:
            registry.unregister("clash-ppo")
    assert "other-ppo-toy" not in every_preset() and resolve("ppo", "toy/MirrorGoals", None).preset == "ppo-toy"
    registry.unregister(SPEC)  # unregistered, its presets are gone
    assert resolve("ppo", "toy/MirrorGoals", None).preset == "ppo-toy" and "scaled-ppo-toy" not in every_preset()


def test_diffrl_presets_lists_and_shows_its_presets():
    env = {"PYTHONPATH": str(EXAMPLES)}
    listed = _cli("presets", "--algo", SPEC, env=env)
    assert listed.returncode == 0 and listed.stdout.startswith("scaled-ppo-toy (on ppo-toy; default for toy)")
    shown = _cli("presets", "--show", "scaled-ppo-toy", "--algo", SPEC, env=env)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "chain: ppo-toy -> scaled-ppo-toy" in shown.stdout and "scaled.policy_scale = 2.0" in shown.stdout
