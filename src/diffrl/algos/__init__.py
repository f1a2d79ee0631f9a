"""The algorithms: each module declares its registration (:class:`diffrl.algos.spec.AlgorithmSpec`);
:mod:`diffrl.algos.registry` is the name -> record lookup (``get``, ``names``, ``register``).

The names that used to live here (``ALGORITHMS``, ``ALGORITHM_SECTIONS``, ``UNUSED_SETTINGS``,
``CONFIG_SECTIONS``, ``batch_section``, ``close_matches``, ``unused_setting_errors``,
``without_unused_settings``) are the registry's, still importable from here.
"""
from __future__ import annotations

_REGISTRY_NAMES = ("ALGORITHMS", "ALGORITHM_SECTIONS", "UNUSED_SETTINGS", "CONFIG_SECTIONS", "batch_section",
                   "close_matches", "unused_setting_errors", "without_unused_settings")


def __getattr__(name: str):
    # Resolved on first use, so importing a submodule (diffrl.algos.ppo) does not load the registry.
    if name in _REGISTRY_NAMES:
        from diffrl.algos import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'diffrl.algos' has no attribute {name!r}")
