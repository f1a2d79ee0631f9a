"""Per-state trust-region actor loss gradients and the dual variables' update directions."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.maths.trust_region import (
    actor_loss_per_state,
    default_target_entropy,
    kl_multiplier_loss,
    temperature_loss,
)

KL_BOUND, BETA = 0.1, 3.0
# Per-state parameters: value_loss_i = v_i^2 (d/dv_i = 2 v_i), kl_i = k_i^2 (d/dk_i = 2 k_i).
V = jnp.array([1.0, -2.0, 0.5, 3.0])
K = jnp.array([0.1, 0.5, 0.2, 0.3])  # kl = [0.01, 0.25, 0.04, 0.09]: in, out, in, in
INSIDE = jnp.array([True, False, True, True])


def _grads(mode, beta=BETA):
    def total(v, k, beta):
        return jnp.sum(actor_loss_per_state(v**2, k**2, KL_BOUND, beta, mode))

    return jax.jit(jax.grad(total, argnums=(0, 1, 2)))(V, K, jnp.asarray(beta))


def test_clipped_mode_selects_one_gradient_per_state():
    g_v, g_k, g_beta = _grads("clipped")
    # inside the trust region: the full value gradient and no KL gradient
    np.testing.assert_allclose(g_v[INSIDE], 2 * V[INSIDE])
    np.testing.assert_array_equal(g_k[INSIDE], 0.0)
    # outside: no value gradient, only the beta-weighted KL gradient pulling back
    np.testing.assert_array_equal(g_v[~INSIDE], 0.0)
    np.testing.assert_allclose(g_k[~INSIDE], BETA * 2 * K[~INSIDE])
    assert float(g_beta) == 0.0  # beta is a constant of the actor loss


def test_clipped_mode_values():
    loss = actor_loss_per_state(V**2, K**2, KL_BOUND, BETA, "clipped")
    np.testing.assert_allclose(loss, jnp.where(INSIDE, V**2, BETA * K**2))


def test_boundary_is_outside():
    """kl == bound counts as violating (strict '<' as in the reference)."""
    loss = actor_loss_per_state(jnp.array([5.0]), jnp.array([KL_BOUND]), KL_BOUND, 2.0, "clipped")
    np.testing.assert_allclose(loss, [2.0 * KL_BOUND])


def test_full_and_value_modes():
    g_v, g_k, g_beta = _grads("full")
    np.testing.assert_allclose(g_v, 2 * V)
    np.testing.assert_allclose(g_k, BETA * 2 * K)
    assert float(g_beta) == 0.0
    g_v, g_k, _ = _grads("value")
    np.testing.assert_allclose(g_v, 2 * V)
    np.testing.assert_array_equal(g_k, 0.0)
    np.testing.assert_allclose(
        actor_loss_per_state(V**2, K**2, KL_BOUND, BETA, "full"), V**2 + BETA * K**2, rtol=1e-6
    )


def test_unknown_mode_raises():
    with pytest.raises(ValueError):
        actor_loss_per_state(V, K, KL_BOUND, BETA, "clip")


def _sgd_step(loss_fn, log_param, lr=0.1):
    return log_param - lr * jax.grad(loss_fn)(log_param)


@pytest.mark.parametrize("entropy,should_grow", [(-3.0, True), (1.0, False)])
def test_temperature_moves_toward_target_entropy(entropy, should_grow):
    """Target H* = -0.5 * 4 = -2: entropy below it -> alpha grows, above it -> shrinks."""
    target = default_target_entropy(action_size=4)
    assert target == -2.0
    entropies = entropy + jnp.array([-0.3, 0.0, 0.3])  # mean = entropy
    log_alpha = jnp.log(0.01)
    new = _sgd_step(lambda la: temperature_loss(la, entropies, target), log_alpha)
    assert (float(new) > float(log_alpha)) == should_grow
    # exact step: d/dlog_alpha = alpha * (mean H - H*)
    np.testing.assert_allclose(new, log_alpha - 0.1 * 0.01 * (entropy - target), rtol=1e-5)
    # the entropy estimates receive no gradient from the dual loss
    g_h = jax.grad(lambda h: temperature_loss(log_alpha, h, target))(entropies)
    np.testing.assert_array_equal(g_h, 0.0)


@pytest.mark.parametrize("mean_kl,should_grow", [(0.3, True), (0.02, False)])
def test_kl_multiplier_moves_with_violation(mean_kl, should_grow):
    kls = mean_kl * jnp.array([0.5, 1.0, 1.5])  # mean = mean_kl
    log_beta = jnp.log(0.01)
    new = _sgd_step(lambda lb: kl_multiplier_loss(lb, kls, KL_BOUND), log_beta)
    assert (float(new) > float(log_beta)) == should_grow
    np.testing.assert_allclose(new, log_beta + 0.1 * 0.01 * (mean_kl - KL_BOUND), rtol=1e-5)
    g_kl = jax.grad(lambda k: kl_multiplier_loss(log_beta, k, KL_BOUND))(kls)
    np.testing.assert_array_equal(g_kl, 0.0)
