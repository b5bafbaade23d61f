/*
 * simplify.c — the statement pass of the simplifier (ir/simplify.c).
 *
 * It walks a kernel's loop IR with the simplifier's context: loop
 * variables range over their loop's (simplified) extent, let variables
 * equal their value, an `if` branch knows its condition, and buffers the
 * statement stores to are marked as changing, so a value loaded from one
 * is known only by its range. It drops `if`s whose condition is decided,
 * loops of extent <= 0, empty loops and lets, and replaces a loop of
 * extent 1 by its body with the variable set to 0, one of extent at most 1
 * by `if (0 < extent)` around that body (a sequence's `k < nprev[n]`), and
 * an unrolled loop of varying extent at most 8 by guarded copies
 * (guarded_copies).
 *
 * Requires: nothing. Guarantees: the statement computes what it computed
 * (tests/unit/test_simplify.c checks random loop nests); lower_simplify
 * returns NULL when no statement remains.
 */
#include <string.h>

#include "lower/lower.h"
/* ---- statements ---- */

/* Visitors over the generic mutator (nothing is rebuilt: fe and fs return
 * what they are given). */
typedef struct UseScan {
    const Axis *a;
    bool found;
} UseScan;

static Expr *use_expr(StmtMutator *mu, Expr *e) {
    UseScan *u = mu->ctx;
    u->found = u->found || ir_uses_axis(e, u->a);
    return e;
}

static Stmt *use_alloc(StmtMutator *mu, Stmt *s) {
    if (s->kind == ST_ALLOC)
        use_expr(mu, s->u.alloc.buf->size);
    return s;
}

/* Does any expression of s (buffer sizes of allocations included) mention a? */
static bool stmt_uses(Simp *S, Stmt *s, const Axis *a) {
    UseScan u = {a, false};
    StmtMutator mu = {use_expr, use_alloc, S->m, &u};
    lower_mutate(&mu, s);
    return u.found;
}

/* Pushes the conjuncts of c as facts (conditions that load are left out:
 * a store in the branch may change them). */
static void push_facts(Simp *S, Expr *c) {
    if (c->kind == EX_AND) {
        push_facts(S, c->args[0]);
        push_facts(S, c->args[1]);
    } else if (c->kind == EX_NOT && c->args[0]->kind == EX_OR) {
        push_facts(S, ir_simp(S, ir_simp_negation(S, c->args[0]->args[0])));
        push_facts(S, ir_simp(S, ir_simp_negation(S, c->args[0]->args[1])));
    } else if (c->kind != EX_CONST_INT && !ir_loads_mutable(S, c)) {
        vec_push(&S->facts, c);
    }
}

static Stmt *simp_stmt(Simp *S, Stmt *s);

/* The body with `var` fixed to the constant v: a let that disappears
 * unless something the simplifier does not rewrite still mentions var. */
static Stmt *with_constant(Simp *S, Axis *var, Expr *v, Stmt *body) {
    Binding bd = {0};
    bd.value = v;
    Binding *old = ir_simp_bind(S, var, bd);
    Stmt *r = simp_stmt(S, body);
    ir_simp_unbind(S, var, old);
    if (r && stmt_uses(S, r, var))
        r = lower_let(S->m, var, v, r);
    return r;
}

/* An unrolled loop whose extent varies but is at most GUARDED_UNROLL_MAX
 * (a child sum's k < nchild[n] of a binary tree, the tail of a split's
 * register tile): copy c of its body runs under `if (c < extent)`, with
 * the variable c, so the tile's accumulators stay at constant indices (in
 * registers) and no loop counts the children. Loop `s` itself where a copy
 * would still name the variable (a let the pass keeps: the copies' lets
 * would share one C scope). */
#define GUARDED_UNROLL_MAX 8

static Stmt *guarded_copies(Simp *S, Stmt *s, Expr *ext, int64_t hi) {
    Module *m = S->m;
    Axis *var = s->u.loop.var;
    Stmt *copies[GUARDED_UNROLL_MAX];
    for (int64_t c = 0; c < hi; c++)
        copies[c] = lower_if(m, ir_binary(m, EX_LT, ir_const_int(S->m, ext->dtype, c), ext),
                             lower_let(m, var, ir_const_int(S->m, RV_I64, c), s->u.loop.body), NULL);
    Stmt *r = simp_stmt(S, lower_seq(m, (int)hi, copies));
    return r && stmt_uses(S, r, var) ? s : r;
}

static Stmt *simp_branch(Simp *S, Expr *fact, Stmt *s) {
    if (!s)
        return NULL;
    int mark = S->facts.len;
    push_facts(S, fact);
    if (S->facts.len != mark)
        ir_simp_scope_changed(S);
    Stmt *r = simp_stmt(S, s);
    if (S->facts.len != mark) {
        S->facts.len = mark;
        ir_simp_scope_changed(S);
    }
    return r;
}

static Stmt *simp_stmt(Simp *S, Stmt *s) {
    Module *m = S->m;
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR: {
        Axis *var = s->u.loop.var;
        Expr *ext = ir_simp(S, s->u.loop.extent);
        Ival iv = ir_ival_of(S, ext);
        if (iv.ok && iv.hi <= 0)
            return NULL;
        if (iv.ok && iv.lo == 1 && iv.hi == 1)
            return with_constant(S, var, ir_const_int(S->m, RV_I64, 0), s->u.loop.body);
        if (iv.ok && iv.hi == 1) /* runs once or not at all: a test, not a loop around
                                    its body (GCC hoists an invariant body's products
                                    out of a loop it cannot count, unfused) */
            return simp_stmt(S, lower_if(m, ir_binary(m, EX_LT, ir_const_int(S->m, ext->dtype, 0), ext),
                                         lower_let(m, var, ir_const_int(S->m, RV_I64, 0), s->u.loop.body),
                                         NULL));
        if (s->u.loop.kind == LOOP_UNROLL && ext->kind != EX_CONST_INT && iv.ok &&
            iv.hi <= GUARDED_UNROLL_MAX) {
            Stmt *r = guarded_copies(S, s, ext, iv.hi);
            if (r != s)
                return r;
        }
        Binding bd = {0};
        if (ir_loads_mutable(S, ext)) { /* only its range at loop entry is known */
            bd.opaque = true;
            bd.known = iv.ok && iv.hi >= 1;
            bd.hi = iv.hi - 1;
        } else {
            bd.extent = ext;
        }
        Binding *old = ir_simp_bind(S, var, bd);
        Stmt *body = simp_stmt(S, s->u.loop.body);
        ir_simp_unbind(S, var, old);
        if (!body)
            return NULL;
        if (ext == s->u.loop.extent && body == s->u.loop.body)
            return s;
        return lower_for_like(m, s, var, ext, body);
    }
    case ST_IF: {
        Expr *c = ir_simp(S, s->u.if_.cond);
        int64_t decided;
        if (c->dtype == RV_BOOL && ir_is_const_int(c, &decided))
            return simp_stmt(S, decided ? s->u.if_.then_s : s->u.if_.else_s);
        Stmt *t = simp_branch(S, c, s->u.if_.then_s);
        Stmt *e = simp_branch(S, ir_simp(S, ir_simp_negation(S, c)), s->u.if_.else_s);
        if (!t && !e)
            return NULL;
        if (!t)
            return lower_if(m, ir_simp(S, ir_simp_negation(S, c)), e, NULL);
        if (c == s->u.if_.cond && t == s->u.if_.then_s && e == s->u.if_.else_s)
            return s;
        return lower_if(m, c, t, e);
    }
    case ST_LET: {
        Axis *var = s->u.let.var;
        Expr *v = ir_simp(S, s->u.let.value);
        if (v->kind == EX_CONST_INT && v->dtype != RV_BOOL && ir_is_int(v->dtype))
            return with_constant(S, var, v, s->u.let.body);
        Binding bd = {0};
        if (!ir_is_int(v->dtype)) {
            bd.opaque = true; /* not an index: nothing to know */
        } else if (ir_loads_mutable(S, v)) {
            Ival iv = ir_ival_of(S, v);
            bd.opaque = true;
            bd.known = iv.ok;
            bd.lo = iv.lo;
            bd.hi = iv.hi;
        } else {
            bd.value = v;
        }
        Binding *old = ir_simp_bind(S, var, bd);
        Stmt *body = simp_stmt(S, s->u.let.body);
        ir_simp_unbind(S, var, old);
        if (!body)
            return NULL;
        if (v == s->u.let.value && body == s->u.let.body)
            return s;
        return lower_let(m, var, v, body);
    }
    case ST_STORE: {
        Expr *i = ir_simp(S, s->u.store.index), *v = ir_simp(S, s->u.store.value);
        if (i == s->u.store.index && v == s->u.store.value)
            return s;
        return lower_store(m, s->u.store.buf, i, v);
    }
    case ST_ALLOC: {
        Stmt *body = simp_stmt(S, s->u.alloc.body);
        if (!body)
            return NULL;
        return body == s->u.alloc.body ? s : lower_alloc(m, s->u.alloc.buf, body);
    }
    case ST_SEQ: {
        int n = s->u.seq.n;
        Stmt **kids = base_xmalloc(sizeof(Stmt *) * (size_t)n);
        bool changed = false;
        for (int i = 0; i < n; i++) {
            kids[i] = simp_stmt(S, s->u.seq.stmts[i]);
            changed = changed || kids[i] != s->u.seq.stmts[i];
        }
        Stmt *r = changed ? lower_seq(m, n, kids) : s;
        base_free(kids);
        return r;
    }
    case ST_BARRIER:
    case ST_CALL:
    case ST_FAIL:
        return s;
    default:
        RV_UNREACHABLE();
    }
}

/* Records every buffer a statement stores to (or passes to a call). */
static Stmt *note_store(StmtMutator *mu, Stmt *s) {
    Simp *S = mu->ctx;
    if (s->kind == ST_STORE)
        ptrmap_put(&S->stored, s->u.store.buf, s->u.store.buf);
    for (int i = 0; s->kind == ST_CALL && i < s->u.call.nargs; i++)
        ptrmap_put(&S->stored, s->u.call.args[i], s->u.call.args[i]);
    return s;
}

Stmt *lower_simplify(Module *m, Stmt *s) {
    Simp S;
    ir_simp_init(&S, m);
    S.stmt_mode = true;
    StmtMutator mu = {NULL, note_store, m, &S};
    lower_mutate(&mu, s);
    Stmt *r = simp_stmt(&S, s);
    ir_simp_free(&S);
    return r;
}
