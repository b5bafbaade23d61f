/*
 * unroll.c — `schedule R { dynamic_batch() unroll_recursion() }`: a node
 * computed together with its children in one iteration (Cortex §3.1,
 * Fig. 3), so the children's states are still in cache when their parent
 * reads them, and half as many batches (barriers) as levels.
 *
 * The contract. Takes a group over a tree or sequence structure T whose
 * schedule passed src/sched/recurse.c's rules for unrolling (dynamic
 * batches; each member's node loop one loop, outermost, serial or
 * parallel; no GPU binding) and gives
 * the body of its kernel:
 *
 *   the leaves (batch 0): every member's nest over them, as dynamic_batch()
 *       gives it (specialized for the leaves with specialize());
 *   for u < _T_nunroll:                          serial: a barrier per batch
 *     for m < _T_unroll_length[u]:               parallel if a member's node loop is
 *       let head = _T_unroll_node[_T_unroll_begin[u] + m]
 *       for kc < nchild[head]:
 *         let inner = child[head, kc]
 *         if inner < first_leaf: every member's nest at node inner
 *       every member's nest at node head
 *
 * each nest at one node (node loop of extent 1), specialized for internal
 * nodes with specialize(): a head and its internal children are internal,
 * and leaf children are done before any iteration, which is why the
 * leaves are not unrolled: they are half the nodes of a tree, the widest
 * batch, and keep the leaf rewrites of leaf.c. A parallel loop inside the
 * iterations' (a member's own) runs serially (c->par_depth).
 *
 * Correctness rests on the unrolled partition the linearizer gives
 * (rv_linear, include/ravel.h): heads are the internal nodes at even
 * depth, a head's internal children (odd depth) have it as their only
 * parent, and a head's batch is after every batch holding one of its
 * grandchildren; so each internal node is computed once, and everything an
 * iteration reads (its children, computed in it or leaves; their
 * children, leaves or heads of earlier batches) is done when it reads it.
 * The host plan checks the bound arrays against this before the kernel
 * runs (rt_check_numbering, src/runtime/numbering.c); that every node has
 * one parent is checked when a batch is bound to a tree or sequence
 * structure.
 */
#include "lower/lower.h"

/* UF f at the arguments, in loop IR. */
static Expr *uf_at(LowerCtx *c, Ufun *f, int nargs, Expr **args) {
    return lower_index(c, ir_ufcall(c->m, f, nargs, args));
}

/* The kind of the loop over an unrolled batch's iterations: parallel when
 * a member's node loop is (each member's node loop runs over one node of
 * an iteration; the rules allow only serial and parallel node loops). */
static LoopKind iterations_kind(const LowerCtx *c, const Recurse *g) {
    for (int i = 0; i < g->members.len; i++) {
        const Stage *st = sched_stage_of(c->s, g->members.data[i]);
        if (st->leaves.len && st->leaves.data[0]->kind == LOOP_PARALLEL)
            return LOOP_PARALLEL;
    }
    return LOOP_SERIAL;
}

/* One iteration: head n's internal children, then n (spec: 2 with
 * specialize(), else 0). */
static Stmt *iteration(LowerCtx *c, Recurse *g, Axis *n, Expr *first_leaf, int spec) {
    Module *m = c->m;
    const Structure *T = g->st;
    Expr *one = ir_int(m, 1);
    Expr *nchild = uf_at(c, T->nchild, 1, &n->var);
    Axis *k = nchild ? lower_loop_var(m, "kc", nchild) : NULL;
    Expr *at[2] = {n->var, k ? k->var : NULL};
    Expr *child = k ? uf_at(c, T->child, 2, at) : NULL;
    Axis *cv = lower_loop_var(m, "inner", ir_size(m, T->nodes));
    Stmt *inner = child ? lower_recurse_members(c, g, cv->var, one, spec) : NULL;
    Stmt *own = inner ? lower_recurse_members(c, g, n->var, one, spec) : NULL;
    if (!own)
        return NULL;
    Stmt *guarded = lower_if(m, ir_binary(m, EX_LT, cv->var, first_leaf), inner, NULL);
    Stmt *children = lower_for(m, k, nchild, LOOP_SERIAL, lower_let(m, cv, child, guarded));
    Stmt *both[2] = {children, own};
    return lower_seq(m, 2, both);
}

Stmt *lower_unroll(LowerCtx *c, Recurse *g) {
    Module *m = c->m;
    const Structure *T = g->st;
    RV_ASSERT(T->unroll_node); /* the rules refuse DAG structures */
    bool spec = sched_group_has(c->s, g, NOTE_SPECIALIZE);
    Expr *zero = ir_int(m, 0);
    Expr *first_leaf = uf_at(c, T->batch_begin, 1, &zero);
    Expr *nleaves = uf_at(c, T->batch_length, 1, &zero);
    if (!first_leaf || !nleaves)
        return NULL;
    Stmt *leaves = lower_recurse_members(
        c, g, first_leaf, lower_recurse_batch_count(c, T, first_leaf, nleaves), spec ? 1 : 0);
    if (!leaves)
        return NULL;

    Expr *nu = ir_size(m, T->nunroll);
    Axis *u = lower_loop_var(m, "u", nu);
    Expr *begin = uf_at(c, T->unroll_begin, 1, &u->var);
    Expr *len = begin ? uf_at(c, T->unroll_length, 1, &u->var) : NULL;
    if (!len)
        return NULL;
    /* as for a batch: begin + len <= N is the plan's check, from which the
     * simplifier proves the heads' reads in range */
    Expr *count = lower_recurse_batch_count(c, T, begin, len);
    Axis *mv = lower_loop_var(m, "m", count);
    Expr *at = ir_binary(m, EX_ADD, begin, mv->var);
    Expr *head = uf_at(c, T->unroll_node, 1, &at);
    Axis *n = lower_loop_var(m, "head", ir_size(m, T->nodes));
    LoopKind kind = iterations_kind(c, g);
    c->par_depth += kind == LOOP_PARALLEL;
    Stmt *body = head ? iteration(c, g, n, first_leaf, spec ? 2 : 0) : NULL;
    c->par_depth -= kind == LOOP_PARALLEL;
    if (!body)
        return NULL;
    Stmt *iters = lower_for(m, mv, count, kind, lower_let(m, n, head, body));
    Stmt *batches = lower_for(m, u, nu, LOOP_SERIAL, iters);
    Stmt *both[2] = {leaves, batches};
    return lower_seq(m, 2, both);
}
