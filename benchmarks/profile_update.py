"""Where a REPPO-family iteration spends its time: a per-phase breakdown, one process.

Usage (the command behind benchmarks/results/profile_reppo/):

    python benchmarks/profile_update.py --algo reppo --env playground/CartpoleSwingup \
        --json benchmarks/results/profile_reppo/reppo.json [--trace /tmp/trace]

Each phase is compiled on its own from the algorithm's default preset (``--set key=value`` to
override) and timed as the best of ``--repeats`` calls, all phases round-robin so that machine
noise hits them alike:

  iteration     rollout + targets + all SGD steps (the training program's loop body)
  rollout       num_steps env steps with the acting policy (observation normaliser included)
  update        the algorithm's whole update (targets + epochs x minibatches SGD steps)
  targets       next-state actions, critic values, soft lambda-returns and the flattened SGD
                data (``REPPO.sgd_data``, once per iteration)
  critic_steps  the critic's steps alone (epochs x minibatches), on the iteration's minibatches
  actor_steps   the actor's steps alone (loss, gradient, optimiser, duals), same count
  kl_grads      the gradient of the trust-region KL alone, same count
  value_grads   the gradient of the value term alone (pathwise sample and Q), same count

The SGD-step phases run the same number of steps as one update, on minibatches of the same
size, with the iteration-start parameters (their cost does not depend on the values). The
phases overlap by design (``actor_steps`` contains ``kl_grads`` and ``value_grads``); the sum of
``critic_steps`` and ``actor_steps`` against ``update`` - ``targets`` shows what the fused
program saves. ``--trace DIR`` also writes a JAX profiler trace of three iterations
(TensorBoard's profile plugin or Perfetto read it).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import optax


def build_phases(config) -> tuple[dict, dict]:
    from diffrl.algos.soft_critic import critic_step
    from diffrl.core.build import build
    from diffrl.core.loop import make_components

    env, algo, _ = build(config)
    if not hasattr(algo, "sgd_data"):
        raise SystemExit(f"profile_update: {config.algo} is not a REPPO-family algorithm (reppo, trudi)")
    comps = make_components(config, env, algo)
    c = algo.c
    ts = jax.jit(comps.init)(jax.random.PRNGKey(config.seed))
    _, batch, _, _ = jax.jit(comps.rollout)(ts, jax.random.PRNGKey(1))
    state = ts.algo
    steps = c.num_epochs * c.num_minibatches
    n = config.num_envs * config.num_steps
    size = n // c.num_minibatches

    data, _ = jax.jit(algo.sgd_data)(state, batch, jax.random.PRNGKey(2))  # the update's own data
    idx = jax.random.permutation(jax.random.PRNGKey(3), n)[: size * c.num_minibatches].reshape(-1, size)
    idx = jnp.concatenate([idx] * c.num_epochs)  # (steps, size)
    keys = jax.random.split(jax.random.PRNGKey(4), steps)
    actor_vars = (state.actor_params, state.log_alpha, state.log_beta)

    def take(i):
        return jax.tree_util.tree_map(lambda x: x[i], data)

    def critic_steps(params, opt):
        def body(carry, i):
            p, o = carry
            p, o, m = critic_step(algo.critic, config.critic, algo.critic_optimizer, p, o, take(i))
            return (p, o), m["critic/loss"] if "critic/loss" in m else jnp.zeros(())
        return jax.lax.scan(body, (params, opt), idx)

    def actor_steps(vars_, opt):
        def body(carry, inputs):
            v, o = carry
            i, k = inputs
            (loss, _), g = jax.value_and_grad(algo.actor_loss, has_aux=True)(
                v, state.actor_params, state.critic_params, take(i), k)
            u, o = algo.actor_optimizer.update(g, o, v)
            return (optax.apply_updates(v, u), o), loss
        return jax.lax.scan(body, (vars_, opt), (idx, keys))

    def kl_grads(params):
        def body(p, inputs):
            i, k = inputs
            mb = take(i)

            def kl_mean(q):
                return jnp.mean(algo.policy.trust_region_kl(state.actor_params, q, mb["obs"], k,
                                                            mb["policy_aux"])[0])
            g = jax.grad(kl_mean)(p)
            return jax.tree_util.tree_map(lambda a, b: a - 1e-6 * b, p, g), None
        return jax.lax.scan(body, params, (idx, keys))

    def value_grads(params):
        def body(p, inputs):
            i, k = inputs
            mb = take(i)

            def value(q):
                s = algo.policy.rsample(q, mb["obs"], k)
                return jnp.mean(0.01 * s.log_prob - algo.q_value(state.critic_params, mb["critic_obs"], s.action))
            g = jax.grad(value)(p)
            return jax.tree_util.tree_map(lambda a, b: a - 1e-6 * b, p, g), None
        return jax.lax.scan(body, params, (idx, keys))

    phases = {
        "iteration": (comps.iteration, (ts,)),
        "rollout": (comps.rollout, (ts, jax.random.PRNGKey(5))),
        "update": (algo.update, (state, batch, jax.random.PRNGKey(6))),
        "targets": (algo.sgd_data, (state, batch, jax.random.PRNGKey(7))),
        "critic_steps": (critic_steps, (state.critic_params, state.critic_opt)),
        "actor_steps": (actor_steps, (actor_vars, state.actor_opt)),
        "kl_grads": (kl_grads, (state.actor_params,)),
        "value_grads": (value_grads, (state.actor_params,)),
    }
    info = {"sgd_steps": steps, "minibatch": size, "batch": n}
    return phases, info


def main(argv=None) -> int:
    from diffrl.config.overrides import set_field
    from diffrl.config.presets import resolve

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algo", default="reppo")
    p.add_argument("--env", default="playground/CartpoleSwingup")
    p.add_argument("--set", action="append", default=[], help="override a config field (key=value)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--phases", default="all", help="comma-separated subset of the phases (default: all)")
    p.add_argument("--json", default=None)
    p.add_argument("--trace", default=None, help="folder for a JAX profiler trace of three iterations")
    args = p.parse_args(argv)

    config = resolve(args.algo, args.env, None).replace(progress=False)
    for item in args.set:
        key, value = item.split("=", 1)
        config = set_field(config, key, value)
    phases, info = build_phases(config)
    if args.phases != "all":
        wanted = args.phases.split(",")
        unknown = sorted(set(wanted) - set(phases))
        if unknown:
            raise SystemExit(f"profile_update: unknown phases {unknown}; choose from {sorted(phases)}")
        phases = {name: phases[name] for name in wanted}
    compiled, compile_s = {}, {}
    for name, (fn, fn_args) in phases.items():
        print(f"[profile] compiling {name}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        compiled[name] = (jax.jit(fn).lower(*fn_args).compile(), fn_args)
        compile_s[name] = time.perf_counter() - t0
        jax.block_until_ready(compiled[name][0](*fn_args))  # warm-up
    times = {name: [] for name in compiled}
    for _ in range(args.repeats):
        for name, (fn, fn_args) in compiled.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*fn_args))
            times[name].append(time.perf_counter() - t0)
    best = {name: min(t) for name, t in times.items()}
    it = best.get("iteration", float("nan"))
    print(f"{args.algo} on {args.env}: {config.num_envs} envs x {config.num_steps} steps, {info['sgd_steps']} SGD "
          f"steps of {info['minibatch']} per iteration")
    print(f"{'phase':14s} {'ms':>9s} {'% iter':>7s} {'ms/step':>8s} {'compile s':>9s}")
    for name, t in best.items():
        per_step = t / info["sgd_steps"] * 1e3 if name.endswith(("_steps", "_grads")) else float("nan")
        print(f"{name:14s} {t * 1e3:9.1f} {100 * t / it:7.1f} {per_step:8.3f} {compile_s[name]:9.1f}")
    if args.trace and "iteration" in compiled:
        fn, fn_args = compiled["iteration"]
        ts = fn_args[0]
        with jax.profiler.trace(args.trace):
            for _ in range(3):
                ts, m = fn(ts)
            jax.block_until_ready(m)
        print(f"[profile] trace written to {args.trace}")
    if args.json:
        from importlib.metadata import version

        out = {"algo": args.algo, "env": args.env, "overrides": args.set, **info,
               "num_envs": config.num_envs, "num_steps": config.num_steps, "best_s": best, "times_s": times,
               "compile_s": compile_s, "devices": [str(d) for d in jax.devices()],
               "versions": {k: version(k) for k in ("jax", "jaxlib", "flax", "optax")},
               "command": " ".join(["python"] + sys.argv)}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
