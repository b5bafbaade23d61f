/*
 * bench/common.c — option parsing, buffers, the naive reference, and the
 * ravel closure shared by the drivers (see common.h).
 */
#define _GNU_SOURCE
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_parse_list(const char *s, int *out) {
    int n = 0;
    while (*s && n < BENCH_MAX_LIST) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0) {
            fprintf(stderr, "bench: bad list element in '%s'\n", s);
            exit(2);
        }
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static void usage(const char *prog, const char *extra_name) {
    fprintf(stderr,
            "usage: %s [--threads 1,2] [--T list] [--baselines a,b] [--min-time S]\n"
            "          [--max-runs N] [--quick] [--verify]%s%s%s\n",
            prog, extra_name ? " [" : "", extra_name ? extra_name : "",
            extra_name ? " VALUE]" : "");
    exit(2);
}

void bench_parse_args(int argc, char **argv, const char *default_t, const char *extra_name,
                      BenchArgs *args) {
    memset(args, 0, sizeof *args);
    args->timing = bench_default_opts();
    args->nthreads = bench_parse_list("1,2", args->threads);
    args->nt = bench_parse_list(default_t, args->t);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            args->quick = 1;
        } else if (!strcmp(a, "--verify")) {
            args->verify = 1;
        } else if (!v) {
            usage(argv[0], extra_name);
        } else if (!strcmp(a, "--threads")) {
            args->nthreads = bench_parse_list(v, args->threads), i++;
        } else if (!strcmp(a, "--T")) {
            args->nt = bench_parse_list(v, args->t), i++;
        } else if (!strcmp(a, "--baselines")) {
            args->baselines = v, i++;
        } else if (!strcmp(a, "--min-time")) {
            args->timing.min_time_s = atof(v), i++;
        } else if (!strcmp(a, "--max-runs")) {
            args->timing.max_runs = atoi(v), i++;
        } else if (extra_name && !strcmp(a, extra_name)) {
            args->extra = v, i++;
        } else {
            usage(argv[0], extra_name);
        }
    }
}

int bench_want(const BenchArgs *args, const char *name) {
    if (!args->baselines)
        return 1;
    size_t len = strlen(name);
    for (const char *p = args->baselines; (p = strstr(p, name)); p += len) {
        int starts = p == args->baselines || p[-1] == ',';
        int ends = p[len] == '\0' || p[len] == ',';
        if (starts && ends)
            return 1;
    }
    return 0;
}

float *bench_alloc(size_t n) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes);
    return p;
}

void bench_fill(float *p, size_t n, unsigned seed) {
    unsigned x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u; /* LCG: cheap and the same everywhere */
        p[i] = (float)((x >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
    }
}

void bench_ref(int batch, int m, int n, int k, int b_trans, const float *a, const float *b,
               const float *bias, int gelu, double *ref, double *absref) {
    int nb = batch ? batch : 1;
    for (int t = 0; t < nb; t++) {
        const float *A = a + (size_t)t * m * k, *B = b + (size_t)t * n * k;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0, sa = 0;
                for (int l = 0; l < k; l++) {
                    double p = (double)A[(size_t)i * k + l] *
                               (b_trans ? B[(size_t)j * k + l] : B[(size_t)l * n + j]);
                    s += p;
                    sa += fabs(p);
                }
                if (bias) {
                    s += bias[j];
                    sa += fabs(bias[j]);
                }
                if (gelu)
                    s = 0.5 * s * (1.0 + erf(s * 0.70710678118654752));
                size_t o = ((size_t)t * m + i) * n + j;
                ref[o] = s;
                absref[o] = sa;
            }
    }
}

int bench_check(const char *what, size_t count, const float *got, const double *ref,
                const double *absref) {
    double worst = 0; /* error / allowed, > 1 fails */
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        double allowed = 1e-5 * absref[i] + 1e-6;
        double r = fabs((double)got[i] - ref[i]) / allowed;
        if (!(r <= worst)) { /* also catches NaN */
            worst = isnan(r) ? INFINITY : r;
            at = i;
        }
    }
    int ok = worst <= 1.0;
    printf("verify %-48s %s (worst error %.3g of allowed, at %zu)\n", what, ok ? "ok" : "FAIL",
           worst, at);
    return ok;
}

void bench_ravel_call(void *ctx) {
    RavelCall *c = ctx;
    c->kernel->run(c->kernel->state, &c->args);
}

void bench_compare(const BenchArgs *args, const char *bench, const char *config_json, double flops,
                   RavelCall *rc, int nbase, const char *const *names, BenchFn const *fn,
                   void *const *ctx) {
    BenchSide sides[16];
    memset(sides, 0, sizeof sides);
    int n = 1;
    sides[0].fn = rc->kernel ? bench_ravel_call : NULL;
    sides[0].ctx = rc;
    for (int i = 0; i < nbase && n < 16; i++, n++) {
        sides[n].fn = ctx[i] ? fn[i] : NULL;
        sides[n].ctx = ctx[i];
    }
    bench_sides(&args->timing, sides, n);
    for (int i = 0; i < nbase; i++)
        if (sides[1 + i].stats.runs)
            bench_print_line(bench, config_json, names[i], flops, &sides[0].stats,
                             &sides[1 + i].stats, rc->kernel ? rc->kernel->compile_seconds : 0);
}
