/*
 * bench/timing.h — the one timing method every ravel benchmark uses.
 *
 * A benchmark line compares ravel with one baseline on one configuration.
 * Both are given as closures (a function plus its context). bench_pair()
 * warms both up, picks a run count, then runs them alternately — ravel,
 * baseline, ravel, baseline, ... — timing every call on its own with
 * clock_gettime(CLOCK_MONOTONIC). Alternating means a burst of noise from the
 * other engineers' compiles on this shared machine hits both sides alike;
 * medians make single hiccups irrelevant, and min/max show how noisy it was.
 *
 * Caches are NOT flushed between runs: a served model calls the same kernels
 * with the same weights over and over, so steady state is what we measure.
 *
 * The run count is adaptive: enough runs for each side to take at least
 * `min_time_s` (0.2 s by default), never fewer than `min_runs` (10), never
 * more than `max_runs` (2000). The slower side decides.
 *
 * bench_print_line() writes the result as one JSON object on one line, the
 * format documented in bench/README.md.
 */
#ifndef RAVEL_BENCH_TIMING_H
#define RAVEL_BENCH_TIMING_H

typedef void (*BenchFn)(void *ctx);

typedef struct {
    double min_time_s; /* per side, default 0.2 */
    int min_runs;      /* default 10 */
    int max_runs;      /* default 2000 */
    int warmup_runs;   /* untimed calls per side before measuring, default 3 */
} BenchOpts;

typedef struct {
    double median_ms;
    double min_ms;
    double max_ms;
    int runs;
} BenchStats;

/* The defaults described above; drivers override fields from the command line. */
BenchOpts bench_default_opts(void);

/* Seconds on CLOCK_MONOTONIC. */
double bench_now(void);

/*
 * Times ravel (may be NULL: then only the baseline is timed and *rv is left
 * with runs == 0) against the baseline, alternating calls.
 */
void bench_pair(const BenchOpts *o, BenchFn ravel, void *ravel_ctx, BenchFn base, void *base_ctx,
                BenchStats *rv, BenchStats *bs);

/*
 * Prints one result line to stdout and flushes it. `config_json` is the
 * already formatted JSON object for "config" (e.g. {"T": 8, "threads": 1}).
 * `flops` is the useful floating-point work of one call (2·M·N·K for a GEMM);
 * it gives "gflops" (ravel) and "baseline_gflops". A ravel side with
 * runs == 0 prints as null.
 */
void bench_print_line(const char *bench, const char *config_json, const char *baseline,
                      double flops, const BenchStats *rv, const BenchStats *bs);

#endif
