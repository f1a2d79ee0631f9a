"""One writer per run directory (core/run_lock.py): a second writer is refused, naming the
holder; the lock of a dead process is taken over; the trainer releases it on every exit.

The holders are real processes (a subprocess that takes the lock and is then killed), not
mocks: the kernel's flock is what is being relied on. The normal resume path through the
lock is exercised by tests/test_resume.py (three trainers on one run directory in turn).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from diffrl.core.run_lock import LOCK_NAME, RunDirLock, RunDirLocked
from diffrl.core.trainer import Trainer
from diffrl.config.presets import resolve

SRC = str(Path(__file__).resolve().parent.parent / "src")

# Takes the lock of argv[1], says so, then holds it until killed.
HOLDER = textwrap.dedent("""
    import sys, time
    from diffrl.core.run_lock import RunDirLock
    RunDirLock(sys.argv[1]).acquire()
    print("locked", flush=True)
    time.sleep(600)
""")


def start_holder(run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": SRC})
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_second_writer_is_refused_and_a_dead_holders_lock_is_taken_over(tmp_path):
    holder = start_holder(tmp_path)
    try:
        with pytest.raises(RunDirLocked) as refused:
            RunDirLock(tmp_path).acquire()
        message = str(refused.value)
        assert f"pid {holder.pid} on host {socket.gethostname()}" in message, message
        assert str(tmp_path) in message
    finally:
        holder.send_signal(signal.SIGKILL)  # dies holding the lock: no release, record left behind
        holder.wait(timeout=30)
    record = json.loads((tmp_path / LOCK_NAME).read_text())
    assert record["pid"] == holder.pid and "released" not in record  # a stale lock file
    with pytest.warns(UserWarning, match=f"took over the writer lock .* pid {holder.pid}"):
        lock = RunDirLock(tmp_path).acquire()
    assert lock.previous["pid"] == holder.pid
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    lock.release()
    assert json.loads((tmp_path / LOCK_NAME).read_text())["released"]
    with RunDirLock(tmp_path) as again:  # released cleanly: taken without a warning
        assert again.previous is None


def test_refusal_names_the_holder_whose_lock_outlived_it(tmp_path):
    # The lock is held through an open file whose recorded writer no longer runs (as when a
    # child inherited the descriptor): never broken, and the message says what to look for.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(gone.stdout)
    with RunDirLock(tmp_path) as lock:
        (tmp_path / LOCK_NAME).write_text(json.dumps({**lock._record, "pid": dead_pid}))
        with pytest.raises(RunDirLocked, match=f"pid {dead_pid} no longer runs, but the lock is still held"):
            RunDirLock(tmp_path).acquire()


def tiny_ppo(out: Path, **kw):
    return resolve("ppo", "gymnax/Pendulum-v1", None).replace(
        total_env_steps=512, num_envs=16, num_steps=32, num_evals=1, eval_envs=4, out=str(out),
        progress=False, tensorboard=False, **kw)


def test_trainer_holds_the_lock_for_the_run_and_releases_it_on_errors(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with RunDirLock(run):  # another writer (this process) holds it: refused before compiling
        with pytest.raises(RunDirLocked, match=f"pid {os.getpid()} on host {socket.gethostname()}"):
            Trainer(tiny_ppo(run)).run()
    assert not (run / "config.json").exists() and not (run / "metrics.jsonl").exists()  # nothing written
    # a run that fails (resume without a checkpoint) releases the lock on its way out
    with pytest.raises(FileNotFoundError, match="no valid checkpoint"):
        Trainer(tiny_ppo(run, resume=str(run))).run()
    assert json.loads((run / LOCK_NAME).read_text())["released"]
    # while a run trains, its directory is locked; afterwards it is released
    seen = []

    def try_second_writer(row):
        with pytest.raises(RunDirLocked):
            RunDirLock(run).acquire()
        seen.append(row["env_steps"])

    Trainer(tiny_ppo(run), progress_fn=try_second_writer).run()
    assert seen == [512]
    assert json.loads((run / LOCK_NAME).read_text())["released"]


def test_cli_refuses_a_busy_run_directory_with_a_message(tmp_path, capsys):
    from diffrl.cli import main

    with RunDirLock(tmp_path):
        rc = main(["train", "--algo", "ppo", "--env", "gymnax/Pendulum-v1", "--total-env-steps", "512",
                   "--num-envs", "16", "--num-steps", "32", "--out", str(tmp_path), "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    assert f"is being written by another training process: pid {os.getpid()} on host" in err, err
