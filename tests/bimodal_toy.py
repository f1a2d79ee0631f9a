"""The state-free bimodal toy shared by the max-entropy fixed-point tests (TruDi, AMDP)."""
import jax.numpy as jnp
import numpy as np


def bimodal_q(a):
    """Q(a) = log(N(a; -0.5, 0.15) + N(a; 0.5, 0.15)) (unnormalised), a: (..., 1) -> (...,)."""
    a = a[..., 0]
    return jnp.log(jnp.exp(-0.5 * ((a - 0.5) / 0.15) ** 2) + jnp.exp(-0.5 * ((a + 0.5) / 0.15) ** 2))


def target_bins(edges, alpha):
    """Probabilities of p*(a) ∝ exp(Q(a)/alpha) on (-1, 1) in the given bins, and E[(|a| - 0.5)^2]."""
    grid = np.linspace(-1.0, 1.0, 40_001)
    dens = np.exp(np.asarray(bimodal_q(jnp.asarray(grid)[:, None]), np.float64) / alpha)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(grid))])
    spread = np.trapezoid(dens * (np.abs(grid) - 0.5) ** 2, grid) / cdf[-1]
    return np.diff(np.interp(edges, grid, cdf / cdf[-1])), spread
