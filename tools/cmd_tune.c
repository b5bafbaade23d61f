/*
 * cmd_tune.c — `ravel tune FILE.rv`: the shape-generic auto-scheduler of
 * src/tune (docs/tuning.md) on a program's tunable stage, over every
 * shape of its size range.
 *
 * OUTPUT. With -o OUT it writes the tuned program as files a reader and
 * `ravel build` take as they are:
 *   OUT.rv           the definitions and variant 0's schedule (the kernel
 *                    most shapes chose), so it runs with `ravel run`; the
 *                    other variants and the dispatcher are in its comments;
 *   OUT.vN.sched     each variant's schedule blocks (`ravel build --variant`);
 *   OUT_dispatch.c   the decision tree as NAME_dispatch (`ravel build
 *                    --dispatch extern`), also listed in OUT.rv.
 * Progress (trials, best GFLOP/s over the shapes, ETA) goes to stderr.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"
#include "tools.h"
#include "tune/tune.h"

typedef struct TuneArgs {
    const char *file, *out, *shapes, *plot;
    TuneOptions o;
    bool hw;
} TuneArgs;

static int int_opt(const char *v, int lo, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > 1000000)
        return 0;
    *out = (int)x;
    return 1;
}

static int parse(int argc, char **argv, TuneArgs *a) {
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int n = 0;
        if (strcmp(o, "--hw") == 0) {
            a->hw = true;
            continue;
        }
        if (strcmp(o, "--quiet") == 0) {
            a->o.quiet = true;
            continue;
        }
        if (strcmp(o, "--shapes-only") == 0) {
            a->o.shapes_only = true;
            continue;
        }
        if (o[0] != '-') {
            if (a->file) {
                fprintf(stderr, "ravel tune: more than one file\n");
                return 0;
            }
            a->file = o;
            continue;
        }
        if (!v) {
            fprintf(stderr, "ravel tune: %s needs a value\n", o);
            return 0;
        }
        i++;
        if (strcmp(o, "-o") == 0)
            a->out = v;
        else if (strcmp(o, "--plot") == 0)
            a->plot = v;
        else if (strcmp(o, "--records") == 0)
            a->o.records = v;
        else if (strcmp(o, "--shapes") == 0)
            a->shapes = v;
        else if (strcmp(o, "--trials") == 0 && int_opt(v, 1, &n))
            a->o.trials = n;
        else if (strcmp(o, "--batch") == 0 && int_opt(v, 1, &n))
            a->o.batch = n;
        else if (strcmp(o, "--variants") == 0 && int_opt(v, 1, &n))
            a->o.max_variants = n;
        else if (strcmp(o, "--specialize") == 0 && int_opt(v, 0, &n))
            a->o.specialize = n > 0 ? n : -1;
        else if (strcmp(o, "--verify") == 0 && int_opt(v, 0, &n))
            a->o.verify = n > 0 ? n : -1;
        else if (strcmp(o, "--threads") == 0 && int_opt(v, 0, &n))
            a->o.threads = n;
        else if (strcmp(o, "--seed") == 0 && int_opt(v, 0, &n))
            a->o.seed = (uint64_t)n;
        else if (strcmp(o, "--timeout") == 0 && int_opt(v, 1, &n))
            a->o.timeout = n;
        else {
            fprintf(stderr, "ravel tune: bad option %s %s\n", o, v);
            return 0;
        }
    }
    if (!a->file && !a->hw) {
        fprintf(stderr, "ravel tune: no .rv file\n");
        return 0;
    }
    return 1;
}

/* --shapes FILE: one shape per line, the values of the size variables in
 * declaration order, optionally followed by a weight (its frequency); a
 * line repeated counts again, so a list of observed sizes is a
 * distribution as it is. '#' starts a comment. For packed rows the outer
 * size's place holds their sum, in the sum's range (docs/tuning.md). */
static int read_shapes(const char *path, rv_module *m, TuneShape **shapes, double **w, int *n) {
    char *text;
    size_t len;
    if (base_read_file(path, &text, &len) != RV_OK) {
        tool_print_error(NULL);
        return 0;
    }
    int nsz = rv_module_num_sizes(m), cap = 0, line = 0;
    TuneStage stage;
    bool staged = tune_space_analyze(m, &stage) == RV_OK;
    base_error_clear(); /* a program with nothing to tune fails in tune_run, said there */
    *n = 0;
    *shapes = NULL;
    *w = NULL;
    for (char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        line++;
        char *hash = strchr(p, '#');
        if (hash)
            *hash = '\0';
        double vals[9];
        int k = 0;
        char *end;
        for (char *q = p; k < 9;) {
            double x = strtod(q, &end);
            if (end == q)
                break;
            vals[k++] = x;
            q = end;
        }
        while (*end == ' ' || *end == '\t' || *end == '\r')
            end++;
        if (k == 0 && *end == '\0')
            continue;
        if (*end || (k != nsz && k != nsz + 1) || (k == nsz + 1 && vals[nsz] <= 0)) {
            fprintf(stderr, "%s:%d: error: expected %d size value(s) and an optional weight\n",
                    path, line, nsz);
            base_free(text);
            return 0;
        }
        TuneShape sh = {0};
        for (int i = 0; i < nsz; i++) {
            const Size *sz = rv_module_size_at(m, i);
            int64_t lo = sz->lo, hi = sz->hi;
            char name[80];
            snprintf(name, sizeof name, "%s", sz->name);
            if (staged && sz == stage.rows_outer) { /* the packed rows' sum */
                lo = sz->lo * stage.len_lo;
                hi = sz->hi * stage.len_hi;
                snprintf(name, sizeof name, "sum(%s)", rv_ufun_name(stage.rows_uf));
            }
            sh.v[i] = (int64_t)vals[i];
            if ((double)sh.v[i] != vals[i] || sh.v[i] < lo || sh.v[i] > hi) {
                fprintf(stderr, "%s:%d: error: %s = %g is outside its range %lld..%lld\n", path,
                        line, name, vals[i], (long long)lo, (long long)hi);
                base_free(text);
                return 0;
            }
        }
        double wt = k == nsz + 1 ? vals[nsz] : 1;
        int s = 0;
        while (s < *n && memcmp((*shapes)[s].v, sh.v, sizeof sh.v) != 0)
            s++;
        if (s == *n) {
            if (*n == cap) {
                cap = cap ? 2 * cap : 64;
                *shapes = base_xrealloc(*shapes, sizeof **shapes * (size_t)cap);
                *w = base_xrealloc(*w, sizeof **w * (size_t)cap);
            }
            (*shapes)[s] = sh;
            (*w)[s] = 0;
            (*n)++;
        }
        (*w)[s] += wt;
    }
    base_free(text);
    if (*n == 0) {
        fprintf(stderr, "%s: error: no shapes\n", path);
        return 0;
    }
    return 1;
}

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) == EOF || fclose(f) != 0) {
        fprintf(stderr, "ravel tune: cannot write %s: %s\n", path, strerror(errno));
        return 0;
    }
    return 1;
}

/* Appends text with every line commented out. */
static void commented(Buf *b, const char *text) {
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        buf_printf(b, "#   %.*s\n", (int)n, p);
        p += n + (e != NULL);
    }
}

static int write_outputs(const TuneArgs *a, rv_module *m, const TuneResult *r) {
    /* the definitions without the file's own schedule */
    int saved = m->scheds.len;
    m->scheds.len = 0;
    char *defs = rv_module_print(m);
    m->scheds.len = saved;
    const char *base = strrchr(a->out, '/');
    base = base ? base + 1 : a->out;
    /* the C names: `ravel build -o NAME` makes NAME a C identifier alike */
    Buf id = {0}, tree = {0}, disp = {0}, rv = {0}, path = {0};
    for (const char *p = base; *p; p++)
        buf_putc(&id, isalnum((unsigned char)*p) ? *p : '_');
    buf_printf(&tree, "%s_tree", buf_str(&id));
    tune_result_dispatch_c(r, m, buf_str(&tree), &disp);
    buf_printf(&disp, "\n/* the dispatch `ravel build --dispatch extern` calls */\n"
                      "int %s_dispatch(const int64_t *sizes, void *user) {\n"
                      "    (void)user;\n    return %s_dispatch(sizes);\n}\n",
               buf_str(&id), buf_str(&tree));
    buf_printf(&rv, "# %s.rv — %s tuned by `ravel tune` (docs/tuning.md): %d kernel variant(s)\n"
                    "# chosen over %d shapes, dispatched by a decision tree over the sizes%s%s%s.\n"
                    "# This file runs as is with variant 0. All variants:\n"
                    "#   ravel build %s.rv -o NAME",
               base, a->file, r->nvariants, r->nshapes, r->sum_ufun[0] ? " and sum(" : "",
               r->sum_ufun, r->sum_ufun[0] ? ")" : "", base);
    for (int v = 0; v < r->nvariants; v++)
        buf_printf(&rv, " --variant %s.v%d.sched", base, v);
    if (r->sum_ufun[0])
        buf_printf(&rv, " --dispatch-sum %s", r->sum_ufun);
    buf_printf(&rv, " --dispatch extern\n#   (and compile %s_dispatch.c with NAME.c, NAME = %s)\n",
               base, base);
    if (r->nspec) /* --variant files carry no sizes: --records builds the leaves specialized */
        buf_printf(&rv,
                   "#   builds the %d specialized leaves generic; `ravel build --records`\n"
                   "#   compiles them for their sizes\n",
                   r->nspec);
    buf_puts(&rv, "#\n");
    for (int v = 0; v < r->nvariants; v++) {
        int nshapes = 0;
        for (int s = 0; s < r->nshapes; s++)
            nshapes += r->shape_variant[s] == v;
        buf_printf(&rv, "# variant %d: %s (chosen at %d shapes)\n", v, r->variant_desc[v], nshapes);
    }
    buf_printf(&rv, "#\n# the dispatcher:\n");
    commented(&rv, buf_str(&disp));
    buf_printf(&rv, "\n%s\n# variant 0: %s\n%s", defs, r->variant_desc[0], r->variant_sched[0]);
    for (int v = 1; v < r->nvariants; v++) {
        buf_printf(&rv, "\n# variant %d: %s\n", v, r->variant_desc[v]);
        commented(&rv, r->variant_sched[v]);
    }
    int ok = 1;
    buf_printf(&path, "%s.rv", a->out);
    ok &= write_file(buf_str(&path), buf_str(&rv));
    for (int v = 0; ok && v < r->nvariants; v++) {
        buf_free(&path);
        buf_printf(&path, "%s.v%d.sched", a->out, v);
        ok &= write_file(buf_str(&path), r->variant_sched[v]);
    }
    buf_free(&path);
    buf_printf(&path, "%s_dispatch.c", a->out);
    Buf c = {0};
    buf_printf(&c, "#include <stdint.h>\n\n%s", buf_str(&disp));
    ok &= ok && write_file(buf_str(&path), buf_str(&c));
    buf_free(&c);
    buf_free(&path);
    buf_free(&rv);
    buf_free(&disp);
    buf_free(&tree);
    buf_free(&id);
    rv_free(defs);
    return ok;
}

/* --plot FILE.png: the tuning curve, best GFLOP/s so far against trials
 * (every measurement, those from the records first), one line per shape
 * measured, drawn by gnuplot from a data file of one block per shape. */
static bool have_gnuplot(void) {
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

static int plot(const TuneResult *r, rv_module *m, const char *file, const char *png) {
    char data[] = "/tmp/ravel-tune-plot-XXXXXX";
    int fd = mkstemp(data);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "ravel tune: --plot: cannot write its data: %s\n", strerror(errno));
        return 0;
    }
    Buf titles = {0};
    int blocks = 0;
    for (int s = 0; s < r->nshapes; s++) {
        double best = 0;
        bool any = false;
        for (int i = 0; i < r->ntrials; i++) {
            if (r->trials[i].shape != s)
                continue;
            if (!any)
                fprintf(f, "%s%d 0\n", blocks ? "\n\n" : "", i);
            any = true;
            best = r->trials[i].gflops > best ? r->trials[i].gflops : best;
            fprintf(f, "%d %g\n", i + 1, best);
        }
        if (!any)
            continue;
        fprintf(f, "%d %g\n", r->ntrials, best);
        buf_puts(&titles, blocks++ ? " " : "");
        tune_shape_format(&r->shapes[s], m, &titles);
    }
    fclose(f);
    FILE *g = popen("gnuplot", "w");
    int ok = g != NULL;
    if (g) {
        fprintf(g,
                "set terminal png size 1100,650 noenhanced\nset output '%s'\n"
                "set title 'ravel tune %s: best GFLOP/s per shape'\n"
                "set xlabel 'trials'\nset ylabel 'best GFLOP/s'\nset key outside right\n"
                "titles = '%s'\n"
                "plot for [i=0:%d] '%s' index i using 1:2 with steps title word(titles, i+1)\n",
                png, file, buf_str(&titles), blocks - 1, data);
        ok = pclose(g) == 0;
    }
    unlink(data);
    buf_free(&titles);
    if (!ok || blocks == 0) {
        fprintf(stderr, "ravel tune: --plot: gnuplot could not draw %s%s\n", png,
                blocks ? "" : " (no measurement)");
        return 0;
    }
    printf("wrote %s\n", png);
    return 1;
}

static void summary(const TuneResult *r, rv_module *m) {
    printf("tuned %d shapes with %d variant(s): %d measurements (%d from the records), "
           "%d wrong and %d failed candidate(s); %.1fs (compile %.1fs, measure %.1fs)\n",
           r->nshapes, r->nvariants, r->measured + r->reused, r->reused, r->wrong, r->failed,
           r->total_seconds,
           r->compile_seconds, r->measure_seconds);
    if (r->verify_measured)
        printf("verified the dispatcher: %d measurements of kernels at shapes where they were "
               "never measured (%d of them each kind at the anchor shapes; %.1fs)\n",
               r->verify_measured, r->kinds_measured, r->verify_seconds);
    if (r->stale)
        printf("%d stale record(s): their code is not the candidate's today (hints for the "
               "model); %d of the dispatcher's kernels and their rivals timed again\n",
               r->stale, r->retimed);
    if (r->nkeys)
        printf("code keys of %d candidate(s) and leaves: %.2fs (%.2f ms each)\n", r->nkeys,
               r->key_seconds, 1e3 * r->key_seconds / r->nkeys);
    if (r->close_retimed)
        printf("%d timing(s) again of kernels within %.0f%% of their rival at a shape\n",
               r->close_retimed, 100 * (TUNE_CLOSE_CALL - 1));
    if (r->spec_measured + r->spec_reused)
        printf("specialized %d leaf(s): %d measurements of candidates compiled for one shape "
               "(%d from the records)\n",
               r->nspec, r->spec_measured + r->spec_reused, r->spec_reused);
    for (int v = 0; v < r->nvariants; v++)
        printf("  variant %d: %s\n", v, r->variant_desc[v]);
    /* shapes where the variant changes, so a long range prints short */
    for (int s = 0; s < r->nshapes; s++) {
        if (s > 0 && s + 1 < r->nshapes && r->shape_variant[s] == r->shape_variant[s - 1] &&
            r->shape_variant[s] == r->shape_variant[s + 1])
            continue;
        Buf sh = {0};
        tune_shape_format(&r->shapes[s], m, &sh);
        printf("  %s: variant %d, %.2f GFLOP/s\n", buf_str(&sh), r->shape_variant[s],
               r->shape_gflops[s]);
        buf_free(&sh);
    }
}

int cmd_tune(int argc, char **argv) {
    TuneArgs a = {0};
    if (!parse(argc, argv, &a)) {
        tool_command_help(stderr, "tune");
        return 2;
    }
    if (a.hw) {
        Buf b = {0};
        tune_hw_format(tune_hw(), &b);
        /* what tuning records are keyed by (records.c's "machine") */
        buf_puts(&b, "machine class:    ");
        tune_hw_machine_id(tune_hw(), &b);
        buf_putc(&b, '\n');
        fputs(buf_str(&b), stdout);
        buf_free(&b);
        if (!a.file)
            return 0;
    }
    if (a.plot && !have_gnuplot()) {
        fprintf(stderr, "ravel tune: --plot needs gnuplot, which is not installed (Debian: "
                        "apt-get install gnuplot-nox; bench/setup.sh installs it)\n");
        return 1;
    }
    char *text;
    size_t len;
    rv_module *m = NULL;
    if (base_read_file(a.file, &text, &len) != RV_OK) {
        tool_print_error(NULL);
        return 1;
    }
    if (rv_module_parse(a.file, text, &m) != RV_OK) {
        tool_print_error(NULL);
        base_free(text);
        return 1;
    }
    TuneShape *shapes = NULL;
    double *w = NULL;
    int rc = 0;
    if (a.shapes && !read_shapes(a.shapes, m, &shapes, &w, &a.o.nshapes))
        rc = 1;
    a.o.shapes = shapes;
    a.o.weights = w;
    TuneResult r;
    if (rc == 0 && tune_run(m, text, &a.o, &r) != RV_OK) {
        tool_print_error("ravel tune");
        rc = 1;
    } else if (rc == 0) {
        summary(&r, m);
        if (a.out && !write_outputs(&a, m, &r))
            rc = 1;
        if (a.plot && !plot(&r, m, a.file, a.plot))
            rc = 1;
        tune_result_free(&r);
    }
    base_free(shapes);
    base_free(w);
    base_free(text);
    rv_module_free(m);
    return rc;
}
