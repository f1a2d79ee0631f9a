"""Multi-seed learning runs for the learning tests: seeds are the unit of evidence.

A learning outcome on a CPU depends on float rounding, which differs between x86 machines (and
between XLA settings), so a single seed near a threshold is a coin flip. Every learning test
trains K seeds in ONE vmapped program (``--num-seeds``), and asserts on the median of the
final evaluation over seeds and on how many seeds collapsed, with thresholds taken from the
measured seed distribution (``benchmarks/results/stability/`` and the runs each test cites).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from diffrl.core.trainer import Trainer
from diffrl.presets import resolve


@dataclass
class SeedCurves:
    """Evaluations of K seeds: ``env_steps`` (E,), and per sampler (E, K) arrays.

    Row 0 is the evaluation before training. ``returns[s]``, ``mode_reached[s]`` and
    ``behaviour_entropy[s]`` (the last two for tasks with modes) are keyed by sampler name.
    """

    env_steps: np.ndarray
    returns: dict
    mode_reached: dict
    behaviour_entropy: dict

    def final(self, sampler: str | None = None) -> np.ndarray:
        """(K,) final evaluation return per seed (default sampler: the first)."""
        return self.returns[sampler or next(iter(self.returns))][-1]

    def median_final(self, sampler: str | None = None) -> float:
        return float(np.median(self.final(sampler)))


def train_seeds(out: Path, algo: str, env: str, num_seeds: int, samplers: tuple[str, ...] = (),
                **changes) -> SeedCurves:
    """Train ``num_seeds`` seeds of ``algo`` on ``env`` (its default preset plus ``changes``)."""
    config = resolve(algo, env, None).replace(
        out=str(out), progress=False, tensorboard=False, checkpoint_every=0, num_seeds=num_seeds,
        eval_samplers=tuple(samplers), **changes)
    trainer = Trainer(config)
    trainer.run()
    names = trainer.samplers
    rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "eval/seed_returns" in r]

    def per_sampler(metric: str) -> dict:
        out_ = {}
        for i, name in enumerate(names):
            key = ("eval/" if i == 0 else f"eval/{name}/") + metric
            if key in rows[0]:
                out_[name] = np.array([r[key] for r in rows], np.float64)
        return out_

    return SeedCurves(np.array([r["env_steps"] for r in rows]), per_sampler("seed_returns"),
                      per_sampler("seed_mode_reached"), per_sampler("seed_behaviour_entropy"))
