"""The off-policy family (sac, dime-off, amdp-off): losses against plain loops, the update's
schedule (buffer, learning_starts, UTD, policy delay), AMDP's simulation-free actor step, and
the settings it refuses."""
import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.algos.base import Rollout
from diffrl.algos.offpolicy import categorical_td_loss, pathwise_actor_loss, scalar_td_loss
from diffrl.config import ConfigError
from diffrl.core.build import build
from diffrl.critics.crossq import atoms
from diffrl.presets import resolve
from multiseed import long_only


def test_scalar_td_loss_matches_a_loop():
    rng = np.random.default_rng(0)
    q, next_q = rng.normal(size=(2, 5)), rng.normal(size=(2, 5))
    r, term, lp = rng.normal(size=5), np.array([0, 1, 0, 0, 1.0]), rng.normal(size=5)
    for reduce, pick in (("min", np.min), ("mean", np.mean)):
        loss, _ = scalar_td_loss(*(jnp.asarray(v, jnp.float32) for v in (q, next_q, r, term, lp)), 0.3, 0.9, reduce)
        total = 0.0
        for e in range(2):
            for n in range(5):
                y = r[n] + 0.9 * (1 - term[n]) * (pick(next_q[:, n]) - 0.3 * lp[n])
                total += 0.5 * (q[e, n] - y) ** 2
        np.testing.assert_allclose(loss, total / 10, rtol=1e-5)


def test_categorical_td_loss_matches_a_loop():
    from test_crossq import _project_loop

    rng = np.random.default_rng(1)
    support = np.asarray(atoms(-5.0, 5.0, 11))
    logits, next_logits = rng.normal(size=(2, 4, 11)), rng.normal(size=(2, 4, 11))
    r, term, lp = rng.normal(size=4), np.array([0, 0, 1, 0.0]), rng.normal(size=4)
    alpha, gamma, coef = 0.2, 0.95, 0.005

    def softmax(x):
        z = np.exp(x - x.max(-1, keepdims=True))
        return z / z.sum(-1, keepdims=True)

    p_next = softmax(next_logits)
    proj = np.stack([_project_loop(p_next[e], r, gamma * (1 - term), alpha * lp, support) for e in range(2)])
    for reduce in ("mean", "min"):
        if reduce == "mean":
            target = proj.mean(0)
        else:
            lowest = np.argmin((p_next * support).sum(-1), axis=0)
            target = np.stack([proj[lowest[n], n] for n in range(4)])
        p = softmax(logits)
        expected = np.mean(-(target[None] * np.log(p)).sum(-1) + coef * (p * np.log(p)).sum(-1))
        loss, _ = categorical_td_loss(*(jnp.asarray(v, jnp.float32) for v in (logits, next_logits, r, term, lp)),
                                      alpha, gamma, jnp.asarray(support), reduce, coef)
        np.testing.assert_allclose(loss, expected, rtol=1e-5)


def test_pathwise_actor_loss_holds_the_temperature_fixed():
    lp, q = jnp.array([0.5, -1.0]), jnp.array([2.0, 1.0])
    np.testing.assert_allclose(pathwise_actor_loss(lp, q, 0.3), np.mean(0.3 * np.array([0.5, -1.0]) - [2.0, 1.0]))
    assert jax.grad(lambda a: pathwise_actor_loss(lp, q, a))(0.3) == 0.0


def _config(algo, **changes):
    cfg = resolve(algo, "gymnax/Pendulum-v1", None)
    small = {"num_envs": 4, "num_steps": 2, "progress": False, "tensorboard": False}
    return cfg.replace(**{**small, **changes})


def _rollout(spec, algo, state, key, t, b):
    obs = jax.random.normal(key, (t, b, spec.obs_size))
    action, aux = jax.vmap(lambda o, k: algo.act(state, o, k))(obs, jax.random.split(key, t))
    return Rollout(obs=obs, critic_obs=obs, action=action, reward=jnp.ones((t, b)),
                   terminated=jnp.zeros((t, b), bool), truncated=jnp.zeros((t, b), bool), next_obs=obs + 0.1,
                   next_critic_obs=obs + 0.1, policy_aux=aux)


@pytest.mark.parametrize("algo_name", ["sac", "dime-off", "amdp-off"])
def test_update_fills_the_buffer_waits_then_takes_utd_steps(algo_name):
    off = dataclasses.replace(_config(algo_name).offpolicy, learning_starts=16, utd=1.5, policy_delay=2,
                              batch_size=8, critic_hidden=(16,), num_bins=11)
    cfg = _config(algo_name, offpolicy=off)
    env, algo, _ = build(cfg)
    spec = env.spec
    state = algo.init(jax.random.key(0), spec)
    update = jax.jit(algo.update)
    steps = []
    for i in range(3):  # 8 transitions per iteration; learning starts with the 2nd (16 stored)
        before = state
        state, metrics = update(state, _rollout(spec, algo, state, jax.random.key(i + 1), 2, 4), jax.random.key(9))
        steps.append(int(state.critic_steps))
        assert int(state.buffer.transitions) == 8 * (i + 1)
        moved = not np.allclose(jax.tree_util.tree_leaves(before.actor_params)[-1],
                                jax.tree_util.tree_leaves(state.actor_params)[-1])
        assert float(metrics["offpolicy/learning"]) == (i >= 1)
        assert moved == (i >= 1) or algo_name != "sac"  # diffusion nets start near zero output
        for leaf in jax.tree_util.tree_leaves((state.critic_params, state.actor_params, metrics)):
            assert np.all(np.isfinite(leaf))
    assert steps == [0, 12, 24]  # utd 1.5 x 8 transitions per iteration


def test_amdp_off_actor_step_is_flat_in_the_number_of_diffusion_steps():
    """The matching loss regresses the drift at bridge draws of the STORED end points: its
    program has the same size whatever N, while dime-off's grows with N (backprop through the chain)."""
    def equations(algo_name, section, n):
        cfg = _config(algo_name)
        cfg = cfg.replace(**{section: dataclasses.replace(getattr(cfg, section), num_steps=n)})
        env, algo, _ = build(cfg)
        state = algo.init(jax.random.key(0), env.spec)
        mb = algo._minibatch(state.buffer, jax.random.key(2))  # (the empty buffer's zeros: shapes only)
        loss = jax.grad(lambda p: algo.actor_step_loss(p, state.actor_params, state.critic_params, mb, 0.1,
                                                       jax.random.key(1))[0])
        return len(str(jax.make_jaxpr(loss)(state.actor_params)))

    assert equations("amdp-off", "adjoint", 4) == equations("amdp-off", "adjoint", 64)
    assert equations("dime-off", "diffusion", 4) < equations("dime-off", "diffusion", 64)


def test_refused_settings():
    with pytest.raises(ConfigError, match="normalize-obs false"):
        build(_config("sac", normalize_obs=True))
    with pytest.raises(ConfigError, match="whole number of gradient steps"):
        build(_config("sac", offpolicy=dataclasses.replace(_config("sac").offpolicy, utd=0.3)))
    cfg = _config("amdp-off")
    with pytest.raises(ConfigError, match="dual is not offered off-policy"):
        build(cfg.replace(adjoint=dataclasses.replace(cfg.adjoint, trust_region="dual")))
    with pytest.raises(ConfigError, match="--adjoint.matching-steps"):
        build(cfg.replace(adjoint=dataclasses.replace(cfg.adjoint, matching_steps=2)))
    with pytest.raises(ConfigError, match="does not read the reppo section"):
        build(cfg.replace(reppo=dataclasses.replace(cfg.reppo, gamma=0.5)))
    with pytest.raises(ConfigError, match="exceeds the buffer"):
        build(_config("sac", num_steps=8, offpolicy=dataclasses.replace(cfg.offpolicy, buffer_size=16)))


def _tiny_run(algo_name, out, **changes):
    cfg = _config(algo_name, num_envs=4, num_steps=4, total_env_steps=4 * 64, num_evals=4, eval_envs=2,
                  out=str(out), episode_length=32)
    off = dataclasses.replace(cfg.offpolicy, learning_starts=32, batch_size=16, critic_hidden=(16,), num_bins=11)
    section = {"dime-off": "diffusion", "amdp-off": "adjoint"}.get(algo_name)
    if section:  # a small chain keeps the test quick; the code path is the same
        cfg = cfg.replace(**{section: dataclasses.replace(getattr(cfg, section), hidden=(16, 16), num_steps=4)})
    return cfg.replace(offpolicy=off, **changes)


@pytest.mark.parametrize("algo_name", ["amdp-off", pytest.param("sac", marks=long_only("the same code path as amdp-off"))])
def test_interrupt_and_resume_is_bitwise_identical_with_the_buffer(tmp_path, algo_name):
    """The buffer is part of the checkpointed state: a resumed run replays the same transitions
    (amdp-off also stores its terminal pre-squash actions)."""
    from diffrl.checkpoint import latest_valid_checkpoint
    from diffrl.core.run_dir import resume_config
    from diffrl.core.trainer import Trainer
    from diffrl.export import load_policy
    from diffrl.export_critic import has_critic
    from test_resume import rows

    with warnings.catch_warnings(record=True) as caught:  # the trainer reports a failed export as a warning
        warnings.simplefilter("always")
        summary = Trainer(_tiny_run(algo_name, tmp_path / "full")).run()
    assert not [w for w in caught if "export failed" in str(w.message)], [str(w.message) for w in caught]
    # the finished run exports its policy (without the CrossQ critic: no best-of-k in the export)
    act = load_policy(summary["policy_dir"])
    assert "best-of-k" not in act.info["samplers"] and not has_critic(summary["policy_dir"])
    action = act(np.zeros((3, act.info["obs_size"]), np.float32), jax.random.key(0))
    assert action.shape == (3, act.info["action_size"]) and np.all(np.abs(np.asarray(action)) <= 1)
    interrupted = Trainer(_tiny_run(algo_name, tmp_path / "cut"))
    interrupted.progress_fn = lambda row: interrupted.request_stop() if row["env_steps"] == 128 else None
    assert interrupted.run()["interrupted"]
    assert latest_valid_checkpoint(tmp_path / "cut") is not None
    Trainer(resume_config(tmp_path / "cut")).run()
    full, resumed = rows(tmp_path / "full"), rows(tmp_path / "cut")
    assert len(full) == len(resumed) == 5
    assert full[-1]["offpolicy/learning"] == 1.0
    assert full == resumed
