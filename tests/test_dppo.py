"""DPPO (Ren et al. 2024) on the DIME chain: its per-step ratio terms against a plain loop, the floor
on the denoising noise, the denoising discount, and its wiring (presets, refused settings)."""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.algos import ALGORITHM_SECTIONS, ALGORITHMS, unused_setting_errors
from diffrl.policies import RatioPolicy
from diffrl.policies.diffusion import DiffusionPolicy, DiffusionPolicyConfig
from diffrl.config import ConfigError, as_full_config
from diffrl.config.overrides import set_field
from diffrl.config.presets import PRESETS, resolve

jax.config.update("jax_platforms", "cpu")

OBS, ACT, STEPS = 3, 2, 4
CONFIG = dict(num_steps=STEPS, hidden=(16,), num_frequencies=4, time_dim=4, output_scale=0.5,
              step_std_min=0.3, denoising_discount=0.9, squash="erf")


def make():
    policy = DiffusionPolicy(DiffusionPolicyConfig(**CONFIG), ACT, store_path=True)
    return policy, policy.init(jax.random.key(0), OBS)


def test_per_step_ratio_terms_match_a_plain_loop_and_the_floor_shapes_the_chain():
    policy, params = make()
    assert isinstance(policy, RatioPolicy)
    obs = jax.random.normal(jax.random.key(1), (5, OBS))
    _, aux = policy.sample(params, obs, jax.random.key(2))
    path, noise = np.asarray(aux.path), np.asarray(aux.noise)  # (5, N + 1, d)
    eta = np.asarray(policy.step_sizes(params))  # (N, d)
    var = np.maximum(2 * eta, 0.3**2)
    assert np.any(2 * eta < 0.3**2)  # the floor binds on the late steps of the cosine schedule
    new = jax.tree.map(lambda x: x * 1.1, params)
    terms = {name: np.asarray(policy.ratio_log_terms(p, obs, aux)) for name, p in (("old", params), ("new", new))}
    assert terms["old"].shape == (5, STEPS)
    for name, p in (("old", params), ("new", new)):
        eta_p = np.asarray(policy.step_sizes(p))
        var_p = np.maximum(2 * eta_p, 0.3**2)
        for b in range(5):
            for n in range(STEPS):
                x = path[b, n]
                f = np.asarray(policy.net.apply(p["control"], jnp.asarray(x), obs[b], jnp.int32(n)))
                mean = x + eta_p[n] * (-x / 2.5**2 + f)
                log_f = -0.5 * np.sum((path[b, n + 1] - mean) ** 2 / var_p[n] + np.log(2 * math.pi * var_p[n]))
                assert terms[name][b, n] == pytest.approx(log_f / ACT, rel=1e-4, abs=1e-5)
                if name == "old":  # the acting chain drew each step with the floored std
                    np.testing.assert_allclose((path[b, n + 1] - mean) / np.sqrt(var[n]), noise[b, n + 1],
                                               rtol=1e-4, atol=1e-4)
    assert not np.allclose(terms["old"], terms["new"])
    np.testing.assert_allclose(np.asarray(policy.ratio_weights), 0.9 ** np.arange(STEPS - 1, -1, -1), rtol=1e-6)
    without_path = DiffusionPolicy(DiffusionPolicyConfig(**CONFIG), ACT)
    _, aux_no_path = without_path.sample(params, obs, jax.random.key(2))
    with pytest.raises(ValueError, match="store_path=True"):
        without_path.ratio_log_terms(params, obs, aux_no_path)


def test_dppo_registration_presets_and_refused_settings():
    assert "dppo" in ALGORITHMS and ALGORITHM_SECTIONS["dppo"] == ("ppo", "diffusion")
    for name in (n for n in PRESETS if n.startswith("ppo-")):
        dppo = PRESETS["dppo-" + name[len("ppo-"):]]
        assert dppo["algo"] == "dppo" and dppo["ppo.ent_coef"] == 0.0 and dppo["diffusion.step_std_min"] == 0.1
    config = resolve("dppo", "gymnax/Pendulum-v1", None)
    assert config.preset == "dppo-gymnax" and config.diffusion.hidden == (64, 64)
    assert unused_setting_errors(config) == []
    # DPPO's trust region is PPO's clip: TruDi's trust-region settings are the reppo section's, which it
    # does not read: DPPO's run config has no reppo section, and a config with every section that changes
    # one of its settings is refused
    with pytest.raises(ConfigError, match="--set reppo.trust_region has no effect with --algo dppo: "
                                          "dppo does not read the reppo section"):
        set_field(config, "reppo.trust_region", "none")
    full = as_full_config(config)
    bad = full.replace(reppo=dataclasses.replace(full.reppo, trust_region="none"))
    assert any("--reppo.trust-region" in e and "does not read the reppo section" in e
               for e in unused_setting_errors(bad))
    trudi = resolve("trudi", "gymnax/Pendulum-v1", None)
    floored = trudi.replace(diffusion=DiffusionPolicyConfig(**{**trudi.diffusion.__dict__, "step_std_min": 0.1}))
    assert any("--diffusion.step-std-min" in e for e in unused_setting_errors(floored))


def test_dppo_surrogate_matches_a_plain_loop_over_samples_and_steps():
    from diffrl.algos.ppo import ppo_policy_loss, ratio_surrogate

    rng = np.random.default_rng(3)
    new, old = rng.normal(0, 0.2, (16, STEPS)), rng.normal(0, 0.2, (16, STEPS))
    adv, eps = rng.normal(size=16), 0.1
    weights = 0.9 ** np.arange(STEPS - 1, -1, -1)
    total = 0.0
    for i in range(16):
        for n in range(STEPS):
            rho, a = math.exp(new[i, n] - old[i, n]), adv[i] * weights[n]
            total += min(rho * a, min(max(rho, 1 - eps), 1 + eps) * a)
    loss, _ = ratio_surrogate(ppo_policy_loss, jnp.asarray(new), jnp.asarray(old), jnp.asarray(adv),
                              jnp.asarray(weights), eps)
    assert float(loss) == pytest.approx(-total / (16 * STEPS), rel=1e-5)
    plain, _ = ratio_surrogate(ppo_policy_loss, jnp.asarray(new[:, :1]), jnp.asarray(old[:, :1]), jnp.asarray(adv),
                               None, eps)
    assert float(plain) == pytest.approx(float(ppo_policy_loss(jnp.asarray(new[:, 0]), jnp.asarray(old[:, 0]),
                                                               jnp.asarray(adv), eps)[0]), rel=1e-6)
