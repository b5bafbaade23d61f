/*
 * arena.c — bump allocation for data that dies all at once.
 *
 * IR nodes, interned strings and other phase-lived data are allocated from
 * an arena and never freed one by one: arena_free drops the whole thing
 * (QBE's per-function pool). An arena is a list of chunks; allocation bumps
 * an offset in the newest chunk and starts a new chunk when it does not
 * fit. Requests larger than a quarter of the default chunk get a chunk of
 * their own, so a big allocation never wastes the rest of the current one.
 *
 * Every allocation is zeroed (IR builders rely on fresh nodes being all
 * zero) and 16-byte aligned (enough for any scalar and for SSE loads).
 * Arenas never return NULL: running out of memory while building IR is not
 * something a caller can handle, so it panics like base_xmalloc.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"

#define ARENA_ALIGN 16
#define ARENA_CHUNK (64 * 1024) /* default chunk payload */

typedef struct Chunk {
    struct Chunk *next;
    size_t cap, used; /* payload bytes */
    /* padded so the payload that follows starts 16-byte aligned */
    _Alignas(ARENA_ALIGN) unsigned char data[];
} Chunk;

struct Arena {
    Chunk *head;  /* the chunk being bumped */
    Chunk *large; /* chunks of single large allocations */
};

Arena *arena_new(void) {
    return base_xcalloc(1, sizeof(Arena));
}

static void free_chunks(Chunk *c) {
    while (c) {
        Chunk *next = c->next;
        base_free(c);
        c = next;
    }
}

void arena_free(Arena *a) {
    if (!a)
        return;
    free_chunks(a->head);
    free_chunks(a->large);
    base_free(a);
}

static Chunk *new_chunk(size_t cap) {
    if (cap > SIZE_MAX - sizeof(Chunk))
        base_panic(__FILE__, __LINE__, "out of memory (arena request of %zu bytes)", cap);
    Chunk *c = base_xmalloc(sizeof(Chunk) + cap);
    c->next = NULL;
    c->cap = cap;
    c->used = 0;
    return c;
}

/* base_xmalloc's blocks are max_align_t aligned, which is at least 16 on
 * the targets ravel supports; the assertion keeps that assumption honest. */
void *arena_alloc(Arena *a, size_t n) {
    if (n > SIZE_MAX - ARENA_ALIGN)
        base_panic(__FILE__, __LINE__, "out of memory (arena request of %zu bytes)", n);
    size_t sz = n ? (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1) : ARENA_ALIGN;
    void *p;
    if (sz > ARENA_CHUNK / 4) {
        Chunk *c = new_chunk(sz);
        c->used = sz;
        c->next = a->large;
        a->large = c;
        p = c->data;
    } else {
        if (!a->head || a->head->cap - a->head->used < sz) {
            Chunk *c = new_chunk(ARENA_CHUNK);
            c->next = a->head;
            a->head = c;
        }
        p = a->head->data + a->head->used;
        a->head->used += sz;
    }
    RV_ASSERT(((uintptr_t)p & (ARENA_ALIGN - 1)) == 0);
    return memset(p, 0, sz);
}

void *arena_memdup(Arena *a, const void *p, size_t n) {
    void *q = arena_alloc(a, n);
    if (n)
        memcpy(q, p, n);
    return q;
}

/* Like strndup: copies at most n bytes, stopping early at a NUL. */
char *arena_strndup(Arena *a, const char *s, size_t n) {
    const char *nul = memchr(s, '\0', n);
    if (nul)
        n = (size_t)(nul - s);
    char *q = arena_alloc(a, n + 1); /* zeroed, so already terminated */
    memcpy(q, s, n);
    return q;
}

char *arena_strdup(Arena *a, const char *s) {
    return arena_strndup(a, s, strlen(s));
}

char *arena_printf(Arena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    RV_ASSERT(n >= 0);
    char *q = arena_alloc(a, (size_t)n + 1);
    vsnprintf(q, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return q;
}
