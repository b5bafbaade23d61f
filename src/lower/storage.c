/*
 * storage.c — storage lowering: where each element of a (possibly ragged)
 * tensor or UF array lives in its flat buffer.
 *
 * The order is the canonical one of src/ir/layout.h, extended with storage
 * padding: level k of a layout is *constant* when its extent mentions no
 * axis, and *variable* when it mentions an outer one (`l < len[b]`). The
 * rank of an index prefix is built level by level:
 *
 *     rank_0 = 0
 *     rank_(k+1) = rank_k * E_k + i_k          (constant level, E_k padded)
 *     rank_(k+1) = start_k[rank_k] + i_k       (variable level)
 *     offset = rank_n
 *
 * where start_k is a row-start array (CSR-style prefix sums of the padded
 * extents of level k over all storage prefixes of length k). Those arrays
 * are the AUX buffers CoRa's prelude computes: this file also emits the
 * prelude loop nest that fills them from the UF arrays. Without padding the
 * storage order equals the canonical order, so arrays pass to and from
 * users unchanged.
 *
 * AUX buffers are allocated before the prelude runs, so their sizes must be
 * expressions over sizes alone: when a variable level follows another, its
 * prefix count is bounded by the product of the outer levels' largest
 * extents (from declared UF ranges), and a layout whose extents have no
 * such bound is rejected as unsupported.
 */
#include <string.h>

#include "lower/lower.h"

/* roundup(e, p) = (e + p - 1) / p * p, folded when p == 1. */
static Expr *round_up(Module *m, Expr *e, int p) {
    if (p <= 1)
        return e;
    Expr *q = ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, e, ir_int(m, p - 1)), ir_int(m, p));
    return ir_binary(m, EX_MUL, q, ir_int(m, p));
}

/* A sizes-only upper bound of a level's padded extent (for AUX sizes). */
static Expr *extent_upper_bound(Module *m, Expr *ext, int pad, bool variable) {
    if (!variable)
        return round_up(m, ext, pad);
    int64_t lo, hi;
    switch (ir_int_range(ext, &lo, &hi)) {
    case IR_RANGE_EMPTY: /* under no prefix at all: the level holds nothing */
        return ir_int(m, 0);
    case IR_RANGE_KNOWN:
        return round_up(m, ir_int(m, hi < 0 ? 0 : hi), pad);
    default:
        return NULL;
    }
}

static bool mentions_axis(const Expr *e, Axis *const *axes, int n) {
    for (int i = 0; i < n; i++)
        if (ir_uses_axis(e, axes[i]))
            return true;
    return false;
}

rv_status lower_storage_init(Module *m, Storage *st, const char *name, int ndim,
                             Axis *const *axes, const int *pad, rv_dtype dtype, BufScope scope) {
    memset(st, 0, sizeof *st);
    st->ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        st->axes[k] = axes[k];
        st->pad[k] = pad ? pad[k] : 1;
        st->variable[k] = mentions_axis(axes[k]->extent, axes, k);
    }
    /* prefix counts: exact where all outer levels are constant, otherwise
     * an upper bound (for allocation) */
    Expr *count = ir_int(m, 1), *bound = ir_int(m, 1);
    bool exact = true;
    for (int k = 0; k < ndim; k++) {
        Expr *ub = extent_upper_bound(m, axes[k]->extent, st->pad[k], st->variable[k]);
        if (!ub)
            return base_error(RV_ERR_UNSUPPORTED,
                              "%s: the extent of dimension '%s' has no constant upper bound, so "
                              "its row-start array cannot be sized; declare a value range for the "
                              "ufuns it uses",
                              name, axes[k]->name);
        if (st->variable[k]) {
            Expr *size = ir_binary(m, EX_ADD, exact ? count : bound, ir_int(m, 1));
            char *bn = arena_printf(m->arena, "%s_start%d", name, k);
            st->start[k] = ir_buffer_new(m, bn, RV_I64, size, BUF_AUX);
            /* the count after this level is the last prefix sum */
            count = ir_load(m, st->start[k], count);
            exact = false;
        } else {
            count = ir_binary(m, EX_MUL, count, round_up(m, axes[k]->extent, st->pad[k]));
        }
        bound = ir_binary(m, EX_MUL, bound, ub);
    }
    st->numel = count;
    st->buf = ir_buffer_new(m, name, dtype, count, scope);
    return RV_OK;
}

Expr *lower_storage_offset(Module *m, const Storage *st, Expr *const *idx) {
    Expr *rank = ir_int(m, 0);
    for (int k = 0; k < st->ndim; k++) {
        if (st->variable[k]) {
            rank = ir_binary(m, EX_ADD, ir_load(m, st->start[k], rank), idx[k]);
        } else {
            /* constant levels mention no axis: no substitution needed */
            Expr *ext = round_up(m, st->axes[k]->extent, st->pad[k]);
            rank = ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, rank, ext), idx[k]);
        }
    }
    return rank;
}

/* The prelude for one variable level k: iterate over every storage prefix
 * of length k in lexicographic order and accumulate padded extents. */
static Stmt *prelude_level(Module *m, const Storage *st, int k, LowerExprFn lower, void *ctx) {
    Buffer *start = st->start[k];
    Buffer *r = ir_buffer_new(m, arena_printf(m->arena, "%s_r", start->name), RV_I64, ir_int(m, 1),
                              BUF_LOCAL);
    Expr *zero = ir_int(m, 0);
    Expr *rv = ir_load(m, r, zero);
    /* loop variables for the outer levels, substituted into extents */
    Axis *vars[RV_MAX_DIMS];
    PtrMap sub = {0};
    Expr *exts[RV_MAX_DIMS];
    for (int j = 0; j < k; j++) {
        Expr *ext = lower(ctx, ir_substitute(m, st->axes[j]->extent, &sub));
        exts[j] = round_up(m, ext, st->pad[j]);
        vars[j] = lower_loop_var(m, st->axes[j]->name, exts[j]);
        ptrmap_put(&sub, st->axes[j], vars[j]->var);
    }
    Expr *term = round_up(m, lower(ctx, ir_substitute(m, st->axes[k]->extent, &sub)), st->pad[k]);
    ptrmap_free(&sub);
    Stmt *steps[2] = {
        lower_store(m, start, ir_binary(m, EX_ADD, rv, ir_int(m, 1)),
                    ir_binary(m, EX_ADD, ir_load(m, start, rv), term)),
        lower_store(m, r, zero, ir_binary(m, EX_ADD, rv, ir_int(m, 1))),
    };
    Stmt *body = lower_seq(m, 2, steps);
    for (int j = k - 1; j >= 0; j--)
        body = lower_for(m, vars[j], exts[j], LOOP_SERIAL, body);
    Stmt *init[3] = {lower_store(m, start, zero, zero), lower_store(m, r, zero, zero), body};
    return lower_alloc(m, r, lower_seq(m, 3, init));
}

Stmt *lower_storage_prelude(Module *m, const Storage *st, LowerExprFn lower, void *ctx) {
    Stmt *parts[RV_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < st->ndim; k++)
        if (st->variable[k])
            parts[n++] = prelude_level(m, st, k, lower, ctx);
    return n ? lower_seq(m, n, parts) : NULL;
}
