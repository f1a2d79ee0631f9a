"""Training throughput against the number of environments and of devices, side by side.

Usage:
    python benchmarks/scaling.py --env playground/CartpoleSwingup --algos ppo,reppo \
        --num-envs 64,256,1024 --devices 1,2 --out benchmarks/results/scaling

For every (algorithm, devices, num_envs) one compiled chunk of ``--iterations``
training iterations (rollout + update, the algorithm's preset for the env otherwise,
``num_steps`` from the preset) is built exactly as the trainer builds it: traced
under a mesh of that many devices (``diffrl.plumbing.sharding``), env batch split over
it, parameters replicated. Each chunk is then timed ``--repeats`` times, round-robin
over all contenders so machine noise hits them alike; the best time counts.
On a CPU the devices are virtual (``jax_num_cpu_devices``, set here before JAX
starts), each an XLA CPU client sharing the machine's cores.

Writes ``scaling.json`` (every measurement) and ``scaling.md`` (a table: env steps
per second, and the 2-device / 1-device ratio) into ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="playground/CartpoleSwingup")
    p.add_argument("--algos", default="ppo,reppo")
    p.add_argument("--num-envs", default="64,256,1024,4096")
    p.add_argument("--devices", default="1,2")
    p.add_argument("--iterations", type=int, default=2, help="training iterations per compiled chunk")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per contender (best counts)")
    p.add_argument("--out", default="benchmarks/results/scaling")
    p.add_argument("--note", default="", help="free text stored with the results (machine load...)")
    return p.parse_args(argv)


def build_chunk(algo: str, env: str, num_envs: int, devices: int, iterations: int):
    """Compile one chunk; returns (call, state, config, compile seconds)."""
    import jax

    from diffrl.core.build import build
    from diffrl.core.loop import make_components, state_shardings
    from diffrl.plumbing.sharding import make_mesh, matmul_precision
    from diffrl.config.presets import resolve

    config = resolve(algo, env, None).replace(num_envs=num_envs, num_devices=devices,
                                              chunk_iterations=iterations, num_seeds=1)
    config = config.replace(total_env_steps=config.batch_size * iterations)
    env_, algo_, _ = build(config)
    comps = make_components(config, env_, algo_)
    mesh = make_mesh(devices)
    t0 = time.perf_counter()
    with jax.set_mesh(mesh), matmul_precision(config.matmul_precision):
        key = jax.random.PRNGKey(0)
        shardings = state_shardings(jax.eval_shape(comps.init, key), mesh, seed_axis=False)
        state = jax.jit(comps.init, out_shardings=shardings)(key)
        chunk = jax.jit(comps.chunk, in_shardings=(shardings,), out_shardings=(shardings, None),
                        donate_argnums=0).lower(state).compile()
        state, _ = chunk(state)  # warm-up call
        jax.block_until_ready(state)
    return chunk, state, config, time.perf_counter() - t0


def markdown(rows: list[dict], devices: list[int]) -> str:
    head = "| algo | num_envs | " + " | ".join(f"{d} device(s): steps/s" for d in devices)
    ratio = len(devices) > 1
    head += f" | {devices[-1]}/{devices[0]} device ratio |" if ratio else " |"
    lines = [head, "|" + "---|" * (2 + len(devices) + int(ratio))]
    keys = sorted({(r["algo"], r["num_envs"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for algo, n in keys:
        sps = {r["devices"]: r["sps"] for r in rows if r["algo"] == algo and r["num_envs"] == n}
        cells = [f"{sps[d]:,.0f}" if d in sps else "" for d in devices]
        line = f"| {algo} | {n} | " + " | ".join(cells)
        if ratio:
            a, b = sps.get(devices[0]), sps.get(devices[-1])
            line += f" | {b / a:.2f}x |" if a and b else " | |"
        else:
            line += " |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    args = parse_args(argv)
    devices = [int(x) for x in args.devices.split(",")]
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    if os.environ["JAX_PLATFORMS"] == "cpu":
        jax.config.update("jax_num_cpu_devices", max(devices))
    contenders = []
    for algo in args.algos.split(","):
        for n in [int(x) for x in args.num_envs.split(",")]:
            for d in devices:
                chunk, state, config, compile_s = build_chunk(algo, args.env, n, d, args.iterations)
                print(f"compiled {algo} N={n} devices={d} in {compile_s:.1f}s", flush=True)
                contenders.append({"algo": algo, "num_envs": n, "devices": d, "num_steps": config.num_steps,
                                   "chunk": chunk, "state": state, "compile_s": compile_s, "times": []})
    for _ in range(args.repeats):
        for c in contenders:
            t0 = time.perf_counter()
            c["state"], metrics = c["chunk"](c["state"])
            jax.block_until_ready((c["state"], metrics))
            c["times"].append(time.perf_counter() - t0)
    rows = []
    for c in contenders:
        steps = args.iterations * c["num_envs"] * c["num_steps"]
        rows.append({k: c[k] for k in ("algo", "num_envs", "devices", "num_steps", "compile_s", "times")}
                    | {"sps": steps / min(c["times"]), "env_steps_per_chunk": steps})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"env": args.env, "iterations_per_chunk": args.iterations, "repeats": args.repeats,
            "platform": jax.devices()[0].platform, "cpu_count": os.cpu_count(), "machine": platform.machine(),
            "jax": jax.__version__, "note": args.note}
    (out / "scaling.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    table = markdown(rows, devices)
    (out / "scaling.md").write_text(
        f"# Training steps/s on {args.env} ({meta['platform']}, {meta['cpu_count']} cores)\n\n"
        f"Best of {args.repeats} chunks of {args.iterations} iterations each; preset settings otherwise. "
        f"{args.note}\n\n" + table)
    print(table)


if __name__ == "__main__":
    main()
