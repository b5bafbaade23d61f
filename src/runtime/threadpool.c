/*
 * threadpool.c — a persistent pool for short parallel loops.
 *
 * The loops ravel runs are small: a T=1 dense layer is ~57 MFLOP, one or
 * two milliseconds, and a model issues many of them back to back. Creating
 * threads per loop, or waking sleeping ones through the kernel every time,
 * would cost a visible fraction of that, so:
 *
 *   - workers are created once and live as long as the pool;
 *   - a loop is published by writing the job (fn, ctx, n) and bumping a
 *     generation counter `gen`; a worker that sees the counter change
 *     claims the pieces of its own static chunk, runs them, takes over
 *     what is left of other chunks and subtracts what it ran from
 *     `remaining`; the caller does the same from chunk 0, then waits for
 *     `remaining` to reach zero;
 *   - waiting (workers for the next generation, the caller for `remaining`)
 *     first spins on the atomic for spin_ns (default 50 us, $RAVEL_SPIN_US),
 *     then sleeps on a condition variable. Back-to-back loops therefore
 *     never enter the kernel; a pool idle for longer costs one wakeup.
 *
 * Sleeping without lost wakeups uses the classic store/load pairing on two
 * sequentially consistent atomics: a worker increments `sleepers` and then
 * re-reads `gen` under the mutex before waiting; the dispatcher increments
 * `gen` and then reads `sleepers`, and only takes the mutex to broadcast
 * when someone sleeps. One of the two always sees the other's write. The
 * caller's sleep on `remaining` pairs with `caller_sleeping` the same way.
 *
 * Claiming is what keeps the pool fast when it is not alone on the machine,
 * and what keeps each thread on its own part of the data (issue 13's
 * persistence: a level's product split by output columns reads the same
 * half of the weight pack on the same core at every level, so that half
 * stays in that core's L2). Chunk t (the static partition below) belongs
 * to thread t and is cut into up to TP_PIECES pieces; its slot holds, in
 * one 64-bit word, the loop's generation and the pieces not yet claimed
 * [next, end). The owner claims pieces from the front, any other thread
 * that has run out of its own work from the back, each by one
 * compare-and-swap, so every piece runs exactly once. A worker that is
 * descheduled (or asleep) when the loop begins, or in the middle of its
 * chunk, holds the caller up for at most the piece it is running: the
 * caller takes the rest from the back. A worker that is on time runs its
 * whole chunk, since the caller reaches the back of it only once its own
 * equal chunk is done, so the static chunk-to-thread mapping (and its
 * cache affinity) is what happens in the common case. Before pieces, the
 * caller took over a late worker's whole chunk (on a loaded 2-core
 * machine two thirds of them: the caller then read all of the weights)
 * or, once the worker had started, waited for all of it.
 * A successful claim also makes reading the job safe: loop g cannot
 * finish, and the job cannot be overwritten, while one of its pieces is
 * claimed and not done; a late worker whose claim fails (another
 * generation, or nothing left) never reads the job.
 *
 * Nesting: a thread-local flag marks threads inside a chunk (workers
 * always); a parallel loop issued there runs serially. Fork: a child has
 * none of its parent's workers, so pools created before the fork run
 * serially in the child and tp_default() makes a fresh pool there.
 *
 * EMBEDDED. `ravel build --threads` copies this file's text into the
 * generated NAME.c (src/codegen/c_aot_pool.c), so an AOT model runs its
 * parallel loops on this same pool with no ravel library. There
 * RV_TP_EMBEDDED is defined first: the functions become static (private
 * to NAME.c, so several models link together), memory comes from calloc
 * (tp_new returns NULL when it fails) and the process-wide pool
 * (tp_default, tp_use, ravel_rt_parallel_for) is left out; NAME.c keeps
 * its own pool. The including file defines _GNU_SOURCE before its first
 * include.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifdef RV_TP_EMBEDDED
typedef struct ThreadPool ThreadPool;
typedef void (*TpFn)(void *ctx, int64_t begin, int64_t end, int tid);
#define TP_API static
#define tp_calloc calloc
#define tp_release free
#else
#include "base/base.h"
#include "runtime/threadpool.h"
#define TP_API
#define tp_calloc base_xcalloc /* never NULL */
#define tp_release base_free
#endif

#define TP_MAX_THREADS 1024
#define TP_DEFAULT_SPIN_US 50
#define TP_CACHE_LINE 64
#define TP_PIECES 8 /* pieces of a chunk: what other threads may take over */

/* A chunk's unclaimed pieces, alone on its cache line:
 * generation << 32 | next piece << 16 | end piece (range_word). */
typedef struct TpSlot {
    _Atomic uint64_t range;
    char pad[TP_CACHE_LINE - sizeof(uint64_t)];
} TpSlot;

typedef struct TpWorker {
    ThreadPool *pool;
    int tid;
    pthread_t thread;
} TpWorker;

struct ThreadPool {
    int nthreads;                /* counting the caller */
    int64_t spin_ns;             /* how long a waiter spins before sleeping */
    unsigned long fork_gen;      /* tp_fork_gen when the workers were started */
    TpWorker *workers;           /* nthreads - 1 of them, tids 1.. */
    pthread_mutex_t dispatch_mu; /* one loop at a time */
    pthread_mutex_t sleep_mu;
    pthread_cond_t work_cv, done_cv;
    /* The current loop: written before gen is bumped, read by workers
     * after they see the new gen. */
    TpFn fn;
    void *ctx;
    int64_t n;
    /* Padding keeps the counters that workers poll and the one they
     * decrement on different cache lines. */
    char pad0[TP_CACHE_LINE];
    atomic_uint gen;
    atomic_int stop;
    char pad1[TP_CACHE_LINE];
    atomic_int remaining;
    char pad2[TP_CACHE_LINE];
    atomic_int sleepers;
    atomic_int caller_sleeping;
    TpSlot *slots; /* one per chunk */
};

static _Thread_local bool tp_in_chunk; /* nested loops on this thread run serially */
static atomic_ulong tp_fork_gen;       /* bumped in every forked child */
static pthread_once_t tp_atfork_once = PTHREAD_ONCE_INIT;

#ifndef RV_TP_EMBEDDED
static _Atomic(ThreadPool *) default_pool;
static pthread_mutex_t default_mu = PTHREAD_MUTEX_INITIALIZER;
#endif

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- fork ---- */

#ifdef RV_TP_EMBEDDED
static void atfork_child(void) {
    atomic_fetch_add(&tp_fork_gen, 1);
}

static void register_atfork(void) {
    pthread_atfork(NULL, NULL, atfork_child);
}
#else
static void atfork_prepare(void) {
    pthread_mutex_lock(&default_mu);
}

static void atfork_parent(void) {
    pthread_mutex_unlock(&default_mu);
}

static void atfork_child(void) {
    atomic_fetch_add(&tp_fork_gen, 1);
    pthread_mutex_unlock(&default_mu);
}

static void register_atfork(void) {
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}
#endif

/* True when the pool's workers belong to this process. */
static bool pool_alive(const ThreadPool *p) {
    return p->fork_gen == atomic_load_explicit(&tp_fork_gen, memory_order_relaxed);
}

/* ---- the loop ---- */

static uint64_t range_word(unsigned g, unsigned next, unsigned end) {
    return (uint64_t)g << 32 | (uint64_t)next << 16 | end;
}

/* Chunk c's iterations [*begin, *end) of the current loop. */
static void chunk_bounds(const ThreadPool *p, int c, int64_t *begin, int64_t *end) {
    int64_t q = p->n / p->nthreads, r = p->n % p->nthreads;
    *begin = q * c + (c < r ? c : r);
    *end = *begin + q + (c < r ? 1 : 0);
}

static unsigned chunk_pieces(int64_t len) {
    return len < TP_PIECES ? (unsigned)len : TP_PIECES;
}

/* Runs piece k of chunk c of the current loop on thread tid. */
static void run_piece(ThreadPool *p, int c, unsigned k, int tid) {
    int64_t b, e;
    chunk_bounds(p, c, &b, &e);
    int64_t len = e - b, np = chunk_pieces(len);
    p->fn(p->ctx, b + len * k / np, b + len * (k + 1) / np, tid);
}

/* Claims a piece of chunk c for loop g, the first unclaimed one (front)
 * or the last; returns its index, or -1 when none is left or the slot
 * belongs to another loop. */
static int claim_piece(ThreadPool *p, int c, unsigned g, bool front) {
    uint64_t w = atomic_load_explicit(&p->slots[c].range, memory_order_relaxed);
    for (;;) {
        unsigned wg = (unsigned)(w >> 32), next = (w >> 16) & 0xffff, end = w & 0xffff;
        if (wg != g || next >= end)
            return -1;
        uint64_t claimed = front ? range_word(g, next + 1, end) : range_word(g, next, end - 1);
        if (atomic_compare_exchange_weak(&p->slots[c].range, &w, claimed))
            return front ? (int)next : (int)end - 1;
    }
}

/* Thread tid's share of loop g: its own chunk's pieces from the front,
 * then what is left of the others' from the back. Returns how many pieces
 * it ran. */
static int run_pieces(ThreadPool *p, int tid, unsigned g) {
    int ran = 0, k;
    while ((k = claim_piece(p, tid, g, true)) >= 0) {
        run_piece(p, tid, (unsigned)k, tid);
        ran++;
    }
    for (int i = 1; i < p->nthreads; i++) {
        int c = (tid + i) % p->nthreads;
        while ((k = claim_piece(p, c, g, false)) >= 0) {
            run_piece(p, c, (unsigned)k, tid);
            ran++;
        }
    }
    return ran;
}

/* Waits until gen differs from seen and returns it: spin, then sleep. */
static unsigned wait_for_work(ThreadPool *p, unsigned seen) {
    unsigned g;
    int64_t deadline = 0;
    for (unsigned i = 1;; i++) {
        g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen)
            return g;
        if (i % 64 == 0) {
            int64_t t = now_ns();
            if (!deadline)
                deadline = t + p->spin_ns;
            else if (t >= deadline)
                break;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&p->sleep_mu);
    atomic_fetch_add(&p->sleepers, 1);
    while ((g = atomic_load(&p->gen)) == seen)
        pthread_cond_wait(&p->work_cv, &p->sleep_mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->sleep_mu);
    return g;
}

/* The caller's wait for every worker to finish its chunk. */
static void wait_for_done(ThreadPool *p) {
    int64_t deadline = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&p->remaining, memory_order_acquire) == 0)
            return;
        if (i % 64 == 0) {
            int64_t t = now_ns();
            if (!deadline)
                deadline = t + p->spin_ns;
            else if (t >= deadline)
                break;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&p->sleep_mu);
    atomic_store(&p->caller_sleeping, 1);
    while (atomic_load(&p->remaining) != 0)
        pthread_cond_wait(&p->done_cv, &p->sleep_mu);
    atomic_store(&p->caller_sleeping, 0);
    pthread_mutex_unlock(&p->sleep_mu);
}

static void *worker_main(void *arg) {
    TpWorker *w = arg;
    ThreadPool *p = w->pool;
    tp_in_chunk = true; /* anything a worker runs is inside a chunk */
    unsigned seen = 0;
    for (;;) {
        seen = wait_for_work(p, seen);
        if (atomic_load(&p->stop))
            break;
        int ran = run_pieces(p, w->tid, seen);
        if (ran == 0)
            continue; /* all taken by others, empty, or an older loop */
        if (atomic_fetch_sub(&p->remaining, ran) == ran && atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->sleep_mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->sleep_mu);
        }
    }
    return NULL;
}

TP_API void tp_parallel_for(ThreadPool *pool, int64_t n, TpFn fn, void *ctx) {
    if (n <= 0)
        return;
#ifndef RV_TP_EMBEDDED
    if (!pool)
        pool = tp_default();
#endif
    if (tp_in_chunk || n == 1 || pool->nthreads == 1 || !pool_alive(pool)) {
        fn(ctx, 0, n, 0);
        return;
    }
    pthread_mutex_lock(&pool->dispatch_mu);
    int nt = pool->nthreads;
    unsigned g = atomic_load_explicit(&pool->gen, memory_order_relaxed) + 1;
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    int pieces = 0;
    for (int c = 0; c < nt; c++) {
        int64_t b, e;
        chunk_bounds(pool, c, &b, &e);
        unsigned np = chunk_pieces(e - b);
        atomic_store_explicit(&pool->slots[c].range, range_word(g, 0, np), memory_order_relaxed);
        pieces += (int)np;
    }
    atomic_store_explicit(&pool->remaining, pieces, memory_order_relaxed);
    atomic_fetch_add(&pool->gen, 1); /* publishes all of the above (seq_cst) */
    if (atomic_load(&pool->sleepers) > 0) {
        pthread_mutex_lock(&pool->sleep_mu);
        pthread_cond_broadcast(&pool->work_cv);
        pthread_mutex_unlock(&pool->sleep_mu);
    }
    tp_in_chunk = true;
    int ran = run_pieces(pool, 0, g);
    atomic_fetch_sub(&pool->remaining, ran);
    tp_in_chunk = false;
    wait_for_done(pool);
    pthread_mutex_unlock(&pool->dispatch_mu);
}

/* ---- pools ---- */

TP_API int tp_default_threads(void) {
    const char *env = getenv("RAVEL_NUM_THREADS");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v > 0)
            return v > TP_MAX_THREADS ? TP_MAX_THREADS : (int)v;
    }
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set) > TP_MAX_THREADS ? TP_MAX_THREADS : CPU_COUNT(&set);
#endif
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online <= 0)
        return 1;
    return online > TP_MAX_THREADS ? TP_MAX_THREADS : (int)online;
}

/* Spin budget from $RAVEL_SPIN_US (0 allowed: sleep almost at once). */
static int64_t spin_budget_ns(void) {
    const char *env = getenv("RAVEL_SPIN_US");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 0)
            return (int64_t)v * 1000;
    }
    return (int64_t)TP_DEFAULT_SPIN_US * 1000;
}

TP_API ThreadPool *tp_new(int nthreads) {
    pthread_once(&tp_atfork_once, register_atfork);
    if (nthreads <= 0)
        nthreads = tp_default_threads();
    if (nthreads > TP_MAX_THREADS)
        nthreads = TP_MAX_THREADS;
    ThreadPool *p = tp_calloc(1, sizeof *p);
    if (!p)
        return NULL; /* embedded only: tp_calloc is base_xcalloc in the library */
    p->nthreads = nthreads;
    p->spin_ns = spin_budget_ns();
    p->fork_gen = atomic_load(&tp_fork_gen);
    pthread_mutex_init(&p->dispatch_mu, NULL);
    pthread_mutex_init(&p->sleep_mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->remaining, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_sleeping, 0);
    p->slots = tp_calloc((size_t)nthreads, sizeof *p->slots);
    if (!p->slots) {
        tp_release(p);
        return NULL;
    }
    for (int c = 0; c < nthreads; c++)
        atomic_init(&p->slots[c].range, 0);
    if (nthreads == 1)
        return p;

    /* Workers start with every signal blocked, so signals go to the
     * application's own threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    p->workers = tp_calloc((size_t)nthreads - 1, sizeof *p->workers);
    int started = 0;
    for (int t = 1; t < nthreads && p->workers; t++) {
        TpWorker *w = &p->workers[t - 1];
        w->pool = p;
        w->tid = t;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
            break;
        started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* Fewer threads than asked for: the chunking simply uses fewer. */
    p->nthreads = started + 1;
    return p;
}

TP_API void tp_free(ThreadPool *pool) {
    if (!pool)
        return;
    if (pool_alive(pool)) {
        pthread_mutex_lock(&pool->dispatch_mu);
        atomic_store(&pool->stop, 1);
        atomic_fetch_add(&pool->gen, 1);
        pthread_mutex_lock(&pool->sleep_mu);
        pthread_cond_broadcast(&pool->work_cv);
        pthread_mutex_unlock(&pool->sleep_mu);
        for (int t = 1; t < pool->nthreads; t++)
            pthread_join(pool->workers[t - 1].thread, NULL);
        pthread_mutex_unlock(&pool->dispatch_mu);
        pthread_mutex_destroy(&pool->dispatch_mu);
        pthread_mutex_destroy(&pool->sleep_mu);
        pthread_cond_destroy(&pool->work_cv);
        pthread_cond_destroy(&pool->done_cv);
    }
    /* In a forked child the workers do not exist and the locks may be in
     * any state: release the memory only. */
    tp_release(pool->workers);
    tp_release(pool->slots);
    tp_release(pool);
}

TP_API int tp_num_threads(const ThreadPool *pool) {
    return pool->nthreads;
}

#ifndef RV_TP_EMBEDDED
ThreadPool *tp_default(void) {
    ThreadPool *p = atomic_load_explicit(&default_pool, memory_order_acquire);
    if (p && pool_alive(p))
        return p;
    pthread_once(&tp_atfork_once, register_atfork);
    pthread_mutex_lock(&default_mu);
    p = atomic_load(&default_pool);
    if (!p || !pool_alive(p)) {
        /* A pool inherited through fork has no workers here; it is left
         * allocated, since the parent's other threads may have held its
         * locks at the fork. */
        p = tp_new(0);
        atomic_store_explicit(&default_pool, p, memory_order_release);
    }
    pthread_mutex_unlock(&default_mu);
    return p;
}

static _Thread_local ThreadPool *tp_current; /* tp_use's; NULL: the default pool */

ThreadPool *tp_use(ThreadPool *pool) {
    ThreadPool *old = tp_current;
    tp_current = pool;
    return old;
}

void ravel_rt_parallel_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *ctx) {
    tp_parallel_for(tp_current, n, fn, ctx);
}
#endif /* RV_TP_EMBEDDED */
