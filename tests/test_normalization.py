"""The running normaliser against numpy on the concatenated data."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.maths.normalization import RunningStats, denormalize, init_stats, normalize, update_stats


def test_update_matches_numpy_over_several_batches():
    rng = np.random.default_rng(0)
    size = 3
    # Batches of different leading shapes, offsets and scales (far from 0 / 1).
    batches = [
        rng.normal(5.0, 2.0, (7, size)),
        rng.normal(-3.0, 0.5, (4, 6, size)),
        rng.normal(100.0, 10.0, (1, size)),
        rng.normal(0.0, 1e-3, (2, 3, 5, size)),
    ]
    update = jax.jit(update_stats)
    stats = init_stats(size)
    seen = []
    for batch in batches:
        stats = update(stats, jnp.asarray(batch, jnp.float32))
        seen.append(batch.reshape(-1, size))
        data = np.concatenate(seen).astype(np.float32).astype(np.float64)
        np.testing.assert_allclose(stats.count, len(data))
        np.testing.assert_allclose(stats.mean, data.mean(0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(stats.var, data.var(0), rtol=1e-4, atol=1e-5)
    assert stats.mean.dtype == jnp.float32 and stats.var.dtype == jnp.float32


def test_first_update_gives_batch_statistics_and_identity_before():
    stats = init_stats(2)
    x = jnp.array([[1.0, -2.0], [3.0, 4.0]])
    np.testing.assert_allclose(normalize(stats, x), x, atol=1e-6)  # mean 0, var 1
    stats = update_stats(stats, x)
    np.testing.assert_allclose(stats.mean, [2.0, 1.0])
    np.testing.assert_allclose(stats.var, [1.0, 9.0])


def test_large_counts_stay_accurate():
    # Many equal batches: the running mean must not drift (weights stay in [0, 1]).
    rng = np.random.default_rng(1)
    batch = jnp.asarray(rng.normal(2.0, 3.0, (4096, 2)), jnp.float32)

    def body(s, _):
        return update_stats(s, batch), None

    stats, _ = jax.lax.scan(body, init_stats(2), None, length=1000)
    np.testing.assert_allclose(stats.count, 4096 * 1000)
    np.testing.assert_allclose(stats.mean, np.mean(np.asarray(batch, np.float64), 0), rtol=1e-4)
    np.testing.assert_allclose(stats.var, np.var(np.asarray(batch, np.float64), 0), rtol=1e-3)


def test_normalize_clips_and_inverts():
    stats = RunningStats(mean=jnp.array([1.0, -1.0]), var=jnp.array([4.0, 0.25]), count=jnp.array(10.0))
    x = jnp.array([[3.0, -1.5], [1.0 + 2.0 * 50, -1.0]])
    z = normalize(stats, x, clip=10.0, eps=0.0)
    np.testing.assert_allclose(z, [[1.0, -1.0], [10.0, 0.0]], rtol=1e-6)
    np.testing.assert_allclose(denormalize(stats, normalize(stats, x[:1], clip=None, eps=0.0), eps=0.0), x[:1])
    # Constant features (var 0) map to 0, not to inf/nan.
    const = update_stats(init_stats(1), jnp.ones((5, 1)))
    np.testing.assert_array_equal(normalize(const, jnp.ones((3, 1))), 0.0)


def test_stats_are_a_pytree_for_jit_and_vmap():
    stats = init_stats(2)
    batches = jnp.arange(24.0).reshape(3, 4, 2)  # 3 independent seeds
    out = jax.vmap(update_stats, in_axes=(None, 0))(stats, batches)
    assert out.mean.shape == (3, 2)
    np.testing.assert_allclose(out.mean[1], np.asarray(batches[1]).mean(0))
