"""bench/trees/roofline.py — the roofline bound of one call of a recursive
model (issue 13): the least time any implementation could take on this
machine, given its measured FP32 peak and memory bandwidth (bench/peak.c).

A call is an input phase (the input products W·x of every node that has an
input, one large product, as Cortex and GRNN do) and then one step per
level (dynamic batch), each waiting for the one before. Each phase costs at
least the larger of

  - its FLOPs at the peak: the matrix FLOPs of trees_ref.flops (2 per
    multiply-add; element-wise work is not counted), and
  - the bytes it must fetch from beyond L2 at the measured bandwidth of
    where they live (bench/peak.c): the input phase's embedding rows and
    input weights at the STREAM triad's rate (DRAM); a level's recurrent
    weights and states at the L3 triad's rate (`triad_l3`: three 4 MiB
    arrays) when the recurrent weights fit in L3, since every level reads
    them again and they stay there (the DRAM rate for them made a bound
    2-3x too slow: calls ran at 130-200% of it):
      * the input phase: its weights once, and one embedding row per node
        with a word (MV-RNN: also one word matrix per leaf);
      * a level: its recurrent weights, unless they fit in the L2 of the
        threads that run the call (T x L2: then they stay there across
        levels, Cortex's persistence, and cost nothing after the first),
        plus the children's states it reads and the states it writes
        (states of the previous level were written by other cores and
        count as fetched: a conservative choice that adds little).

bound = input phase + sum over levels. Elementwise work, gathers and the
per-level barrier are free in this bound: it is what ravel is measured
against ("fraction of the bound" = bound / measured time).
"""

F32 = 4


def weight_bytes(model, H):
    """(input-phase weights, recurrent weights per level) in bytes (MODELS.md)."""
    hh = H * H * F32
    return {
        "treefc": (0, 2 * hh),
        "treernn": (0, 0),
        "treegru": (2 * hh, 3 * hh),
        "treelstm": (3 * hh, 4 * hh),
        "mvrnn": (0, 4 * hh),
        "dagrnn": (hh, hh),
        "lstm": (4 * hh, 4 * hh),
        "gru": (3 * hh, 3 * hh),
    }[model]


def state_floats(model, H):
    """Floats of one node's state: h (+ c for the LSTMs, + A for MV-RNN)."""
    if model in ("treelstm", "lstm"):
        return 2 * H
    if model == "mvrnn":
        return H + H * H
    return H


def node_flops(model, H, k, has_input):
    """(input-phase, recurrent) matrix FLOPs of one node with k children
    (trees_ref.flops, split by phase)."""
    hh = H * H
    x = {"treelstm": 6 * hh, "treegru": 4 * hh, "dagrnn": 2 * hh,
         "lstm": 8 * hh, "gru": 6 * hh}.get(model, 0) if has_input else 0
    if not k:
        return x, 0
    r = {"treefc": 4 * hh, "treernn": 0, "treelstm": 6 * hh + k * 2 * hh,
         "treegru": 4 * hh + k * 2 * hh, "mvrnn": 8 * hh + 4 * hh * H,
         "dagrnn": 2 * hh, "lstm": 8 * hh, "gru": 6 * hh}[model]
    return x, r


def bound_ms(model, H, structs, threads, peak_gflops, bw_gbs, l2_bytes, bw_l3_gbs=None,
             l3_bytes=None):
    """The roofline bound of one call on `structs` (trees_data.Struct list), in
    ms, with `threads` threads whose combined peak is peak_gflops (GFLOP/s) and
    DRAM bandwidth bw_gbs (GB/s), each core with l2_bytes of L2; the levels
    read their weights and states at bw_l3_gbs when given and the recurrent
    weights fit in l3_bytes (None: no limit)."""
    w_in, w_rec = weight_bytes(model, H)
    in_l3 = bw_l3_gbs is not None and (l3_bytes is None or w_rec <= l3_bytes)
    bw_level = bw_l3_gbs if in_l3 else bw_gbs
    sf = state_floats(model, H)
    in_flops, in_bytes = 0, w_in
    levels = {}  # level -> [flops, bytes]
    for s in structs:
        lv = s.levels()
        for v in range(s.n):
            k = len(s.children[v])
            x = s.word[v] >= 0
            fx, fr = node_flops(model, H, k, x)
            in_flops += fx
            if x and (w_in or model in ("treefc", "treernn", "mvrnn")):
                in_bytes += H * F32 + (H * H * F32 if model == "mvrnn" and not k else 0)
            if k:
                acc = levels.setdefault(lv[v], [0, 0])
                acc[0] += fr
                acc[1] += (k + 1) * sf * F32
    persistent = w_rec <= threads * l2_bytes
    t = max(in_flops / (peak_gflops * 1e9), in_bytes / (bw_gbs * 1e9))
    for i, (_, (fl, by)) in enumerate(sorted(levels.items())):
        fetch = by + (w_rec if not persistent or i == 0 else 0)
        t += max(fl / (peak_gflops * 1e9), fetch / (bw_level * 1e9))
    return t * 1e3
