/*
 * flatten.c — tensor-level expressions into loop IR (storage flattening).
 *
 * Takes an expression of a stage's definition (reads of tensors with one
 * index per dimension, UF applications, axis variables, reductions) at a
 * point of the nest where its axes have values. Gives its loop-IR form:
 * a read becomes a load at the flat offset of the tensor's storage order
 * (ir/layout.h: padded and ragged layouts, their AUX row starts) or of
 * the view of a stage computed at a loop (attach.c), a UF application a
 * load of its array widened to i64, an axis its loop-IR value; nested
 * reductions go to reduce.c, and the reads and divisions of a value get
 * their run-time checks from rtcheck.c. Statements the value needs first
 * (checks, accumulator nests) are collected in ExprCtx.pre.
 */
#include "lower/lower.h"

/* The flat offset of element idx of a view. */
Expr *lower_view_offset(Module *m, const RegionView *v, Expr *const *idx) {
    Expr *off = ir_int(m, 0);
    for (int d = 0; d < v->ndim; d++)
        off = ir_binary(m, EX_ADD, off,
                        ir_binary(m, EX_MUL, ir_binary(m, EX_SUB, idx[d], v->lo[d]), v->stride[d]));
    return off;
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
            Expr *off = lower_view_offset(m, v, idx);
            if (!v->local_pad)
                off = lower_checked_offset(x, e, idx, off, memo);
            if (!off)
                return NULL;
            r = ir_load(m, v->buf, off);
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
        Expr *off = lower_checked_offset(x, e, idx, ir_storage_offset(m, st, idx), memo);
        if (!off)
            return NULL;
        r = ir_load(m, st->buf, off);
        if (e->kind == EX_UFCALL)
            r = ir_cast(m, RV_I64, r);
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
            bool div = e->kind == EX_DIV || e->kind == EX_MOD || e->kind == EX_FLOORDIV ||
                       e->kind == EX_FLOORMOD;
            r = div && ir_is_int(e->dtype) ? lower_checked_div(x, e, args) : ir_rebuild(m, e, args);
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
