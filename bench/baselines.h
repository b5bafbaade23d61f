/*
 * bench/baselines.h — the vendor and plain-C baselines ravel is measured
 * against. Every matrix is row-major float32.
 *
 *   dense        Y[m,n] = X[m,k] · W[n,k]ᵀ            (W stored as [n,k], "NT")
 *   bias_gelu    Y[i,j] = gelu(Y[i,j] + bias[j])       (exact, erff-based)
 *   batch NT     C[b][m,n] = A[b][m,k] · B[b][n,k]ᵀ
 *   batch NN     C[b][m,n] = A[b][m,k] · B[b][k,n]
 *   sgemm        C[m,n] = A[m,k] · B[k,n]
 *
 * OpenBLAS is the pthread build, linked by full path (bench/Makefile.inc);
 * its thread count is set with openblas_set_num_threads(). Debian builds
 * oneDNN 2.6 with the OpenMP runtime (libgomp), so oneDNN follows
 * omp_set_num_threads(). bl_set_threads() sets both, and the plain-C
 * bias+gelu pass uses the same count through OpenMP.
 *
 * oneDNN primitives read the thread count when they are created: create them
 * after bl_set_threads(), once per shape, and run them many times.
 */
#ifndef RAVEL_BENCH_BASELINES_H
#define RAVEL_BENCH_BASELINES_H

/*
 * Call first thing in main(). It fixes the environment the libraries read
 * when they are loaded, and re-executes the program once if it had to:
 *
 * - OPENBLAS_CORETYPE pins OpenBLAS to one CPU's kernels; this machine's
 *   image sets it to Haswell (AVX2 kernels on an AVX-512 CPU, about half
 *   speed). It is removed unless RAVEL_BENCH_KEEP_CORETYPE=1.
 * - Idle spinning. ravel, OpenMP (oneDNN, the C epilogue) and OpenBLAS each
 *   keep a thread pool, and with 2 threads on 2 cores a pool that spins after
 *   its call steals a core from the next call of the other. libgomp spins
 *   ~16 ms by default here (300k pause loops), OpenBLAS ~134 ms; ravel's pool
 *   spins 50 us. The drivers give every pool the same ~50 us budget:
 *   GOMP_SPINCOUNT=1000 and OPENBLAS_THREAD_TIMEOUT=17, each only if unset.
 *   RAVEL_BENCH_LIBRARY_SPIN=1 keeps the libraries' defaults.
 *
 * Returns only in the final process.
 */
void bl_init(int argc, char **argv);

/* Sets the thread count of OpenBLAS, of OpenMP (oneDNN) and of bl_bias_gelu. */
void bl_set_threads(int n);

/* The OpenBLAS kernel family in use, e.g. "Cooperlake"; the oneDNN version. */
const char *bl_openblas_core(void);
const char *bl_dnnl_version(void);
/* One line for stderr: the kernels, versions and spin settings in force. */
const char *bl_describe(void);

/* OpenBLAS. */
void bl_openblas_dense(int m, int n, int k, const float *x, const float *w, float *y);
void bl_openblas_sgemm(int m, int n, int k, const float *a, const float *b, float *c);
void bl_openblas_batch(int batch, int m, int n, int k, int b_trans, const float *a, const float *b,
                       float *c);

/* The plain-C epilogue: exact gelu after a bias add, in place, over rows. */
void bl_bias_gelu(int m, int n, float *y, const float *bias);
float bl_gelu(float x);

/* oneDNN matmul, created once per shape and pointers, run many times. */
typedef struct {
    int batch; /* 0: 2-D matmul; otherwise 3-D with this leading dimension */
    int m, n, k;
    int b_trans;   /* B is stored [n,k] (NT) rather than [k,n] (NN) */
    int prepack;   /* let oneDNN pick B's layout; B is reordered once at creation */
    int bias_gelu; /* fuse C = gelu(C + bias) as bias + gelu_erf post-op */
} BlDnnlSpec;

typedef struct BlDnnl BlDnnl;

/* Binds a, b, bias (may be NULL unless bias_gelu) and c; exits on failure. */
BlDnnl *bl_dnnl_new(const BlDnnlSpec *s, const float *a, const float *b, const float *bias,
                    float *c);
void bl_dnnl_run(BlDnnl *d);
/* The implementation oneDNN chose, e.g. "brg:avx512_core". */
const char *bl_dnnl_impl(const BlDnnl *d);
void bl_dnnl_free(BlDnnl *d);

#endif
