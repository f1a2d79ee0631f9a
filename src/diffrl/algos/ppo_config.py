"""PPO settings (Schulman et al. 2017), defaults after MuJoCo Playground's brax-PPO; SPO reads them too."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PPOConfig:
    learning_rate: float = 3e-4
    """Adam step size (policy and value)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_eps: float = 0.2
    """Likelihood-ratio clip of the surrogate objective (SPO: eps of its quadratic penalty, the
    trust region |ratio - 1| <= eps)."""
    log_ratio_clip: float = 0.0
    """Clamp each log ratio (new minus old log-density terms) to [-c, c] before exponentiating, no
    gradient beyond (FPO++'s per-draw clamp); 0 disables."""
    value_clip_eps: float | None = None
    """Clip of the value update around the rollout-time value; None disables value clipping."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    ent_coef: float = 1e-3
    """Weight of the entropy bonus."""
    num_epochs: int = 4
    """Passes over each rollout."""
    num_minibatches: int = 8
    """Minibatches per epoch; must divide num_envs * num_steps."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    normalize_advantages: bool = True
    """Standardise advantages per minibatch."""
    value_hidden: tuple[int, ...] = (256, 256, 256)
    """Value network hidden widths."""
    value_act: str = "swish"
    """Value network activation."""
    anneal_lr: bool = False
    """Linearly decay the learning rate to zero over training."""

    def validate(self) -> None:
        problems = []
        if not self.learning_rate > 0:
            problems.append(f"--ppo.learning-rate must be positive (got {self.learning_rate})")
        if not 0 < self.gamma <= 1:
            problems.append(f"--ppo.gamma must be in (0, 1] (got {self.gamma})")
        if not 0 <= self.gae_lambda <= 1:
            problems.append(f"--ppo.gae-lambda must be in [0, 1] (got {self.gae_lambda})")
        if not self.clip_eps > 0:
            problems.append("--ppo.clip-eps must be positive")
        if not self.log_ratio_clip >= 0:
            problems.append(f"--ppo.log-ratio-clip must be >= 0 (0 disables; got {self.log_ratio_clip})")
        if self.num_epochs < 1 or self.num_minibatches < 1:
            problems.append("--ppo.num-epochs and --ppo.num-minibatches must be >= 1")
        if not self.max_grad_norm > 0:
            problems.append("--ppo.max-grad-norm must be positive")
        if problems:
            raise ValueError("; ".join(problems))

    def batch_errors(self, batch_size: int) -> list[str]:
        if self.num_minibatches >= 1 and batch_size % self.num_minibatches:
            return [f"--ppo.num-minibatches ({self.num_minibatches}) must divide the batch "
                    f"num_envs * num_steps = {batch_size}"]
        return []
