"""The shared config sections an algorithm composes: one frozen dataclass per section, each declaring just
that section's field (``ppo``, ``reppo``, ``critic``, ...) with its docstring, which tyro shows in
``--help``. :func:`diffrl.config.config_type` builds a run config class from :class:`RunConfig` and
the declaring classes of the sections its algorithm reads."""
from __future__ import annotations

from dataclasses import dataclass, field

from diffrl.algos.offpolicy_config import OffPolicyConfig
from diffrl.algos.ppo_config import PPOConfig
from diffrl.algos.registry import CONFIG_SECTIONS
from diffrl.algos.reppo_config import REPPOConfig
from diffrl.critics.categorical import CriticConfig
from diffrl.policies.adjoint import AdjointPolicyConfig
from diffrl.policies.diffusion import DiffusionPolicyConfig
from diffrl.policies.flow import FlowPolicyConfig
from diffrl.policies.gaussian import GaussianPolicyConfig


@dataclass(frozen=True)
class _PPOSection:
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO settings (used when --algo ppo)."""


@dataclass(frozen=True)
class _REPPOSection:
    reppo: REPPOConfig = field(default_factory=REPPOConfig)
    """Max-entropy actor-critic settings (reppo, trudi, dime, amdp, amdp-backprop): duals, SGD, and the
    trust region of each (REPPO's KL dual, the DIME chain's KL, AMDP's drift multiplier)."""


@dataclass(frozen=True)
class _CriticSection:
    critic: CriticConfig = field(default_factory=CriticConfig)
    """Categorical (HL-Gauss) Q critic (reppo, trudi, amdp)."""


@dataclass(frozen=True)
class _GaussianSection:
    gaussian: GaussianPolicyConfig = field(default_factory=GaussianPolicyConfig)
    """Gaussian policy settings (ppo, reppo)."""


@dataclass(frozen=True)
class _DiffusionSection:
    diffusion: DiffusionPolicyConfig = field(default_factory=DiffusionPolicyConfig)
    """DIME diffusion policy settings (trudi, dime, dime-off, dppo); its trust region is the algorithm's."""


@dataclass(frozen=True)
class _AdjointSection:
    adjoint: AdjointPolicyConfig = field(default_factory=AdjointPolicyConfig)
    """Adjoint-matching diffusion policy settings (amdp, amdp-backprop, amdp-off); its drift trust region
    is the algorithm's."""


@dataclass(frozen=True)
class _FlowSection:
    flow: FlowPolicyConfig = field(default_factory=FlowPolicyConfig)
    """Flow-matching policy settings (fpo)."""


@dataclass(frozen=True)
class _OffPolicySection:
    offpolicy: OffPolicyConfig = field(default_factory=OffPolicyConfig)
    """Replay buffer, critics and optimisers of the off-policy algorithms (sac, dime-off, amdp-off), and
    amdp-off's drift trust region."""


SECTION_CLASSES: dict[str, type] = {
    "ppo": _PPOSection, "reppo": _REPPOSection, "critic": _CriticSection, "gaussian": _GaussianSection,
    "diffusion": _DiffusionSection, "adjoint": _AdjointSection, "flow": _FlowSection,
    "offpolicy": _OffPolicySection}
"""Shared section name -> the dataclass that declares it as a run config field (:func:`config_type`)."""
assert tuple(SECTION_CLASSES) == CONFIG_SECTIONS, "one declaring class per shared section, in its order"
