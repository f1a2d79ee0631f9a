"""Checkpoints a run can be resumed from: atomic, checksummed, pruned, never unpickled.

Layout of one checkpoint, ``run_dir/checkpoints/<step>/``::

    state/          orbax (tensorstore/OCDBT) arrays of the flattened train state
    metadata.json   format version, algo, env, config, versions, env_steps, iteration,
                    eval_return, and the (path, shape, dtype) of every leaf
    manifest.json   size and sha256 of every other file (written last)

Decisions:

* **Atomic.** Everything is written into ``checkpoints/.tmp-<step>-...`` and the
  directory is renamed to ``<step>`` only when complete (``os.rename`` of a directory
  is atomic on one POSIX file system), so a crash never leaves a half-written
  ``<step>``. Stale ``.tmp-*`` directories are removed by the next save.
* **Corruption is detected** (truncated or altered array files, missing files) by the
  manifest; :func:`latest_valid_checkpoint` walks back from the newest step and skips
  bad ones with a :class:`CorruptCheckpointWarning` naming the reason.
* **Nothing stored is executed.** Arrays are read by orbax's standard array handlers
  (tensorstore), metadata is JSON; the pytree structure comes from the caller's
  ``target`` (a freshly initialised train state of the same config), never from the
  files. Each leaf is saved under a flat name ``leaf_<i>`` and checked against the
  target's key path, shape and dtype before anything is read.
* Orbax refuses zero-size arrays (MJX states have some, e.g. an empty contact list):
  they are recorded in the metadata only and recreated as empty arrays.
* New-style typed PRNG keys are stored as their ``key_data`` and re-wrapped with the
  target's implementation; legacy ``uint32`` keys are plain arrays. Every leaf round-trips
  bit-exactly.
* Retention: the newest ``keep`` checkpoints plus the best by evaluation return, whose
  step is recorded in ``checkpoints/best.json``. Pruning considers only the checkpoints whose
  metadata carries the saving run's ``run_id``: it never deletes another run's.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import jax
import numpy as np

from diffrl.plumbing.machine import library_versions
from diffrl.plumbing.records import atomic_write_json, config_to_json, file_sha256

CHECKPOINT_FORMAT = 1
"""Version of the on-disk layout; restoring a different version is refused."""

CHECKPOINTS_DIR = "checkpoints"
BEST_FILE = "best.json"
_STATE_DIR = "state"
_METADATA_FILE = "metadata.json"
_MANIFEST_FILE = "manifest.json"


class CheckpointError(RuntimeError):
    """A checkpoint cannot be restored (corrupt, other format, algorithm or structure)."""


class CorruptCheckpointWarning(UserWarning):
    """A checkpoint was skipped because it failed verification."""


# ----------------------------------------------------------------------------- helpers
def _is_typed_key(x: Any) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _leaf_record(path, leaf) -> dict:
    key_impl = None
    if _is_typed_key(leaf):
        key_impl = str(jax.random.key_impl(leaf))
        leaf = jax.random.key_data(leaf)
    arr = leaf if isinstance(leaf, (jax.Array, np.ndarray)) else np.asarray(leaf)
    return {"path": jax.tree_util.keystr(path), "shape": list(arr.shape), "dtype": str(arr.dtype),
            "key_impl": key_impl}


def _file_table(root: Path) -> dict[str, dict]:
    table = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != _MANIFEST_FILE:
            table[p.relative_to(root).as_posix()] = {"size": p.stat().st_size, "sha256": file_sha256(p)}
    return table


def _checkpointer():
    import orbax.checkpoint as ocp  # lazy: slow import

    if jax.process_count() == 1:
        return ocp, ocp.Checkpointer(ocp.StandardCheckpointHandler())
    # Multi-process run: the trainer gathers the state to the host and process 0 writes
    # alone (every process reads on resume), so orbax must not wait for its peers.
    me = jax.process_index()
    alone = ocp.options.MultiprocessingOptions(primary_host=me, active_processes={me},
                                               barrier_sync_key_prefix=f"diffrl{me}")
    return ocp, ocp.Checkpointer(ocp.StandardCheckpointHandler(multiprocessing_options=alone),
                                 multiprocessing_options=alone)


def step_dirs(run_dir: Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every checkpoint directory of ``run_dir``, oldest first (verified or not)."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    steps = [(int(p.name), p) for p in root.iterdir() if p.is_dir() and p.name.isdigit()]
    return sorted(steps)


# ----------------------------------------------------------------------------- save
def save_checkpoint(
    run_dir: str | Path,
    step: int,
    state_pytree: Any,
    metadata: dict,
    keep: int = 3,
    best_metric: float | None = None,
) -> Path:
    """Write ``run_dir/checkpoints/<step>/`` atomically and prune old checkpoints.

    Args:
      run_dir: the run directory.
      step: integer name of the checkpoint (e.g. env steps or chunk index); larger = newer.
      state_pytree: the train state (any pytree of arrays, e.g. with a leading seeds axis).
      metadata: JSON-able facts about the run; by convention ``algo``, ``env``, ``config``
        (dict or dataclass), ``env_steps``, ``iteration``. ``format``, ``step``,
        ``versions``, ``created`` and ``leaves`` are added here.
      keep: how many of the newest checkpoints to keep (>= 1); the best one is kept too.
      best_metric: evaluation return of this state (higher is better); recorded as
        ``eval_return`` and used for the ``best.json`` pointer. NaN/None never becomes best.

    Returns the path of the new checkpoint directory.
    """
    if keep < 1:
        raise ValueError(f"keep must be >= 1 (got {keep})")
    step = int(step)
    if step < 0:
        raise ValueError(f"step must be non-negative (got {step})")
    # orbax (tensorstore) needs absolute paths; run directories are often relative (runs/...)
    root = Path(run_dir).resolve() / CHECKPOINTS_DIR
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".tmp-*"):  # left by a crash during an earlier save
        shutil.rmtree(stale, ignore_errors=True)

    leaves_with_paths, _ = jax.tree_util.tree_flatten_with_path(state_pytree)
    records, arrays = [], {}
    for i, (path, leaf) in enumerate(leaves_with_paths):
        rec = _leaf_record(path, leaf)
        records.append(rec)
        data = jax.random.key_data(leaf) if _is_typed_key(leaf) else leaf
        if not isinstance(data, jax.Array):
            data = np.asarray(data)
        if data.size > 0:  # orbax cannot store empty arrays; they are rebuilt from metadata
            arrays[f"leaf_{i:06d}"] = data

    meta = dict(metadata)
    if "config" in meta:
        meta["config"] = config_to_json(meta["config"])
    if best_metric is not None:
        meta["eval_return"] = float(best_metric)
    meta.update(format=CHECKPOINT_FORMAT, step=step, versions=library_versions(),
                created=time.strftime("%Y-%m-%dT%H:%M:%S%z"), leaves=records)

    tmp = root / f".tmp-{step}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        if arrays:
            ocp, ckptr = _checkpointer()
            ckptr.save(tmp / _STATE_DIR, args=ocp.args.StandardSave(arrays))
        else:
            (tmp / _STATE_DIR).mkdir()
        atomic_write_json(tmp / _METADATA_FILE, meta)
        atomic_write_json(tmp / _MANIFEST_FILE, {"format": CHECKPOINT_FORMAT, "files": _file_table(tmp)})
        final = root / str(step)
        if final.exists():  # re-saving a step: swap, never leave the step missing a valid copy
            trash = root / f".tmp-old-{step}-{uuid.uuid4().hex[:8]}"
            os.rename(final, trash)
            os.rename(tmp, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    _update_best(root, step, best_metric)
    _prune(Path(run_dir), keep, meta.get("run_id"))
    return final


def _read_best(root: Path) -> dict | None:
    try:
        return json.loads((root / BEST_FILE).read_text())
    except (OSError, ValueError):
        return None


def _update_best(root: Path, step: int, metric: float | None) -> None:
    if metric is None or not np.isfinite(metric):
        return
    best = _read_best(root)
    if best is not None and (root / str(best.get("step"))).is_dir() \
            and float(best.get("eval_return", -np.inf)) >= float(metric):
        return
    atomic_write_json(root / BEST_FILE, {"step": step, "path": str(step), "eval_return": float(metric)})


def _run_id(path: Path) -> str | None:
    try:
        return read_metadata(path).get("run_id")
    except CheckpointError:  # unreadable metadata: whose it is cannot be told, so it is not ours
        return "unknown"


def _prune(run_dir: Path, keep: int, run_id: str | None = None) -> None:
    """Delete all but the newest ``keep`` checkpoints (and the best) of run ``run_id``.

    Only the run's own checkpoints are ever considered: a checkpoint of another run (metadata
    with another ``run_id``) in the same directory is neither counted nor deleted, so a higher
    step number of a foreign run can never push this run's newest checkpoints out."""
    root = run_dir / CHECKPOINTS_DIR
    best = _read_best(root)
    best_step = int(best["step"]) if best is not None else None
    steps = [(s, p) for s, p in step_dirs(run_dir) if _run_id(p) == run_id]
    for s, p in steps[:-keep]:
        if s != best_step:
            shutil.rmtree(p, ignore_errors=True)


# ----------------------------------------------------------------------------- verify
def read_metadata(path: str | Path) -> dict:
    """The JSON metadata of a checkpoint directory (raises CheckpointError if unreadable)."""
    try:
        return json.loads((Path(path) / _METADATA_FILE).read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint {path}: cannot read {_METADATA_FILE} ({e})") from e


def verify_checkpoint(path: str | Path) -> str | None:
    """``None`` if every file matches the manifest, else a sentence saying what is wrong."""
    path = Path(path).resolve()
    try:
        manifest = json.loads((path / _MANIFEST_FILE).read_text())
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"missing or unreadable {_MANIFEST_FILE} ({e.__class__.__name__})"
    for rel, want in files.items():
        p = path / rel
        if not p.is_file():
            return f"file {rel} is missing"
        size = p.stat().st_size
        if size != want["size"]:
            return f"file {rel} has {size} bytes, expected {want['size']} (truncated?)"
        if file_sha256(p) != want["sha256"]:
            return f"file {rel} does not match its sha256 checksum (corrupted)"
    if _METADATA_FILE not in files:
        return f"{_METADATA_FILE} is not covered by the manifest"
    return None


def latest_valid_checkpoint(run_dir: str | Path) -> Path | None:
    """Newest checkpoint that passes :func:`verify_checkpoint`; corrupt ones are skipped
    with a :class:`CorruptCheckpointWarning`. ``None`` when there is none."""
    for step, path in reversed(step_dirs(Path(run_dir))):
        problem = verify_checkpoint(path)
        if problem is None:
            return path
        warnings.warn(f"skipping corrupt checkpoint {path} (step {step}): {problem}",
                      CorruptCheckpointWarning, stacklevel=2)
    return None


def best_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint named by ``checkpoints/best.json`` if it exists and verifies."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    best = _read_best(root)
    if best is None:
        return None
    path = root / str(best.get("path", best.get("step")))
    problem = verify_checkpoint(path) if path.is_dir() else "directory is missing"
    if problem:
        warnings.warn(f"best checkpoint {path} is unusable: {problem}", CorruptCheckpointWarning,
                      stacklevel=2)
        return None
    return path


# ----------------------------------------------------------------------------- restore
ADDED_LEAVES: tuple[str, ...] = ("['nonfinite_state']",)
"""Path endings of train-state leaves added after checkpoints of this format were first written, whose
stored value is never read (each step overwrites it before anything uses it), so that a checkpoint without
them restores them as zeros instead of being refused: ``env_state.info['nonfinite_state']``, the flag of
the step just taken (``diffrl.envs.wrappers.NonFiniteGuard``, added 2026-12-07)."""


def _stored_index(stored: list[dict], target_records: list[dict]) -> list[int | None]:
    """For each target leaf, the index of its stored leaf; None for a leaf of :data:`ADDED_LEAVES` that
    the checkpoint predates. Position for position when the counts match (as ``_check_structure`` reads)."""
    if len(stored) == len(target_records):
        return list(range(len(target_records)))
    stored_paths = {s["path"] for s in stored}
    index, next_stored = [], 0
    for t in target_records:
        if t["path"].endswith(ADDED_LEAVES) and t["path"] not in stored_paths:
            index.append(None)
        else:
            index.append(next_stored)
            next_stored += 1
    return index


def _check_structure(stored: list[dict], target_records: list[dict]) -> list[int | None]:
    """Raise :class:`CheckpointError` unless the stored leaves are the target's (but for leaves of
    :data:`ADDED_LEAVES` a checkpoint predates); return :func:`_stored_index`."""
    index = _stored_index(stored, target_records)
    present = [t for t, i in zip(target_records, index) if i is not None]
    if len(stored) != len(present):
        raise CheckpointError(
            f"checkpoint has {len(stored)} arrays but the target train state has "
            f"{len(target_records)}: it was saved from a different algorithm, policy or config")
    problems = []
    for s, t in zip(stored, present):
        if (s["path"], s["shape"], s["dtype"], s.get("key_impl")) != \
                (t["path"], t["shape"], t["dtype"], t["key_impl"]):
            problems.append(f"{t['path']}: stored {s['path']} {s['dtype']}{s['shape']}, "
                            f"target {t['dtype']}{t['shape']}")
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise CheckpointError(
            "checkpoint does not match the target train state (different config, e.g. "
            "num_envs, num_seeds or network sizes?):\n  " + "\n  ".join(problems[:5]) + more)
    return index


def check_target(meta: dict, abstract_target: Any) -> None:
    """Raise :class:`CheckpointError` when a target's shapes and dtypes (typed keys given as
    their key data, e.g. from ``jax.eval_shape``) do not match the leaves in a checkpoint's
    metadata: a resume that cannot restore is refused before anything is compiled."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(abstract_target)
    target = [{"path": jax.tree_util.keystr(p), "shape": list(x.shape), "dtype": str(x.dtype), "key_impl": None}
              for p, x in leaves]
    stored = [{**r, "key_impl": None} for r in meta.get("leaves", [])]  # shapes are of the key data
    _check_structure(stored, target)


def restore_checkpoint(
    path: str | Path,
    target_pytree: Any,
    expected_algo: str | None = None,
    expected_env: str | None = None,
    verify: bool = True,
) -> Any:
    """Restore the checkpoint at ``path`` into the structure, shapes, dtypes (and device
    placement) of ``target_pytree``; bit-exact. Nothing stored is executed.

    Raises :class:`CheckpointError` when the format version differs from
    :data:`CHECKPOINT_FORMAT`, ``metadata['algo']``/``['env']`` differ from
    ``expected_algo``/``expected_env`` (when given), the files fail verification, or the
    leaves do not match the target.
    """
    path = Path(path).resolve()
    meta = read_metadata(path)
    fmt = meta.get("format")
    if fmt != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"checkpoint {path} has format version {fmt!r}; this diffrl reads format "
            f"{CHECKPOINT_FORMAT}. Use the diffrl version that wrote it "
            f"(versions: {meta.get('versions', {}).get('diffrl', 'unknown')}).")
    for field, expected in (("algo", expected_algo), ("env", expected_env)):
        if expected is not None and meta.get(field) != expected:
            raise CheckpointError(
                f"checkpoint {path} was written by {field} {meta.get(field)!r}, "
                f"but this run uses {field} {expected!r}")
    if verify:
        problem = verify_checkpoint(path)
        if problem:
            raise CheckpointError(f"checkpoint {path} is corrupt: {problem}")

    leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(target_pytree)
    target_records = [_leaf_record(p, leaf) for p, leaf in leaves_with_paths]
    index = _check_structure(meta.get("leaves", []), target_records)

    default_sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    abstract = {}
    for i, ((_, leaf), rec) in zip(index, zip(leaves_with_paths, target_records)):
        if i is None or int(np.prod(rec["shape"])) == 0:
            continue
        if isinstance(leaf, jax.Array):
            sharding = default_sharding if _is_typed_key(leaf) else leaf.sharding
            abstract[f"leaf_{i:06d}"] = jax.ShapeDtypeStruct(
                tuple(rec["shape"]), jax.numpy.dtype(rec["dtype"]), sharding=sharding)
        else:  # numpy or Python scalar leaf: restore as numpy
            abstract[f"leaf_{i:06d}"] = np.zeros(rec["shape"], jax.numpy.dtype(rec["dtype"]))
    restored = {}
    if abstract:
        ocp, ckptr = _checkpointer()
        restored = ckptr.restore(path / _STATE_DIR, args=ocp.args.StandardRestore(abstract))

    out = []
    for i, ((_, leaf), rec) in zip(index, zip(leaves_with_paths, target_records)):
        name = f"leaf_{i:06d}" if i is not None else None
        if name in restored:
            value = restored[name]
        elif isinstance(leaf, jax.Array):  # an empty leaf, or one the checkpoint predates
            value = jax.numpy.zeros(rec["shape"], jax.numpy.dtype(rec["dtype"]))
            if not _is_typed_key(leaf):
                value = jax.device_put(value, leaf.sharding)
        else:
            value = np.zeros(rec["shape"], jax.numpy.dtype(rec["dtype"]))
        if _is_typed_key(leaf):
            value = jax.random.wrap_key_data(value, impl=jax.random.key_impl(leaf))
        elif isinstance(leaf, (bool, int, float, complex)) and not isinstance(leaf, np.generic):
            value = type(leaf)(np.asarray(value).item())
        elif isinstance(leaf, np.generic):
            value = np.asarray(value).astype(leaf.dtype)[()]
        out.append(value)
    return jax.tree_util.tree_unflatten(treedef, out)
