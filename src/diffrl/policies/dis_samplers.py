"""Deterministic evaluation samplers of the DIME / DIS chain (:mod:`diffrl.policies.dis_chain`, whose
equation labels this module continues): TruDi's (Le et al. 2026, arXiv 2606.15260) and DIME's (Celik et
al. 2025, arXiv 2502.02316) diffusion actor evaluated without the chain's noise.

Both draw x_0 = sigma0 z once and add no noise after it:

(E10) reversal ODE  x_{n+1} = x_n + eta_n f(x_n, n) / 2                          :func:`reversal_ode`
(E11) noise-free    x_{n+1} = x_n + eta_n (grad log p0(x_n) + c f(x_n, n))      :func:`noise_free_chain`

Neither has the marginals of the chain (E4) as trained. Write p_n for the law of x_n under
(E4) and m_n(x) = x + eta_n (grad log p0(x) + f(x, n)). A deterministic step carrying p_n to
p_{n+1} = (m_n # p_n) * N(0, 2 eta_n I) needs p_n itself: the probability-flow construction
applies m_n, then follows the heat flow's velocity -grad log q_t, q_t = (m_n # p_n) * N(0, 2t I),
0 <= t <= eta_n, i.e. the scores of the chain's OWN marginals. Those depend on the controls of
all earlier steps (closed forms exist for affine controls only; otherwise they would have to be
estimated from many simulated chains). So no continuous step rule that uses only
(f(., n), eta_n), as (E10), (E11) and every ODE-solver step do, carries p_n to p_{n+1} for every
control: with affine controls, m_n(x) = a x + b and p_n (n >= 1) can be N(0, v) for any
v >= 2 eta_{n-1}; both sides of "the rule maps N(0, v) to N(b, a^2 v + 2 eta_n)" are analytic in
v > 0, so the identity would extend to v -> 0, where a continuous rule sends delta_0 to a point,
not to N(b, 2 eta_n). The control gives the scores only through the time-reversal relation

(R)   grad log p_n = grad log p0 + f(., n) / 2,

true when (E4) is the exact time reversal of the reference (E5) run from x_N's law; under (R)
(E10) is the chain's probability-flow ODE (derivation in :func:`reversal_ode`). DIME's objective
is KL(P || Q) with Q(x_{0:N}) = pi(x_N) prod_n B_n(x_n | x_{n+1}) (pi the target in x); as
KL(P || Q) = KL(p0 || q_0) + E_{p0} KL(P(. | x_0) || Q(. | x_0)), its optimum (in the
continuous-time limit) runs Q's own forward dynamics from p0, reaching KL(p0 || q_0) > 0 unless
q_0 = p0: f* satisfies (R) with Q's marginals q_n (the target noised by the reference) in place
of p_n. So (E10) is Q's probability-flow ODE, which carries q_0, not p0, to pi; it is exact only
when q_0 = p0, i.e. pi = p0 or the reference mixes over the chain, sum_n eta_n >> sigma0^2.
DIME's schedule is far from that: N = 8, dt = 1/8, friction 1 give sum eta = 0.559 = 0.089
sigma0^2 (sigma0 = 2.5), the reference relaxes by a factor exp(-0.089) = 0.91, and for
pi = N(0.5, 0.3^2) q_0 is about N(0.46, 1.10) against p0 = N(0, 6.25). Closed forms for that
target and the DIME-optimal (affine) control (tests/test_dis_samplers.py): the SDE ends at
N(0.466, 0.154), (E10) at N(0.353, 0.648), a variance ratio of 4.21 (1.63 for pi = N(0, 1),
5.9 for N(0, 0.1^2)); not a discretisation error, as 800 uniform steps over the same total time
give 4.29, while a chain with sum eta = 6 sigma0^2 in 6000 steps gives 0.996. (E11) with c = 1 is
the chain of conditional means E[x_{n+1} | x_n]; for an affine control it has the SDE's mean
exactly but drops the variance the noise adds (0.034 against 0.154 above): a mode-seeking
deterministic policy, not a marginal-preserving one.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from diffrl.policies.dis_chain import ControlFn, prior_score


def reversal_ode(control_fn: ControlFn, eta: jax.Array, x0: jax.Array) -> jax.Array:
    """The "reversal-ode" sampler, eq. (E10): x_{n+1} = x_n + eta_n f(x_n, n) / 2. Returns x_N.

    A heuristic: the Euler discretisation of the probability-flow ODE that the chain WOULD have
    if it were the exact time reversal of its reference (relation (R) of the module docstring),
    which DIME's chain as trained is not. Derivation under (R): (E4) is Euler-Maruyama, with
    increment dt_n, of dx = sigma^2 [grad log p0 + f] dt + sqrt(2 sigma^2) dW; the PF-ODE of
    dx = b dt + g dW is dx = [b - g^2/2 grad log p_t] dt, and with (R)
        dx = sigma^2 [grad log p0 + f - grad log p0 - f / 2] dt = sigma^2 f / 2 dt,
    the prior-score term cancelling; sigma^2 dt_n = eta_n gives the update. Exact (up to Euler
    error) only where (R) holds: a control built from the chain's own marginal scores, or the
    DIME optimum of a chain whose reference mixes (sum eta >> sigma0^2). At DIME's schedule and
    optimum its end-point variance is 1.6x (target std 1) to 5.9x (std 0.1) the SDE's (module
    docstring; closed forms in tests/test_dis_samplers.py).
    x0: (..., d), usually sigma0 * noise; eta: (N, d).
    """
    steps = jnp.arange(eta.shape[0], dtype=jnp.int32)

    def step(x, inputs):
        n, eta_n = inputs
        return x + 0.5 * eta_n * control_fn(x, n), None

    x_final, _ = jax.lax.scan(step, x0, (steps, eta))
    return x_final


def noise_free_chain(control_fn: ControlFn, eta: jax.Array, sigma0: float, x0: jax.Array, coef: float) -> jax.Array:
    """The "noise-free" sampler, eq. (E11): x_{n+1} = x_n + eta_n (grad log p0(x_n) + c f(x_n, n)).

    The acting chain (E4) with its noise dropped and the control scaled by c = ``coef`` (the
    DIME / TruDi reference code's deterministic sampler, shipped with c = 1). With c = 1 it is
    the chain of conditional means; it is no probability-flow ODE of (E4): for an affine control
    it reproduces the SDE's mean but only the variance the map gives x_0. Returns x_N.
    """
    steps = jnp.arange(eta.shape[0], dtype=jnp.int32)

    def step(x, inputs):
        n, eta_n = inputs
        return x + eta_n * (prior_score(x, sigma0) + coef * control_fn(x, n)), None

    x_final, _ = jax.lax.scan(step, x0, (steps, eta))
    return x_final
