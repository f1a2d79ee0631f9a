"""benchmarks/multimodality.py on hand-made records: per-seed values, medians with intervals, the table."""
import numpy as np

import multimodality


def test_seed_values_leave_out_entropy_of_seeds_that_reached_nothing():
    out = {"behaviour_entropy": np.array([0.0, 0.9, 0.0]), "mode_reached": np.array([0.0, 0.5, 1.0]),
           "episode_return": np.array([1.0, 2.0, 3.0])}
    v = multimodality.seed_values(out)
    assert np.isnan(v["behaviour_entropy"][0]) and v["behaviour_entropy"][1:] == [0.9, 0.0]
    assert v["mode_reached"] == [0.0, 0.5, 1.0]


def test_median_ci_and_table():
    point, lo, hi, n = multimodality.median_ci([0.1, 0.2, float("nan"), 0.9])
    assert (point, n) == (0.2, 3) and lo <= point <= hi and 0.1 <= lo and hi <= 0.9
    assert multimodality.median_ci([float("nan")])[3] == 0
    record = {"env": "toy/CornerBandit", "algo": "trudi", "samplers": ["sde"], "num_seeds": 2,
              "episodes_per_seed": 8, "trained_env_steps": 1024, "optimum": 2.0, "random_return": 0.1,
              "final": {"sde": {"behaviour_entropy": [float("nan"), 1.0], "mode_reached": [0.0, 1.0],
                                "episode_return": [0.0, 2.0]}}}
    text = multimodality.table([record])
    row = next(line for line in text.splitlines() if line.startswith("| toy/CornerBandit (4) | trudi | sde"))
    assert "| 1.00 [1.00, 1.00] (1/2 seeds) |" in row  # entropy over the seed that reached a peak
    assert "| 0.50 [0.00, 1.00] |" in row  # return / optimum: median of 0 and 1
    assert "| toy/CornerBandit | 2.00 | 0.10 |" in text


def test_optimal_return_of_the_bandit_is_its_peak():
    assert abs(multimodality.optimal_return("toy/CornerBandit") - 1.0) < 1e-6


def test_diagnose_reward_width_rebuilds_the_point_mass_task_and_refuses_others(monkeypatch):
    import jax
    import jax.numpy as jnp
    import pytest

    import multimodality_diagnose
    from diffrl.envs import registry

    # restore the built-in factory after the test
    monkeypatch.setitem(registry._REGISTRY, "toy/MirrorGoals", registry._REGISTRY["toy/MirrorGoals"])
    multimodality_diagnose.use_task_config("toy/MirrorGoals", reward_width=1.0)
    env = registry.make("toy/MirrorGoals")
    assert env.config.reward_width == 1.0
    state = env.step(env.reset(jax.random.PRNGKey(0)), jnp.zeros(2))
    # at rest at the origin, distance 1 to either goal: exp(-1 / width) with width 1
    assert abs(float(state.reward) - float(jnp.exp(-1.0))) < 1e-6
    with pytest.raises(SystemExit, match="toy/MirrorGoals and toy/OctahedronGoals"):
        multimodality_diagnose.use_task_config("toy/CornerBandit", reward_width=1.0)
