"""The recursive models of bench/trees/MODELS.md as ravel programs
(models/*.rv) against the float64 NumPy oracle (bench/trees/trees_ref.py),
against PyTorch (bench/trees/trees_torch.py, where torch is installed) and,
once recursion compiles, compiled against the interpreter: the same
structures and the same weights (trees_ref.weights) for all of them.

Each model runs at its smaller hidden size on a small batch of mixed shapes
(a single node, SST trees, perfect trees, chains, grid DAGs, short
sequences), so the interpreter needs well under a second per model.
Tolerance: 1e-5 relative to the largest magnitude of the oracle's output
(the interpreter computes in double precision and stores every state in
f32, so each level adds one f32 rounding: ~1e-7 relative).
"""

import os
import sys

import numpy as np
import pytest

from conftest import REPO, SST_DIR

import ravel

TOL = 1e-5
TREES = REPO / "bench" / "trees"

if not SST_DIR:
    pytest.skip("no SST data (the models' vocabulary; set RAVEL_SST_DIR)", allow_module_level=True)
os.environ.setdefault("SST_DIR", SST_DIR)
sys.path.insert(0, str(TREES))
import trees_data as td  # noqa: E402
import trees_ref as tr  # noqa: E402

# (model, hidden size): each model at its smaller size
CASES = [(m, tr.HIDDEN[m][0]) for m in tr.MODELS]
# the states MODELS.md says a call returns, by the ravel program's output name
STATES = {"treelstm": {"h": "h", "C": "c"}, "lstm": {"h": "h", "C": "c"},
          "mvrnn": {"h": "h", "A": "A"}}


def small_structs(model):
    """A small batch of mixed shapes the model accepts (MODELS.md's small
    batch, smaller): binary-only models (TreeFC, TreeRNN, MV-RNN) get full
    binary trees, the child-sum ones also a chain (nodes with one child)."""
    V = len(td.vocabulary())
    rng = np.random.default_rng(7)
    one = td.Struct([[]], [int(rng.integers(1, V))], [0], "tree")
    if model == "treefc":
        return [td.perfect_tree(h, rng, V) for h in (0, 1, 3)]
    if model == "dagrnn":
        return [td.grid_dag(r, c, rng, V) for r, c in ((1, 1), (1, 5), (3, 4))]
    if model in ("lstm", "gru"):
        return [td.sequence(rng.integers(1, V, n)) for n in (1, 2, 9)]
    sst = td.sst_trees("test")
    out = [one, sst[0], sst[4]]
    if model in ("treegru", "treelstm"):
        out.append(td.Struct([[1], [2], []], [-1, -1, int(rng.integers(1, V))], [0], "tree"))
    return out


def to_ravel(structs):
    """trees_data structures as a ravel batch (children lists in order, the
    word id as data column 0)."""
    kind = structs[0].kind
    bs = ravel.Structs(kind, 1 if kind == "sequence" else 2, 1)
    for s in structs:
        bs.add_children(s.children, data=s.word)
    return bs


def structure_name(model):
    return "S" if model in ("lstm", "gru") else "T"


@pytest.fixture(scope="module")
def runs():
    """Per model: its module, structures, linearized batch, weights and the
    interpreter's states in the batch's numbering (computed once)."""
    cache = {}

    def get(model, H):
        if (model, H) not in cache:
            m = ravel.load(REPO / "models" / ("%s_h%d.rv" % (model, H)))
            structs = small_structs(model)
            lin = to_ravel(structs).linearize()
            W = tr.weights(model, H)
            out = m.run_interp({structure_name(model): lin}, **W)
            assert set(out) == set(STATES.get(model, {"h": "h"}))
            got = {STATES.get(model, {"h": "h"})[k]: lin.to_batch(v) for k, v in out.items()}
            cache[model, H] = (m, structs, lin, W, got)
        return cache[model, H]

    return get


def assert_states_close(got, want, what):
    for k, w in want.items():
        g = np.asarray(got[k], np.float64)
        assert g.shape == w.shape, (what, k)
        err = float(np.abs(g - w).max())
        scale = max(1.0, float(np.abs(w).max()))
        assert err <= TOL * scale, "%s: %s off by %.3g (tolerance %.3g)" % (what, k, err, TOL * scale)


@pytest.mark.parametrize("model,H", CASES, ids=["%s_h%d" % c for c in CASES])
def test_interpreter_matches_the_oracle(runs, model, H):
    m, structs, lin, W, got = runs(model, H)
    want = tr.reference(model, W, structs)
    assert_states_close(got, want, "%s_h%d interpreter vs trees_ref" % (model, H))


@pytest.mark.parametrize("model,H", CASES, ids=["%s_h%d" % c for c in CASES])
def test_interpreter_matches_pytorch(runs, model, H):
    pytest.importorskip("torch")
    import trees_torch as tt
    m, structs, lin, W, got = runs(model, H)
    P = tt.torch_params(model, W)
    want = {k: v.numpy().astype(np.float64)
            for k, v in tt.eager_stack(tt.eager(model, P, structs), structs).items()}
    assert_states_close(got, want, "%s_h%d interpreter vs PyTorch eager" % (model, H))


@pytest.mark.parametrize("model,H", CASES, ids=["%s_h%d" % c for c in CASES])
def test_compiled_matches_the_interpreter(runs, model, H):
    m, structs, lin, W, got = runs(model, H)
    try:
        prog = m.compile()
    except ravel.UnsupportedError as e:
        if "recursive operations cannot be lowered yet" not in str(e):
            raise
        pytest.skip("compiled recursion is not in this build")
    out = prog({structure_name(model): lin}, **W)
    comp = {STATES.get(model, {"h": "h"})[k]: lin.to_batch(v) for k, v in out.items()}
    assert_states_close(comp, {k: v.astype(np.float64) for k, v in got.items()},
                        "%s_h%d compiled vs interpreter" % (model, H))


def test_sst_reader_gives_the_benchmark_trees():
    """ravel's SST reader (rv_structs_read_sst) and trees_data read the same
    trees: the same nodes, children left before right (the order MV-RNN and
    TreeFC depend on) and tokens at the same nodes (word ids differ: ravel
    numbers words by first appearance, trees_data by frequency)."""
    bs = ravel.Structs("tree", 2, 1).read_sst(SST_DIR, "test")
    ref = td.sst_trees("test")
    assert len(bs) == len(ref)
    vocab = {i: w for w, i in td.vocabulary().items()}
    for s, t in enumerate(ref):
        assert bs.size(s) == t.n and bs.root(s) == t.roots[0]
        for v in range(t.n):
            assert bs.children(s, v) == t.children[v], (s, v)
        for v in (0, t.n - 1):
            w = bs.data(s, v)[0]
            assert (w >= 0) == (t.word[v] >= 0)
            if w >= 0 and t.word[v] > 0:  # (id 0: <unk>, none in SST)
                assert bs.word(w) == vocab[int(t.word[v])]


def test_roofline_bound_by_hand():
    """bench/trees/roofline.py on a perfect tree of height 1 (two leaves, one
    TreeFC node) and a 2-node sequence (LSTM), against the bound worked out
    by hand: per phase the larger of FLOPs / peak and bytes / bandwidth."""
    sys.path.insert(0, str(TREES))
    import roofline
    H, peak, bw = 64, 1e9, 1e9  # 1 GFLOP/s, 1 GB/s: seconds = flops or bytes * 1e-9
    tree = td.Struct([[1, 2], [], []], [-1, 5, 6], [0], "tree")
    # input phase: two embedding rows; level 1: 4H^2 FLOPs vs Wl, Wr once + 3 states
    want = max(0, 2 * H * 4) + max(4 * H * H, 2 * H * H * 4 + 3 * H * 4)
    assert roofline.bound_ms("treefc", H, [tree], 1, peak / 1e9, bw / 1e9, 1 << 20) == \
        pytest.approx(want * 1e-9 * 1e3)
    seq = td.sequence([3, 4])
    # input phase: W_ih (4H^2 floats) and two rows vs 2 x 8H^2 FLOPs; level 1:
    # 8H^2 FLOPs vs W_hh (4H^2 floats: in L2 but fetched at the first level)
    # and h, c of the node and its child
    want = max(2 * 8 * H * H, (4 * H * H + 2 * H) * 4) + max(8 * H * H, (4 * H * H + 2 * 2 * H) * 4)
    assert roofline.bound_ms("lstm", H, [seq], 1, peak / 1e9, bw / 1e9, 1 << 20) == \
        pytest.approx(want * 1e-9 * 1e3)
    # weights that do not fit the threads' L2 are fetched at every level
    deep = td.sequence([3, 4, 5])
    fits = roofline.bound_ms("lstm", H, [deep], 1, 1000.0, 1.0, 1 << 20)
    spills = roofline.bound_ms("lstm", H, [deep], 1, 1000.0, 1.0, 1024)
    assert spills - fits == pytest.approx(4 * H * H * 4 * 1e-9 * 1e3)
    # with an L3 rate, the levels read their weights and states at it while
    # the weights fit in L3; the input phase stays at the DRAM rate
    in_l3 = roofline.bound_ms("lstm", H, [deep], 1, 1000.0, 1.0, 1024, 4.0)
    level_bytes = 2 * (4 * H * H + 2 * 2 * H) * 4  # levels 1, 2: W_hh + two nodes' h, c
    assert spills - in_l3 == pytest.approx(level_bytes * (1 - 1 / 4) * 1e-9 * 1e3)
    too_big = roofline.bound_ms("lstm", H, [deep], 1, 1000.0, 1.0, 1024, 4.0, l3_bytes=1024)
    assert too_big == pytest.approx(spills)
