/*
 * expr.c — tensor-level expressions into loop IR.
 *
 * Takes an expression of a stage's definition (reads of tensors with one
 * index per dimension, UF applications, axis variables, reductions) at a
 * point of the nest where its axes have values. Gives its loop-IR form,
 * an axis its loop-IR value, nested reductions from reduce.c, the reads
 * and divisions of a value with their run-time checks from rtcheck.c:
 *
 *   - a read of a tensor's storage or a UF application in a value the
 *     definition computes (ExprCtx.checked) stays a multi-dimensional
 *     access, `X{i, j}`, its indices in loop IR, and an integer division
 *     there stays as written: Kernel.check_src names both (the message,
 *     the stage's loop padding) for the checks pass (rtcheck.c), which
 *     gives them their checks, and the flatten pass (flatten.c) turns the
 *     access into a load at its flat offset;
 *   - one in an index or extent the schedule evaluates (loop extents,
 *     guards, regions, buffer sizes, the prelude: they also live outside
 *     the body's statements) is flattened here, with flatten.c's function,
 *     and gets a safe offset or divisor but no FAIL (rtcheck.c);
 *   - a read of a view of a stage computed at a loop (attach.c) is a load
 *     of the view's buffer at its offset in the region, whose origin only
 *     the nest knows.
 *
 * Statements the value needs first (checks, accumulator nests) are
 * collected in ExprCtx.pre.
 */
#include "lower/lower.h"

/* The flat offset of element idx of a view. */
Expr *lower_view_offset(Module *m, const RegionView *v, Expr *const *idx) {
    Expr *off = ir_int(m, 0);
    for (int d = 0; d < v->ndim; d++) {
        /* fused rows: the row of (idx[0], .., idx[k]) */
        Expr *at = v->fused && d == 0 ? ir_storage_offset(m, v->fused, idx) : idx[d];
        if (v->fused && d > 0 && d <= v->fused_k)
            continue;
        Expr *rel = ir_binary(m, EX_SUB, at, v->lo[d]);
        if (v->split[d]) {
            Expr *f = ir_int(m, v->split[d]);
            off = ir_binary(m, EX_ADD, off,
                            ir_binary(m, EX_MUL, ir_binary(m, EX_MOD, rel, f), v->stride_in[d]));
            rel = ir_binary(m, EX_DIV, rel, f);
        }
        off = ir_binary(m, EX_ADD, off, ir_binary(m, EX_MUL, rel, v->stride[d]));
    }
    return off;
}

/* Registers the storage of every UF that e applies, inner ones first (the
 * order lowering e would). */
static void use_ufs(ExprCtx *x, const Expr *e) {
    for (int i = 0; i < e->n && x->st == RV_OK; i++)
        use_ufs(x, e->args[i]);
    Storage *st;
    if (e->kind == EX_UFCALL && x->st == RV_OK &&
        (x->st = lower_storage_of_uf(x->c, e->u.uf, &st)) == RV_OK)
        lower_use_storage(x->c, st, PARAM_UF);
}

Expr *lower_expr_rec(ExprCtx *x, Expr *e, PtrMap *memo) {
    if (x->st != RV_OK)
        return NULL;
    Expr *done = ptrmap_get(memo, e);
    if (done)
        return done;
    if (x->preset && (done = ptrmap_get(x->preset, e)))
        return done;
    LowerCtx *c = x->c;
    Module *m = c->m;
    Expr *r = NULL;
    switch (e->kind) {
    case EX_VAR:
        /* loop variables are already loop IR */
        r = e->u.axis->kind == AX_LOOP ? e : ptrmap_get(&c->axis_value, e->u.axis);
        if (!r) {
            x->st = base_error(RV_ERR_SCHEDULE,
                               "axis '%s' is used where its loop is not bound (a loop order the "
                               "schedule cannot express)",
                               e->u.axis->name);
            return NULL;
        }
        break;
    case EX_REDUCE:
        r = lower_nested_reduce(x, e);
        break;
    case EX_READ:
    case EX_UFCALL: {
        Expr *idx[RV_MAX_DIMS];
        for (int i = 0; i < e->n; i++)
            if (!(idx[i] = lower_expr_rec(x, e->args[i], memo)))
                return NULL;
        const RegionView *v = e->kind == EX_READ ? ptrmap_get(&c->views, e->u.tensor) : NULL;
        if (v) {
            Expr *off = lower_view_offset(m, v, idx), *guard = NULL;
            if (!v->local_pad && !lower_read_guard(x, e, idx, memo, &guard))
                return NULL;
            r = ir_load(m, v->buf, guard ? ir_select(m, guard, off, ir_int(m, 0)) : off);
            break;
        }
        const Stage *ps = e->kind == EX_READ ? sched_stage_of(c->s, e->u.tensor) : NULL;
        if (ps && ps->attach == ATTACH_AT) {
            x->st = base_error(RV_ERR_SCHEDULE,
                               "%s is read before it is computed: compute it at a loop that "
                               "encloses its reader",
                               ps->name);
            return NULL;
        }
        Storage *st;
        if (e->kind == EX_READ) {
            x->st = lower_storage_of_tensor(c, e->u.tensor, &st);
            if (x->st == RV_OK)
                lower_use_storage(c, st, PARAM_TENSOR);
        } else {
            x->st = lower_storage_of_uf(c, e->u.uf, &st);
            if (x->st == RV_OK)
                lower_use_storage(c, st, PARAM_UF);
        }
        if (x->st != RV_OK)
            return NULL;
        if (x->checked) {
            /* the checks pass reads the UF arrays of the extents */
            Axis *const *axes = e->kind == EX_READ ? e->u.tensor->axes : e->u.uf->args;
            for (int d = 0; d < e->n && x->st == RV_OK; d++)
                use_ufs(x, axes[d]->extent);
            if (x->st != RV_OK)
                return NULL;
            /* (NULL: a constant index outside the declared extent, in a
             * copy of a partitioned nest that never runs it; the IR makes no
             * such access, so it is checked and flattened here) */
            if ((r = ir_rebuild(m, e, idx))) {
                vec_push(&c->check_src, ((CheckSrc){r, e, c->loop_pad, c->bulk_pad}));
                break;
            }
        }
        /* (the offset first: expression ids order the simplifier's sums) */
        Expr *off = ir_storage_offset(m, st, idx), *guard;
        if (!lower_read_guard(x, e, idx, memo, &guard))
            return NULL;
        r = lower_access_load(m, st, guard, off);
        break;
    }
    default:
        if (e->n == 0) {
            r = e;
        } else {
            Expr *args[3];
            RV_ASSERT(e->n <= 3);
            for (int i = 0; i < e->n; i++)
                if (!(args[i] = lower_expr_rec(x, e->args[i], memo)))
                    return NULL;
            bool div = lower_is_int_div(e);
            if (div && !x->checked) {
                r = lower_checked_div(x, e, args);
            } else {
                r = ir_rebuild(m, e, args);
                if (div) /* the checks pass checks it */
                    vec_push(&c->check_src, ((CheckSrc){r, e, c->loop_pad, c->bulk_pad}));
            }
        }
    }
    if (r)
        ptrmap_put(memo, e, r);
    return r;
}

Expr *lower_expr(ExprCtx *x, Expr *e) {
    PtrMap memo = {0};
    Expr *r = lower_expr_rec(x, e, &memo);
    ptrmap_free(&memo);
    return r;
}

/* An index expression (no reductions) in loop IR; NULL with c->st set. */
Expr *lower_index(LowerCtx *c, Expr *e) {
    ExprCtx x = {c, {0}, NULL, RV_OK, false};
    Expr *r = lower_expr(&x, e);
    RV_ASSERT(x.pre.len == 0 || x.st != RV_OK);
    vec_free(&x.pre);
    if (x.st != RV_OK && c->st == RV_OK)
        c->st = x.st;
    return r;
}

/* Statements computing `value` (with preset nodes) and storing it. */
Stmt *lower_element_stmt(LowerCtx *c, Buffer *buf, Expr *offset, Expr *value,
                         const PtrMap *preset) {
    ExprCtx x = {c, {0}, preset, RV_OK, true};
    Expr *v = lower_expr(&x, value);
    if (x.st != RV_OK) {
        c->st = x.st;
        vec_free(&x.pre);
        return NULL;
    }
    vec_push(&x.pre, lower_store(c->m, buf, offset, v));
    Stmt *s = lower_seq(c->m, x.pre.len, x.pre.data);
    vec_free(&x.pre);
    return s;
}
