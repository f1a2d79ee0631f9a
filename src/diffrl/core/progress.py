"""Live progress: a rich progress bar on a terminal, one line per chunk otherwise."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

WIDE = 110
"""Terminal columns from which the full layout (task name, SPS, exact step counts) fits on one line."""


def compact_count(n: float) -> str:
    """1234567 -> '1.23M': step counts that keep their width as a run grows."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def bar_columns(width: int) -> tuple:
    """The columns of the bar for a terminal ``width`` columns wide.

    On a narrow terminal (80 columns is the common default) the full layout does not fit and
    rich folds or truncates it; the compact one keeps what a glance needs (bar, steps, return,
    elapsed, ETA) and drops the task name (the line above the bar names it) and the SPS."""
    if width >= WIDE:
        return (TextColumn("[bold]{task.description}"), BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,} steps"),
                TextColumn("{task.fields[sps]} SPS"), TextColumn("return {task.fields[ret]}"),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    return (BarColumn(bar_width=max(10, width - 64)), TextColumn("{task.fields[steps]} steps"),
            TextColumn("ret {task.fields[ret]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())


class Progress:
    def __init__(self, config, enabled: bool = True, console: Console | None = None):
        self.enabled = enabled
        self.total = config.trained_env_steps
        self.console = console or Console(stderr=True)
        self.bar = None
        if enabled and (self.console.is_terminal if console is not None else sys.stderr.isatty()):
            self.bar = RichProgress(*bar_columns(self.console.width), console=self.console)
            self.task = self.bar.add_task(f"{config.algo} {config.env}", total=self.total, sps="-", ret="-",
                                          steps=f"0/{compact_count(self.total)}")
            self.bar.start()

    def message(self, text: str) -> None:
        if self.enabled:
            self.console.print(f"[diffrl] {text}", soft_wrap=True, markup=False)

    def update(self, row: dict) -> None:
        if not self.enabled:
            return
        ret = row.get("eval/episode_return", float("nan"))
        if self.bar is not None:
            self.bar.update(self.task, completed=row["env_steps"], sps=f"{row['train/sps']:,.0f}", ret=f"{ret:.1f}",
                            steps=f"{compact_count(row['env_steps'])}/{compact_count(self.total)}")
        else:
            frac = row["env_steps"] / max(self.total, 1)
            eta = row["walltime"] * (1 - frac) / max(frac, 1e-9)
            self.console.print(f"[diffrl] {row['env_steps']:>12,}/{self.total:,} steps  "
                               f"{row['train/sps']:>10,.0f} SPS  eval return {ret:8.2f}  "
                               f"elapsed {row['walltime']:6.0f}s  ETA {eta:6.0f}s", soft_wrap=True, markup=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
