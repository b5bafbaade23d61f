/*
 * ragged.c — regions of ragged tensors (a dimension whose extent is a
 * function of outer dimensions, `l < len[b]`) computed or cached at a
 * loop of their reader (CoRa, paper 004, §5.2).
 *
 * A region is a dense box (attach.c): per dimension an origin and an
 * extent. For a ragged dimension the box's extent is the largest row the
 * region holds: the extent at the region's outer indices where they are
 * one point (len[b] rows at a b loop), else its largest value over their
 * ranges (bounds.c: a UF over a range takes its declared range's upper
 * bound). The buffer is allocated by an upper bound of that extent over
 * every iteration: the declared range of the UF (`ufun len[b < B] in
 * 1..512`: 512 rows), never a run-time maximum, so a constant-size tile
 * can live on the stack and no prelude is needed.
 *
 * The stage's own nest over the box then runs each ragged dimension only
 * to the row's end at the values of its outer loops (`min(ext, len[b] -
 * origin)`), so it reads and computes no element the tensor does not
 * have, unless the stage pads locally (pad=1: whole tiles, a cached input
 * zero past the row's end).
 */
#include "lower/lower.h"

/* Does axis a of t have an extent over another axis of t? */
static bool axis_ragged(const Tensor *t, const Axis *a) {
    for (int j = 0; a->extent && j < t->ndim; j++)
        if (t->axes[j] != a && ir_uses_axis(a->extent, t->axes[j]))
            return true;
    return false;
}

Expr *lower_ragged_extent(LowerCtx *c, const Stage *p, int d, const Range *reg) {
    Module *m = c->m;
    const Tensor *t = p->t;
    Axis *a = t->axes[d];
    if (!axis_ragged(t, a))
        return lower_index(c, a->extent);
    /* without a region (the whole tensor) each outer axis ranges over its
     * own extent's largest value, outermost first (l < b + 1 needs b's) */
    Range whole[RV_MAX_DIMS];
    PtrMap vary = {0};
    bool ok = true;
    for (int j = 0; j < t->ndim && ok; j++) {
        if (j == d || (!reg && j > d))
            continue;
        if (!reg) {
            Range e;
            ok = t->axes[j]->extent && lower_bounds_range(m, t->axes[j]->extent, &vary, true, &e);
            whole[j] = (Range){ir_int(m, 0), ok ? ir_binary(m, EX_SUB, e.hi, ir_int(m, 1)) : NULL};
        }
        ptrmap_put(&vary, t->axes[j], (void *)(reg ? &reg[j] : &whole[j]));
    }
    Range r;
    ok = ok && lower_bounds_range(m, a->extent, &vary, !reg, &r);
    ptrmap_free(&vary);
    if (!ok) {
        lower_stage_error(c, p, "cannot bound ragged dimension %s of %s over the region %s reads",
                          a->name, p->name, p->at->name);
        return NULL;
    }
    return lower_index(c, r.hi);
}

Expr *lower_ragged_clip(LowerCtx *c, StageNest *n, const IterVar *v, Expr *ext) {
    Module *m = c->m;
    const Stage *st = n->st;
    if (st->local_pad || !n->base[v->id] || !axis_ragged(st->t, v->axis))
        return ext;
    /* the row's end is known once the loops of the axes it depends on
     * are; only those are bound here (another root's value may need v's
     * extent: h = f / E_i over f = fuse(h, i)) */
    for (int i = 0; i < st->ivs.len; i++) {
        IterVar *r = st->ivs.data[i];
        if (r->rel != IV_ROOT || r == v || !ir_uses_axis(v->axis->extent, r->axis))
            continue;
        Expr *val = lower_iv_value(c, n, r);
        if (!val)
            return ext;
        if (n->base[r->id])
            val = ir_binary(m, EX_ADD, n->base[r->id], val);
        ptrmap_put(&c->axis_value, r->axis, lower_ctx_simp(c, val));
    }
    Expr *row = lower_index(c, v->axis->extent);
    if (!row)
        return NULL;
    Expr *left = ir_binary(m, EX_SUB, ir_cast(m, RV_I64, row), n->base[v->id]);
    return lower_ctx_simp(c, ir_binary(m, EX_MIN, ext, left));
}
