/*
 * fuzz_gen.h — random well-typed ravel programs (tests/fuzz_gen.c), for
 * the program fuzzer (tests/fuzz_programs.c).
 */
#ifndef RAVEL_TESTS_FUZZ_GEN_H
#define RAVEL_TESTS_FUZZ_GEN_H

#include <stdint.h>

/* What a generated program may use; a set of these bits is a feature set.
 * Without any, programs are dense f32 elementwise chains over sizes whose
 * ranges start at 1, with + - * and constant-extent sums. */
enum {
    GEN_ZERO = 1 << 0,     /* 0 in size ranges, zero-extent dimensions */
    GEN_DTYPES = 1 << 1,   /* f64, i32, i64 besides f32; `: dtype` casts */
    GEN_PAD = 1 << 2,      /* storage padding (`pad K`) on inputs and computes */
    GEN_INDIRECT = 1 << 3, /* index UFs (ragged domains too): gathers */
    GEN_RAGGED = 1 << 4,   /* length UFs and triangular extents in tensor types */
    GEN_VAREXT = 1 << 5,   /* reductions whose extents use outer axes or UFs */
    GEN_NESTED = 1 << 6,   /* reductions inside reductions, two-axis reductions */
    GEN_MINMAX = 1 << 7,   /* max and min reductions */
    GEN_ARGMAX = 1 << 8,   /* argmax reductions */
    GEN_MATH = 1 << 9,     /* exp log sqrt rsqrt tanh sigmoid erf gelu abs pow, / */
    GEN_INTOPS = 1 << 10,  /* % floordiv floormod min max, modular indices */
    GEN_SELECT = 1 << 11,  /* select(c, a, b) and comparisons */
    GEN_COND = 1 << 12,    /* `if P then A else B` bodies, guarded reads */
    GEN_SCHED = 1 << 13,   /* random schedules (fuzz_sched.c's step generator) */
    GEN_UFRAGGED = 1 << 14, /* index UFs with ragged domains (with indirect, ragged) */
    GEN_PADRAGGED = 1 << 15, /* `pad` on the dimensions of ragged tensors (with pad, ragged) */
    GEN_RECURSE = 1 << 16,   /* recursion groups over sequences, trees and DAGs (3 programs in 10) */
    /* `param` weights (packs kept across runs, docs/schedules.md "Packs of
     * params"): 3 programs in 10 are products of ragged or dense rows with
     * param weights (the encoder's and the models' products: rows of
     * len[b] tokens, lengths that grow with b so that a block loop runs no
     * iteration at b = 0 and some later; tied weights; chained products),
     * and a recursion group's weights are params half the time. With
     * sched, the step generator draws the packed-product recipe on them
     * (fuzz_common.c gen_pack_recipe). */
    GEN_PACK = 1 << 17,
    GEN_FEATURE_COUNT = 18
};

/* The feature names, parallel to the bits ("zero", "dtypes", ...). */
extern const char *const fuzz_gen_feature_names[GEN_FEATURE_COUNT];

/* Parses "all", "none" or a comma list of names, each optionally prefixed
 * by '-' to remove it ("all,-pad,-ragged"). Returns 0 and sets *out, or -1
 * naming the bad word on stderr. */
int fuzz_gen_parse_features(const char *list, unsigned *out);

/* The program for `seed` as .rv text (malloc'd; no schedule blocks):
 * deterministic in (seed, features). Every program is well typed, every
 * index provably in range for all sizes in the declared ranges, and every
 * value well conditioned (log of values bounded away from 0, division by
 * values bounded away from 0, exp of bounded arguments, integers far from
 * overflow), so any difference from the interpreter is a bug. */
char *fuzz_gen_program(uint64_t seed, unsigned features);

#endif
