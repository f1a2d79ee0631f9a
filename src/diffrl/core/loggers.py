"""Metric sinks: metrics.jsonl (always), TensorBoard and Weights & Biases (opt-in)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def _jsonable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    try:
        f = float(value)
    except (TypeError, ValueError):
        return value
    if isinstance(value, (bool, int)) and not isinstance(value, float):
        return value
    return f if math.isfinite(f) else str(f)


class JsonlLogger:
    """One JSON object per log step, flushed immediately (nothing lost on a crash)."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / "metrics.jsonl"
        self._f = open(self.path, "a")

    def log(self, row: dict) -> None:
        """Append one row; a row that cannot be written whole (a full disk) is cut off again,
        so that the file never ends in half a row."""
        start = self._f.tell()
        try:
            self._f.write(json.dumps({k: _jsonable(v) for k, v in row.items()}) + "\n")
            self._f.flush()
        except OSError:
            self._drop_partial_row(start)
            raise

    def _drop_partial_row(self, start: int) -> None:
        """Forget the unwritten buffer and truncate the file back to ``start`` (best effort:
        on a read-only file system nothing was written anyway)."""
        import os

        try:
            self._f.close()
        except OSError:  # the buffer that could not be written
            pass
        try:
            os.truncate(self.path, start)
        except OSError:
            pass
        self._f = open(os.devnull, "a")  # later rows of this failing run go nowhere

    def close(self) -> None:
        self._f.close()


class TensorBoardLogger:
    def __init__(self, run_dir: Path):
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(str(run_dir))

    def log(self, row: dict) -> None:
        step = int(row["env_steps"])
        for k, v in row.items():
            if k == "env_steps" or isinstance(v, (list, tuple, str)):
                continue
            self.writer.add_scalar(k, float(v), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    def __init__(self, run_dir: Path, config: dict, name: str):
        try:
            import wandb
        except ImportError as e:
            raise RuntimeError("--wandb needs the wandb package: pip install 'diffrl[wandb]'") from e
        self.run = wandb.init(project="diffrl", name=name, config=config, dir=str(run_dir))

    def log(self, row: dict) -> None:
        self.run.log({k: v for k, v in row.items() if not isinstance(v, (list, tuple, str))},
                     step=int(row["env_steps"]))

    def close(self) -> None:
        self.run.finish()


class MultiLogger:
    def __init__(self, loggers: list):
        self.loggers = loggers

    def log(self, row: dict) -> None:
        for lg in self.loggers:
            lg.log(row)

    def close(self) -> None:
        for lg in self.loggers:
            lg.close()
