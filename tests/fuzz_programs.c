/*
 * fuzz_programs.c — the program fuzzer: random well-typed programs
 * (tests/fuzz_gen.c) with random schedules, compiled and checked against
 * the reference interpreter.
 *
 *     fuzz_programs [--seed S] [--count N] [--jobs J] [--features LIST]
 *                   [--steps K] [--cflags FLAGS] [--timeout T]
 *                   [--repro-dir DIR] [--index I] [--print] [--trace-only] [-v]
 *
 * Program I of seed S depends only on (S, I, the feature set): --index I
 * replays it alone, --print writes the programs instead of running them,
 * --trace-only draws their schedules and compiles nothing (-v prints them:
 * to count what the step generator draws).
 * --features picks what programs may use (fuzz_gen.h: "all", "none", or a
 * comma list like "all,-pad,-ragged"). Each program runs in a child
 * process (fuzz_common.c's fuzz_run_children: a crash or a hang, after T
 * seconds, becomes a report):
 *
 *   1. it is parsed and checked; a program the checker rejects must say
 *      where (`NAME:LINE:COL: error: ...`): it counts as rejected, which
 *      is a correct outcome, not a failure;
 *   2. the interpreter runs it on five assignments: the sizes and data
 *      that `ravel run F --random D` draws for two seeds D, then every
 *      size at the low end of its range, at the high end, and at a
 *      mixture of 0, 1, small primes and the ends;
 *   3. with the `sched` feature, a random schedule is built with the
 *      schedule fuzzer's step generator (each step applied and checked,
 *      rejected steps dropped, as in fuzz_sched.c);
 *   4. the scheduled program is compiled (with the JIT's default flags,
 *      and --cflags after them) and run on each assignment, and its
 *      outputs compared with the interpreter's.
 *
 * Failures are classified: crash, hang, mismatch, run error, compiler
 * failure (the C compiler rejected the generated C), late rejection
 * (accepted by the checker, rejected when compiled), interpreter error,
 * unlocated rejection, schedule-step bug. Each failure is written to
 * --repro-dir as a standalone .rv file (program and schedule) whose first
 * lines give the `ravel run FILE --random D [--size N=V ...] --check`
 * command that replays it. The summary groups failures by class and
 * message (names and numbers elided) with a count and the first
 * reproducer of each. The last line is "fuzz_programs: N passed, N failed"
 * (tests/run.sh reads it); passed counts matches and located rejections.
 */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "fuzz_common.h"
#include "fuzz_gen.h"

enum {
    EXIT_PASS = 0,
    EXIT_REJECTED = 2,     /* the checker rejected the program, with a location */
    EXIT_LATE_REJECT = 3,  /* accepted by the checker, rejected when compiled */
    EXIT_CC_FAILURE = 4,   /* the C compiler rejected the generated C */
    EXIT_INTERP_ERROR = 5, /* the interpreter rejected an assignment */
    EXIT_FAIL = 10,        /* mismatch, run error, ...: the output says which */
};

static uint64_t opt_seed = 1;
static unsigned opt_features;
static const char *opt_features_text = "all";
static int opt_steps = 6;
/* The JIT's own flags (-O3 -march=native ...) unless --cflags adds some:
 * what users get. gcc 12.2 crashes (an internal compiler error) on some
 * of ravel's vector code at -O0, -O1 and -O2, so the fuzzer's default is
 * not a lower level. */
static const char *opt_cflags = "";
static const char *opt_cache;
static const char *opt_repro_dir;
static int opt_verbose;
static int opt_trace_only; /* draw the schedules, compile none (-v prints them) */
static long opt_first; /* job J runs program opt_first + J (--index) */

#define NASSIGN 5

static uint64_t program_seed(long i) {
    Rng r = {opt_seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t)(i + 1) * 0xd1b54a32d192ed03ull)};
    return rng_next(&r);
}

static void program_name(long i, char *buf, size_t n) {
    snprintf(buf, n, "gen_s%llu_%ld.rv", (unsigned long long)opt_seed, i);
}

/* The `--random D --size N=V ...` arguments that replay assignment a. */
static void replay_args(const Program *p, const Assign *a, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "--random %llu", (unsigned long long)a->seed);
    if (!a->drawn) {
        char sz[256];
        fuzz_format_sizes(p, a, sz, sizeof sz, "--size ");
        snprintf(buf + o, n - o, " %s", sz);
    }
}

/* Assignment k of p: drawn by rv_bindings_randomize as `ravel run --random
 * D` draws it (k < 2), or with the sizes set first: all low ends, all high
 * ends, or a mixture of edge values. Returns 0 after printing the
 * interpreter's error. */
static int make_assign(Program *p, int k, uint64_t pseed, Assign *a) {
    memset(a, 0, sizeof *a);
    a->seed = 1 + (pseed >> (8 * k)) % 997;
    a->drawn = k < 2;
    Rng r = {pseed ^ 0xa55a5aa5ull};
    rng_next(&r);
    rv_bindings *b = rv_bindings_new(p->m);
    for (int s = 0; s < p->nsizes && !a->drawn; s++) {
        int64_t lo = p->size_lo[s], hi = p->size_hi[s], v = k == 2 ? lo : hi;
        if (k == 4) {
            static const int64_t edge[] = {0, 1, 2, 3, 5, 7, 11, 13};
            int64_t c[16];
            int n = 0;
            c[n++] = lo;
            c[n++] = hi;
            for (int e = 0; e < 8; e++)
                if (edge[e] > lo && edge[e] < hi)
                    c[n++] = edge[e];
            v = c[rng_int(&r, n)];
        }
        rv_bindings_set_size(b, p->size_name[s], v);
    }
    a->ref = b;
    char args[512];
    if (rv_bindings_randomize(b, a->seed) != RV_OK) {
        replay_args(p, a, args, sizeof args);
        printf("@@ run %s\nINTERPRETER ERROR (drawing the arguments): %s\n", args, rv_last_error());
        return 0;
    }
    for (int s = 0; s < p->nsizes; s++)
        a->val[s] = rv_bindings_get_size(b, p->size_name[s]);
    if (rv_interp_run(p->m, b) != RV_OK) {
        replay_args(p, a, args, sizeof args);
        printf("@@ run %s\nINTERPRETER ERROR: %s\n", args, rv_last_error());
        return 0;
    }
    return 1;
}

/* Program i, in a child: output to stdout, the exit code says how it went. */
static int run_program(void *ctx, long job) {
    (void)ctx;
    long i = opt_first + job;
    uint64_t pseed = program_seed(i);
    char name[128];
    program_name(i, name, sizeof name);
    char *text = fuzz_gen_program(pseed, opt_features);
    printf("=== program\n%s=== end program\n", text);
    Program *p = calloc(1, sizeof *p);
    p->path = name;
    p->text = text;
    if (rv_module_parse(name, text, &p->m) != RV_OK) {
        const char *msg = rv_last_error();
        char loc[160];
        snprintf(loc, sizeof loc, "%s:", name);
        int located = strncmp(msg, loc, strlen(loc)) == 0 && strstr(msg, ": error: ");
        printf("%s: %s\n", located ? "REJECTED" : "UNLOCATED REJECTION", msg);
        return located ? EXIT_REJECTED : EXIT_FAIL;
    }
    fuzz_scan_program(p);
    for (int k = 0; k < NASSIGN; k++) {
        if (!make_assign(p, k, pseed, &p->pool[k]))
            return EXIT_INTERP_ERROR;
        p->npool++;
        char args[512];
        replay_args(p, &p->pool[k], args, sizeof args);
        if (k == 0)
            printf("@@ first %s\n", args);
    }
    rv_module *m = p->m;
    if (opt_features & GEN_SCHED) {
        Rng r = {pseed ^ 0x5c4edull};
        rng_next(&r);
        int nkept, rejected;
        m = fuzz_build_schedule(p, &r, opt_steps, opt_verbose, &nkept, &rejected);
        if (!m)
            return EXIT_FAIL;
        char *tr = rv_module_schedule_trace(m);
        printf("=== trace\n%s=== end trace\n", tr ? tr : "");
        printf("@@ steps %d kept %d rejected\n", nkept, rejected);
        rv_free(tr);
        if (opt_trace_only) {
            rv_module_free(m);
            return EXIT_PASS;
        }
    }
    rv_compile_options opt = {0};
    opt.cflags = opt_cflags;
    opt.cache_dir = opt_cache;
    rv_program *prog;
    rv_status st = rv_program_compile(m, &opt, &prog);
    if (st == RV_ERR_COMPILER) {
        printf("COMPILER FAILURE: %s\n", rv_last_error());
        return EXIT_CC_FAILURE;
    }
    if (st != RV_OK) {
        printf("LATE REJECTION (%s): %s\n", rv_status_name(st), rv_last_error());
        return EXIT_LATE_REJECT;
    }
    for (int k = 0; k < p->npool; k++) {
        char args[512];
        replay_args(p, &p->pool[k], args, sizeof args);
        printf("@@ run %s\n", args);
        if (!fuzz_check_assign(p, m, prog, &p->pool[k]))
            return EXIT_FAIL;
    }
    return EXIT_PASS;
}

/* ---- the parent: classes, signatures, reproducers ---- */

#define MAX_SIGS 256

typedef struct Sig {
    char cls[32];
    char msg[160];
    int count;
    int failure;
    char repro[256];
} Sig;

typedef struct Totals {
    long n;
    time_t t0;
    int passed, rejected, failed;
    int nsig;
    Sig sig[MAX_SIGS];
} Totals;

/* The text of the line after `marker` up to the line `end` (exclusive). */
static char *section(const char *text, const char *marker, const char *end) {
    const char *a = strstr(text, marker);
    if (!a)
        return NULL;
    a += strlen(marker);
    const char *b = strstr(a, end);
    size_t n = b ? (size_t)(b - a) : strlen(a);
    char *s = malloc(n + 1);
    memcpy(s, a, n);
    s[n] = 0;
    return s;
}

/* The last line starting with `prefix`, without it (into buf). */
static int last_line(const char *text, const char *prefix, char *buf, size_t n) {
    const char *found = NULL;
    size_t len = strlen(prefix);
    for (const char *l = text; l && *l;) {
        if (strncmp(l, prefix, len) == 0)
            found = l + len;
        l = strchr(l, '\n');
        l = l ? l + 1 : NULL;
    }
    if (!found)
        return 0;
    size_t k = 0;
    while (found[k] && found[k] != '\n' && k < n - 1)
        buf[k] = found[k], k++;
    buf[k] = 0;
    return 1;
}

/* The first line naming the failure: a marker's line, or an error line. */
static void failure_message(const char *text, char *buf, size_t n) {
    static const char *const markers[] = {
        "MISMATCH",   "RUN ERROR:", "LATE REJECTION", "COMPILER FAILURE:", "INTERPRETER ERROR",
        "REJECTED:",  "UNLOCATED",  "BUG:",           "internal error",    "Assertion",
        "error:",     "ERROR",
    };
    buf[0] = 0;
    for (size_t m = 0; m < sizeof markers / sizeof markers[0]; m++) {
        const char *at = strstr(text, markers[m]);
        if (!at)
            continue;
        while (at > text && at[-1] != '\n')
            at--;
        size_t k = 0;
        while (at[k] && at[k] != '\n' && k < n - 1)
            buf[k] = at[k], k++;
        buf[k] = 0;
        return;
    }
}

/* The message with the program's name, locations, quoted names, bracketed
 * indices and numbers elided, so failures of one kind share it. */
static void normalize(const char *msg, char *out, size_t n) {
    size_t o = 0;
    const char *g = strstr(msg, "gen_s");
    if (g) {
        const char *e = strstr(g, ": error: ");
        const char *colon = strstr(g, ".rv");
        msg = e ? e + 9 : colon ? colon + 3 : msg;
    }
    for (const char *s = msg; *s && o < n - 1;) {
        if (*s == '\'') {
            const char *e = strchr(s + 1, '\'');
            if (e && e - s < 40) {
                out[o++] = '*';
                s = e + 1;
                continue;
            }
        }
        if (*s == '[') { /* ix0_start1[1 * N], at [2, 0] */
            const char *e = strchr(s, ']');
            if (e && e - s < 40 && o + 3 < n - 1) {
                memcpy(out + o, "[*]", 3);
                o += 3;
                s = e + 1;
                continue;
            }
        }
        if (isdigit((unsigned char)*s) || (*s == '-' && isdigit((unsigned char)s[1]))) {
            while (*s == '-' || *s == '.' || *s == 'e' || isdigit((unsigned char)*s))
                s++;
            out[o++] = '#';
            continue;
        }
        if (*s == '(' && strncmp(s, "(flat index", 11) == 0)
            break;
        out[o++] = *s++;
    }
    out[o] = 0;
    if (o > 100)
        out[100] = 0;
}

static void write_repro(long i, const char *cls, const char *text, const char *msg, char *path,
                        size_t n) {
    path[0] = 0;
    if (!opt_repro_dir)
        return;
    char *prog = section(text, "=== program\n", "=== end program\n");
    if (!prog)
        return;
    char *trace = section(text, "=== trace\n", "=== end trace\n");
    char args[512] = "";
    if (!last_line(text, "@@ run ", args, sizeof args))
        last_line(text, "@@ first ", args, sizeof args);
    mkdir(opt_repro_dir, 0777);
    char stem[32];
    size_t k = 0;
    for (const char *c = cls; *c && k < sizeof stem - 1; c++)
        stem[k++] = isalnum((unsigned char)*c) ? *c : '_';
    stem[k] = 0;
    snprintf(path, n, "%s/%s_s%llu_%ld.rv", opt_repro_dir, stem, (unsigned long long)opt_seed, i);
    FILE *f = fopen(path, "w");
    if (!f) {
        path[0] = 0;
        free(prog);
        free(trace);
        return;
    }
    fprintf(f, "# %s: fuzz_programs --seed %llu --index %ld --features %s\n", cls,
            (unsigned long long)opt_seed, i, opt_features_text);
    fprintf(f, "# replay: ravel run %s %s --check\n", path, args[0] ? args : "--random 1");
    fprintf(f, "# %s\n", msg);
    fputs(prog, f);
    /* the trace's schedule blocks, without its stage comments */
    for (const char *l = trace; l && *l;) {
        const char *eol = strchr(l, '\n');
        size_t len = eol ? (size_t)(eol - l + 1) : strlen(l);
        if (l[0] != '#')
            fwrite(l, 1, len, f);
        l += len;
    }
    fclose(f);
    free(prog);
    free(trace);
}

static void count_sig(Totals *t, const char *cls, const char *msg, int failure, const char *repro) {
    char norm[160];
    normalize(msg, norm, sizeof norm);
    for (int s = 0; s < t->nsig; s++)
        if (strcmp(t->sig[s].cls, cls) == 0 && strcmp(t->sig[s].msg, norm) == 0) {
            t->sig[s].count++;
            return;
        }
    if (t->nsig == MAX_SIGS)
        return;
    Sig *s = &t->sig[t->nsig++];
    snprintf(s->cls, sizeof s->cls, "%s", cls);
    snprintf(s->msg, sizeof s->msg, "%s", norm);
    snprintf(s->repro, sizeof s->repro, "%s", repro);
    s->count = 1;
    s->failure = failure;
}

static void finish(void *ctx, long job, int status, const char *text) {
    Totals *t = ctx;
    long i = opt_first + job;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    char msg[512];
    failure_message(text, msg, sizeof msg);
    const char *cls = NULL;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        cls = "hang";
    else if (WIFSIGNALED(status))
        cls = "crash";
    else if (code == EXIT_PASS)
        t->passed++;
    else if (code == EXIT_REJECTED) {
        t->rejected++;
        count_sig(t, "rejected", msg, 0, "");
    } else if (code == EXIT_LATE_REJECT)
        cls = "late rejection";
    else if (code == EXIT_CC_FAILURE)
        cls = "compiler failure";
    else if (code == EXIT_INTERP_ERROR)
        cls = "interpreter error";
    else if (strstr(text, "\nRUN ERROR:"))
        cls = "run error";
    else if (strstr(text, "MISMATCH"))
        cls = "mismatch";
    else if (strstr(text, "\nUNLOCATED REJECTION"))
        cls = "unlocated rejection";
    else if (strstr(text, "\nBUG:"))
        cls = "schedule step bug";
    else
        cls = "failure";
    if (cls) {
        t->failed++;
        if (strcmp(cls, "crash") == 0 || strcmp(cls, "hang") == 0) {
            char sig[64];
            snprintf(sig, sizeof sig, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
            if (!msg[0] || strcmp(cls, "hang") == 0)
                snprintf(msg, sizeof msg, "%s", sig);
        }
        char repro[512];
        write_repro(i, cls, text, msg, repro, sizeof repro);
        count_sig(t, cls, msg, 1, repro);
        printf("FAIL program %ld: %s: %s\n", i, cls, msg);
        printf("  replay: fuzz_programs --seed %llu --features %s --index %ld -v%s%s\n",
               (unsigned long long)opt_seed, opt_features_text, i, repro[0] ? "; " : "", repro);
        if (opt_verbose)
            printf("%s---- end of program %ld\n", text, i);
    } else if (opt_verbose) {
        printf("%s---- end of program %ld\n", text, i);
    }
    if ((job + 1) % 500 == 0)
        printf("... %ld of %ld programs: %d passed, %d rejected, %d failed (%lds)\n", job + 1, t->n,
               t->passed, t->rejected, t->failed, (long)(time(NULL) - t->t0));
    fflush(stdout);
}

static void usage(void) {
    fprintf(stderr, "usage: fuzz_programs [--seed S] [--count N] [--jobs J] [--features LIST] "
                    "[--steps K] [--cflags FLAGS] [--timeout T] [--repro-dir DIR] [--index I] "
                    "[--print] [--trace-only] [-v]\n");
    exit(2);
}

int main(int argc, char **argv) {
    long count = 100, index = -1;
    int jobs = 2, print_only = 0;
    unsigned timeout = 60;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-v") == 0) {
            opt_verbose = 1;
            continue;
        }
        if (strcmp(a, "--print") == 0) {
            print_only = 1;
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
        else if (strcmp(a, "--jobs") == 0)
            jobs = atoi(v) < 1 ? 1 : atoi(v) > 64 ? 64 : atoi(v);
        else if (strcmp(a, "--features") == 0)
            opt_features_text = v;
        else if (strcmp(a, "--steps") == 0)
            opt_steps = atoi(v) < 1 ? 1 : atoi(v);
        else if (strcmp(a, "--cflags") == 0)
            opt_cflags = v;
        else if (strcmp(a, "--timeout") == 0)
            timeout = (unsigned)atoi(v);
        else if (strcmp(a, "--repro-dir") == 0)
            opt_repro_dir = v;
        else if (strcmp(a, "--index") == 0)
            index = strtol(v, NULL, 10);
        else
            usage();
        i++;
    }
    if (fuzz_gen_parse_features(opt_features_text, &opt_features) != 0)
        usage();
    if (print_only) {
        for (long i = index >= 0 ? index : 0; i < (index >= 0 ? index + 1 : count); i++) {
            char *text = fuzz_gen_program(program_seed(i), opt_features);
            printf("# program %ld\n%s\n", i, text);
            free(text);
        }
        return 0;
    }
    char cache[] = "/tmp/fuzz_programs_cache.XXXXXX";
    if (!mkdtemp(cache))
        fuzz_die("fuzz_programs: mkdtemp failed");
    opt_cache = cache;
    /* One compile in the parent asks the compiler for its identity (the JIT
     * key), so the children do not each run `cc --version`. */
    {
        rv_module *m;
        rv_program *prog;
        rv_compile_options opt = {0};
        opt.cflags = opt_cflags;
        opt.cache_dir = opt_cache;
        if (rv_module_parse("warm.rv", "input X : f32[4]\nY[i < 4] = X[i]\n", &m) == RV_OK) {
            if (rv_program_compile(m, &opt, &prog) == RV_OK)
                rv_program_free(prog);
            rv_module_free(m);
        }
    }
    Totals *t = calloc(1, sizeof *t);
    t->t0 = time(NULL);
    if (index >= 0) {
        opt_first = index;
        count = 1;
    }
    t->n = count;
    fuzz_run_children(count, jobs, timeout, run_program, finish, t);
    printf("\n%ld programs (seed %llu, features %s, cflags '%s', %lds): %d matched the interpreter, "
           "%d rejected by the checker, %d failed\n",
           t->n, (unsigned long long)opt_seed, opt_features_text, opt_cflags,
           (long)(time(NULL) - t->t0), t->passed, t->rejected, t->failed);
    for (int pass = 1; pass >= 0; pass--)
        for (int s = 0; s < t->nsig; s++)
            if (t->sig[s].failure == pass)
                printf("  %5d  %-18s %s%s%s\n", t->sig[s].count, t->sig[s].cls, t->sig[s].msg,
                       t->sig[s].repro[0] ? "\n                            " : "",
                       t->sig[s].repro);
    printf("fuzz_programs: %d passed, %d failed\n", t->passed + t->rejected, t->failed);
    fuzz_remove_dir(cache);
    int failed = t->failed;
    free(t);
    return failed ? 1 : 0;
}
