"""REPPO's categorical (HL-Gauss) Q-function with a self-predictive auxiliary head.

Voelcker et al. 2025, "Relative Entropy Pathwise Policy Optimization", arXiv
2507.11019, Sec. 4 and reference ``src/networks/jax_models.py``
(``CategoricalCriticNetwork``); see the REPPO paper (arXiv 2507.11019) and its reference code (github.com/cvoelcker/reppo).

Network (all hidden layers Dense -> RMSNorm|LayerNorm -> swish, output layers plain):

* encoder: concat(obs, action) -> features phi (hidden,), ``encoder_layers`` layers,
  the last one linear (phi is not activated, as in the main reference);
* Q head: swish(phi) -> ``head_layers`` layers -> num_bins logits, plus 40 z, where z
  is a trainable vector initialised to the HL-Gauss encoding of ``init_value``. The
  40 z prior makes the initial value distribution a sharp peak at ``init_value``
  whatever the random head outputs, so early targets are sane;
  Q(s, a) = sum_i softmax(logits)_i c_i over the bin centres c;
* auxiliary head: swish(phi) -> ``head_layers`` layers -> (1 + hidden): a predicted
  reward and predicted next-state features (self-predictive representation loss).

Loss (``critic_loss``), per sample, averaged over ``mask``:
  CE(softmax(logits(s, a)), HL-Gauss(G)) + aux_loss_weight * L_aux,
  L_aux = mean over the 1 + hidden outputs of (1 - term) [(r_hat - r)^2, (phi_hat' - sg(phi'))^2],
where phi' = phi(s', a') was stored at collection time (a fixed target).
"""
from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from diffrl.critics.hl_gauss import cross_entropy, expectation, hl_gauss_encode
from diffrl.nets.mlp import MLP

# REPPO multiplies the trainable HL-Gauss prior by 40 before adding it to the logits.
PRIOR_LOGIT_SCALE = 40.0


@dataclasses.dataclass(frozen=True)
class CriticConfig:
    """Hyper-parameters of :class:`CategoricalCritic` and :func:`critic_loss`."""

    hidden: int = 512
    """Width of every hidden layer and of the feature vector phi (1024 for humanoids)."""
    encoder_layers: int = 2
    """Dense layers of the encoder (obs, action) -> phi; the last is linear."""
    head_layers: int = 2
    """Dense layers of the Q head and of the auxiliary head; the last is linear."""
    num_bins: int = 151
    """Number of histogram bins of the categorical value distribution."""
    vmin: float = 0.0
    """Value of the lowest bin centre; soft returns below are clipped (per benchmark)."""
    vmax: float = 150.0
    """Value of the highest bin centre; soft returns above are clipped (per benchmark)."""
    norm: str = "rms"
    """Normalisation of hidden layers: "rms" (REPPO main code), "layer" (single-file
    reference) or "none" (ablation)."""
    aux_loss_weight: float = 1.0
    """Weight of the self-predictive (reward, next features) loss; 0 disables it."""
    init_value: float = 0.0
    """Value the initial distribution is peaked at (clipped into [vmin, vmax])."""

    def __post_init__(self):
        if self.encoder_layers < 1 or self.head_layers < 1:
            raise ValueError("encoder_layers and head_layers must be >= 1")
        if self.num_bins < 2 or not self.vmax > self.vmin:
            raise ValueError(f"need num_bins >= 2 and vmax > vmin, got {self}")


@struct.dataclass
class CriticOutput:
    """Everything one forward pass of :class:`CategoricalCritic` computes.

    logits: (..., num_bins); q_value: (...,); features: (..., hidden) phi(s, a);
    reward_pred: (...,); next_features_pred: (..., hidden).
    """

    logits: jax.Array
    q_value: jax.Array
    features: jax.Array
    reward_pred: jax.Array
    next_features_pred: jax.Array


class CategoricalCritic(nn.Module):
    """Q(s, a) as a histogram over ``config.num_bins`` fixed values.

    Inputs obs (..., o) and action (..., d) with any matching leading axes. Use
    ``apply(params, obs, action)`` for a :class:`CriticOutput`, or one of the methods
    via ``apply(params, obs, action, method=CategoricalCritic.q_value)``.
    """

    config: CriticConfig

    def setup(self):
        c = self.config
        self.encoder = MLP(hidden=(c.hidden,) * (c.encoder_layers - 1), out=c.hidden, norm=c.norm)
        self.q_head = MLP(hidden=(c.hidden,) * (c.head_layers - 1), out=c.num_bins, norm=c.norm)
        self.aux_head = MLP(hidden=(c.hidden,) * (c.head_layers - 1), out=1 + c.hidden, norm=c.norm)
        init_value = min(max(c.init_value, c.vmin), c.vmax)
        self.value_prior = self.param(
            "value_prior",
            lambda _key: hl_gauss_encode(jnp.asarray(init_value), c.vmin, c.vmax, c.num_bins),
        )

    def features(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        """(..., hidden) phi(s, a)."""
        return self.encoder(jnp.concatenate([obs, action], axis=-1))

    def logits_from_features(self, features: jax.Array) -> jax.Array:
        """(..., hidden) -> (..., num_bins)."""
        return self.q_head(nn.swish(features)) + PRIOR_LOGIT_SCALE * self.value_prior

    def aux_from_features(self, features: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(..., hidden) -> (reward_pred (...,), next_features_pred (..., hidden))."""
        out = self.aux_head(nn.swish(features))
        return out[..., 0], out[..., 1:]

    def logits(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        """(..., num_bins) logits of the value histogram."""
        return self.logits_from_features(self.features(obs, action))

    def q_value(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        """(...,) expected value of the histogram."""
        c = self.config
        return expectation(self.logits(obs, action), c.vmin, c.vmax, from_logits=True)

    def aux_prediction(self, obs: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(reward_pred (...,), next_features_pred (..., hidden))."""
        return self.aux_from_features(self.features(obs, action))

    def __call__(self, obs: jax.Array, action: jax.Array) -> CriticOutput:
        c = self.config
        features = self.features(obs, action)
        logits = self.logits_from_features(features)
        reward_pred, next_features_pred = self.aux_from_features(features)
        return CriticOutput(
            logits=logits,
            q_value=expectation(logits, c.vmin, c.vmax, from_logits=True),
            features=features,
            reward_pred=reward_pred,
            next_features_pred=next_features_pred,
        )


def _masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
    # where, not multiplication: a non-finite value in an excluded sample stays excluded.
    return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.maximum(jnp.sum(mask), 1.0)


def critic_loss(
    critic: CategoricalCritic,
    params,
    obs: jax.Array,
    action: jax.Array,
    target_returns: jax.Array,
    next_features: jax.Array,
    reward: jax.Array,
    terminated: jax.Array,
    mask: jax.Array,
    config: CriticConfig,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """REPPO's critic loss: HL-Gauss cross-entropy + self-predictive auxiliary loss.

    Args:
      critic, params: the module and its parameters (differentiated).
      obs: (N, o); action: (N, d) the stored transition (s, a).
      target_returns: (N,) soft lambda-returns G (fixed targets).
      next_features: (N, hidden) phi(s', a') stored at collection time (stop-gradient).
      reward: (N,) r (the plain reward the aux head predicts).
      terminated: (N,) true-terminal flags: no next state, so no aux target.
      mask: (N,) which samples count (e.g. 0 for dropped truncations / padding).
      config: loss settings (support and ``aux_loss_weight``); its support must match
        ``critic.config``.

    Returns:
      (loss scalar, metrics): critic_loss (total), ce_loss, aux_loss, q_mse (monitoring
      MSE between Q and G), q_mean, all means over the masked samples.
    """
    net = critic.config
    if (net.vmin, net.vmax, net.num_bins, net.hidden) != (
        config.vmin, config.vmax, config.num_bins, config.hidden
    ):
        raise ValueError("critic_loss config support/width differs from the critic's config")
    mask = jnp.asarray(mask).astype(jnp.float32) > 0.5
    alive = 1.0 - (jnp.asarray(terminated).astype(jnp.float32) > 0.5)

    out = critic.apply(params, obs, action)
    target_probs = hl_gauss_encode(
        jax.lax.stop_gradient(target_returns), config.vmin, config.vmax, config.num_bins
    )
    ce = cross_entropy(out.logits, target_probs)

    next_features = jax.lax.stop_gradient(next_features)
    feature_sq = jnp.square(out.next_features_pred - next_features)
    reward_sq = jnp.square(out.reward_pred - reward)
    # mean over the 1 + hidden predicted outputs (reward and every feature alike).
    aux = alive * (reward_sq + jnp.sum(feature_sq, axis=-1)) / (1 + net.hidden)

    per_sample = ce + config.aux_loss_weight * aux
    loss = _masked_mean(per_sample, mask)
    q = out.q_value
    metrics = {
        "critic_loss": loss,
        "ce_loss": _masked_mean(ce, mask),
        "aux_loss": _masked_mean(aux, mask),
        "q_mse": _masked_mean(jnp.square(q - target_returns), mask),
        "q_mean": _masked_mean(q, mask),
    }
    return loss, jax.lax.stop_gradient(metrics)
