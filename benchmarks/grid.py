"""The grid the benchmark drivers train: algorithms x tasks, one multi-seed program per cell.

``compare.py``, ``stability.py``, ``multimodality.py`` and ``suite.py`` each train every
algorithm on every task from the pair's preset, with the same budget, seeds and ``--set``
overrides, and write a record per cell. What they share lives here:

* :func:`parse_settings`: the ``--set`` values, ``key=value`` for every cell, ``algo:key=value``
  for one algorithm's cells, ``env@key=value`` for one task's (text; ``set_field`` converts it);
* :func:`cell_config`: a cell's config, the preset with the driver's changes and the settings;
* :func:`evaluated_samplers`: which of the requested samplers the cell's algorithm offers,
  read from its :class:`~diffrl.core.run.Run` (nothing is compiled);
* :func:`run_grid`: the one loop over the cells, task by task so that each finished task
  compares every algorithm: records already written are kept, the others trained.

What a driver records and how it tabulates it stays in the driver.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence


@dataclass(frozen=True)
class Cell:
    algo: str
    env: str

    @property
    def name(self) -> str:
        """``<env>--<algo>`` with the task's ``/`` as ``_``: the cell's file and directory name."""
        return f"{self.env.replace('/', '_')}--{self.algo}"


def cells(algos: Sequence[str], envs: Sequence[str]) -> list[Cell]:
    """Every (algorithm, task) cell, task by task."""
    return [Cell(algo, env) for env in envs for algo in algos]


def parse_settings(items: Iterable[str]) -> dict[str, str]:
    """``--set`` values -> {key (with its ``algo:`` or ``env@`` scope): value text}, in order."""
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set expects key=value or algo:key=value, got {item!r}")
        settings[key] = value
    return settings


def apply_settings(config, settings: dict[str, str], algo: str, env: str):
    """``config`` with the settings that apply to the cell (algo, env): unscoped ones, and those
    scoped to its algorithm (``algo:key``) or its task (``env@key``)."""
    from diffrl.config.overrides import set_field

    for key, value in settings.items():
        if ":" in key:
            scope, key = key.split(":", 1)
            if scope != algo:
                continue
        elif "@" in key:
            scope, key = key.rsplit("@", 1)
            if scope != env:
                continue
        config = set_field(config, key, value)
    return config


def cell_config(algo: str, env: str, preset: str | None, settings: dict[str, str], **changes):
    """The preset of (algo, env) (``preset``, else the pair's default), then ``changes``, then the
    ``--set`` settings, which win."""
    from diffrl.config.presets import resolve

    config = resolve(algo, env, preset).replace(**changes)
    return apply_settings(config, settings, algo, env)


def evaluated_samplers(config, requested: Sequence[str] | None = None) -> tuple[tuple[str, ...], str]:
    """(the ``requested`` samplers the cell's algorithm offers, a note on renamed ones or '');
    every sampler it offers when nothing is requested."""
    from diffrl.core.run import build_run
    from diffrl.policies.base import offered_samplers

    algo = build_run(config).algo
    return offered_samplers(requested or algo.samplers, algo)


def run_grid(items: Iterable, train: Callable, *, recorded: Callable | None = None,
             announce: Callable | None = None, after: Callable | None = None) -> list:
    """``train(item)`` for every item in order -> the records, one per item.

    ``recorded(item)``: the record a previous run already wrote (kept, not retrained), or None;
    ``announce(item)``: before an item trains; ``after(records)``: after each item trained (tables
    written as the grid goes, so an interrupted grid leaves what it finished)."""
    records = []
    for item in items:
        record = recorded(item) if recorded else None
        if record is not None:
            records.append(record)
            continue
        if announce:
            announce(item)
        records.append(train(item))
        if after:
            after(records)
    return records
