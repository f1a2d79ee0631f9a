"""The trust-region ablations and the baselines in one table: final return, median and IQM over seeds.

The runs are ``benchmarks/stability.py`` runs (each (algo, env) pair trains its seeds in one vmapped
program, with ``--set`` for an ablation's mode); this script only reads their records and tabulates
the final evaluation of each pair, normalised as stability.py does ((R - R_random) / (R_max -
R_random)), with the raw median, and 95 % percentile-bootstrap intervals of the median and the IQM.

    python benchmarks/ablation.py --out benchmarks/results/ablation/table.md \\
        "TruDi: trajectory=benchmarks/results/ablation/cartpole_swingup_trudi_trajectory" \\
        "TruDi: action (dime)=benchmarks/results/ablation/cartpole_swingup_dime" ...

Each LABEL=DIR contributes a row per (env, algo) record in DIR. The commands behind the committed
table are in ``benchmarks/results/ablation/README.md``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from diffrl.maths.stats import bootstrap_ci, iqm


def rows_of(label: str, directory: Path) -> list[dict]:
    rows = []
    for path in sorted(directory.glob("*.json")):
        record = json.loads(path.read_text())
        if "per_sampler" not in record:
            continue
        sampler = record["samplers"][0]
        seeds = record["per_sampler"][sampler]["seeds"]
        final = np.array([s["final"] for s in seeds])
        raw = np.array([s["final_raw"] for s in seeds])
        rows.append({"label": label, "env": record["env"], "algo": record["algo"], "sampler": sampler,
                     "seeds": len(seeds), "steps": record["trained_env_steps"], "final": final, "raw": raw,
                     "drops": sum(s["worst_drop"] > 0.2 for s in seeds), "wall_s": record.get("wall_s")})
    if not rows:
        raise SystemExit(f"{directory}: no stability records (*.json with per_sampler)")
    return rows


def _ci(values: np.ndarray, statistic) -> str:
    point, low, high = bootstrap_ci(values, statistic=lambda x: np.apply_along_axis(statistic, -1, x))
    return f"{point:.3f} [{low:.3f}, {high:.3f}]"


def table(rows: list[dict]) -> str:
    lines = ["| task | run | algo (sampler) | seeds | env steps | final, median [95% CI] | final, IQM [95% CI] "
             "| raw median | seeds dropping > 0.2 | wall s |",
             "|---|---|---|---:|---:|---|---|---:|---:|---:|"]
    for r in rows:
        wall = "-" if r["wall_s"] is None else f"{r['wall_s']:.0f}"
        lines.append(f"| {r['env'].split('/')[-1]} | {r['label']} | {r['algo']} ({r['sampler']}) | {r['seeds']} "
                     f"| {r['steps']:,} | {_ci(r['final'], np.median)} | {_ci(r['final'], iqm)} "
                     f"| {np.median(r['raw']):.0f} | {r['drops']}/{r['seeds']} | {wall} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="LABEL=DIR")
    p.add_argument("--out", required=True, help="markdown table to write")
    args = p.parse_args(argv)
    rows = []
    for item in args.runs:
        label, sep, directory = item.partition("=")
        if not sep:
            p.error(f"expected LABEL=DIR, got {item!r}")
        rows += rows_of(label, Path(directory))
    text = table(rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
