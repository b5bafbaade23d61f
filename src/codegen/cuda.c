/*
 * cuda.c — loop IR to CUDA C, with a launch description.
 *
 * A kernel whose loops are bound to GPU indices (LOOP_GPU_BLOCK_* and
 * LOOP_GPU_THREAD_*, from the schedule's bind primitives) becomes one
 * `extern "C" __global__` function. Each bound loop turns into its index,
 *
 *     const int64_t bx = blockIdx.x;
 *     if (bx < (N + 127) / 128) { ... }
 *
 * and the launch covers, per grid and block dimension, the largest extent
 * of the loops bound to it (an extent that varies, a clipped tile or a
 * ragged row, by its upper bound over the sizes and ufun ranges), so the
 * guard is what keeps a thread of a shorter loop idle. Loops that are not bound (serial, and parallel or
 * vector ones, which mean nothing inside a thread yet) run serially in
 * each thread; unrolled loops with a constant extent carry `#pragma
 * unroll`. One-element locals are scalars, small constant-size locals are
 * per-thread arrays, barriers are __syncthreads().
 *
 * Arguments are passed by value in parameter order: each size as an
 * int64_t, each buffer as a device pointer (const when the kernel never
 * stores to it). The prelude of a ragged kernel stays host code (the C
 * back end emits it); its AUX arrays are copied to the device with the
 * other buffers.
 *
 * The source needs no headers, as NVRTC provides none by default: the
 * integer types are typedef'd, math calls are CUDA's device functions
 * (expf, erff, ...), and infinities and NaN are bit patterns.
 *
 * WHO RUNS WHAT. Every thread of the launch runs the whole body; a bound
 * loop narrows it to the threads whose index is in range. A statement
 * outside every loop bound to some launch dimension is therefore run by
 * all threads along it: harmless for loads and for per-thread locals, but
 * a store to memory the threads share would be repeated (and an update
 * like `Y[i] = Y[i] + x` repeated is wrong): the copy-out of a tile that
 * a block computed in shared memory, or the tail copy of a partitioned
 * split of an unbound loop. Such stores are wrapped here in one-iteration
 * loops bound to the missing dimensions (`if (threadIdx.x < 1)`), so
 * exactly one thread along each runs them; the launch then covers at least
 * one block, even when no full tile exists. (A split with a bound part is
 * never partitioned: lowering keeps its guard.)
 *
 * SHARED MEMORY. A local allocated inside the block loops and outside every
 * thread loop, and written inside a thread loop, is filled by the block's
 * threads together: it is declared `__shared__`, and sync_in puts the
 * barriers between its writers and readers (docs/schedules.md, "Shared
 * memory on the GPU"). A local allocated outside a block loop and written
 * inside it would need memory shared across blocks, and is refused.
 *
 * The runtime (src/runtime/program.c, RV_TARGET_CUDA) compiles the source
 * with NVRTC, evaluates the launch extents from the sizes and launches the
 * kernel through the driver API (src/jit/cuda.c).
 */
#include <string.h>

#include "codegen/codegen.h"

/* Checks what the CUDA back end supports and collects the launch extents
 * (per GPU dimension, the maximum over the loops bound to it). */
typedef struct Check {
    Module *m;
    const Kernel *k;
    Expr *dim[6];      /* grid x, y, z, block x, y, z */
    PtrMap alloc_dims; /* local Buffer* -> 1 + the GPU dimensions bound around its allocation */
    PtrMap shared;     /* locals a block's threads share (see the file comment) */
    int64_t shared_bytes;
    rv_status st;
} Check;

#define BLOCK_DIMS 07u  /* gpu_bit of blockIdx.x, .y, .z */
#define THREAD_DIMS 070u /* gpu_bit of threadIdx.x, .y, .z */
/* Static shared memory a block may declare. */
#define SHARED_LIMIT (48 * 1024)

/* The bit of a GPU-bound loop kind's dimension (0 for other kinds). */
static unsigned gpu_bit(LoopKind k) {
    return sched_kind_is_gpu(k) ? 1u << (k - LOOP_GPU_BLOCK_X) : 0;
}

static bool sizes_only(const Expr *x) {
    if (x->kind != EX_CONST_INT && x->kind != EX_SIZE && x->n == 0)
        return false;
    if (x->kind == EX_LOAD || x->kind == EX_UFCALL || x->kind == EX_READ)
        return false;
    for (int i = 0; i < x->n; i++)
        if (!sizes_only(x->args[i]))
            return false;
    return true;
}

/* Whether x is one of the operands of the chain of maxima `chain`. */
static bool in_max(const Expr *chain, const Expr *x) {
    return chain == x ||
           (chain->kind == EX_MAX && (in_max(chain->args[0], x) || in_max(chain->args[1], x)));
}

/* `bound`: the GPU dimensions bound by the loops around s. */
static void check_stmt(Check *c, const Stmt *s, unsigned bound) {
    if (!s || c->st != RV_OK)
        return;
    switch (s->kind) {
    case ST_FOR: {
        LoopKind k = s->u.loop.kind;
        if (sched_kind_is_gpu(k)) {
            /* the launch covers the largest extent the loop can have (a
             * clipped tile, a ragged row); its guard idles the rest */
            Expr *ext = s->u.loop.extent;
            if (!sizes_only(ext)) {
                Expr *ub = lower_bounds_upper(c->m, ext);
                if (!ub || !sizes_only(ub)) {
                    char *e = ir_expr_str(ext);
                    c->st = base_error(RV_ERR_UNSUPPORTED,
                                       "kernel %s: the extent of GPU-bound loop %s (%s) has no "
                                       "upper bound over sizes only, to size the launch",
                                       c->k->name, s->u.loop.var->name, e);
                    base_free(e);
                    return;
                }
                ext = ub;
            }
            int d = k - LOOP_GPU_BLOCK_X;
            if (!c->dim[d])
                c->dim[d] = ext;
            else if (!in_max(c->dim[d], ext))
                c->dim[d] = ir_binary(c->m, EX_MAX, c->dim[d], ext);
        }
        check_stmt(c, s->u.loop.body, bound | gpu_bit(k));
        return;
    }
    case ST_IF:
        check_stmt(c, s->u.if_.then_s, bound);
        check_stmt(c, s->u.if_.else_s, bound);
        return;
    case ST_LET:
        check_stmt(c, s->u.let.body, bound);
        return;
    case ST_STORE: {
        Buffer *b = s->u.store.buf;
        uintptr_t at = (uintptr_t)ptrmap_get(&c->alloc_dims, b);
        unsigned outside = at ? bound & ~(unsigned)(at - 1) : 0;
        if (b->scope != BUF_LOCAL || !outside)
            return;
        if ((outside & BLOCK_DIMS) || ((unsigned)(at - 1) & THREAD_DIMS)) {
            c->st = base_error(RV_ERR_UNSUPPORTED,
                               "kernel %s: local buffer %s is allocated outside a loop bound to "
                               "%s and written inside it; only a buffer allocated inside the "
                               "block loops and outside every thread loop can be shared (by "
                               "the threads of a block): compute it at a block loop or inside "
                               "the bound loops",
                               c->k->name, b->name,
                               outside & BLOCK_DIMS ? "a block index" : "another thread index");
            return;
        }
        if (!ptrmap_has(&c->shared, b)) {
            int64_t n = 0;
            ir_is_const_int(b->size, &n);
            c->shared_bytes += n * (int64_t)rv_dtype_size(b->dtype);
            ptrmap_put(&c->shared, b, b);
            if (c->shared_bytes > SHARED_LIMIT)
                c->st = base_error(RV_ERR_UNSUPPORTED,
                                   "kernel %s: the buffers its blocks share (%s and before) "
                                   "take %lld bytes; a block has %d",
                                   c->k->name, b->name, (long long)c->shared_bytes,
                                   SHARED_LIMIT);
        }
        return;
    }
    case ST_ALLOC: {
        const Buffer *b = s->u.alloc.buf;
        int64_t n;
        if (b->scope != BUF_LOCAL || !ir_is_const_int(b->size, &n) ||
            n * (int64_t)rv_dtype_size(b->dtype) > 16 * 1024) {
            c->st = base_error(RV_ERR_UNSUPPORTED,
                               "kernel %s: buffer %s needs a device allocation, which the CUDA "
                               "back end cannot make yet (only small local buffers of constant "
                               "size)",
                               c->k->name, b->name);
            return;
        }
        ptrmap_put(&c->alloc_dims, b, (void *)(uintptr_t)(bound + 1));
        check_stmt(c, s->u.alloc.body, bound);
        return;
    }
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            check_stmt(c, s->u.seq.stmts[i], bound);
        return;
    case ST_CALL:
        c->st =
            base_error(RV_ERR_UNSUPPORTED, "kernel %s: extern %s has no CUDA implementation yet",
                       c->k->name, s->u.call.kernel);
        return;
    default:
        return;
    }
}

/* What a statement holds, to decide whether it can be wrapped whole. */
typedef struct Inside {
    unsigned bound;    /* GPU dimensions of the loops in it */
    bool shared_store; /* a store to a non-local buffer */
    bool outer_local;  /* a store to a local allocated outside it */
    bool barrier;
    PtrMap allocs;         /* locals allocated in it */
    const PtrMap *shared;  /* the kernel's block-shared locals */
} Inside;

static void scan_inside(Inside *in, const Stmt *s) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR:
        in->bound |= gpu_bit(s->u.loop.kind);
        scan_inside(in, s->u.loop.body);
        return;
    case ST_IF:
        scan_inside(in, s->u.if_.then_s);
        scan_inside(in, s->u.if_.else_s);
        return;
    case ST_LET:
        scan_inside(in, s->u.let.body);
        return;
    case ST_ALLOC:
        ptrmap_put(&in->allocs, s->u.alloc.buf, (void *)1);
        scan_inside(in, s->u.alloc.body);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            scan_inside(in, s->u.seq.stmts[i]);
        return;
    case ST_STORE:
        if (s->u.store.buf->scope != BUF_LOCAL || ptrmap_has(in->shared, s->u.store.buf))
            in->shared_store = true;
        else if (!ptrmap_has(&in->allocs, s->u.store.buf))
            in->outer_local = true;
        return;
    case ST_BARRIER:
        in->barrier = true;
        return;
    default:
        return;
    }
}

/* s inside one-iteration loops bound to the dimensions in `dims`. */
static Stmt *wrap_dims(Module *m, Stmt *s, unsigned dims) {
    static const char *const names[6] = {"block_x",  "block_y",  "block_z",
                                         "thread_x", "thread_y", "thread_z"};
    for (int d = 5; d >= 0; d--) { /* thread dimensions innermost */
        if (!(dims & (1u << d)))
            continue;
        Expr *one = ir_const_int(m, RV_I64, 1);
        s = lower_for(m, lower_loop_var(m, names[d], one), one, (LoopKind)(LOOP_GPU_BLOCK_X + d),
                      s);
    }
    return s;
}

/* Wraps every store to shared memory (not a local) that is outside some
 * loop bound to a dimension in `used` in one-iteration loops bound to the
 * missing dimensions, so one thread along each runs it (see the file
 * comment). The wrapper goes around the largest statement that needs it
 * (a partitioned tail's whole nest, so other threads skip its work too)
 * when that statement binds none of the missing dimensions itself, has no
 * barrier and writes no local that lives on after it. Returns s itself
 * when nothing changed. */
static Stmt *cover_stores(Module *m, const PtrMap *shared, Stmt *s, unsigned used,
                          unsigned bound) {
    if (!s)
        return NULL;
    if (s->kind != ST_SEQ && s->kind != ST_STORE && (used & ~bound)) {
        Inside in = {.shared = shared};
        scan_inside(&in, s);
        ptrmap_free(&in.allocs);
        unsigned missing = used & ~bound & ~in.bound;
        if (missing && in.shared_store && !in.outer_local && !in.barrier)
            return wrap_dims(m, cover_stores(m, shared, s, used, bound | missing), missing);
    }
    switch (s->kind) {
    case ST_FOR: {
        Stmt *b = cover_stores(m, shared, s->u.loop.body, used, bound | gpu_bit(s->u.loop.kind));
        return b == s->u.loop.body
                   ? s
                   : lower_for(m, s->u.loop.var, s->u.loop.extent, s->u.loop.kind, b);
    }
    case ST_IF: {
        Stmt *t = cover_stores(m, shared, s->u.if_.then_s, used, bound);
        Stmt *e = cover_stores(m, shared, s->u.if_.else_s, used, bound);
        return t == s->u.if_.then_s && e == s->u.if_.else_s ? s : lower_if(m, s->u.if_.cond, t, e);
    }
    case ST_LET: {
        Stmt *b = cover_stores(m, shared, s->u.let.body, used, bound);
        return b == s->u.let.body ? s : lower_let(m, s->u.let.var, s->u.let.value, b);
    }
    case ST_ALLOC: {
        Stmt *b = cover_stores(m, shared, s->u.alloc.body, used, bound);
        return b == s->u.alloc.body ? s : lower_alloc(m, s->u.alloc.buf, b);
    }
    case ST_SEQ: {
        Stmt **v = base_xmalloc(sizeof *v * (size_t)(s->u.seq.n + 1));
        bool changed = false;
        for (int i = 0; i < s->u.seq.n; i++) {
            v[i] = cover_stores(m, shared, s->u.seq.stmts[i], used, bound);
            changed |= v[i] != s->u.seq.stmts[i];
        }
        Stmt *r = changed ? lower_seq(m, s->u.seq.n, v) : s;
        base_free(v);
        return r;
    }
    case ST_STORE:
        return s->u.store.buf->scope == BUF_LOCAL && !ptrmap_has(shared, s->u.store.buf)
                   ? s
                   : wrap_dims(m, s, used & ~bound);
    default:
        return s;
    }
}

/* ---- barriers between the threads of a block ---- */

/* The block-shared locals, numbered for the masks below (at most 32: the
 * shared-memory limit allows no more of useful size). */
typedef struct Sync {
    Module *m;
    const Kernel *k;
    const Buffer *buf[32];
    int n;
    rv_status st;
} Sync;

static unsigned shared_bit(const Sync *y, const Buffer *b) {
    for (int i = 0; i < y->n; i++)
        if (y->buf[i] == b)
            return 1u << i;
    return 0;
}

/* The shared locals e loads (bits into *r). */
static void loads_of(const Sync *y, const Expr *e, unsigned *r) {
    if (!e)
        return;
    if (e->kind == EX_LOAD)
        *r |= shared_bit(y, e->u.buf);
    for (int i = 0; i < e->n; i++)
        loads_of(y, e->args[i], r);
}

/* The shared locals s stores to (*w) and loads from (*r), anywhere in it. */
static void accesses(const Sync *y, const Stmt *s, unsigned *w, unsigned *r) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR:
        loads_of(y, s->u.loop.extent, r);
        accesses(y, s->u.loop.body, w, r);
        return;
    case ST_IF:
        loads_of(y, s->u.if_.cond, r);
        accesses(y, s->u.if_.then_s, w, r);
        accesses(y, s->u.if_.else_s, w, r);
        return;
    case ST_LET:
        loads_of(y, s->u.let.value, r);
        accesses(y, s->u.let.body, w, r);
        return;
    case ST_STORE:
        loads_of(y, s->u.store.index, r);
        loads_of(y, s->u.store.value, r);
        *w |= shared_bit(y, s->u.store.buf);
        return;
    case ST_ALLOC:
        accesses(y, s->u.alloc.body, w, r);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            accesses(y, s->u.seq.stmts[i], w, r);
        return;
    default:
        return;
    }
}

/* Does an access (w written, r read) conflict with what was written (pw)
 * or read (pr) since the last barrier? */
static bool conflicts(unsigned w, unsigned r, unsigned pw, unsigned pr) {
    return (r & pw) || (w & (pw | pr));
}

/* s after a barrier when `need`. */
static Stmt *after_barrier(Module *m, Stmt *s, bool need) {
    if (!need)
        return s;
    Stmt *two[2] = {lower_barrier(m), s};
    return lower_seq(m, 2, two);
}

/* s with __syncthreads() wherever a thread may read a shared local that
 * another wrote, or overwrite one that another read or wrote, since the
 * last barrier: *pw and *pr say what was written and read since then on
 * entry, and are updated to the same at s's end. Each barrier goes as late
 * as it can: before the first statement that conflicts. A serial loop's
 * body starts with what its previous iteration leaves (the accesses of the
 * whole body, conservatively), so a tile filled and then read in each
 * iteration gets a barrier before the fill too (the last iteration's
 * readers must be done). A loop bound to a block index is one iteration per
 * block, as is a loop of extent 1. Barriers go only where every thread of the block arrives: outside
 * the loops bound to thread indices (the code around them, conditions and
 * extents included, depends on block indices and sizes only). Inside a
 * thread loop, a shared local both written and read would need a barrier
 * that not every thread reaches: refused. */
static Stmt *sync_in(Sync *y, Stmt *s, unsigned *pw, unsigned *pr) {
    if (!s || y->st != RV_OK)
        return s;
    Module *m = y->m;
    unsigned w = 0, r = 0;
    switch (s->kind) {
    case ST_SEQ: {
        int n = s->u.seq.n;
        Stmt **v = base_xmalloc(sizeof *v * (size_t)n);
        bool changed = false;
        for (int i = 0; i < n; i++) {
            v[i] = sync_in(y, s->u.seq.stmts[i], pw, pr);
            changed |= v[i] != s->u.seq.stmts[i];
        }
        Stmt *res = changed ? lower_seq(m, n, v) : s;
        base_free(v);
        return res;
    }
    case ST_LET: {
        loads_of(y, s->u.let.value, &r);
        bool need = conflicts(0, r, *pw, *pr);
        if (need)
            *pw = *pr = 0;
        *pr |= r;
        Stmt *b = sync_in(y, s->u.let.body, pw, pr);
        Stmt *x = b == s->u.let.body ? s : lower_let(m, s->u.let.var, s->u.let.value, b);
        return after_barrier(m, x, need);
    }
    case ST_ALLOC: {
        Stmt *b = sync_in(y, s->u.alloc.body, pw, pr);
        return b == s->u.alloc.body ? s : lower_alloc(m, s->u.alloc.buf, b);
    }
    case ST_IF: {
        loads_of(y, s->u.if_.cond, &r);
        bool need = conflicts(0, r, *pw, *pr);
        if (need)
            *pw = *pr = 0;
        *pr |= r;
        unsigned tw = *pw, tr = *pr, ew = *pw, er = *pr;
        Stmt *t = sync_in(y, s->u.if_.then_s, &tw, &tr);
        Stmt *e = sync_in(y, s->u.if_.else_s, &ew, &er);
        *pw = tw | ew;
        *pr = tr | er;
        Stmt *x = t == s->u.if_.then_s && e == s->u.if_.else_s ? s
                                                               : lower_if(m, s->u.if_.cond, t, e);
        return after_barrier(m, x, need);
    }
    case ST_FOR: {
        LoopKind k = s->u.loop.kind;
        if (gpu_bit(k) & THREAD_DIMS)
            break;
        loads_of(y, s->u.loop.extent, &r);
        bool need = conflicts(0, r, *pw, *pr);
        if (need)
            *pw = *pr = 0;
        *pr |= r;
        unsigned ew = *pw, er = *pr; /* for zero iterations */
        int64_t one;
        if (!(gpu_bit(k) & BLOCK_DIMS) && !(ir_is_const_int(s->u.loop.extent, &one) && one == 1))
            accesses(y, s->u.loop.body, pw, pr);
        Stmt *b = sync_in(y, s->u.loop.body, pw, pr);
        *pw |= ew;
        *pr |= er;
        Stmt *x = s;
        if (b != s->u.loop.body) {
            x = lower_for(m, s->u.loop.var, s->u.loop.extent, k, b);
            x->u.loop.partition = s->u.loop.partition;
            x->u.loop.spatial = s->u.loop.spatial;
        }
        return after_barrier(m, x, need);
    }
    default:
        break;
    }
    /* a leaf for the barriers: a store, or a loop over a block's threads */
    accesses(y, s, &w, &r);
    if (s->kind == ST_FOR && (w & r)) {
        int i = 0;
        while (!((w & r) & (1u << i)))
            i++;
        y->st = base_error(RV_ERR_UNSUPPORTED,
                           "kernel %s: the threads of loop %s both write and read the "
                           "block-shared buffer %s, which would need a barrier inside the "
                           "loop; write and read it in separate nests (a reduction: its loop "
                           "inside the thread loops)",
                           y->k->name, s->u.loop.var->name, y->buf[i]->name);
        return s;
    }
    bool need = conflicts(w, r, *pw, *pr);
    if (need)
        *pw = *pr = 0;
    *pw |= w;
    *pr |= r;
    return after_barrier(m, s, need);
}

static void launch_comment(CgEmit *e, Buf *b, const char *what, Expr *const *d) {
    buf_printf(b, "%s (", what);
    for (int i = 0; i < 3; i++) {
        if (i)
            buf_puts(b, ", ");
        if (d[i])
            cg_expr(e, b, d[i]);
        else
            buf_putc(b, '1');
    }
    buf_putc(b, ')');
}

rv_status cg_cuda_kernel(const Kernel *k, char **src_out, char **sym_out, CgLaunch *launch) {
    *src_out = NULL;
    if (sym_out)
        *sym_out = NULL;
    Check c = {.m = k->m, .k = k};
    check_stmt(&c, k->body, 0);
    ptrmap_free(&c.alloc_dims);
    if (c.st != RV_OK) {
        ptrmap_free(&c.shared);
        return c.st;
    }
    unsigned used = 0;
    for (int d = 0; d < 6; d++)
        used |= c.dim[d] ? 1u << d : 0;
    Stmt *body = cover_stores(k->m, &c.shared, k->body, used, 0);
    if (body != k->body) { /* the launch covers the new loops too */
        memset(c.dim, 0, sizeof c.dim);
        check_stmt(&c, body, 0);
        ptrmap_free(&c.alloc_dims);
        RV_ASSERT(c.st == RV_OK);
    }
    Sync y = {.m = k->m, .k = k};
    for (int i = 0; i < c.shared.cap; i++)
        if (c.shared.keys && c.shared.keys[i] && y.n < RV_COUNT(y.buf))
            y.buf[y.n++] = c.shared.keys[i];
    if (c.shared.len > RV_COUNT(y.buf)) {
        ptrmap_free(&c.shared);
        return base_error(RV_ERR_UNSUPPORTED, "kernel %s: more than %d block-shared buffers",
                          k->name, RV_COUNT(y.buf));
    }
    unsigned pw = 0, pr = 0;
    body = sync_in(&y, body, &pw, &pr);
    if (y.st != RV_OK) {
        ptrmap_free(&c.shared);
        return y.st;
    }
    int64_t threads = 1, n;
    for (int d = 3; d < 6; d++)
        if (c.dim[d] && ir_is_const_int(c.dim[d], &n))
            threads *= n;
    if (threads > 1024) {
        ptrmap_free(&c.shared);
        return base_error(RV_ERR_UNSUPPORTED,
                          "kernel %s: %lld threads per block; CUDA allows at most 1024", k->name,
                          (long long)threads);
    }

    CgEmit e;
    cg_emit_init(&e, CG_TARGET_CUDA);
    const char *sym = cg_global(&e, arena_printf(e.arena, "kernel_%s", k->name));
    cg_emit_begin_kernel(&e);
    for (int i = 0; i < y.n; i++)
        ptrmap_put(&e.shared, y.buf[i], (void *)y.buf[i]);
    ptrmap_free(&c.shared);
    for (int i = 0; i < k->nparams; i++) {
        const Param *p = &k->params[i];
        if (p->kind == PARAM_SIZE)
            cg_name(&e, p->size, p->size->name);
        else
            cg_name(&e, p->buf, p->buf->name);
    }
    PtrMap written = {0};
    cg_analyze(&e, body, &written);
    Buf text = {0};
    cg_emit_stmts(&e, k, body, &written, 1, &text);

    Buf b = {0};
    buf_printf(&b, "/*\n * Generated by ravel (CUDA C for NVRTC): %s, tensor %s.\n * Launch: ", sym,
               k->name);
    launch_comment(&e, &b, "grid", c.dim);
    buf_puts(&b, ", ");
    launch_comment(&e, &b, "block", c.dim + 3);
    buf_puts(&b, ".\n * Arguments by value, in parameter order: sizes as int64_t, buffers as "
                 "device pointers.\n */\n");
    buf_puts(&b, "typedef int int32_t;\ntypedef long long int64_t;\n"
                 "typedef unsigned char uint8_t;\n\n");
    cg_emit_helpers(&e, &b);
    buf_printf(&b, "extern \"C\" __global__ void %s(", sym);
    int np = 0;
    for (int i = 0; i < k->nparams; i++) {
        const Param *p = &k->params[i];
        buf_puts(&b, np++ ? ",\n    " : "\n    ");
        if (p->kind == PARAM_SIZE) {
            buf_printf(&b, "const int64_t %s", cg_name(&e, p->size, p->size->name));
        } else {
            const Buffer *bf = p->buf;
            buf_printf(&b, "%s%s *__restrict__ %s", ptrmap_has(&written, bf) ? "" : "const ",
                       cg_ctype(bf->dtype), cg_name(&e, bf, bf->name));
        }
    }
    buf_puts(&b, ") {\n");
    buf_puts(&b, buf_str(&text));
    buf_puts(&b, "}\n");

    if (launch) {
        for (int d = 0; d < 3; d++) {
            launch->grid[d] = c.dim[d];
            launch->block[d] = c.dim[3 + d];
        }
    }
    if (sym_out)
        *sym_out = base_xstrdup(sym);
    *src_out = buf_take(&b);
    buf_free(&text);
    ptrmap_free(&written);
    cg_emit_free(&e);
    return RV_OK;
}
