"""Late drops in the official REPPO's own published learning curves, by stability.py's definition.

The REPPO paper's repository (github.com/cvoelcker/reppo, commit a7ab85b) ships the raw per-seed
evaluation curves behind its figures as ``results/<Task>_<setting>.csv``: a ``steps`` column and one
``trial_<i>`` column per seed, each curve on a common grid of 20 evaluation points. This script reads
them and applies the test diffrl's stability runs are held to (``stability.seed_statistics``): a seed
*drops* when its return falls more than ``stability.DROP_THRESHOLD`` (0.2) of the random-to-maximum
range below its own best-so-far at an evaluation in the last third of training.

It answers one question: are the late collapses diffrl's REPPO shows on Playground CartpoleBalance
(benchmarks/results/stability/) a property of REPPO, or of diffrl's implementation? The settings
read are the repository's file suffixes: ``small_data`` (1024 envs x 32 steps per update, the
paper's small-data REPPO), ``medium_data`` (1024 x 64), ``large_data`` and ``ppo`` (its PPO baseline).

Two things make the counts *lower bounds* on the drops the runs had:

* the random policy's return is not in the repository; every DM Control task's maximum is 1000, so
  by default the range is [0, 1000] (a fall of 200 points), wider than [random, 1000] for any
  random return > 0. ``--random TASK=R`` gives a measured floor (CartpoleBalance: 356.7, the mean
  over 256 random episodes that stability.py measures);
* 20 points per curve miss drops that came and went between two of them.

Usage (a checkout of the repository; this script fetches nothing):

    git clone https://github.com/cvoelcker/reppo ~/reppo && git -C ~/reppo checkout a7ab85b
    python benchmarks/reference_drops.py --results ~/reppo/results --random CartpoleBalance=356.7 \\
        --out benchmarks/results/reference_reppo/late_drops.md
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from stability import DROP_THRESHOLD, seed_statistics

DMC_TASKS = (
    "AcrobotSwingup", "AcrobotSwingupSparse", "BallInCup", "CartpoleBalance", "CartpoleBalanceSparse",
    "CartpoleSwingup", "CartpoleSwingupSparse", "CheetahRun", "FingerSpin", "FingerTurnEasy",
    "FingerTurnHard", "FishSwim", "HopperHop", "HopperStand", "HumanoidRun", "HumanoidStand",
    "HumanoidWalk", "PendulumSwingup", "PointMass", "ReacherEasy", "ReacherHard", "SwimmerSwimmer6",
    "WalkerRun", "WalkerStand", "WalkerWalk")
"""The Playground DM Control tasks of REPPO's table (every reward in [0, 1] over 1000 steps)."""
DMC_MAX_RETURN = 1000.0
SETTINGS = ("small_data", "medium_data", "large_data", "ppo")
PREAMBLE = """# Late drops in the official REPPO's published learning curves

`results/<Task>_<setting>.csv` of github.com/cvoelcker/reppo at a7ab85b (the REPPO paper's raw
per-seed evaluation curves, 20 points each), read with stability.py's test: a seed drops when its
return falls more than 0.2 of the [floor, 1000] range below its own best-so-far at a point in the
last third. The floor is 0 unless a measured random return is given (CartpoleBalance: 356.7), so
these counts are lower bounds (benchmarks/reference_drops.py's docstring).

    {command}

"""


def read_curves(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One results CSV -> (steps (E,), returns (E, seeds)). Refuses a file without trial columns."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    if not header or header[0] != "steps" or not all(h.startswith("trial_") for h in header[1:]) or len(header) < 2:
        raise ValueError(f"{path}: expected a header 'steps,trial_0,...', got {header[:4]}")
    table = np.asarray([[float(x) for x in row] for row in rows[1:] if row], np.float64)
    return table[:, 0], table[:, 1:]


def summarise(results: Path, tasks, settings, floors: dict[str, float]) -> list[dict]:
    """One row per (task, setting) whose CSV exists: seeds, seeds dropping, largest drop, finals."""
    rows = []
    for setting in settings:
        for task in tasks:
            path = results / f"{task}_{setting}.csv"
            if not path.exists():
                continue
            steps, returns = read_curves(path)
            low = floors.get(task, 0.0)
            # stability.py's per-seed statistics, the last evaluation's step as the training length
            stats = seed_statistics(steps, returns, low, DMC_MAX_RETURN, float(steps[-1]))
            drops = np.array([s["worst_drop"] for s in stats])
            rows.append({"task": task, "setting": setting, "seeds": returns.shape[1], "floor": low,
                         "dropping": int(np.sum(drops > DROP_THRESHOLD)), "largest": float(np.nanmax(drops)),
                         "dropped_finals": [round(float(r)) for r, d in zip(returns[-1], drops) if d > DROP_THRESHOLD]})
    return rows


def report(rows: list[dict]) -> str:
    lines = ["## Per setting (every task pooled)", "",
             "| setting | tasks | seeds | seeds dropping > 0.2 late | tasks with a dropping seed |",
             "|---|---|---|---|---|"]
    for setting in dict.fromkeys(r["setting"] for r in rows):
        sub = [r for r in rows if r["setting"] == setting]
        seeds = sum(r["seeds"] for r in sub)
        dropping = sum(r["dropping"] for r in sub)
        with_drop = sorted(r["task"] for r in sub if r["dropping"])
        lines.append(f"| {setting} | {len(sub)} | {seeds} | {dropping} ({100.0 * dropping / seeds:.1f} %) | "
                     f"{', '.join(with_drop) or '-'} |")
    lines += ["", "## Every (task, setting) with a dropping seed", "",
              "| task | setting | floor | seeds | dropping | largest drop | final return of those seeds |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["dropping"]:
            lines.append(f"| {r['task']} | {r['setting']} | {r['floor']:g} | {r['seeds']} | {r['dropping']} | "
                         f"{r['largest']:.2f} | {', '.join(map(str, r['dropped_finals']))} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", required=True, help="the results/ folder of a cvoelcker/reppo checkout")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="file suffixes to read, comma-separated")
    parser.add_argument("--tasks", default=",".join(DMC_TASKS), help="task names, comma-separated")
    parser.add_argument("--random", nargs="*", default=[], metavar="TASK=R",
                        help="a measured random-policy return as the range's floor (default 0)")
    parser.add_argument("--out", help="write the report here too")
    args = parser.parse_args(argv)
    results = Path(args.results).expanduser()
    if not results.is_dir():
        parser.error(f"--results {results}: no such folder (see this file's docstring for the checkout)")
    floors = {}
    for item in args.random:
        task, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--random {item!r}: expected TASK=RETURN")
        floors[task] = float(value)
    rows = summarise(results, args.tasks.split(","), args.settings.split(","), floors)
    if not rows:
        parser.error(f"no <Task>_<setting>.csv for those tasks and settings in {results}")
    text = PREAMBLE.format(command=" ".join(["python", "benchmarks/reference_drops.py"] + sys.argv[1:])) + report(rows)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
