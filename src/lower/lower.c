/*
 * lower.c — from a schedule to kernels in the loop IR: the driver of the
 * lowering steps (docs/pipeline.md lists them with their contracts).
 *
 * Takes a module's schedule (src/sched: stages, their IterVar trees,
 * placements). Gives one kernel per root stage, in definition order:
 * its parameters (every size of the module, then the UF arrays, tensor
 * buffers and AUX arrays it uses, in that order), its body and its
 * prelude, loop IR that the verifier accepts. The steps, each one file:
 *
 *     nest.c      the loop nest of a stage, tails of non-dividing splits
 *                 partitioned (full tiles, then one guarded last tile)
 *     attach.c    stages computed at a loop of their reader: a buffer for
 *                 the region bounds.c infers, the stage's nest into it
 *     bounds.c    region inference: what the remaining iterations read
 *     reduce.c    reductions: their updates into a local accumulator or in
 *                 place, in `reduce RK into B:` for the reduce pass
 *                 (place.c) to initialise
 *     expr.c      tensor-level expressions into loop IR: reads in values
 *                 stay multi-dimensional accesses X{i, j} for the checks
 *                 and flatten passes, the schedule's indices and extents
 *                 are flattened with safe offsets and divisors (rtcheck.c)
 *     storage.c   the prelude filling the AUX arrays of ragged layouts
 *     opsplit.c   a split operation (split_op): its parts' nests, or one
 *                 loop over both (hfuse)
 *     recurse.c   a recursion group: one kernel, its members' nests in a
 *                 loop over nodes or dynamic batches
 *
 * They run interleaved, in one walk over each stage's nest: each needs
 * the values the walk has bound at its point (docs/pipeline.md says why
 * they are not separate loop-IR passes). A schedule the lowering cannot
 * express is RV_ERR_SCHEDULE, located at the step that placed the stage
 * concerned (`ravel check` lowers the schedule to report it).
 * lower_pipeline (pipeline.c) then runs the loop-IR passes.
 */
#include <string.h>

#include "lower/lower.h"

rv_status lower_storage_of_uf(LowerCtx *c, Ufun *f, Storage **out) {
    Storage *st = ptrmap_get(&c->storage, f);
    if (!st) {
        st = arena_alloc(c->m->arena, sizeof(Storage));
        rv_status r = ir_storage_init(c->m, st, f->name, f->nargs, f->args, NULL, ir_ufun_dtype(f),
                                      BUF_ARG, &c->share);
        if (r != RV_OK)
            return r;
        st->buf->uf = f;
        ptrmap_put(&c->storage, f, st);
    }
    *out = st;
    return RV_OK;
}

rv_status lower_storage_of_tensor(LowerCtx *c, Tensor *t, Storage **out) {
    Storage *st = ptrmap_get(&c->storage, t);
    if (!st) {
        st = arena_alloc(c->m->arena, sizeof(Storage));
        rv_status r = ir_storage_init(c->m, st, t->name, t->ndim, t->axes, t->pad, t->dtype,
                                      BUF_ARG, &c->share);
        if (r != RV_OK)
            return r;
        if (t->bulk > 1) /* storage_pad of a fused variable loop */
            ir_storage_bulk_pad(c->m, st, t->bulk_level, t->bulk);
        st->buf->tensor = t;
        ptrmap_put(&c->storage, t, st);
    }
    *out = st;
    return RV_OK;
}

static void add_param(LowerCtx *c, ParamKind k, Buffer *b) {
    if (ptrmap_has(&c->used_bufs, b))
        return;
    ptrmap_put(&c->used_bufs, b, b);
    Param p = {.kind = k, .buf = b};
    vec_push(&c->params, p);
}

/* Registers a storage's buffers as parameters of the current kernel. */
void lower_use_storage(LowerCtx *c, const Storage *st, ParamKind k) {
    add_param(c, k, st->buf);
    for (int i = 0; i < st->ndim; i++)
        if (st->start[i])
            add_param(c, PARAM_AUX, st->start[i]);
}

void lower_use_aux(LowerCtx *c, Buffer *b) {
    add_param(c, PARAM_AUX, b);
}

void lower_use_pack(LowerCtx *c, Buffer *b) {
    add_param(c, PARAM_PACK, b);
    add_param(c, PARAM_PACK, b->pack_fill);
}

Expr *lower_ctx_simp(LowerCtx *c, Expr *e) {
    return e ? ir_simplify_expr(c->m, e) : NULL;
}
/* LowerExprFn for the prelude. */
Expr *lower_index_fn(void *ctx, Expr *e) {
    Expr *r = lower_index(ctx, e);
    RV_ASSERT(r);
    return r;
}

/* A schedule error; about stage p computed at a loop (p may be NULL), it
 * is located at the step that placed p (`ravel check` lowers the schedule
 * and reports it there: only bounds inference can tell). */
static Stmt *schedule_verror(LowerCtx *c, const Stage *p, const char *fmt, va_list ap) {
    if (c->st != RV_OK)
        return NULL;
    Buf b = {0};
    buf_vprintf(&b, fmt, ap);
    if (p && p->at_step)
        c->st = base_diag(RV_ERR_SCHEDULE, p->at_src ? p->at_src : c->m->src, p->at_step->loc,
                          "%s: %s", p->at_step->prim, buf_str(&b));
    else
        c->st = base_error(RV_ERR_SCHEDULE, "%s", buf_str(&b));
    buf_free(&b);
    return NULL;
}

Stmt *lower_sched_error(LowerCtx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    schedule_verror(c, NULL, fmt, ap);
    va_end(ap);
    return NULL;
}

Stmt *lower_stage_error(LowerCtx *c, const Stage *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    schedule_verror(c, p, fmt, ap);
    va_end(ap);
    return NULL;
}

/* ---- kernels ---- */

static void kernel_begin(LowerCtx *c) {
    Module *m = c->m;
    c->params.len = 0;
    c->sites.len = 0;
    c->check_src.len = 0;
    ptrmap_free(&c->used_bufs);
    ptrmap_free(&c->axis_value);
    ptrmap_free(&c->views);
    ptrmap_free(&c->kept_share);
    c->par_depth = 0;
    for (int i = 0; i < m->sizes.len; i++) {
        Param p = {.kind = PARAM_SIZE, .size = m->sizes.data[i]};
        vec_push(&c->params, p);
    }
}

static Stmt *extern_call(LowerCtx *c, Tensor *t) {
    Op *op = t->op;
    Storage *ost;
    if ((c->st = lower_storage_of_tensor(c, t, &ost)) != RV_OK)
        return NULL;
    Buffer *args[RV_MAX_DIMS + 1];
    if (op->nin > RV_MAX_DIMS)
        return lower_sched_error(c, "extern '%s' has too many arguments", t->name);
    args[0] = ost->buf;
    for (int i = 0; i < op->nin; i++) {
        Storage *is;
        if ((c->st = lower_storage_of_tensor(c, op->inputs[i], &is)) != RV_OK)
            return NULL;
        lower_use_storage(c, is, PARAM_TENSOR);
        args[i + 1] = is->buf;
    }
    lower_use_storage(c, ost, PARAM_TENSOR);
    return lower_call(c->m, op->kernel, op->nin + 1, args, t);
}

static rv_status kernel_end(LowerCtx *c, const char *name, Stmt *body, Kernel **out);

static rv_status lower_stage_kernel(LowerCtx *c, Stage *st, Kernel **out) {
    kernel_begin(c);
    Stmt *body;
    if (st->t->op->kind == OP_EXTERN) {
        body = extern_call(c, st->t);
    } else {
        body = st->parts[0]             ? lower_split_stage(c, st)
               : sched_hfuse_partner(st) ? lower_hfused_stages(c, st)
                                         : lower_stage_nest(c, st, NULL, NULL, NULL);
        if (body) {
            Storage *sto;
            lower_storage_of_tensor(c, st->t, &sto);
            lower_use_storage(c, sto, PARAM_TENSOR);
        }
    }
    return kernel_end(c, st->t->name, body, out);
}

/* A recursion group is one kernel (recurse.c), named after the group. */
static rv_status lower_group_kernel(LowerCtx *c, Recurse *g, Kernel **out) {
    kernel_begin(c);
    rv_status st = kernel_end(c, g->name, lower_recurse(c, g), out);
    if (st == RV_OK)
        (*out)->rec = g;
    return st;
}

static rv_status kernel_end(LowerCtx *c, const char *name, Stmt *body, Kernel **out) {
    Module *m = c->m;
    /* every failure below sets c->st; one that does not is a bug of the
     * lowering, not of the user's schedule */
    if (!body)
        return c->st != RV_OK
                   ? c->st
                   : base_error(RV_ERR_UNSUPPORTED,
                                "internal error: lowering %s failed without a diagnosis", name);
    Kernel *k = arena_alloc(m->arena, sizeof(Kernel));
    k->name = name;
    k->m = m;
    /* the prelude fills the AUX arrays this kernel is the first to use */
    Vec(Stmt *) pre = {0};
    for (int i = 0; i < m->ufuns.len; i++) {
        Storage *s = ptrmap_get(&c->storage, m->ufuns.data[i]);
        if (s && ptrmap_has(&c->used_bufs, s->buf))
            vec_push(&pre, lower_storage_prelude(m, s, &c->filled, lower_index_fn, c));
    }
    for (int i = 0; i < m->tensors.len; i++) {
        Storage *s = ptrmap_get(&c->storage, m->tensors.data[i]);
        if (s && ptrmap_has(&c->used_bufs, s->buf))
            vec_push(&pre, lower_storage_prelude(m, s, &c->filled, lower_index_fn, c));
    }
    /* after the storages: a fused loop's row starts may be theirs */
    vec_push(&pre, lower_vfuse_prelude(c));
    k->prelude = lower_seq(m, pre.len, pre.data);
    lower_prelude_fills(m, k);
    vec_free(&pre);
    k->body = body; /* lower_pipeline (pipeline.c) simplifies it */
    k->nparams = c->params.len;
    k->params = arena_memdup(m->arena, c->params.data, sizeof(Param) * (size_t)c->params.len);
    k->nsites = c->sites.len;
    k->sites = c->sites.len ? arena_memdup(m->arena, c->sites.data,
                                           sizeof(const char *) * (size_t)c->sites.len)
                            : NULL;
    k->ncheck_src = c->check_src.len;
    k->check_src = c->check_src.len ? arena_memdup(m->arena, c->check_src.data,
                                                   sizeof(CheckSrc) * (size_t)c->check_src.len)
                                    : NULL;
    *out = k;
    return RV_OK;
}

void lower_ctx_free(LowerCtx *c) {
    vec_free(&c->params);
    vec_free(&c->sites);
    vec_free(&c->check_src);
    ptrmap_free(&c->used_bufs);
    ptrmap_free(&c->axis_value);
    ptrmap_free(&c->views);
    ptrmap_free(&c->storage);
    ptrmap_free(&c->accs);
    ptrmap_free(&c->kept_share);
    ptrmap_free(&c->hoisted);
    ptrmap_free(&c->unread);
    ir_storage_share_free(&c->share);
    ptrmap_free(&c->filled);
    lower_vfuse_free(c);
    ptrmap_free(&c->gpu_threads);
}

rv_status lower_schedule(Schedule *s, Kernel ***out, int *n) {
    Module *m = s->m;
    /* the passes over the schedule first: the walk takes each computed-at
     * stage's region from the bounds pass's table */
    RegionTable regions;
    rv_status st = lower_run_schedule_passes(s, &regions);
    if (st != RV_OK) {
        lower_regions_free(&regions);
        return st;
    }
    LowerCtx c = {.m = m, .s = s, .regions = &regions};
    lower_adopt_uf_storage(&c, &regions);
    Vec(Kernel *) ks = {0};
    for (int i = 0; i < m->tensors.len && st == RV_OK; i++) {
        Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            continue;
        Recurse *g = ir_tensor_recurse(t);
        Stage *sg = sched_stage_of(s, t);
        RV_ASSERT(sg);
        if (g ? t != g->members.data[0] : sg->attach != ATTACH_ROOT)
            continue; /* a group's kernel comes at its first member */
        Stage *hp = sched_hfuse_partner(sg);
        if (hp && hp->t->id > t->id)
            continue; /* hfused: one kernel, at the later of the two */
        Kernel *k = NULL;
        if ((st = g ? lower_group_kernel(&c, g, &k) : lower_stage_kernel(&c, sg, &k)) == RV_OK)
            vec_push(&ks, k);
    }
    lower_ctx_free(&c);
    lower_regions_free(&regions);
    if (st != RV_OK) {
        vec_free(&ks);
        return st;
    }
    /* the kernels live in the module's arena; the array is the caller's */
    *out = ks.data;
    *n = ks.len;
    return RV_OK;
}

rv_status lower_module(Module *m, Kernel ***out, int *n) {
    Schedule *s;
    rv_status st = sched_from_module(m, &s);
    if (st != RV_OK)
        return st;
    st = lower_schedule(s, out, n);
    sched_free(s);
    return st;
}
