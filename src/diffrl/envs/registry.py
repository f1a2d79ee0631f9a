"""Environments by name: ``make("playground/CartpoleSwingup")``.

Names are ``<suite>/<task>`` with suites ``playground`` (MuJoCo Playground DM Control
Suite and locomotion), ``brax``, ``gymnax``, ``toy``, and the host suites ``dmc`` (dm_control), ``gym``
(gymnasium) and ``maniskill`` (ManiSkill3), stepped outside JAX (``diffrl.envs.host``); users add their own with :func:`register`.
``make`` returns the bare, unbatched env (wrap it with
:func:`diffrl.envs.wrappers.wrap` for training; a ``dmc/`` name gives one host env). Listing names imports no simulator;
the suite's library is imported only when one of its envs is made.
"""
from __future__ import annotations

import difflib
from typing import Callable

from diffrl.envs.base import Env, EnvSpec
from diffrl.envs.brax_envs import BRAX_ENVS
from diffrl.envs.dmc import DMC_TASKS
from diffrl.envs.gymnasium_env import GYM_TASKS
from diffrl.envs.gymnax_envs import GYMNAX_ENVS
from diffrl.envs.maniskill import MANISKILL_TASKS, NEEDS_DOWNLOAD, needs_download_error
from diffrl.envs.playground import DMC_ENVS, LOCOMOTION_ENVS, MANIPULATION_ENVS

EnvFactory = Callable[..., Env]


def _playground(task: str) -> EnvFactory:
    def factory(**kwargs) -> Env:
        from diffrl.envs.playground import PlaygroundEnv

        return PlaygroundEnv(task, **kwargs)

    return factory


def _brax(task: str) -> EnvFactory:
    def factory(**kwargs) -> Env:
        from diffrl.envs.brax_envs import BraxEnv

        return BraxEnv(task, **kwargs)

    return factory


def _gymnax(task: str) -> EnvFactory:
    def factory(**kwargs) -> Env:
        from diffrl.envs.gymnax_envs import GymnaxEnv

        return GymnaxEnv(task, **kwargs)

    return factory


def _toy(cls_name: str) -> EnvFactory:
    def factory(**kwargs) -> Env:
        from diffrl.envs import toy

        return getattr(toy, cls_name)(**kwargs)

    return factory


def _host(name: str) -> EnvFactory:
    def factory(**kwargs):
        from diffrl.envs.host_registry import single_env_factory

        if kwargs:
            raise ValueError(f"{name} takes no constructor arguments (got {sorted(kwargs)})")
        return single_env_factory(name)()

    return factory


def _builtin() -> dict[str, EnvFactory]:
    table: dict[str, EnvFactory] = {}
    table.update({f"playground/{t}": _playground(t) for t in DMC_ENVS + LOCOMOTION_ENVS})
    table.update({f"brax/{t}": _brax(t) for t in BRAX_ENVS})
    table.update({f"gymnax/{t}": _gymnax(t) for t in GYMNAX_ENVS})
    table.update({f"dmc/{t}": _host(f"dmc/{t}") for t in DMC_TASKS})
    table.update({f"gym/{t}": _host(f"gym/{t}") for t in GYM_TASKS})
    table.update({f"maniskill/{t}": _host(f"maniskill/{t}") for t in MANISKILL_TASKS})
    table["toy/MirrorGoals"] = _toy("MirrorGoals")
    table["toy/BimodalBandit"] = _toy("BimodalBandit")
    table["toy/OctahedronGoals"] = _toy("OctahedronGoals")
    table["toy/CornerBandit"] = _toy("CornerBandit")
    return table


_REGISTRY: dict[str, EnvFactory] = _builtin()
_BUILTIN = frozenset(_REGISTRY)


def is_builtin(name: str) -> bool:
    """Whether ``name`` is one of diffrl's own environments (not one a user registered)."""
    return name in _BUILTIN


def list_envs() -> list[str]:
    """All registered names (built-in and user-registered), in registration order."""
    return list(_REGISTRY)


def _prefixes() -> list[str]:
    return sorted({name.split("/", 1)[0] + "/" for name in _REGISTRY if "/" in name})


def _unknown(name: str) -> ValueError:
    task = name.split("/", 1)[-1]
    if name.startswith("playground/") and task in MANIPULATION_ENVS:
        return ValueError(
            f"{name!r} is a Playground manipulation task: not supported (its MuJoCo Menagerie "
            "robots are not packaged for offline use). The DM Control Suite and locomotion "
            "tasks are (see list_envs())."
        )
    if name.startswith("maniskill/") and task in NEEDS_DOWNLOAD:
        return needs_download_error(task)
    close = difflib.get_close_matches(name, list(_REGISTRY), n=5, cutoff=0.6)
    if not close:  # a bare task name ("CartpoleSwingup") still finds its suite
        by_task = {n.split("/", 1)[-1]: n for n in _REGISTRY}
        close = [by_task[t] for t in difflib.get_close_matches(task, list(by_task), n=5, cutoff=0.6)]
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return ValueError(
        f"unknown environment {name!r}.{hint} Names start with one of "
        f"{', '.join(_prefixes())}; see diffrl.envs.list_envs()."
    )


def make(name: str, **kwargs) -> Env:
    """Build the bare (unbatched, unwrapped) env registered as ``name``.

    ``kwargs`` go to the env's constructor, e.g. ``make("brax/ant", backend="mjx")``
    or ``make("playground/G1JoystickFlatTerrain", asymmetric=True)``.
    """
    if name not in _REGISTRY:
        raise _unknown(name)
    return _REGISTRY[name](**kwargs)


def describe(name: str, **kwargs) -> EnvSpec:
    """The :class:`EnvSpec` of ``name`` (builds the env, so it may be slow)."""
    return make(name, **kwargs).spec


def register(name: str, factory: EnvFactory, overwrite: bool = False) -> None:
    """Make ``factory(**kwargs) -> Env`` available as ``make(name, **kwargs)``.

    A ``suite/`` prefix (e.g. ``"my/Task"``) is recommended. Re-registering an
    existing name raises unless ``overwrite=True``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("env name must be a non-empty string")
    if not callable(factory):
        raise TypeError(f"factory for {name!r} must be callable")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"environment {name!r} is already registered (pass overwrite=True)")
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Remove a registered name (mainly for tests)."""
    if name not in _REGISTRY:
        raise _unknown(name)
    del _REGISTRY[name]
