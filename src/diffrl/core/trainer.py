"""The thin host loop: compile, run chunks, evaluate, log, report progress.

All learning happens in the pure, compiled chunk of ``diffrl.core.loop``; this
file only moves data to the host between chunks. Seeds are vmapped: every array in
the train state has a leading ``num_seeds`` axis here.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.config import TrainConfig
from diffrl.core.build import build
from diffrl.core.evaluate import make_evaluate
from diffrl.core.loggers import JsonlLogger, MultiLogger, TensorBoardLogger, WandbLogger
from diffrl.core.loop import TrainState, make_components
from diffrl.core.run_dir import atomic_write_json, default_run_dir, write_run_record


class NonFiniteError(FloatingPointError):
    """Training produced NaN/inf; the message says where and when."""


def seed_keys(seed: int, num_seeds: int) -> jax.Array:
    base = jax.random.PRNGKey(seed)
    return jnp.stack([jax.random.fold_in(base, i) for i in range(num_seeds)])


def first_nonfinite(metrics: dict, iteration0: int) -> str | None:
    """metrics: (seeds, iters) arrays. Describe the first non-finite event, if any."""
    flags = {k.split("/", 1)[1]: np.asarray(v) for k, v in metrics.items() if k.startswith("nonfinite/")}
    events = []
    for where, f in flags.items():
        hits = np.argwhere(f > 0)
        if len(hits):
            seed, it = hits[np.argmin(hits[:, 1])]
            events.append((int(it), int(seed), where))
    if not events:
        return None
    it, seed, where = min(events)
    bad_losses = [k for k, v in metrics.items()
                  if not k.startswith("nonfinite/") and not np.all(np.isfinite(np.asarray(v)[seed, it]))]
    detail = f" (non-finite metrics: {', '.join(bad_losses)})" if bad_losses else ""
    return (f"non-finite {where} at iteration {iteration0 + it + 1}, seed {seed}{detail}; "
            f"stopping so that nothing is trained on NaN/inf")


class Trainer:
    """``Trainer(config).run()`` trains and writes the run directory; returns the summary."""

    def __init__(self, config: TrainConfig, progress_fn: Callable[[dict], None] | None = None):
        self.config = config
        self.env, self.algo, self.eval_env = build(config)  # validates first
        self.components = make_components(config, self.env, self.algo)
        self.evaluate = make_evaluate(config, self.eval_env, self.algo)
        self.samplers = tuple(config.eval_samplers) or (self.algo.samplers[0],)
        self.run_dir = Path(config.out) if config.out else default_run_dir(config.env, config.algo)
        self.progress_fn = progress_fn

    # -- compiled functions ------------------------------------------------------
    def _compile(self, keys):
        t0 = time.perf_counter()
        init = jax.jit(jax.vmap(self.components.init))
        state = init(keys)
        jax.block_until_ready(state)
        t_init = time.perf_counter() - t0
        t0 = time.perf_counter()
        chunk = jax.jit(jax.vmap(self.components.chunk), donate_argnums=0).lower(state).compile()
        t_chunk = time.perf_counter() - t0
        evaluate = jax.jit(jax.vmap(self.evaluate, in_axes=(0, 0, 0, 0, None)), static_argnums=4)
        return state, chunk, evaluate, {"compile/init_s": t_init, "compile/chunk_s": t_chunk}

    def _eval(self, evaluate, state: TrainState, key) -> dict:
        row = {}
        keys = jax.random.split(key, self.config.num_seeds)
        for i, sampler in enumerate(self.samplers):
            out = jax.device_get(evaluate(state.algo, state.obs_stats, state.critic_obs_stats, keys, sampler))
            prefix = "eval/" if i == 0 else f"eval/{sampler}/"
            for k, v in out.items():
                row[prefix + k] = float(np.mean(v))
            row[prefix + "seed_returns"] = [float(x) for x in out["episode_return"]]
        return row

    # -- main loop ---------------------------------------------------------------
    def run(self) -> dict:
        cfg = self.config
        self.run_dir.mkdir(parents=True, exist_ok=True)
        record = write_run_record(self.run_dir, cfg, {"algorithm": cfg.algo, "samplers": list(self.samplers)})
        loggers = [JsonlLogger(self.run_dir)]
        if cfg.tensorboard:
            loggers.append(TensorBoardLogger(self.run_dir))
        if cfg.wandb:
            loggers.append(WandbLogger(self.run_dir, record["config"], self.run_dir.name))
        logger = MultiLogger(loggers)
        from diffrl.core.progress import Progress

        progress = Progress(cfg, enabled=cfg.progress)
        try:
            return self._run(logger, progress)
        finally:
            progress.close()
            logger.close()

    def _run(self, logger, progress) -> dict:
        cfg = self.config
        keys = seed_keys(cfg.seed, cfg.num_seeds)
        eval_key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 2**31 - 1)
        progress.message(f"compiling {cfg.algo} on {cfg.env} ({cfg.num_seeds} seed(s), "
                         f"{cfg.num_envs} envs x {cfg.num_steps} steps per iteration)")
        state, chunk, evaluate, compile_times = self._compile(keys)
        t0 = time.perf_counter()
        first_eval = self._eval(evaluate, state, jax.random.fold_in(eval_key, 0))
        compile_times["compile/eval_first_call_s"] = time.perf_counter() - t0
        progress.message("compiled in {:.1f}s (init {:.1f}s, chunk {:.1f}s, eval {:.1f}s)".format(
            sum(compile_times.values()), *compile_times.values()))
        logger.log({"env_steps": 0, "walltime": 0.0, "train/sps": 0.0, **first_eval})
        steps_per_chunk = cfg.iterations_per_chunk * cfg.batch_size
        train_time, wall0 = 0.0, time.perf_counter()
        row: dict = {}
        for c in range(cfg.num_chunks):
            t0 = time.perf_counter()
            state, metrics = chunk(state)
            metrics = jax.device_get(metrics)
            dt = time.perf_counter() - t0
            train_time += dt
            problem = first_nonfinite(metrics, c * cfg.iterations_per_chunk) if cfg.check_finite else None
            if problem:
                logger.log({"env_steps": (c + 1) * steps_per_chunk, "error": problem})
                raise NonFiniteError(problem)
            row = {
                "env_steps": (c + 1) * steps_per_chunk,
                "walltime": time.perf_counter() - wall0,
                "train/sps": cfg.num_seeds * steps_per_chunk / dt,
                "train/time_s": train_time,
            }
            row.update({k: float(np.mean(v)) for k, v in metrics.items() if not k.startswith("nonfinite/")})
            row.update(self._eval(evaluate, state, jax.random.fold_in(eval_key, c + 1)))
            row["walltime"] = time.perf_counter() - wall0
            logger.log(row)
            progress.update(row)
            if self.progress_fn:
                self.progress_fn(row)
        self.state = state
        summary = {
            "env": cfg.env,
            "algo": cfg.algo,
            "num_seeds": cfg.num_seeds,
            "env_steps": cfg.trained_env_steps,
            "final": {k: v for k, v in row.items() if k.startswith("eval/")},
            "walltime_s": time.perf_counter() - wall0,
            "train_time_s": train_time,
            "train_sps": cfg.num_seeds * cfg.trained_env_steps / max(train_time, 1e-9),
            **compile_times,
            "run_dir": str(self.run_dir),
        }
        atomic_write_json(self.run_dir / "summary.json", summary)
        progress.message(f"done: eval return {summary['final'].get('eval/episode_return', float('nan')):.2f} "
                         f"after {cfg.trained_env_steps:,} env steps; run directory {self.run_dir}")
        return summary
