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
 *   eval.c        compute and cond operations: expression DAGs compiled to
 *                 flat instruction lists, evaluated per element
 *   extern_ref.c  reference implementations of the extern kernels
 *   random.c      the reproducible generator behind rv_bindings_randomize
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
};

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

/* The state of one run (or of drawing random arguments). */
typedef struct Interp {
    const Module *m;
    rv_bindings *b;
    LayoutEnv env;
    int64_t *sizes; /* by size id */
    int64_t **ufv;  /* by ufun id: values in domain order, as int64 */
    Layout **ufl;   /* by ufun id: domain layouts */
    TensorVal *tv;  /* by tensor id; data is NULL until computed */
} Interp;

/* ---- bindings.c ---- */

/* Grows the tables after objects were added to the module. */
void interp_bindings_sync(rv_bindings *b);
/* Frees every computed tensor (not inputs). */
void interp_bindings_clear_outputs(rv_bindings *b);
/* Binds an owned array to a tensor or UF, replacing what was there. */
void interp_bindings_own_tensor(rv_bindings *b, const Tensor *t, rv_array *a);
void interp_bindings_own_ufun(rv_bindings *b, const Ufun *f, rv_array *a);

/* ---- interp.c ---- */

/* Checks sizes, UF arrays and input arrays against the module and fills
 * `in`. With a non-NULL seed, first draws whatever is unbound (sizes, UF
 * arrays, inputs) and stores it in the bindings; bound inputs are then
 * left for the run to check. */
rv_status interp_prepare(Interp *in, const Module *m, rv_bindings *b, const uint64_t *seed);
void interp_release(Interp *in);
/* Formats the location prefix of a tensor's definition ("f.rv:3:1: ") and
 * "computing Y[2, 5]" (idx NULL: "computing Y"). */
void interp_format_where(Buf *b, const Tensor *t, const int64_t *idx);

/* ---- eval.c ---- */

/* Evaluates a COMPUTE or COND operation into `out` (allocated with the
 * tensor's dtype and layout, in canonical order). */
rv_status interp_eval_op(Interp *in, const Tensor *t, rv_array *out);

/* ---- extern_ref.c ---- */

/* Evaluates an EXTERN operation by its reference implementation. */
rv_status interp_eval_extern(Interp *in, const Tensor *t, rv_array *out);

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
