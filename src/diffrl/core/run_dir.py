"""Run directories and run records: resolved config, library versions, machine, git commit."""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
import uuid
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

RECORDED_PACKAGES = ("diffrl", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "playground",
                     "mujoco", "mujoco-mjx", "brax", "gymnax", "numpy", "tyro")


def default_run_dir(env: str, algo: str, root: str = "runs") -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{env.replace('/', '_')}-{algo}-{stamp}"


def package_versions(names, missing: str = "not installed") -> dict[str, str]:
    """{package: installed version, or ``missing``} for each of ``names``."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = missing
    return out


def library_versions() -> dict[str, str]:
    return {"python": sys.version.split()[0], "platform": platform.platform(),
            **package_versions(RECORDED_PACKAGES)}


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what the platform module knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_record() -> dict[str, Any]:
    """What besides the code and config decides a run's float rounding, and so its per-seed curves:
    the CPU (x86 models round differently: a learning run's seeds can end apart on two machines),
    the core count and the XLA flags the run was started with."""
    return {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "jax_platforms": os.environ.get("JAX_PLATFORMS", "")}


def git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def config_to_dict(config: Any) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def atomic_write_json(path: Path, data: Any) -> None:
    """Write JSON so that a crash never leaves a half-written file."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


SEGMENT_IGNORED = ("resume", "out", "chunk_iterations")
"""Fields every resume sets (where and how to resume), not settings the run trains with."""


def config_changes(before: dict, after: dict) -> dict[str, list]:
    """{dotted field: [old, new]} of the settings that differ between two config dicts."""
    a, b = _flat(before), _flat(after)
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b))
            if a.get(k) != b.get(k) and k not in SEGMENT_IGNORED}


_COMMAND: list[str] | None = None


def set_command(argv: list[str]) -> None:
    """Record the command line a run is started with (``diffrl.cli.main`` calls it with the
    arguments it parses, which are ``sys.argv`` only when run from a shell)."""
    global _COMMAND
    _COMMAND = list(argv)


def current_command() -> list[str]:
    """The command of the run being started: the one :func:`set_command` recorded, else sys.argv."""
    return list(_COMMAND) if _COMMAND is not None else list(sys.argv)


def _segments(previous: dict | None, config: dict, began_at: int) -> list[dict]:
    """The run's segments so far plus the one starting now at env step ``began_at``.

    Segments that began at or after ``began_at`` were trained past the restored checkpoint
    (their steps are recomputed now, their rows were dropped from metrics.jsonl): they are
    superseded by this one. A record written before segments were kept becomes one segment."""
    old = []
    if previous:
        old = previous.get("segments") or [{
            "began_at_env_steps": 0, "config": previous.get("config", {}), "command": previous.get("command"),
            "created": previous.get("created"), "git_commit": previous.get("git_commit"), "changed": {}}]
    old = [s for s in old if s["began_at_env_steps"] < began_at]
    changed = config_changes(old[-1]["config"], config) if old else {}
    return old + [{"began_at_env_steps": began_at, "config": config, "command": current_command(),
                   "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "git_commit": git_commit(),
                   "changed": changed}]


def read_run_record(run_dir: str | Path) -> dict | None:
    """config.json of a run directory as a dict (None when absent or unreadable)."""
    try:
        return json.loads((Path(run_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None


def write_run_record(run_dir: Path, config: Any, extra: dict | None = None, began_at: int = 0) -> dict:
    """Write config.json: the resolved config and command of the segment starting now at env
    step ``began_at`` (0: a new run), after the segments a resumed run already had.

    A resume may change settings (a larger budget, a new learning rate): the top-level
    ``config`` is the one in force now, ``segments`` keeps every earlier one and its command,
    so the first segment's settings are never lost. ``run_id`` names the run for its
    checkpoints (pruning touches only this run's own)."""
    previous = read_run_record(run_dir) if began_at > 0 or getattr(config, "resume", None) else None
    resolved = config_to_dict(config)
    record = {
        "config": resolved,
        "versions": library_versions(),
        "machine": machine_record(),
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": current_command(),
        "run_id": (previous or {}).get("run_id") if previous else uuid.uuid4().hex,
        "segments": _segments(previous, resolved, began_at),
    }
    if extra:
        record.update(extra)
    atomic_write_json(Path(run_dir) / "config.json", record)
    return record


def segments_summary(record: dict | None) -> list[dict]:
    """The segments of a run record without their full configs: where each began, its command
    and what it changed (for summary.json and ``diffrl eval``)."""
    return [{k: s.get(k) for k in ("began_at_env_steps", "command", "changed")}
            for s in (record or {}).get("segments", [])]


def describe_segments(record: dict | None) -> list[str]:
    """One line per segment: the env step it began at, its command, and the settings it changed."""
    lines = []
    for s in segments_summary(record):
        command = " ".join(map(str, s["command"] or []))
        changed = "; ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in (s["changed"] or {}).items())
        lines.append(f"from {s['began_at_env_steps']:,} env steps: {command}" + (f" (changed {changed})" if changed else ""))
    return lines


def load_run_config(run_dir: str | Path):
    """The TrainConfig a run directory was trained with (from its config.json).

    Evaluation samplers stored under names since retired (:data:`RENAMED_EVAL_SAMPLERS`) are
    mapped to the new names with a warning: the computation is the same, and a resumed run logs
    them under the new names from then on.
    """
    from diffrl.algos import without_unused_settings
    from diffrl.config import RENAMED_EVAL_SAMPLERS, TrainConfig
    from diffrl.export import config_from_json

    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a diffrl run directory (no config.json)")
    config = config_from_json(TrainConfig, json.loads(path.read_text())["config"])
    config, unused = without_unused_settings(config)
    if unused:
        warnings.warn(f"{run_dir}: stored settings {', '.join(unused)} were never read by {config.algo}; "
                      "they are reset to their defaults (the run is unchanged)", stacklevel=2)
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
