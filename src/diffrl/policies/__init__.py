"""Policies: Gaussian, diffusion (DIME chain) and adjoint-matching diffusion."""
from diffrl.policies.base import LogProbPolicy, PathwisePolicy, PathwiseSample, Policy, require

__all__ = ["Policy", "LogProbPolicy", "PathwisePolicy", "PathwiseSample", "require"]
