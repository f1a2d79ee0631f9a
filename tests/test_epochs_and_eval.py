"""The shared SGD driver, best-of-K selection and the behaviour-entropy metric."""
import math

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.algos.epochs import flatten_time_batch, minibatch_epochs
from diffrl.algos.soft_critic import best_of_k
from diffrl.core.evaluate import behaviour_entropy


def test_every_sample_visited_once_per_epoch():
    data = {"i": jnp.arange(24)}

    def step(carry, mb, key):
        return carry.at[mb["i"]].add(1), {"size": jnp.asarray(mb["i"].shape[0], jnp.float32)}

    counts, metrics = minibatch_epochs(jax.random.PRNGKey(0), data, jnp.zeros(24, jnp.int32), step, 3, 4)
    np.testing.assert_array_equal(counts, 3)
    assert float(metrics["size"]) == 6.0


def test_flatten_time_batch():
    x = jnp.arange(2 * 3 * 4).reshape(2, 3, 4)
    np.testing.assert_array_equal(flatten_time_batch(x)[4], x[1, 1])


def test_best_of_k_picks_argmax_q():
    # Candidates are deterministic functions of the key; Q prefers actions near 0.3.
    def sample(obs, key):
        return jax.random.uniform(key, obs.shape[:-1] + (1,), minval=-1, maxval=1)

    def q(cobs, a):
        return -((a[..., 0] - 0.3) ** 2)

    obs = jnp.zeros((5, 2))
    a = best_of_k(sample, q, obs, obs, jax.random.PRNGKey(0), 64)
    cand = sample(jnp.zeros((64, 5, 2)), jax.random.PRNGKey(0))
    expected = cand[jnp.argmax(q(None, cand), axis=0), jnp.arange(5)]
    np.testing.assert_allclose(a, expected)
    assert a.shape == (5, 1)


def test_behaviour_entropy_extremes_and_value():
    assert float(behaviour_entropy(jnp.zeros(10, jnp.int32), 2)) == 0.0
    np.testing.assert_allclose(behaviour_entropy(jnp.array([0, 1] * 5), 2), 1.0, rtol=1e-6)
    p = np.array([0.75, 0.25])
    expected = -(p * np.log(p)).sum() / math.log(2)
    np.testing.assert_allclose(behaviour_entropy(jnp.array([0, 0, 0, 1]), 2), expected, rtol=1e-6)
    # invalid episodes are ignored
    np.testing.assert_allclose(
        behaviour_entropy(jnp.array([0, 1, 1]), 2, valid=jnp.array([True, True, False])), 1.0, rtol=1e-6)
