/*
 * opsplit.c — split operations and horizontal fusion in kernels
 * (src/sched/opsplit.c). A split stage's kernel (split_op) is its parts'
 * nests, the full tiles' first, each over its range of the split axis
 * (nest.c lowers a part's root over [0, E/M*M) or from E/M*M on).
 *
 * hfuse(B) in A's schedule (A and B sibling parts, or two independent
 * stages, then one kernel at the later one's place) makes the two
 * outermost loops one over the concatenation of their iterations,
 *
 *     for h < EA + EB:  if h < EA: let a = h in A's body
 *                       else:      let b = h - EA in B's body
 *
 * so a parallel pair is one thread-pool dispatch whose chunks c_balance.c
 * partitions by work across both (it reads the `if` on the loop variable
 * as the dispatch it is), and a pair bound to blockIdx.x one grid. The
 * bodies keep their loop variables, bound by the lets: nothing inside is
 * rewritten. What the fusion needs of the nests is checked here, against
 * the lowered loops (their kinds may be set after hfuse), and reported at
 * the hfuse step.
 */
#include "lower/lower.h"

static Stmt *hfuse_error(LowerCtx *c, const Stage *a, const char *fmt, ...) RV_PRINTF(3, 4);
static Stmt *hfuse_error(LowerCtx *c, const Stage *a, const char *fmt, ...) {
    if (c->st != RV_OK)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    Buf b = {0};
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    c->st = base_diag(RV_ERR_SCHEDULE, a->hfuse_src ? a->hfuse_src : c->m->src, a->hfuse_step->loc,
                      "hfuse: %s", buf_str(&b));
    buf_free(&b);
    return NULL;
}

/* The schedule of the two outermost loops, checked before lowering. */
static bool check_loops(LowerCtx *c, const Stage *a, const Stage *b) {
    const Stage *ps[2] = {a, b};
    const IterVar *v[2];
    for (int k = 0; k < 2; k++) {
        v[k] = ps[k]->leaves.len ? ps[k]->leaves.data[0] : NULL;
        if (!v[k] || v[k]->reduce) {
            hfuse_error(c, a, "%s has no outermost loop over its elements%s%s%s", ps[k]->name,
                        v[k] ? " (" : "", v[k] ? v[k]->name : "",
                        v[k] ? " is a reduction loop)" : "");
            return false;
        }
    }
    if (v[0]->kind != v[1]->kind) {
        hfuse_error(c, a, "the outermost loops of %s (%s, %s) and %s (%s, %s) differ in kind",
                    a->name, v[0]->name, sched_loop_kind_name(v[0]->kind), b->name, v[1]->name,
                    sched_loop_kind_name(v[1]->kind));
        return false;
    }
    return true;
}

/* The nests of a and b (a->hfuse_with) as one loop. */
static Stmt *hfuse(LowerCtx *c, Stage *a, Stage *b) {
    Module *m = c->m;
    if (!check_loops(c, a, b))
        return NULL;
    Stmt *na = lower_stage_nest(c, a, NULL, NULL, NULL);
    Stmt *nb = na ? lower_stage_nest(c, b, NULL, NULL, NULL) : NULL;
    if (!nb)
        return NULL;
    Stmt *nest[2] = {na, nb};
    Stage *ps[2] = {a, b};
    for (int k = 0; k < 2; k++)
        if (nest[k]->kind != ST_FOR)
            return hfuse_error(c, a,
                               "the nest of %s does not begin with its outermost loop (a "
                               "partitioned tail of a split of it, or a stage computed at the "
                               "top of %s, comes first: use tail=\"guard\", or compute the "
                               "stage inside the loop)",
                               ps[k]->name, ps[k]->name);
    /* an extent below 0 runs nothing: it must not shift the other's */
    Expr *ea = lower_ctx_simp(c, ir_binary(m, EX_MAX, na->u.loop.extent, ir_int(m, 0)));
    Expr *eb = lower_ctx_simp(c, ir_binary(m, EX_MAX, nb->u.loop.extent, ir_int(m, 0)));
    Expr *ext = lower_ctx_simp(c, ir_binary(m, EX_ADD, ea, eb));
    Axis *h = lower_loop_var(m, "h", ext);
    Stmt *arm_a = lower_let(m, na->u.loop.var, h->var, na->u.loop.body);
    Stmt *arm_b = lower_let(m, nb->u.loop.var, ir_binary(m, EX_SUB, h->var, ea), nb->u.loop.body);
    Stmt *s = lower_for(m, h, ext, na->u.loop.kind,
                        lower_if(m, ir_binary(m, EX_LT, h->var, ea), arm_a, arm_b));
    s->u.loop.spatial = true;
    return s;
}

Stmt *lower_split_stage(LowerCtx *c, Stage *st) {
    for (int k = 0; k < 2; k++)
        if (st->parts[k]->hfuse_with)
            return hfuse(c, st->parts[k], st->parts[k]->hfuse_with);
    Stmt *a = lower_stage_nest(c, st->parts[0], NULL, NULL, NULL);
    Stmt *b = a ? lower_stage_nest(c, st->parts[1], NULL, NULL, NULL) : NULL;
    if (!b)
        return NULL;
    Stmt *both[2] = {a, b};
    return lower_seq(c->m, 2, both);
}

Stmt *lower_hfused_stages(LowerCtx *c, Stage *st) {
    Stage *a = st->hfuse_with ? st : st->hfused_by;
    Stmt *s = hfuse(c, a, a->hfuse_with);
    Stage *other = a == st ? a->hfuse_with : a;
    Storage *sto;
    if (s && (c->st = lower_storage_of_tensor(c, other->t, &sto)) != RV_OK)
        return NULL;
    if (s)
        lower_use_storage(c, sto, PARAM_TENSOR);
    return s;
}
