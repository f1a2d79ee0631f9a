"""Summaries, ratios and the markdown table of a ``diffrl bench cost`` record.

Every number derives from the raw per-call seconds and the compiled programs' memory analysis
stored in ``record["results"]``; ratios divide medians (and, separately, minima) of two
contenders timed round-robin in the same group (same N, same process, same minutes).
"""
from __future__ import annotations

import statistics

from diffrl.algos.registry import specs

ORDER = tuple(spec.name for spec in specs())
"""Contenders in table order (the registry's)."""
LABELS = {spec.name: spec.label for spec in specs()}
PAIRS = tuple((spec.name, baseline) for spec in specs() for baseline in spec.cost_baselines)
"""(numerator, denominator) of every ratio reported (those whose contenders were measured): each
algorithm's ``cost_baselines``."""
HEADLINE_PAIRS = tuple((spec.name, baseline) for spec in specs() for baseline in spec.cost_headline)


def time_stats(times: list[float]) -> dict | None:
    if not times:
        return None
    return {"median": statistics.median(times), "min": min(times), "calls": len(times)}


def summarise_row(row: dict) -> dict:
    """Median/min of the iteration and the update, and the rest of the iteration (rollout)."""
    it, up = time_stats(row.get("iteration_s", [])), time_stats(row.get("update_s", []))
    rollout = None
    if it and up:
        rollout = {"median": it["median"] - up["median"], "min": it["min"] - up["min"]}
    return {**row, "summary": {"iteration_s": it, "update_s": up, "rollout_s": rollout}}


def _peak(row: dict, program: str) -> int | None:
    mem = (row.get("memory") or {}).get(f"{program}_compiled")
    return None if not mem else mem.get("peak_estimate_bytes")


def _usable(row: dict | None) -> bool:
    return bool(row and row["status"] == "ok" and row["summary"]["iteration_s"] and row["summary"]["update_s"])


def ratio(num: dict | None, den: dict | None) -> dict:
    """num/den of medians and minima (iteration, update) and of compiled peak memory."""
    if (num and den and num["status"] == den["status"] == "ok" and not num["summary"]["iteration_s"]
            and not den["summary"]["iteration_s"]):  # --memory-only: compiled, never run
        out = {"status": "ok"}
        for program in ("iteration", "update"):
            pa, pb = _peak(num, program), _peak(den, program)
            out[f"{program}_peak_memory"] = pa / pb if pa and pb else None
        return out
    if not (_usable(num) and _usable(den)):
        why = [f"{r['algo']} {r['status']}" + (f" ({r['error']})" if r.get("error") else "")
               for r in (num, den) if r is not None and not _usable(r)]
        return {"status": "unavailable", "reason": "; ".join(why) or "not measured"}
    out: dict = {"status": "ok"}
    for program in ("iteration", "update"):
        a, b = num["summary"][f"{program}_s"], den["summary"][f"{program}_s"]
        out[f"{program}_median"] = a["median"] / b["median"]
        out[f"{program}_min"] = a["min"] / b["min"]
        pa, pb = _peak(num, program), _peak(den, program)
        out[f"{program}_peak_memory"] = pa / pb if pa and pb else None
    return out


def groups(record: dict) -> dict[int, dict[str, dict]]:
    """N -> algo -> summarised row."""
    out: dict[int, dict[str, dict]] = {}
    for row in record["results"]:
        out.setdefault(row["diffusion_steps"], {})[row["algo"]] = row
    return out


def with_summaries(record: dict) -> dict:
    """The record with per-row summaries, ``ratios`` for every group and the ``headline``."""
    record = {**record, "results": [summarise_row(r) for r in record["results"]]}
    ratios = []
    for n, rows in groups(record).items():
        entry = {"diffusion_steps": n}
        for a, b in PAIRS:
            if a in rows and b in rows:
                entry[f"{a}/{b}"] = ratio(rows.get(a), rows.get(b))
        ratios.append(entry)
    record["ratios"] = ratios
    record["headline"] = headline(record)
    return record


def headline(record: dict) -> dict:
    """Iteration and update ratios at N=16 and at the largest N measured."""
    ns = [r["diffusion_steps"] for r in record["ratios"]]
    picks = sorted({n for n in ns if n == 16} | ({max(ns)} if ns else set()))
    out = {}
    for entry in record["ratios"]:
        if entry["diffusion_steps"] in picks:
            out[f"N={entry['diffusion_steps']}"] = {
                key: {"iteration": value.get("iteration_median"), "update": value.get("update_median")}
                for key, value in entry.items() if key != "diffusion_steps"}
    return out


def _fmt_ratio(entry: dict, key: str, field: str) -> str:
    value = entry.get(key, {})
    if value.get("status") != "ok":
        return "failed" if key in entry else "-"
    x = value.get(field)
    return "-" if x is None else f"{x:.2f}x"


def _fmt_ms(row: dict | None, program: str) -> str:
    if row is None:
        return "-"
    if row["status"] != "ok":
        return "OOM" if (row.get("error") or "").startswith("out_of_memory") else "failed"
    s = row["summary"][f"{program}_s"]
    return "-" if s is None else f"{1e3 * s['median']:.1f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def markdown(record: dict) -> str:
    by_n = groups(record)
    present = [a for a in ORDER if any(a in rows for rows in by_n.values())]
    m, b = record["machine"], record["batch"]
    req = record["request"]
    baseline = LABELS[record.get("baseline", "reppo")]  # records before --setting: REPPO
    lines = [f"# Compute cost of the diffusion actors relative to {baseline}: {req['env']}", "",
             f"Batch {b['num_envs']} envs x {b['num_steps']} steps; {req['repeats']} timed calls after "
             f"{req['warmup']} warm-up, round-robin per N; {m['cpu_count']} CPUs, jax backend "
             f"`{m['jax_backend']}` ({m['device_kind']}), jax {record['versions'].get('jax')}.", "",
             f"Command: `{record['command']}`", ""]
    for key, picks in record.get("headline", {}).items():
        parts = [f"{LABELS[a]}/{LABELS[b_]} {_headline_value(picks.get(f'{a}/{b_}'))}"
                 for a, b_ in HEADLINE_PAIRS if f"{a}/{b_}" in picks]
        lines.append(f"- **{key}** (iteration; update): " + ", ".join(parts))
    lines += ["", "## Wall-clock, median ms per call (iteration = rollout + update; update alone)", ""]
    header = ["N"] + [f"{LABELS[a]} iter" for a in present] + [f"{LABELS[a]} update" for a in present]
    rows = [[str(n)] + [_fmt_ms(g.get(a), "iteration") for a in present]
            + [_fmt_ms(g.get(a), "update") for a in present] for n, g in by_n.items()]
    lines += _table(header, rows)
    pairs = [p for p in PAIRS if p[0] in present and p[1] in present]
    lines += ["", "## Ratios of medians within each N (iteration / update / compiled peak memory of the iteration)", ""]
    header = ["N"] + [f"{LABELS[a]}/{LABELS[b_]}" for a, b_ in pairs]
    rows = []
    for entry in record["ratios"]:
        rows.append([str(entry["diffusion_steps"])] + [
            " / ".join(_fmt_ratio(entry, f"{a}/{b_}", f) for f in ("iteration_median", "update_median",
                                                                   "iteration_peak_memory"))
            for a, b_ in pairs])
    lines += _table(header, rows)
    lines += ["", "## Memory, MiB: XLA estimate of the compiled program (argument + output - alias + temp); "
              "compile s (iteration + update)", ""]
    header = ["N"] + [f"{LABELS[a]} iter MiB" for a in present] + [f"{LABELS[a]} update MiB" for a in present] \
        + [f"{LABELS[a]} compile s" for a in present]
    rows = [[str(n)] + [_fmt_mib(g.get(a), "iteration") for a in present]
            + [_fmt_mib(g.get(a), "update") for a in present] + [_fmt_compile(g.get(a)) for a in present]
            for n, g in by_n.items()]
    lines += _table(header, rows)
    params = {r["algo"]: r["policy_parameters"] for r in record["results"] if r.get("policy_parameters")}
    if params:
        lines += ["", "Policy parameters: " + ", ".join(f"{LABELS[a]} {p / 1e6:.2f}M" for a, p in params.items()
                                                        if a in LABELS)]
    failures = [r for r in record["results"] if r["status"] != "ok" or r.get("stopped_early")]
    skipped = record.get("skipped_groups", [])
    if failures or skipped:
        lines += ["", "## Failed, cut short or not run", ""]
        lines += [f"- N={g['diffusion_steps']}: not run ({g['reason']})" for g in skipped]
        seen = set()
        for r in failures:
            text = r.get("error") or f"stopped after {len(r['iteration_s'])} call(s) (--budget-s)"
            if (r["algo"], r["diffusion_steps"], text) not in seen:
                seen.add((r["algo"], r["diffusion_steps"], text))
                lines.append(f"- N={r['diffusion_steps']} {r['algo']}: {text}")
    return "\n".join(lines) + "\n"


def _headline_value(value: dict | None) -> str:
    if not value or value.get("iteration") is None:
        return "n/a"
    return f"{value['iteration']:.2f}x; {value['update']:.2f}x"


def _fmt_mib(row: dict | None, program: str) -> str:
    peak = None if row is None else _peak(row, program)
    return "-" if peak is None else f"{peak / 2**20:.1f}"


def _fmt_compile(row: dict | None) -> str:
    c = None if row is None else row.get("compile_s")
    return "-" if not c else f"{c['iteration'] + c['update']:.1f}"
