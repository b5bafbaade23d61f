/*
 * random.c — the reproducible generator behind rv_bindings_randomize.
 *
 * splitmix64 (Steele, Lea, Flood 2014): one 64-bit state, one add and a
 * mixing function per draw; statistically fine for test data and trivial
 * to reproduce in another language. Each named object gets its own stream,
 * seeded from the run's seed and a hash of the name, so the values drawn
 * for X are the same whether or not some other argument was bound by hand.
 */
#include "interp/interp.h"

uint64_t interp_rng_next(Rng *r) {
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

Rng interp_rng_for(uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    Rng r = {seed ^ h};
    interp_rng_next(&r); /* decorrelate nearby seeds */
    return r;
}

int64_t interp_rng_int(Rng *r, int64_t lo, int64_t hi) {
    RV_ASSERT(lo <= hi);
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1; /* 0: the full 64-bit range */
    if (span == 0)
        return (int64_t)interp_rng_next(r);
    /* reject the top partial copy of [0, span) so every value is equally likely */
    uint64_t limit = UINT64_MAX - UINT64_MAX % span;
    uint64_t x;
    do
        x = interp_rng_next(r);
    while (x >= limit);
    return (int64_t)((uint64_t)lo + x % span);
}

double interp_rng_unit(Rng *r) {
    double u = (double)(interp_rng_next(r) >> 11) * 0x1.0p-53; /* [0, 1) */
    return 2.0 * u - 1.0;
}
