/*
 * simplify.c — interval and modular arithmetic over index expressions.
 *
 * It is an IR-level service: the schedule checker (sched) asks it what a
 * loop extent simplifies to, lowering runs it over every kernel
 * (lower/simplify.c, the statement pass, keeps the scope and the facts in
 * this file's context) and code generation over the indices it builds.
 *
 * Lowering writes index arithmetic mechanically: flattened offsets
 * (i*2304 + j), split loops (io*32 + ii), guards for non-dividing splits
 * (io*32 + ii < N), ragged bounds (j < len[b]). This pass puts every
 * integer expression in a canonical form and decides what the declared
 * ranges of sizes, UF values and loop extents make decidable, so provably
 * true guards disappear and codegen sees short, shared index expressions.
 *
 * Canonical sums. An integer expression is read as a linear form
 * c0 + sum c_i * x_i whose atoms x_i are anything that is not a sum, a
 * difference, a negation or a product by a constant: variables, sizes, UF
 * calls, loads, divisions, min/max, monomials (products of non-constant
 * atoms, factors in id order). Terms are merged and kept in order of atom
 * id, so `i + 1 - i` is 1, `(a*4 + b)*2` is `a*8 + b*2`, and equal sums
 * are the same pointer. A product of two small sums is multiplied out
 * ((b*T + i)*T is T*i + T*T*b). A sum is written back with its positive
 * terms first, then the constant, then the subtracted terms
 * (`i*2304 + j + 5 - k`). The pair x/c*c + x%c (and its floor twin) is
 * recombined into x.
 *
 * Bounds (interval.c) come from the declared ranges of sizes and UF
 * values and the extents of loop variables in scope, after eliminating
 * atoms symbolically so that common atoms cancel: inside
 * `for i in 0..T*16`, `i < T*16` holds for every T. A comparison is
 * decided on its gcd-normalized form, so the answer does not depend on
 * scaling.
 *
 * What it does not prove: facts that need relations between atoms beyond
 * their declared ranges. `io*32 + ii < N` in a non-dividing split is not
 * provable (it is false for the last tile) and stays. Conditions of
 * enclosing `if`s are used only when the same canonical condition (or its
 * negation) appears again.
 *
 * Division and remainder by a positive constant c: with x = c*Q + R where
 * Q collects the terms divisible by c, floordiv(x, c) = Q + floordiv(R, c)
 * and floormod(x, c) = floormod(R, c) always; for C's `/` and `%` (which
 * truncate) the same holds only when x and R have the same sign, so those
 * rewrites wait for a proof of the signs (`(x*c + y)/c` -> `x + y/c` needs
 * x*c + y >= 0 and y >= 0). A dividend whose range lies within one multiple
 * of c gives a constant quotient and x - q*c for the remainder, so x % c is
 * x and x / c is 0 when 0 <= x < c. Nested divisions fold: (x/a)/b is
 * x/(a*b), (x%a)%b is x%b when b divides a. Negative divisors are left
 * alone.
 *
 * Comparisons of integers are decided by bounding a - b; otherwise they are
 * written with all terms moved to the side where they are positive, after
 * dividing out the gcd of the coefficients (4*i < 8 becomes i < 2, and
 * i*4 == 2 is false). Boolean operators fold constants; `!` of an integer
 * comparison flips it (not of a float one: NaN).
 *
 * A statement pass (lower/simplify.c) carries the context down: loop
 * variables range over their loop's (simplified) extent, let variables
 * equal their value, and an `if` branch knows its condition. Loads are the exception: a load from
 * a buffer the statement stores to may change between two points, so a
 * let value or loop extent that reads one is known only by its range, and
 * a condition that reads one is no fact; buffers nothing stores to (UF
 * arrays, prelude arrays inside the kernel) are as good as sizes. What the
 * statement pass removes or rewrites is lower/simplify.c's.
 *
 * Integer values (tensor elements, accumulators) go through the same
 * rules, but they are not bounded by any extent: a rewrite may not form a
 * value the original never formed unless the bounds prove it fits the
 * type (lin_fits). `acc < X[k] - Y[k]` stays as written (acc + Y[k]
 * overflows at argmax's start), `(x + y) - y` is still x.
 *
 * Requires: nothing. Guarantees: every expression keeps its value wherever
 * it is evaluated (tests/unit/test_simplify.c checks this on thousands of
 * random expressions and loop nests), assuming, like the generated C, that
 * the original's index arithmetic does not overflow; no rewrite adds an
 * intermediate value that is not proved to fit.
 */
#include <string.h>

#include "ir/simplify.h"

/* ---- the context ---- */

/* The form 0, the usual second operand of ir_lin_comb. */
const Lin ir_lin_zero = {0};

/* Bindings and facts change what the memos mean: forget them. */
void ir_simp_scope_changed(Simp *S) {
    ptrmap_free(&S->memo);
    ptrmap_free(&S->ivals);
}

Binding *ir_simp_bind(Simp *S, Axis *a, Binding b) {
    Binding *old = ptrmap_get(&S->binds, a);
    Binding *nb = arena_memdup(S->scratch, &b, sizeof b);
    ptrmap_put(&S->binds, a, nb);
    ir_simp_scope_changed(S);
    return old;
}

void ir_simp_unbind(Simp *S, Axis *a, Binding *old) {
    ptrmap_put(&S->binds, a, old);
    ir_simp_scope_changed(S);
}

/* Is a load from b the same value wherever it is evaluated? In the
 * statement pass: when nothing in the statement stores to b (calls count
 * as stores to all their buffers). For a lone expression: when b holds a
 * UF or prelude values, which kernels only read. */
static bool stable_buffer(Simp *S, const Buffer *b) {
    if (S->stmt_mode)
        return !ptrmap_has(&S->stored, b);
    return b->uf || b->scope == BUF_AUX;
}

/* Does e load from a buffer that may change? Such a value may differ
 * between two points of a statement, so it is only ever used where it is
 * evaluated: never as a let's value or a loop's extent further down, never
 * as a branch fact. */
bool ir_loads_mutable(Simp *S, Expr *e) {
    static char yes, no;
    void *v = ptrmap_get(&S->loads, e);
    if (v)
        return v == &yes;
    bool r = e->kind == EX_LOAD && !stable_buffer(S, e->u.buf);
    for (int i = 0; i < e->n && !r; i++)
        r = ir_loads_mutable(S, e->args[i]);
    ptrmap_put(&S->loads, e, r ? &yes : &no);
    return r;
}

/* ---- small integer helpers ---- */

static bool is_int_expr(const Expr *e) {
    return ir_is_int(e->dtype);
}

/* ---- linear forms ---- */

static Lin *lin_new(Simp *S, int n) {
    Lin *L = arena_alloc(S->scratch, sizeof(Lin) + sizeof(Term) * (size_t)n);
    L->n = n;
    return L;
}

static const Lin *lin_const(Simp *S, int64_t c) {
    Lin *L = lin_new(S, 0);
    L->c0 = c;
    return L;
}

static const Lin *lin_atom(Simp *S, Expr *x) {
    Lin *L = lin_new(S, 1);
    L->t[0].x = x;
    L->t[0].c = 1;
    return L;
}

/* ka*a + kb*b, merging equal atoms; NULL on overflow. */
const Lin *ir_lin_comb(Simp *S, int64_t ka, const Lin *a, int64_t kb, const Lin *b) {
    if (!a || !b)
        return NULL;
    Lin *r = lin_new(S, a->n + b->n);
    int64_t p, q;
    if (__builtin_mul_overflow(ka, a->c0, &p) || __builtin_mul_overflow(kb, b->c0, &q) ||
        __builtin_add_overflow(p, q, &r->c0))
        return NULL;
    int i = 0, j = 0, n = 0;
    while (i < a->n || j < b->n) {
        Expr *x;
        p = q = 0;
        if (j >= b->n || (i < a->n && a->t[i].x->id < b->t[j].x->id)) {
            x = a->t[i].x;
            if (__builtin_mul_overflow(ka, a->t[i++].c, &p))
                return NULL;
        } else if (i >= a->n || b->t[j].x->id < a->t[i].x->id) {
            x = b->t[j].x;
            if (__builtin_mul_overflow(kb, b->t[j++].c, &q))
                return NULL;
        } else {
            x = a->t[i].x;
            if (__builtin_mul_overflow(ka, a->t[i++].c, &p) ||
                __builtin_mul_overflow(kb, b->t[j++].c, &q))
                return NULL;
        }
        int64_t c;
        if (__builtin_add_overflow(p, q, &c))
            return NULL;
        if (c != 0) {
            r->t[n].x = x;
            r->t[n++].c = c;
        }
    }
    r->n = n;
    return r;
}

const Lin *ir_lin_add_const(Simp *S, const Lin *a, int64_t c) {
    return ir_lin_comb(S, 1, a, 1, lin_const(S, c));
}

/* a without its term i. */
static const Lin *lin_drop(Simp *S, const Lin *a, int i) {
    Lin *r = lin_new(S, a->n - 1);
    r->c0 = a->c0;
    memcpy(r->t, a->t, sizeof(Term) * (size_t)i);
    memcpy(r->t + i, a->t + i + 1, sizeof(Term) * (size_t)(a->n - i - 1));
    return r;
}

/* a with its term i replaced by the form `by`. */
const Lin *ir_lin_replace(Simp *S, const Lin *a, int i, const Lin *by) {
    return by ? ir_lin_comb(S, 1, lin_drop(S, a, i), 1, by) : NULL;
}

static bool same_division(const Expr *d, ExprKind k, const Expr *x, const Expr *c) {
    return d->kind == k && d->args[0] == x && d->args[1] == c;
}

/* x/c*(k*c) + x%c*k -> x*k (and the floor pair): C guarantees
 * (x/c)*c + x%c == x for c != 0, floor division likewise. */
static const Lin *merge_divmod(Simp *S, const Lin *L) {
    for (int again = 1; again && L;) {
        again = 0;
        for (int i = 0; i < L->n && !again; i++) {
            Expr *r = L->t[i].x;
            int64_t c, k = L->t[i].c, kc;
            if ((r->kind != EX_MOD && r->kind != EX_FLOORMOD) || !ir_is_const_int(r->args[1], &c) ||
                c == 0 || __builtin_mul_overflow(k, c, &kc))
                continue;
            ExprKind dk = r->kind == EX_MOD ? EX_DIV : EX_FLOORDIV;
            for (int j = 0; j < L->n; j++) {
                if (L->t[j].c != kc || !same_division(L->t[j].x, dk, r->args[0], r->args[1]))
                    continue;
                int hi = i > j ? i : j, lo = i > j ? j : i;
                const Lin *rest = lin_drop(S, lin_drop(S, L, hi), lo);
                L = ir_lin_comb(S, 1, rest, k, ir_lin_of(S, r->args[0]));
                again = 1;
                break;
            }
        }
    }
    return L;
}

/* The linear form of an integer expression, read structurally (exact
 * algebra, so it does not depend on the scope). */
const Lin *ir_lin_of(Simp *S, Expr *e) {
    const Lin *L = ptrmap_get(&S->lins, e);
    if (L)
        return L;
    int64_t k;
    switch (e->kind) {
    case EX_CONST_INT:
        L = lin_const(S, e->u.ival);
        break;
    case EX_ADD:
        L = ir_lin_comb(S, 1, ir_lin_of(S, e->args[0]), 1, ir_lin_of(S, e->args[1]));
        break;
    case EX_SUB:
        L = ir_lin_comb(S, 1, ir_lin_of(S, e->args[0]), -1, ir_lin_of(S, e->args[1]));
        break;
    case EX_NEG:
        L = ir_lin_comb(S, -1, ir_lin_of(S, e->args[0]), 0, &ir_lin_zero);
        break;
    case EX_MUL:
        if (ir_is_const_int(e->args[1], &k))
            L = ir_lin_comb(S, k, ir_lin_of(S, e->args[0]), 0, &ir_lin_zero);
        else if (ir_is_const_int(e->args[0], &k))
            L = ir_lin_comb(S, k, ir_lin_of(S, e->args[1]), 0, &ir_lin_zero);
        break;
    default:
        break;
    }
    if (L && e->kind != EX_CONST_INT)
        L = merge_divmod(S, L);
    if (!L)
        L = lin_atom(S, e);
    ptrmap_put(&S->lins, e, (void *)L);
    return L;
}

/* |v| * k, saturating at INT64_MAX. */
static int64_t mag_mul(int64_t v, int64_t k) {
    int64_t r;
    if (v == INT64_MIN || k == INT64_MIN)
        return INT64_MAX;
    v = v < 0 ? -v : v;
    k = k < 0 ? -k : k;
    return __builtin_mul_overflow(v, k, &r) ? INT64_MAX : r;
}

/* Does e read a tensor element or an accumulator (not a UF or prelude
 * array, whose values are indices)? */
static bool reads_values(const Expr *e) {
    if (e->kind == EX_LOAD && !e->u.buf->uf && e->u.buf->scope != BUF_AUX)
        return true;
    for (int i = 0; i < e->n; i++)
        if (reads_values(e->args[i]))
            return true;
    return false;
}

/* The largest magnitude term i of L can have in scope (INT64_MAX: not
 * known to fit). An index atom without known bounds (a row start of a
 * prelude array) counts as 0: index arithmetic is assumed not to overflow,
 * as everywhere in this pass. */
static int64_t term_mag(Simp *S, const Lin *L, int i) {
    Ival iv = ir_ival_of(S, L->t[i].x);
    if (!iv.ok)
        return reads_values(L->t[i].x) ? INT64_MAX : 0;
    int64_t lo = mag_mul(iv.lo, L->t[i].c), hi = mag_mul(iv.hi, L->t[i].c);
    return lo > hi ? lo : hi;
}

/* Can L be written back (lin_to_expr's order) without an intermediate
 * value outside type t? Moving terms reorders a computation, and the new
 * partial sums and products are values the original never formed:
 * `acc < X[k] - Y[k]` as `acc + Y[k] < X[k]` overflows at acc = INT64_MIN.
 * Index arithmetic ranges over loop extents, sizes and UF ranges and is
 * proved in range here (or, for prelude row starts, assumed to be, as in
 * the rest of the pass); tensor values and accumulators are unbounded, so
 * a rewrite of them is kept only when it adds no intermediate. is_result
 * says the form's value is the value of the expression it replaces (which
 * fits, or the program is in error): then a single operation is safe. */
static bool lin_fits(Simp *S, const Lin *L, rv_dtype t, bool is_result) {
    int64_t tmax = t == RV_I32 ? INT32_MAX : INT64_MAX;
    int pieces = L->n + (L->c0 != 0);
    bool plus = L->c0 > 0; /* is a term written first, not negated? */
    for (int i = 0; i < L->n; i++)
        plus |= L->t[i].c > 0;
    if (pieces == 0 || (pieces == 1 && (L->n == 0 || L->t[0].c == 1 || is_result)))
        return true;
    if (pieces == 2 && is_result) { /* one operation, besides products */
        for (int i = 0; i < L->n; i++) {
            int64_t c = L->t[i].c;
            if (c != 1 && !(c == -1 && plus) && term_mag(S, L, i) > tmax)
                return false;
        }
        return true;
    }
    /* every partial sum and product is within the sum of magnitudes */
    int64_t total = L->c0 == INT64_MIN ? INT64_MAX : (L->c0 < 0 ? -L->c0 : L->c0);
    for (int i = 0; i < L->n && total <= tmax; i++) {
        int64_t m = term_mag(S, L, i);
        if (__builtin_add_overflow(total, m, &total))
            return false;
    }
    return total <= tmax;
}

/* Writes a form back as an expression of type t: positive terms in atom
 * order, then the constant, then the subtracted terms. NULL when a
 * coefficient does not fit the type or an intermediate value may not
 * (lin_fits; is_result as there). */
static Expr *lin_to_expr(Simp *S, const Lin *L, rv_dtype t, bool is_result) {
    Module *m = S->m;
    if (!lin_fits(S, L, t, is_result))
        return NULL;
    if (L->c0 == INT64_MIN || (t == RV_I32 && !ir_dtype_fits(RV_I32, L->c0)))
        return NULL;
    for (int i = 0; i < L->n; i++)
        if (L->t[i].c == INT64_MIN || (t == RV_I32 && !ir_dtype_fits(RV_I32, L->t[i].c)) ||
            L->t[i].x->dtype != t)
            return NULL;
    Expr *acc = NULL;
    for (int i = 0; i < L->n; i++) {
        int64_t c = L->t[i].c;
        if (c < 0)
            continue;
        Expr *term = c == 1 ? L->t[i].x : ir_binary(m, EX_MUL, L->t[i].x, ir_const_int(m, t, c));
        acc = acc ? ir_binary(m, EX_ADD, acc, term) : term;
    }
    if (L->c0 > 0)
        acc =
            acc ? ir_binary(m, EX_ADD, acc, ir_const_int(m, t, L->c0)) : ir_const_int(m, t, L->c0);
    for (int i = 0; i < L->n; i++) {
        int64_t c = L->t[i].c;
        if (c > 0)
            continue;
        Expr *x = L->t[i].x;
        if (acc)
            acc = ir_binary(m, EX_SUB, acc,
                            c == -1 ? x : ir_binary(m, EX_MUL, x, ir_const_int(m, t, -c)));
        else
            acc = c == -1 ? ir_unary(m, EX_NEG, x) : ir_binary(m, EX_MUL, x, ir_const_int(m, t, c));
    }
    if (L->c0 < 0)
        acc =
            acc ? ir_binary(m, EX_SUB, acc, ir_const_int(m, t, -L->c0)) : ir_const_int(m, t, L->c0);
    return acc ? acc : ir_const_int(m, t, 0);
}

/* ---- rewriting ---- */

static Expr *k_int(Simp *S, rv_dtype t, int64_t v) {
    return ir_const_int(S->m, t, v);
}

static bool is_true(const Expr *e) {
    return e->kind == EX_CONST_INT && e->dtype == RV_BOOL && e->u.ival;
}

static bool is_false(const Expr *e) {
    return e->kind == EX_CONST_INT && e->dtype == RV_BOOL && !e->u.ival;
}

static bool is_int_cmp(const Expr *e) {
    return (ir_expr_info[e->kind].flags & F_CMP) && is_int_expr(e->args[0]);
}

/* The logical negation, structurally: an integer comparison flips (that
 * keeps the canonical form), anything else gets a `!`. */
Expr *ir_simp_negation(Simp *S, Expr *e) {
    Module *m = S->m;
    if (e->kind == EX_CONST_INT)
        return ir_bool(m, !e->u.ival);
    if (e->kind == EX_NOT)
        return e->args[0];
    if (is_int_cmp(e)) {
        Expr *a = e->args[0], *b = e->args[1];
        switch (e->kind) {
        case EX_LT:
            return ir_binary(m, EX_LE, b, a);
        case EX_LE:
            return ir_binary(m, EX_LT, b, a);
        case EX_GT:
            return ir_binary(m, EX_LE, a, b);
        case EX_GE:
            return ir_binary(m, EX_LT, a, b);
        case EX_EQ:
            return ir_binary(m, EX_NE, a, b);
        case EX_NE:
            return ir_binary(m, EX_EQ, a, b);
        default:
            break;
        }
    }
    return ir_unary(m, EX_NOT, e);
}

/* An integer comparison: decided by bounding a - b, else written with
 * every term on the side where its coefficient is positive. */
static Expr *simp_cmp(Simp *S, ExprKind k, Expr *a, Expr *b) {
    Module *m = S->m;
    if (k == EX_GT || k == EX_GE) {
        Expr *t = a;
        a = b;
        b = t;
        k = k == EX_GT ? EX_LT : EX_LE;
    }
    const Lin *d =
        merge_divmod(S, ir_lin_comb(S, 1, ir_lin_of(S, a), -1, ir_lin_of(S, b)));
    if (!d || d->c0 == INT64_MIN)
        return ir_binary(m, k, a, b);
    /* d OP 0 with the gcd of the coefficients divided out and the constant
     * rounded (sum*g + c0 < 0 <=> sum + floor(c0/g) < 0); equations start
     * with a positive coefficient. Deciding on this normal form keeps the
     * result the same however the comparison was scaled. */
    int64_t g = 0;
    for (int i = 0; i < d->n; i++)
        g = ir_gcd64(g, d->t[i].c);
    Lin *D = lin_new(S, d->n);
    D->c0 = d->c0;
    if (g > 1) {
        if (k == EX_LT)
            D->c0 = ir_fdiv(d->c0, g);
        else if (k == EX_LE)
            D->c0 = -ir_fdiv(-d->c0, g);
        else if (d->c0 % g != 0)
            return ir_bool(m, k == EX_NE);
        else
            D->c0 = d->c0 / g;
    }
    bool flip = (k == EX_EQ || k == EX_NE) && d->n && d->t[0].c < 0;
    for (int i = 0; i < d->n; i++) {
        if (d->t[i].c == INT64_MIN)
            return ir_binary(m, k, a, b);
        D->t[i].x = d->t[i].x;
        D->t[i].c = (g > 1 ? d->t[i].c / g : d->t[i].c) * (flip ? -1 : 1);
    }
    if (flip)
        D->c0 = -D->c0;

    int64_t lo, hi;
    bool okl = ir_lin_bound(S, D, false, &lo), okh = ir_lin_bound(S, D, true, &hi);
    switch (k) {
    case EX_LT:
        if (okh && hi < 0)
            return ir_bool(m, true);
        if (okl && lo >= 0)
            return ir_bool(m, false);
        break;
    case EX_LE:
        if (okh && hi <= 0)
            return ir_bool(m, true);
        if (okl && lo > 0)
            return ir_bool(m, false);
        break;
    default: /* EQ, NE */
        if (okl && okh && lo == 0 && hi == 0)
            return ir_bool(m, k == EX_EQ);
        if ((okl && lo > 0) || (okh && hi < 0))
            return ir_bool(m, k == EX_NE);
        break;
    }

    /* undecided: each term on the side where its coefficient is positive */
    Lin *P = lin_new(S, D->n), *N = lin_new(S, D->n);
    P->n = N->n = 0;
    for (int i = 0; i < D->n; i++) {
        Lin *side = D->t[i].c > 0 ? P : N;
        side->t[side->n].x = D->t[i].x;
        side->t[side->n++].c = D->t[i].c > 0 ? D->t[i].c : -D->t[i].c;
    }
    if (D->c0 > 0)
        P->c0 = D->c0;
    else
        N->c0 = -D->c0;
    Expr *l = lin_to_expr(S, P, a->dtype, false), *r = lin_to_expr(S, N, a->dtype, false);
    return l && r ? ir_binary(m, k, l, r) : ir_binary(m, k, a, b);
}

static Expr *simp_minmax(Simp *S, ExprKind k, Expr *a, Expr *b) {
    if (a == b)
        return a;
    const Lin *d =
        merge_divmod(S, ir_lin_comb(S, 1, ir_lin_of(S, a), -1, ir_lin_of(S, b)));
    int64_t v;
    if (d && ir_lin_bound(S, d, true, &v) && v <= 0) /* a <= b */
        return k == EX_MIN ? a : b;
    if (d && ir_lin_bound(S, d, false, &v) && v >= 0) /* a >= b */
        return k == EX_MIN ? b : a;
    if (b->id < a->id) { /* commutative: one order */
        Expr *t = a;
        a = b;
        b = t;
    }
    return ir_binary(S->m, k, a, b);
}

/* C's / and % (and floordiv, floormod) of two constants; false when the
 * result is undefined. */
static bool fold_div(ExprKind k, int64_t x, int64_t c, int64_t *r) {
    if (c == 0 || (x == INT64_MIN && c == -1))
        return false;
    int64_t q = x / c, rem = x % c;
    if ((k == EX_FLOORDIV || k == EX_FLOORMOD) && rem != 0 && ((rem < 0) != (c < 0))) {
        q--;
        rem += c;
    }
    *r = (k == EX_DIV || k == EX_FLOORDIV) ? q : rem;
    return true;
}

static Expr *simp_div(Simp *S, ExprKind k, Expr *a, Expr *b);

/* Division by a constant c > 1 of a dividend with linear form L (see the
 * file comment). */
static Expr *simp_div_const(Simp *S, ExprKind k, Expr *a, Expr *b, int64_t c) {
    rv_dtype t = a->dtype;
    bool floor = k == EX_FLOORDIV || k == EX_FLOORMOD, quot = k == EX_DIV || k == EX_FLOORDIV;
    const Lin *L = ir_lin_of(S, a);
    int64_t lo, hi;
    bool okl = ir_lin_bound(S, L, false, &lo), okh = ir_lin_bound(S, L, true, &hi);

    /* the whole range in one multiple of c: a constant quotient */
    if (okl && okh) {
        int64_t qlo = floor ? ir_fdiv(lo, c) : lo / c, qhi = floor ? ir_fdiv(hi, c) : hi / c;
        if (qlo == qhi) {
            if (quot)
                return k_int(S, t, qlo);
            int64_t qc;
            const Lin *rl;
            if (!__builtin_mul_overflow(qlo, c, &qc) && (rl = ir_lin_add_const(S, L, -qc))) {
                Expr *r = lin_to_expr(S, rl, t, true);
                if (r)
                    return r;
            }
        }
    }

    /* x = c*Q + R: Q the terms divisible by c, the constant split too */
    Lin *Q = lin_new(S, L->n), *R = lin_new(S, L->n);
    Q->n = R->n = 0;
    for (int i = 0; i < L->n; i++) {
        if (L->t[i].c % c == 0) {
            Q->t[Q->n].x = L->t[i].x;
            Q->t[Q->n++].c = L->t[i].c / c;
        } else {
            R->t[R->n++] = L->t[i];
        }
    }
    bool nonneg = floor || (okl && lo >= 0);
    bool nonpos = !floor && okh && hi <= 0;
    if (L->c0 == INT64_MIN)
        return ir_binary(S->m, k, a, b);
    Q->c0 = nonneg || !nonpos ? ir_fdiv(L->c0, c) : -ir_fdiv(-L->c0, c);
    int64_t qc0;
    if (__builtin_mul_overflow(Q->c0, c, &qc0) || __builtin_sub_overflow(L->c0, qc0, &R->c0))
        return ir_binary(S->m, k, a, b);
    /* a constant alone moves out only when that shrinks it: floordiv(i - 5, 5)
     * is floordiv(i, 5) - 1, but (i - 2)/512 stays as it is */
    bool split = Q->n || (Q->c0 && (R->c0 < 0 ? -R->c0 : R->c0) < (L->c0 < 0 ? -L->c0 : L->c0));
    if (split && !floor) { /* truncation: R must have x's sign (or be 0) */
        int64_t v;
        if (R->n == 0 && R->c0 == 0)
            split = true;
        else if (nonneg)
            split = ir_lin_bound(S, R, false, &v) && v >= 0;
        else if (nonpos)
            split = ir_lin_bound(S, R, true, &v) && v <= 0;
        else
            split = false;
    }
    if (split) {
        Expr *re = lin_to_expr(S, R, t, false);
        if (re) {
            Expr *rest = simp_div(S, k, re, b);
            if (!quot)
                return rest;
            const Lin *sum = ir_lin_comb(S, 1, Q, 1, ir_lin_of(S, rest));
            Expr *r = sum ? lin_to_expr(S, sum, t, true) : NULL;
            if (r)
                return r;
        }
    }

    /* nested: (x/c2)/c -> x/(c2*c); (x%c2)%c -> x%c when c divides c2 */
    int64_t c2, cc;
    if (a->kind == k && ir_is_const_int(a->args[1], &c2) && c2 > 0) {
        if (quot && !__builtin_mul_overflow(c, c2, &cc))
            return simp_div(S, k, a->args[0], k_int(S, t, cc));
        if (!quot && c2 % c == 0)
            return simp_div(S, k, a->args[0], b);
    }
    return ir_binary(S->m, k, a, b);
}

/* x / y, x % y, floordiv, floormod of simplified integer operands. */
static Expr *simp_div(Simp *S, ExprKind k, Expr *a, Expr *b) {
    rv_dtype t = a->dtype;
    bool quot = k == EX_DIV || k == EX_FLOORDIV;
    int64_t x, c, r;
    if (!ir_is_const_int(b, &c)) {
        if (a == b) /* x/x: 1 wherever it is defined */
            return k_int(S, t, quot ? 1 : 0);
        Ival ia = ir_ival_of(S, a);
        const Lin *d = ir_lin_comb(S, 1, ir_lin_of(S, a), -1, ir_lin_of(S, b));
        int64_t v;
        if (ia.ok && ia.lo >= 0 && d && ir_lin_bound(S, d, true, &v) && v < 0) /* 0 <= a < b */
            return quot ? k_int(S, t, 0) : a;
        return ir_binary(S->m, k, a, b);
    }
    if (ir_is_const_int(a, &x) && fold_div(k, x, c, &r))
        return k_int(S, t, r);
    if (c == 1)
        return quot ? a : k_int(S, t, 0);
    if (c <= 0)
        return ir_binary(S->m, k, a, b);
    return simp_div_const(S, k, a, b, c);
}

static Expr *simp_logic(Simp *S, ExprKind k, Expr *a, Expr *b) {
    Module *m = S->m;
    if (k == EX_NOT) {
        if (a->kind == EX_CONST_INT)
            return ir_bool(m, !a->u.ival);
        if (a->kind == EX_NOT || is_int_cmp(a))
            return ir_simp(S, ir_simp_negation(S, a));
        return ir_unary(m, EX_NOT, a);
    }
    bool conj = k == EX_AND;
    if (is_true(a))
        return conj ? b : a;
    if (is_false(a))
        return conj ? a : b;
    if (is_true(b))
        return conj ? a : b;
    if (is_false(b))
        return conj ? b : a;
    if (a == b)
        return a;
    if (ir_simp_negation(S, a) == b)
        return ir_bool(m, !conj);
    return ir_binary(m, k, a, b);
}

static bool is_fact(Simp *S, Expr *e) {
    for (int i = 0; i < S->facts.len; i++)
        if (S->facts.data[i] == e)
            return true;
    return false;
}

/* A product of non-constant atoms (no sum among the factors: a product of
 * sums too large to multiply out is one opaque factor). */
static bool is_monomial(const Expr *e) {
    if (e->kind == EX_ADD || e->kind == EX_SUB || e->kind == EX_NEG || e->kind == EX_CONST_INT)
        return false;
    return e->kind != EX_MUL || (is_monomial(e->args[0]) && is_monomial(e->args[1]));
}

/* The factors of a monomial. */
static void collect_factors(Expr *e, Expr **f, int *n, int cap) {
    if (e->kind == EX_MUL && is_monomial(e)) {
        collect_factors(e->args[0], f, n, cap);
        collect_factors(e->args[1], f, n, cap);
    } else if (*n < cap) {
        f[*n] = e;
        ++*n;
    } else {
        *n = cap + 1; /* too many: the caller gives up */
    }
}

/* x*y as a canonical monomial: the factors of both in id order, multiplied
 * left to right, so T*(b*T) and (T*b)*T are one node. */
static Expr *monomial(Simp *S, Expr *x, Expr *y) {
    Expr *f[16];
    int n = 0;
    collect_factors(x, f, &n, 16);
    collect_factors(y, f, &n, 16);
    if (n > 16)
        return x->id < y->id ? ir_binary(S->m, EX_MUL, x, y) : ir_binary(S->m, EX_MUL, y, x);
    for (int i = 1; i < n; i++) /* insertion sort by id */
        for (int j = i; j > 0 && f[j]->id < f[j - 1]->id; j--) {
            Expr *t = f[j];
            f[j] = f[j - 1];
            f[j - 1] = t;
        }
    Expr *r = f[0];
    for (int i = 1; i < n; i++)
        r = ir_binary(S->m, EX_MUL, r, f[i]);
    return r;
}

/* The product of two sums, multiplied out into a sum of monomials when
 * that stays small (at most 16 products): (b*T + i)*T is T*T*b + T*i, so
 * loop-invariant parts separate and equal offsets meet. NULL when the
 * product is left alone. */
static Expr *expand_product(Simp *S, Expr *a, Expr *b, rv_dtype t) {
    const Lin *La = ir_lin_of(S, a), *Lb = ir_lin_of(S, b);
    int na = La->n + (La->c0 != 0), nb = Lb->n + (Lb->c0 != 0);
    if (na * nb > 16)
        return NULL;
    const Lin *acc = lin_const(S, 0);
    for (int i = 0; i <= La->n && acc; i++) {
        Expr *x = i < La->n ? La->t[i].x : NULL;
        int64_t cx = i < La->n ? La->t[i].c : La->c0;
        for (int j = 0; j <= Lb->n && acc && cx; j++) {
            Expr *y = j < Lb->n ? Lb->t[j].x : NULL;
            int64_t cy = j < Lb->n ? Lb->t[j].c : Lb->c0, c;
            if (!cy)
                continue;
            if (__builtin_mul_overflow(cx, cy, &c))
                return NULL;
            const Lin *term =
                !x && !y ? lin_const(S, c)
                : !x     ? ir_lin_comb(S, c, lin_atom(S, y), 0, &ir_lin_zero)
                : !y     ? ir_lin_comb(S, c, lin_atom(S, x), 0, &ir_lin_zero)
                     : ir_lin_comb(S, c, ir_lin_of(S, monomial(S, x, y)), 0, &ir_lin_zero);
            acc = ir_lin_comb(S, 1, acc, 1, term);
        }
    }
    acc = merge_divmod(S, acc);
    return acc ? lin_to_expr(S, acc, t, true) : NULL;
}

/* Rewrites one node whose operands are not yet simplified. */
static Expr *simp_node(Simp *S, Expr *e) {
    Module *m = S->m;
    Expr *a = e->n > 0 ? ir_simp(S, e->args[0]) : NULL;
    Expr *b = e->n > 1 ? ir_simp(S, e->args[1]) : NULL;
    bool ints = e->n > 0 && is_int_expr(e->args[0]);
    switch (e->kind) {
    case EX_CONST_INT:
    case EX_CONST_FLOAT:
    case EX_SIZE:
        return e;
    case EX_VAR: {
        Binding *bd = ptrmap_get(&S->binds, e->u.axis);
        return bd && bd->value && bd->value->kind == EX_CONST_INT ? bd->value : e;
    }
    case EX_ADD:
    case EX_SUB:
    case EX_NEG:
    case EX_MUL: {
        if (!is_int_expr(e))
            break;
        int64_t k;
        if (e->kind == EX_MUL && !ir_is_const_int(a, &k) && !ir_is_const_int(b, &k)) {
            Expr *r = expand_product(S, a, b, e->dtype);
            return r ? r : ir_binary(m, EX_MUL, a, b);
        }
        const Lin *L;
        if (e->kind == EX_NEG)
            L = ir_lin_comb(S, -1, ir_lin_of(S, a), 0, &ir_lin_zero);
        else if (e->kind == EX_MUL)
            L = ir_is_const_int(b, &k)
                    ? ir_lin_comb(S, k, ir_lin_of(S, a), 0, &ir_lin_zero)
                    : ir_lin_comb(S, a->u.ival, ir_lin_of(S, b), 0, &ir_lin_zero);
        else
            L = ir_lin_comb(S, 1, ir_lin_of(S, a), e->kind == EX_ADD ? 1 : -1,
                               ir_lin_of(S, b));
        L = L ? merge_divmod(S, L) : NULL;
        Expr *r = L ? lin_to_expr(S, L, e->dtype, true) : NULL;
        if (r)
            return r;
        break;
    }
    case EX_DIV:
    case EX_MOD:
    case EX_FLOORDIV:
    case EX_FLOORMOD:
        if (ints)
            return simp_div(S, e->kind, a, b);
        break;
    case EX_MIN:
    case EX_MAX:
        if (ints)
            return simp_minmax(S, e->kind, a, b);
        break;
#define CMP(k, text, prec, flags) case EX_##k:
#include "ir/ops.def"
#undef CMP
        if (ints)
            return simp_cmp(S, e->kind, a, b);
        if (a->kind == EX_CONST_INT && b->kind == EX_CONST_INT) /* bools */
            return ir_bool(m, (a->u.ival == b->u.ival) == (e->kind == EX_EQ));
        break;
    case EX_AND:
    case EX_OR:
    case EX_NOT:
        return simp_logic(S, e->kind, a, b);
    case EX_SELECT: {
        Expr *c = ir_simp(S, e->args[2]);
        if (is_true(a))
            return b;
        if (is_false(a))
            return c;
        if (b == c)
            return b;
        return ir_select(m, a, b, c);
    }
    case EX_ABS:
        if (ints) {
            Ival iv = ir_ival_of(S, a);
            if (iv.ok && iv.lo >= 0)
                return a;
            if (iv.ok && iv.hi <= 0)
                return ir_simp(S, ir_unary(m, EX_NEG, a));
        }
        break;
    case EX_CAST:
        return ir_cast(m, e->dtype, a);
    default:
        break;
    }
    /* everything else: the same node over simplified operands */
    Expr *small[8];
    Expr **args = e->n <= 8 ? small : base_xmalloc(sizeof(Expr *) * (size_t)e->n);
    for (int i = 0; i < e->n; i++)
        args[i] = i == 0 ? a : i == 1 ? b : ir_simp(S, e->args[i]);
    Expr *r = ir_rebuild(m, e, args);
    if (args != small)
        base_free(args);
    return r;
}

/* The simplified form of e in the current scope (memoized). */
Expr *ir_simp(Simp *S, Expr *e) {
    Expr *r = ptrmap_get(&S->memo, e);
    if (r)
        return r;
    int depth = S->branch_depth; /* as in ir_ival_of */
    S->branch_depth = 0;
    r = simp_node(S, e);
    if (!r) /* a constructor refused the rewrite: keep what was there */
        r = e;
    if (is_int_expr(r) && r->kind != EX_CONST_INT) {
        Ival iv = ir_ival_of(S, r);
        if (iv.ok && iv.lo == iv.hi)
            r = k_int(S, r->dtype, iv.lo);
    }
    if (r->dtype == RV_BOOL && r->kind != EX_CONST_INT && S->facts.len) {
        if (is_fact(S, r))
            r = ir_bool(S->m, true);
        else if (is_fact(S, ir_simp_negation(S, r)))
            r = ir_bool(S->m, false);
    }
    S->branch_depth = depth;
    ptrmap_put(&S->memo, e, r);
    ptrmap_put(&S->memo, r, r);
    return r;
}

void ir_simp_init(Simp *S, Module *m) {
    memset(S, 0, sizeof *S);
    S->m = m;
    S->scratch = arena_new();
}

void ir_simp_free(Simp *S) {
    ptrmap_free(&S->lins);
    ptrmap_free(&S->memo);
    ptrmap_free(&S->ivals);
    ptrmap_free(&S->binds);
    ptrmap_free(&S->loads);
    ptrmap_free(&S->stored);
    vec_free(&S->facts);
    arena_free(S->scratch);
}

Expr *ir_simplify_expr(Module *m, Expr *e) {
    if (!e)
        return NULL;
    Simp S;
    ir_simp_init(&S, m);
    Expr *r = ir_simp(&S, e);
    ir_simp_free(&S);
    return r;
}

bool ir_upper_bound(Module *m, Expr *e, int64_t *hi) {
    if (!e)
        return false;
    Simp S;
    ir_simp_init(&S, m);
    const Lin *L = ir_lin_of(&S, ir_simp(&S, e));
    bool ok = L && ir_lin_bound(&S, L, true, hi);
    ir_simp_free(&S);
    return ok;
}

