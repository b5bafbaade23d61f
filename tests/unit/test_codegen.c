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
#include "jit/jit.h"
#include "ravel_rt.h"

static char cache_dir[PATH_MAX];

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
    return aligned_alloc(RV_RT_ALIGN, (n + RV_RT_ALIGN - 1) / RV_RT_ALIGN * RV_RT_ALIGN + RV_RT_ALIGN);
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
    const char *flags[1] = {"-fopenmp-simd"};
    JitOptions opt = {.cache_dir = cache_dir, .extra_flags = flags, .n_extra_flags = 1};
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
    CHECK_STR_CONTAINS(src, "    for (int64_t i = 0; i < N; i++) {\n        Y[i] = X[i] * 2.0f + 1.0f;\n");
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
    if (getenv("RAVEL_TEST_SHOW"))
        printf("%s\n", src);
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
    Stmt *body = seq3(m,
                      seq2(m, lower_store(m, acc, zero, F(m, 0)),
                           lower_store(m, best, zero, F(m, -INFINITY))),
                      loop(m, j, LOOP_SERIAL, upd),
                      seq2(m, lower_store(m, Y, i->var, ld(m, acc, zero)),
                           lower_store(m, Z, i->var, ld(m, best, zero))));
    body = lower_alloc(m, acc, lower_alloc(m, best, body));
    Kernel *k = kb_kernel(&kb, "Y", loop(m, i, LOOP_SERIAL, body), NULL);
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(k, &src, &lib, NULL);
    CHECK_STR_CONTAINS(src, "        float acc;\n");
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
                mx = isnan(mx) || xs[r * MM + c] > mx || isnan(xs[r * MM + c]) ? xs[r * MM + c]
                                                                                 : mx;
                if (isnan(mx))
                    break;
            }
            if (r == 5) {
                bad += !isnan(zs[r]);
                continue;
            }
            bad += ys[r] != s || zs[r] != mx;
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
    Buffer *Y = kb_buf(&kb, PARAM_TENSOR, "Y", RV_F32, bin(m, EX_MUL, I(m, 2), bin(m, EX_MUL, n, mm)));
    Buffer *tmp = ir_buffer_new(m, "tmp", RV_F32, mm, BUF_GLOBAL);
    Axis *rep = lower_loop_var(m, "rep", I(m, 2)), *i = lower_loop_var(m, "i", n);
    Axis *j = lower_loop_var(m, "j", mm), *j2 = lower_loop_var(m, "j", mm);
    Axis *r = lower_loop_var(m, "r", NULL);
    Expr *scale = ir_cast(m, RV_F32, bin(m, EX_ADD, rep->var, I(m, 1)));
    Stmt *fill = loop(m, j, LOOP_VECTOR,
                      lower_store(m, tmp, j->var,
                                  bin(m, EX_MUL, ld(m, X, bin(m, EX_ADD, bin(m, EX_MUL, i->var, mm), j->var)),
                                      scale)));
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
    CHECK_STR_CONTAINS(src, "static void kernel_P_par0(void *arg, int64_t begin, int64_t end, int tid) {");
    CHECK_STR_CONTAINS(src, "const int64_t rep = env->rep;");
    CHECK_STR_CONTAINS(src, "struct rv_rt_ctx *ctx = env->ctx;");
    CHECK_STR_CONTAINS(src, "ctx->parallel_for(N, kernel_P_par0, &par0);");
    CHECK_STR_CONTAINS(src, "#pragma omp simd\n");
    CHECK_STR_CONTAINS(src, "float *restrict tmp = ctx->alloc(ctx, (size_t)(M) * sizeof(float));");
    CHECK_STR_CONTAINS(src, "for (int64_t j_1 = 0; j_1 < M; j_1++) {");
    if (getenv("RAVEL_TEST_SHOW"))
        printf("%s\n", src);
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
                    bad += ys[(rp * NN + a) * MM + c] != xs[a * MM + (MM - 1 - c)] * (float)(rp + 1);
        CHECK_EQ_INT(bad, 0);
        free(xs);
        free(ys);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
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
    Axis *pb = lower_loop_var(m, "b", bsz);
    Stmt *prelude = seq2(m, lower_store(m, off, I(m, 0), I(m, 0)),
                         loop(m, pb, LOOP_SERIAL,
                              lower_store(m, off, bin(m, EX_ADD, pb->var, I(m, 1)),
                                          bin(m, EX_ADD, ld(m, off, pb->var),
                                              ir_cast(m, RV_I64, ld(m, len, pb->var))))));
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
    CHECK_STR_CONTAINS(src, "    const int64_t *restrict off = __builtin_assume_aligned(bufs[1], 64);");
    CHECK_STR_CONTAINS(src, "        off[b + 1] = off[b] + (int64_t)len[b];");
    CHECK_STR_CONTAINS(src, "        for (int64_t l = 0; l < (int64_t)len[b]; l++) {");
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
        float *as = aligned((size_t)tot * sizeof(float)), *ys = aligned((size_t)tot * sizeof(float));
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

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-codegen-XXXXXX");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_elementwise);
    RUN(test_reduction);
    RUN(test_parallel);
    RUN(test_ragged);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache_dir);
    return harness_report();
}
