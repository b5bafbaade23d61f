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
 * of the loops bound to it, so the guard is what keeps a thread of a
 * shorter loop idle. Loops that are not bound (serial, and parallel or
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
 * like `Y[i] = Y[i] + x` repeated is wrong). This happens to the tail
 * copy of a partitioned split, which lowering puts next to the loop over
 * full tiles, outside the loops bound to the tiles. Such stores are
 * wrapped here in one-iteration loops bound to the missing dimensions
 * (`if (blockIdx.x < 1)`), so exactly one thread along each runs them;
 * the launch then covers at least one block, even when no full tile
 * exists. A local buffer is private to its thread, so one written inside
 * a bound loop that its allocation is outside of would be filled only in
 * part: it would need shared memory, and is refused.
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
    rv_status st;
} Check;

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
        if (k >= LOOP_GPU_BLOCK_X && k <= LOOP_GPU_THREAD_Z) {
            Expr *ext = s->u.loop.extent;
            if (!sizes_only(ext)) {
                char *e = ir_expr_str(ext);
                c->st = base_error(RV_ERR_UNSUPPORTED,
                                   "kernel %s: the extent of GPU-bound loop %s (%s) must depend "
                                   "on sizes only, to size the launch",
                                   c->k->name, s->u.loop.var->name, e);
                base_free(e);
                return;
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
        const Buffer *b = s->u.store.buf;
        uintptr_t at = (uintptr_t)ptrmap_get(&c->alloc_dims, b);
        if (b->scope == BUF_LOCAL && at && (bound & ~(unsigned)(at - 1))) {
            c->st = base_error(RV_ERR_UNSUPPORTED,
                               "kernel %s: local buffer %s is allocated outside a GPU-bound loop "
                               "and written inside it, so each thread would fill only its part; "
                               "that needs shared memory, which the CUDA back end does not use "
                               "yet (compute it inside the bound loops)",
                               c->k->name, b->name);
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
    PtrMap allocs; /* locals allocated in it */
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
        if (s->u.store.buf->scope != BUF_LOCAL)
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
static Stmt *cover_stores(Module *m, Stmt *s, unsigned used, unsigned bound) {
    if (!s)
        return NULL;
    if (s->kind != ST_SEQ && s->kind != ST_STORE && (used & ~bound)) {
        Inside in = {0};
        scan_inside(&in, s);
        ptrmap_free(&in.allocs);
        unsigned missing = used & ~bound & ~in.bound;
        if (missing && in.shared_store && !in.outer_local && !in.barrier)
            return wrap_dims(m, cover_stores(m, s, used, bound | missing), missing);
    }
    switch (s->kind) {
    case ST_FOR: {
        Stmt *b = cover_stores(m, s->u.loop.body, used, bound | gpu_bit(s->u.loop.kind));
        return b == s->u.loop.body
                   ? s
                   : lower_for(m, s->u.loop.var, s->u.loop.extent, s->u.loop.kind, b);
    }
    case ST_IF: {
        Stmt *t = cover_stores(m, s->u.if_.then_s, used, bound);
        Stmt *e = cover_stores(m, s->u.if_.else_s, used, bound);
        return t == s->u.if_.then_s && e == s->u.if_.else_s ? s : lower_if(m, s->u.if_.cond, t, e);
    }
    case ST_LET: {
        Stmt *b = cover_stores(m, s->u.let.body, used, bound);
        return b == s->u.let.body ? s : lower_let(m, s->u.let.var, s->u.let.value, b);
    }
    case ST_ALLOC: {
        Stmt *b = cover_stores(m, s->u.alloc.body, used, bound);
        return b == s->u.alloc.body ? s : lower_alloc(m, s->u.alloc.buf, b);
    }
    case ST_SEQ: {
        Stmt **v = base_xmalloc(sizeof *v * (size_t)(s->u.seq.n + 1));
        bool changed = false;
        for (int i = 0; i < s->u.seq.n; i++) {
            v[i] = cover_stores(m, s->u.seq.stmts[i], used, bound);
            changed |= v[i] != s->u.seq.stmts[i];
        }
        Stmt *r = changed ? lower_seq(m, s->u.seq.n, v) : s;
        base_free(v);
        return r;
    }
    case ST_STORE:
        return s->u.store.buf->scope == BUF_LOCAL ? s : wrap_dims(m, s, used & ~bound);
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

rv_status cg_cuda_kernel(const Kernel *k, char **src_out, char **sym_out, CgLaunch *launch) {
    *src_out = NULL;
    if (sym_out)
        *sym_out = NULL;
    Check c = {.m = k->m, .k = k};
    check_stmt(&c, k->body, 0);
    ptrmap_free(&c.alloc_dims);
    if (c.st != RV_OK)
        return c.st;
    unsigned used = 0;
    for (int d = 0; d < 6; d++)
        used |= c.dim[d] ? 1u << d : 0;
    Stmt *body = cover_stores(k->m, k->body, used, 0);
    if (body != k->body) { /* the launch covers the new loops too */
        memset(c.dim, 0, sizeof c.dim);
        check_stmt(&c, body, 0);
        ptrmap_free(&c.alloc_dims);
        RV_ASSERT(c.st == RV_OK);
    }
    int64_t threads = 1, n;
    for (int d = 3; d < 6; d++)
        if (c.dim[d] && ir_is_const_int(c.dim[d], &n))
            threads *= n;
    if (threads > 1024)
        return base_error(RV_ERR_UNSUPPORTED,
                          "kernel %s: %lld threads per block; CUDA allows at most 1024", k->name,
                          (long long)threads);

    CgEmit e;
    cg_emit_init(&e, CG_TARGET_CUDA);
    const char *sym = cg_global(&e, arena_printf(e.arena, "kernel_%s", k->name));
    cg_emit_begin_kernel(&e);
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
