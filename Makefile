# Quick start: `make train` (set up, then train the flagship on the default task)
#              `make test`  (set up, then run the test suite).
# Set-up is idempotent: .venv is (re)synced only when pyproject.toml or requirements.lock change.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.diffrl-installed
# Default main job: finishes in about 10 minutes on 2 CPU cores, needs no download.
TRAIN_ARGS ?= --algo ppo --env playground/CartpoleSwingup
PYTEST_ARGS ?=

.PHONY: setup train test bench clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check uv==0.13.9
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -r requirements.lock
	# playground 0.2.0 pins warp-lang (392 MB), which diffrl never uses (impl="jax").
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps playground==0.2.0
	$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	touch $(STAMP)

train: setup
	MUJOCO_GL=egl $(PY) -m diffrl.cli train $(TRAIN_ARGS)

test: setup
	JAX_PLATFORMS=cpu MUJOCO_GL=egl $(PY) -m pytest -q $(PYTEST_ARGS)

clean-venv:
	rm -rf $(VENV)
