"""Matrix 1 by reward family: is a preset broken for a family of tasks?

Issue 44 asks the ledger to say where a preset is plainly broken for a family of tasks, "for
example it never learns a sparse-reward task that the others learn". The report answers it from
the records: per family, a table of every algorithm's median normalised final return per task
(what each learns, and what another learns and it does not), and the family's aggregate (IQM of
the normalised return, stratified bootstrap) over the family's tasks every algorithm has finished.

The family of a task is read off its reward function in MuJoCo Playground's DM Control suite
(github.com/google-deepmind/mujoco_playground, ``mujoco_playground/_src/dm_control_suite/``):

* **sparse**: every step outside a goal region scores 0, with no shaping margin, so a policy sees
  no reward until it first reaches the region: the ``*Sparse`` variants (acrobot.py, cartpole.py:
  margin 0), BallInCup (ball_in_cup.py: ball inside the cup), FingerSpin and FingerTurnEasy/Hard
  (finger.py: hinge velocity past a threshold; tip inside the target), HopperHop and HopperStand
  (hopper.py: the reward is a product with ``tolerance`` of the torso height, bounds (0.6, 2),
  margin 0), PendulumSwingup (pendulum.py: ``tolerance`` of the pole's cosine, bounds
  (cos 30 deg, 1), margin 0) and ReacherEasy/Hard (reacher.py: ``tolerance`` of the
  finger-to-target distance, margin 0);
* **dense**: the others, whose rewards grow smoothly towards the goal (``tolerance`` with a
  margin, or a speed term).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ledger_plan  # noqa: E402
from ledger_breadth import complete_tasks, normalised_finals  # noqa: E402
from ledger_report import RESAMPLING, fmt, normalised, number  # noqa: E402

from diffrl.maths.stats import stratified_bootstrap_ci  # noqa: E402

SPARSE_REWARD_TASKS: frozenset[str] = frozenset({
    "AcrobotSwingupSparse", "BallInCup", "CartpoleBalanceSparse", "CartpoleSwingupSparse", "FingerSpin",
    "FingerTurnEasy", "FingerTurnHard", "HopperHop", "HopperStand", "PendulumSwingup", "ReacherEasy",
    "ReacherHard"})
"""Matrix-1 tasks whose reward is 0 outside a goal region, with no shaping (see the module docstring)."""
FAMILIES = ("sparse", "dense")


def family(task: str) -> str:
    """'sparse' or 'dense' for a matrix-1 task ('CheetahRun' or 'playground/CheetahRun')."""
    name = task.split("/", 1)[-1]
    if name not in ledger_plan.M1_TASKS:
        raise ValueError(f"{task!r} is not a matrix-1 task")
    return "sparse" if name in SPARSE_REWARD_TASKS else "dense"


def family_lines(runs: dict, randoms: dict, tasks: list[str]) -> list[str]:
    """The report's 'By reward family' section of m1.md: per family, each finished run's median
    normalised final return per task ('-' where the run has not finished), then the family's IQM of
    normalised return per algorithm over its tasks every algorithm has finished."""
    algos = ledger_plan.M1_ALGOS
    lines = ["## By reward family", "",
             "Sparse-reward tasks score 0 on every step outside a goal region, with no shaping towards it "
             "(the *Sparse tasks, BallInCup, FingerSpin, FingerTurnEasy/Hard, HopperHop/Stand, PendulumSwingup, "
             "ReacherEasy/Hard: their reward functions in MuJoCo Playground, `ledger_families.py`); dense-reward "
             "tasks are the others. Cells: the median normalised final return of the run's seeds ('-': not "
             "finished).", ""]
    for fam in FAMILIES:
        members = [t for t in tasks if family(t) == fam]
        lines += [f"### {fam.capitalize()} reward ({len(members)} tasks)", "",
                  "| task | " + " | ".join(algos) + " |", "|---|" + "---|" * len(algos)]
        for task in members:
            cells = []
            for a in algos:
                run = runs.get(("m1", a, task, ledger_plan.M1_BUDGET))
                cells.append("-" if run is None else number(np.median(normalised(run.final, randoms[task])), 2))
            lines.append(f"| {task.split('/')[1]} | " + " | ".join(cells) + " |")
        common = complete_tasks(runs, members, algos)
        lines.append("")
        if not common:
            lines += [f"No {fam}-reward task has all four algorithms finished yet.", ""]
            continue
        lines += [f"IQM of normalised return over the {len(common)} {fam}-reward tasks every algorithm has finished "
                  "[95 % stratified bootstrap]: " + "; ".join(
                      f"{a} {fmt(stratified_bootstrap_ci(normalised_finals(runs, randoms, a, common), **RESAMPLING))}"
                      for a in algos) + ".", ""]
    return lines
