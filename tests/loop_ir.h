/*
 * tests/loop_ir.h — building and printing loop IR by hand in unit tests of
 * the lowering passes (test_stmt, test_hoist, test_forward, test_promote).
 */
#ifndef RAVEL_TESTS_LOOP_IR_H
#define RAVEL_TESTS_LOOP_IR_H

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "lower/lower.h"

static inline Expr *I(Module *m, int64_t v) {
    return ir_int(m, v);
}

static inline Expr *bin(Module *m, ExprKind k, Expr *a, Expr *b) {
    Expr *r = ir_binary(m, k, a, b);
    RV_ASSERT(r);
    return r;
}

/* A loop over v's own extent. */
static inline Stmt *loop(Module *m, Axis *v, LoopKind k, Stmt *body) {
    return lower_for(m, v, v->extent, k, body);
}

static inline Stmt *seq2(Module *m, Stmt *a, Stmt *b) {
    Stmt *s[2] = {a, b};
    return lower_seq(m, 2, s);
}

/* The printed text of a statement (base_free the result). */
static inline char *stmt_str(const Stmt *s) {
    Buf b = {0};
    lower_print_stmt(&b, s, 0);
    return buf_take(&b);
}

static inline void check_text(const Stmt *s, const char *want) {
    char *got = stmt_str(s);
    CHECK(strcmp(got, want) == 0);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "    got:\n%s    want:\n%s", got, want);
    base_free(got);
}

#endif
