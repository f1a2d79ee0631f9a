"""Multimodality grid: behaviour entropy, modes reached and return per algorithm, sampler and task.

Usage (the command behind ``benchmarks/results/multimodality/<name>/``; its exact command line is
saved in ``command.txt`` there):

    python benchmarks/multimodality.py --algos ppo,reppo,trudi,amdp \
        --envs toy/MirrorGoals,toy/OctahedronGoals,toy/CornerBandit --num-seeds 5 --episodes 256 \
        --out benchmarks/results/multimodality/grid

Each (env, algo) pair trains ``--num-seeds`` seeds in ONE vmapped program with the pair's default
preset (``--preset algo=name``; ``--set key=value``, ``--set algo:key=value`` or
``--set env@key=value`` override a field; ``--total-env-steps env=N`` or a bare ``N`` the budget).
After training, every evaluation sampler of the algorithm (``--samplers`` to restrict) runs
``--episodes`` fresh episodes per seed, and per seed we record (core/evaluate.py):

* ``behaviour_entropy``: normalised entropy of the histogram of the optima the episodes reached
  (0 = all one optimum, 1 = all optima equally often); undefined (NaN, left out of the median)
  for a seed none of whose episodes reached an optimum;
* ``mode_reached``: the fraction of episodes that reached an optimum;
* ``return``: the mean episode return, also as a fraction of the task's optimum (``optimum``:
  the bandits' peak reward; for the point-mass tasks the return of an open-loop action
  sequence optimised by gradient ascent through the dynamics, from a goal-seeking controller's).

Written under ``OUT/``: ``<env>--<algo>.json`` (per-seed values per sampler, the learning curve
of the logged samplers, the config, wall-clock) and ``table.md`` (median [95% percentile
bootstrap interval] over seeds, diffrl.maths.stats). The run directories go to ``--runs-dir``
(default ``runs/multimodality/<OUT name>``, not committed).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grid import Cell, cell_config, cells, evaluated_samplers, parse_settings, run_grid  # noqa: E402
from stability import random_return  # noqa: E402

from diffrl.core.evaluate import entropy_where_reached  # noqa: E402

METRICS = ("behaviour_entropy", "mode_reached", "episode_return")


def optimal_return(env_name: str) -> float:
    """The task's best return: the peak reward of a bandit, or for a point-mass task the return
    of an open-loop action sequence to goal 0 optimised by Adam (all goals are equally good)."""
    import jax
    import jax.numpy as jnp
    import optax

    from diffrl.envs import make

    env = make(env_name)
    if env.spec.episode_length == 1:
        c = env.config.peak
        return float(env.reward(jnp.full((1, env.spec.action_size), c, jnp.float32))[0])
    goal = env.goals[0]
    length = env.spec.episode_length

    def rollout(actions):
        def body(state, a):
            state = env.step(state, a)
            return state, state.reward
        return jax.lax.scan(body, env.reset(jax.random.PRNGKey(0)), actions)[1]

    def controller(state, _):  # goal-seeking PD controller: the starting point of the search
        p, v = state.obs[: env.dim], state.obs[env.dim:]
        a = jnp.clip(8.0 * (goal - p) - 4.0 * v, -1.0, 1.0)
        return env.step(state, a), a

    _, init = jax.lax.scan(controller, env.reset(jax.random.PRNGKey(0)), None, length=length)
    z = jnp.arctanh(jnp.clip(init, -0.999, 0.999))
    opt = optax.adam(0.02)

    @jax.jit
    def step(z, s):
        loss, g = jax.value_and_grad(lambda z: -jnp.sum(rollout(jnp.tanh(z))))(z)
        u, s = opt.update(g, s)
        return optax.apply_updates(z, u), s, -loss

    s, best = opt.init(z), float(jnp.sum(rollout(init)))
    for _ in range(3000):
        z, s, value = step(z, s)
        best = max(best, float(value))
    return best


def seed_values(out: dict) -> dict:
    """Per-seed metrics of a vmapped evaluation; entropy NaN where no episode reached an optimum."""
    values = {k: np.asarray(out[k], np.float64) for k in METRICS}
    values["behaviour_entropy"] = entropy_where_reached(values["behaviour_entropy"], values["mode_reached"])
    return {k: v.tolist() for k, v in values.items()}


def median_ci(values, seed: int = 0) -> tuple[float, float, float, int]:
    """(median, 95% low, 95% high, n) over the finite values (percentile bootstrap of the median)."""
    from diffrl.maths.stats import bootstrap_ci

    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], np.float64)
    if len(x) == 0:
        return float("nan"), float("nan"), float("nan"), 0
    point, lo, hi = bootstrap_ci(x, statistic=lambda a: np.median(a, axis=-1), seed=seed)
    return point, lo, hi, len(x)


def run_pair(algo: str, env: str, args, overrides: dict) -> dict:
    import jax

    from diffrl.core.run import build_run
    from diffrl.core.trainer import Trainer

    name = Cell(algo, env).name
    changes = dict(num_seeds=args.num_seeds, seed=args.seed, num_evals=args.num_evals, progress=False,
                   tensorboard=False, checkpoint_every=0, out=str(Path(args.runs_dir) / name))
    steps = args.total_env_steps.get(env, args.total_env_steps.get(""))
    if steps:
        changes["total_env_steps"] = steps
    config = cell_config(algo, env, args.preset.get(algo), overrides, **changes)
    samplers, _ = evaluated_samplers(config, args.samplers)
    config = config.replace(eval_samplers=samplers)
    trainer = Trainer(config)
    t0 = time.perf_counter()
    summary = trainer.run()
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in (Path(config.out) / "metrics.jsonl").read_text().splitlines()]
    curve = {"env_steps": [r["env_steps"] for r in rows]}
    for i, sampler in enumerate(samplers):
        prefix = "eval/" if i == 0 else f"eval/{sampler}/"
        curve[sampler] = {k: [r.get(prefix + k) for r in rows] for k in ("episode_return", "behaviour_entropy",
                                                                         "mode_reached")}
    # The final evaluation: the trained run's, with --episodes episodes per seed.
    evaluate = build_run(config.replace(eval_envs=args.episodes)).stepper.evaluate
    state = trainer.state
    keys = jax.random.split(jax.random.PRNGKey(args.seed + 1_000_003), config.num_seeds)
    final = {s: seed_values(evaluate(state.algo, state.obs_stats, state.critic_obs_stats, keys, s))
             for s in samplers}
    record = {
        "algo": algo, "env": env, "preset": config.preset, "num_seeds": config.num_seeds, "seed": config.seed,
        "trained_env_steps": config.trained_env_steps, "episodes_per_seed": args.episodes,
        "samplers": list(samplers), "final": final, "curve": curve,
        "optimum": args.optimum[env], "random_return": args.random[env],
        "train_time_s": summary["train_time_s"], "wall_s": wall,
        "overrides": {k: repr(v) for k, v in overrides.items()},
        "config": json.loads(json.dumps(dataclasses.asdict(config), default=str)),
    }
    (Path(args.out) / f"{name}.json").write_text(json.dumps(record, indent=1))
    return record


def _fmt(stat: tuple[float, float, float, int], total: int, digits: int = 2) -> str:
    point, lo, hi, n = stat
    if n == 0:
        return "n/a"
    text = f"{point:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
    return text if n == total else f"{text} ({n}/{total} seeds)"


def table(records: list[dict]) -> str:
    lines = [
        "Median [95% bootstrap interval] over seeds of per-seed values on fresh evaluation episodes.",
        "behaviour entropy: normalised entropy of the reached optima (0 = one optimum, 1 = all equally "
        "often), over the seeds with at least one episode that reached an optimum; mode reached: fraction "
        "of episodes that reached an optimum; return / optimum: the mean return over the task's optimum.",
        "",
        "| task (modes) | algo | sampler | env steps | seeds x episodes | behaviour entropy | mode reached | "
        "return | return / optimum |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        from diffrl.envs import describe

        modes = describe(r["env"]).modes
        for sampler in r["samplers"]:
            f = r["final"][sampler]
            n = r["num_seeds"]
            ratio = [x / r["optimum"] for x in f["episode_return"]]
            lines.append(
                f"| {r['env']} ({modes}) | {r['algo']} | {sampler} | {r['trained_env_steps']:,} | "
                f"{n} x {r['episodes_per_seed']} | {_fmt(median_ci(f['behaviour_entropy']), n)} | "
                f"{_fmt(median_ci(f['mode_reached']), n)} | {_fmt(median_ci(f['episode_return']), n)} | "
                f"{_fmt(median_ci(ratio), n)} |")
    lines.append("")
    lines.append("| task | optimum return | uniform random actions |")
    lines.append("|---|---|---|")
    seen = set()
    for r in records:
        if r["env"] not in seen:
            seen.add(r["env"])
            lines.append(f"| {r['env']} | {r['optimum']:.2f} | {r['random_return']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algos", required=True, help="comma-separated algorithm names")
    p.add_argument("--envs", required=True, help="comma-separated environment names")
    p.add_argument("--num-seeds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-evals", type=int, default=5)
    p.add_argument("--episodes", type=int, default=256, help="final evaluation episodes per seed and sampler")
    p.add_argument("--total-env-steps", action="append", default=[],
                   help="N (every env) or env=N (repeatable); default: the preset's")
    p.add_argument("--samplers", default=None, help="comma-separated; default: every sampler of the algorithm")
    p.add_argument("--preset", action="append", default=[], help="algo=name (repeatable)")
    p.add_argument("--set", action="append", default=[],
                   help="key=value, algo:key=value or env@key=value (repeatable)")
    p.add_argument("--out", required=True)
    p.add_argument("--resume", action="store_true", help="keep the pairs whose JSON record exists in OUT")
    p.add_argument("--runs-dir", default=None, help="default: runs/multimodality/<name of OUT>")
    args = p.parse_args(argv)
    args.samplers = tuple(args.samplers.split(",")) if args.samplers else None
    args.preset = dict(item.split("=", 1) for item in args.preset)
    args.total_env_steps = {k: int(v) for k, _, v in (
        (item.rpartition("=")[0], None, item.rpartition("=")[2]) for item in args.total_env_steps)}
    overrides = parse_settings(args.set)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.runs_dir = args.runs_dir or str(Path("runs") / "multimodality" / out.name)
    envs, algos = args.envs.split(","), args.algos.split(",")
    from diffrl.config.presets import resolve

    args.optimum = {env: optimal_return(env) for env in envs}
    args.random = {env: random_return(resolve("ppo", env, None), episodes=1024) for env in envs}
    (out / "command.txt").write_text(
        "python benchmarks/multimodality.py " + " ".join(sys.argv[1:] if argv is None else argv) + "\n")

    def recorded(cell):
        path = out / f"{cell.name}.json"
        return json.loads(path.read_text()) if args.resume and path.exists() else None

    def tabulate(records):
        (out / "table.md").write_text(table(records))
        print(table(records[-1:]), flush=True)

    def announce(cell):
        print(f"== {cell.algo} on {cell.env} ({args.num_seeds} seeds)", flush=True)

    records = run_grid(cells(algos, envs), lambda cell: run_pair(cell.algo, cell.env, args, overrides),
                       recorded=recorded, announce=announce, after=tabulate)
    (out / "table.md").write_text(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
