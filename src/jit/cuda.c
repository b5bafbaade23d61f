/*
 * cuda.c — NVRTC and the CUDA driver API, loaded with dlopen on first use.
 *
 * ravel must build and run on machines without CUDA, so nothing here links
 * against CUDA: we declare the handful of entry points we call, with the
 * C types of their public headers reduced to what we use (nvrtcResult and
 * CUresult are C enums, i.e. ints; programs are opaque pointers), look them
 * up with dlsym, and report absence as a status or a zero device count.
 *
 * NVRTC is searched for under $RAVEL_NVRTC, the loader's usual names
 * (libnvrtc.so and its versioned sonames), $CUDA_HOME and $CUDA_PATH, and
 * /usr/local/cuda/lib64. The driver is libcuda.so.1, which the NVIDIA
 * driver installs; without it (no GPU) jit_cuda_device_count is 0.
 *
 * Each library is loaded once per process (pthread_once); NVRTC itself is
 * safe to call from several threads on distinct programs.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit/jit.h"

typedef struct NvrtcProgram_ *NvrtcProgram;

static struct {
    void *handle;
    char path[PATH_MAX];
    Buf tried; /* where we looked, for the "not found" message */
    int (*create)(NvrtcProgram *, const char *, const char *, int, const char *const *,
                  const char *const *);
    int (*compile)(NvrtcProgram, int, const char *const *);
    int (*log_size)(NvrtcProgram, size_t *);
    int (*log)(NvrtcProgram, char *);
    int (*ptx_size)(NvrtcProgram, size_t *);
    int (*ptx)(NvrtcProgram, char *);
    int (*destroy)(NvrtcProgram *);
    const char *(*error_string)(int);
    int (*version)(int *, int *);
} nvrtc;

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;

/* dlsym into a function pointer of any type (ISO C has no cast from void *
 * to a function pointer; POSIX guarantees the representation agrees). */
static bool load_fn(void *handle, const char *name, void *fn_ptr, size_t size) {
    void *p = dlsym(handle, name);
    if (!p || size != sizeof p)
        return false;
    memcpy(fn_ptr, &p, size);
    return true;
}
#define LOAD_FN(h, field, name) load_fn((h), (name), &(field), sizeof(field))

/* dlopens one candidate; keeps it if every entry point we need is there. */
static bool try_nvrtc(const char *name) {
    if (nvrtc.tried.len)
        buf_puts(&nvrtc.tried, ", ");
    buf_puts(&nvrtc.tried, name);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return false;
    bool ok = LOAD_FN(h, nvrtc.create, "nvrtcCreateProgram") &&
              LOAD_FN(h, nvrtc.compile, "nvrtcCompileProgram") &&
              LOAD_FN(h, nvrtc.log_size, "nvrtcGetProgramLogSize") &&
              LOAD_FN(h, nvrtc.log, "nvrtcGetProgramLog") &&
              LOAD_FN(h, nvrtc.ptx_size, "nvrtcGetPTXSize") &&
              LOAD_FN(h, nvrtc.ptx, "nvrtcGetPTX") &&
              LOAD_FN(h, nvrtc.destroy, "nvrtcDestroyProgram") &&
              LOAD_FN(h, nvrtc.error_string, "nvrtcGetErrorString") &&
              LOAD_FN(h, nvrtc.version, "nvrtcVersion");
    if (!ok) {
        dlclose(h);
        return false;
    }
    nvrtc.handle = h;
    snprintf(nvrtc.path, sizeof nvrtc.path, "%s", name);
    return true;
}

/* Tries the candidates in order (see the file comment). */
static void load_nvrtc(void) {
    const char *env = getenv("RAVEL_NVRTC");
    if (env && *env && try_nvrtc(env))
        return;
    static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                        "libnvrtc.so.11.2"};
    for (int i = 0; i < RV_COUNT(names); i++) {
        if (try_nvrtc(names[i]))
            return;
    }
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    static const char *const files[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
    for (int i = 0; i < RV_COUNT(homes); i++) {
        if (!homes[i] || !*homes[i])
            continue;
        for (int j = 0; j < RV_COUNT(files); j++) {
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/lib64/%s", homes[i], files[j]);
            if (try_nvrtc(p))
                return;
        }
    }
}

bool jit_nvrtc_available(void) {
    pthread_once(&nvrtc_once, load_nvrtc);
    return nvrtc.handle != NULL;
}

/* The program's compile log (caller frees); "" when there is none. */
static char *program_log(NvrtcProgram prog) {
    size_t n = 0;
    if (nvrtc.log_size(prog, &n) != 0 || n == 0)
        return base_xstrdup("");
    char *log = base_xmalloc(n + 1);
    if (nvrtc.log(prog, log) != 0)
        log[0] = '\0';
    log[n] = '\0';
    return log;
}

rv_status jit_nvrtc_compile(const char *cuda_src, const char *arch, char **ptx_out) {
    if (!ptx_out)
        return base_error(RV_ERR_ARG, "jit_nvrtc_compile: ptx_out is NULL");
    *ptx_out = NULL;
    if (!cuda_src)
        return base_error(RV_ERR_ARG, "jit_nvrtc_compile: source is NULL");
    if (!jit_nvrtc_available())
        return base_error(RV_ERR_UNSUPPORTED,
                          "NVRTC (libnvrtc.so) not found, so CUDA code cannot be compiled; "
                          "tried: %s. Install the CUDA toolkit or set RAVEL_NVRTC to the library",
                          buf_str(&nvrtc.tried));

    NvrtcProgram prog = NULL;
    int r = nvrtc.create(&prog, cuda_src, "ravel_kernel.cu", 0, NULL, NULL);
    if (r != 0)
        return base_error(RV_ERR_COMPILER, "nvrtcCreateProgram: %s", nvrtc.error_string(r));
    char arch_opt[64];
    const char *opts[1];
    int nopts = 0;
    if (arch && *arch) {
        snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
        opts[nopts++] = arch_opt;
    }
    rv_status st = RV_OK;
    r = nvrtc.compile(prog, nopts, opts);
    if (r != 0) {
        char *log = program_log(prog);
        int major = 0, minor = 0;
        nvrtc.version(&major, &minor);
        st = base_error(RV_ERR_COMPILER, "NVRTC %d.%d (%s) failed: %s%s%s\n--- NVRTC log ---\n%s",
                        major, minor, nvrtc.path, nvrtc.error_string(r), nopts ? "; options: " : "",
                        nopts ? arch_opt : "", log);
        base_free(log);
    } else {
        size_t n = 0;
        r = nvrtc.ptx_size(prog, &n);
        char *ptx = base_xmalloc(n + 1);
        if (r == 0)
            r = nvrtc.ptx(prog, ptx);
        if (r != 0) {
            base_free(ptx);
            st = base_error(RV_ERR_COMPILER, "nvrtcGetPTX: %s", nvrtc.error_string(r));
        } else {
            ptx[n] = '\0';
            *ptx_out = ptx;
        }
    }
    nvrtc.destroy(&prog);
    return st;
}

/* ------------------------------------------------------------ the driver */

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static int cuda_devices;

/* cuInit + cuDeviceGetCount through libcuda.so.1; leaves 0 on any failure.
 * The library stays loaded: a later loader for modules and launches will
 * reuse it. */
static void count_cuda_devices(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    int (*init)(unsigned) = NULL;
    int (*count)(int *) = NULL;
    int n = 0;
    if (LOAD_FN(h, init, "cuInit") && LOAD_FN(h, count, "cuDeviceGetCount") && init(0) == 0 &&
        count(&n) == 0)
        cuda_devices = n;
}

int jit_cuda_device_count(void) {
    pthread_once(&cuda_once, count_cuda_devices);
    return cuda_devices;
}
