/*
 * c_balance.c — the work of a parallel loop's iterations, for load balancing.
 *
 * The thread pool splits [0, n) into equal counts of iterations. A ragged
 * parallel loop (row b runs len[b] x len[b] iterations of its body) then
 * gives one thread the long rows and the other the short ones: with a
 * skewed length distribution the slowest thread does most of the work.
 * So c.c runs such a loop as one chunk per thread of equal WORK (CoRa §6,
 * thread remapping): before the loop it sums each row's work into a
 * prefix array, and each chunk binary-searches its first and last row
 * (rv_rt_work_start, ravel_rt.h).
 *
 * The work of one iteration is an estimate: the number of innermost
 * statements its body runs, the product of the extents of the loops
 * around each, with the body's lets substituted, as an expression of the
 * parallel variable. It is evaluated before the loop, for every row, so it
 * may use only what is safe to read there and then:
 *   - sizes, the loop variable and variables bound outside the loop;
 *   - loads of arrays the kernel never writes (UF arrays, AUX row starts)
 *     outside any `if` of the body: the body reads the same element for
 *     every row, so the index is in range; under an `if` the guard may be
 *     what keeps it in range, so a load there is not used;
 *   - an inner loop's variable only in an expression without loads, where
 *     its extent stands for it (`k < j + 1` counts as the extent of j + 1);
 *   - integer divisions only by what the declared ranges keep at 1 or
 *     more: the body may divide by P only under a guard that proves P > 0
 *     (a fused loop over an empty axis, `f / P` under `f < P`).
 * A part of the work the rules exclude counts as its body's work alone (an
 * extent of 1): the estimate gets coarser, never unsafe. A branch counts
 * as the larger of its two arms. Every row also costs 1, so the prefix is
 * strictly increasing and rows of no work still spread.
 *
 * $RAVEL_NO_BALANCE=1 turns it off (every loop splits by row count), so
 * that `ravel bench balance` can compare both partitions of one program.
 */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

typedef struct Work {
    Module *m;
    const PtrMap *written; /* Buffer* the kernel stores to */
    PtrMap lets;           /* let Axis* -> its value, substituted */
    PtrMap inner;          /* inner loop Axis* -> its extent, substituted */
    PtrMap opaque;         /* Axis* whose value the estimate cannot use */
    PtrMap local;          /* Buffer* allocated inside the loop */
    int guarded;           /* inside an `if` of the body */
    const Axis *var;       /* the parallel loop's variable */
} Work;

typedef struct Scan {
    const Work *w;
    bool load, bad_load, opaque, inner, bad_div;
} Scan;

/* An integer division or remainder whose divisor the declared ranges do
 * not keep away from 0 and -1 (the body may run it only under a guard
 * that does, `j < P` before `f / P`). */
static bool unsafe_div(const Expr *x) {
    int64_t lo, hi;
    if (x->kind != EX_DIV && x->kind != EX_MOD && x->kind != EX_FLOORDIV &&
        x->kind != EX_FLOORMOD)
        return false;
    if (!ir_is_int(x->dtype))
        return false;
    return !ir_int_bounds(x->args[1], &lo, &hi) || lo < 1;
}

static void scan_node(const Expr *x, void *ctx) {
    Scan *sc = ctx;
    if (unsafe_div(x))
        sc->bad_div = true;
    if (x->kind == EX_LOAD) {
        sc->load = true;
        if (ptrmap_has(sc->w->written, x->u.buf) || ptrmap_has(&sc->w->local, x->u.buf))
            sc->bad_load = true;
    } else if (x->kind == EX_VAR) {
        if (ptrmap_has(&sc->w->opaque, x->u.axis))
            sc->opaque = true;
        if (ptrmap_has(&sc->w->inner, x->u.axis))
            sc->inner = true;
    }
}

/* x with the lets and inner loop variables replaced, or NULL when the
 * rules of the file comment exclude it. */
static Expr *usable(Work *w, Expr *x) {
    Scan sc = {.w = w};
    ir_visit(x, scan_node, &sc);
    if (sc.opaque || sc.bad_load || sc.bad_div || (sc.load && w->guarded))
        return NULL;
    x = ir_substitute(w->m, x, &w->lets);
    sc = (Scan){.w = w};
    ir_visit(x, scan_node, &sc);
    if (sc.bad_load || sc.opaque || sc.bad_div)
        return NULL;
    if (!sc.inner)
        return x;
    if (sc.load)
        return NULL; /* an inner variable's extent might index past the end */
    return ir_substitute(w->m, x, &w->inner);
}

static Expr *add(Work *w, Expr *a, Expr *b) {
    return ir_binary(w->m, EX_ADD, a, b);
}

/* cond when it is `var < e` on the parallel loop's variable with e
 * usable, else NULL. */
static Expr *dispatch_cond(Work *w, Expr *cond) {
    if (cond->kind != EX_LT || cond->args[0]->kind != EX_VAR || cond->args[0]->u.axis != w->var)
        return NULL;
    Expr *e = usable(w, cond->args[1]);
    return e ? ir_binary(w->m, EX_LT, cond->args[0], e) : NULL;
}

static Expr *work_of(Work *w, const Stmt *s) {
    Module *m = w->m;
    if (!s)
        return ir_int(m, 0);
    switch (s->kind) {
    case ST_FOR: {
        Expr *ext = usable(w, s->u.loop.extent);
        if (ext)
            ptrmap_put(&w->inner, s->u.loop.var, ir_binary(m, EX_MAX, ext, ir_int(m, 0)));
        else
            ptrmap_put(&w->opaque, s->u.loop.var, s->u.loop.var);
        Expr *body = work_of(w, s->u.loop.body);
        return ext ? ir_binary(m, EX_MUL, ptrmap_get(&w->inner, s->u.loop.var), body) : body;
    }
    case ST_LET: {
        Expr *v = usable(w, s->u.let.value);
        if (v && v->dtype == RV_I64)
            ptrmap_put(&w->lets, s->u.let.var, v);
        else
            ptrmap_put(&w->opaque, s->u.let.var, s->u.let.var);
        return work_of(w, s->u.let.body);
    }
    case ST_IF: {
        /* the dispatch of a horizontally fused loop (lower/opsplit.c), `if
         * h < A` on the loop variable with two arms: each arm's work where
         * it runs, through a ternary that evaluates the arm (and its
         * loads) only for its own rows, as the body does */
        Expr *cond = s->u.if_.else_s && w->guarded == 0 ? dispatch_cond(w, s->u.if_.cond) : NULL;
        if (cond)
            return ir_select(m, cond, work_of(w, s->u.if_.then_s), work_of(w, s->u.if_.else_s));
        w->guarded++;
        Expr *a = work_of(w, s->u.if_.then_s), *b = work_of(w, s->u.if_.else_s);
        w->guarded--;
        return ir_binary(m, EX_MAX, a, b);
    }
    case ST_SEQ: {
        Expr *sum = ir_int(m, 0);
        for (int i = 0; i < s->u.seq.n; i++)
            sum = add(w, sum, work_of(w, s->u.seq.stmts[i]));
        return sum;
    }
    case ST_ALLOC:
        ptrmap_put(&w->local, s->u.alloc.buf, s->u.alloc.buf);
        return work_of(w, s->u.alloc.body);
    case ST_STORE:
    case ST_CALL:
        return ir_int(m, 1);
    default: /* barriers and failed checks do no work */
        return ir_int(m, 0);
    }
}

Expr *cg_loop_work(Module *m, const Stmt *s, const PtrMap *written) {
    RV_ASSERT(s->kind == ST_FOR);
    const char *off = getenv("RAVEL_NO_BALANCE");
    if (off && *off && strcmp(off, "0") != 0)
        return NULL;
    Work w = {.m = m, .written = written, .var = s->u.loop.var};
    Expr *body = work_of(&w, s->u.loop.body);
    Expr *cost = NULL;
    if (body && ir_uses_axis(body, s->u.loop.var))
        cost = ir_simplify_expr(m, add(&w, ir_int(m, 1), body));
    ptrmap_free(&w.lets);
    ptrmap_free(&w.inner);
    ptrmap_free(&w.opaque);
    ptrmap_free(&w.local);
    return cost && ir_uses_axis(cost, s->u.loop.var) ? cost : NULL;
}
