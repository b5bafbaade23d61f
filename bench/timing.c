/*
 * bench/timing.c — warm-up, alternating timed runs, medians, JSON lines.
 * See timing.h for the method and why it is this way.
 */
#define _GNU_SOURCE
#include "timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

BenchOpts bench_default_opts(void) {
    BenchOpts o = {.min_time_s = 0.2, .min_runs = 10, .max_runs = 10000, .warmup_runs = 3};
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

/* The clock of a call: BENCH_CLOCK=cpu times the process's CPU time
 * (CLOCK_PROCESS_CPUTIME_ID) instead of the wall: on this machine, shared
 * at a load above its core count, a one-thread call waits for a core as
 * long as it runs, and the wait, not the work, differs between two
 * processes timed minutes apart (a C side and a PyTorch side). Only for
 * one thread: with more, it sums the threads' time. */
static double run_clock(void) {
    static int cpu = -1;
    if (cpu < 0) {
        const char *e = getenv("BENCH_CLOCK");
        cpu = e && !strcmp(e, "cpu");
    }
    if (!cpu)
        return bench_now();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Times one call of the side, by its clock or run_clock(). */
static double time_call(const BenchSide *s) {
    double t0 = s->clock ? s->clock(s->ctx) : run_clock();
    s->fn(s->ctx);
    return (s->clock ? s->clock(s->ctx) : run_clock()) - t0;
}

/*
 * Warm-up calls, the first one untimed (cold caches, page faults, lazy
 * initialisation), the fastest of the others as the cost estimate; then the
 * run count that covers min_time_s.
 */
static int choose_runs(const BenchOpts *o, BenchSide *s) {
    double est = 0;
    int warm = o->warmup_runs < 2 ? 2 : o->warmup_runs;
    for (int i = 0; i < warm; i++) {
        double t = time_call(s);
        if (i == 1 || (i > 1 && t < est))
            est = t;
    }
    double want = est > 0 ? ceil(o->min_time_s / est) : o->max_runs;
    int runs = want > o->max_runs ? o->max_runs : (int)want;
    return runs < o->min_runs ? o->min_runs : runs;
}

void bench_sides(const BenchOpts *o, BenchSide *sides, int n) {
    int want[16] = {0}, done[16] = {0};
    double *t[16] = {0};
    if (n > 16) {
        fprintf(stderr, "bench: at most 16 sides\n");
        exit(1);
    }
    for (int i = 0; i < n; i++) {
        if (!sides[i].fn)
            continue;
        want[i] = choose_runs(o, &sides[i]);
        t[i] = malloc(sizeof(double) * (size_t)want[i]);
        if (!t[i]) {
            fprintf(stderr, "bench: out of memory\n");
            exit(1);
        }
    }
    /* Proportional interleaving: always call the side that is least done. */
    for (;;) {
        int next = -1;
        double least = 2;
        for (int i = 0; i < n; i++) {
            double frac = (done[i] + 0.5) / (want[i] ? want[i] : 1);
            if (done[i] < want[i] && frac < least)
                least = frac, next = i;
        }
        if (next < 0)
            break;
        t[next][done[next]++] = time_call(&sides[next]);
    }
    for (int i = 0; i < n; i++) {
        sides[i].stats = (BenchStats){0};
        if (want[i])
            fill_stats(t[i], want[i], &sides[i].stats);
        free(t[i]);
    }
}

/* Appends a number with enough digits, or null. */
static void put_num(const char *key, double v, int present) {
    if (present && isfinite(v))
        printf(", \"%s\": %.6g", key, v);
    else
        printf(", \"%s\": null", key);
}

void bench_print_line(const char *bench, const char *config_json, const char *baseline,
                      double flops, const BenchStats *rv, const BenchStats *bs,
                      double rv_compile_s) {
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
    put_num("ravel_compile_s", rv_compile_s, has_rv);
    printf("}\n");
    fflush(stdout);
}
