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
    summaries = [json.loads((tmp_path / name / "summary.json").read_text()) for name in "abc"]
    times = [s["compile/chunk_s"] for s in summaries]
    assert times[2] < 0.5 * min(times[:2]), times
    # the traced programs were kept too (diffrl.plumbing.program_cache): the warm run traced neither
    assert list((tmp_path / "cache-exported").glob("*.exported"))
    assert summaries[2]["compile/programs_read"] == 2, summaries[2]
    # and they compute what the runs that traced them computed, bit for bit
    assert _computed(tmp_path / "a") == _computed(tmp_path / "b") == _computed(tmp_path / "c")


def _computed(run):
    """A run's logged numbers without its timings."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not (k.startswith("walltime") or k in ("train/sps", "train/time_s"))}
            for row in rows]


@pytest.mark.heavy(40)
def test_without_the_cache_a_run_computes_the_same_bits(tmp_path):
    # one configuration, one program: cache on (written, then read) or off, the numbers agree
    env = {**os.environ, "DIFFRL_COMPILE_CACHE": str(tmp_path / "cache")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    for name, extra in (("on", []), ("read", []), ("off", ["--no-compile-cache"])):
        done = subprocess.run([sys.executable, "-m", "diffrl.cli", *TINY[:1], *extra, *TINY[1:],
                               "--out", str(tmp_path / name)], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads((tmp_path / "read" / "summary.json").read_text())
    assert read["compile/programs_read"] == 2
    assert _computed(tmp_path / "on") == _computed(tmp_path / "read") == _computed(tmp_path / "off")
