/*
 * bench/bench_sgemm.c — square SGEMM C[n,n] = A[n,n] · B[n,n], the classic
 * yardstick: at these sizes a good kernel runs near the FMA peak, so the
 * baseline GFLOP/s here, divided by bench/peak's number, says how much of the
 * machine the vendors reach.
 *
 * Baselines: openblas (cblas_sgemm NN), onednn (2-D matmul primitive).
 * --T (or --sizes) picks the sizes; default 512,1024,2048.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "common.h"

#define DEFAULT_SIZES "512,1024,2048"

enum { BASE_OPENBLAS, BASE_ONEDNN, BASE_COUNT };
static const char *const base_names[BASE_COUNT] = {"openblas", "onednn"};

typedef struct {
    int n;
    const float *a, *b;
    float *c;
    BlDnnl *dnnl; /* NULL for OpenBLAS */
} SgemmCall;

static void run_sgemm(void *ctx) {
    SgemmCall *c = ctx;
    if (c->dnnl)
        bl_dnnl_run(c->dnnl);
    else
        bl_openblas_sgemm(c->n, c->n, c->n, c->a, c->b, c->c);
}

static SgemmCall setup(int base, int n, const float *a, const float *b, float *c) {
    SgemmCall call = {n, a, b, c, NULL};
    if (base == BASE_ONEDNN) {
        BlDnnlSpec s = {.m = n, .n = n, .k = n};
        call.dnnl = bl_dnnl_new(&s, a, b, NULL, c);
    }
    return call;
}

static RavelKernel *ravel_for(int n, int threads) {
    RavelKernelShape s = {RK_SGEMM, 0, n, n, n, threads};
    return ravel_kernel_for(&s);
}

static int verify(const BenchArgs *args) {
    static const int sizes[] = {64, 100, 257};
    int ok = 1;
    for (int ti = 0; ti < args->nthreads; ti++) {
        int threads = args->threads[ti];
        bl_set_threads(threads);
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            int n = sizes[i];
            size_t nn = (size_t)n * n;
            float *a = bench_alloc(nn), *b = bench_alloc(nn), *c = bench_alloc(nn);
            double *ref = malloc(sizeof(double) * nn), *absref = malloc(sizeof(double) * nn);
            bench_fill(a, nn, 6), bench_fill(b, nn, 7);
            bench_ref(0, n, n, n, 0, a, b, NULL, 0, ref, absref);
            char what[128];
            for (int base = 0; base < BASE_COUNT; base++) {
                if (!bench_want(args, base_names[base]))
                    continue;
                SgemmCall call = setup(base, n, a, b, c);
                memset(c, 0xff, sizeof(float) * nn);
                run_sgemm(&call);
                snprintf(what, sizeof what, "sgemm %s n=%d t%d", base_names[base], n, threads);
                ok &= bench_check(what, nn, c, ref, absref);
                bl_dnnl_free(call.dnnl);
            }
            RavelKernel *rk = ravel_for(n, threads);
            if (rk) {
                memset(c, 0xff, sizeof(float) * nn);
                RavelCall rc = {rk, {a, b, NULL, c, 0, n, n, n}};
                bench_ravel_call(&rc);
                snprintf(what, sizeof what, "sgemm ravel(%s) n=%d t%d", rk->name, n, threads);
                ok &= bench_check(what, nn, c, ref, absref);
                ravel_kernel_free(rk);
            }
            free(a), free(b), free(c), free(ref), free(absref);
        }
    }
    return ok;
}

int main(int argc, char **argv) {
    bl_init(argc, argv);
    BenchArgs args;
    bench_parse_args(argc, argv, DEFAULT_SIZES, "--sizes", &args);
    if (args.extra) /* --sizes is a synonym of --T here */
        args.nt = bench_parse_list(args.extra, args.t);
    if (args.verify)
        return verify(&args) ? 0 : 1;
    if (args.quick)
        args.nt = bench_parse_list("512,1024", args.t);
    fprintf(stderr, "bench_sgemm: %s\n", bl_describe());

    for (int ti = 0; ti < args.nthreads; ti++) {
        int threads = args.threads[ti];
        bl_set_threads(threads);
        for (int i = 0; i < args.nt; i++) {
            int n = args.t[i];
            size_t nn = (size_t)n * n;
            float *a = bench_alloc(nn), *b = bench_alloc(nn);
            float *c_rv = bench_alloc(nn), *c_bl = bench_alloc(nn);
            bench_fill(a, nn, 6), bench_fill(b, nn, 7);
            char cfg[128];
            snprintf(cfg, sizeof cfg, "{\"M\": %d, \"N\": %d, \"K\": %d, \"threads\": %d}", n, n, n,
                     threads);
            RavelKernel *rk = ravel_for(n, threads);
            RavelCall rc = {rk, {a, b, NULL, c_rv, 0, n, n, n}};
            SgemmCall calls[BASE_COUNT];
            BenchFn fns[BASE_COUNT];
            void *ctxs[BASE_COUNT];
            for (int base = 0; base < BASE_COUNT; base++) {
                int on = bench_want(&args, base_names[base]);
                calls[base] = on ? setup(base, n, a, b, c_bl) : (SgemmCall){0};
                fns[base] = run_sgemm;
                ctxs[base] = on ? &calls[base] : NULL;
            }
            bench_compare(&args, "sgemm", cfg, 2.0 * n * n * n, &rc, BASE_COUNT, base_names, fns,
                          ctxs);
            for (int base = 0; base < BASE_COUNT; base++)
                bl_dnnl_free(calls[base].dnnl);
            ravel_kernel_free(rk);
            free(a), free(b), free(c_rv), free(c_bl);
        }
    }
    return 0;
}
