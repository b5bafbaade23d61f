/*
 * scope.c — a scope of IR on a module: what one compilation builds (its
 * schedule's stages, loop IR, buffers, kernels, the expressions of all of
 * them) is dropped when the compilation ends.
 *
 * Everything in a module is allocated from m->arena and every expression
 * is entered in m's hash-cons table. Between ir_scope_begin and
 * ir_scope_end, m->arena is the scope's own arena, so every allocation
 * made through the module (by src/sched, src/lower, codegen; no allocation
 * site needs to know) lands there; ir_scope_end frees that arena and takes
 * the scope's expressions out of the table. Expression, axis and buffer ids
 * are handed out in creation order, so "made in the scope" is "id at least
 * the counter's value at ir_scope_begin", and the counters go back to those
 * values: a module compiled a thousand times has the ids, table and arena
 * it had before the first.
 *
 * Nodes made before the scope never point into it (expressions are
 * immutable and built bottom-up; module objects are not changed by
 * compilation). What a compilation's result needs after it ends is copied
 * out with IrKeep into an arena of the caller's: expressions, buffers and
 * storage orders made in the scope are copied (without hash-consing; they
 * are only evaluated), those made before are shared.
 */
#include <string.h>

#include "ir/ir.h"
#include "ir/layout.h"

void ir_scope_begin(Module *m, IrScope *s) {
    *s = (IrScope){.m = m,
                   .arena = arena_new(),
                   .outer = m->arena,
                   .n_exprs = m->n_exprs,
                   .n_axes = m->n_axes,
                   .n_buffers = m->n_buffers,
                   .n_dims = m->dims.len};
    m->arena = s->arena;
}

/* The table without the scope's nodes, rehashed: a node's probe sequence
 * may pass through slots of later nodes (the table may have grown inside
 * the scope), so they cannot simply be cleared. */
static void table_drop_scope(Module *m, int first_id) {
    Expr **old = m->table;
    int cap = m->table_cap;
    m->table = base_xcalloc((size_t)cap, sizeof(Expr *));
    m->table_len = 0;
    for (int i = 0; i < cap; i++) {
        Expr *e = old[i];
        if (!e || e->id >= first_id)
            continue;
        int j = (int)(e->hash & (uint32_t)(cap - 1));
        while (m->table[j])
            j = (j + 1) & (cap - 1);
        m->table[j] = e;
        m->table_len++;
    }
    base_free(old);
}

void ir_scope_end(IrScope *s) {
    Module *m = s->m;
    RV_ASSERT(m->arena == s->arena); /* scopes end in the reverse order they began */
    /* compilation declares nothing: a new dim would be in the freed arena */
    RV_ASSERT(m->dims.len == s->n_dims);
    table_drop_scope(m, s->n_exprs);
    m->n_exprs = s->n_exprs;
    m->n_axes = s->n_axes;
    m->n_buffers = s->n_buffers;
    m->arena = s->outer;
    arena_free(s->arena);
    s->arena = NULL;
}

/* ---- keeping results ---- */

void ir_keep_init(IrKeep *k, const IrScope *s, Arena *arena) {
    *k = (IrKeep){.s = s, .arena = arena};
}

void ir_keep_free(IrKeep *k) {
    ptrmap_free(&k->copies);
}

/* The copy of obj (bytes long), made on the first request; *fresh: made
 * now, its pointers still the original's. The copy is registered before
 * its pointers are followed, so cycles (an axis and its variable) end. */
static void *copy_of(IrKeep *k, const void *obj, size_t bytes, bool *fresh) {
    void *c = ptrmap_get(&k->copies, obj);
    *fresh = !c;
    if (!c) {
        c = arena_memdup(k->arena, obj, bytes);
        ptrmap_put(&k->copies, obj, c);
    }
    return c;
}

static Axis *keep_axis(IrKeep *k, Axis *a);

Expr *ir_keep_expr(IrKeep *k, Expr *e) {
    if (!e || e->id < k->s->n_exprs)
        return e;
    /* a reduction's axes are bound inside it; kept expressions are index
     * arithmetic (sizes, launch extents) and never hold one */
    RV_ASSERT(e->kind != EX_REDUCE);
    bool fresh;
    Expr *c = copy_of(k, e, sizeof(Expr) + (size_t)e->n * sizeof(Expr *), &fresh);
    if (!fresh)
        return c;
    for (int i = 0; i < e->n; i++)
        c->args[i] = ir_keep_expr(k, e->args[i]);
    if (e->kind == EX_LOAD)
        c->u.buf = ir_keep_buffer(k, e->u.buf);
    else if (e->kind == EX_VAR)
        c->u.axis = keep_axis(k, e->u.axis);
    return c;
}

static Axis *keep_axis(IrKeep *k, Axis *a) {
    if (!a || a->id < k->s->n_axes)
        return a;
    bool fresh;
    Axis *c = copy_of(k, a, sizeof *a, &fresh);
    if (fresh) {
        c->extent = ir_keep_expr(k, a->extent);
        c->var = ir_keep_expr(k, a->var);
    }
    return c;
}

static const Storage *keep_storage(IrKeep *k, const Storage *st) {
    if (!st || st->buf->id < k->s->n_buffers)
        return st;
    bool fresh;
    Storage *c = copy_of(k, st, sizeof *st, &fresh);
    if (!fresh)
        return c;
    c->buf = ir_keep_buffer(k, st->buf);
    for (int d = 0; d < st->ndim; d++) {
        c->axes[d] = keep_axis(k, st->axes[d]);
        c->start[d] = ir_keep_buffer(k, st->start[d]);
        c->ext[d] = ir_keep_expr(k, st->ext[d]);
    }
    c->numel = ir_keep_expr(k, st->numel);
    c->bulk_rows = st->bulk_rows ? ir_keep_expr(k, st->bulk_rows) : NULL;
    return c;
}

Buffer *ir_keep_buffer(IrKeep *k, Buffer *b) {
    if (!b || b->id < k->s->n_buffers)
        return b;
    /* a tensor's or UF's buffer names a module object; stage tensors of
     * the schedule (cache copies) never reach the host */
    RV_ASSERT(!b->tensor || (b->tensor->id < b->tensor->module->tensors.len &&
                             b->tensor->module->tensors.data[b->tensor->id] == b->tensor));
    bool fresh;
    Buffer *c = copy_of(k, b, sizeof *b, &fresh);
    if (fresh) {
        c->size = ir_keep_expr(k, b->size);
        c->storage = keep_storage(k, b->storage);
        /* a row map's facts serve the lowering's proofs only: not kept */
        c->rowmap_start = NULL;
        c->rowmap_count = c->rowmap_ext = NULL;
        c->rowmap_r = NULL;
        c->vfuse_key = NULL;
        c->vfuse_hi = NULL;
        c->pack_fill = ir_keep_buffer(k, b->pack_fill); /* the runtime sets it */
        c->pack_key = b->pack_key ? arena_strdup(k->arena, b->pack_key) : NULL;
    }
    return c;
}
