"""Arguments and results: zero-copy in and out, conversions, errors, threads."""

import threading

import numpy as np
import pytest

import ravel
from ravel import _arrays

SRC = """
size T in 1..64
input X : f32[T, 8]
input W : f32[4, 8]
Y[i, j] = sum(k < 8) X[i, k] * W[j, k]
"""


@pytest.fixture(scope="module")
def mod():
    return ravel.parse(SRC, name="mm.rv")


@pytest.fixture(scope="module")
def prog(mod):
    return mod.compile()


def data(T=5, seed=0):
    rng = np.random.default_rng(seed)
    x = ravel.empty((T, 8), np.float32)
    x[...] = rng.standard_normal((T, 8))
    w = rng.standard_normal((4, 8)).astype(np.float32)
    return x, w


def test_call(prog):
    x, w = data()
    y = prog(X=x, W=w, T=5)["Y"]
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-5, atol=1e-5)


def test_aligned_input_is_not_copied():
    x, _ = data()
    b = _arrays.wrap_numpy(x, "X")
    assert b.keep is x  # the rv_array wraps x's own memory
    b.close()
    off = ravel.empty(8 * 5 + 1, np.float32)[1:].reshape(5, 8)  # 4 bytes off alignment
    b = _arrays.wrap_numpy(off, "X")
    assert b.keep is not off and b.keep.ctypes.data % 64 == 0
    b.close()


def test_misaligned_and_strided_inputs(prog):
    x, w = data()
    off = ravel.empty(8 * 5 + 1, np.float32)[1:].reshape(5, 8)
    off[...] = x
    wt = np.asfortranarray(w)
    np.testing.assert_allclose(prog(X=off, W=wt, T=5)["Y"], prog(X=x, W=w, T=5)["Y"])


def test_result_is_a_view_of_ravel_memory(prog):
    x, w = data()
    res = prog(X=x, W=w, T=5)
    y = res["Y"]
    assert not y.flags.owndata and y.ctypes.data % 64 == 0
    assert y.base is not None and y.flags.writeable
    del res
    import gc
    gc.collect()
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-5, atol=1e-5)  # the view kept it alive


def test_out_arrays(prog):
    x, w = data()
    y = ravel.empty((5, 4), np.float32)
    res = prog(X=x, W=w, T=5, out={"Y": y})
    assert res["Y"] is y
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-5, atol=1e-5)
    with pytest.raises(ravel.ArgumentError, match="aligned"):
        prog(X=x, W=w, T=5, out={"Y": ravel.empty(5 * 4 + 1, np.float32)[1:].reshape(5, 4)})
    with pytest.raises(ravel.ArgumentError, match="output Y"):
        prog(X=x, W=w, T=5, out={"Y": ravel.empty((5, 5), np.float32)})
    with pytest.raises(ravel.ArgumentError, match="missing: Y"):
        prog(X=x, W=w, T=5, out={})


def test_lists_are_converted(mod):
    res = mod.run_interp(X=[[1.0] * 8], W=[[0.5] * 8] * 4, T=1)
    np.testing.assert_allclose(res["Y"], [[4.0] * 4])


def test_wrong_dtype_is_a_shape_error(prog):
    x, w = data()
    with pytest.raises(ravel.ShapeError, match="input X: expected a f32 array, got f64"):
        prog(X=x.astype(np.float64), W=w, T=5)


def test_wrong_shape(prog):
    x, w = data()
    with pytest.raises(ravel.ShapeError, match="input X") as e:
        prog(X=x, W=w, T=6)
    assert isinstance(e.value, ValueError)


def test_unknown_name_suggests(prog):
    x, w = data()
    with pytest.raises(ravel.ArgumentError, match="did you mean 'W'"):
        prog(X=x, w=w, T=5)


def test_missing_and_out_of_range_size(prog):
    x, w = data()
    with pytest.raises(ravel.ArgumentError, match="size T is not bound"):
        prog(W=w)  # (X's shape would determine T)
    with pytest.raises(ravel.BoundsError, match="outside declared range 1..64"):
        prog(X=x, W=w, T=65)
    with pytest.raises(ravel.ArgumentError, match="expected an integer"):
        prog(X=x, W=w, T=5.0)


def test_output_is_not_an_argument(prog):
    x, w = data()
    with pytest.raises(ravel.ArgumentError, match="computed by the program"):
        prog(X=x, W=w, T=5, Y=x)


def test_unsupported_numpy_dtype(prog):
    x, w = data()
    with pytest.raises(ravel.ArgumentError, match="float16"):
        prog(X=x.astype(np.float16), W=w, T=5)


def test_threads(mod):
    x, w = data(T=40)
    want = mod.compile(threads=1)(X=x, W=w, T=40)["Y"]
    p4 = mod.compile(threads=4)
    assert p4.threads == 4
    np.testing.assert_array_equal(p4(X=x, W=w, T=40)["Y"], want)
    for bad in (0, -1, 1.5):
        with pytest.raises(ravel.ArgumentError, match="threads"):
            mod.compile(threads=bad)


def test_one_program_from_many_threads(prog):
    x, w = data(T=33)
    want = prog(X=x, W=w, T=33)["Y"]
    bad = []

    def worker():
        for _ in range(50):
            if not np.array_equal(prog(X=x, W=w, T=33)["Y"], want):
                bad.append(1)

    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


def test_arguments_as_a_dict():
    m = ravel.parse("size N in 1..8\ninput out : f32[N]\ninput weights : f32[N]\n"
                    "Y[i] = out[i] + weights[i]\n")
    one = np.ones(3, np.float32)
    for run in (m.compile(), m.run_interp):
        y = run({"out": one, "weights": 2 * one}, N=3)["Y"]
        np.testing.assert_array_equal(y, 3 * one)


def test_sizes_inferred_from_shapes(prog):
    from ravel._lib import has
    if not has("rv_bindings_infer_sizes"):
        pytest.skip("this libravel does not infer sizes")
    x, w = data(T=7)
    np.testing.assert_array_equal(prog(X=x, W=w)["Y"], prog(X=x, W=w, T=7)["Y"])
    with pytest.raises(ravel.ShapeError):
        prog(X=x, W=w, T=6)  # contradicts X
