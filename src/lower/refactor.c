/*
 * refactor.c — `schedule R { refactor(P) }`: member P computed where its
 * parents read it (Cortex §3.1, Fig. 4: the recursion back-edge moves).
 *
 * Takes the stages of a group's kernel (its members and the stages
 * computed inside them) and replaces every read of a refactored member at
 * a child, `P[child[n, k], idx]`, by P's body at that node: P's node
 * variable bound to `child[n, k]`, its other axes to idx, its reductions
 * given fresh axes (as compute_inline does). What P's body reads (members
 * at P's own node, i.e. the child, and at the child's children) is stored
 * by then: the child's batch ran before its parent's. P itself gets no
 * nest (recurse.c skips it). The rules that make this sound (trees and
 * sequences, P read only at children and only in the group, its body
 * reading no refactored member) are src/sched/recurse.c's.
 *
 * A reduction in P's body is computed once per element of each reader
 * that reads it: refactor moves elementwise parts of a cell (the A2 of
 * Fig. 4) next to their consumer, where they fuse; it is not meant for
 * P's products. The rewrite is in place; recurse.c restores the stages.
 */
#include "lower/lower.h"

typedef struct Refactor {
    Module *m;
    const Schedule *s;
    PtrMap memo;
} Refactor;

/* P's value at the element a read names: its body, or its select. */
static Expr *at_read(Refactor *rf, const Stage *p, const Expr *e) {
    Expr *v = p->pred ? ir_select(rf->m, p->pred, p->body, p->else_body) : p->body;
    PtrMap map = {0};
    for (int i = 0; i < p->t->ndim; i++)
        ptrmap_put(&map, p->t->axes[i], e->args[i]);
    Expr *r = ir_substitute_fresh(rf->m, v, &map);
    ptrmap_free(&map);
    return r && r->dtype != e->dtype ? ir_cast(rf->m, e->dtype, r) : r;
}

static Expr *rewrite(Refactor *rf, Expr *e) {
    Expr *done = ptrmap_get(&rf->memo, e);
    if (done)
        return done;
    Expr *r = e;
    const Stage *p = e->kind == EX_READ ? sched_stage_of(rf->s, e->u.tensor) : NULL;
    if (p && sched_stage_has_note(p, NOTE_REFACTOR)) {
        /* the rules allow only reads at children here */
        r = at_read(rf, p, e);
    } else if (e->kind == EX_REDUCE) {
        Expr *b = rewrite(rf, e->args[0]);
        if (b != e->args[0])
            r = ir_reduce(rf->m, e->u.red.rk, e->u.red.naxes, e->u.red.axes, b);
    } else if (e->n > 0 && e->kind != EX_LOAD) {
        Expr *args[RV_MAX_DIMS + 3];
        Expr **a = e->n <= RV_COUNT(args) ? args : base_xmalloc(sizeof(Expr *) * (size_t)e->n);
        bool changed = false;
        for (int i = 0; i < e->n; i++)
            changed |= (a[i] = rewrite(rf, e->args[i])) != e->args[i];
        if (changed)
            r = ir_rebuild(rf->m, e, a);
        if (a != args)
            base_free(a);
    }
    ptrmap_put(&rf->memo, e, r);
    return r;
}

void lower_refactor(LowerCtx *c, Recurse *g) {
    bool any = false;
    for (int i = 0; i < g->members.len; i++)
        any |= sched_stage_has_note(sched_stage_of(c->s, g->members.data[i]), NOTE_REFACTOR);
    for (int k = 0; any && k < c->s->stages.len; k++) {
        Stage *q = c->s->stages.data[k];
        if (!sched_stage_in_group(q, g) || sched_stage_has_note(q, NOTE_REFACTOR))
            continue;
        Refactor rf = {c->m, c->s, {0}};
        if (q->reduce)
            q->reduce = rewrite(&rf, q->reduce); /* the body's, through the memo */
        q->body = rewrite(&rf, q->body);
        if (q->pred) {
            q->pred = rewrite(&rf, q->pred);
            q->else_body = rewrite(&rf, q->else_body);
        }
        ptrmap_free(&rf.memo);
    }
}
