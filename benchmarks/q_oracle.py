"""Oracle check of a learned soft Q-function: Q(s, a) against Monte-Carlo returns.

Usage (the command behind ``benchmarks/results/reppo_cartpole_balance/q_oracle_*.txt``):

    python benchmarks/q_oracle.py 60000 reppo.entropy_target_mult=-0.5  # reference H* = -0.5 d
    python benchmarks/q_oracle.py 60000 reppo.entropy_target_mult=0.5   # CPU preset H* = +0.5 d

Trains REPPO on Playground CartpoleBalance for STEPS env steps (32 envs x 32 steps, 8 epochs x
16 minibatches, plus any ``field=value`` overrides), then picks 16 states visited by the
stochastic policy 50 steps after a reset and, for each of 9 first actions on a grid over
[-1, 1], rolls the environment forward under the policy for 400 steps (8 repeats) and
compares the learned Q(s, a) with the discounted Monte-Carlo return (the entropy terms of
the soft return are negligible at the learned temperatures, alpha < 0.02). What matters for a
pathwise actor is the action *slope* of Q, so the report gives, per state, both curves,
their correlation and both argmaxes. A trained state is cached under /tmp/diffrl_q_oracle.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.core.build import build
from diffrl.core.loop import make_components
from diffrl.maths.normalization import normalise_obs
from diffrl.config.overrides import set_field
from diffrl.config.presets import resolve

ENV = "playground/CartpoleBalance"
NUM_STATES, GRID, REPEATS, HORIZON, WARMUP = 16, np.linspace(-1.0, 1.0, 9), 8, 400, 50


def trained_state(steps: int, overrides: dict):
    config = resolve("reppo", ENV, None).replace(num_envs=32, num_steps=32, total_env_steps=steps,
                                                  num_evals=1, progress=False)
    config = set_field(set_field(config, "reppo.num_epochs", 8), "reppo.num_minibatches", 16)
    for key, value in overrides.items():
        config = set_field(config, key, value)
    env, algo, eval_env = build(config)
    comps = make_components(config, env, algo)
    ts = jax.jit(comps.init)(jax.random.PRNGKey(0))
    tag = hashlib.md5(repr((steps, sorted(overrides.items()))).encode()).hexdigest()[:8]
    path = f"/tmp/diffrl_q_oracle/{tag}.pkl"
    if os.path.exists(path):
        with open(path, "rb") as f:
            ts = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(ts), pickle.load(f))
    else:
        t0 = time.time()
        chunk = jax.jit(comps.chunk)
        for _ in range(config.num_chunks):
            ts, _ = chunk(ts)
        print(f"trained {int(ts.iteration)} iterations in {time.time() - t0:.0f} s", flush=True)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            pickle.dump([np.asarray(x) for x in jax.tree_util.tree_leaves(ts)], f)
    return config, algo, eval_env, ts


def main(argv: list[str]) -> None:
    steps = int(argv[0]) if argv else 60_000
    overrides = {k: v for k, v in (a.split("=", 1) for a in argv[1:])}
    config, algo, eval_env, ts = trained_state(steps, overrides)
    gamma = config.reppo.gamma
    print(f"REPPO on {ENV}, {steps} env steps, overrides {overrides}")

    def act(state, key):
        return algo.act(ts.algo, normalise_obs(ts.obs_stats, state.obs, config), key)[0]

    def policy_step(state, key):
        return eval_env.step(state, act(state, key)), None

    states = eval_env.reset(jax.random.split(jax.random.PRNGKey(1), NUM_STATES))
    states, _ = jax.lax.scan(policy_step, states, jax.random.split(jax.random.PRNGKey(2), WARMUP))
    critic_obs = normalise_obs(ts.critic_obs_stats, states.critic_obs, config)
    grid = jnp.asarray(GRID, jnp.float32)[:, None]
    q = np.asarray(jax.vmap(lambda a: algo.q_value(
        ts.algo.critic_params, critic_obs, jnp.broadcast_to(a, (NUM_STATES, 1))))(grid))  # (G, S)

    copies = len(GRID) * REPEATS * NUM_STATES

    def replicate(x):
        if jnp.ndim(x) == 0 or x.shape[0] != NUM_STATES:
            return x
        return jnp.broadcast_to(x, (len(GRID), REPEATS) + x.shape).reshape((copies,) + x.shape[1:])

    @jax.jit
    def monte_carlo(start, first_action, key):
        nxt = eval_env.step(start, first_action)

        def body(carry, k):
            state, ret, discount = carry
            state = eval_env.step(state, act(state, k))
            return (state, ret + discount * state.reward, discount * gamma), None

        (_, ret, _), _ = jax.lax.scan(body, (nxt, nxt.reward, gamma), jax.random.split(key, HORIZON))
        return ret

    first = jnp.broadcast_to(grid[:, None, None, :], (len(GRID), REPEATS, NUM_STATES, 1)).reshape(copies, 1)
    ret = np.asarray(monte_carlo(jax.tree_util.tree_map(replicate, states), first, jax.random.PRNGKey(3)))
    ret = ret.reshape(len(GRID), REPEATS, NUM_STATES)
    mc, se = ret.mean(1), ret.std(1) / np.sqrt(REPEATS)
    print("first actions", GRID)
    corrs, slope_ratio = [], []
    for s in range(NUM_STATES):
        corr = np.corrcoef(q[:, s], mc[:, s])[0, 1]
        corrs.append(corr)
        slope_ratio.append(np.ptp(q[:, s]) / max(np.ptp(mc[:, s]), 1e-9))
        print(f"state {s}: obs {np.round(np.asarray(states.obs[s]), 2)}")
        print("   Q ", np.round(q[:, s], 2))
        print("   MC", np.round(mc[:, s], 2), f" se~{se[:, s].mean():.2f} corr {corr:+.2f}"
              f" argmax Q {GRID[q[:, s].argmax()]:+.2f} argmax MC {GRID[mc[:, s].argmax()]:+.2f}")
    mean_action = algo.eval_action(ts.algo, normalise_obs(ts.obs_stats, states.obs, config), critic_obs,
                                   jax.random.PRNGKey(4), "mean")
    print("policy mean action", np.round(np.asarray(mean_action[:, 0]), 2))
    print(f"summary: median corr(Q, MC) over states {np.median(corrs):+.2f}; median range(Q)/range(MC) "
          f"{np.median(slope_ratio):.2f}; mean |Q - MC| {np.mean(np.abs(q - mc)):.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
