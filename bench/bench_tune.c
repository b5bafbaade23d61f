/*
 * bench/bench_tune.c — `ravel bench tune`: the kernels `ravel tune` found
 * (issue 15, docs/tuning.md) against the hand-written schedules, the
 * vendor libraries and per-shape tuning, in one run.
 *
 * Operators (bench/tune/OP.rv, one program per operator, T in 1..128):
 * dense Y = X·Wᵀ, X [16T, K], for the four BERT-base weights N×K =
 * 2304×768, 768×768, 3072×768, 768×3072, without and with bias+gelu;
 * batch_matmul NT and NN [192, T, 64] (DietCode Fig. 11). For each
 * operator, thread count and T, one JSON line times, interleaved
 * (timing.h):
 *
 *   tuned         the tuned program: the variants and decision tree the
 *                 committed records give (bench/records/OP.jsonl, replayed
 *                 as `ravel build --records` does: nothing is measured),
 *                 compiled as one program whose dispatch is the tree
 *   handwritten   today's hand-written schedules and rule
 *                 (ravel_kernels.c, rk_variant_for)
 *   openblas, onednn (and onednn_prepacked for dense)  as bench_dense and
 *                 bench_bmm run them; "vendor" is the fastest of them
 *   per_shape     at the sampled T (--per-shape-T): the same tuner
 *                 restricted to that one T (Ansor-style), with
 *                 --per-shape-trials measurements, its best kernel
 *
 * Other lines: "tune_op" per operator (the records, the variants, the
 * tree, its cost per call) and "tune_per_shape" per sampled T (the
 * per-shape run's wall, compile and measure time). The joint tuning time
 * of the committed records is in bench/records/OP.tune.json (written by
 * bench/tune/tune.sh). bench/summarize_tune.py prints the tables.
 *
 * T: by default 1..16 and every fourth T above (about 15 minutes), --full
 * every T in 1..128, --quick 1, 16 and 128; threads 1 and 2.
 *
 * Unlike the other drivers this one uses ravel's tuning layer
 * (src/tune/tune.h) besides the public API: replaying records and tuning
 * per shape are not in ravel.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baselines.h"
#include "common.h"
#include "ravel.h"
#include "tune/tune.h"

#define BATCH 192
#define MAX_T 128

typedef struct Op {
    const char *name;
    int kind, n, k; /* n, k: the dense weight's; 0 for bmm */
} Op;

static const Op ops[] = {
    {"dense_2304x768", RK_DENSE, 2304, 768},
    {"dense_768x768", RK_DENSE, 768, 768},
    {"dense_3072x768", RK_DENSE, 3072, 768},
    {"dense_768x3072", RK_DENSE, 768, 3072},
    {"dense_2304x768_gelu", RK_DENSE_BIAS_GELU, 2304, 768},
    {"dense_768x768_gelu", RK_DENSE_BIAS_GELU, 768, 768},
    {"dense_3072x768_gelu", RK_DENSE_BIAS_GELU, 3072, 768},
    {"dense_768x3072_gelu", RK_DENSE_BIAS_GELU, 768, 3072},
    {"bmm_nt", RK_BMM_NT, 0, 0},
    {"bmm_nn", RK_BMM_NN, 0, 0},
};
enum { NOPS = sizeof ops / sizeof ops[0] };

enum { V_OPENBLAS, V_ONEDNN, V_ONEDNN_PREPACKED, V_COUNT };
static const char *const vendor_names[V_COUNT] = {"openblas", "onednn", "onednn_prepacked"};

typedef struct Args {
    int threads[8], nthreads;
    int t[MAX_T], nt;
    int ps_t[MAX_T], nps; /* per-shape tuning's T */
    int ps_trials;
    const char *ops; /* comma list; NULL: all */
    const char *programs, *records;
    BenchOpts timing;
} Args;

static int is_dense(const Op *op) {
    return op->kind == RK_DENSE || op->kind == RK_DENSE_BIAS_GELU;
}

/* The GEMM of one batch element at T (ravel_kernels.h's m, n, k). */
static void dims(const Op *op, int t, int *m, int *n, int *k) {
    if (is_dense(op)) {
        *m = 16 * t, *n = op->n, *k = op->k;
    } else {
        *m = t;
        *n = op->kind == RK_BMM_NT ? t : 64;
        *k = op->kind == RK_BMM_NT ? 64 : t;
    }
}

static int int_list(const char *s, int *out, int cap) {
    int n = 0;
    while (*s && n < cap) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > MAX_T) {
            fprintf(stderr, "bench_tune: bad list '%s' (T in 1..%d)\n", s, MAX_T);
            exit(2);
        }
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_tune [--quick | --full] [--T list] [--threads 1,2] [--ops a,b]\n"
            "                  [--per-shape-T list] [--per-shape-trials N] [--min-time S]\n"
            "                  [--max-runs N] [--programs DIR] [--records DIR]\n");
    exit(2);
}

static void parse(int argc, char **argv, Args *a) {
    memset(a, 0, sizeof *a);
    a->timing = bench_default_opts();
    a->nthreads = int_list("1,2", a->threads, 8);
    a->programs = "bench/tune";
    a->records = "bench/records";
    a->ps_trials = 16;
    int quick = 0, full = 0, have_t = 0, have_ps = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--quick"))
            quick = 1;
        else if (!strcmp(o, "--full"))
            full = 1;
        else if (!v)
            usage();
        else if (++i, !strcmp(o, "--T"))
            a->nt = int_list(v, a->t, MAX_T), have_t = 1;
        else if (!strcmp(o, "--threads"))
            a->nthreads = int_list(v, a->threads, 8);
        else if (!strcmp(o, "--ops"))
            a->ops = v;
        else if (!strcmp(o, "--per-shape-T"))
            a->nps = int_list(v, a->ps_t, MAX_T), have_ps = 1;
        else if (!strcmp(o, "--per-shape-trials"))
            a->ps_trials = atoi(v);
        else if (!strcmp(o, "--min-time"))
            a->timing.min_time_s = atof(v);
        else if (!strcmp(o, "--max-runs"))
            a->timing.max_runs = atoi(v);
        else if (!strcmp(o, "--programs"))
            a->programs = v;
        else if (!strcmp(o, "--records"))
            a->records = v;
        else
            usage();
    }
    if (!have_t) {
        if (quick)
            a->nt = int_list("1,16,128", a->t, MAX_T);
        for (int t = 1; !quick && t <= MAX_T; t++)
            if (full || t <= 16 || t % 4 == 0)
                a->t[a->nt++] = t;
    }
    if (!have_ps)
        a->nps = int_list(quick ? "16" : "1,8,32,128", a->ps_t, MAX_T);
    if (quick)
        a->timing.min_time_s = a->timing.min_time_s < 0.1 ? a->timing.min_time_s : 0.1;
}

static int wanted(const Args *a, const char *name) {
    if (!a->ops)
        return 1;
    size_t n = strlen(name);
    for (const char *p = a->ops; (p = strstr(p, name)); p += n)
        if ((p == a->ops || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

/* ---- the tuned program ---- */

/* The tuned dispatcher: the specialized leaves, then the tree. */
static int result_dispatch(const int64_t *sizes, void *user) {
    return tune_result_pick(user, sizes, 1);
}

typedef struct Tuned {
    rv_module *m;
    char *text;
    TuneResult r; /* nvariants 0: no records */
} Tuned;

/* The operator's program; false with a message when it cannot be read. */
static int load_program(const Args *a, const Op *op, Tuned *tu) {
    memset(tu, 0, sizeof *tu);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.rv", a->programs, op->name);
    size_t len;
    if (base_read_file(path, &tu->text, &len) != RV_OK || rv_module_parse(path, tu->text, &tu->m) != RV_OK) {
        fprintf(stderr, "bench_tune: %s\n", rv_last_error());
        return 0;
    }
    return 1;
}

/* What the records of `threads` threads say (replayed: nothing measured,
 * as `ravel build --records --threads N` does); no variants with a
 * message when the records have none of that count. */
static void load_tuned(const Args *a, const Op *op, int threads, Tuned *tu) {
    char rec[512];
    snprintf(rec, sizeof rec, "%s/%s.jsonl", a->records, op->name);
    tune_result_free(&tu->r);
    TuneOptions o = {.records = rec, .replay = true, .quiet = true, .threads = threads};
    if (tune_run(tu->m, tu->text, &o, &tu->r) != RV_OK) {
        fprintf(stderr, "bench_tune: %s: %s\n", op->name, rv_last_error());
        memset(&tu->r, 0, sizeof tu->r);
    }
}

static void free_tuned(Tuned *tu) {
    tune_result_free(&tu->r);
    rv_module_free(tu->m);
    base_free(tu->text);
}

/* Compiles schedules as one program for `threads` (1: the caller only),
 * dispatched as r's dispatcher says, its specialized leaves compiled for
 * their sizes (r NULL: variant 0). */
static rv_program *compile(rv_module *m, int n, char *const *scheds, const TuneResult *r,
                           int threads) {
    rv_dispatch d = {
        .fn = result_dispatch, .user = (void *)r, .variant_sizes = r ? r->variant_at : NULL};
    rv_compile_options o = {.threads = threads, .cflags = getenv("RAVEL_BENCH_CFLAGS")};
    rv_program *p = NULL;
    if (rv_program_compile_variants(m, n, (const char *const *)scheds, r ? &d : NULL, &o, &p) !=
        RV_OK) {
        fprintf(stderr, "bench_tune: compile: %s\n", rv_last_error());
        return NULL;
    }
    return p;
}

static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Nanoseconds per call of the dispatcher (leaves, then tree) over every T
 * of the range, in this thread's CPU time (a shared machine's other jobs
 * do not count). */
static double dispatch_ns(const TuneResult *r) {
    volatile int sink = 0;
    int calls = 0;
    double t0 = thread_cpu_seconds();
    for (int rep = 0; rep < 20000; rep++)
        for (int64_t t = 1; t <= MAX_T; t++, calls++)
            sink += tune_result_pick(r, &t, 1);
    (void)sink;
    return (thread_cpu_seconds() - t0) * 1e9 / calls;
}

/* ---- per-shape tuning ---- */

typedef struct PerShape {
    int t;
    char *sched, *desc;
    double wall, compile, measure;
    int trials;
} PerShape;

static int tune_per_shape(const Args *a, const Op *op, const Tuned *tu, int t, int threads,
                          PerShape *ps) {
    memset(ps, 0, sizeof *ps);
    ps->t = t;
    TuneShape sh = {.v = {t}};
    TuneOptions o = {.trials = a->ps_trials,
                     .shapes = &sh,
                     .nshapes = 1,
                     .shapes_only = true,
                     .quiet = true,
                     .max_variants = 1,
                     .threads = threads,
                     .specialize = -1 /* its one kernel is compiled generic */};
    TuneResult r;
    double t0 = bench_now();
    if (tune_run(tu->m, tu->text, &o, &r) != RV_OK) {
        fprintf(stderr, "bench_tune: per-shape tuning of %s at T=%d: %s\n", op->name, t,
                rv_last_error());
        return 0;
    }
    ps->wall = bench_now() - t0;
    ps->compile = r.compile_seconds;
    ps->measure = r.measure_seconds;
    ps->trials = r.measured;
    ps->sched = r.variant_sched[0], r.variant_sched[0] = NULL;
    ps->desc = r.variant_desc[0], r.variant_desc[0] = NULL;
    tune_result_free(&r);
    printf("{\"bench\": \"tune_per_shape\", \"op\": \"%s\", \"T\": %d, \"threads\": %d, "
           "\"trials\": %d, \"wall_s\": %.2f, \"compile_s\": %.2f, \"measure_s\": %.2f, "
           "\"kernel\": \"%s\"}\n",
           op->name, t, threads, ps->trials, ps->wall, ps->compile, ps->measure, ps->desc);
    fflush(stdout);
    return 1;
}

/* ---- the vendors ---- */

typedef struct VendorCall {
    const Op *op;
    int m, n, k;
    const float *a, *b, *bias;
    float *c;
    BlDnnl *dnnl;
    int c_epilogue;
} VendorCall;

static void run_vendor(void *ctx) {
    VendorCall *v = ctx;
    if (v->dnnl)
        bl_dnnl_run(v->dnnl);
    else if (is_dense(v->op))
        bl_openblas_dense(v->m, v->n, v->k, v->a, v->b, v->c);
    else
        bl_openblas_batch(BATCH, v->m, v->n, v->k, v->op->kind == RK_BMM_NT, v->a, v->b, v->c);
    if (v->c_epilogue)
        bl_bias_gelu(v->m, v->n, v->c, v->bias);
}

/* Vendor `which` for op at (m, n, k); NULL ctx when it does not apply. */
static int vendor_setup(int which, const Op *op, int m, int n, int k, const float *a,
                        const float *b, const float *bias, float *c, VendorCall *v) {
    int gelu = op->kind == RK_DENSE_BIAS_GELU;
    *v = (VendorCall){op, m, n, k, a, b, bias, c, NULL, gelu};
    if (which == V_ONEDNN_PREPACKED && !is_dense(op))
        return 0;
    if (which != V_OPENBLAS) {
        BlDnnlSpec s = {.batch = is_dense(op) ? 0 : BATCH, .m = m, .n = n, .k = k,
                        .b_trans = op->kind != RK_BMM_NN};
        if (which == V_ONEDNN_PREPACKED)
            s.prepack = 1, s.bias_gelu = gelu, v->c_epilogue = 0;
        v->dnnl = bl_dnnl_new(&s, a, b, bias, c);
    }
    return 1;
}

/* ---- one operator ---- */

static void json_ms(const char *key, const BenchStats *s) {
    if (s->runs)
        printf(", \"%s_ms\": %.4f", key, s->median_ms);
    else
        printf(", \"%s_ms\": null", key);
}

/* Largest relative difference of got from want, scaled by want's largest magnitude. */
static double rel_diff(const float *got, const float *want, size_t n) {
    double top = 1e-30, d = 0;
    for (size_t i = 0; i < n; i++)
        top = fmax(top, fabs(want[i]));
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)got[i] - want[i]));
    return d / top;
}

/* The records' variants and tree at `threads` threads: a "tune_op" line. */
static void print_tuned(const Op *op, int threads, const TuneResult *r) {
    printf("{\"bench\": \"tune_op\", \"op\": \"%s\", \"threads\": %d, \"records\": %d, "
           "\"variants\": [",
           op->name, threads, r->reused);
    for (int v = 0; v < r->nvariants; v++)
        printf("%s\"%s\"", v ? ", " : "", r->variant_desc[v]);
    printf("], \"tree_leaves\": %d", r->nvariants ? tune_dtree_leaves(&r->tree) : 0);
    if (r->nvariants)
        printf(", \"dispatch_ns\": %.2f}\n", dispatch_ns(r));
    else
        printf(", \"dispatch_ns\": null}\n");
    fflush(stdout);
}

static void bench_op(const Args *a, const Op *op) {
    Tuned tu;
    if (!load_program(a, op, &tu))
        return;
    TuneResult *r = &tu.r;
    int tmax = 0;
    for (int i = 0; i < a->nt; i++)
        tmax = a->t[i] > tmax ? a->t[i] : tmax;
    for (int i = 0; i < a->nps; i++)
        tmax = a->ps_t[i] > tmax ? a->ps_t[i] : tmax;
    int mm, nn, kk;
    dims(op, tmax, &mm, &nn, &kk);
    size_t batch = is_dense(op) ? 1 : BATCH;
    size_t na = batch * (size_t)mm * kk, nb = batch * (size_t)nn * kk, nc = batch * (size_t)mm * nn;
    float *x = bench_alloc(na), *w = bench_alloc(nb), *bias = bench_alloc(nn > 0 ? nn : 1);
    float *y_rv = bench_alloc(nc), *y_bl = bench_alloc(nc);
    bench_fill(x, na, 1), bench_fill(w, nb, 2), bench_fill(bias, (size_t)nn, 3);
    const char *size = "T";
    int div = is_dense(op) ? 16 : 1;

    for (int ti = 0; ti < a->nthreads; ti++) {
        int th = a->threads[ti];
        /* records, variants and per-shape tuning of this thread count */
        load_tuned(a, op, th, &tu);
        print_tuned(op, th, r);
        PerShape ps[MAX_T];
        int nps = 0;
        for (int i = 0; i < a->nps; i++)
            nps += tune_per_shape(a, op, &tu, a->ps_t[i], th, &ps[nps]);
        bl_set_threads(th);
        RavelKernelShape rs = {op->kind, is_dense(op) ? 0 : BATCH, 0, op->n, op->k, th};
        rv_program *tp = r->nvariants ? compile(tu.m, r->nvariants, r->variant_sched, r, th) : NULL;
        RavelKernel *tuned = tp ? ravel_kernel_wrap(tu.m, tp, &rs, size, div, "tuned") : NULL;
        rv_program *pp[MAX_T] = {0};
        RavelKernel *pk[MAX_T] = {0};
        for (int i = 0; i < nps; i++) {
            pp[i] = compile(tu.m, 1, &ps[i].sched, NULL, th);
            pk[i] = pp[i] ? ravel_kernel_wrap(tu.m, pp[i], &rs, size, div, "per_shape") : NULL;
        }
        for (int i = 0; i < a->nt; i++) {
            int t = a->t[i], m, n, k;
            dims(op, t, &m, &n, &k);
            RavelKernelShape hs = {op->kind, is_dense(op) ? 0 : BATCH, m, n, k, th};
            RavelKernel *hand = ravel_kernel_for(&hs);
            RavelCall calls[3] = {{tuned, {x, w, bias, y_rv, hs.batch, m, n, k}},
                                  {hand, {x, w, bias, y_rv, hs.batch, m, n, k}},
                                  {NULL, {x, w, bias, y_rv, hs.batch, m, n, k}}};
            if (op->kind != RK_DENSE_BIAS_GELU)
                for (int q = 0; q < 3; q++)
                    calls[q].args.bias = NULL;
            int psi = -1;
            for (int q = 0; q < nps; q++)
                if (ps[q].t == t && pk[q])
                    psi = q, calls[2].kernel = pk[q];
            VendorCall vc[V_COUNT];
            BenchSide sides[3 + V_COUNT];
            memset(sides, 0, sizeof sides);
            for (int q = 0; q < 3; q++)
                if (calls[q].kernel)
                    sides[q].fn = bench_ravel_call, sides[q].ctx = &calls[q];
            for (int v = 0; v < V_COUNT; v++)
                if (vendor_setup(v, op, m, n, k, x, w, bias, y_bl, &vc[v]))
                    sides[3 + v].fn = run_vendor, sides[3 + v].ctx = &vc[v];
            /* the tuned kernel against OpenBLAS (the tuner checked every
             * kernel against the interpreter; this checks the dispatch) */
            double diff = -1;
            if (tuned) {
                size_t cnt = batch * (size_t)m * n;
                bench_ravel_call(&calls[0]);
                run_vendor(&vc[V_OPENBLAS]);
                diff = rel_diff(y_rv, y_bl, cnt);
            }
            bench_sides(&a->timing, sides, 3 + V_COUNT);
            int best = -1;
            for (int v = 0; v < V_COUNT; v++)
                if (sides[3 + v].stats.runs &&
                    (best < 0 || sides[3 + v].stats.median_ms < sides[3 + best].stats.median_ms))
                    best = v;
            int64_t tv = t;
            printf("{\"bench\": \"tune\", \"config\": {\"op\": \"%s\", \"T\": %d, \"threads\": %d, "
                   "\"batch\": %d, \"M\": %d, \"N\": %d, \"K\": %d}",
                   op->name, t, th, hs.batch, m, n, k);
            json_ms("tuned", &sides[0].stats);
            json_ms("handwritten", &sides[1].stats);
            json_ms("per_shape", &sides[2].stats);
            for (int v = 0; v < V_COUNT; v++)
                json_ms(vendor_names[v], &sides[3 + v].stats);
            printf(", \"vendor\": \"%s\", \"vendor_ms\": %.4f", best >= 0 ? vendor_names[best] : "",
                   best >= 0 ? sides[3 + best].stats.median_ms : 0.0);
            printf(", \"tuned_variant\": \"%s\", \"handwritten_variant\": \"%s\"",
                   tuned ? r->variant_desc[tune_result_pick(r, &tv, 1)] : "",
                   hand ? hand->name : "");
            if (psi >= 0)
                printf(", \"per_shape_variant\": \"%s\"", ps[psi].desc);
            double flops = 2.0 * batch * m * n * k;
            if (sides[0].stats.runs)
                printf(", \"tuned_gflops\": %.2f", flops / sides[0].stats.median_ms * 1e-6);
            printf(", \"tuned_diff\": %.2e}\n", diff);
            fflush(stdout);
            for (int v = 0; v < V_COUNT; v++)
                bl_dnnl_free(vc[v].dnnl);
            ravel_kernel_free(hand);
        }
        ravel_kernel_free(tuned);
        rv_program_free(tp);
        for (int i = 0; i < nps; i++) {
            ravel_kernel_free(pk[i]);
            rv_program_free(pp[i]);
            base_free(ps[i].sched);
            base_free(ps[i].desc);
        }
    }
    free(x), free(w), free(bias), free(y_rv), free(y_bl);
    free_tuned(&tu);
}

int main(int argc, char **argv) {
    bl_init(argc, argv);
    Args a;
    parse(argc, argv, &a);
    Buf hw = {0};
    tune_hw_machine_id(tune_hw(), &hw);
    fprintf(stderr, "bench_tune: %s; machine: %s\n", bl_describe(), buf_str(&hw));
    buf_free(&hw);
    for (int i = 0; i < NOPS; i++)
        if (wanted(&a, ops[i].name))
            bench_op(&a, &ops[i]);
    return 0;
}
