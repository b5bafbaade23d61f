#!/bin/sh
# bench/encoder/setup.sh — the Python side of the encoder baselines: a
# virtual environment with the newest PyTorch on PyPI (2.x: the jagged
# nested-tensor layout and scaled_dot_product_attention, which Debian's 1.13
# lacks) and numpy. Never needed by `make test`.
#
#   sh bench/encoder/setup.sh            # venv in bench/encoder/.venv
#   ENCODER_VENV=/path sh bench/encoder/setup.sh
#
# The PyTorch CPU wheel index is tried first (a small wheel); where it is not
# reachable the PyPI wheel is installed (it pulls the CUDA libraries, which
# the CPU runs load but never use). OpenBLAS for the packed C baseline comes
# from bench/setup.sh (Debian packages).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
VENV=${ENCODER_VENV:-$here/.venv}
PY=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
if ! "$VENV/bin/python" -m pip install -q --index-url https://download.pytorch.org/whl/cpu torch 2>/dev/null; then
    echo "setup.sh: CPU wheel index not reachable; installing torch from PyPI" >&2
    "$VENV/bin/python" -m pip install -q torch
fi
"$VENV/bin/python" -m pip install -q numpy
"$VENV/bin/python" -c 'import torch, numpy; print("setup.sh: torch", torch.__version__, "numpy", numpy.__version__)'
