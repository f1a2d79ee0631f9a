"""Simulator and training throughput on a Playground humanoid task, in one process.

Usage:
    python benchmarks/humanoid_sps.py --env playground/G1JoystickFlatTerrain \
        --env-counts 64,256 --train-preset reppo-humanoid-cpu --json benchmarks/results/humanoid_sps.json

For each count in ``--env-counts``, the wrapped, batched env the trainer uses (auto-reset
included) is stepped with uniform random actions inside ``lax.scan`` of ``--num-steps``
steps (``benchmarks/sps.py:env_only``). Then one compiled training iteration (rollout +
update) of ``--train-preset`` at its own ``num_envs`` x ``num_steps``. Reported: env steps
per second after compilation (best of ``--iterations`` timed calls, round-robin so
machine noise hits all contenders alike), and compile times (reset + the compiled call).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sps import env_only, training  # noqa: E402


def main(argv=None) -> int:
    from diffrl.config.presets import apply_preset, resolve

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="playground/G1JoystickFlatTerrain")
    p.add_argument("--env-counts", default="64,256")
    p.add_argument("--num-steps", type=int, default=32)
    p.add_argument("--train-preset", default="reppo-humanoid-cpu", help="'' skips the training contender")
    p.add_argument("--iterations", type=int, default=3, help="timed calls per contender")
    p.add_argument("--note", default="", help="free text stored with the results (e.g. machine load)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    contenders = {}
    for n in [int(x) for x in args.env_counts.split(",")]:
        config = resolve("ppo", args.env, None).replace(num_envs=n, num_steps=args.num_steps,
                                                        total_env_steps=n * args.num_steps * 10)
        print(f"[humanoid_sps] compiling env x{n}", file=sys.stderr, flush=True)
        call, compile_s = env_only(config)
        call()  # warm-up
        contenders[f"env_{n}"] = {"call": call, "compile_s": compile_s, "times": [],
                                  "steps": n * args.num_steps, "num_envs": n, "num_steps": args.num_steps}
    if args.train_preset:
        from diffrl.config import TrainConfig

        config = apply_preset(TrainConfig(env=args.env), args.train_preset)
        print(f"[humanoid_sps] compiling {args.train_preset}", file=sys.stderr, flush=True)
        call, compile_s = training(config)
        call()
        contenders[f"train_{args.train_preset}"] = {
            "call": call, "compile_s": compile_s, "times": [], "steps": config.batch_size,
            "num_envs": config.num_envs, "num_steps": config.num_steps}
    for _ in range(args.iterations):
        for c in contenders.values():
            t0 = time.perf_counter()
            c["call"]()
            c["times"].append(time.perf_counter() - t0)
    results = {
        "env": args.env, "devices": [str(d) for d in jax.devices()], "cpu_count": os.cpu_count(),
        "load_average_1min_at_end": os.getloadavg()[0], "note": args.note,
        "date": time.strftime("%Y-%m-%d"), "contenders": {},
    }
    print(f"{'contender':32s} {'SPS':>10s} {'s/call':>8s} {'compile s':>10s}")
    for name, c in contenders.items():
        best = min(c["times"])
        row = {"sps": c["steps"] / best, "seconds_per_call": best, "compile_s": c["compile_s"],
               "num_envs": c["num_envs"], "num_steps": c["num_steps"], "times": c["times"]}
        results["contenders"][name] = row
        print(f"{name:32s} {row['sps']:10,.0f} {best:8.3f} {c['compile_s']:10.1f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
