/*
 * lower.c — from a schedule to kernels in the loop IR.
 *
 * Each root stage becomes one kernel: the loop nest of its leaves (split,
 * fused, reordered, with their kinds), whose innermost body stores one
 * element. Values flow up the IterVar tree (a split variable is
 * outer*factor + inner, a fused part is fused / E or fused % E) and
 * extents flow down (ceil(E/f) outer, f inner), staying symbolic: sizes
 * and UF values are parameters, so one kernel serves every size. Ragged
 * extents (`l < len[b]`) are lowered once the loops they depend on are
 * bound.
 *
 * Tails of non-dividing splits: with TAIL_PARTITION (the default) the
 * outer loop of a split whose inner loop is a leaf below it runs over the
 * full tiles with no checks, followed by one guarded copy of the nest for
 * the last, partial tile (inner extent E - o*f); otherwise the innermost
 * statement is guarded by `o*f + i < E`.
 *
 * Reductions. The stage's reduction loops are leaves like any other. When
 * they are innermost, the sum is a local accumulator initialised before
 * them and read by the epilogue after them (gelu(sum + b)). When a spatial
 * loop sits inside a reduction loop (GEMM's k outside the register tile),
 * the reduction accumulates in place in the destination: an init nest over
 * the inner spatial loops runs right before the outermost reduction loop.
 * Reductions that are not loops of the stage (nested ones, or several in
 * one expression) become accumulator nests where their value is needed.
 *
 * Placement. A stage computed at a loop of its reader gets a buffer for
 * the region the reader's remaining iterations read (bounds.c): origin and
 * extent per dimension, clipped to the tensor unless the stage pads
 * locally (then out-of-range elements of a cached input are zero). The
 * buffer lives on the stack when small and constant, else in the per-call
 * scratch arena; the reader's reads of it become loads relative to the
 * origin. Inlined stages were already substituted by the schedule.
 *
 * Run-time checks. A read in a value the definition computes gets the
 * condition that its indices lie in the tensor's (or UF's) extents, and an
 * integer division the condition that its divisor is neither 0 nor -1
 * under the smallest dividend; a condition the declared ranges do not
 * already prove becomes `if !ok: fail N` before the use, with the read at
 * offset 0 or the division by 1 where it fails, so a kernel never reads
 * out of bounds nor traps. The simplifier drops the checks that the loop
 * context proves (all of them in the examples). A conditional's predicate
 * is checked like a value, a nested reduction's extents before their
 * loops. Indices and extents the schedule itself evaluates (its loops'
 * bounds, regions, the prelude) get only the safe offset or divisor: the
 * host computes the layouts before any kernel runs, and ravel check
 * proves the UF arguments it can.
 *
 * Every kernel takes all sizes of the module, then the UF arrays, tensor
 * buffers and AUX arrays it uses, in that order. lower_pipeline then runs
 * the passes (simplify removes the guards it can prove true).
 */
#include <math.h>
#include <string.h>

#include "lower/lower.h"

/* Bytes a local buffer may take on the stack; larger ones use scratch. */
#define LOCAL_STACK_BYTES (256 * 1024)
/* IterVars per stage the nest state tracks (the schedule checker keeps
 * stages within it). */
#define MAX_IVS SCHED_MAX_IVS

typedef struct View {
    Buffer *buf;
    int ndim;
    Expr *lo[RV_MAX_DIMS];     /* region origin, loop-IR */
    Expr *stride[RV_MAX_DIMS]; /* elements */
    /* The region is the read window unclipped (local padding): every read
     * the reader makes is inside it. Otherwise it is clipped to the
     * tensor, and a read is inside when it is inside the tensor. */
    bool local_pad;
} View;

typedef struct LowerCtx {
    Module *m;
    Schedule *s;
    PtrMap storage; /* Tensor* or Ufun* -> Storage* */
    PtrMap views;   /* Tensor* of an attached stage -> View* */
    /* per kernel */
    Vec(Param) params;
    PtrMap used_bufs;  /* Buffer* already a parameter */
    PtrMap axis_value; /* IR axis -> its value (loop-IR expression) */
    int nacc;          /* accumulator counter for names */
    int par_depth;     /* parallel loops around the current position */
    PtrMap accs;       /* accumulator buffers wrap_locals declares */
    Vec(const char *) sites; /* the kernel's run-time checks (Kernel.sites) */
    bool loop_pad; /* the stage being emitted pads a loop (schedule `pad`) */
    rv_status st;
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
    Storage *st = ptrmap_get(&c->storage, f);
    if (!st) {
        st = arena_alloc(c->m->arena, sizeof(Storage));
        rv_status r =
            ir_storage_init(c->m, st, f->name, f->nargs, f->args, NULL, uf_dtype(f), BUF_ARG);
        if (r != RV_OK)
            return r;
        st->buf->uf = f;
        ptrmap_put(&c->storage, f, st);
    }
    *out = st;
    return RV_OK;
}

static rv_status storage_of_tensor(LowerCtx *c, Tensor *t, Storage **out) {
    Storage *st = ptrmap_get(&c->storage, t);
    if (!st) {
        st = arena_alloc(c->m->arena, sizeof(Storage));
        rv_status r =
            ir_storage_init(c->m, st, t->name, t->ndim, t->axes, t->pad, t->dtype, BUF_ARG);
        if (r != RV_OK)
            return r;
        st->buf->tensor = t;
        ptrmap_put(&c->storage, t, st);
    }
    *out = st;
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

static Expr *simp(LowerCtx *c, Expr *e) {
    return e ? lower_simplify_expr(c->m, e) : NULL;
}

/* ---- expressions ---- */

typedef struct ExprCtx {
    LowerCtx *c;
    Vec(Stmt *) pre;      /* statements that must run before the expression */
    const PtrMap *preset; /* nodes with a value already (the stage's reduction) */
    rv_status st;
    /* A value or predicate the definition computes (not an index or
     * extent the schedule evaluates): reads and divisions that the
     * simplifier cannot prove safe get a FAIL in pre (check_or_fail); in
     * every context they get a safe offset or divisor. */
    bool checked;
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
static Stmt *reduce_update(Module *m, rv_reduce_kind rk, Buffer *acc, Expr *at, Buffer *arg,
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
        Expr *nan_tie =
            ir_binary(m, EX_AND, ir_binary(m, EX_NE, v, v), earlier); /* both NaN */
        greater = ir_binary(m, EX_AND, ir_unary(m, EX_NOT, ir_binary(m, EX_LE, v, cur)),
                            ir_binary(m, EX_OR, ir_binary(m, EX_EQ, cur, cur), nan_tie));
    }
    Expr *better = ir_binary(m, EX_OR, greater, tie);
    Stmt *both[2] = {lower_store(m, acc, at, v), lower_store(m, arg, at, index)};
    return lower_if(m, ir_binary(m, EX_OR, none_yet, better), lower_seq(m, 2, both), NULL);
}

/* Lowers a REDUCE that is not a loop of the stage into an accumulator nest
 * appended to x->pre; returns the load of the result. */
static Expr *lower_reduce(ExprCtx *x, Expr *e) {
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
    vec_push(&inner.pre, reduce_update(m, rk, acc, zero, arg, vars[0]->var, v));
    Stmt *body = lower_seq(m, inner.pre.len, inner.pre.data);
    vec_free(&inner.pre);
    /* an extent's checks run right before its loop, inside the loops of
     * the axes it may use */
    for (int i = n - 1; i >= 0; i--) {
        Stmt *both[2] = {checks[i], lower_for(m, vars[i], exts[i], LOOP_SERIAL, body)};
        body = lower_seq(m, 2, both);
    }
    vec_push(&x->pre, lower_store(m, acc, zero, reduce_init(m, rk, vt)));
    if (arg)
        vec_push(&x->pre, lower_store(m, arg, zero, ir_int(m, -1)));
    vec_push(&x->pre, body);
    return arg ? ir_load(m, arg, zero) : ir_load(m, acc, zero);
}

/* ---- run-time checks ---- */

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
    *ok = simp(c, *ok);
    if (ir_is_const_int(*ok, &v) && v)
        return true;
    if (!x->checked)
        return false;
    int site = add_site(c, what, e);
    vec_push(&x->pre, lower_if(m, ir_unary(m, EX_NOT, *ok), lower_fail(m, site), NULL));
    return false;
}

static Expr *lower_expr_rec(ExprCtx *x, Expr *e, PtrMap *memo);

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
            ext = ir_binary(m, EX_MUL,
                            ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, ext, ir_int(m, pad - 1)),
                                      ir_int(m, pad)),
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
static Expr *checked_offset(ExprCtx *x, Expr *e, Expr *const *idx, Expr *off, PtrMap *memo) {
    if (e->n == 0)
        return off;
    Expr *ok = in_bounds(x, e, idx, memo);
    if (!ok)
        return NULL;
    if (check_or_fail(x, &ok, e->kind == EX_READ ? "read %s out of bounds"
                                                 : "ufun application %s outside its domain",
                      e))
        return off;
    return ir_select(x->c->m, ok, off, ir_int(x->c->m, 0));
}

/* An integer division or remainder whose divisor may be 0 (or -1 with the
 * dtype's smallest dividend): a FAIL there, and divisor 1 instead. */
static Expr *checked_div(ExprCtx *x, Expr *e, Expr **args) {
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

/* The flat offset of element idx of a view. */
static Expr *view_offset(Module *m, const View *v, Expr *const *idx) {
    Expr *off = ir_int(m, 0);
    for (int d = 0; d < v->ndim; d++)
        off = ir_binary(m, EX_ADD, off,
                        ir_binary(m, EX_MUL, ir_binary(m, EX_SUB, idx[d], v->lo[d]), v->stride[d]));
    return off;
}

static Expr *lower_expr_rec(ExprCtx *x, Expr *e, PtrMap *memo) {
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
        r = lower_reduce(x, e);
        break;
    case EX_READ:
    case EX_UFCALL: {
        Expr *idx[RV_MAX_DIMS];
        for (int i = 0; i < e->n; i++)
            if (!(idx[i] = lower_expr_rec(x, e->args[i], memo)))
                return NULL;
        const View *v = e->kind == EX_READ ? ptrmap_get(&c->views, e->u.tensor) : NULL;
        if (v) {
            Expr *off = view_offset(m, v, idx);
            if (!v->local_pad)
                off = checked_offset(x, e, idx, off, memo);
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
        Expr *off = checked_offset(x, e, idx, ir_storage_offset(m, st, idx), memo);
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
            r = div && ir_is_int(e->dtype) ? checked_div(x, e, args) : ir_rebuild(m, e, args);
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

/* An index expression (no reductions) in loop IR; NULL with c->st set. */
static Expr *lower_index(LowerCtx *c, Expr *e) {
    ExprCtx x = {c, {0}, NULL, RV_OK, false};
    Expr *r = lower_expr(&x, e);
    RV_ASSERT(x.pre.len == 0 || x.st != RV_OK);
    vec_free(&x.pre);
    if (x.st != RV_OK && c->st == RV_OK)
        c->st = x.st;
    return r;
}

/* LowerExprFn for the prelude. */
static Expr *lower_index_fn(void *ctx, Expr *e) {
    Expr *r = lower_index(ctx, e);
    RV_ASSERT(r);
    return r;
}

/* Statements computing `value` (with preset nodes) and storing it. */
static Stmt *element_stmt(LowerCtx *c, Buffer *buf, Expr *offset, Expr *value,
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
    default:
        return;
    }
}

static Stmt *wrap_locals(LowerCtx *c, Stmt *s) {
    Module *m = c->m;
    LocalsCtx l = {{0}, {0}, &c->accs};
    collect_locals(s, &l);
    for (int i = l.bufs.len - 1; i >= 0; i--)
        s = lower_alloc(m, l.bufs.data[i], s);
    vec_free(&l.bufs);
    ptrmap_free(&l.declared);
    return s;
}

/* ---- loop nests of stages ---- */

typedef enum SplitState {
    SPLIT_GUARD, /* undecided: guard the body with value < extent */
    SPLIT_FULL,  /* within the full tiles: no check */
    SPLIT_TAIL,  /* the last tile: inner extent E - o*f */
} SplitState;

typedef enum NestMode {
    MODE_TOP,      /* loops before the reduction */
    MODE_ACC,      /* reduction loops updating a local accumulator */
    MODE_IN_PLACE, /* reduction and spatial loops updating the destination */
    MODE_INIT,     /* spatial loops initialising the destination */
} NestMode;

/* The state of one stage's nest while it is generated. Passed by value
 * into each copy of a partitioned loop, so each copy has its own. */
typedef struct Nest {
    Stage *st;
    Expr *base[MAX_IVS];     /* ROOT: origin of the region (attached stages) */
    Expr *root_ext[MAX_IVS]; /* ROOT: extent, once known */
    Expr *value[MAX_IVS];    /* leaves: bound value */
    SplitState state[MAX_IVS];
    int first_red; /* index of the outermost reduction leaf, or nleaves */
    bool in_place;
    NestMode mode;
    /* destination: a tensor's storage or a view */
    const Storage *dst_storage;
    const View *dst_view;
    Buffer *acc, *arg; /* MODE_ACC */
} Nest;

static Expr *iv_extent(LowerCtx *c, Nest *n, const IterVar *v);
static Expr *iv_extent_over(LowerCtx *c, Nest *n, const IterVar *v, const PtrMap *vary);

/* The loop-IR value of v, or NULL while a leaf it needs is unbound. */
static Expr *iv_value(LowerCtx *c, Nest *n, const IterVar *v) {
    Module *m = c->m;
    if (n->value[v->id])
        return n->value[v->id];
    if (v->fused) {
        /* the extent only once the fused loop is bound: it may mention
         * axes bound outside that loop */
        Expr *f = iv_value(c, n, v->fused);
        Expr *eb = f ? iv_extent(c, n, v->fused->fb) : NULL;
        if (!eb)
            return NULL;
        return ir_binary(m, v == v->fused->fa ? EX_DIV : EX_MOD, f, eb);
    }
    if (v->outer) {
        Expr *o = iv_value(c, n, v->outer), *i = iv_value(c, n, v->inner);
        if (!o || !i)
            return NULL;
        return ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, o, ir_int(m, v->inner->factor)), i);
    }
    return NULL;
}

/* The IR axis value of a root: origin + its IterVar value. */
static Expr *root_axis_value(LowerCtx *c, Nest *n, const IterVar *r) {
    Expr *v = iv_value(c, n, r);
    if (!v)
        return NULL;
    return n->base[r->id] ? ir_binary(c->m, EX_ADD, n->base[r->id], v) : v;
}

/* Publishes the value of root r where n is, or that it has none: a value
 * left by another copy of the nest (the init nest of an in-place
 * reduction, a partitioned tail) must not be used where r's loop is not
 * bound. Returns whether r is bound. */
static bool bind_root(LowerCtx *c, Nest *n, const IterVar *r) {
    Expr *v = root_axis_value(c, n, r);
    ptrmap_put(&c->axis_value, r->axis, v ? simp(c, v) : NULL);
    return v != NULL;
}

/* Publishes the values of the roots whose leaves are bound. */
static void bind_axes(LowerCtx *c, Nest *n) {
    Stage *st = n->st;
    for (int i = 0; i < st->ivs.len; i++)
        if (st->ivs.data[i]->rel == IV_ROOT)
            bind_root(c, n, st->ivs.data[i]);
}

static Expr *ceil_div(Module *m, Expr *e, int64_t f) {
    return ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, e, ir_int(m, f - 1)), ir_int(m, f));
}

static bool divides(LowerCtx *c, Expr *e, int64_t f) {
    int64_t v;
    Expr *r = simp(c, ir_binary(c->m, EX_MOD, e, ir_int(c->m, f)));
    return f == 1 || (ir_is_const_int(r, &v) && v == 0);
}

/* The extent of root v (not an attached stage's region) where n is: its
 * axis's extent over the values of the outer axes it mentions (l <
 * len[b]). Without a value for one of them, `vary` (bounds inference: the
 * ranges of the stage's roots outer to v, as infer_region builds them)
 * relaxes it to its largest value over their ranges, an upper bound of
 * every extent v takes in the iterations that remain; without `vary` it
 * has none. */
static Expr *root_extent(LowerCtx *c, Nest *n, const IterVar *v, const PtrMap *vary) {
    Module *m = c->m;
    bool bound = true;
    for (int i = 0; i < n->st->ivs.len; i++) {
        IterVar *r = n->st->ivs.data[i];
        if (r->rel == IV_ROOT && r != v && ir_uses_axis(v->axis->extent, r->axis))
            bound &= bind_root(c, n, r);
    }
    if (!bound && vary) {
        Range r;
        return lower_bounds_range(m, v->axis->extent, vary, false, &r) ? lower_index(c, r.hi)
                                                                        : NULL;
    }
    Expr *e = lower_index(c, v->axis->extent);
    if (!e)
        return NULL;
    /* an outer axis past its end in a guarded tile must not index the UF:
     * the ragged extent is 0 there */
    Expr *g = NULL;
    for (int i = 0; i < n->st->ivs.len; i++) {
        IterVar *w = n->st->ivs.data[i];
        if (!w->outer || n->state[w->id] != SPLIT_GUARD || w == v)
            continue;
        bool outer_axis = false;
        for (int j = 0; j < n->st->ivs.len; j++) {
            IterVar *r = n->st->ivs.data[j];
            if (r->rel == IV_ROOT && r != v && ir_uses_axis(v->axis->extent, r->axis) &&
                sched_iv_derives_from(w, r))
                outer_axis = true;
        }
        Expr *we, *wv;
        if (!outer_axis || !(we = iv_extent(c, n, w)) || !(wv = iv_value(c, n, w)))
            continue;
        Expr *p = simp(c, ir_binary(m, EX_LT, wv, we));
        int64_t t;
        if (!(ir_is_const_int(p, &t) && t))
            g = g ? ir_binary(m, EX_AND, g, p) : p;
    }
    return g ? ir_select(m, g, e, ir_int(m, 0)) : e;
}

/* The extent of v where n is; `vary` as for root_extent. */
static Expr *iv_extent_over(LowerCtx *c, Nest *n, const IterVar *v, const PtrMap *vary) {
    Module *m = c->m;
    switch (v->rel) {
    case IV_ROOT: {
        Expr *e = n->root_ext[v->id];
        if (!e && !(e = root_extent(c, n, v, vary)))
            return NULL;
        if (v->pad > 1)
            e = ir_binary(m, EX_MUL, ceil_div(m, e, v->pad), ir_int(m, v->pad));
        return simp(c, e);
    }
    case IV_OUTER: {
        Expr *e = iv_extent_over(c, n, v->parent, vary);
        if (!e)
            return NULL;
        if (n->state[v->parent->id] == SPLIT_FULL)
            return simp(c, ir_binary(m, EX_DIV, e, ir_int(m, v->factor)));
        return simp(c, ceil_div(m, e, v->factor));
    }
    case IV_INNER: {
        if (n->state[v->parent->id] != SPLIT_TAIL)
            return ir_int(m, v->factor);
        Expr *e = iv_extent_over(c, n, v->parent, vary), *o = iv_value(c, n, v->parent->outer);
        if (!e || !o)
            return NULL;
        return simp(c, ir_binary(m, EX_SUB, e, ir_binary(m, EX_MUL, o, ir_int(m, v->factor))));
    }
    case IV_FUSED: {
        /* an extent below 0 runs no iterations; in a product it must
         * count as 0, not flip the sign of the other */
        Expr *a = iv_extent_over(c, n, v->fa, vary), *b = iv_extent_over(c, n, v->fb, vary);
        if (!a || !b)
            return NULL;
        a = ir_binary(m, EX_MAX, a, ir_int(m, 0));
        b = ir_binary(m, EX_MAX, b, ir_int(m, 0));
        return simp(c, ir_binary(m, EX_MUL, a, b));
    }
    default:
        RV_UNREACHABLE();
    }
}

static Expr *iv_extent(LowerCtx *c, Nest *n, const IterVar *v) {
    return iv_extent_over(c, n, v, NULL);
}

/* The conjunction of the checks of undecided non-dividing splits
 * (spatial ones, reduction ones, or both), or NULL when none is needed. */
static Expr *guards(LowerCtx *c, Nest *n, bool spatial, bool reduce) {
    Module *m = c->m;
    Expr *g = NULL;
    Stage *st = n->st;
    for (int i = 0; i < st->ivs.len; i++) {
        IterVar *v = st->ivs.data[i];
        if (!v->outer || n->state[v->id] != SPLIT_GUARD || (v->reduce ? !reduce : !spatial))
            continue;
        Expr *e = iv_extent(c, n, v), *val = iv_value(c, n, v);
        if (!e || !val || divides(c, e, v->inner->factor))
            continue;
        Expr *p = simp(c, ir_binary(m, EX_LT, val, e));
        int64_t t;
        if (ir_is_const_int(p, &t) && t)
            continue;
        g = g ? ir_binary(m, EX_AND, g, p) : p;
    }
    return g;
}

static Stmt *guarded(LowerCtx *c, Expr *g, Stmt *s) {
    return g && s ? lower_if(c->m, g, s, NULL) : s;
}

/* The destination offset of the current element. */
static Expr *dest_offset(LowerCtx *c, Nest *n) {
    Module *m = c->m;
    Stage *st = n->st;
    Expr *idx[RV_MAX_DIMS];
    for (int d = 0; d < st->t->ndim; d++)
        idx[d] = ptrmap_get(&c->axis_value, st->t->axes[d]);
    if (n->dst_view)
        return view_offset(m, n->dst_view, idx);
    return ir_storage_offset(m, n->dst_storage, idx);
}

static Buffer *dest_buf(Nest *n) {
    return n->dst_view ? n->dst_view->buf : n->dst_storage->buf;
}

/* True when every index of the current element is inside the tensor
 * (local padding of a cache_read: outside it the copy holds zero). */
static Expr *source_in_bounds(LowerCtx *c, Nest *n) {
    Module *m = c->m;
    Stage *st = n->st;
    Expr *g = NULL;
    for (int d = 0; d < st->t->ndim; d++) {
        Expr *v = ptrmap_get(&c->axis_value, st->t->axes[d]);
        Expr *e = lower_index(c, st->source->axes[d]->extent);
        if (!e)
            return NULL;
        Expr *p =
            ir_binary(m, EX_AND, ir_binary(m, EX_GE, v, ir_int(m, 0)), ir_binary(m, EX_LT, v, e));
        g = g ? ir_binary(m, EX_AND, g, p) : p;
    }
    return g ? simp(c, g) : ir_bool(m, true); /* a 0-dim tensor: its one element */
}

/* Does the stage pad one of its loops (its reads may then reach into
 * storage padding, see in_bounds)? */
static bool loop_padded(const Stage *st) {
    for (int i = 0; i < st->ivs.len; i++)
        if (st->ivs.data[i]->rel == IV_ROOT && st->ivs.data[i]->pad > 1)
            return true;
    return false;
}

/* The innermost statement of a nest. */
static Stmt *innermost(LowerCtx *c, Nest *n) {
    Module *m = c->m;
    Stage *st = n->st;
    c->loop_pad = loop_padded(st);
    bind_axes(c, n);
    Buffer *dst = dest_buf(n);
    Expr *off = dest_offset(c, n);
    const Expr *R = st->reduce;
    switch (n->mode) {
    case MODE_INIT:
        return guarded(c, guards(c, n, true, false),
                       lower_store(m, dst, off, reduce_init(m, R->u.red.rk, R->dtype)));
    case MODE_ACC:
    case MODE_IN_PLACE: {
        ExprCtx x = {c, {0}, NULL, RV_OK, true};
        Expr *v = lower_expr(&x, R->args[0]);
        if (x.st != RV_OK) {
            c->st = x.st;
            vec_free(&x.pre);
            return NULL;
        }
        Expr *zero = ir_int(m, 0);
        if (n->mode == MODE_ACC) {
            Expr *first = ptrmap_get(&c->axis_value, R->u.red.axes[0]);
            vec_push(&x.pre, reduce_update(m, R->u.red.rk, n->acc, zero, n->arg, first, v));
        } else {
            vec_push(&x.pre, reduce_update(m, R->u.red.rk, dst, off, NULL, NULL, v));
        }
        Stmt *s = lower_seq(m, x.pre.len, x.pre.data);
        vec_free(&x.pre);
        /* ACC: the spatial checks wrap the whole reduction already */
        /* IN_PLACE: declare the accumulators of nested reductions here (ACC:
         * gen_reduction declares them with its own) */
        if (n->mode == MODE_IN_PLACE)
            s = wrap_locals(c, s);
        return guarded(c, guards(c, n, n->mode == MODE_IN_PLACE, true), s);
    }
    case MODE_TOP:
        break;
    }
    Stmt *s;
    if (st->pred) {
        ExprCtx x = {c, {0}, NULL, RV_OK, true};
        Expr *p = lower_expr(&x, st->pred);
        Stmt *a = p ? element_stmt(c, dst, off, st->body, NULL) : NULL;
        Stmt *b = a ? element_stmt(c, dst, off, st->else_body, NULL) : NULL;
        if (!b) {
            if (c->st == RV_OK)
                c->st = x.st;
            vec_free(&x.pre);
            return NULL;
        }
        /* the predicate's checks, then the branch it chooses */
        vec_push(&x.pre, lower_if(m, p, a, b));
        s = lower_seq(m, x.pre.len, x.pre.data);
        vec_free(&x.pre);
    } else if (st->kind == STAGE_CACHE_READ && st->local_pad) {
        Stmt *a = element_stmt(c, dst, off, st->body, NULL);
        Expr *inb = source_in_bounds(c, n);
        if (!a || !inb)
            return NULL;
        s = lower_if(m, inb, a, lower_store(m, dst, off, ir_cast(m, st->t->dtype, ir_int(m, 0))));
    } else {
        if (!(s = element_stmt(c, dst, off, st->body, NULL)))
            return NULL;
    }
    return guarded(c, guards(c, n, true, true), wrap_locals(c, s));
}

static Stmt *gen(LowerCtx *c, Nest n, int i);
static Stmt *emit_attached(LowerCtx *c, Nest *n, const IterVar *at, int i);

/* The reduction starts at leaf i: an accumulator or an in-place init. */
static Stmt *gen_reduction(LowerCtx *c, Nest n, int i) {
    Module *m = c->m;
    Stage *st = n.st;
    const Expr *R = st->reduce;
    if (n.in_place) {
        Nest init = n;
        init.mode = MODE_INIT;
        Stmt *a = gen(c, init, i);
        n.mode = MODE_IN_PLACE;
        Stmt *b = gen(c, n, i);
        if (!a || !b)
            return NULL;
        Stmt *both[2] = {a, b};
        return lower_seq(m, 2, both);
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
    Stmt *loops = gen(c, n, i);
    if (!loops)
        return NULL;
    Expr *zero = ir_int(m, 0);
    c->loop_pad = loop_padded(st);
    bind_axes(c, &n);
    PtrMap preset = {0};
    ptrmap_put(&preset, R, ir_load(m, n.arg ? n.arg : n.acc, zero));
    Stmt *fin = element_stmt(c, dest_buf(&n), dest_offset(c, &n), st->body, &preset);
    ptrmap_free(&preset);
    if (!fin)
        return NULL;
    Stmt *parts[4] = {lower_store(m, n.acc, zero, reduce_init(m, R->u.red.rk, R->args[0]->dtype)),
                      NULL, loops, fin};
    if (n.arg)
        parts[1] = lower_store(m, n.arg, zero, ir_int(m, -1));
    Stmt *s = wrap_locals(c, lower_seq(m, 4, parts));
    return guarded(c, guards(c, &n, true, false), s);
}

/* A leaf loop whose variable is `var` over `ext`, around the rest. */
static Stmt *gen_loop(LowerCtx *c, Nest n, int i, Expr *ext) {
    Module *m = c->m;
    IterVar *v = n.st->leaves.data[i];
    LoopKind k = v->kind;
    if (k == LOOP_PARALLEL && c->par_depth > 0)
        k = LOOP_SERIAL; /* a parallel loop inside another runs serially */
    Axis *var = lower_loop_var(m, v->name, ext);
    n.value[v->id] = var->var;
    c->par_depth += k == LOOP_PARALLEL;
    Stmt *body = emit_attached(c, &n, v, i + 1);
    c->par_depth -= k == LOOP_PARALLEL;
    if (!body)
        return NULL;
    return lower_for(m, var, ext, k, body);
}

static Stmt *gen(LowerCtx *c, Nest n, int i) {
    Module *m = c->m;
    Stage *st = n.st;
    if (c->st != RV_OK)
        return NULL;
    if (n.mode == MODE_TOP && st->reduce && i == n.first_red)
        return gen_reduction(c, n, i);
    if (i == st->leaves.len)
        return innermost(c, &n);
    IterVar *v = st->leaves.data[i];
    if (n.mode == MODE_INIT && v->reduce)
        return gen(c, n, i + 1);
    /* partition a non-dividing split at its outer loop */
    IterVar *p = v->rel == IV_OUTER ? v->parent : NULL;
    int64_t pf = p ? v->factor : 0;
    if (p && n.mode != MODE_INIT && p->tail == TAIL_PARTITION && n.state[p->id] == SPLIT_GUARD) {
        int j;
        for (j = i + 1; j < st->leaves.len && st->leaves.data[j] != p->inner; j++)
            ;
        Expr *e = iv_extent(c, &n, p);
        if (!e)
            return NULL;
        if (j < st->leaves.len && !divides(c, e, pf)) {
            Nest full = n, tail = n;
            full.state[p->id] = SPLIT_FULL;
            Stmt *a = gen_loop(c, full, i, iv_extent(c, &full, v));
            tail.state[p->id] = SPLIT_TAIL;
            Expr *last = simp(c, ir_binary(m, EX_DIV, e, ir_int(m, pf)));
            tail.value[v->id] = last;
            Stmt *b = emit_attached(c, &tail, v, i + 1);
            if (!a || !b)
                return NULL;
            Expr *has_tail =
                simp(c, ir_binary(m, EX_GT, ir_binary(m, EX_MOD, e, ir_int(m, pf)), ir_int(m, 0)));
            Stmt *both[2] = {a, lower_if(m, has_tail, b, NULL)};
            return lower_seq(m, 2, both);
        }
    }
    Expr *ext = iv_extent(c, &n, v);
    if (!ext)
        return NULL;
    return gen_loop(c, n, i, ext);
}

/* ---- attached stages: region, buffer, nest ---- */

static void no_loops_fn(const Expr *e, void *ctx) {
    if ((e->kind == EX_VAR && e->u.axis->kind != AX_LOOP) || e->kind == EX_LOAD ||
        (e->kind == EX_VAR && e->u.axis->kind == AX_LOOP))
        *(bool *)ctx = false;
}

/* True when e is over sizes and constants only. */
static bool sizes_only(const Expr *e) {
    bool ok = true;
    ir_visit(e, no_loops_fn, &ok);
    return ok;
}

/* The range of v's value when leaves bound in n are fixed and the others
 * run over their extents (relaxed over `vary`, the ranges of the roots
 * outer to v, where they mention axes not bound here). */
static bool iv_range(LowerCtx *c, Nest *n, const IterVar *v, bool clip, const PtrMap *vary,
                     Range *out) {
    Module *m = c->m;
    Expr *val = iv_value(c, n, v);
    if (val) {
        out->lo = out->hi = simp(c, val);
        return true;
    }
    if (v->outer) {
        Range o, i;
        if (!iv_range(c, n, v->outer, clip, vary, &o) ||
            !iv_range(c, n, v->inner, clip, vary, &i))
            return false;
        Expr *f = ir_int(m, v->inner->factor);
        out->lo = simp(c, ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, o.lo, f), i.lo));
        out->hi = ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, o.hi, f), i.hi);
        if (clip && n->state[v->id] == SPLIT_GUARD) {
            Expr *e = iv_extent_over(c, n, v, vary);
            if (!e)
                return false;
            out->hi = ir_binary(m, EX_MIN, out->hi, ir_binary(m, EX_SUB, e, ir_int(m, 1)));
        }
        out->hi = simp(c, out->hi);
        return true;
    }
    /* an unbound leaf or fused part: its whole extent (a whole tile, even
     * the last one, for a padded reader) */
    Expr *e = !clip && v->rel == IV_INNER ? ir_int(m, v->factor) : iv_extent_over(c, n, v, vary);
    if (!e)
        return false;
    out->lo = ir_int(m, 0);
    out->hi = simp(c, ir_binary(m, EX_SUB, e, ir_int(m, 1)));
    return true;
}

typedef struct ReadIdx {
    const Tensor *t;
    Vec(Expr *) reads; /* READ nodes of t */
} ReadIdx;

static void find_reads(const Expr *e, void *ctx) {
    ReadIdx *r = ctx;
    if (e->kind == EX_READ && e->u.tensor == r->t)
        vec_push(&r->reads, (Expr *)e);
}

/* The union over the reads of p in stage `reader` of their index ranges
 * when the reader's axes range as `vary` says. */
static bool reads_region(LowerCtx *c, const Stage *reader, const Stage *p, const PtrMap *vary,
                         Range *reg) {
    Module *m = c->m;
    ReadIdx ri = {p->t, {0}};
    ir_visit(reader->body, find_reads, &ri);
    ir_visit(reader->pred, find_reads, &ri);
    ir_visit(reader->else_body, find_reads, &ri);
    bool ok = ri.reads.len > 0;
    for (int d = 0; d < p->t->ndim && ok; d++) {
        reg[d].lo = reg[d].hi = NULL;
        for (int k = 0; k < ri.reads.len && ok; k++) {
            Range r;
            ok = lower_bounds_range(m, ri.reads.data[k]->args[d], vary, false, &r);
            if (!ok)
                break;
            reg[d].lo = reg[d].lo ? ir_binary(m, EX_MIN, reg[d].lo, r.lo) : r.lo;
            reg[d].hi = reg[d].hi ? ir_binary(m, EX_MAX, reg[d].hi, r.hi) : r.hi;
        }
    }
    vec_free(&ri.reads);
    return ok;
}

static bool infer_region(LowerCtx *c, Nest *n, Stage *p, bool clip, Range *reg);

/* The region of p that `reader` reads in the remaining iterations of
 * n->st: n->st itself, or a stage computed inside it (at a loop of n->st
 * or, further down, inside another such stage), whose own region here
 * bounds its axes. */
static bool reader_region(LowerCtx *c, Nest *n, Stage *reader, Stage *p, bool clip, Range *reg) {
    Module *m = c->m;
    Stage *st = n->st;
    if (reader != st) {
        /* p is computed at a loop of st outside its reader: bound the
         * reader's region here, then p's region within it */
        if (reader->attach != ATTACH_AT)
            return false;
        Range rr[RV_MAX_DIMS];
        /* a region bounds inference cannot tell: attach_one computes the
         * whole tensor (a padded reader is rejected there) */
        bool whole = !infer_region(c, n, reader, clip && !reader->local_pad, rr);
        if (whole && reader->local_pad)
            return false;
        PtrMap vary = {0};
        for (int d = 0; d < reader->t->ndim; d++) {
            Expr *full = lower_index(c, reader->t->axes[d]->extent);
            if (!full)
                return false;
            if (whole) {
                rr[d].lo = ir_int(m, 0);
                rr[d].hi = ir_binary(m, EX_SUB, full, ir_int(m, 1));
            }
            rr[d].lo = simp(c, rr[d].lo);
            rr[d].hi = simp(c, rr[d].hi);
            if (clip && !reader->local_pad) {
                rr[d].lo = simp(c, ir_binary(m, EX_MAX, rr[d].lo, ir_int(m, 0)));
                rr[d].hi = simp(
                    c, ir_binary(m, EX_MIN, rr[d].hi, ir_binary(m, EX_SUB, full, ir_int(m, 1))));
            }
            ptrmap_put(&vary, reader->t->axes[d], &rr[d]);
        }
        bool ok = reads_region(c, reader, p, &vary, reg);
        ptrmap_free(&vary);
        return ok;
    }
    PtrMap vary = {0};
    Range *rs = arena_alloc(m->arena, sizeof(Range) * (size_t)(st->ivs.len + 1));
    bool ok = true;
    for (int i = 0; i < st->ivs.len && ok; i++) {
        IterVar *r = st->ivs.data[i];
        if (r->rel != IV_ROOT)
            continue;
        ok = iv_range(c, n, r, clip, &vary, &rs[i]);
        if (ok && n->base[r->id]) {
            rs[i].lo = simp(c, ir_binary(m, EX_ADD, n->base[r->id], rs[i].lo));
            rs[i].hi = simp(c, ir_binary(m, EX_ADD, n->base[r->id], rs[i].hi));
        }
        ptrmap_put(&vary, r->axis, &rs[i]);
    }
    ok = ok && reads_region(c, st, p, &vary, reg);
    ptrmap_free(&vary);
    return ok;
}

/* The region of p that stage n->st's remaining iterations read: the union
 * over p's readers (the schedule checker made each n->st or a stage
 * computed inside it: layernorm's row mean, read by the variance and the
 * output, both at the row loop). */
static bool infer_region(LowerCtx *c, Nest *n, Stage *p, bool clip, Range *reg) {
    Module *m = c->m;
    bool any = false;
    for (int k = 0; k < c->s->stages.len; k++) {
        Stage *r = c->s->stages.data[k];
        if (r->t == p->t || r->attach == ATTACH_INLINE || !sched_stage_reads_tensor(r, p->t))
            continue;
        Range rr[RV_MAX_DIMS];
        if (!reader_region(c, n, r, p, clip, rr))
            return false;
        for (int d = 0; d < p->t->ndim; d++) {
            reg[d].lo = any ? ir_binary(m, EX_MIN, reg[d].lo, rr[d].lo) : rr[d].lo;
            reg[d].hi = any ? ir_binary(m, EX_MAX, reg[d].hi, rr[d].hi) : rr[d].hi;
        }
        any = true;
    }
    return any;
}

static Stmt *stage_nest(LowerCtx *c, Stage *st, Expr *const *origin, Expr *const *ext,
                        const View *view);

/* A schedule error; about stage p computed at a loop (p may be NULL), it
 * is located at the step that placed p (`ravel check` lowers the schedule
 * and reports it there: only bounds inference can tell). */
static Stmt *schedule_verror(LowerCtx *c, const Stage *p, const char *fmt, va_list ap) {
    if (c->st != RV_OK)
        return NULL;
    Buf b = {0};
    buf_vprintf(&b, fmt, ap);
    if (p && p->at_step)
        c->st = base_diag(RV_ERR_SCHEDULE, p->at_src ? p->at_src : c->m->src, p->at_step->loc,
                          "%s: %s", p->at_step->prim, buf_str(&b));
    else
        c->st = base_error(RV_ERR_SCHEDULE, "%s", buf_str(&b));
    buf_free(&b);
    return NULL;
}

static Stmt *sched_error(LowerCtx *c, const char *fmt, ...) RV_PRINTF(2, 3);
static Stmt *sched_error(LowerCtx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    schedule_verror(c, NULL, fmt, ap);
    va_end(ap);
    return NULL;
}

static Stmt *stage_error(LowerCtx *c, const Stage *p, const char *fmt, ...) RV_PRINTF(3, 4);
static Stmt *stage_error(LowerCtx *c, const Stage *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    schedule_verror(c, p, fmt, ap);
    va_end(ap);
    return NULL;
}

/* A padded stage computes whole tiles: each read it makes must stay inside
 * the tensor read for every element of the tile, either because it reads
 * a padded copy made inside it, or because bounds prove the index inside. */
typedef struct PadReads {
    LowerCtx *c;
    const Stage *p;
    const PtrMap *vary;
    const char *bad;
    bool bad_uf; /* bad names a ufun, which no cache_read can pad */
} PadReads;

static bool provably_lt(LowerCtx *c, Expr *a, Expr *b) {
    int64_t v;
    Expr *t = simp(c, ir_binary(c->m, EX_LT, a, b));
    return ir_is_const_int(t, &v) && v;
}

/* Is index d of a read of a tensor or UF (its axes, the read's indices)
 * inside its extent for every element of the tile? An extent over outer
 * axes (l < len[b]) is taken at the read's outer indices, at its least
 * over the tile. */
static bool index_inside(PadReads *pr, Axis *const *axes, Expr *const *args, int d) {
    Module *m = pr->c->m;
    if (!axes[d]->extent)
        return false;
    PtrMap at = {0};
    for (int j = 0; j < d; j++)
        ptrmap_put(&at, axes[j], args[j]);
    Expr *ext = ir_substitute(m, axes[d]->extent, &at);
    ptrmap_free(&at);
    Range r, e;
    return ext && lower_bounds_range(m, args[d], pr->vary, false, &r) &&
           lower_bounds_range(m, ext, pr->vary, false, &e) &&
           provably_lt(pr->c, ir_int(m, -1), r.lo) && provably_lt(pr->c, r.hi, e.lo);
}

static void pad_reads_fn(const Expr *e, void *ctx) {
    PadReads *pr = ctx;
    if (pr->bad)
        return;
    if (e->kind == EX_UFCALL) {
        /* a UF indexed past the end of the tile would be read out of range */
        for (int d = 0; d < e->n && !pr->bad; d++)
            if (!index_inside(pr, e->u.uf->args, e->args, d)) {
                pr->bad = e->u.uf->name;
                pr->bad_uf = true;
            }
        return;
    }
    if (e->kind != EX_READ)
        return;
    const Stage *src = sched_stage_of(pr->c->s, e->u.tensor);
    if (src && src->kind == STAGE_CACHE_READ && src->local_pad && src->attach == ATTACH_AT &&
        src->at == pr->p)
        return;
    for (int d = 0; d < e->n && !pr->bad; d++)
        if (!index_inside(pr, e->u.tensor->axes, e->args, d))
            pr->bad = e->u.tensor->name;
}

static const char *padded_reads_outside(LowerCtx *c, const Stage *p, Expr *const *origin,
                                        Expr *const *ext, bool *is_uf) {
    Module *m = c->m;
    PtrMap vary = {0};
    Range rs[RV_MAX_DIMS];
    for (int d = 0; d < p->t->ndim; d++) {
        rs[d].lo = origin[d];
        rs[d].hi =
            simp(c, ir_binary(m, EX_SUB, ir_binary(m, EX_ADD, origin[d], ext[d]), ir_int(m, 1)));
        ptrmap_put(&vary, p->t->axes[d], &rs[d]);
    }
    PadReads pr = {c, p, &vary, NULL, false};
    ir_visit(p->body, pad_reads_fn, &pr);
    ptrmap_free(&vary);
    *is_uf = pr.bad_uf;
    return pr.bad;
}

/* Does every reader of the padded copy p read only inside its tensor? Not
 * a stage that computes whole tiles (a padded cache_write stage, or one
 * with a padded loop): its reads past the end of a tile are meant to find
 * the copy's zeros. The others read what the program reads. */
static bool copy_read_inside(LowerCtx *c, const Stage *p) {
    if (p->kind != STAGE_CACHE_READ)
        return false;
    for (int k = 0; k < c->s->stages.len; k++) {
        const Stage *r = c->s->stages.data[k];
        if (r->t == p->t || r->attach == ATTACH_INLINE || !sched_stage_reads_tensor(r, p->t))
            continue;
        if ((r->local_pad && r->kind != STAGE_CACHE_READ) || loop_padded(r))
            return false;
    }
    return true;
}

/* Stage p computed here, in reader n: its buffer (a view for the reader)
 * and its nest, allocated around `rest`. */
static Stmt *attach_one(LowerCtx *c, Nest *n, Stage *p, Stmt *rest_placeholder, Buffer **buf_out) {
    (void)rest_placeholder;
    Module *m = c->m;
    Range reg[RV_MAX_DIMS];
    bool have = infer_region(c, n, p, !p->local_pad, reg);
    if (c->st != RV_OK)
        return NULL;
    int nd = p->t->ndim;
    Expr *origin[RV_MAX_DIMS], *ext[RV_MAX_DIMS], *alloc[RV_MAX_DIMS];
    /* A padded copy whose readers read only inside the tensor need not
     * hold more of it than the tensor: where its tile cannot be bounded,
     * or could be larger than the tensor ever is (a tile of every outer
     * split, 1000 x 1000 for a 15 x 15 input), it is clamped to the
     * tensor (`clamped`), and the reads of it are then checked against
     * the tensor as those of an unpadded copy. */
    bool inside = p->local_pad && copy_read_inside(c, p), clamped = false;
    for (int d = 0; d < nd; d++) {
        Expr *full = lower_index(c, p->t->axes[d]->extent);
        if (!full)
            return NULL;
        if (!have) {
            if (p->local_pad && !inside)
                return stage_error(c, p, "cannot bound the tile of %s that %s reads", p->name,
                                   n->st->name);
            clamped = p->local_pad;
            /* the whole tensor */
            origin[d] = ir_int(m, 0);
            ext[d] = alloc[d] = full;
            continue;
        }
        Expr *lo = simp(c, reg[d].lo), *hi = simp(c, reg[d].hi);
        Expr *span = simp(c, ir_binary(m, EX_ADD, ir_binary(m, EX_SUB, hi, lo), ir_int(m, 1)));
        if (p->local_pad) {
            origin[d] = lo;
            ext[d] = span;
        } else {
            origin[d] = simp(c, ir_binary(m, EX_MAX, lo, ir_int(m, 0)));
            Expr *top = ir_binary(m, EX_MIN, hi, ir_binary(m, EX_SUB, full, ir_int(m, 1)));
            ext[d] = ir_binary(m, EX_ADD, ir_binary(m, EX_SUB, top, origin[d]), ir_int(m, 1));
        }
        /* a region the reader reads nothing of (all of it clipped away, or
         * hi < lo) is empty, not negative: the product of two negative
         * extents (a fused loop, the tile's size) would be positive */
        ext[d] = simp(c, ir_binary(m, EX_MAX, ext[d], ir_int(m, 0)));
        Expr *ub = lower_bounds_upper(m, span);
        ub = ub ? simp(c, ub) : NULL;
        Expr *fub = inside ? lower_bounds_upper(m, full) : NULL;
        fub = fub ? simp(c, fub) : NULL;
        if (fub && sizes_only(fub) && sizes_only(full) &&
            (!ub || !sizes_only(ub) || provably_lt(c, fub, ub))) {
            /* the part of the tile inside the tensor, in a window of at
             * most the tensor's extent within the tile: the whole tile
             * where it is no larger than the tensor */
            Expr *e = simp(c, ir_binary(m, EX_MAX, ir_binary(m, EX_MIN, span, full), ir_int(m, 0)));
            Expr *last = ir_binary(m, EX_SUB, ir_binary(m, EX_ADD, hi, ir_int(m, 1)), e);
            origin[d] = simp(
                c, ir_binary(m, EX_MIN, ir_binary(m, EX_MAX, lo, ir_int(m, 0)), last));
            ext[d] = e;
            alloc[d] = simp(c, ir_binary(m, EX_MAX, fub, ir_int(m, 0)));
            clamped = true;
            continue;
        }
        if (!ub || !sizes_only(ub)) {
            if (p->local_pad || !sizes_only(full))
                return stage_error(c, p, "cannot bound the tile of %s that %s reads", p->name,
                                   n->st->name);
            ub = full;
        } else if (!p->local_pad) {
            int64_t a, b;
            if (ir_is_const_int(ub, &a) && ir_is_const_int(full, &b) && b < a)
                ub = full;
        }
        alloc[d] = simp(c, ir_binary(m, EX_MAX, ub, ir_int(m, 0)));
    }
    /* region bounds may hold UF applications: make them loop IR (i64) */
    for (int d = 0; d < nd; d++) {
        origin[d] = lower_index(c, origin[d]);
        ext[d] = lower_index(c, ext[d]);
        alloc[d] = lower_index(c, alloc[d]);
        if (!origin[d] || !ext[d] || !alloc[d])
            return NULL;
        origin[d] = simp(c, ir_cast(m, RV_I64, origin[d]));
        ext[d] = simp(c, ir_cast(m, RV_I64, ext[d]));
        alloc[d] = simp(c, ir_cast(m, RV_I64, alloc[d]));
    }
    int inner = nd ? p->order[nd - 1] : 0; /* the innermost dimension in storage */
    if (nd && p->align > 1)
        alloc[inner] =
            simp(c, ir_binary(m, EX_MUL, ceil_div(m, alloc[inner], p->align), ir_int(m, p->align)));
    if (p->local_pad && p->kind != STAGE_CACHE_READ) {
        bool is_uf;
        const char *bad = padded_reads_outside(c, p, origin, ext, &is_uf);
        if (bad && is_uf)
            return stage_error(c, p,
                               "%s computes whole tiles (pad=1), which would read ufun '%s' "
                               "outside its domain (a ufun cannot be padded: drop pad=1)",
                               p->name, bad);
        if (bad)
            return stage_error(c, p,
                               "%s computes whole tiles (pad=1), which would read %s outside its "
                               "bounds; add `cache_read(%s, pad=1)` to the schedule of %s and "
                               "compute it at a loop of %s",
                               p->name, bad, bad, p->name, p->name);
    }
    View *v = arena_alloc(m->arena, sizeof(View));
    v->ndim = nd;
    Expr *size = ir_int(m, 1);
    for (int k = nd - 1; k >= 0; k--) {
        int d = p->order[k]; /* storage order, innermost last */
        v->lo[d] = origin[d];
        v->stride[d] = size;
        size = simp(c, ir_binary(m, EX_MUL, size, alloc[d]));
    }
    int64_t elems;
    BufScope scope = ir_is_const_int(size, &elems) &&
                             elems * (int64_t)rv_dtype_size(p->t->dtype) <= LOCAL_STACK_BYTES
                         ? BUF_LOCAL
                         : BUF_GLOBAL;
    v->buf = ir_buffer_new(m, p->name, p->t->dtype, size, scope);
    v->local_pad = p->local_pad && !clamped;
    ptrmap_put(&c->views, p->t, v);
    *buf_out = v->buf;
    return stage_nest(c, p, origin, ext, v);
}

static Stmt *emit_attached(LowerCtx *c, Nest *n, const IterVar *at, int i) {
    Module *m = c->m;
    if (c->st != RV_OK)
        return NULL;
    if (n->mode == MODE_INIT) /* producers are computed for the update nest only */
        return gen(c, *n, i);
    bind_axes(c, n);
    Vec(Stmt *) nests = {0};
    Vec(Buffer *) bufs = {0};
    for (int k = 0; k < c->s->stages.len; k++) {
        Stage *p = c->s->stages.data[k];
        if (p->attach != ATTACH_AT || p->at != n->st || p->at_iv != at)
            continue;
        Buffer *b = NULL;
        Stmt *s = attach_one(c, n, p, NULL, &b);
        if (!s) {
            vec_free(&nests);
            vec_free(&bufs);
            return NULL;
        }
        vec_push(&nests, s);
        vec_push(&bufs, b);
        bind_axes(c, n); /* the producer's nest rebinds nothing of ours, but be sure */
    }
    Stmt *rest = gen(c, *n, i);
    for (int k = nests.len - 1; rest && k >= 0; k--) {
        Stmt *both[2] = {nests.data[k], rest};
        rest = lower_alloc(m, bufs.data[k], lower_seq(m, 2, both));
    }
    vec_free(&nests);
    vec_free(&bufs);
    return rest;
}

/* The nest of stage st: over its whole tensor (origin NULL), or over a
 * region of it into a view. */
static Stmt *stage_nest(LowerCtx *c, Stage *st, Expr *const *origin, Expr *const *ext,
                        const View *view) {
    if (st->ivs.len > MAX_IVS)
        return sched_error(c, "%s has more than %d loops", st->name, MAX_IVS);
    Nest n;
    memset(&n, 0, sizeof n);
    n.st = st;
    n.mode = MODE_TOP;
    n.dst_view = view;
    if (!view) {
        Storage *sto;
        if ((c->st = storage_of_tensor(c, st->t, &sto)) != RV_OK)
            return NULL;
        n.dst_storage = sto;
    }
    for (int i = 0; i < st->ivs.len; i++) {
        IterVar *r = st->ivs.data[i];
        if (r->rel == IV_ROOT && !r->reduce && origin) {
            n.base[r->id] = origin[r->axis->pos];
            n.root_ext[r->id] = ext[r->axis->pos];
        }
    }
    n.first_red = st->leaves.len;
    for (int i = 0; i < st->leaves.len; i++)
        if (st->leaves.data[i]->reduce) {
            n.first_red = i;
            break;
        }
    for (int i = n.first_red; i < st->leaves.len; i++)
        n.in_place |= !st->leaves.data[i]->reduce;
    return emit_attached(c, &n, NULL, 0);
}

/* ---- kernels ---- */

static void kernel_begin(LowerCtx *c) {
    Module *m = c->m;
    c->params.len = 0;
    c->sites.len = 0;
    ptrmap_free(&c->used_bufs);
    ptrmap_free(&c->axis_value);
    ptrmap_free(&c->views);
    c->par_depth = 0;
    for (int i = 0; i < m->sizes.len; i++) {
        Param p = {.kind = PARAM_SIZE, .size = m->sizes.data[i]};
        vec_push(&c->params, p);
    }
}

static Stmt *extern_call(LowerCtx *c, Tensor *t) {
    Op *op = t->op;
    Storage *ost;
    if ((c->st = storage_of_tensor(c, t, &ost)) != RV_OK)
        return NULL;
    Buffer *args[RV_MAX_DIMS + 1];
    if (op->nin > RV_MAX_DIMS)
        return sched_error(c, "extern '%s' has too many arguments", t->name);
    args[0] = ost->buf;
    for (int i = 0; i < op->nin; i++) {
        Storage *is;
        if ((c->st = storage_of_tensor(c, op->inputs[i], &is)) != RV_OK)
            return NULL;
        use_storage(c, is, PARAM_TENSOR);
        args[i + 1] = is->buf;
    }
    use_storage(c, ost, PARAM_TENSOR);
    return lower_call(c->m, op->kernel, op->nin + 1, args, t);
}

static rv_status lower_stage_kernel(LowerCtx *c, Stage *st, Kernel **out) {
    Module *m = c->m;
    kernel_begin(c);
    Stmt *body;
    if (st->t->op->kind == OP_EXTERN) {
        body = extern_call(c, st->t);
    } else {
        body = stage_nest(c, st, NULL, NULL, NULL);
        if (body) {
            Storage *sto;
            storage_of_tensor(c, st->t, &sto);
            use_storage(c, sto, PARAM_TENSOR);
        }
    }
    /* every failure below sets c->st; one that does not is a bug of the
     * lowering, not of the user's schedule */
    if (!body)
        return c->st != RV_OK ? c->st
                              : base_error(RV_ERR_UNSUPPORTED,
                                           "internal error: lowering %s failed without a diagnosis",
                                           st->name);
    Kernel *k = arena_alloc(m->arena, sizeof(Kernel));
    k->name = st->t->name;
    k->m = m;
    /* the prelude fills every AUX array this kernel uses */
    Vec(Stmt *) pre = {0};
    for (int i = 0; i < m->ufuns.len; i++) {
        Storage *s = ptrmap_get(&c->storage, m->ufuns.data[i]);
        if (s && ptrmap_has(&c->used_bufs, s->buf))
            vec_push(&pre, lower_storage_prelude(m, s, lower_index_fn, c));
    }
    for (int i = 0; i < m->tensors.len; i++) {
        Storage *s = ptrmap_get(&c->storage, m->tensors.data[i]);
        if (s && ptrmap_has(&c->used_bufs, s->buf))
            vec_push(&pre, lower_storage_prelude(m, s, lower_index_fn, c));
    }
    k->prelude = lower_seq(m, pre.len, pre.data);
    vec_free(&pre);
    k->body = body; /* lower_pipeline (pipeline.c) simplifies it */
    k->nparams = c->params.len;
    k->params = arena_memdup(m->arena, c->params.data, sizeof(Param) * (size_t)c->params.len);
    k->nsites = c->sites.len;
    k->sites = c->sites.len ? arena_memdup(m->arena, c->sites.data,
                                           sizeof(const char *) * (size_t)c->sites.len)
                            : NULL;
    *out = k;
    return RV_OK;
}

rv_status lower_schedule(Schedule *s, Kernel ***out, int *n) {
    Module *m = s->m;
    LowerCtx c = {.m = m, .s = s};
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
        Stage *sg = sched_stage_of(s, t);
        RV_ASSERT(sg);
        if (sg->attach != ATTACH_ROOT)
            continue;
        Kernel *k = NULL;
        if ((st = lower_stage_kernel(&c, sg, &k)) == RV_OK)
            vec_push(&ks, k);
    }
    vec_free(&c.params);
    vec_free(&c.sites);
    ptrmap_free(&c.used_bufs);
    ptrmap_free(&c.axis_value);
    ptrmap_free(&c.views);
    ptrmap_free(&c.storage);
    ptrmap_free(&c.accs);
    if (st != RV_OK) {
        vec_free(&ks);
        return st;
    }
    /* the kernels live in the module's arena; the array is the caller's */
    *out = ks.data;
    *n = ks.len;
    return RV_OK;
}

rv_status lower_module(Module *m, Kernel ***out, int *n) {
    Schedule *s;
    rv_status st = sched_from_module(m, &s);
    if (st != RV_OK)
        return st;
    st = lower_schedule(s, out, n);
    sched_free(s);
    return st;
}
