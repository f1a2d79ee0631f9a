"""Test-wide settings: CPU, headless rendering, a fast-compiling XLA, a persistent compilation cache,
one core per pytest-xdist worker."""
import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MUJOCO_GL", "egl")

# The pytest processes compile at XLA's backend optimisation level 0. Their tests check what the
# code computes, not how fast, and most of their time is XLA compiling many small programs: level
# 0 cut a cold G1 rollout plus `bench cost` from 351 to 280 s (user CPU 237 -> 167 s) and two
# update/resume tests from 73 to 59 s; the whole suite's CPU time fell by 16 %, though the few
# compute-bound tests run slower (the TruDi fixed-point tests: 35 -> 90 s). The learning tests,
# compute-bound and calibrated under the default level, train in a child process with the
# XLA_FLAGS the run was started with (tests/multiseed.py): the code users run. An explicit level
# in XLA_FLAGS wins; pytest-xdist workers inherit both variables from the controller.
# They also compile with XLA:CPU's older loop emitters instead of its fusion emitters, whose MLIR
# pipeline is most of the remaining backend compile time: measured on four compile-bound test
# files (trudi_fixed_point, cli, offpolicy, sharding; cold caches, side by side on one core
# each), backend compile 114 -> 58 s and pytest 492 -> 368 s, the same tests passing. An explicit
# setting in XLA_FLAGS wins here too.
TEST_XLA_FLAGS = {"xla_backend_optimization_level": "0", "xla_cpu_use_fusion_emitters": "false"}
os.environ.setdefault("DIFFRL_TEST_USER_XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
for _flag, _value in TEST_XLA_FLAGS.items():
    if _flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --{_flag}={_value}").strip()


def pin_xdist_worker(worker: str | None, num_workers: int, cores: list[int]) -> set[int] | None:
    """The cores a pytest-xdist worker ``gwI`` keeps: the I-th of ``num_workers`` equal, disjoint
    blocks of ``cores`` (None: not an xdist worker, or more workers than cores).

    ``make test`` runs 2 workers on 2 cores, and most tests are compute-bound XLA programs whose
    thread pool takes every core it is allowed: two workers then run 4 busy threads on 2 cores,
    and the threads that spin waiting for work take cycles from those that have it. One core per
    worker, measured on two CartpoleBalance trainings run side by side (20k steps, 4 seeds): TruDi
    265 -> 243 s, AMDP 219 -> 193 s (XLA's thread pool sizes itself from the affinity mask).
    """
    if not worker or not worker.startswith("gw") or num_workers < 1 or num_workers > len(cores):
        return None
    index, per_worker = int(worker[2:]), len(cores) // num_workers
    return set(cores[index * per_worker:(index + 1) * per_worker])


if hasattr(os, "sched_setaffinity"):  # Linux; elsewhere the workers share the cores
    _worker_cores = pin_xdist_worker(os.environ.get("PYTEST_XDIST_WORKER"),
                                     int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")),
                                     sorted(os.sched_getaffinity(0)))
    if _worker_cores:
        os.sched_setaffinity(0, _worker_cores)

import jax  # noqa: E402

# Identical programs compiled in several tests (and in repeated local runs) are
# compiled once; CI starts with an empty cache, which only costs the first compile.
_cache = os.environ.setdefault("DIFFRL_TEST_COMPILATION_CACHE",
                               str(Path(__file__).resolve().parent.parent / ".jax_cache"))
jax.config.update("jax_compilation_cache_dir", _cache)
# diffrl commands run as child processes use it too, not the user's cache (~/.cache/diffrl/jax)
os.environ.setdefault("DIFFRL_COMPILE_CACHE", _cache)
# Caching every compile instead (threshold 0) changed nothing measurable: 62 tests of 7 files, cold caches
# side by side on one core each, 619 s against 633 s.
jax.config.update("jax_persistent_cache_min_compile_time_secs", 2.0)


def worker_chunks(num_items: int, num_workers: int) -> list[int]:
    """Sizes of the contiguous blocks that pytest-xdist's ``--dist worksteal`` first hands to each
    worker: every worker in turn gets ``len(pending) // workers_left`` of the pending tests."""
    sizes, left = [], num_items
    for remaining in range(num_workers, 0, -1):
        sizes.append(left // remaining)
        left -= sizes[-1]
    return sizes


def pytest_collection_modifyitems(config, items):
    """Start the longest tests first, one block per pytest-xdist worker (longest-processing-time first).

    ``make test`` runs 2 workers with ``--dist worksteal``: worker 1 first gets the first half of
    the collection, worker 2 the second, and an idle worker later steals from the end of the
    other's queue. Tests marked ``@pytest.mark.heavy(seconds)`` (the CartpoleBalance learning tests,
    4-13 min each, and the light tests that take about a minute with a cold compile cache, as in
    CI) lead the workers' blocks, the longest first to the least loaded block, and the short tests
    fill in around them. In collection order the CartpoleBalance tests ran one after another on one
    worker at the end while the other was idle (29:46 in all, 24 min of work per worker); a
    minute-long test at the end of a queue leaves the other worker idle for that long.
    """
    heavy = [item for item in items if item.get_closest_marker("heavy")]
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not heavy:
        return
    heavy.sort(key=lambda item: -item.get_closest_marker("heavy").args[0])
    light = [item for item in items if not item.get_closest_marker("heavy")]
    sizes = worker_chunks(len(items), max(workers, 1))
    blocks: list[list] = [[] for _ in sizes]
    loads = [0.0] * len(sizes)
    for item in heavy:
        open_blocks = [b for b in range(len(sizes)) if len(blocks[b]) < sizes[b]]
        target = min(open_blocks, key=lambda b: loads[b])
        blocks[target].append(item)
        loads[target] += item.get_closest_marker("heavy").args[0]
    for b, size in enumerate(sizes):
        while len(blocks[b]) < size:
            blocks[b].append(light.pop(0))
    items[:] = [item for block in blocks for item in block]
