"""Compile once: a second `diffrl train` of the same configuration loads its programs from the
persistent compilation cache, also when two processes filled it at the same time."""
import json
import os
import subprocess
import sys

import pytest

from diffrl.cli import compile_cache_dir

TINY = ["train", "--algo", "ppo", "--env", "gymnax/Pendulum-v1", "--total-env-steps", "1024", "--num-envs", "16",
        "--num-steps", "32", "--num-evals", "1", "--eval-envs", "4", "--ppo.num-minibatches", "4",
        "--ppo.num-epochs", "1", "--no-progress", "--no-tensorboard"]


def test_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("DIFFRL_COMPILE_CACHE", raising=False)
    assert compile_cache_dir() == str(tmp_path / "diffrl" / "jax")
    monkeypatch.setenv("DIFFRL_COMPILE_CACHE", str(tmp_path / "mine"))
    assert compile_cache_dir() == str(tmp_path / "mine")
    monkeypatch.setenv("DIFFRL_COMPILE_CACHE", "0")
    assert compile_cache_dir() is None


def test_the_flag_turns_the_cache_off_and_is_not_passed_on(monkeypatch, tmp_path):
    from diffrl.cli import use_compile_cache

    monkeypatch.setenv("DIFFRL_COMPILE_CACHE", str(tmp_path / "cache"))
    assert use_compile_cache(["train", "--no-compile-cache", "--seed", "1"]) == ["train", "--seed", "1"]
    assert not (tmp_path / "cache").exists()


@pytest.mark.heavy(60)  # three small trainings in child processes, two of them at once: about a minute
def test_second_run_loads_what_two_concurrent_runs_compiled(tmp_path):
    env = {**os.environ, "DIFFRL_COMPILE_CACHE": str(tmp_path / "cache")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)

    def start(name):
        return subprocess.Popen([sys.executable, "-m", "diffrl.cli", *TINY, "--out", str(tmp_path / name)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    cold = [start("a"), start("b")]  # two writers of one cache directory
    for proc in cold:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    assert list((tmp_path / "cache").iterdir())
    warm = start("c")
    _, err = warm.communicate(timeout=600)
    assert warm.returncode == 0, err
    times = [json.loads((tmp_path / name / "summary.json").read_text())["compile/chunk_s"] for name in "abc"]
    assert times[2] < 0.5 * min(times[:2]), times
