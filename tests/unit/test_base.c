/*
 * test_base.c — unit tests for src/base: the allocation hook (live-byte
 * counting, failure injection, panics), arenas, Vec, Buf, hashing, the two
 * hash maps, interning, the thread-local last error, caret diagnostics, and
 * whole-file I/O.
 *
 * Panics abort the process, so the tests that expect one run the code in a
 * forked child and check its exit signal and what it wrote to stderr.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <threads.h>
#include <unistd.h>

#include "base/base.h"
#include "harness.h"

/* ---- helpers ---- */

/* Runs fn in a child with stderr captured; true when the child died of
 * SIGABRT. The captured text (up to cap-1 bytes) goes to out. */
static bool dies_with_abort(void (*fn)(void), char *out, size_t cap) {
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fds[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

/* ---- alloc.c ---- */

static void test_alloc_counts_live_bytes(void) {
    size_t base = base_alloc_live_bytes();
    char *p = base_malloc(100);
    CHECK(p != NULL);
    CHECK_EQ_INT(base_alloc_live_bytes(), base + 100);
    p = base_realloc(p, 1000);
    CHECK_EQ_INT(base_alloc_live_bytes(), base + 1000);
    p = base_realloc(p, 10);
    CHECK_EQ_INT(base_alloc_live_bytes(), base + 10);
    int *z = base_calloc(50, sizeof(int));
    CHECK_EQ_INT(base_alloc_live_bytes(), base + 10 + 50 * sizeof(int));
    int nonzero = 0;
    for (int i = 0; i < 50; i++)
        nonzero += z[i] != 0;
    CHECK_EQ_INT(nonzero, 0);
    CHECK(((uintptr_t)z % _Alignof(max_align_t)) == 0);
    base_free(p);
    base_free(z);
    base_free(NULL);
    CHECK_EQ_INT(base_alloc_live_bytes(), base);
    char *e = base_malloc(0); /* a real, freeable block */
    CHECK(e != NULL);
    base_free(e);
    char *s = base_xstrdup("ravel");
    CHECK(strcmp(s, "ravel") == 0);
    rv_free(s);
    CHECK_EQ_INT(base_alloc_live_bytes(), base);
}

static void test_alloc_fail_injection(void) {
    size_t base = base_alloc_live_bytes();
    base_alloc_fail_after(3);
    void *a = base_malloc(8);
    void *b = base_malloc(8);
    void *c = base_malloc(8); /* the third fails */
    void *d = base_malloc(8); /* and only the third */
    CHECK(a && b && !c && d);
    base_free(a);
    base_free(b);
    base_free(d);

    char *p = base_malloc(4);
    memcpy(p, "abc", 4);
    base_alloc_fail_after(1);
    char *q = base_realloc(p, 1 << 20);
    CHECK(q == NULL);
    CHECK(strcmp(p, "abc") == 0); /* a failed realloc leaves the block alone */
    base_free(p);

    base_alloc_fail_after(1);
    CHECK(base_calloc(4, 4) == NULL);
    base_alloc_fail_after(0);
    CHECK(base_calloc(SIZE_MAX / 2, 4) == NULL); /* overflow, not a huge block */
    CHECK(base_malloc(SIZE_MAX - 4) == NULL);
    CHECK_EQ_INT(base_alloc_live_bytes(), base);
}

static void xmalloc_fails(void) {
    base_alloc_fail_after(1);
    base_xmalloc(16);
}

static void test_alloc_x_panics(void) {
    char out[1024];
    CHECK(dies_with_abort(xmalloc_fails, out, sizeof out));
    CHECK_STR_CONTAINS(out, "out of memory");
}

/* ---- assert.c ---- */

static void dump_ir(void *ctx, FILE *f) {
    fprintf(f, "IR: %s\n", (const char *)ctx);
}

static void assert_fails(void) {
    base_panic_set_dump(dump_ir, "t = add(x, y)", NULL);
    int two = 2;
    RV_ASSERT(two + two == 5);
}

static void test_assert_panics_with_dump(void) {
    char out[1024];
    CHECK(dies_with_abort(assert_fails, out, sizeof out));
    CHECK_STR_CONTAINS(out, "test_base.c:");
    CHECK_STR_CONTAINS(out, "assertion failed: two + two == 5");
    CHECK_STR_CONTAINS(out, "IR: t = add(x, y)");
    void *old_ctx = (void *)1;
    CHECK(base_panic_set_dump(dump_ir, "a", &old_ctx) == NULL);
    CHECK(old_ctx == NULL);
    CHECK(base_panic_set_dump(NULL, NULL, &old_ctx) == dump_ir);
    CHECK(strcmp(old_ctx, "a") == 0);
}

/* ---- arena.c ---- */

static void test_arena(void) {
    size_t base = base_alloc_live_bytes();
    Arena *a = arena_new();
    int misaligned = 0, dirty = 0;
    for (int i = 0; i < 5000; i++) {
        size_t n = (size_t)(i % 97) + (i % 500 == 0 ? 100000 : 0);
        unsigned char *p = arena_alloc(a, n);
        misaligned += ((uintptr_t)p & 15) != 0;
        for (size_t k = 0; k < n; k++)
            dirty += p[k] != 0;
        memset(p, 0xAB, n); /* later allocations must not see this */
    }
    CHECK_EQ_INT(misaligned, 0);
    CHECK_EQ_INT(dirty, 0);
    CHECK(arena_alloc(a, 0) != arena_alloc(a, 0));
    CHECK(strcmp(arena_strdup(a, "hello"), "hello") == 0);
    CHECK(strcmp(arena_strndup(a, "hello world", 5), "hello") == 0);
    CHECK(strcmp(arena_strndup(a, "hi", 100), "hi") == 0); /* stops at the NUL */
    CHECK(strcmp(arena_printf(a, "%s-%d", "x", 42), "x-42") == 0);
    char big[3000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK(strcmp(arena_printf(a, "%s", big), big) == 0);
    double v[3] = {1, 2, 3};
    double *w = arena_memdup(a, v, sizeof v);
    CHECK(w != v && w[2] == 3);
    CHECK(base_alloc_live_bytes() > base);
    arena_free(a);
    arena_free(NULL);
    CHECK_EQ_INT(base_alloc_live_bytes(), base);
}

/* ---- Vec ---- */

static void test_vec(void) {
    Vec(int) v = {0};
    for (int i = 0; i < 1000; i++)
        vec_push(&v, i * i);
    CHECK_EQ_INT(v.len, 1000);
    CHECK(v.cap >= 1000);
    CHECK_EQ_INT(v.data[31], 961);
    CHECK_EQ_INT(vec_last(&v), 999 * 999);
    CHECK_EQ_INT(vec_pop(&v), 999 * 999);
    CHECK_EQ_INT(v.len, 999);
    vec_free(&v);
    CHECK(v.data == NULL && v.len == 0 && v.cap == 0);
}

/* ---- buf.c ---- */

static void test_buf(void) {
    Buf b = {0};
    CHECK(strcmp(buf_str(&b), "") == 0);
    buf_puts(&b, "for");
    buf_putc(&b, ' ');
    buf_printf(&b, "%s < %d:", "i", 16);
    buf_putc(&b, '\n');
    buf_indent(&b, 4);
    buf_puts(&b, "x");
    CHECK(strcmp(buf_str(&b), "for i < 16:\n    x") == 0);
    CHECK_EQ_INT(b.len, strlen("for i < 16:\n    x"));

    /* a long formatted piece, and pieces that alias the buffer itself */
    char big[1000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    buf_printf(&b, "[%s]", big);
    CHECK_EQ_INT(b.len, 17 + 1001);
    for (int i = 0; i < 5; i++)
        buf_puts(&b, buf_str(&b));
    CHECK_EQ_INT(b.len, 32 * 1018);
    buf_printf(&b, "%s", buf_str(&b));
    CHECK_EQ_INT(b.len, 64 * 1018);
    CHECK(strncmp(b.data + 32 * 1018, "for i < 16", 10) == 0);

    char *s = buf_take(&b);
    CHECK(b.data == NULL && b.len == 0);
    CHECK_EQ_INT(strlen(s), 64 * 1018);
    base_free(s);
    s = buf_take(&b); /* an empty Buf gives "" */
    CHECK(s && s[0] == '\0');
    base_free(s);
    buf_putc(&b, 'a');
    buf_free(&b);
    CHECK(b.data == NULL);
}

/* ---- hash.c ---- */

static void test_hash(void) {
    const char *s = "the quick brown fox jumps over the lazy dog";
    CHECK(hash_str(s) == hash_bytes(s, strlen(s), 0));
    CHECK(hash_str(s) != hash_bytes(s, strlen(s), 1));
    CHECK(hash_str("") != hash_str("a"));
    CHECK(hash_bytes("a\0", 2, 0) != hash_bytes("a", 1, 0)); /* length matters */
    /* every prefix length hashes differently (tail handling) */
    int same = 0;
    for (size_t n = 1; n <= strlen(s); n++)
        same += hash_bytes(s, n, 0) == hash_bytes(s, n - 1, 0);
    CHECK_EQ_INT(same, 0);
    CHECK(hash_combine(hash_combine(0, 1), 2) != hash_combine(hash_combine(0, 2), 1));
    CHECK(hash_combine(7, 1) != hash_combine(7, 2));

    /* Values are pinned: the JIT cache names files by them on every
     * machine. Change them only together with the cache format. */
    char hex[17];
    hash_hex(0x0123456789abcdefull, hex);
    CHECK(strcmp(hex, "0123456789abcdef") == 0);
    hash_hex(0, hex);
    CHECK(strcmp(hex, "0000000000000000") == 0);
    hash_hex(hash_str("ravel"), hex);
    CHECK(strcmp(hex, "c060cdd9516e9c9c") == 0);
    if (strcmp(hex, "c060cdd9516e9c9c") != 0)
        fprintf(stderr, "    hash_str(\"ravel\") = %s\n", hex);

    /* low bits spread evenly over consecutive integers */
    int buckets[64] = {0};
    for (uint64_t i = 0; i < 64 * 200; i++)
        buckets[hash_bytes(&i, sizeof i, 0) & 63]++;
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < 64; i++) {
        lo = buckets[i] < lo ? buckets[i] : lo;
        hi = buckets[i] > hi ? buckets[i] : hi;
    }
    CHECK(lo > 130 && hi < 270);
}

/* ---- map.c ---- */

static void test_strmap(void) {
    size_t base = base_alloc_live_bytes();
    Arena *a = arena_new();
    StrMap m = {0};
    CHECK(strmap_get(&m, "x") == NULL && !strmap_has(&m, "x"));
    enum { N = 20000 };
    const char **keys = base_xmalloc(N * sizeof *keys);
    int overfull = 0;
    for (int i = 0; i < N; i++) {
        keys[i] = arena_printf(a, "key%d", i);
        strmap_put(&m, keys[i], (void *)(intptr_t)(i + 1));
        overfull += m.len * 10 > m.cap * 7; /* grown at 70% */
    }
    CHECK_EQ_INT(overfull, 0);
    CHECK_EQ_INT(m.len, N);
    CHECK((m.cap & (m.cap - 1)) == 0);
    int wrong = 0;
    for (int i = 0; i < N; i++) {
        char probe[32];
        snprintf(probe, sizeof probe, "key%d", i); /* a different pointer, same text */
        wrong += strmap_get(&m, probe) != (void *)(intptr_t)(i + 1);
        wrong += !strmap_has(&m, probe);
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK(!strmap_has(&m, "key20000") && !strmap_has(&m, "") && !strmap_has(&m, "key"));
    strmap_put(&m, "key5", NULL); /* replace; NULL values still count as present */
    CHECK_EQ_INT(m.len, N);
    CHECK(strmap_has(&m, "key5") && strmap_get(&m, "key5") == NULL);
    CHECK(strmap_key_n(&m, "key123456", 6) == keys[123]);
    CHECK(strmap_key_n(&m, "key1\0zzz", 8) == keys[1]);
    CHECK(strmap_key_n(&m, "nope", 4) == NULL);
    strmap_put(&m, "", (void *)1); /* the empty string is a key like any other */
    CHECK(strmap_get(&m, "") == (void *)1);
    strmap_free(&m);
    CHECK(m.keys == NULL && m.len == 0 && m.cap == 0);
    base_free(keys);
    arena_free(a);
    CHECK_EQ_INT(base_alloc_live_bytes(), base);
}

static void test_ptrmap(void) {
    size_t base = base_alloc_live_bytes();
    enum { N = 20000 };
    int *objs = base_xmalloc(N * sizeof *objs);
    PtrMap m = {0};
    int overfull = 0;
    CHECK(!ptrmap_has(&m, objs));
    for (int i = 0; i < N; i++) {
        ptrmap_put(&m, &objs[i], (void *)(intptr_t)(N - i));
        overfull += m.len * 10 > m.cap * 7;
    }
    CHECK_EQ_INT(overfull, 0);
    CHECK_EQ_INT(m.len, N);
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += ptrmap_get(&m, &objs[i]) != (void *)(intptr_t)(N - i);
    CHECK_EQ_INT(wrong, 0);
    int other;
    CHECK(!ptrmap_has(&m, &other) && ptrmap_get(&m, &other) == NULL);
    ptrmap_put(&m, &objs[7], NULL);
    CHECK(ptrmap_has(&m, &objs[7]) && ptrmap_get(&m, &objs[7]) == NULL);
    CHECK_EQ_INT(m.len, N);
    ptrmap_free(&m);
    base_free(objs);
    CHECK_EQ_INT(base_alloc_live_bytes(), base);
}

/* ---- intern.c ---- */

static void test_intern(void) {
    size_t base = base_alloc_live_bytes();
    Interner in;
    interner_init(&in);
    char buf[16] = "tensor";
    const char *a = intern(&in, "tensor");
    CHECK(a != buf && strcmp(a, "tensor") == 0);
    CHECK(intern(&in, buf) == a);
    CHECK(intern_n(&in, "tensors", 6) == a);
    CHECK(intern_n(&in, "tens", 4) != a);
    CHECK(strcmp(intern_n(&in, "tens", 4), "tens") == 0);
    CHECK(intern_n(&in, "ab\0cd", 5) == intern(&in, "ab"));
    CHECK(intern(&in, "") == intern_n(&in, "xyz", 0));
    const char *first[3000];
    for (int i = 0; i < 3000; i++) {
        snprintf(buf, sizeof buf, "v%d", i);
        first[i] = intern(&in, buf);
    }
    int wrong = 0;
    for (int i = 0; i < 3000; i++) {
        snprintf(buf, sizeof buf, "v%d", i);
        wrong += intern(&in, buf) != first[i];
    }
    CHECK_EQ_INT(wrong, 0);
    interner_free(&in);
    CHECK_EQ_INT(base_alloc_live_bytes(), base);
}

/* ---- error.c ---- */

static void test_error_basics(void) {
    base_error_clear();
    CHECK(strcmp(rv_last_error(), "") == 0);
    CHECK(base_error_status() == RV_OK);
    rv_status st = base_error(RV_ERR_IO, "%s: cannot open: %s", "x.npy", "No such file");
    CHECK(st == RV_ERR_IO && base_error_status() == RV_ERR_IO);
    CHECK(strcmp(rv_last_error(), "x.npy: cannot open: No such file") == 0);
    /* wrapping the previous message in a new one */
    base_error(RV_ERR_ARG, "loading weights: %s", rv_last_error());
    CHECK(strcmp(rv_last_error(), "loading weights: x.npy: cannot open: No such file") == 0);
    /* long messages are not truncated (compiler logs) */
    char *log = base_xmalloc(20001);
    memset(log, 'e', 20000);
    log[20000] = '\0';
    base_error(RV_ERR_COMPILER, "cc failed:\n%s", log);
    CHECK_EQ_INT(strlen(rv_last_error()), strlen("cc failed:\n") + 20000);
    base_free(log);
    /* reporting works while the allocation hook is failing on purpose */
    base_alloc_fail_after(1);
    base_error(RV_ERR_OOM, "out of memory (%d)", 7);
    base_alloc_fail_after(0);
    CHECK(strcmp(rv_last_error(), "out of memory (7)") == 0);
    base_error_clear();
    CHECK(strcmp(rv_last_error(), "") == 0 && base_error_status() == RV_OK);

    CHECK(strcmp(rv_status_name(RV_OK), "ok") == 0);
    CHECK(strcmp(rv_status_name(RV_ERR_IO), "i/o error") == 0);
    CHECK(strcmp(rv_status_name(RV_ERR_UNSUPPORTED), "unsupported") == 0);
    CHECK(strcmp(rv_status_name(RV_STATUS_COUNT), "unknown status") == 0);
    CHECK(strcmp(rv_status_name((rv_status)-1), "unknown status") == 0);
    for (int s = 0; s < RV_STATUS_COUNT; s++)
        CHECK(rv_status_name((rv_status)s) != NULL);
}

static int thread_sets_error(void *arg) {
    (void)arg;
    if (strcmp(rv_last_error(), "") != 0)
        return 1; /* another thread's error leaked in */
    base_error(RV_ERR_SHAPE, "worker error %d", 2);
    return strcmp(rv_last_error(), "worker error 2") == 0 ? 0 : 2;
}

/* The message is per thread, and a thread's buffer is freed when it exits
 * (LeakSanitizer would report it otherwise). */
static void test_error_thread_local(void) {
    base_error(RV_ERR_TYPE, "main error");
    for (int i = 0; i < 4; i++) {
        thrd_t t;
        int res = -1;
        CHECK(thrd_create(&t, thread_sets_error, NULL) == thrd_success);
        thrd_join(t, &res);
        CHECK_EQ_INT(res, 0);
    }
    CHECK(strcmp(rv_last_error(), "main error") == 0);
    CHECK(base_error_status() == RV_ERR_TYPE);
}

static void test_diag(void) {
    const char *text = "size T in 1..128\n"
                       "input X : f32[T, 4]\n"
                       "Y[i, j] = Xq[i, j] * 2\n"
                       "\tZ[i] =\t\tW[i]\r\n"
                       "s = \"\xc3\xa9t\xc3\xa9\" + q";
    SrcFile src = {"file.rv", text, strlen(text)};

    rv_status st =
        base_diag(RV_ERR_TYPE, &src, (SrcLoc){"file.rv", 3, 11}, "undefined name '%s'", "Xq");
    CHECK(st == RV_ERR_TYPE && base_error_status() == RV_ERR_TYPE);
    CHECK(strcmp(rv_last_error(), "file.rv:3:11: error: undefined name 'Xq'\n"
                                  "    3 | Y[i, j] = Xq[i, j] * 2\n"
                                  "      |           ^") == 0);

    /* tabs are repeated in the caret line; the CR of a CRLF is dropped */
    base_diag(RV_ERR_TYPE, &src, (SrcLoc){"file.rv", 4, 10}, "undefined tensor 'W'");
    CHECK(strcmp(rv_last_error(), "file.rv:4:10: error: undefined tensor 'W'\n"
                                  "    4 | \tZ[i] =\t\tW[i]\n"
                                  "      | \t      \t\t^") == 0);

    /* UTF-8: the caret lines up under characters, not bytes */
    base_diag(RV_ERR_SYNTAX, &src, (SrcLoc){"file.rv", 5, 14}, "undefined name 'q'");
    CHECK(strcmp(rv_last_error(), "file.rv:5:14: error: undefined name 'q'\n"
                                  "    5 | s = \"\xc3\xa9t\xc3\xa9\" + q\n"
                                  "      |            ^") == 0);

    /* a caret just past the end of the line */
    base_diag(RV_ERR_SYNTAX, &src, (SrcLoc){"file.rv", 1, 17}, "expected ':'");
    CHECK(strcmp(rv_last_error(), "file.rv:1:17: error: expected ':'\n"
                                  "    1 | size T in 1..128\n"
                                  "      |                 ^") == 0);
    /* a bogus column is clamped there too */
    base_diag(RV_ERR_SYNTAX, &src, (SrcLoc){"file.rv", 1, 900}, "x");
    CHECK_STR_CONTAINS(rv_last_error(), "\n      |                 ^");

    /* column 1 */
    base_diag(RV_ERR_SYNTAX, &src, (SrcLoc){"file.rv", 2, 1}, "bad");
    CHECK(strcmp(rv_last_error(), "file.rv:2:1: error: bad\n"
                                  "    2 | input X : f32[T, 4]\n"
                                  "      | ^") == 0);

    /* no source, a missing line, no column, no line, no file */
    base_diag(RV_ERR_TYPE, NULL, (SrcLoc){"file.rv", 3, 11}, "no source");
    CHECK(strcmp(rv_last_error(), "file.rv:3:11: error: no source") == 0);
    base_diag(RV_ERR_TYPE, &src, (SrcLoc){"file.rv", 9, 1}, "past the end");
    CHECK(strcmp(rv_last_error(), "file.rv:9:1: error: past the end") == 0);
    base_diag(RV_ERR_TYPE, &src, (SrcLoc){"file.rv", 2, 0}, "no column");
    CHECK(strcmp(rv_last_error(), "file.rv:2: error: no column\n"
                                  "    2 | input X : f32[T, 4]") == 0);
    base_diag(RV_ERR_TYPE, &src, (SrcLoc){"file.rv", 0, 0}, "whole file");
    CHECK(strcmp(rv_last_error(), "file.rv: error: whole file") == 0);
    base_diag(RV_ERR_ARG, NULL, (SrcLoc){NULL, 0, 0}, "from the C API");
    CHECK(strcmp(rv_last_error(), "error: from the C API") == 0);
    base_diag(RV_ERR_ARG, &src, (SrcLoc){NULL, 2, 7}, "no file name");
    CHECK(strcmp(rv_last_error(), "error: no file name\n"
                                  "    2 | input X : f32[T, 4]\n"
                                  "      |       ^") == 0);

    /* a wide line number widens the gutter on both lines */
    Buf b = {0};
    for (int i = 1; i < 123456; i++)
        buf_putc(&b, '\n');
    buf_puts(&b, "abc");
    SrcFile big = {"big.rv", b.data, b.len};
    base_diag(RV_ERR_SYNTAX, &big, (SrcLoc){"big.rv", 123456, 2}, "here");
    CHECK(strcmp(rv_last_error(), "big.rv:123456:2: error: here\n"
                                  "123456 | abc\n"
                                  "       |  ^") == 0);
    buf_free(&b);
    base_error_clear();
}

/* ---- file.c ---- */

static void test_file(void) {
    char dir[] = "/tmp/ravel_test_base_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof path, "%s/f.txt", dir);
    size_t base = base_alloc_live_bytes();

    CHECK(base_write_file(path, "hello\0world", 11) == RV_OK);
    char *data;
    size_t len;
    CHECK(base_read_file(path, &data, &len) == RV_OK);
    CHECK(len == 11 && memcmp(data, "hello\0world", 12) == 0);
    base_free(data);

    /* bigger than the reader's first block */
    size_t n = 100000;
    char *blob = base_xmalloc(n);
    for (size_t i = 0; i < n; i++)
        blob[i] = (char)(i * 7);
    CHECK(base_write_file(path, blob, n) == RV_OK);
    CHECK(base_read_file(path, &data, &len) == RV_OK);
    CHECK(len == n && memcmp(data, blob, n) == 0 && data[n] == '\0');
    base_free(data);
    base_free(blob);

    CHECK(base_write_file(path, "", 0) == RV_OK);
    CHECK(base_read_file(path, &data, NULL) == RV_OK);
    CHECK(data[0] == '\0');
    base_free(data);
    CHECK_EQ_INT(base_alloc_live_bytes(), base);

    char missing[160];
    snprintf(missing, sizeof missing, "%s/missing.txt", dir);
    CHECK(base_read_file(missing, &data, &len) == RV_ERR_IO);
    CHECK(data == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "missing.txt: cannot open");
    CHECK(base_read_file(dir, &data, &len) == RV_ERR_IO); /* a directory */
    CHECK_STR_CONTAINS(rv_last_error(), "cannot read");
    snprintf(missing, sizeof missing, "%s/no/such/dir.txt", dir);
    CHECK(base_write_file(missing, "x", 1) == RV_ERR_IO);
    CHECK_STR_CONTAINS(rv_last_error(), "cannot create");

    base_alloc_fail_after(1);
    CHECK(base_read_file(path, &data, &len) == RV_ERR_OOM);
    CHECK_EQ_INT(base_alloc_live_bytes(), base);

    remove(path);
    rmdir(dir);
}

/* The "did you mean" of every unknown-name error (near.c). */
static bool same(const char *a, const char *b) {
    return a && strcmp(a, b) == 0;
}

static void test_near_name(void) {
    CHECK_EQ_INT(base_edit_distance("", ""), 0);
    CHECK_EQ_INT(base_edit_distance("split", "splt"), 1);
    CHECK_EQ_INT(base_edit_distance("size", "szie"), 1); /* a transposition is one edit */
    CHECK_EQ_INT(base_edit_distance("kitten", "sitting"), 3);
    const char *cands[] = {"size", "ufun", "input", "schedule", NULL};
    CHECK(same(base_near_name("szie", cands, 5), "size"));
    CHECK(same(base_near_name("inptu", cands, 5), "input"));
    CHECK(same(base_near_name("shedule", cands, 5), "schedule"));
    CHECK(base_near_name("tensor", cands, 5) == NULL); /* nothing near */
    CHECK(base_near_name("size", cands, 5) == NULL);   /* itself is no suggestion */
    const char *loops[] = {"i", "j", "T"};
    CHECK(base_near_name("k", loops, 3) == NULL); /* one letter is never half kept */
    CHECK(same(base_near_name("ii", loops, 3), "i"));
    CHECK(same(base_near_name("t", loops, 3), "T")); /* case only */
    Buf b = {0};
    base_near_hint(&b, "splt", (const char *const[]){"split", "fuse"}, 2);
    CHECK(same(buf_str(&b), "; did you mean 'split'?"));
    buf_free(&b);
    base_near_hint(&b, "xyz", (const char *const[]){"split", "fuse"}, 2);
    CHECK(same(buf_str(&b), ""));
    buf_free(&b);
}

int main(void) {
    RUN(test_alloc_counts_live_bytes);
    RUN(test_alloc_fail_injection);
    RUN(test_alloc_x_panics);
    RUN(test_assert_panics_with_dump);
    RUN(test_arena);
    RUN(test_vec);
    RUN(test_buf);
    RUN(test_hash);
    RUN(test_strmap);
    RUN(test_ptrmap);
    RUN(test_intern);
    RUN(test_error_basics);
    RUN(test_error_thread_local);
    RUN(test_diag);
    RUN(test_file);
    RUN(test_near_name);
    return harness_report();
}
