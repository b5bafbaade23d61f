/*
 * cmd_bench.c — `ravel bench NAME [ARGS...]`: runs one benchmark of bench/.
 *
 * The drivers are separate programs (they link OpenBLAS and oneDNN, which
 * ravel itself never does), built by `make bench-build` into
 * $(BUILD)/bench/ — next to the ravel executable, which lives in $(BUILD).
 * This command finds the driver there (or in $RAVEL_BENCH_DIR) and execs
 * it with ARGS, so its output is exactly the driver's JSON lines and its
 * exit status the driver's. The Python benchmarks run a script of the
 * source tree's bench/: `torch` bench/torch_bench.py with /usr/bin/python3
 * (bench/README.md says why that one), `trees` bench/trees/bench.py with
 * the virtual environment bench/trees/setup.sh makes (PyTorch and DyNet),
 * told this build's libravel and drivers (RAVEL_LIBRARY, RAVEL_BENCH_DIR);
 * `encoder` the shell script bench/encoder/run.sh (ravel's encoder layer,
 * the packed C baseline and PyTorch's, each in its own process).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "jit/jit.h"
#include "tools.h"

typedef struct Bench {
    const char *name;
    const char *program; /* in the bench build directory, or the script in bench/ */
    const char *what;
    /* NULL: a driver; else the interpreter that runs the script: absolute,
     * or relative to the source tree's bench/ (a virtual environment) */
    const char *python;
    /* how to make that Python with torch, when it is missing; NULL: the
     * script checks what it needs itself (a shell script) */
    const char *setup;
} Bench;

static const Bench benches[] = {
    {"dense", "bench_dense", "Y = X W^T (+ bias, gelu), X [16T, K]: OpenBLAS, oneDNN", NULL, NULL},
    {"bmm", "bench_bmm", "batched matmul, NT and NN, [192, T, 64]: OpenBLAS loop, oneDNN", NULL,
     NULL},
    {"tune", "bench_tune",
     "tuned kernels (bench/records) vs hand-written, OpenBLAS/oneDNN, per-shape tuning", NULL,
     NULL},
    {"sgemm", "bench_sgemm", "square SGEMM 512..2048: OpenBLAS, oneDNN", NULL, NULL},
    {"vgemm", "bench_vgemm", "batched GEMM, per-problem M, N, K (CoRa): padded OpenBLAS, oneDNN",
     NULL, NULL},
    {"trmm", "bench_trmm",
     "lower-triangular x dense, N 256..2048 (CoRa): OpenBLAS strmm, padded sgemm", NULL, NULL},
    {"balance", "bench_balance", "ragged softmax, 2 threads: chunks of equal work vs equal rows",
     NULL, NULL},
    {"peak", "peak", "FP32 FMA peak and STREAM triad bandwidth", NULL, NULL},
    {"time", "time_rv", "kernel time of .rv programs, interleaved (FILE.rv... --size N=V)", NULL,
     NULL},
    {"torch", "torch_bench.py", "the PyTorch baselines (bench/torch_bench.py)", "/usr/bin/python3",
     "`sh bench/setup.sh` (it installs python3-torch)"},
    {"trees", "trees/bench.py",
     "recursive models (bench/trees/MODELS.md) on SST: ravel vs DyNet autobatch, PyTorch",
     "trees/.venv/bin/python",
     "`sh bench/trees/setup.sh` (it makes bench/trees/.venv with PyTorch and DyNet)"},
    {"encoder", "encoder/run.sh",
     "transformer encoder layer on ragged batches (bench/encoder/ENCODER.md): ravel vs packed C "
     "(OpenBLAS), PyTorch padded and nested",
     "/bin/sh", NULL},
};

/* The directory of the running executable (the build directory). */
static int exe_dir(char *out, size_t n) {
    char path[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
    if (len <= 0)
        return 0;
    path[len] = '\0';
    char *slash = strrchr(path, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    return snprintf(out, n, "%s", path) < (int)n;
}

/* Where the drivers are: $RAVEL_BENCH_DIR, else <exe dir>/bench. */
static int bench_dir(char *out, size_t n) {
    const char *env = getenv("RAVEL_BENCH_DIR");
    if (env && *env)
        return snprintf(out, n, "%s", env) < (int)n;
    char dir[PATH_MAX];
    if (!exe_dir(dir, sizeof dir))
        return 0;
    return snprintf(out, n, "%s/bench", dir) < (int)n;
}

/* The source tree's bench/ (for torch_bench.py): the build directory's
 * sibling, found from the executable rather than a path recorded at build
 * time, so a moved tree works and an installed ravel holds no build path. */
static int source_bench_dir(char *out, size_t n) {
    char dir[PATH_MAX];
    if (!exe_dir(dir, sizeof dir))
        return 0;
    return snprintf(out, n, "%s/../bench", dir) < (int)n;
}

static int locate(const Bench *b, char *path, size_t n) {
    char dir[PATH_MAX];
    int ok = b->python ? source_bench_dir(dir, sizeof dir) : bench_dir(dir, sizeof dir);
    return ok && snprintf(path, n, "%s/%s", dir, b->program) < (int)n;
}

/* The Python of a script benchmark: b->python, under the source tree's
 * bench/ when relative. */
static int locate_python(const Bench *b, char *path, size_t n) {
    if (b->python[0] == '/')
        return snprintf(path, n, "%s", b->python) < (int)n;
    char dir[PATH_MAX];
    return source_bench_dir(dir, sizeof dir) &&
           snprintf(path, n, "%s/%s", dir, b->python) < (int)n;
}

/* Tells a script benchmark which build it measures: this executable's
 * libravel and bench drivers (bench/trees/bench.py reads both). */
static void export_build(void) {
    char dir[PATH_MAX], p[PATH_MAX + 32];
    if (!getenv("RAVEL_LIBRARY") && exe_dir(dir, sizeof dir) &&
        snprintf(p, sizeof p, "%s/libravel.so.0", dir) < (int)sizeof p && access(p, R_OK) == 0)
        setenv("RAVEL_LIBRARY", p, 1);
    if (!getenv("RAVEL_BENCH_DIR") && bench_dir(dir, sizeof dir))
        setenv("RAVEL_BENCH_DIR", dir, 1);
}

/* The make command that builds the drivers for this executable's build
 * directory. */
static void make_hint(char *out, size_t n) {
    char dir[PATH_MAX];
    if (!exe_dir(dir, sizeof dir)) {
        snprintf(out, n, "make bench-build");
        return;
    }
    size_t len = strlen(dir);
    if (len >= 6 && strcmp(dir + len - 6, "/build") == 0)
        snprintf(out, n, "make bench-build");
    else
        snprintf(out, n, "make BUILD=%s bench-build", dir);
}

static int list(void) {
    char hint[PATH_MAX + 64];
    make_hint(hint, sizeof hint);
    for (int i = 0; i < (int)(sizeof benches / sizeof benches[0]); i++) {
        char path[PATH_MAX];
        int found = locate(&benches[i], path, sizeof path) &&
                    access(path, benches[i].python ? R_OK : X_OK | R_OK) == 0;
        printf("%-6s %s\n       %s%s\n", benches[i].name, benches[i].what, path,
               found ? "" : " (not built)");
    }
    printf("\nbuild the drivers with: %s (baselines: sh bench/setup.sh)\n", hint);
    return 0;
}

/* Can the benchmark's Python import torch? Asked before running its
 * script, whose ImportError traceback would not say how to install it;
 * find_spec does not import torch, so the check costs a Python start only.
 * A missing Python (the trees venv not made yet) fails the same way. */
static int have_torch(const char *python, const char *setup) {
    char *argv[] = {(char *)python, "-c",
                    "import importlib.util, sys; "
                    "sys.exit(importlib.util.find_spec('torch') is None)",
                    NULL};
    char *log = NULL;
    int code = 0;
    rv_status st = access(python, X_OK) == 0 ? jit_run(argv, &log, &code) : RV_ERR_IO;
    base_free(log);
    if (st != RV_OK || code != 0) {
        fprintf(stderr, "error: the benchmark needs %s with torch: run %s\n", python, setup);
        return 0;
    }
    return 1;
}

int cmd_bench(int argc, char **argv) {
    if (argc < 1) {
        tool_command_help(stderr, "bench");
        return 2;
    }
    if (strcmp(argv[0], "list") == 0)
        return list();
    const Bench *b = NULL;
    for (int i = 0; i < (int)(sizeof benches / sizeof benches[0]); i++)
        if (strcmp(benches[i].name, argv[0]) == 0)
            b = &benches[i];
    if (!b) {
        fprintf(stderr, "ravel bench: unknown benchmark '%s' (ravel bench list)\n", argv[0]);
        return 2;
    }
    char path[PATH_MAX];
    if (!locate(b, path, sizeof path)) {
        fprintf(stderr, "error: cannot locate the benchmark drivers\n");
        return 1;
    }
    int is_script = b->python != NULL;
    if (access(path, is_script ? R_OK : X_OK) != 0) {
        char hint[PATH_MAX + 64];
        make_hint(hint, sizeof hint);
        if (is_script)
            fprintf(stderr, "error: %s not found: run ravel from its source tree's build\n", path);
        else
            fprintf(stderr,
                    "error: %s is not built: run `%s` (the baselines it links: sh "
                    "bench/setup.sh)\n",
                    path, hint);
        return 1;
    }
    char python[PATH_MAX];
    if (is_script) {
        if (!locate_python(b, python, sizeof python)) {
            fprintf(stderr, "error: cannot locate the benchmark's Python\n");
            return 1;
        }
        if (b->setup && !have_torch(python, b->setup))
            return 1;
        export_build();
    }
    /* argv[0] of the driver is its path; the rest pass through */
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) {
        fprintf(stderr, "error: out of memory\n");
        return 1;
    }
    int k = 0;
    const char *prog = path;
    if (is_script) {
        prog = python;
        args[k++] = python;
    }
    args[k++] = path;
    for (int i = 1; i < argc; i++)
        args[k++] = argv[i];
    args[k] = NULL;
    fflush(stdout);
    execv(prog, args);
    fprintf(stderr, "error: cannot run %s: %s\n", prog, strerror(errno));
    free(args);
    return 1;
}
