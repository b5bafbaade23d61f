"""Shared fixtures: where the repository, its build and examples are.

The suite runs against the package as installed (pip install ./python)
and the library in $RAVEL_LIBRARY (tests/suite_python.sh sets both);
BUILD names the build directory of `ravel build` (default build/).
"""

import os
import pathlib
import re

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = REPO / os.environ.get("BUILD", "build")
EXAMPLES = sorted((REPO / "examples").glob("*.rv"))


def _sst_dir():
    """The Stanford Sentiment Treebank, where tests/harness.h looks for it:
    $RAVEL_SST_DIR, else the project's shared data; None when absent."""
    env = os.environ.get("RAVEL_SST_DIR")
    if env:
        return env
    for d in (REPO.parent / "shared", REPO.parents[1] / "shared", pathlib.Path("/work/shared")):
        if (d / "data" / "sst" / "STree.txt").exists():
            return str(d / "data" / "sst")
    return None


SST_DIR = _sst_dir()


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="session")
def ravel_bin():
    path = BUILD / "ravel"
    if not path.exists():
        pytest.skip("%s not built" % path)
    return str(path)


def assert_close(got, want, dtype):
    """Compiled results against the interpreter's, with the tolerance of
    docs/ir.md: 1e-4 relative to the magnitude for f32, 1e-10 for f64,
    integers exactly."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    if np.dtype(dtype).kind in "iu":
        np.testing.assert_array_equal(got, want)
        return
    tol = 1e-4 if np.dtype(dtype) == np.float32 else 1e-10
    scale = max(1.0, float(np.nanmax(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


@pytest.fixture(params=["fast", "ctypes"])
def call_path(request, monkeypatch):
    """Runs a test on both paths of a recursive model's call: ravel._fast
    (python/ravel/_fast.c; skipped where it is not built) and ctypes."""
    from ravel import _fastpath
    if request.param == "fast":
        if _fastpath.fast is None:
            pytest.skip("ravel._fast is not built")
    else:
        monkeypatch.setattr(_fastpath, "fast", None)
    return request.param


@pytest.fixture
def ctypes_path(monkeypatch):
    """The ctypes path only (ravel._fast set aside), for tests of its calls."""
    from ravel import _fastpath
    monkeypatch.setattr(_fastpath, "fast", None)
