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
 * guard is what keeps a thread of a shorter loop idle. Loops that are not bound (serial, and
 * parallel or vector ones, which mean nothing inside a thread yet) run serially in each thread;
 * unrolled loops with a constant extent carry `#pragma unroll`. One-element locals are scalars,
 * small constant-size locals are per-thread arrays, barriers are __syncthreads().
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
 * threads together: it is declared `__shared__`, and cg_cuda_block_barriers
 * (cuda_sync.c) puts the barriers between its writers and readers (docs/schedules.md, "Shared
 * memory on the GPU"). A local allocated outside a block loop and written
 * inside it would need memory shared across blocks, and is refused.
 *
 * RECURSION. A recursion group's kernel with gpu_batches (its batch loop
 * marked, src/lower/recurse.c) gets grid barriers where the threads of one
 * launch would race (cg_cuda_grid_barriers, cuda_sync.c), then becomes either several entry
 * points cut at the barriers, launched by the host in order and those of
 * the batch loop once per batch ("launch"), or one persistent kernel with
 * rv_grid_sync() at the barriers and bound loops that stride over a
 * cooperative grid ("persistent"). docs/recursion.md, "CUDA".
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
    const Axis *batch; /* the batch loop's variable, an argument (launch_batches) */
    bool strided;      /* persistent: bound loops stride over the launch (any extent) */
    Expr *dim[6];      /* grid x, y, z, block x, y, z */
    /* local Buffer* -> 1 + (the GPU dimensions bound around its allocation
     * | those bound twice there << 6) */
    PtrMap alloc_dims;
    PtrMap lets;   /* a let's variable (Axis*) -> its value, outer lets substituted */
    PtrMap shared; /* locals a block's threads share (see the file comment) */
    int64_t shared_bytes;
    rv_status st;
} Check;

/* Static shared memory a block may declare. */
#define SHARED_LIMIT (48 * 1024)

/* Can the host evaluate x before a launch: sizes, UF arrays (the host
 * has them) at such indices, and the batch loop's variable? */
static bool host_evaluable(const Check *c, const Expr *x) {
    if (x->kind == EX_VAR)
        return c->batch && x->u.axis == c->batch;
    if (x->kind != EX_CONST_INT && x->kind != EX_SIZE && x->n == 0)
        return false;
    if ((x->kind == EX_LOAD && !x->u.buf->uf) || x->kind == EX_UFCALL || x->kind == EX_READ)
        return false;
    for (int i = 0; i < x->n; i++)
        if (!host_evaluable(c, x->args[i]))
            return false;
    return true;
}

/* Whether x is one of the operands of the chain of maxima `chain`. */
static bool in_max(const Expr *chain, const Expr *x) {
    return chain == x ||
           (chain->kind == EX_MAX && (in_max(chain->args[0], x) || in_max(chain->args[1], x)));
}

/* `bound`: the GPU dimensions bound by the loops around s; `again`: those
 * bound by two of them (a copy the threads fill together, inside the
 * thread loops of its reader, binds the threads again). */
static void check_stmt(Check *c, const Stmt *s, unsigned bound, unsigned again) {
    if (!s || c->st != RV_OK)
        return;
    switch (s->kind) {
    case ST_FOR: {
        LoopKind k = s->u.loop.kind;
        if (sched_kind_is_gpu(k)) {
            /* the host sizes the launch: a let's value in place of its
             * variable (hoisting names a batch's length); an extent that
             * varies (a clipped tile, a ragged row) by its upper bound,
             * the guard idling the threads past the loop's own extent */
            Expr *ext = ir_substitute(c->m, s->u.loop.extent, &c->lets);
            if (!c->strided && !host_evaluable(c, ext)) {
                Expr *ub = lower_bounds_upper(c->m, ext);
                if (!ub || !host_evaluable(c, ub)) {
                    char *e = ir_expr_str(ext);
                    c->st = base_error(RV_ERR_UNSUPPORTED,
                                       "kernel %s: the extent of GPU-bound loop %s (%s) has no "
                                       "upper bound over sizes only (UF arrays at such indices, "
                                       "and a recursion's batch), to size the launch",
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
        check_stmt(c, s->u.loop.body, bound | cg_cuda_dim_bit(k),
                   again | (bound & cg_cuda_dim_bit(k)));
        return;
    }
    case ST_IF:
        check_stmt(c, s->u.if_.then_s, bound, again);
        check_stmt(c, s->u.if_.else_s, bound, again);
        return;
    case ST_LET:
        ptrmap_put(&c->lets, s->u.let.var, ir_substitute(c->m, s->u.let.value, &c->lets));
        check_stmt(c, s->u.let.body, bound, again);
        return;
    case ST_STORE: {
        Buffer *b = s->u.store.buf;
        uintptr_t at = (uintptr_t)ptrmap_get(&c->alloc_dims, b);
        /* the dimensions bound, or bound again, since the allocation */
        unsigned at_bound = at ? (unsigned)(at - 1) & 077 : 0;
        unsigned at_again = at ? (unsigned)(at - 1) >> 6 : 0;
        unsigned outside = at ? (bound & ~at_bound) | (again & ~at_again) : 0;
        if (b->scope != BUF_LOCAL || !outside)
            return;
        if (outside & CG_CUDA_BLOCK_DIMS) {
            c->st = base_error(RV_ERR_UNSUPPORTED,
                               "kernel %s: local buffer %s is allocated outside a loop bound to "
                               "a block index and written inside it; blocks share no memory: "
                               "compute it at a block loop or inside the bound loops",
                               c->k->name, b->name);
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
                                   c->k->name, b->name, (long long)c->shared_bytes, SHARED_LIMIT);
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
        ptrmap_put(&c->alloc_dims, b, (void *)(uintptr_t)((bound | again << 6) + 1));
        check_stmt(c, s->u.alloc.body, bound, again);
        return;
    }
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            check_stmt(c, s->u.seq.stmts[i], bound, again);
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
    PtrMap allocs;        /* locals allocated in it */
    const PtrMap *shared; /* the kernel's block-shared locals */
} Inside;

static void scan_inside(Inside *in, const Stmt *s) {
    if (!s)
        return;
    switch (s->kind) {
    case ST_FOR:
        in->bound |= cg_cuda_dim_bit(s->u.loop.kind);
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
static Stmt *cover_stores(Module *m, const PtrMap *shared, Stmt *s, unsigned used, unsigned bound) {
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
        Stmt *b =
            cover_stores(m, shared, s->u.loop.body, used, bound | cg_cuda_dim_bit(s->u.loop.kind));
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

/* ---- recursion groups: the batches (gpu_batches) ---- */

/* The loop over a recursion group's batches (Stmt.u.loop.gpu_batches),
 * at the top of the kernel (under lets, allocations and sequences). */
static const Stmt *find_batches(const Stmt *s) {
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR:
        return s->u.loop.gpu_batches ? s : NULL;
    case ST_LET:
        return find_batches(s->u.let.body);
    case ST_ALLOC:
        return find_batches(s->u.alloc.body);
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++) {
            const Stmt *b = find_batches(s->u.seq.stmts[i]);
            if (b)
                return b;
        }
        return NULL;
    default:
        return NULL;
    }
}

/* Does s hold a grid barrier or the batch loop at its top? */
static bool has_cut(const Stmt *s) {
    if (!s)
        return false;
    switch (s->kind) {
    case ST_BARRIER:
        return s->u.barrier.grid;
    case ST_FOR:
        return s->u.loop.gpu_batches != 0;
    case ST_LET:
        return has_cut(s->u.let.body);
    case ST_ALLOC:
        return has_cut(s->u.alloc.body);
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            if (has_cut(s->u.seq.stmts[i]))
                return true;
        return false;
    default:
        return false;
    }
}

/* gpu_batches("launch"): the body cut at its grid barriers into the
 * bodies of the launches, each under the lets around it (evaluated again
 * in each), those inside the batch loop launched once per batch. */
typedef struct Segment {
    Stmt *body;
    const Stmt *loop; /* the batch loop around it, or NULL */
} Segment;

typedef struct Cut {
    Module *m;
    const Kernel *k;
    Vec(Stmt *) cur;
    Vec(const Stmt *) wraps; /* lets around cur, outermost first */
    Vec(Segment) segs;
    const Stmt *loop;
    rv_status st;
} Cut;

static void cut_flush(Cut *c) {
    if (!c->cur.len)
        return;
    Stmt *b = lower_seq(c->m, c->cur.len, c->cur.data);
    for (int i = c->wraps.len - 1; i >= 0; i--) {
        const Stmt *w = c->wraps.data[i];
        b = lower_let(c->m, w->u.let.var, w->u.let.value, b);
    }
    vec_push(&c->segs, ((Segment){b, c->loop}));
    c->cur.len = 0;
}

static void cut(Cut *c, Stmt *s) {
    if (!s || c->st != RV_OK)
        return;
    if (!has_cut(s)) {
        vec_push(&c->cur, s);
        return;
    }
    switch (s->kind) {
    case ST_BARRIER:
        cut_flush(c);
        return;
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            cut(c, s->u.seq.stmts[i]);
        return;
    case ST_LET:
        cut_flush(c);
        vec_push(&c->wraps, s);
        cut(c, s->u.let.body);
        cut_flush(c);
        c->wraps.len--;
        return;
    case ST_ALLOC:
        /* a thread's local does not outlive its launch */
        c->st = base_error(RV_ERR_UNSUPPORTED,
                           "kernel %s: local buffer %s lives across the launches of "
                           "gpu_batches(\"launch\"); compute it inside a member",
                           c->k->name, s->u.alloc.buf->name);
        return;
    case ST_FOR:
        cut_flush(c);
        c->loop = s;
        cut(c, s->u.loop.body);
        cut_flush(c);
        c->loop = NULL;
        return;
    default:
        RV_UNREACHABLE();
    }
}

/* ---- entry points ---- */

/* The value of a constant or of a maximum of constants (a launch
 * dimension several loops are bound to). */
static bool const_max(const Expr *e, int64_t *v) {
    int64_t a, b;
    if (ir_is_const_int(e, v))
        return true;
    if (e->kind != EX_MAX || !const_max(e->args[0], &a) || !const_max(e->args[1], &b))
        return false;
    *v = a > b ? a : b;
    return true;
}

/* The text of one entry point `sym` running body, its launch extents in
 * dims[6] and a comment describing them in *launch_text. batch: the
 * batch loop's variable, its last argument (NULL: none). strided: a
 * persistent kernel's, whose bound loops stride over the grid. */
static rv_status emit_entry(CgEmit *e, const Kernel *k, Stmt *body, const char *sym,
                            const Axis *batch, bool strided, Expr *dims[6], Buf *out,
                            Buf *launch_text) {
    Check c = {.m = k->m, .k = k, .batch = batch, .strided = strided};
    check_stmt(&c, body, 0, 0);
    ptrmap_free(&c.alloc_dims);
    ptrmap_free(&c.lets);
    if (c.st != RV_OK) {
        ptrmap_free(&c.shared);
        return c.st;
    }
    unsigned used = 0;
    for (int d = 0; d < 6; d++)
        used |= c.dim[d] ? 1u << d : 0;
    Stmt *covered = cover_stores(k->m, &c.shared, body, used, 0);
    if (covered != body) { /* the launch covers the new loops too */
        memset(c.dim, 0, sizeof c.dim);
        check_stmt(&c, covered, 0, 0);
        ptrmap_free(&c.alloc_dims);
        ptrmap_free(&c.lets);
        RV_ASSERT(c.st == RV_OK);
    }
    rv_status st = cg_cuda_block_barriers(k, covered, &c.shared, c.dim, strided, &covered);
    if (st != RV_OK) {
        ptrmap_free(&c.shared);
        return st;
    }
    int64_t threads = 1, n;
    for (int d = 0; strided && d < 6; d++) {
        /* a persistent kernel strides over bound loops of any extent: its
         * block and the grid's y and z are the bound loops' largest
         * constant extents (else 128 threads along x, 1), the grid's x
         * what the device holds at once with them (the runtime's) */
        if (!c.dim[d] || d == 0)
            c.dim[d] = NULL;
        else if (const_max(c.dim[d], &n))
            c.dim[d] = ir_int(k->m, n);
        else
            c.dim[d] = d == 3 ? ir_int(k->m, 128) : NULL;
    }
    for (int d = 3; d < 6; d++)
        if (c.dim[d] && ir_is_const_int(c.dim[d], &n))
            threads *= n;
    if (threads > 1024) {
        ptrmap_free(&c.shared);
        return base_error(RV_ERR_UNSUPPORTED,
                          "kernel %s: %lld threads per block; CUDA allows at most 1024", k->name,
                          (long long)threads);
    }

    cg_emit_begin_kernel(e);
    for (int i = 0; i < c.shared.cap; i++)
        if (c.shared.keys && c.shared.keys[i])
            ptrmap_put(&e->shared, c.shared.keys[i], (void *)c.shared.keys[i]);
    ptrmap_free(&c.shared);
    for (int i = 0; i < k->nparams; i++) {
        const Param *p = &k->params[i];
        if (p->kind == PARAM_SIZE)
            cg_name(e, p->size, p->size->name);
        else
            cg_name(e, p->buf, p->buf->name);
    }
    if (batch)
        cg_name(e, batch, batch->name);
    PtrMap written = {0};
    cg_analyze(e, covered, &written);
    Buf text = {0};
    cg_emit_stmts(e, k, covered, &written, 1, &text);

    if (strided) {
        buf_puts(launch_text, "grid (as many blocks as fit the device at once");
        for (int d = 1; d < 3; d++)
            if (c.dim[d] && ir_is_const_int(c.dim[d], &n))
                buf_printf(launch_text, ", %c %lld", "xyz"[d], (long long)n);
        buf_puts(launch_text, "), ");
    } else {
        launch_comment(e, launch_text, "grid", c.dim);
        buf_puts(launch_text, ", ");
    }
    launch_comment(e, launch_text, "block", c.dim + 3);
    if (batch)
        buf_printf(launch_text, ", once per batch %s", cg_name(e, batch, batch->name));
    buf_printf(out, "extern \"C\" __global__ void %s(", sym);
    int np = 0;
    for (int i = 0; i < k->nparams; i++) {
        const Param *p = &k->params[i];
        buf_puts(out, np++ ? ",\n    " : "\n    ");
        if (p->kind == PARAM_SIZE) {
            buf_printf(out, "const int64_t %s", cg_name(e, p->size, p->size->name));
        } else {
            const Buffer *bf = p->buf;
            buf_printf(out, "%s%s *__restrict__ %s", ptrmap_has(&written, bf) ? "" : "const ",
                       cg_ctype(bf->dtype), cg_name(e, bf, bf->name));
        }
    }
    if (batch)
        buf_printf(out, ",\n    const int64_t %s", cg_name(e, batch, batch->name));
    buf_puts(out, ") {\n");
    buf_puts(out, buf_str(&text));
    buf_puts(out, "}\n");
    memcpy(dims, c.dim, sizeof c.dim);
    buf_free(&text);
    ptrmap_free(&written);
    return RV_OK;
}

/* The grid-wide barrier of a persistent kernel (self-contained: no
 * cooperative-groups header, which NVRTC may not find). Thread 0 of each
 * block arrives on a counter; the last to arrive resets it and advances
 * the generation the others spin on. The launch is cooperative, so every
 * block is resident and the spin ends; the fences make each block's
 * stores before the barrier visible to every block after it. */
static const char grid_sync_src[] =
    "__device__ unsigned int rv_grid_count;\n"
    "__device__ volatile unsigned int rv_grid_gen;\n"
    "static __device__ __forceinline__ void rv_grid_sync(void) {\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {\n"
    "        const unsigned int gen = rv_grid_gen;\n"
    "        const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;\n"
    "        __threadfence();\n"
    "        if (atomicAdd(&rv_grid_count, 1u) == blocks - 1) {\n"
    "            atomicExch(&rv_grid_count, 0u);\n"
    "            __threadfence();\n"
    "            atomicAdd((unsigned int *)&rv_grid_gen, 1u);\n"
    "        } else {\n"
    "            while (rv_grid_gen == gen) {\n"
    "            }\n"
    "        }\n"
    "        __threadfence();\n"
    "    }\n"
    "    __syncthreads();\n"
    "}\n\n";

void cg_cuda_launch_free(CgLaunch *l) {
    for (int i = 0; l && i < l->nfns; i++)
        base_free(l->fns[i].sym);
    if (l)
        base_free(l->fns);
}

rv_status cg_cuda_kernel(const Kernel *k, char **src_out, char **sym_out, CgLaunch *launch) {
    *src_out = NULL;
    if (sym_out)
        *sym_out = NULL;
    if (launch)
        memset(launch, 0, sizeof *launch);
    Module *m = k->m;
    const Stmt *batches = find_batches(k->body);
    int mode = batches ? batches->u.loop.gpu_batches : SCHED_GPU_NONE;
    Stmt *body = k->body;
    if (mode != SCHED_GPU_NONE) {
        body = cg_cuda_grid_barriers(m, k->body);
    }
    Cut cu = {.m = m, .k = k};
    if (mode == SCHED_GPU_LAUNCH) {
        cut(&cu, body);
        cut_flush(&cu);
    } else {
        vec_push(&cu.segs, ((Segment){body, NULL}));
    }
    rv_status st = cu.st;
    int nseg = cu.segs.len;
    if (st == RV_OK && nseg == 0)
        st = base_error(RV_ERR_UNSUPPORTED, "kernel %s: nothing to launch", k->name);

    CgEmit e;
    cg_emit_init(&e, CG_TARGET_CUDA);
    e.gpu_strided = mode == SCHED_GPU_PERSISTENT;
    Buf fns = {0}, first_launch = {0};
    CgCudaFn *fn = base_xcalloc((size_t)nseg + 1, sizeof *fn);
    for (int i = 0; st == RV_OK && i < nseg; i++) {
        const Segment *sg = &cu.segs.data[i];
        const char *sym = cg_global(&e, nseg > 1 ? arena_printf(e.arena, "kernel_%s_%d", k->name, i)
                                                 : arena_printf(e.arena, "kernel_%s", k->name));
        Expr *dims[6] = {0};
        Buf lt = {0};
        const Axis *bv = sg->loop ? sg->loop->u.loop.var : NULL;
        Buf one = {0};
        st = emit_entry(&e, k, sg->body, sym, bv, e.gpu_strided, dims, &one, &lt);
        if (st == RV_OK) {
            if (nseg > 1)
                buf_printf(&fns, "/* Launch: %s. */\n", buf_str(&lt));
            else
                buf_puts(&first_launch, buf_str(&lt));
            buf_puts(&fns, buf_str(&one));
            buf_putc(&fns, '\n');
            fn[i] = (CgCudaFn){.sym = base_xstrdup(sym),
                               .grid = {dims[0], dims[1], dims[2]},
                               .block = {dims[3], dims[4], dims[5]},
                               .batch = bv ? bv->var : NULL,
                               .batches = sg->loop ? sg->loop->u.loop.extent : NULL};
        }
        buf_free(&lt);
        buf_free(&one);
    }
    if (st == RV_OK) {
        Buf b = {0};
        buf_printf(&b, "/*\n * Generated by ravel (CUDA C for NVRTC): %s, tensor %s.\n", fn[0].sym,
                   k->name);
        if (nseg > 1)
            buf_printf(&b,
                       " * Recursion %s, gpu_batches(\"launch\"): %d entry points, launched in "
                       "order, those with a batch argument once per batch.\n",
                       k->name, nseg);
        else
            buf_printf(&b, " * Launch: %s%s.\n", buf_str(&first_launch),
                       e.gpu_strided ? "; cooperative, a grid barrier between the batches" : "");
        buf_puts(&b, " * Arguments by value, in parameter order: sizes as int64_t, buffers as "
                     "device pointers.\n */\n");
        buf_puts(&b, "typedef int int32_t;\ntypedef long long int64_t;\n"
                     "typedef unsigned char uint8_t;\n\n");
        cg_emit_helpers(&e, &b);
        if (e.gpu_strided)
            buf_puts(&b, grid_sync_src);
        buf_puts(&b, buf_str(&fns));
        b.len--; /* one newline at the end */
        b.data[b.len] = '\0';
        if (sym_out)
            *sym_out = base_xstrdup(fn[0].sym);
        *src_out = buf_take(&b);
        if (launch) {
            for (int d = 0; d < 3; d++) {
                launch->grid[d] = fn[0].grid[d];
                launch->block[d] = fn[0].block[d];
            }
            launch->persistent = e.gpu_strided;
            if (nseg > 1 || fn[0].batch) {
                launch->nfns = nseg;
                launch->fns = fn;
                fn = NULL;
            }
        }
    }
    for (int i = 0; fn && i < nseg; i++)
        base_free(fn[i].sym);
    base_free(fn);
    buf_free(&fns);
    buf_free(&first_launch);
    vec_free(&cu.cur);
    vec_free(&cu.wraps);
    vec_free(&cu.segs);
    cg_emit_free(&e);
    return st;
}
