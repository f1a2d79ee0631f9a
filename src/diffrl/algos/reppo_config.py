"""Settings of the max-entropy, Q-learning actor-critic family (REPPO, TruDi, DIME, AMDP).

Defaults follow REPPO's reference ``config/reppo.yaml`` (Voelcker et al. 2025,
github.com/cvoelcker/reppo): KL bound 0.1, initial beta 0.01, initial alpha 0.01, entropy
target -0.5 * action dim, Adam 3e-4 with global-norm clip 0.5, gamma 0.99, lambda 0.95.

The trust region is the algorithm's, so all of its settings are here, whatever policy it bounds:
the radius eps (``kl_bound``), REPPO's KL dual beta (``kl_start``, ``kl_min``, ``actor_loss_mode``),
what TruDi's chain bounds and how its KL is estimated (``trust_region``, ``kl_estimator``,
``kl_samples``, ``kl_paths``; TruDi, Le et al. 2026, arXiv 2606.15260) and the multiplier of AMDP's
drift trust region (``kl_multiplier``, ``lambda_init``; AMDP, Thilges et al. 2026, arXiv 2606.22630).
Each algorithm reads the ones its update uses (the rest are its ``AlgorithmSpec.unused_settings``);
the builders hand them to the policy (``policies.diffusion.DiffusionTrustRegion``,
``policies.adjoint.DriftTrustRegion``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from diffrl.maths.adjoint_matching import TRUST_REGIONS as KL_MULTIPLIERS
from diffrl.policies.dis_action_kl import MIN_ACTION_KL_SAMPLES
from diffrl.policies.diffusion import KL_ESTIMATORS, KL_PATHS, TRUST_REGIONS


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
    """Trust-region radius eps: on the per-state KL(old || new) (REPPO, TruDi, DIME), or on the mean
    drift KL of an update (AMDP, eq. A5)."""
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
    trust_region: str = "trajectory"
    """What the trust region of the DIME chain bounds (TruDi's ablation): 'trajectory' (TruDi: the KL
    of the whole denoising path, E8, an upper bound on the action KL), 'action' (the action marginals
    only: the KL of their moment-matched Gaussians, estimated without bias from K >= 6 old and K new
    end points, E12; the `dime` algorithm's presets) or 'none' (plain DIME: the KL returned to the
    loss is 0; the trajectory KL is still logged)."""
    kl_estimator: str = "closed_form"
    """The DIME chain's trajectory KL returned to the loss: 'closed_form' per-step Gaussian KL (E9) or
    the 'sampled' log-ratio."""
    kl_samples: int = 4
    """K old-policy paths per state for the DIME chain's trajectory KL (reference JAX 4); read with
    ``kl_paths="fresh"`` only. The 'action' trust region draws K old and K new chains (K >= 6: the
    variance of its estimate is infinite below that; the dime presets use 8)."""
    kl_paths: str = "fresh"
    """Old paths the DIME chain's trajectory KL is measured along: 'fresh' (K chains simulated per
    state and SGD step, the reference) or 'behaviour' (the acting chain stored in the rollout, one per
    state: unbiased, as it is a draw of the old policy at that state, and cheaper since the old chain
    is not simulated again; docs/benchmarks.md gives both costs)."""
    kl_multiplier: str = "closed_form"
    """Multiplier lambda of AMDP's drift trust region (A6): dual (learned log lambda, logged as
    dual/lambda), closed_form (solved per minibatch; the algorithm's log lambda is then unused) or
    none. am/lambda logs the multiplier the loss used in every mode."""
    lambda_init: float = 1.0
    """Initial multiplier of AMDP's dual mode (``kl_multiplier="dual"``), relative to the mean
    matching weight."""
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
        for name in ("actor_lr", "critic_lr", "max_grad_norm", "kl_bound", "kl_start", "ent_start", "lambda_init"):
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
        if (self.num_epochs < 1 or self.num_minibatches < 1 or self.best_of_k < 1 or self.next_action_samples < 1
                or self.kl_samples < 1):
            problems.append("--reppo.num-epochs, --reppo.num-minibatches, --reppo.best-of-k, "
                            "--reppo.next-action-samples and --reppo.kl-samples must be >= 1")
        if self.actor_loss_mode not in ("clipped", "full", "value"):
            problems.append(f"--reppo.actor-loss-mode must be clipped, full or value (got {self.actor_loss_mode!r})")
        problems.extend(self._trust_region_errors())
        if problems:
            raise ValueError("; ".join(problems))

    def _trust_region_errors(self) -> list[str]:
        """The DIME chain's and AMDP's trust-region settings: known names, and a trust region that can be
        estimated as configured (checked on the whole config: presets and --set change trust_region and
        kl_samples one at a time)."""
        problems = []
        for name, allowed in (("trust_region", TRUST_REGIONS), ("kl_estimator", KL_ESTIMATORS),
                              ("kl_paths", KL_PATHS), ("kl_multiplier", KL_MULTIPLIERS)):
            if getattr(self, name) not in allowed:
                problems.append(f"--reppo.{name.replace('_', '-')} must be one of {', '.join(allowed)} "
                                f"(got {getattr(self, name)!r})")
        if self.trust_region == "action" and self.kl_paths == "behaviour":
            problems.append("--reppo.trust-region action draws K fresh old and new chains per state; "
                            "--reppo.kl-paths behaviour (one stored path) applies to trajectory and none")
        if self.trust_region == "action" and 1 <= self.kl_samples < MIN_ACTION_KL_SAMPLES:
            problems.append("--reppo.trust-region action estimates the KL of K old and K new end points' "
                            "moment-matched Gaussians, whose variance is infinite for K < "
                            f"{MIN_ACTION_KL_SAMPLES}: it needs --reppo.kl-samples >= {MIN_ACTION_KL_SAMPLES} "
                            f"(got {self.kl_samples}; the dime presets use 8)")
        return problems

    def batch_errors(self, batch_size: int) -> list[str]:
        if self.num_minibatches >= 1 and batch_size % self.num_minibatches:
            return [f"--reppo.num-minibatches ({self.num_minibatches}) must divide the batch "
                    f"num_envs * num_steps = {batch_size}"]
        return []
