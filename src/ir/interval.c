/*
 * interval.c — what the simplifier's context proves about the range of an
 * integer expression: bounds of linear forms and intervals of atoms.
 *
 * The simplifier (simplify.c) asks two questions: the least upper or
 * greatest lower bound of a linear form (ir_lin_bound), and the
 * interval of an expression (ir_ival_of). Both read the context of
 * simplify.c: the bindings of loop and let variables in scope and which
 * buffers may change, and they call back into ir_simp for the
 * simplified extents and UF ranges they bound with.
 *
 * To bound a linear form, the prover first eliminates atoms symbolically
 * and only then falls back to numbers, so common atoms cancel: inside
 * `for i in 0..T*16`, i - T*16 <= (T*16 - 1) - T*16 = -1 proves
 * `i < T*16` for every T. Elimination replaces, one at a time: a let
 * variable by its value; a loop variable by 0 or extent - 1 (innermost
 * first: a variable's extent mentions only outer ones); a UF value by its
 * declared lo/hi; and k*c*(x/c) by k*x or k*(x - c + 1) (c*(x/c) lies in
 * [x - c + 1, x], for floordiv always and for `/` when x >= 0), which is
 * what proves `io*32 + ii < ceildiv(N, 32)*32`. Three orders are tried (loop
 * variables before divisions and after, and UF values after divisions)
 * and the best bound kept; a min/max/select atom is split into its arms
 * (a bounded number of times).
 * Every intermediate form is also bounded by numeric intervals of its
 * atoms (declared ranges, extents, and the usual interval rules for
 * products, divisions, remainders, min/max, select, abs and casts), and
 * the best bound wins. Everything is exact i64 arithmetic; an overflow
 * makes a bound unknown, never wrong.
 */
#include "ir/simplify.h"

/* ---- small integer helpers ---- */

static bool is_int_expr(const Expr *e) {
    return ir_is_int(e->dtype);
}

/* floor(a / c) and the matching non-negative remainder, for c > 0. */
int64_t ir_fdiv(int64_t a, int64_t c) {
    int64_t q = a / c;
    if (a % c != 0 && a < 0)
        q--;
    return q;
}

static int64_t fmod_pos(int64_t a, int64_t c) {
    int64_t r = a % c;
    return r < 0 ? r + c : r;
}

int64_t ir_gcd64(int64_t a, int64_t b) {
    if (a < 0)
        a = -a;
    if (b < 0)
        b = -b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* ---- bounds of linear forms ---- */

static Binding *binding_of(Simp *S, const Axis *a) {
    return ptrmap_get(&S->binds, a);
}

/* The extent of a loop variable in scope, or its axis's own extent; NULL
 * when unknown or when it loads (see ir_loads_mutable). */
static Expr *var_extent(Simp *S, const Axis *a) {
    Binding *b = binding_of(S, a);
    if (b)
        return b->extent;
    return a->extent && !ir_loads_mutable(S, a->extent) ? ir_simp(S, a->extent) : NULL;
}

/* The declared range bound of a UF value: a UF call, or a load from the
 * buffer that holds a UF's values, or either widened to i64 (UF arrays
 * may be stored as i32; the widening keeps the value). */
static Ufun *uf_of(const Expr *x) {
    if (x->kind == EX_CAST && x->dtype == RV_I64 && ir_is_int(x->args[0]->dtype))
        x = x->args[0];
    if (x->kind == EX_UFCALL)
        return x->u.uf;
    if (x->kind == EX_LOAD && x->u.buf->uf)
        return x->u.buf->uf;
    return NULL;
}

/* A fused variable loop's row map at x (src/lower/vfuse.c): row[x] is
 * in [0, count); and start[row[x]] (that map's own row starts) is the
 * start of x's row, in [x + 1 - E(row[x]), x] where the map knows its
 * rows' extent E. Eliminated before loop variables: x is usually a sum
 * of them (fo*16 + fi) that must cancel whole. */
static const Buffer *rowmap_of(const Expr *x) {
    return x->kind == EX_LOAD && x->u.buf->rowmap_start ? x->u.buf : NULL;
}

static const Expr *rowstart_index(const Expr *x) {
    const Expr *r = x->kind == EX_LOAD ? x->args[0] : NULL;
    if (r && r->kind == EX_CAST)
        r = r->args[0];
    const Buffer *row = r ? rowmap_of(r) : NULL;
    return row && row->rowmap_start == x->u.buf ? r : NULL;
}

/* The order in which atoms are eliminated (see the file comment). */
typedef enum ElimClass { EL_NONE, EL_LET, EL_START, EL_MAP, EL_VAR, EL_UF, EL_DIV } ElimClass;

static ElimClass elim_class(Simp *S, const Term *t) {
    Expr *x = t->x;
    int64_t c;
    switch (x->kind) {
    case EX_VAR: {
        Binding *b = binding_of(S, x->u.axis);
        if (b && b->value)
            return EL_LET;
        if (b && b->opaque)
            return EL_NONE;
        return var_extent(S, x->u.axis) ? EL_VAR : EL_NONE;
    }
    case EX_DIV:
    case EX_FLOORDIV:
        if (!ir_is_const_int(x->args[1], &c) || c <= 1)
            return EL_NONE;
        if (x->kind == EX_DIV) {
            Ival iv = ir_ival_of(S, x->args[0]);
            if (!iv.ok || iv.lo < 0)
                return EL_NONE;
        }
        return EL_DIV;
    default: {
        /* a row start before the row maps its x may hold (they cancel) */
        if (rowstart_index(x))
            return EL_START;
        if (rowmap_of(x))
            return EL_MAP;
        Ufun *f = uf_of(x);
        return f && f->lo_dom && f->hi_dom ? EL_UF : EL_NONE;
    }
    }
}

/* The bound of a row map's load (EL_MAP) we need: `up` for an upper one;
 * NULL when none is known. */
static const Lin *elim_map(Simp *S, const Expr *x, bool up) {
    Module *m = S->m;
    const Buffer *row = rowmap_of(x);
    if (row) /* in [0, count) */
        return up ? ir_lin_add_const(S, ir_lin_of(S, ir_simp(S, row->rowmap_count)), -1)
                  : &ir_lin_zero;
    const Expr *r = rowstart_index(x);
    Expr *at = r->args[0]; /* x's index: start[row[at]] <= at */
    if (at->kind == EX_CAST)
        at = at->args[0];
    if (up)
        return ir_lin_of(S, at);
    row = r->u.buf;
    if (!row->rowmap_ext)
        return NULL;
    PtrMap sub = {0};
    ptrmap_put(&sub, row->rowmap_r, (void *)r);
    Expr *ext = ir_simp(S, ir_substitute(m, row->rowmap_ext, &sub));
    ptrmap_free(&sub);
    return ir_lin_comb(S, 1, ir_lin_add_const(S, ir_lin_of(S, at), 1), -1,
                          ir_lin_of(S, ext));
}

/* The form that bounds term t from above (upper) or below. */
static const Lin *elim_term(Simp *S, const Term *t, ElimClass cl, bool upper) {
    Expr *x = t->x;
    bool up = (t->c > 0) == upper; /* the bound of x we need */
    switch (cl) {
    case EL_LET:
        return ir_lin_comb(S, t->c, ir_lin_of(S, binding_of(S, x->u.axis)->value), 0,
                              &ir_lin_zero);
    case EL_VAR:
        if (!up)
            return &ir_lin_zero;
        return ir_lin_comb(S, t->c,
                              ir_lin_add_const(S, ir_lin_of(S, var_extent(S, x->u.axis)), -1),
                              0, &ir_lin_zero);
    case EL_UF: {
        Ufun *f = uf_of(x);
        return ir_lin_comb(S, t->c, ir_lin_of(S, ir_simp(S, up ? f->hi_dom : f->lo_dom)), 0,
                              &ir_lin_zero);
    }
    case EL_START:
    case EL_MAP: {
        const Lin *b = elim_map(S, x, up);
        return b ? ir_lin_comb(S, t->c, b, 0, &ir_lin_zero) : NULL;
    }
    case EL_DIV: {
        /* c*(x0/c) in [x0 - c + 1, x0] */
        int64_t c = x->args[1]->u.ival, s = t->c / c;
        const Lin *x0 = ir_lin_of(S, x->args[0]);
        bool hi = (s > 0) == upper;
        return ir_lin_comb(S, s, hi ? x0 : ir_lin_add_const(S, x0, 1 - c), 0,
                              &ir_lin_zero);
    }
    default:
        RV_UNREACHABLE();
    }
}

/* Picks the next term to eliminate: lets, then loop variables (innermost,
 * i.e. highest axis id, first), UF values and divisions, or divisions
 * before variables. -1 when none. */
static int pick_term(Simp *S, const Lin *L, int order_no, bool *saw_div, ElimClass *cls) {
    static const ElimClass order[3][6] = {{EL_LET, EL_START, EL_MAP, EL_VAR, EL_UF, EL_DIV},
                                          {EL_LET, EL_START, EL_MAP, EL_DIV, EL_VAR, EL_UF},
                                          {EL_LET, EL_START, EL_MAP, EL_VAR, EL_DIV, EL_UF}};
    ElimClass cl[64];
    int n = L->n < 64 ? L->n : 64;
    for (int i = 0; i < n; i++) {
        cl[i] = elim_class(S, &L->t[i]);
        if (cl[i] == EL_DIV)
            *saw_div = true;
    }
    for (int o = 0; o < 6; o++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (cl[i] != order[order_no][o])
                continue;
            if (best < 0 || (cl[i] == EL_VAR && L->t[i].x->u.axis->id > L->t[best].x->u.axis->id))
                best = i;
        }
        if (best >= 0) {
            *cls = cl[best];
            return best;
        }
    }
    return -1;
}

/* Sum of the atoms' numeric intervals. */
static bool numeric_bound(Simp *S, const Lin *L, bool upper, int64_t *out) {
    int64_t acc = L->c0;
    for (int i = 0; i < L->n; i++) {
        Ival iv = ir_ival_of(S, L->t[i].x);
        if (!iv.ok)
            return false;
        int64_t c = L->t[i].c, v;
        int64_t use = (c > 0) == upper ? iv.hi : iv.lo;
        if (__builtin_mul_overflow(c, use, &v) || __builtin_add_overflow(acc, v, &acc))
            return false;
    }
    *out = acc;
    return true;
}

static void keep_best(bool upper, bool ok, int64_t v, bool *have, int64_t *best) {
    if (!ok)
        return;
    if (!*have || (upper ? v < *best : v > *best))
        *best = v;
    *have = true;
}

/* Splits the first min/max/select atom into its arms. A bound that holds
 * for the arm the atom may take is valid: for select and for the "loose"
 * side of min/max both arms must be bounded (the worse counts); for the
 * "tight" side (an upper bound of min, a lower bound of max) either arm
 * alone bounds the atom (the better counts). */
static bool branch_bound(Simp *S, const Lin *L, bool upper, int64_t *out) {
    if (S->branch_depth >= 2)
        return false;
    for (int i = 0; i < L->n; i++) {
        Expr *x = L->t[i].x;
        int64_t c = L->t[i].c;
        if (x->kind != EX_MIN && x->kind != EX_MAX && x->kind != EX_SELECT)
            continue;
        Expr *arm[2] = {x->args[x->kind == EX_SELECT], x->args[1 + (x->kind == EX_SELECT)]};
        bool tight =
            (x->kind == EX_MIN && (c > 0) == upper) || (x->kind == EX_MAX && (c > 0) != upper);
        int64_t v[2];
        bool ok[2];
        S->branch_depth++;
        for (int a = 0; a < 2; a++) {
            const Lin *r = ir_lin_replace(
                S, L, i, ir_lin_comb(S, c, ir_lin_of(S, arm[a]), 0, &ir_lin_zero));
            ok[a] = r && ir_lin_bound(S, r, upper, &v[a]);
        }
        S->branch_depth--;
        bool have = false;
        if (tight) {
            keep_best(upper, ok[0], v[0], &have, out);
            keep_best(upper, ok[1], v[1], &have, out);
            return have;
        }
        if (!ok[0] || !ok[1])
            return false;
        *out = upper ? (v[0] > v[1] ? v[0] : v[1]) : (v[0] < v[1] ? v[0] : v[1]);
        return true;
    }
    return false;
}

/* A bound v of scale*L as a bound of L (L is an integer: round inwards). */
static int64_t scaled_back(int64_t v, int64_t scale, bool upper) {
    return upper || v == INT64_MIN ? ir_fdiv(v, scale) : -ir_fdiv(-v, scale);
}

static bool branchable(const Lin *L) {
    for (int i = 0; i < L->n; i++)
        if (L->t[i].x->kind == EX_MIN || L->t[i].x->kind == EX_MAX || L->t[i].x->kind == EX_SELECT)
            return true;
    return false;
}

/* One elimination order, with numbers at every step. A min/max/select
 * atom is split where it enters the form (at the start, or as part of a
 * variable's extent), before the other atoms it could cancel with are
 * eliminated: inside `for t in 0..min(32, N - io*32)`, io*32 + t - N is
 * split while io is still there to cancel. */
static bool bound_in_order(Simp *S, const Lin *L, bool upper, int order_no, bool *saw_div,
                           int64_t *out) {
    bool have = false, ok, split = branchable(L);
    int64_t v = 0, scale = 1; /* L is scale times the form asked about */
    for (int step = 0; step < 64 && L->n; step++) {
        if (split) {
            ok = branch_bound(S, L, upper, &v);
            keep_best(upper, ok, scaled_back(v, scale, upper), &have, out);
        }
        /* every intermediate form bounds L; a division's own interval may
         * be tighter than what eliminating it gives */
        ok = numeric_bound(S, L, upper, &v);
        keep_best(upper, ok, scaled_back(v, scale, upper), &have, out);
        ElimClass cl;
        int i = pick_term(S, L, order_no, saw_div, &cl);
        if (i < 0)
            break;
        if (cl == EL_DIV) {
            /* k*(x/c) with c not dividing k: scale the form by c/gcd(k, c)
             * first (the bound is divided back, rounding inwards), so the
             * answer does not depend on how the form was scaled */
            int64_t c = L->t[i].x->args[1]->u.ival, f = c / ir_gcd64(L->t[i].c, c);
            if (f > 1 && (__builtin_mul_overflow(scale, f, &scale) || scale > (1 << 20) ||
                          !(L = ir_lin_comb(S, f, L, 0, &ir_lin_zero))))
                return have;
        }
        const Lin *by = elim_term(S, &L->t[i], cl, upper);
        L = ir_lin_replace(S, L, i, by);
        if (!L)
            return have;
        split = by && branchable(by);
    }
    ok = numeric_bound(S, L, upper, &v);
    keep_best(upper, ok, scaled_back(v, scale, upper), &have, out);
    return have;
}

/* The best bound (least upper or greatest lower) of L that the context
 * proves; false when none is known. */
bool ir_lin_bound(Simp *S, const Lin *L, bool upper, int64_t *out) {
    if (L->n == 0) {
        *out = L->c0;
        return true;
    }
    bool saw_div = false, have = false, ok;
    int64_t v = 0;
    ok = bound_in_order(S, L, upper, 0, &saw_div, &v);
    keep_best(upper, ok, v, &have, out);
    if (saw_div) {
        ok = bound_in_order(S, L, upper, 1, &saw_div, &v);
        keep_best(upper, ok, v, &have, out);
        /* loop variables, then divisions, then UF values: a UF value
         * that the loops' extents bring in as c*(E/c) cancels with E
         * before E is bounded by its range (the full tiles of the last
         * block of a split of len[b]: lo*6 + li + len/48*48 < len) */
        ok = bound_in_order(S, L, upper, 2, &saw_div, &v);
        keep_best(upper, ok, v, &have, out);
    }
    return have;
}

/* ---- numeric intervals of atoms ---- */

static Ival ival_none(void) {
    return (Ival){false, 0, 0};
}

static Ival ival_make(int64_t lo, int64_t hi) {
    return (Ival){true, lo, hi};
}

static Ival ival_mul(Ival a, Ival b) {
    int64_t c[4];
    if (!a.ok || !b.ok || __builtin_mul_overflow(a.lo, b.lo, &c[0]) ||
        __builtin_mul_overflow(a.lo, b.hi, &c[1]) || __builtin_mul_overflow(a.hi, b.lo, &c[2]) ||
        __builtin_mul_overflow(a.hi, b.hi, &c[3]))
        return ival_none();
    Ival r = ival_make(c[0], c[0]);
    for (int i = 1; i < 4; i++) {
        r.lo = c[i] < r.lo ? c[i] : r.lo;
        r.hi = c[i] > r.hi ? c[i] : r.hi;
    }
    return r;
}

/* Quotient of intervals, the divisor not containing 0. Truncating and
 * floor division are both monotone in each operand on such a box, so the
 * extremes are at its corners. */
static Ival ival_div(Ival a, Ival b, bool floor) {
    if (!a.ok || !b.ok || (b.lo <= 0 && b.hi >= 0))
        return ival_none();
    int64_t xs[2] = {a.lo, a.hi}, ys[2] = {b.lo, b.hi};
    Ival r = {false, 0, 0};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            if (xs[i] == INT64_MIN && ys[j] == -1)
                return ival_none();
            int64_t q = xs[i] / ys[j];
            if (floor && xs[i] % ys[j] != 0 && ((xs[i] < 0) != (ys[j] < 0)))
                q--;
            if (!r.ok || q < r.lo)
                r.lo = q;
            if (!r.ok || q > r.hi)
                r.hi = q;
            r.ok = true;
        }
    return r;
}

/* Remainder of intervals, the divisor not containing 0. */
static Ival ival_mod(Ival a, Ival b, bool floor) {
    if (!a.ok || !b.ok || (b.lo <= 0 && b.hi >= 0) || b.lo == INT64_MIN)
        return ival_none();
    int64_t mb = (b.hi > -b.lo ? b.hi : -b.lo) - 1; /* largest |remainder| */
    if (b.lo == b.hi && b.lo > 0 && (a.lo >= 0 || floor) &&
        ir_fdiv(a.lo, b.lo) == ir_fdiv(a.hi, b.lo)) /* one period: exact */
        return ival_make(fmod_pos(a.lo, b.lo), fmod_pos(a.hi, b.lo));
    if (floor) {
        if (b.lo > 0)
            return a.lo >= 0 ? ival_make(0, a.hi < mb ? a.hi : mb) : ival_make(0, mb);
        return a.hi <= 0 ? ival_make(a.lo > -mb ? a.lo : -mb, 0) : ival_make(-mb, 0);
    }
    /* C remainder: the dividend's sign, magnitude below |divisor| */
    int64_t lo = a.lo > 0 ? 0 : (a.lo > -mb ? a.lo : -mb);
    int64_t hi = a.hi < 0 ? 0 : (a.hi < mb ? a.hi : mb);
    return ival_make(lo, hi);
}

/* The interval of one atom from its kind (no symbolic reasoning; sums are
 * never atoms, except where their linear form overflowed: unknown). */
static Ival atom_ival(Simp *S, Expr *x) {
    Ival a, b;
    switch (x->kind) {
    case EX_CONST_INT:
        return ival_make(x->u.ival, x->u.ival);
    case EX_SIZE:
        return ival_make(x->u.size->lo, x->u.size->hi);
    case EX_VAR: {
        Binding *bd = binding_of(S, x->u.axis);
        if (bd && bd->value)
            return ir_ival_of(S, bd->value);
        if (bd && bd->opaque)
            return bd->known ? ival_make(bd->lo, bd->hi) : ival_none();
        Expr *ext = var_extent(S, x->u.axis);
        if (!ext)
            return ival_none();
        a = ir_ival_of(S, ext);
        return a.ok && a.hi >= 1 ? ival_make(0, a.hi - 1) : ival_none();
    }
    case EX_UFCALL:
    case EX_LOAD: {
        if (x->u.buf->vfuse_key) { /* a fused loop's row starts or row map */
            /* (element counts: a region over all the fused rows is sized by them) */
            a = x->u.buf->vfuse_hi ? ir_ival_of(S, x->u.buf->vfuse_hi) : ival_none();
            return ival_make(0, a.ok ? a.hi : INT64_MAX / 4);
        }
        Ufun *f = uf_of(x);
        if (!f || !f->lo_dom || !f->hi_dom)
            return ival_none();
        a = ir_ival_of(S, ir_simp(S, f->lo_dom));
        b = ir_ival_of(S, ir_simp(S, f->hi_dom));
        return a.ok && b.ok ? ival_make(a.lo, b.hi) : ival_none();
    }
    case EX_CAST:
        if (x->args[0]->dtype == RV_BOOL)
            return ival_make(0, 1);
        if (!is_int_expr(x->args[0]))
            return ival_none();
        a = ir_ival_of(S, x->args[0]);
        if (a.ok && x->dtype == RV_I32 && (!ir_dtype_fits(RV_I32, a.lo) || !ir_dtype_fits(RV_I32, a.hi)))
            return ival_make(INT32_MIN, INT32_MAX);
        return a;
    case EX_MUL:
        return ival_mul(ir_ival_of(S, x->args[0]), ir_ival_of(S, x->args[1]));
    case EX_DIV:
    case EX_FLOORDIV:
        return ival_div(ir_ival_of(S, x->args[0]), ir_ival_of(S, x->args[1]),
                        x->kind == EX_FLOORDIV);
    case EX_MOD:
    case EX_FLOORMOD:
        return ival_mod(ir_ival_of(S, x->args[0]), ir_ival_of(S, x->args[1]),
                        x->kind == EX_FLOORMOD);
    case EX_MIN:
    case EX_MAX:
    case EX_SELECT: {
        int k = x->kind == EX_SELECT;
        a = ir_ival_of(S, x->args[k]);
        b = ir_ival_of(S, x->args[k + 1]);
        if (!a.ok || !b.ok)
            return ival_none();
        if (x->kind == EX_MIN)
            return ival_make(a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi);
        if (x->kind == EX_MAX)
            return ival_make(a.lo > b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi);
        return ival_make(a.lo < b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi);
    }
    case EX_ABS:
        a = ir_ival_of(S, x->args[0]);
        if (!a.ok || a.lo == INT64_MIN)
            return ival_none();
        if (a.lo >= 0)
            return a;
        if (a.hi <= 0)
            return ival_make(-a.hi, -a.lo);
        return ival_make(0, -a.lo > a.hi ? -a.lo : a.hi);
    default:
        return ival_none();
    }
}

/* The interval of an integer expression in the current scope: symbolic
 * elimination over its linear form, or the atom rules for an atom. */
Ival ir_ival_of(Simp *S, Expr *e) {
    if (!is_int_expr(e))
        return ival_none();
    Ival *memo = ptrmap_get(&S->ivals, e);
    if (memo)
        return *memo;
    memo = arena_alloc(S->scratch, sizeof(Ival));
    ptrmap_put(&S->ivals, e, memo); /* "unknown" while in progress: no cycles */
    int depth = S->branch_depth;    /* a memoized answer must not depend on */
    S->branch_depth = 0;            /* where it was first asked */
    const Lin *L = ir_lin_of(S, e);
    Ival r;
    if (L->n == 1 && L->c0 == 0 && L->t[0].c == 1 && L->t[0].x == e) {
        r = atom_ival(S, e);
    } else {
        r.ok = ir_lin_bound(S, L, false, &r.lo) && ir_lin_bound(S, L, true, &r.hi);
    }
    if (r.ok && r.lo > r.hi) /* an empty range: only in code that never runs */
        r.ok = false;
    S->branch_depth = depth;
    memo = ptrmap_get(&S->ivals, e); /* the table may have grown */
    *memo = r;
    return r;
}
