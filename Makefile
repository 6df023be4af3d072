# Quick start:   make preflight   |   make test-fast   |   make test
# Each creates ./.venv (Python 3.10+) and installs llmdiag into it: preflight the runtime only,
# the test targets with the test extras too. Afterwards `. .venv/bin/activate` puts `llmdiag`
# on the PATH of that shell (or run .venv/bin/llmdiag).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# The CPU build of torch used when no torch is importable. Override TORCH_SPEC / TORCH_PIP_ARGS
# (e.g. TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu") on other machines.
TORCH_SPEC     ?= torch==2.13.0
TORCH_PIP_ARGS ?=

# The inner loop: unit, contract, report and probe tests; not the ones that start gloo process
# groups, namespace hosts, a browser, real Prometheus servers or a GPU, nor those marked slow.
# Measured: 84 s wall (2234 tests; pytest 58 s, 45 s CPU) on this shared 2-core machine at load
# average 5; make test: about 16 minutes.
FAST_MARKERS ?= not (slow or distributed or cluster or browser or ops or gpu)

.PHONY: setup setup-runtime preflight test test-fast test-durations lint clean

SETUP = PYTHON=$(PYTHON) VENV=$(VENV) TORCH_SPEC="$(TORCH_SPEC)" TORCH_PIP_ARGS="$(TORCH_PIP_ARGS)" sh scripts/setup-venv.sh

$(VENV)/.installed: pyproject.toml setup.py diag/logs/_fastscan.c scripts/setup-venv.sh
	EXTRAS=test $(SETUP)
	touch $@ $(VENV)/.installed-runtime

$(VENV)/.installed-runtime: pyproject.toml setup.py diag/logs/_fastscan.c scripts/setup-venv.sh
	EXTRAS= $(SETUP)
	touch $@

setup: $(VENV)/.installed

setup-runtime: $(VENV)/.installed-runtime

preflight: setup-runtime
	$(VENV)/bin/llmdiag preflight
	@echo "(llmdiag is installed in $(VENV): '. $(VENV)/bin/activate' puts it on this shell's PATH)"

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -m "$(FAST_MARKERS)" $(PYTEST_ARGS)

# Re-measure which tests are slow (tests/durations.json; tests/conftest.py marks those over SLOW_S).
test-durations: setup
	LLMDIAG_RECORD_DURATIONS=1 $(PY) -m pytest -m "not (distributed or cluster or browser or ops or gpu)" $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
