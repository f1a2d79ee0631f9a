"""Oracles for the Gaussian policy: densities, KL estimator, reparameterisation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.policies import LogProbPolicy, PathwisePolicy
from diffrl.policies.gaussian import GaussianPolicy, GaussianPolicyConfig, gaussian_kl, normal_log_prob


def make(squash="tanh", d=2, **kw):
    return GaussianPolicy(GaussianPolicyConfig(hidden=(16,), squash=squash, **kw), d)


def test_capabilities():
    pol = make()
    assert isinstance(pol, LogProbPolicy) and isinstance(pol, PathwisePolicy)


def test_sample_shapes_and_bounds():
    pol = make()
    params = pol.init(jax.random.PRNGKey(0), 3)
    obs = jax.random.normal(jax.random.PRNGKey(1), (5, 7, 3))
    a, aux = pol.sample(params, obs, jax.random.PRNGKey(2))
    assert a.shape == (5, 7, 2) and aux.log_prob.shape == (5, 7)
    assert jnp.all(jnp.abs(a) <= 1.0)


def test_tanh_log_prob_integrates_to_one():
    """1-D density of a = tanh(u) integrated numerically over (-1, 1) equals 1,
    and matches the change-of-variables formula at a point."""
    pol = make(d=1, init_log_std=0.3)
    params = pol.init(jax.random.PRNGKey(0), 2)
    obs = jnp.ones((2,))
    mean, std = pol.dist(params, obs)
    a = jnp.linspace(-0.99999, 0.99999, 100001)
    u = jnp.arctanh(a)[:, None]
    from diffrl.policies.gaussian import GaussianAux
    lp = pol.log_prob(params, jnp.broadcast_to(obs, (a.shape[0], 2)), GaussianAux(u, jnp.zeros(a.shape)))
    mass = float(jnp.trapezoid(jnp.exp(lp), a))
    assert abs(mass - 1.0) < 2e-3


def test_sampled_kl_matches_closed_form():
    """REPPO's K-sample forward KL estimator is unbiased for KL(old || new) of the
    pre-squash Gaussians (tanh Jacobians cancel). Average many states' estimates."""
    pol = make(d=3, kl_samples=32)
    obs = jax.random.normal(jax.random.PRNGKey(0), (2048, 4))
    old = pol.init(jax.random.PRNGKey(1), 4)
    new = jax.tree_util.tree_map(lambda p: p + 0.05 * jax.random.normal(jax.random.PRNGKey(2), p.shape), old)
    kl, metrics = pol.trust_region_kl(old, new, obs, jax.random.PRNGKey(3))
    m1, s1 = pol.dist(old, obs)
    m2, s2 = pol.dist(new, obs)
    closed = gaussian_kl(m1, s1, m2, s2)
    assert kl.shape == (2048,)
    # Standard error of the mean of 4096*64 log-ratio samples is far below 5% here.
    np.testing.assert_allclose(float(jnp.mean(kl)), float(jnp.mean(closed)), rtol=0.05)
    assert float(jnp.mean(closed)) > 1e-4
    assert abs(float(metrics["kl/closed_form"]) - float(jnp.mean(closed))) < 1e-6


def test_kl_zero_for_identical_policies_and_grad_only_through_new():
    pol = make()
    params = pol.init(jax.random.PRNGKey(0), 3)
    obs = jnp.ones((8, 3))
    kl, _ = pol.trust_region_kl(params, params, obs, jax.random.PRNGKey(1))
    np.testing.assert_allclose(kl, 0.0, atol=1e-5)
    g_old = jax.grad(lambda p: jnp.mean(pol.trust_region_kl(p, params, obs, jax.random.PRNGKey(1))[0]))(params)
    assert all(float(jnp.max(jnp.abs(x))) == 0.0 for x in jax.tree_util.tree_leaves(g_old))


def test_kl_reusing_the_rsample_pass_equals_the_kl_with_its_own_pass():
    """REPPO's actor loss hands the rsample's (mean, std) back as ``current``: the KL, and the
    gradient of value term + KL through the one shared network pass, equal those of the KL that
    runs the network itself (oracle: the two-pass computation)."""
    pol = make(d=3, kl_samples=8)
    obs = jax.random.normal(jax.random.PRNGKey(0), (32, 4))
    old = pol.init(jax.random.PRNGKey(1), 4)
    new = jax.tree_util.tree_map(lambda p: p + 0.05 * jax.random.normal(jax.random.PRNGKey(2), p.shape), old)

    def loss(p, share):
        sample = pol.rsample(p, obs, jax.random.PRNGKey(3))
        kl, _ = pol.trust_region_kl(old, p, obs, jax.random.PRNGKey(4),
                                    current=sample.kl_context if share else None)
        return jnp.mean(sample.log_prob + 2.0 * kl), kl

    (l_two, kl_two), g_two = jax.value_and_grad(loss, has_aux=True)(new, False)
    (l_one, kl_one), g_one = jax.value_and_grad(loss, has_aux=True)(new, True)
    np.testing.assert_allclose(kl_one, kl_two, rtol=1e-6, atol=1e-7)
    assert float(jnp.mean(kl_two)) > 1e-4
    np.testing.assert_allclose(l_one, l_two, rtol=1e-6)
    for a, b in zip(jax.tree_util.tree_leaves(g_one), jax.tree_util.tree_leaves(g_two)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_normal_log_prob_against_scipy_formula():
    u, m, s = jnp.array([[0.3, -1.0]]), jnp.array([[0.1, 0.5]]), jnp.array([[0.7, 2.0]])
    expected = sum(-0.5 * ((ui - mi) / si) ** 2 - np.log(si) - 0.5 * np.log(2 * np.pi)
                   for ui, mi, si in zip([0.3, -1.0], [0.1, 0.5], [0.7, 2.0]))
    np.testing.assert_allclose(float(normal_log_prob(u, m, s)[0]), expected, rtol=1e-6)


def test_rsample_is_differentiable_and_consistent():
    pol = make()
    params = pol.init(jax.random.PRNGKey(0), 3)
    obs = jnp.ones((6, 3))
    out = pol.rsample(params, obs, jax.random.PRNGKey(4))
    g = jax.grad(lambda p: jnp.sum(pol.rsample(p, obs, jax.random.PRNGKey(4)).action))(params)
    assert all(np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(g))
    assert out.log_prob.shape == (6,)
    np.testing.assert_array_equal(out.log_prob, out.dual_log_prob)


@pytest.mark.parametrize("squash", ["tanh", "clip"])
def test_log_prob_of_stored_sample_matches_aux(squash):
    pol = make(squash=squash)
    params = pol.init(jax.random.PRNGKey(0), 3)
    obs = jax.random.normal(jax.random.PRNGKey(1), (10, 3))
    _, aux = pol.sample(params, obs, jax.random.PRNGKey(2))
    np.testing.assert_allclose(pol.log_prob(params, obs, aux), aux.log_prob, rtol=1e-5, atol=1e-5)
