/*
 * bounds.c — symbolic interval bounds of index expressions: the region of
 * a producer that a loop's iterations read (bounds inference).
 *
 * An expression over axes is bounded by interval arithmetic where each
 * axis has a symbolic range [lo, hi] (inclusive): an axis in `vary` takes
 * the range given there; an unmapped reduction axis ranges over its own
 * extent (an inner reduction of the reader); loop variables of the loop
 * IR are fixed, unless `all_loops` asks for bounds over every iteration,
 * in which case they range over [0, extent - 1] (used for allocation
 * sizes, which must not depend on loop variables). Fixed values stay
 * symbolic (`io*32`), so the region of a tile is [io*32, io*32 + 31].
 *
 * Requires: integer expressions whose divisions are by positive constants
 * and moduli by positive values where a varying operand is involved
 * (others give `false`).
 * Guarantees: for every assignment within the ranges, lo <= e <= hi.
 *
 * Region inference (lower_infer_region, for attach.c): the region of a
 * stage p computed at a loop that the remaining iterations of the nest
 * there read, per dimension [lo, hi]. The nest's bound leaves are fixed,
 * its unbound ones range over their extents (a guarded split clipped to
 * its root's extent when `clip`), and every read of p in each reader is
 * bounded: the union over p's readers, the nest's stage itself or a stage
 * computed inside it (whose own region here bounds its axes). False when
 * a read cannot be bounded; attach.c then takes the whole tensor or
 * rejects the schedule.
 */
#include <string.h>

#include "lower/lower.h"

typedef struct Bounds {
    Module *m;
    const PtrMap *vary;
    bool all_loops;
    PtrMap memo; /* Expr* -> Range* (arena) */
} Bounds;

static bool range_rec(Bounds *b, Expr *e, Range *out);

static Expr *bin(Module *m, ExprKind k, Expr *a, Expr *c) {
    return ir_simplify_expr(m, ir_binary(m, k, a, c));
}

static bool is_fixed(const Range *r) {
    return r->lo == r->hi;
}

static bool positive_const(const Expr *e, int64_t *v) {
    return ir_is_const_int(e, v) && *v > 0;
}

static bool nonneg(const Expr *e) {
    int64_t lo, hi;
    return ir_int_bounds(e, &lo, &hi) && lo >= 0;
}

static bool positive(const Expr *e) {
    int64_t lo, hi;
    return ir_int_bounds(e, &lo, &hi) && lo >= 1;
}

static bool range_var(Bounds *b, Expr *e, Range *out) {
    Axis *a = e->u.axis;
    const Range *r = ptrmap_get(b->vary, a);
    if (r) {
        *out = *r;
        return true;
    }
    if (a->kind == AX_REDUCE || (a->kind == AX_LOOP && b->all_loops)) {
        Range ext;
        if (!a->extent || !range_rec(b, a->extent, &ext))
            return false;
        out->lo = ir_int(b->m, 0);
        out->hi = bin(b->m, EX_SUB, ir_cast(b->m, RV_I64, ext.hi), ir_int(b->m, 1));
        return true;
    }
    if (a->kind == AX_LOOP) {
        out->lo = out->hi = e;
        return true;
    }
    return false; /* an axis of the stage the caller did not map */
}

static bool range_args_fixed(Bounds *b, Expr *e, Expr **args) {
    for (int i = 0; i < e->n; i++) {
        Range r;
        if (!range_rec(b, e->args[i], &r) || !is_fixed(&r))
            return false;
        args[i] = r.lo;
    }
    return true;
}

/* A fused variable loop's row map row[x] (src/lower/vfuse.c), or its
 * row starts at start[row[x]], over x in [lo, hi]: both are
 * non-decreasing in x, so their range is their values at the ends, the
 * ends clamped to the iterations there are (the map holds nothing past
 * them; with none the loop does not run, and 0 stands in). */
static bool range_rowmap(Bounds *b, Expr *e, Range *out) {
    Module *m = b->m;
    Expr *x = e->args[0], *row = e;
    if (x->kind == EX_CAST)
        x = x->args[0];
    if (!e->u.buf->rowmap_start) {
        if (x->kind != EX_LOAD || x->u.buf->rowmap_start != e->u.buf)
            return false;
        row = x;
        x = x->args[0];
    }
    Buffer *rb = row->u.buf;
    Range r;
    if (!range_rec(b, x, &r))
        return false;
    Expr *total = ir_load(m, rb->rowmap_start, rb->rowmap_count);
    Expr *some = bin(m, EX_GT, total, ir_int(m, 0));
    Expr *ends[2] = {r.lo, r.hi}, *at[2];
    for (int k = 0; k < 2; k++) {
        Expr *i = bin(m, EX_MAX, bin(m, EX_MIN, ends[k], bin(m, EX_SUB, total, ir_int(m, 1))),
                      ir_int(m, 0));
        Expr *v = ir_load(m, rb, i);
        if (row != e)
            v = ir_load(m, e->u.buf, v);
        at[k] = ir_simplify_expr(m, ir_select(m, some, v, ir_int(m, 0)));
    }
    out->lo = at[0];
    out->hi = at[1];
    return true;
}

static bool range_compute(Bounds *b, Expr *e, Range *out) {
    Module *m = b->m;
    Range x, y;
    int64_t c;
    switch (e->kind) {
    case EX_CONST_INT:
    case EX_SIZE:
        out->lo = out->hi = e;
        return true;
    case EX_VAR:
        return range_var(b, e, out);
    case EX_CAST:
        if (!ir_is_int(e->dtype) || !ir_is_int(e->args[0]->dtype) || !range_rec(b, e->args[0], &x))
            return false;
        out->lo = ir_cast(m, e->dtype, x.lo);
        out->hi = ir_cast(m, e->dtype, x.hi);
        return true;
    case EX_NEG:
        if (!range_rec(b, e->args[0], &x))
            return false;
        out->lo = ir_simplify_expr(m, ir_unary(m, EX_NEG, x.hi));
        out->hi = ir_simplify_expr(m, ir_unary(m, EX_NEG, x.lo));
        return true;
    case EX_ADD:
    case EX_SUB:
    case EX_MIN:
    case EX_MAX:
        if (!range_rec(b, e->args[0], &x) || !range_rec(b, e->args[1], &y))
            return false;
        if (e->kind == EX_SUB) {
            out->lo = bin(m, EX_SUB, x.lo, y.hi);
            out->hi = bin(m, EX_SUB, x.hi, y.lo);
        } else {
            out->lo = bin(m, e->kind, x.lo, y.lo);
            out->hi = bin(m, e->kind, x.hi, y.hi);
        }
        return true;
    case EX_MUL: {
        if (!range_rec(b, e->args[0], &x) || !range_rec(b, e->args[1], &y))
            return false;
        if (is_fixed(&x) && is_fixed(&y)) {
            out->lo = out->hi = bin(m, EX_MUL, x.lo, y.lo);
            return true;
        }
        if (ir_is_const_int(x.lo, &c) && is_fixed(&x)) {
            Range t = x;
            x = y;
            y = t;
        }
        if (ir_is_const_int(y.lo, &c) && is_fixed(&y)) {
            out->lo = bin(m, EX_MUL, c >= 0 ? x.lo : x.hi, y.lo);
            out->hi = bin(m, EX_MUL, c >= 0 ? x.hi : x.lo, y.lo);
            return true;
        }
        if (nonneg(x.lo) && nonneg(y.lo)) {
            out->lo = bin(m, EX_MUL, x.lo, y.lo);
            out->hi = bin(m, EX_MUL, x.hi, y.hi);
            return true;
        }
        return false;
    }
    case EX_DIV:
    case EX_FLOORDIV:
        if (!range_rec(b, e->args[0], &x) || !range_rec(b, e->args[1], &y))
            return false;
        if (is_fixed(&x) && is_fixed(&y)) {
            out->lo = out->hi = bin(m, e->kind, x.lo, y.lo);
            return true;
        }
        if (!is_fixed(&y) || !positive_const(y.lo, &c) || (e->kind == EX_DIV && !nonneg(x.lo)))
            return false;
        out->lo = bin(m, e->kind, x.lo, y.lo);
        out->hi = bin(m, e->kind, x.hi, y.lo);
        return true;
    case EX_MOD:
    case EX_FLOORMOD:
        if (!range_rec(b, e->args[0], &x) || !range_rec(b, e->args[1], &y))
            return false;
        if (is_fixed(&x) && is_fixed(&y)) {
            out->lo = out->hi = bin(m, e->kind, x.lo, y.lo);
            return true;
        }
        if (e->kind == EX_MOD && !nonneg(x.lo))
            return false;
        if (is_fixed(&y) && positive_const(y.lo, &c)) {
            out->lo = ir_int(m, 0);
            out->hi = ir_int(m, c - 1);
            return true;
        }
        /* a divisor known positive (a size in 1..N): below its largest
         * value, and below x's for x >= 0 */
        if (!positive(y.lo))
            return false;
        out->lo = ir_int(m, 0);
        out->hi = bin(m, EX_SUB, y.hi, ir_int(m, 1));
        if (nonneg(x.lo))
            out->hi = bin(m, EX_MIN, out->hi, x.hi);
        return true;
    case EX_SELECT:
        if (!range_rec(b, e->args[1], &x) || !range_rec(b, e->args[2], &y))
            return false;
        out->lo = bin(m, EX_MIN, x.lo, y.lo);
        out->hi = bin(m, EX_MAX, x.hi, y.hi);
        return true;
    case EX_UFCALL: {
        Expr *args[RV_MAX_DIMS];
        if (range_args_fixed(b, e, args)) {
            /* The reader may be past the end of a guarded tile here: keep
             * the UF's index inside its domain (an in-range value bounds
             * the region as well, and those iterations are guarded off). */
            for (int i = 0; i < e->n; i++) {
                Expr *ext = e->u.uf->args[i]->extent;
                bool plain = true;
                for (int j = 0; ext && j < e->u.uf->nargs; j++)
                    plain &= !ir_uses_axis(ext, e->u.uf->args[j]);
                if (ext && plain)
                    args[i] = bin(m, EX_MAX,
                                  bin(m, EX_MIN, args[i],
                                      bin(m, EX_SUB, ir_cast(m, RV_I64, ext), ir_int(m, 1))),
                                  ir_int(m, 0));
            }
            out->lo = out->hi = ir_ufcall(m, e->u.uf, e->n, args);
            return out->lo != NULL;
        }
        out->lo = ir_cast(m, e->dtype, e->u.uf->lo_dom);
        out->hi = ir_cast(m, e->dtype, e->u.uf->hi_dom);
        return true;
    }
    case EX_LOAD: {
        Expr *args[1];
        if (range_args_fixed(b, e, args)) {
            out->lo = out->hi = ir_load(m, e->u.buf, args[0]);
            return true;
        }
        /* a fused variable loop's map at a varying iteration (CoRa Fig. 7) */
        if (range_rowmap(b, e, out))
            return true;
        /* a UF's array at a varying index: the UF's declared range */
        const Ufun *f = e->u.buf->uf;
        if (!f)
            return false;
        out->lo = ir_cast(m, e->dtype, f->lo_dom);
        out->hi = ir_cast(m, e->dtype, f->hi_dom);
        return true;
    }
    default:
        return false;
    }
}

static bool range_rec(Bounds *b, Expr *e, Range *out) {
    Range *done = ptrmap_get(&b->memo, e);
    if (done) {
        if (!done->lo)
            return false;
        *out = *done;
        return true;
    }
    Range r = {0};
    bool ok = ir_is_int(e->dtype) && range_compute(b, e, &r) && r.lo && r.hi;
    Range *keep = arena_alloc(b->m->arena, sizeof(Range));
    if (ok)
        *keep = r;
    ptrmap_put(&b->memo, e, keep);
    if (ok)
        *out = r;
    return ok;
}

bool lower_bounds_range(Module *m, Expr *e, const PtrMap *vary, bool all_loops, Range *out) {
    PtrMap none = {0};
    Bounds b = {m, vary ? vary : &none, all_loops, {0}};
    bool ok = range_rec(&b, e, out);
    ptrmap_free(&b.memo);
    return ok;
}

/* e with sums and differences moved inside the minima and maxima they
 * add to: min(a, b) + r is min(a + r, b + r), r - min(a, b) is
 * max(r - a, r - b). Interval arithmetic bounds each term on its own, so
 * the extent of a clipped tile, min(E - 1, o*f + f - 1) + 1 - o*f, bounds
 * to E + f - 1 where its second arm, simplified, is the constant f. */
static Expr *distribute(Module *m, Expr *e) {
    if (e->kind != EX_ADD && e->kind != EX_SUB)
        return e;
    Expr *a = distribute(m, e->args[0]), *b = distribute(m, e->args[1]);
    bool mm_a = a->kind == EX_MIN || a->kind == EX_MAX;
    bool mm_b = b->kind == EX_MIN || b->kind == EX_MAX;
    if (mm_a) /* min(x, y) +- b */
        return ir_binary(m, a->kind, distribute(m, bin(m, e->kind, a->args[0], b)),
                         distribute(m, bin(m, e->kind, a->args[1], b)));
    if (mm_b && e->kind == EX_ADD) /* a + min(x, y) */
        return ir_binary(m, b->kind, distribute(m, bin(m, EX_ADD, a, b->args[0])),
                         distribute(m, bin(m, EX_ADD, a, b->args[1])));
    if (mm_b) /* a - min(x, y) = max(a - x, a - y) */
        return ir_binary(m, b->kind == EX_MIN ? EX_MAX : EX_MIN,
                         distribute(m, bin(m, EX_SUB, a, b->args[0])),
                         distribute(m, bin(m, EX_SUB, a, b->args[1])));
    return a == e->args[0] && b == e->args[1] ? e : ir_binary(m, e->kind, a, b);
}

/* An upper bound of e over every iteration, for an allocation: where it is
 * a minimum with a constant arm, that constant (a size known when
 * compiling; the other arm saves memory only at small sizes). */
Expr *lower_bounds_upper(Module *m, Expr *e) {
    Range r;
    if (!lower_bounds_range(m, distribute(m, e), NULL, true, &r))
        return NULL;
    Expr *hi = ir_simplify_expr(m, r.hi);
    int64_t c;
    while (hi->kind == EX_MIN && (ir_is_const_int(hi->args[0], &c) || ir_is_const_int(hi->args[1], &c)))
        hi = ir_is_const_int(hi->args[0], &c) ? hi->args[0] : hi->args[1];
    return hi;
}

/* ---- region inference for stages computed at a loop ---- */

/* The range of v's value when leaves bound in n are fixed and the others
 * run over their extents (relaxed over `vary`, the ranges of the roots
 * outer to v, where they mention axes not bound here). */
static bool iv_range(LowerCtx *c, StageNest *n, const IterVar *v, bool clip, const PtrMap *vary,
                     Range *out) {
    Module *m = c->m;
    Expr *val = lower_iv_value(c, n, v);
    if (val) {
        out->lo = out->hi = lower_ctx_simp(c, val);
        return true;
    }
    if (v->outer) {
        Range o, i;
        if (!iv_range(c, n, v->outer, clip, vary, &o) || !iv_range(c, n, v->inner, clip, vary, &i))
            return false;
        Expr *f = ir_int(m, v->inner->factor);
        out->lo = lower_ctx_simp(c, ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, o.lo, f), i.lo));
        out->hi = ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, o.hi, f), i.hi);
        if (clip && n->state[v->id] == SPLIT_GUARD) {
            Expr *e = lower_iv_extent_over(c, n, v, vary);
            if (!e)
                return false;
            out->hi = ir_binary(m, EX_MIN, out->hi, ir_binary(m, EX_SUB, e, ir_int(m, 1)));
        }
        out->hi = lower_ctx_simp(c, out->hi);
        return true;
    }
    if (v->fused && v->fused->variable && v == v->fused->fa) {
        /* the outer part of a fused variable loop over [lo, hi]: its row
         * map there (CoRa Fig. 7; the inner part is relaxed below) */
        Range f;
        if (!iv_range(c, n, v->fused, clip, vary, &f))
            return false;
        Axis *x = lower_loop_var(m, "x", NULL);
        Expr *base = n->base[v->fused->id]; /* a region of fused rows: its first */
        Expr *a = lower_vfuse_part(c, v->fused, base ? ir_binary(m, EX_ADD, base, x->var) : x->var,
                                   true);
        PtrMap over = {0};
        ptrmap_put(&over, x, &f);
        bool ok = a && lower_bounds_range(m, a, &over, false, out);
        ptrmap_free(&over);
        return ok;
    }
    /* an unbound leaf or fused part: its whole extent (a whole tile, even
     * the last one, for a padded reader) */
    Expr *e =
        !clip && v->rel == IV_INNER && v->parent->tail != TAIL_MERGE
            ? ir_int(m, v->factor)
            : lower_iv_extent_over(c, n, v, vary);
    if (!e)
        return false;
    out->lo = ir_int(m, 0);
    out->hi = lower_ctx_simp(c, ir_binary(m, EX_SUB, e, ir_int(m, 1)));
    return true;
}

typedef struct ReadIdx {
    const Tensor *t;
    Vec(Expr *) reads; /* READ nodes of t */
} ReadIdx;

static void find_reads(const Expr *e, void *ctx) {
    ReadIdx *r = ctx;
    if (e->kind == EX_READ && e->u.tensor == r->t)
        vec_push(&r->reads, (Expr *)e);
}

/* A reader's fused variable loops over the rows a region stage's rows
 * are read at: the values of their roots as functions of a variable per
 * loop, and each loop's row in its own numbering (over that variable). */
typedef struct Rows {
    PtrMap vals; /* root Axis* -> value */
    PtrMap row;  /* fused IterVar* -> its row */
} Rows;

/* The levels of fused loop f, each a root: their axes into ax; false
 * otherwise. */
static bool level_axes(const IterVar *f, Axis **ax, int *n) {
    const IterVar *lv[SCHED_MAX_IVS];
    *n = sched_vfuse_levels(f, lv);
    for (int j = 0; j < *n; j++) {
        if (lv[j]->rel != IV_ROOT || j >= RV_MAX_DIMS)
            return false;
        ax[j] = lv[j]->axis;
    }
    return true;
}

/* The row of p's fused loop fv that `read` (of p, in reader) reads,
 * over the variables of `rows`. A read at the rows of a fused loop of
 * the reader that numbers the same rows (p's indices its levels' axes)
 * is at that loop's row itself, whatever the simplifier makes of the
 * maps (with rows of at most one element it folds the inner index to 0). */
static Expr *read_row(LowerCtx *c, const Stage *reader, const IterVar *fv, const Expr *read,
                      const Rows *rows) {
    Module *m = c->m;
    for (int i = 0; rows && i < reader->ivs.len; i++) {
        const IterVar *f = reader->ivs.data[i];
        Expr *x = f->variable ? ptrmap_get(&rows->row, f) : NULL;
        Axis *ax[SCHED_MAX_IVS];
        int n;
        if (!x || !level_axes(f, ax, &n) || !lower_vfuse_same_rows(c, fv, f))
            continue;
        bool at = true;
        for (int j = 0; j < n && at; j++)
            at = read->args[j]->kind == EX_VAR && read->args[j]->u.axis == ax[j];
        if (at)
            return x;
    }
    Expr *e = lower_vfuse_row(c, fv, read->args);
    return e ? lower_ctx_simp(c, rows ? ir_substitute(m, e, &rows->vals) : e) : NULL;
}

/* The union over the reads of p in stage `reader` of their index ranges
 * when the reader's axes range as `vary` says. Where p fuses its
 * dimensions 0..k (sched_region_vfuse), dimension 0 is the range of the
 * rows read (CoRa Fig. 7 the other way): each read's row, its indices
 * replaced by `rows` (the reader's axes fused in a loop of its own, as
 * values of a variable standing for that loop, which `vary` ranges), is
 * that variable where both fused loops number the same rows. */
static bool reads_region(LowerCtx *c, const Stage *reader, const Stage *p, const PtrMap *vary,
                         const Rows *rows, Range *reg) {
    Module *m = c->m;
    ReadIdx ri = {p->t, {0}};
    ir_visit(reader->body, find_reads, &ri);
    ir_visit(reader->pred, find_reads, &ri);
    ir_visit(reader->else_body, find_reads, &ri);
    bool ok = ri.reads.len > 0;
    int fk = -1;
    const IterVar *fv = sched_region_vfuse(p, &fk);
    for (int d = 0; d < p->t->ndim && ok; d++) {
        reg[d].lo = reg[d].hi = NULL;
        if (fv && d > 0 && d <= fk) {
            reg[d].lo = reg[d].hi = ir_int(m, 0);
            continue;
        }
        for (int k = 0; k < ri.reads.len && ok; k++) {
            Range r;
            Expr *e = ri.reads.data[k]->args[d];
            if (fv && d == 0) {
                e = read_row(c, reader, fv, ri.reads.data[k], rows);
                if (!e)
                    return false;
            }
            ok = lower_bounds_range(m, e, vary, false, &r);
            if (!ok)
                break;
            reg[d].lo = reg[d].lo ? ir_binary(m, EX_MIN, reg[d].lo, r.lo) : r.lo;
            reg[d].hi = reg[d].hi ? ir_binary(m, EX_MAX, reg[d].hi, r.hi) : r.hi;
        }
    }
    vec_free(&ri.reads);
    return ok;
}

/* The values of the roots fused in n->st's variable loop f, whose
 * value (from f's first row in a region of rows) ranges over *fr: as
 * functions of a variable x over *fr (in vary), into `rows`. */
static void part_values(LowerCtx *c, const StageNest *n, const IterVar *f, Range *fr,
                        PtrMap *vary, Rows *rows) {
    Axis *x = lower_loop_var(c->m, "x", NULL);
    ptrmap_put(vary, x, fr);
    Expr *base = n->base[f->id]; /* a region of rows: x counts from its first */
    ptrmap_put(&rows->row, f, base ? ir_binary(c->m, EX_ADD, base, x->var) : x->var);
    StageNest at = *n;
    at.value[f->id] = x->var;
    for (int i = 0; i < n->st->ivs.len; i++) {
        IterVar *r = n->st->ivs.data[i];
        Expr *v = r->rel == IV_ROOT && sched_iv_derives_from(f, r) ? lower_iv_value(c, &at, r)
                                                                   : NULL;
        if (v)
            ptrmap_put(&rows->vals, r->axis, v);
    }
}

/* A reader computed inside n->st over a region of the rows of its fused
 * loop f (*fr; NULL: all of them): the values of f's roots over a
 * variable over those rows, into `rows`, and their ranges into vary.
 * False where one cannot be bounded. */
static bool fused_rows(LowerCtx *c, const Stage *reader, const IterVar *f, Range *fr,
                       PtrMap *vary, Rows *rows) {
    Module *m = c->m;
    if (!fr) {
        Expr *t = lower_vfuse_extent(c, f);
        if (!t)
            return false;
        fr = arena_alloc(m->arena, sizeof *fr);
        fr->lo = ir_int(m, 0);
        fr->hi = lower_ctx_simp(c, ir_binary(m, EX_SUB, t, ir_int(m, 1)));
    }
    StageNest at;
    memset(&at, 0, sizeof at);
    at.st = (Stage *)reader;
    part_values(c, &at, f, fr, vary, rows);
    for (int i = 0; i < reader->ivs.len; i++) {
        IterVar *r = reader->ivs.data[i];
        Expr *v = r->rel == IV_ROOT ? ptrmap_get(&rows->vals, r->axis) : NULL;
        if (!v)
            continue;
        Range *rr = arena_alloc(m->arena, sizeof *rr);
        if (!lower_bounds_range(m, v, vary, false, rr))
            return false;
        ptrmap_put(vary, r->axis, rr);
    }
    return true;
}

/* The region of p that `reader` reads in the remaining iterations of
 * n->st: n->st itself, or a stage computed inside it (at a loop of n->st
 * or, further down, inside another such stage), whose own region here
 * bounds its axes. */
static bool reader_region(LowerCtx *c, StageNest *n, Stage *reader, Stage *p, bool clip,
                          Range *reg) {
    Module *m = c->m;
    Stage *st = n->st;
    if (reader != st) {
        /* p is computed at a loop of st outside its reader: bound the
         * reader's region here, then p's region within it */
        if (reader->attach != ATTACH_AT)
            return false;
        Range rr[RV_MAX_DIMS];
        /* a region bounds inference cannot tell: attach.c computes the
         * whole tensor (a padded reader is rejected there) */
        bool whole = !lower_infer_region(c, n, reader, clip && !reader->local_pad, rr);
        if (whole && reader->local_pad)
            return false;
        PtrMap vary = {0};
        Rows rows = {0};
        int rk = -1;
        const IterVar *rf = sched_region_vfuse(reader, &rk);
        for (int d = 0; d < reader->t->ndim; d++) {
            if (rf && d <= rk)
                continue; /* fused_rows below */
            Expr *full = lower_ragged_extent(c, reader, d, whole ? NULL : rr);
            if (!full)
                return false;
            if (whole) {
                rr[d].lo = ir_int(m, 0);
                rr[d].hi = ir_binary(m, EX_SUB, full, ir_int(m, 1));
            }
            rr[d].lo = lower_ctx_simp(c, rr[d].lo);
            rr[d].hi = lower_ctx_simp(c, rr[d].hi);
            if (clip && !reader->local_pad) {
                rr[d].lo = lower_ctx_simp(c, ir_binary(m, EX_MAX, rr[d].lo, ir_int(m, 0)));
                rr[d].hi = lower_ctx_simp(
                    c, ir_binary(m, EX_MIN, rr[d].hi, ir_binary(m, EX_SUB, full, ir_int(m, 1))));
            }
            ptrmap_put(&vary, reader->t->axes[d], &rr[d]);
        }
        bool ok = !rf || fused_rows(c, reader, rf, whole ? NULL : &rr[0], &vary, &rows);
        ok = ok && reads_region(c, reader, p, &vary, &rows, reg);
        ptrmap_free(&vary);
        ptrmap_free(&rows.vals);
        ptrmap_free(&rows.row);
        return ok;
    }
    PtrMap vary = {0};
    Range *rs = arena_alloc(m->arena, sizeof(Range) * (size_t)(st->ivs.len + 1));
    bool ok = true;
    for (int i = 0; i < st->ivs.len && ok; i++) {
        IterVar *r = st->ivs.data[i];
        if (r->rel != IV_ROOT)
            continue;
        ok = iv_range(c, n, r, clip, &vary, &rs[i]);
        Expr *base = ok ? lower_root_base(c, n, r, &ok) : NULL;
        if (ok && base) {
            rs[i].lo = lower_ctx_simp(c, ir_binary(m, EX_ADD, base, rs[i].lo));
            rs[i].hi = lower_ctx_simp(c, ir_binary(m, EX_ADD, base, rs[i].hi));
        }
        ptrmap_put(&vary, r->axis, &rs[i]);
    }
    /* the rows of st's fused variable loops that range here */
    Rows rows = {0};
    for (int i = 0; i < st->ivs.len && ok; i++) {
        IterVar *f = st->ivs.data[i];
        if (f->rel != IV_FUSED || !f->variable || (f->fused && f->fused->variable) ||
            lower_iv_value(c, n, f))
            continue;
        Range *fr = arena_alloc(m->arena, sizeof *fr);
        ok = iv_range(c, n, f, clip, &vary, fr);
        if (ok)
            part_values(c, n, f, fr, &vary, &rows);
    }
    ok = ok && reads_region(c, st, p, &vary, &rows, reg);
    ptrmap_free(&vary);
    ptrmap_free(&rows.vals);
    ptrmap_free(&rows.row);
    return ok;
}

/* The region of p that stage n->st's remaining iterations read: the union
 * over p's readers (the schedule checker made each n->st or a stage
 * computed inside it: layernorm's row mean, read by the variance and the
 * output, both at the row loop). */
bool lower_infer_region(LowerCtx *c, StageNest *n, Stage *p, bool clip, Range *reg) {
    Module *m = c->m;
    bool any = false;
    for (int k = 0; k < c->s->stages.len; k++) {
        Stage *r = c->s->stages.data[k];
        if (r->t == p->t || r->attach == ATTACH_INLINE || !sched_stage_reads_tensor(r, p->t))
            continue;
        Range rr[RV_MAX_DIMS];
        if (!reader_region(c, n, r, p, clip, rr))
            return false;
        for (int d = 0; d < p->t->ndim; d++) {
            reg[d].lo = any ? ir_binary(m, EX_MIN, reg[d].lo, rr[d].lo) : rr[d].lo;
            reg[d].hi = any ? ir_binary(m, EX_MAX, reg[d].hi, rr[d].hi) : rr[d].hi;
        }
        any = true;
    }
    return any;
}
