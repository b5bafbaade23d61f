/*
 * hash.c — 64-bit hashing for maps, hash-consing and cache keys.
 *
 * The JIT's on-disk cache names files by hash_hex of a hash of the
 * generated source, so the value of a hash must not depend on the machine:
 * words are loaded little-endian explicitly, never by casting pointers.
 *
 * The scheme is a plain multiply-rotate over 8-byte words (in the spirit of
 * xxHash/wyhash, kept simple) with a strong avalanche at the end: the
 * finalizer is the one from SplitMix64, which makes every input bit affect
 * every output bit, so the low bits maps use as a bucket index are good.
 */
#include <string.h>

#include "base/base.h"

#define K1 0x9e3779b97f4a7c15ull /* 2^64 / golden ratio */
#define K2 0xc2b2ae3d27d4eb4full
#define K3 0x165667b19e3779f9ull

static uint64_t rotl(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}

/* SplitMix64's finalizer: a bijection with full avalanche. */
static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint64_t hash_load_le(const unsigned char *p, size_t n) {
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
}

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed) {
    const unsigned char *s = p;
    uint64_t h = seed ^ K3 ^ ((uint64_t)n * K1);
    while (n >= 8) {
        h = rotl(h ^ (hash_load_le(s, 8) * K2), 31) * K1;
        s += 8;
        n -= 8;
    }
    if (n)
        h = rotl(h ^ (hash_load_le(s, n) * K2), 31) * K1;
    return mix(h);
}

uint64_t hash_str(const char *s) {
    return hash_bytes(s, strlen(s), 0);
}

/* Order matters: combine(combine(h, a), b) != combine(combine(h, b), a). */
uint64_t hash_combine(uint64_t h, uint64_t v) {
    return mix(rotl(h, 23) * K1 ^ v);
}

void hash_hex(uint64_t h, char out[17]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        out[i] = digits[h & 15];
        h >>= 4;
    }
    out[16] = '\0';
}
