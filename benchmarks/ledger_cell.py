"""One cell of the benchmark ledger (``benchmarks/ledger.py``): its run config, its status against the
committed records (done, stale or missing), and its training: a vmapped multi-seed program that
continues its scratch run directory's last checkpoint, trains on through a NaN/inf (a divergence is a
result, recorded with the seeds it hit), and writes one small record atomically when it has finished.
The scheduler that starts cells on pinned cores, and the command line, are ``ledger.py``'s.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules when imported from elsewhere

import ledger_plan  # noqa: E402
from ledger_records import (SCHEMA, changed_settings, config_hash, curves_from_rows,  # noqa: E402
                            hashed_settings, read_records)

ROOT = Path(__file__).resolve().parent / "results" / "ledger"
RECORDS = ROOT / "records"
PILOT = ROOT / "pilot.json"
SCRATCH = Path(__file__).resolve().parent.parent / "runs" / "ledger"
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
CELL_LIMIT_S = 45 * 60
"""A cell is sized to finish in about 45 minutes of one core (a session keeps nothing else)."""
_POLICY_SECTIONS = {"gaussian": "diffrl.policies.gaussian:GaussianPolicy",
                    "diffusion": "diffrl.policies.diffusion:DiffusionPolicy",
                    "adjoint": "diffrl.policies.adjoint:AdjointPolicy",
                    "flow": "diffrl.policies.flow:FlowPolicy"}


def policy_samplers(algo: str) -> tuple[str, ...]:
    """Every evaluation sampler of ``algo``'s policy, its default first."""
    import importlib

    from diffrl.algos import ALGORITHM_SECTIONS

    section = next(s for s in ALGORITHM_SECTIONS[algo] if s in _POLICY_SECTIONS)
    module, name = _POLICY_SECTIONS[section].split(":")
    return tuple(getattr(importlib.import_module(module), name).samplers)


def cell_config(cell: ledger_plan.Cell, scratch: Path | None = None):
    """The validated run config of ``cell`` (no compilation; raises ConfigError on bad input)."""
    from diffrl.config.overrides import set_field
    from diffrl.config.presets import resolve

    config = resolve(cell.algo, cell.task, cell.preset).replace(
        total_env_steps=cell.env_steps, num_seeds=cell.num_seeds, seed=cell.base_seed, num_evals=cell.num_evals,
        eval_envs=cell.eval_envs, eval_samplers=policy_samplers(cell.algo), progress=False, tensorboard=False,
        checkpoint_every=1, keep_checkpoints=1, out=str((scratch or SCRATCH) / cell.cell_id))
    for dotted, value in cell.overrides.items():
        config = set_field(config, dotted, value, source=f"ledger cell {cell.cell_id}:")
    config.validate()
    if config.trained_env_steps != cell.env_steps:
        raise ValueError(f"{cell.cell_id}: {cell.env_steps:,} env steps is not a whole number of chunks of "
                         f"{config.iterations_per_chunk} x {config.batch_size} (would train {config.trained_env_steps:,})")
    return config


# -- status -----------------------------------------------------------------------------------
def load_records(folder: Path | None = None) -> dict[str, dict]:
    folder = RECORDS if folder is None else folder
    return {r["cell"]: r for r in read_records(folder)} if folder.is_dir() else {}


def cell_status(cell, records: dict[str, dict], config=None) -> tuple[str, str]:
    """('done' | 'stale' | 'missing', detail): a record counts only if its hash is the code's."""
    record = records.get(cell.cell_id)
    if record is None:
        return "missing", ""
    config = config if config is not None else cell_config(cell)
    if record["config_hash"] == config_hash(config):
        return "done", ""
    changed = changed_settings(record["config"], hashed_settings(config))
    return "stale", "changed: " + ", ".join(changed[:6]) + (" ..." if len(changed) > 6 else "")


def load_pilot(path: Path | None = None) -> dict | None:
    path = PILOT if path is None else path
    return json.loads(path.read_text()) if path.exists() else None


# -- one cell ---------------------------------------------------------------------------------
BUSY_EXIT = 75
"""Exit status of ``ledger.py cell`` when another process is training the cell (EX_TEMPFAIL)."""


def run_cell(cell, scratch: Path | None = None, records_dir: Path | None = None,
             keep_run_dir: bool = False) -> dict | None:
    """Train ``cell`` (continuing its scratch run directory's last checkpoint if there is one) and
    write its record; None if it was interrupted (checkpointed; nothing that looks finished).

    The cell is claimed first (``scratch/claims/<cell>``, the trainer's one-writer lock: released when
    the process ends, however it ends): two ``ledger.py run`` processes whose selections overlap could
    otherwise start the same cell, and the second would delete the first's run directory before its
    first checkpoint. Raises ``diffrl.core.run_lock.RunDirLocked`` naming the holder if it is claimed."""
    from diffrl.core.run_lock import RunDirLock

    scratch = scratch or SCRATCH
    claim = scratch / "claims" / cell.cell_id
    claim.mkdir(parents=True, exist_ok=True)
    with RunDirLock(claim):
        return _train_and_record(cell, scratch, records_dir or RECORDS, keep_run_dir)


def _train_and_record(cell, scratch: Path, records_dir: Path, keep_run_dir: bool) -> dict | None:
    from diffrl.plumbing.machine import git_commit, library_versions, machine_record
    from diffrl.plumbing.records import atomic_write_json
    from diffrl.core.nonfinite import NonFiniteError
    from diffrl.core.trainer import Trainer
    from diffrl.artefacts.plotting import read_metrics
    from suite import continue_or_restart

    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    config = cell_config(cell, scratch)
    run_dir = Path(config.out)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    config, resumed = continue_or_restart(run_dir, config)
    t0, cpu0 = time.perf_counter(), time.process_time()
    trainer = Trainer(config)
    try:
        summary = trainer.run()
        divergence = None
    except NonFiniteError as error:
        # One seed's NaN stops the whole vmapped program. For the ledger a divergence is a result, not a
        # failure to retry forever: train on without the check (it changes no number: the seeds of one
        # program are independent), and record which seeds ended non-finite.
        divergence = str(error)
        trainer = Trainer(without_finiteness_check(run_dir, config))
        summary = trainer.run()
    # The process's CPU time over the same span: a cell pinned to one core had that core to itself
    # if the two are about equal (ledger_records.ran_under_load).
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if summary.get("interrupted"):
        return None
    all_rows = read_metrics(run_dir)
    rows = [r for r in all_rows if isinstance(r.get("eval/seed_returns"), list)]
    samplers = list(trainer.samplers)
    compile_s = sum(float(summary.get(k, 0.0)) for k in ("compile/init_s", "compile/chunk_s",
                                                          "compile/eval_first_call_s"))
    record = {
        "schema": SCHEMA, "cell": cell.cell_id, "matrix": cell.matrix, "label": cell.label, "algo": cell.algo,
        "task": cell.task, "preset": config.preset, "overrides": dict(cell.overrides),
        "base_seed": cell.base_seed, "num_seeds": cell.num_seeds,
        "config_hash": config_hash(config), "config": hashed_settings(config), "samplers": samplers,
        "env_steps": [int(r["env_steps"]) for r in rows], "walltime": [float(r.get("walltime", 0.0)) for r in rows],
        "curves": curves_from_rows(rows, samplers, cell.num_seeds),
        "timing": {"compile_s": round(compile_s, 2), "train_s": round(float(summary["train_time_s"]), 2),
                   "eval_s": round(float(summary["walltime_s"]) - float(summary["train_time_s"]), 2),
                   "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "resumed": resumed is not None},
        "versions": library_versions(),
        "machine": {**machine_record(), "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                    else None, "loadavg_start_end": [load_before, os.getloadavg() if load_before else None]},
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": sys.argv,
        "nonfinite_states": blow_ups(all_rows, config),
    }
    if divergence is not None:
        record["diverged"] = {"error": divergence, "seeds": nonfinite_seeds(trainer.state, record, cell.num_seeds)}
    records_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(records_dir / f"{cell.cell_id}.json", record)
    if not keep_run_dir:
        shutil.rmtree(run_dir, ignore_errors=True)
    return record


def blow_ups(rows: list[dict], config) -> int:
    """Env steps, over every seed and segment of a run, whose simulation went non-finite and were made
    terminations (``diffrl.envs.wrappers.NonFiniteGuard``), from metrics.jsonl: each chunk's row holds
    ``train/nonfinite_states`` averaged over its seeds and iterations."""
    per_row = config.num_seeds * config.iterations_per_chunk
    return int(round(sum(float(r.get("train/nonfinite_states", 0.0)) for r in rows) * per_row))


def without_finiteness_check(run_dir: Path, config):
    """``config`` without the stop on NaN/inf, continuing ``run_dir``'s last checkpoint if it has one
    (written before the non-finite chunk), else training from the start in a clean directory."""
    from diffrl.plumbing.checkpoint import latest_valid_checkpoint

    config = config.replace(check_finite=False, resume=None)
    if latest_valid_checkpoint(run_dir) is not None:
        return config.replace(resume=str(run_dir))
    shutil.rmtree(run_dir, ignore_errors=True)
    return config


def nonfinite_seeds(state, record: dict, num_seeds: int) -> list[int]:
    """Seeds (indices within the cell) whose final train state holds a NaN/inf, or whose last
    evaluation returned one under any sampler."""
    import jax
    import numpy as np

    bad = np.zeros(num_seeds, bool)
    for leaf in jax.tree.leaves(state):
        leaf = np.asarray(leaf)
        if not np.issubdtype(leaf.dtype, np.floating):
            continue
        if num_seeds == 1:  # a one-seed program's state may have no seed axis
            bad[0] |= not np.isfinite(leaf).all()
        elif leaf.ndim and leaf.shape[0] == num_seeds:
            bad |= ~np.isfinite(leaf.reshape(num_seeds, -1)).all(axis=1)
    for series in record["curves"].values():
        bad |= ~np.isfinite(np.asarray(series["returns"][-1], np.float64))
    return [int(i) for i in np.flatnonzero(bad)]
