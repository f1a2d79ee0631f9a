"""Every task that ``diffrl envs`` lists builds offline and steps; failures name their real cause.

CI tier, one test per listed task (so the two workers share them):
* the task builds (Playground's Menagerie robots come from the pinned asset packages, Reacher needs
  the MjSpec shim) and its spec passes ``check_spec``;
* its JAX reset and step are traced (``jax.eval_shape``: every line of the task's Python runs, its
  shapes and dtypes are checked against the spec, nothing is compiled); for the 19 Playground
  locomotion tasks, whose traces cost 5-12 s each, in the long tier only (which also compiles and
  steps them); CI still builds them and steps their MuJoCo models;
* MuJoCo-based tasks (Playground, Brax) step their compiled MuJoCo model 200 times in MuJoCo's C
  engine under random controls within the actuator ranges, from the model's first keyframe, and the
  state stays finite: the physics model itself runs;
* tasks that compile in about a second (gymnax, toy) step jitted;
* host tasks (dm_control ``dmc/``, gymnasium ``gym/``, ManiSkill3 ``maniskill/``) are built, reset and
  stepped through the trainer's batch.

Long tier: every task steps jitted (reset and two steps), observation and reward finite. Compiling a
task's MJX step costs 10-200 s of one core (about 20 minutes for the whole catalogue), which is why
CI traces instead; CI still compiles and rolls out representative tasks of each family elsewhere
(tests/test_playground.py, tests/test_env_adapters.py, tests/test_playground_locomotion.py).
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.envs import registry
from diffrl.envs.base import check_spec
from diffrl.envs.registry import is_host_env
from diffrl.envs.playground import LOCOMOTION_ENVS, PRIVILEGED_OBS_ENVS
from multiseed import LONG_TESTS, long_only

TASKS = registry.list_envs()
JIT_IN_CI = ("gymnax/", "toy/")
"""Suites whose step compiles in about a second: stepped jitted in the CI tier too."""


def _mujoco_model(env):
    """The compiled ``mujoco.MjModel`` behind a Playground or Brax task, else None."""
    inner = getattr(env, "env", None)
    model = getattr(inner, "mj_model", None)
    if model is None and hasattr(inner, "sys"):
        model = getattr(inner.sys, "mj_model", None)
    return model


def _step_in_c(model, num_steps=200, seed=0):
    import mujoco

    data = mujoco.MjData(model)
    if model.nkey:
        mujoco.mj_resetDataKeyframe(model, data, 0)
    low = np.where(model.actuator_ctrllimited, model.actuator_ctrlrange[:, 0], -1.0)
    high = np.where(model.actuator_ctrllimited, model.actuator_ctrlrange[:, 1], 1.0)
    rng = np.random.default_rng(seed)
    for _ in range(num_steps):
        data.ctrl[:] = rng.uniform(low, high)
        mujoco.mj_step(model, data)
    return data


def _check_state(spec, state):
    assert state.obs.shape == (spec.obs_size,) and state.obs.dtype == jnp.float32
    assert state.critic_obs.shape == (spec.critic_size,)
    assert state.reward.shape == () and state.reward.dtype == jnp.float32
    assert state.terminated.shape == () and state.terminated.dtype == jnp.bool_


def test_the_catalogue_is_complete():
    """Every suite's tasks are listed, none twice."""
    assert len(TASKS) == len(set(TASKS))
    suites = {s: sum(t.startswith(s + "/") for t in TASKS) for s in ("playground", "brax", "gymnax", "toy", "dmc", "gym",
                                                                    "maniskill")}
    assert suites == {"playground": 44, "brax": 11, "gymnax": 5, "toy": 4, "dmc": 51, "gym": 13, "maniskill": 36}
    assert sum(suites.values()) == len(TASKS)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", TASKS)
def test_listed_task_builds_and_steps(name):
    if is_host_env(name):  # stepped on the host: no tracing, real steps are cheap
        return _step_host(name)
    task = name.split("/", 1)[1]
    if name.startswith("playground/") and task in LOCOMOTION_ENVS:
        # with the privileged critic observation where the task has one (the mirror is checked here)
        env = registry.make(name, asymmetric=task in PRIVILEGED_OBS_ENVS)
        privileged = task in PRIVILEGED_OBS_ENVS  # its observation is a dict with privileged_state; the others' flat
        assert bool(env.observation_groups) == privileged == ("privileged_state" in env.observation_groups), name
    else:
        env = registry.make(name)
    spec = env.spec
    check_spec(spec)
    assert spec.name == name
    if not (name.startswith("playground/") and task in LOCOMOTION_ENVS) or LONG_TESTS:
        _trace(env)
    model = _mujoco_model(env)
    if name.startswith(("playground/", "brax/")):
        assert model is not None, f"{name}: no MuJoCo model found to step"
    if model is not None:
        data = _step_in_c(model)
        assert data.time > 0 and np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(data.qvel)), name
    if name.startswith(JIT_IN_CI):
        _step_jitted(env)


def _trace(env):
    """Trace the JAX reset and step (every line of the task's Python runs; shapes and dtypes checked)."""
    spec = env.spec
    state = jax.eval_shape(env.reset, jax.random.key(0))
    _check_state(spec, state)
    action = jax.ShapeDtypeStruct((spec.action_size,), jnp.float32)
    _check_state(spec, jax.eval_shape(env.step, state, action))


def _step_host(name, num_steps=5):
    """A host task (dm_control, gymnasium, ManiSkill) through the batch the trainer uses: built, reset, stepped."""
    from diffrl.envs.host import SerialVecEnv
    from diffrl.envs.registry import single_env_factory

    vec = SerialVecEnv(single_env_factory(name), num_envs=2)
    spec = vec.spec
    assert spec.name == name and spec.action_low == (-1.0,) * spec.action_size
    first = vec.reset(seed=0)
    assert first.obs.shape == (2, spec.obs_size) and first.obs.dtype == np.float32
    for _ in range(num_steps):
        out = vec.step(np.random.default_rng(0).uniform(-1, 1, (2, spec.action_size)))
        assert out.reward.shape == (2,) and np.all(np.isfinite(out.obs)) and np.all(np.isfinite(out.reward))
    vec.close()


def _step_jitted(env, num_steps=2):
    spec = env.spec

    @jax.jit
    def run(key):
        state = env.reset(key)
        action = jnp.zeros(spec.action_size) + 0.5 * (jnp.asarray(spec.action_high) + jnp.asarray(spec.action_low))
        for _ in range(num_steps):
            state = env.step(state, action)
        return state

    state = jax.device_get(run(jax.random.key(0)))
    _check_state(spec, state)
    assert np.all(np.isfinite(state.obs)) and np.isfinite(state.reward)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=long_only("compiles an MJX step per task, about 20 min for the catalogue"))
    for n in TASKS if not n.startswith(JIT_IN_CI) and not is_host_env(n)])
def test_listed_task_steps_jitted(name):
    _step_jitted(registry.make(name))


def test_a_build_failure_names_its_cause(monkeypatch):
    """Without the MjSpec shim (diffrl.envs.compat) Reacher fails in Playground's model builder, and the error says so
    (it used to be reported as an invalid config override)."""
    from diffrl.envs import playground

    monkeypatch.setattr(playground, "patch_mjspec_find_body", lambda: False)
    import mujoco

    if hasattr(mujoco.MjSpec, "find_body"):
        monkeypatch.delattr(mujoco.MjSpec, "find_body")
    with pytest.raises(playground.EnvBuildError, match="AttributeError.*find_body") as err:
        registry.make("playground/ReacherEasy")
    assert "config override" not in str(err.value)


def test_reacher_shim_sets_the_target_size():
    """The shim's alias finds the same body: Easy's target is larger than Hard's, as in dm_control."""
    sizes = {}
    for task in ("ReacherEasy", "ReacherHard"):
        env = registry.make(f"playground/{task}")
        model = env.env.mj_model
        import mujoco

        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "target")
        geom = int(np.flatnonzero(model.geom_bodyid == body)[0])
        sizes[task] = float(model.geom_size[geom, 0])
    assert sizes == pytest.approx({"ReacherEasy": 0.05, "ReacherHard": 0.015})
