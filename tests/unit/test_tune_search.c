/* test_tune_search.c — a tiny tuning run end to end (src/tune/search.c,
 * measure.c): a few trials on a tiny dense operator over a small size
 * range. Every kernel the dispatcher chose matches the interpreter at
 * every shape of the range, the dispatcher covers the whole range, and a
 * resumed run measures nothing twice. Without XGBoost, tuning fails with
 * the message naming the package (and the rest is skipped). Nothing here
 * depends on which candidate is faster: timings on a shared machine are
 * noise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tune/tune.h"

static const char *tiny = "size M in 1..9\n"
                          "input X : f32[M, 16]\n"
                          "input W : f32[32, 16]\n"
                          "input bias : f32[32]\n"
                          "Y[i, j] = gelu(sum(k < 16) X[i, k] * W[j, k] + bias[j])\n";

static char dir[] = "/tmp/ravel_test_tune_XXXXXX";
static char records[128];

static TuneOptions options(int trials) {
    TuneOptions o = {.trials = trials,
                     .batch = 4,
                     .threads = 1,
                     .repeats = 1,
                     .seed = 3,
                     .records = records,
                     /* the search's tests: specialized leaves have their own */
                     .specialize = -1,
                     /* and verifying the dispatcher too */
                     .verify = -1,
                     .quiet = true};
    return o;
}

static void test_missing_xgboost(void) {
    setenv("RAVEL_XGBOOST", "/nonexistent/libxgboost.so", 1);
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneOptions o = options(4);
    o.records = NULL;
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "libxgboost-dev");
    rv_module_free(m);
    unsetenv("RAVEL_XGBOOST");
}

static int result_dispatch(const int64_t *sizes, void *user) {
    return tune_result_pick(user, sizes, 1);
}

/* The tuned program as it is built (ravel build --records): every variant,
 * the specialized leaves compiled for their sizes, behind the result's
 * dispatcher; at every value lo..hi of the one size `size` (the result's
 * shapes, in order) it runs the variant the result names there (a
 * specialized leaf exactly at its value) and matches the interpreter. */
static void check_tuned_range(rv_module *m, TuneResult *r, const char *size, int64_t lo,
                              int64_t hi) {
    rv_dispatch d = {.fn = result_dispatch, .user = r, .variant_sizes = r->variant_at};
    rv_compile_options co = {.threads = 1};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile_variants(m, r->nvariants, (const char *const *)r->variant_sched,
                                             &d, &co, &p),
                 RV_OK);
    for (int64_t x = lo; p && x <= hi; x++) {
        int v = tune_result_pick(r, &x, 1);
        CHECK_EQ_INT(v, r->shape_variant[x - lo]);
        /* a leaf is taken at its own value alone */
        CHECK(v < r->nvariants - r->nspec || r->variant_at[v].at[0].value == x);
        rv_bindings *want = rv_bindings_new(m), *got = rv_bindings_new(m);
        CHECK_EQ_INT(rv_bindings_set_size(want, size, x), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_size(got, size, x), RV_OK);
        CHECK_EQ_INT(rv_bindings_randomize(want, (uint64_t)x), RV_OK);
        CHECK_EQ_INT(rv_bindings_randomize(got, (uint64_t)x), RV_OK);
        CHECK_EQ_INT(rv_interp_run(m, want), RV_OK);
        CHECK_EQ_INT(rv_program_run(p, got), RV_OK);
        CHECK_EQ_INT(rv_program_last_variant(p), v);
        CHECK_SAME_TENSOR(want, got, "Y", 1e-4);
        rv_bindings_free(got);
        rv_bindings_free(want);
    }
    rv_program_free(p);
}

/* The tiny program tuned over M = 1..9 (check_tuned_range). */
static void check_tuned_program(rv_module *m, TuneResult *r) {
    check_tuned_range(m, r, "M", 1, 9);
}

/* The key of sched's code as a 1-thread tuning run makes it
 * (rv_program_code_key), compiled for `size` = at alone when size is not
 * NULL: what a record of this code must carry to be current. Valid until
 * the eighth call after. */
static const char *code_of(rv_module *m, const char *sched, const char *size, int64_t at) {
    static char keys[8][33];
    static int next;
    char *key = keys[next++ % 8];
    rv_variant_sizes vs = {.nsizes = 1, .at = {{size, at}}};
    rv_compile_options opt = {.threads = 1};
    CHECK_EQ_INT(rv_program_code_key(m, sched, size ? &vs : NULL, &opt, key), RV_OK);
    return key;
}

/* Each record's (trace, shape) once. */
/* The records; *repeated: how many repeat an earlier one's candidate,
 * shape and threads (only a close call is timed twice). */
static int count_records(int *repeated) {
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(records, &rs), RV_OK);
    *repeated = 0;
    for (int i = 0; i < rs.len; i++) {
        bool again = false;
        for (int j = 0; j < i; j++)
            again |= strcmp(rs.data[i].trace, rs.data[j].trace) == 0 &&
                     rs.data[i].size_values[0] == rs.data[j].size_values[0] &&
                     rs.data[i].threads == rs.data[j].threads;
        *repeated += again;
    }
    int n = rs.len;
    tune_records_free(&rs);
    return n;
}

static void test_tiny_tuning(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneOptions o = options(8);
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    if (r.nvariants == 0) {
        printf("tuning failed: %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    CHECK_EQ_INT(r.measured, 8);
    CHECK_EQ_INT(r.reused, 0);
    CHECK_EQ_INT(r.wrong, 0);
    /* the whole range, each shape to a variant, as the tree says */
    CHECK_EQ_INT(r.nshapes, 9);
    /* at most the 4 voted for, plus one per shape where a known-good
     * sketch measured faster than all of them (timing decides how many) */
    CHECK(r.nvariants >= 1 && r.nvariants <= 4 + r.nshapes &&
          r.nvariants <= TUNE_MAX_TREE_VARIANTS);
    for (int s = 0; s < r.nshapes; s++) {
        CHECK_EQ_INT((int)r.shapes[s].v[0], s + 1);
        int v = tune_dtree_eval(&r.tree, r.shapes[s].v);
        CHECK(v >= 0 && v < r.nvariants);
        CHECK_EQ_INT(v, r.shape_variant[s]);
    }
    /* the tuned program: its variants behind the tree, against the
     * interpreter at every shape */
    check_tuned_program(m, &r);
    Buf c = {0};
    tune_result_dispatch_c(&r, m, "tiny", &c);
    CHECK_STR_CONTAINS(buf_str(&c), "int tiny_dispatch(const int64_t *sizes)");
    buf_free(&c);
    tune_result_free(&r);
    int repeated;
    CHECK_EQ_INT(count_records(&repeated), 8);
    CHECK_EQ_INT(repeated, 0);

    /* resumed with the same budget: every trial is in the records */
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    CHECK_EQ_INT(r.reused, 8);
    tune_result_free(&r);
    CHECK_EQ_INT(count_records(&repeated), 8);

    /* a larger budget measures only what is new */
    o.trials = 11;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.reused, 8);
    CHECK_EQ_INT(r.measured, 3);
    char *last = r.variant_sched[0];
    r.variant_sched[0] = NULL;
    tune_result_free(&r);
    CHECK_EQ_INT(count_records(&repeated), 11);
    CHECK_EQ_INT(repeated, 0);

    /* replay (ravel build --records): the records decide, nothing is
     * measured, the same kernels come out */
    o.replay = true;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    CHECK(r.nvariants >= 1 && strcmp(r.variant_sched[0], last) == 0);
    tune_result_free(&r);
    base_free(last);
    /* another program has no records here: said so */
    CHECK_EQ_INT(tune_run(m, "another program", &o, &r), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no tuning records of this program");
    CHECK_EQ_INT(count_records(&repeated), 11);

    /* records are per thread count: the 1-thread records do not stand for
     * 2 threads, neither in a replay nor in a run, which measures its own */
    o.threads = 2;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "at 2 thread(s)");
    o.replay = false;
    o.trials = 2;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.reused, 0);
    CHECK_EQ_INT(r.measured, 2);
    tune_result_free(&r);
    CHECK_EQ_INT(count_records(&repeated), 13);
    CHECK_EQ_INT(repeated, 0);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(records, &rs), RV_OK);
    for (int i = 0; i < rs.len; i++)
        CHECK_EQ_INT(rs.data[i].threads, i < 11 ? 1 : 2);
    tune_records_free(&rs);
    rv_module_free(m);
}

/* Writes an ok record of candidate `sched` of m at M = m taking
 * `seconds`, a time of its code today (current). */
static void fake_record(rv_module *m, const char *path, const char *program,
                        const char *machine, const char *sched, int64_t mv, double seconds) {
    const char *names[] = {"M"};
    TuneRecord r = {.program = program,
                    .machine = machine,
                    .trace = sched,
                    .nsizes = 1,
                    .size_names = names,
                    .size_values = &mv,
                    .seconds = seconds,
                    .status = TUNE_STATUS_OK,
                    .threads = 1,
                    .clock = TUNE_CLOCK_CPU,
                    .code = code_of(m, sched, NULL, 0)};
    CHECK_EQ_INT(tune_record_append(path, &r), RV_OK);
}

/* Replays the nrecords records at path with one variant asked for into
 * r; whether the dispatcher made two (one shape's vote came back). */
static bool replay_one_variant(rv_module *m, const char *path, int nrecords, TuneResult *r) {
    TuneOptions o = options(0);
    o.records = path;
    o.replay = true;
    o.max_variants = 1;
    CHECK_EQ_INT(tune_run(m, tiny, &o, r), RV_OK);
    CHECK_EQ_INT(r->reused, nrecords);
    CHECK_EQ_INT(r->nvariants, 2);
    return r->nvariants == 2;
}

/* The dispatcher never answers a shape with a kernel the records show
 * slower there than a known-good sketch: records (replayed) where a
 * non-sketch is fastest at every M but 3, where a sketch is; with one
 * variant allowed, M = 3 still gets the sketch (a second variant), and
 * the others the faster kernel. */
static void test_never_below_a_sketch(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    int seed = -1, other = -1, nseeds = 0;
    for (int c = 0; c < sp.len; c++) {
        nseeds += sp.cands[c].seed;
        if (sp.cands[c].seed && seed < 0)
            seed = c;
        if (!sp.cands[c].seed && other < 0)
            other = c;
    }
    CHECK(seed >= 0 && other >= 0 && nseeds < sp.len / 2);
    char path[160], hex[17];
    snprintf(path, sizeof path, "%s/sketch.jsonl", dir);
    hash_hex(hash_str(tiny), hex);
    Buf machine = {0};
    tune_hw_machine_id(tune_hw(), &machine);
    for (int64_t M = 1; seed >= 0 && other >= 0 && M <= 9; M++) {
        fake_record(m, path, hex, buf_str(&machine), sp.cands[other].sched, M, M == 3 ? 2e-6 : 1e-6);
        fake_record(m, path, hex, buf_str(&machine), sp.cands[seed].sched, M, M == 3 ? 1e-6 : 2e-6);
    }
    TuneResult r;
    bool two = replay_one_variant(m, path, 18, &r);
    for (int64_t M = 1; two && M <= 9; M++) {
        int v = tune_dtree_eval(&r.tree, &M);
        CHECK_EQ_INT(strcmp(r.variant_sched[v], sp.cands[M == 3 ? seed : other].sched), 0);
    }
    tune_result_free(&r);
    buf_free(&machine);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* Nor far below a shape's own measured best: records (replayed) where
 * non-sketch A is fastest at every M but 3, where B measured 2x faster,
 * and 5, where C measured 5% faster (within the noise); a sketch slower
 * everywhere. With one variant allowed, M = 3 gets B back as a second
 * variant, M = 5 keeps A. */
static void test_vote_back_on_loss(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    int seed = -1, cand[3], n = 0;
    for (int c = 0; c < sp.len; c++) {
        if (sp.cands[c].seed && seed < 0)
            seed = c;
        if (!sp.cands[c].seed && n < 3)
            cand[n++] = c;
    }
    CHECK(seed >= 0 && n == 3);
    char path[160], hex[17];
    snprintf(path, sizeof path, "%s/loss.jsonl", dir);
    hash_hex(hash_str(tiny), hex);
    Buf machine = {0};
    tune_hw_machine_id(tune_hw(), &machine);
    for (int64_t M = 1; seed >= 0 && n == 3 && M <= 9; M++) {
        fake_record(m, path, hex, buf_str(&machine), sp.cands[cand[0]].sched, M, 1e-6);
        fake_record(m, path, hex, buf_str(&machine), sp.cands[seed].sched, M, 4e-6);
        if (M == 3)
            fake_record(m, path, hex, buf_str(&machine), sp.cands[cand[1]].sched, M, 0.5e-6);
        if (M == 5)
            fake_record(m, path, hex, buf_str(&machine), sp.cands[cand[2]].sched, M, 1e-6 / 1.05);
    }
    TuneResult r;
    bool two = replay_one_variant(m, path, 20, &r);
    for (int64_t M = 1; two && M <= 9; M++) {
        int v = tune_dtree_eval(&r.tree, &M);
        CHECK_EQ_INT(strcmp(r.variant_sched[v], sp.cands[cand[M == 3]].sched), 0);
    }
    tune_result_free(&r);
    buf_free(&machine);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* Kinds of known-good sketch (tune.h's TuneCand.sketch): a template and
 * a kind within it; the first seed of each kind into first[], -1 where
 * none; returns how many kinds. */
enum { MAX_KINDS = 8 };
static int sketch_kinds(const TuneSpace *sp, int first[TUNE_T_COUNT][MAX_KINDS]) {
    int kinds = 0;
    for (int tm = 0; tm < TUNE_T_COUNT; tm++)
        for (int k = 0; k < MAX_KINDS; k++)
            first[tm][k] = -1;
    for (int c = 0; c < sp->len; c++) {
        const TuneCand *x = &sp->cands[c];
        CHECK(!x->seed || (x->sketch >= 0 && x->sketch < MAX_KINDS));
        if (x->seed && x->sketch >= 0 && x->sketch < MAX_KINDS && first[x->tmpl][x->sketch] < 0)
            first[x->tmpl][x->sketch] = c, kinds++;
    }
    return kinds;
}

/* The first round at a shape measures a known-good sketch of every kind
 * (the model cannot judge a kind it has not seen measured: stream at
 * T = 1 was never tried once; tile with B read in place never at bmm_nn's
 * T above 24, where packing B row by row, the kind measured, is 1.9x
 * slower at T = 128). */
static void test_sketch_of_each_template(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    int first[TUNE_T_COUNT][MAX_KINDS];
    int kinds = sketch_kinds(&sp, first);
    CHECK(kinds >= 3 && kinds <= 7);
    char path[160];
    snprintf(path, sizeof path, "%s/kinds.jsonl", dir);
    TuneShape sh = {.v = {5}};
    TuneOptions o = options(8);
    o.records = path;
    o.shapes = &sh;
    o.nshapes = 1;
    o.shapes_only = true;
    o.batch = 8;
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    tune_result_free(&r);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, 8);
    bool seen[TUNE_T_COUNT][MAX_KINDS] = {{0}};
    for (int i = 0; i < rs.len; i++)
        for (int c = 0; c < sp.len; c++)
            if (sp.cands[c].seed && strcmp(sp.cands[c].sched, rs.data[i].trace) == 0)
                seen[sp.cands[c].tmpl][sp.cands[c].sketch] = true;
    for (int tm = 0; tm < TUNE_T_COUNT; tm++)
        for (int k = 0; k < MAX_KINDS; k++)
            CHECK(seen[tm][k] == (first[tm][k] >= 0));
    tune_records_free(&rs);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* A measured shape where a kind of sketch never ran near it (within a
 * factor of 1.5 in M) is where the model knows least; one near a shape
 * with every kind is not. Records with a sketch of every kind at M = 1..4
 * and one kind of tile only at 5..9, all at one throughput; M = 5 weighs
 * 100 times the rest, so a rule that wanted every kind at every measured
 * shape would go there; the next round goes to M = 7..9 (nothing with
 * every kind within 1.5x) and measures a sketch of a missing kind. */
static void test_missing_sketch_revisited(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    int first[TUNE_T_COUNT][MAX_KINDS];
    sketch_kinds(&sp, first);
    int only = first[TUNE_T_TILE][1]; /* B packed row by row */
    char path[160], hex[17];
    snprintf(path, sizeof path, "%s/missing.jsonl", dir);
    hash_hex(hash_str(tiny), hex);
    Buf machine = {0};
    tune_hw_machine_id(tune_hw(), &machine);
    int n = 0;
    for (int64_t M = 1; M <= 9; M++)
        for (int tm = 0; tm < TUNE_T_COUNT; tm++)
            for (int k = 0; k < MAX_KINDS; k++)
                if (first[tm][k] >= 0 && (M <= 4 || first[tm][k] == only)) {
                    fake_record(m, path, hex, buf_str(&machine), sp.cands[first[tm][k]].sched, M,
                                1e-6 * (double)M);
                    n++;
                }
    CHECK(only >= 0 && first[TUNE_T_TILE][0] >= 0 && n > 9);
    TuneShape heavy = {.v = {5}};
    double weight = 100;
    TuneOptions o = options(n + 2);
    o.records = path;
    o.batch = 2;
    o.shapes_per_round = 1;
    o.shapes = &heavy;
    o.weights = &weight;
    o.nshapes = 1;
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 2);
    tune_result_free(&r);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    CHECK_EQ_INT(rs.len, n + 2);
    bool missing_kind = false;
    int64_t at = rs.data[n].size_values[0];
    CHECK(at >= 7 && at <= 9);
    for (int i = n; i < rs.len; i++) {
        CHECK_EQ_INT((int)rs.data[i].size_values[0], (int)at);
        for (int c = 0; c < sp.len; c++)
            missing_kind |= sp.cands[c].seed && c != only &&
                            !(sp.cands[c].tmpl == TUNE_T_TILE && sp.cands[c].sketch == 1) &&
                            strcmp(rs.data[i].trace, sp.cands[c].sched) == 0;
    }
    CHECK(missing_kind);
    tune_records_free(&rs);
    buf_free(&machine);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* Ragged rows (packed tokens, fuse(b, l)): tuned and dispatched on the
 * sum of len, which the runtime computes from the UF array after the
 * argument check. Every shape of the sum's range (0 and 1 rows among
 * them) and random batches run the variant the tree names for their sum
 * and match the interpreter; a resumed run measures nothing. */
static const char *ragged = "size B in 1..3\n"
                            "ufun len[b < B] in 0..4\n"
                            "input X : f32[b < B, l < len[b], k < 8]\n"
                            "input W : f32[j < 16, k < 8]\n"
                            "Y[b, l < len[b], j < 16] = sum(k < 8) X[b, l, k] * W[j, k]\n";

/* The tuned program's dispatch: tune_result_pick over n sizes. */
typedef struct Picker {
    const TuneResult *r;
    int nsizes;
} Picker;

static int pick_dispatch(const int64_t *sizes, void *user) {
    const Picker *pk = user;
    return tune_result_pick(pk->r, sizes, pk->nsizes);
}

/* The variant r names for the sizes bound in b (then the sum of the UF
 * r's tree reads, where it reads one). */
static int expected_variant(rv_module *m, const TuneResult *r, const rv_bindings *b) {
    int n = rv_module_num_sizes(m);
    int64_t x[9] = {0};
    for (int i = 0; i < n; i++)
        x[i] = rv_bindings_get_size(b, rv_size_name(rv_module_size_at(m, i)));
    const rv_array *uf = r->sum_ufun[0] ? rv_bindings_get_array(b, r->sum_ufun) : NULL;
    for (int64_t i = 0; uf && i < rv_array_numel(uf); i++)
        x[n] += (int64_t)rv_array_get_f64(uf, i);
    return tune_result_pick(r, x, n);
}

/* r's variants behind dispatch d: at each tuned shape's inputs and on 12
 * random ones, the run takes the variant r names and its output matches
 * the interpreter's. */
static void check_tuned(rv_module *m, const TuneResult *r, const rv_dispatch *d,
                        const char *output) {
    rv_compile_options co = {.threads = 1};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile_variants(m, r->nvariants, (const char *const *)r->variant_sched,
                                             d, &co, &p),
                 RV_OK);
    for (int s = 0; p && s < r->nshapes + 12; s++) {
        rv_bindings *want = rv_bindings_new(m), *got = rv_bindings_new(m);
        if (s < r->nshapes) {
            CHECK_EQ_INT(tune_shape_bind(want, m, &r->shapes[s], 5), RV_OK);
            CHECK_EQ_INT(tune_shape_bind(got, m, &r->shapes[s], 5), RV_OK);
        } else {
            CHECK_EQ_INT(rv_bindings_randomize(want, (uint64_t)s), RV_OK);
            CHECK_EQ_INT(rv_bindings_randomize(got, (uint64_t)s), RV_OK);
        }
        CHECK_EQ_INT(rv_interp_run(m, want), RV_OK);
        CHECK_EQ_INT(rv_program_run(p, got), RV_OK);
        CHECK_EQ_INT(rv_program_last_variant(p), expected_variant(m, r, got));
        if (s < r->nshapes)
            CHECK_EQ_INT(rv_program_last_variant(p), r->shape_variant[s]);
        CHECK_SAME_TENSOR(want, got, output, 1e-4);
        rv_bindings_free(got);
        rv_bindings_free(want);
    }
    rv_program_free(p);
}

/* Parses `text` and tunes it with 6 trials into records NAME.jsonl (in
 * rec): false, after saying why, when tuning found nothing. */
static bool tune_six(const char *name, const char *text, rv_module **m, char rec[160],
                     TuneOptions *o, TuneResult *r) {
    CHECK_EQ_INT(rv_module_parse(name, text, m), RV_OK);
    snprintf(rec, 160, "%s/%s.jsonl", dir, name);
    *o = options(6);
    o->records = rec;
    CHECK_EQ_INT(tune_run(*m, text, o, r), RV_OK);
    if (r->nvariants == 0) {
        printf("tuning failed: %s\n", rv_last_error());
        rv_module_free(*m);
        return false;
    }
    CHECK_EQ_INT(r->measured, 6);
    CHECK_EQ_INT(r->wrong, 0);
    return true;
}

static void test_ragged_tuning(void) {
    rv_module *m = NULL;
    char rec[160];
    TuneOptions o;
    TuneResult r;
    if (!tune_six("ragged", ragged, &m, rec, &o, &r))
        return;
    CHECK(strcmp(r.sum_ufun, "len") == 0);
    /* the packed rows' whole range, 0 .. 3 * 4 */
    CHECK_EQ_INT(r.nshapes, 13);
    for (int s = 0; s < r.nshapes; s++) {
        CHECK_EQ_INT((int)r.shapes[s].quantity, s);
        CHECK_EQ_INT((int)r.shapes[s].v[1], s); /* after the size B */
        CHECK_EQ_INT(tune_dtree_eval(&r.tree, r.shapes[s].v), r.shape_variant[s]);
    }
    const char *sums[1] = {"len"};
    Picker pk = {&r, 1};
    rv_dispatch d = {.fn = pick_dispatch, .user = &pk, .nsums = 1, .sums = sums};
    check_tuned(m, &r, &d, "Y");
    rv_compile_options co = {.threads = 1};
    rv_program *p = NULL;
    /* a sum of an unknown UF is refused */
    sums[0] = "nope";
    CHECK_EQ_INT(rv_program_compile_variants(m, r.nvariants, (const char *const *)r.variant_sched,
                                             &d, &co, &p),
                 RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no ufun named 'nope'");
    Buf c = {0};
    tune_result_dispatch_c(&r, m, "ragged", &c);
    CHECK_STR_CONTAINS(buf_str(&c), "sum(len)");
    buf_free(&c);
    tune_result_free(&r);
    /* resumed: nothing new is measured */
    CHECK_EQ_INT(tune_run(m, ragged, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    CHECK_EQ_INT(r.reused, 6);
    tune_result_free(&r);
    rv_module_free(m);
}

/* A recursion's per-level product (a reduced TreeLSTM: hidden 8, the
 * gates' product iou with M = a level's nodes): tuned on the nodes per
 * level (chains of M nodes side by side), dispatched per call on the
 * run's N / _T_nbatch. Every shape (1-node levels among them) and random
 * batches of trees (a single node, chains, bushy trees) run the variant
 * tune_result_pick names and match the interpreter; resumed, nothing is
 * measured. */
static const char *levels = "size N in 1..128\n"
                            "size B in 1..16\n"
                            "structure T : tree(N, 2) {\n"
                            "    children child, nchild\n"
                            "    roots root[s < B]\n"
                            "    data word in 0..9\n"
                            "}\n"
                            "input Emb : f32[10, 8]\n"
                            "input U : f32[24, 8]\n"
                            "X[n, g < 24] = Emb[word[n], g % 8]\n"
                            "recurse R over T {\n"
                            "    hs[n, i < 8] = sum(k < nchild[n]) h[child[n, k], i]\n"
                            "    iou[n, g < 24] = X[n, g] + sum(j < 8) U[g, j] * hs[n, j]\n"
                            "    c[n, i < 8] = sigmoid(iou[n, i]) * tanh(iou[n, 16 + i])\n"
                            "                  + sum(k < nchild[n]) c[child[n, k], i]\n"
                            "    h[n, i < 8] = sigmoid(iou[n, 8 + i]) * tanh(c[n, i])\n"
                            "}\n"
                            "Out[s, i] = h[root[s], i]\n"
                            "schedule R {\n"
                            "    dynamic_batch()\n"
                            "}\n";

static void test_level_tuning(void) {
    rv_module *m = NULL;
    char rec[160];
    TuneOptions o;
    TuneResult r;
    if (!tune_six("levels", levels, &m, rec, &o, &r))
        return;
    CHECK(strcmp(r.quantity, "N/_T_nbatch") == 0);
    /* N, B, _T_nbatch and the structure's other hidden sizes (_T_nunroll):
     * the dispatch reads the quantity after all of them */
    int ns = rv_module_num_sizes(m);
    /* 1 .. 16 nodes per level (B's range; 128 / 8 levels) */
    CHECK_EQ_INT(r.nshapes, 16);
    for (int s = 0; s < r.nshapes; s++) {
        CHECK_EQ_INT((int)r.shapes[s].quantity, s + 1);
        CHECK_EQ_INT((int)r.shapes[s].v[0], (s + 1) * TUNE_LEVELS); /* N */
        CHECK_EQ_INT(tune_result_pick(&r, r.shapes[s].v, ns), r.shape_variant[s]);
    }
    Picker pk = {&r, ns};
    rv_dispatch d = {.fn = pick_dispatch, .user = &pk};
    check_tuned(m, &r, &d, "Out");
    Buf c = {0};
    tune_result_dispatch_c(&r, m, "levels", &c);
    char want[80];
    snprintf(want, sizeof want, "x[%d] = sizes[0] / (sizes[2] > 0 ? sizes[2] : 1);", ns);
    CHECK_STR_CONTAINS(buf_str(&c), want);
    buf_free(&c);
    tune_result_free(&r);
    CHECK_EQ_INT(tune_run(m, levels, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    CHECK_EQ_INT(r.reused, 6);
    tune_result_free(&r);
    rv_module_free(m);
}

/* A timing is the fastest run: runs slowed by another job's load (the
 * tail of the list, 4-14x) move neither it nor the candidates' order; a
 * failed or absent run counts as none. */
static void test_time_estimate(void) {
    double quiet[] = {1.02e-3, 1.00e-3, 1.01e-3, 1.03e-3, 1.00e-3};
    double loaded[] = {4.1e-3, 1.00e-3, 9.0e-3, 14.0e-3, 5.5e-3};
    CHECK(tune_time_estimate(quiet, 5) == 1.00e-3);
    CHECK(tune_time_estimate(loaded, 5) == 1.00e-3);
    double other[] = {1.2e-3, 1.3e-3, 1.25e-3, 1.2e-3, 1.21e-3};
    CHECK(tune_time_estimate(loaded, 5) < tune_time_estimate(other, 5));
    double none[] = {0, 0};
    CHECK(tune_time_estimate(none, 2) == 0);
    CHECK(tune_time_estimate(none, 0) == 0);
}

/* The clock is chosen by the thread count: CPU time at 1 thread (a
 * 1-thread kernel's wall time on a shared machine is mostly waiting for
 * a core), the wall clock at 2+ and on the shared pool (0), where CPU
 * time would sum the threads' spin waits. A tuning run at 1 thread
 * records "clock":"cpu"; CPU time advances with work, not with sleep. */
static void test_clock_by_threads(void) {
    CHECK(tune_clock_for_threads(1) == TUNE_CLOCK_CPU);
    CHECK(tune_clock_for_threads(2) == TUNE_CLOCK_WALL);
    CHECK(tune_clock_for_threads(16) == TUNE_CLOCK_WALL);
    CHECK(tune_clock_for_threads(0) == TUNE_CLOCK_WALL);
    CHECK_EQ_INT(strcmp(tune_clock_name(TUNE_CLOCK_CPU), "cpu"), 0);
    double c0 = tune_clock_seconds(TUNE_CLOCK_CPU), w0 = tune_clock_seconds(TUNE_CLOCK_WALL);
    usleep(50000);
    double cs = tune_clock_seconds(TUNE_CLOCK_CPU) - c0;
    double ws = tune_clock_seconds(TUNE_CLOCK_WALL) - w0;
    CHECK(ws >= 0.045 && cs < 0.02);

    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    unlink(records);
    TuneOptions o = options(3);
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    tune_result_free(&r);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(records, &rs), RV_OK);
    CHECK(rs.len > 0);
    for (int i = 0; i < rs.len; i++)
        CHECK(rs.data[i].threads == 1 && rs.data[i].clock == TUNE_CLOCK_CPU);
    tune_records_free(&rs);
    rv_module_free(m);
}

/* The votes bound a prediction at an unmeasured shape by the
 * measurements beside it (dense 768x3072 + gelu at T = 16: a kblock
 * predicted fastest, 3x slower than the tile measured best at T = 13
 * and 17). Shapes 0..6, measured at 2 and 5; a candidate's own time at
 * the nearest measured shape on either side caps it (times the slack),
 * else the best measured there; nothing measured: the prediction as it
 * is; a measured shape: its own time. */
static void test_prediction_bounded_by_neighbours(void) {
    double best[7] = {0, 0, 9, 0, 0, 12, 0};
    double slow[7] = {0, 0, 3, 0, 0, 4, 0}; /* measured at both, slow */
    double half[7] = {0, 0, 0, 0, 0, 5, 0}; /* measured on one side only */
    double none[7] = {0};
    /* predicted 30 at shape 3: cut to 1.1x its own best beside it */
    CHECK(fabs(tune_bounded_prediction(slow, best, 7, 3, 30, 1.1) - 4.4) < 1e-9);
    /* below the bound: the prediction stands */
    CHECK(tune_bounded_prediction(slow, best, 7, 3, 2, 1.1) == 2);
    /* not measured at 2: the best there (9) bounds that side */
    CHECK(tune_bounded_prediction(half, best, 7, 3, 30, 1.1) == 9);
    CHECK(tune_bounded_prediction(none, best, 7, 3, 30, 1.1) == 12);
    /* beyond the last measured shape: one side only */
    CHECK(fabs(tune_bounded_prediction(slow, best, 7, 6, 30, 1.1) - 4.4) < 1e-9);
    CHECK(fabs(tune_bounded_prediction(slow, best, 7, 0, 30, 1.1) - 3.3) < 1e-9);
    /* a measured shape is its own time; nothing measured anywhere: no bound */
    CHECK(tune_bounded_prediction(slow, best, 7, 2, 30, 1.1) == 3);
    CHECK(tune_bounded_prediction(none, none, 7, 3, 30, 1.1) == 30);
    /* so the kernel measured fast beside the shape wins the vote there
     * over one predicted 3x faster but measured slow beside it */
    double fast[7] = {0, 0, 9, 0, 0, 12, 0};
    CHECK(tune_bounded_prediction(fast, best, 7, 3, 10, 1.1) >
          tune_bounded_prediction(slow, best, 7, 3, 30, 1.1));
}

/* ---- specialized leaves ---- */

/* The records' key of the tiny program: its text's hash. */
static const char *hex_of_tiny(void) {
    static char hex[17];
    hash_hex(hash_str(tiny), hex);
    return hex;
}

/* The tiny tuning run with specialized leaves: the best candidates of
 * the 3 smallest measured shapes (their weights are equal) measured
 * compiled for each alone, recorded as such; whatever timing decides,
 * every kernel is right at every shape, a leaf only at its own; a resumed
 * run measures nothing, specialized or not, and decides the same. */
static void test_specialized_tuning(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    char path[160];
    snprintf(path, sizeof path, "%s/spec.jsonl", dir);
    TuneOptions o = options(8);
    o.records = path;
    o.specialize = 3;
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 8);
    CHECK(r.spec_measured >= 1 && r.spec_measured <= 3 * 5);
    CHECK_EQ_INT(r.wrong, 0);
    CHECK(r.nspec >= 0 && r.nspec <= 3);
    for (int k = r.nvariants - r.nspec; k < r.nvariants; k++) {
        CHECK_EQ_INT(r.variant_at[k].nsizes, 1);
        CHECK_STR_CONTAINS(r.variant_desc[k], " for M=");
    }
    check_tuned_program(m, &r);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    /* at most 3 shapes, each measured generic too, at most 5 candidates each
     * (its 2 best and 3 winners of the shapes near it) */
    int spec = 0, per_shape[10] = {0}, shapes = 0;
    for (int i = 0; i < rs.len; i++) {
        int64_t M = rs.data[i].size_values[0];
        if (!rs.data[i].spec)
            continue;
        spec++;
        CHECK(M >= 1 && M <= 9);
        shapes += per_shape[M]++ == 0;
        CHECK(tune_records_find(&rs, hex_of_tiny(), 1, (const char *const *)rs.data[i].size_names,
                                &M, 1, rs.data[i].trace) != NULL);
    }
    CHECK(shapes >= 1 && shapes <= 3);
    for (int M = 1; M <= 9; M++)
        CHECK(per_shape[M] <= 5);
    CHECK_EQ_INT(spec, r.spec_measured);
    CHECK_EQ_INT(rs.len, 8 + spec);
    tune_records_free(&rs);
    int nspec = r.nspec, nvariants = r.nvariants;
    tune_result_free(&r);

    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    CHECK_EQ_INT(r.spec_measured, 0);
    CHECK_EQ_INT(r.spec_reused, spec);
    CHECK_EQ_INT(r.nspec, nspec);
    CHECK_EQ_INT(r.nvariants, nvariants);
    tune_result_free(&r);
    rv_module_free(m);
}

/* Records (replayed) where one candidate is measured at every M and,
 * compiled for M = 2 alone, 10x faster there, and for M = 3 alone only 1%
 * faster (below SPEC_GAIN): one leaf, at M = 2, taken exactly there, in
 * the emitted C ahead of the tree; the program is right at every M. */
static void test_specialized_leaf_replayed(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    int c = 0;
    while (c < sp.len && !sp.cands[c].seed)
        c++;
    CHECK(c < sp.len);
    char path[160], hex[17];
    snprintf(path, sizeof path, "%s/leaf.jsonl", dir);
    hash_hex(hash_str(tiny), hex);
    Buf machine = {0};
    tune_hw_machine_id(tune_hw(), &machine);
    for (int64_t M = 1; M <= 9; M++)
        fake_record(m, path, hex, buf_str(&machine), sp.cands[c].sched, M, 1e-6 * (double)M);
    const char *names[] = {"M"};
    int64_t two = 2, three = 3;
    TuneRecord fast = {.program = hex,
                       .machine = buf_str(&machine),
                       .trace = sp.cands[c].sched,
                       .nsizes = 1,
                       .size_names = names,
                       .size_values = &two,
                       .seconds = 2e-7,
                       .status = TUNE_STATUS_OK,
                       .threads = 1,
                       .spec = true,
                       .code = code_of(m, sp.cands[c].sched, "M", 2)};
    CHECK_EQ_INT(tune_record_append(path, &fast), RV_OK);
    TuneRecord slight = fast;
    slight.size_values = &three;
    slight.code = code_of(m, sp.cands[c].sched, "M", 3);
    slight.seconds = 3e-6 / 1.01;
    CHECK_EQ_INT(tune_record_append(path, &slight), RV_OK);
    TuneOptions o = options(0);
    o.records = path;
    o.replay = true;
    o.specialize = 0; /* the default: M = 1..6, the smallest work first */
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.reused, 9);
    CHECK_EQ_INT(r.spec_reused, 2);
    CHECK_EQ_INT(r.nspec, 1);
    CHECK_EQ_INT(r.nvariants, 2);
    if (r.nvariants == 2 && r.nspec == 1) {
        CHECK_EQ_INT((int)r.variant_at[1].at[0].value, 2);
        CHECK_STR_CONTAINS(r.variant_at[1].at[0].size, "M");
        for (int64_t M = 1; M <= 9; M++)
            CHECK_EQ_INT(tune_result_pick(&r, &M, 1), M == 2 ? 1 : 0);
        Buf cc = {0};
        tune_result_dispatch_c(&r, m, "tiny", &cc);
        CHECK_STR_CONTAINS(buf_str(&cc), "    if (sizes[0] == 2LL)\n        return 1;");
        CHECK_STR_CONTAINS(buf_str(&cc), "return tiny_general_dispatch(sizes);");
        buf_free(&cc);
        check_tuned_program(m, &r);
    }
    tune_result_free(&r);
    /* none asked for: no leaf */
    o.specialize = -1;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.nspec, 0);
    CHECK_EQ_INT(r.nvariants, 1);
    tune_result_free(&r);
    buf_free(&machine);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* Records where candidate a wins every M but 5, where it was never
 * measured (b and c were, b the faster): with leaves at every M, a is
 * compiled for M = 5 and measured there, as a winner of the shapes
 * beside it (spec_cands), though it is not among M = 5's best measured;
 * the leaves are right at every M and a resumed run measures nothing.
 * Without the neighbours' winners only b and c are measured at 5. */
static void test_spec_neighbour_winner(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    CHECK(sp.len >= 3);
    int a = 0, b = 1, c = 2;
    char path[160], hex[17];
    snprintf(path, sizeof path, "%s/neighbour.jsonl", dir);
    unlink(path);
    hash_hex(hash_str(tiny), hex);
    Buf machine = {0};
    tune_hw_machine_id(tune_hw(), &machine);
    int n = 0;
    for (int64_t M = 1; M <= 9; M++, n += 2) {
        fake_record(m, path, hex, buf_str(&machine), sp.cands[b].sched, M, 2e-6 * (double)M);
        fake_record(m, path, hex, buf_str(&machine), sp.cands[c].sched, M, 3e-6 * (double)M);
        if (M != 5)
            fake_record(m, path, hex, buf_str(&machine), sp.cands[a].sched, M, 1e-6 * (double)M), n++;
    }
    TuneOptions o = options(n);
    o.records = path;
    o.specialize = 9; /* every M */
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.reused, n);
    CHECK_EQ_INT(r.measured, 0);
    CHECK_EQ_INT(r.wrong, 0);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    bool a_at_5 = false;
    for (int i = 0; i < rs.len; i++)
        a_at_5 |= rs.data[i].spec && rs.data[i].size_values[0] == 5 &&
                  strcmp(rs.data[i].trace, sp.cands[a].sched) == 0;
    CHECK(a_at_5);
    tune_records_free(&rs);
    check_tuned_program(m, &r);
    int spec = r.spec_measured;
    tune_result_free(&r);
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    CHECK_EQ_INT(r.spec_measured, 0);
    CHECK_EQ_INT(r.spec_reused, spec);
    tune_result_free(&r);
    buf_free(&machine);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* ---- verifying the dispatcher ---- */

/* Whether the records hold a generic measurement of `sched` of m at
 * M = mv (of its code today when `current`). */
static bool has_record(rv_module *m, const char *sched, int64_t mv, bool current) {
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(records, &rs), RV_OK);
    bool found = false;
    for (int i = 0; i < rs.len; i++)
        found |= !rs.data[i].spec && rs.data[i].size_values[0] == mv &&
                 strcmp(rs.data[i].trace, sched) == 0 &&
                 (!current || tune_record_current(&rs.data[i], code_of(m, sched, NULL, 0)));
    tune_records_free(&rs);
    return found;
}

/* A tiny tuning run that verifies its dispatcher: 6 trials leave most of
 * M = 1..9 unmeasured, so the model votes there; with a budget it does
 * not exhaust, every shape's dispatched kernel has a record at that shape
 * afterwards. A resumed run measures nothing and dispatches the same; a
 * budget of 2 measures 2 past the trials at most. */
static void test_verified_dispatch(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    unlink(records);
    TuneOptions o = options(6);
    o.verify = 200; /* each kind at 4 anchors first, then the votes */
    TuneResult r;
    if (tune_run(m, tiny, &o, &r) != RV_OK) {
        CHECK_STR_CONTAINS(rv_last_error(), "(no error: tuning should succeed)");
        rv_module_free(m);
        return;
    }
    CHECK(r.verify_measured > 0 && r.verify_measured < 200);
    CHECK_EQ_INT(r.measured, 6 + r.verify_measured);
    for (int s = 0; s < r.nshapes; s++)
        CHECK(has_record(m, r.variant_sched[r.shape_variant[s]], r.shapes[s].v[0], false));
    check_tuned_program(m, &r);
    int *was = base_xcalloc((size_t)r.nshapes, sizeof *was);
    memcpy(was, r.shape_variant, sizeof *was * (size_t)r.nshapes);
    int repeated;
    int n = count_records(&repeated);
    CHECK_EQ_INT(repeated, r.close_retimed);
    tune_result_free(&r);

    /* resumed: the same votes, nothing measured */
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    CHECK_EQ_INT(r.verify_measured, 0);
    CHECK_EQ_INT(r.reused, n);
    for (int s = 0; s < r.nshapes; s++)
        CHECK_EQ_INT(r.shape_variant[s], was[s]);
    tune_result_free(&r);
    base_free(was);
    CHECK_EQ_INT(count_records(&repeated), n);

    /* the budget bounds it */
    unlink(records);
    o.verify = 2;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK(r.verify_measured <= 2);
    CHECK_EQ_INT(r.measured, 6 + r.verify_measured);
    tune_result_free(&r);
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    tune_result_free(&r);
    rv_module_free(m);
}

/* ---- stale records ---- */

/* How the records are rewritten to age them (age_records). */
typedef enum Aging {
    AGE_SOURCES, /* "codegen" of other sources added, "code" kept: the
                  * generator changed, the candidates' C did not */
    AGE_CODE,    /* "code" another key: the candidate's C changed */
    AGE_UNKNOWN, /* "code" dropped, "codegen" added: a record written
                  * before "code" */
    AGE_FLAGS,   /* nothing rewritten, the resumed run's compiler
                  * command adds a -D: every candidate's code key changes */
    AGE_COUNT
} Aging;

/* The records rewritten as `how` says (AGE_FLAGS: as they are). */
static void age_records(Aging how) {
    char *text;
    size_t len;
    CHECK_EQ_INT(base_read_file(records, &text, &len), RV_OK);
    Buf out = {0};
    const char *from = ",\"code\":\"";
    size_t fl = strlen(from);
    for (const char *p = text, *q; *p; p = q + fl + 33) {
        q = how == AGE_FLAGS ? NULL : strstr(p, from);
        if (!q) {
            buf_puts(&out, p);
            break;
        }
        buf_printf(&out, "%.*s", (int)(q - p), p);
        if (how != AGE_CODE)
            buf_puts(&out, ",\"codegen\":\"0123456789abcdef\"");
        if (how == AGE_SOURCES)
            buf_printf(&out, "%s%.32s\"", from, q + fl);
        if (how == AGE_CODE)
            buf_printf(&out, "%sffffffffffffffffffffffffffffffff\"", from);
    }
    CHECK_EQ_INT(base_write_file(records, out.data, out.len), RV_OK);
    buf_free(&out);
    base_free(text);
}

/* rv_program_code_key names the code: a schedule written differently
 * (a comment, spacing) that lowers to the same C has the same key; another
 * candidate, the same one compiled for one shape, another flag, each
 * another. What a record's currency rests on. */
static void test_code_key(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    CHECK(sp.len >= 2);
    char a[33], b[33], spaced[33], at2[33], at3[33], flagged[33];
    rv_compile_options opt = {.threads = 1};
    CHECK_EQ_INT(rv_program_code_key(m, sp.cands[0].sched, NULL, &opt, a), RV_OK);
    CHECK_EQ_INT(strlen(a), 32);
    CHECK_EQ_INT(rv_program_code_key(m, sp.cands[1].sched, NULL, &opt, b), RV_OK);
    CHECK(strcmp(a, b) != 0);
    Buf text = {0};
    buf_printf(&text, "# the same schedule, commented\n%s\n\n", sp.cands[0].sched);
    CHECK_EQ_INT(rv_program_code_key(m, buf_str(&text), NULL, &opt, spaced), RV_OK);
    CHECK(strcmp(a, spaced) == 0);
    rv_variant_sizes two = {.nsizes = 1, .at = {{"M", 2}}}, three = {.nsizes = 1, .at = {{"M", 3}}};
    CHECK_EQ_INT(rv_program_code_key(m, sp.cands[0].sched, &two, &opt, at2), RV_OK);
    CHECK_EQ_INT(rv_program_code_key(m, sp.cands[0].sched, &three, &opt, at3), RV_OK);
    CHECK(strcmp(a, at2) != 0 && strcmp(at2, at3) != 0);
    opt.cflags = "-DRAVEL_TEST_KEY=1";
    CHECK_EQ_INT(rv_program_code_key(m, sp.cands[0].sched, NULL, &opt, flagged), RV_OK);
    CHECK(strcmp(a, flagged) != 0);
    /* a schedule that does not lower has no key, and says why */
    opt.cflags = NULL;
    CHECK(rv_program_code_key(m, "schedule Y { split(nosuch, 4) }", NULL, &opt, b) != RV_OK);
    CHECK_EQ_INT(b[0], 0);
    buf_free(&text);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* A record is current where its "code" is the key of the candidate's
 * code today. Records whose generator's sources changed but whose
 * candidates' C did not stay current: a resumed run measures nothing
 * and votes the same (under the older "codegen" key every record went
 * stale on any edit of src/lower or src/codegen). Records of other code
 * (another key, no key: written before the field, or a compiler command
 * with another flag) are hints, not measurements: a run resumed over
 * them searches nothing new (they fill the trial budget) but times the
 * dispatcher's kernel again at every shape (within the verify budget),
 * so its choice rests on times of the code it runs; a second resume
 * measures nothing. */
static void test_stale_records_retimed(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneOptions o = options(6);
    o.verify = 200;
    const char *cc = getenv("RAVEL_CC");
    char *cc_was = cc ? base_xstrdup(cc) : NULL;
    for (int how = 0; how < AGE_COUNT; how++) {
        unlink(records);
        TuneResult r;
        if (tune_run(m, tiny, &o, &r) != RV_OK) {
            CHECK_STR_CONTAINS(rv_last_error(), "(no error: tuning should succeed)");
            break;
        }
        CHECK_EQ_INT(r.stale, 0);
        CHECK_EQ_INT(r.retimed, 0);
        int *first = base_xcalloc((size_t)r.nshapes, sizeof *first);
        memcpy(first, r.shape_variant, sizeof *first * (size_t)r.nshapes);
        tune_result_free(&r);
        int repeated;
        int n = count_records(&repeated);
        age_records((Aging)how);
        if (how == AGE_FLAGS) { /* another flag: other code */
            Buf flagged = {0};
            buf_printf(&flagged, "%s -DRAVEL_TEST_STALE=1", cc_was ? cc_was : "cc");
            setenv("RAVEL_CC", buf_str(&flagged), 1);
            buf_free(&flagged);
        }

        if (how == AGE_SOURCES) { /* the same code: current, nothing measured */
            CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
            CHECK_EQ_INT(r.stale, 0);
            CHECK_EQ_INT(r.reused, n);
            CHECK_EQ_INT(r.measured, 0);
            for (int s = 0; s < r.nshapes; s++)
                CHECK_EQ_INT(r.shape_variant[s], first[s]);
            tune_result_free(&r);
            base_free(first);
            continue;
        }
        base_free(first);
        /* resumed over old records: the dispatcher's kernels timed again */
        CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
        CHECK_EQ_INT(r.stale, n);
        CHECK_EQ_INT(r.reused, n);
        CHECK(r.retimed > 0);
        CHECK(r.retimed <= r.verify_measured);
        CHECK_EQ_INT(r.measured, r.verify_measured);
        for (int s = 0; s < r.nshapes; s++)
            CHECK(has_record(m, r.variant_sched[r.shape_variant[s]], r.shapes[s].v[0], true));
        check_tuned_program(m, &r);
        int *was = base_xcalloc((size_t)r.nshapes, sizeof *was);
        memcpy(was, r.shape_variant, sizeof *was * (size_t)r.nshapes);
        int made = r.measured;
        tune_result_free(&r);
        CHECK_EQ_INT(count_records(&repeated), n + made);

        /* again: nothing measured, the same votes */
        CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
        CHECK_EQ_INT(r.measured, 0);
        CHECK_EQ_INT(r.retimed, 0);
        for (int s = 0; s < r.nshapes; s++)
            CHECK_EQ_INT(r.shape_variant[s], was[s]);
        tune_result_free(&r);
        base_free(was);
        if (cc_was)
            setenv("RAVEL_CC", cc_was, 1);
        else
            unsetenv("RAVEL_CC");
    }
    base_free(cc_was);
    rv_module_free(m);
}

/* A close call is timed twice: records where a non-sketch is 2% faster
 * than a known-good sketch at every M (one timing each, 1 ns: faster than
 * any real kernel, so the best time stays theirs); verification times
 * each of the two again at every M before it finishes, and a resumed run
 * measures nothing. */
static void test_close_call_timed_twice(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    int seed = -1, other = -1;
    for (int c = 0; c < sp.len; c++) {
        if (sp.cands[c].seed && seed < 0)
            seed = c;
        if (!sp.cands[c].seed && other < 0)
            other = c;
    }
    CHECK(seed >= 0 && other >= 0);
    char hex[17];
    hash_hex(hash_str(tiny), hex);
    Buf machine = {0};
    tune_hw_machine_id(tune_hw(), &machine);
    unlink(records);
    for (int64_t M = 1; seed >= 0 && other >= 0 && M <= 9; M++) {
        fake_record(m, records, hex, buf_str(&machine), sp.cands[other].sched, M, 1e-9);
        fake_record(m, records, hex, buf_str(&machine), sp.cands[seed].sched, M, 1.02e-9);
    }
    TuneOptions o = options(18);
    o.verify = 400;
    o.max_variants = 1;
    TuneResult r;
    if (seed >= 0 && other >= 0 && tune_run(m, tiny, &o, &r) == RV_OK) {
        CHECK_EQ_INT(r.close_retimed, 18);
        int repeated, n = count_records(&repeated);
        CHECK_EQ_INT(repeated, 18);
        for (int s = 0; s < r.nshapes; s++)
            CHECK_EQ_INT(strcmp(r.variant_sched[r.shape_variant[s]], sp.cands[other].sched), 0);
        tune_result_free(&r);
        CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
        CHECK_EQ_INT(r.measured, 0);
        CHECK_EQ_INT(r.reused, n);
        tune_result_free(&r);
    }
    buf_free(&machine);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* ---- each kind at the anchor shapes ---- */

/* A kind the model has never seen is measured at the anchor shapes
 * before the dispatcher is built, and wins where it is faster. Records
 * give one candidate of every kind but F (the dot products) at every M
 * of 1..9, each 10 ms, far slower than any real kernel of this size, and
 * the trial budget is theirs: every shape's dispatched kernel was
 * measured there and no verified candidate is of kind F, so the
 * verification without the kinds measures nothing and never sees F. With
 * them, F's best predicted is measured at the 4 anchors (M = 1, 2, 4, 7:
 * 1.5x apart), and the challenges take it to every other M: each shape
 * dispatches a kernel of kind F and matches the interpreter. A resumed
 * run measures nothing. */
static void test_kinds_at_anchors(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny.rv", tiny, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    char hex[17];
    hash_hex(hash_str(tiny), hex);
    Buf machine = {0};
    tune_hw_machine_id(tune_hw(), &machine);
    unlink(records);
    int n = 0;
    for (int c = 0; c < sp.len; c++) {
        bool first = sp.cands[c].tmpl != TUNE_T_DOT;
        for (int q = 0; q < c && first; q++)
            first = sp.cands[q].tmpl != sp.cands[c].tmpl || sp.cands[q].kind != sp.cands[c].kind;
        for (int64_t M = 1; first && M <= 9; M++, n++)
            fake_record(m, records, hex, buf_str(&machine), sp.cands[c].sched, M, 1e-2);
    }
    CHECK(n >= 2 * 9);
    TuneOptions o = options(n);
    o.verify = 120;
    o.batch = 8;
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.reused, n);
    CHECK_EQ_INT(r.kinds_measured, 4);
    CHECK(r.verify_measured >= 4 && r.verify_measured < 120);
    int64_t anchors[] = {1, 2, 4, 7};
    for (int i = 0; i < 4; i++) {
        bool dot = false;
        for (int c = 0; c < sp.len; c++)
            dot |=
                sp.cands[c].tmpl == TUNE_T_DOT && has_record(m, sp.cands[c].sched, anchors[i], false);
        CHECK(dot);
    }
    for (int s = 0; s < r.nshapes; s++) {
        const char *v = r.variant_sched[r.shape_variant[s]];
        bool dot = false;
        for (int c = 0; c < sp.len; c++)
            dot |= sp.cands[c].tmpl == TUNE_T_DOT && strcmp(sp.cands[c].sched, v) == 0;
        CHECK(dot);
    }
    check_tuned_program(m, &r);
    int repeated;
    int total = count_records(&repeated);
    CHECK_EQ_INT(repeated, r.close_retimed);
    CHECK_EQ_INT(total, n + r.measured);
    tune_result_free(&r);

    /* resumed: nothing measured, kinds or otherwise */
    CHECK_EQ_INT(tune_run(m, tiny, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    CHECK_EQ_INT(r.kinds_measured, 0);
    CHECK_EQ_INT(r.reused, total);
    tune_result_free(&r);
    CHECK_EQ_INT(count_records(&repeated), total);
    buf_free(&machine);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* ---- a leaf's own space ---- */

/* A tiny batch_matmul NT: W's rows are T, so a tile padded over j reads
 * W's packed copy past its rows unless T is a multiple of the tile's
 * width (16 lanes of AVX-512, 8 of AVX2: T = 16 is one either way). */
static const char *tiny_nt = "size T in 15..16\n"
                             "input X : f32[2, T, 16]\n"
                             "input W : f32[2, T, 16]\n"
                             "Y[b, i, j] = sum(k < 16) X[b, i, k] * W[b, j, k]\n";

/* Whether `sched` is a candidate of the generic space (sp.cands[0..len)). */
static bool in_generic(const TuneSpace *sp, const char *sched) {
    for (int c = 0; c < sp->len; c++)
        if (strcmp(sp->cands[c].sched, sched) == 0)
            return true;
    return false;
}

/* A tuning run with leaves at T = 15 and 16 measures, at T = 16, a
 * candidate of the leaf's own space (legal only where T is a constant
 * multiple of its tile: not in the generic space), checked against the
 * interpreter (recorded ok, nothing wrong); whatever timing decides, the
 * tuned program is right at both T; a resumed run measures nothing and
 * finds the leaf's records again. */
static void test_leaf_own_space_tuned(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny_nt.rv", tiny_nt, &m), RV_OK);
    char path[160];
    snprintf(path, sizeof path, "%s/leaf_space.jsonl", dir);
    TuneOptions o = options(8);
    o.records = path;
    o.specialize = 2;
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny_nt, &o, &r), RV_OK);
    CHECK_EQ_INT(r.wrong, 0);
    CHECK_EQ_INT(r.failed, 0);
    check_tuned_range(m, &r, "T", 15, 16);
    int spec_measured = r.spec_measured, nspec = r.nspec;
    tune_result_free(&r);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    TuneRecords rs;
    tune_records_init(&rs);
    CHECK_EQ_INT(tune_records_load(path, &rs), RV_OK);
    int own = 0;
    for (int i = 0; i < rs.len; i++) {
        bool leaf_only = !in_generic(&sp, rs.data[i].trace);
        CHECK(!leaf_only || rs.data[i].spec); /* the generic search never tries one */
        if (leaf_only && rs.data[i].size_values[0] == 16 && rs.data[i].status == TUNE_STATUS_OK)
            own++;
    }
    CHECK(own >= 1);
    tune_records_free(&rs);
    tune_space_free(&sp);

    CHECK_EQ_INT(tune_run(m, tiny_nt, &o, &r), RV_OK);
    CHECK_EQ_INT(r.measured, 0);
    CHECK_EQ_INT(r.spec_measured, 0);
    CHECK_EQ_INT(r.spec_reused, spec_measured);
    CHECK_EQ_INT(r.nspec, nspec);
    tune_result_free(&r);
    rv_module_free(m);
}

/* Records (replayed) where a padded tile of the leaf's own space at
 * T = 16 (refused by the generic space) is 10x faster there than the
 * generic kernel: T = 16 gets it as its leaf, compiled for T = 16, and
 * the program is right at T = 15 and 16. */
static void test_leaf_own_space_replayed(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tiny_nt.rv", tiny_nt, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, tune_hw(), &sp), RV_OK);
    int g = 0;
    while (g < sp.len && !sp.cands[g].seed)
        g++;
    rv_variant_sizes at = {.nsizes = 1, .at = {{"T", 16}}};
    int legal[1024], n = tune_space_add_leaf(m, tune_hw(), &at, &sp, legal, 1024), c = -1;
    for (int k = 0; k < n && c < 0; k++)
        if (sp.cands[legal[k]].tmpl == TUNE_T_TILE && sp.cands[legal[k]].p[3])
            c = legal[k];
    CHECK(g < sp.len && c >= sp.len && !in_generic(&sp, sp.cands[c < 0 ? 0 : c].sched));
    if (g >= sp.len || c < 0) {
        tune_space_free(&sp);
        rv_module_free(m);
        return;
    }
    char path[160], hex[17];
    snprintf(path, sizeof path, "%s/leaf_own.jsonl", dir);
    hash_hex(hash_str(tiny_nt), hex);
    Buf machine = {0};
    tune_hw_machine_id(tune_hw(), &machine);
    const char *names[] = {"T"};
    int64_t sixteen = 16;
    for (int64_t T = 15; T <= 16; T++) {
        TuneRecord gen = {.program = hex,
                          .machine = buf_str(&machine),
                          .trace = sp.cands[g].sched,
                          .nsizes = 1,
                          .size_names = names,
                          .size_values = &T,
                          .seconds = 1e-5,
                          .status = TUNE_STATUS_OK,
                          .threads = 1,
                          .code = code_of(m, sp.cands[g].sched, NULL, 0)};
        CHECK_EQ_INT(tune_record_append(path, &gen), RV_OK);
    }
    TuneRecord fast = {.program = hex,
                       .machine = buf_str(&machine),
                       .trace = sp.cands[c].sched,
                       .nsizes = 1,
                       .size_names = names,
                       .size_values = &sixteen,
                       .seconds = 1e-6,
                       .status = TUNE_STATUS_OK,
                       .threads = 1,
                       .spec = true,
                       .code = code_of(m, sp.cands[c].sched, "T", 16)};
    CHECK_EQ_INT(tune_record_append(path, &fast), RV_OK);
    TuneOptions o = options(0);
    o.records = path;
    o.replay = true;
    o.specialize = 0;
    TuneResult r;
    CHECK_EQ_INT(tune_run(m, tiny_nt, &o, &r), RV_OK);
    CHECK_EQ_INT(r.spec_reused, 1);
    CHECK_EQ_INT(r.nspec, 1);
    if (r.nspec == 1) {
        int v = r.nvariants - 1;
        CHECK_EQ_INT((int)r.variant_at[v].at[0].value, 16);
        CHECK(strcmp(r.variant_sched[v], sp.cands[c].sched) == 0);
        CHECK_STR_CONTAINS(r.variant_desc[v], "pad=1");
        int64_t T = 16;
        CHECK_EQ_INT(tune_result_pick(&r, &T, 1), v);
        check_tuned_range(m, &r, "T", 15, 16);
    }
    tune_result_free(&r);
    buf_free(&machine);
    tune_space_free(&sp);
    rv_module_free(m);
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    snprintf(records, sizeof records, "%s/records.jsonl", dir);
    const char *user = getenv("RAVEL_XGBOOST");
    char *saved = user ? strdup(user) : NULL;
    RUN(test_missing_xgboost);
    if (saved)
        setenv("RAVEL_XGBOOST", saved, 1);
    free(saved);
    if (tune_xgb_available() != RV_OK) {
        printf("skipped: XGBoost is not installed: %s\n", rv_last_error());
        return harness_report_named("tests/unit/test_tune_search.c(SKIPPED:no-libxgboost-dev)");
    }
    RUN(test_tiny_tuning);
    RUN(test_never_below_a_sketch);
    RUN(test_sketch_of_each_template);
    RUN(test_missing_sketch_revisited);
    RUN(test_ragged_tuning);
    RUN(test_level_tuning);
    RUN(test_time_estimate);
    RUN(test_clock_by_threads);
    RUN(test_prediction_bounded_by_neighbours);
    RUN(test_vote_back_on_loss);
    RUN(test_specialized_tuning);
    RUN(test_specialized_leaf_replayed);
    RUN(test_spec_neighbour_winner);
    RUN(test_verified_dispatch);
    RUN(test_kinds_at_anchors);
    RUN(test_code_key);
    RUN(test_stale_records_retimed);
    RUN(test_close_call_timed_twice);
    RUN(test_leaf_own_space_tuned);
    RUN(test_leaf_own_space_replayed);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(cmd), 0);
    return harness_report();
}
