"""Settings of the off-policy family (sac, dime-off, amdp-off): replay, critic, optimisers.

Defaults follow DIME's off-policy recipe (Celik et al. 2025, arXiv 2502.02316, code
github.com/ALRhub/DIME, ``configs/base.yaml`` and ``configs/alg/dime.yaml``), itself CrossQ's
(Bhatt et al. 2024): a 1M-transition buffer, batch 256, two update steps per collected
transition, the actor updated every third critic step, 5,000 transitions before learning,
Adam with beta1 = 0.5 and step 3e-4, two batch-renormalised critics of width 2048 without a
target network, a categorical critic of 101 atoms. The ``sac`` presets replace the critic with
SAC's (Haarnoja et al. 2018, arXiv 1812.05905, Table 1): scalar, plain ReLU MLPs, the minimum of
two target critics Polyak-averaged at tau = 0.005 (``diffrl.algos.offpolicy_presets``).
"""
from __future__ import annotations

from dataclasses import dataclass

CRITIC_KINDS = ("categorical", "scalar")
ENSEMBLE_REDUCTIONS = ("mean", "min")
CRITIC_NORMS = ("batch_renorm", "none")
OFF_POLICY_KL_MULTIPLIERS = ("closed_form", "none")
"""The drift trust region's multipliers amdp-off offers (adjoint_matching.TRUST_REGIONS less 'dual')."""


@dataclass(frozen=True)
class OffPolicyConfig:
    buffer_size: int = 1_000_000
    """Transitions the replay buffer holds per seed (over all parallel envs; the oldest go first)."""
    batch_size: int = 256
    """Transitions per gradient step, drawn uniformly from the buffer."""
    utd: float = 2.0
    """Update-to-data ratio: critic gradient steps per collected transition (DIME: 2). An
    iteration of num_envs * num_steps transitions takes utd times that many steps."""
    learning_starts: int = 5_000
    """Transitions collected (per seed) before the first gradient step."""
    policy_delay: int = 3
    """The actor and the temperature step once every this many critic steps (CrossQ, DIME: 3); the
    gradient steps of an iteration must be a multiple of it."""
    gamma: float = 0.99
    """Discount factor."""
    actor_lr: float = 3e-4
    """Adam step size of the actor."""
    critic_lr: float = 3e-4
    """Adam step size of the critics."""
    alpha_lr: float = 1e-3
    """Adam step size of log alpha (DIME: 1e-3)."""
    adam_b1: float = 0.5
    """Adam's beta1 for actor and critics (CrossQ and DIME: 0.5)."""
    actor_clip: float = 1.0
    """Clip of each actor gradient coordinate (DIME: by value at 1.0); 0 disables."""
    ent_start: float = 1.0
    """Initial temperature alpha."""
    learn_alpha: bool = True
    """Adapt the temperature by dual descent toward the entropy target."""
    entropy_target_mult: float | None = None
    """Entropy target H* = mult * action_dim in the units of the policy's entropy estimate; None
    = the algorithm's own (sac: -1, SAC's -d; dime-off: -4, DIME's; amdp-off: --adjoint.entropy-target-mult)."""
    critic: str = "categorical"
    """categorical (C51 distribution on num_bins atoms, DIME's) or scalar (squared TD error)."""
    critic_hidden: tuple[int, ...] = (2048, 2048)
    """Hidden widths of each critic (DIME, CrossQ: 2048, 2048)."""
    num_critics: int = 2
    """Members of the critic ensemble."""
    ensemble_reduce: str = "mean"
    """How the members' values combine, in targets and the actor loss: mean (DIME) or min (SAC's
    clipped double Q)."""
    target_networks: bool = False
    """Next-state values from target copies of the critics, Polyak-averaged toward them after every
    critic step and evaluated with their running statistics (SAC, Haarnoja et al. 2018, arXiv
    1812.05905); False: CrossQ's one joint pass over (s, a) and (s', a') with no target networks
    (DIME's)."""
    target_tau: float = 0.005
    """Polyak rate of the target critics, theta' <- (1 - tau) theta' + tau theta (SAC: 0.005); read
    with target_networks only."""
    critic_norm: str = "batch_renorm"
    """Normalisation in the critics: batch_renorm (CrossQ, DIME: every layer batch-renormalised) or
    none (SAC's plain ReLU MLP)."""
    num_bins: int = 101
    """Atoms of the categorical critic."""
    vmin: float = -200.0
    """Lowest atom (of the reward-scaled soft returns)."""
    vmax: float = 200.0
    """Highest atom."""
    critic_entropy_coef: float = 0.005
    """Weight of DIME's regulariser sum_i p_i log p_i on the categorical critic's own distribution
    (it keeps the distribution from collapsing onto one atom); 0 disables."""
    renorm_momentum: float = 0.99
    """Momentum of the batch-renormalisation running statistics."""
    renorm_warmup: int = 100_000
    """Critic steps during which batch renormalisation acts as plain batch norm (CrossQ: 100k)."""
    best_of_k: int = 16
    """Candidates scored by the learned Q in the best-of-k evaluation sampler."""
    kl_multiplier: str = "closed_form"
    """amdp-off: multiplier lambda of AMDP's drift trust region (Thilges et al. 2026, arXiv 2606.22630,
    A6), against the actor at the start of the iteration: closed_form (solved per minibatch) or none.
    AMDP's on-policy 'dual' (--reppo.kl-multiplier) is not offered: its learned multiplier would need
    a dual step per iteration."""
    kl_bound: float = 0.1
    """amdp-off: eps, the bound on the mean drift KL (A5) per actor step."""

    def validate(self) -> None:
        problems = []
        for name in ("buffer_size", "batch_size", "policy_delay", "num_critics", "best_of_k"):
            if getattr(self, name) < 1:
                problems.append(f"--offpolicy.{name.replace('_', '-')} must be >= 1 (got {getattr(self, name)})")
        for name in ("utd", "actor_lr", "critic_lr", "alpha_lr", "ent_start", "kl_bound"):
            if not getattr(self, name) > 0:
                problems.append(f"--offpolicy.{name.replace('_', '-')} must be positive (got {getattr(self, name)})")
        if self.learning_starts < 0 or self.actor_clip < 0 or self.critic_entropy_coef < 0 or self.renorm_warmup < 0:
            problems.append("--offpolicy.learning-starts, actor-clip, critic-entropy-coef and renorm-warmup must be >= 0")
        if not 0 < self.gamma <= 1:
            problems.append(f"--offpolicy.gamma must be in (0, 1] (got {self.gamma})")
        if not 0 <= self.adam_b1 < 1 or not 0 <= self.renorm_momentum < 1:
            problems.append("--offpolicy.adam-b1 and --offpolicy.renorm-momentum must be in [0, 1)")
        if self.critic not in CRITIC_KINDS:
            problems.append(f"--offpolicy.critic must be one of {', '.join(CRITIC_KINDS)} (got {self.critic!r})")
        if self.ensemble_reduce not in ENSEMBLE_REDUCTIONS:
            problems.append(f"--offpolicy.ensemble-reduce must be mean or min (got {self.ensemble_reduce!r})")
        if self.critic_norm not in CRITIC_NORMS:
            problems.append(f"--offpolicy.critic-norm must be one of {', '.join(CRITIC_NORMS)} (got {self.critic_norm!r})")
        if not 0 < self.target_tau <= 1:
            problems.append(f"--offpolicy.target-tau must be in (0, 1] (got {self.target_tau})")
        if self.critic == "categorical" and (self.num_bins < 2 or not self.vmax > self.vmin):
            problems.append(f"--offpolicy.num-bins must be >= 2 and vmax > vmin (got {self.num_bins}, "
                            f"[{self.vmin}, {self.vmax}])")
        if self.kl_multiplier not in OFF_POLICY_KL_MULTIPLIERS:
            problems.append(f"--offpolicy.kl-multiplier must be closed_form or none (got {self.kl_multiplier!r}; "
                            "the learned 'dual' multiplier is on-policy AMDP's)")
        if not self.critic_hidden or any(h < 1 for h in self.critic_hidden):
            problems.append(f"--offpolicy.critic-hidden must be positive widths (got {self.critic_hidden})")
        if problems:
            raise ValueError("; ".join(problems))

    def updates_per_iteration(self, batch_size: int) -> int:
        """Critic steps per iteration of ``batch_size`` collected transitions."""
        return round(self.utd * batch_size)

    def batch_errors(self, batch_size: int) -> list[str]:
        """Problems with an iteration of ``batch_size`` (num_envs * num_steps) transitions."""
        steps = self.utd * batch_size
        if abs(steps - round(steps)) > 1e-6 or round(steps) < 1:
            return [f"--offpolicy.utd ({self.utd}) x num_envs * num_steps ({batch_size}) must be a whole "
                    f"number of gradient steps >= 1 (got {steps:g})"]
        if self.policy_delay >= 1 and round(steps) % self.policy_delay:
            # every iteration then starts at a multiple of the delay: the actor's schedule is a fixed
            # structure of each iteration (offpolicy.py), the same for every seed
            return [f"the {round(steps)} gradient steps of an iteration (--offpolicy.utd {self.utd} x num_envs * "
                    f"num_steps {batch_size}) must be a multiple of --offpolicy.policy-delay ({self.policy_delay})"]
        return []
