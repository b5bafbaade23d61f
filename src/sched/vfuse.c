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
 *   - a stage over a region of its tensor (a cache stage, or one computed
 *     at a loop of its reader) fuses reduction loops (each element's
 *     reduction is over all of them) and, of its spatial loops, only its
 *     tensor's leading dimensions,
 *     in storage order, unpadded, without local padding: its region is
 *     then a range of the fused rows (the tiles of its reader's fused
 *     loop), which the prelude's maps enumerate as they do the whole.
 */
#include <string.h>

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

static int mirror_level(const Stage *st, const IterVar *f);

/* Why fused variable loop f of st cannot run over a region of st's
 * tensor (st a cache stage, or computed at a loop), or NULL: the region
 * is a range of the fused rows only where f's levels are the tensor's
 * leading dimensions, stored outermost in their order. */
static const char *region_illegal(const Stage *st, const IterVar *f, Buf *why) {
    if (f->reduce) /* over the whole reduction at every element, as unfused */
        return NULL;
    int k = mirror_level(st, f);
    for (int j = 0; j <= k; j++)
        if (st->order[j] != j || (st->panels && st->panels->split[j]))
            k = -1;
    if (k < 0) {
        buf_printf(why,
                   "over a region of %s (a cache stage's, or one computed at a loop of its "
                   "reader), a fused variable loop runs over a range of rows only when it "
                   "fuses the tensor's leading dimensions, in storage order",
                   st->name);
        return buf_str(why);
    }
    if (st->local_pad) {
        buf_printf(why,
                   "%s computes whole tiles (pad=1), which have no rows past a sequence's end "
                   "in a fused variable loop",
                   st->name);
        return buf_str(why);
    }
    return NULL;
}

const char *sched_vfuse_illegal(const Stage *st, const IterVar *a, const IterVar *b, Buf *why) {
    if (st->kind == STAGE_PART) {
        buf_printf(why,
                   "%s is a part of a split operation, over part of its tensor; fuse variable "
                   "loops in a stage over the whole",
                   st->name);
        return buf_str(why);
    }
    if (st->kind != STAGE_OP || st->attach != ATTACH_ROOT) {
        IterVar f = {.name = "", .rel = IV_FUSED, .fa = (IterVar *)a, .fb = (IterVar *)b,
                     .variable = true, .reduce = a->reduce};
        const char *bad = region_illegal(st, &f, why);
        if (bad)
            return bad;
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

const char *sched_vfuse_region_illegal(const Stage *st, Buf *why) {
    for (int i = 0; i < st->ivs.len; i++) {
        const IterVar *f = st->ivs.data[i];
        const char *bad = f->rel == IV_FUSED && f->variable ? region_illegal(st, f, why) : NULL;
        if (bad)
            return bad;
    }
    return NULL;
}

const IterVar *sched_region_vfuse(const Stage *st, int *k) {
    if (st->attach != ATTACH_AT)
        return NULL;
    for (int i = 0; i < st->ivs.len; i++) {
        const IterVar *f = st->ivs.data[i];
        if (f->rel == IV_FUSED && f->variable && !(f->fused && f->fused->variable) &&
            !f->reduce && (*k = mirror_level(st, f)) >= 1)
            return f;
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

static void note_var(const Expr *e, void *ctx) {
    *(bool *)ctx |= e->kind == EX_VAR;
}

/* Does some root under v have an extent that mentions an axis? */
static bool extents_mention_axes(const IterVar *v) {
    bool any = false;
    if (v->rel == IV_ROOT) {
        ir_visit(v->axis->extent, note_var, &any);
        return any;
    }
    return v->rel != IV_FUSED || extents_mention_axes(v->fa) || extents_mention_axes(v->fb);
}

static void levels_rec(const IterVar *v, bool expand, const IterVar **out, int *n) {
    if (v->rel == IV_FUSED && expand && (v->variable || !extents_mention_axes(v->fb))) {
        levels_rec(v->fa, true, out, n);
        levels_rec(v->fb, !v->variable, out, n);
    } else if (*n < SCHED_MAX_IVS) {
        out[(*n)++] = v;
    }
}

int sched_vfuse_levels(const IterVar *f, const IterVar **out) {
    int n = 0;
    levels_rec(f, true, out, &n);
    return n;
}

/* The tensor level the levels of f end at when they are the stage's
 * tensor's dimensions 0..k in order, unpadded (f then runs over the
 * tensor's rows of length k + 1 in storage order); -1 otherwise. */
static int mirror_level(const Stage *st, const IterVar *f) {
    const IterVar *lv[SCHED_MAX_IVS];
    int n = sched_vfuse_levels(f, lv);
    for (int j = 0; j < n; j++)
        if (lv[j]->rel != IV_ROOT || lv[j]->reduce || j >= st->t->ndim ||
            lv[j]->axis != st->t->axes[j] || st->t->pad[j] > 1)
            return -1;
    return n - 1;
}

typedef struct PadUse {
    const Tensor *t; /* the stage's tensor */
    int k;           /* its fused levels 0..k */
    int64_t n;
    const char *bad; /* what breaks the rule */
    Buf *why;
} PadUse;

/* Do X's levels 0..k have t's extents (X's axes read as t's)? */
static bool same_rows(const Tensor *x, const Tensor *t, int k, Module *m) {
    PtrMap sub = {0};
    bool same = x->ndim > k;
    for (int j = 0; j <= k && same; j++) {
        same = ir_substitute(m, x->axes[j]->extent, &sub) == t->axes[j]->extent && x->pad[j] <= 1;
        ptrmap_put(&sub, x->axes[j], t->axes[j]->var);
    }
    ptrmap_free(&sub);
    return same;
}

/* Every use of the fused axes in e is a read at the fused rows,
 * X[a0, .., ak, ...], of a tensor with the same rows bulk padded to a
 * multiple of n: the padding iterations read storage padding there, and
 * nothing else (an index, a ufun, an extent) at rows that do not exist. */
static void check_pad_uses(PadUse *u, const Expr *e) {
    if (!e || u->bad)
        return;
    const Tensor *t = u->t;
    int from = 0;
    if (e->kind == EX_VAR) {
        for (int j = 0; j <= u->k; j++)
            if (e->u.axis == t->axes[j]) {
                buf_printf(u->why,
                           "the padding iterations have no %s; it may only index the rows of a "
                           "tensor stored with them",
                           e->u.axis->name);
                u->bad = buf_str(u->why);
            }
        return;
    }
    if (e->kind == EX_READ && e->n > u->k) {
        bool rows = true;
        for (int j = 0; j <= u->k; j++)
            rows = rows && e->args[j]->kind == EX_VAR && e->args[j]->u.axis == t->axes[j];
        const Tensor *x = e->u.tensor;
        if (rows) {
            if (!same_rows(x, t, u->k, t->module) || x->bulk < u->n || x->bulk % u->n != 0 ||
                x->bulk_level != u->k) {
                buf_printf(u->why,
                           "the padding iterations would read %s outside its storage (a tensor "
                           "read at the fused rows must be stored with them, bulk padded to a "
                           "multiple of %lld: storage_pad of its fused loop)",
                           x->name, (long long)u->n);
                u->bad = buf_str(u->why);
                return;
            }
            from = u->k + 1;
        }
    }
    if (e->kind == EX_REDUCE)
        for (int i = 0; i < e->u.red.naxes; i++)
            check_pad_uses(u, e->u.red.axes[i]->extent);
    for (int i = from; i < e->n; i++)
        check_pad_uses(u, e->args[i]);
}

const char *sched_vfuse_pad_illegal(const Stage *st, const IterVar *f, int64_t n, bool loop,
                                    Buf *why, int *level) {
    const Tensor *t = st->t;
    int k = mirror_level(st, f);
    if (f->reduce || k < 0) {
        buf_printf(why,
                   "bulk padding pads the rows of %s's storage: the fused loop must run over "
                   "its unpadded leading dimensions, in order",
                   st->name);
        return buf_str(why);
    }
    for (int j = k + 1; j < t->ndim; j++) {
        bool any = false;
        ir_visit(t->axes[j]->extent, note_var, &any);
        if (any) {
            buf_printf(why, "dimension %s inside the padded rows is ragged", t->axes[j]->name);
            return buf_str(why);
        }
    }
    if (!loop) {
        if (t->bulk > 1 && t->bulk_level != k) {
            buf_printf(why, "%s's storage is bulk padded at another level already", t->name);
            return buf_str(why);
        }
        *level = k;
        return NULL;
    }
    if (t->bulk < n || t->bulk % n != 0) {
        buf_printf(why,
                   "the rows of %s are stored padded to %d; the loop may only run to a multiple "
                   "of that (use storage_pad(%s, %lld) first)",
                   t->name, t->bulk > 1 ? t->bulk : 1, f->name, (long long)n);
        return buf_str(why);
    }
    PadUse u = {t, k, n, NULL, why};
    check_pad_uses(&u, st->body);
    check_pad_uses(&u, st->pred);
    check_pad_uses(&u, st->else_body);
    *level = k;
    return u.bad;
}

/* The extent of level v over the level axes (sub: each root's axis to
 * its level's); NULL unless v is an axis or a fuse of axes. */
static Expr *level_extent(Module *m, const IterVar *v, const PtrMap *sub) {
    if (v->rel == IV_ROOT)
        return v->axis->extent ? ir_substitute(m, v->axis->extent, sub) : NULL;
    if (v->rel != IV_FUSED || v->variable)
        return NULL;
    Expr *a = level_extent(m, v->fa, sub), *b = level_extent(m, v->fb, sub);
    if (!a || !b)
        return NULL;
    return ir_binary(m, EX_MUL, ir_binary(m, EX_MAX, a, ir_int(m, 0)),
                     ir_binary(m, EX_MAX, b, ir_int(m, 0)));
}

Expr *sched_vfuse_extent(Module *m, const IterVar *f) {
    const IterVar *lv[SCHED_MAX_IVS];
    int n = sched_vfuse_levels(f, lv);
    if (n < 2 || n > RV_MAX_DIMS)
        return NULL;
    Axis *ax[RV_MAX_DIMS];
    PtrMap sub = {0};
    Expr *e = NULL;
    for (int j = 0; j < n; j++) {
        /* the outer levels are the sum's axes: only axes name them */
        Expr *x = j + 1 < n && lv[j]->rel != IV_ROOT ? NULL : level_extent(m, lv[j], &sub);
        if (!x)
            break;
        if (j + 1 == n) {
            e = ir_reduce(m, RV_REDUCE_SUM, n - 1, ax, ir_binary(m, EX_MAX, x, ir_int(m, 0)));
            break;
        }
        ax[j] = ir_axis_new(m, lv[j]->name, AX_REDUCE, x);
        ptrmap_put(&sub, lv[j]->axis, ax[j]->var);
    }
    ptrmap_free(&sub);
    if (e && f->pad > 1)
        e = ir_binary(m, EX_MUL,
                      ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, e, ir_int(m, f->pad - 1)),
                                ir_int(m, f->pad)),
                      ir_int(m, f->pad));
    return e;
}

static rv_status bulk_fail(const IterVar *f, const char *msg, ...) {
    va_list ap;
    va_start(ap, msg);
    rv_status r = sched_step_vfail(f->pad_step, f->pad_src, f->pad_step->loc, msg, ap);
    va_end(ap);
    return r;
}

rv_status sched_check_bulk_pads(Schedule *s) {
    for (int i = 0; i < s->stages.len; i++) {
        const Stage *st = s->stages.data[i];
        for (int k = 0; k < st->ivs.len; k++) {
            const IterVar *f = st->ivs.data[k];
            if (!f->variable || f->pad <= 1 || !f->pad_step)
                continue;
            Buf why = {0};
            int level;
            const char *bad = sched_vfuse_pad_illegal(st, f, f->pad, true, &why, &level);
            rv_status r = bad ? bulk_fail(f, "%s", bad) : RV_OK;
            buf_free(&why);
            if (r != RV_OK)
                return r;
        }
    }
    return RV_OK;
}

bool sched_extent_is_vfused(const IterVar *v) {
    switch (v->rel) {
    case IV_FUSED:
        return v->variable || sched_extent_is_vfused(v->fa) || sched_extent_is_vfused(v->fb);
    case IV_OUTER:
        return sched_extent_is_vfused(v->parent);
    default:
        return false;
    }
}
