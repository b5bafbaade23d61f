/*
 * test_interp_recurse.c — structures bound from linearized batches
 * (rv_bindings_set_linear) and recursion evaluated by the interpreter.
 *
 * Bindings: the arrays a batch binds (the ragged child UF packed row by
 * row, roots, data columns, the hidden dynamic batches, the sizes), read
 * back and through a plain compute over the structure's UFs; the refusal
 * of a batch that does not fit the structure (K, data width, kind, N's
 * range), binding nothing.
 *
 * Recursion: a TreeRNN (one member, a sum over children with a weight per
 * child position) and a child-sum TreeLSTM (five members reading each
 * other at children and, earlier ones, at the node itself), built through
 * the C API, against a hand-written evaluation of the same equations in
 * an order of its own (Kahn's, leaves first), on hand-made and random
 * structures: one node, two nodes, deep chains, perfect trees, random
 * trees with labels shuffled, 10x10 grid DAGs, SST sentences, batches
 * mixing them; the same batch renumbered at random (children no longer
 * numbered above parents) gives the same values bit for bit. Errors: a
 * cycle in raw-bound arrays, a self-loop, a child out of range.
 *
 * Random bindings: rv_bindings_randomize on each kind of structure draws a
 * valid linearized batch (children in earlier batches, roots, one parent
 * in trees), the promised shape at each seed, reproducibly, within the
 * bound or declared N and B, and the model evaluates on it correctly; a
 * program reading children at fixed positions gets full trees.
 */
#include <math.h>
#include <stdbool.h>

#include "harness.h"

/* ---- a module with a binary tree structure ---- */

/* N in 1..nmax, B in 1..100, structure T : tree(N, K) { children child,
 * nchild  roots root[s < B]  data word in wlo..vocab - 1 } (fix_new:
 * -1..99, -1 for no word) */
typedef struct Fix {
    rv_module *m;
    rv_structure *st;
    rv_size *N, *B;
    rv_ufun *child, *nchild, *word, *root;
} Fix;

static Fix fix_new_words(rv_struct_kind kind, int K, int64_t nmax, int64_t wlo, int64_t vocab) {
    Fix f = {0};
    f.m = rv_module_new();
    f.N = rv_size_new(f.m, "N", 1, nmax);
    f.B = rv_size_new(f.m, "B", 1, 100);
    f.st = rv_structure_new(f.m, "T", kind, f.N, K, "child", "nchild");
    CHECK(f.st != NULL);
    f.root = rv_structure_set_roots(f.st, "root", f.B);
    f.word = rv_structure_add_data(f.st, "word", rv_expr_int(f.m, wlo), rv_expr_int(f.m, vocab - 1));
    CHECK(f.root && f.word);
    f.child = rv_module_ufun(f.m, "child");
    f.nchild = rv_module_ufun(f.m, "nchild");
    return f;
}

static Fix fix_new(rv_struct_kind kind, int K, int64_t nmax) {
    return fix_new_words(kind, K, nmax, -1, 100);
}

/* Element i of an integer array, as int64. */
static int64_t elem(const rv_array *a, int64_t i) {
    return rv_array_dtype(a) == RV_I32 ? ((const int32_t *)rv_array_cdata(a))[i]
                                       : ((const int64_t *)rv_array_cdata(a))[i];
}

/* `(1 (2 a) (3 (4 b) (5 c)))` and a perfect tree of height 1, words by
 * the batch's vocabulary. */
static rv_structs *small_batch(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 2);
    CHECK_EQ_INT(rv_structs_add_sexpr(bs, "t", "(1 (2 a) (3 (4 b) (5 c)))"), RV_OK);
    int32_t data[] = {7, 0, 8, 0, 9, 0};
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 1, data), RV_OK);
    return bs;
}

static void test_set_linear_arrays(void) {
    Fix f = fix_new(RV_STRUCT_TREE, 2, 1000);
    rv_structs *bs = small_batch();
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    rv_bindings *b = rv_bindings_new(f.m);
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), RV_OK);
    CHECK_EQ_INT(rv_bindings_get_size(b, "N"), 8);
    CHECK_EQ_INT(rv_bindings_get_size(b, "B"), 2);
    CHECK_EQ_INT(rv_bindings_get_size(b, "_T_nbatch"), lin.num_batches);
    const rv_array *nc = rv_bindings_get_array(b, "nchild");
    const rv_array *ch = rv_bindings_get_array(b, "child");
    const rv_array *rt = rv_bindings_get_array(b, "root");
    const rv_array *wd = rv_bindings_get_array(b, "word");
    const rv_array *bb = rv_bindings_get_array(b, "_T_batch_begin");
    const rv_array *bl = rv_bindings_get_array(b, "_T_batch_length");
    CHECK(nc && ch && rt && wd && bb && bl);
    if (!(nc && ch && rt && wd && bb && bl))
        goto out;
    /* child: the rows n = 0, 1, ... of nchild[n] entries each, packed */
    CHECK_EQ_INT(rv_array_ndim(ch), 1);
    int64_t e = 0;
    for (int32_t n = 0; n < lin.num_nodes; n++) {
        CHECK_EQ_INT(elem(nc, n), lin.nchild[n]);
        for (int k = 0; k < lin.nchild[n]; k++)
            CHECK_EQ_INT(elem(ch, e++), lin.child[n * lin.max_children + k]);
        CHECK_EQ_INT(elem(wd, n), lin.data[n * lin.width]);
    }
    CHECK_EQ_INT(rv_array_numel(ch), e);
    CHECK_EQ_INT(e, 6); /* 2 + 2 internal nodes of the first tree, 2 of the second */
    for (int s = 0; s < 2; s++)
        CHECK_EQ_INT(elem(rt, s), lin.root[s]);
    for (int i = 0; i < lin.num_batches; i++) {
        CHECK_EQ_INT(elem(bb, i), lin.batch_begin[i]);
        CHECK_EQ_INT(elem(bl, i), lin.batch_length[i]);
    }
out:
    rv_bindings_free(b);
    rv_linear_free(&lin);
    rv_structs_free(bs);
    rv_module_free(f.m);
}

/* The interpreter accepts the bound arrays (shapes, ranges) and reads the
 * ragged child UF row by row: csum[n] = sum(k < nchild[n]) child[n, k]. */
static void test_set_linear_read_by_compute(void) {
    Fix f = fix_new(RV_STRUCT_TREE, 2, 1000);
    const char *ax[] = {"n"};
    rv_expr *ext[] = {rv_expr_size(f.m, f.N)};
    rv_compute *c = rv_compute_begin(f.m, "csum", 1, ax, ext);
    rv_expr *n = rv_compute_var(c, 0);
    rv_axis *k = rv_reduce_axis_new(f.m, "k", rv_expr_ufcall(f.m, f.nchild, 1, &n));
    rv_expr *args[] = {n, rv_expr_axis(f.m, k)};
    rv_expr *sum = rv_expr_reduce(f.m, RV_REDUCE_SUM, 1, &k, rv_expr_ufcall(f.m, f.child, 2, args));
    CHECK(rv_compute_end(c, rv_expr_cast(f.m, RV_I64, sum)) != NULL);
    rv_structs *bs = small_batch();
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    rv_bindings *b = rv_bindings_new(f.m);
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), RV_OK);
    CHECK_EQ_INT(rv_interp_run(f.m, b), RV_OK);
    const rv_array *cs = rv_bindings_get_array(b, "csum");
    CHECK(cs != NULL);
    for (int32_t v = 0; cs && v < lin.num_nodes; v++) {
        int64_t want = 0;
        for (int j = 0; j < lin.nchild[v]; j++)
            want += lin.child[v * lin.max_children + j];
        CHECK_EQ_INT(((const int64_t *)rv_array_cdata(cs))[v], want);
    }
    rv_bindings_free(b);
    rv_linear_free(&lin);
    rv_structs_free(bs);
    rv_module_free(f.m);
}

/* Binding `bs` to a module's T fails with `msg`, and binds nothing. */
static void expect_set_linear_error(Fix *f, rv_structs *bs, rv_status want, const char *msg) {
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    rv_bindings *b = rv_bindings_new(f->m);
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), want);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    CHECK(!rv_bindings_has(b, "N") && !rv_bindings_has(b, "child") && !rv_bindings_has(b, "root"));
    rv_bindings_free(b);
    rv_linear_free(&lin);
}

static void test_set_linear_errors(void) {
    Fix f = fix_new(RV_STRUCT_TREE, 2, 10);
    /* K: a ternary batch on a binary structure */
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 3, 1);
    int32_t begin[] = {0, 3, 3, 3, 3}, child[] = {1, 2, 3};
    CHECK_EQ_INT(rv_structs_add_children(bs, 4, begin, child, NULL), RV_OK);
    expect_set_linear_error(&f, bs, RV_ERR_ARG,
                            "structure T: the batch allows 3 children per node, but T declares "
                            "at most 2");
    rv_structs_free(bs);
    /* width: no data integer for the column word */
    bs = rv_structs_new(RV_STRUCT_TREE, 2, 0);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 1, NULL), RV_OK);
    expect_set_linear_error(&f, bs, RV_ERR_ARG,
                            "structure T declares 1 data column, but the batch has 0 integers "
                            "per node");
    rv_structs_free(bs);
    /* kind: a DAG with a shared child on a tree structure */
    bs = rv_structs_new(RV_STRUCT_DAG, 2, 1);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 2, 2, NULL), RV_OK);
    expect_set_linear_error(&f, bs, RV_ERR_ARG, "structure T is a tree, but node");
    CHECK_STR_CONTAINS(rv_last_error(), "has two parents");
    rv_structs_free(bs);
    /* N's range: 15 nodes, N in 1..10 */
    bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 3, NULL), RV_OK);
    expect_set_linear_error(&f, bs, RV_ERR_BOUNDS,
                            "structure T: the batch has 15 nodes, outside the declared range "
                            "1..10 of N");
    rv_structs_free(bs);
    /* a name that is no structure */
    rv_bindings *b = rv_bindings_new(f.m);
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_bindings_set_linear(b, "child", &lin), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no structure named 'child'");
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure T: the batch is empty");
    rv_bindings_free(b);
    rv_module_free(f.m);
}

/* Chains bind to tree and DAG structures, trees to DAG structures; a DAG
 * batch whose nodes all have one parent is a tree and binds to one. */
static void test_set_linear_kinds(void) {
    struct {
        rv_struct_kind st, batch;
        int K;
    } ok[] = {{RV_STRUCT_TREE, RV_STRUCT_SEQUENCE, 1}, {RV_STRUCT_DAG, RV_STRUCT_SEQUENCE, 1},
              {RV_STRUCT_DAG, RV_STRUCT_TREE, 2},      {RV_STRUCT_TREE, RV_STRUCT_DAG, 2},
              {RV_STRUCT_SEQUENCE, RV_STRUCT_TREE, 1}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        Fix f = fix_new(ok[i].st, ok[i].st == RV_STRUCT_SEQUENCE ? 1 : 2, 100);
        rv_structs *bs = rv_structs_new(ok[i].batch, ok[i].K, 1);
        CHECK_EQ_INT(rv_structs_add_sequence(bs, 5, NULL), RV_OK);
        if (ok[i].K >= 2)
            CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 2, NULL), RV_OK);
        rv_linear lin = {0};
        CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
        rv_bindings *b = rv_bindings_new(f.m);
        CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), RV_OK);
        CHECK_EQ_INT(rv_bindings_get_size(b, "N"), ok[i].K >= 2 ? 12 : 5);
        rv_bindings_free(b);
        rv_linear_free(&lin);
        rv_structs_free(bs);
        rv_module_free(f.m);
    }
}

/* ---- recursion: the models ---- */

enum { V = 25000 }; /* words: SST's vocabulary fits */

/* Small deterministic generators: shapes, and weights (restarted for each
 * model, so runs on one batch numbered two ways get the same weights). */
static uint64_t rng = 0x2545f4914f6cdd1du, wrng;
static uint32_t xorshift(uint64_t *st, uint32_t n) {
    *st ^= *st << 13;
    *st ^= *st >> 7;
    *st ^= *st << 17;
    return n ? (uint32_t)(*st % n) : 0;
}
static uint32_t rnd(uint32_t n) {
    return xorshift(&rng, n);
}
static float rnd_weight(void) {
    return ((float)xorshift(&wrng, 1u << 20) / (float)(1u << 20) - 0.5f) * 0.8f;
}

/* An input of the given shape with random weights, bound to b and kept in
 * the model (the reference reads the same floats). */
typedef struct Weights {
    rv_array *arr[8];
    int n;
} Weights;

static const float *weights(Weights *w, rv_bindings *b, const char *name, int64_t rows,
                            int64_t cols) {
    int64_t shape[] = {rows, cols};
    rv_array *a = rv_array_new(RV_F32, cols ? 2 : 1, shape);
    float *d = rv_array_data(a);
    for (int64_t i = 0; i < rows * (cols ? cols : 1); i++)
        d[i] = rnd_weight();
    CHECK_EQ_INT(rv_bindings_set_array(b, name, a), RV_OK);
    w->arr[w->n++] = a;
    return d;
}

static void weights_free(Weights *w) {
    for (int i = 0; i < w->n; i++)
        rv_array_free(w->arr[i]);
    w->n = 0;
}

static rv_expr *rd(rv_module *m, rv_tensor *t, rv_expr *a, rv_expr *b) {
    rv_expr *idx[] = {a, b};
    return rv_expr_read(m, t, b ? 2 : 1, idx);
}

static rv_expr *call(rv_module *m, rv_ufun *f, rv_expr *a, rv_expr *b) {
    rv_expr *args[] = {a, b};
    return rv_expr_ufcall(m, f, b ? 2 : 1, args);
}

static rv_tensor *input(rv_module *m, const char *name, int64_t rows, int64_t cols) {
    rv_dimspec d[] = {{NULL, rv_expr_int(m, rows), 1}, {NULL, rv_expr_int(m, cols), 1}};
    return rv_input_new(m, name, RV_F32, cols ? 2 : 1, d);
}

/* Out[s, i < H] = h[root[s], i] */
static void define_out(Fix *f, rv_tensor *h, int H) {
    const char *ax[] = {"s", "i"};
    rv_expr *ext[] = {rv_expr_size(f->m, f->B), rv_expr_int(f->m, H)};
    rv_compute *c = rv_compute_begin(f->m, "Out", 2, ax, ext);
    rv_expr *s = rv_compute_var(c, 0), *i = rv_compute_var(c, 1);
    CHECK(rv_compute_end(c, rd(f->m, h, call(f->m, f->root, s, NULL), i)) != NULL);
}

/* TreeRNN over T (any K):
 *   h[n, i < H] = if nchild[n] == 0 then Emb[word[n], i]
 *                 else tanh(sum(k < nchild[n], j < H) W[i, k * H + j] * h[child[n, k], j]
 *                           + bias[i]) */
static void build_tree_rnn(Fix *f, int H) {
    rv_module *m = f->m;
    rv_tensor *emb = input(m, "Emb", V, H);
    rv_tensor *W = input(m, "W", H, (int64_t)H * 8);
    rv_tensor *bias = input(m, "bias", H, 0);
    rv_recurse *r = rv_recurse_begin(m, "R", f->st);
    const char *ax[] = {"n", "i"};
    rv_expr *ext[] = {NULL, rv_expr_int(m, H)};
    rv_compute *c = rv_recurse_add(r, "h", RV_F32, 2, ax, ext);
    rv_tensor *h = rv_module_tensor(m, "h");
    rv_expr *n = rv_compute_var(c, 0), *i = rv_compute_var(c, 1);
    rv_expr *nc = call(m, f->nchild, n, NULL);
    rv_axis *red[] = {rv_reduce_axis_new(m, "k", nc), rv_reduce_axis_new(m, "j", rv_expr_int(m, H))};
    rv_expr *k = rv_expr_axis(m, red[0]), *j = rv_expr_axis(m, red[1]);
    rv_expr *col = rv_expr_add(m, rv_expr_mul(m, k, rv_expr_int(m, H)), j);
    rv_expr *prod = rv_expr_mul(m, rd(m, W, i, col), rd(m, h, call(m, f->child, n, k), j));
    rv_expr *rec = rv_expr_unop(
        m, "tanh", rv_expr_add(m, rv_expr_reduce(m, RV_REDUCE_SUM, 2, red, prod), rd(m, bias, i, NULL)));
    rv_expr *leaf = rd(m, emb, call(m, f->word, n, NULL), i);
    rv_expr *isleaf = rv_expr_binop(m, "==", nc, rv_expr_int(m, 0));
    CHECK(rv_recurse_define(c, isleaf, leaf, rec) != NULL);
    CHECK_EQ_INT(rv_recurse_end(r), RV_OK);
    define_out(f, h, H);
    CHECK_EQ_INT(rv_module_verify(m), RV_OK);
}

/* Child-sum TreeLSTM (Tai et al. 2015) over T, leaves' inputs from Emb,
 * internal nodes' (word -1) zero:
 *   X[n, j < H]      = if word[n] >= 0 then Emb[word[n], j] else 0
 *   recurse R over T {
 *     hs[n, i < H]   = sum(k < nchild[n]) h[child[n, k], i]
 *     iou[n, g < 3H] = sum(j < H) Wiou[g, j] * X[n, j] + sum(j < H) Uiou[g, j] * hs[n, j]
 *                      + biou[g]
 *     fc[n, i < H]   = sum(k < nchild[n]) sigmoid(sum(j < H) Wf[i, j] * X[n, j]
 *                          + sum(j < H) Uf[i, j] * h[child[n, k], j] + bf[i]) * c[child[n, k], i]
 *     c[n, i < H]    = sigmoid(iou[n, i]) * tanh(iou[n, 2H + i]) + fc[n, i]
 *     h[n, i < H]    = sigmoid(iou[n, H + i]) * tanh(c[n, i])
 *   } */
static void build_tree_lstm(Fix *f, int H) {
    rv_module *m = f->m;
    rv_tensor *emb = input(m, "Emb", V, H);
    rv_tensor *Wiou = input(m, "Wiou", 3 * H, H), *Uiou = input(m, "Uiou", 3 * H, H);
    rv_tensor *biou = input(m, "biou", 3 * H, 0);
    rv_tensor *Wf = input(m, "Wf", H, H), *Uf = input(m, "Uf", H, H), *bf = input(m, "bf", H, 0);
    rv_expr *Hx = rv_expr_int(m, H);

    const char *ax[] = {"n", "i"};
    rv_expr *xext[] = {rv_expr_size(m, f->N), Hx};
    rv_compute *xc = rv_compute_begin(m, "X", 2, ax, xext);
    rv_expr *n = rv_compute_var(xc, 0), *i = rv_compute_var(xc, 1);
    rv_expr *w = call(m, f->word, n, NULL);
    CHECK(rv_compute_end_cond(xc, rv_expr_binop(m, ">=", w, rv_expr_int(m, 0)), rd(m, emb, w, i),
                              rv_expr_float(m, RV_F32, 0.0)) != NULL);
    rv_tensor *X = rv_module_tensor(m, "X");

    rv_recurse *r = rv_recurse_begin(m, "R", f->st);
    rv_expr *ext[] = {NULL, Hx};
    rv_expr *ext3[] = {NULL, rv_expr_int(m, 3 * H)};
    const char *gax[] = {"n", "g"};
    rv_compute *hs = rv_recurse_add(r, "hs", RV_F32, 2, ax, ext);
    rv_compute *iou = rv_recurse_add(r, "iou", RV_F32, 2, gax, ext3);
    rv_compute *fc = rv_recurse_add(r, "fc", RV_F32, 2, ax, ext);
    rv_compute *cc = rv_recurse_add(r, "c", RV_F32, 2, ax, ext);
    rv_compute *hc = rv_recurse_add(r, "h", RV_F32, 2, ax, ext);
    rv_tensor *tiou = rv_module_tensor(m, "iou"), *tfc = rv_module_tensor(m, "fc");
    rv_tensor *tc = rv_module_tensor(m, "c"), *th = rv_module_tensor(m, "h");
    rv_tensor *ths = rv_module_tensor(m, "hs");

    /* hs */
    n = rv_compute_var(hs, 0), i = rv_compute_var(hs, 1);
    rv_axis *k = rv_reduce_axis_new(m, "k", call(m, f->nchild, n, NULL));
    rv_expr *kv = rv_expr_axis(m, k);
    CHECK(rv_recurse_define(hs, NULL,
                            rv_expr_reduce(m, RV_REDUCE_SUM, 1, &k,
                                           rd(m, th, call(m, f->child, n, kv), i)),
                            NULL) != NULL);
    /* iou */
    n = rv_compute_var(iou, 0);
    rv_expr *g = rv_compute_var(iou, 1);
    rv_axis *j1 = rv_reduce_axis_new(m, "j", Hx), *j2 = rv_reduce_axis_new(m, "j", Hx);
    rv_expr *j1v = rv_expr_axis(m, j1), *j2v = rv_expr_axis(m, j2);
    rv_expr *sx = rv_expr_reduce(m, RV_REDUCE_SUM, 1, &j1,
                                 rv_expr_mul(m, rd(m, Wiou, g, j1v), rd(m, X, n, j1v)));
    rv_expr *sh = rv_expr_reduce(m, RV_REDUCE_SUM, 1, &j2,
                                 rv_expr_mul(m, rd(m, Uiou, g, j2v), rd(m, ths, n, j2v)));
    CHECK(rv_recurse_define(iou, NULL, rv_expr_add(m, rv_expr_add(m, sx, sh), rd(m, biou, g, NULL)),
                            NULL) != NULL);
    /* fc */
    n = rv_compute_var(fc, 0), i = rv_compute_var(fc, 1);
    k = rv_reduce_axis_new(m, "k", call(m, f->nchild, n, NULL));
    kv = rv_expr_axis(m, k);
    rv_expr *ch = call(m, f->child, n, kv);
    j1 = rv_reduce_axis_new(m, "j", Hx), j2 = rv_reduce_axis_new(m, "j", Hx);
    j1v = rv_expr_axis(m, j1), j2v = rv_expr_axis(m, j2);
    sx = rv_expr_reduce(m, RV_REDUCE_SUM, 1, &j1, rv_expr_mul(m, rd(m, Wf, i, j1v), rd(m, X, n, j1v)));
    sh = rv_expr_reduce(m, RV_REDUCE_SUM, 1, &j2, rv_expr_mul(m, rd(m, Uf, i, j2v), rd(m, th, ch, j2v)));
    rv_expr *gate = rv_expr_unop(m, "sigmoid", rv_expr_add(m, rv_expr_add(m, sx, sh), rd(m, bf, i, NULL)));
    CHECK(rv_recurse_define(fc, NULL,
                            rv_expr_reduce(m, RV_REDUCE_SUM, 1, &k,
                                           rv_expr_mul(m, gate, rd(m, tc, ch, i))),
                            NULL) != NULL);
    /* c */
    n = rv_compute_var(cc, 0), i = rv_compute_var(cc, 1);
    rv_expr *ig = rv_expr_unop(m, "sigmoid", rd(m, tiou, n, i));
    rv_expr *ug = rv_expr_unop(m, "tanh", rd(m, tiou, n, rv_expr_add(m, i, rv_expr_int(m, 2 * H))));
    CHECK(rv_recurse_define(cc, NULL, rv_expr_add(m, rv_expr_mul(m, ig, ug), rd(m, tfc, n, i)),
                            NULL) != NULL);
    /* h */
    n = rv_compute_var(hc, 0), i = rv_compute_var(hc, 1);
    rv_expr *og = rv_expr_unop(m, "sigmoid", rd(m, tiou, n, rv_expr_add(m, i, Hx)));
    CHECK(rv_recurse_define(hc, NULL, rv_expr_mul(m, og, rv_expr_unop(m, "tanh", rd(m, tc, n, i))),
                            NULL) != NULL);
    CHECK_EQ_INT(rv_recurse_end(r), RV_OK);
    define_out(f, th, H);
    CHECK_EQ_INT(rv_module_verify(m), RV_OK);
}

/* ---- the reference: the same equations by hand ---- */

static double sigmoid(double x) {
    return 1.0 / (1.0 + exp(-x));
}

/* The nodes of lin children first, by Kahn's algorithm over the edges
 * (not the numbering); false if some node is never ready (a cycle). */
static bool kahn_order(const rv_linear *lin, int32_t *order) {
    int32_t N = lin->num_nodes, K = lin->max_children;
    int32_t *pending = calloc((size_t)N, sizeof(int32_t));
    int32_t *pbegin = calloc((size_t)N + 1, sizeof(int32_t));
    int32_t *parents = malloc(sizeof(int32_t) * ((size_t)N * K + 1));
    for (int32_t n = 0; n < N; n++) {
        pending[n] = lin->nchild[n];
        for (int k = 0; k < lin->nchild[n]; k++)
            pbegin[lin->child[n * K + k] + 1]++;
    }
    for (int32_t n = 0; n < N; n++)
        pbegin[n + 1] += pbegin[n];
    int32_t *fill = malloc(sizeof(int32_t) * ((size_t)N + 1));
    memcpy(fill, pbegin, sizeof(int32_t) * ((size_t)N + 1));
    for (int32_t n = 0; n < N; n++)
        for (int k = 0; k < lin->nchild[n]; k++)
            parents[fill[lin->child[n * K + k]]++] = n;
    int32_t head = 0, tail = 0;
    for (int32_t n = 0; n < N; n++)
        if (pending[n] == 0)
            order[tail++] = n;
    while (head < tail) {
        int32_t c = order[head++];
        for (int32_t p = pbegin[c]; p < pbegin[c + 1]; p++)
            if (--pending[parents[p]] == 0)
                order[tail++] = parents[p];
    }
    free(pending);
    free(pbegin);
    free(parents);
    free(fill);
    return tail == N;
}

typedef struct Ref {
    float *h; /* [N * H]: the reference's h */
} Ref;

static float *ref_tree_rnn(const rv_linear *lin, int H, const float *emb, const float *W,
                           const float *bias) {
    int32_t N = lin->num_nodes, K = lin->max_children;
    float *h = calloc((size_t)N * H, sizeof(float));
    int32_t *order = malloc(sizeof(int32_t) * (size_t)N);
    CHECK(kahn_order(lin, order));
    for (int32_t o = 0; o < N; o++) {
        int32_t n = order[o];
        for (int i = 0; i < H; i++) {
            if (lin->nchild[n] == 0) {
                h[n * H + i] = emb[lin->data[n * lin->width] * H + i];
                continue;
            }
            double acc = 0;
            for (int k = 0; k < lin->nchild[n]; k++)
                for (int j = 0; j < H; j++)
                    acc += (double)W[i * 8 * H + k * H + j] * h[lin->child[n * K + k] * H + j];
            h[n * H + i] = (float)tanh(acc + bias[i]);
        }
    }
    free(order);
    return h;
}

typedef struct LstmW {
    const float *emb, *Wiou, *Uiou, *biou, *Wf, *Uf, *bf;
} LstmW;

static float *ref_tree_lstm(const rv_linear *lin, int H, const LstmW *w) {
    int32_t N = lin->num_nodes, K = lin->max_children;
    float *h = calloc((size_t)N * H, sizeof(float)), *c = calloc((size_t)N * H, sizeof(float));
    float *x = calloc((size_t)H, sizeof(float)), *hs = calloc((size_t)H, sizeof(float));
    float *iou = calloc((size_t)3 * H, sizeof(float)), *fc = calloc((size_t)H, sizeof(float));
    int32_t *order = malloc(sizeof(int32_t) * (size_t)N);
    CHECK(kahn_order(lin, order));
    for (int32_t o = 0; o < N; o++) {
        int32_t n = order[o], word = lin->data[n * lin->width];
        const int32_t *ch = &lin->child[n * K];
        for (int j = 0; j < H; j++)
            x[j] = word >= 0 ? w->emb[word * H + j] : 0.0f;
        for (int i = 0; i < H; i++) {
            double s = 0;
            for (int k = 0; k < lin->nchild[n]; k++)
                s += h[ch[k] * H + i];
            hs[i] = (float)s;
        }
        for (int g = 0; g < 3 * H; g++) {
            double sx = 0, sh = 0;
            for (int j = 0; j < H; j++)
                sx += (double)w->Wiou[g * H + j] * x[j];
            for (int j = 0; j < H; j++)
                sh += (double)w->Uiou[g * H + j] * hs[j];
            iou[g] = (float)(sx + sh + w->biou[g]);
        }
        for (int i = 0; i < H; i++) {
            double s = 0;
            for (int k = 0; k < lin->nchild[n]; k++) {
                double sx = 0, sh = 0;
                for (int j = 0; j < H; j++)
                    sx += (double)w->Wf[i * H + j] * x[j];
                for (int j = 0; j < H; j++)
                    sh += (double)w->Uf[i * H + j] * h[ch[k] * H + j];
                s += sigmoid(sx + sh + w->bf[i]) * c[ch[k] * H + i];
            }
            fc[i] = (float)s;
        }
        for (int i = 0; i < H; i++)
            c[n * H + i] = (float)(sigmoid(iou[i]) * tanh(iou[2 * H + i]) + fc[i]);
        for (int i = 0; i < H; i++)
            h[n * H + i] = (float)(sigmoid(iou[H + i]) * tanh(c[n * H + i]));
    }
    free(order);
    free(c);
    free(x);
    free(hs);
    free(iou);
    free(fc);
    return h;
}

/* ---- running a model on a batch ---- */

typedef enum Model { TREE_RNN, TREE_LSTM } Model;

/* Interpreter vs reference on batch bs (data column 0: word ids, -1 only
 * where the model reads no word); returns the interpreter's h (malloc'd
 * copy) so callers can compare runs. */
static float *check_model(Model model, rv_struct_kind kind, int K, int H, const rv_linear *lin) {
    Fix f = fix_new_words(kind, K, 200000, -1, V);
    if (model == TREE_RNN)
        build_tree_rnn(&f, H);
    else
        build_tree_lstm(&f, H);
    rv_bindings *b = rv_bindings_new(f.m);
    Weights w = {0};
    float *ref = NULL;
    wrng = 0x9e3779b97f4a7c15u;
    if (model == TREE_RNN) {
        const float *emb = weights(&w, b, "Emb", V, H);
        const float *W = weights(&w, b, "W", H, (int64_t)H * 8);
        const float *bias = weights(&w, b, "bias", H, 0);
        ref = ref_tree_rnn(lin, H, emb, W, bias);
    } else {
        LstmW lw;
        lw.emb = weights(&w, b, "Emb", V, H);
        lw.Wiou = weights(&w, b, "Wiou", 3 * H, H);
        lw.Uiou = weights(&w, b, "Uiou", 3 * H, H);
        lw.biou = weights(&w, b, "biou", 3 * H, 0);
        lw.Wf = weights(&w, b, "Wf", H, H);
        lw.Uf = weights(&w, b, "Uf", H, H);
        lw.bf = weights(&w, b, "bf", H, 0);
        ref = ref_tree_lstm(lin, H, &lw);
    }
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", lin), RV_OK);
    rv_status st = rv_interp_run(f.m, b);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "    %s\n", rv_last_error());
    const rv_array *h = rv_bindings_get_array(b, "h"), *out = rv_bindings_get_array(b, "Out");
    float *got = NULL;
    if (h && out) {
        int32_t N = lin->num_nodes;
        const float *hv = rv_array_cdata(h), *ov = rv_array_cdata(out);
        int64_t bad = 0;
        for (int64_t e = 0; e < (int64_t)N * H; e++)
            bad += !(fabs(hv[e] - ref[e]) <= 1e-5 * (1 + fabs(ref[e])));
        CHECK_EQ_INT(bad, 0);
        for (int32_t s = 0; s < lin->num_structs; s++)
            for (int i = 0; i < H; i++)
                CHECK(ov[s * H + i] == hv[lin->root[s] * H + i]);
        got = malloc(sizeof(float) * (size_t)N * H);
        memcpy(got, hv, sizeof(float) * (size_t)N * H);
    }
    free(ref);
    rv_bindings_free(b);
    weights_free(&w);
    rv_module_free(f.m);
    return got;
}

/* Both models on bs, then on bs renumbered at random (linearized arrays
 * permuted: children anywhere relative to their parents), which must give
 * the same values node for node, bit for bit. */
static void check_batch(rv_structs *bs, rv_struct_kind kind, int K, int H) {
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    int32_t N = lin.num_nodes, W = lin.width;
    /* the permuted copy: node v becomes perm[v] */
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)N);
    for (int32_t v = 0; v < N; v++)
        perm[v] = v;
    for (int32_t v = N - 1; v > 0; v--) {
        int32_t u = (int32_t)rnd((uint32_t)v + 1), t = perm[v];
        perm[v] = perm[u];
        perm[u] = t;
    }
    rv_linear pl = lin;
    pl.child = malloc(sizeof(int32_t) * (size_t)N * K);
    pl.nchild = malloc(sizeof(int32_t) * (size_t)N);
    pl.data = malloc(sizeof(int32_t) * ((size_t)N * W + 1));
    pl.root = malloc(sizeof(int32_t) * (size_t)lin.num_structs);
    pl.max_children = K;
    for (int32_t v = 0; v < N; v++) {
        int32_t p = perm[v];
        pl.nchild[p] = lin.nchild[v];
        for (int k = 0; k < K; k++)
            pl.child[p * K + k] = k < lin.nchild[v] ? perm[lin.child[v * lin.max_children + k]] : p;
        memcpy(&pl.data[p * W], &lin.data[v * W], sizeof(int32_t) * (size_t)W);
    }
    for (int32_t s = 0; s < lin.num_structs; s++)
        pl.root[s] = perm[lin.root[s]];
    for (int model = TREE_RNN; model <= TREE_LSTM; model++) {
        float *a = check_model(model, kind, K, H, &lin);
        float *b = check_model(model, kind, K, H, &pl);
        int64_t bad = 0;
        for (int32_t v = 0; a && b && v < N; v++)
            bad += memcmp(&a[v * H], &b[perm[v] * H], sizeof(float) * (size_t)H) != 0;
        CHECK(a && b);
        CHECK_EQ_INT(bad, 0);
        free(a);
        free(b);
    }
    free(pl.child);
    free(pl.nchild);
    free(pl.data);
    free(pl.root);
    free(perm);
    rv_linear_free(&lin);
}

/* Random words for n nodes (width 1). */
static int32_t *words(int32_t n) {
    int32_t *d = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    for (int32_t i = 0; i < n; i++)
        d[i] = (int32_t)rnd(50);
    return d;
}

/* A random tree of n nodes, at most K children each, shapes from chains
 * to bushy, nodes labelled in a random order; added to bs. */
static void add_random_tree(rv_structs *bs, int32_t n, int K) {
    int32_t *label = malloc(sizeof(int32_t) * (size_t)n), *parent = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *nkids = calloc((size_t)n, sizeof(int32_t));
    for (int32_t i = 0; i < n; i++)
        label[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t u = (int32_t)rnd((uint32_t)i + 1), t = label[i];
        label[i] = label[u];
        label[u] = t;
    }
    uint32_t spread = 1 + rnd(8); /* small: deep, large: bushy */
    parent[label[0]] = -1;
    for (int32_t i = 1; i < n; i++) {
        int32_t p = i - 1 - (int32_t)rnd(spread < (uint32_t)i ? spread : (uint32_t)i);
        if (nkids[p] >= K) /* full: the first node with room */
            for (p = 0; nkids[p] >= K; p++)
                ;
        nkids[p]++;
        parent[label[i]] = label[p];
    }
    int32_t *d = words(n);
    CHECK_EQ_INT(rv_structs_add_parents(bs, n, parent, d), RV_OK);
    free(d);
    free(label);
    free(parent);
    free(nkids);
}

enum { H_SMALL = 5 };

static void test_small_shapes(void) {
    int32_t one[] = {3}, two_begin[] = {0, 1, 1}, two_child[] = {1}, two_data[] = {4, 7};
    /* one node */
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_add_sequence(bs, 1, one), RV_OK);
    check_batch(bs, RV_STRUCT_TREE, 2, H_SMALL);
    /* two nodes */
    rv_structs_clear(bs);
    CHECK_EQ_INT(rv_structs_add_children(bs, 2, two_begin, two_child, two_data), RV_OK);
    check_batch(bs, RV_STRUCT_TREE, 2, H_SMALL);
    /* several single nodes and pairs in one batch */
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(rv_structs_add_sequence(bs, 1, one), RV_OK);
        CHECK_EQ_INT(rv_structs_add_children(bs, 2, two_begin, two_child, two_data), RV_OK);
    }
    check_batch(bs, RV_STRUCT_TREE, 2, H_SMALL);
    rv_structs_free(bs);
}

/* Sequences: a recursion over chains (K = 1), the longest 3,000 nodes
 * deep (the interpreter walks without C recursion). */
static void test_chains(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_SEQUENCE, 1, 1);
    int32_t lens[] = {3000, 1, 17, 2, 40};
    for (int i = 0; i < 5; i++) {
        int32_t *d = words(lens[i]);
        CHECK_EQ_INT(rv_structs_add_sequence(bs, lens[i], d), RV_OK);
        free(d);
    }
    check_batch(bs, RV_STRUCT_SEQUENCE, 1, 3);
    rv_structs_free(bs);
}

static void test_trees(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    int32_t *d = words(127);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 6, d), RV_OK);
    check_batch(bs, RV_STRUCT_TREE, 2, H_SMALL);
    /* random binary trees, and a batch mixing them with the perfect one */
    rv_structs_clear(bs);
    for (int i = 0; i < 12; i++)
        add_random_tree(bs, 1 + (int32_t)rnd(60), 2);
    check_batch(bs, RV_STRUCT_TREE, 2, H_SMALL);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 4, d), RV_OK);
    CHECK_EQ_INT(rv_structs_add_sequence(bs, 30, d), RV_OK);
    check_batch(bs, RV_STRUCT_TREE, 2, H_SMALL);
    rv_structs_free(bs);
    /* wide: up to 6 children a node */
    bs = rv_structs_new(RV_STRUCT_TREE, 6, 1);
    for (int i = 0; i < 8; i++)
        add_random_tree(bs, 1 + (int32_t)rnd(50), 6);
    check_batch(bs, RV_STRUCT_TREE, 6, H_SMALL);
    rv_structs_free(bs);
    free(d);
}

static void test_grid_dags(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_DAG, 2, 1);
    int32_t *d = words(100);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 10, 10, d), RV_OK);
    check_batch(bs, RV_STRUCT_DAG, 2, H_SMALL);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 3, 7, d), RV_OK);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 1, 1, d), RV_OK);
    check_batch(bs, RV_STRUCT_DAG, 2, H_SMALL);
    rv_structs_free(bs);
    free(d);
}

/* The first sentences of SST's test split, alone and with a chain and a
 * perfect tree. */
static void test_sst(void) {
    const char *dir = harness_sst_dir();
    if (!dir) {
        printf("test_sst: skipped (no SST data; set RAVEL_SST_DIR)\n");
        return;
    }
    rv_structs *all = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_read_sst(all, dir, RV_SST_TEST), RV_OK);
    CHECK(rv_structs_vocab_size(all) < V);
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    for (int s = 0; s < 25 && s < rv_structs_count(all); s++) {
        int32_t n = rv_structs_size(all, s);
        int32_t *begin = malloc(sizeof(int32_t) * ((size_t)n + 1)), *child = malloc(sizeof(int32_t) * 2 * (size_t)n);
        int32_t *data = malloc(sizeof(int32_t) * (size_t)n);
        begin[0] = 0;
        for (int32_t i = 0; i < n; i++) {
            const int32_t *c;
            int nc = rv_structs_children(all, s, i, &c);
            memcpy(&child[begin[i]], c, sizeof(int32_t) * (size_t)nc);
            begin[i + 1] = begin[i] + nc;
            data[i] = rv_structs_data(all, s, i)[0];
        }
        CHECK_EQ_INT(rv_structs_add_children(bs, n, begin, child, data), RV_OK);
        free(begin);
        free(child);
        free(data);
    }
    check_batch(bs, RV_STRUCT_TREE, 2, 6);
    int32_t *d = words(63);
    CHECK_EQ_INT(rv_structs_add_sequence(bs, 20, d), RV_OK);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 5, d), RV_OK);
    check_batch(bs, RV_STRUCT_TREE, 2, 6);
    free(d);
    rv_structs_free(bs);
    rv_structs_free(all);
}

/* ---- errors in raw-bound arrays ---- */

/* A TreeRNN over 8 nodes bound array by array: child rows as given
 * (nchild[n] entries each), one dynamic batch; the run must fail with msg. */
static void expect_run_error(const int32_t *nchild, const int32_t *child, int64_t nedges,
                             const char *msg) {
    Fix f = fix_new(RV_STRUCT_DAG, 2, 100);
    build_tree_rnn(&f, 2);
    rv_bindings *b = rv_bindings_new(f.m);
    CHECK_EQ_INT(rv_bindings_randomize(b, 1), RV_OK); /* weights; then the structure by hand */
    int64_t n8 = 8, one = 1;
    rv_array *nc = rv_array_new(RV_I32, 1, &n8), *ch = rv_array_new(RV_I32, 1, &nedges);
    rv_array *wd = rv_array_new(RV_I32, 1, &n8), *rt = rv_array_new(RV_I32, 1, &one);
    rv_array *bb = rv_array_new(RV_I32, 1, &one), *bl = rv_array_new(RV_I32, 1, &one);
    memcpy(rv_array_data(nc), nchild, sizeof(int32_t) * 8);
    memcpy(rv_array_data(ch), child, sizeof(int32_t) * (size_t)nedges);
    ((int32_t *)rv_array_data(bl))[0] = 8;
    CHECK_EQ_INT(rv_bindings_set_size(b, "N", 8), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_size(b, "B", 1), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_size(b, "_T_nbatch", 1), RV_OK);
    const char *names[] = {"nchild", "child", "word", "root", "_T_batch_begin", "_T_batch_length"};
    rv_array *arrs[] = {nc, ch, wd, rt, bb, bl};
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(rv_bindings_set_array(b, names[i], arrs[i]), RV_OK);
    CHECK(rv_interp_run(f.m, b) != RV_OK);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    CHECK(rv_bindings_get_array(b, "h") == NULL); /* a failed run leaves no results */
    rv_bindings_free(b);
    for (int i = 0; i < 6; i++)
        rv_array_free(arrs[i]);
    rv_module_free(f.m);
}

static void test_raw_errors(void) {
    /* 5 -> 7 -> 5 (7's other child 6 is a leaf), 0 -> 1 -> 2 fine */
    int32_t nc[] = {1, 1, 0, 0, 0, 1, 0, 2}, ch[] = {1, 2, 7, 6, 5};
    expect_run_error(nc, ch, 5,
                     "recursion R over T: node 5 depends on itself through its children "
                     "(child[5, 0] = 7, child[7, 1] = 5)");
    /* a node its own child */
    int32_t nc2[] = {0, 0, 2, 0, 0, 0, 0, 0}, ch2[] = {1, 2};
    expect_run_error(nc2, ch2, 2,
                     "node 2 depends on itself through its children (child[2, 1] = 2)");
    /* the walk enters the cycle from outside it: 0 -> 1 -> 2 -> 3 -> 1 */
    int32_t nc3[] = {1, 1, 1, 1, 0, 0, 0, 0}, ch3[] = {1, 2, 3, 1};
    expect_run_error(nc3, ch3, 4,
                     "node 1 depends on itself through its children (child[1, 0] = 2, "
                     "child[2, 0] = 3, child[3, 0] = 1)");
    /* a child out of range: the UF's declared range */
    int32_t nc4[] = {1, 0, 0, 0, 0, 0, 0, 0}, ch4[] = {8};
    expect_run_error(nc4, ch4, 1, "ufun child: child[0, 0] = 8 outside declared range 0..7");
}

/* A cycle through a long chain is printed with its first links only. */
static void test_long_cycle(void) {
    Fix f = fix_new(RV_STRUCT_TREE, 1, 100000);
    build_tree_rnn(&f, 2);
    int32_t N = 50000;
    rv_linear lin = {0};
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 1, 1);
    int32_t *d = words(N);
    CHECK_EQ_INT(rv_structs_add_sequence(bs, N, d), RV_OK);
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    rv_bindings *b = rv_bindings_new(f.m);
    CHECK_EQ_INT(rv_bindings_randomize(b, 1), RV_OK);
    /* the leaf (last) gets the root (node 0) as its child */
    lin.nchild[N - 1] = 1;
    lin.child[N - 1] = 0;
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), RV_OK);
    CHECK(rv_interp_run(f.m, b) != RV_OK);
    CHECK_STR_CONTAINS(rv_last_error(), "node 0 depends on itself through its children "
                                        "(child[0, 0] = 1, child[1, 0] = 2, ");
    CHECK_STR_CONTAINS(rv_last_error(), ", ... 49991 more, child[49999, 0] = 0)");
    rv_bindings_free(b);
    rv_linear_free(&lin);
    rv_structs_free(bs);
    free(d);
    rv_module_free(f.m);
}

/* ---- random bindings ---- */

/* The batch bound to T, read back from the bindings into an rv_linear
 * (child padded as the linearizer pads it; data: word); false when an
 * array is missing or inconsistent. */
static bool bound_linear(rv_bindings *b, int K, rv_linear *lin) {
    const rv_array *nc = rv_bindings_get_array(b, "nchild"), *ch = rv_bindings_get_array(b, "child");
    const rv_array *rt = rv_bindings_get_array(b, "root"), *wd = rv_bindings_get_array(b, "word");
    const rv_array *bb = rv_bindings_get_array(b, "_T_batch_begin");
    const rv_array *bl = rv_bindings_get_array(b, "_T_batch_length");
    int64_t N = rv_bindings_get_size(b, "N"), B = rv_bindings_get_size(b, "B");
    int64_t NB = rv_bindings_get_size(b, "_T_nbatch");
    if (!nc || !ch || !rt || !wd || !bb || !bl || N < 1 || B < 1 || NB < 1 ||
        rv_array_numel(nc) != N || rv_array_numel(wd) != N || rv_array_numel(rt) != B ||
        rv_array_numel(bb) != NB || rv_array_numel(bl) != NB)
        return false;
    memset(lin, 0, sizeof *lin);
    lin->num_nodes = (int32_t)N, lin->num_structs = (int32_t)B, lin->num_batches = (int32_t)NB;
    lin->max_children = K, lin->width = 1;
    lin->nchild = malloc(sizeof(int32_t) * (size_t)N);
    lin->child = malloc(sizeof(int32_t) * (size_t)N * K);
    lin->data = malloc(sizeof(int32_t) * (size_t)N);
    lin->root = malloc(sizeof(int32_t) * (size_t)B);
    lin->batch_begin = malloc(sizeof(int32_t) * (size_t)NB);
    lin->batch_length = malloc(sizeof(int32_t) * (size_t)NB);
    int64_t e = 0;
    for (int64_t n = 0; n < N; n++) {
        lin->nchild[n] = (int32_t)elem(nc, n);
        lin->data[n] = (int32_t)elem(wd, n);
        for (int k = 0; k < K; k++)
            lin->child[n * K + k] = k < lin->nchild[n] && e < rv_array_numel(ch) ? (int32_t)elem(ch, e++)
                                                                                  : (int32_t)n;
    }
    for (int64_t s = 0; s < B; s++)
        lin->root[s] = (int32_t)elem(rt, s);
    for (int64_t i = 0; i < NB; i++) {
        lin->batch_begin[i] = (int32_t)elem(bb, i);
        lin->batch_length[i] = (int32_t)elem(bl, i);
    }
    return e == rv_array_numel(ch);
}

static void linear_free(rv_linear *lin) {
    free(lin->nchild);
    free(lin->child);
    free(lin->data);
    free(lin->root);
    free(lin->batch_begin);
    free(lin->batch_length);
}

/* The bound batch is a valid linearized batch of `kind`: children in
 * range and in earlier batches (so acyclic), batches consecutive from the
 * top, B roots that are nobody's child, and every other node some node's
 * child (one parent for trees and sequences). Returns the number of nodes
 * with two parents or more. */
static int64_t check_bound_batch(const rv_linear *lin, rv_struct_kind kind) {
    int32_t N = lin->num_nodes, K = lin->max_children;
    int32_t *batch = malloc(sizeof(int32_t) * (size_t)N), *parents = calloc((size_t)N, sizeof(int32_t));
    int32_t next = 0;
    for (int32_t b = lin->num_batches - 1; b >= 0; b--) {
        CHECK_EQ_INT(lin->batch_begin[b], next);
        CHECK(lin->batch_length[b] >= 1);
        for (int32_t v = next; v < next + lin->batch_length[b] && v < N; v++)
            batch[v] = b;
        next += lin->batch_length[b];
    }
    CHECK_EQ_INT(next, N);
    int64_t shared = 0;
    for (int32_t n = 0; n < N && next == N; n++) {
        CHECK(lin->nchild[n] >= 0 && lin->nchild[n] <= K);
        CHECK_EQ_INT(lin->nchild[n] == 0, batch[n] == 0); /* batch 0: exactly the leaves */
        for (int k = 0; k < lin->nchild[n]; k++) {
            int32_t c = lin->child[n * K + k];
            CHECK(c > n && c < N && batch[c] < batch[n]);
            if (c > n && c < N)
                shared += ++parents[c] == 2;
        }
    }
    int32_t roots = 0;
    for (int32_t n = 0; n < N; n++)
        roots += parents[n] == 0;
    CHECK_EQ_INT(roots, lin->num_structs);
    for (int32_t s = 0; s < lin->num_structs; s++)
        CHECK(lin->root[s] >= 0 && lin->root[s] < N && parents[lin->root[s]] == 0);
    if (kind != RV_STRUCT_DAG)
        CHECK_EQ_INT(shared, 0);
    free(batch);
    free(parents);
    return shared;
}

/* The largest number of children of a node. */
static int32_t widest(const rv_linear *lin) {
    int32_t w = 0;
    for (int32_t n = 0; n < lin->num_nodes; n++)
        w = lin->nchild[n] > w ? lin->nchild[n] : w;
    return w;
}

/* rv_bindings_randomize on a TreeRNN over each kind of structure, seeds
 * 1..12: a valid batch every time, within N's and B's ranges, the edge
 * shapes at the seeds that promise them, evaluated correctly, and the
 * same batch for the same seed. */
static void test_randomize(void) {
    struct {
        rv_struct_kind kind;
        int K;
    } kinds[] = {{RV_STRUCT_TREE, 2}, {RV_STRUCT_TREE, 5}, {RV_STRUCT_SEQUENCE, 1}, {RV_STRUCT_DAG, 3}};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        int64_t shared = 0;
        int32_t wide = 0;
        for (uint64_t seed = 1; seed <= 12; seed++) {
            rv_struct_kind kind = kinds[ki].kind;
            int K = kinds[ki].K;
            Fix f = fix_new_words(kind, K, 1000, 0, 100); /* every leaf has a word */
            build_tree_rnn(&f, 3);
            rv_bindings *b = rv_bindings_new(f.m);
            CHECK_EQ_INT(rv_bindings_randomize(b, seed), RV_OK);
            rv_status st = rv_interp_run(f.m, b);
            CHECK_EQ_INT(st, RV_OK);
            if (st != RV_OK)
                fprintf(stderr, "    seed %d: %s\n", (int)seed, rv_last_error());
            rv_linear lin;
            CHECK(bound_linear(b, K, &lin));
            shared += check_bound_batch(&lin, kind);
            wide = widest(&lin) > wide ? widest(&lin) : wide;
            if (seed % 6 == 1)
                CHECK(lin.num_nodes == 1 && lin.num_structs == 1);
            if (seed % 6 == 2) /* one chain of 200 nodes */
                CHECK(lin.num_nodes == 200 && lin.num_batches == 200 && lin.num_structs == 1);
            if (seed % 6 == 3 && K > 1) { /* bushy: complete K-ary trees */
                int levels = 0;
                for (int64_t full = 0, width = 1; full < lin.num_nodes; width *= K, levels++)
                    full += width;
                CHECK(lin.num_batches <= levels);
                if (lin.num_batches > levels)
                    fprintf(stderr, "    %d levels, %d nodes, K %d\n", lin.num_batches, lin.num_nodes, K);
            }
            for (int32_t n = 0; n < lin.num_nodes; n++) /* drawn in their range */
                CHECK(lin.data[n] >= 0 && lin.data[n] <= 99);
            free(check_model(TREE_RNN, kind, K, 3, &lin));
            /* the same seed, the same batch */
            rv_bindings *b2 = rv_bindings_new(f.m);
            CHECK_EQ_INT(rv_bindings_randomize(b2, seed), RV_OK);
            const char *names[] = {"nchild", "child", "root", "word", "_T_batch_begin"};
            for (int i = 0; i < 5; i++) {
                const rv_array *x = rv_bindings_get_array(b, names[i]), *y = rv_bindings_get_array(b2, names[i]);
                CHECK(x && y && rv_array_numel(x) == rv_array_numel(y));
                for (int64_t e = 0; x && y && e < rv_array_numel(x) && e < rv_array_numel(y); e++)
                    CHECK_EQ_INT(elem(x, e), elem(y, e));
            }
            linear_free(&lin);
            rv_bindings_free(b2);
            rv_bindings_free(b);
            rv_module_free(f.m);
        }
        if (kinds[ki].kind == RV_STRUCT_DAG) /* some node with two parents over the seeds */
            CHECK(shared > 0);
        CHECK_EQ_INT(wide, kinds[ki].K); /* and some node with K children */
    }
}

/* N and B bound by the caller (or read off a bound array's shape) stay,
 * declared ranges are kept, and a batch the ranges do not allow is an
 * error naming the structure. */
static void test_randomize_ranges(void) {
    for (uint64_t seed = 1; seed <= 6; seed++) {
        Fix f = fix_new(RV_STRUCT_TREE, 2, 1000);
        rv_bindings *b = rv_bindings_new(f.m);
        CHECK_EQ_INT(rv_bindings_set_size(b, "N", 37), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_size(b, "B", 5), RV_OK);
        CHECK_EQ_INT(rv_bindings_randomize(b, seed), RV_OK);
        CHECK_EQ_INT(rv_bindings_get_size(b, "N"), 37);
        CHECK_EQ_INT(rv_bindings_get_size(b, "B"), 5);
        rv_linear lin;
        CHECK(bound_linear(b, 2, &lin));
        check_bound_batch(&lin, RV_STRUCT_TREE);
        linear_free(&lin);
        rv_bindings_free(b);
        rv_module_free(f.m);
    }
    for (uint64_t seed = 1; seed <= 6; seed++) {
        rv_module *m = rv_module_new();
        rv_size *N = rv_size_new(m, "N", 7, 9), *B = rv_size_new(m, "B", 3, 4);
        rv_structure *st = rv_structure_new(m, "T", RV_STRUCT_DAG, N, 2, "child", "nchild");
        rv_structure_set_roots(st, "root", B);
        rv_bindings *b = rv_bindings_new(m);
        CHECK_EQ_INT(rv_bindings_randomize(b, seed), RV_OK);
        int64_t n = rv_bindings_get_size(b, "N"), nb = rv_bindings_get_size(b, "B");
        CHECK(n >= 7 && n <= 9 && nb >= 3 && nb <= 4);
        rv_bindings_free(b);
        rv_module_free(m);
    }
    /* N read off a bound input's shape: h[n, i < 2] = X[n, i] + sum(k <
     * nchild[n]) h[child[n, k], i] with X : f32[N, 2] bound to 37 rows */
    for (uint64_t seed = 1; seed <= 6; seed++) {
        Fix f = fix_new(RV_STRUCT_TREE, 2, 1000);
        rv_tensor *X = rv_input_new(f.m, "X", RV_F32, 2,
                                    (rv_dimspec[]){{NULL, rv_expr_size(f.m, f.N), 1},
                                                   {NULL, rv_expr_int(f.m, 2), 1}});
        rv_recurse *r = rv_recurse_begin(f.m, "R", f.st);
        const char *ax[] = {"n", "i"};
        rv_expr *ext[] = {NULL, rv_expr_int(f.m, 2)};
        rv_compute *c = rv_recurse_add(r, "h", RV_F32, 2, ax, ext);
        rv_expr *n = rv_compute_var(c, 0), *i = rv_compute_var(c, 1);
        rv_axis *k = rv_reduce_axis_new(f.m, "k", call(f.m, f.nchild, n, NULL));
        rv_expr *sum = rv_expr_reduce(
            f.m, RV_REDUCE_SUM, 1, &k,
            rd(f.m, rv_module_tensor(f.m, "h"), call(f.m, f.child, n, rv_expr_axis(f.m, k)), i));
        CHECK(rv_recurse_define(c, NULL, rv_expr_add(f.m, rd(f.m, X, n, i), sum), NULL) != NULL);
        CHECK_EQ_INT(rv_recurse_end(r), RV_OK);
        int64_t shape[] = {37, 2};
        rv_array *x = rv_array_new(RV_F32, 2, shape);
        rv_bindings *b = rv_bindings_new(f.m);
        CHECK_EQ_INT(rv_bindings_set_array(b, "X", x), RV_OK);
        CHECK_EQ_INT(rv_bindings_randomize(b, seed), RV_OK);
        CHECK_EQ_INT(rv_bindings_get_size(b, "N"), 37);
        CHECK_EQ_INT(rv_interp_run(f.m, b), RV_OK);
        rv_bindings_free(b);
        rv_array_free(x);
        rv_module_free(f.m);
    }
    rv_module *m = rv_module_new();
    rv_size *N = rv_size_new(m, "N", 1, 3), *B = rv_size_new(m, "B", 5, 10);
    rv_structure *st = rv_structure_new(m, "T", RV_STRUCT_TREE, N, 2, "child", "nchild");
    rv_structure_set_roots(st, "root", B);
    rv_bindings *b = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_randomize(b, 1), RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "structure T: cannot draw a batch of 5..10 structures with "
                                        "1..3 nodes");
    rv_bindings_free(b);
    rv_module_free(m);
}

/* A binary TreeRNN as Cortex writes it, reading children at fixed
 * positions:
 *   h[n, i < H] = if nchild[n] == 0 then Emb[word[n], i]
 *                 else tanh(sum(j < H) W[i, j] * h[child[n, 0], j]
 *                           + sum(j < H) W[i, H + j] * h[child[n, 1], j]) */
static void build_binary_rnn(Fix *f, int H) {
    rv_module *m = f->m;
    rv_tensor *emb = input(m, "Emb", V, H), *W = input(m, "W", H, 2 * H);
    rv_recurse *r = rv_recurse_begin(m, "R", f->st);
    const char *ax[] = {"n", "i"};
    rv_expr *ext[] = {NULL, rv_expr_int(m, H)};
    rv_compute *c = rv_recurse_add(r, "h", RV_F32, 2, ax, ext);
    rv_tensor *h = rv_module_tensor(m, "h");
    rv_expr *n = rv_compute_var(c, 0), *i = rv_compute_var(c, 1);
    rv_expr *sums[2];
    for (int k = 0; k < 2; k++) {
        rv_axis *j = rv_reduce_axis_new(m, "j", rv_expr_int(m, H));
        rv_expr *jv = rv_expr_axis(m, j);
        rv_expr *ch = call(m, f->child, n, rv_expr_int(m, k));
        sums[k] = rv_expr_reduce(
            m, RV_REDUCE_SUM, 1, &j,
            rv_expr_mul(m, rd(m, W, i, rv_expr_add(m, jv, rv_expr_int(m, k * H))), rd(m, h, ch, jv)));
    }
    rv_expr *isleaf = rv_expr_binop(m, "==", call(m, f->nchild, n, NULL), rv_expr_int(m, 0));
    CHECK(rv_recurse_define(c, isleaf, rd(m, emb, call(m, f->word, n, NULL), i),
                            rv_expr_unop(m, "tanh", rv_expr_add(m, sums[0], sums[1]))) != NULL);
    CHECK_EQ_INT(rv_recurse_end(r), RV_OK);
}

/* A program reading child[n, 1] gets full trees (nchild 0 or K) at every
 * seed, tree and DAG structures alike, and so runs; N - B a multiple of K
 * that the bound sizes forbid is an error saying why. */
static void test_randomize_full_trees(void) {
    rv_struct_kind kinds[] = {RV_STRUCT_TREE, RV_STRUCT_DAG};
    int Ks[] = {2, 3};
    for (int ki = 0; ki < 2; ki++)
        for (uint64_t seed = 1; seed <= 12; seed++) {
            int K = Ks[ki];
            Fix f = fix_new_words(kinds[ki], K, 1000, 0, 100);
            build_binary_rnn(&f, 3);
            rv_bindings *b = rv_bindings_new(f.m);
            CHECK_EQ_INT(rv_bindings_randomize(b, seed), RV_OK);
            rv_status st = rv_interp_run(f.m, b);
            CHECK_EQ_INT(st, RV_OK);
            if (st != RV_OK)
                fprintf(stderr, "    seed %d: %s\n", (int)seed, rv_last_error());
            rv_linear lin;
            CHECK(bound_linear(b, K, &lin));
            check_bound_batch(&lin, RV_STRUCT_TREE); /* no shared child */
            for (int32_t n = 0; n < lin.num_nodes; n++)
                CHECK(lin.nchild[n] == 0 || lin.nchild[n] == K);
            CHECK_EQ_INT((lin.num_nodes - lin.num_structs) % K, 0);
            if (seed % 6 == 2) /* a caterpillar: one level per internal node */
                CHECK_EQ_INT(lin.num_batches, (lin.num_nodes - 1) / K + 1);
            linear_free(&lin);
            rv_bindings_free(b);
            rv_module_free(f.m);
        }
    Fix f = fix_new(RV_STRUCT_TREE, 2, 1000);
    build_binary_rnn(&f, 3);
    rv_bindings *b = rv_bindings_new(f.m);
    CHECK_EQ_INT(rv_bindings_set_size(b, "N", 8), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_size(b, "B", 1), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(b, 1), RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "structure T: its children are read at fixed positions "
                                        "(child[n, c], c a constant), so a random batch holds "
                                        "full trees");
    rv_bindings_free(b);
    rv_module_free(f.m);
}

/* The largest magnitude of a drawn f32 input. */
static double max_abs(const rv_bindings *b, const char *name) {
    const rv_array *a = rv_bindings_get_array(b, name);
    double m = 0;
    for (int64_t i = 0; a && i < rv_array_numel(a); i++) {
        double v = ((const float *)rv_array_cdata(a))[i];
        m = v > m ? v : -v > m ? -v : m;
    }
    return m;
}

/* In a recursive program the drawn weights are uniform in [-1, 1) over
 * the square root of their fan-in (docs/recursion.md, "Random
 * weights"): Wl through the stacked copy WT read in a product over 2
 * children x 16, Emb through the gathered copy x read over 16, the bias
 * unscaled; a program without recursion draws every input in [-1, 1). */
static void test_randomize_weight_scale(void) {
    static const char text[] =
        "size N in 1..100\nsize B in 1..10\n"
        "structure T : tree(N, 2) {\n    children child, nchild\n    roots root[s < B]\n"
        "    data word in -1..99\n}\n"
        "input Emb : f32[100, 16]\ninput Wl : f32[16, 16]\ninput Wr : f32[16, 16]\n"
        "input b : f32[16]\ninput U : f32[16, 16]\n"
        "x[n, j < 16] = if word[n] >= 0 then Emb[word[n], j] else 0.0\n"
        "XU[n, i < 16] = sum(j < 16) U[i, j] * x[n, j]\n"
        "WT[k < 2, j < 16, i < 16] = if k == 0 then Wl[i, j] else Wr[i, j]\n"
        "recurse R over T {\n"
        "    z[n, i < 16] = sum(k < nchild[n], j < 16) WT[k, j, i] * h[child[n, k], j]\n"
        "    h[n, i < 16] = tanh(XU[n, i] + z[n, i] + b[i])\n"
        "}\n";
    const struct {
        const char *name;
        double fanin;
    } want[] = {{"Wl", 32}, {"Wr", 32}, {"U", 16}, {"Emb", 16}, {"b", 1}};
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("scaled.rv", text, &m), RV_OK);
    rv_bindings *b = m ? rv_bindings_new(m) : NULL;
    CHECK(b && rv_bindings_randomize(b, 3) == RV_OK);
    for (size_t i = 0; b && i < sizeof want / sizeof want[0]; i++) {
        double bound = 1 / sqrt(want[i].fanin), got = max_abs(b, want[i].name);
        CHECK(got <= bound && got > 0.9 * bound);
        if (!(got <= bound && got > 0.9 * bound))
            fprintf(stderr, "    %s: max |x| %g, bound %g\n", want[i].name, got, bound);
    }
    CHECK(b && rv_interp_run(m, b) == RV_OK);
    rv_bindings_free(b);
    rv_module_free(m);
    CHECK_EQ_INT(rv_module_parse("flat.rv", "input W : f32[64, 64]\ninput X : f32[64]\n"
                                            "Y[i] = sum(j < 64) W[i, j] * X[j]\n", &m), RV_OK);
    b = m ? rv_bindings_new(m) : NULL;
    CHECK(b && rv_bindings_randomize(b, 3) == RV_OK && max_abs(b, "W") > 0.9);
    rv_bindings_free(b);
    rv_module_free(m);
}

/* A batch edited by hand after rv_linearize is refused with the array and
 * index named, and refused atomically: the bindings keep the previous
 * batch, whose arrays (in the spares a rebind or reset keeps) the next
 * batch is bound in, not in new ones, with every value of its own. */
static void test_set_linear_reuse(void) {
    Fix f = fix_new(RV_STRUCT_TREE, 2, 1000);
    rv_structs *bs = small_batch(), *one = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    int32_t w = 3;
    CHECK_EQ_INT(rv_structs_add_perfect_tree(one, 0, &w), RV_OK);
    rv_linear lin = {0}, small = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(rv_linearize(one, &small), RV_OK);
    rv_bindings *b = rv_bindings_new(f.m);
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), RV_OK);
    const rv_array *ch = rv_bindings_get_array(b, "child");
    const rv_array *wd = rv_bindings_get_array(b, "word");
    /* each error once, the batch restored after it */
    struct {
        int32_t *at, bad;
        const char *msg;
    } edits[] = {
        {&lin.child[0], 8, "structure T: child 0 of node 0 of the batch is 8, outside 0..7"},
        {&lin.child[1], -1, "structure T: child 1 of node 0 of the batch is -1, outside 0..7"},
        {&lin.nchild[1], 3, "structure T: node 1 of the batch has 3 children (0..2)"},
        {&lin.child[1], lin.child[0], "structure T is a tree, but node"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        int32_t keep = *edits[i].at;
        *edits[i].at = edits[i].bad;
        CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), RV_ERR_ARG);
        CHECK_STR_CONTAINS(rv_last_error(), edits[i].msg);
        *edits[i].at = keep;
        CHECK(rv_bindings_get_array(b, "child") == ch);
        CHECK_EQ_INT(rv_bindings_get_size(b, "N"), 8);
        CHECK_EQ_INT(elem(ch, 0), lin.child[0]);
    }
    /* a reset and a smaller batch: in the same arrays, its own values */
    CHECK_EQ_INT(rv_bindings_reset(b, NULL), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &small), RV_OK);
    CHECK(rv_bindings_get_array(b, "word") == wd);
    CHECK_EQ_INT(rv_array_numel(wd), 1);
    CHECK_EQ_INT(elem(wd, 0), 3);
    CHECK_EQ_INT(rv_array_numel(rv_bindings_get_array(b, "child")), 0);
    /* rebinding without a reset: the two batches alternate between two
     * sets of arrays */
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), RV_OK);
    const rv_array *ch2 = rv_bindings_get_array(b, "child");
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &small), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_linear(b, "T", &lin), RV_OK);
    CHECK(rv_bindings_get_array(b, "child") == ch2);
    for (int64_t e = 0, n = 0; n < lin.num_nodes; n++)
        for (int k = 0; k < lin.nchild[n]; k++)
            CHECK_EQ_INT(elem(ch2, e++), lin.child[n * lin.max_children + k]);
    CHECK_EQ_INT(rv_interp_run(f.m, b), RV_OK);
    rv_bindings_free(b);
    rv_linear_free(&lin);
    rv_linear_free(&small);
    rv_structs_free(bs);
    rv_structs_free(one);
    rv_module_free(f.m);
}

int main(void) {
    RUN(test_set_linear_arrays);
    RUN(test_set_linear_read_by_compute);
    RUN(test_set_linear_errors);
    RUN(test_set_linear_kinds);
    RUN(test_small_shapes);
    RUN(test_chains);
    RUN(test_trees);
    RUN(test_grid_dags);
    RUN(test_sst);
    RUN(test_raw_errors);
    RUN(test_long_cycle);
    RUN(test_randomize);
    RUN(test_randomize_ranges);
    RUN(test_randomize_full_trees);
    RUN(test_randomize_weight_scale);
    RUN(test_set_linear_reuse);
    return harness_report();
}
