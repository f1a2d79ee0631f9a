"""Running mean/variance normaliser for observations (pure functions).

The statistics are a :class:`RunningStats` pytree that lives in the train state (not
inside an env wrapper), so rollouts, updates and evaluation stay pure functions that
pass it explicitly. Batches are merged with the parallel-variance formula of Chan,
Golub & LeVeque (1979), "Updating formulae and a pairwise algorithm for computing
sample variances"::

    delta = mean_b - mean_a,   n = n_a + n_b
    mean  = mean_a + delta * n_b / n
    M2    = M2_a + M2_b + delta^2 * n_a * n_b / n,    var = M2 / n

(population variance, as numpy's ``var`` with ``ddof=0``). REPPO's ``NormalizeVec``
(github.com/cvoelcker/reppo) updates the same statistics with every batch of
observations from all environments.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class RunningStats:
    """Running statistics of vectors of size ``size``.

    mean: (size,) float32 mean of everything seen so far.
    var: (size,) float32 population variance of everything seen so far.
    count: () float32 number of vectors seen (float so huge counts do not overflow).
    """

    mean: jax.Array
    var: jax.Array
    count: jax.Array


def init_stats(size: int) -> RunningStats:
    """Empty statistics: mean 0, variance 1, count 0 (``normalize`` is then the identity)."""
    return RunningStats(
        mean=jnp.zeros((size,), jnp.float32),
        var=jnp.ones((size,), jnp.float32),
        count=jnp.zeros((), jnp.float32),
    )


def update_stats(stats: RunningStats, batch: jax.Array) -> RunningStats:
    """Merge a batch ``(..., size)`` (all leading axes are samples) into ``stats``.

    Exact merge (up to float rounding) of the old statistics with the batch's own
    mean and population variance. With ``count == 0`` the old ``var`` (1) gets
    weight 0, so the result is the batch's statistics.
    """
    x = jnp.asarray(batch, jnp.float32).reshape(-1, stats.mean.shape[-1])
    if x.shape[0] == 0:  # static shape: nothing to merge
        return stats
    n_batch = jnp.asarray(x.shape[0], jnp.float32)
    mean_batch = jnp.mean(x, axis=0)
    var_batch = jnp.mean(jnp.square(x - mean_batch), axis=0)

    total = stats.count + n_batch
    weight_batch = n_batch / total
    delta = mean_batch - stats.mean
    mean = stats.mean + delta * weight_batch
    # M2 / total, written with weights in [0, 1] so float32 does not overflow.
    var = (
        stats.var * (stats.count / total)
        + var_batch * weight_batch
        + jnp.square(delta) * (stats.count / total) * weight_batch
    )
    return RunningStats(mean=mean, var=var, count=total)


def normalize(
    stats: RunningStats, x: jax.Array, clip: float | None = 10.0, eps: float = 1e-8
) -> jax.Array:
    """``clip((x - mean) / sqrt(var + eps), -clip, clip)`` for ``x`` of shape ``(..., size)``."""
    z = (x - stats.mean) / jnp.sqrt(stats.var + eps)
    if clip is not None:
        z = jnp.clip(z, -clip, clip)
    return z


def normalise_obs(stats: RunningStats, x: jax.Array, config) -> jax.Array:
    """Observation as the networks see it: :func:`normalize` with a run's settings, or ``x`` itself.

    ``config`` is anything with the run's ``normalize_obs``, ``obs_clip`` and ``obs_norm_eps`` (a
    ``TrainConfig``): the rollout, the evaluation and the host loop all read the three here, so
    they see the same observation."""
    if not config.normalize_obs:
        return x
    return normalize(stats, x, clip=config.obs_clip, eps=config.obs_norm_eps)


def denormalize(stats: RunningStats, z: jax.Array, eps: float = 1e-8) -> jax.Array:
    """Inverse of :func:`normalize` without clipping: ``z * sqrt(var + eps) + mean``."""
    return z * jnp.sqrt(stats.var + eps) + stats.mean
