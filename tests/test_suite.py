"""benchmarks/suite.py end to end on a toy task: records, resumption, plans of both modes."""
import json

import numpy as np
import pytest

import suite
from suite_records import SCHEMA, read_records, record_path
from suite_settings import PAPER_DMC_TASKS

TOY = ["--algos", "ppo", "--tasks", "toy/MirrorGoals", "--seeds", "2", "--total-env-steps", "4096",
       "--num-evals", "2", "--eval-envs", "4"]


def test_suite_trains_writes_one_record_per_seed_resumes_and_aggregates(tmp_path, capsys):
    out = tmp_path / "suite"
    assert suite.main([*TOY, "--out", str(out)]) == 0
    records = read_records(out)
    assert sorted((r["algo"], r["seed"]) for r in records) == [("ppo", 0), ("ppo", 1)]
    for r in records:
        assert r["schema"] == SCHEMA and r["task"] == "toy/MirrorGoals" and r["base_seed"] == 0
        assert r["env_steps"][0] == 0 and r["env_steps"][-1] == r["final_env_steps"] == 4096
        assert len(r["env_steps"]) == len(r["walltime"]) == len(r["returns"]) == 3  # step 0 + 2 evaluations
        assert np.all(np.diff(r["env_steps"]) > 0) and np.all(np.diff(r["walltime"]) > 0)
        assert r["final_return"] == r["returns"][-1] and np.all(np.isfinite(r["returns"]))
        assert r["config"]["num_seeds"] == 2 and r["config"]["total_env_steps"] == 4096
        assert r["program"]["num_seeds"] == 2 and r["program"]["compile_s"] > 0
        assert r["versions"]["jax"] and r["sampler"] == "mean"
    # the two seeds of a program are different runs (vmapped with different keys)
    ppo = {r["seed"]: r for r in records}
    assert ppo[0]["returns"][1:] != ppo[1]["returns"][1:]
    # the records agree with the trainer's per-seed log
    log = (out / "train" / "toy_MirrorGoals--ppo" / "metrics.jsonl").read_text().splitlines()
    logged = [row["eval/seed_returns"][1] for row in map(json.loads, log) if "eval/seed_returns" in row]
    assert logged == pytest.approx(ppo[1]["returns"])

    # aggregate ran: its per-task mean is the mean of the records' final returns
    stats = json.loads((out / "aggregate" / "aggregate.json").read_text())
    (cell,) = stats["per_task"]
    finals = [r["final_return"] for r in records]
    assert cell["mean"] == pytest.approx(np.mean(finals)) and cell["ci_low"] <= cell["mean"] <= cell["ci_high"]
    assert stats["unnormalised_tasks"] == ["toy/MirrorGoals"]
    for name in ("table.md", "curves_env_steps.png", "curves_walltime.png", "iqm.png", "iqm_curve.png"):
        assert (out / "aggregate" / name).stat().st_size > 0

    # rerunning skips finished programs (records untouched); a missing record retrains its program
    path = record_path(out, "ppo", "toy/MirrorGoals", 1)
    before = {p: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    assert suite.main([*TOY, "--out", str(out), "--no-aggregate"]) == 0
    assert {p: p.stat().st_mtime_ns for p in (out / "runs").iterdir()} == before
    assert "1 skipped" in capsys.readouterr().err
    # other settings in the same directory are refused instead of mixed in
    assert suite.main([*TOY[:-2], "--eval-envs", "8", "--out", str(out), "--no-aggregate"]) == 2
    assert "different settings" in capsys.readouterr().err
    path.unlink()
    assert suite.main([*TOY, "--out", str(out), "--no-aggregate"]) == 0
    assert path.exists() and "1 resumed" in capsys.readouterr().err  # from the program's final checkpoint
    assert json.loads(path.read_text())["returns"] == pytest.approx(ppo[1]["returns"])


def test_quick_plan_gives_every_algorithm_the_same_budget(tmp_path, capsys):
    assert suite.main(["--quick", "--out", str(tmp_path), "--dry-run"]) == 0
    settings = suite.settings_from_args(suite.build_parser().parse_args(["--quick", "--out", str(tmp_path)]))
    programs = suite.plan(settings, {}, tmp_path)
    assert {a for a, _, _ in programs} == {"ppo", "reppo", "trudi", "amdp"} and len(programs) == 12
    assert {c.trained_env_steps for _, _, c in programs} == {settings.total_env_steps}
    assert {c.preset for _, _, c in programs} == {"ppo-dmc-cpu", "reppo-dmc-cpu", "trudi-dmc-cpu", "amdp-dmc-cpu"}
    assert {c.num_seeds for _, _, c in programs} == {2}
    assert not (tmp_path / "runs").exists()  # a dry run trains and writes nothing


def test_paper_plan_is_the_23_dmc_tasks_at_1024_envs_and_50m_steps(tmp_path):
    settings = suite.settings_from_args(suite.build_parser().parse_args(["--paper", "--out", str(tmp_path)]))
    programs = suite.plan(settings, {}, tmp_path)
    assert len(PAPER_DMC_TASKS) == 23 and len(programs) == 23 * 4
    assert {t for _, t, _ in programs} == set(PAPER_DMC_TASKS)
    assert {c.num_envs for _, _, c in programs} == {1024}
    assert all(abs(c.trained_env_steps - 50_000_000) < 0.005 * 50_000_000 for _, _, c in programs)
    assert {c.preset for _, _, c in programs} == {"ppo-dmc", "reppo-dmc-small", "trudi-dmc-small", "amdp-dmc-small"}


def test_overrides_and_bad_input_are_reported_before_training(tmp_path, capsys):
    args = suite.build_parser().parse_args(["--quick", "--tasks", "CartpoleSwingup", "--seeds", "3",
                                            "--out", str(tmp_path)])
    programs = suite.plan(suite.settings_from_args(args), suite.parse_overrides(["reppo:reppo.num_epochs=2"]),
                          tmp_path)
    assert {t for _, t, _ in programs} == {"playground/CartpoleSwingup"}
    assert {c.num_seeds for _, _, c in programs} == {3}
    epochs = {a: c.reppo.num_epochs for a, _, c in programs if hasattr(c, "reppo")}  # ppo's config has none
    assert epochs["reppo"] == 2
    assert epochs["trudi"] != 2
    assert suite.main(["--out", str(tmp_path), "--algos", "ppo,nope", "--tasks", "CartpoleSwingp",
                       "--total-env-steps", "9000"]) == 2
    err = capsys.readouterr().err
    assert "unknown algorithm 'nope'" in err and "did you mean playground/CartpoleSwingup" in err
    assert suite.main(["--out", str(tmp_path), "--algos", "ppo", "--tasks", "CartpoleSwingup"]) == 2
    assert "--total-env-steps" in capsys.readouterr().err
    assert suite.main(["--quick", "--total-env-steps", "100", "--out", str(tmp_path)]) == 2
    assert "smaller than one iteration" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
