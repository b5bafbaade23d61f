/*
 * test_threadpool.c — the runtime thread pool: every index visited exactly
 * once in the documented static chunks, for sizes around the thread count
 * and a large prime; nested loops run serially; several outside threads may
 * share a pool; a forked child still works; dispatch latency (printed, with
 * only a very loose bound); and JIT-compiled code calling back into
 * ravel_rt_parallel_for when the host exports it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_DEFAULT */
#endif

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "jit/jit.h"
#include "ravel_rt.h"
#include "runtime/threadpool.h"

#define MAX_T 64

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Per-call record of what the loop body saw. */
#define MAX_CALLS (MAX_T * 8)
typedef struct RangeCtx {
    int64_t n;
    int nthreads;
    unsigned char *visits;
    int64_t begin[MAX_CALLS], end[MAX_CALLS]; /* each call's piece */
    int64_t sum[MAX_T * 8];                   /* one slot per tid, a cache line apart */
    atomic_int calls, bad_tid;
} RangeCtx;

static void range_body(void *vctx, int64_t begin, int64_t end, int tid) {
    RangeCtx *c = vctx;
    int call = atomic_fetch_add(&c->calls, 1);
    if (tid < 0 || tid >= c->nthreads || begin >= end || call >= MAX_CALLS) {
        atomic_fetch_add(&c->bad_tid, 1);
        return;
    }
    c->begin[call] = begin;
    c->end[call] = end;
    int64_t s = 0;
    for (int64_t i = begin; i < end; i++) {
        c->visits[i]++;
        s += i;
    }
    c->sum[tid * 8] += s; /* pieces with one tid never run at once */
}

/* True when [b, e) is one of the documented pieces of a chunk of n over nt. */
static bool is_piece(int64_t n, int nt, int64_t b, int64_t e) {
    for (int t = 0; t < nt; t++) {
        int64_t q = n / nt, r = n % nt;
        int64_t cb = q * t + (t < r ? t : r), len = q + (t < r);
        int64_t np = len < 8 ? len : 8;
        for (int64_t k = 0; k < np; k++)
            if (b == cb + len * k / np && e == cb + len * (k + 1) / np)
                return true;
    }
    return false;
}

/* One loop over [0, n) on pool, checked against the documented chunking. */
static void check_ranges(ThreadPool *pool, int64_t n) {
    int nt = tp_num_threads(pool);
    static RangeCtx c;
    memset(&c, 0, sizeof c);
    c.n = n;
    c.nthreads = nt;
    c.visits = calloc((size_t)n + 1, 1);
    tp_parallel_for(pool, n, range_body, &c);

    CHECK_EQ_INT(atomic_load(&c.bad_tid), 0);
    int64_t total = 0;
    for (int t = 0; t < MAX_T; t++)
        total += c.sum[t * 8];
    CHECK_EQ_INT(total, n * (n - 1) / 2);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++)
        wrong += c.visits[i] != 1;
    CHECK_EQ_INT(wrong, 0);
    free(c.visits);

    int calls = atomic_load(&c.calls);
    if (n <= 1 || nt == 1) { /* run serially as one chunk */
        CHECK_EQ_INT(calls, n > 0 ? 1 : 0);
        if (n > 0)
            CHECK(c.begin[0] == 0 && c.end[0] == n);
        return;
    }
    int64_t pieces = 0;
    for (int t = 0; t < nt; t++) {
        int64_t len = n / nt + (t < n % nt);
        pieces += len < 8 ? len : 8;
    }
    CHECK_EQ_INT(calls, pieces);
    int bad = 0;
    for (int i = 0; i < calls && i < MAX_CALLS; i++)
        bad += !is_piece(n, nt, c.begin[i], c.end[i]);
    CHECK_EQ_INT(bad, 0);
}

static void test_ranges(void) {
    const int threads[] = {1, 2, 3, 8};
    const int64_t sizes[] = {0, 1, 2, 7, 1000003};
    for (int i = 0; i < RV_COUNT(threads); i++) {
        ThreadPool *pool = tp_new(threads[i]);
        CHECK_EQ_INT(tp_num_threads(pool), threads[i]);
        for (int rep = 0; rep < 3; rep++) {
            for (int j = 0; j < RV_COUNT(sizes); j++)
                check_ranges(pool, sizes[j]);
        }
        tp_free(pool);
    }
    tp_free(NULL);
}

/* ---- nesting ---- */

typedef struct NestCtx {
    ThreadPool *pool;
    int64_t inner_sum[16];
    atomic_int inner_not_serial;
} NestCtx;

typedef struct InnerCtx {
    NestCtx *outer;
    int64_t sum;
} InnerCtx;

static void inner_body(void *vctx, int64_t begin, int64_t end, int tid) {
    InnerCtx *c = vctx;
    if (tid != 0 || begin != 0 || end != 100)
        atomic_fetch_add(&c->outer->inner_not_serial, 1);
    for (int64_t i = begin; i < end; i++)
        c->sum += i;
}

static void outer_body(void *vctx, int64_t begin, int64_t end, int tid) {
    NestCtx *c = vctx;
    (void)tid;
    for (int64_t i = begin; i < end; i++) {
        InnerCtx in = {c, 0};
        tp_parallel_for(c->pool, 100, inner_body, &in); /* the same pool */
        ravel_rt_parallel_for(100, inner_body, &in);    /* the default pool */
        c->inner_sum[i] = in.sum;
    }
}

static void test_nested(void) {
    ThreadPool *pool = tp_new(4);
    NestCtx c = {.pool = pool};
    tp_parallel_for(pool, 16, outer_body, &c);
    for (int i = 0; i < 16; i++)
        CHECK_EQ_INT(c.inner_sum[i], 2 * 4950);
    CHECK_EQ_INT(atomic_load(&c.inner_not_serial), 0);
    /* After the nested loops the pool still works in parallel. */
    check_ranges(pool, 1000);
    tp_free(pool);
}

/* ---- several outside threads on one pool ---- */

typedef struct CallerArg {
    ThreadPool *pool;
    int ok;
} CallerArg;

static void sum_body(void *vctx, int64_t begin, int64_t end, int tid) {
    (void)tid;
    int64_t s = 0;
    for (int64_t i = begin; i < end; i++)
        s += i;
    atomic_fetch_add((atomic_llong *)vctx, s);
}

static void *caller_thread(void *varg) {
    CallerArg *a = varg;
    a->ok = 1;
    for (int k = 0; k < 2000; k++) {
        atomic_llong s = 0;
        int64_t n = 1 + k % 50;
        tp_parallel_for(a->pool, n, sum_body, &s);
        if (atomic_load(&s) != n * (n - 1) / 2)
            a->ok = 0;
    }
    return NULL;
}

static void test_concurrent_callers(void) {
    ThreadPool *pool = tp_new(3);
    pthread_t th[4];
    CallerArg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (CallerArg){pool, 0};
        CHECK(pthread_create(&th[i], NULL, caller_thread, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok);
    }
    tp_free(pool);
}

/* ---- the default pool, and fork ---- */

static void test_default_and_fork(void) {
    ThreadPool *d = tp_default();
    CHECK(d != NULL);
    CHECK(tp_default() == d);
    CHECK_EQ_INT(tp_num_threads(d), tp_default_threads());
    setenv("RAVEL_NUM_THREADS", "5", 1);
    CHECK_EQ_INT(tp_default_threads(), 5);
    setenv("RAVEL_NUM_THREADS", "junk", 1);
    CHECK(tp_default_threads() >= 1);
    unsetenv("RAVEL_NUM_THREADS");

    atomic_llong s = 0;
    ravel_rt_parallel_for(1000, sum_body, &s);
    CHECK_EQ_INT(atomic_load(&s), 1000 * 999 / 2);

    /* The child has none of the parent's workers; loops still complete. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int ok = 1;
        for (int k = 0; k < 100; k++) {
            atomic_llong cs = 0;
            ravel_rt_parallel_for(1000, sum_body, &cs);
            tp_parallel_for(d, 1000, sum_body, &cs); /* the parent's pool: serial */
            ok &= atomic_load(&cs) == 2 * (1000 * 999 / 2);
        }
        _exit(ok ? 0 : 1);
    }
    CHECK(pid > 0);
    int ws = 0;
    CHECK(waitpid(pid, &ws, 0) == pid);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

/* ---- latency ---- */

static void tiny_body(void *vctx, int64_t begin, int64_t end, int tid) {
    (void)begin;
    (void)end;
    atomic_fetch_add((atomic_int *)vctx + tid * 16, 1);
}

typedef struct BusyCtx {
    double us;
    pthread_t caller;
    atomic_int on_workers;
} BusyCtx;

static void busy_body(void *vctx, int64_t begin, int64_t end, int tid) {
    BusyCtx *c = vctx;
    (void)begin;
    (void)end;
    (void)tid;
    double t0 = now_seconds();
    while (now_seconds() - t0 < 1e-6 * c->us) {
    }
    if (!pthread_equal(pthread_self(), c->caller))
        atomic_fetch_add(&c->on_workers, 1);
}

static void test_dispatch_latency(void) {
    ThreadPool *pool = tp_default();
    int nt = tp_num_threads(pool);
    atomic_int *counts = calloc((size_t)nt * 16, sizeof *counts);
    enum { N = 100000 };
    for (int k = 0; k < 1000; k++) /* warm up */
        tp_parallel_for(pool, nt, tiny_body, counts);
    for (int t = 0; t < nt; t++)
        atomic_store(&counts[t * 16], 0);
    /* In batches, so that the best batch shows the cost on a quiet machine
     * even when this one is shared. */
    double t0 = now_seconds(), best = 1e30;
    for (int k = 0; k < N; k += 1000) {
        double b0 = now_seconds();
        for (int j = 0; j < 1000; j++)
            tp_parallel_for(pool, nt, tiny_body, counts);
        double b = now_seconds() - b0;
        best = b < best ? b : best;
    }
    double dt = now_seconds() - t0;
    int64_t total = 0;
    for (int t = 0; t < nt; t++)
        total += atomic_load(&counts[t * 16]);
    CHECK_EQ_INT(total, (int64_t)N * nt);
    printf("threadpool: %d threads, %d back-to-back dispatches: %.3f us per dispatch on "
           "average, %.3f us in the best batch of 1000\n",
           nt, N, 1e6 * dt / N, 1e6 * best / 1000);
    CHECK(dt < 60.0); /* very loose: sanitizers and loaded machines */

    /* After idling past the spin window the workers sleep; the dispatch
     * then includes their wakeup. */
    double wake = 0;
    for (int k = 0; k < 50; k++) {
        struct timespec ms = {0, 2000000};
        nanosleep(&ms, NULL);
        double w0 = now_seconds();
        tp_parallel_for(pool, nt, tiny_body, counts);
        wake += now_seconds() - w0;
    }
    printf("threadpool: dispatch after 2 ms idle: %.1f us\n", 1e6 * wake / 50);
    free(counts);

    /* Tiny loops mostly run on the caller, which takes over chunks not yet
     * started; with ~20 us of work per chunk the workers take part, and the
     * time beyond 20 us is the cost of the hand-off. */
    BusyCtx b = {.us = 20, .caller = pthread_self()};
    enum { M = 2000 };
    double best_loop = 1e30;
    for (int k = 0; k < M; k++) {
        double l0 = now_seconds();
        tp_parallel_for(pool, nt, busy_body, &b);
        double l = now_seconds() - l0;
        best_loop = l < best_loop ? l : best_loop;
    }
    printf("threadpool: loops of %d x 20 us chunks: overhead %.2f us in the best loop, %.0f%% of "
           "the chunks of other threads ran on workers\n",
           nt, 1e6 * best_loop - b.us,
           nt > 1 ? 100.0 * atomic_load(&b.on_workers) / ((double)M * (nt - 1)) : 0.0);
}

/* ---- generated code calling back into the runtime ---- */

/* The ABI way: the kernel reaches the pool through rv_rt_ctx, so the
 * object has no undefined ravel symbols and needs nothing from the host's
 * dynamic symbol table. */
static const char *CTX_KERNEL_SRC =
    "#include \"ravel_rt.h\"\n"
    "static void body(void *closure, int64_t b, int64_t e, int tid) {\n"
    "    float *x = closure;\n"
    "    for (int64_t i = b; i < e; i++)\n"
    "        x[i] = 2.0f * (float)i + (float)(tid < 0);\n"
    "}\n"
    "int32_t kernel_fill(const int64_t *sizes, void *const *bufs, struct rv_rt_ctx *ctx) {\n"
    "    ctx->parallel_for(sizes[0], body, bufs[0]);\n"
    "    return RV_RT_OK;\n"
    "}\n";

/* The by-name way: resolved against the host at dlopen, so only when the
 * host exports its symbols (-rdynamic). */
static const char *NAMED_KERNEL_SRC =
    "#include <stdint.h>\n"
    "void ravel_rt_parallel_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *);\n"
    "static void body(void *ctx, int64_t b, int64_t e, int tid) {\n"
    "    float *x = ctx;\n"
    "    (void)tid;\n"
    "    for (int64_t i = b; i < e; i++)\n"
    "        x[i] = 2.0f * (float)i;\n"
    "}\n"
    "void fill(float *x, int64_t n) { ravel_rt_parallel_for(n, body, x); }\n";

/* Number of x[i] != 2i for i < n. */
static int count_wrong(const float *x, int n) {
    int wrong = 0;
    for (int i = 0; i < n; i++)
        wrong += x[i] != 2.0f * (float)i;
    return wrong;
}

static void test_jit_calls_runtime(void) {
    enum { N = 100003 };
    char dir[] = "/tmp/ravel-test-tp-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    JitOptions opt = {.cache_dir = dir};
    JitLib *lib = NULL;
    rv_status st = jit_compile(CTX_KERNEL_SRC, &opt, &lib);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s\n", rv_last_error());
    } else {
        rv_rt_kernel_fn fill = (rv_rt_kernel_fn)jit_fn(lib, "kernel_fill");
        struct rv_rt_ctx ctx = {.abi_version = RV_RT_ABI_VERSION,
                                .num_threads = tp_num_threads(tp_default()),
                                .parallel_for = ravel_rt_parallel_for};
        float *x = calloc(N, sizeof *x);
        int64_t sizes[1] = {N};
        void *bufs[1] = {x};
        CHECK_EQ_INT(fill(sizes, bufs, &ctx), RV_RT_OK);
        CHECK_EQ_INT(count_wrong(x, N), 0);
        free(x);
        unlink(jit_lib_path(lib));
        jit_close(lib);
    }

    if (!dlsym(RTLD_DEFAULT, "ravel_rt_parallel_for")) {
        printf("skip jit by-name callback: the test binary does not export "
               "ravel_rt_parallel_for (link with -rdynamic)\n");
    } else {
        st = jit_compile(NAMED_KERNEL_SRC, &opt, &lib);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK) {
            fprintf(stderr, "%s\n", rv_last_error());
        } else {
            void (*fill)(float *, int64_t) = (void (*)(float *, int64_t))jit_fn(lib, "fill");
            float *x = calloc(N, sizeof *x);
            fill(x, N);
            CHECK_EQ_INT(count_wrong(x, N), 0);
            free(x);
            unlink(jit_lib_path(lib));
            jit_close(lib);
        }
    }
    rmdir(dir);
}

/* tp_use: ravel_rt_parallel_for (what kernels call) runs on the pool made
 * current on this thread, whatever the default pool's size, until the
 * previous one is restored. */
typedef struct UseCtx {
    atomic_int *seen; /* per index: the bits of the tids that ran it */
    atomic_int widest, calls;
} UseCtx;

static void record_tid(void *vctx, int64_t begin, int64_t end, int tid) {
    UseCtx *c = vctx;
    atomic_fetch_add(&c->calls, 1);
    if (end - begin > atomic_load(&c->widest))
        atomic_store(&c->widest, (int)(end - begin));
    for (int64_t i = begin; i < end; i++)
        atomic_fetch_or(&c->seen[i], 1 << (tid < 31 ? tid : 31));
}

static void test_use(void) {
    int want = tp_num_threads(tp_default()) + 2;
    ThreadPool *pool = tp_new(want);
    /* 8 iterations per chunk of `want` threads: pieces of one iteration
     * each, where any pool of fewer threads has chunks of more than 8 and
     * pieces of 2 */
    int64_t n = 8 * (int64_t)want;
    UseCtx c = {.seen = calloc((size_t)n, sizeof(atomic_int))};
    ThreadPool *old = tp_use(pool);
    CHECK(old == NULL);
    ravel_rt_parallel_for(n, record_tid, &c);
    CHECK(tp_use(old) == pool);
    CHECK_EQ_INT(atomic_load(&c.widest), 1);
    CHECK_EQ_INT(atomic_load(&c.calls), n);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int v = atomic_load(&c.seen[i]);
        bad += v == 0 || (v & (v - 1)) != 0; /* ran once, on one thread */
    }
    CHECK_EQ_INT(bad, 0);
    free(c.seen);
    tp_free(pool);
}

/* A worker held up inside its first piece holds the caller up for that
 * piece only: the caller takes over the rest of the worker's chunk from
 * the back (before pieces it waited for the whole chunk: here, for ever,
 * since the held piece waits for the others). */
typedef struct HeldCtx {
    pthread_t caller;
    atomic_int done, stolen, held, timed_out;
} HeldCtx;

static void held_body(void *vctx, int64_t begin, int64_t end, int tid) {
    HeldCtx *c = vctx;
    (void)tid;
    bool on_caller = pthread_equal(pthread_self(), c->caller);
    for (int64_t i = begin; i < end; i++) {
        if (i == 0 && on_caller) { /* give the worker time to start */
            double t0 = now_seconds();
            while (!atomic_load(&c->held) && now_seconds() - t0 < 0.2) {
            }
        }
        if (i == 8 && !on_caller) { /* the worker's first piece */
            atomic_store(&c->held, 1);
            double t0 = now_seconds();
            while (atomic_load(&c->done) < 15)
                if (now_seconds() - t0 > 5.0) {
                    atomic_store(&c->timed_out, 1);
                    break;
                }
        }
        if (i > 8 && on_caller)
            atomic_fetch_add(&c->stolen, 1);
        atomic_fetch_add(&c->done, 1);
    }
}

static void test_take_over_pieces(void) {
    ThreadPool *pool = tp_new(2);
    if (tp_num_threads(pool) < 2) {
        tp_free(pool);
        return;
    }
    int held = 0;
    for (int k = 0; k < 20 && held < 3; k++) {
        HeldCtx c = {.caller = pthread_self()};
        tp_parallel_for(pool, 16, held_body, &c); /* chunk 1: [8, 16), 8 pieces */
        CHECK_EQ_INT(atomic_load(&c.done), 16);
        CHECK_EQ_INT(atomic_load(&c.timed_out), 0);
        if (atomic_load(&c.held)) {
            held++;
            CHECK_EQ_INT(atomic_load(&c.stolen), 7);
        }
    }
    printf("threadpool: a worker held in its first piece, %d of the loops\n", held);
    tp_free(pool);
}

int main(void) {
    RUN(test_ranges);
    RUN(test_nested);
    RUN(test_concurrent_callers);
    RUN(test_default_and_fork);
    RUN(test_dispatch_latency);
    RUN(test_jit_calls_runtime);
    RUN(test_use);
    RUN(test_take_over_pieces);
    return harness_report();
}
