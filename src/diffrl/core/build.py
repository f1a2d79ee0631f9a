"""Turn a validated config into (training env, algorithm, evaluation env)."""
from __future__ import annotations

from typing import Any

from diffrl.config import ConfigError, TrainConfig


def make_base_env(config: TrainConfig):
    """The unbatched, unwrapped environment named by ``config.env``."""
    from diffrl.envs import registry

    kwargs: dict[str, Any] = {}
    if config.env.startswith("brax/"):
        kwargs["backend"] = config.env_backend
    try:
        return registry.make(config.env, **kwargs)
    except ValueError as e:  # unknown names come with close matches
        raise ConfigError(str(e)) from None


def make_algorithm(config: TrainConfig, spec):
    from diffrl.algos import ALGORITHMS, close_matches

    if config.algo not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {config.algo!r}; {close_matches(config.algo)}")
    return ALGORITHMS[config.algo](config, spec)


def build(config: TrainConfig):
    """Validate, then build. Returns (train_env, algo, eval_env), both envs batched."""
    from diffrl.core.evaluate import wrap_for_eval
    from diffrl.envs.wrappers import wrap

    config.validate()
    base = make_base_env(config)
    episode_length = config.episode_length or base.spec.episode_length
    env = wrap(base, episode_length=episode_length)
    eval_env = wrap_for_eval(base, episode_length=episode_length)
    algo = make_algorithm(config, env.spec)
    for sampler in config.eval_samplers:
        if sampler not in algo.samplers:
            raise ConfigError(f"--eval-samplers: {sampler!r} is not offered by {config.algo} "
                              f"(available: {', '.join(algo.samplers)})")
    return env, algo, eval_env
