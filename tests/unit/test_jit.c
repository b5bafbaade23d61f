/*
 * test_jit.c — the JIT: compile and call, the on-disk cache (hits,
 * corruption, concurrent writers, unusable directories), compiler failures,
 * the embedded ravel_rt.h, and NVRTC where it is installed.
 *
 * Every test points RAVEL_CACHE_DIR at its own directory under a fresh
 * temporary root, so counts of cache entries and of compiles are exact and
 * nothing leaks into the user's cache. Counters are process-wide, so tests
 * compare jit_stats() before and after.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "jit/jit.h"

static char cache_root[PATH_MAX];

/* Points RAVEL_CACHE_DIR at <root>/<name> (created by the JIT) and returns
 * that path in a static buffer. */
static const char *use_cache(const char *name) {
    static char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/%s", cache_root, name);
    setenv("RAVEL_CACHE_DIR", dir, 1);
    return dir;
}

/* Number of entries in dir whose name starts with prefix and ends with
 * suffix. */
static int count_files(const char *dir, const char *prefix, const char *suffix) {
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && len >= sl &&
            strcmp(e->d_name + len - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

/* rm -rf without a shell. */
static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[PATH_MAX + 256];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            remove_tree(p);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static off_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

typedef int (*IntFn2)(int, int);
typedef double (*DoubleFn)(double);
typedef int (*IntFn0)(void);
typedef int (*IntFn1)(int);
typedef long (*LongFn)(long);

static const char *ADD_SRC = "#include \"ravel_rt.h\" /* the embedded copy, by default */\n"
                             "int add(int a, int b) { return a + b + RV_RT_ALIGN - 64; }\n";

static void test_compile_and_call(void) {
    const char *dir = use_cache("basic");
    JitStats s0 = jit_stats();
    JitLib *lib = NULL;
    rv_status st = jit_compile(ADD_SRC, NULL, &lib);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s\n", rv_last_error());
        return;
    }
    IntFn2 add = (IntFn2)jit_fn(lib, "add");
    CHECK(add != NULL);
    if (add)
        CHECK_EQ_INT(add(2, 3), 5);
    JitStats s1 = jit_stats();
    CHECK_EQ_INT(s1.compiles - s0.compiles, 1);
    CHECK_EQ_INT(s1.cache_hits - s0.cache_hits, 0);
    CHECK(s1.compile_seconds > s0.compile_seconds);
    CHECK(strncmp(jit_lib_path(lib), dir, strlen(dir)) == 0);
    CHECK_EQ_INT(strlen(jit_lib_key(lib)), 32);
    CHECK_EQ_INT(count_files(dir, "", ".so"), 1);
    CHECK_EQ_INT(count_files(dir, "tmp-", ""), 0);

    CHECK(jit_sym(lib, "no_such_symbol") == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "no_such_symbol");

    /* The second compile of the same input is a cache hit, also while the
     * first library is still open. */
    JitLib *again = NULL;
    CHECK_EQ_INT(jit_compile(ADD_SRC, NULL, &again), RV_OK);
    JitStats s2 = jit_stats();
    CHECK_EQ_INT(s2.compiles - s1.compiles, 0);
    CHECK_EQ_INT(s2.cache_hits - s1.cache_hits, 1);
    if (again) {
        CHECK_EQ_INT(((IntFn2)jit_fn(again, "add"))(40, 2), 42);
        CHECK(strcmp(jit_lib_key(again), jit_lib_key(lib)) == 0);
    }
    jit_close(again);
    jit_close(lib);

    /* And after closing everything. */
    CHECK_EQ_INT(jit_compile(ADD_SRC, NULL, &lib), RV_OK);
    JitStats s3 = jit_stats();
    CHECK_EQ_INT(s3.compiles - s2.compiles, 0);
    CHECK_EQ_INT(s3.cache_hits - s2.cache_hits, 1);
    jit_close(lib);
    jit_close(NULL);
}

/* Damages the cache entry at path in one of several ways. */
static void corrupt(const char *path, int how) {
    off_t n = file_size(path);
    if (how == 0) { /* truncated to half */
        CHECK(truncate(path, n / 2) == 0);
    } else if (how == 1) { /* same size, all garbage */
        int fd = open(path, O_WRONLY);
        char junk[256];
        memset(junk, 0xAB, sizeof junk);
        for (off_t done = 0; done < n; done += (off_t)sizeof junk)
            CHECK(write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
        CHECK(ftruncate(fd, n) == 0);
        close(fd);
    } else if (how == 2) { /* one byte flipped in the middle */
        int fd = open(path, O_RDWR);
        unsigned char c = 0;
        CHECK(pread(fd, &c, 1, n / 2) == 1);
        c ^= 0x5A;
        CHECK(pwrite(fd, &c, 1, n / 2) == 1);
        close(fd);
    } else if (how == 3) { /* empty */
        CHECK(truncate(path, 0) == 0);
    } else { /* only the trailer cut off (8 + 32 + 16 bytes): still a valid ELF object */
        CHECK(truncate(path, n - 56) == 0);
    }
}

static void test_corrupt_entry_rebuilt(void) {
    const char *dir = use_cache("corrupt");
    const char *src = "double scale(double x) { return 3.0 * x; }\n";
    JitLib *lib = NULL;
    CHECK_EQ_INT(jit_compile(src, NULL, &lib), RV_OK);
    if (!lib)
        return;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", jit_lib_path(lib));
    jit_close(lib);

    for (int how = 0; how < 5; how++) {
        corrupt(path, how);
        JitStats s0 = jit_stats();
        lib = NULL;
        rv_status st = jit_compile(src, NULL, &lib);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK) {
            fprintf(stderr, "corruption %d: %s\n", how, rv_last_error());
            continue;
        }
        JitStats s1 = jit_stats();
        CHECK_EQ_INT(s1.rebuilds - s0.rebuilds, 1);
        CHECK_EQ_INT(s1.compiles - s0.compiles, 1);
        CHECK_EQ_INT(s1.cache_hits - s0.cache_hits, 0);
        CHECK_NEAR(((DoubleFn)jit_fn(lib, "scale"))(1.5), 4.5, 1e-12);
        jit_close(lib);
    }
    CHECK_EQ_INT(count_files(dir, "", ".so"), 1);
    CHECK_EQ_INT(count_files(dir, "tmp-", ""), 0);

    /* A missing entry is an ordinary compile, not a rebuild. */
    unlink(path);
    JitStats s0 = jit_stats();
    CHECK_EQ_INT(jit_compile(src, NULL, &lib), RV_OK);
    JitStats s1 = jit_stats();
    CHECK_EQ_INT(s1.compiles - s0.compiles, 1);
    CHECK_EQ_INT(s1.rebuilds - s0.rebuilds, 0);
    jit_close(lib);
}

/* A valid entry copied over another key's entry (its checksum holds) is
 * another program: detected before dlopen and rebuilt, not loaded. */
static void test_entry_of_other_key(void) {
    use_cache("other_key");
    const char *src = "int which(void) { return 1; }\n";
    const char *other = "int which(void) { return 2; }\n";
    JitLib *lib = NULL, *olib = NULL;
    CHECK_EQ_INT(jit_compile(src, NULL, &lib), RV_OK);
    CHECK_EQ_INT(jit_compile(other, NULL, &olib), RV_OK);
    if (!lib || !olib)
        return;
    char path[PATH_MAX], cmd[2 * PATH_MAX + 16];
    snprintf(path, sizeof path, "%s", jit_lib_path(lib));
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", jit_lib_path(olib), path);
    jit_close(lib);
    jit_close(olib);
    CHECK_EQ_INT(system(cmd), 0);
    JitStats s0 = jit_stats();
    lib = NULL;
    CHECK_EQ_INT(jit_compile(src, NULL, &lib), RV_OK);
    JitStats s1 = jit_stats();
    CHECK_EQ_INT(s1.rebuilds - s0.rebuilds, 1);
    CHECK_EQ_INT(s1.cache_hits - s0.cache_hits, 0);
    if (lib)
        CHECK_EQ_INT(((IntFn0)jit_fn(lib, "which"))(), 1);
    jit_close(lib);
}

static void test_compiler_error(void) {
    use_cache("errors");
    const char *src = "int fine(void) { return 1; }\n"
                      "\n"
                      "int broken(void) { return 1 +; }\n";
    JitLib *lib = NULL;
    rv_status st = jit_compile(src, NULL, &lib);
    CHECK_EQ_INT(st, RV_ERR_COMPILER);
    CHECK(lib == NULL);
    const char *msg = rv_last_error();
    CHECK_STR_CONTAINS(msg, ":3:");   /* the offending line */
    CHECK_STR_CONTAINS(msg, "error"); /* the compiler's own words */
    CHECK_STR_CONTAINS(msg, "-O3");   /* the command line */
    CHECK_STR_CONTAINS(msg, "source kept at: ");

    /* The kept source is there and is exactly what we compiled. */
    const char *p = strstr(msg, "source kept at: ");
    if (p) {
        p += strlen("source kept at: ");
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%.*s", (int)strcspn(p, "\n"), p);
        FILE *f = fopen(path, "r");
        CHECK(f != NULL);
        if (f) {
            char text[256] = {0};
            size_t n = fread(text, 1, sizeof text - 1, f);
            fclose(f);
            CHECK_EQ_INT(n, strlen(src));
            CHECK(strcmp(text, src) == 0);
        }
        unlink(path);
    }
}

static void test_missing_compiler(void) {
    use_cache("missing");
    setenv("RAVEL_CC", "/nonexistent/cc", 1);
    JitLib *lib = NULL;
    rv_status st = jit_compile(ADD_SRC, NULL, &lib);
    unsetenv("RAVEL_CC");
    CHECK_EQ_INT(st, RV_ERR_COMPILER);
    CHECK(lib == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "/nonexistent/cc");
    CHECK_STR_CONTAINS(rv_last_error(), "not found");

    /* The option wins over the environment; a compiler that cannot even
     * print its version is reported as not working. */
    JitOptions opt = {.cc = "false"};
    st = jit_compile(ADD_SRC, &opt, &lib);
    CHECK_EQ_INT(st, RV_ERR_COMPILER);
    CHECK_STR_CONTAINS(rv_last_error(), "does not work");
}

static void test_unusable_cache_dir(void) {
    /* A directory below a regular file can never be created, not even by
     * root (for whom permission bits would not matter). */
    char file[PATH_MAX + 16];
    snprintf(file, sizeof file, "%s/plain-file", cache_root);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/sub", file);
    setenv("RAVEL_CACHE_DIR", dir, 1);
    JitLib *lib = NULL;
    rv_status st = jit_compile("int seven(void) { return 7; }\n", NULL, &lib);
    CHECK_EQ_INT(st, RV_OK);
    if (!lib) {
        fprintf(stderr, "%s\n", rv_last_error());
        return;
    }
    CHECK_EQ_INT(((IntFn0)jit_fn(lib, "seven"))(), 7);
    CHECK(strncmp(jit_lib_path(lib), file, strlen(file)) != 0);
    jit_close(lib);
    /* The private directory lasts as long as the process. */
    JitStats s0 = jit_stats();
    CHECK_EQ_INT(jit_compile("int seven(void) { return 7; }\n", NULL, &lib), RV_OK);
    CHECK_EQ_INT(jit_stats().cache_hits - s0.cache_hits, 1);
    jit_close(lib);
}

static void test_flags_and_options(void) {
    const char *dir = use_cache("flags");
    const char *src = "int value(void) { return VALUE; }\n";
    const char *f42[] = {"-DVALUE=42"}, *f7[] = {"-DVALUE=7"};
    JitOptions o42 = {.extra_flags = f42, .n_extra_flags = 1};
    JitOptions o7 = {.extra_flags = f7, .n_extra_flags = 1};
    JitLib *a = NULL, *b = NULL;
    CHECK_EQ_INT(jit_compile(src, &o42, &a), RV_OK);
    CHECK_EQ_INT(jit_compile(src, &o7, &b), RV_OK);
    if (a && b) {
        CHECK_EQ_INT(((IntFn0)jit_fn(a, "value"))(), 42);
        CHECK_EQ_INT(((IntFn0)jit_fn(b, "value"))(), 7);
        CHECK(strcmp(jit_lib_key(a), jit_lib_key(b)) != 0);
    }
    jit_close(a);
    jit_close(b);
    CHECK_EQ_INT(count_files(dir, "", ".so"), 2);

    /* An explicit include directory, and the cache_dir option. */
    char cdir[PATH_MAX + 16];
    snprintf(cdir, sizeof cdir, "%s/explicit", cache_root);
    JitOptions oi = {.include_dir = "/nonexistent-include", .cache_dir = cdir};
    rv_status st = jit_compile(ADD_SRC, &oi, &a);
    CHECK_EQ_INT(st, RV_ERR_COMPILER);
    CHECK_STR_CONTAINS(rv_last_error(), "-I/nonexistent-include");
    CHECK_STR_CONTAINS(rv_last_error(), "ravel_rt.h");

    /* OpenMP, when the compiler has it. */
    const char *omp_src = "long tri(long n) {\n"
                          "    long s = 0;\n"
                          "#pragma omp parallel for reduction(+ : s)\n"
                          "    for (long i = 0; i < n; i++)\n"
                          "        s += i;\n"
                          "    return s;\n"
                          "}\n";
    JitOptions oo = {.openmp = true};
    st = jit_compile(omp_src, &oo, &a);
    if (st != RV_OK) {
        printf("skip openmp: %.200s\n", rv_last_error());
    } else {
        CHECK_EQ_INT(((LongFn)jit_fn(a, "tri"))(100000), 100000L * 99999 / 2);
        jit_close(a);
    }

#if defined(__SANITIZE_ADDRESS__)
    /* Generated code can be sanitized too when the host carries the
     * runtime. */
    const char *san[] = {"-fsanitize=address,undefined", "-fno-omit-frame-pointer"};
    JitOptions os = {.extra_flags = san, .n_extra_flags = 2};
    st = jit_compile("int twice(int x) { return 2 * x; }\n", &os, &a);
    CHECK_EQ_INT(st, RV_OK);
    if (st == RV_OK) {
        CHECK_EQ_INT(((IntFn1)jit_fn(a, "twice"))(21), 42);
        jit_close(a);
    } else {
        fprintf(stderr, "%s\n", rv_last_error());
    }
#endif
}

/* Four processes compile the same new source at the same moment: all of
 * them succeed and the cache holds one entry and no temporaries. */
static void test_concurrent_processes(void) {
    const char *dir = use_cache("concurrent");
    const char *src = "int mul(int a, int b) { return a * b; } /* concurrent */\n";
    enum { NPROC = 4 };
    int go[2];
    CHECK(pipe(go) == 0);
    fflush(NULL);
    pid_t kids[NPROC];
    for (int i = 0; i < NPROC; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            close(go[1]);
            char c;
            while (read(go[0], &c, 1) < 0) { /* wait for the parent to close go[1] */
            }
            JitLib *lib = NULL;
            int ok =
                jit_compile(src, NULL, &lib) == RV_OK && ((IntFn2)jit_fn(lib, "mul"))(6, 7) == 42;
            if (!ok)
                fprintf(stderr, "child %d: %s\n", i, rv_last_error());
            jit_close(lib);
            _exit(ok ? 0 : 1);
        }
        CHECK(kids[i] > 0);
    }
    close(go[0]);
    close(go[1]); /* every child's read returns now */
    for (int i = 0; i < NPROC; i++) {
        int ws = 0;
        if (kids[i] > 0) {
            CHECK(waitpid(kids[i], &ws, 0) == kids[i]);
            CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
        }
    }
    CHECK_EQ_INT(count_files(dir, "", ".so"), 1);
    CHECK_EQ_INT(count_files(dir, "tmp-", ""), 0);
    /* And the entry they left is good. */
    JitStats s0 = jit_stats();
    JitLib *lib = NULL;
    CHECK_EQ_INT(jit_compile(src, NULL, &lib), RV_OK);
    CHECK_EQ_INT(jit_stats().cache_hits - s0.cache_hits, 1);
    jit_close(lib);
}

typedef struct ThreadArg {
    const char *src;
    int ok;
} ThreadArg;

static void *compile_thread(void *arg) {
    ThreadArg *a = arg;
    JitLib *lib = NULL;
    a->ok = jit_compile(a->src, NULL, &lib) == RV_OK && ((IntFn2)jit_fn(lib, "sub"))(5, 3) == 2;
    jit_close(lib);
    return NULL;
}

/* The same from threads of one process. */
static void test_concurrent_threads(void) {
    const char *dir = use_cache("threads");
    enum { NTH = 4 };
    pthread_t th[NTH];
    ThreadArg args[NTH];
    for (int i = 0; i < NTH; i++) {
        args[i] = (ThreadArg){"int sub(int a, int b) { return a - b; }\n", 0};
        CHECK(pthread_create(&th[i], NULL, compile_thread, &args[i]) == 0);
    }
    for (int i = 0; i < NTH; i++) {
        pthread_join(th[i], NULL);
        CHECK(args[i].ok);
    }
    CHECK_EQ_INT(count_files(dir, "", ".so"), 1);
    CHECK_EQ_INT(count_files(dir, "tmp-", ""), 0);
}

static void test_argv_string(void) {
    char *argv[] = {"cc", "-DX=1", "a b", "it's", "", NULL};
    char *s = jit_argv_string(argv);
    CHECK(strcmp(s, "cc -DX=1 'a b' 'it'\\''s' ''") == 0);
    base_free(s);

    char *out = NULL;
    int code = -1;
    char *sh[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    CHECK_EQ_INT(jit_run(sh, &out, &code), RV_OK);
    CHECK_EQ_INT(code, 3);
    CHECK_STR_CONTAINS(out, "out\n");
    CHECK_STR_CONTAINS(out, "err\n");
    base_free(out);
}

static void test_nvrtc(void) {
    printf("cuda devices: %d\n", jit_cuda_device_count());
    const char *kernel = "extern \"C\" __global__ void scale2(float *x, int n) {\n"
                         "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "    if (i < n) x[i] *= 2.0f;\n"
                         "}\n";
    char *ptx = NULL;
    if (!jit_nvrtc_available()) {
        CHECK_EQ_INT(jit_nvrtc_compile(kernel, "compute_90", &ptx), RV_ERR_UNSUPPORTED);
        CHECK_STR_CONTAINS(rv_last_error(), "NVRTC");
        printf("skip nvrtc: %s\n", rv_last_error());
        return;
    }
    rv_status st = jit_nvrtc_compile(kernel, "compute_90", &ptx);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s\n", rv_last_error());
        return;
    }
    CHECK_STR_CONTAINS(ptx, ".entry scale2");
    CHECK_STR_CONTAINS(ptx, "sm_90");
    base_free(ptx);

    const char *bad = "extern \"C\" __global__ void k(float *x) {\n"
                      "    x[0] = undeclared_name;\n"
                      "}\n";
    st = jit_nvrtc_compile(bad, "compute_90", &ptx);
    CHECK_EQ_INT(st, RV_ERR_COMPILER);
    CHECK(ptx == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "undeclared_name");
    CHECK_STR_CONTAINS(rv_last_error(), "NVRTC log");
}

/* Plain C that GCC 12.2's loop vectorizer miscompiles (the C ravel emitted
 * for tests/regress/gcc_vectorizer_*.rv, reduced): the JIT's default flags
 * must compile both right with whatever compiler the tests run. */
static const char *MISCOMPILED_SRC =
    "#include <stdint.h>\n"
    "/* an in-order float sum over reversed loads (GCC PR 110381) */\n"
    "float reversed_sum(const float *restrict x, int64_t n) {\n"
    "    float acc = 0.0f;\n"
    "    for (int64_t i = 0; i < n; i++) {\n"
    "        const int64_t t = i * 8 + 7;\n"
    "        for (int64_t k = 0; k < 8; k++)\n"
    "            acc += x[t - k];\n"
    "    }\n"
    "    return acc;\n"
    "}\n"
    "/* a padded copy whose condition if-conversion turns into masked loads */\n"
    "float padded_copy_sum(const float *restrict x, float *restrict q, int64_t L) {\n"
    "    const int64_t t0 = L * 2;\n"
    "    for (int64_t a = 0; a < 16 - L; a++) {\n"
    "        const int64_t t1 = L + a, t2 = a * 2, t3 = t0 + t2;\n"
    "        for (int64_t b = 0; b < 2; b++) {\n"
    "            if (8 <= t1 && a < 8)\n"
    "                q[b + t2] = x[b + t3 - 16];\n"
    "            else\n"
    "                q[b + t2] = 0.0f;\n"
    "        }\n"
    "    }\n"
    "    float acc = 0.0f;\n"
    "    for (int64_t k = 0; k < L; k++)\n"
    "        acc += q[k * 2 + 16 - t0] + q[15 - k * 2];\n"
    "    return acc;\n"
    "}\n";

static void test_known_miscompiles(void) {
    use_cache("miscompiles");
    JitLib *lib = NULL;
    rv_status st = jit_compile(MISCOMPILED_SRC, NULL, &lib);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s\n", rv_last_error());
        return;
    }
    float (*rev)(const float *, int64_t) = NULL;
    float (*pad)(const float *, float *, int64_t) = NULL;
    void *p = jit_sym(lib, "reversed_sum");
    memcpy(&rev, &p, sizeof p);
    p = jit_sym(lib, "padded_copy_sum");
    memcpy(&pad, &p, sizeof p);
    CHECK(rev && pad);
    if (rev && pad) {
        float x[40], q[32];
        for (int i = 0; i < 40; i++)
            x[i] = (float)i;
        CHECK(rev(x, 3) == 276.0f); /* 0 + 1 + ... + 23; GCC 12.2 -O3: 507 */
        for (int64_t L = 1; L <= 4; L++) {
            float want = 0;
            for (int64_t k = 0; k < L; k++)
                want += x[k * 2] + x[(L - k - 1) * 2 + 1];
            CHECK(pad(x, q, L) == want); /* GCC 12.2 -O3: 0 */
        }
    }
    jit_close(lib);
}

/* The embedded ravel_rt.h: written into the cache directory (the same bytes
 * as include/ravel_rt.h), rewritten when the file there was changed, and
 * replaced by $RAVEL_INCLUDE_DIR's, whose contents are part of the key. */
static void test_embedded_header(void) {
    const char *dir = use_cache("header");
    unsetenv("RAVEL_INCLUDE_DIR");
    JitLib *lib = NULL;
    CHECK_EQ_INT(jit_compile(ADD_SRC, NULL, &lib), RV_OK);
    char k0[33] = "";
    if (lib)
        snprintf(k0, sizeof k0, "%s", jit_lib_key(lib));
    jit_close(lib);

    size_t len;
    const char *hdr = jit_rt_header(&len);
    char *src = NULL;
    size_t src_len = 0;
    CHECK_EQ_INT(base_read_file("include/ravel_rt.h", &src, &src_len), RV_OK);
    CHECK(src && src_len == len && memcmp(src, hdr, len) == 0);
    base_free(src);

    CHECK_EQ_INT(count_files(dir, "rt-", ""), 1);
    char path[PATH_MAX + 300] = "";
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, "rt-", 3) == 0)
            snprintf(path, sizeof path, "%s/%s/ravel_rt.h", dir, e->d_name);
    if (d)
        closedir(d);
    char *written = NULL;
    size_t written_len = 0;
    CHECK_EQ_INT(base_read_file(path, &written, &written_len), RV_OK);
    CHECK(written && written_len == len && memcmp(written, hdr, len) == 0);
    base_free(written);

    /* A header changed in the cache is put back before the next compile. */
    const char *broken = "#error not ravel's header\n";
    CHECK_EQ_INT(base_write_file(path, broken, strlen(broken)), RV_OK);
    const char *src2 = "#include \"ravel_rt.h\"\nint two(void) { return RV_RT_OK + 2; }\n";
    CHECK_EQ_INT(jit_compile(src2, NULL, &lib), RV_OK);
    if (lib)
        CHECK_EQ_INT(((IntFn0)jit_fn(lib, "two"))(), 2);
    jit_close(lib);

    /* $RAVEL_INCLUDE_DIR overrides it; a change of its header changes the key. */
    char inc[PATH_MAX + 16], hpath[PATH_MAX + 32];
    snprintf(inc, sizeof inc, "%s/include", cache_root);
    snprintf(hpath, sizeof hpath, "%s/ravel_rt.h", inc);
    CHECK_EQ_INT(mkdir(inc, 0755), 0);
    CHECK_EQ_INT(base_write_file(hpath, hdr, len), RV_OK);
    setenv("RAVEL_INCLUDE_DIR", inc, 1);
    char k1[33] = "", k2[33] = "";
    CHECK_EQ_INT(jit_compile(ADD_SRC, NULL, &lib), RV_OK);
    if (lib)
        snprintf(k1, sizeof k1, "%s", jit_lib_key(lib));
    jit_close(lib);
    Buf changed = {0};
    buf_printf(&changed, "%.*s\n#define RV_TEST_CHANGED 1\n", (int)len, hdr);
    CHECK_EQ_INT(base_write_file(hpath, changed.data, changed.len), RV_OK);
    buf_free(&changed);
    JitStats s0 = jit_stats();
    CHECK_EQ_INT(jit_compile(ADD_SRC, NULL, &lib), RV_OK);
    CHECK_EQ_INT(jit_stats().compiles - s0.compiles, 1);
    if (lib)
        snprintf(k2, sizeof k2, "%s", jit_lib_key(lib));
    jit_close(lib);
    unsetenv("RAVEL_INCLUDE_DIR");
    CHECK(k0[0] && k1[0] && k2[0]);
    CHECK(strcmp(k0, k1) != 0 && strcmp(k1, k2) != 0 && strcmp(k0, k2) != 0);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(cache_root, sizeof cache_root, "%s/ravel-test-jit-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(cache_root)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_argv_string);
    RUN(test_compile_and_call);
    RUN(test_corrupt_entry_rebuilt);
    RUN(test_entry_of_other_key);
    RUN(test_compiler_error);
    RUN(test_missing_compiler);
    RUN(test_unusable_cache_dir);
    RUN(test_flags_and_options);
    RUN(test_concurrent_processes);
    RUN(test_concurrent_threads);
    RUN(test_nvrtc);
    RUN(test_known_miscompiles);
    RUN(test_embedded_header);
    JitStats s = jit_stats();
    printf("jit: %lld compiles, %lld cache hits, %lld rebuilds, %.2f s compiling\n",
           (long long)s.compiles, (long long)s.cache_hits, (long long)s.rebuilds,
           s.compile_seconds);
    remove_tree(cache_root);
    unsetenv("RAVEL_CACHE_DIR");
    return harness_report();
}
