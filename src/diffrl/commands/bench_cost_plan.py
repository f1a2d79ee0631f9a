"""What ``diffrl bench cost`` measures: the request (:class:`CostRequest`: environment, contenders, numbers of
diffusion steps N, batch, repeats), the contenders of each setting (on-policy against REPPO, off-policy
against SAC, from the algorithms' registrations) and the run config of every (contender, N)
(:func:`plan`); checked before anything compiles. The measurement itself: :mod:`diffrl.commands.bench_cost`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from diffrl.algos.registry import get, specs
from diffrl.config import ConfigError, RunConfig


def _contenders(off_policy: bool, defaults_only: bool = False) -> tuple[str, ...]:
    """Registered algorithms of one setting, in registry order (``defaults_only``: its ``cost_default`` ones)."""
    return tuple(spec.name for spec in specs()
                 if spec.off_policy == off_policy and (spec.cost_default or not defaults_only))


def _baseline(off_policy: bool) -> str:
    """The setting's baseline: its default contender that is compared with nothing else (REPPO, SAC)."""
    return next(spec.name for spec in specs()
                if spec.off_policy == off_policy and spec.cost_default and not spec.cost_baselines)


ALGOS = _contenders(off_policy=False, defaults_only=True)
"""The default contenders (each algorithm's ``cost_default``): REPPO, TruDi, AMDP and its backprop baseline."""
OFF_POLICY_ALGOS = _contenders(off_policy=True)
"""``--setting off-policy``: the replay-buffer family, SAC the baseline (the claim checked: AMDP's
off-policy update stays flat in N while DIME's reverse-KL update grows)."""
SETTINGS = {"on-policy": (_baseline(False), ALGOS),
            "off-policy": (_baseline(True), _contenders(off_policy=True, defaults_only=True))}
"""setting -> (baseline of every ratio, default contenders)."""
KNOWN_ALGOS = _contenders(off_policy=False)
"""Every algorithm ``--algos`` accepts on-policy: also DIME and DPPO (N steps like TruDi), the Gaussian
PPO and SPO and the flow policies of FPO and FPO++ (no N: the same program re-timed in every group, as
REPPO). The PPO family's presets run other batches than REPPO's: pass --num-envs/--num-steps."""
BASELINE = SETTINGS["on-policy"][0]


def steps_section(algo: str) -> str | None:
    """The config section holding ``algo``'s number of denoising steps N (``<section>.num_steps``:
    its record's ``diffusion_steps``), None for an algorithm without a chain."""
    field_name = get(algo).diffusion_steps
    return field_name.split(".")[0] if field_name else None


FLAG_OWNED = {"algo", "env", "num_envs", "num_steps"} | {spec.diffusion_steps for spec in specs()
                                                         if spec.diffusion_steps}


@dataclass(frozen=True)
class CostRequest:
    env: str
    """Environment of every contender."""
    algos: tuple[str, ...] = ALGOS
    """Contenders; REPPO (the baseline of every ratio) is always measured."""
    diffusion_steps: tuple[int, ...] = (4, 8, 16, 32, 64, 128)
    """N of the diffusion actors; one round-robin group per N."""
    num_envs: int | None = None
    """Parallel environments; None keeps each algorithm's preset (all presets of a family agree)."""
    num_steps: int | None = None
    """Rollout length per iteration; None keeps the preset's."""
    preset: str | None = None
    """Preset family (``dmc-cpu``, ``dmc-small``...): contender A uses preset ``A-<family>``;
    None picks each algorithm's default preset for the environment."""
    overrides: tuple[str, ...] = ()
    """``KEY=VALUE`` config overrides applied to every contender (dotted names reach nested configs)."""
    repeats: int = 5
    """Timed calls per contender and program (iteration, update)."""
    warmup: int = 1
    """Untimed calls per contender after compiling."""
    budget_s: float = 120.0
    """A contender stops repeating once its timed calls in a group add up to this (>= 1 call)."""
    seed: int = 0
    """PRNG seed of the initial states and the fixed rollout batch."""
    time_limit_min: float | None = None
    """No new group starts once the run has taken this long (the first always runs); skipped N are recorded."""
    memory_only: bool = False
    """Compile every program from shapes alone and record XLA's memory analysis; nothing is run
    (no parameters are allocated), so sizes far beyond this machine's memory can be measured."""
    setting: str = "on-policy"
    """on-policy (REPPO the baseline) or off-policy (SAC the baseline; dime-off, amdp-off)."""

    @property
    def baseline(self) -> str:
        return SETTINGS[self.setting][0]


def _csv(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise ConfigError(f"{what} is empty")
    return items


def parse_steps(text: str) -> tuple[int, ...]:
    out = []
    for item in _csv(text, "--diffusion-steps"):
        try:
            n = int(item)
        except ValueError:
            raise ConfigError(f"--diffusion-steps: {item!r} is not an integer") from None
        if n < 1:
            raise ConfigError(f"--diffusion-steps: N must be >= 1 (got {n})")
        out.append(n)
    return tuple(dict.fromkeys(out))


def parse_algos(text: str, setting: str = "on-policy") -> tuple[str, ...]:
    import difflib

    if setting not in SETTINGS:
        raise ConfigError(f"--setting must be one of {', '.join(SETTINGS)} (got {setting!r})")
    baseline, _ = SETTINGS[setting]
    known = KNOWN_ALGOS if setting == "on-policy" else OFF_POLICY_ALGOS
    algos = []
    for name in _csv(text, "--algos"):
        if name not in known:
            near = difflib.get_close_matches(name, known, n=2, cutoff=0.4)
            hint = f"did you mean {', '.join(near)}? " if near else ""
            raise ConfigError(f"--algos: {name!r} is not an algorithm of the {setting} setting; {hint}"
                              f"choose from {', '.join(known)}")
        algos.append(name)
    return tuple(dict.fromkeys([baseline] + algos))


def _override(config: RunConfig, item: str) -> RunConfig:
    from diffrl.config.overrides import set_field, split_override

    from diffrl.algos.registry import without_unused_settings
    from diffrl.config import as_full_config, as_run_config

    key, text = split_override(item, "--set")
    if key in FLAG_OWNED:
        raise ConfigError(f"--set {key}: use the dedicated flag (--env, --num-envs, --diffusion-steps...)")
    # set on every section, so that name and type are checked for every contender
    config = set_field(as_full_config(config), key, text, source="--set")
    # one --set list sizes every contender: a setting this one does not read (a section it does not read,
    # or a field of a shared section it ignores, e.g. TruDi's --reppo.kl-samples for REPPO) stays at its default
    return as_run_config(without_unused_settings(config)[0])


def contender_config(request: CostRequest, algo: str, n: int | None) -> RunConfig:
    """The resolved, validated training config of one contender (raises ConfigError)."""
    from diffrl.config.presets import resolve

    preset = f"{algo}-{request.preset}" if request.preset else None
    config = resolve(algo, request.env, preset)
    for item in request.overrides:
        config = _override(config, item)
    changes: dict[str, Any] = {"progress": False, "tensorboard": False, "num_evals": 1, "seed": request.seed}
    if request.num_envs is not None:
        changes["num_envs"] = request.num_envs
    if request.num_steps is not None:
        changes["num_steps"] = request.num_steps
    config = config.replace(**changes)
    config = config.replace(total_env_steps=config.batch_size)  # one iteration is what is timed
    if algo in OFF_POLICY_ALGOS:  # the timed update must take its gradient steps, not wait for data
        config = config.replace(offpolicy=dataclasses.replace(config.offpolicy, learning_starts=0))
    steps_field = get(algo).diffusion_steps  # e.g. "diffusion.num_steps"; None: no chain to size
    if steps_field is not None:
        section, name = steps_field.split(".")
        config = config.replace(**{section: dataclasses.replace(getattr(config, section), **{name: n})})
    config.validate()
    return config


def plan(request: CostRequest) -> dict[tuple[str, int | None], RunConfig]:
    """Every contender's config keyed by (algo, N) (REPPO: N None); all bad input raises here."""
    from diffrl.envs import registry

    if request.env not in registry.list_envs():
        raise ConfigError(str(registry._unknown(request.env)))
    for name, value in (("--repeats", request.repeats), ("--budget-s", request.budget_s)):
        if not value > 0:
            raise ConfigError(f"{name} must be positive (got {value})")
    if request.time_limit_min is not None and request.time_limit_min < 0:
        raise ConfigError(f"--time-limit-min must be >= 0 (got {request.time_limit_min})")
    if request.warmup < 0:
        raise ConfigError(f"--warmup must be >= 0 (got {request.warmup})")
    for n in request.diffusion_steps:
        if n < 1:
            raise ConfigError(f"--diffusion-steps: N must be >= 1 (got {n})")
    baseline = request.baseline
    configs = {(baseline, None): contender_config(request, baseline, None)}
    for n in request.diffusion_steps:
        for algo in request.algos:
            if algo != baseline:
                configs[(algo, n)] = contender_config(request, algo, n)
    base = configs[(baseline, None)]
    for (algo, n), config in configs.items():
        if (config.num_envs, config.num_steps) != (base.num_envs, base.num_steps):
            raise ConfigError(f"{algo} runs {config.num_envs} x {config.num_steps} but {baseline} "
                              f"{base.num_envs} x {base.num_steps}: pass --num-envs/--num-steps")
    return configs
