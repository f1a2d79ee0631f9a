"""What diffrl writes to disk and reads back: run records, and one codec for each kind of value in them.

* **Config <-> JSON.** :func:`config_to_json` is the one encoder of a config dataclass (a run's
  ``TrainConfig`` in ``config.json`` and in checkpoint metadata, a policy's or critic's config in
  an export) and :func:`config_from_json` the one decoder, which also reads configs stored before
  a field was renamed or added.
* **Arrays <-> bytes.** Parameter pytrees are stored flat, keyed by their leaves' paths
  (:func:`flatten_params`), and normaliser statistics as their three arrays (:func:`stats_arrays`),
  as ``.npz`` bytes (:func:`npz_bytes`) named in a record by their sha256 (:func:`sha256`). They
  are read back by :func:`load_tree` and :func:`load_stats`: checksum first, never unpickled, every
  array compared with the tree a config builds by path, shape and dtype (:func:`check_params`).
* **Files.** :func:`write_bytes` and :func:`atomic_write_json` replace a file whole, so a crash
  never leaves half of one.
* **Run records.** ``config.json`` of a run directory (:func:`write_run_record`,
  :func:`read_run_record`): the resolved config, library versions, the machine, the git commit, the
  command, and one segment per start or resume.

A ground-floor module: of diffrl it imports only the normaliser's statistics type, so the run
directory, checkpoints, exports and benchmark records all build on it. Turning a stored config back into a run's
``TrainConfig`` (which knows the algorithms) is :func:`diffrl.core.run_dir.load_run_config`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
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

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.maths.normalization import RunningStats


class ExportError(RuntimeError):
    """An export directory cannot be loaded (other format, corrupt, unknown kind), or a stored config
    names fields its class does not have. Raised by the decoders here and by :mod:`diffrl.artefacts.export`,
    which offers it under its own name."""


# ----------------------------------------------------------------------------- config <-> JSON
def config_to_json(config: Any) -> dict:
    """A config as JSON values: a dataclass instance (nested dataclasses included) becomes a dict,
    tuples become lists; a dict is taken as already converted. A value JSON cannot hold is written
    as its ``str`` rather than failing the run or export that stores it."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    return json.loads(json.dumps(config, default=str))


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _to_tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_to_tuples(v) for v in value)
    return value


def config_from_json(config_class: type, fields: dict) -> Any:
    """Rebuild a frozen config dataclass: JSON lists become tuples, nested dataclass
    fields are rebuilt from their default's type; unknown fields are refused.

    A field the class renamed (its optional class attribute ``renamed_fields``, old -> new, or
    old -> (new, "negated") when the convention's sign changed) is read under its new name with a
    warning, so configs stored before the rename load. A field added later and absent from the stored
    config takes the value of the class attribute ``absent_field_values`` (name -> value), if it has
    one, rather than its default: the behaviour the stored policy was trained with. A field that moved
    to another config (the class attribute ``moved_fields``, name -> its new dotted name: a policy's
    trust-region settings, now the algorithm's) is dropped with a warning: the stored config alone
    (an export's policy) never read it.
    """
    known = {f.name: f for f in dataclasses.fields(config_class)}
    moved = {k: v for k, v in getattr(config_class, "moved_fields", {}).items() if k in fields and k not in known}
    if moved:
        warnings.warn(f"{config_class.__name__}: stored field(s) now set by the training algorithm are not "
                      "read: " + ", ".join(f"{old} (now {new})" for old, new in moved.items()), stacklevel=2)
        fields = {k: v for k, v in fields.items() if k not in moved}
    renamed = {}
    for old, new in getattr(config_class, "renamed_fields", {}).items():
        new_name, how = (new, None) if isinstance(new, str) else new
        if old in fields and new_name not in fields:
            renamed[old] = (new_name, how)
    if renamed:
        warnings.warn(f"{config_class.__name__}: stored field(s) read under their new names: "
                      + ", ".join(f"{old} -> {new}" + (" (negated)" if how == "negated" else "")
                                  for old, (new, how) in renamed.items()), stacklevel=2)
        converted = {}
        for name, value in fields.items():
            new_name, how = renamed.get(name, (name, None))
            converted[new_name] = -value if how == "negated" else value
        fields = converted
    absent = {k: v for k, v in getattr(config_class, "absent_field_values", {}).items() if k not in fields}
    if absent:  # fields added after the config was stored: the values it was trained with
        fields = {**fields, **absent}
    unknown = sorted(set(fields) - set(known))
    if unknown:
        raise ExportError(f"{config_class.__name__} has no field(s) {', '.join(unknown)}: the "
                          "export was written by a different version of the policy")
    kwargs = {}
    for name, value in fields.items():
        default = _field_default(known[name])
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            kwargs[name] = config_from_json(type(default), value)
        else:
            kwargs[name] = _to_tuples(value)
    return config_class(**kwargs)


# ----------------------------------------------------------------------------- arrays <-> bytes
def path_name(path) -> str:
    """A pytree key path as the name its leaf is stored under: ``"params/MLP_0/Dense_0/kernel"``."""
    parts = []
    for k in path:
        if isinstance(k, jax.tree_util.DictKey):
            parts.append(str(k.key))
        elif isinstance(k, jax.tree_util.GetAttrKey):
            parts.append(k.name)
        elif isinstance(k, jax.tree_util.SequenceKey):
            parts.append(str(k.idx))
        else:
            parts.append(str(k))
    return "/".join(parts)


def flatten_params(params: Any) -> dict[str, np.ndarray]:
    """Pytree -> {"a/b/c": np.ndarray} keyed by the leaves' paths."""
    flat = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        name = path_name(path)
        if name in flat:
            raise ValueError(f"two parameters share the path name {name!r}")
        flat[name] = np.asarray(leaf)
    return flat


def check_params(flat: dict[str, np.ndarray], template: Any, what: str) -> None:
    """Raise :class:`ExportError` listing every array of ``flat`` that is missing from, extra to, or
    of another shape or dtype than the leaves of ``template`` (a pytree or its ``jax.eval_shape``)."""
    want = {name: (tuple(s.shape), np.dtype(s.dtype)) for name, s in
            ((path_name(p), leaf) for p, leaf in jax.tree_util.tree_flatten_with_path(template)[0])}
    missing, extra_names = sorted(set(want) - set(flat)), sorted(set(flat) - set(want))
    bad = [f"{n}: {flat[n].dtype}{flat[n].shape}, expected {want[n][1]}{want[n][0]}"
           for n in sorted(set(want) & set(flat)) if (flat[n].shape, flat[n].dtype) != want[n]]
    if missing or extra_names or bad:
        lines = ([f"missing {n}" for n in missing] + [f"unexpected {n}" for n in extra_names] + bad)
        raise ExportError(f"{what} do not match the policy built from the config:\n  "
                          + "\n  ".join(lines[:8]))


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """The bytes of an ``.npz`` file holding ``arrays`` (hashed before they are written)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


STATS_FIELDS = ("mean", "var", "count")


def stats_arrays(stats: RunningStats) -> dict[str, np.ndarray]:
    """Normaliser statistics (one seed's) as float32 arrays by field name, for :func:`npz_bytes`."""
    return {k: np.asarray(getattr(stats, k), np.float32) for k in STATS_FIELDS}


def load_npz(path: Path, sha: str, listed_in: str) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file whose sha256 the record ``listed_in`` gives as ``sha``
    (checked before anything is parsed; arrays are read with ``allow_pickle=False``)."""
    data = Path(path).read_bytes()
    if sha256(data) != sha:
        raise ExportError(f"{path} does not match its checksum in {listed_in} "
                          "(truncated or modified)")
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def load_tree(path: Path, sha: str, template: Any, listed_in: str) -> Any:
    """The parameter pytree stored in ``path`` (checksum, paths, shapes and dtypes checked against
    ``template``, the tree's ``jax.eval_shape``)."""
    flat = load_npz(path, sha, listed_in)
    check_params(flat, template, f"arrays in {path}")
    paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    return jax.tree_util.tree_unflatten(treedef, [jnp.asarray(flat[path_name(p)]) for p, _ in paths])


def load_stats(path: Path, sha: str, listed_in: str) -> RunningStats:
    """Normaliser statistics stored in ``path`` (checksum checked)."""
    s = load_npz(path, sha, listed_in)
    return RunningStats(**{k: jnp.asarray(s[k]) for k in STATS_FIELDS})


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, read in blocks (checkpoint arrays can be large)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ----------------------------------------------------------------------------- files
def write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash never leaves a half-written file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_json(path: Path, data: Any) -> None:
    """Write JSON so that a crash never leaves a half-written file."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- run records
RECORDED_PACKAGES = ("diffrl", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "playground",
                     "mujoco", "mujoco-mjx", "brax", "gymnax", "numpy", "tyro")


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


CPUINFO = Path("/proc/cpuinfo")


def first_processor(cpuinfo: Path = CPUINFO) -> dict[str, str]:
    """The fields of the first processor's block of ``cpuinfo`` (Linux's /proc/cpuinfo); {} where it
    cannot be read. Every core of a machine reports the same model and extensions."""
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if not key and fields:  # a blank line ends the first block
                break
            fields.setdefault(key, value.strip())
    except OSError:
        return {}
    return fields


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what the platform module knows."""
    return first_processor(cpuinfo).get("model name") or platform.processor() or platform.machine()


SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
              "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "asimd", "sve", "sve2")
"""The vector extensions XLA:CPU may compile for (it targets the host's features): two machines that
differ in them run differently compiled programs, whose float rounding differs."""


def cpu_identity(cpuinfo: Path = CPUINFO) -> dict[str, Any]:
    """The CPU's vendor, family and model numbers and its SIMD extensions (Linux: /proc/cpuinfo; {}
    elsewhere). The model name alone can hide them (a virtual machine may report just "AMD EPYC",
    for Zen 2 without AVX-512 and Zen 4 with it alike)."""
    fields = first_processor(cpuinfo)
    if not fields:
        return {}
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    identity = {name: fields[key] for name, key in (("vendor", "vendor_id"), ("family", "cpu family"),
                                                    ("model", "model"), ("implementer", "CPU implementer"),
                                                    ("part", "CPU part")) if key in fields}
    return {**identity, "simd": [flag for flag in SIMD_FLAGS if flag in flags]}


def machine_record() -> dict[str, Any]:
    """What besides the code and config decides a run's float rounding, and so its per-seed curves:
    the CPU (x86 models round differently: a learning run's seeds can end apart on two machines; its
    model name, family, model and SIMD extensions), the core count and the XLA flags the run was
    started with."""
    return {"cpu": cpu_model(), "cpu_identity": cpu_identity(), "cpu_count": os.cpu_count(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""), "jax_platforms": os.environ.get("JAX_PLATFORMS", "")}


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
