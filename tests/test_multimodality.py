"""AMDP keeps both optima of toy/BimodalBandit where REPPO's Gaussian cannot.

The bandit pays exp(-(a -+ 0.5)^2 / 0.02) with two equal peaks; its presets fix
alpha = 0.1, so the max-entropy optimum exp(Q / alpha) puts half its mass on each
peak. ``eval/mode_reached`` is the fraction of episodes whose action lands within 0.2 of a
peak and ``eval/behaviour_entropy`` the normalised entropy of which peak they took
(core/evaluate.py). A deterministic Gaussian policy (REPPO's "mean") is one action for
every episode: at best one peak (entropy 0), at worst the valley between them (what it
learns here: the mean of a hedging Gaussian). A diffusion policy's deterministic
probability-flow ODE maps different initial noise to different actions, so it can take
both peaks. (TruDi is not asserted here: at this budget its actions only spread from the
saturated prior to about uniform on [-1, 1], whose mode_reached is 0.4, see
benchmarks/results/multimodality/; its objective's slow convergence toward exp(Q / alpha) is
checked in test_trudi_fixed_point.py.)
"""
import json

import pytest

from diffrl.core.trainer import Trainer
from diffrl.presets import resolve


def _train(tmp_path, algo, samplers):
    config = resolve(algo, "toy/BimodalBandit", None).replace(
        out=str(tmp_path / algo), progress=False, tensorboard=False, total_env_steps=30_720,
        num_evals=3, eval_samplers=samplers)
    Trainer(config).run()
    lines = (tmp_path / algo / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]  # the evaluation before training, then one per chunk


@pytest.mark.slow
def test_amdp_converges_to_both_peaks(tmp_path):
    # AMDP's erf squash maps the reference end point to Uniform(-1, 1), so ~40 % of the initial
    # actions already land near a peak; reciprocal adjoint matching then regresses the drift
    # toward the exp(Q / alpha) target, whose mass within 0.2 of the peaks is ~1.0. Measured
    # (ODE sampler, 128 episodes): mode_reached 0.39 -> 0.98 and entropy 1.00 after 30k steps.
    rows = _train(tmp_path, "amdp", ("sde", "ode"))
    first, last = rows[0], rows[-1]
    assert last["eval/ode/mode_reached"] > 0.8 > first["eval/ode/mode_reached"] + 0.2, (first, last)
    assert last["eval/ode/behaviour_entropy"] > 0.9, last
    assert last["eval/mode_reached"] > 0.7 and last["eval/behaviour_entropy"] > 0.9, last  # SDE

    reppo = _train(tmp_path, "reppo", ("mean", "sample"))[-1]
    # REPPO's deterministic action is one action for every episode: entropy 0 whatever was
    # learned, and here it is the valley (the Gaussian hedges, its mean between the peaks;
    # measured mode_reached 0). The first configured sampler ("mean") has no prefix.
    assert reppo["eval/behaviour_entropy"] * reppo["eval/mode_reached"] < 0.05, reppo
    assert last["eval/ode/behaviour_entropy"] * last["eval/ode/mode_reached"] > 0.7, last
