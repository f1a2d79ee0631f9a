"""Algorithm registry: name -> factory(config, env_spec) -> Algorithm."""
from __future__ import annotations

import dataclasses
import difflib
from typing import Callable


def _ppo(config, spec):
    from diffrl.algos.ppo import make_ppo

    return make_ppo(config, spec)


def _spo(config, spec):
    """SPO (Xie et al. 2025): PPO's loop and settings with a quadratic ratio penalty, not a clip."""
    from diffrl.algos.ppo import make_ppo

    return make_ppo(config, spec, name="spo")


def _fpo(config, spec):
    """FPO (McAllister et al. 2025) as in its paper and code: PPO's loop on a flow policy, one ratio per
    sample from the draws' averaged CFM losses, PPO's clip."""
    from diffrl.algos.ppo import make_fpo

    return make_fpo(config, spec)


def _fpo_pp(config, spec):
    """FPO++ (Yi, Choi et al.): FPO with per-draw ratios, each draw's log ratio clamped, and the
    asymmetric ASPO surrogate (PPO's clip for A >= 0, SPO's penalty for A < 0)."""
    from diffrl.algos.ppo import make_fpo

    return make_fpo(config, spec, name="fpo++")


def _dppo(config, spec):
    """DPPO (Ren et al. 2024): PPO on the denoising MDP of the DIME chain (per-step ratios)."""
    from diffrl.algos.ppo import make_dppo

    return make_dppo(config, spec)


def _reppo(config, spec):
    from diffrl.algos.reppo import make_reppo

    return make_reppo(config, spec)


def _trudi(config, spec):
    """TruDi = REPPO's loop with the DIME diffusion actor (trajectory KL, DIME bound)."""
    from diffrl.algos.reppo import REPPO
    from diffrl.policies.diffusion import DiffusionPolicy

    config.diffusion.check_trust_region()
    return REPPO(config, spec, DiffusionPolicy(config.diffusion, spec.action_size), name="trudi")


def _dime(config, spec):
    """On-policy DIME (Celik et al. 2025) in REPPO's loop: TruDi's chain and max-entropy loss with
    the trust region on the action marginals only (its preset sets --diffusion.trust-region action;
    'none' is plain DIME, 'trajectory' is TruDi)."""
    from diffrl.algos.reppo import REPPO
    from diffrl.policies.diffusion import DiffusionPolicy

    config.diffusion.check_trust_region()
    return REPPO(config, spec, DiffusionPolicy(config.diffusion, spec.action_size), name="dime")


def _amdp(config, spec):
    from diffrl.algos.amdp import make_amdp

    return make_amdp(config, spec)


def _amdp_backprop(config, spec):
    """The reverse-KL baseline AMDP is measured against: REPPO's pathwise actor loss
    (alpha * log-pi bound - Q, backpropagated through the simulated chain) on AMDP's
    policy and reference process; the trust region uses the path KL of the chain."""
    from diffrl.algos.reppo import REPPO
    from diffrl.policies.adjoint import AdjointPolicy

    return REPPO(config, spec, AdjointPolicy(config.adjoint, spec.action_size), name="amdp-backprop")


def _sac(config, spec):
    """SAC (Haarnoja et al. 2018) on the off-policy core: tanh-Gaussian, automatic temperature."""
    from diffrl.algos.offpolicy import make_sac

    return make_sac(config, spec)


def _dime_off(config, spec):
    """DIME's off-policy recipe (Celik et al. 2025): reverse KL through the DIME chain, replay buffer."""
    from diffrl.algos.offpolicy import make_dime_off

    return make_dime_off(config, spec)


def _amdp_off(config, spec):
    """AMDP's off-policy setting: reciprocal adjoint matching on replayed terminal actions."""
    from diffrl.algos.offpolicy import make_amdp_off

    return make_amdp_off(config, spec)


ALGORITHMS: dict[str, Callable] = {
    "amdp": _amdp,
    "amdp-backprop": _amdp_backprop,
    "dime": _dime,
    "trudi": _trudi,
    "ppo": _ppo,
    "spo": _spo,
    "fpo": _fpo,
    "fpo++": _fpo_pp,
    "dppo": _dppo,
    "reppo": _reppo,
    "sac": _sac,
    "dime-off": _dime_off,
    "amdp-off": _amdp_off,
}


# Settings of a shared config section that an algorithm does not read, refused when changed
# from their defaults (a flag that does nothing must not be accepted silently). AMDP shares
# REPPO's critic, temperature and SGD settings but has its own trust region on the drift
# (--adjoint.kl-bound, --adjoint.trust-region) and its own entropy target
# (--adjoint.entropy-target-mult): REPPO's KL multiplier and actor-loss rule do not exist there.
_DPPO_ONLY = {
    "diffusion.step_std_min": "the floor on the denoising noise is DPPO's (--algo dppo); the trajectory KL and "
                              "DIME's entropy bound assume the chain without it",
    "diffusion.denoising_discount": "it weighs DPPO's per-step ratios (--algo dppo)",
}
_TRUST_REGION_ONLY = {f"diffusion.{name}": "DPPO's trust region is PPO's clip (--ppo.clip-eps)" for name in (
    "trust_region", "kl_estimator", "kl_samples", "kl_paths")}
_OFF_POLICY_CHAIN = {f"diffusion.{name}": "dime-off has no trust region (DIME's off-policy recipe)" for name in (
    "trust_region", "kl_estimator", "kl_samples", "kl_paths")}
UNUSED_SETTINGS: dict[str, dict[str, str]] = {
    "trudi": _DPPO_ONLY,
    "dime": _DPPO_ONLY,
    "dppo": {**_TRUST_REGION_ONLY, "diffusion.dual_uses": "DPPO has no temperature dual"},
    "sac": {"gaussian.kl_samples": "SAC has no trust region"},
    "dime-off": {**_DPPO_ONLY, **_OFF_POLICY_CHAIN},
    "amdp-off": {
        "adjoint.lambda_init": "off-policy AMDP offers no learned multiplier (--adjoint.trust-region closed_form or none)",
        "adjoint.matching_steps": "each critic step's batch is fresh from the buffer; raise --offpolicy.utd instead",
    },
    "amdp": {
        "reppo.kl_bound": "its trust-region radius is --adjoint.kl-bound",
        "reppo.kl_start": "its trust-region multiplier starts at --adjoint.lambda-init",
        "reppo.kl_min": "its trust-region multiplier is chosen by --adjoint.trust-region",
        "reppo.entropy_target_mult": "its entropy target is --adjoint.entropy-target-mult",
        "reppo.actor_loss_mode": "its trust-region rule is --adjoint.trust-region",
    },
}


# The config sections each algorithm reads, its SGD settings' section first (whose batch checks
# apply). A field of any other section that differs from its default is refused like an entry of
# UNUSED_SETTINGS: --adjoint.num-steps does nothing for TruDi, --gaussian.hidden nothing for AMDP.
ALGORITHM_SECTIONS: dict[str, tuple[str, ...]] = {
    "amdp": ("reppo", "adjoint", "critic"),
    "amdp-backprop": ("reppo", "adjoint", "critic"),
    "dime": ("reppo", "diffusion", "critic"),
    "trudi": ("reppo", "diffusion", "critic"),
    "ppo": ("ppo", "gaussian"),
    "spo": ("ppo", "gaussian"),
    "fpo": ("ppo", "flow"),
    "fpo++": ("ppo", "flow"),
    "dppo": ("ppo", "diffusion"),
    "reppo": ("reppo", "gaussian", "critic"),
    "sac": ("offpolicy", "gaussian"),
    "dime-off": ("offpolicy", "diffusion"),
    "amdp-off": ("offpolicy", "adjoint"),
}
CONFIG_SECTIONS = ("ppo", "reppo", "critic", "gaussian", "diffusion", "adjoint", "flow", "offpolicy")
"""Every algorithm-owned section of TrainConfig."""


def batch_section(algo: str) -> str | None:
    """The section holding ``algo``'s epochs and minibatches (None for an unknown algorithm)."""
    return ALGORITHM_SECTIONS.get(algo, (None,))[0]


def _unread_reason(config, section: str) -> str:
    reads = ", ".join(f"--{s}.*" for s in ALGORITHM_SECTIONS[config.algo])
    return f"{config.algo} does not read the {section} section (it reads {reads})"


def _changed_unused_settings(config) -> list[tuple[str, str, str, object, object, str]]:
    """(dotted name, section, field, value, default, reason) of each setting ``config.algo``
    does not read, :data:`UNUSED_SETTINGS` or a field of a section outside
    :data:`ALGORITHM_SECTIONS`, whose value differs from its default."""
    changed = []
    for dotted, reason in UNUSED_SETTINGS.get(config.algo, {}).items():
        section, name = dotted.split(".")
        sub = getattr(config, section)
        value, default = getattr(sub, name), getattr(type(sub)(), name)
        if value != default:
            changed.append((dotted, section, name, value, default, reason))
    if config.algo in ALGORITHM_SECTIONS:
        for section in CONFIG_SECTIONS:
            if section in ALGORITHM_SECTIONS[config.algo]:
                continue
            sub, defaults = getattr(config, section), type(getattr(config, section))()
            for f in dataclasses.fields(sub):
                value, default = getattr(sub, f.name), getattr(defaults, f.name)
                if value != default:
                    changed.append((f"{section}.{f.name}", section, f.name, value, default,
                                    _unread_reason(config, section)))
    return changed


def unused_setting_errors(config) -> list[str]:
    """Errors for every setting in :data:`UNUSED_SETTINGS` of ``config.algo`` that differs from
    its default, each naming what the algorithm reads instead."""
    return [f"--{dotted.replace('_', '-')} ({value!r}) has no effect with --algo {config.algo}: {reason}"
            for dotted, _, _, value, _, reason in _changed_unused_settings(config)]


def without_unused_settings(config):
    """(config with every :data:`UNUSED_SETTINGS` entry of its algorithm back at its default,
    the dotted names that were changed). For run directories written before these settings were
    refused (older AMDP presets carried REPPO's KL settings, which AMDP never read)."""
    changed = _changed_unused_settings(config)
    for _, section, name, _, default, _ in changed:
        sub = dataclasses.replace(getattr(config, section), **{name: default})
        config = dataclasses.replace(config, **{section: sub})
    return config, [dotted for dotted, *_ in changed]


def close_matches(name: str) -> str:
    near = difflib.get_close_matches(name, list(ALGORITHMS), n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    return f"{hint}available: {', '.join(sorted(ALGORITHMS))}"
