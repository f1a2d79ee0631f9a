"""Multimodality beyond the 1-D bandit: more action dimensions, more optima, and a sequential task.

Per-seed final evaluations (``--num-seeds`` vmapped, 128 fresh episodes per seed and sampler)
are summarised by their median over seeds. ``mode_reached`` is the fraction of episodes that
reach an optimum, ``behaviour_entropy`` the normalised entropy of which one (core/evaluate.py);
their product ("covered") is 0 for a policy that collapsed onto one optimum or that hedges
between them, and 1 for one that reaches all optima equally often.

The committed measurements behind the thresholds are in
``benchmarks/results/multimodality/`` (README.md there, and ``tests_calibration.txt``).
"""

import jax
import numpy as np
import pytest

from diffrl.core.evaluate import make_evaluate
from diffrl.core.trainer import Trainer
from diffrl.config.presets import resolve
from multiseed import long_only

EPISODES = 128


def _train_and_evaluate(tmp_path, algo, env, samplers, num_seeds, **changes):
    """Train ``num_seeds`` seeds in one vmapped program; per-seed final metrics per sampler."""
    config = resolve(algo, env, None).replace(
        out=str(tmp_path / algo), progress=False, tensorboard=False, checkpoint_every=0, num_seeds=num_seeds,
        num_evals=1, eval_samplers=samplers, **changes)
    trainer = Trainer(config)
    trainer.run()
    evaluate = make_evaluate(config.replace(eval_envs=EPISODES), trainer.eval_env, trainer.algo)
    evaluate = jax.jit(jax.vmap(evaluate, in_axes=(0, 0, 0, 0, None)), static_argnums=4)
    state = trainer.state
    keys = jax.random.split(jax.random.PRNGKey(123), num_seeds)
    out = {}
    for sampler in samplers:
        m = evaluate(state.algo, state.obs_stats, state.critic_obs_stats, keys, sampler)
        reached = np.asarray(m["mode_reached"])
        entropy = np.where(reached > 0, np.asarray(m["behaviour_entropy"]), 0.0)
        out[sampler] = {"reached": reached, "entropy": entropy, "covered": reached * entropy,
                        "return": np.asarray(m["episode_return"])}
    return out


def _median(result, sampler, key):
    return float(np.median(result[sampler][key]))


@pytest.mark.slow
@long_only("about 2 min of one core; CI keeps the one-dimensional bandit (tests/test_multimodality.py), the "
           "5-seed runs are benchmarks/results/multimodality/grid")
def test_trudi_takes_all_four_corners_where_reppo_hedges(tmp_path):
    """toy/CornerBandit (2-D action, four equal peaks at (+-0.5, +-0.5)), presets *-bandit (alpha
    fixed at 0.1, so the max-entropy optimum puts ~99 % of its mass on the four peaks, a quarter
    each), 4 seeds, 22.5k env steps.

    Measured with this test's configuration (benchmarks/results/multimodality/tests_calibration.txt;
    the 5 seeds of benchmarks/results/multimodality/grid agree at 22.5k and 56k steps): TruDi's SDE
    reaches a peak in 0.68-0.73 of the episodes with entropy 0.94-1.00 (covered 0.66-0.73), its
    noise-free chain (noise-free) 0.88-0.92 with entropy 0.97-1.00; REPPO's deterministic
    action is one action for all episodes and sits in the valley between the peaks (reached 0 in
    every seed), its stochastic policy is one wide bump (reached 0.12-0.14, entropy 0.87-0.97).
    Uniform random actions reach a peak in 12.6 % of episodes (4 discs of radius 0.2 in a square
    of area 4), TruDi's initial policy in 12 %. Entropy 0.85 needs all four peaks (three equal
    ones give 0.79, two 0.5). The other thresholds sit about halfway between the measured
    medians and the random/initial level (or REPPO's).
    """
    steps = 22_528
    trudi = _train_and_evaluate(tmp_path, "trudi", "toy/CornerBandit", ("sde", "noise-free"), 4, total_env_steps=steps)
    reppo = _train_and_evaluate(tmp_path, "reppo", "toy/CornerBandit", ("mean", "sample"), 4, total_env_steps=steps)
    print({"trudi": trudi, "reppo": reppo})
    # TruDi: most episodes reach a peak, and the peaks are taken about equally often.
    assert _median(trudi, "sde", "reached") > 0.45, trudi
    assert _median(trudi, "sde", "entropy") > 0.85, trudi
    assert _median(trudi, "noise-free", "reached") > 0.6 and _median(trudi, "noise-free", "entropy") > 0.85, trudi
    # REPPO's Gaussian: its mean is one action (at most one peak: covered 0 by construction if it
    # reached any; here it is the valley), its samples land mostly between the peaks.
    assert _median(reppo, "mean", "covered") < 0.05, reppo
    assert _median(reppo, "sample", "reached") < 0.35, reppo
    # Both TruDi samplers cover the four peaks far better than either REPPO sampler.
    best_reppo = max(_median(reppo, s, "covered") for s in ("mean", "sample"))
    assert _median(trudi, "sde", "covered") > best_reppo + 0.3, (trudi, reppo)


# -- the sequential task -------------------------------------------------------------------------
MIRROR_OPTIMUM = 31.77  # benchmarks/multimodality.py: optimised open-loop return of toy/MirrorGoals


@pytest.fixture(scope="module")
def mirror_goals(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mirror")
    return {"trudi": _train_and_evaluate(tmp, "trudi", "toy/MirrorGoals", ("sde",), 4),
            "reppo": _train_and_evaluate(tmp, "reppo", "toy/MirrorGoals", ("sample",), 4)}


LONG = long_only("about 4 min of 2 cores (the committed runs are benchmarks/results/multimodality/grid)")


@pytest.mark.slow
@LONG
@pytest.mark.timeout(1200)
def test_trudi_reaches_a_mirror_goal(mirror_goals):
    """TruDi's trudi-toy preset (gamma 0.95, critic support [-10, 30]) learns toy/MirrorGoals in
    97k env steps. Measured (benchmarks/results/multimodality/grid, seeds 0-3 are this test's):
    SDE mode_reached 0.86, 0.05, 1.00, 1.00 (median 0.93), return 21.5, 12.9, 29.7, 29.3 (median
    25.4 of the optimum 31.8); uniform random actions return 1.3 and reach a goal in ~2 % of
    episodes; with the previous preset (gamma 0.99, support [-50, 50]) the median seed reached
    one in 9 %. A second failing seed would pull the median of 4 to ~0.45: the thresholds
    (0.5, half the optimum) allow for one, not two.
    """
    trudi = mirror_goals["trudi"]
    assert _median(trudi, "sde", "reached") > 0.5, trudi
    assert _median(trudi, "sde", "return") > 0.5 * MIRROR_OPTIMUM, trudi


@pytest.mark.slow
@LONG
@pytest.mark.timeout(1200)
@pytest.mark.xfail(strict=True, reason=(
    "known limitation (benchmarks/results/multimodality/README.md): on the sequential task every seed of "
    "TruDi commits to one goal (behaviour entropy 0 in 5 of 5 seeds, also for AMDP and on OctahedronGoals); "
    "strict, so that a change that makes it keep both goals shows up here"))
def test_trudi_keeps_both_mirror_goals(mirror_goals):
    """The bar of the TruDi paper for a diffusion policy on a symmetric task: behaviour entropy
    clearly above 0 at a return near the optimum, where the Gaussian REPPO has 0."""
    trudi, reppo = mirror_goals["trudi"], mirror_goals["reppo"]
    assert _median(trudi, "sde", "entropy") > 0.3 and _median(trudi, "sde", "reached") > 0.5, trudi
    assert _median(reppo, "sample", "entropy") < 0.1, reppo
