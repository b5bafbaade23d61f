/*
 * cuda_sync.c — where a CUDA kernel's threads wait for each other.
 *
 * Two analyses place barriers in a kernel body before the CUDA back end
 * (cuda.c) prints it, both by one rule: a statement that reads memory
 * another thread wrote since the last barrier, or overwrites memory
 * another thread read or wrote since then, goes after a barrier, as late
 * as possible.
 *
 *  - Block barriers (__syncthreads(), cg_cuda_block_barriers): the memory
 *    is the block-shared locals; barriers sit inside the block loops and
 *    only where every thread of the block arrives.
 *  - Grid barriers (cg_cuda_grid_barriers): the memory is device memory
 *    (every non-local buffer), between the statements at the top of a
 *    recursion group's kernel and around its batch loop; cuda.c turns them
 *    into launch boundaries or rv_grid_sync().
 *
 * Both see memory through one walker (Tracker): the bit sets of the
 * tracked buffers a statement reads and writes.
 */
#include <string.h>

#include "codegen/codegen.h"

unsigned cg_cuda_dim_bit(LoopKind k) {
    return sched_kind_is_gpu(k) ? 1u << (k - LOOP_GPU_BLOCK_X) : 0;
}

/* ---- what statements read and write ---- */

/* Reads and writes as bit sets over the tracked buffers. */
typedef struct MemSet {
    uint64_t rd, wr;
} MemSet;

/* The buffers an analysis tracks, numbered as met: bit i is the i-th.
 * Past MEM_BITS - 1 buffers all share the last bit, which only adds
 * conflicts (more barriers, never fewer). */
#define MEM_BITS 64

typedef struct Tracker {
    const PtrMap *only; /* track these buffers (NULL: every non-local one) */
    PtrMap bit;         /* Buffer* -> 1 + its bit */
    const Buffer *buf[MEM_BITS];
    int n;
} Tracker;

static uint64_t track_bit(Tracker *t, const Buffer *b) {
    if (t->only ? !ptrmap_has(t->only, b) : b->scope == BUF_LOCAL)
        return 0;
    uintptr_t i = (uintptr_t)ptrmap_get(&t->bit, b);
    if (!i) {
        int at = t->n < MEM_BITS - 1 ? t->n++ : MEM_BITS - 1;
        t->buf[at] = t->buf[at] ? t->buf[at] : b;
        i = (uintptr_t)at + 1;
        ptrmap_put(&t->bit, b, (void *)i);
    }
    return 1ull << (i - 1);
}

/* The tracked buffers e loads, into a->rd. */
static void track_loads(Tracker *t, const Expr *e, MemSet *a) {
    if (!e)
        return;
    if (e->kind == EX_LOAD)
        a->rd |= track_bit(t, e->u.buf);
    for (int i = 0; i < e->n; i++)
        track_loads(t, e->args[i], a);
}

/* The tracked buffers s stores to and loads from, anywhere in it. */
static void track_stmt(Tracker *t, const Stmt *s, MemSet *a) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR:
        track_loads(t, s->u.loop.extent, a);
        track_stmt(t, s->u.loop.body, a);
        return;
    case ST_IF:
        track_loads(t, s->u.if_.cond, a);
        track_stmt(t, s->u.if_.then_s, a);
        track_stmt(t, s->u.if_.else_s, a);
        return;
    case ST_LET:
        track_loads(t, s->u.let.value, a);
        track_stmt(t, s->u.let.body, a);
        return;
    case ST_STORE:
        track_loads(t, s->u.store.index, a);
        track_loads(t, s->u.store.value, a);
        a->wr |= track_bit(t, s->u.store.buf);
        return;
    case ST_ALLOC:
        track_stmt(t, s->u.alloc.body, a);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            track_stmt(t, s->u.seq.stmts[i], a);
        return;
    default:
        return;
    }
}

/* Does an access conflict with what ran since the last barrier? */
static bool mem_conflict(MemSet a, MemSet since) {
    return (a.rd & since.wr) || (a.wr & (since.wr | since.rd));
}

/* s after barrier `barrier` when `need`. */
static Stmt *after(Module *m, Stmt *barrier, Stmt *s, bool need) {
    if (!need)
        return s;
    Stmt *two[2] = {barrier, s};
    return lower_seq(m, 2, two);
}

/* ---- barriers between the threads of a block ---- */

typedef struct Sync {
    Module *m;
    const Kernel *k;
    Tracker t;        /* the block-shared locals */
    Expr *const *dim; /* the launch's extents */
    bool strided;     /* bound loops stride over the launch (persistent) */
    PtrMap variant;   /* Axis* whose value differs between a block's threads */
    rv_status st;
} Sync;

static void find_variant(const Expr *e, void *ctx) {
    bool **hit = ctx;
    if (e->kind == EX_VAR && ptrmap_has((const PtrMap *)hit[1], e->u.axis))
        *hit[0] = true;
}

/* Does e differ between the threads of a block? */
static bool thread_variant(const Sync *y, const Expr *e) {
    bool hit = false;
    bool *ctx[2] = {&hit, (bool *)&y->variant};
    if (e && y->variant.len)
        ir_visit(e, find_variant, ctx);
    return hit;
}

/* A loop bound to a thread index whose guard every thread passes (its
 * extent is the launch's along that dimension): each thread runs its body
 * once, so a barrier inside it is one every thread reaches. */
static bool full_thread_loop(const Sync *y, const Stmt *s) {
    LoopKind k = s->u.loop.kind;
    int64_t e, d;
    return !y->strided && (cg_cuda_dim_bit(k) & CG_CUDA_THREAD_DIMS) &&
           ir_is_const_int(s->u.loop.extent, &e) && y->dim[k - LOOP_GPU_BLOCK_X] &&
           ir_is_const_int(y->dim[k - LOOP_GPU_BLOCK_X], &d) && e == d;
}

static Stmt *block_barrier_if(Sync *y, Stmt *s, bool need) {
    return after(y->m, lower_barrier(y->m), s, need);
}

/* s with __syncthreads() wherever a thread may read a shared local that
 * another wrote, or overwrite one that another read or wrote, since the
 * last barrier: *since says what was written and read since then on
 * entry, and is updated to the same at s's end. Each barrier goes as late
 * as it can: before the first statement that conflicts. A serial loop's
 * body starts with what its previous iteration leaves (the accesses of the
 * whole body, conservatively), so a tile filled and then read in each
 * iteration gets a barrier before the fill too (the last iteration's
 * readers must be done). A loop bound to a block index is one iteration
 * per block, as is a loop of extent 1. Barriers go only where every
 * thread of the block arrives: outside the loops bound to thread indices
 * (the code around them, conditions and extents included, depends on
 * block indices and sizes only), or inside a thread loop as long as the
 * block. Elsewhere inside a thread loop, a shared local both written and
 * read would need a barrier that not every thread reaches: refused. */
static Stmt *sync_in(Sync *y, Stmt *s, MemSet *since) {
    if (!s || y->st != RV_OK)
        return s;
    Module *m = y->m;
    MemSet a = {0};
    switch (s->kind) {
    case ST_SEQ: {
        int n = s->u.seq.n;
        Stmt **v = base_xmalloc(sizeof *v * (size_t)n);
        bool changed = false;
        for (int i = 0; i < n; i++) {
            v[i] = sync_in(y, s->u.seq.stmts[i], since);
            changed |= v[i] != s->u.seq.stmts[i];
        }
        Stmt *res = changed ? lower_seq(m, n, v) : s;
        base_free(v);
        return res;
    }
    case ST_LET: {
        if (thread_variant(y, s->u.let.value))
            ptrmap_put(&y->variant, s->u.let.var, (void *)1);
        track_loads(&y->t, s->u.let.value, &a);
        bool need = mem_conflict(a, *since);
        if (need)
            *since = (MemSet){0};
        since->rd |= a.rd;
        Stmt *b = sync_in(y, s->u.let.body, since);
        Stmt *x = b == s->u.let.body ? s : lower_let(m, s->u.let.var, s->u.let.value, b);
        return block_barrier_if(y, x, need);
    }
    case ST_ALLOC: {
        Stmt *b = sync_in(y, s->u.alloc.body, since);
        return b == s->u.alloc.body ? s : lower_alloc(m, s->u.alloc.buf, b);
    }
    case ST_IF: {
        if (thread_variant(y, s->u.if_.cond))
            break; /* not every thread takes the same branch */
        track_loads(&y->t, s->u.if_.cond, &a);
        bool need = mem_conflict(a, *since);
        if (need)
            *since = (MemSet){0};
        since->rd |= a.rd;
        MemSet ts = *since, es = *since;
        Stmt *t = sync_in(y, s->u.if_.then_s, &ts);
        Stmt *e = sync_in(y, s->u.if_.else_s, &es);
        *since = (MemSet){ts.rd | es.rd, ts.wr | es.wr};
        Stmt *x =
            t == s->u.if_.then_s && e == s->u.if_.else_s ? s : lower_if(m, s->u.if_.cond, t, e);
        return block_barrier_if(y, x, need);
    }
    case ST_FOR: {
        LoopKind k = s->u.loop.kind;
        bool full = full_thread_loop(y, s);
        if (((cg_cuda_dim_bit(k) & CG_CUDA_THREAD_DIMS) && !full) ||
            thread_variant(y, s->u.loop.extent))
            break;
        if (full)
            ptrmap_put(&y->variant, s->u.loop.var, (void *)1);
        /* a barrier before the loop where what it does conflicts with
         * what ran before it; inside, where an iteration reads what another
         * wrote or writes what another read (a tile filled and then read in
         * each step: the last step's readers must be done). Iterations
         * that only write (a fill of distinct elements) need none between
         * them. A loop bound to a block index, a full thread loop and a
         * loop of extent 1 run one iteration per thread. */
        track_loads(&y->t, s->u.loop.extent, &a);
        MemSet body = {0};
        track_stmt(&y->t, s->u.loop.body, &body);
        bool need = mem_conflict((MemSet){a.rd | body.rd, body.wr}, *since);
        if (need)
            *since = (MemSet){0};
        since->rd |= a.rd;
        MemSet before = *since; /* what ran before it */
        int64_t one;
        bool once = (cg_cuda_dim_bit(k) & CG_CUDA_BLOCK_DIMS) || full ||
                    (ir_is_const_int(s->u.loop.extent, &one) && one == 1);
        if (once) {
            /* the body continues the sequence around it */
        } else if (body.wr & body.rd) {
            *since = body; /* an earlier iteration's, carried */
        } else {
            *since = (MemSet){0}; /* the barrier before it, if any, covers the rest */
        }
        Stmt *b = sync_in(y, s->u.loop.body, since);
        since->rd |= before.rd | body.rd;
        since->wr |= before.wr | body.wr;
        Stmt *x =
            b == s->u.loop.body ? s : lower_for_like(m, s, s->u.loop.var, s->u.loop.extent, b);
        return block_barrier_if(y, x, need);
    }
    default:
        break;
    }
    /* a leaf for the barriers: a store, a loop over some of a block's
     * threads, code that not every thread runs alike */
    track_stmt(&y->t, s, &a);
    uint64_t both = a.wr & a.rd;
    if (s->kind != ST_STORE && both) {
        int i = 0;
        while (!(both & (1ull << i)))
            i++;
        char *what = s->kind == ST_FOR ? NULL : ir_expr_str(s->u.if_.cond);
        y->st = base_error(RV_ERR_UNSUPPORTED,
                           "kernel %s: %s%s%s both writes and reads the block-shared buffer "
                           "%s, which would need a barrier that not every thread reaches; "
                           "write and read it in separate nests (a reduction: its loop inside "
                           "the thread loops), in thread loops as long as the block's",
                           y->k->name, what ? "the code under `if " : "loop ",
                           what ? what : s->u.loop.var->name, what ? "`" : "", y->t.buf[i]->name);
        base_free(what);
        return s;
    }
    bool need = mem_conflict(a, *since);
    if (need)
        *since = (MemSet){0};
    since->wr |= a.wr;
    since->rd |= a.rd;
    return block_barrier_if(y, s, need);
}

rv_status cg_cuda_block_barriers(const Kernel *k, Stmt *body, const PtrMap *shared,
                                 Expr *const dim[6], bool strided, Stmt **out) {
    *out = body;
    if (shared->len > MEM_BITS - 1)
        return base_error(RV_ERR_UNSUPPORTED, "kernel %s: more than %d block-shared buffers",
                          k->name, MEM_BITS - 1);
    if (!shared->len)
        return RV_OK; /* nothing to wait for */
    Sync y = {.m = k->m, .k = k, .t = {.only = shared}, .dim = dim, .strided = strided};
    MemSet since = {0};
    Stmt *r = sync_in(&y, body, &since);
    ptrmap_free(&y.variant);
    ptrmap_free(&y.t.bit);
    if (y.st == RV_OK)
        *out = r;
    return y.st;
}

/* ---- barriers between the blocks of a launch (recursion groups) ---- */

/* Barrier in front of s when *since (what ran since the last barrier)
 * conflicts with a (what s does); *since then holds what ran after it. */
static Stmt *grid_barrier_if(Module *m, MemSet *since, MemSet a, Stmt *s) {
    bool need = mem_conflict(a, *since);
    if (need)
        *since = (MemSet){0};
    since->rd |= a.rd;
    since->wr |= a.wr;
    return after(m, need ? lower_grid_barrier(m) : NULL, s, need);
}

static Stmt *with_barriers(Module *m, Tracker *t, Stmt *s, MemSet *since) {
    MemSet a = {0};
    switch (s->kind) {
    case ST_SEQ: {
        Vec(Stmt *) v = {0};
        for (int i = 0; i < s->u.seq.n; i++)
            vec_push(&v, with_barriers(m, t, s->u.seq.stmts[i], since));
        Stmt *r = lower_seq(m, v.len, v.data);
        vec_free(&v);
        return r;
    }
    case ST_LET: {
        track_loads(t, s->u.let.value, &a);
        bool need = mem_conflict(a, *since);
        if (need)
            *since = (MemSet){0};
        since->rd |= a.rd;
        Stmt *r =
            lower_let(m, s->u.let.var, s->u.let.value, with_barriers(m, t, s->u.let.body, since));
        return after(m, need ? lower_grid_barrier(m) : NULL, r, need);
    }
    case ST_ALLOC:
        return lower_alloc(m, s->u.alloc.buf, with_barriers(m, t, s->u.alloc.body, since));
    case ST_FOR:
        if (s->u.loop.gpu_batches) {
            /* a batch reads the ones before it: a barrier after each, and
             * one before the loop (it may run no batch: nothing after it
             * then races with what ran before it) */
            bool before = since->rd || since->wr;
            MemSet inner = {0};
            track_loads(t, s->u.loop.extent, &inner);
            Stmt *each[2] = {with_barriers(m, t, s->u.loop.body, &inner), lower_grid_barrier(m)};
            Stmt *loop =
                lower_for_like(m, s, s->u.loop.var, s->u.loop.extent, lower_seq(m, 2, each));
            *since = (MemSet){0};
            return after(m, before ? lower_grid_barrier(m) : NULL, loop, before);
        }
        break;
    default:
        break;
    }
    track_stmt(t, s, &a);
    return grid_barrier_if(m, since, a, s);
}

Stmt *cg_cuda_grid_barriers(Module *m, Stmt *body) {
    Tracker t = {0};
    MemSet since = {0};
    Stmt *r = with_barriers(m, &t, body, &since);
    ptrmap_free(&t.bit);
    return r;
}
