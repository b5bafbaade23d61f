/*
 * ir.h — the tensor-expression IR: the map of src/ir.
 *
 * A Module owns everything in one arena: size variables (symbolic extents
 * with declared ranges), uninterpreted functions (UFs: run-time integer
 * arrays with declared value ranges, used as indices and as extents),
 * named dimensions, tensors and the operations that define them, and the
 * schedule steps written next to them (applied by src/sched).
 *
 * Scalar expressions are hash-consed per module: building the same
 * structure twice gives the same pointer, so analyses memoize on pointers.
 * Nodes are immutable. A variable is an Axis: a spatial axis of a tensor or
 * operation, a reduction axis, or a UF argument; its extent is an
 * expression that may mention sizes, UFs and *outer* axes only (that is how
 * ragged layouts and variable loops are written: l < len[b]).
 *
 * Invariants (checked by ir_verify): every expression's dtype follows the
 * typing rules below; axis extents are i64 and use only outer axes; reads
 * have one index per tensor dimension; REDUCE axes are bound by exactly one
 * REDUCE; an operation body uses only its own axes and reduce axes bound
 * above the use.
 *
 * Typing: integer operands are RV_I32 or RV_I64 (mixed -> I64); a float
 * operand makes the result float (f32 with f64 -> f64) and integer operands
 * are converted with an explicit CAST node; integer literals adapt to a
 * float partner without widening it (2 * A[b, l] stays f32). Comparisons
 * and logical operators give RV_BOOL; SELECT needs a BOOL condition.
 */
#ifndef RAVEL_IR_H
#define RAVEL_IR_H

#include <dlpack/dlpack.h>

#include "base/base.h"

typedef struct rv_module Module;
typedef struct rv_expr Expr;
typedef struct rv_size Size;
typedef struct rv_ufun Ufun;
typedef struct rv_axis Axis;
typedef struct rv_dim Dim;
typedef struct rv_tensor Tensor;
typedef struct rv_compute ComputeBuilder;
typedef struct rv_structure Structure;
typedef struct rv_recurse Recurse;
typedef struct Op Op;
typedef struct Buffer Buffer;
typedef struct Storage Storage; /* layout.h */

enum {
    F_ARITH = 1 << 0, /* arithmetic: ints and floats */
    F_INFIX = 1 << 1, /* printed infix */
    F_COMM = 1 << 2,  /* commutative */
    F_CMP = 1 << 3,   /* comparison: result BOOL */
    F_LOGIC = 1 << 4, /* BOOL operands and result */
    F_MATH = 1 << 5,  /* float-only math function */
};

/* How tightly an expression's printed form binds, loosest first: the
 * parser's binary levels, then prefix operators, then atoms. Shared by the
 * .rv printer (print.c) and the loop-IR printer (src/lower/stmt.c). */
typedef enum Prec {
    PREC_NONE,  /* reductions, whose body extends as far right as it can */
    PREC_OR,    /* || */
    PREC_AND,   /* && */
    PREC_EQ,    /* == != */
    PREC_REL,   /* < <= > >= */
    PREC_ADD,   /* + - */
    PREC_MUL,   /* * / % */
    PREC_UNARY, /* - ! and negative literals */
    PREC_ATOM,  /* literals, names, indexing, calls */
} Prec;

typedef enum ExprKind {
#define EXPR(k, text, arity, prec, flags) EX_##k,
#include "ops.def"
#undef EXPR
    EX_COUNT
} ExprKind;

typedef struct ExprInfo {
    const char *name; /* "ADD" */
    const char *text; /* "+" */
    int arity;        /* -1: variadic */
    Prec prec;        /* PREC_ADD */
    int flags;
    const char *libm; /* F_MATH: the C function computing it in double, or NULL */
} ExprInfo;
extern const ExprInfo ir_expr_info[EX_COUNT];

typedef enum AxisKind {
    AX_SPATIAL, /* a dimension of a tensor / data-parallel axis of an operation */
    AX_REDUCE,  /* bound by a REDUCE */
    AX_UFARG,   /* an argument of a UF's domain */
    AX_LOOP,    /* a loop variable of the loop IR (src/lower) */
    AX_COUNT
} AxisKind;

/* A named dimension: the identity shared by tensor dimensions and operation
 * axes (Cortex A.2, CoRa 5.2). Interned by name per module. */
struct rv_dim {
    const char *name;
    int id;
};

struct rv_axis {
    const char *name;
    AxisKind kind;
    Dim *dim;      /* named dimension (spatial axes; NULL otherwise) */
    Expr *extent;  /* i64; may use sizes, UFs and outer axes */
    int pos;       /* position within its tensor / UF / REDUCE */
    Tensor *owner; /* spatial axes: the tensor whose dimension this is */
    Expr *var;     /* the VAR expression of this axis */
    int id;        /* dense, module-unique, in creation order (< m->n_axes) */
};

struct rv_size {
    const char *name;
    int64_t lo, hi; /* inclusive */
    SrcLoc loc;
    int id; /* index in m->sizes */
};

/* ufun name[a0 < e0, ...] in lo..hi */
struct rv_ufun {
    const char *name;
    int nargs;
    Axis **args;    /* AX_UFARG axes; extents may use earlier args */
    Expr *lo, *hi;  /* inclusive value range, over sizes and the UF's own arguments */
    /* The range's bounds over the whole domain, over sizes only (lo and hi
     * themselves when they use no argument): what lowering assumes of the
     * values and compiled code checks; the interpreter checks lo..hi per
     * element. */
    Expr *lo_dom, *hi_dom;
    SrcLoc loc;
    bool complete;  /* rv_ufun_end has run */
    Module *module;
    int id;         /* index in m->ufuns */
};

typedef enum OpKind {
    OP_INPUT,   /* a placeholder bound at run time */
    OP_COMPUTE, /* one expression per output element (may contain REDUCE) */
    OP_COND,    /* if pred then body else else_body, lazily (Cortex's if_then_else) */
    OP_EXTERN,  /* a call to a registered library kernel */
    OP_RECURSE, /* a member of a recursion group: like COMPUTE (COND when pred is set),
                 * over a structure's nodes, reading members at children (recurse.c) */
    OP_COUNT
} OpKind;
extern const char *const ir_op_kind_name[OP_COUNT];

struct Op {
    OpKind kind;
    Tensor *out;
    Expr *body;      /* COMPUTE, COND (then branch) */
    Expr *pred;      /* COND: BOOL over axes, sizes and UFs */
    Expr *else_body; /* COND */
    const char *kernel; /* EXTERN: registered kernel name */
    int nin;            /* EXTERN: tensor arguments */
    Tensor **inputs;
    Recurse *rec;       /* RECURSE: the group */
};

struct rv_tensor {
    const char *name;
    rv_dtype dtype;
    int ndim;
    Axis **axes; /* one AX_SPATIAL axis per dimension; extents may use outer axes */
    int *pad;    /* storage padding multiple per dimension (1 = none) */
    /* bulk padding (a schedule's storage_pad of a fused variable loop):
     * the rows of dimensions 0..bulk_level, all of them together, stored
     * padded to a multiple of bulk (0 or 1: none; Storage.bulk) */
    int bulk, bulk_level;
    Op *op;
    SrcLoc loc;
    bool complete; /* definition finished */
    Module *module;
    int id;        /* index in m->tensors */
    /* An input declared constant across runs (`param`, rv_input_set_param):
     * a program may keep what it derives from the bound array (packed
     * layouts) until the input is bound again. Inputs only. */
    bool param;
};

/* A structure the recursion runs over (Cortex §2, §4.2): the N nodes of
 * a batch of sequences, trees or DAGs as numbered by the linearizer, and
 * the UFs describing them. The language's
 *     structure T : tree(N, 2) { children child, nchild
 *                                roots root[s < B]  data word in 0..9999 }
 * declares child[n < N, k < nchild[n]] in 0..N - 1, nchild[n < N] in 0..K,
 * root[s < B] in 0..N - 1 and word[n < N] in 0..9999. The dynamic batches
 * (levels) of the linearized batch are hidden sizes and UFs with reserved
 * names, bound with the others from an rv_linear, which lowering reads:
 * batch b (b = 0: the leaves) is the nodes batch_begin[b] ..
 * batch_begin[b] + batch_length[b] - 1, and every child of a node of
 * batch b lies in an earlier batch, numbered above the batch's nodes. */
struct rv_structure {
    const char *name;
    rv_struct_kind kind;
    int max_children; /* K (1 for a sequence) */
    Size *nodes;      /* N */
    Ufun *child, *nchild;
    Ufun *root;  /* NULL when not declared */
    Size *count; /* B, with root */
    int ndata;
    Ufun **data; /* [ndata]: the data columns, in order */
    Size *nbatch;                    /* _T_nbatch in 1..N */
    Ufun *batch_begin, *batch_length; /* [b < _T_nbatch] */
    /* trees and sequences (else NULL): the unrolled partition (rv_linear) */
    Size *nunroll;                      /* _T_nunroll in 0..N */
    Ufun *unroll_begin, *unroll_length; /* [u < _T_nunroll] */
    Ufun *unroll_node;                  /* [j < N]: the heads by batch, then the rest */
    SrcLoc loc;
    Module *module;
    int id; /* index in m->structures */
};

/* A recursion group (`recurse R over T { defs }`): tensors defined over
 * T's nodes (axis 0 of each, extent T->nodes) by bodies that read members
 * only at the same node (members defined earlier in the group) or at a
 * child (`h[child[n, e], ...]`), so the group is computed node by node,
 * children first: the interpreter does that naively, lowering level by
 * level (Cortex A.4). recurse.c states and checks the rules. */
struct rv_recurse {
    const char *name;
    Structure *st;
    Vec(Tensor *) members; /* in definition order */
    SrcLoc loc;
    bool complete; /* rv_recurse_end has run */
    Module *module;
    int id; /* index in m->recurses */
};

/* The extern kernels the IR knows (the interpreter holds their reference
 * semantics; codegen maps them to implementations). */
typedef struct ExternKernel {
    const char *name;
    const char *doc; /* one line: argument and output shapes */
    /* Returns NULL if `inputs`/output shapes are acceptable, else a message. */
    const char *(*check)(Op *op);
} ExternKernel;
const ExternKernel *ir_extern_lookup(const char *name);
int ir_extern_count(void);
const ExternKernel *ir_extern_at(int i);

struct rv_expr {
    ExprKind kind;
    rv_dtype dtype;
    int n; /* number of operands */
    uint32_t hash;
    int id; /* module-unique, creation order (deterministic printing) */
    union {
        int64_t ival;  /* CONST_INT */
        double fval;   /* CONST_FLOAT */
        Size *size;    /* SIZE */
        Axis *axis;    /* VAR */
        Tensor *tensor; /* READ */
        Ufun *uf;      /* UFCALL */
        Buffer *buf;   /* LOAD */
        struct {
            rv_reduce_kind rk;
            int naxes;
            Axis **axes;
        } red; /* REDUCE */
    } u;
    Expr *args[]; /* n operands */
};

/* A flat array in the loop IR: a tensor's storage, a UF array, a prelude
 * array, or a temporary. Loads and stores address it by element index. */
typedef enum BufScope {
    BUF_ARG,    /* passed to the kernel: a tensor or UF array */
    BUF_AUX,    /* computed by the prelude from UF arrays (ragged offsets) */
    BUF_GLOBAL, /* a temporary in the per-call scratch arena */
    BUF_LOCAL,  /* a small temporary on the stack / in registers */
    BUF_PACK,   /* kept by the runtime across runs: a param's pack, or its fill flag */
    BUF_COUNT
} BufScope;
struct Buffer {
    const char *name;
    rv_dtype dtype;
    Expr *size; /* elements (i64); may use sizes and UF-derived values */
    BufScope scope;
    Tensor *tensor; /* the tensor it stores, if any */
    Ufun *uf;       /* the UF it holds, if any */
    const Storage *storage; /* a tensor's or UF's buffer: its storage order */
    int id;
    /* A fused variable loop's row map (src/lower/vfuse.c): row[x] = r
     * where start[r] <= x < start[r + 1], r < rowmap_count; and, where it
     * is known, the extent start[r + 1] - start[r] as an expression over
     * rowmap_r (the simplifier's facts about fused loops, interval.c). */
    Buffer *rowmap_start;
    Expr *rowmap_count, *rowmap_ext;
    Axis *rowmap_r;
    /* the fused loop (an IterVar) whose arrays it is and which: its row
     * starts of level vfuse_level, or its row map (-1); the lowering
     * remaps a region the bounds pass inferred with its own arrays */
    const void *vfuse_key;
    int vfuse_level;
    /* the largest value its elements take (row starts: the level's number
     * of tuples; the row map: the prefixes'), over sizes and declared
     * ranges, for interval.c; NULL when unbounded */
    Expr *vfuse_hi;
    /* BUF_PACK (lower/attach.c, kept_pack): the pack's contents depend on
     * the param input pack_of alone; pack_fill is its flag, an i32 buffer
     * of two elements: [0] the runtime sets to 1 when the kept contents
     * are stale (the pack's nest then fills them), 0 otherwise; [1] is 0
     * on entry, and a pack that pack_reports (copied in the first
     * iteration of a loop that may run none) sets it to 1 once filled, so
     * the runtime keeps only a filled copy. The flag itself has neither. */
    Tensor *pack_of;
    Buffer *pack_fill;
    bool pack_reports;
};

/* One schedule primitive as written (`io, ii = split(i, 32)`); src/sched
 * gives them meaning. Arguments are identifiers, integers or strings,
 * positional or with a keyword (`pad=16`). */
typedef enum SchedArgKind { SA_IDENT, SA_INT, SA_STRING, SA_COUNT } SchedArgKind;
typedef struct SchedArg {
    SchedArgKind kind;
    const char *key; /* keyword argument `key=value` (cache_read(X, pad=16)); NULL if positional */
    const char *s;   /* IDENT, STRING */
    int64_t i;       /* INT */
    SrcLoc loc;
} SchedArg;
typedef struct SchedStep {
    const char *prim;
    int nout;
    const char **outs;
    int nargs;
    SchedArg *args;
    SrcLoc loc;
} SchedStep;
typedef struct SchedBlock {
    /* The stage the steps apply to: a tensor of the module (target set) or
     * a stage an earlier block created (cache_read/cache_write outputs;
     * target NULL), resolved by src/sched. */
    const char *name;
    SrcLoc name_loc;
    Tensor *target;
    const SrcFile *src; /* the text the steps come from (NULL: the module's) */
    int nsteps;
    SchedStep *steps;
    SrcLoc loc;
    Recurse *group; /* the block of a recursion group (`schedule R`; target NULL) */
} SchedBlock;

struct rv_module {
    Arena *arena;
    Interner names;
    /* hash-cons table: open addressing over Expr pointers */
    Expr **table;
    int table_len, table_cap;
    int n_exprs; /* Expr ids are 0..n_exprs-1 */
    int n_axes;  /* Axis ids are 0..n_axes-1 (interpreters index arrays by them) */
    int n_buffers;
    Vec(Size *) sizes;
    Vec(Ufun *) ufuns;
    Vec(Tensor *) tensors; /* definition order: inputs and operations */
    Vec(Structure *) structures;
    Vec(Recurse *) recurses; /* definition order; members are in tensors too */
    Vec(Dim *) dims;
    Vec(SchedBlock) scheds;
    /* the outputs a program names (`output h, y`), in its order; empty:
     * every computed tensor no later operation reads (ir_tensor_is_output) */
    Vec(Tensor *) outputs;
    StrMap by_name; /* size, ufun and tensor names -> object (one namespace) */
    PtrMap kind_of; /* object of by_name -> its NameKind + 1 (lookups by kind in O(1)) */
    StrMap dim_by_name;
    SrcFile *src; /* the source file a module was parsed from, if any */
};

/* ---- expr.c: construction, hash-consing and typing ---- */

/* Low-level constructors: they check types and return NULL with the last
 * error set (RV_ERR_TYPE) on a mismatch; NULL operands give NULL quietly. */
Expr *ir_int(Module *m, int64_t v);           /* RV_I64 literal */
Expr *ir_const_int(Module *m, rv_dtype t, int64_t v);
Expr *ir_float(Module *m, rv_dtype t, double v);
Expr *ir_bool(Module *m, bool v);             /* (1 == 1) / (1 == 0) folded to CONST_INT of BOOL */
Expr *ir_size(Module *m, Size *s);
Expr *ir_var(Module *m, Axis *a);
Expr *ir_unary(Module *m, ExprKind k, Expr *a);
Expr *ir_binary(Module *m, ExprKind k, Expr *a, Expr *b);
Expr *ir_select(Module *m, Expr *c, Expr *a, Expr *b);
Expr *ir_cast(Module *m, rv_dtype t, Expr *a);
Expr *ir_read(Module *m, Tensor *t, int n, Expr *const *idx);
Expr *ir_ufcall(Module *m, Ufun *f, int n, Expr *const *args);
Expr *ir_reduce(Module *m, rv_reduce_kind rk, int naxes, Axis *const *axes, Expr *body);
/* A reduction's source name ("sum", "argmax"), and the kind named `name`
 * (false when none is). */
const char *ir_reduce_name(rv_reduce_kind rk);
bool ir_reduce_kind_of(const char *name, rv_reduce_kind *rk);
/* Loop IR: an element of buffer `b` at flat index `idx` (i64). */
Expr *ir_load(Module *m, Buffer *b, Expr *idx);
Buffer *ir_buffer_new(Module *m, const char *name, rv_dtype t, Expr *size, BufScope scope);
/* The node with the same kind and payload as `e` but new operands (passes). */
Expr *ir_rebuild(Module *m, const Expr *e, Expr *const *args);
/* Replaces axis variables by expressions (map: Axis* -> Expr*), in the
 * extents of reduction axes too (such a reduction gets new axes). */
Expr *ir_substitute(Module *m, Expr *e, const PtrMap *map);
/* The same, every reduction given new axes: a copy of e that shares no
 * reduction axis with e (inlining one tensor at several reads). */
Expr *ir_substitute_fresh(Module *m, Expr *e, const PtrMap *map);
bool ir_is_const_int(const Expr *e, int64_t *v);
/* Interval bounds of an integer expression over the declared ranges of
 * sizes, UF values and axis extents; false when unknown (or empty). */
bool ir_int_bounds(const Expr *e, int64_t *lo, int64_t *hi);
/* The same, telling an unknown range from an empty one: EMPTY when the
 * expression mentions an axis whose extent is below 1 for every binding
 * (`b < a` with `a < 1`), so it is never evaluated. */
typedef enum IrRange { IR_RANGE_UNKNOWN, IR_RANGE_EMPTY, IR_RANGE_KNOWN } IrRange;
IrRange ir_int_range(const Expr *e, int64_t *lo, int64_t *hi);
/* An expression bounding e from above (upper) or below for every value of
 * axes[0..n) within their extents, free of those axes (e itself when it
 * uses none); NULL when unknown. */
Expr *ir_bound_over_axes(Module *m, Expr *e, Axis *const *axes, int n, bool upper);
/* True when `e` mentions axis `a` (memoized per call; cheap on DAGs). */
bool ir_uses_axis(const Expr *e, const Axis *a);
/* Uses a, or an axis whose extent depends on a (`k < i + 1` depends on i). */
bool ir_depends_on_axis(const Expr *e, const Axis *a);
/* The coefficient of axis a in the integer expression x when x is
 * coeff * a plus terms free of a, coeff free of a too (unsimplified; 0
 * when x does not mention a); NULL when x is not of that form (a under a
 * division, a product of two terms using a, a load). */
Expr *ir_linear_coeff(Module *m, Expr *x, const Axis *a);
/* Calls fn on every node once, children before parents; the extents of a
 * reduction's axes count among its children. */
void ir_visit(const Expr *e, void (*fn)(const Expr *e, void *ctx), void *ctx);

/* ---- module.c: sizes, UFs, dims, tensors, operations ---- */

Dim *ir_dim(Module *m, const char *name); /* interned by name */
Axis *ir_axis_new(Module *m, const char *name, AxisKind k, Expr *extent);
const char *ir_name(Module *m, const char *s); /* intern */
/* The kinds of object in the module's single namespace. */
typedef enum NameKind {
    NAME_TENSOR, /* Tensor* */
    NAME_SIZE,   /* Size* */
    NAME_UFUN,   /* Ufun* */
    NAME_STRUCT, /* Structure* */
    NAME_RECURSE, /* Recurse* */
    NAME_COUNT
} NameKind;
/* Registers an object name in the module's single namespace; RV_ERR_TYPE
 * "redefinition of X" if taken. */
rv_status ir_declare(Module *m, const char *name, void *obj, NameKind k);
/* The object named `name` if it is of kind k (and still the module's),
 * else NULL. */
void *ir_lookup(const Module *m, const char *name, NameKind k);
/* Inference of omitted compute extents: the extent of the first tensor
 * dimension that `a` indexes as a bare variable, with that tensor's outer
 * axes replaced by the indices of the read. NULL if `a` never appears so. */
Expr *ir_infer_extent(Module *m, Expr *body, Axis *a);
/* The tensors an operation reads (READ targets and EXTERN inputs), in order
 * of first use, without duplicates. */
int ir_op_inputs(const Op *op, Tensor ***out);
/* The same over parts: the tensors `extra` (n_extra of them), then the
 * READ targets of es[0..n_es) (NULL entries skipped), each once, in order
 * of first use. The caller base_frees *out. */
int ir_collect_reads(Tensor *const *extra, int n_extra, Expr *const *es, int n_es, Tensor ***out);
/* The program's outputs: the tensors it names (m->outputs) when it names
 * any, else the computed tensors that no later operation reads. */
bool ir_tensor_is_output(const Module *m, const Tensor *t);
/* Why `t` cannot be named an output of m (an input, another module's
 * tensor, already named; m->outputs are the names so far), NULL when it
 * can: the checker, rv_module_add_output and the verifier share the rule. */
const char *ir_output_error(const Module *m, const Tensor *t, const Tensor *const *named, int n);
/* The dtype of a UF's value array: i32 when the declared value range fits
 * (half the bytes), else i64. Lowering, the runtime and AOT code agree on it. */
rv_dtype ir_ufun_dtype(const Ufun *f);

/* The builder of a compute definition (rv_compute_begin .. _end) or of a
 * recursion group's member (rv_recurse_add .. rv_recurse_define). */
struct rv_compute {
    Module *m;
    Tensor *t;
    bool has_dtype;
    rv_dtype dtype;
};

/* ---- recurse.c: structures and recursion groups ---- */

/* Why a read `rd` (an EX_READ of a member of r) inside the body of member
 * `reader` (NULL: a tensor outside the group) breaks the recursion rules,
 * or NULL when it is allowed. Inside the group a member is read at
 * index 0 either at the reader's node axis itself (then the member must
 * be defined before the reader: same-node reads are acyclic) or at
 * `child[n, e]` of the group's structure (P.2: recursive reads only at
 * children, which also keeps siblings independent, P.3); no index of such
 * a read may read a tensor (P.1: the structure alone decides what is
 * read). Reads from outside the group are unrestricted. The front end
 * calls it at each read to locate the message; rv_recurse_end calls it on
 * every read. */
const char *ir_recurse_read_error(const Recurse *r, const Tensor *reader, const Expr *rd);
/* Why reduction `red` inside a member's body breaks P.1 (an axis extent
 * reads a tensor), or NULL. */
const char *ir_recurse_extent_error(const Recurse *r, const Expr *red);
/* The group of t when t is a member, else NULL. */
static inline Recurse *ir_tensor_recurse(const Tensor *t) {
    return t->op && t->op->kind == OP_RECURSE ? t->op->rec : NULL;
}
/* Is e (an index) `child[n, ...]` of structure st with n the given axis? */
bool ir_is_child_of(const Structure *st, const Expr *e, const Axis *n);
/* The first tensor read in e (with ufs, or ufun application), pre-order;
 * NULL if there is none. */
const Expr *ir_first_read(const Expr *e, bool ufs);

/* ---- scope.c: the IR of one compilation, dropped when it ends ---- */

/* Between ir_scope_begin and ir_scope_end every allocation through the
 * module (m->arena: expressions, axes, buffers, schedule stages, loop IR,
 * kernels) goes to the scope's arena, and ir_scope_end frees it, takes
 * the scope's expressions out of the hash-cons table and resets the id
 * counters: the module is as it was. Nothing made in the scope may be used
 * after it ends except what IrKeep copied out. Scopes nest. */
typedef struct IrScope {
    Module *m;
    Arena *arena; /* the scope's */
    Arena *outer; /* m->arena before the scope */
    int n_exprs, n_axes, n_buffers, n_dims; /* the counters at the start */
} IrScope;
void ir_scope_begin(Module *m, IrScope *s);
void ir_scope_end(IrScope *s);

/* Copies of the scope's objects that outlive it, in `arena`: an
 * expression, buffer (with its size and storage order) or anything they
 * reference that was made in the scope is copied once (shared structure
 * stays shared; the copies are not hash-consed and are only evaluated),
 * what was made before the scope is returned as is. Use before
 * ir_scope_end. */
typedef struct IrKeep {
    const IrScope *s;
    Arena *arena;
    PtrMap copies; /* scope object -> its copy */
} IrKeep;
void ir_keep_init(IrKeep *k, const IrScope *s, Arena *arena);
void ir_keep_free(IrKeep *k);
Expr *ir_keep_expr(IrKeep *k, Expr *e);
Buffer *ir_keep_buffer(IrKeep *k, Buffer *b);

/* ---- extern.c: registered extern kernels ---- */
/* (declared above with ExternKernel) */

/* ---- print.c: the module as .rv source (round-trips through lang) ---- */

void ir_print_expr(Buf *b, const Expr *e);
void ir_print_module(Buf *b, const Module *m);
/* One schedule block as `.rv` text (what ir_print_module prints for each). */
void ir_print_schedule(Buf *b, const SchedBlock *blk);
/* A reduction as `sum(k < K, l < L) body`, the extents and the body
 * printed by `print` at the given level: the form the .rv printer and the
 * loop-IR printer share (a missing extent prints as `?`). */
typedef void (*IrPrintFn)(Buf *b, const Expr *e, int minprec);
void ir_print_reduce(Buf *b, const Expr *e, IrPrintFn print);
/* The shortest "%g" form of finite v that reads back (strtod, then rounded
 * to t) as v: the digits every printer of a float constant starts from. */
void ir_float_shortest(char s[32], double v, rv_dtype t);
char *ir_expr_str(const Expr *e); /* base_free the result */

/* ---- dtype.c: facts about the scalar types ---- */

/* rv_dtype_name and rv_dtype_size are public (ravel.h). */
bool ir_dtype_valid(rv_dtype t);
bool ir_is_int(rv_dtype t);   /* i32, i64 */
bool ir_is_float(rv_dtype t); /* f32, f64 */
/* The range of an integer dtype, and whether v lies in it (inline: the
 * interpreter checks every i32 result). */
static inline int64_t ir_dtype_min(rv_dtype t) {
    return t == RV_I32 ? INT32_MIN : INT64_MIN;
}
static inline int64_t ir_dtype_max(rv_dtype t) {
    return t == RV_I32 ? INT32_MAX : INT64_MAX;
}
static inline bool ir_dtype_fits(rv_dtype t, int64_t v) {
    return v >= ir_dtype_min(t) && v <= ir_dtype_max(t);
}
/* The DLPack dtype of an rv_dtype (bool: code 6, 8 bits, as DLPack >= 0.8's
 * kDLBool). */
DLDataType ir_dtype_to_dl(rv_dtype t);

/* ---- array.c: host arrays ---- */

/* An rv_array is the host-side tensor every layer hands around: dtype,
 * shape and contiguous row-major data, 64-byte aligned so generated SIMD
 * code may use aligned loads. It carries a DLTensor describing itself
 * (data, CPU device, dtype, ndim, shape pointing at the array's own shape,
 * strides NULL = compact row-major), so a kernel or a foreign framework can
 * take the array as a DLTensor without building one.
 *
 * Ownership: an array owns its data (block) unless it was made from a
 * DLManagedTensor without copying; then it holds the managed tensor and
 * calls its deleter when freed. Shapes and dtypes never change after
 * creation, so the fields below may be read directly within src/. The
 * accessors and element access are public (ravel.h). */
#define IR_ARRAY_ALIGN 64 /* bytes; the alignment of every array's data */

struct rv_array {
    DLTensor dl; /* the DLPack view; dl.data is the data */
    rv_dtype dtype;
    int ndim;
    int64_t shape[RV_MAX_DIMS]; /* dl.shape points here */
    int64_t numel;              /* product of shape (1 for ndim 0) */
    size_t nbytes;              /* numel * rv_dtype_size(dtype) */
    void *block;                /* owned allocation holding the data, or NULL */
    size_t cap;                 /* bytes of data block has room for (>= nbytes); 0 without */
    DLManagedTensor *owner;     /* borrowed from DLPack: deleted on free, or NULL */
};

/* Fills an array header for ndim/shape without allocating data: checks
 * the dtype, rank and extents and computes numel and nbytes. RV_ERR_ARG
 * (with a message) on a bad description, including a size overflow. */
rv_status ir_array_init(rv_array *a, rv_dtype t, int ndim, const int64_t *shape);

/* Gives an array that owns its data (rv_array_new) a new dtype and shape
 * in the block it has when that block has room for them; the values are
 * then whatever the block held. false, the array unchanged, when it does
 * not own its data or the block is too small. */
bool ir_array_refit(rv_array *a, rv_dtype t, int ndim, const int64_t *shape);

/* ---- verify.c ---- */

rv_status ir_verify(const Module *m);

#endif
