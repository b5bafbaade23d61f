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
 * It is computed by the walk's own region inference (bounds.c,
 * lower_infer_region) on a nest of the host in that state, so the union
 * over the readers (the host, or stages computed inside it) is the same.
 *
 * The walk does not consume the table yet: it infers each copy's region
 * where it places the stage, from that copy's state. Instantiating the
 * box instead (substituting the copy's values, then simplifying) gives
 * the walk's expression in 115 of the 116 placements of the corpus
 * (RAVEL_DEBUG=bounds compares them at each, lower_debug_region), but
 * not all: the walk simplifies at every step of the interval arithmetic
 * with the values in place, the instance once at the end, and proves
 * more (compute_at_modulo_region.rv: a simpler loop bound, different C);
 * and a last tile of constant extent 1 is a single value, with which the
 * walk bounds reads a symbolic `ii.ext` cannot (docs/pipeline.md,
 * "Region inference as a pass over the schedule"). So the pass runs for
 * RAVEL_DEBUG=bounds and for tests, inside an IR scope that leaves the
 * module as it was (expression ids order the simplifier's terms).
 */
#include <stdlib.h>
#include <string.h>

#include "lower/lower.h"

/* A variable of box b, of the given kind, for iv, named a.b[.c]. */
static Expr *param(Module *m, RegionBox *b, RegionParamKind k, const IterVar *iv, const char *x,
                   const char *y, const char *z) {
    Buf nm = {0};
    buf_printf(&nm, "%s%s%s%s%s", x, y ? "." : "", y ? y : "", z ? "." : "", z ? z : "");
    RegionParam rp = {lower_loop_var(m, buf_str(&nm), NULL), k, iv};
    buf_free(&nm);
    vec_push(&b->params, rp);
    return rp.sym->var;
}

/* The host's nest at p's attach point, as the walk has it there up to
 * the box's variables. */
static bool attach_nest(LowerCtx *c, RegionBox *b, StageNest *n) {
    Module *m = c->m;
    const Stage *p = b->p;
    Stage *h = p->at;
    memset(n, 0, sizeof *n);
    n->st = h;
    n->mode = MODE_TOP;
    for (int i = 0; i < h->ivs.len; i++) {
        IterVar *r = h->ivs.data[i];
        if (r->rel == IV_ROOT && !r->reduce && h->attach == ATTACH_AT) {
            n->base[r->id] = param(m, b, RP_ORIGIN, r, h->name, r->axis->name, "lo");
            n->root_ext[r->id] = param(m, b, RP_EXTENT, r, h->name, r->axis->name, "ext");
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
        if (part) {
            n->state[v->parent->id] = SPLIT_PARAM;
            n->tile[v->parent->id] =
                param(m, b, RP_TILE, v->parent, v->parent->inner->name, "ext", NULL);
        }
        n->value[v->id] = param(m, b, RP_VALUE, v, v->name, NULL, NULL);
        if (v == p->at_iv)
            return true;
    }
    return false; /* the checker places at_iv among the host's leaves */
}

/* The box of stage p, computed at a loop. */
static RegionBox infer_box(LowerCtx *c, Stage *p) {
    RegionBox b = {.p = p};
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
        if (p->attach == ATTACH_AT)
            vec_push(&t->boxes, infer_box(&c, p));
    }
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
}

void lower_print_regions(Buf *b, const RegionTable *t) {
    for (int k = 0; k < t->boxes.len; k++) {
        const RegionBox *r = &t->boxes.data[k];
        const Stage *p = r->p;
        buf_printf(b, "%s at %s%s%s", p->name, p->at->name, p->at_iv ? "." : " (top)",
                   p->at_iv ? p->at_iv->name : "");
        for (int i = 0; i < r->params.len; i++)
            buf_printf(b, "%s%s", i ? ", " : " over ", r->params.data[i].sym->name);
        buf_printf(b, "%s\n", r->whole ? ": whole tensor" : ":");
        for (int d = 0; !r->whole && d < p->t->ndim; d++) {
            buf_printf(b, "  %s: [", p->t->axes[d]->name);
            ir_print_expr(b, r->dim[d].lo);
            buf_printf(b, ", ");
            ir_print_expr(b, r->dim[d].hi);
            buf_printf(b, "]\n");
        }
    }
}

void lower_debug_bounds(Schedule *s) {
    if (!lower_debug_wants("bounds"))
        return;
    IrScope scope;
    ir_scope_begin(s->m, &scope);
    RegionTable t;
    Buf b = {0};
    buf_printf(&b, "== schedule after bounds ==\n");
    if (lower_infer_bounds(s, &t) == RV_OK)
        lower_print_regions(&b, &t);
    else
        buf_printf(&b, "error: %s\n", rv_last_error());
    fputs(buf_str(&b), stderr);
    buf_free(&b);
    lower_regions_free(&t);
    ir_scope_end(&scope);
}

/* Box b where the walk is, in nest n at b's attach point: each variable
 * the value it has in n's copy, simplified (c: not the walk's context,
 * whose maps must not hold what a scope frees). */
static bool instance(LowerCtx *c, StageNest *n, const RegionBox *b, Range *reg) {
    if (b->whole)
        return false;
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
    for (int d = 0; ok && d < b->p->t->ndim; d++) {
        reg[d].lo = lower_ctx_simp(c, ir_substitute(c->m, b->dim[d].lo, &at));
        reg[d].hi = lower_ctx_simp(c, ir_substitute(c->m, b->dim[d].hi, &at));
    }
    ptrmap_free(&at);
    return ok;
}

static void print_range(Buf *b, const char *what, const Range *r) {
    buf_printf(b, "%s [", what);
    ir_print_expr(b, r->lo);
    buf_printf(b, ", ");
    ir_print_expr(b, r->hi);
    buf_printf(b, "]");
}

void lower_debug_region(LowerCtx *walk, StageNest *n, Stage *p, bool have, const Range *reg) {
    if (!lower_debug_wants("bounds"))
        return;
    Module *m = walk->m;
    IrScope scope;
    ir_scope_begin(m, &scope);
    LowerCtx c = {.m = m, .s = walk->s};
    RegionBox b = infer_box(&c, p);
    Range inst[RV_MAX_DIMS];
    bool got = c.st == RV_OK && instance(&c, n, &b, inst);
    Buf out = {0};
    buf_printf(&out, "bounds: %s at %s%s%s: ", p->name, p->at->name, p->at_iv ? "." : " (top)",
               p->at_iv ? p->at_iv->name : "");
    if (got != have) {
        buf_printf(&out, "the box is %s, the walk's region %s\n", got ? "bounded" : "whole",
                   have ? "bounded" : "whole");
    } else {
        bool same = true;
        for (int d = 0; have && d < p->t->ndim; d++) {
            Range w = {lower_ctx_simp(&c, reg[d].lo), lower_ctx_simp(&c, reg[d].hi)};
            if (w.lo == inst[d].lo && w.hi == inst[d].hi)
                continue;
            buf_printf(&out, "%s\n  %s: ", same ? "the instance differs" : "", p->t->axes[d]->name);
            print_range(&out, "walk", &w);
            print_range(&out, ", box", &inst[d]);
            same = false;
        }
        buf_printf(&out, "%s\n", same ? "the box's instance is the walk's region" : "");
    }
    fputs(buf_str(&out), stderr);
    buf_free(&out);
    vec_free(&b.params);
    lower_ctx_free(&c);
    ir_scope_end(&scope);
}
