"""The benchmark ledger's records: one small JSON file per finished cell, and the config hash.

A record is written (atomically) only after its cell's program finished, so a file under
``benchmarks/results/ledger/records/`` always means a complete cell. Format
(``diffrl-ledger-cell/1``)::

    {
      "schema": "diffrl-ledger-cell/1",
      "cell": "m1--CartpoleSwingup--reppo--s0x5",   # the plan's cell id (ledger_plan.py)
      "matrix": "m1", "label": "reppo", "algo": "reppo", "task": "playground/CartpoleSwingup",
      "preset": "reppo-dmc-cpu",                     # the resolved preset's name (a label only)
      "overrides": {},                               # dotted name -> value, as the plan declares
      "base_seed": 0, "num_seeds": 5,                # seed i: fold_in(PRNGKey(base_seed), i)
      "config_hash": "3f2a...",                      # config_hash(config) of the resolved config
      "config": {"reppo.kl_bound": 0.1, ...},        # the hashed values: sorted dotted names
      "samplers": ["mean", "sample"],                # every evaluation sampler the policy offers
      "env_steps": [0, 40960, ...],                  # per evaluation: env steps trained (per seed)
      "walltime": [0.0, 61.2, ...],                  # per evaluation: s since training started
      "curves": {"mean": {"returns": [[...5 seeds...], ...]}, ...},  # per sampler, per evaluation,
                                                     #   per seed; plus behaviour_entropy, mode_reached,
                                                     #   success_rate where the task reports them
      "timing": {"compile_s": 41.0, "train_s": 610.2, "eval_s": 40.3, "wall_s": 700.1,
                 "cpu_s": 672.5},                    # the process's CPU time over wall_s' span (records
                                                     #   from 2026-12-07 on; ran_under_load)
      "versions": {...}, "machine": {"cpu": ..., "cpu_identity": {...}, "cpu_count": 2, "xla_flags": ...},
                                                     # cpu_identity (family, model, SIMD extensions)
                                                     #   from 2026-12-07 on
      "git_commit": "...", "created": "2026-12-05T21:10:00+0000", "command": [...],
      "diverged": {"error": "non-finite losses at iteration 93, seed 2 ...", "seeds": [2]}
                                                     # only where training produced NaN/inf: the
                                                     #   trainer's first error and the cell's seeds
                                                     #   that ended non-finite (trained on to the budget)
    }

**The config hash** is a SHA-256 over the resolved values that the cell's algorithm reads, in
a canonical form: the run's own settings (budget, batch, seeds, evaluation, environment) and
the config sections the algorithm reads (``diffrl.algos.ALGORITHM_SECTIONS``, less the fields
it ignores, ``UNUSED_SETTINGS``), flattened to sorted dotted names (``reppo.kl_bound``) with
JSON values. It does not depend on how the config classes are laid out, so a refactor that
keeps every name and value keeps every record valid; a change of any value the algorithm
reads makes the record *stale* (reported, never mixed into a table). Settings that moved to
another section (``diffrl.config.MOVED_FIELDS``) are hashed under their names from before the
move (:func:`hashed_settings`), so the move itself leaves every record valid.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any

SCHEMA = "diffrl-ledger-cell/1"

# Settings of a run that cannot change its numbers: where it writes, how it reports, how it is
# split into processes or devices, and the preset's name (its values are what counts).
RUN_LOCAL_FIELDS = frozenset({
    "out", "resume", "progress", "tensorboard", "wandb", "checkpoint_every", "keep_checkpoints",
    "preset", "host_workers", "num_devices", "coordinator_address", "num_processes", "process_id",
    "check_finite",
})

HASHED_THOUGH_UNUSED: dict[str, frozenset[str]] = {
    "ppo": frozenset({"gaussian.kl_samples"}), "spo": frozenset({"gaussian.kl_samples"}),
}
"""Settings declared unused (``AlgorithmSpec.unused_settings``) after records were hashed with them,
on 2026-12-06: PPO and SPO never read REPPO's KL draws. An unused setting cannot be changed (it is
refused), so it always holds its default and hashing it changes no verdict; it stays in the hash so
that the records written before keep theirs."""

REQUIRED = ("schema", "cell", "matrix", "label", "algo", "task", "base_seed", "num_seeds", "config_hash",
            "config", "samplers", "env_steps", "walltime", "curves", "timing", "versions", "machine")


def _plain(value: Any) -> Any:
    """JSON-ready value with tuples as lists (the canonical form of a sequence)."""
    return json.loads(json.dumps(value, default=str))


def hashed_settings(config) -> dict[str, Any]:
    """{dotted name: value} of every resolved setting ``config.algo`` reads, sorted by name."""
    from diffrl.algos import ALGORITHM_SECTIONS, CONFIG_SECTIONS, UNUSED_SETTINGS

    if config.algo not in ALGORITHM_SECTIONS:
        raise ValueError(f"unknown algorithm {config.algo!r}")
    flat: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name in CONFIG_SECTIONS:
            if f.name not in ALGORITHM_SECTIONS[config.algo]:
                continue
            for sub in dataclasses.fields(value):
                flat[f"{f.name}.{sub.name}"] = _plain(getattr(value, sub.name))
        elif f.name not in RUN_LOCAL_FIELDS:
            flat[f.name] = _plain(value)
    for dotted in UNUSED_SETTINGS.get(config.algo, {}):
        if dotted not in HASHED_THOUGH_UNUSED.get(config.algo, ()):
            flat.pop(dotted, None)
    return dict(sorted(_named_as_before_the_move(flat, config).items()))


def _named_as_before_the_move(flat: dict[str, Any], config) -> dict[str, Any]:
    """``flat`` with the trust-region settings that moved to the algorithm's section
    (``diffrl.config.MOVED_FIELDS``: ``diffusion.trust_region`` -> ``reppo.trust_region``,
    ``adjoint.kl_bound`` -> ``reppo.kl_bound`` (amdp-off: ``offpolicy.kl_bound``), ...) under the names
    they had before, as the records committed before the move hashed them: the hash names the settings,
    so without this every record of an algorithm with a moved setting would turn stale though no value
    changed. Before the move a section an algorithm read was hashed whole (less its unused settings), so
    an old name is hashed wherever the algorithm read its section and reads the new one's section
    (amdp-backprop's ignored adjoint.trust_region included; dime-off's and dppo's diffusion.kl_* were
    unused, and their new section is one they do not read), with the value at the new name; the new
    names are dropped, and ``reppo.kl_bound``, which existed before, is dropped only for the algorithms
    that then read adjoint.kl_bound instead (``diffrl.config.READ_BEFORE_MOVE``: amdp)."""
    from diffrl.algos import ALGORITHM_SECTIONS
    from diffrl.config import MOVED_FIELDS, READ_BEFORE_MOVE, moved_field

    reads = ALGORITHM_SECTIONS[config.algo]
    out = dict(flat)
    for old in MOVED_FIELDS:
        new = moved_field(old, config.algo)
        section, _, name = new.partition(".")
        if old.partition(".")[0] in reads and section in reads:
            out[old] = _plain(getattr(getattr(config, section), name))
        existed = new == MOVED_FIELDS[old] and old in READ_BEFORE_MOVE
        if not existed or config.algo in READ_BEFORE_MOVE[old]:
            out.pop(new, None)
    return out


def settings_hash(settings: dict[str, Any]) -> str:
    """SHA-256 (first 16 hex digits) of sorted dotted settings in canonical JSON."""
    text = json.dumps(dict(sorted(settings.items())), sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def config_hash(config) -> str:
    return settings_hash(hashed_settings(config))


def changed_settings(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Dotted names whose values differ (or that exist on one side only)."""
    return sorted(k for k in set(old) | set(new) if old.get(k, "<absent>") != new.get(k, "<absent>"))


def _float(value) -> float:
    try:
        return float(value)  # the trainer's logger writes non-finite numbers as strings
    except (TypeError, ValueError):
        return math.nan


PER_SEED_METRICS = {"seed_returns": "returns", "seed_behaviour_entropy": "behaviour_entropy",
                    "seed_mode_reached": "mode_reached", "seed_success_rate": "success_rate"}


def curves_from_rows(rows: list[dict], samplers: list[str], num_seeds: int) -> dict[str, dict[str, list]]:
    """Per sampler, the per-seed evaluation series logged by the trainer (``eval/seed_*`` for the
    first sampler, ``eval/<sampler>/seed_*`` for the others): {sampler: {metric: [[seed values]
    per evaluation]}}."""
    curves: dict[str, dict[str, list]] = {}
    for i, sampler in enumerate(samplers):
        prefix = "eval/" if i == 0 else f"eval/{sampler}/"
        series: dict[str, list] = {}
        for logged, name in PER_SEED_METRICS.items():
            values = [r.get(prefix + logged) for r in rows]
            if all(isinstance(v, list) for v in values):
                if any(len(v) != num_seeds for v in values):
                    raise ValueError(f"{prefix + logged}: expected {num_seeds} values per evaluation")
                series[name] = [[_float(x) for x in v] for v in values]
        if "returns" not in series:
            raise ValueError(f"no per-seed returns logged for sampler {sampler!r} ({prefix}seed_returns)")
        curves[sampler] = series
    return curves


def validate_record(record: dict, source: str = "record") -> dict:
    """Raise ValueError naming what is missing or inconsistent; return the record."""
    from suite_records import check_schema

    check_schema(record, SCHEMA, REQUIRED, source)
    n, seeds = len(record["env_steps"]), int(record["num_seeds"])
    if n < 2 or len(record["walltime"]) != n:
        raise ValueError(f"{source}: env_steps and walltime must be equal-length lists of >= 2 evaluations")
    if list(record["env_steps"]) != sorted(record["env_steps"]):
        raise ValueError(f"{source}: env_steps must be increasing")
    if not record["samplers"] or set(record["curves"]) != set(record["samplers"]):
        raise ValueError(f"{source}: curves must hold exactly the samplers {record['samplers']}")
    for sampler, series in record["curves"].items():
        for name, values in series.items():
            if len(values) != n or any(len(v) != seeds for v in values):
                raise ValueError(f"{source}: curves[{sampler!r}][{name!r}] must be {n} evaluations x {seeds} seeds")
    if settings_hash(record["config"]) != record["config_hash"]:
        raise ValueError(f"{source}: config_hash does not match the recorded config")
    return record


ALONE_CPU_SHARE = 0.9
"""A cell whose process got less of its one core than this (CPU time / wall-clock) shared it with
other work. Alone, cells measured 0.95-0.98 (imports, checkpoint writes and evaluation hand-offs are
the rest); one other process on the same core gives about 0.5."""


def ran_under_load(record: dict) -> bool:
    """True if other work shared the cell's core, so its wall-clock overstates what the cell costs
    alone (its returns are unaffected).

    Records with ``timing.cpu_s`` (the cell process's CPU time over the same span as ``wall_s``; the
    ledger pins each cell to one core) answer it directly: less than :data:`ALONE_CPU_SHARE` of the
    wall-clock. Older records only have the machine's load averages at the cell's start and end: loaded
    if the 1-minute average at the start, or any of the 1-, 5- and 15-minute averages at the end (the
    last quarter hour of the cell), exceeded the core count by more than one. Those are machine-wide, so
    work on the other core can mark a cell that had its own core to itself."""
    timing = record.get("timing") or {}
    if timing.get("cpu_s") is not None and timing.get("wall_s"):
        return timing["cpu_s"] < ALONE_CPU_SHARE * timing["wall_s"]
    machine = record.get("machine", {})
    cores = machine.get("cpu_count") or 1
    start, end = (list(machine.get("loadavg_start_end") or []) + [None, None])[:2]
    loads = ([start[0]] if start else []) + (list(end) if end else [])
    return any(load > cores + 1 for load in loads)


def final_returns(record: dict, sampler: str | None = None) -> list[float]:
    """Per-seed return at the last evaluation of ``sampler`` (default: the policy's first)."""
    sampler = sampler or record["samplers"][0]
    return list(record["curves"][sampler]["returns"][-1])


def read_records(folder: str | Path) -> list[dict]:
    """Every record in ``folder`` (``*.json``), validated, in file-name order."""
    folder = Path(folder)
    return [validate_record(json.loads(p.read_text()), str(p)) for p in sorted(folder.glob("*.json"))]
