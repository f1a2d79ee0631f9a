"""Moved to :mod:`diffrl.sharding` (a ground-floor utility: the replay buffer and the algorithms
build on it); a train state's shardings are :func:`diffrl.core.loop.state_shardings`.

Kept only while ``diffrl/algos/epochs.py`` still imports ``replicate`` and ``shard_env_axis`` from
here; delete this module once it imports them from :mod:`diffrl.sharding`.
"""
from diffrl.sharding import replicate, shard_env_axis

__all__ = ["replicate", "shard_env_axis"]
