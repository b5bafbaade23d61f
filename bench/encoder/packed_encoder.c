/*
 * bench/encoder/packed_encoder.c — the packed C baseline of the encoder
 * layer (ENCODER.md), in the style of EffectiveTransformer / FasterTransformer
 * "remove padding": the tokens of a batch stay packed [T, H] throughout, the
 * four projections are OpenBLAS cblas_sgemm calls over all T tokens, and
 * attention runs per (sequence, head) as two small cblas_sgemm calls on
 * strided views of the packed QKV — so no FLOP is spent on padding.
 * Softmax, bias + gelu, residual + layernorm are plain C loops written to
 * vectorize (`omp simd`): exp and erf are polynomial, not glibc's scalar
 * expf/erff, which would otherwise dominate (bench/README.md).
 *
 * Threads: the big GEMMs use OpenBLAS's own threads (openblas_set_num_threads
 * through bl_set_threads); the (sequence, head) pairs of attention and the
 * rows of the element-wise passes are split with OpenMP, OpenBLAS calling
 * single-threaded inside — a small GEMM gains nothing from OpenBLAS's
 * threads and the pairs are independent.
 *
 * Driver: times one layer per batch written by gen.py, printing JSON lines
 * (bench/README.md, "Encoder baselines"); --check compares with ref/y.npy.
 * The driver also times ravel's layer (ravel_encoder.h, side "ravel") on the
 * same batch, the same input buffer and weights, the two sides' calls
 * interleaved by bench_sides, and reports how far ravel's output is from
 * this baseline's (`--sides` picks them).
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "ravel_encoder.h"
#include "timing.h"

void openblas_set_num_threads(int n);

typedef struct {
    int hidden, heads, head_dim, ff;
    float *w_qkv, *b_qkv, *w_o, *b_o, *ln1_g, *ln1_b, *w_ff1, *b_ff1, *w_ff2, *b_ff2, *ln2_g,
        *ln2_b;
} PeWeights;

/* One batch: lengths, packed input and output, and the layer's scratch. */
typedef struct {
    const PeWeights *w;
    int batch, tokens, max_len, threads;
    const int *len;
    int *off;
    const float *x;
    float *y;
    float *qkv, *ctx, *y1, *ffh, *scores; /* scores: max_len² per thread */
} PeBatch;

/* ---- .npy input (float32 or int32, C order, version 1 or 2 headers) ---- */

static void *pe_load_npy(const char *path, const char *descr, long *count) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "packed_encoder: cannot open %s (run bench/encoder/gen.py)\n", path);
        exit(1);
    }
    unsigned char magic[10];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) {
        fprintf(stderr, "packed_encoder: %s: not a .npy file\n", path);
        exit(1);
    }
    unsigned hlen = 0;
    if (magic[6] == 1) {
        unsigned char b[2];
        if (fread(b, 1, 2, f) != 2) exit(1);
        hlen = b[0] | b[1] << 8;
    } else {
        unsigned char b[4];
        if (fread(b, 1, 4, f) != 4) exit(1);
        hlen = b[0] | b[1] << 8 | (unsigned)b[2] << 16 | (unsigned)b[3] << 24;
    }
    char *hdr = calloc(hlen + 1, 1);
    if (fread(hdr, 1, hlen, f) != hlen) exit(1);
    if (!strstr(hdr, descr) || strstr(hdr, "'fortran_order': True")) {
        fprintf(stderr, "packed_encoder: %s: expected %s, C order: %s\n", path, descr, hdr);
        exit(1);
    }
    long n = 1;
    char *p = strchr(strstr(hdr, "'shape'"), '(') + 1;
    while (*p && *p != ')') {
        char *end;
        long d = strtol(p, &end, 10);
        if (end == p) break;
        n *= d;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    free(hdr);
    void *data = malloc((size_t)n * 4 + 64);
    if (fread(data, 4, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "packed_encoder: %s: short file\n", path);
        exit(1);
    }
    fclose(f);
    *count = n;
    return data;
}

static float *pe_param(const char *dir, const char *name, long want) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    long n;
    float *p = pe_load_npy(path, "<f4", &n);
    if (n != want) {
        fprintf(stderr, "packed_encoder: %s has %ld elements, expected %ld\n", path, n, want);
        exit(1);
    }
    return p;
}

static void pe_load_weights(PeWeights *w, const char *dir) {
    long h = w->hidden, f = w->ff;
    w->w_qkv = pe_param(dir, "w_qkv", 3 * h * h);
    w->b_qkv = pe_param(dir, "b_qkv", 3 * h);
    w->w_o = pe_param(dir, "w_o", h * h);
    w->b_o = pe_param(dir, "b_o", h);
    w->ln1_g = pe_param(dir, "ln1_g", h);
    w->ln1_b = pe_param(dir, "ln1_b", h);
    w->w_ff1 = pe_param(dir, "w_ff1", f * h);
    w->b_ff1 = pe_param(dir, "b_ff1", f);
    w->w_ff2 = pe_param(dir, "w_ff2", h * f);
    w->b_ff2 = pe_param(dir, "b_ff2", h);
    w->ln2_g = pe_param(dir, "ln2_g", h);
    w->ln2_b = pe_param(dir, "ln2_b", h);
}

/* ---- vectorizable element-wise math ---- */

/* exp for x <= 0 (softmax after max subtraction): 2^n · p(r), |r| <= ln2/2,
 * degree-6 Taylor-like minimax polynomial; relative error ~2e-7. */
#pragma omp declare simd notinbranch
static inline float pe_exp(float x) {
    x = x < -87.0f ? -87.0f : x;
    float n = __builtin_roundf(x * 1.44269504088896341f);
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { float f; int32_t i; } s = {.i = ((int32_t)n + 127) << 23};
    return p * s.f;
}

/* erf as a rational function of x on [-4, 4] (±1 beyond, in float32): the
 * approximation Eigen and XLA use; a few ulp from erff. */
#pragma omp declare simd notinbranch
static inline float pe_erf(float x) {
    x = x > 4.0f ? 4.0f : x < -4.0f ? -4.0f : x;
    float x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    float q = -1.45660718464996e-05f;
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    return x * p / q;
}

static void pe_softmax_rows(float *s, int n) {
    for (int i = 0; i < n; i++) {
        float *row = s + (size_t)i * n;
        float m = row[0];
        for (int j = 1; j < n; j++) m = row[j] > m ? row[j] : m;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < n; j++) {
            row[j] = pe_exp(row[j] - m);
            sum += row[j];
        }
        float inv = 1.0f / sum;
#pragma omp simd
        for (int j = 0; j < n; j++) row[j] *= inv;
    }
}

/* row = layernorm(row + res + bias) in place (two-pass mean and variance). */
static void pe_add_layernorm(float *row, const float *res, const float *bias, const float *g,
                             const float *b, int h) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < h; j++) {
        row[j] += res[j] + bias[j];
        sum += row[j];
    }
    float mean = sum / (float)h, var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int j = 0; j < h; j++) var += (row[j] - mean) * (row[j] - mean);
    float rstd = 1.0f / sqrtf(var / (float)h + 1e-12f);
#pragma omp simd
    for (int j = 0; j < h; j++) row[j] = (row[j] - mean) * rstd * g[j] + b[j];
}

/* ---- the layer ---- */

static void pe_gemm_nt(int m, int n, int k, const float *a, const float *w, float *c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, w, k, 0.0f, c, n);
}

static void pe_layer(void *ctx) {
    PeBatch *pb = ctx;
    const PeWeights *w = pb->w;
    const int T = pb->tokens, H = w->hidden, F = w->ff, D = w->head_dim, NH = w->heads;
    const int H3 = 3 * H, nt = pb->threads;

    pe_gemm_nt(T, H3, H, pb->x, w->w_qkv, pb->qkv);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < T; t++) {
        float *row = pb->qkv + (size_t)t * H3;
#pragma omp simd
        for (int j = 0; j < H3; j++) row[j] += w->b_qkv[j];
    }

    /* Attention: one task per (sequence, head), longest sequences spread by
     * dynamic scheduling; OpenBLAS single-threaded inside. */
    openblas_set_num_threads(1);
    const float scale = 1.0f / sqrtf((float)D);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int task = 0; task < pb->batch * NH; task++) {
        int b = task / NH, h = task % NH, n = pb->len[b];
        if (n == 0) continue;
        float *s = pb->scores + (size_t)omp_get_thread_num() * pb->max_len * pb->max_len;
        const float *q = pb->qkv + (size_t)pb->off[b] * H3 + h * D;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, D, scale, q, H3, q + H, H3, 0.0f,
                    s, n);
        pe_softmax_rows(s, n);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, n, 1.0f, s, n, q + 2 * H, H3,
                    0.0f, pb->ctx + (size_t)pb->off[b] * H + h * D, H);
    }
    openblas_set_num_threads(nt);

    pe_gemm_nt(T, H, H, pb->ctx, w->w_o, pb->y1);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < T; t++)
        pe_add_layernorm(pb->y1 + (size_t)t * H, pb->x + (size_t)t * H, w->b_o, w->ln1_g, w->ln1_b, H);

    pe_gemm_nt(T, F, H, pb->y1, w->w_ff1, pb->ffh);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < T; t++) {
        float *row = pb->ffh + (size_t)t * F;
#pragma omp simd
        for (int j = 0; j < F; j++) {
            float z = row[j] + w->b_ff1[j];
            row[j] = 0.5f * z * (1.0f + pe_erf(z * 0.70710678118654752f));
        }
    }

    pe_gemm_nt(T, H, F, pb->ffh, w->w_ff2, pb->y);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < T; t++)
        pe_add_layernorm(pb->y + (size_t)t * H, pb->y1 + (size_t)t * H, w->b_ff2, w->ln2_g, w->ln2_b, H);
}

/* ---- batches and the input of ENCODER.md ---- */

static void pe_usage(void) {
    fprintf(stderr,
            "usage: packed_encoder [--config cora512|bert768] [--data DIR] [--ref DIR]\n"
            "         [--datasets a,b] [--batch 32,64,128] [--threads 1,2]\n"
            "         [--sides packed_c,ravel] [--program FILE.rv] [--layers 1|6]\n"
            "         [--min-time S] [--min-runs N] [--max-runs N] [--check]\n");
    exit(2);
}

static void pe_usage_threads(void) {
    fprintf(stderr, "packed_encoder: threads must be 1..8\n");
    exit(2);
}

static uint64_t pe_fnv1a64(const char *s) {
    uint64_t x = 0xCBF29CE484222325ull;
    for (; *s; s++) x = (x ^ (unsigned char)*s) * 0x100000001B3ull;
    return x;
}

/* Element i of stream (seed, name) as u in [-1, 1) (ENCODER.md, "Generator"). */
static void pe_uniform(uint64_t seed, const char *name, float *out, size_t n) {
    uint64_t key = (seed * 0x100000001B3ull) ^ pe_fnv1a64(name);
    for (size_t i = 0; i < n; i++) {
        uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        out[i] = 2.0f * (float)(z >> 40) / 16777216.0f - 1.0f;
    }
}

static void *pe_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) exit(1);
    memset(p, 0, bytes);
    return p;
}

static PeBatch *pe_batch_new(const PeWeights *w, const int *len, int batch, int threads) {
    PeBatch *pb = calloc(1, sizeof *pb);
    pb->w = w;
    pb->batch = batch;
    pb->len = len;
    pb->threads = threads;
    pb->off = calloc((size_t)batch + 1, sizeof(int));
    for (int b = 0; b < batch; b++) {
        pb->off[b + 1] = pb->off[b] + len[b];
        pb->max_len = len[b] > pb->max_len ? len[b] : pb->max_len;
    }
    size_t T = (size_t)(pb->tokens = pb->off[batch]), H = (size_t)w->hidden;
    float *x = pe_alloc(T * H * 4);
    pe_uniform(7, "x", x, T * H);
    pb->x = x;
    pb->y = pe_alloc(T * H * 4);
    pb->qkv = pe_alloc(T * 3 * H * 4);
    pb->ctx = pe_alloc(T * H * 4);
    pb->y1 = pe_alloc(T * H * 4);
    pb->ffh = pe_alloc(T * (size_t)w->ff * 4);
    pb->scores = pe_alloc((size_t)threads * pb->max_len * pb->max_len * 4);
    return pb;
}

static void pe_batch_free(PeBatch *pb) {
    free(pb->off);
    free((void *)pb->x);
    free(pb->y);
    free(pb->qkv);
    free(pb->ctx);
    free(pb->y1);
    free(pb->ffh);
    free(pb->scores);
    free(pb);
}

static double pe_flops(const PeWeights *w, const int *len, int batch) {
    double t = 0, sq = 0, h = w->hidden, f = w->ff;
    for (int b = 0; b < batch; b++) {
        t += len[b];
        sq += (double)len[b] * len[b];
    }
    return 2 * t * h * (3 * h + h + 2 * f) + 4 * h * sq;
}

/* ---- driver ---- */

static int pe_split(const char *s, char out[][32], int max) {
    int n = 0;
    while (*s && n < max) {
        const char *e = strchr(s, ',');
        size_t k = e ? (size_t)(e - s) : strlen(s);
        snprintf(out[n++], 32, "%.*s", (int)k, s);
        s += k + (e != NULL);
    }
    return n;
}

static const float *const *pe_weight_list(const PeWeights *w, const float *out[RE_NWEIGHTS]) {
    const float *v[RE_NWEIGHTS] = {w->w_qkv, w->b_qkv, w->w_o,   w->b_o,   w->ln1_g, w->ln1_b,
                                   w->w_ff1, w->b_ff1, w->w_ff2, w->b_ff2, w->ln2_g, w->ln2_b};
    memcpy(out, v, sizeof v);
    return out;
}

/* ravel's program for the config, compiled once per thread count. */
static ReProgram *pe_ravel(const PeWeights *w, const char *program, int threads) {
    static ReProgram *cache[9];
    if (threads < 1 || threads > 8) pe_usage_threads();
    if (!cache[threads]) {
        const float *ws[RE_NWEIGHTS];
        cache[threads] = re_program_new(program, threads, w->hidden, w->ff, pe_weight_list(w, ws));
    }
    return cache[threads];
}

static double pe_max_diff(const float *a, const float *b, size_t n) {
    double err = 0;
    for (size_t i = 0; i < n; i++) err = fmax(err, fabs((double)a[i] - b[i]));
    return err;
}

/* Compares with ref/y.npy at 1 and 2 threads, and pe_erf/pe_exp with libm;
 * ravel's program too, when given: a program of `layers` tied layers
 * against the baseline's layer applied that many times (the baseline's
 * first layer is the one checked against ref/y.npy). */
static int pe_check(PeWeights *w, const char *ref_dir, const char *program, int layers) {
    char path[4096];
    long nb, ny;
    snprintf(path, sizeof path, "%s/lengths.npy", ref_dir);
    int *len = pe_load_npy(path, "<i4", &nb);
    snprintf(path, sizeof path, "%s/y.npy", ref_dir);
    float *ref = pe_load_npy(path, "<f4", &ny);
    double emax = 0, xmax = 0;
    for (float v = -6.0f; v <= 6.0f; v += 1e-3f) {
        emax = fmax(emax, fabs((double)pe_erf(v) - erf(v)));
        if (v <= 0) xmax = fmax(xmax, fabs((double)pe_exp(v) - exp(v)) / exp(v));
    }
    printf("packed_encoder: pe_erf max abs error %.3g, pe_exp max rel error %.3g\n", emax, xmax);
    int bad = emax > 1e-6 || xmax > 1e-6;
    for (int th = 1; th <= 2; th++) {
        bl_set_threads(th);
        PeBatch *pb = pe_batch_new(w, len, (int)nb, th);
        if ((long)pb->tokens * w->hidden != ny) {
            fprintf(stderr, "packed_encoder: ref/y.npy has %ld elements\n", ny);
            exit(1);
        }
        pe_layer(pb);
        double err = pe_max_diff(pb->y, ref, (size_t)ny);
        printf("packed_encoder: %d thread(s): max abs error vs ref/y.npy %.3g (%s)\n", th, err,
               err < 1e-3 ? "ok" : "FAIL");
        bad |= !(err < 1e-3);
        if (program) {
            /* the reference of `layers` layers: the checked layer again on
             * its own output, then the first input restored for ravel */
            size_t bytes = (size_t)ny * 4;
            float *x0 = pe_alloc(bytes), *want = pe_alloc(bytes);
            memcpy(x0, pb->x, bytes);
            for (int l = 1; l < layers; l++) {
                memcpy((void *)pb->x, pb->y, bytes);
                pe_layer(pb);
            }
            memcpy(want, pb->y, bytes);
            memcpy((void *)pb->x, x0, bytes);
            memset(pb->y, 0, bytes);
            ReBatch *rb = re_batch_new(pe_ravel(w, program, th), len, (int)nb, pb->x, pb->y);
            re_run(rb);
            err = pe_max_diff(pb->y, want, (size_t)ny);
            if (layers == 1)
                printf("ravel (%s): %d thread(s): max abs error vs ref/y.npy %.3g (%s)\n", program,
                       th, err, err < 1e-3 ? "ok" : "FAIL");
            else
                printf("ravel (%s): %d thread(s): max abs error vs the baseline's layer %d times "
                       "%.3g (%s)\n",
                       program, th, layers, err, err < 1e-3 ? "ok" : "FAIL");
            bad |= !(err < 1e-3);
            re_batch_free(rb);
            free(x0);
            free(want);
        }
        pe_batch_free(pb);
    }
    free(len);
    free(ref);
    return bad;
}


int main(int argc, char **argv) {
    bl_init(argc, argv);
    const char *config = "cora512", *data = "bench/encoder/out", *ref = "bench/encoder/ref";
    const char *datasets = "race,wiki512,squadv2,wiki128,mnli,xnli,mrpc,cola";
    const char *batches = "32,64,128", *threads = "1,2", *sides = "packed_c,ravel";
    const char *program = NULL;
    int check = 0, layers = 1;
    BenchOpts o = bench_default_opts();
    o.min_runs = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check")) { check = 1; continue; }
        if (!v) pe_usage();
        if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--ref")) ref = v;
        else if (!strcmp(a, "--datasets")) datasets = v;
        else if (!strcmp(a, "--batch")) batches = v;
        else if (!strcmp(a, "--threads")) threads = v;
        else if (!strcmp(a, "--sides")) sides = v;
        else if (!strcmp(a, "--program")) program = v;
        else if (!strcmp(a, "--layers")) layers = atoi(v);
        else if (!strcmp(a, "--min-time")) o.min_time_s = atof(v);
        else if (!strcmp(a, "--min-runs")) o.min_runs = atoi(v);
        else if (!strcmp(a, "--max-runs")) o.max_runs = atoi(v);
        else pe_usage();
        i++;
    }
    PeWeights w = {.head_dim = 64};
    if (!strcmp(config, "cora512")) w.hidden = 512, w.heads = 8, w.ff = 2048;
    else if (!strcmp(config, "bert768")) w.hidden = 768, w.heads = 12, w.ff = 3072;
    else pe_usage();
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/weights/%s", data, config);
    pe_load_weights(&w, dir);
    char rvpath[4096];
    if (layers == 1)
        snprintf(rvpath, sizeof rvpath, "bench/encoder/encoder_%s.rv", config);
    else
        snprintf(rvpath, sizeof rvpath, "bench/encoder/encoder%d_%s.rv", layers, config);
    program = program ? program : rvpath;
    int want_c = strstr(sides, "packed_c") != NULL, want_rv = strstr(sides, "ravel") != NULL;
    /* --layers N: ravel's N-layer program (gen_rv.py, tied weights), for
     * the prelude's share of a model; the baseline runs one layer only */
    if (layers < 1) pe_usage();
    want_c &= layers == 1;
    if (check) {
        if (strcmp(config, "cora512")) pe_usage();
        return pe_check(&w, ref, want_rv ? program : NULL, layers);
    }
    fprintf(stderr, "packed_encoder: %s\n", bl_describe());
    char ds[16][32], bs[8][32], ts[8][32];
    int nds = pe_split(datasets, ds, 16), nbs = pe_split(batches, bs, 8), nts = pe_split(threads, ts, 8);
    for (int d = 0; d < nds; d++)
        for (int bi = 0; bi < nbs; bi++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/batches/%s_b%s.npy", data, ds[d], bs[bi]);
            long nb;
            int *len = pe_load_npy(path, "<i4", &nb);
            for (int ti = 0; ti < nts; ti++) {
                int th = atoi(ts[ti]);
                bl_set_threads(th);
                PeBatch *pb = pe_batch_new(&w, len, (int)nb, th);
                size_t ny = (size_t)pb->tokens * w.hidden;
                float *ry = pe_alloc(ny * 4);
                ReProgram *rp = want_rv ? pe_ravel(&w, program, th) : NULL;
                ReBatch *rb = rp ? re_batch_new(rp, len, (int)nb, pb->x, ry) : NULL;
                BenchSide side[2] = {{.fn = want_c ? pe_layer : NULL, .ctx = pb},
                                     {.fn = rb ? re_run : NULL, .ctx = rb}};
                ReCounters c0 = rp ? re_program_counters(rp) : (ReCounters){0};
                bench_sides(&o, side, 2);
                double fl = layers * pe_flops(&w, len, (int)nb);
                for (int si = 0; si < 2; si++) {
                    if (!side[si].stats.runs) continue;
                    printf("{\"bench\": \"encoder\", \"layer\": \"%s\", \"dataset\": \"%s\", \"batch\": %ld, "
                           "\"tokens\": %d, \"max_len\": %d, \"hidden\": %d, \"threads\": %d, "
                           "\"baseline\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, "
                           "\"max_ms\": %.4f, \"runs\": %d, \"useful_gflops\": %.2f",
                           config, ds[d], nb, pb->tokens, pb->max_len, w.hidden, th,
                           si ? "ravel" : "packed_c", side[si].stats.median_ms, side[si].stats.min_ms,
                           side[si].stats.max_ms, side[si].stats.runs,
                           fl / side[si].stats.median_ms * 1e-6);
                    if (layers > 1) printf(", \"layers\": %d", layers);
                    if (si == 1) {
                        /* per run of this batch (warm-up runs included) */
                        ReCounters c1 = re_program_counters(rp);
                        double runs = (double)(c1.runs - c0.runs);
                        int64_t pruns = c1.prelude_runs - c0.prelude_runs;
                        printf(", \"prelude_ms\": %.4f, \"kernel_ms\": %.4f, \"aux_bytes\": %lld, "
                               "\"compile_s\": %.2f",
                               1e3 * (c1.prelude_s - c0.prelude_s) / runs,
                               1e3 * (c1.kernel_s - c0.kernel_s) / runs,
                               (long long)(pruns ? (c1.aux_bytes - c0.aux_bytes) / pruns : 0),
                               c1.compile_s);
                        /* both sides ran on this batch: their outputs agree */
                        if (want_c)
                            printf(", \"max_abs_vs_packed_c\": %.3g", pe_max_diff(ry, pb->y, ny));
                    }
                    printf("}\n");
                }
                fflush(stdout);
                if (rb) re_batch_free(rb);
                free(ry);
                pe_batch_free(pb);
            }
            free(len);
        }
    return 0;
}
