"""Environments: the :class:`Env` interface, wrappers, adapters and a name registry.

Typical use::

    from diffrl import envs
    env = envs.wrap(envs.make("playground/CartpoleSwingup"))  # batched, actions in [-1, 1]
    state = env.reset(jax.random.split(key, num_envs))
    state = env.step(state, actions)

Simulator libraries (Playground, Brax, gymnax) are imported only when an env of
theirs is made. Simulators stepped outside JAX are added with :func:`register_host`.
"""
from diffrl.envs.base import Env, EnvSpec, EnvState, check_spec
from diffrl.envs.registry import describe, list_envs, make, register, register_host, unregister, unregister_host
from diffrl.envs.wrappers import (
    AutoReset,
    EpisodeStats,
    RescaleAction,
    TimeLimit,
    VmapWrapper,
    Wrapper,
    randomize_step_counters,
    strip_weak_types,
    wrap,
)

__all__ = [
    "Env", "EnvSpec", "EnvState", "check_spec",
    "describe", "list_envs", "make", "register", "unregister", "register_host", "unregister_host",
    "AutoReset", "EpisodeStats", "RescaleAction", "TimeLimit", "VmapWrapper", "Wrapper",
    "randomize_step_counters", "strip_weak_types", "wrap",
]
