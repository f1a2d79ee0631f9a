#!/usr/bin/env bash
# One lent GPU session's measurements (project issue 17; benchmarks/gpu/README.md): install the wheels
# that the GPU image lacks (fetched into .whl/ by fetch_wheels.sh) beside the image's own jax, then run
# benchmarks/gpu/measure.py, which writes gpu.json, gpu.md and cost.{json,md} under $OUT.
#
# Usage: bash benchmarks/gpu/run.sh [--skip-install] [measure.py flags: --dry-run, --budget-min 8, --parts ...]
#   --skip-install   use what is importable already (a full diffrl venv; tests/test_gpu_script.py)
# Environment: OUT (default runs/gpu, relative to the repository root), PYTHON (python3),
#   DIFFRL_GPU_SITE (where the wheels are installed; default /tmp/diffrl-gpu-site).
set -euo pipefail
T0=$(date +%s.%N)  # the time budget counts from here, the install included
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-runs/gpu}
SITE=${DIFFRL_GPU_SITE:-/tmp/diffrl-gpu-site}
install=1
args=()
for a in "$@"; do
  if [ "$a" = --skip-install ]; then install=0; else args+=("$a"); fi
done
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1

if [ "$install" = 1 ]; then
  # Only wheels whose distribution is not installed: nothing of the image (its jax above all) is replaced.
  mapfile -t wheels < <("$PYTHON" - <<'EOF'
import importlib.metadata as md
from pathlib import Path

for wheel in sorted(Path(".whl").glob("*.whl")):
    try:
        md.version(wheel.name.split("-")[0])
    except md.PackageNotFoundError:
        print(wheel)
EOF
  )
  stamp=$(printf '%s\n' "${wheels[@]+"${wheels[@]}"}" | xargs -r stat -c '%n %s' | md5sum | cut -d' ' -f1)
  if [ "${#wheels[@]}" -gt 0 ] && [ "$(cat "$SITE/.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$SITE"
    if "$PYTHON" -m pip --version >/dev/null 2>&1; then
      "$PYTHON" -m pip install -q --no-index --no-deps --find-links .whl --target "$SITE" "${wheels[@]}"
    else  # no pip: a wheel is a zip of its install tree (none of these has a .data folder)
      "$PYTHON" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
        "$SITE" "${wheels[@]}"
    fi
    echo "$stamp" > "$SITE/.stamp"
  fi
  echo "run.sh: ${#wheels[@]} wheel(s) in $SITE after $(awk "BEGIN {print $(date +%s.%N) - $T0}") s:" \
    "${wheels[*]+"${wheels[*]}"}"
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}"
export MUJOCO_GL=${MUJOCO_GL:-disable}  # nothing here renders: no GL context, no glfw
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
if ! "$PYTHON" -c 'import mujoco_playground' 2>/dev/null; then  # fail in seconds, not after compiling
  echo "run.sh: mujoco_playground does not import: were the wheels fetched (fetch_wheels.sh) and .whl carried?" >&2
  exit 1
fi
"$PYTHON" -c 'import jax; print("run.sh: jax", jax.__version__, jax.devices())'
exec "$PYTHON" benchmarks/gpu/measure.py --out "$OUT" --t0 "$T0" "${args[@]+"${args[@]}"}"
