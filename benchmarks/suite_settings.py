"""What the benchmark suite runs: algorithms, tasks, seeds, budget, presets (quick and paper scale).

``QUICK`` fits in about 20 minutes on 2 CPU cores; ``PAPER`` is the REPPO paper's
DM Control protocol (Voelcker et al. 2025, "Relative Entropy Pathwise Policy
Optimization": 1024 parallel envs, 50M env steps, the 23 MuJoCo Playground DM Control
tasks of its ``slurm_dmc.sh``) for a GPU.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# The 23 Playground DM Control tasks of the REPPO paper (arXiv 2507.11019, github.com/cvoelcker/reppo).
PAPER_DMC_TASKS: tuple[str, ...] = tuple(f"playground/{t}" for t in (
    "AcrobotSwingup", "AcrobotSwingupSparse", "BallInCup", "CartpoleBalance", "CartpoleBalanceSparse",
    "CartpoleSwingup", "CartpoleSwingupSparse", "CheetahRun", "FingerSpin", "FingerTurnEasy",
    "FingerTurnHard", "FishSwim", "HopperHop", "HopperStand", "PendulumSwingup", "ReacherEasy",
    "ReacherHard", "WalkerRun", "WalkerWalk", "WalkerStand", "HumanoidStand", "HumanoidWalk",
    "HumanoidRun",
))

ALGOS: tuple[str, ...] = ("ppo", "reppo", "trudi", "amdp")
"""The default algorithms; the baselines run with --algos (e.g. ``--algos ppo,spo,reppo,dime,trudi``)."""


@dataclass(frozen=True)
class SuiteSettings:
    algos: tuple[str, ...]
    """Algorithms (names of diffrl.algos.ALGORITHMS)."""
    tasks: tuple[str, ...]
    """Environment names (``suite/Task``)."""
    num_seeds: int
    """Seeds per (algo, task), trained together in one program (vmapped)."""
    total_env_steps: int
    """Env steps per seed: the same budget for every algorithm."""
    num_evals: int
    """Evaluations over a run (plus one before training): the points of the learning curves."""
    eval_envs: int
    """Episodes per evaluation and seed."""
    presets: dict[str, str] = field(default_factory=dict)
    """Preset per algorithm; an algorithm not listed uses its default preset for the env family."""
    num_envs: int | None = None
    """Parallel envs per seed for every algorithm; None keeps each preset's."""
    seed: int = 0
    """Base seed: seed i of a program uses fold_in(PRNGKey(seed), i)."""

    def replace(self, **changes) -> "SuiteSettings":
        return dataclasses.replace(self, **changes)


# Quick mode. 98,304 env steps per seed = 12 PPO iterations of 256 x 32 = 96 REPPO/TruDi/AMDP
# iterations of 32 x 32 (their CPU presets), so every algorithm trains exactly the same number
# of steps, in 6 chunks (6 evaluations after the one at step 0). Measured on 2 shared cores
# (load average 5-10), 2 vmapped seeds, compilation included: PPO about 160 s per task, REPPO
# 270 s, AMDP 300 s, TruDi 900 s (8-step chain, 128 SGD steps per 1024 transitions), i.e.
# about 25 min per task under that load; on idle cores roughly a third of that.
QUICK = SuiteSettings(
    algos=ALGOS,
    tasks=("playground/CartpoleBalance", "playground/CartpoleSwingup", "playground/PendulumSwingup"),
    num_seeds=2,
    total_env_steps=98_304,
    num_evals=6,
    eval_envs=16,
    presets={"ppo": "ppo-dmc-cpu", "reppo": "reppo-dmc-cpu", "trudi": "trudi-dmc-cpu", "amdp": "amdp-dmc-cpu",
             "spo": "spo-dmc-cpu", "dime": "dime-dmc-cpu", "fpo": "fpo-dmc-cpu", "dppo": "dppo-dmc-cpu"},
)

# Paper scale (GPU): the REPPO paper's small-data setting for REPPO and the diffusion
# variants built on it, Playground's tuned PPO, all at 1024 envs and 50M steps.
PAPER = SuiteSettings(
    algos=ALGOS,
    tasks=PAPER_DMC_TASKS,
    num_seeds=5,
    total_env_steps=50_000_000,
    num_evals=20,
    eval_envs=32,
    presets={"ppo": "ppo-dmc", "reppo": "reppo-dmc-small", "trudi": "trudi-dmc-small", "amdp": "amdp-dmc-small",
             "spo": "spo-dmc", "dime": "dime-dmc-small", "fpo": "fpo-dmc", "dppo": "dppo-dmc"},
    num_envs=1024,
)


def score_range(task: str) -> tuple[float, float] | None:
    """(low, high) that normalises a task's return to [0, 1] for aggregation, if known.

    DM Control rewards lie in [0, 1] per step over 1000-step episodes, so returns lie in
    [0, 1000] (Tassa et al. 2018, "DeepMind Control Suite", Sec. 2).
    """
    from diffrl.envs.playground import DMC_ENVS  # the Playground DM Control Suite tasks

    if task.startswith("playground/") and task.split("/", 1)[1] in DMC_ENVS:
        return (0.0, 1000.0)
    return None
