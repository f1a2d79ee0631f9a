"""A user's own environment trains from the command line without editing diffrl: a ``module:factory``
env name, or an installed package's ``diffrl.envs`` entry point (diffrl/envs/external.py).

The environment lives in a module written to a temporary directory, which is put on ``sys.path``
(in this process) or ``PYTHONPATH`` (for ``diffrl train`` in a child process); the entry point is
declared by a distribution's metadata directory (``*.dist-info/entry_points.txt``) in the same
directory, which is how ``importlib.metadata`` finds an installed package's.
"""
import json
import math
import os
import re
import subprocess
import sys
import textwrap

import pytest

from diffrl.cli import main
from diffrl.core.run_dir import default_run_dir
from diffrl.envs import EnvSpec, EnvState, list_envs, make, register, unregister

MODULE = "diffrl_test_user_tasks"

SOURCE = textwrap.dedent('''
    """A task of a user's own, outside diffrl."""
    import jax
    import jax.numpy as jnp

    from diffrl.envs import EnvSpec, EnvState


    class Reach:
        """Move a point on [0, 1] to 0.5; reward: minus the distance."""

        def __init__(self, episode_length=20):
            self.spec = EnvSpec(name="mine/Reach", obs_size=1, action_size=1, action_low=(-0.1,),
                                action_high=(0.1,), episode_length=episode_length)

        def reset(self, key):
            x = jax.random.uniform(key, (1,))
            return EnvState.create(inner=x, obs=x)

        def step(self, state, action):
            x = jnp.clip(state.inner + action, 0.0, 1.0)
            return EnvState.create(inner=x, obs=x, reward=-jnp.abs(x[0] - 0.5))


    def make_reach():
        return Reach()


    class factories:
        reach = staticmethod(make_reach)


    not_a_factory = 3


    def make_nothing():
        return object()
''')

ENTRY_POINTS = "[diffrl.envs]\nmine/Reach = {module}:make_reach\nmine/Broken = diffrl_no_such_module:make\n"

TRAIN = ["train", "--algo", "ppo", "--num-envs", "8", "--num-steps", "16", "--total-env-steps", "256",
         "--num-evals", "1", "--eval-envs", "4", "--ppo.num-minibatches", "2", "--ppo.num-epochs", "1",
         "--no-progress"]


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    """A directory holding the user's module and an installed distribution's metadata naming it."""
    root = tmp_path_factory.mktemp("user")
    (root / f"{MODULE}.py").write_text(SOURCE)
    dist = root / "diffrl_test_user_tasks-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: diffrl-test-user-tasks\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS.format(module=MODULE))
    return root


@pytest.fixture
def on_path(user_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(user_dir))
    yield user_dir
    sys.modules.pop(MODULE, None)


def train_in_child(user_dir, env_name, out):
    """``diffrl train --env env_name`` in a fresh process with ``user_dir`` on PYTHONPATH."""
    paths = [str(user_dir)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    proc = subprocess.run([sys.executable, "-m", "diffrl.cli", *TRAIN, "--env", env_name, "--out", str(out)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((out / "config.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert record["config"]["env"] == env_name and summary["env_steps"] == 256
    assert math.isfinite(float(rows[-1]["eval/episode_return"]))
    return record


def test_a_module_factory_name_makes_the_users_environment(on_path):
    for name in (f"{MODULE}:make_reach", f"{MODULE}:Reach", f"{MODULE}:factories.reach"):
        env = make(name)
        assert env.spec.name == "mine/Reach" and env.spec.episode_length == 20
    assert make(f"{MODULE}:Reach", episode_length=7).spec.episode_length == 7  # make's kwargs go to the factory
    assert f"{MODULE}:make_reach" not in list_envs()  # a module:factory name is not a listed one


@pytest.mark.parametrize("name, message", [
    ("diffrl_no_such_module:make", "cannot import module 'diffrl_no_such_module'"),
    (f"{MODULE}:missing", f"module '{MODULE}' has no attribute 'missing'"),
    (f"{MODULE}:factories.missing", "has no attribute 'factories.missing'"),
    (f"{MODULE}:not_a_factory", "not_a_factory is not callable (int)"),
    (f"{MODULE}:make_nothing", "returned 'object', which is not a diffrl environment (it has no spec"),
    (f"{MODULE}:", "is not module:factory"),
])
def test_a_bad_module_factory_name_is_refused_with_its_reason_before_compiling(on_path, tmp_path, capsys,
                                                                               name, message):
    with pytest.raises(ValueError, match="environment .*" + re.escape(message)):
        make(name)
    out = tmp_path / "never-written"
    assert main(TRAIN + ["--env", name, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_an_entry_point_names_the_environment_of_an_installed_package(on_path):
    assert "mine/Reach" in list_envs() and "mine/Broken" in list_envs()
    assert make("mine/Reach").spec.name == "mine/Reach"
    with pytest.raises(ValueError, match="environment 'mine/Broken': cannot import module 'diffrl_no_such_module'"):
        make("mine/Broken")


def test_a_registered_name_comes_before_an_entry_point(on_path):
    class Other:
        spec = EnvSpec("mine/Reach", 2, 1, (-1.0,), (1.0,), 5)

        def reset(self, key):
            return EnvState.create(inner=(), obs=[0.0, 0.0])

        def step(self, state, action):
            return state

    register("mine/Reach", Other)
    try:
        assert make("mine/Reach").spec.obs_size == 2
        assert list_envs().count("mine/Reach") == 1
    finally:
        unregister("mine/Reach")


def test_a_default_run_directory_of_a_module_factory_name_has_no_colon():
    assert ":" not in default_run_dir(f"{MODULE}:make_reach", "ppo").name


def test_diffrl_train_trains_a_module_factory_environment(user_dir, tmp_path):
    train_in_child(user_dir, f"{MODULE}:make_reach", tmp_path / "run")


def test_diffrl_train_trains_an_entry_point_environment(user_dir, tmp_path):
    train_in_child(user_dir, "mine/Reach", tmp_path / "run")
