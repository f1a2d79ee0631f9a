#!/usr/bin/env bash
# Dependency-drift tier (issue 48, item 4; not part of `make test`): the newest releases of jax, jaxlib,
# flax, optax, orbax-checkpoint, mujoco and mujoco-mjx that resolve together, installed in a separate
# venv (never .venv) over requirements.lock's other pins, then a fast subset of the tests and one short
# learning run per algorithm family; writes what broke to $DRIFT_OUT (versions.txt: what was installed; pytest.txt: the run; summary.txt).
# Playground stays at 0.2.x (its 1.0 is a different, PyTorch library).
#   make test-drift            or   bash scripts/dependency_drift.sh
#   DRIFT_VENV=/tmp/v DRIFT_TESTS="tests/test_config.py" bash scripts/dependency_drift.sh
set -u
cd "$(dirname "$0")/.."
VENV=${DRIFT_VENV:-/tmp/diffrl-drift-venv}
OUT=${DRIFT_OUT:-/tmp/diffrl-drift}
PYTHON=${PYTHON:-python3}
# Fast unit tests, then one short multi-seed learning run per algorithm family (CI's own learning tests:
# Gaussian PPO, REPPO's pathwise Gaussian, TruDi's diffusion chain and AMDP's adjoint chain on Playground
# CartpoleBalance; FPO's flow policy and SAC off-policy on Pendulum-v1, from the long tier), about 40 minutes
# of one core.
UNIT_TESTS="tests/test_config.py tests/test_normalization.py tests/test_returns.py tests/test_hl_gauss.py tests/test_gaussian_policy.py tests/test_wrappers.py tests/test_playground.py tests/test_paper_cost.py"
LEARNING_TESTS="tests/test_learning_maxent.py::test_learns_playground_cartpole_balance"
# FPO's and SAC's are long-tier tests (the baselines; DIFFRL_LONG_TESTS=1, 8 seeds for FPO): run as such.
LONG_TESTS="tests/test_learning_baselines.py::test_baseline_swings_up_pendulum[fpo] tests/test_learning_offpolicy.py::test_swings_up_pendulum_off_policy[sac]"
TESTS=${DRIFT_TESTS:-"$UNIT_TESTS $LEARNING_TESTS"}
[ -n "${DRIFT_TESTS:-}" ] && LONG_TESTS=""  # DRIFT_TESTS given: those alone
DRIFTING="jax jaxlib flax optax orbax-checkpoint mujoco mujoco-mjx"
case "$VENV" in "$PWD/.venv"|".venv"|"./.venv") echo "refusing to touch the main .venv" >&2; exit 2;; esac
mkdir -p "$OUT"
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check uv==0.13.9
# requirements.lock without the drifting packages: the rest stays pinned where the newest releases allow
# (uv is told to upgrade the drifting ones and may move what they require).
grep -viE "^($(echo $DRIFTING | sed 's/ /|/g'))==" requirements.lock > "$OUT/pins.txt"
set -o pipefail
if ! "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -r "$OUT/pins.txt" $DRIFTING --upgrade-package jax \
      --upgrade-package jaxlib --upgrade-package flax --upgrade-package optax --upgrade-package orbax-checkpoint \
      --upgrade-package mujoco --upgrade-package mujoco-mjx 2>"$OUT/resolve.txt"; then
  echo "resolution failed with the lock's other pins; retrying with them as preferences only" | tee -a "$OUT/resolve.txt"
  sed 's/==.*//' "$OUT/pins.txt" > "$OUT/unpinned.txt"
  "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -r "$OUT/unpinned.txt" $DRIFTING 2>>"$OUT/resolve.txt" \
    || { echo "FAILED: no resolution (see resolve.txt)" > "$OUT/summary.txt"; cat "$OUT/summary.txt"; exit 1; }
fi
"$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --no-deps "playground>=0.2,<0.3" jax2onnx==0.17.1
"$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --no-deps -e .
"$VENV/bin/python" -m pip freeze --disable-pip-version-check > "$OUT/versions.txt"
{
  echo "drifting packages (lock -> installed):"
  for p in $DRIFTING; do
    echo "  $p $(grep -iE "^$p==" requirements.lock | cut -d= -f3) -> $(grep -iE "^$p==" "$OUT/versions.txt" | cut -d= -f3)"
  done
} > "$OUT/summary.txt"
set -f  # test ids such as test_x[fpo] are not globs
JAX_PLATFORMS=cpu MUJOCO_GL=egl "$VENV/bin/python" -m pytest -q -p no:cacheprovider $TESTS 2>&1 | tee "$OUT/pytest.txt"
rc=$?
if [ -n "$LONG_TESTS" ]; then
  DIFFRL_LONG_TESTS=1 JAX_PLATFORMS=cpu MUJOCO_GL=egl "$VENV/bin/python" -m pytest -q -p no:cacheprovider $LONG_TESTS 2>&1 \
    | tee -a "$OUT/pytest.txt"
  long_rc=$?
  [ $rc -eq 0 ] && rc=$long_rc
fi
{ echo "pytest exit status: $rc"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.txt"; tail -1 "$OUT/pytest.txt"; } >> "$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $rc
