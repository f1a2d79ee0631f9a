"""The action KL of the DIME / DIS chain (:mod:`diffrl.policies.dis_chain`, whose equation labels this
module continues), for the action-only trust region (``--reppo.trust-region action``): DIME's (Celik et
al. 2025, arXiv 2502.02316) bound, which TruDi (Le et al. 2026, arXiv 2606.15260) replaces by the
trajectory KL (E8) that bounds it.

(E12) action KL, moment-matched: KL(pi_old(x_N) || pi_new(x_N)) has no closed form (the chain's
     marginal density is an integral over all paths). Replaced by (E9) between the diagonal
     Gaussians with the marginals' means and variances, estimated WITHOUT BIAS (for jointly Gaussian
     end points; consistently otherwise) from K >= 6 old and K new end points driven by the SAME
     noise (common random numbers: exactly 0 when the policies agree).   :func:`moment_matched_kl`
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

MIN_ACTION_KL_SAMPLES = 6
"""K end points per state that :func:`moment_matched_kl` needs: its variance is infinite below 6."""


def moment_matched_kl(x_old: jax.Array, x_new: jax.Array, min_var: float = 1e-6) -> jax.Array:
    """(E12): (K, ..., d) end points of the old and the new chain, the k-th of each driven by the
    same noise, -> (...,) an unbiased estimate of KL(N(mu_old, v_old) || N(mu_new, v_new)) between the
    Gaussians with the true per-dimension means and variances of the two marginals, summed over d.
    Needs K >= 6.

    Per dimension, with the true moments, KL = 0.5 [log(v_n / v_o) + r + (mu_o - mu_n)^2 / v_n - 1],
    r = v_o / v_n. Plugging in sample moments (the estimator before this one) overestimates a pure
    mean shift by E[1 / s_n^2] v_n = (K - 1) / (K - 3) (3x at K = 4) and has an infinite variance for
    K <= 5 (1 / s^2 of a chi-square with K - 1 <= 4 degrees of freedom has no second moment). Here,
    from the K pairs (common noise: s_o^2, s_n^2 and s_on the sample variances and covariance,
    ddof 1; m_o, m_n the sample means; beta = s_on / s_n^2, the regression slope of old on new):

      log(s_n^2 / s_o^2)                   unbiased for log(v_n / v_o): each s^2 is v chi2_{K-1} / (K-1),
                                           the same offset of E log cancels;
      r^ = (2 beta^2 + (K - 4) s_o^2 / s_n^2) / (K - 2)
                                           unbiased for r: E[beta^2] = b^2 + v_e / ((K - 3) v_n),
                                           E[s_o^2 / s_n^2] = b^2 + v_e (K - 1) / ((K - 3) v_n) with
                                           v_o = b^2 v_n + v_e (regression of x_o on x_n);
      c (m_o - m_n)^2 / s_n^2 - (r^ - 2 beta + 1) / K,  c = (K - 3) / (K - 1)
                                           unbiased for (mu_o - mu_n)^2 / v_n: the sample means are
                                           independent of the sample covariance, E[(m_o - m_n)^2] =
                                           (mu_o - mu_n)^2 + Var(x_n - x_o) / K, and
                                           Var(x_n - x_o) / v_n = r - 2 b + 1.

    Unbiased whenever (x_old, x_new) is jointly Gaussian per dimension (two Gaussians; a chain whose
    control is affine in x); consistent otherwise, for the moment-matched KL (which sees the first
    two moments only: a change of shape that keeps them goes unseen). Its variance is finite for
    K >= 6 (every term has at most 1 / s_n^2 to the second power: chi2_{K-1} has E[chi^-4] < inf
    iff K - 1 > 4). Unbiased estimates can be negative (e.g. identical means and variances up to
    sampling); 0 (up to rounding) when old and new end points coincide.

    Why not an importance-sampled log density: p(x_N) = E_{B(x_{0:N-1} | x_N)}[p0 prod F / prod B]
    with the reference B (E5) as the proposal (or the old forward kernel inverted) was tried on
    linear-Gaussian chains with known marginals (DIME's schedule, DIME-optimal controls for two
    nearby targets): with 64 paths per end point the estimate was still 1.3-3.5x the true action
    KL, in three of four cases above the trajectory KL (E8) that bounds it, and below 0 for a
    change of variance: a contracting chain's posterior over its path is far from any fixed
    backward proposal.
    """
    k = x_old.shape[0]
    if k < MIN_ACTION_KL_SAMPLES:
        raise ValueError(f"the action KL estimate needs >= {MIN_ACTION_KL_SAMPLES} end points per state "
                         f"(its variance is infinite below that), got {k}")
    if x_new.shape != x_old.shape:
        raise ValueError(f"old and new end points must have the same shape, got {x_old.shape} and {x_new.shape}")
    m_old, m_new = jnp.mean(x_old, axis=0), jnp.mean(x_new, axis=0)
    d_old, d_new = x_old - m_old, x_new - m_new
    v_old = jnp.maximum(jnp.sum(d_old**2, axis=0) / (k - 1), min_var)
    v_new = jnp.maximum(jnp.sum(d_new**2, axis=0) / (k - 1), min_var)
    beta = jnp.sum(d_old * d_new, axis=0) / (k - 1) / v_new
    ratio = (2.0 * beta**2 + (k - 4) * v_old / v_new) / (k - 2)
    mean_term = (k - 3) / (k - 1) * (m_old - m_new) ** 2 / v_new - (ratio - 2.0 * beta + 1.0) / k
    per_dim = 0.5 * (jnp.log(v_new / v_old) + ratio - 1.0 + mean_term)
    return jnp.sum(per_dim, axis=-1)
