"""Settings of the max-entropy, Q-learning actor-critic family (REPPO, TruDi, AMDP).

Defaults follow REPPO's reference ``config/reppo.yaml`` (Voelcker et al. 2025,
github.com/cvoelcker/reppo): KL bound 0.1, initial beta 0.01, initial alpha 0.01, entropy
target -0.5 * action dim, Adam 3e-4 with global-norm clip 0.5, gamma 0.99, lambda 0.95.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class REPPOConfig:
    renamed_fields: ClassVar[dict] = {"target_entropy_mult": ("entropy_target_mult", "negated")}
    """Stored fields read under a new name (old -> new, or (new, "negated") for a sign change)."""

    gamma: float = 0.99
    """Discount factor."""
    td_lambda: float = 0.95
    """lambda of the soft TD(lambda) targets."""
    actor_lr: float = 3e-4
    """Adam step size of the actor (and of the dual variables log alpha, log beta)."""
    critic_lr: float = 3e-4
    """Adam step size of the critic."""
    critic_weight_decay: float = 0.0
    """Decoupled weight decay of the critic's optimizer (AdamW; 0 = plain Adam, the reference),
    on every critic parameter. It slows the drift of the critic's representation on low-variety
    data, but did not remove the late CartpoleBalance drops (benchmarks/results/stability/README.md)."""
    anneal_lr: bool = False
    """Decay every step size (actor, critic, duals) linearly to 0 over the run, as the
    reference's ``anneal_lr`` option (off there). It ties the schedule to --total-env-steps."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip (actor and critic separately)."""
    num_epochs: int = 4
    """Passes over each rollout."""
    num_minibatches: int = 32
    """Minibatches per epoch; must divide num_envs * num_steps."""
    kl_bound: float = 0.1
    """Trust-region radius eps on the per-state KL(old || new)."""
    kl_start: float = 0.01
    """Initial KL multiplier beta."""
    kl_min: float = 0.0
    """Floor of the KL multiplier beta (0 = none, as in the reference). Adam moves log beta at a
    nearly constant rate whatever the size of the violation, so after a long stretch with the KL
    under its bound beta sinks by orders of magnitude, and it takes as long to come back when the
    policy starts to move (benchmarks/results/stability/README.md)."""
    ent_start: float = 0.01
    """Initial temperature alpha."""
    alpha_max: float = 0.0
    """Ceiling on the temperature alpha (0 = none, as in the reference). When the entropy target
    is above what a converged policy keeps, the temperature dual climbs for as long as training
    lasts; the ceiling bounds the weight of the entropy term (benchmarks/results/stability/README.md)."""
    entropy_target_mult: float = -0.5
    """Entropy target H* = entropy_target_mult * action_dim, in the units of the policy's entropy
    estimate (reference REPPO: -0.5; DIME-style diffusion bounds about -4). The same convention
    as AMDP's --adjoint.entropy-target-mult; it replaces target_entropy_mult (H* = -mult * d),
    whose stored values load negated."""
    actor_loss_mode: str = "clipped"
    """Trust-region rule: clipped (states over the bound contribute beta * KL only), full
    (value/entropy term + beta * KL always) or value (no KL term; ablation)."""
    learn_alpha: bool = True
    """Adapt the temperature by dual descent toward the entropy target."""
    best_of_k: int = 16
    """Candidates scored by the learned Q in the best-of-k evaluation sampler."""
    next_action_samples: int = 1
    """Actions K drawn at each next state for the soft TD targets: V(s') = mean_k Q(s', a'_k), and
    the entropy term from the mean of their log-densities (1: one draw, as the reference's hydra
    version; its single-file version averages Q over 64). More draws lower the targets' variance
    where the policy is wide, at K critic (and policy) passes over the batch per iteration."""

    def validate(self) -> None:
        problems = []
        for name in ("actor_lr", "critic_lr", "max_grad_norm", "kl_bound", "kl_start", "ent_start"):
            if not getattr(self, name) > 0:
                problems.append(f"--reppo.{name.replace('_', '-')} must be positive (got {getattr(self, name)})")
        if not 0 <= self.kl_min:
            problems.append(f"--reppo.kl-min must be >= 0 (got {self.kl_min})")
        if not 0 <= self.alpha_max:
            problems.append(f"--reppo.alpha-max must be >= 0 (got {self.alpha_max})")
        elif 0 < self.alpha_max < self.ent_start:
            problems.append(f"--reppo.alpha-max ({self.alpha_max}) is below the initial temperature "
                            f"--reppo.ent-start ({self.ent_start})")
        if not 0 <= self.critic_weight_decay < 1:
            problems.append(f"--reppo.critic-weight-decay must be in [0, 1) (got {self.critic_weight_decay})")
        if not 0 < self.gamma <= 1:
            problems.append(f"--reppo.gamma must be in (0, 1] (got {self.gamma})")
        if not 0 <= self.td_lambda <= 1:
            problems.append(f"--reppo.td-lambda must be in [0, 1] (got {self.td_lambda})")
        if self.num_epochs < 1 or self.num_minibatches < 1 or self.best_of_k < 1 or self.next_action_samples < 1:
            problems.append("--reppo.num-epochs, --reppo.num-minibatches, --reppo.best-of-k and "
                            "--reppo.next-action-samples must be >= 1")
        if self.actor_loss_mode not in ("clipped", "full", "value"):
            problems.append(f"--reppo.actor-loss-mode must be clipped, full or value (got {self.actor_loss_mode!r})")
        if problems:
            raise ValueError("; ".join(problems))

    def batch_errors(self, batch_size: int) -> list[str]:
        if self.num_minibatches >= 1 and batch_size % self.num_minibatches:
            return [f"--reppo.num-minibatches ({self.num_minibatches}) must divide the batch "
                    f"num_envs * num_steps = {batch_size}"]
        return []
