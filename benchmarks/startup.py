"""Time to the first training iteration of ``diffrl train``, on a first start and on later ones.

Each start is a fresh process (``python -m diffrl.cli train ...`` as a user runs it) that stops as
soon as the first chunk's program is ready to run; the time is measured from the moment the
process was launched, imports included. Four starts, in this order, share one cache directory:

* ``first``: empty caches: everything is traced and compiled;
* ``second``: both caches warm: the traced programs are read back (``diffrl.plumbing.program_cache``) and
  their executables loaded from JAX's persistent compilation cache;
* ``second, traced``: JAX's cache warm, the traced programs removed: what JAX's cache alone gives;
* ``no cache``: ``--no-compile-cache``: every start compiles.

    python benchmarks/startup.py                       # make train's configuration
    python benchmarks/startup.py --args "--algo ppo --env playground/CartpoleSwingup" --out startup.json

Pin it to one core (``taskset -c 1``) and keep the machine otherwise quiet: the ratio between the
starts is what this measures, and a loaded core stretches every start.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAKE_TRAIN_ARGS = "--algo trudi --env playground/CartpoleBalance --total-env-steps 327680 --num-evals 8"
"""``make train``'s configuration (the Makefile's TRAIN_ARGS)."""

_CHILD = """
import json, os, sys, time
launched = float(os.environ["DIFFRL_STARTUP_LAUNCHED"])
from diffrl.core import stepping

start = stepping.JaxStepper.start

def first_iteration(self, keys, mesh):
    started = start(self, keys, mesh)
    print("STARTUP " + json.dumps({"first_iteration_s": time.time() - launched, **started.compile_times}), flush=True)
    os._exit(0)  # the first chunk is ready: nothing else is measured

stepping.JaxStepper.start = first_iteration
from diffrl.cli import main
sys.exit(main())
"""


def one_start(args: list[str], cache: Path, out: Path) -> dict:
    env = dict(os.environ, DIFFRL_COMPILE_CACHE=str(cache), DIFFRL_STARTUP_LAUNCHED=repr(time.time()))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([sys.executable, "-c", _CHILD, "train", *args, "--no-progress", "--no-tensorboard",
                           "--out", str(out)], env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("STARTUP ")]
    if not lines:
        raise RuntimeError(f"the start did not reach its first iteration:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("STARTUP "):])


def measure(args: list[str], work: Path, log=print) -> list[dict]:
    cache = work / "jax"
    exported = work / "jax-exported"  # diffrl.plumbing.program_cache keeps its entries beside JAX's cache
    rows = []
    for name, extra, prepare in (
            ("first", [], lambda: None),
            ("second", [], lambda: None),
            ("second, traced", [], lambda: shutil.rmtree(exported, ignore_errors=True)),
            ("no cache", ["--no-compile-cache"], lambda: None)):
        prepare()
        row = {"start": name, **one_start([*extra, *args] if extra else args, cache, work / "run")}
        log(f"{name:>15}: first iteration after {row['first_iteration_s']:.1f} s "
            f"(initial state {row['compile/init_s']:.1f} s, chunk {row['compile/chunk_s']:.1f} s, "
            f"programs read {row.get('compile/programs_read', 0)})")
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--args", default=MAKE_TRAIN_ARGS, help="diffrl train flags (default: make train's)")
    parser.add_argument("--out", default=None, help="write the rows, the machine and versions here (JSON)")
    opts = parser.parse_args(argv)
    args = shlex.split(opts.args)
    with tempfile.TemporaryDirectory(prefix="diffrl-startup-") as tmp:
        rows = measure(args, Path(tmp))
    if opts.out:
        from diffrl.plumbing.machine import library_versions, machine_record

        Path(opts.out).write_text(json.dumps({"args": args, "rows": rows, "machine": machine_record(),
                                              "versions": library_versions(),
                                              "load_average": os.getloadavg()}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
