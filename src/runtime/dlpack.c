/*
 * dlpack.c — exchanging arrays with other frameworks through DLPack.
 *
 * Every rv_array already carries a DLTensor describing itself (src/ir/array.c),
 * so lending an array to a kernel is free. The two managed directions
 * follow the DLPack protocol: the producer hands over a DLManagedTensor and
 * the consumer calls its deleter when done with it.
 *
 * Taking a foreign tensor borrows its memory when the data is aligned the
 * way ravel's kernels assume (IR_ARRAY_ALIGN); otherwise it copies into a
 * fresh array and releases the foreign tensor immediately. ravel arrays are
 * compact row-major CPU arrays, so anything strided or on another device is
 * refused with RV_ERR_ARG rather than silently copied or misread.
 */
#include <string.h>

#include "runtime/runtime.h"

DLTensor *rv_array_as_dltensor(rv_array *a) {
    return &a->dl;
}

/* The rv_dtype of a DLPack dtype; false when ravel has no such dtype. */
static bool dtype_from_dl(DLDataType dt, rv_dtype *t) {
    if (dt.lanes != 1)
        return false;
    for (int i = 0; i < RV_DTYPE_COUNT; i++) {
        DLDataType c = ir_dtype_to_dl((rv_dtype)i);
        if (c.code == dt.code && c.bits == dt.bits) {
            *t = (rv_dtype)i;
            return true;
        }
    }
    return false;
}

/* True when strides (in elements) describe the compact row-major layout.
 * Strides of extent-1 dimensions do not matter, nor do any strides when
 * the tensor has no elements (frameworks disagree on them there). */
static bool is_compact(const DLTensor *t) {
    if (!t->strides)
        return true;
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0)
            return true;
        if (t->shape[d] != 1 && t->strides[d] != expect)
            return false;
        expect *= t->shape[d];
    }
    return true;
}

rv_status rv_array_from_dlpack(DLManagedTensor *mt, rv_array **out) {
    if (!out)
        return base_error(RV_ERR_ARG, "rv_array_from_dlpack: out is NULL");
    *out = NULL;
    if (!mt)
        return base_error(RV_ERR_ARG, "rv_array_from_dlpack: the DLPack tensor is NULL");
    const DLTensor *t = &mt->dl_tensor;
    if (t->device.device_type != kDLCPU)
        return base_error(RV_ERR_ARG,
                          "DLPack tensor is on device type %d; only CPU tensors (kDLCPU) are "
                          "accepted",
                          (int)t->device.device_type);
    rv_dtype dtype;
    if (!dtype_from_dl(t->dtype, &dtype))
        return base_error(RV_ERR_ARG,
                          "DLPack dtype (code %u, %u bits, %u lanes) is not supported; expected "
                          "f32, f64, i32, i64 or bool with one lane",
                          t->dtype.code, t->dtype.bits, t->dtype.lanes);
    if (t->ndim < 0 || t->ndim > RV_MAX_DIMS)
        return base_error(RV_ERR_ARG, "DLPack tensor has %d dimensions; at most %d are supported",
                          t->ndim, RV_MAX_DIMS);
    if (t->ndim > 0 && !t->shape)
        return base_error(RV_ERR_ARG, "DLPack tensor has %d dimensions but no shape", t->ndim);

    rv_array hdr; /* checks the shape; the real header is made below */
    rv_status st = ir_array_init(&hdr, dtype, t->ndim, t->shape);
    if (st != RV_OK)
        return base_error(st, "DLPack tensor: %s", rv_last_error());
    if (!is_compact(t))
        return base_error(RV_ERR_ARG, "DLPack tensor is not contiguous (strided views are not "
                                      "accepted; make a compact row-major copy first)");
    if (!t->data && hdr.numel > 0)
        return base_error(RV_ERR_ARG, "DLPack tensor has %lld elements but no data",
                          (long long)hdr.numel);
    char *data = t->data ? (char *)t->data + t->byte_offset : NULL;
    rv_array *a;
    if (data && (uintptr_t)data % IR_ARRAY_ALIGN == 0) {
        a = base_malloc(sizeof *a);
        if (!a)
            return base_error(RV_ERR_OOM, "rv_array_from_dlpack: out of memory");
        ir_array_init(a, dtype, t->ndim, t->shape);
        a->dl.data = data;
        a->owner = mt;
        *out = a;
        return RV_OK;
    }
    a = rv_array_new(dtype, t->ndim, t->shape);
    if (!a)
        return base_error_status();
    if (a->nbytes)
        memcpy(a->dl.data, data, a->nbytes);
    if (mt->deleter)
        mt->deleter(mt);
    *out = a;
    return RV_OK;
}

/* The deleter of tensors made by rv_array_to_dlpack. */
static void array_deleter(DLManagedTensor *self) {
    rv_array_free(self->manager_ctx);
    base_free(self);
}

DLManagedTensor *rv_array_to_dlpack(rv_array *a) {
    DLManagedTensor *mt = base_malloc(sizeof *mt);
    if (!mt) {
        base_error(RV_ERR_OOM, "rv_array_to_dlpack: out of memory");
        return NULL;
    }
    mt->dl_tensor = a->dl;
    mt->manager_ctx = a;
    mt->deleter = array_deleter;
    return mt;
}
