"""The benchmark ledger: config hash, plan, scheduler, one real cell (interrupted and continued),
report statistics against plain-Python oracles, and the committed report being current."""
from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import ledger
import ledger_cell
import ledger_breadth
import ledger_families
import ledger_plan
import ledger_report
from ledger_records import (SCHEMA, config_hash, hashed_settings, settings_hash, validate_record)
from diffrl.config import as_full_config
from diffrl.config.presets import default_preset


# -- the config hash --------------------------------------------------------------------------
def test_hash_is_over_values_the_algorithm_reads_not_layout():
    cell = ledger_plan.matrix1()[0]
    config = ledger_cell.cell_config(cell)
    settings = hashed_settings(config)
    assert list(settings) == sorted(settings) and "ppo.clip_eps" in settings and "out" not in settings
    # the same values in another order hash the same
    assert settings_hash(dict(reversed(list(settings.items())))) == config_hash(config)
    # a section PPO does not read (which only a TrainConfig holds), a run-local field and the preset's
    # name change nothing
    full = as_full_config(config)
    other = dataclasses.replace(full, reppo=dataclasses.replace(full.reppo, kl_bound=0.5),
                                out="/elsewhere", progress=True, preset="renamed")
    assert config_hash(other) == config_hash(config)
    # a value PPO reads changes the hash
    changed = dataclasses.replace(config, ppo=dataclasses.replace(config.ppo, clip_eps=config.ppo.clip_eps + 0.05))
    assert config_hash(changed) != config_hash(config)
    assert config_hash(dataclasses.replace(config, total_env_steps=1)) != config_hash(config)


# config_hash of presets (and presets with a moved setting changed) computed at commit 55494c5, before the
# trust-region settings moved to the algorithm's section (diffrl.config.MOVED_FIELDS), with the old names
# (diffusion.trust_region, adjoint.trust_region, adjoint.kl_bound). A deliberate change of a hashed
# default changes them, as it makes the ledger's records stale.
HASHES_BEFORE_THE_MOVE = {
    "trudi-toy": "74015490f3e4ff25", "dime-toy": "247e4aa9c9164e09", "amdp-toy": "c127eed95e1dc217",
    "amdp-backprop-toy": "0bd05bd361c29a9f", "amdp-off-gymnax": "c9c8af8504f1feba",
    "dime-off-gymnax": "718be7693640330a", "dppo-toy": "1b5fb68bf2616b59", "reppo-toy": "823cb628409d2c7c",
    "sac-gymnax": "6ec98ba123010700",
}
CHANGED_BEFORE_THE_MOVE = {  # (preset, new name, value): hash with the old name set to the value
    ("trudi-toy", "reppo.trust_region", "none"): "0b44ae8ae3999474",
    ("amdp-toy", "reppo.kl_multiplier", "none"): "484a177f0e5b118b",
    ("amdp-toy", "reppo.kl_multiplier", "dual"): "6eafc582f26f020d",
    ("amdp-toy", "reppo.kl_bound", 0.2): "046072e30fbd9998",
    ("amdp-off-gymnax", "offpolicy.kl_bound", 0.2): "446f8a3d5e5777f5",
}


def test_moved_settings_hash_under_their_old_names():
    """Records written before the trust-region settings moved stay valid: every algorithm with a moved
    setting hashes as it did before the move (ledger_records._named_as_before_the_move)."""
    from diffrl.config import TrainConfig
    from diffrl.config.overrides import set_field
    from diffrl.config.presets import apply_preset

    for name, expected in HASHES_BEFORE_THE_MOVE.items():
        assert config_hash(apply_preset(TrainConfig(), name)) == expected, name
    for (name, dotted, value), expected in CHANGED_BEFORE_THE_MOVE.items():
        config = set_field(apply_preset(TrainConfig(), name), dotted, value)
        assert config_hash(config) == expected, (name, dotted, value)
    settings = hashed_settings(apply_preset(TrainConfig(), "amdp-toy"))
    assert settings["adjoint.kl_bound"] == 0.1 and "reppo.kl_bound" not in settings
    assert not any(k.startswith(("reppo.kl_multiplier", "reppo.trust_region", "offpolicy.kl_")) for k in settings)


def test_plan_cells_resolve_with_untuned_presets_and_whole_budgets():
    cells = ledger_plan.plan()
    assert len({c.cell_id for c in cells}) == len(cells)
    m1 = [c for c in cells if c.matrix == "m1"]
    assert {c.task.split("/")[1] for c in m1} == set(ledger_plan.M1_TASKS) and len(ledger_plan.M1_TASKS) == 23
    for (algo, task), group in itertools.groupby(sorted(m1, key=lambda c: (c.algo, c.task)), lambda c: (c.algo, c.task)):
        group = list(group)
        assert sum(c.num_seeds for c in group) == ledger_plan.M1_SEEDS
        assert len({c.base_seed for c in group}) == len(group)  # no two cells share a seed
    for cell in cells:
        config = ledger_cell.cell_config(cell)  # raises on a budget that is not whole chunks
        assert config.trained_env_steps == cell.env_steps
        assert config.eval_samplers == ledger_cell.policy_samplers(cell.algo)
        if cell.matrix == "m1":  # what `diffrl train` picks, unchanged
            assert cell.preset is None and config.preset == default_preset(cell.algo, cell.task)
            assert not cell.overrides and cell.env_steps == ledger_plan.M1_BUDGET


# -- the scheduler ----------------------------------------------------------------------------
def _tiny_cells(task="gymnax/Pendulum-v1"):
    kw = dict(num_evals=2, eval_envs=4, overrides={"num_envs": 8, "num_steps": 8, "ppo.num_minibatches": 2})
    return [ledger_plan.Cell("t", "ppo", "ppo", task, 256, base_seed=i, num_seeds=2, **kw) for i in range(3)]


def test_run_skips_current_records_and_never_starts_a_cell_that_does_not_fit(monkeypatch, tmp_path):
    cells = _tiny_cells()
    monkeypatch.setattr(ledger_plan, "plan", lambda: cells)
    monkeypatch.setattr(ledger_cell, "RECORDS", tmp_path / "records")
    config = ledger_cell.cell_config(cells[0])
    (tmp_path / "records").mkdir()
    done = _synthetic_record(cells[0], config, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    (tmp_path / "records" / f"{cells[0].cell_id}.json").write_text(json.dumps(done))
    estimates = {cells[1].cell_id: 30 * 60.0, cells[2].cell_id: 5 * 60.0}
    monkeypatch.setattr(ledger.Estimator, "seconds", lambda self, cell, cfg: estimates[cell.cell_id])
    lines = []
    assert ledger.run(1, 20, dry_run=True, log=lines.append) == 0
    started = [line for line in lines if line.startswith("[ledger] start")]
    assert len(started) == 1 and cells[2].cell_id in started[0]  # cell 0 done, cell 1 too long
    # a record whose hash is not the code's is stale and rerun
    stale = dict(done, config=dict(done["config"], **{"ppo.clip_eps": 0.9}))
    stale["config_hash"] = settings_hash(stale["config"])
    (tmp_path / "records" / f"{cells[0].cell_id}.json").write_text(json.dumps(stale))
    status, detail = ledger_cell.cell_status(cells[0], ledger_cell.load_records(tmp_path / "records"), config)
    assert status == "stale" and "ppo.clip_eps" in detail


def test_run_skips_a_cell_another_process_recorded_after_it_began(monkeypatch, tmp_path):
    cells = _tiny_cells()
    monkeypatch.setattr(ledger_plan, "plan", lambda: cells)
    monkeypatch.setattr(ledger_cell, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(ledger, "load_records", lambda: {})  # when this run began, nothing was recorded
    monkeypatch.setattr(ledger.Estimator, "seconds", lambda self, cell, cfg: 60.0)
    (tmp_path / "records").mkdir()  # since then, the other core's run has finished cell 0
    done = _synthetic_record(cells[0], ledger_cell.cell_config(cells[0]), [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    (tmp_path / "records" / f"{cells[0].cell_id}.json").write_text(json.dumps(done))
    launched = []

    class Finished:
        returncode = 0

        def poll(self):
            return 0

    monkeypatch.setattr(ledger, "_launch", lambda cell, cpu, log_dir: launched.append(cell.cell_id) or Finished())
    lines = []
    ledger.run(1, 20, cpus="0", log=lines.append)
    assert launched == [cells[1].cell_id, cells[2].cell_id]
    assert any(cells[0].cell_id in line and "recorded by another process" in line for line in lines)


@pytest.mark.heavy(60)
def test_cell_interrupted_leaves_no_record_then_continues_to_a_valid_one(monkeypatch, tmp_path):
    from diffrl.core import trainer as trainer_module

    cell = _tiny_cells()[0]
    original_init = trainer_module.Trainer.__init__

    def stop_after_first_chunk(self, *a, **kw):
        original_init(self, *a, **kw)
        self.progress_fn = lambda row: self.request_stop()

    monkeypatch.setattr(trainer_module.Trainer, "__init__", stop_after_first_chunk)
    records = tmp_path / "records"
    assert ledger_cell.run_cell(cell, tmp_path / "scratch", records) is None
    assert not records.exists() or not list(records.glob("*.json"))  # nothing that looks finished
    assert (tmp_path / "scratch" / cell.cell_id).is_dir()  # the checkpoint to continue from
    monkeypatch.setattr(trainer_module.Trainer, "__init__", original_init)
    record = ledger_cell.run_cell(cell, tmp_path / "scratch", records)
    assert record["timing"]["resumed"] and not (tmp_path / "scratch" / cell.cell_id).exists()
    on_disk = validate_record(json.loads((records / f"{cell.cell_id}.json").read_text()))
    assert on_disk["env_steps"] == [0, 128, 256] and on_disk["samplers"] == ["mean", "sample"]
    assert np.asarray(on_disk["curves"]["sample"]["returns"]).shape == (3, 2)
    assert on_disk["config_hash"] == config_hash(ledger_cell.cell_config(cell))
    assert on_disk["machine"]["cpu"] and on_disk["versions"]["jax"]
    assert on_disk["timing"]["cpu_s"] > 0  # the process's CPU time: was the core the cell's alone?


def test_a_cell_another_process_trains_is_left_alone(monkeypatch, tmp_path):
    """Two `run` processes with overlapping selections: the second start of a cell is refused before it
    touches the first's run directory, and `ledger.py cell` exits with BUSY_EXIT, which `run` reports."""
    import jax

    from diffrl.core.run_lock import RunDirLock, RunDirLocked

    cell = _tiny_cells()[0]
    scratch = tmp_path / "scratch"
    (scratch / cell.cell_id).mkdir(parents=True)
    marker = scratch / cell.cell_id / "metrics.jsonl"  # the live cell's run directory, no checkpoint yet
    marker.write_text("{}\n")
    (scratch / "claims" / cell.cell_id).mkdir(parents=True)
    with RunDirLock(scratch / "claims" / cell.cell_id):  # the first process's claim
        with pytest.raises(RunDirLocked, match="another training process"):
            ledger_cell.run_cell(cell, scratch, tmp_path / "records")
        assert marker.read_text() == "{}\n"  # not removed as a directory without a checkpoint
        monkeypatch.setattr(ledger_plan, "plan", lambda: [cell])
        monkeypatch.setattr(ledger_cell, "SCRATCH", scratch)
        monkeypatch.setattr(ledger, "SCRATCH", scratch)
        cache = jax.config.jax_compilation_cache_dir
        try:
            assert ledger.main(["cell", cell.cell_id]) == ledger_cell.BUSY_EXIT
        finally:
            jax.config.update("jax_compilation_cache_dir", cache)
    assert not (tmp_path / "records").exists()


@pytest.mark.heavy(60)
def test_a_cell_that_diverges_is_trained_to_its_budget_and_recorded_with_its_diverged_seeds(tmp_path):
    """A NaN stops a program (check_finite); the ledger records it instead of retrying it every session."""
    base = _tiny_cells()[0]
    # rewards near float32's largest value: the value loss overflows in the first chunk on both seeds
    cell = dataclasses.replace(base, overrides={**base.overrides, "reward_scale": 1e38})
    record = ledger_cell.run_cell(cell, tmp_path / "scratch", tmp_path / "records")
    on_disk = validate_record(json.loads((tmp_path / "records" / f"{cell.cell_id}.json").read_text()))
    assert on_disk["diverged"]["seeds"] == [0, 1] and "non-finite" in on_disk["diverged"]["error"]
    assert on_disk["env_steps"] == [0, 128, 256]  # trained on to the budget without the check
    assert np.isnan(np.asarray(on_disk["curves"]["mean"]["returns"][-1], np.float64)).all()
    assert on_disk["config_hash"] == config_hash(ledger_cell.cell_config(cell))  # the check changes no number
    assert record["diverged"] == on_disk["diverged"]


def test_a_cell_ran_under_load_when_its_process_had_less_than_its_core_or_else_by_load_averages():
    from ledger_records import ran_under_load

    def record(cpu_s=None, start=(1.0, 0.5, 0.2), end=(2.1, 2.0, 2.0)):
        timing = {"wall_s": 1000.0, **({} if cpu_s is None else {"cpu_s": cpu_s})}
        return {"timing": timing, "machine": {"cpu_count": 2, "loadavg_start_end": [list(start), list(end)]}}

    # measured: alone on its core (0.95-0.97 of the wall-clock), or sharing it (about 0.5-0.7)
    assert not ran_under_load(record(cpu_s=960.0)) and ran_under_load(record(cpu_s=650.0))
    # the CPU time wins over the machine-wide load average (work on the other core raises that too)
    assert not ran_under_load(record(cpu_s=960.0, end=(3.1, 3.2, 3.2)))
    # older records: the 1-minute average at the start, or any average at the end, above cores + 1
    assert not ran_under_load(record())
    assert ran_under_load(record(start=(3.5, 1.0, 1.0)))
    assert not ran_under_load(record(start=(1.0, 3.5, 3.5)))  # the start's 5/15 minutes precede the cell
    # REPPO's HumanoidStand cell of 2026-12-07: a second job shared its core for its last hour (94 min
    # against 37 estimated); its 1-minute averages (1.04 at the start, 2.86 at the end) missed it
    assert ran_under_load(record(start=(1.04, 0.54, 0.21), end=(2.86, 3.08, 3.16)))
    assert not ran_under_load({"timing": {}, "machine": {"cpu_count": 2, "loadavg_start_end": [None, None]}})


def test_the_toy_tasks_lowest_returns_follow_from_their_reward():
    from diffrl.envs.toy import MirrorGoalsConfig, MirrorGoals, OctahedronGoals

    config = MirrorGoalsConfig()  # reward exp(-d^2 / w) - action_cost |a|^2, a in [-1, 1]^n, 40 steps
    for task, env in (("toy/MirrorGoals", MirrorGoals(config)), ("toy/OctahedronGoals", OctahedronGoals(config))):
        lowest = -config.action_cost * env.spec.action_size * config.episode_length
        assert ledger_report.diverged_score(task) == pytest.approx(lowest)
    assert ledger_report.diverged_score("playground/CheetahRun") == 0.0


def test_diverged_seeds_are_found_in_the_state_or_the_last_evaluation():
    state = {"w": np.ones((3, 2, 2), np.float32), "step": np.zeros(3, np.int32), "b": np.ones((3, 4), np.float32)}
    state["w"][1, 0, 1] = np.nan
    record = {"curves": {"mean": {"returns": [[0.0, 0.0, 0.0], [1.0, 2.0, float("inf")]]},
                         "sample": {"returns": [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]}}}
    assert ledger_cell.nonfinite_seeds(state, record, 3) == [1, 2]
    one = {"w": np.array([1.0, np.nan], np.float32)}  # a one-seed program may have no seed axis
    assert ledger_cell.nonfinite_seeds(one, {"curves": {"mean": {"returns": [[0.0], [1.0]]}}}, 1) == [0]


def test_a_diverged_seed_scores_the_lowest_return_and_is_listed():
    cell = ledger_plan.Cell("m1", "reppo", "reppo", "playground/CartpoleSwingup", 204_800, 0, 3)
    record = {"matrix": "m1", "label": "reppo", "algo": "reppo", "task": cell.task, "base_seed": 0, "num_seeds": 3,
              "env_steps": [0, 10, 20], "samplers": ["mean"], "timing": {"wall_s": 60.0}, "machine": {},
              "curves": {"mean": {"returns": [[5.0, 5.0, 5.0], [300.0, float("nan"), 200.0],
                                              [800.0, float("nan"), 600.0]]}},
              "diverged": {"error": "non-finite losses at iteration 3, seed 1", "seeds": [1]}}
    run = ledger_report.Run([record])
    assert run.final.tolist() == [800.0, ledger_report.DIVERGED_RETURN, 600.0] and run.seeds_text == "3 (1 diverged)"
    assert np.isfinite(run.curves).all()
    lines = "\n".join(ledger_report.divergence_lines({("m1", "reppo", cell.task, 20): run}, "m1"))
    assert "| CartpoleSwingup | reppo | 1 of 3 | non-finite losses at iteration 3, seed 1 |" in lines
    assert run.blow_ups is None and "None among the runs that count them." in lines
    no_divergence = ledger_report.Run([{k: v for k, v in record.items() if k != "diverged"}])
    lines = "\n".join(ledger_report.divergence_lines({("m1", "reppo", cell.task, 20): no_divergence}, "m1"))
    assert "None among the finished runs." in lines and "## Simulation blow-ups" in lines
    guarded = ledger_report.Run([dict(record, nonfinite_states=7), dict(record, base_seed=3, nonfinite_states=0)])
    lines = "\n".join(ledger_report.blow_up_lines({("m1", "reppo", cell.task, 20): guarded}, "m1"))
    assert "| CartpoleSwingup | reppo | 7 |" in lines


def test_blow_ups_are_counted_over_every_seed_and_iteration_of_every_chunk():
    """metrics.jsonl rows hold train/nonfinite_states averaged over the seeds and iterations of a chunk."""
    config = ledger_cell.cell_config(_tiny_cells()[0]).replace(num_seeds=2, chunk_iterations=4)
    assert config.iterations_per_chunk == 4
    rows = [{"env_steps": 0}, {"train/nonfinite_states": 0.125}, {"train/nonfinite_states": 0.0},
            {"train/nonfinite_states": 0.375}]
    assert ledger_cell.blow_ups(rows, config) == 4  # (0.125 + 0.375) * 2 seeds * 4 iterations


# -- records and the report -------------------------------------------------------------------
def _synthetic_record(cell, config, final_by_eval, sampler_names=None):
    samplers = list(sampler_names or config.eval_samplers)
    n = len(final_by_eval)
    return {
        "schema": SCHEMA, "cell": cell.cell_id, "matrix": cell.matrix, "label": cell.label, "algo": cell.algo,
        "task": cell.task, "preset": config.preset, "overrides": dict(cell.overrides), "base_seed": cell.base_seed,
        "num_seeds": cell.num_seeds, "config_hash": config_hash(config), "config": hashed_settings(config),
        "samplers": samplers, "env_steps": [i * cell.env_steps // (n - 1) for i in range(n)],
        "walltime": [float(i) for i in range(n)],
        "curves": {s: {"returns": final_by_eval} for s in samplers},
        "timing": {"compile_s": 1.0, "train_s": 10.0, "eval_s": 1.0, "wall_s": 60.0},
        "versions": {}, "machine": {},
    }


def test_malformed_records_are_refused():
    cell = _tiny_cells()[0]
    good = _synthetic_record(cell, ledger_cell.cell_config(cell), [[1.0, 2.0], [3.0, 4.0]])
    validate_record(good)
    for broken in ({k: v for k, v in good.items() if k != "curves"},
                   dict(good, config_hash="0" * 16),
                   dict(good, curves={"mean": {"returns": [[1.0], [2.0]]}, "sample": good["curves"]["sample"]}),
                   dict(good, env_steps=[5, 0])):
        with pytest.raises(ValueError):
            validate_record(broken)


def test_report_statistics_are_the_library_ones_on_a_runs_seeds():
    """The per-run figures are diffrl.maths.stats' (tested against oracles in test_stats.py)."""
    scores = np.asarray([1.0, 2.0, 3.0, 4.0, 100.0, -50.0, 5.0, 6.0])
    point, lo, hi = ledger_report.iqm_ci(scores)
    assert point == pytest.approx(sum(sorted(scores)[2:6]) / 4) and lo <= point <= hi
    point, lo, hi = ledger_report.median_ci(scores)
    assert point == pytest.approx(np.median(scores)) and lo <= point <= hi
    assert ledger_report.median_ci([7.0]) == (7.0, 7.0, 7.0)


def test_formatted_statistics_print_no_negative_zero():
    assert ledger_report.fmt((-0.0001, -0.0004, 0.0123)) == "0.000 [0.000, 0.012]"
    assert ledger_report.fmt((-0.0006, -1.25, 2.0), 1) == "0.0 [-1.2, 2.0]"


def test_report_renders_from_records_and_check_catches_a_stale_table(monkeypatch, tmp_path):
    root = tmp_path / "ledger"
    (root / "records").mkdir(parents=True)
    tasks = ("CartpoleSwingup", "CheetahRun")
    randoms = {f"playground/{t}": 10.0 for t in ledger_plan.M1_TASKS}
    (root / "pilot.json").write_text(json.dumps({"entries": [], "random_returns": randoms}))
    rng = np.random.default_rng(0)
    means = {"ppo": 100.0, "reppo": 400.0, "amdp": 420.0, "trudi": 500.0}
    for cell in ledger_plan.matrix1():
        if cell.task.split("/")[1] not in tasks:
            continue
        final = (means[cell.algo] + 10 * rng.normal(size=cell.num_seeds)).round(1).tolist()
        curve = [[0.0] * cell.num_seeds] + [[f / 2 for f in final]] * 4 + [final]
        record = _synthetic_record(cell, ledger_cell.cell_config(cell), curve)
        (root / "records" / f"{cell.cell_id}.json").write_text(json.dumps(record))
    written = ledger_report.render(root, with_figures=True)
    assert (root / "report" / "profile_m1.png") in written and (root / "report" / "curves_m1_CheetahRun.png") in written
    m1 = (root / "report" / "m1.md").read_text()
    assert "## CheetahRun" in m1 and "Over the 2 tasks every algorithm has finished" in m1
    assert "| trudi | reppo | 1.000 [1.000, 1.000] |" in m1 and "| ppo | 10 |" not in m1
    assert "## Runs that do not learn" in m1 and "None among the finished runs." in m1
    status = (root / "report" / "status.md").read_text()
    assert f"| m1 | {sum(1 for c in ledger_plan.matrix1() if c.task.split('/')[1] in tasks)} |" in status
    assert ledger_report.check(root) == 0
    (root / "report" / "m1.md").write_text(m1.replace("CheetahRun", "Cheetah"))
    assert ledger_report.check(root) == 1
    # a record that no longer matches the code is listed as stale and left out of the tables
    path = next((root / "records").glob("m1--CheetahRun--trudi*.json"))
    record = json.loads(path.read_text())
    record["config"]["reppo.kl_bound"] = 123.0
    record["config_hash"] = settings_hash(record["config"])
    path.write_text(json.dumps(record))
    tables = ledger_report.render_tables(root)[0]
    assert "reppo.kl_bound" in tables["status.md"] and "Over the 1 tasks" in tables["m1.md"]


def test_status_shows_where_each_algorithms_time_goes_over_the_cells_that_ran_alone():
    def record(algo, compile_s, train_s, eval_s, cpu_share=0.96):
        wall = compile_s + train_s + eval_s
        return {"matrix": "m1", "algo": algo, "machine": {"cpu_count": 2},
                "timing": {"compile_s": compile_s, "train_s": train_s, "eval_s": eval_s, "wall_s": wall,
                           "cpu_s": cpu_share * wall}}

    records = [record("reppo", 300.0, 1500.0, 200.0), record("reppo", 100.0, 900.0, 0.0),
               record("reppo", 9000.0, 0.0, 0.0, cpu_share=0.5),  # shared its core: left out
               record("trudi", 60.0, 30.0, 10.0), {**record("trudi", 1.0, 1.0, 1.0), "matrix": "m2"}]
    lines = ledger_report.time_shares(records)
    # REPPO: 400 / 3000 compiling, 2400 / 3000 training, 200 / 3000 evaluating, 3000 s = 0.8 core-hours
    assert "| reppo | 2 | 0.8 | 13 % | 80 % | 7 % |" in lines
    assert "| trudi | 1 | 0.0 | 60 % | 30 % | 10 % |" in lines
    assert not any(line.startswith(("| ppo", "| amdp")) for line in lines)  # no cell of theirs yet


def test_runs_that_never_rise_above_their_start_or_random_are_listed_as_not_learning():
    class FakeRun:  # the two attributes learning_gain and no_learning_lines read
        label, num_seeds = "reppo", 3

        def __init__(self, curves):
            self.curves = np.asarray(curves, np.float64)  # (E, K), row 0 before training

    random_return = 100.0  # range 900: a gain of 0.05 is 45 return
    # seed 0 starts above random (a Gaussian's zero action) and never gets 45 above its start;
    # seed 1 starts below random and ends 40 above random; seed 2 stays at random
    flat = FakeRun([[300, 50, 100], [310, 120, 100], [340, 140, 100]])
    np.testing.assert_allclose(ledger_breadth.learning_gain(flat, random_return), [40 / 900, 40 / 900, 0.0])
    learned = FakeRun([[300, 50, 100], [310, 120, 100], [340, 146, 100]])  # seed 1: 46 above random
    assert ledger_breadth.learning_gain(learned, random_return).max() > ledger_breadth.NO_LEARNING_GAIN
    task = "playground/CartpoleSwingup"
    lines = "\n".join(ledger_breadth.no_learning_lines({("m1", "reppo", task, 1): flat}, {task: random_return}, [task]))
    assert "| CartpoleSwingup | reppo | 3 | 0.044 | [curves](curves_m1_CartpoleSwingup.png) |" in lines
    lines = "\n".join(ledger_breadth.no_learning_lines({("m1", "reppo", task, 1): learned}, {task: random_return}, [task]))
    assert "None among the finished runs." in lines


def test_every_matrix_1_task_has_one_reward_family():
    families = {t: ledger_families.family(t) for t in ledger_plan.M1_TASKS}
    assert set(families.values()) == set(ledger_families.FAMILIES)
    assert ledger_families.SPARSE_REWARD_TASKS <= set(ledger_plan.M1_TASKS)
    assert all(families[t] == "sparse" for t in ledger_plan.M1_TASKS if t.endswith("Sparse"))
    assert families["CartpoleBalance"] == "dense" and ledger_families.family("playground/ReacherEasy") == "sparse"
    with pytest.raises(ValueError, match="not a matrix-1 task"):
        ledger_families.family("playground/Go1Getup")


def test_family_table_shows_each_runs_median_and_aggregates_only_tasks_all_finished():
    class FakeRun:  # the attribute family_lines reads
        def __init__(self, final):
            self.final = np.asarray(final, np.float64)

    budget = ledger_plan.M1_BUDGET
    randoms = {f"playground/{t}": 100.0 for t in ledger_plan.M1_TASKS}  # range 900
    tasks = ["playground/ReacherEasy", "playground/ReacherHard", "playground/CheetahRun"]
    runs = {("m1", a, "playground/ReacherEasy", budget): FakeRun([100.0, 550.0, 1000.0]) for a in ledger_plan.M1_ALGOS}
    runs[("m1", "amdp", "playground/ReacherHard", budget)] = FakeRun([100.0, 100.0, 100.0])
    text = "\n".join(ledger_families.family_lines(runs, randoms, tasks))
    sparse, dense = text.split("### Dense reward")
    assert "| ReacherEasy | 0.50 | 0.50 | 0.50 | 0.50 |" in sparse  # median 550: (550 - 100) / 900
    assert "| ReacherHard | - | - | 0.00 | - |" in sparse
    # the aggregate is over ReacherEasy alone (ReacherHard lacks three algorithms): the IQM of (0, 0.5, 1)
    assert "over the 1 sparse-reward tasks" in sparse and "ppo 0.500 [" in sparse
    assert "| CheetahRun | - | - | - | - |" in dense and "No dense-reward task has all four" in dense


def test_committed_ledger_report_is_current():
    """CI: every committed record is valid and the committed tables are what they render."""
    root = Path(ledger_cell.ROOT)
    if not (root / "report").is_dir():
        pytest.skip("no committed report yet")
    assert ledger_report.check(root) == 0


def test_estimates_scale_the_pilot_by_steps_seeds_and_the_nearest_reference_ratio():
    def entry(algo, task, s_iter, batch=1024, compile_s=60.0, eval_s=1.0):
        return {"algo": algo, "task": f"playground/{task}", "num_seeds": 5, "batch_size": batch,
                "compile_s": compile_s, "s_per_iteration": s_iter, "eval_s": eval_s, "eval_envs": 16}

    pilot = {"entries": [entry("reppo", "CartpoleSwingup", 2.0), entry("reppo", "HumanoidWalk", 8.0),
                         entry("reppo", "HopperHop", 7.0), entry("trudi", "CartpoleSwingup", 5.0),
                         entry("trudi", "HumanoidWalk", 24.0, compile_s=120.0)]}
    est = ledger.Estimator(pilot, {})
    cell = ledger_plan.Cell("m1", "trudi", "trudi", "playground/HopperHop", 204_800, 0, 5)
    config = ledger_cell.cell_config(cell)
    # HopperHop's REPPO cost is nearest HumanoidWalk's: TruDi / REPPO = 3 there
    iterations = 204_800 / 1024
    expected = 60.0 * 2 + iterations * 7.0 * 3 + 5 * 1.0
    assert est.seconds(cell, config) == pytest.approx(expected)
    two_seeds = dataclasses.replace(cell, num_seeds=2, base_seed=1)
    assert est.seconds(two_seeds, ledger_cell.cell_config(two_seeds)) == pytest.approx(120 + (expected - 120) * 2 / 5)
    unknown = ledger_plan.Cell("m1", "ppo", "ppo", "playground/HopperHop", 204_800, 0, 5)
    assert est.seconds(unknown, ledger_cell.cell_config(unknown)) is None


def test_two_core_wall_clock_scales_each_cell_by_the_nearest_reference_speedup(monkeypatch, tmp_path):
    import ledger_pilot

    def measured(algo, task, cpus):  # seconds per iteration: two cores 1.5x (CheetahRun 1.2x) faster
        s = {"playground/CartpoleSwingup": 2.0, "playground/CheetahRun": 6.0}[task] / (
            1.0 if len(cpus) == 1 else {"playground/CartpoleSwingup": 1.5, "playground/CheetahRun": 1.2}[task])
        return {"algo": algo, "task": task, "s_per_iteration": s, "eval_s": 4.0 / len(cpus), "compile_s": 60.0}

    calls = []
    monkeypatch.setattr(ledger_pilot, "_measure_in_child", lambda *a, **k: calls.append(a[2]) or measured(*a, **k))
    path = tmp_path / "pilot.json"
    path.write_text(json.dumps({"entries": [
        {"algo": "reppo", "task": f"playground/{t}", "s_per_iteration": s}
        for t, s in (("CartpoleSwingup", 2.0), ("CheetahRun", 6.0), ("HopperHop", 5.0), ("ReacherEasy", 2.2))],
        "random_returns": {}}))
    with pytest.raises(ValueError, match="two cpus"):
        ledger_pilot.core_speedups(["CartpoleSwingup"], path, [0])
    pilot = ledger_pilot.core_speedups(["CartpoleSwingup", "CheetahRun"], path, [0, 1], log=lambda m: None)
    assert calls[:2] == [[0], [0, 1]] and len(pilot["two_cores"]) == 2 * len(ledger_plan.M1_ALGOS)
    assert json.loads(path.read_text())["two_cores"] == pilot["two_cores"]
    ledger_pilot.core_speedups(["CartpoleSwingup", "CheetahRun"], path, [0, 1])  # measured pairs are kept
    assert len(calls) == 4 * len(ledger_plan.M1_ALGOS)
    # HopperHop's REPPO cost (5.0) is nearest CheetahRun's (6.0); ReacherEasy's nearest CartpoleSwingup's
    assert ledger_pilot.two_core_speedups(pilot, "trudi", "playground/HopperHop") == (1.2, 2.0, "playground/CheetahRun")
    assert ledger_pilot.two_core_speedups(pilot, "amdp", "playground/ReacherEasy")[2] == "playground/CartpoleSwingup"
    assert ledger_pilot.two_core_speedups({"entries": pilot["entries"]}, "amdp", "playground/ReacherEasy") is None

    class FakeRun:
        algo, task, loaded = "trudi", "playground/HopperHop", False
        records = [{"timing": {"compile_s": 60.0, "train_s": 1200.0, "eval_s": 120.0}}] * 2

    # per cell: 60 + 1200 / 1.2 + 120 / 2 = 1120 s; two cells: 37 min
    assert ledger_report.two_core_minutes(FakeRun(), pilot) == "37"
