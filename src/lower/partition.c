/*
 * partition.c — tail partitioning of non-dividing splits, as a pass.
 *
 * Requires: a loop marked `partition` (Stmt.u.loop.partition, printed
 * `partition for o in 0..ceil(E/f)`), the outer loop of a split whose
 * inner loop `i in 0..f` is inside it and whose statements are guarded by
 * an `if` one conjunct of which is `o*f + i < E` (nest.c emits this form
 * for a nest with no stage computed inside it and no allocation inside
 * the split's loops; the other nests it still partitions while
 * generating: docs/pipeline.md).
 * Gives: no marked loop; each became
 *
 *     for o in 0..E/f: S              (the full tiles: the conjunct gone)
 *     if 0 < E%f:                     (the last tile, o = E/f)
 *       S[o := E/f, i in 0..E - E/f*f, the conjunct gone]
 *
 * with fresh variables in the last tile, every inner loop of the split
 * (an in-place reduction's init and update nests have one each) over
 * E - E/f*f there, the marked loops inside both partitioned in turn (the
 * outer split's copies first, as nest.c nests them). In both copies the
 * conjunct holds, so it is true wherever it appears: a ragged extent that
 * depends on the split's axis, `select(o*f + i < E, len[...], 0)` in the
 * guarded tile (0 past the end), is `len[...]` there. The full tiles keep
 * o, its extent now E/f: a new variable would reorder the terms the
 * simplifier sorts, so the code would differ from nest.c's. A marked loop
 * without such a conjunct (the guard proven) is left as it is, unmarked.
 * The result is what nest.c made before this pass, which runs first so
 * that `checks` sees the same code: an access or division of a value that
 * a copy rebuilds (the last tile's fresh variables, a select dropped)
 * gets its original's Kernel.check_src entry (its message, whether its
 * stage pads a loop), as the walk's lowering gave each copy its own;
 * without it the checks pass would check the copy's reads of storage
 * padding against the unpadded extent and skip its divisions.
 */
#include "lower/lower.h"

/* Is e the loop variable v? */
static bool is_var(const Expr *e, const Axis *v) {
    return e->kind == EX_VAR && e->u.axis == v;
}

/* The inner variable i of `o*f + i` (either order), or NULL. */
static const Axis *split_inner(const Expr *e, const Axis *o, int64_t *f) {
    if (e->kind != EX_ADD)
        return NULL;
    for (int k = 0; k < 2; k++) {
        const Expr *mul = e->args[k], *in = e->args[1 - k];
        if (mul->kind != EX_MUL || in->kind != EX_VAR)
            continue;
        for (int j = 0; j < 2; j++)
            if (is_var(mul->args[j], o) && ir_is_const_int(mul->args[1 - j], f))
                return in->u.axis;
    }
    return NULL;
}

/* The guard's conjunct `o*f + i < E` in cond, or NULL. */
static Expr *find_conjunct(Expr *cond, const Axis *o, const Axis **inner, int64_t *f) {
    if (cond->kind == EX_AND) {
        Expr *r = find_conjunct(cond->args[0], o, inner, f);
        return r ? r : find_conjunct(cond->args[1], o, inner, f);
    }
    if (cond->kind == EX_LT && (*inner = split_inner(cond->args[0], o, f)))
        return cond;
    return NULL;
}

/* The guard of o's split in s: an `if` without else in s whose condition
 * has the conjunct, i bound by a loop of extent f between. */
static Expr *find_guard(Stmt *s, const Axis *o, const Axis **inner, int64_t *f) {
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR: {
        Expr *c = find_guard(s->u.loop.body, o, inner, f);
        int64_t e;
        if (c && *inner == s->u.loop.var && !(ir_is_const_int(s->u.loop.extent, &e) && e == *f))
            return NULL;
        return c;
    }
    case ST_IF: {
        Expr *c = s->u.if_.else_s ? NULL : find_conjunct(s->u.if_.cond, o, inner, f);
        return c ? c : find_guard(s->u.if_.then_s, o, inner, f);
    }
    case ST_LET:
        return find_guard(s->u.let.body, o, inner, f);
    case ST_ALLOC:
        return find_guard(s->u.alloc.body, o, inner, f);
    case ST_REDUCE: /* (nest.c's trial, before the reduce pass) */
        return find_guard(s->u.reduce.body, o, inner, f);
    case ST_SEQ:
        for (int k = 0; k < s->u.seq.n; k++) {
            Expr *c = find_guard(s->u.seq.stmts[k], o, inner, f);
            if (c)
                return c;
        }
        return NULL;
    default:
        return NULL;
    }
}

bool lower_partition_applies(Stmt *loop) {
    const Axis *inner = NULL;
    int64_t f = 0;
    return loop->kind == ST_FOR && find_guard(loop->u.loop.body, loop->u.loop.var, &inner, &f);
}

/* Kernel.check_src as the pass extends it: the copies of its nodes. */
typedef struct Sources {
    Vec(CheckSrc) v;
    PtrMap index; /* loop-IR node -> its entry's index + 1 */
} Sources;

/* One copy of a marked loop's body. */
typedef struct Copy {
    Module *m;
    const Axis *o; /* the split `o*f + i < E`, every inner i */
    int64_t f;
    const Expr *E;
    PtrMap inner;    /* Axis* i -> itself */
    PtrMap subst;    /* Axis* -> Expr*: o's value, fresh variables */
    bool fresh;      /* every bound variable anew (the last tile) */
    Expr *inner_ext; /* fresh: the extent of the inner loops */
    Sources *src;
} Copy;

/* The inner variable of a conjunct of o's split, or NULL. */
static const Axis *split_guard(const Copy *c, const Expr *e) {
    int64_t f;
    const Axis *i;
    if (e->kind == EX_LT && e->args[1] == c->E && (i = split_inner(e->args[0], c->o, &f)) &&
        f == c->f)
        return i;
    return NULL;
}

/* The inner loops of the split: each copy of the nest below o (an init
 * nest and an update nest) has its own. */
static void collect_inner(Copy *c, const Expr *cond) {
    const Axis *i;
    if (cond->kind == EX_AND) {
        collect_inner(c, cond->args[0]);
        collect_inner(c, cond->args[1]);
    } else if ((i = split_guard(c, cond))) {
        ptrmap_put(&c->inner, i, (void *)i);
    }
}

static void collect(Copy *c, const Stmt *s) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR:
        collect(c, s->u.loop.body);
        break;
    case ST_IF:
        if (!s->u.if_.else_s)
            collect_inner(c, s->u.if_.cond);
        collect(c, s->u.if_.then_s);
        collect(c, s->u.if_.else_s);
        break;
    case ST_LET:
        collect(c, s->u.let.body);
        break;
    case ST_ALLOC:
        collect(c, s->u.alloc.body);
        break;
    case ST_SEQ:
        for (int k = 0; k < s->u.seq.n; k++)
            collect(c, s->u.seq.stmts[k]);
        break;
    default:
        break;
    }
}

/* cond without the split's conjuncts (NULL when nothing is left). */
static Expr *drop_conjuncts(Copy *c, Expr *cond) {
    if (split_guard(c, cond))
        return NULL;
    if (cond->kind != EX_AND)
        return cond;
    Expr *a = drop_conjuncts(c, cond->args[0]), *b = drop_conjuncts(c, cond->args[1]);
    if (!a || !b)
        return a ? a : b;
    return a == cond->args[0] && b == cond->args[1] ? cond : ir_binary(c->m, EX_AND, a, b);
}

/* e in the copy: its variables substituted, the split's conjuncts true
 * (as they are in both copies: an extent that depends on the split's
 * axis, a ragged `l < len[b]`, 0 past the end in the guarded tile:
 * `select(b < B, len[...], 0)`, loses its select). memo: within one
 * expression, since a variable's fresh copy depends on the loop that
 * binds it. */
static Expr *sub_rec(Copy *c, Expr *e, PtrMap *memo) {
    if (e->kind == EX_VAR && ptrmap_has(&c->subst, e->u.axis))
        return ptrmap_get(&c->subst, e->u.axis);
    if (e->n == 0)
        return e;
    Expr *done = ptrmap_get(memo, e);
    if (done)
        return done;
    Module *m = c->m;
    Expr *r;
    int64_t t;
    if (e->kind == EX_LT && split_guard(c, e)) {
        r = ir_bool(m, true);
    } else {
        Expr *args[3];
        RV_ASSERT(e->n <= 3 || e->kind == EX_READ || e->kind == EX_UFCALL);
        Expr **a = e->n <= 3 ? args : base_xmalloc(sizeof(Expr *) * (size_t)e->n);
        for (int k = 0; k < e->n; k++)
            a[k] = sub_rec(c, e->args[k], memo);
        if (e->kind == EX_SELECT && ir_is_const_int(a[0], &t) && t)
            r = a[1];
        else if (e->kind == EX_AND && ir_is_const_int(a[0], &t) && t)
            r = a[1];
        else if (e->kind == EX_AND && ir_is_const_int(a[1], &t) && t)
            r = a[0];
        else
            r = ir_rebuild(m, e, a);
        if (a != args)
            base_free(a);
    }
    /* the copy of an access or division stands for what e does */
    size_t at = (size_t)ptrmap_get(&c->src->index, e);
    if (at && r != e && !ptrmap_has(&c->src->index, r)) {
        CheckSrc cs = c->src->v.data[at - 1];
        cs.node = r;
        vec_push(&c->src->v, cs);
        ptrmap_put(&c->src->index, r, (void *)(size_t)c->src->v.len);
    }
    ptrmap_put(memo, e, r);
    return r;
}

static Expr *sub(Copy *c, Expr *e) {
    if (!e)
        return NULL;
    PtrMap memo = {0};
    Expr *r = sub_rec(c, e, &memo);
    ptrmap_free(&memo);
    return r;
}

/* A variable of the copy bound where v was, over ext. */
static Axis *rebind(Copy *c, Axis *v, Expr *ext) {
    if (!c->fresh)
        return v;
    Axis *n = lower_loop_var(c->m, v->name, ext);
    ptrmap_put(&c->subst, v, n->var);
    return n;
}

static Stmt *copy(Copy *c, Stmt *s) {
    Module *m = c->m;
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR: {
        Expr *ext = c->fresh && ptrmap_has(&c->inner, s->u.loop.var) ? c->inner_ext
                                                                     : sub(c, s->u.loop.extent);
        Axis *v = rebind(c, s->u.loop.var, ext);
        Stmt *r = lower_for_like(m, s, v, ext, copy(c, s->u.loop.body));
        r->u.loop.partition = s->u.loop.partition;
        return r;
    }
    case ST_IF: {
        Expr *cond = s->u.if_.else_s ? s->u.if_.cond : drop_conjuncts(c, s->u.if_.cond);
        Stmt *t = copy(c, s->u.if_.then_s), *e = copy(c, s->u.if_.else_s);
        return cond ? lower_if(m, sub(c, cond), t, e) : t;
    }
    case ST_LET: {
        Expr *v = sub(c, s->u.let.value);
        Axis *var = rebind(c, s->u.let.var, sub(c, s->u.let.var->extent));
        return lower_let(m, var, v, copy(c, s->u.let.body));
    }
    case ST_STORE:
        return lower_store(m, s->u.store.buf, sub(c, s->u.store.index), sub(c, s->u.store.value));
    case ST_ALLOC:
        return lower_alloc(m, s->u.alloc.buf, copy(c, s->u.alloc.body));
    case ST_SEQ: {
        Stmt **kids = base_xmalloc(sizeof(Stmt *) * (size_t)s->u.seq.n);
        for (int k = 0; k < s->u.seq.n; k++)
            kids[k] = copy(c, s->u.seq.stmts[k]);
        Stmt *r = lower_seq(m, s->u.seq.n, kids);
        base_free(kids);
        return r;
    }
    default:
        return s;
    }
}

static Stmt *partition_loop(Sources *src, Module *m, Stmt *s);

/* Top-down, so that a marked loop is partitioned before the marked loops
 * inside it (which its copies then hold twice). */
static Stmt *walk(Sources *src, Module *m, Stmt *s) {
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR: {
        if (s->u.loop.partition)
            return partition_loop(src, m, s);
        Stmt *b = walk(src, m, s->u.loop.body);
        return b == s->u.loop.body
                   ? s
                   : lower_for_like(m, s, s->u.loop.var, s->u.loop.extent, b);
    }
    case ST_IF: {
        Stmt *t = walk(src, m, s->u.if_.then_s), *e = walk(src, m, s->u.if_.else_s);
        return t == s->u.if_.then_s && e == s->u.if_.else_s ? s : lower_if(m, s->u.if_.cond, t, e);
    }
    case ST_LET: {
        Stmt *b = walk(src, m, s->u.let.body);
        return b == s->u.let.body ? s : lower_let(m, s->u.let.var, s->u.let.value, b);
    }
    case ST_ALLOC: {
        Stmt *b = walk(src, m, s->u.alloc.body);
        return b == s->u.alloc.body ? s : lower_alloc(m, s->u.alloc.buf, b);
    }
    case ST_SEQ: {
        int n = s->u.seq.n;
        Stmt **kids = base_xmalloc(sizeof(Stmt *) * (size_t)n);
        bool changed = false;
        for (int k = 0; k < n; k++)
            changed |= (kids[k] = walk(src, m, s->u.seq.stmts[k])) != s->u.seq.stmts[k];
        Stmt *r = changed ? lower_seq(m, n, kids) : s;
        base_free(kids);
        return r;
    }
    default:
        return s;
    }
}

/* A marked loop: full tiles, then the last. */
static Stmt *partition_loop(Sources *src, Module *m, Stmt *s) {
    Axis *o = s->u.loop.var;
    const Axis *inner = NULL;
    int64_t f = 0;
    Expr *conj = find_guard(s->u.loop.body, o, &inner, &f);
    if (!conj)
        return lower_for(m, o, s->u.loop.extent, s->u.loop.kind, walk(src, m, s->u.loop.body));
    Expr *E = conj->args[1], *F = ir_int(m, f);
    Expr *last = ir_simplify_expr(m, ir_binary(m, EX_DIV, E, F));
    Copy c = {m, o, f, E, {0}, {0}, false, NULL, src};
    collect(&c, s->u.loop.body);
    /* the full tiles: o itself over fewer iterations (a new variable
     * would change the order in which the simplifier sorts the terms of
     * the indices, so the code nest.c made) */
    o->extent = last;
    Stmt *a = lower_for(m, o, last, s->u.loop.kind, copy(&c, s->u.loop.body));
    /* the last tile */
    c.fresh = true;
    c.inner_ext = ir_simplify_expr(m, ir_binary(m, EX_SUB, E, ir_binary(m, EX_MUL, last, F)));
    ptrmap_put(&c.subst, o, last);
    Stmt *b = copy(&c, s->u.loop.body);
    ptrmap_free(&c.subst);
    ptrmap_free(&c.inner);
    Expr *has_tail =
        ir_simplify_expr(m, ir_binary(m, EX_GT, ir_binary(m, EX_MOD, E, F), ir_int(m, 0)));
    /* then the copies' own marked loops (the inner splits) */
    Stmt *both[2] = {walk(src, m, a), lower_if(m, has_tail, walk(src, m, b), NULL)};
    return lower_seq(m, 2, both);
}

rv_status lower_partition(Kernel *k) {
    Sources src = {0};
    for (int i = 0; i < k->ncheck_src; i++) {
        vec_push(&src.v, k->check_src[i]);
        ptrmap_put(&src.index, k->check_src[i].node, (void *)(size_t)src.v.len);
    }
    k->body = walk(&src, k->m, k->body);
    if (src.v.len > k->ncheck_src) {
        k->ncheck_src = src.v.len;
        k->check_src = arena_memdup(k->m->arena, src.v.data, sizeof(CheckSrc) * (size_t)src.v.len);
    }
    vec_free(&src.v);
    ptrmap_free(&src.index);
    return RV_OK;
}
