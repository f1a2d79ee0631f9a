"""benchmarks/stability.py: worst drops, per-seed statistics and tables on hand-made curves; resume of a killed pair."""
import json

import numpy as np
import pytest

import stability


def plain_worst_drop(steps, values, total):
    """The definition, as a loop: the largest (best so far - value) at steps >= 2/3 of total."""
    best, worst = -np.inf, None
    for step, value in zip(steps, values):
        best = max(best, value)
        if step >= 2 * total / 3:
            worst = max(worst if worst is not None else -np.inf, best - value)
    return float("nan") if worst is None else worst


def test_worst_drop_only_counts_the_last_third_against_the_best_so_far():
    steps = np.arange(7) * 10  # total 60: evaluations at 40, 50, 60 are the last third
    values = np.array([0.0, 0.9, 0.1, 0.5, 0.8, 0.6, 0.85])
    # The early fall 0.9 -> 0.1 is outside the last third; inside it the best so far is 0.9.
    assert np.isclose(stability.worst_drop(steps, values, 60), 0.3)
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = rng.uniform(size=9)
        assert np.isclose(stability.worst_drop(np.arange(9), v, 8), plain_worst_drop(np.arange(9), v, 8))
    assert np.isnan(stability.worst_drop(np.arange(3), np.ones(3), 100))  # no evaluation in the last third


def test_seed_statistics_normalise_between_random_and_maximum():
    steps = np.array([0, 50, 100])
    returns = np.array([[-1000.0, -800.0], [-200.0, -300.0], [-600.0, -250.0]])  # (E, seeds)
    stats = stability.seed_statistics(steps, returns, low=-1000.0, high=0.0, total_steps=100)
    assert [s["seed"] for s in stats] == [0, 1]
    assert np.isclose(stats[0]["best"], 0.8) and np.isclose(stats[0]["final"], 0.4)
    assert np.isclose(stats[0]["worst_drop"], 0.4)  # 0.8 -> 0.4 at the last evaluation
    assert np.isclose(stats[1]["worst_drop"], 0.0)  # still improving
    assert stats[1]["final_raw"] == -250.0 and stats[1]["best_raw"] == -250.0


def _record(algo, finals, drops):
    seeds = [{"seed": i, "best": f + d, "final": f, "worst_drop": d, "best_raw": 0.0, "final_raw": 0.0}
             for i, (f, d) in enumerate(zip(finals, drops))]
    return {"algo": algo, "env": "gymnax/Pendulum-v1", "samplers": ["sde"],
            "per_sampler": {"sde": {"returns": [], "seeds": seeds}}}


def test_report_counts_dropping_seeds_and_gives_medians_with_intervals(tmp_path):
    for label, drops in (("before", [0.5, 0.3, 0.1, 0.0, 0.25]), ("after", [0.1, 0.0, 0.05, 0.2, 0.0])):
        (tmp_path / label).mkdir()
        record = _record("trudi", [0.8, 0.7, 0.9, 0.85, 0.6], drops)
        (tmp_path / label / "gymnax_Pendulum-v1--trudi.json").write_text(json.dumps(record))
    text = stability.report([f"before={tmp_path / 'before'}", f"after={tmp_path / 'after'}"], tmp_path / "t.md")
    assert (tmp_path / "t.md").read_text() == text
    rows = {line.split("|")[2].strip(): line for line in text.splitlines() if line.startswith("| Pendulum-v1 | trudi (")
            and line.endswith("/5 |")}  # the summary rows (the per-seed rows follow them)
    assert rows["trudi (before)"].endswith("| 0.500 | 3/5 |")  # 0.5, 0.3 and 0.25 exceed 0.2
    assert rows["trudi (after)"].endswith("| 0.200 | 0/5 |")  # 0.2 itself is not a drop above 0.2
    assert "| 0.800 [" in rows["trudi (after)"]  # the median final of 0.8, 0.7, 0.9, 0.85, 0.6
    assert sum(line.startswith("| Pendulum-v1 | trudi (before) | sde |") for line in text.splitlines()) == 6


def test_plot_pair_draws_a_run_without_diagnostics(tmp_path):
    """A PPO-family run logs none of the max-entropy diagnostics: the plot is the returns alone."""
    record = {"algo": "ppo", "env": "playground/CartpoleSwingup", "samplers": ["mean"], "env_steps": [0, 10, 20],
              "per_sampler": {"mean": {"returns": [[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]]}}}
    stability.plot_pair(record, {"loss/value": np.zeros((2, 3))}, tmp_path / "p.png")
    stability.plot_pair(record, {"policy/approx_kl": np.zeros((2, 3))}, tmp_path / "q.png")
    assert (tmp_path / "p.png").stat().st_size > 0 and (tmp_path / "q.png").stat().st_size > 0


class Killed(Exception):
    """Stands in for a kill -9 between two checkpoints."""


@pytest.mark.heavy(28)  # seconds measured on one core with a warm compile cache (tests/conftest.py starts heavy tests first)
def test_a_killed_pair_resumes_to_the_uninterrupted_record(tmp_path, monkeypatch):
    """--resume continues from the last checkpoint: the same evaluations and per-iteration metrics,
    to the bit, as a run that was never stopped; without --resume the used directory is refused."""
    from diffrl.core.trainer import Trainer

    def argv(out):
        return ["--algos", "reppo", "--envs", "gymnax/Pendulum-v1", "--num-seeds", "2", "--num-evals", "4",
                "--eval-envs", "4", "--total-env-steps", "2048", "--set", "num_envs=16", "--set", "num_steps=32",
                "--set", "reppo.num_minibatches=4", "--set", "reppo.num_epochs=1", "--out", str(out)]

    assert stability.main(argv(tmp_path / "full")) == 0
    write_checkpoint = Trainer._checkpoint
    calls = []

    def killed_at_the_third(self, state, chunk, row, clock):
        calls.append(chunk)
        if chunk == 3:  # chunk 3's metrics are saved, its checkpoint is not: they are recomputed
            raise Killed
        write_checkpoint(self, state, chunk, row, clock)

    monkeypatch.setattr(Trainer, "_checkpoint", killed_at_the_third)
    with pytest.raises(Killed):
        stability.main(argv(tmp_path / "cut"))
    monkeypatch.setattr(Trainer, "_checkpoint", write_checkpoint)
    assert calls == [1, 2, 3]
    assert stability.main(argv(tmp_path / "cut")) == 2  # a used run directory needs --resume
    assert stability.main(argv(tmp_path / "cut") + ["--resume"]) == 0
    name = "gymnax_Pendulum-v1--reppo"
    full, cut = (json.loads((tmp_path / d / f"{name}.json").read_text()) for d in ("full", "cut"))
    assert cut["resumed_at_env_steps"] == 1024 and full["resumed_at_env_steps"] is None
    assert cut["env_steps"] == full["env_steps"] == [0, 512, 1024, 1536, 2048]
    assert cut["per_sampler"] == full["per_sampler"]
    with np.load(tmp_path / "full" / f"{name}.npz") as a, np.load(tmp_path / "cut" / f"{name}.npz") as b:
        assert sorted(a.files) == sorted(b.files) and "critic__q_mse" in a.files
        for key in a.files:
            assert a[key].shape == (2, 4) and np.array_equal(a[key], b[key], equal_nan=True), key
    # a recorded pair is read back, not retrained
    monkeypatch.setattr(Trainer, "run", lambda self: pytest.fail("retrained a recorded pair"))
    assert stability.main(argv(tmp_path / "cut") + ["--resume"]) == 0


def test_random_baseline_on_a_jax_and_a_host_task():
    """random_return through core.run.evaluation_stepper on both kinds of task: gymnax Pendulum-v1's
    uniformly random return is about -1238 (256 episodes; the reward is at most 0, and one episode of
    200 steps scores at least -16.27 x 200); dm_control's cartpole-balance pays at most 1 per step of its
    1000, and the same seed gives the same episodes."""
    from diffrl.config.presets import resolve

    pendulum = stability.random_return(resolve("ppo", "gymnax/Pendulum-v1", None))
    assert pendulum == pytest.approx(-1238.5, rel=2e-3)
    cartpole = resolve("reppo", "dmc/cartpole-balance", None)
    first = stability.random_return(cartpole, episodes=2)
    assert 0 < first <= 1000 and stability.random_return(cartpole, episodes=2) == first
