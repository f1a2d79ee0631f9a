"""Every preset resolves to the values of the committed snapshot (tests/data/resolved_presets.json).

The snapshot is what keeps a refactor of the config, the presets or the registry honest: a change of
layout that keeps every value passes, a changed value fails here with its name. Regenerate it with
``scripts/snapshot_presets.py`` only for a deliberate change of a preset's values.

The committed snapshot predates the move of the trust-region settings to the algorithm's section
(``diffrl.config.MOVED_FIELDS``, e.g. ``diffusion.trust_region`` -> ``reppo.trust_region``,
``adjoint.kl_bound`` -> ``reppo.kl_bound``; amdp-off's ``offpolicy.*``): the presets resolved now are
compared through that map (``snapshot_presets.in_layout_of``: each moved value under its old name, taken
from the name the preset's algorithm reads now), so the test proves that every moved setting kept its
value in every preset, and the snapshot file stays as committed.
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
    diff = snap.differences(committed, snap.in_layout_of(snap.resolved_presets(), committed))
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


def test_the_moved_settings_are_compared_under_their_old_names():
    """A moved value that changed is reported under its old name (the map is applied, not skipped)."""
    from diffrl.config import TrainConfig
    from diffrl.config.presets import apply_preset

    snap = _snapshot_module()
    committed = json.loads(snap.SNAPSHOT.read_text())
    assert "diffusion.trust_region" in committed["defaults"]["TrainConfig"]  # the layout before the move
    current = snap.resolved_presets()
    config = apply_preset(TrainConfig(), "dime-dmc-cpu")
    assert snap.flatten(config)["reppo.trust_region"] == "action"
    current["presets"]["dime-dmc-cpu"]["reppo.trust_region"] = "none"
    current["presets"]["amdp-dmc-cpu"]["reppo.kl_bound"] = 0.3
    diff = "\n".join(snap.differences(committed, snap.in_layout_of(current, committed)))
    assert "diffusion.trust_region: 'action' -> 'none'" in diff
    assert "adjoint.kl_bound: 0.1 -> 0.3" in diff
    assert "reppo.trust_region" not in diff  # a name the old layout lacks is not compared
