"""``diffrl actions``: sampled actions match the trained policy's own distribution; figure written."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from diffrl.cli import main
from diffrl.commands.trained_run import load_trained


def test_actions_command_draws_from_the_policy(tmp_path):
    run = tmp_path / "run"
    assert main(["train", "--algo", "reppo", "--env", "toy/BimodalBandit", "--total-env-steps", "2048",
                 "--num-evals", "1", "--out", str(run), "--no-progress"]) == 0
    fig, record = tmp_path / "actions.png", tmp_path / "actions.json"
    assert main(["actions", str(run), "--out", str(fig), "--samples", "4000", "--states", "2",
                 "--json", str(record)]) == 0
    assert fig.stat().st_size > 1000
    actions = {k: np.asarray(v) for k, v in json.loads(record.read_text())["actions"].items()}
    assert set(actions) == {"mean", "sample"}
    assert actions["sample"].shape == (2, 4000, 1)
    # The deterministic sampler is one point per state; the stochastic one is the policy's
    # tanh-Gaussian: atanh of its samples has the network's mean and std (4000 draws: the
    # standard errors are std/63 and std/89, so 5 % of std is over 3 of them).
    assert np.ptp(actions["mean"], axis=1).max() == 0.0
    trained, state, _ = load_trained(run)
    params = jax.tree_util.tree_map(lambda x: x[0], state.algo.actor_params)
    obs = jnp.ones((1, 1))  # the bandit's constant observation, normalised as the trainer does
    from diffrl.maths.normalization import normalise_obs

    stats = jax.tree_util.tree_map(lambda x: x[0], state.obs_stats)
    mean, std = trained.algo.policy.dist(params, normalise_obs(stats, obs, trained.config))
    u = np.arctanh(np.clip(actions["sample"][0, :, 0], -1 + 1e-6, 1 - 1e-6))
    assert abs(u.mean() - float(mean[0, 0])) < 0.05 * float(std[0, 0])
    assert abs(u.std() - float(std[0, 0])) < 0.05 * float(std[0, 0])
    np.testing.assert_allclose(actions["mean"][0, 0, 0], np.tanh(float(mean[0, 0])), rtol=1e-5, atol=1e-6)


def test_bad_input_is_refused_before_loading(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["actions", str(tmp_path / "missing"), "--out", str(tmp_path / "x.png"), "--states", "0"])
    assert exit_info.value.code == 2
    assert "--states" in capsys.readouterr().err
