/*
 * expr.c — construction, hash-consing and typing of scalar expressions.
 *
 * Every expression node is built here and nowhere else. A node is looked up
 * in the module's hash-cons table by (kind, dtype, payload, operand
 * pointers) before it is allocated, so structurally equal expressions are
 * the same pointer: analyses memoize on pointers and equality of extents is
 * pointer equality.
 *
 * The constructors are also the type checker: they apply the typing rules
 * of ir.h (literal adaptation, int-to-float promotion with explicit CAST
 * nodes, BOOL for comparisons) and reject ill-typed operands with a message
 * in the thread-local last error, returning NULL. A NULL operand yields NULL
 * without a new message, so a front end reports only the first problem.
 */
#include <math.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/layout.h"

// clang-format off
const ExprInfo ir_expr_info[EX_COUNT] = {
#define EXPR(k, text, arity, prec, flags) {#k, text, arity, PREC_##prec, flags},
#include "ops.def"
#undef EXPR
};
// clang-format on

bool ir_is_int(rv_dtype t) {
    return t == RV_I32 || t == RV_I64;
}

bool ir_is_float(rv_dtype t) {
    return t == RV_F32 || t == RV_F64;
}

bool ir_is_const_int(const Expr *e, int64_t *v) {
    if (!e || e->kind != EX_CONST_INT)
        return false;
    if (v)
        *v = e->u.ival;
    return true;
}

/* ---- the hash-cons table ---- */

/* The payload of a candidate node, in one shape for hashing and comparing. */
typedef struct Payload {
    int64_t ival;
    double fval;
    void *ptr; /* size, axis, tensor or uf */
    rv_reduce_kind rk;
    int naxes;
    Axis *const *axes;
} Payload;

static uint64_t node_hash(ExprKind k, rv_dtype t, int n, Expr *const *args, const Payload *p) {
    uint64_t h = hash_combine((uint64_t)k * 0x9e3779b97f4a7c15ull, (uint64_t)t);
    switch (k) {
    case EX_CONST_INT:
        h = hash_combine(h, (uint64_t)p->ival);
        break;
    case EX_CONST_FLOAT: {
        uint64_t bits;
        memcpy(&bits, &p->fval, sizeof bits);
        h = hash_combine(h, bits);
        break;
    }
    case EX_REDUCE:
        h = hash_combine(hash_combine(h, (uint64_t)p->rk), (uint64_t)p->naxes);
        for (int i = 0; i < p->naxes; i++)
            h = hash_combine(h, (uint64_t)(uintptr_t)p->axes[i]);
        break;
    case EX_SIZE:
    case EX_VAR:
    case EX_READ:
    case EX_UFCALL:
    case EX_LOAD:
        h = hash_combine(h, (uint64_t)(uintptr_t)p->ptr);
        break;
    default:
        break;
    }
    for (int i = 0; i < n; i++)
        h = hash_combine(h, (uint64_t)(uintptr_t)args[i]);
    return h;
}

static bool node_equal(const Expr *e, ExprKind k, rv_dtype t, int n, Expr *const *args,
                       const Payload *p) {
    if (e->kind != k || e->dtype != t || e->n != n)
        return false;
    for (int i = 0; i < n; i++)
        if (e->args[i] != args[i])
            return false;
    switch (k) {
    case EX_CONST_INT:
        return e->u.ival == p->ival;
    case EX_CONST_FLOAT:
        /* bitwise, so -0.0 and 0.0 (and NaN payloads) stay distinct */
        return memcmp(&e->u.fval, &p->fval, sizeof(double)) == 0;
    case EX_SIZE:
        return (void *)e->u.size == p->ptr;
    case EX_VAR:
        return (void *)e->u.axis == p->ptr;
    case EX_READ:
        return (void *)e->u.tensor == p->ptr;
    case EX_UFCALL:
        return (void *)e->u.uf == p->ptr;
    case EX_LOAD:
        return (void *)e->u.buf == p->ptr;
    case EX_REDUCE:
        if (e->u.red.rk != p->rk || e->u.red.naxes != p->naxes)
            return false;
        for (int i = 0; i < p->naxes; i++)
            if (e->u.red.axes[i] != p->axes[i])
                return false;
        return true;
    default:
        return true;
    }
}

static void table_grow(Module *m) {
    int cap = m->table_cap ? 2 * m->table_cap : 1024;
    Expr **t = base_xcalloc((size_t)cap, sizeof(Expr *));
    for (int i = 0; i < m->table_cap; i++) {
        Expr *e = m->table[i];
        if (!e)
            continue;
        int j = (int)(e->hash & (uint32_t)(cap - 1));
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = e;
    }
    base_free(m->table);
    m->table = t;
    m->table_cap = cap;
}

/* Finds or creates the node. */
static Expr *make(Module *m, ExprKind k, rv_dtype t, int n, Expr *const *args, const Payload *p) {
    if (2 * (m->table_len + 1) > m->table_cap)
        table_grow(m);
    uint32_t h = (uint32_t)node_hash(k, t, n, args, p);
    int mask = m->table_cap - 1;
    int j = (int)(h & (uint32_t)mask);
    for (; m->table[j]; j = (j + 1) & mask) {
        Expr *e = m->table[j];
        if (e->hash == h && node_equal(e, k, t, n, args, p))
            return e;
    }
    Expr *e = arena_alloc(m->arena, sizeof(Expr) + (size_t)n * sizeof(Expr *));
    e->kind = k;
    e->dtype = t;
    e->n = n;
    e->hash = h;
    e->id = m->n_exprs++;
    for (int i = 0; i < n; i++)
        e->args[i] = args[i];
    switch (k) {
    case EX_CONST_INT:
        e->u.ival = p->ival;
        break;
    case EX_CONST_FLOAT:
        e->u.fval = p->fval;
        break;
    case EX_SIZE:
        e->u.size = p->ptr;
        break;
    case EX_VAR:
        e->u.axis = p->ptr;
        break;
    case EX_READ:
        e->u.tensor = p->ptr;
        break;
    case EX_UFCALL:
        e->u.uf = p->ptr;
        break;
    case EX_LOAD:
        e->u.buf = p->ptr;
        break;
    case EX_REDUCE:
        e->u.red.rk = p->rk;
        e->u.red.naxes = p->naxes;
        e->u.red.axes = arena_memdup(m->arena, p->axes, (size_t)p->naxes * sizeof(Axis *));
        break;
    default:
        break;
    }
    m->table[j] = e;
    m->table_len++;
    return e;
}

static Expr *make0(Module *m, ExprKind k, rv_dtype t, int n, Expr *const *args) {
    Payload p = {0};
    return make(m, k, t, n, args, &p);
}

/* ---- leaves ---- */

Expr *ir_const_int(Module *m, rv_dtype t, int64_t v) {
    RV_ASSERT(ir_is_int(t) || t == RV_BOOL);
    Payload p = {.ival = v};
    return make(m, EX_CONST_INT, t, 0, NULL, &p);
}

Expr *ir_int(Module *m, int64_t v) {
    return ir_const_int(m, RV_I64, v);
}

Expr *ir_bool(Module *m, bool v) {
    return ir_const_int(m, RV_BOOL, v ? 1 : 0);
}

Expr *ir_float(Module *m, rv_dtype t, double v) {
    RV_ASSERT(ir_is_float(t));
    if (t == RV_F32)
        v = (double)(float)v;
    Payload p = {.fval = v};
    return make(m, EX_CONST_FLOAT, t, 0, NULL, &p);
}

Expr *ir_size(Module *m, Size *s) {
    if (!s)
        return NULL;
    Payload p = {.ptr = s};
    return make(m, EX_SIZE, RV_I64, 0, NULL, &p);
}

Expr *ir_var(Module *m, Axis *a) {
    if (!a)
        return NULL;
    Payload p = {.ptr = a};
    return make(m, EX_VAR, RV_I64, 0, NULL, &p);
}

/* ---- typing helpers ---- */

static bool is_const(const Expr *e) {
    return e->kind == EX_CONST_INT || e->kind == EX_CONST_FLOAT;
}

static bool fits_i32(int64_t v) {
    return v >= INT32_MIN && v <= INT32_MAX;
}

/* A constant re-typed to `t` (literal adaptation), exactly. An integer
 * that does not fit an i32 partner is an error rather than a constant
 * outside its dtype, which a cast would print as another value and C
 * would compute with in another width than the interpreter. */
static Expr *retype_const(Module *m, Expr *e, rv_dtype t) {
    if (e->dtype == t)
        return e;
    if (ir_is_float(t))
        return ir_float(m, t, e->kind == EX_CONST_INT ? (double)e->u.ival : e->u.fval);
    if (t == RV_I32 && !fits_i32(e->u.ival)) {
        base_error(RV_ERR_TYPE,
                   "the constant %lld does not fit the i32 it adapts to; cast the i32 operand "
                   "with i64(...) to compute in i64",
                   (long long)e->u.ival);
        return NULL;
    }
    return ir_const_int(m, t, e->u.ival);
}

Expr *ir_cast(Module *m, rv_dtype t, Expr *a) {
    if (!a)
        return NULL;
    if (a->dtype == t)
        return a;
    if (t == RV_BOOL) {
        base_error(RV_ERR_TYPE, "cannot cast %s to bool; compare with 0 instead",
                   rv_dtype_name(a->dtype));
        return NULL;
    }
    if (a->kind == EX_CONST_INT && a->dtype != RV_BOOL) {
        if (ir_is_float(t))
            return ir_float(m, t, (double)a->u.ival);
        return ir_const_int(m, t, t == RV_I32 ? (int64_t)(int32_t)a->u.ival : a->u.ival);
    }
    if (a->kind == EX_CONST_FLOAT && ir_is_float(t))
        return ir_float(m, t, a->u.fval);
    Expr *args[1] = {a};
    return make0(m, EX_CAST, t, 1, args);
}

static int rank(rv_dtype t) {
    switch (t) {
    case RV_I32:
        return 1;
    case RV_I64:
        return 2;
    case RV_F32:
        return 3;
    case RV_F64:
        return 4;
    default:
        return 0;
    }
}

/* Brings two numeric operands to one dtype: constants adapt to a
 * non-constant partner; otherwise the wider kind wins (float over int,
 * 64 over 32 bits). Returns false (with a message) for BOOL operands. */
static bool unify(Module *m, const char *op, Expr **pa, Expr **pb) {
    Expr *a = *pa, *b = *pb;
    if (a->dtype == RV_BOOL || b->dtype == RV_BOOL) {
        base_error(RV_ERR_TYPE, "operator '%s' needs numbers, got %s and %s", op,
                   rv_dtype_name(a->dtype), rv_dtype_name(b->dtype));
        return false;
    }
    if (a->dtype == b->dtype)
        return true;
    bool ca = is_const(a), cb = is_const(b);
    if (ca && !cb && (ir_is_float(b->dtype) || a->kind == EX_CONST_INT)) {
        *pa = retype_const(m, a, b->dtype);
        return *pa != NULL;
    }
    if (cb && !ca && (ir_is_float(a->dtype) || b->kind == EX_CONST_INT)) {
        *pb = retype_const(m, b, a->dtype);
        return *pb != NULL;
    }
    rv_dtype t = rank(a->dtype) >= rank(b->dtype) ? a->dtype : b->dtype;
    *pa = ir_cast(m, t, a);
    *pb = ir_cast(m, t, b);
    return *pa && *pb;
}

/* Folds integer arithmetic on two constants (keeps printed IR small and
 * makes extents like 16*4 equal to 64 by pointer). */
static bool fold_int(ExprKind k, int64_t x, int64_t y, int64_t *r) {
    switch (k) {
    case EX_ADD:
        return !__builtin_add_overflow(x, y, r);
    case EX_SUB:
        return !__builtin_sub_overflow(x, y, r);
    case EX_MUL:
        return !__builtin_mul_overflow(x, y, r);
    case EX_MIN:
        *r = x < y ? x : y;
        return true;
    case EX_MAX:
        *r = x > y ? x : y;
        return true;
    default:
        return false; /* division by a constant zero etc. stays visible */
    }
}

Expr *ir_unary(Module *m, ExprKind k, Expr *a) {
    if (!a)
        return NULL;
    const ExprInfo *info = &ir_expr_info[k];
    RV_ASSERT(info->arity == 1 && k != EX_CAST && k != EX_REDUCE);
    if (k == EX_NOT) {
        if (a->dtype != RV_BOOL) {
            base_error(RV_ERR_TYPE, "operator '!' needs a bool, got %s", rv_dtype_name(a->dtype));
            return NULL;
        }
        if (a->kind == EX_CONST_INT)
            return ir_bool(m, !a->u.ival);
    } else if (info->flags & F_MATH) {
        if (a->dtype == RV_BOOL) {
            base_error(RV_ERR_TYPE, "'%s' needs a number, got bool", info->text);
            return NULL;
        }
        if (!ir_is_float(a->dtype))
            a = ir_cast(m, RV_F32, a);
    } else { /* NEG, ABS */
        if (a->dtype == RV_BOOL) {
            base_error(RV_ERR_TYPE, "'%s' needs a number, got bool", info->text);
            return NULL;
        }
        /* folded only when the result fits the dtype (-INT32_MIN does not) */
        if (a->kind == EX_CONST_INT && a->u.ival != INT64_MIN &&
            (a->dtype != RV_I32 || a->u.ival != INT32_MIN))
            return ir_const_int(m, a->dtype,
                                k == EX_NEG ? -a->u.ival : (a->u.ival < 0 ? -a->u.ival : a->u.ival));
        if (a->kind == EX_CONST_FLOAT)
            return ir_float(m, a->dtype, k == EX_NEG ? -a->u.fval : fabs(a->u.fval));
    }
    Expr *args[1] = {a};
    return make0(m, k, a->dtype == RV_BOOL ? RV_BOOL : a->dtype, 1, args);
}

Expr *ir_binary(Module *m, ExprKind k, Expr *a, Expr *b) {
    if (!a || !b)
        return NULL;
    const ExprInfo *info = &ir_expr_info[k];
    RV_ASSERT(info->arity == 2);
    rv_dtype result;
    if (info->flags & F_LOGIC) {
        if (a->dtype != RV_BOOL || b->dtype != RV_BOOL) {
            base_error(RV_ERR_TYPE, "operator '%s' needs bools, got %s and %s", info->text,
                       rv_dtype_name(a->dtype), rv_dtype_name(b->dtype));
            return NULL;
        }
        result = RV_BOOL;
    } else if ((k == EX_EQ || k == EX_NE) && a->dtype == RV_BOOL && b->dtype == RV_BOOL) {
        result = RV_BOOL;
    } else {
        if (!unify(m, info->text, &a, &b))
            return NULL;
        if ((k == EX_MOD || k == EX_FLOORDIV || k == EX_FLOORMOD) && !ir_is_int(a->dtype)) {
            base_error(RV_ERR_TYPE, "operator '%s' needs integers, got %s", info->text,
                       rv_dtype_name(a->dtype));
            return NULL;
        }
        if (k == EX_POW && !ir_is_float(a->dtype)) {
            a = ir_cast(m, RV_F32, a);
            b = ir_cast(m, RV_F32, b);
        }
        result = (info->flags & F_CMP) ? RV_BOOL : a->dtype;
    }
    int64_t x, y, r;
    if (ir_is_const_int(a, &x) && ir_is_const_int(b, &y) && result != RV_BOOL &&
        fold_int(k, x, y, &r) && (result != RV_I32 || fits_i32(r)))
        return ir_const_int(m, result, r);
    Expr *args[2] = {a, b};
    return make0(m, k, result, 2, args);
}

Expr *ir_select(Module *m, Expr *c, Expr *a, Expr *b) {
    if (!c || !a || !b)
        return NULL;
    if (c->dtype != RV_BOOL) {
        base_error(RV_ERR_TYPE, "the condition of select must be a bool, got %s",
                   rv_dtype_name(c->dtype));
        return NULL;
    }
    if (a->dtype != b->dtype && !unify(m, "select", &a, &b))
        return NULL;
    Expr *args[3] = {c, a, b};
    return make0(m, EX_SELECT, a->dtype, 3, args);
}

/* ---- interval bounds over sizes, UF ranges and axis extents ---- */

static bool mul_bounds(int64_t a0, int64_t a1, int64_t b0, int64_t b1, int64_t *lo, int64_t *hi) {
    int64_t c[4];
    if (__builtin_mul_overflow(a0, b0, &c[0]) || __builtin_mul_overflow(a0, b1, &c[1]) ||
        __builtin_mul_overflow(a1, b0, &c[2]) || __builtin_mul_overflow(a1, b1, &c[3]))
        return false;
    *lo = *hi = c[0];
    for (int i = 1; i < 4; i++) {
        if (c[i] < *lo)
            *lo = c[i];
        if (c[i] > *hi)
            *hi = c[i];
    }
    return true;
}

/* An axis with extent range [.., a1] takes the values 0..a1-1; none when
 * a1 < 1. An expression over a variable with no value has no value
 * either: it is never evaluated (a level below an empty one, the body of
 * an empty loop), so EMPTY wins over UNKNOWN. */
IrRange ir_int_range(const Expr *e, int64_t *lo, int64_t *hi) {
    int64_t a0, a1, b0, b1;
    IrRange ra, rb;
    switch (e->kind) {
    case EX_CONST_INT:
        *lo = *hi = e->u.ival;
        return IR_RANGE_KNOWN;
    case EX_SIZE:
        *lo = e->u.size->lo;
        *hi = e->u.size->hi;
        return IR_RANGE_KNOWN;
    case EX_VAR: {
        const Axis *ax = e->u.axis;
        if (!ax->extent || (ra = ir_int_range(ax->extent, &a0, &a1)) != IR_RANGE_KNOWN)
            return ax->extent ? ra : IR_RANGE_UNKNOWN;
        if (a1 < 1)
            return IR_RANGE_EMPTY;
        *lo = 0;
        *hi = a1 - 1;
        return IR_RANGE_KNOWN;
    }
    case EX_UFCALL: {
        const Ufun *f = e->u.uf;
        for (int i = 0; i < e->n; i++)
            if (ir_int_range(e->args[i], &a0, &a1) == IR_RANGE_EMPTY)
                return IR_RANGE_EMPTY;
        if (!f->lo || !f->hi || !ir_int_bounds(f->lo, &a0, &a1) || !ir_int_bounds(f->hi, &b0, &b1))
            return IR_RANGE_UNKNOWN;
        *lo = a0;
        *hi = b1;
        return IR_RANGE_KNOWN;
    }
    case EX_CAST:
        if (!ir_is_int(e->dtype) || !ir_is_int(e->args[0]->dtype))
            return IR_RANGE_UNKNOWN;
        return ir_int_range(e->args[0], lo, hi);
    case EX_NEG:
    case EX_ABS:
        if ((ra = ir_int_range(e->args[0], &a0, &a1)) != IR_RANGE_KNOWN)
            return ra;
        if (a0 == INT64_MIN)
            return IR_RANGE_UNKNOWN;
        if (e->kind == EX_NEG || a1 <= 0) {
            *lo = -a1;
            *hi = -a0;
        } else {
            *lo = a0 >= 0 ? a0 : 0;
            *hi = a1 > -a0 ? a1 : -a0;
        }
        return IR_RANGE_KNOWN;
    case EX_SELECT: {
        int64_t c0, c1;
        IrRange rc = ir_int_range(e->args[0], &c0, &c1);
        ra = ir_int_range(e->args[1], &a0, &a1);
        rb = ir_int_range(e->args[2], &b0, &b1);
        if (rc == IR_RANGE_EMPTY || ra == IR_RANGE_EMPTY || rb == IR_RANGE_EMPTY)
            return IR_RANGE_EMPTY;
        if (ra != IR_RANGE_KNOWN || rb != IR_RANGE_KNOWN)
            return IR_RANGE_UNKNOWN;
        *lo = a0 < b0 ? a0 : b0;
        *hi = a1 > b1 ? a1 : b1;
        return IR_RANGE_KNOWN;
    }
    case EX_DIV:
    case EX_FLOORDIV:
    case EX_MOD:
    case EX_FLOORMOD:
        /* by a positive divisor only: the quotient is monotone in each
         * operand there, so its extremes are at the corners */
        ra = ir_int_range(e->args[0], &a0, &a1);
        rb = ir_int_range(e->args[1], &b0, &b1);
        if (ra == IR_RANGE_EMPTY || rb == IR_RANGE_EMPTY)
            return IR_RANGE_EMPTY;
        if (ra != IR_RANGE_KNOWN || rb != IR_RANGE_KNOWN || b0 <= 0)
            return IR_RANGE_UNKNOWN;
        if (e->kind == EX_FLOORMOD || (e->kind == EX_MOD && a0 >= 0)) {
            *lo = 0;
            *hi = a0 >= 0 && a1 < b1 - 1 ? a1 : b1 - 1;
            return IR_RANGE_KNOWN;
        }
        if (e->kind == EX_MOD) {
            *lo = -(b1 - 1);
            *hi = a1 > 0 ? b1 - 1 : 0;
            return IR_RANGE_KNOWN;
        }
        {
            int64_t q[4];
            ir_int_arith(e->kind, a0, b0, &q[0]);
            ir_int_arith(e->kind, a0, b1, &q[1]);
            ir_int_arith(e->kind, a1, b0, &q[2]);
            ir_int_arith(e->kind, a1, b1, &q[3]);
            *lo = *hi = q[0];
            for (int i = 1; i < 4; i++) {
                *lo = q[i] < *lo ? q[i] : *lo;
                *hi = q[i] > *hi ? q[i] : *hi;
            }
        }
        return IR_RANGE_KNOWN;
    case EX_ADD:
    case EX_SUB:
    case EX_MUL:
    case EX_MIN:
    case EX_MAX:
        ra = ir_int_range(e->args[0], &a0, &a1);
        rb = ir_int_range(e->args[1], &b0, &b1);
        if (ra == IR_RANGE_EMPTY || rb == IR_RANGE_EMPTY)
            return IR_RANGE_EMPTY;
        if (e->kind == EX_MIN && (ra == IR_RANGE_KNOWN) != (rb == IR_RANGE_KNOWN)) {
            /* min(unknown, x) <= x: bounded above (min(len[b] / K, N)) */
            *lo = INT64_MIN;
            *hi = ra == IR_RANGE_KNOWN ? a1 : b1;
            return IR_RANGE_KNOWN;
        }
        if (ra != IR_RANGE_KNOWN || rb != IR_RANGE_KNOWN)
            return IR_RANGE_UNKNOWN;
        switch (e->kind) {
        case EX_ADD:
            return !__builtin_add_overflow(a0, b0, lo) && !__builtin_add_overflow(a1, b1, hi)
                       ? IR_RANGE_KNOWN
                       : IR_RANGE_UNKNOWN;
        case EX_SUB:
            return !__builtin_sub_overflow(a0, b1, lo) && !__builtin_sub_overflow(a1, b0, hi)
                       ? IR_RANGE_KNOWN
                       : IR_RANGE_UNKNOWN;
        case EX_MUL:
            return mul_bounds(a0, a1, b0, b1, lo, hi) ? IR_RANGE_KNOWN : IR_RANGE_UNKNOWN;
        case EX_MIN:
            *lo = a0 < b0 ? a0 : b0;
            *hi = a1 < b1 ? a1 : b1;
            return IR_RANGE_KNOWN;
        default:
            *lo = a0 > b0 ? a0 : b0;
            *hi = a1 > b1 ? a1 : b1;
            return IR_RANGE_KNOWN;
        }
    default:
        return IR_RANGE_UNKNOWN;
    }
}

bool ir_int_bounds(const Expr *e, int64_t *lo, int64_t *hi) {
    return ir_int_range(e, lo, hi) == IR_RANGE_KNOWN;
}

static bool uses_any_axis(const Expr *e, Axis *const *axes, int n) {
    for (int i = 0; i < n; i++)
        if (ir_uses_axis(e, axes[i]))
            return true;
    return false;
}

/* Linear operations, min/max and widening integer casts are bounded
 * symbolically (n - 1 over n < N is at most N - 2, an expression over
 * sizes); anything else that uses the axes falls back to a constant from
 * ir_int_bounds. */
Expr *ir_bound_over_axes(Module *m, Expr *e, Axis *const *axes, int n, bool upper) {
    if (!uses_any_axis(e, axes, n))
        return e;
    Expr *a = NULL, *b = NULL;
    int64_t c, lo, hi;
    switch (e->kind) {
    case EX_VAR: /* one of the axes: 0 <= v <= extent - 1 */
        if (!upper)
            return ir_const_int(m, e->dtype, 0);
        a = e->u.axis->extent ? ir_bound_over_axes(m, e->u.axis->extent, axes, n, true) : NULL;
        return a ? ir_binary(m, EX_SUB, a, ir_int(m, 1)) : NULL;
    case EX_CAST:
        if (!ir_is_int(e->dtype) || !ir_is_int(e->args[0]->dtype) ||
            (e->dtype == RV_I32 && e->args[0]->dtype != RV_I32))
            break; /* a narrowing cast may wrap */
        a = ir_bound_over_axes(m, e->args[0], axes, n, upper);
        return a ? ir_cast(m, e->dtype, a) : NULL;
    case EX_NEG:
        a = ir_bound_over_axes(m, e->args[0], axes, n, !upper);
        return a ? ir_unary(m, EX_NEG, a) : NULL;
    case EX_ADD:
    case EX_SUB:
    case EX_MIN:
    case EX_MAX: /* monotone in both operands (SUB: decreasing in the second) */
        a = ir_bound_over_axes(m, e->args[0], axes, n, upper);
        b = ir_bound_over_axes(m, e->args[1], axes, n, e->kind == EX_SUB ? !upper : upper);
        return a && b ? ir_binary(m, e->kind, a, b) : NULL;
    case EX_UFCALL: /* another UF's values, over its whole domain */
        a = upper ? e->u.uf->hi_dom : e->u.uf->lo_dom;
        return a ? ir_cast(m, e->dtype, a) : NULL;
    case EX_MUL:
        for (int i = 0; i < 2; i++)
            if (ir_is_const_int(e->args[i], &c)) {
                a = ir_bound_over_axes(m, e->args[1 - i], axes, n, c >= 0 ? upper : !upper);
                return a ? ir_binary(m, EX_MUL, e->args[i], a) : NULL;
            }
        break;
    default:
        break;
    }
    if (ir_is_int(e->dtype) && ir_int_bounds(e, &lo, &hi))
        return ir_const_int(m, e->dtype, upper ? hi : lo);
    return NULL;
}

/* ---- reads, UF calls, reductions ---- */

/* Indices and UF arguments are i64; i32 operands get a CAST. */
static Expr *as_index(Module *m, Expr *e, const char *what, int i) {
    if (!ir_is_int(e->dtype)) {
        base_error(RV_ERR_TYPE, "%s %d must be an integer, got %s", what, i,
                   rv_dtype_name(e->dtype));
        return NULL;
    }
    return ir_cast(m, RV_I64, e);
}

Expr *ir_read(Module *m, Tensor *t, int n, Expr *const *idx) {
    if (!t)
        return NULL;
    for (int i = 0; i < n; i++)
        if (!idx[i])
            return NULL;
    if (n != t->ndim) {
        base_error(RV_ERR_TYPE, "tensor '%s' has %d dimension%s, indexed with %d", t->name,
                   t->ndim, t->ndim == 1 ? "" : "s", n);
        return NULL;
    }
    Expr *args[RV_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        if (!(args[i] = as_index(m, idx[i], "index", i)))
            return NULL;
        int64_t v, lo, hi;
        if (ir_is_const_int(args[i], &v)) {
            const Expr *ext = t->axes[i]->extent;
            if (v < 0 || (ext && ir_int_bounds(ext, &lo, &hi) && v >= hi)) {
                base_error(RV_ERR_TYPE,
                           "constant index %lld is out of range for dimension %d of '%s' "
                           "(extent at most %lld)",
                           (long long)v, i, t->name, ext && ir_int_bounds(ext, &lo, &hi) ? (long long)hi : 0LL);
                return NULL;
            }
        }
    }
    Payload p = {.ptr = t};
    return make(m, EX_READ, t->dtype, n, args, &p);
}

/* A UF argument is provably outside the domain when it is a constant beyond
 * the domain's largest extent. An axis whose extent exceeds the domain is
 * not judged here: in a branch of a conditional operation the call runs
 * only where the condition holds (`if i < N then len[i] else 0`), which a
 * constructor does not see; the language checker judges it under the
 * branch's guard (lang/check.c, ranges.c) and the run-time checks the rest. */
static bool provably_outside(Expr *arg, Expr *domain_extent) {
    int64_t v, lo, hi;
    if (ir_is_const_int(arg, &v))
        return v < 0 || (ir_int_bounds(domain_extent, &lo, &hi) && v >= hi);
    return false;
}

Expr *ir_ufcall(Module *m, Ufun *f, int n, Expr *const *args_in) {
    if (!f)
        return NULL;
    for (int i = 0; i < n; i++)
        if (!args_in[i])
            return NULL;
    if (n != f->nargs) {
        base_error(RV_ERR_TYPE, "ufun '%s' takes %d argument%s, given %d", f->name, f->nargs,
                   f->nargs == 1 ? "" : "s", n);
        return NULL;
    }
    Expr *args[RV_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        if (!(args[i] = as_index(m, args_in[i], "argument", i)))
            return NULL;
        Expr *dom = f->args[i]->extent;
        if (dom && provably_outside(args[i], dom)) {
            char *s = ir_expr_str(args[i]), *d = ir_expr_str(dom);
            base_error(RV_ERR_TYPE, "ufun '%s' used outside its domain: argument %d is %s, "
                       "domain is %s < %s", f->name, i, s, f->args[i]->name, d);
            base_free(s);
            base_free(d);
            return NULL;
        }
    }
    Payload p = {.ptr = f};
    return make(m, EX_UFCALL, RV_I64, n, args, &p);
}

Expr *ir_reduce(Module *m, rv_reduce_kind rk, int naxes, Axis *const *axes, Expr *body) {
    if (!body)
        return NULL;
    static const char *const names[] = {"sum", "max", "min", "argmax"};
    _Static_assert(RV_COUNT(names) == RV_REDUCE_COUNT, "reduce names");
    if (naxes < 1 || naxes > RV_MAX_DIMS) {
        base_error(RV_ERR_TYPE, "%s needs 1 to %d reduction axes", names[rk], RV_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < naxes; i++) {
        if (!axes[i])
            return NULL;
        if (axes[i]->kind != AX_REDUCE) {
            base_error(RV_ERR_TYPE, "'%s' is not a reduction axis", axes[i]->name);
            return NULL;
        }
    }
    if (rk == RV_REDUCE_ARGMAX && naxes != 1) {
        base_error(RV_ERR_TYPE, "argmax reduces over exactly one axis");
        return NULL;
    }
    if (body->dtype == RV_BOOL) {
        base_error(RV_ERR_TYPE, "%s needs a numeric body, got bool", names[rk]);
        return NULL;
    }
    Payload p = {.rk = rk, .naxes = naxes, .axes = axes};
    Expr *args[1] = {body};
    return make(m, EX_REDUCE, rk == RV_REDUCE_ARGMAX ? RV_I64 : body->dtype, 1, args, &p);
}

Expr *ir_load(Module *m, Buffer *b, Expr *idx) {
    if (!b || !idx)
        return NULL;
    RV_ASSERT(ir_is_int(idx->dtype));
    Expr *args[1] = {ir_cast(m, RV_I64, idx)};
    Payload p = {.ptr = b};
    return make(m, EX_LOAD, b->dtype, 1, args, &p);
}

Buffer *ir_buffer_new(Module *m, const char *name, rv_dtype t, Expr *size, BufScope scope) {
    Buffer *b = arena_alloc(m->arena, sizeof(Buffer));
    b->name = ir_name(m, name);
    b->dtype = t;
    b->size = size;
    b->scope = scope;
    b->id = m->n_buffers++;
    return b;
}

/* ---- generic rebuilding and traversal ---- */

Expr *ir_rebuild(Module *m, const Expr *e, Expr *const *args) {
    bool same = true;
    for (int i = 0; i < e->n; i++)
        same = same && args[i] == e->args[i];
    if (same)
        return (Expr *)e;
    switch (e->kind) {
    case EX_READ:
        return ir_read(m, e->u.tensor, e->n, args);
    case EX_UFCALL:
        return ir_ufcall(m, e->u.uf, e->n, args);
    case EX_REDUCE:
        return ir_reduce(m, e->u.red.rk, e->u.red.naxes, e->u.red.axes, args[0]);
    case EX_SELECT:
        return ir_select(m, args[0], args[1], args[2]);
    case EX_CAST:
        return ir_cast(m, e->dtype, args[0]);
    case EX_LOAD:
        return ir_load(m, e->u.buf, args[0]);
    default:
        if (e->n == 1)
            return ir_unary(m, e->kind, args[0]);
        if (e->n == 2)
            return ir_binary(m, e->kind, args[0], args[1]);
        RV_UNREACHABLE();
    }
}

typedef struct Subst {
    const PtrMap *map; /* Axis* -> Expr*, the caller's */
    PtrMap renamed;    /* reduction Axis* -> VAR of its replacement */
    PtrMap memo;
    bool fresh; /* every reduction gets new axes */
} Subst;

static Expr *subst_rec(Module *m, Expr *e, Subst *s);

/* A reduction's axes are bound by it, but their extents may use the axes
 * substituted: the reduction then gets new axes with the extents
 * substituted (or always, when s->fresh), so that `sum(k < len[b])` with b
 * replaced by x becomes `sum(k' < len[x])`. */
static Expr *subst_reduce(Module *m, Expr *e, Subst *s) {
    int n = e->u.red.naxes;
    Axis **axes = arena_alloc(m->arena, sizeof(Axis *) * (size_t)n);
    bool changed = false;
    for (int i = 0; i < n; i++) {
        Axis *a = e->u.red.axes[i];
        Expr *ext = a->extent ? subst_rec(m, a->extent, s) : NULL;
        if (a->extent && !ext)
            return NULL;
        axes[i] = a;
        if (s->fresh || ext != a->extent) {
            axes[i] = ir_axis_new(m, a->name, AX_REDUCE, ext);
            axes[i]->pos = a->pos;
            ptrmap_put(&s->renamed, a, axes[i]->var);
            changed = true;
        }
    }
    Expr *body = subst_rec(m, e->args[0], s);
    if (!body)
        return NULL;
    if (!changed)
        return body == e->args[0] ? e : ir_reduce(m, e->u.red.rk, n, e->u.red.axes, body);
    return ir_reduce(m, e->u.red.rk, n, axes, body);
}

static Expr *subst_rec(Module *m, Expr *e, Subst *s) {
    Expr *done = ptrmap_get(&s->memo, e);
    if (done)
        return done;
    Expr *r;
    if (e->kind == EX_VAR && ptrmap_has(&s->renamed, e->u.axis)) {
        r = ptrmap_get(&s->renamed, e->u.axis);
    } else if (e->kind == EX_VAR && ptrmap_has(s->map, e->u.axis)) {
        r = ptrmap_get(s->map, e->u.axis);
    } else if (e->kind == EX_REDUCE) {
        r = subst_reduce(m, e, s);
    } else if (e->n == 0) {
        r = e;
    } else {
        Expr *args[RV_MAX_DIMS + 3];
        Expr **a = e->n <= RV_COUNT(args) ? args : base_xmalloc(sizeof(Expr *) * (size_t)e->n);
        bool ok = true;
        for (int i = 0; i < e->n; i++)
            ok = (a[i] = subst_rec(m, e->args[i], s)) != NULL && ok;
        r = ok ? ir_rebuild(m, e, a) : NULL;
        if (a != args)
            base_free(a);
    }
    if (r)
        ptrmap_put(&s->memo, e, r);
    return r;
}

static Expr *substitute(Module *m, Expr *e, const PtrMap *map, bool fresh) {
    if (!e)
        return NULL;
    Subst s = {map, {0}, {0}, fresh};
    Expr *r = subst_rec(m, e, &s);
    ptrmap_free(&s.renamed);
    ptrmap_free(&s.memo);
    return r;
}

Expr *ir_substitute(Module *m, Expr *e, const PtrMap *map) {
    return substitute(m, e, map, false);
}

Expr *ir_substitute_fresh(Module *m, Expr *e, const PtrMap *map) {
    return substitute(m, e, map, true);
}

/* A reduction's axis extents are evaluated where the reduction is: they
 * are visited as its operands, before its body. */
static void visit_rec(const Expr *e, void (*fn)(const Expr *, void *), void *ctx, PtrMap *seen) {
    if (ptrmap_has(seen, e))
        return;
    ptrmap_put(seen, e, (void *)e);
    if (e->kind == EX_REDUCE)
        for (int i = 0; i < e->u.red.naxes; i++)
            if (e->u.red.axes[i]->extent)
                visit_rec(e->u.red.axes[i]->extent, fn, ctx, seen);
    for (int i = 0; i < e->n; i++)
        visit_rec(e->args[i], fn, ctx, seen);
    fn(e, ctx);
}

void ir_visit(const Expr *e, void (*fn)(const Expr *e, void *ctx), void *ctx) {
    PtrMap seen = {0};
    if (e)
        visit_rec(e, fn, ctx, &seen);
    ptrmap_free(&seen);
}

typedef struct UsesCtx {
    const Axis *a;
    bool found;
} UsesCtx;

static void uses_fn(const Expr *e, void *ctx) {
    UsesCtx *u = ctx;
    if (e->kind == EX_VAR && e->u.axis == u->a)
        u->found = true;
}

bool ir_uses_axis(const Expr *e, const Axis *a) {
    UsesCtx u = {a, false};
    ir_visit(e, uses_fn, &u);
    return u.found;
}

/* A variable depends on a when it is a or its extent does (extents only use
 * outer axes, so the recursion ends). */
static void depends_fn(const Expr *e, void *ctx) {
    UsesCtx *u = ctx;
    if (u->found || e->kind != EX_VAR)
        return;
    const Axis *v = e->u.axis;
    u->found = v == u->a || (v->extent && ir_depends_on_axis(v->extent, u->a));
}

bool ir_depends_on_axis(const Expr *e, const Axis *a) {
    UsesCtx u = {a, false};
    ir_visit(e, depends_fn, &u);
    return u.found;
}

Expr *ir_linear_coeff(Module *m, Expr *x, const Axis *a) {
    if (!ir_uses_axis(x, a))
        return ir_int(m, 0);
    Expr *l, *r;
    switch (x->kind) {
    case EX_VAR:
        return ir_int(m, 1);
    case EX_ADD:
    case EX_SUB:
        l = ir_linear_coeff(m, x->args[0], a);
        r = ir_linear_coeff(m, x->args[1], a);
        return l && r ? ir_binary(m, x->kind, l, r) : NULL;
    case EX_MUL:
        for (int i = 0; i < 2; i++)
            if (!ir_uses_axis(x->args[i], a)) {
                Expr *c = ir_linear_coeff(m, x->args[1 - i], a);
                return c ? ir_binary(m, EX_MUL, x->args[i], c) : NULL;
            }
        return NULL;
    case EX_CAST:
        return ir_is_int(x->args[0]->dtype) ? ir_linear_coeff(m, x->args[0], a) : NULL;
    default:
        return NULL;
    }
}
