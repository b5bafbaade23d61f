/*
 * threadpool.h — the runtime's persistent thread pool (threadpool.c).
 *
 * One parallel loop primitive: tp_parallel_for splits [0, n) statically
 * into one contiguous chunk per pool thread, the calling thread owning
 * chunk 0. Workers persist between calls and spin briefly before sleeping,
 * so back-to-back loops cost about a microsecond to dispatch, not a thread
 * creation each.
 *
 * Chunk t of n over T threads is [t*q + min(t, r), (t+1)*q + min(t+1, r))
 * with q = n / T, r = n % T: sizes differ by at most one, earlier chunks are
 * the larger. A chunk of len iterations is cut into min(len, 8) pieces of
 * contiguous iterations (piece k: [b + len*k/np, b + len*(k+1)/np)); fn
 * runs once per piece, with [begin, end) the piece. Chunk t's pieces
 * normally all run on pool thread t, in order (the caller is thread 0),
 * so a loop partitioned the same way at every call keeps each thread on
 * the same data; a thread done with its own chunk takes over the last
 * pieces that another has not started (a late or descheduled worker), so
 * pieces of one chunk may run on two threads at once. `tid` is the thread
 * running the piece, in [0, tp_num_threads(pool)): use it to pick
 * per-thread scratch (no two pieces run at once with the same tid). No
 * piece runs twice.
 *
 * A tp_parallel_for issued from inside a running chunk (of any pool) runs
 * serially on the calling thread as a single chunk with tid 0, so nested
 * parallel code neither deadlocks nor oversubscribes. Calls on one pool from
 * several outside threads are serialized. In a child process after fork the
 * parent's pools run serially; tp_default() makes a new pool there.
 */
#ifndef RAVEL_THREADPOOL_H
#define RAVEL_THREADPOOL_H

#include <stdint.h>

typedef struct ThreadPool ThreadPool;
typedef void (*TpFn)(void *ctx, int64_t begin, int64_t end, int tid);

/* A pool of nthreads threads counting the caller (so nthreads - 1 workers
 * are started); nthreads <= 0 means tp_default_threads(). If the system
 * refuses some threads the pool is smaller; it never fails. */
ThreadPool *tp_new(int nthreads);
/* Stops and joins the workers. Not to be called while a loop is running. */
void tp_free(ThreadPool *pool);
int tp_num_threads(const ThreadPool *pool);
/* Runs fn over [0, n) as described above; returns when every chunk is
 * done. pool NULL means tp_default(). */
void tp_parallel_for(ThreadPool *pool, int64_t n, TpFn fn, void *ctx);

/* The process-wide pool, created on first use with tp_default_threads()
 * threads and never freed. */
ThreadPool *tp_default(void);
/* $RAVEL_NUM_THREADS if set and positive, else the CPUs this process may
 * run on (sched_getaffinity), else the online CPUs. */
int tp_default_threads(void);

/* The C ABI entry (declared for generated code in ravel_rt.h): a
 * tp_parallel_for on the default pool. The runtime stores it in
 * rv_rt_ctx.parallel_for; code that calls it by name resolves it from the
 * host process at dlopen, so that host must export its symbols (-rdynamic). */
/* The pool ravel_rt_parallel_for uses on the calling thread (NULL:
 * tp_default()); returns the one it replaces. A program with a pool of its
 * own (rv_compile_options.threads) makes it current around its kernels:
 * the ABI's parallel_for takes no pool, and a thread-local lets programs
 * of different pool sizes run at once on different threads. */
ThreadPool *tp_use(ThreadPool *pool);

void ravel_rt_parallel_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *ctx);

#endif
