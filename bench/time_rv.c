/*
 * bench/time_rv.c — times .rv programs through the public API.
 *
 *     time_rv FILE.rv... [--size NAME=V]... [--random SEED] [--runs N] [--min-time S]
 *             [--serial]
 *
 * Compiles each FILE (rv_program_compile, through the JIT's on-disk cache),
 * binds the sizes given and draws the other sizes and every input and UF
 * array from SEED (rv_bindings_randomize, as `ravel run --random`), then
 * times rv_program_run on the files together with the benchmarks' method
 * (timing.h: warm-up, at least N calls (10) and S seconds (0.2) per file,
 * the files' calls interleaved so the noise of a shared machine hits them
 * alike). A call's time is what its kernels ran (the growth of
 * rv_program_stats' kernel_seconds), as bench/ times kernels: without the
 * runtime's checks of the bindings and copies of the results. One line
 * per file:
 *
 *     FILE median_ms=... min_ms=... max_ms=... runs=N compile_s=... ratio=...
 *
 * compile_s is the compile in this process (small from a warm cache);
 * ratio is this median over the first file's: compare ratios, not absolute
 * times, across runs. --serial compiles with rv_compile_options.serial
 * (parallel loops on the calling thread): on a loaded machine a parallel
 * kernel of a millisecond or less waits for the pool's threads to get a
 * core, which --serial leaves out of the comparison.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ravel.h"
#include "timing.h"

#define MAX_FILES 16
#define MAX_SIZES 16

/* One program under test. */
typedef struct File {
    const char *path;
    rv_module *m;
    rv_bindings *b;
    rv_program *p;
    double compile_s;
} File;

static void run_file(void *ctx) {
    File *f = ctx;
    if (rv_program_run(f->p, f->b) != RV_OK) {
        fprintf(stderr, "time_rv: %s: %s\n", f->path, rv_last_error());
        exit(1);
    }
}

static double kernel_seconds(void *ctx) {
    rv_program_counters c;
    rv_program_stats(((File *)ctx)->p, &c);
    return c.kernel_seconds;
}

static int usage(void) {
    fprintf(stderr, "usage: time_rv FILE.rv... [--size NAME=V]... [--random SEED] [--runs N] "
                    "[--min-time S] [--serial]\n");
    return 2;
}

/* Loads, binds and compiles one file; 0 on success. */
static int prepare(File *f, const char *const *sizes, int nsizes, unsigned long long seed,
                   const rv_compile_options *opt) {
    if (rv_module_load(f->path, &f->m) != RV_OK)
        return 1;
    f->b = rv_bindings_new(f->m);
    for (int z = 0; z < nsizes; z++) {
        const char *eq = strchr(sizes[z], '=');
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(eq - sizes[z]), sizes[z]);
        if (rv_bindings_set_size(f->b, name, atoll(eq + 1)) != RV_OK)
            return 1;
    }
    if (rv_bindings_randomize(f->b, seed) != RV_OK)
        return 1;
    double t0 = bench_now();
    if (rv_program_compile(f->m, opt, &f->p) != RV_OK)
        return 1;
    f->compile_s = bench_now() - t0;
    return 0;
}

int main(int argc, char **argv) {
    File files[MAX_FILES] = {{0}};
    BenchSide sides[MAX_FILES] = {{0}};
    const char *sizes[MAX_SIZES];
    int nfiles = 0, nsizes = 0;
    unsigned long long seed = 1;
    BenchOpts o = bench_default_opts();
    rv_compile_options opt = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--serial"))
            opt.serial = 1;
        else if (strncmp(a, "--", 2) != 0 && nfiles < MAX_FILES)
            files[nfiles++].path = a;
        else if (i + 1 >= argc)
            return usage();
        else if (!strcmp(a, "--size") && nsizes < MAX_SIZES && strchr(argv[i + 1], '='))
            sizes[nsizes++] = argv[++i];
        else if (!strcmp(a, "--random"))
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--runs"))
            o.min_runs = atoi(argv[++i]);
        else if (!strcmp(a, "--min-time"))
            o.min_time_s = atof(argv[++i]);
        else
            return usage();
    }
    if (nfiles == 0)
        return usage();
    for (int i = 0; i < nfiles; i++) {
        if (prepare(&files[i], sizes, nsizes, seed, &opt) != 0) {
            fprintf(stderr, "time_rv: %s: %s\n", files[i].path, rv_last_error());
            return 1;
        }
        sides[i] = (BenchSide){.fn = run_file, .ctx = &files[i], .clock = kernel_seconds};
    }
    bench_sides(&o, sides, nfiles);
    for (int i = 0; i < nfiles; i++) {
        const BenchStats *s = &sides[i].stats;
        printf("%s median_ms=%.4f min_ms=%.4f max_ms=%.4f runs=%d compile_s=%.2f ratio=%.3f\n",
               files[i].path, s->median_ms, s->min_ms, s->max_ms, s->runs, files[i].compile_s,
               s->median_ms / sides[0].stats.median_ms);
    }
    for (int i = 0; i < nfiles; i++) {
        rv_program_free(files[i].p);
        rv_bindings_free(files[i].b);
        rv_module_free(files[i].m);
    }
    return 0;
}
