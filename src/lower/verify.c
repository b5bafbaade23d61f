/*
 * verify.c — the loop-IR verifier run between passes (lower_pipeline).
 *
 * A pass that breaks an invariant of the loop IR would otherwise surface
 * much later as a C compiler error, an assertion in codegen or, worst, a
 * wrong result. The verifier checks, for a kernel's body and prelude:
 *
 *   - every variable used is bound by an enclosing FOR or LET, and no FOR
 *     or LET rebinds a variable already in scope;
 *   - every size used is a parameter of the kernel;
 *   - every buffer loaded, stored or passed to a call is a parameter of the
 *     kernel or allocated by an enclosing ALLOC; the body never stores to
 *     UF or AUX arrays (they are read-only there: the prelude fills AUX
 *     arrays before the body runs, and passes such as hoisting rely on it);
 *   - loop extents and load/store indices are i64, conditions are bool,
 *     and a stored value has its buffer's dtype;
 *   - no reduction remains; a multi-dimensional access (READ or UFCALL
 *     with loop-IR indices, i64) only in the body before the flatten pass
 *     (Kernel.flat), and its tensor or UF (the buffer flatten loads) is
 *     then a parameter.
 *
 * A violation is an internal error, reported as RV_ERR_UNSUPPORTED with
 * "internal error after pass X: kernel K: ..." and the offending statement,
 * rather than a crash, so the user sees which pass went wrong. Checking is
 * linear in the size of the kernel (expressions are DAGs: each node is
 * checked once per scope in which it appears).
 */
#include "lower/lower.h"

typedef struct Verify {
    const Kernel *k;
    bool prelude;
    Vec(const void *) scope; /* bound Axis* and allocated Buffer*, innermost last */
    PtrMap params;           /* Size* and Buffer* of the kernel's parameters */
    PtrMap ok;               /* Expr* checked in the current scope (cleared when it grows) */
    Buf why;                 /* the first violation */
} Verify;

static bool in_scope(const Verify *v, const void *p) {
    for (int i = v->scope.len - 1; i >= 0; i--)
        if (v->scope.data[i] == p)
            return true;
    return false;
}

static bool fail(Verify *v, const char *fmt, ...) RV_PRINTF(2, 3);
static bool fail(Verify *v, const char *fmt, ...) {
    if (v->why.len)
        return false;
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&v->why, fmt, ap);
    va_end(ap);
    return false;
}

static bool buffer_known(Verify *v, const Buffer *b) {
    return ptrmap_has(&v->params, b) || in_scope(v, b);
}

static bool check_expr(Verify *v, const Expr *e);

static bool check_node(Verify *v, const Expr *e) {
    switch (e->kind) {
    case EX_VAR:
        if (!in_scope(v, e->u.axis))
            return fail(v, "variable '%s' is used outside the FOR or LET binding it",
                        e->u.axis->name);
        return true;
    case EX_SIZE:
        if (!ptrmap_has(&v->params, e->u.size))
            return fail(v, "size '%s' is not a parameter of the kernel", e->u.size->name);
        return true;
    case EX_LOAD:
        if (!buffer_known(v, e->u.buf))
            return fail(v, "load from buffer '%s', which is neither a parameter nor allocated here",
                        e->u.buf->name);
        if (e->args[0]->dtype != RV_I64)
            return fail(v, "index of a load from '%s' is %s, not i64", e->u.buf->name,
                        rv_dtype_name(e->args[0]->dtype));
        return true;
    case EX_READ:
    case EX_UFCALL: {
        const char *name = e->kind == EX_READ ? e->u.tensor->name : e->u.uf->name;
        if (v->k->flat || v->prelude)
            return fail(v, "multi-dimensional access %s{...} left after pass flatten", name);
        for (int i = 0; i < e->n; i++)
            if (e->args[i]->dtype != RV_I64)
                return fail(v, "index %d of an access of '%s' is %s, not i64", i, name,
                            rv_dtype_name(e->args[i]->dtype));
        if (!ptrmap_has(&v->params, e->kind == EX_READ ? (void *)e->u.tensor : (void *)e->u.uf))
            return fail(v, "access of '%s', whose storage is not a parameter of the kernel", name);
        return true;
    }
    case EX_REDUCE:
        return fail(v, "reduction left in the loop IR");
    default:
        return true;
    }
}

static bool check_expr(Verify *v, const Expr *e) {
    if (!e)
        return fail(v, "missing expression");
    if (ptrmap_has(&v->ok, e))
        return true;
    for (int i = 0; i < e->n; i++)
        if (!check_expr(v, e->args[i]))
            return false;
    if (!check_node(v, e))
        return false;
    ptrmap_put(&v->ok, e, (void *)e);
    return true;
}

static bool check_index(Verify *v, const Expr *e, const char *what) {
    if (!check_expr(v, e))
        return false;
    if (e->dtype != RV_I64)
        return fail(v, "%s is %s, not i64", what, rv_dtype_name(e->dtype));
    return true;
}

/* Enters the scope of a binder; memoized answers stay valid (a larger
 * scope accepts everything a smaller one did). */
static bool bind(Verify *v, const void *p, const char *name) {
    if (in_scope(v, p))
        return fail(v, "'%s' is bound again inside its own scope", name);
    vec_push(&v->scope, p);
    return true;
}

/* Leaving a scope: answers that relied on it are no longer valid. */
static void unbind(Verify *v) {
    v->scope.len--;
    ptrmap_free(&v->ok);
}

static bool check_stmt(Verify *v, const Stmt *s);

static bool check_store(Verify *v, const Stmt *s) {
    const Buffer *b = s->u.store.buf;
    if (!buffer_known(v, b))
        return fail(v, "store to buffer '%s', which is neither a parameter nor allocated here",
                    b->name);
    if (!v->prelude && (b->uf || b->scope == BUF_AUX))
        return fail(v, "store to read-only %s array '%s' in the kernel body", b->uf ? "UF" : "AUX",
                    b->name);
    if (!check_index(v, s->u.store.index, "a store index") || !check_expr(v, s->u.store.value))
        return false;
    if (s->u.store.value->dtype != b->dtype)
        return fail(v, "store of a %s value to %s buffer '%s'",
                    rv_dtype_name(s->u.store.value->dtype), rv_dtype_name(b->dtype), b->name);
    return true;
}

static bool check_stmt(Verify *v, const Stmt *s) {
    if (!s)
        return true;
    switch (s->kind) {
    case ST_FOR: {
        if (!check_index(v, s->u.loop.extent, "a loop extent"))
            return false;
        if (!bind(v, s->u.loop.var, s->u.loop.var->name))
            return false;
        bool ok = check_stmt(v, s->u.loop.body);
        unbind(v);
        return ok;
    }
    case ST_IF:
        if (!check_expr(v, s->u.if_.cond))
            return false;
        if (s->u.if_.cond->dtype != RV_BOOL)
            return fail(v, "an if condition is %s, not bool", rv_dtype_name(s->u.if_.cond->dtype));
        return check_stmt(v, s->u.if_.then_s) && check_stmt(v, s->u.if_.else_s);
    case ST_LET: {
        if (!check_expr(v, s->u.let.value))
            return false;
        if (!bind(v, s->u.let.var, s->u.let.var->name))
            return false;
        bool ok = check_stmt(v, s->u.let.body);
        unbind(v);
        return ok;
    }
    case ST_STORE:
        return check_store(v, s);
    case ST_ALLOC: {
        const Buffer *b = s->u.alloc.buf;
        if (b->size && !check_index(v, b->size, "an allocation size"))
            return false;
        if (ptrmap_has(&v->params, b))
            return fail(v, "parameter '%s' is allocated", b->name);
        if (!bind(v, b, b->name))
            return false;
        bool ok = check_stmt(v, s->u.alloc.body);
        unbind(v);
        return ok;
    }
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++) {
            if (!s->u.seq.stmts[i])
                return fail(v, "a NULL statement in a sequence");
            if (!check_stmt(v, s->u.seq.stmts[i]))
                return false;
        }
        return true;
    case ST_CALL:
        for (int i = 0; i < s->u.call.nargs; i++)
            if (!buffer_known(v, s->u.call.args[i]))
                return fail(v,
                            "call %s passes buffer '%s', which is neither a parameter nor "
                            "allocated here",
                            s->u.call.kernel, s->u.call.args[i]->name);
        return true;
    case ST_REDUCE:
        /* the reduce pass initialises it; flatten runs after */
        if (v->k->flat)
            return fail(v, "a reduction into '%s' is left uninitialised", s->u.reduce.buf->name);
        if (!buffer_known(v, s->u.reduce.buf) ||
            (s->u.reduce.arg && !buffer_known(v, s->u.reduce.arg)))
            return fail(v,
                        "a reduction into a buffer that is neither a parameter nor allocated here");
        return check_stmt(v, s->u.reduce.body);
    case ST_BARRIER:
        return true;
    case ST_FAIL:
        if (s->u.fail.site >= v->k->nsites)
            return fail(v, "fail names site %d of %d", s->u.fail.site, v->k->nsites);
        return true;
    default:
        return fail(v, "statement of unknown kind %d", (int)s->kind);
    }
}

static bool check_part(Verify *v, const Stmt *s, bool prelude) {
    v->prelude = prelude;
    v->scope.len = 0;
    ptrmap_free(&v->ok);
    return check_stmt(v, s);
}

rv_status lower_verify_kernel(const Kernel *k, const char *after) {
    Verify v = {.k = k};
    for (int i = 0; i < k->nparams; i++) {
        const Param *p = &k->params[i];
        if (p->kind == PARAM_SIZE)
            ptrmap_put(&v.params, p->size, (void *)p->size);
        else
            ptrmap_put(&v.params, p->buf, (void *)p->buf);
        /* the storage a multi-dimensional access of it loads */
        if (p->buf && p->buf->storage && (p->buf->tensor || p->buf->uf))
            ptrmap_put(&v.params, p->buf->tensor ? (void *)p->buf->tensor : (void *)p->buf->uf,
                       (void *)p->buf);
    }
    bool pre = check_part(&v, k->prelude, true);
    bool ok = pre && check_part(&v, k->body, false);
    rv_status st = RV_OK;
    if (!ok) {
        Buf b = {0};
        lower_print_kernel(&b, k);
        st = base_error(RV_ERR_UNSUPPORTED, "internal error after pass %s: kernel %s%s: %s\n%s",
                        after, k->name, pre ? "" : " (prelude)", buf_str(&v.why), buf_str(&b));
        buf_free(&b);
    }
    vec_free(&v.scope);
    ptrmap_free(&v.params);
    ptrmap_free(&v.ok);
    buf_free(&v.why);
    return st;
}
