/*
 * vfuse.c — the schedule's side of fusing variable loops (CoRa section
 * 5.1): `f = fuse(b, l)` where `l < len[b]`. The fused loop runs over the
 * sum of l's extents; b and l come back from f through arrays the prelude
 * computes per raggedness pattern (src/lower/vfuse.c). What the lowering
 * needs, and this file checks at the step:
 *
 *   - the fused parts are axes and fuses of axes, not splits: a split's
 *     tail would make the levels' extents depend on the tile (split the
 *     fused loop instead; it then splits, tiles, runs in parallel and
 *     vectorizes like any loop);
 *   - every extent inside them depends only on axes inside them, so the
 *     prelude can enumerate the fused space before the kernel (no loop
 *     outside f, and `a`'s own extent mentions no axis of the stage);
 *   - no loop padding on those axes (`pad` changes an extent the prelude
 *     sums);
 *   - the stage is its own kernel over its whole tensor: a cache stage or
 *     a stage computed at a loop covers a region whose origin and extent
 *     are the reader's, which the prelude cannot enumerate.
 */
#include "sched/sched.h"

/* The roots v derives from. */
static void roots_of(const IterVar *v, const IterVar **out, int *n) {
    switch (v->rel) {
    case IV_ROOT:
        out[(*n)++] = v;
        return;
    case IV_FUSED:
        roots_of(v->fa, out, n);
        roots_of(v->fb, out, n);
        return;
    default:
        roots_of(v->parent, out, n);
        return;
    }
}

static bool has_split(const IterVar *v) {
    switch (v->rel) {
    case IV_ROOT:
        return false;
    case IV_FUSED:
        return has_split(v->fa) || has_split(v->fb);
    default:
        return true;
    }
}

/* Does the extent of root r mention the axis of a root of `set`? */
static bool mentions(const IterVar *r, const IterVar *const *set, int n) {
    for (int i = 0; i < n; i++)
        if (set[i] != r && r->axis->extent && ir_uses_axis(r->axis->extent, set[i]->axis))
            return true;
    return false;
}

/* A root of the stage, not in `set`, whose axis the extent of r mentions. */
static const IterVar *outside_dep(const Stage *st, const IterVar *r, const IterVar *const *set,
                                  int n) {
    for (int i = 0; i < st->ivs.len; i++) {
        const IterVar *q = st->ivs.data[i];
        bool in = false;
        for (int j = 0; j < n; j++)
            in = in || set[j] == q;
        if (q->rel == IV_ROOT && !in && q != r && r->axis->extent &&
            ir_uses_axis(r->axis->extent, q->axis))
            return q;
    }
    return NULL;
}

bool sched_fuse_is_variable(const Stage *st, const IterVar *a, const IterVar *b) {
    (void)st;
    const IterVar *ra[SCHED_MAX_IVS], *rb[SCHED_MAX_IVS];
    int na = 0, nb = 0;
    roots_of(a, ra, &na);
    roots_of(b, rb, &nb);
    for (int i = 0; i < nb; i++)
        if (mentions(rb[i], ra, na))
            return true;
    return false;
}

const char *sched_vfuse_illegal(const Stage *st, const IterVar *a, const IterVar *b, Buf *why) {
    if (st->kind != STAGE_OP || st->attach != ATTACH_ROOT) {
        buf_printf(why,
                   "%s covers a region of its tensor (a cache stage, or computed at a loop of "
                   "its reader); only a stage computed over its whole tensor fuses variable "
                   "loops",
                   st->name);
        return buf_str(why);
    }
    const IterVar *v[2] = {a, b};
    for (int k = 0; k < 2; k++)
        if (has_split(v[k])) {
            buf_printf(why,
                       "%s comes from a split; fuse variable loops before splitting them (then "
                       "split the fused loop)",
                       v[k]->name);
            return buf_str(why);
        }
    const IterVar *all[SCHED_MAX_IVS];
    int n = 0, na;
    roots_of(a, all, &n);
    na = n;
    roots_of(b, all, &n);
    for (int i = 0; i < n; i++) {
        if (all[i]->pad > 1) {
            buf_printf(why, "loop %s is padded (pad(%s, %lld)); fuse before padding", all[i]->name,
                       all[i]->name, (long long)all[i]->pad);
            return buf_str(why);
        }
        /* a's extents may mention only a's axes; b's those of a and b */
        const IterVar *q = outside_dep(st, all[i], all, i < na ? na : n);
        if (q) {
            buf_printf(why,
                       "the extent of %s depends on %s, which is not fused with it (the fused "
                       "loop's iterations are enumerated before the kernel runs)",
                       all[i]->name, q->name);
            return buf_str(why);
        }
    }
    return NULL;
}

bool sched_stage_has_vfuse(const Stage *st) {
    for (int i = 0; i < st->ivs.len; i++)
        if (st->ivs.data[i]->rel == IV_FUSED && st->ivs.data[i]->variable)
            return true;
    return false;
}

bool sched_vfused_together(const Stage *st, const IterVar *o, const IterVar *r) {
    for (int i = 0; i < st->ivs.len; i++) {
        const IterVar *f = st->ivs.data[i];
        if (f->rel == IV_FUSED && f->variable && sched_iv_derives_from(f->fa, o) &&
            sched_iv_derives_from(f->fb, r))
            return true;
    }
    return false;
}
