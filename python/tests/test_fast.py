"""ravel._fast (python/ravel/_fast.c), the compiled hot path of a recursive
model's call (Structs.build_linear, then a Bound called with the batch's
structure only), against the ctypes path it replaces: the same results
bit for bit on changing batches (and the interpreter's), the same
exceptions and messages for bad input, no memory kept from call to call,
results that outlive the model, concurrent calls from threads, and the
package without the module."""

import gc
import os
import subprocess
import sys
import sysconfig
import threading
import tracemalloc

import numpy as np
import pytest

from conftest import REPO

import ravel
from ravel import _fastpath
from test_structs import TREERNN

# TREERNN's two-output sibling (its sizes and structure): a TreeLSTM-like
# cell whose outputs are h and C
TWO_OUTPUTS = TREERNN[:TREERNN.index("input Emb")] + """param Emb : f32[10, 4]
param U : f32[4, 4]
recurse R over T {
    x[n, i < 4] = if word[n] >= 0 then Emb[word[n], i] else 0.0
    hs[n, i < 4] = sum(k < nchild[n]) h[child[n, k], i]
    c[n, i < 4] = tanh(x[n, i] + sum(l < 4) U[i, l] * hs[n, l])
                  + sum(k < nchild[n]) 0.5 * c[child[n, k], i]
    h[n, i < 4] = sigmoid(c[n, i]) * tanh(c[n, i])
}
C[n, i] = c[n, i]
"""


def need_fast():
    if _fastpath.fast is None:
        pytest.skip("ravel._fast is not built")


def compiled(src=TWO_OUTPUTS):
    m = ravel.parse(src, name="two.rv")
    try:
        return m, m.compile(threads=1)
    except ravel.UnsupportedError as e:
        pytest.skip("compiled recursion is not in this build: %s" % e)


def weights(seed=3):
    rng = np.random.default_rng(seed)
    return {"Emb": rng.uniform(-1, 1, (10, 4)).astype(np.float32),
            "U": rng.uniform(-0.5, 0.5, (4, 4)).astype(np.float32)}


def random_batch(rng, count):
    """count random binary trees as build_linear's int32 arrays: node i's
    children are two later nodes (preorder), the rest leaves."""
    sizes, begin, child, word = [], [], [], []
    for _ in range(count):
        n = 2 * int(rng.integers(0, 6)) + 1
        rows, nxt = [[] for _ in range(n)], 1
        for i in range(n):
            if nxt + 1 < n + 1 and nxt + 1 <= n - 1:
                rows[i] = [nxt, nxt + 1]
                nxt += 2
        sizes.append(n)
        begin += list(np.cumsum([0] + [len(r) for r in rows]))
        child += [c for r in rows for c in r]
        word += list(rng.integers(-1, 10, n))
    return tuple(np.array(a, np.int32) for a in (sizes, begin, child, word))


def call(model, bs, lin, batch):
    bs.build_linear(*batch, out=lin)
    return {k: v.copy() for k, v in model(T=lin).items()}


def both_paths(fn, monkeypatch):
    """fn() with ravel._fast, then with ctypes."""
    fast = fn()
    with monkeypatch.context() as mp:
        mp.setattr(_fastpath, "fast", None)
        slow = fn()
    return fast, slow


def test_built_where_python_has_headers():
    """make and pip install ./python build the module wherever this Python
    has its headers (a build that silently failed would leave every fast
    test skipped)."""
    if os.environ.get("RAVEL_PYTHON_EXT") == "0":
        pytest.skip("RAVEL_PYTHON_EXT=0")
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        pytest.skip("no Python.h for this Python")
    assert ravel.fast_path is not None and _fastpath.fast is not None
    assert ravel.fast_path == _fastpath.path


def test_same_results_as_ctypes_on_changing_batches(monkeypatch):
    """Batches of 1 to 12 random trees, bigger and smaller, called on one
    Bound: both paths give the same bits, and the interpreter's values."""
    need_fast()
    m, prog = compiled()
    W = weights()
    rng = np.random.default_rng(11)
    batches = [random_batch(rng, c) for c in (1, 7, 2, 12, 1, 5)]

    def run():
        model, bs, lin = prog.bind(W), ravel.Structs("tree", 2, 1), ravel.Linear()
        return [call(model, bs, lin, b) for b in batches]

    fast, slow = both_paths(run, monkeypatch)
    lin = ravel.Linear()
    for b, f, s in zip(batches, fast, slow):
        assert set(f) == {"h", "C"} == set(s)
        for k in f:
            assert f[k].dtype == np.float32 and np.array_equal(f[k], s[k]), k
        ravel.Structs("tree", 2, 1).build_linear(*b, out=lin)
        want = m.run_interp(T=lin, **W)
        for k in f:
            np.testing.assert_allclose(f[k], want[k], rtol=1e-5, atol=1e-5)


def errors_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001: the exception is what is compared
        return type(e), str(e)
    return None


def test_same_exceptions_as_ctypes(monkeypatch):
    """Bad input raises the same exception with the same message on both
    paths: wrong dtypes, out-of-range children, a cycle, an empty batch,
    a batch of another program's structure, not a batch; the Bound serves
    the next call after each."""
    need_fast()
    m, prog = compiled()
    model = prog.bind(weights())
    i32 = lambda *a: np.array(a, np.int32)  # noqa: E731
    builds = [
        (np.array([3.0]), [0, 2, 2, 2], [1, 2], None),                    # float sizes
        (i32(3), i32(0, 2, 2, 2), np.array([1.5, 2.0]), None),            # float children
        (i32(3), i32(0, 2, 2, 2), i32(1, 5), None),                       # child out of range
        (i32(3), i32(0, 2, 2, 2), i32(1, -1), None),                      # negative child
        (i32(1, 3), i32(0, 0, 0, 1, 2, 3), i32(1, 2, 0), None),           # a cycle
        (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32), None),  # empty
        ([], [], [], None),                                               # empty lists
        (i32(3), i32(0, 2, 2, 2), i32(1, 2), i32(1, 2)),                  # short data
        (i32(3), i32(0, 2, 2, 2), i32(1, 2), np.array([1, 2, 3], np.int64)),  # converted: fine
    ]
    good = random_batch(np.random.default_rng(1), 3)
    wide = ravel.Structs("tree", 3, 1).add_children([[1, 2, 3], [], [], []], data=[0, 1, 2, 3])
    nowords = ravel.Structs("tree", 2, 1).add_perfect_tree(1, [1, 2, 3])
    dag = ravel.Structs("dag", 2, 1).add_grid(2, 2, [1, 2, 3, 4])

    def run():
        bs, lin = ravel.Structs("tree", 2, 1), ravel.Linear()
        out = []
        for b in builds:
            out.append(errors_of(lambda: bs.build_linear(*b, out=lin)))
            out.append(len(bs))
            out.append(np.array_equal(call(model, bs, lin, good)["h"], first["h"]))
        for arg in (wide.linearize(), dag.linearize(), [[1, 2], [], []], lin._c):
            out.append(errors_of(lambda: model(T=arg)))
        out.append(errors_of(lambda: model(X=nowords.linearize())))  # no such argument
        out.append(errors_of(lambda: model({"T": [1]})))   # a dict first, not a batch
        out.append(errors_of(lambda: model({1: lin})))     # not a name: Python's error
        out.append(errors_of(lambda: model({"T": lin}, T=wide.linearize())))  # both: bound
        return out

    bs0, lin0 = ravel.Structs("tree", 2, 1), ravel.Linear()
    first = call(model, bs0, lin0, good)
    fast, slow = both_paths(run, monkeypatch)
    assert fast == slow
    raised = [r for r in fast if isinstance(r, tuple)]
    assert raised[-2][0] is AttributeError  # {1: lin}: as a Program's call says it
    del raised[-2]
    assert all(issubclass(t, ravel.Error) for t, _ in raised)
    assert len(raised) >= len(builds) - 1 + 3  # the int64 data was converted
    assert any("cycle" in msg for _, msg in raised)
    assert any("no structures" in msg for _, msg in raised)
    assert any("expected a linearized batch" in msg for _, msg in raised)


def test_a_failing_run_raises_ravels_error(monkeypatch):
    """An error of the run itself (a word out of the program's range), on
    both paths: BoundsError with ravel's message."""
    need_fast()
    m, prog = compiled()
    model = prog.bind(weights())
    bs, lin = ravel.Structs("tree", 2, 1), ravel.Linear()
    bad = (np.array([1], np.int32), np.array([0, 0], np.int32), np.zeros(0, np.int32),
           np.array([10], np.int32))
    bs.build_linear(*bad, out=lin)
    fast, slow = both_paths(lambda: errors_of(lambda: model(T=lin)), monkeypatch)
    assert fast == slow and issubclass(fast[0], ravel.Error), fast


def test_no_memory_kept_over_many_calls():
    """Thousands of calls keep no Python memory, no reference to the
    weights or the batch's arrays, and at most the pool's bindings."""
    need_fast()
    m, prog = compiled()
    W = weights()
    model, bs, lin = prog.bind(W), ravel.Structs("tree", 2, 1), ravel.Linear()
    rng = np.random.default_rng(2)
    batches = [random_batch(rng, c) for c in (1, 4, 9, 2)]
    refs = [sys.getrefcount(a) for b in batches for a in b] + [sys.getrefcount(W["U"])]

    def many(n):
        for i in range(n):
            b = batches[i % len(batches)]
            out = model(T=bs.build_linear(*b, out=lin))
            assert out["h"].shape[0] == out["C"].shape[0] == b[3].size
            del out

    many(200)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        many(3000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 16 * 1024, grown
    assert [sys.getrefcount(a) for b in batches for a in b] + [sys.getrefcount(W["U"])] == refs
    assert len(model._pooled()) <= model._POOL


def test_no_memory_kept_over_many_failing_calls(call_path):
    """Calls that fail in the run (a word out of range) and calls with
    results kept over several calls give their bindings back and keep no
    memory: the pool stays at most its size."""
    m, prog = compiled()
    model, bs, lin = prog.bind(weights()), ravel.Structs("tree", 2, 1), ravel.Linear()
    bad, good = ravel.Linear(), ravel.Linear()
    bs.build_linear(np.array([1], np.int32), np.array([0, 0], np.int32),
                    np.zeros(0, np.int32), np.array([10], np.int32), out=bad)
    bs.build_linear(*random_batch(np.random.default_rng(6), 3), out=good)

    def many(n):
        kept = []
        for i in range(n):
            with pytest.raises(ravel.BoundsError):
                model(T=bad)
            kept.append(model({"T": good}))
            if len(kept) > 5:
                del kept[:3]

    tracemalloc.start()
    try:
        many(1000)  # traced too: what the first calls keep (free lists) is not counted
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        many(4000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 32 * 1024, grown  # an object kept per call: 100 KB or more
    assert 1 <= len(model._pooled()) <= model._POOL


def test_the_bound_and_its_pools_go_without_the_collector(call_path):
    """No reference cycle: the Bound, its pool and its pooled bindings are
    freed with the last reference to the Bound (results aside), the
    cyclic collector off."""
    import weakref
    m, prog = compiled()
    model, bs, lin = prog.bind(weights()), ravel.Structs("tree", 2, 1), ravel.Linear()
    batch = random_batch(np.random.default_rng(7), 2)
    first = model(T=bs.build_linear(*batch, out=lin))
    kept = model(T=bs.build_linear(*batch, out=lin))  # its bindings stay for it
    del first
    pooled = [weakref.ref(b) for b in model._pooled()]
    assert len(pooled) == 2
    gone = weakref.ref(model)
    gc.disable()
    try:
        del model
        assert gone() is None
        assert sum(r() is None for r in pooled) == 1  # the kept result's stay
        del kept
        assert all(r() is None for r in pooled)
    finally:
        gc.enable()


def test_results_outlive_the_model_and_are_not_reused_while_alive(call_path):
    """A result keeps the memory it views alive (its base chain holds the
    call's bindings) after the model, program and batch are gone, and a
    later call never writes into a result still alive."""
    m, prog = compiled()
    model, bs, lin = prog.bind(weights()), ravel.Structs("tree", 2, 1), ravel.Linear()
    batch = random_batch(np.random.default_rng(3), 4)
    kept = model(T=bs.build_linear(*batch, out=lin))
    copy = {k: v.copy() for k, v in kept.items()}
    other = random_batch(np.random.default_rng(4), 4)
    for _ in range(3):
        model(T=bs.build_linear(*other, out=lin))
    h = kept["h"]
    assert h.flags.writeable and h.flags.c_contiguous and h.base is not None
    del kept, model, prog, m, bs, lin
    gc.collect()
    assert np.array_equal(h, copy["h"])


def test_concurrent_calls_from_threads(call_path):
    """Calls from several threads at once (the GIL is released around the
    library's calls) each give their own batch's results."""
    m, prog = compiled()
    model = prog.bind(weights())
    rng = np.random.default_rng(5)
    batches = [random_batch(rng, c) for c in (1, 3, 6, 2)]
    want = [call(model, ravel.Structs("tree", 2, 1), ravel.Linear(), b) for b in batches]
    bad = []

    def worker(k):
        bs, lin = ravel.Structs("tree", 2, 1), ravel.Linear()
        for i in range(200):
            j = (k + i) % len(batches)
            got = model(T=bs.build_linear(*batches[j], out=lin))
            if not (np.array_equal(got["h"], want[j]["h"]) and
                    np.array_equal(got["C"], want[j]["C"])):
                bad.append((k, i))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_without_the_module():
    """RAVEL_PYTHON_EXT=0: the package uses ctypes only (ravel.fast_path is
    None) and a recursive model's call works as before."""
    code = (
        "import numpy as np, ravel, sys\n"
        "sys.path.insert(0, %r)\n"
        "from test_fast import TWO_OUTPUTS, random_batch, weights\n"
        "assert ravel.fast_path is None\n"
        "prog = ravel.parse(TWO_OUTPUTS).compile(threads=1)\n"
        "bs, lin = ravel.Structs('tree', 2, 1), ravel.Linear()\n"
        "b = random_batch(np.random.default_rng(1), 3)\n"
        "out = prog.bind(weights())(T=bs.build_linear(*b, out=lin))\n"
        "assert out['h'].shape == (b[3].size, 4)\n"
        "print('ok')\n" % os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, RAVEL_PYTHON_EXT="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=str(REPO.parent), timeout=300)
    if "UnsupportedError" in r.stderr:
        pytest.skip("compiled recursion is not in this build")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_results_kept_over_many_calls(call_path):
    """Results kept alive over more calls than the pool holds: each call
    gets bindings of its own (new ones, the pool trimmed), none writes into
    a kept result; dropped, their bindings serve again."""
    m, prog = compiled()
    model, bs, lin = prog.bind(weights()), ravel.Structs("tree", 2, 1), ravel.Linear()
    rng = np.random.default_rng(8)
    kept = []
    for c in (1, 5, 2, 8, 3, 1, 6, 4, 2, 7):
        out = model(T=bs.build_linear(*random_batch(rng, c), out=lin))
        kept.append((out, {k: v.copy() for k, v in out.items()}))
        assert len(model._pooled()) <= model._POOL
    for out, copy in kept:
        for k in out:
            assert np.array_equal(out[k], copy[k])
    del kept, out
    ptrs = {b.ptr for b in model._pooled()}
    assert len(ptrs) == model._POOL
    model(T=bs.build_linear(*random_batch(rng, 2), out=lin))
    assert {b.ptr for b in model._pooled()} == ptrs  # a pooled one served


def test_threads_keeping_results(call_path):
    """Eight threads call one Bound, each keeping its last few results
    alive (more than the pool holds, all threads together): no call ever
    writes into a result still alive, and each result is its batch's."""
    m, prog = compiled()
    model = prog.bind(weights())
    rng = np.random.default_rng(9)
    batches = [random_batch(rng, c) for c in (1, 3, 6, 2, 5)]
    want = [call(model, ravel.Structs("tree", 2, 1), ravel.Linear(), b) for b in batches]
    bad = []

    def worker(k):
        bs, lin, kept = ravel.Structs("tree", 2, 1), ravel.Linear(), []
        for i in range(150):
            j = (k * 7 + i) % len(batches)
            kept.append((j, model(T=bs.build_linear(*batches[j], out=lin))))
            if len(kept) > 1 + k % 3:
                kept.pop(0)
            for jj, got in kept:
                if not (np.array_equal(got["h"], want[jj]["h"]) and
                        np.array_equal(got["C"], want[jj]["C"])):
                    bad.append((k, i))

    fresh = prog.bind(weights())  # first called from eight threads at once
    fresh_out = []
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    threads += [threading.Thread(target=lambda: fresh_out.append(
        fresh(T=ravel.Structs("tree", 2, 1).build_linear(*batches[1])))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
    assert len(model._pooled()) <= model._POOL
    assert len(fresh_out) == 8 and all(np.array_equal(o["h"], want[1]["h"]) for o in fresh_out)
    del fresh_out
    assert 1 <= len(fresh._pooled()) <= fresh._POOL


def test_a_module_of_another_ravel_h_is_not_used(monkeypatch):
    """A ravel._fast compiled against another include/ravel.h than the
    loaded library's (a struct of another size) is refused with a warning,
    never handed the library's functions."""

    class Stale:
        set_up = False

        @staticmethod
        def struct_size(name):
            return 1  # no struct of the library is one byte

        @classmethod
        def setup(cls, *a):
            cls.set_up = True

    monkeypatch.delenv("RAVEL_PYTHON_EXT", raising=False)
    monkeypatch.setattr(_fastpath, "_find", lambda: (Stale, "/stale/_fast.so"))
    with pytest.warns(RuntimeWarning, match="/stale/_fast.so was compiled against another"):
        assert _fastpath._load() == (None, None)
    assert not Stale.set_up


def test_a_module_of_an_older_package_is_not_used(monkeypatch):
    """A ravel._fast of an older package (its structs as the library's,
    but no Pool) is refused with a warning, never handed the library's
    functions."""

    class Older:
        set_up = False

        @staticmethod
        def struct_size(name):
            return _fastpath.lib.rv_struct_size(name.encode())

        @classmethod
        def setup(cls, *a):
            cls.set_up = True

    monkeypatch.delenv("RAVEL_PYTHON_EXT", raising=False)
    monkeypatch.setattr(_fastpath, "_find", lambda: (Older, "/older/_fast.so"))
    with pytest.warns(RuntimeWarning, match="/older/_fast.so is of an older ravel package"):
        assert _fastpath._load() == (None, None)
    assert not Older.set_up
