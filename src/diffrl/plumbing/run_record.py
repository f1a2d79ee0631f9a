"""A run directory's ``config.json`` (:func:`write_run_record`, :func:`read_run_record`): the resolved
config, library versions, the machine, the git commit, the command, and one segment per start or
resume, so the first segment's settings and every later change are kept.
"""
from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from diffrl.plumbing.machine import git_commit, library_versions, machine_record
from diffrl.plumbing.records import atomic_write_json, config_to_json


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


def _segments(previous: dict | None, config: dict, began_at: int, relayout=None) -> list[dict]:
    """The run's segments so far plus the one starting now at env step ``began_at``.

    Segments that began at or after ``began_at`` were trained past the restored checkpoint
    (their steps are recomputed now, their rows were dropped from metrics.jsonl): they are
    superseded by this one. A record written before segments were kept becomes one segment.
    ``relayout`` puts a config stored by an older diffrl in the current layout before its changes
    are listed (a setting that only moved section has not changed)."""
    old = []
    if previous:
        old = previous.get("segments") or [{
            "began_at_env_steps": 0, "config": previous.get("config", {}), "command": previous.get("command"),
            "created": previous.get("created"), "git_commit": previous.get("git_commit"), "changed": {}}]
    old = [s for s in old if s["began_at_env_steps"] < began_at]
    changed = config_changes((relayout or (lambda c: c))(old[-1]["config"]), config) if old else {}
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
    resolved = config_to_json(config)
    record = {
        "config": resolved,
        "versions": library_versions(),
        "machine": machine_record(),
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": current_command(),
        "run_id": (previous or {}).get("run_id") if previous else uuid.uuid4().hex,
        "segments": _segments(previous, resolved, began_at, getattr(type(config), "in_current_layout", None)),
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
