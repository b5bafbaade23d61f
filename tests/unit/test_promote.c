/*
 * test_promote.c — an accumulation that a loop repeats at the same
 * addresses runs in a local tile across the loop (src/lower/promote.c).
 *
 * Loop nests are built by hand: a serial loop k around a nest accumulating
 * into S, a buffer in the scratch arena. The checks pin the rewrite (the
 * tile copied into S_acc before the loop and back after it, the loop
 * reading and writing S_acc) and every case where it must not happen: the
 * index uses k, S read at another index, a non-injective index, a local S,
 * a guard, a tile over the size limit, an inner reduction loop whose
 * extent may be zero. End to end, test_kernels runs the kblock dense
 * kernels (which rely on this pass) against the interpreter, and the
 * reduce_reorder golden shows the pass on a compiled program.
 */
#include "harness.h"
#include "loop_ir.h"

/* The pieces of one case: S [4 rows of 48], X [4 x 8 x 48], loops. */
typedef struct Case {
    Module *m;
    Buffer *S, *X;
    Axis *r, *k, *a, *v;
} Case;

static Case case_new(BufScope s_scope, int64_t k_extent) {
    Case c;
    c.m = rv_module_new();
    Module *m = c.m;
    c.S = ir_buffer_new(m, "S", RV_F32, I(m, 192), s_scope);
    c.X = ir_buffer_new(m, "X", RV_F32, I(m, 1536), BUF_ARG);
    c.r = lower_loop_var(m, "r", I(m, 4));
    c.k = lower_loop_var(m, "k", I(m, k_extent));
    c.a = lower_loop_var(m, "a", I(m, 3));
    c.v = lower_loop_var(m, "v", I(m, 16));
    return c;
}

static Expr *sum3(Module *m, Expr *x, Expr *y, Expr *z) {
    return bin(m, EX_ADD, bin(m, EX_ADD, x, y), z);
}

/* r*48 + a*16 + v: a 3 x 16 tile per r */
static Expr *tile_at(Case *c) {
    Module *m = c->m;
    return sum3(m, bin(m, EX_MUL, c->r->var, I(m, 48)), bin(m, EX_MUL, c->a->var, I(m, 16)),
                c->v->var);
}

/* X[r*48 + k*192 + a*16 + v] */
static Expr *x_at(Case *c) {
    Module *m = c->m;
    Expr *at =
        ir_simplify_expr(m, bin(m, EX_ADD, bin(m, EX_MUL, c->k->var, I(m, 192)), tile_at(c)));
    return ir_load(m, c->X, at);
}

/* for r: for k: unroll a: vector v: S[at] = S[read] + X[...] */
static Stmt *nest(Case *c, Expr *at, Expr *read) {
    Module *m = c->m;
    Stmt *st = lower_store(m, c->S, at, bin(m, EX_ADD, ir_load(m, c->S, read), x_at(c)));
    Stmt *inner = loop(m, c->a, LOOP_UNROLL, loop(m, c->v, LOOP_VECTOR, st));
    return loop(m, c->r, LOOP_SERIAL, loop(m, c->k, LOOP_SERIAL, inner));
}

static void test_promoted(void) {
    Case c = case_new(BUF_GLOBAL, 8);
    Stmt *s = nest(&c, tile_at(&c), tile_at(&c));
    Stmt *p = lower_promote_accumulators(c.m, s);
    CHECK(p != s);
    check_text(p, "for r in 0..4:\n"
                  "  allocate S_acc: f32[48] local\n"
                  "  unroll for a in 0..3:\n"
                  "    vector for v in 0..16:\n"
                  "      S_acc[a*16 + v] = S[r*48 + a*16 + v]\n"
                  "  for k in 0..8:\n"
                  "    unroll for a in 0..3:\n"
                  "      vector for v in 0..16:\n"
                  "        S_acc[a*16 + v] = S_acc[a*16 + v] + X[r*48 + k*192 + a*16 + v]\n"
                  "  unroll for a in 0..3:\n"
                  "    vector for v in 0..16:\n"
                  "      S[r*48 + a*16 + v] = S_acc[a*16 + v]\n");
    rv_module_free(c.m);
}

/* A loop of symbolic extent may run no iteration: the copies go under a
 * check. A tail tile's rows (N - N/3*3 < 3) size the tile by their bound. */
static void test_symbolic_extents(void) {
    Module *m = rv_module_new();
    Size *N = rv_size_new(m, "N", 1, 1000);
    Expr *n = ir_size(m, N);
    Buffer *S = ir_buffer_new(m, "S", RV_F32, I(m, 64), BUF_GLOBAL);
    Buffer *X = ir_buffer_new(m, "X", RV_F32, bin(m, EX_MUL, n, I(m, 64)), BUF_ARG);
    Axis *k = lower_loop_var(m, "k", n);
    Expr *rows = bin(m, EX_SUB, n, bin(m, EX_MUL, bin(m, EX_DIV, n, I(m, 3)), I(m, 3)));
    Axis *a = lower_loop_var(m, "a", rows);
    Axis *v = lower_loop_var(m, "v", I(m, 16));
    Expr *at = bin(m, EX_ADD, bin(m, EX_MUL, a->var, I(m, 16)), v->var);
    Expr *xv = ir_load(m, X, bin(m, EX_ADD, bin(m, EX_MUL, k->var, I(m, 64)), at));
    Stmt *st = lower_store(m, S, at, bin(m, EX_ADD, ir_load(m, S, at), xv));
    Stmt *s = loop(m, k, LOOP_SERIAL, loop(m, a, LOOP_UNROLL, loop(m, v, LOOP_VECTOR, st)));
    Stmt *p = lower_promote_accumulators(m, s);
    char *text = stmt_str(p);
    CHECK_STR_CONTAINS(text, "if 0 < N:\n  allocate S_acc: f32[32] local\n");
    CHECK_STR_CONTAINS(text, "S_acc[a*16 + v] = S_acc[a*16 + v] + X[");
    CHECK_STR_CONTAINS(text, "S[a*16 + v] = S_acc[a*16 + v]\n");
    base_free(text);
    rv_module_free(m);
}

/* An inner loop the index does not use sums into the same element: it is
 * no tile dimension, and must run at least once (a constant extent). */
static void test_inner_reduction(void) {
    Case c = case_new(BUF_GLOBAL, 8);
    Module *m = c.m;
    Expr *at = bin(m, EX_ADD, bin(m, EX_MUL, c.r->var, I(m, 16)), c.v->var);
    Stmt *st = lower_store(m, c.S, at, bin(m, EX_ADD, ir_load(m, c.S, at), x_at(&c)));
    Stmt *inner = loop(m, c.a, LOOP_SERIAL, loop(m, c.v, LOOP_VECTOR, st));
    Stmt *s = loop(m, c.k, LOOP_SERIAL, inner);
    Stmt *p = lower_promote_accumulators(m, s);
    char *text = stmt_str(p);
    CHECK_STR_CONTAINS(text, "allocate S_acc: f32[16] local\n");
    CHECK_STR_CONTAINS(text, "S_acc[v] = S_acc[v] + X[");
    base_free(text);
    /* the same with a's extent N - 1 (maybe 0): kept at k; the a loop
     * itself accumulates a 16-lane tile, under a check that it runs */
    Size *N = rv_size_new(m, "N", 1, 3);
    Axis *a2 = lower_loop_var(m, "a2", bin(m, EX_SUB, ir_size(m, N), I(m, 1)));
    Stmt *st2 =
        lower_store(m, c.S, at, bin(m, EX_ADD, ir_load(m, c.S, at), ir_float(m, RV_F32, 1)));
    Stmt *s2 = loop(m, c.k, LOOP_SERIAL, loop(m, a2, LOOP_SERIAL, loop(m, c.v, LOOP_VECTOR, st2)));
    text = stmt_str(lower_promote_accumulators(m, s2));
    CHECK_STR_CONTAINS(text,
                       "for k in 0..8:\n  if 0 < N - 1:\n    allocate S_acc: f32[16] local\n");
    base_free(text);
    rv_module_free(m);
}

static void test_kept(void) {
    Case c = case_new(BUF_GLOBAL, 8);
    Module *m = c.m;
    /* the index moves with k */
    Expr *moving = bin(m, EX_ADD, tile_at(&c), c.k->var);
    Stmt *s = nest(&c, moving, moving);
    CHECK(lower_promote_accumulators(m, s) == s);
    /* S read at another element */
    Expr *next = bin(m, EX_ADD, tile_at(&c), I(m, 1));
    s = nest(&c, tile_at(&c), next);
    CHECK(lower_promote_accumulators(m, s) == s);
    /* a + v: 3 x 16 iterations over 18 elements */
    Expr *overlap = bin(m, EX_ADD, c.a->var, c.v->var);
    s = nest(&c, overlap, overlap);
    CHECK(lower_promote_accumulators(m, s) == s);
    /* a guard in the nest */
    Stmt *st =
        lower_store(m, c.S, tile_at(&c), bin(m, EX_ADD, ir_load(m, c.S, tile_at(&c)), x_at(&c)));
    Stmt *g = lower_if(m, bin(m, EX_LT, c.a->var, I(m, 2)), st, NULL);
    s = loop(m, c.k, LOOP_SERIAL, loop(m, c.a, LOOP_UNROLL, loop(m, c.v, LOOP_VECTOR, g)));
    CHECK(lower_promote_accumulators(m, s) == s);
    /* a vector (not serial) loop around the accumulation */
    s = loop(m, c.v, LOOP_VECTOR, lower_store(m, c.S, c.v->var, ir_load(m, c.S, c.v->var)));
    CHECK(lower_promote_accumulators(m, s) == s);
    rv_module_free(m);
    /* a local S: the C compiler's already */
    c = case_new(BUF_LOCAL, 8);
    s = nest(&c, tile_at(&c), tile_at(&c));
    CHECK(lower_promote_accumulators(c.m, s) == s);
    rv_module_free(c.m);
    /* a tile over 4 KiB: 2048 floats */
    m = rv_module_new();
    Buffer *S = ir_buffer_new(m, "S", RV_F32, I(m, 2048), BUF_GLOBAL);
    Axis *k = lower_loop_var(m, "k", I(m, 4)), *j = lower_loop_var(m, "j", I(m, 2048));
    Stmt *big =
        lower_store(m, S, j->var, bin(m, EX_ADD, ir_load(m, S, j->var), ir_float(m, RV_F32, 1)));
    s = loop(m, k, LOOP_SERIAL, loop(m, j, LOOP_SERIAL, big));
    CHECK(lower_promote_accumulators(m, s) == s);
    rv_module_free(m);
}

int main(void) {
    RUN(test_promoted);
    RUN(test_symbolic_extents);
    RUN(test_inner_reduction);
    RUN(test_kept);
    return harness_report();
}
