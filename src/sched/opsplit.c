/*
 * opsplit.c — operation splitting and horizontal fusion (CoRa section 4,
 * Fig. 5): `F, R = split_op(v, M)` on stage Y makes two parts that compute
 * Y over [0, E/M*M) and [E/M*M, E) of its spatial axis v (E: v's extent,
 * which may vary, `len[b]`), each a stage with loops of its own, so the
 * full tiles can be split by M with no tail and vectorized while the rest
 * runs scalar or guarded. `hfuse(R)` in F's schedule runs the two parts'
 * outermost loops as one loop over the concatenation of their iterations
 * (one thread-pool dispatch, balanced by work: c_balance.c); so does
 * `hfuse(P)` for two independent stages of their own kernels, which then
 * share one kernel where the later of the two is defined.
 *
 * The split point E/M*M is in [0, E] for every E >= 0 by construction, so
 * the parts cover Y exactly, whatever the sizes and ragged lengths. A split
 * stage keeps its definition (readers read its tensor as before) but has
 * no loops: its kernel is its parts' nests (src/lower/opsplit.c). What the
 * parts cannot honour is rejected here, at the step:
 *   - split_op comes first on Y (before any loop step, cache stage or
 *     placement inside Y), on a spatial axis, of a compute stage of its own
 *     (not a cache stage, a part, an extern call or a recursion member);
 *   - Y takes no step after it (its parts are scheduled instead), and Y
 *     and its parts cannot be computed at a loop or inlined: the parts
 *     together are one kernel storing the whole tensor;
 *   - a part takes the loop steps, cache_read and compute_at of its own
 *     cache stages, not the steps that change Y's storage or computation as
 *     a whole (cache_write, pad, storage_pad, split_op);
 *   - hfuse pairs a part with its sibling, or two independent stages of
 *     their own kernels; a stage fused is then not placed, inlined or
 *     split. The kinds of the two outermost loops are checked when the
 *     schedule is lowered (src/lower/opsplit.c), at the hfuse step.
 */
#include <string.h>

#include "sched/sched.h"

static rv_status fail(const SchedStep *step, const SrcFile *src, SrcLoc loc, const char *fmt, ...)
    RV_PRINTF(4, 5);
static rv_status fail(const SchedStep *step, const SrcFile *src, SrcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rv_status r = sched_step_vfail(step, src, loc, fmt, ap);
    va_end(ap);
    return r;
}

bool sched_stage_split(const Stage *p) {
    return p->parts[0] || p->kind == STAGE_PART || sched_hfuse_partner(p);
}

/* Has st been scheduled (loops transformed, kinds set, stages placed in
 * it)? Its parts would not carry it. */
static const char *scheduled(const Schedule *s, const Stage *st) {
    if (st->touched || st->leaves.len != st->ivs.len)
        return "its loops are transformed";
    for (int i = 0; i < st->leaves.len; i++)
        if (st->leaves.data[i] != st->ivs.data[i] || st->leaves.data[i]->kind != LOOP_SERIAL)
            return "its loops are transformed";
    for (int i = 0; i < s->stages.len; i++)
        if (s->stages.data[i]->attach == ATTACH_AT && s->stages.data[i]->at == st)
            return "a stage is computed inside it";
    return NULL;
}

rv_status sched_split_op(Schedule *s, Stage *st, const SchedStep *step, const SrcFile *src) {
    const SchedArg *va = &step->args[0], *fa = &step->args[1];
    SrcLoc loc = step->loc;
    if (st->kind == STAGE_PART)
        return fail(step, src, loc, "%s is a part of %s; a part is not split again", st->name,
                    st->whole->name);
    if (st->kind != STAGE_OP)
        return fail(step, src, loc, "%s is a cache stage; split the stage it serves", st->name);
    if (sched_stage_group(st))
        return fail(step, src, loc, "%s is a member of recursion %s; its nodes are not split",
                    st->name, sched_stage_group(st)->name);
    if (st->attach != ATTACH_ROOT)
        return fail(step, src, loc, "%s is %s; only a stage of its own kernel is split", st->name,
                    st->attach == ATTACH_INLINE ? "inlined" : "computed at a loop of another");
    if (sched_hfuse_partner(st))
        return fail(step, src, loc, "%s is fused with %s (hfuse); split it first", st->name,
                    sched_hfuse_partner(st)->name);
    const char *why = scheduled(s, st);
    if (why)
        return fail(step, src, loc, "split_op must come first in the schedule of %s (%s)", st->name,
                    why);
    IterVar *v = NULL;
    for (int i = 0; i < st->ivs.len; i++)
        if (strcmp(st->ivs.data[i]->name, va->s) == 0)
            v = st->ivs.data[i];
    RV_ASSERT(v && v->rel == IV_ROOT); /* checked a leaf; no step has run */
    if (v->reduce)
        return fail(step, src, va->loc,
                    "%s is a reduction loop: each part would hold part of every sum; split a "
                    "spatial loop",
                    v->name);
    if (v->pad > 1)
        return fail(step, src, va->loc, "%s is padded (pad(%s, %lld))", v->name, v->name,
                    (long long)v->pad);
    if (fa->i < 1 || fa->i > ((int64_t)1 << 30))
        return fail(step, src, fa->loc, "the multiple must be in 1..%lld, got %lld",
                    (long long)1 << 30, (long long)fa->i);
    for (int k = 0; k < 2; k++) {
        Stage *p = sched_stage_add(s, step->outs[k], STAGE_PART, st->t);
        p->loc = loc;
        p->body = st->body;
        p->pred = st->pred;
        p->else_body = st->else_body;
        p->reduce = st->reduce;
        p->whole = st;
        sched_stage_init_ivs(s, p);
        for (int i = 0; i < p->ivs.len; i++)
            if (p->ivs.data[i]->rel == IV_ROOT && p->ivs.data[i]->axis == v->axis) {
                p->ivs.data[i]->part = k == 0 ? PART_FULL : PART_REST;
                p->ivs.data[i]->part_mult = fa->i;
            }
        st->parts[k] = p;
    }
    st->split_step = step;
    st->split_src = src;
    return RV_OK;
}

Stage *sched_hfuse_partner(const Stage *st) {
    return st->hfuse_with ? st->hfuse_with : st->hfused_by;
}

/* Does tensor x's definition read t? */
static bool defined_reading(const Tensor *x, const Tensor *t) {
    const Op *op = x->op;
    if (op->kind == OP_INPUT)
        return false;
    Expr *es[] = {op->body, op->pred, op->else_body};
    Tensor **rs;
    int n = ir_collect_reads(op->kind == OP_EXTERN ? op->inputs : NULL,
                             op->kind == OP_EXTERN ? op->nin : 0, es, 3, &rs);
    bool found = false;
    for (int i = 0; i < n; i++)
        found |= rs[i] == t;
    base_free(rs);
    return found;
}

/* Can stage p, an operation of its own kernel, be fused with another? */
static const char *fusable_op(const Stage *p) {
    if (p->kind != STAGE_OP)
        return "is a cache stage, computed inside its reader";
    if (p->parts[0])
        return "is split (split_op): fuse its parts";
    if (p->t->op->kind == OP_EXTERN)
        return "is an extern call";
    if (sched_stage_group(p))
        return "is a member of a recursion group";
    if (p->attach != ATTACH_ROOT)
        return p->attach == ATTACH_INLINE ? "is inlined" : "is computed at a loop of another stage";
    return NULL;
}

rv_status sched_hfuse(Schedule *s, Stage *st, const SchedStep *step, const SrcFile *src) {
    const SchedArg *a = &step->args[0];
    Stage *p = sched_stage(s, a->s);
    if (!p)
        return fail(step, src, a->loc, "no stage named '%s'", a->s);
    if (p == st)
        return fail(step, src, a->loc, "a stage is not fused with itself");
    Stage *ws[2] = {st, p};
    for (int k = 0; k < 2; k++)
        if (sched_hfuse_partner(ws[k]))
            return fail(step, src, step->loc, "%s is fused with %s already", ws[k]->name,
                        sched_hfuse_partner(ws[k])->name);
    if (st->kind == STAGE_PART || p->kind == STAGE_PART) {
        Stage *part = st->kind == STAGE_PART ? st : p, *w = part->whole;
        Stage *other = w->parts[0] == part ? w->parts[1] : w->parts[0];
        if (st->kind != p->kind || st->whole != p->whole)
            return fail(step, src, a->loc,
                        "%s is a part of %s; it is fused only with the other part, %s", part->name,
                        w->name, other->name);
    } else {
        for (int k = 0; k < 2; k++) {
            const char *why = fusable_op(ws[k]);
            if (why)
                return fail(step, src, k ? a->loc : step->loc, "%s %s", ws[k]->name, why);
        }
        /* the kernel runs where the later of the two is defined: the
         * earlier one moves there, past the tensors in between */
        Module *m = s->m;
        int i = st->t->id, j = p->t->id;
        const Tensor *e = m->tensors.data[i < j ? i : j];
        for (int k = (i < j ? i : j) + 1; k <= (i < j ? j : i); k++)
            if (defined_reading(m->tensors.data[k], e))
                return fail(step, src, step->loc,
                            "%s reads %s, so the two are not independent%s%s: %s must be "
                            "computed before",
                            m->tensors.data[k]->name, e->name,
                            m->tensors.data[k] == st->t || m->tensors.data[k] == p->t ? "" : ", ",
                            m->tensors.data[k] == st->t || m->tensors.data[k] == p->t
                                ? ""
                                : "and is defined between them",
                            e->name);
    }
    st->hfuse_with = p;
    p->hfused_by = st;
    st->hfuse_step = step;
    st->hfuse_src = src;
    return RV_OK;
}

rv_status sched_split_step_check(const Schedule *s, const Stage *st, const SchedStep *step,
                                 const SrcFile *src) {
    (void)s;
    if (st->parts[0])
        return fail(step, src, step->loc,
                    "%s is split into %s and %s (split_op at %d:%d); schedule the parts", st->name,
                    st->parts[0]->name, st->parts[1]->name, st->split_step->loc.line,
                    st->split_step->loc.col);
    if (st->kind != STAGE_PART)
        return RV_OK;
    static const char *const whole_steps[] = {"cache_write", "pad", "storage_pad", "split_op"};
    for (size_t i = 0; i < RV_COUNT(whole_steps); i++)
        if (strcmp(step->prim, whole_steps[i]) == 0)
            return fail(step, src, step->loc,
                        "%s is a part of %s, which computes %s's tensor over a range of its "
                        "iterations; %s applies to a whole stage, not to a part",
                        st->name, st->whole->name, st->whole->name, step->prim);
    return RV_OK;
}
