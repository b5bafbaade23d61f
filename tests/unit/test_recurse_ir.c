/*
 * test_recurse_ir.c — structures and recursion groups in the IR
 * (src/ir/recurse.c): building them through the C API, the verifier on a
 * valid group, and the refusal of each read the recursion rules forbid
 * (Cortex P.1, P.2) with a message naming it.
 */
#include "harness.h"

/* A module with N, B, a binary tree structure T (child, nchild, root,
 * word) and inputs Emb[100, H], X[N, H]. */
typedef struct Fix {
    rv_module *m;
    rv_structure *st;
    rv_size *N;
    rv_tensor *emb, *x;
    rv_ufun *child, *nchild, *word;
} Fix;

enum { H = 8 };

static Fix fix_new(void) {
    Fix f = {0};
    f.m = rv_module_new();
    f.N = rv_size_new(f.m, "N", 1, 1000);
    rv_size *B = rv_size_new(f.m, "B", 1, 100);
    f.st = rv_structure_new(f.m, "T", RV_STRUCT_TREE, f.N, 2, "child", "nchild");
    CHECK(f.st != NULL);
    CHECK(rv_structure_set_roots(f.st, "root", B) != NULL);
    f.word = rv_structure_add_data(f.st, "word", rv_expr_int(f.m, 0), rv_expr_int(f.m, 99));
    CHECK(f.word != NULL);
    f.child = rv_module_ufun(f.m, "child");
    f.nchild = rv_module_ufun(f.m, "nchild");
    rv_dimspec de[] = {{NULL, rv_expr_int(f.m, 100), 1}, {NULL, rv_expr_int(f.m, H), 1}};
    f.emb = rv_input_new(f.m, "Emb", RV_F32, 2, de);
    rv_dimspec dx[] = {{NULL, rv_expr_size(f.m, f.N), 1}, {NULL, rv_expr_int(f.m, H), 1}};
    f.x = rv_input_new(f.m, "X", RV_F32, 2, dx);
    return f;
}

static rv_expr *child_of(Fix *f, rv_expr *n, rv_expr *k) {
    rv_expr *a[] = {n, k};
    return rv_expr_ufcall(f->m, f->child, 2, a);
}

static rv_expr *read2(Fix *f, rv_tensor *t, rv_expr *a, rv_expr *b) {
    rv_expr *idx[] = {a, b};
    return rv_expr_read(f->m, t, 2, idx);
}

/* hs[n, i] = sum(k < nchild[n]) h[child[n, k], i]
 * h[n, i]  = tanh(Emb[word[n], i] + hs[n, i]) */
static void test_child_sum_group(void) {
    Fix f = fix_new();
    rv_recurse *r = rv_recurse_begin(f.m, "R", f.st);
    const char *ax[] = {"n", "i"};
    rv_expr *ext[] = {NULL, rv_expr_int(f.m, H)};
    rv_compute *hs = rv_recurse_add(r, "hs", RV_F32, 2, ax, ext);
    rv_compute *h = rv_recurse_add(r, "h", RV_F32, 2, ax, ext);
    CHECK(hs && h);
    rv_tensor *ht = rv_module_tensor(f.m, "h"), *hst = rv_module_tensor(f.m, "hs");
    rv_expr *n = rv_compute_var(hs, 0), *i = rv_compute_var(hs, 1);
    rv_axis *k = rv_reduce_axis_new(f.m, "k", rv_expr_ufcall(f.m, f.nchild, 1, &n));
    rv_expr *kv = rv_expr_axis(f.m, k);
    rv_expr *sum = rv_expr_reduce(f.m, RV_REDUCE_SUM, 1, &k, read2(&f, ht, child_of(&f, n, kv), i));
    CHECK(rv_recurse_define(hs, NULL, sum, NULL) != NULL);
    n = rv_compute_var(h, 0);
    i = rv_compute_var(h, 1);
    rv_expr *w = rv_expr_ufcall(f.m, f.word, 1, &n);
    rv_expr *body = rv_expr_unop(f.m, "tanh", rv_expr_add(f.m, read2(&f, f.emb, w, i), read2(&f, hst, n, i)));
    CHECK(rv_recurse_define(h, NULL, body, NULL) != NULL);
    CHECK_EQ_INT(rv_recurse_end(r), RV_OK);
    CHECK_EQ_INT(rv_module_verify(f.m), RV_OK);
    CHECK(rv_tensor_is_output(f.m, ht));
    CHECK(!rv_tensor_is_output(f.m, hst));
    rv_module_free(f.m);
}

/* One member `h` whose body is built by `make`; expects rv_recurse_end
 * (or the define) to fail with `msg`. */
typedef rv_expr *(*MakeBody)(Fix *f, rv_compute *c, rv_tensor *self);

static void expect_refused(MakeBody make, const char *msg) {
    Fix f = fix_new();
    rv_recurse *r = rv_recurse_begin(f.m, "R", f.st);
    const char *ax[] = {"n", "i"};
    rv_expr *ext[] = {NULL, rv_expr_int(f.m, H)};
    rv_compute *c = rv_recurse_add(r, "h", RV_F32, 2, ax, ext);
    rv_expr *body = make(&f, c, rv_module_tensor(f.m, "h"));
    rv_tensor *t = body ? rv_recurse_define(c, NULL, body, NULL) : NULL;
    rv_status st = t ? rv_recurse_end(r) : RV_ERR_TYPE;
    CHECK_EQ_INT(st, RV_ERR_TYPE);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    rv_module_free(f.m);
}

static rv_expr *own_node(Fix *f, rv_compute *c, rv_tensor *self) {
    return read2(f, self, rv_compute_var(c, 0), rv_compute_var(c, 1));
}

static rv_expr *next_node(Fix *f, rv_compute *c, rv_tensor *self) {
    return read2(f, self, rv_expr_add(f->m, rv_compute_var(c, 0), rv_expr_int(f->m, 1)),
                 rv_compute_var(c, 1));
}

static rv_expr *grandchild(Fix *f, rv_compute *c, rv_tensor *self) {
    rv_expr *n = rv_compute_var(c, 0), *z = rv_expr_int(f->m, 0);
    return read2(f, self, child_of(f, child_of(f, n, z), z), rv_compute_var(c, 1));
}

static rv_expr *value_index(Fix *f, rv_compute *c, rv_tensor *self) {
    rv_expr *n = rv_compute_var(c, 0);
    rv_expr *v = rv_expr_cast(f->m, RV_I64, read2(f, f->x, n, rv_expr_int(f->m, 0)));
    return read2(f, self, child_of(f, n, v), rv_compute_var(c, 1));
}

static void test_refused_reads(void) {
    expect_refused(own_node, "reads itself at its own node");
    expect_refused(next_node, "neither 'n' nor one of its children");
    expect_refused(grandchild, "neither 'n' nor one of its children");
    expect_refused(value_index, "Cortex P.1");
}

static void test_same_node_order(void) {
    Fix f = fix_new();
    rv_recurse *r = rv_recurse_begin(f.m, "R", f.st);
    const char *ax[] = {"n", "i"};
    rv_expr *ext[] = {NULL, rv_expr_int(f.m, H)};
    rv_compute *a = rv_recurse_add(r, "a", RV_F32, 2, ax, ext);
    rv_compute *b = rv_recurse_add(r, "b", RV_F32, 2, ax, ext);
    rv_tensor *bt = rv_module_tensor(f.m, "b");
    /* a reads b at its own node, but b comes after a */
    CHECK(rv_recurse_define(a, NULL, read2(&f, bt, rv_compute_var(a, 0), rv_compute_var(a, 1)),
                            NULL) != NULL);
    CHECK(rv_recurse_define(b, NULL, rv_expr_float(f.m, RV_F32, 1.0), NULL) != NULL);
    CHECK_EQ_INT(rv_recurse_end(r), RV_ERR_TYPE);
    CHECK_STR_CONTAINS(rv_last_error(), "defined after it");
    rv_module_free(f.m);
}

static void test_declarations(void) {
    rv_module *m = rv_module_new();
    rv_size *N = rv_size_new(m, "N", 1, 10);
    CHECK(rv_structure_new(m, "S", RV_STRUCT_SEQUENCE, N, 2, "c", "nc") == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "a sequence has 1 child");
    rv_structure *s = rv_structure_new(m, "S", RV_STRUCT_SEQUENCE, N, 1, "c", "nc");
    CHECK(s != NULL);
    CHECK(rv_module_structure(m, "S") == s);
    CHECK(rv_module_ufun(m, "_S_batch_begin") != NULL);
    /* a member without its extents, a member never defined */
    rv_recurse *r = rv_recurse_begin(m, "R", s);
    const char *ax[] = {"n", "i"};
    CHECK(rv_recurse_add(r, "h", RV_F32, 2, ax, NULL) == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "needs an extent");
    rv_expr *ext[] = {NULL, rv_expr_int(m, 4)};
    CHECK(rv_recurse_add(r, "h", RV_F32, 2, ax, ext) != NULL);
    CHECK_EQ_INT(rv_recurse_end(r), RV_ERR_TYPE);
    CHECK_STR_CONTAINS(rv_last_error(), "declared but not defined");
    rv_module_free(m);
}

/* A data column's range uses sizes only: the structure is declared and
 * printed before every ufun and tensor. */
static void test_data_range_sizes_only(void) {
    Fix f = fix_new();
    rv_expr *w0 = rv_expr_ufcall(f.m, f.word, 1, (rv_expr *[]){rv_expr_int(f.m, 0)});
    CHECK(rv_structure_add_data(f.st, "label", rv_expr_int(f.m, 0), w0) == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "uses the ufun 'word'");
    CHECK(rv_module_ufun(f.m, "label") == NULL);
    rv_expr *nm1 = rv_expr_sub(f.m, rv_expr_size(f.m, f.N), rv_expr_int(f.m, 1));
    CHECK(rv_structure_add_data(f.st, "label", rv_expr_int(f.m, 0), nm1) != NULL);
    rv_module_free(f.m);
}

/* A structure's kind, K and data columns, read back as a caller sizing
 * its rv_structs from a loaded module does; NULL gives the documented
 * values. */
static void test_structure_accessors(void) {
    Fix f = fix_new();
    CHECK_EQ_INT(rv_structure_kind(f.st), RV_STRUCT_TREE);
    CHECK_EQ_INT(rv_structure_max_children(f.st), 2);
    CHECK_EQ_INT(rv_structure_num_data(f.st), 1);
    rv_structure *s = rv_structure_new(f.m, "S", RV_STRUCT_SEQUENCE, f.N, 1, "c", "nc");
    CHECK(s != NULL);
    CHECK_EQ_INT(rv_structure_kind(s), RV_STRUCT_SEQUENCE);
    CHECK_EQ_INT(rv_structure_max_children(s), 1);
    CHECK_EQ_INT(rv_structure_num_data(s), 0);
    CHECK_EQ_INT(rv_structure_kind(NULL), RV_STRUCT_KIND_COUNT);
    CHECK_EQ_INT(rv_structure_max_children(NULL), -1);
    CHECK_EQ_INT(rv_structure_num_data(NULL), -1);
    rv_module_free(f.m);
}

int main(void) {
    RUN(test_child_sum_group);
    RUN(test_refused_reads);
    RUN(test_same_node_order);
    RUN(test_declarations);
    RUN(test_data_range_sizes_only);
    RUN(test_structure_accessors);
    return harness_report();
}
