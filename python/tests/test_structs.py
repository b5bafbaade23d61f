"""Batches of recursive structures (ravel.Structs), their linearization
(ravel.Linear) and linearized batches as structure arguments."""

import numpy as np
import pytest

from conftest import SST_DIR

import ravel

TREERNN = """
size N in 1..1000
size B in 1..100
structure T : tree(N, 2) {
    children child, nchild
    roots root[s < B]
    data word in -1..9
}
input Emb : f32[10, 4]
recurse R over T {
    h[n, i < 4] = if nchild[n] == 0 then Emb[word[n], i]
                  else tanh(h[child[n, 0], i] + h[child[n, 1], i])
}
"""


def doc_batch():
    """docs/recursion.md's example: an s-expression and a perfect tree of height 1."""
    bs = ravel.Structs("tree", 2, 1)
    return bs.add_sexpr("(3 (2 It) (4 (2 's) (3 fine)))").add_perfect_tree(1, [5, 6, 7])


def test_build_and_read_back():
    bs = doc_batch()
    assert len(bs) == 2 and bs.num_nodes == 8
    assert [bs.node_begin(s) for s in range(2)] == [0, 5]
    assert [bs.size(s) for s in range(2)] == [5, 3]
    assert bs.children(0, 0) == [1, 2] and bs.children(0, 2) == [3, 4] and bs.children(0, 1) == []
    assert [bs.word(bs.data(0, i)[0]) for i in (1, 3, 4)] == ["It", "'s", "fine"]
    assert bs.data(0, 0) == [-1] and bs.data(1, 2) == [7]
    assert bs.root(0) == 0 and bs.root(1) == 0
    with pytest.raises(IndexError):
        bs.children(1, 3)
    bs.clear()
    assert len(bs) == 0 and bs.vocab_size == 3  # the vocabulary stays


def test_linearize_matches_the_docs_example():
    lin = doc_batch().linearize()
    assert (lin.num_nodes, lin.num_structs, lin.num_batches, lin.first_leaf) == (8, 2, 3, 3)
    assert lin.node_of.tolist() == [0, 2, 5, 1, 3, 4, 6, 7]
    assert lin.child[:3].tolist() == [[3, 1], [4, 5], [6, 7]]
    assert lin.child[3:].tolist() == [[n, n] for n in range(3, 8)]  # pads: the node itself
    assert lin.nchild.tolist() == [2, 2, 2, 0, 0, 0, 0, 0]
    assert lin.root.tolist() == [0, 2]
    assert lin.batch_begin.tolist() == [3, 1, 0] and lin.batch_length.tolist() == [5, 2, 1]
    assert lin.data[:, 0].tolist() == [-1, -1, 5, 0, 1, 2, 6, 7]
    assert (lin.linear_of[lin.node_of] == np.arange(8)).all()
    assert lin.to_batch(np.arange(8) * 10).tolist() == [0, 30, 10, 40, 50, 20, 60, 70]


def test_every_way_of_adding_gives_the_same_structure():
    a = ravel.Structs("tree", 2, 1).add_children([[1, 2], [], []], [9, 1, 2])
    b = ravel.Structs("tree", 2, 1).add_children(child_begin=[0, 2, 2, 2], child=[1, 2], data=[9, 1, 2])
    c = ravel.Structs("tree", 2, 1).add_parents([-1, 0, 0], [9, 1, 2])
    d = ravel.Structs("tree", 2, 1).add_perfect_tree(1, [9, 1, 2])
    lins = [x.linearize() for x in (a, b, c, d)]
    for lin in lins[1:]:
        for f in ("child", "nchild", "data", "root", "batch_begin", "batch_length", "node_of"):
            assert (getattr(lin, f) == getattr(lins[0], f)).all(), f


def test_sequences_and_grids():
    seq = ravel.Structs("sequence", 1, 1).add_sequence(4, [3, 1, 4, 1]).add_sequence(1)
    lin = seq.linearize()
    assert lin.num_batches == 4 and lin.batch_length.tolist() == [2, 1, 1, 1]
    assert seq.children(0, 3) == [2] and seq.data(1, 0) == [-1]
    grid = ravel.Structs("dag", 2, 0).add_grid(3, 2)
    assert grid.children(0, 5) == [3, 4] and grid.children(0, 4) == [2] and grid.root(0) == 5
    assert grid.linearize().num_batches == 4  # the anti-diagonals


def test_linear_is_reused():
    bs = ravel.Structs("tree", 2, 1).add_perfect_tree(3)
    lin = bs.linearize()
    bs.clear()
    bs.add_perfect_tree(1)
    assert bs.linearize(lin) is lin and lin.num_nodes == 3


def test_bad_structures_are_refused_and_the_batch_kept():
    bs = ravel.Structs("tree", 2, 1).add_perfect_tree(1)
    cases = [
        ([[1], [2], [0]], "cycle"),
        ([[1, 2], [2], []], "parent"),        # node 2 has two parents
        ([[1, 5], [], []], "outside"),
        ([[1, 2, 3], [], [], []], "children"),  # more than K = 2
        ([[], []], "root"),                  # two roots
    ]
    for rows, word in cases:
        with pytest.raises(ravel.ArgumentError, match=word):
            bs.add_children(rows)
        assert len(bs) == 1 and bs.num_nodes == 3
    with pytest.raises(ravel.ArgumentError):
        bs.add_parents([-1, 5])
    with pytest.raises(ravel.ArgumentError, match="kind"):
        ravel.Structs("forest")
    with pytest.raises(ravel.ArgumentError, match="data"):
        bs.add_sequence(2, [1, 2, 3])  # width 1: two integers expected
    with pytest.raises(ravel.ParseError, match="<sexpr>:1:"):
        bs.add_sexpr("(3 (2 a)")
    with pytest.raises(ravel.ArgumentError):
        ravel.Structs("tree", 2, 1).linearize()  # an empty batch


def test_readers(tmp_path):
    p = tmp_path / "trees.txt"
    p.write_text("(1 (2 a) (3 b))\n\n(4 c)\n")
    bs = ravel.Structs("tree", 2, 2).read_sexpr_file(str(p))
    assert len(bs) == 2 and bs.data(0, 2) == [1, 3] and bs.data(1, 0) == [2, 4]
    with pytest.raises(ravel.FileError):
        bs.read_sexpr_file(str(tmp_path / "missing.txt"))
    if not SST_DIR:
        pytest.skip("no SST data (set RAVEL_SST_DIR)")
    sst = ravel.Structs("tree", 2, 1).read_sst(SST_DIR, "test")
    assert len(sst) == 2210 and all(len(sst.children(s, sst.root(s))) == 2 for s in range(5))


def test_interpreter_with_a_linearized_batch():
    m = ravel.parse(TREERNN, name="treernn.rv")
    bs = doc_batch()
    lin = bs.linearize()
    emb = np.random.default_rng(0).uniform(-1, 1, (10, 4)).astype(np.float32)
    out = m.run_interp(T=lin, Emb=emb)
    h = lin.to_batch(out["h"]).astype(np.float64)
    e = emb.astype(np.float64)
    want = np.empty((8, 4))
    want[[1, 3, 4, 6, 7]] = e[[0, 1, 2, 6, 7]]
    want[2] = np.tanh(want[3] + want[4])
    want[0] = np.tanh(want[1] + want[2])
    want[5] = np.tanh(want[6] + want[7])
    assert np.abs(h - want).max() < 1e-6
    assert (lin.node_of[lin.root] == [0, 5]).all()  # the roots, in batch order


def test_structure_argument_errors():
    m = ravel.parse(TREERNN, name="treernn.rv")
    emb = np.zeros((10, 4), np.float32)
    with pytest.raises(ravel.ArgumentError, match="structure T: expected a linearized batch"):
        m.run_interp(T=[[1, 2], [], []], Emb=emb)
    dag = ravel.Structs("dag", 2, 1).add_children([[1, 2], [2], []])
    with pytest.raises(ravel.ArgumentError, match="T"):
        m.run_interp(T=dag.linearize(), Emb=emb)  # a DAG batch into a tree structure
    wide = ravel.Structs("tree", 3, 1).add_children([[1, 2, 3], [], [], []])
    with pytest.raises(ravel.ArgumentError, match="T"):
        m.run_interp(T=wide.linearize(), Emb=emb)  # 3 children, T declares 2


def test_compiled_with_a_linearized_batch():
    m = ravel.parse(TREERNN, name="treernn.rv")
    lin = doc_batch().linearize()
    emb = np.random.default_rng(1).uniform(-1, 1, (10, 4)).astype(np.float32)
    want = m.run_interp(T=lin, Emb=emb)
    try:
        prog = m.compile(threads=1)
    except ravel.UnsupportedError as e:
        if "cannot be lowered yet" not in str(e):
            raise
        pytest.skip("compiled recursion is not in this build: %s" % e)
    got = prog(T=lin, Emb=emb)
    assert np.abs(got["h"] - want["h"]).max() < 1e-5


def test_add_many_is_add_children_one_by_one():
    rows = [[[1, 2], [], []], [[]], [[1], [2], []]]
    words = [[-1, 4, 5], [6], [-1, -1, 7]]
    one = ravel.Structs("tree", 2, 1)
    for r, w in zip(rows, words):
        one.add_children(r, data=w)
    begin = np.concatenate([np.cumsum([0] + [len(c) for c in r]) for r in rows]).astype(np.int32)
    child = np.array([c for r in rows for cs in r for c in cs], np.int32)
    many = ravel.Structs("tree", 2, 1).add_many([3, 1, 3], begin, child,
                                                np.array(sum(words, []), np.int32))
    a, b = one.linearize(), many.linearize()
    for f in ("child", "nchild", "data", "root", "batch_begin", "batch_length", "node_of"):
        assert (getattr(a, f) == getattr(b, f)).all(), f
    bad = ravel.Structs("tree", 2, 1)
    with pytest.raises(ravel.ArgumentError, match="structure 1"):
        bad.add_many([1, 3], [0, 0, 0, 1, 2, 3], [1, 2, 0])  # a cycle in the second
    assert len(bad) == 0  # all or nothing: the first is taken back
    with pytest.raises(ravel.ArgumentError, match="child"):
        ravel.Structs("tree", 2, 1).add_many([3], [0, 2, 2, 2], [1, 2, 0])  # one child too many


def test_add_many_checks_every_array():
    """rv_structs_add_many checks each array against its length and each
    structure as add_children does, naming the structure (by its index in
    the batch) and the node; nothing of the call stays added."""
    bs = ravel.Structs("tree", 2, 1).add_children([[]], data=[3])  # structure 0
    cases = [
        # (sizes, child_begin, child, data, message)
        ([3], [0, 2, 2, 2], [1, 2, 0], None, r"have 4 offsets, 2 children .* child 3"),
        ([3], [0, 2, 2], [1, 2], None, "structure 1: its 3 nodes need 4 values of child_begin"),
        ([3, 1], [0, 2, 2, 2, 0, 0], [1, 2], [1, 2], "structure 1: its 3 nodes need 3 values of data"),
        ([1, 3], [0, 0, 0, 2, 2, 5], [1, 2], None, "structure 2: node 2: child_begin is 5"),
        ([1, 3], [0, 0, 0, 1, 2, 3], [1, 2, 0], None, "structure 2: cycle"),
        ([1, 3], [0, 0, 0, 1, 2, 2], [1, 5], None, "structure 2: node 1: child 0 is node 5"),
        ([2, 0], [0, 1, 1, 0], [1], None, "structure 2 has no nodes"),
        ([3], [0, 2, 2, 2], [1, 1], None, "structure 1: node 0 lists node 1 twice"),
    ]
    for sizes, begin, child, data, msg in cases:
        with pytest.raises(ravel.ArgumentError, match=msg):
            bs.add_many(sizes, begin, child, data)
        assert len(bs) == 1 and bs.num_nodes == 1, msg
    with pytest.raises(ravel.ArgumentError, match="no structures"):
        bs.add_many([], [], [])
    # and a good call after the bad ones
    bs.add_many(np.array([3, 1], np.int32), [0, 2, 2, 2, 0, 0], [1, 2], [[-1], [4], [5], [6]])
    assert len(bs) == 3 and bs.children(1, 0) == [1, 2] and bs.data(2, 0) == [6]


def test_bound_tree_batches_bigger_smaller_bigger(call_path):
    """A Bound recursive model called on batches of changing sizes reuses its
    bindings and result arrays (the structure's UFs and dynamic batches are
    bound anew each call): every call matches the interpreter on its own
    batch, never on a previous one's."""
    m = ravel.parse(TREERNN, name="treernn.rv")
    try:
        prog = m.compile(threads=1)
    except ravel.UnsupportedError as e:
        pytest.skip("compiled recursion is not in this build: %s" % e)
    emb = np.random.default_rng(2).uniform(-1, 1, (10, 4)).astype(np.float32)
    model = prog.bind(Emb=emb)
    bs, lin = ravel.Structs("tree", 2, 1), ravel.Linear()
    rng = np.random.default_rng(5)
    for height in [4, 1, 5, 0, 3]:
        bs.clear()
        for _ in range(1 + height % 3):
            n = (1 << (height + 1)) - 1
            bs.add_perfect_tree(height, data=rng.integers(0, 10, n).astype(np.int32))
        bs.linearize(lin)
        h = model(T=lin)["h"]
        want = m.run_interp(T=lin, Emb=emb)["h"]
        assert h.shape == want.shape
        assert np.abs(h - want).max() < 1e-5, height
        del h


def compiled_treernn():
    """TREERNN and its program (1 thread), or the test skipped where this
    build cannot compile recursion."""
    m = ravel.parse(TREERNN, name="treernn.rv")
    try:
        return m, m.compile(threads=1)
    except ravel.UnsupportedError as e:
        pytest.skip("compiled recursion is not in this build: %s" % e)


def test_bound_structure_only_call_is_one_library_call(monkeypatch, ctypes_path):
    """A Bound called with the structure as its only argument binds, runs and
    reads the outputs in one call of the library (rv_program_run_linear):
    the same results as the general path (the weights given again), results
    kept from a call unchanged by the next, and every refusal as the general
    path's (not a batch, a batch the structure refuses, a run that fails),
    the Bound serving the next call after each."""
    m, prog = compiled_treernn()
    from ravel import _bindings
    if not _bindings.HAS_RUN_LINEAR:
        pytest.skip("the loaded libravel has no rv_program_run_linear")
    calls = []
    real = _bindings._run_linear

    def counted(*a):
        calls.append(a)
        return real(*a)

    monkeypatch.setattr(_bindings, "_run_linear", counted)
    emb = np.random.default_rng(4).uniform(-1, 1, (10, 4)).astype(np.float32)
    model = prog.bind(Emb=emb)
    bs, lin = ravel.Structs("tree", 2, 1), ravel.Linear()
    kept = []
    for height in [3, 0, 2]:
        bs.clear()
        n = (1 << (height + 1)) - 1
        bs.add_perfect_tree(height, data=(np.arange(n) % 10).astype(np.int32))
        bs.linearize(lin)
        got = model(T=lin)["h"]
        assert len(calls) == len(kept) + 1
        want = model(T=lin, Emb=emb)["h"]  # two arguments: the general path
        assert len(calls) == len(kept) + 1
        assert got.shape == (n, 4)
        assert np.array_equal(got, want)
        kept.append((got, got.copy()))
    for got, copy in kept:
        assert np.array_equal(got, copy)  # later calls did not write into them
    with pytest.raises(ravel.ArgumentError, match="structure T: expected a linearized batch"):
        model(T=[[1, 2], [], []])
    wide = ravel.Structs("tree", 3, 1).add_children([[1, 2, 3], [], [], []], data=[0, 1, 2, 3])
    with pytest.raises(ravel.ArgumentError, match="T"):
        model(T=wide.linearize())
    nowords = ravel.Structs("tree", 2, 1).add_perfect_tree(1)  # leaves' word -1
    with pytest.raises(ravel.BoundsError, match=r"Emb\[-1"):
        model(T=nowords.linearize())
    assert np.array_equal(model(T=lin)["h"], kept[-1][1])


def test_bound_call_after_a_structure_only_call_binds_nothing_stale(call_path):
    """The bindings of a structure-only call are pooled without a reset (the
    next call resets them): a following call that gives no structure finds
    none bound, never the previous call's batch."""
    m, prog = compiled_treernn()
    emb = np.random.default_rng(6).uniform(-1, 1, (10, 4)).astype(np.float32)
    model = prog.bind(Emb=emb)
    lin = doc_batch().linearize()
    for _ in range(3):
        assert model(T=lin)["h"].shape == (8, 4)  # dropped at once: its bindings pooled
        with pytest.raises(ravel.Error, match="N"):
            model(Emb=emb)


def test_views_make_no_type_per_length(call_path):
    """A call's results and a Linear's arrays are viewed without making a
    type per length (ctypes array types, kept only until the cyclic GC
    frees them: made again call after call where other code makes garbage)."""
    import gc
    m, prog = compiled_treernn()
    emb = np.random.default_rng(7).uniform(-1, 1, (10, 4)).astype(np.float32)
    model = prog.bind(Emb=emb)
    bs, lin = ravel.Structs("tree", 2, 1), ravel.Linear()

    def types():
        return sum(1 for o in gc.get_objects() if isinstance(o, type))

    def call(height):
        bs.clear()
        bs.add_perfect_tree(height, data=np.zeros((1 << (height + 1)) - 1, np.int32))
        bs.linearize(lin)
        return model(T=lin)["h"].sum() + lin.node_of.sum() + lin.child.sum()

    call(0)
    gc.disable()
    try:
        before = types()
        for height in range(1, 7):  # new lengths every call
            call(height)
        assert types() == before
    finally:
        gc.enable()


def test_build_linear_is_clear_add_many_linearize(call_path):
    """Structs.build_linear (rv_structs_build_linear): the batch cleared,
    the structures added as by add_many and linearized into ``out``, call
    after call into one Linear; int32 arrays passed as they are, any other
    form converted as by add_many to the same result."""
    rng = np.random.default_rng(7)
    bs, ref, lin = ravel.Structs("tree", 2, 1), ravel.Structs("tree", 2, 1), ravel.Linear()
    bs.add_children([[]], data=[1])  # cleared by the first call
    for count in [1, 4, 2, 9]:
        rows, words = [], []
        for _ in range(count):
            n = 2 * int(rng.integers(0, 4)) + 1
            rows.append([[i + 1, i + 2] if i % 2 == 0 and i + 2 < n else [] for i in range(n)])
            words += list(rng.integers(-1, 10, n))
        sizes = np.array([len(r) for r in rows], np.int32)
        begin = np.concatenate([np.cumsum([0] + [len(c) for c in r]) for r in rows]).astype(np.int32)
        child = np.array([c for r in rows for cs in r for c in cs], np.int32)
        word = np.array(words, np.int32)
        got = bs.build_linear(sizes, begin, child, word, out=lin)
        assert got is lin and len(bs) == count
        ref.clear()
        want = ref.add_many(sizes, begin, child, word).linearize()
        # the same from lists, int64, a non-contiguous and a read-only array
        wide = np.zeros((word.size, 2), np.int32)
        wide[:, 0] = word
        ro = begin.copy()
        ro.flags.writeable = False
        other = ravel.Structs("tree", 2, 1).build_linear(sizes.tolist(), ro,
                                                         child.astype(np.int64), wide[:, 0])
        for f in ("child", "nchild", "data", "root", "batch_begin", "batch_length", "node_of",
                  "linear_of"):
            assert np.array_equal(getattr(got, f), getattr(want, f)), f
            assert np.array_equal(getattr(other, f), getattr(want, f)), f
    # no data: -1 everywhere, as add_many
    one = bs.build_linear(np.array([1], np.int32), np.array([0, 0], np.int32),
                          np.zeros(0, np.int32))
    assert one.num_nodes == 1 and one.data.tolist() == [[-1]]


def test_build_linear_refusals_leave_the_batch_empty_and_out_as_it_was(call_path):
    """Every refusal of add_many, by build_linear: a wrong dtype, a value
    that does not fit, wrong lengths, no structures, a bad structure; the
    batch is then empty, the Linear unchanged, and the next call works."""
    bs, lin = ravel.Structs("tree", 2, 1), ravel.Linear()
    good = (np.array([3, 1], np.int32), np.array([0, 2, 2, 2, 0, 0], np.int32),
            np.array([1, 2], np.int32), np.array([-1, 4, 5, 6], np.int32))
    bs.build_linear(*good, out=lin)
    before = {f: getattr(lin, f).copy() for f in ("child", "data", "node_of")}
    cases = [
        ((np.array([3.0]), [0, 2, 2, 2], [1, 2], None), "sizes: expected integers"),
        (([3], [0, 2, 2, 2], np.array([1.5, 2.0]), None), "child: expected integers"),
        (([3], [0, 2, 2, 2], [1, 2], np.array([1.0, 2, 3])), "data: expected integers"),
        (([3], [0, 2, 2, 2], np.array([1, 2 ** 40]), None), "child: a value does not fit"),
        (([], [], [], None), "build_linear: no structures"),
        ((np.array([3], np.int32), np.array([0, 2, 2], np.int32), np.array([1, 2], np.int32),
          None), "structure 0: its 3 nodes need 4 values of child_begin"),
        ((np.array([3], np.int32), np.array([0, 2, 2, 2], np.int32), np.array([1, 2], np.int32),
          np.array([1, 2], np.int32)), "structure 0: its 3 nodes need 3 values of data"),
        ((np.array([1, 3], np.int32), np.array([0, 0, 0, 1, 2, 3], np.int32),
          np.array([1, 2, 0], np.int32), None), "structure 1: cycle"),
    ]
    for args, msg in cases:
        with pytest.raises(ravel.ArgumentError, match=msg):
            bs.build_linear(*args, out=lin)
        assert len(bs) == 0, msg
        for f, a in before.items():
            assert np.array_equal(getattr(lin, f), a), (msg, f)
    assert bs.build_linear(*good, out=lin) is lin and len(bs) == 2


def test_build_linear_passes_int32_arrays_as_they_are(monkeypatch, ctypes_path):
    """A server's C-contiguous int32 arrays go to the library without a
    conversion or a copy (the conversions' function is never called), in
    one call of it."""
    from ravel import structs
    if structs._build_linear is None:
        pytest.skip("the loaded libravel has no rv_structs_build_linear")

    def no_conversion(*a):
        raise AssertionError("converted")

    calls = []
    real = structs._build_linear
    monkeypatch.setattr(structs, "_i32", no_conversion)
    monkeypatch.setattr(structs, "_build_linear", lambda *a: calls.append(a) or real(*a))
    sizes, begin = np.array([3], np.int32), np.array([0, 2, 2, 2], np.int32)
    child, word = np.array([1, 2], np.int32), np.array([[-1], [4], [5]], np.int32)
    lin = ravel.Structs("tree", 2, 1).build_linear(sizes, begin, child, word)
    assert len(calls) == 1
    assert calls[0][2] == sizes.ctypes.data and calls[0][5] == child.ctypes.data
    assert calls[0][7] == word.ctypes.data and calls[0][8] == 3
    assert lin.num_nodes == 3 and sorted(lin.data.ravel().tolist()) == [-1, 4, 5]
