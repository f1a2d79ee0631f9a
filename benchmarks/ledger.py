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
the code's resolved config). The process training a cell claims it, so two ``run`` processes
whose selections overlap never train one cell twice. A cell's record is written atomically when its program has
finished; an interrupted cell leaves only its scratch run directory (``runs/ledger/``, not
committed), from whose last checkpoint the next ``run`` in the same checkout continues.
Ctrl-C (or SIGTERM) stops every running cell after its current chunk, with a checkpoint.
A cell whose training produces NaN/inf is a result, not a failure: it continues from its last
checkpoint without the check (which changes no number) to its budget, and its record names the
trainer's first error and the seeds that ended non-finite (the report scores them the task's lowest
return).

Files (``benchmarks/results/ledger/``): ``records/<cell>.json`` (``ledger_records.py``),
``pilot.json`` (``pilot``), ``report/`` (``report``). The plan is ``ledger_plan.py``; one cell's config,
status and training, ``ledger_cell.py``.
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
import ledger_cell  # noqa: E402
from ledger_cell import (BUSY_EXIT, CELL_LIMIT_S, PILOT, ROOT, SCRATCH, SINGLE_THREAD_XLA, cell_config,  # noqa: E402
                         cell_status, load_pilot, load_records, run_cell)
from ledger_estimate import Estimator  # noqa: E402

ESTIMATE_MARGIN = 1.15
"""A cell starts only if 1.15 x its estimate fits the time left (estimates are +-10 % here)."""


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


def recorded_meanwhile(cell) -> bool:
    """Whether ``cell`` has a current record now: a ``run`` decides what is pending when it starts, and
    another ``run`` (on the other core) may have finished the cell since."""
    path = ledger_cell.RECORDS / f"{cell.cell_id}.json"
    if not path.exists():
        return False
    return cell_status(cell, {cell.cell_id: json.loads(path.read_text())})[0] == "done"


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
                if not dry_run and recorded_meanwhile(cell):
                    log(f"[ledger] {cell.cell_id}: recorded by another process since this run began; skipped")
                    continue
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
                if proc.returncode == 0 and (ledger_cell.RECORDS / f"{cell.cell_id}.json").exists():
                    finished += 1
                    log(f"[ledger] done {cell.cell_id} in {took:.0f} min")
                elif proc.returncode == BUSY_EXIT:
                    log(f"[ledger] {cell.cell_id} is being trained by another process; left to it")
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
            from diffrl.core.run_lock import RunDirLocked

            try:
                return 0 if run_cell(cells[args.cell_id]) is not None else 130
            except RunDirLocked as e:  # another `run` is training this cell: leave it to that one
                print(f"[ledger] {args.cell_id} is claimed: {e}", file=sys.stderr)
                return BUSY_EXIT
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
