/*
 * bench/ravel_kernels.h — where ravel's compiled kernels plug into the
 * benchmark drivers.
 *
 * A driver asks ravel_kernel_for() for a kernel of a given kind, shape and
 * thread count before timing. The kernel is built (compiled, JIT-loaded,
 * tuned...) there, outside the timed region; the timed call is only
 * kernel->run(). Until ravel can compile these workloads, ravel_kernel_for()
 * returns NULL and the drivers print "ravel_ms": null, "ratio": null.
 *
 * Layouts are the baselines' (bench/baselines.h): row-major float32;
 *   RK_DENSE             c[m,n] = a[m,k] · b[n,k]ᵀ              (b = W)
 *   RK_DENSE_BIAS_GELU   c[m,n] = gelu_erf(a[m,k] · b[n,k]ᵀ + bias[n])
 *   RK_BMM_NT            c[i][m,n] = a[i][m,k] · b[i][n,k]ᵀ,  i < batch
 *   RK_BMM_NN            c[i][m,n] = a[i][m,k] · b[i][k,n],   i < batch
 *   RK_SGEMM             c[m,n] = a[m,k] · b[k,n]
 *
 * run() receives the dimensions again so that one kernel compiled for a
 * symbolic dimension (ravel's dynamic shapes) can serve every T. It must use
 * `threads` threads, as the baseline it is compared with does.
 */
#ifndef RAVEL_BENCH_RAVEL_KERNELS_H
#define RAVEL_BENCH_RAVEL_KERNELS_H

typedef enum {
    RK_DENSE,           /* dense layer, no epilogue */
    RK_DENSE_BIAS_GELU, /* dense layer with bias + exact gelu fused */
    RK_BMM_NT,          /* batched A·Bᵀ (attention scores) */
    RK_BMM_NN,          /* batched A·B (attention · values) */
    RK_SGEMM,           /* square-ish plain GEMM */
    RK_COUNT
} RavelKernelKind;

typedef struct {
    RavelKernelKind kind;
    int batch; /* 0 for the 2-D kinds */
    int m, n, k;
    int threads;
} RavelKernelShape;

typedef struct {
    const float *a, *b, *bias; /* bias is NULL except for RK_DENSE_BIAS_GELU */
    float *c;
    int batch, m, n, k;
} RavelKernelArgs;

typedef struct RavelKernel {
    const char *name; /* shown on stderr by the drivers */
    /* Seconds the C compiler ran to build this kernel's programs in this
     * process: the cold compile time with a fresh RAVEL_CACHE_DIR, 0 when
     * every program came from the JIT cache. */
    double compile_seconds;
    void *state;
    void (*run)(void *state, const RavelKernelArgs *args);
    void (*free)(void *state);
} RavelKernel;

/* The kernel for this shape, or NULL while ravel has none. */
RavelKernel *ravel_kernel_for(const RavelKernelShape *shape);
void ravel_kernel_free(RavelKernel *k);

/* A kernel running a program the caller compiled (bench_tune's tuned and
 * per-shape programs): its arrays named X, W, bias and Y as above, its
 * size variable `size` bound to M / size_div on each run (T = M / 16 for
 * the dense programs of bench/tune). m and p stay the caller's, alive
 * until the kernel is freed; `name` too. */
struct rv_module;
struct rv_program;
RavelKernel *ravel_kernel_wrap(struct rv_module *m, struct rv_program *p,
                               const RavelKernelShape *shape, const char *size, int size_div,
                               const char *name);

#endif
