"""Multi-layer perceptrons shared by policies, critics and value functions.

``MLP`` follows REPPO's ``normed_activation_layer`` stack (Voelcker et al. 2025,
arXiv 2507.11019, reference ``src/networks/jax_models.py``): each hidden layer is
Dense -> (LayerNorm | RMSNorm | none) -> activation; the output layer is a plain
Dense whose kernel can be scaled down (near-zero initial outputs).
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

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = activation(self.act)
        norm = normalisation(self.norm)
        for width in self.hidden:
            x = nn.Dense(width)(x)
            if norm is not None:
                x = norm()(x)
            x = act(x)
        init = nn.initializers.variance_scaling(
            max(self.output_scale, 1e-30) ** 2, "fan_in", "truncated_normal"
        )
        x = nn.Dense(self.out, kernel_init=init)(x)
        return act(x) if self.activate_output else x
