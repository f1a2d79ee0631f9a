"""The benchmark ledger's declared plan: matrices of cells (algorithm, task, preset, overrides,
env-step budget, seeds), in the order ``ledger.py run`` fills them.

A cell is one vmapped multi-seed program, sized to finish in about 45 minutes on one core
(``ledger.py plan`` prints each cell's estimate from the committed pilot). Where one program
of five seeds would take longer, the seeds are split over several cells with distinct base
seeds (seed i of a cell is ``fold_in(PRNGKey(base_seed), i)``, so no two cells share a seed).

Matrix 1 (``m1``), breadth: the 23 Playground DM Control tasks of the REPPO paper (Voelcker et
al. 2025, arXiv 2507.11019; the task list of github.com/cvoelcker/reppo's DMC sweep) x REPPO,
TruDi, AMDP and PPO, each with the preset ``diffrl train`` picks for the task (untuned), 5
seeds, one budget: 204,800 env steps per seed (25 PPO iterations of 256 x 32, 200 REPPO/TruDi/
AMDP iterations of 32 x 32; 5 evaluations after the one at step 0). 204,800 is the smallest
whole number of PPO iterations above the 200,000 floor, and even it does not fit the 25
core-hours the matrix was given: the pilot (``pilot.json``; one core, single-threaded XLA) puts a
5-seed REPPO program at 9-10 minutes on the Cartpole, Acrobot, Pendulum and Reacher tasks, 12-15
on Finger, BallInCup and FishSwim, 24-31 on Hopper and Humanoid and 111 on CheetahRun, whose
MJX simulation runs at about 160 env steps/s on one core (every algorithm is simulator-bound
there: the 98k-step ablation runs took 131-150 env steps/s for REPPO, PPO, AMDP and TruDi alike).
With the ablation's measured cost ratios to REPPO (CartpoleSwingup, learner-bound: PPO 0.23,
AMDP 0.93, TruDi 2.3; CheetahRun, simulator-bound: 0.97, 0.91, 1.26) the matrix comes to about
32 core-hours (``ledger.py plan`` totals it from the pilot); calibrated by the 48 cells finished by
2026-12-06 (REPPO's ran 0.9-1.4x and AMDP's first 1.5x their pilot estimates), about 43.

Matrix 2 (``m2``), depth: the trust-region ablation (TruDi's trajectory bound, the action-only
bound of ``dime``, no bound; REPPO; AMDP's drift bound and none) on CartpoleSwingup and
CheetahRun, 5 seeds, one seed per cell, one budget per task (the same for every run of it).
The ablation is specified at 1M env steps if the matrix fits in about 20 core-hours, else at the
largest budget that fits and at least 500,000. Calibrated by matrix 1's finished cells (2026-12-06),
CartpoleSwingup at 1,024,000 env steps (1,000 iterations of 32 x 32) is about 9 core-hours for
the 30 runs, but CheetahRun, simulator-bound at ~160 env steps/s on one core, costs 47-89
minutes per seed even at the 500,000 floor (about 37 core-hours for its 30 runs). No budget
meets the 20 core-hours, so CheetahRun runs at the floor, 512,000 env steps (500 iterations),
and CartpoleSwingup at 1,024,000, where a 1M-step verdict costs little. A CheetahRun seed is
one cell longer than 45 minutes (one seed cannot be split further without committing a
checkpoint); ``run`` starts it only with the time to finish it.

Matrix 3 (``m3``), multimodality with replay: the sequential multimodal tasks (MirrorGoals,
OctahedronGoals) with the off-policy methods (``amdp-off``, ``dime-off``, ``sac``), 5 seeds,
at the on-policy diagnosis' budget (98,304 env steps) and at 4x it.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules when imported from elsewhere

from suite_settings import PAPER_DMC_TASKS  # noqa: E402

M1_TASKS: tuple[str, ...] = tuple(sorted(task.split("/", 1)[1] for task in PAPER_DMC_TASKS))
"""The REPPO paper's 23 DM Control tasks (``suite_settings.PAPER_DMC_TASKS``), in alphabetical order."""
M1_ALGOS: tuple[str, ...] = ("ppo", "reppo", "amdp", "trudi")
"""In run order: the cheaper baselines first, so their rows fill across all tasks soonest."""
M1_BUDGET = 204_800
M1_SEEDS = 5

# Seeds per cell where five in one program would exceed about 45 minutes of one core, from the
# pilot (benchmarks/results/ledger/pilot.json): {(algo, task): (seeds of cell 1, seeds of cell 2, ...)}.
M1_SEED_SPLITS: dict[tuple[str, str], tuple[int, ...]] = {
    **{(algo, "CheetahRun"): (1, 1, 1, 1, 1) for algo in M1_ALGOS},  # 100-140 min for 5 seeds
    # ~42 min (TruDi) and ~48 min (AMDP) for 5 seeds on one core (pilot.json, 2026-12-06): two cells each
    **{("trudi", task): (3, 2) for task in ("HumanoidRun", "HumanoidStand", "HumanoidWalk")},
    # AMDP ran 1.5x its pilot estimate on AcrobotSwingup (its first finished cell, 2026-12-06), which puts
    # 5 Hopper seeds at ~60 min and 3 Humanoid seeds at ~50 min on one core: split further
    **{("amdp", task): (2, 2, 1) for task in ("HumanoidRun", "HumanoidStand", "HumanoidWalk")},
    **{("amdp", task): (3, 2) for task in ("HopperHop", "HopperStand")},
    # TruDi's Hopper cells, estimated at 52-54 min for 5 seeds once calibrated by its finished cells
    # (``ledger.py plan``, 2026-12-07): two cells each
    **{("trudi", task): (3, 2) for task in ("HopperHop", "HopperStand")},
}

M2_TASKS: tuple[str, ...] = ("CartpoleSwingup", "CheetahRun")
M2_BUDGETS: dict[str, int] = {"CartpoleSwingup": 1_024_000, "CheetahRun": 512_000}
"""Env steps per seed for each matrix-2 task (see the module docstring for why they differ)."""
M2_RUNS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("trudi", "trudi", {}),
    ("dime-action", "dime", {}),
    ("trudi-none", "trudi", {"reppo.trust_region": "none"}),
    ("reppo", "reppo", {}),
    ("amdp", "amdp", {}),
    ("amdp-none", "amdp", {"reppo.kl_multiplier": "none"}),
)

M3_TASKS: tuple[str, ...] = ("toy/MirrorGoals", "toy/OctahedronGoals")
M3_ALGOS: tuple[str, ...] = ("amdp-off", "dime-off", "sac")
M3_BUDGETS: tuple[int, ...] = (98_304, 393_216)
# 5 seeds at 4x the budget are 135-148 minutes of one core for the diffusion actors (pilot.json)
M3_SEED_SPLITS: dict[tuple[str, int], tuple[int, ...]] = {
    ("amdp-off", 393_216): (1, 1, 1, 1, 1), ("dime-off", 393_216): (1, 1, 1, 1, 1), ("sac", 393_216): (3, 2)}


@dataclass(frozen=True)
class Cell:
    matrix: str
    """Matrix name: m1 (breadth), m2 (depth), m3 (multimodality with replay)."""
    label: str
    """The run's name in tables (an algorithm, or an algorithm with a variant: trudi-none)."""
    algo: str
    """diffrl algorithm name."""
    task: str
    """Environment name (suite/Task)."""
    env_steps: int
    """Env-step budget per seed."""
    base_seed: int
    """Seed i of the cell uses fold_in(PRNGKey(base_seed), i)."""
    num_seeds: int
    """Seeds trained together (vmapped) in this cell."""
    num_evals: int = 5
    """Evaluations after the one at step 0."""
    eval_envs: int = 16
    """Episodes per evaluation, seed and sampler."""
    preset: str | None = None
    """None: the preset `diffrl train` picks for (algo, task)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Dotted config names -> values, applied after the preset."""

    @property
    def cell_id(self) -> str:
        task = self.task.split("/", 1)[1] if self.task.startswith("playground/") else self.task.replace("/", "_")
        budget = "" if self.matrix != "m3" else f"--{self.env_steps // 1000}k"
        return f"{self.matrix}--{task}--{self.label}{budget}--s{self.base_seed}x{self.num_seeds}"

    @property
    def group(self) -> tuple[str, str, str, int]:
        """Cells with the same group are seeds of one run: (matrix, label, task, budget)."""
        return (self.matrix, self.label, self.task, self.env_steps)


def _split(total: int, parts: tuple[int, ...] | None) -> tuple[int, ...]:
    parts = parts or (total,)
    if sum(parts) != total or any(p < 1 for p in parts):
        raise ValueError(f"seed split {parts} does not add up to {total}")
    return parts


def _seed_cells(matrix, label, algo, task, budget, seeds, split, **kw) -> list[Cell]:
    return [Cell(matrix, label, algo, task, budget, base_seed=i, num_seeds=n, **kw)
            for i, n in enumerate(_split(seeds, split))]


def matrix1() -> list[Cell]:
    return [cell for algo in M1_ALGOS for task in M1_TASKS
            for cell in _seed_cells("m1", algo, algo, f"playground/{task}", M1_BUDGET, M1_SEEDS,
                                    M1_SEED_SPLITS.get((algo, task)))]


def matrix2() -> list[Cell]:
    return [cell for task in M2_TASKS for label, algo, overrides in M2_RUNS
            for cell in _seed_cells("m2", label, algo, f"playground/{task}", M2_BUDGETS[task], 5, (1,) * 5,
                                    num_evals=10, overrides=dict(overrides))]


def matrix3() -> list[Cell]:
    return [cell for budget in M3_BUDGETS for task in M3_TASKS for algo in M3_ALGOS
            for cell in _seed_cells("m3", algo, algo, task, budget, 5, M3_SEED_SPLITS.get((algo, budget)),
                                    num_evals=8, eval_envs=64)]


def plan() -> list[Cell]:
    """Every cell in run order: matrix 1, then 2, then 3."""
    cells = matrix1() + matrix2() + matrix3()
    ids = [c.cell_id for c in cells]
    if len(set(ids)) != len(ids):
        raise ValueError("the plan has duplicate cell ids")
    return cells
