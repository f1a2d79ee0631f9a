"""The presets of every algorithm family, resolved, and the rule that picks one by algorithm and env.

A preset is a set of overrides of run config fields (dotted names reach
nested configs: ``"ppo.learning_rate"``); command-line flags override the preset. Each family declares
its presets beside its code as :class:`~diffrl.algos.preset.Preset` records (a base preset, its own
values, the source of each value): ``algos/ppo_presets.py`` (PPO, SPO, FPO, FPO++, DPPO),
``reppo_presets.py``, ``trudi_presets.py`` (TruDi, DIME), ``amdp_presets.py`` (AMDP, AMDP-backprop)
and ``offpolicy_presets.py`` (SAC, DIME, AMDP off-policy). This module collects them:

* :data:`RECORDS`: name -> record; :data:`PRESETS`: name -> the values it resolves to (the built-in
  presets); :func:`every_record`, :func:`every_preset`: those and the presets of algorithms registered
  from outside diffrl (``AlgorithmSpec.presets``, merged by :func:`sync`).
* :func:`chain`, :func:`steps`, :func:`sources`: how a preset resolves (``diffrl presets --show NAME``).
* :func:`default_preset`: the preset ``diffrl train`` picks when no ``--preset`` is given, read from the
  records' ``default_for`` by the environment's :func:`family`.
* :func:`apply_preset`, :func:`resolve`: a config with a preset applied.

A preset built on another algorithm's preset inherits only the settings its own algorithm reads (its
registration's sections, less the settings it ignores): ``trudi-dmc-cpu`` on ``reppo-dmc-cpu`` leaves
out REPPO's ``gaussian.*`` settings.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
from typing import Any, Iterator

from diffrl.algos import amdp_presets, offpolicy_presets, ppo_presets, reppo_presets, trudi_presets
from diffrl.algos import preset as declared
from diffrl.algos.preset import EVERY_OTHER_FAMILY, Preset, PresetError, Step
from diffrl.algos.registry import find
from diffrl.config import ConfigError, RunConfig, TrainConfig

# Names other modules and earlier versions import from here.
from diffrl.algos.amdp_presets import AMDP_ENTROPY_TARGET_MULT  # noqa: F401
from diffrl.algos.offpolicy_presets import OFF_POLICY_ALGOS  # noqa: F401
from diffrl.algos.ppo_presets import FPO_LOG_RATIO_GUARD, FPO_PP_LOG_RATIO_CLIP  # noqa: F401
from diffrl.algos.reppo_presets import REPPO_ENTROPY_TARGET_MULT  # noqa: F401
from diffrl.algos.trudi_presets import DIME_CHAIN_FAMILIES, TRUDI_ENTROPY_TARGET_MULT  # noqa: F401

RECORDS: dict[str, Preset] = declared.catalogue(ppo_presets.PRESETS, reppo_presets.PRESETS, trudi_presets.PRESETS,
                                                amdp_presets.PRESETS, offpolicy_presets.PRESETS)
"""name -> declared record of every preset, by algorithm family."""


OUTSIDE_RECORDS: dict[str, Preset] = {}
"""name -> record of each preset declared by an algorithm registered from outside diffrl
(``AlgorithmSpec.presets``), kept apart from the built-in :data:`RECORDS` (:func:`sync`)."""
OUTSIDE_PRESETS: dict[str, dict[str, Any]] = {}
"""name -> resolved values of each preset in :data:`OUTSIDE_RECORDS`."""
_OUTSIDE_SPECS: dict[str, Any] = {}
"""name -> record of each outside algorithm whose presets are merged (found by name even when it was
registered under a ``module:attribute`` key)."""
_MERGED_FROM: list[tuple[int, ...]] = [()]
"""ids of the registered records that declare presets, as of the last merge (:func:`sync`)."""


def sync() -> None:
    """Bring :data:`OUTSIDE_RECORDS`, :data:`OUTSIDE_PRESETS` and :data:`DEFAULTS` up to date with
    the algorithms registered from outside diffrl (their ``AlgorithmSpec.presets``).

    Called wherever a preset is looked up, so an algorithm registered by an entry point, a
    ``module:attribute`` spec or :func:`diffrl.algos.registry.register` brings its presets with it.
    The outside presets are rebuilt whenever the set of registered records that declare presets has
    changed: an algorithm registered again (a reloaded module) replaces its own, and one unregistered
    takes its presets with it. A name that is already a built-in preset, or another algorithm's, is
    refused, and nothing is merged until every preset resolves. The built-in :data:`RECORDS` and
    :data:`PRESETS` never change."""
    from diffrl.algos import registry

    specs = [spec for spec in registry.registered() if spec.presets]
    if tuple(map(id, specs)) == _MERGED_FROM[0]:
        return
    owners: dict[str, str] = {}
    records, values = dict(RECORDS), {}
    for spec in specs:
        for preset in spec.presets:
            if preset.name in records:
                whose = f"of algorithm {owners[preset.name]!r}" if preset.name in owners else "built into diffrl"
                raise ConfigError(f"algorithm {spec.name!r}: its preset {preset.name!r} is already a preset {whose}")
            records[preset.name] = preset
            owners[preset.name] = spec.name
    by_name = {spec.name: spec for spec in specs}  # what their presets inherit: what each reads
    for spec in specs:
        for preset in spec.presets:
            try:
                values[preset.name] = declared.resolve_values(preset.name, records,
                                                              functools.partial(inherits, specs=by_name))
            except PresetError as e:
                raise ConfigError(f"algorithm {spec.name!r}: {e}") from None
            if values[preset.name].get("algo") != spec.name:
                raise ConfigError(f"algorithm {spec.name!r}: its preset {preset.name!r} resolves to --algo "
                                  f"{values[preset.name].get('algo')}; set 'algo': {spec.name!r} in it")
    _OUTSIDE_SPECS.clear()
    _OUTSIDE_SPECS.update(by_name)
    OUTSIDE_RECORDS.clear()
    OUTSIDE_RECORDS.update({name: records[name] for name in values})
    OUTSIDE_PRESETS.clear()
    OUTSIDE_PRESETS.update(values)
    DEFAULTS.clear()
    DEFAULTS.update(_defaults(every_preset(synced=False), every_record(synced=False)))
    _MERGED_FROM[0] = tuple(map(id, specs))


def every_record(synced: bool = True) -> dict[str, Preset]:
    """name -> record of every preset: the built-in ones and those of registered outside algorithms."""
    if synced:
        sync()
    return {**RECORDS, **OUTSIDE_RECORDS}


def every_preset(synced: bool = True) -> dict[str, dict[str, Any]]:
    """name -> resolved values of every preset (:func:`every_record`'s)."""
    if synced:
        sync()
    return {**PRESETS, **OUTSIDE_PRESETS}


def inherits(algo: str, key: str, specs: dict[str, Any] | None = None) -> bool:
    """Whether a preset for ``algo`` takes its base's value of ``key``: top-level fields always, a
    section's field when ``algo`` reads the section and does not ignore the field. ``specs``: the
    outside algorithms' records to look ``algo`` up in first (default: the merged ones)."""
    if "." not in key:
        return True
    spec = (_OUTSIDE_SPECS if specs is None else specs).get(algo) or find(algo)
    return spec is not None and key.split(".", 1)[0] in spec.reads and key not in spec.unused_settings


def chain(name: str) -> tuple[Preset, ...]:
    """``name``'s chain of records, root first."""
    return declared.chain(name, every_record())


def steps(name: str) -> Iterator[Step]:
    """``name`` resolved preset by preset from its root (what each takes, drops and sets)."""
    return declared.walk(name, every_record(), inherits)


def sources(name: str) -> dict[str, tuple[str, str]]:
    """dotted name -> (the preset of ``name``'s chain that sets it, its source)."""
    return declared.sources(name, every_record(), inherits)


PRESETS: dict[str, dict[str, Any]] = {name: declared.resolve_values(name, RECORDS, inherits) for name in RECORDS}
"""name -> the values (dotted field name -> value) the preset resolves to; ``diffrl presets`` lists them."""


def suite(env: str) -> str:
    return env.split("/", 1)[0] if "/" in env else ""


HUMANOID_TASKS = frozenset({
    "G1JoystickFlatTerrain", "G1JoystickRoughTerrain", "T1JoystickFlatTerrain", "T1JoystickRoughTerrain",
    "ApolloJoystickFlatTerrain", "BerkeleyHumanoidJoystickFlatTerrain", "BerkeleyHumanoidJoystickRoughTerrain",
})
"""Playground humanoid joystick tasks with a privileged observation and random pushes (the
*-humanoid-* presets' settings apply to them)."""

BANDITS = frozenset({"toy/BimodalBandit", "toy/CornerBandit"})
"""One-step toy bandits with rewards in [0, 1] (the "bandit" family)."""


def family(env: str) -> str:
    """The preset family of an env name, which ``default_for`` names: its suite, except that the
    one-step bandits (:data:`BANDITS`) are "bandit" and Playground locomotion tasks are "humanoid"
    (:data:`HUMANOID_TASKS`) or "locomotion" (the others)."""
    from diffrl.envs.playground import LOCOMOTION_ENVS

    if env in BANDITS:
        return "bandit"
    s = suite(env)
    task = env.split("/", 1)[-1]
    if s == "playground" and task in LOCOMOTION_ENVS:
        return "humanoid" if task in HUMANOID_TASKS else "locomotion"
    return s


def _defaults(presets: dict[str, dict[str, Any]], records: dict[str, Preset]) -> dict[tuple[str, str], str]:
    """(algo, family) -> the preset declared the default for it; two claims of one pair are refused."""
    out: dict[tuple[str, str], str] = {}
    for name, values in presets.items():
        for fam in records[name].default_for:
            key = (values["algo"], fam)
            if key in out:
                raise PresetError(f"presets {out[key]!r} and {name!r} are both the default of {key[0]} on {fam!r}")
            out[key] = name
    return out


DEFAULTS: dict[tuple[str, str], str] = _defaults(PRESETS, RECORDS)
"""(algo, environment family) -> default preset, from the records' ``default_for``."""


def default_preset(algo: str, env: str) -> str | None:
    """The preset ``diffrl train`` picks for (algo, env): the one declared the default for the env's
    :func:`family`, else the algorithm's preset for every other family, else None (CPU-sized where the
    family has both: pick the paper-scale ``*-humanoid-small``/``ppo-humanoid`` etc. with --preset on GPUs)."""
    sync()
    spec = find(algo)
    algo = spec.name if spec is not None else algo  # a module:attribute spec: its presets name the record
    fam = family(env)
    return DEFAULTS.get((algo, fam)) or DEFAULTS.get((algo, EVERY_OTHER_FAMILY))


def close_presets(name: str) -> str:
    """``"did you mean a, b?"`` naming the presets closest to an unknown name ("" when none is close)."""
    near = difflib.get_close_matches(name, list(every_preset()), n=3, cutoff=0.4)
    return f"did you mean {', '.join(near)}?" if near else ""


def _set(config: Any, dotted: str, value: Any) -> Any:
    """A preset's setting, typed like every other override (:func:`diffrl.config.overrides.set_field`)."""
    from diffrl.config.overrides import set_field

    return set_field(config, dotted, value, source="preset")


def apply_preset(config: RunConfig, name: str) -> RunConfig:
    """``config`` with the preset ``name``'s values set. A :class:`~diffrl.config.TrainConfig` stays
    one; a run config composed for its algorithm (:func:`~diffrl.config.config_type`) comes back as the
    run config of the preset's algorithm."""
    from diffrl.config import as_full_config, as_run_config

    presets = every_preset()
    if name not in presets:
        hint = close_presets(name)
        raise ConfigError(f"unknown preset {name!r};{' ' + hint if hint else ''} "
                          f"available: {', '.join(sorted(presets))}")
    composed = not isinstance(config, TrainConfig)
    config = as_full_config(config)  # a preset may set the algorithm, and with it the sections read
    for key, value in presets[name].items():
        config = _set(config, key, value)
    config = dataclasses.replace(config, preset=name)
    return as_run_config(config) if composed else config


def resolve(algo: str, env: str, preset: str | None) -> RunConfig:
    """Defaults for (algo, env): the named preset, else the tuned default, else plain defaults, as
    the run config of ``algo`` (:func:`~diffrl.config.config_type`: the sections it reads)."""
    from diffrl.config import as_run_config, full_config_type

    config = full_config_type(algo)(algo=algo, env=env)
    name = preset or default_preset(algo, env)
    if name is not None:
        config = apply_preset(config, name)
        spec = find(algo)
        if config.algo == getattr(spec, "name", None):  # --algo module:attribute: the run keeps that name
            config = dataclasses.replace(config, algo=algo)
        if config.algo != algo:
            raise ConfigError(f"preset {name!r} is for --algo {config.algo}, not {algo}")
    return as_run_config(config)
