/*
 * bindings.c — the values of a run: sizes, UF arrays, input arrays, and
 * the tensors the interpreter computes.
 *
 * Bindings are tables indexed by the ids of the module's sizes, UFs and
 * tensors. Arrays the caller sets are borrowed; arrays drawn by
 * rv_bindings_randomize and the results of rv_interp_run are owned. Only
 * what can be checked without the other arguments is checked here (a size
 * against its declared range, an array's dtype); shapes and UF values
 * depend on the sizes and are checked when a run starts.
 */
#include <stdatomic.h>
#include <string.h>

#include "interp/interp.h"
#include "recursive/recursive.h"

rv_bindings *rv_bindings_new(const rv_module *m) {
    if (!m) {
        base_error(RV_ERR_ARG, "rv_bindings_new: no module");
        return NULL;
    }
    rv_bindings *b = base_xcalloc(1, sizeof *b);
    b->m = m;
    interp_bindings_sync(b);
    return b;
}

void rv_bindings_free(rv_bindings *b) {
    if (!b)
        return;
    for (int i = 0; i < b->nufuns; i++) {
        rv_array_free(b->uf_own[i]);
        rv_array_free(b->uf_spare[i]);
    }
    for (int i = 0; i < b->ntensors; i++)
        rv_array_free(b->t_own[i]);
    base_free(b->size_val);
    base_free(b->size_set);
    base_free(b->uf_arr);
    base_free(b->uf_own);
    base_free(b->uf_pending);
    base_free(b->uf_spare);
    base_free(b->uf_sealed);
    base_free(b->st_numbered);
    base_free(b->scratch);
    interp_keep_free(b->keep);
    base_free(b->t_arr);
    base_free(b->t_own);
    base_free(b->t_stamp);
    base_free(b);
}

/* Grows a table of `old` entries of `size` bytes to `n`, zeroing the new
 * ones. */
static void *grow(void *p, int old, int n, size_t size) {
    char *q = base_xrealloc(p, size * (size_t)(n ? n : 1));
    memset(q + size * (size_t)old, 0, size * (size_t)(n - old));
    return q;
}

void interp_bindings_sync(rv_bindings *b) {
    const Module *m = b->m;
    if (m->sizes.len > b->nsizes || !b->size_val) {
        b->size_val = grow(b->size_val, b->nsizes, m->sizes.len, sizeof *b->size_val);
        b->size_set = grow(b->size_set, b->nsizes, m->sizes.len, sizeof *b->size_set);
        b->nsizes = m->sizes.len;
    }
    if (m->ufuns.len > b->nufuns || !b->uf_arr) {
        b->uf_arr = grow(b->uf_arr, b->nufuns, m->ufuns.len, sizeof *b->uf_arr);
        b->uf_own = grow(b->uf_own, b->nufuns, m->ufuns.len, sizeof *b->uf_own);
        b->uf_pending = grow(b->uf_pending, b->nufuns, m->ufuns.len, sizeof *b->uf_pending);
        b->uf_spare = grow(b->uf_spare, b->nufuns, m->ufuns.len, sizeof *b->uf_spare);
        b->uf_sealed = grow(b->uf_sealed, b->nufuns, m->ufuns.len, sizeof *b->uf_sealed);
        b->nufuns = m->ufuns.len;
    }
    if (m->structures.len > b->nstructs || !b->st_numbered) {
        b->st_numbered = grow(b->st_numbered, b->nstructs, m->structures.len,
                              sizeof *b->st_numbered);
        b->nstructs = m->structures.len;
    }
    if (m->tensors.len > b->ntensors || !b->t_arr) {
        b->t_arr = grow(b->t_arr, b->ntensors, m->tensors.len, sizeof *b->t_arr);
        b->t_own = grow(b->t_own, b->ntensors, m->tensors.len, sizeof *b->t_own);
        b->t_stamp = grow(b->t_stamp, b->ntensors, m->tensors.len, sizeof *b->t_stamp);
        b->ntensors = m->tensors.len;
    }
}

void interp_bindings_clear_outputs(rv_bindings *b) {
    for (int i = 0; i < b->ntensors; i++) {
        if (b->m->tensors.data[i]->op->kind == OP_INPUT)
            continue;
        rv_array_free(b->t_own[i]);
        b->t_own[i] = NULL;
        b->t_arr[i] = NULL;
    }
}

/* A new binding of tensor t: a stamp no binding of any bindings object
 * had before, so that a program keeping data derived from one binding
 * never takes another for it (the same array bound again, or another
 * bindings object's array at the same address). */
static void stamp(rv_bindings *b, const Tensor *t) {
    static _Atomic uint64_t next = 1;
    b->t_stamp[t->id] = atomic_fetch_add(&next, 1);
}

uint64_t interp_bindings_stamp(const rv_bindings *b, const Tensor *t) {
    return t->id < b->ntensors && b->t_arr[t->id] ? b->t_stamp[t->id] : 0;
}

void interp_bindings_own_tensor(rv_bindings *b, const Tensor *t, rv_array *a) {
    interp_bindings_sync(b);
    if (b->t_own[t->id] != a)
        rv_array_free(b->t_own[t->id]);
    b->t_own[t->id] = a;
    b->t_arr[t->id] = a;
    stamp(b, t);
}

rv_array *interp_bindings_take_tensor(rv_bindings *b, const Tensor *t) {
    interp_bindings_sync(b);
    rv_array *a = b->t_own[t->id];
    if (a) {
        b->t_own[t->id] = NULL;
        b->t_arr[t->id] = NULL;
        stamp(b, t);
    }
    return a;
}

void interp_bindings_own_ufun(rv_bindings *b, const Ufun *f, rv_array *a) {
    interp_bindings_sync(b);
    rv_array *old = b->uf_own[f->id], **spare = &b->uf_spare[f->id];
    if (old != a && old) {
        /* the released array becomes the spare (uf_spare), unless the
         * spare is larger: batches of varying sizes then reach the
         * largest one's arrays and allocate no more */
        if (*spare && (*spare)->capacity > old->capacity) {
            rv_array_free(old);
        } else {
            rv_array_free(*spare);
            *spare = old;
        }
    }
    b->uf_own[f->id] = a;
    b->uf_arr[f->id] = a;
    b->uf_pending[f->id] = false; /* a new binding */
    b->uf_sealed[f->id] = false;  /* set_linear seals after this */
}

/* A structure's numbering seal holds while its four arrays are sealed
 * (each rebind clears its UF's seal). */
void interp_bindings_take_seals(rv_bindings *b, Interp *in) {
    const Module *m = b->m;
    for (int i = 0; i < m->structures.len && i < b->nstructs; i++) {
        const Structure *st = m->structures.data[i];
        in->numbered[i] = b->st_numbered[i] && b->uf_sealed[st->nchild->id] &&
                          b->uf_sealed[st->child->id] && b->uf_sealed[st->batch_begin->id] &&
                          b->uf_sealed[st->batch_length->id];
        b->st_numbered[i] = false;
    }
    memset(b->uf_sealed, 0, sizeof *b->uf_sealed * (size_t)b->nufuns);
}

/* Lookups by name, each over one kind of object (names are one namespace
 * per module, so at most one of them matches). */
static const Size *find_size(const Module *m, const char *name) {
    for (int i = 0; i < m->sizes.len; i++)
        if (strcmp(m->sizes.data[i]->name, name) == 0)
            return m->sizes.data[i];
    return NULL;
}

static const Ufun *find_ufun(const Module *m, const char *name) {
    for (int i = 0; i < m->ufuns.len; i++)
        if (strcmp(m->ufuns.data[i]->name, name) == 0)
            return m->ufuns.data[i];
    return NULL;
}

static const Tensor *find_tensor(const Module *m, const char *name) {
    for (int i = 0; i < m->tensors.len; i++)
        if (strcmp(m->tensors.data[i]->name, name) == 0)
            return m->tensors.data[i];
    return NULL;
}

rv_status rv_bindings_set_size(rv_bindings *b, const char *name, int64_t v) {
    if (!b || !name)
        return base_error(RV_ERR_ARG, "rv_bindings_set_size: no bindings or name");
    interp_bindings_sync(b);
    const Size *s = find_size(b->m, name);
    if (!s)
        return base_error(RV_ERR_ARG, "the program has no size named '%s'", name);
    if (v < s->lo || v > s->hi)
        return base_error(RV_ERR_BOUNDS, "size %s = %lld outside declared range %lld..%lld",
                          s->name, (long long)v, (long long)s->lo, (long long)s->hi);
    b->size_val[s->id] = v;
    b->size_set[s->id] = true;
    /* the seals' ranges and numbering were checked under the old value */
    memset(b->uf_sealed, 0, sizeof *b->uf_sealed * (size_t)b->nufuns);
    return RV_OK;
}

rv_status rv_bindings_set_array(rv_bindings *b, const char *name, const rv_array *a) {
    if (!b || !name || !a)
        return base_error(RV_ERR_ARG, "rv_bindings_set_array: no bindings, name or array");
    interp_bindings_sync(b);
    const Module *m = b->m;
    const Ufun *f = find_ufun(m, name);
    if (f) {
        rv_dtype t = rv_array_dtype(a);
        if (t != RV_I32 && t != RV_I64)
            return base_error(RV_ERR_SHAPE, "ufun %s: expected an i32 or i64 array, got %s",
                              f->name, rv_dtype_name(t));
        interp_bindings_own_ufun(b, f, NULL);
        b->uf_arr[f->id] = a;
        return RV_OK;
    }
    const Tensor *t = find_tensor(m, name);
    if (t && t->op->kind == OP_INPUT) {
        if (rv_array_dtype(a) != t->dtype)
            return base_error(RV_ERR_SHAPE, "input %s: expected a %s array, got %s", t->name,
                              rv_dtype_name(t->dtype), rv_dtype_name(rv_array_dtype(a)));
        interp_bindings_own_tensor(b, t, NULL);
        b->t_arr[t->id] = a;
        stamp(b, t);
        return RV_OK;
    }
    if (t)
        return base_error(RV_ERR_ARG,
                          "'%s' is computed by the program; only inputs and ufuns "
                          "are bound to arrays",
                          name);
    if (find_size(m, name))
        return base_error(RV_ERR_ARG, "'%s' is a size; bind it with rv_bindings_set_size", name);
    return base_error(RV_ERR_ARG, "the program has no input or ufun named '%s'", name);
}

rv_status interp_bindings_adopt_array(rv_bindings *b, const char *name, rv_array *a) {
    rv_status st = rv_bindings_set_array(b, name, a);
    if (st != RV_OK)
        return st;
    const Ufun *f = find_ufun(b->m, name);
    if (f)
        interp_bindings_own_ufun(b, f, a);
    else
        interp_bindings_own_tensor(b, find_tensor(b->m, name), a);
    return RV_OK;
}

rv_status rv_bindings_inherit(rv_bindings *b, const rv_bindings *from) {
    if (!b || !from)
        return base_error(RV_ERR_ARG, "rv_bindings_inherit: no bindings");
    if (b->m != from->m)
        return base_error(RV_ERR_ARG, "rv_bindings_inherit: the bindings are of different modules");
    interp_bindings_sync(b);
    const Module *m = b->m;
    for (int i = 0; i < from->nsizes; i++)
        if (from->size_set[i]) {
            b->size_val[i] = from->size_val[i];
            b->size_set[i] = true;
            memset(b->uf_sealed, 0, sizeof *b->uf_sealed * (size_t)b->nufuns);
        }
    for (int i = 0; i < from->nufuns; i++)
        if (from->uf_arr[i]) {
            interp_bindings_own_ufun(b, m->ufuns.data[i], NULL);
            b->uf_arr[i] = from->uf_arr[i];
            b->uf_pending[i] = from->uf_pending[i]; /* b's runs compute b's own */
        }
    for (int i = 0; i < from->ntensors; i++) {
        const Tensor *t = m->tensors.data[i];
        if (t->op->kind != OP_INPUT || !from->t_arr[i])
            continue;
        interp_bindings_own_tensor(b, t, NULL);
        b->t_arr[i] = from->t_arr[i];
        /* the same binding, not a new one: what a program derived from
         * it (a param's kept pack) stays valid for b's runs */
        b->t_stamp[i] = from->t_stamp[i];
    }
    return RV_OK;
}

rv_status rv_bindings_reset(rv_bindings *b, const rv_bindings *from) {
    if (!b)
        return base_error(RV_ERR_ARG, "rv_bindings_reset: no bindings");
    if (from && b->m != from->m)
        return base_error(RV_ERR_ARG, "rv_bindings_reset: the bindings are of different modules");
    interp_bindings_sync(b);
    const Module *m = b->m;
    for (int i = 0; i < b->nsizes; i++)
        b->size_set[i] = false;
    for (int i = 0; i < b->nufuns; i++) {
        interp_bindings_own_ufun(b, m->ufuns.data[i], NULL);
        b->uf_arr[i] = NULL;
    }
    /* inputs only: the computed tensors' arrays stay for the next run */
    for (int i = 0; i < b->ntensors; i++)
        if (m->tensors.data[i]->op->kind == OP_INPUT) {
            rv_array_free(b->t_own[i]);
            b->t_own[i] = NULL;
            b->t_arr[i] = NULL;
            b->t_stamp[i] = 0;
        }
    return from ? rv_bindings_inherit(b, from) : RV_OK;
}

int rv_bindings_has(const rv_bindings *b, const char *name) {
    return b && name &&
           (rv_bindings_get_array(b, name) != NULL || rv_bindings_get_size(b, name) >= 0);
}

/* Reading a structure's unrolled partition (obj: its size or one of its
 * UFs) while it is left to the run (uf_pending) computes it first, so a
 * reader, or a copy of the bindings made by reading them, sees the
 * batch's partition: a cache filled on demand, the bound batch unchanged. */
static void settle_unroll(const rv_bindings *b, const void *obj) {
    const Module *m = b->m;
    for (int i = 0; obj && i < m->structures.len; i++) {
        const Structure *st = m->structures.data[i];
        if (st->unroll_node && (obj == st->nunroll || obj == st->unroll_begin ||
                                obj == st->unroll_length || obj == st->unroll_node))
            interp_bindings_unroll((rv_bindings *)b, st);
    }
}

int64_t rv_bindings_get_size(const rv_bindings *b, const char *name) {
    if (!b || !name)
        return -1;
    const Size *s = find_size(b->m, name);
    settle_unroll(b, s);
    return s && s->id < b->nsizes && b->size_set[s->id] ? b->size_val[s->id] : -1;
}

const rv_array *rv_bindings_get_array(const rv_bindings *b, const char *name) {
    if (!b || !name)
        return NULL;
    const Ufun *f = find_ufun(b->m, name);
    settle_unroll(b, f);
    if (f)
        return f->id < b->nufuns ? b->uf_arr[f->id] : NULL;
    const Tensor *t = find_tensor(b->m, name);
    if (t)
        return t->id < b->ntensors ? b->t_arr[t->id] : NULL;
    return NULL;
}

int rv_bindings_get_info(const rv_bindings *b, const char *name, rv_array_info *out) {
    const rv_array *a = rv_bindings_get_array(b, name);
    if (!a || !out)
        return 0;
    rv_array_get_info(a, out);
    return 1;
}

rv_status rv_bindings_randomize(rv_bindings *b, uint64_t seed) {
    if (!b)
        return base_error(RV_ERR_ARG, "rv_bindings_randomize: no bindings");
    Interp in;
    rv_status st = interp_prepare(&in, b->m, b, &seed, NULL);
    interp_release(&in);
    return st;
}

/* ---- structures bound from a linearized batch ---- */

/* A new owned array of n integers in f's array dtype (i32 when its range
 * fits, as compiled code keeps it: the array then passes in place),
 * uninitialized: its callers write every element. */
static rv_array *uf_array(const Ufun *f, int64_t n) {
    return ir_array_new_uninit(ir_ufun_dtype(f), 1, &n);
}

static void uf_array_set(rv_array *a, int64_t i, int64_t v) {
    if (rv_array_dtype(a) == RV_I32)
        ((int32_t *)rv_array_data(a))[i] = (int32_t)v;
    else
        ((int64_t *)rv_array_data(a))[i] = v;
}

/* Writes 0..n-1 to a's elements 0..n-1. */
static void uf_array_iota(rv_array *a, int64_t n) {
    void *d = rv_array_data(a);
    if (rv_array_dtype(a) == RV_I32)
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)d)[i] = (int32_t)i;
    else
        for (int64_t i = 0; i < n; i++)
            ((int64_t *)d)[i] = i;
}

/* Writes n values src[i * stride] to a's elements 0..n-1, a in either of
 * its dtypes: one call per array, not per element. */
static void uf_array_copy(rv_array *a, const int32_t *src, int64_t n, int64_t stride) {
    void *d = rv_array_data(a);
    if (rv_array_dtype(a) == RV_I32 && stride == 1)
        memcpy(d, src, sizeof(int32_t) * (size_t)n);
    else if (rv_array_dtype(a) == RV_I32)
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)d)[i] = src[i * stride];
    else
        for (int64_t i = 0; i < n; i++)
            ((int64_t *)d)[i] = src[i * stride];
}

static rv_status size_in_range(const Structure *st, const Size *s, int64_t v, const char *what) {
    if (v >= s->lo && v <= s->hi)
        return RV_OK;
    return base_error(RV_ERR_BOUNDS,
                      "structure %s: the batch has %lld %s, outside the declared range %lld..%lld "
                      "of %s",
                      st->name, (long long)v, what, (long long)s->lo, (long long)s->hi, s->name);
}

/* An array of n integers for f: f's spare (uf_spare) reshaped when its
 * memory holds them, taken from it; else a new one. Its data are stale. */
static rv_array *uf_array_reuse(rv_bindings *b, const Ufun *f, int64_t n) {
    rv_array *a = b->uf_spare[f->id];
    if (a && ir_array_reshape_within(a, ir_ufun_dtype(f), 1, &n)) {
        b->uf_spare[f->id] = NULL;
        return a;
    }
    return uf_array(f, n);
}

/* Gives an array uf_array_reuse returned back (a batch refused after it
 * was taken): f's spare again, so a refused call allocates nothing next. */
static void uf_array_release(rv_bindings *b, const Ufun *f, rv_array *a) {
    if (!b->uf_spare[f->id])
        b->uf_spare[f->id] = a;
    else
        rv_array_free(a);
}

/* The bindings' scratch of at least n bytes (its contents not kept). */
static void *scratch(rv_bindings *b, size_t n) {
    if (n > b->scratch_cap) {
        base_free(b->scratch);
        b->scratch = base_xmalloc(n);
        b->scratch_cap = n;
    }
    return b->scratch;
}

/* Checks what of the batch needs no pass over its children: its counts
 * against each other and against the structure (its K, its data columns,
 * its sizes' ranges), and every node's number of children; sets *nedges
 * to the number of child entries. The children are checked as they are
 * copied (interp_bindings_set_linear). */
static rv_status check_linear(const Structure *st, const rv_linear *lin, bool with_data,
                              int64_t *nedges) {
    const char *T = st->name;
    int32_t N = lin->num_nodes, K = lin->max_children;
    if (N < 1 || lin->num_batches < 1 || K < 1 || lin->width < 0 || lin->num_structs < 1 ||
        !lin->nchild || !lin->child || !lin->batch_begin || !lin->batch_length || !lin->root ||
        (lin->width > 0 && !lin->data))
        return base_error(RV_ERR_ARG,
                          "structure %s: the batch is empty or not linearized (rv_linearize "
                          "fills an rv_linear)",
                          T);
    if (st->unroll_node && lin->num_unroll != 0 &&
        (lin->num_unroll < 0 || !lin->unroll_begin || !lin->unroll_length || !lin->unroll_node))
        return base_error(RV_ERR_ARG,
                          "structure %s: the batch's unrolled partition is incomplete "
                          "(rv_linearize fills it)",
                          T);
    if (K > st->max_children)
        return base_error(RV_ERR_ARG,
                          "structure %s: the batch allows %d children per node, but %s declares "
                          "at most %d",
                          T, K, T, st->max_children);
    if (with_data && lin->width < st->ndata)
        return base_error(RV_ERR_ARG,
                          "structure %s declares %d data column%s, but the batch has %d integer%s "
                          "per node",
                          T, st->ndata, st->ndata == 1 ? "" : "s", lin->width,
                          lin->width == 1 ? "" : "s");
    rv_status s;
    if ((s = size_in_range(st, st->nodes, N, "nodes")) != RV_OK ||
        (st->root && (s = size_in_range(st, st->count, lin->num_structs, "structures")) != RV_OK))
        return s;
    int64_t e = 0;
    for (int32_t n = 0; n < N; n++) {
        int32_t nc = lin->nchild[n];
        if (nc < 0 || nc > K)
            return base_error(RV_ERR_ARG, "structure %s: node %d of the batch has %d children (0..%d)",
                              T, n, nc, K);
        e += nc;
    }
    *nedges = e;
    return RV_OK;
}

/* Do the batch's dynamic batches lie consecutive from node 0 (the last
 * batch) to node N-1, each of 1..N nodes, as rt_check_numbering requires?
 * (*in_range: every begin in 0..N-1 and length in 1..N, their UFs'
 * declared ranges.) O(batches). */
static bool batches_consecutive(const rv_linear *lin, bool *in_range) {
    int32_t N = lin->num_nodes;
    int64_t top = 0;
    bool consecutive = true;
    *in_range = true;
    for (int32_t b = lin->num_batches - 1; b >= 0; b--) {
        int32_t at = lin->batch_begin[b], len = lin->batch_length[b];
        *in_range = *in_range && at >= 0 && at < N && len >= 1 && len <= N;
        consecutive = consecutive && at == top && len >= 1;
        top += len;
    }
    return *in_range && consecutive && top == N;
}

/* Copies the batch's children into child (packed rows, as docs/ir.md
 * lays out child[n, k < nchild[n]]) and its other per-node arrays, checking
 * each child as it goes: one pass over the nodes. A sequence or tree
 * structure promises one parent per node (lowering may compute a child
 * inside its parent); a DAG structure takes any batch, and a tree or DAG
 * structure takes chains. parents: scratch for N nodes.
 *
 * *numbered (with `batches`, the batches consecutive): the pass also
 * checks what rt_check_numbering checks with batches, without refusing
 * the batch (the interpreter runs any numbering; a compiled recursion's
 * run refuses it, naming the node): batch 0 holds exactly the leaves and
 * every child lies in a batch before its parent's, so above it. */
static rv_status copy_nodes(const Structure *st, const rv_linear *lin, rv_array *nchild,
                            rv_array *child, rv_array *const *data, int ndata, int32_t *parents,
                            bool batches, bool *numbered) {
    const char *T = st->name;
    int32_t N = lin->num_nodes, K = lin->max_children;
    /* the node's batch bt and where bt ends */
    int32_t bt = lin->num_batches - 1;
    int64_t end = batches ? (int64_t)lin->batch_begin[bt] + lin->batch_length[bt] : 0;
    bool ok = batches;
    bool tree = st->kind != RV_STRUCT_DAG;
    if (tree)
        memset(parents, 0xff, sizeof(int32_t) * (size_t)N);
    int32_t *c32 = rv_array_dtype(child) == RV_I32 ? rv_array_data(child) : NULL;
    int64_t *c64 = c32 ? NULL : rv_array_data(child);
    int64_t e = 0;
    for (int32_t n = 0; n < N; n++) {
        if (ok) {
            while (n >= end) {
                bt--;
                end = (int64_t)lin->batch_begin[bt] + lin->batch_length[bt];
            }
            ok = (lin->nchild[n] == 0) == (bt == 0);
        }
        for (int32_t k = 0; k < lin->nchild[n]; k++) {
            int32_t c = lin->child[(int64_t)n * K + k];
            if (c < 0 || c >= N)
                return base_error(RV_ERR_ARG,
                                  "structure %s: child %d of node %d of the batch is %d, outside "
                                  "0..%d",
                                  T, k, n, c, N - 1);
            if (tree && parents[c] >= 0)
                return base_error(RV_ERR_ARG,
                                  "structure %s is a %s, but node %d of the batch has two parents "
                                  "(%d and %d); bind a DAG batch to a dag structure",
                                  T, st->kind == RV_STRUCT_TREE ? "tree" : "sequence", c,
                                  parents[c], n);
            if (tree)
                parents[c] = n;
            ok = ok && c >= end;
            if (c32)
                c32[e++] = c;
            else
                c64[e++] = c;
        }
    }
    *numbered = ok;
    uf_array_copy(nchild, lin->nchild, N, 1); /* checked by check_linear */
    for (int c = 0; c < ndata; c++)
        uf_array_copy(data[c], lin->data + c, N, lin->width);
    return RV_OK;
}

rv_status interp_bindings_set_linear(rv_bindings *b, const Structure *st, const rv_linear *lin,
                                     bool with_data) {
    interp_bindings_sync(b);
    int64_t nedges = 0;
    rv_status s = check_linear(st, lin, with_data, &nedges);
    if (s != RV_OK)
        return s;
    int32_t N = lin->num_nodes, NB = lin->num_batches;
    /* every array first, so a failure binds nothing; in the spares the
     * previous binding or reset left (uf_array_reuse): no allocation per
     * call once they are as large as the calls' batches */
    enum { NCHILD, CHILD, ROOT, BEGIN, LENGTH, UBEGIN, ULENGTH, UNODE, NFIXED };
    int narr = NFIXED + (with_data ? st->ndata : 0);
    size_t tables = (size_t)narr * (sizeof(Ufun *) + sizeof(rv_array *) + sizeof(int64_t));
    char *mem = scratch(b, tables + sizeof(int32_t) * (size_t)N);
    const Ufun **uf = (const Ufun **)mem;
    rv_array **arr = (rv_array **)(mem + (size_t)narr * sizeof(Ufun *));
    int64_t *len = (int64_t *)(mem + (size_t)narr * (sizeof(Ufun *) + sizeof(rv_array *)));
    int32_t *parents = (int32_t *)(mem + tables);
    uf[NCHILD] = st->nchild, len[NCHILD] = N;
    uf[CHILD] = st->child, len[CHILD] = nedges;
    uf[ROOT] = st->root, len[ROOT] = lin->num_structs;
    uf[BEGIN] = st->batch_begin, len[BEGIN] = NB;
    uf[LENGTH] = st->batch_length, len[LENGTH] = NB;
    /* NULL for a DAG structure, which takes no unrolled partition */
    uf[UBEGIN] = st->unroll_begin, len[UBEGIN] = lin->num_unroll;
    uf[ULENGTH] = st->unroll_length, len[ULENGTH] = lin->num_unroll;
    uf[UNODE] = st->unroll_node, len[UNODE] = N;
    for (int c = 0; c < narr - NFIXED; c++)
        uf[NFIXED + c] = st->data[c], len[NFIXED + c] = N;
    for (int i = 0; i < narr; i++) {
        arr[i] = NULL;
        if (uf[i] && !(arr[i] = uf_array_reuse(b, uf[i], len[i]))) {
            s = base_error(RV_ERR_OOM, "structure %s: cannot allocate %lld values for %s",
                           st->name, (long long)len[i], uf[i]->name);
            goto fail;
        }
    }
    bool batches_in_range, numbered = false;
    bool batches = batches_consecutive(lin, &batches_in_range);
    if ((s = copy_nodes(st, lin, arr[NCHILD], arr[CHILD], arr + NFIXED, narr - NFIXED, parents,
                        batches, &numbered)) != RV_OK)
        goto fail;
    if (st->root)
        uf_array_copy(arr[ROOT], lin->root, lin->num_structs, 1);
    uf_array_copy(arr[BEGIN], lin->batch_begin, NB, 1);
    uf_array_copy(arr[LENGTH], lin->batch_length, NB, 1);
    if (st->unroll_node && lin->num_unroll) {
        uf_array_copy(arr[UBEGIN], lin->unroll_begin, lin->num_unroll, 1);
        uf_array_copy(arr[ULENGTH], lin->unroll_length, lin->num_unroll, 1);
        uf_array_copy(arr[UNODE], lin->unroll_node, N, 1);
    }
    /* without a partition (num_unroll 0, as rv_linearize leaves it): the
     * nodes in order, until a run that reads it computes it
     * (interp_bindings_unroll) */
    if (st->unroll_node && !lin->num_unroll)
        uf_array_iota(arr[UNODE], N);
    for (int i = 0; i < narr; i++)
        if (uf[i])
            interp_bindings_own_ufun(b, uf[i], arr[i]);
    if (st->unroll_node)
        b->uf_pending[st->unroll_node->id] = lin->num_unroll == 0;
    const Size *sz[] = {st->nodes, st->nbatch, st->root ? st->count : NULL, st->nunroll};
    int64_t v[] = {N, NB, lin->num_structs, lin->num_unroll};
    for (int i = 0; i < 4; i++)
        if (sz[i]) {
            /* a size another structure's seals were checked under */
            if (b->size_set[sz[i]->id] && b->size_val[sz[i]->id] != v[i])
                memset(b->uf_sealed, 0, sizeof *b->uf_sealed * (size_t)b->nufuns);
            b->size_val[sz[i]->id] = v[i];
            b->size_set[sz[i]->id] = true;
        }
    /* checked above against their declared ranges (0..K, 0..N-1; the
     * batches' 0..N-1 and 1..N), for the next run not to check again */
    b->uf_sealed[st->nchild->id] = b->uf_sealed[st->child->id] = true;
    b->uf_sealed[st->batch_begin->id] = b->uf_sealed[st->batch_length->id] = batches_in_range;
    b->st_numbered[st->id] = numbered;
    return RV_OK;
fail:
    for (int i = 0; i < narr; i++)
        if (arr[i])
            uf_array_release(b, uf[i], arr[i]);
    return s;
}

static int64_t uf_array_get(const rv_array *a, int64_t i) {
    if (rv_array_dtype(a) == RV_I32)
        return ((const int32_t *)rv_array_cdata(a))[i];
    return ((const int64_t *)rv_array_cdata(a))[i];
}

rv_status interp_bindings_unroll(rv_bindings *b, const Structure *st) {
    interp_bindings_sync(b);
    if (!st->unroll_node || !b->uf_pending[st->unroll_node->id])
        return RV_OK;
    const rv_array *nc = b->uf_arr[st->nchild->id], *ch = b->uf_arr[st->child->id];
    int64_t N = b->size_set[st->nodes->id] ? b->size_val[st->nodes->id] : 0;
    /* the arrays rebound since to something else: left as they are, for
     * the run's own checks to name */
    if (!nc || !ch || N < 1 || N > INT32_MAX || rv_array_numel(nc) != N)
        return RV_OK;
    /* int32 copies (nchild, row starts, child) and the partition's arrays
     * (scratch, batch begin and length: at most N batches, node) */
    int64_t E = rv_array_numel(ch);
    int32_t *nchild = base_xmalloc(sizeof(int32_t) * (size_t)(N + (N + 1) + E + 4 * N));
    int32_t *start = nchild + N, *child = start + N + 1, *s = child + E;
    int32_t *begin = s + N, *count = begin + N, *node = count + N;
    bool ok = true;
    start[0] = 0;
    for (int64_t n = 0; ok && n < N; n++) {
        int64_t k = uf_array_get(nc, n);
        ok = k >= 0 && k <= st->max_children && start[n] + k <= E;
        nchild[n] = (int32_t)k;
        start[n + 1] = ok ? start[n] + (int32_t)k : 0;
    }
    for (int64_t e = 0; ok && e < E; e++) {
        int64_t c = uf_array_get(ch, e);
        ok = c >= 0 && c < N;
        child[e] = (int32_t)c;
    }
    rv_status r = RV_OK;
    if (ok && start[N] == E) {
        int32_t nu = rec_unroll_partition((int32_t)N, 0, start, child, nchild, begin, count, node,
                                          s);
        rv_array *ub = uf_array(st->unroll_begin, nu), *ul = uf_array(st->unroll_length, nu);
        rv_array *un = uf_array(st->unroll_node, N);
        if (!ub || !ul || !un) {
            rv_array_free(ub);
            rv_array_free(ul);
            rv_array_free(un);
            r = base_error(RV_ERR_OOM, "structure %s: cannot allocate its unrolled partition",
                           st->name);
        } else {
            for (int32_t u = 0; u < nu; u++) {
                uf_array_set(ub, u, begin[u]);
                uf_array_set(ul, u, count[u]);
            }
            for (int64_t j = 0; j < N; j++)
                uf_array_set(un, j, node[j]);
            interp_bindings_own_ufun(b, st->unroll_begin, ub);
            interp_bindings_own_ufun(b, st->unroll_length, ul);
            interp_bindings_own_ufun(b, st->unroll_node, un); /* no longer pending */
            b->size_val[st->nunroll->id] = nu;
            b->size_set[st->nunroll->id] = true;
        }
    }
    base_free(nchild);
    return r;
}

rv_status rv_bindings_set_linear(rv_bindings *b, const char *structure, const rv_linear *lin) {
    if (!b || !structure || !lin)
        return base_error(RV_ERR_ARG, "rv_bindings_set_linear: no bindings, structure or batch");
    const Structure *st = rv_module_structure(b->m, structure);
    if (!st)
        return base_error(RV_ERR_ARG, "the program has no structure named '%s'", structure);
    return interp_bindings_set_linear(b, st, lin, true);
}
