/*
 * bench/bench_vmath.c — the vector math helpers of generated code
 * (src/codegen/c_vmath.c) one at a time, in nanoseconds per vector.
 *
 *     bench_vmath [--fn gelu,erf] [--input normal,ff1,wide] [--lanes 16]
 *                 [--min-time S] [--runs N]
 *
 * For each function f, a program Y[i] = f(X[i]) over 65536 floats (256 KB
 * in, 256 KB out: L2-resident), its loop split by 16 (--lanes) and
 * vectorized, so that each vector makes one call of rv_f_f32x<lanes>; copy is
 * Y[i] = X[i], the loads, stores and call overhead the others share.
 * Inputs, drawn once with a fixed seed:
 *   normal  N(0, 1)
 *   ff1     N(0, 0.58): the encoder's FF1 pre-activations (u / sqrt(H)
 *           weights on layer-normed rows, bench/encoder/ENCODER.md)
 *   wide    uniform in [-10, 10]: most lanes in erfc's tail
 * The helpers branch on what a vector's lanes need (gelu: is any lane's
 * |x / sqrt 2| above 0.5, any above 2), so the input decides the cost.
 * One line per (function, input): the median and min of a call (timing.h,
 * BENCH_CLOCK=cpu for process CPU time) over the vectors of the array, and
 * the median less copy's (the helper's own time).
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ravel.h"
#include "timing.h"

enum { N = 65536 };
static int lanes = 16;

/* One program under test. */
typedef struct Prog {
    rv_module *m;
    rv_bindings *b;
    rv_program *p;
} Prog;

static void run_prog(void *ctx) {
    Prog *g = ctx;
    if (rv_program_run(g->p, g->b) != RV_OK) {
        fprintf(stderr, "bench_vmath: %s\n", rv_last_error());
        exit(1);
    }
}

/* splitmix64, then uniform in [0, 1) with 53 bits */
static uint64_t rng_state = 12345;
static double uniform01(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1p-53;
}

static double normal01(void) {
    double u = uniform01(), v = uniform01();
    return sqrt(-2 * log(1 - u)) * cos(6.283185307179586 * v);
}

static void fill(float *x, const char *input) {
    rng_state = 12345;
    for (int i = 0; i < N; i++) {
        if (!strcmp(input, "normal"))
            x[i] = (float)normal01();
        else if (!strcmp(input, "ff1"))
            x[i] = (float)(0.58 * normal01());
        else
            x[i] = (float)(20 * uniform01() - 10);
    }
}

/* Compiles Y[i] = fn(X[i]) (copy: X[i]) vectorized by 16, X bound to x. */
static int prepare(Prog *g, const char *fn, rv_array *x) {
    char text[512];
    snprintf(text, sizeof text,
             "input X : f32[%d]\n"
             "Y[i] = %s%sX[i]%s\n"
             "schedule Y {\n"
             "    io, iv = split(i, %d)\n"
             "    vectorize(iv)\n"
             "}\n",
             N, strcmp(fn, "copy") ? fn : "", strcmp(fn, "copy") ? "(" : "",
             strcmp(fn, "copy") ? ")" : "", lanes);
    if (rv_module_parse(fn, text, &g->m) != RV_OK)
        return 1;
    g->b = rv_bindings_new(g->m);
    if (rv_bindings_set_array(g->b, "X", x) != RV_OK)
        return 1;
    rv_compile_options opt = {.serial = 1};
    return rv_program_compile(g->m, &opt, &g->p) != RV_OK;
}

static int usage(void) {
    fprintf(stderr, "usage: bench_vmath [--fn gelu,erf] [--input normal,ff1,wide] [--lanes W] "
                    "[--min-time S] [--runs N]\n");
    return 2;
}

int main(int argc, char **argv) {
    char fns[128] = "gelu,erf,copy", inputs[128] = "normal,ff1,wide";
    BenchOpts o = bench_default_opts();
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            return usage();
        if (!strcmp(argv[i], "--fn"))
            snprintf(fns, sizeof fns, "%s,copy", argv[++i]);
        else if (!strcmp(argv[i], "--input"))
            snprintf(inputs, sizeof inputs, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--lanes"))
            lanes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-time"))
            o.min_time_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--runs"))
            o.min_runs = atoi(argv[++i]);
        else
            return usage();
    }
    if (lanes < 2 || lanes > 64 || N % lanes)
        return usage();
    int64_t shape[1] = {N};
    rv_array *x = rv_array_new(RV_F32, 1, shape);
    for (char *in = strtok(inputs, ","); in; in = strtok(NULL, ",")) {
        if (strcmp(in, "normal") && strcmp(in, "ff1") && strcmp(in, "wide"))
            return usage();
        fill(rv_array_data(x), in);
        /* the functions of this input, copy last (its time is subtracted) */
        enum { MAXF = 8 };
        Prog progs[MAXF] = {{0}};
        BenchSide sides[MAXF] = {{0}};
        const char *names[MAXF];
        char list[128];
        snprintf(list, sizeof list, "%s", fns);
        int nf = 0, copy = -1;
        for (char *save, *f = strtok_r(list, ",", &save); f && nf < MAXF;
             f = strtok_r(NULL, ",", &save)) {
            if (strcmp(f, "copy") == 0 && copy >= 0)
                continue;
            if (prepare(&progs[nf], f, x) != 0) {
                fprintf(stderr, "bench_vmath: %s: %s\n", f, rv_last_error());
                return 1;
            }
            copy = strcmp(f, "copy") ? copy : nf;
            names[nf] = f;
            sides[nf] = (BenchSide){.fn = run_prog, .ctx = &progs[nf]};
            nf++;
        }
        bench_sides(&o, sides, nf);
        double per = 1e6 / (N / lanes); /* ms per call -> ns per vector */
        for (int f = 0; f < nf; f++) {
            const BenchStats *s = &sides[f].stats;
            printf("bench_vmath fn=%-5s input=%-6s lanes=%d ns_per_vector=%.3f min=%.3f own=%.3f "
                   "runs=%d\n",
                   names[f], in, lanes, s->median_ms * per, s->min_ms * per,
                   (s->median_ms - sides[copy].stats.median_ms) * per, s->runs);
        }
        fflush(stdout);
        for (int f = 0; f < nf; f++) {
            rv_program_free(progs[f].p);
            rv_bindings_free(progs[f].b);
            rv_module_free(progs[f].m);
        }
    }
    rv_array_free(x);
    return 0;
}
