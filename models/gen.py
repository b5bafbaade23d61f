#!/usr/bin/env python3
"""models/gen.py — writes the recursive models of bench/trees/MODELS.md as
ravel programs, one file per model and hidden size (models/<model>_h<H>.rv).

The language has no compile-time constants, and hidden sizes must be
literals for the compiler to vectorize and unroll by them, so the two sizes
of a model are two files made from one template here. `python3
models/gen.py --check` fails when a committed file differs from what this
script writes (tests/suite_models.sh runs it).

Each program follows MODELS.md equation by equation; its parameters are
`param` inputs (constant across runs: the program keeps their packed
layouts, docs/schedules.md) named like the .npy files of bench/trees
(`Emb`, `W_iou`, ...), so `ravel run models/treelstm_h256.rv --weights
DIR` style loading works by name. Outputs: the state of every node (h; c of TreeLSTM and LSTM as C, A
of MV-RNN) in the linearized numbering; TreeGRU and TreeLSTM name theirs
(`output h`, `output h, C`), as a member after h, read only by parents,
would otherwise be one.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
V = 21702        # bench/trees vocabulary
MV_WORDS = 1024  # MV-RNN: per-word matrices for the most frequent ids

TREE = """size N in 1..1000000
size B in 1..100000
structure T : tree(N, 2) {{
    children child, nchild
    roots root[s < B]
    data word in -1..{Vm1}
}}
"""
DAG = TREE.replace("tree(N, 2)", "dag(N, 2)").replace("-1..", "0..")
SEQ = """size N in 1..1000000
size B in 1..100000
structure S : sequence(N) {{
    children prev, nprev
    roots last[s < B]
    data word in 0..{Vm1}
}}
"""

MODELS = {}

MODELS["treefc"] = ("TreeFC over perfect binary trees (Looks et al. 2017)", TREE + """
param Emb : f32[{V}, {H}]
param Wl : f32[{H}, {H}]
param Wr : f32[{H}, {H}]
param b : f32[{H}]

recurse R over T {{
    # the children's states side by side (0 past a node's last child),
    # copied at the product's tile of nodes, so the product is one
    # reduction of constant extent over 2H: read in the product itself,
    # they put a child-index load and a guard per node and child in its
    # innermost loop (~60 scalar instructions beside 32 FMAs; 1.2-1.4x
    # the CPU time)
    hc[n, j < {H2}] = if j / {H} < nchild[n] then h[child[n, j / {H}], j % {H}] else 0.0
    # Wl h_l + Wr h_r as that one reduction, k < 2 over the halves: the
    # select of a half's weight folds once k is unrolled, and each weight
    # is read through its own pack, kept across calls (a stage stacking
    # them, WT[i, k, j], was made again on every call: a fifth of the
    # call at batch 1); the sum in h itself, so its register tile's
    # epilogue is tanh (no member z of N rows and no pass over it)
    h[n, i < {H}] = if nchild[n] > 0
                    then tanh(sum(k < 2, j < {H}) select(k == 0, Wl[i, j], Wr[i, j]) * hc[n, {H} * k + j] + b[i])
                    else Emb[word[n], i]
}}
""")

MODELS["treernn"] = ("TreeRNN, Cortex's running example (Fig. 1)", TREE + """
param Emb : f32[{V}, {H}]

recurse R over T {{
    h[n, i < {H}] = if nchild[n] == 0 then Emb[word[n], i]
                    else tanh(h[child[n, 0], i] + h[child[n, 1], i])
}}
""")

MODELS["treegru"] = ("child-sum TreeGRU", TREE + """
param Emb : f32[{V}, {H}]
param W_z : f32[{H}, {H}]
param W_h : f32[{H}, {H}]
param b_z : f32[{H}]
param b_h : f32[{H}]
param U_z : f32[{H}, {H}]
param U_r : f32[{H}, {H}]
param U_h : f32[{H}, {H}]
param b_r : f32[{H}]

recurse R over T {{
    hs[n, i < {H}] = sum(k < nchild[n]) h[child[n, k], i]
    # the input products at the leaves only (MODELS.md: nodes with children
    # take no input): with the leaves specialized, each one product over all
    # of them (x is 0 at a leaf without a word)
    x[n, j < {H}] = if word[n] >= 0 then Emb[word[n], j] else 0.0
    xz[n, i < {H}] = if nchild[n] == 0 then sum(j < {H}) W_z[i, j] * x[n, j] + b_z[i] else 0.0
    xh[n, i < {H}] = if nchild[n] == 0 then sum(j < {H}) W_h[i, j] * x[n, j] + b_h[i] else 0.0
    # each child's reset gate reads ur, the child's own U_r h (below)
    rh[n, i < {H}] = sum(k < nchild[n]) sigmoid(ur[child[n, k], i]) * h[child[n, k], i]
    z[n, i < {H}] = if nchild[n] > 0 then sigmoid(sum(j < {H}) U_z[i, j] * hs[n, j] + b_z[i]) else sigmoid(xz[n, i])
    uh[n, i < {H}] = sum(j < {H}) U_h[i, j] * rh[n, j]
    h[n, i < {H}] = if nchild[n] > 0 then z[n, i] * hs[n, i] + (1.0 - z[n, i]) * tanh(uh[n, i] + b_h[i])
                    else (1.0 - z[n, i]) * tanh(xh[n, i])
    # U_r h + b_r at every node, once its h is known: one product over a
    # level's nodes, which their parents read at the children (no product
    # of a single child's state); no later definition reads it, so the
    # program names its output
    ur[n, i < {H}] = sum(j < {H}) U_r[i, j] * h[n, j] + b_r[i]
}}

output h
""")

MODELS["treelstm"] = ("child-sum TreeLSTM (Tai et al. 2015)", TREE + """
param Emb : f32[{V}, {H}]
param W_iou : f32[{H3}, {H}]
param b_iou : f32[{H3}]
param U_iou : f32[{H3}, {H}]
param U_f : f32[{H}, {H}]
param b_f : f32[{H}]

recurse R over T {{
    hs[n, i < {H}] = sum(k < nchild[n]) h[child[n, k], i]
    # the input product at the leaves only (MODELS.md: nodes with children
    # take no input): with the leaves specialized, one product over all of
    # them (x is 0 at a leaf without a word)
    x[n, l < {H}] = if word[n] >= 0 then Emb[word[n], l] else 0.0
    xi[n, j < {H3}] = if nchild[n] == 0 then sum(l < {H}) W_iou[j, l] * x[n, l] + b_iou[j] else 0.0
    iou[n, j < {H3}] = if nchild[n] > 0 then sum(l < {H}) U_iou[j, l] * hs[n, l] + b_iou[j] else 0.0
    # each child's forget gate reads uf, the child's own U_f h (below); the
    # leaves read their gates from xi (no copy into iou)
    c[n, i < {H}] = if nchild[n] > 0
                    then sigmoid(iou[n, i]) * tanh(iou[n, {H2} + i])
                         + sum(k < nchild[n]) sigmoid(uf[child[n, k], i]) * c[child[n, k], i]
                    else sigmoid(xi[n, i]) * tanh(xi[n, {H2} + i])
    h[n, i < {H}] = if nchild[n] > 0 then sigmoid(iou[n, {H} + i]) * tanh(c[n, i])
                    else sigmoid(xi[n, {H} + i]) * tanh(c[n, i])
    # U_f h + b_f at every node, once its h is known: one product over a
    # level's nodes, which their parents read at the children (no product
    # of a single child's state); it reads h, so the program names its
    # outputs
    uf[n, i < {H}] = sum(l < {H}) U_f[i, l] * h[n, l] + b_f[i]
}}

C[n, i] = c[n, i]

output h, C
""")

MODELS["mvrnn"] = ("MV-RNN (Socher et al. 2012)", TREE + """
param Emb : f32[{V}, {H}]
param Mat : f32[{MW}, {H}, {H}]
param W : f32[{H}, {H2}]
param b : f32[{H}]
param WM : f32[{H}, {H2}]

recurse R over T {{
    # A_r h_l and A_l h_r (each reads both children at fixed positions: the
    # model is defined on full binary trees), the sums in the then-branch
    # so that a cache_write tiles them
    al[n, j < {H}] = if nchild[n] > 0 then sum(l < {H}) A[child[n, 1], j, l] * h[child[n, 0], l] else 0.0
    ar[n, j < {H}] = if nchild[n] > 0 then sum(l < {H}) A[child[n, 0], j, l] * h[child[n, 1], l] else 0.0
    h[n, i < {H}] = if nchild[n] == 0 then Emb[word[n], i]
                    else tanh(sum(j < {H}) W[i, j] * al[n, j] + sum(j < {H}) W[i, {H} + j] * ar[n, j] + b[i])
    # A = WM[:, :H] A_l + WM[:, H:] A_r as one reduction over the children
    # (k) and the rows of their matrices (m), in the then-branch (a
    # conditional's cache_write tiles that branch's sum)
    A[n, j < {H}, l < {H}] = if nchild[n] > 0
                             then sum(k < nchild[n], m < {H}) WM[j, {H} * k + m] * A[child[n, k], m, l]
                             else Mat[select(word[n] < {MW}, word[n], 0), j, l]
}}
""")

MODELS["dagrnn"] = ("DAG-RNN over grid DAGs (Shuai et al. 2015)", DAG + """
param Emb : f32[{V}, {H}]
param U : f32[{H}, {H}]
param W : f32[{H}, {H}]
param b : f32[{H}]

XU[n, i < {H}] = sum(j < {H}) U[i, j] * Emb[word[n], j]

recurse R over T {{
    hs[n, i < {H}] = sum(k < nchild[n]) h[child[n, k], i]
    h[n, i < {H}] = max(XU[n, i] + sum(j < {H}) W[i, j] * hs[n, j] + b[i], 0.0)
}}
""")

MODELS["lstm"] = ("sequential LSTM (PyTorch gate order i, f, g, o)", SEQ + """
param Emb : f32[{V}, {H}]
param W_ih : f32[{H4}, {H}]
param W_hh : f32[{H4}, {H}]
param b : f32[{H4}]

XG[n, j < {H4}] = sum(l < {H}) W_ih[j, l] * Emb[word[n], l] + b[j]

recurse R over S {{
    # the previous state, 0 before the first element: the product is one
    # reduction of constant extent, with no guard or index load in its
    # inner loop (as TreeFC's hc: 1.2-1.3x at batch 10, H = 256)
    hp[n, l < {H}] = if nprev[n] > 0 then h[prev[n, 0], l] else 0.0
    g[n, j < {H4}] = XG[n, j] + sum(l < {H}) W_hh[j, l] * hp[n, l]
    c[n, i < {H}] = if nprev[n] == 0 then sigmoid(g[n, i]) * tanh(g[n, {H2} + i])
                    else sigmoid(g[n, {H} + i]) * c[prev[n, 0], i] + sigmoid(g[n, i]) * tanh(g[n, {H2} + i])
    h[n, i < {H}] = sigmoid(g[n, {H3} + i]) * tanh(c[n, i])
}}

C[n, i] = c[n, i]
""")

MODELS["gru"] = ("sequential GRU (PyTorch/cuDNN form)", SEQ + """
param Emb : f32[{V}, {H}]
param W_ih : f32[{H3}, {H}]
param W_hh : f32[{H3}, {H}]
param b_ih : f32[{H3}]
param b_hh : f32[{H3}]

XR[n, j < {H3}] = sum(l < {H}) W_ih[j, l] * Emb[word[n], l] + b_ih[j]

recurse R over S {{
    # the previous state, 0 before the first element (as LSTM's)
    hp[n, l < {H}] = if nprev[n] > 0 then h[prev[n, 0], l] else 0.0
    gh[n, j < {H3}] = sum(l < {H}) W_hh[j, l] * hp[n, l] + b_hh[j]
    z[n, i < {H}] = sigmoid(XR[n, {H} + i] + gh[n, {H} + i])
    nn[n, i < {H}] = tanh(XR[n, {H2} + i] + sigmoid(XR[n, i] + gh[n, i]) * gh[n, {H2} + i])
    h[n, i < {H}] = if nprev[n] == 0 then (1.0 - z[n, i]) * nn[n, i]
                    else (1.0 - z[n, i]) * nn[n, i] + z[n, i] * h[prev[n, 0], i]
}}
""")

HIDDEN = {m: (64, 128) if m == "mvrnn" else (256, 512) for m in MODELS}

# ---- schedules (docs/recursion.md, "Schedules") ----
#
# Every group runs level by level with the leaves specialized. A product
# over the nodes of a level (out[n, j] = sum(l) W[j, l] * x[n, l]) is the
# dense micro-kernel of bench/programs/dense_packed.rv with the level's
# nodes as its rows: the weight packed k-major once per call (cache_read
# with layout=, at the top of the member: hoisted above the loop over
# levels), a tile of NT nodes x 64 outputs summed in registers (cache_write:
# NT x 4 vector accumulators) with the reduction outside the tile (a child
# axis k < nchild[n] unrolled: a guarded copy per child, no loop), and the
# tiles of 64 outputs parallel, so each thread reads only its slice of the
# weight at every level (which stays in its L2 across levels). A gathered
# operand (hs, the sum of the children's states) is computed at the tile
# of nodes that reads it. Elementwise members are vectorized.

NT = 4  # nodes per register tile (NT x 4 accumulators of 16 lanes)
# TreeFC's levels are perfect trees' (128 nodes per tree at the leaves' parents):
# 6 x 4 accumulators read each vector of its weight panel, which comes
# from L2, for 6 nodes, not 4 (8 x 2 accumulators, 12 x 2 and 8 x 4,
# which spills, were slower)
NT_FC = 6
# TreeFC at H = 512: blocks of 96 nodes outermost, the 8 panels of 64
# outputs inside, the children's states (hc) copied once per block. With
# the panels outermost (as at H = 256), hc was copied again for every
# panel, 8 times per node, its rows read from L3 (the level's children,
# 2.5 MiB at the lowest level of batch 10, do not fit L2 beside the 2 MiB
# of weights): 18% of the product's samples (`perf` of bench_trees). A
# block's 8 panels (2 MiB) then come from L2 and L3 once per 96 nodes.
# Measured (bench_trees b10, CPU time, 1 thread, interleaved rounds):
# 0.86-0.91x the panels-outermost time; blocks of 120 and 144 the same,
# 48 0.92-0.94x. A block must be a multiple of NT_FC: 64, 80, 128 and
# 160 leave a partial tile in every block (guarded rows, the whole panel
# streamed for 2-4 nodes) and were no faster than the panels outermost;
# so does tail="merge" (its last block's tiles are all guarded). 96 with
# k split by 64 outside the tiles (the panel's block of k reused from L1
# across the block's tiles) 0.92-0.98x: the panel's streaming from L2 is
# not what limits the tile. H = 256 (weights 512 KiB) gains nothing from
# it (b1 1.05x): its schedule stays.
FC_BLOCK = 96
assert FC_BLOCK % NT_FC == 0

# The weights packed in 64-output panels, panel-major (layout="j/64, l,
# j%64", docs/schedules.md): a thread's panel is contiguous, its rows 256
# bytes apart instead of a whole row of the matrix (6 KiB for TreeLSTM's
# U_iou at H = 512), which a level's small-M product streams through the
# TLB and the prefetchers at every level. PANELS names, per model, the
# weights so packed: every tiled weight, none measured slower (old/new
# time, `ravel run --random 3|4 --time --threads 1`, 6 interleaved pairs:
# TreeLSTM 1.08-2.75, LSTM 1.17-1.29, GRU 1.01-1.17, TreeGRU 1.01-1.10,
# DAG-RNN 0.99-1.19, the larger at H = 512).
PANELS = {
    "treegru": {"W_z", "W_h", "U_z", "U_h", "U_r"},
    "treelstm": {"W_iou", "U_iou", "U_f"},
    "dagrnn": {"U", "W"},
    "lstm": {"W_ih", "W_hh"},
    "gru": {"W_ih", "W_hh"},
    "treefc": {"Wl", "Wr"},
}
_panels = set()  # PANELS[model] while render() writes it


def panels(layout, j):
    """layout "l, j" (reduction outermost) in 64-output panels."""
    red = [a.strip() for a in layout.split(",") if a.strip() != j]
    return "%s/64, %s, %s%%64" % (j, ", ".join(red), j)


def tile(stage, j, red, weight=None, layout=None, at=(), nt=NT, fold=(), block=None):
    """The register-tiled product `stage` over nodes n, outputs j, reduction
    axes red (the reduction loops outermost in the tile, in this order),
    weight one weight's name or a tuple of names packed alike, nt nodes
    per tile. fold: reduction axes of constant extent put outside red and
    unrolled, so that a select on them (a weight per child) folds.
    block: nodes per block, the outermost loop, with the panels of 64
    outputs inside it and the `at` stages (a gathered operand) computed
    once per block rather than once per panel and tile."""
    acc = stage + "_acc"
    out = "schedule %s {\n" % stage
    for w in (weight,) if isinstance(weight, str) else weight or ():
        wl = panels(layout, j) if w in _panels else layout
        out += "    %s_pk = cache_read(%s, layout=\"%s\")\n" % (w, w, wl)
    out += "    %s = cache_write(%s)\n" % (acc, stage)
    nodes, order, where = "n", "", "no"
    if block:
        out += "    nb, nr = split(n, %d)\n" % block
        nodes, order, where = "nr", "nb, ", "nb"
    out += ("    no, ni = split({nodes}, {nt})\n"
            "    {j}o, {j}i = split({j}, 64)\n"
            "    reorder({order}{j}o, no, ni, {j}i)\n"
            "    parallel({j}o)\n"
            "    {j}w, {j}l = split({j}i, 16)\n"
            "    vectorize({j}l)\n"
            "    compute_at({acc}, no)\n").format(acc=acc, s=stage, nt=nt, j=j, nodes=nodes, order=order)
    for a in at:
        out += "    compute_at(%s, %s)\n" % (a, where)
    out += "}}\nschedule {acc} {{\n".format(acc=acc).replace("{{", "{").replace("}}", "}")
    red_n = list(fold) + red[:1] + ["n"] + red[1:]  # extents that depend on n stay inside it
    out += ("    {j}v2, {j}v = split({j}, 16)\n"
            "    reorder({order}, {j}v2, {j}v)\n"
            "{fold}"
            "    unroll(n)\n"
            "{child}"
            "    unroll({j}v2)\n"
            "    vectorize({j}v)\n"
            "}}\n").format(j=j, order=", ".join(red_n),
                           fold="".join("    unroll(%s)\n" % a for a in fold),
                           child="".join("    unroll(%s)\n" % a for a in red[1:])).replace("}}", "}")
    return out


def vec(stage, i="i"):
    """An elementwise member: its nodes over the threads, 16 lanes of its
    outputs at a time."""
    return "schedule %s {\n    parallel(n)\n    %so, %sv = split(%s, 16)\n    vectorize(%sv)\n}\n" % (
        stage, i, i, i, i)


def upfront(*stages, weights=(), gather=None):
    """The input products over every node, before the recursion, each
    register-tiled as a level's product is (weights[i]: the weight of
    stages[i], packed k-major); `gather` (stage, axis) the embeddings
    they read, vectorized."""
    out = vec(gather[0], gather[1]) if gather else ""
    for t, w in zip(stages, weights):
        out += tile(t, w[1], [w[2]], w[0], "%s, %s" % (w[2], w[1]))
    return out


def mtile(stage):
    """A member whose value at a node is a matrix product, `x[n, j, l] =
    sum(k < nchild[n], m) W[j, H k + m] * y[child[n, k], m, l]` (a
    conditional's sum under its condition): per node, a tile of NT rows x
    64 columns in registers (cache_write), a row of a child's matrix loaded
    as 4 vectors and each W element broadcast; nodes parallel."""
    return ("schedule {s} {{\n"
            "    {s}_acc = cache_write({s})\n"
            "    jo, ji = split(j, {nt})\n"
            "    lo, li = split(l, 64)\n"
            "    reorder(n, jo, lo, ji, li)\n"
            "    parallel(n)\n"
            "    lw, ll = split(li, 16)\n"
            "    vectorize(ll)\n"
            "    compute_at({s}_acc, lo)\n"
            "}}\n"
            "schedule {s}_acc {{\n"
            "    lv2, lv = split(l, 16)\n"
            "    reorder(n, k, m, j, lv2, lv)\n"
            "    unroll(j)\n"
            "    unroll(lv2)\n"
            "    vectorize(lv)\n"
            "}}\n").format(s=stage, nt=NT)


# TreeFC's children's states side by side, at the product's tile of nodes
# (4 x 2H floats, in L1; computed per panel of 64 outputs): split by H, a
# vector's lanes read one child (its guard and row are the vector's, not
# a lane's: a contiguous load instead of 16 scalar ones)
CHILDREN = "schedule hc {{\n    parallel(n)\n    jk, jj = split(j, {H})\n    jo, jv = split(jj, 16)\n    vectorize(jv)\n}}\n"


def dot(stage):
    """A member whose value at a node is a matrix-vector product whose
    reduction axis l is contiguous in the matrix (MV-RNN's A_r·h_l): a dot
    product per output, 64 terms at a time into 16 lanes of partial sums
    combined once per 64 terms; nodes parallel. Serial, each output's sum
    was a chain of H dependent scalar adds (a quarter of MV-RNN's time at
    H = 128, `perf` of bench_trees)."""
    return ("schedule {s} {{\n"
            "    {s}_acc = cache_write({s})\n"
            "    parallel(n)\n"
            "    compute_at({s}_acc, n)\n"
            "}}\n"
            "schedule {s}_acc {{\n"
            "    lo, lv = split(l, 64)\n"
            "    vectorize(lv)\n"
            "}}\n").format(s=stage)


def vec_t(stage, weight, layout, i="i"):
    """vec() whose matrix-vector sums read `weight` through a transposed copy
    kept across calls (layout: the reduction axis first), so that a vector
    of 16 outputs loads 16 contiguous weights instead of gathering them a
    row apart."""
    out = vec(stage, i)
    return out.replace("{\n", "{\n    %s_t = cache_read(%s, layout=\"%s\")\n" % (weight, weight, layout), 1)


GROUP = "schedule R {\n    dynamic_batch()\n    specialize()\n}\n"

SCHEDULES = {
    "treefc": lambda H: (
        GROUP + CHILDREN.format(H=H)
        + tile("h", "i", ["j"], ("Wl", "Wr"), "j, i", at=["hc"], nt=NT_FC, fold=["k"], block=FC_BLOCK if H >= 512 else None)),
    "treernn": lambda H: GROUP + vec("h"),
    "treegru": lambda H: (
        GROUP + vec("hs") + vec("x", "j")
        + tile("xz", "i", ["j"], "W_z", "j, i") + tile("xh", "i", ["j"], "W_h", "j, i") + vec("rh")
        + tile("z", "i", ["j"], "U_z", "j, i")
        + tile("uh", "i", ["j"], "U_h", "j, i", at=["rh"]) + vec("h")
        + tile("ur", "i", ["j"], "U_r", "j, i")),
    "treelstm": lambda H: (
        GROUP + vec("hs") + vec("x", "l") + tile("xi", "j", ["l"], "W_iou", "l, j")
        + tile("iou", "j", ["l"], "U_iou", "l, j", at=["hs"])
        + vec("c") + vec("h") + tile("uf", "i", ["l"], "U_f", "l, i")),
    "mvrnn": lambda H: GROUP + dot("al") + dot("ar") + vec_t("h", "W", "j, i") + mtile("A"),
    "dagrnn": lambda H: upfront("XU", weights=[("U", "i", "j")]) + GROUP + vec("hs") + tile("h", "i", ["j"], "W", "j, i", at=["hs"]),
    "lstm": lambda H: (
        upfront("XG", weights=[("W_ih", "j", "l")]) + GROUP + vec("hp", "l") + tile("g", "j", ["l"], "W_hh", "l, j", at=["hp"]) + vec("c") + vec("h")),
    "gru": lambda H: (
        upfront("XR", weights=[("W_ih", "j", "l")]) + GROUP + vec("hp", "l") + tile("gh", "j", ["l"], "W_hh", "l, j", at=["hp"]) + vec("z") + vec("nn") + vec("h")),
}


def render(model, H):
    global _panels
    _panels = PANELS.get(model, set())
    what, body = MODELS[model]
    head = "# %s_h%d.rv — %s, hidden size %d: bench/trees/MODELS.md.\n" % (model, H, what, H)
    head += "# Written by models/gen.py; edit the template there, not this file.\n\n"
    text = body.format(V=V, Vm1=V - 1, H=H, H64=H // 64, H2=2 * H, H3=3 * H, H4=4 * H, MW=MV_WORDS).lstrip("\n")
    return head + text + "\n" + SCHEDULES[model](H)


def main():
    check = "--check" in sys.argv[1:]
    bad = 0
    for model in MODELS:
        for H in HIDDEN[model]:
            path = os.path.join(HERE, "%s_h%d.rv" % (model, H))
            text = render(model, H)
            if check:
                old = open(path).read() if os.path.exists(path) else None
                if old != text:
                    print("models/gen.py: %s differs from its template" % path, file=sys.stderr)
                    bad += 1
            else:
                with open(path, "w") as f:
                    f.write(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
