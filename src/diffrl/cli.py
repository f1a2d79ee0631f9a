"""Command line: ``diffrl train | eval | export | plot | actions | bench | envs | presets`` (tyro over the typed config).

``diffrl train --algo ppo --env playground/CartpoleSwingup [--preset NAME] [any field]``:
the algorithm and environment pick a tuned preset (or ``--preset``), and every
other flag overrides it. ``diffrl train --help`` documents every field.
"""
from __future__ import annotations

import argparse
import importlib.util
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

Compiled programs are cached under ~/.cache/diffrl/jax (DIFFRL_COMPILE_CACHE=DIR moves it,
DIFFRL_COMPILE_CACHE=0 or --no-compile-cache after the command turns it off).
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


def _typed_fields(argv: list[str]) -> dict[str, str]:
    """{dotted field name: flag as typed} of every ``--section.field`` flag on the command line
    (``--section.no-field``, tyro's negated boolean, names ``section.field``)."""
    from diffrl.config.overrides import normalise_name

    typed = {}
    for arg in argv:
        if not arg.startswith("--") or "." not in arg.split("=", 1)[0]:
            continue
        flag = arg.split("=", 1)[0]
        section, _, name = normalise_name(flag[2:]).partition(".")
        typed[f"{section}.{name[3:] if name.startswith('no_') else name}"] = flag
    return typed


def unread_flag_errors(argv: list[str], algo: str) -> list[str]:
    """Errors for every typed flag that ``algo`` does not read, whatever its value.

    The configuration can only compare values with defaults, so ``--diffusion.num-steps 8``
    for PPO (8 being the default) would pass it silently; what was typed is the evidence that
    the user expects the flag to do something."""
    from diffrl.algos.registry import ALGORITHM_SECTIONS, CONFIG_SECTIONS, UNUSED_SETTINGS

    reads = ALGORITHM_SECTIONS.get(algo)
    if reads is None:
        return []
    errors = []
    for dotted, flag in _typed_fields(argv).items():
        section = dotted.split(".")[0]
        if section in CONFIG_SECTIONS and section not in reads:
            errors.append(f"{flag} has no effect with --algo {algo}: {algo} does not read the {section} section "
                          f"(it reads {', '.join(f'--{s}.*' for s in reads)})")
        elif dotted in UNUSED_SETTINGS.get(algo, {}):
            errors.append(f"{flag} has no effect with --algo {algo}: {UNUSED_SETTINGS[algo][dotted]}")
    return errors


def _template(argv: list[str]):
    """A config with every section ``--algo`` may name (its own sections included), to read field
    types: a flag of a section the algorithm does not read is spelled as tyro parses it too, and then
    refused with its reason rather than as unknown."""
    from diffrl.config import ConfigError, TrainConfig, full_config_type

    try:
        return full_config_type(_preparse(argv)[0])()
    except (ConfigError, KeyError, ImportError):
        return TrainConfig()


def integer_literals(argv: list[str]) -> list[str]:
    """``argv`` with a whole-number float literal (``1e5``, ``2.5e6``, ``100000.0``) given to an
    integer field rewritten as an integer: budgets are naturally written in scientific notation,
    and tyro's int parser refuses it. Values that are not whole numbers are left for the parser
    to refuse."""
    from diffrl.config import ConfigError
    from diffrl.config.overrides import field_type

    out, template = list(argv), _template(argv)
    for i, arg in enumerate(out):
        if not arg.startswith("--"):
            continue
        flag, eq, value = arg.partition("=")
        if not eq:
            if i + 1 >= len(out):
                continue
            value = out[i + 1]
        try:
            kind = str(field_type(template, flag[2:]))
            number = float(value)
        except (ConfigError, ValueError):
            continue
        if "int" not in kind or "float" in kind or not number.is_integer() or value.lstrip("-").isdigit():
            continue
        if eq:
            out[i] = f"{flag}={int(number)}"
        else:
            out[i + 1] = str(int(number))
    return out


_TRUE_WORDS, _FALSE_WORDS = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def flag_values(argv: list[str]) -> list[str]:
    """``argv`` with values written as people write them turned into what tyro parses:
    ``--normalize-obs false`` -> ``--no-normalize-obs`` (and ``true`` -> the bare flag) for a
    boolean field, ``--adjoint.hidden 512,512`` -> ``--adjoint.hidden 512 512`` for a tuple
    field, and whole-number float literals for integer fields (:func:`integer_literals`)."""
    from diffrl.config import ConfigError
    from diffrl.config.overrides import field_type

    template, out, i = _template(argv), [], 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, value = arg.partition("=")
        has_next = not eq and i + 1 < len(argv) and not argv[i + 1].startswith("--")
        value = value if eq else (argv[i + 1] if has_next else None)
        try:
            kind = field_type(template, flag[2:]) if arg.startswith("--") and value is not None else None
        except ConfigError:
            kind = None
        step = 1 if eq else 2
        if kind is bool and value.lower() in _TRUE_WORDS + _FALSE_WORDS:
            head, _, name = flag[2:].rpartition(".")
            negated = f"--{head + '.' if head else ''}no-{name}"
            out.append(flag if value.lower() in _TRUE_WORDS else negated)
            i += step
            continue
        if str(kind).startswith("tuple") and "," in value:
            out.extend([flag, *[v for v in value.split(",") if v]])
            i += step
            continue
        out.append(arg)
        i += 1
    return integer_literals(out)


def _unknown_algo(algo: str) -> str | None:
    """The one-line answer to an unknown --algo (a typo is named before any other check)."""
    from diffrl.algos.registry import UnknownAlgorithm, get

    try:
        get(algo)
    except UnknownAlgorithm as e:  # names the near names, or why a module:attribute spec names nothing
        return str(e)
    return None


def moved_flags(argv: list[str], algo: str, command: str = "diffrl train") -> list[str]:
    """``argv`` with every flag of a moved setting (:data:`diffrl.config.MOVED_FIELDS`) spelled as its new
    flag for ``--algo algo`` (``--diffusion.trust-region`` -> ``--reppo.trust-region``, also in the
    ``--flag=value`` form), each announced by a note on stderr. Runs before tyro parses, which knows
    only the new flags."""
    from diffrl.config import MOVED_FIELDS, moved_field
    from diffrl.config.overrides import normalise_name

    out = []
    for arg in argv:
        flag, sep, value = arg.partition("=")
        name = normalise_name(flag[2:]) if flag.startswith("--") else None
        if name in MOVED_FIELDS:
            new = "--" + moved_field(name, algo).replace("_", "-")
            print(f"{command}: note: {flag} is now {new}", file=sys.stderr)
            arg = new + sep + value
        out.append(arg)
    return out


def cmd_train(argv: list[str]) -> int:
    from diffrl.config import ConfigError, TrainConfig
    from diffrl.config.presets import resolve

    from diffrl.config.overrides import RENAMED_FIELDS, normalise_name

    for arg in argv:
        name = normalise_name(arg.lstrip("-").split("=", 1)[0]) if arg.startswith("--") else None
        if name in RENAMED_FIELDS:
            print(f"diffrl train: {arg.split('=', 1)[0]} {RENAMED_FIELDS[name]}", file=sys.stderr)
            return 2
    resuming = "--resume" in argv or any(a.startswith("--resume=") for a in argv)
    if not resuming:  # a resumed run's algorithm is the stored one (_train_resume rewrites for it)
        argv = moved_flags(argv, _preparse(argv)[0])
    argv = flag_values(argv)
    move_aside = "--move-aside" in argv
    argv = [a for a in argv if a != "--move-aside"]
    if "--resume" in argv or any(a.startswith("--resume=") for a in argv):
        if move_aside:
            print("diffrl train: --move-aside starts a new run; it cannot go with --resume", file=sys.stderr)
            return 2
        return _train_resume(argv)
    algo, env, preset = _preparse(argv)
    problem = None if "-h" in argv or "--help" in argv else _unknown_algo(algo)
    problem = problem or next(iter(unread_flag_errors(argv, algo)), None)
    if problem:
        print(f"diffrl train: {problem}", file=sys.stderr)
        return 2
    try:
        defaults = resolve(algo, env, preset)
    except ConfigError as e:
        if "-h" in argv or "--help" in argv:
            defaults = TrainConfig()
        else:
            print(f"diffrl train: {e}", file=sys.stderr)
            return 2
    try:
        config = _parse_config(defaults, argv, prog="diffrl train",
                          description="Train an agent. Flags override the preset chosen by --algo/--env/--preset. "
                          "An --out that already holds a run is refused; --move-aside renames that run to "
                          "OUT.old-N first (it is never deleted). Exit status: 0 done, 2 refused, 3 NaN/inf, 4 a write failed, "
                          "130 SIGINT, 143 SIGTERM. What each algorithm's default preset gives on the 23 DM Control "
                          "tasks, untuned, with commands and wall-clock: " + EXPECTED_RESULTS + ".")
        if config.preset != defaults.preset:  # --preset on the command line wins over the default
            config = resolve(config.algo, config.env, config.preset)
            config = _parse_config(config, argv, prog="diffrl train")
    except ValueError as e:  # a nested config refused its values while being built
        print(f"diffrl train: invalid configuration: {e}", file=sys.stderr)
        return 2
    return _run_training(config, move_aside=move_aside)


_PARSE_TYPES: dict[tuple, tuple] = {}


def _parse_type(cls: type, algo: str) -> tuple[type, dict[str, tuple[type, type]]]:
    """``cls`` (``algo``'s run config class) as tyro is to read it: each section holding settings
    that ``algo`` ignores (its record's ``unused_settings``, e.g. ``reppo.kl_multiplier`` for TruDi) is
    replaced by a subclass in which those fields are ``tyro.conf.Suppress``-ed, so ``--help`` lists
    only what the algorithm reads. Returns the class and {section: (subclass, section class)}; empty
    when nothing is hidden. Parsing only: a parsed config is turned back into ``cls`` at once
    (:func:`_swap_sections`), so no other code sees these classes. A typed flag of a hidden field
    is refused with its reason before parsing (:func:`unread_flag_errors`)."""
    import dataclasses
    import typing
    from typing import Annotated

    import tyro

    from diffrl.algos.registry import find

    spec = find(algo)
    hidden: dict[str, set[str]] = {}
    for dotted in spec.unused_settings if spec is not None else ():
        section, _, name = dotted.partition(".")
        hidden.setdefault(section, set()).add(name)
    sections = {f.name: f for f in dataclasses.fields(cls) if f.name in hidden}
    key = (cls, tuple(sorted((s, tuple(sorted(n))) for s, n in hidden.items())))
    if key in _PARSE_TYPES:
        return _PARSE_TYPES[key]
    swapped = {}
    for section, outer in sections.items():
        base = type(outer.default_factory())
        hints = typing.get_type_hints(base)
        fields = [(f.name, Annotated[hints[f.name], tyro.conf.Suppress],
                   dataclasses.field(default=f.default) if f.default is not dataclasses.MISSING
                   else dataclasses.field(default_factory=f.default_factory))
                  for f in dataclasses.fields(base) if f.name in hidden[section]]
        sub = dataclasses.make_dataclass(base.__name__, fields, bases=(base,), frozen=True)
        sub.__doc__ = base.__doc__
        swapped[section] = (sub, base)
    parse_cls = cls
    if swapped:
        parse_cls = dataclasses.make_dataclass(
            cls.__name__, [(s, sub, dataclasses.field(default_factory=sub)) for s, (sub, _) in swapped.items()],
            bases=(cls,), frozen=True)
        parse_cls.__doc__ = cls.__doc__
    _PARSE_TYPES[key] = (parse_cls, swapped)
    return _PARSE_TYPES[key]


def _swap_sections(config, to_cls: type, swapped: dict[str, tuple[type, type]], parsing: bool):
    """``config`` as ``to_cls``, its swapped sections as the parsing subclass (``parsing``) or as
    their own class again: the same values either way."""
    import dataclasses

    def shallow(obj) -> dict:
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}

    values = shallow(config)
    for section, (sub, base) in swapped.items():
        values[section] = (sub if parsing else base)(**shallow(values[section]))
    return to_cls(**values)


def _parse_config(defaults, argv: list[str], hide_unread: bool | None = None, **tyro_args):
    """``argv`` parsed over ``defaults`` as the flags of ``defaults.algo`` (its run config class, which
    holds only the sections it reads: diffrl.config.config_type), returned as a run config of the
    algorithm parsed.

    ``hide_unread``: whether the sections the algorithm does not read, and the settings it ignores in
    those it does (:func:`_parse_type`), are left out; by default they
    are, except for ``--help`` without ``--algo`` (the whole reference, docs/cli.md). When they are
    parsed, what was typed for them is dropped here: the caller refuses such flags by what was typed
    (:func:`unread_flag_errors`)."""
    import tyro

    from diffrl.config import as_full_config, as_run_config

    if hide_unread is None:
        typed_algo = any(a == "--algo" or a.startswith("--algo=") for a in argv)
        hide_unread = typed_algo or not ({"-h", "--help"} & set(argv))
    default = as_run_config(defaults) if hide_unread else as_full_config(defaults)
    if not hide_unread:
        return as_run_config(tyro.cli(type(default), default=default, args=argv, **tyro_args), drop_unread=True)
    parse_cls, swapped = _parse_type(type(default), default.algo)
    parsed = tyro.cli(parse_cls, default=_swap_sections(default, parse_cls, swapped, parsing=True), args=argv,
                      **tyro_args)
    return as_run_config(_swap_sections(parsed, type(default), swapped, parsing=False), drop_unread=True)


def _train_resume(argv: list[str]) -> int:
    """``diffrl train --resume RUN_DIR [--total-env-steps N] [other fields]``."""
    from diffrl.core.run_dir import resume_config

    from diffrl.artefacts.export import ExportError

    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--resume", required=True)
    known, rest = p.parse_known_args(argv)
    try:
        defaults = resume_config(known.resume)
    except (FileNotFoundError, ValueError, ExportError) as e:  # ExportError: a config of another version
        print(f"diffrl train: --resume {known.resume}: {e}", file=sys.stderr)
        return 2
    rest = moved_flags(rest, defaults.algo)
    # the run's algorithm's flags on --help; otherwise every flag parses, so that one the run's algorithm
    # does not read, or a changed --algo, is refused below with its reason rather than as unknown
    config = _parse_config(defaults, rest, hide_unread=bool({"-h", "--help"} & set(rest)),
                           prog="diffrl train --resume RUN_DIR")
    problem = _resume_problem(known.resume, config, defaults, rest)
    if problem:
        print(f"diffrl train: {problem}", file=sys.stderr)
        return 2
    from diffrl.core.trainer import resume_progress

    progress = resume_progress(config)
    if progress is not None and progress[0] >= progress[1]:
        done, wanted = progress
        if done > wanted:
            print(f"diffrl train: --resume {known.resume}: the run has trained {done:,} env steps, more than the "
                  f"{wanted:,} asked for; a run cannot be shortened", file=sys.stderr)
            return 2
        print(f"diffrl train: {known.resume} is complete ({done:,} of {wanted:,} env steps); nothing to do, "
              f"nothing changed. Extend it with --total-env-steps larger than {done:,}", file=sys.stderr)
        return 0
    return _run_training(config)


RESUME_FROZEN = ("algo", "env", "num_envs", "num_steps", "num_seeds", "seed", "chunk_iterations", "num_evals")
"""Settings a resume cannot change: they decide the train state's arrays, its random streams
or the chunk the checkpoint was written after, so the continued run could not be the same run."""


def _resume_problem(run_dir: str, config, stored, rest: list[str]) -> str | None:
    """Why ``diffrl train --resume RUN_DIR [flags]`` cannot continue the run, or None."""
    from pathlib import Path

    if config.out is not None and Path(config.out).resolve() != Path(run_dir).resolve():
        return (f"--out {config.out} with --resume {run_dir}: a resumed run is written in its own directory; "
                f"drop --out (or copy the run directory first and resume the copy)")
    for frozen in RESUME_FROZEN:
        if getattr(config, frozen) != getattr(stored, frozen):
            return f"--{frozen.replace('_', '-')} cannot change on resume (the run has {getattr(stored, frozen)!r})"
    return next(iter(unread_flag_errors(rest, config.algo)), None)


def _budget_notes(config) -> list[str]:
    """One line for each part of the budget that is rounded: the env steps trained are whole
    chunks of whole iterations, the evaluations one per chunk."""
    notes = []
    iteration = config.batch_size
    trained = config.trained_env_steps
    if trained != config.total_env_steps:
        notes.append(f"--total-env-steps {config.total_env_steps:,} is rounded down to {trained:,}: "
                     f"{config.num_chunks} chunk(s) of {config.iterations_per_chunk} iteration(s) of {iteration:,} "
                     f"env steps (num_envs x num_steps)")
    if config.num_chunks != config.num_evals and not config.resume:
        notes.append(f"--num-evals {config.num_evals} cannot be honoured with {config.num_iterations} iteration(s): "
                     f"evaluating {config.num_chunks} time(s), every {config.iterations_per_chunk} iteration(s)")
    return notes


def _run_training(config, move_aside: bool = False) -> int:
    from diffrl.config import ConfigError
    from diffrl.core.run_dir import RunDirInUse, refuse_existing_run
    from diffrl.core.run_lock import RunDirLocked
    from diffrl.core.signals import exit_status
    from diffrl.core.trainer import NonFiniteError, Trainer

    try:
        if config.out and not config.resume:  # before anything is built or compiled
            if move_aside:
                _move_aside(config.out)
            refuse_existing_run(config.out)
        trainer = Trainer(config)
    except (ConfigError, TypeError, RunDirInUse, OSError) as e:
        print(f"diffrl train: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("diffrl train: interrupted before training started; nothing was written", file=sys.stderr)
        return exit_status(2)
    problem = _unwritable(trainer.run_dir)
    if problem:
        print(f"diffrl train: {problem}", file=sys.stderr)
        return 2
    for note in _budget_notes(config):
        print(f"diffrl train: note: {note}", file=sys.stderr)
    try:
        summary = trainer.run()
    except NonFiniteError as e:
        print(f"diffrl train: {e}", file=sys.stderr)
        return 3
    except (FileNotFoundError, ValueError, RunDirLocked) as e:
        print(f"diffrl train: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the signal handlers were installed (taking the lock)
        print("diffrl train: interrupted before training started", file=sys.stderr)
        return exit_status(2)
    except OSError as e:  # a full disk, a file system turned read-only, permissions changed mid-run
        line = write_failure(e, trainer.run_dir)
        _settle_checkpoint_writers()
        _say_last(f"diffrl train: {line}")
        return WRITE_FAILED
    if summary.get("interrupted") and trainer.stop_signal is not None:
        return exit_status(trainer.stop_signal)
    return 0


WRITE_FAILED = 4
"""Exit status of a run stopped because a file of its run directory could not be written."""


def _unwritable(run_dir) -> str | None:
    """Why no run can be written in ``run_dir`` (one line), or None: checked before compiling."""
    import tempfile
    from pathlib import Path

    try:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=run_dir, prefix=".diffrl-write-test-"):
            pass
    except OSError as e:
        return f"cannot write the run directory {run_dir}: {e.strerror or e}"
    return None


def _settle_checkpoint_writers(timeout_s: float = 10.0) -> None:
    """Let orbax's writer threads of a failed checkpoint finish before the run's one-line verdict.

    When the disk fills up, the save that raised is one of several concurrent writes; the others
    fail moments later in orbax's threads, and their logs, and the tasks asyncio reports as never
    retrieved when they are collected, would otherwise print after the verdict, which a user (and
    a script reading the last line) expects last. Their errors are the same failure, already named."""
    import gc
    import logging
    import threading
    import time

    deadline = time.monotonic() + timeout_s
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and type(thread).__module__.startswith("orbax"):
            try:  # orbax's threads re-raise their own failure from join(): the same one, already named
                thread.join(max(0.0, deadline - time.monotonic()))
            except Exception:
                pass
    gc.collect()  # failed tasks are reported when collected: now, not after the verdict
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # those still alive, reported at exit


def write_failure(error: OSError, run_dir) -> str:
    """One line for a run stopped by a write that failed: which path, why, what was kept and how
    to go on."""
    import errno
    import warnings

    from diffrl.plumbing.checkpoint import latest_valid_checkpoint

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = latest_valid_checkpoint(run_dir)
    kept_text = (f"the last complete checkpoint {kept} is kept" if kept is not None
                 else "no checkpoint had been written")
    hint = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space", errno.EROFS: "make it writable",
            errno.EACCES: "make it writable", errno.EPERM: "make it writable"}.get(error.errno, "fix that")
    resume = f", then continue with `diffrl train --resume {run_dir}`" if kept is not None else ""
    return (f"cannot write {error.filename or run_dir}: {error.strerror or error}; the run stopped and {kept_text}; "
            f"{hint}{resume}")


def _move_aside(out: str) -> None:
    """--move-aside: rename a run at ``out`` out of the way (never delete it)."""
    from diffrl.core.run_dir import move_aside, run_in_dir

    if run_in_dir(out):
        print(f"diffrl train: moved the run in {out} to {move_aside(out)}", file=sys.stderr)


def cmd_envs(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="diffrl envs", description="List environments with their sizes (from a cache "
                                "that --build fills; see diffrl.commands.env_listing).")
    p.add_argument("--names-only", action="store_true", help="print names only")
    p.add_argument("--build", action="store_true", help="build every listed simulator to read (and cache) its "
                   "sizes, with a progress bar: minutes for all of them")
    p.add_argument("--suite", default=None, help="only this suite (playground, brax, gymnax, toy, dmc, gym, maniskill)")
    args = p.parse_args(argv)
    from diffrl.envs import registry

    names = [n for n in registry.list_envs() if args.suite is None or n.startswith(args.suite + "/")]
    if args.names_only:
        print("\n".join(names))
        return 0
    from diffrl.commands.env_listing import list_envs

    return list_envs(names, build=args.build)


EXPECTED_RESULTS = "benchmarks/results/ledger/report/expected.md (docs/benchmarks.md#benchmark-ledger)"
"""Where the benchmark ledger's per-task expected results are rendered (``benchmarks/ledger.py``)."""


def cmd_presets(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="diffrl presets",
        description="The named presets of tuned settings. Each is declared as a base preset plus values of its own, "
                    "each value under its source (a paper, a reference configuration, or a measurement written up "
                    "in docs/learning-evidence.md under the preset's name); command-line flags override them.")
    p.add_argument("--show", metavar="NAME", default=None,
                       help="print the chain of presets NAME is built on, from its root: each preset's summary, the "
                            "values it sets under their sources and the settings of its base it drops; then every "
                            "setting of NAME's algorithm that the config resolves to (defaults included), marking "
                            "the ones the chain sets")
    p.add_argument("--algo", metavar="ALGO", default=None,
                   help="list only the presets of algorithm ALGO (with --show: the algorithm whose preset NAME is, "
                        "needed where ALGO is a module:attribute spec of an algorithm from outside diffrl)")
    p.add_argument("--env", default=None, help="with --show: the environment to resolve it for (default: the "
                   "config's default environment)")
    args = p.parse_args(argv)
    if args.env is not None and args.show is None:
        p.error("--env goes with --show")
    from diffrl.config import presets
    from diffrl.algos import registry
    from diffrl.algos.preset import EVERY_OTHER_FAMILY
    from diffrl.config import ConfigError

    def defaults_of(preset) -> str:
        families = ["every other family" if f == EVERY_OTHER_FAMILY else f for f in preset.default_for]
        return f"default for {', '.join(families)}" if families else ""

    registry.names()  # algorithms installed by other packages bring their presets (entry points)
    spec = None
    if args.algo is not None:
        spec = registry.find(args.algo)
        if spec is None:
            print(f"diffrl presets: unknown algorithm {args.algo!r}; {registry.close_matches(args.algo)}",
                  file=sys.stderr)
            return 2
    try:
        presets.sync()
    except ConfigError as e:
        print(f"diffrl presets: {e}", file=sys.stderr)
        return 2
    if args.show is None:
        names = list(presets.every_preset())
        if spec is not None:
            names = [name for name in names if presets.every_preset()[name]["algo"] == spec.name]
            if not names:
                print(f"no presets for {args.algo}: it trains on the config's defaults plus your flags")
                return 0
        for name in names:
            record = presets.every_record()[name]
            about = "; ".join(x for x in (f"on {record.base}" if record.base else "", defaults_of(record)) if x)
            print(f"{name}{f' ({about})' if about else ''}: {record.summary}")
            print("    " + ", ".join(f"{k}={v}" for k, v in record.values.items()))
        return 0
    if args.show not in presets.every_preset():
        hint = presets.close_presets(args.show)
        print(f"diffrl presets: unknown preset {args.show!r}; {hint + ' ' if hint else ''}`diffrl presets` lists "
              "every one", file=sys.stderr)
        return 2
    import dataclasses

    from diffrl.algos.registry import find
    from diffrl.config import TrainConfig

    algo = presets.every_preset()[args.show]["algo"]
    if spec is not None and spec.name == algo:
        algo = args.algo  # a module:attribute spec: resolved under the name that registered it
    elif spec is not None:
        print(f"diffrl presets: preset {args.show!r} is for --algo {algo}, not {args.algo}", file=sys.stderr)
        return 2
    try:
        config = presets.resolve(algo, args.env or TrainConfig.env, args.show)
    except ConfigError as e:
        print(f"diffrl presets: {e}", file=sys.stderr)
        return 2
    chain = presets.chain(args.show)
    record = chain[-1]
    about = "; ".join(x for x in (f"algo {algo}", defaults_of(record)) if x)
    print(f"{args.show}: {record.summary}")
    print(f"chain: {' -> '.join(p.name for p in chain)} ({about})")
    for step in presets.steps(args.show):
        print(f"\n{step.preset.name}{f' (on {step.preset.base})' if step.preset.base else ''}: {step.preset.summary}")
        if step.dropped:
            print(f"  leaves at their defaults ({step.algo} does not read them): {', '.join(step.dropped)}")
        for source, values in step.preset.settings.items():
            print(f"  {source}")
            for key, value in values.items():
                print(f"      {key} = {value!r}")

    reads = set(find(algo).reads)
    set_here = set(presets.every_preset()[args.show])

    def walk(obj, prefix=""):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                if prefix or f.name in reads:
                    yield from walk(value, f"{prefix}{f.name}.")
            else:
                yield f"{prefix}{f.name}", value

    print(f"\nresolved for {algo} on {config.env} (* = set by the chain, the rest are defaults; what the default "
          f"presets give on the DM Control tasks: {EXPECTED_RESULTS}):")
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
    from diffrl.commands.bench_cost import main as bench_cost

    return bench_cost(argv[1:])


def _lazy(name: str, module: str = "diffrl.commands.trained_run"):
    """A command that imports its (heavy) module only when run."""
    def run(argv: list[str]) -> int:
        import importlib

        return getattr(importlib.import_module(module), name)(argv)

    return run


COMMANDS = {"train": cmd_train, "eval": _lazy("cmd_eval"), "export": _lazy("cmd_export"),
            "plot": _lazy("cmd_plot"), "actions": _lazy("cmd_actions", "diffrl.artefacts.action_plot"), "bench": cmd_bench, "envs": cmd_envs,
            "presets": cmd_presets}


COMPILING_COMMANDS = ("train", "eval", "export", "actions")
"""Commands that compile the training or evaluation programs (and so use the compilation cache)."""


COMPILE_CACHE_BYTES = 4 << 30
"""Size limit of the compilation cache (4 GiB: a few hundred configurations' programs)."""


def compile_cache_dir() -> str | None:
    """Where compiled programs are kept between runs: ``$DIFFRL_COMPILE_CACHE`` if it names a
    directory, none if it is ``0``/``off``/``false``, else ``diffrl/jax`` under the user cache
    directory (``$XDG_CACHE_HOME``, default ``~/.cache``)."""
    value = os.environ.get("DIFFRL_COMPILE_CACHE", "").strip()
    if value.lower() in ("0", "off", "false", "no"):
        return None
    if value and value.lower() not in ("1", "on", "true", "yes"):
        return value
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "diffrl", "jax")


def use_compile_cache(argv: list[str]) -> list[str]:
    """Turn on JAX's persistent compilation cache for a compiling command (``--no-compile-cache``,
    removed from ``argv`` here, or ``DIFFRL_COMPILE_CACHE=0`` turn it off).

    A second ``diffrl train`` or ``eval`` of the same configuration then loads its programs
    instead of compiling them: minutes become seconds. JAX keys each entry by the program, the
    backend and the XLA flags, so a changed setting compiles anew, never a wrong program.
    Processes sharing the directory: with the ``filelock`` package JAX serialises reads and
    writes of entries under a lock file (it does so once a size limit is set, here
    :data:`COMPILE_CACHE_BYTES`, least recently used entries evicted first); without it an entry
    read while another process writes it fails its decompression, and JAX compiles instead
    (with a warning). A cache directory set already (a test suite's, or
    ``JAX_COMPILATION_CACHE_DIR``) is left as it is."""
    if "--no-compile-cache" in argv:
        return [a for a in argv if a != "--no-compile-cache"]
    if not argv or argv[0] not in COMPILING_COMMANDS or "-h" in argv or "--help" in argv:
        return argv
    directory = compile_cache_dir()
    if directory is None:
        return argv
    import jax

    if jax.config.jax_compilation_cache_dir is None:
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError:  # an unwritable cache directory only costs the compile time
            return argv
        jax.config.update("jax_compilation_cache_dir", directory)
        if importlib.util.find_spec("filelock") is not None:
            jax.config.update("jax_compilation_cache_max_size", COMPILE_CACHE_BYTES)
    return argv


def main(argv: list[str] | None = None) -> int:
    global _PROCESS_ENTRY
    _PROCESS_ENTRY = argv is None
    return _main(argv)


_PROCESS_ENTRY = False
"""Whether :func:`main` runs as the process's entry point (``diffrl ...``, ``python -m diffrl.cli``)
rather than called with arguments from Python (tests, notebooks)."""


def _say_last(line: str) -> None:
    """Print a run's verdict so that it stays the last line of stderr.

    After a write failure, the checkpoint's other writes still in flight in orbax's and
    tensorstore's threads fail moments later, some only as the process exits, and print tracebacks
    of the same failure. When ``main`` is the process's entry point the process is ending: file
    descriptor 2 (and ``sys.stderr``) go to /dev/null first, at the level of the descriptor, so a
    thread that holds the old ``sys.stderr`` object or writes from C++ is silenced too, and the
    verdict goes to the original stderr through a private duplicate of it. (Silencing after the
    verdict left a window in which a thread's traceback could follow it.) The old ``sys.stderr``
    is deliberately not flushed: it is line-buffered, so everything this process said in whole
    lines is already out, and what it still holds is a fragment of a thread's traceback in
    progress (the interpreter prints a source line's indentation and its text as separate writes),
    which a flush would put in front of the verdict on the same line. Not flushing is not enough:
    any other flush of that object (a logging handler's, after its record) before the descriptor
    moves sends such a fragment (``RuntimeError: ``, cut off) to stderr, so the verdict begins
    with a line break of its own and never shares a line with what came before. Called from
    Python, stderr is left alone."""
    if not _PROCESS_ENTRY:
        print(line, file=sys.stderr)
        return
    sys.stderr = open(os.devnull, "w")  # before the descriptor moves: new writers go nowhere
    original = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    os.write(original, ("\n" + line + "\n").encode())
    os.close(original)


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    argv = use_compile_cache(argv)
    if argv and argv[0] == "eval" and "--video" in argv:
        import diffrl.artefacts.video  # noqa: F401  (must pick the GL backend before mujoco is imported)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    from diffrl.plumbing.records import set_command

    set_command(["diffrl", *argv])  # what run records store as the command
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
