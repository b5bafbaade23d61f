/*
 * codegen.h — loop IR to source code: the map of src/codegen.
 *
 * Two back ends share one expression printer. The C back end turns Kernels
 * (src/lower) into one C11 translation unit that includes only ravel_rt.h
 * (the kernel ABI) and <math.h>; the JIT compiles it to a shared object.
 * The CUDA back end turns a kernel whose outer loops are bound to GPU
 * blocks and threads into a `__global__` function plus a launch
 * description, compiled by NVRTC.
 *
 * Generated code is meant to be read: variables carry the IR's names (made
 * unique per kernel), index arithmetic is int64_t, parentheses are the ones
 * C needs, one statement per line, and each kernel starts with a comment
 * listing its parameters.
 *
 * Files:
 *   c_expr.c   names, C types and expressions (both targets), the small
 *              inline helpers expressions call (floordiv, NaN-propagating
 *              min/max, sigmoid, gelu, ...)
 *   c.c        statements, parallel-loop outlining, kernels, preludes and
 *              the translation unit
 *   c_extern.c the support library for extern calls (matmul_nt, matmul_nn,
 *              softmax_rows), emitted into the translation unit
 *   c_vector.c explicit vector code (GCC/Clang vector extensions) for
 *              vector loops of constant extent, with scalar fallback
 *   c_vmath.c  math functions on vector types (exp, log, tanh, erf, ...)
 *   cuda.c     CUDA C and launch descriptions
 *   cuda_sync.c the barriers a CUDA kernel needs: __syncthreads() between
 *              a block's threads, grid barriers in a recursion's kernel
 *   c_aot.c    ahead-of-time output (`ravel build`): the C unit plus host
 *              code and a header, standalone over ravel_rt.h
 */
#ifndef RAVEL_CODEGEN_H
#define RAVEL_CODEGEN_H

#include "lower/lower.h"
#include "plan/plan.h"

/* ---- c_expr.c ---- */

/* C precedence levels (higher binds tighter), of the scalar (c_expr.c)
 * and vector (c_vector.c) printers. */
enum {
    P_LOWEST = 0,
    P_COND = 3,    /* ?: */
    P_OR = 4,      /* || */
    P_AND = 5,     /* && */
    P_BOR = 6,     /* | (vector masks) */
    P_BAND = 8,    /* & (vector masks) */
    P_EQ = 9,      /* == != */
    P_REL = 10,    /* < <= > >= */
    P_ADD = 12,    /* + - */
    P_MUL = 13,    /* * / % */
    P_UNARY = 15,  /* - ! casts */
    P_POSTFIX = 16 /* calls, subscripts, names, literals */
};

typedef enum CgTarget {
    CG_TARGET_C,    /* C11 + GNU attributes, host code */
    CG_TARGET_CUDA, /* CUDA C for NVRTC: no headers, device helpers */
    CG_TARGET_COUNT
} CgTarget;

/* The inline helper functions an expression may call; each is emitted
 * once per translation unit and dtype, only when used. */
typedef enum CgHelper {
    CG_H_FLOORDIV, /* ints: rounds toward -inf */
    CG_H_FLOORMOD, /* ints: sign of the divisor */
    CG_H_MIN,      /* ints; floats propagate NaN like the interpreter */
    CG_H_MAX,
    CG_H_ABS, /* ints (floats use fabs) */
    CG_H_SIGMOID,
    CG_H_GELU, /* exact: x/2 (1 + erf(x/sqrt 2)) */
    CG_H_COUNT
} CgHelper;

/* Vector helper kinds c_vector.c can record per unit (its VHelper enum). */
#define CG_VEC_HELPERS 24

/* Naming and expression state of one translation unit being emitted.
 * Names are given per object (Axis, Size, Buffer) and are unique within
 * the current kernel; global names (functions, structs) are unique within
 * the unit and always start with "kernel_" or "rv_", which local names
 * never do, so a local can never shadow a global. */
typedef struct CgEmit {
    CgTarget target;
    Arena *arena;                 /* names */
    StrMap globals;               /* names taken in the unit */
    StrMap locals;                /* names taken in the current kernel */
    PtrMap names;                 /* Axis*, Size*, Buffer* -> name (current kernel) */
    PtrMap scalars;               /* Buffer* held in a scalar variable (1-element local) */
    PtrMap unread;                /* scalars nothing loads (an empty reduction's accumulator) */
    PtrMap vregs;                 /* Buffer* held in a vector variable (a vector of a register tile) */
    PtrMap shared;                /* CUDA: Buffer* of a local shared by a block's threads */
    PtrMap lets;                  /* Axis* of the LETs around the statement -> value (C) */
    unsigned helpers[CG_H_COUNT]; /* bit (1 << dtype) per helper used */
    /* c_vector.c: per vector helper kind, bit 8 * dtype + log2(lanes) per
     * vector type it is used on */
    uint64_t vec_use[CG_VEC_HELPERS];
    /* CUDA, a persistent kernel (cuda.c): a bound loop strides over the
     * grid (`for (x = blockIdx.x; x < E; x += gridDim.x)`), not guarded */
    bool gpu_strided;
} CgEmit;

void cg_emit_init(CgEmit *e, CgTarget t);
void cg_emit_free(CgEmit *e);
/* Forgets the current kernel's names (globals stay). */
void cg_emit_begin_kernel(CgEmit *e);
/* The C spelling of a dtype: "float", "int64_t", ... (bool: "uint8_t"). */
const char *cg_ctype(rv_dtype t);
/* The name of `obj` in the current kernel, made from `hint` on first use:
 * sanitized to an identifier, kept clear of keywords, library names and
 * the reserved prefixes, and suffixed _1, _2, ... until unique. */
const char *cg_name(CgEmit *e, const void *obj, const char *hint);
/* A fresh local name (not bound to an object). */
const char *cg_fresh(CgEmit *e, const char *hint);
/* A fresh global name (a function or struct of the unit). With a suffix,
 * the name + suffix is free as well and reserved with it (a kernel and its
 * "_prelude"). */
const char *cg_global(CgEmit *e, const char *hint);
const char *cg_global_with(CgEmit *e, const char *hint, const char *suffix);
/* Appends expression `x` with the parentheses C needs. Asserts on
 * tensor-level nodes (READ, UFCALL, REDUCE): lowering removes them. */
void cg_expr(CgEmit *e, Buf *b, const Expr *x);
/* How tightly cg_expr's text of x binds (a P_ level). */
int cg_expr_prec(const Expr *x);
/* `x` as the right operand of a comparison (`i < x`): parenthesized when
 * cg_expr would print a conditional (?:) at its top. */
void cg_expr_operand(CgEmit *e, Buf *b, const Expr *x);
/* What a helper template's placeholders stand for: dtype t, and for a
 * vector helper its lanes (0 for scalar helpers) and mask dtype. */
typedef struct CgTemplate {
    rv_dtype t;
    int lanes;
    rv_dtype mask;
    CgTarget target; /* $Q: CUDA device functions */
} CgTemplate;
/* Appends `tmpl` with its placeholders replaced: $T the C type, $A an
 * accumulator's C type, $S the suffix of helper names (f32, f32x16), $F
 * the libm and float-literal suffix, $Q the function qualifiers; for
 * vector helpers $V the vector type, $I its mask type, $E the element
 * type, $N the lanes, $B the bytes, $W the mask lane's largest value. */
void cg_put_template(Buf *b, const char *tmpl, const CgTemplate *v);
/* The helper definitions recorded in e->helpers. */
void cg_emit_helpers(const CgEmit *e, Buf *b);
/* True when x is the integer constant 0. */
bool cg_is_zero(const Expr *x);

/* ---- c_extern.c ---- */

/* Writes the name of the support function for extern kernel `kernel` on
 * `dtype` ("rv_matmul_nt_f32"); false when there is none. */
bool cg_extern_fn(const char *kernel, rv_dtype dtype, char name[64]);
/* Appends the definition of that function. */
void cg_extern_define(Buf *b, const char *kernel, rv_dtype dtype);

/* ---- c_vector.c ---- */

/* Explicit vector code for the LOOP_VECTOR loop `s` (C target), appended
 * to `out` at `indent` levels: one block computing lanes [0, P) with GCC
 * vector types, P the largest power of two <= the loop's constant extent.
 * Returns P; the caller runs iterations [P, extent) as scalar code. An
 * extent that is not a constant but at most 16 (a variable loop's last,
 * partial vector) is one masked vector: returns -1, every iteration done.
 * Returns 0 and appends nothing when the loop cannot be vectorized, with the
 * reason in *why ("its extent is not a constant", ...). Expressions may be
 * rebuilt in module m (lane 0's index). The vector types and helpers used
 * are recorded in e->vec_use. */
int64_t cg_vector_loop(CgEmit *e, Module *m, const Stmt *s, int indent, Buf *out, const char **why);
/* Explicit vector code for a serial loop `s` whose iterations are
 * independent element-wise stores (c.c's plain_map), appended to `out`:
 * whole vectors of 16 lanes (or, for a constant extent up to 64, as
 * cg_vector_loop). Returns the C expression of the first iteration left to
 * the caller's scalar loop, or NULL when the body does not vectorize. */
const char *cg_vector_map(CgEmit *e, Module *m, const Stmt *s, int indent, Buf *out);
/* The definitions of the vector types and helpers recorded in e->vec_use
 * (cg_emit_helpers calls it). */
void cg_vector_helpers(const CgEmit *e, Buf *b);

/* Records that the unit uses rv_transpose_<t>x<lanes> (c_transpose.c) and
 * returns its name. */
const char *cg_vector_use_transpose(CgEmit *e, rv_dtype t, int lanes);
/* The vector type of `lanes` t's ("rv_f32x16"), emitted with the unit. */
const char *cg_vector_type(CgEmit *e, rv_dtype t, int lanes);

/* ---- c_transpose.c ---- */

/* The unrolled loop `s` over c (constant extent C) around a vector loop
 * over r (constant extent R), LETs between, whose one statement is
 * dst[d + D*c + r] = src[s + c + S*r]: appended to `out` as one in-register
 * transpose of the R x C block (R and C at most one native vector: 16
 * lanes of 4 bytes, 8 of 8). False, appending nothing, for any other loop. */
bool cg_transpose_loop(CgEmit *e, Module *m, const Stmt *s, int indent, Buf *out);
/* The definition of rv_transpose_<t>x<lanes>. */
void cg_transpose_helper(Buf *b, rv_dtype t, int lanes);

/* ---- c_vmath.c ---- */

/* The template of the vector helper for math node kind k on dtype t (f32
 * or f64); NULL for kinds without one. Placeholders: see c_vmath.c. */
const char *cg_vmath_template(ExprKind k, rv_dtype t);
/* The other math helpers that helper calls (written to deps); their count. */
int cg_vmath_deps(ExprKind k, rv_dtype t, ExprKind deps[2]);

/* ---- c.c ---- */

/* A translation unit holding several kernels. */
typedef struct CgUnit {
    char *source; /* base_free */
    int n;
    char **kernel_syms;  /* per kernel: the kernel function's symbol */
    char **prelude_syms; /* per kernel: its prelude's symbol, or NULL without one */
} CgUnit;

/* Emits kernels ks[0..n) into one C translation unit. Kernel k's symbol is
 * "kernel_" + its name (sanitized, suffixed when two would collide), its
 * prelude's that symbol + "_prelude". */
void cg_c_module(Kernel *const *ks, int n, CgUnit *out);
void cg_unit_free(CgUnit *u);
/* One kernel as a complete translation unit (base_free the result). */
char *cg_c_kernel(const Kernel *k);
/* c_balance.c: the work of one iteration of parallel loop s as an
 * expression of its variable, safe to evaluate before the loop for every
 * row; NULL when it does not depend on the variable (nothing to balance).
 * written: the buffers the kernel stores to. */
Expr *cg_loop_work(Module *m, const Stmt *s, const PtrMap *written);
/* For other back ends: the prepass over a function body (the buffers it
 * stores to go into *written; one-element locals it can keep in scalars
 * into e->scalars), then its statements for e->target, indented `indent`
 * levels. Names of parameters should be bound first (cg_name), so they
 * stay clean. CUDA: loops bound to GPU indices become the index with a
 * bounds guard, parallel/vector loops run serially, barriers are
 * __syncthreads(); scratch allocations and extern calls must have been
 * rejected by the caller. */
void cg_analyze(CgEmit *e, const Stmt *s, PtrMap *written);
void cg_emit_stmts(CgEmit *e, const Kernel *k, const Stmt *s, const PtrMap *written, int indent,
                   Buf *out);

/* ---- c_aot.c ---- */

/* A compiled model as a standalone C library: NAME.c and NAME.h. */
typedef struct CgAot {
    char *source; /* NAME.c (base_free) */
    char *header; /* NAME.h (base_free) */
} CgAot;

/* Wraps unit `u` (cg_c_module over ks[0..n), the module's kernels from
 * lower_module) into NAME.c and NAME.h: kernels renamed NAME_kernel_X, and
 * NAME_run, NAME_numel_X, NAME_default_ctx and NAME_fields, which do on
 * their own what rv_program_run does (see c_aot.c). The kernels may be
 * nvariants variants (ks[variant_first[v]...]: one schedule each) among
 * which `dispatch` picks per run; nvariants 0 or 1: one, no dispatch.
 * `name` must be a C identifier; `src_name` names the source file in
 * comments. threads: 1, NAME_run with a NULL ctx runs serially (no pthreads
 * needed); otherwise it runs parallel loops on a pool of that many threads
 * embedded in NAME.c (0: $RAVEL_NUM_THREADS, else the CPUs; c_aot_pool.c).
 * RV_ERR_UNSUPPORTED (with a message) for layouts the host code cannot
 * walk yet. */
rv_status cg_c_aot(Module *m, Kernel *const *ks, int n, int nvariants, const int *variant_first,
                   const PlanDispatch *dispatch, const CgUnit *u, const char *name,
                   const char *src_name, int threads, CgAot *out);
void cg_aot_free(CgAot *a);

/* ---- c_aot_pool.c ---- */

/* NAME.c's thread pool (`ravel build --threads`): the runtime's
 * threadpool.c embedded, plus static NAME_pool_take(ctx) / NAME_pool_give()
 * around a run with the default context, NAME_set_num_threads and
 * NAME_num_threads. threads: the pool's size until NAME_set_num_threads
 * (0: $RAVEL_NUM_THREADS, else the CPUs). NAME.c must define _GNU_SOURCE
 * before its first include. */
void cg_aot_emit_pool(Buf *b, const char *N, int threads);

/* ---- cuda_sync.c ---- */

/* The bit of a GPU-bound loop kind's dimension: blockIdx.x, .y, .z are
 * bits 0-2, threadIdx.x, .y, .z bits 3-5; 0 for other kinds. */
unsigned cg_cuda_dim_bit(LoopKind k);
#define CG_CUDA_BLOCK_DIMS 07u
#define CG_CUDA_THREAD_DIMS 070u

/* body with __syncthreads() wherever a block's threads would race on the
 * block-shared locals `shared` (Buffer* keys) in *out: before a statement
 * that reads one another thread wrote since the last barrier, or
 * overwrites one another thread read or wrote; only where every thread
 * arrives. dim: the launch's six extents (grid x, y, z, block x, y, z);
 * strided: a persistent kernel's, whose bound loops stride. Refuses
 * (RV_ERR_UNSUPPORTED, *out = body) a race only a barrier under a
 * thread-dependent condition would prevent. */
rv_status cg_cuda_block_barriers(const Kernel *k, Stmt *body, const PtrMap *shared,
                                 Expr *const dim[6], bool strided, Stmt **out);

/* A recursion group's kernel body (its batch loop marked gpu_batches)
 * with grid barriers wherever the threads of one launch would race on
 * device memory: between two statements at its top (under lets,
 * allocations, sequences and the batch loop) when the second reads or
 * writes what one before it wrote since the last barrier (or writes what
 * it read), before the batch loop, and after every batch (the next batch
 * reads this one's nodes). */
Stmt *cg_cuda_grid_barriers(Module *m, Stmt *body);

/* ---- cuda.c ---- */

/* One more entry point of a recursion group's unit launched per batch
 * (gpu_batches("launch")): its grid and block extents over sizes, UF
 * arrays and `batch`; `batch` (the batch loop's variable, NULL: launched
 * once) is its last argument, an int64_t, and the entry points with one
 * form one loop on the host over `batches` launches, in order. */
typedef struct CgCudaFn {
    char *sym;
    Expr *grid[3];
    Expr *block[3];
    Expr *batch;   /* EX_VAR of the batch loop, or NULL */
    Expr *batches; /* its extent */
} CgCudaFn;

/* How to launch a CUDA kernel: grid and block extents as expressions over
 * sizes (NULL = 1), evaluated by the host before the launch. A recursion
 * group's unit has `nfns` entry points instead (fns[0] is sym_out's), or
 * is `persistent`: one entry point launched cooperatively, its grid as
 * many blocks as the device holds at once (the occupancy), its block the
 * extents here (constants), the batches separated by a grid barrier. */
typedef struct CgLaunch {
    Expr *grid[3];
    Expr *block[3];
    int nfns;
    CgCudaFn *fns; /* owned: cg_cuda_launch_free */
    bool persistent;
} CgLaunch;

void cg_cuda_launch_free(CgLaunch *l);

/* A CUDA translation unit for kernel k: `extern "C" __global__ void
 * kernel_NAME(...)` taking the kernel's sizes by value and its buffers as
 * pointers, in parameter order. Loops bound to GPU blocks/threads become
 * index variables with a bounds guard; other loops stay serial in each
 * thread. RV_ERR_UNSUPPORTED (with a message) for what the CUDA back end
 * cannot express yet: extern calls, scratch (global) allocations, GPU loop
 * extents that depend on other loops. */
rv_status cg_cuda_kernel(const Kernel *k, char **src_out, char **sym_out, CgLaunch *launch);

#endif
