"""PPO, REPPO, TruDi and AMDP learn Playground CartpoleBalance and gymnax Pendulum-v1, on every seed.

Each test trains several seeds in ONE vmapped program (tests/multiseed.py) with the algorithm's
default CPU preset (CI's CartpoleBalance test: the presets with narrower networks, CI_NETS),
and asserts on the median over seeds of the final evaluation and on the number of seeds that
collapsed. The thresholds come from the measured seed distributions,
quoted in each test with their margins to the random policy and to the measured median; they
were checked under two XLA CPU settings (default and ``--xla_cpu_enable_fast_math=true``, whose
different rounding stands in for another x86 machine) and, for the CI test, on a second machine
(an AMD EPYC with AVX-512, under the default settings and ``--xla_cpu_max_isa=AVX2`` or fast math),
where TruDi's and AMDP's former budgets proved too short (CI_STEPS).

Playground CartpoleBalance: uniformly random actions score 357 (256 episodes); the Gaussian
policies' initial mean action (about 0) scores 550-670, the diffusion policies' initial samples
280-390; balancing for the whole episode scores about 1000. gymnax Pendulum-v1: random actions
score -1238; the reward is at most 0, and a policy that swings the pendulum up and holds it
scores about -120 to -250 from random starts.
"""
import numpy as np
import pytest

# benchmarks/stability.py's worst-drop statistic, itself tested against hand-made curves
# (tests/test_stability_bench.py), so this test and the committed tables measure the same thing.
import stability
from multiseed import long_only, train_seeds

CARTPOLE_RANDOM_RETURN = 357.0  # uniform actions, 256 episodes (benchmarks/stability.py)
CARTPOLE_SEEDS = 4
# Reduced budgets (the presets train 1M-3M steps), each where the measured 8-seed run has (nearly)
# all seeds balancing: TruDi's critic step 1e-3 (presets.py) starts slowly (median 622 at 102k
# steps, 971 at 143k; with its entropy target -4 d, two 8-seed runs: 756 and 573 at 102k, 966 and
# 972 at 123k with 3 of 16 seeds still below 600, 983 and 980 at 143k with 2 of 16); AMDP under
# fast math lags the default by ~20k steps (median 454 at 102k).
CARTPOLE_STEPS = {"ppo": 737_280, "reppo": 122_880, "trudi": 143_360, "amdp": 143_360}
# Measured final evaluations (16 episodes per seed) at CARTPOLE_STEPS: the 8-seed runs of
# benchmarks/results/stability/cartpole_balance_after (PPO: its own 8-seed run), then this test's
# 4 seeds under the default XLA CPU settings and under --xla_cpu_enable_fast_math=true. Since then
# REPPO's and TruDi's presets carry a floor under the KL multiplier (presets.py), which acts once
# beta has come down to it (~100k steps); their 8-seed runs with it (stability/*_kl_min_0.1) at
# these budgets: REPPO 1000 1000 999 446 988 967 1000 999, TruDi 840 979 982 470 980 979 976 976.
# AMDP's preset carries a bound on its control (presets.py): its line below is measured with it
# (two 8-seed runs, stability/cartpole_balance_amdp_control_bound_4*, then this test's 4 seeds).
# The last entries of TruDi and AMDP are measured since their control net embeds the time and
# multiplies the observation once per step and state (nets.mlp.Dense) and TruDi's fresh-path KL
# evaluates the new control on all steps in one call (dis_chain.fresh_path_kl): the same functions,
# other rounding. "one thread": the test as CI runs it since, on one core (tests/multiseed.py),
# whose thread count changes the rounding as well.
CARTPOLE_MEASURED = {
    "ppo": ("966 811 693 999 975 995 998 991; 4 seeds: 914 997 968 738; fast math: 995 570 829 218; "
            "one thread: 885 666 979 999"),
    "reppo": ("997 394 1000 473 980 1000 999 999; 4 seeds: 1000 420 1000 996; fast math: 1000 829 1000 999; "
              "with the floor, 4 seeds: 1000 999 719 998; fast math: 998 986 1000 999; "
              "with the actor's value and KL terms sharing one network pass (the same function, other "
              "rounding), 4 seeds: 360 866 999 774; fast math: 1000 993 1000 202; one thread: 1000 999 1000 998"),
    "trudi": ("629 976 969 949 973 981 983 971; 4 seeds: 980 465 926 980; fast math: 978 978 980 981; "
              "with the floor, 4 seeds: 982 980 977 978; fast math: 978 976 980 980; "
              "with the entropy target -4 d (the preset since), 8 seeds: 986 985 980 981 488 991 835 987; "
              "8 others: 923 547 988 991 881 983 986 977; 4 seeds: 914 981 847 949; fast math: 959 845 918 981; "
              "split first layer and batched KL, 4 seeds: 987 988 976 983; fast math: 990 987 975 990; "
              "with a scalar time embedded as one row (ONNX export), 4 seeds: 399 952 986 945; fast math: 990 987 975 990; "
              "one thread: 977 984 956 649"),
    "amdp": ("994 969 649 996 994 995 996 990; 990 996 898 992 994 989 995 995; "
             "4 seeds: 994 969 637 996; fast math: 996 724 525 976; "
             "split first layer, 4 seeds: 995 465 402 993 (unchanged with the scalar time as one row); "
             "fast math: 994 621 473 995; 8 seeds (base seed "
             "100, stability/cartpole_balance_amdp_split_layer_143k): 995 996 990 388 995 981 926 995; "
             "one thread: 995 465 402 993 (identical to two)"),
}
# (AMDP's seeds 1 and 2 here plateau rather than lag: at 163,840 steps they were 450 and 424, fast
# math 431 and 760, so a larger budget would not make the test surer.)
# TruDi and AMDP: a threshold on the 4-seed median, above the random policy and their initial
# samples (280-390) by a clear margin, and low enough that the median of 4 seeds drawn from the
# pooled measurements (400,000 draws) falls below it in < 1 % of draws (TruDi > 600: 0.37 %;
# > 700 would fail 0.96 %, as 2 of its 16 measured seeds were still rising at 465 and 629; with
# the entropy target -4 d, 2 of its 24 measured seeds were below 600 (488, 547): 3 of 4 drawn
# seeds below 600, the only way to fail, happens in ~0.2 % of draws; over all 40 since: 0.16 %;
# AMDP > 600 failed 0.20 % of draws from its first 24 measurements, but 2.1 % from all 40 (the
# split first layer's rounding left 5 of its 16 newer seeds at 388-621), so its threshold is 500:
# 0.63 % of draws from the 40 (550: 1.1 %), still 143 above random and 110 above the best initial
# sample).
CARTPOLE_MEDIAN_THRESHOLD = {"trudi": 600.0, "amdp": 500.0}
# PPO and REPPO: their seeds are bimodal at every budget measured. Some balance (~1000); others
# are still near the zero-action level of their initial Gaussian (550-670) or have fallen back
# for a few evaluations (REPPO: a known open problem, benchmarks/results/stability/README.md;
# fast math at 184,320 steps gave 999 347 515 997). A median threshold above the initial level
# fails 3-13 % of resampled 4-seed draws, which on another machine would be a coin flip. These
# tests assert instead that a seed learned to balance: the best of 4 ends above the threshold,
# which no initial policy reaches (best initial seed 666) and which is missed by all 4 of 4
# resampled seeds in < 0.5 % of draws (PPO > 800: 0.4 %; REPPO > 950: 0.4 %, and 0.4 % again over
# its 24 measurements with the shared actor pass, 6 of them <= 950).
CARTPOLE_BEST_SEED_THRESHOLD = {"ppo": 800.0, "reppo": 950.0}
# Seeds allowed below the random policy's return (collapsed): PPO and REPPO collapse in 1-2 of
# 12-16 measurements, TruDi and AMDP in none.
CARTPOLE_MAX_COLLAPSED = {"ppo": 2, "reppo": 2, "trudi": 1, "amdp": 1}


def check_cartpole(final: np.ndarray, median_threshold: float | None, best_seed_threshold: float | None,
                   max_collapsed: int) -> None:
    """The CartpoleBalance verdict on (K,) final returns: the median (or, for algorithms whose seeds
    are bimodal, the best seed) above its threshold, at most ``max_collapsed`` below random."""
    if median_threshold is not None:
        assert np.median(final) > median_threshold, final
    else:
        assert final.max() > best_seed_threshold, final
    assert np.sum(final < CARTPOLE_RANDOM_RETURN) <= max_collapsed, final


@pytest.mark.slow
@pytest.mark.timeout(1500)
@long_only("4 seeds each with the presets' own networks: 8-9 min of one core per algorithm (TruDi 14); CI "
           "trains the same presets with narrower networks (test_learns_playground_cartpole_balance)")
@pytest.mark.parametrize("algo", ["ppo", "reppo", "trudi", "amdp"])
def test_learns_playground_cartpole_balance_with_the_preset(tmp_path, algo):
    """What `make train` runs (Playground CartpoleBalance, each algorithm's default CPU preset) at
    a reduced budget, 4 seeds in one program: TruDi's and AMDP's median final return clears
    CARTPOLE_MEDIAN_THRESHOLD, PPO's and REPPO's best seed CARTPOLE_BEST_SEED_THRESHOLD, and at
    most CARTPOLE_MAX_COLLAPSED seeds ended below the random policy.

    Margins: TruDi's 600 and AMDP's 500 are 243 and 143 above random and 381 and 493 below the
    measured medians (981 over TruDi's 40 seeds with its preset's entropy target -4 d; 993 over
    AMDP's 40); PPO's 800 and REPPO's 950 are 134 and 284 above the best initial seed.
    The 8-seed stability of REPPO, TruDi and AMDP over 245,760 steps is the long test below and
    benchmarks/results/stability.
    """
    curves = train_seeds(tmp_path, algo, "playground/CartpoleBalance", CARTPOLE_SEEDS,
                         total_env_steps=CARTPOLE_STEPS[algo], num_evals=1, eval_envs=16)
    check_cartpole(curves.final(), CARTPOLE_MEDIAN_THRESHOLD.get(algo), CARTPOLE_BEST_SEED_THRESHOLD.get(algo),
                   CARTPOLE_MAX_COLLAPSED[algo])


# The CI tier: each algorithm's CPU preset with NARROWER networks (CI_NETS). With the presets'
# 256-wide critics and 5 x 256 PPO value net these tests took 487-549 s of one core each (TruDi 847 s;
# 2,425 worker-seconds for the four, half the suite; the updates are compute-bound matrix products,
# docs/learning-evidence.md); 64-wide networks learn the task at the same budgets for a quarter to a
# sixth of the training time. Everything else (the algorithm, its losses, duals, samplers, the
# environment, the batch and the SGD schedule) is the preset's. TruDi keeps its 128 x 128 control net:
# its denoising chain at width 64 learned more slowly (8 seeds, 143k steps: median 910 against 983 for
# the preset; 1 seed below 600) and still took ~40 % of the preset's time; its critic at width 64
# (the other ~40 % of its update, `diffrl bench cost`: iteration 1128 -> 681 ms) learns as the
# preset does (CI_MEASURED). The presets' own networks are the long test above (TruDi: the same
# budget and threshold, benchmarks/results/stability/cartpole_balance_after and *_kl_min_0.1).
CI_NETS = {
    "ppo": {"ppo.value_hidden": (64, 64, 64, 64, 64)},
    "reppo": {"critic.hidden": 64, "gaussian.hidden": (64, 64)},
    "trudi": {"critic.hidden": 64},
    "amdp": {"critic.hidden": 64, "adjoint.hidden": (64, 64)},
}
# Measured final evaluations (16 episodes per seed), each on one core (one XLA thread, as CI), with
# CI_NETS: 8 seeds (benchmarks/stability.py --num-seeds 8, seeds 0-7, default XLA CPU settings) and 8
# others (--seed 100) under --xla_cpu_enable_fast_math=true, whose other rounding stands in for
# another x86 machine; then this test's 4 seeds.
CI_MEASURED = {
    "ppo": ("1000 467 671 848 561 991 991 1000; fast math: 999 1000 261 1000 1000 761 985 997 (at 860k: 997 995 261 "
            "1000 1000 1000 1000 693; it learns, then some seeds fall back, as with the preset); this test: "
            "694 1000 609 1000"),
    "reppo": ("998 1000 999 999 999 965 1000 919; fast math: 997 1000 994 1000 971 999 999 999 (at 143k two of "
              "these 16 had fallen, to 389 and 185: REPPO's late drops, benchmarks/results/stability); "
              "this test: 998 1000 999 999"),
    "trudi": ("985 965 973 921 956 968 938 852; fast math: 987 961 885 970 512 937 986 987 (the preset's 40 "
              "measured seeds: median 981, 4 below 600); this test: 982 988 981 485 (its seed 3 at 921 in the "
              "8-seed run, which evaluates 7 times: another draw of the same training)"),
    "amdp": ("994 994 968 984 995 994 990 996; fast math: 993 372 996 996 994 995 992 996 (the 372 one of the "
             "plateaus the preset's seeds show too); this test: 994 994 969 984"),
}
# A second machine (AMD EPYC, Zen 4, AVX-512; the numbers above were measured on an x86 machine whose
# runs this one reproduces closely only under --xla_cpu_max_isa=AVX2) failed TruDi's and AMDP's test
# at 143k steps: TruDi 324 871 436 470 (AVX2: 984 989 985 592), AMDP 982 281 341 994 (the same under
# AVX2). At 143k both are still in transit there: TruDi's 8 seeds of base seed 100 ended at 987 983
# 549 981 342 691 963 969 (AVX2: 977 586 568 489 945 805 956 508; 10 of its 24 seeds on that machine
# below 600), and AMDP's seeds dip and recover between 120k and 210k (a seed at 858 at 123k, 222 at
# 164k, 718 at 205k, 992 at 246k). So CI trains them longer (CI_STEPS), where every seed measured on
# that machine under two roundings had arrived:
# TruDi at 204,800 steps: this test's 4 seeds 978 990 990 988 (AVX2: 987 989 990 979),
# 8 seeds of base seed 100: 990 988 982 990 937 985 992 991 (AVX2: 989 971 991 990 978 990 990 930);
# AMDP at 245,760: this test's 4 seeds 993 992 861 992 (fast math: 973 994 994 968), base seed 100:
# 995 984 972 987 994 984 990 992 (fast math: 995 967 908 988 973 991 992 994).
# (benchmarks/results/stability/cartpole_balance_ci_nets_machines/, with the commands.)
CI_STEPS = {**CARTPOLE_STEPS, "trudi": 204_800, "amdp": 245_760}
CI_MEDIAN_THRESHOLD = {"trudi": CARTPOLE_MEDIAN_THRESHOLD["trudi"], "amdp": 600.0, "reppo": 850.0}
CI_BEST_SEED_THRESHOLD = {"ppo": 750.0}
CI_MAX_COLLAPSED = {"ppo": 2, "reppo": 1, "trudi": CARTPOLE_MAX_COLLAPSED["trudi"], "amdp": 1}


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("algo", [
    # measured seconds of each test, each pytest-xdist worker on its own core (tests/conftest.py starts them first);
    # TruDi's and AMDP's scaled to their longer CI_STEPS by the ratio measured on the second machine
    pytest.param("ppo", marks=pytest.mark.heavy(192)), pytest.param("reppo", marks=pytest.mark.heavy(165)),
    pytest.param("trudi", marks=pytest.mark.heavy(700)), pytest.param("amdp", marks=pytest.mark.heavy(300))])
def test_learns_playground_cartpole_balance(tmp_path, algo):
    """Playground CartpoleBalance, the task `make train` runs, 4 seeds in one program, each algorithm's
    default CPU preset with CI_NETS's narrower networks at CI_STEPS (the preset test's budgets, TruDi's
    and AMDP's longer: see CI_STEPS): the median final return above CI_MEDIAN_THRESHOLD (PPO: the best
    seed above CI_BEST_SEED_THRESHOLD, its seeds being bimodal), at most CI_MAX_COLLAPSED below random.

    Margins (from the measured seeds of CI_MEASURED and, for TruDi and AMDP, those above CI_STEPS,
    resampling 4 of them): AMDP's 600 is 243 above random, 213 above its best initial sample (387)
    and 390 below its median at 245,760 steps (990 over 24 seeds on the second machine under two
    roundings, none below 861: no draw of 4 falls below 600).
    REPPO's 850 is 136 above its best initial seed (714: its initial Gaussian mean action already
    scores 530-714) and 149 below its measured median (999); all 20 measured seeds ended above 900.
    PPO's best seed > 750 is 84 above the best initial seed (666, the 16 measured) and 393 above
    random; 6 of its 20 measured seeds ended at or below 750, so all 4 of 4 do in 0.8 % of draws.
    TruDi's 600 (the preset test's) is 243 above random, 210 above its best initial sample (390) and
    389 below its median at 204,800 steps (989 over 24 seeds on the second machine under two
    roundings, none below 930: no draw of 4 falls below 600). At the former 143k steps the first machine's 20
    seeds (CI_MEASURED) had 2 below 600, the second machine's 24 had 10: the median of 4 then failed
    there, which is why TruDi and AMDP train longer.
    """
    curves = train_seeds(tmp_path, algo, "playground/CartpoleBalance", CARTPOLE_SEEDS,
                         total_env_steps=CI_STEPS[algo], num_evals=1, eval_envs=16, **CI_NETS.get(algo, {}))
    check_cartpole(curves.final(), CI_MEDIAN_THRESHOLD.get(algo), CI_BEST_SEED_THRESHOLD.get(algo),
                   CI_MAX_COLLAPSED[algo])


# Measured final evaluations (32 episodes per seed) of the default presets, 8 seeds, 49,152 env
# steps, 4 evaluations (this test; the 24-evaluation runs of benchmarks/results/stability/pendulum_after
# differ in their evaluation keys only, with medians -155 / -179 / -169):
#   reppo (mean): -146 -147 -138 -123 -122 -151 -153 -128   median -142
#   trudi (sde):  -164 -164 -157 -184 -139 -150 -163 -143   median -160
#   amdp (sde):   -177 -253 -138 -140 -132 -140 -178 -152   median -146
# Before the fix one TruDi seed in a single-seed test ended at -1044, and 3-7 of 8 seeds of
# each algorithm fell by more than 0.2 of the random-to-maximum range in the last third.
PENDULUM_SEEDS = 8


@pytest.mark.slow
@long_only("8 seeds each, about 2 min of one core for REPPO and AMDP and 5 for TruDi; CI learns "
           "CartpoleBalance with each of them (test_learns_playground_cartpole_balance)")
@pytest.mark.parametrize("algo", ["reppo", "trudi", "amdp"])
def test_swings_up_pendulum(tmp_path, algo):
    """Median final return > -300 over 8 seeds, and no seed collapsed (< -700).

    -300 is 938 above the random policy and 140-160 below the measured medians; -700 is the
    random policy's return plus 0.43 of the random-to-maximum range (a seed there has lost the
    swing-up), 447 below the worst measured seed.
    """
    curves = train_seeds(tmp_path, algo, "gymnax/Pendulum-v1", PENDULUM_SEEDS, eval_envs=32, num_evals=4)
    final = curves.final()
    assert curves.median_final() > -300, final
    assert np.sum(final < -700) == 0, final


@pytest.mark.slow
@long_only("8 seeds x 245,760 env steps: 15-60 min of one core per algorithm (the committed runs are in "
           "benchmarks/results/stability)")
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("algo", [
    pytest.param("reppo", marks=pytest.mark.xfail(strict=False, reason=(
        "REPPO's late drops (benchmarks/results/stability/README.md): 8 of 24 seeds of its preset at this "
        "budget, and the official code at the same scale drops too (2 of 24 at 491,520 steps; 4 of 40 of "
        "the paper's own medium-data CartpoleBalance seeds); not strict: whether a seed falls at an "
        "evaluation differs between machines"))),
    "amdp", "trudi"])
def test_balances_playground_cartpole_stably(tmp_path, algo):
    """8 seeds, 245,760 env steps (benchmarks/results/stability/cartpole_balance): the median
    seed ends balanced and no seed falls more than 0.2 of the random-to-maximum range below its
    best-so-far at an evaluation in the last third of training. Measured with the presets of today:
    TruDi 0 of 16 seeds and AMDP 0 of 16 (two 8-seed runs each, that table); REPPO fails it."""
    curves = train_seeds(tmp_path, algo, "playground/CartpoleBalance", 8, total_env_steps=245_760,
                         num_evals=12, eval_envs=16)
    returns = curves.returns[next(iter(curves.returns))]
    per_seed = stability.seed_statistics(curves.env_steps, returns, CARTPOLE_RANDOM_RETURN, 1000.0,
                                         int(curves.env_steps[-1]))
    drops = np.array([s["worst_drop"] for s in per_seed])
    assert np.all(drops <= 0.2), (drops, returns)
    assert curves.median_final() > 900, curves.final()
