"""Policies: Gaussian, diffusion (DIME chain), adjoint-matching diffusion and flow matching (FPO)."""
from diffrl.policies.base import (AdjointMatchingPolicy, LogProbPolicy, PathwisePolicy, PathwiseSample, Policy,
                                  RatioPolicy, require)

__all__ = ["AdjointMatchingPolicy", "Policy", "LogProbPolicy", "PathwisePolicy", "PathwiseSample", "RatioPolicy",
           "require"]
