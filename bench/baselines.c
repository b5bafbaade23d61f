/*
 * bench/baselines.c — OpenBLAS and oneDNN calls, thread control, and the
 * plain-C bias+gelu pass. See baselines.h for the shapes and conventions.
 *
 * The oneDNN part uses the C API of oneDNN 2.6 (dnnl.h): a matmul primitive
 * descriptor is built from memory descriptors whose strides express the
 * layouts above (NT is B with strides {1, k}), the primitive is created once,
 * and every run is one dnnl_primitive_execute() plus a stream wait. With
 * `prepack` B's layout is left to oneDNN (format "any") and the weights are
 * reordered into it once, which is what an inference engine does with
 * constant weights.
 */
#define _GNU_SOURCE
#include "baselines.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.h>

/* Not in Debian's cblas.h for every variant; exported by every OpenBLAS. */
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);

static int bl_threads = 1;

/*
 * The environment every driver runs in; see baselines.h. Each entry is set
 * only when absent, so a caller can still override it from the shell.
 */
static const char *const spin_env[][2] = {
    {"GOMP_SPINCOUNT", "1000"},        /* ~55 us of pause loops here, instead of ~16 ms */
    {"OPENBLAS_THREAD_TIMEOUT", "17"}, /* 2^17 TSC ticks, ~65 us at 2 GHz, instead of ~134 ms */
};

void bl_init(int argc, char **argv) {
    (void)argc;
    const char *keep = getenv("RAVEL_BENCH_KEEP_CORETYPE");
    const char *lib_spin = getenv("RAVEL_BENCH_LIBRARY_SPIN");
    int again = 0;
    if (getenv("OPENBLAS_CORETYPE") && !(keep && strcmp(keep, "1") == 0)) {
        fprintf(stderr,
                "bench: unsetting OPENBLAS_CORETYPE=%s so OpenBLAS picks this CPU's "
                "kernels (RAVEL_BENCH_KEEP_CORETYPE=1 keeps it)\n",
                getenv("OPENBLAS_CORETYPE"));
        unsetenv("OPENBLAS_CORETYPE");
        again = 1;
    }
    if (!(lib_spin && strcmp(lib_spin, "1") == 0))
        for (size_t i = 0; i < sizeof spin_env / sizeof spin_env[0]; i++)
            if (!getenv(spin_env[i][0])) {
                setenv(spin_env[i][0], spin_env[i][1], 1);
                again = 1;
            }
    if (again) {
        /* Both libraries read these variables when they are loaded: start over. */
        execv("/proc/self/exe", argv);
        perror("bench: execv /proc/self/exe");
        exit(1);
    }
}

void bl_set_threads(int n) {
    bl_threads = n;
    openblas_set_num_threads(n);
    omp_set_num_threads(n);
}

const char *bl_openblas_core(void) {
    return openblas_get_corename();
}

const char *bl_describe(void) {
    static char buf[256];
    const char *spin = getenv("GOMP_SPINCOUNT"), *timeout = getenv("OPENBLAS_THREAD_TIMEOUT");
    snprintf(buf, sizeof buf,
             "OpenBLAS %s kernels, oneDNN %s, GOMP_SPINCOUNT=%s, "
             "OPENBLAS_THREAD_TIMEOUT=%s",
             bl_openblas_core(), bl_dnnl_version(), spin ? spin : "(default)",
             timeout ? timeout : "(default)");
    return buf;
}

const char *bl_dnnl_version(void) {
    static char buf[32];
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, sizeof buf, "%d.%d.%d", v->major, v->minor, v->patch);
    return buf;
}

/* ---- OpenBLAS ---------------------------------------------------------- */

void bl_openblas_dense(int m, int n, int k, const float *x, const float *w, float *y) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
}

void bl_openblas_sgemm(int m, int n, int k, const float *a, const float *b, float *c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

/* One cblas_sgemm per batch element, as a framework without batched GEMM does. */
void bl_openblas_batch(int batch, int m, int n, int k, int b_trans, const float *a, const float *b,
                       float *c) {
    size_t sa = (size_t)m * k, sb = (size_t)n * k, sc = (size_t)m * n;
    for (int i = 0; i < batch; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
                    a + i * sa, k, b + i * sb, b_trans ? k : n, 0.0f, c + i * sc, n);
}

/* ---- plain-C epilogue --------------------------------------------------- */

float bl_gelu(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

/*
 * The pass a careful engineer writes after a vendor GEMM: one sweep over Y,
 * rows split over the benchmark's threads when there is enough work.
 */
void bl_bias_gelu(int m, int n, float *y, const float *bias) {
    int par = bl_threads > 1 && (long)m * n >= 32768;
#pragma omp parallel for num_threads(bl_threads) if (par) schedule(static)
    for (int i = 0; i < m; i++) {
        float *row = y + (size_t)i * n;
        for (int j = 0; j < n; j++)
            row[j] = bl_gelu(row[j] + bias[j]);
    }
}

/* ---- oneDNN ------------------------------------------------------------- */

struct BlDnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, bias, c;
    float *packed; /* owned copy of B in oneDNN's layout, when prepacked */
    dnnl_exec_arg_t args[4];
    int nargs;
};

#define DNNL_CHECK(call)                                                                           \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success) {                                                                 \
            fprintf(stderr, "bench: %s:%d: %s failed (status %d)\n", __FILE__, __LINE__, #call,    \
                    (int)st_);                                                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Shifts 3-D dims/strides {batch, r, c} to the 2-D {r, c}. */
static void drop_batch(dnnl_dims_t dims, dnnl_dims_t strides) {
    dims[0] = dims[1], dims[1] = dims[2];
    strides[0] = strides[1], strides[1] = strides[2];
}

/* Row-major memory descriptor of `nd` dims with explicit strides. */
static dnnl_memory_desc_t md_strided(int nd, const dnnl_dims_t dims, const dnnl_dims_t strides) {
    dnnl_memory_desc_t md;
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(&md, nd, dims, dnnl_f32, strides));
    return md;
}

BlDnnl *bl_dnnl_new(const BlDnnlSpec *s, const float *a, const float *b, const float *bias,
                    float *c) {
    BlDnnl *d = calloc(1, sizeof *d);
    if (!d) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    DNNL_CHECK(dnnl_engine_create(&d->engine, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags));

    dnnl_dim_t m = s->m, n = s->n, k = s->k, bt = s->batch;
    int nd = s->batch ? 3 : 2;
    /* Dims and strides, outermost first; the 2-D case drops the batch. The
     * arrays are full dnnl_dims_t because that is the parameter's type. */
    dnnl_dims_t a_dims = {bt, m, k}, a_str = {m * k, k, 1};
    dnnl_dims_t b_dims = {bt, k, n}, b_str = {k * n, n, 1};
    dnnl_dims_t c_dims = {bt, m, n}, c_str = {m * n, n, 1};
    dnnl_dims_t bias_dims = {1, 1, n}, bias_str = {n, n, 1};
    if (s->b_trans) {
        b_str[1] = 1; /* element (k_i, n_j) lives at n_j*k + k_i */
        b_str[2] = k;
    }
    if (nd == 2) {
        drop_batch(a_dims, a_str), drop_batch(b_dims, b_str);
        drop_batch(c_dims, c_str), drop_batch(bias_dims, bias_str);
    }
    dnnl_memory_desc_t a_md = md_strided(nd, a_dims, a_str);
    dnnl_memory_desc_t b_user = md_strided(nd, b_dims, b_str);
    dnnl_memory_desc_t c_md = md_strided(nd, c_dims, c_str);
    dnnl_memory_desc_t bias_md = md_strided(nd, bias_dims, bias_str);
    dnnl_memory_desc_t b_md = b_user;
    if (s->prepack)
        DNNL_CHECK(dnnl_memory_desc_init_by_tag(&b_md, nd, b_dims, dnnl_f32, dnnl_format_tag_any));

    dnnl_matmul_desc_t mm;
    DNNL_CHECK(dnnl_matmul_desc_init(&mm, &a_md, &b_md, s->bias_gelu ? &bias_md : NULL, &c_md));
    dnnl_primitive_attr_t attr = NULL;
    if (s->bias_gelu) {
        dnnl_post_ops_t po;
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_erf, 0.0f, 0.0f));
        DNNL_CHECK(dnnl_primitive_attr_create(&attr));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
        DNNL_CHECK(dnnl_post_ops_destroy(po));
    }
    DNNL_CHECK(dnnl_primitive_desc_create(&d->pd, &mm, attr, d->engine, NULL));
    if (attr)
        DNNL_CHECK(dnnl_primitive_attr_destroy(attr));
    DNNL_CHECK(dnnl_primitive_create(&d->prim, d->pd));

    DNNL_CHECK(dnnl_memory_create(&d->a, &a_md, d->engine, (void *)a));
    DNNL_CHECK(dnnl_memory_create(&d->c, &c_md, d->engine, c));
    if (s->prepack) {
        /* Reorder the user's B once into the layout the primitive chose. */
        const dnnl_memory_desc_t *chosen =
            dnnl_primitive_desc_query_md(d->pd, dnnl_query_weights_md, 0);
        size_t bytes = dnnl_memory_desc_get_size(chosen);
        d->packed = aligned_alloc(64, (bytes + 63) / 64 * 64);
        DNNL_CHECK(dnnl_memory_create(&d->b, chosen, d->engine, d->packed));
        dnnl_memory_t user;
        DNNL_CHECK(dnnl_memory_create(&user, &b_user, d->engine, (void *)b));
        dnnl_primitive_desc_t rpd;
        dnnl_primitive_t r;
        DNNL_CHECK(
            dnnl_reorder_primitive_desc_create(&rpd, &b_user, d->engine, chosen, d->engine, NULL));
        DNNL_CHECK(dnnl_primitive_create(&r, rpd));
        dnnl_exec_arg_t rargs[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, d->b}};
        DNNL_CHECK(dnnl_primitive_execute(r, d->stream, 2, rargs));
        DNNL_CHECK(dnnl_stream_wait(d->stream));
        DNNL_CHECK(dnnl_primitive_destroy(r));
        DNNL_CHECK(dnnl_primitive_desc_destroy(rpd));
        DNNL_CHECK(dnnl_memory_destroy(user));
    } else {
        DNNL_CHECK(dnnl_memory_create(&d->b, &b_user, d->engine, (void *)b));
    }
    d->args[d->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, d->a};
    d->args[d->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, d->b};
    d->args[d->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_DST, d->c};
    if (s->bias_gelu) {
        DNNL_CHECK(dnnl_memory_create(&d->bias, &bias_md, d->engine, (void *)bias));
        d->args[d->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, d->bias};
    }
    return d;
}

void bl_dnnl_run(BlDnnl *d) {
    DNNL_CHECK(dnnl_primitive_execute(d->prim, d->stream, d->nargs, d->args));
    DNNL_CHECK(dnnl_stream_wait(d->stream));
}

const char *bl_dnnl_impl(const BlDnnl *d) {
    const char *impl = "?";
    DNNL_CHECK(dnnl_primitive_desc_query(d->pd, dnnl_query_impl_info_str, 0, &impl));
    return impl;
}

void bl_dnnl_free(BlDnnl *d) {
    if (!d)
        return;
    dnnl_memory_destroy(d->a);
    dnnl_memory_destroy(d->b);
    dnnl_memory_destroy(d->c);
    if (d->bias)
        dnnl_memory_destroy(d->bias);
    free(d->packed);
    dnnl_primitive_destroy(d->prim);
    dnnl_primitive_desc_destroy(d->pd);
    dnnl_stream_destroy(d->stream);
    dnnl_engine_destroy(d->engine);
    free(d);
}
