/*
 * test_serving.c — the C API a server uses around a compiled program:
 * rv_array_wrap (the caller's buffer, no copy; NULL, unaligned and bad
 * shapes refused), rv_program_run_into writing into wrapped buffers and
 * refusing, by the output's name, an array of the wrong dtype, shape or
 * alignment, and rv_compile_options.threads (a program's own pool size,
 * or serial) giving the interpreter's results; a run reusing the arrays of
 * the intermediates the bindings hold from their previous run, also when
 * the run is smaller (refitted into the larger arrays); rv_bindings_get_info
 * describing a bound and a computed array as the separate accessors do.
 */
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "ir/ir.h"
#include "runtime/program.h"

static char cache_dir[64];

static const char *const program = "size N in 1..64\n"
                                   "input X : f32[i < N, j < 16]\n"
                                   "Y[i, j] = X[i, j] * 2.0 + 1.0\n"
                                   "schedule Y { parallel(i) }\n";

static rv_module *parse(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("serving.rv", program, &m), RV_OK);
    return m;
}

/* Bindings for N rows drawn from seed: *want run by the interpreter, *got
 * with the same inputs for the program. */
static void bind_pair(rv_module *m, int64_t n, uint64_t seed, rv_bindings **want,
                      rv_bindings **got) {
    *want = rv_bindings_new(m);
    *got = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_size(*want, "N", n), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_size(*got, "N", n), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(*want, seed), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(*got, seed), RV_OK);
    CHECK_EQ_INT(rv_interp_run(m, *want), RV_OK);
}

static void test_wrap(void) {
    float *buf = aligned_alloc(RV_ARRAY_ALIGN, 4 * 16 * sizeof(float));
    int64_t shape[2] = {4, 16};
    rv_array *a = NULL;
    CHECK_EQ_INT(rv_array_wrap(RV_F32, 2, shape, buf, &a), RV_OK);
    CHECK(a && rv_array_data(a) == buf);
    CHECK_EQ_INT(rv_array_numel(a), 64);
    rv_array_set_f64(a, 5, 3.5);
    CHECK_NEAR(buf[5], 3.5, 0);
    rv_array_free(a); /* leaves buf to the caller */
    buf[0] = 1.0f;
    CHECK_EQ_INT(rv_array_wrap(RV_F32, 2, shape, (char *)buf + 4, &a), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "not 64-byte aligned");
    CHECK(a == NULL);
    CHECK_EQ_INT(rv_array_wrap(RV_F32, 2, shape, NULL, &a), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "NULL");
    /* an empty array reads nothing through its pointer: any one will do */
    int64_t empty[2] = {4, 0};
    CHECK_EQ_INT(rv_array_wrap(RV_F32, 2, empty, (char *)buf + 4, &a), RV_OK);
    CHECK(a && rv_array_numel(a) == 0);
    rv_array_free(a);
    CHECK_EQ_INT(rv_array_wrap(RV_F32, 2, empty, NULL, &a), RV_OK);
    rv_array_free(a);
    a = NULL;
    int64_t bad[2] = {4, -1};
    CHECK_EQ_INT(rv_array_wrap(RV_F32, 2, bad, buf, &a), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "rv_array_wrap");
    free(buf);
}

/* Y straight into a wrapped buffer equals the interpreter's Y; each wrong
 * array fails before any kernel with a message naming Y. */
static void test_run_into_checks(void) {
    rv_module *m = parse();
    if (!m)
        return;
    rv_compile_options opt = {.cache_dir = cache_dir};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile(m, &opt, &p), RV_OK);
    if (!p) {
        rv_module_free(m);
        return;
    }
    rv_bindings *want, *got;
    bind_pair(m, 5, 3, &want, &got);
    float *buf = aligned_alloc(RV_ARRAY_ALIGN, 5 * 16 * sizeof(float) + RV_ARRAY_ALIGN);
    int64_t shape[2] = {5, 16};
    rv_array *out = NULL;
    CHECK_EQ_INT(rv_array_wrap(RV_F32, 2, shape, buf, &out), RV_OK);
    CHECK_EQ_INT(rv_program_run_into(p, got, &out, 1), RV_OK);
    const rv_array *ref = rv_bindings_get_array(want, "Y");
    int bad = 0;
    for (int64_t i = 0; ref && i < 80; i++)
        bad += rv_array_get_f64(ref, i) != buf[i];
    CHECK_EQ_INT(bad, 0);

    /* dtype */
    rv_array *f64 = rv_array_new(RV_F64, 2, shape);
    CHECK_EQ_INT(rv_program_run_into(p, got, &f64, 1), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "output Y is f32, the array is f64");
    /* shape: the right element count in the wrong shape, and too few rows */
    int64_t flat_n = 80, short_shape[2] = {4, 16};
    rv_array *flat = rv_array_new(RV_F32, 1, &flat_n), *rows = rv_array_new(RV_F32, 2, short_shape);
    CHECK_EQ_INT(rv_program_run_into(p, got, &flat, 1), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "output Y needs shape [5, 16], the array has [80]");
    CHECK_EQ_INT(rv_program_run_into(p, got, &rows, 1), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "the array has [4, 16]");
    /* alignment: a header over misaligned data (rv_array_wrap refuses to
     * make one; a DLPack producer or a hand-made header could) */
    rv_array *skew = base_xcalloc(1, sizeof *skew);
    CHECK_EQ_INT(ir_array_init(skew, RV_F32, 2, shape), RV_OK);
    skew->dl.data = buf + 1;
    CHECK_EQ_INT(rv_program_run_into(p, got, &skew, 1), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "output Y: the array's data");
    CHECK_STR_CONTAINS(rv_last_error(), "not 64-byte aligned");
    rv_array *none = NULL;
    CHECK_EQ_INT(rv_program_run_into(p, got, &none, 1), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "output Y: the array is NULL");

    rv_array_free(skew);
    rv_array_free(flat);
    rv_array_free(rows);
    rv_array_free(f64);
    rv_array_free(out);
    free(buf);
    rv_bindings_free(want);
    rv_bindings_free(got);
    rv_program_free(p);
    rv_module_free(m);
}

/* threads: 1 runs serially, N > 1 on the program's own pool of N, and
 * both compute the interpreter's Y; a negative count is refused. */
static void test_threads(void) {
    rv_module *m = parse();
    if (!m)
        return;
    rv_compile_options opt = {.cache_dir = cache_dir, .threads = -2};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile(m, &opt, &p), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "-2 threads");
    const int counts[3] = {1, 3, 0};
    for (int c = 0; c < 3; c++) {
        opt.threads = counts[c];
        CHECK_EQ_INT(rv_program_compile(m, &opt, &p), RV_OK);
        if (!p)
            continue;
        CHECK_EQ_INT(p->serial, counts[c] == 1);
        CHECK_EQ_INT(p->pool ? tp_num_threads(p->pool) : 0, counts[c] > 1 ? counts[c] : 0);
        rv_bindings *want, *got;
        bind_pair(m, 37, 9, &want, &got);
        CHECK_EQ_INT(rv_program_run(p, got), RV_OK);
        CHECK_SAME_TENSOR(want, got, "Y", 0);
        rv_bindings_free(want);
        rv_bindings_free(got);
        rv_program_free(p);
    }
    rv_module_free(m);
}

/* W[i, j] = seed + i * 16 + j, N x 16. */
static rv_array *reuse_input(int64_t n, int seed) {
    int64_t shape[2] = {n, 16};
    rv_array *w = rv_array_new(RV_F32, 2, shape);
    for (int64_t i = 0; i < n * 16; i++)
        rv_array_set_f64(w, i, seed + (double)i);
    return w;
}

/* How many of T (3 W), Q (W + 1, stored padded) and Y (T + Q) differ from
 * their values for input w. */
static int reuse_wrong(const rv_bindings *b, const rv_array *w) {
    const rv_array *t = rv_bindings_get_array(b, "T"), *q = rv_bindings_get_array(b, "Q");
    const rv_array *y = rv_bindings_get_array(b, "Y");
    if (!t || !q || !y || rv_array_numel(t) != rv_array_numel(w) ||
        rv_array_numel(q) != rv_array_numel(w))
        return -1;
    int bad = 0;
    for (int64_t i = 0; i < rv_array_numel(w); i++) {
        double v = rv_array_get_f64(w, i);
        bad += rv_array_get_f64(t, i) != 3 * v;
        bad += rv_array_get_f64(q, i) != v + 1;
        bad += rv_array_get_f64(y, i) != 4 * v + 1;
    }
    return bad;
}

/* The program of the reuse tests: T (3 W), Q (W + 1, stored padded) and
 * Y (T + Q) over N x 16; NULL (checked failed) if it does not compile. */
static rv_program *reuse_program(rv_module **m) {
    *m = NULL;
    CHECK_EQ_INT(rv_module_parse("reuse.rv",
                                 "size N in 1..64\n"
                                 "input W : f32[i < N, j < 16]\n"
                                 "T[i, j] = W[i, j] * 3.0\n"
                                 "Q[i, j pad 32] = W[i, j] + 1.0\n"
                                 "Y[i, j] = T[i, j] + Q[i, j]\n",
                                 m),
                 RV_OK);
    rv_compile_options opt = {.cache_dir = cache_dir};
    rv_program *p = NULL;
    if (!*m || rv_program_compile(*m, &opt, &p) != RV_OK) {
        CHECK(p != NULL);
        rv_module_free(*m);
        *m = NULL;
    }
    return p;
}

/* A second run on the same bindings computes its intermediates into the
 * arrays of the first (the unpadded T, and Q's canonical copy out of its
 * padded storage) when the shapes agree, with the second run's values;
 * new arrays of the new shape otherwise. */
static void test_reuse_intermediates(void) {
    rv_module *m;
    rv_program *p = reuse_program(&m);
    if (!p)
        return;
    rv_bindings *b = rv_bindings_new(m);
    rv_array *w1 = reuse_input(5, 0), *w2 = reuse_input(5, 100), *w3 = reuse_input(7, 50);
    CHECK_EQ_INT(rv_bindings_set_size(b, "N", 5), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(b, "W", w1), RV_OK);
    CHECK_EQ_INT(rv_program_run(p, b), RV_OK);
    CHECK_EQ_INT(reuse_wrong(b, w1), 0);
    const rv_array *t1 = rv_bindings_get_array(b, "T"), *q1 = rv_bindings_get_array(b, "Q");

    CHECK_EQ_INT(rv_bindings_set_array(b, "W", w2), RV_OK);
    CHECK_EQ_INT(rv_program_run(p, b), RV_OK);
    CHECK_EQ_INT(reuse_wrong(b, w2), 0);
    CHECK(rv_bindings_get_array(b, "T") == t1);
    CHECK(rv_bindings_get_array(b, "Q") == q1);

    CHECK_EQ_INT(rv_bindings_set_size(b, "N", 7), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(b, "W", w3), RV_OK);
    CHECK_EQ_INT(rv_program_run(p, b), RV_OK);
    CHECK_EQ_INT(reuse_wrong(b, w3), 0);
    CHECK_EQ_INT(rv_array_shape(rv_bindings_get_array(b, "T"))[0], 7);

    rv_array_free(w1);
    rv_array_free(w2);
    rv_array_free(w3);
    rv_bindings_free(b);
    rv_program_free(p);
    rv_module_free(m);
}

/* rv_bindings_reset: arguments unbound (then the base's inherited), the
 * computed tensors' arrays kept, and a smaller result computed in a larger
 * one's memory (taking its shape): bigger, smaller, bigger again, each run
 * with its own values, never a previous run's. */
static void test_reset_reuse(void) {
    rv_module *m;
    rv_program *p = reuse_program(&m);
    if (!p)
        return;
    rv_bindings *b = rv_bindings_new(m), *base = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_size(base, "N", 5), RV_OK);
    const int64_t n[4] = {7, 3, 7, 9};
    rv_array *w[4];
    const rv_array *y0 = NULL;
    for (int k = 0; k < 4; k++) {
        w[k] = reuse_input(n[k], 10 * k);
        CHECK_EQ_INT(rv_bindings_reset(b, k % 2 ? base : NULL), RV_OK);
        CHECK_EQ_INT(rv_bindings_get_size(b, "N"), k % 2 ? 5 : -1);
        CHECK(rv_bindings_get_array(b, "W") == NULL);
        CHECK_EQ_INT(rv_bindings_set_size(b, "N", n[k]), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_array(b, "W", w[k]), RV_OK);
        CHECK_EQ_INT(rv_program_run(p, b), RV_OK);
        CHECK_EQ_INT(reuse_wrong(b, w[k]), 0);
        const rv_array *y = rv_bindings_get_array(b, "Y");
        CHECK_EQ_INT(rv_array_shape(y)[0], n[k]);
        if (k == 0)
            y0 = y;
        else if (k < 3)
            CHECK(y == y0); /* 7 rows' memory holds 3, then 7 */
    }
    CHECK_EQ_INT(rv_bindings_reset(b, NULL), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_size(b, "N", 3), RV_OK);
    CHECK_EQ_INT(rv_program_run(p, b), RV_ERR_ARG); /* W is not the previous run's */
    CHECK_EQ_INT(rv_bindings_reset(NULL, NULL), RV_ERR_ARG);
    for (int k = 0; k < 4; k++)
        rv_array_free(w[k]);
    rv_bindings_free(b);
    rv_bindings_free(base);
    rv_program_free(p);
    rv_module_free(m);
}

/* Runs of 7, 3, then 7 rows on the same bindings: the smaller run
 * computes into the arrays of the first (their blocks have room), with the
 * first run's values still in them, so a kernel relying on zeroed storage
 * gives stale values here; the third run, as large as the first, keeps
 * them too (the block's room, not the last shape, decides). */
static void test_reuse_smaller(void) {
    rv_module *m = NULL;
    rv_program *p = reuse_program(&m);
    if (!p)
        return;
    rv_bindings *b = rv_bindings_new(m);
    const int64_t ns[3] = {7, 3, 7};
    const rv_array *first[3] = {NULL, NULL, NULL};
    const char *const names[3] = {"T", "Q", "Y"};
    for (int r = 0; r < 3; r++) {
        rv_array *w = reuse_input(ns[r], 10 * r + 1);
        CHECK_EQ_INT(rv_bindings_set_size(b, "N", ns[r]), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_array(b, "W", w), RV_OK);
        CHECK_EQ_INT(rv_program_run(p, b), RV_OK);
        CHECK_EQ_INT(reuse_wrong(b, w), 0);
        for (int k = 0; k < 3; k++) {
            const rv_array *a = rv_bindings_get_array(b, names[k]);
            CHECK(a && rv_array_ndim(a) == 2 && rv_array_shape(a)[0] == ns[r] &&
                  rv_array_shape(a)[1] == 16);
            if (r == 0)
                first[k] = a;
            else if (k < 2) /* the intermediates; Y is the caller's result */
                CHECK(a == first[k]);
        }
        rv_array_free(w);
    }
    rv_bindings_free(b);
    rv_program_free(p);
    rv_module_free(m);
}

/* rv_bindings_get_info: the bound input's and the computed result's data,
 * dtype, rank and shape as rv_bindings_get_array and the rv_array
 * accessors give them; 0 with *out untouched for an unbound or unknown
 * name. */
static void test_get_info(void) {
    rv_module *m = parse();
    rv_bindings *b = rv_bindings_new(m);
    const int64_t shape[2] = {3, 16};
    rv_array *x = rv_array_new(RV_F32, 2, shape);
    CHECK_EQ_INT(rv_bindings_set_size(b, "N", 3), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(b, "X", x), RV_OK);
    rv_array_info info = {.ndim = -7};
    CHECK_EQ_INT(rv_bindings_get_info(b, "Y", &info), 0); /* not computed yet */
    CHECK_EQ_INT(rv_bindings_get_info(b, "Z", &info), 0);
    CHECK_EQ_INT(info.ndim, -7);
    CHECK_EQ_INT(rv_bindings_get_info(b, "X", &info), 1);
    CHECK(info.data == rv_array_data(x) && info.dtype == RV_F32 && info.ndim == 2 &&
          info.shape[0] == 3 && info.shape[1] == 16);
    CHECK_EQ_INT(rv_interp_run(m, b), RV_OK);
    CHECK_EQ_INT(rv_bindings_get_info(b, "Y", &info), 1);
    rv_array *y = (rv_array *)rv_bindings_get_array(b, "Y");
    CHECK(info.data == rv_array_data(y) && info.dtype == rv_array_dtype(y) &&
          info.ndim == rv_array_ndim(y) && info.shape[0] == 3 && info.shape[1] == 16);
    CHECK_EQ_INT(rv_bindings_get_info(b, "Y", NULL), 0);
    CHECK_EQ_INT(rv_bindings_get_info(NULL, "Y", &info), 0);
    CHECK_EQ_INT((int)rv_struct_size("rv_array_info"), (int)sizeof(rv_array_info));
    rv_bindings_free(b);
    rv_array_free(x);
    rv_module_free(m);
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-serving-%d", (int)getpid());
    RUN(test_wrap);
    RUN(test_run_into_checks);
    RUN(test_threads);
    RUN(test_reuse_intermediates);
    RUN(test_reuse_smaller);
    RUN(test_reset_reuse);
    RUN(test_get_info);
    return harness_report();
}
