"""The test suite's own machinery: how tests/conftest.py splits the work between pytest-xdist
workers and cores, and that learning runs train on one core."""
import os
import subprocess
import sys

import pytest
from conftest import pin_xdist_worker, worker_chunks
from multiseed import ONE_CORE


def test_worker_chunks_are_worksteals_first_blocks():
    assert worker_chunks(10, 2) == [5, 5]
    assert worker_chunks(11, 2) == [5, 6]
    assert worker_chunks(7, 3) == [2, 2, 3]
    assert sum(worker_chunks(650, 2)) == 650


def test_each_xdist_worker_gets_its_own_block_of_cores():
    assert pin_xdist_worker("gw0", 2, [0, 1]) == {0}
    assert pin_xdist_worker("gw1", 2, [0, 1]) == {1}
    assert pin_xdist_worker("gw1", 2, [0, 1, 2, 3, 4]) == {2, 3}
    blocks = [pin_xdist_worker(f"gw{i}", 3, list(range(8))) for i in range(3)]
    assert all(len(b) == 2 for b in blocks) and not set.intersection(*blocks)
    assert pin_xdist_worker(None, 0, [0, 1]) is None          # not under xdist
    assert pin_xdist_worker("gw2", 3, [0, 1]) is None         # more workers than cores: share them
    assert pin_xdist_worker("master", 2, [0, 1]) is None


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux-only")
def test_learning_runs_train_on_one_core_whatever_the_machine():
    code = ONE_CORE + "import jax\nprint(len(os.sched_getaffinity(0)), jax.device_count())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"}).stdout.split()
    assert out == ["1", "1"]


def test_in_process_tests_compile_fast_and_learning_runs_keep_the_callers_flags():
    from conftest import TEST_XLA_FLAGS
    from multiseed import USER_XLA_FLAGS

    for flag in TEST_XLA_FLAGS:
        assert f"--{flag}=" in os.environ["XLA_FLAGS"]
    # The learning runs' children get the flags the run was started with, not the test ones.
    assert USER_XLA_FLAGS == os.environ["DIFFRL_TEST_USER_XLA_FLAGS"]
