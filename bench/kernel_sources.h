/*
 * bench/kernel_sources.h — the .rv programs of ravel's benchmark kernels.
 *
 * Each program is the workload's definition plus the schedule ravel runs
 * it with, as text: the row count M is symbolic (`size M in 1..RK_MAX_M`); N,
 * K and the batch are literal numbers. bench/ravel_kernels.c compiles and
 * times these programs; tests/unit/test_kernels.c checks the same text
 * against the reference interpreter at small sizes, so what is timed is
 * what is tested.
 *
 * Dense kinds have two schedules, picked by M (the rule per T until the
 * auto-scheduler replaces it): "stream" (vectors along the rows of X, a
 * 16x24 tile of Yᵀ in registers) for M <= RK_STREAM_MAX_M, "packed" (W
 * packed k-major per 64-column panel, a 6x64 register tile) above. bmm
 * NT has two, picked by N: "dot" (each output a vector dot product over
 * k, no copies) for N <= RK_DOT_MAX_N, where the broadcast kernel's copy
 * of W's panel costs more than the products, "bcast6x64_wt" above. bmm
 * NN has two, picked by M: "bcast6x64" and "bcast4x64" (a 4-row tile),
 * whichever pads fewer rows (M = 8: 8 rows, not 12). SGEMM has one.
 */
#ifndef RAVEL_BENCH_KERNEL_SOURCES_H
#define RAVEL_BENCH_KERNEL_SOURCES_H

#include <stdbool.h>
#include <stddef.h>

#include "ravel_kernels.h"

enum { RK_VARIANT_STREAM, RK_VARIANT_PACKED };            /* dense */
enum { RK_VARIANT_DOT, RK_VARIANT_BCAST };                /* bmm NT */
enum { RK_VARIANT_6ROWS, RK_VARIANT_4ROWS };              /* bmm NN */
#define RK_STREAM_MAX_M 208
#define RK_MAX_M 4096 /* the programs declare `size M in 1..RK_MAX_M` */
#define RK_DOT_MAX_N 15

/* How many schedules `kind` has (2, SGEMM 1). */
int rk_variant_count(RavelKernelKind kind);
/* The schedule the benchmark runs for M rows and N columns. */
int rk_variant_for(RavelKernelKind kind, int m, int n);
/* "stream", "packed", or the single schedule's name ("bcast6x64"). */
const char *rk_variant_name(RavelKernelKind kind, int variant);
/* Writes the program into buf (NUL-terminated). false when the kind or
 * variant is unknown or the text does not fit in cap bytes. */
bool rk_source(RavelKernelKind kind, int batch, int n, int k, int variant, char *buf, size_t cap);

#endif
