"""The policy interface and the capabilities algorithms ask for.

A policy is a stateless object (hyper-parameters only) whose methods are pure
functions of ``params``. Observations carry arbitrary leading batch axes
``(..., obs_size)``; actions come back as ``(..., action_size)`` in [-1, 1].
Every method takes ONE key and splits it internally.

Algorithms never branch on the policy's type. They require a capability:

* :class:`Policy` (all policies): ``init``, ``sample`` (acting; returns the action and
  a typed pytree ``aux`` that rollouts store), ``eval_action`` with a named sampler.
* :class:`LogProbPolicy` (PPO): exact ``log_prob`` of a stored sample and ``entropy``.
* :class:`PathwisePolicy` (REPPO, TruDi): a reparameterised sample with its log-density
  term (exact for a Gaussian, DIME's upper-bound estimate for a diffusion chain) and a
  per-state trust-region KL(old || new) estimate.

``diffrl.policies.require(policy, capability, algo)`` raises a clear error when an
algorithm is paired with a policy that cannot honestly provide what it needs.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax
from flax import struct

Params = Any


@struct.dataclass
class PathwiseSample:
    """Output of :meth:`PathwisePolicy.rsample` (all differentiable w.r.t. params).

    action: (..., d) in (-1, 1).
    log_prob: (...,) log pi(a|s), or an estimate of an upper bound on it (diffusion);
      used in the actor loss and the soft reward.
    dual_log_prob: (...,) the quantity whose negative the temperature dual drives
      toward the entropy target (== log_prob for Gaussians; DIME's running cost).
    """

    action: jax.Array
    log_prob: jax.Array
    dual_log_prob: jax.Array


@runtime_checkable
class Policy(Protocol):
    action_size: int
    samplers: tuple[str, ...]
    """Names accepted by ``eval_action``; the first is the default."""

    def init(self, key: jax.Array, obs_size: int) -> Params: ...

    def sample(self, params: Params, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, Any]:
        """Act (no gradient needed). Returns (action (..., d), aux pytree)."""
        ...

    def eval_action(self, params: Params, obs: jax.Array, key: jax.Array, sampler: str) -> jax.Array:
        """Evaluation action with the named sampler (e.g. 'mean', 'sde', 'ode')."""
        ...


@runtime_checkable
class LogProbPolicy(Policy, Protocol):
    def log_prob(self, params: Params, obs: jax.Array, aux: Any) -> jax.Array:
        """(...,) log-density under ``params`` of the sample described by ``aux``."""
        ...

    def entropy(self, params: Params, obs: jax.Array, key: jax.Array) -> jax.Array:
        """(...,) entropy (or a single-sample estimate) of pi(.|obs)."""
        ...


@runtime_checkable
class PathwisePolicy(Policy, Protocol):
    def rsample(self, params: Params, obs: jax.Array, key: jax.Array) -> PathwiseSample: ...

    def trust_region_kl(
        self, old_params: Params, params: Params, obs: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, dict]:
        """(...,) estimate of KL(pi_old(.|s) || pi(.|s)) per state (or an upper bound,
        e.g. the whole-trajectory KL), differentiable w.r.t. ``params`` only; plus a
        dict of scalar diagnostics."""
        ...


@runtime_checkable
class AdjointMatchingPolicy(Policy, Protocol):
    """AMDP's capability: a controlled SDE trained by reciprocal adjoint matching.

    ``sample``'s aux carries ``pre_squash`` (X_1, the regression data) and
    ``log_prob_bound`` (the Girsanov upper-bound estimate of log pi(a|s)).
    """

    config: Any
    target_entropy: float

    def matching_scores(self, pre_squash: jax.Array, grad_q_action: jax.Array) -> tuple[jax.Array, dict]:
        """(N, d) clipped pre-squash gradient of Q at the stored end points."""
        ...

    def matching_loss(self, params: Params, old_params: Params, obs: jax.Array, pre_squash: jax.Array,
                      score: jax.Array, key_bridge: jax.Array, alpha: jax.Array,
                      log_lambda: jax.Array) -> tuple[jax.Array, dict]:
        """Scalar regression loss on fresh bridge draws, with the drift trust region."""
        ...


def require(policy: Any, capability: type, algo: str) -> None:
    """Fail clearly (before anything compiles) if ``policy`` lacks ``capability``."""
    if not isinstance(policy, capability):
        missing = [m for m in ("log_prob", "entropy", "rsample", "trust_region_kl", "matching_scores",
                               "matching_loss")
                   if hasattr(capability, m) and not hasattr(policy, m)]
        raise TypeError(
            f"algorithm '{algo}' needs a policy with {capability.__name__} "
            f"(missing: {', '.join(missing) or 'attributes'}); "
            f"{type(policy).__name__} cannot provide it"
        )
