#!/bin/sh
# Put into .whl/ (ignored by git) what the GPU machine lacks for bench/gpu_validate.py:
# llmdiag's own wheel built for CPython 3.12 (the machine's python3) and google-re2 for
# CPython 3.12 manylinux x86-64. Everything else llmdiag needs (click, rich, psutil,
# nvidia-ml-py, numpy, PyYAML, prometheus-client, torch with CUDA) is in that machine's image
# (/work/.library/device/KINDS.md). Runbook: docs/gpu-validation.md.
#
#   sh bench/gpu_validate_prepare.sh            # PY312=/path/to/python3.12 to choose the builder
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
is312() { "$1" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1; }
if [ -z "${PY312:-}" ]; then
    for c in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
        if is312 "$c"; then PY312=$c; break; fi
    done
fi
if [ -z "${PY312:-}" ] || ! is312 "$PY312"; then
    echo "error: no CPython 3.12 to build llmdiag's wheel with (set PY312=...)" >&2
    exit 2
fi
rm -rf .whl
mkdir .whl
"$PY312" -m pip wheel -q --no-deps -w .whl .
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl "google-re2>=1.1"
n=$(ls .whl/*.whl | wc -l)
if [ "$n" -ne 2 ]; then
    echo "error: expected 2 wheels in .whl/, found $n" >&2
    exit 1
fi
ls -l .whl
du -sh .whl
