"""The scripts in examples/ run as a user would run them (reduced budget)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_custom_env_example_checks_registers_and_trains(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "custom_env.py"), "--total-env-steps", "2048",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"}, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "user/Navigate2D" in result.stdout and "episodes finished" in result.stdout
    assert "trained 2048 steps" in result.stdout
    assert (tmp_path / "run" / "config.json").exists()
