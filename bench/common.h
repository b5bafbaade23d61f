/*
 * bench/common.h — what the three drivers share: command-line options,
 * buffers, the naive reference used by --verify, the ravel closure, and
 * bench_compare(), which times one configuration and prints its lines.
 *
 * Options every driver takes:
 *   --threads 1,2        thread counts to run (default 1,2)
 *   --T 1,2,...          sequence lengths (dense, bmm) or sizes (sgemm)
 *   --baselines a,b      only these baselines (default: all of the driver's)
 *   --min-time S         seconds per side per line (default 0.2)
 *   --max-runs N         cap on timed runs per side (default 10000)
 *   --quick              a small subset, for smoke tests
 *   --verify             check every baseline (and ravel's kernel, if any)
 *                        against a naive loop at small sizes; no timing
 */
#ifndef RAVEL_BENCH_COMMON_H
#define RAVEL_BENCH_COMMON_H

#include <stddef.h>

#include "ravel_kernels.h"
#include "timing.h"

#define BENCH_MAX_LIST 32

typedef struct {
    int threads[BENCH_MAX_LIST], nthreads;
    int t[BENCH_MAX_LIST], nt;
    const char *baselines; /* comma list or NULL for all */
    const char *extra;     /* the driver's own option value (--shapes, --layouts...) */
    int quick, verify;
    BenchOpts timing;
} BenchArgs;

/*
 * Parses argv. `default_t` is the driver's default --T list; `extra_name`
 * (e.g. "--shapes") is a driver-specific option stored in args->extra.
 */
void bench_parse_args(int argc, char **argv, const char *default_t, const char *extra_name,
                      BenchArgs *args);

/* Parses "1,2,3" into out (at most BENCH_MAX_LIST); returns the count. */
int bench_parse_list(const char *s, int *out);

/* Whether `name` is selected by the --baselines filter. */
int bench_want(const BenchArgs *args, const char *name);

/* 64-byte aligned, zeroed floats; exits on failure. */
float *bench_alloc(size_t n);

/* Deterministic values in [-1, 1). */
void bench_fill(float *p, size_t n, unsigned seed);

/*
 * Naive reference c[i][m,n] = a[i][m,k]·op(b[i]) (+bias, gelu) in double,
 * batch 0 meaning one 2-D product. Then bench_check() compares `got` with it,
 * allowing 1e-5 of Σ|a||b| per element; prints one line; returns 1 if ok.
 */
void bench_ref(int batch, int m, int n, int k, int b_trans, const float *a, const float *b,
               const float *bias, int gelu, double *ref, double *absref);
int bench_check(const char *what, size_t count, const float *got, const double *ref,
                const double *absref);

/* Closure for a ravel kernel: kernel->run(kernel->state, &args). */
typedef struct {
    RavelKernel *kernel; /* NULL while ravel has no kernel for the shape */
    RavelKernelArgs args;
} RavelCall;
void bench_ravel_call(void *ctx);

/*
 * Times ravel (skipped when rc->kernel is NULL) and the baselines whose
 * ctx[i] is not NULL, all interleaved in one window (bench_sides), then
 * prints one JSON line per timed baseline, each with the same ravel numbers.
 * fn[i](ctx[i]) is one call of baseline names[i].
 */
void bench_compare(const BenchArgs *args, const char *bench, const char *config_json, double flops,
                   RavelCall *rc, int nbase, const char *const *names, BenchFn const *fn,
                   void *const *ctx);

#endif
