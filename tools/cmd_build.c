/*
 * cmd_build.c — `ravel build FILE.rv -o NAME [--shared] [--target c]`:
 * ahead-of-time compilation.
 *
 * Writes NAME.c and NAME.h (src/codegen/c_aot.c: the kernels `ravel emit`
 * shows, renamed NAME_kernel_X, plus NAME_run and friends, documented at
 * the top of NAME.h) and copies ravel_rt.h next to them, so the directory
 * compiles on its own: `cc -c NAME.c` needs no -I and no ravel library.
 * --shared also compiles libNAME.so with the system C compiler ($RAVEL_CC,
 * else cc) and the JIT's flags (src/jit/jit.c) but for the target CPU:
 * the JIT compiles for the machine it runs on (-march=native), a library
 * is often shipped elsewhere, so it gets the compiler's default target
 * (runs on every CPU of the architecture) unless --march CPU says
 * otherwise (native, x86-64-v3, ...: passed as -march=CPU).
 *
 * THREADS. --threads N embeds the runtime's thread pool in NAME.c
 * (src/codegen/c_aot_pool.c), so NAME_run(args, NULL) runs parallel loops
 * on N threads (0: $RAVEL_NUM_THREADS, else every CPU; NAME_set_num_threads
 * changes it) and the library needs pthreads (-pthread). The default, 1,
 * keeps NAME.c serial and dependent on libc and libm only.
 *
 * VARIANTS. `--variant FILE` (repeatable) makes FILE's schedule blocks one
 * variant (in order: variant 0, 1, ...; in place of the module's own
 * blocks), and NAME_run picks one per call after checking the arguments:
 * `--dispatch SIZE=LO..HI[,SIZE=LO..HI]:V` (repeatable) is a rule of the
 * table (the first rule whose sizes all lie in their ranges gives the
 * variant, else variant 0), `--dispatch extern` makes NAME_run call
 * NAME_dispatch(sizes, NULL), which the user (or a tuner) defines;
 * `--dispatch-sum UF` appends the sum of UF's values to its sizes (a
 * tuned program over ragged rows dispatches on the packed rows,
 * rv_dispatch.sums).
 *
 * TUNED. `--records FILE` builds what `ravel tune FILE.rv --records FILE`
 * found, measuring nothing (src/tune, docs/tuning.md): the variants the
 * records' shapes voted for, and their decision tree emitted into NAME.c
 * as NAME_dispatch.
 *
 * NAME may carry a directory (out/model -> out/model.c, out/libmodel.so);
 * the directory must exist. Its last component, made a C identifier, is
 * the prefix of every exported symbol.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "driver/driver.h"
#include "jit/jit.h"
#include "tools.h"
#include "tune/tune.h"

/* The JIT's default flags (jit.c) less -march=native, which --march
 * replaces, and less -shared, which the call adds; then the compiler's own
 * (jit_compiler_flags). */
static const char *const aot_cflags[] = {
    "-O3", "-std=c11", "-fPIC", "-ffp-contract=fast", "-fno-math-errno", "-fopenmp-simd",
};

#define MAX_VARIANTS TUNE_MAX_VARIANTS /* the tree's and the specialized leaves */

typedef struct BuildArgs {
    const char *file;
    const char *out;
    const char *target;
    int shared;
    int nvariants;
    const char *variant[MAX_VARIANTS]; /* --variant FILE */
    int nrules;
    rv_dispatch_rule rule[MAX_VARIANTS * 4]; /* --dispatch RULE */
    int dispatch_extern;                     /* --dispatch extern */
    char dispatch_sum[64];                   /* --dispatch-sum UF; "" none */
    int threads;       /* --threads N: NAME_run's pool (1: serial, 0: every CPU) */
    const char *march; /* --march CPU for --shared; NULL: the compiler's default */
    const char *records;                     /* --records FILE */
    rv_variant_sizes at[MAX_VARIANTS];       /* --records: the sizes of specialized leaves */
} BuildArgs;

/* "SIZE=LO..HI[,SIZE=LO..HI]:V" into r; the size names point into s. */
static int parse_rule(char *s, rv_dispatch_rule *r) {
    memset(r, 0, sizeof *r);
    char *colon = strrchr(s, ':'), *end;
    if (!colon)
        return 0;
    *colon = 0;
    r->variant = (int)strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end)
        return 0;
    for (char *save, *c = strtok_r(s, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(c, '='), *dots = eq ? strstr(eq, "..") : NULL;
        if (!eq || !dots || r->nconds == RV_DISPATCH_MAX_CONDS)
            return 0;
        *eq = 0;
        r->conds[r->nconds].size = c;
        r->conds[r->nconds].lo = strtoll(eq + 1, &end, 10);
        if (end != dots)
            return 0;
        r->conds[r->nconds].hi = strtoll(dots + 2, &end, 10);
        if (end == dots + 2 || *end)
            return 0;
        r->nconds++;
    }
    return 1;
}

static int parse(int argc, char **argv, BuildArgs *a) {
    memset(a, 0, sizeof *a);
    a->target = "c";
    a->threads = 1;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "ravel build: %s needs a NAME\n", argv[i]);
                return 0;
            }
            a->out = argv[++i];
        } else if (strcmp(argv[i], "--shared") == 0) {
            a->shared = 1;
        } else if (strcmp(argv[i], "--variant") == 0 && i + 1 < argc) {
            if (a->nvariants == MAX_VARIANTS) {
                fprintf(stderr, "ravel build: more than %d variants\n", MAX_VARIANTS);
                return 0;
            }
            a->variant[a->nvariants++] = argv[++i];
        } else if (strcmp(argv[i], "--dispatch") == 0 && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "extern") == 0) {
                a->dispatch_extern = 1;
            } else if (a->nrules == RV_COUNT(a->rule) || !parse_rule(argv[i], &a->rule[a->nrules++])) {
                fprintf(stderr,
                        "ravel build: --dispatch %s: expected SIZE=LO..HI[,SIZE=LO..HI]:VARIANT "
                        "or extern\n",
                        argv[i]);
                return 0;
            }
        } else if (strcmp(argv[i], "--dispatch-sum") == 0 && i + 1 < argc) {
            snprintf(a->dispatch_sum, sizeof a->dispatch_sum, "%s", argv[++i]);
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (!isdigit((unsigned char)argv[i][0]) || *end || v > 4096) {
                fprintf(stderr,
                        "ravel build: --threads expects 0..4096 (1: serial, 0: every CPU), "
                        "got '%s'\n",
                        argv[i]);
                return 0;
            }
            a->threads = (int)v;
        } else if (strcmp(argv[i], "--march") == 0 && i + 1 < argc) {
            a->march = argv[++i];
            /* one word for the compiler's command line: x86-64-v3, native, ... */
            if (!*a->march || strspn(a->march, "abcdefghijklmnopqrstuvwxyz"
                                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+") !=
                                  strlen(a->march)) {
                fprintf(stderr, "ravel build: --march '%s' is not a CPU name\n", a->march);
                return 0;
            }
        } else if (strcmp(argv[i], "--records") == 0 && i + 1 < argc) {
            a->records = argv[++i];
        } else if (strcmp(argv[i], "--target") == 0 && i + 1 < argc) {
            a->target = argv[++i];
        } else if (strncmp(argv[i], "--target=", 9) == 0) {
            a->target = argv[i] + 9;
        } else if (argv[i][0] == '-') {
            static const char *const options[] = {"-o",        "--output",  "--shared", "--variant",
                                                  "--dispatch", "--threads", "--march",  "--target",
                                                  "--dispatch-sum"};
            tool_unknown("build", "option", argv[i], options, RV_COUNT(options));
            return 0;
        } else if (a->file) {
            fprintf(stderr, "ravel build: more than one input file ('%s' and '%s')\n", a->file,
                    argv[i]);
            return 0;
        } else {
            a->file = argv[i];
        }
    }
    if (!a->file || !a->out || !*a->out) {
        fprintf(stderr, "ravel build: %s\n", !a->file ? "no input file" : "no -o NAME");
        return 0;
    }
    size_t n = strlen(a->out);
    if (a->out[n - 1] == '/' || strcmp(a->out + (n > 1 ? n - 2 : 0), "/.") == 0 ||
        strcmp(a->out, ".") == 0) {
        fprintf(stderr, "ravel build: -o %s names a directory; give DIR/NAME\n", a->out);
        return 0;
    }
    if (a->records && (a->nvariants || a->nrules || a->dispatch_extern)) {
        fprintf(stderr, "ravel build: --records makes the variants and the dispatch; "
                        "no --variant or --dispatch with it\n");
        return 0;
    }
    if ((a->nrules || a->dispatch_extern) && a->nvariants < 2) {
        fprintf(stderr, "ravel build: --dispatch needs two --variant files or more\n");
        return 0;
    }
    if (strcmp(a->target, "c") != 0) {
        fprintf(stderr, "ravel build: unknown target '%s' (only 'c' today)\n", a->target);
        return 0;
    }
    return 1;
}

/* Splits out "dir/name[.c]" into dir ("." if none) and a C identifier. */
static void split_out(const char *out, Buf *dir, Buf *name) {
    const char *slash = strrchr(out, '/');
    const char *base = slash ? slash + 1 : out;
    if (slash)
        buf_printf(dir, "%.*s", (int)(slash == out ? 1 : slash - out), out);
    else
        buf_puts(dir, ".");
    size_t n = strlen(base);
    if (n > 2 && strcmp(base + n - 2, ".c") == 0)
        n -= 2;
    if (n == 0 || isdigit((unsigned char)base[0]))
        buf_putc(name, 'm');
    for (size_t i = 0; i < n; i++)
        buf_putc(name, isalnum((unsigned char)base[i]) ? base[i] : '_');
}

static int write_bytes(const char *dir, const char *file, const char *data, size_t len) {
    Buf p = {0};
    buf_printf(&p, "%s/%s", dir, file);
    rv_status st = base_write_file(buf_str(&p), data, len);
    if (st != RV_OK)
        tool_print_error(NULL);
    buf_free(&p);
    return st == RV_OK;
}

static int write_text(const char *dir, const char *file, const char *text) {
    return write_bytes(dir, file, text, strlen(text));
}

/* Writes ravel_rt.h to dir: the header embedded in the library (the one
 * the generated code was made for), or $RAVEL_INCLUDE_DIR's when a
 * developer overrides it, as the JIT does. */
static int copy_rt_header(const char *dir) {
    const char *inc = jit_include_override();
    if (!inc) {
        size_t len;
        const char *hdr = jit_rt_header(&len);
        return write_bytes(dir, "ravel_rt.h", hdr, len);
    }
    Buf p = {0};
    buf_printf(&p, "%s/ravel_rt.h", inc);
    char *text = NULL;
    size_t len = 0;
    rv_status st = base_read_file(buf_str(&p), &text, &len);
    buf_free(&p);
    if (st != RV_OK) {
        tool_print_error(NULL);
        return 0;
    }
    int ok = write_bytes(dir, "ravel_rt.h", text, len);
    base_free(text);
    return ok;
}

/* cc <flags> [-march=CPU] [-pthread] -shared -I dir -o dir/libNAME.so dir/NAME.c -lm */
static int compile_shared(const BuildArgs *a, const char *dir, const char *name) {
    const char *cc = getenv("RAVEL_CC");
    if (!cc || !*cc)
        cc = "cc";
    Arena *ar = arena_new();
    Vec(char *) argv = {0};
    for (const char *s = cc; *s;) {
        s += strspn(s, " \t");
        size_t n = strcspn(s, " \t");
        if (n)
            vec_push(&argv, arena_strndup(ar, s, n));
        s += n;
    }
    for (int i = 0; i < RV_COUNT(aot_cflags); i++)
        vec_push(&argv, arena_strdup(ar, aot_cflags[i]));
    const char *more[4];
    int nmore = jit_compiler_flags(cc, more, RV_COUNT(more));
    for (int i = 0; i < nmore; i++)
        vec_push(&argv, arena_strdup(ar, more[i]));
    if (a->march)
        vec_push(&argv, arena_printf(ar, "-march=%s", a->march));
    if (a->threads != 1)
        vec_push(&argv, arena_strdup(ar, "-pthread"));
    vec_push(&argv, arena_strdup(ar, "-shared"));
    vec_push(&argv, arena_printf(ar, "-I%s", dir));
    vec_push(&argv, arena_strdup(ar, "-o"));
    char *so = arena_printf(ar, "%s/lib%s.so", dir, name);
    vec_push(&argv, so);
    vec_push(&argv, arena_printf(ar, "%s/%s.c", dir, name));
    vec_push(&argv, arena_strdup(ar, "-lm"));
    vec_push(&argv, NULL);
    char *log = NULL;
    int code = 0;
    int ok = jit_run(argv.data, &log, &code) == RV_OK && code == 0;
    if (!ok) {
        char *cmd = jit_argv_string(argv.data);
        if (log)
            fprintf(stderr, "error: the C compiler failed (exit status %d): %s\n%s", code, cmd,
                    log);
        else
            fprintf(stderr, "error: cannot run the C compiler: %s: %s\n", cmd, rv_last_error());
        base_free(cmd);
    } else {
        printf("wrote %s\n", so);
    }
    base_free(log);
    vec_free(&argv);
    arena_free(ar);
    return ok;
}

/* --records: the tuned variants' schedules into text[] (a->nvariants of
 * them) and their dispatch as C into disp, from the records alone. */
static rv_status tuned(BuildArgs *a, rv_module *m, const char *name, char **text, Buf *disp) {
    char *src = NULL;
    size_t len;
    rv_status st = base_read_file(a->file, &src, &len);
    /* the records of the build's thread count (--threads; 0: every CPU) */
    TuneOptions o = {.records = a->records, .replay = true, .quiet = true, .threads = a->threads};
    TuneResult r = {0};
    if (st == RV_OK)
        st = tune_run(m, src, &o, &r);
    base_free(src);
    if (st != RV_OK)
        return st;
    const char *debug = getenv("RAVEL_DEBUG");
    if (debug && strstr(debug, "tune"))
        fprintf(stderr, "ravel build: %d records (%d stale), %d code keys in %.3fs\n", r.reused,
                r.stale, r.nkeys, r.key_seconds);
    if (r.nvariants > MAX_VARIANTS)
        r.nvariants = MAX_VARIANTS; /* tune_run keeps at most 4 by default */
    for (int v = 0; v < r.nvariants; v++) {
        text[v] = r.variant_sched[v];
        r.variant_sched[v] = NULL;
        a->at[v] = r.variant_at[v]; /* size names are the module's */
    }
    a->nvariants = r.nvariants;
    if (r.nvariants > 1) {
        a->dispatch_extern = 1;
        memcpy(a->dispatch_sum, r.sum_ufun, sizeof a->dispatch_sum);
        Buf fn = {0};
        buf_printf(&fn, "%s_tree", name);
        buf_printf(disp, "\n/* The dispatch `ravel tune` trained (--records %s). */\n", a->records);
        tune_result_dispatch_c(&r, m, buf_str(&fn), disp);
        buf_printf(disp, "\nint %s_dispatch(const int64_t *sizes, void *user) {\n"
                         "    (void)user;\n    return %s_tree_dispatch(sizes);\n}\n",
                   name, name);
        buf_free(&fn);
    }
    tune_result_free(&r);
    return RV_OK;
}

int cmd_build(int argc, char **argv) {
    BuildArgs a;
    if (!parse(argc, argv, &a)) {
        tool_command_help(stderr, "build");
        return 2;
    }
    rv_module *m;
    if (rv_module_load(a.file, &m) != RV_OK) {
        tool_print_error(NULL);
        return 1;
    }
    Buf dir = {0}, name = {0};
    split_out(a.out, &dir, &name);
    const char *src_name = strrchr(a.file, '/') ? strrchr(a.file, '/') + 1 : a.file;
    Kernel **ks = NULL;
    int n = 0, nv = a.nvariants ? a.nvariants : 1, first[MAX_VARIANTS] = {0};
    char *text[MAX_VARIANTS] = {0};
    CgUnit unit = {0};
    CgAot aot = {0};
    PlanDispatch pd = {0};
    int ok = 0;
    Buf disp = {0};
    rv_status st = ir_verify(m);
    if (st == RV_OK && a.records) {
        st = tuned(&a, m, buf_str(&name), text, &disp);
        nv = a.nvariants ? a.nvariants : 1;
    }
    for (int v = 0; st == RV_OK && !a.records && v < a.nvariants; v++) {
        size_t len;
        st = base_read_file(a.variant[v], &text[v], &len);
    }
    const char *sums[1] = {a.dispatch_sum};
    rv_dispatch d = {.nrules = a.nrules,
                     .rules = a.rule,
                     .nsums = a.dispatch_sum[0] != 0,
                     .sums = sums,
                     .variant_sizes = a.records ? a.at : NULL};
    if (st == RV_OK)
        st = driver_dispatch(m, nv, &d, &pd);
    pd.c_function = a.dispatch_extern;
    if (st == RV_OK)
        st = driver_lower_variants(m, nv, a.nvariants ? (const char *const *)text : NULL, pd.at,
                                   &ks, &n, first);
    if (st == RV_OK) {
        cg_c_module(ks, n, &unit);
        st = cg_c_aot(m, ks, n, nv, first, &pd, &unit, buf_str(&name), src_name, a.threads,
                      &aot);
    }
    for (int v = 0; v < a.nvariants; v++)
        base_free(text[v]);
    base_free(pd.rules);
    base_free(pd.sums);
    base_free(pd.at);
    if (st != RV_OK) {
        tool_print_error(NULL);
    } else {
        Buf cfile = {0}, hfile = {0};
        buf_printf(&cfile, "%s.c", buf_str(&name));
        buf_printf(&hfile, "%s.h", buf_str(&name));
        Buf c = {0};
        buf_printf(&c, "%s%s", aot.source, buf_str(&disp));
        ok = write_text(buf_str(&dir), buf_str(&cfile), buf_str(&c)) &&
             write_text(buf_str(&dir), buf_str(&hfile), aot.header) &&
             copy_rt_header(buf_str(&dir));
        if (ok)
            printf("wrote %s/%s, %s/%s, %s/ravel_rt.h\n", buf_str(&dir), buf_str(&cfile),
                   buf_str(&dir), buf_str(&hfile), buf_str(&dir));
        buf_free(&c);
        buf_free(&cfile);
        buf_free(&hfile);
        if (ok && a.shared)
            ok = compile_shared(&a, buf_str(&dir), buf_str(&name));
    }
    buf_free(&disp);
    cg_aot_free(&aot);
    cg_unit_free(&unit);
    base_free(ks);
    buf_free(&dir);
    buf_free(&name);
    rv_module_free(m);
    return ok ? 0 : 1;
}
