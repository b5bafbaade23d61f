/*
 * test_param.c — inputs declared constant across runs (`param W : ...`,
 * rv_input_set_param): the flag survives the printer and the parser, the
 * verifier refuses it on a computed tensor, the C API sets it on inputs
 * only, and every binding of an input gets a stamp of its own (what a
 * program keeping data derived from a param compares before reusing it):
 * a new one when the same array is bound again, when another is, and in
 * another bindings object. Then compiled runs of a program whose param W
 * has a pack the program keeps (and V one it cannot: its shape holds a
 * size): the interpreter's results on the first run, on repeated runs, after
 * W is bound to another array and to the same array with new contents,
 * with two bindings objects in turn, with another N, after
 * rv_program_invalidate, and on threads at once; the program's
 * pack_fills counter shows the pack filled exactly when it must be.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "harness.h"
#include "interp/interp.h"
#include "ir/ir.h"

static const char *const program = "size N in 1..64\n"
                                   "param W : f32[4, N]\n"
                                   "input x : f32[N]\n"
                                   "Y[j < 4] = sum(l < N) W[j, l] * x[l]\n";

static void test_roundtrip(void) {
    rv_module *m = parse_ok(program);
    if (!m)
        return;
    CHECK(rv_tensor_is_param(rv_module_tensor(m, "W")));
    CHECK(!rv_tensor_is_param(rv_module_tensor(m, "x")));
    char *text = rv_module_print(m);
    CHECK_STR_CONTAINS(text, "param W : f32[4, N]");
    CHECK_STR_CONTAINS(text, "input x : f32[N]");
    rv_module *m2 = parse_ok(text);
    if (m2) {
        char *again = rv_module_print(m2);
        CHECK(strcmp(text, again) == 0);
        CHECK(rv_tensor_is_param(rv_module_tensor(m2, "W")));
        rv_free(again);
        rv_module_free(m2);
    }
    rv_free(text);
    rv_module_free(m);
}

/* `param` is a word, not a keyword: a tensor may still be named so. */
static void test_word(void) {
    rv_module *m = parse_ok("param[i < 4] = 1.0\noutput param\n");
    if (m) {
        CHECK(!rv_tensor_is_param(rv_module_tensor(m, "param")));
        rv_module_free(m);
    }
}

static void test_api(void) {
    rv_module *m = parse_ok(program);
    if (!m)
        return;
    rv_tensor *x = rv_module_tensor(m, "x"), *y = rv_module_tensor(m, "Y");
    CHECK_EQ_INT(rv_input_set_param(x, 1), RV_OK);
    CHECK(rv_tensor_is_param(x));
    CHECK_EQ_INT(rv_module_verify(m), RV_OK);
    CHECK_EQ_INT(rv_input_set_param(x, 0), RV_OK);
    CHECK(!rv_tensor_is_param(x));
    CHECK_EQ_INT(rv_input_set_param(y, 1), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "'Y' is not an input");
    /* the verifier catches the flag set behind the API's back */
    y->param = true;
    CHECK(rv_module_verify(m) != RV_OK);
    CHECK_STR_CONTAINS(rv_last_error(), "marked param");
    y->param = false;
    rv_module_free(m);
}

static void test_stamps(void) {
    rv_module *m = parse_ok(program);
    if (!m)
        return;
    const Tensor *w = rv_module_tensor(m, "W");
    rv_bindings *b1 = rv_bindings_new(m), *b2 = rv_bindings_new(m);
    CHECK(interp_bindings_stamp(b1, w) == 0); /* unbound */
    int64_t shape[2] = {4, 8};
    rv_array *a = rv_array_new(RV_F32, 2, shape), *c = rv_array_new(RV_F32, 2, shape);
    CHECK_EQ_INT(rv_bindings_set_array(b1, "W", a), RV_OK);
    uint64_t s1 = interp_bindings_stamp(b1, w);
    CHECK(s1 != 0);
    CHECK(interp_bindings_stamp(b1, w) == s1); /* reading keeps it */
    CHECK_EQ_INT(rv_bindings_set_array(b1, "W", a), RV_OK);
    uint64_t s2 = interp_bindings_stamp(b1, w);
    CHECK(s2 != 0 && s2 != s1); /* the same array, bound again */
    CHECK_EQ_INT(rv_bindings_set_array(b1, "W", c), RV_OK);
    uint64_t s3 = interp_bindings_stamp(b1, w);
    CHECK(s3 != s1 && s3 != s2);
    CHECK_EQ_INT(rv_bindings_set_array(b2, "W", c), RV_OK); /* another bindings object */
    uint64_t s4 = interp_bindings_stamp(b2, w);
    CHECK(s4 != s1 && s4 != s2 && s4 != s3);
    CHECK(interp_bindings_stamp(b1, w) == s3);
    /* a drawn input is a binding too */
    rv_bindings *b3 = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_size(b3, "N", 8), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(b3, 1), RV_OK);
    uint64_t s5 = interp_bindings_stamp(b3, w);
    CHECK(s5 != 0 && s5 != s1 && s5 != s2 && s5 != s3 && s5 != s4);
    rv_bindings_free(b3);
    rv_bindings_free(b1);
    rv_bindings_free(b2);
    rv_array_free(a);
    rv_array_free(c);
    rv_module_free(m);
}

/* ---- runs of a compiled program ---- */

static char cache_dir[64];

static const char *const packed = "size N in 1..300\n"
                                  "param W : f32[48, 40]\n"
                                  "param V : f32[N, 8]\n"
                                  "input x : f32[N, 40]\n"
                                  "Y[n, j < 48] = sum(l < 40) W[j, l] * x[n, l]\n"
                                  "Z[n, k < 8] = sum(m < N) V[m, k] * Y[m, k] + x[n, k]\n"
                                  "output Y, Z\n"
                                  "schedule Y {\n"
                                  "    W_pk = cache_read(W, layout=\"l, j\")\n"
                                  "    parallel(n)\n"
                                  "    jo, ji = split(j, 16)\n"
                                  "    vectorize(ji)\n"
                                  "}\n"
                                  "schedule Z { V_pk = cache_read(V, layout=\"k, m\") }\n";

static rv_array *draw(int64_t rows, int64_t cols, unsigned seed) {
    int64_t shape[2] = {rows, cols};
    rv_array *a = rv_array_new(RV_F32, 2, shape);
    for (int64_t i = 0; i < rows * cols; i++)
        rv_array_set_f64(a, i, (double)((i * 7919 + seed * 104729) % 2001) / 1000.0 - 1.0);
    return a;
}

typedef struct Args {
    rv_array *W, *V, *x;
    int64_t n;
} Args;

static void bind(rv_bindings *b, const Args *a) {
    CHECK_EQ_INT(rv_bindings_set_size(b, "N", a->n), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(b, "W", a->W), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(b, "V", a->V), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(b, "x", a->x), RV_OK);
}

static int64_t fills(const rv_program *p) {
    rv_program_counters c;
    rv_program_stats(p, &c);
    return c.pack_fills;
}

/* Runs p on got (bound to a's arrays, perhaps long ago), and the
 * interpreter on the same arrays; the results must agree. */
static void run_and_compare(rv_module *m, rv_program *p, rv_bindings *got, const Args *a) {
    rv_bindings *want = rv_bindings_new(m);
    bind(want, a);
    CHECK_EQ_INT(rv_interp_run(m, want), RV_OK);
    CHECK_EQ_INT(rv_program_run(p, got), RV_OK);
    CHECK_SAME_TENSOR(want, got, "Y", 1e-4);
    CHECK_SAME_TENSOR(want, got, "Z", 1e-3);
    rv_bindings_free(want);
}

static rv_program *compile(rv_module *m, int threads) {
    rv_compile_options opt = {.cache_dir = cache_dir, .threads = threads};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile(m, &opt, &p), RV_OK);
    return p;
}

static void test_kept(void) {
    rv_module *m = parse_ok(packed);
    rv_program *p = m ? compile(m, 0) : NULL;
    if (!p) {
        rv_module_free(m);
        return;
    }
    Args a = {draw(48, 40, 1), draw(17, 8, 2), draw(17, 40, 3), 17};
    rv_bindings *b = rv_bindings_new(m);
    bind(b, &a);
    run_and_compare(m, p, b, &a); /* the first run fills W's pack */
    CHECK_EQ_INT(fills(p), 1);
    for (int i = 0; i < 3; i++)
        run_and_compare(m, p, b, &a); /* and the next ones reuse it */
    CHECK_EQ_INT(fills(p), 1);

    /* W bound to another array */
    rv_array *w2 = draw(48, 40, 4);
    Args a2 = a;
    a2.W = w2;
    CHECK_EQ_INT(rv_bindings_set_array(b, "W", w2), RV_OK);
    run_and_compare(m, p, b, &a2);
    CHECK_EQ_INT(fills(p), 2);

    /* the same array with new contents, bound again */
    for (int64_t i = 0; i < 48 * 40; i++)
        rv_array_set_f64(w2, i, rv_array_get_f64(w2, i) * -0.5);
    CHECK_EQ_INT(rv_bindings_set_array(b, "W", w2), RV_OK);
    run_and_compare(m, p, b, &a2);
    CHECK_EQ_INT(fills(p), 3);

    /* another N: W's pack holds no size, V's (made every run) does */
    rv_array *v3 = draw(29, 8, 5), *x3 = draw(29, 40, 6);
    Args a3 = {w2, v3, x3, 29};
    CHECK_EQ_INT(rv_bindings_set_size(b, "N", 29), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(b, "V", v3), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(b, "x", x3), RV_OK);
    run_and_compare(m, p, b, &a3);
    CHECK_EQ_INT(fills(p), 3);

    /* written in place without binding again: the promise is broken, and
     * rv_program_invalidate is the way to say so */
    for (int64_t i = 0; i < 48 * 40; i++)
        rv_array_set_f64(w2, i, rv_array_get_f64(w2, i) + 0.25);
    rv_program_invalidate(p);
    run_and_compare(m, p, b, &a3);
    CHECK_EQ_INT(fills(p), 4);

    /* two bindings objects in turn: each run re-packs, none reads the
     * other's pack */
    rv_bindings *c = rv_bindings_new(m);
    bind(c, &a);
    for (int i = 0; i < 2; i++) {
        run_and_compare(m, p, c, &a);
        run_and_compare(m, p, b, &a3);
    }
    CHECK_EQ_INT(fills(p), 8);
    run_and_compare(m, p, b, &a3); /* b's again: its pack is the kept one */
    CHECK_EQ_INT(fills(p), 8);

    rv_bindings_free(b);
    rv_bindings_free(c);
    rv_array_free(a.W);
    rv_array_free(a.V);
    rv_array_free(a.x);
    rv_array_free(w2);
    rv_array_free(v3);
    rv_array_free(x3);
    rv_program_free(p);
    rv_module_free(m);
}

/* Runs on threads at once, each with its own bindings and its own W:
 * every result is its own W's, however the kept pack changes hands. */
typedef struct Worker {
    rv_module *m;
    rv_program *p;
    Args a;
    int bad;
} Worker;

static void *work(void *arg) {
    Worker *w = arg;
    rv_bindings *want = rv_bindings_new(w->m), *got = rv_bindings_new(w->m);
    bind(want, &w->a);
    bind(got, &w->a);
    w->bad = rv_interp_run(w->m, want) != RV_OK;
    for (int i = 0; i < 20 && !w->bad; i++) {
        if (i % 3 == 0) /* now and then a new binding of the same array */
            rv_bindings_set_array(got, "W", w->a.W);
        if (rv_program_run(w->p, got) != RV_OK) {
            w->bad = 1;
            break;
        }
        const rv_array *y0 = rv_bindings_get_array(want, "Y"), *y1 = rv_bindings_get_array(got, "Y");
        for (int64_t j = 0; j < rv_array_numel(y0); j++)
            w->bad |= fabs(rv_array_get_f64(y0, j) - rv_array_get_f64(y1, j)) > 1e-4;
    }
    rv_bindings_free(want);
    rv_bindings_free(got);
    return NULL;
}

static void test_threads(void) {
    rv_module *m = parse_ok(packed);
    rv_program *p = m ? compile(m, 2) : NULL;
    if (!p) {
        rv_module_free(m);
        return;
    }
    enum { NW = 4 };
    Worker w[NW];
    pthread_t th[NW];
    for (int i = 0; i < NW; i++) {
        w[i] = (Worker){.m = m, .p = p};
        w[i].a = (Args){draw(48, 40, 10 + i), draw(9, 8, 20 + i), draw(9, 40, 30 + i), 9};
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < NW; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(w[i].bad, 0);
        rv_array_free(w[i].a.W);
        rv_array_free(w[i].a.V);
        rv_array_free(w[i].a.x);
    }
    rv_program_free(p);
    rv_module_free(m);
}

/* rv_bindings_inherit: the weights bound once in a base object, each
 * call's inputs on fresh bindings inheriting them: the kept pack serves
 * every call; a base bound anew is a new binding. */
static void test_inherit(void) {
    rv_module *m = parse_ok(packed);
    rv_program *p = m ? compile(m, 0) : NULL;
    if (!p) {
        rv_module_free(m);
        return;
    }
    const Tensor *w = rv_module_tensor(m, "W");
    Args a = {draw(48, 40, 1), draw(17, 8, 2), draw(17, 40, 3), 17};
    rv_bindings *base = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_array(base, "W", a.W), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_size(base, "N", 5), RV_OK); /* overridden per call */
    rv_array *xs[3] = {a.x, draw(17, 40, 7), draw(17, 40, 8)};
    for (int i = 0; i < 3; i++) {
        rv_bindings *b = rv_bindings_new(m);
        CHECK_EQ_INT(rv_bindings_set_array(b, "W", a.V), RV_OK); /* inherit overrides it */
        CHECK_EQ_INT(rv_bindings_inherit(b, base), RV_OK);
        CHECK(interp_bindings_stamp(b, w) == interp_bindings_stamp(base, w));
        CHECK(rv_bindings_get_array(b, "W") == a.W);
        CHECK_EQ_INT(rv_bindings_get_size(b, "N"), 5);
        Args ai = {a.W, a.V, xs[i], 17};
        CHECK_EQ_INT(rv_bindings_set_size(b, "N", 17), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_array(b, "V", a.V), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_array(b, "x", xs[i]), RV_OK);
        run_and_compare(m, p, b, &ai);
        CHECK(rv_bindings_get_array(base, "Y") == NULL); /* results stay in b */
        rv_bindings_free(b);
    }
    CHECK_EQ_INT(fills(p), 1);
    CHECK_EQ_INT(rv_bindings_set_array(base, "W", a.W), RV_OK); /* bound anew */
    rv_bindings *b = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_inherit(b, base), RV_OK);
    bind(b, &a);
    CHECK_EQ_INT(rv_bindings_inherit(b, base), RV_OK); /* W and N are base's again */
    CHECK_EQ_INT(rv_bindings_get_size(b, "N"), 5);
    CHECK_EQ_INT(rv_bindings_set_size(b, "N", 17), RV_OK);
    run_and_compare(m, p, b, &a);
    CHECK_EQ_INT(fills(p), 2);
    rv_bindings_free(b);

    rv_module *other = parse_ok(packed);
    rv_bindings *o = other ? rv_bindings_new(other) : NULL;
    CHECK_EQ_INT(rv_bindings_inherit(o, base), RV_ERR_ARG);
    CHECK(strstr(rv_last_error(), "different modules") != NULL);
    CHECK_EQ_INT(rv_bindings_inherit(NULL, base), RV_ERR_ARG);
    rv_bindings_free(o);
    rv_module_free(other);

    rv_bindings_free(base);
    rv_array_free(a.W);
    rv_array_free(a.V);
    for (int i = 0; i < 3; i++)
        rv_array_free(xs[i]);
    rv_program_free(p);
    rv_module_free(m);
}

/* A pack placed at a loop whose iterations copy the param's blocks one
 * each (a weight's panels in a parallel loop over them) is kept as the
 * blocks side by side; a pack whose iterations do not enumerate the
 * blocks stays a per-run temporary. Every run checked against the
 * interpreter, with new inputs each time. */
static rv_module *blocked_module(const char *sched) {
    char src[1024];
    snprintf(src, sizeof src,
             "size N in 1..300\n"
             "param W : f32[48, 40]\n"
             "param V : f32[N, 8]\n"
             "input x : f32[N, 40]\n"
             "Y[n, j < 48] = sum(l < 40) W[j, l] * x[n, l]\n"
             "Z[n, k < 8] = sum(m < N) V[m, k] * Y[m, k] + x[n, k]\n"
             "output Y, Z\n"
             "schedule Y {\n%s}\n",
             sched);
    return parse_ok(src);
}

static void blocked_case(const char *sched, int kept) {
    rv_module *m = blocked_module(sched);
    rv_program *p = m ? compile(m, 2) : NULL;
    if (!p) {
        rv_module_free(m);
        return;
    }
    Args a = {draw(48, 40, 1), draw(17, 8, 2), draw(17, 40, 3), 17};
    rv_bindings *b = rv_bindings_new(m);
    bind(b, &a);
    for (int i = 0; i < 3; i++) {
        rv_array *x = draw(17, 40, 10 + (unsigned)i);
        Args ai = a;
        ai.x = x;
        CHECK_EQ_INT(rv_bindings_set_array(b, "x", x), RV_OK);
        run_and_compare(m, p, b, &ai);
        rv_array_free(x);
    }
    if (fills(p) != kept)
        fprintf(stderr, "    schedule:\n%s", sched);
    CHECK_EQ_INT(fills(p), kept);
    rv_bindings_free(b);
    rv_array_free(a.W);
    rv_array_free(a.V);
    rv_array_free(a.x);
    rv_program_free(p);
    rv_module_free(m);
}

static void test_blocked(void) {
    /* 16-row panels in a parallel loop over them: kept */
    blocked_case("    WL = cache_read(W, layout=\"l, j\")\n"
                 "    jo, ji = split(j, 16)\n"
                 "    reorder(jo, n, l, ji)\n"
                 "    parallel(jo)\n"
                 "    vectorize(ji)\n"
                 "    compute_at(WL, jo)\n",
                 1);
    /* 16 x 20 blocks at the second of two loops (block jo * 2 + lo): kept */
    blocked_case("    WL = cache_read(W, layout=\"l, j\")\n"
                 "    jo, ji = split(j, 16)\n"
                 "    lo, li = split(l, 20)\n"
                 "    reorder(jo, lo, n, li, ji)\n"
                 "    parallel(jo)\n"
                 "    compute_at(WL, lo)\n",
                 1);
    /* the same blocks, the loops the other way round (block lo + 2 * jo
     * at iteration lo * 3 + jo): made every run */
    blocked_case("    WL = cache_read(W, layout=\"l, j\")\n"
                 "    jo, ji = split(j, 16)\n"
                 "    lo, li = split(l, 20)\n"
                 "    reorder(lo, jo, n, li, ji)\n"
                 "    compute_at(WL, jo)\n",
                 0);
    /* at a loop of a size's extent (each n copies every panel): made every run */
    blocked_case("    WL = cache_read(W, layout=\"l, j\")\n"
                 "    jo, ji = split(j, 16)\n"
                 "    reorder(jo, n, l, ji)\n"
                 "    compute_at(WL, n)\n",
                 0);
    /* panels that do not divide W (32 rows of 48: a shorter last one): made every run */
    blocked_case("    WL = cache_read(W, layout=\"l, j\")\n"
                 "    jo, ji = split(j, 32)\n"
                 "    reorder(jo, n, l, ji)\n"
                 "    parallel(jo)\n"
                 "    compute_at(WL, jo)\n",
                 0);
}

/* The panels of W packed at jo inside a serial loop over blocks of 8 rows
 * of n (every panel read once per block): kept, copied in the first
 * block. The full blocks and the partitioned last one (N % 8 rows) share
 * one pack (a second copy of the weights cost the last block a pass over
 * them from memory): a run with N < 8 runs no full block, so the last
 * block copies it and reports it filled, and the next runs, with full
 * blocks, read what it copied. Fills: one (run 1), none (2, 3). */
static void test_blocked_rows(void) {
    rv_module *m = blocked_module("    WL = cache_read(W, layout=\"l, j\")\n"
                                  "    jo, ji = split(j, 16)\n"
                                  "    nb, ni = split(n, 8)\n"
                                  "    reorder(nb, jo, ni, l, ji)\n"
                                  "    parallel(jo)\n"
                                  "    vectorize(ji)\n"
                                  "    compute_at(WL, jo)\n");
    rv_program *p = m ? compile(m, 2) : NULL;
    if (!p) {
        rv_module_free(m);
        return;
    }
    rv_array *W = draw(48, 40, 1);
    rv_bindings *b = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_array(b, "W", W), RV_OK);
    const int64_t ns[3] = {5, 21, 21};
    const int64_t want[3] = {1, 1, 1};
    for (int i = 0; i < 3; i++) {
        Args a = {W, draw(ns[i], 8, 20 + (unsigned)i), draw(ns[i], 40, 30 + (unsigned)i), ns[i]};
        CHECK_EQ_INT(rv_bindings_set_size(b, "N", a.n), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_array(b, "V", a.V), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_array(b, "x", a.x), RV_OK);
        run_and_compare(m, p, b, &a);
        CHECK_EQ_INT(fills(p), want[i]);
        rv_array_free(a.V);
        rv_array_free(a.x);
    }
    rv_bindings_free(b);
    rv_array_free(W);
    rv_program_free(p);
    rv_module_free(m);
}

/* Two stages packing W (its layers' tied weights): where their packs
 * hold the same contents (one region, one layout) the program keeps one
 * copy for both, filled once by the first kernel that reads it and read
 * by the other; other layouts, or blocks side by side against one whole
 * copy, are copies of their own. Every run checked against the
 * interpreter; `want` fills after three runs, and one more pass over the
 * packs after W is bound again. */
static void shared_case(const char *sched_y, const char *sched_z, int want) {
    char src[2048];
    snprintf(src, sizeof src,
             "size N in 1..300\n"
             "param W : f32[48, 40]\n"
             "param V : f32[N, 8]\n"
             "input x : f32[N, 40]\n"
             "Y[n, j < 48] = sum(l < 40) W[j, l] * x[n, l]\n"
             "Z[n, j < 48] = sum(l < 40) W[j, l] * (Y[n, l] + V[n, 0])\n"
             "output Y, Z\n"
             "schedule Y {\n%s}\n"
             "schedule Z {\n%s}\n",
             sched_y, sched_z);
    rv_module *m = parse_ok(src);
    rv_program *p = m ? compile(m, 2) : NULL;
    if (!p) {
        rv_module_free(m);
        return;
    }
    Args a = {draw(48, 40, 1), draw(17, 8, 2), draw(17, 40, 3), 17};
    rv_bindings *b = rv_bindings_new(m);
    bind(b, &a);
    for (int i = 0; i < 3; i++)
        run_and_compare(m, p, b, &a);
    if (fills(p) != want)
        fprintf(stderr, "    schedules:\n%s%s", sched_y, sched_z);
    CHECK_EQ_INT(fills(p), want);
    rv_array *w2 = draw(48, 40, 4);
    Args a2 = a;
    a2.W = w2;
    CHECK_EQ_INT(rv_bindings_set_array(b, "W", w2), RV_OK);
    run_and_compare(m, p, b, &a2);
    run_and_compare(m, p, b, &a2);
    CHECK_EQ_INT(fills(p), 2 * want);
    rv_bindings_free(b);
    rv_array_free(a.W);
    rv_array_free(a.V);
    rv_array_free(a.x);
    rv_array_free(w2);
    rv_program_free(p);
    rv_module_free(m);
}

static void test_shared(void) {
    const char *panels = "    WL = cache_read(W, layout=\"l, j/16, j%16\")\n"
                         "    jo, ji = split(j, 16)\n"
                         "    reorder(n, jo, l, ji)\n"
                         "    parallel(n)\n"
                         "    vectorize(ji)\n";
    const char *whole = "    WL = cache_read(W, layout=\"l, j\")\n"
                        "    parallel(n)\n";
    const char *blocked = "    WL = cache_read(W, layout=\"l, j\")\n"
                          "    jo, ji = split(j, 16)\n"
                          "    reorder(jo, n, l, ji)\n"
                          "    parallel(jo)\n"
                          "    compute_at(WL, jo)\n";
    const char *panels2 = "    WZ = cache_read(W, layout=\"l, j/16, j%16\")\n"
                          "    jo, ji = split(j, 16)\n"
                          "    reorder(n, jo, l, ji)\n"
                          "    vectorize(ji)\n";
    const char *whole2 = "    WZ = cache_read(W, layout=\"l, j\")\n";
    const char *blocked2 = "    WZ = cache_read(W, layout=\"l, j\")\n"
                           "    jo, ji = split(j, 16)\n"
                           "    reorder(jo, n, l, ji)\n"
                           "    parallel(jo)\n"
                           "    compute_at(WZ, jo)\n";
    shared_case(panels, panels2, 1); /* one layout, loops of their own */
    shared_case(whole, whole2, 1);
    shared_case(blocked, blocked2, 1); /* the same blocks side by side */
    shared_case(panels, whole2, 2);    /* other layouts */
    shared_case(whole, blocked2, 2);   /* one copy against blocks of 16 rows */
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-param-%d", (int)getpid());
    RUN(test_roundtrip);
    RUN(test_word);
    RUN(test_api);
    RUN(test_stamps);
    RUN(test_kept);
    RUN(test_threads);
    RUN(test_inherit);
    RUN(test_blocked);
    RUN(test_blocked_rows);
    RUN(test_shared);
    return harness_report();
}
