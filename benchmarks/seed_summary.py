"""Per-seed summary of `diffrl train --num-seeds K` runs: final medians with 95% bootstrap intervals,
the median curve of each per-seed evaluation metric, and a plot.

    python benchmarks/seed_summary.py RUN_DIR [RUN_DIR ...] --out OUT [--metrics seed_returns,seed_success_rate]

Reads each run directory's ``metrics.jsonl`` (the evaluation rows' ``eval/<metric>`` lists, one value per
seed) and ``config.json``, and writes ``OUT/table.md`` (per run: each metric's final median over seeds with
its 95% percentile-bootstrap interval, IQM, the per-seed final values, and the median at every evaluation)
and ``OUT/curves.png`` (median over seeds against env steps, with the interquartile band). Evidence is
multi-seed: use >= 5 seeds for figures worth quoting.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from diffrl.maths.stats import bootstrap_ci, iqm


def read_run(run_dir: Path, metrics: list[str]) -> dict:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "eval/seed_returns" in r]
    config = json.loads((run_dir / "config.json").read_text())
    config = config.get("config", config)
    out = {"name": f"{config.get('algo')} on {config.get('env')}", "env_steps": np.array([r["env_steps"] for r in rows]),
           "walltime": np.array([r.get("walltime", np.nan) for r in rows])}
    for m in metrics:
        if all(f"eval/{m}" in r for r in rows):
            out[m] = np.array([r[f"eval/{m}"] for r in rows], np.float64)  # (E, K)
    return out


def table(runs: list[dict], metrics: list[str]) -> str:
    lines = []
    for run in runs:
        k = next(run[m].shape[1] for m in metrics if m in run)
        lines += [f"### {run['name']} ({k} seeds, {int(run['env_steps'][-1]):,} env steps, "
                  f"{run['walltime'][-1]:,.0f} s of training and evaluation)", "",
                  "| metric | final median [95% CI] | final IQM | final per seed | median at each evaluation |",
                  "|---|---|---:|---|---|"]
        for m in metrics:
            if m not in run:
                continue
            final = run[m][-1]
            med, lo, hi = bootstrap_ci(final, statistic=lambda x: np.median(x, axis=-1))
            curve = ", ".join(f"{np.median(v):.3g}" for v in run[m])
            per_seed = " ".join(f"{x:.3g}" for x in final)
            lines.append(f"| {m} | {med:.3g} [{lo:.3g}, {hi:.3g}] | {iqm(final):.3g} | {per_seed} | {curve} |")
        steps = ", ".join(f"{int(s):,}" for s in run["env_steps"])
        lines += ["", f"Evaluations at env steps {steps}.", ""]
    return "\n".join(lines)


def plot(runs: list[dict], metrics: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [m for m in metrics if any(m in r for r in runs)]
    fig, axes = plt.subplots(1, len(shown), figsize=(5 * len(shown), 3.6), squeeze=False)
    for ax, m in zip(axes[0], shown):
        for run in runs:
            if m not in run:
                continue
            q25, q50, q75 = np.percentile(run[m], [25, 50, 75], axis=1)
            ax.plot(run["env_steps"], q50, marker="o", label=run["name"])
            ax.fill_between(run["env_steps"], q25, q75, alpha=0.2)
        ax.set_xlabel("env steps (per seed)")
        ax.set_title(f"eval/{m}", fontsize=10)
        ax.set_ylabel("median over seeds (IQR band)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="run directories")
    p.add_argument("--out", required=True)
    p.add_argument("--metrics", default="seed_returns,seed_success_rate")
    args = p.parse_args(argv)
    metrics = [m for m in args.metrics.split(",") if m]
    runs = [read_run(Path(r), metrics) for r in args.runs]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = table(runs, metrics)
    (out / "table.md").write_text(text + "\n")
    plot(runs, metrics, out / "curves.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
