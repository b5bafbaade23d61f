/*
 * sched.c — stages, the default schedule, and replaying schedule blocks.
 *
 * The default schedule gives every computed tensor a root stage whose
 * leaves are its spatial axes in order, then the reduce axes of its one
 * outermost reduction (if it has exactly one): serial loops in axis order,
 * the reduction innermost, one kernel per tensor. Blocks are applied in
 * source order; a block names a module tensor or a cache stage an earlier
 * step created. The trace (Schedule.trace) records every step applied, so
 * printing it and replaying it on the default schedule rebuilds the
 * schedule.
 */
#include <string.h>

#include "sched/sched.h"

static const char *const loop_kind_names[LOOP_COUNT] = {
#define LOOP(k, sched_name, ir_name) sched_name,
#include "loops.def"
#undef LOOP
};

const char *sched_loop_kind_name(LoopKind k) {
    return k >= 0 && k < LOOP_COUNT ? loop_kind_names[k] : "?";
}

static const char *const note_kind_names[NOTE_COUNT] = {"dynamic_batch", "specialize", "batch",
                                                             "refactor", "gpu_batches",
                                                             "unroll_recursion"};

const char *sched_note_kind_name(StageNoteKind k) {
    return k >= 0 && k < NOTE_COUNT ? note_kind_names[k] : "?";
}

void sched_stage_note(Stage *st, StageNoteKind k, int64_t payload) {
    RV_ASSERT(k >= 0 && k < NOTE_COUNT);
    int i = 0;
    while (i < st->nnotes && st->notes[i].kind != k)
        i++;
    _Static_assert(SCHED_MAX_NOTES >= NOTE_COUNT, "room for one note of each kind");
    st->notes[i].kind = k;
    st->notes[i].payload = payload;
    if (i == st->nnotes)
        st->nnotes++;
}

/* ---- the outermost reduction of a body ---- */

typedef struct Outer {
    Expr *found;
    int count;
    PtrMap seen;
} Outer;

static void find_outer_reduces(Outer *o, Expr *e) {
    if (ptrmap_has(&o->seen, e))
        return;
    ptrmap_put(&o->seen, e, e);
    if (e->kind == EX_REDUCE) {
        if (o->found != e)
            o->count++;
        o->found = e;
        return; /* reductions inside it are not loops of the stage */
    }
    for (int i = 0; i < e->n; i++)
        find_outer_reduces(o, e->args[i]);
}

/* The REDUCE whose axes become IterVars: the only outermost one. */
Expr *sched_stage_reduction(Expr *body) {
    Outer o = {0};
    find_outer_reduces(&o, body);
    ptrmap_free(&o.seen);
    return o.count == 1 ? o.found : NULL;
}

static IterVar *iv_root(Schedule *s, Stage *st, Axis *ax, bool reduce) {
    IterVar *v = arena_alloc(s->m->arena, sizeof(IterVar));
    v->name = ax->name;
    v->rel = IV_ROOT;
    v->reduce = reduce;
    v->axis = ax;
    v->kind = LOOP_SERIAL;
    v->pad = 1;
    v->id = st->ivs.len;
    vec_push(&st->ivs, v);
    vec_push(&st->leaves, v);
    return v;
}

/* Root IterVars: spatial axes, then the stage reduction's axes. */
void sched_stage_init_ivs(Schedule *s, Stage *st) {
    st->ivs.len = st->leaves.len = 0;
    for (int i = 0; i < st->t->ndim; i++)
        iv_root(s, st, st->t->axes[i], false);
    if (st->reduce)
        for (int i = 0; i < st->reduce->u.red.naxes; i++)
            iv_root(s, st, st->reduce->u.red.axes[i], true);
}

Stage *sched_stage_add(Schedule *s, const char *name, StageKind k, Tensor *t) {
    Stage *st = arena_alloc(s->m->arena, sizeof(Stage));
    st->name = name;
    st->kind = k;
    st->t = t;
    st->attach = ATTACH_ROOT;
    st->align = 1;
    for (int d = 0; d < RV_MAX_DIMS; d++)
        st->order[d] = d;
    st->id = s->stages.len;
    vec_push(&s->stages, st);
    strmap_put(&s->by_name, name, st);
    return st;
}

Schedule *sched_new(Module *m) {
    Schedule *s = base_xcalloc(1, sizeof(Schedule));
    s->m = m;
    for (int i = 0; i < m->tensors.len; i++) {
        Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            continue;
        Stage *st = sched_stage_add(s, t->name, STAGE_OP, t);
        st->body = t->op->body;
        st->pred = t->op->pred;
        st->else_body = t->op->else_body;
        /* a member of a recursion group is a compute, or a conditional
         * when it has a predicate */
        bool cond = t->op->kind == OP_COND || (t->op->kind == OP_RECURSE && t->op->pred);
        if (!cond && (t->op->kind == OP_COMPUTE || t->op->kind == OP_RECURSE))
            st->reduce = sched_stage_reduction(st->body);
        if (t->op->kind != OP_EXTERN)
            sched_stage_init_ivs(s, st);
    }
    return s;
}

void sched_free(Schedule *s) {
    if (!s)
        return;
    for (int i = 0; i < s->stages.len; i++) {
        vec_free(&s->stages.data[i]->ivs);
        vec_free(&s->stages.data[i]->leaves);
    }
    vec_free(&s->stages);
    strmap_free(&s->by_name);
    buf_free(&s->trace);
    base_free(s);
}

Stage *sched_stage(const Schedule *s, const char *name) {
    return strmap_get(&s->by_name, name);
}

Stage *sched_stage_of(const Schedule *s, const Tensor *t) {
    for (int i = 0; i < s->stages.len; i++)
        if (s->stages.data[i]->t == t)
            return s->stages.data[i];
    return NULL;
}

/* ---- reads ---- */

int sched_stage_reads(const Stage *st, Tensor ***out) {
    const Op *op = st->t->op;
    if (op->kind == OP_EXTERN && st->kind == STAGE_OP)
        return ir_collect_reads(op->inputs, op->nin, NULL, 0, out);
    Expr *es[] = {st->body, st->pred, st->else_body};
    return ir_collect_reads(NULL, 0, es, 3, out);
}

/* ---- printing ---- */

void sched_print_stage(Buf *b, const Stage *st) {
    static const char *const attach[ATTACH_COUNT] = {"root", "at", "inline"};
    buf_printf(b, "stage %s (%s", st->name, attach[st->attach]);
    if (st->attach == ATTACH_AT)
        buf_printf(b, " %s.%s", st->at->name, st->at_iv ? st->at_iv->name : "top");
    if (st->local_pad)
        buf_puts(b, ", padded");
    for (int i = 0; i < st->nnotes; i++)
        buf_printf(b, ", %s=%lld", sched_note_kind_name(st->notes[i].kind),
                   (long long)st->notes[i].payload);
    buf_puts(b, "):");
    for (int i = 0; i < st->leaves.len; i++) {
        const IterVar *v = st->leaves.data[i];
        buf_printf(b, " %s%s", v->name, v->reduce ? "(r)" : "");
        if (v->kind != LOOP_SERIAL)
            buf_printf(b, "[%s]", sched_loop_kind_name(v->kind));
    }
    buf_puts(b, "\n");
}

/* ---- replay ---- */

/* A block naming a recursion group: its PRIM_GROUP steps. */
static rv_status apply_group_block(Schedule *s, Recurse *g, const SchedBlock *blk) {
    buf_printf(&s->trace, "schedule %s {\n", blk->name);
    for (int i = 0; i < blk->nsteps; i++) {
        rv_status r = sched_group_step(s, g, &blk->steps[i], blk->src ? blk->src : s->m->src);
        if (r != RV_OK)
            return r;
    }
    buf_puts(&s->trace, "}\n");
    return RV_OK;
}

rv_status sched_apply_block(Schedule *s, const SchedBlock *blk) {
    if (blk->group)
        return apply_group_block(s, blk->group, blk);
    Stage *st = sched_stage(s, blk->name);
    if (!st) {
        Buf names = {0}, hint = {0};
        Vec(const char *) cands = {0};
        for (int i = 0; i < s->stages.len; i++) {
            buf_printf(&names, "%s%s", i ? ", " : "", s->stages.data[i]->name);
            vec_push(&cands, s->stages.data[i]->name);
        }
        base_near_hint(&hint, blk->name, cands.data, cands.len);
        rv_status r = base_diag(RV_ERR_TYPE, blk->src ? blk->src : s->m->src, blk->name_loc,
                                "unknown schedule target '%s'%s (stages: %s)", blk->name,
                                buf_str(&hint), names.len ? buf_str(&names) : "none");
        vec_free(&cands);
        buf_free(&hint);
        buf_free(&names);
        return r;
    }
    buf_printf(&s->trace, "schedule %s {\n", blk->name);
    for (int i = 0; i < blk->nsteps; i++) {
        rv_status r = sched_step(s, st, &blk->steps[i], blk->src ? blk->src : s->m->src);
        if (r != RV_OK)
            return r;
    }
    buf_puts(&s->trace, "}\n");
    return RV_OK;
}

rv_status sched_from_module(Module *m, Schedule **out) {
    Schedule *s = sched_new(m);
    for (int i = 0; i <= m->scheds.len; i++) {
        rv_status r = i < m->scheds.len ? sched_apply_block(s, &m->scheds.data[i])
                                        : sched_check_placements(s);
        if (r != RV_OK) {
            sched_free(s);
            return r;
        }
    }
    *out = s;
    return RV_OK;
}

bool sched_stage_reads_tensor(const Stage *st, const Tensor *t) {
    Tensor **ts;
    int n = sched_stage_reads(st, &ts);
    bool found = false;
    for (int i = 0; i < n; i++)
        found |= ts[i] == t;
    base_free(ts);
    return found;
}

bool sched_iv_derives_from(const IterVar *v, const IterVar *root) {
    if (v == root)
        return true;
    switch (v->rel) {
    case IV_OUTER:
    case IV_INNER:
        return sched_iv_derives_from(v->parent, root);
    case IV_FUSED:
        return sched_iv_derives_from(v->fa, root) || sched_iv_derives_from(v->fb, root);
    default:
        return false;
    }
}

Stage *sched_reader(const Schedule *s, const Tensor *t, const Stage *except) {
    for (int i = 0; i < s->stages.len; i++) {
        Stage *o = s->stages.data[i];
        if (o != except && o->t != t && o->attach != ATTACH_INLINE &&
            sched_stage_reads_tensor(o, t))
            return o;
    }
    return NULL;
}
