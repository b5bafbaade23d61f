/*
 * test_kernels.c — the benchmark kernels, checked against the interpreter.
 *
 * bench/kernel_sources.c writes the .rv programs (definition + schedule)
 * that the benchmarks compile and time; this test compiles the same text
 * through the public API (rv_module_parse, rv_program_compile) at small
 * sizes and compares every output with the reference interpreter on the
 * same inputs, so what is timed is known to compute the right thing.
 *
 * Covered: every kind, the three schedules of the dense kinds (each named
 * explicitly, not only the one rk_variant_rule picks), N and K that are and
 * are not multiples of the tiles (16x24 for stream, 16x8 for stream
 * when K * 4 is a multiple of 4 KiB, 6x64 packed and
 * kblock, k blocks of RK_KBLOCK_K, 6 x
 * 64/32/16/N for the broadcast kernel of bmm and sgemm, k split by 8 or
 * 16), N below 16 and K down to 1, and M (the symbolic size, M = 16*T in
 * the dense benchmark) on both sides of every tile edge, with primes and
 * one M above RK_STREAM_MAX_M. Gelu's inputs reach about
 * +-15 through the bias, into the tails where the vector gelu flushes
 * results below FLT_MIN to zero.
 *
 * Tolerance: the interpreter sums in double, the kernels in f32 in another
 * order: an output may be off by at most about K * FLT_EPSILON / 2 *
 * sum_k |x w|. The check allows 2 * (K + 4) * FLT_EPSILON times that sum
 * (gelu is 1.13-Lipschitz and its own error is a few ulp), plus 1e-6
 * absolute for gelu's flushed tails; the kernels stay under 1/10 of it. A
 * wrong index or a lost term errs by about one |x w| product, far above.
 *
 * Inputs are drawn from a fixed-seed generator; compiles go to a private
 * cache directory, removed at the end. In a sanitizer build the generated
 * code is instrumented too.
 *
 * The .rv files of bench/programs/ (rk_programs: the variants as files)
 * must be what rk_program_text writes, and check; `test_kernels
 * --write-programs` (`make bench-programs`) rewrites them. Run from the
 * repository root.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <unistd.h>

#include "harness.h"
#include "kernel_sources.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static char cache_dir[PATH_MAX];

/* -O0 comes after the JIT's -O3 and wins: GCC 12 takes 10-40 s at -O3 on
 * each stream kernel (the block for M % 16 rows unrolls 24 x 8 simd loops
 * of run-time extent), 0.1 s at -O0. What the kernels compute does not
 * depend on the level; bench-verify checks the -O3 build at full size. */
#if defined(__SANITIZE_ADDRESS__)
#define PROGRAM_CFLAGS "-O0 -fsanitize=address,undefined -fno-omit-frame-pointer"
#else
#define PROGRAM_CFLAGS "-O0"
#endif

static const char *const kind_names[RK_COUNT] = {"dense", "dense_bias_gelu", "bmm_nt", "bmm_nn",
                                                 "sgemm"};

/* Row counts: 1, around the 6-row tiles (5, 6, 7) and the 16-row tiles
 * (16, 17, 48), primes (2, 5, 7, 17, 23). */
static const int small_ms[] = {1, 2, 5, 6, 7, 16, 17, 23, 48};

/* ---- inputs ---- */

static uint64_t rng_state;

/* Uniform in [-1, 1), from a 64-bit LCG (Knuth's MMIX constants). */
static double rng_uniform(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / (double)(1ull << 52) - 1.0;
}

/* A new f32 array of the given shape with values from rng_uniform. */
static rv_array *random_array(int ndim, const int64_t *shape) {
    rv_array *a = rv_array_new(RV_F32, ndim, shape);
    for (int64_t i = 0; i < rv_array_numel(a); i++)
        rv_array_set_f64(a, i, rng_uniform());
    return a;
}

/* The bias spans -15..15 across the columns (plus noise), so with the
 * products' sum in a few units gelu sees both tails. */
static rv_array *bias_array(int n) {
    int64_t shape[1] = {n};
    rv_array *a = rv_array_new(RV_F32, 1, shape);
    for (int j = 0; j < n; j++)
        rv_array_set_f64(a, j, (n > 1 ? -15.0 + 30.0 * j / (n - 1) : 15.0) + 0.5 * rng_uniform());
    return a;
}

/* ---- one kernel ---- */

typedef struct KernelCase {
    RavelKernelKind kind;
    int variant;
    int batch, n, k; /* batch is 0 for the 2-D kinds */
} KernelCase;

static void describe(const KernelCase *c, int m, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s batch=%d n=%d k=%d M=%d", kind_names[c->kind],
             rk_variant_name(c->kind, c->variant), c->batch, c->n, c->k, m);
}

/* The scale of the rounding error of Y's element at flat index e (Y[(b,)
 * i, j]): sum_k |x w|, plus |bias[j]|, from the inputs. */
static double error_scale(const KernelCase *c, int m, const rv_array *x, const rv_array *w,
                          const rv_array *bias, int64_t e) {
    int n = c->n, k = c->k;
    int64_t j = e % n, i = e / n % m, b = e / ((int64_t)n * m);
    int nt = c->kind == RK_DENSE || c->kind == RK_DENSE_BIAS_GELU || c->kind == RK_BMM_NT;
    double s = bias ? fabs(rv_array_get_f64(bias, j)) : 0.0;
    for (int kk = 0; kk < k; kk++) {
        double xv = rv_array_get_f64(x, (b * m + i) * k + kk);
        double wv = rv_array_get_f64(w, nt ? (b * n + j) * k + kk : (b * k + kk) * n + j);
        s += fabs(xv * wv);
    }
    return s;
}

/* Runs the compiled program and the interpreter on the same inputs for M
 * rows and compares Y; on a mismatch prints the reproducer and the worst
 * element. */
static void check_m(const rv_module *mod, rv_program *p, const KernelCase *c, int m) {
    char what[128];
    describe(c, m, what, sizeof what);
    int batched = c->kind == RK_BMM_NT || c->kind == RK_BMM_NN;
    int nt = c->kind != RK_BMM_NN && c->kind != RK_SGEMM;
    int64_t xs[3] = {c->batch, m, c->k}, ws[3] = {c->batch, nt ? c->n : c->k, nt ? c->k : c->n};
    rng_state = 0x5eed0000u + (uint64_t)m * 1000003u + (uint64_t)c->n * 101u + (uint64_t)c->k;
    rv_array *x = random_array(batched ? 3 : 2, batched ? xs : xs + 1);
    rv_array *w = random_array(batched ? 3 : 2, batched ? ws : ws + 1);
    rv_array *bias = c->kind == RK_DENSE_BIAS_GELU ? bias_array(c->n) : NULL;

    rv_bindings *want = rv_bindings_new(mod), *got = rv_bindings_new(mod);
    rv_bindings *both[2] = {want, got};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(rv_bindings_set_size(both[i], "M", m), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_array(both[i], "X", x), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_array(both[i], "W", w), RV_OK);
        if (bias)
            CHECK_EQ_INT(rv_bindings_set_array(both[i], "bias", bias), RV_OK);
    }
    rv_status st = rv_interp_run(mod, want);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "    %s: interpreter: %s\n", what, rv_last_error());
    rv_status st2 = rv_program_run(p, got);
    CHECK_EQ_INT(st2, RV_OK);
    if (st2 != RV_OK)
        fprintf(stderr, "    %s: program: %s\n", what, rv_last_error());

    const rv_array *yw = rv_bindings_get_array(want, "Y"), *yg = rv_bindings_get_array(got, "Y");
    int64_t numel = (int64_t)(batched ? c->batch : 1) * m * c->n;
    int shapes_ok = st == RV_OK && st2 == RV_OK && yw && yg && rv_array_numel(yw) == numel &&
                    rv_array_numel(yg) == numel;
    CHECK(shapes_ok);
    int64_t bad = 0, worst = -1;
    double worst_ratio = 0, worst_err = 0;
    for (int64_t e = 0; shapes_ok && e < numel; e++) {
        double a = rv_array_get_f64(yg, e), b = rv_array_get_f64(yw, e);
        double err = isnan(a) || isnan(b) ? INFINITY : fabs(a - b);
        double tol = 2.0 * (c->k + 4) * FLT_EPSILON * error_scale(c, m, x, w, bias, e) + 1e-6;
        if (err > tol)
            bad++;
        if (err / tol > worst_ratio)
            worst_ratio = err / tol, worst = e, worst_err = err;
    }
    CHECK_EQ_INT(bad, 0);
    if (bad)
        fprintf(stderr,
                "    %s: %lld of %lld elements differ; max error %.3g at flat index %lld "
                "(compiled %.9g, interpreter %.9g)\n",
                what, (long long)bad, (long long)numel, worst_err, (long long)worst,
                rv_array_get_f64(yg, worst), rv_array_get_f64(yw, worst));
    rv_bindings_free(want);
    rv_bindings_free(got);
    rv_array_free(x);
    rv_array_free(w);
    rv_array_free(bias);
}

/* Generates, parses and compiles one kernel, then checks it for each M. */
static void check_kernel(KernelCase c, const int *ms, int nms) {
    static char text[8192];
    char what[128];
    describe(&c, 0, what, sizeof what);
    CHECK(rk_source(c.kind, c.batch, c.n, c.k, c.variant, text, sizeof text));
    rv_module *mod = NULL;
    rv_status st = rv_module_parse(what, text, &mod);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "    %s: %s\n%s", what, rv_last_error(), text);
        return;
    }
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS};
    rv_program *p = NULL;
    st = rv_program_compile(mod, &opt, &p);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "    %s: %s\n", what, rv_last_error());
        rv_module_free(mod);
        return;
    }
    for (int i = 0; i < nms; i++)
        check_m(mod, p, &c, ms[i]);
    rv_program_free(p);
    rv_module_free(mod);
}

/* ---- the tests ---- */

/* Both dense kinds, all three schedules each, at ragged and exact tile
 * sizes; the packed schedule also above the M where the benchmark switches
 * to it; kblock also with K over two blocks, the second partial. */
static void check_dense(RavelKernelKind kind) {
    static const int packed_ms[] = {1, 2, 5, 6, 7, 16, 17, 23, 48, 211};
    static const int shapes[][2] = {{37, 19}, {70, 33}, {64, 32}, {48, 16}};
    CHECK_EQ_INT(rk_variant_count(kind), 3);
    for (int s = 0; s < COUNT(shapes); s++) {
        KernelCase stream = {kind, RK_VARIANT_STREAM, 0, shapes[s][0], shapes[s][1]};
        KernelCase packed = {kind, RK_VARIANT_PACKED, 0, shapes[s][0], shapes[s][1]};
        KernelCase kblock = {kind, RK_VARIANT_KBLOCK, 0, shapes[s][0], shapes[s][1]};
        check_kernel(stream, small_ms, COUNT(small_ms));
        check_kernel(packed, packed_ms, COUNT(packed_ms));
        check_kernel(kblock, small_ms, COUNT(small_ms));
    }
    KernelCase deep = {kind, RK_VARIANT_KBLOCK, 0, 70, RK_KBLOCK_K + 45};
    check_kernel(deep, small_ms, COUNT(small_ms));
    /* rows 4 KiB apart: the 8-row stream tile, 37 = 4 * 8 + 5 */
    KernelCase aliased = {kind, RK_VARIANT_STREAM, 0, 37, 1024};
    check_kernel(aliased, small_ms, COUNT(small_ms));
}

static void test_dense(void) {
    check_dense(RK_DENSE);
}

static void test_dense_bias_gelu(void) {
    check_dense(RK_DENSE_BIAS_GELU);
}

/* The batched kinds share the broadcast kernel, whose column tile is 64,
 * 32 or 16 by N, or all of a narrower N; NT reads W through a k-major copy
 * of its panel; NT's other schedule ("dot", small N) is a vector dot
 * product per output, each case runs both. In the benchmark NT's N and
 * NN's K are T itself (1 to 128), so narrow N and short K are covered. */
static void test_bmm_nt(void) {
    static const KernelCase cases[] = {
        {RK_BMM_NT, 0, 3, 5, 19},  {RK_BMM_NT, 0, 3, 13, 64}, {RK_BMM_NT, 0, 3, 23, 16},
        {RK_BMM_NT, 0, 3, 37, 19}, {RK_BMM_NT, 0, 2, 70, 33}, {RK_BMM_NT, 0, 2, 64, 32},
    };
    CHECK_EQ_INT(rk_variant_count(RK_BMM_NT), 2);
    for (int i = 0; i < COUNT(cases); i++) {
        KernelCase dot = cases[i];
        dot.variant = RK_VARIANT_DOT;
        check_kernel(cases[i], small_ms, COUNT(small_ms));
        check_kernel(dot, small_ms, COUNT(small_ms));
    }
}

static void test_bmm_nn(void) {
    static const KernelCase cases[] = {
        {RK_BMM_NN, 0, 3, 10, 7},  {RK_BMM_NN, 0, 3, 23, 19}, {RK_BMM_NN, 0, 3, 37, 17},
        {RK_BMM_NN, 0, 2, 64, 32}, {RK_BMM_NN, 0, 3, 64, 1},  {RK_BMM_NN, 0, 3, 70, 5},
    };
    CHECK_EQ_INT(rk_variant_count(RK_BMM_NN), 2);
    for (int i = 0; i < COUNT(cases); i++) {
        KernelCase four = cases[i];
        four.variant = RK_VARIANT_4ROWS;
        check_kernel(cases[i], small_ms, COUNT(small_ms));
        check_kernel(four, small_ms, COUNT(small_ms));
    }
}

/* SGEMM is the NN form without a batch; from N = 1024 on it packs W, so
 * one wide, shallow shape covers that schedule. */
static void test_sgemm(void) {
    static const KernelCase cases[] = {
        {RK_SGEMM, 0, 0, 70, 33}, {RK_SGEMM, 0, 0, 32, 16}, {RK_SGEMM, 0, 0, 9, 13}};
    static const int wide_ms[] = {1, 7, 17};
    CHECK_EQ_INT(rk_variant_count(RK_SGEMM), 1);
    for (int i = 0; i < COUNT(cases); i++)
        check_kernel(cases[i], small_ms, COUNT(small_ms));
    check_kernel((KernelCase){RK_SGEMM, 0, 0, 1030, 20}, wide_ms, COUNT(wide_ms));
}

/* The benchmark's rule: stream while M <= RK_STREAM_MAX_M and M*K <=
 * RK_STREAM_MAX_XL or M <= RK_STREAM_MIN_M, kblock up to RK_KBLOCK_MAX_M rows (RK_KBLOCK_DEEP_MAX_M
 * when K > RK_DEEP_K), packed above; unknown variants and buffers too small
 * for the text are refused. */
static void test_sources(void) {
    char buf[4096], tiny[16];
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, 1, 768, 768), RK_VARIANT_STREAM);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, 80, 768, 768), RK_VARIANT_STREAM);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, 128, 768, 768), RK_VARIANT_KBLOCK);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE_BIAS_GELU, RK_KBLOCK_MAX_M, 2304, 768), RK_VARIANT_KBLOCK);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE_BIAS_GELU, RK_KBLOCK_MAX_M + 1, 2304, 768),
                 RK_VARIANT_PACKED);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, RK_STREAM_MAX_M, 768, 64), RK_VARIANT_STREAM);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, RK_STREAM_MAX_M + 1, 768, 64), RK_VARIANT_PACKED);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, 16, 768, 3072), RK_VARIANT_STREAM);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, RK_STREAM_MIN_M, 768, 3072), RK_VARIANT_STREAM);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, RK_STREAM_MIN_M + 1, 768, 3072), RK_VARIANT_KBLOCK);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, RK_KBLOCK_DEEP_MAX_M, 768, 3072), RK_VARIANT_KBLOCK);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, RK_KBLOCK_DEEP_MAX_M + 1, 768, 3072), RK_VARIANT_PACKED);
    CHECK_EQ_INT(rk_variant_rule(RK_DENSE, 300, 768, RK_DEEP_K), RK_VARIANT_PACKED);
    CHECK_EQ_INT(rk_variant_rule(RK_SGEMM, 4096, 4096, 4096), 0);
    CHECK_EQ_INT(rk_variant_rule(RK_BMM_NT, 4096, 1, 64), RK_VARIANT_DOT);
    CHECK_EQ_INT(rk_variant_rule(RK_BMM_NT, 1, RK_DOT_MAX_N, 64), RK_VARIANT_DOT);
    CHECK_EQ_INT(rk_variant_rule(RK_BMM_NT, 1, RK_DOT_MAX_N + 1, 64), RK_VARIANT_BCAST);
    CHECK_EQ_INT(rk_variant_rule(RK_BMM_NN, 8, 64, 8), RK_VARIANT_4ROWS);
    /* the programs' dispatch: the rule's schedule, as the program's variant */
    RkDispatch d = {RK_DENSE, 768, 768, {0, -1, 1}};
    int64_t rows[1] = {1};
    CHECK_EQ_INT(rk_dispatch(rows, &d), 0); /* stream */
    rows[0] = 128;
    CHECK_EQ_INT(rk_dispatch(rows, &d), 1); /* kblock */
    CHECK_EQ_INT(rk_variant_rule(RK_BMM_NN, 5, 64, 5), RK_VARIANT_6ROWS);
    CHECK_EQ_INT(rk_variant_rule(RK_BMM_NN, 24, 64, 24), RK_VARIANT_6ROWS);
    CHECK(rk_source(RK_DENSE, 0, 64, 32, RK_VARIANT_PACKED, buf, sizeof buf));
    CHECK_STR_CONTAINS(buf, "size M in 1..4096");
    CHECK(!rk_source(RK_DENSE, 0, 64, 32, 3, buf, sizeof buf));
    CHECK(!rk_source(RK_DENSE, 0, 64, 32, -1, buf, sizeof buf));
    CHECK(!rk_source(RK_BMM_NT, 3, 64, 32, 2, buf, sizeof buf));
    CHECK(!rk_source(RK_BMM_NN, 3, 64, 32, 2, buf, sizeof buf));
    CHECK(!rk_source(RK_SGEMM, 0, 64, 32, 1, buf, sizeof buf));
    CHECK(!rk_source(RK_COUNT, 0, 64, 32, 0, buf, sizeof buf));
    CHECK(!rk_source(RK_SGEMM, 0, 64, 32, 0, tiny, sizeof tiny));
    CHECK(!rk_source(RK_SGEMM, 0, 64, 32, 0, buf, 0));
}

/* ---- bench/programs/ ---- */

#define PROGRAMS_DIR "bench/programs/"

/* Every file of rk_programs exists with the text rk_program_text gives,
 * and parses and checks (schedule included); no other .rv file lies in
 * the directory. */
static void test_programs(void) {
    static char want[16384];
    for (int i = 0; i < rk_nprograms; i++) {
        const RkProgram *p = &rk_programs[i];
        char path[PATH_MAX];
        snprintf(path, sizeof path, PROGRAMS_DIR "%s", p->file);
        CHECK(rk_program_text(p, want, sizeof want));
        char *got = NULL;
        size_t len = 0;
        FILE *f = fopen(path, "rb");
        if (f) {
            got = calloc(1, sizeof want + 1);
            len = fread(got, 1, sizeof want, f);
            fclose(f);
        }
        CHECK(got != NULL);
        int same = got && len == strlen(want) && memcmp(got, want, len) == 0;
        CHECK(same);
        if (!same)
            fprintf(stderr, "    %s is not what bench/kernel_sources.c writes: run `make "
                            "bench-programs` and review the diff\n", path);
        free(got);
        rv_module *m = NULL;
        rv_status st = rv_module_load(path, &m);
        if (st == RV_OK)
            st = rv_module_check_schedule(m);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK)
            fprintf(stderr, "    %s: %s\n", path, rv_last_error());
        rv_module_free(m);
    }
    DIR *d = opendir(PROGRAMS_DIR);
    CHECK(d != NULL);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 3, ".rv") != 0)
            continue;
        int known = 0;
        for (int i = 0; i < rk_nprograms; i++)
            known |= strcmp(e->d_name, rk_programs[i].file) == 0;
        CHECK(known);
        if (!known)
            fprintf(stderr, "    " PROGRAMS_DIR "%s is not in rk_programs\n", e->d_name);
    }
    if (d)
        closedir(d);
}

/* `make bench-programs`: writes every file of rk_programs. */
static int write_programs(void) {
    static char text[16384];
    for (int i = 0; i < rk_nprograms; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, PROGRAMS_DIR "%s", rk_programs[i].file);
        FILE *f = fopen(path, "wb");
        if (!rk_program_text(&rk_programs[i], text, sizeof text) || !f ||
            fputs(text, f) == EOF || fclose(f) != 0) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        printf("wrote %s\n", path);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--write-programs") == 0)
        return write_programs();
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-kernels-XXXXXX");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_sources);
    RUN(test_programs);
    RUN(test_dense);
    RUN(test_dense_bias_gelu);
    RUN(test_bmm_nt);
    RUN(test_bmm_nn);
    RUN(test_sgemm);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache_dir);
    return harness_report();
}
