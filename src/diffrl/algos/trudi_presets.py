"""Presets of TruDi and on-policy DIME (registered in ``algos/trudi.py``).

TruDi (Le et al. 2026, arXiv 2606.15260) is REPPO's recipe with the DIME chain (Celik et al. 2025,
arXiv 2502.02316) as its actor, so each preset is built on REPPO's preset of the same scale
(``trudi-dmc-cpu`` on ``reppo-dmc-cpu``): it keeps the critic, the batch and the schedule, drops the
Gaussian's settings (TruDi does not read the ``gaussian`` section) and sets

* the entropy target, -4 d in the units of DIME's bound (TruDi's reference code, REPPO-DIME), shifted
  where REPPO's CPU preset widens its Gaussian (``reppo_presets.entropy_widening``);
* the chain's control net (3 x 256 at paper scale, at most 2 x 128 on CPU) and, on CPU, one path for
  TruDi's trajectory KL;
* on DM Control, a wider critic support than REPPO's [0, 150]: DIME's bound adds larger soft-reward terms.

``dime`` is TruDi's ablation with the trust region on the action marginals only. Its action-KL estimate
(``dis_action_kl.moment_matched_kl``) needs K >= 6 end points per state for a finite variance; at K = 8 its
per-state standard deviation is 0.82 x the KL of a pure mean shift. The measured per-scale changes
(``trudi-dmc-cpu``, ``trudi-bandit``, shared by DIME) are written up in docs/learning-evidence.md.
"""
from __future__ import annotations

from typing import Any, Mapping

from diffrl.algos.preset import Preset, measured, twin
from diffrl.algos.reppo_presets import (ACTOR_SWAP_SCALES, CPU_SCALES, WIDENED, actor_widths, entropy_widening,
                                        reppo_preset, reppo_values)

TRUDI_ENTROPY_TARGET_MULT = -4.0
"""TruDi's entropy target H* = -4 d, in the units of DIME's bound (its reference code, REPPO-DIME)."""

DIME_CHAIN_FAMILIES = ("trudi", "dime")
"""The algorithms on DIME's chain and loss (their presets share every tuned value)."""

TRUDI = ("TruDi (arXiv 2606.15260): REPPO's recipe with the DIME chain as its actor, entropy target -4 d in "
         "the units of DIME's bound (its reference code, REPPO-DIME)")
DIME = ("TruDi's ablation (arXiv 2606.15260): the trust region on the action marginals only, K = 8 end points "
        "per state for the unbiased action-KL estimate (finite variance needs K >= 6)")
ONE_KL_PATH = "diffrl: one path for the trajectory KL on CPU (each path is a pass through the chain)"
DIME_SUPPORT = ("diffrl: a critic support of [-100, 200] with 301 bins where REPPO's is DM Control's [0, 150] "
                "(DIME's bound adds larger soft-reward terms)")

TUNED: Mapping[str, Mapping[str, Mapping[str, Any]]] = {
    "dmc-cpu": {measured("trudi-dmc-cpu", "critic step 1e-3 and the reference's entropy target -4 d"): {
        "reppo.critic_lr": 1e-3, "reppo.entropy_target_mult": TRUDI_ENTROPY_TARGET_MULT}},
    "bandit": {measured("trudi-bandit", "the erf squash"): {"diffusion.squash": "erf"}},
}
"""scale -> values measured for the DIME-chain algorithms at that scale, by source."""


def _preset(algo: str, scale: str) -> Preset:
    reppo = reppo_values(scale)
    tuned = TUNED.get(scale, {})
    tuned_keys = {key for values in tuned.values() for key in values}
    own: dict[str, Any] = {"algo": algo}
    settings: dict[str, dict[str, Any]] = {TRUDI: own}
    if "reppo.entropy_target_mult" not in tuned_keys:
        widening = entropy_widening(scale)
        if widening:
            settings[WIDENED] = {"reppo.entropy_target_mult": TRUDI_ENTROPY_TARGET_MULT + widening}
        else:
            own["reppo.entropy_target_mult"] = TRUDI_ENTROPY_TARGET_MULT
    if algo == "dime":
        settings[DIME] = {"reppo.trust_region": "action", "reppo.kl_samples": 8}
    source, widths = actor_widths(scale)
    settings[source] = {"diffusion.hidden": widths}
    if algo == "trudi" and scale in CPU_SCALES:
        settings[ONE_KL_PATH] = {"reppo.kl_samples": 1}
    if reppo.get("critic.vmax") == 150.0:
        settings[DIME_SUPPORT] = {"critic.vmin": -100.0, "critic.vmax": 200.0, "critic.num_bins": 301}
    settings.update(tuned)
    label = "TruDi" if algo == "trudi" else "on-policy DIME"
    return twin(reppo_preset(scale), f"{algo}-{scale}", f"{label} on reppo-{scale}: the DIME chain as the actor",
                settings)


PRESETS = tuple(_preset(algo, scale) for algo in DIME_CHAIN_FAMILIES for scale in ACTOR_SWAP_SCALES)
"""Every TruDi and DIME preset: one on each REPPO preset of ``ACTOR_SWAP_SCALES``."""
