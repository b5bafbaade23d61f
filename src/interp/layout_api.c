/*
 * layout_api.c — rv_bindings_layout: a tensor's canonical layout under the
 * bound sizes and UF arrays, as plain data.
 *
 * A caller that exchanges ragged tensors (the Python package's Ragged
 * arrays) needs to know where each row of a 1-D array starts, and the row
 * extents are expressions over sizes and UFs only ravel can evaluate. The
 * layout is evaluated exactly as a run evaluates it (interp_prepare_env,
 * then ir_layout_eval), so the rows a caller sees are those the kernels
 * read and write.
 */
#include <string.h>

#include "interp/interp.h"

struct rv_layout {
    Layout *lay;
};

rv_status rv_bindings_layout(rv_bindings *b, const char *name, rv_layout **out) {
    if (!b || !name || !out)
        return base_error(RV_ERR_ARG, "rv_bindings_layout: no bindings, name or result");
    *out = NULL;
    const Module *m = b->m;
    const Tensor *t = NULL;
    const Ufun *f = NULL;
    for (int i = 0; i < m->tensors.len && !t; i++)
        if (strcmp(m->tensors.data[i]->name, name) == 0)
            t = m->tensors.data[i];
    for (int i = 0; i < m->ufuns.len && !t && !f; i++)
        if (strcmp(m->ufuns.data[i]->name, name) == 0)
            f = m->ufuns.data[i];
    if (!t && !f)
        return base_error(RV_ERR_ARG, "the program has no tensor or ufun named '%s'", name);
    if (t && !t->complete)
        return base_error(RV_ERR_TYPE, "tensor %s: its definition is incomplete", name);
    Interp in;
    rv_status st = interp_prepare_env(&in, m, b, NULL, NULL);
    Layout *l = NULL;
    if (st == RV_OK) {
        char what[300];
        snprintf(what, sizeof what, "%s %s", t ? "tensor" : "ufun", name);
        st = t ? ir_layout_eval(&in.env, what, t->ndim, t->axes, &l)
               : ir_layout_eval(&in.env, what, f->nargs, f->args, &l);
    }
    interp_release(&in);
    if (st != RV_OK)
        return st;
    *out = base_xcalloc(1, sizeof **out);
    (*out)->lay = l;
    return RV_OK;
}

int rv_layout_ndim(const rv_layout *l) {
    return l ? l->lay->ndim : 0;
}

const char *rv_layout_dim_name(const rv_layout *l, int k) {
    return l && k >= 0 && k < l->lay->ndim ? l->lay->axes[k]->name : NULL;
}

int64_t rv_layout_count(const rv_layout *l, int k) {
    return l && k >= 0 && k <= l->lay->ndim ? l->lay->count[k] : 0;
}

int64_t rv_layout_extent(const rv_layout *l, int k) {
    return l && k >= 0 && k < l->lay->ndim && !l->lay->start[k] ? l->lay->shape[k] : -1;
}

const int64_t *rv_layout_starts(const rv_layout *l, int k) {
    return l && k >= 0 && k < l->lay->ndim ? l->lay->start[k] : NULL;
}

void rv_layout_free(rv_layout *l) {
    if (!l)
        return;
    ir_layout_free(l->lay);
    base_free(l);
}
