/*
 * vfuse.c — fused variable loops (CoRa section 5.1, Fig. 6-7): the loop
 * f = fuse(a, b) where b's extent depends on a (`l < len[b]` fused with b)
 * runs over the sum of b's extents, and a and b come back from f through
 * arrays the prelude computes before the kernel.
 *
 * The fused space is laid out as a storage (ir/layout.h) whose levels are
 * f's parts: a's levels (a itself, or the levels of the loops fused into
 * it: fusing b with fuse(x, l) for attention's `len[b] x len[b]` nest, or
 * with fuse(b, h) for heads, gives three levels), then b as one level
 * whose extent mentions them. Enumerating that space in lexicographic
 * order is exactly how the nest of a and b runs, so
 *
 *     extent(f) = the number of tuples (the last row start, start[E_a])
 *     a         = row[f]              (the rank of the prefix of f's tuple)
 *     b         = f - start[row[f]]
 *
 * where `start` is the storage's row-start array of b's level and `row`
 * maps each tuple to its prefix (row[x] = r for start[r] <= x <
 * start[r + 1]), both AUX arrays the prelude fills. The storage is made
 * with the lowering's StorageShare, so a fused loop whose levels are those
 * of a ragged tensor ([b < B, l < len[b]]) uses that tensor's row-start
 * array: its offset start[b] + l is then start[row[f]] + f -
 * start[row[f]], which the simplifier reduces to f (a plain offset, no map
 * load), and every kernel over that pattern shares one prelude run of
 * both arrays (the row map is keyed by its row-start array).
 *
 * A level's extent is written over the levels' own axes: a root's axis
 * extent with the roots outside it replaced by their values (a level's
 * axis, or a / and % of a fused level), so the prelude evaluates it from
 * sizes and UF arrays alone (src/sched/vfuse.c checks that it can).
 */
#include "lower/lower.h"

typedef struct VFuse {
    const IterVar *f;
    Storage lay;
    int level;   /* b's level: its row starts are lay.start[level] */
    Buffer *row; /* the prefix rank of each tuple of the last level */
} VFuse;

/* Building the levels: the value of each root of the stage over them. */
typedef struct Levels {
    Module *m;
    PtrMap val; /* root Axis* -> tensor-level value over the level axes */
    Axis *axes[RV_MAX_DIMS];
    int n;
} Levels;

/* The extent of v over the level axes (as nest.c computes it over loops:
 * a fused extent is the product of its parts' extents, each at least 0). */
static Expr *level_extent(Levels *L, const IterVar *v) {
    Module *m = L->m;
    if (v->rel == IV_ROOT)
        return ir_substitute(m, v->axis->extent, &L->val);
    Expr *a = level_extent(L, v->fa), *b = level_extent(L, v->fb);
    return ir_binary(m, EX_MUL, ir_binary(m, EX_MAX, a, ir_int(m, 0)),
                     ir_binary(m, EX_MAX, b, ir_int(m, 0)));
}

/* Sets the values of the roots under level v whose value is val. */
static void assign(Levels *L, const IterVar *v, Expr *val) {
    Module *m = L->m;
    if (v->rel == IV_ROOT) {
        ptrmap_put(&L->val, v->axis, val);
        return;
    }
    Expr *eb = level_extent(L, v->fb);
    assign(L, v->fa, ir_binary(m, EX_DIV, val, eb));
    assign(L, v->fb, ir_binary(m, EX_MOD, val, eb));
}

/* The levels of f (sched_vfuse_levels), each an axis over which the
 * roots under it take their values. */
static bool add_levels(Levels *L, const IterVar *f) {
    const IterVar *lv[SCHED_MAX_IVS];
    int n = sched_vfuse_levels(f, lv);
    if (n > RV_MAX_DIMS)
        return false;
    for (int j = 0; j < n; j++) {
        Axis *u = ir_axis_new(L->m, lv[j]->name, AX_SPATIAL, level_extent(L, lv[j]));
        L->axes[L->n++] = u;
        assign(L, lv[j], u->var);
    }
    return true;
}

/* The number of prefixes of length k of lay (loop IR, loads of its row
 * starts), as ir_storage_init counts them. */
static Expr *prefix_count(LowerCtx *c, const Storage *lay, int k) {
    Module *m = c->m;
    Expr *n = ir_int(m, 1);
    for (int j = 0; j < k; j++)
        n = lay->variable[j] ? ir_load(m, lay->start[j], n)
                             : ir_binary(m, EX_MUL, n, lower_index(c, lay->ext[j]));
    return lower_ctx_simp(c, n);
}

/* A sizes-only bound of the number of tuples of levels 0..k (the row
 * map's size), from the declared ranges; NULL when there is none. */
static Expr *tuples_bound(Module *m, const Storage *lay, int k) {
    Expr *n = ir_int(m, 1);
    for (int j = 0; j <= k; j++) {
        int64_t lo, hi;
        if (!lay->variable[j]) {
            n = ir_binary(m, EX_MUL, n, lay->ext[j]);
            continue;
        }
        IrRange r = ir_int_range(lay->axes[j]->extent, &lo, &hi);
        if (r == IR_RANGE_EMPTY)
            return ir_int(m, 0);
        if (r != IR_RANGE_KNOWN)
            return NULL;
        n = ir_binary(m, EX_MUL, n, ir_int(m, hi < 0 ? 0 : hi));
    }
    return ir_simplify_expr(m, n);
}

/* The extent of b's level at prefix rank r, as an expression over an
 * axis standing for r, where the levels before it are constant (r then
 * names their indices by / and %: [b, l < len[b]], [b, h, l < len[b]]);
 * NULL otherwise. The simplifier proves with it that b = f - start[row[f]]
 * stays below that extent (ir/interval.c), so reads at (a, b) need no check. */
static Expr *rank_extent(LowerCtx *c, const VFuse *vf, Expr *count, Axis **r) {
    Module *m = c->m;
    const Storage *lay = &vf->lay;
    *r = lower_loop_var(m, "r", count);
    Expr *idx[RV_MAX_DIMS], *rem = (*r)->var;
    for (int j = vf->level - 1; j >= 0; j--) {
        if (!j) {
            idx[j] = rem;
        } else if (lay->variable[j]) {
            /* a variable level: its row map, where a fused loop made one */
            Buffer *row = ptrmap_get(&c->vfuse_rows, lay->start[j]);
            if (!row)
                return NULL;
            Expr *up = ir_load(m, row, rem);
            idx[j] = ir_binary(m, EX_SUB, rem, ir_load(m, lay->start[j], up));
            rem = up;
        } else {
            idx[j] = ir_binary(m, EX_MOD, rem, lay->ext[j]);
            rem = ir_binary(m, EX_DIV, rem, lay->ext[j]);
        }
    }
    return lower_ctx_simp(c, lower_index(c, ir_storage_extent(m, lay, vf->level, idx)));
}

static VFuse *vfuse_of(LowerCtx *c, const IterVar *f) {
    VFuse *vf = ptrmap_get(&c->vfuse, f);
    if (vf)
        return vf;
    Module *m = c->m;
    /* an outer fused loop's row map first (rank_extent reads it) */
    if (f->fa->rel == IV_FUSED && f->fa->variable && !vfuse_of(c, f->fa))
        return NULL;
    Levels L = {.m = m};
    bool ok = add_levels(&L, f);
    ptrmap_free(&L.val);
    if (!ok) {
        lower_sched_error(c, "fused loop %s has more than %d levels", f->name, RV_MAX_DIMS);
        return NULL;
    }
    vf = arena_alloc(m->arena, sizeof(VFuse));
    vf->f = f;
    vf->level = L.n - 1;
    const char *name = arena_printf(m->arena, "fuse_%s", f->name);
    rv_status r = ir_storage_init(m, &vf->lay, name, L.n, L.axes, NULL, RV_I64, BUF_LOCAL, &c->share);
    if (r != RV_OK) {
        c->st = r;
        return NULL;
    }
    for (int k = 0; k <= vf->level; k++)
        if (vf->lay.start[k] && !vf->lay.start[k]->vfuse_key) {
            vf->lay.start[k]->vfuse_key = f;
            vf->lay.start[k]->vfuse_level = k;
            vf->lay.start[k]->vfuse_hi = tuples_bound(m, &vf->lay, k);
        }
    Buffer *start = vf->lay.start[vf->level];
    if (!start) { /* the inner extent does not vary after all: the schedule said it does */
        lower_sched_error(c, "internal error: fused loop %s has no variable level", f->name);
        return NULL;
    }
    vf->row = ptrmap_get(&c->vfuse_rows, start);
    if (!vf->row) {
        Expr *size = tuples_bound(m, &vf->lay, vf->level);
        if (!size) {
            lower_sched_error(c,
                              "the extents fused into %s have no declared upper bound, so its "
                              "map cannot be sized; declare a value range for their ufuns",
                              f->name);
            return NULL;
        }
        vf->row = ir_buffer_new(m, arena_printf(m->arena, "%s_row", start->name), RV_I64, size,
                                BUF_AUX);
        vf->row->vfuse_key = f;
        vf->row->vfuse_level = -1;
        vf->row->vfuse_hi = vf->level > 0 ? tuples_bound(m, &vf->lay, vf->level - 1) : NULL;
        vf->row->rowmap_start = start;
        vf->row->rowmap_count = prefix_count(c, &vf->lay, vf->level);
        vf->row->rowmap_ext = rank_extent(c, vf, vf->row->rowmap_count, &vf->row->rowmap_r);
        ptrmap_put(&c->vfuse_rows, start, vf->row);
    }
    ptrmap_put(&c->vfuse, f, vf);
    vec_push(&c->vfuses, vf);
    return vf;
}

/* Its arrays are parameters of the current kernel. */
static void use(LowerCtx *c, const VFuse *vf) {
    for (int k = 0; k <= vf->level; k++)
        if (vf->lay.start[k])
            lower_use_aux(c, vf->lay.start[k]);
    lower_use_aux(c, vf->row);
}

Expr *lower_vfuse_extent(LowerCtx *c, const IterVar *f) {
    VFuse *vf = vfuse_of(c, f);
    if (!vf)
        return NULL;
    use(c, vf);
    Expr *n = prefix_count(c, &vf->lay, vf->level + 1);
    /* bulk padding: the padding rows after the last */
    return f->pad > 1 ? lower_ctx_simp(c, ir_binary(c->m, EX_MUL, lower_ceil_div(c->m, n, f->pad),
                                                    ir_int(c->m, f->pad)))
                      : n;
}

Expr *lower_vfuse_part(LowerCtx *c, const IterVar *f, Expr *fv, bool outer) {
    Module *m = c->m;
    VFuse *vf = vfuse_of(c, f);
    if (!vf)
        return NULL;
    use(c, vf);
    Expr *a = ir_load(m, vf->row, fv);
    if (f->pad > 1) {
        /* a bulk-padded loop's padding iterations are a row past the last
         * (the map holds none): a = count there, so b = f - start[count]
         * counts on from the last row, as the padded storage does */
        Expr *total = prefix_count(c, &vf->lay, vf->level + 1);
        Expr *last = ir_binary(m, EX_MAX, ir_binary(m, EX_SUB, total, ir_int(m, 1)), ir_int(m, 0));
        a = ir_binary(m, EX_ADD, ir_load(m, vf->row, ir_binary(m, EX_MIN, fv, last)),
                      ir_select(m, ir_binary(m, EX_GE, fv, total), ir_int(m, 1), ir_int(m, 0)));
    }
    if (outer)
        return a;
    return ir_binary(m, EX_SUB, fv, ir_load(m, vf->lay.start[vf->level], a));
}

Expr *lower_vfuse_row(LowerCtx *c, const IterVar *f, Expr *const *idx) {
    VFuse *vf = vfuse_of(c, f);
    if (!vf)
        return NULL;
    use(c, vf);
    return ir_storage_offset(c->m, &vf->lay, idx);
}

const Storage *lower_vfuse_layout(LowerCtx *c, const IterVar *f) {
    VFuse *vf = vfuse_of(c, f);
    return vf ? &vf->lay : NULL;
}

Expr *lower_vfuse_rows_bound(LowerCtx *c, const IterVar *f) {
    VFuse *vf = vfuse_of(c, f);
    return vf ? tuples_bound(c->m, &vf->lay, vf->level) : NULL;
}

bool lower_vfuse_same_rows(LowerCtx *c, const IterVar *f, const IterVar *g) {
    VFuse *a = vfuse_of(c, f), *b = vfuse_of(c, g);
    if (!a || !b || a->level != b->level)
        return false;
    for (int k = 0; k <= a->level; k++)
        if (a->lay.variable[k] != b->lay.variable[k] ||
            (a->lay.variable[k] ? a->lay.start[k] != b->lay.start[k]
                                : lower_ctx_simp(c, a->lay.ext[k]) != lower_ctx_simp(c, b->lay.ext[k])))
            return false;
    return true;
}

/* row[x] = r for every x of prefix r: for r < count: for j < start[r + 1]
 * - start[r]: row[start[r] + j] = r. */
static Stmt *row_prelude(LowerCtx *c, const VFuse *vf) {
    Module *m = c->m;
    Buffer *start = vf->lay.start[vf->level];
    Expr *count = prefix_count(c, &vf->lay, vf->level);
    Axis *r = lower_loop_var(m, "r", count);
    Expr *s0 = ir_load(m, start, r->var),
         *s1 = ir_load(m, start, ir_binary(m, EX_ADD, r->var, ir_int(m, 1)));
    Expr *len = ir_binary(m, EX_SUB, s1, s0);
    Axis *j = lower_loop_var(m, "j", len);
    Stmt *st = lower_store(m, vf->row, ir_binary(m, EX_ADD, s0, j->var), r->var);
    return lower_for(m, r, count, LOOP_SERIAL, lower_for(m, j, len, LOOP_SERIAL, st));
}

Stmt *lower_vfuse_prelude(LowerCtx *c) {
    Module *m = c->m;
    Vec(Stmt *) parts = {0};
    /* every row start first: a row map reads its own */
    for (int i = 0; i < c->vfuses.len; i++) {
        VFuse *vf = c->vfuses.data[i];
        if (ptrmap_has(&c->used_bufs, vf->row))
            vec_push(&parts, lower_storage_prelude(m, &vf->lay, &c->filled, lower_index_fn, c));
    }
    for (int i = 0; i < c->vfuses.len; i++) {
        VFuse *vf = c->vfuses.data[i];
        if (!ptrmap_has(&c->used_bufs, vf->row) || ptrmap_has(&c->filled, vf->row))
            continue;
        ptrmap_put(&c->filled, vf->row, vf->row);
        vec_push(&parts, row_prelude(c, vf));
    }
    Stmt *s = parts.len ? lower_seq(m, parts.len, parts.data) : NULL;
    vec_free(&parts);
    return s;
}

void lower_vfuse_free(LowerCtx *c) {
    ptrmap_free(&c->vfuse);
    ptrmap_free(&c->vfuse_rows);
    vec_free(&c->vfuses);
}

/* LoadRewrite: a fused loop's array of another lowering context as this
 * context's. */
static Expr *adopt_load(Module *m, void *ctx, Expr *load) {
    LowerCtx *c = ctx;
    const Buffer *b = load->u.buf;
    VFuse *vf = b->vfuse_key ? vfuse_of(c, b->vfuse_key) : NULL;
    if (!vf)
        return load;
    Buffer *mine = b->vfuse_level < 0 ? vf->row : vf->lay.start[b->vfuse_level];
    if (mine == b)
        return load;
    use(c, vf);
    return ir_load(m, mine, load->args[0]);
}

Expr *lower_vfuse_adopt(LowerCtx *c, Expr *e) {
    PtrMap memo = {0};
    Expr *r = lower_rewrite_loads(c->m, e, adopt_load, c, &memo);
    ptrmap_free(&memo);
    return r;
}
