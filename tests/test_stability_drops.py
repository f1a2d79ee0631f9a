"""benchmarks/stability_drops.py on a hand-made run: which late drops the training reward shared."""
import json

import numpy as np

import stability
import stability_drops

STEPS = [0, 100, 200, 300, 400, 500, 600]  # 6 evaluation intervals of 10 iterations (10 steps each)


def record(returns):
    return {"algo": "reppo", "env_steps": STEPS, "trained_env_steps": 600, "random_return": 0.0,
            "max_return": 1.0, "per_sampler": {"mean": {"returns": np.asarray(returns).T.tolist()}}}


def test_drops_are_classified_by_the_training_reward_of_their_interval(tmp_path):
    returns = [
        [0.2, 0.9, 1.0, 1.0, 1.0, 0.3, 1.0],  # seed 0: falls at 500; training reward holds
        [0.2, 0.9, 1.0, 1.0, 1.0, 0.4, 1.0],  # seed 1: falls at 500; training reward collapses
        [0.2, 0.9, 1.0, 1.0, 0.9, 0.95, 1.0],  # seed 2: 0.1 below its best: not a drop
        [0.2, 1.0, 0.1, 1.0, 1.0, 1.0, 1.0],  # seed 3: falls at 200, before the last third
    ]
    train = np.full((4, 60), 0.95)
    train[1, 45] = 0.3  # inside seed 1's interval (iterations 40-49)
    train[0, 57] = 0.3  # 7 iterations after seed 0's evaluation: beyond the 5 looked at
    found = stability_drops.drops(record(returns), train, "mean")
    assert [(d["seed"], d["kind"], d["env_steps"]) for d in found] == [(0, "evaluation", 500), (1, "training", 500)]
    for d in found:  # the same statistic as stability.py's tables
        values = np.asarray(returns[d["seed"]], float)
        assert np.isclose(d["drop"], stability.worst_drop(np.asarray(STEPS), values, 600))
    assert np.isclose(found[1]["train_min"], 0.3) and np.isclose(found[0]["train_before"], 0.95)
    # the evaluated policy's own rollout comes after the evaluation: a dip there is the training's too
    late_dip = train.copy()
    late_dip[0, 52] = 0.3
    assert stability_drops.drops(record(returns), late_dip, "mean")[0]["kind"] == "training"
    assert stability_drops.drops(record(returns), late_dip, "mean", after=0)[0]["kind"] == "evaluation"

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x--reppo.json").write_text(json.dumps(record(returns)))
    np.savez(tmp_path / "run" / "x--reppo.npz", train__reward=train)
    text = stability_drops.report([f"preset={tmp_path / 'run'}"])
    assert "| preset | reppo | mean | 0 | 500 | 0.70 | 0.30 | 0.950 -> 0.950 | evaluation |" in text
    assert text.rstrip().endswith("Drops by kind: evaluation: 1, training: 1.")
