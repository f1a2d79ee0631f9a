"""One typed way to set a config field by its dotted name: ``KEY=VALUE`` overrides and presets.

Every path that sets a field by name goes through :func:`set_field`: presets
(``diffrl.config.presets``), ``diffrl bench cost --set``, and the benchmark scripts' ``--set``
(suite, compare, stability, multimodality). The value is converted to the field's declared
type, so ``gaussian.hidden=64`` becomes ``(64,)`` and ``reppo.kl_bound=1e-2`` a float, and a
value that does not fit is refused with the field, the expected type and the value:

    --set reppo.num_epochs=2.5: expected int, got '2.5'

Accepted text: ``true/false/yes/no/1/0`` (bool), Python literals or bare words (str), ``none``
(optional fields), and for tuples ``64,64``, ``(64, 64)``, ``[64, 64]`` or one element ``64``.
Dotted names may use dashes as the command line does (``reppo.kl-bound``). A name that has moved to
another section (:data:`diffrl.config.MOVED_FIELDS`: ``diffusion.trust_region`` is now
``reppo.trust_region``) sets the new field, with a note on stderr.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import sys
import types
import typing
from typing import Any

from diffrl.algos.registry import CONFIG_SECTIONS
from diffrl.config import MOVED_FIELDS, ConfigError, moved_field

RENAMED_FIELDS = {
    "reppo.target_entropy_mult": "it is now --reppo.entropy-target-mult, with H* = value x action dim "
                                 "(the convention of --adjoint.entropy-target-mult): pass the old value negated",
}
"""Dotted fields that no longer exist -> what to use instead (refused with this hint)."""

_NONE_WORDS = ("none", "null")
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def split_override(item: str, source: str = "--set") -> tuple[str, str]:
    """'key=value' -> (dotted field name with underscores, value text)."""
    key, sep, text = item.partition("=")
    key = key.strip().lstrip("-")
    if not sep or not key:
        raise ConfigError(f"{source} expects KEY=VALUE (got {item!r})")
    return normalise_name(key), text.strip()


def normalise_name(dotted: str) -> str:
    return ".".join(part.replace("-", "_") for part in dotted.split("."))


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def field_type(config: Any, dotted: str) -> Any:
    """The declared type of a dotted field of a (nested) config dataclass instance."""
    head, _, rest = normalise_name(dotted).partition(".")
    names = {f.name for f in dataclasses.fields(config)}
    if head not in names:
        raise ConfigError(f"unknown field {dotted!r}")
    return field_type(getattr(config, head), rest) if rest else _hints(type(config))[head]


def set_field(config: Any, dotted: str, value: Any, source: str = "--set") -> Any:
    """``config`` with the dotted field set to ``value`` converted to the field's type.

    ``value`` is text (a command-line value) or a Python value (a preset). Raises ConfigError
    naming the field for an unknown name or a value of the wrong type.
    """
    dotted = normalise_name(dotted)
    if dotted in RENAMED_FIELDS:
        raise ConfigError(f"{source} {dotted}: {RENAMED_FIELDS[dotted]}")
    if dotted in MOVED_FIELDS and hasattr(config, "algo"):
        new = moved_field(dotted, config.algo)
        print(f"diffrl: note: {source} {dotted} is now {source} {new}", file=sys.stderr)
        dotted = new
    section = dotted.partition(".")[0]
    if (dataclasses.is_dataclass(config) and hasattr(config, "algo") and section in CONFIG_SECTIONS
            and not any(f.name == section for f in dataclasses.fields(config))):
        # a run config holds only the sections its algorithm reads (diffrl.config.config_type)
        from diffrl.algos.registry import find, unread_reason

        spec = find(config.algo)
        reason = unread_reason(spec, section) if spec is not None else f"it has no {section} section"
        raise ConfigError(f"{source} {dotted} has no effect with --algo {config.algo}: {reason}")
    return _set(config, dotted, value, dotted, source)


def _set(config: Any, dotted: str, value: Any, full: str, source: str) -> Any:
    head, _, rest = dotted.partition(".")
    if not dataclasses.is_dataclass(config) or not any(f.name == head for f in dataclasses.fields(config)):
        raise ConfigError(f"{source} {full}: unknown field (see diffrl train --help)")
    if rest:
        return dataclasses.replace(config, **{head: _set(getattr(config, head), rest, value, full, source)})
    kind = _hints(type(config))[head]
    if dataclasses.is_dataclass(kind):
        raise ConfigError(f"{source} {full}: is a section; set one of its fields ({full}.<field>)")
    try:
        converted = coerce(value, kind)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{source} {full}={value!r}: expected {type_name(kind)} ({e})") from None
    return dataclasses.replace(config, **{head: converted})


def type_name(kind: Any) -> str:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("None" if a is type(None) else type_name(a) for a in args)
    if origin is tuple:
        return f"a tuple of {type_name(args[0])}" if len(args) == 2 and args[1] is Ellipsis else str(kind)
    return getattr(kind, "__name__", str(kind))


def coerce(value: Any, kind: Any) -> Any:
    """``value`` (text or Python value) as an instance of the annotation ``kind``."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS):
            if type(None) in args:
                return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg)
            except (TypeError, ValueError) as e:
                errors.append(str(e))
        raise ValueError("; ".join(errors) or f"got {value!r}")
    if origin is tuple:
        item = args[0] if args else Any
        if isinstance(value, str):
            value = _tuple_text(value)
        elif not isinstance(value, (list, tuple)):
            value = (value,)
        return tuple(coerce(v, item) for v in value)
    if kind is Any:
        return _literal(value) if isinstance(value, str) else value
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError(f"got {value!r}; use true or false")
    if kind is int:
        if isinstance(value, str):
            value = _literal(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
            raise ValueError(f"got {value!r}")
        return int(value)
    if kind is float:
        if isinstance(value, str):
            value = _literal(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"got {value!r}")
        return float(value)
    if kind is str:
        if isinstance(value, str):
            parsed = _literal(value)
            return parsed if isinstance(parsed, str) else value.strip()
        raise ValueError(f"got {value!r}")
    if isinstance(kind, type) and isinstance(value, kind):
        return value
    raise ValueError(f"cannot convert {value!r}")


def _literal(text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _tuple_text(text: str) -> tuple:
    parsed = _literal(text)
    if isinstance(parsed, (list, tuple)):
        return tuple(parsed)
    if isinstance(parsed, str):
        parts = [p.strip() for p in parsed.strip("()[]").split(",")]
        return tuple(p for p in parts if p)
    return (parsed,)
