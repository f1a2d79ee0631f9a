"""The algorithm registry: ``--algo NAME`` -> :class:`~diffrl.algos.spec.AlgorithmSpec`.

Three ways in, one record each (docs/extending.md):

* the built-in algorithms, whose modules declare ``SPECS`` (:data:`BUILTIN_MODULES`);
* installed packages, through the entry-point group ``diffrl.algorithms`` (each entry point loads an
  :class:`AlgorithmSpec` or a sequence of them);
* a ``module:attribute`` spec typed as the algorithm's name (``--algo mypkg.algos:MY_PPO``): the module is
  imported and its attribute (an :class:`AlgorithmSpec`) registered under that spec, so a run directory that
  stores the spec loads again wherever the module is importable.

Everything generic (validation of the sections an algorithm reads, presets, ``bench cost`` and its report,
the CLI) asks this module, never a table of names. The built-in modules are imported on first use, so
``import diffrl.config`` stays cheap and no algorithm module imports the registry back.
"""
from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Mapping
from typing import Iterator

from diffrl.algos.spec import AlgorithmSpec

BUILTIN_MODULES = ("diffrl.algos.reppo", "diffrl.algos.trudi", "diffrl.algos.amdp", "diffrl.algos.ppo",
                   "diffrl.algos.offpolicy")
"""Modules whose ``SPECS`` are the built-in algorithms, in the order tables list them."""
ENTRY_POINT_GROUP = "diffrl.algorithms"
"""Entry-point group of algorithms installed by other packages."""
CONFIG_SECTIONS = ("ppo", "reppo", "critic", "gaussian", "diffusion", "adjoint", "flow", "offpolicy")
"""The shared config sections that algorithms compose: a run config holds those its algorithm reads
(``diffrl.config.config_type``), ``TrainConfig`` every one."""

_REGISTRY: dict[str, AlgorithmSpec] = {}
_loaded = {"builtins": False, "entry_points": False}


class UnknownAlgorithm(KeyError):
    """An ``--algo`` that names no registered algorithm (its message lists the near names)."""

    def __str__(self) -> str:
        return self.args[0]


def register(spec: AlgorithmSpec, key: str | None = None, replace: bool = False) -> AlgorithmSpec:
    """Add ``spec`` under ``key`` (its name by default); a second record under one key is refused
    unless ``replace`` (a test or a notebook redefining its algorithm)."""
    if not isinstance(spec, AlgorithmSpec):
        raise TypeError(f"register() takes an AlgorithmSpec (got {type(spec).__name__})")
    key = key or spec.name
    if not replace and key in _REGISTRY and _REGISTRY[key] is not spec:
        raise ValueError(f"algorithm {key!r} is already registered")
    for section in spec.own_sections:
        if section in CONFIG_SECTIONS:
            raise ValueError(f"algorithm {spec.name!r}: own section {section!r} would shadow a shared section")
    _REGISTRY[key] = spec
    return spec


def unregister(key: str) -> None:
    """Remove a record added by :func:`register` (tests)."""
    _REGISTRY.pop(key, None)


def _load_builtins() -> None:
    if _loaded["builtins"]:
        return
    _loaded["builtins"] = True
    for module in BUILTIN_MODULES:
        for spec in importlib.import_module(module).SPECS:
            _REGISTRY.setdefault(spec.name, spec)


def _load_entry_points() -> None:
    if _loaded["entry_points"]:
        return
    _loaded["entry_points"] = True
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
        except Exception as e:  # a broken plug-in must not take the built-in algorithms down with it
            import warnings

            warnings.warn(f"entry point {point.name!r} ({point.value}) of {ENTRY_POINT_GROUP} failed to load: {e}")
            continue
        for spec in (loaded if isinstance(loaded, (tuple, list)) else (loaded,)):
            if isinstance(spec, AlgorithmSpec) and spec.name not in _REGISTRY:
                register(spec)


def _load_spec(text: str) -> AlgorithmSpec:
    """The AlgorithmSpec that ``module:attribute`` names (a clear error if it names none)."""
    module_name, _, attribute = text.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UnknownAlgorithm(f"--algo {text!r}: module {module_name!r} cannot be imported ({e})") from None
    spec = getattr(module, attribute, None)
    if not isinstance(spec, AlgorithmSpec):
        what = "has no attribute" if spec is None else f"is a {type(spec).__name__}, not an AlgorithmSpec, at"
        raise UnknownAlgorithm(f"--algo {text!r}: module {module_name!r} {what} {attribute!r}")
    return register(spec, key=text)


def get(name: str) -> AlgorithmSpec:
    """The record ``--algo name`` selects: built-in, installed (entry point) or ``module:attribute``."""
    _load_builtins()
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        return _load_spec(name)
    _load_entry_points()
    if name in _REGISTRY:
        return _REGISTRY[name]
    raise UnknownAlgorithm(f"unknown --algo {name!r}; {close_matches(name)}")


def find(name: str) -> AlgorithmSpec | None:
    """:func:`get`, or None for a name that selects nothing."""
    try:
        return get(name)
    except UnknownAlgorithm:
        return None


def names() -> tuple[str, ...]:
    """Every registered name (built-in first, in :data:`BUILTIN_MODULES` order), ``module:attr`` keys
    excluded (they are aliases of the spec's own name)."""
    _load_builtins()
    _load_entry_points()
    return tuple(k for k in _REGISTRY if ":" not in k)


def specs() -> tuple[AlgorithmSpec, ...]:
    return tuple(get(name) for name in names())


def registered() -> tuple[AlgorithmSpec, ...]:
    """Every record registered so far, once each (a ``module:attribute`` key included; entry points
    not loaded)."""
    _load_builtins()
    return tuple({id(spec): spec for spec in _REGISTRY.values()}.values())


def close_matches(name: str) -> str:
    near = difflib.get_close_matches(name, list(names()), n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    return f"{hint}available: {', '.join(sorted(names()))} (or module:attribute naming an AlgorithmSpec)"


class _View(Mapping):
    """A read-only mapping name -> one field of each registered record (the old name-keyed tables)."""

    def __init__(self, read):
        self._read = read

    def __getitem__(self, name: str):
        spec = find(name)
        if spec is None:
            raise KeyError(name)
        return self._read(spec)

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(names())

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and find(name) is not None


ALGORITHMS: Mapping = _View(lambda spec: spec.build)
"""name -> build(config, env_spec) -> Algorithm."""
ALGORITHM_SECTIONS: Mapping = _View(lambda spec: spec.reads)
"""name -> the config sections it reads, its SGD section first."""
UNUSED_SETTINGS: Mapping = _View(lambda spec: dict(spec.unused_settings))
"""name -> {dotted setting of a section it reads that it ignores: why}."""


def batch_section(algo: str) -> str | None:
    """The section holding ``algo``'s epochs and minibatches (None for an unknown algorithm)."""
    spec = find(algo)
    return spec.batch_section if spec else None


def unread_reason(spec: AlgorithmSpec, section: str) -> str:
    """Why a setting of ``section`` does nothing for ``spec``'s algorithm, naming what it reads."""
    reads = ", ".join(f"--{s}.*" for s in spec.reads)
    return f"{spec.name} does not read the {section} section (it reads {reads})"


def _changed_unused_settings(config) -> list[tuple[str, str, str, object, object, str]]:
    """(dotted name, section, field, value, default, reason) of each setting ``config.algo`` does not
    read, an ``unused_settings`` entry or a field of a shared section outside its ``sections``, whose
    value differs from its default."""
    spec = find(config.algo)
    if spec is None:
        return []
    changed = []
    for dotted, reason in spec.unused_settings.items():
        section, name = dotted.split(".")
        sub = getattr(config, section)
        value, default = getattr(sub, name), getattr(type(sub)(), name)
        if value != default:
            changed.append((dotted, section, name, value, default, reason))
    for section in CONFIG_SECTIONS:
        if section in spec.reads or not hasattr(config, section):  # a run config holds only what it reads
            continue
        sub, defaults = getattr(config, section), type(getattr(config, section))()
        for f in dataclasses.fields(sub):
            value, default = getattr(sub, f.name), getattr(defaults, f.name)
            if value != default:
                changed.append((f"{section}.{f.name}", section, f.name, value, default,
                                unread_reason(spec, section)))
    return changed


def unused_setting_errors(config) -> list[str]:
    """Errors for every setting ``config.algo`` does not read that differs from its default, each
    naming what the algorithm reads instead."""
    return [f"--{dotted.replace('_', '-')} ({value!r}) has no effect with --algo {config.algo}: {reason}"
            for dotted, _, _, value, _, reason in _changed_unused_settings(config)]


def without_unused_settings(config):
    """(config with every setting its algorithm does not read back at its default, the dotted names that
    were changed). For run directories written before these settings were refused (older AMDP presets
    carried REPPO's KL settings, which AMDP never read)."""
    changed = _changed_unused_settings(config)
    for _, section, name, _, default, _ in changed:
        sub = dataclasses.replace(getattr(config, section), **{name: default})
        config = dataclasses.replace(config, **{section: sub})
    return config, [dotted for dotted, *_ in changed]
