"""diffrl's REPPO against the official REPPO JAX code, side by side, same configuration.

Usage (the command behind benchmarks/results/reference_reppo/):

    python benchmarks/reference_reppo.py --reference ~/reppo --out benchmarks/results/reference_reppo

The official implementation is ``src/jaxrl/reppo.py`` of github.com/cvoelcker/reppo (the
REPPO paper's code, arXiv 2507.11019). This script fetches nothing: install it by hand,

    git clone https://github.com/cvoelcker/reppo ~/reppo && git -C ~/reppo checkout a7ab85b
    python -m venv ~/reppo-venv && echo "$(.venv/bin/python -c 'import site; print(site.getsitepackages()[0])')" \\
        > ~/reppo-venv/lib/python3.11/site-packages/diffrl.pth     # sees diffrl's packages
    ~/reppo-venv/bin/pip install --no-deps distrax==0.1.9 tfp-nightly==0.26.0.dev20261027 \\
        decorator cloudpickle gast dm-tree   # distrax; its TFP substrate (tensorflow-probability 0.25
                                             # no longer imports under jax 0.10; the nightly does)

and run this script with that venv's python (or with ``--reference-python``). Without a
checkout it prints how to get one and exits 0 (nothing measured). The reference module imports
wandb, optuna, plotly, hydra and omegaconf for its command line only; where they are not
installed, empty stand-ins let ``make_train_fn`` import (it never calls them).

Both contenders train Playground CartpoleSwingup (Playground's JAX implementation) with the
configuration of the measurement in the REPPO paper's small-data setting, scaled to 2 CPU cores:
32 envs x 32 steps, 8 epochs x 16 minibatches of 64, 256-wide actor (2 hidden layers) and
categorical critic (2 encoder + 2 head + 2 auxiliary-prediction layers, RMSNorm, 151 bins,
HL-Gauss), 16 old-policy samples for the KL, observation normalisation. diffrl runs its
``reppo-dmc-cpu`` preset (which is this configuration) through the pure ``make_train``; the
reference runs its ``make_train_fn`` with ``num_eval=1``, so both programs are one jitted
training of ``--total-env-steps`` steps plus one evaluation of 32 episodes x 1000 steps
(diffrl's evaluation runs the same 32 x 1000 steps in the same program).

Each repeat runs the two contenders at the same time as two processes pinned to one core each
(``taskset``), and swaps the cores between repeats, so machine noise and core differences hit
both alike. Reported per contender: compile seconds, training seconds and env steps/s (compile
excluded), the final evaluation return, and the ratio diffrl/reference of the steps/s.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

REFERENCE_COMMIT = "a7ab85b"
REFERENCE_HINT = ("no checkout of the official REPPO code at {path}; install it by hand (this script "
                  "fetches nothing): git clone https://github.com/cvoelcker/reppo {path} && "
                  "git -C {path} checkout " + REFERENCE_COMMIT + ", then pip install --no-deps distrax==0.1.9 "
                  "tfp-nightly==0.26.0.dev20261027 (see this file's docstring)")


def reference_config(total_env_steps: int, num_envs: int, num_steps: int, entropy_target_mult: float) -> dict:
    """The reference's hyperparameters (its config/reppo.yaml fields) for the shared configuration."""
    return dict(
        lr=3e-4, gamma=0.99, total_time_steps=total_env_steps, num_steps=num_steps, lmbda=0.95, lmbda_min=0.5,
        num_mini_batches=16, num_envs=num_envs, num_epochs=8, max_grad_norm=0.5, normalize_env=True,
        polyak=1.0, exploration_noise_min=1.0, exploration_noise_max=1.0, exploration_base_envs=0,
        ent_start=0.01, ent_target_mult=entropy_target_mult, kl_start=0.01, eval_interval=1, num_eval=1,
        max_episode_steps=1000, critic_hidden_dim=256, actor_hidden_dim=256, vmin=0, vmax=150, num_bins=151,
        hl_gauss=True, kl_bound=0.1, aux_loss_mult=1.0, update_kl_lagrangian=True,
        update_entropy_lagrangian=True, use_critic_norm=True, num_critic_encoder_layers=2,
        num_critic_head_layers=2, num_critic_pred_layers=2, use_simplical_embedding=False,
        use_critic_skip=False, use_actor_norm=True, num_actor_layers=3, actor_min_std=0.0,
        use_actor_skip=False, reduce_kl=True, reverse_kl=False, anneal_lr=False, actor_kl_clip_mode="clipped")


def _stub_cli_modules() -> list[str]:
    """Empty stand-ins for the reference's command-line-only imports that are not installed."""

    class _Anything:
        def __init__(self, *args, **kwargs):
            pass

        def __call__(self, *args, **kwargs):
            return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else _Anything()

        def __getattr__(self, name):
            return _Anything()

    def attribute(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything

    def module(name: str) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__path__ = []  # a package, so that its submodules (plotly.graph_objs) import
        m.__getattr__ = attribute  # type: ignore[attr-defined]
        return m

    stubbed = []
    for name in ("wandb", "optuna", "plotly", "omegaconf"):
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = module(name)
            stubbed.append(name)
            if name == "plotly":
                sys.modules["plotly.graph_objs"] = module("plotly.graph_objs")
    try:
        __import__("hydra")
    except ImportError:
        hydra = module("hydra")
        hydra.main = lambda *a, **k: (lambda fn: fn)  # the decorator of its main(); never called here
        sys.modules["hydra"] = hydra
        stubbed.append("hydra")
    return stubbed


def run_reference(args) -> dict:
    import jax
    from ml_collections import ConfigDict  # noqa: F401  (the reference's env wrapper needs it)
    from mujoco_playground import registry

    stubbed = _stub_cli_modules()
    import flax

    # The reference was written for flax 0.10, whose nnx Modules were not pytrees and could hold
    # plain lists of layers; flax >= 0.12 makes Modules pytrees by default. This flag restores the
    # old behaviour for every Module defined below (the computation is unchanged).
    flax.config.update("flax_pytree_module", False)
    sys.path.insert(0, str(Path(args.reference).expanduser()))
    from src.env_utils.jax_wrappers import MjxGymnaxWrapper
    from src.jaxrl.reppo import ReppoConfig, make_train_fn

    task = args.env.split("/", 1)[1]
    env_config = registry.get_default_config(task)
    env_config["impl"] = "jax"  # Playground's JAX implementation, as diffrl runs it
    env = MjxGymnaxWrapper(task, episode_length=1000, reward_scale=1.0, config=env_config.to_dict())
    cfg = ReppoConfig(**reference_config(args.total_env_steps, args.num_envs, args.num_steps,
                                         args.reference_entropy_target_mult))
    train_fn = make_train_fn(cfg=cfg, env=env, log_callback=lambda state, metrics: None, num_seeds=1)
    key = jax.random.PRNGKey(args.seed)
    t0 = time.perf_counter()
    compiled = jax.jit(train_fn, static_argnums=(1,)).lower(key, cfg).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, metrics = compiled(key)
    jax.block_until_ready(metrics)
    train_s = time.perf_counter() - t0
    final = float(jax.numpy.ravel(metrics["eval/episode_return"])[-1])
    return {"compile_s": compile_s, "train_s": train_s, "final_return": final, "stubbed_modules": stubbed,
            "config": reference_config(args.total_env_steps, args.num_envs, args.num_steps,
                                       args.reference_entropy_target_mult)}


def run_diffrl(args) -> dict:
    import jax
    import jax.numpy as jnp

    from diffrl.core.build import build
    from diffrl.core.evaluate import make_evaluate
    from diffrl.core.loop import make_train
    from diffrl.config.overrides import set_field
    from diffrl.config.presets import resolve

    config = resolve("reppo", args.env, None).replace(
        total_env_steps=args.total_env_steps, num_envs=args.num_envs, num_steps=args.num_steps, num_seeds=1,
        num_evals=1, eval_envs=32, progress=False)
    for item in args.set:
        key, value = item.split("=", 1)
        config = set_field(config, key, value)
    _, algo, eval_env = build(config)
    train = make_train(config)
    evaluate = make_evaluate(config, eval_env, algo)
    sampler = algo.samplers[0]

    def train_and_evaluate(key):
        key_train, key_eval = jax.random.split(key)
        ts, metrics = train(key_train)
        ev = evaluate(ts.algo, ts.obs_stats, ts.critic_obs_stats, key_eval, sampler)
        return ev, jnp.mean(metrics["train/episode_return"])

    key = jax.random.PRNGKey(args.seed)
    t0 = time.perf_counter()
    compiled = jax.jit(train_and_evaluate).lower(key).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ev, _ = compiled(key)
    jax.block_until_ready(ev)
    train_s = time.perf_counter() - t0
    return {"compile_s": compile_s, "train_s": train_s, "final_return": float(ev["episode_return"]),
            "sampler": sampler, "overrides": list(args.set),
            "trained_env_steps": config.num_chunks * config.iterations_per_chunk * config.num_envs * config.num_steps}


def worker(args) -> int:
    result = (run_reference if args.worker == "reference" else run_diffrl)(args)
    result["env_steps"] = result.pop("trained_env_steps", args.total_env_steps)
    result["sps"] = result["env_steps"] / result["train_s"]
    result["versions"] = _versions()  # this worker's own (the reference may run in another venv)
    Path(args.result).write_text(json.dumps(result, indent=2))
    return 0


def _launch(args, who: str, core: int, result: Path, python: str) -> subprocess.Popen:
    cmd = [python, __file__, "--worker", who, "--result", str(result), "--env", args.env,
           "--total-env-steps", str(args.total_env_steps), "--num-envs", str(args.num_envs),
           "--num-steps", str(args.num_steps), "--seed", str(args.seed), "--reference", args.reference,
           "--reference-entropy-target-mult", str(args.reference_entropy_target_mult)]
    for item in args.set:
        cmd += ["--set", item]
    if args.cores:
        cmd = ["taskset", "-c", str(core)] + cmd
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1")
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _versions() -> dict:
    """diffrl's run-record versions, plus distrax and its TFP (the packages only the reference needs)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        from diffrl.plumbing.machine import library_versions
    except ImportError:  # the reference's venv sees diffrl's dependencies but not its editable install
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
        from diffrl.plumbing.machine import library_versions

    try:
        distrax = version("distrax")
    except PackageNotFoundError:
        distrax = "not installed"
    tfp = "not installed"
    for name in ("tfp-nightly", "tensorflow-probability"):  # distrax's JAX substrate, either distribution
        try:
            tfp = f"{name} {version(name)}"
            break
        except PackageNotFoundError:
            pass
    return {**library_versions(), "distrax": distrax, "tensorflow_probability": tfp}


def table(rows: list[dict]) -> str:
    lines = ["| repeat | cores (diffrl, reference) | diffrl steps/s | reference steps/s | ratio | "
             "diffrl compile s | reference compile s | diffrl final return | reference final return |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        d, ref = r["diffrl"], r["reference"]
        lines.append(f"| {r['repeat']} | {r['cores']} | {d['sps']:,.0f} | {ref['sps']:,.0f} | "
                     f"{d['sps'] / ref['sps']:.2f}x | {d['compile_s']:.0f} | {ref['compile_s']:.0f} | "
                     f"{d['final_return']:.0f} | {ref['final_return']:.0f} |")
    ratios = [r["diffrl"]["sps"] / r["reference"]["sps"] for r in rows]
    lines.append("")
    lines.append(f"diffrl / reference steps/s over {len(rows)} repeats: mean {sum(ratios) / len(ratios):.2f}x, "
                 f"min {min(ratios):.2f}x, max {max(ratios):.2f}x")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reference", default=os.environ.get("DIFFRL_REPPO_REFERENCE", "~/reppo"),
                   help="checkout of github.com/cvoelcker/reppo (default $DIFFRL_REPPO_REFERENCE or ~/reppo)")
    p.add_argument("--reference-python", default=sys.executable,
                   help="python that runs the reference (one that has distrax); default: this one")
    p.add_argument("--env", default="playground/CartpoleSwingup")
    p.add_argument("--total-env-steps", type=int, default=204_800)
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--num-steps", type=int, default=32)
    p.add_argument("--reference-entropy-target-mult", type=float, default=-0.5,
                   help="the reference's ent_target_mult (target entropy = -mult x action dims; 0.5 in "
                        "its config = diffrl's -0.5); diffrl's preset uses +0.5 d: the cost is the same")
    p.add_argument("--set", action="append", default=[], help="override a diffrl config field (key=value)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--cores", default="0,1", help="two CPU cores to pin the contenders to ('' = no pinning)")
    p.add_argument("--out", default=None, help="folder for results.json and table.md")
    p.add_argument("--worker", choices=["diffrl", "reference"], help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)

    reference = Path(args.reference).expanduser()
    if not (reference / "src" / "jaxrl" / "reppo.py").is_file():
        print("[reference_reppo] skipped: " + REFERENCE_HINT.format(path=reference))
        return 0
    commit = subprocess.run(["git", "-C", str(reference), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    args.reference = str(reference)
    cores = [int(c) for c in args.cores.split(",")] if args.cores else [0, 0]
    out = Path(args.out) if args.out else Path("/tmp/reference_reppo")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for repeat in range(args.repeats):
        core_d, core_r = (cores[0], cores[1]) if repeat % 2 == 0 else (cores[1], cores[0])
        procs = {"diffrl": (_launch(args, "diffrl", core_d, out / f"diffrl-{repeat}.json", sys.executable),
                            out / f"diffrl-{repeat}.json"),
                 "reference": (_launch(args, "reference", core_r, out / f"reference-{repeat}.json",
                                       args.reference_python), out / f"reference-{repeat}.json")}
        row = {"repeat": repeat, "cores": f"{core_d}, {core_r}" if args.cores else "unpinned"}
        for who, (proc, path) in procs.items():
            log, _ = proc.communicate()
            if proc.returncode != 0:
                print(log, file=sys.stderr)
                raise SystemExit(f"[reference_reppo] the {who} worker failed (exit {proc.returncode})")
            row[who] = json.loads(path.read_text())
            path.unlink()
        rows.append(row)
        print(f"[reference_reppo] repeat {repeat}: diffrl {row['diffrl']['sps']:,.0f} steps/s, reference "
              f"{row['reference']['sps']:,.0f} steps/s", flush=True)
    results = {"env": args.env, "total_env_steps": args.total_env_steps, "num_envs": args.num_envs,
               "num_steps": args.num_steps, "reference_commit": commit, "versions": _versions(),
               "command": " ".join([Path(sys.executable).name] + sys.argv), "repeats": rows}
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "table.md").write_text(table(rows) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
