"""Presets of the PPO family: PPO, SPO, FPO, FPO++ and DPPO (registered in ``algos/ppo.py``).

PPO's presets follow a published configuration wherever one exists: MuJoCo Playground's brax-PPO
settings (Zakka et al. 2025, arXiv 2502.08844) for Playground's DM Control and locomotion tasks, and
ManiSkill's PPO baseline (Tao et al. 2025, arXiv 2410.00425) for ManiSkill3. The ``*-cpu``, gymnax and
toy presets are diffrl's own, sized for 2 CPU cores.

The other members of the family are twins: one on each PPO preset, the default for the same
environment families, changing only what their papers change (each value's source is in the record).

* SPO (Xie et al., ICML 2025, arXiv 2401.16025) keeps PPO's hyperparameters (its eps is the clip range).
* FPO (McAllister et al. 2025, arXiv 2507.21053; code github.com/akanazawa/fpo) drops the entropy bonus
  (a flow has no entropy to reward) and clips at 0.05; its flow settings are the ``flow`` section's
  defaults. Its value loss 0.25 mean (V - R)^2 is PPO's 0.5 x 0.5 mean (V - R)^2 here. Not FPO's: the
  global gradient-norm clip (FPO's code clips nothing), and a guard on each log ratio (|log r| <= 20,
  far outside every clip range; it changes nothing short of a float32 overflow of exp).
* FPO++ (Yi, Choi et al., "Flow Policy Gradients for Robot Control", code
  github.com/amazon-far/fpo-control) is FPO's preset with one ratio per draw, each clamped to
  [-3, 3] (the clamp of FPO's code in its per-draw mode; FPO++'s own per-task values are not
  reproduced), and ASPO, the algorithm itself.
* DPPO (Ren et al. 2024, arXiv 2409.00588) from scratch: the DIME chain as the policy, as wide as the
  family's Gaussian, DPPO's floor on the denoising noise and denoising discount, no entropy bonus (the
  chain's entropy is not computed) and the erf squash (the prior maps to uniform actions, where tanh
  would start saturated).
"""
from __future__ import annotations

from diffrl.algos.preset import Preset, measured, twin
from diffrl.algos.reppo_presets import HUMANOID_TASK_SETUP

PLAYGROUND_DMC = ("MuJoCo Playground's brax PPO for DM Control (arXiv 2502.08844; github.com/google-deepmind/"
                  "mujoco_playground, mujoco_playground/config/dm_control_suite_params.py)")
PLAYGROUND_LOCOMOTION = ("MuJoCo Playground's brax PPO for locomotion (arXiv 2502.08844; github.com/google-deepmind/"
                         "mujoco_playground, mujoco_playground/config/locomotion_params.py)")
MANISKILL_PPO = ("ManiSkill3's PPO baseline (arXiv 2410.00425; github.com/haosulab/ManiSkill, "
                 "examples/baselines/ppo/ppo.py)")

FPO_LOG_RATIO_GUARD = 20.0
"""FPO's guard on each log ratio: exp overflows float32 past 88 (see docs/learning-evidence.md#fpo)."""
FPO_PP_LOG_RATIO_CLIP = 3.0
"""FPO++'s clamp on each draw's log ratio (FPO's code's per-draw clamp)."""

_NETS_DMC = {"gaussian.hidden": (32, 32, 32, 32), "gaussian.norm": "none",
             "ppo.value_hidden": (256, 256, 256, 256, 256)}

PPO_PRESETS = (
    Preset("ppo-dmc", "Playground's tuned brax-PPO on DM Control, at its scale (60M steps, 2048 envs)", settings={
        PLAYGROUND_DMC: {
            "algo": "ppo", "total_env_steps": 60_000_000, "num_envs": 2048, "num_steps": 30, "reward_scale": 10.0,
            "ppo.learning_rate": 1e-3, "ppo.ent_coef": 1e-2, "ppo.gamma": 0.995, "ppo.num_epochs": 16,
            "ppo.num_minibatches": 32, "ppo.clip_eps": 0.3, "ppo.max_grad_norm": 1.0, **_NETS_DMC}}),
    Preset("ppo-dmc-cpu", "ppo-dmc sized for 2 CPU cores (about 10 minutes for a few million steps)",
           base="ppo-dmc", default_for=("playground", "dmc", "gym"), settings={
               "diffrl: 2 CPU cores, 256 envs x 32 steps, 4 epochs x 8 minibatches, 3M steps": {
                   "total_env_steps": 3_000_000, "num_envs": 256, "num_steps": 32, "ppo.num_epochs": 4,
                   "ppo.num_minibatches": 8}}),
    Preset("ppo-brax", "Playground's brax-PPO locomotion defaults, for brax tasks", default_for=("brax",), settings={
        PLAYGROUND_LOCOMOTION: {
            "algo": "ppo", "total_env_steps": 100_000_000, "num_envs": 2048, "num_steps": 20, "reward_scale": 1.0,
            "ppo.learning_rate": 3e-4, "ppo.ent_coef": 1e-2, "ppo.gamma": 0.97, "ppo.num_epochs": 4,
            "ppo.num_minibatches": 32, "ppo.max_grad_norm": 1.0, "gaussian.hidden": (128, 128, 128, 128),
            "gaussian.norm": "none", "ppo.value_hidden": (256, 256, 256, 256, 256)}}),
    Preset("ppo-gymnax", "gymnax classic control on CPU (Pendulum-v1 swings up within ~1M steps)",
           default_for=("gymnax",), settings={
               "diffrl: tuned on CPU for gymnax classic control": {
                   "algo": "ppo", "total_env_steps": 1_000_000, "num_envs": 64, "num_steps": 64, "reward_scale": 0.1,
                   "ppo.learning_rate": 1e-3, "ppo.ent_coef": 0.0, "ppo.gamma": 0.95, "ppo.num_epochs": 8,
                   "ppo.num_minibatches": 8, "ppo.clip_eps": 0.2, "ppo.max_grad_norm": 0.5,
                   "gaussian.hidden": (64, 64), "gaussian.norm": "none", "ppo.value_hidden": (64, 64)}}),
    Preset("ppo-toy", "the small built-in tasks (toy/*)", default_for=("toy", "bandit"), settings={
        "diffrl: sized for the built-in toy tasks on CPU": {
            "algo": "ppo", "total_env_steps": 500_000, "num_envs": 64, "num_steps": 32, "ppo.learning_rate": 1e-3,
            "ppo.ent_coef": 1e-3, "ppo.num_epochs": 4, "ppo.num_minibatches": 4, "gaussian.hidden": (64, 64),
            "gaussian.norm": "none", "ppo.value_hidden": (64, 64)}}),
    Preset("ppo-humanoid", "Playground's brax-PPO recipe for the G1/T1 joystick tasks, at its scale (200M steps)",
           settings={
               f"{PLAYGROUND_LOCOMOTION}, G1/T1 joystick": {
                   "algo": "ppo", "total_env_steps": 200_000_000, "num_envs": 8192, "num_steps": 20,
                   "reward_scale": 1.0, "ppo.learning_rate": 3e-4, "ppo.ent_coef": 5e-3, "ppo.gamma": 0.97,
                   "ppo.clip_eps": 0.2, "ppo.num_epochs": 4, "ppo.num_minibatches": 32, "ppo.max_grad_norm": 1.0,
                   "gaussian.hidden": (512, 256, 128), "gaussian.norm": "none",
                   "ppo.value_hidden": (512, 256, 128)},
               **HUMANOID_TASK_SETUP}),
    Preset("ppo-locomotion-cpu", "smoke-test scale for Playground locomotion on 2 CPU cores (checks that it runs; "
           "it does not learn to walk)", default_for=("locomotion",), settings={
               "diffrl: a few minutes on 2 CPU cores, Playground's locomotion step size, discount and clip": {
                   "algo": "ppo", "total_env_steps": 131_072, "num_envs": 64, "num_steps": 32,
                   "ppo.learning_rate": 3e-4, "ppo.ent_coef": 5e-3, "ppo.gamma": 0.97, "ppo.clip_eps": 0.2,
                   "ppo.num_epochs": 4, "ppo.num_minibatches": 4, "ppo.max_grad_norm": 1.0,
                   "gaussian.hidden": (128, 128), "gaussian.norm": "none", "ppo.value_hidden": (256, 128),
                   "num_evals": 2, "eval_envs": 16}}),
    Preset("ppo-humanoid-cpu", "ppo-locomotion-cpu on the humanoid joystick tasks, set up as REPPO trained them",
           base="ppo-locomotion-cpu", default_for=("humanoid",), settings=HUMANOID_TASK_SETUP),
    Preset("ppo-maniskill-cpu", "ManiSkill's PPO baseline on ManiSkill3's CPU scene (32 envs, one 50-step "
           "episode per env and iteration)", default_for=("maniskill",), settings={
               MANISKILL_PPO: {
                   "algo": "ppo", "num_steps": 50, "ppo.learning_rate": 3e-4, "ppo.ent_coef": 0.0, "ppo.gamma": 0.8,
                   "ppo.gae_lambda": 0.9, "ppo.num_epochs": 4, "ppo.clip_eps": 0.2, "ppo.max_grad_norm": 0.5,
                   "gaussian.hidden": (256, 256, 256), "gaussian.norm": "none", "ppo.value_hidden": (256, 256, 256)},
               "diffrl: CPU scale (32 envs instead of the baseline's 512-4096 GPU envs), 1M steps": {
                   "total_env_steps": 1_000_000, "num_envs": 32, "ppo.num_minibatches": 8, "num_evals": 10,
                   "eval_envs": 16}}),
    Preset("ppo-maniskill", "ManiSkill's PPO baseline on ManiSkill3's GPU scene (--maniskill-backend gpu)",
           base="ppo-maniskill-cpu", settings={
               f"{MANISKILL_PPO}: 512 envs, 32 minibatches, 10M steps, GPU simulation": {
                   "total_env_steps": 10_000_000, "num_envs": 512, "ppo.num_minibatches": 32,
                   "maniskill_backend": "gpu"},
               "diffrl: 20 evaluations over a run": {"num_evals": 20}}),
)
"""PPO's presets (roots of the family's twins)."""

SPO = "SPO (Xie et al., ICML 2025, arXiv 2401.16025): PPO's hyperparameters, eps = the clip range"
FPO = "FPO (McAllister et al. 2025, arXiv 2507.21053; github.com/akanazawa/fpo, playground FpoConfig)"
FPO_GUARD = measured("fpo", "a float32 overflow of exp without it")
FPO_PP = "FPO++ (Yi, Choi et al.; github.com/amazon-far/fpo-control): one ratio per draw"
FPO_PP_CLAMP = "FPO's code (github.com/akanazawa/fpo), per-draw ratio mode: each draw's log ratio clamped to [-3, 3]"
DPPO = "DPPO (Ren et al. 2024, arXiv 2409.00588): floor 0.1 on the denoising noise, denoising discount 0.99"
DPPO_FROM_SCRATCH = ("diffrl: DPPO from scratch: a control net as wide as the family's Gaussian, the erf squash "
                     "(the prior maps to uniform actions), no entropy bonus (the chain's entropy is not computed)")


def _gaussian_widths(preset: Preset) -> tuple[int, ...]:
    """The Gaussian's widths a PPO preset resolves to (its own, else its base's)."""
    by_name = {p.name: p for p in PPO_PRESETS}
    while "gaussian.hidden" not in preset.values:
        preset = by_name[preset.base]
    return preset.values["gaussian.hidden"]


def _scale(ppo: Preset) -> str:
    return ppo.name[len("ppo-"):]


SPO_PRESETS = tuple(twin(ppo, f"spo-{_scale(ppo)}", f"SPO on {ppo.name}", {SPO: {"algo": "spo"}})
                    for ppo in PPO_PRESETS)

FPO_PRESETS = tuple(
    twin(ppo, f"fpo-{_scale(ppo)}", f"FPO on {ppo.name}: the flow policy, no entropy bonus, clip 0.05", {
        FPO: {"algo": "fpo", "ppo.ent_coef": 0.0, "ppo.clip_eps": 0.05,
              # FPO's step size where its code starts from the same brax-PPO recipe (brax-PPO's: 1e-3)
              **({"ppo.learning_rate": 3e-4} if ppo.name == "ppo-dmc" else {})},
        FPO_GUARD: {"ppo.log_ratio_clip": FPO_LOG_RATIO_GUARD}})
    for ppo in PPO_PRESETS)

FPO_PP_PRESETS = tuple(
    twin(fpo, "fpo++-" + fpo.name[len("fpo-"):], f"FPO++ on {fpo.name}: per-draw clamped ratios, ASPO", {
        FPO_PP: {"algo": "fpo++", "flow.ratio": "per_sample"},
        FPO_PP_CLAMP: {"ppo.log_ratio_clip": FPO_PP_LOG_RATIO_CLIP}})
    for fpo in FPO_PRESETS)

DPPO_PRESETS = tuple(
    twin(ppo, f"dppo-{_scale(ppo)}", f"DPPO from scratch on {ppo.name}: the DIME chain as the policy", {
        DPPO: {"algo": "dppo", "diffusion.step_std_min": 0.1, "diffusion.denoising_discount": 0.99},
        DPPO_FROM_SCRATCH: {"ppo.ent_coef": 0.0, "diffusion.hidden": _gaussian_widths(ppo),
                            "diffusion.squash": "erf"}})
    for ppo in PPO_PRESETS)

PRESETS = PPO_PRESETS + SPO_PRESETS + FPO_PRESETS + FPO_PP_PRESETS + DPPO_PRESETS
"""Every preset of the PPO family."""
