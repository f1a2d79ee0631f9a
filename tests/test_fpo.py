"""FPO (McAllister et al. 2025) and FPO++ (Yi, Choi et al.): their surrogates and the assembled
PPO-family minibatch loss against plain-Python loops, under positive and negative advantages.

Oracles: the CFM losses recomputed draw by draw with the same velocity network (FPO's code's noise
supervision, (1 - t)^2 |v - (eps - x)|^2), the log ratio old minus new loss (averaged over the draws
for FPO, per draw and clamped for FPO++), PPO's clipped term or SPO's penalised term chosen by the sign
of the advantage, the value loss and the entropy bonus, summed in a loop.
"""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.algos import ALGORITHM_SECTIONS, ALGORITHMS
from diffrl.algos.ppo import aspo_policy_loss, ppo_policy_loss, ratio_surrogate, spo_policy_loss
from diffrl.core.build import build
from diffrl.config.presets import PRESETS, resolve

jax.config.update("jax_platforms", "cpu")


def _ppo_term(rho, a, eps):
    return min(rho * a, min(max(rho, 1 - eps), 1 + eps) * a)


def _spo_term(rho, a, eps):
    return rho * a - abs(a) / (2 * eps) * (rho - 1) ** 2


def test_aspo_is_ppos_clip_for_positive_and_spos_penalty_for_negative_advantages():
    rng = np.random.default_rng(0)
    lp, old = rng.normal(scale=0.3, size=(7, 3)), rng.normal(scale=0.3, size=(7, 3))
    adv = np.array([1.5, -0.7, 0.0, -2.0, 0.3, 1.1, -0.1])
    eps = 0.05
    loss, frac = aspo_policy_loss(*(jnp.asarray(v, jnp.float32) for v in (lp, old, adv[:, None])), eps)
    terms, outside = [], 0
    for i in range(7):
        for r in range(3):
            rho = math.exp(lp[i, r] - old[i, r])
            terms.append(_ppo_term(rho, adv[i], eps) if adv[i] >= 0 else _spo_term(rho, adv[i], eps))
            outside += abs(rho - 1) > eps
    assert float(loss) == pytest.approx(-np.mean(terms), rel=1e-5)
    assert float(frac) == pytest.approx(outside / 21)
    # where every advantage is positive it is PPO's loss, where every one is negative SPO's
    pos, neg = jnp.abs(jnp.asarray(adv))[:, None], -jnp.abs(jnp.asarray(adv))[:, None]
    lp_j, old_j = jnp.asarray(lp, jnp.float32), jnp.asarray(old, jnp.float32)
    assert float(aspo_policy_loss(lp_j, old_j, pos, eps)[0]) == pytest.approx(float(ppo_policy_loss(lp_j, old_j, pos, eps)[0]))
    assert float(aspo_policy_loss(lp_j, old_j, neg, eps)[0]) == pytest.approx(float(spo_policy_loss(lp_j, old_j, neg, eps)[0]))


def test_negative_advantage_pull_back_under_aspo_and_the_clamp():
    """A draw whose ratio rose past 1 + eps with A < 0: PPO's min keeps rho A, whose gradient in log rho
    is -A rho; ASPO adds the penalty's pull |A| rho (rho - 1) / eps; past the log-ratio clamp no gradient
    flows at all."""
    a, eps = jnp.float32(-1.0), 0.05

    def grad_at(loss_fn, log_ratio, clip=0.0):
        return float(jax.grad(lambda x: ratio_surrogate(loss_fn, x[None, None], jnp.zeros((1, 1)), a[None], None,
                                                        eps, clip)[0])(jnp.float32(log_ratio)))

    ppo, aspo = grad_at(ppo_policy_loss, 0.2), grad_at(aspo_policy_loss, 0.2)
    rho = math.exp(0.2)
    assert ppo == pytest.approx(rho, rel=1e-5)  # d/dx of -(rho A), A = -1
    assert aspo == pytest.approx(rho + rho * (rho - 1) / eps, rel=1e-5)  # plus the penalty's pull
    assert grad_at(aspo_policy_loss, 0.2, clip=0.1) == 0.0 and grad_at(aspo_policy_loss, 0.05, clip=0.1) != 0.0


def _small(algo, **flow):
    config = resolve(algo, "gymnax/Pendulum-v1", None)
    config = config.replace(num_envs=4, num_steps=4, flow=dataclasses.replace(config.flow, hidden=(16, 16), **flow),
                            ppo=dataclasses.replace(config.ppo, value_hidden=(16,)))
    env, algo_obj, _ = build(config)
    return config, env.spec, algo_obj


def _cfm_loop(policy, params, obs, aux):
    """(N, M) per-draw CFM losses, draw by draw, FPO's noise supervision (1 - t)^2 |v - (eps - x)|^2."""
    n, m = aux.t.shape
    out = np.zeros((n, m))
    for b in range(n):
        for i in range(m):
            t, eps, x = float(aux.t[b, i]), np.asarray(aux.eps[b, i]), np.asarray(aux.x[b])
            v = np.asarray(policy.velocity(params, jnp.asarray(t * eps + (1 - t) * x), obs[b], jnp.float32(t)))
            out[b, i] = (1 - t) ** 2 * np.mean((v - (eps - x)) ** 2)
    return out


@pytest.mark.parametrize("algo", ["fpo", "fpo++"])
def test_assembled_minibatch_loss_matches_a_loop_under_both_advantage_signs(algo):
    """The whole minibatch loss of fpo (averaged ratio, PPO's clip) and fpo++ (per-draw ratios clamped,
    ASPO) against a plain loop: standardised advantages of both signs, the surrogate over every ratio, +
    vf_coef x 1/2 mean (V - R)^2 (a flow has no entropy term)."""
    config, spec, ppo = _small(algo)
    c = ppo.c
    assert ppo.policy_loss is {"fpo": ppo_policy_loss, "fpo++": aspo_policy_loss}[algo]
    policy = ppo.policy
    old = ppo.init(jax.random.key(0), spec)
    new_policy = jax.tree_util.tree_map(lambda p: p + 0.05 * jax.random.normal(jax.random.key(5), p.shape),
                                        old.policy_params)
    params = {"policy": new_policy, "value": old.value_params}
    n = 8
    obs = jax.random.normal(jax.random.key(1), (n, spec.obs_size))
    _, aux = policy.sample(old.policy_params, obs, jax.random.key(2))
    old_terms = policy.ratio_log_terms(old.policy_params, obs, aux)
    rng = np.random.default_rng(3)
    adv = jnp.asarray([1.2, -0.4, 0.7, -1.9, 0.1, -0.2, 2.2, -0.8], jnp.float32)
    old_v, ret = jnp.asarray(rng.normal(size=n), jnp.float32), jnp.asarray(rng.normal(size=n), jnp.float32)
    loss, metrics = ppo.minibatch_loss(params, (obs, obs, aux, old_terms, old_v, adv, ret), jax.random.key(4))

    l_old, l_new = _cfm_loop(policy, old.policy_params, obs, aux), _cfm_loop(policy, new_policy, obs, aux)
    a = np.asarray(adv, np.float64)
    a = (a - a.mean()) / (a.std() + 1e-8)
    terms = []
    for b in range(n):
        raw = [l_old[b].mean() - l_new[b].mean()] if algo == "fpo" else list(l_old[b] - l_new[b])
        log_ratios = [min(max(lr, -c.log_ratio_clip), c.log_ratio_clip) for lr in raw]
        for lr in log_ratios:
            rho = math.exp(lr)
            use_spo = algo == "fpo++" and a[b] < 0
            terms.append(_spo_term(rho, a[b], c.clip_eps) if use_spo else _ppo_term(rho, a[b], c.clip_eps))
    assert len(terms) == n * (1 if algo == "fpo" else config.flow.mc_samples)
    values = np.asarray(ppo.value(old.value_params, obs))
    v_loss = 0.5 * np.mean((values - np.asarray(ret)) ** 2)
    expected = -np.mean(terms) + c.vf_coef * v_loss
    assert float(metrics["loss/value"]) == pytest.approx(v_loss, rel=1e-5)
    assert float(metrics["loss/policy"]) == pytest.approx(-np.mean(terms), rel=1e-4, abs=1e-6)
    assert float(loss) == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert float(metrics["loss/policy"]) != 0.0


def test_assembled_ppo_loss_with_its_entropy_bonus_matches_a_loop():
    """PPO's minibatch loss on the Gaussian: -mean min(rho A, clip(rho) A) + vf_coef 1/2 mean (V - R)^2
    - ent_coef H, with the policy's own log-densities and entropy estimate in the loop."""
    config = resolve("ppo", "gymnax/Pendulum-v1", None)
    config = config.replace(num_envs=4, num_steps=4, ppo=dataclasses.replace(config.ppo, ent_coef=0.01, value_hidden=(16,)),
                            gaussian=dataclasses.replace(config.gaussian, hidden=(16,)))
    env, ppo, _ = build(config)
    spec, c = env.spec, ppo.c
    old = ppo.init(jax.random.key(0), spec)
    new_policy = jax.tree_util.tree_map(lambda p: p + 0.1 * jax.random.normal(jax.random.key(5), p.shape),
                                        old.policy_params)
    params = {"policy": new_policy, "value": old.value_params}
    n = 6
    obs = jax.random.normal(jax.random.key(1), (n, spec.obs_size))
    _, aux = ppo.policy.sample(old.policy_params, obs, jax.random.key(2))
    old_lp = ppo.policy.ratio_log_terms(old.policy_params, obs, aux)
    new_lp = np.asarray(ppo.policy.ratio_log_terms(new_policy, obs, aux))
    adv = jnp.asarray([0.5, -1.0, 2.0, -0.3, 0.0, 1.2], jnp.float32)
    old_v, ret = jnp.zeros(n), jnp.linspace(-1, 1, n)
    key = jax.random.key(4)
    loss, metrics = ppo.minibatch_loss(params, (obs, obs, aux, old_lp, old_v, adv, ret), key)
    a = np.asarray(adv, np.float64)
    a = (a - a.mean()) / (a.std() + 1e-8)
    surrogate = np.mean([_ppo_term(math.exp(new_lp[i, 0] - float(old_lp[i, 0])), a[i], c.clip_eps) for i in range(n)])
    v_loss = 0.5 * np.mean((np.asarray(ppo.value(old.value_params, obs)) - np.asarray(ret)) ** 2)
    entropy = float(jnp.mean(ppo.policy.entropy(new_policy, obs, key)))
    assert c.ent_coef == 0.01 and entropy != 0.0
    assert float(loss) == pytest.approx(-surrogate + c.vf_coef * v_loss - c.ent_coef * entropy, rel=1e-4)
    assert float(metrics["policy/entropy"]) == pytest.approx(entropy, rel=1e-6)


def test_fpo_and_fpo_pp_registration_and_presets():
    assert ALGORITHM_SECTIONS["fpo++"] == ("ppo", "flow") and "fpo++" in ALGORITHMS
    for name in (n for n in PRESETS if n.startswith("fpo-")):
        pp = PRESETS["fpo++-" + name[len("fpo-"):]]
        assert pp["algo"] == "fpo++" and pp["flow.ratio"] == "per_sample" and pp["ppo.log_ratio_clip"] == 3.0
        assert {k: v for k, v in pp.items() if k not in ("algo", "flow.ratio", "ppo.log_ratio_clip")} == {
            k: v for k, v in PRESETS[name].items() if k not in ("algo", "ppo.log_ratio_clip")}
    fpo, pp = resolve("fpo", "gymnax/Pendulum-v1", None), resolve("fpo++", "gymnax/Pendulum-v1", None)
    assert pp.preset == "fpo++-gymnax" and fpo.preset == "fpo-gymnax"
    assert (fpo.flow.ratio, fpo.flow.loss_weighting, fpo.flow.time_sampling, fpo.ppo.log_ratio_clip) == (
        "averaged", "eps", "uniform", 20.0)
    assert (fpo.flow.output_multiplier, fpo.flow.output_scale) == (0.25, 1.0)
    assert (pp.flow.ratio, pp.flow.loss_weighting, pp.ppo.log_ratio_clip) == ("per_sample", "eps", 3.0)
    assert PRESETS["fpo-dmc"]["ppo.learning_rate"] == 3e-4 and PRESETS["fpo-dmc"]["ppo.clip_eps"] == 0.05


def test_grid_time_sampling_draws_the_sampler_times():
    _, spec, ppo = _small("fpo", time_sampling="grid")
    k = ppo.policy.config.num_steps
    _, aux = ppo.policy.sample(ppo.init(jax.random.key(0), spec).policy_params, jnp.zeros((64, spec.obs_size)),
                               jax.random.key(1))
    grid = 1.0 - np.arange(k) / k
    t = np.asarray(aux.t).ravel()
    assert np.all(np.min(np.abs(t[:, None] - grid[None]), axis=1) < 1e-6)
    assert len(np.unique(np.round(t, 6))) == k  # 512 draws reach every one of the K times


def test_log_ratio_clip_is_checked():
    from diffrl.algos.ppo_config import PPOConfig

    with pytest.raises(ValueError, match="log-ratio-clip"):
        PPOConfig(log_ratio_clip=-1.0).validate()


def test_a_flow_config_stored_before_the_faithful_defaults_loads_as_trained():
    """Exports and run directories written before output_multiplier and loss_weighting existed load
    with the unscaled output and the unweighted loss they were trained with, not the new defaults."""
    from diffrl.plumbing.records import config_from_json
    from diffrl.policies.flow import FlowPolicyConfig

    old = config_from_json(FlowPolicyConfig, {"hidden": [32, 32], "output_scale": 0.25, "ratio": "per_sample"})
    assert (old.output_multiplier, old.loss_weighting, old.output_scale, old.hidden) == (1.0, "velocity", 0.25, (32, 32))
    new = config_from_json(FlowPolicyConfig, {"output_multiplier": 0.25, "loss_weighting": "eps"})
    assert (new.output_multiplier, new.loss_weighting) == (0.25, "eps")
