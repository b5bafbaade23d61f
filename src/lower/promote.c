/*
 * promote.c — an accumulation that a loop repeats at the same addresses
 * runs in a local tile across the loop.
 *
 * A reduction accumulated in place (the reduction loop outside spatial
 * loops, as in a cache_write stage covering a whole column panel whose k
 * loop is split into blocks) stores to the same elements on every
 * iteration of the reduction loop:
 *
 *     for ki in 0..256:
 *       unroll for ii in 0..6:  unroll for jv2 in 0..4:  vector for jv in 0..16:
 *         YL[io*384 + ii*64 + jv2*16 + jv] = YL[same] + X[..ki..] * WL[..ki..]
 *
 * The C compiler keeps such a tile in registers only when it can prove
 * that the loop's other loads never read it. YL lives in the scratch
 * arena, so GCC loads the 24 vectors once but still stores all 24 on
 * every iteration (2.5x slower than the same tile kept in registers).
 * Here the tile is copied into a local array before the loop, the loop
 * accumulates into the copy, and the copy is written back after it:
 *
 *     allocate YL_acc: f32[384] local
 *       unroll for ii: unroll for jv2: vector for jv: YL_acc[ii*64 + jv2*16 + jv] = YL[...]
 *       for ki in 0..256: ... YL_acc[ii*64 + jv2*16 + jv] = YL_acc[...] + ...
 *       unroll for ii: unroll for jv2: vector for jv: YL[...] = YL_acc[ii*64 + jv2*16 + jv]
 *
 * Every element sees the same operations in the same order, so results
 * are bit-identical. The local array's address never escapes, so the C
 * compiler holds it in registers as it does a cache_write tile.
 *
 * The loop: a serial loop whose body is a nest of serial, unrolled or
 * vector loops (no guard, no LET) around one store B[e] = v, where
 *   - B is not a local array (those are already the C compiler's),
 *   - e does not use the loop's variable, and is an affine, injective
 *     function of the nest variables it uses (constant positive
 *     coefficients forming a mixed radix), so that tile elements and
 *     elements of B correspond one to one,
 *   - v reads B only at e,
 *   - the nest's extents have constant upper bounds (the tail tile of a
 *     split: M - M/6*6 < 6) and use no variable of the loop or the nest;
 *     those of loops e does not use are positive constants,
 *   - the tile is at most PROMOTE_MAX_BYTES.
 * The copies read the tile even when the loop runs no iteration; a loop
 * whose extent is not a positive constant is put under `extent > 0`.
 *
 * Requires: a simplified kernel body without LETs (before hoist).
 * Guarantees: the same values are computed.
 */
#include "lower/lower.h"

#include <stdio.h>

#define PROMOTE_MAX_NEST 8
#define PROMOTE_MAX_BYTES 4096

/* The nest inside the candidate loop and the tile it accumulates. */
typedef struct Tile {
    const Stmt *loops[PROMOTE_MAX_NEST]; /* outermost first */
    int nloops;
    Buffer *buf;                /* B */
    Expr *index;                /* e */
    bool dim[PROMOTE_MAX_NEST]; /* e uses loops[i]'s variable */
    int64_t extent[PROMOTE_MAX_NEST], coeff[PROMOTE_MAX_NEST];
    int64_t elems;
} Tile;

/* Does e load from b at an index other than at? */
typedef struct OtherLoad {
    const Buffer *b;
    const Expr *at;
    bool found;
} OtherLoad;

static void other_load_fn(const Expr *e, void *ctx) {
    OtherLoad *o = ctx;
    if (e->kind == EX_LOAD && e->u.buf == o->b && e->args[0] != o->at)
        o->found = true;
}

/* The nest inside `loop`, when it is a promotable accumulation. */
static bool find_tile(Module *m, const Stmt *loop, Tile *t) {
    *t = (Tile){0};
    const Stmt *s = loop->u.loop.body;
    while (s && s->kind == ST_FOR) {
        LoopKind k = s->u.loop.kind;
        if (t->nloops == PROMOTE_MAX_NEST ||
            (k != LOOP_SERIAL && k != LOOP_UNROLL && k != LOOP_VECTOR))
            return false;
        /* the tile spans the largest extent (a partial tile's rows: M%6 < 6);
         * the copies run the loop's own extent, outside the nest */
        if (!ir_upper_bound(m, s->u.loop.extent, &t->extent[t->nloops]) ||
            t->extent[t->nloops] < 1 || ir_uses_axis(s->u.loop.extent, loop->u.loop.var))
            return false;
        for (int i = 0; i < t->nloops; i++)
            if (ir_uses_axis(s->u.loop.extent, t->loops[i]->u.loop.var))
                return false;
        t->loops[t->nloops++] = s;
        s = s->u.loop.body;
    }
    if (!s || s->kind != ST_STORE || s->u.store.buf->scope == BUF_LOCAL)
        return false;
    t->buf = s->u.store.buf;
    t->index = s->u.store.index;
    if (ir_uses_axis(t->index, loop->u.loop.var))
        return false;
    OtherLoad o = {t->buf, t->index, false};
    ir_visit(s->u.store.value, other_load_fn, &o);
    if (o.found)
        return false;
    t->elems = 1;
    for (int i = 0; i < t->nloops; i++) {
        const Axis *v = t->loops[i]->u.loop.var;
        int64_t n;
        if (!ir_uses_axis(t->index, v)) {
            /* every element of the tile is stored: the copies touch no other */
            if (!ir_is_const_int(t->loops[i]->u.loop.extent, &n) || n < 1)
                return false;
            continue;
        }
        Expr *c = ir_linear_coeff(m, t->index, v);
        c = c ? ir_simplify_expr(m, c) : NULL;
        if (!c || !ir_is_const_int(c, &t->coeff[i]) || t->coeff[i] <= 0)
            return false;
        t->dim[i] = true;
        if (t->extent[i] > PROMOTE_MAX_BYTES)
            return false;
        t->elems *= t->extent[i];
        if (t->elems * (int64_t)rv_dtype_size(t->buf->dtype) > PROMOTE_MAX_BYTES)
            return false;
    }
    /* injective: by increasing coefficient, each exceeds the span of the
     * smaller ones (selection order; at most 8 dimensions) */
    bool used[PROMOTE_MAX_NEST] = {false};
    int64_t span = 0;
    for (int round = 0; round < t->nloops; round++) {
        int best = -1;
        for (int i = 0; i < t->nloops; i++)
            if (t->dim[i] && !used[i] && (best < 0 || t->coeff[i] < t->coeff[best]))
                best = i;
        if (best < 0)
            break;
        if (t->coeff[best] <= span)
            return false;
        used[best] = true;
        span += t->coeff[best] * (t->extent[best] - 1);
    }
    return true;
}

/* The tile element of the nest variables `vars` (one per loop; only the
 * tile's dimensions are read): row-major over the dimensions. */
static Expr *tile_index(Module *m, const Tile *t, Axis *const *vars) {
    Expr *idx = ir_int(m, 0);
    int64_t stride = 1;
    for (int i = t->nloops - 1; i >= 0; i--) {
        if (!t->dim[i])
            continue;
        Expr *term = ir_binary(m, EX_MUL, ir_var(m, vars[i]), ir_int(m, stride));
        idx = ir_binary(m, EX_ADD, idx, term);
        stride *= t->extent[i];
    }
    return ir_simplify_expr(m, idx);
}

/* A nest over the tile's dimensions copying B's tile into acc (in) or
 * back (out), with fresh loop variables. */
static Stmt *copy_nest(Module *m, const Tile *t, Buffer *acc, bool in) {
    Axis *vars[PROMOTE_MAX_NEST] = {0};
    PtrMap fresh = {0};
    for (int i = 0; i < t->nloops; i++) {
        const Stmt *l = t->loops[i];
        if (!t->dim[i])
            continue;
        vars[i] = lower_loop_var(m, l->u.loop.var->name, l->u.loop.extent);
        ptrmap_put(&fresh, l->u.loop.var, ir_var(m, vars[i]));
    }
    Expr *at = ir_substitute(m, t->index, &fresh);
    ptrmap_free(&fresh);
    Expr *slot = tile_index(m, t, vars);
    Stmt *s = in ? lower_store(m, acc, slot, ir_load(m, t->buf, at))
                 : lower_store(m, t->buf, at, ir_load(m, acc, slot));
    for (int i = t->nloops - 1; i >= 0; i--)
        if (t->dim[i])
            s = lower_for(m, vars[i], t->loops[i]->u.loop.extent, t->loops[i]->u.loop.kind, s);
    return s;
}

/* Inside the loop: B[e] becomes acc[slot], read and written. */
typedef struct Redirect {
    const Tile *t;
    Buffer *acc;
    Expr *slot;
    PtrMap memo; /* Expr* -> its rewrite */
} Redirect;

static Expr *redirect_load(Module *m, void *ctx, Expr *load) {
    Redirect *r = ctx;
    return load->u.buf == r->t->buf ? ir_load(m, r->acc, r->slot) : load;
}

static Expr *redirect_fe(StmtMutator *mu, Expr *e) {
    Redirect *r = mu->ctx;
    return lower_rewrite_loads(mu->m, e, redirect_load, r, &r->memo);
}

static Stmt *redirect_fs(StmtMutator *mu, Stmt *s) {
    Redirect *r = mu->ctx;
    if (s->kind == ST_STORE && s->u.store.buf == r->t->buf)
        return lower_store(mu->m, r->acc, r->slot, s->u.store.value);
    return s;
}

static Stmt *promote_fs(StmtMutator *mu, Stmt *s) {
    Module *m = mu->m;
    Tile t;
    if (s->kind != ST_FOR || s->u.loop.kind != LOOP_SERIAL || !find_tile(m, s, &t))
        return s;
    char name[128];
    snprintf(name, sizeof name, "%s_acc", t.buf->name);
    Buffer *acc = ir_buffer_new(m, ir_name(m, name), t.buf->dtype, ir_int(m, t.elems), BUF_LOCAL);
    Axis *vars[PROMOTE_MAX_NEST];
    for (int i = 0; i < t.nloops; i++)
        vars[i] = t.loops[i]->u.loop.var;
    Redirect r = {&t, acc, tile_index(m, &t, vars), {0}};
    StmtMutator re = {.fe = redirect_fe, .fs = redirect_fs, .m = m, .ctx = &r};
    Stmt *parts[3] = {copy_nest(m, &t, acc, true), lower_mutate(&re, s),
                      copy_nest(m, &t, acc, false)};
    ptrmap_free(&r.memo);
    Stmt *out = lower_alloc(m, acc, lower_seq(m, 3, parts));
    int64_t n;
    if (!ir_is_const_int(s->u.loop.extent, &n) || n < 1)
        out = lower_if(m, ir_binary(m, EX_LT, ir_int(m, 0), s->u.loop.extent), out, NULL);
    return out;
}

Stmt *lower_promote_accumulators(Module *m, Stmt *s) {
    StmtMutator mu = {.fs = promote_fs, .m = m};
    return lower_mutate(&mu, s);
}
