"""Matrix 3's page (benchmarks/ledger_replay.py): the off-policy runs per seed beside the on-policy ones,
undefined entropies left out, and when each seed committed, on synthetic records."""
from __future__ import annotations

import json

import ledger_plan
import ledger_replay
import ledger_report


def test_matrix_3_shows_the_on_policy_runs_per_seed_beside_its_own(tmp_path):
    record = {"algo": "trudi", "env": "toy/MirrorGoals", "trained_env_steps": 97280, "samplers": ["sde", "noise-free"],
              "final": {"sde": {"episode_return": [21.5, 12.9, 29.7], "behaviour_entropy": [0.0, float("nan"), 0.69],
                                "mode_reached": [0.86, 0.0, 1.0]},
                        "noise-free": {"episode_return": [0.0] * 3, "behaviour_entropy": [0.0] * 3,
                                       "mode_reached": [0.0] * 3}}}
    (tmp_path / "toy_MirrorGoals--trudi.json").write_text(json.dumps(record))
    table = ledger_replay.m3_table({}, grid=tmp_path)
    assert "## toy/MirrorGoals: the on-policy runs" in table and "OctahedronGoals" not in table
    row = next(line for line in table.splitlines() if line.startswith("| trudi (on-policy"))
    # the default (first) sampler; entropy's median over the seeds that reached a goal
    assert row.startswith("| trudi (on-policy, 97,280 steps, sde) | 21.50 [")
    assert "(21.50, 12.90, 29.70) | 0.34 (0.00, n/a, 0.69) | 0.86, 0.00, 1.00 |" in row


def test_matrix_3_leaves_the_entropy_of_a_seed_that_reached_no_goal_undefined(tmp_path):
    """The evaluator writes entropy 0 when no episode reached a goal (an empty histogram); the table must not
    read that as 'committed to one goal'."""
    cell = ledger_plan.Cell("m3", "sac", "sac", "toy/MirrorGoals", 98_304, 0, 3)
    record = {"matrix": "m3", "label": "sac", "algo": "sac", "task": cell.task, "base_seed": 0, "num_seeds": 3,
              "env_steps": [0, 98_304], "samplers": ["mean"], "timing": {"wall_s": 60.0}, "machine": {},
              "curves": {"mean": {"returns": [[0.0] * 3, [-0.5, 20.0, 25.0]],
                                  "behaviour_entropy": [[0.0] * 3, [-0.0, 0.0, 0.5]],
                                  "mode_reached": [[0.0] * 3, [0.0, 0.9, 1.0]]}}}
    table = ledger_replay.m3_table({("m3", "sac", cell.task, 98_304): ledger_report.Run([record])}, grid=tmp_path)
    row = next(line for line in table.splitlines() if line.startswith("| sac (3 seeds)"))
    assert row.endswith("| 0.25 (n/a, 0.00, 0.50) | 0.00, 0.90, 1.00 |"), row


def test_each_seed_shows_its_highest_entropy_after_step_0_and_its_first_evaluation_reaching_a_goal(tmp_path):
    cell = ledger_plan.Cell("m3", "dime-off", "dime-off", "toy/MirrorGoals", 98_304, 0, 3)
    # seed 0 spreads over both goals at the first evaluation, then commits; seed 1 reaches a goal in a
    # fifth of its episodes only (entropy counts, 'first' does not); seed 2 never reaches one after step 0
    entropy = [[1.0, 1.0, 1.0], [0.9, 0.0, 0.0], [0.0, 0.4, 0.0], [0.0, 0.0, 0.0]]
    reached = [[0.05, 0.05, 0.05], [0.6, 0.0, 0.0], [1.0, 0.2, 0.0], [1.0, 0.1, 0.0]]
    record = {"matrix": "m3", "label": "dime-off", "algo": "dime-off", "task": cell.task, "base_seed": 0,
              "num_seeds": 3, "env_steps": [0, 32_768, 65_536, 98_304], "samplers": ["sde"],
              "timing": {"wall_s": 60.0}, "machine": {},
              "curves": {"sde": {"returns": [[0.0] * 3, [10.0, 0.0, 0.0], [30.0, 5.0, 0.0], [31.0, 2.0, -0.5]],
                                 "behaviour_entropy": entropy, "mode_reached": reached}}}
    run = ledger_report.Run([record])
    lines = ledger_replay.commitment_lines([run])
    assert "| toy/MirrorGoals | dime-off | 98,304 | 0.90, 0.40, n/a | 32,768, never, never |" in lines
    table = ledger_replay.m3_table({("m3", "dime-off", cell.task, 98_304): run}, grid=tmp_path)
    assert "## When each seed committed" in table and "## toy/MirrorGoals: the on-policy runs" not in table
    assert ledger_replay.commitment_lines([]) == []
