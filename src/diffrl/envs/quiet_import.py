"""Import MuJoCo's MJX without its Warp notices.

``mujoco.mjx`` (3.17) tries to import NVIDIA Warp at import time and *prints* "Failed to import
warp: ..." and "Failed to import mujoco_warp: ..." when it is absent. diffrl never uses the Warp
backend (Playground and Brax run with ``impl="jax"``; the Makefile installs Playground without
warp-lang), so those two lines are noise on every run. This imports ``mujoco.mjx`` once with
standard output captured and passes through everything except those notices.
"""
from __future__ import annotations

import contextlib
import io
import sys

_NOTICES = ("Failed to import warp:", "Failed to import mujoco_warp:")
_done = False


def import_mjx_quietly() -> None:
    """Import ``mujoco.mjx`` (idempotent); other output of the import is printed as usual."""
    global _done
    if _done or "mujoco.mjx" in sys.modules:
        _done = True
        return
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            import mujoco.mjx  # noqa: F401
    finally:
        kept = [line for line in captured.getvalue().splitlines() if not line.startswith(_NOTICES)]
        if kept:
            print("\n".join(kept))
    _done = True
