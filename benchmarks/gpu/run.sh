#!/usr/bin/env bash
# One lent GPU session's measurements (project issue 17; benchmarks/gpu/README.md): install the wheels
# that the GPU image lacks (fetched into .whl/ by fetch_wheels.sh) beside the image's own jax, then run
# benchmarks/gpu/measure.py, which writes gpu.json, gpu.md and cost.{json,md} under $OUT.
#
# Which jax (issue 48): the newest one the machine offers, not a fixed one. Candidates are the jax
# installed in the image and every jax version whose jax and jaxlib wheels are carried in the wheel
# folder (CUDA plugin wheels of the same version go with them); they are tried newest first, then the
# pinned one (requirements.lock), then the rest, and the first that imports at its own version (and, on
# a machine with nvidia-smi, whose default backend is the GPU) is used. Written to $OUT/jax.json (the
# version used, where it came from, the pinned one, every candidate tried) and to run.log.
#
# Usage: bash benchmarks/gpu/run.sh [--skip-install] [--jax-only] [measure.py flags: --dry-run, --budget-min 8, --parts ...]
#   --skip-install   use what is importable already (a full diffrl venv; tests/test_gpu_script.py);
#                    the jax candidates are then the installed one only
#   --jax-only       pick the jax, write jax.json, and stop (nothing measured)
# Environment: OUT (default runs/gpu, relative to the repository root), PYTHON (python3),
#   DIFFRL_GPU_SITE (where the wheels are installed; default /tmp/diffrl-gpu-site),
#   DIFFRL_GPU_WHEELS (the wheel folder; default .whl), DIFFRL_GPU_REQUIRE_GPU (1: a jax counts as working
#   only with the GPU as its default backend; default 1 where nvidia-smi exists, else 0).
set -euo pipefail
T0=$(date +%s.%N)  # the time budget counts from here, the install included
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-runs/gpu}
SITE=${DIFFRL_GPU_SITE:-/tmp/diffrl-gpu-site}
WHEELS=${DIFFRL_GPU_WHEELS:-.whl}
install=1
jax_only=0
args=()
for a in "$@"; do
  case "$a" in
    --skip-install) install=0 ;;
    --jax-only) jax_only=1 ;;
    *) args+=("$a") ;;
  esac
done
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1

if [ "$install" = 1 ]; then
  # Only wheels whose distribution is not installed: nothing of the image is replaced. jax's own wheels
  # (jax, jaxlib, its CUDA plugins) are left to the choice of jax below.
  mapfile -t wheels < <("$PYTHON" - "$WHEELS" <<'EOF'
import importlib.metadata as md
import re
import sys
from pathlib import Path

for wheel in sorted(Path(sys.argv[1]).glob("*.whl")):
    if re.match(r"(jax|jaxlib|jax_cuda\d+_(plugin|pjrt)|jax_rocm\d+_(plugin|pjrt))-", wheel.name):
        continue
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
      "$PYTHON" -m pip install -q --no-index --no-deps --find-links "$WHEELS" --target "$SITE" "${wheels[@]}"
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

# -- which jax: the newest that works here ------------------------------------------------------------
PINNED_JAX=$(grep -iE '^jax==' requirements.lock | head -1 | cut -d= -f3)
# "<version> <source> [wheel ...]" per candidate, in the order they are tried
mapfile -t candidates < <("$PYTHON" - "$WHEELS" "$install" "$PINNED_JAX" <<'EOF'
import importlib.metadata as md
import re
import sys
from pathlib import Path

folder, install, pinned = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]


def key(v):
    return tuple(int(x) for x in re.findall(r"\d+", v))


def installed(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


found = {}  # version -> {"jax": wheel, "jaxlib": wheel, "plugins": [wheels]}
for wheel in sorted(folder.glob("*.whl")) if install else ():
    m = re.match(r"(jax|jaxlib|jax_cuda\d+_(?:plugin|pjrt)|jax_rocm\d+_(?:plugin|pjrt))-([^-]+)-", wheel.name)
    if m:
        slot = found.setdefault(m.group(2), {"plugins": []})
        if m.group(1) in ("jax", "jaxlib"):
            slot[m.group(1)] = str(wheel)
        else:
            slot["plugins"].append(str(wheel))
rows = []
image = installed("jax")
if image:
    rows.append((image, "image", []))
for version, slot in found.items():
    if "jax" in slot and ("jaxlib" in slot or installed("jaxlib") == version) and version != image:
        rows.append((version, "wheels", [slot["jax"], *([slot["jaxlib"]] if "jaxlib" in slot else []),
                                         *slot["plugins"]]))
rows.sort(key=lambda r: key(r[0]), reverse=True)
rows[1:] = sorted(rows[1:], key=lambda r: r[0] != pinned)  # newest, then the pinned one, then the rest
for version, source, files in rows:
    print(" ".join([version, source, *files]))
EOF
)
want_gpu=${DIFFRL_GPU_REQUIRE_GPU:-0}
[ -n "${DIFFRL_GPU_REQUIRE_GPU:-}" ] || ! command -v nvidia-smi >/dev/null || want_gpu=1
tried=()
jax_used=""
BASE_PYTHONPATH=${PYTHONPATH:-}
for c in "${candidates[@]+"${candidates[@]}"}"; do
  read -r version source files <<<"$c"
  path=$BASE_PYTHONPATH
  if [ "$source" = wheels ]; then
    dir="$SITE-jax/$version"
    if [ ! -f "$dir/.done" ]; then
      rm -rf "$dir"
      # shellcheck disable=SC2086
      if "$PYTHON" -m pip --version >/dev/null 2>&1; then
        "$PYTHON" -m pip install -q --no-index --no-deps --target "$dir" $files || { tried+=("$version $source: install failed"); continue; }
      else
        "$PYTHON" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
          "$dir" $files || { tried+=("$version $source: install failed"); continue; }
      fi
      touch "$dir/.done"
    fi
    path="$dir${path:+:$path}"
  fi
  if info=$(PYTHONPATH="$path" "$PYTHON" - "$version" "$want_gpu" 2>"$OUT/jax-check.err" <<'EOF'
import importlib.metadata as md
import json
import sys

import jax

want, want_gpu = sys.argv[1], sys.argv[2] == "1"
if jax.__version__ != want:
    sys.exit(f"imports jax {jax.__version__}, not {want}")
backend = jax.default_backend()
if want_gpu and backend != "gpu":
    sys.exit(f"default backend {backend}, not the GPU")
dists = {}
for d in md.distributions():
    name = (d.metadata["Name"] or "").lower().replace("_", "-")
    if name == "jaxlib" or name.startswith(("jax-cuda", "jax-rocm")):
        dists[name] = d.version
print(json.dumps({"jax": jax.__version__, "distributions": dict(sorted(dists.items())), "backend": backend,
                  "devices": [str(d) for d in jax.devices()], "file": jax.__file__}))
EOF
  ); then
    jax_used=$version
    jax_source=$source
    tried+=("$version $source: used")
    export PYTHONPATH="$path"
    break
  fi
  tried+=("$version $source: does not work here: $(tail -1 "$OUT/jax-check.err")")
done
rm -f "$OUT/jax-check.err"
"$PYTHON" - "$OUT/jax.json" "$PINNED_JAX" "${jax_used:-}" "${info:-}" "${tried[@]+"${tried[@]}"}" <<'EOF'
import json
import re
import sys

path, pinned, used, info, *tried = sys.argv[1:]
rows = [dict(zip(("version", "source", "status"), re.match(r"(\S+) (\S+): (.*)", t).groups())) for t in tried]
used_row = next((r for r in rows if r["status"] == "used"), None)
record = {"schema": "diffrl.gpu_jax/1", "pinned": pinned, "used": used or None,
          "source": used_row["source"] if used_row else None,
          "newer_than_pinned": None, "candidates": rows, **(json.loads(info) if used else {})}
if used:
    record["newer_than_pinned"] = [int(x) for x in re.findall(r"\d+", used)] > \
        [int(x) for x in re.findall(r"\d+", pinned)]
with open(path, "w") as f:
    json.dump(record, f, indent=1)
EOF
echo "run.sh: jax candidates (newest first, then the pinned $PINNED_JAX): ${tried[*]+"${tried[*]}"}"
if [ -z "$jax_used" ]; then
  echo "run.sh: no jax works here (want $([ "$want_gpu" = 1 ] && echo "the GPU backend" || echo "an import"));" \
    "carry the pinned jax==$PINNED_JAX wheels in $WHEELS or use an image with jax" >&2
  exit 1
fi
echo "run.sh: using jax $jax_used (from the $jax_source; pinned $PINNED_JAX) -> $OUT/jax.json"
[ "$jax_only" = 1 ] && exit 0
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
