"""``diffrl bench cost``: wall-clock and memory of the diffusion actors as ratios to REPPO.

The claim it checks (AMDP, arXiv 2606.22630): the adjoint-matching update costs about 1.1x REPPO's
whatever the number of diffusion steps N, whereas backpropagating the reverse-KL actor loss through
the simulated chain (``amdp-backprop``) is reported ~10x slower than AMDP at N=16 and 72-80x at N=128.

For every N of ``--diffusion-steps`` one *group* is timed round-robin in one process: REPPO
(Gaussian, no N; one compiled program re-timed in every group), then TruDi, AMDP and
amdp-backprop at N. Each contender is the training iteration itself (``core.build.build`` +
``core.loop.make_components``, compiled once with the state donated as the trainer does) and,
in its own jit, the algorithm's update alone on one fixed rollout batch. Round-robin timing lets
machine noise hit every contender of a group alike, so ratios within a group are what to read.
What is measured (the request, the contenders, their configs): :mod:`diffrl.commands.bench_cost_plan`;
ratios and tables: :mod:`diffrl.commands.bench_cost_report`.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import os
import sys
import time
from typing import Any

import jax
import numpy as np
import jax.numpy as jnp

from diffrl.commands.bench_cost_plan import SETTINGS, CostRequest, parse_algos, parse_steps, plan
from diffrl.config import ConfigError, RunConfig


def compiled_memory(compiled) -> dict | None:
    """XLA's static memory analysis of a compiled program (CPU and GPU alike)."""
    try:
        m = compiled.memory_analysis()
    except Exception:  # not every backend implements it
        return None
    if m is None:
        return None
    names = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
             "temp_size_in_bytes", "generated_code_size_in_bytes")
    out = {name: int(getattr(m, name)) for name in names if hasattr(m, name)}
    out["peak_estimate_bytes"] = (out.get("argument_size_in_bytes", 0) + out.get("output_size_in_bytes", 0)
                                  - out.get("alias_size_in_bytes", 0) + out.get("temp_size_in_bytes", 0))
    return out


def device_peak_bytes() -> int | None:
    """The device allocator's process-wide high-water mark (GPU/TPU); None where unsupported (CPU)."""
    try:
        stats = jax.local_devices()[0].memory_stats()
    except Exception:
        return None
    return None if not stats else stats.get("peak_bytes_in_use")


def error_text(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0][:300]
    kind = "out_of_memory" if isinstance(e, MemoryError) or "RESOURCE_EXHAUSTED" in str(e) else "error"
    return f"{kind}: {type(e).__name__}: {first}"


class Contender:
    """One (algo, N): its compiled iteration and update, and what was measured."""

    def __init__(self, algo: str, n: int | None, config: RunConfig):
        self.algo, self.n, self.config = algo, n, config
        self.info: dict[str, Any] = {"algo": algo, "diffusion_steps": n, "status": "pending", "error": None,
                                     "compile_s": {}, "memory": {}}
        self._iteration = self._update = None

    @property
    def ok(self) -> bool:
        return self.info["status"] == "ok"

    def fail(self, e: BaseException) -> None:
        self.info["status"], self.info["error"] = "failed", error_text(e)
        self._iteration = self._update = None
        gc.collect()

    def prepare(self, memory_only: bool = False) -> None:
        from diffrl.core.build import build
        from diffrl.core.loop import make_components

        if memory_only:
            return self._prepare_memory_only()
        try:
            env, algo, _ = build(self.config)
            comps = make_components(self.config, env, algo)
            key_init, key_rollout, key_update = jax.random.split(jax.random.PRNGKey(self.config.seed), 3)
            t0 = time.perf_counter()
            state = jax.block_until_ready(jax.jit(comps.init)(key_init))
            _, batch, _, _ = jax.block_until_ready(jax.jit(comps.rollout)(state, key_rollout))
            algo_state = jax.tree_util.tree_map(jnp.copy, state.algo)  # the iteration donates `state`
            t1 = time.perf_counter()
            iteration = jax.jit(comps.iteration, donate_argnums=0).lower(state).compile()
            t2 = time.perf_counter()
            update = jax.jit(algo.update).lower(algo_state, batch, key_update).compile()
            t3 = time.perf_counter()
        except Exception as e:  # a contender that cannot compile (or OOMs) is recorded, the rest run
            self.fail(e)
            return
        self.info["compile_s"] = {"init_and_batch": t1 - t0, "iteration": t2 - t1, "update": t3 - t2}
        self.info["memory"] = {"iteration_compiled": compiled_memory(iteration),
                               "update_compiled": compiled_memory(update), "device_peak_bytes_in_use": None}
        self.info["status"] = "ok"
        holder = {"state": state}

        def run_iteration():
            holder["state"], metrics = iteration(holder["state"])
            jax.block_until_ready((holder["state"], metrics))

        self._iteration = run_iteration
        self._update = lambda: jax.block_until_ready(update(algo_state, batch, key_update))

    def _prepare_memory_only(self) -> None:
        """Lower and compile the iteration and the update from abstract shapes (jax.eval_shape):
        XLA's memory analysis without allocating or running anything."""
        from diffrl.core.build import build
        from diffrl.core.loop import make_components

        try:
            env, algo, _ = build(self.config)
            comps = make_components(self.config, env, algo)
            key_init, key_rollout, key_update = jax.random.split(jax.random.PRNGKey(self.config.seed), 3)
            state = jax.eval_shape(comps.init, key_init)
            _, batch, _, _ = jax.eval_shape(comps.rollout, state, key_rollout)
            t0 = time.perf_counter()
            iteration = jax.jit(comps.iteration, donate_argnums=0).lower(state).compile()
            t1 = time.perf_counter()
            update = jax.jit(algo.update).lower(state.algo, batch, key_update).compile()
            t2 = time.perf_counter()
        except Exception as e:
            self.fail(e)
            return
        params = getattr(state.algo, "actor_params", None) or getattr(state.algo, "policy_params", None)
        self.info["policy_parameters"] = int(sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params)))
        self.info["compile_s"] = {"init_and_batch": 0.0, "iteration": t1 - t0, "update": t2 - t1}
        self.info["memory"] = {"iteration_compiled": compiled_memory(iteration),
                               "update_compiled": compiled_memory(update), "device_peak_bytes_in_use": None}
        self.info["status"] = "ok"
        del iteration, update
        gc.collect()

    def call(self, timings: dict | None) -> None:
        """One iteration and one update; appended to ``timings`` unless it is a warm-up."""
        if not self.ok:
            return
        try:
            for program, fn in (("iteration", self._iteration), ("update", self._update)):
                t0 = time.perf_counter()
                fn()
                if timings is not None:
                    timings[program].append(time.perf_counter() - t0)
        except Exception as e:
            self.fail(e)
        peak = device_peak_bytes()
        if peak is not None:
            self.info["memory"]["device_peak_bytes_in_use"] = peak


def _log(msg: str) -> None:
    print(f"[bench cost] {msg}", file=sys.stderr, flush=True)


def run_group(n: int, contenders: list[Contender], request: CostRequest) -> list[dict]:
    """Round-robin timing of one group; one result row per contender."""
    for c in contenders:
        if c.info["status"] == "pending":
            _log(f"N={n}: compiling {c.algo}")
            c.prepare(request.memory_only)
            if not c.ok:
                _log(f"N={n}: {c.algo} {c.info['error']}")
    timings = {id(c): {"iteration": [], "update": []} for c in contenders}
    for _ in range(0 if request.memory_only else request.warmup):
        for c in contenders:
            c.call(None)
    for r in range(0 if request.memory_only else request.repeats):
        for c in contenders:
            t = timings[id(c)]
            if r == 0 or sum(t["iteration"]) + sum(t["update"]) < request.budget_s:
                c.call(t)
        _log(f"N={n}: repeat {r + 1}/{request.repeats} done")
    rows = []
    for c in contenders:
        t = timings[id(c)]
        row = {**copy.deepcopy(c.info), "diffusion_steps": n, "uses_diffusion_steps": c.n is not None,
               "iteration_s": t["iteration"], "update_s": t["update"],
               "stopped_early": c.ok and not request.memory_only and len(t["iteration"]) < request.repeats}
        rows.append(row)
    return rows


def machine() -> dict:
    dev = jax.devices()[0]
    return {"cpu_count": os.cpu_count(), "jax_backend": jax.default_backend(), "device_kind": dev.device_kind,
            "devices": [str(d) for d in jax.devices()]}


def run(request: CostRequest, configs: dict, command: str, on_group=None) -> dict:
    """Measure every group; ``on_group(record)`` sees the record after each (partial results)."""
    from diffrl.commands.bench_cost_report import with_summaries
    from diffrl.plumbing.machine import git_commit, library_versions
    from diffrl.plumbing.records import config_to_json as config_to_dict

    record = {
        "schema": "diffrl.commands.bench_cost/1", "command": command, "versions": library_versions(),
        "git_commit": git_commit(), "machine": machine(), "request": dataclasses.asdict(request),
        "baseline": request.baseline,
        "batch": {"num_envs": configs[(request.baseline, None)].num_envs,
                  "num_steps": configs[(request.baseline, None)].num_steps},
        "configs": {f"{a}" if n is None else f"{a}@N={n}": config_to_dict(c) for (a, n), c in configs.items()},
        "units": {
            "iteration_s, update_s": "raw seconds per call, after compile and warm-up, block_until_ready",
            "rollout_s": "iteration median/min minus update median/min: acting + normaliser updates",
            "memory.*_compiled": "XLA memory_analysis of the compiled program (static, per call): "
                                 "peak_estimate_bytes = argument + output - alias + temp",
            "memory.device_peak_bytes_in_use": "device allocator high-water mark of the whole process so "
                                               "far (GPU/TPU only; None on CPU); monotone across contenders",
            "ratios": "numerator/denominator of medians (and mins) within one group",
        },
        "results": [], "skipped_groups": [],
    }
    baseline = Contender(request.baseline, None, configs[(request.baseline, None)])
    start = time.perf_counter()
    for n in request.diffusion_steps:
        elapsed_min = (time.perf_counter() - start) / 60
        if request.time_limit_min is not None and record["results"] and elapsed_min > request.time_limit_min:
            _log(f"N={n}: skipped, {elapsed_min:.1f} min > --time-limit-min {request.time_limit_min}")
            record["skipped_groups"].append({"diffusion_steps": n, "reason": f"--time-limit-min "
                                             f"{request.time_limit_min} reached after {elapsed_min:.1f} min"})
            record = with_summaries(record)
            if on_group is not None:
                on_group(record)
            continue
        group = [baseline] + [Contender(a, n, configs[(a, n)]) for a in request.algos if a != request.baseline]
        record["results"].extend(run_group(n, group, request))
        del group
        gc.collect()
        record = with_summaries(record)
        if on_group is not None:
            on_group(record)
    return record


class _HelpFormat(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and every flag's default."""


def parse_args(argv: list[str]) -> tuple[CostRequest, str | None]:
    p = argparse.ArgumentParser(prog="diffrl bench cost", description=__doc__, formatter_class=_HelpFormat)
    p.add_argument("--env", required=True, help="environment of every contender")
    p.add_argument("--setting", default="on-policy", choices=tuple(SETTINGS),
                   help="on-policy: REPPO the baseline; off-policy: the replay-buffer algorithms, SAC the baseline "
                        "(each timed update is utd x batch gradient steps on minibatches from the buffer)")
    p.add_argument("--algos", default=None, help="comma list of reppo, trudi, amdp, amdp-backprop, dime, dppo, "
                   "ppo, spo, fpo (on-policy; default reppo,trudi,amdp,amdp-backprop) or sac, dime-off, amdp-off "
                   "(off-policy; default all three); the setting's baseline is always measured")
    p.add_argument("--diffusion-steps", default="4,8,16,32,64,128", help="comma list of N (one group each)")
    p.add_argument("--num-envs", type=int, default=None, help="parallel envs (default: the presets')")
    p.add_argument("--num-steps", type=int, default=None, help="rollout length (default: the presets')")
    p.add_argument("--preset", default=None, help="preset family, e.g. dmc-cpu: contender A uses A-<family>")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every contender, e.g. --set reppo.num_epochs=2 (repeatable)")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per contender and program")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls after compiling")
    p.add_argument("--budget-s", type=float, default=120.0,
                   help="stop repeating a contender once its timed calls in a group reach this many seconds")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial states and the fixed rollout batch")
    p.add_argument("--time-limit-min", type=float, default=None,
                   help="start no new group (N) after this many minutes; skipped N are recorded")
    p.add_argument("--memory-only", action="store_true",
                   help="compile from shapes and record XLA's memory analysis only; nothing is allocated or "
                        "run, so policies far beyond this machine's memory can be sized")
    p.add_argument("--json", default=None, help="write the record here and the table to the same name .md")
    args = p.parse_args(argv)
    if args.num_envs is not None and args.num_envs < 1 or args.num_steps is not None and args.num_steps < 1:
        raise ConfigError("--num-envs and --num-steps must be >= 1")
    algos = args.algos if args.algos is not None else ",".join(SETTINGS[args.setting][1])
    request = CostRequest(env=args.env, algos=parse_algos(algos, args.setting), setting=args.setting,
                          diffusion_steps=parse_steps(args.diffusion_steps), num_envs=args.num_envs,
                          num_steps=args.num_steps, preset=args.preset, overrides=tuple(args.overrides),
                          repeats=args.repeats, warmup=args.warmup, budget_s=args.budget_s, seed=args.seed,
                          time_limit_min=args.time_limit_min, memory_only=args.memory_only)
    return request, args.json


def main(argv: list[str]) -> int:
    from pathlib import Path

    from diffrl.commands.bench_cost_report import markdown
    from diffrl.plumbing.records import atomic_write_json

    try:
        request, json_path = parse_args(argv)
        configs = plan(request)
    except (ConfigError, ValueError) as e:  # ValueError: a nested config refused a --set value
        print(f"diffrl bench cost: {e}", file=sys.stderr)
        return 2

    def save(record: dict) -> None:
        if json_path:
            path = Path(json_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, record)
            path.with_suffix(".md").write_text(markdown(record))

    command = "diffrl bench cost " + " ".join(argv)
    _log(f"{len(configs)} contenders on {request.env}, N in {list(request.diffusion_steps)}")
    record = run(request, configs, command, on_group=save)
    save(record)
    print(markdown(record))
    return 0
