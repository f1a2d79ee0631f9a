"""diffrl.plumbing.run_record without training: a run directory's config.json keeps one segment per start
or resume, with the settings each changed, and a resume never loses the first segment's config."""
from __future__ import annotations

import dataclasses
import json

import pytest

from diffrl.plumbing import run_record


@dataclasses.dataclass(frozen=True)
class Section:
    lr: float = 3e-4
    hidden: tuple[int, ...] = (64, 64)


@dataclasses.dataclass(frozen=True)
class Config:
    total_env_steps: int = 1000
    out: str = "runs/a"
    resume: str | None = None
    chunk_iterations: int = 10
    section: Section = Section()


@pytest.fixture(autouse=True)
def command(monkeypatch):
    """The command a run records (restored after each test)."""
    monkeypatch.setattr(run_record, "_COMMAND", ["diffrl", "train", "--env", "toy/MirrorGoals"])


def test_config_changes_lists_nested_settings_and_ignores_where_a_run_resumes_from():
    before = {"total_env_steps": 1000, "out": "runs/a", "resume": None, "chunk_iterations": 10,
              "section": {"lr": 3e-4, "hidden": [64, 64]}}
    after = {"total_env_steps": 2000, "out": "runs/b", "resume": "runs/a", "chunk_iterations": 5,
             "section": {"lr": 1e-4, "hidden": [64, 64]}, "new": 1}
    assert run_record.config_changes(before, after) == {
        "new": [None, 1], "section.lr": [3e-4, 1e-4], "total_env_steps": [1000, 2000]}


def test_a_new_run_has_one_segment_and_a_resume_adds_one_with_what_it_changed(tmp_path):
    first = run_record.write_run_record(tmp_path, Config())
    assert [s["began_at_env_steps"] for s in first["segments"]] == [0]
    assert first["segments"][0]["changed"] == {}
    assert first["command"] == ["diffrl", "train", "--env", "toy/MirrorGoals"]

    run_record.set_command(["diffrl", "train", "--resume", "runs/a", "--total-env-steps", "2000"])
    resumed = Config(total_env_steps=2000, resume=str(tmp_path), section=Section(lr=1e-4))
    second = run_record.write_run_record(tmp_path, resumed, began_at=600)
    assert second["run_id"] == first["run_id"]  # the same run: its checkpoints stay its own
    one, two = second["segments"]
    assert one["config"] == first["config"] and one["began_at_env_steps"] == 0
    assert two["began_at_env_steps"] == 600 and two["changed"] == {
        "section.lr": [3e-4, 1e-4], "total_env_steps": [1000, 2000]}
    assert second["config"]["total_env_steps"] == 2000  # the top level holds the settings in force now
    assert run_record.read_run_record(tmp_path) == json.loads((tmp_path / "config.json").read_text()) == second
    assert run_record.describe_segments(second) == [
        "from 0 env steps: diffrl train --env toy/MirrorGoals",
        "from 600 env steps: diffrl train --resume runs/a --total-env-steps 2000 "
        "(changed section.lr 0.0003 -> 0.0001; total_env_steps 1000 -> 2000)"]
    assert run_record.segments_summary(second)[1] == {
        "began_at_env_steps": 600, "command": ["diffrl", "train", "--resume", "runs/a", "--total-env-steps", "2000"],
        "changed": {"section.lr": [3e-4, 1e-4], "total_env_steps": [1000, 2000]}}


def test_a_resume_from_an_earlier_checkpoint_supersedes_the_segments_trained_past_it(tmp_path):
    run_record.write_run_record(tmp_path, Config())
    run_record.write_run_record(tmp_path, Config(resume=str(tmp_path), total_env_steps=2000), began_at=600)
    # restored from the checkpoint at 400: the segment that began at 600 was trained past it and is dropped
    third = run_record.write_run_record(tmp_path, Config(resume=str(tmp_path), total_env_steps=3000), began_at=400)
    assert [s["began_at_env_steps"] for s in third["segments"]] == [0, 400]
    assert third["segments"][1]["changed"] == {"total_env_steps": [1000, 3000]}


def test_a_record_written_before_segments_were_kept_becomes_the_first_segment(tmp_path):
    old = {"config": {"total_env_steps": 1000, "section": {"lr": 3e-4}},
           "command": ["diffrl", "train"], "created": "2026-01-01T00:00:00+0000", "git_commit": "abc", "run_id": "r1"}
    (tmp_path / "config.json").write_text(json.dumps(old))
    record = run_record.write_run_record(tmp_path, Config(resume=str(tmp_path)), began_at=500)
    assert record["run_id"] == "r1"
    first, now = record["segments"]
    assert first["config"] == old["config"] and first["command"] == ["diffrl", "train"] and first["changed"] == {}
    # a setting the old record did not have is listed as new; out, resume and chunk_iterations, which
    # every resume sets, are not
    assert now["changed"] == {"section.hidden": [None, [64, 64]]}


def test_a_config_in_an_older_layout_is_moved_before_its_changes_are_listed(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Relaid(Config):
        @staticmethod
        def in_current_layout(stored: dict) -> dict:  # an older diffrl kept lr at the top level
            stored = dict(stored)
            lr = stored.pop("lr")
            return {**stored, "section": {**stored.get("section", {}), "lr": lr}}

    old = {"config": {"total_env_steps": 1000, "out": "runs/a", "resume": None, "chunk_iterations": 10, "lr": 3e-4,
                      "section": {"hidden": [64, 64]}}, "run_id": "r2"}
    (tmp_path / "config.json").write_text(json.dumps(old))
    record = run_record.write_run_record(tmp_path, Relaid(resume=str(tmp_path)), began_at=100)
    assert record["segments"][-1]["changed"] == {}  # lr only moved section: nothing changed
