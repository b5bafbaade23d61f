/*
 * array.c — host arrays: creation and element access.
 *
 * The array is the value of an IR tensor: the interpreter makes and reads
 * arrays, the runtime hands them to kernels and to DLPack and NumPy. It sits
 * in src/ir, below both, so the interpreter does not call into the runtime
 * (dtype facts, dtype.c, moved with it).
 *
 * rv_array_new allocates zeroed data aligned to IR_ARRAY_ALIGN (64 bytes,
 * a cache line and an AVX-512 vector) by over-allocating through the
 * allocation hook and rounding the pointer up. Even an empty array (a zero
 * extent) gets a real, aligned data pointer, so kernels never see NULL.
 *
 * Element access by flat index converts to and from double or int64; it is
 * for the interpreter, tests and I/O, not for hot loops. Conversions follow
 * C casts except where C leaves them undefined: a float converted to an
 * integer truncates toward zero and saturates at the type's limits (NaN
 * gives 0), and an int64 stored into i32 wraps modulo 2^32 (as NumPy's
 * astype does).
 */
#include <string.h>

#include "ir/ir.h"

_Static_assert(RV_ARRAY_ALIGN == IR_ARRAY_ALIGN, "ravel.h states the arrays' alignment");

rv_status ir_array_init(rv_array *a, rv_dtype t, int ndim, const int64_t *shape) {
    memset(a, 0, sizeof *a);
    if (!ir_dtype_valid(t))
        return base_error(RV_ERR_ARG, "array: invalid dtype %d", (int)t);
    if (ndim < 0 || ndim > RV_MAX_DIMS)
        return base_error(RV_ERR_ARG, "array: %d dimensions; between 0 and %d are supported", ndim,
                          RV_MAX_DIMS);
    if (ndim > 0 && !shape)
        return base_error(RV_ERR_ARG, "array: shape is NULL for %d dimensions", ndim);
    int64_t numel = 1;
    bool overflow = false;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return base_error(RV_ERR_ARG, "array: dimension %d has negative extent %lld", d,
                              (long long)shape[d]);
        if (shape[d] && numel > INT64_MAX / shape[d])
            overflow = true; /* unless a later extent is 0 */
        else
            numel *= shape[d];
        a->shape[d] = shape[d];
    }
    if (numel == 0)
        overflow = false;
    size_t esize = rv_dtype_size(t);
    if (overflow || (uint64_t)numel > (SIZE_MAX - IR_ARRAY_ALIGN) / esize)
        return base_error(RV_ERR_ARG, "array: the shape's size overflows");
    a->dtype = t;
    a->ndim = ndim;
    a->numel = numel;
    a->nbytes = (size_t)numel * esize;
    a->dl.device.device_type = kDLCPU;
    a->dl.device.device_id = 0;
    a->dl.ndim = ndim;
    a->dl.dtype = ir_dtype_to_dl(t);
    a->dl.shape = a->shape;
    a->dl.strides = NULL;
    a->dl.byte_offset = 0;
    return RV_OK;
}

/* Returns NULL with a message on a bad description (RV_ERR_ARG) or when
 * memory runs out (RV_ERR_OOM). */
rv_array *rv_array_new(rv_dtype t, int ndim, const int64_t *shape) {
    rv_array *a = ir_array_new_uninit(t, ndim, shape);
    if (a)
        memset(a->dl.data, 0, a->nbytes);
    return a;
}

rv_array *ir_array_new_uninit(rv_dtype t, int ndim, const int64_t *shape) {
    rv_array *a = base_malloc(sizeof *a);
    if (!a) {
        base_error(RV_ERR_OOM, "array: out of memory");
        return NULL;
    }
    if (ir_array_init(a, t, ndim, shape) != RV_OK) {
        base_free(a);
        return NULL;
    }
    a->block = base_malloc(a->nbytes + IR_ARRAY_ALIGN - 1 + (a->nbytes == 0));
    if (!a->block) {
        base_error(RV_ERR_OOM, "array: out of memory allocating %zu bytes", a->nbytes);
        base_free(a);
        return NULL;
    }
    uintptr_t p = ((uintptr_t)a->block + IR_ARRAY_ALIGN - 1) & ~(uintptr_t)(IR_ARRAY_ALIGN - 1);
    a->dl.data = (char *)a->block + (p - (uintptr_t)a->block);
    a->capacity = a->nbytes;
    return a;
}

bool ir_array_reshape_within(rv_array *a, rv_dtype t, int ndim, const int64_t *shape) {
    rv_array h;
    if (!a->block || a->dtype != t || ir_array_init(&h, t, ndim, shape) != RV_OK ||
        h.nbytes > a->capacity)
        return false;
    h.block = a->block;
    h.capacity = a->capacity;
    h.dl.data = a->dl.data;
    *a = h;
    a->dl.shape = a->shape; /* its own, not h's */
    return true;
}

/* The caller keeps the data: block and owner stay NULL, so rv_array_free
 * releases the header only. Alignment is checked here, not in every
 * kernel, because kernels assume it (ravel_rt.h). */
rv_status rv_array_wrap(rv_dtype t, int ndim, const int64_t *shape, void *data, rv_array **out) {
    if (!out)
        return base_error(RV_ERR_ARG, "rv_array_wrap: out is NULL");
    *out = NULL;
    rv_array *a = base_malloc(sizeof *a);
    if (!a)
        return base_error(RV_ERR_OOM, "rv_array_wrap: out of memory");
    rv_status st = ir_array_init(a, t, ndim, shape);
    if (st != RV_OK) {
        base_free(a);
        return base_error(st, "rv_array_wrap: %s", rv_last_error());
    }
    /* nothing is ever read through an empty array's pointer (NumPy's empty
     * slices and many allocators give unaligned or NULL ones) */
    if (a->numel > 0 && !data) {
        base_free(a);
        return base_error(RV_ERR_ARG, "rv_array_wrap: the data pointer is NULL");
    }
    if (a->numel > 0 && (uintptr_t)data % IR_ARRAY_ALIGN != 0) {
        base_free(a);
        return base_error(RV_ERR_ARG,
                          "rv_array_wrap: the data at %p is not %d-byte aligned (copy it into "
                          "an rv_array_new array, or allocate it with aligned_alloc)",
                          data, IR_ARRAY_ALIGN);
    }
    a->dl.data = data;
    *out = a;
    return RV_OK;
}

void rv_array_free(rv_array *a) {
    if (!a)
        return;
    if (a->owner) {
        if (a->owner->deleter)
            a->owner->deleter(a->owner);
    } else {
        base_free(a->block);
    }
    base_free(a);
}

rv_dtype rv_array_dtype(const rv_array *a) {
    return a->dtype;
}

int rv_array_ndim(const rv_array *a) {
    return a->ndim;
}

const int64_t *rv_array_shape(const rv_array *a) {
    return a->shape;
}

int64_t rv_array_numel(const rv_array *a) {
    return a->numel;
}

void *rv_array_data(rv_array *a) {
    return a->dl.data;
}

void rv_array_get_info(const rv_array *a, rv_array_info *out) {
    out->data = a->dl.data;
    out->dtype = a->dtype;
    out->ndim = a->ndim;
    memcpy(out->shape, a->shape, sizeof out->shape);
}

const void *rv_array_cdata(const rv_array *a) {
    return a->dl.data;
}

/* ---- element access ---- */

static int64_t f64_to_i64(double v) {
    if (v != v)
        return 0;
    if (v >= 9223372036854775808.0) /* 2^63 */
        return INT64_MAX;
    if (v < -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

static int32_t f64_to_i32(double v) {
    if (v != v)
        return 0;
    if (v >= 2147483648.0)
        return INT32_MAX;
    if (v <= -2147483649.0)
        return INT32_MIN;
    return (int32_t)v;
}

/* Two's-complement wrap without relying on implementation-defined casts. */
static int32_t i64_to_i32(int64_t v) {
    uint32_t u = (uint32_t)(uint64_t)v;
    int32_t r;
    memcpy(&r, &u, sizeof r);
    return r;
}

static void check_index(const rv_array *a, int64_t i) {
    if (i < 0 || i >= a->numel)
        base_panic(__FILE__, __LINE__, "array index %lld out of range [0, %lld)", (long long)i,
                   (long long)a->numel);
}

double rv_array_get_f64(const rv_array *a, int64_t i) {
    check_index(a, i);
    const void *d = a->dl.data;
    switch (a->dtype) {
    case RV_BOOL:
        return ((const uint8_t *)d)[i] != 0;
    case RV_I32:
        return ((const int32_t *)d)[i];
    case RV_I64:
        return (double)((const int64_t *)d)[i];
    case RV_F32:
        return ((const float *)d)[i];
    case RV_F64:
        return ((const double *)d)[i];
    default:
        RV_UNREACHABLE();
    }
}

int64_t rv_array_get_i64(const rv_array *a, int64_t i) {
    check_index(a, i);
    const void *d = a->dl.data;
    switch (a->dtype) {
    case RV_BOOL:
        return ((const uint8_t *)d)[i] != 0;
    case RV_I32:
        return ((const int32_t *)d)[i];
    case RV_I64:
        return ((const int64_t *)d)[i];
    case RV_F32:
        return f64_to_i64(((const float *)d)[i]);
    case RV_F64:
        return f64_to_i64(((const double *)d)[i]);
    default:
        RV_UNREACHABLE();
    }
}

void rv_array_set_f64(rv_array *a, int64_t i, double v) {
    check_index(a, i);
    void *d = a->dl.data;
    switch (a->dtype) {
    case RV_BOOL:
        ((uint8_t *)d)[i] = v != 0;
        break;
    case RV_I32:
        ((int32_t *)d)[i] = f64_to_i32(v);
        break;
    case RV_I64:
        ((int64_t *)d)[i] = f64_to_i64(v);
        break;
    case RV_F32:
        ((float *)d)[i] = (float)v;
        break;
    case RV_F64:
        ((double *)d)[i] = v;
        break;
    default:
        RV_UNREACHABLE();
    }
}

void rv_array_set_i64(rv_array *a, int64_t i, int64_t v) {
    check_index(a, i);
    void *d = a->dl.data;
    switch (a->dtype) {
    case RV_BOOL:
        ((uint8_t *)d)[i] = v != 0;
        break;
    case RV_I32:
        ((int32_t *)d)[i] = i64_to_i32(v);
        break;
    case RV_I64:
        ((int64_t *)d)[i] = v;
        break;
    case RV_F32:
        ((float *)d)[i] = (float)v;
        break;
    case RV_F64:
        ((double *)d)[i] = (double)v;
        break;
    default:
        RV_UNREACHABLE();
    }
}
