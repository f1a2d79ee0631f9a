"""An algorithm defined outside diffrl: PPO whose policy-gradient term is scaled by a setting of its own.

It is one module and one record. Register it from the command line with a ``module:attribute`` spec
(the module must be importable, e.g. on ``PYTHONPATH``)::

    PYTHONPATH=examples diffrl train --algo custom_algorithm:SCALED_PPO --env toy/MirrorGoals \\
        --scaled.policy-scale 2.0

or from an installed package through the entry-point group ``diffrl.algorithms``::

    [project.entry-points."diffrl.algorithms"]
    scaled-ppo = "custom_algorithm:SCALED_PPO"     # then: diffrl train --algo scaled-ppo

``tests/test_extending.py`` trains it both ways; docs/extending.md walks through it.
"""
from __future__ import annotations

from dataclasses import dataclass

from diffrl.algos.ppo import PPO, ppo_policy_loss
from diffrl.algos.preset import Preset
from diffrl.algos.spec import AlgorithmSpec
from diffrl.policies.gaussian import GaussianPolicy


@dataclass(frozen=True)
class ScaledConfig:
    """Settings only this algorithm reads (``--scaled.*``)."""

    policy_scale: float = 1.0
    """Multiplies PPO's clipped surrogate (after the advantages are standardised); 1 is PPO exactly."""

    def validate(self) -> None:
        if not self.policy_scale > 0:
            raise ValueError(f"--scaled.policy-scale must be positive (got {self.policy_scale})")


def scaled_surrogate(scale: float):
    """PPO's surrogate times ``scale``: (log_prob, old_log_prob, advantages, eps) -> (loss, clip fraction)."""
    def loss(log_prob, old_log_prob, advantages, eps):
        value, clip_fraction = ppo_policy_loss(log_prob, old_log_prob, advantages, eps)
        return scale * value, clip_fraction
    return loss


def make_scaled_ppo(config, spec):
    policy = GaussianPolicy(config.gaussian, spec.action_size)
    return PPO(config, spec, policy, name="scaled-ppo", policy_loss=scaled_surrogate(config.scaled.policy_scale))


SCALED_PPO = AlgorithmSpec(
    "scaled-ppo", make_scaled_ppo, sections=("ppo", "gaussian"), policy="gaussian", label="Scaled PPO",
    summary="PPO with its policy-gradient term scaled by --scaled.policy-scale (an example)",
    own_sections={"scaled": ScaledConfig},
    presets=(
        # built on diffrl's PPO preset for the toy tasks: it inherits what scaled-ppo reads (PPO's and the
        # Gaussian policy's settings), sets its own algorithm and section, and is picked on toy/* tasks
        Preset("scaled-ppo-toy", "PPO's toy-task settings with a doubled policy term (an example)",
               base="ppo-toy", default_for=("toy",), settings={
                   "this example": {"algo": "scaled-ppo", "scaled.policy_scale": 2.0}}),
    ))
