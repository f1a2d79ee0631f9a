"""Actor losses assembled end to end against plain-Python loops: REPPO's per-state trust-region loss
on the DIME chain under ``--reppo.trust-region action`` and ``none`` (on-policy DIME), and the value
of ``amdp-off``'s actor step (reciprocal adjoint matching on replayed terminal actions).

Oracles: REPPO's rule (Voelcker et al. 2025, arXiv 2507.11019, Sec. 4) written per state in a loop
from the policy's sample, the critic's Q and the policy's KL estimate; the adjoint-matching regression
(Adjoint Sampling's reciprocal loss, AMDP's off-policy setting) with grad_x Q(s, erf(k x)) by central
finite differences of the critic (no autodiff, no Jacobian formula), the 95 % quantile norm clip,
the bridge draws, the target sigma_t score / alpha and the weight alpha^2 sigma_t^p, summed in a loop.
"""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.core.build import build
from diffrl.policies.reference_sde import sample_bridge
from diffrl.config.presets import resolve

jax.config.update("jax_platforms", "cpu")


def _dime(trust_region):
    config = resolve("dime", "gymnax/Pendulum-v1", None)
    config = config.replace(num_envs=4, num_steps=4, diffusion=dataclasses.replace(
        config.diffusion, hidden=(16,), num_steps=4),
        critic=dataclasses.replace(config.critic, hidden=16),
        reppo=dataclasses.replace(config.reppo, trust_region=trust_region,
                                  kl_bound=0.13))  # between this test's per-state KLs
    env, algo, _ = build(config)
    return env.spec, algo


@pytest.mark.parametrize("trust_region", ["action", "none"])
def test_reppo_actor_loss_on_the_dime_chain_matches_a_loop(trust_region):
    spec, algo = _dime(trust_region)
    c = algo.c
    state = algo.init(jax.random.key(0), spec)
    old = state.actor_params
    new = jax.tree_util.tree_map(lambda p: p + 0.3 * jax.random.normal(jax.random.key(5), p.shape), old)
    n = 6
    obs = jax.random.normal(jax.random.key(1), (n, spec.obs_size))
    _, aux = algo.policy.sample(old, obs, jax.random.key(2))
    mb = {"obs": obs, "critic_obs": obs, "policy_aux": aux}
    log_alpha, log_beta = jnp.float32(math.log(0.2)), jnp.float32(math.log(3.0))
    key = jax.random.key(7)
    loss, metrics = algo.actor_loss((new, log_alpha, log_beta), old, state.critic_params, mb, key)

    key_sample, key_kl = jax.random.split(key)
    sample = algo.policy.rsample(new, obs, key_sample)
    q = np.asarray(algo.q_value(state.critic_params, obs, sample.action))
    kl, _ = algo.policy.trust_region_kl(old, new, obs, key_kl, aux)
    kl, lp, dual = np.asarray(kl), np.asarray(sample.log_prob), np.asarray(sample.dual_log_prob)
    alpha, beta = 0.2, 3.0
    per_state = []
    for i in range(n):
        value = alpha * lp[i] - q[i]
        if c.actor_loss_mode == "clipped":
            per_state.append(value if kl[i] < c.kl_bound else beta * kl[i])
        else:
            per_state.append(value + beta * kl[i])
    expected = np.mean(per_state) - beta * (np.mean(kl) - c.kl_bound)
    if c.learn_alpha:
        expected += alpha * (-np.mean(dual) - algo.target_entropy)
    assert float(loss) == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert float(metrics["actor/kl"]) == pytest.approx(np.mean(kl), rel=1e-5, abs=1e-7)
    if trust_region == "none":  # nothing bounded: every state follows Q, the dual sees KL = 0
        assert np.all(kl == 0.0) and float(metrics["actor/out_of_trust_region"]) == 0.0
    else:  # the perturbation takes some states out of the region, which are only pulled back
        assert np.any(kl >= c.kl_bound) and np.any(kl < c.kl_bound), kl


def test_amdp_off_actor_step_value_matches_a_loop():
    config = resolve("amdp-off", "gymnax/Pendulum-v1", None)
    config = config.replace(num_envs=4, num_steps=2, offpolicy=dataclasses.replace(
        config.offpolicy, critic_hidden=(16,), num_bins=11, kl_multiplier="none"), adjoint=dataclasses.replace(
        config.adjoint, hidden=(16,)))
    env, algo, _ = build(config)
    spec, policy, cfg = env.spec, algo.policy, algo.policy.config
    state = algo.init(jax.random.key(0), spec)
    params = jax.tree_util.tree_map(lambda p: p + 0.1 * jax.random.normal(jax.random.key(3), p.shape),
                                    state.actor_params)
    n, d, k = 12, spec.action_size, policy.ref.erf_scale
    rng = np.random.default_rng(4)
    obs = jnp.asarray(rng.normal(size=(n, spec.obs_size)), jnp.float32)
    pre_squash = jnp.asarray(rng.normal(scale=1.5, size=(n, d)), jnp.float32)
    mb = {"obs": obs, "critic_obs": obs, "action": jax.scipy.special.erf(k * pre_squash), "pre_squash": pre_squash}
    alpha, key = jnp.float32(0.3), jax.random.key(6)
    loss, metrics = algo.actor_step_loss(params, state.actor_params, state.critic_params, mb, alpha, key)

    def q_at(x):  # Q(s, erf(k x)) for one pre-squash vector per state, float64 out
        return np.asarray(algo.q_value(state.critic_params, obs, jax.scipy.special.erf(k * jnp.asarray(x, jnp.float32))),
                          np.float64)

    h, x = 1e-2, np.asarray(pre_squash, np.float64)
    score = np.zeros((n, d))
    for j in range(d):  # central differences of Q along each pre-squash coordinate
        step = np.zeros(d)
        step[j] = h
        score[:, j] = (q_at(x + step) - q_at(x - step)) / (2 * h)
    norms = np.linalg.norm(score, axis=1)
    limit = min(np.quantile(norms, cfg.grad_clip_quantile), cfg.grad_clip_max)
    clipped = np.stack([score[b] * min(1.0, limit / norms[b]) for b in range(n)])
    grid = cfg.num_steps if cfg.bridge_time == "grid" else None
    t, x_t = sample_bridge(key, policy.ref, pre_squash, grid)  # the draws the actor step makes
    u = np.asarray(policy.control(params, x_t, obs, t), np.float64)
    sigma = np.asarray(policy.ref.sigma(t), np.float64)
    total = 0.0
    for b in range(n):
        target = sigma[b] * clipped[b] / 0.3
        weight = 0.3**2 * sigma[b] ** cfg.loss_sigma_power
        total += 0.5 * weight * np.sum((u[b] - target) ** 2)
    assert float(loss) == pytest.approx(total / n, rel=2e-3)
    assert float(metrics["actor/am/score_clip_limit"]) == pytest.approx(limit, rel=2e-3)
