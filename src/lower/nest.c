/*
 * nest.c — the loop nest of one stage: its leaves as loops (split, fused,
 * reordered, with their kinds), whose innermost body stores one element.
 *
 * Takes a stage of the schedule and where its nest goes (the whole tensor,
 * or a region of it into a view, attach.c). Gives its loop IR. Values flow
 * up the IterVar tree (a split variable is outer*factor + inner, a fused
 * part is fused / E or fused % E) and extents flow down (ceil(E/f) outer,
 * f inner), staying symbolic: sizes and UF values are parameters, so one
 * kernel serves every size. Ragged extents (`l < len[b]`) are lowered
 * once the loops they depend on are bound.
 *
 * Tails of non-dividing splits: the innermost statement is guarded by
 * `o*f + i < E`. With TAIL_PARTITION (the default), for a split whose
 * inner loop is a leaf below its outer one, the outer loop is marked for
 * the partition pass (partition.c), which makes the full tiles and the
 * last one of it (guarded_for_pass says where); where the pass cannot (a
 * stage computed inside the nest, an accumulator allocated inside the
 * split's loops) the walk partitions here: the outer
 * loop runs over the full tiles with no checks, followed by one copy of
 * the nest for the last, partial tile (inner extent E - o*f). Each copy
 * carries its own nest state (StageNest, by value), so the stages
 * computed inside it get their own regions: constant-size tiles in the
 * full copy, the clipped last tile in the other. The bounds pass
 * (regions.c) takes such a split in the SPLIT_PARAM state instead: its
 * inner extent a parameter (StageNest.tile) that either copy instantiates.
 *
 * A split with tail="merge" is always partitioned by the walk: the full
 * copy's outer loop runs E/f - 1 blocks of f, and the last copy, at
 * o = max(E/f - 1, 0), runs the E - o*f rest (f..2f-1 rows when E >= f,
 * all E rows otherwise), so no block is smaller than f unless E is.
 */
#include <string.h>

#include "lower/lower.h"

static Expr *iv_extent(LowerCtx *c, StageNest *n, const IterVar *v);

/* The loop-IR value of v, or NULL while a leaf it needs is unbound. */
Expr *lower_iv_value(LowerCtx *c, StageNest *n, const IterVar *v) {
    Module *m = c->m;
    if (n->value[v->id])
        return n->value[v->id];
    if (v->fused && v->fused->variable) {
        /* through the prelude's maps (vfuse.c), from the first row of a
         * region of fused rows */
        Expr *f = lower_iv_value(c, n, v->fused), *base = n->base[v->fused->id];
        if (f && base)
            f = ir_binary(m, EX_ADD, base, f);
        return f ? lower_vfuse_part(c, v->fused, f, v == v->fused->fa) : NULL;
    }
    if (v->fused) {
        /* the extent only once the fused loop is bound: it may mention
         * axes bound outside that loop */
        Expr *f = lower_iv_value(c, n, v->fused);
        Expr *eb = f ? iv_extent(c, n, v->fused->fb) : NULL;
        if (!eb)
            return NULL;
        return ir_binary(m, v == v->fused->fa ? EX_DIV : EX_MOD, f, eb);
    }
    if (v->outer) {
        Expr *o = lower_iv_value(c, n, v->outer), *i = lower_iv_value(c, n, v->inner);
        if (!o || !i)
            return NULL;
        return ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, o, ir_int(m, v->inner->factor)), i);
    }
    return NULL;
}

static Expr *root_extent(LowerCtx *c, StageNest *n, const IterVar *v, const PtrMap *vary);
static Expr *extent_over_free_leaves(LowerCtx *c, StageNest *n, const IterVar *v);
static bool bind_outer_roots(LowerCtx *c, StageNest *n, const IterVar *v);

/* The first value of root r where n is: the origin of a region, the split
 * point of the rest of a split operation (split_op: E/M*M, over the
 * values of the outer axes r's extent mentions); NULL for 0, and *ok
 * false where that value is not known here (an outer axis unbound). */
Expr *lower_root_base(LowerCtx *c, StageNest *n, const IterVar *r, bool *ok) {
    *ok = true;
    if (n->base[r->id] || r->part != PART_REST)
        return n->base[r->id];
    /* where an outer axis its extent mentions is not bound (bounds
     * inference above that loop), the split point is not one value */
    IterVar whole = *r;
    whole.part = PART_WHOLE;
    Expr *e = bind_outer_roots(c, n, r) ? root_extent(c, n, &whole, NULL) : NULL;
    if (!e) {
        *ok = false;
        return NULL;
    }
    Module *m = c->m;
    return lower_ctx_simp(c, lower_part_full(m, e, r->part_mult));
}

/* The IR axis value of a root: origin + its IterVar value. */
static Expr *root_axis_value(LowerCtx *c, StageNest *n, const IterVar *r) {
    Expr *v = lower_iv_value(c, n, r);
    bool ok;
    Expr *base = v ? lower_root_base(c, n, r, &ok) : NULL;
    if (!v || !ok)
        return NULL;
    return base ? ir_binary(c->m, EX_ADD, base, v) : v;
}

/* Publishes the value of root r where n is, or that it has none: a value
 * left by another copy of the nest (a partitioned tail) must not be used
 * where r's loop is not bound. Returns whether r is bound. */
static bool bind_root(LowerCtx *c, StageNest *n, const IterVar *r) {
    Expr *v = root_axis_value(c, n, r);
    ptrmap_put(&c->axis_value, r->axis, v ? lower_ctx_simp(c, v) : NULL);
    return v != NULL;
}

/* Publishes the values of the roots whose leaves are bound. */
void lower_bind_axes(LowerCtx *c, StageNest *n) {
    Stage *st = n->st;
    for (int i = 0; i < st->ivs.len; i++)
        if (st->ivs.data[i]->rel == IV_ROOT)
            bind_root(c, n, st->ivs.data[i]);
}

Expr *lower_part_full(Module *m, Expr *e, int64_t f) {
    return ir_binary(m, EX_MUL, ir_binary(m, EX_DIV, e, ir_int(m, f)), ir_int(m, f));
}

Expr *lower_ceil_div(Module *m, Expr *e, int64_t f) {
    return ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, e, ir_int(m, f - 1)), ir_int(m, f));
}

static bool divides(LowerCtx *c, Expr *e, int64_t f) {
    int64_t v;
    Expr *r = lower_ctx_simp(c, ir_binary(c->m, EX_MOD, e, ir_int(c->m, f)));
    return f == 1 || (ir_is_const_int(r, &v) && v == 0);
}

/* The extent of root v (not an attached stage's region) where n is: its
 * axis's extent over the values of the outer axes it mentions (l <
 * len[b]). Without a value for one of them, `vary` (bounds inference: the
 * ranges of the stage's roots outer to v, as lower_infer_region builds them)
 * relaxes it to its largest value over their ranges, an upper bound of
 * every extent v takes in the iterations that remain; without `vary` it
 * has none. */
/* Publishes the values of the roots v's extent mentions (l < len[b]);
 * whether all are bound. */
static bool bind_outer_roots(LowerCtx *c, StageNest *n, const IterVar *v) {
    bool bound = true;
    for (int i = 0; i < n->st->ivs.len; i++) {
        IterVar *r = n->st->ivs.data[i];
        if (r->rel == IV_ROOT && r->axis != v->axis && ir_uses_axis(v->axis->extent, r->axis))
            bound &= bind_root(c, n, r);
    }
    return bound;
}

static Expr *root_extent(LowerCtx *c, StageNest *n, const IterVar *v, const PtrMap *vary) {
    Module *m = c->m;
    bool bound = bind_outer_roots(c, n, v);
    if (!bound && vary) {
        Range r;
        Expr *hi =
            lower_bounds_range(m, v->axis->extent, vary, false, &r) ? lower_index(c, r.hi) : NULL;
        /* a part of a split operation: at most hi/M*M full tiles, a rest
         * under M */
        if (hi && v->part == PART_FULL)
            return lower_part_full(m, hi, v->part_mult);
        if (hi && v->part == PART_REST)
            return ir_binary(m, EX_MIN, hi, ir_int(m, v->part_mult - 1));
        return hi;
    }
    if (!bound)
        return extent_over_free_leaves(c, n, v);
    Expr *e = lower_index(c, v->axis->extent);
    if (!e)
        return NULL;
    if (v->part == PART_FULL)
        e = lower_part_full(m, e, v->part_mult);
    else if (v->part == PART_REST)
        e = ir_binary(m, EX_SUB, e, lower_part_full(m, e, v->part_mult));
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
        if (!outer_axis || !(we = iv_extent(c, n, w)) || !(wv = lower_iv_value(c, n, w)))
            continue;
        Expr *p = lower_ctx_simp(c, ir_binary(m, EX_LT, wv, we));
        int64_t t;
        if (!(ir_is_const_int(p, &t) && t))
            g = g ? ir_binary(m, EX_AND, g, p) : p;
    }
    return g ? ir_select(m, g, e, ir_int(m, 0)) : e;
}

/* The extent of root v where an outer root it mentions has leaves not
 * bound here: the schedule checker lets v's loop move above such leaves
 * only where the extent, that root written over its leaves, does not
 * depend on them (k < i/6*6 over i = io*6 + ii is k < io*6). Each unbound
 * leaf becomes a fresh variable over its extent, which the simplified
 * extent must not mention; NULL otherwise. A guard of a split tail it
 * mentions is taken at the leaf's first value (0): the extent is the same
 * for every value, and row io*6 of a tile is always in range. */
static Expr *extent_over_free_leaves(LowerCtx *c, StageNest *n, const IterVar *v) {
    Module *m = c->m;
    Stage *st = n->st;
    Axis *fresh[SCHED_MAX_IVS] = {0};
    PtrMap zero = {0};
    for (int i = 0; i < st->leaves.len; i++) {
        IterVar *l = st->leaves.data[i];
        bool outer = false;
        for (int j = 0; j < st->ivs.len; j++) {
            IterVar *r = st->ivs.data[j];
            outer |= r->rel == IV_ROOT && r != v && ir_uses_axis(v->axis->extent, r->axis) &&
                     sched_iv_derives_from(l, r);
        }
        Expr *e;
        if (!outer || n->value[l->id] || !(e = iv_extent(c, n, l)))
            continue;
        fresh[l->id] = lower_loop_var(m, l->name, e);
        n->value[l->id] = fresh[l->id]->var;
        ptrmap_put(&zero, fresh[l->id], ir_int(m, 0));
    }
    Expr *e = NULL;
    if (bind_outer_roots(c, n, v)) {
        Expr *x = lower_ctx_simp(c, lower_index(c, v->axis->extent));
        bool free = x != NULL;
        for (int i = 0; free && i < st->ivs.len; i++)
            free = !fresh[i] || !ir_uses_axis(x, fresh[i]);
        e = free ? root_extent(c, n, v, NULL) : NULL;
        e = e ? lower_ctx_simp(c, ir_substitute(m, e, &zero)) : NULL;
    }
    for (int i = 0; i < st->ivs.len; i++)
        if (fresh[i])
            n->value[i] = NULL;
    bind_outer_roots(c, n, v);
    ptrmap_free(&zero);
    /* not such an extent: reported as a use of an unbound axis, as before */
    return e ? e : lower_index(c, v->axis->extent);
}

/* The extent of v where n is; `vary` as for root_extent. */
Expr *lower_iv_extent_over(LowerCtx *c, StageNest *n, const IterVar *v, const PtrMap *vary) {
    Module *m = c->m;
    switch (v->rel) {
    case IV_ROOT: {
        Expr *e = n->root_ext[v->id];
        if (e && !(e = lower_ragged_clip(c, n, v, e)))
            return NULL;
        if (!e && !(e = root_extent(c, n, v, vary)))
            return NULL;
        if (v->pad > 1)
            e = ir_binary(m, EX_MUL, lower_ceil_div(m, e, v->pad), ir_int(m, v->pad));
        return lower_ctx_simp(c, e);
    }
    case IV_OUTER: {
        Expr *e = lower_iv_extent_over(c, n, v->parent, vary);
        if (!e)
            return NULL;
        Expr *full = ir_binary(m, EX_DIV, e, ir_int(m, v->factor));
        if (v->parent->tail == TAIL_MERGE) {
            /* the blocks before the merged last one; all of them */
            if (n->state[v->parent->id] == SPLIT_FULL)
                return lower_ctx_simp(c, ir_binary(m, EX_SUB, full, ir_int(m, 1)));
            return lower_ctx_simp(c, ir_binary(m, EX_MAX, full, ir_int(m, 1)));
        }
        if (n->state[v->parent->id] == SPLIT_FULL)
            return lower_ctx_simp(c, full);
        return lower_ctx_simp(c, lower_ceil_div(m, e, v->factor));
    }
    case IV_INNER: {
        if (n->state[v->parent->id] == SPLIT_PARAM)
            return n->tile[v->parent->id];
        /* a merge split not partitioned where n is (its outer loop not
         * bound: bounds inference over both loops): the largest block */
        if (n->state[v->parent->id] == SPLIT_GUARD && v->parent->tail == TAIL_MERGE)
            return ir_int(m, 2 * v->factor - 1);
        if (n->state[v->parent->id] != SPLIT_TAIL)
            return ir_int(m, v->factor);
        Expr *e = lower_iv_extent_over(c, n, v->parent, vary),
             *o = lower_iv_value(c, n, v->parent->outer);
        if (!e || !o)
            return NULL;
        return lower_ctx_simp(
            c, ir_binary(m, EX_SUB, e, ir_binary(m, EX_MUL, o, ir_int(m, v->factor))));
    }
    case IV_FUSED: {
        if (v->variable) /* a region's rows, or the sum of the inner extents: the prelude's */
            return n->root_ext[v->id] ? n->root_ext[v->id] : lower_vfuse_extent(c, v);
        /* an extent below 0 runs no iterations; in a product it must
         * count as 0, not flip the sign of the other */
        Expr *a = lower_iv_extent_over(c, n, v->fa, vary),
             *b = lower_iv_extent_over(c, n, v->fb, vary);
        if (!a || !b)
            return NULL;
        a = ir_binary(m, EX_MAX, a, ir_int(m, 0));
        b = ir_binary(m, EX_MAX, b, ir_int(m, 0));
        return lower_ctx_simp(c, ir_binary(m, EX_MUL, a, b));
    }
    default:
        RV_UNREACHABLE();
    }
}

static Expr *iv_extent(LowerCtx *c, StageNest *n, const IterVar *v) {
    return lower_iv_extent_over(c, n, v, NULL);
}

/* The conjunction of the checks of undecided non-dividing splits
 * (spatial ones, reduction ones, or both), or NULL when none is needed. */
Expr *lower_guards(LowerCtx *c, StageNest *n, bool spatial, bool reduce) {
    Module *m = c->m;
    Expr *g = NULL;
    Stage *st = n->st;
    for (int i = 0; i < st->ivs.len; i++) {
        IterVar *v = st->ivs.data[i];
        if (!v->outer || n->state[v->id] != SPLIT_GUARD || (v->reduce ? !reduce : !spatial))
            continue;
        Expr *e = iv_extent(c, n, v), *val = lower_iv_value(c, n, v);
        if (!e || !val || divides(c, e, v->inner->factor))
            continue;
        Expr *p = lower_ctx_simp(c, ir_binary(m, EX_LT, val, e));
        int64_t t;
        if (ir_is_const_int(p, &t) && t)
            continue;
        g = g ? ir_binary(m, EX_AND, g, p) : p;
    }
    return g;
}

Stmt *lower_guarded(LowerCtx *c, Expr *g, Stmt *s) {
    return g && s ? lower_if(c->m, g, s, NULL) : s;
}

/* The destination offset of the current element. */
Expr *lower_dest_offset(LowerCtx *c, StageNest *n) {
    Module *m = c->m;
    Stage *st = n->st;
    Expr *idx[RV_MAX_DIMS];
    for (int d = 0; d < st->t->ndim; d++)
        idx[d] = ptrmap_get(&c->axis_value, st->t->axes[d]);
    if (n->dst_view)
        return lower_view_offset(m, n->dst_view, idx);
    return ir_storage_offset(m, n->dst_storage, idx);
}

Buffer *lower_dest_buf(StageNest *n) {
    return n->dst_view ? n->dst_view->buf : n->dst_storage->buf;
}

/* True when every index of the current element is inside the tensor
 * (local padding of a cache_read: outside it the copy holds zero). */
static Expr *source_in_bounds(LowerCtx *c, StageNest *n) {
    Module *m = c->m;
    Stage *st = n->st;
    Expr *g = NULL;
    for (int d = 0; d < st->t->ndim; d++) {
        Expr *v = ptrmap_get(&c->axis_value, st->t->axes[d]);
        Expr *e = lower_index(c, st->t->axes[d]->extent); /* the copy's: over its own axes */
        if (!e)
            return NULL;
        Expr *p =
            ir_binary(m, EX_AND, ir_binary(m, EX_GE, v, ir_int(m, 0)), ir_binary(m, EX_LT, v, e));
        g = g ? ir_binary(m, EX_AND, g, p) : p;
    }
    return g ? lower_ctx_simp(c, g) : ir_bool(m, true); /* a 0-dim tensor: its one element */
}

/* Does the stage pad one of its loops (its reads may then reach into
 * storage padding, rtcheck.c)? */
bool lower_loop_padded(const Stage *st) {
    for (int i = 0; i < st->ivs.len; i++)
        if ((st->ivs.data[i]->rel == IV_ROOT || st->ivs.data[i]->variable) &&
            st->ivs.data[i]->pad > 1)
            return true;
    return false;
}

bool lower_bulk_padded(const Stage *st) {
    for (int i = 0; i < st->ivs.len; i++)
        if (st->ivs.data[i]->variable && st->ivs.data[i]->pad > 1)
            return true;
    return false;
}

/* The innermost statement of a nest. */
static Stmt *innermost(LowerCtx *c, StageNest *n) {
    Module *m = c->m;
    Stage *st = n->st;
    c->loop_pad = lower_loop_padded(st);
    c->bulk_pad = lower_bulk_padded(st);
    lower_bind_axes(c, n);
    Buffer *dst = lower_dest_buf(n);
    Expr *off = lower_dest_offset(c, n);
    const Expr *R = st->reduce;
    switch (n->mode) {
    case MODE_ACC:
    case MODE_IN_PLACE: {
        /* a conditional's reduction (a cache_write of a conditional)
         * updates where its condition holds: the term, its reads and
         * their checks under the condition, the identity elsewhere */
        ExprCtx y = {c, {0}, NULL, RV_OK, true};
        Expr *p = st->pred ? lower_expr(&y, st->pred) : NULL;
        ExprCtx x = {c, {0}, NULL, RV_OK, true};
        Expr *v = !st->pred || p ? lower_expr(&x, R->args[0]) : NULL;
        if (x.st != RV_OK || y.st != RV_OK || !v) {
            c->st = x.st != RV_OK ? x.st : y.st != RV_OK ? y.st : c->st;
            vec_free(&x.pre);
            vec_free(&y.pre);
            return NULL;
        }
        Expr *zero = ir_int(m, 0);
        if (n->mode == MODE_ACC) {
            Expr *first = ptrmap_get(&c->axis_value, R->u.red.axes[0]);
            vec_push(&x.pre, lower_reduce_update(m, R->u.red.rk, n->acc, zero, n->arg, first, v));
        } else {
            vec_push(&x.pre, lower_reduce_update(m, R->u.red.rk, dst, off, NULL, NULL, v));
        }
        Stmt *s = lower_seq(m, x.pre.len, x.pre.data);
        vec_free(&x.pre);
        if (p) {
            vec_push(&y.pre, lower_if(m, p, s, NULL));
            s = lower_seq(m, y.pre.len, y.pre.data);
        }
        vec_free(&y.pre);
        /* ACC: the spatial checks wrap the whole reduction already */
        /* IN_PLACE: declare the accumulators of nested reductions here (ACC:
         * lower_gen_reduction declares them with its own) */
        if (n->mode == MODE_IN_PLACE)
            s = lower_wrap_locals(c, s);
        return lower_guarded(c, lower_guards(c, n, n->mode == MODE_IN_PLACE, true), s);
    }
    case MODE_TOP:
        break;
    }
    Stmt *s;
    if (st->pred) {
        ExprCtx x = {c, {0}, NULL, RV_OK, true};
        Expr *p = lower_expr(&x, st->pred);
        Stmt *a = p ? lower_element_stmt(c, dst, off, st->body, NULL) : NULL;
        Stmt *b = a ? lower_element_stmt(c, dst, off, st->else_body, NULL) : NULL;
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
        Stmt *a = lower_element_stmt(c, dst, off, st->body, NULL);
        Expr *inb = source_in_bounds(c, n);
        if (!a || !inb)
            return NULL;
        s = lower_if(m, inb, a, lower_store(m, dst, off, ir_cast(m, st->t->dtype, ir_int(m, 0))));
    } else {
        if (!(s = lower_element_stmt(c, dst, off, st->body, NULL)))
            return NULL;
    }
    return lower_guarded(c, lower_guards(c, n, true, true), lower_wrap_locals(c, s));
}

/* A leaf loop whose variable is `var` over `ext`, around the rest. */
static Stmt *gen_loop(LowerCtx *c, StageNest n, int i, Expr *ext) {
    Module *m = c->m;
    IterVar *v = n.st->leaves.data[i];
    LoopKind k = v->kind;
    if (k == LOOP_PARALLEL && c->par_depth > 0)
        k = LOOP_SERIAL; /* a parallel loop inside another runs serially */
    Axis *var = lower_loop_var(m, v->name, ext);
    n.value[v->id] = var->var;
    c->par_depth += k == LOOP_PARALLEL;
    bool thread = k >= LOOP_GPU_THREAD_X && k <= LOOP_GPU_THREAD_Z;
    if (thread) { /* for the stages computed inside that the threads share */
        Range *r = arena_alloc(m->arena, sizeof *r);
        r->lo = ir_int(m, 0);
        r->hi = lower_ctx_simp(c, ir_binary(m, EX_SUB, ext, ir_int(m, 1)));
        ptrmap_put(&c->gpu_threads, var, r);
    }
    Stmt *body = lower_emit_attached(c, &n, v, i + 1);
    if (thread)
        ptrmap_put(&c->gpu_threads, var, NULL);
    c->par_depth -= k == LOOP_PARALLEL;
    if (!body)
        return NULL;
    Stmt *s = lower_for(m, var, ext, k, body);
    s->u.loop.spatial = !v->reduce;
    return s;
}

/* Does a stage compute at a loop of st? Its region would depend on the
 * state of st's splits, which only the walk knows. */
static bool hosts_stages(LowerCtx *c, const Stage *st) {
    for (int k = 0; k < c->s->stages.len; k++) {
        Stage *p = c->s->stages.data[k];
        if (p->attach == ATTACH_AT && p->at == st && p->at_iv)
            return true;
    }
    return false;
}

static bool has_alloc(const Stmt *s) {
    if (!s)
        return false;
    switch (s->kind) {
    case ST_FOR:
        return has_alloc(s->u.loop.body);
    case ST_IF:
        return has_alloc(s->u.if_.then_s) || has_alloc(s->u.if_.else_s);
    case ST_LET:
        return has_alloc(s->u.let.body);
    case ST_SEQ:
        for (int k = 0; k < s->u.seq.n; k++)
            if (has_alloc(s->u.seq.stmts[k]))
                return true;
        return false;
    case ST_ALLOC:
        return true;
    case ST_REDUCE:
        return has_alloc(s->u.reduce.body);
    default:
        return false;
    }
}

/* The outer loop of the non-dividing split at leaf i, guarded (`o*f + i
 * < E` in the innermost statement) and marked for the partition pass
 * (partition.c), which makes the full tiles and the last tile of it; or
 * NULL where the walk must partition it itself: a stage computed inside
 * the nest (its region follows the split's state), or buffers allocated
 * inside the loop (accumulators: each copy needs its own, named in the
 * walk's order). A split of a split or of a fused loop is the pass's too:
 * its guard is `o*f + i < E` over the split's own extent like a root's;
 * so is one inside an in-place reduction's loops (the reduce pass, which
 * runs first, gives its init nest the same marked loop), and one whose
 * axis another extent depends on (a ragged `l < len[b]` is
 * `select(o*f + i < E, len[...], 0)` in the guarded tile: the pass takes
 * the conjunct as true there too). The walk's trial generation is undone
 * (counters) where the pass would not find the guard. */
static Stmt *guarded_for_pass(LowerCtx *c, StageNest n, int i) {
    Stage *st = n.st;
    if (hosts_stages(c, st))
        return NULL;
    /* (the pass knows the guard `o*f + i < E`, not a merged last block) */
    if (st->leaves.data[i]->parent->tail == TAIL_MERGE)
        return NULL;
    if (n.mode == MODE_TOP && st->reduce && n.first_red > i && !n.in_place)
        return NULL; /* the accumulator inside the loop */
    /* a trial: the walk's counters are restored where it is not taken */
    int nacc = c->nacc, nsites = c->sites.len, nsrc = c->check_src.len;
    Stmt *s = gen_loop(c, n, i, iv_extent(c, &n, st->leaves.data[i]));
    if (!s || has_alloc(s) || !lower_partition_applies(s)) {
        c->nacc = nacc;
        c->sites.len = nsites;
        c->check_src.len = nsrc;
        return NULL;
    }
    s->u.loop.partition = true;
    return s;
}

/* Is v, or the loop it became by splits and fuses, bound to a GPU index? */
static bool iv_gpu_bound(const IterVar *v) {
    if (!v)
        return false;
    if (v->fused)
        return iv_gpu_bound(v->fused);
    if (v->outer)
        return iv_gpu_bound(v->outer) || iv_gpu_bound(v->inner);
    return sched_kind_is_gpu(v->kind);
}

Expr *lower_split_last(LowerCtx *c, const IterVar *p, Expr *e) {
    Module *m = c->m;
    Expr *full = ir_binary(m, EX_DIV, e, ir_int(m, p->inner->factor));
    if (p->tail == TAIL_MERGE)
        full = ir_binary(m, EX_MAX, ir_binary(m, EX_SUB, full, ir_int(m, 1)), ir_int(m, 0));
    return lower_ctx_simp(c, full);
}

/* A split with a GPU-bound part keeps its guard whatever its tail mode: a
 * launch is sized by its bound loops' extents, which a partitioned last
 * tile makes depend on the tile (E - E/f*f threads), and the threads past
 * the end idle at the guard anyway. A split with tail="merge" is always
 * partitioned (its last block is no tile of the outer loop's): the
 * schedule checker keeps its outer loop a leaf, its inner loops inside it
 * and its loops off GPU indices, so the walk reaches it here whatever E. */
int lower_splits_here(LowerCtx *c, StageNest *n, int i, Expr **ext) {
    Stage *st = n->st;
    IterVar *v = st->leaves.data[i];
    IterVar *p = v->rel == IV_OUTER ? v->parent : NULL;
    if (p && p->tail == TAIL_MERGE && n->state[p->id] == SPLIT_GUARD) {
        for (int j = 0; j < i; j++)
            RV_ASSERT(!sched_iv_derives_from(st->leaves.data[j], p->inner));
        RV_ASSERT(!iv_gpu_bound(p));
        return (*ext = iv_extent(c, n, p)) ? 1 : -1;
    }
    if (!p || p->tail != TAIL_PARTITION || n->state[p->id] != SPLIT_GUARD || iv_gpu_bound(p))
        return 0;
    /* the inner loop, or every loop a split of it made (a block of rows
     * split again into register tiles), inside the outer one */
    bool inside = false;
    for (int j = 0; j < st->leaves.len; j++)
        if (sched_iv_derives_from(st->leaves.data[j], p->inner)) {
            if (j < i)
                return 0;
            inside = true;
        }
    Expr *e = iv_extent(c, n, p);
    if (!e)
        return -1;
    *ext = e;
    return inside && !divides(c, e, v->factor);
}

Stmt *lower_gen(LowerCtx *c, StageNest n, int i) {
    Module *m = c->m;
    Stage *st = n.st;
    if (c->st != RV_OK)
        return NULL;
    if (n.mode == MODE_TOP && st->reduce && i == n.first_red)
        return lower_gen_reduction(c, n, i);
    if (i == st->leaves.len)
        return innermost(c, &n);
    IterVar *v = st->leaves.data[i];
    /* partition a non-dividing split at its outer loop */
    Expr *e = NULL;
    int part = lower_splits_here(c, &n, i, &e);
    if (part < 0)
        return NULL;
    if (part) {
        IterVar *p = v->parent;
        int64_t pf = v->factor;
        Stmt *g = guarded_for_pass(c, n, i);
        if (g || c->st != RV_OK)
            return g;
        StageNest full = n, tail = n;
        full.state[p->id] = SPLIT_FULL;
        Stmt *a = gen_loop(c, full, i, iv_extent(c, &full, v));
        tail.state[p->id] = SPLIT_TAIL;
        tail.value[v->id] = lower_split_last(c, p, e);
        Stmt *b = lower_emit_attached(c, &tail, v, i + 1);
        if (!a || !b)
            return NULL;
        /* a merged last block runs whenever there is a row */
        Expr *rest = p->tail == TAIL_MERGE ? e : ir_binary(m, EX_MOD, e, ir_int(m, pf));
        Expr *has_tail = lower_ctx_simp(c, ir_binary(m, EX_GT, rest, ir_int(m, 0)));
        Stmt *both[2] = {a, lower_if(m, has_tail, b, NULL)};
        return lower_seq(m, 2, both);
    }
    Expr *ext = iv_extent(c, &n, v);
    if (!ext)
        return NULL;
    return gen_loop(c, n, i, ext);
}

/* The nest of stage st: over its whole tensor (origin NULL), or over a
 * region of it into a view; an axis whose origin is NULL is over its
 * whole extent (a recursion's member: only its node axis is set). */
bool lower_nest_init(LowerCtx *c, StageNest *n, Stage *st, Expr *const *origin,
                     Expr *const *ext, const RegionView *view) {
    if (st->ivs.len > MAX_IVS) {
        lower_sched_error(c, "%s has more than %d loops", st->name, MAX_IVS);
        return false;
    }
    memset(n, 0, sizeof *n);
    n->st = st;
    n->mode = MODE_TOP;
    n->dst_view = view;
    if (!view) {
        Storage *sto;
        if ((c->st = lower_storage_of_tensor(c, st->t, &sto)) != RV_OK)
            return false;
        n->dst_storage = sto;
    }
    /* a region of fused rows (sched_region_vfuse): dimension 0's origin
     * and extent are the fused loop's, in rows; the roots it fuses take
     * their values from its */
    int fk = -1;
    const IterVar *f = origin ? sched_region_vfuse(st, &fk) : NULL;
    if (f && origin[0]) {
        n->base[f->id] = origin[0];
        n->root_ext[f->id] = ext[0];
    }
    for (int i = 0; i < st->ivs.len; i++) {
        IterVar *r = st->ivs.data[i];
        if (r->rel == IV_ROOT && !r->reduce && origin && origin[r->axis->pos] &&
            !(f && r->axis->pos <= fk)) {
            n->base[r->id] = origin[r->axis->pos];
            n->root_ext[r->id] = ext[r->axis->pos];
        }
    }
    n->first_red = st->leaves.len;
    for (int i = 0; i < st->leaves.len; i++)
        if (st->leaves.data[i]->reduce) {
            n->first_red = i;
            break;
        }
    for (int i = n->first_red; i < st->leaves.len; i++)
        n->in_place |= !st->leaves.data[i]->reduce;
    return true;
}

Stmt *lower_stage_nest(LowerCtx *c, Stage *st, Expr *const *origin, Expr *const *ext,
                       const RegionView *view) {
    StageNest n;
    return lower_nest_init(c, &n, st, origin, ext, view) ? lower_emit_attached(c, &n, NULL, 0)
                                                         : NULL;
}
