"""``diffrl train``: a new run from the preset and flags, or ``--resume RUN_DIR``; every refusal one line
before anything compiles, and the exit status says how the run ended (0 done, 2 refused, 3 NaN/inf,
4 a write failed, 130 SIGINT, 143 SIGTERM)."""
from __future__ import annotations

import argparse
import sys

from diffrl.commands.presets_listing import EXPECTED_RESULTS
from diffrl.commands.train_flags import (flag_values, moved_flags, parse_config, preparse, unknown_algo,
                                         unread_flag_errors)
from diffrl.commands.verdict import say_last


DESCRIPTION = ("Train an agent. Flags override the preset chosen by --algo/--env/--preset. An --out that already "
               "holds a run is refused; --move-aside renames that run to OUT.old-N first (it is never deleted). "
               "Exit status: 0 done, 2 refused, 3 NaN/inf, 4 a write failed, 130 SIGINT, 143 SIGTERM. What each "
               "algorithm's default preset gives on the 23 DM Control tasks, untuned, with commands and wall-clock: "
               + EXPECTED_RESULTS + ".")
"""``diffrl train --help``'s description."""


def cmd_train(argv: list[str]) -> int:
    from diffrl.config import ConfigError, TrainConfig
    from diffrl.config.presets import resolve

    from diffrl.config.overrides import RENAMED_FIELDS, normalise_name

    for arg in argv:
        name = normalise_name(arg.lstrip("-").split("=", 1)[0]) if arg.startswith("--") else None
        if name in RENAMED_FIELDS:
            print(f"diffrl train: {arg.split('=', 1)[0]} {RENAMED_FIELDS[name]}", file=sys.stderr)
            return 2
    resuming = "--resume" in argv or any(a.startswith("--resume=") for a in argv)
    if not resuming:  # a resumed run's algorithm is the stored one (_train_resume rewrites for it)
        argv = moved_flags(argv, preparse(argv)[0])
    argv = flag_values(argv)
    move_aside = "--move-aside" in argv
    argv = [a for a in argv if a != "--move-aside"]
    if resuming:
        if move_aside:
            print("diffrl train: --move-aside starts a new run; it cannot go with --resume", file=sys.stderr)
            return 2
        return _train_resume(argv)
    algo, env, preset = preparse(argv)
    problem = None if "-h" in argv or "--help" in argv else unknown_algo(algo)
    problem = problem or next(iter(unread_flag_errors(argv, algo)), None)
    if problem:
        print(f"diffrl train: {problem}", file=sys.stderr)
        return 2
    try:
        defaults = resolve(algo, env, preset)
    except ConfigError as e:
        if "-h" in argv or "--help" in argv:
            defaults = TrainConfig()
        else:
            print(f"diffrl train: {e}", file=sys.stderr)
            return 2
    try:
        config = parse_config(defaults, argv, prog="diffrl train", description=DESCRIPTION)
        if config.preset != defaults.preset:  # --preset on the command line wins over the default
            config = resolve(config.algo, config.env, config.preset)
            config = parse_config(config, argv, prog="diffrl train")
    except ValueError as e:  # a nested config refused its values while being built
        print(f"diffrl train: invalid configuration: {e}", file=sys.stderr)
        return 2
    return run_training(config, move_aside=move_aside)


def _train_resume(argv: list[str]) -> int:
    """``diffrl train --resume RUN_DIR [--total-env-steps N] [other fields]``."""
    from diffrl.core.run_dir import resume_config

    from diffrl.artefacts.export import ExportError

    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--resume", required=True)
    known, rest = p.parse_known_args(argv)
    try:
        defaults = resume_config(known.resume)
    except (FileNotFoundError, ValueError, ExportError) as e:  # ExportError: a config of another version
        print(f"diffrl train: --resume {known.resume}: {e}", file=sys.stderr)
        return 2
    rest = moved_flags(rest, defaults.algo)
    # the run's algorithm's flags on --help; otherwise every flag parses, so that one the run's algorithm
    # does not read, or a changed --algo, is refused below with its reason rather than as unknown
    config = parse_config(defaults, rest, hide_unread=bool({"-h", "--help"} & set(rest)),
                           prog="diffrl train --resume RUN_DIR")
    problem = _resume_problem(known.resume, config, defaults, rest)
    if problem:
        print(f"diffrl train: {problem}", file=sys.stderr)
        return 2
    from diffrl.core.run_dir import resume_progress

    progress = resume_progress(config)
    if progress is not None and progress[0] >= progress[1]:
        done, wanted = progress
        if done > wanted:
            print(f"diffrl train: --resume {known.resume}: the run has trained {done:,} env steps, more than the "
                  f"{wanted:,} asked for; a run cannot be shortened", file=sys.stderr)
            return 2
        print(f"diffrl train: {known.resume} is complete ({done:,} of {wanted:,} env steps); nothing to do, "
              f"nothing changed. Extend it with --total-env-steps larger than {done:,}", file=sys.stderr)
        return 0
    return run_training(config)


RESUME_FROZEN = ("algo", "env", "num_envs", "num_steps", "num_seeds", "seed", "chunk_iterations", "num_evals")
"""Settings a resume cannot change: they decide the train state's arrays, its random streams
or the chunk the checkpoint was written after, so the continued run could not be the same run."""


def _resume_problem(run_dir: str, config, stored, rest: list[str]) -> str | None:
    """Why ``diffrl train --resume RUN_DIR [flags]`` cannot continue the run, or None."""
    from pathlib import Path

    if config.out is not None and Path(config.out).resolve() != Path(run_dir).resolve():
        return (f"--out {config.out} with --resume {run_dir}: a resumed run is written in its own directory; "
                f"drop --out (or copy the run directory first and resume the copy)")
    for frozen in RESUME_FROZEN:
        if getattr(config, frozen) != getattr(stored, frozen):
            return f"--{frozen.replace('_', '-')} cannot change on resume (the run has {getattr(stored, frozen)!r})"
    return next(iter(unread_flag_errors(rest, config.algo)), None)


def _budget_notes(config) -> list[str]:
    """One line for each part of the budget that is rounded: the env steps trained are whole
    chunks of whole iterations, the evaluations one per chunk."""
    notes = []
    iteration = config.batch_size
    trained = config.trained_env_steps
    if trained != config.total_env_steps:
        notes.append(f"--total-env-steps {config.total_env_steps:,} is rounded down to {trained:,}: "
                     f"{config.num_chunks} chunk(s) of {config.iterations_per_chunk} iteration(s) of {iteration:,} "
                     f"env steps (num_envs x num_steps)")
    if config.num_chunks != config.num_evals and not config.resume:
        notes.append(f"--num-evals {config.num_evals} cannot be honoured with {config.num_iterations} iteration(s): "
                     f"evaluating {config.num_chunks} time(s), every {config.iterations_per_chunk} iteration(s)")
    return notes


def run_training(config, move_aside: bool = False) -> int:
    from diffrl.config import ConfigError
    from diffrl.core.run_dir import RunDirInUse, refuse_existing_run
    from diffrl.core.run_lock import RunDirLocked
    from diffrl.core.signals import exit_status
    from diffrl.core.nonfinite import NonFiniteError
    from diffrl.core.trainer import Trainer

    try:
        if config.out and not config.resume:  # before anything is built or compiled
            if move_aside:
                _move_aside(config.out)
            refuse_existing_run(config.out)
        trainer = Trainer(config)
    except (ConfigError, TypeError, RunDirInUse, OSError) as e:
        print(f"diffrl train: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("diffrl train: interrupted before training started; nothing was written", file=sys.stderr)
        return exit_status(2)
    problem = _unwritable(trainer.run_dir)
    if problem:
        print(f"diffrl train: {problem}", file=sys.stderr)
        return 2
    for note in _budget_notes(config):
        print(f"diffrl train: note: {note}", file=sys.stderr)
    try:
        summary = trainer.run()
    except NonFiniteError as e:
        print(f"diffrl train: {e}", file=sys.stderr)
        return 3
    except (FileNotFoundError, ValueError, RunDirLocked) as e:
        print(f"diffrl train: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the signal handlers were installed (taking the lock)
        print("diffrl train: interrupted before training started", file=sys.stderr)
        return exit_status(2)
    except OSError as e:  # a full disk, a file system turned read-only, permissions changed mid-run
        line = write_failure(e, trainer.run_dir)
        _settle_checkpoint_writers()
        say_last(f"diffrl train: {line}")
        return WRITE_FAILED
    if summary.get("interrupted") and trainer.stop_signal is not None:
        return exit_status(trainer.stop_signal)
    return 0


WRITE_FAILED = 4
"""Exit status of a run stopped because a file of its run directory could not be written."""


def _unwritable(run_dir) -> str | None:
    """Why no run can be written in ``run_dir`` (one line), or None: checked before compiling."""
    import tempfile
    from pathlib import Path

    try:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=run_dir, prefix=".diffrl-write-test-"):
            pass
    except OSError as e:
        return f"cannot write the run directory {run_dir}: {e.strerror or e}"
    return None


def _settle_checkpoint_writers(timeout_s: float = 10.0) -> None:
    """Let orbax's writer threads of a failed checkpoint finish before the run's one-line verdict.

    When the disk fills up, the save that raised is one of several concurrent writes; the others
    fail moments later in orbax's threads, and their logs, and the tasks asyncio reports as never
    retrieved when they are collected, would otherwise print after the verdict, which a user (and
    a script reading the last line) expects last. Their errors are the same failure, already named."""
    import gc
    import logging
    import threading
    import time

    deadline = time.monotonic() + timeout_s
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and type(thread).__module__.startswith("orbax"):
            try:  # orbax's threads re-raise their own failure from join(): the same one, already named
                thread.join(max(0.0, deadline - time.monotonic()))
            except Exception:
                pass
    gc.collect()  # failed tasks are reported when collected: now, not after the verdict
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # those still alive, reported at exit


def write_failure(error: OSError, run_dir) -> str:
    """One line for a run stopped by a write that failed: which path, why, what was kept and how
    to go on."""
    import errno
    import warnings

    from diffrl.plumbing.checkpoint import latest_valid_checkpoint

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = latest_valid_checkpoint(run_dir)
    kept_text = (f"the last complete checkpoint {kept} is kept" if kept is not None
                 else "no checkpoint had been written")
    hint = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space", errno.EROFS: "make it writable",
            errno.EACCES: "make it writable", errno.EPERM: "make it writable"}.get(error.errno, "fix that")
    resume = f", then continue with `diffrl train --resume {run_dir}`" if kept is not None else ""
    return (f"cannot write {error.filename or run_dir}: {error.strerror or error}; the run stopped and {kept_text}; "
            f"{hint}{resume}")


def _move_aside(out: str) -> None:
    """--move-aside: rename a run at ``out`` out of the way (never delete it)."""
    from diffrl.core.run_dir import move_aside, run_in_dir

    if run_in_dir(out):
        print(f"diffrl train: moved the run in {out} to {move_aside(out)}", file=sys.stderr)
