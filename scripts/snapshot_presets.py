"""Writes tests/data/resolved_presets.json: every preset resolved to its full set of values, and the
preset ``diffrl train`` picks for every algorithm on one task of each environment family.

The snapshot pins behaviour across refactors of the config and preset code: tests/test_preset_snapshot.py
resolves every preset again and compares value by value, so a change of layout that keeps every value
passes and a change of any value fails (regenerate the snapshot only for a deliberate change of a preset,
and say so in the commit).

    .venv/bin/python scripts/snapshot_presets.py            # rewrite the snapshot
    .venv/bin/python scripts/snapshot_presets.py --check    # exit 1 and list differences

A snapshot written before settings moved between sections (``diffrl.config.MOVED_FIELDS``) is compared
through the move (:func:`in_layout_of`): each preset's values are put back under the old names, so
the comparison proves the moved settings kept their values.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

SNAPSHOT = Path(__file__).resolve().parents[1] / "tests" / "data" / "resolved_presets.json"

# One task per preset family (diffrl.config.presets.family): the default-preset rule is keyed by family.
FAMILY_TASKS = (
    "playground/CartpoleSwingup", "playground/CheetahRun", "playground/Go1JoystickFlatTerrain",
    "playground/G1JoystickFlatTerrain", "brax/ant", "gymnax/Pendulum-v1", "toy/MirrorGoals",
    "toy/BimodalBandit", "dmc/cartpole-swingup", "gym/HalfCheetah-v5", "maniskill/PushCube-v1",
)


def flatten(value, prefix: str = "") -> dict:
    """Dotted name -> JSON value of a (nested) config dataclass."""
    if dataclasses.is_dataclass(value):
        out = {}
        for field in dataclasses.fields(value):
            out.update(flatten(getattr(value, field.name), f"{prefix}{field.name}."))
        return out
    if isinstance(value, tuple):
        value = list(value)
    return {prefix[:-1]: value}


def resolved_presets() -> dict:
    from diffrl.algos import ALGORITHMS
    from diffrl.config import TrainConfig
    from diffrl.config.presets import PRESETS, apply_preset, default_preset

    base = flatten(TrainConfig())
    presets = {}
    for name in sorted(PRESETS):
        values = flatten(apply_preset(TrainConfig(), name))
        # Stored as its differences from the defaults (kept below), so the file stays small.
        presets[name] = {k: v for k, v in values.items() if base.get(k, "<absent>") != v}
        presets[name].update({k: "<absent>" for k in base if k not in values})
    chosen = {algo: {task: default_preset(algo, task) for task in FAMILY_TASKS} for algo in sorted(ALGORITHMS)}
    return {"defaults": {"TrainConfig": base}, "presets": presets, "default_preset": chosen}


def full_values(snapshot: dict) -> dict:
    """Every preset's complete dotted values (defaults overlaid with the preset's differences)."""
    base = snapshot["defaults"]["TrainConfig"]
    presets = {name: {k: v for k, v in {**base, **diff}.items() if v != "<absent>"}
               for name, diff in snapshot["presets"].items()}
    return {"presets": presets, "default_preset": snapshot["default_preset"]}


def in_layout_of(current: dict, committed: dict) -> dict:
    """``current`` (:func:`resolved_presets`) in the layout of ``committed`` when that predates moves of
    :data:`diffrl.config.MOVED_FIELDS` (else unchanged): a moved field is named as before, with the value
    its preset's algorithm reads now (:func:`diffrl.config.moved_field`) where the algorithm reads the
    old section, else the old default (a section an algorithm does not read stays at its defaults);
    the new names the old layout lacks are dropped."""
    from diffrl.algos import ALGORITHMS
    from diffrl.algos.registry import find
    from diffrl.config import MOVED_FIELDS, moved_field

    old_base = committed["defaults"]["TrainConfig"]
    moved = [old for old in MOVED_FIELDS if old in old_base]
    if not moved:
        return current
    new_names = {moved_field(old, algo) for old in moved for algo in ALGORITHMS} - set(old_base)

    def old_layout(values: dict) -> dict:
        reads = find(values["algo"]).reads
        out = dict(values)
        for old in moved:
            read = old.partition(".")[0] in reads
            out[old] = values[moved_field(old, values["algo"])] if read else old_base[old]
        return {k: v for k, v in out.items() if k not in new_names}

    full = full_values(current)
    base = old_layout(current["defaults"]["TrainConfig"])
    presets = {}
    for name, values in full["presets"].items():
        values = old_layout(values)
        presets[name] = {k: v for k, v in values.items() if base.get(k, "<absent>") != v}
        presets[name].update({k: "<absent>" for k in base if k not in values})
    return {"defaults": {"TrainConfig": base}, "presets": presets, "default_preset": current["default_preset"]}


def differences(old: dict, new: dict) -> list[str]:
    """Lines naming each value that differs between two snapshots (empty when they agree)."""
    old, new = full_values(old), full_values(new)
    lines = []
    for section in ("presets", "default_preset"):
        a, b = old.get(section, {}), new.get(section, {})
        for name in sorted(set(a) | set(b)):
            if name not in b:
                lines.append(f"{section}: {name} is gone")
            elif name not in a:
                lines.append(f"{section}: {name} is new")
            elif a[name] != b[name]:
                keys = sorted(set(a[name]) | set(b[name]))
                changed = [f"{k}: {a[name].get(k, '<absent>')!r} -> {b[name].get(k, '<absent>')!r}"
                           for k in keys if a[name].get(k, "<absent>") != b[name].get(k, "<absent>")]
                lines.append(f"{section}: {name}: " + "; ".join(changed))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the snapshot instead of writing it")
    args = parser.parse_args(argv)
    current = resolved_presets()
    if args.check:
        committed = json.loads(SNAPSHOT.read_text())
        diff = differences(committed, in_layout_of(current, committed))
        print("\n".join(diff) or "every preset resolves as in the snapshot")
        return 1 if diff else 0
    SNAPSHOT.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT} ({len(current['presets'])} presets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
