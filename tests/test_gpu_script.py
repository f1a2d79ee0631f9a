"""benchmarks/gpu: the lent GPU's one prepared run, rehearsed on the CPU.

A GPU session is 15 minutes, once in a while: the script must not fail there for a reason a CPU could
have shown. The dry run goes through run.sh (wheel install skipped: this venv has every package) and
measure.py at toy sizes, every part, and must leave its JSON and markdown; the time-keeping (the
projection that decides which contenders a later N runs, and a spent budget) is checked on made-up
timings without compiling anything.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "benchmarks" / "gpu"


def _measure():
    if "gpu_measure" not in sys.modules:  # registered first: its dataclasses look their module up
        spec = importlib.util.spec_from_file_location("gpu_measure", GPU / "measure.py")
        sys.modules["gpu_measure"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["gpu_measure"])
    return sys.modules["gpu_measure"]


def _row(algo: str, it: float, up: float, compile_s: float = 10.0) -> dict:
    return {"algo": algo, "status": "ok", "iteration_s": [it] * 3, "update_s": [up] * 3,
            "compile_s": {"init_and_batch": 0.0, "iteration": compile_s / 2, "update": compile_s / 2}}


def test_later_n_runs_the_contenders_whose_projected_time_fits():
    m = _measure()
    plan = m.Plan(repeats=3, warmup=1, contender_budget_s=15.0)
    rows = {"reppo": _row("reppo", 1.0, 0.8), "amdp": _row("amdp", 1.2, 0.8),
            "amdp-backprop": _row("amdp-backprop", 4.0, 3.5), "trudi": _row("trudi", 5.0, 4.5)}
    # N 16 -> 128: backprop's and TruDi's calls grow 8x; AMDP's update does not grow, its acting does.
    assert m.projected_group_s(rows, "amdp-backprop", 8.0, plan) == pytest.approx(10 + 2 * 60.0)
    assert m.projected_group_s(rows, "amdp", 8.0, plan) == pytest.approx(10 + 4 * (0.8 + 0.4 * 8 + 0.8))
    assert m.projected_group_s(rows, "reppo", 8.0, plan) == pytest.approx(2.5 + 4 * 1.8)
    chosen, proj = m.pick_contenders(rows, 16, 128, 1000.0, plan)
    assert chosen == ["amdp", "amdp-backprop", "trudi"] and set(proj) == {"reppo", "amdp", "amdp-backprop", "trudi"}
    chosen, _ = m.pick_contenders(rows, 16, 128, 220.0, plan)  # 1.25 x (9.7 + 29.2 + 130) s fit
    assert chosen == ["amdp", "amdp-backprop"]  # TruDi's 162 s more do not
    assert m.pick_contenders(rows, 16, 128, 40.0, plan)[0] == []  # 1.25 x (9.7 + 29.2) s do not fit
    # part b at 4 x part a's batch: compile + (warm-up + repeats) calls, 4 x longer
    assert m.sps_projected_s(rows["trudi"], 4.0, plan) == pytest.approx(5.0 + 4 * 5.0 * 4)
    assert m.sps_projected_s(None, 4.0, plan) is None
    failed = {**rows, "amdp": {**rows["amdp"], "status": "failed", "iteration_s": []}}
    assert m.pick_contenders(failed, 16, 128, 1000.0, plan)[0] == ["amdp-backprop", "trudi"]


def test_spent_budget_still_writes_the_record(tmp_path):
    m = _measure()
    out = tmp_path / "out"
    cache = os.environ.get("DIFFRL_TEST_COMPILATION_CACHE", str(tmp_path / "cache"))
    assert m.main(["--dry-run", "--out", str(out), "--budget-min", "0", "--jax-cache", cache]) == 0
    record = json.loads((out / "gpu.json").read_text())
    assert {k: v["status"] for k, v in record["parts"].items()} == {p: "skipped: budget spent"
                                                                    for p in ("cost", "sps", "learn")}
    assert "- learn: skipped: budget spent" in (out / "gpu.md").read_text()


@pytest.mark.heavy(94)
def test_dry_run_through_run_sh_writes_every_part(tmp_path):
    out = tmp_path / "gpu"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable}
    if os.environ.get("DIFFRL_TEST_COMPILATION_CACHE"):  # the test session's cache (tests/conftest.py)
        env["JAX_COMPILATION_CACHE_DIR"] = os.environ["DIFFRL_TEST_COMPILATION_CACHE"]
    proc = subprocess.run(["bash", str(GPU / "run.sh"), "--skip-install", "--dry-run"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    record = json.loads((out / "gpu.json").read_text())
    assert record["schema"] == "diffrl.gpu_measure/1" and record["dry_run"]
    assert record["machine"]["jax_backend"] == "cpu"
    assert record["preflight"]["env"] == "playground/CartpoleSwingup" and record["preflight"]["action_size"] == 1
    assert {k: v["status"] for k, v in record["parts"].items()} == {"cost": "done", "sps": "done", "learn": "done"}
    # a. bench cost's own record, with the AMDP/REPPO ratio of its N=2 group
    cost = json.loads((out / "cost.json").read_text())
    assert cost["schema"] == "diffrl.commands.bench_cost/1" and cost["batch"] == {"num_envs": 8, "num_steps": 4}
    assert cost["ratios"][0]["amdp/reppo"]["status"] == "ok"
    assert "| N | REPPO iter | AMDP iter |" in (out / "cost.md").read_text()
    # b. the first env count reuses part a's iterations; the second is measured, against the simulator
    rows = {(r["num_envs"], r["contender"]): r for r in record["parts"]["sps"]["rows"]}
    assert set(rows) == {(8, "simulator"), (8, "reppo"), (16, "simulator"), (16, "reppo")}
    assert rows[(8, "reppo")]["source"].startswith("cost") and rows[(16, "reppo")]["source"] == "measured here"
    for r in rows.values():
        assert r["sps"] > 0 and r["x_simulator"] > 0
    # c. three seeds trained in one program, evaluated per seed
    (run,) = record["parts"]["learn"]["runs"]
    assert run["status"] == "ok" and run["env_steps"] > 0 and len(run["final_seed_returns"]) == 3
    assert (out / "learn_reppo_metrics.jsonl").exists()
    text = (out / "gpu.md").read_text()
    for heading in ("## a. Cost relative to REPPO", "## b. Training against the simulator alone", "## c. Learning"):
        assert heading in text
    assert "run.sh: jax" in (out / "run.log").read_text()


# -- which jax run.sh uses (issue 48): the newest that works, then the pinned one ---------------------------

def _pinned_jax() -> str:
    return next(line.split("==")[1].strip() for line in (ROOT / "requirements.lock").read_text().splitlines()
                if line.lower().startswith("jax=="))


def _wheel(folder: Path, dist: str, version: str, files: dict[str, str]) -> None:
    """A minimal installable wheel of ``dist`` holding ``files``."""
    import zipfile

    info = f"{dist}-{version}.dist-info"
    members = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
               f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    members[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in members) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{dist}-{version}-py3-none-any.whl", "w") as z:
        for name, text in members.items():
            z.writestr(name, text)


def _fake_jax(folder: Path, version: str, works: bool = True) -> None:
    """jax and jaxlib wheels of ``version``; one that does not work installs no ``jax`` package (so the
    image's jax is what imports, beside a jaxlib it refuses)."""
    jax = {"jax/__init__.py": f"__version__ = {version!r}\ndef default_backend():\n    return 'cpu'\n"
                              "def devices():\n    return ['fake:0']\n"} if works else {"jax_broken/__init__.py": ""}
    _wheel(folder, "jax", version, jax)
    _wheel(folder, "jaxlib", version, {"jaxlib/__init__.py": f"__version__ = {version!r}\n"})


def _pick_jax(tmp_path: Path, wheels: Path | None) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "DIFFRL_GPU_SITE": str(tmp_path / "site"),
           "DIFFRL_GPU_WHEELS": str(wheels or tmp_path / "none"), "DIFFRL_GPU_REQUIRE_GPU": "0"}
    flags = ["--jax-only"] + ([] if wheels else ["--skip-install"])
    proc = subprocess.run(["bash", str(GPU / "run.sh"), *flags], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads((out / "jax.json").read_text())


def test_run_sh_records_the_jax_it_uses(tmp_path):
    import jax

    proc, record = _pick_jax(tmp_path, None)
    assert record["schema"] == "diffrl.gpu_jax/1" and record["pinned"] == _pinned_jax()
    assert record["used"] == record["jax"] == jax.__version__ and record["source"] == "image"
    assert record["backend"] == "cpu" and record["distributions"]["jaxlib"] == jax.__version__
    assert f"run.sh: using jax {jax.__version__} (from the image" in proc.stdout
    assert (tmp_path / "out" / "run.log").read_text().count("run.sh: using jax") == 1


def test_run_sh_follows_a_newer_carried_jax(tmp_path):
    wheels = tmp_path / "whl"
    wheels.mkdir()
    _fake_jax(wheels, "99.0.0")
    _, record = _pick_jax(tmp_path, wheels)
    assert record["used"] == record["jax"] == "99.0.0" and record["source"] == "wheels"
    assert record["newer_than_pinned"] and record["file"].startswith(str(tmp_path / "site-jax" / "99.0.0"))
    assert [(c["version"], c["status"]) for c in record["candidates"]] == [("99.0.0", "used")]


def test_run_sh_falls_back_to_the_pinned_jax_when_the_newest_does_not_work(tmp_path):
    import jax

    wheels = tmp_path / "whl"
    wheels.mkdir()
    _fake_jax(wheels, "99.1.0", works=False)
    _fake_jax(wheels, "99.0.0")
    _, record = _pick_jax(tmp_path, wheels)
    assert jax.__version__ == _pinned_jax()  # this venv holds the pinned jax: the fallback
    assert record["used"] == _pinned_jax() and record["source"] == "image" and not record["newer_than_pinned"]
    first, second = record["candidates"]  # newest first, then the pinned one; 99.0.0 is not reached
    assert first["version"] == "99.1.0" and first["status"].startswith("does not work here")
    assert second == {"version": _pinned_jax(), "source": "image", "status": "used"}
