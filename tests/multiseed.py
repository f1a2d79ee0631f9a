"""Multi-seed learning runs for the learning tests: seeds are the unit of evidence.

A learning outcome on a CPU depends on float rounding, which differs between x86 machines (and
between XLA settings), so a single seed near a threshold is a coin flip. Every learning test
trains K seeds in ONE vmapped program (``--num-seeds``), and asserts on the median of the
final evaluation over seeds and on how many seeds collapsed, with thresholds taken from the
measured seed distribution (``benchmarks/results/stability/`` and the runs each test cites).

With ``DIFFRL_LEARNING_RECORD=DIR`` every call also writes its per-seed curves to
``DIR/<test id>.json``: that is how the per-seed figures quoted in the tests are collected, and
how two machines (or two XLA settings) are compared seed by seed.

The training runs in a child process with the caller's own ``XLA_FLAGS``
(:data:`USER_XLA_FLAGS`): the pytest process compiles at a lower XLA optimisation level
(tests/conftest.py), which would change the code the thresholds were measured with. The child
runs on one core (one XLA thread), whatever the machine's core count.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from diffrl.plumbing.machine import cpu_identity, cpu_model

USER_XLA_FLAGS_VAR = "DIFFRL_TEST_USER_XLA_FLAGS"
USER_XLA_FLAGS = os.environ.get(USER_XLA_FLAGS_VAR, os.environ.get("XLA_FLAGS", ""))
"""The XLA_FLAGS the test run was started with, before tests/conftest.py lowered the
optimisation level of the pytest processes (learning runs use these)."""

# What the child process runs: the default preset plus the test's changes, as `diffrl train` would.
# It runs on ONE core (the first its parent may use), so XLA's thread pool has one thread on every
# machine: how XLA splits work between threads changes the rounding (TruDi's CartpoleBalance seeds
# after 20k steps: 256 271 257 298 with 2 threads, 248 286 219 432 with 1), so a learning verdict
# would otherwise depend on the core count of the machine as well as on its CPU.
ONE_CORE = """
import os
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
"""
_RUNNER = ONE_CORE + """
import json, sys
from diffrl.core.trainer import Trainer
from diffrl.config.overrides import set_field
from diffrl.config.presets import resolve
spec = json.loads(sys.argv[1])
changes = {k: tuple(v) if isinstance(v, list) else v for k, v in spec["changes"].items()}
config = resolve(spec["algo"], spec["env"], None).replace(**{k: v for k, v in changes.items() if "." not in k})
for key, value in changes.items():  # nested fields ("critic.hidden"), as --set would set them
    if "." in key:
        config = set_field(config, key, value)
trainer = Trainer(config)
trainer.run()
print(json.dumps(list(trainer.samplers)))
"""

LONG_TESTS = os.environ.get("DIFFRL_LONG_TESTS") == "1"


def long_only(what: str):
    """Mark a test that runs only with ``DIFFRL_LONG_TESTS=1``: ``what`` says what it costs.

    The CI tier (``make test``) must stay under 30 minutes on 2 cores; it keeps one multi-seed
    learning test per algorithm on the task ``make train`` runs (Playground CartpoleBalance). The
    long tier adds the rest of the multi-seed evidence, whose committed runs are cited in each test.
    """
    return pytest.mark.skipif(not LONG_TESTS, reason=f"{what}; run with DIFFRL_LONG_TESTS=1")


@dataclass
class SeedCurves:
    """Evaluations of K seeds: ``env_steps`` (E,), and per sampler (E, K) arrays.

    Row 0 is the evaluation before training. ``returns[s]``, ``mode_reached[s]`` and
    ``behaviour_entropy[s]`` (the last two for tasks with modes) are keyed by sampler name.
    """

    env_steps: np.ndarray
    returns: dict
    mode_reached: dict
    behaviour_entropy: dict

    def final(self, sampler: str | None = None) -> np.ndarray:
        """(K,) final evaluation return per seed (default sampler: the first)."""
        return self.returns[sampler or next(iter(self.returns))][-1]

    def median_final(self, sampler: str | None = None) -> float:
        return float(np.median(self.final(sampler)))


def train_seeds(out: Path, algo: str, env: str, num_seeds: int, samplers: tuple[str, ...] = (),
                **changes) -> SeedCurves:
    """Train ``num_seeds`` seeds of ``algo`` on ``env`` (its default preset plus ``changes``; a dotted
    key such as ``"critic.hidden"`` sets a nested field, as ``--set`` does) in a child process with
    :data:`USER_XLA_FLAGS`."""
    changes = dict(out=str(out), progress=False, tensorboard=False, checkpoint_every=0, num_seeds=num_seeds,
                   eval_samplers=list(samplers), **changes)
    spec = json.dumps({"algo": algo, "env": env, "changes": changes})
    child_env = {**os.environ, "XLA_FLAGS": USER_XLA_FLAGS}
    cache = os.environ.get("DIFFRL_TEST_COMPILATION_CACHE")
    if cache:  # the test session's persistent compilation cache (tests/conftest.py)
        child_env.update(JAX_COMPILATION_CACHE_DIR=cache, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="2")
    proc = subprocess.run([sys.executable, "-c", _RUNNER, spec], env=child_env, capture_output=True, text=True)
    assert proc.returncode == 0, f"training {algo} on {env} failed:\n{proc.stderr[-4000:]}"
    names = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "eval/seed_returns" in r]

    def per_sampler(metric: str) -> dict:
        out_ = {}
        for i, name in enumerate(names):
            key = ("eval/" if i == 0 else f"eval/{name}/") + metric
            if key in rows[0]:
                out_[name] = np.array([r[key] for r in rows], np.float64)
        return out_

    curves = SeedCurves(np.array([r["env_steps"] for r in rows]), per_sampler("seed_returns"),
                        per_sampler("seed_mode_reached"), per_sampler("seed_behaviour_entropy"))
    record(curves, algo, env)
    return curves


def record(curves: SeedCurves, algo: str, env: str) -> None:
    """Write ``curves`` under ``$DIFFRL_LEARNING_RECORD`` (if set), named by the running test."""
    directory = os.environ.get("DIFFRL_LEARNING_RECORD")
    if not directory:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", f"{algo}-{env}").split(" ")[0]
    name = re.sub(r"[^A-Za-z0-9_.\[\]-]+", "_", f"{test}--{algo}--{env}")
    Path(directory).mkdir(parents=True, exist_ok=True)
    data = {"test": test, "algo": algo, "env": env, "env_steps": curves.env_steps.tolist(),
            "xla_flags": USER_XLA_FLAGS, "cpu": cpu_model(), "cpu_identity": cpu_identity(),
            **{field: {k: v.tolist() for k, v in getattr(curves, field).items()}
               for field in ("returns", "mode_reached", "behaviour_entropy")}}
    (Path(directory) / f"{name}.json").write_text(json.dumps(data))
