"""diffrl.algos.offpolicy_losses against plain loops: the soft TD losses (scalar and categorical
ensembles), the reverse-KL actor loss's fixed temperature, and SAC's Polyak update."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.algos.offpolicy_losses import categorical_td_loss, pathwise_actor_loss, polyak_update, scalar_td_loss
from diffrl.critics.crossq import atoms


def test_scalar_td_loss_matches_a_loop():
    rng = np.random.default_rng(0)
    q, next_q = rng.normal(size=(2, 5)), rng.normal(size=(2, 5))
    r, term, lp = rng.normal(size=5), np.array([0, 1, 0, 0, 1.0]), rng.normal(size=5)
    for reduce, pick in (("min", np.min), ("mean", np.mean)):
        loss, _ = scalar_td_loss(*(jnp.asarray(v, jnp.float32) for v in (q, next_q, r, term, lp)), 0.3, 0.9, reduce)
        total = 0.0
        for e in range(2):
            for n in range(5):
                y = r[n] + 0.9 * (1 - term[n]) * (pick(next_q[:, n]) - 0.3 * lp[n])
                total += 0.5 * (q[e, n] - y) ** 2
        np.testing.assert_allclose(loss, total / 10, rtol=1e-5)


def test_categorical_td_loss_matches_a_loop():
    from test_crossq import _project_loop

    rng = np.random.default_rng(1)
    support = np.asarray(atoms(-5.0, 5.0, 11))
    logits, next_logits = rng.normal(size=(2, 4, 11)), rng.normal(size=(2, 4, 11))
    r, term, lp = rng.normal(size=4), np.array([0, 0, 1, 0.0]), rng.normal(size=4)
    alpha, gamma, coef = 0.2, 0.95, 0.005

    def softmax(x):
        z = np.exp(x - x.max(-1, keepdims=True))
        return z / z.sum(-1, keepdims=True)

    p_next = softmax(next_logits)
    proj = np.stack([_project_loop(p_next[e], r, gamma * (1 - term), alpha * lp, support) for e in range(2)])
    for reduce in ("mean", "min"):
        if reduce == "mean":
            target = proj.mean(0)
        else:
            lowest = np.argmin((p_next * support).sum(-1), axis=0)
            target = np.stack([proj[lowest[n], n] for n in range(4)])
        p = softmax(logits)
        expected = np.mean(-(target[None] * np.log(p)).sum(-1) + coef * (p * np.log(p)).sum(-1))
        loss, _ = categorical_td_loss(*(jnp.asarray(v, jnp.float32) for v in (logits, next_logits, r, term, lp)),
                                      alpha, gamma, jnp.asarray(support), reduce, coef)
        np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_pathwise_actor_loss_holds_the_temperature_fixed():
    lp, q = jnp.array([0.5, -1.0]), jnp.array([2.0, 1.0])
    np.testing.assert_allclose(pathwise_actor_loss(lp, q, 0.3), np.mean(0.3 * np.array([0.5, -1.0]) - [2.0, 1.0]))
    assert jax.grad(lambda a: pathwise_actor_loss(lp, q, a))(0.3) == 0.0


def test_polyak_update_matches_a_loop():
    rng = np.random.default_rng(2)
    target = {"params": {"a": rng.normal(size=3), "b": {"c": rng.normal(size=(2, 2))}}, "batch_stats": {"m": np.zeros(2)}}
    online = {"params": {"a": rng.normal(size=3), "b": {"c": rng.normal(size=(2, 2))}}, "batch_stats": {"m": np.ones(2)}}
    out = polyak_update(target, online, 0.005)
    for path in (("a",), ("b", "c")):
        t, o, got = target["params"], online["params"], out["params"]
        for k in path:
            t, o, got = t[k], o[k], got[k]
        for idx in np.ndindex(np.shape(t)):
            assert got[idx] == pytest.approx(0.995 * t[idx] + 0.005 * o[idx], rel=1e-12)
    assert out["batch_stats"] is online["batch_stats"]  # running statistics are copied, not averaged
