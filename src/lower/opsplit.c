/*
 * opsplit.c — the kernel of a split operation (split_op, src/sched/opsplit.c):
 * its parts' nests, the full tiles' first, each over its range of the split
 * axis (nest.c lowers a part's root over [0, E/M*M) or from E/M*M on).
 *
 * With hfuse the two outermost loops become one over the concatenation of
 * their iterations,
 *
 *     for h < A + B:  if h < A: let a = h in A's body
 *                     else:     let b = h - A in B's body
 *
 * so a parallel pair is one thread-pool dispatch whose chunks c_balance.c
 * partitions by work across both parts (it reads the `if` on the loop
 * variable as the dispatch it is). The bodies keep their loop variables,
 * bound by the lets: nothing inside is rewritten. What the fusion needs
 * of the nests is checked here, against the lowered loops (their kinds
 * may be set after hfuse), and reported at the hfuse step.
 */
#include "lower/lower.h"

static Stmt *hfuse_error(LowerCtx *c, const Stage *w, const char *fmt, ...) RV_PRINTF(3, 4);
static Stmt *hfuse_error(LowerCtx *c, const Stage *w, const char *fmt, ...) {
    if (c->st != RV_OK)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    Buf b = {0};
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    c->st = base_diag(RV_ERR_SCHEDULE, w->hfuse_src ? w->hfuse_src : c->m->src, w->hfuse_step->loc,
                      "hfuse: %s", buf_str(&b));
    buf_free(&b);
    return NULL;
}

/* The schedule of the parts' outermost loops, checked before lowering. */
static bool hfuse_check_loops(LowerCtx *c, const Stage *w) {
    const IterVar *v[2];
    for (int k = 0; k < 2; k++) {
        const Stage *p = w->parts[k];
        v[k] = p->leaves.data[0];
        if (v[k]->reduce) {
            hfuse_error(c, w, "the outermost loop of %s, %s, is a reduction loop", p->name,
                        v[k]->name);
            return false;
        }
    }
    if (v[0]->kind != v[1]->kind) {
        hfuse_error(c, w, "the outermost loops of %s (%s, %s) and %s (%s, %s) differ in kind",
                    w->parts[0]->name, v[0]->name, sched_loop_kind_name(v[0]->kind),
                    w->parts[1]->name, v[1]->name, sched_loop_kind_name(v[1]->kind));
        return false;
    }
    return true;
}

static Stmt *hfuse(LowerCtx *c, const Stage *w, Stmt *a, Stmt *b) {
    Module *m = c->m;
    Stmt *nest[2] = {a, b};
    for (int k = 0; k < 2; k++)
        if (nest[k]->kind != ST_FOR)
            return hfuse_error(c, w,
                               "the nest of %s does not begin with its outermost loop (a "
                               "partitioned tail of a split of it, or a stage computed at the "
                               "top of %s, comes first: use tail=\"guard\", or compute the "
                               "stage inside the loop)",
                               w->parts[k]->name, w->parts[k]->name);
    /* an extent below 0 runs nothing: it must not shift the other part */
    Expr *ea = lower_ctx_simp(c, ir_binary(m, EX_MAX, a->u.loop.extent, ir_int(m, 0)));
    Expr *eb = lower_ctx_simp(c, ir_binary(m, EX_MAX, b->u.loop.extent, ir_int(m, 0)));
    Expr *ext = lower_ctx_simp(c, ir_binary(m, EX_ADD, ea, eb));
    Axis *h = lower_loop_var(m, "h", ext);
    Stmt *arm_a = lower_let(m, a->u.loop.var, h->var, a->u.loop.body);
    Stmt *arm_b = lower_let(m, b->u.loop.var, ir_binary(m, EX_SUB, h->var, ea), b->u.loop.body);
    Stmt *s = lower_for(m, h, ext, a->u.loop.kind,
                        lower_if(m, ir_binary(m, EX_LT, h->var, ea), arm_a, arm_b));
    s->u.loop.spatial = true;
    return s;
}

Stmt *lower_split_stage(LowerCtx *c, Stage *st) {
    if (st->hfused && !hfuse_check_loops(c, st))
        return NULL;
    Stmt *a = lower_stage_nest(c, st->parts[0], NULL, NULL, NULL);
    Stmt *b = a ? lower_stage_nest(c, st->parts[1], NULL, NULL, NULL) : NULL;
    if (!b)
        return NULL;
    if (st->hfused)
        return hfuse(c, st, a, b);
    Stmt *both[2] = {a, b};
    return lower_seq(c->m, 2, both);
}
