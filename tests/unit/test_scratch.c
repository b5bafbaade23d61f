/*
 * test_scratch.c — the runtime's scratch allocator (src/runtime/scratch.c):
 * every block aligned and zeroed, also when a freed block is handed out
 * again; reuse across sizes; blocks of other threads; thread exit frees
 * the thread's cache (checked by ASan's leak detector in make asan-test).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "ravel_rt.h"
#include "runtime/runtime.h"

static bool all_zero(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static void test_aligned_and_zeroed(void) {
    const size_t sizes[] = {0, 1, 63, 64, 65, 1000, 4096, 100000, (size_t)5 << 20};
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < RV_COUNT(sizes); i++) {
            unsigned char *p = rt_scratch_alloc(sizes[i]);
            CHECK(p != NULL);
            if (!p)
                continue;
            CHECK_EQ_INT((int)((uintptr_t)p % RV_RT_ALIGN), 0);
            CHECK(all_zero(p, sizes[i]));
            memset(p, 0xab, sizes[i]); /* dirty: a reused block must come back zeroed */
            rt_scratch_free(p);
        }
    }
    rt_scratch_free(NULL);
}

/* Runs on a new thread: its cache starts empty. */
static void *reuse_body(void *arg) {
    (void)arg;
    /* a freed block is reused by a request it fits, and zeroed again */
    unsigned char *a = rt_scratch_alloc(4096);
    memset(a, 0xff, 4096);
    rt_scratch_free(a);
    unsigned char *b = rt_scratch_alloc(1000);
    CHECK(b == a);
    CHECK(all_zero(b, 1000));
    /* a larger request does not get the small block */
    unsigned char *c = rt_scratch_alloc(8192);
    CHECK(c != a);
    CHECK(all_zero(c, 8192));
    rt_scratch_free(b);
    rt_scratch_free(c);
    /* more live blocks than the cache holds: all distinct, all freed */
    enum { N = 40 };
    void *many[N];
    for (int i = 0; i < N; i++) {
        many[i] = rt_scratch_alloc(128 + 64 * (size_t)i);
        for (int j = 0; j < i; j++)
            CHECK(many[i] != many[j]);
    }
    for (int i = 0; i < N; i++)
        rt_scratch_free(many[i]);
    return NULL;
}

static void test_reuse(void) {
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, reuse_body, NULL), 0);
    pthread_join(t, NULL);
}

static void *worker(void *arg) {
    /* frees a block the main thread allocated, fills its own cache, exits */
    rt_scratch_free(arg);
    for (int i = 0; i < 4; i++) {
        void *p = rt_scratch_alloc(256 * (size_t)(i + 1));
        rt_scratch_free(p);
    }
    return NULL;
}

static void test_threads(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        void *p = rt_scratch_alloc(512);
        CHECK_EQ_INT(pthread_create(&t[i], NULL, worker, p), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
}

int main(void) {
    RUN(test_aligned_and_zeroed);
    RUN(test_reuse);
    RUN(test_threads);
    return harness_report();
}
