"""The ledger report's figures: learning curves per task and matrix 1's performance profile.

Drawn by ``ledger.py report`` (``ledger_report.render``) from the same grouped runs as the tables;
CI compares the tables only, so the figures are not checked byte for byte.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ledger_plan  # noqa: E402
from ledger_breadth import complete_tasks, normalised_finals  # noqa: E402
from ledger_report import SEED  # noqa: E402

from diffrl.maths.stats import mean_ci_along_last_axis  # noqa: E402


def draw_figures(runs: dict, randoms: dict, out: Path, filling: dict | None = None) -> list[Path]:
    """Write ``curves_<matrix>_<task>.png`` (every run's mean return over seeds with its 95 %
    bootstrap band; dashed, a run of ``filling``, {group: (Run, seeds planned)}, with the seeds finished
    so far) per matrix-1 and matrix-2 task, ``seeds_m2_<task>.png`` (every seed's curve, a panel per
    run: the falls a mean hides), ``curves_m3_<task>.png`` per matrix-3 task (its return
    and the fraction of episodes reaching a goal, every budget's runs), and ``profile_m1.png`` (the fraction of runs
    whose normalised return exceeds tau, over the tasks every algorithm has finished; Agarwal et
    al. 2021, Sec. 4.1); returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for matrix, tasks in (("m1", [f"playground/{t}" for t in ledger_plan.M1_TASKS]),
                          ("m2", [f"playground/{t}" for t in ledger_plan.M2_TASKS])):
        for task in tasks:
            rows = _rows(runs, filling, matrix, task)
            if not rows:
                continue
            fig, ax = plt.subplots(figsize=(5, 3.4))
            for run, planned in rows:
                mean, lo, hi = mean_ci_along_last_axis(run.curves, seed=SEED)
                style, seeds = _style(run, planned)
                ax.plot(run.env_steps, mean, style, label=f"{run.label} ({seeds})")
                ax.fill_between(run.env_steps, lo, hi, alpha=0.2)
            ax.set(title=f"{task.split('/')[1]} ({matrix})", xlabel="env steps per seed", ylabel="return")
            ax.legend(fontsize=7)
            fig.tight_layout()
            path = out / f"curves_{matrix}_{task.split('/')[1]}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            paths.append(path)
            if matrix == "m2":
                paths.append(_m2_seed_figure(plt, task, rows, out))
    for task in ledger_plan.M3_TASKS:
        rows = _rows(runs, filling, "m3", task)
        if rows:
            paths.append(_m3_figure(plt, task, rows, out))
    tasks = complete_tasks(runs, [f"playground/{t}" for t in ledger_plan.M1_TASKS], ledger_plan.M1_ALGOS)
    if tasks:
        taus = np.linspace(-0.1, 1.0, 111)
        fig, ax = plt.subplots(figsize=(5, 3.4))
        for a in ledger_plan.M1_ALGOS:
            scores = normalised_finals(runs, randoms, a, tasks)
            profile = np.mean([(s[:, None] > taus).mean(axis=0) for s in scores], axis=0)
            ax.plot(taus, profile, label=a)
        ax.set(title=f"Performance profile, {len(tasks)} tasks (m1)", xlabel="normalised return tau",
               ylabel="fraction of runs > tau")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / "profile_m1.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _rows(runs: dict, filling: dict | None, matrix: str, task: str) -> list[tuple]:
    """[(Run, None)] of ``matrix``'s finished runs on ``task``, then [(Run, seeds planned)] of those still filling."""
    rows = [(runs[k], None) for k in sorted(runs) if k[0] == matrix and k[2] == task]
    return rows + [v for k, v in sorted((filling or {}).items()) if k[0] == matrix and k[2] == task]


def _style(run, planned: int | None) -> tuple[str, str]:
    """(line style, seeds in the legend): solid and 'K' for a finished run, dashed and 'k of K' for one filling."""
    return ("-", f"{run.num_seeds}") if planned is None else ("--", f"{run.num_seeds} of {planned}")


def _m2_seed_figure(plt, task: str, rows: list, out: Path) -> Path:
    """``seeds_m2_<task>.png``: one panel per matrix-2 run in the plan's order, every finished seed's
    return curve in it (a trust region's claim is about single runs that learn and then lose it, which
    the mean over seeds smooths away)."""
    labels = [label for label, _, _ in ledger_plan.M2_RUNS]
    by_label = {run.label: (run, planned) for run, planned in rows}
    fig, axes = plt.subplots(2, (len(labels) + 1) // 2, figsize=(10, 5.2), sharex=True, sharey=True)
    for ax, label in zip(axes.flat, labels):
        if label not in by_label:
            ax.set_title(f"{label} (no seed yet)", fontsize=8)
            continue
        run, planned = by_label[label]
        _, seeds = _style(run, planned)
        for k in range(run.num_seeds):
            ax.plot(run.env_steps, run.curves[:, k], lw=1.0, label=f"seed {run.seeds[k]}")
        ax.set_title(f"{label} ({seeds} seeds)", fontsize=8)
        ax.legend(fontsize=5)
    for ax in axes[-1]:
        ax.set_xlabel("env steps per seed", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("return", fontsize=8)
    fig.suptitle(f"{task.split('/')[1]} (m2): every seed", fontsize=10)
    fig.tight_layout()
    path = out / f"seeds_m2_{task.split('/')[1]}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _m3_figure(plt, task: str, rows: list, out: Path) -> Path:
    """``curves_m3_<task>.png``: per run and budget, the mean return and the mean fraction of episodes that
    reach a goal over seeds (95 % bootstrap bands), dashed for a run still filling."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for run, planned in rows:
        style, seeds = _style(run, planned)
        for ax, values in zip(axes, (run.curves, run.series("mode_reached"))):
            if values is None:
                continue
            mean, lo, hi = mean_ci_along_last_axis(np.asarray(values, np.float64), seed=SEED)
            line, = ax.plot(run.env_steps, mean, style, label=f"{run.label}, {run.budget:,} ({seeds})")
            ax.fill_between(run.env_steps, lo, hi, alpha=0.2, color=line.get_color())
    axes[0].set(title=f"{task} (m3): return", xlabel="env steps per seed", ylabel="return")
    axes[1].set(title="episodes reaching a goal", xlabel="env steps per seed", ylabel="fraction", ylim=(-0.02, 1.02))
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    path = out / f"curves_m3_{task.split('/')[1]}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
