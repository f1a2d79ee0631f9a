"""Presets of REPPO (registered in ``algos/reppo.py``), the backbone of the max-entropy family.

Paper scale follows REPPO's reference code (Voelcker et al. 2025, arXiv 2507.11019; code
github.com/cvoelcker/reppo, ``config/reppo.yaml`` with its experiment and environment overrides):
DM Control at three batch sizes (``reppo-dmc-small``/``-medium``/``-large``), the Playground G1/T1
joystick tasks (``reppo-humanoid-*``) and ManiSkill3 (``reppo-maniskill``). 50M env steps is REPPO's
``total_time_steps`` and the budget of TruDi's humanoid results (Le et al. 2026, arXiv 2606.15260).

The CPU presets are diffrl's own, sized for 2 cores; what they change from the reference and why was
measured (docs/learning-evidence.md, under each preset's name). TruDi, DIME, AMDP and AMDP's
reverse-KL baseline reuse REPPO's recipe, their papers' backbone, and change only the actor: each has
one preset on each REPPO preset of :data:`ACTOR_SWAP_SCALES` (``trudi_presets.py``, ``amdp_presets.py``),
built with the helpers below.
"""
from __future__ import annotations

from typing import Any

from diffrl.algos.preset import Preset, measured, resolve_values

REPPO = "REPPO's reference code (arXiv 2507.11019; github.com/cvoelcker/reppo)"

REPPO_ENTROPY_TARGET_MULT = -0.5
"""REPPO's entropy target H* = -0.5 d (the Gaussian's entropy; config/reppo.yaml ent_target_mult 0.5)."""

HUMANOID_TASK_SETUP = {
    f"{REPPO}, config/env/mjx_humanoid: asymmetric_obs true (the critic reads privileged_state), "
    "push_distractions false": {"asymmetric_critic": True, "env_overrides": ("push_config.enable=false",)},
}
"""The Playground humanoid joystick tasks as REPPO trained them (also PPO's humanoid presets)."""

SMALL_BATCH_STABILITY = {
    measured("small-batch-stability", "the KL multiplier from 1, critic step 2e-3"): {
        "reppo.kl_start": 1.0, "reppo.critic_lr": 2e-3},
}
"""The two settings that keep small-batch runs (32 envs x 32 steps) from collapsing."""

_CPU_SIZES = "diffrl: sized for 2 CPU cores"
_TWENTY_EVALS = {"diffrl: 20 evaluations over a run": {"num_evals": 20}}

REPPO_PRESETS = (
    Preset("reppo-dmc-small", "REPPO's DM Control recipe with its small batch (1024 envs x 32 steps), 50M steps",
           settings={
               f"{REPPO}, config/reppo.yaml with experiment_overrides/mjx_dmc_small: 1024 envs x 32 steps, "
               "16 minibatches x 8 epochs, KL bound 0.1, 50M steps": {
                   "algo": "reppo", "total_env_steps": 50_000_000, "num_envs": 1024, "num_steps": 32,
                   "reppo.num_minibatches": 16, "reppo.num_epochs": 8, "reppo.kl_bound": 0.1},
               f"{REPPO}: RMSNorm networks (critic 512 wide, policy 3 x 512), DM Control critic support [0, 150]": {
                   "critic.vmin": 0.0, "critic.vmax": 150.0, "critic.hidden": 512, "critic.norm": "rms",
                   "gaussian.hidden": (512, 512, 512), "gaussian.norm": "rms"},
               **_TWENTY_EVALS}),
    Preset("reppo-dmc-medium", "reppo-dmc-small with REPPO's medium batch (1024 envs x 64 steps)",
           base="reppo-dmc-small", settings={
               f"{REPPO}, mjx_dmc medium data: 1024 envs x 64 steps, 32 minibatches": {
                   "num_steps": 64, "reppo.num_minibatches": 32}}),
    Preset("reppo-dmc-large", "reppo-dmc-small with REPPO's large batch (1024 envs x 128 steps)",
           base="reppo-dmc-small", settings={
               f"{REPPO}, experiment_overrides/mjx_dmc_large: 1024 envs x 128 steps, 64 minibatches": {
                   "num_steps": 128, "reppo.num_minibatches": 64}}),
    Preset("reppo-humanoid-small", "REPPO on the Playground G1/T1 joystick tasks, small batch (the budget of "
           "TruDi's humanoid results, arXiv 2606.15260)", base="reppo-dmc-small", settings={
               f"{REPPO}, experiment_overrides/mjx_humanoid_*: gamma 0.97, critic width 1024, 4 minibatches": {
                   "reppo.num_minibatches": 4, "reppo.gamma": 0.97, "critic.hidden": 1024},
               f"{REPPO}, config/env/mjx_humanoid: critic support [-10, 10]": {
                   "critic.vmin": -10.0, "critic.vmax": 10.0},
               **HUMANOID_TASK_SETUP}),
    Preset("reppo-humanoid-large", "reppo-humanoid-small with REPPO's large batch (1024 envs x 128 steps)",
           base="reppo-humanoid-small", settings={
               f"{REPPO}, experiment_overrides/mjx_humanoid_large: 1024 envs x 128 steps, 16 minibatches": {
                   "num_steps": 128, "reppo.num_minibatches": 16}}),
    Preset("reppo-dmc-cpu", "REPPO on DM Control sized for 2 CPU cores: small batches, many SGD steps per "
           "sample, a wider policy", default_for=("playground", "brax", "dmc", "gym"), settings={
               f"{_CPU_SIZES}: 32 envs x 32 steps, 8 epochs x 16 minibatches of 64, 256-wide networks, 1M steps": {
                   "algo": "reppo", "total_env_steps": 1_000_000, "num_envs": 32, "num_steps": 32,
                   "reppo.num_minibatches": 16, "reppo.num_epochs": 8, "critic.hidden": 256, "critic.norm": "rms",
                   "gaussian.hidden": (256, 256), "gaussian.norm": "rms", "num_evals": 10},
               f"{REPPO}: DM Control critic support [0, 150]": {"critic.vmin": 0.0, "critic.vmax": 150.0},
               measured("reppo-dmc-cpu", "a wider policy, H* = +0.5 d"): {"reppo.entropy_target_mult": 0.5},
               **SMALL_BATCH_STABILITY,
               measured("reppo-dmc-cpu", "a floor under the KL multiplier"): {"reppo.kl_min": 0.1}}),
    Preset("reppo-dmc-cpu-reference", "reppo-dmc-cpu with the official code's update hyperparameters (a "
           "comparison: docs/learning-evidence.md#reppo-dmc-cpu-reference)", base="reppo-dmc-cpu", settings={
               f"{REPPO}, config/reppo.yaml: one step size 3e-4 for both networks, the KL multiplier from 0.01, "
               "no floor under it": {"reppo.critic_lr": 3e-4, "reppo.kl_start": 0.01, "reppo.kl_min": 0.0}}),
    Preset("reppo-maniskill-cpu", "reppo-dmc-cpu with REPPO's ManiSkill changes, on ManiSkill3's CPU scene",
           base="reppo-dmc-cpu", default_for=("maniskill",), settings={
               f"{REPPO}, config/experiments/maniskill.yaml and config/env/maniskill.yaml: gamma 0.8, TD lambda "
               "0.95, 4 epochs, critic support [-15, 15] (soft values stay within about 1 / (1 - 0.8) = 5 for "
               "rewards in [0, 1]), 50-step episodes": {
                   "reppo.gamma": 0.8, "reppo.td_lambda": 0.95, "reppo.num_epochs": 4, "critic.vmin": -15.0,
                   "critic.vmax": 15.0, "num_steps": 50},
               "diffrl: 16 evaluation episodes": {"eval_envs": 16}}),
    Preset("reppo-maniskill", "REPPO's own ManiSkill runs on ManiSkill3's GPU scene (--maniskill-backend gpu)",
           base="reppo-dmc-large", settings={
               f"{REPPO}, config/reppo.yaml (128 minibatches) with the ManiSkill overrides (experiment_overrides/"
               "maniskill.yaml: 4 epochs, lambda 0.95; env/maniskill.yaml: support [-15, 15]) and its ManiSkill "
               "discount 1 - 10 / 50 = 0.8": {
                   "reppo.num_minibatches": 128, "reppo.gamma": 0.8, "reppo.td_lambda": 0.95,
                   "reppo.num_epochs": 4, "critic.vmin": -15.0, "critic.vmax": 15.0},
               "diffrl: ManiSkill3's GPU scene, 16 evaluation episodes": {
                   "eval_envs": 16, "maniskill_backend": "gpu"}}),
    Preset("reppo-locomotion-cpu", "smoke-test scale for Playground locomotion on 2 CPU cores (checks that it "
           "runs; it does not learn to walk)", default_for=("locomotion",), settings={
               f"{_CPU_SIZES}: a few minutes, 64 envs x 32 steps, 2 evaluations": {
                   "algo": "reppo", "total_env_steps": 131_072, "num_envs": 64, "num_steps": 32,
                   "reppo.num_minibatches": 4, "reppo.num_epochs": 2, "critic.hidden": 256, "critic.norm": "rms",
                   "gaussian.hidden": (256, 256), "gaussian.norm": "rms", "num_evals": 2, "eval_envs": 16},
               f"{REPPO}, mjx_humanoid: gamma 0.97, critic support [-10, 10]": {
                   "reppo.gamma": 0.97, "critic.vmin": -10.0, "critic.vmax": 10.0}}),
    Preset("reppo-humanoid-cpu", "reppo-locomotion-cpu on the humanoid joystick tasks, set up as REPPO trained "
           "them", base="reppo-locomotion-cpu", default_for=("humanoid",), settings=HUMANOID_TASK_SETUP),
    Preset("reppo-gymnax", "gymnax classic control on CPU: small nets, many SGD steps per sample (learns "
           "Pendulum-v1 in ~30k steps)", default_for=("gymnax",), settings={
               f"{_CPU_SIZES}: 32 envs x 32 steps, 8 epochs x 16 minibatches, small networks, 50k steps": {
                   "algo": "reppo", "total_env_steps": 50_000, "num_envs": 32, "num_steps": 32,
                   "reppo.num_minibatches": 16, "reppo.num_epochs": 8, "critic.hidden": 128,
                   "gaussian.hidden": (64, 64), "num_evals": 5},
               "diffrl: Pendulum-v1's returns (reward scale 0.1, critic support [-200, 50])": {
                   "reward_scale": 0.1, "critic.vmin": -200.0, "critic.vmax": 50.0},
               **SMALL_BATCH_STABILITY}),
    Preset("reppo-toy", "the point-mass goal tasks (toy/MirrorGoals, toy/OctahedronGoals)", default_for=("toy",),
           settings={
               f"{_CPU_SIZES}: 64 envs x 16 steps, 100k steps": {
                   "algo": "reppo", "total_env_steps": 100_000, "num_envs": 64, "num_steps": 16,
                   "reppo.num_minibatches": 8, "reppo.num_epochs": 4, "critic.hidden": 128,
                   "gaussian.hidden": (64, 64), "num_evals": 5},
               measured("reppo-toy", "gamma 0.95 and a critic support around the soft values"): {
                   "reppo.gamma": 0.95, "critic.vmin": -10.0, "critic.vmax": 30.0}}),
    Preset("reppo-bandit", "the one-step bandits (toy/BimodalBandit, toy/CornerBandit) with a fixed temperature",
           default_for=("bandit",), settings={
               "diffrl: a fixed temperature alpha = 0.1, so the max-entropy optimum exp(Q / alpha) is known": {
                   "algo": "reppo", "reppo.learn_alpha": False, "reppo.ent_start": 0.1},
               "diffrl: a critic support matched to rewards in [0, 1]": {"critic.vmin": -1.0, "critic.vmax": 2.0},
               "diffrl: more and larger steps per sample (a one-step episode carries little data)": {
                   "total_env_steps": 60_000, "num_envs": 64, "num_steps": 16, "reppo.num_minibatches": 8,
                   "reppo.num_epochs": 8, "reppo.actor_lr": 1e-3, "reppo.critic_lr": 1e-3, "critic.hidden": 128,
                   "gaussian.hidden": (64, 64), "num_evals": 5, "eval_envs": 128}}),
)

PRESETS = REPPO_PRESETS
"""Every REPPO preset."""

ACTOR_SWAP_SCALES = ("dmc-small", "dmc-medium", "dmc-large", "humanoid-small", "humanoid-large", "maniskill",
                     "dmc-cpu", "humanoid-cpu", "locomotion-cpu", "maniskill-cpu", "gymnax", "toy", "bandit")
"""The REPPO presets (``reppo-<scale>``) that TruDi, DIME, AMDP and AMDP-backprop each have a preset on."""

CPU_SCALES = frozenset({"dmc-cpu", "humanoid-cpu", "locomotion-cpu", "maniskill-cpu", "gymnax", "toy", "bandit"})
"""The scales sized for CPU, where a diffusion actor's chain dominates an iteration's cost."""

_BY_NAME = {p.name: p for p in REPPO_PRESETS}


def reppo_preset(scale: str) -> Preset:
    """REPPO's preset of a scale (``reppo-<scale>``)."""
    return _BY_NAME[f"reppo-{scale}"]


def reppo_values(scale: str) -> dict[str, Any]:
    """The values REPPO's preset of a scale resolves to (every REPPO preset is REPPO's, so its chain
    inherits everything)."""
    return resolve_values(f"reppo-{scale}", _BY_NAME, lambda algo, key: True)


def entropy_widening(scale: str) -> float:
    """How many nats per action dimension REPPO's preset of a scale widens the policy by (its entropy
    target above the reference's -0.5 d; +1 on the CPU presets, docs/learning-evidence.md#reppo-dmc-cpu).
    The diffusion actors carry the same shift in their own entropy units: their bounds differ from the
    Gaussian's exact entropy by an offset, so the shift, not the value, carries over."""
    return reppo_values(scale).get("reppo.entropy_target_mult", REPPO_ENTROPY_TARGET_MULT) - REPPO_ENTROPY_TARGET_MULT


WIDENED = "REPPO's CPU preset widens its policy by +1 d (docs/learning-evidence.md#reppo-dmc-cpu): the same shift"
"""The source of a diffusion actor's entropy target shifted by :func:`entropy_widening`."""

PAPER_ACTOR = "diffrl: a 3 x 256 control net at paper scale"
CPU_ACTOR = ("diffrl: on CPU the chain (N network calls per action) dominates an iteration's cost: a 2-layer "
             "control net as wide as REPPO's Gaussian, at most 128")


def actor_widths(scale: str) -> tuple[str, tuple[int, ...]]:
    """(source, widths) of the control net of a diffusion actor in place of REPPO's Gaussian at a scale."""
    if scale in CPU_SCALES:
        return CPU_ACTOR, (min(max(reppo_values(scale)["gaussian.hidden"]), 128),) * 2
    return PAPER_ACTOR, (256, 256, 256)
