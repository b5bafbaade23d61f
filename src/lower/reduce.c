/*
 * reduce.c — reduction placement.
 *
 * The stage's reduction loops are leaves like any other. When they are
 * innermost, the sum is a local accumulator updated by them and read by
 * the epilogue after them (gelu(sum + b)). When a spatial loop sits
 * inside a reduction loop (GEMM's k outside the register tile), the
 * reduction accumulates in place in the destination. Reductions that are
 * not loops of the stage (nested ones, or several in one expression)
 * become accumulator nests where their value is needed.
 *
 * Takes the nest at its outermost reduction leaf (nest.c) or a REDUCE
 * node in a value (expr.c). Gives the updates, `reduce RK into B[, A]:
 * nest` (B the accumulator or the destination, A argmax's index), every
 * accumulator declared by an allocation around its uses, and the
 * interpreter's combination order and rules (argmax: first maximum, ties
 * on the index, NaN the largest). Their initialisation (the identity
 * before the loops, an in-place init nest over the inner spatial loops)
 * is the reduce pass's (place.c), made from the updates' nest.
 */
#include <math.h>

#include "lower/lower.h"

/* The identity of a reduction in the accumulator's dtype. */
Expr *lower_reduce_init(Module *m, rv_reduce_kind rk, rv_dtype t) {
    switch (rk) {
    case RV_REDUCE_SUM:
        return ir_is_float(t) ? ir_float(m, t, 0.0) : ir_const_int(m, t, 0);
    case RV_REDUCE_MAX:
    case RV_REDUCE_ARGMAX:
        if (ir_is_float(t))
            return ir_float(m, t, -INFINITY);
        return ir_const_int(m, t, t == RV_I32 ? INT32_MIN : INT64_MIN);
    case RV_REDUCE_MIN:
        if (ir_is_float(t))
            return ir_float(m, t, INFINITY);
        return ir_const_int(m, t, t == RV_I32 ? INT32_MAX : INT64_MAX);
    default:
        RV_UNREACHABLE();
    }
}

/* acc = acc (op) v, for sum/max/min. */
static Expr *reduce_combine(Module *m, rv_reduce_kind rk, Expr *cur, Expr *v) {
    switch (rk) {
    case RV_REDUCE_SUM:
        return ir_binary(m, EX_ADD, cur, v);
    case RV_REDUCE_MAX:
        return ir_binary(m, EX_MAX, cur, v);
    case RV_REDUCE_MIN:
        return ir_binary(m, EX_MIN, cur, v);
    default:
        RV_UNREACHABLE();
    }
}

/* The update of an accumulator (and argmax's index) by value v. */
Stmt *lower_reduce_update(Module *m, rv_reduce_kind rk, Buffer *acc, Expr *at, Buffer *arg,
                          Expr *index, Expr *v) {
    Expr *cur = ir_load(m, acc, at);
    if (rk != RV_REDUCE_ARGMAX)
        return lower_store(m, acc, at, reduce_combine(m, rk, cur, v));
    /* The interpreter's rule, first maximum wins, with ties broken on the
     * index (the original axis's value) rather than on which came first,
     * so that any order of the reduction loops (split, tile, reorder)
     * gives the same answer: the first value is taken whatever it is (a
     * row of -inf or INT_MIN has argmax 0, not -1); after it (v, index)
     * replaces (cur, arg) when v is greater, or equal with a smaller
     * index; a NaN is greater than everything but a NaN, among NaNs the
     * smallest index wins. The index compare runs only on ties. */
    Expr *old = ir_load(m, arg, at);
    Expr *none_yet = ir_binary(m, EX_LT, old, ir_int(m, 0));
    Expr *earlier = ir_binary(m, EX_LT, index, old);
    Expr *tie = ir_binary(m, EX_AND, ir_binary(m, EX_EQ, v, cur), earlier);
    Expr *greater = ir_binary(m, EX_GT, v, cur);
    if (ir_is_float(v->dtype)) {
        /* `!(v <= cur)` is v > cur or either NaN: one compare on the common
         * path, as many as the loop had before ties looked at the index */
        Expr *nan_tie = ir_binary(m, EX_AND, ir_binary(m, EX_NE, v, v), earlier); /* both NaN */
        greater = ir_binary(m, EX_AND, ir_unary(m, EX_NOT, ir_binary(m, EX_LE, v, cur)),
                            ir_binary(m, EX_OR, ir_binary(m, EX_EQ, cur, cur), nan_tie));
    }
    Expr *better = ir_binary(m, EX_OR, greater, tie);
    Stmt *both[2] = {lower_store(m, acc, at, v), lower_store(m, arg, at, index)};
    return lower_if(m, ir_binary(m, EX_OR, none_yet, better), lower_seq(m, 2, both), NULL);
}

/* Lowers a REDUCE that is not a loop of the stage into an accumulator nest
 * appended to x->pre; returns the load of the result. */
Expr *lower_nested_reduce(ExprCtx *x, Expr *e) {
    LowerCtx *c = x->c;
    Module *m = c->m;
    rv_reduce_kind rk = e->u.red.rk;
    rv_dtype vt = e->args[0]->dtype;
    int id = c->nacc++;
    Expr *zero = ir_int(m, 0);
    Buffer *acc =
        ir_buffer_new(m, arena_printf(m->arena, "acc%d", id), vt, ir_int(m, 1), BUF_LOCAL);
    Buffer *arg = rk == RV_REDUCE_ARGMAX ? ir_buffer_new(m, arena_printf(m->arena, "arg%d", id),
                                                         RV_I64, ir_int(m, 1), BUF_LOCAL)
                                         : NULL;
    ptrmap_put(&c->accs, acc, acc);
    if (arg)
        ptrmap_put(&c->accs, arg, arg);
    int n = e->u.red.naxes;
    Axis *vars[RV_MAX_DIMS];
    Expr *exts[RV_MAX_DIMS];
    Stmt *checks[RV_MAX_DIMS]; /* extents have no reductions, but may have checks */
    for (int i = 0; i < n; i++) {
        Axis *ax = e->u.red.axes[i];
        ExprCtx ex = {c, {0}, NULL, RV_OK, x->checked};
        exts[i] = lower_expr(&ex, ax->extent);
        checks[i] = lower_seq(m, ex.pre.len, ex.pre.data);
        vec_free(&ex.pre);
        if (!exts[i]) {
            x->st = ex.st;
            return NULL;
        }
        vars[i] = lower_loop_var(m, ax->name, exts[i]);
        ptrmap_put(&c->axis_value, ax, vars[i]->var);
    }
    ExprCtx inner = {c, {0}, x->preset, RV_OK, x->checked};
    Expr *v = lower_expr(&inner, e->args[0]);
    if (inner.st != RV_OK) {
        x->st = inner.st;
        vec_free(&inner.pre);
        return NULL;
    }
    vec_push(&inner.pre, lower_reduce_update(m, rk, acc, zero, arg, vars[0]->var, v));
    Stmt *body = lower_seq(m, inner.pre.len, inner.pre.data);
    vec_free(&inner.pre);
    /* an extent's checks run right before its loop, inside the loops of
     * the axes it may use */
    for (int i = n - 1; i >= 0; i--) {
        Stmt *both[2] = {checks[i], lower_for(m, vars[i], exts[i], LOOP_SERIAL, body)};
        body = lower_seq(m, 2, both);
    }
    vec_push(&x->pre, lower_reduce(m, rk, acc, arg, body)); /* initialised by place.c */
    return arg ? ir_load(m, arg, zero) : ir_load(m, acc, zero);
}
/* Wraps `s` in allocations of the accumulators it stores to that no
 * ALLOC declares yet. */
typedef struct LocalsCtx {
    Vec(Buffer *) bufs;
    PtrMap declared;
    const PtrMap *accs;
} LocalsCtx;

static void collect_locals(const Stmt *s, LocalsCtx *l) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_STORE: {
        Buffer *b = s->u.store.buf;
        if (ptrmap_has(l->accs, b) && !ptrmap_has(&l->declared, b)) {
            ptrmap_put(&l->declared, b, b);
            vec_push(&l->bufs, b);
        }
        return;
    }
    case ST_FOR:
        collect_locals(s->u.loop.body, l);
        return;
    case ST_IF:
        collect_locals(s->u.if_.then_s, l);
        collect_locals(s->u.if_.else_s, l);
        return;
    case ST_LET:
        collect_locals(s->u.let.body, l);
        return;
    case ST_ALLOC:
        ptrmap_put(&l->declared, s->u.alloc.buf, s->u.alloc.buf);
        collect_locals(s->u.alloc.body, l);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            collect_locals(s->u.seq.stmts[i], l);
        return;
    case ST_REDUCE: {
        /* its initialisation (place.c) stores to them first */
        Buffer *bs[2] = {s->u.reduce.buf, s->u.reduce.arg};
        for (int i = 0; i < 2; i++)
            if (bs[i] && ptrmap_has(l->accs, bs[i]) && !ptrmap_has(&l->declared, bs[i])) {
                ptrmap_put(&l->declared, bs[i], bs[i]);
                vec_push(&l->bufs, bs[i]);
            }
        collect_locals(s->u.reduce.body, l);
        return;
    }
    default:
        return;
    }
}

Stmt *lower_wrap_locals(LowerCtx *c, Stmt *s) {
    Module *m = c->m;
    LocalsCtx l = {{0}, {0}, &c->accs};
    collect_locals(s, &l);
    for (int i = l.bufs.len - 1; i >= 0; i--)
        s = lower_alloc(m, l.bufs.data[i], s);
    vec_free(&l.bufs);
    ptrmap_free(&l.declared);
    return s;
}

/* The reduction starts at leaf i: an accumulator or an in-place init. */
Stmt *lower_gen_reduction(LowerCtx *c, StageNest n, int i) {
    Module *m = c->m;
    Stage *st = n.st;
    const Expr *R = st->reduce;
    if (n.in_place) {
        /* the update nest; place.c puts the init nest before it */
        n.mode = MODE_IN_PLACE;
        Stmt *b = lower_gen(c, n, i);
        return b ? lower_reduce(m, R->u.red.rk, lower_dest_buf(&n), NULL, b) : NULL;
    }
    int id = c->nacc++;
    n.acc = ir_buffer_new(m, arena_printf(m->arena, "acc%d", id), R->args[0]->dtype, ir_int(m, 1),
                          BUF_LOCAL);
    n.arg = R->u.red.rk == RV_REDUCE_ARGMAX ? ir_buffer_new(m, arena_printf(m->arena, "arg%d", id),
                                                            RV_I64, ir_int(m, 1), BUF_LOCAL)
                                            : NULL;
    ptrmap_put(&c->accs, n.acc, n.acc);
    if (n.arg)
        ptrmap_put(&c->accs, n.arg, n.arg);
    n.mode = MODE_ACC;
    Stmt *loops = lower_gen(c, n, i);
    if (!loops)
        return NULL;
    Expr *zero = ir_int(m, 0);
    c->loop_pad = lower_loop_padded(st);
    c->bulk_pad = lower_bulk_padded(st);
    lower_bind_axes(c, &n);
    PtrMap preset = {0};
    ptrmap_put(&preset, R, ir_load(m, n.arg ? n.arg : n.acc, zero));
    Stmt *fin =
        lower_element_stmt(c, lower_dest_buf(&n), lower_dest_offset(c, &n), st->body, &preset);
    ptrmap_free(&preset);
    if (!fin)
        return NULL;
    Stmt *parts[2] = {lower_reduce(m, R->u.red.rk, n.acc, n.arg, loops), fin};
    Stmt *s = lower_wrap_locals(c, lower_seq(m, 2, parts));
    return lower_guarded(c, lower_guards(c, &n, true, false), s);
}
