"""The off-policy family (sac, dime-off, amdp-off) swings up gymnax Pendulum-v1, 4 seeds each.

Each test trains 4 seeds in ONE vmapped program (tests/multiseed.py) with the algorithm's default
preset for the task (``*-gymnax``: 16 envs x 4 steps, UTD 0.5, batch 128, two 128-wide categorical
critics, the actor every 2nd critic step for SAC and DIME and every step for AMDP), at the budgets of STEPS, and asserts on the median final evaluation and on the number of seeds that did not learn.
Pendulum-v1: uniformly random actions score -1238; a policy that swings the pendulum up and holds
it scores about -120 to -250 from random starts (rewards are <= 0).
"""
import numpy as np
import pytest

from multiseed import train_seeds

SEEDS = 4
# Budgets from the 5-seed runs of the presets (benchmarks/results/offpolicy_learning/pendulum and, for
# AMDP with its preset's control bound, pendulum_amdp_control_bound_4; median return at 0, 4k, 8k, 12k,
# 16k, 20k steps): SAC -1259 -1059 -158 -140 -132 -137, AMDP -1247 -1156 -176 -135 -135 -137, DIME -1222
# -1140 -708 -176 -141 -139. SAC and AMDP have swung up by 8k steps, DIME by 12k (every seed), so they
# are tested at 12k, 16k and 16k: at least 4k steps past the swing-up, which a machine whose rounding
# delays it by a few thousand steps still clears.
STEPS = {"sac": 12_288, "dime-off": 16_384, "amdp-off": 16_384}
# Measured final evaluations (32 episodes per seed) of seeds 0-3: this test under the default XLA CPU
# settings and under --xla_cpu_enable_fast_math=true (the other rounding stands in for another x86
# machine), since SAC's and DIME's actors step every 2nd critic step (before: every 3rd); then seeds 0-4
# of the 5-seed run at the test's budget (the same presets, other evaluation draws).
MEASURED = {
    "sac": "-154 -168 -147 -184; fast math: -154 -168 -148 -184; 5 seeds at 12k: -139 -134 -178 -166 -140; "
           "one thread (CI since, tests/multiseed.py): -154 -168 -143 -184",
    "dime-off": "-162 -175 -152 -185; fast math: -159 -174 -152 -190; 5 seeds at 16k: -141 -147 -142 -127 -133; "
                "since the control net's split first layer (nets.mlp.Dense; other rounding): -158 -175 -152 -186; "
                "fast math: -167 -175 -153 -186; with a scalar time embedded as one row (ONNX export): -167 -175 -152 -186; "
                "one thread: -163 -174 -152 -194",
    # with the preset's control bound (before it: -152 -163 -149 -187; fast math: -152 -163 -150 -182)
    "amdp-off": "-151 -162 -148 -176; fast math: -151 -161 -146 -176; 5 seeds at 16k: -135 -140 -138 -119 -125; "
                "split first layer: -151 -162 -146 -177 (the same with the scalar time as one row); fast math: -151 -162 -147 -176; "
                "one thread: the same as two",
}
# -400 on the median: 838 above the random policy, 231-244 below the measured 4-seed medians (-156 to -169);
# every measurement (13 for SAC, 25 for DIME and AMDP) is above -200, so failing needs 2 of 4 seeds to lose
# the swing-up, which no measured seed did at these budgets.
MEDIAN_THRESHOLD = {"sac": -400.0, "dime-off": -400.0, "amdp-off": -400.0}
NOT_LEARNED = -900.0  # a seed still this close to the random policy (-1238) has not swung up
MAX_NOT_LEARNED = 1


@pytest.mark.slow
# measured seconds, each pytest-xdist worker on its own core (tests/conftest.py starts the heavy tests first)
@pytest.mark.parametrize("algo", [pytest.param("sac", marks=pytest.mark.heavy(128)),
                                  pytest.param("dime-off", marks=pytest.mark.heavy(204)),
                                  pytest.param("amdp-off", marks=pytest.mark.heavy(191))])
def test_swings_up_pendulum_off_policy(tmp_path, algo):
    """Median final return over 4 seeds above MEDIAN_THRESHOLD[algo]; at most MAX_NOT_LEARNED seeds
    below NOT_LEARNED."""
    curves = train_seeds(tmp_path, algo, "gymnax/Pendulum-v1", SEEDS, total_env_steps=STEPS[algo], num_evals=1,
                         eval_envs=32)
    final = curves.final()
    assert curves.median_final() > MEDIAN_THRESHOLD[algo], final
    assert np.sum(final < NOT_LEARNED) <= MAX_NOT_LEARNED, final
