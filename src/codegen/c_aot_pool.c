/*
 * c_aot_pool.c — the thread pool of `ravel build --threads N`.
 *
 * The kernels run their parallel loops through ctx->parallel_for
 * (ravel_rt.h), the same generated code as under the JIT; what an AOT
 * model lacked was a parallel_for of its own, so a caller had to write a
 * thread pool to get one. Rather than a second implementation, NAME.c gets
 * the runtime's pool itself: src/runtime/threadpool.c, whose bytes the
 * Makefile embeds here ($(BUILD)/gen/threadpool_c.inc, as rt_header.c
 * embeds ravel_rt.h), compiled with RV_TP_EMBEDDED (static functions, calloc,
 * no process-wide pool; see that file). Around it this file prints the
 * model's pool: created on the first NAME_run with a NULL ctx, sized by
 * --threads or NAME_set_num_threads, and held by each run under a
 * read-write lock, so resizing waits for the runs in flight and runs never
 * see a pool being freed. Concurrent runs share the pool and take turns
 * on it loop by loop, as programs of the JIT do (threadpool.h).
 */
#include "codegen/codegen.h"

static const unsigned char pool_source[] = {
#include "threadpool_c.inc"
};

void cg_aot_emit_pool(Buf *b, const char *N, int threads) {
    buf_printf(b,
               "/* ---- the thread pool: ravel's src/runtime/threadpool.c, embedded ---- */\n\n"
               "#define RV_TP_EMBEDDED 1\n");
    buf_printf(b, "%.*s\n", (int)sizeof pool_source, (const char *)pool_source);
    buf_printf(b,
               "/* ---- %s's pool (src/codegen/c_aot_pool.c) ---- */\n\n"
               "static pthread_rwlock_t %s_pool_lock = PTHREAD_RWLOCK_INITIALIZER;\n"
               "static ThreadPool *%s_pool;             /* NULL until first used */\n"
               "static int32_t %s_pool_threads = %d; /* 0: $RAVEL_NUM_THREADS, else the CPUs */\n\n"
               "/* ctx->parallel_for: the caller holds %s_pool_lock for reading. */\n"
               "static void %s_pool_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int),\n"
               "                        void *closure) {\n"
               "    tp_parallel_for(%s_pool, n, fn, closure);\n}\n\n"
               "/* Makes ctx run its loops on the pool (started first if need be) and\n"
               " * holds the pool until %s_pool_give; without memory for it ctx stays\n"
               " * serial. */\n"
               "static void %s_pool_take(struct rv_rt_ctx *ctx) {\n"
               "    pthread_rwlock_rdlock(&%s_pool_lock);\n"
               "    if (!%s_pool) {\n"
               "        pthread_rwlock_unlock(&%s_pool_lock);\n"
               "        pthread_rwlock_wrlock(&%s_pool_lock);\n"
               "        if (!%s_pool)\n"
               "            %s_pool = tp_new(%s_pool_threads);\n"
               "        pthread_rwlock_unlock(&%s_pool_lock);\n"
               "        pthread_rwlock_rdlock(&%s_pool_lock);\n"
               "    }\n"
               "    if (%s_pool) {\n"
               "        ctx->parallel_for = %s_pool_for;\n"
               "        ctx->num_threads = tp_num_threads(%s_pool);\n"
               "    }\n}\n\n"
               "static void %s_pool_give(void) {\n"
               "    pthread_rwlock_unlock(&%s_pool_lock);\n}\n\n"
               "int32_t %s_set_num_threads(int32_t n) {\n"
               "    pthread_rwlock_wrlock(&%s_pool_lock); /* after the runs in flight */\n"
               "    tp_free(%s_pool);\n"
               "    %s_pool_threads = n > 0 ? n : 0;\n"
               "    %s_pool = tp_new(%s_pool_threads);\n"
               "    int32_t r = %s_pool ? tp_num_threads(%s_pool) : 1;\n"
               "    pthread_rwlock_unlock(&%s_pool_lock);\n"
               "    return r;\n}\n\n"
               "int32_t %s_num_threads(void) {\n"
               "    struct rv_rt_ctx c = {0};\n"
               "    c.num_threads = 1;\n"
               "    %s_pool_take(&c);\n"
               "    %s_pool_give();\n"
               "    return c.num_threads;\n}\n\n",
               N, N, N, N, threads, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N, N,
               N, N, N, N, N, N, N, N, N, N, N);
}
