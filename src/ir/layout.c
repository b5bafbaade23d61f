/*
 * layout.c — the canonical storage order of tensors and UF domains
 * (layout.h states the order; this file evaluates it).
 *
 * A layout is evaluated once per set of bindings: constant levels (extents
 * that mention no axis) are evaluated once; variable levels (extents that
 * mention an outer axis, through any expression) are evaluated once per
 * valid prefix by a depth-first walk in lexicographic order, which records
 * each level's prefix sums (its `start` array) as it goes. The walk stops at
 * the last variable level: the constant levels below it need no per-prefix
 * data, so a [b < B, l < len[b], d < 768] tensor costs O(B + sum len), not
 * O(numel). Lookups and iteration then only read those arrays.
 *
 * Extents are evaluated by ir_eval_index, an exact int64 evaluator of index
 * expressions. Its integer semantics (C truncating `/` and `%`, floordiv,
 * floormod, overflow and division by zero reported, never undefined) are
 * shared with the interpreter through ir_int_arith, so storage and
 * evaluation never disagree about what an index means.
 */
#include "ir/layout.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ integers */

/* Checked int64 arithmetic (no undefined behaviour on overflow). */
static bool add_ovf(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__)
    return __builtin_add_overflow(a, b, r);
#else
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        return true;
    *r = a + b;
    return false;
#endif
}

static bool sub_ovf(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__)
    return __builtin_sub_overflow(a, b, r);
#else
    if ((b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b))
        return true;
    *r = a - b;
    return false;
#endif
}

static bool mul_ovf(int64_t a, int64_t b, int64_t *r) {
#if defined(__GNUC__)
    return __builtin_mul_overflow(a, b, r);
#else
    if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
              : (b > 0 ? a < INT64_MIN / b : (a != 0 && b < INT64_MAX / a)))
        return true;
    *r = a * b;
    return false;
#endif
}

IntArith ir_int_arith(ExprKind k, int64_t a, int64_t b, int64_t *out) {
    switch (k) {
    case EX_ADD:
        return add_ovf(a, b, out) ? IA_OVERFLOW : IA_OK;
    case EX_SUB:
        return sub_ovf(a, b, out) ? IA_OVERFLOW : IA_OK;
    case EX_MUL:
        return mul_ovf(a, b, out) ? IA_OVERFLOW : IA_OK;
    case EX_DIV:
    case EX_MOD:
    case EX_FLOORDIV:
    case EX_FLOORMOD: {
        if (b == 0)
            return IA_DIVZERO;
        if (a == INT64_MIN && b == -1) {
            if (k == EX_MOD || k == EX_FLOORMOD) {
                *out = 0;
                return IA_OK;
            }
            return IA_OVERFLOW;
        }
        int64_t q = a / b, r = a % b;
        if ((k == EX_FLOORDIV || k == EX_FLOORMOD) && r != 0 && ((r < 0) != (b < 0))) {
            q -= 1;
            r += b;
        }
        *out = (k == EX_DIV || k == EX_FLOORDIV) ? q : r;
        return IA_OK;
    }
    case EX_MIN:
        *out = a < b ? a : b;
        return IA_OK;
    case EX_MAX:
        *out = a > b ? a : b;
        return IA_OK;
    case EX_EQ:
        *out = a == b;
        return IA_OK;
    case EX_NE:
        *out = a != b;
        return IA_OK;
    case EX_LT:
        *out = a < b;
        return IA_OK;
    case EX_LE:
        *out = a <= b;
        return IA_OK;
    case EX_GT:
        *out = a > b;
        return IA_OK;
    case EX_GE:
        *out = a >= b;
        return IA_OK;
    case EX_AND:
        *out = (a != 0) && (b != 0);
        return IA_OK;
    case EX_OR:
        *out = (a != 0) || (b != 0);
        return IA_OK;
    default:
        RV_UNREACHABLE();
    }
}

int64_t ir_int_convert(rv_dtype t, int64_t v) {
    switch (t) {
    case RV_BOOL:
        return v != 0;
    case RV_I32:
        return (int64_t)(int32_t)(uint32_t)(uint64_t)v; /* two's complement wrap */
    default:
        return v;
    }
}

/* ----------------------------------------------------------- messages */

/* Prefixes the current last error with a formatted context:
 * "<context>: <previous message>", keeping status `st`. */
static rv_status wrap_error(rv_status st, const char *fmt, ...) RV_PRINTF(2, 3);
static rv_status wrap_error(rv_status st, const char *fmt, ...) {
    char *prev = base_xstrdup(rv_last_error());
    Buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    base_error(st, "%s: %s", buf_str(&b), prev);
    buf_free(&b);
    base_free(prev);
    return st;
}

void ir_layout_format_index(Buf *b, int n, const int64_t *idx) {
    buf_putc(b, '[');
    for (int i = 0; i < n; i++)
        buf_printf(b, "%s%lld", i ? ", " : "", (long long)idx[i]);
    buf_putc(b, ']');
}

/* "b = 2, h = 0": the prefix of axes and values, for extent messages. */
static void format_prefix(Buf *b, int n, Axis *const *axes, const int64_t *vals) {
    for (int i = 0; i < n; i++)
        buf_printf(b, "%s%s = %lld", i ? ", " : "", axes[i]->name, (long long)vals[i]);
}

/* ---------------------------------------------------- index evaluation */

rv_status ir_layout_ufun_value(const LayoutEnv *env, const Ufun *f, const int64_t *args,
                               int64_t *out) {
    const Layout *dom = env->uf_dom[f->id];
    const int64_t *vals = env->uf_vals[f->id];
    if (!dom || !vals)
        return base_error(RV_ERR_ARG, "ufun %s is not bound", f->name);
    int bad_dim = 0;
    int64_t bad_ext = 0;
    int64_t off = ir_layout_offset(dom, args, &bad_dim, &bad_ext);
    if (off < 0) {
        Buf b = {0};
        ir_layout_format_index(&b, f->nargs, args);
        base_error(RV_ERR_BOUNDS, "%s%s: index %lld out of bounds for dimension %d (extent %lld)",
                   f->name, buf_str(&b), (long long)args[bad_dim], bad_dim, (long long)bad_ext);
        buf_free(&b);
        return RV_ERR_BOUNDS;
    }
    *out = vals[off];
    return RV_OK;
}

/* The message for a failed integer operation in expression `e`. */
static rv_status arith_error(IntArith r, const Expr *e) {
    char *s = ir_expr_str(e);
    rv_status st = base_error(RV_ERR_BOUNDS, "%s in %s",
                              r == IA_DIVZERO ? "division by zero" : "integer overflow", s);
    base_free(s);
    return st;
}

rv_status ir_eval_index(const LayoutEnv *env, const Expr *e, int nax, Axis *const *axes,
                        const int64_t *vals, int64_t *out) {
    int64_t a, b, c;
    rv_status st;
    switch (e->kind) {
    case EX_CONST_INT:
        *out = e->u.ival;
        return RV_OK;
    case EX_SIZE:
        *out = env->sizes[e->u.size->id];
        return RV_OK;
    case EX_VAR:
        for (int i = 0; i < nax; i++) {
            if (axes[i] == e->u.axis) {
                *out = vals[i];
                return RV_OK;
            }
        }
        return base_error(RV_ERR_TYPE, "axis %s is not an outer dimension here", e->u.axis->name);
    case EX_UFCALL: {
        int64_t args[RV_MAX_DIMS];
        RV_ASSERT(e->n <= RV_MAX_DIMS);
        for (int i = 0; i < e->n; i++)
            if ((st = ir_eval_index(env, e->args[i], nax, axes, vals, &args[i])) != RV_OK)
                return st;
        return ir_layout_ufun_value(env, e->u.uf, args, out);
    }
    case EX_LOAD:
        if (!env->load)
            break;
        if ((st = ir_eval_index(env, e->args[0], nax, axes, vals, &a)) != RV_OK)
            return st;
        return env->load(env->load_ctx, e->u.buf, a, out);
    case EX_NEG:
    case EX_ABS:
        if ((st = ir_eval_index(env, e->args[0], nax, axes, vals, &a)) != RV_OK)
            return st;
        if (e->kind == EX_ABS && a >= 0) {
            *out = a;
            return RV_OK;
        }
        if (a == INT64_MIN)
            return arith_error(IA_OVERFLOW, e);
        *out = -a;
        return RV_OK;
    case EX_NOT:
        if ((st = ir_eval_index(env, e->args[0], nax, axes, vals, &a)) != RV_OK)
            return st;
        *out = !a;
        return RV_OK;
    case EX_CAST:
        if (!ir_is_int(e->args[0]->dtype) && e->args[0]->dtype != RV_BOOL)
            break;
        if ((st = ir_eval_index(env, e->args[0], nax, axes, vals, &a)) != RV_OK)
            return st;
        *out = ir_int_convert(e->dtype, a);
        return RV_OK;
    case EX_SELECT: /* strict, like everywhere else */
        if ((st = ir_eval_index(env, e->args[0], nax, axes, vals, &c)) != RV_OK ||
            (st = ir_eval_index(env, e->args[1], nax, axes, vals, &a)) != RV_OK ||
            (st = ir_eval_index(env, e->args[2], nax, axes, vals, &b)) != RV_OK)
            return st;
        *out = c ? a : b;
        return RV_OK;
    case EX_ADD:
    case EX_SUB:
    case EX_MUL:
    case EX_DIV:
    case EX_MOD:
    case EX_FLOORDIV:
    case EX_FLOORMOD:
    case EX_MIN:
    case EX_MAX:
    case EX_AND:
    case EX_OR:
#define CMP(k, text, prec, flags) case EX_##k:
#include "ops.def"
#undef CMP
    {
        if (ir_is_float(e->args[0]->dtype) || ir_is_float(e->args[1]->dtype))
            break;
        if ((st = ir_eval_index(env, e->args[0], nax, axes, vals, &a)) != RV_OK ||
            (st = ir_eval_index(env, e->args[1], nax, axes, vals, &b)) != RV_OK)
            return st;
        IntArith r = ir_int_arith(e->kind, a, b, out);
        return r == IA_OK ? RV_OK : arith_error(r, e);
    }
    default:
        break;
    }
    char *s = ir_expr_str(e);
    st = base_error(RV_ERR_UNSUPPORTED, "%s is not an integer index expression", s);
    base_free(s);
    return st;
}

/* ------------------------------------------------------ layout building */

/* True when `e` mentions any axis variable (then the extent is evaluated
 * per prefix). Extents are small trees, so no memo. */
static bool mentions_axis(const Expr *e) {
    if (e->kind == EX_VAR)
        return true;
    if (e->kind == EX_REDUCE)
        for (int i = 0; i < e->u.red.naxes; i++)
            if (mentions_axis(e->u.red.axes[i]->extent))
                return true;
    for (int i = 0; i < e->n; i++)
        if (mentions_axis(e->args[i]))
            return true;
    return false;
}

rv_status ir_layout_check_pads(const char *name, int ndim, Axis *const *axes, Expr *const *exts,
                               const int *pad, int *level) {
    for (int k = 0; pad && k < ndim; k++) {
        if (pad[k] <= 1)
            continue;
        for (int j = k + 1; j < ndim; j++)
            for (int i = 0; i < j; i++)
                if (ir_uses_axis(exts[j], axes[i])) {
                    *level = k;
                    return base_error(RV_ERR_TYPE,
                                      "dimension '%s' of '%s': storage padding outside a ragged "
                                      "dimension is not supported ('%s' inside it is ragged)",
                                      axes[k]->name, name, axes[j]->name);
                }
    }
    return RV_OK;
}

rv_status ir_layout_check_bounded(const char *what, const char *name, int ndim, Axis *const *axes) {
    for (int k = 0; k < ndim; k++) {
        int64_t lo, hi;
        if (!mentions_axis(axes[k]->extent) ||
            ir_int_range(axes[k]->extent, &lo, &hi) != IR_RANGE_UNKNOWN)
            continue;
        char *e = ir_expr_str(axes[k]->extent);
        rv_status st = base_error(RV_ERR_TYPE,
                                  "%s '%s' of '%s': the ragged extent %s has no upper bound over "
                                  "the declared ranges, so its storage cannot be sized; bound it "
                                  "(min(..., N)) or declare value ranges for the ufuns it uses",
                                  what, axes[k]->name, name, e);
        base_free(e);
        return st;
    }
    return RV_OK;
}

/* A growable int64 array with an int64 length (prefix-sum arrays can
 * outgrow Vec's int). */
typedef struct I64Vec {
    int64_t *data;
    int64_t len, cap;
} I64Vec;

static void i64vec_push(I64Vec *v, int64_t x) {
    if (v->len == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->data = base_xrealloc(v->data, sizeof *v->data * (size_t)v->cap);
    }
    v->data[v->len++] = x;
}

typedef struct Build {
    const LayoutEnv *env;
    const char *what;
    Layout *l;
    int last_var;                 /* deepest variable level */
    I64Vec starts[RV_MAX_DIMS];   /* variable levels' prefix sums, in order */
    int64_t running[RV_MAX_DIMS]; /* variable levels: elements so far */
    int64_t idx[RV_MAX_DIMS];     /* the current prefix */
    /* variable levels whose extent is a UF applied to exactly the outer
     * axes in order (nchild[n], len[b]): the UF, else NULL */
    const Ufun *direct[RV_MAX_DIMS];
} Build;

/* The UF of an extent f[a0, ..., a(k-1)] over exactly the k outer axes,
 * or NULL. */
static const Ufun *direct_ufun(const Expr *e, int k, Axis *const *axes) {
    if (e->kind != EX_UFCALL || e->n != k)
        return NULL;
    for (int i = 0; i < k; i++)
        if (e->args[i]->kind != EX_VAR || e->args[i]->u.axis != axes[i])
            return NULL;
    return e->u.uf;
}

/* Evaluates level k's extent under the prefix idx[0..np-1] (np = k for a
 * variable level, 0 for a constant one). */
static rv_status level_extent(Build *bd, int k, int np, int64_t *ext) {
    Layout *l = bd->l;
    const Ufun *f = np == k ? bd->direct[k] : NULL;
    if (f) {
        /* the UF's value at the prefix read directly: a ragged level over
         * a batch's nodes evaluates its extent at every node, where the
         * evaluator's walk costs more than the read; anything unusual (an
         * unbound UF, a prefix outside its domain, a negative value) takes
         * the walk below, for its message */
        const Layout *dom = bd->env->uf_dom[f->id];
        const int64_t *vals = bd->env->uf_vals[f->id];
        int bad_dim;
        int64_t bad_ext, off = dom && vals ? ir_layout_offset(dom, bd->idx, &bad_dim, &bad_ext) : -1;
        if (off >= 0 && vals[off] >= 0) {
            *ext = vals[off];
            return RV_OK;
        }
    }
    Buf b = {0};
    rv_status st = ir_eval_index(bd->env, l->axes[k]->extent, np, l->axes, bd->idx, ext);
    if (st == RV_OK && *ext >= 0)
        return RV_OK;
    if (np > 0) {
        buf_puts(&b, " at [");
        format_prefix(&b, np, l->axes, bd->idx);
        buf_putc(&b, ']');
    }
    if (st != RV_OK)
        wrap_error(st, "%s: extent of dimension %s%s", bd->what, l->axes[k]->name, buf_str(&b));
    else
        st = base_error(RV_ERR_BOUNDS, "%s: dimension %s has negative extent %lld%s", bd->what,
                        l->axes[k]->name, (long long)*ext, buf_str(&b));
    buf_free(&b);
    return st;
}

/* Visits the valid prefix idx[0..k-1] (of rank r among P_k) and, down to
 * the last variable level, every valid prefix below it, in lexicographic
 * order, recording the prefix sums of the variable levels. */
static rv_status visit(Build *bd, int k, int64_t r) {
    Layout *l = bd->l;
    int64_t ext, base;
    if (l->shape[k] < 0) {
        rv_status st = level_extent(bd, k, k, &ext);
        if (st != RV_OK)
            return st;
        RV_ASSERT(bd->starts[k].len == r);
        i64vec_push(&bd->starts[k], bd->running[k]);
        base = bd->running[k];
        if (add_ovf(bd->running[k], ext, &bd->running[k]))
            return base_error(RV_ERR_SHAPE, "%s: too many elements", bd->what);
        if (ext > l->maxext[k])
            l->maxext[k] = ext;
    } else {
        ext = l->shape[k];
        if (mul_ovf(r, ext, &base))
            return base_error(RV_ERR_SHAPE, "%s: too many elements", bd->what);
    }
    if (k == bd->last_var)
        return RV_OK;
    for (int64_t i = 0; i < ext; i++) {
        bd->idx[k] = i;
        rv_status st = visit(bd, k + 1, base + i);
        if (st != RV_OK)
            return st;
    }
    return RV_OK;
}

rv_status ir_layout_eval(const LayoutEnv *env, const char *what, int ndim, Axis *const *axes,
                         Layout **out) {
    return ir_layout_eval_reuse(env, what, ndim, axes, NULL, out);
}

rv_status ir_layout_eval_reuse(const LayoutEnv *env, const char *what, int ndim,
                               Axis *const *axes, Layout *reuse, Layout **out) {
    RV_ASSERT(ndim >= 0 && ndim <= RV_MAX_DIMS);
    RV_ASSERT(!reuse || !reuse->borrowed);
    *out = NULL;
    Build bd = {.env = env, .what = what, .last_var = -1};
    /* the old row-start arrays become the builder's, empty, with their
     * room (a level that is not variable now frees its array below) */
    for (int k = 0; reuse && k < reuse->ndim; k++) {
        if (k < ndim && reuse->cap[k] > 0)
            bd.starts[k] = (I64Vec){reuse->start[k], 0, reuse->cap[k]};
        else
            base_free(reuse->start[k]);
    }
    Layout *l = reuse ? reuse : base_xmalloc(sizeof *l);
    memset(l, 0, sizeof *l);
    l->ndim = ndim;
    bd.l = l;
    rv_status st = RV_OK;

    /* Constant levels first: their extents never change. */
    for (int k = 0; k < ndim; k++) {
        l->axes[k] = axes[k];
        if (mentions_axis(axes[k]->extent)) {
            l->shape[k] = -1;
            l->ragged = true;
            bd.last_var = k;
            bd.direct[k] = direct_ufun(axes[k]->extent, k, axes);
        } else if ((st = level_extent(&bd, k, 0, &l->shape[k])) != RV_OK) {
            goto fail;
        } else {
            l->maxext[k] = l->shape[k];
        }
    }
    /* Then one walk over the prefixes down to the last variable level. */
    if (bd.last_var >= 0 && (st = visit(&bd, 0, 0)) != RV_OK)
        goto fail;
    l->count[0] = 1;
    for (int k = 0; k < ndim; k++) {
        if (l->shape[k] >= 0) {
            if (mul_ovf(l->count[k], l->shape[k], &l->count[k + 1])) {
                st = base_error(RV_ERR_SHAPE, "%s: too many elements", what);
                goto fail;
            }
            continue;
        }
        RV_ASSERT(bd.starts[k].len == l->count[k]);
        i64vec_push(&bd.starts[k], bd.running[k]);
        l->start[k] = bd.starts[k].data;
        l->cap[k] = bd.starts[k].cap;
        bd.starts[k].data = NULL;
        l->count[k + 1] = bd.running[k];
    }
    l->numel = l->count[ndim];
    for (int k = 0; k < ndim; k++)
        base_free(bd.starts[k].data); /* a reused array of a level now constant */
    *out = l;
    return RV_OK;

fail:
    for (int k = 0; k < ndim; k++)
        base_free(bd.starts[k].data);
    ir_layout_free(l);
    return st;
}

rv_status ir_layout_tensor(const LayoutEnv *env, const char *what, const Tensor *t, Layout **out) {
    return ir_layout_eval(env, what, t->ndim, t->axes, out);
}

rv_status ir_layout_ufun(const LayoutEnv *env, const Ufun *f, Layout **out) {
    Buf b = {0};
    buf_printf(&b, "ufun %s", f->name);
    rv_status st = ir_layout_eval(env, buf_str(&b), f->nargs, f->args, out);
    buf_free(&b);
    return st;
}

rv_array *ir_layout_array_new(rv_dtype t, const Layout *l) {
    int64_t one[1] = {l->numel};
    if (l->ragged)
        return rv_array_new(t, 1, one);
    return rv_array_new(t, l->ndim, l->ndim ? l->shape : one);
}

void ir_layout_free(Layout *l) {
    if (!l)
        return;
    for (int k = 0; k < l->ndim && !l->borrowed; k++)
        base_free(l->start[k]);
    base_free(l);
}

/* ------------------------------------------------------------ iteration */

/* From a state where rank[0..k] are valid and idx[k] is a candidate at
 * level k, moves to the first valid tuple at or after it; false when the
 * whole layout is exhausted. */
static bool settle(const Layout *l, LayoutIter *it, int k) {
    for (;;) {
        if (it->idx[k] < ir_layout_extent_at(l, k, it->rank[k])) {
            it->rank[k + 1] = ir_layout_start_at(l, k, it->rank[k]) + it->idx[k];
            if (k + 1 == l->ndim)
                return true;
            k++;
            it->idx[k] = 0;
        } else {
            if (k == 0)
                return false;
            k--;
            it->idx[k]++;
        }
    }
}

bool ir_layout_iter_begin(const Layout *l, LayoutIter *it) {
    it->rank[0] = 0;
    if (l->ndim == 0)
        return true; /* a scalar: one element */
    it->idx[0] = 0;
    return settle(l, it, 0);
}

bool ir_layout_iter_next(const Layout *l, LayoutIter *it) {
    if (l->ndim == 0)
        return false;
    it->idx[l->ndim - 1]++;
    return settle(l, it, l->ndim - 1);
}

/* ----------------------------------------------------------- describing */

typedef struct Mentions {
    bool *sizes, *ufs;
} Mentions;

static void collect_mentions(const Expr *e, Mentions *mn) {
    if (e->kind == EX_SIZE)
        mn->sizes[e->u.size->id] = true;
    if (e->kind == EX_UFCALL)
        mn->ufs[e->u.uf->id] = true;
    for (int i = 0; i < e->n; i++)
        collect_mentions(e->args[i], mn);
}

void ir_layout_describe_env(Buf *b, const LayoutEnv *env, const Layout *l) {
    const Module *m = env->m;
    Mentions mn = {base_xcalloc((size_t)m->sizes.len + 1, 1),
                   base_xcalloc((size_t)m->ufuns.len + 1, 1)};
    for (int k = 0; k < l->ndim; k++)
        collect_mentions(l->axes[k]->extent, &mn);
    const char *sep = "";
    for (int i = 0; i < m->sizes.len; i++) {
        if (!mn.sizes[i])
            continue;
        buf_printf(b, "%s%s = %lld", sep, m->sizes.data[i]->name, (long long)env->sizes[i]);
        sep = ", ";
    }
    for (int i = 0; i < m->ufuns.len; i++) {
        if (!mn.ufs[i])
            continue;
        const Layout *dom = env->uf_dom[i];
        const int64_t *v = env->uf_vals[i];
        buf_printf(b, "%s%s = ", sep, m->ufuns.data[i]->name);
        sep = ", ";
        if (!dom || !v) {
            buf_puts(b, "(unbound)");
            continue;
        }
        enum { SHOW = 8 };
        buf_putc(b, '[');
        for (int64_t j = 0; j < dom->numel && j < SHOW; j++)
            buf_printf(b, "%s%lld", j ? ", " : "", (long long)v[j]);
        if (dom->numel > SHOW)
            buf_printf(b, ", ...] (%lld values)", (long long)dom->numel);
        else
            buf_putc(b, ']');
    }
    base_free(mn.sizes);
    base_free(mn.ufs);
}

/* ------------------------------------------------ storage (symbolic) */

/* roundup(e, p) = (e + p - 1) / p * p, folded when p == 1. */
static Expr *round_up(Module *m, Expr *e, int p) {
    if (p <= 1)
        return e;
    Expr *q = ir_binary(m, EX_DIV, ir_binary(m, EX_ADD, e, ir_int(m, p - 1)), ir_int(m, p));
    return ir_binary(m, EX_MUL, q, ir_int(m, p));
}

/* A sizes-only upper bound of level k's padded extent (for AUX sizes);
 * NULL when there is none. */
static Expr *extent_upper_bound(Module *m, const Storage *st, int k) {
    if (!st->variable[k])
        return st->ext[k];
    int64_t lo, hi;
    switch (ir_int_range(st->axes[k]->extent, &lo, &hi)) {
    case IR_RANGE_EMPTY: /* under no prefix at all: the level holds nothing */
        return ir_int(m, 0);
    case IR_RANGE_KNOWN:
        return round_up(m, ir_int(m, hi < 0 ? 0 : hi), st->pad[k]);
    default:
        return NULL;
    }
}

void ir_storage_share_free(StorageShare *sh) {
    vec_free(&sh->entries);
}

/* The row-start array of level k of st: share's for st's pattern, or a
 * new one of `size` elements (registered in share). */
static Buffer *start_buffer(Module *m, const Storage *st, int k, const char *name, Expr *size,
                            StorageShare *share) {
    char *bn = arena_printf(m->arena, "%s_start%d", name, k);
    if (!share)
        return ir_buffer_new(m, bn, RV_I64, size, BUF_AUX);
    StorageShareEntry e = {.level = k};
    Expr *idx[RV_MAX_DIMS];
    for (int j = 0; j < k; j++) {
        if (!share->pos[j])
            share->pos[j] =
                ir_axis_new(m, arena_printf(m->arena, "level%d", j), AX_SPATIAL, ir_int(m, 0));
        idx[j] = share->pos[j]->var;
    }
    for (int j = 0; j <= k; j++)
        e.ext[j] = ir_storage_extent(m, st, j, idx);
    for (int i = 0; i < share->entries.len; i++) {
        const StorageShareEntry *o = &share->entries.data[i];
        if (o->level == k && memcmp(o->ext, e.ext, sizeof(Expr *) * (size_t)(k + 1)) == 0)
            return o->start;
    }
    e.start = ir_buffer_new(m, bn, RV_I64, size, BUF_AUX);
    vec_push(&share->entries, e);
    return e.start;
}

rv_status ir_storage_init(Module *m, Storage *st, const char *name, int ndim, Axis *const *axes,
                          const int *pad, rv_dtype dtype, BufScope scope, StorageShare *share) {
    memset(st, 0, sizeof *st);
    st->ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        st->axes[k] = axes[k];
        st->pad[k] = pad ? pad[k] : 1;
        for (int j = 0; j < k; j++)
            st->variable[k] |= ir_uses_axis(axes[k]->extent, axes[j]);
        if (!st->variable[k])
            st->ext[k] = round_up(m, axes[k]->extent, st->pad[k]);
    }
    /* prefix counts: exact where all outer levels are constant, otherwise
     * an upper bound (for allocation) */
    Expr *count = ir_int(m, 1), *bound = ir_int(m, 1);
    bool exact = true;
    for (int k = 0; k < ndim; k++) {
        Expr *ub = extent_upper_bound(m, st, k);
        if (!ub)
            return base_error(RV_ERR_UNSUPPORTED,
                              "%s: the extent of dimension '%s' has no constant upper bound, so "
                              "its row-start array cannot be sized; declare a value range for the "
                              "ufuns it uses",
                              name, axes[k]->name);
        if (st->variable[k]) {
            Expr *size = ir_binary(m, EX_ADD, exact ? count : bound, ir_int(m, 1));
            st->start[k] = start_buffer(m, st, k, name, size, share);
            /* the count after this level is the last prefix sum */
            count = ir_load(m, st->start[k], count);
            exact = false;
        } else {
            count = ir_binary(m, EX_MUL, count, st->ext[k]);
        }
        bound = ir_binary(m, EX_MUL, bound, ub);
    }
    st->numel = count;
    st->buf = ir_buffer_new(m, name, dtype, count, scope);
    st->buf->storage = st;
    return RV_OK;
}

void ir_storage_bulk_pad(Module *m, Storage *st, int level, int64_t n) {
    Expr *rows = ir_int(m, 1);
    for (int k = 0; k <= level; k++)
        rows = st->variable[k] ? ir_load(m, st->start[k], rows)
                               : ir_binary(m, EX_MUL, rows, st->ext[k]);
    st->bulk = n;
    st->bulk_level = level;
    st->bulk_rows = round_up(m, rows, (int)n);
    Expr *numel = st->bulk_rows;
    for (int k = level + 1; k < st->ndim; k++)
        numel = ir_binary(m, EX_MUL, numel, st->ext[k]);
    st->numel = numel;
    st->buf->size = numel;
}

bool ir_storage_padded(const Storage *st) {
    if (st->bulk > 1)
        return true;
    for (int k = 0; k < st->ndim; k++)
        if (st->pad[k] > 1)
            return true;
    return false;
}

Expr *ir_storage_extent(Module *m, const Storage *st, int k, Expr *const *idx) {
    if (!st->variable[k])
        return st->ext[k];
    PtrMap sub = {0};
    for (int j = 0; j < k; j++)
        ptrmap_put(&sub, st->axes[j], idx[j]);
    Expr *ext = ir_substitute(m, st->axes[k]->extent, &sub);
    ptrmap_free(&sub);
    return round_up(m, ext, st->pad[k]);
}

Expr *ir_storage_offset(Module *m, const Storage *st, Expr *const *idx) {
    Expr *rank = ir_int(m, 0);
    for (int k = 0; k < st->ndim; k++) {
        if (st->variable[k])
            rank = ir_binary(m, EX_ADD, ir_load(m, st->start[k], rank), idx[k]);
        else
            rank = ir_binary(m, EX_ADD, ir_binary(m, EX_MUL, rank, st->ext[k]), idx[k]);
    }
    return rank;
}

rv_status ir_storage_eval(const LayoutEnv *env, const Storage *st, int64_t *const *start,
                          const int64_t *start_len, Layout **out) {
    *out = NULL;
    Layout *l = base_xcalloc(1, sizeof *l);
    l->ndim = st->ndim;
    l->borrowed = true;
    l->count[0] = 1;
    const char *name = st->buf->name;
    rv_status err = RV_OK;
    for (int k = 0; k < st->ndim && err == RV_OK; k++) {
        l->axes[k] = st->axes[k];
        int64_t n = l->count[k];
        if (!st->variable[k]) {
            /* a constant level's extent mentions no axis: no prefix needed */
            int64_t e;
            if ((err = ir_eval_index(env, st->ext[k], 0, NULL, NULL, &e)) != RV_OK)
                break;
            l->shape[k] = l->maxext[k] = e < 0 ? 0 : e;
            if (mul_ovf(n, l->shape[k], &l->count[k + 1]))
                err = base_error(RV_ERR_SHAPE, "%s: too many elements in storage", name);
            continue;
        }
        l->shape[k] = -1;
        l->ragged = true;
        const int64_t *s = start[k];
        bool ok = s && start_len[k] > n && s[0] == 0;
        for (int64_t r = 0; ok && r < n; r++) {
            ok = s[r + 1] >= s[r];
            if (ok && s[r + 1] - s[r] > l->maxext[k])
                l->maxext[k] = s[r + 1] - s[r];
        }
        if (!ok) {
            err = base_error(RV_ERR_UNSUPPORTED,
                             "%s: row-start array %s does not hold the prefix sums of %lld rows "
                             "(storage layouts disagree)",
                             name, st->start[k]->name, (long long)n);
            break;
        }
        l->start[k] = start[k];
        l->count[k + 1] = s[n];
    }
    if (err != RV_OK) {
        ir_layout_free(l);
        return err;
    }
    l->numel = l->count[st->ndim];
    if (st->bulk > 1) { /* the padding rows after the last */
        int64_t rows = l->count[st->bulk_level + 1], b = st->bulk;
        rows = (rows + b - 1) / b * b;
        for (int k = st->bulk_level + 1; k < st->ndim; k++)
            if (mul_ovf(rows, l->shape[k], &rows)) {
                ir_layout_free(l);
                return base_error(RV_ERR_SHAPE, "%s: too many elements in storage", name);
            }
        l->numel = rows;
    }
    *out = l;
    return RV_OK;
}
