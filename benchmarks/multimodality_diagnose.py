"""Why a policy keeps or loses the modes of a sequential toy task: one vmapped multi-seed run with diagnostics.

Usage (the runs behind ``benchmarks/results/multimodality/diagnosis/``):

    python benchmarks/multimodality_diagnose.py trudi --env toy/MirrorGoals --seeds 5 \
        [--set reppo.gamma=0.99 critic.vmin=-50.0 critic.vmax=50.0 ...] --out runs/diagnose/NAME

Trains ALGO on ENV (the default preset, ``--set`` overrides, ``--steps`` the budget) with every
evaluation sampler logged, then prints:

* the temperature alpha, the entropy estimate, the trust-region KL and beta per seed at six
  points of training, and the logged evaluations (return R, behaviour entropy H, mode reached m);
* per seed and sampler, 256 fresh evaluation episodes: return, behaviour entropy, mode reached;
* the first action at the (deterministic) start state, 512 draws per seed: the fraction with
  a_x > 0 (the side it heads for), mean, std and mean |a_x|;
* the learned Q(s0, (a_x, 0)) for a_x in -1..1 (the critic's symmetry at the start state) and
  Q at goal +e_0 at rest with a zero action;
* per seed: the histogram of reached modes (-1 = none, 0, 1, ...) and the same split by the sign
  of the first action (does the policy commit to the side its first action chose?).
"""
from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.core.run import build_run
from diffrl.core.trainer import Trainer
from diffrl.maths.normalization import normalise_obs
from diffrl.config.overrides import set_field
from diffrl.config.presets import resolve

FIRST_ACTIONS = 512
EPISODES = 256


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("algo")
    p.add_argument("--env", default="toy/MirrorGoals")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=0, help="total env steps (default: the preset's)")
    p.add_argument("--set", nargs="*", default=[], help="key=value overrides of the preset")
    p.add_argument("--preset", default=None)
    p.add_argument("--num-evals", type=int, default=5)
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument("--reward-width", type=float, default=None,
                   help="MirrorGoals/OctahedronGoals: the goal reward's width (default: the task's, 0.1); "
                        "1.0 makes the reward dense (exp(-1) = 0.37 at the start)")
    p.add_argument("--start-spread", type=float, default=0.0,
                   help="MirrorGoals/OctahedronGoals: train from start positions drawn uniformly in [-S, S]^dim "
                        "(exploring starts); the final evaluation and every printed diagnostic still start "
                        "at the origin, the task as defined (the evaluations logged during training do not)")
    return p.parse_args(argv)


def point_mass_task(env: str, **fields):
    """The point-mass task ``env`` built with ``MirrorGoalsConfig(**fields)``."""
    from diffrl.envs import toy

    cls = {"toy/MirrorGoals": toy.MirrorGoals, "toy/OctahedronGoals": toy.OctahedronGoals}.get(env)
    if cls is None:
        raise SystemExit(f"--reward-width and --start-spread apply to toy/MirrorGoals and toy/OctahedronGoals, "
                         f"not {env}")
    return cls(toy.MirrorGoalsConfig(**fields))


def use_task_config(env: str, **fields) -> None:
    """Re-register the point-mass task ``env`` with these MirrorGoalsConfig fields (this process only)."""
    from diffrl.envs import registry

    point_mass_task(env, **fields)  # refuses other tasks now, not at the first make()
    registry.register(env, lambda **kw: point_mass_task(env, **fields), overwrite=True)


def evaluate_from_origin(env: str, fields: dict, cfg):
    """After training from spread starts (the task built with ``fields``): the run that evaluates
    (and diagnoses) from the task's own start, the origin."""
    from diffrl.core.evaluate import wrap_for_eval

    base = point_mass_task(env, **{**fields, "start_spread": 0.0})
    return build_run(cfg, eval_env=wrap_for_eval(base, episode_length=cfg.episode_length or base.spec.episode_length))


def train(a):
    cfg = resolve(a.algo, a.env, a.preset).replace(
        num_seeds=a.seeds, progress=False, tensorboard=False, checkpoint_every=0, out=a.out,
        num_evals=a.num_evals, eval_envs=EPISODES)
    if a.steps:
        cfg = cfg.replace(total_env_steps=a.steps)
    for item in a.set:
        key, value = item.split("=", 1)
        cfg = set_field(cfg, key, value)
    samplers = build_run(cfg).algo.samplers
    cfg = cfg.replace(eval_samplers=tuple(samplers))
    chunks = []
    trainer = Trainer(cfg, metrics_fn=lambda it, m: chunks.append({k: np.asarray(v) for k, v in m.items()}))
    t0 = time.time()
    trainer.run()
    print(f"wall {time.time() - t0:.0f}s")
    return cfg, trainer, samplers, chunks


def print_training(a, samplers, chunks):
    metrics = {k: np.concatenate([c[k] for c in chunks], 1) for k in chunks[0] if not k.startswith("nonfinite")}
    for key in ("dual/alpha", "actor/entropy_estimate", "actor/kl", "dual/beta", "am/kl"):
        if key in metrics:
            v = metrics[key]
            idx = np.linspace(0, v.shape[1] - 1, 6).astype(int)
            print(key, " | ".join(f"it{i}: " + " ".join(f"{x:.3g}" for x in v[:, i]) for i in idx))
    for r in (json.loads(line) for line in open(a.out + "/metrics.jsonl")):
        s = f"{r['env_steps']:>7}"
        for i, smp in enumerate(samplers):
            pre = "eval/" if i == 0 else f"eval/{smp}/"
            s += (f" | {smp}: R {r[pre + 'episode_return']:.2f} H {r.get(pre + 'behaviour_entropy', 0):.2f} "
                  f"m {r.get(pre + 'mode_reached', 0):.2f}")
        print(s)


def main(argv=None):
    a = parse_args(argv)
    fields = {k: v for k, v in (("reward_width", a.reward_width), ("start_spread", a.start_spread)) if v}
    if fields:
        use_task_config(a.env, **fields)
    cfg, trainer, samplers, chunks = train(a)
    print_training(a, samplers, chunks)
    run = evaluate_from_origin(a.env, fields, cfg) if a.start_spread else trainer.built
    st = trainer.state
    keys = jax.random.split(jax.random.PRNGKey(7), a.seeds)
    # per-seed final evaluation
    for smp in samplers:
        out = run.stepper.evaluate(st.algo, st.obs_stats, st.critic_obs_stats, keys, smp)
        print(f"{smp:10s} R", np.round(np.asarray(out["episode_return"]), 2),
              "H", np.round(np.asarray(out.get("behaviour_entropy", 0)), 2),
              "m", np.round(np.asarray(out.get("mode_reached", 0)), 2))
    # first action at the start state
    start = run.eval_env.reset(jax.random.split(jax.random.PRNGKey(0), 1))
    obs0, cobs0 = start.obs[0], start.critic_obs[0]

    def first_actions(algo_state, ostats, cstats, key, smp):
        o = normalise_obs(ostats, jnp.broadcast_to(obs0, (FIRST_ACTIONS, obs0.shape[-1])), cfg)
        co = normalise_obs(cstats, jnp.broadcast_to(cobs0, (FIRST_ACTIONS, cobs0.shape[-1])), cfg)
        return run.algo.eval_action(algo_state, o, co, key, smp)

    fa = jax.jit(jax.vmap(first_actions, in_axes=(0, 0, 0, 0, None)), static_argnums=4)
    for smp in samplers:
        acts = np.asarray(fa(st.algo, st.obs_stats, st.critic_obs_stats, keys, smp))
        print(f"first-step {smp:10s} frac ax>0:", np.round((acts[..., 0] > 0).mean(1), 2),
              "mean ax", np.round(acts[..., 0].mean(1), 2), "std ax", np.round(acts[..., 0].std(1), 2),
              "mean|ax|", np.round(np.abs(acts[..., 0]).mean(1), 2))
    # the critic at the start state and at a goal
    if hasattr(st.algo, "critic_params"):
        dim = run.eval_env.spec.action_size
        grid = jnp.linspace(-1, 1, 21)
        actions = jnp.zeros((21, dim)).at[:, 0].set(grid)

        def q_start(algo_state, cstats):
            co = normalise_obs(cstats, jnp.broadcast_to(cobs0, (21, cobs0.shape[-1])), cfg)
            return run.algo.q_value(algo_state.critic_params, co, actions)

        q = np.asarray(jax.vmap(q_start)(st.algo, st.critic_obs_stats))
        print("Q(s0, (ax, 0)) for ax in -1..1 step .1 (every 2nd):")
        for s in range(a.seeds):
            print("  ", np.round(q[s, ::2], 2))
        goal_obs = jnp.zeros((2 * dim,)).at[0].set(1.0)

        def q_goal(algo_state, cstats):
            co = normalise_obs(cstats, goal_obs[None], cfg)
            return run.algo.q_value(algo_state.critic_params, co, jnp.zeros((1, dim)))[0]

        print("Q(at goal +e0, rest, a=0):", np.round(np.asarray(jax.vmap(q_goal)(st.algo, st.critic_obs_stats)), 1))
    # reached mode against the side of the first action
    length = cfg.episode_length or run.eval_env.spec.episode_length

    def episodes(algo_state, ostats, cstats, key, smp):
        state = run.eval_env.reset(jax.random.split(key, EPISODES))

        def step(carry, k):
            state, first, mode, t = carry
            o, co = normalise_obs(ostats, state.obs, cfg), normalise_obs(cstats, state.critic_obs, cfg)
            act = run.algo.eval_action(algo_state, o, co, k, smp)
            first = jnp.where(t == 0, act[:, 0], first)
            nxt = run.eval_env.step(state, act)
            return (nxt, first, nxt.info["mode"], t + 1), None

        init = (state, jnp.zeros(EPISODES), jnp.full(EPISODES, -1), 0)
        (_, first, mode, _), _ = jax.lax.scan(step, init, jax.random.split(key, length))
        return first, mode

    epi = jax.jit(jax.vmap(episodes, in_axes=(0, 0, 0, 0, None)), static_argnums=4)
    modes = run.eval_env.spec.modes
    for smp in samplers[:2]:
        first, mode = map(np.asarray, epi(st.algo, st.obs_stats, st.critic_obs_stats, keys, smp))
        for s in range(a.seeds):
            hist = np.bincount(mode[s] + 1, minlength=modes + 1)
            pos = first[s] > 0
            print(f"{smp} seed{s}: modes(-1,0,..)={hist.tolist()} first>0 {pos.mean():.2f}; "
                  f"mode|first>0 {np.bincount(mode[s][pos] + 1, minlength=modes + 1).tolist()} "
                  f"mode|first<0 {np.bincount(mode[s][~pos] + 1, minlength=modes + 1).tolist()}")


if __name__ == "__main__":
    main()
