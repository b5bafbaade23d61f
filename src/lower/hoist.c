/*
 * hoist.c — loop-invariant code motion for index arithmetic and UF/AUX
 * loads (CoRa's load hoisting).
 *
 * Lowering writes every index from scratch in the innermost statement: a
 * ragged access reloads the row start `S_start1[S_start0[b]*8 + ...]` and
 * recomputes `io*24576` for every element, and an extent `len[b]` is
 * reloaded by every iteration of the loops around it. The C compiler
 * cannot move those loads out of the loops itself when the loops store to
 * other buffers it cannot prove distinct. This pass binds each such
 * computation with a LET just outside the outermost loop it does not
 * depend on and uses the variable instead.
 *
 * Loops are visited outermost first. For a loop L, an expression of its
 * body (loop extents, conditions, let values, store indices and values) is
 * invariant when it uses neither L's variable nor any variable bound
 * inside L, and every load in it reads a UF or AUX array (which the body
 * never stores to; verify.c checks it). Invariant sub-expressions are
 * hoisted when maximal, of type i64 (LET variables are i64) and not
 * trivially cheap (a constant, variable or size, possibly cast). Equal
 * expressions are one pointer (hash-consing), so each is bound once and
 * every occurrence in the loop uses the variable; a hoisted expression
 * containing another one uses the other's variable, bound just outside it.
 * The inner loops are then visited in the rewritten body, so an expression
 * ends up outside every loop it does not depend on.
 *
 * What may move:
 *   - Arithmetic: anything but a division or remainder whose divisor is
 *     not a positive constant (which could trap if evaluated where the
 *     original code would not have been).
 *   - Loads of UF and AUX arrays only (loads of tensors and temporaries
 *     never move, so aliasing with stores need not be analysed), and only
 *     where moving them cannot make them read outside their buffer. A
 *     moved load runs before L, also when the original would not have run
 *     it: when L or a loop between L and the load has zero iterations, or
 *     an `if` inside L guards it (`if o*4 + i < B: ... len[o*4 + i]`).
 *     Loop variables can range past a UF's domain (a tile past the end, a
 *     region loop that is empty there), and then only the zero-trip loop
 *     or the guard keeps the index in range. So a load moves when bounds
 *     prove its index inside its buffer wherever the variables it uses
 *     are bound (`off[b]` in `for b in 0..B` with off of size B + 1), or
 *     when it runs whenever the body of L does (no `if` around it inside
 *     L, and each loop between provably runs at least once, by the bounds
 *     of its extent; the arms of a select count as guarded). In the
 *     second case, unless L provably runs, its lets go under `if extent >
 *     0` around L (a preheader, as loop rotation makes one), so the load
 *     runs only where the original ran it.
 *   - Nothing from the extent of a GPU-bound loop, which must stay an
 *     expression over sizes to size the launch (cuda.c).
 *   - Run-time checks (`if !ok: fail N`) whose condition loads nothing and
 *     does not change in L, at the head of L's body, out of a loop that
 *     provably runs (peel_checks): in a vector loop they kept it scalar.
 *
 * Moving out of a parallel loop is fine for codegen: the outlined body
 * captures the LET variable like any other (c.c, emit_parallel).
 *
 * Requires: the body of a kernel (after lowering and simplification).
 * Guarantees: the same values are computed; every hoisted LET is i64.
 */
#include <string.h>

#include "lower/lower.h"

/* What is known of an expression in the current loop. */
typedef enum Inv {
    INV_UNKNOWN, /* not classified yet (ptrmap default) */
    INV_NO,      /* varies in the loop, or may not move */
    INV_PURE,    /* invariant, no load */
    INV_LOAD,    /* invariant, loads UF/AUX arrays */
} Inv;

typedef struct Hoist {
    Module *m;
    PtrMap stored;           /* Buffer* stored to (or passed to a call) anywhere */
    PtrMap lets;             /* Axis* of a let around -> its value, lets expanded */
    Vec(const char *) names; /* names given, to keep them unique in dumps */
} Hoist;

/* One loop being processed. */
typedef struct Loop {
    Hoist *h;
    PtrMap variant; /* Axis* bound inside (and L's variable), Buffer* allocated inside */
    PtrMap gpu;     /* nodes of GPU-bound loop extents: never hoisted */
    PtrMap inv;     /* Expr* -> Inv */
    PtrMap height;  /* Expr* -> 1 + height */
    PtrMap seen;    /* Expr* -> visited where arithmetic (1) / loads (2) may be hoisted */
    PtrMap chosen;  /* Expr* hoisted */
    Vec(Expr *) cands;
} Loop;

/* ---- what is bound or stored ---- */

static Stmt *note_store(StmtMutator *mu, Stmt *s) {
    Hoist *h = mu->ctx;
    if (s->kind == ST_STORE)
        ptrmap_put(&h->stored, s->u.store.buf, s->u.store.buf);
    for (int i = 0; s->kind == ST_CALL && i < s->u.call.nargs; i++)
        ptrmap_put(&h->stored, s->u.call.args[i], s->u.call.args[i]);
    return s;
}

static bool gpu_loop(const Stmt *s) {
    return sched_kind_is_gpu(s->u.loop.kind);
}

static void mark_gpu(const Expr *e, void *ctx) {
    Loop *L = ctx;
    ptrmap_put(&L->gpu, e, (void *)e);
}

/* The variables and buffers bound inside s, and the GPU extents. */
static void scan_bound(Loop *L, const Stmt *s) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR:
        ptrmap_put(&L->variant, s->u.loop.var, s->u.loop.var);
        if (gpu_loop(s))
            ir_visit(s->u.loop.extent, mark_gpu, L);
        scan_bound(L, s->u.loop.body);
        return;
    case ST_IF:
        scan_bound(L, s->u.if_.then_s);
        scan_bound(L, s->u.if_.else_s);
        return;
    case ST_LET:
        ptrmap_put(&L->variant, s->u.let.var, s->u.let.var);
        scan_bound(L, s->u.let.body);
        return;
    case ST_ALLOC:
        ptrmap_put(&L->variant, s->u.alloc.buf, s->u.alloc.buf);
        scan_bound(L, s->u.alloc.body);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            scan_bound(L, s->u.seq.stmts[i]);
        return;
    default:
        return;
    }
}

/* ---- what is proven without the loop running ---- */

/* e with the lets around it replaced by their values, so that bounds
 * see the loop variables (whose extents they know) behind them. */
static Expr *expand_lets(Hoist *h, Expr *e) {
    return h->lets.len ? ir_substitute(h->m, e, &h->lets) : e;
}

static bool proven(Hoist *h, Expr *cond) {
    int64_t v;
    Expr *t = ir_simplify_expr(h->m, cond);
    return t && ir_is_const_int(t, &v) && v;
}

/* Does a loop of this extent run at least once, at every iteration of
 * the loops around it? */
static bool runs(Hoist *h, Expr *ext) {
    Range r;
    return lower_bounds_range(h->m, expand_lets(h, ext), NULL, true, &r) &&
           proven(h, ir_binary(h->m, EX_GE, r.lo, ir_int(h->m, 1)));
}

typedef struct InRange {
    Hoist *h;
    bool ok;
} InRange;

static void in_range_fn(const Expr *e, void *ctx) {
    InRange *ir = ctx;
    if (!ir->ok || e->kind != EX_LOAD)
        return;
    Hoist *h = ir->h;
    Range r;
    Expr *size = e->u.buf->size;
    ir->ok = size && lower_bounds_range(h->m, expand_lets(h, e->args[0]), NULL, true, &r) &&
             proven(h, ir_binary(h->m, EX_AND, ir_binary(h->m, EX_GE, r.lo, ir_int(h->m, 0)),
                                 ir_binary(h->m, EX_LT, r.hi, size)));
}

/* Is every load of e inside its buffer wherever the variables it uses
 * are bound, so that it may run where the original code would not? */
static bool loads_in_range(Hoist *h, const Expr *e) {
    InRange ir = {h, true};
    ir_visit(e, in_range_fn, &ir);
    return ir.ok;
}

/* ---- classifying expressions ---- */

static bool read_only(Loop *L, const Buffer *b) {
    return (b->uf || b->scope == BUF_AUX) && !ptrmap_has(&L->h->stored, b) &&
           !ptrmap_has(&L->variant, b);
}

static Inv classify(Loop *L, const Expr *e) {
    Inv r = (Inv)(intptr_t)ptrmap_get(&L->inv, e);
    if (r != INV_UNKNOWN)
        return r;
    int64_t c;
    switch (e->kind) {
    case EX_CONST_INT:
    case EX_CONST_FLOAT:
    case EX_SIZE:
        r = INV_PURE;
        break;
    case EX_VAR:
        r = ptrmap_has(&L->variant, e->u.axis) ? INV_NO : INV_PURE;
        break;
    case EX_LOAD:
        r = read_only(L, e->u.buf) && classify(L, e->args[0]) != INV_NO ? INV_LOAD : INV_NO;
        break;
    case EX_READ:
    case EX_UFCALL:
    case EX_REDUCE:
        r = INV_NO;
        break;
    case EX_DIV:
    case EX_MOD:
    case EX_FLOORDIV:
    case EX_FLOORMOD:
        if (!ir_is_const_int(e->args[1], &c) || c <= 0) {
            r = INV_NO;
            break;
        }
        /* fall through */
    default:
        r = INV_PURE;
        for (int i = 0; i < e->n && r != INV_NO; i++) {
            Inv a = classify(L, e->args[i]);
            if (a == INV_NO || a == INV_LOAD)
                r = a;
        }
        break;
    }
    ptrmap_put(&L->inv, e, (void *)(intptr_t)r);
    return r;
}

/* A constant, variable or size, possibly cast or negated: nothing to save. */
static bool cheap(const Expr *e) {
    while (e->kind == EX_CAST || e->kind == EX_NEG)
        e = e->args[0];
    return e->n == 0;
}

/* Collects the maximal hoistable sub-expressions of e; `uncond`: e is
 * evaluated whenever the loop body runs; `loads`: only those that load. */
static void collect_expr(Loop *L, Expr *e, bool uncond, bool loads) {
    intptr_t seen = (intptr_t)ptrmap_get(&L->seen, e);
    intptr_t now = (loads ? 0 : 1) | (uncond ? 2 : 0); /* what may be hoisted from here */
    if ((seen | now) == seen)
        return;
    ptrmap_put(&L->seen, e, (void *)(seen | now));
    Inv k = classify(L, e);
    if (k != INV_NO && e->dtype == RV_I64 && !cheap(e) && !ptrmap_has(&L->gpu, e) &&
        (k == INV_PURE ? !loads : uncond || loads_in_range(L->h, e))) {
        if (!ptrmap_has(&L->chosen, e)) {
            ptrmap_put(&L->chosen, e, e);
            vec_push(&L->cands, e);
        }
        return;
    }
    /* the arms of a select run only when chosen (C's ?:) */
    for (int i = 0; i < e->n; i++)
        collect_expr(L, e->args[i], uncond && (e->kind != EX_SELECT || i == 0), loads);
}

static void collect_stmt(Loop *L, Stmt *s, bool uncond) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR:
        if (!gpu_loop(s))
            collect_expr(L, s->u.loop.extent, uncond, false);
        collect_stmt(L, s->u.loop.body, uncond && runs(L->h, s->u.loop.extent));
        return;
    case ST_IF:
        collect_expr(L, s->u.if_.cond, uncond, false);
        collect_stmt(L, s->u.if_.then_s, false);
        collect_stmt(L, s->u.if_.else_s, false);
        return;
    case ST_LET:
        collect_expr(L, s->u.let.value, uncond, false);
        collect_stmt(L, s->u.let.body, uncond);
        return;
    case ST_STORE:
        collect_expr(L, s->u.store.index, uncond, false);
        collect_expr(L, s->u.store.value, uncond, false);
        return;
    case ST_ALLOC: /* buffer sizes stay as they are */
        collect_stmt(L, s->u.alloc.body, uncond);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            collect_stmt(L, s->u.seq.stmts[i], uncond);
        return;
    default:
        return;
    }
}

/* ---- rewriting ---- */

static int height(Loop *L, const Expr *e) {
    intptr_t h = (intptr_t)ptrmap_get(&L->height, e);
    if (h)
        return (int)h - 1;
    int r = 0;
    for (int i = 0; i < e->n; i++) {
        int c = height(L, e->args[i]) + 1;
        r = c > r ? c : r;
    }
    ptrmap_put(&L->height, e, (void *)(intptr_t)(r + 1));
    return r;
}

/* Expressions replaced by variables, top-down. */
typedef struct Subst {
    Module *m;
    PtrMap *to;  /* Expr* -> the variable's Expr* */
    PtrMap memo; /* Expr* -> rewritten */
} Subst;

static Expr *subst(Subst *x, Expr *e) {
    Expr *r = ptrmap_get(x->to, e);
    if (r)
        return r;
    if (e->n == 0)
        return e;
    if ((r = ptrmap_get(&x->memo, e)))
        return r;
    Expr *args[3];
    bool changed = false;
    RV_ASSERT(e->n <= 3);
    for (int i = 0; i < e->n; i++) {
        args[i] = subst(x, e->args[i]);
        changed = changed || args[i] != e->args[i];
    }
    r = changed ? ir_rebuild(x->m, e, args) : e;
    ptrmap_put(&x->memo, e, r);
    return r;
}

static Expr *subst_fe(StmtMutator *mu, Expr *e) {
    return subst(mu->ctx, e);
}

/* The operands of e rewritten (e itself is the one being bound). */
static Expr *subst_operands(Subst *x, Expr *e) {
    if (e->n == 0)
        return e;
    Expr *args[3];
    bool changed = false;
    for (int i = 0; i < e->n; i++) {
        args[i] = subst(x, e->args[i]);
        changed = changed || args[i] != e->args[i];
    }
    return changed ? ir_rebuild(x->m, e, args) : e;
}

static bool name_taken(Hoist *h, const char *n) {
    for (int i = 0; i < h->names.len; i++)
        if (strcmp(h->names.data[i], n) == 0)
            return true;
    return false;
}

/* A readable, unique name: a load is named after its buffer and its
 * index when that is a variable (`len_b`, else `S_start2_v`), arithmetic
 * `t0`, `t1`, ... */
static const char *var_name(Hoist *h, const Expr *e) {
    Module *m = h->m;
    const Expr *x = e;
    while (x->kind == EX_CAST)
        x = x->args[0];
    const char *base = "t";
    if (x->kind == EX_LOAD) {
        const Expr *i = x->args[0];
        while (i->kind == EX_CAST)
            i = i->args[0];
        const char *at = i->kind == EX_VAR    ? i->u.axis->name
                         : i->kind == EX_SIZE ? i->u.size->name
                                              : "v";
        base = arena_printf(m->arena, "%s_%s", x->u.buf->name, at);
        if (!name_taken(h, base)) {
            vec_push(&h->names, base);
            return base;
        }
    }
    for (int k = 0;; k++) {
        const char *n = arena_printf(m->arena, "%s%d", base, k);
        if (!name_taken(h, n)) {
            vec_push(&h->names, n);
            return n;
        }
    }
}

static int by_height(Loop *L, Expr *a, Expr *b) {
    return height(L, a) - height(L, b);
}

static Stmt *hoist_stmt(Hoist *h, Stmt *s);

static void note_node(const Expr *e, void *ctx) {
    ptrmap_put(ctx, e, (void *)e);
}

/* Is s a run-time check (`if !ok: fail N`) whose condition does not
 * change in L and loads nothing? */
static bool invariant_check(Loop *L, const Stmt *s) {
    if (s->kind != ST_IF || s->u.if_.else_s || !s->u.if_.then_s)
        return false;
    const Stmt *t = s->u.if_.then_s;
    for (int i = 0; t->kind == ST_SEQ && i < t->u.seq.n; i++)
        if (t->u.seq.stmts[i]->kind != ST_FAIL)
            return false;
    return (t->kind == ST_FAIL || t->kind == ST_SEQ) && classify(L, s->u.if_.cond) == INV_PURE;
}

/* Loop s (its body nb, visited) with the invariant run-time checks at the
 * head of its body run once before it (`if nchild_v <= 1: fail 3` in the
 * vector loop over a node's lanes, which the check kept scalar: a
 * TreeRNN's tanh per element). A check that fails in the loop fails at
 * its first iteration, so only a prefix of the body moves (the checks
 * keep their order, ahead of all the first iteration runs), and only out
 * of a loop that provably runs (it would fail where the loop ran none). */
static Stmt *peel_checks(Loop *L, Stmt *s, Stmt *nb, Expr *ext) {
    Module *m = L->h->m;
    if (gpu_loop(s) || !runs(L->h, ext))
        return NULL;
    int n = nb->kind == ST_SEQ ? nb->u.seq.n : 1;
    Stmt *const *kids = nb->kind == ST_SEQ ? nb->u.seq.stmts : &nb;
    int k = 0;
    while (k < n - 1 && invariant_check(L, kids[k]))
        k++;
    if (!k)
        return NULL;
    Stmt **out = base_xmalloc(sizeof(Stmt *) * (size_t)(k + 1));
    memcpy(out, kids, sizeof(Stmt *) * (size_t)k);
    out[k] = lower_for_like(m, s, s->u.loop.var, ext, lower_seq(m, n - k, kids + k));
    Stmt *r = lower_seq(m, k + 1, out);
    base_free(out);
    return r;
}

/* Loop s: its invariants bound outside it, then its body visited. */
static Stmt *hoist_loop(Hoist *h, Stmt *s) {
    Module *m = h->m;
    Loop L = {.h = h};
    ptrmap_put(&L.variant, s->u.loop.var, s->u.loop.var);
    scan_bound(&L, s->u.loop.body);
    /* the extent is evaluated once, before the loop: the loads in it are
     * worth sharing with the body */
    if (!gpu_loop(s))
        collect_expr(&L, s->u.loop.extent, true, true);
    int n_ext = L.cands.len; /* evaluated before the loop anyway */
    collect_stmt(&L, s->u.loop.body, true);
    /* A load that is neither in the extent nor provably in range relies on
     * L running: unless it provably does, those lets go under `if extent
     * > 0` (a GPU-bound loop is not wrapped: such loads stay in it). */
    PtrMap guarded = {0}, in_ext = {0};
    bool runs_once = runs(h, s->u.loop.extent);
    for (int i = 0; i < n_ext && !runs_once; i++)
        ir_visit(L.cands.data[i], note_node, &in_ext); /* the extent runs them anyway */
    for (int i = n_ext; i < L.cands.len && !runs_once; i++) {
        Expr *e = L.cands.data[i];
        if (classify(&L, e) == INV_LOAD && !ptrmap_has(&in_ext, e) && !loads_in_range(h, e))
            ptrmap_put(&guarded, e, e);
    }
    ptrmap_free(&in_ext);
    if (guarded.len && gpu_loop(s)) {
        int k = 0;
        for (int i = 0; i < L.cands.len; i++)
            if (!ptrmap_has(&guarded, L.cands.data[i]))
                L.cands.data[k++] = L.cands.data[i];
        L.cands.len = k;
        ptrmap_free(&guarded);
    }
    int n = L.cands.len;
    Axis **vars = NULL;
    Expr **vals = NULL;
    Stmt *body = s->u.loop.body;
    PtrMap to = {0}; /* hoisted expression -> its variable */
    if (n) {
        /* inner expressions first, so an outer one can use their variables
         * (insertion sort: stable, and n is small) */
        Expr **c = L.cands.data;
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && by_height(&L, c[j - 1], c[j]) > 0; j--) {
                Expr *t = c[j];
                c[j] = c[j - 1];
                c[j - 1] = t;
            }
        Subst x = {m, &to, {0}};
        vars = base_xmalloc(sizeof(Axis *) * (size_t)n);
        vals = base_xmalloc(sizeof(Expr *) * (size_t)n);
        for (int i = 0; i < n; i++) {
            vals[i] = subst_operands(&x, c[i]);
            vars[i] = lower_loop_var(m, var_name(h, c[i]), NULL);
            ptrmap_put(&to, c[i], vars[i]->var);
            ptrmap_put(&h->lets, vars[i], expand_lets(h, vals[i]));
            ptrmap_free(&x.memo); /* answers change with each new variable */
        }
        StmtMutator mu = {subst_fe, NULL, m, &x};
        body = lower_mutate(&mu, body);
        ptrmap_free(&x.memo);
    }
    Stmt *nb = hoist_stmt(h, body);
    Expr *ext = s->u.loop.extent;
    if (n) {
        Subst x = {m, &to, {0}};
        ext = subst(&x, ext);
        ptrmap_free(&x.memo);
    }
    Stmt *r = peel_checks(&L, s, nb, ext);
    if (!r)
        r = nb == s->u.loop.body && ext == s->u.loop.extent
                ? s
                : lower_for_like(m, s, s->u.loop.var, ext, nb);
    /* the guarded lets inside the `if`, the others outside it (they never
     * use a guarded one: they load nothing, or only in range, or are run
     * by the extent, and so is what they contain) */
    for (int i = n - 1; i >= 0; i--)
        if (ptrmap_has(&guarded, L.cands.data[i]))
            r = lower_let(m, vars[i], vals[i], r);
    if (guarded.len)
        r = lower_if(m, ir_binary(m, EX_GT, ext, ir_int(m, 0)), r, NULL);
    for (int i = n - 1; i >= 0; i--)
        if (!ptrmap_has(&guarded, L.cands.data[i]))
            r = lower_let(m, vars[i], vals[i], r);
    ptrmap_free(&guarded);
    ptrmap_free(&to);
    base_free(vars);
    base_free(vals);
    vec_free(&L.cands);
    ptrmap_free(&L.variant);
    ptrmap_free(&L.gpu);
    ptrmap_free(&L.inv);
    ptrmap_free(&L.height);
    ptrmap_free(&L.seen);
    ptrmap_free(&L.chosen);
    return r;
}

static Stmt *hoist_stmt(Hoist *h, Stmt *s) {
    Module *m = h->m;
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR:
        return hoist_loop(h, s);
    case ST_IF: {
        Stmt *t = hoist_stmt(h, s->u.if_.then_s), *e = hoist_stmt(h, s->u.if_.else_s);
        if (t == s->u.if_.then_s && e == s->u.if_.else_s)
            return s;
        return lower_if(m, s->u.if_.cond, t, e);
    }
    case ST_LET: {
        if (ir_is_int(s->u.let.value->dtype))
            ptrmap_put(&h->lets, s->u.let.var, expand_lets(h, s->u.let.value));
        Stmt *b = hoist_stmt(h, s->u.let.body);
        return b == s->u.let.body ? s : lower_let(m, s->u.let.var, s->u.let.value, b);
    }
    case ST_ALLOC: {
        Stmt *b = hoist_stmt(h, s->u.alloc.body);
        return b == s->u.alloc.body ? s : lower_alloc(m, s->u.alloc.buf, b);
    }
    case ST_SEQ: {
        int n = s->u.seq.n;
        Stmt **kids = base_xmalloc(sizeof(Stmt *) * (size_t)n);
        bool changed = false;
        for (int i = 0; i < n; i++) {
            kids[i] = hoist_stmt(h, s->u.seq.stmts[i]);
            changed = changed || kids[i] != s->u.seq.stmts[i];
        }
        Stmt *r = changed ? lower_seq(m, n, kids) : s;
        base_free(kids);
        return r;
    }
    default:
        return s;
    }
}

Stmt *lower_hoist(Module *m, Stmt *s) {
    Hoist h = {.m = m};
    StmtMutator mu = {NULL, note_store, m, &h};
    lower_mutate(&mu, s);
    Stmt *r = hoist_stmt(&h, s);
    ptrmap_free(&h.stored);
    ptrmap_free(&h.lets);
    vec_free(&h.names);
    return r;
}
