"""``diffrl presets``: the named presets of tuned settings, each with its sources; ``--show NAME`` the chain it
is built on and every setting it resolves to."""
from __future__ import annotations

import argparse
import sys


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
