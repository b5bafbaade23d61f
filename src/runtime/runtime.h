/*
 * runtime.h — the map of src/runtime: scratch memory, DLPack interchange
 * and NumPy files (more of the runtime joins this header as it is written).
 * The host array (rv_array) and the dtype facts are in src/ir (ir.h),
 * below the interpreter, which makes arrays too.
 */
#ifndef RAVEL_RUNTIME_H
#define RAVEL_RUNTIME_H

#include <dlpack/dlpack.h>

#include <stdio.h>

#include "ir/ir.h"

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
 * On success the array owns `mt`: data aligned to IR_ARRAY_ALIGN is
 * borrowed and mt's deleter runs when the array is freed; other data is
 * copied and the deleter runs at once. On failure the caller keeps `mt`. */
rv_status rv_array_from_dlpack(DLManagedTensor *mt, rv_array **out);
/* Hands the array over as a DLManagedTensor: the array now belongs to it,
 * and its deleter frees both. NULL (RV_ERR_OOM) if the wrapper cannot be
 * allocated, in which case the caller still owns `a`. */
DLManagedTensor *rv_array_to_dlpack(rv_array *a);

/* ---- npy.c ---- */
/* rv_npy_load and rv_npy_save are public (ravel.h). */

/* Reads and checks a .npy preamble and header from f's position, where
 * `size` bytes of the file (or archive member) begin: fills hdr (dtype,
 * shape, nbytes; no data) and the data's offset from that position, having
 * checked that at least hdr->nbytes bytes follow. Errors name `path`. */
rv_status rt_npy_read_header(FILE *f, const char *path, int64_t size, rv_array *hdr,
                             int64_t *data_off);

/* ---- weights.c, safetensors.c: weights files ---- */

/* How a tensor's elements are read: as they are, or widened to f32. */
typedef enum WeightWiden { WIDEN_NONE, WIDEN_F16, WIDEN_BF16 } WeightWiden;

/* One tensor of a weights file: where its raw little-endian data lies.
 * A dtype the library cannot hold is kept (dtype RV_DTYPE_COUNT, the
 * file's name for it in `dtype_name`) so that only loading it fails. */
typedef struct WeightEntry {
    char *name;
    char dtype_name[16];
    rv_dtype dtype;
    int ndim;
    int64_t shape[RV_MAX_DIMS];
    WeightWiden widen; /* dtype is then RV_F32, the file's elements 2 bytes */
    int64_t offset;    /* from the start of the file */
    int64_t nbytes;    /* in the file */
    /* an .npz member: its bytes (the .npy file) and their CRC-32 */
    int64_t member, member_len; /* member_len 0: not a member */
    uint32_t crc;
} WeightEntry;

struct rv_weights {
    char *path;
    FILE *f;
    int64_t size;             /* the file's */
    Vec(WeightEntry) entries; /* sorted by name once indexed */
};

/* Fill w->entries from the safetensors file w->f, checking the header,
 * every tensor's dtype, shape and data range, and that the ranges tile
 * the data exactly. */
rv_status rt_safetensors_index(rv_weights *w);
/* The same for an .npz archive (a zip of .npy files; stored members only):
 * checks the zip's directories and each member's .npy header. */
rv_status rt_npz_index(rv_weights *w);
/* The CRC-32 of zip (ISO 3309) of n bytes, continuing from crc (0 first). */
uint32_t rt_crc32(uint32_t crc, const void *p, size_t n);

/* ---- numbering.c ---- */

/* The plan's CHECK_STRUCT: group g's structure, as bound (sizes by size
 * id, UF values by ufun id in domain order), numbers every child above
 * its parent and, with `batches`, its dynamic batches consecutive from
 * the top, batch 0 exactly the leaves, every child in an earlier batch.
 * RV_ERR_ARG naming the structure and the node otherwise. */
rv_status rt_check_numbering(const Recurse *g, const int64_t *sizes, int64_t *const *ufv,
                             bool batches);
/* The plan's CHECK_STRUCT for a kernel of unroll_recursion() (after
 * rt_check_numbering with batches): the unrolled partition runs every
 * internal node once, each after what it reads (src/lower/unroll.c). */
rv_status rt_check_unroll(const Recurse *g, const int64_t *sizes, int64_t *const *ufv);

#endif
