"""The off-policy family (sac, dime-off, amdp-off) swings up gymnax Pendulum-v1, 4 seeds each
(CI: SAC and AMDP; DIME, 330 s, in the long tier).

Each test trains 4 seeds in ONE vmapped program (tests/multiseed.py) with the algorithm's default
preset for the task (``*-gymnax``: 16 envs x 4 steps, UTD 0.5, batch 128, two 128-wide categorical
critics), at the budgets of STEPS, and asserts on the median final evaluation and on the number of seeds that did not learn.
Pendulum-v1: uniformly random actions score -1238; a policy that swings the pendulum up and holds
it scores about -120 to -250 from random starts (rewards are <= 0).
"""
import numpy as np
import pytest

from multiseed import long_only, train_seeds

SEEDS = 4
# Budgets from the 5-seed runs of the presets (benchmarks/results/offpolicy_learning/pendulum; median
# return at 0, 4k, 8k, 12k, 16k, 20k steps): SAC -1259 -1142 -180 -141 -132 -134, AMDP -1247 -1170 -185
# -141 -135 -139, DIME -1222 -1196 -779 -584 -148 -141. SAC and AMDP have swung up by 8k steps, so
# they are tested at 12k and 16k; DIME only between 12k and 16k, so it keeps its preset's whole 20k:
# at 16k a machine whose rounding delays it by a few thousand steps would catch it mid-rise.
STEPS = {"sac": 12_288, "dime-off": 20_480, "amdp-off": 16_384}
# Measured final evaluations (32 episodes per seed) of seeds 0-3: this test under the default XLA CPU
# settings and under --xla_cpu_enable_fast_math=true (the other rounding stands in for another x86
# machine), then seeds 0-4 of the 5-seed runs at the presets' 20,480 steps (the same training; other
# evaluation draws). DIME's first two lines are at 16,384 steps (its budget before it became 20,480).
MEASURED = {
    "sac": "-159 -169 -150 -185; fast math: -160 -169 -150 -185; 5 seeds at 20k: -132 -188 -117 -165 -134",
    "dime-off": "16k: -171 -177 -157 -202; fast math 16k: -168 -178 -162 -205; 5 seeds at 20k: -141 -188 -129 -181 -140",
    "amdp-off": "-153 -167 -153 -187; fast math: -152 -168 -149 -186; 5 seeds at 20k: -135 -185 -138 -174 -139",
}
# -400 on the median: 838 above the random policy, 225-245 below the measured medians (-157 to -174);
# every one of the 13 measurements per algorithm is above -210, so failing needs 2 of 4 seeds to lose
# the swing-up, which no measured seed did.
MEDIAN_THRESHOLD = {"sac": -400.0, "dime-off": -400.0, "amdp-off": -400.0}
NOT_LEARNED = -900.0  # a seed still this close to the random policy (-1238) has not swung up
MAX_NOT_LEARNED = 1


@pytest.mark.slow
# measured seconds with the other core busy (tests/conftest.py starts the heavy tests first)
@pytest.mark.parametrize("algo", [pytest.param("sac", marks=pytest.mark.heavy(150)),
                                  # 330 s of one core in CI, which then ran 33 min (> the 30-min budget):
                                  # the long tier until a cheaper preset is measured (see docs)
                                  pytest.param("dime-off", marks=long_only(
                                      "DIME's reverse-KL update through the chain: 330 s for 4 seeds; CI keeps "
                                      "SAC and AMDP")),
                                  pytest.param("amdp-off", marks=pytest.mark.heavy(220))])
def test_swings_up_pendulum_off_policy(tmp_path, algo):
    """Median final return over 4 seeds above MEDIAN_THRESHOLD[algo]; at most MAX_NOT_LEARNED seeds
    below NOT_LEARNED."""
    curves = train_seeds(tmp_path, algo, "gymnax/Pendulum-v1", SEEDS, total_env_steps=STEPS[algo], num_evals=1,
                         eval_envs=32)
    final = curves.final()
    assert curves.median_final() > MEDIAN_THRESHOLD[algo], final
    assert np.sum(final < NOT_LEARNED) <= MAX_NOT_LEARNED, final
