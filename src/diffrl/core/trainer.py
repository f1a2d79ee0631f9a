"""The thin host loop: start, run chunks, evaluate, log, checkpoint, report progress.

What a run is made of (environments, algorithm, the stepping of either kind of environment)
comes built from ``diffrl.core.run``. All learning happens in the pure, compiled chunk of
``diffrl.core.loop`` (or the host loop of ``diffrl.core.host_loop``); this file only moves
data to the host between chunks. Seeds are vmapped: every array in
the train state has a leading ``num_seeds`` axis here.

Everything is traced under the device mesh of ``--num-devices`` (``diffrl.plumbing.sharding``):
the env state is split over the devices along its env axis, the rest replicated. In a
multi-process run every process runs this loop (the compiled chunks are one global
program); only process 0 writes the run directory.
"""
from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Callable

import jax
import numpy as np

from diffrl.config import RunConfig, as_run_config
from diffrl.core.loggers import JsonlLogger, MultiLogger, TensorBoardLogger, WandbLogger
from diffrl.core.loop import TrainState
from diffrl.core.run import Run, build_run, seed_keys
from diffrl.core.nonfinite import NonFiniteError, first_nonfinite
from diffrl.core.run_dir import completed_summary, default_run_dir, refuse_existing_run
from diffrl.core.run_lock import RunDirLock
from diffrl.core.stepping import replicated
from diffrl.plumbing.records import atomic_write_json
from diffrl.plumbing.run_record import segments_summary, write_run_record
from diffrl.plumbing.sharding import (initialize_distributed, local_mesh, make_mesh, matmul_precision, to_host,
                             wait_for_all_processes)


class _Silent:
    """Progress reporting of the processes that do not write (all but process 0)."""

    def message(self, text: str) -> None:
        pass

    def update(self, row: dict) -> None:
        pass

    def close(self) -> None:
        pass


def as_os_error(error: Exception, path) -> Exception:
    """An I/O failure that a library reported as another exception type (orbax, tensorstore:
    ``ValueError``/``RuntimeError`` whose text carries the system's message) as the
    ``OSError`` it is, naming ``path``; any other error is returned unchanged."""
    import errno

    text = str(error)
    for code in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT, errno.EIO):
        if os.strerror(code) in text:
            return OSError(code, os.strerror(code), str(path))
    return error


class Trainer:
    """``Trainer(config).run()`` trains and writes the run directory; returns the summary.

    What is trained comes from the composition root (``diffrl.core.run.build_run``, or ``run``
    when given); the trainer is the loop around it: chunks, evaluations, checkpoints, logs,
    progress, signals and the run directory."""

    def __init__(self, config: RunConfig, progress_fn: Callable[[dict], None] | None = None,
                 metrics_fn: Callable[[int, dict], None] | None = None, run: Run | None = None):
        # the run config of its algorithm (a TrainConfig keeps only the sections the algorithm reads;
        # a changed setting of another section is refused): what is built, checkpointed and stored
        self.config = config = as_run_config(config)
        # Before anything touches a device: a multi-process run joins its peers first.
        initialize_distributed(config.coordinator_address, config.num_processes, config.process_id)
        self.built = build_run(config) if run is None else run  # validates first (device count included)
        self.mesh = make_mesh(config.num_devices)
        self.is_main = jax.process_index() == 0
        if config.resume:
            self.run_dir = Path(config.resume)
        else:
            self.run_dir = Path(config.out) if config.out else default_run_dir(config.env, config.algo)
        self.progress_fn = progress_fn
        # metrics_fn(first_iteration, {name: (num_seeds, iterations_per_chunk) array}): the raw
        # per-seed, per-iteration training metrics of every chunk (the logged rows average them).
        self.metrics_fn = metrics_fn
        self._stop_requested = False
        self.stop_signal: int | None = None  # the signal that interrupted the run, if one did
        self.run_id: str | None = None
        self._signals = None

    # Shorthands for the run's pieces (callers of the trainer read them after a run).
    @property
    def algo(self):
        return self.built.algo

    @property
    def env(self):
        return self.built.env

    @property
    def eval_env(self):
        return self.built.eval_env

    @property
    def samplers(self) -> tuple[str, ...]:
        return self.built.samplers

    def request_stop(self) -> None:
        """Finish the chunk in flight, write a checkpoint, then return (SIGINT/SIGTERM do this)."""
        self._stop_requested = True

    # -- compiled functions ------------------------------------------------------
    def _compile(self, keys):
        started = self.built.stepper.start(keys, self.mesh)
        self.shardings = started.shardings
        return started.state, started.chunk, started.evaluate, started.compile_times

    def _eval(self, evaluate, state: TrainState, key) -> dict:
        row = {}
        keys = replicated(jax.random.split(key, self.config.num_seeds), self.mesh)
        for i, sampler in enumerate(self.samplers):
            out = to_host(evaluate(state.algo, state.obs_stats, state.critic_obs_stats, keys, sampler))
            prefix = "eval/" if i == 0 else f"eval/{sampler}/"
            for k, v in out.items():
                row[prefix + k] = float(np.mean(v))
                # Per seed too: seeds are the unit of evidence (medians, collapsed seeds).
                name = "seed_returns" if k == "episode_return" else f"seed_{k}"
                if k in ("episode_return", "behaviour_entropy", "mode_reached", "success_rate"):
                    row[prefix + name] = [float(x) for x in v]
        return row

    # -- main loop ---------------------------------------------------------------
    def run(self) -> dict:
        """Train; process 0 holds the run directory's writer lock throughout (``core.run_lock``):
        a second trainer on the same directory is refused before anything is read or compiled."""
        if not self.is_main:
            return self._run_in_dir()
        if not self.config.resume:  # never start over inside a run that has trained
            refuse_existing_run(self.run_dir)
        else:
            complete = completed_summary(self.config)
            if complete is not None:  # a requeued finished run: nothing to do, nothing touched
                return complete
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with RunDirLock(self.run_dir):
            return self._run_in_dir()

    def _run_in_dir(self) -> dict:
        cfg = self.config
        self._resume = None
        if cfg.resume:  # before any logger opens metrics.jsonl: rows after the checkpoint go
            self._resume = self._resume_point()
            with jax.set_mesh(self.mesh):  # refused before compiling, and before any file changes
                self._check_resumable(seed_keys(cfg.seed, cfg.num_seeds))
            if self.is_main:
                self._truncate_metrics(int(self._resume[1]["chunk"]) * cfg.iterations_per_chunk * cfg.batch_size)
        if not self.is_main:  # other processes compute; process 0 writes
            with jax.set_mesh(self.mesh), matmul_precision(cfg.matmul_precision):
                summary = self._run(MultiLogger([]), _Silent())
            wait_for_all_processes("diffrl-run-finished")  # until process 0 has written everything
            return summary
        began_at = int(self._resume[1]["chunk"]) * cfg.iterations_per_chunk * cfg.batch_size if self._resume else 0
        record = write_run_record(self.run_dir, cfg, {"algorithm": cfg.algo, "samplers": list(self.samplers)},
                                  began_at=began_at)
        self.run_id, self._segments = record.get("run_id"), segments_summary(record)
        from diffrl.core.signals import StopOnSignal

        signals = self._signals = StopOnSignal(self.request_stop, self.run_dir, resumed=self._resume is not None)
        loggers = [JsonlLogger(self.run_dir)]
        if cfg.tensorboard:
            loggers.append(TensorBoardLogger(self.run_dir))
        if cfg.wandb:
            loggers.append(WandbLogger(self.run_dir, record["config"], self.run_dir.name))
        logger = MultiLogger(loggers)
        from diffrl.core.progress import Progress

        progress = Progress(cfg, enabled=cfg.progress)
        try:
            with signals, jax.set_mesh(self.mesh), matmul_precision(cfg.matmul_precision):
                summary = self._run(logger, progress)
            wait_for_all_processes("diffrl-run-finished")
            return summary
        finally:
            self.stop_signal = signals.signum
            self.built.stepper.close()  # stops simulator workers (nothing to stop for a JAX env)
            progress.close()
            logger.close()

    def _checkpoint(self, state, chunk: int, row: dict, clock: dict) -> None:
        from diffrl.plumbing.checkpoint import save_checkpoint

        cfg = self.config
        if jax.process_count() > 1:  # gather the sharded env state (a collective: every process)
            state = to_host(state)
            if not self.is_main:
                return
        try:
            save_checkpoint(self.run_dir, chunk * cfg.iterations_per_chunk * cfg.batch_size, state, {
                "algo": cfg.algo, "env": cfg.env, "config": cfg, "env_steps": row.get("env_steps"),
                "iteration": chunk * cfg.iterations_per_chunk, "chunk": chunk, "chunk_iterations":
                cfg.iterations_per_chunk, "clock": clock, "run_id": self.run_id}, keep=cfg.keep_checkpoints,
                best_metric=row.get("eval/episode_return"))
        except OSError:
            raise
        except Exception as e:  # orbax and tensorstore report I/O failures as their own exception types
            raise as_os_error(e, self.run_dir / "checkpoints") from e

    def _resume_point(self) -> tuple[Path, dict]:
        """The latest valid checkpoint of the run directory and its metadata."""
        from diffrl.plumbing.checkpoint import latest_valid_checkpoint, read_metadata

        path = latest_valid_checkpoint(self.run_dir)
        if path is None:
            raise FileNotFoundError(f"--resume: no valid checkpoint in {self.run_dir}")
        return path, read_metadata(path)

    def _restore(self, state, path: Path, meta: dict):
        """Restore ``path`` into ``state`` -> (state, next chunk, clock)."""
        from diffrl.plumbing.checkpoint import restore_checkpoint

        if meta.get("chunk_iterations") != self.config.iterations_per_chunk:
            raise ValueError(f"--resume: checkpoint has {meta.get('chunk_iterations')} iterations per chunk, "
                             f"this configuration {self.config.iterations_per_chunk}")
        template = to_host(state) if jax.process_count() > 1 else state
        state = restore_checkpoint(path, template, expected_algo=self.config.algo, expected_env=self.config.env)
        return jax.device_put(state, self.shardings), int(meta["chunk"]), dict(meta.get("clock") or {})

    def _writing(self):
        """Held while a file of the run directory is written: a second signal waits for it
        (``core.signals``), so stopping at once never leaves a half-written file."""
        import contextlib

        return self._signals.write_lock if self._signals is not None else contextlib.nullcontext()

    def _check_resumable(self, keys) -> None:
        """Refuse, before anything is compiled, a resume whose settings cannot continue the
        checkpoint bit for bit: another chunk size, or a train state of other array shapes
        (network sizes, batch or buffer sizes changed on the command line)."""
        from diffrl.plumbing.checkpoint import CheckpointError, check_target

        path, meta = self._resume
        if meta.get("chunk_iterations") != self.config.iterations_per_chunk:
            raise ValueError(f"--resume: checkpoint has {meta.get('chunk_iterations')} iterations per chunk, "
                             f"this configuration {self.config.iterations_per_chunk}")
        shape = self.built.stepper.state_shape(keys)
        if shape is None:  # known only once the simulators run: checked on restore
            return
        try:
            check_target(meta, shape)
        except CheckpointError as e:
            raise ValueError(f"--resume {self.run_dir}: the settings given cannot continue checkpoint "
                             f"{path.name}: {e}") from None

    def _truncate_metrics(self, env_steps: int) -> None:
        """Drop rows logged after the restored checkpoint (they are recomputed)."""
        path = self.run_dir / "metrics.jsonl"
        if not path.exists():
            return
        keep = []
        for line in path.read_text().splitlines():
            try:
                if line.strip() and json.loads(line).get("env_steps", 0) <= env_steps:
                    keep.append(line)
            except ValueError:  # half a row, left by a disk that filled up: it is recomputed
                pass
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in keep))
        tmp.replace(path)

    def _finish(self, state) -> dict:
        """Export seed 0's policy and draw the learning curve (best effort, reported)."""
        if jax.process_count() > 1:  # host-side work of process 0 alone: not on the global mesh
            with jax.set_mesh(local_mesh()):
                return self._finish_here(state)
        return self._finish_here(state)

    def _finish_here(self, state) -> dict:
        out = {}
        try:
            from diffrl.artefacts.export import export_from_train_state

            sampler = next((s for s in self.samplers if s in self.algo.policy.samplers), None)
            export_from_train_state(self.run_dir / "policy", self.algo, state, self.config, seed=0, sampler=sampler,
                                    extra=self.built.action_bounds)
            out["policy_dir"] = str(self.run_dir / "policy")
        except Exception as e:  # an export problem must not lose the finished run
            warnings.warn(f"policy export failed: {e}")
        try:
            from diffrl.artefacts.plotting import plot_run

            out["curve"] = str(plot_run(self.run_dir))
        except Exception as e:
            warnings.warn(f"learning-curve plot failed: {e}")
        return out

    def _run(self, logger, progress) -> dict:
        cfg = self.config
        keys = seed_keys(cfg.seed, cfg.num_seeds)
        eval_key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 2**31 - 1)
        progress.message(f"compiling {cfg.algo} on {cfg.env} ({cfg.num_seeds} seed(s), "
                         f"{cfg.num_envs} envs x {cfg.num_steps} steps per iteration)")
        state, chunk, evaluate, compile_times = self._compile(keys)
        steps_per_chunk = cfg.iterations_per_chunk * cfg.batch_size
        start, clock = 0, {"walltime": 0.0, "train_time": 0.0}
        if self._resume is not None:
            state, start, clock = self._restore(state, *self._resume)
            progress.message(f"resumed from chunk {start} ({start * steps_per_chunk:,} env steps)")
        t0 = time.perf_counter()
        first_eval = self._eval(evaluate, state, jax.random.fold_in(eval_key, start))
        compile_times["compile/eval_first_call_s"] = time.perf_counter() - t0
        progress.message("compiled in {:.1f}s (init {:.1f}s, chunk {:.1f}s, eval {:.1f}s)".format(
            sum(compile_times.values()), *compile_times.values()))
        # From here a first signal finishes the chunk and checkpoints. Marked before the first row is
        # written, so that whoever sees that row (a script, tests/test_signals.py) knows a signal sent
        # now is answered by a checkpoint, not by an immediate stop.
        if self._signals is not None:
            self._signals.training()
        if start == 0:
            with self._writing():
                logger.log({"env_steps": 0, "walltime": 0.0, "train/sps": 0.0, **first_eval})
        train_time, wall0 = clock.get("train_time", 0.0), time.perf_counter() - clock.get("walltime", 0.0)
        row: dict = {}
        interrupted = False
        blow_ups = 0  # env steps whose simulation went non-finite (envs.wrappers.NonFiniteGuard), this segment
        for c in range(start, cfg.num_chunks):
            t0 = time.perf_counter()
            state, metrics = chunk(state)
            metrics = to_host(metrics)
            dt = time.perf_counter() - t0
            train_time += dt
            if self.metrics_fn:
                self.metrics_fn(c * cfg.iterations_per_chunk, metrics)
            problem = first_nonfinite(metrics, c * cfg.iterations_per_chunk) if cfg.check_finite else None
            if problem:
                with self._writing():
                    logger.log({"env_steps": (c + 1) * steps_per_chunk, "error": problem})
                raise NonFiniteError(problem)
            blown = int(np.sum(metrics.get("train/nonfinite_states", 0)))
            if blown and not blow_ups:
                progress.message(f"{blown} environment step(s) of chunk {c + 1} went non-finite (the simulation "
                                 "blew up): each ended its episode, which was reset; counted per iteration in "
                                 "train/nonfinite_states")
            blow_ups += blown
            row = {
                "env_steps": (c + 1) * steps_per_chunk,
                "walltime": time.perf_counter() - wall0,
                "train/sps": cfg.num_seeds * steps_per_chunk / dt,
                "train/time_s": train_time,
            }
            row.update({k: float(np.mean(v)) for k, v in metrics.items() if not k.startswith("nonfinite/")})
            row.update(self._eval(evaluate, state, jax.random.fold_in(eval_key, c + 1)))
            row["walltime"] = time.perf_counter() - wall0
            with self._writing():
                logger.log(row)
            progress.update(row)
            if self.progress_fn:
                self.progress_fn(row)
            last = c + 1 == cfg.num_chunks
            due = cfg.checkpoint_every and ((c + 1) % cfg.checkpoint_every == 0)
            if due or last or self._stop_requested:
                with self._writing():
                    self._checkpoint(state, c + 1, row, {"walltime": row["walltime"], "train_time": train_time})
            if self._stop_requested and not last:
                interrupted = True
                progress.message(f"stopped after chunk {c + 1}: checkpoint written; "
                                 f"continue with `diffrl train --resume {self.run_dir}`")
                break
        self.state = state
        summary = {
            "env": cfg.env,
            "algo": cfg.algo,
            "num_seeds": cfg.num_seeds,
            "env_steps": row.get("env_steps", start * steps_per_chunk),
            "interrupted": interrupted,
            "final": {k: v for k, v in row.items() if k.startswith("eval/")},
            "walltime_s": time.perf_counter() - wall0,
            "train_time_s": train_time,
            "train_sps": cfg.num_seeds * row.get("env_steps", 0) / max(train_time, 1e-9),
            "nonfinite_states": blow_ups,
            **compile_times,
            "run_dir": str(self.run_dir),
            "segments": getattr(self, "_segments", []),
        }
        if jax.process_count() > 1:  # gathering the env state is a collective: every process joins
            state = to_host(state)
        if not self.is_main:
            return summary
        if not interrupted:
            summary.update(self._finish(state))
        with self._writing():
            atomic_write_json(self.run_dir / "summary.json", summary)
        progress.message(f"{'interrupted' if interrupted else 'done'}: eval return "
                         f"{summary['final'].get('eval/episode_return', float('nan')):.2f} after "
                         f"{summary['env_steps']:,} env steps; run directory {self.run_dir}")
        return summary
