"""``gpu.md``: the markdown page of a lent GPU session's record (``benchmarks/gpu/measure.py`` writes both
after every step): the preflight and each part's status, a. cost ratios against REPPO beside the papers'
figures, b. training against the simulator alone, c. learning against REPPO's published return.
"""
from __future__ import annotations

PAPER = {"amdp/reppo": {16: "~1.1x", 128: "~1.1x"}, "amdp-backprop/amdp": {16: "10x", 128: "72-80x"},
         "trudi/reppo": {16: "~1.8x", 128: "~1.8x"}, "reppo_return": 875.0, "reppo_return_env_steps": 50_000_000}
"""Figures the papers report (AMDP; TruDi; REPPO on CartpoleSwingup)."""


def _f(x, spec: str, missing: str = "-") -> str:
    return missing if x is None else format(x, spec)


def markdown(record: dict) -> str:
    from diffrl.commands.bench_cost_report import LABELS

    m, parts = record["machine"], record["parts"]
    lines = [f"# diffrl on {m.get('device_kind')} ({m.get('jax_backend')}): {record['plan']['env']}", "",
             f"jax {record['versions'].get('jax')}, {m.get('cpu_count')} CPUs; {record['elapsed_s']:.0f} s "
             f"of a {record['budget_s']:.0f} s budget{' (dry run)' if record['dry_run'] else ''}; "
             f"commit {record.get('git_commit')}.", ""]
    pre = record.get("preflight") or {}
    lines.append(f"- preflight ({pre.get('env')} builds): {pre.get('status')}" + (f" ({pre['error']})" if pre.get("error") else ""))
    for name, p in parts.items():
        lines.append(f"- {name}: {p.get('status')}" + (f" ({p['error']})" if p.get("error") else ""))
    cost = parts.get("cost", {})
    if cost.get("record"):
        lines += ["", "## a. Cost relative to REPPO (ratios of medians within each N; full tables: cost.md)", "",
                  "| N | pair | iteration | update | compiled memory | paper |", "|---:|---|---:|---:|---:|---|"]
        for entry in cost["record"]["ratios"]:
            n = entry["diffusion_steps"]
            for key, v in entry.items():
                if key == "diffusion_steps":
                    continue
                a, b = key.split("/")
                ok = v.get("status") == "ok"
                lines.append(f"| {n} | {LABELS[a]}/{LABELS[b]} | {_f(v.get('iteration_median') if ok else None, '.2f')}"
                             f" | {_f(v.get('update_median') if ok else None, '.2f')} | "
                             f"{_f(v.get('iteration_peak_memory') if ok else None, '.2f')} | "
                             f"{PAPER.get(key, {}).get(n, '')} |")
        peaks = cost.get("device_peak_bytes_after_group", {})
        if peaks:
            lines += ["", "Device allocator's peak (process-wide, so after each group the largest so far): "
                      + ", ".join(f"after N={n} {_f(v and v / 2**30, '.2f', 'n/a')} GiB" for n, v in peaks.items())]
        for s in cost.get("skipped", []):
            lines.append(f"- N={s['diffusion_steps']}: not run for {', '.join(s['algos'])}: {s['reason']}")
    sps = parts.get("sps", {})
    if sps.get("rows"):
        lines += ["", "## b. Training against the simulator alone (median s per iteration)", "",
                  "| envs | contender | env steps/s | s / iteration | x simulator | compile s | source |",
                  "|---:|---|---:|---:|---:|---:|---|"]
        for r in sps["rows"]:
            name = r["contender"] + (f" (N={r['diffusion_steps']})" if r.get("diffusion_steps") else "")
            lines.append(f"| {r['num_envs']} | {name} | {r['sps']:,.0f} | {r['seconds_per_iteration']:.4f} | "
                         f"{_f(r['x_simulator'], '.1f')} | {_f(r['compile_s'], '.1f')} | {r['source']} |")
        lines += [f"- {s['num_envs']} envs, {s['contender']}: not measured ({s['reason']})" for s in sps["skipped"]]
    learn = parts.get("learn", {})
    if learn.get("runs") or learn.get("skipped"):
        ref = learn.get("reference", {})
        lines += ["", f"## c. Learning, {record['plan']['learn_seeds']} seeds per program (REPPO published: "
                  f"{ref.get('reppo_return')} at {ref.get('env_steps', 0) / 1e6:g}M env steps)", "",
                  "| algo | env steps per seed | final return, mean | per seed | train env steps/s (all seeds) "
                  "| compile s | status |", "|---|---:|---:|---|---:|---:|---|"]
        for r in learn.get("runs", []):
            seeds = ", ".join(f"{x:.1f}" for x in r.get("final_seed_returns") or [])
            lines.append(f"| {r['algo']} | {_f(r.get('env_steps'), ',')} | {_f(r.get('final_return'), '.1f')} | "
                         f"{seeds} | {_f(r.get('train_sps_all_seeds'), ',.0f')} | "
                         f"{_f(sum((r.get('compile_s') or {}).values()) or None, '.1f')} | "
                         f"{r['status']}{' (stopped by the budget)' if r.get('stopped_by_budget') else ''} |")
        lines += [f"- {s['algo']}: not run ({s['reason']})" for s in learn.get("skipped", [])]
    return "\n".join(lines) + "\n"
