"""TruDi and on-policy DIME: REPPO's loop (:mod:`diffrl.algos.reppo`) with the DIME diffusion actor.

TruDi (Le et al. 2026, arXiv 2606.15260) trains a DIME chain (Celik et al. 2025) with REPPO's
max-entropy pathwise actor loss, the entropy through DIME's lower bound, and a trust region on the KL
of the whole denoising trajectory, an upper bound on the KL of the actions
(``--reppo.trust-region trajectory``). ``dime`` is TruDi's ablation with the trust region on the
action marginals only (its presets set ``--reppo.trust-region action``; ``none`` is plain DIME).
Both are registrations, not new code: the policy and its trust-region mode are the difference. The
trust region is the algorithm's (its ``reppo`` settings), handed to the chain as a
:class:`~diffrl.policies.diffusion.DiffusionTrustRegion`.
"""
from __future__ import annotations

from diffrl.algos.reppo import DRIFT_MULTIPLIER_SETTINGS, REPPO
from diffrl.algos.spec import AlgorithmSpec
from diffrl.envs.base import EnvSpec
from diffrl.policies.diffusion import RENAMED_SAMPLERS, DiffusionPolicy, DiffusionTrustRegion


def chain_trust_region(settings) -> DiffusionTrustRegion:
    """The DIME chain's trust region from the algorithm's ``reppo`` settings (REPPOConfig)."""
    return DiffusionTrustRegion(region=settings.trust_region, kl_estimator=settings.kl_estimator,
                                kl_samples=settings.kl_samples, kl_paths=settings.kl_paths)


def _dime_chain_actor(config, spec: EnvSpec, name: str) -> REPPO:
    policy = DiffusionPolicy(config.diffusion, spec.action_size, trust_region=chain_trust_region(config.reppo))
    return REPPO(config, spec, policy, name=name)


def make_trudi(config, spec: EnvSpec) -> REPPO:
    """TruDi = REPPO's loop with the DIME diffusion actor (trajectory KL, DIME bound)."""
    return _dime_chain_actor(config, spec, "trudi")


def make_dime(config, spec: EnvSpec) -> REPPO:
    """On-policy DIME in REPPO's loop: TruDi's chain and max-entropy loss, the trust region on the action
    marginals only (set by its presets)."""
    return _dime_chain_actor(config, spec, "dime")


# The floor on the denoising noise and the denoising discount are DPPO's: TruDi's trajectory KL and
# DIME's entropy bound assume the chain without them.
DPPO_ONLY_SETTINGS = {
    "diffusion.step_std_min": "the floor on the denoising noise is DPPO's (--algo dppo); the trajectory KL and "
                              "DIME's entropy bound assume the chain without it",
    "diffusion.denoising_discount": "it weighs DPPO's per-step ratios (--algo dppo)",
}

_DIME_CHAIN_UNREAD = {**DPPO_ONLY_SETTINGS, **DRIFT_MULTIPLIER_SETTINGS}

SPECS = (
    AlgorithmSpec("trudi", make_trudi, ("reppo", "diffusion", "critic"), "diffusion", "TruDi",
                  "TruDi (Le et al. 2026): REPPO with a DIME diffusion actor and a trust region on the "
                  "whole denoising trajectory", unused_settings=_DIME_CHAIN_UNREAD,
                  renamed_samplers=RENAMED_SAMPLERS, diffusion_steps="diffusion.num_steps",
                  cost_baselines=("reppo",), cost_headline=("reppo",), cost_default=True),
    AlgorithmSpec("dime", make_dime, ("reppo", "diffusion", "critic"), "diffusion", "DIME",
                  "on-policy DIME (Celik et al. 2025) in REPPO's loop, trust region on the action marginals",
                  unused_settings=_DIME_CHAIN_UNREAD, renamed_samplers=RENAMED_SAMPLERS,
                  diffusion_steps="diffusion.num_steps", cost_baselines=("reppo", "trudi")),
)
"""TruDi's and DIME's registrations (diffrl.algos.registry)."""
