/*
 * compile.c — expression DAGs compiled to flat instruction lists for eval.c.
 *
 * Each operation is compiled once per run, after its inputs are computed
 * (so reads carry their tensor's data pointer and extents). Every DAG node
 * gets a slot; a block is the list of instructions computing the nodes one
 * root needs, operands first, so a subexpression shared within a block is
 * computed once per evaluation. Constants and sizes are slots filled before
 * the loop; axis variables are slots the binding loops write; neither
 * costs an instruction.
 *
 * A REDUCE is one instruction owning blocks of its own: one per axis
 * extent, and the body, split in two. The nodes that do not depend on the
 * reduction's axes form the invariant part, which eval.c runs on the first
 * iteration only: loop-invariant reads leave the inner loop, yet a
 * reduction that runs zero times evaluates nothing (so raises no error)
 * that its definition would not. The rest, the variant part, is marked
 * lane by lane (EvalIns.va ...) with whether each operand varies with the
 * iterations, so the innermost loop can run many iterations per
 * instruction. A node used in several blocks is simply computed in each;
 * it has one slot, and equal inputs give it equal values.
 */
#include <string.h>

#include "interp/interp.h"

typedef Vec(EvalIns) EvalInsVec;

typedef struct Pending {
    const Expr *e;
    EvalRed *r;
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
    EvalInsVec inv, var;
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

/* True when `e`, in the block being built, varies with the iterations of
 * the reduction whose body it is (never outside reduction bodies). */
static bool varies(BlockBuild *bb, const Expr *e) {
    return bb->red && depends(e, bb->red, bb->dep);
}

static rv_status compile_error(Compiler *c, rv_status st, const char *fmt, ...) RV_PRINTF(3, 4);
static rv_status compile_error(Compiler *c, rv_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    interp_verror(st, c->t, NULL, NULL, fmt, ap);
    va_end(ap);
    return st;
}

/* The opcode of a cast from the operand's dtype to `to`. */
static EvalOpc cast_opc(rv_dtype from, rv_dtype to) {
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
    EvalIns ins = {.dst = slot(c, e), .e = e, .k = e->kind};
    bool fl = ir_is_float(e->dtype);
    const ExprInfo *info = &ir_expr_info[e->kind];
    if (e->n >= 1 && e->kind != EX_READ && e->kind != EX_UFCALL && e->kind != EX_REDUCE)
        ins.a = slot(c, e->args[0]);
    if (e->n >= 2 && e->kind != EX_READ && e->kind != EX_UFCALL)
        ins.b = slot(c, e->args[1]);
    if (e->n >= 3 && e->kind == EX_SELECT)
        ins.c = slot(c, e->args[2]);
    ins.va = e->n >= 1 && varies(bb, e->args[0]);
    ins.vb = e->n >= 2 && varies(bb, e->args[1]);
    ins.vc = e->n >= 3 && varies(bb, e->args[2]);
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
#define CMP(k, text, prec, flags) case EX_##k:
#include "ir/ops.def"
#undef CMP
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
#define MATH(k, text, arity, libm, def) case EX_##k:
#include "ir/ops.def"
#undef MATH
        ins.op = I_MATH;
        break;
    case EX_READ:
    case EX_UFCALL: {
        int *args = arena_alloc(c->arena, sizeof(int) * (size_t)(e->n ? e->n : 1));
        uint8_t *vargs = arena_alloc(c->arena, (size_t)(e->n ? e->n : 1));
        for (int i = 0; i < e->n; i++) {
            args[i] = slot(c, e->args[i]);
            vargs[i] = varies(bb, e->args[i]);
        }
        ins.n = e->n;
        ins.args = args;
        ins.vargs = vargs;
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
        EvalRed *r = arena_alloc(c->arena, sizeof(EvalRed));
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
    if (bb->red && !varies(bb, e))
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

static EvalBlock finish_list(Compiler *c, EvalInsVec *v) {
    EvalBlock b = {
        v->len ? arena_memdup(c->arena, v->data, sizeof(EvalIns) * (size_t)v->len) : NULL, v->len};
    vec_free(v);
    return b;
}

/* Compiles the block computing `root`; for a reduction body (`red` set),
 * the nodes independent of its axes go to *inv. */
static rv_status compile_block(Compiler *c, const Expr *root, const Expr *red, EvalBlock *inv,
                               EvalBlock *var, int *root_slot, bool *root_varies) {
    BlockBuild bb = {.stamp = ++c->stamp, .red = red};
    if (red)
        bb.dep = base_xcalloc((size_t)c->in->m->n_exprs, 1);
    rv_status st = collect(c, &bb, root);
    if (root_varies)
        *root_varies = varies(&bb, root);
    base_free(bb.dep);
    EvalBlock bi = finish_list(c, &bb.inv), bv = finish_list(c, &bb.var);
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
                                    &p.r->ext_slot[i], NULL)) != RV_OK)
                return st;
        if ((st = compile_block(c, p.e->args[0], p.e, &p.r->inv, &p.r->var, &p.r->body,
                                &p.r->body_varies)) != RV_OK)
            return st;
        /* a nested reduction runs one iteration at a time */
        p.r->vec = true;
        for (int i = 0; i < p.r->var.n; i++)
            p.r->vec = p.r->vec && p.r->var.ins[i].op != I_REDUCE;
    }
    return RV_OK;
}

rv_status interp_compile(Interp *in, const Tensor *t, EvalProgram *p) {
    const Module *m = in->m;
    const Op *op = t->op;
    memset(p, 0, sizeof *p);
    p->arena = arena_new();
    Compiler c = {.in = in, .t = t, .arena = p->arena};
    c.slot_of = base_xmalloc(sizeof(int) * (size_t)(m->n_exprs + 1));
    c.mark = base_xcalloc((size_t)m->n_exprs + 1, sizeof(int));
    for (int i = 0; i < m->n_exprs; i++)
        c.slot_of[i] = -1;
    for (int k = 0; k < t->ndim; k++)
        p->out_slot[k] = slot(&c, t->axes[k]->var);
    rv_status st = compile_block(&c, op->body, NULL, NULL, &p->then_, &p->then_slot, NULL);
    if (st == RV_OK && op->pred) { /* OP_COND, or a conditional OP_RECURSE */
        st = compile_block(&c, op->pred, NULL, NULL, &p->pred, &p->pred_slot, NULL);
        if (st == RV_OK)
            st = compile_block(&c, op->else_body, NULL, NULL, &p->else_, &p->else_slot, NULL);
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

void interp_program_free(EvalProgram *p) {
    arena_free(p->arena);
    p->arena = NULL;
}
