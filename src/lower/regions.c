/*
 * regions.c — the `bounds` pass: region inference over the applied
 * schedule, before any loop nest is built (TVM's InferBound, which runs
 * over the schedule before ScheduleOps).
 *
 * Requires: a schedule (src/sched) whose stages are placed: each stage p
 * computed at a loop (`compute_at(P, v)`, ATTACH_AT) names its host stage
 * p->at and the host's leaf p->at_iv (NULL: the top of the host's nest).
 *
 * Gives: a table with, for every such stage in schedule order, its region
 * at its attach point as a symbolic box, per dimension [lo, hi]
 * (inclusive), or `whole` where inference cannot bound it (attach.c then
 * takes the whole tensor, or rejects a padded stage). The box is over:
 *   - the host's loop variables bound at the attach point (the leaves up
 *     to p->at_iv, named as the leaves);
 *   - for a split the walk partitions there (nest.c, lower_splits_here:
 *     its outer loop bound, its inner loop not, not dividing), the inner
 *     loop's extent as a parameter `INNER.ext`: the walk's full tiles
 *     instantiate it as the factor, the last tile as `E - o*f`; a split
 *     the walk leaves guarded is clipped to its extent in the box;
 *   - for a host computed at a loop itself, the origin and extent of its
 *     own region, `HOST.AXIS.lo` and `HOST.AXIS.ext` (its entry above).
 * The loop variables and `INNER.ext` range as the walk's loops do (from 0),
 * so interval rules that need a bound's sign apply to both alike. A split
 * partitioned there whose extent E is a constant has its last tile's own
 * boxes besides (up to REGION_MAX_CUTS such splits, one box per
 * combination): the walk's values there are constants (the outer loop at
 * E/f, the tile E - E/f*f, 1 for i < 9 in tiles of 4), with which the
 * interval rules decide on single values (P[i / M] is P[8 / M] there, the
 * whole tensor over a symbolic tile). Each box is computed by the walk's
 * own region inference (bounds.c, lower_infer_region) on a nest of the
 * host in that state, so the union over the readers (the host, or stages
 * computed inside it) is the same.
 *
 * The walk consumes the table: where it places a stage (attach.c,
 * lower_region_at) it takes the box of that copy's state (the last tiles
 * it is in) and substitutes the copy's values, then simplifies. It
 * infers a region itself only for a host in a recursion group, whose
 * member nests bind the node loop from the group's order (recurse.c),
 * which attach_nest does not model. RAVEL_DEBUG=bounds compares each
 * instance with the inference on the copy (lower_debug_region, in an IR
 * scope).
 */
#include <stdlib.h>
#include <string.h>

#include "lower/lower.h"

/* A variable of box b, of the given kind, for iv, named a.b[.c], in
 * [0, ext - 1] where ext is not NULL (as the walk's loop variables are:
 * interval rules need the sign of a bound). */
static Expr *param(Module *m, RegionBox *b, RegionParamKind k, const IterVar *iv, Expr *ext,
                   const char *x, const char *y, const char *z) {
    Buf nm = {0};
    buf_printf(&nm, "%s%s%s%s%s", x, y ? "." : "", y ? y : "", z ? "." : "", z ? z : "");
    RegionParam rp = {lower_loop_var(m, buf_str(&nm), ext), k, iv};
    buf_free(&nm);
    vec_push(&b->params, rp);
    return rp.sym->var;
}

/* The host's nest at p's attach point, as the walk has it there up to
 * the box's variables: of the partitioned splits of a constant extent
 * (b->cut, in leaf order), those whose bit is set in b->tail in their
 * last tile as the walk's copy there has it (the outer loop's value the
 * constant E/f, the inner extent E - E/f*f), the others over INNER.ext. */
static bool attach_nest(LowerCtx *c, RegionBox *b, StageNest *n) {
    Module *m = c->m;
    const Stage *p = b->p;
    Stage *h = p->at;
    memset(n, 0, sizeof *n);
    n->st = h;
    n->mode = MODE_TOP;
    /* a host over a region of fused rows: their first and their number */
    int fk = -1;
    const IterVar *f = sched_region_vfuse(h, &fk);
    if (f) {
        n->base[f->id] = param(m, b, RP_ORIGIN, f, NULL, h->name, f->name, "lo");
        n->root_ext[f->id] = param(m, b, RP_EXTENT, f, NULL, h->name, f->name, "ext");
    }
    for (int i = 0; i < h->ivs.len; i++) {
        IterVar *r = h->ivs.data[i];
        if (r->rel == IV_ROOT && !r->reduce && h->attach == ATTACH_AT &&
            !(f && r->axis->pos <= fk)) {
            n->base[r->id] = param(m, b, RP_ORIGIN, r, NULL, h->name, r->axis->name, "lo");
            n->root_ext[r->id] = param(m, b, RP_EXTENT, r, NULL, h->name, r->axis->name, "ext");
        }
    }
    if (!p->at_iv)
        return true;
    for (int i = 0; i < h->leaves.len; i++) {
        IterVar *v = h->leaves.data[i];
        Expr *e;
        int part = lower_splits_here(c, n, i, &e);
        if (part < 0)
            return false;
        int64_t ce;
        if (part && ir_is_const_int(lower_ctx_simp(c, e), &ce) && b->ncut < REGION_MAX_CUTS) {
            int j = b->ncut++;
            b->cut[j] = v->parent;
            if (b->tail & (1u << j)) {
                n->state[v->parent->id] = SPLIT_TAIL;
                n->value[v->id] = lower_split_last(c, v->parent, e);
                if (v == p->at_iv)
                    return true;
                continue;
            }
        }
        if (part) {
            n->state[v->parent->id] = SPLIT_PARAM;
            n->tile[v->parent->id] =
                param(m, b, RP_TILE, v->parent,
                      ir_int(m, v->parent->tail == TAIL_MERGE ? 2 * v->factor : v->factor + 1),
                      v->parent->inner->name, "ext", NULL);
        }
        Expr *ext = lower_iv_extent_over(c, n, v, NULL);
        n->value[v->id] = param(m, b, RP_VALUE, v, ext, v->name, NULL, NULL);
        if (v == p->at_iv)
            return true;
    }
    return false; /* the checker places at_iv among the host's leaves */
}

/* The box of stage p, computed at a loop, with the splits of bits `tail`
 * in their last tile (attach_nest). */
static RegionBox infer_box(LowerCtx *c, Stage *p, unsigned tail) {
    RegionBox b = {.p = p, .tail = tail};
    StageNest n;
    if (attach_nest(c, &b, &n)) {
        lower_bind_axes(c, &n);
        b.whole = !lower_infer_region(c, &n, p, !p->local_pad, b.dim);
    } else {
        b.whole = true;
    }
    for (int d = 0; !b.whole && d < p->t->ndim; d++) {
        b.dim[d].lo = lower_ctx_simp(c, b.dim[d].lo);
        b.dim[d].hi = lower_ctx_simp(c, b.dim[d].hi);
    }
    return b;
}

rv_status lower_infer_bounds(Schedule *s, RegionTable *t) {
    LowerCtx c = {.m = s->m, .s = s};
    memset(t, 0, sizeof *t);
    for (int k = 0; k < s->stages.len && c.st == RV_OK; k++) {
        Stage *p = s->stages.data[k];
        if (p->attach != ATTACH_AT)
            continue;
        /* one box per combination of last tiles of constant extent: the
         * walk's values there are constants, with which its interval
         * rules decide on single values (a last tile of extent 1) */
        RegionBox b = infer_box(&c, p, 0);
        vec_push(&t->boxes, b);
        for (unsigned tail = 1; tail < 1u << b.ncut; tail++)
            vec_push(&t->boxes, infer_box(&c, p, tail));
    }
    for (int k = 0; k < s->m->ufuns.len; k++)
        vec_push(&t->uf_storage, ptrmap_get(&c.storage, s->m->ufuns.data[k]));
    rv_status st = c.st;
    lower_ctx_free(&c);
    if (st != RV_OK)
        lower_regions_free(t);
    return st;
}

void lower_regions_free(RegionTable *t) {
    for (int k = 0; k < t->boxes.len; k++)
        vec_free(&t->boxes.data[k].params);
    vec_free(&t->boxes);
    vec_free(&t->uf_storage);
}

void lower_adopt_uf_storage(LowerCtx *c, const RegionTable *t) {
    for (int k = 0; t && k < t->uf_storage.len; k++)
        if (t->uf_storage.data[k] && !ptrmap_has(&c->storage, c->m->ufuns.data[k]))
            ptrmap_put(&c->storage, c->m->ufuns.data[k], t->uf_storage.data[k]);
}

void lower_print_regions(Buf *b, const RegionTable *t) {
    for (int k = 0; k < t->boxes.len; k++) {
        const RegionBox *r = &t->boxes.data[k];
        const Stage *p = r->p;
        buf_printf(b, "%s at %s%s%s", p->name, p->at->name, p->at_iv ? "." : " (top)",
                   p->at_iv ? p->at_iv->name : "");
        for (int j = 0; j < r->ncut; j++)
            if (r->tail & (1u << j))
                buf_printf(b, ", the last tile of %s", r->cut[j]->outer->name);
        for (int i = 0; i < r->params.len; i++)
            buf_printf(b, "%s%s", i ? ", " : " over ", r->params.data[i].sym->name);
        buf_printf(b, "%s\n", r->whole ? ": whole tensor" : ":");
        int fk = -1;
        const IterVar *f = sched_region_vfuse(p, &fk);
        for (int d = 0; !r->whole && d < p->t->ndim; d++) {
            if (f && d > 0 && d <= fk)
                continue;
            if (f && d == 0)
                buf_printf(b, "  rows of %s: [", f->name);
            else
                buf_printf(b, "  %s: [", p->t->axes[d]->name);
            ir_print_expr(b, r->dim[d].lo);
            buf_printf(b, ", ");
            ir_print_expr(b, r->dim[d].hi);
            buf_printf(b, "]\n");
        }
    }
}

/* The box of p in table t for nest n's copy, or NULL: of those whose
 * last tiles n is in, the one with the most. */
static const RegionBox *box_of(const RegionTable *t, const Stage *p, const StageNest *n) {
    const RegionBox *best = NULL;
    int most = -1;
    for (int k = 0; t && k < t->boxes.len; k++) {
        const RegionBox *b = &t->boxes.data[k];
        int tails = 0;
        bool in = b->p == p;
        for (int j = 0; in && j < b->ncut; j++)
            if (b->tail & (1u << j)) {
                in = n->state[b->cut[j]->id] == SPLIT_TAIL;
                tails++;
            }
        if (in && tails > most) {
            best = b;
            most = tails;
        }
    }
    return best;
}

/* A load of a UF's array in a box (a ragged extent len[b], lowered by the
 * bounds pass) is of the storage the walk adopted from the pass; the
 * kernel that places the box gets it as a parameter, as if it had lowered
 * the UF application itself. */
static Expr *use_uf_load(Module *m, void *ctx, Expr *load) {
    (void)m;
    LowerCtx *c = ctx;
    Ufun *f = load->u.buf->uf;
    Storage *st;
    if (!f || c->st != RV_OK || (c->st = lower_storage_of_uf(c, f, &st)) != RV_OK)
        return load;
    lower_use_storage(c, st, PARAM_UF);
    /* (the same buffer where the walk adopted the pass's storage) */
    return st->buf == load->u.buf ? load : ir_load(c->m, st->buf, load->args[0]);
}

/* Box b (bounded) where the walk is, in nest n at b's attach point: each
 * variable the value it has in n's copy, simplified; false where n has no
 * value for one. */
static bool instance(LowerCtx *c, StageNest *n, const RegionBox *b, Range *reg) {
    PtrMap at = {0};
    bool ok = true;
    lower_bind_axes(c, n);
    for (int k = 0; k < b->params.len && ok; k++) {
        const RegionParam *rp = &b->params.data[k];
        Expr *v = NULL;
        switch (rp->kind) {
        case RP_VALUE:
            v = lower_iv_value(c, n, rp->iv);
            break;
        case RP_TILE:
            v = lower_iv_extent_over(c, n, rp->iv->inner, NULL);
            break;
        case RP_ORIGIN:
            v = n->base[rp->iv->id];
            break;
        case RP_EXTENT:
            v = n->root_ext[rp->iv->id];
            break;
        }
        ok = v != NULL;
        ptrmap_put(&at, rp->sym, v);
    }
    PtrMap memo = {0};
    for (int d = 0; ok && d < b->p->t->ndim; d++) {
        reg[d].lo = lower_rewrite_loads(c->m, ir_substitute(c->m, b->dim[d].lo, &at),
                                        use_uf_load, c, &memo);
        reg[d].hi = lower_rewrite_loads(c->m, ir_substitute(c->m, b->dim[d].hi, &at),
                                        use_uf_load, c, &memo);
        /* (a fused variable loop's maps are the walk's, vfuse.c) */
        reg[d].lo = lower_ctx_simp(c, lower_vfuse_adopt(c, reg[d].lo));
        reg[d].hi = lower_ctx_simp(c, lower_vfuse_adopt(c, reg[d].hi));
    }
    ptrmap_free(&memo);
    ptrmap_free(&at);
    return ok;
}

/* Does p's own nest bind a loop to a GPU thread index? */
static bool binds_threads(const Stage *p) {
    for (int i = 0; i < p->leaves.len; i++)
        if (p->leaves.data[i]->kind >= LOOP_GPU_THREAD_X &&
            p->leaves.data[i]->kind <= LOOP_GPU_THREAD_Z)
            return true;
    return false;
}

/* A stage whose own loops are bound to thread indices, computed inside
 * loops bound to thread indices, is filled by the threads together
 * (cooperative fetching, as TVM's shared-memory copies are): its region is
 * the union over the enclosing thread loops' iterations, the part every
 * thread of the block reads, and the CUDA back end puts it in shared
 * memory (docs/schedules.md, "Shared memory on the GPU"). On the CPU the
 * bound loops are serial and each iteration of the outer ones fills the
 * whole union: the same values, computed again. False where an enclosing
 * thread loop's range cannot bound the region. */
static bool relax_over_threads(LowerCtx *c, const Stage *p, Range *reg) {
    bool any = false;
    for (int i = 0; i < c->gpu_threads.cap && !any; i++)
        any = c->gpu_threads.keys && c->gpu_threads.keys[i] && c->gpu_threads.vals[i];
    if (!any || !binds_threads(p))
        return true;
    for (int d = 0; d < p->t->ndim; d++) {
        Range lo, hi;
        if (!lower_bounds_range(c->m, reg[d].lo, &c->gpu_threads, false, &lo) ||
            !lower_bounds_range(c->m, reg[d].hi, &c->gpu_threads, false, &hi))
            return false;
        reg[d].lo = lo.lo;
        reg[d].hi = hi.hi;
    }
    return true;
}

bool lower_region_at(LowerCtx *c, StageNest *n, Stage *p, Range *reg) {
    /* a recursion member's nest binds its node loop from the group's
     * order (recurse.c), not as attach_nest has a host's loops: the
     * region is inferred on the copy itself */
    if (sched_stage_group(p->at))
        return lower_infer_region(c, n, p, !p->local_pad, reg) && relax_over_threads(c, p, reg);
    const RegionBox *b = box_of(c->regions, p, n);
    if (b && b->whole)
        return false;
    if (!b || !instance(c, n, b, reg))
        c->st = base_error(RV_ERR_UNSUPPORTED,
                           "internal error in pass bounds: no region of %s for its copy at %s",
                           p->name, p->at->name);
    return c->st == RV_OK && relax_over_threads(c, p, reg);
}

void lower_dump_regions(const RegionTable *t) {
    if (!lower_debug_wants("bounds"))
        return;
    Buf b = {0};
    buf_printf(&b, "== schedule after bounds ==\n");
    lower_print_regions(&b, t);
    fputs(buf_str(&b), stderr);
    buf_free(&b);
}

static void print_range(Buf *b, const char *what, const Range *r) {
    buf_printf(b, "%s [", what);
    ir_print_expr(b, r->lo);
    buf_printf(b, ", ");
    ir_print_expr(b, r->hi);
    buf_printf(b, "]");
}

static void print_at(Buf *b, const Stage *p) {
    buf_printf(b, "bounds: %s at %s%s%s: ", p->name, p->at->name, p->at_iv ? "." : " (top)",
               p->at_iv ? p->at_iv->name : "");
}

void lower_debug_region(LowerCtx *walk, StageNest *n, Stage *p, bool have, const Range *reg) {
    if (!lower_debug_wants("bounds"))
        return;
    Module *m = walk->m;
    IrScope scope;
    ir_scope_begin(m, &scope);
    LowerCtx c = {.m = m, .s = walk->s};
    lower_adopt_uf_storage(&c, walk->regions);
    Range w[RV_MAX_DIMS];
    bool got = lower_infer_region(&c, n, p, !p->local_pad, w);
    Buf out = {0};
    print_at(&out, p);
    if (c.st != RV_OK || got != have) {
        buf_printf(&out, "the walk's region is %s, the box's %s\n", got ? "bounded" : "whole",
                   have ? "bounded" : "whole");
    } else {
        bool same = true;
        for (int d = 0; have && d < p->t->ndim; d++) {
            /* (the fused loops' arrays: the walk's, as instance() takes them) */
            Range a = {lower_ctx_simp(&c, lower_vfuse_adopt(walk, w[d].lo)),
                       lower_ctx_simp(&c, lower_vfuse_adopt(walk, w[d].hi))};
            Range u = {lower_ctx_simp(&c, reg[d].lo), lower_ctx_simp(&c, reg[d].hi)};
            if (a.lo == u.lo && a.hi == u.hi)
                continue;
            buf_printf(&out, "%s\n  %s: ", same ? "the instance differs" : "", p->t->axes[d]->name);
            print_range(&out, "walk", &a);
            print_range(&out, ", box", &u);
            same = false;
        }
        buf_printf(&out, "%s\n", same ? "the box's instance is the walk's region" : "");
    }
    fputs(buf_str(&out), stderr);
    buf_free(&out);
    lower_ctx_free(&c);
    ir_scope_end(&scope);
}
