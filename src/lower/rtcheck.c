/*
 * rtcheck.c — run-time checks: the checks pass, and the safe indices of
 * what the schedule evaluates.
 *
 * A read in a value the definition computes gets the condition that its
 * indices lie in the tensor's (or UF's) extents, and an integer division
 * the condition that its divisor is neither 0 nor -1 under the smallest
 * dividend; a condition the declared ranges do not already prove becomes
 * `if !ok: fail N` before the statement that uses it, with the read at
 * the origin or the division by 1 where it fails, so a kernel never reads
 * out of bounds nor traps. The simplifier drops the checks that the loop
 * context proves (all of them in the examples).
 *
 * The checks pass (lower_checks). Requires: a kernel body, before
 * flatten, whose reads in values are multi-dimensional accesses X{i, j}
 * (expr.c), the UF arrays their extents apply being parameters;
 * Kernel.check_src names the integer divisions of values and says what
 * each access and division stands for (the message; whether its stage
 * pads a loop, so that its reads of padded dimensions may reach their
 * padded extent), an access it does not name being its own message.
 * Guarantees: every access gets its check, its indices select(ok, i, 0)
 * where the declared ranges and the loops' extents do not prove ok; every
 * division named its check, its divisor select(ok, b, 1) likewise; the
 * conditions read UFs flat, as the flattened code will; the FAILs of a
 * statement's expressions before it, in evaluation order, one new site
 * (Kernel.sites) each, a subexpression checked once per statement and
 * once for an if's condition and its branches; all sites, the lowering's
 * (views) too, numbered in statement order. A loop's extent, an if's
 * condition and a let's value are checked like a stored value, before
 * their statement. Kernel.check_src is consumed: a second run adds
 * nothing.
 *
 * What the schedule evaluates (its loops' extents, guards, regions, the
 * prelude) is lowered flat by expr.c: its reads and divisions get only
 * the safe offset or divisor here (lower_read_guard, lower_checked_div,
 * unchecked contexts): the host computes the layouts before any kernel
 * runs, ravel check proves the UF arguments it can, and a tile past the
 * end may evaluate an extent it does not use. A read of a view (a stage
 * computed at a loop, attach.c) is checked where it is lowered: only the
 * nest knows the view.
 */
#include "lower/lower.h"

/* The message of a site: `what` with e's text. */
static const char *site_message(Module *m, const char *what, const Expr *e) {
    char *s = ir_expr_str(e);
    const char *r = arena_printf(m->arena, what, s);
    base_free(s);
    return r;
}

/* Does the simplified *ok hold by the declared ranges? */
static bool proven(Module *m, Expr **ok) {
    int64_t v;
    *ok = ir_simplify_expr(m, *ok);
    return ir_is_const_int(*ok, &v) && v;
}

static Stmt *fail_unless(Module *m, Expr *ok, int site) {
    return lower_if(m, ir_unary(m, EX_NOT, ok), lower_fail(m, site), NULL);
}

/* ok && 0 <= idx < ext, the extent of a padded dimension rounded up to
 * its pad when the stage pads a loop (every read along it is of a
 * dimension stored padded for it). */
static Expr *and_in_range(Module *m, Expr *ok, Expr *idx, Expr *ext, int pad, bool loop_pad) {
    if (loop_pad && pad > 1)
        ext = ir_binary(
            m, EX_MUL,
            ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, ext, ir_int(m, pad - 1)), ir_int(m, pad)),
            ir_int(m, pad));
    Expr *p = ir_binary(m, EX_AND, ir_binary(m, EX_GE, idx, ir_int(m, 0)),
                        ir_binary(m, EX_LT, idx, ext));
    return ok ? ir_binary(m, EX_AND, ok, p) : p;
}

/* The condition that a / b of dtype t neither divides by 0 nor overflows. */
static Expr *div_ok(Module *m, rv_dtype t, Expr *a, Expr *b) {
    return ir_binary(
        m, EX_AND, ir_binary(m, EX_NE, b, ir_const_int(m, b->dtype, 0)),
        ir_binary(m, EX_OR, ir_binary(m, EX_NE, b, ir_const_int(m, b->dtype, -1)),
                  ir_binary(m, EX_NE, a,
                            ir_const_int(m, a->dtype, t == RV_I32 ? INT32_MIN : INT64_MIN))));
}

/* The extent of dimension d of read or UF application e at e's outer
 * indices (as e has them). */
static Expr *extent_at(Module *m, const Expr *e, int d) {
    Axis *const *axes = e->kind == EX_READ ? e->u.tensor->axes : e->u.uf->args;
    PtrMap outer = {0};
    for (int i = 0; i < d; i++)
        ptrmap_put(&outer, axes[i], e->args[i]);
    Expr *ext = ir_substitute(m, axes[d]->extent, &outer);
    ptrmap_free(&outer);
    return ext;
}

bool lower_is_int_div(const Expr *e) {
    return (e->kind == EX_DIV || e->kind == EX_MOD || e->kind == EX_FLOORDIV ||
            e->kind == EX_FLOORMOD) &&
           ir_is_int(e->dtype);
}

static const char *const read_what = "read %s out of bounds";
static const char *const uf_what = "ufun application %s outside its domain";
static const char *const div_what = "division by zero or integer overflow in %s";

/* `ok` as a run-time check: true when the declared ranges and extents
 * prove it (nothing to emit); else false and, in a checked context, a
 * FAIL of a new site under !ok is appended to x->pre (a view's read). */
static bool check_or_fail(ExprCtx *x, Expr **ok, const char *what, const Expr *e) {
    LowerCtx *c = x->c;
    if (proven(c->m, ok))
        return true;
    if (!x->checked)
        return false;
    vec_push(&c->sites, site_message(c->m, what, e));
    vec_push(&x->pre, fail_unless(c->m, *ok, c->sites.len - 1));
    return false;
}

/* The condition that every index of read or UF call e (tensor-level) lies
 * in its dimension's extent, in loop IR (idx: the lowered indices). */
static Expr *in_bounds(ExprCtx *x, Expr *e, Expr *const *idx, PtrMap *memo) {
    Module *m = x->c->m;
    Expr *ok = NULL;
    for (int d = 0; d < e->n; d++) {
        Expr *ext = extent_at(m, e, d);
        if (!(ext = lower_expr_rec(x, ext, memo)))
            return NULL;
        int pad = e->kind == EX_READ ? e->u.tensor->pad[d] : 1;
        ok = and_in_range(m, ok, idx[d], ext, pad, x->c->loop_pad);
    }
    return ok;
}

/* The condition under which read e (tensor-level; idx: its lowered
 * indices) may use its indices: NULL when the declared ranges prove them
 * in range; else, in a checked context, a FAIL is in x->pre. False when
 * lowering an extent failed. The caller reads at a safe place where the
 * condition fails: offset 0, the first element of every storage order. */
bool lower_read_guard(ExprCtx *x, Expr *e, Expr *const *idx, PtrMap *memo, Expr **guard) {
    *guard = NULL;
    if (e->n == 0)
        return true;
    Expr *ok = in_bounds(x, e, idx, memo);
    if (!ok)
        return false;
    if (!check_or_fail(x, &ok, e->kind == EX_READ ? read_what : uf_what, e))
        *guard = ok;
    return true;
}

/* An integer division or remainder whose divisor may be 0 (or -1 with the
 * dtype's smallest dividend): a FAIL there, and divisor 1 instead. */
Expr *lower_checked_div(ExprCtx *x, Expr *e, Expr **args) {
    Module *m = x->c->m;
    Expr *a = args[0], *b = args[1];
    Expr *ok = div_ok(m, e->dtype, a, b);
    if (check_or_fail(x, &ok, div_what, e))
        return ir_rebuild(m, e, args);
    Expr *safe[2] = {a, ir_select(m, ok, b, ir_const_int(m, b->dtype, 1))};
    return ir_rebuild(m, e, safe);
}

/* ---- the checks pass ---- */

typedef struct Checks {
    Module *m;
    FlatCtx F;
    PtrMap src;              /* loop-IR node -> const CheckSrc* */
    PtrMap memo;             /* within a statement: node -> checked */
    Vec(PtrMap) outer;       /* the memos of the if conditions around it */
    PtrMap flat_memo;        /* checked -> flattened */
    PtrMap site_of;          /* a site of the lowering (a view's read) -> its number here */
    Vec(Stmt *) pre;         /* FAILs of the current statement */
    Vec(const char *) sites; /* Kernel.sites */
    const char **lowered_sites; /* Kernel.sites before the pass */
    bool failed;                /* an access without storage, or one the IR rejects */
} Checks;

/* The condition, flat like the lowering's, of e (checked). */
static Expr *flat(Checks *C, Expr *e) {
    Expr *r = lower_flat_expr(&C->F, e, &C->flat_memo);
    if (!r)
        C->failed = true;
    return r ? r : e;
}

/* `ok` as a check at its site: true when proven; else false, and a FAIL
 * of a new site before the statement. */
static bool check_at(Checks *C, Expr **ok, const char *what, const Expr *e) {
    if (proven(C->m, ok))
        return true;
    const CheckSrc *cs = ptrmap_get(&C->src, e);
    vec_push(&C->sites, site_message(C->m, what, cs ? cs->src : e));
    vec_push(&C->pre, fail_unless(C->m, *ok, C->sites.len - 1));
    return false;
}

static Expr *check_expr(Checks *C, Expr *e);

/* The condition that access e's indices (args: checked) are in range. */
static Expr *access_ok(Checks *C, Expr *e, Expr *const *args) {
    Module *m = C->m;
    const CheckSrc *cs = ptrmap_get(&C->src, e);
    Expr *ok = NULL;
    int d = 0;
    const Storage *st = e->kind == EX_READ ? ptrmap_get(&C->F.storage, e->u.tensor) : NULL;
    if (cs && cs->bulk_pad && st && st->bulk > 1) {
        /* a bulk-padded loop reads the padding rows of a bulk-padded
         * tensor by design: its rows' rank within them, not each index */
        Storage rows = *st;
        rows.ndim = st->bulk_level + 1;
        Expr *idx[RV_MAX_DIMS];
        for (; d < rows.ndim; d++)
            idx[d] = flat(C, args[d]);
        ok = and_in_range(m, NULL, ir_storage_offset(m, &rows, idx), st->bulk_rows, 1, false);
    }
    for (; d < e->n; d++) {
        Expr *ext = extent_at(m, e, d);
        if (!ext) {
            /* the extent is a ufun the IR refuses at these constant
             * indices, outside its domain: the outer indices are out of
             * range wherever the access runs, so no index is in range */
            Expr *never = ir_bool(m, false);
            ok = ok ? ir_binary(m, EX_AND, ok, never) : never;
            continue;
        }
        /* (the outer indices as written: checking them again finds them done) */
        ext = flat(C, check_expr(C, ext));
        int pad = e->kind == EX_READ ? e->u.tensor->pad[d] : 1;
        ok = and_in_range(m, ok, flat(C, args[d]), ext, pad, cs && cs->loop_pad);
    }
    return ok;
}

/* e with its accesses and divisions checked (memoized in the statement). */
static Expr *check_expr(Checks *C, Expr *e) {
    Module *m = C->m;
    Expr *done = ptrmap_get(&C->memo, e);
    for (int i = C->outer.len - 1; i >= 0 && !done; i--)
        done = ptrmap_get(&C->outer.data[i], e);
    if (done)
        return done;
    Expr *args[RV_MAX_DIMS];
    RV_ASSERT(e->n <= RV_MAX_DIMS);
    for (int i = 0; i < e->n; i++)
        args[i] = check_expr(C, e->args[i]);
    Expr *r = ir_rebuild(m, e, args);
    if ((e->kind == EX_READ || e->kind == EX_UFCALL) && e->n > 0) {
        Expr *ok = access_ok(C, e, args);
        if (!check_at(C, &ok, e->kind == EX_READ ? read_what : uf_what, e)) {
            Expr *safe[RV_MAX_DIMS];
            for (int i = 0; i < e->n; i++)
                safe[i] = ir_select(m, ok, args[i], ir_int(m, 0));
            r = ir_rebuild(m, e, safe);
        }
        if (!r) { /* the IR rejects the access (constant indices out of range) */
            C->failed = true;
            r = e;
        }
    } else if (lower_is_int_div(e) && ptrmap_has(&C->src, e)) {
        Expr *b = args[1];
        Expr *ok = div_ok(m, e->dtype, flat(C, args[0]), flat(C, b));
        if (!check_at(C, &ok, div_what, e)) {
            Expr *sd[2] = {args[0], ir_select(m, ok, b, ir_const_int(m, b->dtype, 1))};
            r = ir_rebuild(m, e, sd);
        }
    }
    ptrmap_put(&C->memo, e, r);
    return r;
}

/* The checks of one statement's own expressions start afresh, but for
 * those of the if conditions around it, whose FAILs ran just before (a
 * reduction's update reads its value in the condition and the store). */
static int begin_stmt(Checks *C) {
    ptrmap_free(&C->memo);
    return C->pre.len;
}

/* The FAILs that the statement's expressions pushed since `mark`, taken. */
static Stmt *take_pre(Checks *C, int mark) {
    Stmt *r = C->pre.len > mark ? lower_seq(C->m, C->pre.len - mark, C->pre.data + mark) : NULL;
    C->pre.len = mark;
    return r;
}

/* s after its FAILs (s itself when there are none). */
static Stmt *after(Module *m, Stmt *fails, Stmt *s) {
    Stmt *both[2] = {fails, s};
    return fails ? lower_seq(m, 2, both) : s;
}

static Stmt *check_stmt(Checks *C, Stmt *s) {
    Module *m = C->m;
    if (!s)
        return NULL;
    int mark = begin_stmt(C);
    switch (s->kind) {
    case ST_SEQ: {
        Stmt **v = arena_alloc(m->arena, sizeof(Stmt *) * (size_t)s->u.seq.n);
        bool same = true;
        for (int i = 0; i < s->u.seq.n; i++)
            same &= (v[i] = check_stmt(C, s->u.seq.stmts[i])) == s->u.seq.stmts[i];
        return same ? s : lower_seq(m, s->u.seq.n, v);
    }
    case ST_FOR: {
        Expr *ext = check_expr(C, s->u.loop.extent);
        Stmt *fails = take_pre(C, mark);
        Stmt *body = check_stmt(C, s->u.loop.body);
        if (!fails && ext == s->u.loop.extent && body == s->u.loop.body)
            return s;
        return after(m, fails, lower_for_like(m, s, s->u.loop.var, ext, body));
    }
    case ST_IF: {
        Expr *cond = check_expr(C, s->u.if_.cond);
        Stmt *fails = take_pre(C, mark);
        vec_push(&C->outer, C->memo);
        C->memo = (PtrMap){0};
        Stmt *a = check_stmt(C, s->u.if_.then_s), *b = check_stmt(C, s->u.if_.else_s);
        ptrmap_free(&C->memo);
        C->memo = vec_pop(&C->outer);
        if (!fails && cond == s->u.if_.cond && a == s->u.if_.then_s && b == s->u.if_.else_s)
            return s;
        return after(m, fails, lower_if(m, cond, a, b));
    }
    case ST_LET: {
        Expr *v = check_expr(C, s->u.let.value);
        Stmt *fails = take_pre(C, mark);
        Stmt *body = check_stmt(C, s->u.let.body);
        if (!fails && v == s->u.let.value && body == s->u.let.body)
            return s;
        return after(m, fails, lower_let(m, s->u.let.var, v, body));
    }
    case ST_STORE: {
        Expr *idx = check_expr(C, s->u.store.index);
        Expr *v = check_expr(C, s->u.store.value);
        Stmt *fails = take_pre(C, mark);
        if (!fails && idx == s->u.store.index && v == s->u.store.value)
            return s;
        return after(m, fails, lower_store(m, s->u.store.buf, idx, v));
    }
    case ST_ALLOC: {
        Stmt *body = check_stmt(C, s->u.alloc.body);
        return body == s->u.alloc.body ? s : lower_alloc(m, s->u.alloc.buf, body);
    }
    case ST_FAIL: {
        /* the lowering's sites are numbered with the pass's, in order */
        intptr_t n = (intptr_t)ptrmap_get(&C->site_of, s);
        if (!n) {
            vec_push(&C->sites, C->lowered_sites[s->u.fail.site]);
            n = C->sites.len;
            ptrmap_put(&C->site_of, s, (void *)n);
        }
        return n - 1 == s->u.fail.site ? s : lower_fail(m, (int)n - 1);
    }
    default:
        return s;
    }
}

rv_status lower_checks(Kernel *k) {
    Checks C = {.m = k->m};
    lower_flat_init(&C.F, k);
    for (int i = 0; i < k->ncheck_src; i++)
        if (!ptrmap_has(&C.src, k->check_src[i].node)) /* the first names the site */
            ptrmap_put(&C.src, k->check_src[i].node, &k->check_src[i]);
    C.lowered_sites = k->sites;
    Stmt *body = check_stmt(&C, k->body);
    rv_status st = RV_OK;
    if (C.failed) {
        st = base_error(RV_ERR_UNSUPPORTED,
                        "internal error in pass checks: kernel %s: an access whose storage is "
                        "not a parameter, or that the IR rejects",
                        k->name);
    } else {
        k->body = body;
        k->nsites = C.sites.len;
        k->sites = C.sites.len ? arena_memdup(k->m->arena, C.sites.data,
                                              sizeof(const char *) * (size_t)C.sites.len)
                               : NULL;
        k->ncheck_src = 0;
        k->check_src = NULL;
    }
    lower_flat_free(&C.F);
    ptrmap_free(&C.src);
    ptrmap_free(&C.memo);
    ptrmap_free(&C.flat_memo);
    ptrmap_free(&C.site_of);
    vec_free(&C.outer);
    vec_free(&C.pre);
    vec_free(&C.sites);
    return st;
}
