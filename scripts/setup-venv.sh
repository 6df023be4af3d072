#!/bin/sh
# Create the virtual environment and install llmdiag into it: the runtime only (EXTRAS empty,
# what `make preflight` needs), or with extras (EXTRAS=test for the test targets).
#
# torch: if the base interpreter already has torch, the venv reuses it through
# --system-site-packages and nothing replaces it; otherwise $TORCH_SPEC (a CPU build by
# default on this kind of machine) is installed. A CUDA build is never pulled implicitly,
# because torch is not a dependency in pyproject.toml.
set -eu
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
TORCH_PIP_ARGS=${TORCH_PIP_ARGS:-}
EXTRAS=${EXTRAS-test}

if [ ! -x "$VENV/bin/python" ]; then
    if "$PYTHON" -c "import torch" >/dev/null 2>&1; then
        echo "setup: reusing the torch of $PYTHON ($("$PYTHON" -c 'import torch; print(torch.__version__)'))"
        "$PYTHON" -m venv --system-site-packages "$VENV"
    else
        "$PYTHON" -m venv "$VENV"
    fi
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    echo "setup: installing $TORCH_SPEC"
    # shellcheck disable=SC2086
    "$PY" -m pip install -q $TORCH_PIP_ARGS "$TORCH_SPEC"
fi
# The torch in place is a constraint for everything installed next: a test extra that asks for
# torch (accelerate, Lightning) can neither upgrade it nor pull a CUDA build beside it.
CONSTRAINT="$VENV/torch-constraint.txt"
"$PY" -c 'import torch; print("torch==" + torch.__version__)' > "$CONSTRAINT"
# PYTHONWARNINGS: setuptools prints a boxed note on every editable install about folders named
# like the package taking precedence; the repository has no llmdiag/ folder (setup.py maps
# diag/ to llmdiag), so the note does not apply and would only hide real messages.
PYTHONWARNINGS=ignore "$PY" -m pip install -q -c "$CONSTRAINT" -e ".${EXTRAS:+[$EXTRAS]}"
echo "setup: ready ($("$PY" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo 'torch missing'))"
