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


@pytest.mark.parametrize("algo", ["ppo", "reppo", "trudi", "amdp"])
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
