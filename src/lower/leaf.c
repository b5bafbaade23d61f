/*
 * leaf.c — constant propagation and hoisting of leaf computations in a
 * specialized recursion group (Cortex §4.3).
 *
 * Takes a group's members specialized for the leaves (recurse.c: nchild[n]
 * = 0 folded, so a child-sum is its identity). A member whose leaf value
 * does not depend on the node (TreeLSTM's hs = 0: a zero initial state) is
 *
 *   propagated  when it is cheap (no reduction, reads of inputs only): its
 *               leaf body replaces its same-node reads in later members'
 *               leaf bodies, where products and sums with a zero fold
 *               away (U_iou·hs vanishes from iou at the leaves);
 *   hoisted     otherwise (a product of weights): computed once, at the
 *               first leaf, and read there by later members;
 *
 * and its store at the other leaves is dropped (LEAF_NONE, LEAF_ONCE) when
 * nothing reads it there: not a member at the children, not an output, not
 * a stage outside the group. A member read elsewhere keeps its nest over
 * every leaf (LEAF_ALL). The rewrites are on the stages in place; recurse.c
 * restores them with the rest of the specialization.
 *
 * The folds x·0 = 0 and x + 0 = x hold for finite x; they assume finite
 * weights and inputs, as Cortex does (an inf or NaN weight times a zero
 * state is NaN in the interpreter and 0 here).
 */
#include "lower/lower.h"

static const Expr *strip_casts(const Expr *e) {
    while (e->kind == EX_CAST)
        e = e->args[0];
    return e;
}

static int member_index(const Recurse *g, const Tensor *t) {
    for (int i = 0; i < g->members.len; i++)
        if (g->members.data[i] == t)
            return i;
    return -1;
}

/* Is e a read at the reader's own node (index 0 the node variable n)? */
static bool at_own_node(const Expr *e, const Axis *n) {
    const Expr *i0 = strip_casts(e->args[0]);
    return i0->kind == EX_VAR && i0->u.axis == n;
}

/* Is q a cache_write stage computed inside a member of g (a register
 * tile: the member's reduction in a stage of its own, the member's node
 * its first axis), directly or inside another such stage? Its leaf body
 * is rewritten with the members' (rewrite_caches). */
static bool member_cache(const LowerCtx *c, const Recurse *g, const Stage *q) {
    if (q->kind != STAGE_CACHE_WRITE || q->attach != ATTACH_AT || ptrmap_has(&c->hoisted, q))
        return false;
    return sched_stage_group(q->at) == g || member_cache(c, g, q->at);
}

/* ---- who reads a member's leaf values ---- */

void lower_leaf_needed(LowerCtx *c, Recurse *g, bool *needed) {
    for (int i = 0; i < g->members.len; i++) {
        Tensor *t = g->members.data[i];
        const Stage *own = sched_stage_of(c->s, t);
        needed[i] = ir_tensor_is_output(c->m, t);
        needed[i] = needed[i] || sched_group_child_reader(c->s, g, t);
        for (int k = 0; k < c->s->stages.len && !needed[i]; k++) {
            const Stage *p = c->s->stages.data[k];
            needed[i] = p != own && sched_stage_group(p) != g && !member_cache(c, g, p) &&
                        sched_stage_reads_tensor(p, t);
        }
    }
}

/* ---- node independence ---- */

typedef struct Uses {
    const Axis *n;
    bool node, reduce, non_input;
} Uses;

static void uses_fn(const Expr *e, void *ctx) {
    Uses *u = ctx;
    if (e->kind == EX_VAR && e->u.axis == u->n)
        u->node = true;
    if (e->kind == EX_READ && e->u.tensor->op->kind != OP_INPUT)
        u->non_input = true;
    if (e->kind == EX_REDUCE) {
        u->reduce = true;
        for (int i = 0; i < e->u.red.naxes; i++)
            if (e->u.red.axes[i]->extent)
                ir_visit(e->u.red.axes[i]->extent, uses_fn, ctx);
    }
}

/* Does a stage other than the hoisted ones sit inside st's nest? */
static bool has_attached(const LowerCtx *c, const Stage *st) {
    for (int k = 0; k < c->s->stages.len; k++) {
        const Stage *p = c->s->stages.data[k];
        if (p->attach == ATTACH_AT && p->at == st && !ptrmap_get(&c->hoisted, p))
            return true;
    }
    return false;
}

/* ---- the rewrite: same-node reads of propagated or hoisted members ---- */

typedef struct Prop {
    Module *m;
    const Recurse *g;
    Expr **value; /* per member: its leaf body, when propagated */
    bool *once;   /* per member: computed at the first leaf only */
    Expr *first;  /* the first leaf, batch_begin[0] */
    const Axis *n; /* the reader's node axis */
    PtrMap memo;
} Prop;

static bool is_zero(const Expr *e) {
    e = strip_casts(e);
    return (e->kind == EX_CONST_INT && e->u.ival == 0) ||
           (e->kind == EX_CONST_FLOAT && e->u.fval == 0.0);
}

static Expr *zero_of(Module *m, rv_dtype t) {
    return lower_reduce_init(m, RV_REDUCE_SUM, t);
}

/* A same-node read of member k: its value, or its element at the first
 * leaf; NULL when k is computed as scheduled. */
static Expr *replace_read(Prop *p, Expr *e, int k) {
    Module *m = p->m;
    Tensor *t = e->u.tensor;
    if (p->value[k]) {
        PtrMap map = {0};
        for (int i = 1; i < t->ndim; i++)
            ptrmap_put(&map, t->axes[i], e->args[i]);
        Expr *r = ir_substitute_fresh(m, p->value[k], &map);
        ptrmap_free(&map);
        return r && r->dtype != e->dtype ? ir_cast(m, e->dtype, r) : r;
    }
    if (!p->once[k])
        return NULL;
    Expr *idx[RV_MAX_DIMS];
    for (int i = 0; i < e->n; i++)
        idx[i] = e->args[i];
    idx[0] = p->first->dtype == e->args[0]->dtype ? p->first
                                                  : ir_cast(m, e->args[0]->dtype, p->first);
    return ir_read(m, t, e->n, idx);
}

static Expr *rewrite(Prop *p, Expr *e) {
    Expr *done = ptrmap_get(&p->memo, e);
    if (done)
        return done;
    Module *m = p->m;
    Expr *r = e;
    int k;
    if (e->kind == EX_READ && (k = member_index(p->g, e->u.tensor)) >= 0 &&
        at_own_node(e, p->n)) {
        Expr *v = replace_read(p, e, k);
        r = v ? v : e;
    } else if (e->kind == EX_REDUCE) {
        Expr *b = rewrite(p, e->args[0]);
        if (e->u.red.rk == RV_REDUCE_SUM && is_zero(b))
            r = zero_of(m, e->dtype);
        else if (b != e->args[0])
            r = ir_reduce(m, e->u.red.rk, e->u.red.naxes, e->u.red.axes, b);
    } else if (e->n > 0 && e->kind != EX_LOAD) {
        Expr *args[RV_MAX_DIMS + 3];
        Expr **a = e->n <= RV_COUNT(args) ? args : base_xmalloc(sizeof(Expr *) * (size_t)e->n);
        bool changed = false;
        for (int i = 0; i < e->n; i++)
            changed |= (a[i] = rewrite(p, e->args[i])) != e->args[i];
        if (e->kind == EX_MUL && (is_zero(a[0]) || is_zero(a[1])))
            r = zero_of(m, e->dtype);
        else if (e->kind == EX_ADD && is_zero(a[0]) && a[1]->dtype == e->dtype)
            r = a[1];
        else if ((e->kind == EX_ADD || e->kind == EX_SUB) && is_zero(a[1]) &&
                 a[0]->dtype == e->dtype)
            r = a[0];
        else if (changed)
            r = ir_rebuild(m, e, a);
        if (a != args)
            base_free(a);
    }
    if (r)
        ptrmap_put(&p->memo, e, r);
    return r ? r : e;
}

/* Rewrites member st's leaf bodies; its own reduction, folded to zero,
 * loses its loops. */
static void rewrite_stage(Prop *p, Stage *st) {
    p->n = st->t->axes[0];
    ptrmap_free(&p->memo);
    p->memo = (PtrMap){0};
    if (st->reduce) {
        Expr *red = rewrite(p, st->reduce);
        if (red->kind != EX_REDUCE)
            lower_stage_drop_reduce(p->m, st);
        else
            st->reduce = red;
    }
    st->body = rewrite(p, st->body);
    if (st->pred) {
        st->pred = rewrite(p, st->pred);
        st->else_body = rewrite(p, st->else_body);
    }
}

/* The cache_write stages computed inside member st (member_cache) get
 * the same rewrite: U·hs in TreeLSTM's tiled iou_acc vanishes at the
 * leaves as it does in an untiled iou. */
static void rewrite_caches(const LowerCtx *c, Prop *p, const Stage *st) {
    for (int k = 0; k < c->s->stages.len; k++) {
        Stage *q = c->s->stages.data[k];
        if (q->at == st && member_cache(c, p->g, q)) {
            rewrite_stage(p, q);
            rewrite_caches(c, p, q);
        }
    }
}

void lower_leaf_fold(LowerCtx *c, Recurse *g, const bool *needed, LeafMode *mode) {
    Module *m = c->m;
    int nm = g->members.len;
    Expr *zero = ir_int(m, 0);
    Prop p = {m, g, base_xcalloc((size_t)nm, sizeof(Expr *)), base_xcalloc((size_t)nm, sizeof(bool)),
              ir_ufcall(m, g->st->batch_begin, 1, &zero), NULL, {0}};
    for (int i = 0; i < nm; i++) {
        Stage *st = sched_stage_of(c->s, g->members.data[i]);
        mode[i] = LEAF_ALL;
        rewrite_stage(&p, st);
        rewrite_caches(c, &p, st);
        if (st->pred || has_attached(c, st))
            continue;
        Uses u = {st->t->axes[0], false, false, false};
        ir_visit(st->body, uses_fn, &u);
        if (u.node)
            continue;
        if (st->attach != ATTACH_ROOT) {
            /* computed inside another member's nest, per node: its reads
             * may take its value, but it is computed where it is */
            if (!u.reduce && !u.non_input)
                p.value[i] = st->body;
            continue;
        }
        if (!u.reduce && !u.non_input) {
            p.value[i] = st->body;
            mode[i] = needed[i] ? LEAF_ALL : LEAF_NONE;
        } else if (!needed[i]) {
            p.once[i] = true;
            mode[i] = LEAF_ONCE;
        }
    }
    /* a member propagated from inside another member's nest is not
     * computed there when nothing reads it any more (its region would be
     * empty, not bounded) */
    for (int i = 0; i < nm; i++) {
        Stage *st = sched_stage_of(c->s, g->members.data[i]);
        if (!p.value[i] || st->attach == ATTACH_ROOT || needed[i])
            continue;
        if (!lower_group_reads(c, g, st))
            ptrmap_put(&c->unread, st, st);
    }
    ptrmap_free(&p.memo);
    base_free(p.value);
    base_free(p.once);
}
