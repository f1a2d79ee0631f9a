"""The flow-matching policy of FPO (diffrl.policies.flow) against plain loops, and FPO's wiring.

Oracles: the Euler flow (F3) and the CFM losses (F4) recomputed step by step in Python with the
same network; the ratio terms at equal parameters (every ratio exactly 1); a flow fitted by its
CFM loss to a known Gaussian target reproduces that target's mean and spread.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from diffrl.algos import ALGORITHM_SECTIONS, ALGORITHMS
from diffrl.policies import RatioPolicy
from diffrl.policies.flow import FlowAux, FlowPolicy, FlowPolicyConfig
from diffrl.config.presets import PRESETS, resolve

jax.config.update("jax_platforms", "cpu")

OBS, ACT = 3, 2
SMALL = {"hidden": (16, 16), "num_steps": 5, "mc_samples": 4, "output_scale": 1.0}


def make(**overrides):
    policy = FlowPolicy(FlowPolicyConfig(**{**SMALL, **overrides}), ACT)
    return policy, policy.init(jax.random.key(0), OBS)


def test_flow_and_cfm_losses_match_plain_loops():
    policy, params = make()
    assert isinstance(policy, RatioPolicy)
    obs = jax.random.normal(jax.random.key(1), (6, OBS))
    action, aux = policy.sample(params, obs, jax.random.key(2))
    assert action.shape == (6, ACT) and aux.eps.shape == (6, 4, ACT) and aux.t.shape == (6, 4)
    # (F3): K Euler steps from t = 1, recomputed one by one
    x1 = jax.random.normal(jax.random.key(3), (6, ACT))
    x = np.asarray(x1)
    for k in range(5):
        x = x - np.asarray(policy.velocity(params, jnp.asarray(x), obs, jnp.float32(1 - k / 5))) / 5
    np.testing.assert_allclose(np.asarray(policy.integrate(params, obs, x1)), x, rtol=1e-5, atol=1e-6)
    assert bool(jnp.all(action == jnp.clip(aux.x, -1, 1)))
    # (F4): per sample and draw, (1 - t)^2 (FPO's default weighting) times the mean over d of
    # (v(x_t, s, t) - (eps - x))^2; unweighted with loss_weighting="velocity"
    losses = np.asarray(policy.cfm_losses(params, obs, aux))
    unweighted = np.asarray(make(loss_weighting="velocity")[0].cfm_losses(params, obs, aux))
    for b in range(6):
        for i in range(4):
            t, eps, xb = float(aux.t[b, i]), np.asarray(aux.eps[b, i]), np.asarray(aux.x[b])
            v = np.asarray(policy.velocity(params, jnp.asarray(t * eps + (1 - t) * xb), obs[b], jnp.float32(t)))
            plain = np.mean((v - (eps - xb)) ** 2)
            assert unweighted[b, i] == pytest.approx(plain, rel=1e-4)
            # FPO's code: the noise the velocity implies, eps^ = x_t + (1 - t) v, against eps
            assert losses[b, i] == pytest.approx(np.mean((eps - (t * eps + (1 - t) * xb + (1 - t) * v)) ** 2),
                                                 rel=1e-4, abs=1e-7)
    # ratio terms: their mean (FPO, the default), or one per draw (FPO++); exp(new - old) = 1 at equal params
    terms = np.asarray(policy.ratio_log_terms(params, obs, aux))
    assert terms.shape == (6, 1)
    np.testing.assert_allclose(terms[:, 0], -losses.mean(axis=1), rtol=1e-5)
    per_sample, _ = make(ratio="per_sample")
    np.testing.assert_allclose(np.asarray(per_sample.ratio_log_terms(params, obs, aux)), -losses, rtol=1e-6)


def test_eval_samplers_zero_noise_and_sample():
    policy, params = make()
    obs = jax.random.normal(jax.random.key(1), (5, OBS))
    zero = policy.eval_action(params, obs, jax.random.key(4), "zero-noise")
    np.testing.assert_allclose(np.asarray(zero), np.asarray(jnp.clip(policy.integrate(params, obs, jnp.zeros((5, ACT))), -1, 1)))
    assert policy.eval_noise_shape("zero-noise") is None and policy.eval_noise_shape("sample") == (ACT,)
    noise = policy.draw_eval_noise(jax.random.key(4), (5,), "sample")
    np.testing.assert_allclose(np.asarray(policy.eval_action(params, obs, jax.random.key(4), "sample")),
                               np.asarray(policy.eval_action_from_noise(params, obs, noise, "sample")))
    with pytest.raises(ValueError, match="no sampler 'mean'"):
        policy.eval_action(params, obs, jax.random.key(4), "mean")


def test_cfm_fit_reproduces_a_gaussian_target():
    """Regressing the velocity onto (F2) for samples of N(0.4, 0.2^2) (one state) makes the flow's
    samples match it: mean within 0.05, std within 25 % after 1,500 Adam steps."""
    policy = FlowPolicy(FlowPolicyConfig(hidden=(64, 64), num_steps=20, mc_samples=1, output_scale=1.0), 1)
    params = policy.init(jax.random.key(0), 1)
    opt = optax.adam(3e-3)
    obs = jnp.zeros((256, 1))

    @jax.jit
    def step(carry, key):
        params, state = carry
        k1, k2, k3 = jax.random.split(key, 3)
        x = 0.4 + 0.2 * jax.random.normal(k1, (256, 1))
        aux = FlowAux(x, jax.random.normal(k2, (256, 1, 1)), jax.random.uniform(k3, (256, 1)))
        grads = jax.grad(lambda p: jnp.mean(policy.cfm_losses(p, obs, aux)))(params)
        updates, state = opt.update(grads, state)
        return (optax.apply_updates(params, updates), state), None

    (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), jax.random.split(jax.random.key(1), 1500))
    x = np.asarray(policy.integrate(params, jnp.zeros((4096, 1)), jax.random.normal(jax.random.key(2), (4096, 1))))
    assert abs(x.mean() - 0.4) < 0.05 and abs(x.std() - 0.2) < 0.05, (x.mean(), x.std())


def test_fpo_registration_presets_and_checks():
    assert "fpo" in ALGORITHMS and ALGORITHM_SECTIONS["fpo"] == ("ppo", "flow")
    for name in (n for n in PRESETS if n.startswith("ppo-")):
        fpo = PRESETS["fpo-" + name[len("ppo-"):]]
        assert fpo["algo"] == "fpo" and fpo["ppo.ent_coef"] == 0.0 and not any(k.startswith("gaussian.") for k in fpo)
    assert resolve("fpo", "gymnax/Pendulum-v1", None).preset == "fpo-gymnax"
    with pytest.raises(ValueError, match="flow.ratio"):
        FlowPolicyConfig(ratio="mean")
    with pytest.raises(ValueError, match="flow.loss_weighting"):
        FlowPolicyConfig(loss_weighting="x0")
    with pytest.raises(ValueError, match="flow.time_sampling"):
        FlowPolicyConfig(time_sampling="beta")
    with pytest.raises(ValueError, match="output_multiplier"):
        FlowPolicyConfig(output_multiplier=0.0)
    from diffrl.algos.ppo import make_fpo
    from diffrl.envs import registry
    config = resolve("fpo", "gymnax/Pendulum-v1", None)
    spec = registry.make(config.env).spec
    with pytest.raises(ValueError, match="has no entropy"):
        make_fpo(config.replace(ppo=config.ppo.__class__(**{**config.ppo.__dict__, "ent_coef": 0.01})), spec)
    assert math.isclose(config.ppo.clip_eps, 0.05)
