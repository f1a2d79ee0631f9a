"""The learned Q in an export directory, for the best-of-K evaluation sampler.

REPPO, TruDi and AMDP evaluate with ``best-of-k``: K actions drawn by the acting sampler, the
one with the largest learned Q(s, a) kept (``diffrl.algos.soft_critic.best_of_k``). Exporting it
takes the critic too. An export directory of such an algorithm then also holds::

    critic.json             critic config, K, the acting sampler, sha256 of the two array files
    critic_params.npz       the categorical critic's parameters (flattened like params.npz)
    critic_obs_stats.npz    the critic observation normaliser's statistics

Only when the critic sees the same observation as the policy: a critic trained on privileged
simulator state (``--asymmetric-critic``) cannot be evaluated where only the policy's
observation exists, so such runs export no critic and offer no best-of-k.

``best_of_k_from_noise`` is the computation as a deterministic function of the K acting noise
draws (``ExplicitNoisePolicy``), so ``load_policy(dir, "best-of-k")``, the ONNX graph and the
trainer's own evaluation give the same action for the same key.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from diffrl.plumbing.records import (ExportError, check_params, config_from_json, config_to_json, flatten_params, load_stats,
                            load_tree, npz_bytes, sha256, stats_arrays, write_bytes)

BEST_OF_K = "best-of-k"
CRITIC_FILE = "critic.json"
CRITIC_PARAMS_FILE = "critic_params.npz"
CRITIC_STATS_FILE = "critic_obs_stats.npz"


def export_critic(out_dir: str | Path, critic_config: Any, critic_params: Any, critic_obs_stats: Any,
                  obs_size: int, action_size: int, best_of_k: int, acting_sampler: str) -> Path:
    """Write the critic files next to an existing export (``critic.json`` last)."""
    from diffrl.critics.categorical import CategoricalCritic

    out = Path(out_dir)
    template = _critic_template(CategoricalCritic(critic_config), obs_size, action_size)
    check_params(flatten_params(critic_params), template, "critic params to export")
    files = {CRITIC_PARAMS_FILE: npz_bytes(flatten_params(critic_params)),
             CRITIC_STATS_FILE: npz_bytes(stats_arrays(critic_obs_stats))}
    for name, data in files.items():
        write_bytes(out / name, data)
    record = {"config": config_to_json(critic_config), "obs_size": int(obs_size), "action_size": int(action_size),
              "best_of_k": int(best_of_k), "acting_sampler": acting_sampler,
              "files": {name: sha256(data) for name, data in files.items()}}
    write_bytes(out / CRITIC_FILE, json.dumps(record, indent=2).encode())
    return out


def _critic_template(critic, obs_size: int, action_size: int):
    return jax.eval_shape(lambda k: critic.init(k, jnp.zeros((1, obs_size)), jnp.zeros((1, action_size))),
                          jax.random.PRNGKey(0))


class ExportedCritic:
    """Q(s, a) of an export directory on RAW observations (its own normaliser inside)."""

    def __init__(self, export_dir: str | Path, normalizer: dict):
        from diffrl.critics.categorical import CategoricalCritic, CriticConfig

        export_dir = Path(export_dir)
        try:
            info = json.loads((export_dir / CRITIC_FILE).read_text())
        except (OSError, ValueError) as e:
            raise ExportError(f"cannot read {export_dir / CRITIC_FILE} ({e})") from e
        self.info = info
        self.k, self.acting_sampler = int(info["best_of_k"]), info["acting_sampler"]
        self.critic = CategoricalCritic(config_from_json(CriticConfig, info["config"]))
        self.params = load_tree(export_dir / CRITIC_PARAMS_FILE, info["files"][CRITIC_PARAMS_FILE],
                                _critic_template(self.critic, int(info["obs_size"]), int(info["action_size"])),
                                CRITIC_FILE)
        self.stats = load_stats(export_dir / CRITIC_STATS_FILE, info["files"][CRITIC_STATS_FILE], CRITIC_FILE)
        self.enabled = bool(normalizer["enabled"])
        self.clip, self.eps = float(normalizer["clip"]), float(normalizer["eps"])

    def q(self, raw_obs: jax.Array, action: jax.Array) -> jax.Array:
        from diffrl.critics.categorical import CategoricalCritic
        from diffrl.maths.normalization import normalize

        obs = jnp.asarray(raw_obs, jnp.float32)
        if self.enabled:
            obs = normalize(self.stats, obs, clip=self.clip, eps=self.eps)
        return self.critic.apply(self.params, obs, action, method=CategoricalCritic.q_value)


def has_critic(export_dir: str | Path) -> bool:
    return (Path(export_dir) / CRITIC_FILE).exists()


def best_of_k_noise_shape(policy, k: int, acting_sampler: str) -> tuple[int, ...]:
    """Per observation: K draws of the acting sampler's noise."""
    return (k, *policy.eval_noise_shape(acting_sampler))


def draw_best_of_k_noise(policy, key: jax.Array, batch_shape: tuple[int, ...], k: int, acting_sampler: str):
    """(*batch, K, *noise) -- the draws ``best_of_k`` makes with ``policy.sample`` on (K, *batch)."""
    noise = policy.draw_eval_noise(key, (k, *batch_shape), acting_sampler)
    return jnp.moveaxis(noise, 0, len(batch_shape))


def best_of_k_from_noise(policy, params, obs: jax.Array, raw_obs: jax.Array, noise: jax.Array,
                         critic: ExportedCritic) -> jax.Array:
    """(B, d): the candidate with the largest Q among K acting-sampler actions per observation.

    obs: (B, o) normalised for the policy; raw_obs: (B, o) for the critic (normalised inside);
    noise: (B, K, *acting noise); any number of leading batch axes works the same way.
    """
    from diffrl.algos.soft_critic import best_of_k

    batch_ndim = obs.ndim - 1
    noise_k = jnp.moveaxis(noise, batch_ndim, 0)  # (K, *batch, ...): the draws, candidate-major
    return best_of_k(lambda obs_k, _key: policy.eval_action_from_noise(params, obs_k, noise_k, critic.acting_sampler),
                     critic.q, obs, raw_obs, None, noise.shape[batch_ndim])
