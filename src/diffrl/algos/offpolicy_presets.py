"""Presets of the off-policy family (sac, dime-off, amdp-off), registered in ``diffrl.presets``.

Paper scale (``*-dmc``): DIME's off-policy recipe (Celik et al. 2025, arXiv 2502.02316,
github.com/ALRhub/DIME ``configs/``): 1M env steps per task (DIME's dm_control budget; its
dog-run and humanoid-run curves go on to 3M), buffer 1M, batch 256, UTD 2, policy delay 3,
5,000 transitions before learning, two categorical critics of width 2048 with 101 atoms on
[-200, 200], no observation normalisation (the critics batch-renormalise their inputs), 16 DIME
denoising steps (sac: SAC's own critic and settings instead, below). DIME steps one environment;
here 24 step in parallel (one iteration = 24 transitions, 48 critic steps and 16 actor steps), the
same update-to-data ratio and delay.

CPU scale (``*-dmc-cpu``, ``*-gymnax``): narrower critics and policies, a smaller buffer, UTD 0.5;
measured (benchmarks/results/offpolicy_learning): all three swing up gymnax Pendulum-v1 within 20k
steps (amdp-off with a bound on its control, as the on-policy amdp-dmc-cpu preset); on Playground
CartpoleBalance SAC balances within 25k steps (3-4 min per seed on one core) while AMDP rises above the
random policy but does not balance yet at that budget (open). dog-run and humanoid-run: DIME's curves go on to 3M steps
(pass --total-env-steps 3000000 to compare at its budget).
"""
from __future__ import annotations

from typing import Any

OFF_POLICY_ALGOS = ("sac", "dime-off", "amdp-off")

_COMMON = {"normalize_obs": False, "offpolicy.critic": "categorical"}

_PAPER = {
    **_COMMON, "total_env_steps": 1_000_000, "num_envs": 24, "num_steps": 1, "num_evals": 20,
    "offpolicy.buffer_size": 1_000_000, "offpolicy.batch_size": 256, "offpolicy.utd": 2.0,
    "offpolicy.learning_starts": 5_000, "offpolicy.critic_hidden": (2048, 2048),
}
# CPU scale. The critic's steps dominate the cost (an AMDP chain of 8 instead of 16 steps saved 9 %
# of the wall-clock on Pendulum), so the critics are narrower, the batch 128 and UTD 0.5; the
# temperature starts at 0.1 (SAC's 1.0 spent a third of a Pendulum run decaying: 4 seeds at 8k steps,
# median -1070 against -175 with 0.1).
_DMC_CPU = {
    **_COMMON, "total_env_steps": 49_152, "num_envs": 16, "num_steps": 4, "num_evals": 6,
    "offpolicy.buffer_size": 100_000, "offpolicy.batch_size": 128, "offpolicy.utd": 0.5,
    "offpolicy.learning_starts": 2_048, "offpolicy.critic_hidden": (256, 256), "offpolicy.ent_start": 0.1,
    "offpolicy.renorm_warmup": 5_000,
}
_GYMNAX = {
    **_COMMON, "total_env_steps": 20_480, "num_envs": 16, "num_steps": 4, "num_evals": 5, "reward_scale": 0.1,
    "offpolicy.buffer_size": 50_000, "offpolicy.batch_size": 128, "offpolicy.utd": 0.5,
    "offpolicy.learning_starts": 1_024, "offpolicy.critic_hidden": (128, 128), "offpolicy.num_bins": 51,
    "offpolicy.vmin": -100.0, "offpolicy.vmax": 20.0, "offpolicy.ent_start": 0.1,
    "offpolicy.renorm_warmup": 2_000,
}

# dime-off steps its actor every 2nd critic step at CPU scale: an iteration's 32 critic steps
# must be a multiple of the delay (the schedule is a fixed structure of each iteration), and 2 is the
# divisor nearest DIME's 3.
_CPU_DELAY = {"offpolicy.policy_delay": 2}

# amdp-off at CPU scale bounds its control (B tanh(f / B), B = 4), as the on-policy amdp-dmc-cpu preset
# does: without it one Pendulum seed of 5 fell after its swing-up (-126 at 16k steps, -908 at 20k) as
# the temperature ran away (alpha 0.17 -> 0.80) with the drift's trust-region multiplier decaying to
# 0.05; with it (5 seeds, benchmarks/results/offpolicy_learning/pendulum_amdp_control_bound_4) no seed
# fell (largest drop 0.04 of the random-to-maximum range), alpha ended at 0.03-0.12 and the final median
# was 0.889 of the range (SAC 0.889, DIME 0.888).
_AMDP_CPU_BOUND = {"adjoint.control_bound": 4.0}

# sac is SAC as published (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications",
# arXiv 1812.05905, Table 1 and Alg. 1; code github.com/haarnoja/sac, github.com/rail-berkeley/softlearning):
# a ReLU-MLP actor; two scalar ReLU-MLP critics trained on the squared TD error, next-state values from target critics
# Polyak-averaged at tau = 0.005 after every critic step, the minimum of the two in the targets and in
# the actor loss, Adam (beta1 0.9, no gradient clipping), the actor and temperature stepped with every
# critic step. At paper scale also SAC's widths (256, 256), one gradient step per transition and a
# temperature step of 3e-4 (Table 1: one step size for all). Left open by the paper and kept from the
# family: the transitions before learning (DIME's 5,000), the policy's log-std clip ([log 1e-3, 2] with a
# floor on the std, where SAC's code clips the log-std to [-20, 2]), and at CPU scale the narrower critics, the
# batch, UTD 0.5, the initial temperature 0.1. CrossQ's critic, which sac used before (batch-renormalised,
# no target networks, the average of two categorical critics; DIME's), stays available with
# --offpolicy.target-networks false --offpolicy.critic-norm batch_renorm --offpolicy.critic categorical
# --offpolicy.ensemble-reduce mean --offpolicy.adam-b1 0.5 (docs/training.md).
_SAC = {"offpolicy.critic": "scalar", "offpolicy.critic_norm": "none", "offpolicy.target_networks": True,
        "offpolicy.target_tau": 0.005, "offpolicy.ensemble_reduce": "min", "offpolicy.adam_b1": 0.9,
        "offpolicy.actor_clip": 0.0, "offpolicy.policy_delay": 1, "gaussian.act": "relu"}
_SAC_PAPER = {**_SAC, "offpolicy.critic_hidden": (256, 256), "offpolicy.utd": 1.0, "offpolicy.alpha_lr": 3e-4}

# dime-off learns its base step dt from 0.1, as DIME does (github.com/ALRhub/DIME configs/base.yaml: dt 0.1,
# learn_dt true; one scalar, softplus-parameterised, times the cosine schedule); the fixed dt = 1 / N of
# the on-policy chain stays available with --diffusion.learn-dt false --diffusion.dt-init 0.0625 (N = 16).
_DIME_DT = {"diffusion.learn_dt": True, "diffusion.dt_init": 0.1}

# Per algorithm: the policy's settings at each scale (paper: DIME's 16-step chain with a 256-wide
# control net; the Gaussian as SAC's 256 x 256).
# DECISION: amdp-off steps its actor after EVERY critic step (policy delay 1; DIME and CrossQ delay
# theirs by 3): its actor step is one regression of the drift at bridge draws of stored end points,
# no chain, so it costs little. Measured on Pendulum (4 seeds, 16k steps, UTD 0.25): median final -344
# with delay 1 against -660 with delay 3, wall-clock 101 s against 104 s.
_POLICY = {
    "sac": {"paper": {"gaussian.hidden": (256, 256), "gaussian.norm": "none", **_SAC_PAPER},
            "dmc-cpu": {"gaussian.hidden": (128, 128), "gaussian.norm": "none", **_SAC},
            "gymnax": {"gaussian.hidden": (64, 64), "gaussian.norm": "none", **_SAC}},
    "dime-off": {"paper": {"diffusion.num_steps": 16, "diffusion.hidden": (256, 256, 256), **_DIME_DT},
                 "dmc-cpu": {"diffusion.num_steps": 8, "diffusion.hidden": (128, 128), **_CPU_DELAY, **_DIME_DT},
                 "gymnax": {"diffusion.num_steps": 8, "diffusion.hidden": (64, 64), **_CPU_DELAY, **_DIME_DT}},
    "amdp-off": {"paper": {"adjoint.num_steps": 16, "adjoint.hidden": (256, 256, 256), "offpolicy.policy_delay": 1},
                 "dmc-cpu": {"adjoint.num_steps": 16, "adjoint.hidden": (128, 128), "offpolicy.policy_delay": 1,
                             **_AMDP_CPU_BOUND},
                 "gymnax": {"adjoint.num_steps": 16, "adjoint.hidden": (64, 64), "offpolicy.policy_delay": 1,
                            **_AMDP_CPU_BOUND}},
}


def off_policy_presets() -> dict[str, dict[str, Any]]:
    presets = {}
    for algo in OFF_POLICY_ALGOS:
        for name, base, scale in (("dmc", _PAPER, "paper"), ("dmc-cpu", _DMC_CPU, "dmc-cpu"),
                                  ("gymnax", _GYMNAX, "gymnax")):
            presets[f"{algo}-{name}"] = {"algo": algo, **base, **_POLICY[algo][scale]}
    return presets


def default_off_policy_preset(algo: str, family: str) -> str:
    """gymnax tasks get ``*-gymnax``; every other family the CPU-sized MuJoCo-control preset."""
    return f"{algo}-gymnax" if family == "gymnax" else f"{algo}-dmc-cpu"
