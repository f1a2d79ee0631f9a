"""Deployable policies: every evaluation sampler as an ONNX graph or a serialized ``jax.export``.

Both artifacts are made from an export directory (:mod:`diffrl.artefacts.export`) and compute, for a
batch of B RAW observations,

    action (B, action_size) in [-1, 1] = sampler(normalize(obs), noise)

with the training observation normaliser inside and every random draw as the explicit input
``noise`` (B, *noise_shape) of standard normals (:class:`diffrl.policies.base.ExplicitNoisePolicy`;
samplers without noise, such as a Gaussian's ``mean``, take ``obs`` only). Given the same noise,
the artifact reproduces ``diffrl.load_policy(dir, sampler)`` (up to float rounding), and any
runtime can draw the noise itself (``numpy.random.standard_normal``, ``std::normal_distribution``).
The denoising chains are unrolled in time as a loop node (ONNX ``Loop``, StableHLO ``while``), so
the graph size does not grow with the number of denoising steps.

* ONNX (``policy_<sampler>.onnx``): converted from the jaxpr with jax2onnx (PyPI); inputs named
  ``obs`` and ``noise``, output ``action``, the batch axis dynamic; runs with onnxruntime alone.
* ``jax.export`` (``policy_<sampler>.jaxexport``): StableHLO with a symbolic batch size, loaded
  with ``jax.export.deserialize(bytes).call(obs, noise)``: needs jax, not diffrl.

``deploy.json`` lists the artifacts, their inputs, noise shapes and sha256 checksums.
See docs/deployment.md.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.artefacts.export import load_policy, read_policy_info
from diffrl.maths.normalization import normalize
from diffrl.plumbing.records import atomic_write_json, file_sha256

DEPLOY_FILE = "deploy.json"
FORMATS = ("onnx", "jax")
ONNX_OPSET = 21
"""Opset of the written graphs (onnxruntime >= 1.18 runs it)."""


class DeployError(RuntimeError):
    """A policy cannot be converted (a sampler without explicit noise, a missing package)."""


def deployable(export_dir: str | Path, sampler: str | None = None) -> tuple[Callable, tuple[int, ...] | None, dict]:
    """(fn, noise_shape, info) for one sampler of an export directory.

    ``fn(obs)`` or ``fn(obs, noise)``: obs (B, obs_size) raw, noise (B, *noise_shape); returns the
    (B, action_size) action. Parameters and normaliser statistics are constants of ``fn``.
    """
    act = load_policy(export_dir, sampler)
    policy, params, stats, info = act.policy, act.params, act.obs_stats, act.info
    for method in ("eval_noise_shape", "eval_action_from_noise"):
        if not hasattr(policy, method):
            raise DeployError(f"{type(policy).__name__} has no {method}: its samplers cannot take "
                              "their noise as an input (see diffrl.policies.base.ExplicitNoisePolicy)")
    sampler = act.sampler
    clip, eps = float(info["normalizer"]["clip"]), float(info["normalizer"]["eps"])

    def prepare(obs):
        obs = jnp.asarray(obs, jnp.float32)
        return normalize(stats, obs, clip=clip, eps=eps) if stats is not None else obs

    if act.critic is not None:  # best-of-k: K acting-sampler candidates scored by the exported Q
        from diffrl.artefacts.export_critic import best_of_k_from_noise, best_of_k_noise_shape

        critic = act.critic
        noise_shape = best_of_k_noise_shape(policy, critic.k, critic.acting_sampler)

        def fn(obs, noise):
            raw = jnp.asarray(obs, jnp.float32)
            return best_of_k_from_noise(policy, params, prepare(raw), raw, jnp.asarray(noise, jnp.float32), critic)

        return fn, tuple(noise_shape), {**info, "sampler": sampler}
    noise_shape = policy.eval_noise_shape(sampler)
    if noise_shape is None:
        def fn(obs):
            return policy.eval_action_from_noise(params, prepare(obs), None, sampler)
    else:
        def fn(obs, noise):
            return policy.eval_action_from_noise(params, prepare(obs), jnp.asarray(noise, jnp.float32), sampler)
    return fn, (None if noise_shape is None else tuple(noise_shape)), {**info, "sampler": sampler}


def export_onnx(export_dir: str | Path, sampler: str | None = None, path: str | Path | None = None) -> Path:
    """Write ``policy_<sampler>.onnx`` (or ``path``) and return its path."""
    # jax2onnx imports every plugin module it ships on first use and logs a traceback for each
    # example whose optional package (dm_pix, equinox, ...) is absent: noise, not errors.
    logging.getLogger("jax2onnx").setLevel(logging.ERROR)
    try:
        from jax2onnx import to_onnx
    except ImportError as e:  # pragma: no cover - the pinned set installs it
        raise DeployError("ONNX export needs jax2onnx, onnx and onnxruntime (make setup installs them)") from e
    fn, noise_shape, info = deployable(export_dir, sampler)
    out = Path(path) if path is not None else Path(export_dir) / f"policy_{info['sampler']}.onnx"
    inputs = [("B", int(info["obs_size"]))] + ([] if noise_shape is None else [("B", *noise_shape)])
    names = ["obs"] + ([] if noise_shape is None else ["noise"])
    model = to_onnx(fn, inputs, model_name=f"diffrl_{info['kind']}_{info['sampler']}".replace("-", "_"),
                    opset=ONNX_OPSET, input_names=names, output_names=["action"])
    _prune_unused_initializers(model)
    model = _castlike_to_cast(model)
    for key, value in _metadata(info, noise_shape).items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_bytes(model.SerializeToString())
    tmp.replace(out)
    return out


def _graphs(graph):
    """``graph`` and every subgraph (loop bodies) nested in its nodes."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _graphs(attr.g)
            for sub in attr.graphs:
                yield from _graphs(sub)


def _prune_unused_initializers(model) -> None:
    """Drop constants that no node reads (jax2onnx leaves some in loop bodies; onnxruntime would
    warn about each one on every load)."""
    graphs = list(_graphs(model.graph))
    used = {name for g in graphs for node in g.node for name in node.input}
    used |= {out.name for g in graphs for out in g.output}
    for g in graphs:
        keep = [init for init in g.initializer if init.name in used]
        if len(keep) != len(g.initializer):
            del g.initializer[:]
            g.initializer.extend(keep)


def _castlike_to_cast(model):
    """Replace each CastLike whose target type is known by a plain Cast (onnxruntime has no CPU
    kernel to constant-fold CastLike and warns about each one on every load)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    types = {}
    for g in _graphs(inferred.graph):
        for info in list(g.value_info) + list(g.input) + list(g.output):
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
                types[info.name] = info.type.tensor_type.elem_type
        for init in g.initializer:
            types[init.name] = init.data_type
    for g in _graphs(model.graph):
        for node in g.node:
            if node.op_type == "CastLike" and len(node.input) == 2 and node.input[1] in types:
                target = types[node.input[1]]
                del node.input[1]
                node.op_type = "Cast"
                del node.attribute[:]
                node.attribute.append(onnx.helper.make_attribute("to", target))
    return model


def export_jax(export_dir: str | Path, sampler: str | None = None, path: str | Path | None = None,
               platforms: tuple[str, ...] = ("cpu", "cuda")) -> Path:
    """Write ``policy_<sampler>.jaxexport`` (or ``path``), lowered for ``platforms``."""
    fn, noise_shape, info = deployable(export_dir, sampler)
    out = Path(path) if path is not None else Path(export_dir) / f"policy_{info['sampler']}.jaxexport"
    (batch,) = jax.export.symbolic_shape("B")
    args = [jax.ShapeDtypeStruct((batch, int(info["obs_size"])), jnp.float32)]
    if noise_shape is not None:
        args.append(jax.ShapeDtypeStruct((batch, *noise_shape), jnp.float32))
    exported = jax.export.export(jax.jit(fn), platforms=platforms)(*args)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_bytes(bytes(exported.serialize()))
    tmp.replace(out)
    return out


def load_jax_export(path: str | Path) -> Callable:
    """``call(obs[, noise]) -> action`` from a ``.jaxexport`` file (jax only, no diffrl classes)."""
    return jax.export.deserialize(bytearray(Path(path).read_bytes())).call


def _metadata(info: dict, noise_shape: tuple[int, ...] | None) -> dict[str, str]:
    return {
        "diffrl.kind": info["kind"],
        "diffrl.sampler": info["sampler"],
        "diffrl.obs_size": str(info["obs_size"]),
        "diffrl.action_size": str(info["action_size"]),
        "diffrl.noise_shape": json.dumps(None if noise_shape is None else list(noise_shape)),
        "diffrl.inputs": "obs: (B, obs_size) raw float32 observations (normalised inside); "
                         "noise: (B, *noise_shape) standard normals (absent when noise_shape is null)",
        "diffrl.output": "action: (B, action_size) in [-1, 1]; rescale with diffrl.action_low / action_high",
        "diffrl.action_low": json.dumps(info.get("extra", {}).get("action_low")),
        "diffrl.action_high": json.dumps(info.get("extra", {}).get("action_high")),
        "diffrl.version": str(info.get("versions", {}).get("diffrl", "")),
    }


def write_deployables(export_dir: str | Path, formats: tuple[str, ...] = FORMATS,
                      samplers: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Convert every sampler (or ``samplers``) of an export directory to every format in
    ``formats``; write and return the ``deploy.json`` record."""
    export_dir = Path(export_dir)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown format(s) {unknown}; choose from {FORMATS}")
    from diffrl.artefacts.export_critic import BEST_OF_K, has_critic

    info = read_policy_info(export_dir)
    offered = list(info["samplers"]) + ([BEST_OF_K] if has_critic(export_dir) and BEST_OF_K not in info["samplers"]
                                        else [])
    samplers = tuple(samplers or offered)
    record_path = export_dir / DEPLOY_FILE
    record = json.loads(record_path.read_text()) if record_path.exists() else {"artifacts": {}}
    for sampler in samplers:
        _, noise_shape, _ = deployable(export_dir, sampler)
        entry = record["artifacts"].setdefault(sampler, {})
        entry["noise_shape"] = None if noise_shape is None else list(noise_shape)
        entry["inputs"] = ["obs"] + ([] if noise_shape is None else ["noise"])
        for fmt in formats:
            path = export_onnx(export_dir, sampler) if fmt == "onnx" else export_jax(export_dir, sampler)
            entry[fmt] = {"file": path.name, "sha256": file_sha256(path)}
    record.update(obs_size=info["obs_size"], action_size=info["action_size"], kind=info["kind"],
                  onnx_opset=ONNX_OPSET)
    atomic_write_json(record_path, record)
    return record


def draw_noise(noise_shape: tuple[int, ...] | None, batch: int, seed: int = 0) -> np.ndarray | None:
    """Standard normals (batch, *noise_shape) from numpy (what a deployment would draw)."""
    if noise_shape is None:
        return None
    return np.random.default_rng(seed).standard_normal((batch, *noise_shape)).astype(np.float32)
