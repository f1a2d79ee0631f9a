"""One interface for stepping a run's environments, whether JAX steps them or the host does.

A JAX environment is rolled out inside the compiled chunk (``diffrl.core.loop``); a host
environment (dm_control, ManiSkill, gymnasium: ``diffrl.core.host_loop``) is stepped by Python
between compiled calls. Everything above this file (the trainer's loop, ``diffrl eval``,
``diffrl export``, ``diffrl actions``) sees only a :class:`Stepper`, so it never asks which kind
of environment it has:

* ``start(keys, mesh)``: the first train state and the functions that advance and evaluate it,
  compiled (JAX) or with the simulators started (host): a :class:`Started`;
* ``template(keys)``: a train state of the right shapes to restore a checkpoint into, without
  starting any simulator;
* ``state_shape(keys)``: the train state's shapes, known before compiling (JAX) or None where only
  the simulators can tell (host: checked when the checkpoint is restored instead);
* ``evaluate(algo_state, obs_stats, critic_stats, keys, sampler)``: one evaluation of every seed,
  ``{metric: (num_seeds,)}``;
* ``close()``: stop whatever ``start`` or ``evaluate`` started (simulator workers).

Every argument and result has the leading ``num_seeds`` axis.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from diffrl.core.loop import Components, TrainState, state_shardings


def replicated(x, mesh: Mesh) -> jax.Array:
    """A host value as a global array replicated on every device of ``mesh``."""
    return jax.device_put(np.asarray(x), NamedSharding(mesh, P()))


@dataclass(frozen=True)
class Started:
    """What :meth:`Stepper.start` returns: the first state and how to advance and evaluate it."""

    state: TrainState
    chunk: Callable[[TrainState], tuple[TrainState, dict]]
    """``chunk(state) -> (state, {metric: (num_seeds, iterations_per_chunk)})``."""
    evaluate: Callable[..., dict]
    shardings: Any
    """The train state's shardings over the mesh: where a restored checkpoint is put."""
    compile_times: dict[str, float]


class Stepper(Protocol):
    def start(self, keys: jax.Array, mesh: Mesh) -> Started: ...

    def template(self, keys: jax.Array) -> TrainState: ...

    def state_shape(self, keys: jax.Array) -> Any | None: ...

    def evaluate(self, algo_state, obs_stats, critic_stats, keys: jax.Array, sampler: str) -> dict: ...

    def close(self) -> None: ...


class JaxStepper:
    """A JAX environment: the chunk and the evaluation are compiled programs over every seed.

    Each program goes through ``diffrl.plumbing.program_cache``: with ``identity`` (the run's, from
    ``program_identity``) a second start of the same configuration reads the traced programs back
    instead of tracing them, and JAX's compilation cache holds their executables."""

    def __init__(self, components: Components, evaluate_one: Callable[..., dict], identity: dict | None = None):
        self.components = components
        self.evaluate_one = evaluate_one
        self.identity = identity
        self._evaluations: dict[str, Callable] = {}  # per sampler, compiled on its first call

    def start(self, keys: jax.Array, mesh: Mesh) -> Started:
        from diffrl.plumbing.program_cache import compiled_program

        replicate = NamedSharding(mesh, P())
        t0 = time.perf_counter()
        keys = replicated(keys, mesh)
        init, init_read = compiled_program("init", jax.vmap(self.components.init), (keys,), identity=self.identity,
                                           out_shardings=lambda state: state_shardings(state, mesh, True))
        state = init(keys)
        jax.block_until_ready(state)
        shardings = state_shardings(state, mesh, True)
        t_init = time.perf_counter() - t0
        t0 = time.perf_counter()
        chunk, chunk_read = compiled_program(
            "chunk", jax.vmap(self.components.chunk), (state,), identity=self.identity, donate_argnums=(0,),
            out_shardings=lambda out: (state_shardings(out[0], mesh, True), jax.tree.map(lambda _: replicate, out[1])))
        t_chunk = time.perf_counter() - t0
        return Started(state, chunk, self.evaluate, shardings,
                       {"compile/init_s": t_init, "compile/chunk_s": t_chunk,
                        "compile/programs_read": int(init_read) + int(chunk_read)})

    def template(self, keys: jax.Array) -> TrainState:
        return jax.jit(jax.vmap(self.components.init))(keys)

    def state_shape(self, keys: jax.Array) -> Any:
        """Shapes as a checkpoint stores them: PRNG keys as their raw key data."""
        def init_as_data(k):
            state = jax.vmap(self.components.init)(k)
            return jax.tree.map(lambda x: jax.random.key_data(x)
                                if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x, state)

        return jax.eval_shape(init_as_data, keys)

    def evaluate(self, algo_state, obs_stats, critic_stats, keys: jax.Array, sampler: str) -> dict:
        args = (algo_state, obs_stats, critic_stats, keys)
        if sampler not in self._evaluations:
            from diffrl.plumbing.program_cache import compiled_program

            def evaluate_all(algo_state, obs_stats, critic_stats, keys):
                return jax.vmap(lambda *a: self.evaluate_one(*a, sampler))(algo_state, obs_stats, critic_stats, keys)

            self._evaluations[sampler], _ = compiled_program(f"evaluate[{sampler}]", evaluate_all, args,
                                                             identity=self.identity)
        return self._evaluations[sampler](*args)

    def close(self) -> None:
        """Nothing runs outside the compiled programs."""
