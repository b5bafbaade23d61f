/*
 * rtcheck.c — run-time check insertion.
 *
 * A read in a value the definition computes gets the condition that its
 * indices lie in the tensor's (or UF's) extents, and an integer division
 * the condition that its divisor is neither 0 nor -1 under the smallest
 * dividend; a condition the declared ranges do not already prove becomes
 * `if !ok: fail N` before the use, with the read at offset 0 or the
 * division by 1 where it fails, so a kernel never reads out of bounds nor
 * traps. The simplifier drops the checks that the loop context proves
 * (all of them in the examples). A conditional's predicate is checked
 * like a value, a nested reduction's extents before their loops. Indices
 * and extents the schedule itself evaluates (its loops' bounds, regions,
 * the prelude) get only the safe offset or divisor: the host computes the
 * layouts before any kernel runs, and ravel check proves the UF arguments
 * it can.
 *
 * Takes a read's multi-dimensional indices (before flattening: the
 * extents are per dimension) or a division's operands, from flatten.c.
 * Gives the safe offset or operands, the FAIL statements in ExprCtx.pre
 * and the message of each new site in the kernel's sites.
 */
#include "lower/lower.h"

/* Registers a run-time check of the current kernel; its site number. */
static int add_site(LowerCtx *c, const char *what, const Expr *e) {
    char *s = ir_expr_str(e);
    vec_push(&c->sites, arena_printf(c->m->arena, what, s));
    base_free(s);
    return c->sites.len - 1;
}

/* `ok` as a run-time check: true when the declared ranges and extents
 * prove it (nothing to emit); else false and, in a checked context, a
 * FAIL of a new site under !ok is appended to x->pre. (An index or extent
 * the schedule evaluates has no place for the FAIL: it only gets the safe
 * offset or divisor, so it cannot fault; the checker proves what it can
 * of those, and the host evaluates the layouts' extents first.) */
static bool check_or_fail(ExprCtx *x, Expr **ok, const char *what, const Expr *e) {
    LowerCtx *c = x->c;
    Module *m = c->m;
    int64_t v;
    *ok = lower_ctx_simp(c, *ok);
    if (ir_is_const_int(*ok, &v) && v)
        return true;
    if (!x->checked)
        return false;
    int site = add_site(c, what, e);
    vec_push(&x->pre, lower_if(m, ir_unary(m, EX_NOT, *ok), lower_fail(m, site), NULL));
    return false;
}

/* The condition that every index of read or UF call e (tensor-level) lies
 * in its dimension's extent, in loop IR (idx: the lowered indices). */
static Expr *in_bounds(ExprCtx *x, Expr *e, Expr *const *idx, PtrMap *memo) {
    Module *m = x->c->m;
    Axis *const *axes = e->kind == EX_READ ? e->u.tensor->axes : e->u.uf->args;
    Expr *ok = NULL;
    for (int d = 0; d < e->n; d++) {
        PtrMap outer = {0};
        for (int i = 0; i < d; i++)
            ptrmap_put(&outer, axes[i], e->args[i]);
        Expr *ext = ir_substitute(m, axes[d]->extent, &outer);
        ptrmap_free(&outer);
        if (!(ext = lower_expr_rec(x, ext, memo)))
            return NULL;
        /* a padded loop reads into storage padding by design (`pad`: every
         * read along it is of a dimension stored padded for it) */
        int pad = e->kind == EX_READ ? e->u.tensor->pad[d] : 1;
        if (x->c->loop_pad && pad > 1)
            ext = ir_binary(
                m, EX_MUL,
                ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, ext, ir_int(m, pad - 1)), ir_int(m, pad)),
                ir_int(m, pad));
        Expr *p = ir_binary(m, EX_AND, ir_binary(m, EX_GE, idx[d], ir_int(m, 0)),
                            ir_binary(m, EX_LT, idx[d], ext));
        ok = ok ? ir_binary(m, EX_AND, ok, p) : p;
    }
    return ok;
}

/* The flat offset `off` of read e, checked: where the indices may be out
 * of range, a FAIL and offset 0 instead (a kernel never reads out of
 * bounds; the run reports the failure). */
Expr *lower_checked_offset(ExprCtx *x, Expr *e, Expr *const *idx, Expr *off, PtrMap *memo) {
    if (e->n == 0)
        return off;
    Expr *ok = in_bounds(x, e, idx, memo);
    if (!ok)
        return NULL;
    if (check_or_fail(x, &ok,
                      e->kind == EX_READ ? "read %s out of bounds"
                                         : "ufun application %s outside its domain",
                      e))
        return off;
    return ir_select(x->c->m, ok, off, ir_int(x->c->m, 0));
}

/* An integer division or remainder whose divisor may be 0 (or -1 with the
 * dtype's smallest dividend): a FAIL there, and divisor 1 instead. */
Expr *lower_checked_div(ExprCtx *x, Expr *e, Expr **args) {
    Module *m = x->c->m;
    Expr *a = args[0], *b = args[1];
    rv_dtype t = e->dtype;
    Expr *ok = ir_binary(
        m, EX_AND, ir_binary(m, EX_NE, b, ir_const_int(m, b->dtype, 0)),
        ir_binary(m, EX_OR, ir_binary(m, EX_NE, b, ir_const_int(m, b->dtype, -1)),
                  ir_binary(m, EX_NE, a,
                            ir_const_int(m, a->dtype, t == RV_I32 ? INT32_MIN : INT64_MIN))));
    if (check_or_fail(x, &ok, "division by zero or integer overflow in %s", e))
        return ir_rebuild(m, e, args);
    Expr *safe[2] = {a, ir_select(m, ok, b, ir_const_int(m, b->dtype, 1))};
    return ir_rebuild(m, e, safe);
}
