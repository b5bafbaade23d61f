/*
 * stmt.c — the loop IR's statements: construction, generic traversal and
 * the text form.
 *
 * Statements are small immutable nodes in the module's arena. The
 * constructors check their operands (a misuse is a bug in a pass, so they
 * assert rather than report) and keep one shape for each meaning: a
 * sequence is never nested in a sequence, never holds NULL, and a sequence
 * of one statement is that statement. Passes therefore never need to
 * special-case "a seq of one seq".
 *
 * lower_mutate is the generic child-mutator every pass delegates to from
 * its `default:` case: it applies an expression function to every
 * expression a statement holds (loop extents, conditions, let values,
 * store indices and values) and a statement function after the children,
 * and rebuilds a statement only when one of its parts changed, so an
 * untouched subtree comes back as the same pointer.
 *
 * The printer writes a readable, deterministic text used by dumps
 * (RAVEL_DEBUG) and golden tests:
 *
 *     kernel vcopy(B: size, len: i64*, A: f32*, A_start: i64*, S: f32*)
 *       prelude:
 *         A_start[0] = 0
 *         for b in 0..B:
 *           A_start[b + 1] = A_start[b] + len[b]*64
 *       parallel for b in 0..B:
 *         for j in 0..64:
 *           let off = A_start[b] + j
 *           S[b*64 + j] = A[off]
 *
 * Expressions are printed here rather than through ir_print_expr, which
 * serves the .rv round trip: the loop-IR text is terser (products without
 * spaces, `i*2304 + j`; constants without dtype casts; `-(-x)` for nested
 * negations) and golden files should not change when the .rv printer
 * does. Both printers take their binding strengths from the prec column
 * of ops.def. The syntax is ravel's own (calls
 * for min/max/floordiv/select/casts), with `buf[index]` for loads. A `let` or
 * `allocate` scopes over the rest of its block, so its body is printed at
 * the same indentation when it is the last statement of that block, and as
 * an indented block ending in `:` otherwise, which keeps the text
 * unambiguous.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "lower/lower.h"

// clang-format off
const char *const lower_stmt_name[ST_COUNT] = {
#define STMT(k, text) text,
#include "stmts.def"
#undef STMT
};

const char *const lower_loop_kind_name[LOOP_COUNT] = {
#define LOOP(k, sched_name, ir_name) ir_name,
#include "sched/loops.def"
#undef LOOP
};
// clang-format on
const char *const lower_gpu_batches_word[SCHED_GPU_PERSISTENT + 1] = {
    [SCHED_GPU_LAUNCH] = "launch_batches", [SCHED_GPU_PERSISTENT] = "persistent_batches"};
_Static_assert(RV_COUNT(lower_stmt_name) == ST_COUNT, "lower_stmt_name parallels StmtKind");
_Static_assert(RV_COUNT(lower_loop_kind_name) == LOOP_COUNT,
               "lower_loop_kind_name parallels LoopKind");

static const char *const scope_name[BUF_COUNT] = {"arg", "aux", "global", "local", "pack"};
_Static_assert(RV_COUNT(scope_name) == BUF_COUNT, "scope_name parallels BufScope");

/* ---- construction ---- */

static Stmt *new_stmt(Module *m, StmtKind k) {
    Stmt *s = arena_alloc(m->arena, sizeof(Stmt));
    s->kind = k;
    return s;
}

static bool is_index(const Expr *e) {
    return e && ir_is_int(e->dtype);
}

Axis *lower_loop_var(Module *m, const char *name, Expr *extent) {
    RV_ASSERT(name && (!extent || is_index(extent)));
    return ir_axis_new(m, name, AX_LOOP, extent);
}

Stmt *lower_for(Module *m, Axis *var, Expr *extent, LoopKind k, Stmt *body) {
    RV_ASSERT(var && var->kind == AX_LOOP);
    RV_ASSERT(is_index(extent));
    RV_ASSERT(k >= 0 && k < LOOP_COUNT);
    Stmt *s = new_stmt(m, ST_FOR);
    s->u.loop.var = var;
    s->u.loop.extent = extent;
    s->u.loop.kind = k;
    s->u.loop.body = body;
    return s;
}

Stmt *lower_for_like(Module *m, const Stmt *like, Axis *var, Expr *extent, Stmt *body) {
    Stmt *s = lower_for(m, var, extent, like->u.loop.kind, body);
    s->u.loop.gpu_batches = like->u.loop.gpu_batches;
    return s;
}

Stmt *lower_if(Module *m, Expr *cond, Stmt *then_s, Stmt *else_s) {
    RV_ASSERT(cond && cond->dtype == RV_BOOL);
    Stmt *s = new_stmt(m, ST_IF);
    s->u.if_.cond = cond;
    s->u.if_.then_s = then_s;
    s->u.if_.else_s = else_s;
    return s;
}

Stmt *lower_let(Module *m, Axis *var, Expr *value, Stmt *body) {
    RV_ASSERT(var && var->kind == AX_LOOP);
    RV_ASSERT(value);
    Stmt *s = new_stmt(m, ST_LET);
    s->u.let.var = var;
    s->u.let.value = value;
    s->u.let.body = body;
    return s;
}

Stmt *lower_store(Module *m, Buffer *b, Expr *index, Expr *value) {
    RV_ASSERT(b && is_index(index) && value);
    RV_ASSERT(value->dtype == b->dtype);
    Stmt *s = new_stmt(m, ST_STORE);
    s->u.store.buf = b;
    s->u.store.index = index;
    s->u.store.value = value;
    return s;
}

Stmt *lower_alloc(Module *m, Buffer *b, Stmt *body) {
    RV_ASSERT(b && b->scope != BUF_ARG && b->scope != BUF_AUX);
    Stmt *s = new_stmt(m, ST_ALLOC);
    s->u.alloc.buf = b;
    s->u.alloc.body = body;
    return s;
}

typedef Vec(Stmt *) StmtVec;

/* Appends the statements of s to v, looking through nested sequences. */
static void flatten(StmtVec *v, Stmt *s) {
    if (!s)
        return;
    if (s->kind == ST_SEQ) {
        for (int i = 0; i < s->u.seq.n; i++)
            flatten(v, s->u.seq.stmts[i]);
        return;
    }
    vec_push(v, s);
}

Stmt *lower_seq(Module *m, int n, Stmt *const *stmts) {
    RV_ASSERT(n >= 0 && (n == 0 || stmts));
    StmtVec v = {0};
    for (int i = 0; i < n; i++)
        flatten(&v, stmts[i]);
    Stmt *s = NULL;
    if (v.len == 1) {
        s = v.data[0];
    } else if (v.len > 1) {
        s = new_stmt(m, ST_SEQ);
        s->u.seq.n = v.len;
        s->u.seq.stmts = arena_memdup(m->arena, v.data, sizeof(Stmt *) * (size_t)v.len);
    }
    vec_free(&v);
    return s;
}

Stmt *lower_barrier(Module *m) {
    return new_stmt(m, ST_BARRIER);
}

Stmt *lower_grid_barrier(Module *m) {
    Stmt *s = new_stmt(m, ST_BARRIER);
    s->u.barrier.grid = true;
    return s;
}

Stmt *lower_fail(Module *m, int site) {
    RV_ASSERT(site >= 0);
    Stmt *s = new_stmt(m, ST_FAIL);
    s->u.fail.site = site;
    return s;
}

Stmt *lower_reduce(Module *m, rv_reduce_kind rk, Buffer *buf, Buffer *arg, Stmt *body) {
    RV_ASSERT(buf && (rk == RV_REDUCE_ARGMAX) == (arg != NULL));
    Stmt *s = new_stmt(m, ST_REDUCE);
    s->u.reduce.rk = rk;
    s->u.reduce.buf = buf;
    s->u.reduce.arg = arg;
    s->u.reduce.body = body;
    return s;
}

Stmt *lower_call(Module *m, const char *kernel, int nargs, Buffer *const *args, Tensor *out) {
    RV_ASSERT(kernel && nargs >= 1 && args);
    for (int i = 0; i < nargs; i++)
        RV_ASSERT(args[i]);
    Stmt *s = new_stmt(m, ST_CALL);
    s->u.call.kernel = ir_name(m, kernel);
    s->u.call.nargs = nargs;
    s->u.call.args = arena_memdup(m->arena, args, sizeof(Buffer *) * (size_t)nargs);
    s->u.call.out = out;
    return s;
}

/* ---- the generic mutator ---- */

static Expr *mutate_expr(StmtMutator *mu, Expr *e) {
    if (!e || !mu->fe)
        return e;
    Expr *r = mu->fe(mu, e);
    RV_ASSERT(r);
    return r;
}

/* Children first (expressions, then sub-statements), then the rebuilt
 * statement goes through fs. A statement is rebuilt only when a part
 * changed; SEQ rebuilds go through lower_seq, so a child that became NULL
 * or a SEQ is dropped or flattened. */
Stmt *lower_mutate(StmtMutator *mu, Stmt *s) {
    if (!s)
        return NULL;
    Module *m = mu->m;
    Stmt *r = s;
    switch (s->kind) {
    case ST_FOR: {
        Expr *ext = mutate_expr(mu, s->u.loop.extent);
        Stmt *body = lower_mutate(mu, s->u.loop.body);
        if (ext != s->u.loop.extent || body != s->u.loop.body) {
            r = lower_for_like(m, s, s->u.loop.var, ext, body);
            r->u.loop.partition = s->u.loop.partition; /* for a pass before partition's */
            r->u.loop.spatial = s->u.loop.spatial;     /* for the reduce pass */
            r->u.loop.gpu_batches = s->u.loop.gpu_batches;
        }
        break;
    }
    case ST_IF: {
        Expr *c = mutate_expr(mu, s->u.if_.cond);
        Stmt *t = lower_mutate(mu, s->u.if_.then_s);
        Stmt *e = lower_mutate(mu, s->u.if_.else_s);
        if (c != s->u.if_.cond || t != s->u.if_.then_s || e != s->u.if_.else_s)
            r = lower_if(m, c, t, e);
        break;
    }
    case ST_LET: {
        Expr *v = mutate_expr(mu, s->u.let.value);
        Stmt *body = lower_mutate(mu, s->u.let.body);
        if (v != s->u.let.value || body != s->u.let.body)
            r = lower_let(m, s->u.let.var, v, body);
        break;
    }
    case ST_STORE: {
        Expr *i = mutate_expr(mu, s->u.store.index);
        Expr *v = mutate_expr(mu, s->u.store.value);
        if (i != s->u.store.index || v != s->u.store.value)
            r = lower_store(m, s->u.store.buf, i, v);
        break;
    }
    case ST_ALLOC: {
        Stmt *body = lower_mutate(mu, s->u.alloc.body);
        if (body != s->u.alloc.body)
            r = lower_alloc(m, s->u.alloc.buf, body);
        break;
    }
    case ST_SEQ: {
        int n = s->u.seq.n;
        Stmt **kids = base_xmalloc(sizeof(Stmt *) * (size_t)n);
        bool changed = false;
        for (int i = 0; i < n; i++) {
            kids[i] = lower_mutate(mu, s->u.seq.stmts[i]);
            changed = changed || kids[i] != s->u.seq.stmts[i];
        }
        if (changed)
            r = lower_seq(m, n, kids);
        base_free(kids);
        break;
    }
    case ST_REDUCE: {
        Stmt *body = lower_mutate(mu, s->u.reduce.body);
        if (body != s->u.reduce.body)
            r = lower_reduce(m, s->u.reduce.rk, s->u.reduce.buf, s->u.reduce.arg, body);
        break;
    }
    case ST_BARRIER:
    case ST_CALL:
    case ST_FAIL:
        break;
    default:
        RV_UNREACHABLE();
    }
    if (r && mu->fs)
        r = mu->fs(mu, r);
    return r;
}

/* ---- printing expressions ---- */

/* The binding strength of e's printed form (ir.h, Prec): its kind's, except
 * that a negative literal prints as a unary minus. */
static int prec(const Expr *e) {
    switch (e->kind) {
    case EX_CONST_INT:
        return e->dtype != RV_BOOL && e->u.ival < 0 ? PREC_UNARY : PREC_ATOM;
    case EX_CONST_FLOAT:
        return e->u.fval < 0 || (e->u.fval == 0 && 1 / e->u.fval < 0) ? PREC_UNARY : PREC_ATOM;
    default:
        return ir_expr_info[e->kind].prec;
    }
}

static void print_expr(Buf *b, const Expr *e, int min_prec);

static void print_args(Buf *b, int n, Expr *const *args) {
    for (int i = 0; i < n; i++) {
        if (i)
            buf_puts(b, ", ");
        print_expr(b, args[i], PREC_NONE);
    }
}

/* A float literal that reads back as a float: always a '.' or exponent;
 * inf and nan as C's printf spells them. */
static void print_float(Buf *b, const Expr *e) {
    char tmp[64];
    if (isfinite(e->u.fval))
        ir_float_shortest(tmp, e->u.fval, e->dtype);
    else
        snprintf(tmp, sizeof tmp, "%g", e->u.fval);
    buf_puts(b, tmp);
    if (!strpbrk(tmp, ".eEn")) /* "n": inf, nan */
        buf_puts(b, ".0");
}

/* Prints e, in parentheses when it binds weaker than min_prec. */
static void print_expr(Buf *b, const Expr *e, int min_prec) {
    if (!e) {
        buf_puts(b, "<null>");
        return;
    }
    int p = prec(e);
    bool paren = p < min_prec;
    if (paren)
        buf_putc(b, '(');
    const ExprInfo *info = &ir_expr_info[e->kind];
    switch (e->kind) {
    case EX_CONST_INT:
        if (e->dtype == RV_BOOL)
            buf_puts(b, e->u.ival ? "true" : "false");
        else
            buf_printf(b, "%" PRId64, e->u.ival);
        break;
    case EX_CONST_FLOAT:
        print_float(b, e);
        break;
    case EX_SIZE:
        buf_puts(b, e->u.size->name);
        break;
    case EX_VAR:
        buf_puts(b, e->u.axis->name);
        break;
    case EX_NEG:
    case EX_NOT:
        buf_puts(b, info->text);
        /* a unary operand gets parentheses: "-(-x)", never "--x" */
        print_expr(b, e->args[0], PREC_ATOM);
        break;
    case EX_READ:
    case EX_UFCALL:
        /* a multi-dimensional access (flatten.c): X{i, j}, never X[off] */
        buf_printf(b, "%s{", e->kind == EX_READ ? e->u.tensor->name : e->u.uf->name);
        print_args(b, e->n, e->args);
        buf_putc(b, '}');
        break;
    case EX_LOAD:
        buf_printf(b, "%s[", e->u.buf->name);
        print_expr(b, e->args[0], PREC_NONE);
        buf_putc(b, ']');
        break;
    case EX_CAST:
        buf_printf(b, "%s(", rv_dtype_name(e->dtype));
        print_expr(b, e->args[0], PREC_NONE);
        buf_putc(b, ')');
        break;
    case EX_REDUCE:
        ir_print_reduce(b, e, print_expr);
        break;
    default:
        if (info->flags & F_INFIX) {
            /* left-associative: the right operand must bind tighter */
            const char *sep = p == PREC_MUL ? "" : " ";
            print_expr(b, e->args[0], p);
            buf_printf(b, "%s%s%s", sep, info->text, sep);
            print_expr(b, e->args[1], p + 1);
        } else {
            buf_printf(b, "%s(", info->text);
            print_args(b, e->n, e->args);
            buf_putc(b, ')');
        }
        break;
    }
    if (paren)
        buf_putc(b, ')');
}

/* ---- printing statements ---- */

static void print_stmt(Buf *b, const Stmt *s, int indent, bool tail);

/* The body of a let or allocate: at the same indentation when the scope
 * runs to the end of the enclosing block, else as an indented block. */
static void print_scope_body(Buf *b, const Stmt *body, int indent, bool tail) {
    if (tail) {
        buf_putc(b, '\n');
        print_stmt(b, body, indent, true);
    } else {
        buf_puts(b, ":\n");
        print_stmt(b, body, indent + 2, true);
    }
}

static void print_stmt(Buf *b, const Stmt *s, int indent, bool tail) {
    if (!s) {
        buf_indent(b, indent);
        buf_puts(b, "nop\n");
        return;
    }
    if (s->kind == ST_SEQ) {
        for (int i = 0; i < s->u.seq.n; i++)
            print_stmt(b, s->u.seq.stmts[i], indent, tail && i == s->u.seq.n - 1);
        return;
    }
    buf_indent(b, indent);
    switch (s->kind) {
    case ST_FOR:
        if (s->u.loop.kind != LOOP_SERIAL)
            buf_printf(b, "%s ", lower_loop_kind_name[s->u.loop.kind]);
        if (s->u.loop.partition)
            buf_puts(b, "partition ");
        if (s->u.loop.gpu_batches)
            buf_printf(b, "%s ", lower_gpu_batches_word[s->u.loop.gpu_batches]);
        buf_printf(b, "for %s in 0..", s->u.loop.var->name);
        print_expr(b, s->u.loop.extent, PREC_NONE);
        buf_puts(b, ":\n");
        print_stmt(b, s->u.loop.body, indent + 2, true);
        break;
    case ST_IF:
        buf_puts(b, "if ");
        print_expr(b, s->u.if_.cond, PREC_NONE);
        buf_puts(b, ":\n");
        print_stmt(b, s->u.if_.then_s, indent + 2, true);
        if (s->u.if_.else_s) {
            buf_indent(b, indent);
            buf_puts(b, "else:\n");
            print_stmt(b, s->u.if_.else_s, indent + 2, true);
        }
        break;
    case ST_LET:
        buf_printf(b, "let %s = ", s->u.let.var->name);
        print_expr(b, s->u.let.value, PREC_NONE);
        print_scope_body(b, s->u.let.body, indent, tail);
        break;
    case ST_STORE:
        buf_printf(b, "%s[", s->u.store.buf->name);
        print_expr(b, s->u.store.index, PREC_NONE);
        buf_puts(b, "] = ");
        print_expr(b, s->u.store.value, PREC_NONE);
        buf_putc(b, '\n');
        break;
    case ST_ALLOC: {
        const Buffer *buf = s->u.alloc.buf;
        buf_printf(b, "allocate %s: %s[", buf->name, rv_dtype_name(buf->dtype));
        print_expr(b, buf->size, PREC_NONE);
        buf_printf(b, "] %s", scope_name[buf->scope]);
        print_scope_body(b, s->u.alloc.body, indent, tail);
        break;
    }
    case ST_BARRIER:
        buf_puts(b, s->u.barrier.grid ? "barrier grid\n" : "barrier\n");
        break;
    case ST_FAIL:
        buf_printf(b, "fail %d\n", s->u.fail.site);
        break;
    case ST_REDUCE:
        buf_printf(b, "reduce %s into %s", ir_reduce_name(s->u.reduce.rk), s->u.reduce.buf->name);
        if (s->u.reduce.arg)
            buf_printf(b, ", %s", s->u.reduce.arg->name);
        buf_puts(b, ":\n");
        print_stmt(b, s->u.reduce.body, indent + 2, true);
        break;
    case ST_CALL:
        buf_printf(b, "call %s(", s->u.call.kernel);
        for (int i = 0; i < s->u.call.nargs; i++)
            buf_printf(b, "%s%s", i ? ", " : "", s->u.call.args[i]->name);
        buf_puts(b, ")\n");
        break;
    default:
        RV_UNREACHABLE();
    }
}

void lower_print_stmt(Buf *b, const Stmt *s, int indent) {
    print_stmt(b, s, indent, true);
}

static void print_param(Buf *b, const Param *p) {
    switch (p->kind) {
    case PARAM_SIZE:
        buf_printf(b, "%s: size", p->size->name);
        break;
    case PARAM_UF:
    case PARAM_TENSOR:
    case PARAM_AUX:
    case PARAM_PACK:
        buf_printf(b, "%s: %s*", p->buf->name, rv_dtype_name(p->buf->dtype));
        break;
    default:
        RV_UNREACHABLE();
    }
}

void lower_print_kernel(Buf *b, const Kernel *k) {
    buf_printf(b, "kernel %s(", k->name);
    for (int i = 0; i < k->nparams; i++) {
        if (i)
            buf_puts(b, ", ");
        print_param(b, &k->params[i]);
    }
    buf_puts(b, ")\n");
    if (k->prelude) {
        buf_puts(b, "  prelude:\n");
        print_stmt(b, k->prelude, 4, true);
    }
    print_stmt(b, k->body, 2, true);
}

Expr *lower_rewrite_loads(Module *m, Expr *e, LoadRewrite fn, void *ctx, PtrMap *memo) {
    if (!e || e->n == 0)
        return e;
    Expr *done = ptrmap_get(memo, e);
    if (done)
        return done;
    Expr **args = base_xmalloc(sizeof(Expr *) * (size_t)e->n);
    bool changed = false;
    for (int i = 0; i < e->n; i++) {
        args[i] = lower_rewrite_loads(m, e->args[i], fn, ctx, memo);
        changed |= args[i] != e->args[i];
    }
    Expr *r = changed ? ir_rebuild(m, e, args) : e;
    base_free(args);
    if (r->kind == EX_LOAD)
        r = fn(m, ctx, r);
    ptrmap_put(memo, e, r);
    return r;
}
