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
import dataclasses
import gc
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

DMC = "playground/CheetahRun"
HUMANOID = "playground/G1JoystickFlatTerrain"
MANISKILL = "maniskill/PushCube-v1"
HOST_SPECS = {
    # host environments (stepped outside JAX): the sizes the learner sees (tests/test_maniskill.py); only
    # the update and the acting step compile, the simulator is not an XLA program
    MANISKILL: {"obs_size": 35, "action_size": 8, "episode_length": 50},
}
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

GPUS = {
    # published dense peaks (no sparsity); the programs run in fp32
    "H100 SXM": {"tf32_flops": 494e12, "fp32_flops": 67e12, "bandwidth": 3.35e12, "memory_bytes": 80e9},
    "H200": {"tf32_flops": 494e12, "fp32_flops": 67e12, "bandwidth": 4.8e12, "memory_bytes": 141e9},
}
LAUNCH_S = 5e-6
"""Assumed cost of one kernel launch on a GPU (launch plus gap between back-to-back small kernels)."""

PAPER_HOURS = {
    # arXiv 2606.15260 (TruDi), humanoid tasks, 50M steps: hours per run as reported
    ("trudi", "humanoid-small"): 1.95, ("reppo", "humanoid-small"): 1.07,
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


LEARNER_SHAPES = ((64, 256, 256), (64, 128, 128), (2048, 512, 512))
"""(m, k, n) matmuls shaped like the CPU presets' minibatch layers (64 samples; 256 and 128 wide) and a
paper preset's (2048 x 512)."""


def matmul_peak(sizes=(512, 1024, 2048), repeats: int = 5, shapes=LEARNER_SHAPES) -> dict:
    """This process's best fp32 matmul rate (jnp.dot of n x n matrices, the same XLA CPU backend), and
    the rate of chains of smaller (m x k) @ (k x n) matmuls (a scan of 200, one call)."""
    import jax
    import jax.numpy as jnp

    out = {"affinity": sorted(os.sched_getaffinity(0)), "sizes": {}, "cpu_sizes": {}, "shapes": {},
           "cpu_shapes": {}}
    for m, k, n in shapes:
        x = jax.random.normal(jax.random.PRNGKey(0), (m, k), jnp.float32)
        w = jax.random.normal(jax.random.PRNGKey(1), (200, k, n), jnp.float32) / np.sqrt(k)

        def chain(x, w):
            return jax.lax.scan(lambda h, wi: (jnp.tanh(h[:, :k] @ wi), None), x, w)[0] if k == n else \
                jax.lax.scan(lambda h, wi: (h, h @ wi), x, w)[1]
        f = jax.jit(chain)
        jax.block_until_ready(f(x, w))
        runs = [_timed(lambda: jax.block_until_ready(f(x, w))) for _ in range(repeats)]
        flops = 2 * m * k * n * 200
        out["shapes"][f"{m}x{k}x{n}"] = flops / min(r[0] for r in runs)
        out["cpu_shapes"][f"{m}x{k}x{n}"] = flops / min(r[1] for r in runs)
    for n in sizes:
        a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
        b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.float32)
        f = jax.jit(jnp.dot)
        jax.block_until_ready(f(a, b))
        runs = [_timed(lambda: jax.block_until_ready(f(a, b))) for _ in range(repeats)]
        out["sizes"][str(n)] = 2 * n ** 3 / min(w for w, _ in runs)
        out["cpu_sizes"][str(n)] = 2 * n ** 3 / min(c for _, c in runs)
    for mib in (1, 64):  # streaming a * 2 + b: one read of a and b and one write per element (cache, DRAM)
        count = mib * 2 ** 20 // 4
        a = jnp.ones((count,), jnp.float32)
        b = jnp.ones((count,), jnp.float32)
        g = jax.jit(lambda a, b: jax.lax.fori_loop(0, 20, lambda i, c: c * 0.5 + b, a))
        jax.block_until_ready(g(a, b))
        runs = [_timed(lambda: jax.block_until_ready(g(a, b))) for _ in range(repeats)]
        out.setdefault("stream_cpu_bytes_s", {})[f"{mib} MiB"] = 20 * 3 * 4 * count / min(r[1] for r in runs)
    out["peak_flops"] = max(out["sizes"].values())
    out["peak_flops_per_cpu_s"] = max(out["cpu_sizes"].values())
    return out


MATMUL_PROBES = {"test": {"sizes": (256,), "repeats": 2, "shapes": ((64, 128, 128),)}}
"""Tiers that probe the machine with smaller matmuls than :func:`matmul_peak`'s defaults: the ``test``
tier rehearses the command (its record, table and derived figures), and the full probe, run before
and after the cells, is about 25 s of one core each time."""


def _timed(fn) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def matmul_peak_on(cores: str) -> dict | None:
    """:func:`matmul_peak` in a child process pinned to ``cores`` (e.g. ``0,1``), niced."""
    cmd = ["taskset", "-c", cores, "nice", "-n", "10", sys.executable, __file__, "--matmul-only"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


# -- derived quantities ---------------------------------------------------------------------------------

def roofline_s(flops: float, bytes_: float, gpu: dict, tensor: bool = True) -> float:
    return max(flops / (gpu["tf32_flops"] if tensor else gpu["fp32_flops"]), bytes_ / gpu["bandwidth"])


def _c(program: dict | None, key: str) -> float | None:
    return None if program is None else program["corrected"][key]


def simulator_per_env_step(rows: list[dict]) -> dict[str, dict]:
    """Per environment: what an iteration costs beyond the update and the acting, per env step (the
    simulator, the normalisers, the bookkeeping; kernels per rollout step), from the first cell that
    compiled all three."""
    out = {}
    for r in rows:
        if r.get("status") == "ok" and r["env"] not in out and all(p in r for p in ("iteration", "update", "act")):
            it, up, act, n = r["iteration"], r["update"], r["act"], r["num_steps"]
            batch = r["env_steps_per_iteration"]
            out[r["env"]] = {
                "from": r["preset"],
                "corrected": {k: (it["corrected"][k] - up["corrected"][k] - n * act["corrected"][k]) / batch
                              for k in xla_keys()},
                "xla": {k: (it["xla"][k] - up["xla"][k] - n * act["xla"][k]) / batch for k in xla_keys()},
                "kernels_per_step": (it["kernels_executed"] - up["kernels_executed"]
                                     - n * act["kernels_executed"]) / n,
                "unknown_trip_loops": it["unknown_trip_loops"]}
    return out


def xla_keys():
    from xla_cost import KEYS

    return KEYS


def iteration_of(row: dict, simulator: dict | None) -> dict | None:
    """The compiled iteration, else one composed as update + num_steps x act + simulator x batch (the
    simulator's cost per env step taken from another cell on the same env; its kernels per rollout
    step scale with the steps, not the envs); None if neither is possible."""
    if "iteration" in row:
        return row["iteration"]
    if row.get("host_env") and "update" in row and "act" in row:  # the learner alone: no simulator in XLA
        up, act, n = row["update"], row["act"], row["num_steps"]
        return {"learner_only": True,
                "corrected": {k: up["corrected"][k] + n * act["corrected"][k] for k in xla_keys()},
                "xla": {k: up["xla"][k] + n * act["xla"][k] for k in xla_keys()},
                "kernels_executed": up["kernels_executed"] + n * act["kernels_executed"],
                "memory": up["memory"], "unknown_trip_loops": up["unknown_trip_loops"]}
    sim = (simulator or {}).get(row["env"])
    if sim is None or "update" not in row or "act" not in row:
        return None
    up, act, n, batch = row["update"], row["act"], row["num_steps"], row["env_steps_per_iteration"]
    return {"composed_from": sim["from"],
            "corrected": {k: up["corrected"][k] + n * act["corrected"][k] + batch * sim["corrected"][k]
                          for k in xla_keys()},
            "xla": {k: up["xla"][k] + n * act["xla"][k] + batch * sim["xla"][k] for k in xla_keys()},
            "kernels_executed": up["kernels_executed"] + n * (act["kernels_executed"] + sim["kernels_per_step"]),
            "memory": up["memory"], "unknown_trip_loops": sim["unknown_trip_loops"]}


def derive(row: dict, simulator: dict | None = None) -> dict:
    """Per env step, per run and GPU-time figures of one measured cell (None where a program was not
    compiled); an iteration that was not compiled is composed (:func:`iteration_of`)."""
    if row.get("status") != "ok":
        return {}
    it, ev, up = iteration_of(row, simulator), row.get("evaluation"), row.get("update")
    if it is None:
        return {}
    batch = row["env_steps_per_iteration"]
    iterations = row["total_env_steps"] / batch
    ev_flops, ev_bytes = _c(ev, "flops") or 0.0, _c(ev, "bytes accessed") or 0.0
    out = {"iterations": iterations,
           "iteration_gflop": it["corrected"]["flops"] / 1e9,
           "iteration_gbytes": it["corrected"]["bytes accessed"] / 1e9,
           "update_gflop": None if up is None else _c(up, "flops") / 1e9,
           "eval_gflop": None if ev is None else ev_flops / 1e9,
           "flop_per_env_step": it["corrected"]["flops"] / batch,
           "bytes_per_env_step": it["corrected"]["bytes accessed"] / batch,
           "loop_undercount": it["corrected"]["flops"] / max(it["xla"]["flops"], 1.0),
           "peak_gib": it["memory"]["peak_estimate_bytes"] / 2 ** 30,
           "update_peak_gib": None if up is None else up["memory"]["peak_estimate_bytes"] / 2 ** 30,
           "run_tflop": (iterations * it["corrected"]["flops"] + row["num_evals"] * ev_flops) / 1e12,
           "gpu": {}}
    for name, gpu in GPUS.items():
        g = {}
        for tag, tensor in (("tf32", True), ("fp32", False)):
            t_it = roofline_s(it["corrected"]["flops"], it["corrected"]["bytes accessed"], gpu, tensor)
            g[f"iteration_ms_{tag}"] = 1e3 * t_it
            g[f"run_h_{tag}"] = iterations * t_it / 3600  # training only (evaluations: eval_s_*)
            g[f"eval_s_{tag}"] = None if ev is None else roofline_s(ev_flops, ev_bytes, gpu, tensor)
        g["update_ms_tf32"] = None if up is None else 1e3 * roofline_s(
            _c(up, "flops"), _c(up, "bytes accessed"), gpu)
        g["launch_ms"] = 1e3 * it["kernels_executed"] * LAUNCH_S
        g["run_h_launch"] = iterations * it["kernels_executed"] * LAUNCH_S / 3600
        g["eval_s_launch"] = None if ev is None else ev["kernels_executed"] * LAUNCH_S
        g["bound"] = "memory" if it["corrected"]["bytes accessed"] / gpu["bandwidth"] > \
            it["corrected"]["flops"] / gpu["tf32_flops"] else "compute"
        g["fits"] = it["memory"]["peak_estimate_bytes"] <= gpu["memory_bytes"]
        g["fits_default_preallocation"] = it["memory"]["peak_estimate_bytes"] <= 0.75 * gpu["memory_bytes"]
        out["gpu"][name] = g
    family = row["preset"][len(row["algo"]) + 1:]
    out["paper_hours"] = PAPER_HOURS.get((row["algo"], family))
    if "timing" in row:
        t = row["timing"]
        out["achieved_gflops"] = it["corrected"]["flops"] / t.get("median_cpu_s", t["median_s"]) / 1e9
        out["achieved_gflops_wall"] = it["corrected"]["flops"] / t["median_s"] / 1e9
        out["achieved_gbytes_s"] = it["corrected"]["bytes accessed"] / t.get("median_cpu_s", t["median_s"]) / 1e9
    return out


# -- report ---------------------------------------------------------------------------------------------

def _g(x: float, digits: int = 3) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def markdown(record: dict) -> str:
    rows = record["results"]
    lines = [f"# XLA cost of the compiled programs: tier `{record['tier']}`", "",
             f"`{record['command']}` (git {(record.get('git_commit') or '?')[:10]}, jax "
             f"{record['versions'].get('jax')}; compiled for the CPU from abstract shapes). FLOPs and bytes are "
             f"XLA's `cost_analysis()` with every while loop counted as often as it runs (benchmarks/xla_cost.py; "
             f"XLA's raw figure counts each loop body once: `undercount` = corrected / raw). Peak = XLA "
             f"`memory_analysis()` argument + output - alias + temp of the iteration (of the update alone in "
             f"brackets). GPU times: roofline max(flops/peak, bytes/bandwidth) with dots on TF32 tensor cores "
             f"(494 TFLOP/s dense; `fp32`: every flop at 67 TFLOP/s), H100 SXM 3.35 TB/s, H200 4.8 TB/s; "
             f"`launch` = kernels executed x {LAUNCH_S * 1e6:.0f} us. A run = total_env_steps / batch training "
             f"iterations (evaluations apart, below).", ""]
    lines += ["| algo | preset | batch | GFLOP / iter (update) | GB / iter | kFLOP / env step | undercount | "
              "peak GiB (update) | unknown-trip loops | H100 ms / iter: tf32, fp32, launch | H100 h / run: tf32, "
              "fp32, launch | H200 h / run tf32 | paper h |", "|" + "---|" * 13]
    sim = simulator_per_env_step(rows)
    composed = learner_only = False
    over = []

    def h_fits(d):
        return d["gpu"]["H100 SXM"]["fits"]
    for r in rows:
        if r.get("status") != "ok":
            lines.append(f"| {r['algo']} | {r['preset']} | | failed: {r['error']} |" + " |" * 9)
            continue
        d, it = derive(r, sim), iteration_of(r, sim)
        if not d:
            lines.append(f"| {r['algo']} | {r['preset']} | | no iteration (not compiled, none to compose) |"
                         + " |" * 9)
            continue
        mark = " *" if "composed_from" in it else " †" if it.get("learner_only") else ""
        composed = composed or mark == " *"
        learner_only = learner_only or mark == " †"
        if not h_fits(d):
            over.append(r["preset"])
        h, h2 = d["gpu"]["H100 SXM"], d["gpu"]["H200"]
        flag = "" if h["fits"] else " **> 80 GB**"
        lines.append(
            f"| {r['algo']} | {r['preset']}{mark} | {r['num_envs']} x {r['num_steps']} | {_g(d['iteration_gflop'])} "
            f"({_g(d['update_gflop'])}) | {_g(d['iteration_gbytes'])} | {_g(d['flop_per_env_step'] / 1e3)} | "
            f"{_g(d['loop_undercount'])} | {_g(d['peak_gib'])} ({_g(d['update_peak_gib'])}){flag} | "
            f"{it['unknown_trip_loops']} | {_g(h['iteration_ms_tf32'])}, {_g(h['iteration_ms_fp32'])}, "
            f"{_g(h['launch_ms'])} | {_g(h['run_h_tf32'])}, {_g(h['run_h_fp32'])}, {_g(h['run_h_launch'])} | "
            f"{_g(h2['run_h_tf32'])} | {_g(d['paper_hours'])} |")
    if composed:
        lines += ["", "\\* iteration not compiled (the simulator's compile is what takes long on this machine): "
                  "composed as update + num_steps x act + the simulator's cost per env step ("
                  + ", ".join(f"{e}: from {v['from']}" for e, v in sim.items())
                  + "); peak = the update's."]
    if learner_only:
        hosts = sorted({r["env"] for r in rows if r.get("host_env")})
        lines += ["", "\u2020 learner only: the simulator is outside JAX (" + ", ".join(hosts)
                  + ": a host environment, ManiSkill3's PhysX scene on the CPU or the GPU), so neither the "
                  "iteration nor an evaluation compiles to one XLA program; the row is update + num_steps x act "
                  "compiled against the task's sizes (" + "; ".join(
                      f"{e}: obs {HOST_SPECS[e]['obs_size']}, action {HOST_SPECS[e]['action_size']}, "
                      f"{HOST_SPECS[e]['episode_length']}-step episodes" for e in hosts if e in HOST_SPECS)
                  + "), without the simulator's time; peak = the update's."]
    measured = [r for r in rows if r.get("status") == "ok" and derive(r, sim)]
    if measured:
        lines += ["", "Memory: " + (f"**over an H100's 80 GB: {', '.join(over)}**" if over else
                                    f"every preset above fits an H100's 80 GB (largest peak "
                                    f"{max(derive(r, sim)['peak_gib'] for r in measured):.3g} GiB)")
                  + "; the peak is XLA's estimate for the CPU compile (a GPU's fusion and buffer reuse differ)."]
    evaluated = [r for r in rows if r.get("status") == "ok" and r.get("evaluation")]
    if evaluated:
        lines += ["", "Evaluation (one call, first sampler):", "",
                  "| algo | preset | eval envs x steps | GFLOP | GB | peak GiB | kernels | H100 s: tf32, launch "
                  "| evaluations per run |", "|" + "---|" * 9]
        for r in evaluated:
            e, h = r["evaluation"], derive(r, sim)["gpu"]["H100 SXM"]
            lines.append(f"| {r['algo']} | {r['preset']} | {r['eval_envs']} x {r['episode_length']} | "
                         f"{_g(e['corrected']['flops'] / 1e9)} | {_g(e['corrected']['bytes accessed'] / 1e9)} | "
                         f"{_g(e['memory']['peak_estimate_bytes'] / 2 ** 30)} | {_g(e['kernels_executed'])} | "
                         f"{_g(h['eval_s_tf32'])}, {_g(h['eval_s_launch'])} | {r['num_evals']} |")
    if record.get("matmul"):
        lines += ["", "## This machine", "",
                  "fp32 matmul (jnp.dot, n x n) best of 5: GFLOP per wall second and per CPU second of the process "
                  "(all its threads; on a shared core the CPU seconds are what the program itself got):", ""]
        for tag, m in record["matmul"].items():
            if m and "peak_flops" in m:
                sizes = ", ".join(f"n={n}: {v / 1e9:.1f}" for n, v in m["sizes"].items())
                cpu = m.get("peak_flops_per_cpu_s")
                lines.append(f"* {tag} (cores {m['affinity']}): **{m['peak_flops'] / 1e9:.1f} GFLOP/s** wall ({sizes})"
                             + (f"; {cpu / 1e9:.1f} GFLOP per CPU second" if cpu else "")
                             + "".join(f"; {shape}: {v / 1e9:.1f} GFLOP per CPU second"
                                       for shape, v in m.get("cpu_shapes", {}).items())
                             + "".join(f"; streaming {size}: {v / 1e9:.1f} GB per CPU second"
                                       for size, v in m.get("stream_cpu_bytes_s", {}).items()))
            elif m:
                lines.append(f"* {tag}: {m.get('error')}")
        timed = [r for r in rows if r.get("status") == "ok" and "timing" in r]
        if timed:
            peak = max(m.get("peak_flops_per_cpu_s") or m["peak_flops"] for k, m in record["matmul"].items()
                       if m and "peak_flops" in m and m["affinity"] == record["machine"]["affinity"])
            lines += ["", f"Training iteration after compile and one warm-up call, median of the timed calls; "
                      f"achieved = corrected FLOPs / CPU seconds of the process; the peak is the best single-core "
                      f"matmul above ({peak / 1e9:.1f} GFLOP per CPU second).", "",
                      "| algo | preset | GFLOP / iter | update share of flops | wall s / iter | CPU s / iter | "
                      "achieved GFLOP/s | of matmul peak | achieved GB/s | kernels / iter (update) | CPU us / kernel "
                      "| update alone: CPU s, GFLOP/s, of peak |", "|" + "---|" * 12]
            for r in timed:
                d = derive(r)
                share = "-" if d["update_gflop"] is None else f"{d['update_gflop'] / d['iteration_gflop']:.0%}"
                lines.append(f"| {r['algo']} | {r['preset']} | {_g(d['iteration_gflop'])} | {share} | "
                             f"{_g(r['timing']['median_s'])} | {_g(r['timing'].get('median_cpu_s'))} | "
                             f"{_g(d['achieved_gflops'])} | {d['achieved_gflops'] * 1e9 / peak:.1%} | "
                             f"{_g(d['achieved_gbytes_s'])} | {_g(r['iteration']['kernels_executed'])} "
                             f"({_g(r['update']['kernels_executed']) if 'update' in r else '-'}) | "
                             f"{_g(1e6 * r['timing']['median_cpu_s'] / r['iteration']['kernels_executed'])} | "
                             + (f"{_g(r['update_timing']['median_cpu_s'])}, "
                                f"{_g(r['update']['corrected']['flops'] / r['update_timing']['median_cpu_s'] / 1e9)}, "
                                f"{r['update']['corrected']['flops'] / r['update_timing']['median_cpu_s'] / peak:.0%} |"
                                if "update_timing" in r else "- |"))
    return "\n".join(lines) + "\n"


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
    p.add_argument("--matmul-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.matmul_only:
        print(json.dumps(matmul_peak()))
        return 0
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

    from diffrl.plumbing.records import atomic_write_json, git_commit, library_versions

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
