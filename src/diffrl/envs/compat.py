"""Compatibility shims between the pinned simulators and the pinned MuJoCo and JAX.

Each shim fixes one call that a pinned simulator makes to an API its pinned dependency no longer
has, adds the old name only when it is missing (nothing that exists is replaced, so a fixed
release leaves the shim inert), and is applied just before the simulator builds a task. Found by
tests/test_env_catalog.py, which builds and steps every listed task.

* :func:`patch_mjspec_find_body`: Playground 0.2.0's Reacher (``dm_control_suite/reacher.py``,
  ``_make_model``) picks the MjSpec method that finds the target body by comparing version
  *strings*, ``mujoco.__version__ >= "3.3.0"``. For MuJoCo 3.17.0 that is False ("1" sorts before
  "3"), so it calls ``MjSpec.find_body``, the pre-3.3 name MuJoCo has since removed in favour of
  ``MjSpec.body``, and ReacherEasy/ReacherHard fail to build with an AttributeError. The alias is
  exact: both look a body up by name in the spec (the method was renamed, not changed).
* :func:`patch_brax_fluid_clip`: Brax 0.14.2's fluid model (``brax/fluid.py``, used by ``swimmer``'s
  viscosity) calls ``jnp.clip(x, a_min=...)``; JAX 0.10 removed the ``a_min``/``a_max`` keywords in
  favour of ``min``/``max``, so every swimmer step raised a TypeError. The shim gives that one module
  a ``jax.numpy`` whose ``clip`` also accepts the old keywords (same function, renamed arguments).
"""
from __future__ import annotations

import types


def patch_mjspec_find_body() -> bool:
    """Alias ``mujoco.MjSpec.find_body`` to ``MjSpec.body`` if it is missing; True if patched now."""
    import mujoco

    if hasattr(mujoco.MjSpec, "find_body"):
        return False

    def find_body(spec, name):
        return spec.body(name)

    find_body.__doc__ = "diffrl shim: MjSpec.body under its pre-3.3 name (see diffrl.envs.compat)."
    mujoco.MjSpec.find_body = find_body
    return True


class _NumpyWithOldClip(types.ModuleType):
    """``jax.numpy`` in every respect except ``clip``, which also takes ``a_min``/``a_max``."""

    def __init__(self, jnp):
        super().__init__("jax.numpy")
        self._jnp = jnp

    def __getattr__(self, name):
        return getattr(self._jnp, name)

    def clip(self, x, min=None, max=None, *, a_min=None, a_max=None):  # noqa: A002 (jnp's names)
        return self._jnp.clip(x, min=a_min if a_min is not None else min,
                              max=a_max if a_max is not None else max)


def patch_brax_fluid_clip() -> bool:
    """Give ``brax.fluid`` a ``jnp.clip`` that accepts ``a_min``/``a_max``; True if patched now."""
    import jax.numpy as jnp
    from brax import fluid

    if isinstance(fluid.jp, _NumpyWithOldClip):
        return False
    try:
        jnp.clip(jnp.zeros(()), a_min=0.0)
        return False  # this JAX still takes the old keywords
    except TypeError:
        pass
    fluid.jp = _NumpyWithOldClip(jnp)
    return True
