"""Latency of deployed policies: onnxruntime against JAX, per policy kind, sampler and chain length.

    python benchmarks/deploy_latency.py --out benchmarks/results/deploy_latency

For each policy kind at its default (paper-scale) network (PPO and REPPO: the Gaussian, 3 x 512,
LayerNorm; TruDi: the DIME chain, 3 x 256; AMDP: the adjoint chain, 3 x 256) on a
dm_control-Humanoid-sized problem (67 observations, 21 actions), every evaluation sampler is
exported (``diffrl.artefacts.deploy``: normaliser inside, noise as an input) and timed at batch 1 and
batch 1024, chains at N = 8, 16 and 128 denoising steps:

* ``onnxruntime``: ``InferenceSession.run`` on the ``.onnx`` graph (CPU provider);
* ``jax``: the same function, ``jax.jit``-compiled, ``block_until_ready`` (what ``diffrl eval``
  runs, without the PRNG).

Both get ``--threads`` intra-op threads (default 1: a robot's control loop usually owns one core;
run it pinned, ``taskset -c 0 python benchmarks/deploy_latency.py ...``).

Both run in this one process, side by side, on the same inputs, so the ratio is the figure to read
(this machine is shared and noisy). Each cell is the median of repeated calls after warm-up.
Parameters are random (latency does not depend on their values). Writes ``table.md`` and
``latency.json`` under ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _threads_from_argv(argv: list[str]) -> int:
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return 1


if __name__ == "__main__" and _threads_from_argv(sys.argv) == 1:
    # set before jax is imported: XLA's CPU client reads its thread settings once
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
                               "intra_op_parallelism_threads=1").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from diffrl.artefacts import deploy  # noqa: E402
from diffrl.plumbing.machine import library_versions  # noqa: E402
from diffrl.critics.categorical import CategoricalCritic, CriticConfig  # noqa: E402
from diffrl.artefacts.export import export_policy  # noqa: E402
from diffrl.artefacts.export_critic import export_critic  # noqa: E402
from diffrl.maths.normalization import init_stats  # noqa: E402
from diffrl.policies.adjoint import AdjointPolicy, AdjointPolicyConfig  # noqa: E402
from diffrl.policies.diffusion import DiffusionPolicy, DiffusionPolicyConfig  # noqa: E402
from diffrl.policies.gaussian import GaussianPolicy, GaussianPolicyConfig  # noqa: E402

OBS, ACT = 67, 21
KINDS = {
    "gaussian": ("ppo, reppo", GaussianPolicy, GaussianPolicyConfig, False),
    "diffusion": ("trudi", DiffusionPolicy, DiffusionPolicyConfig, True),
    "adjoint": ("amdp", AdjointPolicy, AdjointPolicyConfig, True),
}


def median_seconds(fn, min_time: float, max_calls: int = 200) -> float:
    fn()  # warm-up (compilation, session arena)
    times, start = [], time.perf_counter()
    while len(times) < max_calls and (time.perf_counter() - start < min_time or len(times) < 5):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(kind: str, num_steps: int | None, batches: list[int], min_time: float, workdir: Path,
            threads: int, only: set[str] | None = None) -> list[dict]:
    import onnxruntime as ort

    algos, policy_cls, config_cls, is_chain = KINDS[kind]
    config = config_cls(num_steps=num_steps) if is_chain else config_cls()
    policy = policy_cls(config, ACT)
    params = jax.jit(lambda k: policy.init(k, OBS))(jax.random.PRNGKey(0))
    params = jax.tree.map(lambda p: p + 0.05 * jax.random.normal(jax.random.PRNGKey(1), p.shape), params)
    out = workdir / f"{kind}_{num_steps}"
    export_policy(out, kind, config, ACT, OBS, params, init_stats(OBS), normalize_obs=True, obs_clip=10.0,
                  sampler=policy.samplers[0])
    # best-of-k: K = 16 candidates scored by the default (512-wide) categorical critic
    critic = CategoricalCritic(CriticConfig())
    critic_params = jax.jit(lambda k: critic.init(k, jnp.zeros((1, OBS)), jnp.zeros((1, ACT))))(jax.random.PRNGKey(2))
    export_critic(out, CriticConfig(), critic_params, init_stats(OBS), OBS, ACT, 16, policy.acting_sampler)
    rows = []
    for sampler in (*policy.samplers, "best-of-k"):
        if only and sampler not in only:
            continue
        fn, noise_shape, _ = deploy.deployable(out, sampler)
        onnx_path = deploy.export_onnx(out, sampler)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        jitted = jax.jit(fn)
        for batch in batches:
            rng = np.random.default_rng(batch)
            obs = rng.standard_normal((batch, OBS)).astype(np.float32)
            feeds = {"obs": obs}
            if noise_shape is not None:
                feeds["noise"] = deploy.draw_noise(noise_shape, batch, seed=batch)
            args = [jnp.asarray(v) for v in feeds.values()]
            ort_s = median_seconds(lambda: session.run(["action"], feeds), min_time)
            jax_s = median_seconds(lambda: jitted(*args).block_until_ready(), min_time)
            diff = float(np.max(np.abs(session.run(["action"], feeds)[0] - np.asarray(jitted(*args)))))
            rows.append({"kind": kind, "algos": algos, "sampler": sampler, "num_steps": num_steps, "batch": batch,
                         "onnxruntime_ms": 1e3 * ort_s, "jax_ms": 1e3 * jax_s, "ratio_jax_over_ort": jax_s / ort_s,
                         "max_abs_diff": diff})
            print(f"{kind:9s} {sampler:12s} N={num_steps!s:>4s} B={batch:5d}  onnxruntime {1e3 * ort_s:9.3f} ms  "
                  f"jax {1e3 * jax_s:9.3f} ms  jax/ort {jax_s / ort_s:5.2f}  |diff| {diff:.1e}", flush=True)
    return rows


def write_table(rows: list[dict], out: Path, command: str) -> None:
    lines = [f"Command: `{command}`", "",
             f"Policies at their default networks, {OBS} observations, {ACT} actions; median latency per call "
             "(ms) on this machine's CPU, one intra-op thread each unless the command says otherwise; "
             "JAX / ORT > 1: onnxruntime is faster.", "",
             "| algorithm (policy) | sampler | N | batch | onnxruntime ms | JAX ms | JAX / ORT | max abs diff |",
             "|---|---|---|---|---|---|---|---|"]
    kinds = list(KINDS)
    rows = sorted(rows, key=lambda r: (kinds.index(r["kind"]), r["num_steps"] or 0, r["sampler"] == "best-of-k",
                                       r["sampler"], r["batch"]))
    for r in rows:
        lines.append(f"| {r['algos']} ({r['kind']}) | {r['sampler']} | {r['num_steps'] or '-'} | {r['batch']} | "
                     f"{r['onnxruntime_ms']:.3f} | {r['jax_ms']:.3f} | {r['ratio_jax_over_ort']:.2f} | "
                     f"{r['max_abs_diff']:.1e} |")
    (out / "table.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", default="8,16,128", help="chain lengths N (comma-separated)")
    p.add_argument("--batches", default="1,1024")
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--samplers", default=None, help="only these samplers (comma-separated; default: all)")
    p.add_argument("--append", action="store_true", help="merge into the --out directory's latency.json, "
                   "replacing rows of the same policy, sampler, N and batch")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds of repeated calls per cell")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads of onnxruntime and XLA (1: both "
                   "single-threaded; other values leave XLA's default)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    steps = [int(s) for s in args.steps.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds.split(","):
            for n in (steps if KINDS[kind][3] else [None]):
                rows += measure(kind, n, batches, args.min_time, Path(tmp), args.threads,
                                set(args.samplers.split(",")) if args.samplers else None)
    command = "python benchmarks/deploy_latency.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.append and (out / "latency.json").exists():
        old = json.loads((out / "latency.json").read_text())
        key = lambda r: (r["kind"], r["sampler"], r["num_steps"], r["batch"])  # noqa: E731
        new_keys = {key(r) for r in rows}
        rows = [r for r in old["rows"] if key(r) not in new_keys] + rows
        command = old["command"] + "; " + command
    (out / "latency.json").write_text(json.dumps({"command": command, "rows": rows, "versions": library_versions(),
                                                  "cpu_count": os.cpu_count(), "threads": args.threads,
                                                  "xla_flags": os.environ.get("XLA_FLAGS", "")}, indent=2))
    write_table(rows, out, command)
    print(f"wrote {out / 'table.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
