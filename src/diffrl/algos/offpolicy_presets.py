"""Presets of the off-policy family (sac, dime-off, amdp-off), registered in ``diffrl.config.presets``.

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

from diffrl.algos.preset import EVERY_OTHER_FAMILY, Preset, measured, twin

OFF_POLICY_ALGOS = ("sac", "dime-off", "amdp-off")

DIME = "DIME (Celik et al. 2025, arXiv 2502.02316; github.com/ALRhub/DIME, configs/)"
SAC = ("SAC (Haarnoja et al. 2018, arXiv 1812.05905, Table 1 and Alg. 1): scalar ReLU-MLP critics on the "
       "squared TD error, target critics Polyak-averaged at tau = 0.005, the minimum of two, Adam (beta1 0.9, no "
       "gradient clipping), actor and temperature stepped with every critic step")
CPU_SCALE = measured("dime-off-dmc-cpu", "CPU scale: narrower critics, smaller buffer and batch, UTD 0.5")
ENT_START = measured("dime-off-dmc-cpu", "the temperature from 0.1")
CPU_DELAY = ("diffrl: the actor every 2nd critic step at CPU scale (an iteration's 32 critic steps must be a "
             "multiple of the delay; 2 is the divisor nearest DIME's 3)")
AMDP_OFF = "AMDP's off-policy setting (arXiv 2606.22630): reciprocal adjoint matching on replayed terminal actions"
AMDP_OFF_DELAY = measured("amdp-off-dmc-cpu", "the actor after every critic step")
AMDP_OFF_BOUND = measured("amdp-off-dmc-cpu", "a bound of 4 on the control")

GYMNAX_SCALE = {
    measured("dime-off-dmc-cpu", "gymnax classic control: a smaller buffer, critics and support for Pendulum-v1"): {
        "total_env_steps": 20_480, "num_evals": 5, "reward_scale": 0.1, "offpolicy.buffer_size": 50_000,
        "offpolicy.learning_starts": 1_024, "offpolicy.critic_hidden": (128, 128), "offpolicy.num_bins": 51,
        "offpolicy.vmin": -100.0, "offpolicy.vmax": 20.0, "offpolicy.renorm_warmup": 2_000},
}
"""What the gymnax presets change from the CPU scale of their algorithm."""

_SMALL_ACTOR = "diffrl: a 2 x 64 actor for gymnax classic control"

DIME_OFF_PRESETS = (
    Preset("dime-off-dmc", "DIME's off-policy recipe on DM Control at its scale (1M steps; the family's root)",
           settings={
               f"{DIME}: 1M env steps, buffer 1M, batch 256, UTD 2, 5,000 transitions before learning, two "
               "categorical critics of width 2048, no observation normalisation (the critics batch-renormalise)": {
                   "algo": "dime-off", "normalize_obs": False, "offpolicy.critic": "categorical",
                   "total_env_steps": 1_000_000, "offpolicy.buffer_size": 1_000_000, "offpolicy.batch_size": 256,
                   "offpolicy.utd": 2.0, "offpolicy.learning_starts": 5_000, "offpolicy.critic_hidden": (2048, 2048)},
               "diffrl: 24 environments step in parallel (DIME steps one; the same update-to-data ratio), "
               "20 evaluations": {"num_envs": 24, "num_steps": 1, "num_evals": 20},
               f"{DIME}: 16 denoising steps; diffrl: a 3 x 256 control net": {
                   "diffusion.num_steps": 16, "diffusion.hidden": (256, 256, 256)},
               f"{DIME}, configs/base.yaml: the base step dt learned from 0.1 (dt 0.1, learn_dt true)": {
                   "diffusion.learn_dt": True, "diffusion.dt_init": 0.1}}),
    Preset("dime-off-dmc-cpu", "dime-off-dmc sized for 2 CPU cores", base="dime-off-dmc",
           default_for=(EVERY_OTHER_FAMILY,), settings={
               CPU_SCALE: {
                   "total_env_steps": 49_152, "num_envs": 16, "num_steps": 4, "num_evals": 6,
                   "offpolicy.buffer_size": 100_000, "offpolicy.batch_size": 128, "offpolicy.utd": 0.5,
                   "offpolicy.learning_starts": 2_048, "offpolicy.critic_hidden": (256, 256),
                   "offpolicy.renorm_warmup": 5_000},
               ENT_START: {"offpolicy.ent_start": 0.1},
               "diffrl: an 8-step chain, 2 x 128 (the chain's cost)": {
                   "diffusion.num_steps": 8, "diffusion.hidden": (128, 128)},
               CPU_DELAY: {"offpolicy.policy_delay": 2}}),
    Preset("dime-off-gymnax", "dime-off-dmc-cpu on gymnax classic control", base="dime-off-dmc-cpu",
           default_for=("gymnax",), settings={**GYMNAX_SCALE, _SMALL_ACTOR: {"diffusion.hidden": (64, 64)}}),
)

_SAC_CRITIC = {
    "offpolicy.critic": "scalar", "offpolicy.critic_norm": "none", "offpolicy.target_networks": True,
    "offpolicy.target_tau": 0.005, "offpolicy.ensemble_reduce": "min", "offpolicy.adam_b1": 0.9,
    "offpolicy.actor_clip": 0.0, "offpolicy.policy_delay": 1, "gaussian.act": "relu"}

SAC_PRESETS = (
    twin(DIME_OFF_PRESETS[0], "sac-dmc", "SAC as published, at DIME's scale", {
        SAC: {"algo": "sac", **_SAC_CRITIC},
        f"{SAC}: widths 256 x 256, one gradient step per transition, temperature step 3e-4": {
            "offpolicy.critic_hidden": (256, 256), "offpolicy.utd": 1.0, "offpolicy.alpha_lr": 3e-4,
            "gaussian.hidden": (256, 256)},
        "diffrl: the Gaussian as a plain MLP": {"gaussian.norm": "none"}}),
    twin(DIME_OFF_PRESETS[1], "sac-dmc-cpu", "SAC as published, at the family's CPU scale", {
        SAC: {"algo": "sac", **_SAC_CRITIC},
        "diffrl: a 2 x 128 Gaussian, a plain MLP, at CPU scale": {
            "gaussian.hidden": (128, 128), "gaussian.norm": "none"}}),
    Preset("sac-gymnax", "sac-dmc-cpu on gymnax classic control", base="sac-dmc-cpu", default_for=("gymnax",),
           settings={**GYMNAX_SCALE, _SMALL_ACTOR: {"gaussian.hidden": (64, 64)}}),
)

AMDP_OFF_PRESETS = (
    twin(DIME_OFF_PRESETS[0], "amdp-off-dmc", "AMDP off-policy at DIME's scale", {
        f"{AMDP_OFF}; diffrl: a 16-step chain, a 3 x 256 control net": {
            "algo": "amdp-off", "adjoint.num_steps": 16, "adjoint.hidden": (256, 256, 256)},
        AMDP_OFF_DELAY: {"offpolicy.policy_delay": 1}}),
    twin(DIME_OFF_PRESETS[1], "amdp-off-dmc-cpu", "AMDP off-policy at the family's CPU scale", {
        f"{AMDP_OFF}; diffrl: a 16-step chain, a 2 x 128 control net": {
            "algo": "amdp-off", "adjoint.num_steps": 16, "adjoint.hidden": (128, 128)},
        AMDP_OFF_DELAY: {"offpolicy.policy_delay": 1},
        AMDP_OFF_BOUND: {"adjoint.control_bound": 4.0}}),
    Preset("amdp-off-gymnax", "amdp-off-dmc-cpu on gymnax classic control", base="amdp-off-dmc-cpu",
           default_for=("gymnax",), settings={**GYMNAX_SCALE, _SMALL_ACTOR: {"adjoint.hidden": (64, 64)}}),
)

PRESETS = SAC_PRESETS + DIME_OFF_PRESETS + AMDP_OFF_PRESETS
"""Every preset of the off-policy family."""
