# Two-command quick start:   make preflight   |   make test
# Both create ./.venv (Python 3.10+), install llmdiag into it, and then run.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# The CPU build of torch used when no torch is importable. Override TORCH_SPEC / TORCH_PIP_ARGS
# (e.g. TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu") on other machines.
TORCH_SPEC     ?= torch==2.13.0
TORCH_PIP_ARGS ?=

.PHONY: setup setup-test preflight test lint clean

$(VENV)/.installed: pyproject.toml setup.py diag/logs/_fastscan.c scripts/setup-venv.sh
	PYTHON=$(PYTHON) VENV=$(VENV) TORCH_SPEC="$(TORCH_SPEC)" TORCH_PIP_ARGS="$(TORCH_PIP_ARGS)" sh scripts/setup-venv.sh
	touch $@

setup: $(VENV)/.installed

preflight: setup
	$(VENV)/bin/llmdiag preflight

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
