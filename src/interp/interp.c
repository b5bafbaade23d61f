/*
 * interp.c — rv_interp_run: check the arguments, then evaluate every
 * operation of the module in definition order.
 *
 * A run has two phases. Preparation (interp_prepare, shared with
 * rv_bindings_randomize) walks the arguments in dependency order: sizes
 * first (each bound and within its declared range), then UFs in
 * declaration order (a UF's domain and value range may use sizes and
 * earlier UFs: its domain layout is evaluated, its array's dtype and shape
 * checked, its values converted to int64 and checked against the range),
 * then inputs (layout evaluated, exact dtype and shape checked). When
 * drawing random arguments, whatever is unbound is drawn at its turn, so
 * later draws see earlier ones. Structures come first, each drawn as a
 * whole batch (random_structs.c).
 *
 * Evaluation then computes each operation's layout, allocates its result
 * in the tensor's dtype (dense: its shape; ragged: 1-D in canonical order)
 * and hands it to eval.c (compute, cond) or extern_ref.c (extern); a
 * recursion group goes to recurse.c as a whole, at its first member. Results
 * are stored in the bindings as they are made, so later operations read
 * the rounded values compiled code would read. A failed run leaves no
 * results behind.
 *
 * Randomized arguments are kept small on purpose: sizes are drawn from
 * [lo, min(hi, lo + 16)] so the interpreter stays fast in tests (bind a
 * size explicitly for anything else), UF values uniformly from their
 * declared range, floats from [-1, 1) (in a program with recursion, a
 * weight's divided by the square root of its fan-in: random_scale.c) and
 * integers from [-8, 8]; a structure's batch has up to 200 nodes
 * (random_structs.c).
 */
#include <stdio.h>
#include <string.h>

#include "interp/interp.h"

static rv_status unsupported(const Tensor *t, const char *fmt, ...) RV_PRINTF(2, 3);
static rv_status unsupported(const Tensor *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rv_status st = interp_verror(RV_ERR_UNSUPPORTED, t, NULL, NULL, fmt, ap);
    va_end(ap);
    return st;
}

rv_status interp_verror(rv_status st, const Tensor *t, const int64_t *idx, const char *ext,
                        const char *fmt, va_list ap) {
    Buf b = {0};
    if (t->loc.file)
        buf_printf(&b, "%s:%d:%d: ", t->loc.file, t->loc.line, t->loc.col);
    buf_printf(&b, "computing %s", t->name);
    if (idx && t->ndim > 0)
        ir_layout_format_index(&b, t->ndim, idx);
    if (ext)
        buf_printf(&b, ": extern %s", ext);
    buf_puts(&b, ": ");
    buf_vprintf(&b, fmt, ap);
    base_error(st, "%s", buf_str(&b));
    buf_free(&b);
    return st;
}

/* The array for a layout: its shape when dense, 1-D when ragged. */

static void format_shape(Buf *b, const rv_array *a) {
    ir_layout_format_index(b, rv_array_ndim(a), rv_array_shape(a));
}

/* Checks that array `a` has the shape layout `l` needs (dense: the layout's
 * shape; ragged: 1-D with one element per valid index tuple). */
static rv_status check_shape(Interp *in, const char *what, const rv_array *a, const Layout *l) {
    const int64_t *shape = rv_array_shape(a);
    int ndim = rv_array_ndim(a);
    bool ok;
    if (l->ragged)
        ok = ndim == 1 && shape[0] == l->numel;
    else {
        ok = ndim == l->ndim;
        for (int k = 0; ok && k < ndim; k++)
            ok = shape[k] == l->shape[k];
    }
    if (ok)
        return RV_OK;
    Buf env = {0}, got = {0}, want = {0};
    ir_layout_describe_env(&env, &in->env, l);
    const char *ctx = env.len ? " (" : "", *ctx_end = env.len ? ")" : "";
    format_shape(&got, a);
    if (!l->ragged) {
        ir_layout_format_index(&want, l->ndim, l->shape);
        base_error(RV_ERR_SHAPE, "%s: expected shape %s%s%s%s, got %s", what, buf_str(&want), ctx,
                   buf_str(&env), ctx_end, buf_str(&got));
    } else if (ndim == 1) {
        base_error(RV_ERR_SHAPE,
                   "%s: ragged layout needs %lld elements%s%s%s, array has %lld "
                   "elements",
                   what, (long long)l->numel, ctx, buf_str(&env), ctx_end, (long long)shape[0]);
    } else {
        base_error(RV_ERR_SHAPE,
                   "%s: ragged layout needs a 1-D array of %lld elements%s%s%s, "
                   "got shape %s",
                   what, (long long)l->numel, ctx, buf_str(&env), ctx_end, buf_str(&got));
    }
    buf_free(&env);
    buf_free(&got);
    buf_free(&want);
    return RV_ERR_SHAPE;
}

/* ---- preparation: sizes, UFs, inputs ---- */

static rv_status prepare_sizes(Interp *in, const uint64_t *seed) {
    rv_bindings *b = in->b;
    /* a size left unbound may be one the bound arrays' shapes determine */
    for (int i = 0; i < in->m->sizes.len; i++)
        if (!b->size_set[i]) {
            rv_status st = rv_bindings_infer_sizes(b);
            if (st != RV_OK)
                return st;
            break;
        }
    for (int i = 0; i < in->m->sizes.len; i++) {
        const Size *s = in->m->sizes.data[i];
        if (!b->size_set[i]) {
            if (!seed)
                return base_error(RV_ERR_ARG,
                                  "size %s is not bound (and no bound array's shape determines it)",
                                  s->name);
            Rng r = interp_rng_for(*seed, s->name);
            int64_t hi = s->hi - s->lo > 16 ? s->lo + 16 : s->hi;
            b->size_val[i] = interp_rng_int(&r, s->lo, hi);
            b->size_set[i] = true;
        }
        int64_t v = b->size_val[i];
        if (v < s->lo || v > s->hi)
            return base_error(RV_ERR_BOUNDS, "size %s = %lld outside declared range %lld..%lld",
                              s->name, (long long)v, (long long)s->lo, (long long)s->hi);
        in->sizes[i] = v;
    }
    return RV_OK;
}

/* Does f's value range use its arguments (so it differs per element)?
 * rv_ufun_end keeps lo_dom and hi_dom as lo and hi themselves exactly
 * when they use no argument (ir_bound_over_axes), so no walk is needed:
 * a walk allocates, and every compiled run checks every UF. */
static bool range_per_element(const Ufun *f) {
    return f->lo_dom != f->lo || f->hi_dom != f->hi;
}

/* f's value range lo..hi at domain element idx (its arguments bound to it). */
static rv_status range_at(Interp *in, const Ufun *f, const int64_t *idx, int64_t *lo,
                          int64_t *hi) {
    rv_status st = ir_eval_index(&in->env, f->lo, f->nargs, f->args, idx, lo);
    if (st == RV_OK)
        st = ir_eval_index(&in->env, f->hi, f->nargs, f->args, idx, hi);
    if (st != RV_OK) {
        char *prev = base_xstrdup(rv_last_error());
        base_error(st, "ufun %s: %s", f->name, prev);
        base_free(prev);
    }
    return st;
}

/* "ufun f: f[2, 1] = 9 outside declared range 0..1" or, when the range
 * is empty there, "... empty value range 0..-1 at f[0]; cannot draw". */
static rv_status range_error(const Ufun *f, const Layout *dom, const int64_t *idx,
                             const int64_t *v, int64_t lo, int64_t hi) {
    Buf b = {0};
    ir_layout_format_index(&b, dom->ndim, idx);
    if (v)
        base_error(RV_ERR_BOUNDS, "ufun %s: %s%s = %lld outside declared range %lld..%lld",
                   f->name, f->name, buf_str(&b), (long long)*v, (long long)lo, (long long)hi);
    else
        base_error(RV_ERR_BOUNDS,
                   "ufun %s: empty value range %lld..%lld at %s%s; cannot draw values", f->name,
                   (long long)lo, (long long)hi, f->name, buf_str(&b));
    buf_free(&b);
    return RV_ERR_BOUNDS;
}

/* Draws (when `draw`) or checks the values v[] of f over its domain, each
 * in the range at its element: uniform draws in [lo, hi] in canonical
 * order, so a range without arguments draws as it always has. */
static rv_status fill_or_check_ufun(Interp *in, const Ufun *f, const Layout *dom, int64_t *v,
                                    bool draw, uint64_t seed) {
    bool per_element = range_per_element(f);
    int64_t lo = 0, hi = 0;
    rv_status st;
    LayoutIter it;
    /* checking against one range (the usual case, and every compiled
     * run's): a flat pass over the values; the walk below only names the
     * element of a value out of range */
    if (!draw && !per_element && dom->numel > 0) {
        int64_t any[RV_MAX_DIMS] = {0}; /* the range reads no argument */
        if ((st = range_at(in, f, any, &lo, &hi)) != RV_OK)
            return st;
        int64_t i = 0;
        while (i < dom->numel && v[i] >= lo && v[i] <= hi)
            i++;
        if (i == dom->numel)
            return RV_OK;
    }
    Rng r = interp_rng_for(seed, f->name);
    bool first = true;
    for (bool ok = ir_layout_iter_begin(dom, &it); ok; ok = ir_layout_iter_next(dom, &it)) {
        if ((first || per_element) && (st = range_at(in, f, it.idx, &lo, &hi)) != RV_OK)
            return st;
        first = false;
        int64_t *x = &v[it.rank[dom->ndim]];
        if (draw && lo > hi)
            return range_error(f, dom, it.idx, NULL, lo, hi);
        if (draw)
            *x = interp_rng_int(&r, lo, hi);
        else if (*x < lo || *x > hi)
            return range_error(f, dom, it.idx, x, lo, hi);
    }
    return RV_OK;
}

static rv_status prepare_ufun(Interp *in, const Ufun *f, const uint64_t *seed) {
    rv_status st;
    char buf[300];
    const char *what = in->names ? in->names->ufun[f->id] : buf;
    if (!in->names)
        snprintf(buf, sizeof buf, "ufun %s", f->name);
    if (!f->complete)
        return base_error(RV_ERR_TYPE, "%s: its definition is incomplete", what);
    Layout *dom; /* ir_layout_ufun, with the name made above */
    Layout *old = in->keep->lay[f->id];
    in->keep->lay[f->id] = NULL;
    if ((st = ir_layout_eval_reuse(&in->env, what, f->nargs, f->args, old, &dom)) != RV_OK)
        return st;
    in->ufl[f->id] = dom; /* released with the run */
    const rv_array *a = in->b->uf_arr[f->id];
    if (!a && seed) {
        rv_array *drawn = ir_layout_array_new(RV_I64, dom);
        if (!drawn)
            return base_error(RV_ERR_OOM, "ufun %s: cannot allocate %lld values", f->name,
                              (long long)dom->numel);
        if ((st = fill_or_check_ufun(in, f, dom, rv_array_data(drawn), true, *seed)) != RV_OK) {
            rv_array_free(drawn);
            return st;
        }
        interp_bindings_own_ufun(in->b, f, drawn);
    }
    if (!(a = in->b->uf_arr[f->id]))
        return base_error(RV_ERR_ARG, "%s is not bound", what);
    rv_dtype t = rv_array_dtype(a);
    if (t != RV_I32 && t != RV_I64)
        return base_error(RV_ERR_SHAPE, "%s: expected an i32 or i64 array, got %s", what,
                          rv_dtype_name(t));
    if ((st = check_shape(in, what, a, dom)) != RV_OK)
        return st;
    /* the int64 copy, in the room the bindings' last run left */
    int64_t *v = in->keep->ufv[f->id], room = in->keep->ufv_room[f->id];
    in->keep->ufv[f->id] = NULL;
    if (!v || room < dom->numel) {
        base_free(v);
        room = dom->numel ? dom->numel : 1;
        v = base_xmalloc(sizeof(int64_t) * (size_t)room);
    }
    in->keep->ufv_room[f->id] = room;
    in->ufv[f->id] = v;
    const void *data = rv_array_cdata(a);
    for (int64_t i = 0; i < dom->numel; i++)
        v[i] = t == RV_I32 ? ((const int32_t *)data)[i] : ((const int64_t *)data)[i];
    /* sealed: checked by this call's rv_bindings_set_linear, into memory
     * the bindings own (rv_bindings.uf_sealed) */
    return in->b->uf_sealed[f->id] ? RV_OK : fill_or_check_ufun(in, f, dom, v, false, 0);
}

/* Draws an input array: floats uniform in [-1, 1) times `scale`
 * (random_scale.c), integers in [-8, 8]. */
static rv_status draw_input(Interp *in, const Tensor *t, const Layout *l, uint64_t seed,
                            double scale) {
    rv_array *a = ir_layout_array_new(t->dtype, l);
    if (!a)
        return base_error(RV_ERR_OOM, "input %s: cannot allocate %lld elements", t->name,
                          (long long)l->numel);
    Rng r = interp_rng_for(seed, t->name);
    void *data = rv_array_data(a);
    for (int64_t i = 0; i < l->numel; i++) {
        switch (t->dtype) {
        case RV_F32:
            ((float *)data)[i] = (float)(scale * interp_rng_unit(&r));
            break;
        case RV_F64:
            ((double *)data)[i] = scale * interp_rng_unit(&r);
            break;
        case RV_I32:
            ((int32_t *)data)[i] = (int32_t)interp_rng_int(&r, -8, 8);
            break;
        case RV_I64:
            ((int64_t *)data)[i] = interp_rng_int(&r, -8, 8);
            break;
        default:
            RV_UNREACHABLE();
        }
    }
    interp_bindings_own_tensor(in->b, t, a);
    return RV_OK;
}

static rv_status prepare_input(Interp *in, const Tensor *t, const uint64_t *seed,
                               double scale) {
    rv_status st;
    char buf[300];
    const char *what = in->names ? in->names->tensor[t->id] : buf;
    if (!in->names)
        snprintf(buf, sizeof buf, "input %s", t->name);
    if (!t->complete)
        return base_error(RV_ERR_TYPE, "%s: its definition is incomplete", what);
    const rv_array *a = in->b->t_arr[t->id];
    if (a && seed)
        return RV_OK; /* drawing only: the run checks what the caller bound */
    if ((st = interp_tensor_layout(in, what, t)) != RV_OK)
        return st;
    const Layout *l = in->tv[t->id].lay;
    if (!a && seed && (st = draw_input(in, t, l, *seed, scale)) != RV_OK)
        return st;
    if (!(a = in->b->t_arr[t->id]))
        return base_error(RV_ERR_ARG, "%s is not bound", what);
    if (rv_array_dtype(a) != t->dtype)
        return base_error(RV_ERR_SHAPE, "%s: expected a %s array, got %s", what,
                          rv_dtype_name(t->dtype), rv_dtype_name(rv_array_dtype(a)));
    if ((st = check_shape(in, what, a, l)) != RV_OK)
        return st;
    in->tv[t->id].arr = a;
    in->tv[t->id].data = rv_array_cdata(a);
    in->tv[t->id].dtype = t->dtype;
    return RV_OK;
}

void interp_keep_free(InterpKeep *k) {
    if (!k)
        return;
    for (int i = 0; i < k->nufuns + k->ntensors; i++)
        ir_layout_free(k->lay[i]);
    for (int i = 0; i < k->nufuns; i++)
        base_free(k->ufv[i]);
    base_free(k->tables);
    base_free(k->lay);
    base_free(k);
}

/* The size of the five tables' block, and where the TensorVal and
 * `numbered` tables start in it. */
static size_t tables_size(const Module *m, size_t *tv_at, size_t *nb_at) {
    size_t ns = (size_t)m->sizes.len + 1, nu = (size_t)m->ufuns.len + 1;
    size_t nt = (size_t)m->tensors.len + 1, nst = (size_t)m->structures.len + 1;
    _Static_assert(_Alignof(TensorVal) <= _Alignof(max_align_t), "table alignment");
    size_t at = ns * sizeof(int64_t) + nu * (sizeof(int64_t *) + sizeof(Layout *));
    *tv_at = (at + _Alignof(TensorVal) - 1) / _Alignof(TensorVal) * _Alignof(TensorVal);
    *nb_at = *tv_at + nt * sizeof(TensorVal);
    return *nb_at + nst * sizeof(bool);
}

/* The memory b's last run kept when the module is the same size, else
 * new (a module that grew between runs drops the old). The tables are
 * zeroed: every run fills them from its own arguments. */
static InterpKeep *keep_take(rv_bindings *b, const Module *m, size_t size) {
    InterpKeep *k = b->keep;
    b->keep = NULL;
    if (k && (k->nsizes != m->sizes.len || k->nufuns != m->ufuns.len ||
              k->ntensors != m->tensors.len || k->nstructs != m->structures.len)) {
        interp_keep_free(k);
        k = NULL;
    }
    if (!k) {
        k = base_xcalloc(1, sizeof *k);
        *k = (InterpKeep){.nsizes = m->sizes.len, .nufuns = m->ufuns.len,
                          .ntensors = m->tensors.len, .nstructs = m->structures.len};
        k->tables = base_xmalloc(size);
        /* lay, ufv and ufv_room in one block too */
        size_t nl = (size_t)(k->nufuns + k->ntensors) + 1, nu = (size_t)k->nufuns + 1;
        char *rest = base_xcalloc(1, nl * sizeof *k->lay + nu * (sizeof *k->ufv + sizeof *k->ufv_room));
        k->lay = (Layout **)rest;
        k->ufv = (int64_t **)(rest + nl * sizeof *k->lay);
        k->ufv_room = (int64_t *)(rest + nl * sizeof *k->lay + nu * sizeof *k->ufv);
    }
    memset(k->tables, 0, size);
    return k;
}

rv_status interp_tensor_layout(Interp *in, const char *what, const Tensor *t) {
    Layout **old = &in->keep->lay[in->m->ufuns.len + t->id];
    Layout *reuse = *old;
    *old = NULL;
    ir_layout_free(in->tv[t->id].lay); /* none, unless evaluated twice in one run */
    in->tv[t->id].lay = NULL;
    return ir_layout_eval_reuse(&in->env, what, t->ndim, t->axes, reuse, &in->tv[t->id].lay);
}

rv_status interp_prepare_env(Interp *in, const Module *m, rv_bindings *b, const uint64_t *seed,
                             const InterpNames *names) {
    memset(in, 0, sizeof *in);
    in->m = m;
    in->names = names;
    in->b = b;
    interp_bindings_sync(b);
    /* the five tables in one block (a compiled run prepares per call),
     * the one the bindings' last run left */
    size_t tv_at, nb_at, size = tables_size(m, &tv_at, &nb_at);
    size_t ns = (size_t)m->sizes.len + 1, nu = (size_t)m->ufuns.len + 1;
    in->keep = keep_take(b, m, size);
    char *block = in->keep->tables;
    in->sizes = (int64_t *)block;
    in->ufv = (int64_t **)(block + ns * sizeof *in->sizes);
    in->ufl = (Layout **)(block + ns * sizeof *in->sizes + nu * sizeof *in->ufv);
    in->tv = (TensorVal *)(block + tv_at);
    in->numbered = (bool *)(block + nb_at);
    in->env = (LayoutEnv){.m = m, .sizes = in->sizes, .uf_vals = in->ufv, .uf_dom = in->ufl};
    /* structures first: a batch binds N, B and UFs together (after the
     * sizes bound arrays determine: X[N, 64] bound fixes the batch's N) */
    rv_status st = RV_OK;
    if (seed && m->structures.len > 0 && (st = rv_bindings_infer_sizes(b)) == RV_OK)
        st = interp_draw_structures(b, *seed);
    if (st == RV_OK)
        st = prepare_sizes(in, seed);
    for (int i = 0; st == RV_OK && i < m->ufuns.len; i++)
        st = prepare_ufun(in, m->ufuns.data[i], seed);
    interp_bindings_take_seals(b, in); /* one call's; a failed one's too */
    return st;
}

rv_status interp_prepare(Interp *in, const Module *m, rv_bindings *b, const uint64_t *seed,
                         const InterpNames *names) {
    rv_status st = interp_prepare_env(in, m, b, seed, names);
    double *fanin = NULL;
    if (seed && m->recurses.len > 0) {
        fanin = base_xmalloc(sizeof(double) * (size_t)m->tensors.len);
        interp_random_fanin(m, fanin);
    }
    for (int i = 0; st == RV_OK && i < m->tensors.len; i++) {
        const Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            st = prepare_input(in, t, seed, fanin ? interp_random_scale(m, fanin, t) : 1);
    }
    base_free(fanin);
    return st;
}

/* Puts x in *slot, freeing what is there (a slot this run did not take). */
static void keep_layout(Layout **slot, Layout *x) {
    if (!x)
        return;
    ir_layout_free(*slot);
    *slot = x;
}

void interp_release(Interp *in) {
    InterpKeep *k = in->keep;
    if (!k) {
        memset(in, 0, sizeof *in);
        return;
    }
    for (int i = 0; i < in->m->ufuns.len; i++) {
        keep_layout(&k->lay[i], in->ufl[i]);
        if (in->ufv[i]) {
            base_free(k->ufv[i]);
            k->ufv[i] = in->ufv[i];
        }
    }
    for (int i = 0; i < in->m->tensors.len; i++)
        keep_layout(&k->lay[in->m->ufuns.len + i], in->tv[i].lay);
    interp_keep_free(in->b->keep); /* none, unless a run began inside this one */
    in->b->keep = k;
    memset(in, 0, sizeof *in);
}

/* ---- evaluation ---- */

rv_status interp_result_new(Interp *in, const Tensor *t, rv_array **out) {
    rv_status st;
    char what[300];
    snprintf(what, sizeof what, "tensor %s", t->name);
    *out = NULL;
    if (!t->complete)
        return base_error(RV_ERR_TYPE, "%s: its definition is incomplete", what);
    if ((st = interp_tensor_layout(in, what, t)) != RV_OK)
        return st;
    const Layout *l = in->tv[t->id].lay;
    if (!(*out = ir_layout_array_new(t->dtype, l)))
        return base_error(RV_ERR_OOM, "%s: cannot allocate %lld elements", what,
                          (long long)l->numel);
    return RV_OK;
}

void interp_result_store(Interp *in, const Tensor *t, rv_array *a) {
    interp_bindings_own_tensor(in->b, t, a);
    in->tv[t->id].arr = a;
    in->tv[t->id].data = rv_array_cdata(a);
    in->tv[t->id].dtype = t->dtype;
}

/* Computes one operation's result and stores it in the bindings. */
static rv_status run_op(Interp *in, const Tensor *t) {
    rv_array *a;
    rv_status st = interp_result_new(in, t, &a);
    if (st != RV_OK)
        return st;
    switch (t->op->kind) {
    case OP_COMPUTE:
    case OP_COND:
        st = interp_eval_op(in, t, a);
        break;
    case OP_EXTERN:
        st = interp_eval_extern(in, t, a);
        break;
    default:
        st = unsupported(t, "%s operations are not supported by the interpreter yet",
                         ir_op_kind_name[t->op->kind]);
    }
    if (st != RV_OK) {
        rv_array_free(a);
        return st;
    }
    interp_result_store(in, t, a);
    return RV_OK;
}

/* Runs the operation defining t, or for a member of a recursion group the
 * whole group at its first member (the members need each other's values;
 * they are consecutive in definition order, and the later ones then have
 * their results already). */
static rv_status run_tensor(Interp *in, const Tensor *t) {
    const Recurse *r = ir_tensor_recurse(t);
    if (!r)
        return run_op(in, t);
    if (r->members.data[0] != t) {
        RV_ASSERT(in->tv[t->id].data); /* members are in m->tensors in group order */
        return RV_OK;
    }
    return interp_eval_recurse(in, r);
}

rv_status rv_interp_run(const rv_module *m, rv_bindings *b) {
    if (!m || !b)
        return base_error(RV_ERR_ARG, "rv_interp_run: no module or bindings");
    if (b->m != m)
        return base_error(RV_ERR_ARG, "rv_interp_run: the bindings belong to another module");
    rv_status st = ir_verify(m);
    if (st != RV_OK)
        return st;
    interp_bindings_sync(b);
    interp_bindings_clear_outputs(b);
    Interp in;
    st = interp_prepare(&in, m, b, NULL, NULL);
    for (int i = 0; st == RV_OK && i < m->tensors.len; i++)
        if (m->tensors.data[i]->op->kind != OP_INPUT)
            st = run_tensor(&in, m->tensors.data[i]);
    interp_release(&in);
    if (st != RV_OK)
        interp_bindings_clear_outputs(b);
    return st;
}
