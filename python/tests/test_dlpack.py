"""DLPack: any __dlpack__ producer in, results out to other frameworks."""

import numpy as np
import pytest

import ravel

SRC = "size N in 1..64\ninput X : f32[N, 3]\nY[i, j] = 2 * X[i, j]\n"


class Producer:
    """A foreign tensor: only the DLPack protocol, over a NumPy array."""

    def __init__(self, a):
        self.a = a
        self.exported = 0

    def __dlpack__(self, stream=None):
        self.exported += 1
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


@pytest.fixture(scope="module")
def prog():
    return ravel.parse(SRC).compile()


@pytest.mark.parametrize("layout", ["aligned", "misaligned", "strided"])
def test_dlpack_in(prog, layout):
    x = ravel.empty((4, 3), np.float32)
    x[...] = np.arange(12).reshape(4, 3)
    if layout == "misaligned":
        x = ravel.empty(13, np.float32)[1:].reshape(4, 3)
        x[...] = np.arange(12).reshape(4, 3)
    elif layout == "strided":
        x = np.ascontiguousarray(np.arange(24, dtype=np.float32).reshape(4, 6))[:, ::2]
    p = Producer(x)
    y = prog(X=p, N=4)["Y"]
    assert p.exported >= 1  # twice when strided: ravel refuses, NumPy copies
    np.testing.assert_array_equal(y, 2 * x)


def test_dlpack_borrows_aligned_memory(prog):
    from ravel import _arrays
    from ravel._lib import lib
    x = ravel.empty((4, 3), np.float32)
    b = _arrays.from_dlpack(Producer(x), "X")
    assert lib.rv_array_data(b.ptr) == x.ctypes.data  # no copy
    b.close()  # runs NumPy's deleter


def test_dlpack_out(prog):
    x = np.ones((4, 3), np.float32)
    y = prog(X=x, N=4)["Y"]
    z = np.from_dlpack(y)
    assert np.shares_memory(y, z)


def test_torch_in_and_out(prog):
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    y = prog(X=x, N=4)["Y"]
    t = torch.from_dlpack(y)
    assert t.data_ptr() == y.ctypes.data  # zero copy out
    assert torch.equal(t, 2 * x)
    with pytest.raises(ravel.ShapeError):
        prog(X=x.double(), N=4)


def test_torch_zero_copy_strided_and_ufuns(prog):
    torch = pytest.importorskip("torch")
    from ravel import _arrays
    from ravel._lib import lib
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    b = _arrays.from_dlpack(x, "X")
    assert lib.rv_array_data(b.ptr) == x.data_ptr()  # torch's CPU memory is 64-byte aligned
    b.close()
    xt = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()  # strided: copied
    assert torch.equal(torch.from_dlpack(prog(X=xt, N=4)["Y"]), 2 * xt)
    from conftest import REPO
    rag = ravel.load(REPO / "examples" / "ragged_elementwise.rv").compile()
    O = rag(B=2, len=torch.tensor([2, 3], dtype=torch.int32), A=torch.ones(5))["O"]
    assert torch.equal(torch.from_dlpack(O.values), torch.full((5,), 2.0))
    assert [len(r) for r in O] == [2, 3]
