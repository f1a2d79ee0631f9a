"""Run directories: where a run is written, refusing to start inside another, its config read back, and
how far a run to be resumed has trained.

What a run directory holds (``config.json``'s run record and the codecs it is written with) is
:mod:`diffrl.plumbing.records`, a ground-floor module; this one knows the run config and the algorithms,
so it is the one that turns a stored record back into the config a run trains with.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diffrl.config import RunConfig


def default_run_dir(env: str, algo: str, root: str = "runs") -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    # the ':' of a module:factory env name is not allowed in a file name everywhere
    return Path(root) / f"{env.replace('/', '_').replace(':', '_')}-{algo}-{stamp}"


class RunDirInUse(ValueError):
    """``--out`` names a directory that already holds a run, and ``--resume`` was not given."""


RUN_FILES = ("metrics.jsonl", "summary.json")
"""Files whose presence makes a directory a run that has trained (a directory holding only
config.json and writer.lock was stopped while compiling: nothing in it can be lost)."""


def run_in_dir(run_dir: str | Path) -> str | None:
    """What in ``run_dir`` shows that a run has trained there (None: nothing, safe to start).

    Starting a second run inside a trained one would append to its metrics.jsonl, replace its
    config.json and summary.json and mix two runs' checkpoints, so the caller refuses it."""
    run_dir = Path(run_dir)
    found = [name for name in RUN_FILES if (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0]
    checkpoints = run_dir / "checkpoints"
    if checkpoints.is_dir() and any(p.name.isdigit() for p in checkpoints.iterdir()):
        found.append("checkpoints/")
    return ", ".join(found) or None


def refuse_existing_run(run_dir: str | Path) -> None:
    """Raise :class:`RunDirInUse` when ``run_dir`` holds a run, offering the ways forward."""
    found = run_in_dir(run_dir)
    if found:
        raise RunDirInUse(
            f"--out {run_dir} already holds a run ({found}); nothing was changed. Continue it with "
            f"`diffrl train --resume {run_dir}` (add --total-env-steps N to extend it), or pass a new --out "
            f"directory, or add --move-aside to rename the old run to a free {Path(run_dir).name}.old-N "
            "next to it and start afresh")


def move_aside(run_dir: str | Path) -> Path:
    """Rename ``run_dir`` to the first free ``<name>.old-<n>`` beside it (never deletes a run)."""
    run_dir = Path(run_dir)
    n = 1
    while (target := run_dir.with_name(f"{run_dir.name}.old-{n}")).exists():
        n += 1
    os.rename(run_dir, target)
    return target


def load_run_config(run_dir: str | Path):
    """The run config a run directory was trained with (from its config.json), an instance of its
    algorithm's run config class (:func:`diffrl.config.config_type`).

    Evaluation samplers stored under names since retired (:data:`RENAMED_EVAL_SAMPLERS`) are
    mapped to the new names with a warning: the computation is the same, and a resumed run logs
    them under the new names from then on. Settings stored in the section they have since moved
    out of (:data:`diffrl.config.MOVED_FIELDS`) are read in their new place, with a warning. A config
    stored with every shared section (older run directories) loses the sections its algorithm does not
    read; a setting among them, or among its ignored ``unused_settings``, that is not at its default
    was never read, and is named in a warning.
    """
    from diffrl.algos.registry import without_unused_settings
    from diffrl.config import RENAMED_EVAL_SAMPLERS, RunConfig, as_run_config, full_config_type, move_stored_fields
    from diffrl.plumbing.records import config_from_json

    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a diffrl run directory (no config.json)")
    stored, moves = move_stored_fields(json.loads(path.read_text())["config"], RunConfig.algo)
    if moves:
        warnings.warn(f"{run_dir}: stored settings read in their new place: {', '.join(moves)}", stacklevel=2)
    # read with every section (an older run stored them all; one registered from outside diffrl may add
    # sections of its own), then composed for its algorithm
    config = config_from_json(full_config_type(stored.get("algo", RunConfig.algo)), stored)
    config, unused = without_unused_settings(config)
    if unused:
        warnings.warn(f"{run_dir}: stored settings {', '.join(unused)} were never read by {config.algo}; "
                      "its config does not keep them (the run is unchanged)", stacklevel=2)
    config = as_run_config(config)
    renamed = RENAMED_EVAL_SAMPLERS.get(config.algo, {})
    if any(s in renamed for s in config.eval_samplers):
        samplers = tuple(renamed.get(s, s) for s in config.eval_samplers)
        warnings.warn(f"{run_dir}: stored eval samplers {config.eval_samplers} are now called {samplers}",
                      stacklevel=2)
        config = dataclasses.replace(config, eval_samplers=samplers)
    return config


def resume_config(run_dir: str | Path, **overrides: Any):
    """Config to continue ``run_dir``: same settings and chunk size, optional overrides
    (e.g. a larger ``total_env_steps`` to extend a finished run)."""
    config = load_run_config(run_dir)
    config = dataclasses.replace(config, chunk_iterations=config.iterations_per_chunk,
                                 resume=str(run_dir), out=str(run_dir))
    return dataclasses.replace(config, **overrides) if overrides else config


def resume_progress(config: RunConfig) -> tuple[int, int] | None:
    """(env steps the latest valid checkpoint of ``config.resume`` holds, env steps ``config``
    trains), per seed; None when the run directory has no valid checkpoint."""
    from diffrl.plumbing.checkpoint import latest_valid_checkpoint, read_metadata

    path = latest_valid_checkpoint(config.resume)
    if path is None:
        return None
    meta = read_metadata(path)
    done = int(meta.get("chunk", 0)) * int(meta.get("chunk_iterations") or config.iterations_per_chunk) \
        * config.batch_size
    return done, config.trained_env_steps


def completed_summary(config: RunConfig) -> dict | None:
    """The stored summary of a resumed run that has already trained every step ``config`` asks
    for (a scheduler's requeue of a finished run), else None: such a resume compiles nothing and
    rewrites nothing."""
    progress = resume_progress(config)
    if progress is None or progress[0] < progress[1]:
        return None
    try:
        summary = json.loads((Path(config.resume) / "summary.json").read_text())
    except (OSError, ValueError):
        summary = {}
    return {**summary, "complete": True, "env_steps": progress[0]}
