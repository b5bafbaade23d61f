"""Ragged tensors in and out: flat values in canonical order plus row starts."""

import numpy as np
import pytest

from conftest import REPO, assert_close

import ravel


@pytest.fixture(scope="module")
def elementwise():
    m = ravel.load(REPO / "examples" / "ragged_elementwise.rv")
    return m, m.compile()


def test_rows_out(elementwise):
    m, prog = elementwise
    lens = np.array([3, 1, 5], np.int32)
    rows = [np.arange(n, dtype=np.float32) + 10 * b for b, n in enumerate(lens)]
    out = prog(B=3, len=lens, A=rows)["O"]
    assert isinstance(out, ravel.Ragged)
    assert len(out) == 3 and out.dims == ("b", "l") and out.shape == (3, None)
    assert out.values.shape == (9,)  # packed: the storage padding is not part of it
    np.testing.assert_array_equal(out.starts(1), [0, 3, 4, 9])
    assert out.starts(0) is None
    for b in range(3):
        np.testing.assert_array_equal(out[b], 2 * rows[b])
        assert np.shares_memory(out[b], out.values)  # rows are views
    assert out[-1].shape == (5,)
    assert out.tolist()[1] == [20.0]
    with pytest.raises(IndexError):
        out[3]


def test_ragged_in_every_form(elementwise):
    m, prog = elementwise
    args = m.random_args(4)
    want = m.run_interp(**args)["O"]
    A = args["A"]
    assert isinstance(A, ravel.Ragged)
    for given in (A, A.values, [np.asarray(r) for r in A], [r.tolist() for r in A]):
        got = prog(**dict(args, A=given))["O"]
        assert_close(got.values, want.values, np.float32)
    # a result fed back in
    again = prog(**dict(args, A=want))["O"]
    assert_close(again.values, 2 * want.values, np.float32)


def test_ragged_wrong_count(elementwise):
    m, prog = elementwise
    with pytest.raises(ravel.ShapeError, match="ragged layout needs 4 elements"):
        prog(B=2, len=[1, 3], A=np.zeros(5, np.float32))


def test_ufun_out_of_range(elementwise):
    m, prog = elementwise
    with pytest.raises(ravel.BoundsError, match="len"):
        prog(B=2, len=[0, 3], A=np.zeros(3, np.float32))


def test_dense_rows_of_a_ragged_tensor():
    m = ravel.load(REPO / "examples" / "ragged_softmax.rv")
    args = m.random_args(2, B=3, len=np.array([2, 5, 1]))
    P = m.compile()(**args)["P"]
    assert P.shape == (3, 8, None, None)
    assert [P[b].shape for b in range(3)] == [(8, 2, 2), (8, 5, 5), (8, 1, 1)]
    np.testing.assert_allclose(P[1].sum(axis=-1), np.ones((8, 5)), rtol=1e-5)


def test_nested_ragged_levels():
    m = ravel.parse("size N in 1..8\ninput X : f32[i < N, j < i + 1, k < j + 1]\n"
                    "Y[i, j, k] = X[i, j, k] + 1\n")
    x = m.random_args(1, N=3)["X"]
    lay = m.layout("X", N=3)
    assert lay.extents == (3, -1, -1) and lay.counts == (1, 3, 6, 10)
    y = m.compile()(N=3, X=x)["Y"]
    # row i holds i + 1 rows of 1..i+1 elements: not dense, so a list
    assert isinstance(y[2], list) and [r.shape for r in y[2]] == [(1,), (2,), (3,)]
    assert isinstance(y[0], np.ndarray) and y[0].shape == (1, 1)
    np.testing.assert_allclose(y.values, x.values + 1)
    # nested lists as input
    nested = [[list(r) for r in row] if isinstance(row, list) else row.tolist() for row in x]
    y2 = m.run_interp(N=3, X=nested)["Y"]
    np.testing.assert_allclose(y2.values, y.values)
