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
 * /usr/local/cuda/lib64. The driver is libcuda.so.1 (or $RAVEL_CUDA_DRIVER),
 * which the NVIDIA driver installs; without it (no GPU)
 * jit_cuda_device_count is 0 and jit_cuda_init says why.
 *
 * The driver path is the minimum to run a kernel: cuInit, device 0's
 * primary context (cuDevicePrimaryCtxRetain, made current on each calling
 * thread), cuModuleLoadDataEx on NVRTC's PTX, cuModuleGetFunction,
 * cuMemAlloc/cuMemFree, cuMemcpyHtoD/DtoH, cuLaunchKernel and
 * cuCtxSynchronize; for a recursion's persistent kernel,
 * cuLaunchCooperativeKernel over the grid that
 * cuOccupancyMaxActiveBlocksPerMultiprocessor says is resident at once.
 * Every CUresult is checked and reported as
 * "cuX failed: CUDA_ERROR_NAME (description)", through cuGetErrorName and
 * cuGetErrorString.
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

/* The driver API's types, reduced to what we use: CUresult, CUdevice and
 * the enums are ints, CUdeviceptr is a 64-bit integer, handles are opaque
 * pointers. The _v2 names are the ones cuda.h maps the plain names to. */
typedef struct CudaCtx_ *CudaCtx;
typedef struct CudaModule_ *CudaModule;
typedef struct CudaFunction_ *CudaFunction;

enum {
    CU_SUCCESS = 0,
    CU_ERROR_OUT_OF_MEMORY = 2,
    CU_ATTR_CC_MAJOR = 75, /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
    CU_ATTR_CC_MINOR = 76,
    CU_ATTR_MULTIPROCESSORS = 16, /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

typedef struct Driver {
    void *handle;
    int (*init)(unsigned);
    int (*device_count)(int *);
    int (*device_get)(int *, int);
    int (*attribute)(int *, int, int);
    int (*primary_retain)(CudaCtx *, int);
    int (*ctx_set_current)(CudaCtx);
    int (*ctx_synchronize)(void);
    int (*module_load)(CudaModule *, const void *, unsigned, int *, void **);
    int (*module_function)(CudaFunction *, CudaModule, const char *);
    int (*module_unload)(CudaModule);
    int (*mem_alloc)(JitDevPtr *, size_t);
    int (*mem_free)(JitDevPtr);
    int (*htod)(JitDevPtr, const void *, size_t);
    int (*dtoh)(void *, JitDevPtr, size_t);
    int (*launch)(CudaFunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                  unsigned, void *, void **, void **);
    int (*launch_coop)(CudaFunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, void *, void **);
    int (*occupancy)(int *, CudaFunction, int, size_t);
    int (*error_name)(int, const char **);
    int (*error_string)(int, const char **);
} Driver;

/* "cuX: CUDA_ERROR_NAME (what the driver says)" as the error of status st. */
static rv_status cu_fail(const Driver *d, rv_status st, const char *call, int r) {
    const char *name = NULL, *text = NULL;
    if (d->error_name && d->error_name(r, &name) != CU_SUCCESS)
        name = NULL;
    if (d->error_string && d->error_string(r, &text) != CU_SUCCESS)
        text = NULL;
    return base_error(st, "%s failed: %s%s%s%s (CUresult %d)", call, name ? name : "CUDA error",
                      text ? " (" : "", text ? text : "", text ? ")" : "", r);
}

/* load_fn that remembers the first name it could not find. */
static bool need_fn(void *h, const char *name, void *fn_ptr, size_t size, const char **missing) {
    if (load_fn(h, name, fn_ptr, size))
        return true;
    *missing = name;
    return false;
}

/* dlopens a driver library and resolves every entry point; nothing is
 * called yet. RV_ERR_UNSUPPORTED when it is absent or incomplete. */
static rv_status driver_open(const char *lib, Driver *d) {
    memset(d, 0, sizeof *d);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return base_error(RV_ERR_UNSUPPORTED, "no CUDA driver (%s not found)", lib);
    d->handle = h;
    const char *missing = NULL;
    bool ok =
        need_fn(h, "cuInit", &d->init, sizeof d->init, &missing) &&
        need_fn(h, "cuDeviceGetCount", &d->device_count, sizeof d->device_count, &missing) &&
        need_fn(h, "cuDeviceGet", &d->device_get, sizeof d->device_get, &missing) &&
        need_fn(h, "cuDeviceGetAttribute", &d->attribute, sizeof d->attribute, &missing) &&
        need_fn(h, "cuDevicePrimaryCtxRetain", &d->primary_retain, sizeof d->primary_retain,
                &missing) &&
        need_fn(h, "cuCtxSetCurrent", &d->ctx_set_current, sizeof d->ctx_set_current, &missing) &&
        need_fn(h, "cuCtxSynchronize", &d->ctx_synchronize, sizeof d->ctx_synchronize, &missing) &&
        need_fn(h, "cuModuleLoadDataEx", &d->module_load, sizeof d->module_load, &missing) &&
        need_fn(h, "cuModuleGetFunction", &d->module_function, sizeof d->module_function,
                &missing) &&
        need_fn(h, "cuModuleUnload", &d->module_unload, sizeof d->module_unload, &missing) &&
        need_fn(h, "cuMemAlloc_v2", &d->mem_alloc, sizeof d->mem_alloc, &missing) &&
        need_fn(h, "cuMemFree_v2", &d->mem_free, sizeof d->mem_free, &missing) &&
        need_fn(h, "cuMemcpyHtoD_v2", &d->htod, sizeof d->htod, &missing) &&
        need_fn(h, "cuMemcpyDtoH_v2", &d->dtoh, sizeof d->dtoh, &missing) &&
        need_fn(h, "cuLaunchKernel", &d->launch, sizeof d->launch, &missing) &&
        need_fn(h, "cuLaunchCooperativeKernel", &d->launch_coop, sizeof d->launch_coop,
                &missing) &&
        need_fn(h, "cuOccupancyMaxActiveBlocksPerMultiprocessor", &d->occupancy,
                sizeof d->occupancy, &missing) &&
        need_fn(h, "cuGetErrorName", &d->error_name, sizeof d->error_name, &missing) &&
        need_fn(h, "cuGetErrorString", &d->error_string, sizeof d->error_string, &missing);
    if (!ok) {
        dlclose(h);
        memset(d, 0, sizeof *d);
        return base_error(RV_ERR_UNSUPPORTED, "CUDA driver %s lacks %s", lib, missing);
    }
    return RV_OK;
}

/* cuInit and one device: its count in *ndev. */
static rv_status driver_start(const Driver *d, int *ndev) {
    int r;
    *ndev = 0;
    if ((r = d->init(0)) != CU_SUCCESS)
        return cu_fail(d, RV_ERR_UNSUPPORTED, "cuInit", r);
    if ((r = d->device_count(ndev)) != CU_SUCCESS)
        return cu_fail(d, RV_ERR_UNSUPPORTED, "cuDeviceGetCount", r);
    if (*ndev == 0)
        return base_error(RV_ERR_UNSUPPORTED, "the CUDA driver reports no device");
    return RV_OK;
}

rv_status jit_cuda_probe(const char *lib) {
    Driver d;
    rv_status st = driver_open(lib, &d);
    if (st != RV_OK)
        return st;
    int n;
    st = driver_start(&d, &n);
    dlclose(d.handle);
    return st;
}

/* The process's driver: loaded and initialized once; device 0's primary
 * context, made current on each thread that calls in. */
static struct {
    Driver d;
    int devices;
    int device;
    CudaCtx ctx;
    rv_status st; /* of loading and initializing */
    char why[512];
} cuda;

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;

static void load_driver(void) {
    const char *lib = getenv("RAVEL_CUDA_DRIVER");
    if (!lib || !*lib)
        lib = "libcuda.so.1";
    rv_status st = driver_open(lib, &cuda.d);
    int r;
    if (st == RV_OK)
        st = driver_start(&cuda.d, &cuda.devices);
    if (st == RV_OK && (r = cuda.d.device_get(&cuda.device, 0)) != CU_SUCCESS)
        st = cu_fail(&cuda.d, RV_ERR_UNSUPPORTED, "cuDeviceGet", r);
    if (st == RV_OK && (r = cuda.d.primary_retain(&cuda.ctx, cuda.device)) != CU_SUCCESS)
        st = cu_fail(&cuda.d, RV_ERR_UNSUPPORTED, "cuDevicePrimaryCtxRetain", r);
    if (st != RV_OK) {
        snprintf(cuda.why, sizeof cuda.why, "%s", rv_last_error());
        cuda.devices = 0;
    }
    cuda.st = st;
}

int jit_cuda_device_count(void) {
    pthread_once(&cuda_once, load_driver);
    return cuda.devices;
}

rv_status jit_cuda_init(void) {
    pthread_once(&cuda_once, load_driver);
    if (cuda.st != RV_OK)
        return base_error(cuda.st, "%s", cuda.why);
    int r = cuda.d.ctx_set_current(cuda.ctx);
    if (r != CU_SUCCESS)
        return cu_fail(&cuda.d, RV_ERR_UNSUPPORTED, "cuCtxSetCurrent", r);
    return RV_OK;
}

rv_status jit_cuda_arch(char out[32]) {
    rv_status st = jit_cuda_init();
    if (st != RV_OK)
        return st;
    int major = 0, minor = 0, r;
    if ((r = cuda.d.attribute(&major, CU_ATTR_CC_MAJOR, cuda.device)) != CU_SUCCESS ||
        (r = cuda.d.attribute(&minor, CU_ATTR_CC_MINOR, cuda.device)) != CU_SUCCESS)
        return cu_fail(&cuda.d, RV_ERR_UNSUPPORTED, "cuDeviceGetAttribute", r);
    snprintf(out, 32, "compute_%d%d", major, minor);
    return RV_OK;
}

struct JitCudaKernel {
    CudaModule mod;
    int nfns;
    CudaFunction *fns;
};

rv_status jit_cuda_load(const char *ptx, const char *sym, JitCudaKernel **out) {
    return jit_cuda_load_fns(ptx, &sym, 1, out);
}

rv_status jit_cuda_load_fns(const char *ptx, const char *const *syms, int nsyms,
                            JitCudaKernel **out) {
    *out = NULL;
    rv_status st = jit_cuda_init();
    if (st != RV_OK)
        return st;
    char log[4096] = "";
    int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
    CudaModule mod = NULL;
    int r = cuda.d.module_load(&mod, ptx, 2, opts, vals);
    if (r != CU_SUCCESS) {
        log[sizeof log - 1] = '\0';
        cu_fail(&cuda.d, RV_ERR_COMPILER, "cuModuleLoadDataEx", r);
        return base_error(RV_ERR_COMPILER, "%s\n--- PTX JIT log ---\n%s", rv_last_error(), log);
    }
    CudaFunction *fns = base_xcalloc((size_t)nsyms + 1, sizeof *fns);
    for (int i = 0; i < nsyms; i++)
        if ((r = cuda.d.module_function(&fns[i], mod, syms[i])) != CU_SUCCESS) {
            st = cu_fail(&cuda.d, RV_ERR_COMPILER, "cuModuleGetFunction", r);
            cuda.d.module_unload(mod);
            base_free(fns);
            return st;
        }
    JitCudaKernel *k = base_xcalloc(1, sizeof *k);
    k->mod = mod;
    k->nfns = nsyms;
    k->fns = fns;
    *out = k;
    return RV_OK;
}

void jit_cuda_unload(JitCudaKernel *k) {
    if (!k)
        return;
    if (jit_cuda_init() == RV_OK)
        cuda.d.module_unload(k->mod);
    base_free(k->fns);
    base_free(k);
}

rv_status jit_cuda_alloc(size_t bytes, JitDevPtr *out) {
    *out = 0;
    rv_status st = jit_cuda_init();
    if (st != RV_OK)
        return st;
    int r = cuda.d.mem_alloc(out, bytes ? bytes : 1);
    if (r != CU_SUCCESS)
        return cu_fail(&cuda.d, r == CU_ERROR_OUT_OF_MEMORY ? RV_ERR_OOM : RV_ERR_IO, "cuMemAlloc",
                       r);
    return RV_OK;
}

void jit_cuda_free(JitDevPtr p) {
    if (p && jit_cuda_init() == RV_OK)
        cuda.d.mem_free(p);
}

rv_status jit_cuda_to_device(JitDevPtr dst, const void *src, size_t bytes) {
    rv_status st = jit_cuda_init();
    if (st != RV_OK || bytes == 0)
        return st;
    int r = cuda.d.htod(dst, src, bytes);
    return r == CU_SUCCESS ? RV_OK : cu_fail(&cuda.d, RV_ERR_IO, "cuMemcpyHtoD", r);
}

rv_status jit_cuda_to_host(void *dst, JitDevPtr src, size_t bytes) {
    rv_status st = jit_cuda_init();
    if (st != RV_OK || bytes == 0)
        return st;
    int r = cuda.d.dtoh(dst, src, bytes);
    return r == CU_SUCCESS ? RV_OK : cu_fail(&cuda.d, RV_ERR_IO, "cuMemcpyDtoH", r);
}

rv_status jit_cuda_launch(JitCudaKernel *k, const unsigned grid[3], const unsigned block[3],
                          void **args) {
    return jit_cuda_launch_fn(k, 0, grid, block, args, 0);
}

rv_status jit_cuda_launch_fn(JitCudaKernel *k, int fn, const unsigned grid[3],
                             const unsigned block[3], void **args, unsigned flags) {
    rv_status st = jit_cuda_init();
    if (st != RV_OK)
        return st;
    RV_ASSERT(fn >= 0 && fn < k->nfns);
    bool coop = flags & JIT_CUDA_COOPERATIVE;
    int r = coop ? cuda.d.launch_coop(k->fns[fn], grid[0], grid[1], grid[2], block[0], block[1],
                                      block[2], 0, NULL, args)
                 : cuda.d.launch(k->fns[fn], grid[0], grid[1], grid[2], block[0], block[1],
                                 block[2], 0, NULL, args, NULL);
    if (r != CU_SUCCESS)
        return cu_fail(&cuda.d, RV_ERR_IO, coop ? "cuLaunchCooperativeKernel" : "cuLaunchKernel",
                       r);
    return flags & JIT_CUDA_NO_WAIT ? RV_OK : jit_cuda_synchronize();
}

rv_status jit_cuda_synchronize(void) {
    rv_status st = jit_cuda_init();
    if (st != RV_OK)
        return st;
    int r = cuda.d.ctx_synchronize();
    return r == CU_SUCCESS ? RV_OK
                           : cu_fail(&cuda.d, RV_ERR_IO, "cuCtxSynchronize (the kernel failed)", r);
}

rv_status jit_cuda_resident_blocks(JitCudaKernel *k, int fn, int block_threads, unsigned *blocks) {
    *blocks = 0;
    rv_status st = jit_cuda_init();
    if (st != RV_OK)
        return st;
    RV_ASSERT(fn >= 0 && fn < k->nfns);
    int per_sm = 0, sms = 0, r;
    if ((r = cuda.d.occupancy(&per_sm, k->fns[fn], block_threads, 0)) != CU_SUCCESS)
        return cu_fail(&cuda.d, RV_ERR_IO, "cuOccupancyMaxActiveBlocksPerMultiprocessor", r);
    if ((r = cuda.d.attribute(&sms, CU_ATTR_MULTIPROCESSORS, cuda.device)) != CU_SUCCESS)
        return cu_fail(&cuda.d, RV_ERR_UNSUPPORTED, "cuDeviceGetAttribute", r);
    if (per_sm < 1 || sms < 1)
        return base_error(RV_ERR_UNSUPPORTED,
                          "a block of %d threads of this kernel does not fit a multiprocessor",
                          block_threads);
    *blocks = (unsigned)per_sm * (unsigned)sms;
    return RV_OK;
}
