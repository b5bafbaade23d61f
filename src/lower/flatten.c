/*
 * flatten.c — the flatten pass: multi-dimensional accesses into loads at
 * flat storage offsets (storage lowering).
 *
 * Requires: a kernel body whose reads of tensor storage and UF arrays in
 * values are multi-dimensional accesses `X{i, j}` (expr.c: READ and
 * UFCALL nodes whose indices are loop IR), the tensor or UF being a
 * parameter of the kernel with its storage order (Buffer.storage); an
 * access that a run-time check guards has every index `select(ok, i, 0)`
 * with the same ok (rtcheck.c).
 * Guarantees: no multi-dimensional access remains; each is a load of the
 * storage's buffer at ir_storage_offset (ir/layout.h: row-major over the
 * padded extents of constant levels, the AUX row starts of ragged ones),
 * a guarded one at `select(ok, offset, 0)` (the origin is offset 0 in
 * every storage order), a UF's widened to i64. Same values.
 */
#include "lower/lower.h"

/* The load of element idx of a storage, at offset `off` (ir_storage_offset)
 * or at the origin where guard (non-NULL) fails; a UF's value widened to
 * the i64 of index arithmetic. */
Expr *lower_access_load(Module *m, const Storage *st, Expr *guard, Expr *off) {
    Expr *r = ir_load(m, st->buf, guard ? ir_select(m, guard, off, ir_int(m, 0)) : off);
    return st->buf->uf ? ir_cast(m, RV_I64, r) : r;
}

void lower_flat_init(FlatCtx *F, const Kernel *k) {
    *F = (FlatCtx){.m = k->m};
    for (int i = 0; i < k->nparams; i++) {
        const Buffer *b = k->params[i].buf;
        if (b && b->storage && (b->tensor || b->uf))
            ptrmap_put(&F->storage, b->tensor ? (void *)b->tensor : (void *)b->uf,
                       (void *)b->storage);
    }
}

void lower_flat_free(FlatCtx *F) {
    ptrmap_free(&F->storage);
}

/* The guard shared by every index of an access (select(ok, i, 0) for each
 * i), and the unguarded indices; NULL when there is none. */
static Expr *common_guard(const Expr *e, Expr **idx) {
    Expr *g = NULL;
    for (int i = 0; i < e->n; i++) {
        const Expr *a = e->args[i];
        int64_t z;
        if (a->kind != EX_SELECT || !ir_is_const_int(a->args[2], &z) || z != 0 ||
            (g && a->args[0] != g))
            g = NULL, i = e->n;
        else
            g = a->args[0];
    }
    for (int i = 0; i < e->n; i++)
        idx[i] = g ? e->args[i]->args[1] : e->args[i];
    return g;
}

Expr *lower_flat_expr(FlatCtx *F, Expr *e, PtrMap *memo) {
    Expr *done = ptrmap_get(memo, e);
    if (done)
        return done;
    Expr *args[RV_MAX_DIMS];
    RV_ASSERT(e->n <= RV_MAX_DIMS);
    for (int i = 0; i < e->n; i++)
        if (!(args[i] = lower_flat_expr(F, e->args[i], memo))) /* indices may read UFs */
            return NULL;
    Expr *r = ir_rebuild(F->m, e, args);
    if (!r)
        return NULL; /* an access the IR rejects (constant indices out of range) */
    if (r->kind == EX_READ || r->kind == EX_UFCALL) {
        const Storage *st = ptrmap_get(&F->storage, r->kind == EX_READ ? (void *)r->u.tensor
                                                                         : (void *)r->u.uf);
        if (!st)
            return NULL;
        Expr *idx[RV_MAX_DIMS];
        Expr *guard = common_guard(r, idx);
        r = lower_access_load(F->m, st, guard, ir_storage_offset(F->m, st, idx));
    }
    ptrmap_put(memo, e, r);
    return r;
}

typedef struct Flatten {
    FlatCtx F;
    const char *missing;
} Flatten;

static Expr *flatten_fe(StmtMutator *mu, Expr *e) {
    Flatten *fl = mu->ctx;
    PtrMap memo = {0};
    Expr *r = lower_flat_expr(&fl->F, e, &memo);
    ptrmap_free(&memo);
    if (!r && !fl->missing)
        fl->missing = "a tensor or UF";
    return r ? r : e;
}

rv_status lower_flatten(Kernel *k) {
    Flatten fl;
    lower_flat_init(&fl.F, k);
    fl.missing = NULL;
    StmtMutator mu = {flatten_fe, NULL, k->m, &fl};
    Stmt *body = lower_mutate(&mu, k->body);
    lower_flat_free(&fl.F);
    if (fl.missing)
        return base_error(RV_ERR_UNSUPPORTED,
                          "internal error in pass flatten: kernel %s: an access of a tensor or UF "
                          "whose storage is not a parameter",
                          k->name);
    k->body = body;
    k->flat = true;
    return RV_OK;
}
