"""Presets of AMDP and its reverse-KL baseline (registered in ``algos/amdp.py``).

AMDP (Thilges, Celik, Blessing, Gospodinov, Neumann 2026, arXiv 2606.22630) keeps REPPO's critic and
loop and replaces the actor by a diffusion policy fitted by adjoint matching, with a trust region on
its drift in place of REPPO's KL bound. Each preset is built on REPPO's preset of the same scale
(``amdp-dmc-cpu`` on ``reppo-dmc-cpu``): it drops the Gaussian's settings and REPPO's KL-dual settings
(AMDP reads neither: ``AlgorithmSpec.unused_settings``) and sets the control net's widths (as TruDi's
chain: ``reppo_presets.actor_widths``) and, where REPPO's CPU preset widens its Gaussian, the same shift
of AMDP's entropy target (-3.5 d, its control-cost bound; the ``adjoint`` section's default).

``amdp-backprop``, the reverse-KL update through AMDP's chain that adjoint matching avoids, reads
REPPO's KL dual and entropy target: it keeps REPPO's and sets AMDP's target -3.5 d.
"""
from __future__ import annotations

from typing import Any, Mapping

from diffrl.algos.preset import Preset, measured, twin
from diffrl.algos.reppo_presets import ACTOR_SWAP_SCALES, WIDENED, actor_widths, entropy_widening, reppo_preset

AMDP_ENTROPY_TARGET_MULT = -3.5
"""AMDP's entropy target H* = -3.5 d (its control-cost bound; ``adjoint.entropy_target_mult``'s default)."""

AMDP = ("AMDP (arXiv 2606.22630): REPPO's critic and loop with the adjoint-matching actor; the drift trust "
        "region replaces REPPO's KL bound")
AMDP_BACKPROP = ("the reverse-KL baseline on AMDP's process (arXiv 2606.22630): REPPO's trust region, AMDP's "
                 "entropy target -3.5 d")

TUNED: Mapping[str, Mapping[str, Mapping[str, Any]]] = {
    "dmc-cpu": {measured("amdp-dmc-cpu", "a bound of 4 on each coordinate of the control"): {
        "adjoint.control_bound": 4.0}},
}
"""scale -> values measured for AMDP at that scale, by source."""


def _preset(algo: str, scale: str) -> Preset:
    widening = entropy_widening(scale)
    if algo == "amdp":
        settings: dict[str, dict[str, Any]] = {AMDP: {"algo": algo}}
        if widening:
            settings[WIDENED] = {"adjoint.entropy_target_mult": AMDP_ENTROPY_TARGET_MULT + widening}
    elif widening:
        settings = {AMDP_BACKPROP: {"algo": algo},
                    WIDENED: {"reppo.entropy_target_mult": AMDP_ENTROPY_TARGET_MULT + widening}}
    else:
        settings = {AMDP_BACKPROP: {"algo": algo, "reppo.entropy_target_mult": AMDP_ENTROPY_TARGET_MULT}}
    source, widths = actor_widths(scale)
    settings[source] = {"adjoint.hidden": widths}
    if algo == "amdp":
        settings.update(TUNED.get(scale, {}))
    summary = (f"AMDP on reppo-{scale}: the adjoint-matching actor" if algo == "amdp" else
               f"AMDP's reverse-KL baseline on reppo-{scale}: AMDP's actor, backpropagated through its chain")
    return twin(reppo_preset(scale), f"{algo}-{scale}", summary, settings)


PRESETS = tuple(_preset(algo, scale) for algo in ("amdp", "amdp-backprop") for scale in ACTOR_SWAP_SCALES)
"""Every AMDP and AMDP-backprop preset: one on each REPPO preset of ``ACTOR_SWAP_SCALES``."""
