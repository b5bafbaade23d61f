/*
 * eval.c — evaluation of compute and cond operations, element by element.
 *
 * The definition is the meaning: for each valid index tuple of the output
 * (in canonical order, ir/layout.h) the body is evaluated with the axis
 * variables bound to the tuple, and the value stored in the tensor's dtype.
 * Floats are computed in double and rounded only when stored (and at an
 * explicit cast to f32); integers are exact int64, with C's truncating `/`
 * and `%`, and division by zero or int64 overflow is an error naming the
 * element, never undefined behaviour. Every operand is evaluated (SELECT,
 * && and || are strict); only OP_COND (and OP_RECURSE with a condition)
 * chooses, per element, which branch to evaluate, so each branch may read
 * what is valid under its condition. interp_op_elem evaluates one element:
 * interp_eval_op's loop, and recurse.c's node by node.
 *
 * Reductions loop over their axes in lexicographic order; an axis extent
 * may depend on outer axes (sum(k < i + 1)) and a negative extent is an
 * empty range, as in a for loop. Over an empty range: sum = 0, max = -inf
 * (for integers the dtype's smallest value), min = +inf (largest), argmax =
 * -1. max/min propagate NaN; argmax returns the first maximum, a NaN
 * counting as the maximum (NumPy's rule).
 *
 * Speed. compile.c turns each operation into instruction lists over slots.
 * Every instruction is written once, as a loop over lanes: outside the
 * innermost loop of a reduction there is one lane; in it, the variant part
 * of the body runs for up to INTERP_LANES consecutive iterations per
 * instruction, and the values are then folded into the accumulator in
 * iteration order, so the result is bit-for-bit what one iteration at a
 * time gives. If any lane fails, the chunk is run again one iteration at a
 * time, so the error reported is the first in the definition's order, with
 * its message. Nothing is allocated per element.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "interp/interp.h"

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

enum { LANES = INTERP_LANES };

typedef struct Exec {
    Interp *in;
    Val *s;             /* the slots: slot k, lane l is s[k * LANES + l] */
    int n;              /* lanes being computed (1 outside vectorized loops) */
    const Tensor *t;    /* the operation */
    const int64_t *idx; /* its current element */
} Exec;

static Val *lanes(const Exec *x, int slot) {
    return x->s + (size_t)slot * LANES;
}

/* Sets the last error to "<where>: <message>" for the current element. */
static rv_status elem_error(const Exec *x, rv_status st, const char *fmt, ...) RV_PRINTF(3, 4);
static rv_status elem_error(const Exec *x, rv_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    interp_verror(st, x->t, x->idx, NULL, fmt, ap);
    va_end(ap);
    return st;
}

/* Error in node e: "<what> in <e as source>". */
static rv_status node_error(const Exec *x, const Expr *e, const char *what) {
    char *s = ir_expr_str(e);
    rv_status st = elem_error(x, RV_ERR_BOUNDS, "%s in %s", what, s);
    base_free(s);
    return st;
}

static rv_status arith_error(const Exec *x, const EvalIns *p, IntArith r) {
    return node_error(x, p->e, r == IA_DIVZERO ? "division by zero" : "integer overflow");
}

/* The index tuple of an instruction's operands at lane l. */
static void gather(const Exec *x, const EvalIns *p, int l, int64_t *idx) {
    for (int k = 0; k < p->n; k++)
        idx[k] = lanes(x, p->args[k])[l * p->vargs[k]].i;
}

/* The message for a read out of bounds at lane l (off the hot path). */
static rv_status read_error(const Exec *x, const EvalIns *p, int l) {
    int64_t idx[RV_MAX_DIMS];
    gather(x, p, l, idx);
    int bad = 0;
    int64_t ext = 0;
    RV_ASSERT(ir_layout_offset(p->u.rd.lay, idx, &bad, &ext) < 0);
    Buf b = {0};
    ir_layout_format_index(&b, p->n, idx);
    rv_status st = elem_error(
        x, RV_ERR_BOUNDS, "read %s%s: index %lld out of bounds for dimension %d (extent %lld)",
        p->e->u.tensor->name, buf_str(&b), (long long)idx[bad], bad, (long long)ext);
    buf_free(&b);
    return st;
}

/* A math function of x (and y) by its definition in ops.def. */
static double math(int k, double x, double y) {
    (void)y;
    switch (k) {
#define MATH(k, text, arity, libm, def)                                                            \
    case EX_##k:                                                                                   \
        return def;
#include "ir/ops.def"
#undef MATH
    default:
        RV_UNREACHABLE();
    }
}

static bool cmp_i(int k, int64_t a, int64_t b) {
    switch (k) {
    case EX_EQ:
        return a == b;
    case EX_NE:
        return a != b;
    case EX_LT:
        return a < b;
    case EX_LE:
        return a <= b;
    case EX_GT:
        return a > b;
    default:
        return a >= b;
    }
}

static bool cmp_f(int k, double a, double b) {
    switch (k) {
    case EX_EQ:
        return a == b;
    case EX_NE:
        return a != b;
    case EX_LT:
        return a < b;
    case EX_LE:
        return a <= b;
    case EX_GT:
        return a > b;
    default:
        return a >= b;
    }
}

/* A float truncated toward zero into integer dtype t; false when it does
 * not fit (NaN, infinities, out of range). */
static bool float_to_int(double v, int t, int64_t *out) {
    double tr = trunc(v);
    if (t == RV_I32 ? !(tr >= -2147483648.0 && tr <= 2147483647.0)
                    : !(tr >= -9223372036854775808.0 && tr < 9223372036854775808.0))
        return false;
    *out = (int64_t)tr;
    return true;
}

/* Loads the elements at offsets off[0..n-1] of a read's tensor. */
static void load(const EvalIns *p, Val *d, const int64_t *off, int n) {
    const void *data = p->u.rd.data;
    switch (p->u.rd.dtype) {
    case RV_F32:
        for (int l = 0; l < n; l++)
            d[l].f = ((const float *)data)[off[l]];
        break;
    case RV_F64:
        for (int l = 0; l < n; l++)
            d[l].f = ((const double *)data)[off[l]];
        break;
    case RV_I32:
        for (int l = 0; l < n; l++)
            d[l].i = ((const int32_t *)data)[off[l]];
        break;
    default:
        for (int l = 0; l < n; l++)
            d[l].i = ((const int64_t *)data)[off[l]];
        break;
    }
}

/* A read: offsets for every lane (bounds-checked), then the loads. */
static rv_status exec_read(const Exec *x, const EvalIns *p, Val *d) {
    int64_t off[LANES];
    int n = x->n;
    if (p->op == I_READ1) {
        const Val *i0 = lanes(x, p->args[0]);
        int s0 = p->vargs[0];
        for (int l = 0; l < n; l++) {
            off[l] = i0[l * s0].i;
            if ((uint64_t)off[l] >= (uint64_t)p->u.rd.ext0)
                return read_error(x, p, l);
        }
    } else if (p->op == I_READ2) {
        const Val *i0 = lanes(x, p->args[0]), *i1 = lanes(x, p->args[1]);
        int s0 = p->vargs[0], s1 = p->vargs[1];
        int64_t e0 = p->u.rd.ext0, e1 = p->u.rd.ext1;
        for (int l = 0; l < n; l++) {
            int64_t a = i0[l * s0].i, b = i1[l * s1].i;
            if ((uint64_t)a >= (uint64_t)e0 || (uint64_t)b >= (uint64_t)e1)
                return read_error(x, p, l);
            off[l] = a * e1 + b;
        }
    } else {
        for (int l = 0; l < n; l++) {
            int64_t idx[RV_MAX_DIMS], ext = 0;
            int bad = 0;
            gather(x, p, l, idx);
            if ((off[l] = ir_layout_offset(p->u.rd.lay, idx, &bad, &ext)) < 0)
                return read_error(x, p, l);
        }
    }
    load(p, d, off, n);
    return RV_OK;
}

static rv_status exec_ufcall(const Exec *x, const EvalIns *p, Val *d) {
    for (int l = 0; l < x->n; l++) {
        int64_t args[RV_MAX_DIMS];
        gather(x, p, l, args);
        rv_status st = ir_layout_ufun_value(&x->in->env, p->u.uf, args, &d[l].i);
        if (st != RV_OK) {
            char *prev = base_xstrdup(rv_last_error());
            elem_error(x, st, "%s", prev);
            base_free(prev);
            return st;
        }
    }
    return RV_OK;
}

static rv_status exec_reduce(Exec *x, const EvalRed *r, Val *out);

/* Executes one instruction over x->n lanes: operand lane l is at l * stride,
 * stride 1 when the operand varies, 0 when lane 0 holds it for all. Inlined
 * into the block loop and the innermost reduction loop. */
static ALWAYS_INLINE rv_status exec_ins(Exec *x, const EvalIns *p) {
    Val *d = lanes(x, p->dst);
    const Val *a = lanes(x, p->a), *b = lanes(x, p->b), *c = lanes(x, p->c);
    int n = x->n, sa = p->va, sb = p->vb, sc = p->vc;
    IntArith r;
    switch (p->op) {
    case I_MOV:
        for (int l = 0; l < n; l++)
            d[l] = a[l * sa];
        break;
    case I_ITOF:
        for (int l = 0; l < n; l++)
            d[l].f = (double)a[l * sa].i;
        break;
    case I_ITOF32:
        for (int l = 0; l < n; l++)
            d[l].f = (double)(float)a[l * sa].i;
        break;
    case I_FTOF32:
        for (int l = 0; l < n; l++)
            d[l].f = (double)(float)a[l * sa].f;
        break;
    case I_FTOI:
        for (int l = 0; l < n; l++) {
            if (!float_to_int(a[l * sa].f, p->k, &d[l].i)) {
                char msg[64];
                snprintf(msg, sizeof msg, "%g does not fit in %s", a[l * sa].f,
                         rv_dtype_name(p->k));
                return node_error(x, p->e, msg);
            }
        }
        break;
    case I_ITOI32:
        for (int l = 0; l < n; l++)
            d[l].i = ir_int_convert(RV_I32, a[l * sa].i);
        break;
    case I_NEG_I:
    case I_ABS_I:
        for (int l = 0; l < n; l++) {
            int64_t v = a[l * sa].i;
            if (p->op == I_ABS_I && v >= 0)
                d[l].i = v;
            else if (v == INT64_MIN || (p->e->dtype == RV_I32 && !ir_dtype_fits(RV_I32, -v)))
                return arith_error(x, p, IA_OVERFLOW);
            else
                d[l].i = -v;
        }
        break;
    case I_NEG_F:
        for (int l = 0; l < n; l++)
            d[l].f = -a[l * sa].f;
        break;
    case I_ABS_F:
        for (int l = 0; l < n; l++)
            d[l].f = fabs(a[l * sa].f);
        break;
    case I_ADD_I:
    case I_SUB_I:
    case I_MUL_I:
    case I_IARITH:
        for (int l = 0; l < n; l++)
            if ((r = ir_int_arith((ExprKind)p->k, a[l * sa].i, b[l * sb].i, &d[l].i)) != IA_OK)
                return arith_error(x, p, r);
        /* an i32 operation overflows when its exact result does not fit
         * i32, as an i64 one does at int64: compiled code computes i32 in
         * 32 bits */
        if (p->e->dtype == RV_I32)
            for (int l = 0; l < n; l++)
                if (!ir_dtype_fits(RV_I32, d[l].i))
                    return arith_error(x, p, IA_OVERFLOW);
        break;
    case I_ADD_F:
        for (int l = 0; l < n; l++)
            d[l].f = a[l * sa].f + b[l * sb].f;
        break;
    case I_SUB_F:
        for (int l = 0; l < n; l++)
            d[l].f = a[l * sa].f - b[l * sb].f;
        break;
    case I_MUL_F:
        for (int l = 0; l < n; l++)
            d[l].f = a[l * sa].f * b[l * sb].f;
        break;
    case I_DIV_F:
        for (int l = 0; l < n; l++)
            d[l].f = a[l * sa].f / b[l * sb].f;
        break;
    case I_MIN_I:
        for (int l = 0; l < n; l++)
            d[l].i = a[l * sa].i < b[l * sb].i ? a[l * sa].i : b[l * sb].i;
        break;
    case I_MAX_I:
        for (int l = 0; l < n; l++)
            d[l].i = a[l * sa].i > b[l * sb].i ? a[l * sa].i : b[l * sb].i;
        break;
    case I_MIN_F:
    case I_MAX_F:
        for (int l = 0; l < n; l++) {
            double u = a[l * sa].f, v = b[l * sb].f;
            if (isnan(u) || isnan(v))
                d[l].f = NAN;
            else
                d[l].f = (p->op == I_MIN_F ? u < v : u > v) ? u : v;
        }
        break;
    case I_CMP_I:
        for (int l = 0; l < n; l++)
            d[l].i = cmp_i(p->k, a[l * sa].i, b[l * sb].i);
        break;
    case I_CMP_F:
        for (int l = 0; l < n; l++)
            d[l].i = cmp_f(p->k, a[l * sa].f, b[l * sb].f);
        break;
    case I_AND:
        for (int l = 0; l < n; l++)
            d[l].i = a[l * sa].i && b[l * sb].i;
        break;
    case I_OR:
        for (int l = 0; l < n; l++)
            d[l].i = a[l * sa].i || b[l * sb].i;
        break;
    case I_NOT:
        for (int l = 0; l < n; l++)
            d[l].i = !a[l * sa].i;
        break;
    case I_SELECT:
        for (int l = 0; l < n; l++)
            d[l] = a[l * sa].i ? b[l * sb] : c[l * sc];
        break;
    case I_MATH:
        if (ir_expr_info[p->k].arity == 2) {
            for (int l = 0; l < n; l++)
                d[l].f = math(p->k, a[l * sa].f, b[l * sb].f);
        } else {
            for (int l = 0; l < n; l++)
                d[l].f = math(p->k, a[l * sa].f, 0);
        }
        break;
    case I_READ1:
    case I_READ2:
    case I_READN:
    case I_READR:
        return exec_read(x, p, d);
    case I_UFCALL:
        return exec_ufcall(x, p, d);
    case I_REDUCE:
        RV_ASSERT(n == 1); /* blocks holding a reduction are not vectorized */
        return exec_reduce(x, p->u.red, d);
    default:
        RV_UNREACHABLE();
    }
    return RV_OK;
}

static rv_status exec_block(Exec *x, const EvalBlock *blk) {
    for (const EvalIns *p = blk->ins, *end = blk->ins + blk->n; p < end; p++) {
        rv_status st = exec_ins(x, p);
        if (st != RV_OK)
            return st;
    }
    return RV_OK;
}

/* ---- reductions ---- */

typedef struct RedRun {
    const EvalRed *r;
    bool first; /* the invariant part of the body is still to compute */
    bool fl;
    Val acc;
    int64_t arg; /* argmax: the index of the best value so far */
    bool seen;
} RedRun;

/* Folds value v, the body at iteration `at` of the innermost axis, into
 * the accumulator. */
static inline rv_status combine(const Exec *x, RedRun *rr, Val v, int64_t at) {
    switch (rr->r->rk) {
    case RV_REDUCE_SUM:
        if (rr->fl)
            rr->acc.f += v.f;
        else if (ir_int_arith(EX_ADD, rr->acc.i, v.i, &rr->acc.i) != IA_OK ||
                 (rr->r->dt == RV_I32 && !ir_dtype_fits(RV_I32, rr->acc.i)))
            return elem_error(x, RV_ERR_BOUNDS, "integer overflow in a sum");
        break;
    case RV_REDUCE_MAX:
        if (!rr->fl) {
            if (v.i > rr->acc.i)
                rr->acc.i = v.i;
        } else if (!isnan(rr->acc.f) && (isnan(v.f) || v.f > rr->acc.f)) {
            rr->acc.f = v.f; /* a NaN, once in, stays */
        }
        break;
    case RV_REDUCE_MIN:
        if (!rr->fl) {
            if (v.i < rr->acc.i)
                rr->acc.i = v.i;
        } else if (!isnan(rr->acc.f) && (isnan(v.f) || v.f < rr->acc.f)) {
            rr->acc.f = v.f;
        }
        break;
    case RV_REDUCE_ARGMAX: {
        bool better;
        if (!rr->seen)
            better = true;
        else if (rr->fl)
            better = !isnan(rr->acc.f) && (v.f > rr->acc.f || isnan(v.f));
        else
            better = v.i > rr->acc.i;
        if (better) {
            rr->acc = v;
            rr->arg = at;
        }
        rr->seen = true;
        break;
    }
    default:
        RV_UNREACHABLE();
    }
    return RV_OK;
}

/* Runs the variant part of the body for iterations v0 .. v0 + L - 1 of the
 * innermost axis, one at a time, to report the first failure in order
 * (after a vectorized chunk failed somewhere). */
static rv_status rerun_one_by_one(Exec *x, const EvalRed *r, Val *av, int64_t v0, int L) {
    for (int l = 0; l < L; l++) {
        av[0].i = v0 + l;
        rv_status st = exec_block(x, &r->var);
        if (st != RV_OK)
            return st;
    }
    RV_UNREACHABLE(); /* the same computation failed a moment ago */
}

/* The innermost axis: the body for each iteration, folded in order. */
static rv_status reduce_inner(Exec *x, RedRun *rr, Val *av, int64_t n) {
    const EvalRed *r = rr->r;
    rv_status st;
    if (n > 0 && rr->first) {
        if ((st = exec_block(x, &r->inv)) != RV_OK)
            return st;
        rr->first = false;
    }
    const Val *body = lanes(x, r->body);
    if (!r->vec) {
        for (int64_t v = 0; v < n; v++) {
            av[0].i = v;
            if ((st = exec_block(x, &r->var)) != RV_OK ||
                (st = combine(x, rr, body[0], v)) != RV_OK)
                return st;
        }
        return RV_OK;
    }
    int sb = r->body_varies;
    for (int64_t v0 = 0; v0 < n; v0 += LANES) {
        int L = n - v0 < LANES ? (int)(n - v0) : LANES;
        for (int l = 0; l < L; l++)
            av[l].i = v0 + l;
        x->n = L;
        st = RV_OK;
        for (const EvalIns *p = r->var.ins, *end = p + r->var.n; st == RV_OK && p < end; p++)
            st = exec_ins(x, p);
        x->n = 1;
        if (st != RV_OK)
            return rerun_one_by_one(x, r, av, v0, L);
        if (r->rk == RV_REDUCE_SUM && rr->fl) { /* the common case, without a switch per lane */
            for (int l = 0; l < L; l++)
                rr->acc.f += body[l * sb].f;
            continue;
        }
        for (int l = 0; l < L; l++)
            if ((st = combine(x, rr, body[l * sb], v0 + l)) != RV_OK)
                return st;
    }
    return RV_OK;
}

/* Loops over reduction axis j and the ones inside it. */
static rv_status reduce_level(Exec *x, RedRun *rr, int j) {
    const EvalRed *r = rr->r;
    rv_status st;
    if ((st = exec_block(x, &r->ext[j])) != RV_OK)
        return st;
    int64_t n = lanes(x, r->ext_slot[j])[0].i;
    Val *av = lanes(x, r->axis_slot[j]);
    if (j + 1 == r->naxes)
        return reduce_inner(x, rr, av, n);
    for (int64_t v = 0; v < n; v++) {
        /* every lane: vectorized instructions may read it as varying */
        for (int l = 0; l < (r->vec ? LANES : 1); l++)
            av[l].i = v;
        if ((st = reduce_level(x, rr, j + 1)) != RV_OK)
            return st;
    }
    return RV_OK;
}

static rv_status exec_reduce(Exec *x, const EvalRed *r, Val *out) {
    RedRun rr = {.r = r, .first = true, .fl = ir_is_float(r->dt), .arg = -1};
    /* the identities: 0, -inf (the dtype's smallest), +inf (largest) */
    bool i32 = r->dt == RV_I32;
    if (r->rk == RV_REDUCE_SUM) {
        if (rr.fl)
            rr.acc.f = 0.0;
        else
            rr.acc.i = 0;
    } else if (r->rk == RV_REDUCE_MAX) {
        if (rr.fl)
            rr.acc.f = -INFINITY;
        else
            rr.acc.i = i32 ? INT32_MIN : INT64_MIN;
    } else if (r->rk == RV_REDUCE_MIN) {
        if (rr.fl)
            rr.acc.f = INFINITY;
        else
            rr.acc.i = i32 ? INT32_MAX : INT64_MAX;
    }
    rv_status st = reduce_level(x, &rr, 0);
    if (st != RV_OK)
        return st;
    if (r->rk == RV_REDUCE_ARGMAX)
        out->i = rr.arg;
    else
        *out = rr.acc;
    return RV_OK;
}

/* ---- the element loop ---- */

/* Stores value v (of dtype vt) at out[off] in dtype `to`. */
static rv_status store(const Exec *x, void *data, int64_t off, rv_dtype to, rv_dtype vt, Val v) {
    bool vf = ir_is_float(vt);
    switch (to) {
    case RV_F32:
        ((float *)data)[off] = (float)(vf ? v.f : (double)v.i);
        return RV_OK;
    case RV_F64:
        ((double *)data)[off] = vf ? v.f : (double)v.i;
        return RV_OK;
    case RV_I32:
    case RV_I64: {
        int64_t i = v.i;
        if (vf && !float_to_int(v.f, to, &i))
            return elem_error(x, RV_ERR_BOUNDS, "value %g does not fit in %s", v.f,
                              rv_dtype_name(to));
        if (!ir_dtype_fits(to, i))
            return elem_error(x, RV_ERR_BOUNDS, "value %lld does not fit in i32", (long long)i);
        if (to == RV_I32)
            ((int32_t *)data)[off] = (int32_t)i;
        else
            ((int64_t *)data)[off] = i;
        return RV_OK;
    }
    default:
        RV_UNREACHABLE();
    }
}

rv_status interp_op_begin(Interp *in, const Tensor *t, EvalOp *o) {
    o->in = in;
    o->t = t;
    rv_status st = interp_compile(in, t, &o->p);
    o->slots = base_xcalloc((size_t)o->p.nslots * LANES + 1, sizeof(Val));
    for (int k = 0; k < o->p.nslots; k++)
        o->slots[(size_t)k * LANES] = o->p.init[k];
    return st;
}

rv_status interp_op_elem(EvalOp *o, const int64_t *idx, void *data, int64_t off) {
    const EvalProgram *p = &o->p;
    const Op *op = o->t->op;
    Val *slots = o->slots;
    Exec x = {o->in, slots, 1, o->t, idx};
    for (int k = 0; k < o->t->ndim; k++)
        slots[(size_t)p->out_slot[k] * LANES].i = idx[k];
    const EvalBlock *blk = &p->then_;
    int root = p->then_slot;
    const Expr *body = op->body;
    rv_status st;
    if (op->pred) {
        if ((st = exec_block(&x, &p->pred)) != RV_OK)
            return st;
        if (!slots[(size_t)p->pred_slot * LANES].i) {
            blk = &p->else_;
            root = p->else_slot;
            body = op->else_body;
        }
    }
    if ((st = exec_block(&x, blk)) != RV_OK)
        return st;
    return store(&x, data, off, o->t->dtype, body->dtype, slots[(size_t)root * LANES]);
}

void interp_op_end(EvalOp *o) {
    base_free(o->slots);
    interp_program_free(&o->p);
    o->slots = NULL;
}

rv_status interp_eval_op(Interp *in, const Tensor *t, rv_array *out) {
    const Layout *l = in->tv[t->id].lay;
    EvalOp o;
    rv_status st = interp_op_begin(in, t, &o);
    LayoutIter it;
    void *data = rv_array_data(out);
    for (bool ok = st == RV_OK && ir_layout_iter_begin(l, &it); ok;
         ok = ir_layout_iter_next(l, &it))
        if ((st = interp_op_elem(&o, it.idx, data, it.rank[l->ndim])) != RV_OK)
            break;
    interp_op_end(&o);
    return st;
}
