/*
 * sched.h — schedules: the map of src/sched.
 *
 * A schedule says *how* a module's tensors are computed without changing
 * *what* they compute. It is data, kept apart from the definitions: a list
 * of stages, one per computed tensor plus the cache stages the schedule
 * adds, each with a tree of iteration variables (IterVars) whose leaves are
 * the stage's loops in order. Every primitive is a step of a textual trace
 * (`io, ii = split(i, 32)`), written in `schedule Y { ... }` blocks of a
 * .rv file or given through the C API; replaying the trace on the
 * unscheduled module rebuilds the schedule, which is what the
 * auto-scheduler will search over.
 *
 * IterVars. A stage starts with one ROOT variable per spatial axis and, when
 * its body has exactly one outermost reduction, one per reduce axis of that
 * reduction (so GEMM's k loop can be split and moved). split(v, f) replaces
 * leaf v by OUTER (extent ceil(E/f)) and INNER (extent f): v = o*f + i; the
 * tail of a non-dividing split is handled by lowering (a partitioned copy
 * of the loop nest without checks plus a guarded tail, or guards). fuse(a,
 * b) replaces adjacent leaves a, b by one FUSED variable: a = f / E_b,
 * b = f % E_b. Loop kinds (parallel, vectorize, unroll, GPU bind) are
 * properties of leaves.
 *
 * Stages and placement. A stage is ATTACH_ROOT (its own kernel),
 * ATTACH_INLINE (its expression substituted into its readers), or
 * ATTACH_AT (computed inside a loop of a stage that reads it or hosts its
 * readers, over the region that loop's iterations read: bounds inference
 * in src/lower/bounds.c). cache_read(X) adds a stage copying X into a local
 * buffer and makes the reader read the copy; cache_write(Y) moves Y's
 * reduction into a new stage whose result Y's epilogue reads. With local
 * padding (`pad=1`, DietCode section 4.1) a cache stage covers the whole
 * tile: out-of-range elements are zero on load, and the compute over the
 * tile needs no bounds checks.
 *
 * Every primitive checks its preconditions and rejects an illegal use with
 * a message located at the step (`file:line:col: split: ...`), never
 * producing a schedule that would compute something else.
 */
#ifndef RAVEL_SCHED_H
#define RAVEL_SCHED_H

#include "ir/ir.h"

typedef enum LoopKind {
#define LOOP(k, sched_name, ir_name) LOOP_##k,
#include "loops.def"
#undef LOOP
    LOOP_COUNT
} LoopKind;

/* Is a loop of kind k bound to a GPU block or thread index? */
static inline bool sched_kind_is_gpu(LoopKind k) {
    return k >= LOOP_GPU_BLOCK_X && k <= LOOP_GPU_THREAD_Z;
}

typedef enum IterRel {
    IV_ROOT,  /* an axis of the stage */
    IV_OUTER, /* the outer part of a split */
    IV_INNER, /* the inner part of a split (extent = factor) */
    IV_FUSED, /* two adjacent loops made one */
    IV_COUNT
} IterRel;

/* How lowering handles the tail of a split that may not divide. */
typedef enum TailMode {
    TAIL_PARTITION, /* a copy of the nest for full tiles, a guarded last tile */
    TAIL_GUARD,     /* one nest, the body guarded */
    TAIL_MERGE,     /* the last partial tile joins the previous full one: blocks of F..2F-1 */
    TAIL_COUNT
} TailMode;

typedef struct IterVar IterVar;
/* Iteration variables a stage may have (splits and fuses add them): the
 * lowering's nest state has room for this many. */
#define SCHED_MAX_IVS 64
/* The largest extent vectorize and unroll take; the code generators unroll
 * no further (a cache stage's region extent is known only when lowered). */
#define SCHED_MAX_UNROLL 64
struct IterVar {
    const char *name;
    IterRel rel;
    bool reduce;            /* derived from reduce axes */
    Axis *axis;             /* ROOT: the stage's axis */
    IterVar *parent;        /* OUTER, INNER: the variable split */
    int64_t factor;         /* OUTER, INNER: the inner extent */
    IterVar *fa, *fb;       /* FUSED: the outer and inner variable fused */
    IterVar *outer, *inner; /* on a split variable: its parts */
    IterVar *fused;         /* on a fused-away variable: the result */
    TailMode tail;          /* on a split variable */
    LoopKind kind;          /* leaves */
    int64_t pad;            /* ROOT: loop padding multiple (1: none) */
    int id;                 /* creation order within the stage */
    /* FUSED: b's extent depends on a (CoRa's variable-loop fusion, vfuse.c):
     * f runs over the sum of b's extents, a and b come from prelude maps */
    bool variable;
    /* a bulk-padded fused loop: the pad step, where a later step that
     * breaks its rules is reported (sched_check_bulk_pads) */
    const SchedStep *pad_step;
    const SrcFile *pad_src;
    /* ROOT of a part of a split operation (split_op, opsplit.c): the axis
     * runs over [0, E/F*F) (PART_FULL) or [E/F*F, E) (PART_REST) where E
     * is its extent and F part_mult; PART_WHOLE: over [0, E) */
    int part;
    int64_t part_mult;
};
enum { PART_WHOLE, PART_FULL, PART_REST };

typedef enum StageKind {
    STAGE_OP,          /* a tensor of the module */
    STAGE_CACHE_READ,  /* a local copy of a tensor, for one reader */
    STAGE_CACHE_WRITE, /* a reduction moved out of its epilogue */
    STAGE_PART,        /* a part of a split operation: its tensor over a range of one axis */
    STAGE_COUNT
} StageKind;

typedef enum AttachKind {
    ATTACH_ROOT,   /* its own kernel */
    ATTACH_AT,     /* inside a loop (or at the top) of its reader's nest */
    ATTACH_INLINE, /* substituted into its readers */
    ATTACH_COUNT
} AttachKind;

/* Annotations that later layers put on a stage: recursion (Cortex) and
 * batching (ACROBAT). Typed slots that the schedule carries and prints and
 * the query reports; nothing acts on them yet. The kinds are the public
 * rv_stage_note_kind (include/ravel.h), in the same order. */
typedef enum StageNoteKind {
    NOTE_DYNAMIC_BATCH, /* Cortex: a recursive stage's instances batched per level */
    NOTE_SPECIALIZE,    /* Cortex: a recursive stage specialized per case (leaf, internal) */
    NOTE_BATCH,         /* ACROBAT: calls batched across instances */
    NOTE_REFACTOR,      /* Cortex: a member computed at its parents' nodes (refactor) */
    NOTE_GPU_BATCHES,   /* CUDA: how the group's batches are separated (SchedGpuBatches) */
    NOTE_UNROLL,        /* Cortex: a node computed with its children (unroll_recursion) */
    NOTE_COUNT
} StageNoteKind;

/* NOTE_GPU_BATCHES' payload (gpu_batches("launch") / ("persistent")). */
typedef enum SchedGpuBatches {
    SCHED_GPU_NONE,       /* no GPU-bound loop in the group */
    SCHED_GPU_LAUNCH,     /* the batch loop on the host: a launch per batch */
    SCHED_GPU_PERSISTENT, /* one kernel, a grid-wide barrier between batches */
} SchedGpuBatches;

/* payload: DYNAMIC_BATCH the largest batch (0: any), SPECIALIZE which
 * case, BATCH the batching group (docs/schedules.md) */
typedef struct StageNote {
    StageNoteKind kind;
    int64_t payload;
} StageNote;
#define SCHED_MAX_NOTES 6 /* one of each kind */

typedef struct Stage Stage;
/* A split layout (layout="j/64, l, j%64"): dimension d is stored as its
 * panel d/split[d] and its offset in the panel d%split[d] (0: not split);
 * slots lists the storage dimensions, outermost first, a whole dimension
 * or a panel as d, an offset in a panel as ~d. Out of line: most stages
 * have none (a program of 24000 stages checks in 40 bytes per byte). */
typedef struct StagePanels {
    int64_t split[RV_MAX_DIMS];
    int slots[2 * RV_MAX_DIMS];
    int nslots;
} StagePanels;

struct Stage {
    const char *name;
    StageKind kind;
    /* The tensor the stage computes. Cache stages get a tensor of their own
     * that is not in the module's list (the interpreter never sees it). */
    Tensor *t;
    /* The element definition, after cache rewrites and inlining: body for
     * compute and cache stages, pred/body/else_body for COND. */
    Expr *body, *pred, *else_body;
    Expr *reduce;          /* the outermost REDUCE of body whose axes are IterVars, or NULL */
    Vec(IterVar *) ivs;    /* all, in creation order */
    Vec(IterVar *) leaves; /* the loops, outermost first */
    AttachKind attach;
    Stage *at;      /* ATTACH_AT: the reader */
    IterVar *at_iv; /* ATTACH_AT: its loop; NULL: the top of its nest */
    /* ATTACH_AT: the step that placed it (compute_at, cache_read or
     * cache_write), where placement errors are located, and its number */
    const SchedStep *at_step;
    const SrcFile *at_src;
    int at_seq;
    bool local_pad; /* compute the whole tile (no clipping to the tensor) */
    int64_t align;  /* local buffer: innermost extent rounded up to this */
    /* local buffer: storage order of the dimensions, outermost first
     * (cache_read(W, layout="k, j") packs a transposed copy); identity by
     * default */
    int order[RV_MAX_DIMS];
    const StagePanels *panels; /* a split layout, or NULL (none split) */
    Tensor *source; /* CACHE_READ: the tensor copied */
    bool touched;   /* a loop primitive has run (cache_write must come first) */
    SrcLoc loc;     /* where it was created (cache stages) */
    int id;
    StageNote notes[SCHED_MAX_NOTES]; /* at most one of each kind */
    int nnotes;
    /* split_op (opsplit.c): a split stage has no loops of its own, its
     * parts compute it (full tiles first); a part knows its whole. The
     * step that split it locates errors. */
    Stage *parts[2];
    Stage *whole;
    const SchedStep *split_step;
    const SrcFile *split_src;
    /* hfuse(P) in this stage's schedule (opsplit.c): its outermost loop
     * and P's run as one loop over the concatenation of their iterations
     * (this stage's first), in one kernel; P's hfused_by is this stage */
    Stage *hfuse_with, *hfused_by;
    const SchedStep *hfuse_step;
    const SrcFile *hfuse_src;
};

typedef struct Schedule {
    Module *m;
    Vec(Stage *) stages; /* producers before readers */
    StrMap by_name;
    Buf trace; /* the steps applied, as .rv schedule blocks */
    int nsteps; /* steps applied so far */
} Schedule;

/* ---- sched.c: stages, the trace and replay ---- */

/* The default schedule of every computed tensor (serial loops in axis
 * order, one kernel each), then the module's schedule blocks applied in
 * order. Errors are located at the offending step. */
rv_status sched_from_module(Module *m, Schedule **out);
/* The default schedule alone. */
Schedule *sched_new(Module *m);
void sched_free(Schedule *s);
Stage *sched_stage(const Schedule *s, const char *name);
/* Applies one block (its target resolved by name among the stages). */
rv_status sched_apply_block(Schedule *s, const SchedBlock *blk);
/* The stage's leaves and placement, for dumps and tests. */
void sched_print_stage(Buf *b, const Stage *st);
/* Tensors of the module that stage `st` reads (after rewrites), in order;
 * base_free the array. */
int sched_stage_reads(const Stage *st, Tensor ***out);
bool sched_stage_reads_tensor(const Stage *st, const Tensor *t);
/* The reduction of a body whose axes become a stage's loops (the only
 * outermost one), or NULL. */
Expr *sched_stage_reduction(Expr *body);
/* A stage other than `except` (and t's own) that reads t, or NULL. */
Stage *sched_reader(const Schedule *s, const Tensor *t, const Stage *except);
/* True when v is `root` or was split or fused from it. */
bool sched_iv_derives_from(const IterVar *v, const IterVar *root);
/* The stage whose tensor is t, or NULL. */
Stage *sched_stage_of(const Schedule *s, const Tensor *t);
const char *sched_loop_kind_name(LoopKind k);
const char *sched_note_kind_name(StageNoteKind k); /* "dynamic_batch", ... */
/* Sets the stage's note of kind k (replacing one of that kind). */
void sched_stage_note(Stage *st, StageNoteKind k, int64_t payload);
/* For the primitives: a new root-attached stage (appended), and the root
 * IterVars of a stage from its tensor's axes and reduction. */
Stage *sched_stage_add(Schedule *s, const char *name, StageKind k, Tensor *t);
void sched_stage_init_ivs(Schedule *s, Stage *st);

/* ---- query.c: the schedule as data (rv_module_schedule_info) ---- */

/* A snapshot of s that owns its strings (rv_schedule_info_free). */
rv_schedule_info *sched_query(const Schedule *s);

/* ---- primtab.c: the table of primitives (prims.def) ---- */

/* PRIM_LOOPS: the stage must have loops of its own. PRIM_GROUP: the step
 * schedules a recursion group, not a stage. */
enum { PRIM_LOOPS = 1, PRIM_GROUP = 2 };

typedef struct SchedPrim {
    const char *name;
    const char *results; /* the names it gives, "o, i"; "" none */
    const char *params;  /* positional arguments, "v:loop, [scope:str]" */
    const char *keys;    /* keyword arguments, "pad:int, align:int" */
    unsigned flags;
    const char *doc;
} SchedPrim;

typedef enum SchedParamKind {
    PK_LOOP,   /* a loop of the scheduled stage */
    PK_STAGE,  /* a stage's name */
    PK_TENSOR, /* a tensor's name */
    PK_INT,
    PK_STR,
    PK_COUNT
} SchedParamKind;

/* One entry of a row's params or keys. */
#define SCHED_MAX_PARAMS 8
typedef struct SchedParam {
    char name[16];
    SchedParamKind kind;
    bool optional, repeated;
} SchedParam;

extern const SchedPrim sched_prims[]; /* in prims.def order */
extern const int sched_nprims;
const SchedPrim *sched_prim_find(const char *name);
int sched_prim_params(const char *sig, SchedParam *out, int max);
/* Checks a step's shape against its row: positional count and kinds, the
 * number of names it gives, keywords known, once, of their kind. Errors
 * are RV_ERR_SCHEDULE located at the step or the argument. `stage` names
 * the scheduled stage in messages. */
rv_status sched_prim_check(const SchedPrim *p, const SchedStep *step, const SrcFile *src,
                           const char *stage);
/* RV_ERR_SCHEDULE located at loc: "PRIM: MESSAGE". */
rv_status sched_step_vfail(const SchedStep *step, const SrcFile *src, SrcLoc loc, const char *fmt,
                           va_list ap);
/* The error for a step naming no primitive: the known ones, a near name. */
rv_status sched_prim_unknown(const SchedStep *step, const SrcFile *src);
/* "o, i = split(v, F [, tail=\"...\"])" */
void sched_prim_usage(Buf *b, const SchedPrim *p);
/* Every primitive's usage, argument kinds and doc (`ravel help schedules`). */
void sched_prims_help(Buf *b);

/* ---- prims.c: the primitives ---- */

/* One step on stage `st`; `src` locates messages (may be NULL). */
rv_status sched_step(Schedule *s, Stage *st, const SchedStep *step, const SrcFile *src);
/* One step of a `schedule R { ... }` block of recursion group r (a
 * PRIM_GROUP primitive). */
rv_status sched_group_step(Schedule *s, Recurse *r, const SchedStep *step, const SrcFile *src);
/* Every stage computed at a loop is read only inside that loop (its
 * readers computed there or deeper); located at the step that placed it.
 * sched_from_module runs it after the blocks. */
rv_status sched_check_placements(Schedule *s);

/* ---- vfuse.c: fusion of variable loops (CoRa section 5.1) ---- */

/* Does the extent of b depend on a loop a derives from (`l < len[b]`
 * fused with b)? */
bool sched_fuse_is_variable(const Stage *st, const IterVar *a, const IterVar *b);
/* Why fuse(a, b) of variable loops cannot be lowered, or NULL when it
 * can (docs/schedules.md lists the rules); a message for the step. */
const char *sched_vfuse_illegal(const Stage *st, const IterVar *a, const IterVar *b, Buf *why);
/* Does st have a fused variable loop? */
bool sched_stage_has_vfuse(const Stage *st);
/* Why st's fused variable loops cannot run over a region of its tensor
 * (st computed at a loop), or NULL (the rule of sched_vfuse_illegal). */
const char *sched_vfuse_region_illegal(const Stage *st, Buf *why);
/* The fused variable loop over the leading dimensions 0..*k of the
 * tensor of st, a stage computed at a loop: its region is a range of
 * the fused rows (src/lower/attach.c); NULL when st has none. */
const IterVar *sched_region_vfuse(const Stage *st, int *k);
/* Are roots o and r fused by a variable fuse, o in its outer part and r
 * in its inner one (r's extent on o is then the fused loop's business:
 * its parts may go anywhere)? */
bool sched_vfused_together(const Stage *st, const IterVar *o, const IterVar *r);
/* The levels of fused variable loop f, outermost first, as the lowering
 * lays its space out (src/lower/vfuse.c): the levels of its outer part,
 * then its inner part as one level; a fuse whose inner extents mention no
 * axis is its parts' levels. Returns their number. */
int sched_vfuse_levels(const IterVar *f, const IterVar **out);
/* Is v's trip count a fused variable loop's, known only once the prelude
 * ran (the fused loop, an outer part of its split, a fuse with it)? */
bool sched_extent_is_vfused(const IterVar *v);
/* Why bulk padding of fused variable loop f to a multiple of n cannot be
 * done, or NULL (with *level the tensor level of its rows): `pad(f, n)`
 * (loop) or `storage_pad(f, n)`. */
/* The rules of every bulk-padded fused loop still hold once all blocks
 * are applied (a later cache_read or compute_inline changes what its
 * body reads); the error is located at its pad step. */
rv_status sched_check_bulk_pads(Schedule *s);
/* The trip count of fused variable loop f as a .rv expression, `sum(b <
 * B) len[b]` (bulk padded: rounded up), for the schedule query; NULL
 * where its outer levels are not all axes. */
Expr *sched_vfuse_extent(Module *m, const IterVar *f);
const char *sched_vfuse_pad_illegal(const Stage *st, const IterVar *f, int64_t n, bool loop,
                                    Buf *why, int *level);
/* ---- opsplit.c: operation splitting and horizontal fusion ---- */

/* `F, R = split_op(v, M)` on st: parts named `outs` (checked free) over
 * [0, E/M*M) and [E/M*M, E) of spatial axis v. */
rv_status sched_split_op(Schedule *s, Stage *st, const SchedStep *step, const SrcFile *src);
/* `hfuse(P)` on st: st's and P's outermost loops as one loop, in one
 * kernel; P is st's sibling part, or both are independent stages of their
 * own kernels (neither reads the other, nor does a tensor defined between
 * them read the earlier one, which the fused kernel computes later or
 * earlier than its definition). */
rv_status sched_hfuse(Schedule *s, Stage *st, const SchedStep *step, const SrcFile *src);
/* The rules of split stages, checked before any step on st: a split stage
 * takes no more steps; a part takes loop steps, cache_read and compute_at
 * of its own caches, not the steps that change its storage or the whole. */
rv_status sched_split_step_check(const Schedule *s, const Stage *st, const SchedStep *step,
                                 const SrcFile *src);
/* Is p split, a part or horizontally fused (not placeable: it is, or is
 * in, a kernel of its own)? */
bool sched_stage_split(const Stage *p);
/* The stage st is horizontally fused with (either way), or NULL. */
Stage *sched_hfuse_partner(const Stage *st);

/* ---- recurse.c: the schedule of recursion groups ---- */

/* A group's schedule lives in notes on its members' stages (every member
 * carries the group's NOTE_DYNAMIC_BATCH and NOTE_SPECIALIZE), so the
 * query and the stage printer report it with no state of its own. */
/* The recursion group of a stage (a member's STAGE_OP), or NULL. */
Recurse *sched_stage_group(const Stage *st);
/* Does the group's schedule have note k (dynamic_batch, specialize)? */
bool sched_group_has(const Schedule *s, const Recurse *r, StageNoteKind k);
/* A stage of g (a member, or a stage computed inside one) that reads t at
 * a node other than its own (`t[child[n, k], ...]`), or NULL. */
const Stage *sched_group_child_reader(const Schedule *s, const Recurse *g, const Tensor *t);
/* Is stage q in g's kernel: a member, or computed inside one? */
bool sched_stage_in_group(const Stage *q, const Recurse *g);
bool sched_stage_has_note(const Stage *st, StageNoteKind k);
/* Sets note k with `payload` on every member of r (the PRIM_GROUP
 * handlers). */
void sched_group_note(Schedule *s, Recurse *r, StageNoteKind k, int64_t payload);
/* The payload of the group's note k (0 when it has none). */
int64_t sched_group_payload(const Schedule *s, const Recurse *r, StageNoteKind k);
/* The rules of recursion a step must keep, checked after every step
 * (located at it): a member is computed at its own node loop or at a
 * loop of another member of its group, never inlined; its node loop stays
 * its outermost loop, one loop (neither split, fused nor moved inward:
 * the group's loop over nodes or batches encloses it); and it is serial
 * unless the group has dynamic_batch (nodes depend on their children). */
rv_status sched_check_recursion(Schedule *s, const SchedStep *step, const SrcFile *src);

#endif
