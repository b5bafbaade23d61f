/*
 * bench/timing.c — warm-up, alternating timed runs, medians, JSON lines.
 * See timing.h for the method and why it is this way.
 */
#define _GNU_SOURCE
#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

BenchOpts bench_default_opts(void) {
    BenchOpts o = {.min_time_s = 0.2, .min_runs = 10, .max_runs = 2000, .warmup_runs = 3};
    return o;
}

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill_stats(double *t, int n, BenchStats *s) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    s->runs = n;
    s->min_ms = 1e3 * t[0];
    s->max_ms = 1e3 * t[n - 1];
    s->median_ms = 1e3 * (n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]));
}

/* Times one call of fn. */
static double time_call(BenchFn fn, void *ctx) {
    double t0 = bench_now();
    fn(ctx);
    return bench_now() - t0;
}

/*
 * Run count: warm up each side, then time a few calls to estimate the cost of
 * the slower side, and choose runs so that side covers min_time_s.
 */
static int choose_runs(const BenchOpts *o, BenchFn ravel, void *rctx, BenchFn base, void *bctx) {
    for (int i = 0; i < o->warmup_runs; i++) {
        if (ravel)
            ravel(rctx);
        base(bctx);
    }
    double slow = 0;
    for (int i = 0; i < 3; i++) {
        double tb = time_call(base, bctx);
        double tr = ravel ? time_call(ravel, rctx) : 0;
        double t = tb > tr ? tb : tr;
        if (i == 0 || t < slow)
            slow = t; /* the fastest of the estimates: noise only adds time */
    }
    double want = slow > 0 ? ceil(o->min_time_s / slow) : o->max_runs;
    int runs = want > o->max_runs ? o->max_runs : (int)want;
    return runs < o->min_runs ? o->min_runs : runs;
}

void bench_pair(const BenchOpts *o, BenchFn ravel, void *ravel_ctx, BenchFn base, void *base_ctx,
                BenchStats *rv, BenchStats *bs) {
    int runs = choose_runs(o, ravel, ravel_ctx, base, base_ctx);
    double *tr = malloc(sizeof(double) * (size_t)runs);
    double *tb = malloc(sizeof(double) * (size_t)runs);
    if (!tr || !tb) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < runs; i++) {
        /* Alternate which side goes first so neither always follows the other. */
        if (ravel && (i & 1))
            tr[i] = time_call(ravel, ravel_ctx);
        tb[i] = time_call(base, base_ctx);
        if (ravel && !(i & 1))
            tr[i] = time_call(ravel, ravel_ctx);
    }
    fill_stats(tb, runs, bs);
    if (ravel)
        fill_stats(tr, runs, rv);
    else
        *rv = (BenchStats){0};
    free(tr);
    free(tb);
}

/* Appends a number with enough digits, or null. */
static void put_num(const char *key, double v, int present) {
    if (present && isfinite(v))
        printf(", \"%s\": %.6g", key, v);
    else
        printf(", \"%s\": null", key);
}

void bench_print_line(const char *bench, const char *config_json, const char *baseline,
                      double flops, const BenchStats *rv, const BenchStats *bs) {
    int has_rv = rv && rv->runs > 0;
    printf("{\"bench\": \"%s\", \"config\": %s", bench, config_json);
    put_num("ravel_ms", has_rv ? rv->median_ms : 0, has_rv);
    printf(", \"baseline\": \"%s\"", baseline);
    put_num("baseline_ms", bs->median_ms, 1);
    put_num("ratio", has_rv ? bs->median_ms / rv->median_ms : 0, has_rv);
    put_num("gflops", has_rv ? flops / (rv->median_ms * 1e6) : 0, has_rv);
    put_num("baseline_gflops", flops / (bs->median_ms * 1e6), 1);
    printf(", \"runs\": %d", bs->runs);
    put_num("ravel_min_ms", has_rv ? rv->min_ms : 0, has_rv);
    put_num("ravel_max_ms", has_rv ? rv->max_ms : 0, has_rv);
    put_num("baseline_min_ms", bs->min_ms, 1);
    put_num("baseline_max_ms", bs->max_ms, 1);
    printf("}\n");
    fflush(stdout);
}
