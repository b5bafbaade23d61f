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
#include <string.h>

#include "interp/interp.h"

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
    for (int i = 0; i < b->nufuns; i++)
        rv_array_free(b->uf_own[i]);
    for (int i = 0; i < b->ntensors; i++)
        rv_array_free(b->t_own[i]);
    base_free(b->size_val);
    base_free(b->size_set);
    base_free(b->uf_arr);
    base_free(b->uf_own);
    base_free(b->t_arr);
    base_free(b->t_own);
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
        b->nufuns = m->ufuns.len;
    }
    if (m->tensors.len > b->ntensors || !b->t_arr) {
        b->t_arr = grow(b->t_arr, b->ntensors, m->tensors.len, sizeof *b->t_arr);
        b->t_own = grow(b->t_own, b->ntensors, m->tensors.len, sizeof *b->t_own);
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

void interp_bindings_own_tensor(rv_bindings *b, const Tensor *t, rv_array *a) {
    interp_bindings_sync(b);
    if (b->t_own[t->id] != a)
        rv_array_free(b->t_own[t->id]);
    b->t_own[t->id] = a;
    b->t_arr[t->id] = a;
}

void interp_bindings_own_ufun(rv_bindings *b, const Ufun *f, rv_array *a) {
    interp_bindings_sync(b);
    if (b->uf_own[f->id] != a)
        rv_array_free(b->uf_own[f->id]);
    b->uf_own[f->id] = a;
    b->uf_arr[f->id] = a;
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

int rv_bindings_has(const rv_bindings *b, const char *name) {
    return b && name &&
           (rv_bindings_get_array(b, name) != NULL || rv_bindings_get_size(b, name) >= 0);
}

int64_t rv_bindings_get_size(const rv_bindings *b, const char *name) {
    if (!b || !name)
        return -1;
    const Size *s = find_size(b->m, name);
    return s && s->id < b->nsizes && b->size_set[s->id] ? b->size_val[s->id] : -1;
}

const rv_array *rv_bindings_get_array(const rv_bindings *b, const char *name) {
    if (!b || !name)
        return NULL;
    const Ufun *f = find_ufun(b->m, name);
    if (f)
        return f->id < b->nufuns ? b->uf_arr[f->id] : NULL;
    const Tensor *t = find_tensor(b->m, name);
    if (t)
        return t->id < b->ntensors ? b->t_arr[t->id] : NULL;
    return NULL;
}

rv_status rv_bindings_randomize(rv_bindings *b, uint64_t seed) {
    if (!b)
        return base_error(RV_ERR_ARG, "rv_bindings_randomize: no bindings");
    Interp in;
    rv_status st = interp_prepare(&in, b->m, b, &seed, NULL);
    interp_release(&in);
    return st;
}
