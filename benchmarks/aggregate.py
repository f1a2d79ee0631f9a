"""Aggregate benchmark-suite records: per-task returns, IQM across tasks, learning curves.

    python benchmarks/aggregate.py DIR [DIR ...] [--out OUT]

reads every run record (``DIR/runs/*.json``, format in ``suite_records.py``) and writes to
``OUT`` (default ``DIR/aggregate``):

* ``table.md`` and ``aggregate.json``: per task and algorithm the final return's mean over
  seeds with a 95% percentile-bootstrap confidence interval (runs resampled with
  replacement); per algorithm the interquartile mean (IQM) and mean of the normalised
  final scores pooled over tasks and seeds, with 95% *stratified* bootstrap intervals
  (runs resampled within each task; Agarwal et al. 2021, see ``diffrl.maths.stats``);
* ``curves_env_steps.png`` / ``curves_walltime.png``: return against env steps and against
  wall-clock seconds (training plus evaluation, after compilation), one panel per task,
  mean over seeds with the 95% bootstrap band;
* ``iqm.png``: the per-algorithm IQM and mean with their intervals;
* ``iqm_curve.png``: IQM of the normalised return against env steps.

Normalisation: a task's returns are mapped by its score range to [0, 1]: DM Control
returns by [0, 1000] (per-step rewards in [0, 1], 1000-step episodes). Other tasks need
``--score-range TASK=LOW:HIGH``; without one their raw returns are pooled (and the
output says so).

With two seeds a bootstrap interval is only the range of the resampled means (crude);
use more seeds (paper scale: 5) for intervals worth reading.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite_records import read_records  # noqa: E402
from suite_settings import score_range  # noqa: E402

from diffrl.artefacts.plotting import save_figure  # noqa: E402

LEVEL = 0.95
GRID_POINTS = 100  # diffrl.maths.stats.CURVE_GRID_POINTS: the grid diffrl plot uses


def group_records(records: list[dict]) -> dict[str, dict[str, list[dict]]]:
    """task -> algo -> records (one per seed; duplicates of (base_seed, seed) rejected)."""
    groups: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    seen = set()
    for r in records:
        key = (r["task"], r["algo"], r.get("base_seed", 0), r["seed"])
        if key in seen:
            raise ValueError(f"two records for {key[1]} on {key[0]}, base seed {key[2]}, seed {key[3]}")
        seen.add(key)
        groups[r["task"]][r["algo"]].append(r)
    return groups


def align(curves: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Curves (x, y) of several runs -> (grid, values (points, runs)):
    :func:`diffrl.maths.stats.align_curves`, the alignment ``diffrl plot`` uses."""
    from diffrl.maths.stats import align_curves

    return align_curves(curves, GRID_POINTS)


def parse_score_ranges(items: list[str]) -> dict[str, tuple[float, float]]:
    ranges = {}
    for item in items:
        task, sep, span = item.partition("=")
        low, sep2, high = span.partition(":")
        if not (sep and sep2):
            raise ValueError(f"--score-range expects TASK=LOW:HIGH, got {item!r}")
        ranges[task] = (float(low), float(high))
    return ranges


def summarize(groups, ranges: dict, resamples: int, seed: int) -> dict:
    """Per-task statistics and per-algorithm aggregates (the content of aggregate.json)."""
    from diffrl.maths.stats import bootstrap_ci, iqm, normalize, stratified_bootstrap_ci

    tasks = sorted(groups)
    algos = sorted({a for g in groups.values() for a in g})
    used_ranges, raw = {}, []
    for task in tasks:
        span = ranges.get(task) or score_range(task)
        if span is None:
            raw.append(task)
            span = (0.0, 1.0)
        used_ranges[task] = list(span)
    per_task = []
    normalised: dict[str, list[np.ndarray]] = defaultdict(list)
    for task in tasks:
        for algo in algos:
            runs = groups[task].get(algo, [])
            if not runs:
                continue
            finals = np.array([r["final_return"] for r in runs], np.float64)
            mean, lo, hi = bootstrap_ci(finals, level=LEVEL, resamples=resamples, seed=seed)
            per_task.append({
                "task": task, "algo": algo, "seeds": len(runs), "mean": mean, "ci_low": lo, "ci_high": hi,
                "std": float(finals.std()), "final_returns": finals.tolist(),
                "final_env_steps": min(int(r["final_env_steps"]) for r in runs),
                "walltime_s": float(np.mean([r["walltime"][-1] for r in runs])),
                "compile_s": float(np.mean([r.get("program", {}).get("compile_s") or math.nan for r in runs])),
                "preset": runs[0].get("preset"), "sampler": runs[0].get("sampler"),
            })
            normalised[algo].append(normalize(finals, *used_ranges[task]))
    aggregate = {}
    for algo in algos:
        per_algo_tasks = [row["task"] for row in per_task if row["algo"] == algo]
        point, lo, hi = stratified_bootstrap_ci(normalised[algo], lambda x: iqm(x, axis=-1), LEVEL, resamples, seed)
        mpoint, mlo, mhi = stratified_bootstrap_ci(normalised[algo], lambda x: np.mean(x, axis=-1), LEVEL,
                                                   resamples, seed)
        aggregate[algo] = {"tasks": per_algo_tasks, "runs": int(sum(len(g) for g in normalised[algo])),
                           "iqm": point, "iqm_ci": [lo, hi], "mean": mpoint, "mean_ci": [mlo, mhi]}
    incomplete = {a: sorted(set(tasks) - set(v["tasks"])) for a, v in aggregate.items() if len(v["tasks"]) < len(tasks)}
    return {"level": LEVEL, "resamples": resamples, "seed": seed, "score_ranges": used_ranges,
            "unnormalised_tasks": raw, "missing": incomplete, "per_task": per_task, "aggregate": aggregate}


def markdown(stats: dict) -> str:
    algos = sorted(stats["aggregate"])
    pct = int(round(100 * stats["level"]))
    cells = {(r["task"], r["algo"]): r for r in stats["per_task"]}
    lines = [f"Final return: mean over seeds [{pct}% bootstrap CI] (seeds, env steps per seed)", "",
             "| task | " + " | ".join(algos) + " |", "|---|" + "---|" * len(algos)]
    for task in sorted({r["task"] for r in stats["per_task"]}):
        row = []
        for algo in algos:
            r = cells.get((task, algo))
            row.append("—" if r is None else
                       f"{r['mean']:.1f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}] "
                       f"({r['seeds']}, {r['final_env_steps']:,})")
        lines.append(f"| {task} | " + " | ".join(row) + " |")
    lines += ["", f"Normalised score over all tasks and seeds [{pct}% stratified bootstrap CI]", "",
              "| algo | tasks | runs | IQM | mean |", "|---|---|---|---|---|"]
    for algo in algos:
        a = stats["aggregate"][algo]
        lines.append(f"| {algo} | {len(a['tasks'])} | {a['runs']} | {a['iqm']:.3f} [{a['iqm_ci'][0]:.3f}, "
                     f"{a['iqm_ci'][1]:.3f}] | {a['mean']:.3f} [{a['mean_ci'][0]:.3f}, {a['mean_ci'][1]:.3f}] |")
    notes = ["", "Normalisation (low, high) per task: " + ", ".join(
        f"{t} {lo:g}..{hi:g}" for t, (lo, hi) in stats["score_ranges"].items()) + "."]
    if stats["unnormalised_tasks"]:
        notes.append("Raw (unnormalised) returns pooled for: " + ", ".join(stats["unnormalised_tasks"]) + ".")
    if stats["missing"]:
        notes.append("Missing runs: " + "; ".join(f"{a}: {', '.join(t)}" for a, t in stats["missing"].items()) + ".")
    return "\n".join(lines + notes) + "\n"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(groups, x: str, out: Path, resamples: int, seed: int) -> Path:
    from diffrl.maths.stats import mean_ci_along_last_axis

    plt = _pyplot()
    tasks = sorted(groups)
    algos = sorted({a for g in groups.values() for a in g})
    colors = {a: f"C{i % 10}" for i, a in enumerate(algos)}
    cols = min(3, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.0 * cols, 3.6 * rows), squeeze=False)
    for ax, task in zip(axes.flat, tasks):
        for algo in algos:
            runs = groups[task].get(algo)
            if not runs:
                continue
            grid, values = align([(r[x], r["returns"]) for r in runs])
            mean, lo, hi = mean_ci_along_last_axis(values, LEVEL, resamples, seed)
            ax.plot(grid, mean, color=colors[algo], label=f"{algo} ({values.shape[1]} seeds)")
            ax.fill_between(grid, lo, hi, color=colors[algo], alpha=0.2, linewidth=0)
        ax.set_title(task)
        ax.set_xlabel("environment steps" if x == "env_steps" else "wall-clock seconds (after compilation)")
        ax.set_ylabel("evaluation return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    return save_figure(fig, out)


def plot_aggregate(stats: dict, out: Path) -> Path:
    plt = _pyplot()
    algos = sorted(stats["aggregate"])
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 0.6 * len(algos) + 1.6), squeeze=False)
    for ax, key in zip(axes[0], ("iqm", "mean")):
        for i, algo in enumerate(algos):
            a = stats["aggregate"][algo]
            lo, hi = a[key + "_ci"]
            ax.barh(i, hi - lo, left=lo, height=0.6, color=f"C{i % 10}", alpha=0.5)
            ax.plot([a[key], a[key]], [i - 0.3, i + 0.3], color="k")
        ax.set_yticks(range(len(algos)), algos)
        ax.set_xlabel(f"normalised score ({'IQM' if key == 'iqm' else 'mean'})")
        ax.grid(axis="x", alpha=0.3)
    tasks = len({r["task"] for r in stats["per_task"]})
    fig.suptitle(f"{tasks} task(s): point estimate and {int(round(100 * stats['level']))}% stratified bootstrap CI")
    return save_figure(fig, out)


def plot_iqm_curve(groups, stats: dict, out: Path, resamples: int, seed: int) -> Path:
    """IQM over tasks and seeds of the normalised return at each evaluation point."""
    from diffrl.maths.stats import iqm, normalize, stratified_bootstrap_ci

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    algos = sorted(stats["aggregate"])
    for i, algo in enumerate(algos):
        curves = [(task, r) for task in sorted(groups) for r in groups[task].get(algo, [])]
        try:
            grid, values = align([(r["env_steps"], normalize(r["returns"], *stats["score_ranges"][t]))
                                  for t, r in curves])
        except ValueError:
            continue
        tasks = [t for t, _ in curves]
        strata = [[j for j, t in enumerate(tasks) if t == task] for task in sorted(set(tasks))]
        band = np.array([stratified_bootstrap_ci([values[p, idx] for idx in strata],
                                                 lambda x: iqm(x, axis=-1), LEVEL, resamples, seed)
                         for p in range(len(grid))])
        ax.plot(grid, band[:, 0], color=f"C{i % 10}", label=algo)
        ax.fill_between(grid, band[:, 1], band[:, 2], color=f"C{i % 10}", alpha=0.2, linewidth=0)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("IQM normalised return")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return save_figure(fig, out)


def aggregate(dirs, out: str | Path, score_ranges: dict | None = None, resamples: int = 2000,
              seed: int = 0) -> dict:
    """Read the records of ``dirs`` (one directory or several), write every output to ``out``."""
    dirs = [dirs] if isinstance(dirs, (str, Path)) else list(dirs)
    records = [r for d in dirs for r in read_records(d)]
    groups = group_records(records)
    stats = summarize(groups, score_ranges or {}, resamples, seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "aggregate.json").write_text(json.dumps(stats, indent=2))
    (out / "table.md").write_text(markdown(stats))
    plot_curves(groups, "env_steps", out / "curves_env_steps.png", resamples, seed)
    plot_curves(groups, "walltime", out / "curves_walltime.png", resamples, seed)
    plot_aggregate(stats, out / "iqm.png")
    plot_iqm_curve(groups, stats, out / "iqm_curve.png", resamples, seed)
    return stats


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", help="suite directories (or folders of run records)")
    p.add_argument("--out", help="output directory (default DIR/aggregate of the first DIR)")
    p.add_argument("--score-range", action="append", default=[], help="TASK=LOW:HIGH normalisation (repeatable)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    args = p.parse_args(argv)
    try:
        ranges = parse_score_ranges(args.score_range)
        stats = aggregate(args.dirs, args.out or Path(args.dirs[0]) / "aggregate", ranges, args.resamples, args.seed)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(markdown(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
