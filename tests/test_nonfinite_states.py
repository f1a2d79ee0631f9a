"""A simulation that goes NaN in one environment costs that environment its episode, not the seed its
training (``envs.wrappers.NonFiniteGuard``); when a NaN does reach an update, the stop names its cause."""
import jax
import jax.numpy as jnp
import numpy as np

from diffrl.config.presets import resolve
from diffrl.core.build import make_algorithm
from diffrl.core.loop import make_components
from diffrl.core.trainer import first_nonfinite
from diffrl.envs.base import EnvSpec, EnvState
from diffrl.envs.wrappers import wrap


class Unstable:
    """x' = x + 0.3 a, reward -|x|^2; where |x|_inf passes 1 the integration "blows up" as MJX's can: the
    observation and reward of that step are NaN and the step reports termination (Playground's DM Control
    tasks do so on a NaN state)."""

    spec = EnvSpec(name="test/Unstable", obs_size=2, action_size=2, action_low=(-1.0, -1.0),
                   action_high=(1.0, 1.0), episode_length=50)

    def reset(self, key):
        x = jax.random.uniform(key, (2,), minval=-0.5, maxval=0.5)
        return EnvState.create(inner=x, obs=x)

    def step(self, state, action):
        x = state.inner + 0.3 * action
        blown = jnp.max(jnp.abs(x)) > 1.0
        x = jnp.where(blown, jnp.nan, x)
        return state.replace(inner=x, obs=x, final_obs=x, final_critic_obs=x, critic_obs=x,
                             reward=-jnp.sum(x ** 2), terminated=blown)


def test_training_through_a_simulation_that_goes_nan_stays_finite_and_counts_the_blow_ups():
    """Two seeds of REPPO for three iterations with the finiteness check on: random actions take many
    environments past |x| = 1, so without the guard the first rollout's rewards are NaN and every loss
    with them (``nonfinite/rewards`` raised); with it, each blow-up is one terminated transition."""
    config = resolve("reppo", "gymnax/Pendulum-v1", None).replace(
        num_envs=8, num_steps=16, num_seeds=2, total_env_steps=2 * 128, progress=False, tensorboard=False,
        check_finite=True)
    config = config.replace(reppo=config.reppo.__class__(**{**config.reppo.__dict__, "num_minibatches": 2,
                                                            "num_epochs": 1}))
    env = wrap(Unstable())
    algo = make_algorithm(config, env.spec)
    parts = make_components(config, env, algo)
    ts = jax.jit(jax.vmap(parts.init))(jnp.stack([jax.random.PRNGKey(0), jax.random.PRNGKey(1)]))
    iterate = jax.jit(jax.vmap(parts.iteration))
    blow_ups = 0.0
    for _ in range(3):
        ts, metrics = iterate(ts)
        flags = {k: float(np.max(v)) for k, v in metrics.items() if k.startswith("nonfinite/")}
        assert flags and not any(flags.values()), flags
        blow_ups += float(np.sum(metrics["train/nonfinite_states"]))
    assert blow_ups > 0  # the task did blow up, in every seed's rollouts together
    assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(ts.algo))
    assert np.isfinite(ts.obs_stats.mean).all() and np.isfinite(ts.obs_stats.var).all()


def test_the_stop_names_the_earliest_cause_of_an_iteration_not_the_alphabetical_one():
    """A NaN reward makes every loss of the same iteration NaN: the message says rewards."""
    zeros = np.zeros((2, 4))
    flags = {"nonfinite/observations": zeros, "nonfinite/rewards": zeros.copy(), "nonfinite/losses": zeros.copy(),
             "nonfinite/parameters": zeros.copy(), "critic/loss": np.ones((2, 4))}
    flags["nonfinite/rewards"][1, 2] = flags["nonfinite/losses"][1, 2] = flags["nonfinite/parameters"][1, 2] = 1
    flags["critic/loss"][1, 2] = np.nan
    message = first_nonfinite(flags, iteration0=10)
    assert message.startswith("non-finite rewards at iteration 13, seed 1 (non-finite metrics: critic/loss)")
    flags["nonfinite/losses"][0, 1] = 1  # an earlier iteration wins, whatever its cause
    assert first_nonfinite(flags, iteration0=0).startswith("non-finite losses at iteration 2, seed 0")
    assert first_nonfinite({k: zeros for k in flags}, iteration0=0) is None


def test_train_reports_blow_ups_once_in_its_progress_and_counts_them_in_the_summary(tmp_path, monkeypatch):
    """Through `diffrl train`'s trainer on the unstable task (registered as a JAX environment): the run
    finishes, says once that the simulation blew up, and summary.json counts every such step."""
    import contextlib
    import io
    import json

    from diffrl.cli import main
    from diffrl.envs import registry

    real_make = registry.make
    monkeypatch.setattr(registry, "make", lambda name, **kw: Unstable() if name == "test/Unstable" else
                        real_make(name, **kw))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["train", "--algo", "ppo", "--env", "test/Unstable", "--num-envs", "8", "--num-steps", "16",
                   "--total-env-steps", "384", "--num-evals", "1", "--eval-envs", "2", "--ppo.num-minibatches",
                   "2", "--ppo.num-epochs", "1", "--out", str(tmp_path / "run"), "--no-tensorboard"])
    assert rc == 0, err.getvalue()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["nonfinite_states"] > 0
    assert err.getvalue().count("went non-finite (the simulation blew up)") == 1
