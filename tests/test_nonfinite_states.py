"""A simulation that goes NaN in one environment costs that environment its episode, not the seed its
training (``envs.wrappers.NonFiniteGuard``); when a NaN does reach an update, the stop names its cause."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.core.nonfinite import first_nonfinite
from diffrl.envs.base import EnvSpec, EnvState


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


@pytest.mark.heavy(40)
def test_reppo_trains_through_a_simulation_that_goes_nan_reports_it_once_and_counts_it(tmp_path, monkeypatch):
    """Two seeds of REPPO through `diffrl train` on the unstable task (registered as a JAX environment), with
    the finiteness check on: random actions take many environments past |x| = 1, so without the guard the
    first rollout's rewards are NaN and every loss with them, and the run stops (exit status 3; the ledger's
    REPPO HumanoidWalk cell lost a seed that way). With it the run finishes with finite evaluations, says
    once that the simulation blew up, and summary.json counts every such step."""
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
        rc = main(["train", "--algo", "reppo", "--env", "test/Unstable", "--num-seeds", "2", "--num-envs", "8",
                   "--num-steps", "16", "--total-env-steps", "384", "--num-evals", "1", "--eval-envs", "2",
                   "--reppo.num-minibatches", "2", "--reppo.num-epochs", "1", "--check-finite",
                   "--out", str(tmp_path / "run"), "--no-tensorboard"])
    assert rc == 0, err.getvalue()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["nonfinite_states"] > 0
    assert np.isfinite(summary["final"]["eval/seed_returns"]).all()
    assert err.getvalue().count("went non-finite (the simulation blew up)") == 1
