"""Matrix 1 of the ledger, breadth: the 23 DM Control tasks of the REPPO paper (arXiv 2507.11019) x PPO,
REPPO, AMDP (arXiv 2606.22630) and TruDi (arXiv 2606.15260), each with the preset ``diffrl train``
picks, untuned, rendered from its records.

Per task, each run's median and IQM of the final return (raw and normalised); over the tasks every
algorithm has finished, the IQM of the normalised return with stratified-bootstrap intervals and
the probability of improvement (Agarwal et al. 2021, Sec. 4.3; ``diffrl.maths.stats``); the same by
reward family (``ledger_families.py``); and the runs that do not learn at all.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ledger_plan  # noqa: E402
from ledger_records import ALONE_CPU_SHARE  # noqa: E402
from ledger_report import (RESAMPLING, Run, divergence_lines, fmt, iqm_ci, median_ci, normalised,  # noqa: E402
                           wall_minutes)

from diffrl.maths.stats import probability_of_improvement, stratified_bootstrap_ci  # noqa: E402

IMPROVEMENT_PAIRS = (("trudi", "reppo"), ("amdp", "reppo"), ("trudi", "ppo"), ("amdp", "ppo"), ("reppo", "ppo"))
"""The (X, Y) pairs whose probability of improvement P(X > Y) the aggregate gives."""


def normalised_finals(runs: dict, randoms: dict, algo: str, tasks: list[str]) -> list[np.ndarray]:
    """Per task, ``algo``'s matrix-1 run's normalised final returns (K,): the scores the aggregates resample."""
    return [normalised(runs[("m1", algo, t, ledger_plan.M1_BUDGET)].final, randoms[t]) for t in tasks]


def m1_table(runs: dict, randoms: dict) -> str:
    lines = ["# Matrix 1: the 23 DM Control tasks, untuned presets, 204,800 env steps", "",
             "Final evaluation (the policy's default sampler), seeds pooled over a run's cells. Median and IQM "
             "with 95 % bootstrap intervals; normalised = (R - R_random) / (1000 - R_random). Wall-clock: the "
             "run's cells summed, one core each; '(loaded)': other work shared a cell's core (its process had "
             f"less than {ALONE_CPU_SHARE * 100:.0f} % of the core; older records: the machine's load average "
             "above its cores + 1), so the time overstates the cell's cost alone.", ""]
    tasks = [f"playground/{t}" for t in ledger_plan.M1_TASKS]
    for task in tasks:
        rows = [runs[k] for k in sorted(runs) if k[0] == "m1" and k[2] == task]
        if not rows:
            continue
        rnd = randoms[task]
        lines += [f"## {task.split('/')[1]}", "", f"R_random = {rnd:.1f}", "",
                  "| algo | seeds | median | IQM | normalised median | normalised IQM | wall min (1 core) |",
                  "|---|---|---|---|---|---|---|"]
        for run in sorted(rows, key=lambda r: ledger_plan.M1_ALGOS.index(r.label)):
            n = normalised(run.final, rnd)
            lines.append(f"| {run.label} | {run.seeds_text} | {fmt(median_ci(run.final), 1)} | "
                         f"{fmt(iqm_ci(run.final), 1)} | {fmt(median_ci(n))} | "
                         f"{fmt(iqm_ci(n))} | {wall_minutes(run)} |")
        lines.append("")
    lines += aggregate_lines(runs, randoms, tasks)
    from ledger_families import family_lines  # it imports this module's statistics

    lines += family_lines(runs, randoms, tasks)
    lines += no_learning_lines(runs, randoms, tasks)
    lines += divergence_lines(runs, "m1")
    return "\n".join(lines) + "\n"


NO_LEARNING_GAIN = 0.05
"""A run 'does not learn' when no seed's best evaluation after step 0 rises above both its own
step-0 evaluation and R_random by more than this fraction of the range (1000 - R_random)."""


def learning_gain(run: "Run", random_return: float) -> np.ndarray:
    """(K,) per seed: the best normalised evaluation after step 0 minus the larger of the seed's
    normalised step-0 evaluation and 0 (the random policy): how far a seed ever got above where it
    started, in units of the random-to-maximum range."""
    curves = normalised(run.curves, random_return)  # (E, K), row 0 the evaluation before training
    return curves[1:].max(axis=0) - np.maximum(curves[0], 0.0)


def no_learning_lines(runs: dict, randoms: dict, tasks: list[str]) -> list[str]:
    lines = ["## Runs that do not learn", "",
             f"No seed's best evaluation after step 0 rose by more than {NO_LEARNING_GAIN} of the range above both "
             "its step-0 evaluation and the random policy (the curves: `curves_m1_<task>.png`).", ""]
    found = []
    for task in tasks:
        for run in sorted((runs[k] for k in sorted(runs) if k[0] == "m1" and k[2] == task),
                          key=lambda r: ledger_plan.M1_ALGOS.index(r.label)):
            gain = learning_gain(run, randoms[task])
            if gain.max() <= NO_LEARNING_GAIN:
                name = task.split("/")[1]
                found.append(f"| {name} | {run.label} | {run.num_seeds} | {gain.max():.3f} | "
                             f"[curves](curves_m1_{name}.png) |")
    if not found:
        return lines + ["None among the finished runs.", ""]
    return lines + ["| task | algo | seeds | best seed's gain | curves |", "|---|---|---|---|---|"] + found + [""]


def complete_tasks(runs: dict, tasks: list[str], algos) -> list[str]:
    return [t for t in tasks if all(("m1", a, t, ledger_plan.M1_BUDGET) in runs for a in algos)]


def aggregate_lines(runs: dict, randoms: dict, tasks: list[str]) -> list[str]:
    common = complete_tasks(runs, tasks, ledger_plan.M1_ALGOS)
    lines = ["## Aggregate over tasks", ""]
    if not common:
        return lines + ["No task has all four algorithms finished yet.", ""]
    lines += [f"Over the {len(common)} tasks every algorithm has finished "
              f"({', '.join(t.split('/')[1] for t in common)}).", "",
              "| algo | IQM of normalised return [95 % stratified bootstrap] |", "|---|---|"]
    scores = {a: normalised_finals(runs, randoms, a, common) for a in ledger_plan.M1_ALGOS}
    for a in ledger_plan.M1_ALGOS:
        lines.append(f"| {a} | {fmt(stratified_bootstrap_ci(scores[a], **RESAMPLING))} |")
    lines += ["", "| X | Y | P(X > Y) [95 % stratified bootstrap] |", "|---|---|---|"]
    for x, y in IMPROVEMENT_PAIRS:
        lines.append(f"| {x} | {y} | {fmt(probability_of_improvement(scores[x], scores[y], **RESAMPLING))} |")
    return lines + [""]
