"""The off-policy family (sac, dime-off, amdp-off): the update's schedule (buffer, learning_starts, UTD,
policy delay), AMDP's simulation-free actor step, and the settings it refuses (the losses:
tests/test_offpolicy_losses.py)."""
import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.algos.base import Rollout
from diffrl.config import ConfigError, as_full_config
from diffrl.core.build import build
from diffrl.config.presets import resolve
from multiseed import long_only


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
    with pytest.raises(ConfigError, match="--offpolicy.kl-multiplier must be closed_form or none"):
        build(cfg.replace(offpolicy=dataclasses.replace(cfg.offpolicy, kl_multiplier="dual")))
    with pytest.raises(ConfigError, match="--adjoint.matching-steps"):
        build(cfg.replace(adjoint=dataclasses.replace(cfg.adjoint, matching_steps=2)))
    # amdp-off's run config has no reppo section; one with every section that changes it is refused
    assert not hasattr(cfg, "reppo")
    full = as_full_config(cfg)
    with pytest.raises(ConfigError, match="does not read the reppo section"):
        build(full.replace(reppo=dataclasses.replace(full.reppo, gamma=0.5)))
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
    from diffrl.plumbing.checkpoint import latest_valid_checkpoint
    from diffrl.core.run_dir import resume_config
    from diffrl.core.trainer import Trainer
    from diffrl.artefacts.export import load_policy
    from diffrl.artefacts.export_critic import has_critic
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


def test_sac_preset_is_published_sac_and_crossq_stays_an_option():
    """sac: SAC's critic (Haarnoja et al. 2018, arXiv 1812.05905): scalar ReLU MLPs, target critics
    Polyak-averaged at tau = 0.005, the minimum of two; dime-off keeps DIME's CrossQ critic."""
    for preset in ("sac-dmc", "sac-dmc-cpu", "sac-gymnax"):
        from diffrl.config.presets import PRESETS

        values = PRESETS[preset]
        assert values["offpolicy.target_networks"] is True and values["offpolicy.target_tau"] == 0.005
        assert values["offpolicy.ensemble_reduce"] == "min" and values["offpolicy.critic"] == "scalar"
        assert values["offpolicy.critic_norm"] == "none" and values["offpolicy.adam_b1"] == 0.9
        assert values["offpolicy.policy_delay"] == 1 and values["offpolicy.actor_clip"] == 0.0
    assert PRESETS["sac-dmc"]["offpolicy.critic_hidden"] == (256, 256) and PRESETS["sac-dmc"]["offpolicy.utd"] == 1.0
    off = _config("dime-off").offpolicy
    assert (off.target_networks, off.critic_norm, off.ensemble_reduce, off.critic) == (
        False, "batch_renorm", "mean", "categorical")
    env, algo, _ = build(_config("dime-off"))
    assert algo.init(jax.random.key(0), env.spec).target_critic_params is None


def test_sac_critic_loss_takes_the_minimum_of_the_target_critics():
    """The scalar TD loss of SAC against a plain loop: y = r + gamma (1 - term)(min_e Q'_e(s', a') - alpha l')
    with Q' the TARGET critics (here set apart from the online ones), loss = mean_e,n 1/2 (Q_e(s, a) - y)^2."""
    env, algo, _ = build(_config("sac", offpolicy=dataclasses.replace(_config("sac").offpolicy, critic_hidden=(8,))))
    spec = env.spec
    state = algo.init(jax.random.key(0), spec)
    target = jax.tree_util.tree_map(lambda p: p + 0.3, state.critic_params)
    rng = np.random.default_rng(5)
    n = 6
    mb = {"critic_obs": jnp.asarray(rng.normal(size=(n, spec.critic_size)), jnp.float32),
          "action": jnp.asarray(rng.uniform(-1, 1, size=(n, spec.action_size)), jnp.float32),
          "next_critic_obs": jnp.asarray(rng.normal(size=(n, spec.critic_size)), jnp.float32),
          "reward": jnp.asarray(rng.normal(size=n), jnp.float32),
          "terminated": jnp.asarray([0, 1, 0, 0, 0, 1], jnp.float32)}
    next_action = jnp.asarray(rng.uniform(-1, 1, size=(n, spec.action_size)), jnp.float32)
    next_lp = jnp.asarray(rng.normal(size=n), jnp.float32)
    loss, _ = algo.critic_loss(state.critic_params["params"], state.critic_params["batch_stats"], mb, next_action,
                               next_lp, 0.2, target)
    q = np.asarray(algo.critic.apply(state.critic_params, mb["critic_obs"], mb["action"], False))  # (E, n)
    q_next = np.asarray(algo.critic.apply(target, mb["next_critic_obs"], next_action, False))
    q_next_online = np.asarray(algo.critic.apply(state.critic_params, mb["next_critic_obs"], next_action, False))
    assert not np.allclose(q_next, q_next_online)
    gamma, total = algo.c.gamma, 0.0
    for e in range(2):
        for i in range(n):
            y = float(mb["reward"][i]) + gamma * (1 - float(mb["terminated"][i])) * (
                min(q_next[0, i], q_next[1, i]) - 0.2 * float(next_lp[i]))
            total += 0.5 * (q[e, i] - y) ** 2
    assert float(loss) == pytest.approx(total / (2 * n), rel=1e-5)


def test_sac_update_moves_the_target_critics_by_polyak_steps():
    """One learning iteration of 8 critic steps: the target critics start as copies of the critics; with
    tau = 1 every Polyak step copies the critics (targets = critics after the iteration), with tau = 0.1
    they lag (differ from both their start and the critics); the CrossQ option keeps no target networks."""
    def one_iteration(tau):
        off = dataclasses.replace(_config("sac").offpolicy, learning_starts=8, utd=1.0, batch_size=8,
                                  critic_hidden=(16,), target_tau=tau)
        env, algo, _ = build(_config("sac", offpolicy=off))
        state = algo.init(jax.random.key(0), env.spec)
        assert all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(state.critic_params),
                                                         jax.tree_util.tree_leaves(state.target_critic_params)))
        start = state.critic_params
        state, _ = jax.jit(algo.update)(state, _rollout(env.spec, algo, state, jax.random.key(1), 2, 4),
                                        jax.random.key(9))
        assert int(state.critic_steps) == 8
        return [np.asarray(x) for x in jax.tree_util.tree_leaves(
            (start["params"], state.critic_params["params"], state.target_critic_params["params"]))], off

    leaves, off = one_iteration(1.0)
    third = len(leaves) // 3
    start, critic, target = leaves[:third], leaves[third:2 * third], leaves[2 * third:]
    assert all(np.array_equal(c, t) for c, t in zip(critic, target))
    leaves, _ = one_iteration(0.1)
    start, critic, target = leaves[:third], leaves[third:2 * third], leaves[2 * third:]
    assert all(np.all(np.isfinite(t)) for t in target)
    assert any(not np.allclose(t, s) for t, s in zip(target, start))
    assert any(not np.allclose(t, c) for t, c in zip(target, critic))
    crossq = dataclasses.replace(off, target_networks=False, critic_norm="batch_renorm", critic="categorical",
                                 ensemble_reduce="mean", num_bins=11)
    env, algo, _ = build(_config("sac", offpolicy=crossq))
    state = algo.init(jax.random.key(0), env.spec)
    assert state.target_critic_params is None and "batch_stats" in state.critic_params
    state, metrics = jax.jit(algo.update)(state, _rollout(env.spec, algo, state, jax.random.key(1), 2, 4),
                                          jax.random.key(9))
    assert int(state.critic_steps) == 8 and np.isfinite(float(metrics["critic/loss"]))


def test_refused_critic_settings():
    for change, message in (({"critic_norm": "layer"}, "critic-norm must be one of"),
                            ({"target_tau": 0.0}, "target-tau must be in"), ({"target_tau": 1.5}, "target-tau must be in")):
        with pytest.raises(ConfigError, match=message):
            build(_config("sac", offpolicy=dataclasses.replace(_config("sac").offpolicy, **change)))


def test_dime_off_learns_its_step_size_from_dimes_init():
    """dime-off learns the chain's base step dt from 0.1 as DIME's code does (one scalar, softplus-
    parameterised): the actor step's gradient reaches it; the fixed step stays an option."""
    for preset in ("dime-off-dmc", "dime-off-dmc-cpu", "dime-off-gymnax"):
        from diffrl.config.presets import PRESETS

        assert PRESETS[preset]["diffusion.learn_dt"] is True and PRESETS[preset]["diffusion.dt_init"] == 0.1
    cfg = _config("dime-off")
    env, algo, _ = build(cfg.replace(diffusion=dataclasses.replace(cfg.diffusion, hidden=(16,), num_steps=4)))
    state = algo.init(jax.random.key(0), env.spec)
    assert float(jax.nn.softplus(state.actor_params["dt_raw"])) == pytest.approx(0.1, rel=1e-6)
    assert state.actor_params["dt_raw"].shape == ()
    state = state.replace(critic_params=jax.tree_util.tree_map(lambda p: p + 0.05, state.critic_params))
    obs = jax.random.normal(jax.random.key(3), (8, env.spec.obs_size))
    mb = {"obs": obs, "critic_obs": obs}
    grads = jax.grad(lambda p: algo.actor_step_loss(p, state.actor_params, state.critic_params, mb, 0.1,
                                                    jax.random.key(1))[0])(state.actor_params)
    assert float(jnp.abs(grads["dt_raw"])) > 0
    fixed = cfg.replace(diffusion=dataclasses.replace(cfg.diffusion, learn_dt=False, dt_init=None, hidden=(16,)))
    env, algo, _ = build(fixed)
    assert "dt_raw" not in algo.init(jax.random.key(0), env.spec).actor_params
