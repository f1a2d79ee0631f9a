"""Which late drops of benchmarks/stability.py's runs the training itself shared.

A seed *drops* when its normalised evaluation return falls more than 0.2 below its own best at an
evaluation in the last third of training (``stability.worst_drop_at``, the tables' definition).
Evaluations are fresh episodes from reset states with the sampler named; training returns are the
stochastic policy's, on the running batch, each policy acting for one iteration (``num_steps`` steps
per env) before the next update. This script puts each drop next to the training reward per step of
the same seed (``train/reward`` in the run's ``.npz``) over the evaluation interval that ends at the
drop and the ``--after`` iterations that follow it (the evaluated policy's own rollout and the next
few), against a baseline (its mean over the ``--baseline`` iterations before that interval):

* ``training``: the training reward fell too (its minimum in the interval below ``--ratio`` times
  the baseline): the policy being trained lost the task;
* ``evaluation``: it did not: the evaluated behaviour failed while the training episodes went on
  as before.

Usage:

    python benchmarks/stability_drops.py "preset=benchmarks/results/stability/cartpole_balance_reppo_shared_pass" ...
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from stability import DROP_THRESHOLD, worst_drop_at


def drops(record: dict, train_reward: np.ndarray, sampler: str, baseline: int = 40,
          ratio: float = 0.9, after: int = 5) -> list[dict]:
    """Each seed of ``record`` (a stability.py JSON) whose ``sampler`` drops > DROP_THRESHOLD in the
    last third, with the training reward around its worst drop. train_reward: (seeds, iterations)."""
    steps = np.asarray(record["env_steps"], np.float64)
    returns = np.asarray(record["per_sampler"][sampler]["returns"], np.float64)  # (E, seeds)
    low, high = record["random_return"], record["max_return"]
    norm = (returns - low) / (high - low)
    total = float(record["trained_env_steps"])
    per_iteration = total / train_reward.shape[1]
    out = []
    for seed in range(norm.shape[1]):
        at = worst_drop_at(steps, norm[:, seed], total)
        if at is None or not at[1] > DROP_THRESHOLD:
            continue
        e, fall = at
        start = int(round(steps[e - 1] / per_iteration)) if e > 0 else 0
        end = int(round(steps[e] / per_iteration))
        interval = train_reward[seed, start:end + after]
        before = train_reward[seed, max(0, start - baseline):start]
        if before.size == 0:  # a drop at the first evaluation: nothing to compare with
            kind, base = "unknown", float("nan")
        else:
            base = float(before.mean())
            kind = "training" if interval.min() < ratio * base else "evaluation"
        out.append({"seed": seed, "env_steps": int(steps[e]), "drop": fall,
                    "eval": float(norm[e, seed]), "train_before": base,
                    "train_min": float(interval.min()), "kind": kind})
    return out


def load(directory: Path) -> list[tuple[dict, dict]]:
    """(record, metrics) for every pair in a stability.py output directory."""
    pairs = []
    for path in sorted(directory.glob("*.json")):
        npz = path.with_suffix(".npz")
        if npz.exists():
            with np.load(npz) as z:
                pairs.append((json.loads(path.read_text()), {k: z[k] for k in z.files}))
    return pairs


def report(labelled: list[str], baseline: int = 40, ratio: float = 0.9, after: int = 5) -> str:
    lines = ["| run | algo | sampler | seed | env steps | drop | eval | train reward before -> min | kind |",
             "|---|---|---|---|---|---|---|---|---|"]
    kinds: dict[str, int] = {}
    for item in labelled:
        label, _, directory = item.rpartition("=")
        for record, metrics in load(Path(directory)):
            for sampler in record["per_sampler"]:
                for d in drops(record, metrics["train__reward"], sampler, baseline, ratio, after):
                    kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
                    lines.append(f"| {label or directory} | {record['algo']} | {sampler} | {d['seed']} | "
                                 f"{d['env_steps']} | {d['drop']:.2f} | {d['eval']:.2f} | "
                                 f"{d['train_before']:.3f} -> {d['train_min']:.3f} | {d['kind']} |")
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) or "no drops"
    return "\n".join(lines) + f"\n\nDrops by kind: {counts}.\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="LABEL=DIR (stability.py output directories)")
    parser.add_argument("--baseline", type=int, default=40, help="iterations before the interval averaged")
    parser.add_argument("--ratio", type=float, default=0.9, help="a training drop: min < ratio x baseline")
    parser.add_argument("--after", type=int, default=5, help="iterations after the evaluation included")
    parser.add_argument("--out", help="write the table here too")
    args = parser.parse_args(argv)
    text = report(args.runs, args.baseline, args.ratio, args.after)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
