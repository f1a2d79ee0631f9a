"""A custom environment whose step returns other info keys than reset gets a diffrl error naming
them, before JAX's pytree-structure message."""
import jax
import jax.numpy as jnp
import pytest

from diffrl import envs
from diffrl.config import ConfigError, TrainConfig
from diffrl.core.trainer import Trainer
from diffrl.envs import EnvSpec, EnvState


class Drifting:
    """A 1-D point; ``step`` reports ``info["distance"]``, which ``reset`` forgets (or not)."""

    def __init__(self, neutral_reset_info: bool = False):
        self.spec = EnvSpec(name="user/Drifting", obs_size=1, action_size=1, action_low=(-1.0,),
                            action_high=(1.0,), episode_length=10)
        self.neutral = neutral_reset_info

    def reset(self, key):
        x = jax.random.uniform(key, (1,))
        return EnvState.create(inner=x, obs=x, info={"distance": jnp.float32(0)} if self.neutral else None)

    def step(self, state, action):
        x = state.inner + 0.1 * action
        return EnvState.create(inner=x, obs=x, reward=-jnp.abs(x[0]), info={"distance": jnp.abs(x[0])})


@pytest.fixture(scope="module", autouse=True)
def registered():
    envs.register("user/Drifting", Drifting, overwrite=True)
    envs.register("user/DriftingNeutral", lambda: Drifting(True), overwrite=True)


def config(env):
    return TrainConfig(algo="ppo", env=env, total_env_steps=512, num_envs=16, num_steps=32, num_evals=1,
                       eval_envs=4, progress=False, tensorboard=False)


def test_info_keys_that_differ_are_named():
    with pytest.raises(ConfigError, match=r"user/Drifting: step returns info keys \['distance'\] but reset "
                                          r"returns \[\] \(step adds 'distance'\)"):
        Trainer(config("user/Drifting"))


def test_a_neutral_value_at_reset_is_accepted():
    Trainer(config("user/DriftingNeutral"))  # builds: same structure
