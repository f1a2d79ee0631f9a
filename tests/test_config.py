"""Bad input is refused with a clear message before anything compiles."""
import pytest

from diffrl.config import ConfigError, TrainConfig
from diffrl.config.presets import PRESETS, apply_preset, default_preset, resolve


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


def test_humanoid_presets_follow_the_reference():
    # REPPO mjx_humanoid (github.com/cvoelcker/reppo config): asymmetric critic, support [-10, 10], gamma 0.97,
    # critic width 1024, 1024 envs, 8 epochs; small 32 steps x 4 minibatches, large 128 x 16.
    for family in ("reppo", "trudi", "amdp"):
        for size, (steps, minibatches) in {"small": (32, 4), "large": (128, 16)}.items():
            cfg = apply_preset(TrainConfig(algo=family), f"{family}-humanoid-{size}")
            assert cfg.asymmetric_critic and (cfg.critic.vmin, cfg.critic.vmax) == (-10.0, 10.0)
            assert cfg.reppo.gamma == 0.97 and cfg.critic.hidden == 1024 and cfg.num_envs == 1024
            assert (cfg.num_steps, cfg.reppo.num_minibatches, cfg.reppo.num_epochs) == (steps, minibatches, 8)
            assert cfg.env_config_overrides == {"push_config.enable": False}  # push_distractions false
    ppo = apply_preset(TrainConfig(), "ppo-humanoid")
    assert ppo.asymmetric_critic and ppo.ppo.gamma == 0.97 and ppo.ppo.value_hidden == (512, 256, 128)
    g1, op3 = "playground/G1JoystickFlatTerrain", "playground/Op3Joystick"
    assert default_preset("reppo", g1) == "reppo-humanoid-cpu" and resolve("trudi", g1, None).asymmetric_critic
    assert default_preset("ppo", g1) == "ppo-humanoid-cpu"
    assert default_preset("amdp", op3) == "amdp-locomotion-cpu" and not resolve("reppo", op3, None).asymmetric_critic
    assert default_preset("reppo", "playground/CheetahRun") == "reppo-dmc-cpu"
    assert default_preset("reppo", "playground/Go1Getup") == "reppo-locomotion-cpu"


def test_env_overrides_are_parsed_and_validated():
    cfg = TrainConfig(env="playground/G1JoystickFlatTerrain",
                      env_overrides=("push_config.enable=false", "command_config.a=[1.5, 0.8]", "x=abc"))
    cfg.validate()
    assert cfg.env_config_overrides == {"push_config.enable": False, "command_config.a": [1.5, 0.8], "x": "abc"}
    with pytest.raises(ConfigError) as err:
        TrainConfig(env="gymnax/Pendulum-v1", env_overrides=("novalue", "=1")).validate()
    message = str(err.value)
    assert "'novalue' is not KEY=VALUE" in message and "'=1' is not KEY=VALUE" in message
    assert "playground/* tasks only" in message


@pytest.mark.parametrize("field, value, hint", [
    ("kl_start", 1.0, "--reppo.lambda-init"),
    ("kl_min", 0.1, "--reppo.kl-multiplier"),
    ("entropy_target_mult", 0.5, "--adjoint.entropy-target-mult"),
    ("actor_loss_mode", "full", "--reppo.kl-multiplier"),
])
def test_amdp_refuses_reppo_settings_it_does_not_read(field, value, hint):
    """AMDP shares config.reppo with REPPO but has no KL multiplier or actor-loss rule of its own
    kind: a changed --reppo.<that> would do nothing, so it is refused, naming AMDP's counterpart."""
    import dataclasses

    from diffrl.algos.reppo_config import REPPOConfig

    reppo = dataclasses.replace(REPPOConfig(), **{field: value})
    flag = "--reppo." + field.replace("_", "-")
    with pytest.raises(ConfigError, match=f"{flag} .* has no effect with --algo amdp: .*{hint}"):
        TrainConfig(algo="amdp", reppo=reppo).validate()
    for algo in ("reppo", "trudi", "amdp-backprop"):  # they read it
        TrainConfig(algo=algo, reppo=reppo).validate()


REPPO_FAMILY = ("reppo", "trudi", "dime", "amdp", "amdp-backprop")


@pytest.mark.parametrize("field, value, readers", [
    ("trust_region", "none", {"trudi", "dime"}),
    ("kl_estimator", "sampled", {"trudi", "dime"}),
    ("kl_samples", 8, {"trudi", "dime"}),
    ("kl_paths", "behaviour", {"trudi", "dime"}),
    ("kl_multiplier", "dual", {"amdp"}),
    ("lambda_init", 2.0, {"amdp"}),
    ("kl_bound", 0.2, set(REPPO_FAMILY)),
])
def test_trust_region_settings_are_read_by_the_algorithms_that_enforce_them(field, value, readers):
    """The trust-region settings live in the section of the algorithm that enforces them (--reppo.*,
    diffrl.config.MOVED_FIELDS); an algorithm of the family that does not enforce one refuses it,
    naming the algorithm that does."""
    import dataclasses

    from diffrl.algos.reppo_config import REPPOConfig

    reppo = dataclasses.replace(REPPOConfig(), **{field: value})
    flag = "--reppo." + field.replace("_", "-")
    for algo in REPPO_FAMILY:
        config = TrainConfig(algo=algo, reppo=reppo)
        if algo in readers:
            config.validate()
        else:
            with pytest.raises(ConfigError, match=f"{flag} .* has no effect with --algo {algo}: it "):
                config.validate()


def test_amdp_off_reads_its_drift_trust_region_from_its_own_section():
    """amdp-off's trust region is its own (--offpolicy.kl-multiplier, --offpolicy.kl-bound): sac and
    dime-off have none and refuse them; the learned 'dual' multiplier is on-policy AMDP's only."""
    import dataclasses

    from diffrl.algos.offpolicy_config import OffPolicyConfig

    batch = {"num_envs": 8, "num_steps": 3}  # 48 gradient steps an iteration: a multiple of the policy delay
    for changes in ({"kl_multiplier": "none"}, {"kl_bound": 0.2}):
        offpolicy = dataclasses.replace(OffPolicyConfig(), **changes)
        TrainConfig(algo="amdp-off", offpolicy=offpolicy, **batch).validate()
        for algo in ("sac", "dime-off"):
            with pytest.raises(ConfigError, match=f"has no effect with --algo {algo}: it sets amdp-off's"):
                TrainConfig(algo=algo, offpolicy=offpolicy, **batch).validate()
    with pytest.raises(ConfigError, match="--offpolicy.kl-multiplier must be closed_form or none"):
        TrainConfig(algo="amdp-off", offpolicy=OffPolicyConfig(kl_multiplier="dual"), **batch).validate()


def test_moved_fields_resolve_to_the_algorithms_section():
    from diffrl.config import MOVED_FIELDS, moved_field

    assert moved_field("adjoint.trust_region", "amdp") == "reppo.kl_multiplier"
    assert moved_field("adjoint.trust_region", "amdp-off") == "offpolicy.kl_multiplier"
    assert moved_field("adjoint.kl_bound", "amdp-off") == "offpolicy.kl_bound"
    assert moved_field("adjoint.lambda_init", "amdp-off") == "reppo.lambda_init"  # amdp-off has none
    assert moved_field("diffusion.kl_samples", "dime-off") == "reppo.kl_samples"
    for old, new in MOVED_FIELDS.items():  # every new name is a field of the run config
        section, _, name = new.partition(".")
        assert hasattr(getattr(TrainConfig(), section), name), new
        assert not hasattr(getattr(TrainConfig(), old.partition(".")[0]), old.partition(".")[2]), old


@pytest.mark.parametrize("algo,flag,value", [
    ("trudi", "adjoint.num_steps", 4),
    ("amdp", "gaussian.hidden", (64,)),
    ("amdp", "diffusion.num_steps", 4),
    ("reppo", "ppo.learning_rate", 1e-3),
    ("ppo", "critic.vmax", 50.0),
    ("ppo", "reppo.kl_bound", 0.2),
])
def test_a_section_the_algorithm_does_not_read_is_refused(algo, flag, value):
    """A changed field of a config section the algorithm never reads would do nothing: refused
    before anything is built, naming the sections it does read."""
    from diffrl.algos import ALGORITHM_SECTIONS, UNUSED_SETTINGS
    from diffrl.config.overrides import set_field

    config = set_field(TrainConfig(algo=algo), flag, value)
    cli_flag = "--" + flag.replace("_", "-")
    with pytest.raises(ConfigError, match=f"{cli_flag} .* has no effect with --algo {algo}: {algo} does not read"):
        config.validate()
    readers = [a for a, sections in ALGORITHM_SECTIONS.items()
               if flag.split(".")[0] in sections and flag not in UNUSED_SETTINGS.get(a, {})]
    assert readers
    set_field(TrainConfig(algo=readers[0]), flag, value).validate()


def test_every_preset_sets_only_sections_its_algorithm_reads():
    from diffrl.algos import unused_setting_errors

    for name, preset in PRESETS.items():
        config = apply_preset(TrainConfig(algo=preset.get("algo", "reppo")), name)
        assert not unused_setting_errors(config), name


def test_amdp_presets_carry_no_reppo_kl_settings():
    from diffrl.algos import UNUSED_SETTINGS

    for name, preset in PRESETS.items():
        if preset.get("algo") == "amdp":
            assert not set(preset) & set(UNUSED_SETTINGS["amdp"]), name
