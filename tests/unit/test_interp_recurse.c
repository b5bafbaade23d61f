/*
 * test_interp_recurse.c — structures bound from linearized batches
 * (rv_bindings_set_linear) and recursion evaluated by the interpreter.
 *
 * Bindings: the arrays a batch binds (the ragged child UF packed row by
 * row, roots, data columns, the hidden dynamic batches, the sizes), read
 * back and through a plain compute over the structure's UFs; the refusal
 * of a batch that does not fit the structure (K, data width, kind, N's
 * range), binding nothing.
 */
#include "harness.h"

/* ---- a module with a binary tree structure ---- */

/* N in 1..nmax, B in 1..100, structure T : tree(N, K) { children child,
 * nchild  roots root[s < B]  data word in -1..99 } (-1: no word) */
typedef struct Fix {
    rv_module *m;
    rv_structure *st;
    rv_size *N, *B;
    rv_ufun *child, *nchild, *word, *root;
} Fix;

static Fix fix_new(rv_struct_kind kind, int K, int64_t nmax) {
    Fix f = {0};
    f.m = rv_module_new();
    f.N = rv_size_new(f.m, "N", 1, nmax);
    f.B = rv_size_new(f.m, "B", 1, 100);
    f.st = rv_structure_new(f.m, "T", kind, f.N, K, "child", "nchild");
    CHECK(f.st != NULL);
    f.root = rv_structure_set_roots(f.st, "root", f.B);
    f.word = rv_structure_add_data(f.st, "word", rv_expr_int(f.m, -1), rv_expr_int(f.m, 99));
    CHECK(f.root && f.word);
    f.child = rv_module_ufun(f.m, "child");
    f.nchild = rv_module_ufun(f.m, "nchild");
    return f;
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

int main(void) {
    RUN(test_set_linear_arrays);
    RUN(test_set_linear_read_by_compute);
    RUN(test_set_linear_errors);
    RUN(test_set_linear_kinds);
    return harness_report();
}
