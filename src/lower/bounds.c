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
 */
#include "lower/lower.h"

typedef struct Bounds {
    Module *m;
    const PtrMap *vary;
    bool all_loops;
    PtrMap memo; /* Expr* -> Range* (arena) */
} Bounds;

static bool range_rec(Bounds *b, Expr *e, Range *out);

static Expr *bin(Module *m, ExprKind k, Expr *a, Expr *c) {
    return lower_simplify_expr(m, ir_binary(m, k, a, c));
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
        out->lo = lower_simplify_expr(m, ir_unary(m, EX_NEG, x.hi));
        out->hi = lower_simplify_expr(m, ir_unary(m, EX_NEG, x.lo));
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

Expr *lower_bounds_upper(Module *m, Expr *e) {
    Range r;
    if (!lower_bounds_range(m, e, NULL, true, &r))
        return NULL;
    return r.hi;
}
