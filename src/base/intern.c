/*
 * intern.c — one canonical copy of each string.
 *
 * Names in the IR (tensors, axes, dimensions, sizes) are interned, so two
 * names are equal exactly when their pointers are, and they can be StrMap
 * and PtrMap keys without copying. The copies live in the interner's arena;
 * the map sends each string to its copy.
 */
#include <string.h>

#include "base/base.h"

void interner_init(Interner *in) {
    in->arena = arena_new();
    memset(&in->map, 0, sizeof in->map);
}

void interner_free(Interner *in) {
    arena_free(in->arena);
    strmap_free(&in->map);
    in->arena = NULL;
}

/* The first n bytes of s (fewer if s has a NUL before n), interned. */
const char *intern_n(Interner *in, const char *s, size_t n) {
    const char *nul = memchr(s, '\0', n);
    if (nul)
        n = (size_t)(nul - s);
    const char *k = strmap_key_n(&in->map, s, n);
    if (k)
        return k;
    char *copy = arena_strndup(in->arena, s, n);
    strmap_put(&in->map, copy, copy);
    return copy;
}

const char *intern(Interner *in, const char *s) {
    return intern_n(in, s, strlen(s));
}
