"""GAE and soft lambda-returns against plain-Python double loops."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.maths.returns import gae, soft_lambda_returns, soft_rewards

GAMMA, LAM = 0.97, 0.9


def _episode_flags(rng, T, B):
    """Random terminations/truncations, forced mid-rollout and at the last step."""
    terminated = rng.random((T, B)) < 0.15
    truncated = rng.random((T, B)) < 0.15
    terminated[T // 2, 0] = True
    truncated[T // 2, 0] = False
    truncated[T // 3, min(1, B - 1)] = True
    terminated[T // 3, min(1, B - 1)] = False
    terminated[-1, 0], truncated[-1, 0] = True, False
    truncated[-1, min(1, B - 1)], terminated[-1, min(1, B - 1)] = True, False
    return terminated, truncated


def _gae_loop(r, v, nv, term, trunc, gamma, lam):
    T, B = r.shape
    adv = np.zeros((T, B))
    for b in range(B):
        next_adv = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if term[t, b] else nv[t, b]
            delta = r[t, b] + gamma * bootstrap - v[t, b]
            if term[t, b] or trunc[t, b]:
                next_adv = 0.0
            adv[t, b] = delta + gamma * lam * next_adv
            next_adv = adv[t, b]
    return adv, adv + v


def _lambda_loop(rs, nv, term, trunc, gamma, lam):
    T, B = rs.shape
    ret = np.zeros((T, B))
    for b in range(B):
        for t in reversed(range(T)):
            if term[t, b]:
                ret[t, b] = rs[t, b]
            elif trunc[t, b] or t == T - 1:
                ret[t, b] = rs[t, b] + gamma * nv[t, b]
            else:
                ret[t, b] = rs[t, b] + gamma * (lam * ret[t + 1, b] + (1 - lam) * nv[t, b])
    return ret


def _data(seed, T, B):
    rng = np.random.default_rng(seed)
    r, v, nv = (rng.normal(size=(T, B)) for _ in range(3))
    term, trunc = _episode_flags(rng, T, B)
    return r, v, nv, term, trunc


@pytest.mark.parametrize("T,B", [(1, 1), (2, 3), (7, 4), (33, 5)])
@pytest.mark.parametrize("float_flags", [False, True])
def test_gae_matches_loop(T, B, float_flags):
    r, v, nv, term, trunc = _data(T * 100 + B, T, B)
    flags = (term.astype(np.float32), trunc.astype(np.float32)) if float_flags else (term, trunc)
    adv, ret = jax.jit(gae, static_argnums=(5, 6))(
        *(jnp.asarray(x, jnp.float32) for x in (r, v, nv)), *map(jnp.asarray, flags), GAMMA, LAM
    )
    want_adv, want_ret = _gae_loop(r, v, nv, term, trunc, GAMMA, LAM)
    np.testing.assert_allclose(adv, want_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, want_ret, rtol=1e-5, atol=1e-5)


def test_gae_lambda_one_no_ends_is_discounted_return():
    """lam = 1, no episode ends and consistent values (V'_t = V_{t+1}): the deltas
    telescope, A_t + V_t = sum_k gamma^k r_{t+k} + gamma^(T-t) V'_{T-1}."""
    rng = np.random.default_rng(0)
    T, B = 6, 2
    r, v = rng.normal(size=(T, B)), rng.normal(size=(T, B))
    nv = np.concatenate([v[1:], rng.normal(size=(1, B))])
    zeros = np.zeros((T, B), bool)
    _, ret = gae(*(jnp.asarray(x, jnp.float32) for x in (r, v, nv)), zeros, zeros, GAMMA, 1.0)
    for t in range(T):
        disc = sum(GAMMA**k * r[t + k] for k in range(T - t)) + GAMMA ** (T - t) * nv[-1]
        np.testing.assert_allclose(ret[t], disc, rtol=1e-5, atol=1e-5)


def test_gae_truncation_bootstraps_termination_does_not():
    """Single step: truncated -> r + gamma V' - V; terminated -> r - V."""
    one = lambda x: jnp.full((1, 1), x, jnp.float32)  # noqa: E731
    adv_trunc, _ = gae(one(1.0), one(2.0), one(10.0), one(0.0), one(1.0), 0.5, 0.9)
    adv_term, _ = gae(one(1.0), one(2.0), one(10.0), one(1.0), one(0.0), 0.5, 0.9)
    assert float(adv_trunc[0, 0]) == pytest.approx(1.0 + 5.0 - 2.0)
    assert float(adv_term[0, 0]) == pytest.approx(1.0 - 2.0)


@pytest.mark.parametrize("T,B", [(1, 1), (2, 3), (7, 4), (33, 5)])
def test_soft_lambda_returns_matches_loop(T, B):
    rs, _, nv, term, trunc = _data(T * 7 + B, T, B)
    got = jax.jit(soft_lambda_returns, static_argnums=(4, 5))(
        jnp.asarray(rs, jnp.float32), jnp.asarray(nv, jnp.float32), term, trunc, GAMMA, LAM
    )
    np.testing.assert_allclose(got, _lambda_loop(rs, nv, term, trunc, GAMMA, LAM), rtol=1e-5, atol=1e-5)


def test_soft_lambda_returns_lambda_limits():
    """lam = 0 is the one-step target everywhere; with no episode ends and lam = 1 it is
    the Monte-Carlo sum bootstrapped at the rollout end."""
    rng = np.random.default_rng(1)
    T, B = 5, 3
    rs, nv = rng.normal(size=(T, B)), rng.normal(size=(T, B))
    zeros = np.zeros((T, B), bool)
    one_step = soft_lambda_returns(jnp.asarray(rs), jnp.asarray(nv), zeros, zeros, GAMMA, 0.0)
    np.testing.assert_allclose(one_step, rs + GAMMA * nv, rtol=1e-5, atol=1e-6)
    mc = soft_lambda_returns(jnp.asarray(rs), jnp.asarray(nv), zeros, zeros, GAMMA, 1.0)
    for t in range(T):
        want = sum(GAMMA**k * rs[t + k] for k in range(T - t)) + GAMMA ** (T - t) * nv[-1]
        np.testing.assert_allclose(mc[t], want, rtol=1e-5, atol=1e-5)


def test_both_flags_count_as_termination():
    one = lambda x: jnp.full((1, 1), x, jnp.float32)  # noqa: E731
    got = soft_lambda_returns(one(1.0), one(10.0), one(1.0), one(1.0), 0.5, 0.9)
    assert float(got[0, 0]) == pytest.approx(1.0)


def test_discarded_non_finite_values_do_not_leak():
    """A NaN next value behind a termination and a NaN return behind a time-out are cut."""
    rs = jnp.ones((3, 1))
    nv = jnp.array([[2.0], [jnp.nan], [3.0]])
    term = jnp.array([[0.0], [1.0], [0.0]])
    trunc = jnp.zeros((3, 1))
    assert bool(jnp.all(jnp.isfinite(soft_lambda_returns(rs, nv, term, trunc, 0.9, 0.9))))
    adv, _ = gae(rs, jnp.zeros((3, 1)), nv, term, trunc, 0.9, 0.9)
    assert bool(jnp.all(jnp.isfinite(adv)))
    nv2 = jnp.array([[2.0], [1.0], [jnp.nan]])
    trunc2 = jnp.array([[0.0], [1.0], [0.0]])
    got = soft_lambda_returns(rs, nv2, jnp.zeros((3, 1)), trunc2, 0.9, 0.9)
    assert bool(jnp.all(jnp.isfinite(got[:2])))


def test_soft_rewards():
    r = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    logp = jnp.array([[-1.0, 0.5], [2.0, -3.0]])
    term = jnp.array([[False, True], [False, False]])
    got = soft_rewards(r, logp, term, 0.9, 0.1)
    want = np.array(r) - 0.9 * 0.1 * np.array(logp) * (1 - np.array(term))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert float(got[0, 1]) == 2.0  # terminal: no entropy of a non-existent next state
    # alpha is a constant of the target: no gradient flows into it.
    grad_alpha = jax.grad(lambda a: jnp.sum(soft_rewards(r, logp, term, 0.9, a)))(0.1)
    assert float(grad_alpha) == 0.0


def test_vmap_over_seeds():
    r, v, nv, term, trunc = _data(3, 6, 2)
    stack = lambda x: jnp.stack([jnp.asarray(x, jnp.float32)] * 3)  # noqa: E731
    adv, _ = jax.vmap(lambda *a: gae(*a, GAMMA, LAM))(*map(stack, (r, v, nv, term, trunc)))
    np.testing.assert_allclose(adv[2], _gae_loop(r, v, nv, term, trunc, GAMMA, LAM)[0], rtol=1e-5, atol=1e-5)
