"""A run's own settings (:class:`RunConfig`): what to train on, for how long, where to write it, on which
devices; their docstrings are ``diffrl train --help``'s, and :meth:`RunConfig.validate` refuses bad input
with every problem named before anything is compiled. The config sections an algorithm reads are
composed onto it by :func:`diffrl.config.config_type`."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
from dataclasses import dataclass
from typing import Any

from diffrl.algos.registry import ALGORITHM_SECTIONS, CONFIG_SECTIONS, batch_section, find, unused_setting_errors
from diffrl.config.moved import move_stored_fields
from diffrl.envs.maniskill import MANISKILL_BACKENDS
from diffrl.envs.playground import PHYSICS_IMPLS
from diffrl.envs.registry import is_host_env


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
        return {key: value for key, value in move_stored_fields(stored, cls.algo)[0].items()
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
