/*
 * recurse.c — the schedule of recursion groups (Cortex §4, A.4).
 *
 * A group `recurse R over T { ... }` is scheduled in two places: its
 * members' stages like computes (`schedule h { split(i, 16) ... }`), and
 * the group itself in `schedule R { ... }` with the PRIM_GROUP primitives
 * (dynamic_batch, specialize, refactor, gpu_batches, unroll_recursion:
 * prims.def). The group's choices are notes on
 * every member's stage (sched.h: StageNote), which the query and the
 * stage printer already report; lowering (src/lower/recurse.c) reads them.
 *
 * Lowering puts every member's nest inside one loop over the nodes (or
 * over the dynamic batches), so the rules below keep each member's node
 * loop where that loop can bind it: outermost, one loop, serial unless the
 * nodes of one iteration are independent (dynamic_batch: then the node
 * loop is over a batch's nodes and may be split and reordered), and a member
 * computed only within its group, inside another member only when it is
 * read at its own node alone (a local buffer holds one node's values). They are checked after every step, so
 * an error is located at the step that breaks one.
 */
#include "sched/sched.h"

Recurse *sched_stage_group(const Stage *st) {
    return st && st->kind == STAGE_OP ? ir_tensor_recurse(st->t) : NULL;
}

bool sched_stage_has_note(const Stage *st, StageNoteKind k) {
    for (int i = 0; i < st->nnotes; i++)
        if (st->notes[i].kind == k)
            return true;
    return false;
}

bool sched_group_has(const Schedule *s, const Recurse *r, StageNoteKind k) {
    Stage *st = r->members.len ? sched_stage_of(s, r->members.data[0]) : NULL;
    return st && sched_stage_has_note(st, k);
}

void sched_group_note(Schedule *s, Recurse *r, StageNoteKind k, int64_t payload) {
    for (int i = 0; i < r->members.len; i++) {
        Stage *st = sched_stage_of(s, r->members.data[i]);
        RV_ASSERT(st);
        sched_stage_note(st, k, payload);
    }
}

int64_t sched_group_payload(const Schedule *s, const Recurse *r, StageNoteKind k) {
    Stage *st = r->members.len ? sched_stage_of(s, r->members.data[0]) : NULL;
    for (int i = 0; st && i < st->nnotes; i++)
        if (st->notes[i].kind == k)
            return st->notes[i].payload;
    return 0;
}

static rv_status fail(const SchedStep *step, const SrcFile *src, const char *fmt, ...)
    RV_PRINTF(3, 4);
static rv_status fail(const SchedStep *step, const SrcFile *src, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rv_status r = sched_step_vfail(step, src, step->loc, fmt, ap);
    va_end(ap);
    return r;
}

/* The root IterVar of a member's node axis (axis 0). */
static const IterVar *node_root(const Stage *st) {
    for (int i = 0; i < st->ivs.len; i++)
        if (st->ivs.data[i]->rel == IV_ROOT && st->ivs.data[i]->axis == st->t->axes[0])
            return st->ivs.data[i];
    return NULL;
}

/* The reads of t in a stage: at its own node (`t[n, ...]`), at another
 * (`t[child[n, k], ...]`). */
typedef struct ChildRead {
    const Tensor *t;
    const Axis *n; /* the reader's node axis */
    bool found;    /* at another node */
    bool own;      /* at its own node */
} ChildRead;

static void child_read_fn(const Expr *e, void *ctx) {
    ChildRead *c = ctx;
    if (e->kind != EX_READ || e->u.tensor != c->t)
        return;
    const Expr *i0 = e->args[0];
    while (i0->kind == EX_CAST)
        i0 = i0->args[0];
    if (i0->kind == EX_VAR && i0->u.axis == c->n)
        c->own = true;
    else
        c->found = true;
}

static ChildRead stage_reads(const Stage *r, const Tensor *t) {
    ChildRead c = {t, r->t->axes[0], false, false};
    Expr *es[] = {r->body, r->pred, r->else_body};
    for (int j = 0; j < 3; j++)
        if (es[j])
            ir_visit(es[j], child_read_fn, &c);
    return c;
}

const Stage *sched_group_child_reader(const Schedule *s, const Recurse *g, const Tensor *t) {
    for (int i = 0; i < s->stages.len; i++) {
        const Stage *r = s->stages.data[i];
        if (sched_stage_group(r) != g)
            continue;
        if (stage_reads(r, t).found)
            return r;
    }
    return NULL;
}

bool sched_stage_in_group(const Stage *q, const Recurse *g) {
    for (; q; q = q->attach == ATTACH_AT ? q->at : NULL)
        if (sched_stage_group(q) == g)
            return true;
    return false;
}

/* refactor(P): P is computed where its parents read it (lowering
 * substitutes its body at each `P[child[n, k], ...]`), so nothing may
 * need its stored values: not an output, not a stage outside the group,
 * not a read at its own node; its body reads no refactored member (whose
 * values would then be needed two levels down); and a DAG's shared child
 * would be computed once per parent (Cortex refactors trees and sequences
 * only). */
static rv_status check_refactor(Schedule *s, Stage *st, Recurse *g, const SchedStep *step,
                                const SrcFile *src) {
    if (g->st->kind == RV_STRUCT_DAG)
        return fail(step, src,
                    "refactor(%s): recursion %s is over DAG structure %s, whose nodes may have "
                    "several parents: %s would be computed once per parent (trees and sequences "
                    "only)",
                    st->name, g->name, g->st->name, st->name);
    if (ir_tensor_is_output(s->m, st->t))
        return fail(step, src,
                    "refactor(%s): %s is an output, so its values are stored at every node; a "
                    "refactored member is computed only where its parents read it%s",
                    st->name, st->name,
                    s->m->outputs.len ? ""
                                      : " (no later definition reads it: an `output` "
                                        "declaration naming the program's outputs without it "
                                        "makes it an intermediate)");
    if (st->attach != ATTACH_ROOT)
        return fail(step, src,
                    "refactor(%s): %s is computed inside %s; a refactored member is computed "
                    "where its parents read it",
                    st->name, st->name, st->at->name);
    for (int i = 0; i < s->stages.len; i++) {
        const Stage *q = s->stages.data[i];
        if (q->attach == ATTACH_AT && q->at == st)
            return fail(step, src,
                        "refactor(%s): %s is computed inside %s, whose own nest a refactored "
                        "member does not have",
                        st->name, q->name, st->name);
        if (!sched_stage_reads_tensor(q, st->t))
            continue;
        if (!sched_stage_in_group(q, g))
            return fail(step, src,
                        "refactor(%s): %s reads %s outside recursion %s, where only stored "
                        "values can be read",
                        st->name, q->name, st->name, g->name);
        if (stage_reads(q, st->t).own)
            return fail(step, src,
                        "refactor(%s): %s reads %s at its own node; a refactored member is read "
                        "only at children (`%s[child[n, k], ...]`)",
                        st->name, q->name, st->name, st->name);
    }
    for (int i = 0; i < g->members.len; i++) {
        Stage *m = sched_stage_of(s, g->members.data[i]);
        if (sched_stage_has_note(m, NOTE_REFACTOR) && sched_stage_reads_tensor(st, m->t))
            return fail(step, src,
                        "refactor(%s): %s reads %s, which is refactored too: computed at %s's "
                        "parents, %s would need %s two levels down, which is not stored",
                        st->name, st->name, m->name, st->name, st->name, m->name);
    }
    return RV_OK;
}

/* unroll_recursion(): lowering (src/lower/unroll.c) computes, in one
 * iteration, a head node's internal children and then the head, each
 * member's nest at one node; the iterations of an unrolled batch are one
 * loop. So: trees and sequences only (a DAG's shared child would be
 * computed once per parent), after dynamic_batch() (the leaves are batch
 * 0, the iterations come in batches), no GPU binding (one iteration is
 * one thread's), and each member's node loop stays one loop, outermost,
 * serial or parallel: the loop over an unrolled batch's iterations is
 * parallel when a member's node loop is. */
static rv_status check_unroll(const Schedule *s, const Stage *st, const Recurse *g,
                              const IterVar *n,
                              const SchedStep *step, const SrcFile *src) {
    if (g->st->kind == RV_STRUCT_DAG)
        return fail(step, src,
                    "unroll_recursion(): recursion %s is over DAG structure %s, whose nodes may "
                    "have several parents: a shared child would be computed once per parent "
                    "(trees and sequences only)",
                    g->name, g->st->name);
    if (!sched_group_has(s, g, NOTE_DYNAMIC_BATCH))
        return fail(step, src,
                    "unroll_recursion() runs the iterations of recursion %s in batches after "
                    "the leaves (batch 0): write `dynamic_batch()` before it in `schedule %s { "
                    "... }`",
                    g->name, g->name);
    if (sched_group_has(s, g, NOTE_GPU_BATCHES))
        return fail(step, src,
                    "unroll_recursion() and gpu_batches() in recursion %s: an unrolled iteration "
                    "(a node and its children, one after the other) is not spread over a GPU's "
                    "threads; unrolling is for the CPU",
                    g->name);
    if (!st->leaves.len || st->leaves.data[0] != n)
        return fail(step, src,
                    "the node loop %s of %s must stay its outermost loop, one loop (not split, "
                    "fused or moved inward) with unroll_recursion(): recursion %s computes a "
                    "member at one node at a time, a head's children and then the head",
                    n->name, st->name, g->name);
    if (n->kind != LOOP_SERIAL && n->kind != LOOP_PARALLEL)
        return fail(step, src,
                    "the node loop %s of %s cannot be %s with unroll_recursion(): it is the loop "
                    "over the iterations of an unrolled batch, serial or parallel",
                    n->name, st->name, sched_loop_kind_name(n->kind));
    return RV_OK;
}

static rv_status check_member(Schedule *s, Stage *st, Recurse *g, const SchedStep *step,
                              const SrcFile *src) {
    if (st->attach == ATTACH_INLINE)
        return fail(step, src,
                    "%s is a member of recursion %s: members are computed node by node in "
                    "the group's loop (their values at children are read later), not inlined",
                    st->name, g->name);
    if (st->attach == ATTACH_AT && sched_stage_group(st->at) != g)
        return fail(step, src,
                    "%s is a member of recursion %s: it can be computed only inside another "
                    "member of %s (the group's loop over nodes encloses them all), not inside %s",
                    st->name, g->name, g->name, st->at->name);
    const Stage *by = st->attach == ATTACH_AT ? sched_group_child_reader(s, g, st->t) : NULL;
    if (by)
        return fail(step, src,
                    "%s is read at the children of a node (by %s): computed inside another "
                    "member it would hold one node's values only; a member read at children "
                    "stays at the level of recursion %s",
                    st->name, by->name, g->name);
    const IterVar *n = node_root(st);
    RV_ASSERT(n);
    if (sched_stage_has_note(st, NOTE_UNROLL)) {
        rv_status r = check_unroll(s, st, g, n, step, src);
        if (r != RV_OK)
            return r;
    }
    /* With dynamic batches a member's nest runs over the nodes of one
     * batch, which are independent: its node loop is a loop like the
     * others (split into tiles of nodes for register blocking, moved
     * inside a loop over output columns), its extent the batch's length.
     * Without, each iteration of the group's loop is one node, computed
     * after its children: nothing to tile or reorder. */
    bool dyn = sched_group_has(s, g, NOTE_DYNAMIC_BATCH);
    if (!dyn && (!st->leaves.len || st->leaves.data[0] != n))
        return fail(step, src,
                    "the node loop %s of %s must stay its outermost loop, one loop (not split, "
                    "fused or moved inward) unless `schedule %s { dynamic_batch() }` (written "
                    "before) gives it the nodes of a batch: the loop over the nodes of "
                    "recursion %s encloses every member's nest",
                    n->name, st->name, g->name, g->name);
    /* On a GPU the batches need a barrier between them that the threads of
     * one launch do not have: the group says which one it takes (a launch
     * per batch, or a grid-wide barrier in one persistent kernel). */
    bool gpu = sched_group_has(s, g, NOTE_GPU_BATCHES);
    if (gpu && !dyn)
        return fail(step, src,
                    "gpu_batches() separates the dynamic batches of recursion %s, which has "
                    "none: write `dynamic_batch()` before it in `schedule %s { ... }`",
                    g->name, g->name);
    for (int i = 0; i < st->leaves.len && !gpu; i++) {
        LoopKind k = st->leaves.data[i]->kind;
        if (sched_kind_is_gpu(k))
            return fail(step, src,
                        "loop %s of %s cannot be bound to %s: the batches of recursion %s need "
                        "a grid-wide barrier between them; say which in `schedule %s { "
                        "dynamic_batch() gpu_batches(\"launch\") }` (a launch per batch) or "
                        "gpu_batches(\"persistent\") (one kernel), written before",
                        st->leaves.data[i]->name, st->name, sched_loop_kind_name(k), g->name,
                        g->name);
    }
    if (n->kind != LOOP_SERIAL && !dyn)
        return fail(step, src,
                    "the node loop %s of %s cannot be %s: a node is computed after its children, "
                    "so without `schedule %s { dynamic_batch() }` (written before) the nodes run "
                    "one at a time",
                    n->name, st->name, sched_loop_kind_name(n->kind), g->name);
    /* after the rules above: P is not inlined, so ATTACH_AT names a stage */
    if (sched_stage_has_note(st, NOTE_REFACTOR))
        return check_refactor(s, st, g, step, src);
    return RV_OK;
}

rv_status sched_check_recursion(Schedule *s, const SchedStep *step, const SrcFile *src) {
    for (int i = 0; i < s->stages.len; i++) {
        Stage *st = s->stages.data[i];
        Recurse *g = sched_stage_group(st);
        rv_status r = g ? check_member(s, st, g, step, src) : RV_OK;
        if (r != RV_OK)
            return r;
    }
    return RV_OK;
}
