/*
 * fuzz_sched.c — the schedule fuzzer: random schedules, compiled and
 * checked against the reference interpreter.
 *
 *     fuzz_sched [--seed S] [--count N] [--example FILE] [--index J]
 *                [--jobs J] [--steps K] [--budget W] [--repro-dir DIR] [-v]
 *                [--trace-only]
 *
 * For every program (the .rv files of examples/ and tests/fuzz/, or the one given
 * with --example) the fuzzer drops the program's own `schedule` blocks and
 * builds schedules one step at a time: it reads the current stages and
 * their loops from rv_module_schedule_info, draws a primitive and its arguments (split with awkward
 * factors, tile, fuse, reorder, parallel, vectorize, unroll, pad,
 * storage_pad, cache_read, cache_write, compute_at, compute_inline,
 * split_op and hfuse of its parts; for a
 * recursion group, dynamic_batch, specialize, refactor and unroll_recursion in its
 * `schedule R` block; on ragged programs, tests/fuzz/ragged_*.rv, these of
 * ragged tensors too, compute_at often at a loop a ragged extent depends
 * on, where the region is whole rows), and applies it with rv_module_schedule. A step the scheduler rejects must
 * fail with RV_ERR_SCHEDULE and a message naming the primitive; it is
 * counted as rejected and dropped (the module is rebuilt from the kept
 * steps). Anything else is a bug: another status, a crash, a compile
 * error, a run error, or an output that differs from the interpreter's.
 *
 * The schedule is compiled at -O0 (quick to compile, into a temporary JIT
 * cache; -O1 for programs whose smallest sizes are already heavy, like
 * dense_gelu.rv) and run on two or three size assignments drawn from a per-program
 * pool: the low end of each size's range, 0 and 1 where allowed, small
 * primes and a few awkward larger values, and the high end, as long as the
 * work of the assignment stays under a budget (so big examples keep small
 * sizes). The pool's reference outputs are computed once by the
 * interpreter; every input and UF array is drawn by rv_bindings_randomize
 * with the run's seed, so `ravel run FILE --random SEED --size ... --check`
 * replays a failure with the same data.
 *
 * Each schedule is built, compiled and run in a child process (crashes and
 * hangs, after 300 s, become reports, not the end of the run), up to --jobs
 * at a time; the compiler's rejections at compile time (RV_ERR_SCHEDULE for
 * a schedule every step of which was accepted) are counted apart.
 * Schedule J of program F depends only on the seed, F's name and J, so
 * `fuzz_sched --seed S --example F --index J` replays it. A failure prints
 * the program, the sizes, the seed, the whole trace and the error; with
 * --repro-dir it also writes the program with the schedule as a .rv file.
 * The last line is "fuzz: N passed, N failed" (tests/run.sh reads it).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_common.h"

/* The program without its `schedule NAME { ... }` blocks (comments kept;
 * a block starts a line, and braces inside comments do not count). */
static char *strip_schedules(const char *text) {
    size_t n = strlen(text);
    char *out = malloc(n + 1);
    size_t o = 0;
    const char *p = text;
    while (*p) {
        const char *line = p;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "schedule", 8) == 0 && !fuzz_is_ident_char((unsigned char)p[8])) {
            int depth = 0, opened = 0;
            while (*p && !(opened && depth == 0)) {
                if (*p == '#') {
                    while (*p && *p != '\n')
                        p++;
                    continue;
                }
                if (*p == '{')
                    depth++, opened = 1;
                else if (*p == '}')
                    depth--;
                p++;
            }
            while (*p && *p != '\n')
                p++;
            if (*p)
                p++;
            continue;
        }
        p = line;
        while (*p && *p != '\n')
            out[o++] = *p++;
        if (*p)
            out[o++] = *p++;
    }
    out[o] = 0;
    return out;
}

/* ---- programs and their size pools ---- */

/* The interpreter's work on an assignment: elements computed times the
 * reduction extent of each definition (symbolic extents count as the
 * largest size). */
static double assign_work(const Program *p, const Assign *a) {
    int64_t maxsize = 1;
    for (int s = 0; s < p->nsizes; s++)
        if (a->val[s] > maxsize)
            maxsize = a->val[s];
    double w = 0;
    for (int t = 0; t < p->ntensors; t++) {
        if (p->is_input[t])
            continue;
        const rv_array *arr = rv_bindings_get_array(a->ref, p->tname[t]);
        double f = p->red_factor[t] >= 1 ? p->red_factor[t] : p->red_factor[t] > 0 ? (double)maxsize : 1;
        if (arr)
            w += (double)rv_array_numel(arr) * f;
    }
    return w;
}

/* Same shape and the same values: what was drawn depends on the sizes
 * through value ranges too (`ufun col[...] in 0..C - 1`), not only shapes. */
static int same_array(const rv_array *a, const rv_array *b) {
    return fuzz_same_shape(a, b) &&
           memcmp(rv_array_cdata(a), rv_array_cdata(b),
                  (size_t)rv_array_numel(a) * rv_dtype_size(rv_array_dtype(a))) == 0;
}

/* Draws the arrays of one assignment (rv_bindings_randomize with the
 * program's data seed) and runs the interpreter. Arrays whose shape does
 * not change with the sizes are shared with earlier assignments (the same
 * seed draws the same values), so a 30000 x 512 embedding table exists
 * once. Returns 0 when the interpreter rejects the assignment. */
static int assign_make(Program *p, Assign *a) {
    rv_bindings *draw = rv_bindings_new(p->m);
    for (int s = 0; s < p->nsizes; s++)
        rv_bindings_set_size(draw, p->size_name[s], a->val[s]);
    if (p->npool >= 2) {
        /* the same seed draws the same values: reuse what did not change shape */
        const rv_bindings *x = p->pool[0].ref, *y = p->pool[1].ref;
        for (int t = 0; t < p->ntensors; t++) {
            const rv_array *ax = rv_bindings_get_array(x, p->tname[t]);
            const rv_array *ay = rv_bindings_get_array(y, p->tname[t]);
            if (p->is_input[t] && ax && ay && fuzz_same_shape(ax, ay))
                rv_bindings_set_array(draw, p->tname[t], ax);
        }
    }
    if (rv_bindings_randomize(draw, p->data_seed) != RV_OK) {
        fprintf(stderr, "fuzz_sched: %s: cannot draw inputs: %s\n", p->path, rv_last_error());
        rv_bindings_free(draw);
        return 0;
    }
    a->ref = rv_bindings_new(p->m);
    for (int s = 0; s < p->nsizes; s++)
        rv_bindings_set_size(a->ref, p->size_name[s], a->val[s]);
    int nnames = 0;
    const char *names[2 * MAX_TENSORS];
    for (int i = 0; i < rv_module_num_ufuns(p->m) && nnames < MAX_TENSORS; i++)
        names[nnames++] = rv_ufun_name(rv_module_ufun_at(p->m, i));
    for (int t = 0; t < p->ntensors; t++)
        if (p->is_input[t])
            names[nnames++] = p->tname[t];
    for (int i = 0; i < nnames; i++) {
        const rv_array *src = rv_bindings_get_array(draw, names[i]);
        const rv_array *use = NULL;
        for (int e = 0; e < p->npool && !use; e++) {
            const rv_array *o = rv_bindings_get_array(p->pool[e].ref, names[i]);
            if (o && same_array(o, src))
                use = o;
        }
        if (!use) {
            rv_array *c = fuzz_copy_array(src);
            a->owned[a->nowned++] = c;
            use = c;
        }
        rv_bindings_set_array(a->ref, names[i], use);
    }
    rv_bindings_free(draw);
    if (rv_interp_run(p->m, a->ref) != RV_OK) {
        fprintf(stderr, "fuzz_sched: %s: interpreter: %s\n", p->path, rv_last_error());
        return 0;
    }
    a->work = assign_work(p, a);
    return 1;
}

/* Candidate values of size s: the ends of its range, 0 and 1, small
 * primes and a few values just past powers of two. */
static int size_candidates(const Program *p, int s, int64_t *out) {
    static const int64_t vals[] = {0, 1, 2, 3, 5, 7, 11, 13, 17, 31, 33, 65, 101};
    int n = 0;
    int64_t lo = p->size_lo[s], hi = p->size_hi[s];
    out[n++] = lo;
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        if (vals[i] > lo && vals[i] < hi)
            out[n++] = vals[i];
    if (hi > lo)
        out[n++] = hi;
    return n;
}

/* Fills the pool: with one size, every candidate in increasing order while
 * the work stays under the budget (extrapolated from the last two before
 * running the interpreter, so a huge high end is never tried); with
 * several, the low ends, the high ends, then random mixtures under the
 * budget. Input arrays whose shape is the same for the first two
 * assignments are bound for the later ones instead of drawn again. */
static void build_pool(Program *p, uint64_t seed, double budget) {
    Rng r = {seed ^ fuzz_hash_str(fuzz_base_name(p->path)) ^ 0x5eedull};
    int64_t cand[MAX_SIZES][32];
    int ncand[MAX_SIZES];
    for (int s = 0; s < p->nsizes; s++)
        ncand[s] = size_candidates(p, s, cand[s]);
    int tries = p->nsizes == 1 ? ncand[0] : 40;
    for (int k = 0; k < tries && p->npool < MAX_POOL; k++) {
        Assign *a = &p->pool[p->npool];
        memset(a, 0, sizeof *a);
        for (int s = 0; s < p->nsizes; s++) {
            int c = p->nsizes == 1 ? k : k == 0 ? 0 : k == 1 ? ncand[s] - 1 : rng_int(&r, ncand[s]);
            a->val[s] = cand[s][c];
        }
        int dup = 0;
        for (int e = 0; e < p->npool && !dup; e++)
            dup = memcmp(p->pool[e].val, a->val, sizeof a->val) == 0;
        if (dup)
            continue;
        if (p->nsizes == 1 && p->npool >= 2) {
            const Assign *x = &p->pool[p->npool - 2], *y = &p->pool[p->npool - 1];
            double d = 1;
            if (x->work > 0 && y->work > x->work && y->val[0] > x->val[0] && x->val[0] > 0)
                d = log(y->work / x->work) / log((double)y->val[0] / (double)x->val[0]);
            double est = y->work * pow((double)a->val[0] / (double)(y->val[0] ? y->val[0] : 1),
                                       d < 1 ? 1 : d);
            if (est > 4 * budget)
                break;
        }
        if (!assign_make(p, a)) {
            fuzz_assign_free(a);
            continue;
        }
        if (p->npool > 0 && a->work > budget) {
            fuzz_assign_free(a);
            if (p->nsizes == 1)
                break; /* the rest are larger */
            continue;
        }
        p->npool++;
    }
}

/* ---- one schedule, in a child process ---- */

enum {
    EXIT_PASS = 0,
    EXIT_LATE_REJECT = 3, /* RV_ERR_SCHEDULE from the compiler */
    EXIT_FAIL = 10,
};

static const char *opt_cache;
static int opt_steps = 8;
static int opt_verbose;
static int opt_trace_only; /* draw the schedules, compile none (-v prints them) */

/* A run (compile excluded) slower than this skips the larger sizes. */
#define SLOW_RUN_S 20.0

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int run_one(Program *p, uint64_t seed, int j) {
    Rng r = {seed ^ fuzz_hash_str(fuzz_base_name(p->path)) ^
             ((uint64_t)(j + 1) * 0x9e3779b97f4a7c15ull)};
    rng_next(&r);
    int nkept, rejected;
    rv_module *m = fuzz_build_schedule(p, &r, opt_steps, opt_verbose, &nkept, &rejected);
    if (!m)
        return EXIT_FAIL;
    char *tr = rv_module_schedule_trace(m);
    printf("=== trace\n%s", tr ? tr : "(none)\n");
    rv_free(tr);
    if (opt_trace_only) {
        rv_module_free(m);
        return EXIT_PASS;
    }
    /* the assignments */
    int pick[3], npick = p->npool < 2 ? p->npool : 2 + rng_int(&r, p->npool < 3 ? 1 : 2);
    for (int i = 0; i < npick; i++) {
        int again;
        do {
            pick[i] = rng_int(&r, p->npool);
            again = 0;
            for (int k = 0; k < i; k++)
                again |= pick[k] == pick[i];
        } while (again);
    }
    printf("@@ applied %d rejected %d pool", nkept, rejected);
    for (int i = 0; i < npick; i++)
        printf(" %d", pick[i]);
    printf("\n");
    rv_compile_options opt = {0};
    /* -O0 compiles fastest; programs whose smallest assignment is over the
     * budget (dense_gelu's 16 x 3072 x 768) spend longer running than
     * compiling, so they get -O1 */
    opt.cflags = p->heavy ? "-O1" : "-O0";
    opt.cache_dir = opt_cache;
    rv_program *prog;
    rv_status st = rv_program_compile(m, &opt, &prog);
    if (st == RV_ERR_SCHEDULE) {
        printf("LATE REJECT (compile): %s\n", rv_last_error());
        return EXIT_LATE_REJECT;
    }
    if (st != RV_OK) {
        printf("COMPILE ERROR (%s): %s\n", rv_status_name(st), rv_last_error());
        return EXIT_FAIL;
    }
    rv_program_counters pc;
    rv_program_stats(prog, &pc);
    printf("compiled in %.3fs\n", pc.compile_seconds);
    /* Smallest work first, and no larger assignment after a slow run: a
     * legal schedule may multiply the work (a reduction inlined into a
     * reduction over 1024 columns runs 1024^2 operations per element at
     * -O0), which is slow, not wrong; the timeout still catches a hang at
     * the first size. */
    for (int i = 1; i < npick; i++)
        for (int k = i; k > 0 && p->pool[pick[k]].work < p->pool[pick[k - 1]].work; k--) {
            int t = pick[k];
            pick[k] = pick[k - 1];
            pick[k - 1] = t;
        }
    int ok = 1;
    for (int i = 0; i < npick && ok; i++) {
        char sz[256];
        fuzz_format_sizes(p, &p->pool[pick[i]], sz, sizeof sz, "");
        printf("run %s\n", sz);
        double t0 = now_seconds();
        ok = fuzz_check_assign(p, m, prog, &p->pool[pick[i]]);
        double took = now_seconds() - t0;
        if (ok && i + 1 < npick && took > SLOW_RUN_S) {
            printf("slow: %.1f s at %s; the larger assignments are skipped\n", took, sz);
            break;
        }
    }
    rv_program_free(prog);
    rv_module_free(m);
    return ok ? EXIT_PASS : EXIT_FAIL;
}

/* ---- the parent: pools, children, reports ---- */

static uint64_t opt_seed = 1;
static const char *opt_repro_dir;
static int total_passed, total_failed;

/* Writes FILE with the schedule blocks of `trace` appended to the program. */
static void write_repro(const Program *p, int j, const char *trace, const char *why) {
    if (!opt_repro_dir)
        return;
    mkdir(opt_repro_dir, 0777);
    char path[1024];
    char stemname[256];
    snprintf(stemname, sizeof stemname, "%s", fuzz_base_name(p->path));
    char *dot = strrchr(stemname, '.');
    if (dot)
        *dot = 0;
    snprintf(path, sizeof path, "%s/%s_s%llu_j%d.rv", opt_repro_dir, stemname,
             (unsigned long long)opt_seed, j);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "# fuzz_sched --seed %llu --example %s --index %d\n# %s\n",
            (unsigned long long)opt_seed, p->path, j, why);
    fputs(p->text, f);
    fputs("\n", f);
    /* the trace's schedule blocks, without its stage comments */
    for (const char *l = trace; l && *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l + 1) : strlen(l);
        if (l[0] == '@')
            break;
        if (l[0] != '#')
            fwrite(l, 1, len, f);
        l += len;
    }
    fclose(f);
    printf("  reproducer: %s\n", path);
}

/* What the parent knows: the programs and how job numbers map to them. */
typedef struct Run {
    Program *progs;
    int nexamples;
    int index; /* --index J, or -1 */
    long total;
    time_t t0;
} Run;

static void job_of(const Run *run, long i, Program **p, int *j) {
    *p = &run->progs[i % run->nexamples];
    *j = run->index >= 0 ? run->index : (int)(i / run->nexamples);
}

static int child(void *ctx, long i) {
    Program *p;
    int j;
    job_of(ctx, i, &p, &j);
    return run_one(p, opt_seed, j);
}

static void finish(void *ctx, long i, int status, const char *text) {
    Run *run = ctx;
    Program *p;
    int j;
    job_of(run, i, &p, &j);
    int applied = 0, rejected = 0;
    int pool[3] = {-1, -1, -1};
    const char *at = strstr(text, "@@ applied ");
    if (at)
        sscanf(at, "@@ applied %d rejected %d pool %d %d %d", &applied, &rejected, &pool[0],
               &pool[1], &pool[2]);
    p->applied += applied;
    p->rejected += rejected;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code == EXIT_PASS) {
        p->passed++;
        total_passed++;
    } else if (code == EXIT_LATE_REJECT) {
        p->late_rejected++; /* neither passed nor failed: counted apart */
    } else {
        p->failed++;
        total_failed++;
        char why[256];
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
            snprintf(why, sizeof why, "timed out after 300 s (a hang, or a very loaded machine)");
        else if (WIFSIGNALED(status))
            snprintf(why, sizeof why, "crashed with signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            snprintf(why, sizeof why, "failed (exit %d)", code);
        printf("FAIL %s schedule #%d %s\n", p->path, j, why);
        printf("  replay: fuzz_sched --seed %llu --example %s --index %d -v\n",
               (unsigned long long)opt_seed, p->path, j);
        for (int k = 0; k < 3; k++) {
            if (pool[k] < 0)
                continue;
            char sz[256];
            fuzz_format_sizes(p, &p->pool[pool[k]], sz, sizeof sz, "--size ");
            printf("  sizes: %s   (data: --random %llu)\n", sz, (unsigned long long)p->data_seed);
        }
        const char *trace = strstr(text, "=== trace\n");
        if (trace)
            write_repro(p, j, trace + 10, why);
        printf("%s", text);
        printf("---- end of schedule #%d\n", j);
    }
    if (opt_verbose && (code == EXIT_PASS || code == EXIT_LATE_REJECT))
        printf("%s", text);
    if ((i + 1) % 500 == 0)
        printf("... %ld of %ld schedules: %d passed, %d failed (%lds)\n", i + 1, run->total,
               total_passed, total_failed, (long)(time(NULL) - run->t0));
    fflush(stdout);
}

static void usage(void) {
    fprintf(stderr, "usage: fuzz_sched [--seed S] [--count N] [--example FILE]... [--index J] "
                    "[--jobs J] [--steps K] [--budget W] [--repro-dir DIR] [-v]\n");
    exit(2);
}

int main(int argc, char **argv) {
    long count = 300;
    int jobs = 2, index = -1;
    double budget = 1.5e6;
    const char *examples[64];
    int nexamples = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-v") == 0) {
            opt_verbose = 1;
            continue;
        }
        if (strcmp(a, "--trace-only") == 0) {
            opt_trace_only = 1;
            continue;
        }
        if (!v)
            usage();
        if (strcmp(a, "--seed") == 0)
            opt_seed = strtoull(v, NULL, 10);
        else if (strcmp(a, "--count") == 0)
            count = strtol(v, NULL, 10);
        else if (strcmp(a, "--example") == 0 && nexamples < 64)
            examples[nexamples++] = v;
        else if (strcmp(a, "--index") == 0)
            index = atoi(v);
        else if (strcmp(a, "--jobs") == 0)
            jobs = atoi(v) < 1 ? 1 : atoi(v) > 64 ? 64 : atoi(v);
        else if (strcmp(a, "--steps") == 0)
            opt_steps = atoi(v) < 1 ? 1 : atoi(v);
        else if (strcmp(a, "--budget") == 0)
            budget = atof(v);
        else if (strcmp(a, "--repro-dir") == 0)
            opt_repro_dir = v;
        else
            usage();
        i++;
    }
    glob_t gl = {0};
    if (nexamples == 0) {
        glob("examples/*.rv", 0, NULL, &gl);
        glob("tests/fuzz/*.rv", GLOB_APPEND, NULL, &gl);
        for (size_t i = 0; i < gl.gl_pathc && nexamples < 64; i++)
            examples[nexamples++] = gl.gl_pathv[i];
        if (nexamples == 0)
            fuzz_die("fuzz_sched: no examples (run it from the repository root)");
    }
    char cache[] = "/tmp/fuzz_sched_cache.XXXXXX";
    if (!mkdtemp(cache))
        fuzz_die("fuzz_sched: mkdtemp: %s", strerror(errno));
    opt_cache = cache;
    time_t t0 = time(NULL);

    Program *progs = calloc((size_t)nexamples, sizeof(Program));
    for (int e = 0; e < nexamples; e++) {
        Program *p = &progs[e];
        p->path = examples[e];
        char *text = fuzz_read_text(p->path);
        p->text = strip_schedules(text);
        free(text);
        if (rv_module_parse(p->path, p->text, &p->m) != RV_OK)
            fuzz_die("fuzz_sched: %s: %s", p->path, rv_last_error());
        fuzz_scan_program(p);
        p->data_seed = opt_seed;
        struct timespec ta, tb;
        clock_gettime(CLOCK_MONOTONIC, &ta);
        build_pool(p, opt_seed, budget);
        clock_gettime(CLOCK_MONOTONIC, &tb);
        if (p->npool == 0)
            fuzz_die("fuzz_sched: %s: no size assignment the interpreter accepts", p->path);
        p->heavy = p->pool[0].work > budget;
        printf("%-32s pool:", p->path);
        for (int a = 0; a < p->npool; a++) {
            char sz[256];
            fuzz_format_sizes(p, &p->pool[a], sz, sizeof sz, "");
            printf(" [%s]", sz);
        }
        printf("%s (%.1fs)\n", p->heavy ? " heavy, -O1" : "", (double)(tb.tv_sec - ta.tv_sec) + 1e-9 * (double)(tb.tv_nsec - ta.tv_nsec));
    }
    fflush(stdout);

    /* One compile in the parent asks the compiler for its identity (the JIT
     * key), so the children do not each run `cc --version`. */
    {
        rv_compile_options opt = {0};
        opt.cflags = "-O0";
        opt.cache_dir = opt_cache;
        rv_program *prog;
        if (rv_program_compile(progs[0].m, &opt, &prog) == RV_OK)
            rv_program_free(prog);
    }

    long total = index >= 0 ? nexamples : count;
    Run run = {progs, nexamples, index, total, t0};
    fuzz_run_children(total, jobs, 300, child, finish, &run);

    long applied = 0, rejected = 0, late = 0;
    printf("\n%-32s %7s %7s %7s %9s %9s\n", "program", "passed", "failed", "late-rej", "steps",
           "rejected");
    for (int e = 0; e < nexamples; e++) {
        Program *p = &progs[e];
        printf("%-32s %7d %7d %7d %9d %9d\n", p->path, p->passed, p->failed, p->late_rejected,
               p->applied, p->rejected);
        applied += p->applied;
        rejected += p->rejected;
        late += p->late_rejected;
        for (int a = 0; a < p->npool; a++)
            fuzz_assign_free(&p->pool[a]);
        rv_module_free(p->m);
        free(p->text);
    }
    printf("%ld schedules (seed %llu, %lds): %d passed, %ld rejected by the compiler, %d failed; "
           "%ld steps applied, %ld steps rejected\n",
           total, (unsigned long long)opt_seed, (long)(time(NULL) - t0), total_passed, late,
           total_failed, applied, rejected);
    printf("fuzz: %d passed, %d failed\n", total_passed, total_failed);
    free(progs);
    globfree(&gl);
    fuzz_remove_dir(cache);
    return total_failed ? 1 : 0;
}
