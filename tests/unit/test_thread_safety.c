/*
 * test_thread_safety.c — one compiled program run from 8 threads at once,
 * 1,000 runs each, on different data (ravel.h, "Thread safety"): every
 * result equals, bit for bit, the single-threaded run of the same
 * bindings, which equals the interpreter's. Two programs: a dense one with
 * a reduction and parallel loops on the shared pool, and a ragged, padded
 * one (rows scaled by their sums of squares, over a length UF) on a pool of its own, half of its
 * runs into caller buffers (rv_program_run_into). `make SAN=1` runs it
 * under ASan, `make tsan-test` under ThreadSanitizer.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define NTHREADS 8
#define NCALLS 1000
#define NCASES 6 /* bindings per thread, cycled through by its calls */

static char cache_dir[64];

static const char *const dense = "size N in 1..32\n"
                                 "input X : f32[i < N, k < 24]\n"
                                 "input W : f32[k < 24, j < 16]\n"
                                 "Y[i, j] = sum(k < 24) X[i, k] * W[k, j]\n"
                                 "R[i, j] = max(Y[i, j], 0.0)\n"
                                 "schedule Y { parallel(i) }\n"
                                 "schedule R { parallel(i) }\n";

static const char *const ragged = "size B in 1..16\n"
                                  "ufun len[b < B] in 1..40\n"
                                  "input S : f32[b < B, j < len[b]]\n"
                                  "A[b] = sum(j < len[b]) S[b, j] * S[b, j]\n"
                                  "P[b, j pad 8] = S[b, j] * A[b] + 1.0\n"
                                  "schedule A { parallel(b) }\n"
                                  "schedule P { parallel(b) jo, jv = split(j, 8) vectorize(jv) }\n";

typedef struct Case {
    rv_bindings *b;
    rv_array *want; /* the single-threaded run's output */
    rv_array *into; /* the caller's buffer for rv_program_run_into */
} Case;

typedef struct Shared {
    rv_module *m;
    rv_program *p;
    const char *size, *out; /* the size drawn per case, the output compared */
    Case cases[NTHREADS][NCASES];
    int bad[NTHREADS];      /* mismatching or failing runs, per thread */
    int use_into;
    pthread_barrier_t start;
} Shared;

static bool same_array(const rv_array *a, const rv_array *b) {
    return a && b && rv_array_dtype(a) == rv_array_dtype(b) && rv_array_numel(a) == rv_array_numel(b) &&
           memcmp(rv_array_cdata(a), rv_array_cdata(b),
                  (size_t)rv_array_numel(a) * rv_dtype_size(rv_array_dtype(a))) == 0;
}

/* Case c of thread t: its own sizes and data, the reference computed by a
 * single-threaded run and checked against the interpreter. */
static void make_case(Shared *s, int t, int c) {
    Case *k = &s->cases[t][c];
    uint64_t seed = (uint64_t)(t * NCASES + c + 1);
    rv_bindings *ref = rv_bindings_new(s->m);
    k->b = rv_bindings_new(s->m);
    int64_t n = 1 + (int64_t)(seed * 7 % 13);
    CHECK_EQ_INT(rv_bindings_set_size(ref, s->size, n), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_size(k->b, s->size, n), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(ref, seed), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(k->b, seed), RV_OK);
    CHECK_EQ_INT(rv_interp_run(s->m, ref), RV_OK);
    CHECK_EQ_INT(rv_program_run(s->p, k->b), RV_OK);
    CHECK_SAME_TENSOR(ref, k->b, s->out, 1e-5);
    const rv_array *got = rv_bindings_get_array(k->b, s->out);
    if (got) {
        k->want = rv_array_new(rv_array_dtype(got), rv_array_ndim(got), rv_array_shape(got));
        memcpy(rv_array_data(k->want), rv_array_cdata(got),
               (size_t)rv_array_numel(got) * rv_dtype_size(rv_array_dtype(got)));
        k->into = rv_array_new(rv_array_dtype(got), rv_array_ndim(got), rv_array_shape(got));
    }
    rv_bindings_free(ref);
}

typedef struct Worker {
    Shared *s;
    int t;
} Worker;

static void *worker(void *arg) {
    Shared *s = ((Worker *)arg)->s;
    int t = ((Worker *)arg)->t;
    pthread_barrier_wait(&s->start);
    for (int i = 0; i < NCALLS; i++) {
        Case *k = &s->cases[t][(i * 5 + t) % NCASES];
        if (s->use_into && i % 2) {
            memset(rv_array_data(k->into), 0xff,
                   (size_t)rv_array_numel(k->into) * rv_dtype_size(rv_array_dtype(k->into)));
            if (rv_program_run_into(s->p, k->b, &k->into, 1) != RV_OK ||
                !same_array(k->into, k->want))
                s->bad[t]++;
        } else if (rv_program_run(s->p, k->b) != RV_OK ||
                   !same_array(rv_bindings_get_array(k->b, s->out), k->want)) {
            s->bad[t]++;
        }
    }
    return NULL;
}

static void run_concurrently(const char *src, const char *size, const char *out, int threads,
                             int use_into) {
    static Shared s;
    memset(&s, 0, sizeof s);
    s.size = size;
    s.out = out;
    s.use_into = use_into;
    CHECK_EQ_INT(rv_module_parse("threads.rv", src, &s.m), RV_OK);
    if (!s.m)
        return;
    rv_compile_options opt = {.cache_dir = cache_dir, .threads = threads};
    CHECK_EQ_INT(rv_program_compile(s.m, &opt, &s.p), RV_OK);
    if (!s.p) {
        rv_module_free(s.m);
        return;
    }
    for (int t = 0; t < NTHREADS; t++)
        for (int c = 0; c < NCASES; c++)
            make_case(&s, t, c);
    Worker w[NTHREADS];
    pthread_t th[NTHREADS];
    pthread_barrier_init(&s.start, NULL, NTHREADS);
    int started = 0;
    for (int t = 0; t < NTHREADS; t++) {
        w[t] = (Worker){&s, t};
        started += pthread_create(&th[t], NULL, worker, &w[t]) == 0;
    }
    CHECK_EQ_INT(started, NTHREADS);
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&s.start);
    for (int t = 0; t < NTHREADS; t++)
        CHECK_EQ_INT(s.bad[t], 0);
    rv_program_counters c;
    rv_program_stats(s.p, &c);
    CHECK_EQ_INT(c.runs, NTHREADS * NCASES + (started == NTHREADS ? NTHREADS * NCALLS : 0));
    for (int t = 0; t < NTHREADS; t++)
        for (int k = 0; k < NCASES; k++) {
            rv_bindings_free(s.cases[t][k].b);
            rv_array_free(s.cases[t][k].want);
            rv_array_free(s.cases[t][k].into);
        }
    rv_program_free(s.p);
    rv_module_free(s.m);
}

static void test_dense(void) {
    run_concurrently(dense, "N", "R", 0, 0);
}

static void test_ragged(void) {
    run_concurrently(ragged, "B", "P", 2, 1);
}

/* Modules are independent: threads parsing, compiling (through one JIT
 * cache, the same source twice so two compiles race for one cache entry)
 * and running their own modules at once. */
typedef struct OwnModule {
    const char *src, *size, *out;
    int bad;
} OwnModule;

static void *compile_and_run(void *arg) {
    OwnModule *o = arg;
    rv_module *m = NULL;
    rv_program *p = NULL;
    rv_compile_options opt = {.cache_dir = cache_dir};
    if (rv_module_parse("own.rv", o->src, &m) != RV_OK || rv_program_compile(m, &opt, &p) != RV_OK) {
        o->bad = 1;
    } else {
        rv_bindings *want = rv_bindings_new(m), *got = rv_bindings_new(m);
        rv_bindings_set_size(want, o->size, 9);
        rv_bindings_set_size(got, o->size, 9);
        rv_bindings_randomize(want, 4);
        rv_bindings_randomize(got, 4);
        o->bad = rv_interp_run(m, want) != RV_OK || rv_program_run(p, got) != RV_OK ||
                 !rv_bindings_get_array(got, o->out);
        rv_bindings_free(want);
        rv_bindings_free(got);
    }
    rv_program_free(p);
    rv_module_free(m);
    return NULL;
}

static void test_own_modules(void) {
    OwnModule o[4] = {{dense, "N", "R", 0}, {ragged, "B", "P", 0}, {dense, "N", "R", 0},
                      {ragged, "B", "P", 0}};
    pthread_t th[4];
    for (int t = 0; t < 4; t++)
        CHECK_EQ_INT(pthread_create(&th[t], NULL, compile_and_run, &o[t]), 0);
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ_INT(o[t].bad, 0);
    }
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-threads-%d", (int)getpid());
    RUN(test_dense);
    RUN(test_ragged);
    RUN(test_own_modules);
    return harness_report();
}
