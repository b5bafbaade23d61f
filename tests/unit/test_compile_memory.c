/*
 * test_compile_memory.c — compiling the same module many times in one
 * process takes bounded memory (a tuner compiles thousands of candidates).
 *
 * A compilation's schedule, stages, loop IR and kernels live in a compile
 * context freed when it ends (docs/pipeline.md, "Ownership"): the module
 * keeps no expression, axis or buffer of it, and a program only what its
 * runs read. The test compiles a ragged, padded, scheduled program 2,000
 * times (the JIT cache makes every C compile after the first a hit), runs
 * some of the programs against the interpreter, and checks
 *   - the module's hash-cons table and counters are where they were before
 *     the first compile, after every compile;
 *   - the bytes the allocator holds (mallinfo2, or ASan's count in the
 *     sanitizer build) do not grow between compile 100 and compile 2,000
 *     beyond a slack far below one compilation's IR: no growth
 *     proportional to the count.
 * Checking and tracing the schedule (which build it and drop it) leave the
 * module unchanged too.
 */
#include <malloc.h>
#include <unistd.h>

#include "harness.h"
#include "ir/ir.h"

#if defined(__SANITIZE_ADDRESS__)
/* libasan's (sanitizer/allocator_interface.h, which GCC may not install) */
size_t __sanitizer_get_current_allocated_bytes(void);
#define PROGRAM_CFLAGS "-fsanitize=address,undefined -fno-omit-frame-pointer"
static size_t heap_bytes(void) {
    return __sanitizer_get_current_allocated_bytes();
}
#else
#define PROGRAM_CFLAGS NULL
static size_t heap_bytes(void) {
    return mallinfo2().uordblks;
}
#endif

static char cache_dir[64];

/* examples/ragged_softmax.rv, shortened: ragged rows padded to 32, a
 * prelude for the row starts, fused and vectorized loops, reductions. */
static const char *const program =
    "size B in 1..8\n"
    "ufun len[b < B] in 1..40\n"
    "input S : f32[b < B, h < 2, i < len[b], j < len[b] pad 32]\n"
    "M[b, h, i] = max(j < len[b]) S[b, h, i, j]\n"
    "E[b, h, i, j] = exp(S[b, h, i, j] - M[b, h, i])\n"
    "Z[b, h, i] = sum(j < len[b]) E[b, h, i, j]\n"
    "P[b, h, i, j pad 32] = E[b, h, i, j] / Z[b, h, i]\n"
    "schedule M { fused = fuse(b, h)  parallel(fused)  jo, jv = split(j, 16)  vectorize(jv) }\n"
    "schedule Z { fused = fuse(b, h)  parallel(fused)  jo, jv = split(j, 16)  vectorize(jv) }\n"
    "schedule P { jo, jv = split(j, 8)  vectorize(jv) }\n";

/* The program's results against the interpreter's on one seed. */
static void check_run(rv_module *m, rv_program *p, uint64_t seed) {
    rv_bindings *b1 = rv_bindings_new(m), *b2 = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_randomize(b1, seed), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(b2, seed), RV_OK);
    CHECK_EQ_INT(rv_interp_run(m, b1), RV_OK);
    rv_status st = rv_program_run(p, b2);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "    %s\n", rv_last_error());
    CHECK_SAME_TENSOR(b1, b2, "P", 1e-5);
    rv_bindings_free(b1);
    rv_bindings_free(b2);
}

static void test_compile_2000_times(void) {
    enum { N = 2000, WARM = 100 };
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("ragged_softmax.rv", program, &m), RV_OK);
    if (!m)
        return;
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS};
    int n_exprs = m->n_exprs, table_len = m->table_len, n_axes = m->n_axes;
    int n_buffers = m->n_buffers, n_dims = m->dims.len;
    size_t warm = 0;
    int moved = 0;
    for (int i = 1; i <= N; i++) {
        rv_program *p = NULL;
        rv_status st = rv_program_compile(m, &opt, &p);
        if (st != RV_OK) {
            fprintf(stderr, "    compile %d: %s\n", i, rv_last_error());
            CHECK_EQ_INT(st, RV_OK);
            break;
        }
        /* the module is as it was: the compilation's IR went with it */
        moved += m->n_exprs != n_exprs || m->table_len != table_len || m->n_axes != n_axes ||
                 m->n_buffers != n_buffers || m->dims.len != n_dims;
        if (i == 1 || i % 400 == 0)
            check_run(m, p, (uint64_t)i);
        rv_program_free(p);
        if (i == WARM)
            warm = heap_bytes();
    }
    CHECK_EQ_INT(moved, 0);
    size_t end = heap_bytes();
    double growth = (double)end - (double)warm;
    fprintf(stderr, "    heap after compile %d: %zu bytes; after %d: %zu (%+.0f)\n", WARM, warm,
            N, end, growth);
    /* Before compile contexts, each compile of this program kept ~89 KB
     * (170 MB over the 1,900). What moves now is tens of KB and not
     * ravel's: valgrind finds the same blocks in use at exit after 200 and
     * after 600 compiles, and mallinfo2 counts glibc's per-thread caches
     * of freed chunks as in use. A lost kernel, stage or buffer would be
     * kilobytes per compile. */
    CHECK(growth < 256 * 1024);
    rv_module_free(m);
}

/* Checking a schedule and tracing it build the schedule and drop it. */
static void test_check_schedule_2000_times(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("ragged_softmax.rv", program, &m), RV_OK);
    if (!m)
        return;
    int n_exprs = m->n_exprs, table_len = m->table_len, n_axes = m->n_axes;
    size_t warm = 0;
    int moved = 0, failed = 0;
    for (int i = 1; i <= 2000; i++) {
        failed += rv_module_check_schedule(m) != RV_OK;
        char *trace = rv_module_schedule_trace(m);
        failed += !trace || !strstr(trace, "# stage M");
        rv_free(trace);
        moved += m->n_exprs != n_exprs || m->table_len != table_len || m->n_axes != n_axes;
        if (i == 100)
            warm = heap_bytes();
    }
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(moved, 0);
    CHECK((double)heap_bytes() - (double)warm < 64 * 1024);
    rv_module_free(m);
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-memory-XXXXXX");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_compile_2000_times);
    RUN(test_check_schedule_2000_times);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache_dir);
    return harness_report();
}
