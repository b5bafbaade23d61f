/*
 * runtime.h — the map of src/runtime: host arrays, DLPack interchange and
 * NumPy files (more of the runtime joins this header as it is written).
 *
 * An rv_array is the host-side tensor every layer hands around: dtype,
 * shape and contiguous row-major data, 64-byte aligned so generated SIMD
 * code may use aligned loads. It carries a DLTensor describing itself
 * (data, CPU device, dtype, ndim, shape pointing at the array's own shape,
 * strides NULL = compact row-major), so a kernel or a foreign framework can
 * take the array as a DLTensor without building one.
 *
 * Ownership: an array owns its data (block) unless it was made from a
 * DLManagedTensor without copying; then it holds the managed tensor and
 * calls its deleter when freed. Shapes and dtypes never change after
 * creation, so the fields below may be read directly within src/.
 */
#ifndef RAVEL_RUNTIME_H
#define RAVEL_RUNTIME_H

#include <dlpack/dlpack.h>

#include "base/base.h"

#define RT_ARRAY_ALIGN 64 /* bytes; the alignment of every array's data */

/* ---- array.c ---- */

struct rv_array {
    DLTensor dl; /* the DLPack view; dl.data is the data */
    rv_dtype dtype;
    int ndim;
    int64_t shape[RV_MAX_DIMS]; /* dl.shape points here */
    int64_t numel;              /* product of shape (1 for ndim 0) */
    size_t nbytes;              /* numel * rv_dtype_size(dtype) */
    void *block;                /* owned allocation holding the data, or NULL */
    DLManagedTensor *owner;     /* borrowed from DLPack: deleted on free, or NULL */
};

/* The DLPack dtype of an rv_dtype (bool: code 6, 8 bits, as DLPack >= 0.8's
 * kDLBool). */
DLDataType rt_dtype_to_dl(rv_dtype t);
/* Fills an array header for ndim/shape without allocating data: checks
 * the dtype, rank and extents and computes numel and nbytes. RV_ERR_ARG
 * (with a message) on a bad description, including a size overflow. */
rv_status rt_array_init(rv_array *a, rv_dtype t, int ndim, const int64_t *shape);

/* ---- scratch.c ---- */

/* At least n bytes (one when n is 0), RV_RT_ALIGN-aligned and zeroed; NULL
 * when out of memory. Freed with rt_aligned_free. */
void *rt_aligned_zalloc(size_t n);
void rt_aligned_free(void *p);
/* The same, for rv_rt_ctx.alloc: blocks freed with rt_scratch_free are
 * kept in a small per-thread cache and reused by later requests they fit.
 * Thread-safe. */
void *rt_scratch_alloc(size_t n);
void rt_scratch_free(void *p);

/* ---- dlpack.c ---- */

/* The array as a DLTensor (borrowed: valid while the array lives). */
DLTensor *rv_array_as_dltensor(rv_array *a);
/* Takes a DLPack tensor from another framework. CPU, compact row-major
 * (strides NULL or equal to the compact strides), f32/f64/i32/i64/bool,
 * one lane, at most RV_MAX_DIMS dimensions; anything else is RV_ERR_ARG.
 * On success the array owns `mt`: data aligned to RT_ARRAY_ALIGN is
 * borrowed and mt's deleter runs when the array is freed; other data is
 * copied and the deleter runs at once. On failure the caller keeps `mt`. */
rv_status rv_array_from_dlpack(DLManagedTensor *mt, rv_array **out);
/* Hands the array over as a DLManagedTensor: the array now belongs to it,
 * and its deleter frees both. NULL (RV_ERR_OOM) if the wrapper cannot be
 * allocated, in which case the caller still owns `a`. */
DLManagedTensor *rv_array_to_dlpack(rv_array *a);

/* ---- npy.c ---- */
/* rv_npy_load and rv_npy_save are public (ravel.h). */

#endif
