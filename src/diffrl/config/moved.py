"""Settings that moved to another section, and how configs stored before a move are read."""
from __future__ import annotations

import dataclasses

from diffrl.algos.registry import find
from diffrl.config.sections import SECTION_CLASSES


MOVED_FIELDS: dict[str, str] = {
    "diffusion.trust_region": "reppo.trust_region",
    "diffusion.kl_estimator": "reppo.kl_estimator",
    "diffusion.kl_samples": "reppo.kl_samples",
    "diffusion.kl_paths": "reppo.kl_paths",
    "adjoint.trust_region": "reppo.kl_multiplier",
    "adjoint.kl_bound": "reppo.kl_bound",
    "adjoint.lambda_init": "reppo.lambda_init",
}
"""Trust-region settings that moved from the policy's section to the algorithm's that enforces them
(old dotted name -> new). An algorithm that does not read the ``reppo`` section finds the field in
its own settings' section under the same name where that section has it (amdp-off:
``offpolicy.kl_multiplier``, ``offpolicy.kl_bound``; :func:`moved_field`). The old names keep working:
typed flags and ``--set`` are rewritten with a note (``diffrl.commands.train.cmd_train``,
``overrides.set_field``), stored run configs load moved (:func:`move_stored_fields`), exported policy
configs load without them (the policy classes' ``moved_fields``), and the benchmark ledger hashes them
under their old names (``benchmarks/ledger_records.py``), so records written before the move stay valid."""

READ_BEFORE_MOVE: dict[str, tuple[str, ...]] = {"adjoint.kl_bound": ("amdp",)}
"""Moved fields whose new name already existed (REPPO's radius ``reppo.kl_bound``) -> the algorithms
that read the old field, and ignored the new one, before the move: for them a stored old value is the
one the run used; for every other algorithm the stored new field is."""


def moved_field(old: str, algo: str) -> str:
    """The dotted name the moved field ``old`` (a key of :data:`MOVED_FIELDS`) has for ``--algo algo``:
    its new name, or the same field of the algorithm's own settings' section when the algorithm does
    not read the new name's section and that section has the field (amdp-off: ``offpolicy``)."""
    new = MOVED_FIELDS[old]
    section, _, name = new.partition(".")
    spec = find(algo)
    if spec is None or section in spec.reads:
        return new
    own = spec.batch_section
    declaring = SECTION_CLASSES.get(own)
    cls = dict(spec.own_sections).get(own) or (dataclasses.fields(declaring)[0].default_factory if declaring else None)
    if cls is not None and any(f.name == name for f in dataclasses.fields(cls)):
        return f"{own}.{name}"
    return new


def move_stored_fields(stored: dict, default_algo: str) -> tuple[dict, list[str]]:
    """A run config stored as JSON before :data:`MOVED_FIELDS` moved (``config.json``, checkpoint
    metadata) in the current layout, and the moves made ("old -> new"). Each moved value goes to the
    name its algorithm reads it under (:func:`moved_field`), except where that name already held the value
    the run used (:data:`READ_BEFORE_MOVE`); a config stored after the move is returned unchanged.
    ``default_algo``: the algorithm of a stored config that names none (``RunConfig.algo``)."""
    algo = stored.get("algo", default_algo)
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in stored.items()}
    moves = []
    for old in MOVED_FIELDS:
        old_section, _, old_name = old.partition(".")
        if old_name not in out.get(old_section, {}):
            continue
        value = out[old_section].pop(old_name)
        new = moved_field(old, algo)
        section, _, name = new.partition(".")
        target = out.setdefault(section, {})
        if name in target and algo not in READ_BEFORE_MOVE.get(old, ()):
            continue  # the run read the stored new field (REPPO's kl_bound); the old one was not read
        target[name] = value
        moves.append(f"{old} -> {new}")
    return out, moves
