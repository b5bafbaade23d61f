/*
 * tune.h — the auto-scheduler's layer (DESIGN.md "tune", issue 15): the
 * shape-generic tuner in the manner of DietCode (`ravel tune`). It sits
 * above lowering and the compile driver.
 *
 *   hw.c      the machine: vector ISA and width, vector registers, cache
 *             sizes, core counts, read from cpuid and sysfs
 *   dtree.c   the dispatcher: a CART decision tree over the size variables
 *             choosing a kernel variant per shape, evaluable in process
 *             and emitted as C
 *   records.c tuning records: one measured candidate per JSON line
 *   xgb.c     the learned part of the cost model (f_MK) through XGBoost's
 *             C API, loaded with dlopen so the dependency stays optional
 *   space.c   the search space: micro-kernel schedules of a program's
 *             tunable stage, sized from hw.c, filtered by the checker
 *   features.c what the cost model sees of a candidate: its loop IR's
 *             loops, vector widths, bytes and flops, at a shape
 *   measure.c candidates compiled in batches, checked against the
 *             interpreter, timed at a shape
 *   child.c   measurements in a child process, so a candidate that
 *             crashes or hangs costs that candidate, not the run
 *   search.c  the joint search over every shape of the range (DietCode):
 *             cost model, rounds, evolution, records, the dispatcher
 *
 * docs/tuning.md describes each piece and why it is built this way.
 */
#ifndef RAVEL_TUNE_H
#define RAVEL_TUNE_H

#include "base/base.h"
#include "ravel.h"

/* ---- hw.c: hardware facts ---- */

/* Where a fact came from; TUNE_SRC_NONE means it could not be read and the
 * value is the stated fallback (TuneHw.notes says which and why). */
typedef enum TuneSource {
    TUNE_SRC_NONE,  /* unknown: the value is a fallback */
    TUNE_SRC_CPUID, /* the cpuid instruction */
    TUNE_SRC_SYSFS, /* /sys/devices/system/cpu */
    TUNE_SRC_OS,    /* sysconf */
    TUNE_SRC_COUNT
} TuneSource;

typedef enum TuneIsa {
    TUNE_ISA_UNKNOWN, /* not an x86-64 we can query: scalar code only */
    TUNE_ISA_SSE2,    /* 16-byte vectors, 16 registers */
    TUNE_ISA_AVX,     /* 32-byte float vectors without FMA/AVX2 */
    TUNE_ISA_AVX2,    /* 32-byte vectors with FMA, 16 registers */
    TUNE_ISA_AVX512,  /* 64-byte vectors, 32 registers */
    TUNE_ISA_COUNT
} TuneIsa;

typedef struct TuneHw {
    TuneIsa isa;
    bool fma, amx_tile, amx_bf16, amx_int8; /* usable: cpuid and enabled by the OS */
    int vector_bytes;                       /* widest usable vector register, bytes */
    int vector_regs;                        /* architectural vector registers of that width */
    TuneSource isa_src;
    int64_t l1d_bytes, l2_bytes, l3_bytes; /* per instance; 0 when unknown */
    TuneSource cache_src;
    int line_bytes; /* L1d cache line; 64 when unknown */
    int l1d_ways;   /* L1d associativity; 8 when unknown */
    int logical_cores, physical_cores;
    TuneSource logical_src, physical_src;
    int usable_cores;  /* logical cores this process may run on (affinity, cpusets) */
    char cpu_name[64]; /* cpuid's brand string; "" when unknown */
    char notes[512];   /* what was unknown and which fallback was used; "" when all known */
} TuneHw;

/* Reads the facts of the machine this process runs on. Never fails: what
 * cannot be read gets a fallback, marked TUNE_SRC_NONE and explained in
 * notes. Cached after the first call. */
const TuneHw *tune_hw(void);
/* The same, with the sysfs tree rooted at `sysfs_cpu` (normally
 * "/sys/devices/system/cpu") and, when use_cpuid is false, without cpuid:
 * for tests of the parsers and of the fallbacks. */
void tune_hw_probe(const char *sysfs_cpu, bool use_cpuid, TuneHw *out);
/* The machine class tuning records are keyed by: the CPU's name (cpuid's
 * brand string) and the facts a measured time depends on, one line, e.g.
 * "Intel(R) Xeon(R) Processor; AVX-512+AMX; L1d 48K L2 2048K L3 491520K; 2 cores". */
void tune_hw_machine_id(const TuneHw *hw, Buf *out);
/* Human-readable, one fact per line (what `ravel tune --hw` prints). */
void tune_hw_format(const TuneHw *hw, Buf *out);
const char *tune_isa_name(TuneIsa isa);
const char *tune_source_name(TuneSource src);

/* ---- dtree.c: the dispatcher, a decision tree over the size variables ---- */

/* A node tests `sizes[var] <= thresh` and goes to `left` when true, else to
 * `right`; a leaf (var < 0) answers `label`, a kernel variant. */
typedef struct DTreeNode {
    int var;        /* size variable tested; -1 for a leaf */
    int64_t thresh; /* left when sizes[var] <= thresh */
    int left, right;
    int label; /* leaves: the chosen variant */
} DTreeNode;

typedef struct DTree {
    DTreeNode *nodes; /* nodes[0] is the root */
    int len, cap;
    int nvars;
} DTree;

/* Trains a CART classifier: n shapes of nvars sizes each (row-major in
 * `sizes`), the best variant of each in `labels` (>= 0), each shape's
 * frequency in `weights` (> 0; NULL: all 1). Splits minimize the weighted
 * Gini impurity; a node is split until its shapes agree on the label, no
 * threshold separates them (identical shapes with different labels: the
 * weighted majority wins) or it is `max_depth` deep (0: unlimited). So with
 * depth to spare, every training shape gets its own label back.
 * RV_ERR_ARG for bad arguments. */
rv_status tune_dtree_train(const int64_t *sizes, const int *labels, const double *weights, int n,
                           int nvars, int max_depth, DTree *out);
/* The variant for one shape: the same answer as the emitted C. */
int tune_dtree_eval(const DTree *t, const int64_t *sizes);
int tune_dtree_depth(const DTree *t);
int tune_dtree_leaves(const DTree *t);
/* Appends the C function `int NAME_dispatch(const int64_t *sizes)` (needs
 * <stdint.h>): nested ifs, each with a comment naming its size variable
 * (var_names[i]; NULL: "sizes[i]"), each return with the variant's name
 * (label_names[label]; NULL: none). */
void tune_dtree_emit_c(const DTree *t, const char *name, const char *const *var_names,
                       const char *const *label_names, Buf *out);
void tune_dtree_free(DTree *t);

/* ---- records.c: tuning records, one measured candidate per JSON line ---- */

typedef enum TuneStatus {
    TUNE_STATUS_OK,     /* ran and matched the interpreter: `seconds` is its time */
    TUNE_STATUS_WRONG,  /* ran but its result differed: a bug, never a candidate */
    TUNE_STATUS_FAILED, /* did not compile or crashed */
    TUNE_STATUS_COUNT
} TuneStatus;

/* One measurement of one schedule (trace) of one program on one shape. */
/* The clock a candidate's time was read from. At 1 thread the process's
 * CPU time: on a machine shared with other jobs a 1-thread run's wall
 * time is mostly waiting for a core, and a long candidate never gets an
 * undisturbed run. At 2+ threads the wall clock: CPU time would sum the
 * pool's threads, spin waits included. */
typedef enum TuneClock { TUNE_CLOCK_WALL, TUNE_CLOCK_CPU } TuneClock;
/* The clock to time a kernel on a pool of `threads` threads (0: the
 * shared pool of every usable core, so the wall clock). */
TuneClock tune_clock_for_threads(int threads);
const char *tune_clock_name(TuneClock c);
/* Seconds on clock c (monotonic; only differences mean anything). */
double tune_clock_seconds(TuneClock c);

typedef struct TuneRecord {
    const char *program; /* hash of the program's text */
    const char *machine; /* the machine class it was measured on */
    const char *trace;   /* the schedule trace, replayable text */
    int nsizes;
    const char **size_names; /* the shape: size variable = value, sorted by name */
    int64_t *size_values;
    double seconds;
    TuneStatus status;
    /* The threads the kernel ran on (its thread pool's size): a time at 1
     * thread says nothing of 2, so a tuner reads only the records of its
     * own count. 0 in a record written before the field: the shared pool,
     * every usable core of the machine class. */
    int threads;
    /* The candidate was compiled for this shape alone, its sizes constants
     * (a specialized leaf, docs/tuning.md); false in a record written
     * before the field. Its time is not the generic candidate's. */
    bool spec;
    /* The code it timed: the JIT's key of the candidate's C compiled
     * alone (for this shape alone when spec), its compiler and flags
     * (rv_program_code_key); the time stands for that code and no other.
     * NULL in a record written before the field. */
    const char *code;
    /* Records written before "code" named the code generator's sources
     * instead (a hash of src/ir, lower, codegen, ...): read, kept on
     * rewriting, never current (docs/tuning.md, "Stale records"). */
    const char *codegen;
    /* The clock "seconds" was read from; TUNE_CLOCK_WALL in a record
     * written before the field. */
    TuneClock clock;
    int line; /* 1-based line of the file it was read from; 0 when added */
} TuneRecord;

typedef struct TuneRecords {
    Arena *arena; /* every string and array of the records */
    TuneRecord *data;
    int len, cap;
    StrMap index; /* (program, shape, trace) key -> index + 1 of its latest record */
    Buf warnings; /* what loading skipped, one line each; for the caller to print */
} TuneRecords;

const char *tune_status_name(TuneStatus st);
void tune_records_init(TuneRecords *rs);
void tune_records_free(TuneRecords *rs);
/* Whether r timed the code whose key (rv_program_code_key) is `code`:
 * false for a record without "code" (older) or a NULL code. */
bool tune_record_current(const TuneRecord *r, const char *code);
/* Reads a records file into rs (initialized). A file that does not exist
 * holds no records. A torn last line (no newline and not JSON: a write cut
 * short) is skipped with a line in rs->warnings; any other bad line is
 * RV_ERR_IO "PATH:LINE: ...". */
rv_status tune_records_load(const char *path, TuneRecords *rs);
/* The same over text in memory; `name` is the file name in messages. */
rv_status tune_records_parse(const char *name, const char *text, size_t len, TuneRecords *rs);
/* Copies r into rs (the shape is sorted by name); a record with the same
 * (program, threads, shape, trace, spec) as an earlier one replaces it for
 * lookup. */
void tune_records_add(TuneRecords *rs, const TuneRecord *r);
/* The latest record of (program, threads, shape, trace) of the generic
 * candidate (not spec), the shape in any order; NULL when none. */
const TuneRecord *tune_records_find(const TuneRecords *rs, const char *program, int threads,
                                    const char *const *size_names, const int64_t *size_values,
                                    int nsizes, const char *trace);
/* r as one line of JSON, without the newline (caller frees with base_free). */
char *tune_record_to_json(const TuneRecord *r);
/* Appends r as one line with a single write (O_APPEND, under flock), so
 * concurrent writers do not interleave and a crash leaves at most one torn last line;
 * a torn last line left by an earlier crash is cut off first. */
rv_status tune_record_append(const char *path, const TuneRecord *r);

/* ---- xgb.c: the learned cost model f_MK through XGBoost's C API ---- */

/* Gradient-boosted regression trees. XGBoost (libxgboost.so, Debian
 * libxgboost-dev) is loaded with dlopen on first use: without it every
 * function here fails with RV_ERR_UNSUPPORTED and a message naming the
 * package, and the rest of ravel is unaffected. $RAVEL_XGBOOST names the
 * library to load instead of the usual names. */
typedef struct XgbParams {
    int rounds;            /* boosting rounds; 0: 100 */
    int max_depth;         /* of each tree; 0: 6 */
    double eta;            /* learning rate; 0: 0.3 */
    const char *objective; /* NULL: "reg:squarederror"; "rank:pairwise" ranks within groups */
    int nthread;           /* 0: XGBoost's default (all cores) */
    int seed;
} XgbParams;

typedef struct XgbModel XgbModel;

/* RV_OK when XGBoost can be loaded; else RV_ERR_UNSUPPORTED with the message
 * tuning shows ("... install libxgboost-dev ..."). */
rv_status tune_xgb_available(void);
/* "1.7.4": the loaded library's version; NULL when it is not loaded. */
const char *tune_xgb_version(void);
rv_status tune_xgb_new(const XgbParams *p, XgbModel **out);
/* Fits a fresh model to nrows rows of ncols features (row-major `x`) and
 * their targets `y` (e.g. log throughput). For a rank objective, `groups`
 * holds the sizes of ngroups consecutive groups of rows (e.g. the
 * candidates measured on one shape); else NULL and 0. */
rv_status tune_xgb_train(XgbModel *m, const float *x, int nrows, int ncols, const float *y,
                         const unsigned *groups, int ngroups);
/* One prediction per row into out[nrows]. RV_ERR_ARG before training. */
rv_status tune_xgb_predict(XgbModel *m, const float *x, int nrows, int ncols, float *out);
/* The model as a file (XGBoost's JSON format with a .json name, else its
 * binary format); load makes a model that predicts as the saved one did. */
rv_status tune_xgb_save(XgbModel *m, const char *path);
rv_status tune_xgb_load(const char *path, XgbModel **out);
void tune_xgb_free(XgbModel *m);

/* ---- space.c: the search space of micro-kernels ---- */

/* The stage a tuner schedules: a computed tensor Y[b.., i, j] = f(sum(k)
 * A[.., i, .., k ..] * B[.., j, .., k ..]) (dense, batch_matmul, with any
 * epilogue), found by tune_space_analyze. Axis and tensor names are the
 * program's, so candidates are `.rv` schedule text. */
typedef struct TuneStage {
    const char *name;           /* Y */
    int nbatch;                 /* output axes before i */
    const char *batch[4];       /* their names */
    const char *i, *j, *k;      /* the row, column and reduction axes */
    const char *a, *b;          /* the operand indexed by i (A) and by j (B) */
    bool b_k_inner;             /* B's last index is k (W[j, k]: NT) */
    bool a_k_inner;             /* A's last index is k */
    int64_t n_extent, k_extent; /* j's and k's extents when constant, else 0 */
    size_t dsize;               /* element bytes */
    rv_tensor *y;               /* the stage's tensor */
    rv_expr *k_expr;            /* k's extent */
    /* Ragged rows (Y[b, i < len[b], j]: packed tokens): every candidate
     * fuses b and i into one loop `fused` over the sum of len (CoRa's
     * fuse(b, l)), and the stage is tuned and dispatched on that sum, a
     * quantity of the UF array rather than of the sizes (docs/tuning.md,
     * "Ragged rows"). NULL: dense rows. */
    rv_ufun *rows_uf;
    const rv_size *rows_outer;  /* b's extent, the UF's one argument's: a size */
    int64_t len_lo, len_hi;     /* the UF's value range (constant) */
    const char *fused;          /* the fused loop's name in the candidates */
    /* A recursion's member (computed level by level, `dynamic_batch()`):
     * its rows are a level's nodes, _T_batch_length[b], which changes
     * inside one run. The stage is tuned on the nodes per level and
     * dispatched per call on the run's mean level, N / _T_nbatch
     * (docs/tuning.md, "Recursion"). NULL: none. */
    rv_recurse *group;
    /* Producers the program's own schedule computes inside the stage
     * (`compute_at(hs, no)` in its block: TreeLSTM's child sums per tile
     * of nodes); every candidate computes them at its tile of rows. */
    const char *inside[4];
    int ninside;
} TuneStage;

/* Candidate templates: each a family of micro-kernels with integer knobs. */
typedef enum TuneTemplate {
    TUNE_T_DOT,    /* outputs as vector dot products over k (no copies) */
    TUNE_T_TILE,   /* an mr x nr register tile of Y, k outside it, B packed k-major */
    TUNE_T_KBLOCK, /* a panel of Y accumulated per block of kc values of k */
    TUNE_T_STREAM, /* a tile of Y^T: i in the vector lanes, A copied k-major */
    TUNE_T_ROWS,   /* ragged rows: an mr x nv*lanes tile of the fused rows, accumulated in Y */
    TUNE_T_COUNT
} TuneTemplate;

enum { TUNE_NPARAMS = 5 };

/* One micro-kernel: its template and knobs, and its schedule text (the
 * blocks that replace the program's own). */
typedef struct TuneCand {
    TuneTemplate tmpl;
    int p[TUNE_NPARAMS]; /* knobs, by template (space.c) */
    char *sched;         /* `schedule Y { ... }` blocks */
    int tile_i, tile_j;  /* the rows and columns one tile covers (f_pad) */
    bool seed;           /* a known-good sketch (tune_space_build): the search starts from it */
    int sketch;          /* a seed's kind within its template: seeds of one kind differ
                          * only in the register tile's size (tile: B packed row by row,
                          * transposed in blocks, or read in place) */
    int kind;            /* its structure within its template: the knobs that are not the
                          * tile's size (tile: pack, pad, wide; stream: ku; rows: the
                          * order); candidates of one template and kind differ only in
                          * the tile's size (the verification measures every kind) */
    bool leaf;           /* legal only where the sizes are constants (tune_space_add_leaf):
                          * a specialized leaf's, never the generic search's; its `seed`
                          * is of the shape of the last tune_space_add_leaf */
} TuneCand;

typedef struct TuneSpace {
    TuneStage stage;
    char *keep; /* the program's own blocks for the other stages, kept in every candidate */
    TuneCand *cands;
    int len, cap;
    int rejected; /* candidates the schedule checker refused */
    int nleaf;    /* candidates after len (cands[len..len+nleaf)): legal only at
                   * some constant shape (tune_space_add_leaf) */
} TuneSpace;

/* Finds the tunable stage of m (the last computed tensor with a sum
 * reduction over products of two tensors); RV_ERR_UNSUPPORTED naming why
 * when there is none. */
rv_status tune_space_analyze(rv_module *m, TuneStage *out);
/* Every candidate for m's tunable stage on the machine `hw`: knobs sized
 * from the vector width, registers, caches and cores; each candidate is
 * lowered, and those the schedule checker or lowering refuse are dropped
 * (counted in `rejected`), never kept. A candidate's text starts with the
 * program's own blocks for the other stages (those not of the tuned
 * tensor or of the stages its blocks create), so tuning one stage keeps
 * the schedule of the rest. The known-good sketches are marked `seed`
 * (DietCode and Ansor start from such): per template its register-maximal
 * micro-kernels (the most accumulators the vector registers hold, and the
 * widest power-of-two row count, which pads fewer rows), each way of
 * packing B, every k block; the dot products. */
rv_status tune_space_build(rv_module *m, const TuneHw *hw, TuneSpace *out);
/* The space of a specialized leaf: the candidates legal where every size
 * is the constant `at` names, which the generic space (sp->cands[0..len))
 * lacks (a padded tile over j where j's extent is a multiple of the
 * tile). Those not yet there are appended after the generic ones
 * (sp->nleaf, TuneCand.leaf); the indices of those legal at `at` go to
 * out (at most max; the order of the space); how many. */
int tune_space_add_leaf(rv_module *m, const TuneHw *hw, const rv_variant_sizes *at, TuneSpace *sp,
                        int *out, int max);
/* The knobs of c as one line, e.g. "tile mr=6 nv=4 pack=1 pad=0". */
void tune_cand_describe(const TuneCand *c, Buf *out);
/* The index of a candidate differing from c in one knob, chosen by `r`;
 * -1 when c has no neighbour. */
int tune_space_neighbour(const TuneSpace *s, int c, uint64_t r);
void tune_space_free(TuneSpace *s);

/* ---- features.c: what the cost model sees of a candidate ---- */

enum {
    TUNE_F_LOG_STORES,   /* log2 of stores executed (a vector store counts once) */
    TUNE_F_LOG_FLOPS,    /* log2 of arithmetic operations executed, per lane */
    TUNE_F_LOG_BYTES,    /* log2 of bytes loaded from memory (not from registers) */
    TUNE_F_INTENSITY,    /* flops per byte loaded from memory */
    TUNE_F_VECTOR,       /* widest vector loop (lanes) */
    TUNE_F_VEC_FRAC,     /* fraction of stores executed in vector loops */
    TUNE_F_UNROLL,       /* largest product of nested unrolled loops' extents */
    TUNE_F_REG_TILE,     /* elements of the largest local (register) buffer */
    TUNE_F_LOG_SCRATCH,  /* log2 of bytes of scratch buffers */
    TUNE_F_LOG_TASKS,    /* log2 of the outermost parallel loops' iterations */
    TUNE_F_OCCUPANCY,    /* tasks / (cores * ceil(tasks / cores)) */
    TUNE_F_LOOPS,        /* loops in the kernels */
    TUNE_F_DEPTH,        /* deepest loop nest */
    TUNE_F_CHECKS,       /* conditions evaluated per store */
    TUNE_F_LOG_INNER,    /* log2 of the innermost loops' mean extent */
    TUNE_F_LOG_OUTPUTS,  /* log2 of the shape's output elements */
    TUNE_F_COUNT
};

/* A point of the size range: one value per size of the module, in
 * rv_module_size_at order, then a quantity its inputs are drawn to meet
 * (tune_shape_bind), at v[nsizes] too: for a stage of ragged rows
 * (TuneStage.rows_uf) the packed rows, the sum of the UF; for a
 * recursion's member (TuneStage.group) the nodes of each level. */
typedef struct TuneShape {
    int64_t v[8];
    const rv_ufun *rows_uf;  /* packed rows; NULL: none */
    const rv_recurse *group; /* nodes per level; NULL: none */
    int64_t quantity;
} TuneShape;

/* The levels of a shape of a recursion's member: chains of `quantity`
 * nodes side by side, so each of its levels holds that many nodes. */
#define TUNE_LEVELS 8

/* Is z a size that linearizing a recursion's structure binds (its nodes,
 * structures, batches, unrolled iterations)? A level shape's chains set
 * them; the search does not vary them. */
bool tune_size_set_by_levels(const rv_structure *st, const rv_size *z);

/* Binds the shape's sizes into b; for packed rows the UF array: B = the
 * shape's size, lengths in the UF's range summing to sh->quantity,
 * spread by `seed`; for a recursion's member the structure: sh->quantity
 * chains of TUNE_LEVELS nodes; then every other unbound size, UF and
 * input at random (seeded). */
rv_status tune_shape_bind(rv_bindings *b, rv_module *m, const TuneShape *sh, uint64_t seed);
/* "M=4" or, for packed rows, "B=2,sum(len)=9": the shape's variables. */
void tune_shape_format(const TuneShape *sh, rv_module *m, Buf *out);

/* Lowers m with the schedule blocks `sched` (in place of its own) and
 * writes TUNE_F_COUNT features of the loop IR at each of the nshapes shapes
 * into feat[s * TUNE_F_COUNT + f] (feat may be NULL: only the check).
 * `lanes` is the machine's vector width in elements and `cores` its
 * cores. An illegal schedule is the checker's error (RV_ERR_SCHEDULE ...). */
rv_status tune_features(rv_module *m, const char *sched, const TuneShape *shapes, int nshapes,
                        int lanes, int cores, float *feat);
const char *tune_feature_name(int f);
/* The stage's extents at a shape: batch (the product of the batch axes),
 * rows (i), columns (j) and reduction (k); what f_pad and the useful
 * flops (2 * batch * rows * cols * red) are computed from. */
void tune_stage_extents(const TuneStage *s, const TuneShape *sh, double *batch, double *rows,
                        double *cols, double *red);

/* ---- measure.c: compile, check, time ---- */

/* A batch of candidates compiled into one program (one C translation unit),
 * one variant each; tune_batch_time runs variant v. */
typedef struct TuneBatch {
    rv_program *prog;
    int n;
    int *pick; /* the variant the dispatch returns (the program's user data) */
} TuneBatch;

/* Compiles n schedules as the variants of one program (threads: as
 * rv_compile_options.threads). */
rv_status tune_batch_compile(rv_module *m, int n, const char *const *scheds, int threads,
                             TuneBatch *out);
/* The same with variant v compiled for the sizes at[v] (NULL: none), as
 * rv_dispatch.variant_sizes: a specialized candidate, run only there. */
rv_status tune_batch_compile_at(rv_module *m, int n, const char *const *scheds,
                                const rv_variant_sizes *at, int threads, TuneBatch *out);
void tune_batch_free(TuneBatch *b);
/* The interpreter's results at `shape` on random inputs (seeded): the
 * reference candidates are checked against (free with rv_bindings_free). */
rv_status tune_reference(rv_module *m, const TuneShape *shape, uint64_t seed, rv_bindings **out);
/* Runs variant v at `shape` on the random inputs of `seed` and compares
 * every output with the interpreter's (f32: 1e-4 relative to the
 * magnitude): `ref` from tune_reference at the same shape and seed, or
 * NULL to compute it here. *ok says whether they matched. An error is a
 * failed run. */
rv_status tune_batch_check(TuneBatch *b, int v, rv_module *m, const TuneShape *shape,
                           uint64_t seed, const rv_bindings *ref, bool *ok);
/* The time of variant v at `shape` on `clock`: tune_time_estimate of
 * `repeats` runs (after a warm run; more runs while their total stays
 * under min_seconds, up to 4x). */
rv_status tune_batch_time(TuneBatch *b, int v, rv_module *m, const TuneShape *shape, int repeats,
                          double min_seconds, TuneClock clock, double *seconds);
/* A candidate's time from the times of n runs: the fastest (0 when none). */
double tune_time_estimate(const double *runs, int n);

/* ---- child.c: measuring in a child process ---- */

typedef struct TuneChild {
    int pid; /* -1 once it has ended */
    int fd;  /* the read end of its pipe */
} TuneChild;

/* Forks a child that runs fn(fd, user), fn sending messages with
 * tune_child_send on fd, then exits. */
rv_status tune_child_start(TuneChild *c, void (*fn)(int fd, void *user), void *user);
/* In the child: one message (size <= PIPE_BUF, so written at once). */
void tune_child_send(int fd, const void *msg, size_t size);
/* In the parent: the next message of `size` bytes, waiting at most
 * `timeout` seconds. 1: read; 0: the child ended without sending one (how,
 * e.g. "killed by signal 6 (Aborted)", appended to why; it is reaped);
 * -1: none came in time, the child was killed and reaped (why says so). */
int tune_child_read(TuneChild *c, void *msg, size_t size, double timeout, Buf *why);
/* Waits for a child that has sent everything. */
void tune_child_finish(TuneChild *c);

/* ---- search.c: the joint search and the dispatcher ---- */

/* A candidate's predicted throughput at an unmeasured shape s, as far as
 * the measurements beside it vouch for it (the votes of the dispatcher):
 * own[q] is the candidate's measured throughput at shape q (0: none),
 * best[q] the best measured there of any candidate (0: none), the ns
 * shapes in the range's order. On each side of s, at the nearest shape
 * where anything was measured, the candidate may reach `slack` times its
 * own time there, or the best there where it was not measured; the
 * prediction is cut to the larger of the two sides' bounds (unbounded
 * where nothing was measured on either side). own[s] > 0 is returned as
 * it is. */
double tune_bounded_prediction(const double *own, const double *best, int ns, int s, double pred,
                               double slack);

/* The most kernels the tree of a tuned program dispatches among, the
 * most specialized leaves ahead of it, and so the most variants. */
#define TUNE_MAX_TREE_VARIANTS 16
#define TUNE_MAX_SPEC 16
#define TUNE_MAX_VARIANTS (TUNE_MAX_TREE_VARIANTS + TUNE_MAX_SPEC)
/* Specialized leaves by default (TuneOptions.specialize): each costs one
 * more kernel to compile per tuned program. */
#define TUNE_SPECIALIZE 16

typedef struct TuneOptions {
    int trials;             /* measurements (candidate x shape) in all; 0: 64 */
    int batch;              /* candidates compiled per program; 0: 8 */
    int shapes_per_round;   /* shapes measured per round; 0: 2 */
    int max_variants;       /* kernels chosen by vote; 0: 4 (a shape where all of
                             * them measured slower than a known-good sketch adds
                             * its own, up to TUNE_MAX_TREE_VARIANTS in all) */
    int threads;            /* of the measured kernels (0: the shared pool) */
    int repeats;            /* timed runs per measurement; 0: 5 */
    double timeout;         /* seconds a candidate's check or timing may take; 0: 60 */
    uint64_t seed;
    const char *records;    /* records file (NULL: none, nothing resumes) */
    /* The workload: shapes and their frequencies (NULL weights: 1 each).
     * They are tuned for with their weight, the rest of the range (every
     * point up to 256, else sampled) at a hundredth of the rarest. For
     * ragged rows the outer size's value is the packed rows' count. */
    const double *weights;
    const TuneShape *shapes;
    int nshapes;
    /* Tune for the given shapes alone, not the rest of the range (per-shape
     * tuning: the Ansor-style baseline bench_tune compares with). */
    bool shapes_only;
    /* Specialized leaves (docs/tuning.md): the most shapes whose kernel is
     * also measured compiled for that shape alone and, where faster, taken
     * there exactly; 0: TUNE_SPECIALIZE, -1: none. */
    int specialize;
    /* Verifying the dispatcher (docs/tuning.md): the most measurements
     * past the trials of the kernels it dispatches at shapes where they
     * were never measured (and of the best predicted there); 0: half the
     * trials, -1: none. */
    int verify;
    bool quiet;             /* no progress on stderr */
    bool replay;            /* measure nothing: the records decide (ravel build --records) */
} TuneOptions;

/* One measurement, in the order made (records read first): the tuning
 * curve `ravel tune --plot` draws. */
typedef struct TuneTrial {
    int shape;     /* index into TuneResult.shapes */
    double gflops; /* 0: failed or wrong */
} TuneTrial;

/* What a tuning run found. */
/* Two kernels whose times at a shape are within this factor are a close
 * call: one timing each is noise (a shared machine's load varies more
 * between rounds), so the verification times each again (search.c). */
#define TUNE_CLOSE_CALL 1.05

typedef struct TuneResult {
    int nvariants;
    char **variant_sched;  /* each variant's schedule blocks */
    char **variant_desc;   /* its knobs, one line */
    /* The sizes each variant is compiled for (rv_dispatch.variant_sizes;
     * names are the module's): nsizes 0 for the tree's variants; for a
     * specialized leaf every size, at[i] the module's size i, at the
     * shape's value, which the dispatcher takes exactly at that shape,
     * before the tree */
    rv_variant_sizes *variant_at;
    int nspec;             /* the specialized leaves: the last nspec variants */
    DTree tree;            /* the dispatcher over the sizes (and sum_ufun's sum) */
    /* Ragged rows (TuneStage.rows_uf): the UF whose sum the tree reads
     * after the sizes, as rv_dispatch.sums[0]; "" when it reads sizes only */
    char sum_ufun[64];
    /* A recursion's member (TuneStage.group): the tree's input after the
     * sizes is sizes[level_nodes] / sizes[level_batches] (N / _T_nbatch,
     * the run's mean nodes per level), which the emitted dispatch and
     * tune_result_pick compute; -1 otherwise. */
    int level_nodes, level_batches;
    char quantity[80]; /* the tree's input after the sizes, "sum(len)", "N/_T_nbatch"; "" none */
    TuneShape *shapes;     /* the shapes tuned for */
    int nshapes;
    int *shape_variant;    /* the variant each shape voted for (after merging) */
    double *shape_gflops;  /* its best measured or predicted GFLOP/s */
    int measured;          /* measurements made by this run */
    int reused;            /* measurements read from the records */
    int stale;             /* among them, of code other than the candidate's today
                            * (its "code" key differs: docs/tuning.md) */
    int retimed;           /* stale ones measured again by this run (among `measured`) */
    int close_retimed;     /* close calls timed again by this run (among `measured`) */
    int wrong;             /* candidates that differed from the interpreter */
    int failed;            /* candidates that did not compile, failed, crashed or hung */
    /* measurements of specialized candidates (made, from the records):
     * outside the trial budget */
    int spec_measured, spec_reused;
    /* measurements made by this run to verify the dispatcher's choices
     * (among `measured`), and its seconds */
    int verify_measured;
    /* among them, the kinds measured at the anchor shapes (docs/tuning.md) */
    int kinds_measured;
    double verify_seconds;
    double compile_seconds, measure_seconds, total_seconds;
    /* making the code keys of the records and measurements (lowering and
     * emitting C, no compile), and how many */
    double key_seconds;
    int nkeys;
    TuneTrial *trials;     /* every measurement, reused and made, in order */
    int ntrials, captrials;
} TuneResult;

/* Tunes m's tunable stage jointly over its size range (XGBoost must be
 * available: RV_ERR_UNSUPPORTED otherwise). `program_text` is what records
 * are keyed by. */
rv_status tune_run(rv_module *m, const char *program_text, const TuneOptions *opt,
                   TuneResult *out);
/* The variant r's dispatcher picks for a run: `sizes` in module order
 * (nsizes of them), then, for packed rows, the sum (rv_dispatch.sums);
 * nodes per level are computed here. What a tuned program's
 * rv_dispatch_fn calls. */
int tune_result_pick(const TuneResult *r, const int64_t *sizes, int nsizes);
/* The dispatcher as C (`int NAME_dispatch(const int64_t *sizes)`: the
 * sizes, then the sum of packed rows; nodes per level it computes). */
void tune_result_dispatch_c(const TuneResult *r, rv_module *m, const char *name, Buf *out);
void tune_result_free(TuneResult *r);

#endif
