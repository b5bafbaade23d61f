/*
 * layout.h — the canonical storage order of a (possibly ragged) tensor or UF
 * domain, evaluated for concrete sizes and UF arrays.
 *
 * A layout is a list of axes a0, ..., a(n-1), each with an extent expression
 * that may mention sizes, UF applications, arithmetic and the *outer* axes
 * a0..a(k-1) of the same list, e.g. `[b < B, h < 8, l < len[b], d < 64]` or
 * `[i < N, j < i + 1, k < len[i] * (j + 1)]`.
 *
 * THE CANONICAL ORDER (normative; storage lowering and CoRa's prelude arrays
 * must agree with it, and every array exchanged with users follows it):
 *
 *   The valid index tuples are those (i0, ..., i(n-1)) with
 *   0 <= ik < extent_k(i0, ..., i(k-1)) for every k. They are stored densely,
 *   without padding, in lexicographic order: the element at tuple t is at
 *   offset = the number of valid tuples lexicographically smaller than t.
 *
 *   Equivalently, with P_k the valid prefixes of length k (|P_0| = 1) and
 *   rank_k(p) the position of p among P_k in lexicographic order:
 *       rank_0()                  = 0
 *       rank_(k+1)(p, ik)         = start_k[rank_k(p)] + ik
 *       start_k[r]                = sum over r' < r of extent_k(prefix r')
 *       offset(i0, ..., i(n-1))   = rank_n(i0, ..., i(n-1))
 *   When extent_k mentions no axis (it is the same for every prefix), it is
 *   a constant c_k and start_k[r] = r * c_k, so a dense tensor is row-major.
 *   When it mentions an outer axis (a "variable level"), start_k is an array
 *   of |P_k| + 1 prefix sums (start_k[|P_k|] = |P_(k+1)|); this is exactly a
 *   CSR row-offset array, the auxiliary array CoRa's prelude computes.
 *
 * A dense layout (no variable level) has a shape; a ragged one is exchanged
 * as a 1-D array of `numel` elements. Storage padding (`pad`) is a concern of
 * compiled code's buffers only: it is the STORAGE ORDER at the end of this
 * header, symbolic, which the lowering, the runtime and `ravel build` share.
 *
 * Extents are evaluated by ir_eval_index, a small exact int64 evaluator over
 * index expressions (constants, sizes, axis variables, UF applications,
 * integer arithmetic, comparisons, select). A negative extent is an error.
 *
 * Cost: evaluating a layout visits every valid prefix down to the last
 * variable level once (that is, O(size of its largest start array));
 * ir_layout_offset is O(ndim) with no allocation.
 */
#ifndef RAVEL_IR_LAYOUT_H
#define RAVEL_IR_LAYOUT_H

#include "ir/ir.h"

typedef struct Layout Layout;

/* The concrete values extents are evaluated under. Sizes must all be bound
 * (and checked) before a layout is evaluated; a UF is usable once its
 * values (int64, in its domain's canonical order) and domain layout are set;
 * applying one that is not is an RV_ERR_ARG error. */
typedef struct LayoutEnv {
    const Module *m;
    const int64_t *sizes;    /* by Size id */
    int64_t *const *uf_vals; /* by Ufun id; NULL: not bound */
    Layout *const *uf_dom;   /* by Ufun id; NULL: not evaluated */
    /* Loop-IR loads (a storage's sizes and offsets read its row-start
     * arrays): element i of buffer b, or an error. NULL: no loads. */
    rv_status (*load)(void *ctx, const Buffer *b, int64_t i, int64_t *out);
    void *load_ctx;
} LayoutEnv;

struct Layout {
    int ndim;
    Axis *axes[RV_MAX_DIMS];
    bool ragged;                    /* some extent mentions an outer axis */
    int64_t numel;                  /* number of valid index tuples */
    int64_t shape[RV_MAX_DIMS];     /* constant levels: the extent; variable levels: -1 */
    int64_t maxext[RV_MAX_DIMS];    /* the largest extent of each level (0 if none) */
    int64_t count[RV_MAX_DIMS + 1]; /* |P_k|: valid prefixes of length k; count[ndim] = numel */
    int64_t *start[RV_MAX_DIMS];    /* variable levels: count[k] + 1 prefix sums; else NULL */
    int64_t cap[RV_MAX_DIMS];       /* start[k]'s room in elements (ir_layout_eval_reuse) */
    bool borrowed;                  /* start arrays belong to the caller (ir_storage_eval) */
};

/* ---- layout.c ---- */

/* Evaluates the layout of `ndim` axes (a tensor's dimensions or a UF's
 * arguments). `what` names the object in messages ("input A", "ufun len").
 * Errors: RV_ERR_BOUNDS for a negative extent or a failing extent (a UF
 * applied outside its domain, division by zero), RV_ERR_SHAPE when the
 * element count overflows, RV_ERR_ARG for an unbound UF. */
rv_status ir_layout_eval(const LayoutEnv *env, const char *what, int ndim, Axis *const *axes,
                         Layout **out);
rv_status ir_layout_tensor(const LayoutEnv *env, const char *what, const Tensor *t, Layout **out);
rv_status ir_layout_ufun(const LayoutEnv *env, const Ufun *f, Layout **out);
void ir_layout_free(Layout *l);
/* ir_layout_eval in the memory of `reuse` (NULL: none), a layout an
 * earlier ir_layout_eval made and the caller no longer uses: its struct
 * and row-start arrays hold the new layout where they have room, so a
 * caller evaluating the layouts of call after call (a run's preparation,
 * interp.c) allocates nothing once they reach the largest. `reuse` is
 * consumed: it becomes *out, or is freed on failure. */
rv_status ir_layout_eval_reuse(const LayoutEnv *env, const char *what, int ndim,
                               Axis *const *axes, Layout *reuse, Layout **out);
/* A zeroed host array for a tensor of this layout: its shape, or 1-D of
 * numel elements when ragged (as users exchange ragged tensors). NULL with
 * the last error set when out of memory. */
rv_array *ir_layout_array_new(rv_dtype t, const Layout *l);

/* Storage padding is supported on a level only when no level inside it is
 * ragged: the row starts of a ragged level are sums of its extents over
 * every storage prefix, padding prefixes included, and at those the
 * extents (len[b] past len's domain, `b < a` at a padding `a`) have no
 * value. Checks the levels of tensor `name` with extents exts[0..ndim) and
 * pads (NULL: none); on a violation returns RV_ERR_TYPE, says so in the
 * last error and sets *level to the padded level. */
rv_status ir_layout_check_pads(const char *name, int ndim, Axis *const *axes, Expr *const *exts,
                               const int *pad, int *level);

/* A ragged level's row starts are allocated before they are computed, from
 * an upper bound of its extent over the declared ranges of sizes and UF
 * values (Storage below); a level whose extent has none cannot be stored.
 * Checks the levels of `what` `name` ("dimension", tensor 'T'; "argument",
 * ufun 'f') with their extents set; RV_ERR_TYPE with a message when one is
 * unbounded. */
rv_status ir_layout_check_bounded(const char *what, const char *name, int ndim, Axis *const *axes);

/* Exact int64 evaluation of an index expression; `axes[i]` has value
 * `vals[i]`; loads go through env->load. Errors set the last error without
 * context (callers prefix it): division by zero, overflow, UF outside its
 * domain, unbound UF, an axis that is not among `axes`, a load without
 * env->load, a node that is not an index expression. */
rv_status ir_eval_index(const LayoutEnv *env, const Expr *e, int nax, Axis *const *axes,
                        const int64_t *vals, int64_t *out);

/* The IR's integer semantics, shared with the interpreter: exact int64,
 * C truncating DIV and MOD, FLOORDIV/FLOORMOD rounding toward -inf, and
 * for comparisons and logical operators 0/1. Division by zero and int64
 * overflow are reported, never undefined. */
typedef enum IntArith {
    IA_OK,
    IA_DIVZERO, /* DIV, MOD, FLOORDIV, FLOORMOD by 0 */
    IA_OVERFLOW /* the exact result does not fit in int64 */
} IntArith;
IntArith ir_int_arith(ExprKind k, int64_t a, int64_t b, int64_t *out);
/* An integer converted to integer dtype t as a C cast does (i32 wraps,
 * bool is v != 0). */
int64_t ir_int_convert(rv_dtype t, int64_t v);

/* Appends the bindings the layout's extents mention, for messages:
 * "T = 3" or "B = 4, len = [3, 0, 7, 2]" (long UF arrays are elided). */
void ir_layout_describe_env(Buf *b, const LayoutEnv *env, const Layout *l);
/* Appends "[2, 769]" (n indices) to b. */
void ir_layout_format_index(Buf *b, int n, const int64_t *idx);

/* Looks up a UF value: the offset of `args` in the UF's domain. On failure
 * sets the last error (RV_ERR_BOUNDS "len[7]: index 7 out of bounds for
 * dimension 0 (extent 5)", or RV_ERR_ARG for an unbound UF). */
rv_status ir_layout_ufun_value(const LayoutEnv *env, const Ufun *f, const int64_t *args,
                               int64_t *out);

/* The extent of level k under the prefix of rank r, and where that
 * prefix's children start. */
static inline int64_t ir_layout_extent_at(const Layout *l, int k, int64_t r) {
    const int64_t *s = l->start[k];
    return s ? s[r + 1] - s[r] : l->shape[k];
}
static inline int64_t ir_layout_start_at(const Layout *l, int k, int64_t r) {
    return l->start[k] ? l->start[k][r] : r * l->shape[k];
}

/* The offset of idx in canonical order, or -1 when idx is not a valid tuple:
 * then *bad_dim is the first dimension out of bounds and *bad_extent its
 * extent at that prefix. O(ndim). */
static inline int64_t ir_layout_offset(const Layout *l, const int64_t *idx, int *bad_dim,
                                       int64_t *bad_extent) {
    int64_t r = 0;
    for (int k = 0; k < l->ndim; k++) {
        int64_t ext = ir_layout_extent_at(l, k, r);
        if (idx[k] < 0 || idx[k] >= ext) {
            *bad_dim = k;
            *bad_extent = ext;
            return -1;
        }
        r = ir_layout_start_at(l, k, r) + idx[k];
    }
    return r;
}

/* Iteration over the valid tuples in canonical order:
 *     LayoutIter it;
 *     for (bool ok = ir_layout_iter_begin(l, &it); ok; ok = ir_layout_iter_next(l, &it))
 *         use(it.idx, it.rank[l->ndim]);   // rank[ndim] is the offset
 * rank[k] is the rank of the prefix idx[0..k-1] among the valid prefixes. */
typedef struct LayoutIter {
    int64_t idx[RV_MAX_DIMS];
    int64_t rank[RV_MAX_DIMS + 1];
} LayoutIter;
bool ir_layout_iter_begin(const Layout *l, LayoutIter *it);
bool ir_layout_iter_next(const Layout *l, LayoutIter *it);

/* ---- the storage order (symbolic) ----
 *
 * Where compiled code keeps each element of a tensor's or UF's flat
 * buffer: the canonical order above with each level's extent rounded up to
 * its pad (a UF is never padded), level by level,
 *
 *     rank_0     = 0
 *     rank_(k+1) = rank_k * E_k + i_k          (constant level, E_k padded)
 *     rank_(k+1) = start_k[rank_k] + i_k       (variable level)
 *     offset     = rank_n
 *
 * where start_k is a row-start array of the padded extents of level k
 * over all storage prefixes of length k, padding prefixes included (so no
 * level inside a padded one may be variable: ir_layout_check_pads). Those
 * arrays are AUX buffers, filled by each kernel's prelude (lower/storage.c)
 * from the UF arrays. Without padding the storage order is the canonical
 * one, so arrays pass to and from users unchanged.
 *
 * Everything here is an IR expression over sizes, UF applications (in
 * extents) and loads of the AUX buffers: the lowering indexes buffers with
 * ir_storage_offset and fills the row starts from ir_storage_extent; the
 * runtime evaluates the same expressions on the host (sizes, padded copies)
 * and `ravel build` prints them as C.
 *
 * AUX buffers are allocated before the prelude runs, so their sizes are
 * expressions over sizes alone: when a variable level follows another,
 * its prefix count is bounded by the product of the outer levels' largest
 * padded extents (from declared UF ranges; 0 below a level whose range is
 * empty), and a layout whose extents have no such bound is rejected. */
struct Storage {
    Buffer *buf; /* the elements; buf->storage points back here */
    int ndim;
    Axis *axes[RV_MAX_DIMS];    /* the layout's axes (a tensor's or UF's) */
    int pad[RV_MAX_DIMS];       /* storage padding multiple per level (1: none) */
    bool variable[RV_MAX_DIMS]; /* the extent mentions an outer axis */
    Buffer *start[RV_MAX_DIMS]; /* variable levels: the row-start AUX array */
    Expr *ext[RV_MAX_DIMS];     /* constant levels: the padded extent (mentions no axis) */
    Expr *numel;                /* elements in storage (may load AUX arrays) */
    /* bulk padding (CoRa 7.2): the tuples of levels 0..bulk_level, all of
     * them, padded to a multiple of bulk (1: none) by rows after the last,
     * bulk_rows in all; offsets of the elements are unchanged */
    int64_t bulk;
    int bulk_level;
    Expr *bulk_rows;
};

/* RAGGEDNESS PATTERNS. Row-start array start_k depends only on the padded
 * extents of levels 0..k (over sizes and UFs), not on the tensor: the
 * outputs of a ragged layernorm and of the softmax after it, both
 * `[b < B, l < len[b] pad 4, ...]`, have equal row starts. Storages laid
 * out with one StorageShare share one AUX buffer for every such array
 * whose levels 0..k have the same padded extents up to renaming the axes
 * (level j's axis stands for "the index at level j"), so the host plan
 * allocates and fills it once per call (CoRa section 7.4: redundant
 * preludes cost it 5-10x). Extents are hash-consed, so "the same" is
 * pointer equality after the renaming. */
typedef struct StorageShareEntry {
    int level;              /* k */
    Expr *ext[RV_MAX_DIMS]; /* levels 0..k's padded extents, axes renamed */
    Buffer *start;          /* the shared row-start array */
} StorageShareEntry;
typedef struct StorageShare {
    Axis *pos[RV_MAX_DIMS]; /* level j's stand-in axis, made on first use */
    Vec(StorageShareEntry) entries;
} StorageShare;
void ir_storage_share_free(StorageShare *sh);

/* Lays out `ndim` axes with pads (NULL: none) in a new buffer `name` of
 * dtype and scope, with its row-start AUX buffers `name_startK` (or those
 * of an earlier storage of share with the same pattern; share NULL: none
 * shared). Errors: RV_ERR_UNSUPPORTED when a row-start array cannot be
 * sized. */
rv_status ir_storage_init(Module *m, Storage *st, const char *name, int ndim, Axis *const *axes,
                          const int *pad, rv_dtype dtype, BufScope scope, StorageShare *share);
/* Bulk padding of st at `level` to a multiple of n (levels inside it
 * constant: checked by the schedule): numel and the buffer grow by the
 * padding rows. */
void ir_storage_bulk_pad(Module *m, Storage *st, int level, int64_t n);
/* True when some level is padded (storage differs from canonical). */
bool ir_storage_padded(const Storage *st);
/* The padded extent of level k under the prefix idx[0..k) (indices of the
 * outer levels; unused for a constant level, which mentions none): a
 * tensor-level expression, UF applications left for the caller to lower. */
Expr *ir_storage_extent(Module *m, const Storage *st, int k, Expr *const *idx);
/* The flat offset of the element at idx (one index per level). */
Expr *ir_storage_offset(Module *m, const Storage *st, Expr *const *idx);
/* The storage order on the host, for given bindings: a Layout whose
 * constant levels have their padded extents (evaluated under env) and whose
 * variable levels have the row starts start[k] (start_len[k] elements: the
 * AUX arrays as the preludes filled them; borrowed, not copied), so that
 * ir_layout_offset gives storage offsets. RV_ERR_UNSUPPORTED when a
 * row-start array is too short or not a prefix sum (the compiled storage
 * and this description disagree). */
rv_status ir_storage_eval(const LayoutEnv *env, const Storage *st, int64_t *const *start,
                          const int64_t *start_len, Layout **out);

#endif
