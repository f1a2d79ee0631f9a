"""What each algorithm costs at the papers' configurations, from XLA's analyses of the compiled programs.

For every (algorithm, preset, environment) cell the training iteration the trainer runs
(``core.build.build`` + ``core.loop.make_components``: rollout scan with the simulator, normaliser
update, the algorithm's update; the body of the trainer's chunk scan), the algorithm's update alone
(``algo.update`` on the rollout batch: the learner without acting and simulation) and one evaluation
(``core.evaluate.make_evaluate``, the first sampler) are lowered from abstract shapes
(``jax.eval_shape``: nothing is allocated) and compiled for the CPU. A host environment's cell (ManiSkill:
the simulator is outside JAX) compiles the learner's update and acting step only, against the task's
sizes (:data:`HOST_SPECS`). Recorded per program:

* XLA's ``cost_analysis()`` (flops, transcendentals, bytes accessed), raw and with every while loop
  counted as often as it runs (:mod:`xla_cost`; XLA counts a loop body once);
* XLA's ``memory_analysis()`` (argument, output, alias, temp, generated code bytes;
  peak estimate = argument + output - alias + temp);
* a GPU roofline time per iteration: max(flops / peak FLOP/s, bytes / memory bandwidth) for an H100
  SXM and an H200, with fp32 dots on TF32 tensor cores (XLA's default precision on GPUs) and, as the
  pessimistic bound, every flop at the fp32 non-tensor peak; and a kernel-launch floor
  (kernels executed x 5 us), then whole runs (total_env_steps / batch iterations + num_evals evaluations).

``--tier cpu`` sizes the ``*-dmc-cpu`` presets instead, runs each iteration a few times on this
machine after compiling (achieved FLOP/s = corrected flops / seconds) and measures this machine's fp32
matmul peak in the same process (``--matmul-cores 0,1`` adds a run on those cores in a child process).

    python benchmarks/paper_cost.py --tier paper --out benchmarks/results/paper_cost
    python benchmarks/paper_cost.py --tier cpu --out benchmarks/results/paper_cost

Each tier writes ``<tier>.json`` after every cell and ``<tier>.md`` (the tables) at the end;
``--report`` rewrites the markdown from the JSON alone.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from matmul_peak import MATMUL_PROBES, matmul_peak, matmul_peak_on  # noqa: E402
from paper_cost_model import GPUS, HOST_SPECS, LAUNCH_S, MANISKILL  # noqa: E402
from paper_cost_report import markdown  # noqa: E402

DMC = "playground/CheetahRun"
HUMANOID = "playground/G1JoystickFlatTerrain"
REPPO_FAMILY = ("reppo", "trudi", "dime", "amdp", "amdp-backprop")
PPO_FAMILY = ("ppo", "spo", "fpo", "fpo++", "dppo")
OFF_POLICY = ("sac", "dime-off", "amdp-off")

TIERS = {
    # (algo, preset, env); in the order they are measured (the papers' comparisons first)
    "paper": ([(a, f"{a}-humanoid-small", HUMANOID) for a in REPPO_FAMILY]
              + [(a, f"{a}-dmc-small", DMC) for a in REPPO_FAMILY]
              + [(a, f"{a}-dmc", DMC) for a in PPO_FAMILY + OFF_POLICY]
              + [(a, f"{a}-humanoid-large", HUMANOID) for a in REPPO_FAMILY]
              + [(a, f"{a}-dmc-large", DMC) for a in REPPO_FAMILY]
              + [(a, f"{a}-humanoid", HUMANOID) for a in PPO_FAMILY]
              + [(a, f"{a}-dmc-medium", DMC) for a in REPPO_FAMILY]
              + [(a, f"{a}-maniskill", MANISKILL) for a in PPO_FAMILY + REPPO_FAMILY]),
    "cpu": [(a, f"{a}-dmc-cpu", DMC) for a in ("reppo", "trudi", "amdp", "ppo", "sac", "dime", "amdp-backprop",
                                                "spo", "fpo", "dppo", "dime-off", "amdp-off")],
    # CI: one small preset, two iterations timed
    "test": [("reppo", "reppo-gymnax", "gymnax/Pendulum-v1")],
}

def _log(msg: str) -> None:
    print(f"[paper_cost {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cell_config(algo: str, preset: str, env: str):
    from diffrl.config.presets import resolve

    config = resolve(algo, env, preset)
    config = config.replace(progress=False, tensorboard=False, num_seeds=1)
    config.validate()
    return config


def _memory(compiled) -> dict | None:
    from diffrl.commands.bench_cost import compiled_memory

    return compiled_memory(compiled)


def _program(name: str, lowered_fn) -> tuple[object, dict]:
    from xla_cost import compiled_cost

    t0 = time.perf_counter()
    compiled = lowered_fn().compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    cost = compiled_cost(compiled)
    info = {"compile_s": compile_s, "cost_s": time.perf_counter() - t0, "memory": _memory(compiled),
            "xla": cost["xla"], "xla_cost_analysis": cost["xla_cost_analysis"], "corrected": cost["corrected"],
            "unknown_trip_loops": cost["unknown_trip_loops"], "kernels_executed": cost["kernels_executed"],
            "loop_trips": cost["loop_trips"],
            "loops": sorted(cost["loops"], key=lambda r: -r["body_flops_corrected"] * r["executions"])[:12]}
    _log(f"  {name}: compile {compile_s:.0f}s, {cost['corrected']['flops'] / 1e9:.2f} GFLOP "
         f"(XLA raw {cost['xla']['flops'] / 1e9:.3f}), peak {info['memory']['peak_estimate_bytes'] / 2**30:.2f} GiB")
    return compiled, info


PROGRAMS = ("iteration", "update", "act", "evaluation")
"""``act``: the policy's action for the ``num_envs`` observations of one rollout step (``algo.act``)."""


class HostStandIn:
    """A host environment's sizes as a JAX environment of zeros: what its learner's update and acting
    step are compiled against (the batch has the shapes diffrl.core.host_loop gives them). Its own
    simulation is nothing: iteration and evaluation are not compiled for a host environment."""

    def __init__(self, name: str, obs_size: int, action_size: int, episode_length: int):
        from diffrl.envs.base import EnvSpec

        self.spec = EnvSpec(name, obs_size, action_size, (-1.0,) * action_size, (1.0,) * action_size,
                            episode_length)

    def reset(self, key):
        import jax.numpy as jnp

        from diffrl.envs.base import EnvState

        return EnvState.create(inner=jnp.zeros((), jnp.int32), obs=jnp.zeros((self.spec.obs_size,), jnp.float32))

    def step(self, state, action):
        return state.replace(inner=state.inner + 1)


def build_host_stand_in(config):
    """(training env, algorithm) of a host-environment cell: :class:`HostStandIn` wrapped as the
    trainer wraps a JAX environment, and the algorithm ``core.build`` builds for its spec."""
    from diffrl.core.build import make_algorithm
    from diffrl.envs.wrappers import wrap

    base = HostStandIn(config.env, **HOST_SPECS[config.env])
    env = wrap(base, episode_length=config.episode_length or base.spec.episode_length)
    return env, make_algorithm(config, env.spec)


def measure_cell(algo: str, preset: str, env: str, time_iterations: int = 0, programs=PROGRAMS) -> dict:
    import jax

    from diffrl.core.build import build
    from diffrl.core.evaluate import make_evaluate
    from diffrl.core.loop import make_components
    from diffrl.plumbing.records import config_to_json

    config = cell_config(algo, preset, env)
    row = {"algo": algo, "preset": preset, "env": env, "num_envs": config.num_envs, "num_steps": config.num_steps,
           "env_steps_per_iteration": config.num_envs * config.num_steps,
           "total_env_steps": config.total_env_steps, "num_evals": config.num_evals,
           "eval_envs": config.eval_envs, "config": config_to_json(config), "status": "ok", "error": None}
    try:
        if env in HOST_SPECS:  # the simulator is outside JAX: the learner's programs only
            env_, algo_ = build_host_stand_in(config)
            eval_env, programs = None, tuple(p for p in programs if p in ("update", "act"))
            row["host_env"] = True
        else:
            env_, algo_, eval_env = build(config)
        comps = make_components(config, env_, algo_)
        row["episode_length"] = config.episode_length or env_.spec.episode_length
        key = jax.random.PRNGKey(0)
        k1, k2, k3 = jax.random.split(key, 3)
        state = jax.eval_shape(comps.init, k1)
        _, batch, _, _ = jax.eval_shape(comps.rollout, state, k2)
        iteration = None
        if "iteration" in programs:
            iteration, row["iteration"] = _program(
                "iteration", lambda: jax.jit(comps.iteration, donate_argnums=0).lower(state))
        update = None
        if "update" in programs:
            update, row["update"] = _program("update", lambda: jax.jit(algo_.update).lower(state.algo, batch, k3))
        if "act" in programs:
            obs = jax.ShapeDtypeStruct((config.num_envs, env_.spec.obs_size), jax.numpy.float32)
            _, row["act"] = _program("act", lambda: jax.jit(algo_.act).lower(state.algo, obs, k3))
        if "evaluation" in programs:
            sampler = (tuple(config.eval_samplers) or (algo_.samplers[0],))[0]
            evaluate = make_evaluate(config, eval_env, algo_)
            row["eval_sampler"] = sampler
            _, row["evaluation"] = _program("evaluation", lambda: jax.jit(partial(evaluate, sampler=sampler)).lower(
                state.algo, state.obs_stats, state.critic_obs_stats, k1))
        params = [getattr(state.algo, n) for n in ("actor_params", "policy_params") if hasattr(state.algo, n)]
        row["policy_parameters"] = int(sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params)))
        row["state_parameters"] = int(sum(int(np.prod(x.shape)) for x in jax.tree.leaves(state.algo)))
        if time_iterations and iteration is not None:
            row["timing"] = time_iteration(comps, iteration, time_iterations)
        if time_iterations and update is not None:
            row["update_timing"] = time_update(comps, update, time_iterations)
        del iteration
    except Exception as e:  # one cell that fails to build or compile is recorded; the others go on
        row["status"], row["error"] = "failed", f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
        _log(f"  failed: {row['error']}")
    gc.collect()
    return row


def time_update(comps, update, repeats: int) -> dict:
    """Wall and CPU seconds of the compiled update alone on one rollout batch (as :func:`time_iteration`)."""
    import jax

    key = jax.random.PRNGKey(0)
    state = jax.block_until_ready(jax.jit(comps.init)(key))
    _, batch, _, _ = jax.block_until_ready(jax.jit(comps.rollout)(state, key))
    jax.block_until_ready(update(state.algo, batch, key))
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(update(state.algo, batch, key))
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"update_s": wall, "update_cpu_s": cpu, "median_s": float(np.median(wall)),
            "median_cpu_s": float(np.median(cpu))}


def time_iteration(comps, iteration, repeats: int) -> dict:
    """Wall and CPU seconds (this process, all threads) of ``repeats`` calls of the compiled iteration
    after one warm-up call. On a shared core the CPU seconds are what the program itself used."""
    import jax

    state = jax.block_until_ready(jax.jit(comps.init)(jax.random.PRNGKey(0)))
    state, m = iteration(state)
    jax.block_until_ready((state, m))
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        state, m = iteration(state)
        jax.block_until_ready((state, m))
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"iteration_s": wall, "iteration_cpu_s": cpu, "median_s": float(np.median(wall)),
            "min_s": float(np.min(wall)), "median_cpu_s": float(np.median(cpu)), "min_cpu_s": float(np.min(cpu))}


def merge(record: dict, other: dict) -> dict:
    """``record`` with the ok cells of ``other`` added, and the programs ``record``'s cells lack."""
    record = json.loads(json.dumps(record))
    cells = {(r["algo"], r["preset"], r["env"]): r for r in record["results"]}
    for r in other["results"]:
        if r.get("status") != "ok":
            continue
        mine = cells.get((r["algo"], r["preset"], r["env"]))
        if mine is None or mine.get("status") != "ok":
            if mine is not None:
                record["results"].remove(mine)
            record["results"].append(r)
            cells[(r["algo"], r["preset"], r["env"])] = r
        else:
            mine.update({p: r[p] for p in PROGRAMS + ("timing", "update_timing") if p in r and p not in mine})
    record["command"] += " ; " + other["command"]
    order = {cell: i for i, cell in enumerate(TIERS.get(record["tier"], []))}
    record["results"].sort(key=lambda r: order.get((r["algo"], r["preset"], r["env"]), len(order)))
    return record


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", choices=tuple(TIERS), default="paper")
    p.add_argument("--only", default=None, help="comma list of presets to measure (default: the tier's all)")
    p.add_argument("--out", default="benchmarks/results/paper_cost", help="folder of <tier>.json and <tier>.md")
    p.add_argument("--time-iterations", type=int, default=None,
                   help="timed iterations per cell after one warm-up (default: 3 on tier cpu, 2 on test, else 0)")
    p.add_argument("--matmul-cores", default=None,
                   help="also measure the matmul peak in a child process pinned to these cores, e.g. 0,1")
    p.add_argument("--programs", default=",".join(PROGRAMS),
                   help="comma list of the programs compiled per cell (iteration, update, evaluation)")
    p.add_argument("--resume", action="store_true",
                   help="keep the cells already in <tier>.json (measured ok) and measure only the others")
    p.add_argument("--merge", action="append", default=[], metavar="JSON",
                   help="with --report: first add the cells (and programs) of another record of the same tier "
                        "to <tier>.json (records measured by separate processes)")
    p.add_argument("--report", action="store_true", help="rewrite <tier>.md from <tier>.json; measure nothing")
    args = p.parse_args(argv)
    out = Path(args.out)
    json_path, md_path = out / f"{args.tier}.json", out / f"{args.tier}.md"
    if args.report:
        record = json.loads(json_path.read_text())
        for other in args.merge:
            record = merge(record, json.loads(Path(other).read_text()))
        if args.merge:
            json_path.write_text(json.dumps(record, indent=1))
        md_path.write_text(markdown(record))
        return 0
    import jax

    from diffrl.plumbing.machine import git_commit, library_versions
    from diffrl.plumbing.records import atomic_write_json

    cells = TIERS[args.tier]
    programs = tuple(args.programs.split(","))
    if args.only:
        keep = set(args.only.split(","))
        cells = [c for c in cells if c[1] in keep]
    repeats = args.time_iterations if args.time_iterations is not None else {"cpu": 3, "test": 2}.get(args.tier, 0)
    record = {"schema": "diffrl.paper_cost/1", "tier": args.tier,
              "command": "python benchmarks/paper_cost.py " + " ".join(argv),
              "versions": library_versions(), "git_commit": git_commit(),
              "machine": {"cpu_count": os.cpu_count(), "affinity": sorted(os.sched_getaffinity(0)),
                          "backend": jax.default_backend()},
              "gpus": GPUS, "launch_s": LAUNCH_S, "results": [], "matmul": {}}
    out.mkdir(parents=True, exist_ok=True)
    if args.resume and json_path.exists():
        old = json.loads(json_path.read_text())
        record["results"] = [r for r in old["results"] if r.get("status") == "ok"]
        record["matmul"] = old.get("matmul", {})
        record["command"] = old["command"] + " ; " + record["command"]
        done = {(r["algo"], r["preset"], r["env"]): r for r in record["results"]}
        cells = [c for c in cells if c not in done or any(p not in done[c] for p in programs)]
    if repeats and not record["matmul"]:
        _log("matmul peak (this process)")
        record["matmul"]["this process"] = matmul_peak(**MATMUL_PROBES.get(args.tier, {}))
        if args.matmul_cores:
            record["matmul"][f"cores {args.matmul_cores}"] = matmul_peak_on(args.matmul_cores)
    for algo, preset, env in cells:
        _log(f"{algo} {preset} {env}")
        old = next((r for r in record["results"] if (r["algo"], r["preset"], r["env"]) == (algo, preset, env)), None)
        missing = tuple(p for p in programs if old is None or p not in old)
        row = measure_cell(algo, preset, env, repeats if {"iteration", "update"} & set(missing) else 0, missing)
        if old is None:
            record["results"].append(row)
        elif row["status"] == "ok":  # the programs this run added to a cell measured before
            old.update({p: row[p] for p in missing + ("timing", "update_timing") if p in row})
        else:
            _log(f"  kept the earlier programs of {preset}")
        atomic_write_json(json_path, record)
    if repeats:  # again at the end: the machine's load may have moved during the cells
        record["matmul"]["this process, after"] = matmul_peak(**MATMUL_PROBES.get(args.tier, {}))
    atomic_write_json(json_path, record)
    md_path.write_text(markdown(record))
    print(markdown(record))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
