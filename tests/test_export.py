"""Policy export: the loaded ``act`` equals the in-memory policy on normalised observations."""
import importlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.artefacts.export import (
    EXPORT_FORMAT,
    POLICY_KINDS,
    ExportError,
    export_from_train_state,
    export_policy,
    load_policy,
    policy_kind_of,
)
from diffrl.maths.normalization import init_stats, normalize, update_stats
from diffrl.policies.gaussian import GaussianPolicy, GaussianPolicyConfig
from diffrl.plumbing.records import config_from_json, flatten_params

OBS, ACT, CLIP = 5, 3, 4.0


def stats_and_obs():
    key_a, key_b = jax.random.split(jax.random.PRNGKey(1))
    data = 3.0 + 2.0 * jax.random.normal(key_a, (64, OBS))
    stats = update_stats(init_stats(OBS), data)
    obs = 3.0 + 6.0 * jax.random.normal(key_b, (7, OBS))  # some get clipped
    return stats, obs


def init_perturbed(policy, scale):
    """Initial params plus a deterministic perturbation, so that output layers
    initialised near zero matter (jitted: eager flax compiles every op separately)."""
    def init(key):
        params = policy.init(key, OBS)
        return jax.tree.map(lambda p: p + scale * jnp.sin(jnp.arange(p.size).reshape(p.shape)), params)

    return jax.jit(init)(jax.random.PRNGKey(0))


def reference(policy, params, obs, key, sampler, stats=None, eps=1e-8):
    """The in-memory policy's eval action on (optionally) normalised observations."""
    def run(params, obs, key):
        if stats is not None:
            obs = normalize(stats, obs, clip=CLIP, eps=eps)
        return policy.eval_action(params, obs, key, sampler)

    return jax.jit(run)(params, obs, key)


def export_gaussian(tmp_path, sampler="mean", normalize_obs=True):
    config = GaussianPolicyConfig(hidden=(16, 8), kl_samples=2)
    policy = GaussianPolicy(config, ACT)
    params = init_perturbed(policy, 0.3)
    stats, obs = stats_and_obs()
    out = export_policy(tmp_path / "export", "gaussian", config, ACT, OBS, params, stats,
                        normalize_obs=normalize_obs, obs_clip=CLIP, sampler=sampler,
                        extra={"env": "toy/X", "action_low": (-2.0,) * ACT})
    return policy, params, stats, obs, out


def test_gaussian_round_trip_matches_in_memory_policy(tmp_path):
    policy, params, stats, obs, out = export_gaussian(tmp_path)
    info = json.loads((out / "policy.json").read_text())
    assert info["format"] == EXPORT_FORMAT and info["kind"] == "gaussian"
    assert info["config"]["hidden"] == [16, 8] and info["extra"]["action_low"] == [-2.0] * ACT
    act = load_policy(out)
    assert act.policy.config == policy.config  # tuple fields restored from JSON lists
    key = jax.random.PRNGKey(3)
    want = reference(policy, params, obs, key, "mean", stats)
    act_jit = jax.jit(act)
    np.testing.assert_allclose(act_jit(obs, key), want, atol=1e-6, rtol=0)
    # the normaliser really is applied: raw observations give a different action
    assert not np.allclose(reference(policy, params, obs, key, "mean"), want, atol=1e-3)
    # leading axes are free and a single observation works
    np.testing.assert_allclose(act_jit(obs[0], key), want[0], atol=1e-6)
    # parameters are the exported ones, leaf for leaf
    for (n, a), (m, b) in zip(sorted(flatten_params(act.params).items()), sorted(flatten_params(params).items())):
        assert n == m and np.array_equal(a, b)


def test_sampler_override_and_unnormalised_export(tmp_path):
    policy, params, stats, obs, out = export_gaussian(tmp_path, normalize_obs=False)
    key = jax.random.PRNGKey(5)
    act = load_policy(out, sampler="sample")
    assert act.sampler == "sample"
    want = reference(policy, params, obs, key, "sample")
    np.testing.assert_allclose(jax.jit(act)(obs, key), want, atol=1e-6)
    assert not np.allclose(want, reference(policy, params, obs, key, "mean"), atol=1e-3)
    with pytest.raises(ValueError, match="not one of"):
        load_policy(out, sampler="ode")


def test_bad_version_corruption_and_unknown_kind_refused(tmp_path):
    _, _, _, _, out = export_gaussian(tmp_path)
    info = json.loads((out / "policy.json").read_text())
    (out / "policy.json").write_text(json.dumps({**info, "format": EXPORT_FORMAT + 1}))
    with pytest.raises(ExportError, match="format version 2"):
        load_policy(out)
    (out / "policy.json").write_text(json.dumps({**info, "kind": "mystery"}))
    with pytest.raises(ExportError, match="unknown policy kind 'mystery'"):
        load_policy(out)
    (out / "policy.json").write_text(json.dumps(info))
    data = (out / "params.npz").read_bytes()
    (out / "params.npz").write_bytes(data[:-10])
    with pytest.raises(ExportError, match="checksum"):
        load_policy(out)


def test_export_rejects_mismatched_params_and_config(tmp_path):
    config = GaussianPolicyConfig(hidden=(16,))
    params = init_perturbed(GaussianPolicy(GaussianPolicyConfig(hidden=(8,)), ACT), 0.0)
    stats = init_stats(OBS)
    with pytest.raises(ExportError, match="do not match"):
        export_policy(tmp_path, "gaussian", config, ACT, OBS, params, stats, True, 10.0, "mean")
    with pytest.raises(ValueError, match="not one of"):
        export_policy(tmp_path, "gaussian", config, ACT, OBS, params, stats, True, 10.0, "ode")


def test_export_from_seed_batched_train_state(tmp_path):
    """Seed 1 of a (2-seed) trainer state exports its own params and statistics."""
    from types import SimpleNamespace

    from diffrl.config import TrainConfig

    config = GaussianPolicyConfig(hidden=(8,))
    policy = GaussianPolicy(config, ACT)
    params = jax.tree.map(lambda *xs: jnp.stack(xs), init_perturbed(policy, 0.2), init_perturbed(policy, 0.5))
    stats, obs = stats_and_obs()
    other = update_stats(init_stats(OBS), obs)
    batched_stats = jax.tree.map(lambda a, b: jnp.stack([a, b]), other, stats)
    state = SimpleNamespace(algo=SimpleNamespace(actor_params=params), obs_stats=batched_stats)
    cfg = TrainConfig(env="toy/X", algo="reppo", obs_clip=CLIP)
    out = export_from_train_state(tmp_path, SimpleNamespace(policy=policy), state, cfg, seed=1)
    act = load_policy(out)
    assert act.sampler == "mean" and act.info["extra"]["env"] == "toy/X" and act.info["extra"]["seed"] == 1
    key = jax.random.PRNGKey(0)
    seed1 = jax.tree.map(lambda x: x[1], params)
    np.testing.assert_allclose(jax.jit(act)(obs, key), reference(policy, seed1, obs, key, "mean", stats, eps=cfg.obs_norm_eps),
                               atol=1e-6)


def test_config_from_json_and_kind_lookup():
    config = config_from_json(GaussianPolicyConfig, {"hidden": [4, 4], "squash": "clip"})
    assert config == GaussianPolicyConfig(hidden=(4, 4), squash="clip")
    with pytest.raises(ExportError, match="no field"):
        config_from_json(GaussianPolicyConfig, {"widths": [4]})
    assert policy_kind_of(GaussianPolicy(config, 2)) == "gaussian"
    assert set(POLICY_KINDS) >= {"gaussian", "diffusion", "adjoint", "flow"}


@pytest.mark.parametrize("kind, sampler", [("diffusion", "reversal-ode"), ("adjoint", "ode"), ("flow", "zero-noise")])
def test_diffusion_round_trip_with_deterministic_sampler(tmp_path, kind, sampler):
    module, policy_name, config_name = POLICY_KINDS[kind]
    try:
        mod = importlib.import_module(module)
    except ImportError as e:  # being written in parallel
        pytest.skip(f"{module} does not import: {e}")
    config = getattr(mod, config_name)(hidden=(16, 16), num_steps=4)
    policy = getattr(mod, policy_name)(config, ACT)
    params = init_perturbed(policy, 0.1)
    stats, obs = stats_and_obs()
    out = export_policy(tmp_path / kind, kind, config, ACT, OBS, params, stats, True, CLIP,
                        "sample" if kind == "flow" else "sde")
    act = load_policy(out, sampler=sampler)
    assert policy_kind_of(act.policy) == kind and act.policy.config == config
    key = jax.random.PRNGKey(9)
    want = reference(policy, params, obs, key, sampler, stats)
    got = jax.jit(act)(obs, key)
    assert got.shape == (7, ACT)
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=0)


def test_export_from_before_the_trudi_sampler_rename_loads_mapped(tmp_path):
    """An export written when TruDi's samplers were "ode" / "ode-c" and the config field was
    ode_coef loads under the new names with warnings, computing the same actions; an old name
    asked for explicitly is refused with the new one."""
    from diffrl.policies.diffusion import DiffusionPolicy, DiffusionPolicyConfig

    config = DiffusionPolicyConfig(hidden=(16, 16), num_steps=4, noise_free_coef=0.5)
    policy = DiffusionPolicy(config, ACT)
    params = init_perturbed(policy, 0.1)
    stats, obs = stats_and_obs()
    out = export_policy(tmp_path / "old", "diffusion", config, ACT, OBS, params, stats, True, CLIP, "noise-free")
    info = json.loads((out / "policy.json").read_text())
    old_config = {("ode_coef" if k == "noise_free_coef" else k): v for k, v in info["config"].items()}
    (out / "policy.json").write_text(json.dumps({**info, "sampler": "ode-c", "config": old_config,
                                                 "samplers": ["sde", "ode", "ode-c"]}))
    with pytest.warns(UserWarning) as record:
        act = load_policy(out)
    messages = " ".join(str(w.message) for w in record)
    assert "ode_coef -> noise_free_coef" in messages and "'ode-c' is now called 'noise-free'" in messages
    assert act.sampler == "noise-free" and act.policy.config == config
    key = jax.random.PRNGKey(3)
    np.testing.assert_allclose(jax.jit(act)(obs, key), reference(policy, params, obs, key, "noise-free", stats),
                               atol=1e-6, rtol=0)
    for old, new in (("ode", "reversal-ode"), ("ode-c", "noise-free")):
        with pytest.raises(ValueError, match=f"'{old}' is now '{new}'"), pytest.warns(UserWarning, match="ode_coef"):
            load_policy(out, sampler=old)
        with pytest.raises(ValueError, match=f"'{old}' is now '{new}'"):
            export_policy(tmp_path / "new", "diffusion", config, ACT, OBS, params, stats, True, CLIP, old)
