/*
 * jit.c — generated C source to a loaded shared object, through a cache.
 *
 * jit_compile runs the system C compiler on generated code and dlopens the
 * result. Compiles are slow next to everything else ravel does, so every
 * object goes through a content-addressed cache on disk:
 *
 *   key    128 bits (32 hex digits) of hash over a format version, the
 *          compiler's identity (first line of `cc --version`, asked once
 *          per process and compiler), every argument given to it (but
 *          the -I of the embedded header, named after its hash), the
 *          contents of ravel_rt.h (generated code includes it, so a changed
 *          header must not reuse stale objects), the host CPU when a flag
 *          says -march=native (a cache on a shared home directory must not
 *          hand an AVX-512 object to an older machine), and the source.
 *   entry  <cache dir>/<key>.so: the compiler's output followed by a 56-byte
 *          trailer: "RVJITSU2", the key (32 hex digits), payload length and
 *          payload checksum (64-bit little-endian each). The ELF loader
 *          ignores bytes past the sections it maps, so the entry is still a
 *          loadable object, and one file means one atomic rename.
 *
 * Lookup reads the entry, checks the trailer and loads it. An entry that is
 * truncated, overwritten, that belongs to another key (a valid entry copied
 * or renamed over this one: its own checksum holds, but it is another
 * program, whose kernels this one would not find), or that dlopen rejects
 * (except for an undefined symbol, which is the host's fault, not the
 * entry's) is removed and rebuilt, and the rebuild is counted. The key is
 * checked before dlopen, so a foreign object's constructors never run.
 *
 * Writes never expose a partial file: the source and the object go to
 * unique temporaries in the cache directory itself (mkstemps, with the pid in
 * the name), the trailer is appended, and rename() moves the object into
 * place. Two processes compiling the same key both rename complete,
 * equivalent files; the last one wins and both load a good entry. A
 * temporary left behind by a crash is removed by a later compile once it is
 * a day old.
 *
 * ravel_rt.h comes from the library itself (rt_header.c): before compiling,
 * it is written to <cache dir>/rt-<hash>/ravel_rt.h (content-addressed,
 * atomically) and that directory is passed as -I, so an installed or moved
 * ravel needs no source tree. An include directory given by the caller or
 * $RAVEL_INCLUDE_DIR replaces it.
 *
 * When no cache directory can be created or written, a private directory in
 * $TMPDIR is used for the life of the process (removed at exit), so the JIT
 * still works, merely without reuse across runs.
 *
 * A failed compile keeps its source file and reports the command line and
 * the compiler's whole output, so the failure can be reproduced by hand.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkstemps */
#endif

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jit/jit.h"

#define KEY_VERSION "ravel-jit-1"
#define TRAILER_MAGIC "RVJITSU2"
#define TRAILER_KEY 32 /* the key's hex digits, after the magic */
#define TRAILER_SIZE (8 + TRAILER_KEY + 16)
#define CHECKSUM_SEED 0x52564a4954535531ull
#define KEY_SEED_1 0x9e3779b97f4a7c15ull
#define KEY_SEED_2 0xc2b2ae3d27d4eb4full
#define STALE_TEMP_SECONDS (24 * 3600)
#define MAX_ATTEMPTS 3

struct JitLib {
    void *handle;
    char *path;
    char key[33];
};

typedef Vec(char *) StrVec;

static void strvec_push(StrVec *v, const char *s) {
    char *copy = base_xstrdup(s);
    vec_push(v, copy);
}

static void strvec_free(StrVec *v) {
    for (int i = 0; i < v->len; i++)
        base_free(v->data[i]);
    vec_free(v);
}

static bool debug_jit(void) {
    const char *d = getenv("RAVEL_DEBUG");
    return d && strstr(d, "jit");
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------- counters */

static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static JitStats stats;

JitStats jit_stats(void) {
    pthread_mutex_lock(&stats_mu);
    JitStats s = stats;
    pthread_mutex_unlock(&stats_mu);
    return s;
}

static void stats_add(int64_t compiles, int64_t hits, int64_t rebuilds, double seconds) {
    pthread_mutex_lock(&stats_mu);
    stats.compiles += compiles;
    stats.cache_hits += hits;
    stats.rebuilds += rebuilds;
    stats.compile_seconds += seconds;
    pthread_mutex_unlock(&stats_mu);
}

/* ------------------------------------------------------- compiler identity */

/* Identities already asked for, by compiler command. A handful of distinct
 * compilers per process is plenty; past that we simply ask again. */
#define MAX_IDENTITIES 8
static pthread_mutex_t ident_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { char *cc, *ident; } identities[MAX_IDENTITIES];
static int n_identities;

/* Sets *out (caller frees) to the first line of `<cc> --version`, the
 * compiler's identity for the cache key. Fails with RV_ERR_COMPILER when the
 * compiler cannot be run, which is how a missing compiler is reported. */
static rv_status compiler_identity(const StrVec *cc_words, const char *cc, char **out) {
    pthread_mutex_lock(&ident_mu);
    for (int i = 0; i < n_identities; i++) {
        if (strcmp(identities[i].cc, cc) == 0) {
            *out = base_xstrdup(identities[i].ident);
            pthread_mutex_unlock(&ident_mu);
            return RV_OK;
        }
    }
    pthread_mutex_unlock(&ident_mu);

    char **argv = base_xcalloc((size_t)cc_words->len + 2, sizeof(char *));
    for (int i = 0; i < cc_words->len; i++)
        argv[i] = cc_words->data[i];
    argv[cc_words->len] = "--version";
    char *log = NULL;
    int code = 0;
    rv_status st = jit_run(argv, &log, &code);
    base_free(argv);
    if (st != RV_OK) {
        char *why = base_xstrdup(rv_last_error());
        st = base_error(RV_ERR_COMPILER,
                        "C compiler '%s' not found: %s (set RAVEL_CC to a working C compiler)", cc,
                        why);
        base_free(why);
        return st;
    }
    if (code != 0) {
        st = base_error(RV_ERR_COMPILER,
                        "C compiler '%s' does not work: '%s --version' exited "
                        "with status %d:\n%s",
                        cc, cc, code, log);
        base_free(log);
        return st;
    }
    log[strcspn(log, "\r\n")] = '\0';
    *out = base_xstrdup(log[0] ? log : cc);
    base_free(log);

    pthread_mutex_lock(&ident_mu);
    if (n_identities < MAX_IDENTITIES) {
        identities[n_identities].cc = base_xstrdup(cc);
        identities[n_identities].ident = base_xstrdup(*out);
        n_identities++;
    }
    pthread_mutex_unlock(&ident_mu);
    return RV_OK;
}

/* --------------------------------------------------------- host CPU, once */

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static char cpu_signature[40] = "cpu=unknown";

/* Hashes the first "model name" and "flags" lines of /proc/cpuinfo: what
 * -march=native decides from. */
static void read_cpu_signature(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[8192];
    uint64_t h = 0;
    bool model = false, flags = false;
    while ((!model || !flags) && fgets(line, sizeof line, f)) {
        bool is_model = strncmp(line, "model name", 10) == 0;
        bool is_flags = strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0;
        if ((is_model && !model) || (is_flags && !flags)) {
            h = hash_combine(h, hash_str(line));
            model |= is_model;
            flags |= is_flags;
        }
    }
    fclose(f);
    char hex[17];
    hash_hex(h, hex);
    snprintf(cpu_signature, sizeof cpu_signature, "cpu=%s", hex);
}

/* ---------------------------------------------------------- include dir */

const char *jit_include_override(void) {
    const char *env = getenv("RAVEL_INCLUDE_DIR");
    return env && *env ? env : NULL;
}

/* ------------------------------------------------------------ cache dir */

/* Creates every missing directory along path; 0 or an errno value. */
static int mkdir_p(const char *path) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return ENAMETOOLONG;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return errno;
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        return errno;
    struct stat sb;
    if (stat(p, &sb) != 0)
        return errno;
    return S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
}

static pthread_mutex_t private_mu = PTHREAD_MUTEX_INITIALIZER;
static char private_dir[PATH_MAX];
static pid_t private_owner;

/* atexit: removes the private cache of the process that created it (a
 * forked child shares the directory but leaves it to its parent). */
static void remove_private_dir(void) {
    if (!private_dir[0] || getpid() != private_owner)
        return;
    DIR *d = opendir(private_dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[PATH_MAX + 256];
            snprintf(p, sizeof p, "%s/%s", private_dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(private_dir);
}

/* The process's private cache directory in $TMPDIR, created on first use. */
static rv_status get_private_dir(char **out) {
    rv_status st = RV_OK;
    pthread_mutex_lock(&private_mu);
    if (!private_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp)
            tmp = "/tmp";
        char templ[PATH_MAX];
        snprintf(templ, sizeof templ, "%s/ravel-jit-XXXXXX", tmp);
        char *d = mkdtemp(templ);
        if (!d && strcmp(tmp, "/tmp") != 0) {
            snprintf(templ, sizeof templ, "/tmp/ravel-jit-XXXXXX");
            d = mkdtemp(templ);
        }
        if (d) {
            snprintf(private_dir, sizeof private_dir, "%s", d);
            private_owner = getpid();
            atexit(remove_private_dir);
        } else {
            st = base_error(RV_ERR_IO,
                            "jit: no usable cache directory, and no temporary one in %s: %s", tmp,
                            strerror(errno));
        }
    }
    if (st == RV_OK)
        *out = base_xstrdup(private_dir);
    pthread_mutex_unlock(&private_mu);
    return st;
}

/* Picks the cache directory (see jit.h) and creates it; falls back to the
 * private directory when it cannot be created or written. */
static rv_status resolve_cache_dir(const JitOptions *opt, char **out, bool *is_private) {
    *is_private = false;
    Buf b = {0};
    const char *env;
    if (opt->cache_dir && *opt->cache_dir)
        buf_puts(&b, opt->cache_dir);
    else if ((env = getenv("RAVEL_CACHE_DIR")) && *env)
        buf_puts(&b, env);
    else if ((env = getenv("XDG_CACHE_HOME")) && *env)
        buf_printf(&b, "%s/ravel", env);
    else if ((env = getenv("HOME")) && *env)
        buf_printf(&b, "%s/.cache/ravel", env);

    if (b.len) {
        int err = mkdir_p(b.data);
        if (err == 0 && access(b.data, W_OK | X_OK) != 0)
            err = errno;
        if (err == 0) {
            *out = buf_take(&b);
            return RV_OK;
        }
        if (debug_jit())
            fprintf(stderr, "ravel jit: cache dir %s unusable (%s); using a private temp dir\n",
                    b.data, strerror(err));
    }
    buf_free(&b);
    *is_private = true;
    return get_private_dir(out);
}

/* Removes temporaries that a crashed compile left in dir long ago. */
static void remove_stale_temps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "tmp-", 4) != 0)
            continue;
        char p[PATH_MAX + 256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) == 0 && now - sb.st_mtime > STALE_TEMP_SECONDS)
            unlink(p);
    }
    closedir(d);
}

/* ------------------------------------------------------------------ key */

/* Reads a whole file; 0 or an errno value. *data is NUL-terminated. */
static int read_whole(const char *path, unsigned char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return err;
    }
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    unsigned char *p = base_xmalloc(cap);
    for (;;) {
        if (n + 1 == cap) {
            cap *= 2;
            p = base_xrealloc(p, cap);
        }
        ssize_t k = read(fd, p + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            int err = errno;
            close(fd);
            base_free(p);
            return err;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    p[n] = '\0';
    *data = p;
    *len = n;
    return 0;
}

/* key[33] := hex of two 64-bit hashes over everything that decides the
 * object's bytes (see the file comment). include_dir: where ravel_rt.h is
 * read from; NULL for the embedded header. */
static void compute_key(const char *src, const StrVec *args, const char *ident,
                        const char *include_dir, char key[33]) {
    Buf b = {0};
    buf_printf(&b, "%s\n%s\n", KEY_VERSION, ident);
    bool native = false;
    for (int i = 0; i < args->len; i++) {
        buf_printf(&b, "%s\n", args->data[i]);
        native |= strstr(args->data[i], "=native") != NULL;
    }
    if (native) {
        pthread_once(&cpu_once, read_cpu_signature);
        buf_printf(&b, "%s\n", cpu_signature);
    }
    char hex[17];
    if (include_dir) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/ravel_rt.h", include_dir);
        unsigned char *hdr;
        size_t n;
        if (read_whole(p, &hdr, &n) == 0) {
            hash_hex(hash_bytes(hdr, n, 0), hex);
            buf_printf(&b, "ravel_rt.h=%s\n", hex);
            base_free(hdr);
        }
    } else {
        size_t n;
        const char *hdr = jit_rt_header(&n);
        hash_hex(hash_bytes(hdr, n, 0), hex);
        buf_printf(&b, "ravel_rt.h=%s\n", hex);
    }
    size_t srclen = strlen(src);
    uint64_t h1 =
        hash_combine(hash_bytes(b.data, b.len, KEY_SEED_1), hash_bytes(src, srclen, KEY_SEED_1));
    uint64_t h2 =
        hash_combine(hash_bytes(b.data, b.len, KEY_SEED_2), hash_bytes(src, srclen, KEY_SEED_2));
    buf_free(&b);
    hash_hex(h1, key);
    hash_hex(h2, key + 16);
}

/* --------------------------------------------------------- cache entries */

static void put_u64le(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64le(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

typedef enum EntryState {
    ENTRY_MISSING, /* no file: compile */
    ENTRY_OK,      /* trailer and checksum agree */
    ENTRY_CORRUPT, /* remove and rebuild */
} EntryState;

/* Checks the trailer of the entry at path against its key; on
 * ENTRY_CORRUPT, *why says how. */
static EntryState check_entry(const char *path, const char *key, const char **why) {
    unsigned char *data;
    size_t n;
    int err = read_whole(path, &data, &n);
    if (err == ENOENT)
        return ENTRY_MISSING;
    if (err) {
        *why = "unreadable";
        return ENTRY_CORRUPT;
    }
    EntryState s = ENTRY_CORRUPT;
    if (n < TRAILER_SIZE || memcmp(data + n - TRAILER_SIZE, TRAILER_MAGIC, 8) != 0)
        *why = "no checksum trailer (truncated or overwritten)";
    else if (memcmp(data + n - TRAILER_SIZE + 8, key, TRAILER_KEY) != 0)
        *why = "the entry of another key (copied or renamed over this one)";
    else if (get_u64le(data + n - 16) != n - TRAILER_SIZE)
        *why = "length mismatch (truncated)";
    else if (get_u64le(data + n - 8) != hash_bytes(data, n - TRAILER_SIZE, CHECKSUM_SEED))
        *why = "checksum mismatch";
    else
        s = ENTRY_OK;
    base_free(data);
    return s;
}

/* Appends the trailer (key, length, checksum) to the freshly compiled
 * object at path. */
static rv_status append_trailer(const char *path, const char *key) {
    unsigned char *data;
    size_t n;
    int err = read_whole(path, &data, &n);
    if (err)
        return base_error(RV_ERR_IO, "jit: cannot read compiled object %s: %s", path,
                          strerror(err));
    unsigned char t[TRAILER_SIZE];
    memcpy(t, TRAILER_MAGIC, 8);
    memcpy(t + 8, key, TRAILER_KEY);
    put_u64le(t + 8 + TRAILER_KEY, n);
    put_u64le(t + 16 + TRAILER_KEY, hash_bytes(data, n, CHECKSUM_SEED));
    base_free(data);
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0)
        return base_error(RV_ERR_IO, "jit: cannot open %s: %s", path, strerror(errno));
    ssize_t k = write(fd, t, sizeof t);
    int werr = errno;
    if (close(fd) != 0 && k == (ssize_t)sizeof t) {
        k = -1;
        werr = errno;
    }
    if (k != (ssize_t)sizeof t)
        return base_error(RV_ERR_IO, "jit: cannot write %s: %s", path,
                          k < 0 ? strerror(werr) : "short write");
    return RV_OK;
}

/* Removes path if it is still the file we judged corrupt (same inode): a
 * concurrent process may have renamed a good entry over it meanwhile. */
static void remove_entry_if_same(const char *path, const struct stat *judged) {
    struct stat now;
    if (stat(path, &now) == 0 && now.st_ino == judged->st_ino && now.st_dev == judged->st_dev)
        unlink(path);
}

typedef enum LoadResult {
    LOAD_OK,
    LOAD_BAD_ENTRY, /* dlopen rejected the file itself: treat as corrupt */
    LOAD_FAILED,    /* e.g. an undefined symbol: an error, not corruption */
} LoadResult;

/* An OpenMP object pulls in the OpenMP runtime, whose worker threads
 * outlive the parallel region. If dlclose of the object unloaded the
 * runtime under those threads they would crash, so the runtime, once
 * loaded, is marked never to be unloaded. */
static void pin_openmp_runtime(void) {
    static const char *const names[] = {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"};
    for (int i = 0; i < RV_COUNT(names); i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        if (h)
            dlclose(h); /* drops our reference only; NODELETE stays */
    }
}

/* dlopens path into a new JitLib; on failure *err holds dlerror (caller
 * frees). */
static LoadResult load_entry(const char *path, const char *key, bool openmp, JitLib **out,
                             char **err) {
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        *err = base_xstrdup(e ? e : "dlopen failed");
        return strstr(*err, "undefined symbol") ? LOAD_FAILED : LOAD_BAD_ENTRY;
    }
    if (openmp)
        pin_openmp_runtime();
    JitLib *lib = base_xcalloc(1, sizeof *lib);
    lib->handle = h;
    lib->path = base_xstrdup(path);
    snprintf(lib->key, sizeof lib->key, "%s", key);
    *out = lib;
    return LOAD_OK;
}

/* Creates a unique temporary "<dir>/tmp-<pid>-XXXXXX<suffix>"; returns the
 * open fd (or -1 with errno) and its path in *path (caller frees). */
static int make_temp(const char *dir, const char *suffix, char **path) {
    Buf b = {0};
    buf_printf(&b, "%s/tmp-%ld-XXXXXX%s", dir, (long)getpid(), suffix);
    *path = buf_take(&b);
    return mkstemps(*path, (int)strlen(suffix));
}

/* Writes len bytes of data to fd; 0 or an errno value. */
static int write_all(int fd, const char *data, size_t len) {
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(fd, data + done, len - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        done += (size_t)k;
    }
    return 0;
}

/* Makes sure <dir>/rt-<hash>/ravel_rt.h holds the embedded header and sets
 * *inc (caller frees) to that directory, for -I. The name carries the hash
 * of the bytes, so libraries of different versions sharing a cache each
 * find their own header and a stale one is never reused; the file is
 * written under a temporary name in dir and renamed into place, so a
 * concurrent compile never reads a partial header. */
static rv_status write_rt_header(const char *dir, char **inc) {
    size_t len;
    const char *hdr = jit_rt_header(&len);
    char hex[17];
    hash_hex(hash_bytes(hdr, len, 0), hex);
    Buf b = {0};
    buf_printf(&b, "%s/rt-%s", dir, hex);
    *inc = buf_take(&b);
    buf_printf(&b, "%s/ravel_rt.h", *inc);
    char *path = buf_take(&b);

    unsigned char *have;
    size_t n;
    rv_status st = RV_OK;
    if (read_whole(path, &have, &n) == 0) {
        bool same = n == len && memcmp(have, hdr, len) == 0;
        base_free(have);
        if (same)
            goto done;
    }
    int err = 0;
    if (mkdir(*inc, 0755) != 0 && errno != EEXIST)
        err = errno;
    char *tmp = NULL;
    int fd = err ? -1 : make_temp(dir, ".h", &tmp);
    if (!err && fd < 0)
        err = errno;
    if (fd >= 0) {
        err = write_all(fd, hdr, len);
        if (close(fd) != 0 && !err)
            err = errno;
        if (!err && rename(tmp, path) != 0)
            err = errno;
        if (err)
            unlink(tmp);
    }
    base_free(tmp);
    if (err)
        st = base_error(RV_ERR_IO, "jit: cannot write ravel_rt.h to %s: %s", *inc, strerror(err));
done:
    base_free(path);
    if (st != RV_OK) {
        base_free(*inc);
        *inc = NULL;
    }
    return st;
}

/* Compiles src with args into <dir>/<key>.so. RV_ERR_IO means the directory
 * could not take temporaries (the caller may retry elsewhere);
 * RV_ERR_COMPILER is the compiler's failure, with its log. */
static rv_status build_entry(const char *dir, const char *key, const char *src, const StrVec *args,
                             bool embedded_header, const char *final_path, double *seconds) {
    *seconds = 0;
    remove_stale_temps(dir);
    char *c_path = NULL, *so_path = NULL, *inc = NULL;
    if (embedded_header) {
        rv_status st = write_rt_header(dir, &inc);
        if (st != RV_OK)
            return st;
    }
    int fd = make_temp(dir, ".c", &c_path);
    if (fd < 0) {
        rv_status st = base_error(RV_ERR_IO, "jit: cannot create a temporary file in %s: %s", dir,
                                  strerror(errno));
        base_free(c_path);
        base_free(inc);
        return st;
    }
    int werr = write_all(fd, src, strlen(src));
    close(fd);
    if (werr) {
        unlink(c_path);
        rv_status st = base_error(RV_ERR_IO, "jit: cannot write %s: %s", c_path, strerror(werr));
        base_free(c_path);
        base_free(inc);
        return st;
    }
    fd = make_temp(dir, ".so", &so_path);
    if (fd < 0) {
        rv_status st = base_error(RV_ERR_IO, "jit: cannot create a temporary file in %s: %s", dir,
                                  strerror(errno));
        unlink(c_path);
        base_free(c_path);
        base_free(so_path);
        base_free(inc);
        return st;
    }
    close(fd);

    char **argv = base_xcalloc((size_t)args->len + 6, sizeof(char *));
    int argc = 0;
    for (int i = 0; i < args->len; i++)
        argv[argc++] = args->data[i];
    char *inc_flag = NULL;
    if (inc) {
        Buf b = {0};
        buf_printf(&b, "-I%s", inc);
        inc_flag = buf_take(&b);
        argv[argc++] = inc_flag;
    }
    argv[argc++] = "-o";
    argv[argc++] = so_path;
    argv[argc++] = c_path;
    argv[argc++] = "-lm";
    char *cmd = jit_argv_string(argv);
    if (debug_jit())
        fprintf(stderr, "ravel jit: compiling %s: %s\n", key, cmd);

    char *log = NULL;
    int code = 0;
    double t0 = now_seconds();
    rv_status st = jit_run(argv, &log, &code);
    /* A crash of the compiler itself is its bug, not the program's (GCC
     * 12's if-conversion at -O3 dies in expand_shift_1 on a conditional
     * cache_write vectorized over 8 lanes: tests/regress/
     * gcc_ice_conditional_cache_8_lanes.rv): one more try at -O2, which
     * the cache key does not tell apart (the result is the same code's). */
    for (int i = 0; st == RV_OK && code != 0 && log && strstr(log, "internal compiler error") &&
                    i < argc;
         i++) {
        if (strcmp(argv[i], "-O3") != 0)
            continue;
        argv[i] = "-O2";
        if (debug_jit())
            fprintf(stderr, "ravel jit: the compiler crashed on %s at -O3; again at -O2\n", key);
        base_free(log);
        log = NULL;
        st = jit_run(argv, &log, &code);
        char *cmd2 = jit_argv_string(argv);
        base_free(cmd);
        cmd = cmd2;
        break;
    }
    *seconds = now_seconds() - t0;
    base_free(argv);
    base_free(inc_flag);
    base_free(inc);
    if (st != RV_OK) {
        char *why = base_xstrdup(rv_last_error());
        st = base_error(RV_ERR_COMPILER, "C compiler could not be started: %s\n  command: %s", why,
                        cmd);
        base_free(why);
        unlink(c_path);
        unlink(so_path);
    } else if (code != 0) {
        st = base_error(RV_ERR_COMPILER,
                        "C compiler failed (exit status %d)\n  command: %s\n  source kept at: %s\n"
                        "--- compiler output ---\n%s",
                        code, cmd, c_path, log);
        unlink(so_path);
    } else {
        unlink(c_path);
        st = append_trailer(so_path, key);
        if (st == RV_OK && rename(so_path, final_path) != 0)
            st = base_error(RV_ERR_IO, "jit: cannot rename %s to %s: %s", so_path, final_path,
                            strerror(errno));
        if (st != RV_OK)
            unlink(so_path);
    }
    base_free(log);
    base_free(cmd);
    base_free(c_path);
    base_free(so_path);
    return st;
}

/* --------------------------------------------------------------- compile */

/* Splits a compiler command on blanks ("ccache gcc" -> two words). */
static void split_words(const char *s, StrVec *out) {
    while (*s) {
        s += strspn(s, " \t");
        size_t n = strcspn(s, " \t");
        if (n) {
            char *w = base_xmalloc(n + 1);
            memcpy(w, s, n);
            w[n] = '\0';
            vec_push(out, w);
        }
        s += n;
    }
}

/* Looks the key up in dir and loads it, compiling (or rebuilding a corrupt
 * entry) when needed. Retries a few times when a concurrent process removes
 * the entry between our rename and our dlopen. */
static rv_status compile_in_dir(const char *dir, const char *key, const char *src,
                                const StrVec *args, bool embedded_header, JitLib **out) {
    Buf pb = {0};
    buf_printf(&pb, "%s/%s.so", dir, key);
    char *path = buf_take(&pb);
    bool openmp = false;
    for (int i = 0; i < args->len; i++)
        openmp |= strncmp(args->data[i], "-fopenmp", 8) == 0;
    rv_status st = RV_OK;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        st = RV_OK;
        const char *why = NULL;
        char *err = NULL;
        bool rebuild = false;
        struct stat judged;
        bool have_stat = stat(path, &judged) == 0;
        EntryState es = check_entry(path, key, &why);
        if (es == ENTRY_OK) {
            LoadResult lr = load_entry(path, key, openmp, out, &err);
            if (lr == LOAD_OK) {
                stats_add(0, 1, 0, 0);
                if (debug_jit())
                    fprintf(stderr, "ravel jit: cache hit %s\n", path);
                break;
            }
            if (lr == LOAD_FAILED) {
                st = base_error(RV_ERR_COMPILER,
                                "jit: cannot load %s: %s (does the host export "
                                "the ravel_rt_* symbols? link it with -rdynamic)",
                                path, err);
                base_free(err);
                break;
            }
            why = err;
            es = ENTRY_CORRUPT;
        }
        if (es == ENTRY_CORRUPT) {
            if (debug_jit())
                fprintf(stderr, "ravel jit: corrupt cache entry %s (%s); rebuilding\n", path, why);
            if (have_stat)
                remove_entry_if_same(path, &judged);
            rebuild = true;
        }
        base_free(err);

        double seconds;
        st = build_entry(dir, key, src, args, embedded_header, path, &seconds);
        if (st != RV_OK) {
            stats_add(0, 0, 0, seconds);
            break;
        }
        stats_add(1, 0, rebuild ? 1 : 0, seconds);
        /* A cold compile is the one wait a user sees with no output:
         * say what it was (the next run finds it in the cache). */
        if (seconds > 1.0)
            fprintf(stderr, "ravel: compiling %s took %.1f s\n", path, seconds);
        LoadResult lr = load_entry(path, key, openmp, out, &err);
        if (lr == LOAD_OK)
            break;
        bool vanished = access(path, F_OK) != 0;
        st = base_error(RV_ERR_COMPILER, "jit: compiled %s but cannot load it: %s%s", path, err,
                        lr == LOAD_FAILED ? " (does the host export the ravel_rt_* symbols? "
                                            "link it with -rdynamic)"
                                          : "");
        base_free(err);
        if (!vanished)
            break;
    }
    base_free(path);
    return st;
}

/* The compiler-specific flags for the compiler whose `--version` said
 * ident. */
static int compiler_flags(const char *ident, const char **flags, int cap) {
    int n = 0;
    /* GCC's scalar replacement of aggregates stays off. It once decided
     * whether a register tile (`float YL[384]`) stayed in registers: with
     * SRA, GCC split some tiles into pieces that spilled inside the k
     * loop; without it, others spilled (a 6 x 64 tile: 26-34 stack stores
     * per k). Since src/lower/registers.c emits a tile as vector variables
     * the micro-kernels do not depend on it: zmm stack stores in the
     * innermost loops of >= 8 FMAs (gcc 12.2 -O3 -march=native on the
     * emitted C), with / without the flag, before -> after that pass:
     * bench/programs sgemm, dense_packed, dense_kblock, bmm_nn_bcast6x64:
     * 0 / 17 -> 0 / 0; trmm.rv 6 x 64: 30 / 3 (whole kernel) -> 0 / 0;
     * vgemm.rv 6 x 64: 34 / 0 -> 0 / 0; encoder_cora512: 0 / 17-18 ->
     * 0 / 0. It is kept for what the pass leaves as arrays: TreeLSTM
     * (models/treelstm_h512.rv) has four 16-FMA loops with 0 stores with
     * the flag and 1 without. Clang has no such pass (nor the flag). */
    /* GCC's loop vectorizer stays off too. The hot loops are vectorized by
     * ravel itself (vector types, lane reductions; element-wise loops no
     * schedule vectorized by c.c's plain_map), so it gains nothing there
     * (bench/ drivers: dense, bmm, SGEMM equal within noise), but it
     * took most of the compile time of the large unrolled kernels (dense
     * "stream": 7.6 s of CPU at -O3, 1.1 s without), and GCC 12.2
     * miscompiles correct generated code with it: a float reduction chain
     * over reversed loads, vectorized in order, counts elements twice (GCC
     * PR 110381, fixed upstream in 2023; at -O2 too once the loop is
     * unrolled; tests/regress/gcc_vectorizer_reversed_sum.rv), and an
     * if-converted copy loop with masked loads writes zeros
     * (gcc_vectorizer_padded_cache.rv). test_jit compiles both reproducers
     * with these flags. Clang compiles both right (and lacks the flag). */
    if (!strstr(ident, "clang")) {
        if (n < cap)
            flags[n++] = "-fno-tree-sra";
        if (n < cap)
            flags[n++] = "-fno-tree-loop-vectorize";
    }
    return n;
}

int jit_compiler_flags(const char *cc, const char **flags, int cap) {
    StrVec words = {0};
    char *ident = NULL;
    int n = 0;
    split_words(cc, &words);
    if (words.len > 0 && compiler_identity(&words, cc, &ident) == RV_OK)
        n = compiler_flags(ident, flags, cap);
    base_free(ident);
    strvec_free(&words);
    return n;
}

/* The compiler command line for opt (args: the compiler's words, then
 * every flag), the compiler's identity (*ident, caller frees) and the
 * -I of a ravel_rt.h override (*inc, NULL for the embedded header): what
 * jit_compile runs and what its cache key hashes. */
static rv_status compile_args(const JitOptions *opt, StrVec *args, char **ident, const char **inc) {
    const char *cc = opt->cc;
    if (!cc || !*cc)
        cc = getenv("RAVEL_CC");
    if (!cc || !*cc)
        cc = "cc";
    *ident = NULL;
    *inc = NULL;
    split_words(cc, args);
    if (args->len == 0)
        return base_error(RV_ERR_ARG, "jit: empty compiler command");
    rv_status st = compiler_identity(args, cc, ident);
    if (st != RV_OK)
        return st;

    static const char *const default_flags[] = {
        "-O3",     "-march=native",      "-std=c11",        "-fPIC",
        "-shared", "-ffp-contract=fast", "-fno-math-errno",
    };
    for (int i = 0; i < RV_COUNT(default_flags); i++)
        strvec_push(args, default_flags[i]);
    const char *cflags[4];
    int ncflags = compiler_flags(*ident, cflags, RV_COUNT(cflags));
    for (int i = 0; i < ncflags; i++)
        strvec_push(args, cflags[i]);
    if (opt->openmp)
        strvec_push(args, "-fopenmp");
    *inc = opt->include_dir && *opt->include_dir ? opt->include_dir : jit_include_override();
    if (*inc) {
        Buf b = {0};
        buf_printf(&b, "-I%s", *inc);
        char *flag = buf_take(&b);
        vec_push(args, flag);
    }
    for (int i = 0; i < opt->n_extra_flags; i++) {
        if (opt->extra_flags[i] && *opt->extra_flags[i])
            strvec_push(args, opt->extra_flags[i]);
    }
    return RV_OK;
}

rv_status jit_source_key(const char *c_source, const JitOptions *opt, char key[33]) {
    key[0] = 0;
    if (!c_source)
        return base_error(RV_ERR_ARG, "jit_source_key: source is NULL");
    JitOptions defaults = {0};
    StrVec args = {0};
    char *ident = NULL;
    const char *inc = NULL;
    rv_status st = compile_args(opt ? opt : &defaults, &args, &ident, &inc);
    if (st == RV_OK)
        compute_key(c_source, &args, ident, inc, key);
    strvec_free(&args);
    base_free(ident);
    return st;
}

rv_status jit_compile(const char *c_source, const JitOptions *opt, JitLib **out) {
    if (!out)
        return base_error(RV_ERR_ARG, "jit_compile: out is NULL");
    *out = NULL;
    if (!c_source)
        return base_error(RV_ERR_ARG, "jit_compile: source is NULL");
    JitOptions defaults = {0};
    if (!opt)
        opt = &defaults;

    StrVec args = {0};
    char *ident = NULL, *dir = NULL;
    const char *inc = NULL;
    rv_status st = compile_args(opt, &args, &ident, &inc);
    if (st != RV_OK)
        goto done;

    char key[33];
    compute_key(c_source, &args, ident, inc, key);
    bool is_private;
    if ((st = resolve_cache_dir(opt, &dir, &is_private)) != RV_OK)
        goto done;
    st = compile_in_dir(dir, key, c_source, &args, !inc, out);
    if (st == RV_ERR_IO && !is_private) {
        /* The directory looked writable but would not take our files
         * (full disk, read-only mount): go on without it. */
        if (debug_jit())
            fprintf(stderr, "ravel jit: %s; using a private temp dir\n", rv_last_error());
        base_free(dir);
        dir = NULL;
        if ((st = get_private_dir(&dir)) == RV_OK)
            st = compile_in_dir(dir, key, c_source, &args, !inc, out);
    }
done:
    strvec_free(&args);
    base_free(ident);
    base_free(dir);
    return st;
}

void *jit_sym(JitLib *lib, const char *name) {
    if (!lib || !name) {
        base_error(RV_ERR_ARG, "jit_sym: NULL library or name");
        return NULL;
    }
    dlerror();
    void *p = dlsym(lib->handle, name);
    if (!p)
        base_error(RV_ERR_ARG, "jit: symbol '%s' not found in %s", name, lib->path);
    return p;
}

_Static_assert(sizeof(JitFn) == sizeof(void *), "function and object pointers differ in size");

JitFn jit_fn(JitLib *lib, const char *name) {
    void *p = jit_sym(lib, name);
    JitFn fn = NULL;
    /* POSIX guarantees dlsym's object pointer can hold a function address;
     * memcpy sidesteps ISO C's lack of a conversion between the two. */
    if (p)
        memcpy(&fn, &p, sizeof fn);
    return fn;
}

const char *jit_lib_path(const JitLib *lib) {
    return lib->path;
}

const char *jit_lib_key(const JitLib *lib) {
    return lib->key;
}

void jit_close(JitLib *lib) {
    if (!lib)
        return;
    dlclose(lib->handle);
    base_free(lib->path);
    base_free(lib);
}
