/*
 * test_codegen.c — the C and CUDA back ends and compiled programs.
 *
 * Kernels are built by hand in the loop IR (the constructors of
 * src/lower/stmt.c), emitted as C, compiled by the JIT and called through
 * the ravel_rt.h ABI; results are compared with values computed here in
 * plain C (libm for math functions, C semantics for integer division).
 * Checks on the source text pin the readability promises (named locals,
 * restrict, compound updates of accumulators). CUDA sources are compiled
 * with NVRTC where it is installed. Compiled programs (rv_program_*) are
 * compared with the reference interpreter on the same bindings.
 *
 * Every test compiles into a private cache directory, removed at the end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "harness.h"
#include "ir/layout.h"
#include "jit/jit.h"
#include "ravel_rt.h"

static char cache_dir[PATH_MAX];

/* In a sanitizer build the generated code is instrumented too. */
#if defined(__SANITIZE_ADDRESS__)
#define KERNEL_FLAGS "-fopenmp-simd", "-fsanitize=address,undefined", "-fno-omit-frame-pointer"
#define PROGRAM_CFLAGS "-fsanitize=address,undefined -fno-omit-frame-pointer"
#else
#define KERNEL_FLAGS "-fopenmp-simd"
#define PROGRAM_CFLAGS NULL
#endif

/* ---- building kernels ---- */

/* A kernel under construction: its module and parameters. */
typedef struct KB {
    Module *m;
    Vec(Param) params;
} KB;

static Size *kb_size(KB *kb, const char *name, int64_t lo, int64_t hi) {
    Size *s = rv_size_new(kb->m, name, lo, hi);
    Param p = {.kind = PARAM_SIZE, .size = s};
    vec_push(&kb->params, p);
    return s;
}

static Buffer *kb_buf(KB *kb, ParamKind k, const char *name, rv_dtype t, Expr *size) {
    Buffer *b = ir_buffer_new(kb->m, name, t, size, k == PARAM_AUX ? BUF_AUX : BUF_ARG);
    Param p = {.kind = k, .buf = b};
    vec_push(&kb->params, p);
    return b;
}

static Kernel *kb_kernel(KB *kb, const char *name, Stmt *body, Stmt *prelude) {
    Kernel *k = arena_alloc(kb->m->arena, sizeof(Kernel));
    k->name = name;
    k->m = kb->m;
    k->nparams = kb->params.len;
    k->params = arena_memdup(kb->m->arena, kb->params.data, sizeof(Param) * (size_t)kb->params.len);
    k->prelude = prelude;
    k->body = body;
    vec_free(&kb->params);
    return k;
}

/* Short expression builders. */
static Expr *I(Module *m, int64_t v) {
    return ir_int(m, v);
}
static Expr *F(Module *m, double v) {
    return ir_float(m, RV_F32, v);
}
static Expr *bin(Module *m, ExprKind k, Expr *a, Expr *b) {
    Expr *r = ir_binary(m, k, a, b);
    RV_ASSERT(r);
    return r;
}
static Expr *ld(Module *m, Buffer *b, Expr *i) {
    return ir_load(m, b, i);
}
/* q * n + i, folded for q = 0 and 1 as the simplifier would. */
static Expr *slot(Module *m, int q, Expr *n, Expr *i) {
    if (q == 0)
        return i;
    return bin(m, EX_ADD, q == 1 ? n : bin(m, EX_MUL, I(m, q), n), i);
}
static Stmt *loop(Module *m, Axis *v, LoopKind k, Stmt *body) {
    return lower_for(m, v, v->extent, k, body);
}
static Stmt *seq2(Module *m, Stmt *a, Stmt *b) {
    Stmt *s[2] = {a, b};
    return lower_seq(m, 2, s);
}
static Stmt *seq3(Module *m, Stmt *a, Stmt *b, Stmt *c) {
    Stmt *s[3] = {a, b, c};
    return lower_seq(m, 3, s);
}

/* ---- compiling and calling ---- */

static void *scratch_alloc(struct rv_rt_ctx *ctx, size_t n) {
    (void)ctx;
    return aligned_alloc(RV_RT_ALIGN,
                         (n + RV_RT_ALIGN - 1) / RV_RT_ALIGN * RV_RT_ALIGN + RV_RT_ALIGN);
}
static void scratch_free(struct rv_rt_ctx *ctx, void *p) {
    (void)ctx;
    free(p);
}

/* A serial parallel-for: one chunk on the calling thread. */
static void serial_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *closure) {
    if (n > 0)
        fn(closure, 0, n, 0);
}

static struct rv_rt_ctx make_ctx(bool parallel) {
    struct rv_rt_ctx ctx = {.abi_version = RV_RT_ABI_VERSION,
                            .num_threads = parallel ? 64 : 1,
                            .parallel_for = parallel ? ravel_rt_parallel_for : serial_for,
                            .alloc = scratch_alloc,
                            .free = scratch_free};
    return ctx;
}

/* Compiles C source with -fopenmp-simd; prints the error and the source
 * on failure. */
static JitLib *compile_c(const char *src) {
    const char *flags[] = {KERNEL_FLAGS};
    JitOptions opt = {
        .cache_dir = cache_dir, .extra_flags = flags, .n_extra_flags = RV_COUNT(flags)};
    JitLib *lib = NULL;
    rv_status st = jit_compile(src, &opt, &lib);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "%s\n--- source ---\n%s\n", rv_last_error(), src);
    return lib;
}

/* Emits, compiles and loads one kernel; *src gets the source. */
static rv_rt_kernel_fn build(const Kernel *k, char **src, JitLib **lib, rv_rt_prelude_fn *pre) {
    *src = cg_c_kernel(k);
    if (getenv("RAVEL_TEST_SHOW")) /* to read the generated code */
        printf("%s\n", *src);
    *lib = compile_c(*src);
    if (!*lib)
        return NULL;
    char sym[256];
    snprintf(sym, sizeof sym, "kernel_%s", k->name);
    if (pre) {
        char psym[300];
        snprintf(psym, sizeof psym, "%s_prelude", sym);
        *pre = (rv_rt_prelude_fn)jit_fn(*lib, psym);
        CHECK(*pre != NULL);
    }
    rv_rt_kernel_fn fn = (rv_rt_kernel_fn)jit_fn(*lib, sym);
    CHECK(fn != NULL);
    return fn;
}

static void *aligned(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    memset(p, 0, (n + 63) / 64 * 64 + 64);
    return p;
}

/* ---- tests ---- */

/* Y[i] = X[i] * 2 + 1 */
static void test_elementwise(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *N = kb_size(&kb, "N", 0, 1 << 20);
    Expr *n = ir_size(m, N);
    Buffer *X = kb_buf(&kb, PARAM_TENSOR, "X", RV_F32, n);
    Buffer *Y = kb_buf(&kb, PARAM_TENSOR, "Y", RV_F32, n);
    Axis *i = lower_loop_var(m, "i", n);
    Expr *v = bin(m, EX_ADD, bin(m, EX_MUL, ld(m, X, i->var), F(m, 2)), F(m, 1));
    Kernel *k = kb_kernel(&kb, "Y", loop(m, i, LOOP_SERIAL, lower_store(m, Y, i->var, v)), NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK_STR_CONTAINS(src, "int32_t kernel_Y(const int64_t *sizes, void *const *bufs, "
                            "struct rv_rt_ctx *ctx) {");
    CHECK_STR_CONTAINS(src, "    const int64_t N = sizes[0];\n");
    CHECK_STR_CONTAINS(src, "    const float *restrict X = __builtin_assume_aligned(bufs[0], 64);");
    CHECK_STR_CONTAINS(src, "    float *restrict Y = __builtin_assume_aligned(bufs[1], 64);");
    /* element-wise: vectors of 16 lanes by ravel, the rest scalar */
    CHECK_STR_CONTAINS(src, "    for (int64_t i_v = 0; i_v < (N) / 16 * 16; i_v += 16) {\n");
    CHECK_STR_CONTAINS(src, "    for (int64_t i = (N) / 16 * 16; i < N; i++) {\n"
                            "        Y[i] = X[i] * 2.0f + 1.0f;\n");
    if (fn) {
        enum { NN = 1003 };
        float *x = aligned(NN * sizeof(float)), *y = aligned(NN * sizeof(float));
        for (int j = 0; j < NN; j++)
            x[j] = (float)j * 0.5f - 7;
        int64_t sizes[1] = {NN};
        void *bufs[2] = {x, y};
        struct rv_rt_ctx ctx = make_ctx(false);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        int bad = 0;
        for (int j = 0; j < NN; j++)
            bad += y[j] != x[j] * 2.0f + 1.0f;
        CHECK_EQ_INT(bad, 0);
        /* zero iterations */
        sizes[0] = 0;
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        free(x);
        free(y);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* Y[i] = sum(j < M) X[i*M + j] through a one-element accumulator, and
 * Z[i] = max(j < M) X[i*M + j] with the NaN-propagating max. */
static void test_reduction(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *N = kb_size(&kb, "N", 0, 1000), *M = kb_size(&kb, "M", 0, 1000);
    Expr *n = ir_size(m, N), *mm = ir_size(m, M);
    Buffer *X = kb_buf(&kb, PARAM_TENSOR, "X", RV_F32, bin(m, EX_MUL, n, mm));
    Buffer *Y = kb_buf(&kb, PARAM_TENSOR, "Y", RV_F32, n);
    Buffer *Z = kb_buf(&kb, PARAM_TENSOR, "Z", RV_F32, n);
    Buffer *acc = ir_buffer_new(m, "acc", RV_F32, I(m, 1), BUF_LOCAL);
    Buffer *best = ir_buffer_new(m, "best", RV_F32, I(m, 1), BUF_LOCAL);
    Axis *i = lower_loop_var(m, "i", n), *j = lower_loop_var(m, "j", mm);
    Expr *zero = I(m, 0);
    Expr *x = ld(m, X, bin(m, EX_ADD, bin(m, EX_MUL, i->var, mm), j->var));
    Stmt *upd = seq2(m, lower_store(m, acc, zero, bin(m, EX_ADD, ld(m, acc, zero), x)),
                     lower_store(m, best, zero, bin(m, EX_MAX, ld(m, best, zero), x)));
    Stmt *body = seq3(
        m, seq2(m, lower_store(m, acc, zero, F(m, 0)), lower_store(m, best, zero, F(m, -INFINITY))),
        loop(m, j, LOOP_VECTOR, upd),
        seq2(m, lower_store(m, Y, i->var, ld(m, acc, zero)),
             lower_store(m, Z, i->var, ld(m, best, zero))));
    body = lower_alloc(m, acc, lower_alloc(m, best, body));
    Kernel *k = kb_kernel(&kb, "Y", loop(m, i, LOOP_SERIAL, body), NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK_STR_CONTAINS(src, "        float acc;\n");
    CHECK_STR_CONTAINS(src, "        #pragma omp simd\n        for (int64_t j = 0; j < M; j++) {");
    CHECK_STR_CONTAINS(src, "        acc = 0.0f;\n");
    CHECK_STR_CONTAINS(src, "            acc += X[i * M + j];\n");
    CHECK_STR_CONTAINS(src, "            best = rv_max_f32(best, X[i * M + j]);\n");
    CHECK_STR_CONTAINS(src, "        best = -INFINITY;\n");
    CHECK_STR_CONTAINS(src, "        Y[i] = acc;\n");
    if (fn) {
        enum { NN = 37, MM = 101 };
        float *xs = aligned(NN * MM * sizeof(float)), *ys = aligned(NN * sizeof(float)),
              *zs = aligned(NN * sizeof(float));
        for (int r = 0; r < NN * MM; r++)
            xs[r] = (float)((r * 7919) % 113) - 50;
        xs[5 * MM + 3] = NAN; /* row 5's max is NaN, as in the interpreter */
        int64_t sizes[2] = {NN, MM};
        void *bufs[3] = {xs, ys, zs};
        struct rv_rt_ctx ctx = make_ctx(false);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        int bad = 0;
        for (int r = 0; r < NN; r++) {
            float s = 0, mx = -INFINITY;
            for (int c = 0; c < MM; c++) {
                s += xs[r * MM + c];
                mx =
                    isnan(mx) || xs[r * MM + c] > mx || isnan(xs[r * MM + c]) ? xs[r * MM + c] : mx;
                if (isnan(mx))
                    break;
            }
            if (r == 5) {
                bad += !isnan(zs[r]);
                continue;
            }
            bad += fabsf(ys[r] - s) > 1e-3f || zs[r] != mx;
        }
        CHECK_EQ_INT(bad, 0);
        free(xs);
        free(ys);
        free(zs);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* A vector loop whose iterations update one memory element gets no simd
 * pragma (it would assert independence). */
static void test_vector_safety(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *N = kb_size(&kb, "N", 0, 1000), *M = kb_size(&kb, "M", 0, 1000);
    Expr *n = ir_size(m, N), *mm = ir_size(m, M);
    Buffer *X = kb_buf(&kb, PARAM_TENSOR, "X", RV_F32, bin(m, EX_MUL, n, mm));
    Buffer *W = kb_buf(&kb, PARAM_TENSOR, "W", RV_F32, n);
    Axis *i = lower_loop_var(m, "i", n), *j = lower_loop_var(m, "j", mm);
    Expr *x = ld(m, X, bin(m, EX_ADD, bin(m, EX_MUL, i->var, mm), j->var));
    Stmt *body = seq2(
        m, lower_store(m, W, i->var, F(m, 0)),
        loop(m, j, LOOP_VECTOR, lower_store(m, W, i->var, bin(m, EX_ADD, ld(m, W, i->var), x))));
    Kernel *k = kb_kernel(&kb, "W", loop(m, i, LOOP_SERIAL, body), NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK(strstr(src, "#pragma omp simd") == NULL);
    CHECK_STR_CONTAINS(src, "/* vector loop left to the compiler: its iterations update shared "
                            "elements */");
    CHECK_STR_CONTAINS(src, "W[i] += X[i * M + j];");
    if (fn) {
        enum { NN = 13, MM = 29 };
        float *xs = aligned(NN * MM * 4), *ws = aligned(NN * 4);
        for (int q = 0; q < NN * MM; q++)
            xs[q] = (float)(q % 7);
        int64_t sizes[2] = {NN, MM};
        void *bufs[2] = {xs, ws};
        struct rv_rt_ctx ctx = make_ctx(false);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        int bad = 0;
        for (int r = 0; r < NN; r++) {
            float sum = 0;
            for (int c = 0; c < MM; c++)
                sum += xs[r * MM + c];
            bad += ws[r] != sum;
        }
        CHECK_EQ_INT(bad, 0);
        free(xs);
        free(ws);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* Serial loops that only map are vectorized by ravel (GCC's loop
 * vectorizer is off in the JIT); one with a branch, a reduction into a
 * scalar, or a load of another iteration's element is not. The kernel
 * runs at an extent that leaves a scalar rest. */
static void test_map_vectorized(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *N = kb_size(&kb, "N", 1, 1000);
    Expr *n = ir_size(m, N), *zero = I(m, 0);
    Buffer *X = kb_buf(&kb, PARAM_TENSOR, "X", RV_F32, n);
    Buffer *Y = kb_buf(&kb, PARAM_TENSOR, "Y", RV_F32, bin(m, EX_ADD, n, I(m, 1)));
    Buffer *Z = kb_buf(&kb, PARAM_TENSOR, "Z", RV_F32, I(m, 1));
    Buffer *acc = ir_buffer_new(m, "acc", RV_F32, I(m, 1), BUF_LOCAL);
    Axis *a = lower_loop_var(m, "a", n), *b = lower_loop_var(m, "b", n),
         *c = lower_loop_var(m, "c", n), *d = lower_loop_var(m, "d", n);
    Expr *xa = ld(m, X, a->var);
    Stmt *map = loop(m, a, LOOP_SERIAL,
                     seq2(m, lower_store(m, Y, a->var, bin(m, EX_MUL, xa, F(m, 2))),
                          lower_store(m, Y, a->var, bin(m, EX_ADD, ld(m, Y, a->var), F(m, 1)))));
    Stmt *branch = loop(m, b, LOOP_SERIAL,
                        lower_if(m, bin(m, EX_LT, b->var, I(m, 8)),
                                 lower_store(m, Y, b->var, ld(m, X, b->var)), NULL));
    Stmt *reduce = lower_alloc(
        m, acc,
        seq3(m, lower_store(m, acc, zero, F(m, 0)),
             loop(m, c, LOOP_SERIAL,
                  lower_store(m, acc, zero, bin(m, EX_ADD, ld(m, acc, zero), ld(m, X, c->var)))),
             lower_store(m, Z, zero, ld(m, acc, zero))));
    Stmt *shift = loop(m, d, LOOP_SERIAL,
                       lower_store(m, Y, d->var, ld(m, Y, bin(m, EX_ADD, d->var, I(m, 1)))));
    Stmt *all[4] = {map, branch, reduce, shift};
    Kernel *k = kb_kernel(&kb, "Y", lower_seq(m, 4, all), NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK_STR_CONTAINS(src, "element-wise loop over a as vectors of 16");
    CHECK_STR_CONTAINS(src, "for (int64_t a = (N) / 16 * 16; a < N; a++) {");
    CHECK(strstr(src, "loop over b") == NULL);
    CHECK(strstr(src, "loop over c") == NULL);
    CHECK(strstr(src, "loop over d") == NULL);
    if (fn) {
        enum { NN = 37 };
        float *xs = aligned(NN * 4), *ys = aligned((NN + 1) * 4), *zs = aligned(4);
        for (int q = 0; q < NN; q++)
            xs[q] = (float)q;
        ys[NN] = 100;
        int64_t sizes[1] = {NN};
        void *bufs[3] = {xs, ys, zs};
        struct rv_rt_ctx ctx = make_ctx(false);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        int bad = 0;
        for (int q = 0; q < NN; q++) /* after the map, the branch, then the shift */
            bad += ys[q] != (q + 1 < 8 ? (float)(q + 1) : q + 1 < NN ? 2.0f * (q + 1) + 1 : 100);
        CHECK_EQ_INT(bad, 0);
        CHECK(zs[0] == (float)(NN * (NN - 1) / 2));
        free(xs);
        free(ys);
        free(zs);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* for rep < 2: parallel for i < N: let r = (rep * N + i) * M:
 *   tmp = scratch[M]; vector for j < M: tmp[j] = X[i*M + j] * (rep + 1)
 *   for j < M: Y[r + j] = tmp[M - 1 - j]
 * The outlined body captures sizes, the outer loop variable, buffers and
 * ctx (for the scratch allocation). */
static void test_parallel(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *N = kb_size(&kb, "N", 0, 100000), *M = kb_size(&kb, "M", 1, 1000);
    Expr *n = ir_size(m, N), *mm = ir_size(m, M);
    Buffer *X = kb_buf(&kb, PARAM_TENSOR, "X", RV_F32, bin(m, EX_MUL, n, mm));
    Buffer *Y =
        kb_buf(&kb, PARAM_TENSOR, "Y", RV_F32, bin(m, EX_MUL, I(m, 2), bin(m, EX_MUL, n, mm)));
    Buffer *tmp = ir_buffer_new(m, "tmp", RV_F32, mm, BUF_GLOBAL);
    Axis *rep = lower_loop_var(m, "rep", I(m, 2)), *i = lower_loop_var(m, "i", n);
    Axis *j = lower_loop_var(m, "j", mm), *j2 = lower_loop_var(m, "j", mm);
    Axis *r = lower_loop_var(m, "r", NULL);
    Expr *scale = ir_cast(m, RV_F32, bin(m, EX_ADD, rep->var, I(m, 1)));
    Stmt *fill =
        loop(m, j, LOOP_VECTOR,
             lower_store(m, tmp, j->var,
                         bin(m, EX_MUL,
                             ld(m, X, bin(m, EX_ADD, bin(m, EX_MUL, i->var, mm), j->var)), scale)));
    Expr *rev = bin(m, EX_SUB, bin(m, EX_SUB, mm, I(m, 1)), j2->var);
    Stmt *copy = loop(m, j2, LOOP_SERIAL,
                      lower_store(m, Y, bin(m, EX_ADD, r->var, j2->var), ld(m, tmp, rev)));
    Expr *rv = bin(m, EX_MUL, bin(m, EX_ADD, bin(m, EX_MUL, rep->var, n), i->var), mm);
    Stmt *body = lower_let(m, r, rv, lower_alloc(m, tmp, seq2(m, fill, copy)));
    Stmt *nest = loop(m, rep, LOOP_SERIAL, loop(m, i, LOOP_PARALLEL, body));
    Kernel *k = kb_kernel(&kb, "P", nest, NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK_STR_CONTAINS(src, "struct kernel_P_par0 {\n");
    CHECK_STR_CONTAINS(
        src, "static void kernel_P_par0(void *arg, int64_t begin, int64_t end, int tid) {");
    CHECK_STR_CONTAINS(src, "const int64_t rep = env->rep;");
    CHECK_STR_CONTAINS(src, "struct rv_rt_ctx *ctx = env->ctx;");
    CHECK_STR_CONTAINS(src, "ctx->parallel_for(N, kernel_P_par0, &par0);");
    CHECK_STR_CONTAINS(src, "#pragma omp simd\n");
    CHECK_STR_CONTAINS(src, "float *restrict tmp = ctx->alloc(ctx, (size_t)(M) * sizeof(float));");
    CHECK_STR_CONTAINS(src, "for (int64_t j_1 = (M) / 16 * 16; j_1 < M; j_1++) {");
    for (int par = 0; fn && par < 2; par++) {
        enum { NN = 1001, MM = 67 };
        float *xs = aligned(NN * MM * sizeof(float)), *ys = aligned(2 * NN * MM * sizeof(float));
        for (int q = 0; q < NN * MM; q++)
            xs[q] = (float)(q % 1000);
        int64_t sizes[2] = {NN, MM};
        void *bufs[2] = {xs, ys};
        struct rv_rt_ctx ctx = make_ctx(par);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        int bad = 0;
        for (int rp = 0; rp < 2; rp++)
            for (int a = 0; a < NN; a++)
                for (int c = 0; c < MM; c++)
                    bad +=
                        ys[(rp * NN + a) * MM + c] != xs[a * MM + (MM - 1 - c)] * (float)(rp + 1);
        CHECK_EQ_INT(bad, 0);
        free(xs);
        free(ys);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* The prelude of a packed ragged tensor of bsz rows of len[b] elements:
 * off[0] = 0, off[b + 1] = off[b] + len[b]. */
static Stmt *row_starts(Module *m, Buffer *off, Buffer *len, Expr *bsz) {
    Axis *pb = lower_loop_var(m, "b", bsz);
    return seq2(m, lower_store(m, off, I(m, 0), I(m, 0)),
                loop(m, pb, LOOP_SERIAL,
                     lower_store(m, off, bin(m, EX_ADD, pb->var, I(m, 1)),
                                 bin(m, EX_ADD, ld(m, off, pb->var),
                                     ir_cast(m, RV_I64, ld(m, len, pb->var))))));
}

/* A ragged tensor A[b, l < len[b]] stored packed, with the row-start array
 * off computed by the prelude: off[0] = 0, off[b + 1] = off[b] + len[b].
 * Y[off[b] + l] = A[off[b] + l] * (l + 1). */
static void test_ragged(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *B = kb_size(&kb, "B", 0, 100);
    Expr *bsz = ir_size(m, B);
    Buffer *len = kb_buf(&kb, PARAM_UF, "len", RV_I32, bsz);
    Buffer *off = kb_buf(&kb, PARAM_AUX, "off", RV_I64, bin(m, EX_ADD, bsz, I(m, 1)));
    Expr *total = ld(m, off, bsz);
    Buffer *A = kb_buf(&kb, PARAM_TENSOR, "A", RV_F32, total);
    Buffer *Y = kb_buf(&kb, PARAM_TENSOR, "Y", RV_F32, total);
    Stmt *prelude = row_starts(m, off, len, bsz);
    Axis *b = lower_loop_var(m, "b", bsz);
    Axis *l = lower_loop_var(m, "l", ir_cast(m, RV_I64, ld(m, len, b->var)));
    Expr *at = bin(m, EX_ADD, ld(m, off, b->var), l->var);
    Expr *v = bin(m, EX_MUL, ld(m, A, at), ir_cast(m, RV_F32, bin(m, EX_ADD, l->var, I(m, 1))));
    Stmt *body = loop(m, b, LOOP_SERIAL, loop(m, l, LOOP_SERIAL, lower_store(m, Y, at, v)));
    Kernel *k = kb_kernel(&kb, "R", body, prelude);
    char *src;
    JitLib *lib;
    rv_rt_prelude_fn pre = NULL;
    rv_rt_kernel_fn fn = build(k, &src, &lib, &pre);
    CHECK_STR_CONTAINS(src, "int32_t kernel_R_prelude(const int64_t *sizes, void *const *bufs) {");
    CHECK_STR_CONTAINS(src, "    int64_t *restrict off = __builtin_assume_aligned(bufs[1], 64);");
    CHECK_STR_CONTAINS(src,
                       "    const int64_t *restrict off = __builtin_assume_aligned(bufs[1], 64);");
    CHECK_STR_CONTAINS(src, "        off[b + 1] = off[b] + (int64_t)len[b];");
    CHECK_STR_CONTAINS(src, "        for (int64_t l = ((int64_t)len[b]) / 16 * 16; l < (int64_t)len[b]; "
                            "l++) {");
    if (fn && pre) {
        enum { BB = 9 };
        int32_t *lens = aligned(BB * sizeof(int32_t));
        int32_t lv[BB] = {3, 0, 7, 1, 0, 0, 12, 5, 2};
        memcpy(lens, lv, sizeof lv);
        int64_t *offs = aligned((BB + 1) * sizeof(int64_t));
        int64_t sizes[1] = {BB};
        void *bufs[4] = {lens, offs, NULL, NULL};
        CHECK_EQ_INT(pre(sizes, bufs), RV_RT_OK);
        int64_t tot = 0;
        int bad = 0;
        for (int q = 0; q < BB; q++) {
            bad += offs[q] != tot;
            tot += lv[q];
        }
        bad += offs[BB] != tot;
        CHECK_EQ_INT(bad, 0);
        float *as = aligned((size_t)tot * sizeof(float)),
              *ys = aligned((size_t)tot * sizeof(float));
        for (int q = 0; q < tot; q++)
            as[q] = (float)q + 0.25f;
        bufs[2] = as;
        bufs[3] = ys;
        struct rv_rt_ctx ctx = make_ctx(false);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        bad = 0;
        for (int q = 0, at0 = 0; q < BB; at0 += lv[q], q++)
            for (int c = 0; c < lv[q]; c++)
                bad += ys[at0 + c] != as[at0 + c] * (float)(c + 1);
        CHECK_EQ_INT(bad, 0);
        free(lens);
        free(offs);
        free(as);
        free(ys);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* Integer division and remainder on every sign combination: C's
 * truncating / and %, and floordiv/floormod rounding toward -inf, in i64
 * and i32. */
static void test_int_division(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *N = kb_size(&kb, "N", 0, 1000);
    Expr *n = ir_size(m, N);
    Buffer *A = kb_buf(&kb, PARAM_TENSOR, "A", RV_I64, n);
    Buffer *B = kb_buf(&kb, PARAM_TENSOR, "B", RV_I64, n);
    Buffer *A32 = kb_buf(&kb, PARAM_TENSOR, "A32", RV_I32, n);
    Buffer *B32 = kb_buf(&kb, PARAM_TENSOR, "B32", RV_I32, n);
    Buffer *O = kb_buf(&kb, PARAM_TENSOR, "O", RV_I64, bin(m, EX_MUL, I(m, 4), n));
    Buffer *O32 = kb_buf(&kb, PARAM_TENSOR, "O32", RV_I32, bin(m, EX_MUL, I(m, 4), n));
    Axis *i = lower_loop_var(m, "i", n);
    static const ExprKind ops[4] = {EX_DIV, EX_MOD, EX_FLOORDIV, EX_FLOORMOD};
    Stmt *st[8];
    for (int q = 0; q < 4; q++) {
        Expr *at = slot(m, q, n, i->var);
        st[q] = lower_store(m, O, at, bin(m, ops[q], ld(m, A, i->var), ld(m, B, i->var)));
        st[4 + q] = lower_store(m, O32, at, bin(m, ops[q], ld(m, A32, i->var), ld(m, B32, i->var)));
    }
    Kernel *k = kb_kernel(&kb, "D", loop(m, i, LOOP_SERIAL, lower_seq(m, 8, st)), NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK_STR_CONTAINS(src, "O[i] = A[i] / B[i];");
    CHECK_STR_CONTAINS(src, "O[N + i] = A[i] % B[i];");
    CHECK_STR_CONTAINS(src, "O[2 * N + i] = rv_floordiv_i64(A[i], B[i]);");
    CHECK_STR_CONTAINS(src, "O32[3 * N + i] = rv_floormod_i32(A32[i], B32[i]);");
    CHECK_STR_CONTAINS(src, "static inline __attribute__((unused)) int64_t rv_floordiv_i64(int64_t a, int64_t b) {");
    if (fn) {
        int64_t *a = aligned(300 * 8), *b = aligned(300 * 8), *o = aligned(4 * 300 * 8);
        int32_t *a32 = aligned(300 * 4), *b32 = aligned(300 * 4), *o32 = aligned(4 * 300 * 4);
        int cnt = 0;
        for (int x = -9; x <= 9; x++)
            for (int y = -4; y <= 4; y++)
                if (y != 0) {
                    a[cnt] = a32[cnt] = x;
                    b[cnt] = b32[cnt] = y;
                    cnt++;
                }
        a[cnt] = INT64_MIN + 1; /* large magnitudes stay exact in i64 */
        b[cnt] = 3;
        a32[cnt] = b32[cnt] = 1;
        cnt++;
        int64_t sizes[1] = {cnt};
        void *bufs[6] = {a, b, a32, b32, o, o32};
        struct rv_rt_ctx ctx = make_ctx(false);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        int bad = 0;
        for (int q = 0; q < cnt; q++) {
            int64_t want[4] = {a[q] / b[q], a[q] % b[q], 0, 0};
            CHECK(ir_int_arith(EX_FLOORDIV, a[q], b[q], &want[2]) == IA_OK);
            CHECK(ir_int_arith(EX_FLOORMOD, a[q], b[q], &want[3]) == IA_OK);
            int64_t w32[4] = {a32[q] / b32[q], a32[q] % b32[q], 0, 0};
            CHECK(ir_int_arith(EX_FLOORDIV, a32[q], b32[q], &w32[2]) == IA_OK);
            CHECK(ir_int_arith(EX_FLOORMOD, a32[q], b32[q], &w32[3]) == IA_OK);
            for (int r = 0; r < 4; r++) {
                bad += o[r * cnt + q] != want[r];
                bad += o32[r * cnt + q] != w32[r];
            }
        }
        CHECK_EQ_INT(bad, 0);
        free(a);
        free(b);
        free(o);
        free(a32);
        free(b32);
        free(o32);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* Every math function, in f32 and f64, against libm in double. */
enum { NMATH = 15 };
static double math_ref(int f, double x) {
    double p = fabs(x) + 0.5;
    switch (f) {
    case 0:
        return exp(x);
    case 1:
        return log(p);
    case 2:
        return sqrt(p);
    case 3:
        return 1 / sqrt(p);
    case 4:
        return tanh(x);
    case 5:
        return 1 / (1 + exp(-x));
    case 6:
        return erf(x);
    case 7:
        return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case 8:
        return fabs(x);
    case 9:
        return pow(p, x);
    case 10:
        return x < 0.5 ? x : 0.5;
    case 11:
        return x > 0.5 ? x : 0.5;
    case 12:
        return -x;
    case 13:
        return x > 0 ? x : 0.125 * x;
    default:
        return x / 3;
    }
}

static Expr *math_expr(Module *m, int f, rv_dtype t, Expr *x) {
    Expr *p = bin(m, EX_ADD, ir_unary(m, EX_ABS, x), ir_float(m, t, 0.5));
    static const ExprKind un[9] = {EX_EXP,     EX_LOG, EX_SQRT, EX_RSQRT, EX_TANH,
                                   EX_SIGMOID, EX_ERF, EX_GELU, EX_ABS};
    switch (f) {
    case 1:
    case 2:
    case 3:
        return ir_unary(m, un[f], p);
    case 0:
    case 4:
    case 5:
    case 6:
    case 7:
    case 8:
        return ir_unary(m, un[f], x);
    case 9:
        return bin(m, EX_POW, p, x);
    case 10:
        return bin(m, EX_MIN, x, ir_float(m, t, 0.5));
    case 11:
        return bin(m, EX_MAX, x, ir_float(m, t, 0.5));
    case 12:
        return ir_unary(m, EX_NEG, x);
    case 13:
        return ir_select(m, bin(m, EX_GT, x, ir_float(m, t, 0)), x,
                         bin(m, EX_MUL, ir_float(m, t, 0.125), x));
    default:
        return bin(m, EX_DIV, x, ir_float(m, t, 3));
    }
}

static void test_math(void) {
    for (int ti = 0; ti < 2; ti++) {
        rv_dtype t = ti ? RV_F64 : RV_F32;
        double tol = t == RV_F32 ? 3e-6 : 1e-13;
        KB kb = {rv_module_new(), {0}};
        Module *m = kb.m;
        Size *N = kb_size(&kb, "N", 0, 1000);
        Expr *n = ir_size(m, N);
        Buffer *X = kb_buf(&kb, PARAM_TENSOR, "X", t, n);
        Buffer *O = kb_buf(&kb, PARAM_TENSOR, "O", t, bin(m, EX_MUL, I(m, NMATH), n));
        Axis *i = lower_loop_var(m, "i", n);
        Stmt *st[NMATH];
        for (int f = 0; f < NMATH; f++)
            st[f] = lower_store(m, O, slot(m, f, n, i->var), math_expr(m, f, t, ld(m, X, i->var)));
        Kernel *k = kb_kernel(&kb, "M", loop(m, i, LOOP_SERIAL, lower_seq(m, NMATH, st)), NULL);
        char *src;
        JitLib *lib;
        rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
        if (t == RV_F32) {
            CHECK_STR_CONTAINS(src, "O[i] = expf(X[i]);");
            CHECK_STR_CONTAINS(src, "O[3 * N + i] = 1.0f / sqrtf(fabsf(X[i]) + 0.5f);");
            CHECK_STR_CONTAINS(src, "O[7 * N + i] = rv_gelu_f32(X[i]);");
            CHECK_STR_CONTAINS(src, "O[13 * N + i] = X[i] > 0.0f ? X[i] : 0.125f * X[i];");
        } else {
            CHECK_STR_CONTAINS(src, "O[i] = exp(X[i]);");
            CHECK_STR_CONTAINS(src, "O[9 * N + i] = pow(fabs(X[i]) + 0.5, X[i]);");
        }
        enum { NN = 601 };
        for (int run = 0; fn && run < 1; run++) {
            size_t es = rv_dtype_size(t);
            void *x = aligned(NN * es), *o = aligned(NMATH * NN * es);
            for (int q = 0; q < NN; q++) {
                double v = -6 + 12.0 * q / (NN - 1);
                if (t == RV_F32)
                    ((float *)x)[q] = (float)v;
                else
                    ((double *)x)[q] = v;
            }
            int64_t sizes[1] = {NN};
            void *bufs[2] = {x, o};
            struct rv_rt_ctx ctx = make_ctx(false);
            CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
            for (int f = 0; f < NMATH; f++) {
                int bad = 0;
                for (int q = 0; q < NN; q++) {
                    double xv = t == RV_F32 ? ((float *)x)[q] : ((double *)x)[q];
                    double got = t == RV_F32 ? ((float *)o)[f * NN + q] : ((double *)o)[f * NN + q];
                    double want = math_ref(f, xv);
                    if (!(fabs(got - want) <= tol * (fabs(want) + 1e-30) ||
                          fabs(got - want) <= tol * 0.3)) {
                        if (!bad)
                            fprintf(stderr, "    %s f%d(%.9g) = %.17g, want %.17g\n",
                                    rv_dtype_name(t), f, xv, got, want);
                        bad++;
                    }
                }
                CHECK_EQ_INT(bad, 0);
            }
            free(x);
            free(o);
        }
        base_free(src);
        jit_close(lib);
        rv_module_free(m);
    }
}

/* Selects, casts, logic, if/else-if chains, unrolled loops, i64 literals
 * beyond int range and integer min/max/abs. */
static void test_misc(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *N = kb_size(&kb, "N", 0, 1000);
    Expr *n = ir_size(m, N);
    Buffer *X = kb_buf(&kb, PARAM_TENSOR, "X", RV_F32, n);
    Buffer *Y = kb_buf(&kb, PARAM_TENSOR, "Y", RV_I64, bin(m, EX_MUL, I(m, 6), n));
    Buffer *W = kb_buf(&kb, PARAM_TENSOR, "W", RV_I32, bin(m, EX_MUL, I(m, 4), n));
    Axis *i = lower_loop_var(m, "i", n), *u = lower_loop_var(m, "u", I(m, 4));
    Expr *iv = i->var;
    Expr *at[6];
    for (int q = 0; q < 6; q++)
        at[q] = slot(m, q, n, iv);
    Expr *three = bin(m, EX_EQ, bin(m, EX_MOD, iv, I(m, 3)), I(m, 0));
    Expr *big = bin(m, EX_ADD, iv, I(m, 5000000000LL));
    Expr *sel = ir_select(m, three, big, ir_unary(m, EX_NEG, iv));
    Expr *logic =
        bin(m, EX_OR, bin(m, EX_AND, bin(m, EX_GT, iv, I(m, 2)), bin(m, EX_LT, iv, I(m, 8))),
            ir_unary(m, EX_NOT, bin(m, EX_NE, iv, I(m, 0))));
    Expr *trunc_ = ir_cast(m, RV_I64, ld(m, X, iv));
    Expr *mm = bin(m, EX_MAX, bin(m, EX_MIN, bin(m, EX_SUB, iv, I(m, 5)), I(m, 3)), I(m, -2));
    Expr *ab = ir_unary(m, EX_ABS, bin(m, EX_SUB, I(m, 4), iv));
    Stmt *chain =
        lower_if(m, bin(m, EX_LT, iv, I(m, 3)), lower_store(m, Y, at[4], I(m, 1)),
                 lower_if(m, bin(m, EX_LT, iv, I(m, 6)), lower_store(m, Y, at[4], I(m, 2)),
                          lower_store(m, Y, at[4], I(m, 3))));
    Expr *w = ir_cast(m, RV_I32, bin(m, EX_MUL, u->var, iv));
    Stmt *unr = loop(m, u, LOOP_UNROLL,
                     lower_store(m, W, bin(m, EX_ADD, bin(m, EX_MUL, iv, I(m, 4)), u->var), w));
    Stmt *st[7] = {lower_store(m, Y, at[0], sel),
                   lower_store(m, Y, at[1], ir_select(m, logic, I(m, 1), I(m, 0))),
                   lower_store(m, Y, at[2], trunc_),
                   lower_store(m, Y, at[3], mm),
                   chain,
                   lower_store(m, Y, at[5], ab),
                   unr};
    Kernel *k = kb_kernel(&kb, "misc", loop(m, i, LOOP_SERIAL, lower_seq(m, 7, st)), NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK_STR_CONTAINS(src, "Y[i] = i % 3 == 0 ? i + INT64_C(5000000000) : -i;");
    CHECK_STR_CONTAINS(src, "(i > 2 && i < 8) || !(i != 0) ? 1 : 0;");
    CHECK_STR_CONTAINS(src, "Y[2 * N + i] = (int64_t)X[i];");
    CHECK_STR_CONTAINS(src, "} else if (i < 6) {");
    CHECK_STR_CONTAINS(src, "#pragma GCC unroll 4\n");
    CHECK_STR_CONTAINS(src, "W[i * 4 + u] = (int32_t)(u * i);");
    if (fn) {
        enum { NN = 20 };
        float *x = aligned(NN * 4);
        int64_t *y = aligned(6 * NN * 8);
        int32_t *wv = aligned(4 * NN * 4);
        for (int q = 0; q < NN; q++)
            x[q] = (float)q * -0.7f + 3.1f;
        int64_t sizes[1] = {NN};
        void *bufs[3] = {x, y, wv};
        struct rv_rt_ctx ctx = make_ctx(false);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        int bad = 0;
        for (int64_t q = 0; q < NN; q++) {
            int64_t mmv = q - 5 < 3 ? q - 5 : 3;
            mmv = mmv > -2 ? mmv : -2;
            bad += y[q] != (q % 3 == 0 ? q + 5000000000LL : -q);
            bad += y[NN + q] != (((q > 2 && q < 8) || !(q != 0)) ? 1 : 0);
            bad += y[2 * NN + q] != (int64_t)x[q];
            bad += y[3 * NN + q] != mmv;
            bad += y[4 * NN + q] != (q < 3 ? 1 : q < 6 ? 2 : 3);
            bad += y[5 * NN + q] != (4 - q < 0 ? q - 4 : 4 - q);
            for (int c = 0; c < 4; c++)
                bad += wv[q * 4 + c] != c * q;
        }
        CHECK_EQ_INT(bad, 0);
        free(x);
        free(y);
        free(wv);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* Extern calls: matmul_nt, matmul_nn and softmax_rows on hand-made
 * buffers, A with its last dimension padded to a multiple of 4. */
static void test_extern_calls(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *Ms = kb_size(&kb, "M", 1, 64), *Ns = kb_size(&kb, "N", 1, 64),
         *Ks = kb_size(&kb, "K", 1, 64);
    Expr *M = ir_size(m, Ms), *N = ir_size(m, Ns), *K = ir_size(m, Ks);
    rv_dimspec ad[2] = {{"i", M, 1}, {"k", K, 4}}, bd[2] = {{"j", N, 1}, {"k", K, 1}},
               cd[2] = {{"k", K, 1}, {"j", N, 1}};
    Tensor *At = rv_input_new(m, "A", RV_F32, 2, ad), *Bt = rv_input_new(m, "B", RV_F32, 2, bd);
    Tensor *Ct = rv_input_new(m, "Bn", RV_F32, 2, cd);
    rv_dimspec od[2] = {{"i", M, 1}, {"j", N, 1}}, sd[2] = {{"i", M, 1}, {"k", K, 1}};
    Tensor *ins1[2] = {At, Bt}, *ins2[2] = {At, Ct};
    Tensor *O1 = rv_extern_new(m, "O1", "matmul_nt", 2, ins1, RV_F32, 2, od);
    Tensor *O2 = rv_extern_new(m, "O2", "matmul_nn", 2, ins2, RV_F32, 2, od);
    Tensor *S = rv_extern_new(m, "S", "softmax_rows", 1, &At, RV_F32, 2, sd);
    CHECK(O1 && O2 && S);
    if (!O1 || !O2 || !S) {
        fprintf(stderr, "%s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    Expr *K4 = bin(m, EX_MUL, bin(m, EX_DIV, bin(m, EX_ADD, K, I(m, 3)), I(m, 4)), I(m, 4));
    Buffer *A = kb_buf(&kb, PARAM_TENSOR, "A", RV_F32, bin(m, EX_MUL, M, K4));
    Buffer *B = kb_buf(&kb, PARAM_TENSOR, "B", RV_F32, bin(m, EX_MUL, N, K));
    Buffer *Bn = kb_buf(&kb, PARAM_TENSOR, "Bn", RV_F32, bin(m, EX_MUL, K, N));
    Buffer *Ob1 = kb_buf(&kb, PARAM_TENSOR, "O1", RV_F32, bin(m, EX_MUL, M, N));
    Buffer *Ob2 = kb_buf(&kb, PARAM_TENSOR, "O2", RV_F32, bin(m, EX_MUL, M, N));
    Buffer *Sb = kb_buf(&kb, PARAM_TENSOR, "S", RV_F32, bin(m, EX_MUL, M, K));
    A->tensor = At;
    B->tensor = Bt;
    Bn->tensor = Ct;
    Ob1->tensor = O1;
    Ob2->tensor = O2;
    Sb->tensor = S;
    Buffer *a1[3] = {Ob1, A, B}, *a2[3] = {Ob2, A, Bn}, *a3[2] = {Sb, A};
    Stmt *body =
        seq3(m, lower_call(m, "matmul_nt", 3, a1, O1), lower_call(m, "matmul_nn", 3, a2, O2),
             lower_call(m, "softmax_rows", 2, a3, S));
    Kernel *k = kb_kernel(&kb, "ext", body, NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK_STR_CONTAINS(src, "rv_matmul_nt_f32(M, N, K, O1, N, A, (K + 3) / 4 * 4, B, K);");
    CHECK_STR_CONTAINS(src, "rv_softmax_rows_f32(M, K, S, K, A, (K + 3) / 4 * 4);");
    if (fn) {
        enum { MM = 5, NN = 7, KK = 6, KP = 8 };
        float *a = aligned(MM * KP * 4), *b = aligned(NN * KK * 4), *bn = aligned(KK * NN * 4);
        float *o1 = aligned(MM * NN * 4), *o2 = aligned(MM * NN * 4), *sm = aligned(MM * KK * 4);
        for (int r = 0; r < MM; r++)
            for (int c = 0; c < KP; c++)
                a[r * KP + c] = c < KK ? (float)((r * 3 + c * 5) % 7) - 3 : 1e30f;
        for (int q = 0; q < NN * KK; q++)
            b[q] = (float)(q % 5) - 2;
        for (int q = 0; q < KK * NN; q++)
            bn[q] = (float)(q % 4) - 1.5f;
        int64_t sizes[3] = {MM, NN, KK};
        void *bufs[6] = {a, b, bn, o1, o2, sm};
        struct rv_rt_ctx ctx = make_ctx(false);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        int bad = 0;
        for (int r = 0; r < MM; r++) {
            double mx = -INFINITY, sum = 0;
            for (int c = 0; c < KK; c++)
                mx = a[r * KP + c] > mx ? a[r * KP + c] : mx;
            for (int c = 0; c < KK; c++)
                sum += exp(a[r * KP + c] - mx);
            for (int c = 0; c < KK; c++)
                bad += fabs(sm[r * KK + c] - exp(a[r * KP + c] - mx) / sum) > 1e-6;
            for (int c = 0; c < NN; c++) {
                double s1 = 0, s2 = 0;
                for (int q = 0; q < KK; q++) {
                    s1 += a[r * KP + q] * b[c * KK + q];
                    s2 += a[r * KP + q] * bn[q * NN + c];
                }
                bad += fabs(o1[r * NN + c] - s1) > 1e-4 || fabs(o2[r * NN + c] - s2) > 1e-4;
            }
        }
        CHECK_EQ_INT(bad, 0);
        free(a);
        free(b);
        free(bn);
        free(o1);
        free(o2);
        free(sm);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* ---- CUDA ---- */

/* Y[i] = gelu(sum(j < M) X[i*M + j]) with i split over blocks of 128
 * threads: for bx < (N + 127) / 128 [block.x]: for tx < 128 [thread.x]:
 * let i = bx * 128 + tx: if i < N: acc loop, store. */
static void test_cuda(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *N = kb_size(&kb, "N", 0, 1 << 20), *M = kb_size(&kb, "M", 0, 1024);
    Expr *n = ir_size(m, N), *mm = ir_size(m, M);
    Buffer *X = kb_buf(&kb, PARAM_TENSOR, "X", RV_F32, bin(m, EX_MUL, n, mm));
    Buffer *Y = kb_buf(&kb, PARAM_TENSOR, "Y", RV_F32, n);
    Buffer *acc = ir_buffer_new(m, "acc", RV_F32, I(m, 1), BUF_LOCAL);
    Axis *bx = lower_loop_var(m, "bx", bin(m, EX_DIV, bin(m, EX_ADD, n, I(m, 127)), I(m, 128)));
    Axis *tx = lower_loop_var(m, "tx", I(m, 128)), *j = lower_loop_var(m, "j", mm);
    Axis *i = lower_loop_var(m, "i", NULL);
    Expr *zero = I(m, 0);
    Stmt *red =
        loop(m, j, LOOP_SERIAL,
             lower_store(m, acc, zero,
                         bin(m, EX_ADD, ld(m, acc, zero),
                             ld(m, X, bin(m, EX_ADD, bin(m, EX_MUL, i->var, mm), j->var)))));
    Stmt *elem =
        lower_alloc(m, acc,
                    seq3(m, lower_store(m, acc, zero, F(m, 0)), red,
                         lower_store(m, Y, i->var, ir_unary(m, EX_GELU, ld(m, acc, zero)))));
    Stmt *body = lower_let(m, i, bin(m, EX_ADD, bin(m, EX_MUL, bx->var, I(m, 128)), tx->var),
                           lower_if(m, bin(m, EX_LT, i->var, n), elem, NULL));
    body = loop(m, bx, LOOP_GPU_BLOCK_X, loop(m, tx, LOOP_GPU_THREAD_X, body));
    Kernel *k = kb_kernel(&kb, "Y", body, NULL);
    char *src = NULL, *sym = NULL;
    CgLaunch launch;
    CHECK_EQ_INT(cg_cuda_kernel(k, &src, &sym, &launch), RV_OK);
    if (src && getenv("RAVEL_TEST_SHOW"))
        printf("%s\n", src);
    CHECK_STR_CONTAINS(src, "extern \"C\" __global__ void kernel_Y(\n    const int64_t N,\n"
                            "    const int64_t M,\n    const float *__restrict__ X,\n"
                            "    float *__restrict__ Y) {\n");
    CHECK_STR_CONTAINS(src,
                       "    const int64_t bx = blockIdx.x;\n    if (bx < (N + 127) / 128) {\n");
    CHECK_STR_CONTAINS(src, "const int64_t tx = threadIdx.x;");
    CHECK_STR_CONTAINS(src, "acc += X[i * M + j];");
    CHECK_STR_CONTAINS(src, "Y[i] = rv_gelu_f32(acc);");
    CHECK_STR_CONTAINS(src, "static __device__ __forceinline__ float rv_gelu_f32(float x) {");
    CHECK_STR_CONTAINS(src, "Launch: grid ((N + 127) / 128, 1, 1), block (128, 1, 1).");
    CHECK(sym && strcmp(sym, "kernel_Y") == 0);
    int64_t v;
    CHECK(launch.block[0] && ir_is_const_int(launch.block[0], &v) && v == 128);
    CHECK(launch.grid[0] && launch.grid[1] == NULL && launch.block[2] == NULL);
    if (!jit_nvrtc_available()) {
        printf("skip CUDA compile: NVRTC not available (%s)\n", rv_last_error());
    } else if (src) {
        char *ptx = NULL;
        rv_status st = jit_nvrtc_compile(src, NULL, &ptx);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK)
            fprintf(stderr, "%s\n%s\n", rv_last_error(), src);
        else
            CHECK_STR_CONTAINS(ptx, ".entry kernel_Y(");
        base_free(ptx);
    }
    base_free(src);
    base_free(sym);

    /* a thread loop whose extent depends on the block (a triangle): the
     * launch covers its largest extent, the guard idles the rest */
    Axis *t2 = lower_loop_var(m, "t2", bx->var);
    Stmt *tri = loop(m, bx, LOOP_GPU_BLOCK_X,
                     loop(m, t2, LOOP_GPU_THREAD_X, lower_store(m, Y, t2->var, F(m, 1))));
    KB kb2 = {m, {0}};
    Param pn = {.kind = PARAM_SIZE, .size = N}, py = {.kind = PARAM_TENSOR, .buf = Y};
    vec_push(&kb2.params, pn);
    vec_push(&kb2.params, py);
    Kernel *k2 = kb_kernel(&kb2, "tri", tri, NULL);
    CHECK_EQ_INT(cg_cuda_kernel(k2, &src, &sym, &launch), RV_OK);
    CHECK_STR_CONTAINS(src, "if (t2 < bx) {");
    char *b0 = launch.block[0] ? ir_expr_str(launch.block[0]) : NULL;
    CHECK(b0 && strcmp(b0, "(N + 127) / 128 - 1") == 0);
    if (b0 && strcmp(b0, "(N + 127) / 128 - 1") != 0)
        fprintf(stderr, "    block: %s\n", b0);
    base_free(b0);
    base_free(src);
    base_free(sym);

    /* what it refuses: an extent with no bound over sizes (a loaded value) */
    Buffer *cnt = ir_buffer_new(m, "cnt", RV_I64, I(m, 1), BUF_ARG);
    Param pc = {.kind = PARAM_TENSOR, .buf = cnt};
    vec_push(&kb2.params, pc);
    Axis *t3 = lower_loop_var(m, "t3", ld(m, cnt, I(m, 0)));
    Stmt *bad = loop(m, t3, LOOP_GPU_THREAD_X, lower_store(m, Y, t3->var, F(m, 1)));
    Kernel *k3 = kb_kernel(&kb2, "bad", bad, NULL);
    CHECK_EQ_INT(cg_cuda_kernel(k3, &src, &sym, NULL), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "has no upper bound over sizes only");
    rv_module_free(m);
}

/* ---- compiled programs vs the interpreter ---- */

/* Compares every computed tensor of two runs: same shape, values within
 * tolerance (floats) or equal (integers). */
static int compare_runs(const Module *m, rv_bindings *want, rv_bindings *got) {
    int bad = 0;
    for (int i = 0; i < m->tensors.len; i++) {
        const Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            continue;
        const rv_array *a = rv_bindings_get_array(want, t->name);
        const rv_array *b = rv_bindings_get_array(got, t->name);
        if (!a || !b) {
            fprintf(stderr, "    %s: missing result (interp %p, program %p)\n", t->name,
                    (const void *)a, (const void *)b);
            bad++;
            continue;
        }
        bool same = rv_array_ndim(a) == rv_array_ndim(b) && rv_array_dtype(a) == rv_array_dtype(b);
        for (int d = 0; same && d < rv_array_ndim(a); d++)
            same = rv_array_shape(a)[d] == rv_array_shape(b)[d];
        if (!same) {
            fprintf(stderr, "    %s: shapes or dtypes differ\n", t->name);
            bad++;
            continue;
        }
        int64_t wrong = 0, first = -1;
        for (int64_t e = 0; e < rv_array_numel(a); e++) {
            bool ok;
            if (ir_is_float(rv_array_dtype(a))) {
                double x = rv_array_get_f64(a, e), y = rv_array_get_f64(b, e);
                ok = (isnan(x) && isnan(y)) || fabs(x - y) <= 1e-4 + 1e-5 * fabs(x);
            } else {
                ok = rv_array_get_i64(a, e) == rv_array_get_i64(b, e);
            }
            if (!ok && first < 0)
                first = e;
            wrong += !ok;
        }
        if (wrong) {
            fprintf(stderr, "    %s: %lld of %lld elements differ; first at %lld: %.9g vs %.9g\n",
                    t->name, (long long)wrong, (long long)rv_array_numel(a), (long long)first,
                    rv_array_get_f64(a, first), rv_array_get_f64(b, first));
            bad++;
        }
    }
    return bad;
}

static void find_tensor_level(const Expr *x, void *ctx) {
    if (x->kind == EX_UFCALL || x->kind == EX_READ || x->kind == EX_REDUCE)
        *(const Expr **)ctx = x;
}

static const Expr *stmt_tensor_level(const Stmt *s) {
    const Expr *found = NULL;
    if (!s)
        return NULL;
    switch (s->kind) {
    case ST_FOR:
        ir_visit(s->u.loop.extent, find_tensor_level, &found);
        return found ? found : stmt_tensor_level(s->u.loop.body);
    case ST_IF:
        ir_visit(s->u.if_.cond, find_tensor_level, &found);
        if (!found)
            found = stmt_tensor_level(s->u.if_.then_s);
        return found ? found : stmt_tensor_level(s->u.if_.else_s);
    case ST_LET:
        ir_visit(s->u.let.value, find_tensor_level, &found);
        return found ? found : stmt_tensor_level(s->u.let.body);
    case ST_STORE:
        ir_visit(s->u.store.index, find_tensor_level, &found);
        if (!found)
            ir_visit(s->u.store.value, find_tensor_level, &found);
        return found;
    case ST_ALLOC:
        return stmt_tensor_level(s->u.alloc.body);
    case ST_SEQ:
        for (int i = 0; i < s->u.seq.n && !found; i++)
            found = stmt_tensor_level(s->u.seq.stmts[i]);
        return found;
    default:
        return NULL;
    }
}

/* Code generation asserts that lowering removed tensor-level nodes (READ,
 * UFCALL, REDUCE); where a lowering in progress still leaves one, say so
 * and skip instead of aborting the whole suite. */
static bool lowering_complete(rv_module *m, const char *name) {
    Kernel **ks;
    int n;
    if (lower_pipeline(m, &ks, &n) != RV_OK)
        return true; /* rv_program_compile reports it */
    const Expr *bad = NULL;
    const char *where = "";
    for (int i = 0; i < n && !bad; i++) {
        if ((bad = stmt_tensor_level(ks[i]->prelude)))
            where = "the prelude of";
        else if ((bad = stmt_tensor_level(ks[i]->body)))
            where = "";
        if (bad) {
            char *e = ir_expr_str(bad);
            printf("skip %s: lowering leaves %s (%s) in %s kernel %s\n", name, e,
                   ir_expr_info[bad->kind].name, where, ks[i]->name);
            base_free(e);
        }
    }
    base_free(ks);
    return bad == NULL;
}

/* Parses `text`, compiles it, and compares program and interpreter on
 * bindings drawn from a few seeds (after `fix` binds some sizes); the
 * program's counters into *counters (if not NULL). */
static void check_program_counted(const char *name, const char *text, const char *fix_size,
                                  int64_t fix_value, const char *expect_src,
                                  rv_program_counters *counters) {
    rv_module *m = NULL;
    rv_status st = rv_module_parse(name, text, &m);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s: %s\n", name, rv_last_error());
        return;
    }
    if (!lowering_complete(m, name)) {
        rv_module_free(m);
        return;
    }
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS};
    rv_program *p = NULL;
    st = rv_program_compile(m, &opt, &p);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s: %s\n", name, rv_last_error());
        rv_module_free(m);
        return;
    }
    if (getenv("RAVEL_TEST_SHOW"))
        printf("%s\n", rv_program_source(p));
    if (expect_src)
        CHECK_STR_CONTAINS(rv_program_source(p), expect_src);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        rv_bindings *b1 = rv_bindings_new(m), *b2 = rv_bindings_new(m);
        if (fix_size) {
            rv_bindings_set_size(b1, fix_size, fix_value + (int64_t)seed - 1);
            rv_bindings_set_size(b2, fix_size, fix_value + (int64_t)seed - 1);
        }
        CHECK_EQ_INT(rv_bindings_randomize(b1, seed), RV_OK);
        CHECK_EQ_INT(rv_bindings_randomize(b2, seed), RV_OK);
        st = rv_interp_run(m, b1);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK)
            fprintf(stderr, "%s: interp: %s\n", name, rv_last_error());
        st = rv_program_run(p, b2);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK)
            fprintf(stderr, "%s: program: %s\n", name, rv_last_error());
        int bad = compare_runs(m, b1, b2);
        if (bad)
            fprintf(stderr, "    (%s, seed %llu)\n", name, (unsigned long long)seed);
        CHECK_EQ_INT(bad, 0);
        rv_bindings_free(b1);
        rv_bindings_free(b2);
    }
    rv_program_counters c;
    rv_program_stats(p, &c);
    CHECK_EQ_INT(c.runs, 3);
    CHECK(c.kernel_calls >= 3);
    CHECK(c.compile_seconds > 0);
    if (counters)
        *counters = c;
    rv_program_free(p);
    rv_module_free(m);
}

static void check_program(const char *name, const char *text, const char *fix_size,
                          int64_t fix_value, const char *expect_src) {
    check_program_counted(name, text, fix_size, fix_value, expect_src, NULL);
}

static void test_program_dense(void) {
    check_program("softmax.rv",
                  "size N in 1..64\n"
                  "input X : f32[N, 33]\n"
                  "M[i] = max(j < 33) X[i, j]\n"
                  "E[i, j] = exp(X[i, j] - M[i])\n"
                  "S[i] = sum(j < 33) E[i, j]\n"
                  "P[i, j] = E[i, j] / S[i]\n",
                  NULL, 0, NULL);
    check_program("layernorm.rv",
                  "size T in 1..40\n"
                  "input X : f32[T, 24]\n"
                  "input gamma : f32[24]\n"
                  "input beta : f32[24]\n"
                  "Mean[i] = (sum(k < 24) X[i, k]) / 24\n"
                  "D[i, k] = X[i, k] - Mean[i]\n"
                  "Var[i] = (sum(k < 24) D[i, k] * D[i, k]) / 24\n"
                  "Y[i, j] = D[i, j] * rsqrt(Var[i] + 1e-5) * gamma[j] + beta[j]\n",
                  NULL, 0, NULL);
    check_program("trmm.rv",
                  "size N in 1..40\n"
                  "input A : f32[N, N]\n"
                  "input Bm : f32[N, N]\n"
                  "C[i, j] = sum(k < i + 1) A[i, k] * Bm[k, j]\n"
                  "G[i, j] = gelu(C[i, j]) + sigmoid(A[i, j]) * tanh(Bm[j, i])\n",
                  NULL, 0, NULL);
    check_program("ints.rv",
                  "size N in 1..50\n"
                  "input A : i64[N]\n"
                  "input B : i32[N]\n"
                  "Q[i] = A[i] / (B[i] * B[i] + 1) + floordiv(A[i] - 3, 4) * floormod(i - 7, 3)\n"
                  "R[i] = max(A[i] % 5, i64(B[i])) + argmax(j < N) A[j]\n",
                  NULL, 0, NULL);
    check_program("padded.rv",
                  "size N in 1..30\n"
                  "input X : f32[N, k < 7 pad 4]\n"
                  "Y[i pad 8, k pad 4] = 2 * X[i, k] + 1\n"
                  "Z[i] = sum(k < 7) Y[i, k]\n",
                  NULL, 0, NULL);
    check_program("extern.rv",
                  "size M in 1..20\n"
                  "input A : f32[M, 12]\n"
                  "input B : f32[9, 12]\n"
                  "C : f32[M, 9] = extern \"matmul_nt\"(A, B)\n"
                  "S : f32[M, 9] = extern \"softmax_rows\"(C)\n"
                  "D[i, j] = S[i, j] * 2\n",
                  NULL, 0, NULL);
}

/* A register tile over a symbolic extent: T % 16 columns of Y in the
 * tail tile, a masked vector loop. Its local is laid out a vector per row
 * (attach.c: a local of varying but bounded extents takes the bounds'
 * strides) and kept in vector variables (registers.c, c.c: a masked tail
 * is a whole vector of the tile): before, each tail row started at
 * i * (T % 16), lived in memory, and every k step was a masked store then
 * a masked load of it (bmm_nt's tile at T = 24: 23x the time compiled for
 * T = 24). Right at T = 1..3, 15..19, 24..26, 31..33 (whole vectors and
 * tails of 1 to 15 columns). */
static const char *tail_tile =
    "size T in 1..40\n"
    "input X : f32[3, 12, 32]\n"
    "input W : f32[3, T, 32]\n"
    "Y[b, i, j] = sum(k < 32) X[b, i, k] * W[b, j, k]\n"
    "schedule Y {\n"
    "    YL = cache_write(Y)\n"
    "    jo, ji = split(j, 16)\n"
    "    io, ii = split(i, 6)\n"
    "    reorder(b, jo, io, ii, ji)\n"
    "    vectorize(ji)\n"
    "    compute_at(YL, io)\n"
    "}\n"
    "schedule YL {\n"
    "    WL = cache_read(W, layout=\"b, k, j\")\n"
    "    jv2, jv = split(j, 16)\n"
    "    reorder(k, i, jv2, jv)\n"
    "    unroll(i)\n"
    "    unroll(jv2)\n"
    "    vectorize(jv)\n"
    "}\n"
    "schedule Y {\n"
    "    compute_at(WL, jo)\n"
    "}\n";

static void test_tail_tile_registers(void) {
    int64_t from[] = {1, 15, 18, 24, 31};
    for (int i = 0; i < 5; i++)
        check_program("tail_tile.rv", tail_tile, "T", from[i], NULL);
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tail_tile.rv", tail_tile, &m), RV_OK);
    char *src = NULL;
    CHECK_EQ_INT(rv_program_emit(m, &src), RV_OK);
    /* the tail's loop is masked, its tile never in memory */
    CHECK(src && strstr(src, "rv_loadn_f32x") != NULL);
    CHECK(src && strstr(src, "loadn_f32x16(&YL") == NULL && strstr(src, "storen_f32x16(&YL") == NULL &&
          strstr(src, "loadn_f32x8(&YL") == NULL && strstr(src, "storen_f32x8(&YL") == NULL);
    if (src && getenv("RAVEL_TEST_SHOW"))
        printf("%s\n", src);
    base_free(src);
    rv_module_free(m);
}

static void test_program_ragged(void) {
    check_program("embedding.rv",
                  "size N in 1..100\n"
                  "ufun words[n < N] in 0..29\n"
                  "input Emb : f32[30, 16]\n"
                  "H[n, i] = Emb[words[n], i]\n",
                  NULL, 0, NULL);
    check_program("ragged_elementwise.rv",
                  "size B in 1..12\n"
                  "ufun len[b < B] in 0..20\n"
                  "input A : f32[b < B, l < len[b]]\n"
                  "O[b, l < len[b] pad 4] = 2 * A[b, l]\n"
                  "Q[b, l < len[b]] = O[b, l] + A[b, l]\n",
                  NULL, 0, NULL);
    check_program("ragged_softmax.rv",
                  "size B in 1..6\n"
                  "ufun len[b < B] in 1..20\n"
                  "input S : f32[b < B, h < 3, i < len[b], j < len[b] pad 8]\n"
                  "M[b, h, i] = max(j < len[b]) S[b, h, i, j]\n"
                  "E[b, h, i, j] = exp(S[b, h, i, j] - M[b, h, i])\n"
                  "Z[b, h, i] = sum(j < len[b]) E[b, h, i, j]\n"
                  "P[b, h, i, j pad 8] = E[b, h, i, j] / Z[b, h, i]\n",
                  NULL, 0, NULL);
    check_program("tree_rnn_cond.rv",
                  "size N in 1..64\n"
                  "ufun isleaf[n < N] in 0..1\n"
                  "ufun left[n < N] in 0..N - 1\n"
                  "ufun right[n < N] in 0..N - 1\n"
                  "ufun words[n < N] in 0..99\n"
                  "input Emb : f32[100, 8]\n"
                  "input S : f32[N, 8]\n"
                  "H[n, i] = if isleaf[n] == 1 then Emb[words[n], i] else "
                  "tanh(S[left[n], i] + S[right[n], i])\n",
                  NULL, 0, NULL);
}

/* Errors found before any kernel runs, with the interpreter's messages. */
static void test_program_errors(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("e.rv",
                                 "size B in 1..8\n"
                                 "ufun len[b < B] in 0..5\n"
                                 "input A : f32[b < B, l < len[b]]\n"
                                 "O[b, l < len[b]] = 2 * A[b, l]\n",
                                 &m),
                 RV_OK);
    if (!lowering_complete(m, "e.rv")) {
        rv_module_free(m);
        return;
    }
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS, .serial = 1};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile(m, &opt, &p), RV_OK);
    if (!p) {
        rv_module_free(m);
        return;
    }
    rv_bindings *b = rv_bindings_new(m);
    CHECK_EQ_INT(rv_program_run(p, b), RV_ERR_ARG); /* size B is not bound */
    CHECK_STR_CONTAINS(rv_last_error(), "size B is not bound");
    rv_bindings_set_size(b, "B", 3);
    int64_t three[1] = {3};
    rv_array *len = rv_array_new(RV_I64, 1, three);
    rv_array_set_i64(len, 0, 2);
    rv_array_set_i64(len, 1, 9); /* outside 0..5 */
    rv_bindings_set_array(b, "len", len);
    CHECK_EQ_INT(rv_program_run(p, b), RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "len[1] = 9 outside declared range 0..5");
    rv_array_set_i64(len, 1, 4);
    int64_t five[1] = {5};
    rv_array *a = rv_array_new(RV_F32, 1, five); /* needs 2 + 4 + 0 = 6 */
    rv_bindings_set_array(b, "A", a);
    CHECK_EQ_INT(rv_program_run(p, b), RV_ERR_SHAPE);
    CHECK(rv_bindings_get_array(b, "O") == NULL);
    int64_t six[1] = {6};
    rv_array *a6 = rv_array_new(RV_F32, 1, six);
    for (int i = 0; i < 6; i++)
        rv_array_set_f64(a6, i, i);
    rv_bindings_set_array(b, "A", a6);
    CHECK_EQ_INT(rv_program_run(p, b), RV_OK);
    const rv_array *o = rv_bindings_get_array(b, "O");
    CHECK(o && rv_array_ndim(o) == 1 && rv_array_shape(o)[0] == 6);
    for (int i = 0; o && i < 6; i++)
        CHECK_EQ_INT(rv_array_get_f64(o, i), 2 * i);
    rv_bindings_free(b);
    rv_array_free(len);
    rv_array_free(a);
    rv_array_free(a6);
    rv_program_free(p);
    rv_module_free(m);
}

/* Runs after the first reuse what the first made (the arguments' names, the
 * plan's slots) and pass a UF array in place when its dtype is the
 * buffer's: every check still applies on every run, with the same
 * messages, and both UF dtypes compute the same result. */
static void test_program_repeated_checks(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("r.rv",
                                 "size B in 1..8\n"
                                 "ufun len[b < B] in 0..5\n"
                                 "input A : f32[b < B, l < len[b]]\n"
                                 "O[b, l < len[b]] = A[b, l] + 1\n",
                                 &m),
                 RV_OK);
    if (!lowering_complete(m, "r.rv")) {
        rv_module_free(m);
        return;
    }
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS, .serial = 1};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile(m, &opt, &p), RV_OK);
    if (!p) {
        rv_module_free(m);
        return;
    }
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "B", 2);
    int64_t two[1] = {2}, five[1] = {5};
    rv_array *len32 = rv_array_new(RV_I32, 1, two), *len64 = rv_array_new(RV_I64, 1, two);
    rv_array *a = rv_array_new(RV_F32, 1, five);
    for (int i = 0; i < 5; i++)
        rv_array_set_f64(a, i, i);
    rv_bindings_set_array(b, "A", a);
    for (int round = 0; round < 3; round++) {
        for (int w = 0; w < 2; w++) {
            rv_array *len = w ? len64 : len32;
            rv_bindings_set_array(b, "len", len);
            rv_array_set_i64(len, 0, 2);
            rv_array_set_i64(len, 1, 3);
            CHECK_EQ_INT(rv_program_run(p, b), RV_OK);
            const rv_array *o = rv_bindings_get_array(b, "O");
            CHECK(o && rv_array_numel(o) == 5);
            for (int i = 0; o && i < 5; i++)
                CHECK_EQ_INT(rv_array_get_f64(o, i), i + 1);
            rv_array_set_i64(len, 1, 6); /* outside 0..5 */
            CHECK_EQ_INT(rv_program_run(p, b), RV_ERR_BOUNDS);
            CHECK_STR_CONTAINS(rv_last_error(), "ufun len: len[1] = 6 outside declared range 0..5");
            rv_array_set_i64(len, 1, 4); /* A has 5 elements, len needs 6 */
            CHECK_EQ_INT(rv_program_run(p, b), RV_ERR_SHAPE);
            CHECK_STR_CONTAINS(rv_last_error(), "input A: ragged layout needs 6 elements");
            CHECK(rv_bindings_get_array(b, "O") == NULL);
        }
    }
    rv_bindings_free(b);
    rv_array_free(len32);
    rv_array_free(len64);
    rv_array_free(a);
    rv_program_free(p);
    rv_module_free(m);
}

/* Operators over one raggedness pattern share its row-start array: a
 * ragged layernorm and the softmax after it, seven kernels over tensors
 * `[b < B, l < len[b], ...]`, run one prelude per call, and the padded
 * output (`l < len[b] pad 4`, another pattern) one more; results as the
 * interpreter's (seeds 1..3, B = 4, 5, 6 so the AUX bytes are known). */
static void test_program_shared_prelude(void) {
    rv_program_counters c = {0};
    check_program_counted("ragged_layernorm_softmax.rv",
                          "size B in 1..6\n"
                          "ufun len[b < B] in 0..9\n"
                          "input X : f32[b < B, l < len[b], d < 8]\n"
                          "input gamma : f32[8]\n"
                          "Mean[b, l] = (sum(d < 8) X[b, l, d]) / 8\n"
                          "Var[b, l] = (sum(d < 8) (X[b, l, d] - Mean[b, l]) * "
                          "(X[b, l, d] - Mean[b, l])) / 8\n"
                          "Y[b, l, d] = (X[b, l, d] - Mean[b, l]) / sqrt(Var[b, l] + 0.00001) * "
                          "gamma[d]\n"
                          "Mx[b, l] = max(d < 8) Y[b, l, d]\n"
                          "E[b, l, d] = exp(Y[b, l, d] - Mx[b, l])\n"
                          "Z[b, l] = sum(d < 8) E[b, l, d]\n"
                          "P[b, l < len[b] pad 4, d] = E[b, l, d] / Z[b, l]\n",
                          "B", 4, NULL, &c);
    CHECK_EQ_INT(c.kernel_calls, 3 * 7);
    CHECK_EQ_INT(c.prelude_runs, 3 * 2);
    /* two row-start arrays of B + 1 int64 per run, B = 4, 5, 6 */
    CHECK_EQ_INT(c.aux_bytes, 2 * 8 * (5 + 6 + 7));
}

/* ---- load balancing of ragged parallel loops (c_balance.c) ---- */

/* rv_rt_work_start splits rows of skewed cost into chunks that cover
 * [0, n) in order, each within one row's cost of total / chunks. */
static void test_work_start(void) {
    enum { N = 300 };
    int64_t prefix[N + 1] = {0}, maxcost = 0;
    for (int i = 0; i < N; i++) {
        int64_t len = i % 37 == 0 ? 500 : 1 + (i * 7919) % 13; /* a few long rows */
        int64_t cost = 1 + len * len;
        prefix[i + 1] = prefix[i] + cost;
        maxcost = cost > maxcost ? cost : maxcost;
    }
    for (int64_t n = 0; n <= N; n += n < 10 ? 1 : 29) {
        for (int64_t chunks = 1; chunks <= 9; chunks++) {
            int bad = 0;
            double share = (double)prefix[n] / (double)chunks;
            CHECK_EQ_INT(rv_rt_work_start(prefix, n, 0, chunks), 0);
            CHECK_EQ_INT(rv_rt_work_start(prefix, n, chunks, chunks), n);
            for (int64_t c = 0; c < chunks; c++) {
                int64_t a = rv_rt_work_start(prefix, n, c, chunks);
                int64_t b = rv_rt_work_start(prefix, n, c + 1, chunks);
                bad += a > b;
                bad += fabs((double)(prefix[b] - prefix[a]) - share) > (double)maxcost;
            }
            CHECK_EQ_INT(bad, 0);
        }
    }
}

/* The chunks one balanced call ran, and the elements each wrote. */
static struct {
    int64_t nchunks;
    int64_t written[8];
    const float *y;
    int64_t ny;
} balance_rec;

static int64_t count_written(void) {
    int64_t k = 0;
    for (int64_t q = 0; q < balance_rec.ny; q++)
        k += !isnan(balance_rec.y[q]);
    return k;
}

/* Runs the chunks one by one, counting what each one wrote. */
static void recording_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *closure) {
    balance_rec.nchunks = n;
    for (int64_t c = 0; c < n; c++) {
        int64_t before = count_written();
        fn(closure, c, c + 1, (int)c);
        if (c < 8)
            balance_rec.written[c] = count_written() - before;
    }
}

/* parallel for b < B: for l < len[b]: Y[off[b] + l] = A[off[b] + l] * 2,
 * and (under a guard whose extent loads) for j < W[b]: Z[b] += 1.
 * With 4 threads the loop runs 4 chunks of equal work (elements written),
 * not 4 chunks of B/4 rows; the guarded load of W stays out of the
 * estimate (the guard may be what keeps its index in range). */
static void test_balanced_parallel(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *B = kb_size(&kb, "B", 0, 1000);
    Expr *bsz = ir_size(m, B);
    Buffer *len = kb_buf(&kb, PARAM_UF, "len", RV_I32, bsz);
    Buffer *W = kb_buf(&kb, PARAM_UF, "W", RV_I32, bsz);
    Buffer *off = kb_buf(&kb, PARAM_AUX, "off", RV_I64, bin(m, EX_ADD, bsz, I(m, 1)));
    Expr *total = ld(m, off, bsz);
    Buffer *A = kb_buf(&kb, PARAM_TENSOR, "A", RV_F32, total);
    Buffer *Y = kb_buf(&kb, PARAM_TENSOR, "Y", RV_F32, total);
    Buffer *Z = kb_buf(&kb, PARAM_TENSOR, "Z", RV_F32, bsz);
    Stmt *prelude = row_starts(m, off, len, bsz);
    Axis *b = lower_loop_var(m, "b", bsz);
    Axis *l = lower_loop_var(m, "l", ir_cast(m, RV_I64, ld(m, len, b->var)));
    Axis *j = lower_loop_var(m, "j", ir_cast(m, RV_I64, ld(m, W, b->var)));
    Expr *at = bin(m, EX_ADD, ld(m, off, b->var), l->var);
    Stmt *row = loop(m, l, LOOP_SERIAL,
                     lower_store(m, Y, at, bin(m, EX_MUL, ld(m, A, at), F(m, 2))));
    Stmt *guarded = lower_if(
        m, bin(m, EX_LT, b->var, I(m, 0)),
        loop(m, j, LOOP_SERIAL,
             lower_store(m, Z, b->var, bin(m, EX_ADD, ld(m, Z, b->var), F(m, 1)))),
        NULL);
    Stmt *body = loop(m, b, LOOP_PARALLEL, seq2(m, row, guarded));
    Kernel *k = kb_kernel(&kb, "L", body, prelude);
    char *src;
    JitLib *lib;
    rv_rt_prelude_fn pre = NULL;
    rv_rt_kernel_fn fn = build(k, &src, &lib, &pre);
    CHECK_STR_CONTAINS(src, "work_prefix[b + 1] = work_prefix[b] + ");
    CHECK_STR_CONTAINS(src, "ctx->parallel_for(work_chunks, kernel_L_par0, &par0);");
    CHECK_STR_CONTAINS(src, "begin = first;");
    const char *est = strstr(src, "work_prefix[b + 1] = ");
    CHECK(est && !memmem(est, (size_t)(strchr(est, ';') - est), "W[", 2));
    if (fn && pre) {
        enum { BB = 200 };
        int32_t *lens = aligned(BB * sizeof(int32_t)), *ws = aligned(BB * sizeof(int32_t));
        int64_t tot = 0, longest = 0;
        for (int q = 0; q < BB; q++) {
            lens[q] = q < 8 ? 1000 : q % 3; /* skewed: the first rows are long */
            ws[q] = 1000000;               /* never run: the guard is false */
            tot += lens[q];
            longest = lens[q] > longest ? lens[q] : longest;
        }
        int64_t *offs = aligned((BB + 1) * sizeof(int64_t));
        int64_t sizes[1] = {BB};
        float *as = aligned((size_t)tot * sizeof(float)), *ys = aligned((size_t)tot * sizeof(float));
        float *zs = aligned(BB * sizeof(float));
        void *bufs[6] = {lens, ws, offs, as, ys, zs};
        CHECK_EQ_INT(pre(sizes, bufs), RV_RT_OK);
        for (int64_t q = 0; q < tot; q++) {
            as[q] = (float)q;
            ys[q] = NAN;
        }
        balance_rec.y = ys;
        balance_rec.ny = tot;
        struct rv_rt_ctx ctx = make_ctx(true);
        ctx.num_threads = 4;
        ctx.parallel_for = recording_for;
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        CHECK_EQ_INT(balance_rec.nchunks, 4);
        /* A row costs its length + 2 (the guarded loop counts as one
         * store): no chunk gets more than its share and one row. An even
         * split of the rows would give chunk 0 all eight long rows. */
        int bad = 0;
        int64_t sum = 0;
        for (int c = 0; c < 4; c++) {
            bad += balance_rec.written[c] > (tot + 2 * BB) / 4 + longest + 2;
            sum += balance_rec.written[c];
        }
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(sum, tot);
        bad = 0;
        for (int64_t q = 0; q < tot; q++)
            bad += ys[q] != as[q] * 2;
        CHECK_EQ_INT(bad, 0);
        /* one thread: the rows are the chunks, no prefix */
        ctx.num_threads = 1;
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        CHECK_EQ_INT(balance_rec.nchunks, BB);
        free(lens);
        free(ws);
        free(offs);
        free(as);
        free(ys);
        free(zs);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

/* for i < N: vector for j < 32: Y[i*32 + j] = X[c ? w*32 + j : 0] with
 * w = Wd[i], c = 0 <= w && w < R: a read through the lowering's safe
 * index (an embedding row at a node's word) whose check is the same in
 * every lane is one vector load of the row, or X[0] broadcast where the
 * check fails, not a gather of the select's index vector; each row reads
 * what the gather read. */
static void test_checked_row_load(void) {
    KB kb = {rv_module_new(), {0}};
    Module *m = kb.m;
    Size *N = kb_size(&kb, "N", 1, 100), *R = kb_size(&kb, "R", 1, 100);
    Expr *n = ir_size(m, N), *r = ir_size(m, R);
    Buffer *X = kb_buf(&kb, PARAM_TENSOR, "X", RV_F32, bin(m, EX_MUL, r, I(m, 32)));
    Buffer *Wd = kb_buf(&kb, PARAM_TENSOR, "Wd", RV_I32, n);
    Buffer *Y = kb_buf(&kb, PARAM_TENSOR, "Y", RV_F32, bin(m, EX_MUL, n, I(m, 32)));
    Axis *i = lower_loop_var(m, "i", n), *j = lower_loop_var(m, "j", I(m, 32));
    Expr *w = ir_cast(m, RV_I64, ld(m, Wd, i->var));
    Expr *c = bin(m, EX_AND, bin(m, EX_LE, I(m, 0), w), bin(m, EX_LT, w, r));
    Expr *at = ir_select(m, c, bin(m, EX_ADD, bin(m, EX_MUL, w, I(m, 32)), j->var), I(m, 0));
    Stmt *body = lower_store(m, Y, bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, 32)), j->var),
                             ld(m, X, at));
    Kernel *k = kb_kernel(&kb, "Y", loop(m, i, LOOP_SERIAL, loop(m, j, LOOP_VECTOR, body)), NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK_STR_CONTAINS(src, "? rv_load_f32x16(&X[");
    CHECK_STR_CONTAINS(src, ": rv_splat_f32x16(X[0])");
    CHECK(strstr(src, "X_g") == NULL);
    if (fn) {
        enum { NN = 4, RR = 3 };
        float *xs = aligned(RR * 32 * 4), *ys = aligned(NN * 32 * 4);
        int32_t *ws = aligned(NN * 4);
        for (int q = 0; q < RR * 32; q++)
            xs[q] = (float)(q + 1);
        const int32_t words[NN] = {2, -1, 0, 3}; /* -1 and 3 fail the check */
        for (int q = 0; q < NN; q++)
            ws[q] = words[q];
        int64_t sizes[2] = {NN, RR};
        void *bufs[3] = {xs, ws, ys};
        struct rv_rt_ctx ctx = make_ctx(false);
        CHECK_EQ_INT(fn(sizes, bufs, &ctx), RV_RT_OK);
        int bad = 0;
        for (int q = 0; q < NN; q++)
            for (int l = 0; l < 32; l++)
                bad += ys[q * 32 + l] !=
                       (words[q] >= 0 && words[q] < RR ? xs[words[q] * 32 + l] : xs[0]);
        CHECK_EQ_INT(bad, 0);
        free(xs);
        free(ys);
        free(ws);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-codegen-XXXXXX");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_elementwise);
    RUN(test_reduction);
    RUN(test_vector_safety);
    RUN(test_map_vectorized);
    RUN(test_parallel);
    RUN(test_ragged);
    RUN(test_int_division);
    RUN(test_math);
    RUN(test_misc);
    RUN(test_extern_calls);
    RUN(test_cuda);
    RUN(test_program_dense);
    RUN(test_tail_tile_registers);
    RUN(test_program_ragged);
    RUN(test_program_errors);
    RUN(test_program_repeated_checks);
    RUN(test_program_shared_prelude);
    RUN(test_work_start);
    RUN(test_balanced_parallel);
    RUN(test_checked_row_load);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache_dir);
    return harness_report();
}
