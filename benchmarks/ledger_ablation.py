"""Matrix 2 of the ledger: the trust-region ablation over longer curves, rendered from its records.

TruDi (arXiv 2606.15260) bounds the KL divergence of the whole denoising trajectory between the old
and the new policy (an upper bound on the KL of the actions) and claims that this bound is what keeps a
diffusion actor stable in REPPO's on-policy loop (REPPO: arXiv 2507.11019). Matrix 2 trains, for
longer than matrix 1, TruDi with that bound (``trudi``), with a bound on the action's KL alone as DIME's
estimator gives it (``dime-action``), with no bound (``trudi-none``), its Gaussian backbone REPPO, and
AMDP (arXiv 2606.22630) with its drift bound (``amdp``, closed form) and without (``amdp-none``).

Per task: each run's final return and three measures of stability, and the probability of improvement
(Agarwal et al. 2021, Sec. 4.3; ``diffrl.maths.stats``) of each bound over its ablation, per task and
over both tasks: of the final return, and of the stability of the whole curve (a smaller largest fall). Statistics and resampling are ``ledger_report``'s (seeded: the same records render the
same tables everywhere).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ledger_plan  # noqa: E402
from ledger_report import (RESAMPLING, divergence_lines, fmt, iqm_ci, median_ci, normalised,  # noqa: E402
                           wall_minutes)

from diffrl.maths.stats import probability_of_improvement  # noqa: E402

ABLATIONS: tuple[tuple[str, str, str], ...] = (
    ("trudi", "trudi-none", "the trajectory bound against no bound"),
    ("trudi", "dime-action", "the trajectory bound against the action-only bound"),
    ("dime-action", "trudi-none", "the action-only bound against no bound"),
    ("amdp", "amdp-none", "AMDP's drift bound against no bound"),
    ("trudi", "reppo", "TruDi against its Gaussian backbone"),
    ("amdp", "reppo", "AMDP against REPPO"),
)
"""(X, Y, what P(X > Y) asks): the comparisons the ablation is read by."""
COLLAPSE = 0.25
"""A seed 'collapses' when its final evaluation lies more than this fraction of the random-to-maximum
range below its own best evaluation: it learned, then lost it (the instability a trust region is meant
to prevent), as opposed to a seed that never learned."""


def best_to_final_drop(run, random_return: float) -> np.ndarray:
    """(K,) per seed: its best normalised evaluation minus its final one (>= 0; 0 when it ends at its best)."""
    curves = normalised(run.curves, random_return)  # (E, K)
    return curves.max(axis=0) - curves[-1]


def largest_fall(run, random_return: float) -> np.ndarray:
    """(K,) per seed: the largest fall of its normalised evaluations below their best so far,
    max over e of (max over e' <= e of R_e') - R_e (>= 0; 0 for a curve that never falls). Unlike
    :func:`best_to_final_drop` it sees a collapse the seed recovered from before its last evaluation."""
    curves = normalised(run.curves, random_return)  # (E, K)
    return (np.maximum.accumulate(curves, axis=0) - curves).max(axis=0)


def _task_runs(runs: dict, task: str) -> dict[str, object]:
    name = f"playground/{task}"
    return {k[1]: runs[k] for k in sorted(runs) if k[0] == "m2" and k[2] == name}


def run_lines(task: str, by_label: dict, random_return: float) -> list[str]:
    labels = [label for label, _, _ in ledger_plan.M2_RUNS]
    lines = [f"## {task}, {ledger_plan.M2_BUDGETS[task]:,} env steps per seed", "", f"R_random = {random_return:.1f}",
             "", "| run | seeds | final return median | normalised median | normalised IQM | best-to-final drop "
             "median (worst) | seeds that collapse | largest fall median (worst) | seeds that ever fall "
             f"> {COLLAPSE} | wall min (1 core) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for label in sorted(by_label, key=labels.index):
        run = by_label[label]
        n = normalised(run.final, random_return)
        drop, fall = best_to_final_drop(run, random_return), largest_fall(run, random_return)
        lines.append(f"| {label} | {run.seeds_text} | {fmt(median_ci(run.final), 1)} | {fmt(median_ci(n))} | "
                     f"{fmt(iqm_ci(n))} | {np.median(drop):.3f} ({drop.max():.3f}) | "
                     f"{int((drop > COLLAPSE).sum())} of {run.num_seeds} | {np.median(fall):.3f} ({fall.max():.3f}) | "
                     f"{int((fall > COLLAPSE).sum())} of {run.num_seeds} | {wall_minutes(run)} |")
    return lines + [""]


MEASURES = {
    "final": ("The bounds against their ablations: final return",
              "P(X > Y): the probability that a seed of X ends above a seed of Y (ties count half)"),
    "fall": ("The bounds against their ablations: stability of the whole curve",
             "P(X > Y) here: the probability that a seed of X has a smaller largest fall than a seed of Y (ties, "
             "such as two curves that never fall, count half: above 0.5, X's curves are the steadier)"),
}
"""Measure -> (section title, what P(X > Y) compares) of :func:`comparison_lines`."""


def _per_seed(measure: str, run, random_return: float) -> np.ndarray:
    """(K,) the values compared: the normalised final return, or the negated largest fall (higher is better)."""
    if measure == "final":
        return normalised(run.final, random_return)
    return -largest_fall(run, random_return)


def comparison_lines(per_task: dict[str, dict], randoms: dict, measure: str = "final") -> list[str]:
    """P(X > Y) of ``measure`` (:data:`MEASURES`) per task and over the tasks where both X and Y are complete."""
    tasks = list(ledger_plan.M2_TASKS)
    title, compared = MEASURES[measure]
    lines = [f"## {title}", "",
             f"{compared}, per task, and its mean over the tasks where both runs are complete; 95 % bootstrap "
             "intervals, each run's seeds resampled within each task.", "",
             "| X | Y | what it asks | " + " | ".join(tasks) + " | over the tasks |",
             "|---|---|---|" + "---|" * (len(tasks) + 1)]
    for x, y, question in ABLATIONS:
        cells, xs, ys = [], [], []
        for task in tasks:
            runs = per_task.get(task, {})
            if x in runs and y in runs:
                rnd = randoms[f"playground/{task}"]
                xs.append(_per_seed(measure, runs[x], rnd))
                ys.append(_per_seed(measure, runs[y], rnd))
                cells.append(fmt(probability_of_improvement([xs[-1]], [ys[-1]], **RESAMPLING), 2))
            else:
                cells.append("not complete")
        pooled = fmt(probability_of_improvement(xs, ys, **RESAMPLING), 2) if xs else "not complete"
        lines.append(f"| {x} | {y} | {question} | " + " | ".join(cells) + f" | {pooled} |")
    return lines + [""]


def m2_table(runs: dict, randoms: dict) -> str:
    budgets = ", ".join(f"{t} {b:,}" for t, b in ledger_plan.M2_BUDGETS.items())
    lines = ["# Matrix 2: the trust-region ablation over longer curves", "",
             f"Env steps per seed: {budgets}; 5 seeds per run, each seed its own cell. Runs: `trudi` (TruDi, the "
             "KL of the whole denoising trajectory bounded), `dime-action` (the same actor with the KL of the "
             "action alone bounded, DIME's estimator), `trudi-none` (no bound), `reppo` (the Gaussian backbone), "
             "`amdp` (AMDP, its drift's KL bounded in closed form) and `amdp-none` (no bound); each task's default "
             "preset, otherwise untuned. Final evaluation with each policy's default sampler; normalised = "
             "(R - R_random) / (1000 - R_random). Stability: the drop from a seed's best evaluation to its final "
             f"one (normalised), the seeds whose drop exceeds {COLLAPSE} (learned, then lost it), and the largest "
             "fall below the best so far at any evaluation (a collapse even if the seed recovered). Curves: "
             "`curves_m2_<task>.png` (mean over seeds), `seeds_m2_<task>.png` (every seed). A run enters these "
             "tables once all its seeds have finished (until then: 'Runs still filling' below).", ""]
    per_task = {}
    for task in ledger_plan.M2_TASKS:
        by_label = _task_runs(runs, task)
        if by_label:
            per_task[task] = by_label
            lines += run_lines(task, by_label, randoms[f"playground/{task}"])
    if per_task:
        lines += comparison_lines(per_task, randoms, "final") + comparison_lines(per_task, randoms, "fall")
    if any(k[0] == "m2" for k in runs):
        lines += divergence_lines(runs, "m2")
    return "\n".join(lines) + "\n"
