/*
 * bench/timing.h — the one timing method every ravel benchmark uses.
 *
 * A benchmark configuration compares ravel with one or more baselines. Each
 * is a "side": a closure (function plus context). bench_sides() warms every
 * side up, gives each its own run count, then runs them interleaved in one
 * measurement window, timing every call on its own with
 * clock_gettime(CLOCK_MONOTONIC). Interleaving means a burst of noise from
 * the other engineers' compiles on this shared machine hits all sides alike;
 * medians make single hiccups irrelevant, and min/max show how noisy it was.
 *
 * Interleaving is proportional: the next call goes to the side that has done
 * the smallest fraction of its runs, so a side's samples are spread evenly
 * over the whole window even when one side is 100 times faster than another
 * (with equal run counts it is plain alternation: A B C A B C ...).
 *
 * Run count per side: enough calls to cover `min_time_s` (0.2 s by default),
 * never fewer than `min_runs` (10), never more than `max_runs` (10000),
 * estimated from the warm-up calls.
 *
 * Caches are NOT flushed between runs: a served model calls the same kernels
 * with the same weights over and over, so steady state is what we measure.
 *
 * bench_print_line() writes one result as one JSON object on one line, the
 * format documented in bench/README.md.
 */
#ifndef RAVEL_BENCH_TIMING_H
#define RAVEL_BENCH_TIMING_H

typedef void (*BenchFn)(void *ctx);

typedef struct {
    double min_time_s; /* per side, default 0.2 */
    int min_runs;      /* default 10 */
    int max_runs;      /* default 10000 */
    int warmup_runs;   /* calls per side before measuring, default 3; all but the first
                          also estimate the cost of a call */
} BenchOpts;

typedef struct {
    double median_ms;
    double min_ms;
    double max_ms;
    int runs; /* 0: the side was not run (e.g. ravel has no kernel) */
} BenchStats;

typedef struct {
    BenchFn fn; /* NULL: skipped, stats.runs stays 0 */
    void *ctx;
    BenchStats stats; /* filled by bench_sides() */
} BenchSide;

/* The defaults described above; drivers override fields from the command line. */
BenchOpts bench_default_opts(void);

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);

/* Times the n sides, interleaved as described above, and fills their stats. */
void bench_sides(const BenchOpts *o, BenchSide *sides, int n);

/*
 * Prints one result line to stdout and flushes it. `config_json` is the
 * already formatted JSON object for "config" (e.g. {"T": 8, "threads": 1}).
 * `flops` is the useful floating-point work of one call (2·M·N·K for a GEMM);
 * it gives "gflops" (ravel) and "baseline_gflops". A ravel side with
 * runs == 0 prints as null. `rv_compile_s` is the C compiler's time for
 * ravel's kernel ("ravel_compile_s").
 */
void bench_print_line(const char *bench, const char *config_json, const char *baseline,
                      double flops, const BenchStats *rv, const BenchStats *bs,
                      double rv_compile_s);

#endif
