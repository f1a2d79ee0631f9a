"""Cost of the action-marginal KL (`--reppo.trust-region action`, eq. E12 of diffrl.policies.dis_chain):
the plug-in of sample moments at K = 4 (the estimator before the unbiased one) against the unbiased
estimate at the dime preset's K = 8, side by side in one process, on the gradient that an SGD step takes
(value and gradient of the minibatch mean w.r.t. the new parameters).

    JAX_PLATFORMS=cpu python benchmarks/action_kl_cost.py [--states 256] [--obs 5] [--act 1] [--hidden 64 64]

Prints milliseconds per gradient (median of repeats) and the ratios; the plug-in at K = 8 separates
the estimator's own cost from that of simulating twice as many chains. The plug-in is written out here
(not in the library any more): KL(N(m_o, s_o^2) || N(m_n, s_n^2)) of the sample moments.
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

from diffrl.policies import dis_action_kl, dis_chain
from diffrl.policies.diffusion import DiffusionPolicy, DiffusionPolicyConfig


def plug_in_kl(x_old: jax.Array, x_new: jax.Array, min_var: float = 1e-6) -> jax.Array:
    """(K, ..., d) -> (...,): the Gaussian KL (E9) of the per-dimension sample means and variances."""
    v_old = jnp.maximum(jnp.var(x_old, axis=0, ddof=1), min_var)
    v_new = jnp.maximum(jnp.var(x_new, axis=0, ddof=1), min_var)
    return dis_chain.gaussian_kl_diag(jnp.mean(x_old, axis=0), v_old, jnp.mean(x_new, axis=0), v_new)


def make_grad(policy: DiffusionPolicy, k: int, estimator):
    cfg = policy.config

    def mean_kl(params, old_params, obs, key):
        noise = policy._noise(key, (k, *obs.shape[:-1]))
        old = dis_chain.sample_chain(policy._control_fn(old_params, obs), policy.step_sizes(old_params), cfg.sigma0, noise)
        new = dis_chain.sample_chain(policy._control_fn(params, obs), policy.step_sizes(params), cfg.sigma0, noise)
        return jnp.mean(estimator(jax.lax.stop_gradient(old.x_final), new.x_final))

    return jax.jit(jax.value_and_grad(mean_kl))


def time_ms(fns: dict, args: tuple, repeats: int) -> dict[str, float]:
    """Median milliseconds per call of each function, the calls interleaved round-robin (a machine whose
    load drifts slows them alike)."""
    for fn in fns.values():
        jax.block_until_ready(fn(*args))  # compile
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[name].append(time.perf_counter() - start)
    return {name: 1e3 * sorted(t)[len(t) // 2] for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=256, help="minibatch states")
    parser.add_argument("--obs", type=int, default=5, help="observation size")
    parser.add_argument("--act", type=int, default=1, help="action size")
    parser.add_argument("--hidden", type=int, nargs="+", default=[64, 64], help="control net widths")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    policy = DiffusionPolicy(DiffusionPolicyConfig(hidden=tuple(args.hidden), learn_dt=True), args.act)
    params = policy.init(jax.random.key(0), args.obs)
    new = jax.tree.map(lambda p: p + 0.01 * jax.random.normal(jax.random.key(1), p.shape), params)
    obs = jax.random.normal(jax.random.key(2), (args.states, args.obs))
    key = jax.random.key(3)
    # the unbiased estimate refuses K < 6; the plug-in at K = 8 separates the estimator's cost from the chains'
    runs = {"plug-in, K = 4": (4, plug_in_kl), "plug-in, K = 8": (8, plug_in_kl),
            "unbiased, K = 8": (8, dis_action_kl.moment_matched_kl)}
    ms = time_ms({name: make_grad(policy, k, est) for name, (k, est) in runs.items()}, (new, params, obs, key),
                 args.repeats)
    for name, value in ms.items():
        print(f"{name:18s} {value:8.2f} ms per gradient ({value / ms['plug-in, K = 4']:.2f}x the plug-in at K = 4)")


if __name__ == "__main__":
    main()
