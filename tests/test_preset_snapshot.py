"""Every preset resolves to the values of the committed snapshot (tests/data/resolved_presets.json).

The snapshot is what keeps a refactor of the config, the presets or the registry honest: a change of
layout that keeps every value passes, a changed value fails here with its name. Regenerate it with
``scripts/snapshot_presets.py`` only for a deliberate change of a preset's values.
"""
from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _snapshot_module():
    spec = importlib.util.spec_from_file_location("snapshot_presets", ROOT / "scripts" / "snapshot_presets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_preset_resolves_as_in_the_snapshot():
    snap = _snapshot_module()
    committed = json.loads(snap.SNAPSHOT.read_text())
    diff = snap.differences(committed, snap.resolved_presets())
    assert not diff, "presets changed (regenerate with scripts/snapshot_presets.py if deliberate):\n" + "\n".join(diff)


def test_the_comparison_names_a_changed_value_and_a_changed_default():
    snap = _snapshot_module()
    committed = json.loads(snap.SNAPSHOT.read_text())
    changed = copy.deepcopy(committed)
    changed["presets"]["trudi-dmc-cpu"]["reppo.kl_bound"] = 0.5
    changed["defaults"]["TrainConfig"]["obs_clip"] = 5.0
    changed["default_preset"]["ppo"]["toy/MirrorGoals"] = "ppo-dmc-cpu"
    diff = "\n".join(snap.differences(committed, changed))
    trudi = next(line for line in diff.splitlines() if line.startswith("presets: trudi-dmc-cpu:"))
    assert "reppo.kl_bound: 0.1 -> 0.5" in trudi
    assert "obs_clip: 10.0 -> 5.0" in diff  # a default changes every preset that does not set it
    assert "toy/MirrorGoals" in diff
