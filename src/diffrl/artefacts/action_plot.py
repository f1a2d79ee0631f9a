"""``diffrl actions RUN_DIR --out FIG.png``: the action distribution a trained policy puts at
chosen states, per evaluation sampler.

This is the picture behind the multimodality claim (TruDi, arXiv 2606.15260; AMDP, arXiv
2606.22630): at a state where two actions are equally good, a diffusion policy can put mass on
both, while a Gaussian puts its mean between them. States are the evaluation environment's
resets, optionally advanced ``--warmup-steps`` steps with the policy's acting sampler; each
state is repeated ``--samples`` times and every requested sampler draws one action per copy
(deterministic samplers such as ``mean`` give one point mass; the diffusion policies'
deterministic samplers, AMDP's ``ode`` and TruDi's ``reversal-ode`` and ``noise-free``, map
different initial noise to different actions). Actions are in the policy's [-1, 1] units
(before the env's rescaling).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.maths.normalization import normalise_obs


def sample_actions(run, state, samplers: list[str], num_states: int, num_samples: int,
                   warmup_steps: int, key: jax.Array, seed_index: int = 0) -> tuple[np.ndarray, dict]:
    """Actions of seed ``seed_index`` at ``num_states`` states.

    ``run``: the :class:`~diffrl.core.run.Run` of the trained run (``diffrl.commands.trained_run.load_trained``).
    Returns (raw observations (S, o), {sampler: actions (S, K, d)}) as NumPy arrays.
    """
    config, algo, env = run.config, run.algo, run.eval_env
    ts = jax.tree_util.tree_map(lambda x: x[seed_index], state)
    key_reset, key_warmup, key_sample = jax.random.split(key, 3)

    def observe(env_state):
        return (normalise_obs(ts.obs_stats, env_state.obs, config),
                normalise_obs(ts.critic_obs_stats, env_state.critic_obs, config))

    @jax.jit
    def states_at(key_reset, key_warmup):
        env_state = env.reset(jax.random.split(key_reset, num_states))

        def step(s, k):
            return env.step(s, algo.act(ts.algo, observe(s)[0], k)[0]), None

        env_state, _ = jax.lax.scan(step, env_state, jax.random.split(key_warmup, warmup_steps))
        return env_state

    env_state = states_at(key_reset, key_warmup)
    obs, critic_obs = observe(env_state)
    repeat = lambda x: jnp.repeat(x, num_samples, axis=0)  # (S*K, ...), state-major
    act = jax.jit(algo.eval_action, static_argnums=4)
    out = {}
    for i, sampler in enumerate(samplers):
        actions = act(ts.algo, repeat(obs), repeat(critic_obs), jax.random.fold_in(key_sample, i), sampler)
        out[sampler] = np.asarray(actions).reshape(num_states, num_samples, -1)
    return np.asarray(env_state.obs), out


def plot_action_distribution(actions: dict, out: str | Path, title: str = "", max_dims: int = 4,
                             bins: int = 60) -> Path:
    """Histograms of ``{sampler: (S, K, d)}`` actions: one row per state, one column per action
    dimension (the first ``max_dims``), samplers overlaid. Returns the written path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    first = next(iter(actions.values()))
    num_states, _, dims = first.shape
    cols = min(dims, max_dims)
    figsize = (max(3.2 * cols, 6.4), 2.2 * num_states + 0.4)
    fig, axes = plt.subplots(num_states, cols, figsize=figsize, squeeze=False)
    edges = np.linspace(-1.0, 1.0, bins + 1)
    for s in range(num_states):
        for j in range(cols):
            ax = axes[s, j]
            for sampler, a in actions.items():
                ax.hist(np.clip(a[s, :, j], -1.0, 1.0), bins=edges, density=True, histtype="step",
                        linewidth=1.4, label=sampler)
            ax.set_xlim(-1.0, 1.0)
            ax.set_yticks([])
            if s == num_states - 1:
                ax.set_xlabel(f"action[{j}]")
            if j == 0:
                ax.set_ylabel(f"state {s}")
    axes[0, 0].legend(fontsize=7, loc="upper left")
    if title:
        fig.suptitle(title, fontsize=10)
    from diffrl.artefacts.plotting import save_figure

    return save_figure(fig, out, dpi=110)


def cmd_actions(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="diffrl actions",
                                description="Plot the action distribution of a trained run at chosen states.")
    p.add_argument("run_dir")
    p.add_argument("--out", required=True, help="figure file (png, pdf, svg)")
    from diffrl.commands.trained_run import sampler_list

    p.add_argument("--sampler", action="append", default=None, type=sampler_list,
                   help="sampler(s) to draw with: repeat the flag or separate names with commas; default: every sampler of the policy")
    p.add_argument("--states", type=int, default=3, help="number of states (rows)")
    p.add_argument("--samples", type=int, default=2000, help="actions per state and sampler")
    p.add_argument("--warmup-steps", type=int, default=0,
                   help="advance the reset states this many steps with the acting policy")
    p.add_argument("--checkpoint", choices=("latest", "best"), default="latest")
    p.add_argument("--seed", type=int, default=0, help="key of the states and samples")
    p.add_argument("--json", default=None, help="also write the sampled actions (lists) as JSON")
    args = p.parse_args(argv)
    if args.states < 1 or args.samples < 1 or args.warmup_steps < 0:
        p.error("--states and --samples must be >= 1 and --warmup-steps >= 0")
    from diffrl.commands.trained_run import open_run

    loaded = open_run("diffrl actions", args.run_dir, args.checkpoint)
    if loaded is None:
        return 2
    run, state, meta = loaded
    samplers = ([name for group in args.sampler for name in group] if args.sampler
                else [s for s in run.algo.samplers if s in run.algo.policy.samplers])
    unknown = [s for s in samplers if s not in run.algo.samplers]
    if unknown:
        from diffrl.policies.base import renamed_sampler_note

        p.error(f"unknown sampler(s) {unknown}; {run.config.algo} offers {', '.join(run.algo.samplers)}"
                + renamed_sampler_note(unknown, run.algo.policy))
    obs, actions = sample_actions(run, state, samplers, args.states, args.samples, args.warmup_steps,
                                  jax.random.PRNGKey(args.seed))
    title = (f"{run.config.algo} on {run.config.env} at {meta.get('env_steps', 0):,} env steps "
             f"({args.samples} samples per state)")
    path = plot_action_distribution(actions, args.out, title)
    if args.json:
        import json

        Path(args.json).write_text(json.dumps({"obs": obs.tolist(),
                                               "actions": {k: v.tolist() for k, v in actions.items()}}))
    print(f"wrote {path}")
    return 0
