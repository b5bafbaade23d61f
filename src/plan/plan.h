/*
 * plan.h — the host plan of a compiled program: the one list of host
 * steps around its kernels (check the arguments, place the UF arrays,
 * allocate the AUX arrays, run the preludes, place the tensors, call the
 * kernels, return the results), built once from the lowering's kernels.
 *
 * Two clients execute it and neither decides the order on its own:
 *   - the runtime interprets it (src/runtime/program.c, rv_program_run);
 *   - the AOT output prints it as C (src/codegen/c_aot.c, NAME_run).
 * So JIT and AOT runs cannot diverge in what they allocate, which buffers
 * the kernels share, or in which order kernels and preludes run.
 *
 * WHERE IT SITS. A layer of its own between lower and codegen (DESIGN.md:
 * a layer uses only layers above it): the plan is built from lowering
 * output (Kernel, Param, Buffer), and both codegen (which prints it) and
 * the runtime (which runs it) are below it. It knows nothing of C, of the
 * JIT or of bindings: a step names slots and kernels, the executor gives
 * them meaning.
 *
 * SLOTS. One per distinct object a kernel takes as a buffer: a UF's array,
 * an AUX array, a tensor's storage. Kernels naming the same tensor (or the
 * same UF or AUX buffer) share its slot; the slot's buffer is the first one
 * seen, in kernel and parameter order.
 *
 * VARIANTS AND DISPATCH. A program may hold several variants: the kernels
 * of different schedules of the same definitions. Each variant has its
 * own plan (slots, buffers and steps differ with the schedule); a
 * PlanDispatch picks one per call from the sizes, after the arguments are
 * checked: the first step (CHECK_ARGS) is the same in every variant and
 * runs before the dispatch, the chosen variant's other steps after it.
 * The choice is either a C function (a tuner's generated decision tree,
 * or the user's) or a rule table evaluated here (plan_dispatch_pick); the
 * AOT output prints the table as C, or calls the user's NAME_dispatch.
 *
 * PRELUDES. AUX arrays depend only on sizes and UFs, and storages of one
 * raggedness pattern share them (ir/layout.h, StorageShare), so a
 * lowering fills each in one kernel's prelude; the plan runs a prelude
 * only when it fills an AUX slot no earlier one does (each distinct AUX
 * array is computed once per call, whatever the number of kernels using
 * it) and counts the preludes and AUX bytes (rv_program_counters).
 *
 * PACKS. A param's pack that the lowering keeps across runs (BUF_PACK,
 * lower/attach.c) has a slot, and so has its fill flag; PLACE_PACK gives
 * the kernels the kept contents and sets the flag to 0 when they were
 * derived from the binding the run has, else it gives them a buffer to
 * fill and sets the flag to 1 (the runtime's packs.c; the AOT's context).
 *
 * RAVEL_DEBUG=plan prints every plan when it is built (stderr), and the
 * preludes' time and AUX bytes of every run.
 */
#ifndef RAVEL_PLAN_H
#define RAVEL_PLAN_H

#include "lower/lower.h"

typedef enum PlanSlotKind {
    PLAN_SLOT_UF,
    PLAN_SLOT_AUX,
    PLAN_SLOT_TENSOR,
    PLAN_SLOT_PACK /* a param's kept pack (Buffer.pack_of), or its fill flag */
} PlanSlotKind;

typedef struct PlanSlot {
    PlanSlotKind kind;
    Buffer *buf; /* the first buffer seen for it */
    Tensor *t;   /* TENSOR */
} PlanSlot;

#define PLAN_STEPS(X)                                                                              \
    X(CHECK_ARGS, "check arguments")    /* sizes, UF arrays and values, inputs' shapes */          \
    X(PLACE_UF, "place ufun")           /* slot: the UF's array in the buffer's dtype */           \
    X(ALLOC_AUX, "allocate aux")        /* slot: zeroed, Buffer.size elements */                   \
    X(PRELUDE, "prelude")               /* kernel: fills AUX arrays no earlier prelude fills */    \
    X(CHECK_UF_SIZE, "check ufun size") /* slot: Buffer.size against the UF's domain */            \
    X(PLACE_TENSOR, "place tensor")     /* slot: in place, copied, or padded storage */            \
    X(PLACE_PACK, "place pack")         /* slot: a kept pack, and its fill flag (PACKS) */         \
    X(CHECK_STRUCT, "check structure")  /* kernel: a recursion's numbering (runtime/numbering.c) */ \
    X(TO_DEVICE, "copy to device")      /* every slot (RV_TARGET_CUDA) */                          \
    X(CALL, "call")                     /* kernel */                                               \
    X(FROM_DEVICE, "copy from device")  /* computed tensors' slots (RV_TARGET_CUDA) */             \
    X(RESULT, "result")                 /* slot: a computed tensor, canonical; or none */          \
    X(RETURN, "return")                 /* hand the results over, all at once */

typedef enum PlanStepKind {
#define PLAN_STEP_ENUM(name, text) PLAN_##name,
    PLAN_STEPS(PLAN_STEP_ENUM)
#undef PLAN_STEP_ENUM
        PLAN_STEP_COUNT
} PlanStepKind;

typedef struct PlanStep {
    PlanStepKind kind;
    int slot;    /* PLACE_*, ALLOC_AUX, CHECK_UF_SIZE, RESULT (-1: no storage) */
    int kernel;  /* PRELUDE, CHECK_STRUCT, CALL */
    Tensor *t;   /* RESULT: the computed tensor */
    bool output; /* RESULT: a program output (the AOT returns only those) */
} PlanStep;

typedef struct Plan {
    Module *m;
    Kernel *const *ks;
    int nk;
    Vec(PlanSlot) slots;
    Vec(PlanStep) steps;
    PtrMap slot_of; /* Tensor* (tensors) or Buffer* (UF, AUX) -> 1 + slot index */
    /* kernel k's parameter i is slot arg_slot.data[arg_at.data[k] + i]
     * (-1: a size): plan_slot_for's answers, kept for the executor, which
     * lists every call's arguments */
    Vec(int) arg_slot;
    Vec(int) arg_at;
    /* per kernel, the AUX slots its prelude stores to (fills_at[k] ..
     * fills_at[k + 1] in fills); a prelude with none new is not a step */
    Vec(int) fills;
    Vec(int) fills_at;
} Plan;

/* The plan of kernels ks[0..n) of m, in order; prelude[k]: kernel k has a
 * prelude (NULL: none has); device: the kernels run on a device
 * (TO_DEVICE before the first call, FROM_DEVICE after the last). */
void plan_build(Plan *p, Module *m, Kernel *const *ks, int n, const bool *prelude, bool device);
void plan_free(Plan *p);
/* The slot of a kernel's buffer (by its tensor, else by the buffer). */
PlanSlot *plan_slot_for(const Plan *p, const Buffer *b);
int plan_slot_index(const Plan *p, const PlanSlot *s);
/* The slot index of kernel k's parameter i (-1: a size parameter). */
static inline int plan_arg_slot(const Plan *p, int k, int i) {
    return p->arg_slot.data[p->arg_at.data[k] + i];
}
/* A step's name ("place tensor"). */
const char *plan_step_name(PlanStepKind k);
/* Does RAVEL_DEBUG ask for plans ("plan" or "all")? */
bool plan_debug(void);
/* The plan as text, one step a line (RAVEL_DEBUG=plan). */
void plan_print(Buf *b, const Plan *p);

/* ---- dispatch among variants ---- */

/* One rule: variant `variant` when every size named in the rule lies in
 * its [lo, hi]. Rules are tried in order; the first that holds wins, and
 * no rule holding means variant 0. */
#define PLAN_RULE_MAX_SIZES 4
typedef struct PlanRule {
    int nsizes;
    Size *size[PLAN_RULE_MAX_SIZES];
    int64_t lo[PLAN_RULE_MAX_SIZES], hi[PLAN_RULE_MAX_SIZES];
    int variant;
} PlanRule;

/* Sizes a variant is compiled for: size[i] == value[i] (nsizes 0: any). */
typedef struct PlanAt {
    int nsizes;
    Size *size[RV_DISPATCH_MAX_CONDS];
    int64_t value[RV_DISPATCH_MAX_CONDS];
} PlanAt;

/* The choice of a variant from the sizes, values indexed by Size.id. */
typedef int (*PlanDispatchFn)(const int64_t *sizes, void *user);

typedef struct PlanDispatch {
    int nvariants;
    PlanDispatchFn fn; /* if set, it decides (a tuner's C dispatcher) */
    void *user;
    bool c_function; /* the AOT output calls NAME_dispatch, the user's (ravel build) */
    int nrules;      /* otherwise the rule table */
    PlanRule *rules;
    /* fn's quantities after the sizes (rv_dispatch.sums): the sum of each
     * UF's values over its domain, at sizes[m->sizes.len + q] */
    int nsums;
    Ufun **sums;
    /* NULL, or per variant the sizes it was compiled for
     * (rv_dispatch.variant_sizes): the lowering makes them constants, and
     * the runtime and the AOT output fail a run that chose the variant at
     * other values */
    PlanAt *at;
} PlanDispatch;

/* The variant for these sizes (by Size.id, then the sums' values); an
 * answer outside [0, nvariants), or a variant compiled for other values
 * of the sizes (PlanDispatch.at), is reported (RV_ERR_ARG). */
rv_status plan_dispatch_pick(const PlanDispatch *d, const int64_t *sizes, int *variant);
void plan_dispatch_print(Buf *b, const PlanDispatch *d);

#endif
