"""The reverse-KL baseline ``amdp-backprop``: REPPO's update on AMDP's controlled SDE.

It is built by the registry like every algorithm (``diffrl.algos``: REPPO with
``AdjointPolicy``), so these tests go through the same path as ``diffrl train``: a short
training run must move the actor inside a finite, non-zero path-KL trust region, and the
actor loss must be differentiable through the simulated chain (its gradient w.r.t. the
control network equals a finite difference of the loss with the same noise).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.algos.reppo import REPPO
from diffrl.core.build import build
from diffrl.core.trainer import Trainer, seed_keys
from diffrl.policies.adjoint import AdjointPolicy
from diffrl.config.presets import resolve
from param_fixtures import perturbed, without_value_prior


def tiny_config(out=None):
    config = resolve("amdp-backprop", "gymnax/Pendulum-v1", None)
    return config.replace(
        total_env_steps=3 * 256, num_envs=16, num_steps=16, num_evals=3, eval_envs=4, out=str(out),
        progress=False, tensorboard=False,
        adjoint=config.adjoint.__class__(**{**config.adjoint.__dict__, "hidden": (16, 16), "num_steps": 4}),
        reppo=config.reppo.__class__(**{**config.reppo.__dict__, "num_minibatches": 4, "num_epochs": 2}),
        critic=config.critic.__class__(**{**config.critic.__dict__, "hidden": 32}))


@pytest.mark.heavy(32)
def test_trains_through_the_registry(tmp_path):
    config = tiny_config(tmp_path / "run")
    chunks = []
    trainer = Trainer(config, metrics_fn=lambda first, metrics: chunks.append(metrics))
    assert isinstance(trainer.algo, REPPO) and isinstance(trainer.algo.policy, AdjointPolicy)
    assert trainer.algo.name == "amdp-backprop"
    trainer.run()
    assert len(chunks) == 3
    path_kl = np.concatenate([np.ravel(m["actor/kl/path"]) for m in chunks])
    # the path KL of the chain to the iteration's start: finite and > 0 once the actor moved
    assert np.all(np.isfinite(path_kl)) and np.all(path_kl > 0), path_kl
    assert np.all(np.isfinite(np.concatenate([np.ravel(m["actor/loss"]) for m in chunks])))
    initial = trainer.built.stepper.template(seed_keys(config.seed, config.num_seeds)).algo.actor_params
    moved = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(
        jax.tree.leaves(initial), jax.tree.leaves(trainer.state.algo.actor_params)))
    assert moved > 1e-4, moved


def test_actor_loss_gradient_flows_through_the_chain():
    config = tiny_config()
    env, algo, _ = build(config)
    state = jax.jit(algo.init, static_argnums=1)(jax.random.PRNGKey(0), env.spec)
    # A control network away from its near-zero initialisation (so the chain's control cost and
    # actions depend on every layer) and a critic without its sharp value prior (so Q has an
    # action gradient): both terms of alpha * log pi - Q then carry gradient.
    params = perturbed(state.actor_params, jax.random.PRNGKey(1), 0.3)
    critic = without_value_prior(state.critic_params)
    obs = jax.random.normal(jax.random.PRNGKey(2), (64, 3))
    key = jax.random.PRNGKey(3)
    # the minibatch carries the rollout's acting sample of the old policy, as in REPPO.update
    mb = {"obs": obs, "critic_obs": obs, "policy_aux": jax.jit(algo.policy.sample)(params, obs, key)[1]}

    @jax.jit
    def loss(p):  # old = current params: every state inside the trust region (the first step)
        return algo.actor_loss((p, state.log_alpha, state.log_beta), p, critic, mb, key)

    grad = jax.jit(jax.grad(lambda p: loss(p)[0]))(params)
    leaves = jax.tree.leaves(grad)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
    # every layer of the control network gets gradient, not only the output layer
    assert all(float(jnp.max(jnp.abs(g))) > 0 for g in leaves)
    # Directional derivative along a random unit direction against a central difference of
    # the per-state loss alpha log pi - Q ("actor/loss"), with the same noise. The full loss
    # adds the dual losses, whose VALUES depend on the actor (the entropy estimate) but which
    # pass it no gradient by design (stop-gradient), so their difference quotient must not
    # count. float32 at a loss of ~74: h = 3e-2 keeps roundoff and truncation < 0.5 %.
    direction = perturbed(jax.tree.map(jnp.zeros_like, params), jax.random.PRNGKey(4), 1.0)
    norm = jnp.sqrt(sum(jnp.sum(d**2) for d in jax.tree.leaves(direction)))
    direction = jax.tree.map(lambda d: d / norm, direction)
    analytic = float(sum(jnp.sum(g * d) for g, d in zip(leaves, jax.tree.leaves(direction))))
    h = 3e-2
    shifted = [jax.tree.map(lambda p, d: p + s * h * d, params, direction) for s in (1.0, -1.0)]
    numeric = (float(loss(shifted[0])[1]["actor/loss"]) - float(loss(shifted[1])[1]["actor/loss"])) / (2 * h)
    assert abs(analytic) > 1e-2
    assert analytic == pytest.approx(numeric, rel=1e-2)
