"""Runs people can keep: interrupt + resume equals uninterrupted, bit for bit."""
import json

import pytest

from diffrl.plumbing.checkpoint import latest_valid_checkpoint
from diffrl.core.run_dir import resume_config
from diffrl.core.trainer import Trainer
from diffrl.config.presets import resolve

DROP = ("walltime", "train/sps", "train/time_s")


def rows(run_dir):
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        out.append({k: v for k, v in r.items() if k not in DROP})
    return out


def small(algo, out, **kw):
    config = resolve(algo, "gymnax/Pendulum-v1", None).replace(
        total_env_steps=4 * 512, num_envs=16, num_steps=32, num_evals=4, eval_envs=4,
        out=str(out), progress=False, tensorboard=False, **kw)
    sub = "ppo" if algo == "ppo" else "reppo"
    chain = {"trudi": "diffusion", "amdp": "adjoint"}.get(algo)
    if chain:  # a small chain keeps the test quick; the code path is the same
        config = config.replace(**{chain: getattr(config, chain).__class__(
            **{**getattr(config, chain).__dict__, "hidden": (16, 16), "num_steps": 4})})
    return config.replace(**{sub: getattr(config, sub).__class__(
        **{**getattr(config, sub).__dict__, "num_minibatches": 4, "num_epochs": 1})})


@pytest.mark.parametrize("algo", ["ppo", "reppo", pytest.param("trudi", marks=pytest.mark.heavy(24)),
                                  pytest.param("amdp", marks=pytest.mark.heavy(19))])  # seconds measured on one core with a warm compile cache (tests/conftest.py starts heavy tests first)
def test_interrupt_and_resume_is_bitwise_identical(tmp_path, algo):
    Trainer(small(algo, tmp_path / "full")).run()
    interrupted = Trainer(small(algo, tmp_path / "cut"))
    interrupted.progress_fn = lambda row: interrupted.request_stop() if row["env_steps"] == 1024 else None
    summary = interrupted.run()
    assert summary["interrupted"] and summary["env_steps"] == 1024
    assert latest_valid_checkpoint(tmp_path / "cut") is not None
    Trainer(resume_config(tmp_path / "cut")).run()
    full, resumed = rows(tmp_path / "full"), rows(tmp_path / "cut")
    assert len(full) == len(resumed) == 5
    assert full == resumed  # every metric, every evaluation, to the bit


def test_extend_finished_run_and_corrupt_checkpoint_fallback(tmp_path):
    run = tmp_path / "run"
    Trainer(small("ppo", run)).run()
    # corrupt the newest checkpoint: the previous one is used (with a warning)
    newest = latest_valid_checkpoint(run)
    victim = max((p for p in (newest / "state").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    with pytest.warns(UserWarning):
        previous = latest_valid_checkpoint(run)
    assert previous is not None and previous != newest
    config = resume_config(run, total_env_steps=6 * 512)
    summary = Trainer(config).run()
    assert summary["env_steps"] == 6 * 512
    steps = [r["env_steps"] for r in rows(run)]
    assert steps == sorted(steps) and steps[-1] == 6 * 512 and len(steps) == len(set(steps))
    assert (run / "policy" / "policy.json").exists() and (run / "curve.png").exists()


def test_sigterm_mid_run_leaves_a_loadable_checkpoint(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "diffrl.cli", "train", "--algo", "ppo", "--env", "gymnax/Pendulum-v1",
           "--total-env-steps", str(400 * 512), "--num-envs", "16", "--num-steps", "32", "--num-evals", "400",
           "--eval-envs", "4", "--ppo.num-minibatches", "4", "--ppo.num-epochs", "1", "--out", str(out),
           "--no-progress", "--no-tensorboard"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = out / "metrics.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 3):
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err  # 128 + SIGTERM: a scheduler tells it from a finished run
    assert "SIGTERM: stopping after this chunk: checkpoint will be written" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and 0 < summary["env_steps"] < 400 * 512
    path = latest_valid_checkpoint(out)
    assert path is not None and int(path.name) == summary["env_steps"]
    resumed = resume_config(out, total_env_steps=summary["env_steps"] + 2 * 512)
    assert Trainer(resumed).run()["env_steps"] == summary["env_steps"] + 2 * 512


def _as_stored_before_the_trust_region_moved(config: dict) -> dict:
    """A run config (config.json's "config") in the layout diffrl wrote before the trust-region settings
    moved to the algorithm's section (commit 55494c5 and earlier): the chain's KL settings in
    ``diffusion``, AMDP's drift trust region in ``adjoint``, no ``reppo.kl_multiplier``, ... Moved by hand,
    key by key, not through diffrl.config.MOVED_FIELDS (which the loading under test uses). That diffrl
    stored every shared section, those the algorithm does not read at their defaults."""
    from diffrl.config import TrainConfig
    from diffrl.plumbing.records import config_to_json

    old = {**config_to_json(TrainConfig()), **json.loads(json.dumps(config))}
    reppo, offpolicy = old["reppo"], old["offpolicy"]
    old["diffusion"].update(trust_region=reppo.pop("trust_region"), kl_estimator=reppo.pop("kl_estimator"),
                            kl_samples=reppo.pop("kl_samples"), kl_paths=reppo.pop("kl_paths"))
    drift = offpolicy if old["algo"] == "amdp-off" else reppo
    old["adjoint"].update(trust_region=drift["kl_multiplier"], kl_bound=drift["kl_bound"],
                          lambda_init=reppo.pop("lambda_init"))
    reppo.pop("kl_multiplier"), offpolicy.pop("kl_multiplier"), offpolicy.pop("kl_bound")
    if old["algo"] == "amdp":  # AMDP read its radius from adjoint; older AMDP presets carried REPPO's
        reppo["kl_bound"] = 0.05
    return old


@pytest.mark.heavy(27)  # seconds measured on one core with a warm compile cache (tests/conftest.py starts heavy tests first)
def test_a_run_stored_before_the_trust_region_moved_resumes_and_evaluates(tmp_path, capsys):
    """A run directory whose config.json predates the move (diffrl.config.MOVED_FIELDS) loads with the
    settings in their new place: `diffrl train --resume` continues it bit for bit as the uninterrupted run
    (so the moved values, AMDP's radius 0.2 and its learned multiplier, are the ones used), `diffrl eval`
    evaluates it, and its exported policy, stored with the moved fields, loads."""
    import dataclasses
    import warnings

    import jax
    import numpy as np

    import diffrl
    from diffrl.cli import main
    from diffrl.core.run_dir import load_run_config

    def amdp(out):
        config = small("amdp", out)
        return config.replace(reppo=dataclasses.replace(config.reppo, kl_bound=0.2, kl_multiplier="dual",
                                                        lambda_init=2.0))

    Trainer(amdp(tmp_path / "full")).run()
    cut = tmp_path / "cut"
    interrupted = Trainer(amdp(cut))
    interrupted.progress_fn = lambda row: interrupted.request_stop() if row["env_steps"] == 1024 else None
    assert interrupted.run()["interrupted"]
    record = json.loads((cut / "config.json").read_text())
    record["config"] = _as_stored_before_the_trust_region_moved(record["config"])
    for segment in record.get("segments", []):
        segment["config"] = _as_stored_before_the_trust_region_moved(segment["config"])
    assert "kl_multiplier" not in record["config"]["reppo"] and record["config"]["adjoint"]["kl_bound"] == 0.2
    (cut / "config.json").write_text(json.dumps(record))

    with pytest.warns(UserWarning, match="adjoint.kl_bound -> reppo.kl_bound"):
        loaded = load_run_config(cut)
    assert (loaded.reppo.kl_bound, loaded.reppo.kl_multiplier, loaded.reppo.lambda_init) == (0.2, "dual", 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["train", "--resume", str(cut), "--no-progress"]) == 0
    assert rows(tmp_path / "full") == rows(cut)  # every metric, every evaluation, to the bit
    changed = json.loads((cut / "config.json").read_text())["segments"][-1]["changed"]
    assert not any(k.startswith(("adjoint.", "diffusion.", "reppo.")) for k in changed), changed  # only moved
    capsys.readouterr()
    assert main(["eval", str(cut), "--episodes", "2"]) == 0
    assert "sde" in capsys.readouterr().out

    # an export written before the move stored the drift trust region with the policy's config
    info = json.loads((cut / "policy" / "policy.json").read_text())
    info["config"].update(trust_region="dual", kl_bound=0.2, lambda_init=2.0)
    (cut / "policy" / "policy.json").write_text(json.dumps(info))
    with pytest.warns(UserWarning, match="trust_region \\(now reppo.kl_multiplier\\)"):
        act = diffrl.load_policy(cut / "policy")
    action = act(np.zeros((3, loaded_obs_size(cut)), np.float32), jax.random.PRNGKey(0))
    assert action.shape[0] == 3 and np.all(np.abs(np.asarray(action)) <= 1)


def loaded_obs_size(run_dir) -> int:
    return int(json.loads((run_dir / "policy" / "policy.json").read_text())["obs_size"])


def test_stored_trust_region_settings_load_where_each_algorithm_reads_them(tmp_path):
    """load_run_config on configs stored before the move, per algorithm: TruDi's chain settings go to
    reppo; amdp-off's drift trust region to its offpolicy section; REPPO's stored radius stays REPPO's
    (TruDi never read adjoint.kl_bound)."""
    from diffrl.config import TrainConfig
    from diffrl.core.run_dir import load_run_config
    from diffrl.plumbing.records import config_to_json

    def stored(algo, **sections):
        config = TrainConfig(algo=algo)
        for name, changes in sections.items():
            config = config.replace(**{name: getattr(config, name).__class__(
                **{**getattr(config, name).__dict__, **changes})})
        run = tmp_path / algo
        run.mkdir()
        old = _as_stored_before_the_trust_region_moved(config_to_json(config))
        (run / "config.json").write_text(json.dumps({"config": old}))
        with pytest.warns(UserWarning, match="read in their new place"):
            return load_run_config(run)

    trudi = stored("trudi", reppo={"trust_region": "none", "kl_samples": 2, "kl_paths": "behaviour",
                                   "kl_bound": 0.3})
    assert (trudi.reppo.trust_region, trudi.reppo.kl_samples, trudi.reppo.kl_paths) == ("none", 2, "behaviour")
    assert trudi.reppo.kl_bound == 0.3
    off = stored("amdp-off", offpolicy={"kl_multiplier": "none", "kl_bound": 0.4})
    assert (off.offpolicy.kl_multiplier, off.offpolicy.kl_bound) == ("none", 0.4)
    assert not hasattr(off, "reppo")  # a section amdp-off does not read is not part of its run config
