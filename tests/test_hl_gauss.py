"""HL-Gauss encoding: normalisation, closed-form bin masses, mean recovery, clipping."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.critics.hl_gauss import (
    bin_centers,
    bin_width,
    cross_entropy,
    expectation,
    hl_gauss_encode,
)

# jitted (support static): eager dispatch is slow on the shared CPU test machine.
encode = jax.jit(hl_gauss_encode, static_argnums=(1, 2, 3, 4))
mean_of = jax.jit(expectation, static_argnums=(1, 2), static_argnames="from_logits")

SUPPORTS = [(0.0, 150.0, 151), (-10.0, 10.0, 101), (-1.0, 1.0, 11)]


def _normal_cdf(x):
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@pytest.mark.parametrize("vmin,vmax,n", SUPPORTS)
def test_probabilities_sum_to_one_and_are_nonnegative(vmin, vmax, n):
    y = jnp.linspace(vmin - 5.0, vmax + 5.0, 257).reshape(257, 1)  # extra axis: any batch shape
    probs = encode(y, vmin, vmax, n)
    assert probs.shape == (257, 1, n)
    assert bool(jnp.all(probs >= 0.0))
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)


def test_matches_truncated_gaussian_bin_masses():
    """Oracle: p_i = [Phi((e_{i+1}-y)/s) - Phi((e_i-y)/s)] / [Phi((e_N-y)/s) - Phi((e_0-y)/s)]."""
    vmin, vmax, n = -2.0, 3.0, 11
    w = (vmax - vmin) / (n - 1)
    s = 0.6 * w
    edges = [vmin - w / 2 + i * w for i in range(n + 1)]
    for y in (-2.0, -1.3, 0.0, 0.77, 3.0):
        z = _normal_cdf((edges[-1] - y) / s) - _normal_cdf((edges[0] - y) / s)
        want = [(_normal_cdf((edges[i + 1] - y) / s) - _normal_cdf((edges[i] - y) / s)) / z for i in range(n)]
        got = encode(jnp.asarray(y), vmin, vmax, n, sigma_ratio=0.6)
        np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("vmin,vmax,n", SUPPORTS)
def test_expectation_recovers_targets_inside_support(vmin, vmax, n):
    """Away from the ends (>= 3 bins = 4 sigma inside), the binned mean equals the target
    up to (i) aliasing of the Gaussian on a grid, about (w / pi) exp(-2 pi^2 sigma^2 / w^2)
    = 5e-6 w for sigma = 0.75 w (Poisson summation), (ii) the truncated tail mass beyond
    the outer edge, Phi(-3.5 w / sigma) < 2e-6, times <= 4 w, and (iii) float32 rounding
    of values up to 150 (~2e-5 absolute). Tolerance 1e-4 w + 5e-5 covers all three."""
    w = bin_width(vmin, vmax, n)
    y = jnp.linspace(vmin + 3 * w, vmax - 3 * w, 2001)
    err = jnp.abs(mean_of(encode(y, vmin, vmax, n), vmin, vmax) - y)
    assert float(err.max()) < 1e-4 * w + 5e-5


def test_expectation_near_ends_is_biased_inward_by_less_than_half_a_bin():
    """At the ends the renormalised Gaussian loses its outer tail: the mean moves inward."""
    vmin, vmax, n = 0.0, 10.0, 11
    ends = encode(jnp.array([vmin, vmax]), vmin, vmax, n)
    mean_lo, mean_hi = mean_of(ends, vmin, vmax)
    assert vmin < float(mean_lo) < vmin + 0.5
    assert vmax - 0.5 < float(mean_hi) < vmax


def test_targets_outside_support_are_clipped():
    vmin, vmax, n = -1.0, 1.0, 21
    outside = encode(jnp.array([-7.0, 1e6, jnp.inf]), vmin, vmax, n)
    ends = encode(jnp.array([vmin, vmax, vmax]), vmin, vmax, n)
    np.testing.assert_array_equal(outside, ends)


def test_expectation_from_logits_and_centers():
    np.testing.assert_allclose(bin_centers(-1.0, 1.0, 5), [-1.0, -0.5, 0.0, 0.5, 1.0])
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(4, 5)), jnp.float32)
    np.testing.assert_allclose(
        mean_of(logits, -1.0, 1.0, from_logits=True),
        mean_of(jax.nn.softmax(logits), -1.0, 1.0),
        rtol=1e-6,
    )


def test_cross_entropy_is_minimised_by_the_target():
    target = encode(jnp.array(0.3), -1.0, 1.0, 11)
    # far bins have probability exactly 0 in float32; floor the log to stay finite.
    best = cross_entropy(jnp.log(jnp.maximum(target, 1e-30)), target)
    other = cross_entropy(jnp.zeros(11), target)
    entropy = -jnp.sum(jax.scipy.special.xlogy(target, target))
    np.testing.assert_allclose(best, entropy, rtol=1e-5)
    assert float(other) > float(best)


def test_invalid_support_raises():
    with pytest.raises(ValueError):
        bin_centers(1.0, 1.0, 11)
    with pytest.raises(ValueError):
        encode(jnp.zeros(()), 0.0, 1.0, 1)
