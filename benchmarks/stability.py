"""Multi-seed stability of training: per-seed curves, drops from the best, per-iteration diagnostics.

Usage (the command behind ``benchmarks/results/stability/``):

    python benchmarks/stability.py --algos reppo,trudi,amdp --envs gymnax/Pendulum-v1 \
        --num-seeds 8 --num-evals 24 --eval-envs 32 --out benchmarks/results/stability/pendulum_after
    python benchmarks/stability.py --report before=benchmarks/results/stability/pendulum_before \
        after=benchmarks/results/stability/pendulum_after --out benchmarks/results/stability/pendulum.md

(``benchmarks/results/stability/README.md`` lists every command behind that directory.)

Each (algo, env) pair trains ``--num-seeds`` seeds in ONE vmapped program with the pair's
default preset (``--set key=value`` or ``--set algo:key=value`` overrides a field). Every
evaluation runs every sampler the algorithm has (or ``--samplers``). Written under ``OUT/``:

* ``<env>--<algo>.json``: per-seed evaluation returns per sampler, the random policy's
  return, the normalisation range, the per-seed stability statistics below, the config;
* ``<env>--<algo>.npz``: every training metric per seed and iteration ((seeds, iterations)
  arrays: trust-region KL and its bound, out-of-region fraction, alpha, beta, the entropy
  estimate, the critic's squared TD error ``critic/q_mse``, ...);
* ``<env>--<algo>.png``: per-seed evaluation curves and those diagnostics;
* ``table.md``: one row per seed (best, final, worst drop) and a summary per pair.

Long runs survive a crash or a kill: each pair trains in ``OUT/runs/<env>--<algo>/``, writing a
checkpoint every ``--checkpoint-every`` evaluations and its per-seed training metrics chunk by chunk.
Rerun the same command with ``--resume`` and every unfinished pair continues from its latest valid
checkpoint (bit for bit the run it would have been), while pairs already recorded are read back, not
retrained. Without ``--resume`` a pair whose run directory already holds a run is refused.

Normalised return: (R - R_random) / (R_max - R_random), R_random the mean return of
uniformly random actions (measured here with the same evaluation code) and R_max the
task's largest possible return (:data:`MAX_RETURN`). The worst drop of a seed is the
largest fall of its normalised return below its own best-so-far at any evaluation in the
last third of training (evaluations at env steps >= 2/3 of the total).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules when imported from elsewhere
from grid import Cell, cell_config, cells, evaluated_samplers, parse_settings, run_grid  # noqa: E402

# Largest possible undiscounted return per task (reward upper bound x episode length).
MAX_RETURN = {
    "gymnax/Pendulum-v1": 0.0,  # reward -(theta^2 + 0.1 thetadot^2 + 0.001 u^2) <= 0
    "playground/CartpoleBalance": 1000.0,  # DM Control: rewards in [0, 1], 1000 steps
    "playground/CartpoleSwingup": 1000.0,
    "playground/PendulumSwingup": 1000.0,
    "playground/CheetahRun": 1000.0,
    "dmc/cartpole-balance": 1000.0,  # dm_control itself (a host environment): the same bound
    "dmc/walker-stand": 1000.0,
}
DIAGNOSTICS = ("actor/kl", "actor/out_of_trust_region", "dual/alpha", "dual/beta", "am/kl", "am/lambda",
               "actor/entropy_estimate", "critic/q_mse", "policy/approx_kl", "policy/clip_fraction")


class RandomPolicy:
    """Uniform actions in [-1, 1]^d through the evaluation code (the normalisation's zero)."""

    def __init__(self, action_size: int):
        self.action_size = action_size

    def eval_action(self, state, obs, critic_obs, key, sampler):
        import jax

        return jax.random.uniform(key, obs.shape[:-1] + (self.action_size,), minval=-1.0, maxval=1.0)


def random_return(config, episodes: int = 256, seed: int = 12345) -> float:
    """Mean return of uniformly random actions over ``episodes`` evaluation episodes (at most 32 on a
    host-stepped environment: each dm_control episode is 1000 host steps, 256 would take minutes)."""
    import jax

    from diffrl.core.build import build
    from diffrl.core.run import evaluation_stepper
    from diffrl.envs.registry import is_host_env
    from diffrl.maths.normalization import init_stats

    episodes = min(episodes, 32) if is_host_env(config.env) else episodes  # its cost, not its code path
    config = config.replace(eval_envs=episodes, num_seeds=1)
    _, _, eval_env = build(config)
    spec = eval_env.spec
    stepper = evaluation_stepper(config, RandomPolicy(spec.action_size), eval_env)
    with_seeds = lambda tree: jax.tree.map(lambda x: x[None], tree)  # noqa: E731
    try:
        out = stepper.evaluate(None, with_seeds(init_stats(spec.obs_size)), with_seeds(init_stats(spec.critic_size)),
                               jax.random.PRNGKey(seed)[None], "random")
    finally:
        stepper.close()
    return float(out["episode_return"][0])


DROP_THRESHOLD = 0.2
"""A seed *drops* when its worst drop exceeds this (normalised return)."""


def worst_drop_at(steps: np.ndarray, returns: np.ndarray, total_steps: int) -> tuple[int, float] | None:
    """(index of the evaluation, its fall) of the largest fall below the best-so-far at evaluations
    in the last third; returns (E,) normalised. None when no evaluation is in the last third."""
    late = np.asarray(steps) >= (2.0 / 3.0) * total_steps
    if not np.any(late):
        return None
    falls = np.where(late, np.maximum.accumulate(returns) - returns, -np.inf)
    index = int(np.argmax(falls))
    return index, float(falls[index])


def worst_drop(steps: np.ndarray, returns: np.ndarray, total_steps: int) -> float:
    """Largest fall below the best-so-far at evaluations in the last third; returns (E,) normalised."""
    at = worst_drop_at(steps, returns, total_steps)
    return float("nan") if at is None else at[1]


def seed_statistics(steps, returns, low: float, high: float, total_steps: int) -> list[dict]:
    """returns: (E, seeds) raw -> per seed {best, final, worst_drop} (normalised) and raw values."""
    norm = (np.asarray(returns, np.float64) - low) / (high - low)
    out = []
    for i in range(norm.shape[1]):
        out.append({
            "seed": i,
            "best": float(norm[:, i].max()),
            "final": float(norm[-1, i]),
            "worst_drop": worst_drop(np.asarray(steps), norm[:, i], total_steps),
            "best_raw": float(np.max(returns[:, i])),
            "final_raw": float(returns[-1, i]),
        })
    return out


PER_SEED_METRICS = "per_seed_metrics"
"""Subdirectory of a pair's run directory: one ``<first iteration>.npz`` of (seeds, iterations)
training metrics per chunk, so that a resumed run still has every iteration's diagnostics."""


class UnfinishedRunError(RuntimeError):
    """A pair's run directory already holds a run, and ``--resume`` was not given (or the run there
    was made with other settings)."""


def save_chunk_metrics(run_dir: Path, first_iteration: int, metrics: dict) -> None:
    """Write one chunk's per-seed metrics atomically (a kill leaves the old file or the new one)."""
    folder = run_dir / PER_SEED_METRICS
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{first_iteration:09d}.tmp.npz"
    np.savez(tmp, **{k.replace("/", "__"): np.asarray(v) for k, v in metrics.items()})
    os.replace(tmp, folder / f"{first_iteration:09d}.npz")


def load_chunk_metrics(run_dir: Path, before_iteration: int | None = None) -> list[tuple[int, dict]]:
    """The saved chunks in order, [(first iteration, {name: (seeds, iterations)})], those starting
    before ``before_iteration`` when given."""
    chunks = []
    for path in sorted((run_dir / PER_SEED_METRICS).glob("[0-9]*[0-9].npz")):
        first = int(path.stem)
        if before_iteration is None or first < before_iteration:
            with np.load(path) as data:
                chunks.append((first, {k.replace("__", "/"): data[k] for k in data.files}))
    return chunks


def run_pair(algo: str, env: str, args, overrides: dict) -> dict:
    from diffrl.algos.registry import ALGORITHM_SECTIONS
    from diffrl.core.trainer import Trainer

    name = Cell(algo, env).name
    out = Path(args.out)
    if args.resume and (out / f"{name}.json").exists():
        print(f"[stability] {name}: already recorded in {out}, read back", file=sys.stderr, flush=True)
        return json.loads((out / f"{name}.json").read_text())
    run_dir = out / "runs" / name
    changes = dict(num_seeds=args.num_seeds, seed=args.seed, num_evals=args.num_evals, eval_envs=args.eval_envs,
                   progress=False, tensorboard=False, checkpoint_every=args.checkpoint_every,
                   out=str(run_dir))
    if args.total_env_steps:
        changes["total_env_steps"] = args.total_env_steps
    config = cell_config(algo, env, args.preset.get(algo), overrides, **changes)
    samplers, note = evaluated_samplers(config, args.samplers)
    if note:
        print(f"[stability] {algo}: {note}", file=sys.stderr, flush=True)
    config = config.replace(eval_samplers=samplers)
    # A used run directory is continued only when asked: starting afresh would append to its metrics
    # log and mix its checkpoints with the new run's.
    if not args.resume and any((run_dir / f).exists() for f in ("metrics.jsonl", "checkpoints")):
        raise UnfinishedRunError(f"{run_dir} already holds a run: pass --resume to continue it from its latest "
                                 "checkpoint, or remove the directory to start over")
    from suite import continue_or_restart  # as the suite resumes its programs

    try:
        config, resumed = continue_or_restart(run_dir, config)
    except ValueError as e:  # the directory was written with other settings
        raise UnfinishedRunError(f"--resume: {e}") from None
    earlier_wall = 0.0
    if resumed is not None:
        earlier_wall = float((resumed.get("clock") or {}).get("walltime", 0.0))
        print(f"[stability] {name}: resuming at {resumed.get('env_steps'):,} env steps", file=sys.stderr, flush=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(config, metrics_fn=lambda first, m: save_chunk_metrics(
        run_dir, first, {k: v for k, v in m.items() if not k.startswith("nonfinite/")}))
    t0 = time.perf_counter()
    summary = trainer.run()
    wall = earlier_wall + time.perf_counter() - t0
    chunks = load_chunk_metrics(run_dir, config.num_chunks * config.iterations_per_chunk)
    lines = (Path(config.out) / "metrics.jsonl").read_text().splitlines()
    rows = [r for r in map(json.loads, lines) if "eval/seed_returns" in r]
    steps = np.array([r["env_steps"] for r in rows])
    low, high = random_return(config), MAX_RETURN.get(env, float("nan"))
    per_sampler = {}
    for i, sampler in enumerate(samplers):
        prefix = "eval/" if i == 0 else f"eval/{sampler}/"
        returns = np.array([r[prefix + "seed_returns"] for r in rows])  # (E, seeds)
        per_sampler[sampler] = {"returns": returns.tolist(),
                                "seeds": seed_statistics(steps, returns, low, high, config.trained_env_steps)}
    metrics = {key: np.concatenate([m[key] for _, m in chunks], axis=1)  # (seeds, iterations)
               for key in chunks[0][1]}
    np.savez_compressed(out / f"{name}.npz", **{k.replace("/", "__"): v for k, v in metrics.items()})
    record = {
        "algo": algo, "env": env, "num_seeds": config.num_seeds, "seed": config.seed, "preset": config.preset,
        "samplers": list(samplers), "env_steps": steps.tolist(), "random_return": low, "max_return": high,
        "trained_env_steps": config.trained_env_steps, "eval_episodes": config.eval_envs,
        "per_sampler": per_sampler, "wall_s": wall, "train_time_s": summary["train_time_s"],
        "resumed_at_env_steps": None if resumed is None else resumed.get("env_steps"),
        "overrides": {k: repr(v) for k, v in overrides.items()},
        # the trust region's bound, for the algorithms whose section holds one (a run config holds only
        # the sections its algorithm reads)
        "kl_bound": config.reppo.kl_bound if "reppo" in ALGORITHM_SECTIONS[config.algo] else None,
    }
    (out / f"{name}.json").write_text(json.dumps(record, indent=1))
    plot_pair(record, metrics, out / f"{name}.png")
    return record


def plot_pair(record: dict, metrics: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in DIAGNOSTICS if k in metrics]
    fig, axes = plt.subplots(1, 1 + len(keys), figsize=(3.2 * (1 + len(keys)), 2.8), squeeze=False)
    axes = axes[0]  # one row; a list even when there is no diagnostic beside the returns
    sampler = record["samplers"][0]
    returns = np.array(record["per_sampler"][sampler]["returns"])
    axes[0].plot(record["env_steps"], returns, lw=1)
    axes[0].set_title(f"{record['algo']} {record['env'].split('/')[-1]}\neval ({sampler})", fontsize=8)
    for ax, key in zip(axes[1:], keys):
        values = metrics[key]
        ax.plot(np.arange(values.shape[1]), values.T, lw=0.6)
        if key in ("dual/alpha", "dual/beta", "am/lambda"):
            ax.set_yscale("log")
        if key in ("actor/kl", "am/kl") and record.get("kl_bound") is not None:
            ax.axhline(record["kl_bound"], color="k", ls="--", lw=0.8)
        ax.set_title(key, fontsize=8)
        ax.set_xlabel("iteration", fontsize=7)
    for ax in axes:
        ax.tick_params(labelsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def median_ci(values) -> str:
    """'median [low, high]': the median over seeds and its 95% percentile-bootstrap interval."""
    from diffrl.maths.stats import bootstrap_ci

    point, low, high = bootstrap_ci(np.asarray(values, np.float64), lambda x: np.median(x, axis=-1))
    return f"{point:.3f} [{low:.3f}, {high:.3f}]"


def summary_row(record: dict, sampler: str, label: str = "") -> str:
    seeds = record["per_sampler"][sampler]["seeds"]
    drops = np.array([s["worst_drop"] for s in seeds])
    return (f"| {record['env'].split('/')[-1]} | {record['algo']}{label} | {sampler} | "
            f"{median_ci([s['best'] for s in seeds])} | {median_ci([s['final'] for s in seeds])} | "
            f"{np.nanmax(drops):.3f} | {int(np.sum(drops > DROP_THRESHOLD))}/{len(seeds)} |")


SUMMARY_HEADER = ("| task | algo | sampler | best: median [95% CI] | final: median [95% CI] | largest worst drop | "
                  "seeds dropping > 0.2 |\n|---|---|---|---|---|---|---|")
SEED_HEADER = "| task | algo | sampler | seed | best | final | worst drop (last third) |\n|---|---|---|---|---|---|---|"
EXPLANATION = ("Normalised return (R - R_random) / (R_max - R_random); worst drop = largest fall below the "
               "seed's best-so-far at an evaluation in the last third of training; medians over seeds with "
               "95% percentile-bootstrap intervals.\n\n")


def seed_rows(record: dict, label: str = "") -> list[str]:
    sampler = record["samplers"][0]
    return [f"| {record['env'].split('/')[-1]} | {record['algo']}{label} | {sampler} | {s['seed']} | "
            f"{s['best']:.3f} | {s['final']:.3f} | {s['worst_drop']:.3f} |"
            for s in record["per_sampler"][sampler]["seeds"]]


def table(records: list[dict]) -> str:
    summary = [SUMMARY_HEADER] + [summary_row(r, sampler) for r in records for sampler in r["per_sampler"]]
    seeds = [SEED_HEADER] + [row for r in records for row in seed_rows(r)]
    return EXPLANATION + "\n".join(summary) + "\n\n" + "\n".join(seeds) + "\n"


def report(labelled: list[str], out: Path) -> str:
    """One table from several result directories: ``LABEL=DIR`` each (e.g. before=..., after=...)."""
    summary, seeds = [SUMMARY_HEADER], [SEED_HEADER]
    for item in labelled:
        label, _, directory = item.partition("=")
        for path in sorted(Path(directory).glob("*.json")):
            record = json.loads(path.read_text())
            summary += [summary_row(record, sampler, f" ({label})") for sampler in record["per_sampler"]]
            seeds += seed_rows(record, f" ({label})")
    text = EXPLANATION + "\n".join(summary) + "\n\n" + "\n".join(seeds) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algos", help="comma-separated algorithm names")
    p.add_argument("--envs", help="comma-separated environment names")
    p.add_argument("--num-seeds", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-evals", type=int, default=12)
    p.add_argument("--eval-envs", type=int, default=32)
    p.add_argument("--total-env-steps", type=int, default=None, help="default: the preset's")
    p.add_argument("--samplers", default=None, help="comma-separated; default: every sampler of the algorithm")
    p.add_argument("--preset", action="append", default=[], help="algo=name (repeatable)")
    p.add_argument("--set", action="append", default=[], help="key=value or algo:key=value (repeatable)")
    p.add_argument("--out", required=True, help="result directory (with --report: the table's path)")
    p.add_argument("--checkpoint-every", type=int, default=1,
                   help="evaluations between checkpoints (default 1; 0: only at the end)")
    p.add_argument("--resume", action="store_true",
                   help="continue unfinished pairs under OUT/runs from their latest checkpoints; "
                        "pairs already recorded in OUT are read back, not retrained")
    p.add_argument("--report", nargs="+", metavar="LABEL=DIR",
                   help="only write one table from earlier result directories, e.g. before=DIR after=DIR")
    args = p.parse_args(argv)
    if args.report:
        print(report(args.report, Path(args.out)))
        return 0
    if not args.algos or not args.envs:
        p.error("--algos and --envs are required (unless --report)")
    args.samplers = tuple(args.samplers.split(",")) if args.samplers else None
    args.preset = dict(item.split("=", 1) for item in args.preset)
    overrides = parse_settings(args.set)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def tabulate(records):
        (out / "table.md").write_text(table(records))
        print(table(records[-1:]), flush=True)

    def announce(cell):
        print(f"== {cell.algo} on {cell.env} ({args.num_seeds} seeds)", flush=True)

    try:
        run_grid(cells(args.algos.split(","), args.envs.split(",")),
                 lambda cell: run_pair(cell.algo, cell.env, args, overrides), announce=announce, after=tabulate)
    except UnfinishedRunError as e:
        print(f"stability.py: {e}", file=sys.stderr)
        return 2
    (out / "command.txt").write_text("python benchmarks/stability.py " + " ".join(sys.argv[1:] if argv is None else argv) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
