/*
 * bench/ravel_kernels.c — placeholder: ravel has no compiled kernels yet, so
 * every request answers NULL and the drivers report ravel as null.
 *
 * When ravel can compile these workloads, this file builds them through the
 * public API (include/ravel.h) — once per shape and thread count — and wraps
 * each in a RavelKernel. Never substitute a baseline here: a null is honest,
 * a baseline dressed as ravel is not.
 */
#include "ravel_kernels.h"

#include <stdlib.h>

RavelKernel *ravel_kernel_for(const RavelKernelShape *shape) {
    (void)shape;
    return NULL;
}

void ravel_kernel_free(RavelKernel *k) {
    if (!k)
        return;
    if (k->free)
        k->free(k->state);
    free(k);
}
