/*
 * test_forward.c — reads of a local copy of a window read its source
 * (src/lower/forward.c).
 *
 * Loop nests are built by hand: a local array L filled by a copy from S,
 * then read. The checks pin when the copy goes (a guard-free copy keeping
 * S's layout: reads of L become reads of S at the offset) and when it must
 * stay: a transposing copy, a guarded (padded) copy, a later write of L or
 * S, a copy into a non-local buffer. End to end, test_kernels runs the
 * padded bmm tiles that this pass rewrites against the interpreter.
 */
#include <stdlib.h>

#include "harness.h"
#include "loop_ir.h"
#include "lower/lower.h"

/* The pieces of one case: S (4 tiles of 4 x 8), the tile o, L and Y. */
typedef struct Nest {
    Module *m;
    Buffer *S, *L, *Y;
    Axis *o;
} Nest;

static Nest nest_new(BufScope local_scope) {
    Nest n;
    n.m = rv_module_new();
    n.S = ir_buffer_new(n.m, "S", RV_F32, I(n.m, 128), BUF_ARG);
    n.Y = ir_buffer_new(n.m, "Y", RV_F32, I(n.m, 128), BUF_ARG);
    n.L = ir_buffer_new(n.m, "L", RV_F32, I(n.m, 32), local_scope);
    n.o = lower_loop_var(n.m, "o", I(n.m, 4));
    return n;
}

/* for i < 4: for k < 8: L[dst] = S[o*32 + i*8 + k]; transposed: dst =
 * k*4 + i, else i*8 + k. With `guard`, the store is under i < 3. */
static Stmt *copy(Nest *n, bool transposed, bool guard) {
    Module *m = n->m;
    Axis *i = lower_loop_var(m, "i", I(m, 4)), *k = lower_loop_var(m, "k", I(m, 8));
    Expr *src =
        bin(m, EX_ADD,
            bin(m, EX_ADD, bin(m, EX_MUL, n->o->var, I(m, 32)), bin(m, EX_MUL, i->var, I(m, 8))),
            k->var);
    Expr *dst = transposed ? bin(m, EX_ADD, bin(m, EX_MUL, k->var, I(m, 4)), i->var)
                           : bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, 8)), k->var);
    Stmt *st = lower_store(m, n->L, dst, ir_load(m, n->S, src));
    if (guard)
        st = lower_if(m, bin(m, EX_LT, i->var, I(m, 3)), st, NULL);
    return loop(m, i, LOOP_SERIAL, loop(m, k, LOOP_SERIAL, st));
}

/* for j < 8: Y[o*32 + j] = L[j + 8] * 2 */
static Stmt *use(Nest *n) {
    Module *m = n->m;
    Axis *j = lower_loop_var(m, "j", I(m, 8));
    Expr *at = bin(m, EX_ADD, bin(m, EX_MUL, n->o->var, I(m, 32)), j->var);
    Expr *v =
        bin(m, EX_MUL, ir_load(m, n->L, bin(m, EX_ADD, j->var, I(m, 8))), ir_float(m, RV_F32, 2));
    return loop(m, j, LOOP_SERIAL, lower_store(m, n->Y, at, v));
}

static Stmt *kernel(Nest *n, Stmt *cp, Stmt *rest) {
    return loop(n->m, n->o, LOOP_SERIAL, lower_alloc(n->m, n->L, seq2(n->m, cp, rest)));
}

static void test_forwarded(void) {
    Nest n = nest_new(BUF_LOCAL);
    Stmt *s = kernel(&n, copy(&n, false, false), use(&n));
    Stmt *r = lower_forward_copies(n.m, s);
    char *got = stmt_str(r);
    CHECK(strstr(got, "allocate") == NULL);
    CHECK(strstr(got, "L[") == NULL);
    CHECK_STR_CONTAINS(got, "Y[o*32 + j] = S[o*32 + j + 8]*2.0");
    base_free(got);
    rv_module_free(n.m);
}

/* Each of these keeps the copy: the same statement comes back. */
static void test_kept(void) {
    for (int c = 0; c < 5; c++) {
        Nest n = nest_new(c == 4 ? BUF_GLOBAL : BUF_LOCAL);
        Module *m = n.m;
        Stmt *rest = use(&n);
        if (c == 2) /* the rest writes the source */
            rest = seq2(m, lower_store(m, n.S, I(m, 0), ir_float(m, RV_F32, 1)), rest);
        if (c == 3) /* ... or the copy */
            rest = seq2(m, lower_store(m, n.L, I(m, 9), ir_float(m, RV_F32, 1)), rest);
        Stmt *s = kernel(&n, copy(&n, c == 0, c == 1), rest);
        CHECK(lower_forward_copies(m, s) == s);
        rv_module_free(m);
    }
}

int main(void) {
    RUN(test_forwarded);
    RUN(test_kept);
    return harness_report();
}
