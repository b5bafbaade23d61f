/*
 * test_sched.c — schedules: the table of primitives (src/sched/prims.def:
 * every row parses, uniform shape errors, the unknown-primitive list) and
 * the structured query of stages and loops (rv_module_schedule_info) and
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
            fprintf(stderr, "    %s = \"%s\", expected \"%s\"\n", #got, hg_ ? hg_ : "(null)",      \
                    hw_);                                                                          \
    } while (0)

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
        {"io, ii = split(i, \"4\")",
         "2:19: error: split: argument 2 (F) must be an integer, not a string"},
        {"io, ii = split(4, 4)",
         "2:16: error: split: argument 1 (v) must be a loop of C, not an integer"},
        {"io, ii = split(i, 4, tail=1)", "split: tail= must be a quoted string, not an integer"},
        {"io, ii = split(i, 4, tial=\"guard\")",
         "split: unknown keyword argument 'tial'; did you mean 'tail'? (usage: "},
        {"io, ii = split(i, 4, tail=\"guard\", tail=\"guard\")", "keyword 'tail' given twice"},
        {"L = cache_read(A, zz=1)",
         "cache_read: unknown keyword argument 'zz' (usage: L = cache_read("},
        {"reorder()", "reorder: takes at least 1 argument, got 0 (usage: reorder(v, ...))"},
        {"reorder(i, 3)", "reorder: argument 2 (v) must be a loop of C, not an integer"},
        {"compute_at(C, i, j)", "compute_at: takes 1 to 2 arguments, got 3"},
        {"L = cache_read(\"A\")", "cache_read: argument 1 (X) must be the name of a tensor"},
        {"L = cache_write(C, local)",
         "cache_write: argument 2 (scope) must be a quoted string, not a name"},
        {"spilt(i, 2)",
         "unknown schedule primitive 'spilt'; did you mean 'split'? (known: split, fuse,"},
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

/* ---- the query ---- */

static const rv_loop_info *loop_at(const rv_stage_info *st, int k) {
    return st && k < st->nloops ? &st->loops[k] : NULL;
}

/* The default schedule: one root stage per tensor, its axes then its
 * reduction's, serial. */
static void test_query_default(void) {
    rv_module *m = parse_ok(gemm);
    if (!m)
        return;
    rv_schedule_info *q = rv_module_schedule_info(m);
    CHECK(q != NULL);
    CHECK_EQ_INT(rv_schedule_info_num_stages(q), 1);
    const rv_stage_info *c = rv_schedule_info_find(q, "C");
    CHECK(c && c == rv_schedule_info_stage(q, 0));
    CHECK(rv_schedule_info_find(q, "A") == NULL); /* inputs are no stages */
    if (c) {
        CHECK(c->kind == RV_STAGE_TENSOR && c->attach == RV_ATTACH_ROOT && !c->at_stage);
        CHECK_EQ_INT(c->nloops, 3);
        const char *names[] = {"i", "j", "k"}, *ext[] = {"M", "N", "K"};
        for (int k = 0; k < 3 && k < c->nloops; k++) {
            CHECK_STR_EQ(c->loops[k].name, names[k]);
            CHECK_STR_EQ(c->loops[k].extent, ext[k]);
            CHECK(c->loops[k].kind == RV_LOOP_SERIAL);
            CHECK_STR_EQ(c->loops[k].kind_name, "serial");
            CHECK(c->loops[k].origin == RV_LOOP_AXIS && c->loops[k].pad == 1);
            CHECK_EQ_INT(c->loops[k].reduce, k == 2);
        }
        CHECK_EQ_INT(c->nnotes, 0);
    }
    CHECK(rv_schedule_info_stage(q, 1) == NULL && rv_schedule_info_stage(q, -1) == NULL);
    rv_schedule_info_free(q);
    rv_module_free(m);
}

/* Splits, fuses, kinds, cache stages and placement, as the trace says. */
static void test_query_steps(void) {
    rv_module *m = parse_ok(gemm);
    if (!m)
        return;
    CHECK(rv_module_schedule(m, "C",
                             "CL = cache_write(C, \"local\", pad=1)\n"
                             "io, ii = split(i, 32)  jo, ji = split(j, 8)\n"
                             "reorder(io, jo, ii, ji)  f = fuse(io, jo)  parallel(f)\n"
                             "compute_at(CL, f)  vectorize(ji)") == RV_OK);
    CHECK(rv_module_schedule(m, "CL", "ko, ki = split(k, 4)  unroll(ki)") == RV_OK);
    rv_schedule_info *q = rv_module_schedule_info(m);
    CHECK(q != NULL);
    const rv_stage_info *c = rv_schedule_info_find(q, "C"), *cl = rv_schedule_info_find(q, "CL");
    CHECK(c && cl);
    if (!c || !cl) {
        rv_schedule_info_free(q);
        rv_module_free(m);
        return;
    }
    /* the cache stage comes before its reader */
    CHECK(rv_schedule_info_stage(q, 0) == cl && rv_schedule_info_stage(q, 1) == c);
    CHECK(cl->kind == RV_STAGE_CACHE_WRITE && cl->attach == RV_ATTACH_AT && cl->padded);
    CHECK_STR_EQ(cl->at_stage, "C");
    CHECK_STR_EQ(cl->at_loop, "f");
    CHECK_EQ_INT(c->nloops, 3);
    const rv_loop_info *f = loop_at(c, 0), *ii = loop_at(c, 1), *ji = loop_at(c, 2);
    if (f && ii && ji) {
        CHECK_STR_EQ(f->name, "f");
        CHECK(f->origin == RV_LOOP_FUSED && f->kind == RV_LOOP_PARALLEL);
        CHECK_STR_EQ(f->fused_outer, "io");
        CHECK_STR_EQ(f->fused_inner, "jo");
        CHECK_STR_EQ(f->extent, "(M + 31) / 32 * ((N + 7) / 8)");
        CHECK(ii->origin == RV_LOOP_INNER && ii->factor == 32 && !ii->reduce);
        CHECK_STR_EQ(ii->parent, "i");
        CHECK_STR_EQ(ii->extent, "32");
        CHECK(ji->kind == RV_LOOP_VECTOR);
        CHECK_STR_EQ(ji->kind_name, "vector");
    }
    /* CL: its axes (named like C's), then k split */
    CHECK_EQ_INT(cl->nloops, 4);
    const rv_loop_info *ko = loop_at(cl, 2), *ki = loop_at(cl, 3);
    if (ko && ki) {
        CHECK(ko->origin == RV_LOOP_OUTER && ko->reduce && ko->factor == 4);
        CHECK_STR_EQ(ko->parent, "k");
        CHECK_STR_EQ(ko->extent, "(K + 3) / 4");
        CHECK(ki->kind == RV_LOOP_UNROLL && ki->reduce);
    }
    rv_schedule_info_free(q);
    /* the module is unchanged: the same query again */
    q = rv_module_schedule_info(m);
    CHECK(q && rv_schedule_info_num_stages(q) == 2);
    rv_schedule_info_free(q);
    /* an illegal step: NULL and the located error */
    CHECK(rv_module_schedule(m, "C", "parallel(ii)") == RV_OK);
    CHECK(rv_module_schedule_info(m) == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "parallel: C already has a parallel loop (f)");
    rv_module_free(m);
    CHECK(rv_module_schedule_info(NULL) == NULL);
}

/* Inlined stages have no loops; pad(v, N) shows in the extent; ragged
 * extents print over their outer axis. */
static void test_query_inline_pad_ragged(void) {
    rv_module *m =
        parse_ok("size B in 1..8\nufun len[b < B] in 0..16\ninput X : f32[B, 16]\n"
                 "T[b < B, l < len[b]] = X[b, l] * 2\nY[b < B, l < len[b]] = T[b, l] + 1\n"
                 "input Z : f32[B]\nP[b < B] = Z[b] * 2\nQ[b < B] = P[b] + 1\n"
                 "R[b < B] = f32(b) * 2\n");
    if (!m)
        return;
    CHECK(rv_module_schedule(m, "Q", "compute_inline(P)") == RV_OK);
    CHECK(rv_module_schedule(m, "R", "storage_pad(b, 4)  pad(b, 4)") == RV_OK);
    rv_schedule_info *q = rv_module_schedule_info(m);
    CHECK(q != NULL);
    const rv_stage_info *p = rv_schedule_info_find(q, "P"), *r = rv_schedule_info_find(q, "R"),
                        *y = rv_schedule_info_find(q, "Y");
    CHECK(p && p->attach == RV_ATTACH_INLINE && p->nloops == 0);
    const rv_loop_info *b = loop_at(r, 0);
    CHECK(b && b->pad == 4);
    if (b)
        CHECK_STR_EQ(b->extent, "(B + 3) / 4 * 4");
    const rv_loop_info *l = loop_at(y, 1);
    if (l)
        CHECK_STR_EQ(l->extent, "len[b]");
    rv_schedule_info_free(q);
    rv_module_free(m);
}

/* Notes (recursion and batching annotations) are carried to the query and
 * printed with the stage; setting a kind again replaces its payload. */
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
    rv_schedule_info *q = sched_query(s);
    const rv_stage_info *qc = rv_schedule_info_find(q, "C");
    CHECK(qc && qc->nnotes == 2);
    if (qc && qc->nnotes == 2) {
        CHECK(qc->notes[0].kind == RV_NOTE_DYNAMIC_BATCH && qc->notes[0].payload == 16);
        CHECK(qc->notes[1].kind == RV_NOTE_BATCH && qc->notes[1].payload == 2);
    }
    rv_schedule_info_free(q);
    sched_free(s);
    rv_module_free(m);
}

/* A fused variable loop (issue 14): its extent is the sum of the inner
 * extents, rounded up when bulk padded; its parts are the axes fused. */
static void test_query_variable_fuse(void) {
    rv_module *m = parse_ok("size B in 0..8\n"
                            "ufun len[b < B] in 0..9\n"
                            "Y[b < B, l < len[b], d < 4] = f32(d)\n");
    if (!m)
        return;
    CHECK(rv_module_schedule(m, "Y", "f = fuse(b, l)  storage_pad(f, 8)  pad(f, 8)") == RV_OK);
    rv_schedule_info *q = rv_module_schedule_info(m);
    if (!q)
        fprintf(stderr, "%s\n", rv_last_error());
    const rv_stage_info *y = q ? rv_schedule_info_find(q, "Y") : NULL;
    const rv_loop_info *f = y ? loop_at(y, 0) : NULL;
    CHECK(f != NULL);
    if (f) {
        CHECK(f->origin == RV_LOOP_FUSED);
        CHECK_STR_EQ(f->fused_outer, "b");
        CHECK_STR_EQ(f->fused_inner, "l");
        CHECK_STR_EQ(f->extent, "(sum(b < B) max(len[b], 0) + 7) / 8 * 8");
    }
    rv_schedule_info_free(q);
    rv_module_free(m);
}

/* A split layout (layout="j/16, k, j%16", docs/schedules.md): every
 * dimension once, whole or as a panel and its offset in the panel with
 * one positive constant; each bad form refused at its part of the string
 * (the step is line 2 of the schedule's text, the string's first
 * character at column 28). */
static void test_layout_split(void) {
    static const char *const good[] = {
        "BL = cache_read(B, layout=\"j/16, k, j%16\")",
        "BL = cache_read(B, layout=\"k, j/4, j%4\")",
        "BL = cache_read(B, layout=\"j%8, k, j/8\")",
        "BL = cache_read(B, layout=\"j / 16 , k , j % 16\")",
        "BL = cache_read(B, layout=\"j/16, k/2, j%16, k%2\")",
        "BL = cache_read(B, layout=\"j/100, k, j%100\")", /* larger than N: one padded panel */
        "CL = cache_write(C, layout=\"j/16, i, j%16\")",
    };
    for (int i = 0; i < (int)RV_COUNT(good); i++) {
        rv_status st = apply("C", good[i]);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK)
            fprintf(stderr, "    %s: %s\n", good[i], rv_last_error());
    }
    static const struct {
        const char *layout, *col, *msg;
    } bad[] = {
        {"j/0, k, j%0", ":2:30:", "the panel size in j/0 must be a positive integer constant"},
        {"j/N, k, j%N", ":2:30:", "the panel size in j/N must be a positive integer constant"},
        {"j/-4, k, j%4", ":2:30:", "the panel size in j/-4 must be a positive"},
        {"x/16, k, x%16", ":2:28:", "no dimension named 'x'"},
        {"j/16, k, j%16, k", ":2:43:", "k is named twice"},
        {"j, k, j%16", ":2:34:", "j is named twice"},
        {"j/16, j/16, k, j%16", ":2:34:", "j is named twice"},
        {"j/16, k", ":2:28:", "j is split: name its panel j/16 and its offset j%16"},
        {"k, j%16", ":2:31:", "j is split: name its panel j/16 and its offset j%16"},
        {"j/16, k, j%8", ":2:37:", "j/16 and j%8: one panel size for both"},
        {"j/16, j%16", ":2:28:", "k is missing"},
        {"j/16 k, j%16", ":2:33:", "expected ',' between dimensions"},
        {"j/16, , k, j%16", ":2:34:", "expected a dimension's name"},
    };
    for (int i = 0; i < (int)RV_COUNT(bad); i++) {
        char step[128];
        snprintf(step, sizeof step, "BL = cache_read(B, layout=\"%s\")", bad[i].layout);
        CHECK_EQ_INT(apply("C", step), RV_ERR_SCHEDULE);
        CHECK_STR_CONTAINS(rv_last_error(), bad[i].msg);
        CHECK_STR_CONTAINS(rv_last_error(), bad[i].col);
    }
}

/* A loop whose extent mentions a split axis moves above the split's inner
 * part only where the extent, the axis written over its parts and
 * simplified with their ranges, no longer mentions it: k < i/6*6 is
 * k < io*6 for every ii < 6 after split(i, 6), not after split(i, 4). */
static void test_variable_extent_reorder(void) {
    static const char *const tri = "size N in 1..40\ninput A : f32[N, N]\n"
                                   "C[i < N] = sum(k < i / 6 * 6) A[i, k]\n"
                                   "D[i < N] = sum(k < i) A[i, k]\n";
    static const struct {
        const char *target, *steps;
        bool ok;
    } cases[] = {
        {"C", "io, ii = split(i, 6)  reorder(io, k, ii)", true},
        {"C", "io, ii = split(i, 6)  a, b = split(ii, 2)  reorder(io, k, a, b)", true},
        {"C", "io, ii = split(i, 4)  reorder(io, k, ii)", false},
        {"C", "reorder(k, i)", false},
        {"D", "io, ii = split(i, 6)  reorder(io, k, ii)", false},
    };
    for (int i = 0; i < RV_COUNT(cases); i++) {
        rv_module *m = parse_ok(tri);
        if (!m)
            return;
        rv_status st = rv_module_schedule(m, cases[i].target, cases[i].steps);
        if (st == RV_OK)
            st = rv_module_check_schedule(m);
        CHECK_EQ_INT(st, cases[i].ok ? RV_OK : RV_ERR_SCHEDULE);
        if (!cases[i].ok)
            CHECK_STR_CONTAINS(rv_last_error(), "must stay inside loop");
        rv_module_free(m);
    }
}

/* split(v, F, tail="merge"): its outer loop stays one loop with the inner
 * loops inside it, its loops are no GPU indices, and its inner loop has
 * no constant extent (the merged block: F..2F-1); each refusal names the
 * rule, and the trace prints the step back. */
static void test_merge_tail(void) {
    static const struct {
        const char *steps, *want;
    } bad[] = {
        {"io, ii = split(i, 4, tail=\"merge\")  bind(io, \"blockIdx.x\")",
         "loop io comes from a split with tail=\"merge\", which a GPU index cannot run"},
        {"io, ii = split(i, 4, tail=\"merge\")  a, b = split(ii, 2)  bind(b, \"threadIdx.x\")",
         "loop b comes from a split with tail=\"merge\""},
        {"io, ii = split(i, 4, tail=\"merge\")  vectorize(ii)",
         "the extent of ii is not a constant: the merged last block of split(i, 4, "
         "tail=\"merge\") has up to 7 iterations"},
        {"io, ii = split(i, 4, tail=\"merge\")  unroll(ii)", "the extent of ii is not a constant"},
        {"io, ii = split(i, 4, tail=\"merge\")  a, b = split(io, 2)",
         "loop io is the outer loop of a split with tail=\"merge\": it stays one loop"},
        {"io, ii = split(i, 4, tail=\"merge\")  f = fuse(io, ii)",
         "loop io is the outer loop of a split with tail=\"merge\""},
        {"io, ii = split(i, 4, tail=\"merge\")  reorder(ii, io)",
         "loop ii must stay inside loop io: split(i, 4, tail=\"merge\") makes the extent of ii "
         "depend on io"},
        {"io, ii = split(i, 4, tail=\"merge\")  a, b = split(ii, 2)  reorder(b, io)",
         "loop b must stay inside loop io"},
        {"io, ii = split(i, 4, tail=\"merged\")",
         "tail must be \"partition\", \"guard\" or \"merge\""},
    };
    for (int i = 0; i < RV_COUNT(bad); i++) {
        CHECK(apply("C", bad[i].steps) == RV_ERR_SCHEDULE);
        CHECK_STR_CONTAINS(rv_last_error(), bad[i].want);
    }
    /* legal: the inner loop split again (its parts vectorized), fused with
     * a loop inside, the outer one parallel, a reduction loop merged */
    CHECK(apply("C", "io, ii = split(i, 4, tail=\"merge\")  a, b = split(ii, 2)  "
                     "parallel(io)  unroll(b)") == RV_OK);
    CHECK(apply("C", "io, ii = split(i, 4, tail=\"merge\")  f = fuse(ii, j)") == RV_OK);
    CHECK(apply("C", "ko, ki = split(k, 8, tail=\"merge\")") == RV_OK);
    CHECK(apply("C", "xo, yo, xi, yi = tile(i, j, 4, 4, tail=\"merge\")") == RV_OK);
    rv_module *m = parse_ok(gemm);
    if (!m)
        return;
    CHECK(rv_module_schedule(m, "C", "io, ii = split(i, 4, tail=\"merge\")") == RV_OK);
    char *trace = rv_module_schedule_trace(m);
    CHECK_STR_CONTAINS(trace, "io, ii = split(i, 4, tail=\"merge\")");
    rv_free(trace);
    rv_module_free(m);
}

int main(void) {
    RUN(test_table_rows);
    RUN(test_shape_errors);
    RUN(test_query_default);
    RUN(test_query_steps);
    RUN(test_query_inline_pad_ragged);
    RUN(test_stage_notes);
    RUN(test_query_variable_fuse);
    RUN(test_layout_split);
    RUN(test_variable_extent_reorder);
    RUN(test_merge_tail);
    return harness_report();
}
