"""Command line: ``diffrl train | eval | export | plot | actions | bench | envs | presets`` (tyro over the typed config).

``diffrl train --algo ppo --env playground/CartpoleSwingup [--preset NAME] [any field]``:
the algorithm and environment pick a tuned preset (or ``--preset``), and every
other flag overrides it. ``diffrl train --help`` documents every field.
"""
from __future__ import annotations

import argparse
import os
import sys

USAGE = """usage: diffrl COMMAND [ARGS]

commands:
  train     train an agent (diffrl train --help lists every setting; --resume RUN_DIR continues one)
  eval      evaluate a trained run with one or more samplers (and render a video)
  export    write a self-contained policy (diffrl.load_policy(DIR) -> act(obs, key))
  plot      draw learning curves of one or more runs
  actions   plot a trained policy's action distribution at chosen states, per sampler
  bench     measure cost side by side (diffrl bench cost: time and memory of the diffusion actors vs REPPO)
  envs      list every available environment with observation and action sizes
  presets   list the named presets of tuned settings
"""


def _preparse(argv: list[str]) -> tuple[str, str, str | None]:
    from diffrl.config import TrainConfig

    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--algo", default=TrainConfig.algo)
    p.add_argument("--env", default=TrainConfig.env)
    p.add_argument("--preset", default=None)
    known, _ = p.parse_known_args(argv)
    preset = None if known.preset in (None, "None") else known.preset
    return known.algo, known.env, preset


def cmd_train(argv: list[str]) -> int:
    import tyro

    from diffrl.config import ConfigError, TrainConfig
    from diffrl.presets import resolve

    from diffrl.overrides import RENAMED_FIELDS, normalise_name

    for arg in argv:
        name = normalise_name(arg.lstrip("-").split("=", 1)[0]) if arg.startswith("--") else None
        if name in RENAMED_FIELDS:
            print(f"diffrl train: {arg.split('=', 1)[0]} {RENAMED_FIELDS[name]}", file=sys.stderr)
            return 2
    if "--resume" in argv or any(a.startswith("--resume=") for a in argv):
        return _train_resume(argv)
    algo, env, preset = _preparse(argv)
    try:
        defaults = resolve(algo, env, preset)
    except ConfigError as e:
        if "-h" in argv or "--help" in argv:
            defaults = TrainConfig()
        else:
            print(f"diffrl train: {e}", file=sys.stderr)
            return 2
    try:
        config = tyro.cli(TrainConfig, default=defaults, args=argv, prog="diffrl train",
                          description="Train an agent. Flags override the preset chosen by --algo/--env/--preset.")
        if config.preset != defaults.preset:  # --preset on the command line wins over the default
            config = resolve(config.algo, config.env, config.preset)
            config = tyro.cli(TrainConfig, default=config, args=argv, prog="diffrl train")
    except ValueError as e:  # a nested config refused its values while being built
        print(f"diffrl train: invalid configuration: {e}", file=sys.stderr)
        return 2
    return _run_training(config)


def _train_resume(argv: list[str]) -> int:
    """``diffrl train --resume RUN_DIR [--total-env-steps N] [other fields]``."""
    import tyro

    from diffrl.config import TrainConfig
    from diffrl.core.run_dir import resume_config

    from diffrl.export import ExportError

    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--resume", required=True)
    known, rest = p.parse_known_args(argv)
    try:
        defaults = resume_config(known.resume)
    except (FileNotFoundError, ValueError, ExportError) as e:  # ExportError: a config of another version
        print(f"diffrl train: --resume {known.resume}: {e}", file=sys.stderr)
        return 2
    config = tyro.cli(TrainConfig, default=defaults, args=rest, prog="diffrl train --resume RUN_DIR")
    for frozen in ("algo", "env", "num_envs", "num_steps", "num_seeds", "seed"):
        if getattr(config, frozen) != getattr(defaults, frozen):
            print(f"diffrl train: --{frozen.replace('_', '-')} cannot change on resume", file=sys.stderr)
            return 2
    return _run_training(config)


def _run_training(config) -> int:
    from diffrl.config import ConfigError
    from diffrl.core.run_lock import RunDirLocked
    from diffrl.core.trainer import NonFiniteError, Trainer

    try:
        trainer = Trainer(config)
    except (ConfigError, TypeError) as e:
        print(f"diffrl train: {e}", file=sys.stderr)
        return 2
    try:
        trainer.run()
    except NonFiniteError as e:
        print(f"diffrl train: {e}", file=sys.stderr)
        return 3
    except (FileNotFoundError, ValueError, RunDirLocked) as e:
        print(f"diffrl train: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_envs(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="diffrl envs", description="List environments with their sizes.")
    p.add_argument("--names-only", action="store_true", help="print names without loading simulators")
    p.add_argument("--suite", default=None, help="only this suite (playground, brax, gymnax, toy, dmc, gym)")
    args = p.parse_args(argv)
    from diffrl.envs import registry

    names = [n for n in registry.list_envs() if args.suite is None or n.startswith(args.suite + "/")]
    if args.names_only:
        print("\n".join(names))
        return 0
    print(f"{'name':45s} {'obs':>6s} {'critic':>7s} {'act':>5s} {'ep_len':>7s}")
    for name in names:
        try:
            spec = registry.describe(name)
        except Exception as e:  # a task that cannot load here says why, the rest still list
            print(f"{name:45s} unavailable: {str(e).splitlines()[0][:80]}")
            continue
        print(f"{name:45s} {spec.obs_size:6d} {spec.critic_size:7d} {spec.action_size:5d} {spec.episode_length:7d}")
    return 0


def cmd_presets(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="diffrl presets", description="The named presets of tuned settings.")
    p.add_argument("--show", metavar="NAME", default=None,
                   help="print every setting of the config that preset NAME resolves to (defaults included), "
                        "marking the ones the preset sets")
    p.add_argument("--env", default=None, help="with --show: the environment to resolve it for (default: the "
                   "config's default environment)")
    args = p.parse_args(argv)
    from diffrl.presets import PRESETS

    if args.show is None:
        for name, overrides in PRESETS.items():
            items = ", ".join(f"{k}={v}" for k, v in overrides.items())
            print(f"{name}:\n    {items}")
        return 0
    import dataclasses

    from diffrl.config import ConfigError, TrainConfig
    from diffrl.presets import apply_preset

    try:
        settings = PRESETS.get(args.show, {})
        base = TrainConfig(algo=settings.get("algo", TrainConfig.algo),
                           **({"env": args.env} if args.env else {}))
        config = apply_preset(base, args.show)
    except ConfigError as e:
        print(f"diffrl presets: {e}", file=sys.stderr)
        return 2
    set_here = set(settings)

    def walk(obj, prefix=""):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                yield from walk(value, f"{prefix}{f.name}.")
            else:
                yield f"{prefix}{f.name}", value

    print(f"{args.show} (resolved; * = set by the preset, the rest are defaults):")
    for name, value in walk(config):
        print(f"  {'*' if name in set_here else ' '} {name} = {value!r}")
    return 0


BENCH_USAGE = """usage: diffrl bench SUBCOMMAND [ARGS]

subcommands:
  cost      per-iteration and update wall-clock and peak memory of trudi, amdp and amdp-backprop at
            each number of diffusion steps, as ratios to reppo (diffrl bench cost --help)
"""


def cmd_bench(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(BENCH_USAGE)
        return 0
    if argv[0] != "cost":
        print(f"diffrl bench: unknown subcommand {argv[0]!r}", file=sys.stderr)
        print(BENCH_USAGE, file=sys.stderr)
        return 2
    from diffrl.bench_cost import main as bench_cost

    return bench_cost(argv[1:])


def _lazy(name: str, module: str = "diffrl.commands"):
    """A command that imports its (heavy) module only when run."""
    def run(argv: list[str]) -> int:
        import importlib

        return getattr(importlib.import_module(module), name)(argv)

    return run


COMMANDS = {"train": cmd_train, "eval": _lazy("cmd_eval"), "export": _lazy("cmd_export"),
            "plot": _lazy("cmd_plot"), "actions": _lazy("cmd_actions", "diffrl.action_plot"), "bench": cmd_bench, "envs": cmd_envs,
            "presets": cmd_presets}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    if argv and argv[0] == "eval" and "--video" in argv:
        import diffrl.video  # noqa: F401  (must pick the GL backend before mujoco is imported)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        import difflib

        near = difflib.get_close_matches(command, list(COMMANDS), n=1)
        print(f"diffrl: unknown command {command!r}" + (f"; did you mean {near[0]!r}?" if near else ""),
              file=sys.stderr)
        print(USAGE, file=sys.stderr)
        return 2
    return COMMANDS[command](rest)


if __name__ == "__main__":
    sys.exit(main())
