/*
 * prims.c — the schedule primitives: one handler per row of prims.def,
 * which declares each primitive's arguments (primtab.c checks a step's
 * shape against its row before the handler runs; the handler checks
 * values and legality).
 *
 * `ravel help schedules` lists them with their arguments; docs/schedules.md
 * describes them in full.
 *
 * Each checks everything it relies on and returns RV_ERR_SCHEDULE with a
 * message located at the step; on error the schedule is unchanged, except
 * after the check that follows every step (check_at_loop), where the
 * caller discards the schedule. sched_check_placements checks the readers
 * of every placed stage once all blocks are applied.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/sched.h"
/* the simplifier decides whether a variable extent depends on a loop */
#include "ir/simplify.h"

typedef struct Ctx {
    Schedule *s;
    Stage *st;      /* NULL in a group's block */
    Recurse *group; /* a group's block (PRIM_GROUP steps) */
    const SchedStep *step;
    const SrcFile *src;
} Ctx;

static rv_status fail(Ctx *c, SrcLoc loc, const char *fmt, ...) RV_PRINTF(3, 4);
static rv_status fail(Ctx *c, SrcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rv_status r = sched_step_vfail(c->step, c->src, loc, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- arguments ---- */

static int npositional(const SchedStep *p) {
    int n = 0;
    for (int i = 0; i < p->nargs; i++)
        n += p->args[i].key == NULL;
    return n;
}

static const SchedArg *positional(const SchedStep *p, int k) {
    for (int i = 0; i < p->nargs; i++)
        if (!p->args[i].key && k-- == 0)
            return &p->args[i];
    return NULL;
}

static const SchedArg *keyword(const SchedStep *p, const char *key) {
    for (int i = 0; i < p->nargs; i++)
        if (p->args[i].key && strcmp(p->args[i].key, key) == 0)
            return &p->args[i];
    return NULL;
}

/* The argument kinds match the row of prims.def (sched_prim_check); the
 * helpers below check values. */
static rv_status arg_int(Ctx *c, const SchedArg *a, int64_t lo, int64_t hi, const char *what,
                         int64_t *out) {
    if (a->i < lo || a->i > hi)
        return fail(c, a->loc, "%s must be in %lld..%lld, got %lld", what, (long long)lo,
                    (long long)hi, (long long)a->i);
    *out = a->i;
    return RV_OK;
}

static void list_leaves(Buf *b, const Stage *st) {
    for (int i = 0; i < st->leaves.len; i++)
        buf_printf(b, "%s%s", i ? ", " : "", st->leaves.data[i]->name);
    if (!st->leaves.len)
        buf_puts(b, "none");
}

static int leaf_index(const Stage *st, const IterVar *v) {
    for (int i = 0; i < st->leaves.len; i++)
        if (st->leaves.data[i] == v)
            return i;
    return -1;
}

static IterVar *iv_named(const Stage *st, const char *name) {
    for (int i = 0; i < st->ivs.len; i++)
        if (strcmp(st->ivs.data[i]->name, name) == 0)
            return st->ivs.data[i];
    return NULL;
}

/* The leaf named by argument `a`. */
static rv_status arg_leaf(Ctx *c, const SchedArg *a, IterVar **out) {
    IterVar *v = iv_named(c->st, a->s);
    if (!v || leaf_index(c->st, v) < 0) {
        Buf b = {0}, hint = {0};
        list_leaves(&b, c->st);
        if (!v) {
            Vec(const char *) names = {0};
            for (int i = 0; i < c->st->leaves.len; i++)
                vec_push(&names, c->st->leaves.data[i]->name);
            base_near_hint(&hint, a->s, names.data, names.len);
            vec_free(&names);
        }
        rv_status r = fail(c, a->loc, "%s has no loop '%s'%s%s (its loops: %s)", c->st->name,
                           a->s, v ? " any more" : "", buf_str(&hint), buf_str(&b));
        buf_free(&hint);
        buf_free(&b);
        return r;
    }
    *out = v;
    return RV_OK;
}

static rv_status check_new_name(Ctx *c, const char *name, SrcLoc loc) {
    if (iv_named(c->st, name))
        return fail(c, loc, "%s already has a loop named '%s'", c->st->name, name);
    return RV_OK;
}

static bool stage_has_loops(Ctx *c, SrcLoc loc, rv_status *r) {
    if (c->st->t->op->kind == OP_EXTERN && c->st->kind == STAGE_OP) {
        *r = fail(c, loc, "%s is a call to extern kernel '%s'; it has no loops to schedule",
                  c->st->name, c->st->t->op->kernel);
        return false;
    }
    if (c->st->attach == ATTACH_INLINE) {
        *r = fail(c, loc, "%s is inlined into its readers; it has no loops", c->st->name);
        return false;
    }
    return true;
}

/* ---- loop order legality ---- */

/* The value of v over its leaves, each leaf a fresh loop variable over
 * its range ([0, ext) for v itself); the variables go to leaf_ax by id.
 * NULL through a fuse (its parts are a division and a remainder). */
static Expr *value_over_leaves(Module *m, const IterVar *v, Expr *ext, Axis **leaf_ax) {
    if (v->fused || !ext)
        return NULL;
    if (!v->outer) {
        Axis *a = ir_axis_new(m, v->name, AX_LOOP, ext);
        leaf_ax[v->id] = a;
        return a->var;
    }
    int64_t f = v->inner->factor;
    Expr *oe = ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, ext, ir_int(m, f - 1)), ir_int(m, f));
    Expr *o = value_over_leaves(m, v->outer, oe, leaf_ax),
         *i = value_over_leaves(m, v->inner, ir_int(m, f), leaf_ax);
    return o && i ? ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, o, ir_int(m, f)), i) : NULL;
}

/* Is the extent of root r the same for every value of o's leaves from
 * position `from` on? o written over its leaves (i = io*6 + ii after
 * split(i, 6)) and simplified with their ranges, the extent may no longer
 * mention them: k < i/6*6 is k < io*6 for every ii < 6. */
static bool extent_free_of_leaves(Ctx *c, const IterVar *r, const IterVar *o, int from) {
    Stage *st = c->st;
    Module *m = c->s->m;
    Axis *leaf_ax[SCHED_MAX_IVS] = {0};
    /* a padded loop runs past the extent the ranges below assume */
    Expr *val = o->pad == 1 ? value_over_leaves(m, o, o->axis->extent, leaf_ax) : NULL;
    if (!val)
        return false;
    PtrMap map = {0};
    ptrmap_put(&map, o->axis, val);
    Expr *e = ir_simplify_expr(m, ir_substitute(m, r->axis->extent, &map));
    ptrmap_free(&map);
    for (int k = from; k < st->leaves.len; k++) {
        const IterVar *l = st->leaves.data[k];
        if (sched_iv_derives_from(l, o) && (!leaf_ax[l->id] || ir_uses_axis(e, leaf_ax[l->id])))
            return false;
    }
    return true;
}

/* Loops whose extent depends on another axis (l < len[b]) stay inside
 * every loop derived from it that their extent depends on; a spatial loop
 * inside a reduction loop needs the reduction to accumulate in place. */
static rv_status check_order(Ctx *c, SrcLoc loc) {
    Stage *st = c->st;
    for (int i = 0; i < st->ivs.len; i++) {
        IterVar *r = st->ivs.data[i];
        if (r->rel != IV_ROOT || !r->axis->extent)
            continue;
        for (int j = 0; j < st->ivs.len; j++) {
            IterVar *o = st->ivs.data[j];
            if (o->rel != IV_ROOT || o == r || !ir_uses_axis(r->axis->extent, o->axis) ||
                sched_vfused_together(st, o, r))
                continue;
            /* every leaf from o before every leaf from r */
            int last_o = -1, first_r = st->leaves.len;
            for (int k = 0; k < st->leaves.len; k++) {
                if (sched_iv_derives_from(st->leaves.data[k], o))
                    last_o = k;
                if (sched_iv_derives_from(st->leaves.data[k], r) && k < first_r)
                    first_r = k;
            }
            /* (one fused loop over both, r outside: r's extent would need
             * o's value before the loop gives it; a variable fusion, o
             * outside, was skipped above) */
            if (last_o == first_r && last_o >= 0)
                return fail(c, loc,
                            "the extent of %s depends on %s, fused inside it in loop %s: fuse "
                            "%s outside %s",
                            r->name, o->name, st->leaves.data[first_r]->name, o->name, r->name);
            if (last_o > first_r && !extent_free_of_leaves(c, r, o, first_r))
                return fail(c, loc,
                            "loop %s must stay inside loop %s: the extent of %s depends on %s",
                            st->leaves.data[first_r]->name, st->leaves.data[last_o]->name, r->name,
                            o->name);
        }
    }
    /* a merge split's inner loops inside its outer one: the inner
     * extent is the block's (F, or the merged last block's) */
    for (int i = 0; i < st->ivs.len; i++) {
        IterVar *p = st->ivs.data[i];
        if (!p->outer || p->tail != TAIL_MERGE)
            continue;
        int io = leaf_index(st, p->outer);
        for (int k = 0; k < io; k++)
            if (sched_iv_derives_from(st->leaves.data[k], p->inner))
                return fail(c, loc,
                            "loop %s must stay inside loop %s: split(%s, %lld, tail=\"merge\") "
                            "makes the extent of %s depend on %s",
                            st->leaves.data[k]->name, p->outer->name, p->name,
                            (long long)p->inner->factor, p->inner->name, p->outer->name);
    }
    int first_red = -1;
    for (int k = 0; k < st->leaves.len; k++) {
        IterVar *v = st->leaves.data[k];
        if (v->reduce && first_red < 0)
            first_red = k;
        if (!v->reduce && first_red >= 0) {
            const Expr *R = st->reduce;
            const char *why = NULL;
            if (st->body != R)
                why = "its sum has an epilogue around it";
            else if (R->u.red.rk == RV_REDUCE_ARGMAX)
                why = "argmax keeps its reduction loops innermost";
            else if (R->dtype != st->t->dtype)
                why = "it accumulates in a different type";
            if (why)
                return fail(c, loc,
                            "spatial loop %s inside reduction loop %s needs %s to accumulate in "
                            "place, but %s; use `%sL = cache_write(%s)` and schedule that stage",
                            v->name, st->leaves.data[first_red]->name, st->name, why, st->name,
                            st->name);
        }
    }
    return RV_OK;
}

/* A stage computed inside st runs before its reader: at the loop where
 * the reader (or the stage of st that contains it) is computed, or at a
 * loop around it. */
static rv_status check_producers_enclose(Ctx *c, SrcLoc loc) {
    Stage *st = c->st;
    for (int i = 0; i < c->s->stages.len; i++) {
        Stage *q = c->s->stages.data[i];
        if (q->attach != ATTACH_AT || q->at != st)
            continue;
        for (int j = 0; j < c->s->stages.len; j++) { /* every reader of q */
            Stage *w = c->s->stages.data[j];
            if (w->t == q->t || w->attach == ATTACH_INLINE || !sched_stage_reads_tensor(w, q->t))
                continue;
            while (w != st && w->attach == ATTACH_AT && w->at != st)
                w = w->at;
            if (w == st || w->attach != ATTACH_AT)
                continue; /* read by st itself (or not placed in st) */
            int pq = q->at_iv ? leaf_index(st, q->at_iv) : -1;
            int pw = w->at_iv ? leaf_index(st, w->at_iv) : -1;
            if (pq > pw && !w->at_iv)
                return fail(c, loc,
                            "%s would be computed at loop %s, after %s reads it (%s is computed at "
                            "the top of %s)",
                            q->name, q->at_iv->name, w->name, w->name, st->name);
            if (pq > pw)
                return fail(c, loc,
                            "%s would be computed at loop %s, inside loop %s where %s, which reads "
                            "it, is computed",
                            q->name, q->at_iv->name, w->at_iv->name, w->name);
        }
    }
    return RV_OK;
}

/* ---- loop primitives ---- */

static IterVar *iv_new(Schedule *s, Stage *st, const char *name, IterRel rel, bool reduce) {
    IterVar *v = arena_alloc(s->m->arena, sizeof(IterVar));
    v->name = ir_name(s->m, name);
    v->rel = rel;
    v->reduce = reduce;
    v->kind = LOOP_SERIAL;
    v->pad = 1;
    v->id = st->ivs.len;
    vec_push(&st->ivs, v);
    return v;
}

/* A stage computed at loop v is placed in v's body; once v is split or
 * fused it has no body of its own (the stage would never be computed). */
static rv_status check_no_stage_at(Ctx *c, const IterVar *v, SrcLoc loc) {
    for (int i = 0; i < c->s->stages.len; i++) {
        const Stage *p = c->s->stages.data[i];
        if (p->attach == ATTACH_AT && p->at == c->st && p->at_iv == v)
            return fail(c, loc,
                        "%s is computed at loop %s; transform %s before compute_at(%s, ...)",
                        p->name, v->name, v->name, p->name);
    }
    return RV_OK;
}

/* The outer loop of a split with tail="merge" stays one loop: the walk
 * runs it as its full blocks then the merged last block (nest.c), which
 * needs that loop itself, not a part of it. */
static rv_status check_not_merge_outer(Ctx *c, const IterVar *v, SrcLoc loc) {
    if (v->rel == IV_OUTER && v->parent->tail == TAIL_MERGE)
        return fail(c, loc,
                    "loop %s is the outer loop of a split with tail=\"merge\": it stays one "
                    "loop (split or fuse its inner loop, or split %s without tail=\"merge\")",
                    v->name, v->parent->name);
    return RV_OK;
}

/* Does v come from a part of a split with tail="merge"? */
static bool iv_from_merge(const IterVar *v) {
    switch (v->rel) {
    case IV_OUTER:
    case IV_INNER:
        return v->parent->tail == TAIL_MERGE || iv_from_merge(v->parent);
    case IV_FUSED:
        return iv_from_merge(v->fa) || iv_from_merge(v->fb);
    default:
        return false;
    }
}

static rv_status do_split(Ctx *c, IterVar *v, int64_t f, TailMode tail, const char *on,
                          const char *in, IterVar **po, IterVar **pi) {
    Stage *st = c->st;
    SrcLoc loc = c->step->loc;
    if (v->kind != LOOP_SERIAL)
        return fail(c, loc, "loop %s is already %s; split it before choosing its kind", v->name,
                    sched_loop_kind_name(v->kind));
    rv_status r;
    if ((r = check_not_merge_outer(c, v, loc)) != RV_OK)
        return r;
    if ((r = check_no_stage_at(c, v, loc)) != RV_OK)
        return r;
    if ((r = check_new_name(c, on, loc)) != RV_OK || (r = check_new_name(c, in, loc)) != RV_OK)
        return r;
    if (strcmp(on, in) == 0)
        return fail(c, loc, "the two parts need different names");
    int k = leaf_index(st, v);
    IterVar *o = iv_new(c->s, st, on, IV_OUTER, v->reduce);
    IterVar *i = iv_new(c->s, st, in, IV_INNER, v->reduce);
    o->parent = i->parent = v;
    o->factor = i->factor = f;
    v->outer = o;
    v->inner = i;
    v->tail = tail;
    st->leaves.data[k] = o;
    vec_insert(&st->leaves, k + 1, i);
    st->touched = true;
    /* (a loop whose extent was free of an outer one's value may depend on
     * its parts: l < len[b] placed outside b is legal where B is 1..1, b
     * being 0, but after split(b, 64) b is bo*64 + bi with bi up to 63,
     * and l's extent would need bi outside its loop) */
    if ((r = check_order(c, loc)) != RV_OK) {
        vec_remove(&st->leaves, k + 1);
        st->leaves.data[k] = v;
        v->outer = v->inner = NULL;
        return r;
    }
    *po = o;
    *pi = i;
    return RV_OK;
}

static rv_status split_args(Ctx *c, int first, int64_t *f, TailMode *tail) {
    rv_status r;
    if ((r = arg_int(c, positional(c->step, first), 1, INT32_MAX, "the factor", f)) != RV_OK)
        return r;
    *tail = TAIL_PARTITION;
    const SchedArg *t = keyword(c->step, "tail");
    if (t) {
        if (strcmp(t->s, "guard") == 0)
            *tail = TAIL_GUARD;
        else if (strcmp(t->s, "merge") == 0)
            *tail = TAIL_MERGE;
        else if (strcmp(t->s, "partition") != 0)
            return fail(c, t->loc, "tail must be \"partition\", \"guard\" or \"merge\"");
    }
    return RV_OK;
}

static rv_status prim_split(Ctx *c) {
    rv_status r;
    IterVar *v, *o, *i;
    int64_t f;
    TailMode tail;
    if ((r = arg_leaf(c, positional(c->step, 0), &v)) != RV_OK ||
        (r = split_args(c, 1, &f, &tail)) != RV_OK)
        return r;
    return do_split(c, v, f, tail, c->step->outs[0], c->step->outs[1], &o, &i);
}

/* Moves the given leaves into the positions they occupy, in this order. */
static rv_status do_reorder(Ctx *c, IterVar *const *vs, int n, SrcLoc loc) {
    Stage *st = c->st;
    int pos[64];
    if (n > 64)
        return fail(c, loc, "too many loops");
    for (int a = 0; a < n; a++) {
        pos[a] = leaf_index(st, vs[a]);
        for (int b = 0; b < a; b++)
            if (vs[a] == vs[b])
                return fail(c, loc, "loop %s appears twice", vs[a]->name);
    }
    /* sort positions */
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && pos[b - 1] > pos[b]; b--) {
            int t = pos[b];
            pos[b] = pos[b - 1];
            pos[b - 1] = t;
        }
    IterVar **saved = base_xmalloc(sizeof(IterVar *) * (size_t)(st->leaves.len + 1));
    memcpy(saved, st->leaves.data, sizeof(IterVar *) * (size_t)st->leaves.len);
    for (int a = 0; a < n; a++)
        st->leaves.data[pos[a]] = vs[a];
    rv_status r = check_order(c, loc);
    if (r == RV_OK)
        r = check_producers_enclose(c, loc);
    if (r != RV_OK)
        memcpy(st->leaves.data, saved, sizeof(IterVar *) * (size_t)st->leaves.len);
    base_free(saved);
    st->touched = true;
    return r;
}

static rv_status prim_reorder(Ctx *c) {
    int n = npositional(c->step);
    rv_status r;
    if (n > 64)
        return fail(c, c->step->loc, "too many loops");
    IterVar *vs[64];
    for (int a = 0; a < n; a++)
        if ((r = arg_leaf(c, positional(c->step, a), &vs[a])) != RV_OK)
            return r;
    return do_reorder(c, vs, n, c->step->loc);
}

static rv_status prim_tile(Ctx *c) {
    rv_status r;
    IterVar *x, *y, *p[4];
    int64_t fx, fy;
    TailMode tx, ty;
    if ((r = arg_leaf(c, positional(c->step, 0), &x)) != RV_OK ||
        (r = arg_leaf(c, positional(c->step, 1), &y)) != RV_OK ||
        (r = split_args(c, 2, &fx, &tx)) != RV_OK || (r = split_args(c, 3, &fy, &ty)) != RV_OK)
        return r;
    if (x == y)
        return fail(c, c->step->loc, "tiles two different loops");
    const char *const *o = c->step->outs;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < a; b++)
            if (strcmp(o[a], o[b]) == 0)
                return fail(c, c->step->loc, "the name '%s' is given twice", o[a]);
    if ((r = do_split(c, x, fx, tx, o[0], o[2], &p[0], &p[2])) != RV_OK)
        return r;
    if ((r = do_split(c, y, fy, ty, o[1], o[3], &p[1], &p[3])) != RV_OK)
        return r;
    return do_reorder(c, p, 4, c->step->loc);
}

static rv_status prim_fuse(Ctx *c) {
    rv_status r;
    IterVar *a, *b;
    if ((r = arg_leaf(c, positional(c->step, 0), &a)) != RV_OK ||
        (r = arg_leaf(c, positional(c->step, 1), &b)) != RV_OK)
        return r;
    Stage *st = c->st;
    SrcLoc loc = c->step->loc;
    if ((r = check_not_merge_outer(c, a, loc)) != RV_OK ||
        (r = check_not_merge_outer(c, b, loc)) != RV_OK)
        return r;
    int ia = leaf_index(st, a), ib = leaf_index(st, b);
    if (ib != ia + 1)
        return fail(c, loc, "%s and %s are not adjacent with %s outside (reorder them first)",
                    a->name, b->name, a->name);
    if (a->reduce != b->reduce)
        return fail(c, loc, "cannot fuse a reduction loop with a spatial loop");
    if (a->kind != LOOP_SERIAL || b->kind != LOOP_SERIAL)
        return fail(c, loc, "fuse loops before choosing their kinds");
    if ((r = check_no_stage_at(c, a, loc)) != RV_OK || (r = check_no_stage_at(c, b, loc)) != RV_OK)
        return r;
    /* b's extent depends on a: CoRa's variable-loop fusion (vfuse.c) */
    bool variable = sched_fuse_is_variable(st, a, b);
    if (variable) {
        Buf why = {0};
        const char *bad = sched_vfuse_illegal(st, a, b, &why);
        if (bad) {
            r = fail(c, loc, "cannot fuse %s with %s: %s", a->name, b->name, bad);
            buf_free(&why);
            return r;
        }
    }
    if ((r = check_new_name(c, c->step->outs[0], loc)) != RV_OK)
        return r;
    IterVar *f = iv_new(c->s, st, c->step->outs[0], IV_FUSED, a->reduce);
    f->fa = a;
    f->fb = b;
    f->variable = variable;
    a->fused = b->fused = f;
    st->leaves.data[ia] = f;
    vec_remove(&st->leaves, ib);
    st->touched = true;
    /* (j < i + 1 may go outside i where i is 0, M being 1..1; fused with
     * i inside it, j's extent would need i's value first) */
    if ((r = check_order(c, loc)) != RV_OK) {
        st->leaves.data[ia] = a;
        vec_insert(&st->leaves, ib, b);
        a->fused = b->fused = NULL;
    }
    return r;
}

/* A loop extent that is a compile-time constant, if the schedule says so. */
static bool const_extent(const Stage *st, const IterVar *v, int64_t *n) {
    switch (v->rel) {
    case IV_INNER:
        *n = v->factor;
        return v->parent->tail != TAIL_MERGE; /* (the merged block: F..2F-1) */
    case IV_ROOT:
        if (st->kind != STAGE_OP)
            return false; /* its extent is the region it covers */
        return v->axis->extent && ir_is_const_int(v->axis->extent, n);
    case IV_OUTER: {
        int64_t e;
        if (!const_extent(st, v->parent, &e))
            return false;
        *n = v->parent->tail == TAIL_MERGE ? (e / v->factor > 1 ? e / v->factor : 1)
                                           : (e + v->factor - 1) / v->factor;
        return true;
    }
    case IV_FUSED: {
        int64_t a, b;
        if (!const_extent(st, v->fa, &a) || !const_extent(st, v->fb, &b))
            return false;
        *n = a * b;
        return true;
    }
    default:
        return false;
    }
}

/* True when the stage's reduction may run its lanes as separate partial
 * results combined at the end: sum, max and min, which reassociate (a
 * float sum then rounds in another order); not argmax, whose lanes
 * would have to combine their indices too. */
static bool lane_reducible(const Stage *st) {
    return st->reduce && st->reduce->u.red.rk != RV_REDUCE_ARGMAX;
}

static rv_status set_kind(Ctx *c, IterVar *v, LoopKind k) {
    Stage *st = c->st;
    SrcLoc loc = c->step->loc;
    if (v->kind != LOOP_SERIAL)
        return fail(c, loc, "loop %s is already %s", v->name, sched_loop_kind_name(v->kind));
    if (v->reduce && k != LOOP_UNROLL && !(k == LOOP_VECTOR && lane_reducible(st)))
        return fail(c, loc, "%s is a reduction loop: its iterations update the same elements%s",
                    v->name, k == LOOP_VECTOR ? " (only sum, max and min vectorize)" : "");
    int64_t n = 0;
    /* (a launch is sized by its bound loops' extents; the merged block's
     * inner extent is not one of a loop's tiles) */
    if (sched_kind_is_gpu(k) && iv_from_merge(v))
        return fail(c, loc, "loop %s comes from a split with tail=\"merge\", which a GPU index "
                            "cannot run; use tail=\"guard\"", v->name);
    if ((k == LOOP_VECTOR || k == LOOP_UNROLL) && v->rel == IV_INNER &&
        v->parent->tail == TAIL_MERGE)
        return fail(c, loc, "the extent of %s is not a constant: the merged last block of "
                            "split(%s, %lld, tail=\"merge\") has up to %lld iterations; split %s "
                            "again",
                    v->name, v->parent->name, (long long)v->factor, (long long)(2 * v->factor - 1),
                    v->name);
    if (k == LOOP_VECTOR || k == LOOP_UNROLL) {
        bool cst = const_extent(st, v, &n);
        if (!cst && st->kind == STAGE_OP)
            return fail(c, loc, "the extent of %s is not a constant; split it by a constant first",
                        v->name);
        if (cst && (n < 1 || n > SCHED_MAX_UNROLL))
            return fail(c, loc, "the extent of %s is %lld; at most %d (split it first)", v->name,
                        (long long)n, SCHED_MAX_UNROLL);
    }
    if (k == LOOP_PARALLEL)
        for (int i = 0; i < st->leaves.len; i++)
            if (st->leaves.data[i]->kind == LOOP_PARALLEL)
                return fail(c, loc, "%s already has a parallel loop (%s)", st->name,
                            st->leaves.data[i]->name);
    if (k >= LOOP_GPU_BLOCK_X)
        for (int i = 0; i < st->leaves.len; i++)
            if (st->leaves.data[i]->kind == k)
                return fail(c, loc, "%s is already bound to %s", st->leaves.data[i]->name,
                            sched_loop_kind_name(k));
    v->kind = k;
    st->touched = true;
    return RV_OK;
}

static rv_status prim_kind(Ctx *c, LoopKind k) {
    IterVar *v;
    rv_status r = arg_leaf(c, positional(c->step, 0), &v);
    return r != RV_OK ? r : set_kind(c, v, k);
}

static rv_status prim_parallel(Ctx *c) {
    return prim_kind(c, LOOP_PARALLEL);
}

static rv_status prim_vectorize(Ctx *c) {
    return prim_kind(c, LOOP_VECTOR);
}

static rv_status prim_unroll(Ctx *c) {
    return prim_kind(c, LOOP_UNROLL);
}

static rv_status prim_bind(Ctx *c) {
    rv_status r;
    IterVar *v;
    if ((r = arg_leaf(c, positional(c->step, 0), &v)) != RV_OK)
        return r;
    const SchedArg *a = positional(c->step, 1);
    /* a launch is sized from sizes before any prelude runs (cuda.c) */
    if (sched_extent_is_vfused(v))
        return fail(c, c->step->loc,
                    "the trip count of %s is a fused variable loop's, known only once the "
                    "prelude has run, and a launch is sized before; bind the inner part of a "
                    "split of it, or loops outside it",
                    v->name);
    for (int k = LOOP_GPU_BLOCK_X; k <= LOOP_GPU_THREAD_Z; k++)
        if (strcmp(a->s, sched_loop_kind_name((LoopKind)k)) == 0)
            return set_kind(c, v, (LoopKind)k);
    return fail(c, a->loc,
                "expected \"blockIdx.x\", \"blockIdx.y\", \"blockIdx.z\", \"threadIdx.x\", "
                "\"threadIdx.y\" or \"threadIdx.z\"");
}

/* ---- padding ---- */

typedef struct PadCheck {
    const Axis *ax;
    int64_t n;
    const char *bad;
    bool bad_uf; /* bad names a ufun (it has no storage to pad) */
} PadCheck;

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static void pad_check_read(const Expr *e, void *ctx) {
    PadCheck *p = ctx;
    if (p->bad || (e->kind != EX_READ && e->kind != EX_UFCALL))
        return;
    for (int d = 0; d < e->n; d++) {
        /* a reduction over k < i + 1 reads along i too */
        if (!ir_depends_on_axis(e->args[d], p->ax))
            continue;
        if (e->kind == EX_UFCALL) {
            p->bad = e->u.uf->name;
            p->bad_uf = true;
            return;
        }
        const Tensor *t = e->u.tensor;
        bool bare = e->args[d]->kind == EX_VAR && e->args[d]->u.axis == p->ax;
        if (!bare || t->pad[d] % p->n != 0) {
            p->bad = t->name;
            return;
        }
    }
}

/* pad(v, N) and storage_pad(v, N): a leaf and a multiple. */
static rv_status pad_args(Ctx *c, IterVar **v, int64_t *n) {
    rv_status r = arg_leaf(c, positional(c->step, 0), v);
    if (r != RV_OK)
        return r;
    return arg_int(c, positional(c->step, 1), 1, 1 << 20, "the multiple", n);
}

/* A dimension of st whose extent depends on axis a (ragged), or NULL. */
static const Axis *extent_depends_on(const Stage *st, const Axis *a) {
    for (int i = 0; i < st->t->ndim; i++)
        if (st->t->axes[i]->extent && ir_uses_axis(st->t->axes[i]->extent, a))
            return st->t->axes[i];
    return NULL;
}

/* pad or storage_pad of a fused variable loop: bulk padding (vfuse.c). */
static rv_status bulk_pad(Ctx *c, IterVar *v, int64_t n, bool loop) {
    Buf why = {0};
    int level = 0;
    const char *bad = sched_vfuse_pad_illegal(c->st, v, n, loop, &why, &level);
    rv_status r = RV_OK;
    if (bad) {
        r = fail(c, c->step->loc, "%s", bad);
    } else if (loop) {
        v->pad = n;
        v->pad_step = c->step;
        v->pad_src = c->src;
        c->st->touched = true;
    } else {
        Tensor *t = c->st->t;
        int64_t cur = t->bulk > 1 ? t->bulk : 1, l = cur / gcd64(cur, n) * n;
        if (l > (1 << 20))
            r = fail(c, c->step->loc, "the padding multiple would be %lld", (long long)l);
        t->bulk = (int)l;
        t->bulk_level = level;
    }
    buf_free(&why);
    return r;
}

static rv_status prim_pad(Ctx *c) {
    rv_status r;
    IterVar *v;
    int64_t n;
    if ((r = pad_args(c, &v, &n)) != RV_OK)
        return r;
    if (v->rel == IV_FUSED && v->variable)
        return bulk_pad(c, v, n, true);
    Stage *st = c->st;
    SrcLoc loc = c->step->loc;
    if (v->rel != IV_ROOT || v->reduce)
        return fail(c, loc, "pad applies to a spatial axis before it is split; %s is not one",
                    v->name);
    if (st->kind != STAGE_OP || st->attach != ATTACH_ROOT)
        return fail(c, loc, "%s has no storage of its own to pad into", st->name);
    int d = v->axis->pos;
    if (st->t->pad[d] % n != 0)
        return fail(c, loc,
                    "dimension %s of %s is stored padded to %d; the loop may only run to a "
                    "multiple of that (use storage_pad(%s, %lld) first)",
                    v->name, st->name, st->t->pad[d], v->name, (long long)n);
    PadCheck p = {v->axis, n, NULL, false};
    ir_visit(st->body, pad_check_read, &p);
    ir_visit(st->pred, pad_check_read, &p);
    ir_visit(st->else_body, pad_check_read, &p);
    if (p.bad_uf)
        return fail(c, loc,
                    "the padded iterations of %s would read ufun '%s' outside its domain (it "
                    "is indexed along %s, and a ufun cannot be padded)",
                    v->name, p.bad, v->name);
    if (p.bad)
        return fail(c, loc,
                    "the padded iterations of %s would read %s outside its storage (each read "
                    "along %s must index a dimension stored padded to a multiple of %lld)",
                    v->name, p.bad, v->name, (long long)n);
    const Axis *dep = extent_depends_on(st, v->axis);
    if (dep)
        return fail(c, loc, "the extent of %s depends on %s", dep->name, v->name);
    v->pad = n;
    st->touched = true;
    return RV_OK;
}

static rv_status prim_storage_pad(Ctx *c) {
    rv_status r;
    IterVar *v;
    int64_t n;
    if ((r = pad_args(c, &v, &n)) != RV_OK)
        return r;
    if (v->rel == IV_FUSED && v->variable)
        return bulk_pad(c, v, n, false);
    Stage *st = c->st;
    SrcLoc loc = c->step->loc;
    if (v->rel != IV_ROOT || v->reduce)
        return fail(c, loc, "name a dimension of %s (an axis before it is split)", st->name);
    if (st->kind != STAGE_OP || st->attach != ATTACH_ROOT)
        return fail(c, loc, "%s is not stored in a tensor of its own", st->name);
    int d = v->axis->pos;
    const Axis *dep = extent_depends_on(st, v->axis);
    if (dep)
        return fail(c, loc,
                    "the extent of %s depends on %s; padding the storage of %s is not supported",
                    dep->name, v->name, v->name);
    int64_t cur = st->t->pad[d];
    int64_t l = cur / gcd64(cur, n) * n;
    if (l > (1 << 20))
        return fail(c, loc, "the padding multiple would be %lld", (long long)l);
    st->t->pad[d] = (int)l;
    return RV_OK;
}

/* ---- stages: placement ---- */

static rv_status arg_stage(Ctx *c, const SchedArg *a, Stage **out) {
    Stage *p = sched_stage(c->s, a->s);
    if (!p) {
        const Tensor *t = strmap_get(&c->s->m->by_name, a->s);
        if (t && strmap_get(&c->s->m->by_name, a->s) && sched_stage_of(c->s, t) == NULL)
            return fail(c, a->loc, "'%s' is not computed by the program (an input or a size)",
                        a->s);
        Vec(const char *) names = {0};
        for (int i = 0; i < c->s->stages.len; i++)
            vec_push(&names, c->s->stages.data[i]->name);
        Buf hint = {0};
        base_near_hint(&hint, a->s, names.data, names.len);
        vec_free(&names);
        rv_status r = fail(c, a->loc, "no stage named '%s'%s", a->s, buf_str(&hint));
        buf_free(&hint);
        return r;
    }
    *out = p;
    return RV_OK;
}

static bool is_output(const Schedule *s, const Stage *p) {
    return p->kind == STAGE_OP && ir_tensor_is_output(s->m, p->t);
}

static rv_status check_placeable(Ctx *c, Stage *p, SrcLoc loc) {
    if (sched_hfuse_partner(p))
        return fail(c, loc, "%s is fused with %s (hfuse) in a kernel of their own", p->name,
                    sched_hfuse_partner(p)->name);
    if (sched_stage_split(p))
        return fail(c, loc, "%s is %s split operation, one kernel storing the whole tensor",
                    p->name, p->kind == STAGE_PART ? "a part of a" : "a");
    if (p->attach != ATTACH_ROOT)
        return fail(c, loc, "%s is already placed (%s)", p->name,
                    p->attach == ATTACH_INLINE ? "inlined" : "computed at another loop");
    if (is_output(c->s, p))
        return fail(c, loc, "%s is an output of the program; it must be stored whole", p->name);
    if (p->kind == STAGE_OP && p->t->op->kind == OP_EXTERN)
        return fail(c, loc, "%s is an extern call over whole tensors", p->name);
    return RV_OK;
}

/* True when e reads t somewhere other than inside `skip`. */
static bool read_outside(const Expr *e, const Expr *skip, const Tensor *t) {
    if (e == skip)
        return false;
    if (e->kind == EX_READ && e->u.tensor == t)
        return true;
    for (int i = 0; i < e->n; i++)
        if (read_outside(e->args[i], skip, t))
            return true;
    return false;
}

/* A stage computed at loop v of stage h (NULL: the top of h's nest) runs
 * in each iteration of v before what follows there: v must stay a loop of
 * h. Checked after every step (a split, fuse or cache_write of h would
 * leave the stage nowhere). */
static rv_status check_at_loop(Ctx *c, const Stage *q) {
    if (!q->at_iv || leaf_index(q->at, q->at_iv) >= 0)
        return RV_OK;
    return fail(c, c->step->loc,
                "%s is computed at loop %s of %s, which would no longer be a loop; split, fuse "
                "or cache_write %s before compute_at(%s, ...)",
                q->name, q->at_iv->name, q->at->name, q->at->name, q->name);
}

/* ... and over the region its readers read there: every reader must be h
 * or a stage computed inside h at v or a loop inside it (further down
 * through other stages computed there). Several readers are fine: the
 * region is their union (layernorm's row mean, read by the variance and
 * the output). Checked once every block is applied, so the order of the
 * compute_at steps does not matter; an error is located at the later of
 * the two placements in conflict (q's, or that of the reader's stage
 * computed in h). */
static rv_status check_readers(Schedule *s, const Stage *q) {
    const Stage *h = q->at;
    int at = q->at_iv ? leaf_index(h, q->at_iv) : -1;
    for (int i = 0; i < s->stages.len; i++) {
        const Stage *r = s->stages.data[i];
        if (r->t == q->t || r->attach == ATTACH_INLINE || !sched_stage_reads_tensor(r, q->t))
            continue;
        const Stage *w = r, *last = NULL;
        while (w != h && w->attach == ATTACH_AT) {
            last = w;
            w = w->at;
        }
        const Stage *by = last && last->at_seq > q->at_seq ? last : q;
        Ctx c = {.s = s, .st = by->at, .step = by->at_step, .src = by->at_src};
        SrcLoc loc = by->at_step->loc;
        if (w != h)
            return fail(&c, loc,
                        "%s is read by %s, which is not computed inside %s; a stage computed at "
                        "a loop of %s can only be read there",
                        q->name, r->name, h->name, h->name);
        if (last && (last->at_iv ? leaf_index(h, last->at_iv) : -1) < at)
            return fail(&c, loc,
                        "%s is read by %s, which is computed at %s of %s, outside loop %s where %s "
                        "is computed",
                        q->name, r->name, last->at_iv ? last->at_iv->name : "the top", h->name,
                        q->at_iv->name, q->name);
    }
    return RV_OK;
}

rv_status sched_check_placements(Schedule *s) {
    for (int i = 0; i < s->stages.len; i++) {
        Stage *q = s->stages.data[i];
        if (q->attach != ATTACH_AT)
            continue;
        rv_status r = check_readers(s, q);
        if (r != RV_OK)
            return r;
    }
    return sched_check_bulk_pads(s);
}

static rv_status prim_compute_at(Ctx *c) {
    rv_status r;
    Stage *p = NULL;
    IterVar *v = NULL;
    if ((r = arg_stage(c, positional(c->step, 0), &p)) != RV_OK)
        return r;
    if (npositional(c->step) == 2 && (r = arg_leaf(c, positional(c->step, 1), &v)) != RV_OK)
        return r;
    SrcLoc loc = c->step->loc;
    Stage *st = c->st;
    if (p == st)
        return fail(c, loc, "a stage cannot be computed inside itself");
    if (p->kind != STAGE_OP && p->attach == ATTACH_AT) {
        /* moving a cache stage to another loop */
    } else if ((r = check_placeable(c, p, loc)) != RV_OK) {
        return r;
    }
    /* its readers: sched_check_placements, once every block is applied */
    if (!sched_reader(c->s, p->t, NULL))
        return fail(c, loc, "nothing reads %s", p->name);
    /* loop padding runs a root's loop into its padded storage; a stage
     * computed inside a loop has a buffer for the region read instead
     * (pad rejects the other order the same way) */
    for (int i = 0; i < p->ivs.len; i++)
        if (p->ivs.data[i]->pad > 1)
            return fail(c, loc,
                        "%s pads loop %s (pad(%s, %lld)) into storage of its own, which it "
                        "has not when computed inside %s",
                        p->name, p->ivs.data[i]->name, p->ivs.data[i]->name,
                        (long long)p->ivs.data[i]->pad, st->name);
    /* a fused variable loop covers a region as a range of its rows
     * (vfuse.c); fuse checks the other order the same way */
    if (sched_stage_has_vfuse(p)) {
        Buf why = {0};
        const char *bad = sched_vfuse_region_illegal(p, &why);
        r = bad ? fail(c, loc, "%s cannot be computed inside %s: %s", p->name, st->name, bad)
                : RV_OK;
        buf_free(&why);
        if (r != RV_OK)
            return r;
    }
    if (st->attach == ATTACH_INLINE)
        return fail(c, loc, "%s is inlined", st->name);
    if (v && st->reduce && read_outside(st->body, st->reduce, p->t)) {
        int first = st->leaves.len;
        for (int k = 0; k < st->leaves.len; k++)
            if (st->leaves.data[k]->reduce) {
                first = k;
                break;
            }
        if (leaf_index(st, v) >= first)
            return fail(c, loc,
                        "%s is also read outside the reduction of %s, which runs after loop %s; "
                        "compute it at a loop outside the reduction loops",
                        p->name, st->name, v->name);
    }
    AttachKind was = p->attach;
    Stage *was_at = p->at;
    IterVar *was_iv = p->at_iv;
    p->attach = ATTACH_AT;
    p->at = st;
    p->at_iv = v;
    p->at_step = c->step;
    p->at_src = c->src;
    p->at_seq = c->s->nsteps;
    if ((r = check_producers_enclose(c, loc)) != RV_OK) {
        p->attach = was;
        p->at = was_at;
        p->at_iv = was_iv;
    }
    return r;
}

/* Rewrites reads of tensor `from`: fn builds the replacement of one read
 * (its indices already rewritten). Memoized; `memo` maps old -> new nodes
 * so callers can follow a node (the stage's reduction) across the rewrite. */
typedef Expr *(*ReadFn)(void *ctx, Expr *read, Expr *const *idx);

static Expr *rewrite_reads(Module *m, Expr *e, const Tensor *from, ReadFn fn, void *ctx,
                           PtrMap *memo) {
    if (!e)
        return NULL;
    Expr *done = ptrmap_get(memo, e);
    if (done)
        return done;
    Expr *r = e;
    Expr *args[RV_MAX_DIMS + 3];
    RV_ASSERT(e->n <= (int)RV_COUNT(args));
    bool changed = false;
    for (int i = 0; i < e->n; i++) {
        args[i] = rewrite_reads(m, e->args[i], from, fn, ctx, memo);
        if (!args[i])
            return NULL;
        changed |= args[i] != e->args[i];
    }
    /* a read of a 0-dim tensor (T0[]) has no operands but is rewritten too */
    if (e->kind == EX_READ && e->u.tensor == from)
        r = fn(ctx, e, args);
    else if (changed)
        r = ir_rebuild(m, e, args);
    if (r)
        ptrmap_put(memo, e, r);
    return r;
}

/* Applies a read rewrite to a whole stage, keeping its reduction. */
static bool rewrite_stage(Module *m, Stage *st, const Tensor *from, ReadFn fn, void *ctx) {
    PtrMap memo = {0};
    Expr *body = rewrite_reads(m, st->body, from, fn, ctx, &memo);
    Expr *pred = rewrite_reads(m, st->pred, from, fn, ctx, &memo);
    Expr *els = rewrite_reads(m, st->else_body, from, fn, ctx, &memo);
    bool ok = (!st->body || body) && (!st->pred || pred) && (!st->else_body || els);
    if (ok) {
        if (st->reduce)
            st->reduce = ptrmap_get(&memo, st->reduce);
        st->body = body;
        st->pred = pred;
        st->else_body = els;
    }
    ptrmap_free(&memo);
    return ok;
}

typedef struct InlineCtx {
    Module *m;
    Stage *p;
} InlineCtx;

/* Each inlined copy of p gets reductions of its own: copies sharing a
 * reduction axis would bind it twice when one is nested in the other
 * (T0[T0[t]] with T0 an argmax). */
static Expr *inline_read(void *ctx, Expr *read, Expr *const *idx) {
    (void)read;
    InlineCtx *ic = ctx;
    PtrMap map = {0};
    for (int d = 0; d < ic->p->t->ndim; d++)
        ptrmap_put(&map, ic->p->t->axes[d], idx[d]);
    Expr *r = ir_substitute_fresh(ic->m, ic->p->body, &map);
    ptrmap_free(&map);
    return r;
}

typedef struct RedAxes {
    const Tensor *t;
    bool found;
} RedAxes;

static void red_axes_fn(const Expr *e, void *ctx) {
    RedAxes *r = ctx;
    if (e->kind != EX_REDUCE)
        return;
    for (int i = 0; i < e->u.red.naxes; i++)
        for (int d = 0; d < r->t->ndim; d++)
            if (e->u.red.axes[i]->extent && ir_uses_axis(e->u.red.axes[i]->extent, r->t->axes[d]))
                r->found = true;
}

/* Inlining substitutes a stage's axes in its expression, but a reduction's
 * axes keep their extents, so `sum(l < len[b])` cannot move yet. */
static bool reduce_extent_uses_axes(const Stage *p) {
    RedAxes r = {p->t, false};
    ir_visit(p->body, red_axes_fn, &r);
    return r.found;
}

static rv_status prim_compute_inline(Ctx *c) {
    rv_status r;
    Stage *p = NULL;
    if ((r = arg_stage(c, positional(c->step, 0), &p)) != RV_OK)
        return r;
    SrcLoc loc = c->step->loc;
    if (p->kind == STAGE_OP && p->t->op->kind == OP_COND)
        return fail(c, loc, "%s is a conditional; it cannot be inlined", p->name);
    if (p->kind == STAGE_CACHE_READ && p->attach == ATTACH_AT) {
        /* undoing a cache_read is fine */
    } else if ((r = check_placeable(c, p, loc)) != RV_OK) {
        return r;
    }
    for (int i = 0; i < c->s->stages.len; i++) {
        Stage *o = c->s->stages.data[i];
        if (o->attach == ATTACH_AT && o->at == p)
            return fail(c, loc, "%s is computed inside %s; place it elsewhere first", o->name,
                        p->name);
    }
    if (reduce_extent_uses_axes(p))
        return fail(c, loc,
                    "cannot inline %s: the extent of one of its reductions depends on its own "
                    "axes (not supported yet)",
                    p->name);
    InlineCtx ic = {c->s->m, p};
    for (int i = 0; i < c->s->stages.len; i++) {
        Stage *o = c->s->stages.data[i];
        if (o == p || o->attach == ATTACH_INLINE || !sched_stage_reads_tensor(o, p->t))
            continue;
        if (o->kind == STAGE_OP && o->t->op->kind == OP_EXTERN)
            return fail(c, loc, "%s is read by extern call %s, which needs it stored", p->name,
                        o->name);
    }
    for (int i = 0; i < c->s->stages.len; i++) {
        Stage *o = c->s->stages.data[i];
        if (o == p || o->attach == ATTACH_INLINE || !sched_stage_reads_tensor(o, p->t))
            continue;
        if (!rewrite_stage(c->s->m, o, p->t, inline_read, &ic))
            return fail(c, loc, "cannot inline %s into %s: %s", p->name, o->name, rv_last_error());
    }
    p->attach = ATTACH_INLINE;
    p->at = NULL;
    p->at_iv = NULL;
    return RV_OK;
}

/* ---- cache stages ---- */

static rv_status cache_options(Ctx *c, bool *local_pad, int64_t *align) {
    const SchedStep *p = c->step;
    if (npositional(p) == 2) {
        const SchedArg *a = positional(p, 1);
        if (strcmp(a->s, "local") != 0 && strcmp(a->s, "global") != 0)
            return fail(c, a->loc, "the scope must be \"local\" or \"global\"");
    }
    const SchedArg *pad = keyword(p, "pad");
    if (pad) {
        int64_t v = 0;
        rv_status r = arg_int(c, pad, 0, 1, "pad", &v);
        if (r != RV_OK)
            return r;
        *local_pad = v == 1;
    }
    const SchedArg *al = keyword(p, "align");
    if (al) {
        rv_status r = arg_int(c, al, 1, 1024, "align", align);
        if (r != RV_OK)
            return r;
    }
    return RV_OK;
}

/* Where the layout string's character at p is: the string's location
 * names its opening quote. */
static SrcLoc layout_loc(const SchedArg *a, const char *p) {
    SrcLoc loc = a->loc;
    if (loc.col > 0)
        loc.col += 1 + (int)(p - a->s);
    return loc;
}

static bool layout_space(char ch) {
    return ch == ' ' || ch == '\t';
}

/* An error at the layout string's character `at`: what is wrong (fmt),
 * then the copy's dimensions. */
static rv_status layout_fail(Ctx *c, const SchedArg *a, const char *at, const char *name,
                             const char *const *names, int ndim, const char *fmt, ...)
    RV_PRINTF(7, 8);
static rv_status layout_fail(Ctx *c, const SchedArg *a, const char *at, const char *name,
                             const char *const *names, int ndim, const char *fmt, ...) {
    Buf what = {0}, dims = {0};
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&what, fmt, ap);
    va_end(ap);
    for (int e = 0; e < ndim; e++)
        buf_printf(&dims, "%s%s", e ? ", " : "", names[e]);
    rv_status r = fail(c, layout_loc(a, at), "layout of %s: %s (its dimensions: %s)", name,
                       buf_str(&what), buf_str(&dims));
    buf_free(&what);
    buf_free(&dims);
    return r;
}

/* layout="k, j": the local buffer's dimensions in storage order, each
 * named once. A dimension may be split into panels instead, named twice:
 * `j/64` (the panel) and `j%64` (the offset in it), one positive constant
 * for both, so layout="j/64, l, j%64" stores [ceil(J/64)][L][64] (the
 * last panel padded when 64 does not divide J). */
static rv_status cache_layout(Ctx *c, Stage *l, const char *name, const char *const *names,
                              int ndim) {
    for (int d = 0; d < RV_MAX_DIMS; d++)
        l->order[d] = d;
    const SchedArg *a = keyword(c->step, "layout");
    if (!a)
        return RV_OK;
    int n = 0, nslots = 0;
    /* per dimension: named whole, as a panel, as an offset in a panel */
    bool whole[RV_MAX_DIMS] = {0}, panel[RV_MAX_DIMS] = {0}, in[RV_MAX_DIMS] = {0};
    int64_t split[RV_MAX_DIMS] = {0};
    const char *part_at[RV_MAX_DIMS] = {0};
    int slots[2 * RV_MAX_DIMS];
    const char *p = a->s;
    for (;;) {
        while (layout_space(*p))
            p++;
        if (!*p)
            break;
        const char *item = p, *q = p;
        while (*q && *q != ',' && *q != '/' && *q != '%' && !layout_space(*q))
            q++;
        char buf[128];
        if (q == p || (size_t)(q - p) >= sizeof buf)
            return layout_fail(c, a, item, name, names, ndim, "expected a dimension's name");
        memcpy(buf, p, (size_t)(q - p));
        buf[q - p] = 0;
        int d;
        for (d = 0; d < ndim; d++)
            if (strcmp(buf, names[d]) == 0)
                break;
        if (d == ndim)
            return layout_fail(c, a, item, name, names, ndim, "no dimension named '%s'", buf);
        p = q;
        while (layout_space(*p))
            p++;
        char op = 0;
        int64_t f = 0;
        if (*p == '/' || *p == '%') {
            op = *p++;
            while (layout_space(*p))
                p++;
            const char *num = p;
            while (*p && *p != ',' && !layout_space(*p))
                p++;
            bool digits = p > num && p - num <= 9;
            for (const char *t = num; digits && t < p; t++)
                digits = *t >= '0' && *t <= '9';
            if (digits)
                f = strtoll(num, NULL, 10);
            if (f < 1)
                return layout_fail(c, a, num, name, names, ndim,
                                   "the panel size in %s%c%.*s must be a positive integer constant",
                                   names[d], op, (int)(p - num), num);
            while (layout_space(*p))
                p++;
        }
        if (*p && *p != ',')
            return layout_fail(c, a, p, name, names, ndim, "expected ',' between dimensions");
        if (*p == ',')
            p++;
        bool *mark = op == '/' ? panel : op == '%' ? in : whole;
        if (mark[d] || (op == 0 && (panel[d] || in[d])) || (op && whole[d]))
            return layout_fail(c, a, item, name, names, ndim, "%s is named twice", names[d]);
        if (op && split[d] && split[d] != f)
            return layout_fail(c, a, item, name, names, ndim,
                               "%s/%lld and %s%%%lld: one panel size for both", names[d],
                               (long long)(op == '/' ? f : split[d]), names[d],
                               (long long)(op == '%' ? f : split[d]));
        mark[d] = true;
        if (op) {
            split[d] = f;
            part_at[d] = item;
        }
        slots[nslots++] = op == '%' ? ~d : d;
    }
    for (int d = 0; d < ndim; d++) {
        if (panel[d] != in[d])
            return layout_fail(c, a, part_at[d], name, names, ndim,
                               "%s is split: name its panel %s/%lld and its offset %s%%%lld",
                               names[d], names[d], (long long)split[d], names[d],
                               (long long)split[d]);
        if (!whole[d] && !panel[d])
            return layout_fail(c, a, a->s, name, names, ndim, "%s is missing", names[d]);
    }
    bool any = false;
    for (int k = 0; k < nslots; k++)
        if (slots[k] >= 0)
            l->order[n++] = slots[k];
        else
            any = true;
    if (any) {
        StagePanels *sp = arena_alloc(c->s->m->arena, sizeof *sp);
        memcpy(sp->split, split, sizeof split);
        memcpy(sp->slots, slots, sizeof slots);
        sp->nslots = nslots;
        l->panels = sp;
    }
    return RV_OK;
}

/* Gives stage l the layout cache_layout parsed into lay (identity when
 * the step has none). */
static void cache_layout_set(Stage *l, const Stage *lay, int ndim) {
    memcpy(l->order, lay->order, sizeof(int) * (size_t)ndim);
    l->panels = lay->panels;
}

static rv_status check_stage_name(Ctx *c, const char *name) {
    if (sched_stage(c->s, name) || strmap_get(&c->s->m->by_name, name))
        return fail(c, c->step->loc, "the name '%s' is taken", name);
    return RV_OK;
}

/* A tensor for a cache stage: like `like`, with fresh axes named `names`. */
static Tensor *cache_tensor(Module *m, const char *name, const Tensor *like, rv_dtype dt,
                            const char *const *names, int id) {
    Tensor *t = arena_alloc(m->arena, sizeof(Tensor));
    t->name = ir_name(m, name);
    t->dtype = dt;
    t->ndim = like->ndim;
    t->axes = arena_alloc(m->arena, sizeof(Axis *) * (size_t)(like->ndim ? like->ndim : 1));
    t->pad = arena_alloc(m->arena, sizeof(int) * (size_t)(like->ndim ? like->ndim : 1));
    PtrMap map = {0};
    for (int d = 0; d < like->ndim; d++) {
        Expr *ext = like->axes[d]->extent ? ir_substitute(m, like->axes[d]->extent, &map) : NULL;
        Axis *a = ir_axis_new(m, names[d], AX_SPATIAL, ext);
        a->pos = d;
        a->owner = t;
        a->dim = like->axes[d]->dim;
        t->axes[d] = a;
        t->pad[d] = 1;
        ptrmap_put(&map, like->axes[d], a->var);
    }
    ptrmap_free(&map);
    t->op = arena_alloc(m->arena, sizeof(Op));
    t->op->kind = OP_COMPUTE;
    t->op->out = t;
    t->complete = true;
    t->module = m;
    t->id = m->tensors.len + id;
    return t;
}

static void insert_before(Schedule *s, Stage *l, Stage *before) {
    /* stage_add appended l; move it in front of `before` */
    vec_remove(&s->stages, s->stages.len - 1);
    vec_insert(&s->stages, before->id, l);
    for (int i = 0; i < s->stages.len; i++)
        s->stages.data[i]->id = i;
}

typedef struct RetargetCtx {
    Tensor *to;
    Module *m;
} RetargetCtx;

static Expr *retarget_read(void *ctx, Expr *read, Expr *const *idx) {
    RetargetCtx *rc = ctx;
    return ir_read(rc->m, rc->to, read->n, idx);
}

/* Axis names for a copy of X read by st: X's own names, else the reader's
 * index variable, else d0, d1, ... */
static void cache_axis_names(Module *m, const Stage *st, const Tensor *x, const char **names) {
    const Expr *read = NULL;
    /* the first read of x in the stage */
    Vec(const Expr *) stack = {0};
    PtrMap seen = {0};
    Expr *roots[3] = {st->body, st->pred, st->else_body};
    for (int i = 0; i < 3; i++)
        if (roots[i])
            vec_push(&stack, roots[i]);
    while (stack.len && !read) {
        const Expr *e = stack.data[--stack.len];
        if (ptrmap_has(&seen, e))
            continue;
        ptrmap_put(&seen, e, (void *)e);
        if (e->kind == EX_READ && e->u.tensor == x)
            read = e;
        for (int i = e->n - 1; i >= 0; i--)
            vec_push(&stack, e->args[i]);
    }
    vec_free(&stack);
    ptrmap_free(&seen);
    for (int d = 0; d < x->ndim; d++) {
        const char *n = x->axes[d]->name;
        if (n[0] == '_' && read && read->args[d]->kind == EX_VAR)
            n = read->args[d]->u.axis->name;
        if (n[0] == '_')
            n = arena_printf(m->arena, "d%d", d);
        /* keep names distinct */
        for (int e = 0; e < d; e++)
            if (strcmp(names[e], n) == 0)
                n = arena_printf(m->arena, "%s%d", n, d);
        names[d] = n;
    }
}

static rv_status prim_cache_read(Ctx *c) {
    rv_status r;
    const SchedArg *a = positional(c->step, 0);
    SrcLoc loc = c->step->loc;
    Stage *st = c->st;
    Module *m = c->s->m;
    Stage *xs = sched_stage(c->s, a->s);
    Tensor *x = xs ? xs->t : strmap_get(&m->by_name, a->s);
    if (!x || (!xs && (!sched_stage_of(c->s, x) && x->op == NULL))) {
        Vec(const char *) read = {0}; /* the tensors the stage reads: the likely ones */
        for (int i = 0; i < m->tensors.len; i++)
            if (sched_stage_reads_tensor(st, m->tensors.data[i]))
                vec_push(&read, m->tensors.data[i]->name);
        Buf hint = {0};
        base_near_hint(&hint, a->s, read.data, read.len);
        vec_free(&read);
        r = fail(c, a->loc, "no tensor named '%s'%s", a->s, buf_str(&hint));
        buf_free(&hint);
        return r;
    }
    /* by_name also holds sizes and UFs: make sure it is a tensor */
    bool is_tensor = xs != NULL;
    for (int i = 0; !is_tensor && i < m->tensors.len; i++)
        is_tensor = m->tensors.data[i] == x;
    if (!is_tensor)
        return fail(c, a->loc, "'%s' is not a tensor", a->s);
    if (!sched_stage_reads_tensor(st, x))
        return fail(c, a->loc, "%s does not read %s", st->name, a->s);
    if (st->kind == STAGE_OP && st->t->op->kind == OP_EXTERN)
        return fail(c, loc, "%s is an extern call; it reads whole tensors", st->name);
    if (st->attach == ATTACH_INLINE)
        return fail(c, loc, "%s is inlined", st->name);
    const char *name = c->step->outs[0];
    bool local_pad = false;
    int64_t align = 1;
    if ((r = check_stage_name(c, name)) != RV_OK ||
        (r = cache_options(c, &local_pad, &align)) != RV_OK)
        return r;
    const char *names[RV_MAX_DIMS];
    cache_axis_names(m, st, x, names);
    Stage lay = {0};
    if ((r = cache_layout(c, &lay, name, names, x->ndim)) != RV_OK)
        return r;
    Tensor *t = cache_tensor(m, name, x, x->dtype, names, c->s->stages.len);
    Expr *idx[RV_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        idx[d] = t->axes[d]->var;
    Stage *l = sched_stage_add(c->s, t->name, STAGE_CACHE_READ, t);
    l->loc = loc;
    l->local_pad = local_pad;
    l->align = align;
    cache_layout_set(l, &lay, x->ndim);
    l->source = x;
    l->body = t->op->body = ir_read(m, x, x->ndim, idx);
    sched_stage_init_ivs(c->s, l);
    RetargetCtx rc = {t, m};
    if (!rewrite_stage(m, st, x, retarget_read, &rc))
        RV_UNREACHABLE();
    l->attach = ATTACH_AT;
    l->at_step = c->step;
    l->at_src = c->src;
    l->at_seq = c->s->nsteps;
    l->at = st;
    insert_before(c->s, l, st);
    return RV_OK;
}

typedef struct ReplaceCtx {
    const Expr *from;
    Expr *to;
    PtrMap memo;
} ReplaceCtx;

static Expr *replace_node(Module *m, Expr *e, ReplaceCtx *rc) {
    if (e == rc->from)
        return rc->to;
    Expr *done = ptrmap_get(&rc->memo, e);
    if (done)
        return done;
    Expr *r = e;
    if (e->n > 0) {
        Expr *args[RV_MAX_DIMS + 3];
        bool changed = false;
        for (int i = 0; i < e->n; i++) {
            args[i] = replace_node(m, e->args[i], rc);
            changed |= args[i] != e->args[i];
        }
        if (changed)
            r = ir_rebuild(m, e, args);
    }
    ptrmap_put(&rc->memo, e, r);
    return r;
}

static rv_status prim_cache_write(Ctx *c) {
    rv_status r;
    const SchedArg *a = positional(c->step, 0);
    SrcLoc loc = c->step->loc;
    Stage *st = c->st;
    Module *m = c->s->m;
    if (strcmp(a->s, st->name) != 0)
        return fail(c, a->loc, "in the schedule of %s, write cache_write(%s)", st->name, st->name);
    /* a conditional's reduction is its then-branch's: the cache stage
     * computes it under the same condition (identity elsewhere, never
     * read) */
    Expr *red = st->reduce;
    if (st->kind == STAGE_OP && !red && st->pred)
        red = sched_stage_reduction(st->body);
    if (st->kind != STAGE_OP || !red)
        return fail(c, loc, "%s has no reduction of its own to move into a cache stage", st->name);
    if (st->pred && red->u.red.rk != RV_REDUCE_SUM)
        return fail(c, loc,
                    "%s is a conditional: cache_write moves only a sum out of its branch "
                    "(its cache holds 0 where the condition fails)",
                    st->name);
    if (st->touched)
        return fail(c, loc, "cache_write must come before the loops of %s are transformed",
                    st->name);
    /* the loops of st are made anew (and its reads move to the new stage,
     * at the top of the nest) */
    for (int i = 0; i < c->s->stages.len; i++) {
        Stage *q = c->s->stages.data[i];
        if (q->attach == ATTACH_AT && q->at == st && q->at_iv)
            return fail(c, loc,
                        "cache_write must come before stages are computed at loops of %s (%s "
                        "is computed at loop %s)",
                        st->name, q->name, q->at_iv->name);
    }
    if (st->attach == ATTACH_INLINE)
        return fail(c, loc, "%s is inlined", st->name);
    const char *name = c->step->outs[0];
    bool local_pad = false;
    int64_t align = 1;
    if ((r = check_stage_name(c, name)) != RV_OK ||
        (r = cache_options(c, &local_pad, &align)) != RV_OK)
        return r;
    const char *names[RV_MAX_DIMS];
    for (int d = 0; d < st->t->ndim; d++)
        names[d] = st->t->axes[d]->name;
    Stage lay = {0};
    if ((r = cache_layout(c, &lay, name, names, st->t->ndim)) != RV_OK)
        return r;
    Tensor *t = cache_tensor(m, name, st->t, red->dtype, names, c->s->stages.len);
    Stage *l = sched_stage_add(c->s, t->name, STAGE_CACHE_WRITE, t);
    l->loc = loc;
    l->local_pad = local_pad;
    l->align = align;
    cache_layout_set(l, &lay, st->t->ndim);
    PtrMap map = {0};
    Expr *idx[RV_MAX_DIMS];
    for (int d = 0; d < st->t->ndim; d++) {
        ptrmap_put(&map, st->t->axes[d], t->axes[d]->var);
        idx[d] = st->t->axes[d]->var;
    }
    l->body = l->reduce = t->op->body = ir_substitute(m, red, &map);
    if (st->pred) {
        l->pred = ir_substitute(m, st->pred, &map);
        l->else_body = ir_is_float(red->dtype) ? ir_float(m, red->dtype, 0.0)
                                               : ir_const_int(m, red->dtype, 0);
    }
    ptrmap_free(&map);
    ReplaceCtx rc = {red, ir_read(m, t, t->ndim, idx), {0}};
    st->body = replace_node(m, st->body, &rc);
    ptrmap_free(&rc.memo);
    st->reduce = NULL;
    sched_stage_init_ivs(c->s, st);
    sched_stage_init_ivs(c->s, l);
    l->attach = ATTACH_AT;
    l->at_step = c->step;
    l->at_src = c->src;
    l->at_seq = c->s->nsteps;
    l->at = st;
    insert_before(c->s, l, st);
    return RV_OK;
}

/* ---- recursion groups (src/sched/recurse.c) ---- */

static rv_status prim_dynamic_batch(Ctx *c) {
    sched_group_note(c->s, c->group, NOTE_DYNAMIC_BATCH, 0);
    return RV_OK;
}

static rv_status prim_specialize(Ctx *c) {
    sched_group_note(c->s, c->group, NOTE_SPECIALIZE, 0);
    return RV_OK;
}

/* The group's note; the rules (dynamic_batch first, trees and sequences,
 * the members' node loops) are checked after the step (src/sched/recurse.c). */
static rv_status prim_unroll_recursion(Ctx *c) {
    sched_group_note(c->s, c->group, NOTE_UNROLL, 0);
    return RV_OK;
}

/* The group's note; that its loops can take it (dynamic_batch first, GPU
 * bindings only with it) is checked after the step (src/sched/recurse.c). */
static rv_status prim_gpu_batches(Ctx *c) {
    const SchedArg *a = positional(c->step, 0);
    SchedGpuBatches mode = strcmp(a->s, "launch") == 0       ? SCHED_GPU_LAUNCH
                           : strcmp(a->s, "persistent") == 0 ? SCHED_GPU_PERSISTENT
                                                             : SCHED_GPU_NONE;
    if (mode == SCHED_GPU_NONE)
        return fail(c, a->loc,
                    "expected \"launch\" (a kernel launch per batch) or \"persistent\" (one "
                    "kernel, a grid-wide barrier between batches)");
    sched_group_note(c->s, c->group, NOTE_GPU_BATCHES, mode);
    return RV_OK;
}

/* The member's note; the rules (src/sched/recurse.c) run after the step. */
static rv_status prim_refactor(Ctx *c) {
    Stage *p;
    rv_status r = arg_stage(c, positional(c->step, 0), &p);
    if (r != RV_OK)
        return r;
    if (sched_stage_group(p) != c->group)
        return fail(c, positional(c->step, 0)->loc, "%s is not a member of recursion %s", p->name,
                    c->group->name);
    sched_stage_note(p, NOTE_REFACTOR, 1);
    return RV_OK;
}

/* ---- operation splitting (src/sched/opsplit.c) ---- */

static rv_status prim_split_op(Ctx *c) {
    rv_status r;
    IterVar *v;
    if ((r = arg_leaf(c, positional(c->step, 0), &v)) != RV_OK ||
        (r = check_stage_name(c, c->step->outs[0])) != RV_OK ||
        (r = check_stage_name(c, c->step->outs[1])) != RV_OK)
        return r;
    if (strcmp(c->step->outs[0], c->step->outs[1]) == 0)
        return fail(c, c->step->loc, "the parts need two names");
    return sched_split_op(c->s, c->st, c->step, c->src);
}

static rv_status prim_hfuse(Ctx *c) {
    return sched_hfuse(c->s, c->st, c->step, c->src);
}

/* ---- dispatch and trace ---- */

static void trace_step(Buf *b, const SchedStep *p) {
    buf_puts(b, "    ");
    for (int i = 0; i < p->nout; i++)
        buf_printf(b, "%s%s", i ? ", " : "", p->outs[i]);
    if (p->nout)
        buf_puts(b, " = ");
    buf_printf(b, "%s(", p->prim);
    for (int i = 0; i < p->nargs; i++) {
        const SchedArg *a = &p->args[i];
        buf_puts(b, i ? ", " : "");
        if (a->key)
            buf_printf(b, "%s=", a->key);
        if (a->kind == SA_INT)
            buf_printf(b, "%lld", (long long)a->i);
        else if (a->kind == SA_STRING)
            buf_printf(b, "\"%s\"", a->s);
        else
            buf_puts(b, a->s);
    }
    buf_puts(b, ")\n");
}

/* The handlers in the order of prims.def's rows. */
typedef rv_status (*PrimFn)(Ctx *c);
static const PrimFn handlers[] = {
#define PRIM(name, handler, results, params, keys, flags, doc) handler,
#include "sched/prims.def"
#undef PRIM
};

/* After a step (r: its handler's status): the rules of recursion, which
 * any step may break, and the trace. */
static rv_status step_done(Schedule *s, const SchedStep *step, const SrcFile *src, rv_status r) {
    if (r == RV_OK)
        r = sched_check_recursion(s, step, src);
    if (r == RV_OK)
        trace_step(&s->trace, step);
    s->nsteps++;
    return r;
}

rv_status sched_step(Schedule *s, Stage *st, const SchedStep *step, const SrcFile *src) {
    Ctx c = {s, st, NULL, step, src};
    const SchedPrim *prim = sched_prim_find(step->prim);
    Recurse *g = sched_stage_group(st);
    rv_status r;
    if (!prim) {
        r = sched_prim_unknown(step, src);
    } else if (prim->flags & PRIM_GROUP) {
        r = g ? fail(&c, step->loc,
                     "%s schedules a recursion group, not one member: write it in `schedule %s "
                     "{ ... }`",
                     prim->name, g->name)
              : fail(&c, step->loc, "%s schedules a recursion group; %s is not one", prim->name,
                     st->name);
    } else if (!(prim->flags & PRIM_LOOPS) || stage_has_loops(&c, step->loc, &r)) {
        r = sched_prim_check(prim, step, src, st->name);
        if (r == RV_OK)
            r = sched_split_step_check(s, st, step, src);
        if (r == RV_OK)
            r = handlers[prim - sched_prims](&c);
    }
    if (r == RV_OK && st->ivs.len > SCHED_MAX_IVS)
        r = fail(&c, step->loc, "%s would have more than %d loop variables", st->name,
                 SCHED_MAX_IVS);
    /* a step may replace the loop a stage is computed at */
    for (int i = 0; r == RV_OK && i < s->stages.len; i++)
        if (s->stages.data[i]->attach == ATTACH_AT)
            r = check_at_loop(&c, s->stages.data[i]);
    return step_done(s, step, src, r);
}

rv_status sched_group_step(Schedule *s, Recurse *g, const SchedStep *step, const SrcFile *src) {
    Ctx c = {s, NULL, g, step, src};
    const SchedPrim *prim = sched_prim_find(step->prim);
    rv_status r;
    if (!prim) {
        r = sched_prim_unknown(step, src);
    } else if (!(prim->flags & PRIM_GROUP)) {
        Buf b = {0};
        for (int i = 0; i < g->members.len; i++)
            buf_printf(&b, "%s%s", i ? ", " : "", g->members.data[i]->name);
        r = fail(&c, step->loc,
                 "%s schedules the loops of a stage; %s is a recursion group (members %s): "
                 "write it in the schedule of a member%s",
                 prim->name, g->name, buf_str(&b),
                 strcmp(prim->name, "unroll") == 0
                     ? " (unroll_recursion() computes a node with its children)"
                     : "");
        buf_free(&b);
    } else {
        r = sched_prim_check(prim, step, src, g->name);
        if (r == RV_OK)
            r = handlers[prim - sched_prims](&c);
    }
    return step_done(s, step, src, r);
}
