/*
 * test_sched.c — schedules: the table of primitives (src/sched/prims.def:
 * every row parses, uniform shape errors, the unknown-primitive list) and
 * the notes a stage carries.
 */
#include <string.h>

#include "harness.h"
#include "sched/sched.h"

#define CHECK_STR_EQ(got, want)                                                                    \
    do {                                                                                           \
        const char *hg_ = (got), *hw_ = (want);                                                    \
        int ok_ = hg_ && strcmp(hg_, hw_) == 0;                                                    \
        CHECK(ok_ && "strings equal");                                                             \
        if (!ok_)                                                                                  \
            fprintf(stderr, "    %s = \"%s\", expected \"%s\"\n", #got, hg_ ? hg_ : "(null)", hw_);  \
    } while (0)

static rv_module *parse_ok(const char *text) {
    rv_module *m = NULL;
    rv_status st = rv_module_parse("t.rv", text, &m);
    CHECK(st == RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "%s\n", rv_last_error());
    return m;
}

static const char *const gemm = "size M in 1..64\nsize N in 1..64\nsize K in 1..64\n"
                                "input A : f32[M, K]\ninput B : f32[K, N]\n"
                                "C[i < M, j < N] = sum(k < K) A[i, k] * B[k, j]\n";

/* Applies `steps` to stage `target` of a fresh GEMM; the check's status. */
static rv_status apply(const char *target, const char *steps) {
    rv_module *m = parse_ok(gemm);
    if (!m)
        return RV_ERR_ARG;
    rv_status st = rv_module_schedule(m, target, steps);
    if (st == RV_OK)
        st = rv_module_check_schedule(m);
    rv_module_free(m);
    return st;
}

/* Every row's params and keys parse, name kinds the checker knows, and put
 * optional parameters after the required ones; the help lists each row. */
static void test_table_rows(void) {
    Buf help = {0};
    sched_prims_help(&help);
    CHECK(sched_nprims >= 14);
    for (int i = 0; i < sched_nprims; i++) {
        const SchedPrim *p = &sched_prims[i];
        SchedParam ps[SCHED_MAX_PARAMS];
        int n = sched_prim_params(p->params, ps, SCHED_MAX_PARAMS);
        bool opt = false;
        for (int k = 0; k < n; k++) {
            CHECK(ps[k].kind < PK_COUNT);
            CHECK(!opt || ps[k].optional); /* no required one after an optional one */
            CHECK(!ps[k].repeated || k == n - 1);
            opt |= ps[k].optional;
        }
        int nk = sched_prim_params(p->keys, ps, SCHED_MAX_PARAMS);
        for (int k = 0; k < nk; k++)
            CHECK(!ps[k].repeated);
        CHECK(sched_prim_find(p->name) == p);
        Buf u = {0};
        sched_prim_usage(&u, p);
        CHECK(strstr(buf_str(&help), buf_str(&u)) != NULL);
        CHECK(strstr(buf_str(&help), p->doc) != NULL);
        buf_free(&u);
    }
    CHECK(sched_prim_find("spilt") == NULL);
    Buf u = {0};
    sched_prim_usage(&u, sched_prim_find("cache_read"));
    CHECK_STR_CONTAINS(buf_str(&u), "L = cache_read(X [, \"scope\"] [, pad=N] [, align=N]");
    buf_free(&u);
    buf_free(&help);
}

/* A call of the wrong shape gets one message, the same for every
 * primitive, located at the step or at the argument. */
static void test_shape_errors(void) {
    static const struct {
        const char *steps, *want;
    } cases[] = {
        {"io = split(i)", "2:6: error: split: takes 2 arguments, got 1 (usage: o, i = split(v, F"},
        {"io, ii = split(i, 2, 3)", "split: takes 2 arguments, got 3"},
        {"io = split(i, 2)", "split: names 2 results, got 1 (usage: o, i = split("},
        {"f = parallel(i)", "parallel: gives no names; write it without `... =`"},
        {"io, ii = split(i, \"4\")", "2:19: error: split: argument 2 (F) must be an integer, not a string"},
        {"io, ii = split(4, 4)", "2:16: error: split: argument 1 (v) must be a loop of C, not an integer"},
        {"io, ii = split(i, 4, tail=1)", "split: tail= must be a quoted string, not an integer"},
        {"io, ii = split(i, 4, tial=\"guard\")", "split: unknown keyword argument 'tial'"},
        {"io, ii = split(i, 4, tail=\"guard\", tail=\"guard\")", "keyword 'tail' given twice"},
        {"reorder()", "reorder: takes at least 1 argument, got 0 (usage: reorder(v, ...))"},
        {"reorder(i, 3)", "reorder: argument 2 (v) must be a loop of C, not an integer"},
        {"compute_at(C, i, j)", "compute_at: takes 1 to 2 arguments, got 3"},
        {"L = cache_read(\"A\")", "cache_read: argument 1 (X) must be the name of a tensor"},
        {"L = cache_write(C, local)", "cache_write: argument 2 (scope) must be a quoted string, not a name"},
        {"spilt(i, 2)", "unknown schedule primitive 'spilt'; did you mean 'split'? (known: split, fuse,"},
        {"frobnicate(i)", "unknown schedule primitive 'frobnicate' (known: split"},
    };
    for (int i = 0; i < RV_COUNT(cases); i++) {
        CHECK(apply("C", cases[i].steps) == RV_ERR_SCHEDULE);
        CHECK_STR_CONTAINS(rv_last_error(), cases[i].want);
    }
    /* values stay the handlers' */
    CHECK(apply("C", "io, ii = split(i, 0)") == RV_ERR_SCHEDULE);
    CHECK_STR_CONTAINS(rv_last_error(), "split: the factor must be in 1..");
    CHECK(apply("C", "io, ii = split(i, 4, tail=\"guard\")  reorder(k, io)") == RV_OK);
}

/* Notes (recursion and batching annotations) are printed with the stage;
 * setting a kind again replaces its payload. */
static void test_stage_notes(void) {
    rv_module *m = parse_ok(gemm);
    if (!m)
        return;
    Schedule *s;
    CHECK(sched_from_module(m, &s) == RV_OK);
    Stage *c = sched_stage(s, "C");
    sched_stage_note(c, NOTE_DYNAMIC_BATCH, 8);
    sched_stage_note(c, NOTE_BATCH, 2);
    sched_stage_note(c, NOTE_DYNAMIC_BATCH, 16);
    CHECK_EQ_INT(c->nnotes, 2);
    Buf b = {0};
    sched_print_stage(&b, c);
    CHECK_STR_CONTAINS(buf_str(&b), "stage C (root, dynamic_batch=16, batch=2): i j k(r)");
    buf_free(&b);
    sched_free(s);
    rv_module_free(m);
}

int main(void) {
    RUN(test_table_rows);
    RUN(test_shape_errors);
    RUN(test_stage_notes);
    return harness_report();
}
