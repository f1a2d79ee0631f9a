"""The composition root: ``build_run(config) -> Run``, every piece of a run built in one place.

Training (``diffrl.core.trainer``), the commands that use a run directory (``diffrl eval``,
``diffrl export``, ``diffrl actions``: :func:`restore_run`) and the benchmark drivers all start
from a :class:`Run`; none of them builds an environment, an algorithm or a stepping loop itself.
The one choice between an environment JAX steps and one the host steps is made here, in
:func:`build_run`; the rest of the code sees the :class:`~diffrl.core.stepping.Stepper` interface.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from diffrl.config import RunConfig, as_run_config
from diffrl.core.build import build
from diffrl.core.stepping import Stepper


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    """The run's per-seed keys: seed ``i`` trains from ``fold_in(PRNGKey(seed), i)``."""
    base = jax.random.PRNGKey(seed)
    return jnp.stack([jax.random.fold_in(base, i) for i in range(num_seeds)])


@dataclass(frozen=True)
class Run:
    """Everything one configuration trains and evaluates with; building it compiles nothing."""

    config: RunConfig
    env: Any
    """The batched training environment (a host environment: its ``HostEnvMaker``)."""
    eval_env: Any
    """The batched evaluation environment (no auto-reset); ``eval_env.unwrapped.spec`` is the task's."""
    algo: Any
    stepper: Stepper

    @property
    def policy(self):
        return self.algo.policy

    @property
    def samplers(self) -> tuple[str, ...]:
        """The samplers training evaluates: ``--eval-samplers``, else the algorithm's first."""
        return tuple(self.config.eval_samplers) or (self.algo.samplers[0],)

    @property
    def action_bounds(self) -> dict[str, list]:
        """The task's native action range, stored with an exported policy."""
        spec = self.eval_env.unwrapped.spec
        return {"action_low": list(spec.action_low), "action_high": list(spec.action_high)}

    def keys(self) -> jax.Array:
        return seed_keys(self.config.seed, self.config.num_seeds)


def _stepper(config: RunConfig, env, eval_env, actor, train: bool) -> Stepper:
    """The one choice between an environment JAX steps and one the host steps. ``train``: the stepper
    also trains ``actor`` (the run's algorithm) on ``env``; otherwise it only evaluates ``actor``."""
    from diffrl.envs.registry import is_host_env

    if is_host_env(config.env):  # stepped outside JAX: the simulators live in worker processes
        from diffrl.core.host_loop import HostStepper

        return HostStepper(config, env, actor)
    from diffrl.core.evaluate import make_evaluate
    from diffrl.core.loop import make_components
    from diffrl.core.stepping import JaxStepper

    from diffrl.plumbing.program_cache import program_identity

    if not train:
        return JaxStepper(None, make_evaluate(config, eval_env, actor))
    return JaxStepper(make_components(config, env, actor), make_evaluate(config, eval_env, actor),
                      identity=program_identity(config))


def evaluation_stepper(config: RunConfig, actor, eval_env) -> Stepper:
    """A :class:`~diffrl.core.stepping.Stepper` that only evaluates: ``actor`` (any object with the
    algorithm's ``eval_action(state, obs, critic_obs, key, sampler)``, e.g. a baseline of uniformly
    random actions) on ``eval_env`` (the third of :func:`~diffrl.core.build.build`'s results), stepped
    by JAX or by the host as :func:`build_run` chooses. Its ``evaluate`` takes ``algo_state`` None-able
    and every argument with the leading seeds axis; ``start`` and ``template`` are not for it."""
    return _stepper(config, eval_env, eval_env, actor, train=False)


def build_run(config: RunConfig, eval_env=None) -> Run:
    """Validate ``config`` and build its run. ``eval_env`` replaces the evaluation environment
    (a JAX one, batched without auto-reset: ``diffrl.core.evaluate.wrap_for_eval``). A
    :class:`~diffrl.config.TrainConfig` is turned into its algorithm's run config first
    (:func:`~diffrl.config.as_run_config`), which the run holds."""
    config = as_run_config(config)
    env, algo, built_eval_env = build(config)
    eval_env = built_eval_env if eval_env is None else eval_env
    stepper = _stepper(config, env, eval_env, algo, train=True)
    return Run(config=config, env=env, eval_env=eval_env, algo=algo, stepper=stepper)


def restore_run(config: RunConfig, path: str | Path) -> tuple[Run, Any, dict]:
    """(run, restored train state, metadata) of the checkpoint ``path`` of a run trained with
    ``config``; every leaf of the state has a seeds axis. Starts no simulator.

    Raises :class:`~diffrl.plumbing.checkpoint.CheckpointError` for a checkpoint of another algorithm,
    environment or state shape."""
    from diffrl.plumbing.checkpoint import read_metadata, restore_checkpoint

    meta = read_metadata(path)
    # Built with the chunk size of the run that wrote the checkpoint, as that run was.
    config = replace(config, chunk_iterations=meta.get("chunk_iterations"))
    run = build_run(config)
    target = run.stepper.template(run.keys())
    state = restore_checkpoint(path, target, expected_algo=config.algo, expected_env=config.env)
    return run, state, meta
