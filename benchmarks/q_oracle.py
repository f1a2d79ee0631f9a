"""Oracle check of REPPO's learned Q on CartpoleBalance: Q(s,a) vs Monte-Carlo returns."""
import sys, time, json
import jax, jax.numpy as jnp, numpy as np
from diffrl.presets import resolve
from diffrl.core.build import build
from diffrl.core.loop import make_components, normalise_obs

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
extra = dict(a.split("=") for a in sys.argv[2:])
cfg = resolve("reppo", "playground/CartpoleBalance", None)
cfg = cfg.replace(num_envs=32, num_steps=32, total_env_steps=steps, num_evals=1, progress=False)
import dataclasses
from diffrl.presets import _set
import ast
cfg = _set(cfg, "reppo.num_epochs", 8); cfg = _set(cfg, "reppo.num_minibatches", 16)
for k, v in extra.items():
    cfg = _set(cfg, k, ast.literal_eval(v))
env, algo, eval_env = build(cfg)
comps = make_components(cfg, env, algo)
ts = jax.jit(comps.init)(jax.random.PRNGKey(0))
import pickle, os, hashlib
tag = hashlib.md5(repr((steps, sorted(extra.items()))).encode()).hexdigest()[:8]
path = f"/tmp/exp/ts_{tag}.pkl"
t0 = time.time()
if os.path.exists(path):
    ts = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(ts), pickle.load(open(path, "rb")))
else:
    chunk = jax.jit(comps.chunk)
    for i in range(cfg.num_chunks):
        ts, m = chunk(ts)
    pickle.dump([np.asarray(x) for x in jax.tree_util.tree_leaves(ts)], open(path, "wb"))
print("trained", time.time() - t0, "s; iters", int(ts.iteration), flush=True)

n_states, grid, reps, H, gamma = 16, np.linspace(-1, 1, 9), 8, 400, cfg.reppo.gamma
key = jax.random.PRNGKey(1)
# states: run the stochastic policy from reset for 50 steps
st = eval_env.reset(jax.random.split(key, n_states))
def pol_step(st, k):
    obs = normalise_obs(ts.obs_stats, st.obs, cfg)
    a, _ = algo.act(ts.algo, obs, k)
    return eval_env.step(st, a), None
st, _ = jax.lax.scan(pol_step, st, jax.random.split(jax.random.PRNGKey(2), 50))
obs0 = normalise_obs(ts.obs_stats, st.obs, cfg)
cobs0 = normalise_obs(ts.critic_obs_stats, st.critic_obs, cfg)
A = jnp.asarray(grid, jnp.float32)[:, None]
q = jax.vmap(lambda a: algo.q_value(ts.algo.critic_params, cobs0, jnp.broadcast_to(a, (n_states, 1))))(A)  # (G, S)
# MC: replicate states (G, R, S)
rep = lambda x: x if (jnp.ndim(x) == 0 or x.shape[0] != n_states) else jnp.broadcast_to(x, (len(grid), reps) + x.shape).reshape((len(grid) * reps * n_states,) + x.shape[1:])
big = jax.tree_util.tree_map(rep, st)
first_a = jnp.broadcast_to(A[:, None, None, :], (len(grid), reps, n_states, 1)).reshape(-1, 1)
@jax.jit
def mc(big, first_a, key):
    nxt = eval_env.step(big, first_a)
    def body(carry, k):
        s, ret, disc = carry
        obs = normalise_obs(ts.obs_stats, s.obs, cfg)
        a, _ = algo.act(ts.algo, obs, k)
        n = eval_env.step(s, a)
        return (n, ret + disc * n.reward, disc * gamma), None
    (s, ret, _), _ = jax.lax.scan(body, (nxt, nxt.reward, gamma), jax.random.split(key, H))
    return ret
ret = np.asarray(mc(big, first_a, jax.random.PRNGKey(3))).reshape(len(grid), reps, n_states)
mcq = ret.mean(1)  # (G, S)
mcse = ret.std(1) / np.sqrt(reps)
q = np.asarray(q)
print("grid", grid)
for s in range(n_states):
    c = np.corrcoef(q[:, s], mcq[:, s])[0, 1]
    print(f"state {s}: obs {np.round(np.asarray(st.obs[s]),2)}")
    print("   Q ", np.round(q[:, s], 2))
    print("   MC", np.round(mcq[:, s], 2), " se~", np.round(mcse[:, s].mean(), 2), " corr", round(c, 2),
          " argmaxQ", grid[q[:, s].argmax()], " argmaxMC", grid[mcq[:, s].argmax()])
# policy mean action at those states
mean_a = algo.eval_action(ts.algo, obs0, cobs0, jax.random.PRNGKey(4), "mean")
print("policy mean action", np.round(np.asarray(mean_a[:, 0]), 2))
