"""REPPO, TruDi and AMDP learn gymnax Pendulum-v1 within a fixed CPU budget.

A random policy scores about -1200 per episode and never better than about -900 on
average over 32 episodes; a policy that swings the pendulum up and holds it scores
better than -400. Each run uses the algorithm's CPU preset for gymnax (50k env steps,
well under a minute of training on 2 cores) and must reach -400 at one of its
evaluations after the first (the curve is noisy at this budget: 32 episodes per
evaluation).
"""
import os

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
@pytest.mark.skipif(os.environ.get("DIFFRL_LONG_TESTS") != "1",
                    reason="4-8 min of one core each; run with DIFFRL_LONG_TESTS=1 (kept out of the "
                           "20-minute CI suite; the committed runs are in benchmarks/results/reppo_cartpole_balance)")
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("algo", ["reppo", "amdp", "trudi"])
def test_balances_playground_cartpole(tmp_path, algo):
    """REPPO's, AMDP's and TruDi's CPU presets learn Playground CartpoleBalance within 246k env steps.

    Doing nothing scores about 630 (the pole starts near upright and falls slowly). When the
    presets were tuned (benchmarks/results/reppo_cartpole_balance) the deterministic policy of
    REPPO reached 780 at 160k and 994-999 from 240k env steps, AMDP's SDE sampler 839 at 184k
    and 997 from 215k, TruDi's 977 at 205k (its run takes about twice AMDP's time: the pathwise
    actor loss backpropagates through the 8-step chain). 850 at one of the evaluations leaves
    room for float differences between machines and is out of reach of the zero and the
    initial policies.
    """
    evals = []
    config = resolve(algo, "playground/CartpoleBalance", None).replace(
        out=str(tmp_path), progress=False, tensorboard=False, total_env_steps=245_760, num_evals=6,
        eval_envs=16)
    Trainer(config, progress_fn=lambda row: evals.append(row["eval/episode_return"])).run()
    assert max(evals) > 850, evals
