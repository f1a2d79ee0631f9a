"""A run's config is the run's own settings plus the config sections its algorithm reads
(``diffrl.config.config_type``): what it parses, resolves to, stores and is trained with."""
import dataclasses
import json
import pickle
import warnings

import pytest

from diffrl.algos import ALGORITHM_SECTIONS, CONFIG_SECTIONS
from diffrl.algos.ppo_config import PPOConfig
from diffrl.algos.registry import get
from diffrl.config import ConfigError, RunConfig, TrainConfig, as_full_config, as_run_config, config_type
from diffrl.config.presets import resolve
from diffrl.policies.diffusion import DiffusionPolicyConfig

RUN_FIELDS = [f.name for f in dataclasses.fields(RunConfig)]


@pytest.mark.parametrize("algo", sorted(ALGORITHM_SECTIONS))
def test_the_class_holds_the_run_fields_and_the_sections_the_algorithm_reads(algo):
    cls = config_type(algo)
    assert cls is config_type(algo) and issubclass(cls, RunConfig) and not issubclass(cls, TrainConfig)
    reads = ALGORITHM_SECTIONS[algo]
    # the run's fields, then the shared sections in the order --help lists them, then its own
    assert [f.name for f in dataclasses.fields(cls)] == \
        RUN_FIELDS + [s for s in CONFIG_SECTIONS if s in reads] + list(get(algo).own_sections)
    config = resolve(algo, "toy/MirrorGoals", None)
    assert type(config) is cls and config.algo == algo
    assert pickle.loads(pickle.dumps(config)) == config


def test_a_train_config_becomes_the_run_config_of_its_algorithm():
    diffusion = DiffusionPolicyConfig(num_steps=4)
    config = as_run_config(TrainConfig(algo="trudi", diffusion=diffusion))
    assert type(config) is config_type("trudi") and config.diffusion == diffusion
    assert not hasattr(config, "ppo") and not hasattr(config, "gaussian")
    assert as_run_config(config) is config
    full = as_full_config(config)
    assert type(full) is TrainConfig and full.diffusion == diffusion and full.ppo == PPOConfig()
    # a changed setting of a section the algorithm does not read would do nothing: refused, by name
    with pytest.raises(ConfigError, match=r"--ppo.learning-rate \(0.5\) has no effect with --algo trudi: "
                                          "trudi does not read the ppo section"):
        as_run_config(TrainConfig(algo="trudi", ppo=PPOConfig(learning_rate=0.5)))
    assert not hasattr(as_run_config(TrainConfig(algo="trudi", ppo=PPOConfig(learning_rate=0.5)),
                                     drop_unread=True), "ppo")


def test_a_section_the_algorithm_does_not_read_cannot_be_set():
    from diffrl.config.overrides import set_field

    config = resolve("ppo", "toy/MirrorGoals", None)
    with pytest.raises(ConfigError, match="--set diffusion.num_steps has no effect with --algo ppo: ppo does not "
                                          r"read the diffusion section \(it reads --ppo.\*, --gaussian.\*\)"):
        set_field(config, "diffusion.num_steps", "4")
    # a config composed for one algorithm and given another's name is refused before it is built
    with pytest.raises(ConfigError, match="--algo trudi reads the section"):
        config.replace(algo="trudi").validate()


def test_a_new_run_directory_stores_the_read_sections_and_an_old_one_loads_without_the_others(tmp_path):
    from diffrl.core.run_dir import load_run_config
    from diffrl.plumbing.records import config_to_json
    from diffrl.plumbing.run_record import write_run_record

    config = resolve("amdp", "toy/MirrorGoals", None)
    write_run_record(tmp_path, config)
    stored = json.loads((tmp_path / "config.json").read_text())["config"]
    assert [k for k in stored if k in CONFIG_SECTIONS] == ["reppo", "critic", "adjoint"]
    assert load_run_config(tmp_path) == config
    # written with every section, as diffrl stored a run config before composing it per algorithm
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text(json.dumps({"config": config_to_json(as_full_config(config))}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the other sections hold their defaults: nothing to say
        assert load_run_config(old) == config
