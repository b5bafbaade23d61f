"""Program.bind: weights bound once, the per-call inputs on each call; a
param's packed layout is made once, not per call."""

import numpy as np
import pytest

import ravel

SRC = """
size N in 1..300
param W : f32[48, 40]
input x : f32[N, 40]
Y[n, j < 48] = sum(l < 40) W[j, l] * x[n, l]
output Y
schedule Y {
    W_pk = cache_read(W, layout="l, j")
    parallel(n)
    jo, ji = split(j, 16)
    vectorize(ji)
}
"""


@pytest.fixture(scope="module")
def prog():
    return ravel.parse(SRC).compile()


def draw(shape, seed):
    a = ravel.empty(shape, np.float32)
    a[...] = np.random.default_rng(seed).uniform(-1, 1, shape)
    return a


def fills(p):
    return p.stats()["pack_fills"]


def test_bound_packs_once(prog):
    w = draw((48, 40), 1)
    model = prog.bind(W=w)
    f0 = fills(prog)
    outs = []
    for i, n in enumerate([3, 17, 5]):
        x = draw((n, 40), 10 + i)
        y = model(x=x)["Y"]  # N inferred from x per call
        np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)
        outs.append((y, x))
    assert fills(prog) == f0 + 1
    for y, x in outs:  # each call's results are its own
        np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)
    # calling the program binds W anew every call
    prog(W=w, x=outs[0][1])
    prog(W=w, x=outs[0][1])
    assert fills(prog) == f0 + 3


def test_bound_in_place_write_needs_invalidate(prog):
    w = draw((48, 40), 2)
    x = draw((7, 40), 3)
    model = prog.bind(W=w)
    model(x=x)
    w *= -0.5  # in place: the promise of a param is broken ...
    model.invalidate()  # ... and said so
    np.testing.assert_allclose(model(x=x)["Y"], x @ w.T, rtol=1e-4, atol=1e-4)
    # binding again is the other way
    w += 0.25
    np.testing.assert_allclose(prog.bind(W=w)(x=x)["Y"], x @ w.T, rtol=1e-4, atol=1e-4)


def test_bound_overrides_and_out(prog):
    w, w2 = draw((48, 40), 4), draw((48, 40), 5)
    x = draw((9, 40), 6)
    model = prog.bind({"W": w}, N=9)
    np.testing.assert_allclose(model(W=w2, x=x)["Y"], x @ w2.T, rtol=1e-4, atol=1e-4)
    out = ravel.empty((9, 48), np.float32)
    assert model(x=x, out={"Y": out})["Y"] is out
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-4, atol=1e-4)
    with pytest.raises(ravel.ShapeError):
        model(x=draw((4, 40), 7))  # N = 9 is bound; x has 4 rows
    with pytest.raises(ravel.ArgumentError, match="no size, ufun or input named 'V'"):
        prog.bind(V=w)


def test_bound_weights_file(prog, tmp_path):
    w = draw((48, 40), 8)
    path = tmp_path / "w.npz"
    np.savez(path, W=w)
    model = prog.bind(weights=str(path))
    x = draw((2, 40), 9)
    y = model(x=x)["Y"]
    del model  # the results keep the weights they were computed from alive
    np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)


def test_bound_reuses_memory_without_stale_results(prog):
    """A Bound's calls reuse one bindings object and its result arrays
    (rv_bindings_reset; a smaller result in a larger one's memory): bigger,
    smaller, bigger batches each give their own values, never a previous
    call's, and results kept alive are never written by later calls."""
    w = draw((48, 40), 8)
    model = prog.bind(W=w)
    addr = []
    for n in [20, 5, 20, 1, 33, 2]:
        x = draw((n, 40), 100 + n)
        y = model(x=x)["Y"]
        assert y.shape == (n, 48)
        np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)
        addr.append(y.ctypes.data)
        del y  # gone: the next call may reuse its memory
    assert addr[0] == addr[1] == addr[2] == addr[3]  # 20 rows' memory holds 5, 20, 1
    assert addr[5] in (addr[0], addr[4])
    # results alive are the caller's: later calls write elsewhere
    x1, x2 = draw((6, 40), 201), draw((6, 40), 202)
    y1 = model(x=x1)["Y"]
    row = y1[2]  # a view keeps them alive too
    del y1
    y2 = model(x=x2)["Y"]
    assert not np.shares_memory(row, y2)
    np.testing.assert_allclose(row, (x1 @ w.T)[2], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y2, x2 @ w.T, rtol=1e-4, atol=1e-4)
    # nothing of one call's arguments stays bound for the next
    with pytest.raises(ravel.Error, match="not bound"):
        model()  # x (and N from its shape) were the previous call's


def test_bound_concurrent_calls(prog):
    """Calls on one Bound from several threads at once: each gets bindings
    of its own, so every result is its own call's."""
    import threading

    w = draw((48, 40), 9)
    model = prog.bind(W=w)
    errors = []

    def worker(t):
        try:
            for i in range(40):
                n = 1 + (7 * t + 13 * i) % 40
                x = draw((n, 40), 1000 * t + i)
                y = model(x=x)["Y"]
                np.testing.assert_allclose(y, x @ w.T, rtol=1e-4, atol=1e-4)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]
    assert len(model._idle) <= model._POOL


TWO = """
size N in 1..300
input W : f32[48, 40]
input x : f32[N, 40]
Y[n, j < 48] = sum(l < 40) W[j, l] * x[n, l]
Z[n, j < 48] = Y[n, j] * 2.0
output Y, Z
"""


@pytest.mark.parametrize("one_call_info", [True, False])
def test_bound_results_of_several_outputs(one_call_info, monkeypatch):
    """Each call's results keep its bindings from reuse while any one of
    them (or a view of one) is alive, whichever output it is; with the
    library's rv_bindings_get_info (one call per result) and without it
    (an older library: four calls), the same views."""
    from ravel import _bindings

    monkeypatch.setattr(_bindings, "_HAS_INFO", one_call_info and _bindings._HAS_INFO)
    w = draw((48, 40), 5)
    model = ravel.parse(TWO).compile().bind(W=w)
    x1, x2 = draw((7, 40), 301), draw((7, 40), 302)
    r1 = model(x=x1)
    z1 = r1["Z"][1:]  # only a view of the second output stays
    del r1
    r2 = model(x=x2)
    for k in "YZ":
        assert r2[k].shape == (7, 48) and r2[k].dtype == np.float32
        assert not np.shares_memory(z1, r2[k])
    np.testing.assert_allclose(z1, 2 * (x1 @ w.T)[1:], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(r2["Y"], x2 @ w.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(r2["Z"], 2 * (x2 @ w.T), rtol=1e-4, atol=1e-4)
    del z1, r2
    y3 = model(x=x1[:3])["Y"]  # everything gone: a pooled bindings object computes it
    np.testing.assert_allclose(y3, (x1 @ w.T)[:3], rtol=1e-4, atol=1e-4)
    assert len(model._idle) <= model._POOL
