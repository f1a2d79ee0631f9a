"""CrossQ's critic pieces against plain computations: batch renormalisation (Ioffe 2017), the
joint pass, and C51's categorical projection (Bellemare et al. 2017, Algorithm 1)."""
import jax
import jax.numpy as jnp
import numpy as np

from diffrl.critics.crossq import BatchRenorm, CrossQCritic, atoms, categorical_projection, joint_forward


def _brn_numpy(x, mean, var, scale, bias, eps, r_max, d_max, warm):
    mu_b, var_b = x.mean(0), x.var(0)
    s_b, s = np.sqrt(var_b + eps), np.sqrt(var + eps)
    r = np.clip(s_b / s, 1 / r_max, r_max) if warm else 1.0
    d = np.clip((mu_b - mean) / s, -d_max, d_max) if warm else 0.0
    return ((x - mu_b) / s_b * r + d) * scale + bias, mu_b, var_b


def test_batch_renorm_matches_the_formula_in_warmup_after_it_and_in_evaluation():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, (64, 5)).astype(np.float32)
    for warmup, warm in ((10, False), (0, True)):
        layer = BatchRenorm(use_running_average=False, momentum=0.9, warmup=warmup)
        variables = layer.init(jax.random.key(0), x)
        stats = {"mean": np.full(5, 0.5, np.float32), "var": np.full(5, 2.0, np.float32), "steps": np.int32(0)}
        params = {"scale": np.linspace(0.5, 1.5, 5).astype(np.float32), "bias": np.linspace(-1, 1, 5).astype(np.float32)}
        variables = {"params": params, "batch_stats": stats}
        y, updated = layer.apply(variables, x, mutable=["batch_stats"])
        expected, mu_b, var_b = _brn_numpy(x, stats["mean"], stats["var"], params["scale"], params["bias"],
                                           1e-3, 3.0, 5.0, warm)
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
        new = updated["batch_stats"]
        np.testing.assert_allclose(new["mean"], 0.9 * stats["mean"] + 0.1 * mu_b, rtol=1e-6)
        np.testing.assert_allclose(new["var"], 0.9 * stats["var"] + 0.1 * var_b, rtol=1e-6)
        assert int(new["steps"]) == 1
    # evaluation: the running statistics only, nothing updated
    layer = BatchRenorm(use_running_average=True)
    y = layer.apply(variables, x)
    np.testing.assert_allclose(y, (x - 0.5) / np.sqrt(2.0 + 1e-3) * params["scale"] + params["bias"], rtol=1e-5)


def test_joint_pass_normalises_both_batches_with_their_union():
    # in warmup (plain batch norm): with r, d active the running statistics (0, 1) would undo the
    # batch normalisation exactly while r, d stay inside their clips
    critic = CrossQCritic(hidden=(8,), num_critics=2, num_bins=0, warmup=1000)
    obs, act = jnp.ones((4, 3)), jnp.zeros((4, 2))
    variables = critic.init(jax.random.key(1), obs, act)
    rng = np.random.default_rng(1)
    o, a, o2, a2 = (jnp.asarray(rng.normal(size=s), jnp.float32) for s in ((6, 3), (6, 2), (6, 3), (6, 2)))
    q, q_next, stats = joint_forward(critic, variables, o, a, o2, a2)
    assert q.shape == (2, 6) and q_next.shape == (2, 6)
    both, _ = critic.apply(variables, jnp.concatenate([o, o2]), jnp.concatenate([a, a2]), True, mutable=["batch_stats"])
    np.testing.assert_allclose(q, both[:, :6], rtol=1e-6)
    alone, _ = critic.apply(variables, o, a, True, mutable=["batch_stats"])
    assert not np.allclose(q, alone)  # the next batch changed the statistics
    # the members differ (independent initialisation) and evaluation mode is deterministic
    assert not np.allclose(q[0], q[1])
    np.testing.assert_allclose(critic.apply({**variables, "batch_stats": stats}, o, a, False),
                               critic.apply({**variables, "batch_stats": stats}, o, a, False))


def _project_loop(probs, reward, discount, shift, support):
    """C51's Algorithm 1, one sample at a time."""
    k = len(support)
    vmin, vmax = support[0], support[-1]
    dz = (vmax - vmin) / (k - 1)
    out = np.zeros((len(reward), k))
    for n in range(len(reward)):
        for j in range(k):
            tz = min(max(reward[n] + discount[n] * (support[j] - shift[n]), vmin), vmax)
            b = (tz - vmin) / dz
            lo, hi = int(np.floor(b)), int(np.ceil(b))
            if lo == hi:
                out[n, lo] += probs[n, j]
            else:
                out[n, lo] += probs[n, j] * (hi - b)
                out[n, hi] += probs[n, j] * (b - lo)
    return out


def test_categorical_projection_matches_the_c51_loop():
    rng = np.random.default_rng(2)
    support = np.asarray(atoms(-10.0, 10.0, 21))
    probs = rng.dirichlet(np.ones(21), size=6)
    reward = np.array([0.3, -20.0, 25.0, 1.0, 0.0, 2.5])  # two push everything off the support
    discount = np.array([0.99, 0.99, 0.99, 0.0, 1.0, 0.5])  # a terminal and an exact-atom case
    shift = np.array([0.2, 0.0, -1.0, 3.0, 0.0, 1.0])
    got = categorical_projection(jnp.asarray(probs, jnp.float32), jnp.asarray(reward, jnp.float32),
                                 jnp.asarray(discount, jnp.float32), jnp.asarray(shift, jnp.float32),
                                 jnp.asarray(support))
    np.testing.assert_allclose(got, _project_loop(probs, reward, discount, shift, support), atol=1e-5)
    np.testing.assert_allclose(np.sum(got, -1), 1.0, atol=1e-5)
    assert np.isclose(got[1, 0], 1.0, atol=1e-5) and np.isclose(got[2, -1], 1.0, atol=1e-5)
