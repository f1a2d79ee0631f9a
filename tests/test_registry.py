"""The env registry: names, lazy imports, close-match errors, user registration."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import subprocess
import sys

import jax
import pytest

from diffrl.envs import EnvSpec, EnvState, describe, list_envs, make, register, unregister


def test_list_has_all_suites_and_the_25_dmc_and_19_locomotion_tasks():
    from mujoco_playground import dm_control_suite
    from mujoco_playground._src import locomotion

    names = list_envs()
    assert len(names) == len(set(names))
    for task in dm_control_suite.ALL_ENVS + locomotion.ALL_ENVS:
        assert f"playground/{task}" in names
    assert len([n for n in names if n.startswith("playground/")]) == 25 + 19
    for name in ["brax/ant", "brax/halfcheetah", "gymnax/Pendulum-v1", "toy/MirrorGoals", "toy/BimodalBandit"]:
        assert name in names
    assert len([n for n in names if n.startswith("brax/")]) == 11
    assert len([n for n in names if n.startswith("gymnax/")]) == 5


def test_listing_and_toy_envs_import_no_simulator():
    code = (
        "import sys\n"
        "from diffrl.envs import list_envs, make\n"
        "list_envs(); make('toy/MirrorGoals')\n"
        "heavy = [m for m in ('brax', 'gymnax', 'mujoco_playground', 'mujoco') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


def test_unknown_name_suggests_close_matches_and_prefixes():
    with pytest.raises(ValueError) as err:
        make("playground/CartpoleSwingUp")
    message = str(err.value)
    assert "playground/CartpoleSwingup" in message
    for prefix in ("brax/", "gymnax/", "playground/", "toy/"):
        assert prefix in message
    with pytest.raises(ValueError, match="playground/CheetahRun"):
        make("CheetahRun")  # bare task name
    with pytest.raises(ValueError, match="gymnax/Pendulum-v1"):
        describe("gymnax/pendulum-v1")


def test_manipulation_task_gives_a_clear_error():
    with pytest.raises(ValueError, match="manipulation task"):
        make("playground/PandaPickCube")
    assert "playground/G1JoystickFlatTerrain" in list_envs()  # locomotion is supported


def test_describe_playground_cartpole_swingup():
    spec = describe("playground/CartpoleSwingup")
    assert (spec.obs_size, spec.action_size) == (5, 1)
    assert spec.name == "playground/CartpoleSwingup" and spec.episode_length == 1000


def test_register_user_env():
    class Constant:
        spec = EnvSpec("user/Constant", 1, 1, (-1.0,), (1.0,), 3)

        def __init__(self, value=0.0):
            self.value = value

        def reset(self, key):
            return EnvState.create(inner=(), obs=jax.numpy.full((1,), self.value))

        def step(self, state, action):
            return self.reset(None)

    register("user/Constant", Constant)
    try:
        assert "user/Constant" in list_envs()
        env = make("user/Constant", value=2.0)
        assert float(env.reset(jax.random.PRNGKey(0)).obs[0]) == 2.0
        assert describe("user/Constant").episode_length == 3
        with pytest.raises(ValueError, match="already registered"):
            register("user/Constant", Constant)
        register("user/Constant", Constant, overwrite=True)
        with pytest.raises(ValueError, match="user/"):
            make("user/Constnt")  # close match among user names; user prefix listed
    finally:
        unregister("user/Constant")
    assert "user/Constant" not in list_envs()
