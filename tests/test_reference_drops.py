"""benchmarks/reference_drops.py and reference_stability.py: the official REPPO's late drops.

reference_drops.py reads the REPPO repository's published per-seed curves; here it reads hand-made
CSVs in that repository's layout whose drops are known. reference_stability.py runs the reference
code itself (a checkout, not in CI); here only what a user without one, or with bad sizes, sees.
"""
import numpy as np
import pytest

import reference_drops
import reference_stability
import stability

STEPS = np.linspace(0.0, 190.0, 20)  # the repository's grid: 20 points


def write_csv(path, curves):
    """curves: (seeds, 20) returns -> results/<Task>_<setting>.csv as the repository has them."""
    lines = ["steps," + ",".join(f"trial_{i}" for i in range(len(curves)))]
    for e, step in enumerate(STEPS):
        lines.append(f"{step}," + ",".join(repr(float(c[e])) for c in curves))
    path.write_text("\n".join(lines) + "\n")


def test_a_seed_drops_by_the_stability_tables_definition(tmp_path):
    steady = np.full(20, 990.0)
    late_fall = np.full(20, 990.0)
    late_fall[16] = 700.0  # 0.29 of [0, 1000] below its best, in the last third (index >= 13)
    early_fall = np.full(20, 990.0)
    early_fall[5] = 100.0  # long before the last third: not counted
    small = np.full(20, 990.0)
    small[18] = 800.0  # 0.19: under the threshold with the floor 0 ...
    write_csv(tmp_path / "CartpoleBalance_medium_data.csv", [steady, late_fall, early_fall, small])
    rows = reference_drops.summarise(tmp_path, ["CartpoleBalance"], ["medium_data"], {})
    assert rows[0]["seeds"] == 4 and rows[0]["dropping"] == 1 and rows[0]["dropped_finals"] == [990]
    assert rows[0]["largest"] == pytest.approx(0.29)
    # ... and over it with a measured random floor: 190 / (1000 - 356.7) = 0.30
    rows = reference_drops.summarise(tmp_path, ["CartpoleBalance"], ["medium_data"], {"CartpoleBalance": 356.7})
    assert rows[0]["dropping"] == 2 and rows[0]["largest"] == pytest.approx(290.0 / 643.3)
    # the same statistic as stability.py's tables, seed by seed
    for curve, expected in zip([late_fall, small], [0.29, 0.19]):
        assert stability.worst_drop(STEPS, curve / 1000.0, STEPS[-1]) == pytest.approx(expected)


def test_the_report_pools_settings_and_skips_missing_files(tmp_path):
    fall = np.full(20, 1000.0)
    fall[19] = 200.0
    write_csv(tmp_path / "CheetahRun_small_data.csv", [np.full(20, 800.0), fall])
    write_csv(tmp_path / "WalkerRun_small_data.csv", [np.full(20, 500.0)])
    rows = reference_drops.summarise(tmp_path, ["CheetahRun", "WalkerRun", "HopperHop"], ["small_data", "ppo"], {})
    assert [(r["task"], r["setting"]) for r in rows] == [("CheetahRun", "small_data"), ("WalkerRun", "small_data")]
    text = reference_drops.report(rows)
    assert "| small_data | 2 | 3 | 1 (33.3 %) | CheetahRun |" in text
    assert "| CheetahRun | small_data | 0 | 2 | 1 | 0.80 | 200 |" in text


def test_bad_files_and_folders_are_refused(tmp_path, capsys):
    (tmp_path / "CheetahRun_ppo.csv").write_text("time,seed_a\n0,1\n")
    with pytest.raises(ValueError, match="expected a header 'steps,trial_0"):
        reference_drops.read_curves(tmp_path / "CheetahRun_ppo.csv")
    with pytest.raises(SystemExit):
        reference_drops.main(["--results", str(tmp_path / "missing")])
    assert "no such folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reference_drops.main(["--results", str(tmp_path), "--settings", "small_data"])
    assert "no <Task>_<setting>.csv" in capsys.readouterr().err


def test_reference_stability_without_a_checkout_says_how_to_get_one(tmp_path, capsys):
    with pytest.raises(SystemExit):
        reference_stability.main(["--reference", str(tmp_path / "no-reppo"), "--out", str(tmp_path / "out")])
    said = capsys.readouterr().err
    assert "git clone https://github.com/cvoelcker/reppo" in said and not (tmp_path / "out").exists()


def test_reference_stability_refuses_more_evaluations_than_updates(tmp_path, capsys):
    checkout = tmp_path / "reppo" / "src" / "jaxrl"
    checkout.mkdir(parents=True)
    (checkout / "reppo.py").write_text("")
    with pytest.raises(SystemExit):  # 4096 steps of 32 x 32 = 4 updates
        reference_stability.main(["--reference", str(tmp_path / "reppo"), "--total-env-steps", "4096",
                                  "--num-evals", "8", "--out", str(tmp_path / "out")])
    assert "4 updates cannot hold 8 evaluations" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        reference_stability.main(["--reference", str(tmp_path / "reppo"), "--num-seeds", "0",
                                  "--out", str(tmp_path / "out")])
    assert "--num-seeds must be >= 1" in capsys.readouterr().err


def test_reference_stability_refuses_an_env_the_reference_cannot_step(tmp_path, capsys):
    with pytest.raises(SystemExit):  # the reference wraps Playground tasks only
        reference_stability.main(["--env", "gymnax/Pendulum-v1", "--out", str(tmp_path / "out")])
    assert "invalid choice: 'gymnax/Pendulum-v1'" in capsys.readouterr().err
