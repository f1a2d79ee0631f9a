"""Playground locomotion tasks offline: Menagerie resolution, loading, G1/T1 rollouts.

The rollout tests compile a reset + scan of wrapped steps of a humanoid (~40 s of CPU each
with a warm machine, ~2 min cold), so they use 2 envs and 4 steps; T1's is in the long tier.
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

from diffrl.envs import make
from diffrl.envs.menagerie import (ASSET_PACKAGE_ROBOTS, ENV_VAR, ROBOT_OF_TASK, MenagerieMissing,
                                   asset_package_menagerie, candidate_sources, find_menagerie,
                                   use_menagerie_for)
from diffrl.envs.playground import LOCOMOTION_ENVS, PRIVILEGED_OBS_ENVS, PlaygroundEnv
from diffrl.config.presets import HUMANOID_TASKS
from multiseed import long_only
from test_env_adapters import check_batch, run_wrapped


def _checkout(root, *robots):
    for robot in robots:
        (root / robot).mkdir(parents=True)
    return root


def test_menagerie_sources_in_order(tmp_path, monkeypatch):
    user = _checkout(tmp_path / "user", "unitree_g1")
    default = _checkout(tmp_path / "default", "unitree_g1", "unitree_go1")
    package = _checkout(tmp_path / "package", "unitree_g1", "booster_t1")
    sources = [("env var", user), ("playground", default), ("package", package)]
    assert find_menagerie("G1JoystickRoughTerrain", sources) == user
    assert find_menagerie("Go1Getup", sources) == default
    assert find_menagerie("T1JoystickFlatTerrain", sources) == package
    with pytest.raises(MenagerieMissing) as err:
        find_menagerie("SpotGetup", sources)
    message = str(err.value)
    assert "boston_dynamics_spot" in message and ENV_VAR in message and "SpotGetup" in message
    # The env var comes first when set; the asset package last.
    monkeypatch.setenv(ENV_VAR, str(user))
    names = [what for what, _ in candidate_sources(default)]
    assert names[0] == f"${ENV_VAR}" and names[1] == "Playground's external_deps folder"


def test_real_checkout_is_left_alone(tmp_path, monkeypatch):
    from mujoco_playground._src import mjx_env

    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(mjx_env, "MENAGERIE_PATH", mjx_env.MENAGERIE_PATH)  # restored after the test
    monkeypatch.setattr(mjx_env, "EXTERNAL_DEPS_PATH", tmp_path)
    checkout = _checkout(tmp_path / "mujoco_menagerie", "unitree_g1")
    assert use_menagerie_for("G1JoystickFlatTerrain") == checkout
    assert str(mjx_env.MENAGERIE_PATH) == str(checkout)
    # A robot the checkout lacks comes from the asset package; nothing is written.
    assert use_menagerie_for("T1JoystickFlatTerrain") == asset_package_menagerie()
    assert sorted(p.name for p in checkout.iterdir()) == ["unitree_g1"]


@pytest.mark.heavy(30)
def test_humanoid_tasks_take_the_presets_overrides():
    """The mirrors LOCOMOTION_ENVS and PRIVILEGED_OBS_ENVS match Playground; every locomotion robot
    is packaged; the humanoid presets' override (no random pushes, as in REPPO) exists for their
    tasks. (Every task builds, with its privileged observation where it has one: test_env_catalog.py.)"""
    from mujoco_playground._src import locomotion

    assert LOCOMOTION_ENVS == tuple(locomotion.ALL_ENVS)
    assert all(ROBOT_OF_TASK[t] in ASSET_PACKAGE_ROBOTS for t in LOCOMOTION_ENVS)
    assert HUMANOID_TASKS <= PRIVILEGED_OBS_ENVS
    for task in sorted(HUMANOID_TASKS):
        env = PlaygroundEnv(task, asymmetric=True, config_overrides={"push_config.enable": False})
        assert env.env._config.push_config.enable is False
        assert env.spec.action_low == (-1.0,) * env.spec.action_size  # offsets in action_scale units


def test_asymmetric_needs_a_privileged_observation():
    with pytest.raises(ValueError, match="no privileged observation"):
        PlaygroundEnv("H1JoystickGaitTracking", asymmetric=True)
    with pytest.raises(ValueError, match="manipulation"):
        make("playground/PandaPickCube")
    with pytest.raises(ValueError, match="invalid config override"):
        PlaygroundEnv("Op3Joystick", config_overrides={"push_config.enable": False})


HUMANOID_SIZES = {"G1JoystickFlatTerrain": (103, 216, 29), "T1JoystickFlatTerrain": (85, 180, 23)}


@pytest.mark.parametrize("task", sorted(HUMANOID_SIZES))
def test_humanoid_spec(task):
    """Observation (actor, privileged critic) and action sizes, episode length, action bounds."""
    spec = make(f"playground/{task}", asymmetric=True).spec
    assert (spec.obs_size, spec.critic_size, spec.action_size, spec.episode_length) == (*HUMANOID_SIZES[task], 1000)
    assert spec.action_high == (1.0,) * spec.action_size


@pytest.mark.timeout(400)
@pytest.mark.parametrize("task", [
    # Each is a ~2 min cold compile of the robot's MJX step on one core, so both run in the long tier
    # to keep the CI tier under 30 minutes; CI still builds both tasks offline and checks their sizes
    # (test_humanoid_spec) and loads every packaged locomotion task (the test above).
    pytest.param("G1JoystickFlatTerrain", marks=long_only("a cold compile of G1's MJX step, ~2 min")),
    pytest.param("T1JoystickFlatTerrain", marks=long_only("a cold compile of T1's MJX step, ~2 min")),
])
def test_humanoid_rollout(task):
    env = make(f"playground/{task}", asymmetric=True)
    wrapped, first, traj = run_wrapped(env, num_envs=2, num_steps=4)
    check_batch(wrapped.spec, first, traj, 2, 4)
    # The actor sees Playground's "state", the critic its "privileged_state".
    np.testing.assert_array_equal(first.obs, first.inner.obs["state"])
    np.testing.assert_array_equal(first.critic_obs, first.inner.obs["privileged_state"])
    np.testing.assert_array_equal(traj.critic_obs, traj.inner.obs["privileged_state"])
    assert np.all(traj.step_count[-1] == 4) and not traj.truncated.any()
    assert np.any(traj.obs[0] != traj.obs[-1])  # the robot moves
