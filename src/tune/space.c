/*
 * space.c — the search space of `ravel tune` (issue 15, DietCode §4.1):
 * micro-kernels for a program's tunable stage, each a schedule trace in
 * the language the user writes (`schedule Y { ... }` blocks), so a tuned
 * result is a readable `.rv` schedule and the checker judges every
 * candidate as it judges a user's.
 *
 * The stage is a contraction Y[b.., i, j] = f(sum(k) A[..] * B[..]) with
 * any epilogue f (bias, gelu): dense layers and batch_matmul. Four
 * templates cover the hand-written schedules of bench/programs (which
 * reach the vendor libraries' speed there):
 *
 *   dot     outputs as vector dot products over k, parallel over the
 *           outermost axis: narrow outputs whose operands are both
 *           contiguous in k (bmm_nt_dot.rv);
 *   tile    an mr x (nv * lanes) register tile of Y (cache_write), k
 *           outside it, the tile unrolled and vectorized; B optionally
 *           packed k-major per panel (cache_read, layout="k, j"), and
 *           optionally with local padding (pad=1) so tiles need no
 *           bounds checks (dense_packed.rv, bmm_nn_bcast*.rv);
 *   kblock  a panel of Y accumulated per block of kc values of k, B
 *           packed per block (dense_kblock.rv);
 *   stream  a tile of Y^T in registers, i in the vector lanes, A copied
 *           k-major once (dense_stream.rv).
 *
 * The knobs come from the machine (hw.c): the vector width in elements
 * (lanes), the vector registers (a register tile's accumulators, the
 * vectors of B and a broadcast must fit), the L2 size (a k block of a
 * packed panel stays in it), the L1's size and ways (the rows of B a
 * stream tile reads together must not share one set). Nothing is
 * hard-coded to one CPU.
 *
 * Every candidate is lowered once here (tune_features with no shapes),
 * which applies the checker and bounds inference; a refused one is
 * dropped and counted, never kept and never a crash.
 */
#include <string.h>

#include "ir/ir.h"
#include "tune/tune.h"

/* ---- the tunable stage ---- */

/* The axis a read's index d is, when it is a bare axis variable. */
static const Axis *index_axis(const Expr *read, int d) {
    const Expr *e = read->args[d];
    return e->kind == EX_VAR ? e->u.axis : NULL;
}

/* Does the read index some dimension by axis a? Which dimension (or -1). */
static int read_dim_of(const Expr *read, const Axis *a) {
    for (int d = 0; d < read->n; d++)
        if (index_axis(read, d) == a)
            return d;
    return -1;
}

/* The two tensors multiplied under the reduction, as READ nodes. */
static bool product_reads(const Expr *body, const Expr **x, const Expr **y) {
    if (body->kind == EX_CAST)
        body = body->args[0];
    if (body->kind != EX_MUL)
        return false;
    *x = body->args[0];
    *y = body->args[1];
    return (*x)->kind == EX_READ && (*y)->kind == EX_READ;
}

/* The first sum reduction in e (the stage's contraction). */
static const Expr *find_sum(const Expr *e) {
    if (e->kind == EX_REDUCE)
        return e->u.red.rk == RV_REDUCE_SUM && e->u.red.naxes == 1 ? e : NULL;
    for (int i = 0; i < e->n; i++) {
        const Expr *r = find_sum(e->args[i]);
        if (r)
            return r;
    }
    return NULL;
}

static const Expr *strip_cast(const Expr *e) {
    while (e->kind == EX_CAST)
        e = e->args[0];
    return e;
}

static bool mentions_ufun(const Expr *e) {
    if (e->kind == EX_UFCALL)
        return true;
    for (int i = 0; i < e->n; i++)
        if (mentions_ufun(e->args[i]))
            return true;
    return false;
}

/* Rows i < len[b] of the one batch axis b, len a UF of one argument over
 * a size with a constant range: the packed tokens of a batch of
 * sequences, tuned as the fused loop fuse(b, i) over the sum of len. Any
 * other ragged extent is not tunable yet (RV_ERR_UNSUPPORTED naming it,
 * at the tensor's definition). */
static rv_status ragged_rows(const Tensor *t, const Axis *ai, const Axis *aj, const Expr *red,
                             TuneStage *out) {
    const Expr *e = strip_cast(ai->extent);
    if (!mentions_ufun(e) && !mentions_ufun(aj->extent))
        return RV_OK;
    const Ufun *f = e->kind == EX_UFCALL ? e->u.uf : NULL;
    int64_t lo, hi;
    if (out->nbatch != 1 || mentions_ufun(aj->extent) || !f || f->nargs != 1 ||
        strip_cast(e->args[0])->kind != EX_VAR ||
        strip_cast(e->args[0])->u.axis != t->axes[0] || f->args[0]->extent->kind != EX_SIZE ||
        !ir_is_const_int(f->lo_dom, &lo) || !ir_is_const_int(f->hi_dom, &hi))
        return base_diag(RV_ERR_UNSUPPORTED, NULL, t->loc,
                         "ravel tune: %s: ragged rows are tuned in the form %s[b, i < len[b], "
                         "j] (len a ufun of b < B with a constant range, the rows fused with "
                         "fuse(b, i)); other ragged extents are not tunable yet",
                         t->name, t->name);
    /* The rows template accumulates in Y itself with k outside the tile
     * (sched_rows), which an epilogue forbids: every candidate would be
     * refused by the checker, a message that does not say why. */
    if (strip_cast(t->op->body) != red)
        return base_diag(RV_ERR_UNSUPPORTED, NULL, t->loc,
                         "ravel tune: %s: ragged rows are tuned without an epilogue "
                         "(%s[b, i < len[b], j] = sum(k) A * B): compute the epilogue "
                         "in a tensor of its own after %s",
                         t->name, t->name, t->name);
    out->rows_uf = (Ufun *)f;
    out->rows_outer = f->args[0]->extent->u.size;
    out->len_lo = lo;
    out->len_hi = hi;
    out->fused = "bi";
    return RV_OK;
}

/* A recursion's member is tuned level by level: its group must run so
 * (`dynamic_batch()` in `schedule R`), else its node loop is one node at
 * a time and no tile of it is legal (RV_ERR_UNSUPPORTED, located at the
 * group). */
static rv_status member_of(const Module *m, const Tensor *t, TuneStage *out) {
    Recurse *g = ir_tensor_recurse(t);
    if (!g)
        return RV_OK;
    for (int i = 0; i < m->scheds.len; i++) {
        const SchedBlock *blk = &m->scheds.data[i];
        for (int j = 0; blk->group == g && j < blk->nsteps; j++)
            if (strcmp(blk->steps[j].prim, "dynamic_batch") == 0) {
                out->group = g;
                return RV_OK;
            }
    }
    return base_diag(RV_ERR_UNSUPPORTED, NULL, g->loc,
                     "ravel tune: recursion %s: its member %s is tuned level by level: "
                     "`schedule %s { dynamic_batch() }` first",
                     g->name, t->name, g->name);
}

/* An extent known before run time, else 0: a constant, or an expression
 * whose range is one value (a size narrowed to a leaf's shape:
 * tune_space_add_leaf), so the knobs fit the leaf's columns. */
static int64_t known_extent(const Expr *e) {
    int64_t lo, hi;
    return ir_int_bounds(e, &lo, &hi) && lo == hi ? lo : 0;
}

static rv_status analyze_tensor(const Module *m, const Tensor *t, TuneStage *out) {
    if (!t->op || (t->op->kind != OP_COMPUTE && t->op->kind != OP_RECURSE) || t->op->pred ||
        t->ndim < 2 || t->ndim > 6)
        return RV_ERR_UNSUPPORTED;
    const Expr *red = find_sum(t->op->body);
    const Expr *x, *y;
    if (!red || !product_reads(red->args[0], &x, &y))
        return RV_ERR_UNSUPPORTED;
    const Axis *ai = t->axes[t->ndim - 2], *aj = t->axes[t->ndim - 1], *ak = red->u.red.axes[0];
    /* A reads i, B reads j (either order in the source) */
    if (read_dim_of(x, ai) < 0) {
        const Expr *tmp = x;
        x = y;
        y = tmp;
    }
    if (read_dim_of(x, ai) < 0 || read_dim_of(x, aj) >= 0 || read_dim_of(y, aj) < 0 ||
        read_dim_of(y, ai) >= 0 || read_dim_of(x, ak) < 0 || read_dim_of(y, ak) < 0)
        return RV_ERR_UNSUPPORTED;
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->nbatch = t->ndim - 2;
    for (int d = 0; d < out->nbatch; d++)
        out->batch[d] = t->axes[d]->name;
    out->i = ai->name;
    out->j = aj->name;
    out->k = ak->name;
    out->a = x->u.tensor->name;
    out->b = y->u.tensor->name;
    out->a_k_inner = read_dim_of(x, ak) == x->n - 1;
    out->b_k_inner = read_dim_of(y, ak) == y->n - 1;
    rv_status st = ragged_rows(t, ai, aj, red, out);
    if (st == RV_OK)
        st = member_of(m, t, out);
    if (st != RV_OK)
        return st;
    out->n_extent = known_extent(aj->extent);
    out->k_extent = known_extent(ak->extent);
    out->dsize = rv_dtype_size(t->dtype);
    out->y = (Tensor *)t;
    out->k_expr = ak->extent;
    return RV_OK;
}

rv_status tune_space_analyze(rv_module *m, TuneStage *out) {
    for (int t = m->tensors.len - 1; t >= 0; t--) {
        /* a tensor that is no contraction says nothing; one whose rows
         * are not tunable says why */
        base_error_clear();
        rv_status st = analyze_tensor(m, m->tensors.data[t], out);
        if (st == RV_OK || base_error_status() != RV_OK)
            return st;
    }
    return base_error(RV_ERR_UNSUPPORTED,
                      "nothing to tune: no tensor is a contraction Y[.., i, j] = "
                      "sum(k) A[.. i .. k ..] * B[.. j .. k ..] (dense or batch_matmul, "
                      "with any epilogue)");
}

/* ---- templates: knobs -> schedule text ---- */

/* Knobs by template (TuneCand.p):
 *   dot:    none
 *   tile:   mr, nv, pack (B copied k-major per panel: 1 row by row, 2 in
 *           lanes x lanes blocks stored as vectors, 3 as 2 with lanes rows
 *           through all of k at a time), pad (local padding),
 *           wide (the tile is copied out to Y as one vector loop of nr
 *           lanes, else as nv unrolled vectors)
 *   kblock: mr, nv, kc
 *   stream: nj (columns of the Y^T tile), ku (k unrolled) */

/* The outer axes of a reorder: the batch axes, then `rest`. */
static void outer_axes(Buf *b, const TuneStage *s) {
    for (int d = 0; d < s->nbatch; d++)
        buf_printf(b, "%s, ", s->batch[d]);
}

/* The loop the stage's work is split over cores by: the outermost batch
 * axis where there is one (many independent products), else `fallback`. */
static const char *parallel_axis(const TuneStage *s, const char *fallback) {
    return s->nbatch ? s->batch[0] : fallback;
}

static void sched_dot(Buf *b, const TuneStage *s) {
    buf_printf(b, "schedule %s {\n    parallel(%s)\n    vectorize(%s)\n}\n", s->name,
               s->nbatch ? s->batch[0] : s->i, s->k);
}

static void sched_tile(Buf *b, const TuneStage *s, int lanes, const int *p) {
    int mr = p[0], nr = p[1] * lanes, pack = p[2], pad = p[3], wide = p[4];
    buf_printf(b, "schedule %s {\n    %sL = cache_write(%s%s)\n", s->name, s->name, s->name,
               pad ? ", pad=1" : "");
    buf_printf(b, "    jo, ji = split(%s, %d)\n    io, ii = split(%s, %d)\n    reorder(", s->j, nr,
               s->i, mr);
    outer_axes(b, s);
    buf_printf(b, "jo, io, ii, ji)\n    parallel(%s)\n", parallel_axis(s, "jo"));
    if (!wide)
        buf_printf(b, "    jw, jl = split(ji, %d)\n    unroll(jw)\n    vectorize(jl)\n", lanes);
    else
        buf_printf(b, "    vectorize(ji)\n");
    buf_printf(b, "    compute_at(%sL, io)\n}\nschedule %sL {\n", s->name, s->name);
    if (pack) {
        buf_printf(b, "    %sL = cache_read(%s, layout=\"", s->b, s->b);
        outer_axes(b, s);
        buf_printf(b, "%s, %s\")\n", s->k, s->j);
    }
    if (pad)
        buf_printf(b, "    %sL = cache_read(%s, pad=1)\n    compute_at(%sL)\n", s->a, s->a, s->a);
    if (nr > lanes)
        buf_printf(b, "    jv2, jv = split(%s, %d)\n    reorder(%s, %s, jv2, jv)\n    unroll(jv2)\n",
                   s->j, lanes, s->k, s->i);
    else
        buf_printf(b, "    reorder(%s, %s, %s)\n", s->k, s->i, s->j);
    buf_printf(b, "    unroll(%s)\n    vectorize(%s)\n}\n", s->i, nr > lanes ? "jv" : s->j);
    if (pack == 1) {
        /* a blocked transpose: lanes values of k of one row, then the next */
        buf_printf(b, "schedule %sL {\n    ko, ki = split(%s, %d)\n    reorder(ko, %s, ki)\n"
                      "    unroll(ki)\n}\n",
                   s->b, s->k, lanes, s->j);
    } else if (pack == 2 || pack == 3) {
        /* a lanes x lanes blocked transpose, stored a vector at a time;
         * pack=3 takes lanes rows of B through all of k before the next
         * lanes (pack=2 all the panel's rows per block of k): lanes
         * sequential streams the prefetcher follows, where a panel's 64
         * rows K floats apart (all in one L1 set at K = 3072) left the
         * copy waiting on each row's next line (docs/tuning.md) */
        buf_printf(b, "schedule %sL {\n    ko, ki = split(%s, %d)\n    jo, jl = split(%s, %d)\n"
                      "    reorder(%s, ki, jl)\n    unroll(ki)\n    vectorize(jl)\n}\n",
                   s->b, s->k, lanes, s->j, lanes, pack == 2 ? "ko, jo" : "jo, ko");
    }
    if (pack)
        buf_printf(b, "schedule %s {\n    compute_at(%sL, jo)\n}\n", s->name, s->b);
}

static void sched_kblock(Buf *b, const TuneStage *s, int lanes, const int *p) {
    int mr = p[0], nr = p[1] * lanes, kc = p[2];
    buf_printf(b, "schedule %s {\n    %sL = cache_write(%s)\n    jo, ji = split(%s, %d)\n"
                  "    reorder(",
               s->name, s->name, s->name, s->j, nr);
    outer_axes(b, s);
    buf_printf(b, "jo, %s, ji)\n    parallel(%s)\n    vectorize(ji)\n    compute_at(%sL, jo)\n}\n",
               s->i, parallel_axis(s, "jo"), s->name);
    buf_printf(b, "schedule %sL {\n    %sL = cache_read(%s, layout=\"%s, %s\")\n", s->name, s->b,
               s->b, s->k, s->j);
    buf_printf(b, "    ko, ki = split(%s, %d)\n    io, ii = split(%s, %d)\n", s->k, kc, s->i, mr);
    if (nr > lanes)
        buf_printf(b, "    jv2, jv = split(%s, %d)\n    reorder(ko, io, ki, ii, jv2, jv)\n"
                      "    unroll(jv2)\n",
                   s->j, lanes);
    else
        buf_printf(b, "    reorder(ko, io, ki, ii, %s)\n", s->j);
    buf_printf(b, "    unroll(ii)\n    vectorize(%s)\n    compute_at(%sL, ko)\n}\n",
               nr > lanes ? "jv" : s->j, s->b);
    buf_printf(b, "schedule %sL {\n    kw, kl = split(%s, %d)\n    jw, jl = split(%s, %d)\n"
                  "    reorder(kw, jw, kl, jl)\n    unroll(kl)\n    vectorize(jl)\n}\n",
               s->b, s->k, lanes, s->j, lanes);
}

static void sched_stream(Buf *b, const TuneStage *s, int lanes, const int *p) {
    int nj = p[0], ku = p[1];
    buf_printf(b, "schedule %s {\n    %sL = cache_write(%s, layout=\"%s, %s\")\n", s->name, s->name,
               s->name, s->j, s->i);
    buf_printf(b, "    io, ii = split(%s, %d)\n    jo, ji = split(%s, %d)\n    reorder(", s->i,
               lanes, s->j, nj);
    outer_axes(b, s);
    buf_printf(b, "jo, io, ji, ii)\n    parallel(%s)\n    vectorize(ii)\n    compute_at(%sL, io)\n}\n",
               parallel_axis(s, "jo"), s->name);
    buf_printf(b, "schedule %sL {\n    %sL = cache_read(%s, layout=\"%s, %s\")\n", s->name, s->a,
               s->a, s->k, s->i);
    buf_printf(b, "    ko, ku = split(%s, %d)\n    reorder(ko, ku, %s, %s)\n    unroll(ku)\n"
                  "    unroll(%s)\n    vectorize(%s)\n}\n",
               s->k, ku, s->j, s->i, s->j, s->i);
    buf_printf(b, "schedule %sL {\n    ko, ki = split(%s, %d)\n    reorder(ko, %s, ki)\n"
                  "    parallel(ko)\n    unroll(ki)\n}\nschedule %s {\n    compute_at(%sL)\n}\n",
               s->a, s->k, lanes, s->i, s->name, s->a);
}

/* Ragged rows: the rows of every sequence fused into one loop over the
 * packed tokens, an mr x nr tile of it accumulated in Y itself (a
 * cache_write tile of fused rows would be a nest per sequence inside the
 * tile, no register tile), k outside the tile's columns (order 0: all of
 * j per value of k, as bench/ragged/proj_fused.rv) or inside them (order
 * 1: a register tile over the whole of k). */
static void sched_rows(Buf *b, const TuneStage *s, int lanes, const int *p) {
    int mr = p[0], nv = p[1], order = p[2], nr = nv * lanes;
    buf_printf(b, "schedule %s {\n    %s = fuse(%s, %s)\n    fo, fi = split(%s, %d)\n", s->name,
               s->fused, s->batch[0], s->i, s->fused, mr);
    buf_printf(b, "    jo, ji = split(%s, %d)\n", s->j, nr);
    if (nv > 1)
        buf_printf(b, "    jw, jv = split(ji, %d)\n", lanes);
    const char *inner = nv > 1 ? "jw, jv" : "ji";
    if (order == 0)
        buf_printf(b, "    reorder(fo, %s, fi, jo, %s)\n", s->k, inner);
    else
        buf_printf(b, "    reorder(fo, jo, %s, fi, %s)\n", s->k, inner);
    buf_printf(b, "    parallel(fo)\n    unroll(fi)\n%s    vectorize(%s)\n}\n",
               nv > 1 ? "    unroll(jw)\n" : "", nv > 1 ? "jv" : "ji");
}

static const char *const tmpl_name[TUNE_T_COUNT] = {"dot", "tile", "kblock", "stream", "rows"};
static const char *const knob_name[TUNE_T_COUNT][TUNE_NPARAMS] = {
    {NULL}, {"mr", "nv", "pack", "pad", "wide"}, {"mr", "nv", "kc"}, {"nj", "ku"},
    {"mr", "nv", "order"}};
_Static_assert(sizeof tmpl_name / sizeof tmpl_name[0] == TUNE_T_COUNT, "a name per template");
_Static_assert(sizeof knob_name / sizeof knob_name[0] == TUNE_T_COUNT, "knobs per template");

void tune_cand_describe(const TuneCand *c, Buf *out) {
    buf_printf(out, "%s", tmpl_name[c->tmpl]);
    for (int i = 0; i < TUNE_NPARAMS && knob_name[c->tmpl][i]; i++)
        buf_printf(out, " %s=%d", knob_name[c->tmpl][i], c->p[i]);
}

/* ---- the space ---- */

/* The program's own schedule blocks except those of the tuned stage and
 * of the stages they create (cache_read / cache_write outputs), as text;
 * the producers the stage's own blocks compute inside it (compute_at of
 * a stage they did not create) into s->inside. */
static char *other_blocks(rv_module *m, TuneStage *s) {
    Buf b = {0};
    StrMap tuned = {0};
    strmap_put(&tuned, s->name, (void *)1);
    for (int i = 0; i < m->scheds.len; i++) {
        const SchedBlock *blk = &m->scheds.data[i];
        if (!strmap_has(&tuned, blk->name)) {
            ir_print_schedule(&b, blk);
            continue;
        }
        for (int j = 0; j < blk->nsteps; j++) {
            const SchedStep *st = &blk->steps[j];
            for (int o = 0; o < st->nout; o++)
                strmap_put(&tuned, st->outs[o], (void *)1);
            if (strcmp(blk->name, s->name) == 0 && strcmp(st->prim, "compute_at") == 0 &&
                st->nargs == 2 && st->args[0].s && !strmap_has(&tuned, st->args[0].s) &&
                s->ninside < (int)(sizeof s->inside / sizeof s->inside[0]))
                s->inside[s->ninside++] = st->args[0].s;
        }
    }
    strmap_free(&tuned);
    return buf_take(&b);
}

/* The loop over tiles of rows of template t's schedule, where the
 * stage's producers are computed (TuneStage.inside); NULL: none. */
static const char *row_tile_loop(TuneTemplate t) {
    switch (t) {
    case TUNE_T_TILE:
    case TUNE_T_STREAM:
        return "io";
    case TUNE_T_ROWS:
        return "fo";
    default:
        return NULL;
    }
}

/* A candidate's kind within its template (TuneCand.kind): the knobs
 * that are not the tile's size, so the members of a kind differ in mr,
 * nv, nj or kc alone: tile: how B is packed, padding, the wide copy-out;
 * stream: k's unrolling; rows: the loop order; dot and kblock: one kind. */
static int cand_kind(TuneTemplate t, const int *p) {
    switch (t) {
    case TUNE_T_TILE:
        return p[2] * 4 + p[3] * 2 + p[4];
    case TUNE_T_STREAM:
        return p[1];
    case TUNE_T_ROWS:
        return p[2];
    default:
        return 0;
    }
}

/* Adds the candidate if the checker and lowering accept it. */
static void try_add(rv_module *m, TuneSpace *sp, TuneTemplate t, const int *p, int lanes) {
    const TuneStage *s = &sp->stage;
    Buf b = {0};
    buf_puts(&b, sp->keep ? sp->keep : "");
    TuneCand c = {.tmpl = t};
    memcpy(c.p, p, sizeof c.p);
    switch (t) {
    case TUNE_T_DOT:
        sched_dot(&b, s);
        c.tile_i = c.tile_j = 1;
        break;
    case TUNE_T_TILE:
        sched_tile(&b, s, lanes, p);
        c.tile_i = p[0];
        c.tile_j = p[1] * lanes;
        break;
    case TUNE_T_KBLOCK:
        sched_kblock(&b, s, lanes, p);
        c.tile_i = p[0];
        c.tile_j = p[1] * lanes;
        break;
    case TUNE_T_STREAM:
        sched_stream(&b, s, lanes, p);
        c.tile_i = lanes;
        c.tile_j = p[0];
        break;
    case TUNE_T_ROWS:
        sched_rows(&b, s, lanes, p);
        c.tile_i = p[0];
        c.tile_j = p[1] * lanes;
        break;
    default:
        break;
    }
    c.kind = cand_kind(t, p);
    for (int k = 0; k < s->ninside && row_tile_loop(t); k++)
        buf_printf(&b, "schedule %s {\n    compute_at(%s, %s)\n}\n", s->name, s->inside[k],
                   row_tile_loop(t));
    if (tune_features(m, buf_str(&b), NULL, 0, lanes, 1, NULL) != RV_OK) {
        sp->rejected++;
        buf_free(&b);
        base_error_clear();
        return;
    }
    c.sched = base_xmalloc(b.len + 1);
    memcpy(c.sched, buf_str(&b), b.len + 1);
    buf_free(&b);
    if (sp->len == sp->cap) {
        sp->cap = sp->cap ? 2 * sp->cap : 64;
        sp->cands = base_xrealloc(sp->cands, sizeof *sp->cands * (size_t)sp->cap);
    }
    sp->cands[sp->len++] = c;
}

/* The largest mr of `mrs` whose mr x nv tile fits the registers; with
 * pow2, the largest power of two. 0 when none. */
static int max_rows(const int *mrs, int n, int nv, int regs, bool pow2) {
    int best = 0;
    for (int r = 0; r < n; r++)
        if (mrs[r] * nv + nv + 1 <= regs && (!pow2 || (mrs[r] & (mrs[r] - 1)) == 0))
            best = mrs[r] > best ? mrs[r] : best;
    return best;
}

static const int tile_rows[] = {1, 2, 3, 4, 6, 8, 12, 16};

/* Whether a stream tile's nj rows of B stay in L1 together. The tile
 * reads them at the same k, K * dsize bytes apart, and a line's set
 * repeats every span bytes (L1 / ways): where K * dsize is a multiple of
 * the span (K = 3072 floats, 12 KiB, on a 48 KiB 12-way L1) every row's
 * line maps to one set, and as many rows as the set has ways (less the
 * line of A's copy read with them) evict each other at every k. Counts
 * the rows that share row 0's set. A K unknown before run time: true. */
static bool stream_rows_fit(const TuneStage *s, const TuneHw *hw, int nj) {
    int ways = hw->l1d_ways > 0 ? hw->l1d_ways : 8;
    int64_t line = hw->line_bytes > 0 ? hw->line_bytes : 64;
    int64_t span = hw->l1d_bytes > 0 ? hw->l1d_bytes / ways : 4096;
    int64_t stride = s->k_extent * (int64_t)s->dsize;
    if (stride <= 0 || span < line || !s->b_k_inner)
        return true;
    int same = 0;
    for (int r = 0; r < nj; r++)
        same += (r * stride) % span < line;
    return same < ways;
}

/* Whether the space holds the tile of knobs q (the checker may refuse
 * one: a padded tile over a packed B whose rows are a size). */
static bool has_tile(const TuneSpace *sp, const int q[TUNE_NPARAMS]) {
    for (int c = 0; c < sp->len; c++)
        if (sp->cands[c].tmpl == TUNE_T_TILE && memcmp(sp->cands[c].p, q, sizeof sp->cands[c].p) == 0)
            return true;
    return false;
}

/* Marks the known-good sketches (tune.h): what a BLIS-style library
 * would pick for this register file, so the search starts where a
 * hand-written schedule does (bench/programs' are among them) and the
 * model learns around them. */
static void mark_seeds(TuneSpace *sp, const TuneHw *hw, int regs, int max_nv) {
    int n = (int)(sizeof tile_rows / sizeof tile_rows[0]);
    int mr_max = max_rows(tile_rows, n, max_nv, regs, false);
    int mr_pow2 = max_rows(tile_rows, n, max_nv, regs, true);
    /* the widest Y^T tile the registers hold, and the widest whose rows
     * of B also stay in L1 (dense_stream_k3072.rv's 8 rows at K = 3072) */
    int nj_max = 0, nj_fit = 0;
    for (int c = 0; c < sp->len; c++) {
        int nj = sp->cands[c].p[0];
        if (sp->cands[c].tmpl != TUNE_T_STREAM)
            continue;
        nj_max = nj > nj_max ? nj : nj_max;
        if (stream_rows_fit(&sp->stage, hw, nj) && nj > nj_fit)
            nj_fit = nj;
    }
    for (int c = 0; c < sp->len; c++) {
        TuneCand *x = &sp->cands[c];
        const int *p = x->p;
        bool max_tile = p[1] == max_nv && (p[0] == mr_max || p[0] == mr_pow2);
        switch (x->tmpl) {
        case TUNE_T_DOT:
            x->seed = true;
            break;
        case TUNE_T_TILE:
            /* B packed k-major (no padding), transposed in blocks (padded;
             * unpadded where the checker refuses the padded one: B's rows
             * are a size, bmm_nt's N = T, and a packed B cannot be padded
             * past them), or read in place (padded or not), copied out as
             * one vector loop unless packed row by row */
            {
                int padded[TUNE_NPARAMS] = {p[0], p[1], 2, 1, 1};
                bool block = p[2] == 2 && p[4] && (p[3] || !has_tile(sp, padded));
                x->seed = max_tile && ((p[2] == 1 && !p[3] && !p[4]) || block || (p[2] == 0 && p[4]) ||
                                       (p[2] == 3 && !p[3] && !p[4]));
            }
            x->sketch = p[2];
            break;
        case TUNE_T_KBLOCK:
            x->seed = p[1] == max_nv && p[0] == mr_max;
            break;
        case TUNE_T_STREAM:
            x->seed = p[0] == nj_max || p[0] == nj_fit;
            x->sketch = p[0] == nj_fit;
            break;
        case TUNE_T_ROWS:
            /* the register-maximal tiles, and the hand-written one's
             * shape (a few rows, one vector, all of j per k) */
            x->seed = max_tile || (p[1] == 1 && p[2] == 0 && p[0] == 4);
            x->sketch = !max_tile;
            break;
        default:
            break;
        }
    }
}

rv_status tune_space_build(rv_module *m, const TuneHw *hw, TuneSpace *out) {
    memset(out, 0, sizeof *out);
    rv_status st = tune_space_analyze(m, &out->stage);
    if (st != RV_OK)
        return st;
    out->keep = other_blocks(m, &out->stage);
    const TuneStage *s = &out->stage;
    int lanes = hw->vector_bytes > 0 ? hw->vector_bytes / (int)s->dsize : 1;
    if (lanes < 1)
        lanes = 1;
    int regs = hw->vector_regs > 0 ? hw->vector_regs : 16;
    int64_t l2 = hw->l2_bytes > 0 ? hw->l2_bytes : 256 * 1024;
    /* columns of Y: no tile wider than j rounded up to whole vectors */
    int max_nv = 4;
    if (s->n_extent > 0 && (s->n_extent + lanes - 1) / lanes < max_nv)
        max_nv = (int)((s->n_extent + lanes - 1) / lanes);
    int p[TUNE_NPARAMS] = {0};
    if (s->rows_uf) {
        /* ragged rows: tiles of the fused rows (rows accumulated in Y) */
        for (int nv = 1; nv <= max_nv; nv++)
            for (size_t r = 0; r < sizeof tile_rows / sizeof tile_rows[0]; r++)
                for (int order = 0; order <= 1; order++) {
                    if (tile_rows[r] * nv + nv + 1 > regs)
                        continue;
                    int q[TUNE_NPARAMS] = {tile_rows[r], nv, order};
                    try_add(m, out, TUNE_T_ROWS, q, lanes);
                }
        goto done;
    }
    if (s->a_k_inner && s->b_k_inner)
        try_add(m, out, TUNE_T_DOT, p, lanes);
    for (int nv = 1; nv <= max_nv; nv++)
        for (size_t r = 0; r < sizeof tile_rows / sizeof tile_rows[0]; r++) {
            int mr = tile_rows[r];
            /* mr * nv accumulators, nv vectors of B and one broadcast of A */
            if (mr * nv + nv + 1 > regs)
                continue;
            for (int pack = 0; pack <= 3; pack++)
                for (int pad = 0; pad <= 1; pad++)
                    for (int wide = 0; wide <= (nv > 1); wide++) {
                        int q[TUNE_NPARAMS] = {mr, nv, pack, pad, nv > 1 ? wide : 1};
                        try_add(m, out, TUNE_T_TILE, q, lanes);
                    }
            /* k blocks: a block of the packed panel (kc x nr) within a
             * quarter of L2, dividing k, several per k */
            for (int kc = 4 * lanes; s->k_extent > 0 && kc < s->k_extent; kc *= 2) {
                if (s->k_extent % kc || (int64_t)kc * nv * lanes * (int64_t)s->dsize > l2 / 4)
                    continue;
                int q[TUNE_NPARAMS] = {mr, nv, kc};
                try_add(m, out, TUNE_T_KBLOCK, q, lanes);
            }
        }
    /* Y^T tiles: nj accumulators (one vector of i each) and one of A */
    static const int njs[] = {4, 8, 12, 16, 24, 32};
    static const int kus[] = {4, 8};
    for (size_t a = 0; a < sizeof njs / sizeof njs[0]; a++)
        for (size_t u = 0; u < sizeof kus / sizeof kus[0]; u++) {
            if (njs[a] + 2 > regs || (s->n_extent > 0 && njs[a] > s->n_extent) ||
                (s->k_extent > 0 && s->k_extent % kus[u]))
                continue;
            int q[TUNE_NPARAMS] = {njs[a], kus[u]};
            try_add(m, out, TUNE_T_STREAM, q, lanes);
        }
done:
    if (out->len == 0)
        return base_error(RV_ERR_UNSUPPORTED,
                          "nothing to tune: the schedule checker refused all %d candidates for %s",
                          out->rejected, s->name);
    mark_seeds(out, hw, regs, max_nv);
    return RV_OK;
}

int tune_space_neighbour(const TuneSpace *s, int c, uint64_t r) {
    const TuneCand *x = &s->cands[c];
    int found = 0, pick = -1;
    for (int i = 0; i < s->len; i++) {
        const TuneCand *y = &s->cands[i];
        if (i == c || y->tmpl != x->tmpl)
            continue;
        int diff = 0;
        for (int q = 0; q < TUNE_NPARAMS; q++)
            diff += y->p[q] != x->p[q];
        if (diff != 1)
            continue;
        /* reservoir sampling: each neighbour equally likely */
        found++;
        if ((r + (uint64_t)found * 0x9E3779B97F4A7C15ull) % (uint64_t)found == 0)
            pick = i;
    }
    return pick;
}

/* Why a space per leaf: the checker judges a schedule for every value
 * of a size's range, so the generic space refuses a tile that is legal
 * only at some sizes: a padded tile (pad=1) over j reads a packed B past
 * its rows unless j's extent is a multiple of the tile (bmm_nt, N = T),
 * which the hand-written bcast6x64_wt is where bench/ compiles it for one
 * T. A leaf is compiled for one shape, its sizes constants, so its space
 * is the templates' candidates that lower with every size's range
 * narrowed to its value, as the leaf's variant is (driver/compile.c). */
int tune_space_add_leaf(rv_module *m, const TuneHw *hw, const rv_variant_sizes *at, TuneSpace *sp,
                        int *out, int max) {
    int64_t lo[RV_DISPATCH_MAX_CONDS], hi[RV_DISPATCH_MAX_CONDS];
    Size *z[RV_DISPATCH_MAX_CONDS];
    int nat = at->nsizes < RV_DISPATCH_MAX_CONDS ? at->nsizes : RV_DISPATCH_MAX_CONDS;
    for (int i = 0; i < nat; i++) {
        z[i] = rv_module_size(m, at->at[i].size);
        lo[i] = z[i]->lo, hi[i] = z[i]->hi;
        z[i]->lo = z[i]->hi = at->at[i].value;
    }
    TuneSpace at_space;
    rv_status st = tune_space_build(m, hw, &at_space);
    for (int i = nat - 1; i >= 0; i--) /* in reverse: a size named twice gets its own back */
        z[i]->lo = lo[i], z[i]->hi = hi[i];
    if (st != RV_OK)
        base_error_clear();
    int n = 0;
    for (int a = 0; st == RV_OK && a < at_space.len; a++) {
        TuneCand *x = &at_space.cands[a];
        int c = 0;
        while (c < sp->len + sp->nleaf && strcmp(sp->cands[c].sched, x->sched) != 0)
            c++;
        if (c < sp->len) /* legal for every shape: the generic search's */
            continue;
        if (c == sp->len + sp->nleaf) {
            if (c == sp->cap) {
                sp->cap = sp->cap ? 2 * sp->cap : 64;
                sp->cands = base_xrealloc(sp->cands, sizeof *sp->cands * (size_t)sp->cap);
            }
            sp->cands[c] = *x;
            sp->cands[c].leaf = true;
            x->sched = NULL; /* moved */
            sp->nleaf++;
        }
        sp->cands[c].seed = x->seed; /* a known-good sketch at this shape */
        if (n < max)
            out[n++] = c;
    }
    tune_space_free(&at_space);
    return n;
}

void tune_space_free(TuneSpace *s) {
    for (int i = 0; i < s->len + s->nleaf; i++)
        base_free(s->cands[i].sched);
    base_free(s->cands);
    base_free(s->keep);
    memset(s, 0, sizeof *s);
}
