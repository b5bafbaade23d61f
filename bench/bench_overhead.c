/*
 * bench/bench_overhead.c — the host overhead of one rv_program_run_into
 * call on tiny programs, whose kernels take a fraction of a microsecond:
 * what a caller serving a small model pays per call beyond the kernels.
 *
 *     bench_overhead [--calls N] [--reps R] [--only NAME] [FILE.rv]...
 *
 * Per program: R repetitions of N calls each (10000 x 31 by default),
 * timed as a batch; the median over repetitions of (batch time / N) is
 * ns_per_call, and kernel_ns the kernels' share (rv_program_stats'
 * kernel_seconds over the same calls, clock reads included). The programs
 * are interleaved repetition by repetition, so the noise of a shared
 * machine hits them alike. One JSON object per line. --only NAME runs
 * one program (for a profiler). Each FILE.rv is timed too, its size M (if
 * any) bound to 1 and everything else drawn (bench/programs/: the
 * benchmarks' schedules at one row).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ravel.h"
#include "timing.h"

typedef struct Prog {
    const char *name;
    const char *src;
    rv_module *m;
    rv_bindings *b;
    rv_program *p;
    rv_array *out;
    double *batch_ns;   /* per repetition: ns per call */
    double *kernel_ns;  /* per repetition: kernel ns per call */
} Prog;

#define MAX_PROGS 16
static Prog progs[MAX_PROGS] = {
    {"dense_1x64",
     "size M in 1..64\n"
     "input X : f32[M, 64]\n"
     "input W : f32[64, 64]\n"
     "Y[i, j] = sum(k < 64) X[i, k] * W[j, k]\n",
     0, 0, 0, 0, 0, 0},
    {"eltwise_16",
     "input X : f32[16]\n"
     "Y[i] = X[i] * 2.0 + 1.0\n",
     0, 0, 0, 0, 0, 0},
    {"ragged_uf_4",
     "size N in 1..8\n"
     "ufun len[b < N] in 0..8\n"
     "input X : f32[b < N, l < len[b]]\n"
     "Y[b < N, l < len[b]] = X[b, l] + 1.0\n",
     0, 0, 0, 0, 0, 0},
};
static int nprogs = 3; /* the built-in ones above, then the files */

static void die(const char *what, const char *name) {
    fprintf(stderr, "bench_overhead: %s: %s: %s\n", name, what, rv_last_error());
    exit(1);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void prepare(Prog *g) {
    rv_compile_options opt = {0};
    opt.serial = 1;
    if ((g->src ? rv_module_parse(g->name, g->src, &g->m) : rv_module_load(g->name, &g->m)) !=
        RV_OK)
        die("parse", g->name);
    g->b = rv_bindings_new(g->m);
    rv_bindings_set_size(g->b, "M", 1); /* where there is one */
    rv_bindings_set_size(g->b, "N", 4);
    if (rv_bindings_randomize(g->b, 1) != RV_OK)
        die("randomize", g->name);
    if (rv_program_compile(g->m, &opt, &g->p) != RV_OK)
        die("compile", g->name);
    if (rv_program_run(g->p, g->b) != RV_OK)
        die("run", g->name);
    const rv_array *y = rv_bindings_get_array(g->b, "Y");
    int64_t shape[8];
    for (int d = 0; d < rv_array_ndim(y); d++)
        shape[d] = rv_array_shape(y)[d];
    g->out = rv_array_new(rv_array_dtype(y), rv_array_ndim(y), shape);
}

int main(int argc, char **argv) {
    int calls = 10000, reps = 31;
    const char *only = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (strncmp(argv[i], "--", 2) != 0 && nprogs < MAX_PROGS) {
            progs[nprogs++].name = argv[i--];
            continue;
        }
        if (i + 1 >= argc)
            break;
        if (!strcmp(argv[i], "--calls"))
            calls = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--only"))
            only = argv[i + 1];
    }
    int n = 0;
    for (int i = 0; i < nprogs; i++)
        if (!only || !strcmp(progs[i].name, only))
            progs[n++] = progs[i];
    for (int i = 0; i < n; i++) {
        prepare(&progs[i]);
        progs[i].batch_ns = calloc((size_t)reps, sizeof(double));
        progs[i].kernel_ns = calloc((size_t)reps, sizeof(double));
    }
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        for (int i = 0; i < n; i++) {
            Prog *g = &progs[i];
            rv_program_counters c0, c1;
            rv_program_stats(g->p, &c0);
            double t0 = bench_now();
            for (int k = 0; k < calls; k++)
                if (rv_program_run_into(g->p, g->b, &g->out, 1) != RV_OK)
                    die("run_into", g->name);
            double t1 = bench_now();
            rv_program_stats(g->p, &c1);
            if (r >= 0) {
                g->batch_ns[r] = (t1 - t0) * 1e9 / calls;
                g->kernel_ns[r] = (c1.kernel_seconds - c0.kernel_seconds) * 1e9 / calls;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        Prog *g = &progs[i];
        printf("{\"bench\": \"overhead\", \"program\": \"%s\", \"ns_per_call\": %.1f, "
               "\"kernel_ns\": %.1f, \"calls\": %d, \"reps\": %d}\n",
               g->name, median(g->batch_ns, reps), median(g->kernel_ns, reps), calls, reps);
        rv_array_free(g->out);
        rv_program_free(g->p);
        rv_bindings_free(g->b);
        rv_module_free(g->m);
        free(g->batch_ns);
        free(g->kernel_ns);
    }
    return 0;
}
