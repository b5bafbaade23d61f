/*
 * interp.h — the reference interpreter: the map of src/interp.
 *
 * The interpreter is the living definition of what the tensor IR means and
 * the oracle every compiled kernel is compared with. It evaluates each
 * operation of a module in definition order, element by element in the
 * canonical storage order (ir/layout.h), in double precision for floats
 * (results rounded to the tensor's dtype when stored) and exact int64 for
 * integers. Every user mistake (a missing or ill-shaped array, a size or UF
 * value outside its range, an index out of bounds, an integer division by
 * zero) is an error with a message naming the place, never a crash.
 *
 * Files:
 *   bindings.c    the public rv_bindings_* API: sizes, borrowed arrays,
 *                 owned results and randomly drawn arguments
 *   interp.c      rv_interp_run: checking and preparing the arguments,
 *                 running operations in order, storing results
 *   compile.c     expression DAGs compiled to flat instruction lists
 *   eval.c        compute and cond operations: the instruction lists
 *                 evaluated per element
 *   recurse.c     recursion groups: node by node, children first
 *   extern_ref.c  reference implementations of the extern kernels
 *   random.c      the reproducible generator behind rv_bindings_randomize
 *   random_structs.c  random batches of structures for it
 *   random_scale.c    the scale of its weights in a recursive program
 *   layout_api.c  rv_bindings_layout: a tensor's canonical layout (ragged
 *                 row starts) under bound sizes and UFs, for callers
 */
#ifndef RAVEL_INTERP_H
#define RAVEL_INTERP_H

#include "ir/ir.h"
#include "ir/layout.h"

/* The values of a run, by object id. Arrays set by the user are borrowed;
 * drawn arguments and computed tensors are owned. The tables follow the
 * module as it grows (interp_bindings_sync). */
struct rv_bindings {
    const Module *m;
    int nsizes, nufuns, ntensors; /* table lengths */
    int64_t *size_val;
    bool *size_set;
    const rv_array **uf_arr; /* bound UF arrays */
    rv_array **uf_own;       /* the owned ones among them (drawn) */
    const rv_array **t_arr;  /* inputs (bound or drawn) and computed tensors */
    rv_array **t_own;        /* the owned ones among them */
    /* Per tensor: the stamp of its binding, unique over all bindings of
     * the process (interp_bindings_stamp), 0 while unbound. Binding again,
     * even the same array, gives a new stamp: what a program derives from
     * a param input (its packed layout) is valid while the stamp is the
     * one it was derived from. */
    uint64_t *t_stamp;
    /* Per UF: true for a structure's _T_unroll_node bound by
     * rv_bindings_set_linear from a batch without its unrolled partition;
     * a run that reads the partition computes it (interp_bindings_unroll). */
    bool *uf_pending;
    /* Per UF: an owned array a rebind or rv_bindings_reset released,
     * kept for its memory: rv_bindings_set_linear builds the next batch's
     * array in it when it holds it, so a call after call on one bindings
     * object allocates no UF array (results are reused the same way). */
    rv_array **uf_spare;
    /* Per UF: its array is one rv_bindings_set_linear wrote into memory
     * the bindings own and checked against the UF's declared range; per
     * structure (nstructs): set_linear also checked the numbering its
     * recursions rely on (rt_check_numbering, with batches). Seals for the
     * next run only: its preparation (interp_prepare_env) takes them into
     * the run (Interp.numbered) and clears them, so a check is skipped only
     * in the call whose bind did it. A rebind of the UF or a size, which
     * the ranges and the numbering depend on, clears them; the user can
     * forge none of them (the bindings are opaque), and the arrays they
     * cover are the bindings' own, handed out read-only
     * (rv_bindings_get_array). */
    bool *uf_sealed;
    bool *st_numbered;
    int nstructs;
    /* rv_bindings_set_linear's scratch, kept by capacity */
    void *scratch;
    size_t scratch_cap;
    /* The memory of the last run's preparation (interp_release keeps it,
     * the next interp_prepare_env takes it back; NULL: none): its tables
     * and the layouts and int64 UF values they pointed to (InterpKeep). */
    struct InterpKeep *keep;
};

/* What a run's preparation allocates, kept by its bindings for the next
 * run on them: the Interp's tables (one block), and by ufun id, then
 * nufuns + tensor id, the layouts evaluated (ir_layout_eval_reuse
 * evaluates the next run's in their memory) and the int64 copies of the
 * UF arrays with their room. The contents are computed again by every
 * run (they depend on its sizes and UF arrays); only the memory is
 * reused, so call after call on one bindings object (a server's, a
 * benchmark's) allocates none of it once the largest batch was seen. */
typedef struct InterpKeep {
    int nsizes, nufuns, ntensors, nstructs; /* the module's when kept */
    void *tables;
    Layout **lay;      /* nufuns + ntensors */
    int64_t **ufv;     /* nufuns */
    int64_t *ufv_room; /* nufuns: elements ufv[i] holds */
} InterpKeep;

/* One value during evaluation; the static dtype of the node says which
 * member is live (integers and bools in i, floats in f). */
typedef union Val {
    double f;
    int64_t i;
} Val;

/* A tensor's value during a run: its layout and its data. */
typedef struct TensorVal {
    const rv_array *arr;
    const void *data;
    rv_dtype dtype;
    Layout *lay;
} TensorVal;

/* The names errors give the arguments, made once by a caller that
 * prepares many runs (a compiled program): "input X" by tensor id, "ufun
 * f" by ufun id. Without them each run formats its own. */
typedef struct InterpNames {
    const char *const *tensor;
    const char *const *ufun;
} InterpNames;

/* The state of one run (or of drawing random arguments). */
typedef struct Interp {
    const Module *m;
    rv_bindings *b;
    LayoutEnv env;
    int64_t *sizes; /* by size id */
    int64_t **ufv;  /* by ufun id: values in domain order, as int64 */
    Layout **ufl;   /* by ufun id: domain layouts */
    TensorVal *tv;  /* by tensor id; data is NULL until computed */
    const InterpNames *names; /* NULL: formatted per run */
    /* by structure id: the run's batch was bound by rv_bindings_set_linear,
     * which checked its numbering (rv_bindings.st_numbered) */
    bool *numbered;
    InterpKeep *keep; /* the memory this run reuses, taken from b (never NULL once prepared) */
} Interp;

/* ---- bindings.c ---- */

/* Grows the tables after objects were added to the module. */
void interp_bindings_sync(rv_bindings *b);
/* Frees every computed tensor (not inputs). */
void interp_bindings_clear_outputs(rv_bindings *b);
/* Binds an owned array to a tensor or UF, replacing what was there. */
void interp_bindings_own_tensor(rv_bindings *b, const Tensor *t, rv_array *a);
/* The stamp of tensor t's binding in b (rv_bindings.t_stamp); 0 when t is
 * unbound. */
uint64_t interp_bindings_stamp(const rv_bindings *b, const Tensor *t);
/* The computed tensor's array the bindings own, detached from them (the
 * caller owns it now); NULL when they own none. */
rv_array *interp_bindings_take_tensor(rv_bindings *b, const Tensor *t);
void interp_bindings_own_ufun(rv_bindings *b, const Ufun *f, rv_array *a);
/* Takes b's seals (rv_bindings.uf_sealed, st_numbered) into the run
 * being prepared: in->numbered; clears them in b. */
void interp_bindings_take_seals(rv_bindings *b, Interp *in);
/* rv_bindings_set_array, but the bindings own `a` on success (the caller
 * still does on failure). */
rv_status interp_bindings_adopt_array(rv_bindings *b, const char *name, rv_array *a);
/* rv_bindings_set_linear for structure st; without data (with_data
 * false) the data columns stay as they are (random bindings draw them as
 * any UF). */
rv_status interp_bindings_set_linear(rv_bindings *b, const Structure *st, const rv_linear *lin,
                                     bool with_data);
/* Binds structure st's unrolled partition, computed from its bound nchild
 * and child arrays, when rv_bindings_set_linear left it out (uf_pending);
 * else nothing. Called by the runs of programs that read it. */
rv_status interp_bindings_unroll(rv_bindings *b, const Structure *st);

/* ---- interp.c ---- */

/* Checks sizes, UF arrays and input arrays against the module and fills
 * `in`. With a non-NULL seed, first draws whatever is unbound (sizes, UF
 * arrays, inputs) and stores it in the bindings; bound inputs are then
 * left for the run to check. names: NULL, or the arguments' names for
 * errors (InterpNames). */
rv_status interp_prepare(Interp *in, const Module *m, rv_bindings *b, const uint64_t *seed,
                         const InterpNames *names);
/* The first half of interp_prepare: sizes and UFs only, so the extents of
 * every layout can be evaluated in in->env (rv_bindings_layout). */
rv_status interp_prepare_env(Interp *in, const Module *m, rv_bindings *b, const uint64_t *seed,
                             const InterpNames *names);
/* Ends a run's use of `in`: its memory goes to its bindings for the next
 * run (InterpKeep). */
void interp_release(Interp *in);
/* Frees what interp_release kept (rv_bindings_free). */
void interp_keep_free(InterpKeep *k);
/* Tensor t's layout into in->tv[t->id].lay, evaluated in the memory of
 * the layout of t that the bindings' last run made (ir_layout_eval_reuse). */
rv_status interp_tensor_layout(Interp *in, const char *what, const Tensor *t);
/* A computed tensor's result: its layout evaluated (in->tv[t->id].lay)
 * and a zeroed array of its dtype; then, once computed (or, for a
 * recursion group's members, before: they read each other), stored in the
 * bindings and made readable (in->tv[t->id].data). */
rv_status interp_result_new(Interp *in, const Tensor *t, rv_array **out);
void interp_result_store(Interp *in, const Tensor *t, rv_array *a);
/* Sets the last error to "<where>: <message>" and returns st. <where> is
 * the location of the tensor's definition ("f.rv:3:1: ") and "computing
 * Y[2, 5]" (idx NULL: "computing Y"), then "extern K" when calling extern
 * kernel K (ext non-NULL). */
rv_status interp_verror(rv_status st, const Tensor *t, const int64_t *idx, const char *ext,
                        const char *fmt, va_list ap);

/* ---- compile.c: expression DAGs to instruction lists ---- */

/* The innermost loop of a reduction evaluates its body for up to this many
 * consecutive iterations at once (each instruction loops over the lanes),
 * which amortizes instruction dispatch; everything else runs one lane. */
enum { INTERP_LANES = 32 };

typedef enum EvalOpc {
    I_MOV,    /* dst = a (casts that change nothing) */
    I_ITOF,   /* dst.f = a.i */
    I_ITOF32, /* dst.f = (float)a.i */
    I_FTOF32, /* dst.f = (float)a.f */
    I_FTOI,   /* dst.i = trunc(a.f), checked against dtype k */
    I_ITOI32, /* dst.i = (int32_t)a.i, wrapping as a C cast does */
    I_NEG_I,
    I_NEG_F,
    I_ABS_I,
    I_ABS_F,
    I_ADD_I,
    I_ADD_F,
    I_SUB_I,
    I_SUB_F,
    I_MUL_I,
    I_MUL_F,
    I_DIV_F,
    I_IARITH, /* integer DIV, MOD, FLOORDIV, FLOORMOD (ExprKind k) */
    I_MIN_I,
    I_MIN_F,
    I_MAX_I,
    I_MAX_F,
    I_CMP_I, /* comparison k of integers (and bools) */
    I_CMP_F, /* comparison k of floats */
    I_AND,
    I_OR,
    I_NOT,
    I_SELECT, /* dst = a.i ? b : c */
    I_MATH,   /* float math function k of a (and b for POW) */
    I_READ1,  /* dst = the tensor of u.rd at args[0]: a dense 1-D read */
    I_READ2,  /* the same at (args[0], args[1]): a dense 2-D read */
    I_READN,  /* the same at the n index slots in args: dense, any rank */
    I_READR,  /* the same through a ragged layout */
    I_UFCALL, /* dst.i = u.uf at the n argument slots in args */
    I_REDUCE, /* dst = u.red */
    I_COUNT
} EvalOpc;

typedef struct EvalRed EvalRed;

/* One instruction. Operand flags say whether an operand varies across the
 * lanes of a vectorized reduction (stride 1) or is one value for all of
 * them, held in lane 0 (stride 0). */
typedef struct EvalIns {
    EvalOpc op;
    int k;                /* ExprKind for I_IARITH, I_CMP_*, I_MATH; rv_dtype for I_FTOI */
    int dst, a, b, c;     /* slots */
    uint8_t va, vb, vc;   /* the operands vary across lanes */
    int n;                /* READ, UFCALL: operands in args */
    const int *args;      /* their slots */
    const uint8_t *vargs; /* and whether each varies */
    union {
        const Ufun *uf; /* UFCALL */
        struct {
            const void *data;
            rv_dtype dtype;
            const Layout *lay;
            int64_t ext0, ext1; /* READ1, READ2: the extents */
        } rd;                   /* READ */
        const EvalRed *red;     /* REDUCE */
    } u;
    const Expr *e; /* the node, for messages */
} EvalIns;

typedef struct EvalBlock {
    const EvalIns *ins;
    int n;
} EvalBlock;

struct EvalRed {
    rv_reduce_kind rk;
    rv_dtype dt; /* the body's dtype */
    int naxes;
    int axis_slot[RV_MAX_DIMS]; /* the slots of the axes' variables */
    EvalBlock ext[RV_MAX_DIMS]; /* each axis extent (may use outer axes) */
    int ext_slot[RV_MAX_DIMS];
    EvalBlock inv, var; /* body: nodes independent of the axes (first iteration only), the rest */
    int body;           /* the body's slot */
    bool body_varies;   /* the body depends on the axes (else lane 0 holds it) */
    bool vec;           /* the innermost axis runs INTERP_LANES iterations at a time */
};

/* One operation compiled: its blocks and the initial slot values (lane 0;
 * a slot is INTERP_LANES values). Axis variables live in slots of their
 * own, written by the loops that bind them (the element loop, reduction
 * loops) and read by the instructions directly, so VAR nodes cost
 * nothing. */
typedef struct EvalProgram {
    Arena *arena;
    Val *init;
    int nslots;
    int out_slot[RV_MAX_DIMS];    /* the slots of the output axes' variables */
    EvalBlock pred, then_, else_; /* COMPUTE uses then_ only */
    int pred_slot, then_slot, else_slot;
} EvalProgram;

/* Compiles a COMPUTE or COND operation (its inputs must have values);
 * errors name the operation. */
rv_status interp_compile(Interp *in, const Tensor *t, EvalProgram *p);
void interp_program_free(EvalProgram *p);

/* ---- eval.c ---- */

/* Evaluates a COMPUTE or COND operation into `out` (allocated with the
 * tensor's dtype and layout, in canonical order). */
rv_status interp_eval_op(Interp *in, const Tensor *t, rv_array *out);

/* The same one element at a time, in any order (recurse.c evaluates a
 * group's members node by node): begin compiles the operation (COMPUTE,
 * COND or RECURSE; the tensors it reads must have data, though not yet
 * their values), elem evaluates the element at idx and stores it at
 * data[off] in the tensor's dtype, end frees. End after a failed begin. */
typedef struct EvalOp {
    Interp *in;
    const Tensor *t;
    EvalProgram p;
    Val *slots;
} EvalOp;
rv_status interp_op_begin(Interp *in, const Tensor *t, EvalOp *o);
rv_status interp_op_elem(EvalOp *o, const int64_t *idx, void *data, int64_t off);
void interp_op_end(EvalOp *o);

/* ---- recurse.c ---- */

/* Evaluates recursion group r: every member at every node of its
 * structure, each node after its children, members in group order at a
 * node. Errors name the node of a cycle. */
rv_status interp_eval_recurse(Interp *in, const Recurse *r);

/* ---- extern_ref.c ---- */

/* Evaluates an EXTERN operation by its reference implementation. */
rv_status interp_eval_extern(Interp *in, const Tensor *t, rv_array *out);

/* ---- random_scale.c ---- */

/* The fan-in of every tensor of m (by id) as its reads in m give it. */
void interp_random_fanin(const Module *m, double *fanin);
/* What rv_bindings_randomize multiplies input t's uniform [-1, 1) draws by:
 * 1 / sqrt(fan-in) in a program with a recursion group, else 1. */
double interp_random_scale(const Module *m, const double *fanin, const Tensor *t);

/* ---- random_structs.c ---- */

/* Binds a random batch (docs/recursion.md) to every structure of the
 * module whose child and nchild are both unbound, N and B as bound or
 * drawn within their ranges, data columns left unbound (drawn as UFs). */
rv_status interp_draw_structures(rv_bindings *b, uint64_t seed);

/* ---- random.c ---- */

/* splitmix64: small, fast, and good enough for test data. One stream per
 * named object, so what is drawn for X does not depend on what else was
 * bound. */
typedef struct Rng {
    uint64_t state;
} Rng;
Rng interp_rng_for(uint64_t seed, const char *name);
uint64_t interp_rng_next(Rng *r);
/* Uniform in [lo, hi] (lo <= hi), without modulo bias. */
int64_t interp_rng_int(Rng *r, int64_t lo, int64_t hi);
/* Uniform in [-1, 1). */
double interp_rng_unit(Rng *r);

#endif
