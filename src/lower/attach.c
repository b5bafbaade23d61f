/*
 * attach.c — placement of the stages computed at a loop of their reader.
 *
 * Takes a reader's nest at the loop a stage is computed at. Gives, around
 * the rest of the reader's body, an allocation of a buffer for the region
 * of the stage that the reader's remaining iterations read (bounds.c),
 * and the stage's nest over that region (nest.c). Per dimension: origin
 * and extent, clipped to the tensor unless the stage pads locally (then
 * out-of-range elements of a cached input are zero). The buffer lives on
 * the stack when small and constant, else in the per-call scratch arena;
 * the reader's reads of it become loads relative to the origin (a RegionView,
 * expr.c). A tile that cannot be bounded, or a padded stage that would
 * read outside a tensor, is a schedule error located at the placing step.
 * Inlined stages were already substituted by the schedule.
 */
#include "lower/lower.h"

/* Bytes a local buffer may take on the stack; larger ones use scratch. */
#define LOCAL_STACK_BYTES (256 * 1024)

static void no_loops_fn(const Expr *e, void *ctx) {
    if ((e->kind == EX_VAR && e->u.axis->kind != AX_LOOP) || e->kind == EX_LOAD ||
        (e->kind == EX_VAR && e->u.axis->kind == AX_LOOP))
        *(bool *)ctx = false;
}

static void uf_fn(const Expr *e, void *ctx) {
    if (e->kind == EX_UFCALL || (e->kind == EX_LOAD && e->u.buf->uf))
        *(bool *)ctx = true;
}

/* Does e apply a UF (or load from a UF's array)? */
static bool reads_uf(const Expr *e) {
    bool found = false;
    ir_visit(e, uf_fn, &found);
    return found;
}

/* True when e is over sizes and constants only. */
static bool sizes_only(const Expr *e) {
    bool ok = true;
    ir_visit(e, no_loops_fn, &ok);
    return ok;
}

/* A padded stage computes whole tiles: each read it makes must stay inside
 * the tensor read for every element of the tile, either because it reads
 * a padded copy made inside it, or because bounds prove the index inside. */
typedef struct PadReads {
    LowerCtx *c;
    const Stage *p;
    const PtrMap *vary;
    const char *bad;
    bool bad_uf; /* bad names a ufun, which no cache_read can pad */
} PadReads;

static bool provably_lt(LowerCtx *c, Expr *a, Expr *b) {
    int64_t v;
    Expr *t = lower_ctx_simp(c, ir_binary(c->m, EX_LT, a, b));
    return ir_is_const_int(t, &v) && v;
}

/* Is index d of a read of a tensor or UF (its axes, the read's indices)
 * inside its extent for every element of the tile? An extent over outer
 * axes (l < len[b]) is taken at the read's outer indices, at its least
 * over the tile. */
static bool index_inside(PadReads *pr, Axis *const *axes, Expr *const *args, int d) {
    Module *m = pr->c->m;
    if (!axes[d]->extent)
        return false;
    PtrMap at = {0};
    for (int j = 0; j < d; j++)
        ptrmap_put(&at, axes[j], args[j]);
    Expr *ext = ir_substitute(m, axes[d]->extent, &at);
    ptrmap_free(&at);
    Range r, e;
    return ext && lower_bounds_range(m, args[d], pr->vary, false, &r) &&
           lower_bounds_range(m, ext, pr->vary, false, &e) &&
           provably_lt(pr->c, ir_int(m, -1), r.lo) && provably_lt(pr->c, r.hi, e.lo);
}

static void pad_reads_fn(const Expr *e, void *ctx) {
    PadReads *pr = ctx;
    if (pr->bad)
        return;
    if (e->kind == EX_UFCALL) {
        /* a UF indexed past the end of the tile would be read out of range */
        for (int d = 0; d < e->n && !pr->bad; d++)
            if (!index_inside(pr, e->u.uf->args, e->args, d)) {
                pr->bad = e->u.uf->name;
                pr->bad_uf = true;
            }
        return;
    }
    if (e->kind != EX_READ)
        return;
    const Stage *src = sched_stage_of(pr->c->s, e->u.tensor);
    if (src && src->kind == STAGE_CACHE_READ && src->local_pad && src->attach == ATTACH_AT &&
        src->at == pr->p)
        return;
    for (int d = 0; d < e->n && !pr->bad; d++)
        if (!index_inside(pr, e->u.tensor->axes, e->args, d))
            pr->bad = e->u.tensor->name;
}

static const char *padded_reads_outside(LowerCtx *c, const Stage *p, Expr *const *origin,
                                        Expr *const *ext, bool *is_uf) {
    Module *m = c->m;
    PtrMap vary = {0};
    Range rs[RV_MAX_DIMS];
    for (int d = 0; d < p->t->ndim; d++) {
        rs[d].lo = origin[d];
        rs[d].hi = lower_ctx_simp(
            c, ir_binary(m, EX_SUB, ir_binary(m, EX_ADD, origin[d], ext[d]), ir_int(m, 1)));
        ptrmap_put(&vary, p->t->axes[d], &rs[d]);
    }
    PadReads pr = {c, p, &vary, NULL, false};
    ir_visit(p->body, pad_reads_fn, &pr);
    ptrmap_free(&vary);
    *is_uf = pr.bad_uf;
    return pr.bad;
}

/* Does every reader of the padded copy p read only inside its tensor? Not
 * a stage that computes whole tiles (a padded cache_write stage, or one
 * with a padded loop): its reads past the end of a tile are meant to find
 * the copy's zeros. The others read what the program reads. */
static bool copy_read_inside(LowerCtx *c, const Stage *p) {
    if (p->kind != STAGE_CACHE_READ)
        return false;
    for (int k = 0; k < c->s->stages.len; k++) {
        const Stage *r = c->s->stages.data[k];
        if (r->t == p->t || r->attach == ATTACH_INLINE || !sched_stage_reads_tensor(r, p->t))
            continue;
        if ((r->local_pad && r->kind != STAGE_CACHE_READ) || lower_loop_padded(r))
            return false;
    }
    return true;
}

/* The conditions of a kept pack (docs/schedules.md, "Packs of params")
 * that do not depend on where it is placed: a cache_read of an input
 * declared constant across runs (`param`), of constant shape, of constant
 * size, unpadded, read by a root stage (or a recursion group's member)
 * whose loops no other stage shares (hfuse, split_op). A size in the
 * shape or the region would make its contents depend on the run. */
static bool kept_source(const StageNest *n, const Stage *p, const Expr *size) {
    const Tensor *src = p->source;
    const Stage *r = n->st;
    int64_t v;
    if (p->kind != STAGE_CACHE_READ || !src || src->op->kind != OP_INPUT || !src->param ||
        p->local_pad || !ir_is_const_int(size, &v) ||
        !(r->attach == ATTACH_ROOT || sched_stage_group(r)) || r->whole || r->parts[0] ||
        r->hfuse_with || r->hfused_by)
        return false;
    for (int d = 0; d < src->ndim; d++)
        if (!ir_is_const_int(src->axes[d]->extent, &v))
            return false;
    return true;
}

/* A pack kept across runs placed at the top of its reader's kernel (a
 * root stage's, or a recursion group's, whose invariant packs go above
 * its loops: recurse.c), over a region of constant origin and extent: its
 * contents depend on the bound array alone. */
static bool kept_pack(const StageNest *n, const Stage *p, Expr *const *origin,
                      Expr *const *ext, const Expr *size) {
    int64_t v;
    if (p->at_iv || !kept_source(n, p, size))
        return false;
    for (int d = 0; d < p->t->ndim; d++)
        if (!ir_is_const_int(origin[d], &v) || !ir_is_const_int(ext[d], &v))
            return false;
    return true;
}

/* A pack placed at a loop of its reader whose iterations copy the blocks
 * of the param one each: a weight matrix's 64-row panels packed in a
 * parallel loop over the panels, each thread its own. It is kept too, as
 * the blocks side by side (block s at s times the block's size, in the
 * layout the schedule gives one block, so each iteration reads the slice
 * it would have packed). Sound when the iterations of the reader's loops
 * down to the placement (all of constant extent: every one runs in every
 * run) and the blocks of a grid over the param (constant block extents
 * dividing the param's) correspond one to one, iteration L (the loops'
 * row-major index) copying block L, which the simplifier must prove from
 * the region's origin: every block is then filled by exactly one
 * iteration of a run that fills the pack (no two threads write one), and
 * read back by the same iteration of later runs. Returns L, the block of
 * the current iteration, and *nblocks; NULL where these do not hold.
 *
 * A serial loop of varying extent among them (a block of token rows
 * around the panels: every panel is read once per block) is left out of
 * L: the proof of the origin then shows that the blocks do not depend on
 * it, so its iterations copy the same blocks again. *first is the test of
 * its first iteration (value 0), the only one that copies; the others
 * read. In a partitioned last tile the loop is a value (E/f: the number of
 * full tiles before it), and *first tests it the same way when the copy
 * of the nest shares the full tiles' pack (lower_attach_one); *own is the
 * test for a copy with a pack of its own (true for such a value). Such a
 * loop may run no iteration, in which case no block is copied: the pack
 * then reports in its flag which runs filled it (lower_attach_one).
 * *first and *own are NULL when there is no such loop. */
enum { KEPT_MAX_LOOPS = 64 }; /* (kept_block's loops around a pack) */

static Expr *kept_block(LowerCtx *c, StageNest *n, const Stage *p, Expr *const *origin,
                        Expr *const *ext, const Expr *size, int64_t *nblocks,
                        Expr **first, Expr **own) {
    Module *m = c->m;
    const Stage *r = n->st;
    int64_t v;
    /* (a recursion group's member runs its loops once per dynamic batch,
     * some only for internal nodes: not every run runs them) */
    if (!p->at_iv || !kept_source(n, p, size) || sched_stage_group(r))
        return NULL;
    /* (blocks side by side shift the outermost storage dimension's
     * origin, which a split layout's panel division would not keep) */
    if (p->panels)
        return NULL;
    Expr *L = ir_int(m, 0), *once = NULL, *mine = NULL;
    bool tail = false;
    int64_t iters = 1;
    bool found = false;
    const Axis *outer[KEPT_MAX_LOOPS]; /* the loop variables outside l */
    int nouter = 0;
    for (int i = 0; i < r->leaves.len && !found; i++) {
        const IterVar *l = r->leaves.data[i];
        Expr *e = lower_iv_extent_over(c, n, l, NULL), *x = lower_iv_value(c, n, l);
        if (!e || !x || nouter == KEPT_MAX_LOOPS)
            return NULL;
        found = l == p->at_iv;
        if (x->kind == EX_VAR)
            outer[nouter++] = x->u.axis;
        if (!ir_is_const_int(e, &v)) {
            /* (parallel, two threads would copy one block, or read it
             * before the first iteration copied it) */
            if (l->kind != LOOP_SERIAL || found)
                return NULL;
            /* (an extent that varies with an outer loop may be 0 at that
             * loop's first iteration and not at a later one: iteration 0
             * of every loop would never run and nothing would copy the
             * pack: `tb < len[b]/48` inside `b`) */
            for (int o = 0; o < nouter - (x->kind == EX_VAR); o++)
                if (ir_uses_axis(e, outer[o]))
                    return NULL;
            Expr *at0 = ir_binary(m, EX_EQ, x, ir_int(m, 0));
            /* (a value, not a loop: a partitioned last tile, whose own
             * pack is copied there) */
            Expr *own0 = x->kind == EX_VAR ? at0 : ir_bool(m, true);
            tail |= x->kind != EX_VAR;
            once = once ? ir_binary(m, EX_AND, once, at0) : at0;
            mine = mine ? ir_binary(m, EX_AND, mine, own0) : own0;
            continue;
        }
        if (v < 1 || iters > INT64_MAX / v)
            return NULL;
        iters *= v;
        L = ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, L, ir_int(m, v)), x);
    }
    if (!found)
        return NULL;
    L = lower_ctx_simp(c, L);
    const Tensor *src = p->source;
    int64_t nb[RV_MAX_DIMS], blocks = 1;
    for (int d = 0; d < src->ndim; d++) {
        int64_t x, e;
        ir_is_const_int(src->axes[d]->extent, &x);
        if (!ir_is_const_int(ext[d], &e) || e < 1 || x % e)
            return NULL;
        nb[d] = x / e;
        blocks *= nb[d];
    }
    if (blocks != iters)
        return NULL;
    /* block L's origin in dimension d: e_d * ((L / stride_d) % nb_d), no
     * remainder in the outermost dimension of more than one block */
    int64_t stride = 1;
    for (int d = src->ndim - 1; d >= 0; d--) {
        int64_t e;
        ir_is_const_int(ext[d], &e);
        Expr *k = ir_binary(m, EX_DIV, L, ir_int(m, stride));
        if (stride * nb[d] < blocks)
            k = ir_binary(m, EX_MOD, k, ir_int(m, nb[d]));
        Expr *want = nb[d] == 1 ? ir_int(m, 0) : ir_binary(m, EX_MUL, ir_int(m, e), k);
        Expr *diff = lower_ctx_simp(c, ir_binary(m, EX_SUB, origin[d], want));
        if (!ir_is_const_int(diff, &v) || v)
            return NULL;
        stride *= nb[d];
    }
    *nblocks = blocks;
    *first = once ? lower_ctx_simp(c, once) : NULL;
    *own = tail ? lower_ctx_simp(c, mine) : *first; /* (the same pointer: no last tile) */
    return L;
}

/* The key under which kept pack v of stage p may be shared (ir.h,
 * Buffer.pack_key): its source, element type, and where each element of
 * the region goes (origin unless blocked, extents, strides, panels), all
 * constants; the blocks' number where the blocks lie side by side (their
 * origins follow from the extents). NULL where a part is not constant. */
static const char *pack_key(LowerCtx *c, const Stage *p, const RegionView *v, Expr *const *origin,
                            Expr *const *ext, int64_t nblocks, bool blocked) {
    Buf b = {0};
    buf_printf(&b, "%s:%s:%lld", p->source->name, rv_dtype_name(p->t->dtype),
               (long long)(blocked ? nblocks : 0));
    bool ok = true;
    for (int d = 0; d < v->ndim && ok; d++) {
        int64_t o = 0, e, s, si = 0;
        ok = (blocked || ir_is_const_int(origin[d], &o)) && ir_is_const_int(ext[d], &e) &&
             ir_is_const_int(v->stride[d], &s) &&
             (!v->split[d] || ir_is_const_int(v->stride_in[d], &si));
        buf_printf(&b, "|%lld+%lld*%lld/%lld*%lld", (long long)o, (long long)e, (long long)s,
                   (long long)v->split[d], (long long)si);
    }
    const char *key = ok ? arena_printf(c->m->arena, "%s", buf_str(&b)) : NULL;
    buf_free(&b);
    return key;
}

/* Stage p computed here, in reader n: its buffer (a view for the reader)
 * and its nest, allocated around the reader's rest by the caller (unless
 * the buffer is a kept pack, BUF_PACK: a kernel parameter, and its nest
 * runs only when the runtime's flag says so). */
Stmt *lower_attach_one(LowerCtx *c, StageNest *n, Stage *p, Buffer **buf_out) {
    Module *m = c->m;
    Range reg[RV_MAX_DIMS];
    bool have = lower_region_at(c, n, p, reg);
    if (c->st != RV_OK)
        return NULL;
    lower_debug_region(c, n, p, have, reg);
    int nd = p->t->ndim;
    Expr *origin[RV_MAX_DIMS], *ext[RV_MAX_DIMS], *alloc[RV_MAX_DIMS];
    /* A padded copy whose readers read only inside the tensor need not
     * hold more of it than the tensor: where its tile cannot be bounded,
     * or could be larger than the tensor ever is (a tile of every outer
     * split, 1000 x 1000 for a 15 x 15 input), it is clamped to the
     * tensor (`clamped`), and the reads of it are then checked against
     * the tensor as those of an unpadded copy. */
    bool inside = p->local_pad && copy_read_inside(c, p), clamped = false;
    /* a fused variable loop over dimensions 0..fk: dimension 0 is a range
     * of its rows (the bounds pass's), the others one point */
    int fk = -1;
    const IterVar *fv = sched_region_vfuse(p, &fk);
    for (int d = 0; d < nd; d++) {
        if (fv && d > 0 && d <= fk) {
            origin[d] = ir_int(m, 0);
            ext[d] = alloc[d] = ir_int(m, 1);
            continue;
        }
        /* a ragged dimension: its largest row in the region (fused: every
         * row there is) */
        Expr *full = fv && d == 0 ? lower_vfuse_extent(c, fv) : lower_ragged_extent(c, p, d, have ? reg : NULL);
        if (!full)
            return NULL;
        if (!have) {
            if (p->local_pad && !inside)
                return lower_stage_error(c, p, "cannot bound the tile of %s that %s reads", p->name,
                                         n->st->name);
            clamped = p->local_pad;
            /* the whole tensor */
            origin[d] = ir_int(m, 0);
            ext[d] = alloc[d] = full;
            continue;
        }
        Expr *lo = lower_ctx_simp(c, reg[d].lo), *hi = lower_ctx_simp(c, reg[d].hi);
        Expr *span =
            lower_ctx_simp(c, ir_binary(m, EX_ADD, ir_binary(m, EX_SUB, hi, lo), ir_int(m, 1)));
        if (p->local_pad) {
            origin[d] = lo;
            ext[d] = span;
        } else {
            origin[d] = lower_ctx_simp(c, ir_binary(m, EX_MAX, lo, ir_int(m, 0)));
            Expr *top = ir_binary(m, EX_MIN, hi, ir_binary(m, EX_SUB, full, ir_int(m, 1)));
            ext[d] = ir_binary(m, EX_ADD, ir_binary(m, EX_SUB, top, origin[d]), ir_int(m, 1));
        }
        /* a region the reader reads nothing of (all of it clipped away, or
         * hi < lo) is empty, not negative: the product of two negative
         * extents (a fused loop, the tile's size) would be positive */
        ext[d] = lower_ctx_simp(c, ir_binary(m, EX_MAX, ext[d], ir_int(m, 0)));
        Expr *ub = lower_bounds_upper(m, span);
        ub = ub ? lower_ctx_simp(c, ub) : NULL;
        /* the simplifier may know better: the last, partial tile of a
         * split whose extent holds UF values (a level's nodes) spans
         * len - len/4*4 <= 3, which the ranges of len alone bound by N.
         * Its constant replaces a bound that may exceed it, or one that
         * holds UF values (it would size a buffer anew per tile or
         * level), or loads a prelude's array (the last tile of a fused
         * variable loop spans T - T/4*4 rows, T = start[B]); not one over
         * sizes that reaches it only at their largest values. */
        int64_t cub, uub;
        if (ir_upper_bound(m, span, &cub) &&
            (!ub || reads_uf(ub) || !sizes_only(ub) || !ir_upper_bound(m, ub, &uub) ||
             cub < uub))
            ub = ir_int(m, cub);
        Expr *fub = inside ? lower_bounds_upper(m, full) : NULL;
        fub = fub ? lower_ctx_simp(c, fub) : NULL;
        if (fub && sizes_only(fub) && sizes_only(full) &&
            (!ub || !sizes_only(ub) || provably_lt(c, fub, ub))) {
            /* the part of the tile inside the tensor, in a window of at
             * most the tensor's extent within the tile: the whole tile
             * where it is no larger than the tensor */
            Expr *e = lower_ctx_simp(
                c, ir_binary(m, EX_MAX, ir_binary(m, EX_MIN, span, full), ir_int(m, 0)));
            Expr *last = ir_binary(m, EX_SUB, ir_binary(m, EX_ADD, hi, ir_int(m, 1)), e);
            origin[d] = lower_ctx_simp(
                c, ir_binary(m, EX_MIN, ir_binary(m, EX_MAX, lo, ir_int(m, 0)), last));
            ext[d] = e;
            alloc[d] = lower_ctx_simp(c, ir_binary(m, EX_MAX, fub, ir_int(m, 0)));
            clamped = true;
            continue;
        }
        if (fv && d == 0) {
            /* fused rows: at most every row there is */
            Expr *rb = lower_vfuse_rows_bound(c, fv);
            int64_t a, r;
            if (rb && (!ub || !sizes_only(ub) ||
                       (ir_is_const_int(ub, &a) && ir_is_const_int(rb, &r) && r < a)))
                ub = rb;
        }
        if (!ub || !sizes_only(ub)) {
            /* a ragged dimension: at most its longest row */
            Expr *fu = sizes_only(full) ? full : lower_bounds_upper(m, full);
            if (p->local_pad || !fu || !sizes_only(fu))
                return lower_stage_error(c, p, "cannot bound the tile of %s that %s reads", p->name,
                                         n->st->name);
            ub = lower_ctx_simp(c, fu);
        } else if (!p->local_pad) {
            int64_t a, b;
            if (ir_is_const_int(ub, &a) && ir_is_const_int(full, &b) && b < a)
                ub = full;
        }
        alloc[d] = lower_ctx_simp(c, ir_binary(m, EX_MAX, ub, ir_int(m, 0)));
    }
    /* region bounds may hold UF applications: make them loop IR (i64) */
    for (int d = 0; d < nd; d++) {
        origin[d] = lower_index(c, origin[d]);
        ext[d] = lower_index(c, ext[d]);
        alloc[d] = lower_index(c, alloc[d]);
        if (!origin[d] || !ext[d] || !alloc[d])
            return NULL;
        origin[d] = lower_ctx_simp(c, ir_cast(m, RV_I64, origin[d]));
        ext[d] = lower_ctx_simp(c, ir_cast(m, RV_I64, ext[d]));
        alloc[d] = lower_ctx_simp(c, ir_cast(m, RV_I64, alloc[d]));
    }
    /* the storage dimensions, outermost first: d, or ~d for the offset in
     * a panel of d (a split layout) */
    const StagePanels *sp = p->panels;
    int slots[2 * RV_MAX_DIMS], nslots = sp ? sp->nslots : 0;
    int64_t split[RV_MAX_DIMS] = {0};
    if (sp) {
        memcpy(slots, sp->slots, sizeof slots);
        memcpy(split, sp->split, sizeof split);
    } else {
        for (int k = 0; k < nd; k++)
            slots[nslots++] = p->order[k];
    }
    /* each one's extent: a panel's count rounds up (the last panel padded) */
    Expr *sext[2 * RV_MAX_DIMS];
    for (int k = 0; k < nslots; k++) {
        int d = slots[k] < 0 ? ~slots[k] : slots[k];
        sext[k] = !split[d]      ? alloc[d]
                  : slots[k] < 0 ? ir_int(m, split[d])
                                 : lower_ctx_simp(c, lower_ceil_div(m, alloc[d], split[d]));
    }
    /* A local whose extents vary but are bounded (a partitioned tail's
     * T % 16 columns) is allocated at the bounds anyway: it is laid out
     * at them too, so its strides are constants (a row of the tile starts
     * a whole vector after the last, T % 16 or not) and registers.c can
     * keep it in registers; with strides of the varying extent, each row
     * of a tail tile started at i * (T % 16) and lived in memory. */
    int64_t bound[2 * RV_MAX_DIMS], elems_ub = 1;
    bool fixed = nslots > 0;
    for (int k = 0; k < nslots && fixed; k++) {
        fixed = ir_upper_bound(m, sext[k], &bound[k]) && bound[k] >= 1;
        /* the innermost rounded up to whole vectors (a power of two up to
         * 16 lanes, or `align`): a tail's rows then start a vector apart */
        int64_t a = p->align > 1 ? p->align : 1;
        while (fixed && k == nslots - 1 && p->align <= 1 && a < 16 && a < bound[k])
            a *= 2;
        if (fixed && k == nslots - 1)
            bound[k] = (bound[k] + a - 1) / a * a;
        fixed = fixed && bound[k] <= LOCAL_STACK_BYTES && elems_ub <= LOCAL_STACK_BYTES / bound[k];
        elems_ub *= fixed ? bound[k] : 1;
    }
    int64_t cst;
    bool varies = false;
    for (int k = 0; k < nslots; k++)
        varies |= !ir_is_const_int(sext[k], &cst);
    fixed = fixed && varies && !p->panels && !p->local_pad &&
            elems_ub <= LOCAL_STACK_BYTES / (int64_t)rv_dtype_size(p->t->dtype);
    if (fixed) {
        for (int k = 0; k < nslots; k++)
            sext[k] = ir_int(m, bound[k]);
    } else if (nslots && p->align > 1) {
        sext[nslots - 1] =
            lower_ctx_simp(c, ir_binary(m, EX_MUL, lower_ceil_div(m, sext[nslots - 1], p->align),
                                        ir_int(m, p->align)));
        if (slots[nslots - 1] >= 0) /* (blocks side by side step by the rounded extent) */
            alloc[slots[nslots - 1]] = sext[nslots - 1];
    }
    if (p->local_pad && p->kind != STAGE_CACHE_READ) {
        bool is_uf;
        const char *bad = padded_reads_outside(c, p, origin, ext, &is_uf);
        if (bad && is_uf)
            return lower_stage_error(c, p,
                                     "%s computes whole tiles (pad=1), which would read ufun '%s' "
                                     "outside its domain (a ufun cannot be padded: drop pad=1)",
                                     p->name, bad);
        if (bad)
            return lower_stage_error(
                c, p,
                "%s computes whole tiles (pad=1), which would read %s outside its "
                "bounds; add `cache_read(%s, pad=1)` to the schedule of %s and "
                "compute it at a loop of %s",
                p->name, bad, bad, p->name, p->name);
    }
    RegionView *v = arena_alloc(m->arena, sizeof(RegionView));
    v->ndim = nd;
    Expr *size = ir_int(m, 1);
    for (int k = nslots - 1; k >= 0; k--) {
        int d = slots[k] < 0 ? ~slots[k] : slots[k]; /* storage order, innermost last */
        v->lo[d] = origin[d];
        v->split[d] = split[d];
        if (slots[k] < 0)
            v->stride_in[d] = size;
        else
            v->stride[d] = size;
        size = lower_ctx_simp(c, ir_binary(m, EX_MUL, size, sext[k]));
    }
    /* a region whose size varies but is bounded by the declared ranges (a
     * partitioned tail's N%4 rows) is a local of the bound's size */
    int64_t elems;
    bool bounded = ir_is_const_int(size, &elems) || ir_upper_bound(m, size, &elems);
    /* (a bound near INT64_MAX, a saturated one, must not wrap in bytes) */
    BufScope scope = bounded && elems >= 1 &&
                             elems <= LOCAL_STACK_BYTES / (int64_t)rv_dtype_size(p->t->dtype)
                         ? BUF_LOCAL
                         : BUF_GLOBAL;
    int64_t nblocks = 1;
    Expr *first = NULL, *own = NULL;
    Expr *block = kept_block(c, n, p, origin, ext, size, &nblocks, &first, &own);
    bool kept = block || kept_pack(n, p, origin, ext, size);
    if (kept)
        scope = BUF_PACK;
    /* Scratch memory is zeroed on every allocation (runtime/scratch.c), and
     * a ragged dimension's allocation is the longest row the ranges allow
     * (vgemm's panel of B, k < K[g] in 0..1408: 1408 rows for a problem of
     * 64, zeroed per problem and column panel, which cost more than the
     * product). The strides stay the bound's; the allocation ends after
     * the region's last element, one element at least (a guarded load
     * reads the origin). Fused rows and split layouts (whose last
     * element need not be stored last) keep their bound. */
    if (scope == BUF_GLOBAL && !fv && !sp) {
        Expr *last = ir_int(m, 0);
        for (int d = 0; d < nd; d++) {
            Expr *rows = ir_binary(m, EX_MAX, ext[d], ir_int(m, 1));
            last = ir_binary(m, EX_ADD, last,
                             ir_binary(m, EX_MUL, ir_binary(m, EX_SUB, rows, ir_int(m, 1)),
                                       v->stride[d]));
        }
        size = lower_ctx_simp(c, ir_binary(m, EX_ADD, last, ir_int(m, 1)));
    }
    if (block && nd) {
        /* the blocks side by side: block L's offsets start at L * size,
         * counted in the outermost storage dimension's origin */
        int d0 = p->order[0];
        v->lo[d0] = lower_ctx_simp(
            c, ir_binary(m, EX_SUB, v->lo[d0], ir_binary(m, EX_MUL, block, alloc[d0])));
        size = lower_ctx_simp(c, ir_binary(m, EX_MUL, size, ir_int(m, nblocks)));
    }
    /* A pack copied in the first iteration of a loop around the blocks
     * is the same in every copy of the nest the walk partitions (the
     * full tiles, the last tile of a block of rows around the panels):
     * the copies share it, the full tiles' loop copying it in its first
     * iteration and a last tile only when that loop ran none (its value,
     * the number of full tiles, 0), so the last tile reads the panels the
     * full tiles packed rather than a second copy of the weights. The
     * full tiles' copy comes first in the walk and in the kernel. */
    const char *key = first ? pack_key(c, p, v, origin, ext, nblocks, block != NULL) : NULL;
    KeptShare *ks = key ? ptrmap_get(&c->kept_share, p) : NULL;
    bool shared = ks && strcmp(ks->key, key) == 0, full = own == first;
    if (!shared)
        first = own; /* (a pack of its own) */
    if (shared) {
        v->buf = ks->buf;
    } else {
        v->buf = ir_buffer_new(m, p->name, p->t->dtype,
                               scope == BUF_LOCAL ? ir_int(m, elems) : size, scope);
        if (key && !ks && full) {
            /* (every loop around the blocks a loop: the full tiles) */
            ks = arena_alloc(m->arena, sizeof *ks);
            ks->key = key;
            ks->buf = v->buf;
            ptrmap_put(&c->kept_share, p, ks);
        }
    }
    if (kept && !shared) {
        v->buf->pack_of = p->source;
        /* a pack copied in the first iteration of a loop that may run
         * none is kept only when its kernel reports it filled: not shared
         * (a kernel sharing it would read it unfilled) */
        v->buf->pack_key = fv || first ? NULL
                                       : pack_key(c, p, v, origin, ext, nblocks, block != NULL);
        v->buf->pack_fill = ir_buffer_new(m, arena_printf(m->arena, "%s_fill", p->name), RV_I32,
                                          ir_int(m, 2), BUF_PACK);
        v->buf->pack_reports = first != NULL;
        lower_use_pack(c, v->buf);
    }
    v->local_pad = p->local_pad && !clamped;
    if (fv) {
        v->fused = lower_vfuse_layout(c, fv);
        v->fused_k = fk;
    }
    ptrmap_put(&c->views, p->t, v);
    *buf_out = v->buf;
    Stmt *nest = lower_stage_nest(c, p, origin, ext, v);
    if (!kept || !nest)
        return nest;
    Expr *stale = ir_binary(m, EX_NE, ir_load(m, v->buf->pack_fill, ir_int(m, 0)), ir_int(m, 0));
    if (first) {
        /* copied in the first iteration of the loops around the blocks,
         * which block 0's iteration reports (one store: one iteration
         * copies block 0) */
        Stmt *report = lower_if(
            m, lower_ctx_simp(c, ir_binary(m, EX_EQ, block, ir_int(m, 0))),
            lower_store(m, v->buf->pack_fill, ir_int(m, 1), ir_cast(m, RV_I32, ir_int(m, 1))), NULL);
        Stmt *both[2] = {nest, report};
        nest = lower_seq(m, 2, both);
        stale = ir_binary(m, EX_AND, stale, first);
    }
    return lower_if(m, stale, nest, NULL);
}

Stmt *lower_alloc_attached(Module *m, Buffer *b, Stmt *body) {
    return b->scope == BUF_PACK ? body : lower_alloc(m, b, body);
}

Stmt *lower_emit_attached(LowerCtx *c, StageNest *n, const IterVar *at, int i) {
    Module *m = c->m;
    if (c->st != RV_OK)
        return NULL;
    lower_bind_axes(c, n);
    Vec(Stmt *) nests = {0};
    Vec(Buffer *) bufs = {0};
    for (int k = 0; k < c->s->stages.len; k++) {
        Stage *p = c->s->stages.data[k];
        if (p->attach != ATTACH_AT || p->at != n->st || p->at_iv != at ||
            ptrmap_has(&c->hoisted, p) || ptrmap_has(&c->unread, p))
            continue;
        Buffer *b = NULL;
        Stmt *s = lower_attach_one(c, n, p, &b);
        if (!s) {
            vec_free(&nests);
            vec_free(&bufs);
            return NULL;
        }
        vec_push(&nests, s);
        vec_push(&bufs, b);
        lower_bind_axes(c, n); /* the producer's nest rebinds nothing of ours, but be sure */
    }
    Stmt *rest = lower_gen(c, *n, i);
    for (int k = nests.len - 1; rest && k >= 0; k--) {
        Stmt *both[2] = {nests.data[k], rest};
        rest = lower_alloc_attached(m, bufs.data[k], lower_seq(m, 2, both));
    }
    vec_free(&nests);
    vec_free(&bufs);
    return rest;
}
