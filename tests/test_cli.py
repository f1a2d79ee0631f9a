"""The command line: train writes the run directory; envs lists tasks; bad input is refused."""
import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from diffrl.cli import main


def test_train_writes_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["train", "--algo", "ppo", "--env", "gymnax/Pendulum-v1", "--total-env-steps", "4096",
               "--num-envs", "16", "--num-steps", "32", "--num-evals", "2", "--eval-envs", "4",
               "--ppo.num-minibatches", "4", "--ppo.num-epochs", "1", "--out", str(out), "--no-progress"])
    assert rc == 0
    record = json.loads((out / "config.json").read_text())
    assert record["config"]["algo"] == "ppo" and record["config"]["num_envs"] == 16
    assert record["config"]["preset"] == "ppo-gymnax"
    assert record["versions"]["jax"] == importlib.metadata.version("jax")  # the jax this run used
    # and the machine it ran on: CPU and XLA flags decide the rounding, and so the per-seed curves
    assert record["machine"]["cpu"] and record["machine"]["xla_flags"] == os.environ.get("XLA_FLAGS", "")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3  # initial evaluation + one per chunk
    for key in ("env_steps", "walltime", "train/sps", "eval/episode_return", "eval/episode_return_std"):
        assert key in rows[-1], key
    assert rows[-1]["env_steps"] == 4096
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env_steps"] == 4096 and "compile/chunk_s" in summary
    assert list(out.glob("events.out.tfevents.*"))


@pytest.mark.parametrize("args, message", [
    (["--algo", "ppoo"], "did you mean ppo"),
    (["--env", "gymnax/Pendulum"], "Pendulum-v1"),
    (["--num-envs", "10", "--num-steps", "3", "--ppo.num-minibatches", "4"], "must divide the batch"),
    (["--ppo.learning-rate", "-1"], "learning-rate must be positive"),
])
def test_bad_input_refused_before_compiling(args, message, capsys):
    base = ["train", "--env", "gymnax/Pendulum-v1", "--no-progress", "--out", "/tmp/diffrl-never-written"]
    rc = main(base + args)
    assert rc == 2
    assert message in capsys.readouterr().err


def test_envs_lists_playground_tasks():
    proc = subprocess.run([sys.executable, "-m", "diffrl.cli", "envs", "--names-only"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    names = proc.stdout.split()
    for task in ("playground/CartpoleSwingup", "playground/CheetahRun", "playground/HumanoidWalk",
                 "playground/G1JoystickFlatTerrain", "playground/T1JoystickRoughTerrain",
                 "brax/ant", "gymnax/Pendulum-v1", "toy/MirrorGoals"):
        assert task in names


def test_envs_describes_sizes(tmp_path):
    """--build builds the simulators and caches their sizes; the default listing reads the cache
    (and builds nothing, so it answers in about a second)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}

    def envs(*args):
        proc = subprocess.run([sys.executable, "-m", "diffrl.cli", "envs", *args], capture_output=True, text=True,
                              timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr
        line = next(l for l in proc.stdout.splitlines() if l.startswith("gymnax/Pendulum-v1"))
        return line.split()[1:4], proc

    sizes, proc = envs()  # nothing cached yet: names, and a note saying how to get the sizes
    assert sizes == ["-", "-", "-"] and "diffrl envs --build" in proc.stderr
    sizes, proc = envs("--suite", "gymnax", "--build")
    assert sizes == ["3", "3", "1"] and "Warning" not in proc.stderr
    sizes, proc = envs()
    assert sizes == ["3", "3", "1"] and "playground/CartpoleBalance" in proc.stdout


def test_envs_default_listing_builds_no_simulator(tmp_path, monkeypatch, capsys):
    from diffrl.envs import registry

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(registry, "describe", lambda *a, **k: pytest.fail("built a simulator"))
    monkeypatch.setattr(registry, "make", lambda *a, **k: pytest.fail("built a simulator"))
    assert main(["envs"]) == 0
    assert "playground/CartpoleBalance" in capsys.readouterr().out


def test_help_documents_fields(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    assert "--total-env-steps" in text and "Parallel environments per seed" in text


def _parsed_train_config(monkeypatch, argv):
    """The config ``diffrl train argv`` would train (training itself replaced by a capture)."""
    from diffrl.commands import train

    captured = []
    monkeypatch.setattr(train, "run_training", lambda config, move_aside: captured.append(config) or 0)
    assert main(["train", *argv]) == 0
    return captured[0]


def test_moved_trust_region_flags_keep_working_with_a_note(monkeypatch, capsys):
    """The trust-region settings moved to the algorithm's section (diffrl.config.MOVED_FIELDS): an old
    flag (either form) sets the new field, with a one-line note naming the new flag."""
    config = _parsed_train_config(monkeypatch, ["--algo", "trudi", "--env", "gymnax/Pendulum-v1",
                                                "--diffusion.trust-region", "action", "--diffusion.kl-samples=8",
                                                "--diffusion.kl-estimator", "sampled"])
    assert (config.reppo.trust_region, config.reppo.kl_samples, config.reppo.kl_estimator) == ("action", 8, "sampled")
    err = capsys.readouterr().err
    assert "diffrl train: note: --diffusion.trust-region is now --reppo.trust-region" in err.splitlines()
    assert "diffrl train: note: --diffusion.kl-samples is now --reppo.kl-samples" in err
    config = _parsed_train_config(monkeypatch, ["--algo", "amdp", "--env", "gymnax/Pendulum-v1",
                                                "--adjoint.kl-bound", "0.2", "--adjoint.trust-region=dual",
                                                "--adjoint.lambda-init", "2"])
    assert (config.reppo.kl_bound, config.reppo.kl_multiplier, config.reppo.lambda_init) == (0.2, "dual", 2.0)
    assert "note: --adjoint.trust-region is now --reppo.kl-multiplier" in capsys.readouterr().err
    # amdp-off's drift trust region is its own section's
    config = _parsed_train_config(monkeypatch, ["--algo", "amdp-off", "--env", "gymnax/Pendulum-v1",
                                                "--adjoint.trust-region", "none", "--adjoint.kl-bound", "0.3"])
    assert (config.offpolicy.kl_multiplier, config.offpolicy.kl_bound) == ("none", 0.3)
    assert "note: --adjoint.kl-bound is now --offpolicy.kl-bound" in capsys.readouterr().err
    # a moved setting the algorithm does not read is refused as before, under its new name
    assert main(["train", "--algo", "reppo", "--env", "gymnax/Pendulum-v1", "--diffusion.trust-region", "none"]) == 2
    assert "--reppo.trust-region" in capsys.readouterr().err


def test_help_lists_the_trust_region_flags_with_the_algorithm(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--algo", "trudi", "--help"])
    text = capsys.readouterr().out
    for flag in ("--reppo.trust-region", "--reppo.kl-estimator", "--reppo.kl-samples", "--reppo.kl-paths"):
        assert flag in text, flag
    assert "--diffusion.trust-region" not in text and "--diffusion.kl-samples" not in text
    with pytest.raises(SystemExit):
        main(["train", "--algo", "ppo", "--help"])
    text = capsys.readouterr().out
    for flag in ("trust-region", "kl-samples", "kl-multiplier", "lambda-init", "kl-paths"):
        assert f"--reppo.{flag}" not in text and f"--diffusion.{flag}" not in text, flag


def test_each_algorithms_help_lists_exactly_the_settings_it_reads(capsys):
    """``diffrl train --algo X --help``: every field of the sections X reads, less the ones X ignores
    (its ``unused_settings``: ``--reppo.kl-multiplier`` is AMDP's, TruDi reads the reppo section
    without it), and no flag of a section X does not read."""
    import dataclasses
    import re

    from diffrl.algos.registry import ALGORITHMS, ALGORITHM_SECTIONS, CONFIG_SECTIONS, UNUSED_SETTINGS
    from diffrl.config import TrainConfig

    def flags(text: str) -> set[str]:
        """The flags tyro lists (a line of its box starting with one), not those named in help texts."""
        return set(re.findall(r"^\W*--([a-z0-9_-]+\.[a-z0-9-]+)", text, re.MULTILINE))

    for algo in ALGORITHMS:
        with pytest.raises(SystemExit):
            main(["train", "--algo", algo, "--help"])
        shown = flags(capsys.readouterr().out)
        reads = ALGORITHM_SECTIONS[algo]
        for section in CONFIG_SECTIONS:
            for f in dataclasses.fields(getattr(TrainConfig(), section)):
                dotted = f"{section}.{f.name}"
                flag = dotted.replace("_", "-")
                listed = flag in shown or f"{section}.no-{f.name.replace('_', '-')}" in shown
                expected = section in reads and dotted not in UNUSED_SETTINGS[algo]
                assert listed == expected, (algo, dotted, "missing" if expected else "listed but not read")


@pytest.mark.heavy(49)
def test_eval_export_plot_on_a_run(tmp_path, capsys):
    import jax
    import numpy as np

    import diffrl

    out = tmp_path / "run"
    assert main(["train", "--algo", "reppo", "--env", "gymnax/Pendulum-v1", "--total-env-steps", "2048",
                 "--num-envs", "16", "--num-steps", "32", "--num-evals", "2", "--eval-envs", "4",
                 "--reppo.num-minibatches", "4", "--reppo.num-epochs", "1", "--out", str(out),
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "4", "--json", str(tmp_path / "e.json")]) == 0
    text = capsys.readouterr().out
    for sampler in ("mean", "sample", "best-of-k"):
        assert sampler in text
    results = json.loads((tmp_path / "e.json").read_text())
    assert results["samplers"]["mean"]["episode_length"] == 200.0
    assert main(["eval", str(out), "--sampler", "ode"]) == 2  # not offered by a Gaussian policy
    capsys.readouterr()
    assert main(["eval", str(out), "--episodes", "2", "--sampler", "mean,best-of-k"]) == 0  # a list, comma-separated
    text = capsys.readouterr().out
    assert "mean" in text and "best-of-k" in text and "sample " not in text
    assert main(["export", str(out), "--out", str(tmp_path / "pol")]) == 0
    act = diffrl.load_policy(tmp_path / "pol")
    action = act(np.zeros((5, 3), np.float32), jax.random.PRNGKey(0))
    assert action.shape == (5, 1) and np.all(np.abs(action) <= 1)
    # every sampler of the policy as ONNX (tests/test_deploy.py checks each policy kind's numbers)
    assert main(["export", str(out), "--out", str(tmp_path / "onnx"), "--format", "onnx"]) == 0
    assert "mean: policy_mean.onnx" in capsys.readouterr().out
    import onnxruntime as ort

    obs = np.linspace(-3, 3, 15, dtype=np.float32).reshape(5, 3)
    session = ort.InferenceSession(str(tmp_path / "onnx" / "policy_mean.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["action"], {"obs": obs})[0],
                               diffrl.load_policy(tmp_path / "onnx", "mean")(obs, jax.random.PRNGKey(0)), atol=1e-4)
    assert (tmp_path / "onnx" / "policy_sample.onnx").exists()
    # best-of-k travels with the critic: the export reproduces the trainer's own best-of-k evaluation
    assert (tmp_path / "onnx" / "policy_best-of-k.onnx").exists()
    from diffrl.commands.trained_run import load_trained
    from diffrl.maths.normalization import normalise_obs

    trained, state, _ = load_trained(str(out))
    seed0 = jax.tree.map(lambda x: x[0], state)
    key = jax.random.PRNGKey(3)
    want = trained.algo.eval_action(seed0.algo, normalise_obs(seed0.obs_stats, obs, trained.config),
                                    normalise_obs(seed0.critic_obs_stats, obs, trained.config), key, "best-of-k")
    got = diffrl.load_policy(tmp_path / "onnx", "best-of-k")(obs, key)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert main(["export", str(out), "--out", str(tmp_path / "bok"), "--sampler", "best-of-k"]) == 0
    np.testing.assert_allclose(diffrl.load_policy(tmp_path / "bok")(obs, key), want, atol=1e-5)
    assert main(["export", str(out), "--out", str(tmp_path / "x"), "--seed-index", "3"]) == 2
    assert main(["plot", str(out), "--out", str(tmp_path / "c.png"), "--x", "walltime"]) == 0
    assert (tmp_path / "c.png").stat().st_size > 1000


# -- TruDi's retired sampler names ("ode" -> "reversal-ode", "ode-c" -> "noise-free") ----------
RETIRED = [("ode", "reversal-ode"), ("ode-c", "noise-free")]


@pytest.mark.parametrize("old, new", RETIRED)
def test_train_refuses_a_retired_trudi_sampler_naming_the_new_one(old, new, capsys):
    rc = main(["train", "--algo", "trudi", "--env", "gymnax/Pendulum-v1", "--eval-samplers", "sde", old,
               "--no-progress", "--out", "/tmp/diffrl-never-written"])
    assert rc == 2
    assert f"'{old}' is now '{new}'" in capsys.readouterr().err


def trudi_algo_stub():
    """What the sampler checks read from a TruDi algorithm: its policy and sampler names."""
    from types import SimpleNamespace

    from diffrl.policies.diffusion import DiffusionPolicy, DiffusionPolicyConfig

    policy = DiffusionPolicy(DiffusionPolicyConfig(hidden=(4,)), 1)
    return SimpleNamespace(policy=policy, samplers=policy.samplers + ("best-of-k",))


@pytest.fixture
def trudi_run_stub(monkeypatch):
    """``load_trained`` answering with a TruDi run stub: the sampler checks of eval, export
    and actions run before anything is evaluated, so no training is needed to reach them."""
    from types import SimpleNamespace

    import diffrl.commands.trained_run

    run = SimpleNamespace(algo=trudi_algo_stub(), config=SimpleNamespace(algo="trudi"))
    monkeypatch.setattr(diffrl.commands.trained_run, "load_trained", lambda *args, **kwargs: (run, None, {}))


def test_multi_algorithm_sampler_lists_skip_retired_names_with_a_note():
    """benchmarks/compare.py and stability.py keep, per algorithm, the names it offers: "ode" is
    AMDP's sampler, so for TruDi it is skipped, but with a note naming its new name."""
    from diffrl.policies.base import offered_samplers

    kept, note = offered_samplers(["sde", "ode", "mean", "ode-c"], trudi_algo_stub())
    assert kept == ("sde",)
    assert note.startswith("skipping ['ode', 'mean', 'ode-c']")
    assert "'ode' is now 'reversal-ode', 'ode-c' is now 'noise-free'" in note
    assert offered_samplers(["sde", "mean"], trudi_algo_stub()) == (("sde",), "")


@pytest.mark.parametrize("old, new", RETIRED)
def test_eval_export_actions_refuse_a_retired_trudi_sampler_naming_the_new_one(old, new, trudi_run_stub,
                                                                              tmp_path, capsys):
    assert main(["eval", "RUN", "--sampler", old]) == 2
    assert f"'{old}' is now '{new}'" in capsys.readouterr().err
    assert main(["export", "RUN", "--out", str(tmp_path / "pol"), "--sampler", old]) == 2
    assert f"'{old}' is now '{new}'" in capsys.readouterr().err
    assert not (tmp_path / "pol").exists()
    with pytest.raises(SystemExit) as exit_info:
        main(["actions", "RUN", "--out", str(tmp_path / "a.png"), "--sampler", "sde", "--sampler", old])
    assert exit_info.value.code == 2
    assert f"'{old}' is now '{new}'" in capsys.readouterr().err


def test_run_directory_from_before_the_rename_loads_with_the_new_names(tmp_path):
    from diffrl.config import TrainConfig
    from diffrl.core.run_dir import load_run_config
    from diffrl.plumbing.run_record import write_run_record

    for algo, stored, loaded in (("trudi", ("sde", "ode", "ode-c", "best-of-k"),
                                  ("sde", "reversal-ode", "noise-free", "best-of-k")),
                                 ("amdp", ("sde", "ode"), ("sde", "ode"))):  # AMDP keeps its "ode"
        run = tmp_path / algo
        run.mkdir()
        write_run_record(run, TrainConfig(algo=algo, eval_samplers=stored))
        record = json.loads((run / "config.json").read_text())
        diffusion = record["config"]["diffusion"]
        diffusion["ode_coef"] = 0.25  # the field's old name
        del diffusion["noise_free_coef"]
        (run / "config.json").write_text(json.dumps(record))
        with pytest.warns(UserWarning) as warned:
            config = load_run_config(run)
        assert config.eval_samplers == loaded
        assert any("are now called" in str(w.message) for w in warned) == (algo == "trudi")
        if algo == "trudi":
            assert config.diffusion.noise_free_coef == 0.25
        else:  # AMDP never reads the diffusion section: the run's config has none, and a warning names it
            assert not hasattr(config, "diffusion")
            assert any("never read by amdp" in str(w.message) for w in warned)


def test_amdp_run_directory_with_reppo_kl_settings_loads_them_reset(tmp_path):
    """Older amdp-* presets carried REPPO's KL settings, which AMDP never read and now refuses:
    such a run directory still loads (and resumes), with those settings back at their defaults."""
    import dataclasses

    from diffrl.algos.reppo_config import REPPOConfig
    from diffrl.config import TrainConfig
    from diffrl.core.run_dir import load_run_config
    from diffrl.plumbing.run_record import write_run_record

    stored = TrainConfig(algo="amdp", reppo=REPPOConfig(kl_start=1.0, kl_min=0.1, critic_lr=2e-3))
    write_run_record(tmp_path, stored)
    with pytest.warns(UserWarning, match="reppo.kl_start, reppo.kl_min were never read by amdp"):
        config = load_run_config(tmp_path)
    assert config.reppo == dataclasses.replace(REPPOConfig(), critic_lr=2e-3)
    config.validate()


def test_presets_show_prints_the_resolved_config(capsys):
    assert main(["presets", "--show", "reppo-dmc-cpu"]) == 0
    text = capsys.readouterr().out
    assert "* reppo.kl_min = 0.1" in text            # set by the preset
    assert "  reppo.gamma = 0.99" in text             # a default, unmarked
    assert main(["presets", "--show", "reppo-dmc-cpux"]) == 2
    assert "did you mean" in capsys.readouterr().err


def test_resume_of_a_run_written_by_another_version_is_refused_with_a_message(tmp_path, capsys):
    """A config.json with a field this version does not know: exit 2 naming it, no traceback."""
    from diffrl.config import TrainConfig
    from diffrl.plumbing.run_record import write_run_record

    write_run_record(tmp_path, TrainConfig(algo="reppo"))
    record = json.loads((tmp_path / "config.json").read_text())
    record["config"]["field_from_the_future"] = 1
    (tmp_path / "config.json").write_text(json.dumps(record))
    assert main(["train", "--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "field_from_the_future" in err
    assert main(["train", "--resume", str(tmp_path / "missing")]) == 2
    assert "no config.json" in capsys.readouterr().err
