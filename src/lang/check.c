/*
 * check.c — the ravel checker: AST to IR, with located diagnostics.
 *
 * The checker walks the items in order and builds the module through the
 * ir.h constructors and the rv_* builders. It owns everything that needs
 * a *source location* or a *scope*:
 *
 *   - names: a chain of scopes (Scope, innermost first) above the global
 *     table of items; definitions and binders that clash are reported
 *     ("redefinition", "shadows"), as are names used before they exist and
 *     extents that mention an inner dimension;
 *   - arities of tensor reads, UF applications and function calls;
 *   - facts the constructors cannot see as well: a constant index or a UF
 *     argument provably outside its range (compared as linear forms over
 *     sizes, so `i < 2*B` is known to exceed `b < B`), an `if` below the
 *     top of a body, an axis whose extent cannot be inferred.
 *
 * Typing itself (literal adaptation, promotion, bool operands) is the
 * constructors' job: when one returns NULL, its message from the last
 * error is re-issued at the node being elaborated. The checker stops at
 * the first error; `Checker.st` records it and every function unwinds.
 *
 * The driver functions of the language (rv_module_parse, rv_module_load)
 * sit at the end of this file: lex, parse, check, and keep the source in
 * m->src so later diagnostics can quote it.
 */
#include <stdio.h>
#include <string.h>

#include "ir/layout.h"
#include "lang/lang.h"

typedef enum SymKind {
    SYM_SIZE,    /* Size* */
    SYM_UFUN,    /* Ufun* */
    SYM_TENSOR,  /* Tensor* */
    SYM_AXIS,    /* Axis*: a dimension, compute axis, reduce axis or UF argument */
    SYM_STRUCT,  /* Structure* */
    SYM_RECURSE, /* Recurse*: a recursion group */
    SYM_COUNT
} SymKind;

static const char *const sym_kind_name[SYM_COUNT] = {"size", "ufun",      "tensor",
                                                     "axis", "structure", "recursion"};

typedef struct Sym {
    const char *name;
    SymKind kind;
    void *obj;
    SrcLoc loc;
} Sym;

/* One level of local names (a definition's axes, a reduction's axes). */
typedef struct Scope {
    struct Scope *up;
    Vec(Sym) syms;
} Scope;

/* The branch of a conditional operation being checked: its condition
 * holds (then) or not (else); cond NULL outside one. */
typedef struct Guard {
    const Expr *cond;
    bool holds;
} Guard;

typedef struct Checker {
    const SrcFile *src;
    Module *m;
    Arena *arena;     /* Syms of the global table */
    StrMap globals;   /* item name -> Sym* */
    /* Names used before a definition may take them (see check_late_definition):
     * schedule targets not defined yet and reduction axis names, each to
     * the SrcLoc of its first use. */
    StrMap early_targets;
    StrMap reduce_names;
    Scope *scope;     /* innermost local scope, NULL at item level */
    Tensor *defining; /* the compute whose body is being checked */
    Recurse *group;   /* its recursion group, when it is a member of one */
    const Item *header; /* the member whose header extents are being checked */
    /* While an extent is checked: the binder it belongs to and the binders
     * after it, so a use of an inner dimension gets a precise message. */
    const char *binder;
    const Binder *later;
    int nlater;
    /* UF applications whose argument is an axis with an extent still to be
     * inferred, or that are in a branch of a conditional: their domain is
     * checked once the definition is complete, under the branch's guard. */
    Vec(const Node *) uf_nodes;
    Vec(Expr *) uf_calls;
    Vec(Guard) uf_guards;
    Guard guard;
    /* Reductions whose body ended at the binary operator whose right
     * operand is being checked (`sum(l < L) A[l] - A[l + 1]`), with that
     * operator: a use of their axes there gets a hint. */
    Vec(const Node *) closed;
    Vec(const Node *) closed_at;
    /* The reads and UF applications of the definition being checked ->
     * the SrcLoc of their first occurrence, for ranges.c. */
    PtrMap read_locs;
    rv_status st;
} Checker;

/* ---- diagnostics ---- */

static rv_status error_at(Checker *c, SrcLoc loc, const char *fmt, ...) RV_PRINTF(3, 4);
static rv_status error_at(Checker *c, SrcLoc loc, const char *fmt, ...) {
    if (c->st != RV_OK)
        return c->st;
    Buf b = {0};
    va_list ap;
    va_start(ap, fmt);
    buf_vprintf(&b, fmt, ap);
    va_end(ap);
    c->st = base_diag(RV_ERR_TYPE, c->src, loc, "%s", buf_str(&b));
    buf_free(&b);
    return c->st;
}

/* A constructor returned NULL: re-issue its message at `loc`. */
static rv_status ir_failed(Checker *c, SrcLoc loc) {
    if (c->st != RV_OK)
        return c->st;
    const char *msg = rv_last_error();
    c->st = base_diag(RV_ERR_TYPE, c->src, loc, "%s", *msg ? msg : "invalid definition");
    return c->st;
}

/* Checks a constructor's result; NULL means an error at `loc`. */
static void *built(Checker *c, void *x, SrcLoc loc) {
    if (!x)
        ir_failed(c, loc);
    return x;
}

/* ---- scopes ---- */

static void push_scope(Checker *c, Scope *s) {
    memset(s, 0, sizeof *s);
    s->up = c->scope;
    c->scope = s;
}

static void pop_scope(Checker *c) {
    Scope *s = c->scope;
    c->scope = s->up;
    vec_free(&s->syms);
}

static const Sym *lookup(const Checker *c, const char *name) {
    for (const Scope *s = c->scope; s; s = s->up)
        for (int i = s->syms.len - 1; i >= 0; i--)
            if (strcmp(s->syms.data[i].name, name) == 0)
                return &s->syms.data[i];
    return strmap_get(&c->globals, name);
}

/* A reduction axis may not reuse a name that is already visible: a name
 * inside the body would silently change meaning. (The binders of a
 * definition's header may hide an item name; binder_names rejects two
 * binders of one header with the same name.) */
static bool check_fresh(Checker *c, const char *what, const char *name, SrcLoc loc) {
    const Sym *s = lookup(c, name);
    if (!s)
        return true;
    error_at(c, loc, "%s '%s' shadows the %s '%s' defined at %d:%d", what, name,
             sym_kind_name[s->kind], name, s->loc.line, s->loc.col);
    return false;
}

/* Remembers the first location of each name used before it is defined. */
static void note_early_use(Checker *c, StrMap *uses, const char *name, SrcLoc loc) {
    if (strmap_has(uses, name))
        return;
    SrcLoc *at = arena_alloc(c->arena, sizeof(SrcLoc));
    *at = loc;
    strmap_put(uses, ir_name(c->m, name), at);
}

static void bind_local(Checker *c, const char *name, Axis *a, SrcLoc loc) {
    Sym s = {name, SYM_AXIS, a, loc};
    vec_push(&c->scope->syms, s);
}

static bool declare_global(Checker *c, const char *name, SymKind k, void *obj, SrcLoc loc) {
    const Sym *old = strmap_get(&c->globals, name);
    if (old) {
        error_at(c, loc, "redefinition of '%s' (first defined at %d:%d)", name, old->loc.line,
                 old->loc.col);
        return false;
    }
    Sym *s = arena_alloc(c->arena, sizeof(Sym));
    s->name = name;
    s->kind = k;
    s->obj = obj;
    s->loc = loc;
    strmap_put(&c->globals, name, s);
    return true;
}

/* ---- expressions ---- */

static Expr *elab(Checker *c, const Node *n);

static rv_dtype parse_dtype(Checker *c, const char *name, SrcLoc loc, bool *ok) {
    static const struct {
        const char *name;
        rv_dtype t;
    } dtypes[] = {{"f32", RV_F32}, {"f64", RV_F64}, {"i32", RV_I32}, {"i64", RV_I64}};
    for (int i = 0; i < RV_COUNT(dtypes); i++)
        if (strcmp(name, dtypes[i].name) == 0)
            return dtypes[i].t;
    error_at(c, loc, "unknown dtype '%s' (expected f32, f64, i32 or i64)", name);
    *ok = false;
    return RV_F32;
}

/* "; did you mean 'N'?" for the visible name nearest to `name`: local
 * names (innermost first), then the items. */
static void near_visible(const Checker *c, const char *name, Buf *hint) {
    Vec(const char *) cands = {0};
    for (const Scope *s = c->scope; s; s = s->up)
        for (int i = s->syms.len - 1; i >= 0; i--)
            vec_push(&cands, s->syms.data[i].name);
    for (int i = 0; i < c->globals.cap; i++)
        if (c->globals.keys[i])
            vec_push(&cands, c->globals.keys[i]);
    base_near_hint(hint, name, cands.data, cands.len);
    vec_free(&cands);
}

/* A name that is not visible: the definition being checked, an inner
 * dimension of the extent being checked, or simply undefined. */
static void unknown_name(Checker *c, const char *name, SrcLoc loc) {
    if (c->defining && strcmp(c->defining->name, name) == 0) {
        error_at(c, loc,
                 "'%s' reads itself; a recursive definition belongs in a recursion group "
                 "(recurse R over T { ... })",
                 name);
        return;
    }
    for (int i = 0; c->header && i < c->header->nbinds; i++)
        if (strcmp(c->header->binds[i].name, name) == 0) {
            error_at(c, loc,
                     "the extent of '%s' uses the axis '%s': in a recursion group every node "
                     "has the same shape, so extents use only sizes and ufuns",
                     c->binder, name);
            return;
        }
    for (int i = 0; i < c->nlater; i++)
        if (c->later[i].named && strcmp(c->later[i].name, name) == 0) {
            error_at(c, loc,
                     "the extent of '%s' depends on '%s', an inner dimension: an extent may use "
                     "only the dimensions before it",
                     c->binder, name);
            return;
        }
    for (int i = c->closed.len - 1; i >= 0; i--) {
        const Node *r = c->closed.data[i], *op = c->closed_at.data[i];
        for (int k = 0; k < r->nbinds; k++)
            if (strcmp(r->binds[k].name, name) == 0) {
                error_at(c, loc,
                         "undefined name '%s': the reduction at %d:%d binds it only in its body, "
                         "which ends before the '%s' at %d:%d (a reduction's body is a "
                         "multiplicative-level expression); parenthesize the body: %s(...) (a %s b)",
                         name, r->loc.line, r->loc.col, ir_expr_info[op->op].text, op->loc.line,
                         op->loc.col, r->name, ir_expr_info[op->op].text);
                return;
            }
    }
    Buf hint = {0};
    near_visible(c, name, &hint);
    error_at(c, loc, "undefined name '%s'%s", name, buf_str(&hint));
    buf_free(&hint);
}

/* Records the reductions that end where binary operator n starts: those
 * on the right spine of its left operand. */
static void close_reductions(Checker *c, const Node *n) {
    for (const Node *e = n->args[0]; e;) {
        if (e->kind == ND_REDUCE) {
            vec_push(&c->closed, e);
            vec_push(&c->closed_at, n);
        }
        if (e->kind == ND_BINARY)
            e = e->args[1];
        else if (e->kind == ND_UNARY || e->kind == ND_REDUCE)
            e = e->args[0];
        else
            e = NULL;
    }
}

static Expr *elab_name(Checker *c, const Node *n) {
    const Sym *s = lookup(c, n->name);
    if (!s) {
        unknown_name(c, n->name, n->loc);
        return NULL;
    }
    switch (s->kind) {
    case SYM_SIZE:
        return ir_size(c->m, s->obj);
    case SYM_AXIS:
        return ((Axis *)s->obj)->var;
    case SYM_TENSOR:
        error_at(c, n->loc, "tensor '%s' needs indices: %s[...]", n->name, n->name);
        return NULL;
    case SYM_UFUN:
        error_at(c, n->loc, "ufun '%s' needs arguments: %s[...]", n->name, n->name);
        return NULL;
    default:
        error_at(c, n->loc, "'%s' is a %s, not a value", n->name, sym_kind_name[s->kind]);
        return NULL;
    }
}

/* Elaborates the arguments of a read, a UF application or a call. */
static bool elab_args(Checker *c, const Node *n, Expr **out) {
    for (int i = 0; i < n->nargs; i++)
        if (!(out[i] = elab(c, n->args[i])))
            return false;
    return true;
}

/* An extent with the outer dimensions of `axes` replaced by `idx`. */
static Expr *extent_at(Checker *c, Axis *const *axes, int pos, Expr *const *idx) {
    PtrMap map = {0};
    for (int i = 0; i < pos; i++)
        ptrmap_put(&map, axes[i], idx[i]);
    Expr *e = ir_substitute(c->m, axes[pos]->extent, &map);
    ptrmap_free(&map);
    return e;
}

/* A constant index must lie in [0, extent) for some binding of the sizes.
 * `is_read`: a tensor index (else a UF argument), for the message. */
static bool check_const_index(Checker *c, const Node *arg, Expr *idx, Expr *ext, bool is_read,
                              int pos, const char *owner) {
    int64_t v, lo, hi;
    if (!ir_is_const_int(idx, &v) || !ext)
        return true;
    if (v >= 0 && !(ir_int_bounds(ext, &lo, &hi) && v >= hi))
        return true;
    char *es = ir_expr_str(ext);
    error_at(c, arg->loc, "%s %lld is out of range for %s %d of '%s' (extent %s)",
             is_read ? "index" : "argument", (long long)v, is_read ? "dimension" : "argument", pos,
             owner, es);
    base_free(es);
    return false;
}

/* A UF argument that is an axis must not range beyond the domain: an
 * error only when provable (the interpreter checks the rest at run time),
 * in a branch of a conditional only where the branch may run there. */
static bool check_uf_domain(Checker *c, const Node *arg, Ufun *f, int pos, Expr *a, Expr *dom,
                            Guard g) {
    int64_t d;
    if (a->kind != EX_VAR || !a->u.axis->extent || !dom)
        return true;
    if (g.cond && (lang_guard_hides(g.cond, g.holds, a) || lang_guard_hides(g.cond, g.holds, dom)))
        return true;
    Expr *ext = a->u.axis->extent;
    if (ext == dom || !lang_min_difference(ext, dom, &d) || d <= 0)
        return true;
    char *es = ir_expr_str(ext), *ds = ir_expr_str(dom);
    error_at(c, arg->loc,
             "ufun '%s' used outside its domain: '%s' < %s exceeds the domain %s < %s of "
             "argument %d",
             f->name, a->u.axis->name, es, f->args[pos]->name[0] == '_' ? "_" : f->args[pos]->name,
             ds, pos);
    base_free(es);
    base_free(ds);
    return false;
}

/* name[args]: a tensor read or a UF application. */
static Expr *elab_index(Checker *c, const Node *n) {
    const Sym *s = lookup(c, n->name);
    if (!s) {
        unknown_name(c, n->name, n->loc);
        return NULL;
    }
    if (s->kind != SYM_TENSOR && s->kind != SYM_UFUN) {
        error_at(c, n->loc, "'%s' is %s %s, not a tensor or ufun: it takes no indices", n->name,
                 s->kind == SYM_AXIS ? "an" : "a", sym_kind_name[s->kind]);
        return NULL;
    }
    Tensor *t = s->kind == SYM_TENSOR ? s->obj : NULL;
    Ufun *f = s->kind == SYM_UFUN ? s->obj : NULL;
    int want = t ? t->ndim : f->nargs;
    if (n->nargs != want) {
        error_at(c, n->loc, "%s '%s' has %d %s, given %d", t ? "tensor" : "ufun", n->name, want,
                 t ? (want == 1 ? "dimension" : "dimensions")
                   : (want == 1 ? "argument" : "arguments"),
                 n->nargs);
        return NULL;
    }
    Expr *args[RV_MAX_DIMS];
    if (!elab_args(c, n, args))
        return NULL;
    Axis *const *axes = t ? t->axes : f->args;
    for (int i = 0; i < n->nargs; i++) {
        if (!ir_is_int(args[i]->dtype)) {
            error_at(c, n->args[i]->loc, "%s %d of '%s' must be an integer, got %s",
                     t ? "index" : "argument", i, n->name, rv_dtype_name(args[i]->dtype));
            return NULL;
        }
        Expr *ext = extent_at(c, axes, i, args);
        if (!check_const_index(c, n->args[i], args[i], ext, t != NULL, i, n->name))
            return NULL;
        if (f && !c->guard.cond && !check_uf_domain(c, n->args[i], f, i, args[i], ext, c->guard))
            return NULL;
    }
    Expr *call = t ? ir_read(c->m, t, n->nargs, args) : ir_ufcall(c->m, f, n->nargs, args);
    if (!built(c, call, n->loc))
        return NULL;
    /* the recursion rules, at each read of a member (recurse.c) */
    const char *bad = t && c->group ? ir_recurse_read_error(c->group, c->defining, call) : NULL;
    if (bad) {
        error_at(c, n->loc, "%s", bad);
        return NULL;
    }
    if (!ptrmap_has(&c->read_locs, call))
        ptrmap_put(&c->read_locs, call, (void *)&n->loc);
    if (t)
        return call;
    for (int i = 0; call && i < n->nargs; i++)
        if (args[i]->kind == EX_VAR && (!args[i]->u.axis->extent || c->guard.cond)) {
            vec_push(&c->uf_nodes, n);
            vec_push(&c->uf_calls, call);
            vec_push(&c->uf_guards, c->guard);
            break;
        }
    return call;
}

/* The domain checks postponed until the axes' extents were inferred. */
static bool check_postponed_domains(Checker *c) {
    for (int k = 0; k < c->uf_calls.len && c->st == RV_OK; k++) {
        const Node *n = c->uf_nodes.data[k];
        Expr *call = c->uf_calls.data[k];
        Ufun *f = call->u.uf;
        for (int i = 0; i < call->n; i++)
            if (!check_uf_domain(c, n->args[i], f, i, call->args[i],
                                 extent_at(c, f->args, i, call->args), c->uf_guards.data[k]))
                break;
    }
    c->uf_nodes.len = c->uf_calls.len = c->uf_guards.len = 0;
    return c->st == RV_OK;
}

/* The functions of the language: the math functions of ops.def and these
 * IR kinds, each called by its ops.def name with its arity. */
static const ExprKind functions[] = {
#define MATH(k, text, arity, libm, def) EX_##k,
#include "ir/ops.def"
#undef MATH
    EX_ABS, EX_MIN, EX_MAX, EX_FLOORDIV, EX_FLOORMOD, EX_SELECT,
};

static const struct {
    const char *name;
    rv_dtype t;
} casts[] = {{"f32", RV_F32}, {"f64", RV_F64}, {"i32", RV_I32}, {"i64", RV_I64}};

/* name(args): a math function, min/max, select or a cast. */
static Expr *elab_call(Checker *c, const Node *n) {
    int nargs = -1;
    ExprKind kind = EX_COUNT;
    int cast = -1;
    for (int i = 0; i < RV_COUNT(functions); i++)
        if (strcmp(ir_expr_info[functions[i]].text, n->name) == 0) {
            kind = functions[i];
            nargs = ir_expr_info[kind].arity;
        }
    for (int i = 0; i < RV_COUNT(casts); i++)
        if (strcmp(casts[i].name, n->name) == 0) {
            cast = i;
            nargs = 1;
        }
    if (nargs < 0) {
        const Sym *s = lookup(c, n->name);
        if (s && (s->kind == SYM_TENSOR || s->kind == SYM_UFUN))
            error_at(c, n->loc, "'%s' is a %s: write %s[...], not %s(...)", n->name,
                     sym_kind_name[s->kind], n->name, n->name);
        else
            error_at(c, n->loc, "unknown function '%s'", n->name);
        return NULL;
    }
    if (n->nargs != nargs) {
        error_at(c, n->loc, "'%s' takes %d argument%s, given %d", n->name, nargs,
                 nargs == 1 ? "" : "s", n->nargs);
        return NULL;
    }
    Expr *a[3] = {NULL, NULL, NULL};
    if (!elab_args(c, n, a))
        return NULL;
    if (cast >= 0)
        return built(c, ir_cast(c->m, casts[cast].t, a[0]), n->loc);
    if (kind == EX_SELECT)
        return built(c, ir_select(c->m, a[0], a[1], a[2]), n->loc);
    if (nargs == 1)
        return built(c, ir_unary(c->m, kind, a[0]), n->loc);
    return built(c, ir_binary(c->m, kind, a[0], a[1]), n->loc);
}

/* An extent: an integer expression over sizes, UFs and outer axes. */
static Expr *elab_extent(Checker *c, const Node *n) {
    Expr *e = elab(c, n);
    if (!e)
        return NULL;
    if (!ir_is_int(e->dtype)) {
        error_at(c, n->loc, "an extent must be an integer, got %s", rv_dtype_name(e->dtype));
        return NULL;
    }
    return ir_cast(c->m, RV_I64, e);
}

/* Checks the extent of binders[i], with the later binders pending. */
static Expr *elab_binder_extent(Checker *c, const Binder *b, int i, int n) {
    const char *saved_binder = c->binder;
    const Binder *saved_later = c->later;
    int saved_nlater = c->nlater;
    c->binder = b[i].named ? b[i].name : arena_printf(c->arena, "dimension %d", i);
    c->later = b + i + 1;
    c->nlater = n - i - 1;
    Expr *e = elab_extent(c, b[i].extent);
    c->binder = saved_binder;
    c->later = saved_later;
    c->nlater = saved_nlater;
    return e;
}

/* sum(k < K, l < L) body */
static Expr *elab_reduce(Checker *c, const Node *n) {
    rv_reduce_kind rk = RV_REDUCE_SUM;
    ir_reduce_kind_of(n->name, &rk);
    if (rk == RV_REDUCE_ARGMAX && n->nbinds != 1) {
        error_at(c, n->loc, "argmax reduces over exactly one axis, given %d", n->nbinds);
        return NULL;
    }
    Scope scope;
    push_scope(c, &scope);
    ptrmap_free(&c->read_locs); /* the locations of this definition only */
    Axis *axes[RV_MAX_DIMS];
    Expr *r = NULL;
    if (n->nbinds > RV_MAX_DIMS) {
        error_at(c, n->loc, "a reduction has at most %d axes", RV_MAX_DIMS);
        goto done;
    }
    for (int i = 0; i < n->nbinds; i++) {
        const Binder *b = &n->binds[i];
        if (!check_fresh(c, "reduction axis", b->name, b->loc))
            goto done;
        note_early_use(c, &c->reduce_names, b->name, b->loc);
        Expr *ext = elab_binder_extent(c, n->binds, i, n->nbinds);
        if (!ext || !(axes[i] = built(c, rv_reduce_axis_new(c->m, b->name, ext), b->loc)))
            goto done;
        bind_local(c, b->name, axes[i], b->loc);
    }
    Expr *body = elab(c, n->args[0]);
    if (body)
        r = built(c, ir_reduce(c->m, rk, n->nbinds, axes, body), n->loc);
done:
    pop_scope(c);
    return r;
}

static Expr *elab(Checker *c, const Node *n) {
    if (c->st != RV_OK)
        return NULL;
    Expr *a, *b;
    switch (n->kind) {
    case ND_INT:
        return ir_int(c->m, n->ival);
    case ND_FLOAT:
        return ir_float(c->m, RV_F64, n->fval);
    case ND_BOOL:
        return ir_bool(c->m, n->ival != 0);
    case ND_NAME:
        return elab_name(c, n);
    case ND_INDEX:
        return elab_index(c, n);
    case ND_CALL:
        return elab_call(c, n);
    case ND_UNARY:
        if (!(a = elab(c, n->args[0])))
            return NULL;
        return built(c, ir_unary(c->m, n->op, a), n->loc);
    case ND_BINARY: {
        if (!(a = elab(c, n->args[0])))
            return NULL;
        int mark = c->closed.len;
        close_reductions(c, n);
        b = elab(c, n->args[1]);
        c->closed.len = c->closed_at.len = mark;
        if (!b)
            return NULL;
        return built(c, ir_binary(c->m, n->op, a, b), n->loc);
    }
    case ND_REDUCE:
        return elab_reduce(c, n);
    case ND_IF:
        error_at(c, n->loc,
                 "'if' may only be the whole body of a definition (a conditional operation); "
                 "inside an expression use select(cond, a, b)");
        return NULL;
    default:
        RV_UNREACHABLE();
    }
}

/* ---- items ---- */

static void check_size(Checker *c, const Item *it) {
    if (it->size_lo > it->size_hi) {
        error_at(c, it->name_loc, "size '%s' has an empty range %lld..%lld", it->name,
                 (long long)it->size_lo, (long long)it->size_hi);
        return;
    }
    Size *s = built(c, rv_size_new(c->m, it->name, it->size_lo, it->size_hi), it->name_loc);
    if (!s)
        return;
    s->loc = it->name_loc;
    declare_global(c, it->name, SYM_SIZE, s, it->name_loc);
}

/* The names of binders, for the begin builders; two binders of one list
 * may not share a name. */
static bool binder_names(Checker *c, const char *what, const Binder *b, int n, const char **out) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            if (b[i].named && strcmp(b[i].name, b[j].name) == 0) {
                error_at(c, b[i].loc, "%s '%s' is defined twice (first at %d:%d)", what, b[i].name,
                         b[j].loc.line, b[j].loc.col);
                return false;
            }
        out[i] = b[i].name;
    }
    return true;
}

/* Checks the binders of a dimension list in a fresh scope the caller owns:
 * each extent sees only the binders before it. `axes` are the IR axes the
 * binders name. Extents go to exts[] or, for a compute (cb), to its builder
 * as soon as each is checked, through the public API like any C caller's:
 * a later extent may use an earlier axis (see rv_compute_begin). */
static bool check_binders(Checker *c, const Binder *b, int n, Axis *const *axes, Expr **exts,
                          ComputeBuilder *cb) {
    for (int i = 0; i < n; i++) {
        if (b[i].extent) {
            Expr *e = elab_binder_extent(c, b, i, n);
            if (!e)
                return false;
            if (cb)
                rv_compute_set_extent(cb, i, e);
            else
                exts[i] = e;
        }
        if (b[i].has_pad && (b[i].pad < 1 || b[i].pad > (1 << 20))) {
            error_at(c, b[i].pad_loc, "padding must be a multiple in 1..%d, got %lld", 1 << 20,
                     (long long)b[i].pad);
            return false;
        }
        if (b[i].named)
            bind_local(c, b[i].name, axes[i], b[i].loc);
    }
    return true;
}

/* A ufun's value range lo..hi (lo_node: where lo was written) is not
 * empty. */
static bool check_range(Checker *c, const char *name, const Node *lo_node, Expr *lo, Expr *hi) {
    int64_t a, b;
    if (ir_is_const_int(lo, &a) && ir_is_const_int(hi, &b) && a > b) {
        error_at(c, lo_node->loc, "ufun '%s' has an empty range %lld..%lld", name, (long long)a,
                 (long long)b);
        return false;
    }
    return true;
}

static void check_ufun(Checker *c, const Item *it) {
    if (it->nbinds > RV_MAX_DIMS) {
        error_at(c, it->name_loc, "a ufun takes at most %d arguments", RV_MAX_DIMS);
        return;
    }
    const char *names[RV_MAX_DIMS];
    if (!binder_names(c, "ufun argument", it->binds, it->nbinds, names))
        return;
    Ufun *f = built(c, rv_ufun_begin(c->m, it->name, it->nbinds, names), it->name_loc);
    if (!f)
        return;
    f->loc = it->name_loc;
    Expr *exts[RV_MAX_DIMS];
    Scope scope;
    push_scope(c, &scope);
    /* the arguments are in scope in the value range too: `in 0..n - 1` */
    bool ok = check_binders(c, it->binds, it->nbinds, f->args, exts, NULL);
    Expr *lo = ok ? elab_extent(c, it->lo) : NULL, *hi = lo ? elab_extent(c, it->hi) : NULL;
    pop_scope(c);
    if (!hi)
        return;
    if (!check_range(c, it->name, it->lo, lo, hi))
        return;
    if (built(c, rv_ufun_end(f, exts, lo, hi), it->name_loc))
        declare_global(c, it->name, SYM_UFUN, f, it->name_loc);
}

/* A name an item declares must be new. */
static bool check_new_name(Checker *c, const char *name, SrcLoc loc) {
    const Sym *old = strmap_get(&c->globals, name);
    if (old) {
        error_at(c, loc, "redefinition of '%s' (first defined at %d:%d)", name, old->loc.line,
                 old->loc.col);
        return false;
    }
    return true;
}

static bool check_tensor_name(Checker *c, const Item *it) {
    if (!check_new_name(c, it->name, it->name_loc))
        return false;
    if (it->type.ndim > RV_MAX_DIMS || it->nbinds > RV_MAX_DIMS) {
        error_at(c, it->name_loc, "'%s' has more than %d dimensions", it->name, RV_MAX_DIMS);
        return false;
    }
    return true;
}

/* Storage padding outside a ragged dimension is not supported
 * (ir_layout_check_pads); say so at the `pad`. */
static bool check_pads(Checker *c, const char *name, const Binder *b, int n, Axis *const *axes,
                       Expr *const *exts) {
    int pads[RV_MAX_DIMS], k;
    for (int i = 0; i < n; i++)
        pads[i] = b[i].has_pad ? (int)b[i].pad : 1;
    if (ir_layout_check_pads(name, n, axes, exts, pads, &k) == RV_OK)
        return true;
    error_at(c, b[k].pad_loc, "%s", rv_last_error());
    return false;
}

static void check_input(Checker *c, const Item *it) {
    bool ok = check_tensor_name(c, it);
    rv_dtype dt = ok ? parse_dtype(c, it->type.dtype, it->type.loc, &ok) : RV_F32;
    if (!ok)
        return;
    const char *names[RV_MAX_DIMS];
    if (!binder_names(c, "dimension", it->type.dims, it->type.ndim, names))
        return;
    Tensor *t = built(c, rv_input_begin(c->m, it->name, dt, it->type.ndim, names), it->name_loc);
    if (!t)
        return;
    t->loc = it->name_loc;
    Expr *exts[RV_MAX_DIMS];
    int pads[RV_MAX_DIMS];
    Scope scope;
    push_scope(c, &scope);
    ok = check_binders(c, it->type.dims, it->type.ndim, t->axes, exts, NULL);
    pop_scope(c);
    if (!ok)
        return;
    if (!check_pads(c, it->name, it->type.dims, it->type.ndim, t->axes, exts))
        return;
    for (int i = 0; i < it->type.ndim; i++)
        pads[i] = it->type.dims[i].has_pad ? (int)it->type.dims[i].pad : 1;
    t->param = it->param;
    if (built(c, rv_input_end(t, exts, pads), it->name_loc))
        declare_global(c, it->name, SYM_TENSOR, t, it->name_loc);
}

/* An omitted compute extent must be inferable from the body (ir.h:
 * ir_infer_extent); say so at the axis rather than at the definition.
 * Then the padding, over the extents written or inferred. */
static bool check_inferable(Checker *c, const Item *it, Tensor *t, Expr *const *bodies, int nb) {
    Expr *exts[RV_MAX_DIMS];
    for (int i = 0; i < it->nbinds; i++) {
        exts[i] = t->axes[i]->extent;
        if (it->binds[i].extent || t->op->kind == OP_RECURSE) /* a member's extents are known */
            continue;
        Expr *e = NULL;
        for (int b = 0; !e && b < nb; b++)
            e = ir_infer_extent(c->m, bodies[b], t->axes[i]);
        if (!e) {
            error_at(c, it->binds[i].loc,
                     "cannot infer the extent of axis '%s': it never indexes a tensor or ufun "
                     "directly; write '%s < EXTENT'",
                     it->binds[i].name, it->binds[i].name);
            return false;
        }
        exts[i] = e;
    }
    return check_pads(c, it->name, it->binds, it->nbinds, t->axes, exts);
}

/* Where the first tensor read of e was written (`otherwise` if none). */
static SrcLoc first_read_loc(const Checker *c, const Expr *e, SrcLoc otherwise) {
    const Expr *rd = ir_first_read(e, false);
    const SrcLoc *at = rd ? ptrmap_get(&c->read_locs, rd) : NULL;
    return at ? *at : otherwise;
}

/* The body of a compute: an expression, or `if p then a else b` at the
 * top (a conditional operation). */
static Tensor *check_body(Checker *c, const Item *it, ComputeBuilder *cb, Tensor *t) {
    const Node *n = it->body;
    if (n->kind == ND_IF) {
        Expr *p = elab(c, n->args[0]);
        c->guard = (Guard){p, true};
        Expr *a = p ? elab(c, n->args[1]) : NULL;
        c->guard = (Guard){p, false};
        Expr *b = a ? elab(c, n->args[2]) : NULL;
        c->guard = (Guard){NULL, false};
        if (!b)
            return NULL;
        if (p->dtype != RV_BOOL) {
            error_at(c, n->args[0]->loc, "the condition of 'if' must be a bool, got %s",
                     rv_dtype_name(p->dtype));
            return NULL;
        }
        Expr *bodies[3] = {a, b, p};
        if (!check_inferable(c, it, t, bodies, 3))
            return NULL;
        if (t->op->kind == OP_RECURSE) /* a refused condition is located at its read */
            return built(c, rv_recurse_define(cb, p, a, b), first_read_loc(c, p, n->loc));
        return built(c, rv_compute_end_cond(cb, p, a, b), n->loc);
    }
    Expr *body = elab(c, n);
    if (!body || !check_inferable(c, it, t, &body, 1))
        return NULL;
    if (t->op->kind == OP_RECURSE)
        return built(c, rv_recurse_define(cb, NULL, body, NULL), n->loc);
    return built(c, rv_compute_end(cb, body), n->loc);
}

/* Checks the header (unless t is a recursion's member, whose extents were
 * given when it was declared) and the body of definition `it`, which
 * defines t through cb. */
static bool check_definition(Checker *c, const Item *it, ComputeBuilder *cb, Tensor *t) {
    Scope scope;
    push_scope(c, &scope);
    ptrmap_free(&c->read_locs); /* the locations of this definition only */
    Axis *axes[RV_MAX_DIMS];
    for (int i = 0; i < it->nbinds; i++)
        axes[i] = rv_compute_var(cb, i)->u.axis;
    bool ok = true;
    if (t->op->kind == OP_RECURSE) {
        for (int i = 0; i < it->nbinds; i++)
            bind_local(c, it->binds[i].name, axes[i], it->binds[i].loc);
    } else {
        ok = check_binders(c, it->binds, it->nbinds, axes, NULL, cb);
        for (int i = 0; ok && i < it->nbinds; i++)
            if (it->binds[i].has_pad)
                rv_compute_set_pad(cb, i, (int)it->binds[i].pad);
    }
    c->defining = t;
    ok = ok && check_body(c, it, cb, t) && check_postponed_domains(c) &&
         (c->st = lang_check_ranges(c->src, c->m, t, &c->read_locs)) == RV_OK;
    ptrmap_free(&c->read_locs);
    c->defining = NULL;
    pop_scope(c);
    return ok;
}

static void check_compute(Checker *c, const Item *it) {
    bool ok = check_tensor_name(c, it);
    rv_dtype dt = RV_F32;
    if (ok && it->dtype)
        dt = parse_dtype(c, it->dtype, it->dtype_loc, &ok);
    if (!ok)
        return;
    const char *names[RV_MAX_DIMS];
    if (!binder_names(c, "axis", it->binds, it->nbinds, names))
        return;
    ComputeBuilder *cb =
        built(c, rv_compute_begin(c->m, it->name, it->nbinds, names, NULL), it->name_loc);
    if (!cb)
        return;
    Tensor *t = rv_module_tensor(c->m, it->name);
    RV_ASSERT(t);
    t->loc = it->name_loc;
    if (it->dtype)
        rv_compute_set_dtype(cb, dt);
    if (check_definition(c, it, cb, t))
        declare_global(c, it->name, SYM_TENSOR, t, it->name_loc);
}

/* A tensor an item names (an extern's argument, an output), or NULL after
 * a located error; `what` says what the names must be ("extern
 * arguments"). */
static Tensor *named_tensor(Checker *c, const char *what, const char *name, SrcLoc loc) {
    const Sym *s = lookup(c, name);
    if (!s) {
        Buf hint = {0};
        near_visible(c, name, &hint);
        error_at(c, loc, "undefined name '%s'%s", name, buf_str(&hint));
        buf_free(&hint);
        return NULL;
    }
    if (s->kind != SYM_TENSOR) {
        error_at(c, loc, "%s are tensors; '%s' is a %s", what, name, sym_kind_name[s->kind]);
        return NULL;
    }
    return s->obj;
}

static void check_extern(Checker *c, const Item *it) {
    bool ok = check_tensor_name(c, it);
    rv_dtype dt = ok ? parse_dtype(c, it->type.dtype, it->type.loc, &ok) : RV_F32;
    if (!ok)
        return;
    if (!ir_extern_lookup(it->kernel)) {
        Buf known = {0};
        for (int i = 0; i < ir_extern_count(); i++)
            buf_printf(&known, "%s\"%s\"", i ? ", " : "", ir_extern_at(i)->name);
        error_at(c, it->kernel_loc, "unknown extern kernel \"%s\" (known: %s)", it->kernel,
                 buf_str(&known));
        buf_free(&known);
        return;
    }
    Tensor *ins[16];
    if (it->nargs > RV_COUNT(ins)) {
        error_at(c, it->arg_locs[RV_COUNT(ins)], "an extern takes at most %d tensors",
                 RV_COUNT(ins));
        return;
    }
    for (int i = 0; i < it->nargs; i++)
        if (!(ins[i] = named_tensor(c, "extern arguments", it->args[i], it->arg_locs[i])))
            return;
    /* The output's extents are over sizes (its own dimensions are not in
     * scope: the extern builder takes the extents before the axes exist). */
    rv_dimspec dims[RV_MAX_DIMS];
    for (int i = 0; i < it->type.ndim; i++) {
        const Binder *b = &it->type.dims[i];
        dims[i].name = b->name;
        dims[i].pad = b->has_pad ? (int)b->pad : 1;
        if (b->has_pad && (b->pad < 1 || b->pad > (1 << 20))) {
            error_at(c, b->pad_loc, "padding must be a multiple in 1..%d, got %lld", 1 << 20,
                     (long long)b->pad);
            return;
        }
        if (!(dims[i].extent = elab_binder_extent(c, it->type.dims, i, it->type.ndim)))
            return;
    }
    Tensor *t =
        built(c, rv_extern_new(c->m, it->name, it->kernel, it->nargs, ins, dt, it->type.ndim, dims),
              it->name_loc);
    if (!t)
        return;
    t->loc = it->name_loc;
    declare_global(c, it->name, SYM_TENSOR, t, it->name_loc);
}

/* output h, y: exactly these tensors are the program's outputs (one
 * declaration, naming computed tensors defined before it, each once). */
static void check_output(Checker *c, const Item *it) {
    if (c->m->outputs.len > 0) {
        error_at(c, it->loc, "a second 'output' declaration: a program names its outputs once");
        return;
    }
    for (int i = 0; i < it->nargs; i++) {
        Tensor *t = named_tensor(c, "outputs", it->args[i], it->arg_locs[i]);
        if (!t)
            return;
        const char *why = ir_output_error(c->m, t, (const Tensor *const *)c->m->outputs.data,
                                          c->m->outputs.len);
        if (why) {
            error_at(c, it->arg_locs[i], "'%s' %s", t->name, why);
            return;
        }
        vec_push(&c->m->outputs, t);
    }
}

/* ---- structures and recursion groups (docs/recursion.md) ---- */

static const struct {
    const char *name;
    rv_struct_kind kind;
} struct_kinds[] = {
    {"sequence", RV_STRUCT_SEQUENCE}, {"tree", RV_STRUCT_TREE}, {"dag", RV_STRUCT_DAG}};

/* A structure's count of nodes or of roots: the name of a declared size. */
static Size *structure_size(Checker *c, const Item *it, const Node *n, const char *what) {
    const Sym *s = n->kind == ND_NAME ? lookup(c, n->name) : NULL;
    if (s && s->kind == SYM_SIZE)
        return s->obj;
    if (n->kind != ND_NAME)
        error_at(c, n->loc, "the number of %s of structure '%s' is a declared size: write its name",
                 what, it->name);
    else if (!s)
        error_at(c, n->loc,
                 "undefined size '%s': the number of %s of structure '%s' is a declared size",
                 n->name, what, it->name);
    else
        error_at(c, n->loc,
                 "'%s' is a %s, not a size: the number of %s of structure '%s' is a declared size",
                 n->name, sym_kind_name[s->kind], what, it->name);
    return NULL;
}

/* The names a structure declares are new and distinct. */
static bool check_structure_names(Checker *c, const Item *it) {
    Vec(const char *) names = {0};
    Vec(SrcLoc) locs = {0};
    vec_push(&names, it->name);
    vec_push(&locs, it->name_loc);
    vec_push(&names, it->child);
    vec_push(&locs, it->child_loc);
    vec_push(&names, it->nchild);
    vec_push(&locs, it->nchild_loc);
    if (it->root) {
        vec_push(&names, it->root);
        vec_push(&locs, it->root_loc);
    }
    for (int i = 0; i < it->ndata; i++) {
        vec_push(&names, it->data[i].name);
        vec_push(&locs, it->data[i].loc);
    }
    bool ok = true;
    for (int i = 0; ok && i < names.len; i++) {
        ok = check_new_name(c, names.data[i], locs.data[i]);
        for (int j = 0; ok && j < i; j++)
            if (strcmp(names.data[i], names.data[j]) == 0) {
                error_at(c, locs.data[i], "redefinition of '%s' (first defined at %d:%d)",
                         names.data[i], locs.data[j].line, locs.data[j].col);
                ok = false;
            }
    }
    vec_free(&names);
    vec_free(&locs);
    return ok;
}

/* structure T : kind(N, K) { children child, nchild  roots root[s < B]
 * data word in lo..hi }: the IR builds the ufuns (recurse.c). */
static void check_structure(Checker *c, const Item *it) {
    int k = -1;
    for (int i = 0; i < RV_COUNT(struct_kinds); i++)
        if (strcmp(it->skind, struct_kinds[i].name) == 0)
            k = i;
    if (k < 0) {
        error_at(c, it->skind_loc, "unknown structure kind '%s' (expected sequence, tree or dag)",
                 it->skind);
        return;
    }
    rv_struct_kind kind = struct_kinds[k].kind;
    int want = kind == RV_STRUCT_SEQUENCE ? 1 : 2;
    if (it->nkargs != want) {
        SrcLoc at = it->nkargs > want ? it->kargs[want]->loc : it->skind_loc;
        if (kind == RV_STRUCT_SEQUENCE)
            error_at(c, at, "a sequence has one child per node: write sequence(N), N its nodes");
        else
            error_at(c, at,
                     "'%s' takes the number of nodes and the most children a node has: %s(N, K)",
                     it->skind, it->skind);
        return;
    }
    if (!check_structure_names(c, it))
        return;
    Size *nodes = structure_size(c, it, it->kargs[0], "nodes");
    if (!nodes)
        return;
    int64_t K = 1;
    if (want == 2) {
        const Node *kn = it->kargs[1];
        if (kn->kind != ND_INT) {
            error_at(c, kn->loc, "the number of children of structure '%s' is an integer literal",
                     it->name);
            return;
        }
        K = kn->ival;
        if (K < 1 || K > 64) { /* rv_structure_new's bound, located at K */
            error_at(c, kn->loc,
                     "structure '%s': the number of children must be in 1..64, got %lld", it->name,
                     (long long)K);
            return;
        }
    }
    Size *count = NULL;
    if (it->root) {
        if (it->nbinds != 1) {
            error_at(c, it->root_loc,
                     "the roots ufun '%s' takes one argument, the structure: %s[s < B]", it->root,
                     it->root);
            return;
        }
        if (!(count = structure_size(c, it, it->binds[0].extent, "roots")))
            return;
    }
    Expr **lo = arena_alloc(c->arena, sizeof(Expr *) * (size_t)(it->ndata + 1));
    Expr **hi = arena_alloc(c->arena, sizeof(Expr *) * (size_t)(it->ndata + 1));
    for (int i = 0; i < it->ndata; i++) {
        const DataCol *d = &it->data[i];
        if (!(lo[i] = elab_extent(c, d->lo)) || !(hi[i] = elab_extent(c, d->hi)) ||
            !check_range(c, d->name, d->lo, lo[i], hi[i]))
            return;
    }
    Structure *st =
        built(c, rv_structure_new(c->m, it->name, kind, nodes, (int)K, it->child, it->nchild),
              it->name_loc);
    if (!st)
        return;
    st->loc = it->name_loc;
    st->child->loc = it->child_loc;
    st->nchild->loc = it->nchild_loc;
    declare_global(c, it->name, SYM_STRUCT, st, it->name_loc);
    declare_global(c, it->child, SYM_UFUN, st->child, it->child_loc);
    declare_global(c, it->nchild, SYM_UFUN, st->nchild, it->nchild_loc);
    if (it->root) {
        Ufun *f = built(c, rv_structure_set_roots(st, it->root, count), it->root_loc);
        if (!f)
            return;
        f->loc = it->root_loc;
        declare_global(c, it->root, SYM_UFUN, f, it->root_loc);
    }
    for (int i = 0; i < it->ndata; i++) {
        const DataCol *d = &it->data[i];
        /* a range the IR refuses uses a ufun or tensor: locate at it */
        SrcLoc at = ir_first_read(lo[i], true)   ? d->lo->loc
                    : ir_first_read(hi[i], true) ? d->hi->loc
                                                 : d->loc;
        Ufun *f = built(c, rv_structure_add_data(st, d->name, lo[i], hi[i]), at);
        if (!f)
            return;
        f->loc = d->loc;
        declare_global(c, d->name, SYM_UFUN, f, d->loc);
    }
}

/* Declares member `it` of group r (its header: the node axis first, the
 * other extents written out over sizes and ufuns), so every body of the
 * group may read it. */
static ComputeBuilder *declare_member(Checker *c, Recurse *r, const Item *it) {
    bool ok = check_tensor_name(c, it);
    rv_dtype dt = RV_F32;
    if (ok && it->dtype)
        dt = parse_dtype(c, it->dtype, it->dtype_loc, &ok);
    if (!ok)
        return NULL;
    if (it->nbinds == 0) {
        error_at(c, it->name_loc,
                 "'%s' has no axis: a member of recursion '%s' is indexed by its node first, "
                 "%s[n, ...]",
                 it->name, r->name, it->name);
        return NULL;
    }
    const char *names[RV_MAX_DIMS];
    if (!binder_names(c, "axis", it->binds, it->nbinds, names))
        return NULL;
    Structure *st = r->st;
    Expr *exts[RV_MAX_DIMS] = {NULL};
    c->header = it;
    for (int i = 0; i < it->nbinds && c->st == RV_OK; i++) {
        const Binder *b = &it->binds[i];
        if (b->has_pad && (b->pad < 1 || b->pad > (1 << 20)))
            error_at(c, b->pad_loc, "padding must be a multiple in 1..%d, got %lld", 1 << 20,
                     (long long)b->pad);
        else if (!b->extent && i > 0)
            error_at(c, b->loc,
                     "axis '%s' of '%s' needs an extent: in a recursion group every axis but the "
                     "node axis is written '%s < EXTENT'",
                     b->name, it->name, b->name);
        else if (b->extent && (exts[i] = elab_binder_extent(c, it->binds, i, it->nbinds)) &&
                 i == 0 && exts[i] != ir_size(c->m, st->nodes))
            error_at(c, b->extent->loc,
                     "the node axis '%s' of '%s' ranges over the nodes of '%s': write '%s' or "
                     "'%s < %s'",
                     b->name, it->name, st->name, b->name, b->name, st->nodes->name);
    }
    c->header = NULL;
    if (c->st != RV_OK)
        return NULL;
    ComputeBuilder *cb =
        built(c, rv_recurse_add(r, it->name, dt, it->nbinds, names, exts), it->name_loc);
    if (!cb)
        return NULL;
    for (int i = 0; i < it->nbinds; i++)
        if (it->binds[i].has_pad)
            rv_compute_set_pad(cb, i, (int)it->binds[i].pad);
    cb->t->loc = it->name_loc;
    declare_global(c, it->name, SYM_TENSOR, cb->t, it->name_loc);
    return cb;
}

/* recurse R over T { definitions }: every member is declared before any
 * body is checked (bodies read members defined later), and each read of a
 * member in the group is checked against the rules where it is written. */
static void check_recurse(Checker *c, const Item *it) {
    const Sym *s = lookup(c, it->over);
    if (!s || s->kind != SYM_STRUCT) {
        if (!s)
            error_at(c, it->over_loc, "undefined structure '%s'", it->over);
        else
            error_at(c, it->over_loc, "'%s' is a %s, not a structure", it->over,
                     sym_kind_name[s->kind]);
        return;
    }
    if (!check_new_name(c, it->name, it->name_loc))
        return;
    if (it->nmembers == 0) {
        error_at(c, it->name_loc, "recursion '%s' defines no tensor", it->name);
        return;
    }
    Recurse *r = built(c, rv_recurse_begin(c->m, it->name, s->obj), it->name_loc);
    if (!r)
        return;
    r->loc = it->name_loc;
    declare_global(c, it->name, SYM_RECURSE, r, it->name_loc);
    Vec(ComputeBuilder *) cbs = {0};
    for (int i = 0; i < it->nmembers; i++) {
        ComputeBuilder *cb = declare_member(c, r, it->members[i]);
        if (!cb)
            break;
        vec_push(&cbs, cb);
    }
    c->group = r;
    for (int i = 0; c->st == RV_OK && i < it->nmembers; i++)
        check_definition(c, it->members[i], cbs.data[i], cbs.data[i]->t);
    c->group = NULL;
    vec_free(&cbs);
    if (c->st == RV_OK && rv_recurse_end(r) != RV_OK)
        ir_failed(c, it->name_loc);
}

/* Copies a schedule block into the module (interned strings): the block
 * of tensor t or of recursion group g. */
static void copy_schedule(Module *m, const Item *it, Tensor *t, Recurse *g, const SrcFile *file) {
    SchedBlock blk = {.name = ir_name(m, it->name),
                      .name_loc = it->name_loc,
                      .target = t,
                      .src = file,
                      .nsteps = it->nsteps,
                      .loc = it->loc,
                      .group = g};
    blk.steps = arena_alloc(m->arena, sizeof(SchedStep) * (size_t)(it->nsteps ? it->nsteps : 1));
    for (int i = 0; i < it->nsteps; i++) {
        const SchedStep *src = &it->steps[i];
        SchedStep *dst = &blk.steps[i];
        *dst = *src;
        dst->prim = ir_name(m, src->prim);
        dst->outs = arena_alloc(m->arena, sizeof(char *) * (size_t)(src->nout ? src->nout : 1));
        for (int j = 0; j < src->nout; j++)
            dst->outs[j] = ir_name(m, src->outs[j]);
        dst->args = arena_alloc(m->arena, sizeof(SchedArg) * (size_t)(src->nargs ? src->nargs : 1));
        for (int j = 0; j < src->nargs; j++) {
            dst->args[j] = src->args[j];
            if (src->args[j].key)
                dst->args[j].key = ir_name(m, src->args[j].key);
            if (src->args[j].s)
                dst->args[j].s = arena_strdup(m->arena, src->args[j].s);
        }
    }
    vec_push(&m->scheds, blk);
}

static Recurse *module_recurse(const Module *m, const char *name) {
    for (int i = 0; i < m->recurses.len; i++)
        if (strcmp(m->recurses.data[i]->name, name) == 0)
            return m->recurses.data[i];
    return NULL;
}

/* Resolves the target of schedule block `it`: a tensor, a recursion group
 * (*group), or a name the module does not know, which may be a stage an
 * earlier block created (`XL = cache_read(X)`; src/sched resolves it and
 * reports typos). Shared by the checker and rv_module_schedule, so a block
 * added through the C API obeys the rules of one written in source. */
static rv_status schedule_target(Module *m, const SrcFile *src, const Item *it, Tensor **out,
                                 Recurse **group) {
    *out = NULL;
    const char *name = it->name;
    Tensor *t = rv_module_tensor(m, name);
    if ((*group = module_recurse(m, name)))
        return RV_OK;
    if (!t && strmap_has(&m->by_name, name))
        return base_diag(RV_ERR_TYPE, src, it->name_loc, "schedule target '%s' is not a tensor",
                         name);
    if (t && t->op->kind == OP_INPUT)
        return base_diag(RV_ERR_TYPE, src, it->name_loc,
                         "unknown schedule target '%s': it is an input; schedule the tensors "
                         "that read it",
                         name);
    *out = t;
    return RV_OK;
}

static void check_schedule(Checker *c, const Item *it) {
    Tensor *t;
    Recurse *g;
    c->st = schedule_target(c->m, c->src, it, &t, &g);
    if (c->st != RV_OK)
        return;
    if (!t && !g)
        note_early_use(c, &c->early_targets, it->name, it->name_loc);
    copy_schedule(c->m, it, t, g, NULL);
}

/* Rules about names used before a definition takes them, checked when
 * the definition comes (so items can be checked one at a time): a
 * schedule block must follow its tensor's definition (the order rule,
 * docs/language.md), and a reduction axis may not take the name of a size
 * or ufun declared later (those print before every tensor, where the axis
 * would hide them). */
static bool check_late_name(Checker *c, const char *name, SrcLoc loc, ItemKind k) {
    const SrcLoc *at = strmap_get(&c->early_targets, name);
    if (at) {
        error_at(c, *at,
                 "schedule block for '%s' before its definition at %d:%d: a schedule block "
                 "must follow the definition of its %s",
                 name, loc.line, loc.col, k == IT_RECURSE ? "recursion group" : "tensor");
        return false;
    }
    at = strmap_get(&c->reduce_names, name);
    if (at && (k == IT_SIZE || k == IT_UFUN)) {
        error_at(c, *at,
                 "reduction axis '%s' has the name of the %s '%s' declared at %d:%d; sizes and "
                 "ufuns are global to the whole program",
                 name, k == IT_SIZE ? "size" : "ufun", name, loc.line, loc.col);
        return false;
    }
    return true;
}

/* The rules for every name the item declares: a structure's ufuns and a
 * recursion's members too. */
static bool check_late_definition(Checker *c, const Item *it) {
    if (!check_late_name(c, it->name, it->name_loc, it->kind))
        return false;
    if (it->kind == IT_STRUCTURE) {
        const char *names[] = {it->child, it->nchild, it->root};
        const SrcLoc locs[] = {it->child_loc, it->nchild_loc, it->root_loc};
        for (int i = 0; i < 3; i++)
            if (names[i] && !check_late_name(c, names[i], locs[i], IT_UFUN))
                return false;
        for (int i = 0; i < it->ndata; i++)
            if (!check_late_name(c, it->data[i].name, it->data[i].loc, IT_UFUN))
                return false;
    }
    for (int i = 0; i < it->nmembers; i++)
        if (!check_late_name(c, it->members[i]->name, it->members[i]->name_loc, IT_COMPUTE))
            return false;
    return true;
}

Checker *lang_checker_new(const SrcFile *src, Module *m) {
    Checker *c = base_xcalloc(1, sizeof *c);
    c->src = src;
    c->m = m;
    c->arena = arena_new();
    return c;
}

rv_status lang_check_item(Checker *c, const Item *it) {
    if (c->st != RV_OK || (it->kind != IT_SCHEDULE && it->kind != IT_OUTPUT &&
                           !check_late_definition(c, it)))
        return c->st;
    switch (it->kind) {
    case IT_SIZE:
        check_size(c, it);
        break;
    case IT_UFUN:
        check_ufun(c, it);
        break;
    case IT_INPUT:
        check_input(c, it);
        break;
    case IT_COMPUTE:
        check_compute(c, it);
        break;
    case IT_EXTERN:
        check_extern(c, it);
        break;
    case IT_SCHEDULE:
        check_schedule(c, it);
        break;
    case IT_STRUCTURE:
        check_structure(c, it);
        break;
    case IT_RECURSE:
        check_recurse(c, it);
        break;
    case IT_OUTPUT:
        check_output(c, it);
        break;
    default:
        RV_UNREACHABLE();
    }
    /* an input's or ufun's extents are set once the whole item is checked */
    if (c->st == RV_OK)
        check_postponed_domains(c);
    return c->st;
}

rv_status lang_checker_free(Checker *c) {
    rv_status st = c->st;
    strmap_free(&c->globals);
    strmap_free(&c->early_targets);
    strmap_free(&c->reduce_names);
    vec_free(&c->uf_nodes);
    vec_free(&c->uf_calls);
    vec_free(&c->uf_guards);
    vec_free(&c->closed);
    vec_free(&c->closed_at);
    ptrmap_free(&c->read_locs);
    arena_free(c->arena);
    base_free(c);
    return st;
}

rv_status lang_check(const SrcFile *src, const Program *p, Module *m) {
    Checker *c = lang_checker_new(src, m);
    for (int i = 0; i < p->nitems; i++)
        lang_check_item(c, p->items[i]);
    return lang_checker_free(c);
}

/* ---- the public entry points ---- */

rv_status lang_parse_text(const char *name, const char *text, size_t len, Module **out) {
    *out = NULL;
    Module *m = rv_module_new();
    SrcFile *src = arena_alloc(m->arena, sizeof(SrcFile));
    src->name = arena_strdup(m->arena, name ? name : "<input>");
    src->len = len;
    src->text = arena_memdup(m->arena, text, len + 1);
    m->src = src;
    /* Item by item, each lexed as it is parsed: a big program holds its IR
     * and one item's tokens and AST at a time. The token texts, which
     * names point to, live on. */
    Arena *names = arena_new();
    Lexer *lx = lang_lexer_new(src, names);
    ItemParser *ip = lang_item_parser_lex(src, lx);
    Checker *c = lang_checker_new(src, m);
    rv_status st;
    for (;;) {
        Arena *a = arena_new();
        Item *it;
        st = lang_parse_item(ip, a, &it);
        if (st == RV_OK && it)
            st = lang_check_item(c, it);
        arena_free(a);
        if (st != RV_OK || !it)
            break;
    }
    rv_status cst = lang_checker_free(c);
    if (st == RV_OK)
        st = cst;
    lang_item_parser_free(ip);
    lang_lexer_free(lx);
    arena_free(names);
    if (st != RV_OK) {
        rv_module_free(m);
        return st;
    }
    *out = m;
    return RV_OK;
}

rv_status rv_module_parse(const char *name, const char *text, rv_module **out) {
    if (!out)
        return base_error(RV_ERR_ARG, "rv_module_parse: out is NULL");
    *out = NULL;
    if (!text)
        return base_error(RV_ERR_ARG, "rv_module_parse: text is NULL");
    return lang_parse_text(name, text, strlen(text), out);
}

rv_status rv_module_load(const char *path, rv_module **out) {
    if (!out)
        return base_error(RV_ERR_ARG, "rv_module_load: out is NULL");
    *out = NULL;
    char *text;
    size_t len;
    rv_status st = base_read_file(path, &text, &len);
    if (st != RV_OK)
        return st;
    st = lang_parse_text(path, text, len, out);
    base_free(text);
    return st;
}

/* Appends the schedule blocks of src's text to m; with `one`, the text
 * must be a single block. The text lives in m's arena, as the blocks'
 * locations point into it. */
static rv_status parse_schedule_blocks(Module *m, SrcFile *src, bool one) {
    Arena *a = arena_new();
    Token *toks;
    int ntok;
    Program *prog = NULL;
    rv_status st = lang_lex(src, a, &toks, &ntok);
    if (st == RV_OK) {
        st = lang_parse(src, toks, a, &prog);
        base_free(toks);
    }
    if (st == RV_OK && one && prog->nitems != 1)
        st = base_error(RV_ERR_SYNTAX, "%s: expected schedule steps only", src->name);
    for (int i = 0; st == RV_OK && i < prog->nitems; i++)
        if (prog->items[i]->kind != IT_SCHEDULE)
            st = base_error(RV_ERR_SYNTAX, "%s: expected schedule %s only", src->name,
                            one ? "steps" : "blocks");
    for (int i = 0; st == RV_OK && i < prog->nitems; i++) {
        Tensor *t;
        Recurse *g;
        st = schedule_target(m, src, prog->items[i], &t, &g);
        if (st == RV_OK)
            copy_schedule(m, prog->items[i], t, g, src);
    }
    arena_free(a);
    return st;
}

rv_status rv_module_schedule(rv_module *m, const char *target, const char *steps) {
    if (!m || !target || !steps)
        return base_error(RV_ERR_ARG, "rv_module_schedule: NULL argument");
    SrcFile *src = arena_alloc(m->arena, sizeof(SrcFile));
    src->name = arena_printf(m->arena, "<schedule of %s>", target);
    char *text = arena_printf(m->arena, "schedule %s {\n%s\n}\n", target, steps);
    src->text = text;
    src->len = strlen(text);
    return parse_schedule_blocks(m, src, true);
}

rv_status lang_parse_schedules(Module *m, const char *name, const char *text) {
    SrcFile *src = arena_alloc(m->arena, sizeof(SrcFile));
    src->name = arena_strdup(m->arena, name);
    src->text = arena_strdup(m->arena, text);
    src->len = strlen(text);
    return parse_schedule_blocks(m, src, false);
}
