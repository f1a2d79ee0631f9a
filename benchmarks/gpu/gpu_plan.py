"""The sizes of a lent GPU session's measurements (``benchmarks/gpu/measure.py``): :data:`PAPER_SCALE`
on the GPU, :data:`DRY_RUN` at toy sizes on a CPU (tests/test_gpu_script.py), and the margins by which
the time-boxed run decides what still fits.
"""
from __future__ import annotations

from dataclasses import dataclass

ALGOS = ("reppo", "trudi", "amdp", "amdp-backprop")
LATER_N_PRIORITY = ("amdp", "amdp-backprop", "trudi")
"""Order in which diffusion contenders join a later N when not all fit: AMDP's flat cost and the
backprop baseline's growth are the claim; TruDi's chain is the most expensive."""
MARGIN = 1.25
"""A projected program or group starts only if MARGIN x its projected seconds fit in the time left."""



@dataclass(frozen=True)
class Plan:
    """Sizes of every part; :data:`PAPER_SCALE` on the GPU, :data:`DRY_RUN` on a CPU."""

    env: str = "playground/CartpoleSwingup"
    preset: str = "dmc-small"
    """Preset family: contender A uses preset ``A-<family>``."""
    num_envs: int = 1024
    num_steps: int = 32
    overrides: tuple[str, ...] = ()
    """``KEY=VALUE`` config overrides for every program (bench cost's ``--set``)."""
    cost_algos: tuple[str, ...] = ALGOS
    diffusion_steps: tuple[int, ...] = (16, 128)
    repeats: int = 3
    warmup: int = 1
    contender_budget_s: float = 15.0
    """bench cost's ``--budget-s``: a contender stops repeating after this many timed seconds (>= 1 call)."""
    sps_envs: tuple[int, ...] = (1024, 4096)
    sps_algos: tuple[str, ...] = ALGOS
    sps_diffusion_steps: int = 16
    sps_repeats: int = 3
    learn_algos: tuple[str, ...] = ("reppo", "trudi")
    learn_seeds: int = 3
    learn_max_env_steps: int = 50_000_000
    learn_chunk_s: float = 20.0
    """Target seconds per training chunk (one evaluation after each), from parts a/b's speed."""
    learn_chunk_iterations: int = 10
    """Iterations per chunk when no speed was measured."""
    learn_min_s: float = 90.0
    """A learning run starts only with at least this long left for it (compile, a chunk and its evaluation)."""
    eval_envs: int = 32


PAPER_SCALE = Plan()
DRY_RUN = Plan(
    env="toy/MirrorGoals", preset="toy", num_envs=8, num_steps=4, diffusion_steps=(2,), repeats=2,
    contender_budget_s=5.0, cost_algos=("reppo", "amdp"), sps_envs=(8, 16), sps_algos=("reppo",),
    sps_diffusion_steps=2, sps_repeats=2, learn_algos=("reppo",), learn_max_env_steps=8 * 4 * 4,
    learn_chunk_s=1.0, learn_chunk_iterations=2, learn_min_s=1.0, eval_envs=4,
    overrides=("reppo.num_minibatches=2", "reppo.num_epochs=1", "critic.hidden=32", "gaussian.hidden=(16,16)",
               "adjoint.hidden=(16,16)", "diffusion.hidden=(16,16)", "reppo.kl_samples=1"))
"""Every part's code path at toy sizes. Compiling dominates a CPU's dry run, so it compiles as few programs
as that takes: one diffusion contender (AMDP) in a, REPPO alone in b's second env count and in c."""
