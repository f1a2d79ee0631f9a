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
* :class:`ExplicitNoisePolicy` (deployment, ``diffrl.artefacts.deploy``): every evaluation sampler as a
  deterministic function of pre-drawn standard normals, so that a sampler can be exported
  (ONNX, ``jax.export``) with its noise as an input and reproduced bit for bit.

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
    kl_context: what this sample's network pass computed that :meth:`PathwisePolicy.trust_region_kl`
      at the same params and obs can reuse instead of running the network again (the Gaussian's
      mean and std), or None. The algorithm passes it back as ``current`` without looking inside.
    """

    action: jax.Array
    log_prob: jax.Array
    dual_log_prob: jax.Array
    kl_context: Any = None


@runtime_checkable
class Policy(Protocol):
    action_size: int
    samplers: tuple[str, ...]
    """Names accepted by ``eval_action``; the first is the default. A policy that renamed a
    sampler may also carry ``renamed_samplers`` (old name -> new name, see
    :func:`renamed_sampler_note`)."""

    def init(self, key: jax.Array, obs_size: int) -> Params: ...

    def sample(self, params: Params, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, Any]:
        """Act (no gradient needed). Returns (action (..., d), aux pytree)."""
        ...

    def eval_action(self, params: Params, obs: jax.Array, key: jax.Array, sampler: str) -> jax.Array:
        """Evaluation action with the named sampler (e.g. 'mean', 'sde', 'reversal-ode')."""
        ...


def renamed_sampler_note(names, policy: Any) -> str:
    """Text to append to an unknown-sampler error: which of ``names`` the policy renamed.

    Reads the policy's optional ``renamed_samplers`` (old -> new); '' when none of ``names``
    is an old name. Old names are refused rather than aliased so that a name that described a
    sampler wrongly is not kept alive, and the error says what to type instead.
    """
    renamed = getattr(policy, "renamed_samplers", {})
    moved = [f"{name!r} is now {renamed[name]!r}" for name in names if name in renamed]
    if not moved:
        return ""
    return f" (renamed: {', '.join(moved)}; see {type(policy).__module__})"


def offered_samplers(requested, algo: Any) -> tuple[tuple[str, ...], str]:
    """(the requested names ``algo`` offers, a note on skipped names it renamed or '').

    For scripts that take one sampler list for several algorithms and keep, per algorithm, the
    names it offers: a retired name is not silently dropped, the note says what it is now.
    """
    kept = tuple(name for name in requested if name in algo.samplers)
    skipped = [name for name in requested if name not in algo.samplers]
    note = renamed_sampler_note(skipped, algo.policy)
    return kept, (f"skipping {skipped}{note}" if note else "")


@runtime_checkable
class LogProbPolicy(Policy, Protocol):
    def log_prob(self, params: Params, obs: jax.Array, aux: Any) -> jax.Array:
        """(...,) log-density under ``params`` of the sample described by ``aux``."""
        ...

    def entropy(self, params: Params, obs: jax.Array, key: jax.Array) -> jax.Array:
        """(...,) entropy (or a single-sample estimate) of pi(.|obs)."""
        ...


@runtime_checkable
class RatioPolicy(Policy, Protocol):
    """What PPO's likelihood-ratio surrogates need (PPO, SPO, FPO, DPPO). A policy may also carry
    ``ratio_weights``, (R,) weights on the advantage of each term (DPPO's denoising discount), and
    ``entropy`` (for the entropy bonus)."""

    def ratio_log_terms(self, params: Params, obs: jax.Array, aux: Any) -> jax.Array:
        """(..., R): R terms per sample whose differences under new and old params are the log
        likelihood ratios the surrogate clips: a Gaussian's log pi (R = 1), or minus a flow's
        conditional flow-matching losses (FPO: one per Monte-Carlo draw, or their mean), or a
        diffusion chain's per-step log-densities (DPPO: R = N denoising steps)."""
        ...


@runtime_checkable
class PathwisePolicy(Policy, Protocol):
    def rsample(self, params: Params, obs: jax.Array, key: jax.Array) -> PathwiseSample: ...

    def trust_region_kl(
        self, old_params: Params, params: Params, obs: jax.Array, key: jax.Array, behaviour: Any = None,
        current: Any = None,
    ) -> tuple[jax.Array, dict]:
        """(...,) estimate of KL(pi_old(.|s) || pi(.|s)) per state (or an upper bound,
        e.g. the whole-trajectory KL), differentiable w.r.t. ``params`` only; plus a
        dict of scalar diagnostics. ``behaviour`` is the aux that ``sample`` returned under
        ``old_params`` at these ``obs`` (the rollout's acting sample, a draw of pi_old): a
        policy may measure the KL along it instead of drawing fresh old samples. ``current``
        is the ``kl_context`` of an :meth:`rsample` under ``params`` at these ``obs`` (or None):
        a policy may reuse it instead of running its network on ``params`` again."""
        ...


@runtime_checkable
class AdjointMatchingPolicy(Policy, Protocol):
    """AMDP's capability: a controlled SDE trained by reciprocal adjoint matching.

    ``sample``'s aux carries ``pre_squash`` (X_1, the regression data) and
    ``log_prob_bound`` (the Girsanov upper-bound estimate of log pi(a|s)).
    """

    config: Any
    target_entropy: float

    def score_clip_limit(self, pre_squash: jax.Array, grad_q_action: jax.Array) -> jax.Array:
        """() norm clip limit of the pre-squash gradients of Q over a whole stored batch."""
        ...

    def matching_scores(self, pre_squash: jax.Array, grad_q_action: jax.Array,
                        limit: jax.Array) -> tuple[jax.Array, dict]:
        """(N, d) pre-squash gradient of Q at the stored end points, norm-clipped at ``limit``."""
        ...

    def matching_loss(self, params: Params, old_params: Params, obs: jax.Array, pre_squash: jax.Array,
                      score: jax.Array, key_bridge: jax.Array, alpha: jax.Array,
                      log_lambda: jax.Array) -> tuple[jax.Array, dict]:
        """Scalar regression loss on fresh bridge draws, with the drift trust region."""
        ...


def require(policy: Any, capability: type, algo: str) -> None:
    """Fail clearly (before anything compiles) if ``policy`` lacks ``capability``."""
    if not isinstance(policy, capability):
        missing = [m for m in ("log_prob", "entropy", "ratio_log_terms", "rsample", "trust_region_kl", "score_clip_limit",
                               "matching_scores", "matching_loss")
                   if hasattr(capability, m) and not hasattr(policy, m)]
        raise TypeError(
            f"algorithm '{algo}' needs a policy with {capability.__name__} "
            f"(missing: {', '.join(missing) or 'attributes'}); "
            f"{type(policy).__name__} cannot provide it"
        )


@runtime_checkable
class ExplicitNoisePolicy(Protocol):
    """Evaluation samplers with their randomness as an explicit input.

    Every sampler draws all of its randomness as ONE array of standard normals. For a batch of
    observations (B, obs_size) that array is (B, *eval_noise_shape(sampler)), batch first
    (``()``-shaped means the sampler uses no noise). ``eval_action(params, obs, key, sampler)``
    equals ``eval_action_from_noise(params, obs, draw_eval_noise(key, batch, sampler), sampler)``
    exactly: it is how ``eval_action`` is implemented.
    """

    def eval_noise_shape(self, sampler: str) -> tuple[int, ...] | None:
        """Per-observation shape of the sampler's standard normals; None: no noise."""
        ...

    def draw_eval_noise(self, key: jax.Array, batch_shape: tuple[int, ...], sampler: str) -> jax.Array | None:
        """(*batch_shape, *eval_noise_shape(sampler)) standard normals drawn from ``key``."""
        ...

    def eval_action_from_noise(self, params: Params, obs: jax.Array, noise: jax.Array | None,
                               sampler: str) -> jax.Array:
        """(..., d) evaluation action; obs (..., o), noise (..., *eval_noise_shape(sampler))."""
        ...
