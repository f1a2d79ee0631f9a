# Quick start: `make train` (set up, then train the flagship on the default task)
#              `make test`  (set up, then run the test suite).
# Set-up is idempotent: .venv is (re)synced only when pyproject.toml or requirements.lock change.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.diffrl-installed
# Default main job: the flagship, TruDi (diffusion actor, trajectory-KL trust region), balancing
# Playground's Cartpole with its CPU preset; about 10 minutes on 2 CPU cores, needs no download.
TRAIN_ARGS ?= --algo trudi --env playground/CartpoleBalance --total-env-steps 327680 --num-evals 8
PYTEST_ARGS ?=

.PHONY: setup setup-host setup-maniskill vulkan-deps train test test-drift render-deps clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check uv==0.13.9
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -r requirements.lock
	# playground 0.2.0 pins warp-lang (392 MB), which diffrl never uses (impl="jax").
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps playground==0.2.0
	# jax2onnx 0.17.1 (ONNX export) lists its examples' libraries and orbax-checkpoint<0.11.37 as
	# requirements; what it needs to convert (onnx, onnx-ir, onnxruntime, sympy) is in the lock.
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps jax2onnx==0.17.1
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	@$(MAKE) --no-print-directory render-deps
	touch $(STAMP)

# The host-environment extras (dm_control's dmc/<domain>-<task>, gymnasium's gym/<Id>, stepped outside
# JAX): not needed by `make train`.
HOST_STAMP := $(VENV)/.diffrl-host-installed
setup-host: $(HOST_STAMP)

$(HOST_STAMP): $(STAMP) requirements-host.lock
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -r requirements-host.lock -c requirements.lock
	touch $(HOST_STAMP)

# ManiSkill3 (maniskill/<Task>, stepped outside JAX): the CPU build of torch first, then
# requirements-maniskill.lock, then a Vulkan driver for SAPIEN. Not needed by `make train`. pip looks for
# torch==2.13.0+cpu in the sources it is configured with (pip.conf, PIP_* variables: a local wheel, a mirror),
# plus TORCH_INDEX_URL when set (PyTorch's CPU wheel index or a mirror of it: docs/environments.md). Without
# either, PyPI's torch 2.13.0 (a CUDA build of several GB) comes from pip's configured index instead.
TORCH_INDEX_URL ?=
MANISKILL_STAMP := $(VENV)/.diffrl-maniskill-installed
setup-maniskill: $(MANISKILL_STAMP)

$(MANISKILL_STAMP): $(STAMP) requirements-maniskill.lock
	$(PY) -m pip install -q --disable-pip-version-check "torch==2.13.0+cpu" \
	    $(if $(TORCH_INDEX_URL),--extra-index-url "$(TORCH_INDEX_URL)") 2>/dev/null || \
	  { echo "note: no CPU build of torch in pip's sources (set TORCH_INDEX_URL, see docs/environments.md);" \
	      "installing PyPI's torch 2.13.0"; \
	    $(PY) -m pip install -q --disable-pip-version-check "torch==2.13.0"; }
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -r requirements-maniskill.lock -c requirements.lock
	@$(MAKE) --no-print-directory vulkan-deps
	touch $(MANISKILL_STAMP)

# SAPIEN needs a Vulkan driver even without rendering. Debian 12's lavapipe (Mesa 22) is refused by it;
# Mesa 25's from bookworm-backports works. Best effort: where apt-get is usable as root and no lavapipe
# of Mesa >= 23 is installed, install it (other systems: a GPU driver, or any Vulkan 1.2+ driver).
# scripts/apt_backports.py takes the backports suite from the Debian source apt is already configured
# with (its mirror or proxy); without one it changes nothing and says what to install.
vulkan-deps:
	@if dpkg-query -W -f='$${Version}' mesa-vulkan-drivers 2>/dev/null | grep -qE '^(2[3-9]|[3-9][0-9])\.'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && grep -qs 'bookworm' /etc/os-release; then \
	  echo "installing Mesa's Vulkan driver (lavapipe) from bookworm-backports for ManiSkill"; \
	  $(PYTHON) scripts/apt_backports.py install mesa-vulkan-drivers libvulkan1 || \
	  echo "warning: no Vulkan driver installed; maniskill/ tasks need one"; \
	else echo "note: maniskill/ tasks need a Vulkan driver (Mesa >= 23's lavapipe, or a GPU's)"; fi

# Headless video (diffrl eval --video) renders with MuJoCo through EGL (OSMesa as fallback).
# Best effort: installs the system libraries when they are missing and apt-get is usable.
render-deps:
	@if ldconfig -p 2>/dev/null | grep -q 'libEGL.so.1'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing libegl1 libgl1 libosmesa6 for headless rendering"; \
	  (apt-get update -qq && apt-get install -y -qq libegl1 libgl1 libosmesa6 >/dev/null) || \
	  echo "warning: could not install rendering libraries; videos need libegl1 or libosmesa6"; \
	else echo "note: videos need the system packages libegl1 (or libosmesa6)"; fi

train: setup
	MUJOCO_GL=egl $(PY) -m diffrl.cli train $(TRAIN_ARGS)

# Two pytest workers (pytest-xdist): the suite is dominated by compiling and by small
# single-threaded training programs, so two processes keep both CPU cores busy. The 20 slowest
# tests are listed at the end: where a CI run's time goes (the suite must stay under 30 minutes).
test: setup setup-host setup-maniskill
	JAX_PLATFORMS=cpu MUJOCO_GL=egl $(PY) -m pytest -q -n 2 --dist worksteal --durations=20 $(PYTEST_ARGS)

# Dependency drift (not part of `test`): the newest jax/flax/optax/orbax/mujoco(-mjx) that resolve together,
# in a separate venv under /tmp (never .venv), then a fast subset of the tests and one short learning run per
# algorithm family (about 35 minutes of one core); what broke goes to /tmp/diffrl-drift.
test-drift:
	bash scripts/dependency_drift.sh

clean-venv:
	rm -rf $(VENV)
