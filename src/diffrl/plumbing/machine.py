"""What every record says about where it was made: the installed versions of the libraries that decide
a run's numbers, the machine (the CPU's model, family and SIMD extensions, the core count, the XLA
flags: on a CPU they decide the float rounding, and so a seed's curve) and the git commit of the code.
Written into run directories (:mod:`diffrl.plumbing.run_record`), checkpoints, exports and every
benchmark record.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

RECORDED_PACKAGES = ("diffrl", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "playground",
                     "mujoco", "mujoco-mjx", "brax", "gymnax", "numpy", "tyro")


def package_versions(names, missing: str = "not installed") -> dict[str, str]:
    """{package: installed version, or ``missing``} for each of ``names``."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = missing
    return out


def library_versions() -> dict[str, str]:
    return {"python": sys.version.split()[0], "platform": platform.platform(),
            **package_versions(RECORDED_PACKAGES)}


CPUINFO = Path("/proc/cpuinfo")


def first_processor(cpuinfo: Path = CPUINFO) -> dict[str, str]:
    """The fields of the first processor's block of ``cpuinfo`` (Linux's /proc/cpuinfo); {} where it
    cannot be read. Every core of a machine reports the same model and extensions."""
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if not key and fields:  # a blank line ends the first block
                break
            fields.setdefault(key, value.strip())
    except OSError:
        return {}
    return fields


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what the platform module knows."""
    return first_processor(cpuinfo).get("model name") or platform.processor() or platform.machine()


SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni",
              "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "asimd", "sve", "sve2")
"""The vector extensions XLA:CPU may compile for (it targets the host's features): two machines that
differ in them run differently compiled programs, whose float rounding differs."""


def cpu_identity(cpuinfo: Path = CPUINFO) -> dict[str, Any]:
    """The CPU's vendor, family and model numbers and its SIMD extensions (Linux: /proc/cpuinfo; {}
    elsewhere). The model name alone can hide them (a virtual machine may report just "AMD EPYC",
    for Zen 2 without AVX-512 and Zen 4 with it alike)."""
    fields = first_processor(cpuinfo)
    if not fields:
        return {}
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    identity = {name: fields[key] for name, key in (("vendor", "vendor_id"), ("family", "cpu family"),
                                                    ("model", "model"), ("implementer", "CPU implementer"),
                                                    ("part", "CPU part")) if key in fields}
    return {**identity, "simd": [flag for flag in SIMD_FLAGS if flag in flags]}


def machine_record() -> dict[str, Any]:
    """What besides the code and config decides a run's float rounding, and so its per-seed curves:
    the CPU (x86 models round differently: a learning run's seeds can end apart on two machines; its
    model name, family, model and SIMD extensions), the core count and the XLA flags the run was
    started with."""
    return {"cpu": cpu_model(), "cpu_identity": cpu_identity(), "cpu_count": os.cpu_count(),
            "xla_flags": os.environ.get("XLA_FLAGS", ""), "jax_platforms": os.environ.get("JAX_PLATFORMS", "")}


def git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None
