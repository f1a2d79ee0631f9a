"""Tests of DiffusionPolicy (diffrl.policies.diffusion): the PathwisePolicy contract on a
small network (N = 4 steps, one hidden layer of 16), exact replay, the init-time prior behaviour
and the trust-region KL. The chain math itself is oracle-tested in test_dis_chain.py,
test_dis_samplers.py and test_dis_action_kl.py.
"""
import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.policies import PathwisePolicy, dis_chain, dis_samplers, require
from diffrl.policies.diffusion import DiffusionAux, DiffusionPolicy, DiffusionPolicyConfig, DiffusionTrustRegion

jax.config.update("jax_platforms", "cpu")

OBS, ACT, STEPS = 5, 3, 4


SMALL_NET = {"num_steps": STEPS, "hidden": (16,), "num_frequencies": 4, "time_dim": 4}
STRUCTURE = ("learn_dt", "per_step_dt", "learn_friction")  # the fields that change the params pytree
TRUST_REGION = {"trust_region": "region", "kl_estimator": "kl_estimator", "kl_samples": "kl_samples",
                "kl_paths": "kl_paths"}
"""make()'s keywords that are the algorithm's trust region (--reppo.*) -> DiffusionTrustRegion's fields."""


@functools.cache
def _make(overrides: tuple):
    region = DiffusionTrustRegion(**{TRUST_REGION[k]: v for k, v in overrides if k in TRUST_REGION})
    config = DiffusionPolicyConfig(**SMALL_NET, **{k: v for k, v in overrides if k not in TRUST_REGION})
    policy = DiffusionPolicy(config, ACT, trust_region=region)
    return policy, _init(tuple((k, v) for k, v in overrides if k in STRUCTURE))


@functools.cache
def _init(structure: tuple):
    # jitted (eager flax init compiles every op separately) and shared by all configs with
    # the same parameter structure, to keep the number of XLA compilations small
    policy = DiffusionPolicy(DiffusionPolicyConfig(**SMALL_NET, **dict(structure)), ACT)
    return jax.jit(policy.init, static_argnums=1)(jax.random.key(0), OBS)


def make(**overrides):
    return _make(tuple(sorted(overrides.items())))


def perturbed(params, key, scale=0.05):
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(key, len(leaves))
    return jax.tree.unflatten(tree, [x + scale * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])


@functools.cache
def jitted(policy: DiffusionPolicy, method: str):
    """One jitted wrapper per (policy, method), so tests sharing shapes share compilations."""
    return jax.jit(getattr(policy, method))


def assert_float32_rounding(actual, desired):
    """Equal up to the rounding of float32 programs compiled separately (O(1) values)."""
    np.testing.assert_allclose(actual, desired, rtol=2e-6, atol=2e-6)


OBS_TB = jax.random.normal(jax.random.key(1), (2, 8, OBS))  # (T, B, obs), used by most tests


def test_protocol_and_shapes_with_leading_axes():
    policy, params = make()
    assert isinstance(policy, PathwisePolicy)
    require(policy, PathwisePolicy, "trudi")
    for obs in [OBS_TB[0, :6], OBS_TB]:
        lead = obs.shape[:-1]
        out = jitted(policy, "rsample")(params, obs, jax.random.key(2))
        assert out.action.shape == (*lead, ACT)
        assert out.log_prob.shape == lead and out.dual_log_prob.shape == lead
        actions = [out.action]
        if len(lead) == 2:
            action, aux = jitted(policy, "sample")(params, obs, jax.random.key(3))
            assert isinstance(aux, DiffusionAux) and action.shape == (*lead, ACT)
            assert aux.noise.shape == (*lead, STEPS + 1, ACT) and aux.x_final.shape == (*lead, ACT)
            assert aux.log_prob.shape == lead and aux.dual_log_prob.shape == lead
            actions.append(action)
        for a in actions:
            # float32 tanh reaches +-1 exactly for |x_N| > ~9 (prior std 2.5), hence <= 1
            assert bool(jnp.all(jnp.isfinite(a)) & jnp.all(jnp.abs(a) <= 1.0))
            assert bool(jnp.all(jnp.isfinite(out.log_prob)))


def test_replay_of_stored_sample_reproduces_it_and_dual_options():
    """sample (acting program) and replay / rsample (separately compiled) agree to float32 rounding;
    dual_log_prob = ell - log p0(x_0) ('running_cost') or ell ('full').

    Not bitwise: XLA does not promise that two separately compiled programs round alike (which
    multiply-adds it fuses depends on the CPU); on an AMD EPYC (Zen 4) 2 of 16 replayed log-probs
    differed from the acting program's by 4.8e-7. A wrong noise index or step would differ by O(1).
    """
    policy, params = make()
    full_policy, _ = make(dual_uses="full")
    action, aux = jitted(policy, "sample")(params, OBS_TB, jax.random.key(3))
    again = jitted(policy, "replay")(params, OBS_TB, aux)
    assert_float32_rounding(again.action, action)
    assert_float32_rounding(again.log_prob, aux.log_prob)
    assert_float32_rounding(again.dual_log_prob, aux.dual_log_prob)
    fresh = jitted(policy, "rsample")(params, OBS_TB, jax.random.key(3))  # same key, same path
    assert_float32_rounding(fresh.action, action)
    prior = dis_chain.prior_log_prob(2.5 * aux.noise[..., 0, :], 2.5)
    np.testing.assert_allclose(aux.log_prob - aux.dual_log_prob, prior, rtol=1e-5, atol=1e-4)
    full = jitted(full_policy, "rsample")(params, OBS_TB, jax.random.key(3))
    np.testing.assert_array_equal(full.dual_log_prob, full.log_prob)
    assert_float32_rounding(full.log_prob, fresh.log_prob)


def test_gradients_of_log_prob_and_action_are_finite_and_reach_all_params():
    policy, params = make(learn_dt=True, per_step_dt=True)
    obs = jax.random.normal(jax.random.key(1), (16, OBS))

    @jax.jit
    def grads(p):
        def loss(p):
            out = policy.rsample(p, obs, jax.random.key(2))
            return jnp.mean(out.log_prob) + jnp.mean(jnp.sum(out.action**2, -1))
        return jax.grad(loss)(p)

    assert params["dt_raw"].shape == (STEPS,) and params["friction_raw"].shape == (ACT,)
    g = grads(params)
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(g))
    assert float(jnp.max(jnp.abs(g["dt_raw"]))) > 0 and float(jnp.max(jnp.abs(g["friction_raw"]))) > 0
    out_layer = [x for path, x in jax.tree_util.tree_leaves_with_path(g["control"]) if "kernel" in str(path)][-1]
    assert float(jnp.max(jnp.abs(out_layer))) > 0


def test_init_policy_is_the_zero_control_chain_and_near_the_prior():
    policy, params = make()
    obs = jax.random.normal(jax.random.key(1), (4000, OBS))

    @jax.jit
    def run(key):
        _, aux = policy.sample(params, obs, key)
        zero = dis_chain.sample_chain(lambda x, n: jnp.zeros_like(x), policy.step_sizes(params),
                                      2.5, jnp.moveaxis(aux.noise, -2, 0))
        # log density of tanh(x_N) if x_N were exactly p0-distributed
        tanh_log_density = (dis_chain.prior_log_prob(aux.x_final, 2.5)
                            - dis_chain.squash_log_det(aux.x_final, "tanh", 1.0))
        return aux, zero.x_final, tanh_log_density

    aux, zero_x_final, tanh_log_density = run(jax.random.key(2))
    np.testing.assert_allclose(aux.x_final, zero_x_final, atol=1e-4)
    # f = 0 keeps p0 up to Euler inflation: var* = sigma0^2 / (1 - eta / (2 sigma0^2)) (< 3 % here);
    # the std of 4000 samples has relative SE 1.1 %, so 6 % covers both.
    np.testing.assert_allclose(np.asarray(aux.x_final).std(0), 2.5, rtol=0.06)
    # at f = 0 the bound is nearly tight: ell ~ log density of tanh(x_N) with x_N ~ p0
    assert abs(float(jnp.mean(aux.log_prob - tanh_log_density))) < 0.1 * ACT


def test_erf_squash_at_init_gives_near_uniform_actions():
    policy, params = make(squash="erf")
    action, _ = jax.jit(policy.sample)(params, jnp.zeros((4000, OBS)), jax.random.key(3))
    a = np.asarray(action)
    assert np.all(np.abs(a) <= 1.0)
    # Uniform(-1, 1): mean 0 (SE 0.009), variance 1/3 (SE 0.004); small Euler inflation allowed
    assert np.all(np.abs(a.mean(0)) < 0.04)
    np.testing.assert_allclose(a.var(0), 1 / 3, atol=0.03)


def test_trust_region_kl_estimators_gradients_and_zero_at_equality():
    policy, params = make(learn_dt=True, per_step_dt=True, kl_samples=16)
    sampled_policy, _ = make(learn_dt=True, per_step_dt=True, kl_samples=16, kl_estimator="sampled")
    new = perturbed(params, jax.random.key(7))
    obs = OBS_TB

    @jax.jit
    def run(old, p):
        def mean_kl(o, q):
            kl, metrics = policy.trust_region_kl(o, q, obs, jax.random.key(3))
            return jnp.mean(kl), (kl, metrics)
        (_, (kl, metrics)), grads = jax.value_and_grad(mean_kl, argnums=(0, 1), has_aux=True)(old, p)
        kl_sampled, metrics_sampled = sampled_policy.trust_region_kl(old, p, obs, jax.random.key(3))
        return kl, metrics, grads, kl_sampled, metrics_sampled

    kl_same, *_ = run(params, params)
    assert float(jnp.max(jnp.abs(kl_same))) < 1e-5
    kl, metrics, (g_old, g_new), kl_sampled, metrics_sampled = run(params, new)
    assert kl.shape == kl_sampled.shape == OBS_TB.shape[:-1] and bool(jnp.all(kl > 0))
    assert set(metrics) == {"kl_closed_form", "kl_sampled"} and all(m.shape == () for m in metrics.values())
    assert all(float(jnp.max(jnp.abs(x))) == 0.0 for x in jax.tree.leaves(g_old))
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(g_new))
    assert float(jnp.max(jnp.abs(g_new["dt_raw"]))) > 0  # the learned step size enters the KL
    # the config picks the estimator; metrics log both means whichever is returned
    assert float(jnp.mean(kl)) == pytest.approx(float(metrics["kl_closed_form"]), rel=1e-5)
    assert float(jnp.mean(kl_sampled)) == pytest.approx(float(metrics["kl_sampled"]), rel=1e-5)
    assert float(metrics_sampled["kl_closed_form"]) == pytest.approx(float(metrics["kl_closed_form"]), rel=1e-5)
    # same key -> same old paths; both estimators are unbiased for the same KL, so the
    # per-state paired difference has mean 0: 4-standard-error test over 16 states.
    diff = np.asarray(kl_sampled - kl, np.float64)
    assert abs(diff.mean()) < 4 * diff.std() / math.sqrt(len(diff))


def test_behaviour_path_kl_equals_the_fresh_kl_along_the_same_old_chain():
    """kl_paths="behaviour" measures (E8) along the stored acting chain: with that chain's noise
    the fresh estimator (K = 1) simulates exactly the same old path, so both estimators (closed
    form and sampled) and the gradients agree up to float rounding, while the behaviour version
    never calls the old network."""
    fresh, params = make(learn_dt=True, per_step_dt=True, kl_samples=1)
    stored, _ = make(learn_dt=True, per_step_dt=True, kl_paths="behaviour")
    new = perturbed(params, jax.random.key(7))
    obs, key = OBS_TB, jax.random.key(4)

    @jax.jit
    def run(p):
        _, aux = stored.sample(params, obs, key)
        noise = jnp.moveaxis(aux.noise, -2, 0)[:, None]  # (N + 1, K = 1, T, B, d): the same draws

        def fresh_kl(q):
            closed, sampled = dis_chain.trajectory_kl(
                fresh._control_fn(params, obs), fresh._control_fn(q, obs), fresh.step_sizes(params),
                fresh.step_sizes(q), 2.5, noise)
            return jnp.mean(closed, axis=0), jnp.mean(sampled, axis=0)

        def stored_kl(q):
            return stored.trust_region_kl(params, q, obs, jax.random.key(99), aux)

        grad_fresh = jax.grad(lambda q: jnp.mean(fresh_kl(q)[0]))(p)
        grad_stored = jax.grad(lambda q: jnp.mean(stored_kl(q)[0]))(p)
        return fresh_kl(p), stored_kl(p), grad_fresh, grad_stored, aux

    (closed, sampled), (kl, metrics), g_fresh, g_stored, aux = run(new)
    assert aux.path.shape == (*OBS_TB.shape[:-1], STEPS + 1, ACT)
    np.testing.assert_allclose(aux.path[..., -1, :], aux.x_final, rtol=0, atol=0)
    np.testing.assert_allclose(kl, closed, rtol=1e-4, atol=1e-6)
    assert float(metrics["kl_sampled"]) == pytest.approx(float(jnp.mean(sampled)), rel=1e-4, abs=1e-6)
    assert bool(jnp.all(kl > 0))
    for a, b in zip(jax.tree.leaves(g_fresh), jax.tree.leaves(g_stored)):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-6)
    # zero at equality: the old means come back from the stored path and noise
    same, _ = jax.jit(lambda: stored.trust_region_kl(params, params, obs, jax.random.key(0), aux))()
    assert float(jnp.max(jnp.abs(same))) < 1e-5
    # the default ("fresh") stores no path; "behaviour" without the stored chain is refused
    assert fresh.sample(params, obs[0], key)[1].path is None
    with pytest.raises(ValueError, match="kl_paths='behaviour' needs the stored acting chain"):
        stored.trust_region_kl(params, new, obs, key)
    with pytest.raises(ValueError, match="kl_paths must be one of"):
        DiffusionTrustRegion(kl_paths="old")
    # without the algorithm's trust region the policy only acts
    bare = DiffusionPolicy(DiffusionPolicyConfig(**SMALL_NET), ACT)
    with pytest.raises(ValueError, match="needs the algorithm's trust region"):
        bare.trust_region_kl(params, new, obs, key)


def test_deterministic_samplers_are_the_chains_of_the_initial_noise():
    policy, params = make(noise_free_coef=0.7)
    params = perturbed(params, jax.random.key(9), scale=0.3)  # a non-trivial control
    obs = OBS_TB
    assert policy.samplers == ("sde", "reversal-ode", "noise-free")

    @jax.jit
    def run(key):
        sde, reversal, noise_free = (policy.eval_action(params, obs, key, name) for name in policy.samplers)
        x0 = 2.5 * jax.random.normal(key, (*obs.shape[:-1], ACT))  # the only randomness: x_0
        control = lambda x, n: policy.net.apply(params["control"], x, obs, n)
        eta = policy.step_sizes(params)
        by_hand = (dis_samplers.reversal_ode(control, eta, x0),
                   dis_samplers.noise_free_chain(control, eta, 2.5, x0, 0.7))
        return sde, reversal, noise_free, jnp.tanh(by_hand[0]), jnp.tanh(by_hand[1])

    sde, reversal, noise_free, reversal_by_hand, noise_free_by_hand = run(jax.random.key(2))
    for a in (sde, reversal, noise_free):
        assert a.shape == (*obs.shape[:-1], ACT) and bool(jnp.all(jnp.abs(a) <= 1.0))
    np.testing.assert_allclose(reversal, reversal_by_hand, atol=1e-6)
    np.testing.assert_allclose(noise_free, noise_free_by_hand, atol=1e-6)
    assert not np.allclose(reversal, noise_free, atol=1e-3)
    with pytest.raises(ValueError, match="choose from"):
        policy.eval_action(params, obs, jax.random.key(2), "mean")


@pytest.mark.parametrize("old, new", [("ode", "reversal-ode"), ("ode-c", "noise-free")])
def test_retired_sampler_names_are_refused_with_the_new_name(old, new):
    policy, params = make()
    with pytest.raises(ValueError, match=f"'{old}' is now '{new}'"):
        policy.eval_action(params, OBS_TB, jax.random.key(2), old)


def test_config_validation():
    for bad in ({"squash": "sigmoid"}, {"dual_uses": "prior"}, {"num_steps": 0}):
        with pytest.raises(ValueError):
            DiffusionPolicyConfig(**bad)
    with pytest.raises(ValueError):
        DiffusionTrustRegion(kl_estimator="exact")
    policy, _ = make()
    assert policy.dt_init == pytest.approx(1 / STEPS)
    assert policy.erf_scale == pytest.approx(1 / (math.sqrt(2) * 2.5))


def test_trust_region_modes_action_and_none():
    """TruDi's ablation (--reppo.trust-region): 'action' bounds the unbiased moment-matched KL of
    the action marginals (E12), 0 at equal params, gradient only into the new params; 'none' hands the
    loss 0 and still logs how far the path moved (the trajectory KL of 'trajectory')."""
    traj, params = make(learn_dt=True, per_step_dt=True, kl_samples=8)
    action, _ = make(learn_dt=True, per_step_dt=True, kl_samples=8, trust_region="action")
    none, _ = make(learn_dt=True, per_step_dt=True, kl_samples=8, trust_region="none")
    new = perturbed(params, jax.random.key(7))
    key = jax.random.key(3)

    @jax.jit
    def run(old, p):
        def mean_kl(o, q):
            kl, metrics = action.trust_region_kl(o, q, OBS_TB, key)
            return jnp.mean(kl), (kl, metrics)
        (_, (kl, metrics)), grads = jax.value_and_grad(mean_kl, argnums=(0, 1), has_aux=True)(old, p)
        return kl, metrics, grads, traj.trust_region_kl(old, p, OBS_TB, key), none.trust_region_kl(old, p, OBS_TB, key)

    kl_same, *_ = run(params, params)
    assert float(jnp.max(jnp.abs(kl_same))) < 1e-5  # common noise: old and new end points coincide
    kl, metrics, (g_old, g_new), (kl_traj, m_traj), (kl_none, m_none) = run(params, new)
    # unbiased per-state estimates (E12) may dip below 0; their mean may not
    assert kl.shape == OBS_TB.shape[:-1] and bool(jnp.all(jnp.isfinite(kl))) and float(jnp.mean(kl)) > 0
    assert set(metrics) == {"kl_action"}
    assert float(metrics["kl_action"]) == pytest.approx(float(jnp.mean(kl)), rel=1e-5)
    assert all(float(jnp.max(jnp.abs(x))) == 0.0 for x in jax.tree.leaves(g_old))
    assert float(jnp.max(jnp.abs(g_new["dt_raw"]))) > 0 and all(
        bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(g_new))
    assert float(jnp.max(jnp.abs(kl_none))) == 0.0
    assert m_none.keys() == m_traj.keys()
    for name in m_traj:  # the same old paths (same key): the logged trajectory KL is TruDi's
        assert float(m_none[name]) == pytest.approx(float(m_traj[name]), rel=1e-5)

    # 'none' gives the loss nothing to differentiate
    g_none = jax.jit(jax.grad(lambda p: jnp.sum(none.trust_region_kl(params, p, OBS_TB, key)[0])))(new)
    assert all(float(jnp.max(jnp.abs(x))) == 0.0 for x in jax.tree.leaves(g_none))


def test_action_trust_region_config_is_checked():
    """The trust region is the algorithm's: its settings are checked with the run config (--reppo.*, one
    line each, before anything is built) and by DiffusionTrustRegion; a policy loaded to act has none."""
    with pytest.raises(ValueError, match="kl_samples must be >= 1, and >= 6"):
        DiffusionTrustRegion(region="action", kl_samples=5)
    DiffusionTrustRegion(region="action", kl_samples=6)
    with pytest.raises(ValueError, match="kl_paths='behaviour'"):
        DiffusionTrustRegion(region="action", kl_samples=8, kl_paths="behaviour")
    with pytest.raises(ValueError, match="trust region must be one of"):
        DiffusionTrustRegion(region="final")
    from diffrl.config import ConfigError
    from diffrl.core.build import build
    from diffrl.config.presets import resolve

    for algo in ("dime", "trudi"):
        config = resolve(algo, "gymnax/Pendulum-v1", None)
        config = config.replace(reppo=dataclasses.replace(config.reppo, trust_region="action", kl_samples=4))
        with pytest.raises(ConfigError, match="--reppo.trust-region action .* needs --reppo.kl-samples >= 6"):
            build(config)
    config = resolve("trudi", "gymnax/Pendulum-v1", None)
    for changes, message in (({"trust_region": "action", "kl_samples": 8, "kl_paths": "behaviour"},
                              "--reppo.kl-paths behaviour .* applies to trajectory and none"),
                             ({"trust_region": "final"}, "--reppo.trust-region must be one of trajectory, action"),
                             ({"kl_estimator": "exact"}, "--reppo.kl-estimator must be one of"),
                             ({"kl_paths": "old"}, "--reppo.kl-paths must be one of"),
                             ({"kl_samples": 0}, "--reppo.kl-samples must be >= 1")):
        with pytest.raises(ConfigError, match=message):
            config.replace(reppo=dataclasses.replace(config.reppo, **changes)).validate()
