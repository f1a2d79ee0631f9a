"""Test-wide settings: CPU, headless rendering, a persistent compilation cache."""
import os
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MUJOCO_GL", "egl")

import jax  # noqa: E402

# Identical programs compiled in several tests (and in repeated local runs) are
# compiled once; CI starts with an empty cache, which only costs the first compile.
_cache = Path(__file__).resolve().parent.parent / ".jax_cache"
jax.config.update("jax_compilation_cache_dir", str(_cache))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 2.0)
