"""The benchmark ledger: a declared plan of cells that fills up piece by piece, one small committed
record per finished cell, and a report rendered from the records alone.

    python benchmarks/ledger.py plan [--matrix m1]          # cells, status, estimated minutes, totals
    python benchmarks/ledger.py pilot [--tasks ...]         # measure task and algorithm speed (pilot.json)
    python benchmarks/ledger.py cores                       # one core against two (pilot.json; machine idle)
    python benchmarks/ledger.py run --cores 1 --minutes 45  # fill missing cells in plan order
    python benchmarks/ledger.py report                      # tables and figures from the records
    python benchmarks/ledger.py check                       # CI: records valid, report up to date

``run`` starts each cell as its own process pinned to one core (single-threaded XLA), never
starts a cell whose estimate does not fit the time left, skips cells whose committed record
matches the current config hash and reruns stale ones (a record whose hash no longer matches
the code's resolved config). A cell's record is written atomically when its program has
finished; an interrupted cell leaves only its scratch run directory (``runs/ledger/``, not
committed), from whose last checkpoint the next ``run`` in the same checkout continues.
Ctrl-C (or SIGTERM) stops every running cell after its current chunk, with a checkpoint.
A cell whose training produces NaN/inf is a result, not a failure: it continues from its last
checkpoint without the check (which changes no number) to its budget, and its record names the
trainer's first error and the seeds that ended non-finite (the report scores them the task's lowest
return).

Files (``benchmarks/results/ledger/``): ``records/<cell>.json`` (``ledger_records.py``),
``pilot.json`` (``pilot``), ``report/`` (``report``). The plan is ``ledger_plan.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules when imported from elsewhere

import ledger_plan  # noqa: E402
from ledger_estimate import Estimator  # noqa: E402
from ledger_records import (SCHEMA, changed_settings, config_hash, curves_from_rows,  # noqa: E402
                            hashed_settings, read_records)

ROOT = Path(__file__).resolve().parent / "results" / "ledger"
RECORDS = ROOT / "records"
PILOT = ROOT / "pilot.json"
SCRATCH = Path(__file__).resolve().parent.parent / "runs" / "ledger"
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
CELL_LIMIT_S = 45 * 60
"""A cell is sized to finish in about 45 minutes of one core (a session keeps nothing else)."""
ESTIMATE_MARGIN = 1.15
"""A cell starts only if 1.15 x its estimate fits the time left (estimates are +-10 % here)."""

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
def run_cell(cell, scratch: Path | None = None, records_dir: Path | None = None,
             keep_run_dir: bool = False) -> dict | None:
    """Train ``cell`` (continuing its scratch run directory's last checkpoint if there is one) and
    write its record; None if it was interrupted (checkpointed; nothing that looks finished)."""
    from diffrl.plumbing.machine import git_commit, library_versions, machine_record
    from diffrl.plumbing.records import atomic_write_json
    from diffrl.core.nonfinite import NonFiniteError
    from diffrl.core.trainer import Trainer
    from diffrl.artefacts.plotting import read_metrics
    from suite import continue_or_restart

    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    scratch, records_dir = scratch or SCRATCH, records_dir or RECORDS
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


# -- the scheduler ----------------------------------------------------------------------------
def select(cells, matrices: list[str] | None, labels: list[str] | None, tasks: list[str] | None):
    return [c for c in cells if (not matrices or c.matrix in matrices) and (not labels or c.label in labels)
            and (not tasks or c.task.split("/")[-1] in tasks)]


def cpu_list(cores: int, cpus: str | None) -> list[int]:
    if cpus:
        return [int(x) for x in cpus.split(",") if x != ""]
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count()))
    if cores > len(available):
        raise ValueError(f"--cores {cores}: this machine offers {len(available)}")
    return available[:cores]


def _launch(cell, cpu: int, log_dir: Path) -> subprocess.Popen:
    env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + SINGLE_THREAD_XLA).strip(),
               JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"), PYTHONUNBUFFERED="1")
    command = [sys.executable, str(Path(__file__).resolve()), "cell", cell.cell_id]
    if shutil.which("taskset"):
        command = ["taskset", "-c", str(cpu)] + command
    log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"{cell.cell_id}.log", "a")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def run(cores: int, minutes: float, cpus: str | None = None, matrices=None, labels=None, tasks=None,
        dry_run: bool = False, log=print) -> int:
    """Fill missing or stale cells in plan order until ``minutes`` are up; -> exit status."""
    deadline = time.monotonic() + minutes * 60.0
    records = load_records()
    estimator = Estimator(load_pilot(), records)
    pending = []
    for cell in select(ledger_plan.plan(), matrices, labels, tasks):
        config = cell_config(cell)
        status, detail = cell_status(cell, records, config)
        if status == "stale":
            log(f"[ledger] {cell.cell_id}: stale record ({detail}); rerunning")
        if status != "done":
            pending.append((cell, estimator.seconds(cell, config)))
    if not pending:
        log("[ledger] every selected cell has a current record")
        return 0
    unknown = [c.cell_id for c, s in pending if s is None]
    if unknown:
        log(f"[ledger] no estimate (run `ledger.py pilot` first) for {len(unknown)} cells, e.g. {unknown[0]}; "
            "they are not started")
    pending = [(c, s) for c, s in pending if s is not None]
    free, running = cpu_list(cores, cpus), {}
    stop = {"requested": False}

    def request_stop(signum, frame):
        stop["requested"] = True
        for proc, cell, _ in running.values():
            proc.send_signal(signal.SIGTERM)  # the trainer checkpoints after its chunk and stops
        log("[ledger] stopping: each running cell checkpoints after its current chunk")

    previous = {s: signal.signal(s, request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    finished = failed = 0
    try:
        while True:
            left = deadline - time.monotonic()
            while free and not stop["requested"]:
                fits = next((i for i, (c, s) in enumerate(pending) if s * ESTIMATE_MARGIN <= left), None)
                if fits is None:
                    break
                cell, seconds = pending.pop(fits)
                cpu = free.pop(0)
                log(f"[ledger] start {cell.cell_id} on cpu {cpu} (estimate {seconds / 60:.0f} min, "
                    f"{left / 60:.0f} min left)")
                if dry_run:
                    free.append(cpu)
                    left -= seconds
                    continue
                running[cpu] = (_launch(cell, cpu, SCRATCH / "logs"), cell, time.monotonic())
            if not running:
                break
            time.sleep(2.0)
            for cpu, (proc, cell, t0) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[cpu]
                free.append(cpu)
                took = (time.monotonic() - t0) / 60
                if proc.returncode == 0 and (RECORDS / f"{cell.cell_id}.json").exists():
                    finished += 1
                    log(f"[ledger] done {cell.cell_id} in {took:.0f} min")
                else:
                    failed += 1
                    log(f"[ledger] {cell.cell_id} ended without a record (exit {proc.returncode}, {took:.0f} min; "
                        f"log {SCRATCH / 'logs' / (cell.cell_id + '.log')})")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    log(f"[ledger] {finished} cells finished, {failed} without a record, {len(pending)} left in the selection")
    return 130 if stop["requested"] else (1 if failed else 0)


# -- plan table -------------------------------------------------------------------------------
def describe(cells, records, estimator) -> str:
    lines = ["| cell | preset | seeds | iterations | est. min | status |", "|---|---|---|---|---|---|"]
    totals: dict[str, list[float]] = {}
    for cell in cells:
        config = cell_config(cell)
        status, detail = cell_status(cell, records, config)
        seconds = estimator.seconds(cell, config)
        t = totals.setdefault(cell.matrix, [0, 0, 0.0, 0.0])
        t[0] += 1
        t[1] += status == "done"
        t[2] += seconds or 0.0
        t[3] += (seconds or 0.0) if status != "done" else 0.0
        est = "?" if seconds is None else f"{seconds / 60:.0f}"
        lines.append(f"| {cell.cell_id} | {config.preset} | {cell.num_seeds} | {config.num_iterations} | {est} | "
                     f"{status}{' ' + detail if detail else ''} |")
    lines.append("")
    splits = suggested_splits(cells, estimator)
    if splits:
        lines.append("Cells estimated over 45 minutes; seed splits that fit (ledger_plan.M1_SEED_SPLITS form):")
        lines += [f"    {key!r}: {parts!r}," for key, parts in splits.items()]
        lines.append("")
    for m, (n, done, total, left) in totals.items():
        lines.append(f"{m}: {done}/{n} cells done; estimated {total / 3600:.1f} core-hours in all, "
                     f"{left / 3600:.1f} left")
    return "\n".join(lines)


def suggested_splits(cells, estimator) -> dict[tuple[str, str], tuple[int, ...]]:
    """{(algo, task short name): seeds per cell} for the matrix-1 runs whose cells are estimated
    over CELL_LIMIT_S: the fewest near-equal parts that fit (one seed per cell at most)."""
    out = {}
    for cell in cells:
        if cell.matrix != "m1" or cell.base_seed != 0:
            continue
        config = cell_config(cell)
        seconds = estimator.seconds(cell, config)
        if seconds is None or seconds <= CELL_LIMIT_S and cell.num_seeds == ledger_plan.M1_SEEDS:
            continue
        total = ledger_plan.M1_SEEDS
        for parts in range(1, total + 1):
            sizes = tuple(total // parts + (i < total % parts) for i in range(parts))
            probe = ledger_plan.Cell(cell.matrix, cell.label, cell.algo, cell.task, cell.env_steps, 0, sizes[0],
                                     cell.num_evals, cell.eval_envs, cell.preset, dict(cell.overrides))
            if estimator.seconds(probe, cell_config(probe)) <= CELL_LIMIT_S or parts == total:
                break
        if sizes != (total,):
            out[(cell.algo, cell.task.split("/")[1])] = sizes
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("plan", "print the cells, their status and estimates"),
                       ("run", "train missing or stale cells in plan order")):
        q = sub.add_parser(name, help=text)
        q.add_argument("--matrix", action="append", help="only this matrix (m1, m2, m3; repeatable)")
        q.add_argument("--label", action="append", help="only this run label (e.g. reppo; repeatable)")
        q.add_argument("--task", action="append", help="only this task (e.g. CheetahRun; repeatable)")
    q = sub.choices["run"]
    q.add_argument("--cores", type=int, default=1, help="cells run at once, one per core")
    q.add_argument("--cpus", help="comma-separated CPU ids to pin cells to (default: the first --cores)")
    q.add_argument("--minutes", type=float, required=True, help="no cell is started that cannot finish by then")
    q.add_argument("--dry-run", action="store_true", help="print what would start; train nothing")
    q = sub.add_parser("cell", help="train one cell in this process (what `run` starts)")
    q.add_argument("cell_id")
    q = sub.add_parser("pilot", help="measure each task's and algorithm's speed (writes pilot.json)")
    q.add_argument("--tasks", help="comma-separated Playground tasks (default: matrix 1's)")
    q.add_argument("--reference-tasks", default="CartpoleSwingup,CheetahRun",
                   help="tasks on which every matrix-1 algorithm is measured")
    q = sub.add_parser("cores", help="measure each matrix-1 algorithm on one core and on two (the wall-clock on 2 "
                                     "CPU cores in expected.md); needs the machine to itself")
    q.add_argument("--reference-tasks", default="CartpoleSwingup,CheetahRun")
    q.add_argument("--cpus", default="0,1", help="the two CPU ids to measure on")
    q = sub.add_parser("measure", help="one pilot measurement in this process, printed as JSON (what `cores` starts)")
    q.add_argument("algo")
    q.add_argument("task")
    q = sub.add_parser("report", help="render tables and figures from the committed records")
    q.add_argument("--no-figures", action="store_true")
    sub.add_parser("check", help="records valid and the committed report equal to a fresh rendering")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "plan":
            records = load_records()
            cells = select(ledger_plan.plan(), args.matrix, args.label, args.task)
            print(describe(cells, records, Estimator(load_pilot(), records)))
            return 0
        if args.command == "run":
            return run(args.cores, args.minutes, args.cpus, args.matrix, args.label, args.task, args.dry_run,
                       log=lambda m: print(m, flush=True))
        if args.command == "cell":
            cells = {c.cell_id: c for c in ledger_plan.plan()}
            if args.cell_id not in cells:
                raise ValueError(f"no cell {args.cell_id!r} in the plan")
            import jax

            # The cells of a split run compile the same program (the seed is an input): compile once.
            jax.config.update("jax_compilation_cache_dir", str(SCRATCH / "jax_cache"))
            return 0 if run_cell(cells[args.cell_id]) is not None else 130
        if args.command == "pilot":
            from ledger_pilot import pilot

            tasks = args.tasks.split(",") if args.tasks else list(ledger_plan.M1_TASKS)
            pilot(tasks, args.reference_tasks.split(","), PILOT)
            return 0
        if args.command == "cores":
            from ledger_pilot import core_speedups

            core_speedups(args.reference_tasks.split(","), PILOT, [int(c) for c in args.cpus.split(",")])
            return 0
        if args.command == "measure":
            from ledger_pilot import _measure

            print(json.dumps(_measure(args.algo, args.task, SCRATCH / "measure")))
            return 0
        from ledger_report import check, render

        if args.command == "report":
            render(ROOT, with_figures=not args.no_figures)
            return 0
        return check(ROOT)
    except ValueError as e:  # ConfigError included: refused before anything is compiled
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
