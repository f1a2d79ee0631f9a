"""What a lent GPU's few minutes should measure: diffrl at paper scale, in one time-boxed process.

A GPU (one H200) is lent to this project now and then for 15 minutes in all, start-up included (project
issue 17), so one prepared run (``benchmarks/gpu/run.sh``, which calls this) measures what the 2-core CPU
machines cannot, within about 8 minutes, and keeps what it measured when it is cut short. In priority order:

a. ``cost``: ``diffrl bench cost``'s measurement (:mod:`diffrl.commands.bench_cost`, reused as is) at paper scale:
   Playground CartpoleSwingup, the ``*-dmc-small`` presets (1024 envs x 32 steps), N = 16 and 128, REPPO,
   TruDi, AMDP and the backprop baseline, with the device allocator's peak memory. Each N is its own
   ``bench_cost.run``; a later N runs only the contenders whose time, projected from the previous N, fits
   in the time left (REPPO's program comes back from the compilation cache).
b. ``sps``: training env steps/s against the simulator alone (``benchmarks/sps.py``'s programs) at 1024
   and 4096 envs; at 1024 envs the training figures are part a's iterations at N = 16 (the same program).
c. ``learn``: REPPO and TruDi on the same task, 3 seeds in one vmapped program each, for the time left,
   against REPPO's published 875 at 50M env steps.

No part, group, program or learning run starts after ``--budget-min`` minutes from ``--t0``; a learning
run stops at the first evaluation after which its next chunk would end past its share of the time.
``OUT/gpu.json`` and ``OUT/gpu.md`` are rewritten after every step (``OUT/cost.{json,md}``: bench cost's
own record). ``--dry-run`` runs the same code on the CPU at toy sizes (tests/test_gpu_script.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# this checkout's diffrl; benchmarks/sps.py; this folder's gpu_plan.py and gpu_report.py
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "benchmarks"), str(Path(__file__).resolve().parent)]

from gpu_plan import ALGOS, DRY_RUN, LATER_N_PRIORITY, MARGIN, PAPER_SCALE, Plan  # noqa: E402
from gpu_report import PAPER, markdown  # noqa: E402

class Clock:
    """Wall-clock seconds since ``t0`` (epoch seconds: run.sh's start) against the budget."""

    def __init__(self, t0: float, budget_s: float):
        self.t0, self.budget_s = t0, budget_s

    def elapsed(self) -> float:
        return time.time() - self.t0

    def left(self) -> float:
        return self.budget_s - self.elapsed()


def log(clock: Clock, msg: str) -> None:
    print(f"[gpu {clock.elapsed():6.1f}s] {msg}", file=sys.stderr, flush=True)


def request(plan: Plan, num_envs: int | None = None, algos=ALGOS, steps=(16,)):
    from diffrl.commands.bench_cost_plan import CostRequest, parse_algos

    return CostRequest(env=plan.env, algos=parse_algos(",".join(algos)), diffusion_steps=tuple(steps),
                       num_envs=num_envs or plan.num_envs, num_steps=plan.num_steps, preset=plan.preset,
                       overrides=plan.overrides, repeats=plan.repeats, warmup=plan.warmup,
                       budget_s=plan.contender_budget_s)


def config_for(plan: Plan, algo: str, n: int | None, num_envs: int | None = None):
    """The contender's resolved config exactly as bench cost builds it (one iteration long);
    ``n`` None on a diffusion algorithm keeps its preset's number of steps."""
    from diffrl.commands.bench_cost_plan import contender_config, steps_section
    from diffrl.config.presets import resolve

    section = steps_section(algo)
    if section and n is None:
        n = getattr(resolve(algo, plan.env, f"{algo}-{plan.preset}"), section).num_steps
    return contender_config(request(plan, num_envs), algo, n if section else None)


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


# -- a. cost ratios ------------------------------------------------------------------------------
def projected_group_s(rows: dict, algo: str, scale: float, plan: Plan) -> float | None:
    """Seconds bench cost would spend on ``algo`` in a group whose N is ``scale`` x the measured one:
    compile (scans: no growth with N) + (warm-up + timed) calls; the chain scales TruDi's and the
    backprop baseline's calls and AMDP's acting (its update does not depend on N)."""
    row = rows.get(algo)
    if not row or row["status"] != "ok" or not row["iteration_s"]:
        return None
    it, up = _median(row["iteration_s"]), _median(row["update_s"])  # a call runs both programs
    if algo == "reppo":
        call = it + up
    elif algo == "amdp":
        call = up + (it - up) * scale + up
    else:
        call = (it + up) * scale
    calls = plan.warmup + min(plan.repeats, max(1, math.ceil(plan.contender_budget_s / max(call, 1e-9))))
    compile_s = sum(row["compile_s"].values())
    return (0.25 if algo == "reppo" else 1.0) * compile_s + calls * call


def pick_contenders(rows: dict, n_prev: int, n: int, left_s: float, plan: Plan) -> tuple[list[str], dict]:
    """Diffusion contenders for the group at ``n``, in :data:`LATER_N_PRIORITY`, while their
    projected time (plus REPPO's, times :data:`MARGIN`) fits in ``left_s``; returns them and every
    projection."""
    scale = n / n_prev
    wanted = [a for a in LATER_N_PRIORITY if a in plan.cost_algos]
    proj = {a: projected_group_s(rows, a, scale, plan) for a in ["reppo"] + wanted}
    total, chosen = proj["reppo"] or 0.0, []
    for a in wanted:
        if proj[a] is not None and MARGIN * (total + proj[a]) <= left_s:
            chosen.append(a)
            total += proj[a]
    return chosen, proj


def merge_cost(records: list[dict]) -> dict:
    """One bench cost record out of one record per N (results, configs, skips; ratios recomputed)."""
    from diffrl.commands.bench_cost_report import with_summaries

    merged = {**records[0], "results": [], "skipped_groups": [], "configs": {}}
    for r in records:
        merged["results"] += r["results"]
        merged["skipped_groups"] += r.get("skipped_groups", [])
        merged["configs"].update(r["configs"])
    merged["command"] = " ; ".join(r["command"] for r in records)
    merged["request"] = {**records[0]["request"],
                         "diffusion_steps": [n for r in records for n in r["request"]["diffusion_steps"]]}
    return with_summaries(merged)


def part_cost(plan: Plan, clock: Clock, out: Path, part: dict, save) -> None:
    from diffrl.commands import bench_cost
    from diffrl.commands.bench_cost_report import groups, markdown

    from diffrl.plumbing.records import atomic_write_json

    records: list[dict] = []
    part.update(groups=[], skipped=[], device_peak_bytes_after_group={})

    def write(current: dict | None = None) -> None:  # after every group: bench cost's record, merged
        merged = merge_cost(records + ([current] if current else []))
        atomic_write_json(out / "cost.json", merged)
        (out / "cost.md").write_text(markdown(merged))
        part["record"] = merged
        save()

    previous: tuple[int, dict] | None = None
    for n in plan.diffusion_steps:
        algos = [a for a in plan.cost_algos if a != "reppo"]
        if previous is not None:
            algos, proj = pick_contenders(previous[1], previous[0], n, clock.left(), plan)
            part["groups"].append({"diffusion_steps": n, "projected_s": proj, "left_s": clock.left(), "run": algos})
            left_out = [a for a in proj if a != "reppo" and a not in algos]
            if left_out:
                part["skipped"].append({"diffusion_steps": n, "algos": left_out, "reason":
                                        f"projected time does not fit the {clock.left():.0f} s left"})
            if not algos:
                save()
                continue
        req = request(plan, algos=["reppo"] + algos, steps=(n,))
        command = (f"diffrl bench cost --env {plan.env} --preset {plan.preset} --num-envs {plan.num_envs} "
                   f"--num-steps {plan.num_steps} --algos {','.join(req.algos)} --diffusion-steps {n} "
                   f"--repeats {plan.repeats} --warmup {plan.warmup} --budget-s {plan.contender_budget_s:g}"
                   + "".join(f" --set '{o}'" for o in plan.overrides))
        log(clock, f"cost: N={n}, {', '.join(req.algos)}")
        records.append(bench_cost.run(req, bench_cost.plan(req), command, on_group=write))
        part["device_peak_bytes_after_group"][str(n)] = bench_cost.device_peak_bytes()
        write()
        previous = (n, groups(part["record"])[n])


# -- b. training against simulator throughput --------------------------------------------------------
def sps_projected_s(row: dict | None, scale: float, plan: Plan) -> float | None:
    """Seconds to compile and time one training program at ``scale`` x part a's batch (its compile
    time, and calls growing with the batch); None without part a's row."""
    if not row or row["status"] != "ok" or not row["iteration_s"]:
        return None
    return row["compile_s"]["iteration"] + (1 + plan.sps_repeats) * _median(row["iteration_s"]) * max(scale, 1.0)


def part_sps(plan: Plan, clock: Clock, part: dict, save, cost: dict | None) -> None:
    import sps

    from diffrl.commands.bench_cost_plan import steps_section
    from diffrl.commands.bench_cost_report import groups

    by_n = groups(cost["record"]) if cost and cost.get("record") else {}
    measured = by_n.get(plan.sps_diffusion_steps, {})
    part.update(rows=[], skipped=[])
    for num_envs in plan.sps_envs:
        batch = num_envs * plan.num_steps
        contenders: dict[str, dict] = {}
        for name in ("simulator",) + tuple(plan.sps_algos):
            row = measured.get(name)
            if name != "simulator" and num_envs == plan.num_envs and row and row["status"] == "ok":
                contenders[name] = {"times": row["iteration_s"], "compile_s": row["compile_s"]["iteration"],
                                    "source": f"cost, N={plan.sps_diffusion_steps} group"}
                continue
            guess = sps_projected_s(row, num_envs / plan.num_envs, plan) if name != "simulator" else 0.0
            if clock.left() <= 0 or MARGIN * (guess or 0.0) > clock.left():
                why = "budget spent" if clock.left() <= 0 else f"projected {guess:.0f} s, {clock.left():.0f} s left"
                part["skipped"].append({"num_envs": num_envs, "contender": name, "reason": why})
                continue
            log(clock, f"sps: compiling {name} at {num_envs} envs")
            try:
                config = config_for(plan, "reppo" if name == "simulator" else name,
                                    plan.sps_diffusion_steps, num_envs)
                call, compile_s = (sps.env_only if name == "simulator" else sps.training)(config)
                call()  # warm-up
            except Exception as e:  # e.g. out of memory at 4096 envs: recorded, the others go on
                part["skipped"].append({"num_envs": num_envs, "contender": name, "reason": _error(e)})
                continue
            contenders[name] = {"call": call, "times": [], "compile_s": compile_s, "source": "measured here"}
        for r in range(plan.sps_repeats):  # round-robin, as benchmarks/sps.py; one call each past the budget
            for c in contenders.values():
                if "call" in c and (r == 0 or clock.left() > 0):
                    t0 = time.perf_counter()
                    c["call"]()
                    c["times"].append(time.perf_counter() - t0)
        sim = _median(contenders["simulator"]["times"]) if "simulator" in contenders else None
        for name, c in contenders.items():
            s = _median(c["times"])
            part["rows"].append({"num_envs": num_envs, "num_steps": plan.num_steps, "contender": name,
                                 "diffusion_steps": plan.sps_diffusion_steps if name != "simulator" and steps_section(name) else None,
                                 "seconds_per_iteration": s, "sps": batch / s, "times": c["times"],
                                 "x_simulator": s / sim if sim else None, "compile_s": c["compile_s"],
                                 "source": c["source"]})
        del contenders
        gc.collect()
        save()


# -- c. learning -----------------------------------------------------------------------------------
def speed_estimate(plan: Plan, algo: str, sps_part: dict | None) -> float | None:
    """Env steps/s of one seed of ``algo`` at ``plan.num_envs`` (part b), if measured."""
    for row in (sps_part or {}).get("rows", []):
        if row["contender"] == algo and row["num_envs"] == plan.num_envs:
            return row["sps"]
    return None


def part_learn(plan: Plan, clock: Clock, part: dict, save, sps_part: dict | None, work: Path, out: Path) -> None:
    from diffrl.plumbing.records import config_to_json
    from diffrl.core.trainer import Trainer

    part.update(runs=[], skipped=[], reference={"reppo_return": PAPER["reppo_return"],
                                                "env_steps": PAPER["reppo_return_env_steps"]})
    for i, algo in enumerate(plan.learn_algos):
        share = clock.left() / (len(plan.learn_algos) - i)
        if share < plan.learn_min_s:
            part["skipped"].append({"algo": algo, "reason": f"{max(share, 0):.0f} s for it < {plan.learn_min_s:g} s"})
            save()
            continue
        deadline = time.time() + share
        base = config_for(plan, algo, None)
        speed = speed_estimate(plan, algo, sps_part)  # one seed; seeds share the device
        per_chunk = (max(1, int(plan.learn_chunk_s * speed / plan.learn_seeds / base.batch_size)) if speed
                     else plan.learn_chunk_iterations)
        per_chunk = min(per_chunk, max(1, plan.learn_max_env_steps // base.batch_size))
        chunks = max(1, plan.learn_max_env_steps // (per_chunk * base.batch_size))
        config = base.replace(num_seeds=plan.learn_seeds, chunk_iterations=per_chunk, num_evals=chunks,
                              total_env_steps=chunks * per_chunk * base.batch_size, eval_envs=plan.eval_envs,
                              out=str(work / algo), checkpoint_every=0, keep_checkpoints=1)
        config.validate()
        run = {"algo": algo, "num_seeds": plan.learn_seeds, "iterations_per_chunk": per_chunk,
               "share_s": share, "config": config_to_json(config), "curve": [], "status": "running"}
        part["runs"].append(run)
        log(clock, f"learn: {algo}, {plan.learn_seeds} seeds, {per_chunk} iterations per chunk, {share:.0f} s")
        trainer = None

        def on_row(row: dict) -> None:
            run["curve"].append({k: row.get(k) for k in ("env_steps", "walltime", "train/sps",
                                                         "eval/episode_return", "eval/seed_returns")})
            last = run["curve"][-1]["walltime"] - (run["curve"][-2]["walltime"] if len(run["curve"]) > 1 else 0)
            if time.time() + last > deadline:
                trainer.request_stop()
            save()

        try:
            trainer = Trainer(config, progress_fn=on_row)
            summary = trainer.run()
        except Exception as e:
            run.update(status="failed", error=_error(e))
            save()
            continue
        final = summary["final"]
        run.update(status="ok", env_steps=summary["env_steps"], stopped_by_budget=summary["interrupted"],
                   final_return=final.get("eval/episode_return"), final_seed_returns=final.get("eval/seed_returns"),
                   train_sps_all_seeds=summary["train_sps"], train_time_s=summary["train_time_s"],
                   walltime_s=summary["walltime_s"],
                   compile_s={k: v for k, v in summary.items() if k.startswith("compile/")})
        metrics = work / algo / "metrics.jsonl"
        if metrics.exists():
            shutil.copy(metrics, out / f"learn_{algo}_metrics.jsonl")
        save()


def preflight(clock: Clock) -> dict:
    """Build (not compile) the paper-scale task: its imports and model load are what the wheels provide."""
    from diffrl.core.build import build

    t0 = time.perf_counter()
    try:
        env, _, _ = build(config_for(PAPER_SCALE, "reppo", None))
        spec = env.spec
        out = {"env": PAPER_SCALE.env, "status": "ok", "obs_size": spec.obs_size, "action_size": spec.action_size}
    except Exception as e:  # recorded; the parts still run (the dry run's task may not need it)
        out = {"env": PAPER_SCALE.env, "status": "failed", "error": _error(e)}
    log(clock, f"preflight: {out}")
    return {**out, "seconds": time.perf_counter() - t0}


# -- errors -----------------------------------------------------------------------------------------
def _error(e: BaseException) -> str:
    from diffrl.commands.bench_cost import error_text

    return error_text(e)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT") or "runs/gpu", help="folder for gpu.json, gpu.md, cost.*")
    p.add_argument("--dry-run", action="store_true", help="the same code on the CPU at toy sizes")
    p.add_argument("--budget-min", type=float, default=8.0, help="no part, group or run starts after this")
    p.add_argument("--t0", type=float, default=None, help="epoch seconds the budget counts from (default: now)")
    p.add_argument("--parts", default="cost,sps,learn", help="comma list of cost, sps, learn")
    p.add_argument("--work-dir", default=None, help="training run directories (default: a temporary folder)")
    p.add_argument("--jax-cache", default=os.environ.get("JAX_COMPILATION_CACHE_DIR")
                   or os.path.join(tempfile.gettempdir(), "diffrl-gpu-jax-cache"), help="persistent compile cache")
    args = p.parse_args(argv)
    unknown = set(args.parts.split(",")) - {"cost", "sps", "learn"}
    if unknown:
        p.error(f"--parts: unknown {', '.join(sorted(unknown))}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.dry_run:  # before jax starts; XLA's lowest optimisation level compiles fastest (tests/conftest.py)
        os.environ["JAX_PLATFORMS"] = "cpu"
        if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
    import jax

    from diffrl.commands.bench_cost import machine
    from diffrl.plumbing.machine import git_commit, library_versions
    from diffrl.plumbing.records import atomic_write_json

    jax.config.update("jax_compilation_cache_dir", args.jax_cache)
    plan = DRY_RUN if args.dry_run else PAPER_SCALE
    clock = Clock(args.t0 or time.time(), 60 * args.budget_min)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="diffrl-gpu-"))
    record = {"schema": "diffrl.gpu_measure/1", "dry_run": args.dry_run, "plan": dataclasses.asdict(plan),
              "budget_s": clock.budget_s, "paper": {k: v for k, v in PAPER.items()}, "machine": machine(),
              "versions": library_versions(), "git_commit": git_commit(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "command": " ".join(sys.argv), "elapsed_s": clock.elapsed(), "parts": {}}

    def save() -> None:
        record["elapsed_s"] = clock.elapsed()
        atomic_write_json(out / "gpu.json", record)
        (out / "gpu.md").write_text(markdown(record))

    record["preflight"] = preflight(clock)  # the paper-scale task builds (every wheel is there), even in a dry run
    save()
    steps = {"cost": lambda p: part_cost(plan, clock, out, p, save),
             "sps": lambda p: part_sps(plan, clock, p, save, record["parts"].get("cost")),
             "learn": lambda p: part_learn(plan, clock, p, save, record["parts"].get("sps"), work, out)}
    for name in args.parts.split(","):
        part = record["parts"].setdefault(name, {"status": "running"})
        if clock.left() <= 0:
            part["status"] = "skipped: budget spent"
            save()
            continue
        log(clock, f"part {name}")
        t0 = time.perf_counter()
        try:
            steps[name](part)
            part["status"] = "done"
        except Exception as e:  # one failing part must not lose the others
            part.update(status="failed", error=_error(e), traceback=traceback.format_exc()[-4000:])
            log(clock, f"part {name} failed: {part['error']}")
        part["wall_s"] = time.perf_counter() - t0
        save()
    log(clock, f"done: {out / 'gpu.json'}")
    print((out / "gpu.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
