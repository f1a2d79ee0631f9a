"""The markdown tables of a ``benchmarks/paper_cost.py`` record (``<tier>.md``): per cell the corrected
FLOPs and bytes, XLA's peak memory, the GPU roofline and launch floor (:mod:`paper_cost_model`), the
evaluation programs, and on the ``cpu`` tier this machine's matmul peak and each iteration's achieved rate.
"""
from __future__ import annotations

from paper_cost_model import HOST_SPECS, LAUNCH_S, derive, iteration_of, simulator_per_env_step


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
