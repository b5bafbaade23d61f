/*
 * program.h — what a compiled program holds, between the layer that makes
 * it (the compile driver, src/driver/compile.c) and the one that runs it
 * (src/runtime/program.c, rv_program_run).
 *
 * The runtime never lowers, generates code or compiles: it takes a program
 * whose kernels' interfaces, loaded functions and host plans are filled
 * in, and interprets the plan (src/plan/plan.h) on bindings. That keeps the compile driver above
 * the runtime (DESIGN.md, "driver"), where recursion lowering, batching and tuning join it without
 * going through the runtime.
 */
#ifndef RAVEL_RUNTIME_PROGRAM_H
#define RAVEL_RUNTIME_PROGRAM_H

#include <pthread.h>

#include "codegen/codegen.h"
#include "interp/interp.h"
#include "jit/jit.h"
#include "plan/plan.h"
#include "ravel_rt.h"
#include "runtime/threadpool.h"

/* The packs of params a program keeps across runs (packs.c). */
typedef struct RtPack RtPack;
typedef struct RtPacks {
    pthread_mutex_t mu;
    Vec(RtPack *) kept; /* one per pack buffer at most */
} RtPacks;

struct rv_program {
    Module *m;
    Arena *arena;     /* what runs read of the kernels (the driver's copies) */
    int ntensors;     /* the module's tensor count when compiled */
    int n;            /* kernels, of every variant */
    Kernel **kernels; /* interfaces only: no prelude, no body */
    /* Variants (plan.h): variant v's kernels are kernels[variant_first[v]
     * ...], run by plans[v]; the dispatch picks one per run when there
     * are several. */
    int nvariants;
    int *variant_first;
    Plan *plans;
    PlanDispatch dispatch;
    _Atomic int last_variant; /* the variant the last run ran, -1 before any */
    /* the names errors give tensors ("input X", "tensor X") and UFs ("ufun
     * f"), made by the compile (rt_program_name_objects): formatting them
     * per run costs more than the small runs' kernels, and runs may
     * overlap */
    InterpNames names;
    CgUnit unit;
    JitLib *lib;
    rv_rt_kernel_fn *fns;
    rv_rt_prelude_fn *preludes; /* NULL entries: no prelude */
    bool serial;
    ThreadPool *pool; /* rv_compile_options.threads > 1: the program's own; else NULL */
    rv_target target;
    JitCudaKernel **cuda_fns; /* RV_TARGET_CUDA: per kernel */
    CgLaunch *cuda_launch;    /* RV_TARGET_CUDA: per kernel */
    rv_program_counters stats;
    pthread_mutex_t stats_mu; /* guards stats: runs on several threads add to it */
    RtPacks packs;
};

/* ---- packs.c ---- */
void rt_packs_init(RtPacks *ps);
void rt_packs_free(RtPacks *ps);
/* The copy of pack buffer buf a run reads (*fill false: the kept one,
 * derived from the binding with this stamp, nelem elements) or fills
 * (*fill true: a new one, zeroed); NULL when out of memory. Stamp 0 (no
 * binding) never matches. */
RtPack *rt_pack_acquire(RtPacks *ps, const Buffer *buf, uint64_t stamp, int64_t nelem,
                        bool *fill);
void *rt_pack_data(const RtPack *k);
/* Whether pack buffers a and b hold the same contents (Buffer.pack_key). */
bool rt_pack_same(const Buffer *a, const Buffer *b);
/* Another reference to k, for a second pack buffer of a run that holds
 * the same contents; released as the first (rt_pack_release). */
RtPack *rt_pack_share(RtPacks *ps, RtPack *k);
const Buffer *rt_pack_buffer(const RtPack *k);
/* The run is done with k; keep: it succeeded, so k (filled or kept)
 * becomes its buffer's kept copy. NULL does nothing. */
void rt_pack_release(RtPacks *ps, RtPack *k, bool keep);
/* Drops every kept copy (rv_program_invalidate): the next runs re-pack. */
void rt_packs_forget(RtPacks *ps);

/* Seconds on a monotonic clock (the program's counters). */
double rt_now_seconds(void);
/* Makes p->names (the compile calls it once, before any run). */
void rt_program_name_objects(rv_program *p);

#endif
