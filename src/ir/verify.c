/*
 * verify.c — the IR verifier.
 *
 * Rechecks every invariant listed in ir.h on a whole module: typing of each
 * node, one index per tensor dimension, extents over outer axes only,
 * reduction axes bound by exactly one REDUCE and used only beneath it,
 * operation bodies that use only their own axes and read only tensors
 * defined before them, named outputs that are computed tensors of the
 * module, each named once. The constructors already enforce most of this; the
 * verifier exists for IR that passes and later layers rebuild, and runs
 * between passes in checked builds. The first violation is reported with
 * the tensor and expression where it was found.
 */
#include <string.h>

#include "ir/ir.h"

typedef struct Verifier {
    const Module *m;
    const Tensor *t;        /* the operation being checked */
    const char *where;      /* "body", "condition", ... */
    Vec(const Axis *) scope; /* reduction axes bound above the current node */
    PtrMap binder;          /* reduction axis -> the REDUCE that binds it */
} Verifier;

static rv_status fail(Verifier *v, const Expr *e, const char *fmt, ...) RV_PRINTF(3, 4);

static rv_status fail(Verifier *v, const Expr *e, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *s = e ? ir_expr_str(e) : NULL;
    rv_status st = base_error(RV_ERR_TYPE, "verify: %s%s%s%s: %s%s%s", v->t ? v->t->name : "",
                              v->t ? " (" : "", v->t ? v->where : "", v->t ? ")" : "", msg,
                              s ? " in: " : "", s ? s : "");
    base_free(s);
    return st;
}

static bool in_scope(const Verifier *v, const Axis *a) {
    for (int i = 0; i < v->scope.len; i++)
        if (v->scope.data[i] == a)
            return true;
    return false;
}

/* The dtype a node must have given its operands (ir.h typing rules). */
static rv_status check_types(Verifier *v, const Expr *e) {
    const ExprInfo *info = &ir_expr_info[e->kind];
    const Expr *a = e->n > 0 ? e->args[0] : NULL, *b = e->n > 1 ? e->args[1] : NULL;
    if (info->arity >= 0 && e->n != info->arity)
        return fail(v, e, "%s has %d operands, expected %d", info->name, e->n, info->arity);
    if (info->flags & F_LOGIC) {
        for (int i = 0; i < e->n; i++)
            if (e->args[i]->dtype != RV_BOOL)
                return fail(v, e, "%s operand is not a bool", info->name);
        return e->dtype == RV_BOOL ? RV_OK : fail(v, e, "%s must be bool", info->name);
    }
    if (info->flags & F_CMP) {
        if (a->dtype != b->dtype)
            return fail(v, e, "comparison of %s with %s", rv_dtype_name(a->dtype),
                        rv_dtype_name(b->dtype));
        return e->dtype == RV_BOOL ? RV_OK : fail(v, e, "comparison must be bool");
    }
    if ((info->flags & (F_ARITH | F_MATH)) && e->n >= 1) {
        for (int i = 0; i < e->n; i++)
            if (e->args[i]->dtype != e->dtype)
                return fail(v, e, "%s operand has dtype %s, result %s", info->name,
                            rv_dtype_name(e->args[i]->dtype), rv_dtype_name(e->dtype));
        if (e->dtype == RV_BOOL)
            return fail(v, e, "%s on bools", info->name);
        if ((info->flags & F_MATH) && !ir_is_float(e->dtype))
            return fail(v, e, "%s needs a float", info->name);
        if ((e->kind == EX_MOD || e->kind == EX_FLOORDIV || e->kind == EX_FLOORMOD) &&
            !ir_is_int(e->dtype))
            return fail(v, e, "%s needs integers", info->name);
        return RV_OK;
    }
    switch (e->kind) {
    case EX_CONST_INT:
        return ir_is_int(e->dtype) || e->dtype == RV_BOOL ? RV_OK : fail(v, e, "bad int dtype");
    case EX_CONST_FLOAT:
        return ir_is_float(e->dtype) ? RV_OK : fail(v, e, "bad float dtype");
    case EX_SIZE:
    case EX_VAR:
    case EX_UFCALL:
        return e->dtype == RV_I64 ? RV_OK : fail(v, e, "index values are i64");
    case EX_SELECT:
        if (a->dtype != RV_BOOL || e->args[1]->dtype != e->dtype || e->args[2]->dtype != e->dtype)
            return fail(v, e, "select needs a bool condition and arms of its dtype");
        return RV_OK;
    case EX_CAST:
        return e->dtype != RV_BOOL ? RV_OK : fail(v, e, "cast to bool");
    case EX_READ:
        return e->dtype == e->u.tensor->dtype ? RV_OK : fail(v, e, "read dtype differs");
    case EX_REDUCE:
        if (e->u.red.rk == RV_REDUCE_ARGMAX)
            return e->dtype == RV_I64 ? RV_OK : fail(v, e, "argmax is i64");
        return e->dtype == a->dtype && a->dtype != RV_BOOL ? RV_OK
                                                            : fail(v, e, "reduction dtype");
    default:
        return RV_OK;
    }
}

static rv_status check_expr(Verifier *v, const Expr *e);

static rv_status check_reduce(Verifier *v, const Expr *e) {
    int base = v->scope.len;
    for (int i = 0; i < e->u.red.naxes; i++) {
        const Axis *ax = e->u.red.axes[i];
        if (ax->kind != AX_REDUCE)
            return fail(v, e, "'%s' is not a reduction axis", ax->name);
        const Expr *other = ptrmap_get(&v->binder, ax);
        if (other && other != e)
            return fail(v, e, "reduction axis '%s' is bound by two reductions", ax->name);
        ptrmap_put(&v->binder, ax, (void *)e);
        if (!ax->extent || ax->extent->dtype != RV_I64)
            return fail(v, e, "reduction axis '%s' has no i64 extent", ax->name);
        rv_status st = check_expr(v, ax->extent); /* may use outer axes only */
        if (st != RV_OK)
            return st;
        vec_push(&v->scope, ax);
    }
    rv_status st = check_expr(v, e->args[0]);
    v->scope.len = base;
    return st;
}

static rv_status check_expr(Verifier *v, const Expr *e) {
    rv_status st = check_types(v, e);
    if (st != RV_OK)
        return st;
    switch (e->kind) {
    case EX_VAR: {
        const Axis *a = e->u.axis;
        if (a->kind == AX_SPATIAL && a->owner != v->t)
            return fail(v, e, "uses axis '%s' of another tensor", a->name);
        if (a->kind == AX_REDUCE && !in_scope(v, a))
            return fail(v, e, "reduction axis '%s' used outside its reduction", a->name);
        if (a->kind == AX_UFARG)
            return fail(v, e, "uses ufun argument '%s'", a->name);
        return RV_OK;
    }
    case EX_READ: {
        const Tensor *r = e->u.tensor;
        Recurse *g = ir_tensor_recurse(v->t);
        if (g && ir_tensor_recurse(r) == g) {
            /* within a group: the recursion rules instead of definition order */
            const char *msg = ir_recurse_read_error(g, v->t, e);
            if (msg)
                return fail(v, e, "%s", msg);
        } else if (r->id >= v->t->id) {
            return fail(v, e, "reads '%s', which is not defined before it", r->name);
        }
        if (e->n != r->ndim)
            return fail(v, e, "reads '%s' with %d indices, it has %d dimensions", r->name, e->n,
                        r->ndim);
        break;
    }
    case EX_UFCALL:
        if (e->n != e->u.uf->nargs)
            return fail(v, e, "applies '%s' to %d arguments", e->u.uf->name, e->n);
        break;
    case EX_REDUCE: {
        Recurse *g = ir_tensor_recurse(v->t);
        const char *msg = g ? ir_recurse_extent_error(g, e) : NULL;
        if (msg)
            return fail(v, e, "%s", msg);
        return check_reduce(v, e);
    }
    default:
        break;
    }
    for (int i = 0; i < e->n; i++) {
        if ((e->kind == EX_READ || e->kind == EX_UFCALL) && e->args[i]->dtype != RV_I64)
            return fail(v, e, "index %d is not i64", i);
        if ((st = check_expr(v, e->args[i])) != RV_OK)
            return st;
    }
    return RV_OK;
}

/* Extents of a tensor's dimensions use only outer dimensions. */
static rv_status check_tensor_axes(Verifier *v, const Tensor *t) {
    for (int i = 0; i < t->ndim; i++) {
        const Axis *a = t->axes[i];
        if (a->kind != AX_SPATIAL || a->owner != t || a->pos != i || !a->dim)
            return fail(v, NULL, "dimension %d is malformed", i);
        if (!a->extent || a->extent->dtype != RV_I64)
            return fail(v, NULL, "dimension '%s' has no i64 extent", a->name);
        for (int j = i; j < t->ndim; j++)
            if (ir_uses_axis(a->extent, t->axes[j]))
                return fail(v, a->extent, "the extent of '%s' depends on '%s', not outer to it",
                            a->name, t->axes[j]->name);
        v->where = "extent";
        rv_status st = check_expr(v, a->extent);
        if (st != RV_OK)
            return st;
        if (t->pad[i] < 1)
            return fail(v, NULL, "dimension '%s' has padding %d", a->name, t->pad[i]);
    }
    return RV_OK;
}

/* A compute's body, or a conditional's condition and branches (the
 * then-branch is op->body). */
static rv_status check_body(Verifier *v, const Tensor *t, bool cond) {
    const Op *op = t->op;
    rv_status st;
    if (cond) {
        if (!op->pred || op->pred->dtype != RV_BOOL || !op->else_body)
            return fail(v, NULL, "a conditional needs a bool condition and two branches");
        v->where = "condition";
        if ((st = check_expr(v, op->pred)) != RV_OK)
            return st;
        v->where = "else-branch";
        if ((st = check_expr(v, op->else_body)) != RV_OK)
            return st;
        if (op->else_body->dtype != t->dtype)
            return fail(v, op->else_body, "else-branch dtype differs from the tensor's");
    }
    if (!op->body)
        return fail(v, NULL, "has no body");
    v->where = cond ? "then-branch" : "body";
    if ((st = check_expr(v, op->body)) != RV_OK)
        return st;
    if (op->body->dtype != t->dtype)
        return fail(v, op->body, "body dtype %s differs from the tensor's %s",
                    rv_dtype_name(op->body->dtype), rv_dtype_name(t->dtype));
    return RV_OK;
}

static rv_status check_op(Verifier *v, const Tensor *t) {
    const Op *op = t->op;
    if (!op || op->out != t)
        return fail(v, NULL, "has no operation");
    if (t->param && op->kind != OP_INPUT)
        return fail(v, NULL, "a computed tensor is marked param (only inputs are)");
    switch (op->kind) {
    case OP_INPUT:
        return op->body ? fail(v, NULL, "an input has a body") : RV_OK;
    case OP_COND:
        return check_body(v, t, true);
    case OP_COMPUTE:
        return check_body(v, t, false);
    case OP_EXTERN: {
        const ExternKernel *k = ir_extern_lookup(op->kernel);
        if (!k)
            return fail(v, NULL, "unknown extern kernel '%s'", op->kernel ? op->kernel : "");
        for (int i = 0; i < op->nin; i++)
            if (op->inputs[i]->id >= t->id)
                return fail(v, NULL, "extern argument '%s' is not defined before it",
                            op->inputs[i]->name);
        const char *msg = k->check((Op *)op);
        return msg ? fail(v, NULL, "extern %s: %s", op->kernel, msg) : RV_OK;
    }
    case OP_RECURSE: {
        const Recurse *g = op->rec;
        if (!g || !g->complete || !g->st)
            return fail(v, NULL, "a recursion member outside a complete group");
        bool found = false;
        for (int i = 0; i < g->members.len; i++)
            found = found || g->members.data[i] == t;
        if (!found)
            return fail(v, NULL, "not listed among the members of recursion '%s'", g->name);
        if (t->ndim < 1 || t->axes[0]->extent != ir_size(g->module, g->st->nodes))
            return fail(v, NULL, "axis 0 of a member of '%s' must range over the nodes of '%s'",
                        g->name, g->st->name);
        for (int i = 1; i < t->ndim; i++)
            if (ir_uses_axis(t->axes[i]->extent, t->axes[0]))
                return fail(v, NULL, "the extent of '%s' uses the node axis", t->axes[i]->name);
        return check_body(v, t, op->pred != NULL);
    }
    default:
        RV_UNREACHABLE();
    }
}

static rv_status check_ufun(Verifier *v, const Ufun *f) {
    if (!f->complete || !f->lo || !f->hi)
        return fail(v, NULL, "ufun '%s' is incomplete", f->name);
    for (int i = 0; i < f->nargs; i++) {
        const Axis *a = f->args[i];
        if (a->kind != AX_UFARG || !a->extent)
            return fail(v, NULL, "ufun '%s' argument %d is malformed", f->name, i);
        for (int j = i; j < f->nargs; j++)
            if (ir_uses_axis(a->extent, f->args[j]))
                return fail(v, a->extent, "ufun '%s': extent of '%s' uses '%s'", f->name, a->name,
                            f->args[j]->name);
    }
    if (f->lo->dtype != RV_I64 || f->hi->dtype != RV_I64)
        return fail(v, NULL, "ufun '%s' has a non-integer value range", f->name);
    if (!f->lo_dom || !f->hi_dom || !ir_is_int(f->lo_dom->dtype) || !ir_is_int(f->hi_dom->dtype))
        return fail(v, NULL, "ufun '%s' has no value range over its domain", f->name);
    for (int i = 0; i < f->nargs; i++)
        if (ir_uses_axis(f->lo_dom, f->args[i]) || ir_uses_axis(f->hi_dom, f->args[i]))
            return fail(v, NULL, "ufun '%s': the range over its domain uses '%s'", f->name,
                        f->args[i]->name);
    return RV_OK;
}

rv_status ir_verify(const Module *m) {
    Verifier v = {.m = m};
    rv_status st = RV_OK;
    for (int i = 0; i < m->sizes.len && st == RV_OK; i++)
        if (m->sizes.data[i]->lo > m->sizes.data[i]->hi || m->sizes.data[i]->lo < 0)
            st = fail(&v, NULL, "size '%s' has an empty range", m->sizes.data[i]->name);
    for (int i = 0; i < m->ufuns.len && st == RV_OK; i++)
        st = check_ufun(&v, m->ufuns.data[i]);
    for (int i = 0; i < m->tensors.len && st == RV_OK; i++) {
        const Tensor *t = m->tensors.data[i];
        v.t = t;
        if (!t->complete)
            st = fail(&v, NULL, "definition is incomplete");
        else if (t->id != i)
            st = fail(&v, NULL, "tensor id %d at position %d", t->id, i);
        else if ((st = check_tensor_axes(&v, t)) == RV_OK)
            st = check_op(&v, t);
    }
    v.t = NULL;
    for (int i = 0; i < m->outputs.len && st == RV_OK; i++) {
        const Tensor *t = m->outputs.data[i];
        const char *why = ir_output_error(m, t, (const Tensor *const *)m->outputs.data, i);
        if (why)
            st = fail(&v, NULL, "output '%s' %s", t->name, why);
    }
    vec_free(&v.scope);
    ptrmap_free(&v.binder);
    return st;
}
