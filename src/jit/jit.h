/*
 * jit.h — the jit layer: turning generated source into callable code.
 *
 * CPU: generated C is compiled by the system C compiler into a shared
 * object and loaded with dlopen. Compiling costs tens to hundreds of
 * milliseconds, so results live in a content-addressed on-disk cache: the
 * key hashes the source, the compiler's identity (the first line of
 * `cc --version`), every flag, the contents of ravel_rt.h and, when a flag
 * says -march=native, the host CPU. A second run with the same input
 * compiles nothing. Entries are written under a unique temporary name and
 * renamed into place, so concurrent processes share the cache safely; each
 * entry carries a checksum trailer, so a truncated or overwritten entry is
 * detected, removed and rebuilt.
 *
 * GPU: NVRTC compiles CUDA C to PTX and the CUDA driver API reports
 * devices. Both libraries are loaded with dlopen on first use, so ravel
 * builds and runs where CUDA is absent: the calls then report
 * RV_ERR_UNSUPPORTED (NVRTC) or zero devices (driver).
 *
 * Environment:
 *   RAVEL_CC           compiler command (default "cc"); split on spaces,
 *                      so "ccache gcc" works
 *   RAVEL_INCLUDE_DIR  directory holding the ravel_rt.h to compile against,
 *                      instead of the copy embedded in the library (for
 *                      developers changing the header; see rt_header.c)
 *   RAVEL_CACHE_DIR    cache directory (else $XDG_CACHE_HOME/ravel, else
 *                      ~/.cache/ravel; a private temp dir if none is usable)
 *   RAVEL_NVRTC        path of libnvrtc.so, tried before the usual names
 *   RAVEL_DEBUG        contains "jit": print compiler commands, cache hits,
 *                      rebuilds and fallbacks to stderr
 */
#ifndef RAVEL_JIT_H
#define RAVEL_JIT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

/* ---- jit.c: C source -> cached shared object -> dlopen ---- */

/* Every field may be zero/NULL; jit_compile(src, NULL, &lib) uses defaults. */
typedef struct JitOptions {
    const char *cc;          /* compiler command; NULL: $RAVEL_CC, else "cc" */
    /* -I for ravel_rt.h; NULL: jit_include_override(), else the embedded
     * header, written to <cache dir>/rt-<its hash>/ravel_rt.h */
    const char *include_dir;
    const char *cache_dir;   /* NULL: jit_cache_dir() resolution (see above) */
    /* Flags appended after the defaults (so "-O0 -g" overrides -O3), e.g.
     * "-fsanitize=address,undefined" or "-DNAME=1". Part of the cache key. */
    const char *const *extra_flags;
    int n_extra_flags;
    bool openmp; /* add -fopenmp */
} JitOptions;

typedef struct JitLib JitLib;

/* Compiles `c_source` with
 *   <cc> -O3 -march=native -std=c11 -fPIC -shared -ffp-contract=fast
 *        -fno-math-errno [-fopenmp] -I<include_dir> <extra flags>
 * (or takes it from the cache) and loads it with RTLD_NOW | RTLD_LOCAL.
 * Undefined symbols in the object resolve against the host process, which
 * must export them (link with -rdynamic). Errors: RV_ERR_COMPILER when the
 * compiler is missing or fails (the message holds the command line, the
 * compiler's full output and the path of the kept source file) or the
 * object cannot be loaded; RV_ERR_IO when no cache or temp dir is usable. */
rv_status jit_compile(const char *c_source, const JitOptions *opt, JitLib **out);
/* key := the cache key jit_compile(c_source, opt, ...) would use (32 hex
 * digits: the source, the compiler's identity, every flag, ravel_rt.h,
 * the host CPU for -march=native), without compiling: what decides the
 * object's bytes, so a tuning record keyed by it names the code it timed.
 * Runs `cc --version` once per compiler. */
rv_status jit_source_key(const char *c_source, const JitOptions *opt, char key[33]);
/* dlsym; NULL (with a message in rv_last_error) when absent. */
void *jit_sym(JitLib *lib, const char *name);
/* A function symbol, cast to the function type by the caller:
 *   int (*add)(int, int) = (int (*)(int, int))jit_fn(lib, "add");
 * ISO C cannot convert jit_sym's void * to a function pointer. */
typedef void (*JitFn)(void);
JitFn jit_fn(JitLib *lib, const char *name);
/* The cache entry the library was loaded from, and its key (32 hex). */
const char *jit_lib_path(const JitLib *lib);
const char *jit_lib_key(const JitLib *lib);
/* dlclose and free; NULL is fine. */
void jit_close(JitLib *lib);

/* Process-wide counters. `compiles` counts every run of the compiler that
 * produced an object, `rebuilds` the subset that replaced a corrupt cache
 * entry, `cache_hits` the loads that compiled nothing. */
typedef struct JitStats {
    int64_t compiles;
    int64_t cache_hits;
    int64_t rebuilds;
    double compile_seconds; /* wall time spent in the compiler */
} JitStats;
JitStats jit_stats(void);

/* The flags the JIT gives compiler command `cc` beyond the common ones
 * (-O3 -march=native ...): for GCC -fno-tree-sra and
 * -fno-tree-loop-vectorize (jit.c says why), none for Clang or a compiler
 * that does not answer `--version`. Static strings; returns their number
 * (at most cap). `ravel build --shared` uses them too. */
int jit_compiler_flags(const char *cc, const char **flags, int cap);

/* $RAVEL_INCLUDE_DIR when set and not empty, else NULL: the directory
 * whose ravel_rt.h replaces the embedded one. */
const char *jit_include_override(void);

/* ---- rt_header.c: ravel_rt.h, embedded at build time ---- */

/* The bytes of the ravel_rt.h the library was built with (not
 * NUL-terminated), and their number. */
const char *jit_rt_header(size_t *len);

/* ---- spawn.c: running a program with its output captured ---- */

/* Runs argv (argv[0] looked up in PATH) with stdin from /dev/null and
 * stdout+stderr captured together into *output (caller frees with
 * base_free). *exit_code is the exit status, or 128 + the signal number.
 * Returns RV_ERR_COMPILER when the program cannot be started. */
rv_status jit_run(char *const *argv, char **output, int *exit_code);
/* argv as a shell-quoted command line, for messages (caller frees). */
char *jit_argv_string(char *const *argv);

/* ---- cuda.c: NVRTC and the CUDA driver, loaded on demand ---- */

/* Whether libnvrtc could be loaded. */
bool jit_nvrtc_available(void);
/* Compiles CUDA C to PTX for `arch` (e.g. "compute_90"; NULL: NVRTC's
 * default). *ptx_out is NUL-terminated; free with base_free.
 * RV_ERR_UNSUPPORTED without NVRTC; RV_ERR_COMPILER with NVRTC's log. */
rv_status jit_nvrtc_compile(const char *cuda_src, const char *arch, char **ptx_out);
/* Number of CUDA devices; 0 when libcuda.so.1 is absent or cuInit fails. */
int jit_cuda_device_count(void);

/* The driver. libcuda.so.1 ($RAVEL_CUDA_DRIVER overrides the name) is
 * loaded and initialized once per process; device 0's primary context is
 * made current on the calling thread by every call below. Failures are
 * messages naming the driver call and its CUresult. */
typedef uint64_t JitDevPtr; /* CUdeviceptr */
typedef struct JitCudaKernel JitCudaKernel;
/* RV_ERR_UNSUPPORTED "no CUDA driver (libcuda.so.1 not found)", or the
 * reason cuInit or the context failed, or "no device". */
rv_status jit_cuda_init(void);
/* Loads driver library `lib` and runs cuInit, without keeping it: the
 * status jit_cuda_init would have with it (for diagnostics and tests). */
rv_status jit_cuda_probe(const char *lib);
/* NVRTC's --gpu-architecture for device 0 ("compute_90"). */
rv_status jit_cuda_arch(char out[32]);
/* PTX -> module -> the function `sym`. RV_ERR_COMPILER with the JIT log. */
rv_status jit_cuda_load(const char *ptx, const char *sym, JitCudaKernel **out);
/* The same with n entry points of one module, functions 0..n-1 of *out. */
rv_status jit_cuda_load_fns(const char *ptx, const char *const *syms, int n, JitCudaKernel **out);
void jit_cuda_unload(JitCudaKernel *k); /* NULL is fine */
/* Device memory (at least one byte); RV_ERR_OOM when the device is full. */
rv_status jit_cuda_alloc(size_t bytes, JitDevPtr *out);
void jit_cuda_free(JitDevPtr p); /* 0 is fine */
rv_status jit_cuda_to_device(JitDevPtr dst, const void *src, size_t bytes);
rv_status jit_cuda_to_host(void *dst, JitDevPtr src, size_t bytes);
/* Launches k on grid x block (no dynamic shared memory, the default
 * stream) with cuLaunchKernel's argument array (one pointer per parameter,
 * to its value), and waits for it. */
rv_status jit_cuda_launch(JitCudaKernel *k, const unsigned grid[3], const unsigned block[3],
                          void **args);
/* How jit_cuda_launch_fn launches. */
enum {
    JIT_CUDA_NO_WAIT = 1,     /* return once queued (jit_cuda_synchronize waits) */
    JIT_CUDA_COOPERATIVE = 2, /* cuLaunchCooperativeKernel: every block resident at once */
};
/* Function `fn` of k, as jit_cuda_launch, with JIT_CUDA_* flags. */
rv_status jit_cuda_launch_fn(JitCudaKernel *k, int fn, const unsigned grid[3],
                             const unsigned block[3], void **args, unsigned flags);
/* Waits for every launch; reports a failed one. */
rv_status jit_cuda_synchronize(void);
/* The most blocks of `block_threads` threads of function fn that device 0
 * holds at once (occupancy times multiprocessors): a cooperative grid. */
rv_status jit_cuda_resident_blocks(JitCudaKernel *k, int fn, int block_threads, unsigned *blocks);

#endif
