"""Turn a validated config into (training env, algorithm, evaluation env)."""
from __future__ import annotations

from typing import Any

from diffrl.config import ConfigError, RunConfig


def env_kwargs(config: RunConfig) -> dict[str, Any]:
    """Constructor arguments the config gives the env named by ``config.env`` (also used
    to rebuild it for videos): the brax backend, Playground's physics implementation and
    task config overrides, and the asymmetric critic observation."""
    kwargs: dict[str, Any] = {}
    if config.env.startswith("brax/"):
        kwargs["backend"] = config.env_backend
    if config.env.startswith("playground/"):
        kwargs["physics_impl"] = config.physics_impl
        if config.env_overrides:
            kwargs["config_overrides"] = config.env_config_overrides
        if config.asymmetric_critic:
            kwargs["asymmetric"] = True
    return kwargs


def make_base_env(config: RunConfig):
    """The unbatched, unwrapped environment named by ``config.env``.

    With ``asymmetric_critic`` the env must provide a separate critic observation
    (``spec.critic_obs_size``); Playground envs get ``asymmetric=True`` and refuse it
    themselves when the task has no privileged observation.
    """
    from diffrl.envs import registry

    try:
        env = registry.make(config.env, **env_kwargs(config))
    except ValueError as e:  # unknown names come with close matches; missing assets say which
        raise ConfigError(str(e)) from None
    if config.asymmetric_critic and env.spec.critic_obs_size is None:
        raise ConfigError(f"--asymmetric-critic: {config.env} has no privileged critic observation "
                          "(spec.critic_obs_size is None); drop --asymmetric-critic")
    return env


def check_state_structure(env, name: str) -> None:
    """Refuse an environment whose ``step`` returns an ``info`` dict with other keys than
    ``reset``'s, naming the keys.

    The wrappers select between a stepped and a reset state with one pytree operation, which
    needs both to have the same structure; otherwise JAX stops deep inside tracing with a
    pytree-structure message that names neither the environment nor the keys. Only
    environments defined outside diffrl are checked (the built-in ones are tested), so the
    check costs the built-in tasks nothing."""
    import jax
    import jax.numpy as jnp

    if type(env).__module__.startswith("diffrl."):
        return
    try:
        state = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
        stepped = jax.eval_shape(env.step, state, jax.ShapeDtypeStruct((env.spec.action_size,), jnp.float32))
        reset_keys, step_keys = set(state.info), set(stepped.info)
    except Exception:  # the environment's own errors surface where they happen, unchanged
        return
    if reset_keys != step_keys:
        only_step, only_reset = sorted(step_keys - reset_keys), sorted(reset_keys - step_keys)
        parts = ([f"step adds {', '.join(map(repr, only_step))}"] if only_step else []) + \
                ([f"step drops {', '.join(map(repr, only_reset))}"] if only_reset else [])
        raise ConfigError(f"{name}: step returns info keys {sorted(step_keys)} but reset returns "
                          f"{sorted(reset_keys)} ({'; '.join(parts)}); every info key must be present in "
                          "both, with the same shape (reset can return a neutral value)")


def make_algorithm(config: RunConfig, spec):
    from diffrl.algos.registry import UnknownAlgorithm, get

    try:
        build_algorithm = get(config.algo).build
    except UnknownAlgorithm as e:
        raise ConfigError(str(e)) from None
    try:
        return build_algorithm(config, spec)
    except ValueError as e:  # an algorithm refusing a combination of settings (before compiling)
        raise ConfigError(f"--algo {config.algo}: {e}") from None


def build(config: RunConfig):
    """Validate, then build. Returns (train_env, algo, eval_env), both envs batched; for a host
    environment (``dmc/``) both are one :class:`~diffrl.envs.host_registry.HostEnvMaker`."""
    from diffrl.core.evaluate import wrap_for_eval
    from diffrl.envs.wrappers import wrap

    config.validate()
    base = make_base_env(config)
    episode_length = config.episode_length or base.spec.episode_length
    from diffrl.envs.host_registry import host_env_maker
    from diffrl.envs.registry import is_host_env

    if is_host_env(config.env):  # stepped outside JAX: batches are built by diffrl.core.host_loop
        try:
            env = host_env_maker(config.env, base.spec, episode_length, config.host_workers, _maniskill_backend(config))
        except ValueError as e:  # a registered make_env that worker processes cannot receive
            raise ConfigError(str(e)) from None
        algo = make_algorithm(config, env.spec)
        _check_samplers(config, algo)
        return env, algo, env
    check_state_structure(base, config.env)
    env = wrap(base, episode_length=episode_length)
    eval_env = wrap_for_eval(base, episode_length=episode_length)
    algo = make_algorithm(config, env.spec)
    _check_samplers(config, algo)
    return env, algo, eval_env


def _maniskill_backend(config: RunConfig) -> str:
    """--maniskill-backend resolved for this machine and run (``workers`` for other envs)."""
    if not config.env.startswith("maniskill/"):
        return "workers"
    import jax

    from diffrl.envs.maniskill_batch import resolve_backend

    try:
        return resolve_backend(config.maniskill_backend, config.num_devices or jax.local_device_count())
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _check_samplers(config: RunConfig, algo) -> None:
    from diffrl.policies.base import renamed_sampler_note

    for sampler in config.eval_samplers:
        if sampler not in algo.samplers:
            raise ConfigError(f"--eval-samplers: {sampler!r} is not offered by {config.algo} "
                              f"(available: {', '.join(algo.samplers)})"
                              + renamed_sampler_note([sampler], algo.policy))
