/*
 * bench_trmm.c — triangular matrix multiplication C = A B, A lower
 * triangular N x N, B dense N x N (CoRa's trmm, paper 004 §7.3): ravel
 * running bench/ragged/trmm.rv (6-row tiles whose reduction ends at their
 * diagonal block, N a multiple of 64; $RAVEL_TRMM_PROGRAM: another program
 * with size N or NB = N / 64, e.g. examples/trmm.rv, the reduction
 * k < i + 1 row by row) through rv_program_run_into, against
 *   - openblas_strmm: cblas_strmm (left, lower, no transpose), in place on
 *     a copy of B made in the timed call (strmm overwrites its B; the copy
 *     is N² floats against N³ multiply-adds);
 *   - openblas_padded: cblas_sgemm on the whole square A (upper triangle
 *     zero), what a framework without a triangular kernel runs.
 * Useful FLOPs: N² (N + 1) (row i of A has i + 1 nonzeros). --verify
 * checks ravel and both baselines against a naive loop at small N.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "common.h"
#include "ravel.h"

#define DEFAULT_T "256,512,1024,2048"

/* The program's size: N, or NB = N / 64 (bench/ragged/trmm.rv). */
static int trmm_set_n(rv_module *m, rv_bindings *b, int n) {
    if (rv_module_size(m, "N"))
        return rv_bindings_set_size(b, "N", n) == RV_OK;
    if (n % 64) {
        fprintf(stderr, "bench_trmm: N = %d: the program takes multiples of 64 (NB)\n", n);
        exit(2);
    }
    return rv_bindings_set_size(b, "NB", n / 64) == RV_OK;
}

typedef struct {
    rv_module *m;
    rv_program *p;
    rv_bindings *b;
    rv_array *a, *bm, *c;
} Ravel;

static void trmm_fail(void) {
    fprintf(stderr, "bench_trmm: %s\n", rv_last_error());
    exit(1);
}

static void ravel_setup(Ravel *r, int n, int threads, float *a, float *b, float *c) {
    const char *path = getenv("RAVEL_TRMM_PROGRAM");
    path = path ? path : "bench/ragged/trmm.rv";
    rv_compile_options opt = {.serial = threads == 1, .threads = threads};
    if (rv_module_load(path, &r->m) != RV_OK || rv_program_compile(r->m, &opt, &r->p) != RV_OK)
        trmm_fail();
    int64_t shape[2] = {n, n};
    r->b = rv_bindings_new(r->m);
    if (rv_array_wrap(RV_F32, 2, shape, a, &r->a) != RV_OK ||
        rv_array_wrap(RV_F32, 2, shape, b, &r->bm) != RV_OK ||
        rv_array_wrap(RV_F32, 2, shape, c, &r->c) != RV_OK ||
        !trmm_set_n(r->m, r->b, n) ||
        rv_bindings_set_array(r->b, "A", r->a) != RV_OK ||
        rv_bindings_set_array(r->b, "Bm", r->bm) != RV_OK)
        trmm_fail();
}

static void ravel_run(void *ctx) {
    Ravel *r = ctx;
    if (rv_program_run_into(r->p, r->b, &r->c, 1) != RV_OK)
        trmm_fail();
}

static void ravel_free(Ravel *r) {
    rv_bindings_free(r->b);
    rv_array_free(r->a);
    rv_array_free(r->bm);
    rv_array_free(r->c);
    rv_program_free(r->p);
    rv_module_free(r->m);
}

typedef struct {
    int n;
    const float *a, *b;
    float *c;
} Base;

static void run_strmm(void *ctx) {
    Base *x = ctx;
    memcpy(x->c, x->b, sizeof(float) * (size_t)x->n * x->n);
    cblas_strmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, x->n, x->n, 1.0f,
                x->a, x->n, x->c, x->n);
}

static void run_padded(void *ctx) {
    Base *x = ctx;
    bl_openblas_sgemm(x->n, x->n, x->n, x->a, x->b, x->c);
}

/* A lower triangular: the upper triangle zero (what the padded GEMM reads;
 * ravel and strmm never read it). */
static float *lower_matrix(int n, unsigned seed) {
    float *a = bench_alloc((size_t)n * n);
    bench_fill(a, (size_t)n * n, seed);
    for (int i = 0; i < n; i++)
        memset(a + (size_t)i * n + i + 1, 0, sizeof(float) * (size_t)(n - i - 1));
    return a;
}

static int verify(const BenchArgs *args) {
    /* multiples of 64 (NB), with a partial last row tile (N % 6 = 4, 2, 2) */
    static const int sizes[] = {64, 128, 320};
    int ok = 1;
    for (int si = 0; si < (int)(sizeof sizes / sizeof sizes[0]); si++) {
        int n = sizes[si];
        size_t nn = (size_t)n * n;
        float *a = lower_matrix(n, 4), *b = bench_alloc(nn), *c = bench_alloc(nn);
        bench_fill(b, nn, 5);
        double *ref = calloc(nn, sizeof(double)), *absref = calloc(nn, sizeof(double));
        bench_ref(0, n, n, n, 0, a, b, NULL, 0, ref, absref);
        for (int ti = 0; ti < args->nthreads; ti++) {
            char what[64];
            bl_set_threads(args->threads[ti]);
            Ravel r;
            ravel_setup(&r, n, args->threads[ti], a, b, c);
            memset(c, 0xff, sizeof(float) * nn);
            ravel_run(&r);
            snprintf(what, sizeof what, "trmm N=%d ravel t%d", n, args->threads[ti]);
            ok &= bench_check(what, nn, c, ref, absref);
            ravel_free(&r);
            Base x = {n, a, b, c};
            BenchFn fns[2] = {run_strmm, run_padded};
            const char *names[2] = {"openblas_strmm", "openblas_padded"};
            for (int f = 0; f < 2; f++) {
                memset(c, 0xff, sizeof(float) * nn);
                fns[f](&x);
                snprintf(what, sizeof what, "trmm N=%d %s t%d", n, names[f], args->threads[ti]);
                ok &= bench_check(what, nn, c, ref, absref);
            }
        }
        free(a), free(b), free(c), free(ref), free(absref);
    }
    return ok;
}

int main(int argc, char **argv) {
    bl_init(argc, argv);
    BenchArgs args;
    bench_parse_args(argc, argv, DEFAULT_T, NULL, &args);
    if (args.verify)
        return verify(&args) ? 0 : 1;
    if (args.quick)
        args.nt = bench_parse_list("512", args.t);
    fprintf(stderr, "bench_trmm: %s\n", bl_describe());
    const char *names[2] = {"openblas_strmm", "openblas_padded"};
    BenchFn fns[2] = {run_strmm, run_padded};
    for (int i = 0; i < args.nt; i++) {
        int n = args.t[i];
        size_t nn = (size_t)n * n;
        float *a = lower_matrix(n, 4), *b = bench_alloc(nn);
        float *c_rv = bench_alloc(nn), *c_bl = bench_alloc(nn);
        bench_fill(b, nn, 5);
        double flops = (double)n * n * (n + 1);
        for (int ti = 0; ti < args.nthreads; ti++) {
            int threads = args.threads[ti];
            bl_set_threads(threads);
            Ravel r;
            ravel_setup(&r, n, threads, a, b, c_rv);
            Base x = {n, a, b, c_bl};
            BenchSide sides[3] = {{.fn = ravel_run, .ctx = &r}};
            for (int f = 0; f < 2; f++)
                if (bench_want(&args, names[f]))
                    sides[1 + f] = (BenchSide){.fn = fns[f], .ctx = &x};
            bench_sides(&args.timing, sides, 3);
            rv_program_counters pc;
            rv_program_stats(r.p, &pc);
            char cfg[128];
            snprintf(cfg, sizeof cfg, "{\"N\": %d, \"threads\": %d}", n, threads);
            for (int f = 0; f < 2; f++)
                if (sides[1 + f].stats.runs)
                    bench_print_line("trmm", cfg, names[f], flops, &sides[0].stats,
                                     &sides[1 + f].stats, pc.cc_seconds);
            ravel_free(&r);
        }
        free(a), free(b), free(c_rv), free(c_bl);
    }
    return 0;
}
