"""REPPO, TruDi and AMDP learn gymnax Pendulum-v1 within a fixed CPU budget.

A random policy scores about -1200 per episode and never better than about -900 on
average over 32 episodes; a policy that swings the pendulum up and holds it scores
better than -400. Each run uses the algorithm's CPU preset for gymnax (50k env steps,
well under a minute of training on 2 cores) and must reach -400 at one of its
evaluations after the first (the curve is noisy at this budget: 32 episodes per
evaluation).
"""
import pytest

from diffrl.core.trainer import Trainer
from diffrl.presets import resolve


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["reppo", "trudi", "amdp"])
def test_swings_up_pendulum(tmp_path, algo):
    evals = []
    config = resolve(algo, "gymnax/Pendulum-v1", None).replace(
        out=str(tmp_path), progress=False, tensorboard=False, eval_envs=32, num_evals=4)
    Trainer(config, progress_fn=lambda row: evals.append(row["eval/episode_return"])).run()
    assert len(evals) == 4
    assert max(evals[1:]) > -400, evals


@pytest.mark.slow
def test_reppo_balances_playground_cartpole(tmp_path):
    """REPPO's CPU preset learns Playground CartpoleBalance within 287k env steps.

    Doing nothing scores about 630 (the pole starts near upright and falls slowly); the
    learned deterministic policy reached 780 at 160k, 675 at 200k and 994-999 from 240k steps
    when the preset was tuned (benchmarks/results/reppo_cartpole_balance). 850 at one of the
    evaluations up to 287k steps leaves room for float differences between machines and cannot be reached by
    the zero or the initial policy.
    """
    evals = []
    config = resolve("reppo", "playground/CartpoleBalance", None).replace(
        out=str(tmp_path), progress=False, tensorboard=False, total_env_steps=286_720, num_evals=7,
        eval_envs=16)
    Trainer(config, progress_fn=lambda row: evals.append(row["eval/episode_return"])).run()
    assert max(evals) > 850, evals
