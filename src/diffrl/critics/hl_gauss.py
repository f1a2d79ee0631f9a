"""HL-Gauss histogram targets for categorical value functions.

Imani & White 2018, "Improving Regression Performance with Distributional Losses"
(ICML), and Farebrother et al. 2024, "Stop Regressing: Training Value Functions via
Classification for Scalable Deep RL", arXiv 2403.03950, Sec. 3.1: a scalar target y is
replaced by the histogram of N(y, sigma^2) over fixed bins,

    p_i(y) = [Phi((e_{i+1} - y) / sigma) - Phi((e_i - y) / sigma)] / Z(y),

where e_0 < ... < e_N are the bin edges and Z(y) the Gaussian mass between e_0 and e_N
(renormalising what falls outside the support). As in REPPO (Voelcker et al. 2025,
arXiv 2507.11019, reference ``src/jaxrl/utils.py``): bins of width
w = (vmax - vmin) / (N - 1) are centred on linspace(vmin, vmax, N), so the edges are
linspace(vmin - w/2, vmax + w/2, N + 1); sigma = 0.75 w; targets are clipped to
[vmin, vmax] first.

The support (vmin, vmax, num_bins) is static configuration: pass Python numbers, not
traced arrays (they fix shapes and are validated eagerly).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def bin_width(vmin: float, vmax: float, num_bins: int) -> float:
    """Distance between neighbouring bin centres."""
    if num_bins < 2 or not vmax > vmin:
        raise ValueError(f"need num_bins >= 2 and vmax > vmin, got {num_bins}, [{vmin}, {vmax}]")
    return (vmax - vmin) / (num_bins - 1)


def bin_centers(vmin: float, vmax: float, num_bins: int) -> jax.Array:
    """(num_bins,) the values c_i = linspace(vmin, vmax, num_bins) the bins stand for."""
    bin_width(vmin, vmax, num_bins)  # validates the arguments
    return jnp.linspace(vmin, vmax, num_bins)


def hl_gauss_encode(
    target: jax.Array,
    vmin: float,
    vmax: float,
    num_bins: int,
    sigma_ratio: float = 0.75,
) -> jax.Array:
    """(...,) scalar targets -> (..., num_bins) HL-Gauss probabilities (sum to one).

    sigma = sigma_ratio * bin width. Targets outside [vmin, vmax] are clipped, so they
    encode like the nearest end of the support.
    """
    width = bin_width(vmin, vmax, num_bins)
    sigma = sigma_ratio * width
    target = jnp.clip(jnp.asarray(target, dtype=jnp.result_type(float)), vmin, vmax)
    edges = jnp.linspace(vmin - width / 2, vmax + width / 2, num_bins + 1)
    # erf((e - y) / (sqrt(2) sigma)) = 2 Phi((e - y) / sigma) - 1; the factor 2 and the
    # offset cancel in the ratio below.
    cdf = jax.scipy.special.erf((edges - target[..., None]) / (math.sqrt(2.0) * sigma))
    mass = cdf[..., 1:] - cdf[..., :-1]
    # Z >= mass within w/2 of the clipped target, > 0.49 for sigma_ratio = 0.75: no
    # division blow-up anywhere on the support.
    total = cdf[..., -1:] - cdf[..., :1]
    return mass / total


def expectation(
    probs_or_logits: jax.Array,
    vmin: float,
    vmax: float,
    *,
    from_logits: bool = False,
) -> jax.Array:
    """(..., num_bins) -> (...,) the mean value sum_i p_i c_i of a histogram.

    ``from_logits=True`` applies a softmax over the last axis first.
    """
    probs = jax.nn.softmax(probs_or_logits, axis=-1) if from_logits else probs_or_logits
    centers = bin_centers(vmin, vmax, probs.shape[-1]).astype(probs.dtype)
    return jnp.sum(probs * centers, axis=-1)


def cross_entropy(logits: jax.Array, target_probs: jax.Array) -> jax.Array:
    """(..., num_bins), (..., num_bins) -> (...,) -sum_i p_i log softmax(logits)_i."""
    return -jnp.sum(target_probs * jax.nn.log_softmax(logits, axis=-1), axis=-1)
