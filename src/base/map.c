/*
 * map.c — open-addressing hash maps keyed by strings or pointers.
 *
 * Linear probing in a power-of-two table, grown (doubled and rehashed) when
 * it would become more than 70% full, so probe sequences stay short. A NULL
 * key marks an empty slot, so NULL itself cannot be a key; values may be
 * anything, NULL included (strmap_has tells "absent" from "NULL").
 *
 * There is no deletion: ravel's maps live as long as the module or phase
 * that fills them (symbol tables, hash-consing tables, memo tables), and
 * without deletion no tombstones are needed.
 *
 * A StrMap stores the key pointers it is given and copies nothing, so keys
 * must outlive the map (interned or arena strings).
 */
#include <string.h>

#include "base/base.h"

#define MAP_INIT_CAP 16

static bool over_load(int len, int cap) {
    return (int64_t)(len + 1) * 10 > (int64_t)cap * 7;
}

static uint64_t hash_ptr(const void *p) {
    return hash_combine(0, (uint64_t)(uintptr_t)p);
}

/* ---- StrMap ---- */

/* The slot of `key` (length n, not necessarily NUL-terminated at n), or of
 * the empty slot where it would go. The table must have a free slot. */
static int str_slot(const StrMap *m, const char *key, size_t n, uint64_t h) {
    unsigned mask = (unsigned)m->cap - 1;
    for (unsigned i = (unsigned)h & mask;; i = (i + 1) & mask) {
        const char *k = m->keys[i];
        if (!k || (strncmp(k, key, n) == 0 && k[n] == '\0'))
            return (int)i;
    }
}

static void strmap_grow(StrMap *m) {
    StrMap old = *m;
    m->cap = old.cap ? old.cap * 2 : MAP_INIT_CAP;
    RV_ASSERT(m->cap > 0);
    m->keys = base_xcalloc((size_t)m->cap, sizeof(*m->keys));
    m->vals = base_xcalloc((size_t)m->cap, sizeof(*m->vals));
    for (int i = 0; i < old.cap; i++) {
        if (!old.keys[i])
            continue;
        size_t n = strlen(old.keys[i]);
        int j = str_slot(m, old.keys[i], n, hash_bytes(old.keys[i], n, 0));
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
    }
    base_free(old.keys);
    base_free(old.vals);
}

/* The stored key equal to the first n bytes of `key` (cut at a NUL), or
 * NULL: lookup by a slice of a larger text, without copying it. */
const char *strmap_key_n(const StrMap *m, const char *key, size_t n) {
    const char *nul = memchr(key, '\0', n);
    if (nul)
        n = (size_t)(nul - key);
    if (!m->len)
        return NULL;
    return m->keys[str_slot(m, key, n, hash_bytes(key, n, 0))];
}

void *strmap_get(const StrMap *m, const char *key) {
    RV_ASSERT(key);
    if (!m->len)
        return NULL;
    size_t n = strlen(key);
    return m->vals[str_slot(m, key, n, hash_bytes(key, n, 0))];
}

bool strmap_has(const StrMap *m, const char *key) {
    RV_ASSERT(key);
    if (!m->len)
        return false;
    size_t n = strlen(key);
    return m->keys[str_slot(m, key, n, hash_bytes(key, n, 0))] != NULL;
}

/* Inserts or replaces; a replaced entry keeps its original key pointer. */
void strmap_put(StrMap *m, const char *key, void *val) {
    RV_ASSERT(key);
    if (over_load(m->len, m->cap))
        strmap_grow(m);
    size_t n = strlen(key);
    int i = str_slot(m, key, n, hash_bytes(key, n, 0));
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->len++;
    }
    m->vals[i] = val;
}

void strmap_free(StrMap *m) {
    base_free(m->keys);
    base_free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- PtrMap ---- */

static int ptr_slot(const PtrMap *m, const void *key) {
    unsigned mask = (unsigned)m->cap - 1;
    for (unsigned i = (unsigned)hash_ptr(key) & mask;; i = (i + 1) & mask) {
        if (!m->keys[i] || m->keys[i] == key)
            return (int)i;
    }
}

static void ptrmap_grow(PtrMap *m) {
    PtrMap old = *m;
    m->cap = old.cap ? old.cap * 2 : MAP_INIT_CAP;
    RV_ASSERT(m->cap > 0);
    m->keys = base_xcalloc((size_t)m->cap, sizeof(*m->keys));
    m->vals = base_xcalloc((size_t)m->cap, sizeof(*m->vals));
    for (int i = 0; i < old.cap; i++) {
        if (!old.keys[i])
            continue;
        int j = ptr_slot(m, old.keys[i]);
        m->keys[j] = old.keys[i];
        m->vals[j] = old.vals[i];
    }
    base_free(old.keys);
    base_free(old.vals);
}

void *ptrmap_get(const PtrMap *m, const void *key) {
    RV_ASSERT(key);
    if (!m->len)
        return NULL;
    return m->vals[ptr_slot(m, key)];
}

bool ptrmap_has(const PtrMap *m, const void *key) {
    RV_ASSERT(key);
    return m->len && m->keys[ptr_slot(m, key)] != NULL;
}

void ptrmap_put(PtrMap *m, const void *key, void *val) {
    RV_ASSERT(key);
    if (over_load(m->len, m->cap))
        ptrmap_grow(m);
    int i = ptr_slot(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->len++;
    }
    m->vals[i] = val;
}

void ptrmap_free(PtrMap *m) {
    base_free(m->keys);
    base_free(m->vals);
    memset(m, 0, sizeof *m);
}
