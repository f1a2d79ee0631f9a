"""The shared SGD driver, the critic's optimizer, best-of-K selection and the behaviour-entropy metric."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from diffrl.algos.epochs import flatten_time_batch, minibatch_epochs
from diffrl.algos.reppo_config import REPPOConfig
from diffrl.algos.soft_critic import best_of_k, critic_optimizer
from diffrl.core.evaluate import behaviour_entropy, entropy_where_reached


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


def test_critic_optimizer_is_adam_or_decoupled_weight_decay():
    """critic_weight_decay = 0 is the reference's clipped Adam (same state, same steps); > 0 adds
    lr * wd * params to Adam's step (AdamW): with zero gradients Adam's step is 0, so the
    parameters shrink by exactly (1 - lr * wd) per step."""
    params = {"w": jnp.array([1.0, -2.0, 4.0])}
    grads = {"w": jnp.array([0.3, -0.1, 0.2])}
    plain = critic_optimizer(REPPOConfig(critic_lr=1e-2))
    adam = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(1e-2))
    u_plain, _ = plain.update(grads, plain.init(params), params)
    u_adam, _ = adam.update(grads, adam.init(params), params)
    np.testing.assert_array_equal(u_plain["w"], u_adam["w"])

    decayed = critic_optimizer(REPPOConfig(critic_lr=1e-2, critic_weight_decay=0.1))
    state, p = decayed.init(params), params
    for _ in range(3):
        updates, state = decayed.update(jax.tree.map(jnp.zeros_like, grads), state, p)
        p = optax.apply_updates(p, updates)
    np.testing.assert_allclose(p["w"], params["w"] * (1 - 1e-2 * 0.1) ** 3, rtol=1e-6)

    with pytest.raises(ValueError, match="critic-weight-decay"):
        REPPOConfig(critic_weight_decay=-0.1).validate()


def test_anneal_lr_decays_every_step_size_linearly_to_zero():
    """With anneal_lr, Adam's step k of K is lr * (1 - k / K) times the constant-lr step (the
    same gradient each step, so Adam's normalised direction is the same); without it, lr."""
    from diffrl.algos.soft_critic import step_size

    params, grads = {"w": jnp.array([1.0, -2.0])}, {"w": jnp.array([0.3, -0.1])}
    total = 8
    annealed = critic_optimizer(REPPOConfig(critic_lr=1e-2, anneal_lr=True), total)
    constant = critic_optimizer(REPPOConfig(critic_lr=1e-2), total)
    s_a, s_c = annealed.init(params), constant.init(params)
    for k in range(total + 2):
        u_a, s_a = annealed.update(grads, s_a, params)
        u_c, s_c = constant.update(grads, s_c, params)
        np.testing.assert_allclose(u_a["w"], u_c["w"] * max(0.0, 1 - k / total), rtol=1e-5, atol=1e-12)
    assert step_size(3e-4, REPPOConfig(), 100) == 3e-4


def test_entropy_is_undefined_where_no_episode_reached_a_mode():
    none_reached = float(behaviour_entropy(jnp.array([-1, -1]), 4, jnp.array([False, False])))
    one_mode = float(behaviour_entropy(jnp.array([2, 2]), 4, jnp.array([True, True])))
    assert none_reached == one_mode == 0.0  # the same number for two different outcomes
    out = entropy_where_reached([[none_reached, one_mode, 0.5]], [[0.0, 1.0, 0.25]])
    assert out.dtype == np.float64 and out.shape == (1, 3)
    assert np.isnan(out[0, 0]) and out[0, 1:].tolist() == [0.0, 0.5]
