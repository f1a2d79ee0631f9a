"""Return estimators over on-policy rollouts: GAE and REPPO's soft TD(lambda) targets.

All arrays are time-major ``(T, B)``: T rollout steps of B parallel environments.
Episode ends come as two flags per transition (bool or float):

* ``terminated[t]``: s'_t is a true terminal state, V(s'_t) = 0 (nothing follows);
* ``truncated[t]``: the episode was cut by a time limit (or an auto-reset) after
  transition t. The environment still had a future, so we bootstrap from the value
  of the TRUE final observation s'_t, which the caller evaluates before the reset
  and passes in ``next_values[t]``.

After any episode end the next stored transition belongs to a new episode, so every
multi-step chain (GAE's advantage sum, the lambda-return) is cut there. When both
flags are set we treat the transition as terminated (no bootstrap): a real terminal
state has value zero whatever the clock says.

References:

* GAE: Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized
  Advantage Estimation", arXiv 1506.02438, Eq. 16 (delta_t and the (gamma lam)-sum).
* Soft lambda-returns: Voelcker et al. 2025, "Relative Entropy Pathwise Policy
  Optimization" (REPPO), arXiv 2507.11019, Sec. 4 / reference ``src/jaxrl/reppo.py``:
  G_t = r~_t + gamma [ trunc_t ? V'_t : (1 - term_t)(lam G_{t+1} + (1 - lam) V'_t) ],
  r~_t = r_t - gamma alpha log pi(a'_t | s'_t), V'_t = Q(s'_t, a'_t), a'_t ~ pi(.|s'_t).

Deviation from REPPO's JAX reference: the reference drops truncated transitions from
the critic loss because its auto-reset overwrites s'_t. Our environments expose the
true final observation, so a truncated transition gets the well-defined target
r~_t + gamma V(s'_t) and can be kept (callers may still mask it out of the loss).
REPPO's single-file reference (``src/reppo_mj_playground.py``) bootstraps the same way.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def _is_set(flag: jax.Array) -> jax.Array:
    """Bool view of a bool or {0., 1.} flag array."""
    return jnp.asarray(flag).astype(jnp.float32) > 0.5


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation with correct time-out bootstrapping.

    Args:
      rewards: (T, B) r_t.
      values: (T, B) V(s_t).
      next_values: (T, B) V(s'_t) of the true next observation of transition t
        (the final observation when the episode ended there).
      terminated, truncated: (T, B) episode-end flags of transition t.
      gamma, lam: discount and GAE lambda.

    Returns:
      advantages (T, B): A_t = delta_t + gamma lam (1 - done_t) A_{t+1}, A_T = 0, with
        delta_t = r_t + gamma (1 - terminated_t) V(s'_t) - V(s_t) and
        done_t = terminated_t or truncated_t;
      returns (T, B): advantages + values (the value-function regression target).
    """
    term = _is_set(terminated)
    done = term | _is_set(truncated)
    # A truncated step still bootstraps from V(s'_t) in delta_t; only the chain is cut.
    # ``where`` (not multiplication by flags) keeps non-finite discarded values out.
    deltas = rewards + gamma * jnp.where(term, 0.0, next_values) - values

    def backward(next_advantage, inputs):
        delta, done_t = inputs
        advantage = delta + gamma * lam * jnp.where(done_t, 0.0, next_advantage)
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(rewards[0]), (deltas, done), reverse=True
    )
    return advantages, advantages + values


def soft_rewards(
    rewards: jax.Array,
    next_log_probs: jax.Array,
    terminated: jax.Array,
    gamma: float,
    alpha: float | jax.Array,
) -> jax.Array:
    """(T, B) REPPO's entropy-augmented reward r~_t = r_t - gamma alpha (1 - term_t) log pi(a'_t|s'_t).

    The soft Bellman target is r + gamma (1 - term) [Q(s', a') - alpha log pi(a'|s')]:
    the entropy bonus belongs to the NEXT state's soft value, so at a true terminal
    state (no next state, no next action) it must vanish together with Q. Truncated
    transitions keep it, since s'_t is a real state with a future.

    Args:
      rewards: (T, B) r_t.
      next_log_probs: (T, B) log pi(a'_t | s'_t) (or a diffusion policy's estimate of it)
        of a fresh action sampled at the true next state.
      terminated: (T, B) true-terminal flags.
      gamma: discount; alpha: entropy temperature (scalar, used as a constant).
    """
    alpha = jax.lax.stop_gradient(alpha)
    entropy_bonus = jnp.where(_is_set(terminated), 0.0, next_log_probs)
    return rewards - gamma * alpha * entropy_bonus


def soft_lambda_returns(
    soft_rewards: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
    lam: float,
) -> jax.Array:
    """(T, B) REPPO's soft TD(lambda) critic targets, by a backward ``lax.scan``.

    G_t = r~_t + gamma (1 - term_t) [ V'_t                              if trunc_t
                                      lam G_{t+1} + (1 - lam) V'_t      otherwise ]

    with G_T := V'_{T-1}, i.e. the last step bootstraps one-step (the lambda-chain is
    cut at the rollout end, where G_{t+1} is unknown). Terminated takes precedence over
    truncated (value zero); for transitions with only one of the flags this is exactly
    the formula in REPPO's reference code.

    Args:
      soft_rewards: (T, B) r~_t, see :func:`soft_rewards`.
      next_values: (T, B) V'_t = Q(s'_t, a'_t) at the true next state, with a'_t the
        fresh policy sample used in r~_t.
      terminated, truncated: (T, B) episode-end flags of transition t.
      gamma, lam: discount and TD(lambda) parameter.
    """
    term = _is_set(terminated)
    trunc = _is_set(truncated)

    def backward(next_return, inputs):
        reward, next_value, term_t, trunc_t = inputs
        # (1 - trunc) selects the lambda-mix; at a time-out G_{t+1} belongs to the next
        # episode and must not leak in, so the bracket falls back to V'_t.
        # ``where`` rather than multiplying by the flags, so that a non-finite value on
        # the discarded side (e.g. a diverged next episode) cannot poison the target.
        lambda_mix = lam * next_return + (1.0 - lam) * next_value
        bracket = jnp.where(trunc_t, next_value, lambda_mix)
        ret = reward + gamma * jnp.where(term_t, 0.0, bracket)
        return ret, ret

    _, returns = jax.lax.scan(
        backward, next_values[-1], (soft_rewards, next_values, term, trunc), reverse=True
    )
    return returns
