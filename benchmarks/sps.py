"""Simulator-alone vs training throughput, side by side in one process.

Usage:
    python benchmarks/sps.py --env playground/CartpoleSwingup --algos ppo,reppo,trudi \
        --num-envs 256 --num-steps 32 --iterations 5 --json benchmarks/results/sps_cartpole.json

For the environment alone, the same wrapped, batched env the trainer uses is stepped
with uniform random actions inside ``lax.scan`` (auto-reset included). For each
algorithm, one compiled training iteration (rollout + update) with that algorithm's
default preset at the same ``num_envs`` x ``num_steps``. Reported: env steps per
second, the ratio training/simulator, and compile times. Timings alternate between the
contenders round-robin so machine noise hits all of them alike.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp


def env_only(config):
    from diffrl.core.build import build

    env, _, _ = build(config)
    n, t, d = config.num_envs, config.num_steps, env.spec.action_size

    def rollout(state, key):
        def step(s, k):
            s = env.step(s, jax.random.uniform(k, (n, d), minval=-1.0, maxval=1.0))
            return s, jnp.mean(s.reward)

        state, rewards = jax.lax.scan(step, state, jax.random.split(key, t))
        return state, jnp.sum(rewards)

    t0 = time.perf_counter()
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), n))
    fn = jax.jit(rollout, donate_argnums=0).lower(state, jax.random.PRNGKey(1)).compile()
    compile_s = time.perf_counter() - t0
    holder = {"state": state, "key": jax.random.PRNGKey(2)}

    def call():
        holder["key"], k = jax.random.split(holder["key"])
        holder["state"], r = fn(holder["state"], k)
        jax.block_until_ready(r)

    return call, compile_s


def training(config):
    from diffrl.core.build import build
    from diffrl.core.loop import make_components

    env, algo, _ = build(config)
    comps = make_components(config, env, algo)
    t0 = time.perf_counter()
    state = jax.jit(comps.init)(jax.random.PRNGKey(0))
    fn = jax.jit(comps.iteration, donate_argnums=0).lower(state).compile()
    compile_s = time.perf_counter() - t0
    holder = {"state": state}

    def call():
        holder["state"], m = fn(holder["state"])
        jax.block_until_ready(m)

    return call, compile_s


def main(argv=None) -> int:
    from diffrl.config.presets import resolve

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", required=True)
    p.add_argument("--algos", default="ppo,reppo")
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--num-steps", type=int, default=32)
    p.add_argument("--iterations", type=int, default=5, help="timed calls per contender")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    contenders = {}
    for name in ["env"] + args.algos.split(","):
        algo = "ppo" if name == "env" else name
        config = resolve(algo, args.env, None).replace(num_envs=args.num_envs, num_steps=args.num_steps,
                                                       total_env_steps=args.num_envs * args.num_steps * 10)
        print(f"[sps] compiling {name}", file=sys.stderr, flush=True)
        call, compile_s = (env_only if name == "env" else training)(config)
        call()  # warm-up
        contenders[name] = {"call": call, "compile_s": compile_s, "times": []}
    for _ in range(args.iterations):
        for c in contenders.values():
            t0 = time.perf_counter()
            c["call"]()
            c["times"].append(time.perf_counter() - t0)
    steps = args.num_envs * args.num_steps
    results = {"env": args.env, "num_envs": args.num_envs, "num_steps": args.num_steps,
               "devices": [str(d) for d in jax.devices()], "contenders": {}}
    env_time = min(contenders["env"]["times"])
    print(f"{'contender':10s} {'SPS':>12s} {'s/iteration':>12s} {'x env time':>11s} {'compile s':>10s}")
    for name, c in contenders.items():
        best = min(c["times"])
        row = {"sps": steps / best, "seconds_per_iteration": best, "ratio_to_env": best / env_time,
               "compile_s": c["compile_s"], "times": c["times"]}
        results["contenders"][name] = row
        print(f"{name:10s} {row['sps']:12,.0f} {best:12.3f} {row['ratio_to_env']:11.1f} {c['compile_s']:10.1f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
