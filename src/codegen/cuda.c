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
 * Not yet: launching. The runtime side (cuModuleLoadData, argument
 * buffers, cuLaunchKernel with the evaluated launch extents, device
 * memory for the buffers) comes with the CUDA driver path; today the
 * source is generated and compiled to PTX.
 */
#include <string.h>

#include "codegen/codegen.h"

/* Checks what the CUDA back end supports and collects the launch extents
 * (per GPU dimension, the maximum over the loops bound to it). */
typedef struct Check {
    Module *m;
    const Kernel *k;
    Expr *dim[6]; /* grid x, y, z, block x, y, z */
    rv_status st;
} Check;

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

static void check_stmt(Check *c, const Stmt *s) {
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
            c->dim[d] = c->dim[d] ? ir_binary(c->m, EX_MAX, c->dim[d], ext) : ext;
        }
        check_stmt(c, s->u.loop.body);
        return;
    }
    case ST_IF:
        check_stmt(c, s->u.if_.then_s);
        check_stmt(c, s->u.if_.else_s);
        return;
    case ST_LET:
        check_stmt(c, s->u.let.body);
        return;
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
        check_stmt(c, s->u.alloc.body);
        return;
    }
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n; i++)
            check_stmt(c, s->u.seq.stmts[i]);
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
    check_stmt(&c, k->body);
    if (c.st != RV_OK)
        return c.st;
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
    cg_analyze(&e, k->body, &written);
    Buf body = {0};
    cg_emit_stmts(&e, k, k->body, &written, 1, &body);

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
    buf_puts(&b, buf_str(&body));
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
    buf_free(&body);
    ptrmap_free(&written);
    cg_emit_free(&e);
    return RV_OK;
}
