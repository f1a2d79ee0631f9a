"""A preset as declared data: its base preset, the values it sets, and the source of each value.

A preset is a set of tuned values of :class:`~diffrl.config.TrainConfig` fields, by dotted name
(``"reppo.gamma"``; ``"algo"`` names the algorithm it is for). It is declared as a :class:`Preset`:

* ``base``: the preset it builds on (None for a root). ``reppo-dmc-large`` is ``reppo-dmc-small``
  with a larger batch; ``trudi-dmc-cpu`` is ``reppo-dmc-cpu`` with the DIME chain as its actor.
* ``settings``: its own values, grouped by where they come from: source -> {dotted name: value}. A
  source names a paper and its table or appendix (by arXiv id), a public reference repository and its
  config file, or a measurement on CPU written up in docs/learning-evidence.md under a heading named
  after the preset (:func:`measured`). A name appears in at most one group of a preset.
* ``default_for``: the environment families (``diffrl.config.presets.family``) ``diffrl train`` picks it for
  when no ``--preset`` is given; ``"*"`` is every family no other preset of its algorithm claims.

Resolution walks the chain from its root (:func:`walk`): each preset takes the values its base resolves
to, less the ones its own algorithm does not read (a TruDi preset built on a REPPO one drops the
Gaussian actor's ``gaussian.*`` settings: TruDi's actor is the ``diffusion`` section), and sets its own
on top. Which settings an algorithm reads is its registration's (:class:`~diffrl.algos.spec.AlgorithmSpec`
``sections`` less ``unused_settings``), passed in as ``inherits``.

The families declare their presets beside their code (``algos/ppo_presets.py``, ``reppo_presets.py``,
``trudi_presets.py``, ``amdp_presets.py``, ``offpolicy_presets.py``); :mod:`diffrl.config.presets` collects
them. Like ``spec.py``, this module imports nothing from diffrl.
"""
from __future__ import annotations

import re
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

EVIDENCE = "docs/learning-evidence.md"
"""Where the measurements behind the CPU presets are written up, one heading per preset."""

EVERY_OTHER_FAMILY = "*"
"""In ``default_for``: every environment family that no other preset of the algorithm claims."""


def measured(anchor: str, what: str = "") -> str:
    """The source of values measured on CPU: ``docs/learning-evidence.md#<anchor>`` (the anchor of a
    heading named after the preset), after a few words on what was measured."""
    return f"measured{' (' + what + ')' if what else ''}: {EVIDENCE}#{anchor}"


def evidence_anchor(source: str) -> str | None:
    """The docs/learning-evidence.md anchor a source links to (None: it links to none)."""
    found = re.search(re.escape(EVIDENCE) + r"#([\w-]+)", source)
    return found.group(1) if found else None


class PresetError(ValueError):
    """A preset declared wrongly: a missing base, a chain that loops, a value in two groups."""


@dataclass(frozen=True)
class Preset:
    """One named preset: its base, its own values by source, and the families it is the default for."""

    name: str
    """``--preset`` name: ``<algo>-<scale>`` (``trudi-dmc-cpu``)."""
    summary: str
    """One line: what it is for (``diffrl presets``)."""
    base: str | None = None
    """The preset whose resolved values it starts from (None: the config's defaults)."""
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """source -> {dotted field name: value}: its own values, each group under the source it comes from."""
    default_for: tuple[str, ...] = ()
    """Environment families it is the default preset for (``diffrl.config.presets.family``; ``"*"``: every
    family no other preset of its algorithm claims)."""

    def __post_init__(self):
        problems = []
        if not self.name or " " in self.name or self.name != self.name.strip():
            problems.append("its name must be one word")
        if not self.summary.strip():
            problems.append("it needs a summary")
        if self.base == self.name:
            problems.append("it is its own base")
        seen: dict[str, str] = {}
        for source, values in self.settings.items():
            if not source.strip():
                problems.append(f"values {sorted(values)} have no source")
            if not values:
                problems.append(f"source {source!r} gives no values")
            for key in values:
                if key in seen:
                    problems.append(f"{key} is set under two sources ({seen[key]!r} and {source!r})")
                seen[key] = source
        if self.base is None and "algo" not in seen:
            problems.append("a root preset must name its algorithm ('algo')")
        if problems:
            raise PresetError(f"preset {self.name!r}: " + "; ".join(problems))
        frozen = types.MappingProxyType({s: types.MappingProxyType(dict(v)) for s, v in self.settings.items()})
        object.__setattr__(self, "settings", frozen)
        object.__setattr__(self, "default_for", tuple(self.default_for))

    @property
    def values(self) -> dict[str, Any]:
        """Its own values (every group merged), base's not included."""
        return {key: value for values in self.settings.values() for key, value in values.items()}

    def source_of(self, key: str) -> str | None:
        """Where its own value of ``key`` comes from (None: it does not set it)."""
        return next((source for source, values in self.settings.items() if key in values), None)


def twin(of: Preset, name: str, summary: str, settings: Mapping[str, Mapping[str, Any]]) -> Preset:
    """A preset built on ``of`` for another algorithm at the same scale: ``of`` is its base, and it is
    the default for the same environment families (SPO's ``spo-dmc-cpu`` on ``ppo-dmc-cpu``)."""
    return Preset(name, summary, base=of.name, settings=settings, default_for=of.default_for)


def catalogue(*families: tuple[Preset, ...]) -> dict[str, Preset]:
    """name -> record of every preset of the given families; a name declared twice is refused."""
    out: dict[str, Preset] = {}
    for preset in (p for family in families for p in family):
        if preset.name in out:
            raise PresetError(f"preset {preset.name!r} is declared twice")
        out[preset.name] = preset
    return out


def chain(name: str, presets: Mapping[str, Preset]) -> tuple[Preset, ...]:
    """``name``'s chain of presets, root first; a missing base or a loop is refused naming the chain."""
    if name not in presets:
        raise PresetError(f"unknown preset {name!r}")
    out: list[Preset] = []
    current: str | None = name
    while current is not None:
        if any(p.name == current for p in out):
            names = " -> ".join([*(p.name for p in out), current])
            raise PresetError(f"preset {name!r}: its chain of bases loops ({names})")
        if current not in presets:
            raise PresetError(f"preset {out[-1].name!r}: its base {current!r} is not a preset")
        out.append(presets[current])
        current = presets[current].base
    return tuple(reversed(out))


@dataclass(frozen=True)
class Step:
    """One preset of a chain as resolution meets it."""

    preset: Preset
    algo: str
    """The algorithm the chain is for up to here (its own ``algo`` or its base's)."""
    dropped: tuple[str, ...]
    """Its base's settings that ``algo`` does not read, left at their defaults."""
    values: Mapping[str, Any]
    """The values resolved up to and including this preset."""


def walk(name: str, presets: Mapping[str, Preset], inherits: Callable[[str, str], bool]) -> Iterator[Step]:
    """Resolve ``name`` step by step from its root. ``inherits(algo, key)``: whether a preset for
    ``algo`` takes its base's value of ``key`` (whether ``algo`` reads it)."""
    values: dict[str, Any] = {}
    for preset in chain(name, presets):
        own = preset.values
        algo = own.get("algo", values.get("algo"))
        dropped = tuple(k for k in values if k not in own and not inherits(algo, k))
        values = {**{k: v for k, v in values.items() if k not in dropped}, **own}
        yield Step(preset, algo, dropped, types.MappingProxyType(dict(values)))


def resolve_values(name: str, presets: Mapping[str, Preset], inherits: Callable[[str, str], bool]) -> dict:
    """``name``'s values: its chain resolved from the root (:func:`walk`)."""
    step = None
    for step in walk(name, presets, inherits):
        pass
    return dict(step.values)


def sources(name: str, presets: Mapping[str, Preset],
            inherits: Callable[[str, str], bool]) -> dict[str, tuple[str, str]]:
    """dotted name -> (the preset of ``name``'s chain that sets it, that preset's source for it)."""
    out: dict[str, tuple[str, str]] = {}
    for step in walk(name, presets, inherits):
        for key in step.dropped:
            out.pop(key, None)
        out.update({key: (step.preset.name, step.preset.source_of(key)) for key in step.preset.values})
    return out

