"""TruDi and AMDP keep both optima of toy/BimodalBandit where REPPO's Gaussian cannot.

The bandit pays exp(-(a -+ 0.5)^2 / 0.02) with two equal peaks; its presets fix
alpha = 0.1, so the max-entropy optimum exp(Q / alpha) puts half its mass on each
peak. ``eval/mode_reached`` is the fraction of episodes whose action lands within 0.2 of a
peak and ``eval/behaviour_entropy`` the normalised entropy of which peak they took
(core/evaluate.py). A deterministic Gaussian policy (REPPO's "mean") is one action for
every episode: at best one peak (entropy 0), at worst the valley between them (what it
learns here: the mean of a hedging Gaussian); its stochastic policy ("sample") is one wide
bump over both peaks, so most of its episodes land in neither. A diffusion policy's
deterministic samplers (AMDP's probability-flow ODE, TruDi's reversal-ode) map different
initial noise to different actions, so they can take both peaks, and its SDE can put nearly
all its mass on them.

Both diffusion presets squash with erf(k x), k = 1 / (sqrt(2) sigma): the reference end
point (AMDP) or the DIME prior (TruDi) then maps to Uniform(-1, 1), so ~40 % of the initial
actions already land near a peak. (TruDi's reference tanh squash saturates its N(0, 2.5^2)
prior at +-1; with it TruDi only reaches about uniform actions at this budget, see
presets.py and test_trudi_fixed_point.py.)
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


@pytest.fixture(scope="module")
def reppo_last(tmp_path_factory):
    """REPPO's last evaluation, deterministic ("mean", no prefix) and stochastic ("sample")."""
    return _train(tmp_path_factory.mktemp("bandit"), "reppo", ("mean", "sample"))[-1]


def _assert_reppo_hedges(reppo):
    # The bandit has one state, so REPPO's deterministic action is one action for every episode
    # (its behaviour entropy is 0 by construction and says nothing). Where it lies does: a
    # Gaussian that hedges puts its mean in the valley between the peaks and reaches neither
    # (measured mode_reached 0); one that committed to a peak would reach it every time (1).
    assert reppo["eval/mode_reached"] < 0.5, reppo
    # Its stochastic policy is one wide bump over both peaks: episodes take both (measured
    # entropy 0.91; a Gaussian on one peak: 0) but most land in neither (measured mode_reached
    # 0.45, return 0.31; the diffusion policies: ~1).
    assert reppo["eval/sample/behaviour_entropy"] > 0.5, reppo
    assert reppo["eval/sample/mode_reached"] < 0.7, reppo


@pytest.mark.slow
def test_amdp_converges_to_both_peaks(tmp_path, reppo_last):
    # Reciprocal adjoint matching regresses the drift toward the exp(Q / alpha) target, whose
    # mass within 0.2 of the peaks is ~1.0. Measured (ODE sampler, 128 episodes):
    # mode_reached 0.39 -> 0.98 and entropy 1.00 after 30k steps.
    rows = _train(tmp_path, "amdp", ("sde", "ode"))
    first, last = rows[0], rows[-1]
    assert last["eval/ode/mode_reached"] > 0.8 > first["eval/ode/mode_reached"] + 0.2, (first, last)
    assert last["eval/ode/behaviour_entropy"] > 0.9, last
    assert last["eval/mode_reached"] > 0.7 and last["eval/behaviour_entropy"] > 0.9, last  # SDE
    _assert_reppo_hedges(reppo_last)
    assert last["eval/ode/behaviour_entropy"] * last["eval/ode/mode_reached"] > 0.7, last


@pytest.mark.slow
def test_trudi_converges_to_both_peaks(tmp_path, reppo_last):
    # TruDi's pathwise max-entropy actor loss through the DIME chain, inside the
    # whole-trajectory trust region. Measured (128 episodes) after 30k steps: SDE
    # mode_reached 0.44 -> 1.00 with entropy 1.00; reversal-ode (measured under its old name
    # "ode") 0.41 -> 0.95 with entropy 1.00.
    rows = _train(tmp_path, "trudi", ("sde", "reversal-ode"))
    first, last = rows[0], rows[-1]
    assert last["eval/mode_reached"] > 0.8 > first["eval/mode_reached"] + 0.2, (first, last)  # SDE
    assert last["eval/behaviour_entropy"] > 0.9, last
    assert last["eval/reversal-ode/mode_reached"] > 0.8, last
    assert last["eval/reversal-ode/behaviour_entropy"] > 0.9, last
    _assert_reppo_hedges(reppo_last)
    # Both of TruDi's samplers take both peaks far more often than either REPPO sampler.
    assert last["eval/mode_reached"] > reppo_last["eval/sample/mode_reached"] + 0.2, (last, reppo_last)
