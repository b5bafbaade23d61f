/*
 * scratch.c — aligned, zeroed memory for tensors and for the scratch
 * allocator of rv_rt_ctx (runtime.h).
 *
 * Generated code allocates a stage's local buffer through ctx->alloc when
 * its size is not a small constant: the partial tile of a symbolic
 * dimension (M % 6 rows of a 6-row register tile), a transposed panel of
 * M rows. Such an allocation sits inside the loops around the stage (once
 * per batch element and column panel in a batched GEMM), so a malloc/free
 * pair per call would dominate small problems. Freed scratch blocks are
 * therefore kept in a small per-thread cache and handed out again to a
 * request they fit: the steady state of a kernel costs a memset (the
 * runtime promises zeroed scratch), not a trip through malloc. The cache
 * holds at most SCRATCH_CACHED blocks of at most SCRATCH_CACHE_MAX bytes
 * per thread and is freed when the thread exits. The host plan's own
 * zeroed buffers of a run (AUX arrays, pack flags, padded storage:
 * program.c) come from the same cache, so a call after call allocates
 * none of them either.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "ravel_rt.h"
#include "runtime/runtime.h"

#define SCRATCH_CACHED 8
#define SCRATCH_CACHE_MAX ((size_t)4 << 20)

/* Before each block's user pointer: where the malloc'd block starts and
 * how many user bytes it has room for. */
typedef struct Header {
    void *block;
    size_t cap;
} Header;

static Header *header_of(void *p) {
    return (Header *)((char *)p - sizeof(Header));
}

void *rt_aligned_zalloc(size_t n) {
    size_t bytes = n ? n : 1;
    if (bytes > SIZE_MAX - 2 * RV_RT_ALIGN - sizeof(Header))
        return NULL;
    char *block = base_malloc(bytes + RV_RT_ALIGN + sizeof(Header));
    if (!block)
        return NULL;
    uintptr_t p =
        ((uintptr_t)block + sizeof(Header) + RV_RT_ALIGN - 1) & ~(uintptr_t)(RV_RT_ALIGN - 1);
    char *user = block + (p - (uintptr_t)block);
    *header_of(user) = (Header){block, bytes};
    memset(user, 0, bytes);
    return user;
}

void rt_aligned_free(void *p) {
    if (p)
        base_free(header_of(p)->block);
}

/* ---- the per-thread cache of freed scratch blocks ---- */

typedef struct Cache {
    int n;
    void *blocks[SCRATCH_CACHED];
} Cache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static bool cache_ok;

static void cache_destroy(void *arg) {
    Cache *c = arg;
    for (int i = 0; i < c->n; i++)
        rt_aligned_free(c->blocks[i]);
    base_free(c);
}

static void cache_init(void) {
    cache_ok = pthread_key_create(&cache_key, cache_destroy) == 0;
}

/* This thread's cache, made on first use; NULL if it cannot be. */
static Cache *cache_get(void) {
    pthread_once(&cache_once, cache_init);
    if (!cache_ok)
        return NULL;
    Cache *c = pthread_getspecific(cache_key);
    if (!c && (c = base_malloc(sizeof *c)) != NULL) {
        c->n = 0;
        if (pthread_setspecific(cache_key, c) != 0) {
            base_free(c);
            c = NULL;
        }
    }
    return c;
}

void *rt_scratch_alloc(size_t n) {
    Cache *c = cache_get();
    if (c) {
        int best = -1; /* the smallest cached block that fits */
        for (int i = 0; i < c->n; i++) {
            size_t cap = header_of(c->blocks[i])->cap;
            if (cap >= n && (best < 0 || cap < header_of(c->blocks[best])->cap))
                best = i;
        }
        if (best >= 0) {
            void *p = c->blocks[best];
            c->blocks[best] = c->blocks[--c->n];
            memset(p, 0, n);
            return p;
        }
    }
    return rt_aligned_zalloc(n);
}

void rt_scratch_free(void *p) {
    if (!p)
        return;
    Cache *c = header_of(p)->cap <= SCRATCH_CACHE_MAX ? cache_get() : NULL;
    if (c && c->n < SCRATCH_CACHED)
        c->blocks[c->n++] = p;
    else
        rt_aligned_free(p);
}
