"""Policies: Gaussian, diffusion (DIME chain) and adjoint-matching diffusion."""
from diffrl.policies.base import AdjointMatchingPolicy, LogProbPolicy, PathwisePolicy, PathwiseSample, Policy, require

__all__ = ["AdjointMatchingPolicy", "Policy", "LogProbPolicy", "PathwisePolicy", "PathwiseSample", "require"]
