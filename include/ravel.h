/*
 * ravel.h — the public API of ravel, a compiler and runtime for dynamic
 * neural networks (recursive models, ragged tensors, dynamic control flow,
 * dynamic shapes).
 *
 * TUTORIAL
 * --------
 * A program is a *module*: size variables with declared ranges, uninterpreted
 * functions (integer arrays known only at run time, with declared value
 * ranges), input tensors, and compute definitions. You can write it in the
 * ravel language (docs/language.md) and load it, or build it through this API:
 *
 *     // size T in 1..128
 *     // input X : f32[16*T, 768]      input W : f32[2304, 768]
 *     // Y[i, j] = sum(k < 768) X[i, k] * W[j, k]
 *     rv_module *m = rv_module_new();
 *     rv_size *T = rv_size_new(m, "T", 1, 128);
 *     rv_expr *rows = rv_expr_mul(m, rv_expr_int(m, 16), rv_expr_size(m, T));
 *     rv_dimspec xd[2] = {{"i", rows, 1}, {"k", rv_expr_int(m, 768), 1}};
 *     rv_tensor *X = rv_input_new(m, "X", RV_F32, 2, xd);
 *     rv_dimspec wd[2] = {{"j", rv_expr_int(m, 2304), 1}, {"k", rv_expr_int(m, 768), 1}};
 *     rv_tensor *W = rv_input_new(m, "W", RV_F32, 2, wd);
 *
 *     const char *names[2] = {"i", "j"};
 *     rv_compute *c = rv_compute_begin(m, "Y", 2, names, NULL); // extents inferred
 *     rv_axis *k = rv_reduce_axis_new(m, "k", rv_expr_int(m, 768));
 *     rv_expr *xi[2] = {rv_compute_var(c, 0), rv_expr_axis(m, k)};
 *     rv_expr *wi[2] = {rv_compute_var(c, 1), rv_expr_axis(m, k)};
 *     rv_expr *prod = rv_expr_mul(m, rv_expr_read(m, X, 2, xi), rv_expr_read(m, W, 2, wi));
 *     rv_tensor *Y = rv_compute_end(c, rv_expr_reduce(m, RV_REDUCE_SUM, 1, &k, prod));
 *     if (!Y) fprintf(stderr, "%s\n", rv_last_error());
 *
 * Every builder returns NULL on a user error (a type mismatch, an unknown
 * name, an extent that depends on an inner dimension, ...) and records a
 * message; builders given NULL operands return NULL quietly, so a whole
 * program can be built and checked once at the end.
 *
 * Evaluate it with the reference interpreter (double precision, the oracle
 * for every compiled kernel):
 *
 *     rv_bindings *b = rv_bindings_new(m);
 *     rv_bindings_set_size(b, "T", 3);
 *     rv_bindings_set_array(b, "X", x);      // an rv_array, e.g. rv_npy_load
 *     rv_bindings_set_array(b, "W", w);
 *     if (rv_interp_run(m, b) != RV_OK) fprintf(stderr, "%s\n", rv_last_error());
 *     const rv_array *y = rv_bindings_get_array(b, "Y");
 *
 * Errors: every fallible function returns an rv_status (or NULL) and leaves
 * a message, with a source location where one exists, in rv_last_error()
 * (thread-local). Library code never exits the process.
 */
#ifndef RAVEL_H
#define RAVEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --------------------------------------------------------------- version */

/* The one place the version is written: the Makefile reads these lines for
 * the shared library's names (SONAME libravel.so.MAJOR) and ravel.pc.
 * MAJOR changes when the library's ABI does. */
#define RV_VERSION_MAJOR 0
#define RV_VERSION_MINOR 1
#define RV_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library the program runs with, which may be
 * newer than the RV_VERSION_* it was compiled with. */
const char *rv_version(void);

/* sizeof the library's public struct `name` ("rv_compile_options",
 * "rv_program_counters", "rv_linear",
 * "rv_array_info"), 0 for another name. A binding that
 * mirrors a struct (the Python package's ctypes declarations) checks its
 * copy against the library it loaded, so a struct that gained a field is
 * an error at load time instead of a write past the caller's memory. */
size_t rv_struct_size(const char *name);

/* ---------------------------------------------------------------- status */

typedef enum rv_status {
    RV_OK = 0,
    RV_ERR_SYNTAX,      /* malformed source */
    RV_ERR_TYPE,        /* names, arity, dtypes, extents: the checker */
    RV_ERR_SHAPE,       /* arguments whose shape disagrees with the program */
    RV_ERR_BOUNDS,      /* an index or UF value outside its declared range */
    RV_ERR_SCHEDULE,    /* an illegal schedule primitive */
    RV_ERR_ARG,         /* a bad argument to an API call */
    RV_ERR_IO,          /* a file could not be read or written, or is corrupt */
    RV_ERR_COMPILER,    /* the C compiler or NVRTC failed */
    RV_ERR_OOM,         /* out of memory */
    RV_ERR_UNSUPPORTED, /* valid, but not implemented for this target */
    RV_STATUS_COUNT
} rv_status;

/* The message of the last failure on this thread ("" if none). */
const char *rv_last_error(void);
const char *rv_status_name(rv_status st);

/* ---------------------------------------------------------------- dtypes */

typedef enum rv_dtype {
    RV_BOOL, /* results of comparisons; not a tensor element type */
    RV_I32,
    RV_I64, /* the index type: sizes, axis variables, UF values */
    RV_F32,
    RV_F64,
    RV_DTYPE_COUNT
} rv_dtype;

const char *rv_dtype_name(rv_dtype t); /* "f32", ... */
size_t rv_dtype_size(rv_dtype t);      /* bytes; RV_BOOL is 1 */

/* ---------------------------------------------------------------- arrays */

/* A host array: dtype, shape and contiguous row-major data. A ragged
 * tensor's array is one-dimensional and holds its elements in storage order
 * (docs/language.md, "Ragged layouts"). */
typedef struct rv_array rv_array;

#define RV_MAX_DIMS 8

rv_array *rv_array_new(rv_dtype t, int ndim, const int64_t *shape); /* zeroed */
void rv_array_free(rv_array *a);
rv_dtype rv_array_dtype(const rv_array *a);
int rv_array_ndim(const rv_array *a);
const int64_t *rv_array_shape(const rv_array *a);
int64_t rv_array_numel(const rv_array *a);
void *rv_array_data(rv_array *a);
const void *rv_array_cdata(const rv_array *a);
/* Element i (flat index) converted to double / int64. */
double rv_array_get_f64(const rv_array *a, int64_t i);
int64_t rv_array_get_i64(const rv_array *a, int64_t i);
void rv_array_set_f64(rv_array *a, int64_t i, double v);
void rv_array_set_i64(rv_array *a, int64_t i, int64_t v);
/* An array's data, dtype, rank and shape at once: what a language binding
 * needs to view an array in its own type (the Python package reads each
 * result with one foreign call instead of four). */
typedef struct rv_array_info {
    void *data;
    int64_t shape[RV_MAX_DIMS]; /* the first ndim entries */
    rv_dtype dtype;
    int ndim;
} rv_array_info;
void rv_array_get_info(const rv_array *a, rv_array_info *out);

/* The alignment of every array's data in bytes (a cache line and an
 * AVX-512 vector): kernels assume it. */
#define RV_ARRAY_ALIGN 64

/* Wraps the caller's buffer without a copy: data holds the compact
 * row-major (C order, no strides, no gaps) elements of shape and must be
 * RV_ARRAY_ALIGN-byte aligned and not NULL unless the shape has no
 * elements (RV_ERR_ARG otherwise, as for a bad dtype or shape). The caller keeps the buffer: it must outlive the
 * array, and rv_array_free releases only the array's header. Use it for
 * inputs (rv_bindings_set_array borrows arrays, so nothing is copied) and
 * for rv_program_run_into's outputs. */
rv_status rv_array_wrap(rv_dtype t, int ndim, const int64_t *shape, void *data, rv_array **out);

/* DLPack interchange (dlpack/dlpack.h's DLManagedTensor; src/runtime/
 * dlpack.c): from_dlpack takes a CPU, compact row-major tensor of another
 * framework (or the caller's own buffer), borrowing its data when 64-byte
 * aligned (mt's deleter runs when the array is freed) and copying it
 * otherwise (the deleter runs at once); on failure (RV_ERR_ARG) the caller
 * keeps mt. to_dlpack hands an array over (NULL when out of memory). */
struct DLManagedTensor;
rv_status rv_array_from_dlpack(struct DLManagedTensor *mt, rv_array **out);
struct DLManagedTensor *rv_array_to_dlpack(rv_array *a);

/* NumPy .npy files: little-endian f32/f64/i32/i64, C order, version 1-3. */
rv_status rv_npy_load(const char *path, rv_array **out);
rv_status rv_npy_save(const char *path, const rv_array *a);

/* Weights files: safetensors (F32/F64/I32/I64 tensors; F16 and BF16 are
 * widened to f32, exactly; other dtypes are RV_ERR_UNSUPPORTED naming the
 * tensor when it is loaded) and .npz archives of .npy files written by
 * np.savez (stored, not compressed). The file is checked whole when opened; every corruption is RV_ERR_IO naming the file
 * and, where there is one, the tensor. Tensors are read on demand. */
typedef struct rv_weights rv_weights;
rv_status rv_weights_open(const char *path, rv_weights **out);
void rv_weights_close(rv_weights *w);
int rv_weights_count(const rv_weights *w);
/* The i-th tensor's name, in name order; NULL out of range. */
const char *rv_weights_name(const rv_weights *w, int i);
/* A new array (the caller frees it) holding the tensor called `name`. */
rv_status rv_weights_load(rv_weights *w, const char *name, rv_array **out);

/* ------------------------------------------------------------------- IR */

typedef struct rv_module rv_module;
typedef struct rv_expr rv_expr;
typedef struct rv_size rv_size;
typedef struct rv_ufun rv_ufun;
typedef struct rv_axis rv_axis;
typedef struct rv_dim rv_dim;
typedef struct rv_tensor rv_tensor;
typedef struct rv_compute rv_compute;

rv_module *rv_module_new(void);
void rv_module_free(rv_module *m);

/* Loads a .rv source file into a fresh module (parse + check). */
rv_status rv_module_load(const char *path, rv_module **out);
/* The same from memory; `name` is used in diagnostics. */
rv_status rv_module_parse(const char *name, const char *text, rv_module **out);
/* The module as ravel source text; it parses back to the same IR.
 * Caller frees with rv_free. */
char *rv_module_print(const rv_module *m);
/* Checks every invariant of the IR; RV_ERR_TYPE with a message on failure. */
rv_status rv_module_verify(const rv_module *m);
void rv_free(void *p);

/* Schedules say how tensors are computed (loops, tiles, placement); they
 * never change what is computed. They are written next to the definitions
 * (`schedule Y { io, ii = split(i, 32) ... }`, docs/language.md lists the
 * primitives) or added here as the same text, and applied in order when a
 * program is compiled. rv_module_schedule appends a block: its syntax is
 * checked now, its steps when the schedule is applied. */
rv_status rv_module_schedule(rv_module *m, const char *target, const char *steps);
/* Applies every schedule block to the default schedule and reports the
 * first illegal step (RV_ERR_SCHEDULE, located at the step). It also lowers
 * the schedule (no code is generated), so what only bounds inference can
 * tell (a padded stage whose tiles would read outside a tensor) is
 * reported here too, located at the step that placed the stage. */
rv_status rv_module_check_schedule(rv_module *m);
/* The applied schedule as a replayable trace of steps followed by one
 * comment line per stage (its loops and placement); NULL with the error
 * when a step is illegal. Free with rv_free. */
char *rv_module_schedule_trace(rv_module *m);

/* A size variable with an inclusive declared range: `size T in 1..128`. */
rv_size *rv_size_new(rv_module *m, const char *name, int64_t lo, int64_t hi);
/* An uninterpreted function `ufun name[a0 < e0, a1 < e1, ...] in lo..hi`:
 * nargs arguments with extents (each may use earlier arguments, through
 * rv_ufun_arg), values within [lo, hi] (expressions over sizes).
 * Build it in two steps so extents can mention earlier arguments. */
rv_ufun *rv_ufun_begin(rv_module *m, const char *name, int nargs, const char *const *arg_names);
rv_expr *rv_ufun_arg(rv_ufun *f, int i);
rv_ufun *rv_ufun_end(rv_ufun *f, rv_expr *const *extents, rv_expr *lo, rv_expr *hi);

/* A tensor dimension: its name (which names the dimension, DESIGN.md
 * "named dimensions"), its extent, and a storage padding multiple (1 = none).
 * Extents that mention earlier dimensions of the same tensor (ragged layouts:
 * l < len[b]) use the two-step form, rv_input_begin / rv_input_var /
 * rv_input_end. */
typedef struct rv_dimspec {
    const char *name;
    rv_expr *extent;
    int pad;
} rv_dimspec;

/* Inputs whose extents mention earlier dimensions use the two-step form. */
rv_tensor *rv_input_new(rv_module *m, const char *name, rv_dtype t, int ndim,
                        const rv_dimspec *dims);
rv_tensor *rv_input_begin(rv_module *m, const char *name, rv_dtype t, int ndim,
                          const char *const *dim_names);
rv_expr *rv_input_var(rv_tensor *t, int dim);
rv_tensor *rv_input_end(rv_tensor *t, rv_expr *const *extents, const int *pads);
/* Declares input t constant across runs (on = 1; `param` in the language): a
 * model parameter, such as a weight matrix. The promise lets a compiled
 * program keep data it derives from the bound array (a schedule's packed
 * layout of it, cache_read(W, layout=...)) from one run to the next: it
 * derives them again only when the input is bound again
 * (rv_bindings_set_array, which counts as a new binding even with the same
 * array: each binding gets a stamp of its own) or the program is told
 * (rv_program_invalidate). A caller that writes into a param's memory in
 * place must therefore bind it again (or invalidate the program) before
 * the next run; otherwise runs may use what was derived from the old
 * contents. RV_ERR_ARG if t is
 * not an input. */
rv_status rv_input_set_param(rv_tensor *t, int on);

/* Compute definitions: begin with the axis names (and extents; a NULL array
 * or NULL entry means "infer from the body": the extent of the first tensor
 * dimension the bare axis variable indexes), build the body with
 * rv_compute_var, end with the body. */
rv_compute *rv_compute_begin(rv_module *m, const char *name, int ndim,
                             const char *const *axis_names, rv_expr *const *extents);
rv_expr *rv_compute_var(rv_compute *c, int i);
rv_tensor *rv_compute_end(rv_compute *c, rv_expr *body);
/* A conditional operation: where `pred` (over indices, sizes and UFs only)
 * holds the element is `then_body`, elsewhere `else_body`; only the chosen
 * branch is evaluated, so each may read what is valid under its condition. */
rv_tensor *rv_compute_end_cond(rv_compute *c, rv_expr *pred, rv_expr *then_body,
                               rv_expr *else_body);
/* The extent of axis i when it mentions earlier axes (`l < len[b]`: build
 * it with rv_compute_var after begin). Overrides the extent given to begin. */
void rv_compute_set_extent(rv_compute *c, int i, rv_expr *extent);
/* Optional element dtype for a compute (default: the body's dtype). */
void rv_compute_set_dtype(rv_compute *c, rv_dtype t);
/* Storage padding for output dimension i. */
void rv_compute_set_pad(rv_compute *c, int i, int pad);

/* An extern operation: a call to a named library kernel with tensor
 * arguments and a declared output (registered kernels: docs/ir.md). */
rv_tensor *rv_extern_new(rv_module *m, const char *name, const char *kernel, int nin,
                         rv_tensor *const *inputs, rv_dtype t, int ndim, const rv_dimspec *dims);

/* ---- recursion (Cortex; docs/recursion.md)
 *
 * A structure declares the pointer-linked inputs a recursion runs over:
 * the nodes of a batch of sequences, trees or DAGs, numbered 0..N-1 by the
 * linearizer (N a size), and the UFs that describe them:
 *     child[n < N, k < nchild[n]] in 0..N - 1   n's k-th child
 *     nchild[n < N] in 0..K                      its number of children
 *     root[s < B] in 0..N - 1                    structure s's root (optional)
 *     word[n < N] in lo..hi                      a column of per-node data
 * (`structure T : tree(N, 2) { children child, nchild  roots root[s < B]
 * data word in 0..9999 }` in the language). A recursion group defines
 * tensors over the structure's nodes that read themselves and each other
 * at children (`h[child[n, k], i]`) or, for members defined earlier in the
 * group, at the same node (`hs[n, i]`). rv_recurse_end checks the
 * properties that make static lowering sound (Cortex §2, P.1-P.3).
 * Structures are bound at run time from a linearized batch
 * (rv_bindings_set_linear), which also binds the dynamic batches the
 * compiled loops follow. */
/* The kinds of structure (the runtime batches below use them too). */
typedef enum rv_struct_kind {
    RV_STRUCT_SEQUENCE, /* chains (K must be 1): at most one child and one parent */
    RV_STRUCT_TREE,     /* every node but the root has exactly one parent */
    RV_STRUCT_DAG,      /* nodes may share children; trees and chains are DAGs too */
    RV_STRUCT_KIND_COUNT
} rv_struct_kind;
typedef struct rv_structure rv_structure;
typedef struct rv_recurse rv_recurse;

/* A structure over the nodes `nodes` (a size) with at most max_children
 * children per node (1 for RV_STRUCT_SEQUENCE), declaring the UFs `child`
 * and `nchild`. */
rv_structure *rv_structure_new(rv_module *m, const char *name, rv_struct_kind kind,
                               rv_size *nodes, int max_children, const char *child,
                               const char *nchild);
/* Declares the UF `root[s < count]` of the structures' roots. */
rv_ufun *rv_structure_set_roots(rv_structure *s, const char *root, rv_size *count);
/* Declares a data column `name[n < N] in lo..hi` (lo, hi over sizes); the
 * columns are the linearized batch's data columns, in order. */
rv_ufun *rv_structure_add_data(rv_structure *s, const char *name, rv_expr *lo, rv_expr *hi);
rv_structure *rv_module_structure(const rv_module *m, const char *name);
/* What a batch bound to the structure must be (rv_structs_new's arguments
 * for it): its kind, K and number of data columns, so a caller that loads
 * a model from a .rv file builds batches that fit it without knowing the
 * file. The kind of NULL is RV_STRUCT_KIND_COUNT, its counts -1. */
rv_struct_kind rv_structure_kind(const rv_structure *s);
int rv_structure_max_children(const rv_structure *s);
int rv_structure_num_data(const rv_structure *s);

/* A recursion group over structure s. Declare every member first (so
 * bodies can read members defined later), then define each, then end. */
rv_recurse *rv_recurse_begin(rv_module *m, const char *name, rv_structure *s);
/* A member `name[n, a1 < e1, ...]` of dtype t: axis 0 is the node axis
 * (its extent is the structure's size; extents[0] is ignored), the others
 * need explicit extents that do not use the node axis. Build its body
 * with rv_compute_var as for a compute. */
rv_compute *rv_recurse_add(rv_recurse *r, const char *name, rv_dtype t, int ndim,
                           const char *const *axis_names, rv_expr *const *extents);
/* Defines a member: its body, or with pred non-NULL a conditional body
 * (`if pred then body else else_body`, pred over indices, sizes and UFs).
 * The body is converted to the member's dtype. */
rv_tensor *rv_recurse_define(rv_compute *c, rv_expr *pred, rv_expr *body, rv_expr *else_body);
/* Checks that every member is defined and reads members only as the
 * properties allow; RV_ERR_TYPE with a message naming the read otherwise. */
rv_status rv_recurse_end(rv_recurse *r);

rv_tensor *rv_module_tensor(const rv_module *m, const char *name);
/* Tensors in definition order (inputs and operations). */
int rv_module_num_tensors(const rv_module *m);
rv_tensor *rv_module_tensor_at(const rv_module *m, int i);
const char *rv_tensor_name(const rv_tensor *t);
rv_dtype rv_tensor_dtype(const rv_tensor *t);
int rv_tensor_ndim(const rv_tensor *t);
int rv_tensor_is_input(const rv_tensor *t);
int rv_tensor_is_param(const rv_tensor *t); /* an input declared constant across runs */
/* A program output: one the module names (rv_module_add_output, `output h, y`
 * in the language) when it names any, else a computed tensor that no later
 * operation reads. */
int rv_tensor_is_output(const rv_module *m, const rv_tensor *t);
/* Names t an output of m (after the ones named before); once a module
 * names one, exactly the named tensors are its outputs. RV_ERR_ARG for an
 * input, another module's tensor or one named already. */
rv_status rv_module_add_output(rv_module *m, rv_tensor *t);
rv_size *rv_module_size(const rv_module *m, const char *name);
int rv_module_num_sizes(const rv_module *m);
rv_size *rv_module_size_at(const rv_module *m, int i);
const char *rv_size_name(const rv_size *s);
int rv_module_num_ufuns(const rv_module *m);
rv_ufun *rv_module_ufun_at(const rv_module *m, int i);
const char *rv_ufun_name(const rv_ufun *f);
rv_ufun *rv_module_ufun(const rv_module *m, const char *name);

/* ---- scalar expressions (hash-consed: equal structure, equal pointer) ---- */

typedef enum rv_reduce_kind {
    RV_REDUCE_SUM,
    RV_REDUCE_MAX,
    RV_REDUCE_MIN,
    RV_REDUCE_ARGMAX, /* index (i64) of the first maximum; -1 over an empty range */
    RV_REDUCE_COUNT
} rv_reduce_kind;

rv_expr *rv_expr_int(rv_module *m, int64_t v);
rv_expr *rv_expr_float(rv_module *m, rv_dtype t, double v);
rv_expr *rv_expr_size(rv_module *m, rv_size *s);
rv_expr *rv_expr_axis(rv_module *m, rv_axis *a);
rv_expr *rv_expr_add(rv_module *m, rv_expr *a, rv_expr *b);
rv_expr *rv_expr_sub(rv_module *m, rv_expr *a, rv_expr *b);
rv_expr *rv_expr_mul(rv_module *m, rv_expr *a, rv_expr *b);
/* Binary/unary/math operators by name: "+", "-", "*", "/", "%", "floordiv",
 * "floormod", "min", "max", "==", "!=", "<", "<=", ">", ">=", "&&", "||",
 * "pow"; unary "-", "!", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
 * "erf", "gelu", "abs". */
rv_expr *rv_expr_binop(rv_module *m, const char *op, rv_expr *a, rv_expr *b);
rv_expr *rv_expr_unop(rv_module *m, const char *op, rv_expr *a);
rv_expr *rv_expr_select(rv_module *m, rv_expr *cond, rv_expr *a, rv_expr *b);
rv_expr *rv_expr_cast(rv_module *m, rv_dtype t, rv_expr *a);
rv_expr *rv_expr_read(rv_module *m, rv_tensor *t, int n, rv_expr *const *idx);
rv_expr *rv_expr_ufcall(rv_module *m, rv_ufun *f, int n, rv_expr *const *args);
rv_axis *rv_reduce_axis_new(rv_module *m, const char *name, rv_expr *extent);
rv_expr *rv_expr_reduce(rv_module *m, rv_reduce_kind k, int naxes, rv_axis *const *axes,
                        rv_expr *body);

/* ---------------------------------------------------------- interpreter */

/* Values for a run: sizes, UF arrays (integer rv_arrays), input arrays; the
 * interpreter adds the computed tensors. Arrays set here are borrowed. */
typedef struct rv_bindings rv_bindings;
rv_bindings *rv_bindings_new(const rv_module *m);
void rv_bindings_free(rv_bindings *b);
rv_status rv_bindings_set_size(rv_bindings *b, const char *name, int64_t v);
/* UF arrays and input arrays alike, by name. The bindings do not own `a`. */
rv_status rv_bindings_set_array(rv_bindings *b, const char *name, const rv_array *a);
int rv_bindings_has(const rv_bindings *b, const char *name);
/* -1 when `name` is not a bound size. */
int64_t rv_bindings_get_size(const rv_bindings *b, const char *name);
const rv_array *rv_bindings_get_array(const rv_bindings *b, const char *name);
/* rv_bindings_get_array and rv_array_get_info in one call: nonzero with
 * *out filled when `name` has an array, 0 (*out untouched) when not. */
int rv_bindings_get_info(const rv_bindings *b, const char *name, rv_array_info *out);
/* Draws every size, UF array and input not yet bound, within its declared
 * range, reproducibly from `seed`. A structure whose children are unbound
 * gets a random batch of structures of its kind, linearized and bound as
 * by rv_bindings_set_linear (its shape chosen by the seed: a single node,
 * a deep chain, bushy trees, many small ones, random ones; see
 * docs/recursion.md). Floats are uniform in [-1, 1), integers in [-8, 8];
 * in a program with a recursion group, each float input is divided by the
 * square root of its fan-in (the extents of the reductions its reads are
 * reduced over; docs/recursion.md, "Random weights"). */
rv_status rv_bindings_randomize(rv_bindings *b, uint64_t seed);
/* Binds structure `structure`'s arrays from a linearized batch (rv_linear,
 * below; the bindings own copies): its size N (the batch's nodes), B when
 * it declares roots (the batch's structures), nchild, child (the rows
 * child[n, k < nchild[n]] packed one after the other: a ragged UF's
 * layout), root, data column c from lin->data[n * width + c], and the
 * hidden dynamic batches (_T_nbatch, _T_batch_begin, _T_batch_length) and,
 * for a tree or sequence structure, the unrolled partition (_T_nunroll,
 * _T_unroll_begin, _T_unroll_length, _T_unroll_node; an rv_linear with
 * num_unroll = 0, as rv_linearize leaves it, binds none until a program
 * that reads it runs on b, or rv_bindings_get_array / _get_size reads it:
 * then it is computed from the bound nchild and child arrays).
 * RV_ERR_ARG naming the structure when the batch allows more children
 * per node than the structure declares (K), has fewer data integers per
 * node than it declares columns, or, for a tree or sequence structure,
 * has a node with two parents (a DAG batch binds only to a dag structure;
 * chains bind to trees and DAGs, trees to DAGs); RV_ERR_BOUNDS when N or
 * B falls outside its declared range. Nothing is bound on failure.
 * For serving call after call: the copies are made in the memory of the
 * arrays a previous batch's binding on b left (replaced, or unbound by
 * rv_bindings_reset) when it holds them, so that a steady stream of
 * batches allocates nothing, and what the copy checked (the children's
 * ranges and the numbering the compiled recursions rely on, left to the
 * run to refuse: the interpreter runs any numbering) the next run does
 * not check again; an array rv_bindings_get_array returned for one of
 * these UFs is overwritten by a later batch's binding. */
typedef struct rv_linear rv_linear; /* defined with the linearizer below */
rv_status rv_bindings_set_linear(rv_bindings *b, const char *structure, const rv_linear *lin);
/* Binds every unbound size that the shapes of the bound input and UF arrays
 * determine: a dimension whose extent is a*S + c in one unknown size S
 * (sizes already bound count as constants) gives S = (n - c) / a, so
 * binding X : f32[16*T, 768] to a 48 x 768 array sets T = 3. RV_ERR_SHAPE
 * naming the argument and dimension when no integer fits, or the extent
 * contradicts a size given or inferred from another array; RV_ERR_BOUNDS
 * when the value is outside the size's range. Other extents (UFs, ragged
 * rows) determine nothing here: the run checks them. rv_interp_run,
 * rv_program_run and rv_bindings_randomize call it when a size is unbound,
 * so a caller may simply leave such sizes out. */
rv_status rv_bindings_infer_sizes(rv_bindings *b);
/* Binds in b every size, UF array and input array bound in `from` (a
 * bindings object of the same module; its computed tensors are not
 * copied), overriding b's, each as the same binding: b borrows the arrays
 * (also those `from` owns, so `from` must stay alive and keep them bound
 * while b runs), and an input keeps its binding's stamp, so a program
 * keeping data derived from a param (rv_input_set_param) reuses it in b's
 * runs. For callers that bind the weights once and the per-call inputs
 * on fresh bindings per call (the Python package's Program.bind). */
rv_status rv_bindings_inherit(rv_bindings *b, const rv_bindings *from);
/* Unbinds every size, UF array and input of b, as in new bindings, and
 * then inherits `from` (NULL: nothing), keeping the arrays of b's
 * computed tensors: the next run on b computes each into its previous
 * array where that array's memory holds it (rv_program_run), so a caller that
 * runs call after call on one bindings object with per-call arguments
 * over fixed ones (the Python package's Bound) allocates no result
 * arrays, and nothing bound for one call leaks into the next (a size
 * inferred from a previous call's array is inferred again). The arrays
 * rv_bindings_get_array returned for computed tensors stay valid until
 * the next run on b. */
rv_status rv_bindings_reset(rv_bindings *b, const rv_bindings *from);
/* Binds every tensor of the weights file at `path` whose name is an input
 * or ufun of the module (the bindings own these arrays); other tensors are
 * ignored, and inputs the file lacks stay unbound. A dtype, rank or
 * constant extent that disagrees with the declaration is RV_ERR_SHAPE
 * naming the input (extents of sizes, and ragged shapes, are checked when
 * the run starts); a file matching no input at all is RV_ERR_ARG. */
rv_status rv_bindings_load_weights(rv_bindings *b, const char *path);
/* The canonical layout (docs/ir.md, "Ragged layouts and storage") of the
 * tensor or UF domain `name` under the sizes and UF arrays bound in b,
 * which are checked as a run checks them (inputs need not be bound): how
 * the 1-D array of a ragged tensor divides into rows. Level k (0 <= k <
 * ndim) has rv_layout_count(l, k) valid index prefixes of length k (1 for
 * k = 0; rv_layout_count(l, ndim) is the number of elements). A level whose
 * extent is the same for every prefix has it as rv_layout_extent and no
 * starts; a ragged level has extent -1 and count(l, k) + 1 row starts
 * (CSR offsets): prefix r's children are the prefixes starts[r] ..
 * starts[r + 1] - 1 of length k + 1, all in lexicographic order. The
 * layout is a snapshot: free it with rv_layout_free. */
typedef struct rv_layout rv_layout;
rv_status rv_bindings_layout(rv_bindings *b, const char *name, rv_layout **out);
int rv_layout_ndim(const rv_layout *l);
/* The name of dimension k ("b", "l", ...); NULL out of range. */
const char *rv_layout_dim_name(const rv_layout *l, int k);
int64_t rv_layout_count(const rv_layout *l, int k);
int64_t rv_layout_extent(const rv_layout *l, int k);
const int64_t *rv_layout_starts(const rv_layout *l, int k);
void rv_layout_free(rv_layout *l);
/* Evaluates every compute in definition order (double precision), storing
 * the results (owned by the bindings) under the tensors' names. Checks UF
 * values against their ranges, indices against extents, and array shapes
 * against the declared (possibly ragged) layouts. */
rv_status rv_interp_run(const rv_module *m, rv_bindings *b);

/* ---------------------------------------------------- compiled programs */

/* A module compiled to native code: lowered to loop nests, emitted as C
 * (one kernel per computed tensor) and compiled by the system C compiler
 * through the JIT's on-disk cache. Sizes stay symbolic, so one program
 * serves every binding. A run takes the same bindings as the interpreter,
 * checks them the same way before any kernel runs, and stores the same
 * results (canonical layout; ragged tensors 1-D and packed):
 *
 *     rv_program *p;
 *     if (rv_program_compile(m, NULL, &p) != RV_OK) fprintf(stderr, "%s\n", rv_last_error());
 *     rv_status st = rv_program_run(p, b);   // b as for rv_interp_run
 *     puts(rv_program_source(p));            // the generated C
 *     rv_program_free(p);
 *
 * The module must not gain tensors while a program compiled from it is in
 * use and must outlive it; one program may run on many threads at once
 * (see "Thread safety" below). Compiling leaves the module as it was: the
 * lowering's IR is freed when the compile ends and a program holds only
 * what its runs need, so one process may compile a module any number of
 * times (a tuner's candidates) in bounded memory. */
typedef struct rv_program rv_program;

/* Where the kernels run. RV_TARGET_CUDA: each kernel is CUDA C compiled
 * by NVRTC and launched on device 0 through the CUDA driver (both loaded
 * at run time); the schedule binds loops to blocks and threads
 * (`bind(io, "blockIdx.x")`), and loops it leaves unbound run serially in
 * each thread. Preludes (ragged layouts' offsets) still run on the host;
 * a run copies the inputs, UF and prelude arrays to the device and the
 * results back. */
typedef enum rv_target {
    RV_TARGET_CPU, /* the default: C, the system compiler, the thread pool */
    RV_TARGET_CUDA,
    RV_TARGET_COUNT
} rv_target;

/* Zero (or a NULL pointer to it) means the defaults. */
typedef struct rv_compile_options {
    const char *cc;        /* compiler command; NULL: $RAVEL_CC, else "cc" */
    const char *cflags;    /* extra compiler flags, space-separated, after the defaults */
    const char *cache_dir; /* NULL: $RAVEL_CACHE_DIR, else ~/.cache/ravel */
    int serial;            /* nonzero: parallel loops run on the calling thread */
    rv_target target;      /* RV_TARGET_CPU (0) or RV_TARGET_CUDA */
    /* Threads of the CPU kernels' parallel loops, counting the caller:
     * 0, the process's shared pool ($RAVEL_NUM_THREADS, else the CPUs
     * this process may run on); 1, the calling thread only (as serial);
     * N > 1, a pool of N owned by the program, started by the compile and
     * stopped by rv_program_free, so programs of different sizes may run
     * side by side. Negative: RV_ERR_ARG. */
    int threads;
} rv_compile_options;

/* RV_ERR_UNSUPPORTED for what the lowering or code generator cannot do yet,
 * and for RV_TARGET_CUDA without a driver ("no CUDA driver (libcuda.so.1
 * not found)") or device; RV_ERR_COMPILER when the C compiler or NVRTC
 * fails (the message has its output). */
rv_status rv_program_compile(rv_module *m, const rv_compile_options *opt, rv_program **out);
/* The computed tensors end in the bindings (rv_bindings_get_array); a
 * later run on the same bindings computes each computed tensor into its
 * previous array when the dtype agrees and the array's memory holds the
 * new shape, which the array then takes (docs/pipeline.md; the memory
 * stays that of the largest result, as an rv_linear's buffers do), so
 * arrays got from the bindings hold the last run's values and shape. */
rv_status rv_program_run(rv_program *p, rv_bindings *b);
/* As rv_program_run, but the program's outputs (rv_tensor_is_output, in
 * definition order; noutputs of them) are computed into the caller's
 * arrays, which the bindings then do not hold: no allocation or copy for
 * them (a padded output is still unpacked into its array). Each array has
 * the output's dtype and shape (a ragged output: 1-D, its elements packed)
 * and RV_ARRAY_ALIGN-aligned data, or the run fails (RV_ERR_ARG, the
 * message naming the output) before any kernel. For callers that reuse
 * their buffers (serving, benchmarks); wrap foreign memory with
 * rv_array_wrap or rv_array_from_dlpack. */
rv_status rv_program_run_into(rv_program *p, rv_bindings *b, rv_array *const *outputs,
                              int noutputs);
/* One call of a recursive model as a server makes it on pooled bindings,
 * in one call of the library (for bindings through a foreign-function
 * interface, whose cost per call of the library is that of a small
 * model's whole call): rv_bindings_reset(b, base) when base is not NULL
 * (the weights bound once), rv_bindings_set_linear(b, structure, lin),
 * rv_program_run(p, b), then rv_bindings_get_info of each of the
 * program's outputs (rv_tensor_is_output, in definition order; noutputs of
 * them) into outputs[k] (data NULL and ndim -1 for one the run left
 * without an array). Returns the first failing step's status and message
 * (nothing done after it; outputs untouched); RV_ERR_ARG before any step
 * when noutputs is not the program's count of outputs. */
rv_status rv_program_run_linear(rv_program *p, rv_bindings *b, const rv_bindings *base,
                                const char *structure, const rv_linear *lin,
                                rv_array_info *outputs, int noutputs);

/* Thread safety (tests/unit/test_thread_safety.c, also under
 * ThreadSanitizer: `make tsan-test`).
 *
 * May run at once, on any threads:
 *   - rv_program_run and rv_program_run_into on one program, each call
 *     with bindings of its own (a run writes its outputs into them) and
 *     output arrays of its own; input and UF arrays may be shared, since
 *     runs only read them. Every run gives the result it gives alone, bit
 *     for bit. The calls share the program's pool (or the process's) and
 *     take turns on it, loop by loop; with .threads = 1 they do not
 *     share one.
 *     Packs of params the program keeps (rv_input_set_param) are shared
 *     by the runs: each run reads the copy made from its own binding of
 *     the param, or makes its own (tests/unit/test_param.c).
 *   - rv_program_stats, rv_program_invalidate and rv_program_last_variant
 *     (the variant of a run that has picked one most recently) alongside
 *     those runs;
 *   - parsing, building, compiling and running different modules;
 *   - rv_last_error, which is per thread.
 *
 * Must not overlap anything else on the same object:
 *   - rv_program_free with a run of that program;
 *   - changing a module (adding tensors, schedules, parsing into it) or
 *     compiling it with a run of a program compiled from it, or with
 *     another compile of it (a compile works in the module's IR scope);
 *   - two uses of one rv_bindings (each run changes its outputs);
 *   - rv_array_free of an array a run reads or writes. */

/* ---- variants: several schedules of one module, one picked per run ----
 *
 * A program may hold several compiled variants of a module's definitions,
 * each with its own schedule (a tile for small sizes, another for large
 * ones), and a dispatch that picks one per run from the sizes, after the
 * arguments are checked. Every variant computes the same results; only
 * speed differs. The dispatch is either a C function (a tuner's decision
 * tree, or the user's) or a table of rules:
 *
 *     const char *sched[2] = {"schedule Y { vectorize(i) }",
 *                             "schedule Y { io, ii = split(i, 64) parallel(io) vectorize(ii) }"};
 *     rv_dispatch_rule big = {1, {{"N", 4096, 1000000}}, 1};   // N in 4096..1e6: variant 1
 *     rv_dispatch d = {.nrules = 1, .rules = &big};            // otherwise variant 0
 *     rv_program_compile_variants(m, 2, sched, &d, NULL, &p);
 */

/* The variant for a run; sizes[i] is the value of rv_module_size_at(m, i).
 * An answer outside 0..nvariants-1 fails the run (RV_ERR_ARG). */
typedef int (*rv_dispatch_fn)(const int64_t *sizes, void *user);

#define RV_DISPATCH_MAX_CONDS 4
/* A rule holds when every named size lies in its inclusive [lo, hi]. */
typedef struct rv_dispatch_rule {
    int nconds;
    struct {
        const char *size;
        int64_t lo, hi;
    } conds[RV_DISPATCH_MAX_CONDS];
    int variant;
} rv_dispatch_rule;

/* fn, if set, decides; otherwise the first rule that holds, in order, and
 * variant 0 when none does. A NULL dispatch always picks variant 0.
 *
 * fn may also read quantities only the UF arrays give (a tuned program
 * over ragged tensors, docs/tuning.md): `sums` names nsums UFs of one
 * argument over a domain of sizes (`ufun len[b < B]`), and fn sees the sum
 * of UF sums[q]'s values at sizes[rv_module_num_sizes(m) + q] (the sum of
 * len is the extent of the fused loop `fuse(b, l)`, l < len[b]: the
 * packed tokens). They are computed after the arguments are checked. */
/* A variant compiled for constant sizes: while it is lowered each named
 * size is the constant `value` (its range narrowed to that one point), so
 * its loops over the size have constant extents (no tails, no masked
 * vectors, full unrolling: what a kernel written for one shape gets). The
 * dispatch must choose it only where the sizes have these values: a run
 * where it chose it otherwise fails (RV_ERR_ARG) before any kernel. */
typedef struct rv_variant_sizes {
    int nsizes; /* 0: a variant for every size */
    struct {
        const char *size;
        int64_t value;
    } at[RV_DISPATCH_MAX_CONDS];
} rv_variant_sizes;

typedef struct rv_dispatch {
    rv_dispatch_fn fn;
    void *user;
    int nrules;
    const rv_dispatch_rule *rules;
    int nsums;
    const char *const *sums;
    /* NULL, or one per variant: the sizes each variant is compiled for */
    const rv_variant_sizes *variant_sizes;
} rv_dispatch;

/* Compiles nvariants variants of m: variant i with the schedule blocks of
 * schedules[i] (`.rv` text: `schedule Y { ... }` blocks, any number, in
 * place of the module's own blocks; NULL: the module's own). Errors as
 * rv_program_compile's, located in "<variant i>"; RV_ERR_ARG for a rule
 * naming an unknown size or variant. */
rv_status rv_program_compile_variants(rv_module *m, int nvariants, const char *const *schedules,
                                      const rv_dispatch *dispatch, const rv_compile_options *opt,
                                      rv_program **out);
/* The variant the last rv_program_run ran (-1 before any). */
int rv_program_last_variant(const rv_program *p);
/* The generated C translation unit ("" if none). */
const char *rv_program_source(const rv_program *p);
/* The C that rv_program_compile would compile for m (CPU), without
 * running the compiler: what `ravel emit` prints. Free *source with
 * rv_free; NULL on an error, which rv_last_error() locates. */
rv_status rv_program_emit(rv_module *m, char **source);
/* key := 32 hex digits naming the code a compile of m with `schedule`
 * (`schedule` blocks in place of the module's own, as one variant of
 * rv_program_compile_variants; NULL: the module's own), compiled for the
 * sizes `at` (NULL: none), would run: the JIT's cache key of its C (the
 * text, the compiler's identity, its flags with opt's cflags, ravel_rt.h,
 * the host CPU). It lowers and emits C, without compiling (a few ms):
 * two schedules with equal keys run the same machine code, so a time
 * measured under one key stands for the other (tuning records,
 * docs/tuning.md "Stale records"). Errors: those of lowering. */
rv_status rv_program_code_key(rv_module *m, const char *schedule, const rv_variant_sizes *at,
                              const rv_compile_options *opt, char key[33]);
void rv_program_free(rv_program *p);

/* Counters accumulated over a program's life. */
typedef struct rv_program_counters {
    int64_t runs;
    int64_t kernel_calls;
    double compile_seconds; /* lowering, code generation, C compiler or cache */
    double cc_seconds;      /* of which the C compiler ran (0: from the JIT's cache) */
    double prelude_seconds; /* filling the aux arrays of ragged layouts */
    double kernel_seconds;
    /* preludes run and bytes of aux arrays allocated, over all runs: a
     * run fills each distinct aux array (one per raggedness pattern) once,
     * whatever the number of kernels that use it */
    int64_t prelude_runs;
    int64_t aux_bytes;
    /* packs of params filled (rv_input_set_param): a run fills a pack the
     * program keeps only when its param was bound anew since the pack was
     * filled (or the program was invalidated); other runs reuse it */
    int64_t pack_fills;
} rv_program_counters;
void rv_program_stats(const rv_program *p, rv_program_counters *out);
/* Drops the data the program keeps across runs that it derived from param
 * inputs (their packed layouts, rv_input_set_param): the next run derives
 * them again. Binding a param again does the same for that param alone;
 * this is for a caller that wrote into a bound param's memory in place.
 * Not concurrently with a run of p on the same bindings as a write it
 * follows; thread-safe otherwise. */
void rv_program_invalidate(rv_program *p);

/* ------------------------------------------- recursive data structures */

/* Recursive models (TreeLSTM, DAG-RNN, ...) read pointer-linked inputs:
 * sequences, trees with at most K children and DAGs. A *batch* of such
 * structures is built here, checked as each structure is added, and then
 * *linearized* (Cortex §4.2, appendix B) into the integer arrays the
 * compiled kernels read (docs/recursion.md, "Structures and the linearizer"):
 *
 *     rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1); // binary, 1 int per node
 *     if (rv_structs_read_sst(bs, "data/sst", RV_SST_TEST) != RV_OK) ...rv_last_error()...
 *     rv_linear lin = {0};                 // buffers grow once, reused by every call
 *     if (rv_linearize(bs, &lin) != RV_OK) ...
 *     // lin.batch_begin[b], lin.batch_length[b], lin.child[n * K + k], lin.first_leaf, ...
 *     rv_linear_free(&lin);
 *     rv_structs_free(bs);
 *
 * Nodes are numbered 0..n-1 within a structure; a node's *children* are the
 * nodes computed before it (a tree's children, a sequence's previous
 * element, a DAG node's predecessors) and its *parents* the nodes that read
 * it. The *root* is the one node no other node lists as a child: the
 * structure's result. Children keep their order (left before right).
 *
 * Every structure is checked when it is added; a bad one is refused with
 * RV_ERR_ARG (RV_ERR_SYNTAX / RV_ERR_IO from the readers) and a message that
 * names the structure (its index in the batch) and the node, and the batch
 * is left as it was. Refused: a node with more than K children, a child
 * index outside 0..n-1, a node listed twice among one node's children, a
 * cycle (named by its nodes), in a tree or sequence a node with two
 * parents, and a structure with no root or with several. A DAG has one
 * root too, so a disconnected DAG is refused: its parts are separate
 * structures with separate results; add them as such. */
/* rv_struct_kind (sequence, tree, DAG) is declared with the structures above. */

typedef struct rv_structs rv_structs;

/* An empty batch of structures of `kind` whose nodes have at most
 * `max_children` (K >= 1) children and `width` (>= 0) integers of data each
 * (e.g. a word id). NULL with the error on bad arguments. */
rv_structs *rv_structs_new(rv_struct_kind kind, int max_children, int width);
void rv_structs_free(rv_structs *bs);
/* Drops every structure (keeps the vocabulary and the buffers). */
void rv_structs_clear(rv_structs *bs);
rv_struct_kind rv_structs_kind(const rv_structs *bs);
int rv_structs_max_children(const rv_structs *bs);
int rv_structs_width(const rv_structs *bs);
int rv_structs_count(const rv_structs *bs);
/* Nodes of all structures; structure s's node i is node
 * rv_structs_node_begin(bs, s) + i of the batch. */
int32_t rv_structs_num_nodes(const rv_structs *bs);
int32_t rv_structs_node_begin(const rv_structs *bs, int s);
int32_t rv_structs_size(const rv_structs *bs, int s);
/* Node i of structure s: its children (a pointer to nchild structure-local
 * indices), its data (`width` integers) and its root. */
int rv_structs_children(const rv_structs *bs, int s, int32_t i, const int32_t **child);
const int32_t *rv_structs_data(const rv_structs *bs, int s, int32_t i);
int32_t rv_structs_root(const rv_structs *bs, int s);

/* Adds a structure of n nodes from children lists in compressed form: node
 * i's children are child[child_begin[i] .. child_begin[i+1]) (child_begin
 * has n+1 entries, child_begin[0] = 0, and `child` child_begin[n]: sizes
 * no function can check). `data`: n * width integers, row per node, or NULL
 * for -1 everywhere. */
rv_status rv_structs_add_children(rv_structs *bs, int32_t n, const int32_t *child_begin,
                                  const int32_t *child, const int32_t *data);
/* Adds `count` structures from concatenated arrays in one call, as a
 * server receives a batch: structure j has sizes[j] nodes; child_begin
 * (num_begin values) holds each structure's sizes[j] + 1 offsets (each
 * structure's starting at 0), one structure after the other; `child`
 * (num_child values) their children (structure-local indices) likewise;
 * `data` (num_data values) the nodes' rows of width integers, or NULL for
 * -1 everywhere. Each structure is checked as by rv_structs_add_children,
 * and every array against its length: nothing is read past one, and each
 * must be used up exactly. All or nothing: on an error (RV_ERR_ARG naming
 * the structure, by its index in the batch, and the node) none of the
 * `count` structures is added. */
rv_status rv_structs_add_many(rv_structs *bs, int count, const int32_t *sizes,
                              const int32_t *child_begin, int64_t num_begin,
                              const int32_t *child, int64_t num_child, const int32_t *data,
                              int64_t num_data);
/* The same from a parent array: parent[i] is node i's parent, -1 for the
 * root; a node's children are in increasing index order. */
rv_status rv_structs_add_parents(rv_structs *bs, int32_t n, const int32_t *parent,
                                 const int32_t *data);
/* A sequence of n nodes: node t's child is t-1, the root is n-1. */
rv_status rv_structs_add_sequence(rv_structs *bs, int32_t n, const int32_t *data);
/* A perfect binary tree of height h (2^(h+1) - 1 nodes, h + 1 levels; a
 * single node has height 0) in heap order: node i's children are 2i+1 and
 * 2i+2, the root is 0. Needs K >= 2. */
rv_status rv_structs_add_perfect_tree(rv_structs *bs, int height, const int32_t *data);
/* The w x h grid DAG of Cortex's DAG-RNN: node (i, j), index i*h + j, has
 * the children (i-1, j) and (i, j-1) where they exist, in that order; the
 * root is (w-1, h-1). Needs a DAG batch with K >= 2 (unless w or h is 1). */
rv_status rv_structs_add_grid(rv_structs *bs, int w, int h, const int32_t *data);

/* Readers. Words are numbered by the batch's vocabulary in order of first
 * appearance (ids stay valid for every later structure of the batch). A
 * reader that fails takes back the structures it added (the vocabulary
 * may keep words it saw); its message starts with "file:line:". */
int32_t rv_structs_vocab_size(const rv_structs *bs);
const char *rv_structs_word(const rv_structs *bs, int32_t id); /* NULL if out of range */
/* A PTB-style s-expression, `(3 (2 It) (4 (2 's) (3 fine)))`: each node is
 * `(LABEL WORD)` (a leaf) or `(LABEL TREE...)`; LABEL an integer. Nodes are
 * numbered in preorder (the root is 0). Data column 0 is the word id (-1
 * for internal nodes), column 1 (where width >= 2) the label. `name`
 * prefixes errors: "name:LINE:COL: ...". */
rv_status rv_structs_add_sexpr(rv_structs *bs, const char *name, const char *text);
/* Every non-blank line of a file as one s-expression. */
rv_status rv_structs_read_sexpr_file(rv_structs *bs, const char *path);
/* The Stanford Sentiment Treebank in `dir` (STree.txt: a tree per line as
 * 1-based parent pointers, 0 for the root, leaves first in sentence order;
 * SOStr.txt: the sentence's tokens separated by '|'; datasetSplit.txt), the
 * sentences of one split (RV_SST_ALL: every one) in file order. Node i is
 * STree's node i+1: tokens are 0..T-1, with their word id in data column 0,
 * internal nodes -1. A node's children are left before right (ordered by
 * the first token each covers, not by their numbers). The vocabulary reads every sentence of the file, so
 * ids do not depend on the split. */
typedef enum rv_sst_split {
    RV_SST_ALL = 0,
    RV_SST_TRAIN = 1,
    RV_SST_TEST = 2,
    RV_SST_DEV = 3
} rv_sst_split;
rv_status rv_structs_read_sst(rv_structs *bs, const char *dir, rv_sst_split split);

/* A linearized batch: the arrays ("UFs") a recursive kernel reads. N nodes
 * of all B structures, renumbered (Cortex appendix B) so that
 *   - nodes of one dynamic batch are consecutive: batch b is
 *     batch_begin[b] .. batch_begin[b] + batch_length[b] - 1;
 *   - batches are levels across all structures (a node's level is 0 if it
 *     has no children, else 1 + its children's largest: height in a tree,
 *     longest path from a leaf in a DAG), listed in computation order:
 *     batch 0 holds every leaf (and nothing else), batch b the nodes of
 *     level b;
 *   - higher levels have lower numbers, so every child is numbered higher
 *     than its parents, internal nodes come before leaves, and a node is a
 *     leaf exactly when n >= first_leaf;
 *   - within a batch, nodes keep the order (structure, node index).
 * child[n * K + k] (k < nchild[n]) is the new number of n's k-th child;
 * slots k >= nchild[n] hold n itself, a valid index so a read that is
 * evaluated and then discarded stays in bounds, never a value to use.
 * data[n * width + c] is the data of node n. root[s] is the new number of
 * structure s's root. node_of[n] is the batch node (rv_structs_node_begin
 * + index) that n came from, linear_of its inverse: results computed for
 * new number n belong to batch node node_of[n].
 *
 * The unrolled partition (trees and sequences; num_unroll = 0 for a DAG),
 * which `schedule R { dynamic_batch() unroll() }` runs (docs/recursion.md,
 * "Recursive unrolling"): the leaves run first (batch 0), then the internal
 * nodes at even depth (a root has depth 0) as the *heads* of iterations,
 * each with its internal children (odd depth) computed inside its own
 * iteration. Unrolled batch u is the heads unroll_node[unroll_begin[u] ..
 * unroll_begin[u] + unroll_length[u] - 1]; a head's batch is 0 when none of
 * its grandchildren is internal, else 1 + the largest batch of those (they
 * are heads); so every node a head's iteration reads is done by then.
 * unroll_node lists the heads in batch order, then every other node in
 * increasing order (a permutation of 0..N-1). rv_linearize leaves it out
 * (num_unroll = 0): only an unrolled recursion reads it, so
 * rv_linear_unroll computes it on request, and rv_bindings_set_linear of a
 * batch without one leaves it to the run of a program that reads it,
 * which computes it from the bound arrays.
 *
 * Start from a zeroed rv_linear; each rv_linearize reuses its buffers and
 * grows them only when a batch is larger than any before. */
typedef struct rv_linear {
    int32_t num_nodes;   /* N */
    int32_t num_structs; /* B */
    int32_t max_children, width;
    int32_t first_leaf;  /* leaves are first_leaf .. N-1 */
    int32_t num_batches; /* levels: 1 + the largest level */
    int32_t *batch_begin, *batch_length; /* [num_batches] */
    int32_t *child;                      /* [N * max_children] */
    int32_t *nchild;                     /* [N] */
    int32_t *data;                       /* [N * width] */
    int32_t *root;                       /* [B] */
    int32_t *node_of, *linear_of;        /* [N] each: new -> batch node, and back */
    /* private: buffer capacities */
    size_t cap_nodes, cap_child, cap_data, cap_batches, cap_structs;
    /* the unrolled partition (above) */
    int32_t num_unroll;                    /* unrolled batches (0: none) */
    int32_t *unroll_begin, *unroll_length; /* [num_unroll] */
    int32_t *unroll_node;                  /* [N]: the heads, then the other nodes */
    int32_t *scratch;                      /* private: [N] */
} rv_linear;

/* RV_ERR_ARG for an empty batch; RV_ERR_OOM if a buffer cannot grow (the
 * rv_linear is then empty but can be used again or freed). */
rv_status rv_linearize(const rv_structs *bs, rv_linear *out);
/* A server's batch from its request's arrays in one call: rv_structs_clear,
 * rv_structs_add_many (the same arguments, checks and messages) and
 * rv_linearize into `out`. On an error the batch is empty and `out` as it
 * was (RV_ERR_OOM: see rv_linearize). For a binding that pays per call of
 * the library (a foreign-function interface); in C the three calls cost
 * the same. */
rv_status rv_structs_build_linear(rv_structs *bs, int count, const int32_t *sizes,
                                  const int32_t *child_begin, int64_t num_begin,
                                  const int32_t *child, int64_t num_child, const int32_t *data,
                                  int64_t num_data, rv_linear *out);
/* Computes the unrolled partition (above) of a batch rv_linearize filled:
 * num_unroll 0 when a node has two parents (a DAG batch). RV_ERR_ARG for
 * an rv_linear rv_linearize has not filled. */
rv_status rv_linear_unroll(rv_linear *lin);
void rv_linear_free(rv_linear *lin);

/* -------------------------------------------------- the schedule as data
 *
 * rv_module_schedule_info applies the module's schedule blocks to the
 * default schedule, as rv_module_schedule_trace does, and returns its
 * stages and their loops as plain data that the snapshot owns (the module
 * is unchanged; free it with rv_schedule_info_free). NULL with the last
 * error set when a step is illegal. A tool or tuner that chooses the next
 * step from the current loops reads this, not the trace's comments.
 * docs/schedules.md describes the fields. */
typedef enum rv_stage_kind {
    RV_STAGE_TENSOR,      /* a tensor of the module */
    RV_STAGE_CACHE_READ,  /* L = cache_read(X): a local copy of X */
    RV_STAGE_CACHE_WRITE, /* L = cache_write(Y): Y's reduction, moved */
    RV_STAGE_PART,        /* F, R = split_op(v, M) on Y: Y over a range of v (source: Y) */
    RV_STAGE_KIND_COUNT
} rv_stage_kind;

typedef enum rv_stage_attach {
    RV_ATTACH_ROOT,   /* its own kernel */
    RV_ATTACH_AT,     /* computed inside a loop (or at the top) of another stage's nest */
    RV_ATTACH_INLINE, /* substituted into its readers (no loops) */
    RV_ATTACH_COUNT
} rv_stage_attach;

typedef enum rv_loop_kind {
    RV_LOOP_SERIAL,
    RV_LOOP_PARALLEL,    /* parallel(v) */
    RV_LOOP_VECTOR,      /* vectorize(v) */
    RV_LOOP_UNROLL,      /* unroll(v) */
    RV_LOOP_GPU_BLOCK_X, /* bind(v, "blockIdx.x"), ... */
    RV_LOOP_GPU_BLOCK_Y,
    RV_LOOP_GPU_BLOCK_Z,
    RV_LOOP_GPU_THREAD_X,
    RV_LOOP_GPU_THREAD_Y,
    RV_LOOP_GPU_THREAD_Z,
    RV_LOOP_KIND_COUNT
} rv_loop_kind;

typedef enum rv_loop_origin {
    RV_LOOP_AXIS,  /* an axis of the stage (spatial, or of its reduction) */
    RV_LOOP_OUTER, /* o of `o, i = split(parent, factor)` */
    RV_LOOP_INNER, /* i of it (extent factor) */
    RV_LOOP_FUSED, /* f of `f = fuse(fused_outer, fused_inner)` */
    RV_LOOP_ORIGIN_COUNT
} rv_loop_origin;

/* Annotations for recursion and batching (reserved: carried and printed,
 * not acted on yet). */
typedef enum rv_stage_note_kind {
    RV_NOTE_DYNAMIC_BATCH, /* Cortex: a recursive stage's instances batched per level */
    RV_NOTE_SPECIALIZE,    /* Cortex: a recursive stage specialized per case */
    RV_NOTE_BATCH,         /* ACROBAT: calls batched across instances */
    RV_NOTE_REFACTOR,      /* Cortex: a member computed at its parents (refactor) */
    RV_NOTE_GPU_BATCHES,   /* how the CUDA back end separates a group's batches (payload 1:
                              a launch per batch, 2: one persistent kernel) */
    RV_NOTE_UNROLL,        /* Cortex: a node computed with its children (unroll_recursion) */
    RV_NOTE_KIND_COUNT
} rv_stage_note_kind;

typedef struct rv_stage_note {
    rv_stage_note_kind kind;
    int64_t payload;
} rv_stage_note;

typedef struct rv_loop_info {
    const char *name;
    rv_loop_kind kind;
    const char *kind_name; /* "serial", "parallel", "vector", "unroll", "blockIdx.x", ... */
    /* The trip count as a printed expression over sizes (and UFs and outer
     * axes for ragged loops): "M", "(N + 31) / 32", "32", "len[b]". For a
     * stage computed at a loop, or a cache stage, the loops run over the
     * region its readers need, which lowering infers: at most this. */
    const char *extent;
    int reduce; /* a loop of the stage's reduction */
    rv_loop_origin origin;
    const char *parent;      /* OUTER, INNER: the loop split (maybe no longer a loop) */
    int64_t factor;          /* OUTER, INNER: the split's factor */
    const char *fused_outer; /* FUSED: the two loops fused */
    const char *fused_inner;
    int64_t pad; /* AXIS: the multiple of pad(v, N); 1 without */
} rv_loop_info;

typedef struct rv_stage_info {
    const char *name;
    rv_stage_kind kind;
    rv_stage_attach attach;
    const char *at_stage; /* AT: the stage in whose nest it is computed */
    const char *at_loop;  /* AT: that stage's loop; NULL: the top of its nest */
    const char *source;   /* CACHE_READ: the tensor copied; PART: the stage split; else NULL */
    int padded;           /* a cache stage with local padding (pad=1) */
    int nloops;
    const rv_loop_info *loops; /* outermost first */
    int nnotes;
    const rv_stage_note *notes;
} rv_stage_info;

typedef struct rv_schedule_info rv_schedule_info;
rv_schedule_info *rv_module_schedule_info(rv_module *m);
int rv_schedule_info_num_stages(const rv_schedule_info *s);
/* Producers before their readers (the order of the trace's stages). */
const rv_stage_info *rv_schedule_info_stage(const rv_schedule_info *s, int i);
const rv_stage_info *rv_schedule_info_find(const rv_schedule_info *s, const char *name);
void rv_schedule_info_free(rv_schedule_info *s);

#ifdef __cplusplus
}
#endif
#endif
