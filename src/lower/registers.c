/*
 * registers.c — a register tile becomes one local per vector (or scalar)
 * of the tile, so that it lives in registers whatever the C compiler's
 * passes do with arrays.
 *
 * A cache_write tile or promote.c's accumulator is a local array that the
 * micro-kernel indexes by unrolled and vector loop variables only:
 *
 *     allocate TL: f32[384] local
 *       for k in 0..K:
 *         unroll for ii in 0..6:  unroll for jv2 in 0..4:  vector for jv in 0..16:
 *           TL[ii*64 + jv2*16 + jv] = TL[same] + A[..] * BL[..]
 *       for ii in 0..6: ...  T[..] = TL[ii*64 + jv2*16 + jv]
 *
 * Whether GCC keeps such an array in registers depended on which of its
 * passes got it first (scalar replacement of aggregates split the tile of
 * one kernel into pieces that spilled inside the k loop; without it,
 * other tiles spilled: a 6 x 64 tile stored 26-34 vectors to the stack per
 * k). Here the loops whose variables index the tile, other than the
 * vector loop, are unrolled in the IR (fresh variables in each copy), so
 * every index is a constant plus the vector loop's variable, and each
 * vector of the tile becomes its own local of the vector's lanes:
 *
 *     allocate TL_0: f32[16] local  ...  allocate TL_23: f32[16] local
 *       for k in 0..K:
 *         vector for jv in 0..16:  TL_0[jv] = TL_0[jv] + A[..] * BL[..]
 *         ...                      (24 vector loops)
 *
 * which the C back end declares as vector variables (`rv_f32x16 TL_0`,
 * c.c) and one-element ones as scalars: values whose address is never
 * taken, registers from the start of every C compiler.
 *
 * The tile: a local array of constant size, at most REG_FILE_BYTES (the
 * 32 vector registers of AVX-512), at least two elements, every access in
 * its allocation at an index c + sum(a_v * v) over the variables v of
 * unrolled loops of constant extent inside the allocation, or, for a tile
 * of vectors, serial ones around unrolled and vector loops only (those are
 * unrolled) and, for a vector access, the innermost loop's variable
 * when that loop is a vector loop of constant extent W (a power of two up
 * to 16 lanes), or a masked tail of fewer lanes than W (an extent bounded
 * by W, as c_vector.c runs it: the idle lanes of the tile's vector are
 * never stored), with coefficient 1; c and the a_v multiples of W, the same
 * W for every access (1 when none is a vector access), every index inside
 * the tile; no access under a parallel or GPU loop; the tile not an
 * extern call's argument nor a reduction's; the unrolled loops around any
 * point at most REG_MAX_COPIES copies. Anything else keeps the array.
 *
 * Requires: a simplified body without LETs (after promote, before hoist).
 * Guarantees: the same operations in the same order.
 */
#include "lower/lower.h"

#include <stdio.h>

#define REG_FILE_BYTES 2048
#define REG_MAX_COPIES 64
#define REG_MAX_LANES 16
#define REG_MAX_DEPTH 32

typedef struct Tile {
    Module *m;
    Buffer *buf;
    int64_t size;
    int64_t lanes; /* W; 0 until an access says */
    PtrMap unroll; /* Axis* of a loop to unroll -> itself */
    const Stmt *stack[REG_MAX_DEPTH]; /* the loops around, inside the allocation */
    int depth;
    int shared; /* parallel or GPU loops around, inside the allocation */
    bool ok;
} Tile;

/* Does s hold only unrolled and vector loops? A serial loop indexing a
 * tile of vectors is unrolled only then (the write-back nest of a tile
 * whose consumer's schedule did not unroll it), not around loops the
 * schedule left rolled (a tile of dot products, each a k loop); one
 * indexing a tile of scalars never (a cache_read row the schedule reads
 * in a rolled loop stays an array). */
static bool straight(const Stmt *s) {
    if (!s)
        return true;
    switch (s->kind) {
    case ST_FOR:
        return (s->u.loop.kind == LOOP_UNROLL || s->u.loop.kind == LOOP_VECTOR) &&
               straight(s->u.loop.body);
    case ST_IF:
        return straight(s->u.if_.then_s) && straight(s->u.if_.else_s);
    case ST_ALLOC:
        return straight(s->u.alloc.body);
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            if (!straight(s->u.seq.stmts[i]))
                return false;
        return true;
    default:
        return true;
    }
}

/* Checks one access of the tile at idx under t->stack. */
static void check_access(Tile *t, Expr *idx) {
    Module *m = t->m;
    const Stmt *inner = t->depth ? t->stack[t->depth - 1] : NULL;
    int64_t w = 1, ext;
    if (t->shared)
        goto fail;
    int64_t tail = 0; /* the inner loop's bound when it is a masked tail */
    if (inner && inner->u.loop.kind == LOOP_VECTOR && ir_uses_axis(idx, inner->u.loop.var)) {
        if (!ir_is_const_int(inner->u.loop.extent, &w)) {
            /* a masked tail (c_vector.c, masked_tail): n < its bound lanes
             * of a vector of the next power of two, the lanes that do not
             * run idle; the tile's vector holds them (never stored: the
             * write-back is a masked tail too) */
            if (!ir_upper_bound(m, inner->u.loop.extent, &tail) || tail < 2 ||
                tail > REG_MAX_LANES)
                goto fail;
            for (w = 1; w < tail; w *= 2)
                ;
        }
        if (w < 2 || w > REG_MAX_LANES || (w & (w - 1)))
            goto fail;
    }
    if (t->lanes && t->lanes != w)
        goto fail;
    t->lanes = w;
    PtrMap zero = {0};
    int64_t lo = 0, hi = 0;
    for (int i = 0; i < t->depth; i++) {
        const Stmt *l = t->stack[i];
        Axis *v = l->u.loop.var;
        ptrmap_put(&zero, v, ir_int(m, 0));
        if (!ir_uses_axis(idx, v))
            continue;
        Expr *c = ir_linear_coeff(m, idx, v);
        c = c ? ir_simplify_expr(m, c) : NULL;
        int64_t a;
        if (l == inner && w > 1 && tail)
            ext = w;
        else if (!ir_is_const_int(l->u.loop.extent, &ext))
            goto fail_map;
        if (!c || !ir_is_const_int(c, &a) || ext < 1)
            goto fail_map;
        if (l == inner && w > 1) {
            if (a != 1 || ext != w)
                goto fail_map;
            hi += w - 1;
            continue;
        }
        if (l->u.loop.kind != LOOP_UNROLL &&
            (l->u.loop.kind != LOOP_SERIAL || w == 1 || !straight(l->u.loop.body)))
            goto fail_map;
        if (a % w)
            goto fail_map;
        if (a < 0)
            lo += a * (ext - 1);
        else
            hi += a * (ext - 1);
        ptrmap_put(&t->unroll, v, v);
    }
    int64_t c0;
    Expr *base = ir_simplify_expr(m, ir_substitute(m, idx, &zero));
    ptrmap_free(&zero);
    if (!ir_is_const_int(base, &c0) || c0 % w || c0 + lo < 0 || c0 + hi >= t->size)
        goto fail;
    return;
fail_map:
    ptrmap_free(&zero);
fail:
    t->ok = false;
}

static void access_fn(const Expr *e, void *ctx) {
    Tile *t = ctx;
    if (e->kind == EX_LOAD && e->u.buf == t->buf && t->ok)
        check_access(t, e->args[0]);
}

static void scan_expr(Tile *t, Expr *e) {
    if (e && t->ok)
        ir_visit(e, access_fn, t);
}

static void scan(Tile *t, const Stmt *s) {
    if (!s || !t->ok)
        return;
    switch (s->kind) {
    case ST_FOR: {
        scan_expr(t, s->u.loop.extent);
        LoopKind k = s->u.loop.kind;
        bool shared = k != LOOP_SERIAL && k != LOOP_UNROLL && k != LOOP_VECTOR;
        if (t->depth == REG_MAX_DEPTH) {
            t->ok = false;
            return;
        }
        t->stack[t->depth++] = s;
        t->shared += shared;
        scan(t, s->u.loop.body);
        t->shared -= shared;
        t->depth--;
        return;
    }
    case ST_IF:
        scan_expr(t, s->u.if_.cond);
        scan(t, s->u.if_.then_s);
        scan(t, s->u.if_.else_s);
        return;
    case ST_STORE:
        if (s->u.store.buf == t->buf)
            check_access(t, s->u.store.index);
        scan_expr(t, s->u.store.index);
        scan_expr(t, s->u.store.value);
        return;
    case ST_ALLOC:
        scan(t, s->u.alloc.body);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            scan(t, s->u.seq.stmts[i]);
        return;
    case ST_CALL:
        for (int i = 0; i < s->u.call.nargs; i++)
            if (s->u.call.args[i] == t->buf)
                t->ok = false;
        return;
    case ST_FAIL:
    case ST_BARRIER:
        return;
    default: /* LET (none before hoist), REDUCE (none after place) */
        t->ok = false;
        return;
    }
}

/* The most copies the unrolling makes of any statement of s. */
static int64_t copies(const Tile *t, const Stmt *s) {
    int64_t most = 1, n = 1;
    if (!s)
        return 1;
    switch (s->kind) {
    case ST_FOR:
        if (ptrmap_has(&t->unroll, s->u.loop.var))
            ir_is_const_int(s->u.loop.extent, &n);
        return n * copies(t, s->u.loop.body);
    case ST_IF: {
        int64_t a = copies(t, s->u.if_.then_s), b = copies(t, s->u.if_.else_s);
        return a > b ? a : b;
    }
    case ST_ALLOC:
        return copies(t, s->u.alloc.body);
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++) {
            int64_t c = copies(t, s->u.seq.stmts[i]);
            most = c > most ? c : most;
        }
        return most;
    default:
        return 1;
    }
}

/* ---- unrolling ---- */

/* A copy of s with subst applied and every loop bound anew. */
static Stmt *copy(Module *m, Stmt *s, PtrMap *subst) {
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR: {
        Expr *ext = ir_substitute(m, s->u.loop.extent, subst);
        Axis *v = lower_loop_var(m, s->u.loop.var->name, ext);
        ptrmap_put(subst, s->u.loop.var, ir_var(m, v));
        return lower_for_like(m, s, v, ext, copy(m, s->u.loop.body, subst));
    }
    case ST_IF:
        return lower_if(m, ir_substitute(m, s->u.if_.cond, subst), copy(m, s->u.if_.then_s, subst),
                        copy(m, s->u.if_.else_s, subst));
    case ST_STORE:
        return lower_store(m, s->u.store.buf, ir_substitute(m, s->u.store.index, subst),
                           ir_substitute(m, s->u.store.value, subst));
    case ST_ALLOC:
        return lower_alloc(m, s->u.alloc.buf, copy(m, s->u.alloc.body, subst));
    case ST_SEQ: {
        Stmt **kids = base_xmalloc(sizeof(Stmt *) * (size_t)s->u.seq.n);
        for (int k = 0; k < s->u.seq.n; k++)
            kids[k] = copy(m, s->u.seq.stmts[k], subst);
        Stmt *r = lower_seq(m, s->u.seq.n, kids);
        base_free(kids);
        return r;
    }
    default: /* FAIL; scan let nothing else through */
        return s;
    }
}

/* After its body: a marked loop becomes its iterations in order. */
static Stmt *unroll_fs(StmtMutator *mu, Stmt *s) {
    Tile *t = mu->ctx;
    int64_t n;
    if (s->kind != ST_FOR || !ptrmap_has(&t->unroll, s->u.loop.var))
        return s;
    RV_ASSERT(ir_is_const_int(s->u.loop.extent, &n));
    Stmt **its = base_xmalloc(sizeof(Stmt *) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        PtrMap subst = {0};
        ptrmap_put(&subst, s->u.loop.var, ir_int(mu->m, i));
        its[i] = copy(mu->m, s->u.loop.body, &subst);
        ptrmap_free(&subst);
    }
    Stmt *r = lower_seq(mu->m, (int)n, its);
    base_free(its);
    return r;
}

/* After its body: a vector loop of more than REG_MAX_LANES lanes (a
 * multiple) becomes an unrolled loop over vectors of REG_MAX_LANES, as
 * the C back end runs it (c_vector.c), so that the tile's accesses in it
 * are whole vectors. */
static Stmt *strip_fs(StmtMutator *mu, Stmt *s) {
    Module *m = mu->m;
    int64_t n;
    if (s->kind != ST_FOR || s->u.loop.kind != LOOP_VECTOR ||
        !ir_is_const_int(s->u.loop.extent, &n) || n <= REG_MAX_LANES || n % REG_MAX_LANES)
        return s;
    const char *name = s->u.loop.var->name;
    Axis *o = lower_loop_var(m, name, ir_int(m, n / REG_MAX_LANES));
    Axis *l = lower_loop_var(m, name, ir_int(m, REG_MAX_LANES));
    PtrMap subst = {0};
    ptrmap_put(&subst, s->u.loop.var,
               ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, ir_var(m, o), ir_int(m, REG_MAX_LANES)),
                         ir_var(m, l)));
    Stmt *body = copy(m, s->u.loop.body, &subst);
    ptrmap_free(&subst);
    return lower_for(m, o, o->extent, LOOP_UNROLL,
                     lower_for(m, l, l->extent, LOOP_VECTOR, body));
}

/* ---- the tile's vectors ---- */

typedef struct Split {
    Tile *t;
    Buffer **part; /* per vector of the tile, created when first used */
    const Stmt *stack[REG_MAX_DEPTH];
    int depth;
} Split;

/* The part and its index for the tile's index idx. */
static Buffer *part_of(Split *sp, Expr *idx, Expr **at) {
    Tile *t = sp->t;
    Module *m = t->m;
    const Stmt *inner = sp->depth ? sp->stack[sp->depth - 1] : NULL;
    PtrMap zero = {0};
    *at = ir_int(m, 0);
    if (t->lanes > 1) {
        RV_ASSERT(inner && inner->u.loop.kind == LOOP_VECTOR);
        *at = ir_var(m, inner->u.loop.var);
        ptrmap_put(&zero, inner->u.loop.var, ir_int(m, 0));
    }
    int64_t c;
    RV_ASSERT(ir_is_const_int(ir_simplify_expr(m, ir_substitute(m, idx, &zero)), &c));
    ptrmap_free(&zero);
    int64_t k = c / t->lanes;
    if (!sp->part[k]) {
        char name[128];
        snprintf(name, sizeof name, "%s_%lld", t->buf->name, (long long)k);
        sp->part[k] =
            ir_buffer_new(m, ir_name(m, name), t->buf->dtype, ir_int(m, t->lanes), BUF_LOCAL);
    }
    return sp->part[k];
}

static Expr *split_load(Module *m, void *ctx, Expr *load) {
    Split *sp = ctx;
    if (load->u.buf != sp->t->buf)
        return load;
    Expr *at;
    Buffer *p = part_of(sp, load->args[0], &at);
    return ir_load(m, p, at);
}

static Expr *split_expr(Split *sp, Expr *e) {
    if (!e)
        return NULL;
    PtrMap memo = {0};
    Expr *r = lower_rewrite_loads(sp->t->m, e, split_load, sp, &memo);
    ptrmap_free(&memo);
    return r;
}

static Stmt *split(Split *sp, Stmt *s) {
    Module *m = sp->t->m;
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR: {
        RV_ASSERT(sp->depth < REG_MAX_DEPTH);
        sp->stack[sp->depth++] = s;
        Stmt *body = split(sp, s->u.loop.body);
        sp->depth--;
        return lower_for_like(m, s, s->u.loop.var, split_expr(sp, s->u.loop.extent), body);
    }
    case ST_IF:
        return lower_if(m, split_expr(sp, s->u.if_.cond), split(sp, s->u.if_.then_s),
                        split(sp, s->u.if_.else_s));
    case ST_STORE: {
        Expr *idx = s->u.store.index, *v = split_expr(sp, s->u.store.value);
        if (s->u.store.buf != sp->t->buf)
            return lower_store(m, s->u.store.buf, split_expr(sp, idx), v);
        Expr *at;
        Buffer *p = part_of(sp, idx, &at);
        return lower_store(m, p, at, v);
    }
    case ST_ALLOC:
        return lower_alloc(m, s->u.alloc.buf, split(sp, s->u.alloc.body));
    case ST_SEQ: {
        Stmt **kids = base_xmalloc(sizeof(Stmt *) * (size_t)s->u.seq.n);
        for (int k = 0; k < s->u.seq.n; k++)
            kids[k] = split(sp, s->u.seq.stmts[k]);
        Stmt *r = lower_seq(m, s->u.seq.n, kids);
        base_free(kids);
        return r;
    }
    default:
        return s;
    }
}

static Stmt *registers_fs(StmtMutator *mu, Stmt *s) {
    Module *m = mu->m;
    int64_t n;
    if (s->kind != ST_ALLOC)
        return s;
    Buffer *b = s->u.alloc.buf;
    if (b->scope != BUF_LOCAL || !b->size || !ir_is_const_int(b->size, &n) || n < 2 ||
        n * (int64_t)rv_dtype_size(b->dtype) > REG_FILE_BYTES)
        return s;
    Tile t = {.m = m, .buf = b, .size = n, .ok = true};
    StmtMutator strip = {.fs = strip_fs, .m = m};
    Stmt *body = lower_mutate(&strip, s->u.alloc.body);
    scan(&t, body);
    if (!t.ok || !t.lanes || n % t.lanes || copies(&t, body) > REG_MAX_COPIES) {
        ptrmap_free(&t.unroll);
        return s;
    }
    StmtMutator un = {.fs = unroll_fs, .m = m, .ctx = &t};
    body = lower_mutate(&un, body);
    Split sp = {.t = &t, .part = base_xcalloc((size_t)(n / t.lanes), sizeof(Buffer *))};
    body = split(&sp, body);
    for (int64_t k = n / t.lanes - 1; k >= 0; k--)
        if (sp.part[k])
            body = lower_alloc(m, sp.part[k], body);
    base_free(sp.part);
    ptrmap_free(&t.unroll);
    return body;
}

Stmt *lower_register_tiles(Module *m, Stmt *s) {
    StmtMutator mu = {.fs = registers_fs, .m = m};
    return lower_mutate(&mu, s);
}
