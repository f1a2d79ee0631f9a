"""Environments from outside diffrl by name: ``module:factory`` names and ``diffrl.envs`` entry points.

A JAX environment of your own trains from the command line without a line of diffrl changed:

* ``diffrl train --env mypkg.tasks:make_task`` imports ``mypkg.tasks`` (found on ``sys.path``:
  an installed package, or a directory on ``PYTHONPATH``) and calls ``make_task()``;
* a package that declares an entry point in the group ``diffrl.envs``, e.g. in its pyproject.toml::

      [project.entry-points."diffrl.envs"]
      "mypkg/Task" = "mypkg.tasks:make_task"

  makes ``--env mypkg/Task`` a name like the built-in ones once it is installed (``diffrl envs``
  lists it).

The factory is called with the keyword arguments ``make`` is given (none from the command line) and
must return an environment with :class:`diffrl.envs.base.Env`'s interface: ``spec`` (an
``EnvSpec``), ``reset(key)`` and ``step(state, action)``. All of it is checked when the environment
is made, which is before anything compiles, and a failure names the step that failed: the module
cannot be imported, it has no such attribute, or what the factory returned is no environment.
Names registered in Python (:func:`diffrl.envs.register`) come first: an entry point never replaces
one.

A simulator stepped outside JAX is registered in Python with ``register_host`` instead: training
must know a host environment from its name before building it, to batch it in worker processes.
"""
from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any, Callable

from diffrl.envs.base import EnvSpec, check_spec

ENTRY_POINT_GROUP = "diffrl.envs"


def _entry_points() -> list[metadata.EntryPoint]:
    # read afresh on every call (a scan of the installed packages' metadata, milliseconds): only
    # names no registration knows come here, and a package installed meanwhile is found
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def entry_point_names() -> list[str]:
    """The environment names installed packages declare in the ``diffrl.envs`` group, sorted."""
    return sorted({ep.name for ep in _entry_points()})


def load_factory(target: str, name: str) -> Callable[..., Any]:
    """The callable ``target`` (``module:attribute``, the attribute may be dotted) names, for the
    environment ``name``; ValueError saying what is missing otherwise."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"environment {name!r}: {target!r} is not module:factory (e.g. mypkg.tasks:make_task)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:  # errors inside a module that is found surface as they are
        raise ValueError(f"environment {name!r}: cannot import module {module_name!r} ({e}); put its directory "
                         "on PYTHONPATH or install its package") from None
    factory = module
    for part in attribute.split("."):
        if not hasattr(factory, part):
            raise ValueError(f"environment {name!r}: module {module_name!r} has no attribute {attribute!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise ValueError(f"environment {name!r}: {target} is not callable ({type(factory).__name__}); name a "
                         "function or class that returns an environment")
    return factory


def find_factory(name: str) -> Callable[..., Any] | None:
    """The factory a name that no registration knows stands for: ``module:factory`` itself, or the
    target of an installed ``diffrl.envs`` entry point of that name; None when it is neither."""
    if ":" in name:
        return load_factory(name, name)
    for ep in _entry_points():
        if ep.name == name:
            return load_factory(f"{ep.module}:{ep.attr}", name)
    return None


def check_env(env: Any, name: str) -> None:
    """Refuse what a factory returned unless it has an environment's ``spec``, ``reset`` and ``step``."""
    missing = [what for what in ("reset", "step") if not callable(getattr(env, what, None))]
    spec = getattr(env, "spec", None)
    if not isinstance(spec, EnvSpec):
        missing.insert(0, "spec (an EnvSpec)")
    if missing:
        raise ValueError(f"environment {name!r}: its factory returned {type(env).__name__!r}, which is not a diffrl "
                         f"environment (it has no {', '.join(missing)}); an environment has spec: EnvSpec, "
                         "reset(key) and step(state, action) (diffrl.envs.base.Env; examples/custom_env.py)")
    check_spec(spec)


def make(name: str, factory: Callable[..., Any], **kwargs) -> Any:
    """``factory(**kwargs)``, checked to be an environment."""
    env = factory(**kwargs)
    check_env(env, name)
    return env
