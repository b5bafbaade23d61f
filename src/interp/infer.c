/*
 * infer.c — rv_bindings_infer_sizes: sizes read off the shapes of bound
 * arrays.
 *
 * A caller that binds X : f32[16*T, 768] to a 48 x 768 array has said
 * T = 3; asking for --size T=3 as well is redundant and a chance to
 * disagree. So each dimension of a bound input (and each argument of a
 * bound UF array's domain) whose extent is linear in one unknown size,
 * a*S + c with integers a != 0 and c, gives S = (n - c) / a, where n is
 * the array's extent there. Sizes already bound, or found earlier, count
 * as constants, so `B*T` gives T once B is known; passes repeat until
 * nothing new is found. Extents of any other form (a UF application, a
 * ragged row length, a division, two unknown sizes) determine nothing and
 * are left to the run's own shape check, as are arrays of the wrong rank
 * (a ragged tensor's array is packed 1-D and never matches).
 *
 * Errors name the argument, the dimension and where the disagreeing value
 * came from: an extent that no integer size fits ("input X: dimension 0
 * has 50 elements, but its extent 16 * T is 50 for no integer T"), a value outside the size's declared range, and an
 * extent that contradicts a size given or inferred from another array.
 */
#include <string.h>

#include "interp/interp.h"

/* An argument with an array: its kind and name for messages, its axes. */
typedef struct InferArg {
    const char *what; /* "input" or "ufun" */
    const char *name;
    int ndim;
    Axis **axes;
    const rv_array *arr;
} InferArg;

/* Where each size's value came from: given by the caller, or the array
 * and dimension it was inferred from. */
typedef struct InferSrc {
    const InferArg *arg; /* NULL: given */
    int dim;
} InferSrc;

/* e as a*S + c, with S the one size not yet known (NULL: none); false
 * when e has another form. */
static bool linear(const Expr *e, const rv_bindings *b, const Size **s, int64_t *a, int64_t *c) {
    const Size *s1, *s2;
    int64_t a1, c1, a2, c2;
    switch (e->kind) {
    case EX_CONST_INT:
        *s = NULL, *a = 0, *c = e->u.ival;
        return true;
    case EX_SIZE:
        if (b->size_set[e->u.size->id]) {
            *s = NULL, *a = 0, *c = b->size_val[e->u.size->id];
        } else {
            *s = e->u.size, *a = 1, *c = 0;
        }
        return true;
    case EX_NEG:
        if (!linear(e->args[0], b, s, a, c))
            return false;
        *a = -*a, *c = -*c;
        return true;
    case EX_ADD:
    case EX_SUB:
        if (!linear(e->args[0], b, &s1, &a1, &c1) || !linear(e->args[1], b, &s2, &a2, &c2))
            return false;
        if (s1 && s2 && s1 != s2)
            return false;
        if (e->kind == EX_SUB)
            a2 = -a2, c2 = -c2;
        *s = s1 ? s1 : s2, *a = a1 + a2, *c = c1 + c2;
        return true;
    case EX_MUL:
        if (!linear(e->args[0], b, &s1, &a1, &c1) || !linear(e->args[1], b, &s2, &a2, &c2))
            return false;
        if (s1 && s2)
            return false; /* S*S */
        *s = s1 ? s1 : s2;
        *a = s1 ? a1 * c2 : a2 * c1;
        *c = c1 * c2;
        return true;
    default:
        return false;
    }
}

/* "input X: dimension 0 has 50 elements, but its extent 16 * T" into buf. */
static void describe(Buf *buf, const InferArg *g, int d, int64_t n) {
    char *ext = ir_expr_str(g->axes[d]->extent);
    buf_printf(buf, "%s %s: dimension %d has %lld elements, but its extent %s", g->what, g->name, d,
               (long long)n, ext);
    base_free(ext);
}

static void describe_src(Buf *buf, const rv_bindings *b, const Size *s, const InferSrc *src) {
    buf_printf(buf, "%s = %lld ", s->name, (long long)b->size_val[s->id]);
    if (!src->arg)
        buf_puts(buf, "was given");
    else
        buf_printf(buf, "was inferred from %s %s, dimension %d", src->arg->what, src->arg->name,
                   src->dim);
}

/* The first size e mentions: the one whose source a mismatch reports. */
static const Size *first_size(const Expr *e) {
    if (e->kind == EX_SIZE)
        return e->u.size;
    for (int i = 0; i < e->n; i++) {
        const Size *s = first_size(e->args[i]);
        if (s)
            return s;
    }
    return NULL;
}

/* One dimension: infer its size, or check it against the known ones.
 * Returns 1 when a size was found, 0 when nothing changed, -1 on error. */
static int infer_dim(rv_bindings *b, InferSrc *src, const InferArg *g, int d) {
    const Size *s;
    int64_t a, c, n = rv_array_shape(g->arr)[d];
    const Expr *ext = g->axes[d]->extent;
    if (!linear(ext, b, &s, &a, &c))
        return 0;
    if (!s && a == 0) {
        if (n == c)
            return 0;
        const Size *k = first_size(ext);
        if (!k)
            return 0; /* a constant extent: the run's shape check reports it */
        Buf m = {0};
        describe(&m, g, d, n);
        buf_printf(&m, " is %lld: ", (long long)c);
        describe_src(&m, b, k, &src[k->id]);
        base_error(RV_ERR_SHAPE, "%s", buf_str(&m));
        buf_free(&m);
        return -1;
    }
    if (!s || a == 0)
        return 0;
    if ((n - c) % a != 0) {
        Buf m = {0};
        describe(&m, g, d, n);
        buf_printf(&m, " is %lld for no integer %s", (long long)n, s->name);
        base_error(RV_ERR_SHAPE, "%s", buf_str(&m));
        buf_free(&m);
        return -1;
    }
    int64_t v = (n - c) / a;
    if (v < s->lo || v > s->hi) {
        Buf m = {0};
        describe(&m, g, d, n);
        buf_printf(&m, " is %lld only for %s = %lld, outside its declared range %lld..%lld",
                   (long long)n, s->name, (long long)v, (long long)s->lo, (long long)s->hi);
        base_error(RV_ERR_BOUNDS, "%s", buf_str(&m));
        buf_free(&m);
        return -1;
    }
    b->size_val[s->id] = v;
    b->size_set[s->id] = true;
    src[s->id] = (InferSrc){g, d};
    return 1;
}

rv_status rv_bindings_infer_sizes(rv_bindings *b) {
    if (!b)
        return base_error(RV_ERR_ARG, "rv_bindings_infer_sizes: no bindings");
    interp_bindings_sync(b);
    const Module *m = b->m;
    Vec(InferArg) args = {0};
    for (int i = 0; i < m->ufuns.len; i++) {
        Ufun *f = m->ufuns.data[i];
        if (b->uf_arr[f->id] && rv_array_ndim(b->uf_arr[f->id]) == f->nargs)
            vec_push(&args, ((InferArg){"ufun", f->name, f->nargs, f->args, b->uf_arr[f->id]}));
    }
    for (int i = 0; i < m->tensors.len; i++) {
        Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT && b->t_arr[t->id] && rv_array_ndim(b->t_arr[t->id]) == t->ndim)
            vec_push(&args, ((InferArg){"input", t->name, t->ndim, t->axes, b->t_arr[t->id]}));
    }
    InferSrc *src = base_xcalloc((size_t)(m->sizes.len ? m->sizes.len : 1), sizeof *src);
    rv_status st = RV_OK;
    /* each pass that finds a size may make another extent linear */
    for (bool found = true; found && st == RV_OK;) {
        found = false;
        for (int i = 0; i < args.len && st == RV_OK; i++)
            for (int d = 0; d < args.data[i].ndim && st == RV_OK; d++) {
                int r = infer_dim(b, src, &args.data[i], d);
                if (r < 0)
                    st = base_error_status();
                found |= r > 0;
            }
    }
    base_free(src);
    vec_free(&args);
    return st;
}
