/*
 * forward.c — reads of a local copy that is only a window of its source
 * read the source instead.
 *
 * A cache_read with local padding (`XL = cache_read(X, pad=1)`) copies each
 * tile of X into a zeroed local array so that the last, partial tile runs
 * the same code as the others. Once the tile loop is split into whole
 * tiles and the tail, the whole tiles' copy is guard-free and, when the
 * copy keeps X's layout (same strides, rows of the tile contiguous as in
 * X), it is the identity on addresses up to a constant offset:
 *
 *     allocate XL:
 *       for i: for k: XL[i*K + k] = X[io*6*K + i*K + k]     (offset io*6*K)
 *       ... XL[k + i*K] ...
 *
 * Here every read XL[e] becomes X[e + offset] and the copy and its
 * allocation go: 6 rows of a bmm tile copied per tile cost about a fifth
 * of the tile's FMA time at K = 96 (a memcpy call per tile). The tail
 * keeps its padded copy (its guards make it no plain copy).
 *
 * The rewrite applies to an allocation of a BUF_LOCAL array whose body is
 * a sequence starting with the copy: a nest of loops (no guard, no LET)
 * around one store L[f] = S[g] of the same dtype, g - f free of the nest's
 * loop variables. The rest of the sequence may only read L, and must not
 * write S. The copy is made by lowering for the reads after it, so those
 * reads stay inside what it copies.
 *
 * Requires: a simplified kernel body (guards proven true removed).
 * Guarantees: the same values are computed.
 */
#include "lower/lower.h"

/* A copy found at the start of an allocation's body. */
typedef struct Copy {
    Buffer *local, *src;
    Expr *offset; /* src index - local index */
    PtrMap memo;  /* Expr* -> its rewrite */
} Copy;

/* The store at the bottom of a guard-free loop nest, with the nest's
 * variables in vars (at most 8); NULL for anything else. */
static const Stmt *copy_store(const Stmt *s, const Axis **vars, int *nvars) {
    *nvars = 0;
    while (s && s->kind == ST_FOR) {
        LoopKind k = s->u.loop.kind;
        if (*nvars == 8 || k == LOOP_PARALLEL || sched_kind_is_gpu(k))
            return NULL;
        vars[(*nvars)++] = s->u.loop.var;
        s = s->u.loop.body;
    }
    return s && s->kind == ST_STORE ? s : NULL;
}

static bool is_copy(Module *m, const Stmt *s, Buffer *local, Copy *c) {
    const Axis *vars[8];
    int n;
    const Stmt *st = copy_store(s, vars, &n);
    if (!st || st->u.store.buf != local)
        return false;
    const Expr *v = st->u.store.value;
    if (v->kind != EX_LOAD || v->u.buf == local || v->dtype != local->dtype)
        return false;
    Expr *off = ir_binary(m, EX_SUB, v->args[0], st->u.store.index);
    off = off ? ir_simplify_expr(m, off) : NULL;
    if (!off)
        return false;
    for (int i = 0; i < n; i++)
        if (ir_uses_axis(off, vars[i]))
            return false;
    c->local = local;
    c->src = v->u.buf;
    c->offset = off;
    return true;
}

/* Does s store to b? */
static bool stores_to(const Stmt *s, const Buffer *b) {
    if (!s)
        return false;
    switch (s->kind) {
    case ST_FOR:
        return stores_to(s->u.loop.body, b);
    case ST_IF:
        return stores_to(s->u.if_.then_s, b) || stores_to(s->u.if_.else_s, b);
    case ST_LET:
        return stores_to(s->u.let.body, b);
    case ST_STORE:
        return s->u.store.buf == b;
    case ST_ALLOC:
        return stores_to(s->u.alloc.body, b);
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            if (stores_to(s->u.seq.stmts[i], b))
                return true;
        return false;
    case ST_CALL:
        for (int i = 0; i < s->u.call.nargs; i++)
            if (s->u.call.args[i] == b)
                return true;
        return false;
    default:
        return false;
    }
}

/* A load of the copy reads its source. */
static Expr *redirect_load(Module *m, void *ctx, Expr *load) {
    Copy *c = ctx;
    if (load->u.buf != c->local)
        return load;
    Expr *at = ir_simplify_expr(m, ir_binary(m, EX_ADD, load->args[0], c->offset));
    return ir_load(m, c->src, at);
}

static Expr *redirect_fe(StmtMutator *mu, Expr *e) {
    Copy *c = mu->ctx;
    return lower_rewrite_loads(mu->m, e, redirect_load, c, &c->memo);
}

static Stmt *forward_fs(StmtMutator *mu, Stmt *s) {
    if (s->kind != ST_ALLOC || s->u.alloc.buf->scope != BUF_LOCAL)
        return s;
    Stmt *body = s->u.alloc.body;
    Copy c = {0};
    if (!body || body->kind != ST_SEQ || !is_copy(mu->m, body->u.seq.stmts[0], s->u.alloc.buf, &c))
        return s;
    int n = body->u.seq.n;
    Stmt *const *rest = body->u.seq.stmts + 1;
    for (int i = 0; i < n - 1; i++)
        if (stores_to(rest[i], c.local) || stores_to(rest[i], c.src))
            return s;
    StmtMutator re = {.fe = redirect_fe, .m = mu->m, .ctx = &c};
    Stmt **kids = base_xmalloc(sizeof(Stmt *) * (size_t)(n - 1));
    for (int i = 0; i < n - 1; i++)
        kids[i] = lower_mutate(&re, rest[i]);
    Stmt *r = lower_seq(mu->m, n - 1, kids);
    base_free(kids);
    ptrmap_free(&c.memo);
    return r;
}

Stmt *lower_forward_copies(Module *m, Stmt *s) {
    StmtMutator mu = {.fs = forward_fs, .m = m};
    return lower_mutate(&mu, s);
}
