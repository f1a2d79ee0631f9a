"""Fingerprints what every algorithm computes: a short run of each, its per-iteration training metrics
and its evaluation returns hashed bit for bit. Two checkouts on one machine give the same fingerprint
exactly when a change kept behaviour (a refactor must; a fix of a method need not, and says so).

    .venv/bin/python scripts/behaviour_fingerprint.py                 # this checkout: algo -> hash
    .venv/bin/python scripts/behaviour_fingerprint.py --compare REF   # REF (a commit) against this checkout

Each run is its own process (the compile state of one cannot leak into the next), on one core with
one XLA thread, so the comparison is between programs as a user runs them. ``--compare`` checks REF out
into a temporary git worktree and runs the same short runs from there with its own src/ first on the
path; fingerprints are compared per algorithm. Float results differ between machines, so fingerprints
are compared only between two checkouts on one machine, never with a number committed elsewhere.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = {"toy/MirrorGoals": "every algorithm", "playground/CartpoleBalance": ("ppo", "reppo", "trudi", "amdp")}

_CHILD = r"""
import hashlib, json, os, sys, tempfile
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import numpy as np
from diffrl.core.trainer import Trainer
from diffrl.config.presets import resolve
algo, env = sys.argv[1], sys.argv[2]
config = resolve(algo, env, None)
off_policy = config.algo in ("sac", "dime-off", "amdp-off")
sizes = dict(num_envs=8, num_steps=2 if off_policy else 8, num_evals=2, eval_envs=4, num_seeds=2,
             episode_length=25, out=tempfile.mkdtemp())
sizes["total_env_steps"] = sizes["num_envs"] * sizes["num_steps"] * (64 if off_policy else 4)
config = config.replace(**sizes)
if off_policy:
    from diffrl.config.overrides import set_field
    for key, value in {"offpolicy.learning_starts": 64, "offpolicy.batch_size": 16, "offpolicy.renorm_warmup": 0}.items():
        config = set_field(config, key, value)
digest, rows = hashlib.sha256(), []
def metrics_fn(first, metrics):
    for name in sorted(metrics):
        digest.update(name.encode()); digest.update(np.ascontiguousarray(np.asarray(metrics[name], np.float64)).tobytes())
def progress_fn(row):
    rows.append({k: v for k, v in row.items() if k.startswith("eval")})
trainer = Trainer(config, progress_fn=progress_fn, metrics_fn=metrics_fn)
trainer.run()
digest.update(json.dumps(rows, sort_keys=True, default=float).encode())
print("FINGERPRINT " + json.dumps({"hash": digest.hexdigest()[:16], "eval": rows[-1] if rows else None}))
"""


def fingerprint(src: Path, algos: list[str]) -> dict[str, str]:
    """(algo, env) label -> hash (or the error's last line) of short runs with ``src`` first on the path."""
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    out = {}
    for task, which in TASKS.items():
        for algo in algos:
            if which != "every algorithm" and algo not in which:
                continue
            done = subprocess.run([sys.executable, "-c", _CHILD, algo, task], env=env, capture_output=True,
                                  text=True, cwd=tempfile.gettempdir())
            lines = [l for l in done.stdout.splitlines() if l.startswith("FINGERPRINT ")]
            result = json.loads(lines[-1][12:])["hash"] if lines else \
                "error: " + (done.stderr.strip().splitlines() or ["no output"])[-1]
            out[f"{algo} on {task}"] = result
            print(f"  {algo} on {task}: {result}", flush=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compare", metavar="REF", help="a commit to compare this checkout with")
    parser.add_argument("--algos", nargs="*", help="default: every registered algorithm")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from diffrl.algos import ALGORITHMS

    algos = args.algos or sorted(ALGORITHMS)
    print(f"this checkout ({ROOT}):")
    here = fingerprint(ROOT / "src", algos)
    if not args.compare:
        return 0 if not any(v.startswith("error") for v in here.values()) else 1
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "ref"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.compare],
                       check=True, capture_output=True)
        try:
            print(f"{args.compare}:")
            there = fingerprint(tree / "src", algos)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    differ = [k for k in here if here[k] != there.get(k) or here[k].startswith("error")]
    for k in differ:
        print(f"DIFFERS {k}: {args.compare} {there.get(k)}  this checkout {here[k]}")
    print(f"{len(here) - len(differ)} of {len(here)} runs bit-identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
