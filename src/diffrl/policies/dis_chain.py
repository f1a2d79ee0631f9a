"""Pure math of the DIME / DIS denoising chain used by TruDi's diffusion actor.

DIME (Celik et al. 2025, arXiv 2502.02316) parameterises the policy as a discretised,
controlled, time-reversed overdamped Langevin chain ("DIS"); TruDi (Le et al. 2026,
arXiv 2606.15260) keeps that chain inside REPPO and puts the trust region on the whole
path. The equation labels (E1)-(E12) are this package's own (cited across diffrl). Step
index n = 0..N-1 runs from the prior (n = 0) to the action (n = N); ``x`` is the
pre-squash action, shape (..., d).

(E1) prior          p0 = N(0, sigma0^2 I),  grad log p0(x) = -x / sigma0^2
(E2) step sizes     eta_n = dt_n * sigma^2,  dt_n = dt * sched(n),  sigma^2 = 1 / friction
(E3) schedule       sched(n) = (1 - m) cos^2(pi/2 (1 + s - t_n) / (1 + s)) + m,  t_n = (N - n) / N
(E4) forward  F_n   x_{n+1} = x_n + eta_n (grad log p0(x_n) + f(x_n, n)) + sqrt(2 eta_n) eps_n
(E5) backward B_n   q(x_n | x_{n+1}) = N(x_{n+1} + eta_n grad log p0(x_{n+1}), 2 eta_n I)
(E6) log weight     log w = sum_n [log B_n(x_n | x_{n+1}) - log F_n(x_{n+1} | x_n)]
(E7) pseudo log-prob  ell = log p0(x_0) - log w - log|J_squash(x_N)|, with
     E_F[ell] = E[log pi(a)] + E KL(F(x_{0:N-1} | x_N) || B(x_{0:N-1} | x_N)) >= E[log pi(a)]
(E8) trajectory KL  KL(P_old || P_new) = sum_n E_{x_n ~ P_old}[KL(F_old,n(.|x_n) || F_new,n(.|x_n))]
     >= KL(pi_old(a) || pi_new(a))  (chain rule + data processing; both chains start at p0)
(E9) Gaussian KL per dim  0.5 [log(v2/v1) + (v1 + (m1 - m2)^2) / v2 - 1]

The action KL's estimate (E12) is :mod:`diffrl.policies.dis_action_kl`; the deterministic evaluation
samplers (E10), (E11) are :mod:`diffrl.policies.dis_samplers`.

The control ``f`` is injected as ``control_fn(x, n) -> (..., d)`` (x: (..., d), n: int32
scalar), so these functions run unchanged with a neural network or, in tests, with a
linear control for which the whole chain is Gaussian and every quantity has a closed form.
Noise for one chain is one array ``(N + 1, ..., d)``: row 0 draws x_0, row n + 1 is eps_n,
so a path is exactly replayable from its noise.
"""
from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

ControlFn = Callable[[jax.Array, jax.Array], jax.Array]
SQUASHES = ("tanh", "erf")
_LOG_2PI = math.log(2.0 * math.pi)


def cosine_schedule(num_steps: int, s: float = 0.008, min_value: float = 0.001) -> jax.Array:
    """(N,) multipliers of the base dt, eq. (E3): large steps early, small near the action."""
    n = jnp.arange(num_steps, dtype=jnp.float32)
    t = (num_steps - n) / num_steps
    return (1.0 - min_value) * jnp.cos(0.5 * jnp.pi * (1.0 + s - t) / (1.0 + s)) ** 2 + min_value


def step_sizes(dt: jax.Array, friction: jax.Array, schedule: jax.Array) -> jax.Array:
    """eta_n, eq. (E2). dt: () or (N,); friction: (d,) (sigma^2 = 1/friction); schedule: (N,).

    Returns (N, d).
    """
    dt_n = jnp.broadcast_to(dt, schedule.shape) * schedule
    return dt_n[:, None] / friction[None, :]


def prior_log_prob(x: jax.Array, sigma0: float) -> jax.Array:
    """(..., d) -> (...,): log N(x; 0, sigma0^2 I), eq. (E1)."""
    var = sigma0**2
    return -0.5 * jnp.sum(x**2 / var + _LOG_2PI + math.log(var), axis=-1)


def prior_score(x: jax.Array, sigma0: float) -> jax.Array:
    """grad log p0(x) = -x / sigma0^2, eq. (E1)."""
    return -x / sigma0**2


def diag_gaussian_log_prob(x: jax.Array, mean: jax.Array, var: jax.Array) -> jax.Array:
    """(..., d) -> (...,): log N(x; mean, diag(var)); var broadcastable to x."""
    return -0.5 * jnp.sum((x - mean) ** 2 / var + _LOG_2PI + jnp.log(var), axis=-1)


def gaussian_kl_diag(mean_p: jax.Array, var_p: jax.Array, mean_q: jax.Array, var_q: jax.Array) -> jax.Array:
    """(..., d) -> (...,): KL(N(mean_p, var_p) || N(mean_q, var_q)), eq. (E9), summed over d.

    Keeps the log-variance terms, so it is exact when old and new step sizes differ
    (learned dt / friction); the public reference code drops them.
    """
    ratio = var_p / var_q
    per_dim = 0.5 * (-jnp.log(ratio) + ratio + (mean_p - mean_q) ** 2 / var_q - 1.0)
    return jnp.sum(per_dim, axis=-1)


def step_variance(eta: jax.Array, var_floor: float = 0.0) -> jax.Array:
    """Variance 2 eta_n of a step (E4), raised to at least ``var_floor`` when that is > 0 (DPPO's
    floor on the denoising noise)."""
    return jnp.maximum(2.0 * eta, var_floor) if var_floor > 0 else 2.0 * eta


def forward_mean(x: jax.Array, control: jax.Array, eta: jax.Array, sigma0: float) -> jax.Array:
    """Mean of F_n(. | x_n), eq. (E4): x + eta (grad log p0(x) + f)."""
    return x + eta * (prior_score(x, sigma0) + control)


def backward_mean(x_next: jax.Array, eta: jax.Array, sigma0: float) -> jax.Array:
    """Mean of B_n(. | x_{n+1}), eq. (E5): x_{n+1} + eta grad log p0(x_{n+1})."""
    return x_next + eta * prior_score(x_next, sigma0)


def draw_noise(key_noise: jax.Array, num_steps: int, batch_shape: tuple[int, ...], action_size: int) -> jax.Array:
    """(N + 1, *batch_shape, d) standard normals from ONE key: row 0 for x_0, row n+1 is eps_n."""
    return jax.random.normal(key_noise, (num_steps + 1, *batch_shape, action_size), jnp.float32)


def squash(x: jax.Array, kind: str, erf_scale: float) -> jax.Array:
    """Pre-squash x (..., d) -> action in [-1, 1]: tanh(x) or erf(k x) with k = erf_scale."""
    if kind == "tanh":
        return jnp.tanh(x)
    if kind == "erf":
        return jax.scipy.special.erf(erf_scale * x)
    raise ValueError(f"unknown squash '{kind}'; choose from {SQUASHES}")


def squash_log_det(x: jax.Array, kind: str, erf_scale: float) -> jax.Array:
    """(..., d) -> (...,): log|det d squash / dx|, computed without forming 1 - a^2.

    tanh: log(1 - tanh^2 x) = 2 (log 2 - x - softplus(-2x)) (exact, finite for any x).
    erf:  log(2k / sqrt(pi)) - k^2 x^2.
    """
    if kind == "tanh":
        per_dim = 2.0 * (math.log(2.0) - x - jax.nn.softplus(-2.0 * x))
    elif kind == "erf":
        per_dim = math.log(2.0 * erf_scale / math.sqrt(math.pi)) - (erf_scale * x) ** 2
    else:
        raise ValueError(f"unknown squash '{kind}'; choose from {SQUASHES}")
    return jnp.sum(per_dim, axis=-1)


@struct.dataclass
class ChainSample:
    """One simulated chain per batch element (all differentiable through the reparameterisation).

    x0: (..., d) initial state; x_final: (..., d) pre-squash x_N; log_weight: (...,) log w, eq. (E6);
    path: (N + 1, ..., d) states x_0..x_N, or None unless requested.
    """

    x0: jax.Array
    x_final: jax.Array
    log_weight: jax.Array
    path: jax.Array | None = None


def sample_chain(
    control_fn: ControlFn, eta: jax.Array, sigma0: float, noise: jax.Array, return_path: bool = False,
    var_floor: float = 0.0,
) -> ChainSample:
    """Simulate eqs. (E4) with the given noise and accumulate log w, eq. (E6).

    eta: (N, d) (or (N, 1)); noise: (N + 1, ..., d) from :func:`draw_noise`.
    log F_n is evaluated through eps_n (x_{n+1} - mean = sqrt(2 eta) eps exactly), which is
    the same value and total derivative as the density formula but without cancellation.
    ``var_floor`` > 0 raises each step's variance 2 eta_n to at least that (DPPO's floor on the
    denoising noise; the log weight then uses the floored variance for both F_n and B_n).
    """
    x0 = sigma0 * noise[0]
    steps = jnp.arange(eta.shape[0], dtype=jnp.int32)

    def step(x, inputs):
        n, eta_n, eps_n = inputs
        var = step_variance(eta_n, var_floor)
        x_next = forward_mean(x, control_fn(x, n), eta_n, sigma0) + jnp.sqrt(var) * eps_n
        log_forward = -0.5 * jnp.sum(eps_n**2 + _LOG_2PI + jnp.log(var), axis=-1)
        log_backward = diag_gaussian_log_prob(x, backward_mean(x_next, eta_n, sigma0), var)
        return x_next, (log_backward - log_forward, x_next if return_path else None)

    x_final, (log_ratios, states) = jax.lax.scan(step, x0, (steps, eta, noise[1:]))
    path = jnp.concatenate([x0[None], states], axis=0) if return_path else None
    return ChainSample(x0=x0, x_final=x_final, log_weight=jnp.sum(log_ratios, axis=0), path=path)


def path_log_weight(control_fn: ControlFn, eta: jax.Array, sigma0: float, path: jax.Array) -> jax.Array:
    """log w, eq. (E6), of a stored path (N + 1, ..., d) under ``control_fn`` / ``eta``: (...,)."""
    steps = jnp.arange(eta.shape[0], dtype=jnp.int32)

    def step(total, inputs):
        n, eta_n, x, x_next = inputs
        var = 2.0 * eta_n
        log_forward = diag_gaussian_log_prob(x_next, forward_mean(x, control_fn(x, n), eta_n, sigma0), var)
        log_backward = diag_gaussian_log_prob(x, backward_mean(x_next, eta_n, sigma0), var)
        return total + log_backward - log_forward, None

    total, _ = jax.lax.scan(step, jnp.zeros(path.shape[1:-1]), (steps, eta, path[:-1], path[1:]))
    return total


def pseudo_log_prob(
    chain: ChainSample, sigma0: float, squash_kind: str | None, erf_scale: float = 1.0
) -> tuple[jax.Array, jax.Array]:
    """DIME's ell, eq. (E7), and its running-cost part; both (...,).

    ell = log p0(x_0) - log w - log|J_squash(x_N)|;  running_cost = ell - log p0(x_0).
    ``squash_kind=None`` gives the pre-squash version (a bound on log of x_N's density).
    """
    log_det = 0.0 if squash_kind is None else squash_log_det(chain.x_final, squash_kind, erf_scale)
    running_cost = -(chain.log_weight + log_det)
    return prior_log_prob(chain.x0, sigma0) + running_cost, running_cost


def trajectory_kl(
    old_control_fn: ControlFn,
    new_control_fn: ControlFn,
    old_eta: jax.Array,
    new_eta: jax.Array,
    sigma0: float,
    noise: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Two estimates of KL(P_old || P_new) over the whole chain, eq. (E8), along OLD chains.

    noise: (N + 1, ..., d) drives the old chain (x_0 = sigma0 noise[0], then eq. (E4) with
    the old control and old eta). States and everything old are stop-gradient, so the
    gradient flows only through ``new_control_fn`` / ``new_eta``. Returns, each (...,):

    closed_form: sum_n KL(N(mu_old, 2 eta_old) || N(mu_new, 2 eta_new)) at x_n, eq. (E9)
      (Rao-Blackwellised over x_{n+1}; includes the log-variance terms);
    sampled: sum_n [log F_old(x_{n+1} | x_n) - log F_new(x_{n+1} | x_n)] (reference estimator).
    Both are unbiased for the trajectory KL; average over independent noise rows for K paths.
    The plain sequential form (both networks inside one scan), kept as the oracle of
    :func:`fresh_path_kl`, which the policy uses: the same values, cheaper to differentiate.
    """
    sg = jax.lax.stop_gradient
    x0 = sg(sigma0 * noise[0])
    steps = jnp.arange(old_eta.shape[0], dtype=jnp.int32)

    def step(x, inputs):
        n, eta_old, eta_new, eps_n = inputs
        var_old, var_new = sg(2.0 * eta_old), 2.0 * eta_new
        mean_old = sg(forward_mean(x, old_control_fn(x, n), eta_old, sigma0))
        mean_new = forward_mean(x, new_control_fn(x, n), eta_new, sigma0)
        x_next = sg(mean_old + jnp.sqrt(var_old) * eps_n)
        closed = gaussian_kl_diag(mean_old, var_old, mean_new, var_new)
        log_old = -0.5 * jnp.sum(eps_n**2 + _LOG_2PI + jnp.log(var_old), axis=-1)
        sampled = log_old - diag_gaussian_log_prob(x_next, mean_new, var_new)
        return x_next, (closed, sampled)

    _, (closed, sampled) = jax.lax.scan(step, x0, (steps, old_eta, new_eta, noise[1:]))
    return jnp.sum(closed, axis=0), jnp.sum(sampled, axis=0)


def stored_path_kl(
    new_control_all_steps: Callable[[jax.Array, jax.Array], jax.Array],
    old_eta: jax.Array,
    new_eta: jax.Array,
    sigma0: float,
    path: jax.Array,
    noise: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """The two estimates of :func:`trajectory_kl` along one STORED old path, eq. (E8).

    path: (N + 1, ..., d) the states x_0..x_N of a chain that the OLD policy simulated with
    ``noise`` (N + 1, ..., d), e.g. the acting chain of a rollout: it is a draw from P_old at that
    state, so both estimates stay unbiased. The old means need no network call: (E4) gives
    mu_old,n = x_{n+1} - sqrt(2 eta_old,n) eps_n exactly (up to rounding). The new control is
    evaluated at all N stored states in ONE call, new_control_all_steps(x (N, ..., d),
    n (N, 1, ..., 1)) -> (N, ..., d), instead of a sequential scan that also re-runs the old chain:
    N batched network calls instead of 2N sequential ones per path. Gradients flow only through
    the new control and ``new_eta``. Returns closed_form, sampled, each (...,).
    """
    sg = jax.lax.stop_gradient
    path, noise, old_eta = sg(path), sg(noise), sg(old_eta)
    var_old = 2.0 * _as_steps(old_eta, path)
    mean_old = path[1:] - jnp.sqrt(var_old) * noise[1:]
    return _path_kl(new_control_all_steps, new_eta, sigma0, path, noise[1:], mean_old, var_old)


def fresh_path_kl(
    old_control_fn: ControlFn,
    new_control_all_steps: Callable[[jax.Array, jax.Array], jax.Array],
    old_eta: jax.Array,
    new_eta: jax.Array,
    sigma0: float,
    noise: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """:func:`trajectory_kl`'s two estimates, the same values from the same ``noise``, computed in
    two passes: the old chain alone (N sequential calls of the old control, no gradient), then
    the new control at all N of its states in ONE call, as :func:`stored_path_kl` does.

    The sequential form evaluates the new control inside the chain's scan, so its gradient runs a
    reverse scan of N small network calls; here forward and backward are one batched product
    (2.3 against 3.0 ms per gradient on a 64-state minibatch at N = 8 on one CPU core). Returns
    closed_form, sampled, each (...,).
    """
    sg = jax.lax.stop_gradient
    noise, old_eta = sg(noise), sg(old_eta)
    steps = jnp.arange(old_eta.shape[0], dtype=jnp.int32)

    def step(x, inputs):
        n, eta_n, eps_n = inputs
        mean = forward_mean(x, old_control_fn(x, n), eta_n, sigma0)
        x_next = mean + jnp.sqrt(2.0 * eta_n) * eps_n
        return x_next, (x_next, mean)

    x0 = sigma0 * noise[0]
    _, (states, mean_old) = jax.lax.scan(step, x0, (steps, old_eta, noise[1:]))
    path = sg(jnp.concatenate([x0[None], states], axis=0))
    var_old = 2.0 * _as_steps(old_eta, path)
    return _path_kl(new_control_all_steps, new_eta, sigma0, path, noise[1:], sg(mean_old), var_old)


def _path_kl(
    new_control_all_steps: Callable[[jax.Array, jax.Array], jax.Array], new_eta: jax.Array, sigma0: float,
    path: jax.Array, eps: jax.Array, mean_old: jax.Array, var_old: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """(E8)'s closed-form and sampled sums along an old path (N + 1, ..., d) whose steps have means
    ``mean_old`` (N, ..., d), variances ``var_old`` and standardised noise ``eps`` (N, ..., d)."""
    x_next = path[1:]
    mean_new, eta_new = _stored_path_means(new_control_all_steps, new_eta, sigma0, path)
    var_new = 2.0 * eta_new
    closed = gaussian_kl_diag(mean_old, var_old, mean_new, var_new)
    log_old = -0.5 * jnp.sum(eps**2 + _LOG_2PI + jnp.log(var_old), axis=-1)
    sampled = log_old - diag_gaussian_log_prob(x_next, mean_new, var_new)
    return jnp.sum(closed, axis=0), jnp.sum(sampled, axis=0)


def _as_steps(a: jax.Array, path: jax.Array) -> jax.Array:
    """(N, d) per-step values -> (N, 1, .., 1, d), broadcasting over a path's (N, ..., d) batch axes."""
    return a.reshape(a.shape[:1] + (1,) * (path.ndim - 2) + a.shape[-1:])


def _stored_path_means(
    control_all_steps: Callable[[jax.Array, jax.Array], jax.Array], eta: jax.Array, sigma0: float,
    path: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Means of F_n(. | x_n), eq. (E4), at every stored state x_0..x_{N-1} of ``path`` (N + 1, ..., d)
    with ONE control call on all steps, and eta broadcast to them: ((N, ..., d), (N, 1.., d))."""
    num_steps = eta.shape[0]
    steps = jnp.arange(num_steps, dtype=jnp.int32).reshape((num_steps,) + (1,) * (path.ndim - 2))
    eta_b = _as_steps(eta, path)
    x = path[:-1]
    return forward_mean(x, control_all_steps(x, steps), eta_b, sigma0), eta_b


def stored_path_log_probs(
    control_all_steps: Callable[[jax.Array, jax.Array], jax.Array], eta: jax.Array, sigma0: float,
    path: jax.Array, var_floor: float = 0.0,
) -> jax.Array:
    """(N, ...) log F_n(x_{n+1} | x_n), eq. (E4), of each step of stored paths (N + 1, ..., d) under the
    chain (``control_all_steps``, ``eta``; each step's variance floored at ``var_floor``), the control
    evaluated at all N states in one call (as in :func:`stored_path_kl`). DPPO's per-step terms."""
    mean, eta_b = _stored_path_means(control_all_steps, eta, sigma0, path)
    return diag_gaussian_log_prob(path[1:], mean, step_variance(eta_b, var_floor))
