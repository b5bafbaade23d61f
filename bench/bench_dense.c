/*
 * bench/bench_dense.c — the dense layer Y = X·Wᵀ (+ bias, exact gelu).
 *
 * X is [16·T, K] (16 sequences of length T), W is [N, K] as a framework
 * stores a linear layer's weight. For every thread count, weight shape N×K,
 * epilogue and T, one JSON line per baseline:
 *
 *   openblas          cblas_sgemm NT, then the plain-C bias+gelu pass
 *   onednn            oneDNN matmul on W as stored (strides {1,K}), then the
 *                     same plain-C pass
 *   onednn_prepacked  oneDNN matmul on W reordered once into oneDNN's own
 *                     layout, bias and gelu_erf fused as post-ops: the best a
 *                     tuned inference engine gets from oneDNN
 *
 * ravel's kernel (bench/ravel_kernels.h) is timed alternately with each.
 * --shapes NxK,... picks weight shapes; default 2304x768,768x768,3072x768,768x3072.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "common.h"

#define DEFAULT_T "1,2,3,5,8,13,16,24,32,47,64,96,128"
#define DEFAULT_SHAPES "2304x768,768x768,3072x768,768x3072"

enum { BASE_OPENBLAS, BASE_ONEDNN, BASE_ONEDNN_PREPACKED, BASE_COUNT };
static const char *const base_names[BASE_COUNT] = {"openblas", "onednn", "onednn_prepacked"};

typedef struct {
    int m, n, k, gelu;
    const float *x, *w, *bias;
    float *y;
    BlDnnl *dnnl;   /* NULL for OpenBLAS */
    int c_epilogue; /* run bl_bias_gelu after the GEMM */
} DenseCall;

static void run_dense(void *ctx) {
    DenseCall *c = ctx;
    if (c->dnnl)
        bl_dnnl_run(c->dnnl);
    else
        bl_openblas_dense(c->m, c->n, c->k, c->x, c->w, c->y);
    if (c->c_epilogue)
        bl_bias_gelu(c->m, c->n, c->y, c->bias);
}

/* Sets up baseline `b` for one shape; free with teardown(). */
static DenseCall setup(int b, int m, int n, int k, int gelu, const float *x, const float *w,
                       const float *bias, float *y) {
    DenseCall c = {m, n, k, gelu, x, w, bias, y, NULL, gelu};
    if (b != BASE_OPENBLAS) {
        BlDnnlSpec s = {.m = m, .n = n, .k = k, .b_trans = 1};
        if (b == BASE_ONEDNN_PREPACKED) {
            s.prepack = 1;
            s.bias_gelu = gelu;
            c.c_epilogue = 0;
        }
        c.dnnl = bl_dnnl_new(&s, x, w, bias, y);
    }
    return c;
}

static void teardown(DenseCall *c) {
    bl_dnnl_free(c->dnnl);
}

static RavelKernel *ravel_for(int m, int n, int k, int gelu, int threads) {
    RavelKernelShape s = {gelu ? RK_DENSE_BIAS_GELU : RK_DENSE, 0, m, n, k, threads};
    return ravel_kernel_for(&s);
}

static int parse_shapes(const char *s, int (*nk)[2]) {
    int count = 0;
    while (*s && count < BENCH_MAX_LIST) {
        int n, k, used;
        if (sscanf(s, "%dx%d%n", &n, &k, &used) != 2) {
            fprintf(stderr, "bench_dense: bad --shapes '%s' (want NxK,...)\n", s);
            exit(2);
        }
        nk[count][0] = n, nk[count][1] = k, count++;
        s += used;
        s += *s == ',';
    }
    return count;
}

/* --verify: every baseline and ravel (if present) against the naive loop. */
static int verify(const BenchArgs *args) {
    static const int cases[][3] = {{16, 2304, 768}, {48, 768, 768}, {5, 37, 19}, {80, 96, 3072}};
    int ok = 1;
    for (int ti = 0; ti < args->nthreads; ti++) {
        int threads = args->threads[ti];
        bl_set_threads(threads);
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            int m = cases[ci][0], n = cases[ci][1], k = cases[ci][2];
            float *x = bench_alloc((size_t)m * k), *w = bench_alloc((size_t)n * k);
            float *bias = bench_alloc((size_t)n), *y = bench_alloc((size_t)m * n);
            double *ref = malloc(sizeof(double) * m * n), *absref = malloc(sizeof(double) * m * n);
            bench_fill(x, (size_t)m * k, 1), bench_fill(w, (size_t)n * k, 2),
                bench_fill(bias, n, 3);
            for (int gelu = 0; gelu <= 1; gelu++) {
                bench_ref(0, m, n, k, 1, x, w, gelu ? bias : NULL, gelu, ref, absref);
                char what[128];
                for (int b = 0; b < BASE_COUNT; b++) {
                    if (!bench_want(args, base_names[b]))
                        continue;
                    DenseCall c = setup(b, m, n, k, gelu, x, w, bias, y);
                    memset(y, 0xff, sizeof(float) * m * n); /* NaNs: catch unwritten output */
                    run_dense(&c);
                    snprintf(what, sizeof what, "dense %s %dx%dx%d %s t%d", base_names[b], m, n, k,
                             gelu ? "bias_gelu" : "none", threads);
                    ok &= bench_check(what, (size_t)m * n, y, ref, absref);
                    teardown(&c);
                }
                RavelKernel *rk = ravel_for(m, n, k, gelu, threads);
                if (rk) {
                    memset(y, 0xff, sizeof(float) * m * n);
                    RavelCall rc = {rk, {x, w, gelu ? bias : NULL, y, 0, m, n, k}};
                    bench_ravel_call(&rc);
                    snprintf(what, sizeof what, "dense ravel(%s) %dx%dx%d %s t%d", rk->name, m, n,
                             k, gelu ? "bias_gelu" : "none", threads);
                    ok &= bench_check(what, (size_t)m * n, y, ref, absref);
                    ravel_kernel_free(rk);
                }
            }
            free(x), free(w), free(bias), free(y), free(ref), free(absref);
        }
    }
    return ok;
}

int main(int argc, char **argv) {
    bl_init(argc, argv);
    BenchArgs args;
    bench_parse_args(argc, argv, DEFAULT_T, "--shapes", &args);
    if (args.verify)
        return verify(&args) ? 0 : 1;
    if (args.quick && !args.extra) {
        args.nt = bench_parse_list("1,16,128", args.t);
        args.extra = "2304x768";
    }
    int nk[BENCH_MAX_LIST][2];
    int nshapes = parse_shapes(args.extra ? args.extra : DEFAULT_SHAPES, nk);
    int tmax = 0;
    for (int i = 0; i < args.nt; i++)
        tmax = args.t[i] > tmax ? args.t[i] : tmax;
    fprintf(stderr, "bench_dense: %s\n", bl_describe());

    for (int ti = 0; ti < args.nthreads; ti++) {
        int threads = args.threads[ti];
        bl_set_threads(threads);
        for (int si = 0; si < nshapes; si++) {
            int n = nk[si][0], k = nk[si][1], mmax = 16 * tmax;
            float *x = bench_alloc((size_t)mmax * k), *w = bench_alloc((size_t)n * k);
            float *bias = bench_alloc((size_t)n);
            float *y_rv = bench_alloc((size_t)mmax * n), *y_bl = bench_alloc((size_t)mmax * n);
            bench_fill(x, (size_t)mmax * k, 1), bench_fill(w, (size_t)n * k, 2);
            bench_fill(bias, (size_t)n, 3);
            for (int gelu = 0; gelu <= 1; gelu++) {
                for (int i = 0; i < args.nt; i++) {
                    int t = args.t[i], m = 16 * t;
                    char cfg[256];
                    snprintf(cfg, sizeof cfg,
                             "{\"T\": %d, \"M\": %d, \"N\": %d, \"K\": %d, \"threads\": %d, "
                             "\"epilogue\": \"%s\"}",
                             t, m, n, k, threads, gelu ? "bias_gelu" : "none");
                    RavelKernel *rk = ravel_for(m, n, k, gelu, threads);
                    RavelCall rc = {rk, {x, w, gelu ? bias : NULL, y_rv, 0, m, n, k}};
                    DenseCall calls[BASE_COUNT];
                    BenchFn fns[BASE_COUNT];
                    void *ctxs[BASE_COUNT];
                    for (int b = 0; b < BASE_COUNT; b++) {
                        int on = bench_want(&args, base_names[b]);
                        calls[b] = on ? setup(b, m, n, k, gelu, x, w, bias, y_bl) : (DenseCall){0};
                        fns[b] = run_dense;
                        ctxs[b] = on ? &calls[b] : NULL;
                    }
                    bench_compare(&args, "dense", cfg, 2.0 * m * n * k, &rc, BASE_COUNT, base_names,
                                  fns, ctxs);
                    for (int b = 0; b < BASE_COUNT; b++)
                        teardown(&calls[b]);
                    ravel_kernel_free(rk);
                }
            }
            free(x), free(w), free(bias), free(y_rv), free(y_bl);
        }
    }
    return 0;
}
