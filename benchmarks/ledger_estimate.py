"""How long a ledger cell takes on one core, before it runs: what ``ledger.py run`` checks against
the time left and ``ledger.py plan`` sums into core-hours.

The sources, best first: the cell's own finished record (same task, algorithm and batch), else the
pilot's measurement (``pilot.json``) of the algorithm on the task, else the pilot's REPPO on the task
times the algorithm's cost ratio to REPPO on the pilot's reference task nearest in REPPO's cost
(``nearest_in_reppo_cost``); scaled by iterations, seeds and evaluations and calibrated by the
algorithm's finished cells (actual over predicted wall time, the median).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ledger_plan  # noqa: E402
from ledger_records import ran_under_load  # noqa: E402


def nearest_in_reppo_cost(references: list[str], cost: float, reppo_cost: dict[str, float]) -> str:
    """The reference task whose REPPO seconds per iteration (``reppo_cost``) are nearest ``cost`` on a
    log scale: where an algorithm's measured ratio to REPPO (or to itself on two cores) is borrowed from."""
    return min(references, key=lambda t: abs(math.log(reppo_cost[t] / cost)))


class Estimator:
    """Seconds a cell takes on one core: its own finished records' timing if any, else the
    pilot's measurement of (algo, task), else the pilot's REPPO on the task times the algorithm's
    cost ratio on the pilot's reference task nearest in REPPO's cost; scaled by iterations,
    seeds and evaluations, and calibrated by the finished cells of the same algorithm."""

    def __init__(self, pilot: dict | None, records: dict[str, dict]):
        self.entries = {(e["algo"], e["task"]): e for e in (pilot or {}).get("entries", [])}
        self.records = records

    def _pilot_entry(self, algo: str, task: str) -> dict | None:
        if (algo, task) in self.entries:
            return self.entries[(algo, task)]
        base = self.entries.get(("reppo", task))
        refs = [t for (a, t) in self.entries if a == algo and ("reppo", t) in self.entries]
        if base is None or not refs:
            return None
        ref = nearest_in_reppo_cost(refs, base["s_per_iteration"],
                                    {t: self.entries[("reppo", t)]["s_per_iteration"] for t in refs})
        a, r = self.entries[(algo, ref)], self.entries[("reppo", ref)]
        scaled = {"num_seeds": base["num_seeds"], "batch_size": a["batch_size"], "eval_envs": base.get("eval_envs", 16)}
        for key in ("compile_s", "eval_s"):
            scaled[key] = base[key] * a[key] / r[key]
        # per env step, so that a different batch (PPO's 256 x 32) scales by steps, not iterations
        per_step = base["s_per_iteration"] / base["batch_size"] * (a["s_per_iteration"] / a["batch_size"]) / (
            r["s_per_iteration"] / r["batch_size"])
        scaled["s_per_iteration"] = per_step * a["batch_size"]
        return scaled

    @staticmethod
    def _predict(entry: dict, cell, config) -> float:
        seeds = cell.num_seeds / entry["num_seeds"]
        iterations = config.trained_env_steps / config.batch_size
        per_iter = entry["s_per_iteration"] * config.batch_size / entry["batch_size"]
        eval_s = entry["eval_s"] * cell.eval_envs / entry.get("eval_envs", 16)
        return entry["compile_s"] + seeds * (iterations * per_iter + cell.num_evals * eval_s)

    def seconds(self, cell, config) -> float | None:
        own = [r for r in self.records.values() if r["algo"] == cell.algo and r["task"] == cell.task
               and not ran_under_load(r)
               and r["config"].get("num_envs") == config.num_envs and r["config"].get("num_steps") == config.num_steps]
        if own:
            r = own[0]
            t = r["timing"]
            its = r["env_steps"][-1] / (config.batch_size or 1)
            entry = {"num_seeds": r["num_seeds"], "batch_size": config.batch_size, "compile_s": t["compile_s"],
                     "eval_envs": r["config"].get("eval_envs", 16),
                     "s_per_iteration": t["train_s"] / its, "eval_s": t["eval_s"] / max(1, len(r["env_steps"]) - 1)}
            return self._predict(entry, cell, config)
        entry = self._pilot_entry(cell.algo, cell.task)
        if entry is None:
            return None
        return self._predict(entry, cell, config) * self.calibration(cell.algo)

    def calibration(self, algo: str) -> float:
        """Median of actual / pilot-predicted wall time over this algorithm's finished cells that
        ran alone (a loaded machine's wall-clock says nothing about a cell's cost)."""
        ratios = []
        for r in self.records.values():
            entry = self._pilot_entry(r["algo"], r["task"]) if r["algo"] == algo else None
            if entry is None or not r.get("timing") or ran_under_load(r):
                continue
            cell = ledger_plan.Cell(r["matrix"], r["label"], r["algo"], r["task"], r["env_steps"][-1],
                                    r["base_seed"], r["num_seeds"], num_evals=len(r["env_steps"]) - 1)
            cfg = _SizeView(r["config"], r["env_steps"][-1])
            ratios.append(r["timing"]["wall_s"] / self._predict(entry, cell, cfg))
        return float(sorted(ratios)[len(ratios) // 2]) if ratios else 1.0


class _SizeView:
    """The two sizes Estimator reads, from a record's flat config."""

    def __init__(self, flat: dict, trained: int):
        self.batch_size = int(flat["num_envs"]) * int(flat["num_steps"])
        self.trained_env_steps = trained
