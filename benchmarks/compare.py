"""Train several algorithms on the same tasks with the same budget and seeds; write a table.

Usage (the command behind the committed tables):

    python benchmarks/compare.py --algos ppo,reppo --envs playground/CartpoleSwingup \
        --total-env-steps 2000000 --num-seeds 2 --out benchmarks/results/cpu_cartpole

Each (algo, env) pair trains ``--num-seeds`` vmapped seeds with the algorithm's tuned
default preset for the env family (override any field with ``--set key=value``,
dotted names allowed, applied to every run). Writes one run directory per pair under
``OUT/runs/``, ``OUT/results.json`` and ``OUT/table.md`` (final evaluation return mean
and std over seeds for every evaluation sampler, wall-clock, training SPS, compile
time), and a learning-curve figure ``OUT/curves.png``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules when imported from elsewhere
from grid import cell_config, cells, evaluated_samplers, parse_settings, run_grid  # noqa: E402


def run_pair(algo: str, env: str, args, overrides: dict) -> dict:
    from diffrl.core.trainer import Trainer

    config = cell_config(algo, env, None, overrides, total_env_steps=args.total_env_steps,
                         num_seeds=args.num_seeds, seed=args.seed, num_evals=args.num_evals, progress=False,
                         out=str(Path(args.out) / "runs" / f"{env.replace('/', '_')}-{algo}"))
    if args.samplers:
        wanted, note = evaluated_samplers(config, args.samplers.split(","))
        if note:
            print(f"[compare] {algo}: {note}", file=sys.stderr, flush=True)
        config = config.replace(eval_samplers=wanted)
    trainer = Trainer(config)
    t0 = time.perf_counter()
    summary = trainer.run()
    summary["total_wall_s"] = time.perf_counter() - t0
    summary["samplers"] = list(trainer.samplers)
    summary["iteration_s"] = summary["train_time_s"] / (config.num_chunks * config.iterations_per_chunk)
    return summary


def table(results: list[dict]) -> str:
    lines = ["| env | algo | sampler | env steps | return (mean ± std over seeds) | train time s | iteration s | "
             "train SPS | compile s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        compile_s = r.get("compile/init_s", 0) + r.get("compile/chunk_s", 0)
        for i, sampler in enumerate(r["samplers"]):
            prefix = "eval/" if i == 0 else f"eval/{sampler}/"
            seeds = np.asarray(r["final"].get(prefix + "seed_returns", [np.nan]))
            lines.append(
                f"| {r['env']} | {r['algo']} | {sampler} | {r['env_steps']:,} | "
                f"{seeds.mean():.1f} ± {seeds.std():.1f} | {r['train_time_s']:.0f} | {r['iteration_s']:.3f} | "
                f"{r['train_sps']:,.0f} | {compile_s:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algos", required=True, help="comma-separated algorithm names")
    p.add_argument("--envs", required=True, help="comma-separated environment names")
    p.add_argument("--total-env-steps", type=int, required=True)
    p.add_argument("--num-seeds", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-evals", type=int, default=10)
    p.add_argument("--samplers", default="", help="evaluation samplers to report where offered")
    p.add_argument("--set", action="append", default=[],
                   help="override key=value for every run (or algo:key=value for one algorithm)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    overrides = parse_settings(args.set)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def record(results):
        (out / "results.json").write_text(json.dumps(results, indent=2))

    def announce(cell):
        print(f"[compare] {cell.algo} on {cell.env}", file=sys.stderr, flush=True)

    results = run_grid(cells(args.algos.split(","), args.envs.split(",")),
                       lambda cell: run_pair(cell.algo, cell.env, args, overrides), announce=announce, after=record)
    text = table(results)
    header = (f"Command: `python benchmarks/compare.py {' '.join(argv if argv is not None else sys.argv[1:])}`\n\n")
    (out / "table.md").write_text(header + text + "\n")
    from diffrl.artefacts.plotting import plot_runs

    plot_runs(sorted((out / "runs").iterdir()), str(out / "curves.png"))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
