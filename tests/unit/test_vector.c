/*
 * test_vector.c — explicit vector code for vector loops (c_vector.c), the
 * in-register transposed copy (c_transpose.c) and the vector math helpers
 * (c_vmath.c).
 *
 * Each case builds one loop nest in the loop IR twice, with the inner loop
 * of kind LOOP_VECTOR and LOOP_SERIAL, compiles both with the JIT, runs
 * them on the same random data and compares every buffer: bit for bit
 * where the vector code computes the same operations, with a tolerance
 * for the math approximations. Checks on the source text pin what is
 * vectorized and what falls back. The accuracy test sweeps each f32 math
 * helper over a dense set of inputs (every 4099th float of each sign, a
 * fine grid over [-12, 12] and the special values) and compares it with
 * libm in double precision, in ulps of the f32 result.
 *
 * Every test compiles into a private cache directory, removed at the end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <float.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "harness.h"
#include "jit/jit.h"
#include "ravel_rt.h"

static char cache_dir[PATH_MAX];

#if defined(__SANITIZE_ADDRESS__)
#define KERNEL_FLAGS "-fopenmp-simd", "-fsanitize=address,undefined", "-fno-omit-frame-pointer"
#else
#define KERNEL_FLAGS "-fopenmp-simd"
#endif

/* ---- building and running kernels ---- */

enum { MAXB = 6 };

/* A loop nest under test: its buffers (all kernel parameters) and a
 * builder of its body for a given kind of the loop under test. */
typedef struct Case {
    const char *name;
    int nb;
    rv_dtype type[MAXB];
    int64_t size[MAXB];
    Stmt *(*build)(Module *m, Buffer **b, LoopKind k, int w);
    int w;      /* the vector loop's extent */
    double tol; /* relative, plus as much absolute; 0: bit for bit */
    double lo;  /* float inputs drawn from [lo, hi] */
    double hi;
} Case;

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

static void *scratch_alloc(struct rv_rt_ctx *ctx, size_t n) {
    (void)ctx;
    return aligned_alloc(RV_RT_ALIGN,
                         (n + RV_RT_ALIGN - 1) / RV_RT_ALIGN * RV_RT_ALIGN + RV_RT_ALIGN);
}
static void scratch_free(struct rv_rt_ctx *ctx, void *p) {
    (void)ctx;
    free(p);
}
static void serial_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *closure) {
    if (n > 0)
        fn(closure, 0, n, 0);
}

/* An -O level that overrides the JIT's own (NULL: keep it). */
static const char *opt_level;

/* Emits, compiles and loads kernel "K"; *src gets the source. */
static rv_rt_kernel_fn build(const Kernel *k, char **src, JitLib **lib) {
    *src = cg_c_kernel(k);
    if (getenv("RAVEL_TEST_SHOW"))
        printf("%s\n", *src);
    const char *flags[] = {KERNEL_FLAGS, opt_level};
    JitOptions opt = {
        .cache_dir = cache_dir, .extra_flags = flags, .n_extra_flags = RV_COUNT(flags)};
    *lib = NULL;
    rv_status st = jit_compile(*src, &opt, lib);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s\n--- source ---\n%s\n", rv_last_error(), *src);
        return NULL;
    }
    rv_rt_kernel_fn fn = (rv_rt_kernel_fn)jit_fn(*lib, "kernel_K");
    CHECK(fn != NULL);
    return fn;
}

static void *aligned(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
    memset(p, 0, (n + 63) / 64 * 64 + 64);
    return p;
}

static uint64_t rng_state;
static double uniform(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Builds the case's kernel with loop kind k, runs it on copies of `in`,
 * and returns the buffers after the run (and the source). */
static void **run_kind(const Case *c, LoopKind k, void *const *in, char **src) {
    Module *m = rv_module_new();
    Buffer *b[MAXB];
    Param params[MAXB];
    for (int i = 0; i < c->nb; i++) {
        char name[8] = {(char)('A' + i), 0};
        if (i == c->nb - 1 && c->nb > 1)
            name[0] = 'Y';
        b[i] = ir_buffer_new(m, name, c->type[i], I(m, c->size[i]), BUF_ARG);
        params[i] = (Param){.kind = PARAM_TENSOR, .buf = b[i]};
    }
    Kernel *kern = arena_alloc(m->arena, sizeof(Kernel));
    *kern = (Kernel){.name = "K", .m = m, .nparams = c->nb, .params = params};
    kern->body = c->build(m, b, k, c->w);
    JitLib *lib;
    rv_rt_kernel_fn fn = build(kern, src, &lib);
    void **out = base_xcalloc(MAXB, sizeof(void *));
    for (int i = 0; i < c->nb; i++) {
        size_t n = (size_t)c->size[i] * rv_dtype_size(c->type[i]);
        out[i] = aligned(n);
        memcpy(out[i], in[i], n);
    }
    if (fn) {
        struct rv_rt_ctx ctx = {.abi_version = RV_RT_ABI_VERSION,
                                .num_threads = 1,
                                .parallel_for = serial_for,
                                .alloc = scratch_alloc,
                                .free = scratch_free};
        CHECK_EQ_INT(fn(NULL, out, &ctx), RV_RT_OK);
    }
    jit_close(lib);
    rv_module_free(m);
    return out;
}

/* Runs a case both ways and compares; returns the vector source
 * (base_free it). */
static char *check_case(const Case *c) {
    void *in[MAXB];
    rng_state = 12345;
    for (int i = 0; i < c->nb; i++) {
        in[i] = aligned((size_t)c->size[i] * rv_dtype_size(c->type[i]));
        for (int64_t q = 0; q < c->size[i]; q++) {
            double u = uniform();
            switch (c->type[i]) {
            case RV_F32:
                ((float *)in[i])[q] = (float)(c->lo + (c->hi - c->lo) * u);
                break;
            case RV_F64:
                ((double *)in[i])[q] = c->lo + (c->hi - c->lo) * u;
                break;
            case RV_I32:
                ((int32_t *)in[i])[q] = (int32_t)(u * 200) - 100;
                break;
            default:
                ((int64_t *)in[i])[q] = (int64_t)(u * 200) - 100;
                break;
            }
        }
    }
    char *vsrc, *ssrc;
    void **v = run_kind(c, LOOP_VECTOR, in, &vsrc);
    void **s = run_kind(c, LOOP_SERIAL, in, &ssrc);
    for (int i = 0; i < c->nb; i++) {
        int bad = 0;
        for (int64_t q = 0; q < c->size[i]; q++) {
            double a, e;
            switch (c->type[i]) {
            case RV_F32:
                a = ((float *)v[i])[q], e = ((float *)s[i])[q];
                break;
            case RV_F64:
                a = ((double *)v[i])[q], e = ((double *)s[i])[q];
                break;
            case RV_I32:
                a = ((int32_t *)v[i])[q], e = ((int32_t *)s[i])[q];
                break;
            default:
                a = (double)((int64_t *)v[i])[q], e = (double)((int64_t *)s[i])[q];
                break;
            }
            bool same = a == e || (isnan(a) && isnan(e));
            if (!same && c->tol > 0 && !isnan(a) && !isnan(e))
                same = fabs(a - e) <= c->tol * (fabs(e) + 1);
            if (!same && bad++ == 0)
                fprintf(stderr, "    %s (w=%d): buffer %d [%lld] vector %.9g, serial %.9g\n",
                        c->name, c->w, i, (long long)q, a, e);
        }
        CHECK_EQ_INT(bad, 0);
        free(in[i]);
        free(v[i]);
        free(s[i]);
    }
    base_free(v);
    base_free(s);
    base_free(ssrc);
    return vsrc;
}

/* ---- cases ---- */

enum { ROWS = 6 };

/* for i < ROWS { for j < w (kind k) { body(i * w + j) } } */
static Stmt *rows(Module *m, LoopKind k, int w, Stmt *(*body)(Module *, Buffer **, Expr *, Axis *),
                  Buffer **b) {
    Axis *i = lower_loop_var(m, "i", I(m, ROWS)), *j = lower_loop_var(m, "j", I(m, w));
    Expr *at = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, w)), j->var);
    return loop(m, i, LOOP_SERIAL, loop(m, j, k, body(m, b, at, j)));
}

/* Y = A * B + C; B = A - C (fma, sub, and a store read back) */
static Stmt *fma_body(Module *m, Buffer **b, Expr *at, Axis *j) {
    (void)j;
    Expr *a = ld(m, b[0], at), *bb = ld(m, b[1], at), *c = ld(m, b[2], at);
    return seq2(m, lower_store(m, b[3], at, bin(m, EX_ADD, bin(m, EX_MUL, a, bb), c)),
                lower_store(m, b[1], at, bin(m, EX_SUB, a, c)));
}
static Stmt *build_fma(Module *m, Buffer **b, LoopKind k, int w) {
    return rows(m, k, w, fma_body, b);
}

/* Y[at] = A[at] * B[i] + 2 (B[i] lane-invariant: a broadcast) */
static Stmt *bcast_body(Module *m, Buffer **b, Expr *at, Axis *j) {
    Expr *row = bin(m, EX_SUB, at, j->var); /* i * w */
    return lower_store(m, b[2], at,
                       bin(m, EX_ADD, bin(m, EX_MUL, ld(m, b[0], at), ld(m, b[1], row)), F(m, 2)));
}
static Stmt *build_bcast(Module *m, Buffer **b, LoopKind k, int w) {
    return rows(m, k, w, bcast_body, b);
}

/* Y[at] = A[3 * at + 1] + A[j * j]; Y[at + 64*ROWS] ... (strided and
 * non-affine gathers), and a strided scatter B[2 * at] = A[at]. */
static Stmt *gather_body(Module *m, Buffer **b, Expr *at, Axis *j) {
    Expr *g1 = ld(m, b[0], bin(m, EX_ADD, bin(m, EX_MUL, I(m, 3), at), I(m, 1)));
    Expr *g2 = ld(m, b[0], bin(m, EX_MUL, j->var, j->var));
    return seq2(m, lower_store(m, b[2], at, bin(m, EX_ADD, g1, g2)),
                lower_store(m, b[1], bin(m, EX_MUL, I(m, 2), at), ld(m, b[0], at)));
}
static Stmt *build_gather(Module *m, Buffer **b, LoopKind k, int w) {
    return rows(m, k, w, gather_body, b);
}

/* Y = select(A > B, A, 2 * B) + select(j < 3 && A < 0, 1, 0) */
static Stmt *select_body(Module *m, Buffer **b, Expr *at, Axis *j) {
    Expr *a = ld(m, b[0], at), *bb = ld(m, b[1], at);
    Expr *s1 = ir_select(m, bin(m, EX_GT, a, bb), a, bin(m, EX_MUL, F(m, 2), bb));
    Expr *c = bin(m, EX_AND, bin(m, EX_LT, j->var, I(m, 3)), bin(m, EX_LT, a, F(m, 0)));
    Expr *s2 = ir_select(m, c, F(m, 1), F(m, 0));
    return lower_store(m, b[2], at, bin(m, EX_ADD, s1, s2));
}
static Stmt *build_select(Module *m, Buffer **b, LoopKind k, int w) {
    return rows(m, k, w, select_body, b);
}

/* Y = (float)A + (float)j * 0.5 + (float)(A / 7 + floordiv(A, 3) +
 * floormod(A, 5) + min(A, j) + abs(A)) (A: i32) */
static Stmt *cast_body(Module *m, Buffer **b, Expr *at, Axis *j) {
    Expr *a = ld(m, b[0], at);
    Expr *jj = ir_cast(m, RV_I32, j->var);
    Expr *ints = bin(m, EX_ADD, bin(m, EX_DIV, a, ir_const_int(m, RV_I32, 7)),
                     bin(m, EX_FLOORDIV, a, ir_const_int(m, RV_I32, 3)));
    ints = bin(m, EX_ADD, ints, bin(m, EX_FLOORMOD, a, ir_const_int(m, RV_I32, 5)));
    ints = bin(m, EX_ADD, ints, bin(m, EX_MIN, a, jj));
    ints = bin(m, EX_ADD, ints, ir_unary(m, EX_ABS, a));
    Expr *v = bin(m, EX_ADD, ir_cast(m, RV_F32, a),
                  bin(m, EX_MUL, ir_cast(m, RV_F32, j->var), F(m, 0.5)));
    v = bin(m, EX_ADD, v, ir_cast(m, RV_F32, ints));
    return lower_store(m, b[1], at, v);
}
static Stmt *build_cast(Module *m, Buffer **b, LoopKind k, int w) {
    return rows(m, k, w, cast_body, b);
}

/* Y[f * n + at] = f(A[at]) for every math function */
enum { NMATH = 10 };
static const ExprKind math_kinds[NMATH] = {EX_EXP,  EX_LOG,  EX_TANH,  EX_SIGMOID, EX_ERF,
                                           EX_GELU, EX_SQRT, EX_RSQRT, EX_POW,     EX_MAX};
static int math_w;
static Stmt *math_body(Module *m, Buffer **b, Expr *at, Axis *j) {
    (void)j;
    Stmt *st[NMATH];
    Expr *a = ld(m, b[0], at);
    rv_dtype t = a->dtype;
    Expr *pos = bin(m, EX_ADD, ir_unary(m, EX_ABS, a), ir_float(m, t, 0.25));
    for (int f = 0; f < NMATH; f++) {
        ExprKind k = math_kinds[f];
        Expr *x = k == EX_LOG || k == EX_SQRT || k == EX_RSQRT ? pos : a;
        Expr *v = k == EX_POW   ? bin(m, EX_POW, pos, a)
                  : k == EX_MAX ? bin(m, EX_MAX, a, ir_float(m, t, 0.5))
                                : ir_unary(m, k, x);
        st[f] = lower_store(m, b[1], bin(m, EX_ADD, I(m, (int64_t)f * ROWS * math_w), at), v);
    }
    return lower_seq(m, NMATH, st);
}
static Stmt *build_math(Module *m, Buffer **b, LoopKind k, int w) {
    return rows(m, k, w, math_body, b);
}

/* Y[at] = A[select(i*w < 3*w, at, 0)]: a checked row (rtcheck.c's
 * select(ok, index, 0)) whose check is the same for every lane */
static Stmt *guarded_row_body(Module *m, Buffer **b, Expr *at, Axis *j) {
    Expr *row = ir_simplify_expr(m, bin(m, EX_SUB, at, j->var)); /* i * w */
    Expr *ok = bin(m, EX_LT, row, bin(m, EX_MUL, I(m, 3), j->extent));
    return lower_store(m, b[1], at, ld(m, b[0], ir_select(m, ok, at, I(m, 0))));
}
static Stmt *build_guarded_row(Module *m, Buffer **b, LoopKind k, int w) {
    return rows(m, k, w, guarded_row_body, b);
}

static void test_elementwise(void) {
    static const int ws[] = {2, 3, 5, 8, 16, 17, 32, 64};
    for (int wi = 0; wi < RV_COUNT(ws); wi++) {
        int w = ws[wi];
        int64_t n = ROWS * w;
        Case c = {"fma", 4, {RV_F32, RV_F32, RV_F32, RV_F32}, {n, n, n, n}, build_fma, w, 0, -4, 4};
        char *src = check_case(&c);
        CHECK_STR_CONTAINS(src, "/* vector loop over j: ");
        CHECK(strstr(src, "not vectorized") == NULL);
        if (w == 16) {
            CHECK_STR_CONTAINS(src, "const rv_f32x16 A_v = rv_load_f32x16(&A[i * 16]);\n");
            CHECK_STR_CONTAINS(src, "rv_store_f32x16(&Y[i * 16], A_v * B_v + C_v);\n");
        }
        if (w == 17)
            CHECK_STR_CONTAINS(src, "for (int64_t j = 16; j < 17; j++) {");
        base_free(src);

        Case bc = {"broadcast", 3, {RV_F32, RV_F32, RV_F32}, {n, n, n}, build_bcast, w, 0, -4, 4};
        src = check_case(&bc);
        if (w == 16)
            CHECK_STR_CONTAINS(src, "rv_store_f32x16(&Y[i * 16], A_v * B[i * 16] + 2.0f);");
        base_free(src);

        Case g = {"gather",
                  3,
                  {RV_F32, RV_F32, RV_F32},
                  {3 * n + 4 * w * w, 2 * n, n},
                  build_gather,
                  w,
                  0,
                  -4,
                  4};
        src = check_case(&g);
        if (w == 8) {
            CHECK_STR_CONTAINS(src, "A_g[lane] = A[(i * 24 + 1) + lane * 3];");
            CHECK_STR_CONTAINS(src, "rv_iota_i64x8 * rv_iota_i64x8");
        }
        base_free(src);

        Case s = {"select", 3, {RV_F32, RV_F32, RV_F32}, {n, n, n}, build_select, w, 0, -4, 4};
        src = check_case(&s);
        if (w == 16)
            CHECK_STR_CONTAINS(src, "rv_select_f32x16(A_v > B_v, A_v, 2.0f * B_v)");
        base_free(src);

        Case ca = {"cast", 2, {RV_I32, RV_F32}, {n, n}, build_cast, w, 0, 0, 0};
        src = check_case(&ca);
        if (w == 16)
            CHECK_STR_CONTAINS(src, "__builtin_convertvector(A_v, rv_f32x16)");
        base_free(src);

        for (int t = 0; t < 2; t++) {
            math_w = w;
            Case mc = {"math",         2,          {t ? RV_F64 : RV_F32, t ? RV_F64 : RV_F32},
                       {n, NMATH * n}, build_math, w,
                       t ? 0 : 4e-7,   -9,         9};
            src = check_case(&mc);
            if (w == 16 && !t)
                CHECK_STR_CONTAINS(src, "const rv_f32x16 gelu_v = rv_gelu_f32x16(A_v_");
            base_free(src);
        }
    }
}

/* The GEMM-like micro-kernel: a 4 x 16 tile of C, a local, accumulated
 * over k, then stored to Y: for k { for ii (unroll 4) { for ji (vector
 * 16) { C[ii*16+ji] += A[ii*K+k] * B[k*16+ji] } } }. */
enum { GK = 37 };
static Stmt *build_gemm(Module *m, Buffer **b, LoopKind kind, int w) {
    (void)w;
    Buffer *C = ir_buffer_new(m, "C", RV_F32, I(m, 64), BUF_LOCAL);
    Axis *k = lower_loop_var(m, "k", I(m, GK)), *ii = lower_loop_var(m, "ii", I(m, 4));
    Axis *ji = lower_loop_var(m, "ji", I(m, 16));
    Axis *z = lower_loop_var(m, "z", I(m, 64));
    Expr *at = bin(m, EX_ADD, bin(m, EX_MUL, ii->var, I(m, 16)), ji->var);
    Expr *a = ld(m, b[0], bin(m, EX_ADD, bin(m, EX_MUL, ii->var, I(m, GK)), k->var));
    Expr *bb = ld(m, b[1], bin(m, EX_ADD, bin(m, EX_MUL, k->var, I(m, 16)), ji->var));
    Stmt *upd = lower_store(m, C, at, bin(m, EX_ADD, ld(m, C, at), bin(m, EX_MUL, a, bb)));
    Stmt *nest = loop(m, k, LOOP_SERIAL, loop(m, ii, LOOP_UNROLL, loop(m, ji, kind, upd)));
    Stmt *init = loop(m, z, LOOP_SERIAL, lower_store(m, C, z->var, F(m, 0)));
    Axis *z2 = lower_loop_var(m, "z", I(m, 64));
    Stmt *out = loop(m, z2, LOOP_SERIAL, lower_store(m, b[2], z2->var, ld(m, C, z2->var)));
    Stmt *all[3] = {init, nest, out};
    return lower_alloc(m, C, lower_seq(m, 3, all));
}

static void test_gemm(void) {
    Case c = {"gemm", 3, {RV_F32, RV_F32, RV_F32}, {4 * GK, GK * 16, 64}, build_gemm, 16, 1e-5,
              -2,     2};
    char *src = check_case(&c);
    CHECK_STR_CONTAINS(src, "/* vector loop over ji: 16 lanes, lane l runs ji = l */");
    CHECK_STR_CONTAINS(src, "rv_store_f32x16(&C[ii * 16], C_v + A[ii * 37 + k] * B_v);");
    base_free(src);
}

/* A reduction inside each lane: acc (allocated in the vector loop)
 * becomes a vector; O[j] = sum_k A[k*w + j] * B[k] with an inner serial
 * loop, and the max through a LET. */
static Stmt *build_acc(Module *m, Buffer **b, LoopKind kind, int w) {
    Buffer *acc = ir_buffer_new(m, "acc", RV_F32, I(m, 1), BUF_LOCAL);
    Axis *j = lower_loop_var(m, "j", I(m, w)), *k = lower_loop_var(m, "k", I(m, 9));
    Axis *x = lower_loop_var(m, "x", NULL);
    Expr *zero = I(m, 0);
    Expr *a = ld(m, b[0], bin(m, EX_ADD, bin(m, EX_MUL, k->var, I(m, w)), j->var));
    Stmt *upd = lower_let(
        m, x, bin(m, EX_MUL, a, ld(m, b[1], k->var)),
        lower_store(m, acc, zero, bin(m, EX_ADD, ld(m, acc, zero), ir_unary(m, EX_TANH, x->var))));
    Stmt *all[3] = {lower_store(m, acc, zero, F(m, 0)), loop(m, k, LOOP_SERIAL, upd),
                    lower_store(m, b[2], j->var, ld(m, acc, zero))};
    return loop(m, j, kind, lower_alloc(m, acc, lower_seq(m, 3, all)));
}

static void test_accumulator(void) {
    for (int w = 8; w <= 32; w *= 2) {
        Case c = {"acc", 3, {RV_F32, RV_F32, RV_F32}, {9 * w, 9, w}, build_acc, w, 1e-5, -2, 2};
        char *src = check_case(&c);
        if (w == 16) {
            CHECK_STR_CONTAINS(src, "rv_f32x16 acc;\n");
            CHECK_STR_CONTAINS(src, "acc = rv_splat_f32x16(0.0f);\n");
            CHECK_STR_CONTAINS(src, "acc += tanh_v;\n");
            CHECK_STR_CONTAINS(src, "const rv_f32x16 x = A_v * B[k];\n");
        }
        base_free(src);
    }
}

/* Lane reductions: acc = acc (+, max, min) f(A[i * w + j]) over a vector
 * loop j, acc a register scalar allocated outside the loop (as the
 * lowering makes them) or Y[i] in memory; each lane keeps a partial
 * result, combined across lanes after the loop. */
static ExprKind lane_op;
static rv_dtype lane_type;
static Stmt *build_lane_reduction(Module *m, Buffer **b, LoopKind kind, int w) {
    Axis *i = lower_loop_var(m, "i", I(m, ROWS)), *j = lower_loop_var(m, "j", I(m, w));
    Expr *at = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, w)), j->var);
    Expr *x = ld(m, b[0], at);
    if (ir_is_float(lane_type))
        x = bin(m, EX_MUL, x, ir_unary(m, EX_EXP, ld(m, b[0], at)));
    else
        x = bin(m, EX_MUL, x, ir_const_int(m, lane_type, 3));
    Buffer *acc = ir_buffer_new(m, "acc", lane_type, I(m, 1), BUF_LOCAL);
    Expr *zero = I(m, 0);
    Expr *init =
        lane_op == EX_ADD ? ld(m, b[1], i->var) : ld(m, b[0], bin(m, EX_MUL, i->var, I(m, w)));
    /* acc from Y[i] (sum) or the row's first element (max, min); then
     * Y[i] += the row again, through memory */
    Stmt *reg[3] = {
        lower_store(m, acc, zero, init),
        loop(m, j, kind, lower_store(m, acc, zero, bin(m, lane_op, ld(m, acc, zero), x))),
        lower_store(m, b[1], i->var, ld(m, acc, zero))};
    Axis *j2 = lower_loop_var(m, "j", I(m, w));
    Expr *at2 = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, w)), j2->var);
    Stmt *mem =
        loop(m, j2, kind,
             lower_store(m, b[1], i->var, bin(m, lane_op, ld(m, b[1], i->var), ld(m, b[0], at2))));
    return loop(m, i, LOOP_SERIAL, seq2(m, lower_alloc(m, acc, lower_seq(m, 3, reg)), mem));
}

static void test_lane_reduction(void) {
    static const ExprKind ops[] = {EX_ADD, EX_MAX, EX_MIN};
    static const rv_dtype types[] = {RV_F32, RV_F64, RV_I32, RV_I64};
    static const int widths[] = {3, 17, 24, 64}; /* 2 + 1, 16 + 1, 16 + 8, 4 x 16 */
    for (int o = 0; o < 3; o++)
        for (int t = 0; t < 4; t++)
            for (int wi = 0; wi < RV_COUNT(widths); wi++) {
                int w = widths[wi];
                lane_op = ops[o];
                lane_type = types[t];
                /* float sums reassociate, and the vector exp is not libm's:
                 * rounding differs in the last bits */
                double tol = ir_is_float(types[t]) ? 1e-5 : 0;
                Case c = {"lane_reduction",
                          2,
                          {types[t], types[t]},
                          {ROWS * w, ROWS},
                          build_lane_reduction,
                          w,
                          tol,
                          -3,
                          3};
                char *src = check_case(&c);
                CHECK(strstr(src, "not vectorized") == NULL);
                if (w == 64 && ops[o] == EX_ADD && types[t] == RV_F32) {
                    CHECK_STR_CONTAINS(src, "rv_f32x16 acc_lanes = (rv_f32x16){0};");
                    CHECK_STR_CONTAINS(src, "acc += rv_hsum_f32x16(acc_lanes);\n");
                    CHECK_STR_CONTAINS(src, "Y[i] += rv_hsum_f32x16(Y_lanes);\n");
                }
                if (w == 24 && ops[o] == EX_MAX && types[t] == RV_I32) {
                    CHECK_STR_CONTAINS(src, "rv_i32x16 acc_lanes = rv_splat_i32x16(acc);");
                    CHECK_STR_CONTAINS(src, "acc = rv_hmax_i32x8(acc_lanes_1);\n");
                }
                base_free(src);
            }
}

/* A block copied transposed (c_transpose.c): for blk < 2, an unrolled
 * loop over c < tp_cols and a vector loop over r < w,
 *   Y[blk * C * D + q + r] = A[blk * w * S + c + r * S], q = c * D (a LET)
 * with row strides S = C + 3 and D = w + 1 (gaps the copy leaves alone). */
static int tp_cols;
static Stmt *build_transpose(Module *m, Buffer **b, LoopKind kind, int w) {
    int64_t cols = tp_cols, src_stride = cols + 3, dst_stride = w + 1;
    Axis *blk = lower_loop_var(m, "blk", I(m, 2)), *c = lower_loop_var(m, "c", I(m, cols)),
         *r = lower_loop_var(m, "r", I(m, w)), *q = lower_loop_var(m, "q", I(m, cols * dst_stride));
    Expr *dst =
        bin(m, EX_ADD, bin(m, EX_ADD, bin(m, EX_MUL, blk->var, I(m, cols * dst_stride)), q->var),
            r->var);
    Expr *src =
        bin(m, EX_ADD, bin(m, EX_ADD, bin(m, EX_MUL, blk->var, I(m, w * src_stride)), c->var),
            bin(m, EX_MUL, r->var, I(m, src_stride)));
    Stmt *copy = loop(m, r, kind, lower_store(m, b[1], dst, ld(m, b[0], src)));
    Stmt *body = lower_let(m, q, bin(m, EX_MUL, c->var, I(m, dst_stride)), copy);
    return loop(m, blk, LOOP_SERIAL, loop(m, c, LOOP_UNROLL, body));
}

static void test_transpose(void) {
    static const rv_dtype types[] = {RV_F32, RV_I32, RV_F64, RV_I64};
    /* rows x cols: whole, one short, narrow, tiny, square halves */
    static const int shapes[][2] = {{16, 16}, {15, 16}, {16, 5}, {3, 7}, {8, 8}, {2, 2}, {8, 3}};
    for (int t = 0; t < RV_COUNT(types); t++)
        for (int si = 0; si < RV_COUNT(shapes); si++) {
            int w = shapes[si][0], lanes = rv_dtype_size(types[t]) == 4 ? 16 : 8;
            tp_cols = shapes[si][1];
            if (w > lanes || tp_cols > lanes)
                continue;
            int64_t cols = tp_cols;
            Case cs = {"transpose",
                       2,
                       {types[t], types[t]},
                       {2 * w * (cols + 3), 2 * cols * (w + 1)},
                       build_transpose,
                       w,
                       0,
                       -3,
                       3};
            char *src = check_case(&cs);
            char call[128];
            snprintf(call, sizeof call, "rv_transpose_%sx%d(&Y[", rv_dtype_name(types[t]), lanes);
            CHECK_STR_CONTAINS(src, call);
            snprintf(call, sizeof call, "], %d, %lld, %lld);\n", (int)cols + 3, (long long)w,
                     (long long)cols);
            CHECK_STR_CONTAINS(src, call);
            base_free(src);
        }
    /* wider than a native vector: gathers, as before */
    tp_cols = 4;
    Case wide = {"transpose", 2, {RV_F32, RV_F32}, {2 * 17 * 7, 2 * 4 * 18}, build_transpose, 17, 0,
                 -3,          3};
    char *src = check_case(&wide);
    CHECK(strstr(src, "rv_transpose_") == NULL);
    CHECK_STR_CONTAINS(src, "A_g[lane] = A[");
    base_free(src);
}

/* Stores of every lane to one element that are not lane reductions keep
 * the scalar loop: a plain store (the last lane would win), an update
 * whose accumulator the loop also reads, an update of an element an inner
 * loop changes (an in-place accumulation: for j { for c { Y[c] += ... } }).
 * Also a varying condition. */
static Stmt *build_cross(Module *m, Buffer **b, LoopKind kind, int w) {
    Axis *i = lower_loop_var(m, "i", I(m, ROWS)), *j = lower_loop_var(m, "j", I(m, w));
    Expr *at = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, w)), j->var);
    Stmt *last = lower_store(m, b[1], i->var, ld(m, b[0], at));
    Axis *j3 = lower_loop_var(m, "j", I(m, w));
    Expr *at3 = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, w)), j3->var);
    Expr *y = ld(m, b[1], i->var);
    Stmt *reread = seq2(m, lower_store(m, b[0], at3, bin(m, EX_MUL, y, F(m, 0.5))),
                        lower_store(m, b[1], i->var, bin(m, EX_ADD, y, ld(m, b[0], at3))));
    Axis *j2 = lower_loop_var(m, "j", I(m, w));
    Expr *at2 = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, w)), j2->var);
    Stmt *cond = lower_if(m, bin(m, EX_GT, ld(m, b[0], at2), F(m, 0)),
                          lower_store(m, b[0], at2, F(m, 0)), NULL);
    Axis *j4 = lower_loop_var(m, "j", I(m, w)), *c = lower_loop_var(m, "c", I(m, ROWS));
    Expr *at4 = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, w)), j4->var);
    Stmt *inner = loop(m, c, LOOP_SERIAL,
                       lower_store(m, b[1], c->var,
                                   bin(m, EX_ADD, ld(m, b[1], c->var),
                                       bin(m, EX_MUL, ld(m, b[0], at4), F(m, 0.25)))));
    Stmt *all[4] = {loop(m, j, kind, last), loop(m, j3, kind, reread), loop(m, j2, kind, cond),
                    loop(m, j4, kind, inner)};
    return loop(m, i, LOOP_SERIAL, lower_seq(m, 4, all));
}

static void test_fallback(void) {
    Case c = {"cross", 2, {RV_F32, RV_F32}, {ROWS * 16, ROWS}, build_cross, 16, 1e-6, -1, 1};
    char *src = check_case(&c);
    CHECK_STR_CONTAINS(src, "/* not vectorized: every lane stores to one element, not as a sum, "
                            "max or min */\n");
    CHECK_STR_CONTAINS(src, "/* not vectorized: the loop reads or writes the buffer every lane "
                            "accumulates into */\n");
    CHECK_STR_CONTAINS(src, "/* not vectorized: an if condition varies across lanes */\n");
    CHECK_STR_CONTAINS(src, "/* not vectorized: every lane accumulates into an element that an "
                            "inner loop changes */\n");
    CHECK_STR_CONTAINS(src, "#pragma omp simd\n");
    base_free(src);
}

/* ---- accuracy of the f32 math helpers ---- */

static double ref_of(ExprKind k, double x) {
    switch (k) {
    case EX_EXP:
        return exp(x);
    case EX_LOG:
        return log(x);
    case EX_TANH:
        return tanh(x);
    case EX_SIGMOID: /* 0 where e^-x overflows in f32, as the scalar helper */
        return (float)exp(-x) == INFINITY ? 0 : 1 / (1 + exp(-x));
    case EX_ERF:
        return erf(x);
    case EX_GELU: /* erfc keeps the negative tail exact in double too */
        return 0.5 * x * erfc(-x / sqrt(2.0));
    case EX_SQRT:
        return sqrt(x);
    default:
        return 1 / sqrt(x);
    }
}

/* |got - want| in ulps of want rounded to f32 (subnormals: in ulps of the
 * smallest normal; 0 for a subnormal flushed to zero, which c_vmath.c
 * allows); -1 when NaN/inf/overflow behaviour differs. */
static double ulp_error(float got, double want) {
    if (isnan(want))
        return isnan(got) ? 0 : -1;
    float wf = (float)want;
    if (isinf(wf) || isinf(got))
        return got == wf ? 0 : -1;
    if (got == 0 && fabs(want) < FLT_MIN)
        return 0;
    int e;
    frexp(want, &e);
    if (e - 1 < -126)
        e = -125;
    return fabs((double)got - want) / ldexp(1.0, e - 1 - 23);
}

/* The bounds the comments of c_vmath.c state, in ulps. */
static const struct {
    ExprKind k;
    double ulps;
} bounds[] = {{EX_EXP, 1.5}, {EX_LOG, 1.5},  {EX_TANH, 2.5}, {EX_SIGMOID, 2.5},
              {EX_ERF, 2.5}, {EX_GELU, 5.0}, {EX_SQRT, 0.5}, {EX_RSQRT, 1.5}};

/* Y = k(X) over n floats (a multiple of w), by vector loops of w lanes:
 * one call of the helper rv_k_f32x<w> per w inputs. 0 if the kernel did
 * not build. */
static int run_math(ExprKind k, int w, const float *x, float *y, int64_t n) {
    Module *m = rv_module_new();
    Buffer *X = ir_buffer_new(m, "X", RV_F32, I(m, n), BUF_ARG);
    Buffer *Y = ir_buffer_new(m, "Y", RV_F32, I(m, n), BUF_ARG);
    Param params[2] = {{.kind = PARAM_TENSOR, .buf = X}, {.kind = PARAM_TENSOR, .buf = Y}};
    Axis *i = lower_loop_var(m, "i", I(m, n / w)), *j = lower_loop_var(m, "j", I(m, w));
    Expr *at = bin(m, EX_ADD, bin(m, EX_MUL, i->var, I(m, w)), j->var);
    Stmt *body = loop(m, i, LOOP_SERIAL,
                      loop(m, j, LOOP_VECTOR, lower_store(m, Y, at, ir_unary(m, k, ld(m, X, at)))));
    Kernel kern = {.name = "K", .m = m, .nparams = 2, .params = params, .body = body};
    char *src;
    JitLib *lib;
    rv_rt_kernel_fn fn = build(&kern, &src, &lib);
    if (fn) {
        void *bufs[2] = {(void *)x, y};
        struct rv_rt_ctx ctx = {.abi_version = RV_RT_ABI_VERSION, .num_threads = 1};
        CHECK_EQ_INT(fn(NULL, bufs, &ctx), RV_RT_OK);
    }
    base_free(src);
    jit_close(lib);
    rv_module_free(m);
    return fn != NULL;
}

/* The helpers on vectors of w lanes: each width has its own code path
 * where the ISA has one (rv_recip_: AVX-512's 512-bit, or with VL its
 * 256- and 128-bit reciprocal). */
static void accuracy_at(int w) {
    /* the inputs: every 4099th float of each sign, a grid, the specials */
    enum { STRIDE = 4099, GRID = 1 << 20 };
    int64_t n = 0, cap = 2 * (0x7f800000 / STRIDE + 2) + GRID + 64;
    float *x = aligned((size_t)cap * 4);
    for (uint32_t u = 0; u < 0x7f800000u; u += STRIDE) {
        float f;
        memcpy(&f, &u, 4);
        x[n++] = f;
        x[n++] = -f;
    }
    for (int q = 0; q < GRID; q++)
        x[n++] = (float)(-12.0 + 24.0 * q / GRID);
    const float special[] = {0.0f,     -0.0f,   INFINITY,    -INFINITY,   NAN,     FLT_MIN,
                             -FLT_MIN, FLT_MAX, -FLT_MAX,    1e-45f,      -1e-45f, 88.7f,
                             88.73f,   -87.4f,  -103.9f,     -104.5f,     0.625f,  -0.625f,
                             0.5f,     -0.5f,   9.1f,        -9.1f,       1.0f,    -1.0f,
                             3.92f,    -3.92f,  0.70710678f, -0.70710678f};
    for (int q = 0; q < RV_COUNT(special); q++)
        x[n++] = special[q];
    n = n / w * w;
    for (int bi = 0; bi < RV_COUNT(bounds); bi++) {
        ExprKind k = bounds[bi].k;
        float *y = aligned((size_t)n * 4);
        double worst = 0, worst_rel = 0;
        float worst_at = 0;
        int wrong = 0;
        if (run_math(k, w, x, y, n)) {
            for (int64_t q = 0; q < n; q++) {
                double want = ref_of(k, x[q]);
                double e = ulp_error(y[q], want);
                if (e < 0) {
                    if (wrong++ < 3)
                        fprintf(stderr, "    %s(%.9g) = %.9g, want %.9g\n", ir_expr_info[k].text,
                                x[q], y[q], want);
                    continue;
                }
                if (e > worst) {
                    worst = e;
                    worst_at = x[q];
                }
                if (fabs(want) >= FLT_MIN && !isinf(want) && fabs(want) <= FLT_MAX) {
                    double rel = fabs(y[q] - want) / fabs(want);
                    worst_rel = rel > worst_rel ? rel : worst_rel;
                }
            }
        }
        if (getenv("RAVEL_TEST_SHOW_ERRORS"))
            printf("%2d lanes: %-8s max %.3f ulp (at %.9g), max relative %.3g\n", w, ir_expr_info[k].text,
                   worst, worst_at, worst_rel);
        CHECK_EQ_INT(wrong, 0);
        CHECK(worst <= bounds[bi].ulps);
        if (worst > bounds[bi].ulps)
            fprintf(stderr, "    %s (%d lanes): %.3f ulp at %.9g, bound %.1f\n", ir_expr_info[k].text,
                    w, worst, worst_at, bounds[bi].ulps);
        free(y);
    }
    free(x);
}

static void test_accuracy(void) {
    static const int ws[] = {16, 8, 4};
    for (int wi = 0; wi < RV_COUNT(ws); wi++)
        accuracy_at(ws[wi]);
}

/* erf and gelu skip, per vector, the parts of their formula no lane
 * needs (c_vmath.c): the erfc branch when every |t| < 0.5 (t = x for erf,
 * x / sqrt 2 for gelu), one fit of erfc or the other when every t is
 * below 2 or none is, gelu's tail select when no x < -13.146. Vectors of
 * each kind and mixtures of them (small lanes with one large, NaN, +-inf,
 * -0 or subnormal lane, near with far, random draws from every pool): a
 * lane's result must be the one it gets in a vector of copies of itself
 * (its neighbours choose the branch, never the value), and within the
 * bound against libm. */
static float pool_draw(int pool, double scale) {
    static const float special[] = {NAN,      -NAN,    INFINITY, -INFINITY, -0.0f,  0.0f,
                                    1e-45f,   -1e-45f, FLT_MIN,  -FLT_MIN,  1e-30f, -13.2f,
                                    -FLT_MAX, FLT_MAX, -1e30f,   40.0f,     -20.0f};
    double sign = uniform() < 0.5 ? -1 : 1;
    switch (pool) {
    case 0: /* small: t < 0.5 */
        return (float)(sign * scale * 0.4999 * uniform());
    case 1: /* near: 0.5 <= t < 2 */
        return (float)(sign * scale * (0.5 + 1.4999 * uniform()));
    case 2: /* far: 2 <= t, up to where the results saturate and beyond */
        return (float)(sign * scale * (2 + 8 * uniform()));
    default:
        return special[(int)(uniform() * RV_COUNT(special))];
    }
}

static int same_result(float a, float b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0;
}

static void branches_at(ExprKind k, int w, double ulps) {
    enum { PER = 48, KINDS = 9 };
    double scale = k == EX_GELU ? sqrt(2.0) : 1.0;
    int64_t n = (int64_t)PER * KINDS * w;
    float *x = aligned((size_t)n * 4), *alone = aligned((size_t)n * w * 4);
    float *y = aligned((size_t)n * 4), *ya = aligned((size_t)n * w * 4);
    rng_state = 77;
    int64_t q = 0;
    for (int kind = 0; kind < KINDS; kind++) {
        for (int v = 0; v < PER; v++) {
            for (int l = 0; l < w; l++) {
                int pool = kind < 4 ? kind                   /* all of one pool */
                           : kind == 4 ? (l == v % w)        /* small, one near */
                           : kind == 5 ? 1 + (l == v % w)    /* near, one far */
                           : kind == 6 ? 3 * (l == v % w)    /* small, one special */
                           : kind == 7 ? 2 * (l == v % w)    /* small, one far */
                                       : (int)(uniform() * 4); /* anything */
                x[q++] = pool_draw(pool, scale);
            }
        }
    }
    for (int64_t i = 0; i < n; i++)
        for (int l = 0; l < w; l++)
            alone[i * w + l] = x[i];
    if (run_math(k, w, x, y, n) && run_math(k, w, alone, ya, n * w)) {
        int differ = 0, wrong = 0;
        for (int64_t i = 0; i < n; i++) {
            if (!same_result(y[i], ya[i * w]) && differ++ < 3)
                fprintf(stderr, "    %s(%.9g) = %.9g beside lanes of vector %lld, %.9g alone\n",
                        ir_expr_info[k].text, x[i], y[i], (long long)(i / w), ya[i * w]);
            double e = ulp_error(y[i], ref_of(k, x[i]));
            if ((e < 0 || e > ulps) && wrong++ < 3)
                fprintf(stderr, "    %s(%.9g) = %.9g, want %.9g\n", ir_expr_info[k].text, x[i],
                        y[i], ref_of(k, x[i]));
        }
        CHECK_EQ_INT(differ, 0);
        CHECK_EQ_INT(wrong, 0);
    }
    free(x);
    free(alone);
    free(y);
    free(ya);
}

static void test_math_branches(void) {
    /* 16, 8, 4 lanes: AVX-512, AVX and SSE compares; 32 and 2: the lane
     * loop (which GCC makes as fast as two AVX-512 compares at 32) */
    static const int ws[] = {16, 8, 4, 32, 2};
    for (int wi = 0; wi < RV_COUNT(ws); wi++) {
        branches_at(EX_ERF, ws[wi], 2.5);
        branches_at(EX_GELU, ws[wi], 5.0);
    }
}

/* Y = f64(A) + f64(A * A): i32 -> f64 of a vector variable, which gcc 12
 * with AVX-512 fails on at -O0 (internal compiler error) when emitted as
 * one __builtin_convertvector. */
static Stmt *widen_body(Module *m, Buffer **b, Expr *at, Axis *j) {
    (void)j;
    Expr *a = ld(m, b[0], at);
    Expr *v = bin(m, EX_ADD, ir_cast(m, RV_F64, a), ir_cast(m, RV_F64, bin(m, EX_MUL, a, a)));
    return lower_store(m, b[1], at, v);
}
static Stmt *build_widen(Module *m, Buffer **b, LoopKind k, int w) {
    return rows(m, k, w, widen_body, b);
}

/* A load whose index is checked the same way for all lanes is the
 * contiguous load where the check holds, element 0 splatted where it
 * fails (rows 3.. here), not a gather; a partial vector (w = 17's last
 * lane) keeps the gather. */
static void test_uniform_guard(void) {
    static const int ws[] = {8, 16, 17};
    for (int wi = 0; wi < RV_COUNT(ws); wi++) {
        int w = ws[wi];
        int64_t n = ROWS * w;
        Case c = {"guarded row", 2, {RV_F32, RV_F32}, {n, n}, build_guarded_row, w, 0, -4, 4};
        char *src = check_case(&c);
        if (w == 16)
            CHECK_STR_CONTAINS(src, "? rv_load_f32x16(&A[i * 16]) : rv_splat_f32x16(A[0]);");
        CHECK(w == 17 || strstr(src, "A_g[lane]") == NULL);
        base_free(src);
    }
}

static void test_widen_at_O0(void) {
    static const int ws[] = {1, 8, 16, 32};
    opt_level = "-O0";
    for (int wi = 0; wi < RV_COUNT(ws); wi++) {
        int64_t n = ROWS * ws[wi];
        Case c = {"i32 to f64 at -O0", 2, {RV_I32, RV_F64}, {n, n}, build_widen, ws[wi], 0, 0, 0};
        char *src = check_case(&c);
        if (ws[wi] == 16)
            CHECK_STR_CONTAINS(
                src, "__builtin_convertvector(__builtin_convertvector(A_v, rv_i64x16), rv_f64x16)");
        base_free(src);
    }
    opt_level = NULL;
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-vector-XXXXXX");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_elementwise);
    RUN(test_gemm);
    RUN(test_accumulator);
    RUN(test_lane_reduction);
    RUN(test_transpose);
    RUN(test_fallback);
    RUN(test_accuracy);
    RUN(test_math_branches);
    RUN(test_widen_at_O0);
    RUN(test_uniform_guard);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache_dir);
    return harness_report();
}
