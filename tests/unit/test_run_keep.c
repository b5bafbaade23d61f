/*
 * test_run_keep.c — what a run's preparation keeps in its bindings for
 * the next run (InterpKeep, src/interp/interp.h): the tables, the layouts
 * of UF domains, inputs and computed tensors, and the int64 copies of the
 * UF arrays, whose memory the next run on the same bindings evaluates its
 * own in. Only memory is kept, never a value: call after call on one
 * bindings object (weights inherited by rv_bindings_reset, a batch bound
 * by rv_bindings_set_linear, as a server calls), with batches that grow,
 * shrink, change shape and mix kinds, a compiled program and the
 * interpreter both give what the interpreter gives on fresh bindings; a
 * bad argument after good calls (an input of the last call's shape where
 * this call's differs, a UF value out of range, a child out of range) is
 * refused as on fresh bindings, and the next good call is right again; a
 * module that grew between runs drops what was kept.
 */
#include <math.h>
#include <unistd.h>

#include "harness.h"
#include "interp/interp.h"

static char cache_dir[64];

/* A child-sum tree model over up to 3 children, with a per-edge input E
 * (ragged over the children: its layout changes with every batch), a
 * ragged computed tensor G over the same domain, and a dense output. */
static const char *const program =
    "size N in 1..1000\n"
    "size B in 1..100\n"
    "structure T : tree(N, 3) {\n"
    "    children child, nchild\n"
    "    roots root[s < B]\n"
    "    data word in 0..9\n"
    "}\n"
    "param Emb : f32[10, 8]\n"
    "input E : f32[n < N, k < nchild[n]]\n"
    "G[n < N, k < nchild[n]] = E[n, k] * 0.5 + 1.0\n"
    "recurse R over T {\n"
    "    h[n, i < 8] = if nchild[n] == 0 then Emb[word[n], i]\n"
    "                  else tanh(sum(k < nchild[n]) h[child[n, k], i] * G[n, k])\n"
    "}\n"
    "S[s < B, i < 8] = h[root[s], i] * 2.0\n"
    "schedule R { dynamic_batch() specialize() }\n";

/* A batch of kind `shape`: 0 a perfect tree of height 4, 1 one node, 2 a
 * chain of 30, 3 three small trees, 4 a ternary tree and a pair. */
static rv_structs *batch(int shape) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 3, 1);
    int32_t words[64];
    for (int i = 0; i < 64; i++)
        words[i] = (i * 7 + shape) % 10;
    switch (shape) {
    case 0:
        CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 4, words), RV_OK);
        break;
    case 1:
        CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 0, words), RV_OK);
        break;
    case 2:
        CHECK_EQ_INT(rv_structs_add_sequence(bs, 30, words), RV_OK);
        break;
    case 3:
        for (int t = 0; t < 3; t++)
            CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 1 + t % 2, words + t), RV_OK);
        break;
    default: {
        int32_t parent[] = {-1, 0, 0, 0, 1, 1, 1};
        CHECK_EQ_INT(rv_structs_add_parents(bs, 7, parent, words), RV_OK);
        int32_t pair[] = {-1, 0};
        CHECK_EQ_INT(rv_structs_add_parents(bs, 2, pair, words + 3), RV_OK);
    }
    }
    return bs;
}

/* E for a batch of `edges` children in all, from seed. */
static rv_array *edge_input(int64_t edges, int seed) {
    rv_array *e = rv_array_new(RV_F32, 1, &edges);
    float *v = rv_array_data(e);
    for (int64_t i = 0; i < edges; i++)
        v[i] = (float)((i * 13 + seed * 5) % 17) / 17.0f - 0.5f;
    return e;
}

/* The interpreter's S, h and G on fresh bindings: the weights of w, the
 * batch lin, E. */
static rv_bindings *oracle(rv_module *m, const rv_bindings *w, const rv_linear *lin,
                           const rv_array *e) {
    rv_bindings *b = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_inherit(b, w), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", lin), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(b, "E", e), RV_OK);
    CHECK_EQ_INT(rv_interp_run(m, b), RV_OK);
    return b;
}

/* A call's bindings as a server makes them: reset to the weights w, the
 * batch, E. */
static void bind_call(rv_bindings *call, const rv_bindings *w, const rv_linear *lin,
                      const rv_array *e) {
    CHECK_EQ_INT(rv_bindings_reset(call, w), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_linear(call, "T", lin), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(call, "E", e), RV_OK);
}

/* One call on `call` (bind_call) by the program (p) or the interpreter
 * (p NULL); its outputs against the oracle's. */
static void call_and_compare(rv_module *m, rv_program *p, rv_bindings *call, const rv_bindings *w,
                             const rv_linear *lin, const rv_array *e) {
    bind_call(call, w, lin, e);
    CHECK_EQ_INT(p ? rv_program_run(p, call) : rv_interp_run(m, call), RV_OK);
    rv_bindings *want = oracle(m, w, lin, e);
    CHECK_SAME_TENSOR(want, call, "S", 1e-5);
    CHECK_SAME_TENSOR(want, call, "h", 1e-5);
    CHECK_SAME_TENSOR(want, call, "G", 1e-6);
    rv_bindings_free(want);
}

typedef struct Setup {
    rv_module *m;
    rv_program *p;
    rv_bindings *w;
} Setup;

static Setup setup(void) {
    Setup s = {parse_ok(program), NULL, NULL};
    if (!s.m)
        return s;
    rv_compile_options opt = {.cache_dir = cache_dir};
    CHECK_EQ_INT(rv_program_compile(s.m, &opt, &s.p), RV_OK);
    s.w = rv_bindings_new(s.m);
    int64_t shape[2] = {10, 8};
    rv_array *emb = rv_array_new(RV_F32, 2, shape);
    float *v = rv_array_data(emb);
    for (int i = 0; i < 80; i++)
        v[i] = (float)((i * 29) % 23) / 23.0f - 0.5f;
    CHECK_EQ_INT(interp_bindings_adopt_array(s.w, "Emb", emb), RV_OK);
    return s;
}

static void teardown(Setup *s) {
    rv_bindings_free(s->w);
    rv_program_free(s->p);
    rv_module_free(s->m);
}

/* Batches that grow, shrink and change shape, twice over, on one bindings
 * object per runner: each call's values are its own. */
static void test_batches_vary(void) {
    Setup s = setup();
    if (!s.p)
        goto out;
    rv_bindings *compiled = rv_bindings_new(s.m), *interp = rv_bindings_new(s.m);
    static const int order[] = {0, 1, 2, 3, 4, 0, 3, 1, 4, 2, 2, 0};
    rv_linear lin = {0};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        rv_structs *bs = batch(order[i]);
        CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
        int64_t edges = 0;
        for (int32_t n = 0; n < lin.num_nodes; n++)
            edges += lin.nchild[n];
        rv_array *e = edge_input(edges, (int)i);
        call_and_compare(s.m, s.p, compiled, s.w, &lin, e);
        call_and_compare(s.m, NULL, interp, s.w, &lin, e);
        rv_array_free(e);
        rv_structs_free(bs);
    }
    rv_linear_free(&lin);
    rv_bindings_free(compiled);
    rv_bindings_free(interp);
out:
    teardown(&s);
}

/* After good calls on a large batch, bad arguments on a smaller one are
 * refused as fresh bindings refuse them; a good call then is right. */
static void test_bad_after_good(void) {
    Setup s = setup();
    if (!s.p)
        goto out;
    rv_bindings *call = rv_bindings_new(s.m);
    rv_structs *big = batch(0), *small = batch(4);
    rv_linear lb = {0}, ls = {0};
    CHECK_EQ_INT(rv_linearize(big, &lb), RV_OK);
    CHECK_EQ_INT(rv_linearize(small, &ls), RV_OK);
    int64_t eb = 0, es = 0;
    for (int32_t n = 0; n < lb.num_nodes; n++)
        eb += lb.nchild[n];
    for (int32_t n = 0; n < ls.num_nodes; n++)
        es += ls.nchild[n];
    rv_array *ebig = edge_input(eb, 1), *esmall = edge_input(es, 2);
    for (int i = 0; i < 3; i++)
        call_and_compare(s.m, s.p, call, s.w, &lb, ebig);

    /* E of the last call's shape, where this batch has fewer edges */
    bind_call(call, s.w, &ls, ebig);
    CHECK_EQ_INT(rv_program_run(s.p, call), RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "input E");

    /* a word out of range, bound by hand (not sealed by set_linear) */
    call_and_compare(s.m, s.p, call, s.w, &lb, ebig);
    bind_call(call, s.w, &ls, esmall);
    int64_t nn = ls.num_nodes;
    rv_array *word = rv_array_new(RV_I32, 1, &nn);
    for (int64_t n = 0; n < nn; n++)
        ((int32_t *)rv_array_data(word))[n] = n == nn - 1 ? 10 : 1;
    CHECK_EQ_INT(rv_bindings_set_array(call, "word", word), RV_OK);
    CHECK_EQ_INT(rv_program_run(s.p, call), RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "outside declared range 0..9");

    /* a child out of range, bound by hand after a good call */
    call_and_compare(s.m, s.p, call, s.w, &ls, esmall);
    bind_call(call, s.w, &ls, esmall);
    int64_t ne = es;
    rv_array *child = rv_array_new(RV_I32, 1, &ne);
    const rv_array *bound = rv_bindings_get_array(call, "child");
    for (int64_t k = 0; bound && k < ne; k++)
        ((int32_t *)rv_array_data(child))[k] = ((const int32_t *)rv_array_cdata(bound))[k];
    ((int32_t *)rv_array_data(child))[0] = (int32_t)nn; /* one past the last node */
    CHECK_EQ_INT(rv_bindings_set_array(call, "child", child), RV_OK);
    CHECK(rv_program_run(s.p, call) != RV_OK);
    CHECK_STR_CONTAINS(rv_last_error(), "child");

    /* and right again */
    call_and_compare(s.m, s.p, call, s.w, &ls, esmall);
    call_and_compare(s.m, s.p, call, s.w, &lb, ebig);
    rv_array_free(child);
    rv_array_free(word);
    rv_array_free(ebig);
    rv_array_free(esmall);
    rv_linear_free(&lb);
    rv_linear_free(&ls);
    rv_structs_free(big);
    rv_structs_free(small);
    rv_bindings_free(call);
out:
    teardown(&s);
}

/* A module that gains a tensor between two interpreter runs on one
 * bindings object: the second run's tables and layouts are its own size
 * (what the first kept is dropped), and its values right. */
static void test_module_grows(void) {
    rv_module *m = parse_ok("size N in 1..64\n"
                            "input X : f32[i < N, j < i + 1]\n"
                            "Y[i < N, j < i + 1] = X[i, j] + 1.0\n");
    if (!m)
        return;
    rv_bindings *b = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_size(b, "N", 9), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(b, 4), RV_OK);
    CHECK_EQ_INT(rv_interp_run(m, b), RV_OK);
    /* Z[i] = Y[i, i] * 2 */
    const char *names[1] = {"i"};
    rv_compute *c = rv_compute_begin(m, "Z", 1, names, NULL);
    rv_expr *i = rv_compute_var(c, 0), *at[2] = {i, i};
    CHECK(rv_compute_end(c, rv_expr_mul(m, rv_expr_read(m, rv_module_tensor(m, "Y"), 2, at),
                                        rv_expr_float(m, RV_F32, 2.0))) != NULL);
    CHECK_EQ_INT(rv_interp_run(m, b), RV_OK);
    const rv_array *x = rv_bindings_get_array(b, "X"), *z = rv_bindings_get_array(b, "Z");
    CHECK(x && z && rv_array_numel(z) == 9);
    for (int64_t r = 0, row = 0; x && z && r < 9; row += ++r) /* X[r, r]: row start + r */
        CHECK_NEAR(rv_array_get_f64(z, r), 2.0 * (double)(float)(rv_array_get_f64(x, row + r) + 1.0),
                   1e-5);
    rv_bindings_free(b);
    rv_module_free(m);
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel_test_run_keep_%d", (int)getpid());
    RUN(test_batches_vary);
    RUN(test_bad_after_good);
    RUN(test_module_grows);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
    (void)!system(cmd);
    return harness_report();
}
