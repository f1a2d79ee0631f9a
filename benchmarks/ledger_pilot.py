"""The ledger's pilot: how long a cell takes on one core, and what uniform random actions score.

For every task, REPPO (matrix 1's preset for it, 5 seeds) trains two short chunks; on a few
reference tasks every other matrix-1 algorithm does too. Each measurement records the compile
time (initialisation, the training chunk and the first evaluation), the seconds per training
iteration and the seconds per evaluation (every sampler). ``ledger.Estimator`` turns these into
a cell's estimate: an algorithm's cost on a task it was not piloted on is REPPO's on that task
times the algorithm's ratio to REPPO on the reference task nearest in REPPO's cost.

``core_speedups`` (``ledger.py cores``) measures what a second core buys: the same measurement of
every matrix-1 algorithm on the reference tasks, side by side on one core with single-threaded XLA
(as the cells run) and on two cores with XLA's own threads (as ``diffrl train`` runs on a 2-core
machine). The expected-results table scales each run's one-core wall-clock by the speedup of its
algorithm on the reference task nearest in REPPO's cost, to the wall-clock on 2 CPU cores.

The random return (the normalisation's zero) is the mean return of uniform random actions over
64 evaluation episodes, through the same evaluation code (``stability.random_return``).

Measurements are appended to ``pilot.json`` as they finish (a stopped pilot continues where it
stopped); single-threaded XLA, as the ledger's cells run.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import ledger_plan

PILOT_CHUNK_STEPS = 2048
"""Env steps per seed in each of the two pilot chunks (2 REPPO iterations; PPO's one iteration is
8192): the contact-rich tasks simulate at about 160 env steps/s on one core (CheetahRun, 5 x 32
envs), so a longer pilot costs minutes per task, and the per-iteration time is steady from the
first chunk on (measured: 8 iterations per chunk gave chunks within 1 % of each other)."""
RANDOM_EPISODES = 64
EVAL_ENVS = {task: 64 for task in ledger_plan.M3_TASKS}
"""Episodes per evaluation in the pilot: the plan's cells' (16 on DM Control, 64 on the toy tasks)."""


def _measure(algo: str, task: str, scratch: Path) -> dict:
    from diffrl.core.trainer import Trainer
    from ledger_cell import cell_config

    batch = _batch(algo, task)
    steps = 2 * max(batch, PILOT_CHUNK_STEPS // batch * batch)
    cell = ledger_plan.Cell("pilot", algo, algo, task, env_steps=steps, base_seed=0,
                            num_seeds=ledger_plan.M1_SEEDS, num_evals=2, eval_envs=EVAL_ENVS.get(task, 16))
    config = cell_config(cell, scratch)
    if Path(config.out).exists():
        import shutil

        shutil.rmtree(config.out)
    summary = Trainer(config).run()
    iterations = config.num_chunks * config.iterations_per_chunk
    return {
        "algo": algo, "task": task, "preset": config.preset, "num_seeds": config.num_seeds,
        "batch_size": config.batch_size, "iterations": iterations, "eval_envs": config.eval_envs,
        "chunk_steps": config.iterations_per_chunk * config.batch_size,
        "compile_s": round(sum(float(summary[k]) for k in ("compile/init_s", "compile/chunk_s",
                                                            "compile/eval_first_call_s")), 2),
        "s_per_iteration": round(float(summary["train_time_s"]) / iterations, 4),
        "eval_s": round((float(summary["walltime_s"]) - float(summary["train_time_s"])) / config.num_chunks, 3),
    }


def _batch(algo: str, task: str) -> int:
    from diffrl.config.presets import resolve

    config = resolve(algo, task, None)
    return config.num_envs * config.num_steps


def pilot_jobs(tasks: list[str], reference_tasks: list[str]) -> list[tuple[str, str]]:
    """(algo, full task name) to measure: REPPO on every matrix-1 task, the other matrix-1
    algorithms on the reference tasks, the matrix-2 algorithms outside matrix 1 on matrix 2's
    tasks, and every matrix-3 (algorithm, task)."""
    jobs = [("reppo", f"playground/{t}") for t in tasks]
    jobs += [(a, f"playground/{t}") for a in ledger_plan.M1_ALGOS if a != "reppo" for t in reference_tasks]
    jobs += [(a, f"playground/{t}") for t in ledger_plan.M2_TASKS
             for a in dict.fromkeys(algo for _, algo, _ in ledger_plan.M2_RUNS) if a not in ledger_plan.M1_ALGOS]
    jobs += [(a, t) for t in ledger_plan.M3_TASKS for a in ledger_plan.M3_ALGOS]
    return list(dict.fromkeys(jobs))


def pilot(tasks: list[str], reference_tasks: list[str], path: Path, log=print) -> dict:
    if "jax" not in __import__("sys").modules:  # before JAX starts: one thread, as the cells run
        from ledger_cell import SINGLE_THREAD_XLA

        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA).strip()
    from diffrl.plumbing.machine import library_versions, machine_record
    from diffrl.plumbing.records import atomic_write_json
    from ledger_cell import SCRATCH, cell_config
    from stability import random_return

    data = json.loads(path.read_text()) if path.exists() else {"entries": [], "random_returns": {}}
    data.update({"machine": machine_record(), "versions": library_versions(),
                 "chunk_steps": PILOT_CHUNK_STEPS, "random_episodes": RANDOM_EPISODES})
    done = {(e["algo"], e["task"]) for e in data["entries"]}
    jobs = pilot_jobs(tasks, reference_tasks)
    path.parent.mkdir(parents=True, exist_ok=True)
    for algo, name in jobs:
        task = name.split("/", 1)[1]
        if name.startswith("playground/") and name not in data["random_returns"]:
            t0 = time.perf_counter()
            config = cell_config(ledger_plan.Cell("pilot", "reppo", "reppo", name, 40960, 0, 1), SCRATCH / "pilot")
            data["random_returns"][name] = round(random_return(config, episodes=RANDOM_EPISODES), 3)
            log(f"[pilot] {task}: random return {data['random_returns'][name]:.2f} ({time.perf_counter() - t0:.0f} s)")
            atomic_write_json(path, data)
        if (algo, name) in done:
            continue
        t0 = time.perf_counter()
        entry = _measure(algo, name, SCRATCH / "pilot")
        data["entries"].append(entry)
        done.add((algo, name))
        atomic_write_json(path, data)
        log(f"[pilot] {algo} on {task}: compile {entry['compile_s']:.0f} s, {entry['s_per_iteration']:.3f} s/iteration, "
            f"eval {entry['eval_s']:.1f} s ({time.perf_counter() - t0:.0f} s)")
    return data


def _measure_in_child(algo: str, task: str, cpus: list[int]) -> dict:
    """``_measure`` in a fresh process on ``cpus``: one cpu runs single-threaded XLA (as the cells do),
    more run XLA's default thread pool (as ``diffrl train`` does); XLA_FLAGS are fixed at process start."""
    import subprocess
    import sys

    from ledger_cell import SINGLE_THREAD_XLA

    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    if len(cpus) == 1:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA).strip()
    command = [sys.executable, str(Path(__file__).resolve().parent / "ledger.py"), "measure", algo, task]
    if hasattr(os, "sched_setaffinity"):
        command = ["taskset", "-c", ",".join(map(str, cpus))] + command
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"measuring {algo} on {task} on cpus {cpus} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def core_speedups(reference_tasks: list[str], path: Path, cpus: list[int], log=print) -> dict:
    """Every matrix-1 algorithm on each reference task, measured on ``cpus[:1]`` and then on ``cpus[:2]``
    (nothing else should run meanwhile); appends to ``pilot.json``'s ``two_cores`` as each pair finishes."""
    from diffrl.plumbing.machine import machine_record
    from diffrl.plumbing.records import atomic_write_json

    if len(cpus) < 2:
        raise ValueError(f"measuring two cores needs two cpus, got {cpus}")
    data = json.loads(path.read_text()) if path.exists() else {"entries": [], "random_returns": {}}
    rows = data.setdefault("two_cores", [])
    done = {(r["algo"], r["task"]) for r in rows}
    for task in reference_tasks:
        name = f"playground/{task}"
        for algo in ledger_plan.M1_ALGOS:
            if (algo, name) in done:
                continue
            one = _measure_in_child(algo, name, cpus[:1])
            two = _measure_in_child(algo, name, cpus[:2])
            rows.append({"algo": algo, "task": name, "one_core": one, "two_cores": two,
                         "train_speedup": round(one["s_per_iteration"] / two["s_per_iteration"], 3),
                         "eval_speedup": round(one["eval_s"] / two["eval_s"], 3), "machine": machine_record()})
            atomic_write_json(path, data)
            log(f"[cores] {algo} on {task}: {one['s_per_iteration']:.3f} s/iteration on one core, "
                f"{two['s_per_iteration']:.3f} on two ({rows[-1]['train_speedup']:.2f}x); evaluation "
                f"{rows[-1]['eval_speedup']:.2f}x")
    return data


def two_core_speedups(pilot: dict, algo: str, task: str) -> tuple[float, float, str] | None:
    """(train speedup, evaluation speedup, reference task) of ``algo`` from one core to two, measured on the
    reference task nearest ``task`` in REPPO's one-core cost per iteration; None without a measurement."""
    from ledger_estimate import nearest_in_reppo_cost

    rows = {r["task"]: r for r in pilot.get("two_cores", []) if r["algo"] == algo}
    reppo = {e["task"]: e["s_per_iteration"] for e in pilot.get("entries", []) if e["algo"] == "reppo"}
    refs = [t for t in rows if t in reppo]
    if not refs:
        return None
    ref = nearest_in_reppo_cost(refs, reppo[task], reppo) if task in reppo else refs[0]
    return rows[ref]["train_speedup"], rows[ref]["eval_speedup"], ref
