"""TruDi and AMDP keep both optima of toy/BimodalBandit where REPPO's Gaussian cannot.

The bandit pays exp(-(a -+ 0.5)^2 / 0.02) with two equal peaks; its presets fix
alpha = 0.1, so the max-entropy optimum exp(Q / alpha) puts half its mass on each
peak. ``eval/mode_reached`` is the fraction of episodes whose action lands within 0.2 of a
peak and ``eval/behaviour_entropy`` the normalised entropy of which peak they took
(core/evaluate.py). A deterministic Gaussian policy (REPPO's "mean") is one action for
every episode: at best one peak (entropy 0), at worst the valley between them (what it
learns here: the mean of a hedging Gaussian). TruDi's deterministic probability-flow
ODE maps different initial noise to different actions, so it can take both peaks, and
training must raise the fraction that lands on one.
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
def test_trudi_ode_takes_both_peaks_where_reppo_mean_cannot(tmp_path):
    trudi = _train(tmp_path, "trudi", ("sde", "ode"))
    first, last = trudi[0], trudi[-1]
    # Initially the ODE pushes the prior's noise to both saturated ends: ~20 % lands near a
    # peak (measured 0.20). After 30k steps: 0.36-0.43 (32-128 episodes per evaluation);
    # both peaks are taken about equally (entropy 0.95-1.0).
    assert last["eval/ode/mode_reached"] >= first["eval/ode/mode_reached"] + 0.1, (first, last)
    assert last["eval/ode/behaviour_entropy"] > 0.8, last
    assert last["eval/behaviour_entropy"] > 0.8, last  # the SDE sampler keeps both peaks too

    reppo = _train(tmp_path, "reppo", ("mean", "sample"))[-1]
    # One action for all episodes: entropy 0 whatever was learned, and here it is the
    # valley (the Gaussian hedges with its mean between the peaks).
    # (the first configured sampler, "mean", is reported without a sampler prefix)
    assert reppo["eval/behaviour_entropy"] * reppo["eval/mode_reached"] < 0.05, reppo
    assert last["eval/ode/behaviour_entropy"] * last["eval/ode/mode_reached"] > 0.25, last


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
