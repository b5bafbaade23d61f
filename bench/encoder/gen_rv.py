#!/usr/bin/env python3
"""bench/encoder/gen_rv.py — writes the encoder layer of ENCODER.md as ravel
programs on ragged storage, one file per configuration:

    bench/encoder/encoder_cora512.rv   (hidden 512, 8 x 64, FF 2048)
    bench/encoder/encoder_bert768.rv   (hidden 768, 12 x 64, FF 3072)
    tests/regress/encoder_small*.rv    (hidden 128, 2 x 64, FF 256, short
                                        sequences: the interpreter check)
    bench/encoder/encoder6_cora512.rv  (six cora512 layers: one prelude for all)

The language has no compile-time constants and the compiler unrolls and
vectorizes by literal sizes, so the configurations are one template here.
`python3 bench/encoder/gen_rv.py --check` fails when a committed file
differs from what this script writes (tests/suite_regress.sh does not run
it; the bench driver compiles the committed files).
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# name: (hidden, heads, ff, max batch, max length, output path, header);
# small_equal has every length equal to its maximum
CONFIGS = {
    "cora512": (512, 8, 2048, 128, 512, "bench/encoder/encoder_cora512.rv", ""),
    "bert768": (768, 12, 3072, 128, 512, "bench/encoder/encoder_bert768.rv", ""),
    "small": (128, 2, 256, 6, 20, "tests/regress/encoder_small.rv",
              "# expect: ok\n"
              "# the encoder layer of bench/encoder (gen_rv.py) at hidden 128, 2 heads,\n"
              "# FF 256, lengths 0..20 (0 and 1 included): its schedule vs the interpreter.\n"),
    "small_equal": (128, 2, 256, 6, 16, "tests/regress/encoder_small_equal.rv",
                    "# expect: ok\n"
                    "# encoder_small.rv with every length 16 (whole 16-lane score vectors;\n"
                    "# row tiles of 6 with a tail of 4): every sequence alike.\n"),
    "small_short": (128, 2, 256, 6, 1, "tests/regress/encoder_small_short.rv",
                    "# expect: ok\n"
                    "# encoder_small.rv with lengths 0 and 1 only: empty sequences, and\n"
                    "# sequences that are all tail (no full row tile, one score column).\n"),
}

HEADER = """# {path} — written by bench/encoder/gen_rv.py (edit the template there).
#
# One post-layernorm transformer encoder layer (bench/encoder/ENCODER.md,
# config {name}: hidden {H}, {NH} heads of 64, feed-forward {F}) on ragged
# storage: the tokens of sequence b are rows l < len[b] of X, stored packed
# back to back ([sum(len), {H}] row-major, no padding), exactly the layout
# of ENCODER.md's x and y. Attention is per sequence and head over
# len[b] x len[b]. Nothing is padded, in storage or in loops: a padded
# intermediate costs a zeroed buffer and a copy into the bindings on every
# run (the runtime's host work), more than the vector tails it saves.
#
# Biases sit where they cost nothing: the QKV projection P is a bare
# product (an in-place reduction in a register tile), the query bias is
# added to the broadcast operand of QK^T, the key bias (and 1/sqrt(64)) in
# the transposed copy KT, and the value bias after AttnV folded through the
# output projection: ctx = A (V + bv) = A V + bv, since the rows of A sum
# to 1, so O = (A V) w_o^T + BO + X with BO = bv w_o^T + b_o, a vector of
# the params computed once per run (a {H} x {H} product with a vector).
# Added to the projection's broadcast operand instead (C + bv per row and
# k), it cost an add per broadcast: O 1.23x the samples (perf, mnli batch
# 32). The other biases, FF1's gelu and the residuals are epilogues of
# their products: O = C w_o^T + BO + X, F1 = gelu(Y1 w_ff1^T + b_ff1), F2 =
# F1 w_ff2^T + b_ff2 + Y1, applied in the register tile's write-back, so no
# pass over the token tensors adds them.
#
# Schedules: the projections are bench/'s dense "packed" kernel (per
# 64-column panel of W, parallel, the panel packed k-major once, 16 x 16
# blocks transposed in registers) over the
# packed tokens: fuse(b, l) makes one loop of every sequence's rows (the
# storage mirrors it: a plain offset), tiled by 6 x 64 register tiles
# across sequence boundaries, so one tail per batch rather than one per
# sequence (1.05-1.07x the per-sequence tiles at MNLI lengths, 1.12-1.17x
# at CoLA's, batch 32, 1 and 2 threads). A product with an epilogue
# accumulates in a cache_write stage FL_* computed at the row tile, which
# fuses the same token loop over the tile's rows (its region is a range of
# the fused rows: plain offsets, no map loads). A layernorm is one pass
# per token row, its mean and variance computed at the row (the row stays
# in L1 between the three).
#   - the vector tails of M, Z and A (len[b] % 16 columns per row) are
#     masked vectors (the C back end's masked tails), S's a padded tile
#     in registers (its schedule); padding the rows of S and KT to 16
#     columns instead made the layer 11% slower (the padded buffers' host
#     work);
#   - ragged compute_at would compute S, M, Z and A per (sequence, head)
#     inside AttnV instead of materializing len[b]^2 scores per head;
#   - operation splitting of i at len[b] / 6 * 6 would give the tail tile
#     a schedule of its own (a padded 6-row tile).
#   - k-blocking the products as bench/'s dense "kblock" kernel does (k
#     split by KC outside the row tiles, W's KC x 64 block packed per
#     block, FL over a block of MC fused rows or over all of them; the
#     latter runs out of scratch memory today: interval.c bounds a fused
#     loop's row starts by INT64_MAX / 4, which sizes its region) was
#     slower: F2 1.05-1.3x, P 1.2-1.3x the CPU time of the tiles above (KC
#     64-256, MC 24-96, mnli batch 32, 1 thread, perf cpu-clock samples).
#     W's panel (128 KiB at K = 512, 512 KiB at K = 2048) stays in L2
#     and its streaming is not what limits the tile: P and F2 run at
#     145-157 GFLOP/s of CPU time on one core, the packed C baseline's
#     OpenBLAS sgemm at 154 with its packing.
#   - none of these beat the tiles above (bert768, mnli and wiki128 batch
#     64, 1 thread, CPU time, alternated, load 4-8; session 17): register
#     tiles of 8 x 48, 12 x 32, 14 x 32 (TILE below; also 14 x 32 at
#     K = 768 with 8 x 48 at K = 3072) within 3% (perf samples of the
#     layer's kernels); KC = 128 blocks with W's whole panel kept, 1.1x
#     (F2 only) to 1.5x (O, F1, F2) the layer's time; software prefetch
#     of W 8-32 k ahead (the emitted C edited) 1.05-1.1x; row blocks R of
#     96 or 120 (F2), 192 or 576 (K = 768) equal or slower; F1's rows
#     padded to 3088 floats (storage_pad: F2's 6 broadcast rows 12 KiB
#     apart share one L1 set) 1.2-1.3x (the padded buffer's host work);
#     clang's loop (no register moves) the same samples. A C micro-kernel
#     of this 6 x 64 tile runs at 180 GFLOP/s with W in L1 (K = 64),
#     163-173 streaming W from L2 (K = 768, 3072), 156-160 k-blocked (KC
#     128-512) and 162-168 k-blocked on a pre-packed A, against an FMA
#     peak of 202-208 measured the same minute: streaming W from L2 costs
#     the tile ~8%, and blocking k does not win it back here.
"""

PROGRAM = """
size B in 1..{BMAX}
ufun len[b < B] in {LMIN}..{LMAX}

input X : f32[b < B, l < len[b], {H}]
param w_qkv : f32[{H3}, {H}]
param b_qkv : f32[{H3}]
param w_o : f32[{H}, {H}]
param b_o : f32[{H}]
param ln1_g : f32[{H}]
param ln1_b : f32[{H}]
param w_ff1 : f32[{F}, {H}]
param b_ff1 : f32[{F}]
param w_ff2 : f32[{H}, {F}]
param b_ff2 : f32[{H}]
param ln2_g : f32[{H}]
param ln2_b : f32[{H}]
"""

LAYER = """
# QKV projection without its bias: Q = cols 0..{Hm1}, K = {H}.., V = {H2}..
P[b, l, n < {H3}] = sum(k < {H}) X[b, l, k] * w_qkv[n, k]
# K^T per head, biased and scaled by 1/sqrt(64)
KT[b, h < {NH}, d < 64, j < len[b]] = (P[b, j, {H} + h * 64 + d] + b_qkv[{H} + h * 64 + d]) * 0.125
S[b, h < {NH}, i < len[b], j < len[b]] = sum(d < 64) (P[b, i, h * 64 + d] + b_qkv[h * 64 + d]) * KT[b, h, d, j]
M[b, h, i] = max(j < len[b]) S[b, h, i, j]
Z[b, h, i] = sum(j < len[b]) exp(S[b, h, i, j] - M[b, h, i])
A[b, h, i, j] = exp(S[b, h, i, j] - M[b, h, i]) / Z[b, h, i]
# AttnV without the value bias (folded into BO)
C[b, l, c < {H}] = sum(j < len[b]) A[b, c / 64, l, j] * P[b, j, {H2} + c]
# the value bias through the output projection, plus its bias
BO[n < {H}] = sum(k < {H}) b_qkv[{H2} + k] * w_o[n, k] + b_o[n]
# output projection + biases + residual
O[b, l, n < {H}] = sum(k < {H}) C[b, l, k] * w_o[n, k] + BO[n] + X[b, l, n]
Mean1[b, l] = (sum(k < {H}) O[b, l, k]) / {H}
Var1[b, l] = (sum(k < {H}) (O[b, l, k] - Mean1[b, l]) * (O[b, l, k] - Mean1[b, l])) / {H}
Y1[b, l, n] = (O[b, l, n] - Mean1[b, l]) * rsqrt(Var1[b, l] + 1e-12) * ln1_g[n] + ln1_b[n]
F1[b, l, n < {F}] = gelu(sum(k < {H}) Y1[b, l, k] * w_ff1[n, k] + b_ff1[n])
F2[b, l, n < {H}] = sum(k < {F}) F1[b, l, k] * w_ff2[n, k] + b_ff2[n] + Y1[b, l, n]
Mean2[b, l] = (sum(k < {H}) F2[b, l, k]) / {H}
Var2[b, l] = (sum(k < {H}) (F2[b, l, k] - Mean2[b, l]) * (F2[b, l, k] - Mean2[b, l])) / {H}
Y[b, l, n] = (F2[b, l, n] - Mean2[b, l]) * rsqrt(Var2[b, l] + 1e-12) * ln2_g[n] + ln2_b[n]
"""

# The packed dense kernel of bench/programs/dense_packed.rv over the
# packed token rows, in blocks of R rows (tb): for each block, every 64-row
# panel of W (WL, k-major, kept across runs and copied in the first block)
# runs over the block's rows, which stay in L2 across the panels. Without
# the blocks every panel streamed all the tokens' rows of X from L3 or
# memory (squadv2 batch 128: X 23 MiB at K = 512). Layer CPU time, old
# over new, 1 thread, 2 interleaved rounds, load 5-7: race 1.07-1.22
# (batch 32-128), squadv2 1.01-1.20, mnli 0.97 at batch 32 (and 0.97-1.14
# at 64, 128); vs the packed C baseline, geomean over the 9 (2 rounds)
# 1.045 (0.967 before). The last partial block joins the previous full
# one (tail="merge": blocks of R..2R-1 rows, one block of all the rows
# below R), split into 6-row tiles with their own partitioned tail: a
# last block of a few rows streamed every panel of W from L3 for those
# rows (CoLA batch 32: 389 tokens, a block of 384 then one of 5 rows:
# 7.3% of the layer).
PROJ = """
schedule {T} {{
    WL_{T} = cache_read({W}, layout="k, n")
    no, ni = split(n, {NR})
    t = fuse(b, l)
    tb, tr = split(t, {R}, tail="merge")
    lo, li = split(tr, {MR})
    nw, nv = split(ni, 16)
    reorder(tb, no, lo, k, li, nw, nv)
    parallel(no)
    unroll(li)
    unroll(nw)
    vectorize(nv)
    compute_at(WL_{T}, no)
}}
"""

# The same kernel for a product with an epilogue: the sums accumulate in
# FL (a 6 x 64 tile of the fused token rows, in registers), the epilogue
# runs on the tile's write-back.
PROJ_EPI = """
schedule {T} {{
    FL_{T} = cache_write({T})
    no, ni = split(n, {NR})
    t = fuse(b, l)
    tb, tr = split(t, {R}, tail="merge")
    lo, li = split(tr, {MR})
    nw, nv = split(ni, 16)
    reorder(tb, no, lo, li, nw, nv)
    parallel(no)
    vectorize(nv)
    compute_at(FL_{T}, lo)
}}
schedule FL_{T} {{
    WL_{T} = cache_read({W}, layout="k, n")
    t = fuse(b, l)
    nw, nv = split(n, 16)
    reorder(k, t, nw, nv)
    unroll(t)
    unroll(nw)
    vectorize(nv)
}}
schedule {T} {{
    compute_at(WL_{T}, no)
}}
"""

# The packing of W's panel: 16 x 16 blocks transposed in registers.
PACK = """
schedule WL_{T} {{
    ko, ki = split(k, 16)
    nb, nl = split(n, 16)
    reorder(ko, nb, ki, nl)
    unroll(ki)
    vectorize(nl)
}}
"""

# Layernorm: one pass per token row (parallel over the fused token loop),
# the row's mean and variance computed at the row, so it stays in cache
# between the three.
LAYERNORM = """
schedule {Y} {{
    t = fuse(b, l)
    parallel(t)
    no, nv = split(n, 16)
    vectorize(nv)
    compute_at({Mean}, t)
    compute_at({Var}, t)
}}
schedule {Mean} {{
    ko, kv = split(k, 16)
    vectorize(kv)
}}
schedule {Var} {{
    ko, kv = split(k, 16)
    vectorize(kv)
}}
"""


SCHEDULE = """
schedule BO {{
    ko, kv = split(k, 16)
    vectorize(kv)
}}
schedule KT {{
    f = fuse(b, h)
    parallel(f)
}}
# QK^T: per (sequence, head) (parallel), a 6-row x 16-column tile of S
# accumulated in SL (a local: registers) while d runs outside it, written
# back once. Written into S itself (reorder(f, io, jo, d, ii, jv)), the
# tile was S's rows in memory, loaded and stored per d (the ragged row
# offsets keep the C compiler from promoting them), 1.5x the samples of
# this one. SL is padded (pad=1): the tiles past the last full vector of
# columns or the last full 6 rows compute whole 16 x 6 tiles on padded
# copies of their operands (QL: 6 values of Q, KL: 16 of KT, per d) and
# write back the valid part; unpadded, those tiles were masked vectors of
# a local, stored and loaded again per d (no store forwarding for masked
# accesses: slower than the tile in S).
schedule S {{
    SL = cache_write(S, pad=1)
    f = fuse(b, h)
    parallel(f)
    jo, jv = split(j, 16)
    io, ii = split(i, 6)
    reorder(f, io, jo, ii, jv)
    vectorize(jv)
    compute_at(SL, jo)
}}
schedule SL {{
    QL = cache_read(P, pad=1)
    KL = cache_read(KT, pad=1)
    reorder(d, i, j)
    unroll(i)
    vectorize(j)
    compute_at(QL, d)
    compute_at(KL, d)
}}
schedule M {{
    f = fuse(b, h)
    parallel(f)
    jo, jv = split(j, 16)
    vectorize(jv)
}}
schedule Z {{
    f = fuse(b, h)
    parallel(f)
    jo, jv = split(j, 16)
    vectorize(jv)
}}
schedule A {{
    f = fuse(b, h)
    parallel(f)
    jo, jv = split(j, 16)
    vectorize(jv)
}}
# AttnV: per (sequence, head) (parallel), a 6-row x 64-column tile of C in
# registers while j runs outside it, A broadcast, V's rows read in place
schedule C {{
    co, ci = split(c, 64)
    lo, li = split(l, 6)
    cw, cv = split(ci, 16)
    reorder(b, co, lo, j, li, cw, cv)
    f = fuse(b, co)
    parallel(f)
    unroll(li)
    unroll(cw)
    vectorize(cv)
}}
"""

MULTI = """#
# {L} layers, one after the other (layer i reads layer i-1's output), with
# the same weights: a program whose kernels all share one raggedness
# pattern, so one prelude per run serves every layer (the bench driver's
# --program option times it and reports the prelude's share).
"""



# The tensors a layer computes: renamed per layer in a multi-layer program
STAGES = ("P", "KT", "S", "M", "Z", "A", "C", "BO", "O", "Mean1", "Var1", "Y1", "F1", "F2", "Mean2",
          "Var2", "Y", "WL_P", "WL_O", "WL_F1", "WL_F2", "FL_O", "FL_F1", "FL_F2", "SL", "QL",
          "KL")
STAGE_RE = re.compile(r"\b(%s|X)\b" % "|".join(STAGES))


def rename(text, layer, layers):
    """Layer `layer` of `layers`: its tensors suffixed _<layer> (the last
    layer's keep their names, so Y is the output), X the previous Y."""
    def sub(m):
        name = m.group(1)
        if name == "X":
            return "X" if layer == 0 else "Y_%d" % (layer - 1)
        return name if layer == layers - 1 else "%s_%d" % (name, layer)
    return STAGE_RE.sub(sub, text)


# The products' register tile: MR token rows (broadcast) x NR columns of
# W (NR / 16 vectors), MR * NR / 16 accumulators. 6 x 64: the other
# shapes tried were no faster (the header's notes).
TILE = (6, 64)


def rows(name, k):
    """The token rows of a product's row block (a multiple of the 6-row
    tile) over a reduction of k: 384 rows of 512 floats (768 KiB, with the
    panel's 128 KiB in a 2 MiB L2), 192 of 2048 (FF2). The interpreter's
    configurations (at most 120 tokens) take 24, so that their checks run
    full blocks and the merged last one."""
    if name.startswith("small"):
        return 24
    return 384 if k <= 768 else 192


def program(name, layers=1):
    H, NH, F, BMAX, LMAX, path, head = CONFIGS[name]
    d = dict(name=name, path=path, H=H, NH=NH, F=F, H2=2 * H, H3=3 * H, Hm1=H - 1,
             BMAX=BMAX, LMAX=LMAX, LMIN=LMAX if name == "small_equal" else 0)
    if layers > 1:
        path = path.replace("encoder_", "encoder%d_" % layers)
        d["path"] = path
        head = ""
    text = head + HEADER.format(**d)
    if layers > 1:
        text += MULTI.format(L=layers)
    text += PROGRAM.format(**d)
    one = LAYER.format(**d) + SCHEDULE.format(**d)
    MR, NR = TILE
    one += PROJ.format(T="P", W="w_qkv", R=rows(name, H), MR=MR, NR=NR) + PACK.format(T="P")
    for t, w, k in (("O", "w_o", H), ("F1", "w_ff1", H), ("F2", "w_ff2", F)):
        one += PROJ_EPI.format(T=t, W=w, R=rows(name, k), MR=MR, NR=NR) + PACK.format(T=t)
    for y, mean, var in (("Y1", "Mean1", "Var1"), ("Y", "Mean2", "Var2")):
        one += LAYERNORM.format(Y=y, Mean=mean, Var=var)
    for layer in range(layers):
        if layers > 1:
            text += "\n# ---- layer %d ----\n" % (layer + 1)
        text += rename(one, layer, layers)
    return path, text


# (config, layers) of the files written
FILES = [(name, 1) for name in CONFIGS] + [("cora512", 6)]

def main():
    check = "--check" in sys.argv[1:]
    bad = 0
    for name, layers in FILES:
        path, text = program(name, layers)
        full = os.path.join(ROOT, path)
        if check:
            old = open(full).read() if os.path.exists(full) else None
            if old != text:
                print(f"gen_rv.py: {path} differs from its template", file=sys.stderr)
                bad = 1
        else:
            with open(full, "w") as f:
                f.write(text)
    return bad


if __name__ == "__main__":
    sys.exit(main())
