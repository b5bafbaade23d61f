/*
 * ranges.c — reads and UF applications provably out of range.
 *
 * After a compute definition is checked (its omitted extents inferred),
 * every tensor read and UF application in it is compared with the extent
 * of the dimension it indexes. A read is an error when it is out of range
 * at some element of the iteration space *for every allowed value of the
 * sizes*: `Y[i] = X[i + 1]` with `i < N` and `X : f32[N]` reads X[N] at
 * i = N - 1 whatever N is. Anything weaker is accepted: the compiled code
 * guards what the simplifier cannot prove in range, and the interpreter
 * checks every read (docs/language.md, "Safety").
 *
 * The proof is exact symbolic maximization of linear forms. An index minus
 * its extent is read as c0 + sum c*atom over sizes, axis variables and
 * opaque atoms (UF values, tensor values); the axis variables are then
 * eliminated innermost first, each by the end of its range that maximizes
 * (or minimizes) the form: `ext - 1` or 0. That is exact, not a bound,
 * when every range involved is non-empty for every size value, which is
 * required of every axis in scope (else nothing is claimed). What remains
 * must be a form over sizes only (a UF value is not known to reach its
 * declared bounds), and it is out of range for every size value when its
 * smallest value over the sizes' declared ranges is >= 0 (past the end) or
 * when the largest value of the index's minimum is < 0 (before the start).
 *
 * Conditions narrow: a read in a branch of `if P then A else B` is out of
 * range only where that branch runs. It is judged only when P (or !P in
 * the else-branch) holds at some element for every size value and that
 * element can be chosen apart from the read's: the axes P uses and the
 * axes the read uses, each with the axes their extents use (`j < i + 1`
 * uses i), are disjoint. Sharing a size is fine (a size is fixed for the
 * whole run); sharing an axis is not (`if i < 1 then X[j]` with j < i + 1
 * reads only X[0]), nor a P the checker cannot decide (a UF value, ==):
 * then the read is not judged. `select` evaluates both arms, so it does
 * not narrow.
 */
#include <stdio.h>
#include <string.h>

#include "lang/lang.h"

/* c0 + sum c[i] * x[i]; ok = false when not linear (or on overflow). */
typedef struct RLin {
    bool ok;
    int n;
    const Expr *x[16];
    int64_t c[16];
    int64_t k;
} RLin;

static bool same_atom(const Expr *a, const Expr *b) {
    return a == b || (a->kind == EX_SIZE && b->kind == EX_SIZE && a->u.size == b->u.size);
}

static void rlin_term(RLin *l, const Expr *x, int64_t c) {
    for (int i = 0; i < l->n; i++)
        if (same_atom(l->x[i], x)) {
            if (__builtin_add_overflow(l->c[i], c, &l->c[i]))
                l->ok = false;
            return;
        }
    if (l->n == RV_COUNT(l->x)) {
        l->ok = false;
        return;
    }
    l->x[l->n] = x;
    l->c[l->n++] = c;
}

/* l += scale * e */
static void rlin_acc(RLin *l, const Expr *e, int64_t scale) {
    int64_t v;
    if (!l->ok)
        return;
    switch (e->kind) {
    case EX_CONST_INT:
        if (__builtin_mul_overflow(scale, e->u.ival, &v) || __builtin_add_overflow(l->k, v, &l->k))
            l->ok = false;
        return;
    case EX_SIZE:
    case EX_VAR:
    case EX_UFCALL:
    case EX_READ:
        rlin_term(l, e, scale);
        return;
    case EX_CAST: /* a widening keeps the value; a cast to i32 may wrap */
        if (ir_is_int(e->args[0]->dtype) && (e->dtype == RV_I64 || e->args[0]->dtype == RV_I32))
            rlin_acc(l, e->args[0], scale);
        else
            l->ok = false;
        return;
    case EX_NEG:
        if (scale == INT64_MIN)
            l->ok = false;
        else
            rlin_acc(l, e->args[0], -scale);
        return;
    case EX_ADD:
    case EX_SUB:
        rlin_acc(l, e->args[0], scale);
        if (e->kind == EX_SUB && scale == INT64_MIN)
            l->ok = false;
        else
            rlin_acc(l, e->args[1], e->kind == EX_ADD ? scale : -scale);
        return;
    case EX_MUL:
        if (ir_is_const_int(e->args[0], &v) && !__builtin_mul_overflow(scale, v, &v))
            rlin_acc(l, e->args[1], v);
        else if (ir_is_const_int(e->args[1], &v) && !__builtin_mul_overflow(scale, v, &v))
            rlin_acc(l, e->args[0], v);
        else
            l->ok = false;
        return;
    default:
        l->ok = false;
        return;
    }
}

/* A range 0..ext-1 that is non-empty for every value of what ext uses. */
static bool nonempty(const Axis *a) {
    int64_t lo, hi;
    return a->extent && ir_int_bounds(a->extent, &lo, &hi) && lo >= 1;
}

/* Replaces every axis variable by the end of its range that makes the
 * form largest (upper) or smallest, innermost (highest id) first; false
 * when an extent is not linear or its range may be empty. */
static bool rlin_eliminate(RLin *l, bool upper) {
    for (int step = 0; step < 64; step++) {
        int best = -1;
        for (int i = 0; i < l->n; i++)
            if (l->c[i] != 0 && l->x[i]->kind == EX_VAR &&
                (best < 0 || l->x[i]->u.axis->id > l->x[best]->u.axis->id))
                best = i;
        if (best < 0)
            return l->ok;
        const Axis *a = l->x[best]->u.axis;
        int64_t c = l->c[best];
        l->c[best] = 0;
        if (!nonempty(a))
            return false;
        if ((c > 0) == upper) {
            rlin_acc(l, a->extent, c);
            if (__builtin_sub_overflow(l->k, c, &l->k))
                l->ok = false;
        }
        if (!l->ok)
            return false;
    }
    return false;
}

/* The extreme of a form over sizes only, over their declared ranges:
 * the smallest (upper = false) or largest; false when other atoms remain. */
static bool rlin_over_sizes(const RLin *l, bool largest, int64_t *out) {
    int64_t v = l->k, t;
    for (int i = 0; i < l->n; i++) {
        if (l->c[i] == 0)
            continue;
        if (l->x[i]->kind != EX_SIZE)
            return false;
        const Size *s = l->x[i]->u.size;
        if (__builtin_mul_overflow(l->c[i], (l->c[i] > 0) == largest ? s->hi : s->lo, &t) ||
            __builtin_add_overflow(v, t, &v))
            return false;
    }
    *out = v;
    return true;
}

bool lang_min_difference(const Expr *a, const Expr *b, int64_t *out) {
    RLin l = {.ok = true};
    rlin_acc(&l, a, 1);
    rlin_acc(&l, b, -1);
    return l.ok && rlin_over_sizes(&l, false, out);
}

/* The form as source text ("N - 1"). */
static void rlin_print(Buf *b, const RLin *l) {
    bool first = true;
    for (int i = 0; i < l->n; i++) {
        int64_t c = l->c[i];
        if (c == 0)
            continue;
        char *s = ir_expr_str(l->x[i]);
        if (!first)
            buf_puts(b, c < 0 ? " - " : " + ");
        else if (c < 0)
            buf_puts(b, "-");
        uint64_t a = c < 0 ? -(uint64_t)c : (uint64_t)c;
        if (a != 1)
            buf_printf(b, "%llu * ", (unsigned long long)a);
        buf_puts(b, s);
        base_free(s);
        first = false;
    }
    if (first)
        buf_printf(b, "%lld", (long long)l->k);
    else if (l->k)
        buf_printf(b, " %c %llu", l->k < 0 ? '-' : '+',
                   (unsigned long long)(l->k < 0 ? -(uint64_t)l->k : (uint64_t)l->k));
}

/* ---- guards ---- */

typedef struct GuardAxes {
    PtrMap *axes;
    bool nonempty; /* require every range to be non-empty */
    bool ok;
} GuardAxes;

static void guard_axis(const Expr *e, void *ctx) {
    GuardAxes *g = ctx;
    if (e->kind != EX_VAR || ptrmap_has(g->axes, e->u.axis))
        return;
    const Axis *a = e->u.axis;
    ptrmap_put(g->axes, a, (void *)a);
    if (!a->extent || (g->nonempty && !nonempty(a)))
        g->ok = false;
    else
        ir_visit(a->extent, guard_axis, g);
}

/* Adds to `axes` the axes e uses and those their extents use; false when
 * one has no extent yet (or, with `need_nonempty`, may have an empty range). */
static bool guard_axes(const Expr *e, PtrMap *axes, bool need_nonempty) {
    GuardAxes g = {axes, need_nonempty, true};
    ir_visit(e, guard_axis, &g);
    return g.ok;
}

static bool guard_disjoint(const PtrMap *a, const PtrMap *b) {
    for (int i = 0; i < a->cap; i++)
        if (a->keys[i] && ptrmap_has(b, a->keys[i]))
            return false;
    return true;
}

static void guard_merge(PtrMap *into, const PtrMap *from) {
    for (int i = 0; i < from->cap; i++)
        if (from->keys[i])
            ptrmap_put(into, from->keys[i], (void *)from->keys[i]);
}

/* Is there, for every value of the sizes, an element where lhs OP rhs
 * holds (lhs - rhs <= -1, <= 0, >= 1 or >= 0)? Exact elimination. */
static bool guard_cmp_reachable(const Expr *lhs, const Expr *rhs, ExprKind op) {
    if (op == EX_NE)
        return guard_cmp_reachable(lhs, rhs, EX_LT) || guard_cmp_reachable(lhs, rhs, EX_GT);
    if (op != EX_LT && op != EX_LE && op != EX_GT && op != EX_GE)
        return false;
    bool below = op == EX_LT || op == EX_LE;
    RLin d = {.ok = true};
    rlin_acc(&d, lhs, 1);
    rlin_acc(&d, rhs, -1);
    int64_t v;
    if (!rlin_eliminate(&d, !below) || !rlin_over_sizes(&d, below, &v))
        return false;
    return below ? v <= (op == EX_LT ? -1 : 0) : v >= (op == EX_GT ? 1 : 0);
}

static ExprKind guard_negate(ExprKind op) {
    switch (op) {
    case EX_LT: return EX_GE;
    case EX_LE: return EX_GT;
    case EX_GT: return EX_LE;
    case EX_GE: return EX_LT;
    case EX_EQ: return EX_NE;
    case EX_NE: return EX_EQ;
    default: return EX_COUNT;
    }
}

/* Does `p == holds` hold at some element for every value of the sizes?
 * Adds the axes it needs to `axes`; false when unsure. */
static bool guard_reachable(const Expr *p, bool holds, PtrMap *axes) {
    if (p->kind == EX_NOT)
        return guard_reachable(p->args[0], !holds, axes);
    if (p->kind == EX_AND || p->kind == EX_OR) {
        PtrMap a = {0}, b = {0};
        bool ok;
        if ((p->kind == EX_AND) == holds) /* both, at one element */
            ok = guard_reachable(p->args[0], holds, &a) && guard_reachable(p->args[1], holds, &b) &&
                 guard_disjoint(&a, &b);
        else /* either */
            ok = guard_reachable(p->args[0], holds, &a) || guard_reachable(p->args[1], holds, &b);
        guard_merge(axes, &a);
        guard_merge(axes, &b);
        ptrmap_free(&a);
        ptrmap_free(&b);
        return ok;
    }
    ExprKind op = holds ? p->kind : guard_negate(p->kind);
    return guard_axes(p, axes, true) && guard_cmp_reachable(p->args[0], p->args[1], op);
}

bool lang_guard_hides(const Expr *cond, bool holds, const Expr *e) {
    PtrMap ca = {0}, ea = {0};
    bool hides = !guard_reachable(cond, holds, &ca) || !guard_axes(e, &ea, false) ||
                 !guard_disjoint(&ca, &ea);
    ptrmap_free(&ca);
    ptrmap_free(&ea);
    return hides;
}

/* ---- the walk ---- */

typedef struct RangeCk {
    const SrcFile *src;
    const PtrMap *locs; /* read or UF call -> SrcLoc* */
    const Axis *scope[64]; /* the axes in scope: the definition's, enclosing reductions' */
    int nscope;
    const Expr *cond; /* the condition of the branch being walked (NULL: none) */
    bool holds;       /* the branch: cond holds (then) or not (else) */
    rv_status st;
} RangeCk;

/* Judges index `idx` of read/UF call `e` against extent `ext`. */
static void check_one(RangeCk *k, const Expr *e, int pos, const Expr *idx, const Expr *ext) {
    if (!ext || (k->cond && (lang_guard_hides(k->cond, k->holds, idx) ||
                             lang_guard_hides(k->cond, k->holds, ext))))
        return;
    for (int i = 0; i < k->nscope; i++)
        if (!nonempty(k->scope[i]))
            return;
    RLin hi = {.ok = true}, lo = {.ok = true}, over = {.ok = true};
    rlin_acc(&over, idx, 1);
    rlin_acc(&over, ext, -1);
    rlin_acc(&hi, idx, 1);
    rlin_acc(&lo, idx, 1);
    int64_t v;
    bool past = rlin_eliminate(&over, true) && rlin_over_sizes(&over, false, &v) && v >= 0;
    bool before = !past && rlin_eliminate(&lo, false) && rlin_over_sizes(&lo, true, &v) && v < 0;
    if (!past && !before)
        return;
    if (past && !rlin_eliminate(&lo, false))
        lo.ok = false;
    bool hi_ok = rlin_eliminate(&hi, true);
    const SrcLoc *loc = ptrmap_get(k->locs, e);
    bool read = e->kind == EX_READ;
    const char *owner = read ? e->u.tensor->name : e->u.uf->name;
    Buf b = {0};
    char *is = ir_expr_str(idx), *es = ir_expr_str(ext);
    buf_printf(&b, "%s %s of '%s' is out of range", read ? "index" : "argument", is, owner);
    if (lo.ok && hi_ok) {
        buf_puts(&b, ": it ranges over ");
        rlin_print(&b, &lo);
        buf_puts(&b, "..");
        rlin_print(&b, &hi);
    }
    buf_printf(&b, ", %s %s %d (extent %s)", past ? "past the end of" : "below 0 in",
               read ? "dimension" : "argument", pos, es);
    k->st = base_diag(RV_ERR_TYPE, k->src, loc ? *loc : (SrcLoc){0}, "%s", buf_str(&b));
    base_free(is);
    base_free(es);
    buf_free(&b);
}

/* The extent of position `pos` of a read/UF call, outer positions bound. */
static Expr *extent_of(Module *m, const Expr *e, int pos) {
    Axis *const *axes = e->kind == EX_READ ? e->u.tensor->axes : e->u.uf->args;
    if (!axes[pos]->extent)
        return NULL;
    PtrMap map = {0};
    for (int i = 0; i < pos; i++)
        ptrmap_put(&map, axes[i], e->args[i]);
    Expr *r = ir_substitute(m, axes[pos]->extent, &map);
    ptrmap_free(&map);
    return r;
}

static void walk(RangeCk *k, Module *m, const Expr *e, PtrMap *seen) {
    if (k->st != RV_OK || ptrmap_has(seen, e))
        return;
    ptrmap_put(seen, e, (void *)e);
    for (int i = 0; i < e->n; i++)
        if (e->kind != EX_REDUCE)
            walk(k, m, e->args[i], seen);
    if ((e->kind == EX_READ || e->kind == EX_UFCALL) && ptrmap_has(k->locs, e))
        for (int i = 0; i < e->n && k->st == RV_OK; i++)
            check_one(k, e, i, e->args[i], extent_of(m, e, i));
    if (e->kind != EX_REDUCE || k->nscope + e->u.red.naxes > RV_COUNT(k->scope))
        return;
    /* a reduction: its extents see the axes before them, its body all */
    int n0 = k->nscope;
    for (int i = 0; i < e->u.red.naxes && k->st == RV_OK; i++) {
        PtrMap inner = {0};
        walk(k, m, e->u.red.axes[i]->extent, &inner);
        ptrmap_free(&inner);
        k->scope[k->nscope++] = e->u.red.axes[i];
    }
    PtrMap inner = {0};
    walk(k, m, e->args[0], &inner);
    ptrmap_free(&inner);
    k->nscope = n0;
}

static void walk_in(RangeCk *k, Module *m, const Expr *e, const Expr *cond, bool holds) {
    PtrMap seen = {0};
    k->cond = cond;
    k->holds = holds;
    if (e)
        walk(k, m, e, &seen);
    ptrmap_free(&seen);
}

rv_status lang_check_ranges(const SrcFile *src, Module *m, const Tensor *t, const PtrMap *locs) {
    RangeCk k = {.src = src, .locs = locs, .st = RV_OK};
    if (t->ndim > RV_COUNT(k.scope))
        return RV_OK;
    /* each extent of the header sees the axes before it */
    for (int i = 0; i < t->ndim && k.st == RV_OK; i++) {
        walk_in(&k, m, t->axes[i]->extent, NULL, true);
        k.scope[k.nscope++] = t->axes[i];
    }
    const Op *op = t->op;
    if (op->pred) { /* a conditional operation or recursion member */
        walk_in(&k, m, op->pred, NULL, true);
        walk_in(&k, m, op->body, op->pred, true);
        walk_in(&k, m, op->else_body, op->pred, false);
    } else {
        walk_in(&k, m, op->body, NULL, true);
    }
    return k.st;
}
