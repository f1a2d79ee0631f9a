"""Disk and permission faults, for real, on a small file system made for the test (a tmpfs with a
size limit, remounted read-only): an unwritable --out is refused before compiling; a disk that fills
up or turns read-only mid-run stops the run with one line naming the path and the checkpoint kept
(exit status 4), and that checkpoint verifies. Needs root (mount); skipped elsewhere."""
# A read-only remount of the whole file system is refused while the run holds files open for
# writing (metrics.jsonl, writer.lock); the checkpoint directory, written a checkpoint at a time,
# is made read-only by a read-only bind mount of itself.
import json
import subprocess
import sys
import time

import pytest

from diffrl.plumbing.checkpoint import latest_valid_checkpoint, verify_checkpoint

ARGS = ["--algo", "ppo", "--env", "gymnax/Pendulum-v1", "--num-envs", "16", "--num-steps", "32", "--eval-envs", "4",
        "--ppo.num-minibatches", "4", "--ppo.num-epochs", "1", "--no-progress", "--no-tensorboard"]


def mount(path, *options):
    return subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(path)],
                          capture_output=True, text=True)


@pytest.fixture
def small_fs(tmp_path):
    """``make(size)`` mounts a tmpfs of that size at a fresh directory and returns it."""
    mounted = []

    def make(size):
        path = tmp_path / f"fs{len(mounted)}"
        path.mkdir()
        proc = mount(path, f"size={size}")
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}): needs root")
        mounted.append(path)
        return path

    yield make
    for proc in STARTED:  # a run a failed assertion left behind
        proc.kill()
    STARTED.clear()
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path, mode):
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)


STARTED = []


def train(out, *extra):
    """A training run in a child process (killed at the test's end if still running)."""
    STARTED.append(subprocess.Popen([sys.executable, "-m", "diffrl.cli", "train", *ARGS, "--out", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return STARTED[-1]


def assert_stopped_keeping_a_checkpoint(proc, run, reason):
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("diffrl train: cannot write ") and reason in line, line
    kept = latest_valid_checkpoint(run)
    assert kept is not None and f"the last complete checkpoint {kept} is kept" in line
    assert verify_checkpoint(kept) is None
    for row in (run / "metrics.jsonl").read_text().splitlines():
        json.loads(row)  # never half a row


def test_unwritable_out_is_refused_before_compiling(small_fs, monkeypatch, capsys):
    from diffrl.cli import main
    from diffrl.core.trainer import Trainer

    fs = small_fs("1m")
    remount(fs, "ro")
    monkeypatch.setattr(Trainer, "_compile", lambda *a: pytest.fail("compiled"))
    assert main(["train", *ARGS, "--total-env-steps", "512", "--out", str(fs / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot write the run directory {fs / 'run'}: Read-only file system" in err


def test_a_disk_that_fills_up_mid_run_keeps_the_last_checkpoint(small_fs):
    fs = small_fs("1m")  # room for about three checkpoints of this run (about 240 kB each)
    run = fs / "run"
    proc = train(run, "--total-env-steps", str(40 * 512), "--num-evals", "40", "--keep-checkpoints", "1000")
    assert_stopped_keeping_a_checkpoint(proc, run, "No space left on device")


def test_a_checkpoint_directory_turned_read_only_mid_run_keeps_the_last_checkpoint(small_fs):
    run = small_fs("64m") / "run"
    proc = train(run, "--total-env-steps", str(4000 * 512), "--num-evals", "4000")
    deadline = time.time() + 300
    while not latest_valid_checkpoint(run):
        assert time.time() < deadline and proc.poll() is None, "no checkpoint written"
        time.sleep(0.2)
    checkpoints = run / "checkpoints"  # a read-only bind mount of itself: the next save is refused
    subprocess.run(["mount", "--bind", str(checkpoints), str(checkpoints)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(checkpoints)], check=True)
        assert_stopped_keeping_a_checkpoint(proc, run, "Read-only file system")
    finally:
        proc.kill()
        proc.wait()
        subprocess.run(["umount", "-l", str(checkpoints)], capture_output=True)


def test_the_verdict_never_shares_a_line_with_a_cut_off_traceback():
    """A thread's traceback in progress when the verdict is printed may already have sent a fragment
    (``RuntimeError: ``, no line end) to stderr, flushed by another writer of the same stream; the
    verdict still is a line of its own and the last one, and nothing written after it shows."""
    script = ("import sys\nfrom diffrl.commands import verdict\n"
              "verdict.PROCESS_ENTRY = True\n"
              "sys.stderr.write('earlier line\\nRuntimeError: '); sys.stderr.flush()\n"
              "verdict.say_last('diffrl train: cannot write x')\n"
              "sys.stderr.write('after the verdict\\n'); sys.stderr.flush()\n"
              "import os; os.write(2, b'from C after the verdict\\n')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "earlier line" and lines[-1] == "diffrl train: cannot write x", proc.stderr
    assert "after the verdict" not in proc.stderr
