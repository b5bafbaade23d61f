/*
 * bench/kernel_sources.c — the .rv programs of the benchmark kernels
 * (kernel_sources.h).
 */
#include "kernel_sources.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct SrcText {
    char *s;
    size_t len, cap;
    bool overflow;
} SrcText;

static void put(SrcText *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= b->cap - b->len)
        b->overflow = true, b->len = b->cap - 1;
    else
        b->len += (size_t)w;
}

/* W's panel (WL, made k-major by cache_read) packed once per column panel
 * jo with a blocked transpose: 16 consecutive k of one row, then the next
 * row. */
static const char pack_w_panel[] = "schedule WL {\n"
                                   "    ko, ki = split(k, 16)\n"
                                   "    reorder(ko, j, ki)\n"
                                   "    unroll(ki)\n"
                                   "}\n"
                                   "schedule Y {\n"
                                   "    compute_at(WL, jo)\n"
                                   "}\n";

/* Dense, M large: W packed k-major per NR-column panel once per panel, an
 * MR x NR register tile of Y (MR * NR / 16 vector accumulators) updated by
 * broadcasting X, the k loop outside the tile. */
static void packed_dense_schedule(SrcText *b, int mr, int nr) {
    put(b,
        "schedule Y {\n"
        "    YL = cache_write(Y)\n"
        "    jo, ji = split(j, %d)\n"
        "    io, ii = split(i, %d)\n"
        "    reorder(jo, io, ii, ji)\n"
        "    parallel(jo)\n"
        "    jw, jl = split(ji, 16)\n"
        "    unroll(jw)\n"
        "    vectorize(jl)\n"
        "    compute_at(YL, io)\n"
        "}\n"
        "schedule YL {\n"
        "    WL = cache_read(W, layout=\"k, j\")\n"
        "    jv2, jv = split(j, 16)\n"
        "    reorder(k, i, jv2, jv)\n"
        "    unroll(i)\n"
        "    unroll(jv2)\n"
        "    vectorize(jv)\n"
        "}\n"
        "%s",
        nr, mr, pack_w_panel);
}

/* Dense, K large: per 64-column panel and block of kc values of k, the
 * block of W's panel packed k-major (transposed in 16 x 16 register
 * blocks; 64 KiB), then every 6-row tile of the panel adds its products
 * over the block to YL, the panel's M x 64 sums in the scratch arena. The
 * reduction loop is outside the row tiles, so YL accumulates in place;
 * the lowering's promote pass keeps each 6x64 tile in registers across
 * the block. */
static void kblock_dense_schedule(SrcText *b, int kc) {
    put(b,
        "schedule Y {\n"
        "    YL = cache_write(Y)\n"
        "    jo, ji = split(j, 64)\n"
        "    reorder(jo, i, ji)\n"
        "    parallel(jo)\n"
        "    vectorize(ji)\n"
        "    compute_at(YL, jo)\n"
        "}\n"
        "schedule YL {\n"
        "    WL = cache_read(W, layout=\"k, j\")\n"
        "    ko, ki = split(k, %d)\n"
        "    io, ii = split(i, 6)\n"
        "    jv2, jv = split(j, 16)\n"
        "    reorder(ko, io, ki, ii, jv2, jv)\n"
        "    unroll(ii)\n"
        "    unroll(jv2)\n"
        "    vectorize(jv)\n"
        "    compute_at(WL, ko)\n"
        "}\n"
        "schedule WL {\n"
        "    kw, kl = split(k, 16)\n"
        "    jw, jl = split(j, 16)\n"
        "    reorder(kw, jw, kl, jl)\n"
        "    unroll(kl)\n"
        "    vectorize(jl)\n"
        "}\n",
        kc);
}

/* The rows of W a stream tile broadcasts from at each k: 24, or 8 when
 * W's rows are a multiple of 4 KiB apart (K = 3072: 12 KiB). Then they
 * all map to one L1 set, which has 12 ways: 24 rows evict each other
 * before their next 16 values are read (T = 2 at K = 3072: 24 rows
 * 2.3 ms, 8 rows 1.5-2.0). */
static int stream_rows(int k) {
    return (long)k * 4 % 4096 == 0 ? 8 : 24;
}

static void dense_source(SrcText *b, int gelu, int n, int k, int variant) {
    put(b, "size M in 1..%d\n", RK_MAX_M);
    put(b, "input X : f32[M, %d]\ninput W : f32[%d, %d]\n", k, n, k);
    if (gelu)
        put(b, "input bias : f32[%d]\n", n);
    if (gelu)
        put(b, "Y[i, j] = gelu(sum(k < %d) X[i, k] * W[j, k] + bias[j])\n", k);
    else
        put(b, "Y[i, j] = sum(k < %d) X[i, k] * W[j, k]\n", k);
    if (variant == RK_VARIANT_STREAM)
        put(b,
            "schedule Y {\n"
            "    YL = cache_write(Y, layout=\"j, i\")\n"
            "    io, ii = split(i, 16)\n"
            "    jo, ji = split(j, %d)\n"
            "    reorder(jo, io, ji, ii)\n"
            "    parallel(jo)\n"
            "    vectorize(ii)\n"
            "    compute_at(YL, io)\n"
            "}\n"
            "schedule YL {\n"
            "    XL = cache_read(X, layout=\"k, i\")\n"
            "    ko, ku = split(k, 8)\n"
            "    reorder(ko, ku, j, i)\n"
            "    unroll(ku)\n"
            "    unroll(j)\n"
            "    vectorize(i)\n"
            "}\n"
            "schedule XL {\n"
            "    ko, ki = split(k, 16)\n"
            "    reorder(ko, i, ki)\n"
            "    parallel(ko)\n"
            "    unroll(ki)\n"
            "}\n"
            "schedule Y {\n"
            "    compute_at(XL)\n"
            "}\n",
            stream_rows(k));
    else if (variant == RK_VARIANT_PACKED)
        packed_dense_schedule(b, 6, 64);
    else
        kblock_dense_schedule(b, RK_KBLOCK_K);
}

/* bmm NT as dot products: X's row i and W's row j are both contiguous in
 * k, so each Y[b, i, j] is a vector dot product over k (a lane reduction:
 * each of 16 lanes keeps a partial sum, added across the lanes at the
 * end). No copy of either operand. */
static void nt_dot_source(SrcText *b, int batch, int n, int k) {
    put(b, "size M in 1..%d\n", RK_MAX_M);
    put(b, "input X : f32[%d, M, %d]\ninput W : f32[%d, %d, %d]\n", batch, k, batch, n, k);
    put(b, "Y[b, i, j] = sum(k < %d) X[b, i, k] * W[b, j, k]\n", k);
    put(b, "schedule Y {\n"
           "    parallel(b)\n"
           "    vectorize(k)\n"
           "}\n");
}

/* Y[(b,)i,j] = sum(k<K) X[(b,)i,k] W[(b,)k,j] (NN), or W[b,j,k] (nt: bmm
 * NT); the broadcast micro-kernel: MR rows x NR columns of Y in registers,
 * each row's X[i, k] broadcast against NR/16 vectors of W's row k. NT
 * reads W through a k-major copy of its NR-row panel, made per batch
 * element and panel (K = 64: 16 KiB at most) by gathers along W's
 * columns. */
static void nn_source(SrcText *b, int batch, int n, int k, bool nt, int mr) {
    int nr = n >= 64 ? 64 : n >= 32 ? 32 : n >= 16 ? 16 : n; /* narrow Y: one tile */
    put(b, "size M in 1..%d\n", RK_MAX_M);
    if (nt) {
        put(b, "input X : f32[%d, M, %d]\ninput W : f32[%d, %d, %d]\n", batch, k, batch, n, k);
        put(b, "Y[b, i, j] = sum(k < %d) X[b, i, k] * W[b, j, k]\n", k);
    } else if (batch) {
        put(b, "input X : f32[%d, M, %d]\ninput W : f32[%d, %d, %d]\n", batch, k, batch, k, n);
        put(b, "Y[b, i, j] = sum(k < %d) X[b, i, k] * W[b, k, j]\n", k);
    } else {
        put(b, "input X : f32[M, %d]\ninput W : f32[%d, %d]\n", k, k, n);
        put(b, "Y[i, j] = sum(k < %d) X[i, k] * W[k, j]\n", k);
    }
    int pack = !batch && n >= 1024;
    /* Batched: the row tail (M < MR at small T) runs the whole MR-row tile
     * on a zero-padded copy of X's rows (local padding), on the stack,
     * rather than a tail tile sized at run time. Needs whole column tiles. */
    bool pad = batch && n % nr == 0;
    put(b,
        "schedule Y {\n"
        "    YL = cache_write(Y%s)\n"
        "    jo, ji = split(j, %d)\n"
        "    io, ii = split(i, %d)\n",
        pad ? ", pad=1" : "", nr, mr);
    if (batch)
        put(b, "    reorder(b, jo, io, ii, ji)\n    parallel(b)\n");
    else
        put(b, "    reorder(jo, io, ii, ji)\n    parallel(jo)\n");
    put(b, "    vectorize(ji)\n"
           "    compute_at(YL, io)\n"
           "}\n"
           "schedule YL {\n");
    if (pack)
        put(b, "    WL = cache_read(W)\n");
    if (nt)
        put(b, "    WL = cache_read(W, layout=\"b, k, j\")\n");
    if (pad)
        put(b, "    XL = cache_read(X, pad=1)\n"
               "    compute_at(XL)\n");
    if (nr >= 16)
        put(b, "    jv2, jv = split(j, 16)\n"
               "    reorder(k, i, jv2, jv)\n"
               "    unroll(i)\n"
               "    unroll(jv2)\n"
               "    vectorize(jv)\n"
               "}\n");
    else
        put(b, "    reorder(k, i, j)\n"
               "    unroll(i)\n"
               "    vectorize(j)\n"
               "}\n");
    if (pack)
        put(b, "%s", pack_w_panel);
    if (nt)
        put(b, "schedule Y {\n"
               "    compute_at(WL, jo)\n"
               "}\n"
               "schedule WL {\n" /* the transposed copy: 16 x 16 blocks in registers */
               "    ko, ki = split(k, 16)\n"
               "    jo, jl = split(j, 16)\n"
               "    reorder(ko, jo, ki, jl)\n"
               "    unroll(ki)\n"
               "    vectorize(jl)\n"
               "}\n");
}

int rk_variant_count(RavelKernelKind kind) {
    if (kind == RK_DENSE || kind == RK_DENSE_BIAS_GELU)
        return 3;
    return kind == RK_SGEMM ? 1 : 2;
}

/* The rows computed for M rows by tiles of mr: the padded tail included. */
static int padded_rows(int m, int mr) {
    return (m + mr - 1) / mr * mr;
}

int rk_variant_rule(RavelKernelKind kind, int m, int n, int k) {
    if (kind == RK_BMM_NT)
        return n <= RK_DOT_MAX_N ? RK_VARIANT_DOT : RK_VARIANT_BCAST;
    if (kind == RK_BMM_NN)
        return padded_rows(m, 4) < padded_rows(m, 6) ? RK_VARIANT_4ROWS : RK_VARIANT_6ROWS;
    if (rk_variant_count(kind) == 1)
        return 0;
    /* stream re-reads its k-major copy of X once per panel of W; kblock
     * packs all of W once per call, which few rows do not amortize */
    if (m <= RK_STREAM_MAX_M && ((long)m * k <= RK_STREAM_MAX_XL || m <= RK_STREAM_MIN_M))
        return RK_VARIANT_STREAM;
    /* packed streams its 64 x K panel of W from L2 once per 6-row tile */
    int kblock_max_m = k > RK_DEEP_K ? RK_KBLOCK_DEEP_MAX_M : RK_KBLOCK_MAX_M;
    return m <= kblock_max_m ? RK_VARIANT_KBLOCK : RK_VARIANT_PACKED;
}

int rk_dispatch(const int64_t *sizes, void *dispatch) {
    const RkDispatch *d = dispatch;
    return d->program_variant[rk_variant_rule(d->kind, (int)sizes[0], d->n, d->k)];
}

const char *rk_variant_name(RavelKernelKind kind, int variant) {
    if (kind == RK_DENSE || kind == RK_DENSE_BIAS_GELU)
        return variant == RK_VARIANT_STREAM   ? "stream"
               : variant == RK_VARIANT_PACKED ? "packed"
                                              : "kblock";
    if (kind == RK_BMM_NT)
        return variant == RK_VARIANT_DOT ? "dot" : "bcast6x64_wt";
    if (kind == RK_BMM_NN)
        return variant == RK_VARIANT_6ROWS ? "bcast6x64" : "bcast4x64";
    return "bcast6x64";
}

bool rk_source(RavelKernelKind kind, int batch, int n, int k, int variant, char *buf, size_t cap) {
    if (!buf || cap == 0 || variant < 0 || variant >= rk_variant_count(kind))
        return false;
    SrcText src = {.s = buf, .len = 0, .cap = cap};
    buf[0] = 0;
    switch (kind) {
    case RK_DENSE:
    case RK_DENSE_BIAS_GELU:
        dense_source(&src, kind == RK_DENSE_BIAS_GELU, n, k, variant);
        break;
    case RK_BMM_NT:
        if (variant == RK_VARIANT_DOT)
            nt_dot_source(&src, batch, n, k);
        else
            nn_source(&src, batch, n, k, true, 6);
        break;
    case RK_BMM_NN:
        nn_source(&src, batch, n, k, false, variant == RK_VARIANT_6ROWS ? 6 : 4);
        break;
    case RK_SGEMM:
        nn_source(&src, 0, n, k, false, 6);
        break;
    default:
        return false;
    }
    return !src.overflow;
}

/* ---- bench/programs/ ---- */

/* The dense programs at the first shape of bench_dense (BERT's fused QKV
 * projection, W [2304, 768]) and, for the 8-row stream tile, at K = 3072;
 * dense + bias + gelu at the FFN's first half (W [3072, 768], as
 * examples/dense_gelu.rv); bmm at the T where bench_bmm picks each
 * variant; SGEMM without and with the packing of W. */
const RkProgram rk_programs[] = {
    {"dense_stream.rv", RK_DENSE, 0, 2304, 768, RK_VARIANT_STREAM,
     "Few rows (bench: M * K <= 64Ki floats or M <= 48). X is transposed once,\n"
     "at the top of the kernel, into a k-major copy XL (compute_at(XL); a\n"
     "blocked transpose, parallel over blocks of k). Then per panel of 24\n"
     "rows of W (parallel) and block of 16 rows of X, a 16 x 24 tile of Y^T\n"
     "in registers (YL, layout \"j, i\"):\n"
     "X's 16 rows are the vector lanes, W's 24 values are broadcast from\n"
     "memory by the FMAs, k unrolled by 8. Each panel of W is read from\n"
     "memory once; the copy of X is re-read per panel, hence few rows."},
    {"dense_stream_k3072.rv", RK_DENSE, 0, 768, 3072, RK_VARIANT_STREAM,
     "The stream schedule (dense_stream.rv) when W's rows are a multiple of\n"
     "4 KiB apart (K = 3072: 12 KiB): its tile has 8 rows of W, not 24, as\n"
     "24 such rows all map to one 12-way L1 set and evict each other."},
    {"dense_kblock.rv", RK_DENSE, 0, 2304, 768, RK_VARIANT_KBLOCK,
     "Middle row counts (bench: M <= 208, M <= 384 when K > 1024). Per panel\n"
     "of 64 rows of W (parallel) and block of 256 values of k, the block of\n"
     "the panel is packed k-major (WL, 16 x 16 blocks transposed in\n"
     "registers; 64 KiB), then each 6-row tile adds its products over the\n"
     "block to the panel's M x 64 sums YL (the k blocks are outside the row\n"
     "tiles, so YL accumulates in place; the lowering's promote pass keeps\n"
     "each 6 x 64 tile in registers across the block)."},
    {"dense_packed.rv", RK_DENSE, 0, 2304, 768, RK_VARIANT_PACKED,
     "Many rows (above kblock's range, where its M x 256 block of X leaves\n"
     "L2). Per panel of 64 rows of W (parallel), the panel is packed k-major\n"
     "once (WL, a blocked transpose: 16 values of k of one row, then the next\n"
     "row); each 6-row tile of Y keeps its 6 x 64 sums in registers (YL,\n"
     "24 vector accumulators) while k runs outside the tile, broadcasting X\n"
     "against four 16-lane vectors of WL per row."},
    {"dense_bias_gelu_stream.rv", RK_DENSE_BIAS_GELU, 0, 3072, 768, RK_VARIANT_STREAM,
     "dense_stream.rv with the epilogue: bias and gelu are applied as the\n"
     "tile of Y^T is written back (cache_write moves the sum into YL)."},
    {"dense_bias_gelu_kblock.rv", RK_DENSE_BIAS_GELU, 0, 3072, 768, RK_VARIANT_KBLOCK,
     "dense_kblock.rv with the epilogue, applied per panel as YL's finished\n"
     "sums are written to Y, 16 lanes at a time."},
    {"dense_bias_gelu_packed.rv", RK_DENSE_BIAS_GELU, 0, 3072, 768, RK_VARIANT_PACKED,
     "dense_packed.rv with the epilogue, applied as each 6 x 64 tile is\n"
     "written back, 16 lanes at a time. examples/dense_gelu.rv uses this\n"
     "schedule."},
    {"bmm_nt_dot.rv", RK_BMM_NT, 192, 8, 64, RK_VARIANT_DOT,
     "Narrow outputs (bench: N <= 15). X's row i and W's row j are both\n"
     "contiguous in k, so each output is a vector dot product over k (a lane\n"
     "reduction: 16 partial sums, added across the lanes at the end); no\n"
     "copy of either operand. Parallel over the batch."},
    {"bmm_nt_bcast6x64_wt.rv", RK_BMM_NT, 192, 64, 64, RK_VARIANT_BCAST,
     "N >= 16. The broadcast micro-kernel: 6 rows x 64 columns of Y in\n"
     "registers (32 or 16 columns when N < 64), X's values broadcast\n"
     "against 16-lane vectors of a k-major copy of W's 64-row panel (WL,\n"
     "made per batch element and panel by 16 x 16 blocks transposed in\n"
     "registers). When N is a multiple of the tile, a partial row tile runs\n"
     "the whole tile on a zero-padded copy of X's rows (pad=1)."},
    {"bmm_nn_bcast6x64.rv", RK_BMM_NN, 192, 64, 64, RK_VARIANT_6ROWS,
     "The broadcast micro-kernel: 6 rows x 64 columns of Y in registers,\n"
     "W's rows read in place (contiguous in j), parallel over the batch; a\n"
     "partial row tile runs the whole tile on a zero-padded copy of X's rows\n"
     "(pad=1). bench picks it or the 4-row tile, whichever pads fewer rows."},
    {"bmm_nn_bcast4x64.rv", RK_BMM_NN, 192, 64, 64, RK_VARIANT_4ROWS,
     "bmm_nn_bcast6x64.rv with 4-row tiles (M = 8, 16, 32, 64, ...: no\n"
     "padding)."},
    {"sgemm.rv", RK_SGEMM, 0, 512, 512, 0,
     "The broadcast micro-kernel (6 x 64 tiles of Y in registers, W's rows\n"
     "read in place), parallel over 64-column panels."},
    {"sgemm_n2048.rv", RK_SGEMM, 0, 2048, 2048, 0,
     "sgemm.rv for N >= 1024: each 64-column panel of W is copied into a\n"
     "contiguous buffer (WL) once per panel, so the tile reads it\n"
     "contiguously."},
};
const int rk_nprograms = (int)(sizeof rk_programs / sizeof rk_programs[0]);

bool rk_program_text(const RkProgram *p, char *buf, size_t cap) {
    static const char *const defs[RK_COUNT] = {
        [RK_DENSE] = "dense layer Y = X W^T",
        [RK_DENSE_BIAS_GELU] = "dense layer Y = gelu(X W^T + bias)",
        [RK_BMM_NT] = "batched matmul Y[b] = X[b] W[b]^T",
        [RK_BMM_NN] = "batched matmul Y[b] = X[b] W[b]",
        [RK_SGEMM] = "matrix product Y = X W",
    };
    if (!p || p->kind < 0 || p->kind >= RK_COUNT || !buf || cap == 0)
        return false;
    char batch[32] = "";
    if (p->batch)
        snprintf(batch, sizeof batch, ", batch = %d", p->batch);
    SrcText src = {.s = buf, .len = 0, .cap = cap};
    put(&src,
        "# bench/programs/%s — schedule \"%s\" of bench/'s\n"
        "# %s, at N = %d, K = %d%s (M symbolic).\n"
        "# Written by `make bench-programs` from bench/kernel_sources.c, which\n"
        "# bench/ compiles for every shape; tests/unit/test_kernels.c checks it.\n"
        "#\n",
        p->file, rk_variant_name(p->kind, p->variant), defs[p->kind], p->n, p->k, batch);
    for (const char *l = p->doc; *l;) {
        const char *e = strchr(l, '\n');
        int len = e ? (int)(e - l) : (int)strlen(l);
        put(&src, "# %.*s\n", len, l);
        l += len + (e != NULL);
    }
    put(&src, "\n");
    if (src.overflow || !rk_source(p->kind, p->batch, p->n, p->k, p->variant, buf + src.len,
                                   cap - src.len))
        return false;
    return true;
}
