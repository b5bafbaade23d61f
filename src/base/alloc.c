/*
 * alloc.c — the single allocation hook.
 *
 * Every heap allocation in ravel goes through alloc_hook (Lua's l_alloc
 * idea), so that tests can do two things no libc allocator offers: count the
 * bytes currently live (a leak check is "live bytes before == live bytes
 * after"), and make the Nth allocation from now fail (to drive every
 * out-of-memory path without exhausting the machine).
 *
 * To know a block's size on free, each block carries a small header in
 * front of the pointer handed out. The header is ALLOC_HEADER bytes, a
 * multiple of max_align_t's alignment, so user pointers stay as aligned as
 * malloc's. The counters are atomics: the runtime allocates from worker
 * threads too.
 *
 * Error policy: base_malloc/base_calloc/base_realloc return NULL and leave
 * the old block intact (realloc) when they fail; the base_x* variants are
 * for callers that cannot recover and panic with "out of memory".
 */
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* The header holds the user size; its size keeps user pointers aligned. */
#define ALLOC_HEADER (sizeof(max_align_t) > 16 ? sizeof(max_align_t) : 16)
_Static_assert(ALLOC_HEADER % alignof(max_align_t) == 0, "allocation header breaks alignment");

static atomic_size_t live_bytes;
static atomic_long fail_countdown; /* 0: never fail; k: the kth allocation from now fails */

/* Returns true when fault injection says this allocation must fail. */
static bool alloc_should_fail(void) {
    long n = atomic_load(&fail_countdown);
    while (n > 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1))
            return n == 1;
    }
    return false;
}

/* The hook: (NULL, n) allocates, (p, n) resizes, (p, 0 with free=true)
 * frees. Sizes are the user's; the header is added here. Returns NULL on
 * failure, leaving p valid. */
static void *alloc_hook(void *p, size_t n, bool free_it) {
    if (free_it) {
        if (p) {
            char *blk = (char *)p - ALLOC_HEADER;
            size_t old;
            memcpy(&old, blk, sizeof old);
            atomic_fetch_sub(&live_bytes, old);
            free(blk);
        }
        return NULL;
    }
    if (n > SIZE_MAX - ALLOC_HEADER || alloc_should_fail())
        return NULL;
    char *blk = p ? (char *)p - ALLOC_HEADER : NULL;
    size_t old = 0;
    if (blk)
        memcpy(&old, blk, sizeof old);
    char *nb = realloc(blk, n + ALLOC_HEADER);
    if (!nb)
        return NULL;
    memcpy(nb, &n, sizeof n);
    /* one atomic operation, not two (n - old wraps when the block shrinks;
     * unsigned atomics wrap too): compiled runs allocate per call */
    atomic_fetch_add(&live_bytes, n - old);
    return nb + ALLOC_HEADER;
}

void *base_malloc(size_t n) {
    return alloc_hook(NULL, n, false);
}

void *base_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = alloc_hook(NULL, n * size, false);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void *base_realloc(void *p, size_t n) {
    return alloc_hook(p, n, false);
}

void base_free(void *p) {
    alloc_hook(p, 0, true);
}

void rv_free(void *p) {
    base_free(p);
}

void *base_xmalloc(size_t n) {
    void *p = base_malloc(n);
    if (!p)
        base_panic(__FILE__, __LINE__, "out of memory (allocating %zu bytes)", n);
    return p;
}

void *base_xcalloc(size_t n, size_t size) {
    void *p = base_calloc(n, size);
    if (!p)
        base_panic(__FILE__, __LINE__, "out of memory (allocating %zu x %zu bytes)", n, size);
    return p;
}

void *base_xrealloc(void *p, size_t n) {
    void *q = base_realloc(p, n);
    if (!q)
        base_panic(__FILE__, __LINE__, "out of memory (allocating %zu bytes)", n);
    return q;
}

char *base_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(base_xmalloc(n), s, n);
}

size_t base_alloc_live_bytes(void) {
    return atomic_load(&live_bytes);
}

void base_alloc_fail_after(long n) {
    atomic_store(&fail_countdown, n > 0 ? n : 0);
}
