"""Bad input is refused with a clear message before anything compiles."""
import pytest

from diffrl.config import ConfigError, TrainConfig
from diffrl.presets import PRESETS, apply_preset, default_preset, resolve


def test_default_config_is_valid():
    TrainConfig().validate()


@pytest.mark.parametrize("changes, message", [
    ({"num_envs": 0}, "--num-envs must be positive"),
    ({"total_env_steps": -5}, "--total-env-steps must be positive"),
    ({"total_env_steps": 10, "num_envs": 8, "num_steps": 8}, "smaller than one iteration"),
    ({"env_backend": "warp"}, "--env-backend"),
])
def test_invalid_top_level_fields(changes, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**changes).validate()


def test_minibatches_must_divide_batch():
    from diffrl.algos.ppo_config import PPOConfig
    cfg = TrainConfig(num_envs=10, num_steps=3, ppo=PPOConfig(num_minibatches=4))
    with pytest.raises(ConfigError, match="must divide the batch"):
        cfg.validate()


def test_non_positive_learning_rate():
    from diffrl.algos.ppo_config import PPOConfig
    with pytest.raises(ConfigError, match="learning-rate must be positive"):
        TrainConfig(ppo=PPOConfig(learning_rate=0.0)).validate()


def test_all_errors_reported_together():
    with pytest.raises(ConfigError) as e:
        TrainConfig(num_envs=0, num_seeds=0).validate()
    assert "--num-envs" in str(e.value) and "--num-seeds" in str(e.value)


def test_presets_apply_and_validate():
    for name in PRESETS:
        cfg = apply_preset(TrainConfig(algo=PRESETS[name].get("algo", "ppo")), name)
        cfg.validate()
        assert cfg.preset == name


def test_unknown_preset_suggests():
    with pytest.raises(ConfigError, match="did you mean ppo-dmc"):
        apply_preset(TrainConfig(), "ppo-dcm")


def test_default_preset_by_env_family():
    assert default_preset("ppo", "playground/CartpoleSwingup") == "ppo-dmc-cpu"
    assert default_preset("ppo", "gymnax/Pendulum-v1") == "ppo-gymnax"
    assert resolve("ppo", "gymnax/Pendulum-v1", None).preset == "ppo-gymnax"


def test_derived_sizes():
    cfg = TrainConfig(total_env_steps=10_000, num_envs=10, num_steps=10, num_evals=3)
    assert cfg.batch_size == 100 and cfg.num_iterations == 100
    assert cfg.iterations_per_chunk == 33 and cfg.num_chunks == 3
    assert cfg.trained_env_steps == 9_900
