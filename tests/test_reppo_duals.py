"""REPPO's KL multiplier beta under a floor (--reppo.kl-min), in the real update.

With a KL bound far above any KL a few updates can reach, the dual lowers beta at every SGD
step (Adam on log beta: a nearly constant step whatever the violation). Without a floor beta
sinks below its start; with ``kl_min`` equal to the start it stays there exactly, at every step.
"""
import dataclasses

import jax
import numpy as np
import pytest

from diffrl.algos.reppo_config import REPPOConfig
from diffrl.core.loop import make_train
from diffrl.core.trainer import seed_keys
from diffrl.config.presets import resolve


def beta_after_training(kl_min: float):
    config = resolve("reppo", "gymnax/Pendulum-v1", None).replace(
        total_env_steps=2 * 512, num_envs=16, num_steps=32, num_evals=1, eval_envs=2)
    config = config.replace(reppo=dataclasses.replace(
        config.reppo, num_minibatches=4, num_epochs=2, kl_bound=100.0, kl_start=0.5, kl_min=kl_min))
    state, metrics = jax.jit(make_train(config))(seed_keys(0, 1)[0])
    return float(np.exp(state.algo.log_beta)), np.asarray(metrics["dual/beta"])


def test_kl_multiplier_floor_holds_beta_at_every_step():
    free_final, free_logged = beta_after_training(0.0)
    # 16 Adam steps of about 3e-4 each on log beta: 0.5 -> ~0.4976
    assert free_final < 0.5 * (1 - 2e-3) and np.ravel(free_logged)[-1] < 0.5 * (1 - 1e-3)
    floored_final, floored_logged = beta_after_training(0.5)
    assert floored_final == pytest.approx(0.5, rel=1e-6)
    assert np.all(floored_logged >= 0.5 * (1 - 1e-6)), floored_logged


def test_negative_floor_is_refused():
    with pytest.raises(ValueError, match="kl-min"):
        REPPOConfig(kl_min=-0.1).validate()


def alpha_after_training(algo: str, alpha_max: float):
    """The temperature after 16 SGD steps with an unreachable entropy target (alpha climbs)."""
    config = resolve(algo, "gymnax/Pendulum-v1", None).replace(
        total_env_steps=2 * 512, num_envs=16, num_steps=32, num_evals=1, eval_envs=2)
    config = config.replace(reppo=dataclasses.replace(
        config.reppo, num_minibatches=4, num_epochs=2, ent_start=0.02, alpha_max=alpha_max,
        **({} if algo == "amdp" else {"entropy_target_mult": 50.0})))
    if algo == "amdp":
        config = config.replace(adjoint=dataclasses.replace(config.adjoint, entropy_target_mult=50.0))
    state, metrics = jax.jit(make_train(config))(seed_keys(0, 1)[0])
    return float(np.exp(state.algo.log_alpha)), np.ravel(np.asarray(metrics["dual/alpha"]))


@pytest.mark.parametrize("algo", ["reppo", "amdp"])
def test_temperature_ceiling_holds_alpha_at_every_step(algo):
    """alpha starts at 0.02 and climbs (Adam steps of ~3e-4 on log alpha: ~0.0201 after 16 steps);
    a ceiling just above the start lets it climb, then holds it there exactly."""
    ceiling = 0.02 * (1 + 2e-3)
    final, logged = alpha_after_training(algo, ceiling)
    assert final == pytest.approx(ceiling, rel=1e-6)  # it would have gone higher: the ceiling binds
    assert np.all(np.diff(logged) >= -1e-9) and logged[0] < ceiling * (1 - 1e-4)  # it climbed to it
    assert np.all(logged <= ceiling * (1 + 1e-6)), logged


def test_temperature_ceiling_is_checked():
    with pytest.raises(ValueError, match="alpha-max"):
        REPPOConfig(alpha_max=-1.0).validate()
    with pytest.raises(ValueError, match="below the initial temperature"):
        REPPOConfig(alpha_max=0.001, ent_start=0.01).validate()
