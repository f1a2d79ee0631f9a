"""The run configuration: a frozen, typed dataclass exposed as the CLI.

A run's config is the run's own settings (:class:`RunConfig`: algorithm, environment, budget, run
directory, devices...) plus the config sections its algorithm reads, nested dataclasses
(``--ppo.clip-eps``, ``--gaussian.hidden``...): :func:`config_type` composes that class from the
algorithm's registration, so a run carries, parses and stores only settings that act on it.
:class:`TrainConfig` holds every shared section, for code that builds one config for any algorithm;
:func:`as_run_config` turns it into the algorithm's. Every field has a docstring (tyro turns them
into ``--help``). Derived sizes are properties, and :meth:`RunConfig.validate` rejects bad input
with a clear message before anything is compiled.

The ``config`` room also holds how a config is filled in: command-line and ``--set`` overrides
(:mod:`diffrl.config.overrides`) and the named presets (:mod:`diffrl.config.presets`).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
from dataclasses import dataclass, field
from typing import Any

from diffrl.algos.registry import (ALGORITHM_SECTIONS, CONFIG_SECTIONS, batch_section, find, unread_reason,
                                   unused_setting_errors)
from diffrl.algos.ppo_config import PPOConfig
from diffrl.algos.offpolicy_config import OffPolicyConfig
from diffrl.algos.reppo_config import REPPOConfig
from diffrl.critics.categorical import CriticConfig
from diffrl.envs.maniskill import MANISKILL_BACKENDS
from diffrl.envs.playground import PHYSICS_IMPLS
from diffrl.envs.registry import is_host_env
from diffrl.policies.adjoint import AdjointPolicyConfig
from diffrl.policies.diffusion import DiffusionPolicyConfig
from diffrl.policies.flow import FlowPolicyConfig
from diffrl.policies.gaussian import GaussianPolicyConfig


class ConfigError(ValueError):
    """A configuration that cannot run; raised before compilation."""


class _RenamedSamplers:
    """algo -> its record's ``renamed_samplers`` (``.get`` as the dict this used to be)."""

    def get(self, algo: str, default=None):
        spec = find(algo)
        return dict(spec.renamed_samplers) if spec is not None else default


RENAMED_EVAL_SAMPLERS = _RenamedSamplers()
"""algo -> {retired sampler name: current name} (each algorithm's ``renamed_samplers``). Typed names
are refused (``core.build``, naming the new one); names stored in older run directories are mapped
when loaded (``core.run_dir.load_run_config``)."""


@dataclass(frozen=True)
class RunConfig:
    """The run's own settings: what to train on, for how long, where to write it, on which devices.

    A run's config is one of these plus the config sections its algorithm reads
    (:func:`config_type`); :class:`TrainConfig` holds every shared section."""

    algo: str = "ppo"
    """Algorithm: one of `diffrl.algos.ALGORITHMS` (ppo, reppo, trudi, amdp, spo, dime, fpo, ...)."""
    env: str = "playground/CartpoleSwingup"
    """Environment name, e.g. playground/CartpoleSwingup, brax/ant, gymnax/Pendulum-v1, toy/MirrorGoals."""
    preset: str | None = None
    """Named preset of tuned settings (see `diffrl presets`); None picks one by algo and env."""
    total_env_steps: int = 2_000_000
    """Environment steps to train for (summed over parallel envs; per seed)."""
    num_envs: int = 256
    """Parallel environments per seed."""
    num_steps: int = 32
    """Rollout length per environment per iteration (T)."""
    seed: int = 0
    """Base random seed; seed i of --num-seeds uses fold_in(PRNGKey(seed), i)."""
    num_seeds: int = 1
    """Independent seeds trained together in one program (vmapped)."""
    out: str | None = None
    """Run directory; default runs/<env>-<algo>-<timestamp>."""
    num_evals: int = 10
    """Evaluations (and log points) over the run; training runs in this many compiled chunks."""
    eval_envs: int = 32
    """Parallel episodes per evaluation."""
    eval_samplers: tuple[str, ...] = ()
    """Evaluation samplers to report (policy-specific: mean, sde, ode, best-of-k...); empty = the policy's default."""
    episode_length: int | None = None
    """Time limit (truncation); None uses the environment's own."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this for learning (returns are reported unscaled)."""
    normalize_obs: bool = True
    """Running mean/std observation normalisation (statistics live in the train state)."""
    obs_clip: float = 10.0
    """Normalised observations are clipped to +-obs_clip."""
    obs_norm_eps: float = 1e-2
    """Added to the running variance before dividing (REPPO's NormalizeVec uses 1e-2): keeps
    features that barely vary at the start (e.g. an upright pole's cosine) from exploding."""
    env_backend: str = "generalized"
    """Physics backend for brax/* environments (generalized, positional, spring, mjx)."""
    physics_impl: str = "jax"
    """MJX implementation for playground/* tasks: jax (default: runs on CPU, GPU and TPU, what the
    REPPO reference results used, 2-150x faster than Warp on CPUs) or warp (Playground 0.2.0's own
    default; needs the warp-lang package, which diffrl does not install)."""
    host_workers: int = 2
    """Worker processes that step host environments (dmc/*, gym/*, maniskill/*: simulators stepped
    outside JAX, see docs/environments.md); each steps a contiguous slice of the batch. 0 steps them in
    the training process. Ignored by JAX environments."""
    maniskill_backend: str = "auto"
    """How maniskill/* tasks are simulated: workers (SAPIEN's CPU PhysX, one env per copy
    in --host-workers processes), gpu (ManiSkill's PhysX GPU scene: every env of a batch in
    this process, arrays passed to JAX through DLPack; needs torch and JAX with CUDA, one
    device) or auto (gpu where both see a CUDA GPU and the run uses one device, else
    workers). Ignored by other environments."""
    env_overrides: tuple[str, ...] = ()
    """Playground task config overrides, KEY=VALUE with dotted keys and VALUE read as JSON
    (e.g. push_config.enable=false); the *-humanoid-* presets turn off random pushes, as REPPO did."""
    asymmetric_critic: bool = False
    """Give the critic (PPO's value, the soft Q critic) the task's privileged observation while the
    policy sees only the actor observation (playground locomotion tasks with privileged_state,
    e.g. G1/T1 joystick); an error for tasks without one."""
    check_finite: bool = True
    """Stop with a report when a loss, gradient or observation becomes NaN/inf."""
    tensorboard: bool = True
    """Write TensorBoard event files into the run directory."""
    wandb: bool = False
    """Log to Weights & Biases (needs the `wandb` package and a login)."""
    progress: bool = True
    """Show a live progress bar."""
    checkpoint_every: int = 1
    """Write a checkpoint every this many chunks (and at the end); 0 disables."""
    keep_checkpoints: int = 3
    """Checkpoints kept (the newest ones, plus the best by evaluation return)."""
    chunk_iterations: int | None = None
    """Iterations per compiled chunk; None derives it from --num-evals (set on resume so the
    continued run compiles the same chunk)."""
    resume: str | None = None
    """Run directory to continue from its latest valid checkpoint (use `diffrl train --resume`)."""
    num_devices: int | None = None
    """Devices the environment batch is split over (data parallel; parameters replicated,
    gradients averaged). None = every device JAX sees (`jax.device_count()`, all processes).
    Must divide --num-envs. On a CPU, `XLA_FLAGS=--xla_force_host_platform_device_count=N`
    makes N devices."""
    matmul_precision: str = "default"
    """Matrix-multiply precision: default (the backend's fastest, e.g. TF32 on recent GPUs),
    high (bf16_3x/TF32-class), highest (full float32). No effect on CPUs."""
    coordinator_address: str | None = None
    """Multi-host: host:port of process 0; set it to call `jax.distributed.initialize`
    (also read from DIFFRL_COORDINATOR_ADDRESS). Every process runs the same command."""
    num_processes: int | None = None
    """Multi-host: number of processes (None: DIFFRL_NUM_PROCESSES or JAX's cluster detection)."""
    process_id: int | None = None
    """Multi-host: this process's index in [0, num_processes) (None: DIFFRL_PROCESS_ID or
    JAX's cluster detection)."""
    # -- derived sizes -------------------------------------------------------
    @property
    def batch_size(self) -> int:
        """Transitions per iteration per seed."""
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return max(1, self.total_env_steps // self.batch_size)

    @property
    def iterations_per_chunk(self) -> int:
        if self.chunk_iterations is not None:
            return self.chunk_iterations
        return max(1, self.num_iterations // max(1, self.num_evals))

    @property
    def num_chunks(self) -> int:
        return max(1, self.num_iterations // self.iterations_per_chunk)

    @property
    def trained_env_steps(self) -> int:
        """Env steps actually trained (whole chunks), per seed."""
        return self.num_chunks * self.iterations_per_chunk * self.batch_size

    @property
    def env_config_overrides(self) -> dict[str, Any]:
        """--env-overrides as a dict; values that are not JSON stay strings."""
        out: dict[str, Any] = {}
        for item in self.env_overrides:
            key, _, value = item.partition("=")
            try:
                out[key.strip()] = json.loads(value)
            except json.JSONDecodeError:
                out[key.strip()] = value
        return out

    def replace(self, **changes: Any) -> "RunConfig":
        return dataclasses.replace(self, **changes)

    @classmethod
    def in_current_layout(cls, stored: dict) -> dict:
        """A run config as JSON, stored by an older diffrl, with its settings where they are now
        (:func:`move_stored_fields`) and without the shared sections this class does not hold (an
        older run directory stored every section): what a resumed run's new segment is compared with."""
        names = {f.name for f in dataclasses.fields(cls)}
        return {key: value for key, value in move_stored_fields(stored)[0].items()
                if key in names or key not in CONFIG_SECTIONS}

    def _device_errors(self) -> list[str]:
        """Problems with --num-devices, --matmul-precision and the multi-host fields."""
        from diffrl.plumbing.sharding import MATMUL_PRECISIONS

        errors = []
        if self.matmul_precision not in MATMUL_PRECISIONS:
            errors.append(f"--matmul-precision must be one of {', '.join(MATMUL_PRECISIONS)} "
                          f"(got {self.matmul_precision!r})")
        if self.num_processes is not None and self.num_processes < 1:
            errors.append(f"--num-processes must be positive (got {self.num_processes})")
        if self.process_id is not None and (self.process_id < 0 or (
                self.num_processes is not None and self.process_id >= self.num_processes)):
            errors.append(f"--process-id must be in [0, num_processes) (got {self.process_id})")
        if self.num_devices is not None and self.num_devices < 1:
            errors.append(f"--num-devices must be positive (got {self.num_devices})")
            return errors
        import jax  # the device count: after jax.distributed.initialize in multi-host runs

        available = jax.device_count()
        devices = available if self.num_devices is None else self.num_devices
        if devices > available:
            errors.append(f"--num-devices {devices} but only {available} {jax.devices()[0].platform} "
                          f"device(s) are available")
        elif jax.process_count() > 1 and devices != available:
            errors.append(f"--num-devices {devices}: a multi-process run uses every device "
                          f"({available}); leave it unset")
        if self.num_envs > 0 and self.num_envs % devices:
            hint = "" if self.num_devices is not None else " (it defaults to every device; set --num-devices)"
            errors.append(f"--num-envs ({self.num_envs}) must be divisible by the number of devices "
                          f"({devices}){hint}")
        return errors

    def validate(self) -> None:
        """Raise ConfigError listing every problem found."""
        errors: list[str] = []

        def positive(name: str, value: float) -> None:
            if not value > 0:
                errors.append(f"--{name.replace('_', '-')} must be positive (got {value})")

        for name in ("total_env_steps", "num_envs", "num_steps", "num_seeds", "num_evals",
                     "eval_envs", "reward_scale", "obs_clip", "obs_norm_eps"):
            positive(name, getattr(self, name))
        if self.episode_length is not None:
            positive("episode_length", self.episode_length)
        if self.chunk_iterations is not None:
            positive("chunk_iterations", self.chunk_iterations)
        if self.checkpoint_every < 0 or self.keep_checkpoints < 1:
            errors.append("--checkpoint-every must be >= 0 and --keep-checkpoints >= 1")
        if self.total_env_steps > 0 and self.num_envs > 0 and self.num_steps > 0:
            if self.total_env_steps < self.batch_size:
                errors.append(
                    f"--total-env-steps ({self.total_env_steps}) is smaller than one iteration "
                    f"(num_envs * num_steps = {self.batch_size})")
        if self.env_backend not in ("generalized", "positional", "spring", "mjx"):
            errors.append(f"--env-backend must be generalized, positional, spring or mjx (got {self.env_backend!r})")
        if self.physics_impl not in PHYSICS_IMPLS:
            errors.append(f"--physics-impl must be one of {', '.join(PHYSICS_IMPLS)} (got {self.physics_impl!r})")
        elif (self.physics_impl == "warp" and self.env.startswith("playground/")
              and importlib.util.find_spec("warp") is None):
            errors.append("--physics-impl warp needs the warp-lang package (pip install warp-lang); "
                          "--physics-impl jax needs nothing extra")
        for item in self.env_overrides:
            if not item.partition("=")[0].strip() or "=" not in item:
                errors.append(f"--env-overrides: {item!r} is not KEY=VALUE")
        if self.maniskill_backend not in MANISKILL_BACKENDS:
            errors.append(f"--maniskill-backend must be one of {', '.join(MANISKILL_BACKENDS)} "
                          f"(got {self.maniskill_backend!r})")
        if self.host_workers < 0:
            errors.append(f"--host-workers must be >= 0 (got {self.host_workers})")
        if is_host_env(self.env) and (self.num_processes or 1) > 1:
            errors.append(f"{self.env} is a host environment (stepped outside JAX): multi-process runs "
                          "(--num-processes > 1) are not supported for it")
        if self.env_overrides and not self.env.startswith("playground/"):
            errors.append(f"--env-overrides apply to playground/* tasks only (env is {self.env})")
        # each algorithm's sections validate themselves (diffrl.algos.ALGORITHM_SECTIONS); the
        # sections it does not read must stay at their defaults (unused_setting_errors below)
        reads = ALGORITHM_SECTIONS.get(self.algo, ())
        missing = [sub for sub in reads if not hasattr(self, sub)]
        if missing:  # a config composed for another algorithm, then given this --algo
            raise ConfigError(f"invalid configuration:\n  - --algo {self.algo} reads the section(s) "
                              f"{', '.join(missing)}, which this {type(self).__name__} has not "
                              "(diffrl.config.as_run_config composes the config of an algorithm)")
        for sub in reads:
            validate = getattr(getattr(self, sub), "validate", None)
            try:
                if validate is not None:
                    validate()
            except ValueError as e:
                errors.append(str(e))
        section = batch_section(self.algo)
        if section is not None and self.num_envs > 0 and self.num_steps > 0:
            errors.extend(getattr(self, section).batch_errors(self.batch_size))
        errors.extend(unused_setting_errors(self))
        errors.extend(self._device_errors())
        if errors:
            raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(errors))


# -- the shared sections ----------------------------------------------------
# One frozen dataclass per shared section, each holding just that section's field and its docstring
# (``--help`` text): a run config class is composed from :class:`RunConfig` and the ones its algorithm
# reads (:func:`config_type`), and tyro finds each docstring in the class that declares the field.
@dataclass(frozen=True)
class _PPOSection:
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO settings (used when --algo ppo)."""


@dataclass(frozen=True)
class _REPPOSection:
    reppo: REPPOConfig = field(default_factory=REPPOConfig)
    """Max-entropy actor-critic settings (reppo, trudi, dime, amdp, amdp-backprop): duals, SGD, and the
    trust region of each (REPPO's KL dual, the DIME chain's KL, AMDP's drift multiplier)."""


@dataclass(frozen=True)
class _CriticSection:
    critic: CriticConfig = field(default_factory=CriticConfig)
    """Categorical (HL-Gauss) Q critic (reppo, trudi, amdp)."""


@dataclass(frozen=True)
class _GaussianSection:
    gaussian: GaussianPolicyConfig = field(default_factory=GaussianPolicyConfig)
    """Gaussian policy settings (ppo, reppo)."""


@dataclass(frozen=True)
class _DiffusionSection:
    diffusion: DiffusionPolicyConfig = field(default_factory=DiffusionPolicyConfig)
    """DIME diffusion policy settings (trudi, dime, dime-off, dppo); its trust region is the algorithm's."""


@dataclass(frozen=True)
class _AdjointSection:
    adjoint: AdjointPolicyConfig = field(default_factory=AdjointPolicyConfig)
    """Adjoint-matching diffusion policy settings (amdp, amdp-backprop, amdp-off); its drift trust region
    is the algorithm's."""


@dataclass(frozen=True)
class _FlowSection:
    flow: FlowPolicyConfig = field(default_factory=FlowPolicyConfig)
    """Flow-matching policy settings (fpo)."""


@dataclass(frozen=True)
class _OffPolicySection:
    offpolicy: OffPolicyConfig = field(default_factory=OffPolicyConfig)
    """Replay buffer, critics and optimisers of the off-policy algorithms (sac, dime-off, amdp-off), and
    amdp-off's drift trust region."""


SECTION_CLASSES: dict[str, type] = {
    "ppo": _PPOSection, "reppo": _REPPOSection, "critic": _CriticSection, "gaussian": _GaussianSection,
    "diffusion": _DiffusionSection, "adjoint": _AdjointSection, "flow": _FlowSection,
    "offpolicy": _OffPolicySection}
"""Shared section name -> the dataclass that declares it as a run config field (:func:`config_type`)."""
assert tuple(SECTION_CLASSES) == CONFIG_SECTIONS, "one declaring class per shared section, in its order"


def _bases(sections) -> tuple[type, ...]:
    """The bases of a run config class holding ``sections`` (shared section names): a dataclass lists
    the fields of its bases last base first, so the run's own fields come first and the sections follow
    in :data:`CONFIG_SECTIONS` order, as ``--help`` lists them."""
    return tuple(SECTION_CLASSES[s] for s in reversed(CONFIG_SECTIONS) if s in sections) + (RunConfig,)


@dataclass(frozen=True)
class TrainConfig(*_bases(CONFIG_SECTIONS)):
    """The run's own settings and every shared config section, whichever the algorithm reads.

    What ``diffrl train --help`` without ``--algo`` lists, and a config Python code may build for any
    algorithm: ``Trainer`` and ``build_run`` convert it to the algorithm's run config
    (:func:`as_run_config`), refusing a changed setting in a section the algorithm does not read."""


MOVED_FIELDS: dict[str, str] = {
    "diffusion.trust_region": "reppo.trust_region",
    "diffusion.kl_estimator": "reppo.kl_estimator",
    "diffusion.kl_samples": "reppo.kl_samples",
    "diffusion.kl_paths": "reppo.kl_paths",
    "adjoint.trust_region": "reppo.kl_multiplier",
    "adjoint.kl_bound": "reppo.kl_bound",
    "adjoint.lambda_init": "reppo.lambda_init",
}
"""Trust-region settings that moved from the policy's section to the algorithm's that enforces them
(old dotted name -> new). An algorithm that does not read the ``reppo`` section finds the field in
its own settings' section under the same name where that section has it (amdp-off:
``offpolicy.kl_multiplier``, ``offpolicy.kl_bound``; :func:`moved_field`). The old names keep working:
typed flags and ``--set`` are rewritten with a note (``diffrl.commands.train.cmd_train``,
``overrides.set_field``), stored run configs load moved (:func:`move_stored_fields`), exported policy
configs load without them (the policy classes' ``moved_fields``), and the benchmark ledger hashes them
under their old names (``benchmarks/ledger_records.py``), so records written before the move stay valid."""

READ_BEFORE_MOVE: dict[str, tuple[str, ...]] = {"adjoint.kl_bound": ("amdp",)}
"""Moved fields whose new name already existed (REPPO's radius ``reppo.kl_bound``) -> the algorithms
that read the old field, and ignored the new one, before the move: for them a stored old value is the
one the run used; for every other algorithm the stored new field is."""


def moved_field(old: str, algo: str) -> str:
    """The dotted name the moved field ``old`` (a key of :data:`MOVED_FIELDS`) has for ``--algo algo``:
    its new name, or the same field of the algorithm's own settings' section when the algorithm does
    not read the new name's section and that section has the field (amdp-off: ``offpolicy``)."""
    new = MOVED_FIELDS[old]
    section, _, name = new.partition(".")
    spec = find(algo)
    if spec is None or section in spec.reads:
        return new
    own = spec.batch_section
    cls = dict(spec.own_sections).get(own) or next(
        (f.default_factory for f in dataclasses.fields(TrainConfig) if f.name == own), None)
    if cls is not None and any(f.name == name for f in dataclasses.fields(cls)):
        return f"{own}.{name}"
    return new


def move_stored_fields(stored: dict) -> tuple[dict, list[str]]:
    """A run config stored as JSON before :data:`MOVED_FIELDS` moved (``config.json``, checkpoint
    metadata) in the current layout, and the moves made ("old -> new"). Each moved value goes to the
    name its algorithm reads it under (:func:`moved_field`), except where that name already held the value
    the run used (:data:`READ_BEFORE_MOVE`); a config stored after the move is returned unchanged."""
    algo = stored.get("algo", RunConfig.algo)
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in stored.items()}
    moves = []
    for old in MOVED_FIELDS:
        old_section, _, old_name = old.partition(".")
        if old_name not in out.get(old_section, {}):
            continue
        value = out[old_section].pop(old_name)
        new = moved_field(old, algo)
        section, _, name = new.partition(".")
        target = out.setdefault(section, {})
        if name in target and algo not in READ_BEFORE_MOVE.get(old, ()):
            continue  # the run read the stored new field (REPPO's kl_bound); the old one was not read
        target[name] = value
        moves.append(f"{old} -> {new}")
    return out, moves


_CONFIG_TYPES: dict[tuple, type] = {}


def _composed(algo: str, values: dict) -> RunConfig:
    """Unpickle a run config of a composed class (a class made at run time cannot be named)."""
    return config_type(algo)(**values)


def _reduce(self):
    return _composed, (self.algo, {f.name: getattr(self, f.name) for f in dataclasses.fields(self)})


def _make_type(name: str, spec, bases: tuple[type, ...], namespace: dict | None = None) -> type:
    """A frozen dataclass: the fields of ``bases``, then ``spec``'s own sections."""
    run_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    clashes = sorted(set(spec.own_sections) & run_fields)
    if clashes:
        raise ConfigError(f"--algo {spec.name}: its own config sections {clashes} would replace run settings")
    fields = [(section, cls, field(default_factory=cls)) for section, cls in spec.own_sections.items()]
    cls = dataclasses.make_dataclass(name, fields, bases=bases, frozen=True, namespace=namespace)
    cls.__module__ = __name__
    return cls


def config_type(algo: str) -> type[RunConfig]:
    """The run config class of ``--algo algo``, ``RunConfig[name]``: :class:`RunConfig` and the config
    sections the algorithm reads (its record's ``reads``: the shared sections it names, then the
    sections only it defines, ``own_sections``), nothing else. It is what ``diffrl train --algo algo``
    parses (``--help`` lists only those sections' flags), what a preset resolves to and what a run
    stores in its run directory. :class:`TrainConfig` for a name that selects no algorithm."""
    spec = find(algo)
    if spec is None:
        return TrainConfig
    # keyed by the record's sections and section classes: a module reloaded (or an algorithm registered
    # again under its name) brings new classes, and a class built around the old ones would not parse
    # their instances
    key = ("run", spec.name, tuple(spec.sections), tuple(spec.own_sections.items()))
    if key not in _CONFIG_TYPES:
        _CONFIG_TYPES[key] = _make_type(f"RunConfig[{spec.name}]", spec, _bases(spec.sections),
                                        {"__reduce__": _reduce})
    return _CONFIG_TYPES[key]


def full_config_type(algo: str) -> type[TrainConfig]:
    """:class:`TrainConfig`, plus the sections only ``algo`` defines (an algorithm registered from
    outside diffrl): a class that holds every setting of any run of ``algo``, with which a stored
    config of an older layout is read and ``diffrl train --help`` without ``--algo`` lists every flag."""
    spec = find(algo)
    if spec is None or not spec.own_sections:
        return TrainConfig
    key = ("full", spec.name, tuple(spec.own_sections.items()))
    if key not in _CONFIG_TYPES:
        _CONFIG_TYPES[key] = _make_type(f"TrainConfig[{spec.name}]", spec, (TrainConfig,))
    return _CONFIG_TYPES[key]


def _field_default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _dropped_setting_errors(config: RunConfig, algo: str, dropped: list[str]) -> list[str]:
    """An error for each setting of the sections ``dropped`` (fields of ``config``) that differs
    from its default, naming what ``algo`` reads instead."""
    spec, errors = find(algo), []
    fields = {f.name: f for f in dataclasses.fields(config)}
    for section in dropped:
        value, default = getattr(config, section), _field_default(fields[section])
        if value == default:
            continue
        reason = unread_reason(spec, section) if spec is not None else f"{algo} does not read it"
        changed = ([(f"{section}.{f.name}", getattr(value, f.name), getattr(default, f.name))
                    for f in dataclasses.fields(value)] if dataclasses.is_dataclass(value) else
                   [(section, value, default)])
        errors.extend(f"--{dotted.replace('_', '-')} ({v!r}) has no effect with --algo {algo}: {reason}"
                      for dotted, v, d in changed if v != d)
    return errors


def as_run_config(config: RunConfig, drop_unread: bool = False) -> RunConfig:
    """``config`` as an instance of its algorithm's run config class (:func:`config_type`), the same
    values: a :class:`TrainConfig` (or a config composed for another algorithm) keeps the sections the
    algorithm reads, those it lacks take their defaults, and the others are dropped.

    A dropped section must hold its defaults (ConfigError naming each changed setting, as
    :meth:`RunConfig.validate` names them for a :class:`TrainConfig`: a setting that would do nothing
    is refused), unless ``drop_unread``: then its values go (the command-line parser, which refuses a
    typed flag of a section the algorithm does not read by what was typed,
    ``diffrl.commands.train_flags.unread_flag_errors``)."""
    cls = config_type(config.algo)
    if type(config) is cls or cls is TrainConfig:  # an unknown --algo: refused when the run is built
        return config
    names = {f.name for f in dataclasses.fields(cls)}
    dropped = [f.name for f in dataclasses.fields(config) if f.name not in names]
    errors = [] if drop_unread else _dropped_setting_errors(config, config.algo, dropped)
    if errors:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(errors))
    return cls(**{name: getattr(config, name) for name in names if hasattr(config, name)})


def as_full_config(config: RunConfig) -> TrainConfig:
    """``config`` with every shared section (:func:`full_config_type`): those it lacks at their
    defaults. For setting a field by name for several algorithms at once, or parsing every flag."""
    cls = full_config_type(config.algo)
    if isinstance(config, cls):
        return config
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name in names})
