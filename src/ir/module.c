/*
 * module.c — the objects of a tensor program and the public builders.
 *
 * A module holds size variables, uninterpreted functions, named dimensions
 * and tensors with the operations that define them, all in one arena and
 * one namespace. Definitions are built in two steps (begin: create the
 * axes, so extents and bodies can mention them; end: attach extents or the
 * body and check), which is how ragged layouts (`l < len[b]`) and compute
 * bodies refer to their own dimensions.
 *
 * The checks here are the language's checks too: the front end builds IR
 * through these functions and attaches its source location to whatever
 * message they leave in the last error.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/layout.h"

const char *const ir_op_kind_name[OP_COUNT] = {"input", "compute", "cond", "extern", "recurse"};


rv_module *rv_module_new(void) {
    Module *m = base_xcalloc(1, sizeof(Module));
    m->arena = arena_new();
    interner_init(&m->names);
    return m;
}

void rv_module_free(rv_module *m) {
    if (!m)
        return;
    base_free(m->table);
    vec_free(&m->sizes);
    vec_free(&m->ufuns);
    vec_free(&m->tensors);
    for (int i = 0; i < m->recurses.len; i++)
        vec_free(&m->recurses.data[i]->members);
    vec_free(&m->structures);
    vec_free(&m->recurses);
    vec_free(&m->dims);
    vec_free(&m->scheds);
    vec_free(&m->outputs);
    strmap_free(&m->by_name);
    ptrmap_free(&m->kind_of);
    strmap_free(&m->dim_by_name);
    interner_free(&m->names);
    arena_free(m->arena);
    base_free(m);
}

const char *ir_name(Module *m, const char *s) {
    return intern(&m->names, s);
}

static bool valid_name(const char *s) {
    if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return false;
    return true;
}

rv_status ir_declare(Module *m, const char *name, void *obj, NameKind k) {
    if (!valid_name(name))
        return base_error(RV_ERR_TYPE, "'%s' is not a valid name", name ? name : "(null)");
    if (strmap_has(&m->by_name, name))
        return base_error(RV_ERR_TYPE, "redefinition of '%s'", name);
    strmap_put(&m->by_name, ir_name(m, name), obj);
    ptrmap_put(&m->kind_of, obj, (void *)(uintptr_t)(k + 1));
    return RV_OK;
}

Dim *ir_dim(Module *m, const char *name) {
    Dim *d = strmap_get(&m->dim_by_name, name);
    if (d)
        return d;
    d = arena_alloc(m->arena, sizeof(Dim));
    d->name = ir_name(m, name);
    d->id = m->dims.len;
    vec_push(&m->dims, d);
    strmap_put(&m->dim_by_name, d->name, d);
    return d;
}

Axis *ir_axis_new(Module *m, const char *name, AxisKind k, Expr *extent) {
    Axis *a = arena_alloc(m->arena, sizeof(Axis));
    a->name = ir_name(m, name);
    a->kind = k;
    a->extent = extent;
    a->id = m->n_axes++;
    a->var = ir_var(m, a);
    return a;
}

/* Extents are i64 expressions; i32 ones are widened, others rejected. */
static Expr *as_extent(Module *m, Expr *e, const char *what, const char *name) {
    if (!e)
        return NULL;
    if (!ir_is_int(e->dtype)) {
        base_error(RV_ERR_TYPE, "the extent of %s '%s' must be an integer, got %s", what, name,
                   rv_dtype_name(e->dtype));
        return NULL;
    }
    return ir_cast(m, RV_I64, e);
}

typedef struct VarCheck {
    Axis *const *allowed; /* axes that may appear */
    int nallowed;
    const Axis *bad; /* first axis not allowed */
    bool has_read, has_reduce;
} VarCheck;

static void var_check_fn(const Expr *e, void *ctx) {
    VarCheck *vc = ctx;
    if (e->kind == EX_READ)
        vc->has_read = true;
    if (e->kind == EX_REDUCE)
        vc->has_reduce = true;
    if (e->kind != EX_VAR || vc->bad)
        return;
    for (int i = 0; i < vc->nallowed; i++)
        if (vc->allowed[i] == e->u.axis)
            return;
    vc->bad = e->u.axis;
}

/* Checks that an extent uses only `outer` axes (and no tensor reads):
 * extents are index arithmetic over sizes, UFs and outer dimensions. */
static rv_status check_extent(Expr *ext, Axis *const *outer, int nouter, const char *what,
                              const char *owner, const Axis *self) {
    VarCheck vc = {outer, nouter, NULL, false, false};
    ir_visit(ext, var_check_fn, &vc);
    if (vc.has_read || vc.has_reduce)
        return base_error(RV_ERR_TYPE, "the extent of %s '%s' of '%s' may not read tensors", what,
                          self->name, owner);
    if (vc.bad)
        return base_error(RV_ERR_TYPE,
                          "the extent of %s '%s' of '%s' depends on '%s', which is not outer to it",
                          what, self->name, owner, vc.bad->name);
    return RV_OK;
}

/* ---- sizes ---- */

rv_size *rv_size_new(rv_module *m, const char *name, int64_t lo, int64_t hi) {
    if (lo < 0) {
        base_error(RV_ERR_TYPE, "size '%s' has a negative lower bound %lld", name, (long long)lo);
        return NULL;
    }
    if (lo > hi) {
        base_error(RV_ERR_TYPE, "size '%s' has an empty range %lld..%lld", name, (long long)lo,
                   (long long)hi);
        return NULL;
    }
    Size *s = arena_alloc(m->arena, sizeof(Size));
    if (ir_declare(m, name, s, NAME_SIZE) != RV_OK)
        return NULL;
    s->name = ir_name(m, name);
    s->lo = lo;
    s->hi = hi;
    s->id = m->sizes.len;
    vec_push(&m->sizes, s);
    return s;
}

/* ---- uninterpreted functions ---- */

rv_ufun *rv_ufun_begin(rv_module *m, const char *name, int nargs, const char *const *arg_names) {
    if (nargs < 1 || nargs > RV_MAX_DIMS) {
        base_error(RV_ERR_TYPE, "ufun '%s' must take 1 to %d arguments", name, RV_MAX_DIMS);
        return NULL;
    }
    Ufun *f = arena_alloc(m->arena, sizeof(Ufun));
    if (ir_declare(m, name, f, NAME_UFUN) != RV_OK)
        return NULL;
    f->name = ir_name(m, name);
    f->module = m;
    f->nargs = nargs;
    f->args = arena_alloc(m->arena, sizeof(Axis *) * (size_t)nargs);
    for (int i = 0; i < nargs; i++) {
        f->args[i] = ir_axis_new(m, arg_names[i], AX_UFARG, NULL);
        f->args[i]->pos = i;
    }
    f->id = m->ufuns.len;
    vec_push(&m->ufuns, f);
    return f;
}

rv_expr *rv_ufun_arg(rv_ufun *f, int i) {
    return f && i >= 0 && i < f->nargs ? f->args[i]->var : NULL;
}

/* A UF's value range may use sizes, constants and the UF's own arguments
 * (`ufun pred[n < N] in 0..n - 1`: a DAG's predecessors come before each
 * node); it bounds index arithmetic, so it is an integer expression. */
static Expr *check_range_bound(Module *m, Ufun *f, Expr *e, const char *which) {
    if (!e)
        return NULL;
    if (!ir_is_int(e->dtype)) {
        base_error(RV_ERR_TYPE, "the %s bound of ufun '%s' must be an integer, got %s", which,
                   f->name, rv_dtype_name(e->dtype));
        return NULL;
    }
    VarCheck vc = {f->args, f->nargs, NULL, false, false};
    ir_visit(e, var_check_fn, &vc);
    if (vc.bad || vc.has_read || vc.has_reduce) {
        base_error(RV_ERR_TYPE,
                   "the %s bound of ufun '%s' may use only sizes, constants and its arguments",
                   which, f->name);
        return NULL;
    }
    return ir_cast(m, RV_I64, e);
}

rv_ufun *rv_ufun_end(rv_ufun *f, rv_expr *const *extents, rv_expr *lo, rv_expr *hi) {
    if (!f || !lo || !hi)
        return NULL;
    Module *m = f->module;
    for (int i = 0; i < f->nargs; i++) {
        Axis *a = f->args[i];
        Expr *ext = as_extent(m, extents[i], "argument", a->name);
        if (!ext || check_extent(ext, f->args, i, "argument", f->name, a) != RV_OK)
            return NULL;
        a->extent = ext;
    }
    if (ir_layout_check_bounded("argument", f->name, f->nargs, f->args) != RV_OK)
        return NULL;
    if (!(f->lo = check_range_bound(m, f, lo, "lower")) ||
        !(f->hi = check_range_bound(m, f, hi, "upper")))
        return NULL;
    f->lo_dom = ir_bound_over_axes(m, f->lo, f->args, f->nargs, false);
    f->hi_dom = ir_bound_over_axes(m, f->hi, f->args, f->nargs, true);
    if (!f->lo_dom || !f->hi_dom) {
        base_error(RV_ERR_TYPE, "the value range of ufun '%s' has no bound over its domain",
                   f->name);
        return NULL;
    }
    int64_t a, b, c, d;
    if (ir_int_bounds(f->lo, &a, &b) && ir_int_bounds(f->hi, &c, &d) && a > d) {
        base_error(RV_ERR_TYPE, "ufun '%s' has an empty value range", f->name);
        return NULL;
    }
    f->complete = true;
    return f;
}

/* ---- tensors: inputs ---- */

static Tensor *tensor_new(Module *m, const char *name, rv_dtype t, int ndim,
                          const char *const *dim_names, OpKind kind) {
    if (t != RV_I32 && t != RV_I64 && t != RV_F32 && t != RV_F64) {
        base_error(RV_ERR_TYPE, "tensor '%s' has element type %s; use f32, f64, i32 or i64",
                   name, rv_dtype_name(t));
        return NULL;
    }
    if (ndim < 0 || ndim > RV_MAX_DIMS) {
        base_error(RV_ERR_TYPE, "tensor '%s' has %d dimensions; at most %d are supported", name,
                   ndim, RV_MAX_DIMS);
        return NULL;
    }
    Tensor *x = arena_alloc(m->arena, sizeof(Tensor));
    if (ir_declare(m, name, x, NAME_TENSOR) != RV_OK)
        return NULL;
    x->name = ir_name(m, name);
    x->dtype = t;
    x->ndim = ndim;
    x->axes = arena_alloc(m->arena, sizeof(Axis *) * (size_t)(ndim ? ndim : 1));
    x->pad = arena_alloc(m->arena, sizeof(int) * (size_t)(ndim ? ndim : 1));
    for (int i = 0; i < ndim; i++) {
        char auto_name[16];
        const char *dn = dim_names && dim_names[i] ? dim_names[i] : NULL;
        if (!dn) {
            snprintf(auto_name, sizeof auto_name, "_%d", i);
            dn = auto_name;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(x->axes[j]->name, dn) == 0) {
                base_error(RV_ERR_TYPE, "tensor '%s' names dimension '%s' twice", name, dn);
                return NULL;
            }
        Axis *a = ir_axis_new(m, dn, AX_SPATIAL, NULL);
        a->pos = i;
        a->owner = x;
        /* unnamed dimensions get a dimension of their own: "X._0" */
        a->dim = dn[0] == '_' ? ir_dim(m, arena_printf(m->arena, "%s.%s", name, dn)) : ir_dim(m, dn);
        x->axes[i] = a;
        x->pad[i] = 1;
    }
    x->op = arena_alloc(m->arena, sizeof(Op));
    x->op->kind = kind;
    x->op->out = x;
    x->module = m;
    x->id = m->tensors.len;
    vec_push(&m->tensors, x);
    return x;
}

rv_tensor *rv_input_begin(rv_module *m, const char *name, rv_dtype t, int ndim,
                          const char *const *dim_names) {
    return tensor_new(m, name, t, ndim, dim_names, OP_INPUT);
}

rv_expr *rv_input_var(rv_tensor *t, int dim) {
    return t && dim >= 0 && dim < t->ndim ? t->axes[dim]->var : NULL;
}

/* What a tensor's storage needs (layout.h): bounded ragged extents, no
 * padding outside a ragged dimension. */
static rv_status check_storage(const Tensor *t) {
    Expr *exts[RV_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        exts[i] = t->axes[i]->extent;
    int level;
    rv_status st = ir_layout_check_bounded("dimension", t->name, t->ndim, t->axes);
    return st != RV_OK ? st : ir_layout_check_pads(t->name, t->ndim, t->axes, exts, t->pad, &level);
}

/* Sets the extents of a tensor's dimensions, checking each uses only outer
 * dimensions, and the storage padding multiples. */
static rv_status set_extents(Module *m, Tensor *t, rv_expr *const *extents, const int *pads) {
    for (int i = 0; i < t->ndim; i++) {
        Axis *a = t->axes[i];
        Expr *ext = as_extent(m, extents[i], "dimension", a->name);
        if (!ext)
            return base_error_status() ? base_error_status() : RV_ERR_TYPE;
        rv_status st = check_extent(ext, t->axes, i, "dimension", t->name, a);
        if (st != RV_OK)
            return st;
        a->extent = ext;
        int pad = pads ? pads[i] : 1;
        if (pad < 1 || pad > (1 << 20))
            return base_error(RV_ERR_TYPE, "dimension '%s' of '%s': padding %d must be in 1..%d",
                              a->name, t->name, pad, 1 << 20);
        t->pad[i] = pad;
    }
    return check_storage(t);
}

rv_tensor *rv_input_end(rv_tensor *t, rv_expr *const *extents, const int *pads) {
    if (!t)
        return NULL;
    for (int i = 0; i < t->ndim; i++)
        if (!extents[i])
            return NULL;
    if (set_extents(t->module, t, extents, pads) != RV_OK)
        return NULL;
    t->complete = true;
    return t;
}

rv_tensor *rv_input_new(rv_module *m, const char *name, rv_dtype t, int ndim,
                        const rv_dimspec *dims) {
    const char *names[RV_MAX_DIMS];
    Expr *exts[RV_MAX_DIMS];
    int pads[RV_MAX_DIMS];
    if (ndim < 0 || ndim > RV_MAX_DIMS) {
        base_error(RV_ERR_TYPE, "tensor '%s' has %d dimensions; at most %d are supported", name,
                   ndim, RV_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < ndim; i++) {
        names[i] = dims[i].name;
        exts[i] = dims[i].extent;
        pads[i] = dims[i].pad ? dims[i].pad : 1;
    }
    return rv_input_end(rv_input_begin(m, name, t, ndim, names), exts, pads);
}

/* ---- compute definitions ---- */

rv_compute *rv_compute_begin(rv_module *m, const char *name, int ndim,
                             const char *const *axis_names, rv_expr *const *extents) {
    Tensor *t = tensor_new(m, name, RV_F32, ndim, axis_names, OP_COMPUTE);
    if (!t)
        return NULL;
    for (int i = 0; i < ndim; i++)
        t->axes[i]->extent = extents ? extents[i] : NULL;
    ComputeBuilder *c = arena_alloc(m->arena, sizeof(ComputeBuilder));
    c->m = m;
    c->t = t;
    return c;
}

rv_expr *rv_compute_var(rv_compute *c, int i) {
    return c && i >= 0 && i < c->t->ndim ? c->t->axes[i]->var : NULL;
}

void rv_compute_set_extent(rv_compute *c, int i, rv_expr *extent) {
    if (c && i >= 0 && i < c->t->ndim)
        c->t->axes[i]->extent = extent;
}

void rv_compute_set_dtype(rv_compute *c, rv_dtype t) {
    if (!c)
        return;
    c->has_dtype = true;
    c->dtype = t;
}

void rv_compute_set_pad(rv_compute *c, int i, int pad) {
    if (c && i >= 0 && i < c->t->ndim)
        c->t->pad[i] = pad;
}

typedef struct FindVar {
    const Axis *a;
    Expr *found; /* the first READ / UFCALL indexing by the bare variable */
    int pos;
} FindVar;

/* Pre-order, left to right, so "the first use" reads as in the source. */
static void find_bare_use(Expr *e, FindVar *fv, PtrMap *seen) {
    if (fv->found || ptrmap_has(seen, e))
        return;
    ptrmap_put(seen, e, e);
    if (e->kind == EX_READ || e->kind == EX_UFCALL) {
        for (int i = 0; i < e->n; i++)
            if (e->args[i]->kind == EX_VAR && e->args[i]->u.axis == fv->a) {
                fv->found = e;
                fv->pos = i;
                return;
            }
    }
    for (int i = 0; i < e->n; i++)
        find_bare_use(e->args[i], fv, seen);
}

Expr *ir_infer_extent(Module *m, Expr *body, Axis *a) {
    FindVar fv = {a, NULL, 0};
    PtrMap seen = {0};
    find_bare_use(body, &fv, &seen);
    ptrmap_free(&seen);
    if (!fv.found)
        return NULL;
    Axis *const *axes = fv.found->kind == EX_READ ? fv.found->u.tensor->axes : fv.found->u.uf->args;
    Expr *ext = axes[fv.pos]->extent;
    if (!ext)
        return NULL;
    /* the extent may mention outer dimensions of the read tensor: replace
     * them by the indices this read uses */
    PtrMap map = {0};
    for (int i = 0; i < fv.pos; i++)
        ptrmap_put(&map, axes[i], fv.found->args[i]);
    Expr *r = ir_substitute(m, ext, &map);
    ptrmap_free(&map);
    return r;
}

typedef struct BodyCheck {
    const Tensor *t;
    const Axis *foreign; /* a spatial axis of another tensor */
    bool self_read;
    bool has_read, has_reduce;
} BodyCheck;

static void body_check_fn(const Expr *e, void *ctx) {
    BodyCheck *bc = ctx;
    if (e->kind == EX_READ) {
        bc->has_read = true;
        if (e->u.tensor == bc->t)
            bc->self_read = true;
    }
    if (e->kind == EX_REDUCE)
        bc->has_reduce = true;
    if (e->kind == EX_VAR && !bc->foreign) {
        const Axis *a = e->u.axis;
        if (a->kind == AX_UFARG || (a->kind == AX_SPATIAL && a->owner != bc->t))
            bc->foreign = a;
    }
}

static rv_status check_body(Tensor *t, Expr *body, const char *what, bool allow_bool) {
    BodyCheck bc = {t, NULL, false, false, false};
    ir_visit(body, body_check_fn, &bc);
    if (bc.self_read && t->op->kind != OP_RECURSE)
        return base_error(RV_ERR_TYPE,
                          "'%s' reads itself; recursion needs a recursive operation", t->name);
    if (bc.foreign)
        return base_error(RV_ERR_TYPE, "the %s of '%s' uses '%s', which is not one of its axes",
                          what, t->name, bc.foreign->name);
    if (body->dtype == RV_BOOL && !allow_bool)
        return base_error(RV_ERR_TYPE,
                          "the %s of '%s' is a bool; tensors hold numbers (use select(c, 1, 0))",
                          what, t->name);
    return RV_OK;
}

/* Infers omitted extents and checks them, outermost first. */
static rv_status finish_axes(Module *m, Tensor *t, Expr *const *bodies, int nbodies) {
    for (int i = 0; i < t->ndim; i++) {
        Axis *a = t->axes[i];
        Expr *ext = a->extent;
        for (int b = 0; !ext && b < nbodies; b++)
            if (bodies[b])
                ext = ir_infer_extent(m, bodies[b], a);
        if (!ext)
            return base_error(RV_ERR_TYPE,
                              "cannot infer the extent of axis '%s' of '%s': it never indexes a "
                              "tensor directly; write '%s < EXTENT'",
                              a->name, t->name, a->name);
        ext = as_extent(m, ext, "axis", a->name);
        if (!ext)
            return RV_ERR_TYPE;
        rv_status st = check_extent(ext, t->axes, i, "axis", t->name, a);
        if (st != RV_OK)
            return st;
        a->extent = ext;
    }
    return check_storage(t);
}

static Expr *apply_dtype(ComputeBuilder *c, Expr *body) {
    return c->has_dtype ? ir_cast(c->m, c->dtype, body) : body;
}

rv_tensor *rv_compute_end(rv_compute *c, rv_expr *body) {
    if (!c || !body)
        return NULL;
    Tensor *t = c->t;
    if (finish_axes(c->m, t, &body, 1) != RV_OK || check_body(t, body, "body", false) != RV_OK)
        return NULL;
    if (!(body = apply_dtype(c, body)))
        return NULL;
    t->op->body = body;
    t->dtype = body->dtype;
    t->complete = true;
    return t;
}

typedef struct PredCheck {
    bool bad;
} PredCheck;

static void pred_check_fn(const Expr *e, void *ctx) {
    if (e->kind == EX_READ || e->kind == EX_REDUCE)
        ((PredCheck *)ctx)->bad = true;
}

/* A condition is a bool over indices, sizes and UFs (`why` ends the
 * message about a tensor read). */
static rv_status check_pred(const Tensor *t, const Expr *pred, const char *why) {
    if (pred->dtype != RV_BOOL)
        return base_error(RV_ERR_TYPE, "the condition of '%s' must be a bool, got %s", t->name,
                          rv_dtype_name(pred->dtype));
    PredCheck pc = {false};
    ir_visit(pred, pred_check_fn, &pc);
    if (pc.bad)
        return base_error(RV_ERR_TYPE,
                          "the condition of '%s' may use only indices, sizes and ufuns (no tensor "
                          "reads)%s",
                          t->name, why);
    return RV_OK;
}

rv_tensor *rv_compute_end_cond(rv_compute *c, rv_expr *pred, rv_expr *then_body,
                               rv_expr *else_body) {
    if (!c || !pred || !then_body || !else_body)
        return NULL;
    Tensor *t = c->t;
    if (check_pred(t, pred, "") != RV_OK)
        return NULL;
    /* one dtype for both branches, with the usual promotion */
    Expr *sel = ir_select(c->m, pred, then_body, else_body);
    if (!sel)
        return NULL;
    then_body = sel->args[1];
    else_body = sel->args[2];
    Expr *bodies[3] = {then_body, else_body, pred};
    if (finish_axes(c->m, t, bodies, 3) != RV_OK ||
        check_body(t, then_body, "then-branch", false) != RV_OK ||
        check_body(t, else_body, "else-branch", false) != RV_OK ||
        check_body(t, pred, "condition", true) != RV_OK)
        return NULL;
    if (!(then_body = apply_dtype(c, then_body)) || !(else_body = apply_dtype(c, else_body)))
        return NULL;
    t->op->kind = OP_COND;
    t->op->pred = pred;
    t->op->body = then_body;
    t->op->else_body = else_body;
    t->dtype = then_body->dtype;
    t->complete = true;
    return t;
}

/* ---- members of recursion groups (recurse.c declares them) ---- */

rv_tensor *rv_recurse_define(rv_compute *c, rv_expr *pred, rv_expr *body, rv_expr *else_body) {
    if (!c || !body || (pred && !else_body))
        return NULL;
    Tensor *t = c->t;
    if (t->op->kind != OP_RECURSE || t->complete) {
        base_error(RV_ERR_TYPE, "'%s' is not a member of a recursion group awaiting its body",
                   t->name);
        return NULL;
    }
    if (pred && check_pred(t, pred, ": what a recursion computes must depend only on the "
                                    "structure") != RV_OK)
        return NULL;
    /* the extents were given (rv_recurse_add); check them like inferred ones */
    Expr *bodies[3] = {body, else_body, pred};
    if (finish_axes(c->m, t, bodies, 3) != RV_OK ||
        check_body(t, body, pred ? "then-branch" : "body", false) != RV_OK ||
        (pred && (check_body(t, else_body, "else-branch", false) != RV_OK ||
                  check_body(t, pred, "condition", true) != RV_OK)))
        return NULL;
    for (int i = 1; i < t->ndim; i++)
        if (ir_uses_axis(t->axes[i]->extent, t->axes[0])) {
            base_error(RV_ERR_TYPE,
                       "the extent of axis '%s' of '%s' uses the node axis '%s': a recursive "
                       "tensor has the same shape at every node",
                       t->axes[i]->name, t->name, t->axes[0]->name);
            return NULL;
        }
    /* the member's dtype was declared, since bodies read it before it is defined */
    body = ir_cast(c->m, t->dtype, body);
    else_body = pred ? ir_cast(c->m, t->dtype, else_body) : NULL;
    if (!body || (pred && !else_body))
        return NULL;
    t->op->body = body;
    t->op->pred = pred;
    t->op->else_body = else_body;
    t->complete = true;
    return t;
}

/* ---- extern operations ---- */

rv_tensor *rv_extern_new(rv_module *m, const char *name, const char *kernel, int nin,
                         rv_tensor *const *inputs, rv_dtype t, int ndim, const rv_dimspec *dims) {
    const ExternKernel *k = ir_extern_lookup(kernel);
    if (!k) {
        base_error(RV_ERR_TYPE, "unknown extern kernel \"%s\"", kernel);
        return NULL;
    }
    for (int i = 0; i < nin; i++)
        if (!inputs[i])
            return NULL;
    const char *names[RV_MAX_DIMS];
    Expr *exts[RV_MAX_DIMS];
    int pads[RV_MAX_DIMS];
    if (ndim < 0 || ndim > RV_MAX_DIMS) {
        base_error(RV_ERR_TYPE, "tensor '%s' has %d dimensions; at most %d are supported", name,
                   ndim, RV_MAX_DIMS);
        return NULL;
    }
    for (int i = 0; i < ndim; i++) {
        names[i] = dims[i].name;
        if (!(exts[i] = dims[i].extent))
            return NULL;
        pads[i] = dims[i].pad ? dims[i].pad : 1;
    }
    Tensor *x = tensor_new(m, name, t, ndim, names, OP_EXTERN);
    if (!x || set_extents(m, x, exts, pads) != RV_OK)
        return NULL;
    x->op->kernel = ir_name(m, kernel);
    x->op->nin = nin;
    x->op->inputs = arena_memdup(m->arena, inputs, sizeof(Tensor *) * (size_t)(nin ? nin : 1));
    const char *msg = k->check(x->op);
    if (msg) {
        base_error(RV_ERR_TYPE, "extern \"%s\" for '%s': %s", kernel, name, msg);
        return NULL;
    }
    x->complete = true;
    return x;
}

/* ---- lookups and queries ---- */

/* The object named `name` if it is of kind k and was completed into its
 * list (a definition that failed half-way stays out): O(1), as the checker
 * looks names up once per definition. */
void *ir_lookup(const Module *m, const char *name, NameKind k) {
    void *obj = strmap_get(&m->by_name, name);
    if (!obj || (uintptr_t)ptrmap_get(&m->kind_of, obj) != (uintptr_t)k + 1)
        return NULL;
    switch (k) {
    case NAME_TENSOR: {
        const Tensor *t = obj;
        return t->id < m->tensors.len && m->tensors.data[t->id] == t ? obj : NULL;
    }
    case NAME_SIZE: {
        const Size *s = obj;
        return s->id < m->sizes.len && m->sizes.data[s->id] == s ? obj : NULL;
    }
    case NAME_STRUCT: {
        const Structure *st = obj;
        return st->id < m->structures.len && m->structures.data[st->id] == st ? obj : NULL;
    }
    case NAME_RECURSE: {
        const Recurse *r = obj;
        return r->id < m->recurses.len && m->recurses.data[r->id] == r ? obj : NULL;
    }
    default: {
        const Ufun *f = obj;
        return f->id < m->ufuns.len && m->ufuns.data[f->id] == f ? obj : NULL;
    }
    }
}

rv_tensor *rv_module_tensor(const rv_module *m, const char *name) {
    return ir_lookup(m, name, NAME_TENSOR);
}

rv_size *rv_module_size(const rv_module *m, const char *name) {
    return ir_lookup(m, name, NAME_SIZE);
}

rv_ufun *rv_module_ufun(const rv_module *m, const char *name) {
    return ir_lookup(m, name, NAME_UFUN);
}

int rv_module_num_sizes(const rv_module *m) {
    return m->sizes.len;
}

rv_size *rv_module_size_at(const rv_module *m, int i) {
    return i >= 0 && i < m->sizes.len ? m->sizes.data[i] : NULL;
}

const char *rv_size_name(const rv_size *s) {
    return s->name;
}

int rv_module_num_ufuns(const rv_module *m) {
    return m->ufuns.len;
}

rv_ufun *rv_module_ufun_at(const rv_module *m, int i) {
    return i >= 0 && i < m->ufuns.len ? m->ufuns.data[i] : NULL;
}

const char *rv_ufun_name(const rv_ufun *f) {
    return f->name;
}

int rv_module_num_tensors(const rv_module *m) {
    return m->tensors.len;
}

rv_tensor *rv_module_tensor_at(const rv_module *m, int i) {
    return i >= 0 && i < m->tensors.len ? m->tensors.data[i] : NULL;
}

const char *rv_tensor_name(const rv_tensor *t) {
    return t->name;
}

rv_dtype rv_tensor_dtype(const rv_tensor *t) {
    return t->dtype;
}

int rv_tensor_ndim(const rv_tensor *t) {
    return t->ndim;
}

int rv_tensor_is_input(const rv_tensor *t) {
    return t->op->kind == OP_INPUT;
}

rv_status rv_input_set_param(rv_tensor *t, int on) {
    if (!t || t->op->kind != OP_INPUT)
        return base_error(RV_ERR_ARG, "rv_input_set_param: '%s' is not an input",
                          t ? t->name : "(null)");
    t->param = on != 0;
    return RV_OK;
}

int rv_tensor_is_param(const rv_tensor *t) {
    return t->param;
}

int rv_tensor_is_output(const rv_module *m, const rv_tensor *t) {
    return ir_tensor_is_output(m, t);
}

typedef struct InputsCtx {
    Vec(Tensor *) v;
} InputsCtx;

static void add_input(InputsCtx *c, Tensor *t) {
    for (int i = 0; i < c->v.len; i++)
        if (c->v.data[i] == t)
            return;
    vec_push(&c->v, t);
}

static void inputs_fn(const Expr *e, void *ctx) {
    if (e->kind == EX_READ)
        add_input(ctx, e->u.tensor);
}

int ir_collect_reads(Tensor *const *extra, int n_extra, Expr *const *es, int n_es, Tensor ***out) {
    InputsCtx c = {{0}};
    for (int i = 0; i < n_extra; i++)
        add_input(&c, extra[i]);
    /* ir_visit is post-order; reads in a body are few, order of first
     * completion is deterministic, which is all callers need */
    for (int i = 0; i < n_es; i++)
        if (es[i])
            ir_visit(es[i], inputs_fn, &c);
    *out = c.v.data;
    return c.v.len;
}

int ir_op_inputs(const Op *op, Tensor ***out) {
    Expr *es[] = {op->pred, op->body, op->else_body};
    bool ext = op->kind == OP_EXTERN;
    return ir_collect_reads(ext ? op->inputs : NULL, ext ? op->nin : 0, es, 3, out);
}

bool ir_tensor_is_output(const Module *m, const Tensor *t) {
    if (t->op->kind == OP_INPUT)
        return false;
    if (m->outputs.len > 0) {
        for (int i = 0; i < m->outputs.len; i++)
            if (m->outputs.data[i] == t)
                return true;
        return false;
    }
    for (int i = t->id + 1; i < m->tensors.len; i++) {
        Tensor **ins;
        int n = ir_op_inputs(m->tensors.data[i]->op, &ins);
        bool used = false;
        for (int j = 0; j < n; j++)
            used = used || ins[j] == t;
        base_free(ins);
        if (used)
            return false;
    }
    return true;
}

const char *ir_output_error(const Module *m, const Tensor *t, const Tensor *const *named, int n) {
    if (t->module != m || t->id < 0 || t->id >= m->tensors.len || m->tensors.data[t->id] != t)
        return "is not a tensor of this module";
    if (t->op->kind == OP_INPUT)
        return "is an input; an output is a computed tensor";
    for (int i = 0; i < n; i++)
        if (named[i] == t)
            return "is named twice among the outputs";
    return NULL;
}

rv_status rv_module_add_output(rv_module *m, rv_tensor *t) {
    if (!m || !t)
        return base_error(RV_ERR_ARG, "rv_module_add_output: NULL argument");
    const char *why = ir_output_error(m, t, (const Tensor *const *)m->outputs.data, m->outputs.len);
    if (why)
        return base_error(RV_ERR_ARG, "rv_module_add_output: '%s' %s", t->name, why);
    vec_push(&m->outputs, t);
    return RV_OK;
}

rv_dtype ir_ufun_dtype(const Ufun *f) {
    int64_t a, b, c, d;
    if (ir_int_bounds(f->lo, &a, &b) && ir_int_bounds(f->hi, &c, &d) &&
        ir_dtype_fits(RV_I32, a) && ir_dtype_fits(RV_I32, d))
        return RV_I32;
    return RV_I64;
}

/* ---- public expression builders: thin wrappers over expr.c ---- */

rv_expr *rv_expr_int(rv_module *m, int64_t v) {
    return ir_int(m, v);
}

rv_expr *rv_expr_float(rv_module *m, rv_dtype t, double v) {
    if (!ir_is_float(t)) {
        base_error(RV_ERR_ARG, "rv_expr_float needs f32 or f64, got %s", rv_dtype_name(t));
        return NULL;
    }
    return ir_float(m, t, v);
}

rv_expr *rv_expr_size(rv_module *m, rv_size *s) {
    return ir_size(m, s);
}

rv_expr *rv_expr_axis(rv_module *m, rv_axis *a) {
    (void)m;
    return a ? a->var : NULL;
}

rv_expr *rv_expr_add(rv_module *m, rv_expr *a, rv_expr *b) {
    return ir_binary(m, EX_ADD, a, b);
}

rv_expr *rv_expr_sub(rv_module *m, rv_expr *a, rv_expr *b) {
    return ir_binary(m, EX_SUB, a, b);
}

rv_expr *rv_expr_mul(rv_module *m, rv_expr *a, rv_expr *b) {
    return ir_binary(m, EX_MUL, a, b);
}

/* Finds an operator by its printed text or its call name. */
static int find_op(const char *op, int arity) {
    for (int k = 0; k < EX_COUNT; k++) {
        const ExprInfo *info = &ir_expr_info[k];
        if (info->arity == arity && strcmp(info->text, op) == 0 && info->flags != 0)
            return k;
    }
    return -1;
}

rv_expr *rv_expr_binop(rv_module *m, const char *op, rv_expr *a, rv_expr *b) {
    int k = find_op(op, 2);
    if (k < 0) {
        base_error(RV_ERR_ARG, "unknown binary operator '%s'", op);
        return NULL;
    }
    return ir_binary(m, (ExprKind)k, a, b);
}

rv_expr *rv_expr_unop(rv_module *m, const char *op, rv_expr *a) {
    int k = find_op(op, 1);
    if (k < 0) {
        base_error(RV_ERR_ARG, "unknown unary operator '%s'", op);
        return NULL;
    }
    return ir_unary(m, (ExprKind)k, a);
}

rv_expr *rv_expr_select(rv_module *m, rv_expr *cond, rv_expr *a, rv_expr *b) {
    return ir_select(m, cond, a, b);
}

rv_expr *rv_expr_cast(rv_module *m, rv_dtype t, rv_expr *a) {
    return ir_cast(m, t, a);
}

rv_expr *rv_expr_read(rv_module *m, rv_tensor *t, int n, rv_expr *const *idx) {
    /* members of a recursion group are read before they are defined */
    if (t && !t->complete && t->op->kind != OP_RECURSE) {
        base_error(RV_ERR_TYPE, "'%s' is read before its definition is complete", t->name);
        return NULL;
    }
    return ir_read(m, t, n, idx);
}

rv_expr *rv_expr_ufcall(rv_module *m, rv_ufun *f, int n, rv_expr *const *args) {
    return ir_ufcall(m, f, n, args);
}

rv_axis *rv_reduce_axis_new(rv_module *m, const char *name, rv_expr *extent) {
    Expr *ext = as_extent(m, extent, "reduction axis", name);
    if (!ext)
        return NULL;
    return ir_axis_new(m, name, AX_REDUCE, ext);
}

rv_expr *rv_expr_reduce(rv_module *m, rv_reduce_kind k, int naxes, rv_axis *const *axes,
                        rv_expr *body) {
    if ((int)k < 0 || k >= RV_REDUCE_COUNT) {
        base_error(RV_ERR_ARG, "unknown reduction kind %d", (int)k);
        return NULL;
    }
    return ir_reduce(m, k, naxes, axes, body);
}

rv_status rv_module_verify(const rv_module *m) {
    return ir_verify(m);
}
