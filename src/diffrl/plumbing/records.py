"""What diffrl writes to disk and reads back: one codec for each kind of value in its records, and
whole-file writes.

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

Beside it: :mod:`diffrl.plumbing.machine` (library versions, the CPU, the git commit: what every
record says about where it was made) and :mod:`diffrl.plumbing.run_record` (a run directory's
``config.json``, one segment per start or resume).

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
import warnings
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
