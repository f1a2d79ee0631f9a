"""The official REPPO code's multi-seed stability on a Playground task, in stability.py's format.

diffrl's REPPO drops late on Playground CartpoleBalance at the CPU scale (32 envs x 32 steps per
update; benchmarks/results/stability/). This script asks whether the official implementation
(``src/jaxrl/reppo.py`` of github.com/cvoelcker/reppo, the REPPO paper's code, arXiv 2507.11019) does
the same at the same scale: it runs the reference's own ``make_train_fn`` with ``num_seeds`` seeds in
one vmapped program and ``num_eval`` evaluations (the reference's own: its deterministic policy,
``num_envs`` episodes of 1000 steps from reset states, its observation normaliser), and writes a
record that ``stability.py --report`` tables next to diffrl's runs (the same normalisation by the
random policy's return, the same late-drop statistic).

The configuration is the reference's ``config/reppo.yaml`` with the small-data override's update
shape scaled to 2 CPU cores (``reference_reppo.reference_config``: lr 3e-4 for both networks, the
KL multiplier starting at 0.01, 8 epochs x 16 minibatches, KL bound 0.1), and by default its own
entropy target (``ent_target_mult`` 0.5: a target entropy of -0.5 per action dimension).

The evaluation returns of each chunk are appended to ``progress.jsonl`` in the output folder as the
run goes (the reference's ``log_callback``), so a run stopped early keeps what it measured.

Usage (see reference_reppo.py's docstring for the checkout and the venv with distrax):

    ~/reppo-venv/bin/python benchmarks/reference_stability.py --reference ~/reppo \\
        --env playground/CartpoleBalance --num-seeds 8 --num-evals 24 --total-env-steps 491520 \\
        --out benchmarks/results/stability/cartpole_balance_reference_reppo
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from reference_reppo import REFERENCE_HINT, _stub_cli_modules, _versions, reference_config
from stability import MAX_RETURN, seed_statistics


def random_floor(env: str) -> float:
    """stability.py's random-policy return for ``env`` (diffrl's evaluation of uniform actions)."""
    from stability import random_return

    from diffrl.config.presets import resolve

    return random_return(resolve("reppo", env, None))


def run(args) -> dict:
    import jax
    from ml_collections import ConfigDict  # noqa: F401  (the reference's env wrapper needs it)
    from mujoco_playground import registry

    stubbed = _stub_cli_modules()
    import flax

    flax.config.update("flax_pytree_module", False)  # the reference's flax-0.10 Modules (reference_reppo.py)
    sys.path.insert(0, str(Path(args.reference).expanduser()))
    from src.env_utils.jax_wrappers import MjxGymnaxWrapper
    from src.jaxrl.reppo import ReppoConfig, make_train_fn

    task = args.env.split("/", 1)[1]
    env_config = registry.get_default_config(task)
    env_config["impl"] = "jax"
    env = MjxGymnaxWrapper(task, episode_length=1000, reward_scale=1.0, config=env_config.to_dict())
    fields = reference_config(args.total_env_steps, args.num_envs, args.num_steps, args.entropy_target_mult)
    fields["num_eval"] = args.num_evals
    cfg = ReppoConfig(**fields)
    out = Path(args.out)
    progress = out / "progress.jsonl"
    progress.write_text("")
    t0 = time.perf_counter()

    def log_callback(state, metrics):
        row = {"env_steps": np.asarray(metrics["time_step"]).ravel().tolist(),
               "seed_returns": np.asarray(metrics["eval/episode_return"]).ravel().tolist(),
               "train_episode_return": np.asarray(metrics["train/episode_return"]).ravel().tolist(),
               "wall_s": time.perf_counter() - t0}
        with open(progress, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[reference_stability] {row['env_steps'][0]:,} steps: "
              + " ".join(f"{r:.0f}" for r in row["seed_returns"]), flush=True)

    train_fn = make_train_fn(cfg=cfg, env=env, log_callback=log_callback, num_seeds=args.num_seeds)
    _, metrics = jax.jit(train_fn, static_argnums=(1,))(jax.random.PRNGKey(args.seed), cfg)
    jax.block_until_ready(metrics)
    wall = time.perf_counter() - t0
    returns = np.asarray(metrics["eval/episode_return"], np.float64)  # (E, seeds)
    steps = np.asarray(metrics["time_step"])[:, 0].astype(np.int64)
    trained = int(steps[-1])
    low, high = random_floor(args.env), MAX_RETURN.get(args.env, float("nan"))
    return {
        "algo": "reppo-reference", "env": args.env, "num_seeds": args.num_seeds, "seed": args.seed,
        "preset": "reference config/reppo.yaml (reference_reppo.reference_config)", "samplers": ["mean"],
        "env_steps": steps.tolist(), "random_return": low, "max_return": high, "trained_env_steps": trained,
        "eval_episodes": args.num_envs,
        "per_sampler": {"mean": {"returns": returns.tolist(),
                                 "seeds": seed_statistics(steps, returns, low, high, trained)}},
        "wall_s": wall, "reference_config": fields, "stubbed_modules": stubbed, "kl_bound": fields["kl_bound"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", default="~/reppo", help="checkout of github.com/cvoelcker/reppo at a7ab85b")
    # the reference steps Playground's JAX tasks only (its MjxGymnaxWrapper); the others have no record here
    p.add_argument("--env", default="playground/CartpoleBalance",
                   choices=sorted(env for env in MAX_RETURN if env.startswith("playground/")))
    p.add_argument("--num-seeds", type=int, default=8)
    p.add_argument("--num-evals", type=int, default=24)
    p.add_argument("--total-env-steps", type=int, default=491_520)
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--num-steps", type=int, default=32)
    p.add_argument("--entropy-target-mult", type=float, default=0.5,
                   help="the reference's ent_target_mult: target entropy = -mult x action dims (its default 0.5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="folder for the record (stability.py's format) and progress")
    args = p.parse_args(argv)
    reference = Path(args.reference).expanduser()
    if not (reference / "src" / "jaxrl" / "reppo.py").is_file():
        p.error(REFERENCE_HINT.format(path=reference))
    for name in ("num_seeds", "num_evals", "total_env_steps", "num_envs", "num_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    iterations = args.total_env_steps // (args.num_envs * args.num_steps)
    if iterations < args.num_evals:
        p.error(f"{iterations} updates cannot hold {args.num_evals} evaluations: raise --total-env-steps")
    args.reference = str(reference)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record = run(args)
    record["versions"] = _versions()
    record["command"] = " ".join(["python"] + sys.argv)
    name = f"{args.env.replace('/', '_')}--reppo-reference"
    (out / f"{name}.json").write_text(json.dumps(record, indent=1))
    drops = [s["worst_drop"] for s in record["per_sampler"]["mean"]["seeds"]]
    print(f"[reference_stability] {args.num_seeds} seeds, {record['wall_s']:.0f} s; worst late drops: "
          + " ".join(f"{d:.2f}" for d in drops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
