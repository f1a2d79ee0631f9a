"""Matrix 3 of the ledger: the multimodal sequential tasks with replay, rendered from its records.

On the toy tasks whose optima are all equally good (toy/MirrorGoals: two goals; toy/OctahedronGoals:
six; ``diffrl.envs.toy``), the on-policy diffusion actors reach goals but each seed commits to one
(``benchmarks/multimodality.py``). If that collapse comes from the less-visited goal's critic being
learned on less data, a replay buffer that keeps both sides' data is the direct test: matrix 3 trains
the off-policy methods (``amdp-off``, AMDP's off-policy variant, arXiv 2606.22630; ``dime-off``, DIME,
arXiv 2502.02316; ``sac``) at the on-policy diagnosis's budget and at 4x it, and reads their behaviour
entropy and return per seed beside the on-policy runs, and when each seed committed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ledger_plan  # noqa: E402
from ledger_report import divergence_lines, fmt, median_ci, number  # noqa: E402

ON_POLICY_GRID = Path(__file__).resolve().parent / "results" / "multimodality" / "grid"
"""The on-policy runs on the multimodal tasks (benchmarks/multimodality.py, committed records): the rows
matrix 3's off-policy runs are read beside."""


def _per_seed(values, digits: int = 2) -> str:
    return ", ".join("n/a" if not np.isfinite(v) else number(v, digits) for v in np.asarray(values, np.float64))


def _median_of_reached(values) -> str:
    """Median over the seeds that reached a goal (behaviour entropy is undefined for the others)."""
    v = np.asarray(values, np.float64)
    return "n/a" if not np.isfinite(v).any() else number(np.median(v[np.isfinite(v)]), 2)


def goal_series(run) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(behaviour entropy with NaN where the seed reached no goal, fraction of episodes reaching a goal),
    each (E, K) over the run's evaluations; None where the records do not hold the series."""
    from diffrl.core.evaluate import entropy_where_reached  # imports JAX: only where matrix 3 is rendered

    ent, reach = run.series("behaviour_entropy"), run.series("mode_reached")
    if ent is not None and reach is not None:
        ent = entropy_where_reached(ent, reach)
    return ent, reach


def on_policy_rows(task: str, grid: Path = ON_POLICY_GRID) -> list[str]:
    """m3 table rows of the on-policy runs of ``task`` (each algorithm's default sampler) from ``grid``."""
    rows = []
    for path in sorted(grid.glob(f"{task.replace('/', '_')}--*.json")):
        record = json.loads(path.read_text())
        sampler = record["samplers"][0]
        final = record["final"][sampler]
        returns = np.asarray(final["episode_return"], np.float64)
        rows.append(f"| {record['algo']} (on-policy, {record['trained_env_steps']:,} steps, {sampler}) | "
                    f"{fmt(median_ci(returns), 2)} ({_per_seed(returns)}) | "
                    f"{_median_of_reached(final['behaviour_entropy'])} ({_per_seed(final['behaviour_entropy'])}) | "
                    f"{_per_seed(final['mode_reached'])} |")
    return rows


def m3_table(runs: dict, grid: Path = ON_POLICY_GRID) -> str:
    lines = ["# Matrix 3: multimodal sequential tasks with replay", "",
             "Final evaluation (default sampler): return, behaviour entropy (of the histogram of the goals reached, "
             "normalised to [0, 1]; 'n/a' for a seed that reached none) and the fraction of episodes that reach a "
             "goal; per seed in brackets. Beside them, the on-policy runs of the same task "
             "(`benchmarks/results/multimodality/grid/`, 256 episodes per seed) at the budget of the on-policy "
             "diagnosis. Curves (return, and the episodes reaching a goal): `curves_m3_<task>.png`.", ""]
    header = ["| algo | return median [95 %] (per seed) | behaviour entropy median (per seed) | mode reached (per seed) |",
              "|---|---|---|---|"]
    for task in ledger_plan.M3_TASKS:
        for budget in ledger_plan.M3_BUDGETS:
            rows = [runs[k] for k in sorted(runs) if k[0] == "m3" and k[2] == task and k[3] == budget]
            if not rows:
                continue
            lines += [f"## {task}, {budget:,} env steps", ""] + header
            for run in rows:
                ent, reach = goal_series(run)
                e = "n/a" if ent is None else f"{_median_of_reached(ent[-1])} ({_per_seed(ent[-1])})"
                m = "n/a" if reach is None else _per_seed(reach[-1])
                lines.append(f"| {run.label} ({run.seeds_text} seeds) | {fmt(median_ci(run.final), 2)} "
                             f"({_per_seed(run.final)}) | {e} | {m} |")
            lines.append("")
        beside = on_policy_rows(task, grid)
        if beside:
            lines += [f"## {task}: the on-policy runs", ""] + header + beside + [""]
    lines += commitment_lines([runs[k] for k in sorted(runs) if k[0] == "m3"])
    if any(k[0] == "m3" for k in runs):
        lines += divergence_lines(runs, "m3")
    return "\n".join(lines) + "\n"


COMMITTED = 0.5
"""A seed has found a goal at the first evaluation where at least this fraction of its episodes reach one."""


def commitment_lines(rows: list) -> list[str]:
    """Per run and seed: the highest behaviour entropy of any evaluation after step 0 (did the seed ever
    spread over several goals once trained?) and the env steps of its first evaluation reaching a goal in
    at least ``COMMITTED`` of its episodes."""
    lines = ["## When each seed committed", "",
             "Per seed: the highest behaviour entropy of any evaluation after step 0 ('n/a': it never reached a goal "
             f"after step 0), and the env steps of its first evaluation in which at least {COMMITTED:.0%} of the "
             "episodes reach a goal ('never').", "",
             "| task | run | env steps | highest entropy after step 0 (per seed) | first evaluation reaching a goal "
             "(per seed) |", "|---|---|---|---|---|"]
    found = False
    for run in rows:
        ent, reach = goal_series(run)
        if ent is None or reach is None:
            continue
        found = True
        highest = np.fmax.reduce(ent[1:], axis=0)  # NaN only for a seed that reached no goal after step 0
        hit = np.asarray(reach, np.float64) >= COMMITTED
        first = ["never" if not hit[:, k].any() else f"{int(run.env_steps[np.argmax(hit[:, k])]):,}"
                 for k in range(hit.shape[1])]
        lines.append(f"| {run.task} | {run.label} | {run.budget:,} | {_per_seed(highest)} | {', '.join(first)} |")
    return lines + [""] if found else []
