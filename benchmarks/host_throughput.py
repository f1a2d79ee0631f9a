"""Host-environment throughput: env steps/s against the number of worker processes.

Tasks are host-environment names (``dmc/walker-walk``, ``maniskill/PickCube-v1``; a bare name is a
dm_control task). Measured side by side in one run (this machine is noisy), for each task:

* ``sim alone``: one env stepped in a plain Python loop with random actions (the simulator's
  single-threaded ceiling);
* ``batch, W workers``: ``diffrl.envs.host`` batches of ``--num-envs`` envs (time limit, auto-reset
  and statistics included) stepped with random actions, W = 0 (in this process) and 1, 2, 4 worker
  processes;
* optionally gymnasium's ``AsyncVectorEnv`` (``--gymnasium``: one process per env, its design) on
  the same task;
* optionally ``envpool`` (``--envpool-python``: a Python with envpool installed; it needs
  Python >= 3.11 and the envpool asset packages, so it is not a diffrl dependency): its
  ``dm_control`` port of the same task at the same batch size, ``num_threads`` = 2.

* optionally, for ``maniskill/`` tasks, ManiSkill's batched scene (``--scene-sizes 1024,4096``:
  ``diffrl.envs.maniskill_batch``, every env in one process, actions in and steps out as JAX arrays
  through DLPack) on ``--scene-backend physx_cuda`` (a GPU with CUDA builds of torch and JAX;
  ``physx_cpu`` holds one env and only rehearses the code).

    python benchmarks/host_throughput.py --gymnasium --envpool-python /path/to/envpool/venv/bin/python
    python benchmarks/host_throughput.py --tasks maniskill/PushCube-v1,maniskill/PickCube-v1 \
        --out benchmarks/results/host_throughput_maniskill
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

TASKS = ("dmc/cartpole-balance", "dmc/walker-walk", "dmc/humanoid-walk", "dmc/dog-run")
ENVPOOL_NAMES = {"dmc/cartpole-balance": "CartpoleBalance-v1", "dmc/walker-walk": "WalkerWalk-v1",
                 "dmc/humanoid-walk": "HumanoidWalk-v1", "dmc/dog-run": "DogRun-v1"}
"""envpool's names for the same dm_control tasks (None: envpool has no port)."""


def host_name(task: str) -> str:
    return task if "/" in task else f"dmc/{task}"


def sim_alone(task: str, seconds: float) -> float:
    from diffrl.envs.registry import single_env_factory

    env = single_env_factory(host_name(task))()
    rng = np.random.default_rng(0)
    low, high = np.array(env.spec.action_low), np.array(env.spec.action_high)
    env.reset(0)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, _, term, trunc = env.step(rng.uniform(low, high))
        n += 1
        if term or trunc:
            env.reset(n)
    return n / (time.perf_counter() - t0)


def batched(task: str, num_envs: int, workers: int, seconds: float) -> float:
    from diffrl.envs.host import make_vec_env
    from diffrl.envs.registry import single_env_factory

    vec = make_vec_env(single_env_factory(host_name(task)), num_envs, workers)
    try:
        rng = np.random.default_rng(0)
        vec.reset(0)
        vec.step(rng.uniform(-1, 1, (num_envs, vec.spec.action_size)))  # workers warm
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            vec.step(rng.uniform(-1, 1, (num_envs, vec.spec.action_size)))
            n += num_envs
        return n / (time.perf_counter() - t0)
    finally:
        vec.close()


def scene_rate(task: str, num_envs: int, backend: str, seconds: float) -> float:
    """env steps/s of ManiSkill's batched scene, policy-side arrays (JAX) in and out, synchronised."""
    import jax
    import jax.numpy as jnp

    from diffrl.envs.maniskill_batch import ManiSkillBatchVecEnv

    env = ManiSkillBatchVecEnv(host_name(task).partition("/")[2], num_envs, sim_backend=backend)
    try:
        keys = jax.random.split(jax.random.PRNGKey(0), 64)
        draw = jax.jit(lambda k: jax.random.uniform(k, (num_envs, env.spec.action_size), jnp.float32, -1, 1))
        actions = [draw(k) for k in keys]
        env.reset(0)
        jax.block_until_ready(env.step(actions[0]).obs)  # warm
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            out = env.step(actions[n // num_envs % len(actions)])
            n += num_envs
        jax.block_until_ready(out.obs)
        return n / (time.perf_counter() - t0)
    finally:
        env.close()


def _gymnasium_env(task: str):
    """A host task as a gymnasium Env (for gymnasium's AsyncVectorEnv)."""
    import gymnasium as gym

    from diffrl.envs.registry import single_env_factory

    class HostGym(gym.Env):
        def __init__(self):
            self.env = single_env_factory(host_name(task))()
            spec = self.env.spec
            self.observation_space = gym.spaces.Box(-np.inf, np.inf, (spec.obs_size,), np.float32)
            self.action_space = gym.spaces.Box(np.array(spec.action_low, np.float32),
                                               np.array(spec.action_high, np.float32))

        def reset(self, seed=None, options=None):
            return self.env.reset(seed or 0), {}

        def step(self, action):
            obs, reward, terminated, truncated = self.env.step(action)
            return obs, reward, terminated, truncated, {}

    return HostGym()


def gymnasium_async(task: str, num_envs: int, workers: int, seconds: float) -> float:
    """gymnasium's AsyncVectorEnv with one process per env (its design), the same task."""
    import gymnasium as gym

    vec = gym.vector.AsyncVectorEnv([functools.partial(_gymnasium_env, task)] * num_envs,
                                    context="spawn", autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    try:
        rng = np.random.default_rng(0)
        vec.reset(seed=0)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            vec.step(rng.uniform(-1, 1, vec.action_space.shape).astype(np.float32))
            n += num_envs
        return n / (time.perf_counter() - t0)
    finally:
        vec.close()


ENVPOOL_SNIPPET = textwrap.dedent("""
    import sys, time, numpy as np, envpool
    name, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    env = envpool.make_dm(name, num_envs=n, num_threads=2, seed=0)
    spec = env.action_spec(); env.reset()
    rng = np.random.default_rng(0); steps = 0; t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        env.step(rng.uniform(spec.minimum, spec.maximum, (n,) + spec.shape).astype(np.float64))
        steps += n
    print(steps / (time.perf_counter() - t0))
""")


def envpool_rate(python: str, task: str, num_envs: int, seconds: float) -> float | str:
    name = ENVPOOL_NAMES.get(host_name(task))
    if name is None:
        return "no port"
    out = subprocess.run([python, "-c", ENVPOOL_SNIPPET, name, str(num_envs), str(seconds)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode:
        return f"failed: {out.stderr.strip().splitlines()[-1][:80] if out.stderr.strip() else out.returncode}"
    return float(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--workers", default="0,1,2,4")
    p.add_argument("--seconds", type=float, default=8.0, help="measuring time per cell")
    p.add_argument("--envpool-python", default=None, help="a Python interpreter with envpool installed")
    p.add_argument("--gymnasium", action="store_true",
                   help="also gymnasium's AsyncVectorEnv (one process per env, same-step auto-reset)")
    p.add_argument("--scene-sizes", default="",
                   help="maniskill/ tasks: also ManiSkill's batched scene at these sizes, e.g. 1024,4096")
    p.add_argument("--scene-backend", default="physx_cuda", choices=("physx_cuda", "physx_cpu"))
    p.add_argument("--out", default="benchmarks/results/host_throughput")
    args = p.parse_args(argv)
    scenes = [int(n) for n in args.scene_sizes.split(",") if n]
    os.environ.setdefault("MUJOCO_GL", "egl")
    workers = [int(w) for w in args.workers.split(",")]
    rows = []
    for task in args.tasks.split(","):
        row = {"task": host_name(task), "sim_alone": sim_alone(task, args.seconds)}
        for w in workers:
            row[f"workers_{w}"] = batched(task, args.num_envs, w, args.seconds)
        for n in scenes if task.startswith("maniskill/") else ():
            row[f"scene_{n}"] = scene_rate(task, n, args.scene_backend, args.seconds)
        if args.gymnasium:
            row["gymnasium_async"] = gymnasium_async(task, args.num_envs, args.num_envs, args.seconds)
        if args.envpool_python:
            row["envpool"] = envpool_rate(args.envpool_python, task, args.num_envs, args.seconds)
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"num_envs": args.num_envs, "seconds_per_cell": args.seconds, "cpu_count": os.cpu_count(),
            "python": sys.version.split()[0]}
    (out / "throughput.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    cols = ["sim_alone"] + [f"workers_{w}" for w in workers] + [f"scene_{n}" for n in scenes]
    cols += ["gymnasium_async"] if args.gymnasium else []
    cols += ["envpool"] if args.envpool_python else []
    head = ["task", "sim alone (1 env)"] + [f"batch, {w} workers" if w else "batch, in process" for w in workers]
    head += [f"ManiSkill scene of {n} ({args.scene_backend}, DLPack)" for n in scenes]
    head += [f"gymnasium AsyncVectorEnv ({args.num_envs} processes)"] if args.gymnasium else []
    head += ["envpool (2 threads)"] if args.envpool_python else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"{r[c]:,.0f}" if isinstance(r.get(c), float) else str(r.get(c, "-")) for c in cols]
        lines.append("| " + " | ".join([r["task"]] + cells) + " |")
    table = "\n".join(lines)
    (out / "table.md").write_text(f"env steps/s, batch of {args.num_envs} envs, random actions, "
                                  f"{os.cpu_count()} CPU cores\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
