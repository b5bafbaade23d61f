/*
 * recurse.c — a recursion group as loops (Cortex §4, A.4): one kernel whose
 * body runs every member's nest, node by node or batch by batch.
 *
 * Takes a group `recurse R over T { members }` and its schedule (the
 * group's notes, src/sched/recurse.c; the members' stages as for computes).
 * Gives the kernel body, in one of these shapes (N nodes, numbered by the
 * linearizer so that every child is numbered above its parent, the leaves
 * last, batch b the nodes batch_begin[b] .. + batch_length[b] - 1):
 *
 *   default          for r < N: n = N - 1 - r: every member's nest at n
 *   dynamic_batch()  for b < nbatch: every member's nest over the nodes
 *                    of batch b (its node loop m < batch_length[b],
 *                    n = batch_begin[b] + m, parallel if scheduled so)
 *   specialize()     the leaves (batch 0) first, in nests of their own with
 *                    nchild[n] = 0 folded into the bodies; then the
 *                    internal nodes (batches 1.., or nodes batch_begin[0]
 *                    - 1 down to 0) with nchild[n] >= 1 folded
 *   unroll_recursion()  the leaves, then the unrolled batches: a node
 *                    with its children in one iteration (unroll.c)
 *
 * Members run in group order at each node or batch (a member reads the
 * ones before it at its own node, P.2). Every member's nest is nest.c's
 * with its node axis fixed to the node (or batch) range: its other loops
 * keep their schedule, and stages computed at its loops (attach.c) are
 * computed per node or per batch. A member computed inside another member
 * (compute_at) is emitted there, not here. A stage computed at the top
 * of a member's nest that reads nothing of the group (a cache_read of a
 * weight) is computed once, above the loop over nodes or batches
 * (hoist_invariant): packed once per call, not per node or level. The
 * members' tensors are
 * parameters of the kernel: the plan gives the ones that are not outputs
 * per-call storage of N rows, like every intermediate tensor.
 *
 * Correctness rests on the numbering, which the host plan checks before
 * the kernel runs (plan.c); the schedule rules that keep each member's
 * node loop outermost and serial without dynamic_batch are in
 * src/sched/recurse.c.
 */
#include "lower/lower.h"

/* ---- specialization: nchild[n] folded ---- */

/* A body rewritten for the leaves (nchild[n] = 0) or the internal nodes
 * (1 <= nchild[n] <= K): the UF replaced (leaves), comparisons that the
 * range decides folded, and the selects, logic and reductions they
 * decide folded in turn. */
typedef struct Fold {
    Module *m;
    const Structure *T;
    const Axis *n; /* the member's node axis */
    bool leaf;
    PtrMap memo;
} Fold;

static const Expr *strip_casts(const Expr *e) {
    while (e->kind == EX_CAST)
        e = e->args[0];
    return e;
}

static bool is_nchild(const Fold *f, const Expr *e) {
    e = strip_casts(e);
    if (e->kind != EX_UFCALL || e->u.uf != f->T->nchild)
        return false;
    const Expr *a = strip_casts(e->args[0]);
    return a->kind == EX_VAR && a->u.axis == f->n;
}

/* The range of an operand of a comparison: a constant, or nchild[n]. */
static bool operand_range(const Fold *f, const Expr *e, int64_t *lo, int64_t *hi) {
    if (ir_is_const_int(strip_casts(e), lo)) {
        *hi = *lo;
        return true;
    }
    if (!f->leaf && is_nchild(f, e)) {
        *lo = 1;
        *hi = f->T->max_children;
        return true;
    }
    return false;
}

/* 1 or 0 when the ranges decide a OP b, else -1. */
static int decide(ExprKind k, int64_t alo, int64_t ahi, int64_t blo, int64_t bhi) {
    switch (k) {
    case EX_LT:
        return ahi < blo ? 1 : alo >= bhi ? 0 : -1;
    case EX_LE:
        return ahi <= blo ? 1 : alo > bhi ? 0 : -1;
    case EX_GT:
        return decide(EX_LT, blo, bhi, alo, ahi);
    case EX_GE:
        return decide(EX_LE, blo, bhi, alo, ahi);
    case EX_EQ:
        return alo == ahi && blo == bhi && alo == blo ? 1 : ahi < blo || bhi < alo ? 0 : -1;
    case EX_NE: {
        int d = decide(EX_EQ, alo, ahi, blo, bhi);
        return d < 0 ? -1 : !d;
    }
    default:
        return -1;
    }
}

static bool const_bool(const Expr *e, bool *v) {
    int64_t x;
    if (e->dtype != RV_BOOL || !ir_is_const_int(e, &x))
        return false;
    *v = x != 0;
    return true;
}

/* Does some axis of reduction e have extent 0 (nchild[n] at a leaf)? */
static bool reduce_empty(const Fold *f, const Expr *e) {
    for (int i = 0; i < e->u.red.naxes; i++) {
        const Expr *x = e->u.red.axes[i]->extent;
        int64_t v;
        if (x && ((f->leaf && is_nchild(f, x)) || (ir_is_const_int(x, &v) && v <= 0)))
            return true;
    }
    return false;
}

static Expr *fold(Fold *f, Expr *e) {
    Expr *done = ptrmap_get(&f->memo, e);
    if (done)
        return done;
    Module *m = f->m;
    Expr *r = e;
    if (f->leaf && e->kind == EX_UFCALL && is_nchild(f, e)) {
        r = ir_const_int(m, e->dtype, 0);
    } else if (e->kind == EX_REDUCE) {
        /* a reduction over no child is its identity (argmax's index has
         * none: its loop stays, running no iteration) */
        if (reduce_empty(f, e) && e->u.red.rk != RV_REDUCE_ARGMAX) {
            r = lower_reduce_init(m, e->u.red.rk, e->dtype);
        } else {
            Expr *b = fold(f, e->args[0]);
            r = b == e->args[0] ? e : ir_reduce(m, e->u.red.rk, e->u.red.naxes, e->u.red.axes, b);
        }
    } else if (e->n > 0 && e->kind != EX_LOAD) {
        Expr *args[RV_MAX_DIMS + 3];
        Expr **a = e->n <= RV_COUNT(args) ? args : base_xmalloc(sizeof(Expr *) * (size_t)e->n);
        bool changed = false;
        for (int i = 0; i < e->n; i++)
            changed |= (a[i] = fold(f, e->args[i])) != e->args[i];
        int64_t alo, ahi, blo, bhi;
        bool x, y;
        if ((ir_expr_info[e->kind].flags & F_CMP) && operand_range(f, a[0], &alo, &ahi) &&
            operand_range(f, a[1], &blo, &bhi) && decide(e->kind, alo, ahi, blo, bhi) >= 0) {
            r = ir_bool(m, decide(e->kind, alo, ahi, blo, bhi) == 1);
        } else if (e->kind == EX_SELECT && const_bool(a[0], &x)) {
            r = x ? a[1] : a[2];
        } else if (e->kind == EX_NOT && const_bool(a[0], &x)) {
            r = ir_bool(m, !x);
        } else if ((e->kind == EX_AND || e->kind == EX_OR) &&
                   (const_bool(a[0], &x) || const_bool(a[1], &x))) {
            /* x is the constant operand's value */
            Expr *other = const_bool(a[0], &y) ? a[1] : a[0];
            r = e->kind == EX_AND ? (x ? other : ir_bool(m, false))
                                  : (x ? ir_bool(m, true) : other);
        } else if (changed) {
            r = ir_rebuild(m, e, a);
        }
        if (a != args)
            base_free(a);
    }
    if (r)
        ptrmap_put(&f->memo, e, r);
    return r;
}

/* What a member's stage is outside its specialization: restored after. */
typedef struct Saved {
    Stage *st;
    Expr *body, *pred, *else_body, *reduce;
    IterVar **leaves;
    int nleaves, cap;
} Saved;

/* Specializes stage st in place (save_stage first): its bodies folded; a
 * predicate that folds chooses its branch; the stage's own reduction,
 * when it runs over no child, becomes its identity and its loops go. */
static void save_stage(Stage *st, Saved *sv) {
    *sv = (Saved){st,         st->body,        st->pred,       st->else_body,
                  st->reduce, st->leaves.data, st->leaves.len, st->leaves.cap};
}

static void specialize_stage(LowerCtx *c, Stage *st, bool leaf) {
    Module *m = c->m;
    Fold f = {m, ir_tensor_recurse(st->t)->st, st->t->axes[0], leaf, {0}};
    bool own_empty = st->reduce && leaf && reduce_empty(&f, st->reduce) &&
                     st->reduce->u.red.rk != RV_REDUCE_ARGMAX;
    if (st->reduce && !own_empty) {
        /* the stage's reduction keeps its loops: fold inside it only */
        ptrmap_put(&f.memo, st->reduce,
                   ir_reduce(m, st->reduce->u.red.rk, st->reduce->u.red.naxes,
                             st->reduce->u.red.axes, fold(&f, st->reduce->args[0])));
        st->reduce = ptrmap_get(&f.memo, st->reduce);
    }
    st->body = fold(&f, st->body);
    if (st->pred) {
        st->pred = fold(&f, st->pred);
        st->else_body = fold(&f, st->else_body);
        bool v;
        if (const_bool(st->pred, &v)) {
            st->body = v ? st->body : st->else_body;
            st->pred = st->else_body = NULL;
        }
    }
    if (own_empty)
        lower_stage_drop_reduce(m, st);
    ptrmap_free(&f.memo);
}

/* The cache_write stage of a conditional member (its register tile) adds
 * its terms under the member's condition (sched's cache_write), over its
 * own axes, the node first: where the case decides the condition true the
 * test leaves the tile's inner loop (TreeLSTM's leaf-only input product,
 * MV-RNN's A). Where it decides it false the member no longer reads the
 * tile, which drop_unread_caches removes; its bodies are left alone (the
 * leaves' values of the tile itself are leaf.c's). */
static void specialize_cache_pred(LowerCtx *c, const Recurse *g, Stage *q, bool leaf) {
    Fold f = {c->m, g->st, q->t->axes[0], leaf, {0}};
    Expr *pred = fold(&f, q->pred);
    bool v;
    if (const_bool(pred, &v) && v)
        q->pred = q->else_body = NULL;
    ptrmap_free(&f.memo);
}

void lower_stage_drop_reduce(Module *m, Stage *st) {
    st->reduce = NULL;
    Vec(IterVar *) kept = {0};
    for (int i = 0; i < st->leaves.len; i++)
        if (!st->leaves.data[i]->reduce)
            vec_push(&kept, st->leaves.data[i]);
    st->leaves.data =
        (IterVar **)arena_memdup(m->arena, kept.data, sizeof(IterVar *) * (size_t)(kept.len + 1));
    st->leaves.len = st->leaves.cap = kept.len;
    vec_free(&kept);
}

static void restore_stage(const Saved *sv) {
    Stage *st = sv->st;
    st->body = sv->body;
    st->pred = sv->pred;
    st->else_body = sv->else_body;
    st->reduce = sv->reduce;
    st->leaves.data = sv->leaves;
    st->leaves.len = sv->nleaves;
    st->leaves.cap = sv->cap;
}

bool lower_group_reads(const LowerCtx *c, const Recurse *g, const Stage *st) {
    for (int k = 0; k < c->s->stages.len; k++) {
        const Stage *q = c->s->stages.data[k];
        if (q != st && sched_stage_in_group(q, g) && !ptrmap_has(&c->unread, q) &&
            sched_stage_reads_tensor(q, st->t))
            return true;
    }
    return false;
}

/* A stage computed inside a member whose reader's specialized bodies no
 * longer read it is not computed: a cache_write stage (a register tile:
 * at the leaves, MV-RNN's A is its leaf branch and its tile of the
 * internal nodes' product has no reader), or a member read only at its
 * own node (needed[i] false: TreeFC's children's states hc, at the tile
 * of its product h, whose leaf branch reads none). Nothing would bound
 * its region, which would then span every node at every leaf tile. */
static bool dropped_kind(const Recurse *g, const Stage *q, const bool *needed) {
    if (q->kind == STAGE_CACHE_WRITE)
        return true;
    for (int i = 0; i < g->members.len; i++)
        if (g->members.data[i] == q->t)
            return !needed[i];
    return false;
}

static void drop_unread_caches(LowerCtx *c, const Recurse *g, const bool *needed) {
    bool changed = true;
    while (changed) {
        changed = false;
        for (int k = 0; k < c->s->stages.len; k++) {
            Stage *q = c->s->stages.data[k];
            if (q->attach != ATTACH_AT || !dropped_kind(g, q, needed) ||
                !sched_stage_in_group(q, g) || ptrmap_has(&c->unread, q) ||
                ptrmap_has(&c->hoisted, q))
                continue;
            if (!lower_group_reads(c, g, q)) {
                ptrmap_put(&c->unread, q, q);
                changed = true;
            }
        }
    }
}

/* ---- the nests ---- */

Stmt *lower_recurse_members(LowerCtx *c, Recurse *g, Expr *first, Expr *count, int spec) {
    Module *m = c->m;
    Vec(Stmt *) nests = {0};
    /* the rewrites below are in place: every stage of the kernel is saved */
    Saved *saved = base_xcalloc((size_t)c->s->stages.len, sizeof(Saved));
    int nsaved = 0;
    for (int k = 0; k < c->s->stages.len; k++)
        if (sched_stage_in_group(c->s->stages.data[k], g))
            save_stage(c->s->stages.data[k], &saved[nsaved++]);
    bool *needed = base_xcalloc((size_t)g->members.len, sizeof(bool));
    LeafMode *mode = base_xcalloc((size_t)g->members.len, sizeof(LeafMode));
    lower_refactor(c, g); /* refactor.c: refactored members at their readers */
    if (spec)
        lower_leaf_needed(c, g, needed);
    for (int i = 0; i < g->members.len && spec; i++)
        specialize_stage(c, sched_stage_of(c->s, g->members.data[i]), spec == 1);
    for (int k = 0; k < c->s->stages.len && spec; k++) {
        Stage *q = c->s->stages.data[k];
        if (q->kind == STAGE_CACHE_WRITE && q->attach == ATTACH_AT && q->pred &&
            sched_stage_in_group(q, g))
            specialize_cache_pred(c, g, q, spec == 1);
    }
    if (spec == 1)
        lower_leaf_fold(c, g, needed, mode); /* leaf.c: node-independent leaf values */
    if (spec)
        drop_unread_caches(c, g, needed);
    Stmt *body = NULL;
    bool ok = true;
    for (int i = 0; i < g->members.len && ok; i++) {
        Stage *st = sched_stage_of(c->s, g->members.data[i]);
        if (st->attach != ATTACH_ROOT || mode[i] == LEAF_NONE ||
            sched_stage_has_note(st, NOTE_REFACTOR))
            continue; /* computed inside another member, read at no leaf, or at its parents */
        /* a member the case's bodies no longer read (TreeLSTM's leaf-only
         * input product, 0 at the internal nodes; its internal nodes'
         * product, 0 at the leaves) is not stored there: nothing reads it
         * at its children, outside the group or as an output */
        if (spec && !needed[i] && !lower_group_reads(c, g, st))
            continue;
        Expr *origin[RV_MAX_DIMS] = {first};
        Expr *ext[RV_MAX_DIMS] = {mode[i] == LEAF_ONCE ? ir_int(m, 1) : count};
        Stmt *s = lower_stage_nest(c, st, origin, ext, NULL);
        Storage *sto;
        ok = s && (c->st = lower_storage_of_tensor(c, st->t, &sto)) == RV_OK;
        if (ok) {
            lower_use_storage(c, sto, PARAM_TENSOR);
            vec_push(&nests, s);
        }
    }
    if (ok)
        body = lower_seq(m, nests.len, nests.data);
    for (int i = 0; i < nsaved; i++)
        restore_stage(&saved[i]);
    ptrmap_free(&c->unread); /* leaf.c's, for the leaves' nests only */
    base_free(saved);
    base_free(needed);
    base_free(mode);
    vec_free(&nests);
    return body;
}

/* UF f (of the structure's batches) at b, in loop IR. */
static Expr *batch_uf(LowerCtx *c, Ufun *f, Expr *b) {
    return lower_index(c, ir_ufcall(c->m, f, 1, &b));
}

/* for r < count: n = last - r: members at n, one node at a time */
static Stmt *node_loop(LowerCtx *c, Recurse *g, Expr *count, Expr *last, int spec) {
    Module *m = c->m;
    Axis *r = lower_loop_var(m, "r", count);
    Expr *n = ir_binary(m, EX_SUB, last, r->var);
    Stmt *body = lower_recurse_members(c, g, n, ir_int(m, 1), spec);
    return body ? lower_for(m, r, count, LOOP_SERIAL, body) : NULL;
}

/* The number of nodes of the batch that begins at `begin` and holds
 * `len` nodes, written so that its nodes provably lie below N (lower.h).
 *
 * The contract: the host plan checks, before any kernel that reads the
 * batches runs (CHECK_STRUCT, src/runtime/numbering.c; the AOT output's
 * copy in c_aot.c), that the batches are consecutive from node 0 and end
 * at node N, so begin + len <= N for every batch. The UF ranges alone
 * (begin in 0..N-1, len in 1..N) do not say so, and every read at node
 * begin + m (m < len) would keep a run-time check in the members' inner
 * loops, which blocks their vectorization. min(len, N - begin) is len
 * under the contract, and the simplifier proves begin + m < N from it:
 * the checks are proven away, not dropped. */
Expr *lower_recurse_batch_count(LowerCtx *c, const Structure *T, Expr *begin, Expr *len) {
    Module *m = c->m;
    return ir_binary(m, EX_MIN, len, ir_binary(m, EX_SUB, ir_size(m, T->nodes), begin));
}

/* for b < count: members over the nodes of batch first + b */
static Stmt *batch_loop(LowerCtx *c, Recurse *g, Expr *count, Expr *first, int spec) {
    Module *m = c->m;
    const Structure *T = g->st;
    Axis *b = lower_loop_var(m, "b", count);
    Expr *bb = first ? ir_binary(m, EX_ADD, b->var, first) : b->var;
    Expr *begin = batch_uf(c, T->batch_begin, bb), *len = batch_uf(c, T->batch_length, bb);
    Stmt *body =
        begin && len ? lower_recurse_members(c, g, begin, lower_recurse_batch_count(c, T, begin, len), spec) : NULL;
    Stmt *loop = body ? lower_for(m, b, count, LOOP_SERIAL, body) : NULL;
    if (loop) /* a GPU separates the batches by launches or a grid barrier */
        loop->u.loop.gpu_batches = (int)sched_group_payload(c->s, g, NOTE_GPU_BATCHES);
    return loop;
}

/* ---- stages computed once per call ---- */

/* Does stage p, a stage computed inside it, or a stage of g's nests it
 * reads (a cache of a cache of a member) read a member of g? */
static bool reads_group(const Schedule *s, const Stage *p, const Recurse *g) {
    for (int i = 0; i < g->members.len; i++)
        if (sched_stage_reads_tensor(p, g->members.data[i]))
            return true;
    for (int k = 0; k < s->stages.len; k++) {
        const Stage *q = s->stages.data[k];
        if (q == p || q->attach != ATTACH_AT)
            continue;
        if (q->at == p && reads_group(s, q, g))
            return true;
        /* q is computed per node in g's nests: what reads it is too */
        if (q->at && sched_stage_group(q->at) == g && sched_stage_reads_tensor(p, q->t) &&
            reads_group(s, q, g))
            return true;
    }
    return false;
}

/* The stages computed at the top of a member's nest that read nothing of
 * the group (a cache_read of a weight, packed) are computed once, above
 * the loop over nodes or batches, over the region every node reads (also
 * for a member computed inside another, per node or tile of nodes):
 * the same values as per node, packed once per call instead of once per
 * node or level. Each gets its buffer around `body`, which make() builds
 * once they are placed (c->hoisted: the members' nests skip them). */
static Stmt *hoist_invariant(LowerCtx *c, Recurse *g, Stmt *(*make)(LowerCtx *, Recurse *)) {
    Module *m = c->m;
    Vec(Stmt *) nests = {0};
    Vec(Buffer *) bufs = {0};
    bool ok = true;
    for (int k = 0; k < c->s->stages.len && ok; k++) {
        Stage *p = c->s->stages.data[k];
        if (p->attach != ATTACH_AT || p->at_iv || sched_stage_group(p) ||
            sched_stage_group(p->at) != g || p->at->attach == ATTACH_INLINE ||
            reads_group(c->s, p, g))
            continue;
        StageNest n;
        Buffer *b = NULL;
        Stmt *s = NULL;
        if ((ok = lower_nest_init(c, &n, p->at, NULL, NULL, NULL))) {
            lower_bind_axes(c, &n); /* no loop is bound above the group's */
            ok = (s = lower_attach_one(c, &n, p, &b)) != NULL;
        }
        if (ok) {
            ptrmap_put(&c->hoisted, p, p);
            vec_push(&nests, s);
            vec_push(&bufs, b);
        }
    }
    Stmt *body = ok ? make(c, g) : NULL;
    for (int k = nests.len - 1; body && k >= 0; k--) {
        Stmt *both[2] = {nests.data[k], body};
        body = lower_alloc_attached(m, bufs.data[k], lower_seq(m, 2, both));
    }
    vec_free(&nests);
    vec_free(&bufs);
    return body;
}

static Stmt *group_loops(LowerCtx *c, Recurse *g) {
    Module *m = c->m;
    const Structure *T = g->st;
    bool dyn = sched_group_has(c->s, g, NOTE_DYNAMIC_BATCH);
    bool spec = sched_group_has(c->s, g, NOTE_SPECIALIZE);
    Expr *N = ir_size(m, T->nodes), *one = ir_int(m, 1);
    if (sched_group_has(c->s, g, NOTE_UNROLL))
        return lower_unroll(c, g); /* unroll.c */
    if (!spec)
        return dyn ? batch_loop(c, g, ir_size(m, T->nbatch), NULL, 0)
                   : node_loop(c, g, N, ir_binary(m, EX_SUB, N, one), 0);
    /* the leaves are batch 0 (independent of each other: one range
     * either way), the internal nodes numbered before them */
    Expr *zero = ir_int(m, 0);
    Expr *first_leaf = batch_uf(c, T->batch_begin, zero);
    Expr *nleaves = batch_uf(c, T->batch_length, zero);
    if (!first_leaf || !nleaves)
        return NULL;
    Stmt *leaves = lower_recurse_members(c, g, first_leaf, lower_recurse_batch_count(c, T, first_leaf, nleaves), 1);
    Stmt *internal =
        leaves ? dyn ? batch_loop(c, g, ir_binary(m, EX_SUB, ir_size(m, T->nbatch), one), one, 2)
                     : node_loop(c, g, first_leaf, ir_binary(m, EX_SUB, first_leaf, one), 2)
               : NULL;
    if (!internal)
        return NULL;
    Stmt *both[2] = {leaves, internal};
    return lower_seq(m, 2, both);
}

Stmt *lower_recurse(LowerCtx *c, Recurse *g) {
    return hoist_invariant(c, g, group_loops);
}
