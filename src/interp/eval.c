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
 * && and || are strict); only OP_COND chooses, per element, which branch
 * to evaluate, so each branch may read what is valid under its condition.
 *
 * Reductions loop over their axes in lexicographic order; an axis extent
 * may depend on outer axes (sum(k < i + 1)) and a negative extent is an
 * empty range, as in a for loop. Over an empty range: sum = 0, max = -inf
 * (for integers the dtype's smallest value), min = +inf (largest), argmax =
 * -1. max/min propagate NaN; argmax returns the first maximum, a NaN
 * counting as the maximum (NumPy's rule).
 *
 * Speed. Each operation's expression DAGs are compiled once per run into
 * flat instruction lists over numbered slots (one slot per DAG node, so a
 * shared subexpression is computed once per element); constants and sizes
 * are slots filled before the loop, and axis variables are slots the loops
 * binding them write. Dense reads of rank 1 and 2 have opcodes of their
 * own. A REDUCE is one instruction that owns
 * sub-blocks: one per axis extent and one for the body. The body block is
 * split in two: the nodes that do not depend on the reduction's axes are
 * computed on its first iteration only, which keeps loop-invariant reads
 * out of the inner loop without evaluating anything a zero-trip reduction
 * would not have evaluated (so no spurious errors). Nothing is allocated
 * per element.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "interp/interp.h"

/* ---------------------------------------------------------- the program */

typedef enum Opc {
    I_MOV,    /* dst = a (casts that change nothing) */
    I_ITOF,   /* dst.f = a.i */
    I_ITOF32, /* dst.f = (float)a.i */
    I_FTOF32, /* dst.f = (float)a.f */
    I_FTOI,   /* dst.i = trunc(a.f), checked against dtype k */
    I_ITOI32, /* dst.i = (int32_t)a.i, wrapping as a C cast does */
    I_NEG_I,
    I_NEG_F,
    I_ABS_I,
    I_ABS_F,
    I_ADD_I,
    I_ADD_F,
    I_SUB_I,
    I_SUB_F,
    I_MUL_I,
    I_MUL_F,
    I_DIV_F,
    I_IARITH, /* integer DIV, MOD, FLOORDIV, FLOORMOD (ExprKind k) */
    I_MIN_I,
    I_MIN_F,
    I_MAX_I,
    I_MAX_F,
    I_CMP_I, /* comparison k of integers (and bools) */
    I_CMP_F, /* comparison k of floats */
    I_AND,
    I_OR,
    I_NOT,
    I_SELECT, /* dst = a.i ? b : c */
    I_MATH,   /* float math function k of a (and b for POW) */
    I_READ1,  /* dst = u.tv[args[0]]: a dense 1-D read */
    I_READ2,  /* dst = u.tv[args[0], args[1]]: a dense 2-D read */
    I_READN,  /* dst = u.tv at the n index slots in args: dense, any rank */
    I_READR,  /* the same through a ragged layout */
    I_UFCALL, /* dst.i = u.uf at the n argument slots in args */
    I_REDUCE, /* dst = u.red */
    I_COUNT
} Opc;

typedef struct Red Red;

typedef struct Ins {
    Opc op;
    int k;            /* ExprKind for I_IARITH, I_CMP_*, I_MATH; rv_dtype for I_FTOI */
    int dst, a, b, c; /* slots */
    int n;            /* READ, UFCALL: operands in args */
    const int *args;
    union {
        const Ufun *uf; /* UFCALL */
        struct {
            const void *data;
            rv_dtype dtype;
            const Layout *lay;
            int64_t ext0, ext1; /* READ1, READ2: the extents */
        } rd;                   /* READ */
        const Red *red;         /* REDUCE */
    } u;
    const Expr *e; /* the node, for messages */
} Ins;

typedef struct Block {
    const Ins *ins;
    int n;
} Block;

struct Red {
    rv_reduce_kind rk;
    rv_dtype dt; /* the body's dtype */
    int naxes;
    int axis_slot[RV_MAX_DIMS]; /* the slots of the axes' variables */
    Block ext[RV_MAX_DIMS];     /* each axis extent (may use outer axes) */
    int ext_slot[RV_MAX_DIMS];
    Block inv, var; /* body: nodes independent of the axes (first iteration only), the rest */
    int body;       /* the body's slot */
};

/* One operation compiled: its blocks and the initial slot values. Axis
 * variables live in slots of their own, written by the loops that bind
 * them (the element loop, reduction loops) and read by the instructions
 * directly, so VAR nodes cost nothing. */
typedef struct Program {
    Arena *arena;
    Val *init;
    int nslots;
    int out_slot[RV_MAX_DIMS]; /* the slots of the output axes' variables */
    Block pred, then_, else_;  /* COMPUTE uses then_ only */
    int pred_slot, then_slot, else_slot;
} Program;

/* ----------------------------------------------------------- compiling */

typedef Vec(Ins) InsVec;

typedef struct Pending {
    const Expr *e;
    Red *r;
} Pending;

typedef struct Compiler {
    Interp *in;
    const Tensor *t;
    Arena *arena;
    int *slot_of; /* by expr id; -1: none yet */
    Vec(Val) init;
    int *mark; /* by expr id: the block that last collected the node */
    int stamp;
    Vec(Pending) pending; /* reductions whose blocks are still to compile */
} Compiler;

typedef struct BlockBuild {
    int stamp;
    const Expr *red; /* the REDUCE whose body this is, or NULL */
    uint8_t *dep;    /* memo of depends(): 0 unknown, 1 no, 2 yes */
    InsVec inv, var;
} BlockBuild;

static int new_slot(Compiler *c, Val v) {
    vec_push(&c->init, v);
    return c->init.len - 1;
}

static int slot(Compiler *c, const Expr *e) {
    if (c->slot_of[e->id] < 0)
        c->slot_of[e->id] = new_slot(c, (Val){.i = 0});
    return c->slot_of[e->id];
}

/* True when `e` depends on an axis of reduction `red` (memoized). */
static bool depends(const Expr *e, const Expr *red, uint8_t *memo) {
    if (memo[e->id])
        return memo[e->id] == 2;
    bool d = false;
    if (e->kind == EX_VAR) {
        for (int i = 0; i < red->u.red.naxes; i++)
            d = d || e->u.axis == red->u.red.axes[i];
    } else if (e->kind == EX_REDUCE) {
        for (int i = 0; !d && i < e->u.red.naxes; i++)
            d = depends(e->u.red.axes[i]->extent, red, memo);
    }
    for (int i = 0; !d && i < e->n; i++)
        d = depends(e->args[i], red, memo);
    memo[e->id] = d ? 2 : 1;
    return d;
}

static rv_status compile_error(Compiler *c, rv_status st, const char *fmt, ...) RV_PRINTF(3, 4);
static rv_status compile_error(Compiler *c, rv_status st, const char *fmt, ...) {
    Buf b = {0};
    interp_format_where(&b, c->t, NULL);
    buf_puts(&b, ": ");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    base_error(st, "%s", buf_str(&b));
    buf_free(&b);
    return st;
}

/* The opcode of a cast from the operand's dtype to `to`. */
static Opc cast_opc(rv_dtype from, rv_dtype to) {
    bool ff = ir_is_float(from);
    switch (to) {
    case RV_F32:
        return ff ? I_FTOF32 : I_ITOF32;
    case RV_F64:
        return ff ? I_MOV : I_ITOF;
    case RV_I32:
        return ff ? I_FTOI : I_ITOI32;
    case RV_I64:
        return ff ? I_FTOI : I_MOV;
    default:
        return I_COUNT; /* casts to bool do not exist in the IR */
    }
}

/* Appends the instruction computing `e` (whose operands have slots). */
static rv_status emit(Compiler *c, BlockBuild *bb, const Expr *e) {
    Ins ins = {.dst = slot(c, e), .e = e, .k = e->kind};
    bool fl = ir_is_float(e->dtype);
    const ExprInfo *info = &ir_expr_info[e->kind];
    if (e->n >= 1 && e->kind != EX_READ && e->kind != EX_UFCALL && e->kind != EX_REDUCE)
        ins.a = slot(c, e->args[0]);
    if (e->n >= 2 && e->kind != EX_READ && e->kind != EX_UFCALL)
        ins.b = slot(c, e->args[1]);
    if (e->n >= 3 && e->kind == EX_SELECT)
        ins.c = slot(c, e->args[2]);
    /* the verifier guarantees operands of arithmetic share the result's dtype */
    if (info->flags & (F_ARITH | F_MATH))
        for (int i = 0; i < e->n; i++)
            RV_ASSERT(ir_is_float(e->args[i]->dtype) == fl);
    switch (e->kind) {
    case EX_CAST:
        ins.op = cast_opc(e->args[0]->dtype, e->dtype);
        ins.k = e->dtype;
        if (ins.op == I_COUNT)
            return compile_error(c, RV_ERR_UNSUPPORTED, "cannot cast %s to %s",
                                 rv_dtype_name(e->args[0]->dtype), rv_dtype_name(e->dtype));
        break;
    case EX_NEG:
        ins.op = fl ? I_NEG_F : I_NEG_I;
        break;
    case EX_ABS:
        ins.op = fl ? I_ABS_F : I_ABS_I;
        break;
    case EX_ADD:
        ins.op = fl ? I_ADD_F : I_ADD_I;
        break;
    case EX_SUB:
        ins.op = fl ? I_SUB_F : I_SUB_I;
        break;
    case EX_MUL:
        ins.op = fl ? I_MUL_F : I_MUL_I;
        break;
    case EX_DIV:
        ins.op = fl ? I_DIV_F : I_IARITH;
        break;
    case EX_MOD:
    case EX_FLOORDIV:
    case EX_FLOORMOD:
        if (fl)
            return compile_error(c, RV_ERR_UNSUPPORTED, "%s of floats", info->text);
        ins.op = I_IARITH;
        break;
    case EX_MIN:
        ins.op = fl ? I_MIN_F : I_MIN_I;
        break;
    case EX_MAX:
        ins.op = fl ? I_MAX_F : I_MAX_I;
        break;
    case EX_EQ:
    case EX_NE:
    case EX_LT:
    case EX_LE:
    case EX_GT:
    case EX_GE:
        ins.op = ir_is_float(e->args[0]->dtype) ? I_CMP_F : I_CMP_I;
        break;
    case EX_AND:
        ins.op = I_AND;
        break;
    case EX_OR:
        ins.op = I_OR;
        break;
    case EX_NOT:
        ins.op = I_NOT;
        break;
    case EX_SELECT:
        ins.op = I_SELECT;
        break;
    case EX_EXP:
    case EX_LOG:
    case EX_SQRT:
    case EX_RSQRT:
    case EX_TANH:
    case EX_SIGMOID:
    case EX_ERF:
    case EX_GELU:
    case EX_POW:
        ins.op = I_MATH;
        break;
    case EX_READ:
    case EX_UFCALL: {
        int *args = arena_alloc(c->arena, sizeof(int) * (size_t)(e->n ? e->n : 1));
        for (int i = 0; i < e->n; i++)
            args[i] = slot(c, e->args[i]);
        ins.n = e->n;
        ins.args = args;
        if (e->kind == EX_UFCALL) {
            ins.op = I_UFCALL;
            ins.u.uf = e->u.uf;
            break;
        }
        const Tensor *src = e->u.tensor;
        const TensorVal *tv = &c->in->tv[src->id];
        if (!tv->data)
            return compile_error(c, RV_ERR_TYPE, "reads %s, which has no value before it",
                                 src->name);
        ins.u.rd.data = tv->data;
        ins.u.rd.dtype = tv->dtype;
        ins.u.rd.lay = tv->lay;
        ins.u.rd.ext0 = tv->lay->shape[0];
        ins.u.rd.ext1 = e->n >= 2 ? tv->lay->shape[1] : 0;
        if (tv->lay->ragged)
            ins.op = I_READR;
        else
            ins.op = e->n == 1 ? I_READ1 : e->n == 2 ? I_READ2 : I_READN;
        break;
    }
    case EX_REDUCE: {
        Red *r = arena_alloc(c->arena, sizeof(Red));
        r->rk = e->u.red.rk;
        r->dt = e->args[0]->dtype;
        r->naxes = e->u.red.naxes;
        for (int i = 0; i < r->naxes; i++)
            r->axis_slot[i] = slot(c, e->u.red.axes[i]->var);
        ins.op = I_REDUCE;
        ins.u.red = r;
        vec_push(&c->pending, ((Pending){e, r}));
        break;
    }
    default:
        return compile_error(c, RV_ERR_UNSUPPORTED, "the interpreter cannot evaluate %s nodes",
                             info->name);
    }
    bool variant = bb->red && depends(e, bb->red, bb->dep);
    if (bb->red && !variant)
        vec_push(&bb->inv, ins);
    else
        vec_push(&bb->var, ins);
    return RV_OK;
}

/* Collects the nodes a block computes, operands first. Constants and sizes
 * become pre-filled slots; a REDUCE is one instruction (its body and
 * extents are compiled as blocks of their own afterwards). */
static rv_status collect(Compiler *c, BlockBuild *bb, const Expr *e) {
    if (c->mark[e->id] == bb->stamp)
        return RV_OK;
    c->mark[e->id] = bb->stamp;
    int k;
    switch (e->kind) {
    case EX_CONST_INT:
        k = slot(c, e);
        c->init.data[k].i = e->u.ival;
        return RV_OK;
    case EX_CONST_FLOAT:
        k = slot(c, e); /* ir_float stores f32 literals already rounded to float */
        c->init.data[k].f = e->u.fval;
        return RV_OK;
    case EX_SIZE:
        k = slot(c, e);
        c->init.data[k].i = c->in->sizes[e->u.size->id];
        return RV_OK;
    case EX_VAR:
        slot(c, e); /* written by the loop that binds the axis */
        return RV_OK;
    case EX_REDUCE:
        break;
    default:
        for (int i = 0; i < e->n; i++) {
            rv_status st = collect(c, bb, e->args[i]);
            if (st != RV_OK)
                return st;
        }
    }
    return emit(c, bb, e);
}

static Block finish_list(Compiler *c, InsVec *v) {
    Block b = {v->len ? arena_memdup(c->arena, v->data, sizeof(Ins) * (size_t)v->len) : NULL,
               v->len};
    vec_free(v);
    return b;
}

/* Compiles the block computing `root`; for a reduction body (`red` set),
 * the nodes independent of its axes go to *inv. */
static rv_status compile_block(Compiler *c, const Expr *root, const Expr *red, Block *inv,
                               Block *var, int *root_slot) {
    BlockBuild bb = {.stamp = ++c->stamp, .red = red};
    if (red)
        bb.dep = base_xcalloc((size_t)c->in->m->n_exprs, 1);
    rv_status st = collect(c, &bb, root);
    base_free(bb.dep);
    Block bi = finish_list(c, &bb.inv), bv = finish_list(c, &bb.var);
    if (st != RV_OK)
        return st;
    if (inv)
        *inv = bi;
    *var = bv;
    *root_slot = slot(c, root);
    return RV_OK;
}

/* Compiles the pending reductions' extents and bodies (which may add more). */
static rv_status compile_pending(Compiler *c) {
    while (c->pending.len > 0) {
        Pending p = vec_pop(&c->pending);
        rv_status st;
        for (int i = 0; i < p.r->naxes; i++)
            if ((st = compile_block(c, p.e->u.red.axes[i]->extent, NULL, NULL, &p.r->ext[i],
                                    &p.r->ext_slot[i])) != RV_OK)
                return st;
        if ((st = compile_block(c, p.e->args[0], p.e, &p.r->inv, &p.r->var, &p.r->body)) != RV_OK)
            return st;
    }
    return RV_OK;
}

static rv_status compile_op(Interp *in, const Tensor *t, Program *p) {
    const Module *m = in->m;
    const Op *op = t->op;
    Compiler c = {.in = in, .t = t, .arena = p->arena};
    c.slot_of = base_xmalloc(sizeof(int) * (size_t)(m->n_exprs + 1));
    c.mark = base_xcalloc((size_t)m->n_exprs + 1, sizeof(int));
    for (int i = 0; i < m->n_exprs; i++)
        c.slot_of[i] = -1;
    for (int k = 0; k < t->ndim; k++)
        p->out_slot[k] = slot(&c, t->axes[k]->var);
    rv_status st = compile_block(&c, op->body, NULL, NULL, &p->then_, &p->then_slot);
    if (st == RV_OK && op->kind == OP_COND) {
        st = compile_block(&c, op->pred, NULL, NULL, &p->pred, &p->pred_slot);
        if (st == RV_OK)
            st = compile_block(&c, op->else_body, NULL, NULL, &p->else_, &p->else_slot);
    }
    if (st == RV_OK)
        st = compile_pending(&c);
    p->nslots = c.init.len;
    p->init =
        c.init.len ? arena_memdup(p->arena, c.init.data, sizeof(Val) * (size_t)c.init.len) : NULL;
    base_free(c.slot_of);
    base_free(c.mark);
    vec_free(&c.init);
    vec_free(&c.pending);
    return st;
}

/* ----------------------------------------------------------- executing */

typedef struct Exec {
    Interp *in;
    Val *s;             /* the slots */
    const Tensor *t;    /* the operation */
    const int64_t *idx; /* its current element */
} Exec;

/* Sets the last error to "<where>: <message>" for the current element. */
static rv_status elem_error(const Exec *x, rv_status st, const char *fmt, ...) RV_PRINTF(3, 4);
static rv_status elem_error(const Exec *x, rv_status st, const char *fmt, ...) {
    Buf b = {0};
    interp_format_where(&b, x->t, x->idx);
    buf_puts(&b, ": ");
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    base_error(st, "%s", buf_str(&b));
    buf_free(&b);
    return st;
}

/* Error in node e: "<what> in <e as source>". */
static rv_status node_error(const Exec *x, const Expr *e, const char *what) {
    char *s = ir_expr_str(e);
    rv_status st = elem_error(x, RV_ERR_BOUNDS, "%s in %s", what, s);
    base_free(s);
    return st;
}

/* The message for a read out of bounds (recomputed off the hot path). */
static rv_status read_error(const Exec *x, const Ins *p) {
    int64_t idx[RV_MAX_DIMS];
    for (int k = 0; k < p->n; k++)
        idx[k] = x->s[p->args[k]].i;
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

static double math1(int k, double x) {
    switch (k) {
    case EX_EXP:
        return exp(x);
    case EX_LOG:
        return log(x);
    case EX_SQRT:
        return sqrt(x);
    case EX_RSQRT:
        return 1.0 / sqrt(x);
    case EX_TANH:
        return tanh(x);
    case EX_SIGMOID:
        return 1.0 / (1.0 + exp(-x));
    case EX_ERF:
        return erf(x);
    case EX_GELU:
        return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
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

static rv_status exec_reduce(Exec *x, const Red *r, Val *out);

/* Executes one instruction. Inlined into the block loop below and into the
 * innermost reduction loop, so a reduction's body runs without a call per
 * iteration. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

static ALWAYS_INLINE rv_status exec_ins(Exec *x, const Ins *p) {
    Val *s = x->s;
    Val *d = &s[p->dst];
    const Val *a = &s[p->a], *b = &s[p->b];
    switch (p->op) {
    case I_MOV:
        *d = *a;
        break;
    case I_ITOF:
        d->f = (double)a->i;
        break;
    case I_ITOF32:
        d->f = (double)(float)a->i;
        break;
    case I_FTOF32:
        d->f = (double)(float)a->f;
        break;
    case I_FTOI:
        if (!float_to_int(a->f, p->k, &d->i)) {
            char msg[64];
            snprintf(msg, sizeof msg, "%g does not fit in %s", a->f, rv_dtype_name(p->k));
            return node_error(x, p->e, msg);
        }
        break;
    case I_ITOI32:
        d->i = ir_int_convert(RV_I32, a->i);
        break;
    case I_NEG_I:
    case I_ABS_I:
        if (p->op == I_ABS_I && a->i >= 0) {
            d->i = a->i;
        } else if (a->i == INT64_MIN) {
            return node_error(x, p->e, "integer overflow");
        } else {
            d->i = -a->i;
        }
        break;
    case I_NEG_F:
        d->f = -a->f;
        break;
    case I_ABS_F:
        d->f = fabs(a->f);
        break;
    case I_ADD_I:
    case I_SUB_I:
    case I_MUL_I:
    case I_IARITH: {
        int64_t r;
        IntArith st = ir_int_arith((ExprKind)p->k, a->i, b->i, &r);
        if (st != IA_OK)
            return node_error(x, p->e, st == IA_DIVZERO ? "division by zero" : "integer overflow");
        d->i = r;
        break;
    }
    case I_ADD_F:
        d->f = a->f + b->f;
        break;
    case I_SUB_F:
        d->f = a->f - b->f;
        break;
    case I_MUL_F:
        d->f = a->f * b->f;
        break;
    case I_DIV_F:
        d->f = a->f / b->f;
        break;
    case I_MIN_I:
        d->i = a->i < b->i ? a->i : b->i;
        break;
    case I_MAX_I:
        d->i = a->i > b->i ? a->i : b->i;
        break;
    case I_MIN_F:
        d->f = isnan(a->f) || isnan(b->f) ? NAN : (a->f < b->f ? a->f : b->f);
        break;
    case I_MAX_F:
        d->f = isnan(a->f) || isnan(b->f) ? NAN : (a->f > b->f ? a->f : b->f);
        break;
    case I_CMP_I:
        d->i = cmp_i(p->k, a->i, b->i);
        break;
    case I_CMP_F:
        d->i = cmp_f(p->k, a->f, b->f);
        break;
    case I_AND:
        d->i = a->i && b->i;
        break;
    case I_OR:
        d->i = a->i || b->i;
        break;
    case I_NOT:
        d->i = !a->i;
        break;
    case I_SELECT:
        *d = a->i ? *b : s[p->c];
        break;
    case I_MATH:
        d->f = p->k == EX_POW ? pow(a->f, b->f) : math1(p->k, a->f);
        break;
    case I_READ1:
    case I_READ2:
    case I_READN:
    case I_READR: {
        int64_t off;
        if (p->op == I_READ1) {
            off = s[p->args[0]].i;
            if ((uint64_t)off >= (uint64_t)p->u.rd.ext0)
                return read_error(x, p);
        } else if (p->op == I_READ2) {
            int64_t i0 = s[p->args[0]].i, i1 = s[p->args[1]].i;
            if ((uint64_t)i0 >= (uint64_t)p->u.rd.ext0 || (uint64_t)i1 >= (uint64_t)p->u.rd.ext1)
                return read_error(x, p);
            off = i0 * p->u.rd.ext1 + i1;
        } else {
            int64_t idx[RV_MAX_DIMS];
            for (int k = 0; k < p->n; k++)
                idx[k] = s[p->args[k]].i;
            int bad = 0;
            int64_t ext = 0;
            if ((off = ir_layout_offset(p->u.rd.lay, idx, &bad, &ext)) < 0)
                return read_error(x, p);
        }
        const void *data = p->u.rd.data;
        switch (p->u.rd.dtype) {
        case RV_F32:
            d->f = ((const float *)data)[off];
            break;
        case RV_F64:
            d->f = ((const double *)data)[off];
            break;
        case RV_I32:
            d->i = ((const int32_t *)data)[off];
            break;
        default:
            d->i = ((const int64_t *)data)[off];
            break;
        }
        break;
    }
    case I_UFCALL: {
        int64_t args[RV_MAX_DIMS];
        for (int k = 0; k < p->n; k++)
            args[k] = s[p->args[k]].i;
        rv_status st = ir_layout_ufun_value(&x->in->env, p->u.uf, args, &d->i);
        if (st != RV_OK) {
            char *prev = base_xstrdup(rv_last_error());
            elem_error(x, st, "%s", prev);
            base_free(prev);
            return st;
        }
        break;
    }
    case I_REDUCE: {
        rv_status st = exec_reduce(x, p->u.red, d);
        if (st != RV_OK)
            return st;
        break;
    }
    default:
        RV_UNREACHABLE();
    }
    return RV_OK;
}

static rv_status exec_block(Exec *x, const Block *blk) {
    for (const Ins *p = blk->ins, *end = blk->ins + blk->n; p < end; p++) {
        rv_status st = exec_ins(x, p);
        if (st != RV_OK)
            return st;
    }
    return RV_OK;
}

/* ---- reductions ---- */

typedef struct RedRun {
    const Red *r;
    bool first; /* the invariant part of the body is still to compute */
    bool fl;
    Val acc;
    int64_t arg; /* argmax: the index of the best value so far */
    bool seen;
} RedRun;

/* Folds the body's value at the current point into the accumulator. */
static inline rv_status combine(Exec *x, RedRun *rr) {
    const Red *r = rr->r;
    Val v = x->s[r->body];
    switch (r->rk) {
    case RV_REDUCE_SUM:
        if (rr->fl) {
            rr->acc.f += v.f;
        } else if (ir_int_arith(EX_ADD, rr->acc.i, v.i, &rr->acc.i) != IA_OK) {
            return elem_error(x, RV_ERR_BOUNDS, "integer overflow in a sum");
        }
        break;
    case RV_REDUCE_MAX:
        if (rr->fl) {
            if (!isnan(rr->acc.f) && (isnan(v.f) || v.f > rr->acc.f))
                rr->acc.f = v.f; /* a NaN, once in, stays */
        } else if (v.i > rr->acc.i)
            rr->acc.i = v.i;
        break;
    case RV_REDUCE_MIN:
        if (rr->fl) {
            if (!isnan(rr->acc.f) && (isnan(v.f) || v.f < rr->acc.f))
                rr->acc.f = v.f;
        } else if (v.i < rr->acc.i)
            rr->acc.i = v.i;
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
            rr->arg = x->s[r->axis_slot[0]].i;
        }
        rr->seen = true;
        break;
    }
    default:
        RV_UNREACHABLE();
    }
    return RV_OK;
}

/* Loops over reduction axis j and the ones inside it; the innermost axis
 * runs the body directly. */
static rv_status reduce_level(Exec *x, RedRun *rr, int j) {
    const Red *r = rr->r;
    rv_status st;
    if ((st = exec_block(x, &r->ext[j])) != RV_OK)
        return st;
    int64_t n = x->s[r->ext_slot[j]].i;
    int64_t *av = &x->s[r->axis_slot[j]].i;
    bool inner = j + 1 == r->naxes;
    for (int64_t v = 0; v < n; v++) {
        *av = v;
        if (!inner) {
            if ((st = reduce_level(x, rr, j + 1)) != RV_OK)
                return st;
            continue;
        }
        if (rr->first) {
            if ((st = exec_block(x, &r->inv)) != RV_OK)
                return st;
            rr->first = false;
        }
        for (const Ins *p = r->var.ins, *end = p + r->var.n; p < end; p++)
            if ((st = exec_ins(x, p)) != RV_OK)
                return st;
        if ((st = combine(x, rr)) != RV_OK)
            return st;
    }
    return RV_OK;
}

static rv_status exec_reduce(Exec *x, const Red *r, Val *out) {
    RedRun rr = {.r = r, .first = true, .fl = ir_is_float(r->dt), .arg = -1};
    switch (r->rk) {
    case RV_REDUCE_SUM:
        rr.acc = rr.fl ? (Val){.f = 0.0} : (Val){.i = 0};
        break;
    case RV_REDUCE_MAX:
        rr.acc =
            rr.fl ? (Val){.f = -INFINITY} : (Val){.i = r->dt == RV_I32 ? INT32_MIN : INT64_MIN};
        break;
    case RV_REDUCE_MIN:
        rr.acc = rr.fl ? (Val){.f = INFINITY} : (Val){.i = r->dt == RV_I32 ? INT32_MAX : INT64_MAX};
        break;
    default:
        break;
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
        if (to == RV_I32 && (i < INT32_MIN || i > INT32_MAX))
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

rv_status interp_eval_op(Interp *in, const Tensor *t, rv_array *out) {
    const Op *op = t->op;
    const Layout *l = in->tv[t->id].lay;
    Program p = {.arena = arena_new()};
    rv_status st = compile_op(in, t, &p);
    Val *slots = base_xmalloc(sizeof(Val) * (size_t)(p.nslots + 1));
    if (p.nslots)
        memcpy(slots, p.init, sizeof(Val) * (size_t)p.nslots);
    LayoutIter it;
    Exec x = {in, slots, t, it.idx};
    void *data = rv_array_data(out);
    for (bool ok = st == RV_OK && ir_layout_iter_begin(l, &it); ok;
         ok = ir_layout_iter_next(l, &it)) {
        for (int k = 0; k < t->ndim; k++)
            slots[p.out_slot[k]].i = it.idx[k];
        const Block *blk = &p.then_;
        int root = p.then_slot;
        const Expr *body = op->body;
        if (op->kind == OP_COND) {
            if ((st = exec_block(&x, &p.pred)) != RV_OK)
                break;
            if (!slots[p.pred_slot].i) {
                blk = &p.else_;
                root = p.else_slot;
                body = op->else_body;
            }
        }
        if ((st = exec_block(&x, blk)) != RV_OK ||
            (st = store(&x, data, it.rank[l->ndim], t->dtype, body->dtype, slots[root])) != RV_OK)
            break;
    }
    base_free(slots);
    arena_free(p.arena);
    return st;
}
