"""What an algorithm says about itself: one :class:`AlgorithmSpec` per registered name.

Every table that used to be keyed by algorithm name (the registry, the config sections an algorithm
reads and the settings it ignores, its display label, which field counts its diffusion steps, what
``diffrl bench cost`` measures and compares it with) is a field of this record, declared once beside
the algorithm's code (``algos/ppo.py``, ``algos/reppo.py``, ``algos/trudi.py``, ``algos/amdp.py``,
``algos/offpolicy.py``) and read by :mod:`diffrl.algos.registry`. An algorithm written outside diffrl
declares the same record and registers it (an entry point or a ``module:name`` spec; docs/extending.md).

This module imports nothing from diffrl, so an algorithm module can declare its record without an
import circle.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

POLICY_KINDS = ("gaussian", "diffusion", "adjoint", "flow")
"""The policy families diffrl ships (the config section of each is named after it)."""


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm: how to build it and the facts every generic part of diffrl needs about it."""

    name: str
    """``--algo`` name (lower case; ``+`` and ``-`` allowed, e.g. ``fpo++``, ``amdp-off``)."""
    build: Callable[[Any, Any], Any]
    """``build(config, env_spec) -> Algorithm``: the algorithm for a resolved run config (it reads only
    the sections in :attr:`sections` and :attr:`own_sections`)."""
    sections: tuple[str, ...]
    """Config sections the algorithm reads, its SGD settings' section first (whose ``batch_errors``
    check the run's batch). Every other section must stay at its defaults (a flag that does nothing is
    refused)."""
    policy: str
    """Which policy family it trains: one of :data:`POLICY_KINDS` (a section of :attr:`sections`)."""
    label: str
    """Display name in tables and figures (``TruDi``, ``FPO++``)."""
    summary: str = ""
    """One line: what it is and the paper it follows (``diffrl train --help``, docs)."""
    unused_settings: Mapping[str, str] = field(default_factory=dict)
    """Dotted settings of a section it reads that it nevertheless ignores -> why (what to set instead);
    changing one from its default is refused."""
    renamed_samplers: Mapping[str, str] = field(default_factory=dict)
    """Retired evaluation-sampler name -> current name (typed names are refused naming the new one;
    names stored in older run directories are mapped when loaded)."""
    diffusion_steps: str | None = None
    """Dotted field holding the number of denoising steps N (``diffusion.num_steps``), None for a
    policy without a chain: ``bench cost`` sets it for each N it sweeps."""
    off_policy: bool = False
    """It learns from a replay buffer (``bench cost --setting off-policy``; its update needs data first)."""
    cost_baselines: tuple[str, ...] = ()
    """Algorithms whose cost ``bench cost`` divides this one's by, when both were measured."""
    cost_headline: tuple[str, ...] = ()
    """The subset of :attr:`cost_baselines` whose ratios headline the cost report."""
    cost_default: bool = False
    """Measured by ``bench cost`` when ``--algos`` is not given (its setting's default contenders)."""
    own_sections: Mapping[str, type] = field(default_factory=dict)
    """Config sections that only this algorithm defines: section name -> frozen dataclass (each field
    with a docstring). They are added to the run config when ``--algo`` names this algorithm, as
    ``--<section>.<field>`` flags; built-in algorithms use the shared sections and define none."""
    presets: tuple[Any, ...] = ()
    """Presets an algorithm from outside diffrl declares (:class:`diffrl.algos.preset.Preset` records;
    built-in algorithms declare theirs in ``algos/*_presets.py``). Once the algorithm is registered
    they are ``--preset`` names and listed by ``diffrl presets``; each resolves to this algorithm (a
    root preset sets ``algo`` to its name; one built on a diffrl preset, ``base="ppo-toy"``, sets it
    too and inherits what this algorithm reads), and one whose ``default_for`` names an environment
    family is picked when no ``--preset`` is given."""

    def __post_init__(self):
        problems = []
        if not self.name or self.name != self.name.strip() or " " in self.name or ":" in self.name:
            problems.append(f"name {self.name!r} must be one word without ':'")
        if not callable(self.build):
            problems.append("build must be callable (config, env_spec) -> Algorithm")
        if not self.sections:
            problems.append("sections must name at least the section of its SGD settings")
        if self.policy not in self.sections and self.policy not in self.own_sections:
            problems.append(f"policy {self.policy!r} must be one of the sections it reads {self.sections}")
        for dotted in self.unused_settings:
            if dotted.split(".")[0] not in self.sections:
                problems.append(f"unused setting {dotted!r} is not in a section it reads")
        object.__setattr__(self, "presets", tuple(self.presets))
        for section, cls in self.own_sections.items():
            if not dataclasses.is_dataclass(cls):
                problems.append(f"own section {section!r} must be a dataclass (got {cls!r})")
        if self.diffusion_steps is not None and "." not in self.diffusion_steps:
            problems.append(f"diffusion_steps {self.diffusion_steps!r} must be a dotted field name")
        for preset in self.presets:
            if not (hasattr(preset, "name") and hasattr(preset, "settings") and hasattr(preset, "base")):
                problems.append(f"presets must be Preset records (diffrl.algos.preset; got {preset!r})")
        if not set(self.cost_headline) <= set(self.cost_baselines):
            problems.append("cost_headline must be a subset of cost_baselines")
        if problems:
            raise ValueError(f"algorithm {self.name!r}: " + "; ".join(problems))

    @property
    def batch_section(self) -> str:
        """The section holding its epochs and minibatches."""
        return self.sections[0]

    @property
    def reads(self) -> tuple[str, ...]:
        """Every config section it reads: the shared ones, then its own."""
        return tuple(self.sections) + tuple(s for s in self.own_sections if s not in self.sections)
