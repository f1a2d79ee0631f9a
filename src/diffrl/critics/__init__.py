"""Critics: HL-Gauss histogram targets and REPPO's categorical Q-function."""
from diffrl.critics.categorical import (
    PRIOR_LOGIT_SCALE,
    CategoricalCritic,
    CriticConfig,
    CriticOutput,
    critic_loss,
)
from diffrl.critics.hl_gauss import (
    bin_centers,
    bin_width,
    cross_entropy,
    expectation,
    hl_gauss_encode,
)

__all__ = [
    "PRIOR_LOGIT_SCALE",
    "CategoricalCritic",
    "CriticConfig",
    "CriticOutput",
    "critic_loss",
    "bin_centers",
    "bin_width",
    "cross_entropy",
    "expectation",
    "hl_gauss_encode",
]
