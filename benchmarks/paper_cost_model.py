"""What a compiled training iteration costs on a GPU, from XLA's analyses of it (benchmarks/xla_cost.py):
per env step and per run figures, a roofline time on an H100 SXM and an H200 (fp32 dots on TF32 tensor
cores, and every flop at the fp32 non-tensor peak as the pessimistic bound), a kernel-launch floor, and
an iteration composed from its parts where the whole did not compile. The measuring is
``benchmarks/paper_cost.py``; the tables, ``benchmarks/paper_cost_report.py``.
"""
from __future__ import annotations

MANISKILL = "maniskill/PushCube-v1"
HOST_SPECS = {
    # host environments (stepped outside JAX): the sizes the learner sees (tests/test_maniskill.py); only
    # the update and the acting step compile, the simulator is not an XLA program
    MANISKILL: {"obs_size": 35, "action_size": 8, "episode_length": 50},
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
