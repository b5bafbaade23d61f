/*
 * bench/encoder/ravel_encoder.h — ravel's side of the encoder benchmark:
 * the layer of ENCODER.md as the ravel program bench/encoder/encoder_<config>.rv
 * (gen_rv.py), compiled once per thread count through the public API and run
 * on the caller's packed buffers (rv_program_run_into: X and Y are the
 * packed [T, H] arrays of the other systems, wrapped, not copied).
 */
#ifndef RAVEL_BENCH_RAVEL_ENCODER_H
#define RAVEL_BENCH_RAVEL_ENCODER_H

#include <stdint.h>

typedef struct ReProgram ReProgram;
typedef struct ReBatch ReBatch;

/* The weights in ENCODER.md's order: w_qkv, b_qkv, w_o, b_o, ln1_g, ln1_b,
 * w_ff1, b_ff1, w_ff2, b_ff2, ln2_g, ln2_b (copied into aligned arrays). */
#define RE_NWEIGHTS 12
extern const char *const re_weight_names[RE_NWEIGHTS];

/* Compiles path (a program of gen_rv.py at hidden size `hidden` and
 * feed-forward size `ff`) for `threads` threads; exits with ravel's message
 * when it does not compile. weights[i] holds re_weight_names[i]. */
ReProgram *re_program_new(const char *path, int threads, int hidden, int ff,
                          const float *const *weights);
void re_program_free(ReProgram *p);

/* Binds one batch: len[batch] (each >= 0), x and y packed [sum(len), H],
 * 64-byte aligned, borrowed. */
ReBatch *re_batch_new(ReProgram *p, const int *len, int batch, const float *x, float *y);
void re_batch_free(ReBatch *rb);
void re_run(void *rb); /* a BenchFn */

/* The program's counters so far: runs, seconds of compiling, of preludes
 * (the ragged layouts' aux arrays, one fill per raggedness pattern and run)
 * and of kernels, over all runs; the caller takes differences. */
typedef struct {
    int64_t runs, prelude_runs, aux_bytes;
    double compile_s, prelude_s, kernel_s;
} ReCounters;
ReCounters re_program_counters(const ReProgram *p);

#endif
