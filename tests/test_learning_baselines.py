"""The baselines the papers compare against learn gymnax Pendulum-v1: SPO, FPO, FPO++, DPPO and on-policy DIME.

Long tier (``DIFFRL_LONG_TESTS=1``): 8 seeds in one vmapped program each, with the algorithm's default
preset (tests/multiseed.py); asserts on the median final return and on how many seeds collapsed. (They
ran in CI with 4 seeds until 2026-12-07, when the tier passed 30 minutes; seed i is the same run at 4
or 8 seeds, ``fold_in(PRNGKey(seed), i)``, so MEASURED_4_SEEDS are this test's first four seeds.)
Random actions score -1238; swinging up and holding scores about -120 to -250 from random starts. The measured seeds are
quoted per test (default XLA CPU settings; ``DIFFRL_LEARNING_RECORD`` writes them).
"""
import numpy as np
import pytest

from multiseed import long_only, train_seeds

SEEDS = 8
# env steps per seed: SPO as the PPO test (PPO's gymnax preset, tests/test_learning_ppo.py); FPO the
# same (FPO as published loses its swing-up on some seeds past 200k: MEASURED_SINCE_FAITHFUL); FPO++
# twice that (it swings up later);
# DIME at its preset's budget, as TruDi's test (tests/test_learning_maxent.py).
BUDGET = {"spo": 200_000, "fpo": 200_000, "fpo++": 400_000, "dppo": 200_000, "dime": 49_152}
# Measured final returns (32 episodes per seed), this test's settings. On the first machine, before the
# learning runs moved to one core, 8 seeds under the default XLA CPU settings and under
# --xla_cpu_enable_fast_math=true (other rounding, standing in for another machine):
MEASURED = {
    "spo": "-126 -159 -177 -153 -169 -175 -161 -146 (median -160); fast math: -125 -164 -182 -153 -169 -270 -162 -146 (-163)",
    "fpo": ("-137 -177 -158 -147 -144 -176 -167 -146 (median -152; zero-noise sampler); "
            "fast math: -141 -160 -159 -144 -144 -172 -166 -137 (-151)"),
    "dppo": ("-163 -182 -290 -178 -172 -184 -216 -185 (median -183; sde sampler); "
             "fast math: -159 -179 -330 -169 -165 -183 -223 -176 (-178)"),
    "dime": ("-171 -153 -155 -171 -139 -175 -181 -142 (median -163; sde sampler); "
             "fast math: -175 -153 -165 -165 -130 -155 -180 -143 (-160)"),
}
# On a second machine (AMD EPYC, Zen 4), the CI test's 4 seeds on one core, under the default settings,
# fast math, and --xla_cpu_max_isa=AVX2 (a third rounding):
MEASURED_4_SEEDS = {
    "spo": "-127 -162 -180 -154 (median -158); fast math: -126 -161 -181 -154 (-157); AVX2: -129 -158 -181 -153 (-156)",
    "fpo": "-138 -350 -160 -141 (-151); fast math: -143 -163 -164 -142 (-153); AVX2: -142 -549 -155 -156 (-155)",
    "dppo": "-159 -188 -264 -173 (-180); fast math: -173 -196 -360 -173 (-185); AVX2: -164 -178 -338 -173 (-176)",
    "dime": "-237 -151 -170 -157 (-163); fast math: -176 -154 -157 -194 (-167); AVX2: -176 -154 -180 -171 (-174)",
}
# Since fpo is FPO as published (the draws' averaged ratio, FPO's (1 - t)^2 loss weight, the velocity
# output times 0.25; before: FPO++'s per-draw ratios, unweighted) and fpo++ FPO++ (per-draw ratios
# clamped to [-3, 3], ASPO), measured here on one core shared with other jobs:
# fpo at 400k steps (the budget before) swung up by 197k on 4 of 4 seeds (-335 -168 -145 -180) and 2 of
# 4 had lost it by 393k (-972 -162 -217 -679), so it is tested at 200k, where every seed has swung up.
# fpo++ (its presets) swings up later: -915 -992 -934 -981 at 98k, -408 -678 -191 -826 at 197k (median
# -543), so it is tested at 400k. dime since its action KL is estimated without bias at K = 8 (before: the
# plug-in at K = 4, about 3x the KL of a mean shift): -181 -151 -360 -150 (median -166).
MEASURED_SINCE_FAITHFUL = {"fpo": "-347 -160 -156 -156 (median -158)",
                           "fpo++": "-131 -155 -163 -155 (median -155; at 197k in the same run -418 -674 -171 -821)",
                           "dime": "-181 -151 -360 -150 (median -166)"}
# (median threshold, collapse line): SPO and FPO -400 is 838 above random and 240-250 below the
# measured medians; -800 (a seed that lost the swing-up) is 620 below their worst seed on the first machine.
# DPPO: the same thresholds, 217 below its median and 440 below its worst seed (-360).
# DIME: TruDi's thresholds (tests/test_learning_maxent.py), 137 below its median, 463 below its worst (-237).
# At most one seed may end below the collapse line: FPO's seed 1 is still swinging up at its budget on
# the second machine (-350, -163, -549 under the three roundings, 251 above the line at worst), and one
# seed in transit should not decide the verdict; losing the median needs half the seeds.
THRESHOLDS = {"spo": (-400.0, -800.0), "fpo": (-400.0, -800.0), "fpo++": (-400.0, -800.0), "dppo": (-400.0, -800.0),
              "dime": (-300.0, -700.0)}
MAX_COLLAPSED = 1
# measured seconds of one core at 4 seeds (the second machine, the slowest of its three roundings; fpo
# at its 200k budget: half of fpo's 186 s at 400k, fpo++ at 400k: fpo's 186 s; not re-measured on a free
# core: here, sharing one core, fpo took 4.5 and fpo++ 11 minutes of wall-clock)
HEAVY = {"spo": 38, "fpo": 93, "fpo++": 186, "dppo": 92, "dime": 163}


@pytest.mark.slow
@pytest.mark.timeout(2400)
@long_only("about 20 min of one core for the five at 8 seeds; CI learns with the papers' own methods and their "
           "backbone (PPO, REPPO, TruDi and AMDP on CartpoleBalance, off-policy AMDP on Pendulum-v1)")
# tests/conftest.py starts the heavy tests first
@pytest.mark.parametrize("algo", [pytest.param("spo", marks=pytest.mark.heavy(HEAVY["spo"])),
                                  pytest.param("fpo", marks=pytest.mark.heavy(HEAVY["fpo"])),
                                  pytest.param("fpo++", marks=pytest.mark.heavy(HEAVY["fpo++"])),
                                  pytest.param("dppo", marks=pytest.mark.heavy(HEAVY["dppo"])),
                                  pytest.param("dime", marks=pytest.mark.heavy(HEAVY["dime"]))])
def test_baseline_swings_up_pendulum(tmp_path, algo):
    curves = train_seeds(tmp_path, algo, "gymnax/Pendulum-v1", SEEDS, total_env_steps=BUDGET[algo],
                         num_evals=2 if algo != "dime" else 4, eval_envs=32)
    final = curves.final()
    median_threshold, collapsed = THRESHOLDS[algo]
    assert curves.median_final() > median_threshold, final
    assert np.sum(final < collapsed) <= MAX_COLLAPSED, final
