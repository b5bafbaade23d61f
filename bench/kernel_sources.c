/*
 * bench/kernel_sources.c — the .rv programs of the benchmark kernels
 * (kernel_sources.h).
 */
#include "kernel_sources.h"

#include <stdarg.h>
#include <stdio.h>

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

int rk_variant_for(RavelKernelKind kind, int m, int n, int k) {
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
