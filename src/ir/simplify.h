/*
 * simplify.h — the simplifier of integer index expressions (simplify.c)
 * and the interval prover under it (interval.c).
 *
 * An IR-level service: the schedule checker, lowering and code generation
 * all ask it what an expression simplifies to or how far it ranges. The
 * context (Simp) is exported for lowering's statement pass
 * (lower/simplify.c), which walks loop nests and keeps the scope in it.
 */
#ifndef RAVEL_IR_SIMPLIFY_H
#define RAVEL_IR_SIMPLIFY_H

#include "ir/ir.h"

/* Simplifies index arithmetic using the declared ranges of sizes, UF
 * values and loop extents: constant folding, canonical sums, x/c*c + x%c,
 * (a*c)/c, min/max and comparisons decided by intervals, so provably true
 * guards disappear. Requires nothing; guarantees the same value; NULL for
 * NULL. */
Expr *ir_simplify_expr(Module *m, Expr *e);
/* The least constant upper bound of integer expression e that the
 * declared ranges prove (M - M/6*6: 5); false when none is known. */
bool ir_upper_bound(Module *m, Expr *e, int64_t *hi);

/* ---- the context, for a pass that walks statements ---- */

/* What is known about a variable in the current scope. */
typedef struct Binding {
    Expr *extent; /* a loop variable: 0 <= var < extent */
    Expr *value;  /* a let variable with a pure value: var == value */
    bool opaque;  /* a let value or loop extent that loads: only lo..hi is known */
    bool known;
    int64_t lo, hi;
} Binding;

typedef struct Ival {
    bool ok;
    int64_t lo, hi;
} Ival;

typedef struct Term {
    Expr *x;
    int64_t c;
} Term;

/* c0 + sum t[i].c * t[i].x, atoms in increasing id, no zero coefficient. */
typedef struct Lin {
    int64_t c0;
    int n;
    Term t[];
} Lin;

typedef struct Simp {
    Module *m;
    Arena *scratch;    /* Lins, Ivals, Bindings: freed with the context */
    PtrMap lins;       /* Expr -> Lin: structural, valid for the whole run */
    PtrMap memo;       /* Expr -> simplified Expr: valid in the current scope */
    PtrMap ivals;      /* Expr -> Ival: valid in the current scope */
    PtrMap binds;      /* Axis -> Binding (NULL: unbound) */
    PtrMap loads;      /* Expr -> whether it loads from a buffer that changes */
    PtrMap stored;     /* Buffer -> stored to somewhere in the statement */
    bool stmt_mode;    /* a statement pass: `stored` says what changes (else
                          only UF and prelude arrays are stable) */
    Vec(Expr *) facts; /* conditions known to hold here */
    int branch_depth;  /* min/max/select splits in progress */
} Simp;

void ir_simp_init(Simp *S, Module *m);
void ir_simp_free(Simp *S);
/* Binds a (the memos are forgotten); returns the binding it replaces, for
 * ir_simp_unbind. */
Binding *ir_simp_bind(Simp *S, Axis *a, Binding b);
void ir_simp_unbind(Simp *S, Axis *a, Binding *old);
/* Facts changed: forget what the memos concluded from them. */
void ir_simp_scope_changed(Simp *S);
/* The simplified form of e in the current scope (memoized). */
Expr *ir_simp(Simp *S, Expr *e);
/* Does e load from a buffer that may change within the statement? */
bool ir_loads_mutable(Simp *S, Expr *e);
/* The logical negation, structurally (an integer comparison flips). */
Expr *ir_simp_negation(Simp *S, Expr *e);

extern const Lin ir_lin_zero;
/* The linear form of an integer expression, read structurally. */
const Lin *ir_lin_of(Simp *S, Expr *e);
/* ka*a + kb*b, merging equal atoms; NULL on overflow (or a NULL operand). */
const Lin *ir_lin_comb(Simp *S, int64_t ka, const Lin *a, int64_t kb, const Lin *b);
const Lin *ir_lin_add_const(Simp *S, const Lin *a, int64_t c);
/* a with its term i replaced by the form `by` (NULL when `by` is). */
const Lin *ir_lin_replace(Simp *S, const Lin *a, int i, const Lin *by);

/* ---- interval.c: bounds of linear forms, intervals of atoms ---- */

/* The best bound (least upper or greatest lower) of L that the context
 * proves; false when none is known. */
bool ir_lin_bound(Simp *S, const Lin *L, bool upper, int64_t *out);
/* The interval of an integer expression in the current scope (!ok:
 * unknown). */
Ival ir_ival_of(Simp *S, Expr *e);
int64_t ir_fdiv(int64_t a, int64_t c); /* floor(a / c), for c > 0 */
int64_t ir_gcd64(int64_t a, int64_t b);

#endif
