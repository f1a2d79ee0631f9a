"""Checkpoints: bit-exact round trips, corruption detection, refusal, retention."""
import json
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from diffrl.plumbing.checkpoint import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    CorruptCheckpointWarning,
    best_checkpoint,
    latest_valid_checkpoint,
    read_metadata,
    restore_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from diffrl.maths.normalization import init_stats, update_stats

NUM_SEEDS = 2


@struct.dataclass
class FakeTrainState:
    algo: dict
    obs_stats: object
    key: jax.Array
    iteration: jax.Array
    done: jax.Array
    empty: jax.Array


def make_state(seed: int) -> FakeTrainState:
    """A nested pytree with float32/int32/bool/uint32 leaves and a leading seeds axis."""
    def one(key):
        k1, k2, k3 = jax.random.split(key, 3)
        stats = update_stats(init_stats(3), jax.random.normal(k1, (5, 3)))
        return FakeTrainState(
            algo={"params": {"w": jax.random.normal(k2, (4, 3)), "b": jnp.zeros((3,))},
                  "opt": (jnp.array(7, jnp.int32), [jax.random.uniform(k3, (2,))])},
            obs_stats=stats,
            key=jax.random.split(key)[0],
            iteration=jnp.array(11, jnp.int32),
            done=jax.random.bernoulli(k3, 0.5, (6,)),
            empty=jnp.zeros((0, 4), jnp.float32),
        )

    keys = jax.random.split(jax.random.PRNGKey(seed), NUM_SEEDS)
    return jax.vmap(one)(keys)


def meta(**kw):
    base = {"algo": "ppo", "env": "toy/MirrorGoals", "config": {"algo": "ppo", "hidden": (4, 3)},
            "env_steps": 100, "iteration": 11}
    base.update(kw)
    return base


def assert_bit_exact(a, b):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


def test_round_trip_is_bit_exact(tmp_path):
    state = make_state(0)
    assert state.key.dtype == jnp.uint32 and state.done.dtype == jnp.bool_
    path = save_checkpoint(tmp_path, 5, state, meta(), best_metric=1.5)
    assert path == tmp_path / "checkpoints" / "5"
    assert verify_checkpoint(path) is None
    md = read_metadata(path)
    assert md["format"] == CHECKPOINT_FORMAT and md["algo"] == "ppo" and md["eval_return"] == 1.5
    assert md["config"]["hidden"] == [4, 3] and "jax" in md["versions"]
    restored = restore_checkpoint(path, make_state(1), expected_algo="ppo", expected_env="toy/MirrorGoals")
    assert_bit_exact(restored, state)
    assert not np.array_equal(np.asarray(make_state(1).algo["params"]["w"]), np.asarray(state.algo["params"]["w"]))
    # no temporary directory is left behind
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["5", "best.json"]


def test_typed_keys_and_numpy_leaves_round_trip(tmp_path):
    tree = {"key": jax.random.key(3), "np": np.arange(4, dtype=np.int64), "scalar": 2.5}
    path = save_checkpoint(tmp_path, 0, tree, meta())
    target = {"key": jax.random.key(0), "np": np.zeros(4, np.int64), "scalar": 0.0}
    out = restore_checkpoint(path, target)
    assert jnp.array_equal(jax.random.key_data(out["key"]), jax.random.key_data(tree["key"]))
    assert out["np"].dtype == np.int64 and np.array_equal(out["np"], tree["np"])
    assert out["scalar"] == 2.5 and isinstance(out["scalar"], float)


def _largest_file(path: Path) -> Path:
    files = [p for p in (path / "state").rglob("*") if p.is_file()]
    return max(files, key=lambda p: p.stat().st_size)


def test_truncated_checkpoint_is_skipped(tmp_path):
    state = make_state(0)
    save_checkpoint(tmp_path, 1, state, meta(iteration=1))
    newest = save_checkpoint(tmp_path, 2, make_state(2), meta(iteration=2))
    victim = _largest_file(newest)
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    assert "truncated" in verify_checkpoint(newest)
    with pytest.warns(CorruptCheckpointWarning, match="step 2"):
        found = latest_valid_checkpoint(tmp_path)
    assert found == tmp_path / "checkpoints" / "1"
    assert_bit_exact(restore_checkpoint(found, make_state(3)), state)
    with pytest.raises(CheckpointError, match="corrupt"):
        restore_checkpoint(newest, make_state(3))


def test_flipped_byte_and_missing_file_are_detected(tmp_path):
    path = save_checkpoint(tmp_path, 1, make_state(0), meta())
    victim = _largest_file(path)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    assert "checksum" in verify_checkpoint(path)
    victim.unlink()
    assert "missing" in verify_checkpoint(path)
    with pytest.warns(CorruptCheckpointWarning):
        assert latest_valid_checkpoint(tmp_path) is None
    assert latest_valid_checkpoint(tmp_path / "nothing-here") is None


def test_wrong_version_algorithm_or_structure_is_refused(tmp_path):
    path = save_checkpoint(tmp_path, 1, make_state(0), meta())
    with pytest.raises(CheckpointError, match="algo 'ppo'.*'reppo'"):
        restore_checkpoint(path, make_state(1), expected_algo="reppo")
    with pytest.raises(CheckpointError, match="does not match the target"):
        bigger = make_state(1).replace(done=jnp.zeros((NUM_SEEDS, 7), bool))
        restore_checkpoint(path, bigger)
    with pytest.raises(CheckpointError, match="different algorithm"):
        restore_checkpoint(path, {"only": jnp.zeros(3)})
    md_file = path / "metadata.json"
    md = json.loads(md_file.read_text())
    md["format"] = CHECKPOINT_FORMAT + 1
    md_file.write_text(json.dumps(md))
    with pytest.raises(CheckpointError, match="format version 2"):
        restore_checkpoint(path, make_state(1))


def test_a_checkpoint_that_predates_an_added_per_step_flag_restores_it_as_zeros_and_all_else_exactly(tmp_path):
    """Checkpoints written before env_state.info gained 'nonfinite_state' (checkpoint.ADDED_LEAVES) restore into
    the current train state: every stored leaf bit for bit, the flag False; any other missing leaf is refused."""
    from diffrl.plumbing.checkpoint import check_target, read_metadata

    old = make_state(0).replace(algo={**make_state(0).algo, "info": {"a": jnp.ones((NUM_SEEDS, 3)),
                                                                       "z": jnp.full((NUM_SEEDS,), 5)}})
    path = save_checkpoint(tmp_path, 1, old, meta())
    flags = jnp.ones((NUM_SEEDS, 6), bool)
    current = make_state(1).replace(algo={**make_state(1).algo, "info": {"a": jnp.zeros((NUM_SEEDS, 3)),
                                                                          "nonfinite_state": flags,
                                                                          "z": jnp.zeros((NUM_SEEDS,), jnp.int32)}})
    check_target(read_metadata(path), jax.eval_shape(lambda: current))  # the resume check agrees
    restored = restore_checkpoint(path, current)
    assert not np.asarray(restored.algo["info"].pop("nonfinite_state")).any()
    assert_bit_exact(restored, old)
    renamed = make_state(1).replace(algo={**make_state(1).algo, "info": {"a": jnp.zeros((NUM_SEEDS, 3)),
                                                                          "other_flag": flags,
                                                                          "z": jnp.zeros((NUM_SEEDS,), jnp.int32)}})
    with pytest.raises(CheckpointError, match="different algorithm"):
        restore_checkpoint(path, renamed)


def test_keep_last_n_and_best_pointer(tmp_path):
    state = make_state(0)
    returns = {10: 1.0, 20: 5.0, 30: 2.0, 40: float("nan"), 50: 3.0, 60: None}
    for step, ret in returns.items():
        save_checkpoint(tmp_path, step, state, meta(), keep=2, best_metric=ret)
    kept = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    assert kept == [20, 50, 60]  # newest two plus the best
    assert json.loads((tmp_path / "checkpoints" / "best.json").read_text())["step"] == 20
    assert best_checkpoint(tmp_path) == tmp_path / "checkpoints" / "20"
    save_checkpoint(tmp_path, 70, state, meta(), keep=2, best_metric=9.0)
    kept = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    assert kept == [60, 70] and best_checkpoint(tmp_path).name == "70"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert latest_valid_checkpoint(tmp_path).name == "70"


def test_resaving_a_step_replaces_it_and_stale_temp_dirs_are_removed(tmp_path):
    save_checkpoint(tmp_path, 3, make_state(0), meta())
    stale = tmp_path / "checkpoints" / ".tmp-9-deadbeef"
    stale.mkdir()
    path = save_checkpoint(tmp_path, 3, make_state(4), meta())
    assert not stale.exists()
    assert_bit_exact(restore_checkpoint(path, make_state(0)), make_state(4))


def test_relative_run_directory(tmp_path, monkeypatch):
    """Run directories are usually relative (runs/<name>); orbax needs absolute paths."""
    import jax.numpy as jnp

    from diffrl.plumbing.checkpoint import latest_valid_checkpoint, restore_checkpoint, save_checkpoint

    monkeypatch.chdir(tmp_path)
    state = {"w": jnp.arange(6.0).reshape(2, 3), "step": jnp.asarray(3, jnp.int32)}
    save_checkpoint("runs/rel", 10, state, {"algo": "ppo", "env": "toy/X"})
    path = latest_valid_checkpoint("runs/rel")
    assert path is not None
    restored = restore_checkpoint(path, state, expected_algo="ppo")
    assert (restored["w"] == state["w"]).all() and int(restored["step"]) == 3
