/*
 * lower.h — the loop IR and the lowering pipeline: the map of src/lower.
 *
 * Lowering turns a module and its schedules into Kernels: loop nests over
 * flat buffers (for, if, let, store, allocate, barrier, call) whose
 * expressions are the IR's scalar expressions, with tensor READs replaced
 * by buffer LOADs at computed flat offsets, and loop variables that are
 * AX_LOOP axes. Extents stay symbolic (sizes, UF values), so one kernel
 * serves every size; ragged storage offsets come from prelude arrays
 * (BUF_AUX) that host code computes from the UF arrays before the kernel
 * runs (CoRa section 2).
 *
 * Statements are immutable and built in the module's arena; passes return
 * new statements and return the same pointer when nothing changed.
 */
#ifndef RAVEL_LOWER_H
#define RAVEL_LOWER_H

#include "ir/layout.h"
#include "ir/simplify.h"
#include "sched/sched.h"

typedef enum StmtKind {
#define STMT(k, text) ST_##k,
#include "stmts.def"
#undef STMT
    ST_COUNT
} StmtKind;
extern const char *const lower_stmt_name[ST_COUNT];

/* LoopKind: src/sched/sched.h */
extern const char *const lower_loop_kind_name[LOOP_COUNT];
/* The loop IR's word for Stmt.u.loop.gpu_batches ("launch_batches"). */
extern const char *const lower_gpu_batches_word[SCHED_GPU_PERSISTENT + 1];

typedef struct Stmt Stmt;
struct Stmt {
    StmtKind kind;
    union {
        struct {
            Axis *var; /* AX_LOOP */
            Expr *extent;
            LoopKind kind;
            Stmt *body;
            /* the outer loop of a non-dividing split, its body guarded by
             * `var*f + i < E`: the partition pass splits its last tile off */
            bool partition;
            /* over a spatial axis of the stage (nest.c): inside a reduction,
             * the elements it updates even where an index no longer names
             * its variable (place.c) */
            bool spatial;
            /* SchedGpuBatches: the loop over a recursion's batches, which
             * the CUDA back end runs as a launch per iteration (the loop
             * on the host) or with a grid-wide barrier after each
             * (src/lower/recurse.c, src/codegen/cuda.c); serial elsewhere */
            int gpu_batches;
        } loop;
        struct {
            Expr *cond;
            Stmt *then_s, *else_s;
        } if_;
        struct {
            Axis *var;
            Expr *value;
            Stmt *body;
        } let;
        struct {
            Buffer *buf;
            Expr *index, *value;
        } store;
        struct {
            Buffer *buf;
            Stmt *body;
        } alloc;
        struct {
            int n;
            Stmt **stmts;
        } seq;
        struct {
            const char *kernel;
            int nargs;
            Buffer **args; /* output first, then inputs */
            Tensor *out;   /* for shapes */
        } call;
        struct {
            int site; /* index into the kernel's sites */
        } fail;
        struct {
            /* every thread of the launch, not of one block: the CUDA back
             * end's barrier between a recursion's batches (cuda.c) */
            bool grid;
        } barrier;
        struct {
            /* a reduction before its initialisation (lower_module):
             * body's stores to buf (and arg, argmax's index) are its
             * updates; the `reduce` pass (place.c) initialises every
             * element they update before body */
            rv_reduce_kind rk;
            Buffer *buf, *arg; /* arg: argmax only */
            Stmt *body;
        } reduce;
    } u;
};

/* A parameter of a kernel, in call order. */
typedef enum ParamKind {
    PARAM_SIZE,   /* an int64_t size value */
    PARAM_UF,     /* a UF's integer array */
    PARAM_TENSOR, /* a tensor's storage: inputs, and outputs the caller receives */
    PARAM_AUX,    /* a prelude array the runtime computes before the call */
    PARAM_PACK,   /* a param's pack the runtime keeps across runs, or its fill flag */
    PARAM_COUNT
} ParamKind;
typedef struct Param {
    ParamKind kind;
    Size *size;  /* SIZE */
    Buffer *buf; /* UF, TENSOR, AUX */
} Param;

typedef struct Kernel {
    const char *name;
    Module *m;
    int nparams;
    Param *params;
    /* Host code run before the kernel: fills the AUX buffers (the ragged
     * layouts' row-start arrays, CoRa's auxiliary arrays) from sizes and UF
     * arrays. It is loop IR like the body, emitted as NAME_prelude. AUX
     * buffers' sizes are expressions over sizes only, so the runtime can
     * allocate them before the prelude runs. NULL when there are none. */
    Stmt *prelude;
    /* The AUX buffers the prelude stores to (lower_prelude_fills): the
     * host plan runs a prelude only for arrays no earlier one fills. */
    int nfills;
    Buffer **fills;
    Stmt *body;
    /* What each run-time check of the body guards (FAIL's site), as the
     * message of its failure: "read X[i + K] out of bounds", "division by
     * zero or integer overflow in X[i] / K". Generated code records the
     * first failing site in the context (ravel_rt.h) and goes on with a
     * safe value; the host reports the run as failed. */
    int nsites;
    const char **sites;
    /* Until the checks pass: what each access and integer division of a
     * value that expr.c left for it stands for (rtcheck.c). */
    int ncheck_src;
    struct CheckSrc *check_src;
    /* The flatten pass has run: the body holds no multi-dimensional
     * access (READ or UF application, flatten.c). */
    bool flat;
    /* A recursion group's kernel (recurse.c): the host plan checks its
     * structure's numbering before any kernel runs. NULL otherwise. */
    const Recurse *rec;
} Kernel;

/* An access or integer division in a value (expr.c), left for the checks
 * pass: the tensor-level expression its site's message shows, and
 * whether its stage pads a loop (its reads of padded dimensions may reach
 * their padded extent, by design of `pad`). */
typedef struct CheckSrc {
    const Expr *node; /* loop IR */
    const Expr *src;  /* tensor-level */
    bool loop_pad;
    bool bulk_pad; /* its stage runs a bulk-padded fused loop (vfuse.c) */
} CheckSrc;

/* ---- stmt.c: construction, traversal, printing ---- */

Stmt *lower_for(Module *m, Axis *var, Expr *extent, LoopKind k, Stmt *body);
/* A loop of the kind of loop `like`, which a pass rebuilds, with its
 * marks that outlive the passes (gpu_batches). */
Stmt *lower_for_like(Module *m, const Stmt *like, Axis *var, Expr *extent, Stmt *body);
Stmt *lower_if(Module *m, Expr *cond, Stmt *then_s, Stmt *else_s);
Stmt *lower_let(Module *m, Axis *var, Expr *value, Stmt *body);
Stmt *lower_store(Module *m, Buffer *b, Expr *index, Expr *value);
Stmt *lower_alloc(Module *m, Buffer *b, Stmt *body);
Stmt *lower_seq(Module *m, int n, Stmt *const *stmts); /* flattens nested SEQs, drops NULLs */
Stmt *lower_barrier(Module *m);
/* A barrier across the whole grid of a persistent launch. */
Stmt *lower_grid_barrier(Module *m);
Stmt *lower_call(Module *m, const char *kernel, int nargs, Buffer *const *args, Tensor *out);
Stmt *lower_fail(Module *m, int site);
Stmt *lower_reduce(Module *m, rv_reduce_kind rk, Buffer *buf, Buffer *arg, Stmt *body);
/* A fresh loop variable. */
Axis *lower_loop_var(Module *m, const char *name, Expr *extent);
/* Generic mutator: applies `fe` to every expression and `fs` (may be NULL)
 * to every statement bottom-up; returns `s` itself when nothing changed. */
typedef struct StmtMutator {
    Expr *(*fe)(struct StmtMutator *mu, Expr *e);
    Stmt *(*fs)(struct StmtMutator *mu, Stmt *s); /* called after children */
    Module *m;
    void *ctx;
} StmtMutator;
Stmt *lower_mutate(StmtMutator *mu, Stmt *s);
/* e with every load (its operands rewritten first) replaced by fn's answer
 * (the load itself to keep it); memo (Expr* -> rewrite) makes each shared
 * subexpression one visit. For a StmtMutator's fe. */
typedef Expr *(*LoadRewrite)(Module *m, void *ctx, Expr *load);
Expr *lower_rewrite_loads(Module *m, Expr *e, LoadRewrite fn, void *ctx, PtrMap *memo);
/* Text form for dumps and golden tests. */
void lower_print_stmt(Buf *b, const Stmt *s, int indent);
void lower_print_kernel(Buf *b, const Kernel *k);

/* ---- place.c: reductions initialised where they start ---- */
/* Each `reduce RK into B[, A]: body` becomes the initialisation of the
 * elements of B (and A) that body updates, then body (place.c states the
 * contract). */
Stmt *lower_place_reductions(Module *m, Stmt *s);

/* ---- partition.c: the last tile of a marked split split off ---- */
rv_status lower_partition(Kernel *k);
/* Does the pass find the guard of loop's split (nest.c marks it only then)? */
bool lower_partition_applies(Stmt *loop);

/* ---- simplify.c: the simplifier's statement pass (ir/simplify.h) ---- */

/* Simplifies a statement's index arithmetic and drops what the declared
 * ranges decide: proven guards, empty loops, loops of extent 1. Requires
 * nothing; guarantees the same values; NULL when no statement remains. */
Stmt *lower_simplify(Module *m, Stmt *s);

/* ---- read.c: the loop-IR reader ---- */

/* The kernels of `text`, the form lower_print_kernel prints, after
 * optional declarations of sizes' ranges and UF, AUX and tensor buffers
 * (read.c's comment); print(read(text)) == text. A malformed text is
 * RV_ERR_SYNTAX with "FILE:LINE:COL: error: ...". */
rv_status lower_read_kernels(Module *m, const char *file, const char *text, Kernel ***out, int *n);

/* ---- storage.c: the preludes of storage layouts (ir/layout.h) ---- */

/* Turns tensor-level index expressions (UF applications) into loop-IR
 * loads; supplied by lower.c, which owns the UF arrays' storage. */
typedef Expr *(*LowerExprFn)(void *ctx, Expr *e);
/* Sets k->fills from k->prelude. */
void lower_prelude_fills(Module *m, Kernel *k);
/* Loop IR that fills the AUX arrays not in `filled` (and adds them to
 * it: a row-start array shared by several storages is filled once); NULL
 * when there are none. */
Stmt *lower_storage_prelude(Module *m, const Storage *st, PtrMap *filled, LowerExprFn lower,
                            void *ctx);

/* ---- bounds.c: symbolic intervals (bounds inference) ---- */

typedef struct Range {
    Expr *lo, *hi; /* inclusive */
} Range;
/* Bounds of integer expression e when each axis in `vary` (Axis* ->
 * const Range*) ranges over its range, unmapped reduction axes over their
 * extents, and loop variables are fixed (all_loops: range over their
 * extents too). False when an operation cannot be bounded. */
bool lower_bounds_range(Module *m, Expr *e, const PtrMap *vary, bool all_loops, Range *out);
/* An upper bound of e over every loop iteration (NULL if unknown); it may
 * still mention loads at fixed indices. */
Expr *lower_bounds_upper(Module *m, Expr *e);

/* ---- lower.c: schedule -> kernels ---- */

/* One kernel per root stage of the module's schedule (its schedule blocks
 * applied; errors located at the step), in definition order. */
rv_status lower_module(Module *m, Kernel ***out, int *n);
/* The same for a schedule built by the caller (the passes over the
 * schedule first). */
rv_status lower_schedule(Schedule *s, Kernel ***out, int *n);

/* ---- the steps of lower_schedule: their shared state ---- */

/* IterVars per stage the nest state tracks (the schedule checker keeps
 * stages within it). */
#define MAX_IVS SCHED_MAX_IVS

/* A buffer holding a region of a tensor (a stage computed at a loop,
 * attach.c): element idx is at sum((idx[d] - lo[d]) * stride[d]). */
typedef struct RegionView {
    Buffer *buf;
    int ndim;
    Expr *lo[RV_MAX_DIMS];     /* region origin, loop-IR */
    Expr *stride[RV_MAX_DIMS]; /* elements */
    /* a dimension stored in panels (a split layout): (idx - lo) / split
     * at stride, (idx - lo) % split at stride_in */
    int64_t split[RV_MAX_DIMS];
    Expr *stride_in[RV_MAX_DIMS];
    /* The region is the read window unclipped (local padding): every read
     * the reader makes is inside it. Otherwise it is clipped to the
     * tensor, and a read is inside when it is inside the tensor. */
    bool local_pad;
    /* A stage whose fused variable loop runs over the tensor's dimensions
     * 0..fused_k (sched_region_vfuse): its region there is a range of the
     * fused rows, dimension 0 standing for all of them (lo[0] the first
     * row, in `fused`'s numbering; dimensions 1..fused_k stride 0). */
    const Storage *fused;
    int fused_k;
} RegionView;

typedef struct RegionTable RegionTable; /* regions.c */

/* A pack the copies of a partitioned nest share (attach.c): its key
 * (pack_key) and buffer. */
typedef struct KeptShare {
    const char *key;
    Buffer *buf;
} KeptShare;

/* The state of lower_schedule: the whole schedule, and the kernel being
 * built. */
typedef struct LowerCtx {
    Module *m;
    Schedule *s;
    PtrMap storage; /* Tensor* or Ufun* -> Storage* */
    PtrMap views;   /* Tensor* of an attached stage -> RegionView* */
    StorageShare share; /* row-start arrays by raggedness pattern */
    PtrMap filled;      /* AUX Buffer* an earlier kernel's prelude fills */
    /* per kernel */
    Vec(Param) params;
    PtrMap used_bufs;        /* Buffer* already a parameter */
    PtrMap axis_value;       /* IR axis -> its value (loop-IR expression) */
    int nacc;                /* accumulator counter for names */
    int par_depth;           /* parallel loops around the current position */
    PtrMap accs;             /* accumulator buffers lower_wrap_locals declares */
    PtrMap kept_share;       /* Stage* of a pack copied in a first iteration -> KeptShare* */
    Vec(const char *) sites; /* the kernel's run-time checks (Kernel.sites) */
    Vec(CheckSrc) check_src; /* Kernel.check_src */
    bool loop_pad;           /* the stage being emitted pads a loop (schedule `pad`) */
    bool bulk_pad;           /* ... a fused variable loop (bulk padding) */
    /* stages computed above a recursion's loop (recurse.c), not where
     * they are attached */
    PtrMap hoisted;
    /* members computed inside another member that nothing reads in the
     * nests being lowered (leaf.c: their leaf value propagated into every
     * reader); the nests skip them as they skip hoisted stages */
    PtrMap unread;
    const RegionTable *regions; /* the bounds pass's table (regions.c) */
    /* the loops bound to GPU thread indices around the current position:
     * loop Axis* -> Range* over its iterations (NULL once left) */
    PtrMap gpu_threads;
    rv_status st;
    /* fused variable loops (vfuse.c): IterVar* -> VFuse*, all of them in
     * creation order, and row maps by row-start array (one per pattern) */
    PtrMap vfuse;
    Vec(struct VFuse *) vfuses;
    PtrMap vfuse_rows;
} LowerCtx;

/* An expression being lowered (expr.c) and what it needs first. */
typedef struct ExprCtx {
    LowerCtx *c;
    Vec(Stmt *) pre;      /* statements that must run before the expression */
    const PtrMap *preset; /* nodes with a value already (the stage's reduction) */
    rv_status st;
    /* A value or predicate the definition computes (not an index or
     * extent the schedule evaluates): its reads of storage and its integer
     * divisions are left for the checks pass (Kernel.check_src), a view's
     * read gets its FAIL in pre here (check_or_fail); elsewhere reads and
     * divisions get only a safe offset or divisor. */
    bool checked;
} ExprCtx;

typedef enum SplitState {
    SPLIT_GUARD, /* undecided: guard the body with value < extent */
    SPLIT_FULL,  /* within the full tiles: no check */
    SPLIT_TAIL,  /* the last tile: inner extent E - o*f */
    SPLIT_PARAM, /* either copy: inner extent a parameter (StageNest.tile, regions.c) */
} SplitState;

typedef enum NestMode {
    MODE_TOP,      /* loops before the reduction */
    MODE_ACC,      /* reduction loops updating a local accumulator */
    MODE_IN_PLACE, /* reduction and spatial loops updating the destination
                    * (its init nest: the reduce pass, place.c) */
} NestMode;

/* The state of one stage's nest while it is generated. Passed by value
 * into each copy of a partitioned loop, so each copy has its own. */
typedef struct StageNest {
    Stage *st;
    Expr *base[MAX_IVS];     /* ROOT: origin of the region (attached stages) */
    Expr *root_ext[MAX_IVS]; /* ROOT: extent, once known */
    Expr *value[MAX_IVS];    /* leaves: bound value */
    Expr *tile[MAX_IVS];     /* SPLIT_PARAM splits: the inner extent's parameter */
    SplitState state[MAX_IVS];
    int first_red; /* index of the outermost reduction leaf, or nleaves */
    bool in_place;
    NestMode mode;
    /* destination: a tensor's storage or a view */
    const Storage *dst_storage;
    const RegionView *dst_view;
    Buffer *acc, *arg; /* MODE_ACC */
} StageNest;

/* lower.c */
/* The storage (order, buffer, AUX arrays) of a UF or tensor, made once. */
rv_status lower_storage_of_uf(LowerCtx *c, Ufun *f, Storage **out);
rv_status lower_storage_of_tensor(LowerCtx *c, Tensor *t, Storage **out);
/* Registers a storage's buffers as parameters of the current kernel. */
void lower_use_storage(LowerCtx *c, const Storage *st, ParamKind k);
/* Registers one AUX buffer as a parameter of the current kernel. */
void lower_use_aux(LowerCtx *c, Buffer *b);
/* Registers a kept pack's buffer and its fill flag (BUF_PACK). */
void lower_use_pack(LowerCtx *c, Buffer *b);
/* lower_index as a LowerExprFn (preludes: the extent must lower). */
Expr *lower_index_fn(void *ctx, Expr *e);
/* Frees what a LowerCtx holds outside the module's arena. */
void lower_ctx_free(LowerCtx *c);
/* ir_simplify_expr, NULL for NULL. */
Expr *lower_ctx_simp(LowerCtx *c, Expr *e);
/* A schedule error (NULL, c->st set); about stage p it is located at the
 * step that placed p. */
Stmt *lower_sched_error(LowerCtx *c, const char *fmt, ...) RV_PRINTF(2, 3);
Stmt *lower_stage_error(LowerCtx *c, const Stage *p, const char *fmt, ...) RV_PRINTF(3, 4);

/* expr.c */
/* The flat offset of element idx of a view. */
Expr *lower_view_offset(Module *m, const RegionView *v, Expr *const *idx);
/* e in loop IR (memo: Expr -> lowered, within one expression); NULL
 * with x->st set. */
Expr *lower_expr_rec(ExprCtx *x, Expr *e, PtrMap *memo);
Expr *lower_expr(ExprCtx *x, Expr *e);
/* An index expression (no reductions) in loop IR; NULL with c->st set. */
Expr *lower_index(LowerCtx *c, Expr *e);
/* Statements computing `value` (with preset nodes) and storing it. */
Stmt *lower_element_stmt(LowerCtx *c, Buffer *buf, Expr *offset, Expr *value, const PtrMap *preset);

/* rtcheck.c */
/* The condition under which read or UF application e (tensor-level; idx:
 * its lowered indices) may use its indices: *guard NULL when the declared
 * ranges prove them in range; else, in a checked context, a FAIL under
 * its negation is in x->pre, and the caller reads the origin (offset 0)
 * where it fails (a kernel never reads out of bounds; the run reports the
 * failure). False with x->st set when lowering an extent failed. */
bool lower_read_guard(ExprCtx *x, Expr *e, Expr *const *idx, PtrMap *memo, Expr **guard);
/* An integer division or remainder (what may trap: a check's site). */
bool lower_is_int_div(const Expr *e);
/* The checks pass over kernel k's body (rtcheck.c states its contract). */
rv_status lower_checks(Kernel *k);
/* An integer division or remainder whose divisor may be 0 (or -1 with the
 * dtype's smallest dividend): a FAIL there, and divisor 1 instead. */
Expr *lower_checked_div(ExprCtx *x, Expr *e, Expr **args);

/* reduce.c */
/* The identity of a reduction in the accumulator's dtype. */
Expr *lower_reduce_init(Module *m, rv_reduce_kind rk, rv_dtype t);
/* The update of an accumulator (and argmax's index) by value v. */
Stmt *lower_reduce_update(Module *m, rv_reduce_kind rk, Buffer *acc, Expr *at, Buffer *arg,
                          Expr *index, Expr *v);
/* Lowers a REDUCE that is not a loop of the stage into an accumulator nest
 * appended to x->pre; returns the load of the result. */
Expr *lower_nested_reduce(ExprCtx *x, Expr *e);
/* s in allocations of the accumulators it stores to that no ALLOC
 * declares yet. */
Stmt *lower_wrap_locals(LowerCtx *c, Stmt *s);
/* The reduction starts at leaf i: an accumulator or an in-place init. */
Stmt *lower_gen_reduction(LowerCtx *c, StageNest n, int i);

/* nest.c */
/* The loop-IR value of v, or NULL while a leaf it needs is unbound. */
Expr *lower_iv_value(LowerCtx *c, StageNest *n, const IterVar *v);
/* Publishes the values of the roots whose leaves are bound. */
void lower_bind_axes(LowerCtx *c, StageNest *n);
Expr *lower_ceil_div(Module *m, Expr *e, int64_t f);  /* (e + f - 1)/f */
Expr *lower_part_full(Module *m, Expr *e, int64_t f); /* e/f*f: split_op's point */
/* The first value of root r where n is (a region's origin, the split point
 * of a split operation's rest); NULL for 0; *ok false where unknown. */
Expr *lower_root_base(LowerCtx *c, StageNest *n, const IterVar *r, bool *ok);
/* The extent of v where n is. Without a value for an outer axis its
 * extent depends on, `vary` (bounds inference: ranges of the roots outer
 * to v) relaxes it to its largest value there; NULL: none. */
Expr *lower_iv_extent_over(LowerCtx *c, StageNest *n, const IterVar *v, const PtrMap *vary);
/* The conjunction of the checks of undecided non-dividing splits
 * (spatial ones, reduction ones, or both), or NULL when none is needed. */
Expr *lower_guards(LowerCtx *c, StageNest *n, bool spatial, bool reduce);
Stmt *lower_guarded(LowerCtx *c, Expr *g, Stmt *s); /* if g: s (s when g is NULL) */
/* The destination offset of the current element. */
Expr *lower_dest_offset(LowerCtx *c, StageNest *n);
Buffer *lower_dest_buf(StageNest *n); /* the buffer the nest stores to */
/* Does the stage pad one of its loops (its reads may then reach into
 * storage padding, rtcheck.c)? */
bool lower_loop_padded(const Stage *st);
/* Does it pad a fused variable loop (bulk padding: its reads at the
 * fused rows reach the padding rows of storage bulk padded for them)? */
bool lower_bulk_padded(const Stage *st);
/* The nest from leaf i inward (stages attached at leaf i - 1 placed
 * first: lower_emit_attached). */
Stmt *lower_gen(LowerCtx *c, StageNest n, int i);
/* Does the walk partition, at leaf i of n, the split whose outer loop it
 * is (TAIL_PARTITION, undecided, its inner loop below, not dividing its
 * extent, set in *ext)? 1 or 0, -1 when the extent cannot be lowered. */
int lower_splits_here(LowerCtx *c, StageNest *n, int i, Expr **ext);
/* The outer loop's value at the last tile the walk peels off split p of
 * extent e: E/f, or with tail="merge" the merged block's max(E/f - 1, 0). */
Expr *lower_split_last(LowerCtx *c, const IterVar *p, Expr *e);
/* The nest of stage st: over its whole tensor (origin NULL), or over a
 * region of it into a view; an axis whose origin is NULL is over its
 * whole extent (a recursion's member: only its node axis is set). */
Stmt *lower_stage_nest(LowerCtx *c, Stage *st, Expr *const *origin, Expr *const *ext,
                       const RegionView *view);
/* The state of that nest before its first loop (false with c->st set). */
bool lower_nest_init(LowerCtx *c, StageNest *n, Stage *st, Expr *const *origin,
                     Expr *const *ext, const RegionView *view);

/* vfuse.c: fused variable loops (CoRa section 5.1) */
/* The extent of variable-fused f: the number of tuples of its levels
 * (the last row start); NULL with c->st set when it cannot be laid out. */
Expr *lower_vfuse_extent(LowerCtx *c, const IterVar *f);
/* The value of f's outer part (outer) or inner part, f's value being fv:
 * a = row[fv], b = fv - start[a]. */
Expr *lower_vfuse_part(LowerCtx *c, const IterVar *f, Expr *fv, bool outer);
/* The prelude of the current kernel's fused variable loops: their row
 * starts and row maps no earlier kernel fills (NULL: none). */
Stmt *lower_vfuse_prelude(LowerCtx *c);
/* The row of tuple idx (one index per level of f) in f's numbering,
 * start[prefix] + last index: the fused loop's value there. */
Expr *lower_vfuse_row(LowerCtx *c, const IterVar *f, Expr *const *idx);
/* The layout of f's fused space (NULL with c->st set). */
const Storage *lower_vfuse_layout(LowerCtx *c, const IterVar *f);
/* A bound of f's number of rows over the sizes (NULL: none known). */
Expr *lower_vfuse_rows_bound(LowerCtx *c, const IterVar *f);
/* Do fused loops f and g number the same rows (one raggedness pattern)? */
bool lower_vfuse_same_rows(LowerCtx *c, const IterVar *f, const IterVar *g);
/* e with the fused loops' arrays of another context (the bounds pass's
 * regions) replaced by this context's. */
Expr *lower_vfuse_adopt(LowerCtx *c, Expr *e);
void lower_vfuse_free(LowerCtx *c);
/* opsplit.c */
/* The body of split stage st's kernel: its parts' nests, or with hfuse
 * one loop over both. */
Stmt *lower_split_stage(LowerCtx *c, Stage *st);
/* The body of the kernel of st and the stage it is hfused with: one loop
 * over both nests (the other's tensor a parameter too). */
Stmt *lower_hfused_stages(LowerCtx *c, Stage *st);

/* recurse.c */
/* The body of recursion group g's kernel: its members' nests inside the
 * loop over nodes or dynamic batches its schedule asks for; the members'
 * tensors become parameters. */
Stmt *lower_recurse(LowerCtx *c, Recurse *g);
/* Every member's nest (in group order) with its node axis over `count`
 * nodes from `first` (loop IR); specialized for the leaves or the
 * internal nodes when `spec` is 1 or 2; refactored members at their
 * readers. NULL on an error (c->st). */
Stmt *lower_recurse_members(LowerCtx *c, Recurse *g, Expr *first, Expr *count, int spec);
/* min(len, N - begin): the nodes of the batch (of T, as the plan checks
 * it) from begin, written so that the simplifier proves them below N. */
Expr *lower_recurse_batch_count(LowerCtx *c, const Structure *T, Expr *begin, Expr *len);

/* unroll.c */
/* The body of group g's kernel under unroll_recursion(): the leaves, then
 * the unrolled batches (a head node with its internal children in one
 * iteration). */
Stmt *lower_unroll(LowerCtx *c, Recurse *g);
/* Stage st without its own reduction (a leaf's sum over no child): its
 * reduce loops go (in place: the caller restores the stage). */
void lower_stage_drop_reduce(Module *m, Stage *st);
/* Does a stage of g's kernel other than st, still emitted (not in
 * c->unread), read st's tensor? */
bool lower_group_reads(const LowerCtx *c, const Recurse *g, const Stage *st);

/* refactor.c */
/* Replaces, in the stages of g's kernel, every read of a refactored
 * member at a child by its body there (in place: the caller restores the
 * stages). */
void lower_refactor(LowerCtx *c, Recurse *g);

/* leaf.c */
/* How a member's leaf nest is emitted after lower_leaf_fold. */
typedef enum LeafMode {
    LEAF_ALL,  /* at every leaf, as scheduled */
    LEAF_ONCE, /* at the first leaf only: its value is every leaf's */
    LEAF_NONE  /* not at all: nothing reads its leaf values */
} LeafMode;
/* Per member of g (group order): are its values at the leaves read other
 * than at their own node by a member (at children, by an output, by a
 * stage outside the group)? Called before specialization. */
void lower_leaf_needed(LowerCtx *c, Recurse *g, bool *needed);
/* With g's members specialized for the leaves: propagates the members
 * whose leaf values do not depend on the node into the same-node reads
 * of later members, and chooses each member's mode (in place: the caller
 * restores the stages). */
void lower_leaf_fold(LowerCtx *c, Recurse *g, const bool *needed, LeafMode *mode);

/* bounds.c */
/* The region of p that stage n->st's remaining iterations read: the union
 * over p's readers (the schedule checker made each n->st or a stage
 * computed inside it: layernorm's row mean, read by the variance and the
 * output, both at the row loop). */
bool lower_infer_region(LowerCtx *c, StageNest *n, Stage *p, bool clip, Range *reg);

/* ragged.c: regions of ragged tensors */
/* The extent of dimension d of stage p's tensor in a region whose
 * dimensions range over reg (NULL: the whole tensor): for a ragged
 * dimension, its largest value over the outer dimensions' ranges (exact
 * where they are one point). In loop IR; NULL with c->st set (an error
 * located at the step that placed p). */
Expr *lower_ragged_extent(LowerCtx *c, const Stage *p, int d, const Range *reg);
/* Extent `ext` of root v of a nest over a region, clipped to the row's
 * end (ragged extent at the bound outer loops, less the origin) unless
 * the stage pads locally or those loops are not bound yet. */
Expr *lower_ragged_clip(LowerCtx *c, StageNest *n, const IterVar *v, Expr *ext);

/* regions.c: the bounds pass, region inference over the schedule */
typedef enum RegionParamKind {
    RP_VALUE,  /* a loop variable of the host bound at the attach point */
    RP_TILE,   /* the inner extent of a split the walk partitions there */
    RP_ORIGIN, /* the origin of the host's own region, in a root's dimension */
    RP_EXTENT, /* its extent */
} RegionParamKind;
typedef struct RegionParam {
    Axis *sym; /* the box's variable */
    RegionParamKind kind;
    const IterVar *iv; /* the host's leaf (VALUE), split (TILE) or root */
} RegionParam;
#define REGION_MAX_CUTS 4 /* last tiles of constant extent a box tells apart */
typedef struct RegionBox {
    const Stage *p; /* computed at p->at, loop p->at_iv */
    /* the host's partitioned splits of a constant extent up to p->at_iv,
     * and (bit j) those in their last tile for this box */
    const IterVar *cut[REGION_MAX_CUTS];
    int ncut;
    unsigned tail;
    bool whole;     /* not bounded: the whole tensor */
    Range dim[RV_MAX_DIMS];
    Vec(RegionParam) params; /* the variables lo and hi are over */
} RegionBox;
struct RegionTable {
    Vec(RegionBox) boxes; /* the stages computed at a loop, in schedule order */
    /* the pass's storage of each UF (index: Ufun.id, NULL where unused):
     * a box's ragged extents load these arrays, so the walk adopts them
     * (lower_adopt_uf_storage) and its loads are the same buffers */
    Vec(Storage *) uf_storage;
};
/* The symbolic region of every stage computed at a loop, at its attach
 * point (the contract at the top of regions.c). */
rv_status lower_infer_bounds(Schedule *s, RegionTable *t);
void lower_regions_free(RegionTable *t);
/* Gives walk context c the UF storages of table t (before it makes any). */
void lower_adopt_uf_storage(LowerCtx *c, const RegionTable *t);
/* `P at Y.io:` then `  AXIS: [lo, hi]` per dimension, per box. */
void lower_print_regions(Buf *b, const RegionTable *t);
/* For RAVEL_DEBUG=bounds: the table on stderr. */
void lower_dump_regions(const RegionTable *t);
/* The region of p where the walk places it in nest n (false: the whole
 * tensor, or c->st set): its box in c->regions for n's copy (the last
 * tiles n is in) with the copy's values substituted, simplified. */
bool lower_region_at(LowerCtx *c, StageNest *n, Stage *p, Range *reg);
/* For RAVEL_DEBUG=bounds, where the walk placed p in nest n with region
 * reg (have: bounded), the box's instance: whether inference on n's copy
 * itself (lower_infer_region) gives that region, on stderr (inside an IR
 * scope, so the check changes no code). */
void lower_debug_region(LowerCtx *walk, StageNest *n, Stage *p, bool have, const Range *reg);

/* attach.c */
/* The stages computed at loop `at` of n (NULL: at the top of the nest),
 * each in its buffer, around the nest from leaf i inward; stages in
 * c->hoisted are placed by their caller. */
Stmt *lower_emit_attached(LowerCtx *c, StageNest *n, const IterVar *at, int i);
/* Stage p computed where n is, over the region n's remaining iterations
 * read: its nest, its buffer in *buf_out (to allocate around its readers). */
Stmt *lower_attach_one(LowerCtx *c, StageNest *n, Stage *p, Buffer **buf_out);
/* The allocation of an attached stage's buffer around body: none for a
 * kept pack (BUF_PACK), which the runtime passes in. */
Stmt *lower_alloc_attached(Module *m, Buffer *b, Stmt *body);

/* ---- flatten.c: multi-dimensional accesses -> flat storage offsets ---- */

/* The load of an element of storage st at offset `off` (ir_storage_offset)
 * or, where guard (non-NULL) fails, at the origin; a UF's value widened
 * to i64. */
Expr *lower_access_load(Module *m, const Storage *st, Expr *guard, Expr *off);
/* The flatten pass over kernel k's body (flatten.c states its contract);
 * sets k->flat. */
rv_status lower_flatten(Kernel *k);
/* Flattening one expression: the storage of each tensor and UF that is a
 * parameter of k (lower_flat_init), then e with its accesses flattened
 * (memo: Expr -> flattened); NULL when an access's storage is unknown
 * or the IR rejects a rebuilt access. */
typedef struct FlatCtx {
    Module *m;
    PtrMap storage; /* Tensor* or Ufun* -> const Storage* */
} FlatCtx;
void lower_flat_init(FlatCtx *F, const Kernel *k);
void lower_flat_free(FlatCtx *F);
Expr *lower_flat_expr(FlatCtx *F, Expr *e, PtrMap *memo);

/* ---- forward.c: reads of a local copy of a window read the source ---- */

/* An allocation of a local array whose body starts with a guard-free copy
 * L[f] = S[g] (g - f free of the copy's loops), and only reads L after it,
 * becomes its body's rest reading S[e + g - f] for L[e]. Requires a
 * simplified body; guarantees the same values. */
Stmt *lower_forward_copies(Module *m, Stmt *s);

/* ---- promote.c: an accumulation repeated by a loop runs in a local tile ---- */

/* A serial loop whose body is a guard-free nest of constant extents around
 * one store B[e] = v (B not local, e free of the loop and injective in the
 * nest, v reading B only at e) accumulates into a local copy of B's tile,
 * copied in before the loop and back after it. Requires a simplified body
 * without LETs; guarantees the same values. */
Stmt *lower_promote_accumulators(Module *m, Stmt *s);

/* ---- registers.c: a register tile becomes a local per vector ---- */

/* A local array of at most a vector register file's size whose every
 * access is at a constant plus a vector loop's variable once the serial
 * and unrolled loops indexing it are unrolled: those loops are unrolled
 * and each vector (or element) of the tile becomes its own local.
 * Requires a simplified body without LETs; guarantees the same
 * operations in the same order. */
Stmt *lower_register_tiles(Module *m, Stmt *s);

/* ---- pipeline.c, verify.c, hoist.c: the pass pipeline ---- */

/* A loop-IR pass over a kernel body: requires and guarantees what its
 * file's comment says; returns the same pointer when nothing changed and
 * NULL when no statement remains. */
typedef Stmt *(*LowerPass)(Module *m, Stmt *s);
/* lower_module, then every kernel through the passes, in order:
 *
 *     reduce     place.c: each reduction initialised where it starts
 *     partition  partition.c: full tiles of marked splits, the last tile
 *     checks     rtcheck.c: run-time checks of accesses and divisions
 *     flatten    flatten.c: multi-dimensional accesses -> flat storage offsets
 *     simplify   simplify.c: canonical index arithmetic, proven guards go
 *     forward    forward.c: reads of a local copy of a window read the source
 *     promote    promote.c: an accumulation repeated by a loop runs in a local tile
 *     registers  registers.c: a register tile becomes a local per vector
 *     hoist      hoist.c: loop-invariant UF/AUX loads and index arithmetic
 *     simplify   again, on what hoisting exposed
 *
 * The verifier runs after lower_module and after every pass; a violation
 * is RV_ERR_UNSUPPORTED "internal error after pass X: ...". RAVEL_DEBUG (a
 * comma-separated list) dumps kernels to stderr: `lower` (or `all`) after
 * lower_module and every pass, a pass name (`hoist`, `lower.hoist`) after
 * that pass. docs/pipeline.md describes both. */
rv_status lower_pipeline(Module *m, Kernel ***out, int *n);
/* lower_pipeline with the schedule blocks of the text `schedule` (a
 * file's `schedule` blocks; `name` names it in messages) in place of the
 * module's own, which are put back whatever happens: a variant of a
 * program, a tuner's candidate. NULL: the module's own. */
rv_status lower_pipeline_scheduled(Module *m, const char *name, const char *schedule,
                                   Kernel ***out, int *n);
/* The passes of lower_pipeline's list over the schedule, into the table
 * the walk reads, before the nests are built (lower_schedule); t is the
 * caller's to free (lower_regions_free), also on failure. */
rv_status lower_run_schedule_passes(Schedule *s, RegionTable *t);
/* Does RAVEL_DEBUG ask for a dump after the pass called `name`? */
bool lower_debug_wants(const char *name);
/* Is there a pass called `name` in lower_pipeline's list? */
bool lower_has_pass(const char *name);
/* Runs the pass of lower_pipeline's list called `name` on k alone
 * (per-pass tests); RV_ERR_ARG when there is none. */
rv_status lower_run_pass(Kernel *k, const char *name);
/* The passes of lower_pipeline on one kernel already lowered. */
rv_status lower_run_passes(Kernel *k);
/* Checks the loop-IR invariants of a kernel (verify.c); `after` names the
 * pass that produced it, for the message. */
rv_status lower_verify_kernel(const Kernel *k, const char *after);
/* Loop-invariant code motion: invariant i64 arithmetic and UF/AUX loads
 * bound by LETs outside the loops they do not depend on. */
Stmt *lower_hoist(Module *m, Stmt *s);

#endif
