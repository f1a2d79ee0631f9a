"""This machine's fp32 matmul and streaming rates through XLA's CPU backend: the peak that
``benchmarks/paper_cost.py --tier cpu`` sets each compiled iteration's achieved FLOP/s against.

    python benchmarks/matmul_peak.py     # one JSON line: the rates of this process (pin it with taskset)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

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
    cmd = ["taskset", "-c", cores, "nice", "-n", "10", sys.executable, __file__]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


if __name__ == "__main__":
    print(json.dumps(matmul_peak()))
