"""Reading ``diffrl train``'s command line: flags checked and rewritten before tyro parses them, and the
parse itself over the algorithm's own run config.

Before parsing: the algorithm typed (:func:`preparse`, :func:`unknown_algo`), flags of settings the
algorithm does not read refused by what was typed (:func:`unread_flag_errors`), moved settings spelled
as their new flags (:func:`moved_flags`), and values as people write them (``false``, ``512,512``,
``1e5``) turned into what tyro parses (:func:`flag_values`). Then :func:`parse_config` parses with
tyro, listing on ``--help`` only what the algorithm reads.
"""
from __future__ import annotations

import argparse
import sys


def preparse(argv: list[str]) -> tuple[str, str, str | None]:
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
        return full_config_type(preparse(argv)[0])()
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


def unknown_algo(algo: str) -> str | None:
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


def parse_config(defaults, argv: list[str], hide_unread: bool | None = None, **tyro_args):
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
