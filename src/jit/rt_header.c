/*
 * rt_header.c — ravel_rt.h, embedded in the library.
 *
 * Generated C includes ravel_rt.h, so the C compiler the JIT runs must find
 * it; an installed or moved library has no source tree to point it at, and
 * the header must be the one the code generator was built with. The
 * Makefile turns include/ravel_rt.h into the byte list included below
 * ($(BUILD)/gen/ravel_rt_h.inc, with od and sed: no xxd needed), and jit.c
 * writes these bytes into the cache directory when it compiles.
 */
#include "jit/jit.h"

static const unsigned char rt_header[] = {
#include "ravel_rt_h.inc"
};

const char *jit_rt_header(size_t *len) {
    *len = sizeof rt_header;
    return (const char *)rt_header;
}
