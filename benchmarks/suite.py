"""Benchmark suite: algorithms x tasks x seeds with one env-step budget, then aggregate.

Quick mode (PPO, REPPO, TruDi, AMDP on 3 Playground DM Control tasks, 2 seeds, 98,304 env
steps each; about 20 minutes on 2 CPU cores):

    python benchmarks/suite.py --quick --out benchmarks/results/suite_quick

Paper scale (the 23 Playground DM Control tasks, 1024 envs, 50M env steps, 5 seeds, paper
presets; for a GPU):

    python benchmarks/suite.py --paper --out runs/suite_paper

Every (algo, task) pair is one compiled program that trains all its seeds at once
(vmapped, ``TrainConfig.num_seeds``); its trainer run directory goes to
``OUT/train/<task>--<algo>/`` and one JSON record per seed to ``OUT/runs/`` (format in
``suite_records.py``). Rerunning the same command skips pairs whose records all exist
and resumes an interrupted pair from its last checkpoint, so a suite can be stopped
(Ctrl-C finishes the chunk in flight and checkpoints) and continued. Finally
``aggregate.py`` writes statistics, tables and plots to ``OUT/aggregate/``.

``--algos/--tasks/--seeds/--total-env-steps/--num-evals/--eval-envs/--num-envs`` override
the chosen mode's settings (without a mode, ``--algos``, ``--tasks`` and
``--total-env-steps`` are required); ``--set key=value`` (or ``algo:key=value``) overrides
any TrainConfig field. ``--dry-run`` validates and prints the plan without training.
"""
from __future__ import annotations

import argparse
import difflib
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules when imported from elsewhere

from grid import Cell, apply_settings, parse_settings, run_grid  # noqa: E402
from suite_records import record_path, records_from_run_dir  # noqa: E402
from suite_settings import PAPER, QUICK, SuiteSettings  # noqa: E402

# Fields that may differ between the run that started a program and the one resuming it.
_RUN_LOCAL_FIELDS = ("out", "resume", "progress", "check_finite")  # none changes a number


class SuiteInterrupted(RuntimeError):
    """A program was stopped (SIGINT/SIGTERM) after checkpointing; rerun to continue."""


parse_overrides = parse_settings  # the --set values (grid.py)


def full_task_name(task: str) -> str:
    """'CartpoleSwingup' -> 'playground/CartpoleSwingup'; names with a suite prefix stay."""
    return task if "/" in task else f"playground/{task}"


def settings_from_args(args) -> SuiteSettings:
    if args.quick and args.paper:
        raise ValueError("choose one of --quick and --paper")
    base = QUICK if args.quick else PAPER if args.paper else None
    if base is None:
        missing = [f for f in ("algos", "tasks", "total_env_steps") if getattr(args, f) is None]
        if missing:
            raise ValueError("without --quick or --paper, give " + ", ".join("--" + m.replace("_", "-")
                                                                              for m in missing))
        base = SuiteSettings(algos=(), tasks=(), num_seeds=2, total_env_steps=0, num_evals=10, eval_envs=32)
    changes = {}
    if args.algos is not None:
        changes["algos"] = tuple(a for a in args.algos.split(",") if a)
    if args.tasks is not None:
        changes["tasks"] = tuple(full_task_name(t) for t in args.tasks.split(",") if t)
    for name, field in (("seeds", "num_seeds"), ("total_env_steps", "total_env_steps"), ("num_evals", "num_evals"),
                        ("eval_envs", "eval_envs"), ("num_envs", "num_envs"), ("seed", "seed")):
        if getattr(args, name) is not None:
            changes[field] = getattr(args, name)
    if args.preset:
        presets = dict(base.presets)
        for item in args.preset:
            algo, sep, name = item.partition("=")
            if not sep:
                raise ValueError(f"--preset expects algo=preset, got {item!r}")
            presets[algo] = name
        changes["presets"] = presets
    return base.replace(**changes)


def check_names(settings: SuiteSettings) -> None:
    """Unknown algorithms or tasks are reported before anything is built or compiled."""
    from diffrl.algos import ALGORITHMS
    from diffrl.envs.registry import list_envs

    errors = []
    if not settings.algos or not settings.tasks:
        errors.append("the suite needs at least one algorithm and one task")
    for algo in settings.algos:
        if algo not in ALGORITHMS:
            errors.append(f"unknown algorithm {algo!r}; available: {', '.join(sorted(ALGORITHMS))}")
    envs = list_envs()
    for task in settings.tasks:
        if task not in envs:
            near = difflib.get_close_matches(task, envs, n=3, cutoff=0.6)
            errors.append(f"unknown task {task!r}" + (f"; did you mean {', '.join(near)}?" if near else ""))
    for name in ("num_seeds", "total_env_steps", "num_evals", "eval_envs"):
        if not getattr(settings, name) > 0:
            errors.append(f"{name} must be positive (got {getattr(settings, name)})")
    if errors:
        raise ValueError("invalid suite:\n  - " + "\n  - ".join(errors))


def program_dir(out: Path, algo: str, task: str) -> Path:
    return out / "train" / Cell(algo, task).name


def make_config(settings: SuiteSettings, algo: str, task: str, overrides: dict, out: Path):
    """The validated run config of one (algo, task) program."""
    from diffrl.config.presets import resolve

    config = resolve(algo, task, settings.presets.get(algo))
    config = config.replace(
        total_env_steps=settings.total_env_steps, num_seeds=settings.num_seeds, seed=settings.seed,
        num_evals=settings.num_evals, eval_envs=settings.eval_envs, progress=False, tensorboard=False,
        checkpoint_every=1, keep_checkpoints=1, out=str(program_dir(out, algo, task)))
    if settings.num_envs is not None:
        config = config.replace(num_envs=settings.num_envs)
    config = apply_settings(config, overrides, algo, task)
    config.validate()
    return config


def plan(settings: SuiteSettings, overrides: dict, out: Path) -> list[tuple[str, str, object]]:
    """[(algo, task, config)] in run order (task by task, so each finished task compares all algos)."""
    check_names(settings)
    return [(algo, task, make_config(settings, algo, task, overrides, out))
            for task in settings.tasks for algo in settings.algos]


def describe_plan(programs) -> str:
    lines = ["| task | algo | preset | seeds | envs x steps | iterations | chunks | env steps per seed |",
             "|---|---|---|---|---|---|---|---|"]
    for algo, task, c in programs:
        lines.append(f"| {task} | {algo} | {c.preset} | {c.num_seeds} | {c.num_envs} x {c.num_steps} | "
                     f"{c.num_chunks * c.iterations_per_chunk} | {c.num_chunks} | {c.trained_env_steps:,} |")
    steps = {c.trained_env_steps for _, _, c in programs}
    if len(steps) > 1:
        listed = ", ".join(f"{s:,}" for s in sorted(steps))
        lines.append(f"\nNote: trained env steps differ between programs ({listed}):"
                     " the budget is not a whole number of chunks for every batch size.")
    return "\n".join(lines)


def _comparable(config_dict: dict) -> dict:
    return {k: v for k, v in config_dict.items() if k not in _RUN_LOCAL_FIELDS}


def check_same_config(old: dict, config, where: str) -> None:
    """Refuse (ValueError) to continue a run whose recorded settings differ from ``config``'s."""
    from diffrl.plumbing.records import config_to_json

    from diffrl.algos.registry import CONFIG_SECTIONS

    new = _comparable(config_to_json(config))
    # a run config holds the sections its algorithm reads; one written before that held every section
    old = {k: v for k, v in _comparable(old).items() if k in new or k not in CONFIG_SECTIONS}
    if old != new:
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        raise ValueError(f"{where} was written with different settings (fields {changed}); "
                         f"use another --out or delete it")


def continue_or_restart(run_dir: Path, config) -> tuple:
    """A stopped program's run directory -> (config, metadata of the checkpoint it continues from).

    With a valid checkpoint the program continues from it (``config`` gets ``resume``; ValueError if
    the directory was written with other settings); without one it is removed and started over with
    a clean log (metadata None), as when there is no directory."""
    from diffrl.plumbing.checkpoint import latest_valid_checkpoint, read_metadata

    path = latest_valid_checkpoint(run_dir) if run_dir.exists() else None
    if path is None:
        if run_dir.exists():
            shutil.rmtree(run_dir)
        return config, None
    check_same_config(json.loads((run_dir / "config.json").read_text())["config"], config, str(run_dir))
    return config.replace(resume=str(run_dir)), read_metadata(path)


def run_program(out: Path, algo: str, task: str, config, log=print) -> str:
    """Train one (algo, task) program unless its records exist; -> 'skipped', 'resumed' or 'trained'."""
    from diffrl.plumbing.records import atomic_write_json
    from diffrl.core.trainer import Trainer

    paths = [record_path(out, algo, task, i) for i in range(config.num_seeds)]
    if all(p.exists() for p in paths):
        check_same_config(json.loads(paths[0].read_text())["config"], config, str(paths[0]))
        return "skipped"
    run_dir = Path(config.out)
    config, resumed = continue_or_restart(run_dir, config)
    status = "trained" if resumed is None else "resumed"
    log(f"[suite] {algo} on {task}: {status if status == 'resumed' else 'training'} "
        f"({config.num_seeds} seeds x {config.trained_env_steps:,} env steps)")
    trainer = Trainer(config)
    t0 = time.perf_counter()
    summary = trainer.run()
    if summary.get("interrupted"):
        raise SuiteInterrupted(f"{algo} on {task} stopped after {summary['env_steps']:,} env steps "
                               f"(checkpointed); rerun the same command to continue")
    records = records_from_run_dir(run_dir, algo, task, config.seed, trainer.samplers[0],
                                   extra={"suite_wall_s": time.perf_counter() - t0})
    for path, record in zip(paths, records):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, record)
    log(f"[suite] {algo} on {task}: final return "
        + ", ".join(f"{r['final_return']:.1f}" for r in records) + f" ({time.perf_counter() - t0:.0f} s)")
    return status


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_argument_group("mode")
    mode.add_argument("--quick", action="store_true", help="3 Playground tasks, 4 algorithms, 2 seeds, CPU presets")
    mode.add_argument("--paper", action="store_true", help="23 DMC tasks, 1024 envs, 50M steps, paper presets")
    p.add_argument("--out", required=True, help="suite directory (records in OUT/runs, plots in OUT/aggregate)")
    p.add_argument("--algos", help="comma-separated algorithms (overrides the mode's)")
    p.add_argument("--tasks", help="comma-separated tasks; a bare name means playground/<name>")
    p.add_argument("--seeds", type=int, help="seeds per (algo, task), vmapped in one program")
    p.add_argument("--seed", type=int, help="base seed (default 0)")
    p.add_argument("--total-env-steps", type=int, help="env steps per seed, the same for every algorithm")
    p.add_argument("--num-evals", type=int, help="evaluations over a run")
    p.add_argument("--eval-envs", type=int, help="episodes per evaluation and seed")
    p.add_argument("--num-envs", type=int, help="parallel envs per seed for every algorithm")
    p.add_argument("--preset", action="append", default=[], help="algo=preset (repeatable)")
    p.add_argument("--set", action="append", default=[], help="run config override key=value or algo:key=value")
    p.add_argument("--jax-cache", help="persistent compilation cache directory (faster reruns)")
    p.add_argument("--dry-run", action="store_true", help="validate and print the plan; train nothing")
    p.add_argument("--no-aggregate", action="store_true", help="skip aggregate.py at the end")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
        out = Path(args.out)
        programs = plan(settings, parse_overrides(args.set), out)
    except ValueError as e:  # ConfigError is a ValueError: bad input stops before any compile
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(describe_plan(programs), flush=True)
    if args.dry_run:
        return 0
    if args.jax_cache:
        import jax

        jax.config.update("jax_compilation_cache_dir", args.jax_cache)
    out.mkdir(parents=True, exist_ok=True)
    (out / ".gitignore").write_text("# trainer run directories (checkpoints, exported policies)\ntrain/\n")
    from diffrl.plumbing.records import atomic_write_json, config_to_json

    atomic_write_json(out / "suite.json", {"settings": config_to_json(settings), "argv": sys.argv if argv is None
                                           else ["benchmarks/suite.py", *argv]})
    t0 = time.perf_counter()
    counts: dict[str, int] = {}
    try:
        statuses = run_grid(programs, lambda program: run_program(
            out, *program, log=lambda m: print(m, file=sys.stderr, flush=True)))
        for status in statuses:
            counts[status] = counts.get(status, 0) + 1
    except SuiteInterrupted as e:
        print(f"[suite] {e}", file=sys.stderr)
        return 130
    except ValueError as e:  # e.g. OUT holds runs made with other settings
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"[suite] {len(programs)} programs ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}) "
          f"in {time.perf_counter() - t0:.0f} s; records in {out / 'runs'}", file=sys.stderr)
    if not args.no_aggregate:
        from aggregate import aggregate

        aggregate(out, out / "aggregate")
        print(f"[suite] aggregate: {out / 'aggregate'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
