"""One JSON file per (algorithm, task, seed) run: the benchmark suite's result format.

``OUT/runs/<task with / as _>--<algo>--seed<i>.json``; every file is self-contained
(the flat "one row per run" layout that rliable and openrlbenchmark-style tools read):

    {
      "schema": "diffrl-benchmark-run/1",
      "algo": "reppo",                       # algorithm name
      "task": "playground/CartpoleSwingup",  # environment name
      "seed": 1,                             # seed index i within its program
      "base_seed": 0,                        # the program's seed: PRNG key fold_in(PRNGKey(base_seed), i)
      "sampler": "mean",                     # evaluation sampler whose returns are reported
      "env_steps": [0, 16384, ...],          # per evaluation: env steps trained (this seed)
      "walltime": [0.0, 10.2, ...],          # per evaluation: seconds since training started
                                             #   (after compilation; includes evaluation time)
      "returns": [3.1, 120.5, ...],          # per evaluation: mean undiscounted return of
                                             #   eval_episodes episodes (unscaled rewards)
      "final_return": 512.3,                 # returns[-1]
      "final_env_steps": 98304,              # env_steps[-1]
      "eval_episodes": 16,
      "preset": "reppo-dmc-cpu",
      "program": {"num_seeds": 2, "compile_s": 41.0, "train_time_s": 30.5,
                  "walltime_s": 40.2, "train_sps": 6447.0},  # shared by the program's seeds
      "config": {...},                       # the resolved run config
      "versions": {...}, "git_commit": "...", "created": "2025-..."
    }

A file is written atomically only after its program finished, so its presence means
the run is complete (the suite skips it when resumed).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

SCHEMA = "diffrl-benchmark-run/1"
REQUIRED = ("schema", "algo", "task", "seed", "env_steps", "walltime", "returns", "final_return", "config")


def record_name(algo: str, task: str, seed: int) -> str:
    return f"{task.replace('/', '_')}--{algo}--seed{seed}.json"


def record_path(out: str | Path, algo: str, task: str, seed: int) -> Path:
    return Path(out) / "runs" / record_name(algo, task, seed)


def _float(value) -> float:
    try:
        return float(value)  # the trainer's logger writes non-finite numbers as strings
    except (TypeError, ValueError):
        return math.nan


def records_from_run_dir(run_dir: str | Path, algo: str, task: str, base_seed: int,
                         sampler: str, extra: dict | None = None) -> list[dict]:
    """One record per seed from a finished trainer run directory (config.json, metrics.jsonl,
    summary.json); the returns are those logged for the first evaluation sampler."""
    from diffrl.artefacts.plotting import read_metrics

    run_dir = Path(run_dir)
    run_record = json.loads((run_dir / "config.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = [r for r in read_metrics(run_dir) if isinstance(r.get("eval/seed_returns"), list)]
    if not rows:
        raise ValueError(f"{run_dir}: no evaluation rows in metrics.jsonl")
    config = run_record["config"]
    num_seeds = int(config["num_seeds"])
    if any(len(r["eval/seed_returns"]) != num_seeds for r in rows):
        raise ValueError(f"{run_dir}: evaluation rows do not all have {num_seeds} per-seed returns")
    program = {
        "num_seeds": num_seeds,
        "compile_s": sum(float(summary.get(k, 0.0)) for k in
                         ("compile/init_s", "compile/chunk_s", "compile/eval_first_call_s")),
        "train_time_s": summary.get("train_time_s"),
        "walltime_s": summary.get("walltime_s"),
        "train_sps": summary.get("train_sps"),
    }
    records = []
    for i in range(num_seeds):
        returns = [_float(r["eval/seed_returns"][i]) for r in rows]
        records.append({
            "schema": SCHEMA,
            "algo": algo,
            "task": task,
            "seed": i,
            "base_seed": base_seed,
            "sampler": sampler,
            "env_steps": [int(r["env_steps"]) for r in rows],
            "walltime": [_float(r.get("walltime", math.nan)) for r in rows],
            "returns": returns,
            "final_return": returns[-1],
            "final_env_steps": int(rows[-1]["env_steps"]),
            "eval_episodes": config.get("eval_envs"),
            "preset": config.get("preset"),
            "program": program,
            "config": config,
            "versions": run_record.get("versions", {}),
            "git_commit": run_record.get("git_commit"),
            "created": run_record.get("created"),
            **(extra or {}),
        })
    return records


def check_schema(record: dict, schema: str, required: tuple[str, ...], source: str) -> None:
    """ValueError naming the missing fields, or a record of another schema."""
    missing = [k for k in required if k not in record]
    if missing:
        raise ValueError(f"{source}: missing fields {missing} (schema {schema})")
    if record["schema"] != schema:
        raise ValueError(f"{source}: schema {record['schema']!r}, expected {schema!r}")


def validate_record(record: dict, source: str = "record") -> dict:
    """Raise ValueError naming what is missing or inconsistent; return the record."""
    check_schema(record, SCHEMA, REQUIRED, source)
    n = len(record["returns"])
    if n == 0 or len(record["env_steps"]) != n or len(record["walltime"]) != n:
        raise ValueError(f"{source}: env_steps, walltime and returns must be non-empty lists of equal length")
    return record


def read_records(directory: str | Path) -> list[dict]:
    """Every run record under ``directory`` (its ``runs/`` folder if it has one), validated."""
    directory = Path(directory)
    folder = directory / "runs" if (directory / "runs").is_dir() else directory
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no run records (*.json) in {folder}")
    return [validate_record(json.loads(p.read_text()), str(p)) for p in paths]
