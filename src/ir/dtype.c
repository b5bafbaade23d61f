/*
 * dtype.c — facts about the scalar types: name, size in bytes, integer or
 * float, the range of an integer type and the DLPack code.
 *
 * They live in src/ir, the lowest layer whose meaning involves dtypes (the
 * enum itself is public, in ravel.h), so that the IR, the interpreter, the
 * lowering, codegen and the runtime all ask one table and no layer below
 * the runtime calls into it. The host array (array.c) sits here for the
 * same reason.
 */
#include "ir/ir.h"

// clang-format off
static const struct { const char *name; size_t size; } dtype_info[RV_DTYPE_COUNT] = {
    [RV_BOOL] = {"bool", 1},
    [RV_I32]  = {"i32",  4},
    [RV_I64]  = {"i64",  8},
    [RV_F32]  = {"f32",  4},
    [RV_F64]  = {"f64",  8},
};
// clang-format on
_Static_assert(RV_DTYPE_COUNT == 5, "dtype_info must list every rv_dtype");

bool ir_dtype_valid(rv_dtype t) {
    return (int)t >= 0 && t < RV_DTYPE_COUNT;
}

const char *rv_dtype_name(rv_dtype t) {
    return ir_dtype_valid(t) ? dtype_info[t].name : "invalid dtype";
}

size_t rv_dtype_size(rv_dtype t) {
    return ir_dtype_valid(t) ? dtype_info[t].size : 0;
}

bool ir_is_int(rv_dtype t) {
    return t == RV_I32 || t == RV_I64;
}

bool ir_is_float(rv_dtype t) {
    return t == RV_F32 || t == RV_F64;
}

DLDataType ir_dtype_to_dl(rv_dtype t) {
    DLDataType dt = {0, 0, 1};
    switch (t) {
    case RV_BOOL:
        dt.code = 6;
        break; /* kDLBool from DLPack 0.8 on */
    case RV_I32:
    case RV_I64:
        dt.code = kDLInt;
        break;
    case RV_F32:
    case RV_F64:
        dt.code = kDLFloat;
        break;
    default:
        RV_UNREACHABLE();
    }
    dt.bits = (uint8_t)(8 * rv_dtype_size(t));
    return dt;
}
