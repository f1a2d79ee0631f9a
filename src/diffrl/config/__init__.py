"""The run configuration: a frozen, typed dataclass exposed as the CLI.

A run's config is the run's own settings (:class:`RunConfig`: algorithm, environment, budget, run
directory, devices...) plus the config sections its algorithm reads, nested dataclasses
(``--ppo.clip-eps``, ``--gaussian.hidden``...): :func:`config_type` composes that class from the
algorithm's registration, so a run carries, parses and stores only settings that act on it.
:class:`TrainConfig` holds every shared section, for code that builds one config for any algorithm;
:func:`as_run_config` turns it into the algorithm's. Every field has a docstring (tyro turns them
into ``--help``). Derived sizes are properties, and :meth:`RunConfig.validate` rejects bad input
with a clear message before anything is compiled.

This module composes them (:func:`config_type`, :class:`TrainConfig`, :func:`as_run_config`); the run's own
settings are :mod:`diffrl.config.run_config`, the shared sections' declaring classes
:mod:`diffrl.config.sections`, and settings that moved between sections :mod:`diffrl.config.moved`. The
``config`` room also holds how a config is filled in: command-line and ``--set`` overrides
(:mod:`diffrl.config.overrides`) and the named presets (:mod:`diffrl.config.presets`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from diffrl.algos.registry import CONFIG_SECTIONS, find, unread_reason
from diffrl.config.moved import MOVED_FIELDS, READ_BEFORE_MOVE, move_stored_fields, moved_field
from diffrl.config.run_config import RENAMED_EVAL_SAMPLERS, ConfigError, RunConfig
from diffrl.config.sections import SECTION_CLASSES

__all__ = ["CONFIG_SECTIONS", "MOVED_FIELDS", "READ_BEFORE_MOVE", "RENAMED_EVAL_SAMPLERS", "SECTION_CLASSES",
           "ConfigError", "RunConfig", "TrainConfig", "as_full_config", "as_run_config", "config_type",
           "full_config_type", "move_stored_fields", "moved_field"]


def _bases(sections) -> tuple[type, ...]:
    """The bases of a run config class holding ``sections`` (shared section names): a dataclass lists
    the fields of its bases last base first, so the run's own fields come first and the sections follow
    in :data:`CONFIG_SECTIONS` order, as ``--help`` lists them."""
    return tuple(SECTION_CLASSES[s] for s in reversed(CONFIG_SECTIONS) if s in sections) + (RunConfig,)


@dataclass(frozen=True)
class TrainConfig(*_bases(CONFIG_SECTIONS)):
    """The run's own settings and every shared config section, whichever the algorithm reads.

    What ``diffrl train --help`` without ``--algo`` lists, and a config Python code may build for any
    algorithm: ``Trainer`` and ``build_run`` convert it to the algorithm's run config
    (:func:`as_run_config`), refusing a changed setting in a section the algorithm does not read."""


_CONFIG_TYPES: dict[tuple, type] = {}


def _composed(algo: str, values: dict) -> RunConfig:
    """Unpickle a run config of a composed class (a class made at run time cannot be named)."""
    return config_type(algo)(**values)


def _reduce(self):
    return _composed, (self.algo, {f.name: getattr(self, f.name) for f in dataclasses.fields(self)})


def _make_type(name: str, spec, bases: tuple[type, ...], namespace: dict | None = None) -> type:
    """A frozen dataclass: the fields of ``bases``, then ``spec``'s own sections."""
    run_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    clashes = sorted(set(spec.own_sections) & run_fields)
    if clashes:
        raise ConfigError(f"--algo {spec.name}: its own config sections {clashes} would replace run settings")
    fields = [(section, cls, field(default_factory=cls)) for section, cls in spec.own_sections.items()]
    cls = dataclasses.make_dataclass(name, fields, bases=bases, frozen=True, namespace=namespace)
    cls.__module__ = __name__
    return cls


def config_type(algo: str) -> type[RunConfig]:
    """The run config class of ``--algo algo``, ``RunConfig[name]``: :class:`RunConfig` and the config
    sections the algorithm reads (its record's ``reads``: the shared sections it names, then the
    sections only it defines, ``own_sections``), nothing else. It is what ``diffrl train --algo algo``
    parses (``--help`` lists only those sections' flags), what a preset resolves to and what a run
    stores in its run directory. :class:`TrainConfig` for a name that selects no algorithm."""
    spec = find(algo)
    if spec is None:
        return TrainConfig
    # keyed by the record's sections and section classes: a module reloaded (or an algorithm registered
    # again under its name) brings new classes, and a class built around the old ones would not parse
    # their instances
    key = ("run", spec.name, tuple(spec.sections), tuple(spec.own_sections.items()))
    if key not in _CONFIG_TYPES:
        _CONFIG_TYPES[key] = _make_type(f"RunConfig[{spec.name}]", spec, _bases(spec.sections),
                                        {"__reduce__": _reduce})
    return _CONFIG_TYPES[key]


def full_config_type(algo: str) -> type[TrainConfig]:
    """:class:`TrainConfig`, plus the sections only ``algo`` defines (an algorithm registered from
    outside diffrl): a class that holds every setting of any run of ``algo``, with which a stored
    config of an older layout is read and ``diffrl train --help`` without ``--algo`` lists every flag."""
    spec = find(algo)
    if spec is None or not spec.own_sections:
        return TrainConfig
    key = ("full", spec.name, tuple(spec.own_sections.items()))
    if key not in _CONFIG_TYPES:
        _CONFIG_TYPES[key] = _make_type(f"TrainConfig[{spec.name}]", spec, (TrainConfig,))
    return _CONFIG_TYPES[key]


def _field_default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _dropped_setting_errors(config: RunConfig, algo: str, dropped: list[str]) -> list[str]:
    """An error for each setting of the sections ``dropped`` (fields of ``config``) that differs
    from its default, naming what ``algo`` reads instead."""
    spec, errors = find(algo), []
    fields = {f.name: f for f in dataclasses.fields(config)}
    for section in dropped:
        value, default = getattr(config, section), _field_default(fields[section])
        if value == default:
            continue
        reason = unread_reason(spec, section) if spec is not None else f"{algo} does not read it"
        changed = ([(f"{section}.{f.name}", getattr(value, f.name), getattr(default, f.name))
                    for f in dataclasses.fields(value)] if dataclasses.is_dataclass(value) else
                   [(section, value, default)])
        errors.extend(f"--{dotted.replace('_', '-')} ({v!r}) has no effect with --algo {algo}: {reason}"
                      for dotted, v, d in changed if v != d)
    return errors


def as_run_config(config: RunConfig, drop_unread: bool = False) -> RunConfig:
    """``config`` as an instance of its algorithm's run config class (:func:`config_type`), the same
    values: a :class:`TrainConfig` (or a config composed for another algorithm) keeps the sections the
    algorithm reads, those it lacks take their defaults, and the others are dropped.

    A dropped section must hold its defaults (ConfigError naming each changed setting, as
    :meth:`RunConfig.validate` names them for a :class:`TrainConfig`: a setting that would do nothing
    is refused), unless ``drop_unread``: then its values go (the command-line parser, which refuses a
    typed flag of a section the algorithm does not read by what was typed,
    ``diffrl.commands.train_flags.unread_flag_errors``)."""
    cls = config_type(config.algo)
    if type(config) is cls or cls is TrainConfig:  # an unknown --algo: refused when the run is built
        return config
    names = {f.name for f in dataclasses.fields(cls)}
    dropped = [f.name for f in dataclasses.fields(config) if f.name not in names]
    errors = [] if drop_unread else _dropped_setting_errors(config, config.algo, dropped)
    if errors:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(errors))
    return cls(**{name: getattr(config, name) for name in names if hasattr(config, name)})


def as_full_config(config: RunConfig) -> TrainConfig:
    """``config`` with every shared section (:func:`full_config_type`): those it lacks at their
    defaults. For setting a field by name for several algorithms at once, or parsing every flag."""
    cls = full_config_type(config.algo)
    if isinstance(config, cls):
        return config
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name in names})
