"""``diffrl envs``: every environment's name and sizes in about a second.

Building a simulator to read its sizes costs from milliseconds (gymnax) to tens of seconds
(MJX humanoids, ManiSkill scenes): building all of them took minutes, for a listing. So the
default listing reads the sizes from a cache (``env_sizes.json`` next to the compilation
cache, under the user cache directory), which ``diffrl envs --build`` fills by building every
listed simulator, with a progress bar. Cached sizes are tied to the versions of diffrl and the
simulator packages: after an upgrade they are rebuilt, never shown stale. Third-party warnings
and prints while building are silenced: the listing is the output.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import warnings
from pathlib import Path

SIZE_FIELDS = ("obs_size", "critic_size", "action_size", "episode_length")
STAMP_PACKAGES = ("diffrl", "playground", "brax", "gymnax", "mujoco", "mujoco-mjx", "dm_control", "gymnasium",
                  "mani_skill")


def cache_file() -> Path:
    """``diffrl/env_sizes.json`` under ``$XDG_CACHE_HOME`` (default ``~/.cache``)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "diffrl" / "env_sizes.json"


def stamp() -> dict[str, str]:
    """The package versions the cached sizes are valid for."""
    from diffrl.plumbing.machine import package_versions

    return package_versions(STAMP_PACKAGES, missing="-")


def read_cache() -> dict[str, dict]:
    """{name: sizes} cached for the installed package versions (empty when stale or absent)."""
    try:
        data = json.loads(cache_file().read_text())
    except (OSError, ValueError):
        return {}
    return data.get("sizes", {}) if data.get("stamp") == stamp() else {}


def write_cache(sizes: dict[str, dict]) -> None:
    """Merge ``sizes`` into the cache (atomically; an unwritable cache is only a lost shortcut)."""
    path = cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"stamp": stamp(), "sizes": {**read_cache(), **sizes}}, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass


def build_sizes(name: str) -> dict:
    """The sizes of ``name``, building its simulator with third-party output silenced; a task
    that cannot load here gives ``{"unavailable": first line of the reason}``."""
    from diffrl.envs import registry

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            spec = registry.describe(name)
        except Exception as e:  # a task that cannot load here says why, the rest still list
            return {"unavailable": (str(e).splitlines() or [type(e).__name__])[0][:80]}
    return {field: int(getattr(spec, field)) for field in SIZE_FIELDS}


def row(name: str, sizes: dict | None) -> str:
    if sizes is None:
        return f"{name:45s} {'-':>6s} {'-':>7s} {'-':>5s} {'-':>7s}"
    if "unavailable" in sizes:
        return f"{name:45s} unavailable: {sizes['unavailable']}"
    return (f"{name:45s} {sizes['obs_size']:6d} {sizes['critic_size']:7d} {sizes['action_size']:5d} "
            f"{sizes['episode_length']:7d}")


def list_envs(names: list[str], build: bool) -> int:
    """Print the table; with ``build``, build every simulator (progress bar on stderr) first."""
    cached = read_cache()
    if build:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        built = {}
        with Progress(TextColumn("building"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), transient=True,
                      disable=not sys.stderr.isatty()) as bar:
            task = bar.add_task("", total=len(names))
            for name in names:
                bar.update(task, description=name)
                built[name] = build_sizes(name)
                bar.advance(task)
        write_cache(built)
        cached = {**cached, **built}
    print(f"{'name':45s} {'obs':>6s} {'critic':>7s} {'act':>5s} {'ep_len':>7s}")
    for name in names:
        print(row(name, cached.get(name)))
    missing = [n for n in names if n not in cached]
    if missing:
        print(f"({len(missing)} of {len(names)} sizes are not cached yet (-): `diffrl envs --build` builds "
              "each simulator once, which takes minutes, and caches them)", file=sys.stderr)
    return 0


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
    return list_envs(names, build=args.build)
