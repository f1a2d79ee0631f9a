"""The replay buffer (diffrl.maths.replay) against a plain-Python ring per environment."""
import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.maths.replay import add, init_buffer, sample, slots_for


def _rollout(start, steps, envs):
    """(T, B) items whose value encodes (time, env): 1000 t + e."""
    t = np.arange(start, start + steps)[:, None]
    e = np.arange(envs)[None, :]
    value = (1000 * t + e).astype(np.float32)
    return {"x": jnp.asarray(value), "v": jnp.asarray(np.stack([value, -value], -1))}


def test_ring_matches_python_deques():
    capacity, envs = 7, 3
    buf = init_buffer({"x": jnp.zeros((envs,)), "v": jnp.zeros((envs, 2))}, capacity)
    oracle = [collections.deque(maxlen=capacity) for _ in range(envs)]
    t = 0
    add_jit = jax.jit(add)
    for steps in (3, 2, 4, 5, 1, 7):
        items = _rollout(t, steps, envs)
        buf = add_jit(buf, items)
        for e in range(envs):
            oracle[e].extend(np.asarray(items["x"][:, e]))
        t += steps
        assert int(buf.size) == min(t, capacity)
        assert int(buf.transitions) == min(t, capacity) * envs
        assert int(buf.position) == t % capacity
        for e in range(envs):
            stored = np.asarray(buf.data["x"][: int(buf.size), e])
            assert sorted(stored) == sorted(oracle[e])  # the same multiset: the newest `capacity` steps
            np.testing.assert_array_equal(buf.data["v"][..., 0], buf.data["x"])


def test_sampling_draws_only_filled_slots_uniformly():
    capacity, envs = 100, 4
    buf = init_buffer({"x": jnp.zeros((envs,)), "v": jnp.zeros((envs, 2))}, capacity)
    buf = add(buf, _rollout(0, 10, envs))  # 10 of 100 slots filled: 40 transitions
    drawn = np.asarray(jax.jit(sample, static_argnums=2)(buf, jax.random.key(0), 20_000)["x"])
    stored = set(np.asarray(buf.data["x"][:10]).ravel())
    assert set(drawn) <= stored
    counts = collections.Counter(drawn)
    assert len(counts) == 40
    freq = np.array(list(counts.values())) / len(drawn)
    np.testing.assert_allclose(freq, 1 / 40, atol=0.006)  # ~5 binomial std of 20,000 draws


def test_buffer_vmaps_over_seeds_and_refuses_oversized_rollouts():
    capacity, envs = 5, 2
    bufs = jax.vmap(lambda _: init_buffer({"x": jnp.zeros((envs,))}, capacity))(jnp.arange(3))
    items = {"x": jnp.ones((3, 4, envs))}
    bufs = jax.vmap(add)(bufs, items)
    assert bufs.data["x"].shape == (3, capacity, envs) and bufs.size.tolist() == [4, 4, 4]
    with pytest.raises(ValueError, match="does not fit"):
        add(init_buffer({"x": jnp.zeros((envs,))}, capacity), {"x": jnp.ones((6, envs))})
    assert slots_for(1_000_000, 16) == 62_500 and slots_for(3, 16) == 1
