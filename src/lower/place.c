/*
 * place.c — reduction placement: the initialisation of each reduction,
 * where it starts (the `reduce` pass).
 *
 * lower_module emits a reduction as its updates only, wrapped in
 *
 *     reduce RK into B[, A]:        (A: argmax's index buffer)
 *       body
 *
 * whose body's stores to B (and A) are the updates, `B[e] = B[e] + v`
 * (reduce.c's lower_reduce_update), inside the loops and guards the
 * schedule put around them: the reduction loops, and in place (a spatial
 * loop inside a reduction loop, GEMM's k outside the register tile) the
 * spatial loops inside them.
 *
 * Requires: every REDUCE's updates index B and A by the loop variables of
 * the body that are spatial (a local accumulator: a constant index), and
 * no other statement of the body stores to B or A.
 * Gives: no REDUCE; each became
 *
 *     init                           the elements of B that body updates
 *     body                           set to RK's identity (A to -1)
 *
 * where `init` is body restricted to the elements: the loops whose
 * variables index the updates and the spatial loops (with fresh
 * variables, marked for the
 * partition pass where the update's loop is), the `if`s around
 * them with only the conjuncts over those variables (and the loops
 * outside), each update (a store to B or A, or argmax's `if` over B) its
 * identity store; reduction loops, their guards, the checks and nested
 * reductions of the value and the stages computed at a reduction loop
 * are not part of it. So an accumulator's `acc[0] = 0` comes right before
 * its loops, an in-place reduction's init nest over the spatial loops
 * before its outermost reduction loop, and an element is initialised even
 * where its reduction is empty (sum over k < 0). That is what the walk
 * made before this pass (whose first step it is), so the code is the same.
 */
#include "lower/lower.h"

typedef struct Place {
    Module *m;
    const Stmt *r;  /* the REDUCE */
    PtrMap elems;   /* Axis* -> itself: the variables indexing the updates */
    PtrMap dropped; /* Axis* -> itself: the body's other loop variables */
    PtrMap fresh;   /* Axis* (kept) -> Expr* (its variable in init) */
    PtrMap updated; /* Buffer* -> itself: B and A */
} Place;

static bool is_update(const Place *p, const Buffer *b) {
    return ptrmap_has(&p->updated, b);
}

static void note_var(const Expr *e, void *ctx) {
    if (e->kind == EX_VAR && e->u.axis->kind == AX_LOOP)
        ptrmap_put(ctx, e->u.axis, e->u.axis);
}

/* The variables of the updates' indices and of the spatial loops (elems),
 * then the loop variables that are not among them (dropped). A spatial
 * loop's variable may be missing from the indices: over an extent of at
 * most 1 (the last tile of a split in a partitioned tail) the walk folds it
 * to 0, but the loop still decides whether its elements are updated at all;
 * dropped, the init would store to elements the reduction never touches,
 * past the end of a buffer sized for its region. */
static void collect(Place *p, const Stmt *s, bool loops) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR:
        if (!loops && s->u.loop.spatial)
            ptrmap_put(&p->elems, s->u.loop.var, s->u.loop.var);
        if (loops && !ptrmap_has(&p->elems, s->u.loop.var))
            ptrmap_put(&p->dropped, s->u.loop.var, s->u.loop.var);
        collect(p, s->u.loop.body, loops);
        return;
    case ST_IF:
        collect(p, s->u.if_.then_s, loops);
        collect(p, s->u.if_.else_s, loops);
        return;
    case ST_LET:
        collect(p, s->u.let.body, loops);
        return;
    case ST_STORE:
        if (!loops && is_update(p, s->u.store.buf))
            ir_visit(s->u.store.index, note_var, &p->elems);
        return;
    case ST_ALLOC:
        collect(p, s->u.alloc.body, loops);
        return;
    case ST_SEQ:
        for (int k = 0; k < s->u.seq.n; k++)
            collect(p, s->u.seq.stmts[k], loops);
        return;
    case ST_REDUCE:
        collect(p, s->u.reduce.body, loops);
        return;
    default:
        return;
    }
}

typedef struct Mentions {
    const PtrMap *set;
    bool any;
} Mentions;

static void mentions_fn(const Expr *e, void *ctx) {
    Mentions *u = ctx;
    if ((e->kind == EX_VAR && ptrmap_has(u->set, e->u.axis)) ||
        (e->kind == EX_LOAD && ptrmap_has(u->set, e->u.buf)))
        u->any = true;
}

/* Does e use a variable or load a buffer of `set`? */
static bool mentions(const Expr *e, const PtrMap *set) {
    Mentions u = {set, false};
    ir_visit(e, mentions_fn, &u);
    return u.any;
}

static Expr *sub(Place *p, Expr *e) {
    return e ? ir_substitute(p->m, e, &p->fresh) : NULL;
}

/* cond without its conjuncts over dropped variables (NULL: none left). */
static Expr *keep_conjuncts(Place *p, Expr *cond) {
    if (cond->kind == EX_AND) {
        Expr *a = keep_conjuncts(p, cond->args[0]), *b = keep_conjuncts(p, cond->args[1]);
        if (a == cond->args[0] && b == cond->args[1])
            return cond;
        return a && b ? ir_binary(p->m, EX_AND, a, b) : a ? a : b;
    }
    return mentions(cond, &p->dropped) ? NULL : cond;
}

/* Are a and b the same statement up to the names of the variables they
 * bind (ren: b's bound variables -> a's)? Expressions are hash-consed. */
static bool same(Module *m, const Stmt *a, const Stmt *b, PtrMap *ren) {
    if (!a || !b || a->kind != b->kind)
        return a == b;
#define SAME_EXPR(x, y) (ir_substitute(m, (y), ren) == (x))
    switch (a->kind) {
    case ST_FOR:
        if (a->u.loop.kind != b->u.loop.kind || !SAME_EXPR(a->u.loop.extent, b->u.loop.extent))
            return false;
        ptrmap_put(ren, b->u.loop.var, a->u.loop.var->var);
        return same(m, a->u.loop.body, b->u.loop.body, ren);
    case ST_IF:
        return SAME_EXPR(a->u.if_.cond, b->u.if_.cond) &&
               same(m, a->u.if_.then_s, b->u.if_.then_s, ren) &&
               same(m, a->u.if_.else_s, b->u.if_.else_s, ren);
    case ST_LET:
        if (!SAME_EXPR(a->u.let.value, b->u.let.value))
            return false;
        ptrmap_put(ren, b->u.let.var, a->u.let.var->var);
        return same(m, a->u.let.body, b->u.let.body, ren);
    case ST_STORE:
        return a->u.store.buf == b->u.store.buf && SAME_EXPR(a->u.store.index, b->u.store.index) &&
               SAME_EXPR(a->u.store.value, b->u.store.value);
    case ST_SEQ:
        if (a->u.seq.n != b->u.seq.n)
            return false;
        for (int k = 0; k < a->u.seq.n; k++)
            if (!same(m, a->u.seq.stmts[k], b->u.seq.stmts[k], ren))
                return false;
        return true;
    default:
        return a == b;
    }
#undef SAME_EXPR
}

/* Does init a make init b redundant: b is a, or a under a condition (the
 * copies of a partitioned reduction loop, the full tiles and the last
 * one, have one init between them)? */
static bool covers(Module *m, const Stmt *a, const Stmt *b) {
    PtrMap ren = {0};
    bool r = same(m, a, b, &ren);
    ptrmap_free(&ren);
    if (!r && b->kind == ST_IF && !b->u.if_.else_s) {
        r = same(m, a, b->u.if_.then_s, &ren);
        ptrmap_free(&ren);
    }
    return r;
}

/* The inits kids[0..n) (NULLs: none) in one statement, without those
 * another covers (inits commute). Reuses kids. */
static Stmt *join(Module *m, Stmt **kids, int n) {
    int kept = 0;
    for (int k = 0; k < n; k++) {
        Stmt *r = kids[k];
        for (int j = 0; r && j < kept; j++)
            if (covers(m, kids[j], r))
                r = NULL;
        if (!r)
            continue;
        int still = 0;
        for (int j = 0; j < kept; j++)
            if (!covers(m, r, kids[j]))
                kids[still++] = kids[j];
        kept = still;
        kids[kept++] = r;
    }
    return lower_seq(m, kept, kids);
}

/* s restricted to the elements the updates store (NULL: nothing). */
static Stmt *restrict_to(Place *p, const Stmt *s) {
    Module *m = p->m;
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR: {
        if (!ptrmap_has(&p->elems, s->u.loop.var))
            return restrict_to(p, s->u.loop.body);
        Expr *ext = sub(p, s->u.loop.extent);
        Axis *var = lower_loop_var(m, s->u.loop.var->name, ext);
        ptrmap_put(&p->fresh, s->u.loop.var, var->var);
        Stmt *body = restrict_to(p, s->u.loop.body);
        if (!body)
            return NULL;
        Stmt *r = lower_for(m, var, ext, s->u.loop.kind, body);
        r->u.loop.partition = s->u.loop.partition; /* partitioned as the updates are */
        return r;
    }
    case ST_IF: {
        /* a condition over B or A: argmax's update (`if none yet or
         * better`), both its stores */
        if (mentions(s->u.if_.cond, &p->updated))
            return restrict_to(p, s->u.if_.then_s);
        Stmt *t = restrict_to(p, s->u.if_.then_s), *e = restrict_to(p, s->u.if_.else_s);
        if (!t && !e)
            return NULL;
        Expr *cond = keep_conjuncts(p, s->u.if_.cond);
        if (cond == s->u.if_.cond)
            return lower_if(m, sub(p, cond), t, e);
        /* a condition over the reduction loops (their guard): the then
         * branch's elements where the rest holds; an else branch's may be
         * updated wherever the whole does not hold, so all of them */
        Stmt *both[2] = {cond && t ? lower_if(m, sub(p, cond), t, NULL) : t, e};
        return join(m, both, 2);
    }
    case ST_LET: {
        Stmt *body = restrict_to(p, s->u.let.body);
        return body ? lower_let(m, s->u.let.var, sub(p, s->u.let.value), body) : NULL;
    }
    case ST_STORE: {
        Buffer *b = s->u.store.buf;
        if (!is_update(p, b))
            return NULL;
        Expr *init = b == p->r->u.reduce.buf ? lower_reduce_init(m, p->r->u.reduce.rk, b->dtype)
                                             : ir_int(m, -1);
        return lower_store(m, b, sub(p, s->u.store.index), init);
    }
    case ST_ALLOC: /* a stage computed at a reduction loop, a nested accumulator */
        return restrict_to(p, s->u.alloc.body);
    case ST_SEQ: {
        Stmt **kids = base_xmalloc(sizeof(Stmt *) * (size_t)s->u.seq.n);
        for (int k = 0; k < s->u.seq.n; k++)
            kids[k] = restrict_to(p, s->u.seq.stmts[k]);
        Stmt *r = join(m, kids, s->u.seq.n);
        base_free(kids);
        return r;
    }
    case ST_REDUCE:
        return restrict_to(p, s->u.reduce.body);
    default: /* fail, call, barrier */
        return NULL;
    }
}

static Stmt *place_fs(StmtMutator *mu, Stmt *s) {
    if (s->kind != ST_REDUCE)
        return s;
    Place p = {mu->m, s, {0}, {0}, {0}, {0}};
    ptrmap_put(&p.updated, s->u.reduce.buf, s->u.reduce.buf);
    if (s->u.reduce.arg)
        ptrmap_put(&p.updated, s->u.reduce.arg, s->u.reduce.arg);
    collect(&p, s->u.reduce.body, false);
    collect(&p, s->u.reduce.body, true);
    Stmt *both[2] = {restrict_to(&p, s->u.reduce.body), s->u.reduce.body};
    ptrmap_free(&p.elems);
    ptrmap_free(&p.dropped);
    ptrmap_free(&p.fresh);
    ptrmap_free(&p.updated);
    return lower_seq(mu->m, 2, both);
}

Stmt *lower_place_reductions(Module *m, Stmt *s) {
    StmtMutator mu = {NULL, place_fs, m, NULL};
    return lower_mutate(&mu, s);
}
