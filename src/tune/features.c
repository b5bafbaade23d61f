/*
 * features.c — what the cost model f_MK sees of a candidate (issue 15,
 * DietCode §4.2): numbers read off the candidate's lowered loop IR at one
 * shape of the size range, so one model learns across every shape.
 *
 * WHY THE LOOP IR. The schedule's knobs are template-specific and say
 * little of the code: the loop IR is what runs. Loop extents and kinds,
 * the vector width, the stores, operations and bytes each loop nest
 * executes at the shape, the register tile (local buffers), the scratch
 * copies, the parallel tasks and the bounds checks are the same quantities
 * for every template, so one model compares them all.
 *
 * Extents are evaluated at the shape: sizes take the shape's values; loop
 * variables (a partitioned tail's `min(f, E - io * f)`) read 0, which gives
 * a full tile; a load is the shape's quantity where it has one (the
 * extent of a fused loop over ragged rows, CoRa's fuse(b, l): the packed
 * rows; a recursion's level: its nodes); any other extent that loads or
 * selects counts as 1.
 */
#include <math.h>
#include <string.h>

#include "lower/lower.h"
#include "tune/tune.h"

static const char *const feat_names[TUNE_F_COUNT] = {
    "log_stores", "log_flops",  "log_bytes", "intensity", "vector",     "vec_frac",
    "unroll",     "reg_tile",   "log_scratch", "log_tasks", "occupancy", "loops",
    "depth",      "checks",     "log_inner", "log_outputs"};
_Static_assert(sizeof feat_names / sizeof feat_names[0] == TUNE_F_COUNT, "a name per feature");

const char *tune_feature_name(int f) {
    return f >= 0 && f < TUNE_F_COUNT ? feat_names[f] : "?";
}

/* ---- integer expressions at a shape ---- */

static int64_t eval(const Expr *e, const TuneShape *sh, bool *ok) {
    if (e->n > 2)
        goto unknown;
    int64_t a = e->n > 0 ? eval(e->args[0], sh, ok) : 0;
    int64_t b = e->n > 1 ? eval(e->args[1], sh, ok) : 0;
    switch (e->kind) {
    case EX_CONST_INT:
        return e->u.ival;
    case EX_SIZE:
        return sh ? sh->v[e->u.size->id] : 1;
    case EX_VAR:
        return 0;
    case EX_CAST:
        return a;
    case EX_NEG:
        return -a;
    case EX_ADD:
        return a + b;
    case EX_SUB:
        return a - b;
    case EX_MUL:
        return a * b;
    case EX_DIV:
    case EX_FLOORDIV:
        return b ? a / b : 0;
    case EX_MOD:
    case EX_FLOORMOD:
        return b ? a % b : 0;
    case EX_MIN:
        return a < b ? a : b;
    case EX_MAX:
        return a > b ? a : b;
    case EX_LOAD:
        /* packed rows: the one load in the extents of a fused stage is
         * its row count (the row starts' last), the shape's sum; levels:
         * a level's length */
        if (sh && (sh->rows_uf || sh->group))
            return sh->quantity;
        break;
    default:
        break;
    }
unknown:
    *ok = false;
    return 1;
}

static int64_t eval_or_1(const Expr *e, const TuneShape *sh) {
    bool ok = true;
    int64_t v = eval(e, sh, &ok);
    return ok && v > 0 ? v : 1;
}

/* ---- the walk ---- */

typedef struct Walk {
    const TuneShape *sh;
    int lanes;
    double stores, vstores, flops, bytes, checks, inner_sum, inner_n, tasks;
    double max_vec, max_unroll, reg_tile, scratch;
    int loops, depth, max_depth;
} Walk;

/* Arithmetic operations and memory loads (bytes) of an expression tree. */
static void count_expr(const Expr *e, double *ops, double *bytes) {
    if (e->kind == EX_LOAD) {
        if (e->u.buf->scope != BUF_LOCAL)
            *bytes += (double)rv_dtype_size(e->dtype);
        return; /* the index is address arithmetic */
    }
    if (ir_is_float(e->dtype) && e->n > 0)
        *ops += 1;
    for (int i = 0; i < e->n; i++)
        count_expr(e->args[i], ops, bytes);
}

static bool has_loop(const Stmt *s) {
    if (!s)
        return false;
    switch (s->kind) {
    case ST_FOR:
        return true;
    case ST_IF:
        return has_loop(s->u.if_.then_s) || has_loop(s->u.if_.else_s);
    case ST_LET:
        return has_loop(s->u.let.body);
    case ST_ALLOC:
        return has_loop(s->u.alloc.body);
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            if (has_loop(s->u.seq.stmts[i]))
                return true;
        return false;
    default:
        return false;
    }
}

/* mult: iterations of the enclosing loops (a vector loop's as vectors);
 * vec: lanes of the enclosing vector loop (1: none); unroll: product of
 * the enclosing unrolled extents; par: inside a parallel loop. */
static void walk(Walk *w, const Stmt *s, double mult, int vec, double unroll, bool par) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR: {
        int64_t ext = eval_or_1(s->u.loop.extent, w->sh);
        LoopKind k = s->u.loop.kind;
        w->loops++;
        if (++w->depth > w->max_depth)
            w->max_depth = w->depth;
        double it = (double)ext;
        if (k == LOOP_VECTOR) {
            vec = (int)(ext < w->lanes ? ext : w->lanes);
            it = ceil((double)ext / w->lanes);
            if (ext > w->max_vec)
                w->max_vec = (double)ext;
        }
        if (k == LOOP_UNROLL) {
            unroll *= (double)ext;
            if (unroll > w->max_unroll)
                w->max_unroll = unroll;
        }
        if (k == LOOP_PARALLEL && !par) {
            w->tasks += mult * (double)ext;
            par = true;
        }
        if (!has_loop(s->u.loop.body)) {
            w->inner_sum += (double)ext;
            w->inner_n += 1;
        }
        walk(w, s->u.loop.body, mult * it, vec, unroll, par);
        w->depth--;
        break;
    }
    case ST_IF:
        w->checks += mult;
        walk(w, s->u.if_.then_s, mult, vec, unroll, par);
        walk(w, s->u.if_.else_s, mult, vec, unroll, par);
        break;
    case ST_LET:
        walk(w, s->u.let.body, mult, vec, unroll, par);
        break;
    case ST_ALLOC: {
        const Buffer *b = s->u.alloc.buf;
        double n = (double)eval_or_1(b->size, w->sh);
        if (b->scope == BUF_LOCAL && n > w->reg_tile)
            w->reg_tile = n;
        else if (b->scope == BUF_GLOBAL)
            w->scratch += n * (double)rv_dtype_size(b->dtype);
        walk(w, s->u.alloc.body, mult, vec, unroll, par);
        break;
    }
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            walk(w, s->u.seq.stmts[i], mult, vec, unroll, par);
        break;
    case ST_STORE: {
        double ops = 0, bytes = 0;
        count_expr(s->u.store.value, &ops, &bytes);
        w->stores += mult;
        if (vec > 1)
            w->vstores += mult;
        w->flops += mult * vec * ops;
        w->bytes += mult * vec * bytes;
        break;
    }
    default:
        break;
    }
}

static double log2p(double x) {
    return log2(1.0 + x);
}

static void features_at(Kernel *const *ks, int n, const TuneShape *sh, int lanes, int cores,
                        double outputs, float *f) {
    Walk w = {.sh = sh, .lanes = lanes};
    for (int i = 0; i < n; i++) {
        w.depth = 0;
        walk(&w, ks[i]->body, 1.0, 1, 1.0, false);
    }
    double tasks = w.tasks > 0 ? w.tasks : 1;
    double waves = ceil(tasks / cores);
    f[TUNE_F_LOG_STORES] = (float)log2p(w.stores);
    f[TUNE_F_LOG_FLOPS] = (float)log2p(w.flops);
    f[TUNE_F_LOG_BYTES] = (float)log2p(w.bytes);
    f[TUNE_F_INTENSITY] = (float)(w.flops / (w.bytes > 0 ? w.bytes : 1));
    f[TUNE_F_VECTOR] = (float)w.max_vec;
    f[TUNE_F_VEC_FRAC] = (float)(w.stores > 0 ? w.vstores / w.stores : 0);
    f[TUNE_F_UNROLL] = (float)w.max_unroll;
    f[TUNE_F_REG_TILE] = (float)w.reg_tile;
    f[TUNE_F_LOG_SCRATCH] = (float)log2p(w.scratch);
    f[TUNE_F_LOG_TASKS] = (float)log2p(w.tasks);
    f[TUNE_F_OCCUPANCY] = (float)(tasks / (waves * cores));
    f[TUNE_F_LOOPS] = (float)w.loops;
    f[TUNE_F_DEPTH] = (float)w.max_depth;
    f[TUNE_F_CHECKS] = (float)(w.stores > 0 ? w.checks / w.stores : 0);
    f[TUNE_F_LOG_INNER] = (float)log2p(w.inner_n > 0 ? w.inner_sum / w.inner_n : 0);
    f[TUNE_F_LOG_OUTPUTS] = (float)log2p(outputs);
}

/* Elements of the program's outputs at the shape. */
static double output_elements(Module *m, const TuneShape *sh) {
    double n = 0;
    for (int t = 0; t < m->tensors.len; t++) {
        Tensor *x = m->tensors.data[t];
        if (!ir_tensor_is_output(m, x))
            continue;
        double e = 1;
        for (int d = 0; d < x->ndim; d++)
            e *= (double)eval_or_1(x->axes[d]->extent, sh);
        n += e;
    }
    return n;
}

void tune_stage_extents(const TuneStage *s, const TuneShape *sh, double *batch, double *rows,
                        double *cols, double *red) {
    const Tensor *y = s->y;
    *batch = 1;
    if (s->group && sh) { /* a level's nodes, once per level */
        int64_t nodes = sh->v[s->group->st->nodes->id];
        *rows = (double)(sh->quantity > 0 ? sh->quantity : 1);
        *batch = (double)(nodes > 0 ? nodes : 1) / *rows;
        *cols = (double)eval_or_1(y->axes[y->ndim - 1]->extent, sh);
        *red = (double)eval_or_1(s->k_expr, sh);
        return;
    }
    for (int d = 0; d < s->nbatch && !s->rows_uf; d++)
        *batch *= (double)eval_or_1(y->axes[d]->extent, sh);
    /* packed rows: every sequence's rows, the shape's sum (at least 1, so
     * no shape has no work) */
    *rows = s->rows_uf && sh ? (double)(sh->quantity > 0 ? sh->quantity : 1)
                             : (double)eval_or_1(y->axes[y->ndim - 2]->extent, sh);
    *cols = (double)eval_or_1(y->axes[y->ndim - 1]->extent, sh);
    *red = (double)eval_or_1(s->k_expr, sh);
}

rv_status tune_features(rv_module *m, const char *sched, const TuneShape *shapes, int nshapes,
                        int lanes, int cores, float *feat) {
    if (lanes < 1)
        lanes = 1;
    if (cores < 1)
        cores = 1;
    IrScope scope;
    ir_scope_begin(m, &scope);
    Kernel **ks = NULL;
    int n = 0;
    rv_status st = lower_pipeline_scheduled(m, "<candidate>", sched, &ks, &n);
    for (int s = 0; st == RV_OK && feat && s < nshapes; s++)
        features_at(ks, n, &shapes[s], lanes, cores, output_elements(m, &shapes[s]),
                    &feat[(size_t)s * TUNE_F_COUNT]);
    base_free(ks);
    ir_scope_end(&scope);
    return st;
}
