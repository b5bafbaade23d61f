/*
 * lower.c — from a module to kernels in the loop IR.
 *
 * Each computed tensor becomes one kernel: a loop nest over its axes (with
 * symbolic and UF-dependent extents: a ragged axis `l < len[b]` becomes a
 * loop whose extent loads len at the enclosing b) whose body stores the
 * element. Tensor reads become loads at flat offsets (storage.c), UF
 * applications loads from the UF's array. A reduction anywhere in an
 * expression becomes a local accumulator initialised before, and updated
 * inside, a nest over its reduce axes, placed right before the statement
 * that needs its value, so reductions nest and compose with epilogues
 * (gelu(sum(...) + b)). A conditional operation lowers to an `if` that
 * evaluates one branch only.
 *
 * This is the default schedule (loops in axis order, serial). Schedule
 * primitives rewrite the loop nest built here (src/sched).
 *
 * Every kernel takes all sizes of the module, then the UF arrays, tensor
 * buffers and AUX arrays it uses, in that order.
 */
#include <math.h>
#include <string.h>

#include "lower/lower.h"

typedef struct LowerCtx {
    Module *m;
    Storage *tensors; /* by Tensor id */
    Storage *ufs;     /* by Ufun id */
    bool *tensor_ready, *uf_ready;
    /* per kernel */
    Vec(Param) params;
    PtrMap used_bufs;  /* Buffer* already a parameter */
    PtrMap axis_value; /* IR axis -> its value (a loop variable expression) */
    int nacc;          /* accumulator counter for names */
} LowerCtx;

/* UF values fit in int32 when the declared range allows (half the bytes). */
static rv_dtype uf_dtype(const Ufun *f) {
    int64_t a, b, c, d;
    if (ir_int_bounds(f->lo, &a, &b) && ir_int_bounds(f->hi, &c, &d) && a >= INT32_MIN &&
        d <= INT32_MAX)
        return RV_I32;
    return RV_I64;
}

static rv_status storage_of_uf(LowerCtx *c, Ufun *f, Storage **out) {
    if (!c->uf_ready[f->id]) {
        rv_status st = lower_storage_init(c->m, &c->ufs[f->id], f->name, f->nargs, f->args, NULL,
                                          uf_dtype(f), BUF_ARG);
        if (st != RV_OK)
            return st;
        c->ufs[f->id].buf->uf = f;
        c->uf_ready[f->id] = true;
    }
    *out = &c->ufs[f->id];
    return RV_OK;
}

static rv_status storage_of_tensor(LowerCtx *c, Tensor *t, Storage **out) {
    if (!c->tensor_ready[t->id]) {
        rv_status st = lower_storage_init(c->m, &c->tensors[t->id], t->name, t->ndim, t->axes,
                                          t->pad, t->dtype, BUF_ARG);
        if (st != RV_OK)
            return st;
        c->tensors[t->id].buf->tensor = t;
        c->tensor_ready[t->id] = true;
    }
    *out = &c->tensors[t->id];
    return RV_OK;
}

static void add_param(LowerCtx *c, ParamKind k, Buffer *b) {
    if (ptrmap_has(&c->used_bufs, b))
        return;
    ptrmap_put(&c->used_bufs, b, b);
    Param p = {.kind = k, .buf = b};
    vec_push(&c->params, p);
}

/* Registers a storage's buffers as parameters of the current kernel. */
static void use_storage(LowerCtx *c, const Storage *st, ParamKind k) {
    add_param(c, k, st->buf);
    for (int i = 0; i < st->ndim; i++)
        if (st->start[i])
            add_param(c, PARAM_AUX, st->start[i]);
}

/* ---- expressions ---- */

typedef struct ExprCtx {
    LowerCtx *c;
    Vec(Stmt *) pre; /* statements that must run before the expression */
    rv_status st;
} ExprCtx;

static Expr *lower_expr(ExprCtx *x, Expr *e);

/* The identity of a reduction in the accumulator's dtype. */
static Expr *reduce_init(Module *m, rv_reduce_kind rk, rv_dtype t) {
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

/* Lowers a REDUCE into an accumulator nest appended to x->pre; returns the
 * load of the result. argmax keeps the best value and its index. */
static Expr *lower_reduce(ExprCtx *x, Expr *e) {
    LowerCtx *c = x->c;
    Module *m = c->m;
    rv_reduce_kind rk = e->u.red.rk;
    rv_dtype vt = e->args[0]->dtype;
    int id = c->nacc++;
    Expr *zero = ir_int(m, 0);
    Buffer *acc = ir_buffer_new(m, arena_printf(m->arena, "acc%d", id), vt, ir_int(m, 1), BUF_LOCAL);
    Buffer *arg = rk == RV_REDUCE_ARGMAX ? ir_buffer_new(m, arena_printf(m->arena, "arg%d", id),
                                                         RV_I64, ir_int(m, 1), BUF_LOCAL)
                                         : NULL;
    /* loop variables for the reduce axes; extents may use outer axes */
    int n = e->u.red.naxes;
    Axis *vars[RV_MAX_DIMS];
    Expr *exts[RV_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        Axis *ax = e->u.red.axes[i];
        ExprCtx ex = {c, {0}, RV_OK};
        exts[i] = lower_expr(&ex, ax->extent);
        RV_ASSERT(ex.pre.len == 0); /* extents have no reductions */
        vec_free(&ex.pre);
        vars[i] = lower_loop_var(m, ax->name, exts[i]);
        ptrmap_put(&c->axis_value, ax, vars[i]->var);
    }
    /* the body, with its own nested reductions inside the loops */
    ExprCtx inner = {c, {0}, RV_OK};
    Expr *v = lower_expr(&inner, e->args[0]);
    if (inner.st != RV_OK) {
        x->st = inner.st;
        vec_free(&inner.pre);
        return NULL;
    }
    Expr *cur = ir_load(m, acc, zero);
    Stmt *update;
    switch (rk) {
    case RV_REDUCE_SUM:
        update = lower_store(m, acc, zero, ir_binary(m, EX_ADD, cur, v));
        break;
    case RV_REDUCE_MAX:
        update = lower_store(m, acc, zero, ir_binary(m, EX_MAX, cur, v));
        break;
    case RV_REDUCE_MIN:
        update = lower_store(m, acc, zero, ir_binary(m, EX_MIN, cur, v));
        break;
    case RV_REDUCE_ARGMAX: {
        /* first maximum wins: strictly greater replaces */
        Stmt *both[2] = {lower_store(m, acc, zero, v), lower_store(m, arg, zero, vars[0]->var)};
        update = lower_if(m, ir_binary(m, EX_GT, v, cur), lower_seq(m, 2, both), NULL);
        break;
    }
    default:
        RV_UNREACHABLE();
    }
    vec_push(&inner.pre, update);
    Stmt *body = lower_seq(m, inner.pre.len, inner.pre.data);
    vec_free(&inner.pre);
    for (int i = n - 1; i >= 0; i--)
        body = lower_for(m, vars[i], exts[i], LOOP_SERIAL, body);
    vec_push(&x->pre, lower_store(m, acc, zero, reduce_init(m, rk, vt)));
    if (arg)
        vec_push(&x->pre, lower_store(m, arg, zero, ir_int(m, -1)));
    vec_push(&x->pre, body);
    /* the accumulators' allocations wrap the whole element statement; they
     * are recorded as LOCAL buffers and declared by the caller */
    return arg ? ir_load(m, arg, zero) : cur;
}

static Expr *lower_expr_rec(ExprCtx *x, Expr *e, PtrMap *memo) {
    if (x->st != RV_OK)
        return NULL;
    Expr *done = ptrmap_get(memo, e);
    if (done)
        return done;
    LowerCtx *c = x->c;
    Module *m = c->m;
    Expr *r = NULL;
    switch (e->kind) {
    case EX_VAR:
        /* loop variables (the prelude's) are already loop IR */
        r = e->u.axis->kind == AX_LOOP ? e : ptrmap_get(&c->axis_value, e->u.axis);
        RV_ASSERT(r);
        break;
    case EX_REDUCE:
        r = lower_reduce(x, e);
        break;
    case EX_READ:
    case EX_UFCALL: {
        Expr *idx[RV_MAX_DIMS];
        for (int i = 0; i < e->n; i++)
            if (!(idx[i] = lower_expr_rec(x, e->args[i], memo)))
                return NULL;
        Storage *st;
        if (e->kind == EX_READ) {
            x->st = storage_of_tensor(c, e->u.tensor, &st);
            if (x->st == RV_OK)
                use_storage(c, st, PARAM_TENSOR);
        } else {
            x->st = storage_of_uf(c, e->u.uf, &st);
            if (x->st == RV_OK)
                use_storage(c, st, PARAM_UF);
        }
        if (x->st != RV_OK)
            return NULL;
        r = ir_load(m, st->buf, lower_storage_offset(m, st, idx));
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
            r = ir_rebuild(m, e, args);
        }
    }
    if (r)
        ptrmap_put(memo, e, r);
    return r;
}

static Expr *lower_expr(ExprCtx *x, Expr *e) {
    PtrMap memo = {0};
    Expr *r = lower_expr_rec(x, e, &memo);
    ptrmap_free(&memo);
    return r;
}

/* LowerExprFn for the prelude: index expressions over loop variables,
 * sizes and UFs become loads of the UF arrays. */
static Expr *lower_index_expr(void *ctx, Expr *e) {
    ExprCtx x = {ctx, {0}, RV_OK};
    Expr *r = lower_expr(&x, e);
    RV_ASSERT(x.pre.len == 0 && x.st == RV_OK && r); /* extents hold no reductions */
    vec_free(&x.pre);
    return r;
}

/* Statements computing `value` and storing it at `offset` of `buf`. */
static Stmt *element_stmt(LowerCtx *c, Buffer *buf, Expr *offset, Expr *value, rv_status *st) {
    ExprCtx x = {c, {0}, RV_OK};
    Expr *v = lower_expr(&x, value);
    if (x.st != RV_OK) {
        *st = x.st;
        vec_free(&x.pre);
        return NULL;
    }
    vec_push(&x.pre, lower_store(c->m, buf, offset, v));
    Stmt *s = lower_seq(c->m, x.pre.len, x.pre.data);
    vec_free(&x.pre);
    return s;
}

/* Wraps `s` in allocations of every local buffer it stores to. */
typedef struct LocalsCtx {
    Vec(Buffer *) bufs;
} LocalsCtx;

static void collect_locals(const Stmt *s, LocalsCtx *l) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_STORE:
        if (s->u.store.buf->scope == BUF_LOCAL) {
            for (int i = 0; i < l->bufs.len; i++)
                if (l->bufs.data[i] == s->u.store.buf)
                    return;
            vec_push(&l->bufs, s->u.store.buf);
        }
        return;
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
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            collect_locals(s->u.seq.stmts[i], l);
        return;
    default:
        return; /* ALLOC bodies already declare theirs */
    }
}

static Stmt *wrap_locals(Module *m, Stmt *s) {
    LocalsCtx l = {{0}};
    collect_locals(s, &l);
    for (int i = l.bufs.len - 1; i >= 0; i--)
        s = lower_alloc(m, l.bufs.data[i], s);
    vec_free(&l.bufs);
    return s;
}

/* ---- operations ---- */

static Kernel *kernel_new(LowerCtx *c, Tensor *t) {
    Kernel *k = arena_alloc(c->m->arena, sizeof(Kernel));
    k->name = t->name;
    k->m = c->m;
    return k;
}

static rv_status lower_op(LowerCtx *c, Tensor *t, Kernel **out) {
    Module *m = c->m;
    Op *op = t->op;
    Storage *ost;
    rv_status st = storage_of_tensor(c, t, &ost);
    if (st != RV_OK)
        return st;
    Kernel *k = kernel_new(c, t);
    c->params.len = 0;
    ptrmap_free(&c->used_bufs);
    ptrmap_free(&c->axis_value);
    for (int i = 0; i < m->sizes.len; i++) {
        Param p = {.kind = PARAM_SIZE, .size = m->sizes.data[i]};
        vec_push(&c->params, p);
    }
    Stmt *body;
    if (op->kind == OP_EXTERN) {
        Buffer *args[RV_MAX_DIMS + 1];
        if (op->nin > RV_MAX_DIMS)
            return base_error(RV_ERR_UNSUPPORTED, "extern '%s' has too many arguments", t->name);
        args[0] = ost->buf;
        for (int i = 0; i < op->nin; i++) {
            Storage *is;
            if ((st = storage_of_tensor(c, op->inputs[i], &is)) != RV_OK)
                return st;
            use_storage(c, is, PARAM_TENSOR);
            args[i + 1] = is->buf;
        }
        use_storage(c, ost, PARAM_TENSOR);
        body = lower_call(m, op->kernel, op->nin + 1, args, t);
    } else {
        /* loop variables for the output axes, outermost first */
        Axis *vars[RV_MAX_DIMS];
        Expr *exts[RV_MAX_DIMS], *idx[RV_MAX_DIMS];
        for (int i = 0; i < t->ndim; i++) {
            ExprCtx x = {c, {0}, RV_OK};
            exts[i] = lower_expr(&x, t->axes[i]->extent);
            vec_free(&x.pre);
            if (x.st != RV_OK)
                return x.st;
            vars[i] = lower_loop_var(m, t->axes[i]->name, exts[i]);
            idx[i] = vars[i]->var;
            ptrmap_put(&c->axis_value, t->axes[i], idx[i]);
        }
        Expr *offset = lower_storage_offset(m, ost, idx);
        if (op->kind == OP_COND) {
            ExprCtx x = {c, {0}, RV_OK};
            Expr *pred = lower_expr(&x, op->pred);
            vec_free(&x.pre);
            if (x.st != RV_OK)
                return x.st;
            Stmt *then_s = element_stmt(c, ost->buf, offset, op->body, &st);
            Stmt *else_s = then_s ? element_stmt(c, ost->buf, offset, op->else_body, &st) : NULL;
            if (!then_s || !else_s)
                return st;
            body = lower_if(m, pred, then_s, else_s);
        } else {
            if (!(body = element_stmt(c, ost->buf, offset, op->body, &st)))
                return st;
        }
        body = wrap_locals(m, body);
        for (int i = t->ndim - 1; i >= 0; i--)
            body = lower_for(m, vars[i], exts[i], LOOP_SERIAL, body);
        use_storage(c, ost, PARAM_TENSOR);
    }
    /* the prelude fills every AUX array this kernel uses */
    Vec(Stmt *) pre = {0};
    for (int i = 0; i < m->ufuns.len; i++)
        if (c->uf_ready[i] && ptrmap_has(&c->used_bufs, c->ufs[i].buf))
            vec_push(&pre, lower_storage_prelude(m, &c->ufs[i], lower_index_expr, c));
    for (int i = 0; i < m->tensors.len; i++)
        if (c->tensor_ready[i] && ptrmap_has(&c->used_bufs, c->tensors[i].buf))
            vec_push(&pre, lower_storage_prelude(m, &c->tensors[i], lower_index_expr, c));
    k->prelude = lower_seq(m, pre.len, pre.data);
    vec_free(&pre);
    k->body = body;
    k->nparams = c->params.len;
    k->params = arena_memdup(m->arena, c->params.data, sizeof(Param) * (size_t)c->params.len);
    *out = k;
    return RV_OK;
}

rv_status lower_module(Module *m, Kernel ***out, int *n) {
    LowerCtx c = {.m = m};
    c.tensors = base_xcalloc((size_t)m->tensors.len + 1, sizeof(Storage));
    c.ufs = base_xcalloc((size_t)m->ufuns.len + 1, sizeof(Storage));
    c.tensor_ready = base_xcalloc((size_t)m->tensors.len + 1, sizeof(bool));
    c.uf_ready = base_xcalloc((size_t)m->ufuns.len + 1, sizeof(bool));
    Vec(Kernel *) ks = {0};
    rv_status st = RV_OK;
    for (int i = 0; i < m->tensors.len && st == RV_OK; i++) {
        Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            continue;
        if (t->op->kind == OP_RECURSE) {
            st = base_error(RV_ERR_UNSUPPORTED, "'%s': recursive operations cannot be lowered yet",
                            t->name);
            break;
        }
        Kernel *k = NULL;
        if ((st = lower_op(&c, t, &k)) == RV_OK)
            vec_push(&ks, k);
    }
    vec_free(&c.params);
    ptrmap_free(&c.used_bufs);
    ptrmap_free(&c.axis_value);
    base_free(c.tensors);
    base_free(c.ufs);
    base_free(c.tensor_ready);
    base_free(c.uf_ready);
    if (st != RV_OK) {
        vec_free(&ks);
        return st;
    }
    /* the kernels live in the module's arena; the array is the caller's */
    *out = ks.data;
    *n = ks.len;
    return RV_OK;
}
