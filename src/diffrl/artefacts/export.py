"""Export a trained policy as a small self-contained directory, and load it back as ``act``.

Layout of an export directory::

    policy.json     kind, policy config fields, sizes, sampler, normaliser settings,
                    format version, library versions, sha256 of the array files, extra
    params.npz      policy parameters, flattened: "params/MLP_0/Dense_0/kernel" -> array
    obs_stats.npz   observation normaliser statistics (mean, var, count)

``load_policy(dir)(obs, key)`` maps RAW observations ``(..., obs_size)`` to actions
``(..., action_size)`` in [-1, 1] (the policy's action space; rescale to the
simulator's bounds with ``policy.json``'s ``extra`` or the env's ``RescaleAction``).
The normaliser the policy was trained with (``diffrl.maths.normalization.normalize``) is
applied inside. Loading needs only numpy, JSON and the policy class: no environment,
no algorithm, no training code; arrays are read with ``allow_pickle=False``.

Exports written before a policy renamed a sampler or a config field load with the new names
(a warning says so; the computation is the same): a stored default sampler is mapped through the
policy's ``renamed_samplers`` and stored config fields through the config class's
``renamed_fields`` (TruDi: "ode" -> "reversal-ode", "ode-c" -> "noise-free", ``ode_coef`` ->
``noise_free_coef``). An old sampler name passed explicitly is refused, naming the new one. Fields
that have since moved to the training algorithm's settings (the config class's ``moved_fields``: the
chain's and the drift's trust region, ``diffrl.config.MOVED_FIELDS``) are dropped with a warning:
acting never read them.

The policy object is rebuilt from ``kind`` + config through :data:`POLICY_KINDS`, a
registry of (module, policy class, config class) names imported lazily, so new policy
families plug in with :func:`register_policy_kind`. The parameter tree's structure is
taken from ``jax.eval_shape(policy.init, ...)`` (nothing is computed) and every stored
array is checked against it by path, shape and dtype. The config and array codecs (and
:class:`ExportError`) are :mod:`diffrl.plumbing.records`'s, the ones run records and checkpoints use.
"""
from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp

from diffrl.maths.normalization import RunningStats, normalize
from diffrl.policies.base import renamed_sampler_note
from diffrl.plumbing.machine import library_versions
from diffrl.plumbing.records import (ExportError, check_params, config_from_json, config_to_json, flatten_params,
                            load_stats, load_tree, npz_bytes, sha256, stats_arrays, write_bytes)

EXPORT_FORMAT = 1
"""Version of the export layout; loading a different version is refused."""

POLICY_FILE = "policy.json"
PARAMS_FILE = "params.npz"
STATS_FILE = "obs_stats.npz"

POLICY_KINDS: dict[str, tuple[str, str, str]] = {
    "gaussian": ("diffrl.policies.gaussian", "GaussianPolicy", "GaussianPolicyConfig"),
    "diffusion": ("diffrl.policies.diffusion", "DiffusionPolicy", "DiffusionPolicyConfig"),
    "adjoint": ("diffrl.policies.adjoint", "AdjointPolicy", "AdjointPolicyConfig"),
    "flow": ("diffrl.policies.flow", "FlowPolicy", "FlowPolicyConfig"),
}
"""kind -> (module, policy class name, config class name); the policy is built as
``Policy(Config(**fields), action_size)``."""


def register_policy_kind(kind: str, module: str, policy_class: str, config_class: str) -> None:
    """Make ``kind`` exportable/loadable; the module is imported only when needed."""
    POLICY_KINDS[kind] = (module, policy_class, config_class)


def _kind_classes(kind: str) -> tuple[type, type]:
    if kind not in POLICY_KINDS:
        raise ExportError(f"unknown policy kind {kind!r}; known: {', '.join(POLICY_KINDS)} "
                          "(add one with diffrl.artefacts.export.register_policy_kind)")
    module, policy_name, config_name = POLICY_KINDS[kind]
    mod = importlib.import_module(module)
    return getattr(mod, policy_name), getattr(mod, config_name)


def policy_kind_of(policy: Any) -> str:
    """The registered kind whose policy class is ``type(policy)`` (no imports needed)."""
    cls = type(policy)
    for kind, (module, policy_name, _) in POLICY_KINDS.items():
        if cls.__module__ == module and cls.__name__ == policy_name:
            return kind
    raise ExportError(f"{cls.__module__}.{cls.__name__} is not a registered policy kind "
                      f"({', '.join(POLICY_KINDS)}); use diffrl.artefacts.export.register_policy_kind")


# ----------------------------------------------------------------------------- export
def export_policy(
    out_dir: str | Path,
    policy_kind: str,
    policy_config: Any,
    action_size: int,
    obs_size: int,
    params: Any,
    obs_stats: RunningStats | None,
    normalize_obs: bool,
    obs_clip: float,
    sampler: str,
    extra: dict | None = None,
    obs_norm_eps: float = 1e-8,
) -> Path:
    """Write the export directory ``out_dir`` (created if needed) and return it.

    Args:
      policy_kind: a key of :data:`POLICY_KINDS` ("gaussian", "diffusion", "adjoint", "flow").
      policy_config: the policy's config dataclass.
      params: parameters of ONE seed (no seeds axis).
      obs_stats: the actor observation statistics (one seed); may be None when
        ``normalize_obs`` is False.
      normalize_obs, obs_clip, obs_norm_eps: as in ``TrainConfig``; the exported ``act``
        applies them exactly as training did.
      sampler: default evaluation sampler (must be one of the policy's ``samplers``).
      extra: JSON-able facts stored verbatim (env name, action bounds, eval return...).
    """
    policy_class, config_class = _kind_classes(policy_kind)
    if not isinstance(policy_config, config_class):
        raise TypeError(f"policy kind {policy_kind!r} needs a {config_class.__name__}, "
                        f"got {type(policy_config).__name__}")
    policy = policy_class(policy_config, int(action_size))
    if sampler not in policy.samplers:
        raise ValueError(f"sampler {sampler!r} is not one of {policy_kind}'s {policy.samplers}"
                         + renamed_sampler_note([sampler], policy))
    template = _param_shapes(policy, int(obs_size))
    check_params(flatten_params(params), template, "params to export")
    if normalize_obs and obs_stats is None:
        raise ValueError("normalize_obs=True needs obs_stats")

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {PARAMS_FILE: npz_bytes(flatten_params(params))}
    if obs_stats is not None:
        stats = stats_arrays(obs_stats)
        if stats["mean"].shape != (obs_size,):
            raise ValueError(f"obs_stats.mean has shape {stats['mean'].shape}, expected ({obs_size},) "
                             "(pass ONE seed's statistics)")
        files[STATS_FILE] = npz_bytes(stats)
    for name, data in files.items():
        write_bytes(out / name, data)
    record = {
        "format": EXPORT_FORMAT,
        "kind": policy_kind,
        "config": config_to_json(policy_config),
        "action_size": int(action_size),
        "obs_size": int(obs_size),
        "sampler": sampler,
        "samplers": list(policy.samplers),
        "normalizer": {"enabled": bool(normalize_obs), "clip": float(obs_clip), "eps": float(obs_norm_eps)},
        "action_space": "[-1, 1] (the policy's; rescale to the simulator's bounds)",
        "files": {name: sha256(data) for name, data in files.items()},
        "versions": library_versions(),
        "extra": json.loads(json.dumps(extra or {}, default=str)),
    }
    write_bytes(out / POLICY_FILE, json.dumps(record, indent=2).encode())  # last: marks completion
    return out


POLICY_PARAM_FIELDS = ("policy_params", "actor_params")
"""Names under which algorithm states keep the policy parameters (PPO, REPPO family)."""


def export_from_train_state(
    out_dir: str | Path,
    algo: Any,
    train_state: Any,
    config: Any,
    seed: int = 0,
    sampler: str | None = None,
    extra: dict | None = None,
) -> Path:
    """Export seed ``seed`` of a trainer's (seeds-batched) train state.

    ``algo`` is the algorithm object (``algo.policy``), ``train_state`` has ``.algo``
    (with one of :data:`POLICY_PARAM_FIELDS`) and ``.obs_stats``, every leaf with a
    leading seeds axis; ``config`` is the ``TrainConfig`` (normaliser settings, env).
    ``sampler`` defaults to the policy's first. An algorithm with a learned Q and a best-of-K
    sampler (REPPO, TruDi, AMDP) also exports its critic (:mod:`diffrl.artefacts.export_critic`), unless the
    critic sees privileged observations the deployed policy will not have.
    """
    policy = algo.policy
    field = next((f for f in POLICY_PARAM_FIELDS if hasattr(train_state.algo, f)), None)
    if field is None:
        raise ExportError(f"{type(train_state.algo).__name__} has none of {POLICY_PARAM_FIELDS}")
    one_seed = lambda tree: jax.tree.map(lambda x: x[seed], tree)  # noqa: E731
    params = one_seed(getattr(train_state.algo, field))
    stats = one_seed(train_state.obs_stats)
    sampler = sampler or policy.samplers[0]
    critic_params = getattr(train_state.algo, "critic_params", None)
    best_of_k = getattr(getattr(algo, "c", None), "best_of_k", None)
    with_critic = (getattr(algo, "exports_critic", False) and critic_params is not None and best_of_k
                   and not getattr(config, "asymmetric_critic", False) and hasattr(policy, "acting_sampler"))
    if sampler == "best-of-k" and not with_critic:
        raise ExportError(f"best-of-k cannot be exported for this {config.algo} run: it needs a categorical "
                          "critic (REPPO, TruDi, AMDP; the off-policy CrossQ critic is not in the export format) "
                          "that sees the policy's observation (runs with --asymmetric-critic train it on "
                          "privileged state)")
    out = export_policy(
        out_dir, policy_kind_of(policy), policy.config, policy.action_size,
        int(stats.mean.shape[-1]), params, stats, config.normalize_obs, config.obs_clip,
        policy.samplers[0] if sampler == "best-of-k" else sampler,
        {"env": config.env, "algo": config.algo, "seed": seed, "env_backend": config.env_backend,
         "episode_length": config.episode_length, **(extra or {})},
        obs_norm_eps=config.obs_norm_eps)
    if with_critic:
        from diffrl.artefacts.export_critic import export_critic

        export_critic(out, config.critic, one_seed(critic_params), one_seed(train_state.critic_obs_stats),
                      int(stats.mean.shape[-1]), policy.action_size, best_of_k, policy.acting_sampler)
        if sampler == "best-of-k":  # the stored default; policy.json is rewritten last, as it was written
            record = json.loads((out / POLICY_FILE).read_text())
            record["sampler"], record["samplers"] = sampler, [*record["samplers"], sampler]
            write_bytes(out / POLICY_FILE, json.dumps(record, indent=2).encode())
    return out


def _param_shapes(policy: Any, obs_size: int) -> Any:
    """Structure, shapes and dtypes of ``policy.init`` (traced, nothing computed)."""
    return jax.eval_shape(lambda key: policy.init(key, obs_size), jax.random.PRNGKey(0))


# ----------------------------------------------------------------------------- load
def read_policy_info(export_dir: str | Path) -> dict:
    """The parsed ``policy.json`` (format checked)."""
    path = Path(export_dir) / POLICY_FILE
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ExportError(f"cannot read {path} ({e})") from e
    if info.get("format") != EXPORT_FORMAT:
        raise ExportError(
            f"{path} has export format version {info.get('format')!r}; this diffrl reads "
            f"format {EXPORT_FORMAT}. Load it with the diffrl version that wrote it "
            f"({info.get('versions', {}).get('diffrl', 'unknown')}).")
    return info


def load_policy(export_dir: str | Path, sampler: str | None = None) -> Callable:
    """``act(obs, key) -> action`` from an export directory (jittable, vmappable).

    obs: (..., obs_size) RAW observations; key: one PRNG key; action: (..., action_size)
    in [-1, 1]. ``sampler`` overrides the stored default. The returned function carries
    ``act.info`` (policy.json), ``act.policy``, ``act.params``, ``act.obs_stats`` and
    ``act.sampler``. A stored default the policy has since renamed is mapped to its new name
    with a warning (an old name passed as ``sampler`` is refused).
    """
    export_dir = Path(export_dir)
    info = read_policy_info(export_dir)
    policy_class, config_class = _kind_classes(info["kind"])
    config = config_from_json(config_class, info["config"])
    policy = policy_class(config, int(info["action_size"]))
    if sampler is None:
        sampler = info["sampler"]
        renamed = getattr(policy, "renamed_samplers", {})
        if sampler in renamed:  # written before the rename: same computation, new name
            warnings.warn(f"{export_dir}: stored sampler {sampler!r} is now called {renamed[sampler]!r}",
                          stacklevel=2)
            sampler = renamed[sampler]
    from diffrl.artefacts.export_critic import BEST_OF_K, has_critic

    if sampler not in policy.samplers and not (sampler == BEST_OF_K and has_critic(export_dir)):
        offered = policy.samplers + ((BEST_OF_K,) if has_critic(export_dir) else ())
        raise ValueError(f"sampler {sampler!r} is not one of this export's {offered}"
                         + (" (best-of-k needs the critic, which runs with an asymmetric critic do not "
                            "export)" if sampler == BEST_OF_K else "")
                         + renamed_sampler_note([sampler], policy))

    params = load_tree(export_dir / PARAMS_FILE, info["files"][PARAMS_FILE],
                       _param_shapes(policy, int(info["obs_size"])), POLICY_FILE)
    norm = info["normalizer"]
    stats = load_stats(export_dir / STATS_FILE, info["files"][STATS_FILE], POLICY_FILE) if norm["enabled"] else None
    clip, eps = float(norm["clip"]), float(norm["eps"])

    critic = None
    if sampler == BEST_OF_K:
        from diffrl.artefacts.export_critic import ExportedCritic

        critic = ExportedCritic(export_dir, norm)

    def act(obs: jax.Array, key: jax.Array) -> jax.Array:
        raw = jnp.asarray(obs, jnp.float32)
        obs = normalize(stats, raw, clip=clip, eps=eps) if stats is not None else raw
        if critic is not None:
            from diffrl.artefacts.export_critic import best_of_k_from_noise, draw_best_of_k_noise

            noise = draw_best_of_k_noise(policy, key, obs.shape[:-1], critic.k, critic.acting_sampler)
            return best_of_k_from_noise(policy, params, obs, raw, noise, critic)
        return policy.eval_action(params, obs, key, sampler)

    act.info, act.policy, act.params, act.obs_stats, act.sampler = info, policy, params, stats, sampler
    act.critic = critic
    return act
