"""Live progress: a rich progress bar on a terminal, one line per chunk otherwise."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class Progress:
    def __init__(self, config, enabled: bool = True):
        self.enabled = enabled
        self.total = config.trained_env_steps
        self.console = Console(stderr=True)
        self.bar = None
        if enabled and sys.stderr.isatty():
            self.bar = RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,} steps"),
                TextColumn("{task.fields[sps]} SPS"), TextColumn("return {task.fields[ret]}"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=self.console)
            self.task = self.bar.add_task(f"{config.algo} {config.env}", total=self.total, sps="-", ret="-")
            self.bar.start()

    def message(self, text: str) -> None:
        if self.enabled:
            self.console.print(f"[diffrl] {text}", soft_wrap=True, markup=False)

    def update(self, row: dict) -> None:
        if not self.enabled:
            return
        ret = row.get("eval/episode_return", float("nan"))
        if self.bar is not None:
            self.bar.update(self.task, completed=row["env_steps"], sps=f"{row['train/sps']:,.0f}", ret=f"{ret:.1f}")
        else:
            frac = row["env_steps"] / max(self.total, 1)
            eta = row["walltime"] * (1 - frac) / max(frac, 1e-9)
            self.console.print(f"[diffrl] {row['env_steps']:>12,}/{self.total:,} steps  "
                               f"{row['train/sps']:>10,.0f} SPS  eval return {ret:8.2f}  "
                               f"elapsed {row['walltime']:6.0f}s  ETA {eta:6.0f}s", soft_wrap=True, markup=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
