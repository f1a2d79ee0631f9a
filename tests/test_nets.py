"""Networks that scale: residual blocks, bfloat16 matrix products, parameter counts, and an AMDP
policy of more than 10M parameters trained for a few iterations on the CPU."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.nets.control import ControlNet
from diffrl.nets.mlp import MLP, Dense, check_architecture, mlp_param_count


def _count(params) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))


@pytest.mark.parametrize("arch,hidden,norm", [("mlp", (32, 16), "none"), ("mlp", (32, 32), "layer"),
                                              ("mlp", (8,), "rms"), ("residual", (32, 32, 32), "none")])
def test_parameter_count_closed_form_matches_flax(arch, hidden, norm):
    net = MLP(hidden=hidden, out=5, norm=norm, arch=arch)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 7)))
    assert _count(params) == mlp_param_count(7, hidden, 5, arch, norm)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_dense_on_parts_is_dense_on_their_broadcast_concatenation(dtype):
    """nets.mlp.Dense multiplies each part at its own batch shape: the same parameters (names, shapes,
    initial values) and, up to float32 rounding, the same output as flax's Dense on the concatenation."""
    import flax.linen as nn
    keys = jax.random.split(jax.random.PRNGKey(3), 3)
    x = jax.random.normal(keys[0], (4, 5, 2))
    obs = jax.random.normal(keys[1], (5, 3))
    t = jax.random.normal(keys[2], (4, 1, 6))
    full = jnp.concatenate([x, jnp.broadcast_to(obs, (4, 5, 3)), jnp.broadcast_to(t, (4, 5, 6))], axis=-1)
    ours, theirs = Dense(7, dtype=dtype), nn.Dense(7, dtype=dtype)
    params = ours.init(jax.random.PRNGKey(0), (x, obs, t))
    reference = theirs.init(jax.random.PRNGKey(0), full)
    assert jax.tree.structure(params) == jax.tree.structure(reference)
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(reference)):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == jnp.float32
    params = jax.tree.map(lambda a: a + 0.1, params)  # a non-zero bias too
    out, expected = ours.apply(params, (x, obs, t)), theirs.apply(params, full)
    assert out.shape == expected.shape == (4, 5, 7) and out.dtype == expected.dtype == dtype
    tol = 1e-5 if dtype == jnp.float32 else 2e-2
    np.testing.assert_allclose(np.asarray(out, np.float32), np.asarray(expected, np.float32), atol=tol, rtol=tol)
    np.testing.assert_array_equal(ours.apply(params, full), theirs.apply(params, full))


def test_control_net_time_and_observation_at_their_own_shapes():
    """ControlNet embeds t at t's shape and conditions on obs at obs's shape: a scalar t, or one t per
    chain step (N, 1), gives the output of t and obs broadcast to every row; the first layer keeps
    the name and shape of a Dense on [x, obs, time embedding] (parameters saved before load)."""
    net = ControlNet(action_size=2, hidden=(16, 16), time_dim=4, num_frequencies=3, output_scale=1.0)
    x = jax.random.normal(jax.random.PRNGKey(1), (3, 5, 2))
    obs = jax.random.normal(jax.random.PRNGKey(2), (5, 6))
    params = net.init(jax.random.PRNGKey(0), x, obs, jnp.float32(0.0))
    assert params["params"]["MLP_0"]["Dense_0"]["kernel"].shape == (2 + 6 + 4, 16)
    per_row = lambda t: net.apply(params, x, jnp.broadcast_to(obs, (3, 5, 6)), jnp.broadcast_to(t, (3, 5)))  # noqa: E731
    for t in (jnp.float32(2.0), jnp.arange(3.0).reshape(3, 1)):
        np.testing.assert_allclose(net.apply(params, x, obs, t), per_row(t), atol=1e-6, rtol=1e-5)


def test_residual_blocks_are_residual_and_bf16_keeps_float32_parameters():
    x = jax.random.normal(jax.random.PRNGKey(1), (4, 6))
    net = MLP(hidden=(16, 16), out=3, arch="residual", output_scale=1.0)
    params = net.init(jax.random.PRNGKey(0), x)
    # zeroing each block's second Dense makes the blocks identities: the output is then the
    # final LayerNorm and output layer applied to the input projection alone
    zeroed = jax.tree_util.tree_map_with_path(
        lambda path, p: jnp.zeros_like(p) if any(getattr(k, "key", "") in ("Dense_2", "Dense_4") for k in path)
        else p, params)
    proj = x @ params["params"]["Dense_0"]["kernel"] + params["params"]["Dense_0"]["bias"]
    ln = nn_layer_norm(proj, params["params"]["LayerNorm_2"])
    want = ln @ params["params"]["Dense_5"]["kernel"] + params["params"]["Dense_5"]["bias"]
    np.testing.assert_allclose(net.apply(zeroed, x), want, rtol=1e-5, atol=1e-5)

    bf16 = MLP(hidden=(16, 16), out=3, arch="residual", output_scale=1.0, matmul_dtype="bfloat16")
    p16 = bf16.init(jax.random.PRNGKey(0), x)
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree.leaves(p16))
    out16, out32 = bf16.apply(p16, x), net.apply(params, x)
    assert out16.dtype == jnp.float32
    np.testing.assert_allclose(out16, out32, rtol=0.05, atol=0.05)  # bfloat16 has 8 bits of mantissa
    assert not np.array_equal(np.asarray(out16), np.asarray(out32))  # it did compute in bfloat16


def nn_layer_norm(x, p, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * p["scale"] + p["bias"]


def test_control_net_residual_runs_with_bounds():
    net = ControlNet(action_size=2, hidden=(32, 32), arch="residual", bound=4.0, output_scale=1.0)
    x, obs, t = jnp.ones((3, 2)), jnp.ones((3, 5)), jnp.linspace(0, 1, 3)
    out = net.apply(net.init(jax.random.PRNGKey(0), x, obs, t), x * 100, obs, t)
    assert out.shape == (3, 2) and np.all(np.abs(out) < 4.0)


@pytest.mark.parametrize("arch,hidden,dtype,message", [
    ("resnet", (8,), "float32", "arch must be one of"),
    ("residual", (8, 16), "float32", "needs equal widths"),
    ("mlp", (8,), "float16", "unknown matmul dtype"),
])
def test_bad_architecture_refused(arch, hidden, dtype, message):
    with pytest.raises(ValueError, match=message):
        check_architecture(arch, hidden, dtype, "adjoint")


@pytest.mark.heavy(23)
def test_amdp_trains_a_policy_of_more_than_ten_million_parameters():
    """AMDP's matching regression never backpropagates through the chain, so a 10M+ parameter
    control net (5 residual blocks of width 512) trains on a CPU: two iterations, finite losses."""
    from diffrl.core.loop import make_train
    from diffrl.core.trainer import seed_keys
    from diffrl.policies.adjoint import AdjointPolicy
    from diffrl.config.presets import resolve

    config = resolve("amdp", "gymnax/Pendulum-v1", None).replace(
        total_env_steps=2 * 32, num_envs=8, num_steps=4, num_evals=1, eval_envs=2, episode_length=20)
    config = config.replace(
        adjoint=dataclasses.replace(config.adjoint, arch="residual", hidden=(512,) * 5, num_steps=4),
        reppo=dataclasses.replace(config.reppo, num_epochs=1, num_minibatches=2))
    config.validate()
    policy = AdjointPolicy(config.adjoint, 1)
    shapes = jax.eval_shape(lambda k: policy.init(k, 3), jax.random.PRNGKey(0))
    assert _count(shapes) > 10_000_000
    state, metrics = jax.jit(make_train(config))(seed_keys(0, 1)[0])
    for name in ("am/loss", "critic/critic_loss"):
        values = np.asarray(metrics[name])
        assert values.size and np.all(np.isfinite(values)), name
