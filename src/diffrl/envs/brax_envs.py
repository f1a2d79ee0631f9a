"""Adapter for Brax environments (Freeman et al., 2021, "Brax -- A Differentiable
Physics Engine for Large Scale Rigid Body Simulation").

``brax.envs.get_environment(name, backend=...)`` without Brax's training wrappers:
``terminated`` is Brax's ``done`` (health/termination conditions only; Brax adds
time-outs in its ``EpisodeWrapper``, which we replace by our ``TimeLimit``).

Backends: ``"generalized"`` (default, as Brax's own env classes), ``"mjx"``,
``"positional"``, ``"spring"``. Only ant, halfcheetah, hopper, humanoid,
inverted_pendulum, inverted_double_pendulum, reacher and walker2d accept all four;
pusher, swimmer and humanoidstandup are generalized-only. With ``positional``/
``spring`` some tasks change timestep and gears, so dynamics differ across backends.

Known hang (measured here with brax 0.14.2): ``halfcheetah`` with ``backend="mjx"``
deadlocks on the first step at N >= 1024 parallel envs on jax/jaxlib 0.10.2 CPU.
Use another backend or N <= 768 on the CPU, and run env tests under a timeout.

Native action bounds are the actuators' ``ctrl_range`` (Brax clips to it), so the
policy's [-1, 1] covers exactly the valid controls.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.envs.base import EnvSpec, EnvState, check_spec
from diffrl.envs.wrappers import strip_weak_types

BRAX_ENVS: tuple[str, ...] = (
    "ant", "halfcheetah", "hopper", "humanoid", "humanoidstandup", "inverted_pendulum",
    "inverted_double_pendulum", "pusher", "reacher", "swimmer", "walker2d",
)
BRAX_BACKENDS: tuple[str, ...] = ("generalized", "mjx", "positional", "spring")
EPISODE_LENGTH = 1000


class BraxEnv:
    """One Brax task behind the :class:`~diffrl.envs.base.Env` protocol.

    Args:
      task: Brax registry name, e.g. ``"ant"``.
      backend: physics pipeline, one of :data:`BRAX_BACKENDS`.
      episode_length: steps until truncation (Brax's training default, 1000).
      **kwargs: passed to the Brax env constructor (e.g. ``exclude_current_positions_from_observation``).

    ``state.inner`` is Brax's ``State`` (its ``metrics`` stay there).
    """

    def __init__(
        self,
        task: str,
        backend: str = "generalized",
        episode_length: int = EPISODE_LENGTH,
        **kwargs,
    ):
        if task not in BRAX_ENVS:
            raise ValueError(f"unknown Brax task {task!r}; supported: {', '.join(BRAX_ENVS)}")
        if backend not in BRAX_BACKENDS:
            raise ValueError(f"unknown Brax backend {backend!r}; one of {BRAX_BACKENDS}")
        from diffrl.envs.quiet_import import import_mjx_quietly

        import_mjx_quietly()
        from brax import envs  # lazy: slow import

        from diffrl.envs.compat import patch_brax_fluid_clip

        patch_brax_fluid_clip()  # swimmer's fluid model; see diffrl.envs.compat
        self.env = envs.get_environment(task, backend=backend, **kwargs)
        self.backend = backend
        n = int(self.env.action_size)
        ctrl_range = np.asarray(self.env.sys.actuator.ctrl_range, np.float64).reshape(n, 2)
        finite = np.all(np.isfinite(ctrl_range), axis=1) & (ctrl_range[:, 1] > ctrl_range[:, 0])
        low = np.where(finite, ctrl_range[:, 0], -1.0)
        high = np.where(finite, ctrl_range[:, 1], 1.0)
        self.spec = EnvSpec(
            name=f"brax/{task}",
            # Brax's ``observation_size`` runs an eager reset (~25 s op by op on the
            # CPU); an abstract evaluation only traces it.
            obs_size=int(jax.eval_shape(self.env.reset, jax.random.PRNGKey(0)).obs.shape[-1]),
            action_size=n,
            action_low=tuple(float(x) for x in low),
            action_high=tuple(float(x) for x in high),
            episode_length=int(episode_length),
        )
        check_spec(self.spec)

    def reset(self, key: jax.Array) -> EnvState:
        inner = strip_weak_types(self.env.reset(key))
        return EnvState.create(
            inner=inner, obs=inner.obs, reward=inner.reward, terminated=inner.done > 0.5
        )

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        inner = strip_weak_types(self.env.step(state.inner, action))
        obs = jnp.asarray(inner.obs, jnp.float32)
        return state.replace(
            inner=inner,
            obs=obs,
            critic_obs=obs,
            final_obs=obs,
            final_critic_obs=obs,
            reward=jnp.asarray(inner.reward, jnp.float32),
            terminated=inner.done > 0.5,
        )
