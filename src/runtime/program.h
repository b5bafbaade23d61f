/*
 * program.h — what a compiled program holds, between the layer that makes
 * it (the compile driver, src/driver/compile.c) and the one that runs it
 * (src/runtime/program.c, rv_program_run).
 *
 * The runtime never lowers, generates code or compiles: it takes a program
 * whose kernels' interfaces, loaded functions and host plan are filled in,
 * and executes it on bindings. That keeps the compile driver above the
 * runtime (DESIGN.md, "driver"), where recursion lowering, batching and
 * tuning join it without going through the runtime.
 */
#ifndef RAVEL_RUNTIME_PROGRAM_H
#define RAVEL_RUNTIME_PROGRAM_H

#include "codegen/codegen.h"
#include "jit/jit.h"
#include "ravel_rt.h"

struct rv_program {
    Module *m;
    Arena *arena; /* what runs read of the kernels (the driver's copies) */
    int ntensors; /* the module's tensor count when compiled */
    int n;        /* kernels */
    Kernel **kernels; /* interfaces only: no prelude, no body */
    CgUnit unit;
    JitLib *lib;
    rv_rt_kernel_fn *fns;
    rv_rt_prelude_fn *preludes; /* NULL entries: no prelude */
    bool serial;
    rv_target target;
    JitCudaKernel **cuda_fns; /* RV_TARGET_CUDA: per kernel */
    CgLaunch *cuda_launch;    /* RV_TARGET_CUDA: per kernel */
    rv_program_counters stats;
};

/* Seconds on a monotonic clock (the program's counters). */
double rt_now_seconds(void);

#endif
