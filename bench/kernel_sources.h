/*
 * bench/kernel_sources.h — the .rv programs of ravel's benchmark kernels.
 *
 * Each program is the workload's definition plus the schedule ravel runs
 * it with, as text: the row count M is symbolic (`size M in 1..RK_MAX_M`); N,
 * K and the batch are literal numbers. bench/ravel_kernels.c compiles and
 * times these programs; tests/unit/test_kernels.c checks the same text
 * against the reference interpreter at small sizes, so what is timed is
 * what is tested. bench/programs/ holds one program per variant at one of
 * the benchmark's shapes (rk_programs), written from this text with a
 * header comment (`make bench-programs`); test_kernels checks that the
 * files are what rk_program_text gives.
 *
 * Dense kinds have three schedules, picked by M and K (the rule per T
 * until the auto-scheduler replaces it, measured on this machine's 2 MiB
 * L2):
 *   - "stream" (vectors along the rows of X, a 16x24 tile of Yᵀ in
 *     registers, 16x8 when W's rows are a multiple of 4 KiB apart) while
 *     X's k-major copy, which every panel of W re-reads, stays within
 *     RK_STREAM_MAX_XL floats (K = 768: T <= 5), and for any K up to
 *     RK_STREAM_MIN_M rows (T <= 3), where kblock's packing of all of W
 *     costs more than the products;
 *   - "kblock" (per 64-column panel and block of RK_KBLOCK_K values of k,
 *     the block of W's panel packed k-major, a 6x64 tile accumulated in
 *     place, kept in registers by the lowering's promote pass) up to
 *     RK_KBLOCK_MAX_M rows, RK_KBLOCK_DEEP_MAX_M when K > RK_DEEP_K;
 *   - "packed" (W packed k-major per 64-column panel, all of k per 6x64
 *     register tile) above: at small M its 64 x K panel (768 KiB at
 *     K = 3072) is streamed from L2 once per tile for few tiles; at large
 *     M kblock's M x RK_KBLOCK_K block of X leaves L2.
 * bmm
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
#include <stdint.h>

#include "ravel_kernels.h"

enum { RK_VARIANT_STREAM, RK_VARIANT_PACKED, RK_VARIANT_KBLOCK }; /* dense */
enum { RK_VARIANT_DOT, RK_VARIANT_BCAST };                        /* bmm NT */
enum { RK_VARIANT_6ROWS, RK_VARIANT_4ROWS };                      /* bmm NN */
#define RK_STREAM_MAX_M 208
#define RK_STREAM_MAX_XL (64 * 1024) /* floats of X's copy: 256 KiB */
#define RK_STREAM_MIN_M 48
#define RK_KBLOCK_K 256
#define RK_KBLOCK_MAX_M 208
#define RK_KBLOCK_DEEP_MAX_M 384
#define RK_DEEP_K 1024
#define RK_MAX_M 4096 /* the programs declare `size M in 1..RK_MAX_M` */
#define RK_DOT_MAX_N 15

/* How many schedules `kind` has (dense 3, SGEMM 1, bmm 2). */
int rk_variant_count(RavelKernelKind kind);
/* The benchmark's rule: the schedule for M rows, N columns and depth K
 * (what a tuner's decision tree will give). ravel_kernels.c does not call
 * it per run: the compiled program does, through rk_dispatch. */
int rk_variant_rule(RavelKernelKind kind, int m, int n, int k);

/* A program's dispatch among the variants of one shape (the user pointer
 * of its rv_dispatch): the rule's kind, N and K, and where each schedule
 * variant is among the program's variants (-1: not compiled, no M picks
 * it). */
typedef struct RkDispatch {
    RavelKernelKind kind;
    int n, k;
    int program_variant[3];
} RkDispatch;
/* rv_dispatch_fn: the program's variant for M = sizes[0] rows (the
 * programs' one size), by rk_variant_rule. */
int rk_dispatch(const int64_t *sizes, void *dispatch);
/* "stream", "packed", "kblock", ..., or the single schedule's name
 * ("bcast6x64"). */
const char *rk_variant_name(RavelKernelKind kind, int variant);
/* Writes the program into buf (NUL-terminated). false when the kind or
 * variant is unknown or the text does not fit in cap bytes. */
bool rk_source(RavelKernelKind kind, int batch, int n, int k, int variant, char *buf, size_t cap);

/* A file of bench/programs/: one variant's program at one of the
 * benchmark's shapes, for reading (and `ravel run`): the tile widths and
 * paddings of some variants follow N and K, so a variant is a family of
 * programs and the file is the member at that shape. */
typedef struct RkProgram {
    const char *file; /* the name in bench/programs/ */
    RavelKernelKind kind;
    int batch, n, k, variant;
    const char *doc; /* what the schedule does, for the header comment */
} RkProgram;

extern const RkProgram rk_programs[];
extern const int rk_nprograms;

/* The text of bench/programs/p->file: a header comment (the file's
 * origin, shape and p->doc), then rk_source's program. false as for
 * rk_source. */
bool rk_program_text(const RkProgram *p, char *buf, size_t cap);

#endif
