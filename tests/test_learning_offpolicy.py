"""The off-policy family (sac, dime-off, amdp-off) swings up gymnax Pendulum-v1, 4 seeds each (CI: amdp-off;
sac and dime-off, the baselines, in the long tier, ``DIFFRL_LONG_TESTS=1``).

Each test trains 4 seeds in ONE vmapped program (tests/multiseed.py) with the algorithm's default
preset for the task (``*-gymnax``: 16 envs x 4 steps, UTD 0.5, batch 128; DIME and AMDP on two categorical
CrossQ critics, SAC on SAC's two scalar target critics; the actor every 2nd critic step for DIME and every
step for SAC and AMDP) with its critics narrowed
from 2 x 128 to 2 x 64 units (CI_CRITIC), at the budgets of STEPS, and asserts on the median final
evaluation and on the number of seeds that did not learn.
Pendulum-v1: uniformly random actions score -1238; a policy that swings the pendulum up and holds
it scores about -120 to -250 from random starts (rewards are <= 0).
"""
import numpy as np
import pytest

from multiseed import long_only, train_seeds

SEEDS = 4
# Budgets from the 5-seed runs of the presets (benchmarks/results/offpolicy_learning/pendulum and, for
# AMDP with its preset's control bound, pendulum_amdp_control_bound_4; median return at 0, 4k, 8k, 12k,
# 16k, 20k steps): SAC -1259 -1059 -158 -140 -132 -137, AMDP -1247 -1156 -176 -135 -135 -137, DIME -1222
# -1140 -708 -176 -141 -139. SAC and AMDP have swung up by 8k steps, DIME by 12k (every seed), so they
# are tested at 12k, 16k and 16k: at least 4k steps past the swing-up, which a machine whose rounding
# delays it by a few thousand steps still clears.
STEPS = {"sac": 12_288, "dime-off": 16_384, "amdp-off": 16_384}
# With the presets' own 128-wide critics (the test before CI_CRITIC), measured final evaluations (32
# episodes per seed) of seeds 0-3: this test under the default XLA CPU
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
# CI trains the presets with 64-wide critics: the critic steps are most of these runs' arithmetic (UTD
# 0.5: 32 critic steps of batch 128 per 64 transitions), and at 64 units the 4-seed tests took SAC
# 134 -> 96 s, DIME 209 -> 145 s, AMDP 200 -> 158 s of one core, compile included (one seed's
# iteration, `diffrl bench cost`: SAC 90.6 -> 35.3 ms, AMDP 145.5 -> 65.5 ms; what is left of the
# tests is mostly compiling, ~30 s per program, and evaluating). Measured with them
# (benchmarks/results/offpolicy_learning/pendulum_ci_critic64_*, 8 seeds each, one core; seeds 0-7
# under the default XLA CPU settings, seeds 100-107 under fast math; final evaluation of 32
# episodes), then this test's 4 seeds:
CI_CRITIC = {"offpolicy.critic_hidden": (64, 64)}
# The numbers above were measured with SAC on DIME's CrossQ critic. Since sac is SAC as published (target
# critics Polyak-averaged at tau 0.005, the minimum of two, scalar; the actor at every critic step), this
# test's 4 seeds with CI_CRITIC: -298 -175 -152 -204 (median -190; one core shared with other jobs).
# dime-off since it learns its step dt from DIME's 0.1 (before: fixed 1/N): -162 -167 -152 -186 (median -165).
CI_MEASURED = {
    "sac": "-147 -135 -182 -167 -140 -149 -153 -157; fast math: -152 -175 -130 -155 -146 -170 -164 -151; "
           "this test: -158 -164 -149 -182",
    "dime-off": "-153 -138 -185 -167 -142 -150 -153 -167; fast math: -153 -181 -135 -166 -159 -194 -164 -157; "
                "this test: -170 -174 -149 -186",
    "amdp-off": "-136 -153 -181 -163 -129 -151 -146 -158; fast math: -154 -182 -131 -153 -144 -168 -162 -156; "
                "this test: -151 -182 -145 -182",
}
# -400 on the median: 838 above the random policy, 231-244 below the measured 4-seed medians (-156 to -169);
# every measurement (13 for SAC, 25 for DIME and AMDP with 128-wide critics; 20 each with CI_CRITIC) is above
# -200, so failing needs 2 of 4 seeds to lose the swing-up, which no measured seed did at these budgets.
# (SAC with CI_CRITIC swings up later than with the preset's critics, median -393 / -421 at 8k steps with
# 8 of 16 seeds mid-swing-up, so its 12k is 2-4k steps past the swing-up rather than 4k.)
MEDIAN_THRESHOLD = {"sac": -400.0, "dime-off": -400.0, "amdp-off": -400.0}
NOT_LEARNED = -900.0  # a seed still this close to the random policy (-1238) has not swung up
MAX_NOT_LEARNED = 1
BASELINE = long_only("the baselines' off-policy tests (about 4 min of one core): CI learns with off-policy AMDP, "
                     "the method of the AMDP paper")


@pytest.mark.slow
# measured seconds, each pytest-xdist worker on its own core (tests/conftest.py starts the heavy tests first)
@pytest.mark.parametrize("algo", [pytest.param("sac", marks=[pytest.mark.heavy(96), BASELINE]),
                                  pytest.param("dime-off", marks=[pytest.mark.heavy(145), BASELINE]),
                                  pytest.param("amdp-off", marks=pytest.mark.heavy(158))])
def test_swings_up_pendulum_off_policy(tmp_path, algo):
    """Median final return over 4 seeds above MEDIAN_THRESHOLD[algo]; at most MAX_NOT_LEARNED seeds
    below NOT_LEARNED."""
    curves = train_seeds(tmp_path, algo, "gymnax/Pendulum-v1", SEEDS, total_env_steps=STEPS[algo], num_evals=1,
                         eval_envs=32, **CI_CRITIC)
    final = curves.final()
    assert curves.median_final() > MEDIAN_THRESHOLD[algo], final
    assert np.sum(final < NOT_LEARNED) <= MAX_NOT_LEARNED, final
