"""XLA's cost analysis of a compiled program, with every while loop counted as often as it runs.

``compiled.cost_analysis()`` (XLA's ``HloCostAnalysis``) counts the body of a ``while`` loop **once**,
whatever its trip count (checked: a ``lax.scan`` of 10 matmuls of 64x128 by 128x128 reports 2.1 MFLOP,
the hand count is 21.0 MFLOP; the same scan with ``unroll=True`` reports 21.0). Every ``lax.scan`` and
``fori_loop`` becomes such a loop, so a training iteration (rollout scan, epoch and minibatch scans,
diffusion chains) is undercounted by orders of magnitude.

The correction here keeps XLA's own per-instruction counting and only multiplies: the optimized HLO
module of the compiled program is re-parsed with each while body as the entry computation
(``jaxlib._hlo.hlo_module_from_text``) and costed by the same ``HloCostAnalysis``
(``hlo_module_cost_analysis``). With X(C) XLA's count of computation C (nested loops once) and T(C)
the true count, for the while loops W directly in C (body B, condition K, trip count n)::

    T(C) = X(C) + sum_W [ n T(B) - X(B) + (n + 1) T(K) - X(K) ]

applied recursively (T(B) corrects B's own nested loops). The trip count n is the
``known_trip_count`` XLA's loop analysis writes into the while's backend config (every scan and
static-bound fori_loop has one). A loop without one (a ``lax.while_loop`` whose exit depends on
data, e.g. an iterative physics solver) is counted once, as XLA does, and listed under
``unknown_trip_loops``: the corrected figure is then a lower bound.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

KEYS = ("flops", "transcendentals", "bytes accessed")
"""The additive cost fields that are corrected (the per-operand ``bytes accessed{...}`` keys are kept raw)."""

_COMP_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s+\(.*\{\s*$")
_BODY_RE = re.compile(r"\bbody=%?([\w.\-]+)")
_COND_RE = re.compile(r"\bcondition=%?([\w.\-]+)")
_TRIP_RE = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
_NAME_RE = re.compile(r"%([\w.\-]+)")
_OPCODE_RE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\(")
_METADATA_RE = re.compile(r",\s*metadata=\{[^{}]*\}")
_BRANCHES_RE = re.compile(r"branch_computations=\{([^}]*)\}")
_TRUE_FALSE_RE = re.compile(r"(?:true|false)_computation=%?([\w.\-]+)")
_TO_APPLY_RE = re.compile(r"to_apply=%?([\w.\-]+)")
KERNEL_OPCODES = frozenset({
    "fusion", "dot", "convolution", "custom-call", "reduce", "scatter", "gather", "sort", "reduce-window",
    "select-and-scatter", "dynamic-update-slice", "dynamic-slice", "copy", "transpose", "concatenate", "pad",
    "rng-bit-generator", "all-reduce", "cholesky", "triangular-solve", "fft"})
"""Opcodes of instructions that are each counted as one kernel launch (a proxy for a GPU's count)."""


@dataclass
class _Module:
    header: str
    order: list[str]                       # computation names in text order
    lines: dict[str, list[str]]            # name -> its lines (definition line .. closing brace)
    entry: str
    whiles: dict[str, list[tuple[str, str, int | None]]] = field(default_factory=dict)  # comp -> (body, cond, n)
    calls: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)  # comp -> called groups (a
    # conditional's branches form one group, of which the most expensive counts; a call one of one)
    kernels: dict[str, int] = field(default_factory=dict)  # comp -> its own kernel-like instructions
    refs: dict[str, set[str]] = field(default_factory=dict)


def parse(text: str) -> _Module:
    header, order, lines, entry, current = "", [], {}, None, None
    for line in text.splitlines():
        line = _METADATA_RE.sub("", line)
        if current is None:
            if line.startswith("HloModule"):
                header = line
                continue
            m = _COMP_RE.match(line)
            if m:
                current = m.group(2)
                order.append(current)
                lines[current] = [line]
                if m.group(1):
                    entry = current
            continue
        lines[current].append(line)
        if line.strip() == "}":
            current = None
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    mod = _Module(header, order, lines, entry)
    names = set(order)
    for name, body in lines.items():
        mod.refs[name] = {r for line in body[1:] for r in _NAME_RE.findall(line) if r in names and r != name}
        loops, calls, kernels = [], [], 0
        for line in body[1:]:
            op = _OPCODE_RE.match(line)
            op = op.group(1) if op else ""
            kernels += op in KERNEL_OPCODES
            if op == "while":
                trip = _TRIP_RE.search(line)
                loops.append((_BODY_RE.search(line).group(1), _COND_RE.search(line).group(1),
                              int(trip.group(1)) if trip else None))
            elif op == "conditional":
                m = _BRANCHES_RE.search(line)
                branches = [b.strip().lstrip("%") for b in m.group(1).split(",")] if m else _TRUE_FALSE_RE.findall(line)
                calls.append(tuple(branches))
            elif op == "call":
                calls.append((_TO_APPLY_RE.search(line).group(1),))
        mod.whiles[name], mod.calls[name], mod.kernels[name] = loops, calls, kernels
    return mod


def _reachable(mod: _Module, root: str) -> list[str]:
    seen, stack = {root}, [root]
    while stack:
        for r in mod.refs[stack.pop()]:
            if r not in seen:
                seen.add(r)
                stack.append(r)
    return [n for n in mod.order if n in seen]


def _entry_text(mod: _Module, root: str) -> str:
    """A module whose entry computation is ``root`` (with everything it calls)."""
    out = ["HloModule cost_" + re.sub(r"[^\w]", "_", root)]
    for name in _reachable(mod, root):
        first, *rest = mod.lines[name]
        first = re.sub(r"^ENTRY\s+", "", first)
        if name == root:
            first = "ENTRY " + first
        out.append(first)
        out.extend(rest)
    return "\n".join(out) + "\n"


def _xla_cost(text: str) -> dict[str, float]:
    import jax
    import jaxlib._hlo as hlo
    from jax._src.lib import _jax

    module = hlo.hlo_module_from_text(text)
    client = jax.devices("cpu")[0].client
    raw = _jax.hlo_module_cost_analysis(client, module)
    return {k: float(raw.get(k, 0.0)) for k in KEYS}


def corrected_cost(hlo_text: str) -> dict:
    """XLA's cost of the module's entry computation, raw and with every loop body times its trip count.

    Returns ``{"xla": {...}, "corrected": {...}, "loops": [...], "unknown_trip_loops": k,
    "kernels_executed": m, "loop_trips": t}``; ``kernels_executed`` counts the launches of
    fusion/dot/reduce-like instructions (loop bodies times their trips; fused computations are one
    launch; a proxy for a GPU's launch count: its fusion decisions differ from the CPU's), and
    ``loop_trips`` the loop iterations executed (each one a condition evaluated)."""
    mod = parse(hlo_text)
    xcache: dict[str, dict[str, float]] = {}
    tcache: dict[str, tuple[dict[str, float], float, float]] = {}
    loops_out: list[dict] = []
    unknown = [0]

    loop_cache: dict[str, bool] = {}

    def has_loop(name: str) -> bool:
        if name not in loop_cache:
            loop_cache[name] = any(mod.whiles[n] for n in _reachable(mod, name))
        return loop_cache[name]

    def x(name: str) -> dict[str, float]:
        if name not in xcache:
            xcache[name] = _xla_cost(_entry_text(mod, name))
        return xcache[name]

    def t(name: str, mult: float, depth: int) -> tuple[dict[str, float], float, float]:
        """(corrected cost, kernels launched, loop trips) of one execution of ``name``."""
        key = name
        if key in tcache:
            cost, kern, trips = tcache[key]
        else:
            cost = dict(x(name))
            kern, trips = float(mod.kernels[name]), 0.0
            for group in mod.calls[name]:  # call / conditional: XLA counts the (most expensive) callee
                deltas = []                # once per execution; only nested loops need correcting
                for callee in group:
                    if has_loop(callee):
                        tc_, kc_, lc_ = t(callee, mult, depth)
                        deltas.append(({k: tc_[k] - x(callee)[k] for k in KEYS}, kc_, lc_))
                    else:
                        deltas.append(({k: 0.0 for k in KEYS}, float(mod.kernels[callee]), 0.0))
                worst = max(deltas, key=lambda d: (d[0]["flops"], d[1]))
                for k in KEYS:
                    cost[k] += worst[0][k]
                kern += worst[1]
                trips += worst[2]
            for body, cond, n in mod.whiles[name]:
                if n is None:
                    unknown[0] += 1
                reps, creps = (1, 1) if n is None else (n, n + 1)  # unknown: as XLA, body and condition once
                tb, kb, lb = t(body, mult * reps, depth + 1)
                tc, kc, _ = t(cond, mult * creps, depth + 1)
                xb, xc = x(body), x(cond)
                for k in KEYS:
                    cost[k] += reps * tb[k] - xb[k] + creps * tc[k] - xc[k]
                kern += reps * kb + creps * kc
                trips += reps + reps * lb
                loops_out.append({"computation": name, "body": body, "trip_count": n, "depth": depth,
                                  "executions": mult, "body_flops_once": xb["flops"],
                                  "body_flops_corrected": tb["flops"]})
            tcache[key] = (cost, kern, trips)
        return cost, kern, trips

    corrected, kernels, trips = t(mod.entry, 1.0, 0)
    return {"xla": x(mod.entry), "corrected": corrected, "loops": loops_out,
            "unknown_trip_loops": unknown[0], "kernels_executed": kernels, "loop_trips": trips}


def compiled_cost(compiled) -> dict:
    """:func:`corrected_cost` of a ``jax.stages.Compiled`` (also checks that the re-parsed entry
    reproduces ``compiled.cost_analysis()``'s raw flops)."""
    out = corrected_cost(compiled.as_text())
    ca = compiled.cost_analysis()
    ca = ca[0] if isinstance(ca, (list, tuple)) else ca
    out["xla_cost_analysis"] = {k: float(ca.get(k, 0.0)) for k in KEYS}
    return out


if __name__ == "__main__":  # a self-check: python benchmarks/xla_cost.py
    import jax
    import jax.numpy as jnp

    m, k, steps = 64, 128, 10

    def chain(x, ws):
        return jax.lax.scan(lambda h, w: (jnp.dot(h, w), None), x, ws)[0]

    c = jax.jit(chain).lower(jax.ShapeDtypeStruct((m, k), jnp.float32),
                             jax.ShapeDtypeStruct((steps, k, k), jnp.float32)).compile()
    r = compiled_cost(c)
    print(json.dumps({"hand": 2 * m * k * k * steps, "xla": r["xla"]["flops"], "corrected": r["corrected"]["flops"]}))
