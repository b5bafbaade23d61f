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
    # (a library with NAME_field_infos says it by shape)
    with pytest.raises(ravel.ShapeError,
                       match=r"input A: expected (3 elements, got 2|shape \(3,\), got \(2,\))"):
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


# A library with what a newer `ravel build` adds beside NAME_fields:
# NAME_field_infos (rank, shape function, declaration, size range),
# NAME_args_size, NAME_last_error naming the field, NAME_set_num_threads.
NEWER = r"""
#include <stddef.h>
#include <stdint.h>
typedef struct n_args { int64_t N; const float *X; float *Y; int64_t hidden; } n_args;
typedef struct n_field {
    const char *name; int kind; const char *dtype; size_t offset;
    int64_t (*numel)(const n_args *);
} n_field;
typedef struct n_field_info {
    int ndim; int (*shape)(const n_args *, int64_t *); const char *decl; int64_t lo, hi;
} n_field_info;
static const char *err = "";
static int threads = 1;
int64_t n_numel_X(const n_args *a) { return a->N * 2; }
static int n_shape_X(const n_args *a, int64_t *d) { d[0] = a->N; d[1] = 2; return 2; }
int32_t n_run(const n_args *a, void *ctx) {
    (void)ctx;
    if (a->hidden != 0) { err = "hidden member not zero"; return 2; }
    if (a->N > 4) { err = "size N = 5 is outside its declared range 1..4"; return 2; }
    for (int64_t i = 0; i < a->N * 2; i++) a->Y[i] = a->X[i] + 1;
    err = "";
    return 0;
}
const char *n_last_error(void) { return err; }
int32_t n_set_num_threads(int32_t n) { threads = n ? n : 3; return threads; }
int32_t n_num_threads(void) { return threads; }
const n_field n_fields[] = {
    {"N", 0, "i64", offsetof(n_args, N), NULL},
    {"X", 2, "f32", offsetof(n_args, X), n_numel_X},
    {"Y", 3, "f32", offsetof(n_args, Y), n_numel_X},
};
const int n_num_fields = 3;
const n_field_info n_field_infos[] = {
    {0, NULL, "size N in 1..4", 1, 4},
    {2, n_shape_X, "X : f32[N, 2]", 0, 0},
    {2, n_shape_X, "Y[i, j] = X[i, j] + 1", 0, 0},
};
const size_t n_args_size = sizeof(n_args);
"""


def test_newer_library_tables(tmp_path):
    src = tmp_path / "n.c"
    src.write_text(NEWER)
    so = tmp_path / "libn.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    lib = ravel.load_library(so, threads=2)
    assert lib.num_threads == 2 and lib.set_num_threads(0) == 3
    assert lib.fields[0].range == (1, 4) and lib.fields[1].decl == "X : f32[N, 2]"
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    y = lib(N=3, X=x)["Y"]
    assert y.shape == (3, 2)  # shaped by NAME_field_infos, without the module
    np.testing.assert_array_equal(y, x + 1)
    with pytest.raises(ravel.ShapeError, match=r"input X: expected shape \(3, 2\), got \(2, 3\)"):
        lib(N=3, X=x.reshape(2, 3))
    with pytest.raises(ravel.BoundsError, match="n_run: size N = 5 is outside"):
        lib(N=5, X=np.zeros((5, 2), np.float32))


def test_threads(ravel_bin, tmp_path):
    usage = subprocess.run([ravel_bin, "build", "--help"], capture_output=True, text=True)
    if "--threads" not in usage.stdout + usage.stderr:
        pytest.skip("this ravel build has no --threads")
    out = tmp_path / "sm"
    subprocess.run([ravel_bin, "build", str(REPO / "examples" / "softmax.rv"), "-o", str(out),
                    "--shared", "--threads", "2"], check=True, capture_output=True)
    m = ravel.load(REPO / "examples" / "softmax.rv")
    lib = ravel.load_library(tmp_path / "libsm.so", threads=3)
    assert lib.num_threads == 3
    args = m.random_args(4, N=40)
    got = lib(**args)["P"]
    assert got.shape == (40, 1024)  # NAME_field_infos
    assert_close(got, m.run_interp(**args)["P"], np.float32)
