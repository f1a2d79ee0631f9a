"""Traced programs kept between processes, so that a second start skips tracing as well as compiling.

JAX's persistent compilation cache (``diffrl.cli.use_compile_cache``) skips XLA's compilation on a
second run of the same configuration, but not what comes before it: tracing the Python code into a
jaxpr and lowering it to StableHLO, which for a training chunk that unrolls a MuJoCo step is most of
what is left of the start (measured for ``make train``, TruDi on CartpoleBalance, one core: 4 s to
trace the chunk, 1.2 s to lower it, 2 + 0.8 s for the initial state, 2 s for the evaluation).

:func:`compiled_program` traces a function once, keeps its StableHLO as a serialized
:class:`jax.export.Exported` (JAX's stable format for exactly this) under the cache directory, and
on later starts reads it back, so that the only work left is loading the executable from JAX's cache.
The program is always the exported one, cache on or off, hit or miss: one configuration compiles to
one program, and a run and its resume (or a run with and without the cache) compute the same bits.

An entry is found only by everything that decides the program: the function's name, the run's
identity (:func:`program_identity`: the run config, a digest of diffrl's own source files, the
versions of the libraries traced into the program, the devices) and the shapes, dtypes and shardings
of the arguments. Configurations whose code diffrl cannot vouch for (an environment or algorithm
from outside diffrl) get no identity and are traced every time; an entry that cannot be read is
traced anew and replaced.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import sys
import uuid
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import jax

FORMAT = 1
"""Bumped when what an entry holds changes; part of every key."""

MAX_ENTRIES = 256
"""Entries kept (about 0.5 MB each); the least recently written beyond this are removed."""

TRACED_PACKAGES = ("jax", "jaxlib", "flax", "optax", "mujoco", "mujoco-mjx", "playground", "brax", "gymnax",
                   "ml-collections", "numpy")
"""Distributions whose code can end up inside a traced program: a new version is a new program."""

_HOST_ONLY_FIELDS = ("out", "resume", "progress", "tensorboard", "wandb", "wandb_project", "wandb_entity")
"""Run settings that never reach a traced program (where files go, what is printed)."""


@lru_cache(maxsize=None)
def source_digest() -> str:
    """sha256 over diffrl's own Python files (path and contents): any edit is a new program."""
    root = Path(__file__).resolve().parents[1]  # the diffrl package (this module is in plumbing/)
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _builtin(config) -> bool:
    """Whether every piece of code the run traces is diffrl's or a pinned library's: not an
    environment or algorithm named by ``module:attribute`` or registered from outside."""
    import importlib

    from diffrl.algos.registry import BUILTIN_MODULES, find
    from diffrl.envs.registry import is_builtin

    spec = find(config.algo)
    ours = any(spec is s for module in BUILTIN_MODULES for s in importlib.import_module(module).SPECS)
    return ours and is_builtin(config.env)


def program_identity(config) -> dict | None:
    """What, beside the arguments, decides the programs a run of ``config`` compiles; None when
    diffrl cannot tell (code from outside diffrl), and then nothing is kept."""
    if not _builtin(config):
        return None
    from diffrl.plumbing.machine import package_versions
    from diffrl.plumbing.records import config_to_json

    settings = {k: v for k, v in config_to_json(config).items() if k not in _HOST_ONLY_FIELDS}
    devices = jax.devices()
    return {"format": FORMAT, "config": settings, "source": source_digest(),
            "versions": package_versions(TRACED_PACKAGES),
            "python": sys.version.split()[0], "backend": jax.default_backend(),
            "devices": [d.device_kind for d in devices], "processes": jax.process_count(),
            "x64": bool(jax.config.jax_enable_x64), "xla_flags": os.environ.get("XLA_FLAGS", "")}


def cache_dir() -> Path | None:
    """Where entries are kept: beside JAX's persistent compilation cache (``<dir>-exported``), and
    only while that cache is on (an entry is worth little if its program must be compiled anyway)."""
    jax_dir = jax.config.jax_compilation_cache_dir
    if not jax_dir:
        return None
    jax_dir = Path(jax_dir)
    return jax_dir.parent / f"{jax_dir.name}-exported"


def _avals(leaves) -> list:
    return [(tuple(x.shape), str(x.dtype), str(getattr(x, "sharding", None))) for x in leaves]


def _tree_digest(tree) -> str:
    """A digest of a treedef that is the same in every process that builds the same tree: node types
    by name and their static data by value (MJX's constant model arrays, say), never by address
    or by pickle's sharing of one object between nodes."""
    digest = hashlib.sha256()

    def visit(node):
        data = node.node_data()
        if data is None:  # a leaf
            digest.update(b"*")
            return
        kind, aux = data
        digest.update(f"({kind.__module__}.{kind.__qualname__}:".encode())
        digest.update(_canonical(aux, 0).encode())
        for child in node.children():
            visit(child)
        digest.update(b")")

    visit(tree)
    return digest.hexdigest()


def _canonical(value: Any, depth: int) -> str:
    """``value`` as text that names its content, not its address."""
    import numpy as np

    if depth > 8:
        return "..."
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}[" + ",".join(_canonical(v, depth + 1) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted((_canonical(k, depth + 1), _canonical(v, depth + 1)) for k, v in value.items())
        return "{" + ",".join(f"{k}:{v}" for k, v in items) + "}"
    if isinstance(value, (set, frozenset)):
        return "{" + ",".join(sorted(_canonical(v, depth + 1) for v in value)) + "}"
    if isinstance(value, np.ndarray):
        return f"array({value.dtype},{value.shape},{hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()})"
    if isinstance(value, type) or callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    fields = getattr(value, "__dict__", None)
    if fields is None and hasattr(value, "__slots__"):
        fields = {name: getattr(value, name, None) for name in value.__slots__}
    name = f"{type(value).__module__}.{type(value).__qualname__}"
    if fields is not None:
        return name + _canonical(dict(fields), depth + 1)
    return name + re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def _key(name: str, identity: dict, in_tree, leaves) -> str:
    blob = json.dumps({"name": name, "identity": identity, "in_tree": _tree_digest(in_tree), "args": _avals(leaves)},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def compiled_program(name: str, fn: Callable, args: tuple, *, identity: dict | None,
                     out_shardings: Callable[[Any], Any] | None = None, donate_argnums: tuple[int, ...] = (),
                     directory: Path | None = None) -> tuple[Callable, bool]:
    """``fn`` compiled for ``args`` (a tuple of pytrees of arrays), through its exported form.

    Returns ``(program, hit)``: ``program(*args)`` returns what ``fn(*args)`` would, as the same
    pytree; ``hit`` says whether tracing was skipped. The arguments keep the shardings they have;
    ``out_shardings(out)`` gives the result's (a pytree of shardings shaped as ``out``; it is called
    while tracing, so the key of an entry does not need them: they follow from ``identity`` and the
    arguments). ``donate_argnums`` index ``args``. ``directory`` defaults to :func:`cache_dir`;
    nothing is read or written without an ``identity``."""
    leaves, in_tree = jax.tree.flatten(args)
    counts = [len(jax.tree.leaves(a)) for a in args]
    donated = tuple(i for a, n in enumerate(counts) if a in donate_argnums
                    for i in range(sum(counts[:a]), sum(counts[:a]) + n))
    directory = cache_dir() if directory is None else directory
    key = _key(name, identity, in_tree, leaves) if identity is not None and directory is not None else None
    exported, out_tree = _read(directory, key, leaves) if key is not None else (None, None)
    hit = exported is not None
    if exported is None:
        exported, out_tree = _export(fn, in_tree, leaves, out_shardings)
        if key is not None:
            _write(directory, key, exported, out_tree)
    call = jax.jit(exported.call, donate_argnums=donated).lower(*leaves).compile()

    def program(*call_args):
        return jax.tree.unflatten(out_tree, call(*jax.tree.leaves(call_args)))

    return program, hit


def _export(fn, in_tree, leaves, out_shardings):
    """Trace ``fn`` over the flattened arguments and export it; returns (exported, output treedef)."""
    out_tree = []

    def flat(*flat_args):
        out = fn(*jax.tree.unflatten(in_tree, flat_args))
        if out_shardings is not None:
            out = jax.lax.with_sharding_constraint(out, out_shardings(out))
        flat_out, tree = jax.tree.flatten(out)
        out_tree.append(tree)
        return tuple(flat_out)

    in_shardings = tuple(getattr(x, "sharding", None) for x in leaves)
    jitted = jax.jit(flat, in_shardings=None if None in in_shardings else in_shardings)
    exported = jax.export.export(jitted)(*leaves)
    return exported, out_tree[-1]


def _read(directory: Path, key: str, leaves):
    path = directory / f"{key}.exported"
    try:
        blob = path.read_bytes()
    except OSError:
        return None, None
    try:
        header_size = int.from_bytes(blob[:8], "little")
        out_tree = pickle.loads(blob[8:8 + header_size])  # our own file, keyed by a digest of its inputs
        exported = jax.export.deserialize(bytearray(blob[8 + header_size:]))
        if [(tuple(a.shape), str(a.dtype)) for a in exported.in_avals] != [(tuple(x.shape), str(x.dtype))
                                                                            for x in leaves]:
            raise ValueError("its arguments differ")
        os.utime(path)  # recently used: kept by the pruning
        return exported, out_tree
    except Exception as e:  # noqa: BLE001 - any unreadable entry is traced anew
        warnings.warn(f"program cache entry {path} is unusable ({type(e).__name__}: {e}); tracing anew",
                      stacklevel=3)
        return None, None


def _write(directory: Path, key: str, exported, out_tree) -> None:
    """Atomically (a temporary file renamed into place: a reader never sees half an entry, and
    two processes writing one key leave one whole entry); a failure only costs the next start."""
    try:
        header = pickle.dumps(out_tree)
        blob = len(header).to_bytes(8, "little") + header + bytes(exported.serialize())
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{key}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.write_bytes(blob)
        os.replace(tmp, directory / f"{key}.exported")
        _prune(directory)
    except Exception as e:  # noqa: BLE001 - e.g. a pytree node pickle cannot name, a full disk
        warnings.warn(f"program not kept in {directory} ({type(e).__name__}: {e}); the next start traces it",
                      stacklevel=3)


def _prune(directory: Path) -> None:
    entries = sorted(directory.glob("*.exported"), key=lambda p: p.stat().st_mtime)
    for old in entries[:-MAX_ENTRIES]:
        try:
            old.unlink()
        except OSError:
            pass
