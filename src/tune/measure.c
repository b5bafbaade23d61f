/*
 * measure.c — measuring candidates on the real machine (issue 15): a
 * batch of candidates compiled as the variants of one program (one C
 * translation unit, one run of the C compiler for all of them, since the
 * compiler's start-up and the JIT's cache are per unit), each checked
 * against the interpreter and timed at a shape.
 *
 * The dispatch of a batch is a C function returning the variant in the
 * batch's `pick`, so the tuner chooses which candidate a run executes;
 * the runs of a batch never overlap.
 *
 * A candidate whose results differ from the interpreter's is a bug in
 * ravel (every legal schedule computes the same values), reported by the
 * caller and never a candidate; the tolerance is the one `ravel run
 * --check` uses (docs/ir.md, "Evaluation semantics").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interp/interp.h"
#include "ir/ir.h"
#include "runtime/program.h"
#include "tune/tune.h"

static int pick_variant(const int64_t *sizes, void *user) {
    (void)sizes;
    return *(const int *)user;
}

rv_status tune_batch_compile(rv_module *m, int n, const char *const *scheds, int threads,
                             TuneBatch *out) {
    return tune_batch_compile_at(m, n, scheds, NULL, threads, out);
}

rv_status tune_batch_compile_at(rv_module *m, int n, const char *const *scheds,
                                const rv_variant_sizes *at, int threads, TuneBatch *out) {
    memset(out, 0, sizeof *out);
    out->pick = base_xcalloc(1, sizeof *out->pick);
    out->n = n;
    rv_dispatch d = {.fn = pick_variant, .user = out->pick, .variant_sizes = at};
    rv_compile_options o = {.threads = threads};
    rv_status st = rv_program_compile_variants(m, n, scheds, &d, &o, &out->prog);
    if (st != RV_OK)
        tune_batch_free(out);
    return st;
}

void tune_batch_free(TuneBatch *b) {
    rv_program_free(b->prog);
    base_free(b->pick);
    memset(b, 0, sizeof *b);
}

/* Lengths in [lo, hi] summing to `packed` over n rows: each lo, then the
 * rest one at a time to rows drawn by `seed` that have room (the
 * caller's shape is feasible: n * lo <= packed <= n * hi). */
static void spread_lengths(int64_t *len, int64_t n, int64_t lo, int64_t hi, int64_t packed,
                           uint64_t seed) {
    uint64_t r = seed * 0x9E3779B97F4A7C15ull + 1;
    int64_t rest = packed - n * lo;
    for (int64_t i = 0; i < n; i++)
        len[i] = lo;
    for (int64_t i = 0; rest > 0; i = (i + 1) % n) {
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        int64_t room = hi - len[i], add = room < rest ? room : rest;
        add = add > 0 ? (int64_t)(r % (uint64_t)add) + 1 : 0;
        len[i] += add;
        rest -= add;
    }
}

void tune_shape_format(const TuneShape *sh, rv_module *m, Buf *out) {
    for (int i = 0; i < rv_module_num_sizes(m); i++)
        buf_printf(out, "%s%s=%lld", i ? "," : "", rv_size_name(rv_module_size_at(m, i)),
                   (long long)sh->v[i]);
    if (sh->rows_uf)
        buf_printf(out, ",sum(%s)=%lld", rv_ufun_name(sh->rows_uf), (long long)sh->quantity);
    if (sh->group)
        buf_printf(out, ",%s/%s=%lld", sh->group->st->nodes->name, sh->group->st->nbatch->name,
                   (long long)sh->quantity);
}

/* sh->quantity chains of TUNE_LEVELS nodes as the group's structure
 * (chains bind to trees and DAGs too); the data columns are left to
 * rv_bindings_randomize. */
static rv_status bind_levels(rv_bindings *b, const TuneShape *sh) {
    const Structure *st = sh->group->st;
    rv_structs *bs = rv_structs_new(st->kind, st->max_children, st->ndata);
    rv_status st_ = bs ? RV_OK : base_error_status();
    for (int64_t c = 0; st_ == RV_OK && c < sh->quantity; c++)
        st_ = rv_structs_add_sequence(bs, TUNE_LEVELS, NULL);
    rv_linear lin = {0};
    if (st_ == RV_OK)
        st_ = rv_linearize(bs, &lin);
    if (st_ == RV_OK)
        st_ = interp_bindings_set_linear(b, st, &lin, false);
    rv_linear_free(&lin);
    rv_structs_free(bs);
    return st_;
}

bool tune_size_set_by_levels(const Structure *st, const Size *z) {
    return st && (z == st->nodes || z == st->count || z == st->nbatch || z == st->nunroll);
}

rv_status tune_shape_bind(rv_bindings *b, rv_module *m, const TuneShape *sh, uint64_t seed) {
    rv_status st = RV_OK;
    for (int i = 0; st == RV_OK && i < rv_module_num_sizes(m); i++)
        if (!tune_size_set_by_levels(sh->group ? sh->group->st : NULL, rv_module_size_at(m, i)))
            st = rv_bindings_set_size(b, rv_size_name(rv_module_size_at(m, i)), sh->v[i]);
    if (st == RV_OK && sh->group)
        st = bind_levels(b, sh);
    const Ufun *f = sh->rows_uf;
    if (st == RV_OK && f) {
        int64_t n = sh->v[f->args[0]->extent->u.size->id], lo, hi;
        if (!ir_is_const_int(f->lo_dom, &lo) || !ir_is_const_int(f->hi_dom, &hi) ||
            n * lo > sh->quantity || n * hi < sh->quantity)
            return base_error(RV_ERR_ARG, "%lld rows of ufun %s cannot sum to %lld", (long long)n,
                              f->name, (long long)sh->quantity);
        int64_t shape[1] = {n};
        rv_array *a = rv_array_new(ir_ufun_dtype(f), 1, shape);
        int64_t *len = base_xcalloc((size_t)(n > 0 ? n : 1), sizeof *len);
        spread_lengths(len, n, lo, hi, sh->quantity, seed);
        for (int64_t i = 0; i < n; i++)
            rv_array_set_f64(a, i, (double)len[i]);
        base_free(len);
        if ((st = interp_bindings_adopt_array(b, f->name, a)) != RV_OK)
            rv_array_free(a);
    }
    return st == RV_OK ? rv_bindings_randomize(b, seed) : st;
}

/* Every element within f32's tolerance of the reference (1e-4 relative
 * to the magnitude; f64 outputs of f64 work 1e-10). */
static bool arrays_match(const rv_array *got, const rv_array *want) {
    if (!got || !want || rv_array_numel(got) != rv_array_numel(want))
        return false;
    double tol = rv_array_dtype(want) == RV_F64 ? 1e-10 : 1e-4;
    for (int64_t i = 0; i < rv_array_numel(want); i++) {
        double a = rv_array_get_f64(got, i), b = rv_array_get_f64(want, i);
        if (isnan(a) != isnan(b) || (!isnan(a) && fabs(a - b) > tol * (1.0 + fabs(b))))
            return false;
    }
    return true;
}

rv_status tune_reference(rv_module *m, const TuneShape *shape, uint64_t seed, rv_bindings **out) {
    *out = rv_bindings_new(m);
    rv_status st = tune_shape_bind(*out, m, shape, seed);
    if (st == RV_OK)
        st = rv_interp_run(m, *out);
    if (st != RV_OK) {
        rv_bindings_free(*out);
        *out = NULL;
    }
    return st;
}

rv_status tune_batch_check(TuneBatch *bt, int v, rv_module *m, const TuneShape *shape,
                           uint64_t seed, const rv_bindings *ref, bool *ok) {
    *ok = false;
    rv_bindings *b = rv_bindings_new(m), *own = NULL;
    rv_status st = tune_shape_bind(b, m, shape, seed);
    if (st == RV_OK && !ref)
        st = tune_reference(m, shape, seed, &own);
    if (own)
        ref = own;
    *bt->pick = v;
    if (st == RV_OK)
        st = rv_program_run(bt->prog, b);
    if (st == RV_OK) {
        *ok = true;
        for (int t = 0; t < rv_module_num_tensors(m); t++) {
            rv_tensor *x = rv_module_tensor_at(m, t);
            const char *n = rv_tensor_name(x);
            if (rv_tensor_is_output(m, x) &&
                !arrays_match(rv_bindings_get_array(b, n), rv_bindings_get_array(ref, n)))
                *ok = false;
        }
    }
    rv_bindings_free(own);
    rv_bindings_free(b);
    return st;
}

/* The fastest run, not the median: on a machine shared with other jobs
 * another job's load only ever adds time, and it comes and goes between
 * the rounds of a search, so medians of candidates measured in different
 * rounds compare loads as much as kernels (bmm_nt's records at T = 128
 * hold its best kernel at 18 ms, which runs in 4 ms on a calmer machine).
 * The fastest of several runs is the kernel's own time whenever one run
 * had the cores to itself. */
double tune_time_estimate(const double *runs, int n) {
    double best = 0;
    for (int i = 0; i < n; i++)
        if (runs[i] > 0 && (best == 0 || runs[i] < best))
            best = runs[i];
    return best;
}

TuneClock tune_clock_for_threads(int threads) {
    return threads == 1 ? TUNE_CLOCK_CPU : TUNE_CLOCK_WALL;
}

const char *tune_clock_name(TuneClock c) {
    return c == TUNE_CLOCK_CPU ? "cpu" : "wall";
}

double tune_clock_seconds(TuneClock c) {
    if (c == TUNE_CLOCK_WALL)
        return rt_now_seconds();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

rv_status tune_batch_time(TuneBatch *bt, int v, rv_module *m, const TuneShape *shape, int repeats,
                          double min_seconds, TuneClock clock, double *seconds) {
    *seconds = 0;
    if (repeats < 1)
        repeats = 1;
    rv_bindings *b = rv_bindings_new(m);
    rv_status st = tune_shape_bind(b, m, shape, 1);
    *bt->pick = v;
    if (st == RV_OK)
        st = rv_program_run(bt->prog, b); /* warm: caches, pages, the pool */
    int cap = 4 * repeats, n = 0;
    double *t = base_xcalloc((size_t)cap, sizeof *t), total = 0;
    while (st == RV_OK && n < cap && (n < repeats || total < min_seconds)) {
        double t0 = tune_clock_seconds(clock);
        st = rv_program_run(bt->prog, b);
        t[n] = tune_clock_seconds(clock) - t0;
        total += t[n++];
    }
    if (st == RV_OK)
        *seconds = tune_time_estimate(t, n);
    base_free(t);
    rv_bindings_free(b);
    return st;
}
