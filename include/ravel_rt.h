/*
 * ravel_rt.h — the C ABI between ravel's runtime and the code it generates.
 *
 * Generated C includes this header and nothing else from ravel, so that a
 * kernel compiled today (JIT) or ahead of time (AOT, shipped as a .so or
 * linked into an application) needs no ravel symbols and no ravel headers
 * beyond this one. It must stay small and stable: any change that alters a
 * type or a signature below bumps RV_RT_ABI_VERSION. It needs only C99
 * <stddef.h> and <stdint.h>, and compiles as C++ too.
 *
 * KERNELS
 * -------
 * A kernel named NAME (the symbol is chosen by the code generator: for a
 * tensor Y it is `kernel_Y`) has the signature
 *
 *     int32_t NAME(const int64_t *sizes, void *const *bufs, struct rv_rt_ctx *ctx);
 *
 * `sizes` holds the kernel's PARAM_SIZE parameters in order, `bufs` its
 * buffer parameters (UF arrays, tensor storage, AUX arrays) in order; the
 * generated file's header comment lists both for each kernel. Every buffer
 * pointer must be 64-byte aligned (RV_RT_ALIGN) and non-NULL, even for an
 * empty buffer: kernels promise the alignment to the C compiler. Element
 * types are the buffer's dtype (f32: float, f64: double, i32: int32_t,
 * i64: int64_t). Tensor storage is flat, in the layout's canonical order
 * with storage padding (docs/ir.md). Kernels return RV_RT_OK; other codes
 * are reserved for checked builds.
 *
 * A kernel whose buffers include AUX arrays (row-start arrays of ragged
 * layouts) also has a prelude
 *
 *     int32_t NAME_prelude(const int64_t *sizes, void *const *bufs);
 *
 * taking the same two arrays. It reads sizes and UF arrays and writes the
 * AUX arrays; it must run before NAME, after the AUX arrays are allocated
 * (their sizes depend on sizes only). Tensor entries of `bufs` may still be
 * NULL when the prelude runs: it does not touch them.
 *
 * CONTEXT
 * -------
 * The host passes everything a kernel needs from it through rv_rt_ctx, as
 * function pointers, so generated objects have no undefined symbols except
 * libc/libm's: a parallel-for (ravel's runtime passes its thread pool's
 * ravel_rt_parallel_for) and a thread-safe scratch allocator for
 * temporaries too large or too dynamic for the stack.
 *
 * RUN-TIME CHECKS
 * ---------------
 * Where the compiler cannot prove a read in range or a divisor non-zero,
 * the kernel checks it: a failing check stores 1 + its site number in
 * ctx->error (the first failure wins; the generated file lists each
 * kernel's sites) and the kernel goes on with a safe value (it never reads
 * out of bounds nor traps). The host sets error to 0 before a run and
 * treats any other value after a kernel as a failed run whose outputs are
 * garbage. A context must therefore not be shared by concurrent runs.
 */
#ifndef RAVEL_RT_H
#define RAVEL_RT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RV_RT_ABI_VERSION 2
#define RV_RT_ALIGN 64 /* bytes: the alignment of every buffer a kernel gets */

/* Kernel return codes. */
#define RV_RT_OK 0
#define RV_RT_ERR_OOM 1    /* reserved: scratch allocation failed */
#define RV_RT_ERR_BOUNDS 2 /* reserved: an index check failed (checked builds) */

/* ---- tensor descriptor: layout-identical to DLPack's DLTensor ----
 * (src/runtime/program.c checks the identity with _Static_assert against
 * <dlpack/dlpack.h>, so an rv_rt_tensor * may be passed where a DLTensor *
 * is expected and back.) */

typedef struct rv_rt_device {
    int32_t device_type; /* DLDeviceType: 1 = CPU, 2 = CUDA, ... */
    int32_t device_id;
} rv_rt_device;

typedef struct rv_rt_dtype {
    uint8_t code; /* DLDataTypeCode: 0 = int, 1 = uint, 2 = float, 6 = bool */
    uint8_t bits;
    uint16_t lanes;
} rv_rt_dtype;

typedef struct rv_rt_tensor {
    void *data;
    rv_rt_device device;
    int32_t ndim;
    rv_rt_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL = compact row-major */
    uint64_t byte_offset;
} rv_rt_tensor;

/* ---- the context ---- */

/* A piece of a parallel loop: iterations [begin, end), run by thread
 * number `tid` (< ctx->num_threads; use it to pick per-thread scratch: no
 * two pieces run at once with one tid). */
typedef void (*rv_rt_task)(void *closure, int64_t begin, int64_t end, int tid);

struct rv_rt_ctx {
    uint32_t abi_version; /* RV_RT_ABI_VERSION of the host that filled it */
    int32_t num_threads;  /* the most chunks parallel_for runs at once */
    /* Runs fn over [0, n) split into contiguous chunks, one per thread
     * (each run as up to 8 pieces, normally all on its own thread; a thread
     * done with its own may take the last unstarted pieces of another:
     * src/runtime/threadpool.h), and returns when all are done. Called from
     * inside a piece, it runs the whole range on the calling thread (no
     * nesting). */
    void (*parallel_for)(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *closure);
    /* Scratch memory, RV_RT_ALIGN-aligned; thread-safe. On failure it
     * returns NULL and the host remembers the failure: generated code then
     * skips the work that needed the memory and the host reports the error
     * after the kernel returns. free(ctx, NULL) does nothing. */
    void *(*alloc)(struct rv_rt_ctx *ctx, size_t bytes);
    void (*free)(struct rv_rt_ctx *ctx, void *p);
    void *host; /* the host's state for the functions above */
    int32_t error; /* 0, or 1 + the site of the first failed check (RUN-TIME CHECKS) */
};

/* LOAD BALANCING. A parallel loop whose iterations differ in work (a ragged
 * loop: row b runs len[b] x len[b] inner iterations) runs as nchunks chunks
 * of equal work instead of equal row counts. prefix[0..n] holds the
 * cumulative work of rows [0, n) (prefix[0] = 0, strictly increasing);
 * chunk c runs rows [rv_rt_work_start(prefix, n, c, nchunks),
 * rv_rt_work_start(prefix, n, c + 1, nchunks)): the first row whose start
 * reaches c/nchunks of the total. Each chunk's work then differs from
 * prefix[n] / nchunks by less than the cost of one row. Generated code
 * calls it inside its chunks; a header function, so no ABI change. */
static inline int64_t rv_rt_work_start(const int64_t *prefix, int64_t n, int64_t c, int64_t nchunks) {
    if (c <= 0)
        return 0;
    if (c >= nchunks)
        return n;
    int64_t total = prefix[n], q = total / nchunks, r = total % nchunks;
    int64_t target = q * c + r * c / nchunks; /* total * c / nchunks without overflow */
    int64_t lo = 0, hi = n;                   /* the least i with prefix[i] >= target */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (prefix[mid] < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef int32_t (*rv_rt_kernel_fn)(const int64_t *sizes, void *const *bufs, struct rv_rt_ctx *ctx);
typedef int32_t (*rv_rt_prelude_fn)(const int64_t *sizes, void *const *bufs);

/* ravel's own parallel-for on its default thread pool (src/runtime). It is
 * what the runtime stores in rv_rt_ctx.parallel_for; generated code calls
 * it only through the context, never by name. */
void ravel_rt_parallel_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
