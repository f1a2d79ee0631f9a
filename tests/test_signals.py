"""Interrupts, sent for real to a training process: acknowledged at once, a telling exit status
(130 for SIGINT, 143 for SIGTERM), a second signal stops at once, a signal while compiling stops
within seconds; every checkpoint left behind verifies. And the progress bar fits 80 columns."""
import io
import json
import signal
import subprocess
import sys
import time

import pytest

from diffrl.plumbing.checkpoint import step_dirs, verify_checkpoint

LONG = ["--algo", "ppo", "--env", "gymnax/Pendulum-v1", "--total-env-steps", str(4000 * 512), "--num-envs", "16",
        "--num-steps", "32", "--num-evals", "4000", "--eval-envs", "4", "--ppo.num-minibatches", "4",
        "--ppo.num-epochs", "1", "--no-tensorboard"]


STARTED = []


@pytest.fixture(autouse=True)
def no_run_left_behind():
    """Kill a child a failed assertion left running."""
    yield
    for proc in STARTED:
        proc.kill()
    STARTED.clear()


def start(out, log, *args):
    """A long training run in a child process, its stderr going to ``log``."""
    STARTED.append(subprocess.Popen([sys.executable, "-m", "diffrl.cli", "train", *LONG, "--out", str(out), *args],
                                    stdout=subprocess.DEVNULL, stderr=open(log, "w")))
    return STARTED[-1]


def wait_for(condition, what, timeout=300):
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def trained_rows(out):
    path = out / "metrics.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def finish(proc, within):
    """Exit status of ``proc``, which must end within ``within`` seconds."""
    try:
        return proc.wait(timeout=within)
    finally:
        proc.kill()


def assert_checkpoints_verify(out):
    steps = step_dirs(out)
    assert steps, "no checkpoint"
    for _, path in steps:
        assert verify_checkpoint(path) is None, path


def test_sigint_is_acknowledged_then_checkpoints_and_exits_130(tmp_path):
    out, log = tmp_path / "run", tmp_path / "err"
    proc = start(out, log)
    wait_for(lambda: trained_rows(out) >= 3, "two trained chunks")
    proc.send_signal(signal.SIGINT)
    wait_for(lambda: "stopping after this chunk: checkpoint will be written" in log.read_text(),
             "the acknowledgement", timeout=5)
    assert finish(proc, 60) == 130, log.read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and int(step_dirs(out)[-1][0]) == summary["env_steps"]
    assert_checkpoints_verify(out)


def test_a_second_sigint_stops_at_once_writing_nothing_half(tmp_path):
    out, log = tmp_path / "run", tmp_path / "err"
    # one chunk of 40M steps: minutes of compiled work, during which the second signal comes
    proc = start(out, log, "--total-env-steps", str(40_000_000), "--num-evals", "1")
    wait_for(lambda: trained_rows(out) >= 1, "training to start")
    proc.send_signal(signal.SIGINT)
    wait_for(lambda: "stopping after this chunk" in log.read_text(), "the acknowledgement", timeout=5)
    proc.send_signal(signal.SIGINT)
    assert finish(proc, 10) == 130, log.read_text()
    assert "SIGINT again: stopping now; the last complete checkpoint is kept" in log.read_text()
    assert not step_dirs(out) and not list((out / "checkpoints").glob(".tmp-*")) if (out / "checkpoints").exists() \
        else True
    for line in (out / "metrics.jsonl").read_text().splitlines():
        json.loads(line)  # no half-written row


def test_sigterm_while_compiling_stops_within_seconds_with_143(tmp_path):
    out, log = tmp_path / "run", tmp_path / "err"
    proc = start(out, log)
    wait_for(lambda: log.exists() and "compiling" in log.read_text(), "compilation to start")
    proc.send_signal(signal.SIGTERM)
    t0 = time.time()
    assert finish(proc, 10) == 143, log.read_text()
    assert time.time() - t0 < 10 and "SIGTERM: stopping now: nothing trained yet" in log.read_text()


@pytest.mark.parametrize("width", [80, 120])
def test_progress_bar_fits_the_terminal_on_one_line(width):
    from rich.console import Console

    from diffrl.config import TrainConfig
    from diffrl.core.progress import Progress

    config = TrainConfig(algo="trudi", env="playground/CartpoleBalance", total_env_steps=5_000_000)
    live = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    progress = Progress(config, console=live)
    progress.update({"env_steps": 1_234_567, "train/sps": 123456.0, "walltime": 100.0,
                     "eval/episode_return": -1234.56})
    progress.close()
    screen = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    screen.print(progress.bar.get_renderable())
    lines = screen.export_text().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= width and "…" not in lines[0], lines
    for part in ("━", "steps", "-1234.6", "ETA", "0:0"):
        assert part in lines[0], (part, lines[0])
