"""``diffrl eval | export | plot``: use what a run directory holds.

* ``diffrl eval RUN_DIR [--sampler S ...] [--episodes N] [--checkpoint latest|best] [--video PATH]``
  restores a checkpoint and reports mean, std and length of N parallel episodes per sampler
  (and renders a video headlessly for MuJoCo-based tasks);
* ``diffrl export RUN_DIR --out DIR [--sampler S]`` writes a self-contained policy that
  ``diffrl.load_policy(DIR)`` turns into ``act(obs, key) -> action``;
* ``diffrl plot RUN_DIR [RUN_DIR ...] --out FIG.png [--x env_steps|walltime]`` draws
  learning curves (mean and 95% bootstrap band across seeds and runs) per environment.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import warnings
from pathlib import Path

import jax
import numpy as np



def sampler_list(text: str) -> list[str]:
    """--sampler value: one name or several separated by commas (``diffrl eval`` and ``diffrl actions``)."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected a sampler name")
    return names


class RunDirError(FileNotFoundError):
    """A mistake about a run directory (none there, an exported policy, no usable checkpoint):
    the commands answer it in one line with exit code 2."""


def run_dir_problem(run_dir: str | Path) -> str | None:
    """Why ``run_dir`` is not a run directory, in one line (None: it is one)."""
    path = Path(run_dir)
    if not path.exists():
        return f"{run_dir}: no such directory"
    if not path.is_dir():
        return f"{run_dir} is a file, not a run directory"
    if (path / "config.json").is_file():
        return None
    if (path / "policy.json").is_file():
        return (f"{run_dir} is an exported policy, not a run directory: load it with "
                f"diffrl.load_policy({str(run_dir)!r}), or give the run directory it was exported from")
    return f"{run_dir} is not a diffrl run directory (no config.json)"


def choose_checkpoint(run_dir: str | Path, checkpoint: str, note=None) -> Path:
    """The ``latest`` or ``best`` checkpoint of ``run_dir`` that verifies.

    Skipped corrupt checkpoints are passed to ``note`` (one line each); when none is usable,
    :class:`RunDirError` says why, and names ``--checkpoint latest`` when only the best one is
    unusable."""
    from diffrl.plumbing.checkpoint import CorruptCheckpointWarning, best_checkpoint, latest_valid_checkpoint, step_dirs

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CorruptCheckpointWarning)
        path = best_checkpoint(run_dir) if checkpoint == "best" else latest_valid_checkpoint(run_dir)
    skipped = [str(w.message) for w in caught if issubclass(w.category, CorruptCheckpointWarning)]
    for w in caught:
        if not issubclass(w.category, CorruptCheckpointWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if path is not None:
        for line in skipped:
            (note or warnings.warn)(line)
        return path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptCheckpointWarning)
        latest = latest_valid_checkpoint(run_dir) if checkpoint == "best" else None
    if latest is not None:
        why = skipped[0] if skipped else "the run has no best checkpoint (no finite evaluation return was recorded)"
        raise RunDirError(f"{why}; valid latest checkpoints exist: use --checkpoint latest")
    count = len(step_dirs(Path(run_dir)))
    if count == 0:
        raise RunDirError(f"{run_dir} has no checkpoint (the run stopped before writing its first one)")
    raise RunDirError(f"{run_dir} has no valid checkpoint: all {count} failed verification ({skipped[-1]})")


def load_trained(run_dir: str | Path, checkpoint: str = "latest", note=None, **overrides):
    """(run, restored train state, checkpoint metadata) of a run directory: the
    :class:`~diffrl.core.run.Run` its config builds; every leaf of the state has a seeds axis.

    Raises :class:`RunDirError` with a one-line reason for a directory that is not a run or has
    no usable checkpoint; skipped corrupt checkpoints go to ``note`` (default: a warning)."""
    from diffrl.plumbing.checkpoint import CheckpointError
    from diffrl.core.run import restore_run
    from diffrl.core.run_dir import load_run_config
    from diffrl.artefacts.export import ExportError

    problem = run_dir_problem(run_dir)
    if problem:
        raise RunDirError(problem)
    try:
        config = load_run_config(run_dir)
    except (ExportError, ValueError, KeyError) as e:  # a config.json of another version, or not diffrl's
        raise RunDirError(f"{run_dir}/config.json cannot be read: {str(e).splitlines()[0]}") from None
    config = dataclasses.replace(config, progress=False, **overrides)
    path = choose_checkpoint(run_dir, checkpoint, note)
    try:
        return restore_run(config, path)
    except CheckpointError as e:
        raise RunDirError(str(e).splitlines()[0]) from None


def open_run(prog: str, run_dir: str, checkpoint: str = "latest", **overrides):
    """:func:`load_trained` for a command: skipped checkpoints are noted on stderr in one line
    each; a :class:`RunDirError` is printed as ``prog: reason`` and returned as None."""
    try:
        return load_trained(run_dir, checkpoint,
                            note=lambda line: print(f"{prog}: note: {line}", file=sys.stderr), **overrides)
    except RunDirError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None


def cmd_eval(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="diffrl eval", description="Evaluate a trained run.")
    p.add_argument("run_dir")
    p.add_argument("--sampler", action="append", default=None, type=sampler_list,
                   help="evaluation sampler(s): repeat the flag or separate names with commas (--sampler sde,noise-free); default: every sampler the algorithm offers")
    p.add_argument("--episodes", type=int, default=64, help="parallel episodes per seed")
    p.add_argument("--checkpoint", choices=("latest", "best"), default="latest")
    p.add_argument("--seed", type=int, default=0, help="evaluation key")
    p.add_argument("--video", default=None, help="write a .gif (or .mp4, with ffmpeg) of seed 0 with the first "
                   "sampler; Playground, Brax, dm_control, gymnasium and ManiSkill tasks")
    p.add_argument("--video-steps", type=int, default=500)
    p.add_argument("--json", default=None, help="also write the results as JSON")
    args = p.parse_args(argv)
    if args.episodes < 1:
        p.error("--episodes must be >= 1")
    if args.video:  # before anything is evaluated
        problem = run_dir_problem(args.run_dir)
        if problem is None:
            from diffrl.plumbing.run_record import read_run_record
            from diffrl.artefacts.video import video_problem

            problem = video_problem(((read_run_record(args.run_dir) or {}).get("config") or {}).get("env", ""),
                                    args.video)
        if problem:
            print(f"diffrl eval: {problem}", file=sys.stderr)
            return 2
    loaded = open_run("diffrl eval", args.run_dir, args.checkpoint, eval_envs=args.episodes)
    if loaded is None:
        return 2
    run, state, meta = loaded
    samplers = [name for group in args.sampler for name in group] if args.sampler else list(run.algo.samplers)
    unknown = [s for s in samplers if s not in run.algo.samplers]
    if unknown:
        from diffrl.policies.base import renamed_sampler_note

        print(f"diffrl eval: unknown sampler(s) {unknown}; {run.config.algo} offers "
              f"{', '.join(run.algo.samplers)}" + renamed_sampler_note(unknown, run.algo.policy),
              file=sys.stderr)
        return 2
    keys = jax.random.split(jax.random.PRNGKey(args.seed), run.config.num_seeds)
    results = {"run_dir": str(args.run_dir), "checkpoint_env_steps": meta.get("env_steps"), "samplers": {}}
    print(f"{'sampler':12s} {'return':>10s} {'std':>9s} {'length':>8s}   ({args.episodes} episodes x "
          f"{run.config.num_seeds} seed(s), checkpoint at {meta.get('env_steps'):,} env steps)")
    from diffrl.plumbing.run_record import describe_segments, read_run_record

    record = read_run_record(args.run_dir)
    segments = describe_segments(record)
    if len(segments) > 1:  # settings changed on a resume: say which applied when
        print(f"trained in {len(segments)} segments:\n  " + "\n  ".join(segments))
    results["segments"] = (record or {}).get("segments", [])
    for sampler in samplers:
        out = jax.device_get(run.stepper.evaluate(state.algo, state.obs_stats, state.critic_obs_stats, keys,
                                                  sampler))
        row = {k: float(np.mean(v)) for k, v in out.items()}
        results["samplers"][sampler] = row
        print(f"{sampler:12s} {row['episode_return']:10.2f} {row['episode_return_std']:9.2f} "
              f"{row['episode_length']:8.1f}" + (f"  behaviour entropy {row['behaviour_entropy']:.3f}"
                                                 if "behaviour_entropy" in row else ""))
    run.stepper.close()  # the simulator workers of a host environment
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if args.video:
        _video(run, state, samplers[0], args)
    return 0


def _video(run, state, sampler: str, args) -> None:
    import tempfile

    from diffrl.artefacts.export import export_from_train_state, load_policy
    from diffrl.artefacts.video import render_rollout, write_video

    if sampler not in run.algo.policy.samplers:
        sampler = run.algo.policy.samplers[0]
    with tempfile.TemporaryDirectory() as tmp:
        export_from_train_state(tmp, run.algo, state, run.config, seed=0, sampler=sampler)
        act = load_policy(tmp)
        from diffrl.core.build import env_kwargs

        cfg = run.config
        kwargs = env_kwargs(cfg)
        frames = render_rollout(cfg.env, act, jax.random.PRNGKey(args.seed), args.video_steps,
                                episode_length=cfg.episode_length, **kwargs)
    path = write_video(frames, args.video)
    print(f"video: {len(frames)} frames -> {path}")


def cmd_export(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="diffrl export", description="Export a trained policy: policy.json + npz arrays (diffrl.load_policy), "
        "and with --format onnx / jax every sampler as an ONNX graph / serialized jax.export with the "
        "normaliser inside and the noise as an input (docs/deployment.md).")
    p.add_argument("run_dir")
    p.add_argument("--out", required=True, help="directory to write")
    p.add_argument("--format", choices=("npz", "onnx", "jax", "all"), default="npz",
                   help="npz: the diffrl export only; onnx / jax / all: also policy_<sampler>.onnx and/or "
                        ".jaxexport for --sampler, or for every sampler of the policy when it is not given")
    p.add_argument("--sampler", default=None, help="default sampler stored with the policy (and, with "
                   "--format onnx/jax/all, the only one converted)")
    p.add_argument("--checkpoint", choices=("latest", "best"), default="latest")
    p.add_argument("--seed-index", type=int, default=0, help="which of the run's seeds to export")
    args = p.parse_args(argv)
    from diffrl.artefacts.export import export_from_train_state

    loaded = open_run("diffrl export", args.run_dir, args.checkpoint)
    if loaded is None:
        return 2
    run, state, meta = loaded
    policy = run.algo.policy
    if args.sampler is not None and args.sampler not in policy.samplers and args.sampler != "best-of-k":
        from diffrl.policies.base import renamed_sampler_note

        # best-of-k and other algorithm-level samplers need the critic, which is not exported
        print(f"diffrl export: sampler {args.sampler!r} cannot be exported; {run.config.algo}'s "
              f"policy offers {', '.join(policy.samplers)}" + renamed_sampler_note([args.sampler], policy),
              file=sys.stderr)
        return 2
    num_seeds = jax.tree.leaves(state.obs_stats)[0].shape[0]
    if not 0 <= args.seed_index < num_seeds:
        print(f"diffrl export: --seed-index {args.seed_index} is out of range; the run has {num_seeds} "
              "seed(s)", file=sys.stderr)
        return 2
    from diffrl.artefacts.export import ExportError

    try:
        out = export_from_train_state(args.out, run.algo, state, run.config, seed=args.seed_index,
                                      sampler=args.sampler, extra={**run.action_bounds, "env_steps": meta.get("env_steps")})
    except ExportError as e:
        print(f"diffrl export: {e}", file=sys.stderr)
        return 2
    print(f"exported to {out}; load with diffrl.load_policy({str(out)!r})")
    if args.format != "npz":
        from diffrl.artefacts.deploy import FORMATS, write_deployables

        formats = FORMATS if args.format == "all" else (args.format,)
        samplers = (args.sampler,) if args.sampler else None
        record = write_deployables(out, formats, samplers)
        for sampler, entry in record["artifacts"].items():
            files = ", ".join(entry[f]["file"] for f in formats if f in entry)
            print(f"  {sampler}: {files} (inputs {', '.join(entry['inputs'])}; noise per observation "
                  f"{entry['noise_shape']})")
        print("see deploy.json and docs/deployment.md")
    return 0


def cmd_plot(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="diffrl plot", description="Plot learning curves of runs.")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--out", required=True, help="figure file (png, pdf, svg)")
    p.add_argument("--x", choices=("env_steps", "walltime"), default="env_steps")
    p.add_argument("--y", default="eval/episode_return")
    args = p.parse_args(argv)
    for run_dir in args.run_dirs:
        problem = run_dir_problem(run_dir) or (None if (Path(run_dir) / "metrics.jsonl").is_file()
                                               else f"{run_dir} has no metrics.jsonl (nothing logged yet)")
        if problem:
            print(f"diffrl plot: {problem}", file=sys.stderr)
            return 2
    from diffrl.artefacts.plotting import plot_runs

    print(f"wrote {plot_runs(args.run_dirs, args.out, x=args.x, y=args.y)}")
    return 0
