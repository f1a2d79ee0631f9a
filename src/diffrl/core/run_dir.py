"""Run directories and run records: resolved config, library versions, machine, git commit."""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

RECORDED_PACKAGES = ("diffrl", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "playground",
                     "mujoco", "mujoco-mjx", "brax", "gymnax", "numpy", "tyro")


def default_run_dir(env: str, algo: str, root: str = "runs") -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{env.replace('/', '_')}-{algo}-{stamp}"


def library_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in RECORDED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what the platform module knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_record() -> dict[str, Any]:
    """What besides the code and config decides a run's float rounding, and so its per-seed curves:
    the CPU (x86 models round differently: a learning run's seeds can end apart on two machines),
    the core count and the XLA flags the run was started with."""
    return {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "jax_platforms": os.environ.get("JAX_PLATFORMS", "")}


def git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def config_to_dict(config: Any) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def atomic_write_json(path: Path, data: Any) -> None:
    """Write JSON so that a crash never leaves a half-written file."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, default=str)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_run_record(run_dir: Path, config: Any, extra: dict | None = None) -> dict:
    record = {
        "config": config_to_dict(config),
        "versions": library_versions(),
        "machine": machine_record(),
        "git_commit": git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": sys.argv,
    }
    if extra:
        record.update(extra)
    atomic_write_json(Path(run_dir) / "config.json", record)
    return record


def load_run_config(run_dir: str | Path):
    """The TrainConfig a run directory was trained with (from its config.json).

    Evaluation samplers stored under names since retired (:data:`RENAMED_EVAL_SAMPLERS`) are
    mapped to the new names with a warning: the computation is the same, and a resumed run logs
    them under the new names from then on.
    """
    from diffrl.algos import without_unused_settings
    from diffrl.config import RENAMED_EVAL_SAMPLERS, TrainConfig
    from diffrl.export import config_from_json

    path = Path(run_dir) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a diffrl run directory (no config.json)")
    config = config_from_json(TrainConfig, json.loads(path.read_text())["config"])
    config, unused = without_unused_settings(config)
    if unused:
        warnings.warn(f"{run_dir}: stored settings {', '.join(unused)} were never read by {config.algo}; "
                      "they are reset to their defaults (the run is unchanged)", stacklevel=2)
    renamed = RENAMED_EVAL_SAMPLERS.get(config.algo, {})
    if any(s in renamed for s in config.eval_samplers):
        samplers = tuple(renamed.get(s, s) for s in config.eval_samplers)
        warnings.warn(f"{run_dir}: stored eval samplers {config.eval_samplers} are now called {samplers}",
                      stacklevel=2)
        config = dataclasses.replace(config, eval_samplers=samplers)
    return config


def resume_config(run_dir: str | Path, **overrides: Any):
    """Config to continue ``run_dir``: same settings and chunk size, optional overrides
    (e.g. a larger ``total_env_steps`` to extend a finished run)."""
    config = load_run_config(run_dir)
    config = dataclasses.replace(config, chunk_iterations=config.iterations_per_chunk,
                                 resume=str(run_dir), out=str(run_dir))
    return dataclasses.replace(config, **overrides) if overrides else config
