"""KEY=VALUE overrides and presets: one typed setter (diffrl.config.overrides.set_field)."""
import dataclasses

import pytest

from diffrl.config import ConfigError, TrainConfig
from diffrl.config.overrides import coerce, set_field, split_override
from diffrl.config.presets import PRESETS, apply_preset, resolve


@pytest.fixture(scope="module")
def config():
    return resolve("reppo", "gymnax/Pendulum-v1", None)


@pytest.mark.parametrize("dotted,text,want", [
    ("gaussian.hidden", "64", (64,)),            # once stored the int 64 where a tuple belongs
    ("gaussian.hidden", "64,32", (64, 32)),
    ("gaussian.hidden", "(64, 32)", (64, 32)),
    ("gaussian.hidden", "[8]", (8,)),
    ("reppo.kl-bound", "1e-2", 0.01),            # dashes as on the command line
    ("reppo.kl_bound", "1", 1.0),                # an int where a float belongs is widened
    ("reppo.num_epochs", "3", 3),
    ("reppo.num_epochs", "2.0", 2),
    ("reppo.anneal_lr", "true", True),
    ("reppo.anneal_lr", "0", False),
    ("critic.norm", "rms", "rms"),               # a bare word is a string
    ("critic.norm", "'none'", "none"),
    ("episode_length", "none", None),            # optional fields take none
    ("episode_length", "200", 200),
    ("env_overrides", "push_config.enable=false", ("push_config.enable=false",)),
])
def test_text_is_converted_to_the_fields_type(config, dotted, text, want):
    out = set_field(config, dotted, text)
    value = out
    for part in dotted.replace("-", "_").split("."):
        value = getattr(value, part)
    assert value == want and type(value) is type(want)


@pytest.mark.parametrize("dotted,text,message", [
    ("reppo.num_epochs", "2.5", "--set reppo.num_epochs='2.5': expected int"),
    ("reppo.num_epochs", "true", "expected int"),
    ("gaussian.hidden", "a,b", "expected a tuple of int"),
    ("reppo.anneal_lr", "maybe", "expected bool"),
    ("reppo.kl_bound", "big", "expected float"),
    ("reppo.no_such_field", "1", "--set reppo.no_such_field: unknown field"),
    ("reppo", "1", "is a section"),
])
def test_a_value_of_the_wrong_type_is_refused_naming_field_and_type(config, dotted, text, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        set_field(config, dotted, text)


def test_python_values_are_checked_too():
    assert coerce([1, 2], tuple[int, ...]) == (1, 2)
    assert coerce(3, float) == 3.0 and type(coerce(3, float)) is float
    with pytest.raises(ValueError):
        coerce(1.5, int)
    with pytest.raises(ValueError):
        coerce(True, int)  # a bool is not a count


def test_every_preset_sets_values_of_the_declared_types():
    """Presets go through the same setter, so every one of their values already has its field's type."""
    for name, settings in PRESETS.items():
        config = apply_preset(TrainConfig(algo=settings.get("algo", "reppo")), name)
        for dotted in settings:
            value, section = config, config
            for part in dotted.split("."):
                section, value = value, getattr(value, part)
            declared = {f.name: f for f in dataclasses.fields(section)}[dotted.split(".")[-1]]
            assert coerce(value, _declared_type(section, declared.name)) == value, (name, dotted)


def _declared_type(section, name):
    import typing

    return typing.get_type_hints(type(section))[name]


def test_split_override():
    assert split_override("--reppo.kl-bound=0.2") == ("reppo.kl_bound", "0.2")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        split_override("reppo.kl_bound")


def test_the_old_entropy_target_flag_is_refused_with_the_new_convention(capsys):
    from diffrl.cli import main

    with pytest.raises(ConfigError, match="entropy-target-mult.*negated"):
        set_field(TrainConfig(algo="reppo"), "reppo.target_entropy_mult", "0.5")
    assert main(["train", "--algo", "reppo", "--reppo.target-entropy-mult", "-0.5"]) == 2
    assert "--reppo.entropy-target-mult" in capsys.readouterr().err


def test_a_moved_field_is_set_under_its_new_name_with_a_note(capsys):
    """--set with a trust-region setting's old name (diffrl.config.MOVED_FIELDS) sets the new field of the
    config's algorithm, and says so."""
    config = set_field(TrainConfig(algo="trudi"), "diffusion.trust-region", "action")
    assert config.reppo.trust_region == "action"
    assert "note: --set diffusion.trust_region is now --set reppo.trust_region" in capsys.readouterr().err
    assert set_field(TrainConfig(algo="amdp"), "adjoint.kl_bound", "0.2").reppo.kl_bound == 0.2
    off = set_field(TrainConfig(algo="amdp-off"), "adjoint.trust_region", "none", source="--override")
    assert off.offpolicy.kl_multiplier == "none"
    assert "note: --override adjoint.trust_region is now --override offpolicy.kl_multiplier" in capsys.readouterr().err


def test_a_stored_old_entropy_target_loads_negated():
    from diffrl.algos.reppo_config import REPPOConfig
    from diffrl.plumbing.records import config_from_json

    with pytest.warns(UserWarning, match="target_entropy_mult -> entropy_target_mult \\(negated\\)"):
        config = config_from_json(REPPOConfig, {"target_entropy_mult": -0.5, "kl_bound": 0.2})
    assert config.entropy_target_mult == 0.5 and config.kl_bound == 0.2
