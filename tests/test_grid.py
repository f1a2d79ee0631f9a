"""benchmarks/grid.py: the --set settings of every benchmark driver, their scopes, and the one loop over cells."""
import pytest

import grid


def test_settings_keep_their_scope_and_text_and_refuse_an_item_without_a_value():
    settings = grid.parse_settings(["num_envs=16", "reppo:reppo.num_epochs=2", "toy/MirrorGoals@seed=3"])
    assert settings == {"num_envs": "16", "reppo:reppo.num_epochs": "2", "toy/MirrorGoals@seed": "3"}
    for bad in ("num_envs", "=3"):
        with pytest.raises(ValueError, match="key=value or algo:key=value"):
            grid.parse_settings([bad])


def test_a_setting_applies_to_every_cell_or_to_its_algorithm_or_task_only():
    settings = grid.parse_settings(["num_envs=16", "reppo:reppo.num_epochs=2", "toy/MirrorGoals@seed=3"])
    reppo = grid.cell_config("reppo", "toy/MirrorGoals", None, settings)
    assert (reppo.num_envs, reppo.reppo.num_epochs, reppo.seed) == (16, 2, 3)
    trudi = grid.cell_config("trudi", "toy/CornerBandit", None, settings, seed=5)
    default = grid.cell_config("trudi", "toy/CornerBandit", None, {})
    assert (trudi.num_envs, trudi.reppo.num_epochs, trudi.seed) == (16, default.reppo.num_epochs, 5)


def test_the_grid_goes_task_by_task_keeps_recorded_cells_and_reports_after_each_trained_one():
    cells = grid.cells(["ppo", "reppo"], ["a/X", "b/Y"])
    assert [(c.algo, c.env) for c in cells] == [("ppo", "a/X"), ("reppo", "a/X"), ("ppo", "b/Y"), ("reppo", "b/Y")]
    assert cells[0].name == "a_X--ppo"
    events = []
    records = grid.run_grid(cells, lambda c: f"trained {c.name}",
                            recorded=lambda c: "kept" if c.algo == "reppo" else None,
                            announce=lambda c: events.append(c.name), after=lambda rs: events.append(len(rs)))
    assert records == ["trained a_X--ppo", "kept", "trained b_Y--ppo", "kept"]
    assert events == ["a_X--ppo", 1, "b_Y--ppo", 3]


def test_evaluated_samplers_are_the_offered_ones_with_a_note_on_renamed_names():
    config = grid.cell_config("trudi", "toy/CornerBandit", None, {})
    every, note = grid.evaluated_samplers(config)
    assert "sde" in every and note == ""
    kept, note = grid.evaluated_samplers(config, ["sde", "ode"])
    assert kept == ("sde",) and "'ode' is now 'reversal-ode'" in note
