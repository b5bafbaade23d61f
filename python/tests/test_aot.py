"""AOT libraries (`ravel build --shared`) loaded and called from Python."""

import subprocess

import numpy as np
import pytest

from conftest import REPO, assert_close

import ravel


def build(ravel_bin, tmp_path, example, name):
    out = tmp_path / name
    subprocess.run([ravel_bin, "build", str(REPO / "examples" / example), "-o", str(out),
                    "--shared"], check=True, capture_output=True)
    return tmp_path / ("lib%s.so" % name)


@pytest.fixture(scope="module")
def ragged_lib(ravel_bin, tmp_path_factory):
    return build(ravel_bin, tmp_path_factory.mktemp("aot"), "ragged_elementwise.rv", "rag")


def test_fields(ragged_lib):
    lib = ravel.load_library(ragged_lib)
    assert lib.name == "rag"
    assert [(f.name, f.kind, f.dtype.name) for f in lib.fields] == [
        ("B", "size", "int64"), ("len", "ufun", "int32"), ("A", "input", "float32"),
        ("O", "output", "float32")]


def test_ragged_matches_interpreter(ragged_lib):
    m = ravel.load(REPO / "examples" / "ragged_elementwise.rv")
    args = m.random_args(5)
    want = m.run_interp(**args)["O"]
    flat = ravel.load_library(ragged_lib)(**args)["O"]
    assert_close(flat, want.values, np.float32)  # without the module: canonical 1-D
    shaped = ravel.load_library(ragged_lib, module=m)(**args)["O"]
    assert isinstance(shaped, ravel.Ragged)
    assert [len(r) for r in shaped] == list(args["len"])


@pytest.mark.parametrize("example", ["softmax.rv", "embedding.rv", "trmm.rv"])
def test_dense_matches_interpreter(ravel_bin, tmp_path, example):
    m = ravel.load(REPO / "examples" / example)
    lib = ravel.load_library(build(ravel_bin, tmp_path, example, "model"), module=m)
    args = m.random_args(3)
    got = lib(**args)
    want = m.run_interp(**args)
    for name, info in m.outputs.items():
        assert_close(got[name], want[name], info.dtype)


def test_errors(ragged_lib):
    lib = ravel.load_library(ragged_lib)
    with pytest.raises(ravel.ArgumentError, match="size B is not given"):
        lib(len=[1], A=np.zeros(1, np.float32))
    with pytest.raises(ravel.ArgumentError, match="did you mean 'len'"):
        lib(B=1, Len=[1], A=np.zeros(1, np.float32))
    with pytest.raises(ravel.ShapeError, match="input A: expected 3 elements, got 2"):
        lib(B=2, len=[1, 2], A=np.zeros(2, np.float32))
    with pytest.raises(ravel.ShapeError, match="expected a float32 array"):
        lib(B=1, len=[1], A=np.zeros(1, np.float64))
    with pytest.raises(ravel.BoundsError, match="rag_run"):
        lib(B=1, len=[600], A=np.zeros(600, np.float32))
    with pytest.raises(ravel.FileError):
        ravel.load_library("/nonexistent/libx.so")


# A library whose NAME_field has grown members after the five read today
# (shapes, as a later `ravel build` may add): the table is walked by its
# symbol's size, so the fields still come out right.
GROWN = r"""
#include <stddef.h>
#include <stdint.h>
typedef struct g_args { int64_t N; const float *X; float *Y; } g_args;
typedef struct g_field {
    const char *name; int kind; const char *dtype; size_t offset;
    int64_t (*numel)(const g_args *);
    int ndim; const char *shape; int64_t more[3];
} g_field;
int64_t g_numel_X(const g_args *a) { return a->N * 2; }
int32_t g_run(const g_args *a, void *ctx) {
    (void)ctx;
    if (a->N < 1) return 2;
    for (int64_t i = 0; i < a->N * 2; i++) a->Y[i] = 3 * a->X[i];
    return 0;
}
const g_field g_fields[] = {
    {"N", 0, "i64", offsetof(g_args, N), NULL, 0, "", {0}},
    {"X", 2, "f32", offsetof(g_args, X), g_numel_X, 2, "N, 2", {0}},
    {"Y", 3, "f32", offsetof(g_args, Y), g_numel_X, 2, "N, 2", {0}},
};
const int g_num_fields = 3;
"""


def test_grown_field_table(tmp_path):
    src = tmp_path / "g.c"
    src.write_text(GROWN)
    so = tmp_path / "libg.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    lib = ravel.load_library(so)
    assert [(f.name, f.kind) for f in lib.fields] == [("N", "size"), ("X", "input"),
                                                        ("Y", "output")]
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(lib(N=3, X=x)["Y"], 3 * x)
    with pytest.raises(ravel.BoundsError, match="g_run"):
        lib(N=0, X=np.zeros(0, np.float32))


def test_weights(ragged_lib, tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, A=np.arange(3, dtype=np.float32), unrelated=np.zeros(2))
    out = ravel.load_library(ragged_lib)(B=2, len=[1, 2], weights=path)["O"]
    np.testing.assert_array_equal(out, [0, 2, 4])
