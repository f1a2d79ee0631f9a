"""Named presets of tuned settings, and the rule that picks one by algo and env.

A preset is a set of overrides of :class:`~diffrl.config.TrainConfig` fields
(dotted names reach nested configs: ``"ppo.learning_rate"``). Command-line flags
override the preset. ``diffrl presets`` lists them.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from diffrl.algos.registry import UNUSED_SETTINGS
from diffrl.algos.offpolicy_presets import OFF_POLICY_ALGOS, default_off_policy_preset, off_policy_presets
from diffrl.config import ConfigError, TrainConfig

_PPO_DMC_NETS = {"gaussian.hidden": (32, 32, 32, 32), "gaussian.norm": "none",
                 "ppo.value_hidden": (256, 256, 256, 256, 256)}

PRESETS: dict[str, dict[str, Any]] = {
    # MuJoCo Playground's tuned brax-PPO settings for the DM Control suite
    # (Playground's dm_control_suite_params.py), mapped onto our loop.
    "ppo-dmc": {
        "algo": "ppo", "total_env_steps": 60_000_000, "num_envs": 2048, "num_steps": 30,
        "reward_scale": 10.0, "ppo.learning_rate": 1e-3, "ppo.ent_coef": 1e-2, "ppo.gamma": 0.995,
        "ppo.num_epochs": 16, "ppo.num_minibatches": 32, "ppo.clip_eps": 0.3, "ppo.max_grad_norm": 1.0,
        **_PPO_DMC_NETS,
    },
    # The same recipe sized for 2 CPU cores (about 10 minutes for a few million steps).
    "ppo-dmc-cpu": {
        "algo": "ppo", "total_env_steps": 3_000_000, "num_envs": 256, "num_steps": 32,
        "reward_scale": 10.0, "ppo.learning_rate": 1e-3, "ppo.ent_coef": 1e-2, "ppo.gamma": 0.995,
        "ppo.num_epochs": 4, "ppo.num_minibatches": 8, "ppo.clip_eps": 0.3, "ppo.max_grad_norm": 1.0,
        **_PPO_DMC_NETS,
    },
    # Brax locomotion-style PPO (Playground locomotion_params.py defaults).
    "ppo-brax": {
        "algo": "ppo", "total_env_steps": 100_000_000, "num_envs": 2048, "num_steps": 20,
        "reward_scale": 1.0, "ppo.learning_rate": 3e-4, "ppo.ent_coef": 1e-2, "ppo.gamma": 0.97,
        "ppo.num_epochs": 4, "ppo.num_minibatches": 32, "ppo.max_grad_norm": 1.0,
        "gaussian.hidden": (128, 128, 128, 128), "gaussian.norm": "none",
        "ppo.value_hidden": (256, 256, 256, 256, 256),
    },
    # gymnax classic control on CPU (Pendulum-v1 swings up within ~1M steps).
    "ppo-gymnax": {
        "algo": "ppo", "total_env_steps": 1_000_000, "num_envs": 64, "num_steps": 64,
        "reward_scale": 0.1, "ppo.learning_rate": 1e-3, "ppo.ent_coef": 0.0, "ppo.gamma": 0.95,
        "ppo.num_epochs": 8, "ppo.num_minibatches": 8, "ppo.clip_eps": 0.2, "ppo.max_grad_norm": 0.5,
        "gaussian.hidden": (64, 64), "gaussian.norm": "none", "ppo.value_hidden": (64, 64),
    },
    # Small built-in tasks (toy/*).
    "ppo-toy": {
        "algo": "ppo", "total_env_steps": 500_000, "num_envs": 64, "num_steps": 32,
        "ppo.learning_rate": 1e-3, "ppo.ent_coef": 1e-3, "ppo.num_epochs": 4, "ppo.num_minibatches": 4,
        "gaussian.hidden": (64, 64), "gaussian.norm": "none", "ppo.value_hidden": (64, 64),
    },
}


def _reppo_dmc(num_steps: int, num_minibatches: int) -> dict[str, Any]:
    """REPPO's paper settings on Playground DM Control (config/experiment_overrides/mjx_dmc_*)."""
    return {
        "total_env_steps": 50_000_000, "num_envs": 1024, "num_steps": num_steps,
        "reppo.num_minibatches": num_minibatches, "reppo.num_epochs": 8, "reppo.kl_bound": 0.1,
        "critic.vmin": 0.0, "critic.vmax": 150.0, "critic.hidden": 512, "critic.norm": "rms",
        "gaussian.hidden": (512, 512, 512), "gaussian.norm": "rms", "num_evals": 20,
    }


# The task as REPPO trained it (mjx_humanoid: asymmetric_obs true, push_distractions false).
_HUMANOID_ENV = {"asymmetric_critic": True, "env_overrides": ("push_config.enable=false",)}


def _reppo_humanoid(num_steps: int, num_minibatches: int) -> dict[str, Any]:
    """REPPO's settings on the Playground G1/T1 joystick tasks (env config mjx_humanoid:
    asymmetric critic on privileged_state, support [-10, 10]; overrides mjx_humanoid_*:
    gamma 0.97, critic width 1024, 1024 envs, 8 epochs; REPPO, Voelcker et al. 2025, arXiv
    2507.11019, reference code). 50M steps: REPPO's total_time_steps, the budget of TruDi's
    "Humanoid" results (Le et al. 2026, arXiv 2606.15260)."""
    return {
        **_reppo_dmc(num_steps, num_minibatches), "reppo.gamma": 0.97, "critic.hidden": 1024,
        "critic.vmin": -10.0, "critic.vmax": 10.0, "total_env_steps": 50_000_000,
        **_HUMANOID_ENV,
    }


# Smoke-test scale for playground locomotion on 2 CPU cores: a few minutes, checks that
# everything runs (it does not learn to walk). "humanoid" = G1, T1, Apollo and Berkeley
# Humanoid as REPPO set them up (asymmetric critic, no pushes); "locomotion" = the other
# locomotion tasks, with Playground's defaults.
_LOCOMOTION_CPU_REPPO = {
    "total_env_steps": 131_072, "num_envs": 64, "num_steps": 32, "reppo.num_minibatches": 4,
    "reppo.num_epochs": 2, "reppo.gamma": 0.97, "critic.vmin": -10.0, "critic.vmax": 10.0,
    "critic.hidden": 256, "critic.norm": "rms", "gaussian.hidden": (256, 256), "gaussian.norm": "rms",
    "num_evals": 2, "eval_envs": 16,
}
_LOCOMOTION_CPU_PPO = {
    "algo": "ppo", "total_env_steps": 131_072, "num_envs": 64, "num_steps": 32,
    "ppo.learning_rate": 3e-4, "ppo.ent_coef": 5e-3, "ppo.gamma": 0.97, "ppo.clip_eps": 0.2,
    "ppo.num_epochs": 4, "ppo.num_minibatches": 4, "ppo.max_grad_norm": 1.0,
    "gaussian.hidden": (128, 128), "gaussian.norm": "none", "ppo.value_hidden": (256, 128),
    "num_evals": 2, "eval_envs": 16,
}
PRESETS.update({
    # Playground's brax-PPO recipe for the G1/T1 joystick tasks (Playground's
    # locomotion_params.py): value on privileged_state, (512, 256, 128) networks.
    "ppo-humanoid": {
        "algo": "ppo", "total_env_steps": 200_000_000, "num_envs": 8192, "num_steps": 20,
        "reward_scale": 1.0, "ppo.learning_rate": 3e-4, "ppo.ent_coef": 5e-3, "ppo.gamma": 0.97,
        "ppo.clip_eps": 0.2, "ppo.num_epochs": 4, "ppo.num_minibatches": 32, "ppo.max_grad_norm": 1.0,
        "gaussian.hidden": (512, 256, 128), "gaussian.norm": "none", "ppo.value_hidden": (512, 256, 128),
        **_HUMANOID_ENV,
    },
    "ppo-humanoid-cpu": {**_LOCOMOTION_CPU_PPO, **_HUMANOID_ENV},
    "ppo-locomotion-cpu": dict(_LOCOMOTION_CPU_PPO),
})

# ManiSkill3 table-top tasks on CPU (host environments, maniskill/*): ManiSkill's PPO baseline
# (examples/baselines/ppo in haosulab/ManiSkill: gamma 0.8, GAE lambda 0.9, 4 epochs, learning rate
# 3e-4, no entropy bonus, 3 x 256 networks) at 32 envs x 50 steps (one 50-step episode of
# PickCube/PushCube per env and iteration) instead of its 512-4096 GPU envs.
PRESETS["ppo-maniskill-cpu"] = {
    "algo": "ppo", "total_env_steps": 1_000_000, "num_envs": 32, "num_steps": 50,
    "ppo.learning_rate": 3e-4, "ppo.ent_coef": 0.0, "ppo.gamma": 0.8, "ppo.gae_lambda": 0.9,
    "ppo.num_epochs": 4, "ppo.num_minibatches": 8, "ppo.clip_eps": 0.2, "ppo.max_grad_norm": 0.5,
    "gaussian.hidden": (256, 256, 256), "gaussian.norm": "none", "ppo.value_hidden": (256, 256, 256),
    "num_evals": 10, "eval_envs": 16,
}

# ... and the baseline itself on ManiSkill's GPU scene (--maniskill-backend gpu): its 512 envs x 50
# steps, 32 minibatches, 10M env steps.
PRESETS["ppo-maniskill"] = {**PRESETS["ppo-maniskill-cpu"], "total_env_steps": 10_000_000, "num_envs": 512,
                            "ppo.num_minibatches": 32, "num_evals": 20, "maniskill_backend": "gpu"}


# Small-batch stability (benchmarks/results/stability/): with 32 envs x 32 steps and 128 SGD steps
# per iteration, two REPPO-reference settings made every member of the family (REPPO, TruDi, AMDP)
# collapse and recover on gymnax Pendulum-v1 (8 seeds: 3-5 of 8 fell more than 0.2 of the
# random-to-maximum range below their own best in the last third of training):
# * the KL multiplier beta starts at 0.01 and moves by Adam steps of 3e-4 on log beta: over a
#   50k-step run (6k SGD steps) it only reaches 0.025, so the per-state penalty beta KL pulls
#   nothing back; the trust region held only by freezing states (KL 1.5-4x the bound, 50-70 %
#   of the states outside it). The reference's 512 steps per iteration on 128x more data leave
#   the dual time to grow. Starting beta at 1 keeps the KL under the bound from the first
#   iteration (and learns faster: no frozen states);
# * the critic step size 3e-4: the critic, refitted to each small on-policy batch, lags the
#   policy and its action gradient points the wrong way for several iterations (best-of-K by
#   the learned Q, which exploits exactly those errors, was the least stable sampler). Seeds
#   dropping > 0.2 on Pendulum with beta starting at 1: critic step 3e-4: 3/8 (REPPO),
#   1e-3: 1/8 (REPPO, TruDi), 2e-3: 0/8 (REPPO, TruDi, AMDP; largest drop 0.07-0.17).
# The temperature keeps the reference's start (0.01): AMDP starting at alpha = 1 stayed near
# the random policy on Pendulum (median final 0.43 against 0.86 of the random-to-maximum
# range): at this budget the dual cannot bring alpha down by two orders of magnitude.
_SMALL_BATCH_STABILITY = {"reppo.kl_start": 1.0, "reppo.critic_lr": 2e-3}

_REPPO_CPU = {
    # Sized for 2 CPU cores: narrower networks, small batches (32 envs x 32 steps) with many
    # SGD steps per sample (8 epochs x 16 minibatches of 64), and a WIDER policy than the
    # reference: entropy target H* = +0.5 d instead of -0.5 d. Measured on Playground
    # CartpoleBalance (benchmarks/results/reppo_cartpole_balance): with -0.5 d the policy's
    # per-state action spread is so narrow that a critic trained on these small batches gets
    # the action slope of Q wrong (learned Q against Monte-Carlo returns of the same states:
    # slopes 3x too flat and often of the wrong sign) and REPPO stalls at 340-370 (below the
    # zero-action 630); with +0.5 d it reaches 994 after 240k steps. The reference's 1024-env
    # batches average that noise away; 32 envs cannot.
    "num_envs": 32, "num_steps": 32, "reppo.num_minibatches": 16, "reppo.num_epochs": 8,
    "reppo.entropy_target_mult": 0.5,
    "critic.vmin": 0.0, "critic.vmax": 150.0, "critic.hidden": 256, "critic.norm": "rms",
    "gaussian.hidden": (256, 256), "gaussian.norm": "rms", "num_evals": 10,
    **_SMALL_BATCH_STABILITY,
    # A floor of 0.1 under the KL multiplier. After a long stretch of balancing with the KL far under
    # its bound, Adam's near-constant steps on log beta had taken beta from 1 down to 0.001-0.007 by
    # the last third of training, and single updates then moved the policy by KL 0.28-0.84 (3-8x the
    # bound), the start of every late collapse. With the floor no update in the last third exceeded
    # KL 0.18 and no seed fell after 164k steps (CartpoleBalance, 8 seeds, 245,760 steps: seeds
    # dropping > 0.2, largest drop: REPPO 2/8, 1.09 -> 1/8, 0.70; TruDi 1/8, 0.64 -> 1/8, 0.50; the one
    # left in each fell at ~130k through ~10 updates that each kept to the bound while the critic's
    # error grew; benchmarks/results/stability/README.md). Before beta reaches 0.1 (~100k steps) the
    # floor changes nothing.
    "reppo.kl_min": 0.1,
}

PRESETS.update({
    "reppo-dmc-small": {"algo": "reppo", **_reppo_dmc(32, 16)},
    "reppo-dmc-medium": {"algo": "reppo", **_reppo_dmc(64, 32)},
    "reppo-dmc-large": {"algo": "reppo", **_reppo_dmc(128, 64)},
    "reppo-humanoid-small": {"algo": "reppo", **_reppo_humanoid(32, 4)},
    "reppo-humanoid-large": {"algo": "reppo", **_reppo_humanoid(128, 16)},
    "reppo-dmc-cpu": {"algo": "reppo", "total_env_steps": 1_000_000, **_REPPO_CPU},
    # The official code's update hyperparameters at the CPU batch shape (cvoelcker/reppo's
    # config/reppo.yaml: one step size 3e-4 for both networks, the KL multiplier from 0.01, no floor
    # under it), with the CPU entropy target. On Playground CartpoleBalance (8-seed runs of 491,520
    # steps, benchmarks/results/stability/README.md, "The official code at the same scale") it
    # balances about half as fast as reppo-dmc-cpu (most seeds at ~225k steps instead of ~100k), and
    # seeds falling > 0.2 below their best in the last third are 4 of 24, as with the official code
    # run at the same scale (2 of 24; Fisher p = 0.67), against 4 of 8 for reppo-dmc-cpu.
    "reppo-dmc-cpu-reference": {"algo": "reppo", "total_env_steps": 1_000_000, **_REPPO_CPU,
                                "reppo.critic_lr": 3e-4, "reppo.kl_start": 0.01, "reppo.kl_min": 0.0},
    # ManiSkill3 on CPU: the CPU recipe with REPPO's ManiSkill changes (cvoelcker/reppo,
    # config/experiments/maniskill.yaml and config/env/maniskill.yaml): gamma 0.8, lambda 0.95,
    # 4 epochs, a critic support of [-15, 15] (ManiSkill's normalized dense reward is in [0, 1] per
    # step, so soft values stay within about 1 / (1 - 0.8) = 5), 50-step episodes.
    "reppo-maniskill-cpu": {"algo": "reppo", **_REPPO_CPU, "total_env_steps": 1_000_000,
                            "reppo.gamma": 0.8, "reppo.td_lambda": 0.95, "reppo.num_epochs": 4,
                            "critic.vmin": -15.0, "critic.vmax": 15.0, "num_steps": 50, "eval_envs": 16},
    # REPPO's own ManiSkill runs on the GPU scene (--maniskill-backend gpu): its base settings
    # (config/reppo.yaml: 1024 envs x 128 steps, 128 minibatches, 50M env steps) with the ManiSkill
    # overrides (experiment_overrides/maniskill.yaml: 4 epochs, lambda 0.95; env/maniskill.yaml:
    # support [-15, 15], 50-step episodes) and its ManiSkill discount 1 - 10 / 50 = 0.8.
    "reppo-maniskill": {"algo": "reppo", **_reppo_dmc(128, 128), "reppo.gamma": 0.8, "reppo.td_lambda": 0.95,
                        "reppo.num_epochs": 4, "critic.vmin": -15.0, "critic.vmax": 15.0, "eval_envs": 16,
                        "maniskill_backend": "gpu"},
    "reppo-humanoid-cpu": {"algo": "reppo", **_LOCOMOTION_CPU_REPPO, **_HUMANOID_ENV},
    "reppo-locomotion-cpu": {"algo": "reppo", **_LOCOMOTION_CPU_REPPO},
    # gymnax classic control: small nets, many SGD steps per sample (learns Pendulum in ~30k steps).
    "reppo-gymnax": {
        "algo": "reppo", "total_env_steps": 50_000, "num_envs": 32, "num_steps": 32,
        "reppo.num_minibatches": 16, "reppo.num_epochs": 8, "reward_scale": 0.1,
        "critic.vmin": -200.0, "critic.vmax": 50.0, "critic.hidden": 128,
        "gaussian.hidden": (64, 64), "num_evals": 5, **_SMALL_BATCH_STABILITY,
    },
    # Point-mass goal tasks (toy/MirrorGoals, toy/OctahedronGoals): gamma 0.95 and a critic support
    # [-10, 30] around the soft values (<= 1 / (1 - gamma) = 20 at a goal). Measured on MirrorGoals
    # with TruDi, 5 seeds, 97k steps (benchmarks/results/multimodality/README.md): with gamma 0.99
    # and [-50, 50] (the goal's bootstrapped value 100 lies outside it) the median seed reaches a
    # goal in 9% of episodes; widening the support alone to [-20, 130] gives 16%; gamma 0.95 with
    # [-10, 30] gives 100% (4 of 5 seeds >= 88%) at a median return of 90% of the optimum.
    "reppo-toy": {
        "algo": "reppo", "total_env_steps": 100_000, "num_envs": 64, "num_steps": 16,
        "reppo.num_minibatches": 8, "reppo.num_epochs": 4, "reppo.gamma": 0.95,
        "critic.vmin": -10.0, "critic.vmax": 30.0,
        "critic.hidden": 128, "gaussian.hidden": (64, 64), "num_evals": 5,
    },
    # toy/BimodalBandit: a fixed temperature (alpha = 0.1), so the max-entropy optimum
    # exp(Q / alpha) is a known two-peaked distribution (peaks of std ~0.03 at +-0.5); a critic
    # support matched to rewards in [0, 1] (the -50..50 of reppo-toy is 1.5 bins wide there);
    # more and larger steps per sample (one-step episodes carry little data per step).
    "reppo-bandit": {
        "algo": "reppo", "total_env_steps": 60_000, "num_envs": 64, "num_steps": 16,
        "reppo.num_minibatches": 8, "reppo.num_epochs": 8, "reppo.actor_lr": 1e-3, "reppo.critic_lr": 1e-3,
        "reppo.learn_alpha": False, "reppo.ent_start": 0.1, "critic.vmin": -1.0, "critic.vmax": 2.0,
        "critic.hidden": 128, "gaussian.hidden": (64, 64), "num_evals": 5, "eval_envs": 128,
    },
})


# The diffusion members of the family reuse REPPO's recipe (their papers' backbone) and
# change only the actor. Per family: the policy-config prefix, what replaces the
# Gaussian actor's widths, and the family's own overrides.
# Entropy targets H* = mult * d, one sign convention for every algorithm (--reppo.entropy-target-mult,
# --adjoint.entropy-target-mult). The references' values:
REPPO_ENTROPY_TARGET_MULT = -0.5  # REPPO: H* = -0.5 d (the Gaussian's entropy)
TRUDI_ENTROPY_TARGET_MULT = -4.0  # TruDi (REPPO-DIME reference): -4 d in the units of DIME's bound
AMDP_ENTROPY_TARGET_MULT = -3.5  # AMDP: H* = -3.5 d (its control-cost bound)

_DIFFUSION_FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    # TruDi: DIME chain, entropy target -4 d in the units of DIME's bound (reference
    # REPPO-DIME), wider critic support for the bound's larger soft-reward terms.
    "trudi": ("diffusion", {"reppo.entropy_target_mult": TRUDI_ENTROPY_TARGET_MULT}),
    # On-policy DIME: TruDi's chain, loss and entropy target, the trust region on the action
    # marginals only (TruDi's ablation; --diffusion.trust-region none is plain DIME). K = 8 end
    # points per state: the unbiased action-KL estimate (dis_chain.moment_matched_kl) needs K >= 6
    # for a finite variance; at 8 its per-state standard deviation is 0.82x a pure mean shift's KL.
    "dime": ("diffusion", {"reppo.entropy_target_mult": TRUDI_ENTROPY_TARGET_MULT,
                           "diffusion.trust_region": "action", "diffusion.kl_samples": 8}),
    # AMDP: the entropy target lives in the adjoint config (-3.5 d); the drift trust region
    # replaces the KL bound.
    "amdp": ("adjoint", {}),
    # The reverse-KL baseline on AMDP's process: same target as AMDP.
    "amdp-backprop": ("adjoint", {"reppo.entropy_target_mult": AMDP_ENTROPY_TARGET_MULT}),
}


DIME_CHAIN_FAMILIES = ("trudi", "dime")
"""The families on DIME's chain and loss (their tuned settings below apply to both)."""


def _diffusion_variant(family: str, base: dict[str, Any], cpu: bool) -> dict[str, Any]:
    prefix, extra = _DIFFUSION_FAMILIES[family]
    out = {k: v for k, v in base.items() if not k.startswith("gaussian.")}
    out.update({"algo": family, **extra})
    # A REPPO preset that widens the policy (entropy target above the reference's -0.5 d, as
    # the CPU presets do) widens the diffusion policies by the same nats per action dim, in
    # their own entropy units (the bounds differ from the Gaussian's exact entropy by an
    # offset, so the shift, not the value, is what carries over).
    widen = base.get("reppo.entropy_target_mult", REPPO_ENTROPY_TARGET_MULT) - REPPO_ENTROPY_TARGET_MULT
    if widen and family == "amdp":
        out["adjoint.entropy_target_mult"] = AMDP_ENTROPY_TARGET_MULT + widen
    elif widen:
        out["reppo.entropy_target_mult"] = extra["reppo.entropy_target_mult"] + widen
    if "gaussian.hidden" in base:
        width = max(base["gaussian.hidden"])
        # On CPU the chain (N network calls per action, several paths for the KL) dominates:
        # a narrower control net and one KL path keep an iteration affordable.
        out[f"{prefix}.hidden"] = (min(width, 128),) * 2 if cpu else (256, 256, 256)
    if cpu and family == "trudi":
        out["diffusion.kl_samples"] = 1
    if family in DIME_CHAIN_FAMILIES and base.get("critic.vmax") == 150.0:
        out.update({"critic.vmin": -100.0, "critic.vmax": 200.0, "critic.num_bins": 301})
    # REPPO's KL-dual settings do not exist in the algorithm (refused if set: algos.UNUSED_SETTINGS).
    return {k: v for k, v in out.items() if k not in UNUSED_SETTINGS.get(family, {})}


for _family in _DIFFUSION_FAMILIES:
    for _name in ("dmc-small", "dmc-medium", "dmc-large", "humanoid-small", "humanoid-large", "maniskill",
                  "dmc-cpu", "humanoid-cpu", "locomotion-cpu", "maniskill-cpu", "gymnax", "toy", "bandit"):
        _cpu = _name in ("dmc-cpu", "humanoid-cpu", "locomotion-cpu", "maniskill-cpu", "gymnax", "toy", "bandit")
        PRESETS[f"{_family}-{_name}"] = _diffusion_variant(_family, PRESETS[f"reppo-{_name}"], _cpu)

# The bandit's optimum has two narrow peaks (std ~0.03 at +-0.5). Under tanh the DIME prior
# N(0, 2.5^2) starts saturated (most actions near +-1) and the chain must both pull that mass in
# and contract it to x-widths of ~0.04; under erf(x / (sqrt(2) 2.5)) the prior maps to Uniform(-1, 1)
# and a peak is 3x wider in x. Measured on the state-free fixed-point objective (1500 Adam steps,
# tests/test_trudi_fixed_point.py): total variation to exp(Q / alpha) 0.37 with tanh, 0.13 with
# erf; in RL at 30k steps, reversal-ode (then named "ode") mode_reached 0.4-0.5 (uniform's
# level) with tanh, 0.95 with erf.
for _family in DIME_CHAIN_FAMILIES:
    PRESETS[f"{_family}-bandit"]["diffusion.squash"] = "erf"

# TruDi on Playground DM Control (CPU): critic step 1e-3, not the family's 2e-3. Measured on
# CartpoleBalance, 8 seeds, 245,760 steps (benchmarks/results/stability/): seeds falling more than
# 0.2 of the random-to-maximum range below their best in the last third: 3/8 before the stability
# fix (critic 3e-4, beta from 0.01), 7/8 with critic 2e-3 (it learns faster, median 967 at 102k
# steps, but late collapses of the critic pull 4 seeds to 260-520 by the end), 1/8 with 1e-3
# (final median 0.97 of the range; slower start: median ~620 at 102k, 975 at 143k).
for _family in DIME_CHAIN_FAMILIES:
    PRESETS[f"{_family}-dmc-cpu"]["reppo.critic_lr"] = 1e-3
# ... and the reference's entropy target -4 d, not the family's widened -3 d (REPPO's CPU preset
# widens its Gaussian by +1 d, and the diffusion variants inherit that shift). Same task and budget,
# two 8-seed runs (seeds 0-7 and 8-15, stability/cartpole_balance_trudi_entropy_target_-4*): 0 of 16
# seeds fell more than 0.2 below their best in the last third (largest drops 0.050 and 0.033; -3 d:
# 1 of 8, 0.50), final medians 0.984 and 0.983 of the range (-3 d: 0.967). With -3 d the temperature
# climbed 3-5x higher; the dual then weighted the entropy bound, whose estimate is noisy, against Q.
for _family in DIME_CHAIN_FAMILIES:
    PRESETS[f"{_family}-dmc-cpu"]["reppo.entropy_target_mult"] = TRUDI_ENTROPY_TARGET_MULT

# SPO (Xie et al. 2025) reads PPO's settings and replaces only the surrogate; its paper keeps
# PPO's hyperparameters (eps = the clip range), so every PPO preset has an SPO twin.
_PPO_PRESETS = [name for name in PRESETS if name.startswith("ppo-")]
PRESETS.update({f"spo-{name[len('ppo-'):]}": {**PRESETS[name], "algo": "spo"} for name in _PPO_PRESETS})

# FPO (McAllister et al. 2025, code github.com/akanazawa/fpo, playground FpoConfig): PPO's recipe for the
# family with the flow policy instead of the Gaussian (its own flow.* defaults are FPO's code's: the 4 x 32
# velocity net, 10 Euler steps, 8 draws, the averaged ratio, the (1 - t)^2 loss weight of its
# u_but_supervise_as_eps mode, t ~ U[0, 1)), no entropy bonus (a flow has no entropy to reward) and its
# clip range 0.05. The rest is the family's PPO recipe: on Playground DM Control (fpo-dmc) brax-PPO's,
# which FPO's code also starts from, with FPO's step size 3e-4 (brax-PPO's there: 1e-3). FPO's value
# loss 0.25 mean (V - R)^2 is PPO's 0.5 x 0.5 mean (V - R)^2 here. Not FPO's: the global gradient-norm
# clip (FPO's code clips nothing) and, on the CPU presets, the family's sizes and step size.
# A guard FPO's code lacks: each log ratio clamped to [-20, 20] (exp overflows float32 past 88; one
# Pendulum seed of four reached a non-finite gradient at 323k steps without it, in a run that scaled the
# velocity output's initial kernel by 0.25 instead of multiplying the output); e^20 is far outside
# every clip range, so the clamp changes nothing short of an overflow.
FPO_LOG_RATIO_GUARD = 20.0
PRESETS.update({
    f"fpo-{name[len('ppo-'):]}": {**{k: v for k, v in PRESETS[name].items() if not k.startswith("gaussian.")},
                                  "algo": "fpo", "ppo.ent_coef": 0.0, "ppo.clip_eps": 0.05,
                                  "ppo.log_ratio_clip": FPO_LOG_RATIO_GUARD}
    for name in _PPO_PRESETS})
PRESETS["fpo-dmc"]["ppo.learning_rate"] = 3e-4

# FPO++ (Yi, Choi et al., "Flow Policy Gradients for Robot Control", code github.com/amazon-far/fpo-control):
# FPO's presets with one ratio per draw, each draw's log ratio clamped (to [-3, 3], the clamp FPO's code
# applies in its per-draw mode; FPO++'s own per-task values are not reproduced here) and the asymmetric
# ASPO surrogate (the algorithm), with FPO's loss weighting and time sampling.
FPO_PP_LOG_RATIO_CLIP = 3.0
_FPO_PRESETS = [name for name in PRESETS if name.startswith("fpo-")]
PRESETS.update({
    f"fpo++-{name[len('fpo-'):]}": {**PRESETS[name], "algo": "fpo++", "flow.ratio": "per_sample",
                                    "ppo.log_ratio_clip": FPO_PP_LOG_RATIO_CLIP}
    for name in _FPO_PRESETS})

# DPPO (Ren et al. 2024) from scratch: PPO's recipe for the family with the DIME chain as the policy
# (its control net as wide as the family's Gaussian), DPPO's floor 0.1 on the denoising noise and
# denoising discount 0.99, the erf squash (the prior maps to uniform actions, where tanh would start
# saturated) and no entropy bonus (the chain's entropy is not computed).
PRESETS.update({
    f"dppo-{name[len('ppo-'):]}": {
        **{k: v for k, v in PRESETS[name].items() if not k.startswith("gaussian.")},
        "algo": "dppo", "ppo.ent_coef": 0.0, "diffusion.hidden": PRESETS[name].get("gaussian.hidden", (64, 64)),
        "diffusion.step_std_min": 0.1, "diffusion.denoising_discount": 0.99, "diffusion.squash": "erf"}
    for name in _PPO_PRESETS})

# AMDP on Playground DM Control (CPU): a smooth bound of 4 on each coordinate of the control f
# (adjoint.control_bound; the analogue of a Gaussian policy's log-std floor). Without it, on
# CartpoleBalance (8 seeds, 245,760 steps, benchmarks/results/stability/) 1 of 8 seeds fell (by 1.12
# of the random-to-maximum range; 2 of 8 with critic step 1e-3): in ~1 % of states the drift at the
# first steps (sigma_0 = 6.5) reached |f| ~ 10, pushing X_1 to -10 (5 terminal stds, deep in the erf's
# saturation, where the score and so the regression's pull vanish) at a control cost C ~ 300 against a
# median of 4; the soft targets' -alpha C then broke the critic (squared TD error 1e-3 -> 1e5) and the
# drift ran away. With the bound C < ~44 per action dimension, every action stays reachable
# (|mean X_1| up to 16), and 0 of 8 seeds fell (largest drop 0.013; final median 0.986 [0.985, 0.991]).
PRESETS["amdp-dmc-cpu"]["adjoint.control_bound"] = 4.0


# The off-policy family (sac, dime-off, amdp-off) owns its presets (diffrl.algos.offpolicy_presets).
PRESETS.update(off_policy_presets())


def suite(env: str) -> str:
    return env.split("/", 1)[0] if "/" in env else ""


HUMANOID_TASKS = frozenset({
    "G1JoystickFlatTerrain", "G1JoystickRoughTerrain", "T1JoystickFlatTerrain", "T1JoystickRoughTerrain",
    "ApolloJoystickFlatTerrain", "BerkeleyHumanoidJoystickFlatTerrain", "BerkeleyHumanoidJoystickRoughTerrain",
})
"""Playground humanoid joystick tasks with a privileged observation and random pushes (the
*-humanoid-* presets' settings apply to them)."""


def family(env: str) -> str:
    """The preset family of an env name: its suite, except that Playground locomotion tasks
    are "humanoid" (:data:`HUMANOID_TASKS`) or "locomotion" (the others)."""
    from diffrl.envs.playground import LOCOMOTION_ENVS

    s = suite(env)
    task = env.split("/", 1)[-1]
    if s == "playground" and task in LOCOMOTION_ENVS:
        return "humanoid" if task in HUMANOID_TASKS else "locomotion"
    return s


BANDITS = frozenset({"toy/BimodalBandit", "toy/CornerBandit"})
"""One-step toy bandits with rewards in [0, 1]: the max-entropy algorithms default to *-bandit."""


def default_preset(algo: str, env: str) -> str | None:
    """Tuned defaults chosen by algorithm and environment family (CPU-sized for Playground:
    pick the paper-scale ``*-humanoid-small``/``ppo-humanoid`` etc. with --preset on GPUs)."""
    if env in BANDITS and (algo == "reppo" or algo in _DIFFUSION_FAMILIES):
        return f"{algo}-bandit"
    s = family(env)
    if algo in OFF_POLICY_ALGOS:
        return default_off_policy_preset(algo, s)
    table = {
        ("ppo", "playground"): "ppo-dmc-cpu",
        ("ppo", "brax"): "ppo-brax",
        ("ppo", "gymnax"): "ppo-gymnax",
        ("ppo", "toy"): "ppo-toy",
        ("reppo", "playground"): "reppo-dmc-cpu",
        ("reppo", "brax"): "reppo-dmc-cpu",
        # dm_control's own suite (host environments): the same tasks as Playground's DM Control port
        ("ppo", "dmc"): "ppo-dmc-cpu",
        ("reppo", "dmc"): "reppo-dmc-cpu",
        # gymnasium's MuJoCo tasks (host environments): the CPU-sized MuJoCo-control presets
        ("ppo", "gym"): "ppo-dmc-cpu",
        ("reppo", "gym"): "reppo-dmc-cpu",
        # ManiSkill3's CPU backend (host environments): 32 envs, 50-step episodes
        ("ppo", "maniskill"): "ppo-maniskill-cpu",
        ("reppo", "maniskill"): "reppo-maniskill-cpu",
        ("reppo", "gymnax"): "reppo-gymnax",
        ("reppo", "toy"): "reppo-toy",
        ("ppo", "humanoid"): "ppo-humanoid-cpu",
        ("reppo", "humanoid"): "reppo-humanoid-cpu",
        ("ppo", "locomotion"): "ppo-locomotion-cpu",
        ("reppo", "locomotion"): "reppo-locomotion-cpu",
    }
    if algo in ("spo", "fpo", "fpo++", "dppo"):  # PPO's family presets, each with its own twin
        ppo = table.get(("ppo", s))
        return ppo.replace("ppo-", f"{algo}-", 1) if ppo else None
    if (algo, s) not in table and algo in _DIFFUSION_FAMILIES:
        reppo = table.get(("reppo", s))
        return reppo.replace("reppo-", f"{algo}-", 1) if reppo else None
    return table.get((algo, s))


def _set(config: Any, dotted: str, value: Any) -> Any:
    """A preset's setting, typed like every other override (:func:`diffrl.overrides.set_field`)."""
    from diffrl.overrides import set_field

    return set_field(config, dotted, value, source="preset")


def apply_preset(config: TrainConfig, name: str) -> TrainConfig:
    if name not in PRESETS:
        import difflib

        near = difflib.get_close_matches(name, list(PRESETS), n=3, cutoff=0.4)
        hint = f" did you mean {', '.join(near)}?" if near else ""
        raise ConfigError(f"unknown preset {name!r};{hint} available: {', '.join(sorted(PRESETS))}")
    for key, value in PRESETS[name].items():
        config = _set(config, key, value)
    return dataclasses.replace(config, preset=name)


def resolve(algo: str, env: str, preset: str | None) -> TrainConfig:
    """Defaults for (algo, env): the named preset, else the tuned default, else plain defaults."""
    from diffrl.config import config_type

    config = config_type(algo)(algo=algo, env=env)
    name = preset or default_preset(algo, env)
    if name is not None:
        config = apply_preset(config, name)
        if config.algo != algo:
            raise ConfigError(f"preset {name!r} is for --algo {config.algo}, not {algo}")
    return config
