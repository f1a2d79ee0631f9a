"""diffrl.plumbing.program_cache: a traced program kept on disk is read back instead of traced, computes the
same bits as the function jitted directly, and is never used for another configuration."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

from diffrl.plumbing.program_cache import compiled_program, program_identity

IDENTITY = {"config": {"lr": 1e-3}, "source": "abc"}


def _problem():
    """An Adam step on a small regression: a pytree with optax's states (named tuples, EmptyState)."""
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-2))
    params = {"w": jnp.linspace(-1.0, 1.0, 12).reshape(3, 4), "b": jnp.zeros(4)}
    state = {"params": params, "opt": opt.init(params), "step": jnp.int32(0)}
    traced = []

    def step(state, batch):
        traced.append(1)  # counts traces: a program read back is not traced

        def loss(p):
            return jnp.mean((batch["x"] @ p["w"] + p["b"] - batch["y"]) ** 2)

        value, grads = jax.value_and_grad(loss)(state["params"])
        updates, opt_state = opt.update(grads, state["opt"], state["params"])
        new = {"params": optax.apply_updates(state["params"], updates), "opt": opt_state, "step": state["step"] + 1}
        return new, {"loss": value}

    key = jax.random.PRNGKey(0)
    batch = {"x": jax.random.normal(key, (8, 3)), "y": jax.random.normal(jax.random.fold_in(key, 1), (8, 4))}
    return step, state, batch, traced


def _same(a, b):
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))) \
        and jax.tree.structure(a) == jax.tree.structure(b)


def test_a_kept_program_is_read_back_without_tracing_and_computes_the_same_bits(tmp_path):
    step, state, batch, traced = _problem()
    direct = jax.jit(step)(state, batch)
    traced.clear()
    first, hit = compiled_program("step", step, (state, batch), identity=IDENTITY, directory=tmp_path)
    assert not hit and len(traced) >= 1 and len(list(tmp_path.glob("*.exported"))) == 1
    traced.clear()
    second, hit = compiled_program("step", step, (state, batch), identity=IDENTITY, directory=tmp_path)
    assert hit and traced == []
    assert _same(first(state, batch), direct) and _same(second(state, batch), direct)
    # several steps through the kept program: the state round-trips as the same pytree
    s1, s2 = state, state
    for _ in range(3):
        s1, _ = jax.jit(step)(s1, batch)
        s2, _ = second(s2, batch)
    assert _same(s1, s2)


@pytest.mark.parametrize("change", ["identity", "name", "shape"])
def test_another_configuration_never_reads_the_entry(tmp_path, change):
    step, state, batch, traced = _problem()
    compiled_program("step", step, (state, batch), identity=IDENTITY, directory=tmp_path)
    identity, name = IDENTITY, "step"
    if change == "identity":
        identity = {**IDENTITY, "config": {"lr": 2e-3}}
    elif change == "name":
        name = "other"
    else:
        batch = {"x": jnp.ones((16, 3)), "y": jnp.ones((16, 4))}
    traced.clear()
    program, hit = compiled_program(name, step, (state, batch), identity=identity, directory=tmp_path)
    assert not hit and traced and len(list(tmp_path.glob("*.exported"))) == 2
    assert _same(program(state, batch), jax.jit(step)(state, batch))


def test_no_identity_keeps_nothing(tmp_path):
    step, state, batch, _ = _problem()
    program, hit = compiled_program("step", step, (state, batch), identity=None, directory=tmp_path)
    assert not hit and list(tmp_path.iterdir()) == []
    assert _same(program(state, batch), jax.jit(step)(state, batch))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "other-arguments"])
def test_an_unreadable_entry_is_traced_anew_and_replaced(tmp_path, damage):
    step, state, batch, traced = _problem()
    compiled_program("step", step, (state, batch), identity=IDENTITY, directory=tmp_path)
    (entry,) = tmp_path.glob("*.exported")
    if damage == "truncated":
        entry.write_bytes(entry.read_bytes()[:1000])
    elif damage == "garbage":
        entry.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not a pickle at all")
    else:  # a valid entry of another program under this key
        other = dict(state, step=jnp.zeros(3, jnp.int32))
        tmp = tmp_path / "other"
        compiled_program("step", step, (other, batch), identity=IDENTITY, directory=tmp)
        entry.write_bytes(next(tmp.glob("*.exported")).read_bytes())
    traced.clear()
    with pytest.warns(UserWarning, match="unusable"):
        program, hit = compiled_program("step", step, (state, batch), identity=IDENTITY, directory=tmp_path)
    assert not hit and traced
    assert _same(program(state, batch), jax.jit(step)(state, batch))
    _, hit = compiled_program("step", step, (state, batch), identity=IDENTITY, directory=tmp_path)
    assert hit  # replaced by a whole entry


def test_shardings_and_donation_are_honoured(tmp_path):
    step, state, batch, _ = _problem()
    from diffrl.plumbing.sharding import make_mesh

    mesh = make_mesh(1)
    replicated = NamedSharding(mesh, P())
    expected = jax.jit(step)(state, batch)
    state, batch = jax.device_put((state, batch), replicated)
    for _ in range(2):  # written, then read back
        program, _ = compiled_program("step", step, (state, batch), identity=IDENTITY, directory=tmp_path,
                                      out_shardings=lambda out: jax.tree.map(lambda _: replicated, out),
                                      donate_argnums=(0,))
        fresh = jax.tree.map(jnp.copy, state)
        out = program(fresh, batch)
        assert _same(out, expected)
        assert all(x.sharding.is_equivalent_to(replicated, x.ndim) for x in jax.tree.leaves(out))


def test_only_diffrls_own_code_gets_an_identity():
    from diffrl.config import TrainConfig

    config = TrainConfig(algo="ppo", env="toy/MirrorGoals")
    identity = program_identity(config)
    assert identity is not None and len(identity["source"]) == 64 and identity["config"]["algo"] == "ppo"
    # where files go does not change the program; what it computes does
    assert program_identity(dataclasses.replace(config, out="elsewhere", progress=False)) == identity
    assert program_identity(dataclasses.replace(config, num_envs=config.num_envs * 2)) != identity
    assert program_identity(dataclasses.replace(config, env="mypackage.tasks:make_task")) is None


SHARDED = """
import sys, jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from diffrl.plumbing.program_cache import compiled_program
from diffrl.plumbing.sharding import make_mesh
mesh = make_mesh(2)
split, rep = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
x = jax.device_put(jnp.arange(8.0).reshape(4, 2), split)
w = jax.device_put(jnp.ones((2, 2)), rep)
fn = lambda x, w: (jnp.tanh(x @ w), jnp.sum(x))
shardings = lambda out: (split, rep)
for expect_hit in (False, True):
    program, hit = compiled_program("f", fn, (x, w), identity={"t": 1}, out_shardings=shardings,
                                    directory=__import__("pathlib").Path(sys.argv[1]))
    y, s = program(x, w)
    assert hit == expect_hit and y.sharding.is_equivalent_to(split, 2) and s.sharding.is_equivalent_to(rep, 0)
    direct = jax.jit(fn)(x, w)
    assert np.array_equal(np.asarray(y), np.asarray(direct[0])) and np.array_equal(np.asarray(s), np.asarray(direct[1]))
print("ok")
"""


def test_a_program_over_two_devices_keeps_its_shardings(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2")
    done = subprocess.run([sys.executable, "-c", SHARDED, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


class _Constants:
    """Static node data whose repr prints its address (as MJX's wrapped model arrays do)."""

    def __init__(self, values):
        self.values = np.asarray(values)


@jax.tree_util.register_pytree_node_class
class _WithConstants:
    def __init__(self, x, constants):
        self.x, self.constants = x, constants

    def tree_flatten(self):
        return (self.x,), self.constants

    @classmethod
    def tree_unflatten(cls, constants, children):
        return cls(children[0], constants)


def test_a_static_node_that_prints_its_address_is_found_again(tmp_path):
    # two equal constants objects at two addresses (as in two processes): one entry; other values: another
    from diffrl.plumbing.program_cache import _key

    def key(values):
        tree = _WithConstants(jnp.ones(3), _Constants(values))
        leaves, treedef = jax.tree.flatten((tree,))
        return _key("f", IDENTITY, treedef, leaves)

    assert key([1.0, 2.0]) == key([1.0, 2.0]) != key([1.0, 3.0])
