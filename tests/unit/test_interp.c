/*
 * test_interp.c — the reference interpreter (src/interp).
 *
 * Programs are built through the C API of ravel.h. Each numeric test
 * checks the interpreter twice: against values worked out by hand on tiny
 * inputs, and against an independent plain-C loop nest written directly
 * over the raw arrays (in double, rounded like the interpreter rounds), on
 * random inputs and sizes including 0, 1, primes and range edges. Every
 * error the interpreter reports is provoked and its message checked.
 */
#include <stdbool.h>

#include "harness.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------- helpers */

static rv_expr *I(rv_module *m, int64_t v) {
    return rv_expr_int(m, v);
}

static rv_expr *S(rv_module *m, rv_size *s) {
    return rv_expr_size(m, s);
}

static rv_expr *bin(rv_module *m, const char *op, rv_expr *a, rv_expr *b) {
    return rv_expr_binop(m, op, a, b);
}

static rv_expr *read1(rv_module *m, rv_tensor *t, rv_expr *a) {
    rv_expr *idx[1] = {a};
    return rv_expr_read(m, t, 1, idx);
}

static rv_expr *read2(rv_module *m, rv_tensor *t, rv_expr *a, rv_expr *b) {
    rv_expr *idx[2] = {a, b};
    return rv_expr_read(m, t, 2, idx);
}

static rv_expr *uf1(rv_module *m, rv_ufun *f, rv_expr *a) {
    rv_expr *args[1] = {a};
    return rv_expr_ufcall(m, f, 1, args);
}

static rv_expr *reduce1(rv_module *m, rv_reduce_kind k, rv_axis *a, rv_expr *body) {
    rv_axis *axes[1] = {a};
    return rv_expr_reduce(m, k, 1, axes, body);
}

static rv_expr *ax(rv_module *m, rv_axis *a) {
    return rv_expr_axis(m, a);
}

/* A dense input with unnamed dimensions (ndim 1 or 2). */
static rv_tensor *input(rv_module *m, const char *name, rv_dtype t, int ndim, rv_expr *e0,
                        rv_expr *e1) {
    rv_dimspec d[2] = {{NULL, e0, 1}, {NULL, e1, 1}};
    return rv_input_new(m, name, t, ndim, d);
}

/* A 1-argument UF `name[a < ext] in lo..hi`. */
static rv_ufun *ufun1(rv_module *m, const char *name, rv_expr *ext, rv_expr *lo, rv_expr *hi) {
    const char *args[1] = {"a"};
    rv_ufun *f = rv_ufun_begin(m, name, 1, args);
    rv_expr *exts[1] = {ext};
    return rv_ufun_end(f, exts, lo, hi);
}

/* A ragged input `name : t[b < B, l < len[b]]`. */
static rv_tensor *ragged_input(rv_module *m, const char *name, rv_dtype t, rv_size *B,
                               rv_ufun *len) {
    const char *names[2] = {"b", "l"};
    rv_tensor *x = rv_input_begin(m, name, t, 2, names);
    rv_expr *exts[2] = {S(m, B), uf1(m, len, rv_input_var(x, 0))};
    return rv_input_end(x, exts, NULL);
}

static rv_compute *begin2(rv_module *m, const char *name, rv_expr *e0, rv_expr *e1) {
    const char *names[2] = {"i", "j"};
    rv_expr *exts[2] = {e0, e1};
    return rv_compute_begin(m, name, 2, names, exts);
}

static rv_compute *begin1(rv_module *m, const char *name, rv_expr *e0) {
    const char *names[1] = {"i"};
    rv_expr *exts[1] = {e0};
    return rv_compute_begin(m, name, 1, names, exts);
}

static rv_array *array_f32(int ndim, const int64_t *shape, const float *v) {
    rv_array *a = rv_array_new(RV_F32, ndim, shape);
    if (v)
        memcpy(rv_array_data(a), v, sizeof(float) * (size_t)rv_array_numel(a));
    return a;
}

static rv_array *array_i64(int ndim, const int64_t *shape, const int64_t *v) {
    rv_array *a = rv_array_new(RV_I64, ndim, shape);
    if (v)
        memcpy(rv_array_data(a), v, sizeof(int64_t) * (size_t)rv_array_numel(a));
    return a;
}

static const float *f32(const rv_bindings *b, const char *name) {
    const rv_array *a = rv_bindings_get_array(b, name);
    return a ? rv_array_cdata(a) : NULL;
}

static const int64_t *i64(const rv_bindings *b, const char *name) {
    const rv_array *a = rv_bindings_get_array(b, name);
    return a ? rv_array_cdata(a) : NULL;
}

static int64_t shape_of(const rv_bindings *b, const char *name, int d) {
    const rv_array *a = rv_bindings_get_array(b, name);
    return a && d < rv_array_ndim(a) ? rv_array_shape(a)[d] : -1;
}

static rv_status run_ok(rv_module *m, rv_bindings *b) {
    rv_status st = rv_interp_run(m, b);
    if (st != RV_OK)
        fprintf(stderr, "    run failed: %s\n", rv_last_error());
    return st;
}

/* Compares n floats with a relative tolerance; counts the mismatches and
 * prints the first. */
static int compare_f32(const float *got, const double *want, int64_t n, double tol) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i])))) {
            if (!bad)
                fprintf(stderr, "    element %lld: got %.9g, want %.9g\n", (long long)i, got[i],
                        want[i]);
            bad++;
        }
    }
    return bad;
}

/* ----------------------------------------------- dense layer with gelu */

/* Y[i, j] = gelu(sum(k < K) X[i, k] * W[j, k] + bias[j]), X : [2T, K] */
static rv_module *build_dense(void) {
    rv_module *m = rv_module_new();
    rv_size *T = rv_size_new(m, "T", 1, 128);
    rv_expr *rows = bin(m, "*", I(m, 2), S(m, T));
    rv_tensor *X = input(m, "X", RV_F32, 2, rows, I(m, 13));
    rv_tensor *W = input(m, "W", RV_F32, 2, I(m, 7), I(m, 13));
    rv_tensor *bias = input(m, "bias", RV_F32, 1, I(m, 7), NULL);
    rv_compute *c = begin2(m, "Y", NULL, NULL);
    rv_axis *k = rv_reduce_axis_new(m, "k", I(m, 13));
    rv_expr *i = rv_compute_var(c, 0), *j = rv_compute_var(c, 1);
    rv_expr *dot = reduce1(m, RV_REDUCE_SUM, k,
                           bin(m, "*", read2(m, X, i, ax(m, k)), read2(m, W, j, ax(m, k))));
    rv_tensor *Y = rv_compute_end(c, rv_expr_unop(m, "gelu", bin(m, "+", dot, read1(m, bias, j))));
    if (!Y) {
        fprintf(stderr, "build_dense: %s\n", rv_last_error());
        rv_module_free(m);
        return NULL;
    }
    return m;
}

static double gelu(double x) {
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static void test_dense_gelu_by_hand(void) {
    rv_module *m = build_dense();
    CHECK(m != NULL);
    if (!m)
        return;
    rv_bindings *b = rv_bindings_new(m);
    CHECK(rv_bindings_set_size(b, "T", 1) == RV_OK);
    /* X = rows [1, 0, ..] and [0, 1, 0, ..]; W[j, k] = j if k == 0 else 1 */
    float x[2 * 13] = {0}, w[7 * 13], bias[7];
    x[0] = 1;
    x[13 + 1] = 1;
    for (int j = 0; j < 7; j++) {
        for (int k = 0; k < 13; k++)
            w[j * 13 + k] = k == 0 ? (float)j : 1.0f;
        bias[j] = -0.5f;
    }
    int64_t xs[2] = {2, 13}, ws[2] = {7, 13}, bs[1] = {7};
    rv_array *ax_ = array_f32(2, xs, x), *aw = array_f32(2, ws, w), *ab = array_f32(1, bs, bias);
    CHECK(rv_bindings_set_array(b, "X", ax_) == RV_OK);
    CHECK(rv_bindings_set_array(b, "W", aw) == RV_OK);
    CHECK(rv_bindings_set_array(b, "bias", ab) == RV_OK);
    CHECK(run_ok(m, b) == RV_OK);
    const float *y = f32(b, "Y");
    CHECK(y != NULL);
    CHECK_EQ_INT(shape_of(b, "Y", 0), 2);
    CHECK_EQ_INT(shape_of(b, "Y", 1), 7);
    if (y) {
        /* row 0: gelu(j - 0.5); row 1: gelu(1 - 0.5) */
        for (int j = 0; j < 7; j++) {
            CHECK_NEAR(y[j], (float)gelu(j - 0.5), 1e-7);
            CHECK_NEAR(y[7 + j], (float)gelu(0.5), 1e-7);
        }
        CHECK_NEAR(y[0], -0.1542687694, 1e-7); /* gelu(-0.5) */
        CHECK_NEAR(y[2], 1.3997892081, 1e-7);  /* gelu(1.5) */
    }
    rv_bindings_free(b);
    rv_array_free(ax_);
    rv_array_free(aw);
    rv_array_free(ab);
    rv_module_free(m);
}

static void test_dense_gelu_random(void) {
    rv_module *m = build_dense();
    if (!m)
        return;
    int64_t sizes[] = {1, 2, 3, 7, 128, -1 /* drawn */};
    for (int s = 0; s < COUNT(sizes); s++) {
        rv_bindings *b = rv_bindings_new(m);
        if (sizes[s] > 0)
            CHECK(rv_bindings_set_size(b, "T", sizes[s]) == RV_OK);
        CHECK(rv_bindings_randomize(b, 42 + (uint64_t)s) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        int64_t T = rv_bindings_get_size(b, "T");
        if (sizes[s] > 0)
            CHECK_EQ_INT(T, sizes[s]);
        else
            CHECK(T >= 1 && T <= 17);
        const float *x = f32(b, "X"), *w = f32(b, "W"), *bias = f32(b, "bias"), *y = f32(b, "Y");
        CHECK(x && w && bias && y);
        if (!(x && w && bias && y)) {
            rv_bindings_free(b);
            continue;
        }
        int64_t M = 2 * T;
        double *want = malloc(sizeof(double) * (size_t)(M * 7));
        for (int64_t i = 0; i < M; i++)
            for (int j = 0; j < 7; j++) {
                double acc = 0;
                for (int k = 0; k < 13; k++)
                    acc += (double)x[i * 13 + k] * w[j * 13 + k];
                want[i * 7 + j] = (float)gelu(acc + bias[j]);
            }
        CHECK_EQ_INT(compare_f32(y, want, M * 7, 1e-7), 0);
        free(want);
        rv_bindings_free(b);
    }
    rv_module_free(m);
}

/* ------------------------------------------------------------- softmax */

/* mx[i] = max_k X[i,k]; e[i,j] = exp(X[i,j] - mx[i]); s[i] = sum_k e[i,k];
 * Y[i,j] = e[i,j] / s[i]; and Z = softmax_rows(X) through the extern. */
static void test_softmax(void) {
    rv_module *m = rv_module_new();
    rv_size *M = rv_size_new(m, "M", 0, 64);
    rv_size *N = rv_size_new(m, "N", 1, 64);
    rv_tensor *X = input(m, "X", RV_F32, 2, S(m, M), S(m, N));
    rv_compute *c = begin1(m, "mx", S(m, M));
    rv_axis *k = rv_reduce_axis_new(m, "k", S(m, N));
    rv_tensor *mx = rv_compute_end(
        c, reduce1(m, RV_REDUCE_MAX, k, read2(m, X, rv_compute_var(c, 0), ax(m, k))));
    c = begin2(m, "e", NULL, NULL);
    rv_expr *i = rv_compute_var(c, 0), *j = rv_compute_var(c, 1);
    rv_tensor *e =
        rv_compute_end(c, rv_expr_unop(m, "exp", bin(m, "-", read2(m, X, i, j), read1(m, mx, i))));
    c = begin1(m, "s", S(m, M));
    rv_axis *k2 = rv_reduce_axis_new(m, "k2", S(m, N));
    rv_tensor *s = rv_compute_end(
        c, reduce1(m, RV_REDUCE_SUM, k2, read2(m, e, rv_compute_var(c, 0), ax(m, k2))));
    c = begin2(m, "Y", NULL, NULL);
    i = rv_compute_var(c, 0);
    j = rv_compute_var(c, 1);
    rv_tensor *Y = rv_compute_end(c, bin(m, "/", read2(m, e, i, j), read1(m, s, i)));
    rv_tensor *ins[1] = {X};
    rv_dimspec zd[2] = {{"i", S(m, M), 1}, {"j", S(m, N), 1}};
    rv_tensor *Z = rv_extern_new(m, "Z", "softmax_rows", 1, ins, RV_F32, 2, zd);
    CHECK(mx && e && s && Y && Z);
    if (!Z) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }

    /* by hand: softmax([0, ln 3]) = [1/4, 3/4] */
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "M", 1);
    rv_bindings_set_size(b, "N", 2);
    float xv[2] = {0, (float)log(3.0)};
    int64_t xs[2] = {1, 2};
    rv_array *xa = array_f32(2, xs, xv);
    rv_bindings_set_array(b, "X", xa);
    CHECK(run_ok(m, b) == RV_OK);
    const float *y = f32(b, "Y"), *z = f32(b, "Z");
    CHECK(y && z);
    if (y && z) {
        CHECK_NEAR(y[0], 0.25, 1e-7);
        CHECK_NEAR(y[1], 0.75, 1e-7);
        CHECK_NEAR(z[0], 0.25, 1e-7);
        CHECK_NEAR(z[1], 0.75, 1e-7);
        CHECK_NEAR(f32(b, "mx")[0], (float)log(3.0), 1e-7); /* intermediates are kept */
    }
    rv_bindings_free(b);
    rv_array_free(xa);

    /* random, against plain C and against the extern */
    int64_t shapes[][2] = {{0, 5}, {1, 1}, {3, 64}, {13, 7}};
    for (int t = 0; t < COUNT(shapes); t++) {
        b = rv_bindings_new(m);
        rv_bindings_set_size(b, "M", shapes[t][0]);
        rv_bindings_set_size(b, "N", shapes[t][1]);
        CHECK(rv_bindings_randomize(b, 7) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        int64_t R = shapes[t][0], C = shapes[t][1];
        const float *x = f32(b, "X");
        y = f32(b, "Y");
        z = f32(b, "Z");
        CHECK(x && y && z);
        if (!(x && y && z)) {
            rv_bindings_free(b);
            continue;
        }
        double *want = malloc(sizeof(double) * (size_t)(R * C + 1));
        for (int64_t r = 0; r < R; r++) {
            double hi = -INFINITY, sum = 0;
            float ev[64];
            for (int64_t q = 0; q < C; q++)
                hi = fmax(hi, x[r * C + q]);
            /* e is an f32 tensor: its elements are rounded when stored */
            for (int64_t q = 0; q < C; q++)
                sum += ev[q] = (float)exp(x[r * C + q] - (double)(float)hi);
            for (int64_t q = 0; q < C; q++)
                want[r * C + q] = (float)(ev[q] / (double)(float)sum);
        }
        CHECK_EQ_INT(compare_f32(y, want, R * C, 1e-7), 0);
        CHECK_EQ_INT(compare_f32(z, want, R * C, 1e-6), 0);
        free(want);
        rv_bindings_free(b);
    }
    rv_module_free(m);
}

/* ------------------------------------------------------- ragged tensors */

/* A ragged module: size B, ufun len[B] in 0..L, A : f32[b < B, l < len[b]]. */
typedef struct Ragged {
    rv_module *m;
    rv_size *B;
    rv_ufun *len;
    rv_tensor *A;
} Ragged;

static Ragged ragged_module(int64_t maxlen) {
    Ragged r;
    r.m = rv_module_new();
    r.B = rv_size_new(r.m, "B", 0, 32);
    r.len = ufun1(r.m, "len", S(r.m, r.B), I(r.m, 0), I(r.m, maxlen));
    r.A = ragged_input(r.m, "A", RV_F32, r.B, r.len);
    return r;
}

/* Y[b, l] = 2 * A[b, l] + 1, extents inferred from the read. */
static void test_ragged_elementwise(void) {
    Ragged r = ragged_module(9);
    rv_module *m = r.m;
    const char *names[2] = {"b", "l"};
    rv_compute *c = rv_compute_begin(m, "Y", 2, names, NULL);
    rv_expr *a = read2(m, r.A, rv_compute_var(c, 0), rv_compute_var(c, 1));
    rv_tensor *Y = rv_compute_end(c, bin(m, "+", bin(m, "*", I(m, 2), a), I(m, 1)));
    CHECK(Y != NULL);
    if (!Y) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }

    /* by hand */
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "B", 3);
    int64_t lens[3] = {2, 0, 3}, ls[1] = {3}, as[1] = {5};
    float av[5] = {1, 2, 3, 4, 5};
    rv_array *la = array_i64(1, ls, lens), *aa = array_f32(1, as, av);
    CHECK(rv_bindings_set_array(b, "len", la) == RV_OK);
    CHECK(rv_bindings_set_array(b, "A", aa) == RV_OK);
    CHECK(run_ok(m, b) == RV_OK);
    const rv_array *ya = rv_bindings_get_array(b, "Y");
    CHECK(ya && rv_array_ndim(ya) == 1 && rv_array_shape(ya)[0] == 5);
    const float *y = f32(b, "Y");
    for (int i = 0; y && i < 5; i++)
        CHECK_NEAR(y[i], 2 * av[i] + 1, 0);
    rv_bindings_free(b);
    rv_array_free(la);
    rv_array_free(aa);

    /* random: walk the raw arrays row by row */
    for (uint64_t seed = 1; seed <= 4; seed++) {
        b = rv_bindings_new(m);
        CHECK(rv_bindings_randomize(b, seed) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        int64_t B = rv_bindings_get_size(b, "B");
        const int64_t *len = i64(b, "len");
        const float *x = f32(b, "A");
        y = f32(b, "Y");
        int64_t n = 0;
        for (int64_t i = 0; i < B; i++)
            n += len[i];
        CHECK_EQ_INT(shape_of(b, "Y", 0), n);
        CHECK_EQ_INT(shape_of(b, "A", 0), n);
        int bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad += y[i] != (float)(2.0 * x[i] + 1.0);
        CHECK_EQ_INT(bad, 0);
        rv_bindings_free(b);
    }
    rv_module_free(m);
}

/* Softmax over each row of a ragged tensor:
 * mx[b] = max(k < len[b]) A[b, k]
 * Y[b, l] = exp(A[b, l] - mx[b]) / sum(k < len[b]) exp(A[b, k] - mx[b])
 * Rows of length 0 give mx = -inf and no Y elements. */
static void test_ragged_softmax(void) {
    Ragged r = ragged_module(11);
    rv_module *m = r.m;
    rv_compute *c = begin1(m, "mx", S(m, r.B));
    rv_expr *bv = rv_compute_var(c, 0);
    rv_axis *k = rv_reduce_axis_new(m, "k", uf1(m, r.len, bv));
    rv_tensor *mx = rv_compute_end(c, reduce1(m, RV_REDUCE_MAX, k, read2(m, r.A, bv, ax(m, k))));
    const char *names[2] = {"b", "l"};
    c = rv_compute_begin(m, "Y", 2, names, NULL);
    bv = rv_compute_var(c, 0);
    rv_expr *lv = rv_compute_var(c, 1);
    rv_axis *k2 = rv_reduce_axis_new(m, "k2", uf1(m, r.len, bv));
    rv_expr *den = reduce1(
        m, RV_REDUCE_SUM, k2,
        rv_expr_unop(m, "exp", bin(m, "-", read2(m, r.A, bv, ax(m, k2)), read1(m, mx, bv))));
    rv_expr *num = rv_expr_unop(m, "exp", bin(m, "-", read2(m, r.A, bv, lv), read1(m, mx, bv)));
    rv_tensor *Y = rv_compute_end(c, bin(m, "/", num, den));
    CHECK(mx && Y);
    if (!Y) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    for (uint64_t seed = 10; seed < 16; seed++) {
        rv_bindings *b = rv_bindings_new(m);
        if (seed == 10)
            rv_bindings_set_size(b, "B", 0);
        if (seed == 11)
            rv_bindings_set_size(b, "B", 1);
        CHECK(rv_bindings_randomize(b, seed) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        int64_t B = rv_bindings_get_size(b, "B");
        const int64_t *len = i64(b, "len");
        const float *a = f32(b, "A"), *y = f32(b, "Y"), *mxv = f32(b, "mx");
        CHECK(y && mxv);
        if (!y || !mxv) {
            rv_bindings_free(b);
            continue;
        }
        int64_t start = 0;
        int bad = 0;
        for (int64_t i = 0; i < B; i++) {
            double hi = -INFINITY, sum = 0;
            for (int64_t l = 0; l < len[i]; l++)
                hi = fmax(hi, a[start + l]);
            if (mxv[i] != (float)hi)
                bad++;
            for (int64_t l = 0; l < len[i]; l++)
                sum += exp(a[start + l] - hi);
            double rowsum = 0;
            for (int64_t l = 0; l < len[i]; l++) {
                float want = (float)(exp(a[start + l] - hi) / sum);
                if (fabs(y[start + l] - want) > 1e-7 * (1 + fabs(want)))
                    bad++;
                rowsum += y[start + l];
            }
            if (len[i] > 0 && fabs(rowsum - 1) > 1e-5)
                bad++;
            start += len[i];
        }
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(shape_of(b, "Y", 0), start);
        rv_bindings_free(b);
    }

    /* an empty row: max over it is -inf */
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "B", 2);
    int64_t lens[2] = {0, 1}, ls[1] = {2}, as[1] = {1};
    float av[1] = {0.5f};
    rv_array *la = array_i64(1, ls, lens), *aa = array_f32(1, as, av);
    rv_bindings_set_array(b, "len", la);
    rv_bindings_set_array(b, "A", aa);
    CHECK(run_ok(m, b) == RV_OK);
    const float *mxv = f32(b, "mx"), *y = f32(b, "Y");
    if (mxv && y) {
        CHECK(isinf(mxv[0]) && mxv[0] < 0);
        CHECK_NEAR(mxv[1], 0.5, 0);
        CHECK_NEAR(y[0], 1.0, 0);
    }
    rv_bindings_free(b);
    rv_array_free(la);
    rv_array_free(aa);
    rv_module_free(m);
}

/* ----------------------------------------------- triangular matmul (trmm) */

/* C[i, j] = sum(k < i + 1) A[i, k] * B[k, j]: a reduction extent that
 * depends on an output axis. */
static void test_trmm(void) {
    rv_module *m = rv_module_new();
    rv_size *N = rv_size_new(m, "N", 0, 64);
    rv_tensor *A = input(m, "A", RV_F64, 2, S(m, N), S(m, N));
    rv_tensor *Bm = input(m, "Bm", RV_F64, 2, S(m, N), I(m, 5));
    rv_compute *c = begin2(m, "C", S(m, N), I(m, 5));
    rv_expr *i = rv_compute_var(c, 0), *j = rv_compute_var(c, 1);
    rv_axis *k = rv_reduce_axis_new(m, "k", bin(m, "+", i, I(m, 1)));
    rv_tensor *C = rv_compute_end(
        c, reduce1(m, RV_REDUCE_SUM, k,
                   bin(m, "*", read2(m, A, i, ax(m, k)), read2(m, Bm, ax(m, k), j))));
    CHECK(C != NULL);
    if (!C) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    int64_t ns[] = {0, 1, 2, 5, 17, 64};
    for (int t = 0; t < COUNT(ns); t++) {
        rv_bindings *b = rv_bindings_new(m);
        rv_bindings_set_size(b, "N", ns[t]);
        CHECK(rv_bindings_randomize(b, 99) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        const rv_array *aa = rv_bindings_get_array(b, "A"), *ba = rv_bindings_get_array(b, "Bm"),
                       *ca = rv_bindings_get_array(b, "C");
        CHECK(aa && ba && ca);
        if (!(aa && ba && ca)) {
            rv_bindings_free(b);
            continue;
        }
        const double *a = rv_array_cdata(aa), *bb = rv_array_cdata(ba), *cc = rv_array_cdata(ca);
        int64_t n = ns[t];
        int bad = 0;
        for (int64_t r = 0; r < n; r++)
            for (int q = 0; q < 5; q++) {
                double acc = 0;
                for (int64_t kk = 0; kk <= r; kk++)
                    acc += a[r * n + kk] * bb[kk * 5 + q];
                bad += fabs(cc[r * 5 + q] - acc) > 1e-12;
            }
        CHECK_EQ_INT(bad, 0);
        rv_bindings_free(b);
    }
    /* by hand: A = [[1, x], [2, 3]] (x above the diagonal is ignored) */
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "N", 2);
    int64_t as[2] = {2, 2}, bs[2] = {2, 5};
    rv_array *aa = rv_array_new(RV_F64, 2, as), *ba = rv_array_new(RV_F64, 2, bs);
    double av[4] = {1, 100, 2, 3};
    memcpy(rv_array_data(aa), av, sizeof av);
    for (int q = 0; q < 10; q++)
        ((double *)rv_array_data(ba))[q] = q;
    rv_bindings_set_array(b, "A", aa);
    rv_bindings_set_array(b, "Bm", ba);
    CHECK(run_ok(m, b) == RV_OK);
    const rv_array *ca = rv_bindings_get_array(b, "C");
    if (ca) {
        const double *cc = rv_array_cdata(ca);
        CHECK_NEAR(cc[0], 0, 0);             /* 1 * B[0,0] */
        CHECK_NEAR(cc[4], 4, 0);             /* 1 * B[0,4] */
        CHECK_NEAR(cc[5], 2 * 0 + 3 * 5, 0); /* 2 B[0,0] + 3 B[1,0] */
        CHECK_NEAR(cc[9], 2 * 4 + 3 * 9, 0);
    }
    rv_bindings_free(b);
    rv_array_free(aa);
    rv_array_free(ba);
    rv_module_free(m);
}

/* ------------------------------------------------- externs vs computes */

static void test_extern_matmul(void) {
    rv_module *m = rv_module_new();
    rv_size *M = rv_size_new(m, "M", 0, 16);
    rv_tensor *A = input(m, "A", RV_F32, 2, S(m, M), I(m, 6));
    rv_tensor *Bt = input(m, "Bt", RV_F32, 2, I(m, 5), I(m, 6));
    rv_tensor *Bn = input(m, "Bn", RV_F32, 2, I(m, 6), I(m, 5));
    rv_tensor *ins1[2] = {A, Bt}, *ins2[2] = {A, Bn};
    rv_dimspec od[2] = {{"i", S(m, M), 1}, {"j", I(m, 5), 1}};
    rv_tensor *P = rv_extern_new(m, "P", "matmul_nt", 2, ins1, RV_F32, 2, od);
    rv_tensor *Q = rv_extern_new(m, "Q", "matmul_nn", 2, ins2, RV_F32, 2, od);
    rv_compute *c = begin2(m, "R", NULL, NULL);
    rv_axis *k = rv_reduce_axis_new(m, "k", I(m, 6));
    rv_expr *i = rv_compute_var(c, 0), *j = rv_compute_var(c, 1);
    rv_tensor *R = rv_compute_end(
        c, reduce1(m, RV_REDUCE_SUM, k,
                   bin(m, "*", read2(m, A, i, ax(m, k)), read2(m, Bt, j, ax(m, k)))));
    CHECK(P && Q && R);
    if (!(P && Q && R)) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    for (int64_t mm = 0; mm <= 3; mm++) {
        rv_bindings *b = rv_bindings_new(m);
        rv_bindings_set_size(b, "M", mm);
        CHECK(rv_bindings_randomize(b, 5) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        const float *a = f32(b, "A"), *bt = f32(b, "Bt"), *bn = f32(b, "Bn"), *p = f32(b, "P"),
                    *q = f32(b, "Q"), *rr = f32(b, "R");
        if (!(a && p && q && rr)) {
            CHECK(!"missing arrays");
            rv_bindings_free(b);
            continue;
        }
        double want_p[16 * 5], want_q[16 * 5];
        for (int64_t r = 0; r < mm; r++)
            for (int col = 0; col < 5; col++) {
                double s1 = 0, s2 = 0;
                for (int kk = 0; kk < 6; kk++) {
                    s1 += (double)a[r * 6 + kk] * bt[col * 6 + kk];
                    s2 += (double)a[r * 6 + kk] * bn[kk * 5 + col];
                }
                want_p[r * 5 + col] = (float)s1;
                want_q[r * 5 + col] = (float)s2;
            }
        CHECK_EQ_INT(compare_f32(p, want_p, mm * 5, 1e-7), 0);
        CHECK_EQ_INT(compare_f32(q, want_q, mm * 5, 1e-7), 0);
        CHECK_EQ_INT(compare_f32(rr, want_p, mm * 5, 1e-7), 0);
        rv_bindings_free(b);
    }
    rv_module_free(m);
}

/* ------------------------------------------------ gathers through a UF */

/* Y[t, d] = E[tok[t], d]: an embedding lookup, tok in 0..V-1. */
static void test_embedding_gather(void) {
    rv_module *m = rv_module_new();
    rv_size *T = rv_size_new(m, "T", 1, 50);
    rv_size *V = rv_size_new(m, "V", 1, 20);
    rv_ufun *tok = ufun1(m, "tok", S(m, T), I(m, 0), bin(m, "-", S(m, V), I(m, 1)));
    rv_tensor *E = input(m, "E", RV_F32, 2, S(m, V), I(m, 4));
    rv_compute *c = begin2(m, "Y", S(m, T), I(m, 4));
    rv_tensor *Y =
        rv_compute_end(c, read2(m, E, uf1(m, tok, rv_compute_var(c, 0)), rv_compute_var(c, 1)));
    CHECK(Y != NULL);
    if (!Y) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    for (uint64_t seed = 0; seed < 5; seed++) {
        rv_bindings *b = rv_bindings_new(m);
        CHECK(rv_bindings_randomize(b, seed) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        int64_t Tn = rv_bindings_get_size(b, "T"), Vn = rv_bindings_get_size(b, "V");
        const int64_t *tk = i64(b, "tok");
        const float *e = f32(b, "E"), *y = f32(b, "Y");
        int bad = 0;
        for (int64_t t = 0; y && t < Tn; t++) {
            bad += tk[t] < 0 || tk[t] >= Vn;
            for (int d = 0; d < 4; d++)
                bad += y[t * 4 + d] != e[tk[t] * 4 + d];
        }
        CHECK(y != NULL);
        CHECK_EQ_INT(bad, 0);
        rv_bindings_free(b);
    }
    /* an i32 UF array works too */
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "T", 3);
    rv_bindings_set_size(b, "V", 2);
    int64_t ts[1] = {3};
    rv_array *ta = rv_array_new(RV_I32, 1, ts);
    int32_t tv[3] = {1, 0, 1};
    memcpy(rv_array_data(ta), tv, sizeof tv);
    CHECK(rv_bindings_set_array(b, "tok", ta) == RV_OK);
    CHECK(rv_bindings_randomize(b, 3) == RV_OK);
    CHECK(rv_bindings_get_array(b, "tok") == ta); /* bound arrays are kept */
    CHECK(run_ok(m, b) == RV_OK);
    const float *e = f32(b, "E"), *y = f32(b, "Y");
    if (y) {
        CHECK(y[0] == e[4] && y[4] == e[0] && y[8 + 3] == e[4 + 3]);
    }
    rv_bindings_free(b);
    rv_array_free(ta);
    rv_module_free(m);
}

/* ----------------------------------------------------- cond and select */

/* A tree-shaped cond: nodes n < NL are leaves (Y = Emb[word[n], d]), the
 * others internal (Y = X[n - NL, d] * 2): each branch reads indices valid
 * only under its condition. */
static rv_module *build_cond(bool use_select) {
    rv_module *m = rv_module_new();
    rv_size *NL = rv_size_new(m, "NL", 0, 16);
    rv_size *V = rv_size_new(m, "V", 1, 8);
    rv_ufun *word = ufun1(m, "word", S(m, NL), I(m, 0), bin(m, "-", S(m, V), I(m, 1)));
    rv_tensor *Emb = input(m, "Emb", RV_F32, 2, S(m, V), I(m, 3));
    rv_tensor *X = input(m, "X", RV_F32, 2, S(m, NL), I(m, 3));
    rv_compute *c = begin2(m, "Y", bin(m, "*", I(m, 2), S(m, NL)), I(m, 3));
    rv_expr *n = rv_compute_var(c, 0), *d = rv_compute_var(c, 1);
    rv_expr *isleaf = bin(m, "<", n, S(m, NL));
    rv_expr *leaf = read2(m, Emb, uf1(m, word, n), d);
    rv_expr *inner = bin(m, "*", read2(m, X, bin(m, "-", n, S(m, NL)), d), I(m, 2));
    rv_tensor *Y = use_select ? rv_compute_end(c, rv_expr_select(m, isleaf, leaf, inner))
                              : rv_compute_end_cond(c, isleaf, leaf, inner);
    if (!Y) {
        fprintf(stderr, "build_cond: %s\n", rv_last_error());
        rv_module_free(m);
        return NULL;
    }
    return m;
}

static void test_cond_lazy(void) {
    rv_module *m = build_cond(false);
    CHECK(m != NULL);
    if (!m)
        return;
    for (int64_t nl = 0; nl <= 5; nl++) {
        rv_bindings *b = rv_bindings_new(m);
        rv_bindings_set_size(b, "NL", nl);
        CHECK(rv_bindings_randomize(b, 3 + (uint64_t)nl) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        const int64_t *w = i64(b, "word");
        const float *emb = f32(b, "Emb"), *x = f32(b, "X"), *y = f32(b, "Y");
        int bad = 0;
        for (int64_t n = 0; y && n < 2 * nl; n++)
            for (int d = 0; d < 3; d++) {
                float want = n < nl ? emb[w[n] * 3 + d] : (float)(x[(n - nl) * 3 + d] * 2.0);
                bad += y[n * 3 + d] != want;
            }
        CHECK(y != NULL);
        CHECK_EQ_INT(bad, 0);
        rv_bindings_free(b);
    }
    rv_module_free(m);
}

/* The same with a strict select: both arms are evaluated, so the internal
 * arm reads X at a negative row for a leaf and the run fails with a
 * message. */
static void test_select_strict(void) {
    rv_module *m = build_cond(true);
    CHECK(m != NULL);
    if (!m)
        return;
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "NL", 2);
    CHECK(rv_bindings_randomize(b, 1) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "computing Y[0, 0]: read X[-2, 0]: index -2 out of bounds "
                                        "for dimension 0 (extent 2)");
    CHECK(rv_bindings_get_array(b, "Y") == NULL); /* a failed run leaves no results */
    rv_bindings_free(b);
    rv_module_free(m);
}

/* ------------------------------------------------ reductions: edge cases */

static void test_reductions(void) {
    rv_module *m = rv_module_new();
    rv_size *R = rv_size_new(m, "R", 0, 8);
    rv_size *N = rv_size_new(m, "N", 0, 8);
    rv_tensor *X = input(m, "X", RV_F32, 2, S(m, R), S(m, N));
    rv_tensor *out[5];
    rv_reduce_kind kinds[4] = {RV_REDUCE_SUM, RV_REDUCE_MAX, RV_REDUCE_MIN, RV_REDUCE_ARGMAX};
    const char *names[4] = {"s", "mx", "mn", "am"};
    for (int t = 0; t < 4; t++) {
        rv_compute *c = begin1(m, names[t], S(m, R));
        rv_axis *k = rv_reduce_axis_new(m, names[t], S(m, N));
        out[t] =
            rv_compute_end(c, reduce1(m, kinds[t], k, read2(m, X, rv_compute_var(c, 0), ax(m, k))));
        CHECK(out[t] != NULL);
    }
    /* a two-axis reduction whose inner extent depends on the outer axis,
     * and a nested reduction: pm[i] = sum(k < N) max(j < k + 1) X[i, j] */
    rv_compute *c = begin1(m, "tri", S(m, R));
    rv_axis *k1 = rv_reduce_axis_new(m, "k1", S(m, N));
    rv_axis *k2 = rv_reduce_axis_new(m, "k2", bin(m, "+", ax(m, k1), I(m, 1)));
    rv_axis *both[2] = {k1, k2};
    rv_tensor *tri = rv_compute_end(
        c, rv_expr_reduce(m, RV_REDUCE_SUM, 2, both, read2(m, X, rv_compute_var(c, 0), ax(m, k2))));
    c = begin1(m, "pm", S(m, R));
    rv_axis *kk = rv_reduce_axis_new(m, "kk", S(m, N));
    rv_axis *jj = rv_reduce_axis_new(m, "jj", bin(m, "+", ax(m, kk), I(m, 1)));
    rv_tensor *pm = rv_compute_end(
        c, reduce1(m, RV_REDUCE_SUM, kk,
                   reduce1(m, RV_REDUCE_MAX, jj, read2(m, X, rv_compute_var(c, 0), ax(m, jj)))));
    CHECK(tri && pm);
    if (!(tri && pm && out[0] && out[1] && out[2] && out[3])) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    CHECK(rv_tensor_dtype(out[3]) == RV_I64);

    /* by hand, with ties and a NaN-free row: argmax is the first maximum */
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "R", 2);
    rv_bindings_set_size(b, "N", 4);
    float xv[8] = {1, 3, -2, 3, -1, -1, -1, -1};
    int64_t xs[2] = {2, 4};
    rv_array *xa = array_f32(2, xs, xv);
    rv_bindings_set_array(b, "X", xa);
    CHECK(run_ok(m, b) == RV_OK);
    const float *s = f32(b, "s"), *mx = f32(b, "mx"), *mn = f32(b, "mn"), *tr = f32(b, "tri"),
                *p = f32(b, "pm");
    const int64_t *am = i64(b, "am");
    if (s && mx && mn && am && tr && p) {
        CHECK_NEAR(s[0], 5, 0);
        CHECK_NEAR(mx[0], 3, 0);
        CHECK_NEAR(mn[0], -2, 0);
        CHECK_EQ_INT(am[0], 1);
        CHECK_EQ_INT(am[1], 0);
        /* tri: sum over k1 of the prefix sums = 1 + (1+3) + (1+3-2) + (1+3-2+3) */
        CHECK_NEAR(tr[0], 1 + 4 + 2 + 5, 0);
        /* pm: prefix maxima 1, 3, 3, 3 */
        CHECK_NEAR(p[0], 10, 0);
        CHECK_NEAR(p[1], -4, 0);
    } else {
        CHECK(!"missing outputs");
    }
    rv_bindings_free(b);
    rv_array_free(xa);

    /* empty ranges: sum 0, max -inf, min +inf, argmax -1 */
    b = rv_bindings_new(m);
    rv_bindings_set_size(b, "R", 3);
    rv_bindings_set_size(b, "N", 0);
    CHECK(rv_bindings_randomize(b, 0) == RV_OK);
    CHECK(run_ok(m, b) == RV_OK);
    s = f32(b, "s");
    mx = f32(b, "mx");
    mn = f32(b, "mn");
    am = i64(b, "am");
    if (s && mx && mn && am) {
        for (int i = 0; i < 3; i++) {
            CHECK(s[i] == 0);
            CHECK(isinf(mx[i]) && mx[i] < 0);
            CHECK(isinf(mn[i]) && mn[i] > 0);
            CHECK_EQ_INT(am[i], -1);
        }
    }
    CHECK_EQ_INT(shape_of(b, "X", 1), 0);
    rv_bindings_free(b);

    /* random: against loops */
    for (uint64_t seed = 0; seed < 6; seed++) {
        b = rv_bindings_new(m);
        CHECK(rv_bindings_randomize(b, seed) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        int64_t Rn = rv_bindings_get_size(b, "R"), Nn = rv_bindings_get_size(b, "N");
        const float *x = f32(b, "X");
        s = f32(b, "s");
        mx = f32(b, "mx");
        mn = f32(b, "mn");
        am = i64(b, "am");
        tr = f32(b, "tri");
        p = f32(b, "pm");
        int bad = 0;
        for (int64_t i = 0; i < Rn; i++) {
            double sum = 0, hi = -INFINITY, lo = INFINITY, tsum = 0, psum = 0, run = -INFINITY;
            int64_t arg = -1;
            for (int64_t k = 0; k < Nn; k++) {
                double v = x[i * Nn + k];
                sum += v;
                if (v > hi) {
                    hi = v;
                    arg = k;
                }
                lo = fmin(lo, v);
                run = fmax(run, v);
                psum += run;
                for (int64_t q = 0; q <= k; q++)
                    tsum += x[i * Nn + q];
            }
            bad += s[i] != (float)sum;
            bad += mx[i] != (float)hi;
            bad += mn[i] != (float)lo;
            bad += am[i] != arg;
            bad += fabs(tr[i] - tsum) > 1e-6;
            bad += fabs(p[i] - psum) > 1e-6;
        }
        CHECK_EQ_INT(bad, 0);
        rv_bindings_free(b);
    }
    rv_module_free(m);
}

/* Reductions longer than the interpreter's lane count (32), with partial
 * chunks: sums, a first-maximum argmax across chunks, a body that does not
 * vary, a two-axis triangle, and the first error in iteration order when
 * a chunk fails in two places. */
static void test_long_reductions(void) {
    rv_module *m = rv_module_new();
    rv_size *N = rv_size_new(m, "N", 1, 200);
    rv_tensor *X = input(m, "X", RV_F64, 2, I(m, 3), S(m, N));
    rv_compute *c = begin1(m, "s", I(m, 3));
    rv_axis *k = rv_reduce_axis_new(m, "k", S(m, N));
    rv_tensor *s =
        rv_compute_end(c, reduce1(m, RV_REDUCE_SUM, k,
                                  bin(m, "*", read2(m, X, rv_compute_var(c, 0), ax(m, k)),
                                      rv_expr_cast(m, RV_F64, ax(m, k)))));
    c = begin1(m, "am", I(m, 3));
    rv_axis *k2 = rv_reduce_axis_new(m, "k2", S(m, N));
    rv_tensor *am = rv_compute_end(
        c, reduce1(m, RV_REDUCE_ARGMAX, k2, read2(m, X, rv_compute_var(c, 0), ax(m, k2))));
    c = begin1(m, "flat", I(m, 3));
    rv_axis *k3 = rv_reduce_axis_new(m, "k3", S(m, N));
    rv_tensor *flat = rv_compute_end(
        c, reduce1(m, RV_REDUCE_SUM, k3, read2(m, X, rv_compute_var(c, 0), I(m, 0))));
    c = begin1(m, "tri", I(m, 3));
    rv_axis *t1 = rv_reduce_axis_new(m, "t1", S(m, N));
    rv_axis *t2 = rv_reduce_axis_new(m, "t2", bin(m, "+", ax(m, t1), I(m, 1)));
    rv_axis *both[2] = {t1, t2};
    rv_tensor *tri =
        rv_compute_end(c, rv_expr_reduce(m, RV_REDUCE_MAX, 2, both,
                                         bin(m, "-", read2(m, X, rv_compute_var(c, 0), ax(m, t2)),
                                             rv_expr_cast(m, RV_F64, ax(m, t1)))));
    CHECK(s && am && flat && tri);
    if (!(s && am && flat && tri)) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    int64_t ns[] = {1, 31, 32, 33, 64, 70, 200};
    for (int t = 0; t < COUNT(ns); t++) {
        int64_t n = ns[t];
        rv_bindings *b = rv_bindings_new(m);
        rv_bindings_set_size(b, "N", n);
        CHECK(rv_bindings_randomize(b, 21) == RV_OK);
        /* row 1: ties for the maximum at 2/3 and 5/6 of the row */
        double *x = rv_array_data((rv_array *)rv_bindings_get_array(b, "X"));
        if (n >= 3) {
            x[n + 2 * n / 3] = 5;
            x[n + 5 * n / 6] = 5;
        }
        CHECK(run_ok(m, b) == RV_OK);
        const rv_array *sa = rv_bindings_get_array(b, "s"), *fa = rv_bindings_get_array(b, "flat"),
                       *ta = rv_bindings_get_array(b, "tri");
        const int64_t *amv = i64(b, "am");
        if (!(sa && fa && ta && amv)) {
            CHECK(!"missing outputs");
            rv_bindings_free(b);
            continue;
        }
        const double *sv = rv_array_cdata(sa), *fv = rv_array_cdata(fa), *tv = rv_array_cdata(ta);
        int bad = 0;
        for (int i = 0; i < 3; i++) {
            double sum = 0, flatsum = 0, hi = -INFINITY, thi = -INFINITY;
            int64_t arg = -1;
            for (int64_t q = 0; q < n; q++) {
                double v = x[i * n + q];
                sum += v * (double)q;
                flatsum += x[i * n];
                if (v > hi) {
                    hi = v;
                    arg = q;
                }
                for (int64_t r = 0; r <= q; r++)
                    thi = fmax(thi, x[i * n + r] - (double)q);
            }
            bad += sv[i] != sum;
            bad += fv[i] != flatsum;
            bad += amv[i] != arg;
            bad += tv[i] != thi;
        }
        CHECK_EQ_INT(bad, 0);
        if (n >= 3)
            CHECK_EQ_INT(amv[1], 2 * n / 3);
        rv_bindings_free(b);
    }
    rv_module_free(m);

    /* Y[i] = sum(k < 40) P[k] * Q[k] with P : [30], Q : [10]: in
     * definition order the first failure is Q[10], although P[30] fails
     * earlier in the instruction list */
    m = rv_module_new();
    rv_tensor *P = input(m, "P", RV_F32, 1, I(m, 30), NULL);
    rv_tensor *Q = input(m, "Q", RV_F32, 1, I(m, 10), NULL);
    c = begin1(m, "Y", I(m, 2));
    k = rv_reduce_axis_new(m, "k", I(m, 40));
    rv_tensor *Y = rv_compute_end(
        c, reduce1(m, RV_REDUCE_SUM, k, bin(m, "*", read1(m, P, ax(m, k)), read1(m, Q, ax(m, k)))));
    CHECK(Y != NULL);
    rv_bindings *b = rv_bindings_new(m);
    CHECK(rv_bindings_randomize(b, 0) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "computing Y[0]: read Q[10]: index 10 out of bounds for "
                                        "dimension 0 (extent 10)");
    rv_bindings_free(b);
    rv_module_free(m);
}

/* A loop-invariant read in a reduction body is evaluated only when the
 * reduction runs at least once: sum(k < len[b]) A[b, 0] must not fail on
 * rows of length 0. */
static void test_reduce_invariant_not_hoisted_past_empty(void) {
    Ragged r = ragged_module(4);
    rv_module *m = r.m;
    rv_compute *c = begin1(m, "Y", S(m, r.B));
    rv_expr *bv = rv_compute_var(c, 0);
    rv_axis *k = rv_reduce_axis_new(m, "k", uf1(m, r.len, bv));
    rv_tensor *Y = rv_compute_end(
        c, reduce1(m, RV_REDUCE_SUM, k,
                   bin(m, "*", read2(m, r.A, bv, I(m, 0)), rv_expr_cast(m, RV_F32, ax(m, k)))));
    CHECK(Y != NULL);
    if (!Y) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "B", 3);
    int64_t lens[3] = {3, 0, 2}, ls[1] = {3}, as[1] = {5};
    float av[5] = {2, 7, 7, 5, 7};
    rv_array *la = array_i64(1, ls, lens), *aa = array_f32(1, as, av);
    rv_bindings_set_array(b, "len", la);
    rv_bindings_set_array(b, "A", aa);
    CHECK(run_ok(m, b) == RV_OK);
    const float *y = f32(b, "Y");
    if (y) {
        CHECK_NEAR(y[0], 2 * (0 + 1 + 2), 0);
        CHECK_NEAR(y[1], 0, 0);
        CHECK_NEAR(y[2], 5 * (0 + 1), 0);
    }
    rv_bindings_free(b);
    rv_array_free(la);
    rv_array_free(aa);
    rv_module_free(m);
}

/* Scalar (0-dimensional) inputs and results. */
static void test_scalar_output(void) {
    rv_module *m = rv_module_new();
    rv_size *N = rv_size_new(m, "N", 0, 100);
    rv_tensor *X = input(m, "X", RV_I64, 1, S(m, N), NULL);
    rv_tensor *scale = rv_input_new(m, "scale", RV_I64, 0, NULL); /* a scalar input */
    rv_compute *c = rv_compute_begin(m, "total", 0, NULL, NULL);
    rv_axis *k = rv_reduce_axis_new(m, "k", S(m, N));
    rv_expr *sc = rv_expr_read(m, scale, 0, NULL);
    rv_tensor *t =
        rv_compute_end(c, bin(m, "*", sc, reduce1(m, RV_REDUCE_SUM, k, read1(m, X, ax(m, k)))));
    CHECK(scale && t);
    if (!t) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "N", 100);
    CHECK(rv_bindings_randomize(b, 8) == RV_OK);
    CHECK(run_ok(m, b) == RV_OK);
    const int64_t *x = i64(b, "X"), *tot = i64(b, "total"), *scv = i64(b, "scale");
    CHECK_EQ_INT(rv_array_ndim(rv_bindings_get_array(b, "scale")), 0);
    int64_t want = 0;
    for (int i = 0; i < 100; i++)
        want += x[i];
    want *= scv[0];
    CHECK(tot != NULL);
    if (tot)
        CHECK_EQ_INT(tot[0], want);
    CHECK_EQ_INT(rv_array_ndim(rv_bindings_get_array(b, "total")), 0);
    rv_bindings_free(b);
    rv_module_free(m);
}

/* ------------------------------------------------------ integer semantics */

static void test_integer_ops(void) {
    rv_module *m = rv_module_new();
    rv_size *N = rv_size_new(m, "N", 1, 64);
    rv_tensor *X = input(m, "X", RV_I64, 1, S(m, N), NULL);
    rv_tensor *Dv = input(m, "D", RV_I32, 1, S(m, N), NULL);
    const char *ops[] = {"/", "%", "floordiv", "floormod", "min", "max"};
    rv_tensor *res[6];
    for (int o = 0; o < 6; o++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", o);
        rv_compute *c = begin1(m, name, NULL);
        rv_expr *i = rv_compute_var(c, 0);
        res[o] = rv_compute_end(c, bin(m, ops[o], read1(m, X, i), read1(m, Dv, i)));
        CHECK(res[o] != NULL);
    }
    /* abs, neg, comparisons and select, casts */
    rv_compute *c = begin1(m, "misc", NULL);
    rv_expr *x = read1(m, X, rv_compute_var(c, 0));
    rv_expr *sel = rv_expr_select(m, bin(m, ">=", x, I(m, 0)), rv_expr_unop(m, "abs", x),
                                  bin(m, "*", rv_expr_unop(m, "-", x), I(m, 100)));
    rv_tensor *misc = rv_compute_end(c, sel);
    c = begin1(m, "half", NULL);
    x = read1(m, X, rv_compute_var(c, 0));
    rv_tensor *half = rv_compute_end(
        c, rv_expr_cast(m, RV_I32,
                        bin(m, "/", rv_expr_cast(m, RV_F64, x), rv_expr_float(m, RV_F64, 2.0))));
    CHECK(misc && half);
    if (!(misc && half && res[0] && res[5])) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "N", 4);
    int64_t xv[4] = {7, -7, 7, -7}, s1[1] = {4};
    int32_t dv[4] = {2, 2, -2, -2};
    rv_array *xa = array_i64(1, s1, xv), *da = rv_array_new(RV_I32, 1, s1);
    memcpy(rv_array_data(da), dv, sizeof dv);
    rv_bindings_set_array(b, "X", xa);
    rv_bindings_set_array(b, "D", da);
    CHECK(run_ok(m, b) == RV_OK);
    int64_t want[6][4] = {
        {3, -3, -3, 3}, /* C division truncates */
        {1, -1, 1, -1}, /* C remainder has the dividend's sign */
        {3, -4, -4, 3}, /* floordiv rounds toward -inf */
        {1, 1, -1, -1}, /* floormod has the divisor's sign */
        {2, -7, -2, -7}, {7, 2, 7, -2},
    };
    for (int o = 0; o < 6; o++) {
        const int64_t *r = i64(b, rv_tensor_name(res[o]));
        CHECK(r != NULL &&
              rv_array_dtype(rv_bindings_get_array(b, rv_tensor_name(res[o]))) == RV_I64);
        for (int i = 0; r && i < 4; i++)
            CHECK_EQ_INT(r[i], want[o][i]);
    }
    const int64_t *mi = i64(b, "misc");
    const rv_array *ha = rv_bindings_get_array(b, "half");
    if (mi && ha) {
        CHECK_EQ_INT(mi[0], 7);
        CHECK_EQ_INT(mi[1], 700);
        CHECK(rv_array_dtype(ha) == RV_I32);
        const int32_t *h = rv_array_cdata(ha);
        CHECK_EQ_INT(h[0], 3);  /* 3.5 truncates */
        CHECK_EQ_INT(h[1], -3); /* -3.5 truncates toward zero */
    }

    /* random, against C */
    rv_bindings_free(b);
    b = rv_bindings_new(m);
    rv_bindings_set_size(b, "N", 64);
    CHECK(rv_bindings_randomize(b, 77) == RV_OK);
    const int32_t *d = rv_array_cdata(rv_bindings_get_array(b, "D"));
    /* randomized integers lie in [-8, 8]: make the divisors non-zero */
    rv_array *dnz = rv_array_new(RV_I32, 1, (int64_t[1]){64});
    for (int i = 0; i < 64; i++)
        ((int32_t *)rv_array_data(dnz))[i] = d[i] ? d[i] : 3;
    rv_bindings_set_array(b, "D", dnz);
    CHECK(run_ok(m, b) == RV_OK);
    const int64_t *xr = i64(b, "X");
    const int32_t *dr = rv_array_cdata(dnz);
    int bad = 0, in_range = 1;
    for (int i = 0; i < 64; i++) {
        int64_t a = xr[i], q = dr[i];
        in_range &= a >= -8 && a <= 8;
        int64_t fd = a / q - ((a % q != 0) && ((a < 0) != (q < 0)));
        int64_t w[6] = {a / q, a % q, fd, a - fd * q, a < q ? a : q, a > q ? a : q};
        for (int o = 0; o < 6; o++)
            bad += i64(b, rv_tensor_name(res[o]))[i] != w[o];
    }
    CHECK(in_range);
    CHECK_EQ_INT(bad, 0);

    /* division by zero is an error naming the element */
    ((int32_t *)rv_array_data(dnz))[5] = 0;
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "computing r0[5]: division by zero in");
    rv_bindings_free(b);
    rv_array_free(xa);
    rv_array_free(da);
    rv_array_free(dnz);
    rv_module_free(m);
}

/* Integer overflow is an error, not a wrapped value. */
static void test_integer_overflow(void) {
    rv_module *m = rv_module_new();
    rv_tensor *X = input(m, "X", RV_I64, 1, I(m, 2), NULL);
    rv_compute *c = begin1(m, "sq", NULL);
    rv_expr *x = read1(m, X, rv_compute_var(c, 0));
    rv_tensor *sq = rv_compute_end(c, bin(m, "*", x, x));
    CHECK(sq != NULL);
    rv_bindings *b = rv_bindings_new(m);
    int64_t s1[1] = {2}, xv[2] = {3, 3037000500LL};
    rv_array *xa = array_i64(1, s1, xv);
    rv_bindings_set_array(b, "X", xa);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "computing sq[1]: integer overflow in");
    rv_bindings_free(b);
    rv_array_free(xa);
    rv_module_free(m);
}

/* An i32 operation overflows at int32, as compiled code computes it in 32
 * bits: X[i]^3 with X[1] = 2000 (8e9 fits int64, not int32), and a sum
 * whose running total passes INT32_MAX. */
static void check_i32_overflow(bool sum, int32_t x1, const char *msg) {
    rv_module *m = rv_module_new();
    rv_tensor *X = input(m, "X", RV_I32, 1, I(m, 2), NULL);
    rv_tensor *Y;
    if (sum) {
        rv_axis *k = rv_reduce_axis_new(m, "k", I(m, 2));
        rv_compute *c = rv_compute_begin(m, "total", 0, NULL, NULL);
        Y = rv_compute_end(c, rv_expr_reduce(m, RV_REDUCE_SUM, 1, &k,
                                             read1(m, X, rv_expr_axis(m, k))));
    } else {
        rv_compute *c = begin1(m, "cube", NULL);
        rv_compute_set_dtype(c, RV_I64);
        rv_expr *x = read1(m, X, rv_compute_var(c, 0));
        Y = rv_compute_end(c, rv_expr_cast(m, RV_I64, bin(m, "*", bin(m, "*", x, x), x)));
    }
    CHECK(Y != NULL);
    rv_bindings *b = rv_bindings_new(m);
    int64_t s1[1] = {2};
    rv_array *xa = rv_array_new(RV_I32, 1, s1);
    int32_t *xv = rv_array_data(xa);
    xv[0] = 3;
    xv[1] = x1;
    rv_bindings_set_array(b, "X", xa);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    rv_bindings_free(b);
    rv_array_free(xa);
    rv_module_free(m);
}

static void test_i32_overflow(void) {
    check_i32_overflow(false, 2000, "computing cube[1]: integer overflow in");
    check_i32_overflow(true, INT32_MAX - 2, "integer overflow in a sum");
}

/* ------------------------------------------------- f32 rounding of results */

/* Intermediates are computed in double; only stored results are rounded.
 * Y = X * (1/3) + X * (2/3) - X cancels exactly in double but not in f32. */
static void test_f32_rounding(void) {
    rv_module *m = rv_module_new();
    rv_tensor *X = input(m, "X", RV_F64, 1, I(m, 1), NULL);
    rv_compute *c = begin1(m, "third", NULL);
    rv_compute_set_dtype(c, RV_F32);
    rv_tensor *third = rv_compute_end(
        c, bin(m, "/", read1(m, X, rv_compute_var(c, 0)), rv_expr_float(m, RV_F64, 3.0)));
    c = begin1(m, "back", NULL);
    rv_expr *t = rv_expr_cast(m, RV_F64, read1(m, third, rv_compute_var(c, 0)));
    rv_tensor *back = rv_compute_end(c, bin(m, "*", t, rv_expr_float(m, RV_F64, 3.0)));
    CHECK(third && back);
    if (!back) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    rv_bindings *b = rv_bindings_new(m);
    int64_t s1[1] = {1};
    rv_array *xa = rv_array_new(RV_F64, 1, s1);
    ((double *)rv_array_data(xa))[0] = 1.0;
    rv_bindings_set_array(b, "X", xa);
    CHECK(run_ok(m, b) == RV_OK);
    const float *th = f32(b, "third");
    const rv_array *ba = rv_bindings_get_array(b, "back");
    if (th && ba) {
        CHECK(th[0] == (float)(1.0 / 3.0));
        /* the next operation reads the rounded f32 value, as compiled code would */
        CHECK(((const double *)rv_array_cdata(ba))[0] == (double)(float)(1.0 / 3.0) * 3.0);
    }
    rv_bindings_free(b);
    rv_array_free(xa);
    rv_module_free(m);
}

/* ------------------------------------------------------------- errors */

/* X : f32[16 T, 768], Y[i, j] = X[i, j + off] with j < 10 */
static rv_module *build_shift(int64_t off) {
    rv_module *m = rv_module_new();
    rv_size *T = rv_size_new(m, "T", 1, 128);
    rv_tensor *X = input(m, "X", RV_F32, 2, bin(m, "*", I(m, 16), S(m, T)), I(m, 768));
    rv_compute *c = begin2(m, "Y", bin(m, "*", I(m, 16), S(m, T)), I(m, 10));
    rv_compute_end(c,
                   read2(m, X, rv_compute_var(c, 0), bin(m, "+", rv_compute_var(c, 1), I(m, off))));
    return m;
}

static void test_error_sizes(void) {
    rv_module *m = build_shift(0);
    rv_bindings *b = rv_bindings_new(m);
    CHECK(rv_bindings_set_size(b, "T", 200) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "size T = 200 outside declared range 1..128");
    CHECK(rv_bindings_set_size(b, "T", 0) == RV_ERR_BOUNDS);
    CHECK(rv_bindings_set_size(b, "Q", 1) == RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no size named 'Q'");
    CHECK_EQ_INT(rv_bindings_get_size(b, "T"), -1);
    CHECK(!rv_bindings_has(b, "T"));
    CHECK(rv_interp_run(m, b) == RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "size T is not bound");
    CHECK(rv_bindings_set_size(b, "T", 128) == RV_OK); /* range edges are fine */
    CHECK(rv_bindings_has(b, "T"));
    CHECK(rv_bindings_set_size(b, "T", 1) == RV_OK);
    CHECK_EQ_INT(rv_bindings_get_size(b, "T"), 1);
    rv_bindings_free(b);
    rv_module_free(m);
}

static void test_error_arrays(void) {
    rv_module *m = build_shift(0);
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "T", 3);
    CHECK(rv_interp_run(m, b) == RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "input X is not bound");

    int64_t bad_shape[2] = {47, 768}, good_shape[2] = {48, 768};
    rv_array *wrong = rv_array_new(RV_F32, 2, bad_shape);
    rv_array *f64 = rv_array_new(RV_F64, 2, good_shape);
    rv_array *good = rv_array_new(RV_F32, 2, good_shape);
    CHECK(rv_bindings_set_array(b, "X", f64) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "input X: expected a f32 array, got f64");
    CHECK(rv_bindings_set_array(b, "X", wrong) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "input X: expected shape [48, 768] (T = 3), got [47, 768]");
    CHECK(rv_bindings_set_array(b, "Y", good) == RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "'Y' is computed by the program");
    CHECK(rv_bindings_set_array(b, "T", good) == RV_ERR_ARG);
    CHECK(rv_bindings_set_array(b, "nope", good) == RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no input or ufun named 'nope'");
    CHECK(rv_bindings_set_array(b, "X", good) == RV_OK);
    CHECK(run_ok(m, b) == RV_OK);
    CHECK(rv_bindings_get_array(b, "X") == good);
    rv_bindings_free(b);
    rv_array_free(wrong);
    rv_array_free(f64);
    rv_array_free(good);
    rv_module_free(m);

    /* ragged: a 1-D array of exactly the layout's element count */
    Ragged r = ragged_module(512);
    m = r.m;
    const char *names[2] = {"b", "l"};
    rv_compute *c = rv_compute_begin(m, "Y", 2, names, NULL);
    rv_compute_end(c, read2(m, r.A, rv_compute_var(c, 0), rv_compute_var(c, 1)));
    b = rv_bindings_new(m);
    rv_bindings_set_size(b, "B", 4);
    int64_t lens[4] = {300, 0, 512, 422}, ls[1] = {4}, n1[1] = {1200}, n2[2] = {4, 300};
    rv_array *la = array_i64(1, ls, lens), *a1 = array_f32(1, n1, NULL),
             *a2 = array_f32(2, n2, NULL);
    rv_bindings_set_array(b, "len", la);
    rv_bindings_set_array(b, "A", a1);
    CHECK(rv_interp_run(m, b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "input A: ragged layout needs 1234 elements (B = 4, len = "
                                        "[300, 0, 512, 422]), array has 1200 elements");
    rv_bindings_set_array(b, "A", a2);
    CHECK(rv_interp_run(m, b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(),
                       "input A: ragged layout needs a 1-D array of 1234 elements");
    rv_bindings_free(b);
    rv_array_free(a1);
    rv_array_free(a2);

    /* UF arrays: missing, wrong dtype, wrong shape, values out of range */
    b = rv_bindings_new(m);
    rv_bindings_set_size(b, "B", 4);
    CHECK(rv_interp_run(m, b) == RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "ufun len is not bound");
    rv_array *lf = array_f32(1, ls, NULL);
    CHECK(rv_bindings_set_array(b, "len", lf) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "ufun len: expected an i32 or i64 array, got f32");
    int64_t l5[1] = {5};
    rv_array *l5a = array_i64(1, l5, NULL);
    rv_bindings_set_array(b, "len", l5a);
    CHECK(rv_interp_run(m, b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "ufun len: expected shape [4] (B = 4), got [5]");
    lens[3] = 600;
    rv_array *lbig = array_i64(1, ls, lens);
    rv_bindings_set_array(b, "len", lbig);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "ufun len: len[3] = 600 outside declared range 0..512");
    rv_bindings_free(b);
    rv_array_free(la);
    rv_array_free(lf);
    rv_array_free(l5a);
    rv_array_free(lbig);
    rv_module_free(m);
}

static void test_error_ufun_range(void) {
    /* a range over sizes, a 2-D domain and the message's index tuple */
    rv_module *m = rv_module_new();
    rv_size *B = rv_size_new(m, "B", 1, 8);
    const char *args[2] = {"p", "q"};
    rv_ufun *f = rv_ufun_begin(m, "f", 2, args);
    rv_expr *exts[2] = {S(m, B), I(m, 3)};
    CHECK(rv_ufun_end(f, exts, I(m, 1), bin(m, "*", I(m, 2), S(m, B))) != NULL);
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "B", 2);
    int64_t fs[2] = {2, 3}, fv[6] = {1, 2, 3, 4, 5, 4};
    rv_array *fa = array_i64(2, fs, fv);
    rv_bindings_set_array(b, "f", fa);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "ufun f: f[1, 1] = 5 outside declared range 1..4");
    ((int64_t *)rv_array_data(fa))[4] = 4;
    CHECK(run_ok(m, b) == RV_OK);
    rv_bindings_free(b);
    rv_array_free(fa);
    rv_module_free(m);
}

/* A range over the UF's own arguments (`ufun parent[n < N] in 0..n`) is
 * checked and drawn per element. */
static void test_ufun_range_own_args(void) {
    rv_module *m = NULL;
    CHECK(rv_module_parse("t.rv", "size N in 1..8\nufun parent[n < N] in 0..n\n"
                                  "ufun pred[n < N] in 0..n - 1\n",
                          &m) == RV_OK);
    if (!m)
        return;
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "N", 3);
    int64_t ps[1] = {3}, pv[3] = {0, 0, 3}, qv[3] = {0, 0, 1};
    rv_array *pa = array_i64(1, ps, pv), *qa = array_i64(1, ps, qv);
    rv_bindings_set_array(b, "parent", pa);
    rv_bindings_set_array(b, "pred", qa);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "ufun parent: parent[2] = 3 outside declared range 0..2");
    ((int64_t *)rv_array_data(pa))[2] = 2;
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS); /* pred[0] has no value in 0..-1 */
    CHECK_STR_CONTAINS(rv_last_error(), "ufun pred: pred[0] = 0 outside declared range 0..-1");
    rv_bindings_free(b);
    /* nor can one be drawn */
    b = rv_bindings_new(m);
    CHECK(rv_bindings_randomize(b, 1) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "ufun pred: empty value range 0..-1 at pred[0]");
    CHECK(rv_bindings_get_array(b, "pred") == NULL);
    rv_bindings_free(b);
    rv_array_free(pa);
    rv_array_free(qa);
    rv_module_free(m);
    /* drawn values respect each element's range */
    CHECK(rv_module_parse("t.rv", "size N in 8..8\nufun parent[n < N] in 0..n\n", &m) == RV_OK);
    if (!m)
        return;
    int bad = 0;
    for (uint64_t seed = 0; seed < 8; seed++) {
        b = rv_bindings_new(m);
        CHECK(rv_bindings_randomize(b, seed) == RV_OK);
        CHECK(run_ok(m, b) == RV_OK);
        const int64_t *v = i64(b, "parent");
        for (int64_t n = 0; v && n < 8; n++)
            bad += v[n] < 0 || v[n] > n;
        rv_bindings_free(b);
    }
    CHECK_EQ_INT(bad, 0);
    rv_module_free(m);
}

static void test_error_read_bounds(void) {
    rv_module *m = build_shift(764);
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "T", 1);
    CHECK(rv_bindings_randomize(b, 0) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "computing Y[0, 4]: read X[0, 768]: index 768 out of "
                                        "bounds for dimension 1 (extent 768)");
    rv_bindings_free(b);
    rv_module_free(m);

    /* reads into a ragged dimension are checked against that row's extent */
    Ragged r = ragged_module(8);
    m = r.m;
    rv_compute *c = begin2(m, "Y", S(m, r.B), I(m, 2));
    rv_tensor *Y = rv_compute_end(c, read2(m, r.A, rv_compute_var(c, 0), rv_compute_var(c, 1)));
    CHECK(Y != NULL);
    b = rv_bindings_new(m);
    rv_bindings_set_size(b, "B", 3);
    int64_t lens[3] = {2, 1, 2}, ls[1] = {3};
    rv_array *la = array_i64(1, ls, lens);
    rv_bindings_set_array(b, "len", la);
    CHECK(rv_bindings_randomize(b, 0) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "computing Y[1, 1]: read A[1, 1]: index 1 out of bounds "
                                        "for dimension 1 (extent 1)");
    rv_bindings_free(b);
    rv_module_free(m);

    /* UF applications outside the domain */
    m = rv_module_new();
    rv_size *N = rv_size_new(m, "N", 1, 8);
    rv_ufun *g = ufun1(m, "g", S(m, N), I(m, 0), I(m, 5));
    c = begin1(m, "Z", bin(m, "+", S(m, N), I(m, 1)));
    rv_compute_set_dtype(c, RV_I64);
    rv_tensor *Z = rv_compute_end(c, uf1(m, g, rv_compute_var(c, 0)));
    CHECK(Z != NULL);
    b = rv_bindings_new(m);
    rv_bindings_set_size(b, "N", 3);
    CHECK(rv_bindings_randomize(b, 0) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "computing Z[3]: g[3]: index 3 out of bounds for "
                                        "dimension 0 (extent 3)");
    rv_bindings_free(b);
    rv_array_free(la);
    rv_module_free(m);
}

/* ----------------------------------------------------------- randomize */

static void test_randomize(void) {
    Ragged r = ragged_module(6);
    rv_module *m = r.m;
    rv_size *W = rv_size_new(m, "W", 100, 1000);
    rv_tensor *V = input(m, "V", RV_I32, 1, S(m, W), NULL);
    /* a UF whose range uses a size and whose domain uses another UF */
    const char *args[2] = {"b", "l"};
    rv_ufun *pos = rv_ufun_begin(m, "pos", 2, args);
    rv_expr *exts[2] = {S(m, r.B), uf1(m, r.len, rv_ufun_arg(pos, 0))};
    CHECK(rv_ufun_end(pos, exts, I(m, 0), bin(m, "-", S(m, W), I(m, 1))) != NULL);
    CHECK(V != NULL);

    rv_bindings *b1 = rv_bindings_new(m), *b2 = rv_bindings_new(m), *b3 = rv_bindings_new(m);
    CHECK(rv_bindings_randomize(b1, 1234) == RV_OK);
    CHECK(rv_bindings_randomize(b2, 1234) == RV_OK);
    CHECK(rv_bindings_randomize(b3, 1235) == RV_OK);
    int64_t B = rv_bindings_get_size(b1, "B"), Wn = rv_bindings_get_size(b1, "W");
    CHECK(B >= 0 && B <= 16);
    CHECK(Wn >= 100 && Wn <= 116);
    CHECK_EQ_INT(rv_bindings_get_size(b2, "B"), B);
    CHECK(rv_bindings_has(b1, "A") && rv_bindings_has(b1, "len") && rv_bindings_has(b1, "pos"));
    const int64_t *len = i64(b1, "len"), *p = i64(b1, "pos");
    int64_t n = 0;
    int bad = 0;
    for (int64_t i = 0; i < B; i++) {
        bad += len[i] < 0 || len[i] > 6;
        n += len[i];
    }
    CHECK_EQ_INT(shape_of(b1, "pos", 0), n);
    CHECK_EQ_INT(shape_of(b1, "A", 0), n);
    for (int64_t i = 0; i < n; i++)
        bad += p[i] < 0 || p[i] > Wn - 1;
    const float *a = f32(b1, "A");
    for (int64_t i = 0; i < n; i++)
        bad += !(a[i] >= -1 && a[i] <= 1);
    const int32_t *v = rv_array_cdata(rv_bindings_get_array(b1, "V"));
    for (int64_t i = 0; i < Wn; i++)
        bad += v[i] < -8 || v[i] > 8;
    CHECK_EQ_INT(bad, 0);
    /* reproducible, and different for another seed */
    CHECK(memcmp(rv_array_cdata(rv_bindings_get_array(b1, "V")),
                 rv_array_cdata(rv_bindings_get_array(b2, "V")),
                 sizeof(int32_t) * (size_t)Wn) == 0);
    CHECK(memcmp(rv_array_cdata(rv_bindings_get_array(b1, "A")),
                 rv_array_cdata(rv_bindings_get_array(b2, "A")), sizeof(float) * (size_t)n) == 0);
    int same = rv_bindings_get_size(b3, "W") == Wn && rv_bindings_get_size(b3, "B") == B;
    if (same)
        same = memcmp(rv_array_cdata(rv_bindings_get_array(b1, "V")),
                      rv_array_cdata(rv_bindings_get_array(b3, "V")),
                      sizeof(int32_t) * (size_t)Wn) == 0;
    CHECK(!same);
    /* a randomized run with no computes is fine */
    CHECK(run_ok(m, b1) == RV_OK);
    rv_bindings_free(b1);
    rv_bindings_free(b2);
    rv_bindings_free(b3);
    rv_module_free(m);

    /* a range that is empty under the drawn sizes, over a nonempty domain */
    m = rv_module_new();
    rv_size *L = rv_size_new(m, "L", 1, 5);
    rv_size *H = rv_size_new(m, "H", 0, 9);
    ufun1(m, "u", I(m, 2), S(m, L), S(m, H));
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "L", 5);
    rv_bindings_set_size(b, "H", 2);
    CHECK(rv_bindings_randomize(b, 1) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "ufun u: empty value range 5..2");
    rv_bindings_free(b);
    rv_module_free(m);
}

/* Re-running replaces results; intermediates are kept. */
static void test_rerun(void) {
    rv_module *m = build_shift(1);
    rv_bindings *b = rv_bindings_new(m);
    rv_bindings_set_size(b, "T", 1);
    int64_t xs[2] = {16, 768};
    rv_array *x = array_f32(2, xs, NULL);
    float *xd = rv_array_data(x);
    xd[1] = 5;
    rv_bindings_set_array(b, "X", x);
    CHECK(run_ok(m, b) == RV_OK);
    const rv_array *y1 = rv_bindings_get_array(b, "Y");
    CHECK(y1 && ((const float *)rv_array_cdata(y1))[0] == 5);
    xd[1] = 6;
    CHECK(run_ok(m, b) == RV_OK);
    const rv_array *y2 = rv_bindings_get_array(b, "Y");
    CHECK(y2 && ((const float *)rv_array_cdata(y2))[0] == 6);
    CHECK(rv_bindings_has(b, "Y"));
    rv_bindings_free(b);
    rv_array_free(x);
    rv_module_free(m);
}

/* rv_bindings_infer_sizes: sizes read off bound arrays' shapes; the
 * errors name the input, the dimension and where the other value came
 * from. */
static void test_infer_sizes(void) {
    rv_module *m;
    CHECK(rv_module_parse("infer.rv",
                          "size B in 1..4\nsize T in 1..8\nsize H in 1..8\n"
                          "input X : f32[16*T + 1, 3]\ninput Z : f32[B*T, H]\n"
                          "ufun len[b < B] in 0..T\n"
                          "Y[i < T, j < 3] = X[i, j]\n",
                          &m) == RV_OK);
    int64_t s49[2] = {49, 3}, s50[2] = {50, 3}, s161[2] = {161, 3}, s6[2] = {6, 5},
            s7[2] = {7, 5}, s2[1] = {2};
    rv_array *x49 = rv_array_new(RV_F32, 2, s49), *x50 = rv_array_new(RV_F32, 2, s50),
             *x161 = rv_array_new(RV_F32, 2, s161), *z6 = rv_array_new(RV_F32, 2, s6),
             *z7 = rv_array_new(RV_F32, 2, s7), *len = rv_array_new(RV_I64, 1, s2);

    /* T from X (16*T + 1 = 49); then B*T is linear in B, and Z gives B and H;
     * the UF's domain gives B too, consistently */
    rv_bindings *b = rv_bindings_new(m);
    CHECK(rv_bindings_set_array(b, "Z", z6) == RV_OK);
    CHECK(rv_bindings_set_array(b, "X", x49) == RV_OK);
    CHECK(rv_bindings_set_array(b, "len", len) == RV_OK);
    CHECK(rv_bindings_infer_sizes(b) == RV_OK);
    CHECK_EQ_INT(rv_bindings_get_size(b, "T"), 3);
    CHECK_EQ_INT(rv_bindings_get_size(b, "B"), 2);
    CHECK_EQ_INT(rv_bindings_get_size(b, "H"), 5);
    rv_bindings_free(b);

    /* no integer T */
    b = rv_bindings_new(m);
    CHECK(rv_bindings_set_array(b, "X", x50) == RV_OK);
    CHECK(rv_bindings_infer_sizes(b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "input X: dimension 0 has 50 elements");
    CHECK_STR_CONTAINS(rv_last_error(), "for no integer T");
    CHECK_EQ_INT(rv_bindings_get_size(b, "T"), -1);
    rv_bindings_free(b);

    /* T = 10 is outside 1..8 */
    b = rv_bindings_new(m);
    CHECK(rv_bindings_set_array(b, "X", x161) == RV_OK);
    CHECK(rv_bindings_infer_sizes(b) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "T = 10, outside its declared range 1..8");
    rv_bindings_free(b);

    /* a given size that disagrees */
    b = rv_bindings_new(m);
    CHECK(rv_bindings_set_size(b, "T", 2) == RV_OK);
    CHECK(rv_bindings_set_array(b, "X", x49) == RV_OK);
    CHECK(rv_bindings_infer_sizes(b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "its extent 16 * T + 1 is 33: T = 2 was given");
    rv_bindings_free(b);

    /* T = 3 from X, so B*T = 7 has no integer B: the error names Z */
    b = rv_bindings_new(m);
    CHECK(rv_bindings_set_array(b, "X", x49) == RV_OK);
    CHECK(rv_bindings_set_array(b, "Z", z7) == RV_OK);
    CHECK(rv_bindings_infer_sizes(b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "input Z: dimension 0 has 7 elements");
    rv_bindings_free(b);

    /* B = 2 from len, T = 3 from X: Z's 7 rows contradict B*T = 6, naming
     * where B came from */
    b = rv_bindings_new(m);
    CHECK(rv_bindings_set_array(b, "len", len) == RV_OK);
    CHECK(rv_bindings_set_array(b, "X", x49) == RV_OK);
    CHECK(rv_bindings_set_array(b, "Z", z7) == RV_OK);
    CHECK(rv_bindings_infer_sizes(b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "input Z: dimension 0 has 7 elements");
    CHECK_STR_CONTAINS(rv_last_error(), "B = 2 was inferred from ufun len, dimension 0");
    rv_bindings_free(b);

    /* a run infers what is left unbound: X alone sets T, and Y is computed */
    b = rv_bindings_new(m);
    CHECK(rv_bindings_set_size(b, "B", 1) == RV_OK);
    CHECK(rv_bindings_set_size(b, "H", 1) == RV_OK);
    int64_t s31[2] = {3, 1}, s1[1] = {1};
    rv_array *z31 = rv_array_new(RV_F32, 2, s31), *len1 = rv_array_new(RV_I64, 1, s1);
    CHECK(rv_bindings_set_array(b, "X", x49) == RV_OK);
    CHECK(rv_bindings_set_array(b, "Z", z31) == RV_OK);
    CHECK(rv_bindings_set_array(b, "len", len1) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_OK);
    CHECK_EQ_INT(rv_bindings_get_size(b, "T"), 3);
    CHECK(rv_bindings_get_array(b, "Y") != NULL);
    rv_bindings_free(b);
    /* and reports a shape that fits no T */
    b = rv_bindings_new(m);
    CHECK(rv_bindings_set_array(b, "X", x50) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "input X: dimension 0 has 50 elements");
    rv_bindings_free(b);
    rv_array_free(z31);
    rv_array_free(len1);

    /* nothing bound: nothing to do */
    b = rv_bindings_new(m);
    CHECK(rv_bindings_infer_sizes(b) == RV_OK);
    CHECK_EQ_INT(rv_bindings_get_size(b, "T"), -1);
    rv_bindings_free(b);
    CHECK(rv_bindings_infer_sizes(NULL) == RV_ERR_ARG);

    rv_array *all[] = {x49, x50, x161, z6, z7, len};
    for (int i = 0; i < COUNT(all); i++)
        rv_array_free(all[i]);
    rv_module_free(m);
}

int main(void) {
    RUN(test_dense_gelu_by_hand);
    RUN(test_dense_gelu_random);
    RUN(test_softmax);
    RUN(test_ragged_elementwise);
    RUN(test_ragged_softmax);
    RUN(test_trmm);
    RUN(test_extern_matmul);
    RUN(test_embedding_gather);
    RUN(test_cond_lazy);
    RUN(test_select_strict);
    RUN(test_reductions);
    RUN(test_long_reductions);
    RUN(test_reduce_invariant_not_hoisted_past_empty);
    RUN(test_scalar_output);
    RUN(test_integer_ops);
    RUN(test_integer_overflow);
    RUN(test_i32_overflow);
    RUN(test_f32_rounding);
    RUN(test_error_sizes);
    RUN(test_error_arrays);
    RUN(test_error_ufun_range);
    RUN(test_error_read_bounds);
    RUN(test_ufun_range_own_args);
    RUN(test_randomize);
    RUN(test_rerun);
    RUN(test_infer_sizes);
    return harness_report();
}
