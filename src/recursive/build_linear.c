/*
 * build_linear.c — rv_structs_build_linear: a server's batch from its
 * request's arrays to the arrays a recursive kernel reads (clear the
 * batch, add the structures as rv_structs_add_many, linearize) in one
 * call of the library.
 *
 * It is those three calls, nothing more: a caller in C gains nothing from
 * it. A binding through a foreign-function interface (the Python
 * package's ctypes) pays per call of the library, and per argument it
 * converts, about a microsecond (issue 13), so a batch's three calls with
 * their arguments checked and converted each time are one.
 */
#include "recursive/recursive.h"

rv_status rv_structs_build_linear(rv_structs *bs, int count, const int32_t *sizes,
                                  const int32_t *child_begin, int64_t num_begin,
                                  const int32_t *child, int64_t num_child, const int32_t *data,
                                  int64_t num_data, rv_linear *out) {
    if (!bs || !out)
        return base_error(RV_ERR_ARG, "%s: no batch or no rv_linear (NULL)", __func__);
    rv_structs_clear(bs);
    rv_status st = rv_structs_add_many(bs, count, sizes, child_begin, num_begin, child, num_child,
                                       data, num_data);
    return st == RV_OK ? rv_linearize(bs, out) : st;
}
