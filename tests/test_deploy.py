"""Deployable policies (diffrl.artefacts.deploy): every sampler of every policy kind as ONNX and jax.export.

Oracle: ``diffrl.load_policy(dir, sampler)(obs, key)``, the policy as diffrl evaluates it. The
artifacts are given the noise that ``act`` draws from ``key`` (``draw_eval_noise``) and must
reproduce its action to 1e-4 under onnxruntime, at batch sizes 1 and 33 (the batch axis is
dynamic). The policies are perturbed away from their near-zero output initialisation and see
raw observations far from the normaliser's mean, so every layer and the clip matter.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from diffrl.artefacts import deploy
from diffrl.artefacts.export import export_policy, load_policy
from diffrl.maths.normalization import init_stats, update_stats
from diffrl.policies.adjoint import AdjointPolicy, AdjointPolicyConfig
from diffrl.policies.diffusion import DiffusionPolicy, DiffusionPolicyConfig
from diffrl.policies.gaussian import GaussianPolicy, GaussianPolicyConfig
from diffrl.critics.categorical import CategoricalCritic, CriticConfig
from diffrl.artefacts.export_critic import export_critic

OBS, ACT, CLIP = 6, 3, 5.0

# One policy per kind (PPO and REPPO act with the Gaussian, TruDi with the DIME chain, AMDP and
# amdp-backprop with the adjoint chain), each with the options that change the graph.
POLICIES = {
    "gaussian": (GaussianPolicy, GaussianPolicyConfig(hidden=(32, 16), norm="layer", act="swish")),
    "diffusion": (DiffusionPolicy, DiffusionPolicyConfig(num_steps=5, hidden=(32, 32), squash="erf",
                                                         learn_dt=True, per_step_dt=True)),
    "adjoint": (AdjointPolicy, AdjointPolicyConfig(num_steps=6, hidden=(32, 32), norm="layer",
                                                   control_bound=4.0)),
}
CASES = [(kind, sampler) for kind, (cls, cfg) in POLICIES.items()
         for sampler in (*cls(cfg, ACT).samplers, "best-of-k")]  # best-of-k: with the exported critic
CRITIC = CriticConfig(hidden=16, num_bins=21, vmin=-5.0, vmax=5.0)


def _perturbed(policy):
    def init(key):
        params = policy.init(key, OBS)
        return jax.tree.map(lambda p: p + 0.2 * jnp.sin(1.0 + jnp.arange(p.size).reshape(p.shape)), params)

    return jax.jit(init)(jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """One export directory per policy kind, with every sampler converted to both formats."""
    data = 2.0 + 3.0 * jax.random.normal(jax.random.PRNGKey(1), (128, OBS))
    stats = update_stats(init_stats(OBS), data)
    dirs = {}
    for kind, (cls, cfg) in POLICIES.items():
        policy = cls(cfg, ACT)
        out = tmp_path_factory.mktemp(kind)
        export_policy(out, kind, cfg, ACT, OBS, _perturbed(policy), stats, normalize_obs=True, obs_clip=CLIP,
                      sampler=policy.samplers[0], extra={"action_low": [-2.0] * ACT, "action_high": [2.0] * ACT})
        critic = CategoricalCritic(CRITIC)
        critic_params = jax.jit(lambda k: jax.tree.map(
            lambda p: p + 0.3 * jnp.sin(2.0 + jnp.arange(p.size).reshape(p.shape)),
            critic.init(k, jnp.zeros((1, OBS)), jnp.zeros((1, ACT)))))(jax.random.PRNGKey(7))
        critic_stats = update_stats(init_stats(OBS), 1.0 + 2.0 * jax.random.normal(jax.random.PRNGKey(8), (64, OBS)))
        export_critic(out, CRITIC, critic_params, critic_stats, OBS, ACT, best_of_k=5,
                      acting_sampler=policy.acting_sampler)
        deploy.write_deployables(out)
        dirs[kind] = out
    return dirs


def _inputs(act, batch, seed):
    from diffrl.artefacts.export_critic import draw_best_of_k_noise

    obs = 2.0 + 8.0 * np.random.default_rng(seed).standard_normal((batch, OBS)).astype(np.float32)
    key = jax.random.PRNGKey(seed)
    if act.critic is not None:
        noise = draw_best_of_k_noise(act.policy, key, (batch,), act.critic.k, act.critic.acting_sampler)
    else:
        noise = act.policy.draw_eval_noise(key, (batch,), act.sampler)
    return obs, key, (None if noise is None else np.asarray(noise))


@pytest.mark.parametrize("kind,sampler", CASES)
def test_onnx_and_jax_export_match_load_policy(exports, kind, sampler):
    out = exports[kind]
    record = json.loads((out / deploy.DEPLOY_FILE).read_text())
    entry = record["artifacts"][sampler]
    act = load_policy(out, sampler)
    session = ort.InferenceSession(str(out / entry["onnx"]["file"]), providers=["CPUExecutionProvider"])
    call = deploy.load_jax_export(out / entry["jax"]["file"])
    assert [i.name for i in session.get_inputs()] == entry["inputs"]
    for batch, seed in ((1, 3), (33, 4)):
        obs, key, noise = _inputs(act, batch, seed)
        want = np.asarray(act(obs, key))
        feeds = {"obs": obs} if noise is None else {"obs": obs, "noise": noise}
        assert noise is None or noise.shape == (batch, *entry["noise_shape"])
        got_onnx = session.run(["action"], feeds)[0]
        got_jax = np.asarray(call(*feeds.values()))
        assert got_onnx.shape == want.shape == (batch, ACT)
        np.testing.assert_allclose(got_onnx, want, atol=1e-4, rtol=0)
        np.testing.assert_allclose(got_jax, want, atol=1e-5, rtol=0)
        assert np.std(want) > 0.05  # not a constant (e.g. saturated) action
    if noise is not None:  # the noise is an input that matters
        other = session.run(["action"], {"obs": obs, "noise": -noise})[0]
        assert np.max(np.abs(other - want)) > 1e-2


@pytest.mark.parametrize("kind", list(POLICIES))
def test_onnx_graph_is_checked_and_documented(exports, kind):
    out = exports[kind]
    record = json.loads((out / deploy.DEPLOY_FILE).read_text())
    for sampler, entry in record["artifacts"].items():
        model = onnx.load(str(out / entry["onnx"]["file"]))
        onnx.checker.check_model(model, full_check=True)
        meta = {p.key: p.value for p in model.metadata_props}
        assert meta["diffrl.sampler"] == sampler and meta["diffrl.kind"] == kind
        assert json.loads(meta["diffrl.noise_shape"]) == entry["noise_shape"]
        assert json.loads(meta["diffrl.action_low"]) == [-2.0] * ACT
        graphs = list(deploy._graphs(model.graph))
        used = {name for g in graphs for node in g.node for name in node.input}
        assert all(init.name in used for g in graphs for init in g.initializer)  # no unused constants
        assert not any(node.op_type == "CastLike" for g in graphs for node in g.node)  # folded by ORT
        batch_dim = model.graph.input[0].type.tensor_type.shape.dim[0]
        assert batch_dim.dim_param and not batch_dim.HasField("dim_value")  # dynamic batch
        if kind != "gaussian":
            # every diffusion sampler runs the chain: its steps are one loop node, not N network copies
            assert any(node.op_type in ("Loop", "Scan") for node in model.graph.node)


def test_explicit_noise_reproduces_acting_chain():
    """The 'sde' samplers fed with the acting chain's own draws give the acting action."""
    obs = jax.random.normal(jax.random.PRNGKey(5), (4, OBS))
    for kind in ("diffusion", "adjoint"):
        cls, cfg = POLICIES[kind]
        policy = cls(cfg, ACT)
        params = _perturbed(policy)
        key = jax.random.PRNGKey(6)
        acting = policy.sample(params, obs, key)[0]
        noise = policy.draw_eval_noise(key, (4,), "sde")
        np.testing.assert_array_equal(policy.eval_action_from_noise(params, obs, noise, "sde"), acting)


def test_unknown_sampler_and_format_refused(exports):
    with pytest.raises(ValueError, match="sampler"):
        deploy.deployable(exports["gaussian"], "sde")
    with pytest.raises(ValueError, match="unknown format"):
        deploy.write_deployables(exports["gaussian"], ("tflite",))
