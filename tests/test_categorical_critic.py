"""CategoricalCritic shapes, initial value, masked loss and a short fit."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from diffrl.critics import (
    PRIOR_LOGIT_SCALE,
    CategoricalCritic,
    CriticConfig,
    critic_loss,
    expectation,
    hl_gauss_encode,
)

OBS, ACT, N = 5, 2, 16
TINY = CriticConfig(hidden=16, num_bins=21, vmin=-5.0, vmax=5.0)
# Everything below is jitted and shared through module fixtures: each compile or eager
# flax/random dispatch costs seconds on the shared 2-core CPU test machine.


def _batch(seed, n=N, hidden=TINY.hidden):
    rng = np.random.default_rng(seed)
    return dict(
        obs=jnp.asarray(rng.normal(size=(n, OBS)), jnp.float32),
        action=jnp.asarray(rng.uniform(-1, 1, size=(n, ACT)), jnp.float32),
        target_returns=jnp.asarray(rng.uniform(-3, 3, size=n), jnp.float32),
        next_features=jnp.asarray(rng.normal(size=(n, hidden)), jnp.float32),
        reward=jnp.asarray(rng.normal(size=n), jnp.float32),
        terminated=jnp.arange(n) % 5 == 0,
        mask=jnp.ones(n),
    )


def _init(config, key=jax.random.key(0)):
    critic = CategoricalCritic(config)
    return critic, jax.jit(critic.init)(key, jnp.zeros((1, OBS)), jnp.zeros((1, ACT)))


def _loss_fn(critic, config):
    return jax.jit(lambda params, batch: critic_loss(critic, params, **batch, config=config))


@pytest.fixture(scope="module")
def tiny():
    critic, params = _init(TINY)
    return critic, params, _loss_fn(critic, TINY)


def test_shapes_with_leading_axes():
    # the rms-normed 2/2-layer TINY critic is exercised by the loss tests below
    config = dataclasses.replace(TINY, norm="layer", encoder_layers=3, head_layers=1)
    critic, params = _init(config)
    obs, act = jnp.ones((3, 4, OBS)), jnp.ones((3, 4, ACT))
    @jax.jit
    def everything(params, obs, act):
        apply = lambda method: critic.apply(params, obs, act, method=method)  # noqa: E731
        return (critic.apply(params, obs, act), apply(CategoricalCritic.q_value), apply(CategoricalCritic.logits),
                apply(CategoricalCritic.features), apply(CategoricalCritic.aux_prediction))

    out, q, logits, features, (reward_pred, _) = everything(params, obs, act)
    assert out.logits.shape == (3, 4, 21)
    assert out.q_value.shape == (3, 4)
    assert out.features.shape == (3, 4, 16)
    assert out.reward_pred.shape == (3, 4)
    assert out.next_features_pred.shape == (3, 4, 16)
    np.testing.assert_allclose(q, out.q_value, rtol=1e-6)
    np.testing.assert_allclose(logits, out.logits, rtol=1e-6)
    np.testing.assert_allclose(features, out.features, rtol=1e-6)
    np.testing.assert_allclose(reward_pred, out.reward_pred, rtol=1e-6)


@pytest.mark.parametrize("case", ["tiny-interior", "default-support"])
def test_initial_q_is_the_init_value(case, tiny):
    """The 40 z prior puts ~all mass on the bins around init_value: the peak logit exceeds
    its neighbours' by 40 (p_peak - p_next) ~ 10, so random head outputs (std ~1, checked
    at 64 inputs) move Q by less than 0.05 bins from the prior's own mean. That mean is
    the init value inside the support and is pulled inward by < 0.4 bins at an end
    (default: 0 = vmin; see the hl_gauss tests)."""
    if case == "tiny-interior":  # init 0 in [-5, 5]
        critic, params, _ = tiny
    else:  # init 0 = vmin of the default [0, 150] support
        critic, params = _init(CriticConfig(hidden=32), jax.random.key(3))
    config, expected = critic.config, 0.0
    q = jax.jit(lambda p, o, a: critic.apply(p, o, a, method=CategoricalCritic.q_value))(
        params,
        jnp.asarray(np.random.default_rng(2).normal(size=(64, OBS)), jnp.float32),
        jnp.asarray(np.random.default_rng(4).uniform(-1, 1, size=(64, ACT)), jnp.float32),
    )
    width = (config.vmax - config.vmin) / (config.num_bins - 1)
    prior_logits = PRIOR_LOGIT_SCALE * params["params"]["value_prior"]
    prior_mean = expectation(prior_logits, config.vmin, config.vmax, from_logits=True)
    assert float(jnp.max(jnp.abs(q - prior_mean))) < 0.05 * width
    end_bias = 0.4 * width if expected in (config.vmin, config.vmax) else 1e-3 * width
    assert abs(float(prior_mean) - expected) < end_bias


def test_init_value_is_clipped_into_the_support():
    config = dataclasses.replace(TINY, init_value=-40.0)
    _, params = _init(config)
    want = hl_gauss_encode(jnp.asarray(config.vmin), config.vmin, config.vmax, config.num_bins)
    np.testing.assert_allclose(params["params"]["value_prior"], want, atol=1e-7)


def test_loss_decreases_when_fitting_fixed_targets(tiny):
    critic, params, _ = tiny
    batch = _batch(5)
    opt = optax.adam(1e-2)
    state = opt.init(params)

    @jax.jit
    def step(params, state):
        (loss, metrics), grads = jax.value_and_grad(
            lambda p: critic_loss(critic, p, **batch, config=TINY), has_aux=True
        )(params)
        updates, state = opt.update(grads, state)
        return optax.apply_updates(params, updates), state, metrics

    _, _, first = step(params, state)
    for _ in range(80):
        params, state, metrics = step(params, state)
    # measured at this seed: loss 17.5 -> 1.4 (the CE floor is the target entropy ~1.2),
    # q_mse 2.2 -> 0.06, aux 1.0 -> 0.05; thresholds leave a 2-10x margin.
    assert float(metrics["critic_loss"]) < 0.2 * float(first["critic_loss"])
    assert float(metrics["aux_loss"]) < 0.5 * float(first["aux_loss"])
    assert float(metrics["q_mse"]) < 0.25 * float(first["q_mse"])
    assert set(metrics) == {"critic_loss", "ce_loss", "aux_loss", "q_mse", "q_mean"}


def test_mask_excludes_samples(tiny):
    critic, params, loss_fn = tiny
    batch = _batch(6)
    mask = jnp.arange(N) % 3 != 0
    batch["mask"] = mask

    def loss_of(obs, target_returns, reward):
        b = dict(batch, obs=obs, target_returns=target_returns, reward=reward)
        return critic_loss(critic, params, **b, config=TINY)[0]

    g_obs, g_target, g_reward = jax.jit(jax.grad(loss_of, argnums=(0, 1, 2)))(
        batch["obs"], batch["target_returns"], batch["reward"]
    )
    assert bool(jnp.all(g_obs[~mask] == 0.0)) and bool(jnp.all(g_reward[~mask] == 0.0))
    assert float(jnp.abs(g_obs[mask]).max(axis=-1).min()) > 0.0
    assert bool(jnp.all(g_target == 0.0))  # targets are constants of the loss
    # garbage (even NaN) in an excluded sample leaves the loss unchanged...
    poisoned = dict(batch, target_returns=batch["target_returns"].at[0].set(jnp.nan),
                    obs=batch["obs"].at[3].set(1e3))
    np.testing.assert_allclose(loss_fn(params, poisoned)[0], loss_fn(params, batch)[0], rtol=1e-6)
    # ...and the loss is the mean over the kept samples only (N = 16, 5 masked).
    loss_all = loss_fn(params, dict(batch, mask=jnp.ones(N)))
    per_sample = jnp.stack([
        loss_fn(params, dict(batch, mask=jnp.arange(N) == i))[0] for i in range(N)
    ])
    np.testing.assert_allclose(loss_fn(params, batch)[0], per_sample[mask].mean(), rtol=1e-5)
    np.testing.assert_allclose(loss_all[0], per_sample.mean(), rtol=1e-5)


def test_aux_loss_oracle_and_weight(tiny):
    """aux = (1 - term) * mean over 1 + hidden outputs of squared errors; the total is
    ce + aux_loss_weight * aux."""
    critic, params, loss_fn = tiny
    batch = _batch(7)
    out = jax.jit(critic.apply)(params, batch["obs"], batch["action"])
    sq = jnp.concatenate(
        [(out.reward_pred - batch["reward"])[:, None] ** 2, (out.next_features_pred - batch["next_features"]) ** 2],
        axis=-1,
    )
    want = jnp.mean(jnp.where(batch["terminated"], 0.0, sq.mean(-1)))
    loss, metrics = loss_fn(params, batch)
    np.testing.assert_allclose(metrics["aux_loss"], want, rtol=1e-5)
    np.testing.assert_allclose(loss, metrics["ce_loss"] + metrics["aux_loss"], rtol=1e-6)
    heavy = dataclasses.replace(TINY, aux_loss_weight=2.5)
    loss, metrics = _loss_fn(critic, heavy)(params, batch)
    np.testing.assert_allclose(loss, metrics["ce_loss"] + 2.5 * metrics["aux_loss"], rtol=1e-6)


def test_mismatched_config_raises(tiny):
    critic, params, _ = tiny
    with pytest.raises(ValueError):
        critic_loss(critic, params, **_batch(0), config=dataclasses.replace(TINY, vmax=9.0))
