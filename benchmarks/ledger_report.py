"""The ledger's report, rendered from the committed records alone (no training).

Writes ``benchmarks/results/ledger/report/``:

* ``status.md``: cells done / total per matrix, every stale record (its hash no longer the
  code's: left out of every table, with the settings that changed), and where matrix 1's
  wall-clock goes per algorithm (compiling, training, evaluating);
* ``m1.md`` (``ledger_breadth.py``): matrix 1 per task (median and IQM of the final return with 95 %
  percentile-bootstrap intervals, raw and normalised as (R - R_random) / (1000 - R_random), R_random
  the pilot's mean return of uniform random actions), the aggregate IQM of the normalised return over
  the tasks every algorithm has finished (stratified bootstrap), the probability of improvement, and
  the same by reward family (sparse or dense: ``ledger_families.py``);
* ``m2.md`` (``ledger_ablation.py``), ``m3.md`` (``ledger_replay.py``): the depth ablation and the
  multimodality-with-replay runs, each with the runs still filling (some seeds finished: their
  finals, in no statistic);
* ``expected.md``: per task, the command, the expected final return at the ledger's budget, the
  wall-clock on one and on two cores and REPPO's published final at 50M env steps
  (``reppo_published.json``);
* figures (``ledger_figures.py``; ``--no-figures`` skips them; CI compares the tables only):
  ``curves_<matrix>_<task>.png`` per task of each matrix and ``profile_m1.png``, the performance
  profile.

Statistics follow Agarwal et al. 2021 ("Deep RL at the Edge of the Statistical Precipice") as
rliable implements them: IQM over pooled runs, stratified bootstrap over runs within tasks, and
the probability of improvement P(X > Y) = mean over tasks of the Mann-Whitney statistic
P(x > y) + P(x = y) / 2 between the two algorithms' runs on the task (rliable's
``probability_of_improvement``), with intervals from resampling each algorithm's runs within
each task: ``diffrl.maths.stats``, the library's one implementation. All resampling is seeded:
the same records render the same tables on every machine.
"""
from __future__ import annotations

import difflib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ledger_plan  # noqa: E402
from ledger_records import final_returns, ran_under_load, read_records  # noqa: E402

from diffrl.maths.stats import bootstrap_ci, iqm  # noqa: E402

RESAMPLES = 2000
SEED = 0
RESAMPLING = {"resamples": RESAMPLES, "seed": SEED}
"""Every bootstrap of the report: fixed here, not left to the library's defaults."""
MAX_RETURN = 1000.0
"""DM Control returns lie in [0, 1000] (Tassa et al. 2018, Sec. 2)."""
TABLES = ("status.md", "m1.md", "m2.md", "m3.md", "expected.md")
NAMES = {"ppo": "PPO", "reppo": "REPPO", "trudi": "TruDi", "amdp": "AMDP"}


# -- statistics (diffrl.maths.stats) -----------------------------------------------------------
def median_ci(values) -> tuple[float, float, float]:
    """Median of one run's seeds with its 95 % percentile-bootstrap interval."""
    return bootstrap_ci(values, lambda x: np.median(x, axis=-1), **RESAMPLING)


def iqm_ci(values) -> tuple[float, float, float]:
    """IQM of one run's seeds with its 95 % percentile-bootstrap interval."""
    return bootstrap_ci(values, lambda x: iqm(x, axis=-1), **RESAMPLING)


def number(x: float, digits: int) -> str:
    """x to ``digits`` decimals; a value that rounds to zero prints without a sign (not '-0.000')."""
    return f"{round(float(x), digits) + 0.0:.{digits}f}"


def fmt(stat: tuple[float, float, float], digits: int = 3) -> str:
    """'p [lo, hi]' to ``digits`` decimals (``number``)."""
    p, lo, hi = (number(v, digits) for v in stat)
    return f"{p} [{lo}, {hi}]"


# -- gathering ----------------------------------------------------------------------------------
class Run:
    """The cells of one (matrix, label, task, budget) group merged: every seed's curve."""

    def __init__(self, records: list[dict]):
        first = records[0]
        self.matrix, self.label, self.algo, self.task = first["matrix"], first["label"], first["algo"], first["task"]
        self.records = sorted(records, key=lambda r: r["base_seed"])
        steps = [r["env_steps"] for r in self.records]
        if any(s != steps[0] for s in steps):
            raise ValueError(f"{self.task} {self.label}: cells evaluated at different env steps")
        self.env_steps = np.asarray(steps[0])
        self.budget = int(self.env_steps[-1])
        self.sampler = first["samplers"][0]
        self.diverged = np.concatenate([np.isin(np.arange(r["num_seeds"]), r.get("diverged", {}).get("seeds", []))
                                        for r in self.records])
        self.divergence_errors = [r["diverged"]["error"] for r in self.records if "diverged" in r]
        counted = [r["nonfinite_states"] for r in self.records if r.get("nonfinite_states") is not None]
        self.blow_ups = sum(counted) if counted else None  # records before 2026-12-07 do not count them
        self.final = scored(np.concatenate([final_returns(r) for r in self.records]), self.task)
        self.curves = scored(np.concatenate([np.asarray(r["curves"][self.sampler]["returns"], np.float64)
                                             for r in self.records], axis=1), self.task)
        self.wall_s = sum(r["timing"]["wall_s"] for r in self.records)
        self.loaded = any(ran_under_load(r) for r in self.records)
        self.preset = first.get("preset")

    def series(self, name: str) -> np.ndarray | None:
        parts = [r["curves"][self.sampler].get(name) for r in self.records]
        return None if any(p is None for p in parts) else np.concatenate([np.asarray(p) for p in parts], axis=1)

    @property
    def num_seeds(self) -> int:
        return len(self.final)

    @property
    def seeds(self) -> list[int]:
        """Each seed's index in the run (its cell's base seed + its place in the cell), in curve order."""
        return [s for r in self.records for s in range(r["base_seed"], r["base_seed"] + r["num_seeds"])]

    @property
    def seeds_text(self) -> str:
        """'5', or '5 (1 diverged)'."""
        k = int(self.diverged.sum())
        return f"{self.num_seeds}" + (f" ({k} diverged)" if k else "")


DIVERGED_RETURN = 0.0
"""The score of a NaN/inf evaluation on a DM Control task (a seed that diverged: ``ledger.py`` trains its
cell on to the budget and records the seed): the lowest return there is (rewards lie in [0, 1] per
step), as a policy that cannot act earns nothing. The seed stays in every statistic, so a diverging
method ranks below one that does not."""
LOWEST_RETURN = {"toy/MirrorGoals": -0.8, "toy/OctahedronGoals": -1.2}
"""The toy tasks' lowest return, their DIVERGED_RETURN: the goal reward is >= 0 and the action cost at
most 0.01 x |a|^2 <= 0.01 x the action size per step, over 40 steps (diffrl.envs.toy)."""


def diverged_score(task: str) -> float:
    return LOWEST_RETURN.get(task, DIVERGED_RETURN)


def scored(returns, task: str = "") -> np.ndarray:
    """Returns with every non-finite value replaced by the task's lowest return (``diverged_score``)."""
    x = np.asarray(returns, np.float64)
    return np.where(np.isfinite(x), x, diverged_score(task))


def wall_minutes(run: "Run") -> str:
    """The run's wall-clock in minutes (its cells summed), marked '(loaded)' where other work shared a core."""
    return f"{run.wall_s / 60:.0f}" + (" (loaded)" if run.loaded else "")


def current_records(root: Path) -> tuple[list[dict], list[tuple[dict, str]]]:
    """(records whose hash is the code's, [(stale record, what changed)]); records of cells no
    longer in the plan count as stale."""
    from ledger_cell import cell_config, cell_status

    cells = {c.cell_id: c for c in ledger_plan.plan()}
    current, stale = [], []
    records = read_records(root / "records") if (root / "records").is_dir() else []
    by_id = {r["cell"]: r for r in records}
    for record in records:
        cell = cells.get(record["cell"])
        if cell is None:
            stale.append((record, "no longer in the plan"))
            continue
        status, detail = cell_status(cell, by_id, cell_config(cell))
        (current.append(record) if status == "done" else stale.append((record, detail)))
    return current, stale


def _recorded_groups(records: list[dict]) -> tuple[dict[tuple, list[dict]], dict[tuple, set[str]]]:
    """({group: its records}, {group: its planned cell ids}) over the plan's groups that have a record."""
    planned: dict[tuple, set[str]] = {}
    for cell in ledger_plan.plan():
        planned.setdefault(cell.group, set()).add(cell.cell_id)
    groups = {c.cell_id: c.group for c in ledger_plan.plan()}
    have: dict[tuple, list[dict]] = {}
    for r in records:
        have.setdefault(groups[r["cell"]], []).append(r)
    return have, planned


def group_runs(records: list[dict]) -> dict[tuple, Run]:
    """{(matrix, label, task, budget): Run} for groups whose every planned cell has a record."""
    have, planned = _recorded_groups(records)
    return {g: Run(rs) for g, rs in have.items() if {r["cell"] for r in rs} == planned[g]}


def incomplete_runs(records: list[dict]) -> dict[tuple, tuple[Run, int]]:
    """{group: (Run of the cells recorded so far, seeds planned)} for the groups with some but not all of
    their cells recorded."""
    have, planned = _recorded_groups(records)
    seeds = {c.cell_id: c.num_seeds for c in ledger_plan.plan()}
    return {g: (Run(rs), sum(seeds[c] for c in planned[g])) for g, rs in sorted(have.items())
            if {r["cell"] for r in rs} != planned[g]}


def filling_lines(incomplete: dict[tuple, tuple[Run, int]], matrix: str) -> list[str]:
    """'Runs still filling': ``matrix``'s groups of ``incomplete`` (:func:`incomplete_runs`), with the final
    return of each seed finished so far (in no statistic until the group is complete)."""
    rows = []
    for group, (run, total) in incomplete.items():
        if group[0] != matrix:
            continue
        finals = ", ".join(f"{s}: {number(v, 1)}" for s, v in zip(run.seeds, run.final))
        rows.append(f"| {run.task.split('/')[-1]} | {run.label} | {run.budget:,} | {run.num_seeds} of {total} | "
                    f"{finals} |")
    if not rows:
        return []
    return ["## Runs still filling", "",
            "Runs with some of their seeds finished, in no table above until all have: the final return of each "
            "seed so far (default sampler).", "",
            "| task | run | env steps | seeds finished | final return (seed: return) |", "|---|---|---|---|---|",
            *rows, ""]


def normalised(values, random_return: float) -> np.ndarray:
    return (np.asarray(values, np.float64) - random_return) / (MAX_RETURN - random_return)


# -- tables -------------------------------------------------------------------------------------
def status_table(records, stale) -> str:
    cells = ledger_plan.plan()
    done = {r["cell"] for r in records}
    lines = ["# Ledger status", "", "| matrix | cells done | cells planned | core-hours recorded |", "|---|---|---|---|"]
    for m in ("m1", "m2", "m3"):
        ids = [c.cell_id for c in cells if c.matrix == m]
        hours = sum(r["timing"]["wall_s"] for r in records if r["matrix"] == m) / 3600
        lines.append(f"| {m} | {sum(i in done for i in ids)} | {len(ids)} | {hours:.1f} |")
    lines += ["", "Stale records (their config hash is no longer the code's; left out of every table):", ""]
    lines += [f"* `{r['cell']}`: {why}" for r, why in stale] or ["* none"]
    return "\n".join(lines + time_shares(records)) + "\n"


def time_shares(records) -> list[str]:
    """Where matrix 1's wall-clock goes, per algorithm, over the cells that had their core to themselves:
    compiling (the programs, and the step-0 evaluation the first call runs), training, evaluating."""
    lines = ["", "## Where the time goes (matrix 1)", "",
             "Share of the wall-clock of the cells that ran alone on their core ('(loaded)' ones left out): "
             "compiling (init, chunk and evaluation programs; the step-0 evaluation runs inside the first call), "
             "training chunks, and the later evaluations (every sampler the policy offers). The compile is paid "
             "once per configuration: `diffrl train` keeps compiled programs in its compilation cache "
             "(docs/training.md), so repeating a command skips most of it.", "",
             "| algo | cells | core-hours | compiling | training | evaluating |", "|---|---|---|---|---|---|"]
    for algo in ledger_plan.M1_ALGOS:
        timings = [r["timing"] for r in records if r["matrix"] == "m1" and r["algo"] == algo
                   and not ran_under_load(r)]
        if not timings:
            continue
        total = sum(t["compile_s"] + t["train_s"] + t["eval_s"] for t in timings)
        shares = [sum(t[k] for t in timings) / total for k in ("compile_s", "train_s", "eval_s")]
        lines.append(f"| {algo} | {len(timings)} | {sum(t['wall_s'] for t in timings) / 3600:.1f} | "
                     + " | ".join(f"{x * 100:.0f} %" for x in shares) + " |")
    return lines


def divergence_lines(runs: dict, matrix: str) -> list[str]:
    rows = [run for key, run in sorted(runs.items()) if key[0] == matrix and run.diverged.any()]
    lines = ["## Runs with diverged seeds", "",
             "Seeds whose training produced NaN/inf, scored the task's lowest return from then on (0 on DM Control); "
             "the first error of each cell as the trainer reported it.", ""]
    if not rows:
        return lines + ["None among the finished runs.", ""] + blow_up_lines(runs, matrix)
    lines += ["| task | run | seeds diverged | first error |", "|---|---|---|---|"]
    for run in rows:
        lines.append(f"| {run.task.split('/')[-1]} | {run.label} | {int(run.diverged.sum())} of {run.num_seeds} | "
                     f"{'; '.join(run.divergence_errors)} |")
    return lines + [""] + blow_up_lines(runs, matrix)


def blow_up_lines(runs: dict, matrix: str) -> list[str]:
    """Runs whose simulation went non-finite in some environment steps (records count them since
    2026-12-07): each such step ended its episode and the environment was reset, so no seed was lost."""
    rows = [run for key, run in sorted(runs.items()) if key[0] == matrix and run.blow_ups]
    lines = ["## Simulation blow-ups", "",
             "Environment steps whose simulation state went non-finite (MJX can integrate a state to NaN), each "
             "made a termination with reward 0 and reset (`NonFiniteGuard`, docs/environments.md), over all seeds; "
             "counted by records written since 2026-12-07.", ""]
    if not rows:
        return lines + ["None among the runs that count them.", ""]
    lines += ["| task | run | env steps |", "|---|---|---|"]
    lines += [f"| {run.task.split('/')[-1]} | {run.label} | {run.blow_ups} |" for run in rows]
    return lines + [""]


def two_core_minutes(run: "Run", pilot: dict) -> str:
    """The run's wall-clock on 2 CPU cores, estimated: each cell's compile time plus its training and
    evaluation time divided by the algorithm's measured speedup from one core to two
    (``ledger.py cores``, on the reference task nearest in REPPO's cost)."""
    from ledger_pilot import two_core_speedups

    speedups = two_core_speedups(pilot, run.algo, run.task)
    if speedups is None:
        return "n/a"
    train, evaluation, _ = speedups
    seconds = sum(t["compile_s"] + t["train_s"] / train + t["eval_s"] / evaluation
                  for t in (r["timing"] for r in run.records))
    return f"{seconds / 60:.0f}" + (" (loaded)" if run.loaded else "")


def expected_table(runs: dict, published: dict | None, pilot: dict | None = None) -> str:
    pilot = pilot or {}
    lines = ["# Expected results per task (matrix 1)", "",
             f"What `diffrl train` gives on each task with the preset it picks, at {ledger_plan.M1_BUDGET:,} env steps "
             "per seed (5 seeds; median of the final evaluation with its 95 % bootstrap interval), and the "
             "wall-clock of one 5-seed program: measured on one core of this machine (single-threaded XLA, as the "
             "ledger runs), and on 2 CPU cores (XLA's own threads, as `diffrl train` runs there) estimated from it "
             "with the algorithm's measured speedup from one core to two (`ledger.py cores`; 'n/a' until measured). "
             "REPPO's published final at 50M env steps is for orientation only (a 250x larger budget, GPU presets). "
             "'(loaded)': other work shared the machine while the cell ran, so its wall-clock overstates the cost."]
    if published:
        src = published.get("source", {})
        lines += ["", f"Published numbers: {src.get('repository', '')} `{src.get('files', '')}` "
                      f"(commit {str(src.get('commit', ''))[:10]}): {src.get('how', '')}"]
    lines += ["", "| task | algo | command | expected final return | wall min (1 core) | wall min (2 cores) | "
                  "REPPO published (50M) |", "|---|---|---|---|---|---|---|"]
    for task in ledger_plan.M1_TASKS:
        name = f"playground/{task}"
        ref = (published or {}).get("tasks", {}).get(task, {})
        small = next((v for k, v in ref.items() if "small" in k), None)
        pub = f"{small['mean']:.0f} ± {small['std']:.0f} (n = {small['n']})" if small else "n/a"
        for algo in ledger_plan.M1_ALGOS:
            run = runs.get(("m1", algo, name, ledger_plan.M1_BUDGET))
            if run is None:
                continue
            cmd = (f"`diffrl train --algo {algo} --env {name} --total-env-steps {ledger_plan.M1_BUDGET} "
                   f"--num-seeds 5 --num-evals 5 --eval-envs 16`")
            lines.append(f"| {task} | {algo} | {cmd} | {fmt(median_ci(run.final), 0)} | "
                         f"{wall_minutes(run)} | {two_core_minutes(run, pilot)} | {pub} |")
    return "\n".join(lines) + "\n"


def render_tables(root: Path) -> tuple[dict[str, str], dict, dict, dict]:
    """({table file: markdown}, runs, random returns, runs still filling (:func:`incomplete_runs`)) from
    the records under ``root``."""
    records, stale = current_records(root)
    pilot = json.loads((root / "pilot.json").read_text()) if (root / "pilot.json").exists() else {}
    randoms = pilot.get("random_returns", {})
    published = root / "reppo_published.json"
    published = json.loads(published.read_text()) if published.exists() else None
    runs, incomplete = group_runs(records), incomplete_runs(records)
    missing = sorted({r.task for r in runs.values() if r.matrix in ("m1", "m2") and r.task not in randoms})
    if missing:
        raise ValueError(f"no random return in pilot.json for {missing}: run `ledger.py pilot --tasks ...`")
    from ledger_ablation import m2_table  # they import this module's statistics
    from ledger_breadth import m1_table
    from ledger_replay import m3_table

    def filling(matrix: str) -> str:
        lines = filling_lines(incomplete, matrix)
        return "\n".join(lines) + "\n" if lines else ""

    return {"status.md": status_table(records, stale), "m1.md": m1_table(runs, randoms),
            "m2.md": m2_table(runs, randoms) + filling("m2"), "m3.md": m3_table(runs) + filling("m3"),
            "expected.md": expected_table(runs, published, pilot)}, runs, randoms, incomplete


def render(root: Path, with_figures: bool = True) -> list[Path]:
    """Write the report's tables (and figures) under ``root/report``."""
    out = root / "report"
    out.mkdir(parents=True, exist_ok=True)
    tables, runs, randoms, incomplete = render_tables(root)
    written = []
    for name, text in tables.items():
        (out / name).write_text(text)
        written.append(out / name)
    if with_figures:
        from ledger_figures import draw_figures

        written += draw_figures(runs, randoms, out, incomplete)
    return written


def check(root: Path) -> int:
    """0 if every record is valid and the committed tables equal a fresh rendering; else 1."""
    tables = render_tables(root)[0]
    bad = 0
    for name, text in tables.items():
        path = root / "report" / name
        old = path.read_text() if path.exists() else ""
        if old != text:
            bad += 1
            diff = "".join(list(difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(path),
                                                     "rendered"))[:40])
            print(f"{path} is not what the records render (run `python benchmarks/ledger.py report`):\n{diff}",
                  file=sys.stderr)
    return 1 if bad else 0
