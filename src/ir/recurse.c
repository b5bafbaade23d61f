/*
 * recurse.c — structures and recursion groups (Cortex §2): the objects,
 * their builders, and the rules that make a recursion lowerable to loops.
 *
 * A structure (ir.h: struct rv_structure) is a set of UFs with fixed
 * roles over a size N of nodes: the children, their number, optionally the
 * roots, and data columns, plus the hidden dynamic batches the linearizer
 * produces. A recursion group is a list of tensors over the structure's
 * nodes, declared first (so bodies may read members defined later) and
 * defined after (rv_recurse_define, module.c).
 *
 * The rules (Cortex §2) and where each is enforced:
 *   P.1  what is computed and read depends on the structure only, not on
 *        tensor values: conditions and extents never read tensors
 *        (module.c), and no index of a read of a member reads a tensor
 *        (here);
 *   P.2  a member reads members only at children (`h[child[n, e], ...]`)
 *        or, for members defined before it, at its own node (`hs[n, i]`):
 *        the dependence between nodes follows the structure's edges and
 *        the one within a node is acyclic (here);
 *   P.3  siblings are independent: follows from P.2, a node reads nothing
 *        of a node that is not its child.
 * Reads of members from tensors defined after the group are ordinary
 * reads (`h[root[s], i]`).
 */
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"

static Ufun *new_uf(Module *m, const char *name, int nargs, const char *const *argn) {
    return rv_ufun_begin(m, name, nargs, argn);
}

typedef struct FindRead {
    bool ufs;         /* ufun applications count too */
    const Expr *read; /* the first tensor read (or ufun application) */
} FindRead;

static void find_read_fn(const Expr *e, void *ctx) {
    FindRead *f = ctx;
    if (!f->read && (e->kind == EX_READ || (f->ufs && e->kind == EX_UFCALL)))
        f->read = e;
}

const Expr *ir_first_read(const Expr *e, bool ufs) {
    FindRead f = {ufs, NULL};
    ir_visit(e, find_read_fn, &f);
    return f.read;
}

static const char *hidden_name(Module *m, const char *st, const char *what) {
    return arena_printf(m->arena, "_%s_%s", st, what);
}

rv_structure *rv_structure_new(rv_module *m, const char *name, rv_struct_kind kind,
                               rv_size *nodes, int max_children, const char *child,
                               const char *nchild) {
    if (!m || !name || !nodes || !child || !nchild) {
        base_error(RV_ERR_ARG, "rv_structure_new: missing argument");
        return NULL;
    }
    if ((int)kind < 0 || kind >= RV_STRUCT_KIND_COUNT) {
        base_error(RV_ERR_TYPE, "structure '%s': unknown kind %d", name, (int)kind);
        return NULL;
    }
    if (kind == RV_STRUCT_SEQUENCE && max_children != 1) {
        base_error(RV_ERR_TYPE, "structure '%s': a sequence has 1 child per node, not %d", name,
                   max_children);
        return NULL;
    }
    if (max_children < 1 || max_children > 64) {
        base_error(RV_ERR_TYPE, "structure '%s': the number of children must be in 1..64, got %d",
                   name, max_children);
        return NULL;
    }
    Structure *s = arena_alloc(m->arena, sizeof(Structure));
    if (ir_declare(m, name, s, NAME_STRUCT) != RV_OK)
        return NULL;
    s->name = ir_name(m, name);
    s->kind = kind;
    s->max_children = max_children;
    s->nodes = nodes;
    s->module = m;
    Expr *N = ir_size(m, nodes);
    Expr *zero = ir_int(m, 0), *last = ir_binary(m, EX_SUB, N, ir_int(m, 1));

    /* nchild[n < N] in 0..K, child[n < N, k < nchild[n]] in 0..N - 1 */
    const char *argn[] = {"n", "k"};
    Ufun *nc = new_uf(m, nchild, 1, argn);
    if (!nc || !rv_ufun_end(nc, &N, zero, ir_int(m, max_children)))
        return NULL;
    Ufun *ch = new_uf(m, child, 2, argn);
    if (!ch)
        return NULL;
    Expr *nc_n = ir_ufcall(m, nc, 1, &ch->args[0]->var);
    Expr *ch_ext[] = {N, nc_n};
    if (!rv_ufun_end(ch, ch_ext, zero, last))
        return NULL;
    s->nchild = nc;
    s->child = ch;

    /* the dynamic batches: _T_nbatch in 1..max N, _T_batch_begin[b] in
     * 0..N - 1, _T_batch_length[b] in 1..N */
    Size *nb = rv_size_new(m, hidden_name(m, name, "nbatch"), 1, nodes->hi > 0 ? nodes->hi : 1);
    if (!nb)
        return NULL;
    const char *argb[] = {"b"};
    Expr *NB = ir_size(m, nb);
    Ufun *bb = new_uf(m, hidden_name(m, name, "batch_begin"), 1, argb);
    if (!bb || !rv_ufun_end(bb, &NB, zero, last))
        return NULL;
    Ufun *bl = new_uf(m, hidden_name(m, name, "batch_length"), 1, argb);
    if (!bl || !rv_ufun_end(bl, &NB, ir_int(m, 1), N))
        return NULL;
    s->nbatch = nb;
    s->batch_begin = bb;
    s->batch_length = bl;
    /* trees and sequences: the unrolled partition (rv_linear), _T_nunroll
     * in 0..max N, _T_unroll_begin[u] in 0..N - 1, _T_unroll_length[u] in
     * 1..N, _T_unroll_node[j < N] in 0..N - 1 */
    if (kind != RV_STRUCT_DAG) {
        Size *nu = rv_size_new(m, hidden_name(m, name, "nunroll"), 0, nodes->hi > 0 ? nodes->hi : 1);
        if (!nu)
            return NULL;
        const char *argu[] = {"u"}, *argj[] = {"j"};
        Expr *NU = ir_size(m, nu);
        Ufun *ub = new_uf(m, hidden_name(m, name, "unroll_begin"), 1, argu);
        if (!ub || !rv_ufun_end(ub, &NU, zero, last))
            return NULL;
        Ufun *ul = new_uf(m, hidden_name(m, name, "unroll_length"), 1, argu);
        if (!ul || !rv_ufun_end(ul, &NU, ir_int(m, 1), N))
            return NULL;
        Ufun *un = new_uf(m, hidden_name(m, name, "unroll_node"), 1, argj);
        if (!un || !rv_ufun_end(un, &N, zero, last))
            return NULL;
        s->nunroll = nu;
        s->unroll_begin = ub;
        s->unroll_length = ul;
        s->unroll_node = un;
    }
    s->id = m->structures.len;
    vec_push(&m->structures, s);
    return s;
}

rv_ufun *rv_structure_set_roots(rv_structure *s, const char *root, rv_size *count) {
    if (!s || !root || !count) {
        base_error(RV_ERR_ARG, "rv_structure_set_roots: missing argument");
        return NULL;
    }
    if (s->root) {
        base_error(RV_ERR_TYPE, "structure '%s' declares its roots twice", s->name);
        return NULL;
    }
    Module *m = s->module;
    const char *args[] = {"s"};
    Ufun *f = new_uf(m, root, 1, args);
    Expr *B = ir_size(m, count);
    if (!f || !rv_ufun_end(f, &B, ir_int(m, 0),
                           ir_binary(m, EX_SUB, ir_size(m, s->nodes), ir_int(m, 1))))
        return NULL;
    s->root = f;
    s->count = count;
    return f;
}

rv_ufun *rv_structure_add_data(rv_structure *s, const char *name, rv_expr *lo, rv_expr *hi) {
    if (!s || !name || !lo || !hi) {
        if (s && name && (!lo || !hi))
            return NULL; /* a failed bound left its error */
        base_error(RV_ERR_ARG, "rv_structure_add_data: missing argument");
        return NULL;
    }
    Module *m = s->module;
    /* over sizes only: the structure is declared (and printed) before
     * every ufun and tensor */
    for (int i = 0; i < 2; i++) {
        const Expr *use = ir_first_read(i ? hi : lo, true);
        if (use) {
            bool read = use->kind == EX_READ;
            base_error(RV_ERR_TYPE,
                       "the range of data column '%s' uses the %s '%s': a structure's data "
                       "ranges use only sizes and constants",
                       name, read ? "tensor" : "ufun",
                       read ? use->u.tensor->name : use->u.uf->name);
            return NULL;
        }
    }
    const char *args[] = {"n"};
    Ufun *f = new_uf(m, name, 1, args);
    Expr *N = ir_size(m, s->nodes);
    if (!f || !rv_ufun_end(f, &N, lo, hi))
        return NULL;
    Ufun **d = arena_alloc(m->arena, sizeof(Ufun *) * (size_t)(s->ndata + 1));
    if (s->ndata)
        memcpy(d, s->data, sizeof(Ufun *) * (size_t)s->ndata);
    d[s->ndata++] = f;
    s->data = d;
    return f;
}

rv_structure *rv_module_structure(const rv_module *m, const char *name) {
    return m && name ? ir_lookup(m, name, NAME_STRUCT) : NULL;
}

rv_struct_kind rv_structure_kind(const rv_structure *s) {
    return s ? s->kind : RV_STRUCT_KIND_COUNT;
}

int rv_structure_max_children(const rv_structure *s) {
    return s ? s->max_children : -1;
}

int rv_structure_num_data(const rv_structure *s) {
    return s ? s->ndata : -1;
}

/* ---- recursion groups ---- */

rv_recurse *rv_recurse_begin(rv_module *m, const char *name, rv_structure *s) {
    if (!m || !name || !s) {
        base_error(RV_ERR_ARG, "rv_recurse_begin: missing argument");
        return NULL;
    }
    Recurse *r = arena_alloc(m->arena, sizeof(Recurse));
    if (ir_declare(m, name, r, NAME_RECURSE) != RV_OK)
        return NULL;
    r->name = ir_name(m, name);
    r->st = s;
    r->module = m;
    r->id = m->recurses.len;
    vec_push(&m->recurses, r);
    return r;
}

rv_compute *rv_recurse_add(rv_recurse *r, const char *name, rv_dtype t, int ndim,
                           const char *const *axis_names, rv_expr *const *extents) {
    if (!r || !name)
        return NULL;
    if (r->complete) {
        base_error(RV_ERR_TYPE, "recursion '%s' has ended; '%s' cannot join it", r->name, name);
        return NULL;
    }
    if (ndim < 1) {
        base_error(RV_ERR_TYPE,
                   "'%s' has no dimension; a member of recursion '%s' is indexed by its node "
                   "first",
                   name, r->name);
        return NULL;
    }
    if (!ir_is_float(t) && !ir_is_int(t)) {
        base_error(RV_ERR_TYPE, "'%s' has element type %s; use f32, f64, i32 or i64", name,
                   rv_dtype_name(t));
        return NULL;
    }
    for (int i = 1; i < ndim; i++)
        if (!extents || !extents[i]) {
            base_error(RV_ERR_TYPE,
                       "axis %d of '%s' needs an extent: in a recursion the extents of all "
                       "axes but the node axis are written out",
                       i, name);
            return NULL;
        }
    Module *m = r->module;
    Expr *exts[RV_MAX_DIMS];
    exts[0] = ir_size(m, r->st->nodes);
    for (int i = 1; i < ndim && i < RV_MAX_DIMS; i++)
        exts[i] = extents[i];
    rv_compute *c = rv_compute_begin(m, name, ndim, axis_names, exts);
    if (!c)
        return NULL;
    rv_compute_set_dtype(c, t);
    c->t->dtype = t;
    c->t->op->kind = OP_RECURSE;
    c->t->op->rec = r;
    vec_push(&r->members, c->t);
    return c;
}

bool ir_is_child_of(const Structure *st, const Expr *e, const Axis *n) {
    while (e->kind == EX_CAST)
        e = e->args[0];
    if (e->kind != EX_UFCALL || e->u.uf != st->child)
        return false;
    const Expr *a = e->args[0];
    while (a->kind == EX_CAST)
        a = a->args[0];
    return a->kind == EX_VAR && a->u.axis == n;
}

static int member_pos(const Recurse *r, const Tensor *t) {
    for (int i = 0; i < r->members.len; i++)
        if (r->members.data[i] == t)
            return i;
    return -1;
}

const char *ir_recurse_read_error(const Recurse *r, const Tensor *reader, const Expr *rd) {
    const Tensor *t = rd->u.tensor;
    int tp = member_pos(r, t), rp = reader ? member_pos(r, reader) : -1;
    if (tp < 0 || rp < 0)
        return NULL;
    Arena *a = r->module->arena;
    for (int i = 0; i < rd->n; i++) {
        const Expr *in = ir_first_read(rd->args[i], false);
        if (in)
            return arena_printf(a,
                                "an index of this read of '%s' reads the tensor '%s': what a "
                                "recursion reads must depend on the structure only, not on "
                                "computed values (Cortex P.1)",
                                t->name, in->u.tensor->name);
    }
    const Axis *n = reader->axes[0];
    const Expr *i0 = rd->args[0];
    while (i0->kind == EX_CAST)
        i0 = i0->args[0];
    if (i0->kind == EX_VAR && i0->u.axis == n) {
        if (tp == rp)
            return arena_printf(a,
                                "'%s' reads itself at its own node '%s': a recursive read must "
                                "be at a child, %s[%s[%s, k], ...]",
                                t->name, n->name, t->name, r->st->child->name, n->name);
        if (tp > rp)
            return arena_printf(a,
                                "'%s' reads '%s' at its own node '%s', but '%s' is defined "
                                "after it in recursion '%s': at one node, members read only "
                                "members defined before them",
                                reader->name, t->name, n->name, t->name, r->name);
        return NULL;
    }
    if (ir_is_child_of(r->st, i0, n))
        return NULL;
    return arena_printf(a,
                        "'%s' reads '%s' at a node that is neither '%s' nor one of its "
                        "children: inside recursion '%s' a member is read at %s[%s, k] or, "
                        "if defined earlier, at '%s' (Cortex P.2)",
                        reader->name, t->name, n->name, r->name, r->st->child->name, n->name,
                        n->name);
}

typedef struct ReadCheck {
    const Recurse *r;
    const Tensor *reader;
    const char *msg;
} ReadCheck;

const char *ir_recurse_extent_error(const Recurse *r, const Expr *red) {
    for (int i = 0; i < red->u.red.naxes; i++) {
        const Axis *a = red->u.red.axes[i];
        const Expr *rd = a->extent ? ir_first_read(a->extent, false) : NULL;
        if (rd)
            return arena_printf(r->module->arena,
                                "the extent of reduction axis '%s' reads the tensor '%s': in "
                                "recursion '%s' how much is computed must depend on the "
                                "structure only, not on computed values (Cortex P.1)",
                                a->name, rd->u.tensor->name, r->name);
    }
    return NULL;
}

static void read_check_fn(const Expr *e, void *ctx) {
    ReadCheck *c = ctx;
    if (e->kind == EX_READ && !c->msg)
        c->msg = ir_recurse_read_error(c->r, c->reader, e);
    if (e->kind == EX_REDUCE && !c->msg)
        c->msg = ir_recurse_extent_error(c->r, e);
}

rv_status rv_recurse_end(rv_recurse *r) {
    if (!r)
        return base_error(RV_ERR_ARG, "rv_recurse_end: no recursion");
    if (r->members.len == 0)
        return base_error(RV_ERR_TYPE, "recursion '%s' defines no tensor", r->name);
    for (int i = 0; i < r->members.len; i++) {
        Tensor *t = r->members.data[i];
        if (!t->complete)
            return base_error(RV_ERR_TYPE, "'%s' of recursion '%s' is declared but not defined",
                              t->name, r->name);
        ReadCheck c = {r, t, NULL};
        Expr *es[] = {t->op->pred, t->op->body, t->op->else_body};
        for (int j = 0; j < 3 && !c.msg; j++)
            if (es[j])
                ir_visit(es[j], read_check_fn, &c);
        if (c.msg)
            return base_error(RV_ERR_TYPE, "%s", c.msg);
    }
    r->complete = true;
    return RV_OK;
}
