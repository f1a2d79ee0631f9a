"""MuJoCo Playground adapter: one DM Control task wrapped, batched and jitted on the CPU.

Kept apart from tests/test_env_adapters.py because one Playground compile (reset,
and step with the auto-reset's reset inside) costs ~20 s of CPU.
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.envs import make
from diffrl.envs.playground import _split_obs
from test_env_adapters import check_batch, run_wrapped


@pytest.mark.timeout(300)
def test_playground_cartpole_balance():
    env = make("playground/CartpoleBalance")
    spec = env.spec
    assert (spec.obs_size, spec.action_size, spec.episode_length) == (5, 1, 1000)
    assert spec.action_low == (-1.0,) and spec.action_high == (1.0,)
    wrapped, first, traj = run_wrapped(env, num_envs=4, num_steps=8)
    check_batch(wrapped.spec, first, traj, 4, 8)
    assert np.all((traj.reward >= 0.0) & (traj.reward <= 1.0))  # DMC rewards are in [0, 1]
    assert not traj.terminated.any() and not traj.truncated.any()
    assert np.all(traj.step_count[-1] == 8)
    # Different reset keys give different initial states.
    assert len(np.unique(first.obs[:, 0])) == 4


def test_playground_observation_split():
    obs = {"state": jnp.ones(3), "privileged_state": jnp.zeros(5)}
    actor, critic = _split_obs(obs, asymmetric=True)
    assert actor.shape == (3,) and critic.shape == (5,)
    actor, critic = _split_obs(obs, asymmetric=False)
    assert critic.shape == (3,)
    actor, critic = _split_obs(jnp.arange(4), asymmetric=False)
    assert actor.dtype == jnp.float32 and critic.shape == (4,)


def test_unsupported_tasks_fail_clearly():
    from diffrl.envs.playground import PlaygroundEnv

    with pytest.raises(ValueError, match="manipulation task"):
        PlaygroundEnv("PandaPickCube")
    with pytest.raises(ValueError, match="CartpoleSwingup"):
        PlaygroundEnv("NoSuchTask")
    with pytest.raises(ValueError, match="physics_impl"):
        PlaygroundEnv("CartpoleSwingup", physics_impl="cuda")


def test_building_a_playground_env_prints_no_warp_notices():
    """mujoco.mjx prints 'Failed to import warp' when NVIDIA Warp is absent (diffrl never uses
    it); diffrl imports it with those two notices filtered (diffrl.envs.quiet_import)."""
    import subprocess
    import sys

    code = "from diffrl.envs import make; make('playground/CartpoleBalance'); print('built')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "built" in result.stdout
    assert "Failed to import" not in result.stdout + result.stderr
