/*
 * bench/bench_bmm.c — the two batched matmuls of attention, 192 = 16
 * sequences × 12 heads, head size 64, sequence length T:
 *
 *   NT  scores[192,T,T]  = Q[192,T,64] · K[192,T,64]ᵀ
 *   NN  out[192,T,64]    = P[192,T,T]  · V[192,T,64]
 *
 * Baselines, one JSON line each per layout, T and thread count:
 *   openblas_loop  cblas_sgemm called once per batch element (what a
 *                  framework without batched GEMM does)
 *   onednn         one 3-D oneDNN matmul primitive over the whole batch
 *
 * --layouts NT,NN picks the layouts (default both).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "common.h"

#define DEFAULT_T "1,2,3,5,8,13,16,24,32,47,64,96,128"
#define BATCH 192
#define HEAD 64

enum { BASE_OPENBLAS_LOOP, BASE_ONEDNN, BASE_COUNT };
static const char *const base_names[BASE_COUNT] = {"openblas_loop", "onednn"};

typedef struct {
    int m, n, k, b_trans;
    const float *a, *b;
    float *c;
    BlDnnl *dnnl; /* NULL for the OpenBLAS loop */
} BmmCall;

static void run_bmm(void *ctx) {
    BmmCall *c = ctx;
    if (c->dnnl)
        bl_dnnl_run(c->dnnl);
    else
        bl_openblas_batch(BATCH, c->m, c->n, c->k, c->b_trans, c->a, c->b, c->c);
}

/* The GEMM dimensions of one batch element for a layout and T. */
static void dims_for(int nt, int t, int *m, int *n, int *k) {
    *m = t;
    *n = nt ? t : HEAD;
    *k = nt ? HEAD : t;
}

static BmmCall setup(int base, int nt, int t, const float *a, const float *b, float *c) {
    BmmCall call = {0, 0, 0, nt, a, b, c, NULL};
    dims_for(nt, t, &call.m, &call.n, &call.k);
    if (base == BASE_ONEDNN) {
        BlDnnlSpec s = {.batch = BATCH, .m = call.m, .n = call.n, .k = call.k, .b_trans = nt};
        call.dnnl = bl_dnnl_new(&s, a, b, NULL, c);
    }
    return call;
}

static RavelKernel *ravel_for(int nt, int t, int threads) {
    RavelKernelShape s = {nt ? RK_BMM_NT : RK_BMM_NN, BATCH, 0, 0, 0, threads};
    dims_for(nt, t, &s.m, &s.n, &s.k);
    return ravel_kernel_for(&s);
}

static int verify(const BenchArgs *args) {
    static const int ts[] = {1, 5, 47};
    int ok = 1;
    for (int ti = 0; ti < args->nthreads; ti++) {
        int threads = args->threads[ti];
        bl_set_threads(threads);
        for (int nt = 1; nt >= 0; nt--)
            for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
                int m, n, k;
                dims_for(nt, ts[i], &m, &n, &k);
                size_t na = (size_t)BATCH * m * k, nb = (size_t)BATCH * n * k;
                size_t nc = (size_t)BATCH * m * n;
                float *a = bench_alloc(na), *b = bench_alloc(nb), *c = bench_alloc(nc);
                double *ref = malloc(sizeof(double) * nc), *absref = malloc(sizeof(double) * nc);
                bench_fill(a, na, 4), bench_fill(b, nb, 5);
                bench_ref(BATCH, m, n, k, nt, a, b, NULL, 0, ref, absref);
                char what[128];
                for (int base = 0; base < BASE_COUNT; base++) {
                    if (!bench_want(args, base_names[base]))
                        continue;
                    BmmCall call = setup(base, nt, ts[i], a, b, c);
                    memset(c, 0xff, sizeof(float) * nc);
                    run_bmm(&call);
                    snprintf(what, sizeof what, "bmm %s %s T=%d t%d", base_names[base],
                             nt ? "NT" : "NN", ts[i], threads);
                    ok &= bench_check(what, nc, c, ref, absref);
                    bl_dnnl_free(call.dnnl);
                }
                RavelKernel *rk = ravel_for(nt, ts[i], threads);
                if (rk) {
                    memset(c, 0xff, sizeof(float) * nc);
                    RavelCall rc = {rk, {a, b, NULL, c, BATCH, m, n, k}};
                    bench_ravel_call(&rc);
                    snprintf(what, sizeof what, "bmm ravel(%s) %s T=%d t%d", rk->name,
                             nt ? "NT" : "NN", ts[i], threads);
                    ok &= bench_check(what, nc, c, ref, absref);
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
    bench_parse_args(argc, argv, DEFAULT_T, "--layouts", &args);
    if (args.verify)
        return verify(&args) ? 0 : 1;
    if (args.quick)
        args.nt = bench_parse_list("1,16,128", args.t);
    const char *layouts = args.extra ? args.extra : "NT,NN";
    int tmax = 0;
    for (int i = 0; i < args.nt; i++)
        tmax = args.t[i] > tmax ? args.t[i] : tmax;
    /* The largest operand of either layout is [192, tmax, max(tmax, 64)]. */
    size_t big = (size_t)BATCH * tmax * (tmax > HEAD ? tmax : HEAD);
    float *a = bench_alloc(big), *b = bench_alloc(big), *c_rv = bench_alloc(big);
    float *c_bl = bench_alloc(big);
    bench_fill(a, big, 4), bench_fill(b, big, 5);
    fprintf(stderr, "bench_bmm: %s\n", bl_describe());

    for (int ti = 0; ti < args.nthreads; ti++) {
        int threads = args.threads[ti];
        bl_set_threads(threads);
        for (int nt = 1; nt >= 0; nt--) {
            if (!strstr(layouts, nt ? "NT" : "NN"))
                continue;
            for (int i = 0; i < args.nt; i++) {
                int t = args.t[i], m, n, k;
                dims_for(nt, t, &m, &n, &k);
                char cfg[256];
                snprintf(cfg, sizeof cfg,
                         "{\"T\": %d, \"batch\": %d, \"M\": %d, \"N\": %d, \"K\": %d, "
                         "\"layout\": \"%s\", \"threads\": %d}",
                         t, BATCH, m, n, k, nt ? "NT" : "NN", threads);
                RavelKernel *rk = ravel_for(nt, t, threads);
                RavelCall rc = {rk, {a, b, NULL, c_rv, BATCH, m, n, k}};
                BmmCall calls[BASE_COUNT];
                BenchFn fns[BASE_COUNT];
                void *ctxs[BASE_COUNT];
                for (int base = 0; base < BASE_COUNT; base++) {
                    int on = bench_want(&args, base_names[base]);
                    calls[base] = on ? setup(base, nt, t, a, b, c_bl) : (BmmCall){0};
                    fns[base] = run_bmm;
                    ctxs[base] = on ? &calls[base] : NULL;
                }
                bench_compare(&args, "bmm", cfg, 2.0 * BATCH * m * n * k, &rc, BASE_COUNT,
                              base_names, fns, ctxs);
                for (int base = 0; base < BASE_COUNT; base++)
                    bl_dnnl_free(calls[base].dnnl);
                ravel_kernel_free(rk);
            }
        }
    }
    free(a), free(b), free(c_rv), free(c_bl);
    return 0;
}
