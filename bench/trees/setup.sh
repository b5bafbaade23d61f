#!/bin/sh
# bench/trees/setup.sh — create the virtual environment the trees baselines
# run in: NumPy, PyTorch (CPU wheel) and DyNet (the dynet38 wheel). Never
# part of `make test` or the test suite's requirements.
#
#   sh bench/trees/setup.sh            # creates bench/trees/.venv
#   TREES_VENV=/path sh bench/trees/setup.sh
#   TREES_PYTHON=python3.11 ...        # the interpreter to build it from
#
# DyNet's PyPI wheel (dynet38 2.1.x) is built for CPython <= 3.11 only, so
# the venv needs a 3.11 (or older) interpreter. PyTorch comes from PyTorch's
# CPU index when it is reachable (no CUDA libraries: ~200 MB instead of
# ~5 GB) and from PyPI otherwise (the CUDA build; it runs on the CPU just
# the same). Idempotent.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${TREES_VENV:-$HERE/.venv}
PY=${TREES_PYTHON:-python3.11}

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
fi
P="$VENV/bin/python"

"$P" -c "import numpy" 2>/dev/null || "$P" -m pip install -q numpy
if ! "$P" -c "import torch" 2>/dev/null; then
    # One short try at the CPU index (unreachable from some sandboxes).
    "$P" -m pip install -q --timeout 15 --retries 1 torch --index-url https://download.pytorch.org/whl/cpu ||
        "$P" -m pip install -q torch
fi
"$P" -c "import dynet" 2>/dev/null || "$P" -m pip install -q dynet38

"$P" - <<'PYEOF'
import numpy, torch, dynet
print("setup.sh: numpy", numpy.__version__, "torch", torch.__version__,
      "dynet ok; venv", __import__("sys").prefix)
PYEOF
