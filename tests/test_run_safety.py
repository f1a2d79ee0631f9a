"""Run directories nothing can destroy or mislabel, and train's one-line answers to mistakes.

Each test injects the fault for real (a second run into a trained directory, a requeued finished
run, a foreign checkpoint, a typo) and checks both the answer and that no file changed."""
import contextlib
import io
import json
import shutil

import numpy as np
import pytest

from diffrl.cli import main
from diffrl.commands.train_flags import integer_literals

TINY = ["--algo", "ppo", "--env", "gymnax/Pendulum-v1", "--num-envs", "16", "--num-steps", "32",
        "--num-evals", "2", "--eval-envs", "4", "--ppo.num-minibatches", "4", "--ppo.num-epochs", "1",
        "--no-progress", "--no-tensorboard"]


def snapshot(run_dir):
    """Every file of a run directory with its bytes and modification time."""
    return {p.relative_to(run_dir).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(run_dir.rglob("*")) if p.is_file()}


def train(*args):
    """(exit status, stderr) of ``diffrl train TINY args`` run in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["train", *TINY, *args])
    return rc, err.getvalue()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished two-chunk run (2,000 steps asked: rounded to 1,536) and train's stderr."""
    out = tmp_path_factory.mktemp("trained") / "run"
    rc, err = train("--total-env-steps", "2e3", "--out", str(out))
    assert rc == 0, err
    return out, err


@pytest.fixture
def run(trained, tmp_path):
    """A private copy of the finished run."""
    copy = tmp_path / "run"
    shutil.copytree(trained[0], copy)
    return copy


def test_out_at_a_trained_run_is_refused_and_nothing_changes(run, monkeypatch):
    from diffrl.core.trainer import Trainer

    monkeypatch.setattr(Trainer, "__init__", lambda *a, **k: pytest.fail("built a trainer"))
    before = snapshot(run)
    rc, err = train("--total-env-steps", "1024", "--out", str(run))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "already holds a run" in err and f"--resume {run}" in err and "--move-aside" in err
    assert snapshot(run) == before


def test_eval_export_and_actions_restore_the_run_without_building_a_trainer(run, monkeypatch, tmp_path):
    """The commands that use a run directory build its run (``diffrl.core.run.restore_run``), not a
    trainer, and change nothing in the directory."""
    from diffrl.core.trainer import Trainer

    monkeypatch.setattr(Trainer, "__init__", lambda *a, **k: pytest.fail("built a trainer"))
    before = snapshot(run)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["eval", str(run), "--episodes", "2", "--sampler", "mean"]) == 0
        assert main(["export", str(run), "--out", str(tmp_path / "policy")]) == 0
        assert main(["actions", str(run), "--out", str(tmp_path / "actions.png"), "--states", "1",
                     "--samples", "8"]) == 0
    assert (tmp_path / "policy" / "policy.json").is_file() and (tmp_path / "actions.png").is_file()
    assert snapshot(run) == before


def test_move_aside_keeps_the_old_run_and_starts_afresh(run):
    before = snapshot(run)
    rc, err = train("--total-env-steps", "512", "--num-evals", "1", "--out", str(run), "--move-aside")
    assert rc == 0, err
    assert snapshot(run.with_name("run.old-1")) == before  # renamed, byte for byte
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["env_steps"] for r in rows] == [0, 512]  # one run's curve, not two


def test_pruning_never_touches_another_runs_checkpoints(tmp_path):
    from diffrl.plumbing.checkpoint import latest_valid_checkpoint, save_checkpoint, step_dirs

    state = {"w": np.arange(4.0)}
    for step in (100, 200):  # a foreign run's checkpoints, with higher step numbers
        save_checkpoint(tmp_path, step, state, {"run_id": "other"}, keep=2)
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, state, {"run_id": "mine"}, keep=2)
    assert [s for s, _ in step_dirs(tmp_path)] == [2, 3, 100, 200]
    assert latest_valid_checkpoint(tmp_path).name == "200"


def test_resume_of_a_finished_run_is_complete_and_touches_nothing(run, monkeypatch):
    from diffrl.core.trainer import Trainer

    monkeypatch.setattr(Trainer, "__init__", lambda *a, **k: pytest.fail("built a trainer"))
    before = snapshot(run)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(["train", "--resume", str(run)])
    assert rc == 0 and "is complete (1,536 of 1,536 env steps)" in err.getvalue()
    assert snapshot(run) == before
    with contextlib.redirect_stderr(err):  # shortening is refused, with the same guarantee
        assert main(["train", "--resume", str(run), "--total-env-steps", "512"]) == 2
    assert "cannot be shortened" in err.getvalue() and snapshot(run) == before


def test_resume_keeps_every_segments_config_and_command(run, capsys):
    first = json.loads((run / "config.json").read_text())
    assert [s["began_at_env_steps"] for s in first["segments"]] == [0]
    assert main(["train", "--resume", str(run), "--total-env-steps", "2048", "--ppo.learning-rate", "3e-4",
                 "--no-progress"]) == 0
    record = json.loads((run / "config.json").read_text())
    one, two = record["segments"]
    assert one["config"] == first["config"] and one["command"] == first["command"]
    assert two["began_at_env_steps"] == 1536 and "--ppo.learning-rate" in two["command"]
    assert two["changed"]["ppo.learning_rate"] == [first["config"]["ppo"]["learning_rate"], 3e-4]
    assert record["config"]["ppo"]["learning_rate"] == 3e-4 and record["run_id"] == first["run_id"]
    summary = json.loads((run / "summary.json").read_text())
    assert [s["began_at_env_steps"] for s in summary["segments"]] == [0, 1536]
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "2", "--sampler", "mean"]) == 0
    out = capsys.readouterr().out
    assert "from 0 env steps:" in out and "from 1,536 env steps:" in out and "ppo.learning_rate" in out


@pytest.mark.parametrize("args, message", [
    (["--out", "elsewhere"], "a resumed run is written in its own directory"),
    (["--num-evals", "5"], "--num-evals cannot change on resume"),
    (["--diffusion.num-steps", "4"], "ppo does not read the diffusion section"),
    (["--total-env-steps", "4096", "--gaussian.hidden", "32", "32"], "cannot continue checkpoint"),
])
def test_resume_changes_that_cannot_be_honoured_are_refused_before_compiling(run, monkeypatch, capsys,
                                                                             args, message):
    from diffrl.core.trainer import Trainer

    monkeypatch.setattr(Trainer, "_compile", lambda *a: pytest.fail("compiled"))
    before = {k: v for k, v in snapshot(run).items() if k != "writer.lock"}
    assert main(["train", "--resume", str(run), *args]) == 2
    assert message in capsys.readouterr().err
    assert {k: v for k, v in snapshot(run).items() if k != "writer.lock"} == before


def test_algo_typo_is_named_before_the_budget(capsys):
    assert main(["train", "--algo", "trudii", "--env", "gymnax/Pendulum-v1", "--total-env-steps", "1000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean trudi" in err


def test_budget_rounding_is_noted_and_float_literals_are_integers(trained):
    _, err = trained
    assert "--total-env-steps 2,000 is rounded down to 1,536" in err  # "2e3" was accepted
    assert "--num-evals 2 cannot be honoured with 3 iteration(s): evaluating 3 time(s)" in err
    assert integer_literals(["--total-env-steps", "1e5", "--num-envs=2.5e2", "--seed", "7"]) == \
        ["--total-env-steps", "100000", "--num-envs=250", "--seed", "7"]
    assert integer_literals(["--ppo.learning-rate", "1e-3"]) == ["--ppo.learning-rate", "1e-3"]  # a float field


def test_a_flag_the_algorithm_does_not_read_is_refused_at_its_default(capsys):
    from diffrl.config import TrainConfig

    default = str(TrainConfig().diffusion.num_steps)
    for flag in (["--diffusion.num-steps", default], [f"--diffusion.num-steps={default}"]):
        assert main(["train", *TINY, *flag, "--out", "/tmp/diffrl-never-written"]) == 2
        assert "--diffusion.num-steps has no effect with --algo ppo" in capsys.readouterr().err
    assert main(["train", "--algo", "trudi", "--env", "gymnax/Pendulum-v1", "--diffusion.step-std-min", "0.0",
                 "--out", "/tmp/diffrl-never-written"]) == 2  # a field of a section trudi reads, but not this one
    assert "DPPO" in capsys.readouterr().err


def corrupt(checkpoint):
    """Truncate the largest array file of a checkpoint to half its size."""
    victim = max((p for p in (checkpoint / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])


def one_line_refusal(capsys, argv, *phrases):
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for phrase in phrases:
        assert phrase in err, (phrase, err)


@pytest.mark.parametrize("command", [["eval"], ["export", "--out", "exported"], ["actions", "--out", "a.png"],
                                     ["plot", "--out", "c.png"]])
def test_commands_answer_a_wrong_directory_in_one_line(tmp_path, capsys, command):
    name, *rest = command
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "policy.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    one_line_refusal(capsys, [name, str(tmp_path / "missing"), *rest], "no such directory")
    one_line_refusal(capsys, [name, str(tmp_path / "empty"), *rest], "not a diffrl run directory")
    one_line_refusal(capsys, [name, str(policy), *rest], "is an exported policy", "diffrl.load_policy")


def test_commands_answer_unusable_checkpoints_in_one_line(run, capsys):
    from diffrl.plumbing.checkpoint import step_dirs

    best = run / "checkpoints" / str(json.loads((run / "checkpoints" / "best.json").read_text())["step"])
    corrupt(best)
    for name, rest in (("eval", []), ("export", ["--out", str(run / "exported")]),
                       ("actions", ["--out", str(run / "a.png")])):
        one_line_refusal(capsys, [name, str(run), "--checkpoint", "best", *rest],
                         "best checkpoint", "unusable", "use --checkpoint latest")
    for _, path in step_dirs(run):
        if path != best:
            corrupt(path)
    one_line_refusal(capsys, ["eval", str(run)],
                     f"has no valid checkpoint: all {len(step_dirs(run))} failed verification")


@pytest.mark.parametrize("video, message", [("clip.avi", "unsupported format '.avi'; use .gif"),
                                            ("clip.gif", "gymnax/Pendulum-v1 has no renderer")])
def test_eval_video_is_checked_before_evaluating(run, monkeypatch, capsys, video, message):
    import diffrl.commands.trained_run

    monkeypatch.setattr(diffrl.commands.trained_run, "load_trained", lambda *a, **k: pytest.fail("evaluated"))
    one_line_refusal(capsys, ["eval", str(run), "--video", str(run / video)], message)
