"""Multi-layer perceptrons shared by policies, critics and value functions.

``MLP`` follows REPPO's ``normed_activation_layer`` stack (Voelcker et al. 2025,
arXiv 2507.11019, reference ``src/networks/jax_models.py``): each hidden layer is
Dense -> (LayerNorm | RMSNorm | none) -> activation; the output layer is a plain
Dense whose kernel can be scaled down (near-zero initial outputs).

``arch="residual"`` builds pre-LayerNorm residual blocks instead, the stack that scales policies
to the AMDP paper's ~100M parameters (arXiv 2606.22630): an input Dense to the width, then per
block x + Dense(act(Dense_4w(LayerNorm(x)))), a final LayerNorm and the output Dense (He et al.
2016 "Identity mappings"; Xiong et al. 2020 on pre-LN). ``matmul_dtype="bfloat16"`` runs every
Dense in bfloat16 with float32 parameters (and so float32 optimiser state), outputs cast back.
"""
from __future__ import annotations

from typing import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "swish": nn.swish,
    "silu": nn.swish,
    "relu": nn.relu,
    "tanh": jnp.tanh,
    "gelu": nn.gelu,
    "elu": nn.elu,
}
NORMS = ("none", "layer", "rms")
ARCHS = ("mlp", "residual")
MATMUL_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
RESIDUAL_EXPANSION = 4
"""Width of a residual block's inner layer, in units of the block width."""


def matmul_dtype(name: str):
    if name not in MATMUL_DTYPES:
        raise ValueError(f"unknown matmul dtype '{name}'; choose from {sorted(MATMUL_DTYPES)}")
    return MATMUL_DTYPES[name]


def check_architecture(arch: str, hidden: Sequence[int], matmul: str, section: str) -> None:
    """Refuse an unknown architecture or dtype, and residual widths that differ."""
    if arch not in ARCHS:
        raise ValueError(f"{section}.arch must be one of {ARCHS}, got {arch!r}")
    if arch == "residual" and (not hidden or len(set(hidden)) != 1):
        raise ValueError(f"{section}.arch residual needs equal widths in {section}.hidden (one per block), "
                         f"got {tuple(hidden)}")
    if any(h <= 0 for h in hidden):
        raise ValueError(f"{section}.hidden widths must be positive")
    matmul_dtype(matmul)


def mlp_param_count(in_size: int, hidden: Sequence[int], out: int, arch: str = "mlp", norm: str = "none") -> int:
    """Parameters of :class:`MLP` (closed form; ``tests/test_nets.py`` checks it against flax)."""
    if arch == "residual":
        w, e = hidden[0], RESIDUAL_EXPANSION * hidden[0]
        block = 2 * w + (w * e + e) + (e * w + w)  # LayerNorm, inner Dense, outer Dense
        return (in_size * w + w) + len(hidden) * block + 2 * w + (w * out + out)
    sizes = [in_size, *hidden]
    per_norm = {"none": 0, "layer": 2, "rms": 1}[norm]
    return sum(a * b + b + per_norm * b for a, b in zip(sizes[:-1], sizes[1:])) + sizes[-1] * out + out


class Dense(nn.Module):
    """A Dense layer whose input may come as PARTS of its last axis, each at its own batch shape.

    ``Dense(f)((a, b, c))`` equals ``nn.Dense(f)(concatenate([a, b, c], -1))`` with a, b, c broadcast
    to one batch shape, but multiplies each part by its rows of the kernel at the part's own shape
    and broadcasts the sums: a diffusion policy's control net sees one observation per state and
    one time per chain step, so those products are computed once, not for every (state, step) row.
    Same parameters as ``nn.Dense`` ("kernel" (in, f), "bias" (f,), same initialisers); the class is
    named ``Dense`` so that flax names it ``Dense_<i>`` like the layer it stands in for, and
    parameters saved before it existed load unchanged.
    """

    features: int
    dtype: object = None
    kernel_init: Callable = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(self, parts: jax.Array | Sequence[jax.Array]) -> jax.Array:
        parts = (parts,) if isinstance(parts, jax.Array) else tuple(parts)
        sizes = [p.shape[-1] for p in parts]
        kernel = self.param("kernel", self.kernel_init, (sum(sizes), self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), jnp.float32)
        dtype = self.dtype or jnp.result_type(*parts, kernel)
        out, start = None, 0
        for part, size in zip(parts, sizes):  # partial sums in float32, as one dot accumulates
            term = jnp.dot(part.astype(dtype), kernel[start:start + size].astype(dtype),
                           preferred_element_type=jnp.float32)
            out = term if out is None else out + term
            start += size
        return out.astype(dtype) + bias.astype(dtype)


def activation(name: str) -> Callable[[jax.Array], jax.Array]:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation '{name}'; choose from {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def normalisation(name: str) -> Callable[[], nn.Module] | None:
    if name == "layer":
        return nn.LayerNorm
    if name == "rms":
        return nn.RMSNorm
    if name == "none":
        return None
    raise ValueError(f"unknown norm '{name}'; choose from {NORMS}")


class MLP(nn.Module):
    """(..., in) -> (..., out). ``hidden`` widths, then a linear output layer.

    output_scale multiplies the default (lecun-normal) output kernel init;
    1e-8-ish gives near-zero outputs at initialisation.
    """

    hidden: Sequence[int]
    out: int
    act: str = "swish"
    norm: str = "none"
    output_scale: float = 1.0
    activate_output: bool = False
    arch: str = "mlp"
    matmul_dtype: str = "float32"

    @nn.compact
    def __call__(self, x: jax.Array | Sequence[jax.Array]) -> jax.Array:
        """x: (..., in), or a tuple of parts (..., in_i) of the input with broadcastable batch shapes
        (the first layer multiplies each at its own shape, :class:`Dense`)."""
        act = activation(self.act)
        dtype = matmul_dtype(self.matmul_dtype)
        out_dtype = x.dtype if isinstance(x, jax.Array) else jnp.result_type(*x)
        init = nn.initializers.variance_scaling(
            max(self.output_scale, 1e-30) ** 2, "fan_in", "truncated_normal"
        )
        if self.arch == "residual":
            width = self.hidden[0]
            x = Dense(width, dtype=dtype)(x)
            for _ in self.hidden:
                h = nn.LayerNorm(dtype=dtype)(x)
                h = act(nn.Dense(RESIDUAL_EXPANSION * width, dtype=dtype)(h))
                x = x + nn.Dense(width, dtype=dtype)(h)
            x = nn.LayerNorm(dtype=dtype)(x)
        elif self.arch == "mlp":
            norm = normalisation(self.norm)
            for i, width in enumerate(self.hidden):
                x = (Dense if i == 0 else nn.Dense)(width, dtype=dtype)(x)
                if norm is not None:
                    x = norm(dtype=dtype)(x)
                x = act(x)
        else:
            raise ValueError(f"unknown arch '{self.arch}'; choose from {ARCHS}")
        x = (nn.Dense if isinstance(x, jax.Array) else Dense)(self.out, kernel_init=init, dtype=dtype)(x)
        x = x.astype(out_dtype)
        return act(x) if self.activate_output else x
