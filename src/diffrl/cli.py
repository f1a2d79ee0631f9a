"""Command line: ``diffrl train | eval | export | plot | actions | bench | envs | presets`` (tyro over the typed config).

``diffrl train --algo ppo --env playground/CartpoleSwingup [--preset NAME] [any field]``:
the algorithm and environment pick a tuned preset (or ``--preset``), and every
other flag overrides it. ``diffrl train --help`` documents every field.
"""
from __future__ import annotations

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


COMMANDS = {"train": _lazy("cmd_train", "diffrl.commands.train"), "eval": _lazy("cmd_eval"),
            "export": _lazy("cmd_export"), "plot": _lazy("cmd_plot"),
            "actions": _lazy("cmd_actions", "diffrl.artefacts.action_plot"), "bench": cmd_bench,
            "envs": _lazy("cmd_envs", "diffrl.commands.env_listing"),
            "presets": _lazy("cmd_presets", "diffrl.commands.presets_listing")}


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
    from diffrl.commands import verdict

    verdict.PROCESS_ENTRY = argv is None  # a failed run's verdict then silences stderr after it (say_last)
    return _main(argv)


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
    from diffrl.plumbing.run_record import set_command

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
