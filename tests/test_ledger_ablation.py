"""Matrix 2's page (benchmarks/ledger_ablation.py) and the runs still filling (ledger_report): stability
measures and the bound-against-ablation comparisons against hand-computed values on synthetic records."""
from __future__ import annotations

import numpy as np
import pytest

import ledger_ablation
import ledger_plan
import ledger_report

TASK = "playground/CartpoleSwingup"
RANDOM = 0.0  # normalised = R / 1000


def _record(label: str, curves, base_seed: int = 0) -> dict:
    """A record of ``label``'s matrix-2 cell on CartpoleSwingup holding ``curves`` (E, K)."""
    cell = next(c for c in ledger_plan.matrix2() if c.task == TASK and c.label == label and c.base_seed == base_seed)
    curves = np.asarray(curves, np.float64)
    steps = np.linspace(0, cell.env_steps, len(curves)).astype(int).tolist()
    return {"cell": cell.cell_id, "matrix": "m2", "label": label, "algo": cell.algo, "task": TASK,
            "base_seed": base_seed, "num_seeds": curves.shape[1], "env_steps": steps, "samplers": ["mean"],
            "timing": {"wall_s": 600.0}, "machine": {}, "curves": {"mean": {"returns": curves.tolist()}}}


def _run(label: str, finals, peaks=None) -> ledger_report.Run:
    """Five seeds rising to ``peaks`` (default: their finals) half-way, then ending at ``finals``."""
    finals = np.asarray(finals, np.float64)
    peaks = finals if peaks is None else np.asarray(peaks, np.float64)
    return ledger_report.Run([_record(label, [np.zeros(5), peaks / 2, peaks, finals])])


def test_drop_and_collapse_count_seeds_that_learned_then_lost_it():
    run = _run("trudi-none", finals=[800, 100, 500, 700, 200], peaks=[800, 800, 600, 700, 300])
    drop = ledger_ablation.best_to_final_drop(run, RANDOM)
    np.testing.assert_allclose(drop, [0.0, 0.7, 0.1, 0.0, 0.1])
    row = next(line for line in ledger_ablation.run_lines("CartpoleSwingup", {"trudi-none": run}, RANDOM)
               if line.startswith("| trudi-none"))
    # median drop 0.1, worst 0.7; one seed (0.7 > 0.25) collapses
    assert "| 0.100 (0.700) | 1 of 5 |" in row


def test_largest_fall_sees_a_collapse_the_seed_recovered_from():
    curves = [[0, 0, 0, 0, 0], [500, 200, 800, 300, 100], [100, 800, 400, 600, 100], [800, 900, 900, 600, 50],
              [100, 850, 900, 650, 80]]
    run = ledger_report.Run([_record("trudi-none", curves)])
    fall = ledger_ablation.largest_fall(run, RANDOM)
    # by hand, per seed (columns): its evaluations, the best so far, the largest difference
    # s0: 0 500 100 800 100, best 0 500 500 800 800 -> 0.7;  s1: 0 200 800 900 850, best ... 900 900 -> 0.05
    # s2: 0 800 400 900 900, best 0 800 800 900 900 -> 0.4;  s3: 0 300 600 600 650, never falls -> 0.0
    # s4: 0 100 100 50 80, best 100 from e1 -> 0.05
    np.testing.assert_allclose(fall, [0.7, 0.05, 0.4, 0.0, 0.05])
    # the best-to-final drop misses seed 2's fall to 400, from which it recovered
    np.testing.assert_allclose(ledger_ablation.best_to_final_drop(run, RANDOM), [0.7, 0.05, 0.0, 0.0, 0.02])
    row = next(line for line in ledger_ablation.run_lines("CartpoleSwingup", {"trudi-none": run}, RANDOM)
               if line.startswith("| trudi-none"))
    assert "| 0.020 (0.700) | 1 of 5 | 0.050 (0.700) | 2 of 5 |" in row


def test_each_bound_is_compared_with_its_ablation_per_task_and_over_the_tasks():
    runs = {("m2", label, TASK, 1_024_000): _run(label, finals) for label, finals in {
        "trudi": [800, 820, 840, 860, 880], "trudi-none": [100, 200, 300, 400, 500],
        "dime-action": [100, 200, 300, 850, 900], "reppo": [800, 820, 840, 860, 880],
        "amdp": [500, 600, 700, 800, 900], "amdp-none": [500, 600, 700, 800, 900]}.items()}
    page = ledger_ablation.m2_table(runs, {TASK: RANDOM})
    assert "## CartpoleSwingup, 1,024,000 env steps per seed" in page and "## CheetahRun" not in page

    def row(x, y):
        return next(line for line in page.splitlines() if line.startswith(f"| {x} | {y} |"))

    # every TruDi seed above every unbounded seed; CheetahRun not run yet: the pooled value is CartpoleSwingup's
    assert row("trudi", "trudi-none").endswith("| 1.00 [1.00, 1.00] | not complete | 1.00 [1.00, 1.00] |")
    # Mann-Whitney by hand: dime-action's 850 beats 3 of TruDi's seeds and 900 all 5: P = 1 - 8 / 25 = 0.68
    p = 1 - (3 + 5) / 25
    assert row("trudi", "dime-action").split(" | ")[3].startswith(f"{p:.2f} [")
    # the same seeds: 5 ties counted half, and 10 pairs each way: P = (10 + 5 / 2) / 25 = 0.5
    assert row("amdp", "amdp-none").split(" | ")[3].startswith("0.50 [")
    assert row("trudi", "reppo").split(" | ")[3].startswith("0.50 [")


def test_the_steadier_curves_win_the_stability_comparison():
    # trudi's seeds never fall; trudi-none's fall 0.1..0.5 below their peak of 900 and end there
    runs = {("m2", "trudi", TASK, 1_024_000): _run("trudi", [800, 820, 840, 860, 880]),
            ("m2", "trudi-none", TASK, 1_024_000): _run("trudi-none", [800, 700, 600, 500, 400], peaks=[900] * 5)}
    page = ledger_ablation.m2_table(runs, {TASK: RANDOM})
    final, fall = page.split("## The bounds against their ablations: stability of the whole curve")
    assert "## The bounds against their ablations: final return" in final

    def row(text):
        return next(line for line in text.splitlines() if line.startswith("| trudi | trudi-none |"))

    # final returns: TruDi's 800 ties the unbounded 800 and beats the other 4, its other seeds beat all 5:
    # (24 + 1 / 2) / 25 = 0.98
    assert row(final).split(" | ")[3].startswith("0.98 [")
    # largest falls: 0 for every TruDi seed, > 0 for every unbounded one: P = 1
    assert row(fall).endswith("| 1.00 [1.00, 1.00] | not complete | 1.00 [1.00, 1.00] |")


def test_runs_still_filling_list_each_finished_seed_and_stay_out_of_the_tables():
    records = [_record("reppo", [[0.0], [853.5]], base_seed=0), _record("reppo", [[0.0], [700.04]], base_seed=2)]
    records += [_record("amdp", [[0.0], [v]], base_seed=s) for s, v in enumerate([500, 600, 700, 800, 900])]
    incomplete = ledger_report.incomplete_runs(records)
    lines = ledger_report.filling_lines(incomplete, "m2")
    assert "| CartpoleSwingup | reppo | 1,024,000 | 2 of 5 | 0: 853.5, 2: 700.0 |" in lines
    assert not any("| amdp |" in line for line in lines)  # complete: in the tables instead
    assert ledger_report.filling_lines(incomplete, "m3") == []
    runs = ledger_report.group_runs(records)
    assert list(runs) == [("m2", "amdp", TASK, 1_024_000)]
    assert runs[("m2", "amdp", TASK, 1_024_000)].final.tolist() == [500, 600, 700, 800, 900]
    (partial, planned), = incomplete.values()
    assert planned == 5 and partial.num_seeds == 2


@pytest.mark.parametrize("label", [label for label, _, _ in ledger_plan.M2_RUNS])
def test_every_run_of_the_plan_is_in_a_comparison(label):
    assert any(label in pair[:2] for pair in ledger_ablation.ABLATIONS)


def test_every_seed_of_a_matrix_2_run_is_drawn_in_its_own_panel(tmp_path):
    import ledger_figures

    filling_run = ledger_report.Run([_record("reppo", [[0.0], [853.5]], base_seed=2),
                                     _record("reppo", [[0.0], [700.0]], base_seed=4)])
    assert filling_run.seeds == [2, 4]  # each seed keeps its index in the run, for the legend and the tables
    runs = {("m2", "trudi", TASK, 1_024_000): _run("trudi", [800, 820, 840, 860, 880])}
    paths = ledger_figures.draw_figures(runs, {TASK: RANDOM}, tmp_path,
                                        {("m2", "reppo", TASK, 1_024_000): (filling_run, 5)})
    assert {p.name for p in paths} == {"curves_m2_CartpoleSwingup.png", "seeds_m2_CartpoleSwingup.png"}
    assert (tmp_path / "seeds_m2_CartpoleSwingup.png").stat().st_size > 10_000
