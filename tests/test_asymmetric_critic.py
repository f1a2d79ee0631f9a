"""Asymmetric actor-critic wiring: the policy sees only the actor observation, the
critic (PPO's value, the soft Q of REPPO/AMDP) only the privileged one, through
initialisation, rollout, update, every evaluation sampler (best-of-k asks Q) and export.

A small task gives actor and critic observations of different sizes (3 and 5) that
carry distinct marker values; recording proxies around the policy and the critic log
every observation array they are called with. If the loop, an algorithm or the
evaluation swapped the two, the recorded sizes and markers would not match.
"""
import dataclasses
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.config import ConfigError, TrainConfig
from diffrl.envs import register, unregister
from diffrl.envs.base import EnvSpec, EnvState

ACTOR_MARK, CRITIC_MARK = 3.0, -5.0
OBS, CRITIC_OBS, ACTIONS = 3, 5, 2


class AsymmetricProbe:
    """Reach a random target: the actor sees (position, mark, mark), the critic
    (position, target, mark, mark, mark)."""

    spec = EnvSpec("test/AsymmetricProbe", OBS, ACTIONS, (-1.0,) * ACTIONS, (1.0,) * ACTIONS,
                   episode_length=6, critic_obs_size=CRITIC_OBS)

    def _state(self, pos, target, reward=0.0):
        obs = jnp.concatenate([pos, jnp.full((OBS - 1,), ACTOR_MARK)])
        critic_obs = jnp.concatenate([pos, target, jnp.full((CRITIC_OBS - 2,), CRITIC_MARK)])
        return EnvState.create(inner=(pos, target), obs=obs, critic_obs=critic_obs, reward=reward)

    def reset(self, key):
        pos, target = jnp.split(jax.random.uniform(key, (2,), minval=-1.0, maxval=1.0), 2)
        return self._state(pos, target)

    def step(self, state, action):
        pos, target = state.inner
        pos = jnp.clip(pos + 0.1 * action[:1], -1.0, 1.0)
        nxt = self._state(pos, target, -jnp.abs(pos - target)[0])
        return state.replace(inner=nxt.inner, obs=nxt.obs, critic_obs=nxt.critic_obs,
                             final_obs=nxt.obs, final_critic_obs=nxt.critic_obs, reward=nxt.reward)


class Recorder:
    """Delegates to ``inner``; methods in ``obs_arg`` log their observation argument
    (by position) from inside compiled code."""

    def __init__(self, inner, obs_arg: dict[str, int], log: list):
        self._inner, self._obs_arg, self._log = inner, obs_arg, log

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name not in self._obs_arg:
            return attr

        def recorded(*args, **kwargs):
            jax.debug.callback(lambda x: self._log.append((name, np.asarray(x))), args[self._obs_arg[name]])
            return attr(*args, **kwargs)

        return recorded


POLICY_METHODS = {"sample": 1, "rsample": 1, "eval_action": 1, "log_prob": 1, "entropy": 1,
                  "trust_region_kl": 2, "matching_loss": 2}


@pytest.fixture(scope="module")
def probe_env():
    register("test/AsymmetricProbe", AsymmetricProbe)
    yield "test/AsymmetricProbe"
    unregister("test/AsymmetricProbe")


def small_config(algo: str, env: str) -> TrainConfig:
    c = TrainConfig(algo=algo, env=env, num_envs=4, num_steps=4, total_env_steps=32, num_evals=1,
                    eval_envs=2, normalize_obs=False, asymmetric_critic=True, check_finite=False)
    from diffrl.algos import without_unused_settings

    # one set of small sizes for every algorithm; each keeps the sections it reads
    return without_unused_settings(c.replace(
        ppo=dataclasses.replace(c.ppo, num_minibatches=2, num_epochs=1, value_hidden=(16,)),
        reppo=dataclasses.replace(c.reppo, num_minibatches=2, num_epochs=1, best_of_k=3),
        critic=dataclasses.replace(c.critic, hidden=16, num_bins=11),
        gaussian=dataclasses.replace(c.gaussian, hidden=(16,), kl_samples=2),
        adjoint=dataclasses.replace(c.adjoint, hidden=(16,), num_steps=2),
    ))[0]


def assert_actor_obs(x):
    assert x.shape[-1] == OBS, x.shape
    np.testing.assert_array_equal(x[..., 1:], ACTOR_MARK)


def assert_critic_obs(x):
    assert x.shape[-1] == CRITIC_OBS, x.shape
    np.testing.assert_array_equal(x[..., 2:], CRITIC_MARK)


@pytest.mark.parametrize("algo", ["ppo", "reppo", "amdp"])
def test_policy_sees_actor_obs_and_critic_sees_privileged_obs(algo, probe_env, tmp_path):
    from diffrl.core.build import build
    from diffrl.core.evaluate import make_evaluate
    from diffrl.core.loop import make_components
    from diffrl.artefacts.export import export_from_train_state, load_policy

    config = small_config(algo, probe_env)
    env, algo_obj, eval_env = build(config)
    assert env.spec.obs_size == OBS and env.spec.critic_size == CRITIC_OBS
    policy_log, critic_log = [], []
    policy = algo_obj.policy
    algo_obj.policy = Recorder(policy, POLICY_METHODS, policy_log)
    critic_attr = "value_net" if algo == "ppo" else "critic"
    setattr(algo_obj, critic_attr, Recorder(getattr(algo_obj, critic_attr), {"apply": 1, "init": 1},
                                            critic_log))

    comps = make_components(config, env, algo_obj)
    ts = jax.jit(comps.init)(jax.random.PRNGKey(0))
    # The normalisers are fed the matching observations (first reset batch).
    np.testing.assert_allclose(ts.obs_stats.mean[1:], ACTOR_MARK, rtol=1e-6)
    np.testing.assert_allclose(ts.critic_obs_stats.mean[2:], CRITIC_MARK, rtol=1e-6)
    ts, metrics = jax.jit(comps.iteration)(ts)
    jax.effects_barrier()
    assert {name for name, _ in critic_log} >= {"init", "apply"}
    update_calls = {name for name, _ in policy_log}
    evaluate = jax.jit(make_evaluate(config, eval_env, algo_obj), static_argnums=4)
    for sampler in algo_obj.samplers:
        n_critic = len(critic_log)
        out = evaluate(ts.algo, ts.obs_stats, ts.critic_obs_stats, jax.random.PRNGKey(1), sampler)
        jax.effects_barrier()
        assert np.isfinite(float(out["episode_return"]))
        if sampler == "best-of-k":  # ranks sampled actions by Q(critic_obs, a)
            assert len(critic_log) > n_critic
    jax.effects_barrier()

    assert {"sample", "eval_action"} <= {name for name, _ in policy_log}
    assert update_calls - {"sample"}, "the update must call the policy"
    for _, x in policy_log:
        assert_actor_obs(x)
    for name, x in critic_log:
        if name == "init":  # initialised on a zero critic observation of the right size
            assert x.shape[-1] == CRITIC_OBS
        else:
            assert_critic_obs(x)

    # The exported policy needs only the actor observation.
    algo_obj.policy = policy
    seeded = jax.tree.map(lambda x: x[None], ts)
    export_from_train_state(tmp_path, algo_obj, seeded, config)
    act = load_policy(tmp_path)
    action = act(jnp.array([0.2, ACTOR_MARK, ACTOR_MARK]), jax.random.PRNGKey(2))
    assert action.shape == (ACTIONS,) and np.all(np.abs(np.asarray(action)) <= 1.0)
    assert act.info["obs_size"] == OBS


def test_asymmetric_critic_needs_a_privileged_observation():
    from diffrl.core.build import build

    config = TrainConfig(algo="ppo", env="toy/BimodalBandit", asymmetric_critic=True,
                         num_envs=4, num_steps=4, total_env_steps=16)
    with pytest.raises(ConfigError, match="no privileged critic observation"):
        build(config)
    config = config.replace(env="playground/Op3Joystick")
    with pytest.raises(ConfigError, match="no privileged observation"):
        build(config)


def test_physics_impl_is_validated():
    with pytest.raises(ConfigError, match="--physics-impl must be one of jax, warp"):
        TrainConfig(physics_impl="cuda").validate()
    TrainConfig(physics_impl="jax").validate()
    import importlib.util

    if importlib.util.find_spec("warp") is None:  # diffrl does not install warp-lang
        with pytest.raises(ConfigError, match="needs the warp-lang package"):
            TrainConfig(env="playground/G1JoystickFlatTerrain", physics_impl="warp").validate()


def test_trained_run_checkpoint_eval_and_export(probe_env, tmp_path):
    """A run directory's checkpoint restores both normalisers at their own sizes, `diffrl eval`
    runs best-of-k (which reads the critic), and the export is actor-only."""
    from diffrl.commands.trained_run import cmd_eval, cmd_export, load_trained
    from diffrl.core.trainer import Trainer
    from diffrl.artefacts.export import load_policy

    run = tmp_path / "run"
    config = small_config("reppo", probe_env).replace(out=str(run), progress=False, tensorboard=False,
                                                      normalize_obs=True)
    Trainer(config).run()
    trained, state, _ = load_trained(run)
    assert trained.config.asymmetric_critic
    assert state.obs_stats.mean.shape == (1, OBS) and state.critic_obs_stats.mean.shape == (1, CRITIC_OBS)
    np.testing.assert_allclose(state.critic_obs_stats.mean[0, 2:], CRITIC_MARK, rtol=1e-6)
    assert cmd_eval([str(run), "--episodes", "2", "--sampler", "best-of-k"]) == 0
    assert cmd_export([str(run), "--out", str(tmp_path / "policy")]) == 0
    act = load_policy(tmp_path / "policy")
    assert act.obs_stats.mean.shape == (OBS,)
    assert act(jnp.zeros((4, OBS)), jax.random.PRNGKey(0)).shape == (4, ACTIONS)
