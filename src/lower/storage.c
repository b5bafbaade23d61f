/*
 * storage.c — the prelude of a storage layout: the loop nest that fills
 * its row-start AUX arrays from the UF arrays.
 *
 * The storage order itself (row-start arrays and their sizes, padded
 * extents, offsets, element counts) is src/ir/layout.h's, symbolic, and
 * shared with the runtime and `ravel build`. A row-start array start_k
 * holds the prefix sums of level k's padded extents over every storage
 * prefix of length k in lexicographic order; the prelude walks those
 * prefixes with one loop per outer level (over their padded extents) and
 * accumulates ir_storage_extent(k) at each.
 *
 * Storages of one raggedness pattern share their row-start arrays
 * (ir/layout.h, StorageShare); a lowering fills each one in the prelude of
 * the first kernel that uses it, and the host plan runs every prelude
 * before any kernel, so each is computed once per call.
 */
#include <string.h>

#include "lower/lower.h"

/* The prelude for one variable level k: iterate over every storage prefix
 * of length k in lexicographic order and accumulate padded extents. */
static Stmt *prelude_level(Module *m, const Storage *st, int k, LowerExprFn lower, void *ctx) {
    Buffer *start = st->start[k];
    Buffer *r = ir_buffer_new(m, arena_printf(m->arena, "%s_r", start->name), RV_I64, ir_int(m, 1),
                              BUF_LOCAL);
    Expr *zero = ir_int(m, 0);
    Expr *rv = ir_load(m, r, zero);
    /* loop variables for the outer levels */
    Axis *vars[RV_MAX_DIMS];
    Expr *idx[RV_MAX_DIMS], *exts[RV_MAX_DIMS];
    for (int j = 0; j < k; j++) {
        exts[j] = lower(ctx, ir_storage_extent(m, st, j, idx));
        vars[j] = lower_loop_var(m, st->axes[j]->name, exts[j]);
        idx[j] = vars[j]->var;
    }
    Expr *term = lower(ctx, ir_storage_extent(m, st, k, idx));
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

/* Records the AUX buffer of every store (StmtMutator.fs). */
static Stmt *note_aux_store(StmtMutator *mu, Stmt *s) {
    Vec(Buffer *) *fills = mu->ctx;
    Buffer *b = s->kind == ST_STORE ? s->u.store.buf : NULL;
    bool seen = false;
    for (int i = 0; b && i < fills->len; i++)
        seen = seen || fills->data[i] == b;
    if (b && b->scope == BUF_AUX && !seen)
        vec_push(fills, b);
    return s;
}

void lower_prelude_fills(Module *m, Kernel *k) {
    Vec(Buffer *) fills = {0};
    StmtMutator mu = {.fs = note_aux_store, .m = m, .ctx = &fills};
    lower_mutate(&mu, k->prelude);
    k->nfills = fills.len;
    k->fills =
        fills.len ? arena_memdup(m->arena, fills.data, sizeof(Buffer *) * (size_t)fills.len) : NULL;
    vec_free(&fills);
}

Stmt *lower_storage_prelude(Module *m, const Storage *st, PtrMap *filled, LowerExprFn lower,
                            void *ctx) {
    Stmt *parts[RV_MAX_DIMS];
    int n = 0;
    for (int k = 0; k < st->ndim; k++) {
        if (!st->variable[k] || ptrmap_has(filled, st->start[k]))
            continue;
        ptrmap_put(filled, st->start[k], st->start[k]);
        parts[n++] = prelude_level(m, st, k, lower, ctx);
    }
    return n ? lower_seq(m, n, parts) : NULL;
}
