/*
 * read.c — the loop-IR reader: the text form of lower_print_kernel back
 * into Kernels, so that a pass can be tested alone on loop IR written by
 * hand or cut from a RAVEL_DEBUG dump (tests/lower/, docs/pipeline.md).
 *
 * Takes: text as lower_print_kernel prints it (one or more kernels), after
 * optional declarations of what the text form does not show:
 *
 *     size N in 1..1000            a size's declared range
 *     uf len: i32[B] in 0..9       a UF array: its domain and value range
 *     aux off: i64[B + 1]          a prelude (AUX) array and its size
 *     buffer A: f32[N*N]           a tensor buffer's size
 *     tensor X: f32[b < B, l < len{b} pad 4]
 *                                  a tensor and its storage order (buffer
 *                                  X, row starts X_startK), for accesses
 *
 * A kernel parameter that is not declared is a size over 0..INT64_MAX or
 * a tensor buffer of unknown size. Guarantees: print(read(text)) == text
 * for every kernel the printer prints; a malformed text is RV_ERR_SYNTAX
 * with FILE:LINE:COL, never a crash.
 *
 * What the text never shows is made up plainly: the message of each
 * check site `fail N` is "check N", a `call` has no tensor for shapes.
 *
 * Literals carry no dtype in the text: an integer is i64 and a float f64
 * unless an operand or the stored buffer says otherwise, which is what
 * the IR's constructors do with a constant beside a typed operand anyway.
 * Statements are one a line, blocks by indentation (stmt.c's comment).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lower.h"

#define NO_DTYPE ((rv_dtype)-1)

typedef struct Line {
    const char *text, *end; /* after the indentation; end excludes '\n' */
    int indent, no;         /* no: 1-based line number */
} Line;

typedef struct Named {
    const char *name;
    Axis *var;   /* a loop or let variable, or */
    Buffer *buf; /* a buffer (parameter or allocation) */
} Named;

typedef struct Reader {
    Module *m;
    SrcFile src;
    Vec(Line) lines;
    int cur;       /* the line being read */
    const char *p; /* cursor within lines[cur] */
    bool failed;
    Vec(Named) scope; /* innermost last */
    StrMap decl_bufs; /* declared buffers by name */
    Kernel *k;
    int max_site;
    bool saw_access; /* the kernel has a multi-dimensional access */
    bool saw_reduce; /* or a reduction: flatten has not run yet either */
} Reader;

static Line *line(Reader *R) {
    return &R->lines.data[R->cur];
}

/* Records the first error at the cursor (or at the start of line `at`). */
static void fail_at(Reader *R, const char *at, const char *fmt, ...) RV_PRINTF(3, 4);
static void fail_at(Reader *R, const char *at, const char *fmt, ...) {
    if (R->failed)
        return;
    R->failed = true;
    int no = R->cur < R->lines.len ? line(R)->no : (R->lines.len ? vec_last(&R->lines).no + 1 : 1);
    int col = 1;
    if (R->cur < R->lines.len && at) {
        const char *start = line(R)->text - line(R)->indent;
        col = (int)(at - start) + 1;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    base_diag(RV_ERR_SYNTAX, &R->src, (SrcLoc){R->src.name, no, col}, "%s", msg);
}

#define FAIL(R, ...) (fail_at((R), (R)->p, __VA_ARGS__), (void *)NULL)

/* ---- lexing within a line ---- */

static void skip_space(Reader *R) {
    while (R->p < line(R)->end && *R->p == ' ')
        R->p++;
}

static bool at_end(Reader *R) {
    skip_space(R);
    return R->p >= line(R)->end;
}

/* Consumes `s` (after spaces) if it comes next. */
static bool accept(Reader *R, const char *s) {
    skip_space(R);
    size_t n = strlen(s);
    if ((size_t)(line(R)->end - R->p) >= n && memcmp(R->p, s, n) == 0) {
        R->p += n;
        return true;
    }
    return false;
}

static bool expect(Reader *R, const char *s) {
    if (accept(R, s))
        return true;
    fail_at(R, R->p, "expected '%s'", s);
    return false;
}

static bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident_char(char c) {
    return is_ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}

/* An identifier, interned; NULL (no error) when none comes next. */
static const char *ident(Reader *R) {
    skip_space(R);
    if (R->p >= line(R)->end || !is_ident_start(*R->p))
        return NULL;
    const char *s = R->p;
    while (R->p < line(R)->end && is_ident_char(*R->p))
        R->p++;
    /* a trailing '.' belongs to `0..n`, never to a name */
    while (R->p[-1] == '.')
        R->p--;
    return intern_n(&R->m->names, s, (size_t)(R->p - s));
}

static const char *expect_ident(Reader *R, const char *what) {
    const char *s = ident(R);
    if (!s)
        fail_at(R, R->p, "expected %s", what);
    return s;
}

static bool expect_end(Reader *R) {
    if (at_end(R))
        return true;
    fail_at(R, R->p, "unexpected '%c'", *R->p);
    return false;
}

static rv_dtype dtype_named(const char *s) {
    for (int t = 0; t < RV_DTYPE_COUNT; t++)
        if (strcmp(s, rv_dtype_name((rv_dtype)t)) == 0)
            return (rv_dtype)t;
    return NO_DTYPE;
}

static rv_dtype expect_dtype(Reader *R) {
    const char *at = (skip_space(R), R->p);
    const char *s = expect_ident(R, "a dtype");
    if (!s)
        return NO_DTYPE;
    rv_dtype t = dtype_named(s);
    if (t == NO_DTYPE || t == RV_BOOL)
        fail_at(R, at, "unknown dtype '%s'", s);
    return t;
}

/* ---- names in scope ---- */

static Named *lookup(Reader *R, const char *name) {
    for (int i = R->scope.len - 1; i >= 0; i--)
        if (R->scope.data[i].name == name)
            return &R->scope.data[i];
    return NULL;
}

static void bind_var(Reader *R, Axis *a) {
    vec_push(&R->scope, ((Named){a->name, a, NULL}));
}

static void bind_buf(Reader *R, const char *name, Buffer *b) {
    vec_push(&R->scope, ((Named){name, NULL, b}));
}

static Size *size_named(Reader *R, const char *name) {
    void *obj = strmap_get(&R->m->by_name, name);
    if (!obj || (intptr_t)ptrmap_get(&R->m->kind_of, obj) != NAME_SIZE + 1)
        return NULL;
    return obj;
}

/* ---- expressions (the precedence levels of ir.h's Prec) ---- */

static Expr *parse_expr(Reader *R, int min_prec, rv_dtype hint);

/* An infix operator's kind if one comes next (not consumed); longest
 * spelling first, so `<=` is not `<`. */
static int peek_infix(Reader *R, size_t *len) {
    skip_space(R);
    int best = -1;
    size_t best_len = 0;
    for (int k = 0; k < EX_COUNT; k++) {
        const ExprInfo *info = &ir_expr_info[k];
        if (!(info->flags & F_INFIX))
            continue;
        size_t n = strlen(info->text);
        if (n > best_len && (size_t)(line(R)->end - R->p) >= n &&
            memcmp(R->p, info->text, n) == 0) {
            best = k;
            best_len = n;
        }
    }
    *len = best_len;
    return best;
}

/* The non-infix operator spelled `name` (select, min, exp, ...). */
static int call_kind(const char *name) {
    for (int k = 0; k < EX_COUNT; k++) {
        const ExprInfo *info = &ir_expr_info[k];
        if (!(info->flags & F_INFIX) && info->prec == PREC_ATOM && info->arity > 0 &&
            k != EX_READ && k != EX_UFCALL && k != EX_LOAD && k != EX_CAST &&
            strcmp(info->text, name) == 0)
            return k;
    }
    return -1;
}

static Expr *literal(Reader *R, bool neg, rv_dtype hint) {
    const char *s = R->p;
    const char *e = s;
    bool is_float = false;
    while (e < line(R)->end && ((*e >= '0' && *e <= '9') || *e == '.' || *e == 'e' || *e == 'E' ||
                                ((*e == '-' || *e == '+') && (e[-1] == 'e' || e[-1] == 'E')))) {
        if (*e == '.' && e + 1 < line(R)->end && e[1] == '.')
            break; /* `0..n` */
        is_float |= *e == '.' || *e == 'e' || *e == 'E';
        e++;
    }
    char tmp[80];
    size_t n = (size_t)(e - s);
    if (n + 2 > sizeof tmp)
        return FAIL(R, "number too long");
    tmp[0] = '-';
    memcpy(tmp + 1, s, n);
    tmp[n + 1] = '\0';
    const char *num = neg ? tmp : tmp + 1;
    char *stop;
    errno = 0;
    Module *m = R->m;
    Expr *r;
    if (is_float) {
        double v = strtod(num, &stop);
        r = ir_float(m, ir_is_float(hint) ? hint : RV_F64, v);
    } else {
        long long v = strtoll(num, &stop, 10);
        if (errno == ERANGE)
            return FAIL(R, "integer out of range");
        r = ir_is_int(hint) ? ir_const_int(m, hint, v) : ir_int(m, v);
    }
    if (*stop != '\0')
        return FAIL(R, "malformed number");
    R->p = e;
    return r;
}

/* Arguments of a call: `(e, e, ...)`, `n` of them. */
static bool call_args(Reader *R, int n, Expr **args, rv_dtype hint) {
    if (!expect(R, "("))
        return false;
    for (int i = 0; i < n; i++) {
        if (i && !expect(R, ","))
            return false;
        args[i] = parse_expr(R, PREC_OR, hint);
        if (!args[i])
            return false;
    }
    return expect(R, ")");
}

/* A name: a literal word, a cast, a call, a load or a variable. */
/* `X{i, j}`: a multi-dimensional access of a declared tensor or UF (in a
 * declaration's extent, a UF application); the cursor is at '{'. The
 * name is the module's (a golden's output is read after its input). */
static Expr *parse_access(Reader *R, const char *name, const char *at) {
    Module *m = R->m;
    Ufun *f = rv_module_ufun(m, name);
    Tensor *t = rv_module_tensor(m, name);
    if (!f && !t) {
        fail_at(R, at, "'%s' is neither a declared tensor nor a uf", name);
        return NULL;
    }
    R->p++;
    Expr *args[RV_MAX_DIMS];
    int n = 0;
    if (!accept(R, "}")) {
        do {
            if (n == RV_MAX_DIMS) {
                fail_at(R, R->p, "too many indices");
                return NULL;
            }
            if (!(args[n++] = parse_expr(R, PREC_OR, RV_I64)))
                return NULL;
        } while (accept(R, ","));
        if (!expect(R, "}"))
            return NULL;
    }
    Expr *r = f ? ir_ufcall(m, f, n, args) : ir_read(m, t, n, args);
    if (!r) {
        fail_at(R, at, "ill-typed access of '%s': %s", name, rv_last_error());
        return NULL;
    }
    R->saw_access = true;
    return r;
}

static Expr *parse_name(Reader *R, rv_dtype hint) {
    Module *m = R->m;
    const char *at = R->p;
    const char *s = ident(R);
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0)
        return ir_bool(m, s[0] == 't');
    if (strcmp(s, "inf") == 0 || strcmp(s, "nan") == 0)
        return ir_float(m, ir_is_float(hint) ? hint : RV_F64, s[0] == 'i' ? INFINITY : NAN);
    skip_space(R);
    if (R->p < line(R)->end && *R->p == '(') {
        rv_dtype t = dtype_named(s);
        Expr *args[3];
        if (t != NO_DTYPE && t != RV_BOOL) {
            if (!call_args(R, 1, args, NO_DTYPE))
                return NULL;
            return ir_cast(m, t, args[0]);
        }
        int k = call_kind(s);
        if (k < 0) {
            fail_at(R, at, "unknown function '%s'", s);
            return NULL;
        }
        int n = ir_expr_info[k].arity;
        if (!call_args(R, n, args, hint))
            return NULL;
        Expr *r = n == 3   ? ir_select(m, args[0], args[1], args[2])
                  : n == 2 ? ir_binary(m, (ExprKind)k, args[0], args[1])
                           : ir_unary(m, (ExprKind)k, args[0]);
        if (!r)
            fail_at(R, at, "ill-typed '%s': %s", s, rv_last_error());
        return r;
    }
    Named *nm = lookup(R, s);
    if (R->p < line(R)->end && *R->p == '{')
        return parse_access(R, s, at);
    if (R->p < line(R)->end && *R->p == '[') {
        if (!nm || !nm->buf) {
            fail_at(R, at, "undefined buffer '%s'", s);
            return NULL;
        }
        R->p++;
        Expr *idx = parse_expr(R, PREC_OR, RV_I64);
        if (!idx || !expect(R, "]"))
            return NULL;
        if (idx->dtype != RV_I64) {
            fail_at(R, at, "the index of '%s' must be i64, got %s", s, rv_dtype_name(idx->dtype));
            return NULL;
        }
        return ir_load(m, nm->buf, idx);
    }
    if (nm && nm->var)
        return nm->var->var;
    Size *sz = size_named(R, s);
    if (sz && !nm)
        return ir_size(m, sz);
    fail_at(R, at, "undefined name '%s'", s);
    return NULL;
}

static Expr *parse_unary(Reader *R, rv_dtype hint) {
    skip_space(R);
    if (R->p >= line(R)->end)
        return FAIL(R, "expected an expression");
    char c = *R->p;
    const char *at = R->p;
    if (c == '-' || c == '!') {
        R->p++;
        if (c == '-' && R->p < line(R)->end && *R->p >= '0' && *R->p <= '9')
            return literal(R, true, hint);
        Expr *a = parse_unary(R, c == '-' ? hint : RV_BOOL);
        Expr *r = a ? ir_unary(R->m, c == '-' ? EX_NEG : EX_NOT, a) : NULL;
        if (a && !r)
            fail_at(R, at, "ill-typed '%c': %s", c, rv_last_error());
        return r;
    }
    if (c == '(') {
        R->p++;
        Expr *e = parse_expr(R, PREC_OR, hint);
        if (!e || !expect(R, ")"))
            return NULL;
        return e;
    }
    if (c >= '0' && c <= '9')
        return literal(R, false, hint);
    if (is_ident_start(c))
        return parse_name(R, hint);
    return FAIL(R, "expected an expression, found '%c'", c);
}

static Expr *parse_expr(Reader *R, int min_prec, rv_dtype hint) {
    Expr *lhs = parse_unary(R, hint);
    while (lhs) {
        size_t n;
        int k = peek_infix(R, &n);
        if (k < 0 || (int)ir_expr_info[k].prec < min_prec)
            break;
        const char *at = R->p;
        R->p += n;
        const ExprInfo *info = &ir_expr_info[k];
        rv_dtype h = (info->flags & F_CMP) ? lhs->dtype : (info->flags & F_LOGIC) ? RV_BOOL : hint;
        Expr *rhs = parse_expr(R, (int)info->prec + 1, h);
        if (!rhs)
            return NULL;
        Expr *r = ir_binary(R->m, (ExprKind)k, lhs, rhs);
        if (!r) {
            fail_at(R, at, "ill-typed '%s': %s", info->text, rv_last_error());
            return NULL;
        }
        lhs = r;
    }
    return lhs;
}

/* A whole expression that must be an i64 index. */
static Expr *parse_index(Reader *R, const char *what) {
    const char *at = (skip_space(R), R->p);
    Expr *e = parse_expr(R, PREC_OR, RV_I64);
    if (e && e->dtype != RV_I64) {
        fail_at(R, at, "%s must be i64, got %s", what, rv_dtype_name(e->dtype));
        return NULL;
    }
    return e;
}

/* ---- statements ---- */

static Stmt *parse_block(Reader *R, int indent);

/* The body of a let or allocate: the rest of the enclosing block (no
 * ':') or an indented block (':'); stmt.c's print_scope_body. */
static Stmt *scope_body(Reader *R, int indent, bool *ok) {
    bool nested = accept(R, ":");
    if (!expect_end(R)) {
        *ok = false;
        return NULL;
    }
    R->cur++;
    Stmt *s = parse_block(R, nested ? indent + 2 : indent);
    *ok = !R->failed;
    return s;
}

/* A nested block after a line ending in ':'. */
static Stmt *nested_block(Reader *R, int indent, bool *ok) {
    *ok = false;
    if (!expect(R, ":") || !expect_end(R))
        return NULL;
    R->cur++;
    if (R->cur >= R->lines.len || line(R)->indent <= indent) {
        fail_at(R, R->cur < R->lines.len ? line(R)->text : NULL, "expected a block indented by %d",
                indent + 2);
        return NULL;
    }
    Stmt *s = parse_block(R, indent + 2);
    *ok = !R->failed;
    return s;
}

static Stmt *parse_for(Reader *R, LoopKind kind, bool partition, int gpu_batches, int indent,
                       bool *ok) {
    Module *m = R->m;
    *ok = false;
    const char *name = expect_ident(R, "a loop variable");
    if (!name || !expect(R, "in") || !expect(R, "0.."))
        return NULL;
    Expr *ext = parse_index(R, "a loop extent");
    if (!ext)
        return NULL;
    Axis *var = lower_loop_var(m, name, ext);
    bind_var(R, var);
    Stmt *body = nested_block(R, indent, ok);
    R->scope.len--;
    if (!*ok)
        return NULL;
    Stmt *s = lower_for(m, var, ext, kind, body);
    s->u.loop.partition = partition;
    s->u.loop.gpu_batches = gpu_batches;
    return s;
}

/* `[KIND] [partition] for ...` after KIND (LOOP_SERIAL: none) was read;
 * `w` the next word. */
static Stmt *parse_loop(Reader *R, LoopKind kind, const char *w, int indent, bool *ok) {
    bool partition = w && strcmp(w, "partition") == 0;
    if (partition)
        w = ident(R);
    int gpu_batches = 0;
    for (int k = SCHED_GPU_LAUNCH; w && k <= SCHED_GPU_PERSISTENT; k++)
        if (strcmp(w, lower_gpu_batches_word[k]) == 0) {
            gpu_batches = k;
            w = ident(R);
        }
    if (w && strcmp(w, "for") == 0)
        return parse_for(R, kind, partition, gpu_batches, indent, ok);
    fail_at(R, R->p, "expected 'for'");
    return NULL;
}

static Stmt *parse_if(Reader *R, int indent, bool *ok) {
    const char *at = (skip_space(R), R->p);
    Expr *c = parse_expr(R, PREC_OR, RV_BOOL);
    *ok = false;
    if (!c)
        return NULL;
    if (c->dtype != RV_BOOL) {
        fail_at(R, at, "an if condition must be bool, got %s", rv_dtype_name(c->dtype));
        return NULL;
    }
    Stmt *then_s = nested_block(R, indent, ok);
    if (!*ok)
        return NULL;
    Stmt *else_s = NULL;
    if (R->cur < R->lines.len && line(R)->indent == indent) {
        R->p = line(R)->text;
        if (accept(R, "else") && (skip_space(R), R->p < line(R)->end && *R->p == ':')) {
            else_s = nested_block(R, indent, ok);
            if (!*ok)
                return NULL;
        }
    }
    return lower_if(R->m, c, then_s, else_s);
}

static Stmt *parse_let(Reader *R, int indent, bool *ok) {
    *ok = false;
    const char *name = expect_ident(R, "a variable");
    if (!name || !expect(R, "="))
        return NULL;
    Expr *v = parse_expr(R, PREC_OR, NO_DTYPE);
    if (!v)
        return NULL;
    Axis *var = lower_loop_var(R->m, name, NULL);
    bind_var(R, var);
    Stmt *body = scope_body(R, indent, ok);
    R->scope.len--;
    return *ok ? lower_let(R->m, var, v, body) : NULL;
}

static Stmt *parse_alloc(Reader *R, int indent, bool *ok) {
    static const struct {
        const char *name;
        BufScope scope;
    } scopes[] = {{"global", BUF_GLOBAL}, {"local", BUF_LOCAL}};
    *ok = false;
    const char *name = expect_ident(R, "a buffer name");
    if (!name || !expect(R, ":"))
        return NULL;
    rv_dtype t = expect_dtype(R);
    if (t == NO_DTYPE || !expect(R, "["))
        return NULL;
    Expr *size = parse_index(R, "a buffer size");
    if (!size || !expect(R, "]"))
        return NULL;
    const char *at = (skip_space(R), R->p);
    const char *sc = expect_ident(R, "a scope (global or local)");
    if (!sc)
        return NULL;
    int i = 0;
    while (i < (int)RV_COUNT(scopes) && strcmp(scopes[i].name, sc) != 0)
        i++;
    if (i == (int)RV_COUNT(scopes)) {
        fail_at(R, at, "unknown scope '%s' (global or local)", sc);
        return NULL;
    }
    Buffer *b = ir_buffer_new(R->m, name, t, size, scopes[i].scope);
    bind_buf(R, name, b);
    Stmt *body = scope_body(R, indent, ok);
    R->scope.len--;
    return *ok ? lower_alloc(R->m, b, body) : NULL;
}

/* The buffer named next, a parameter or allocated here. */
static Buffer *expect_buf(Reader *R) {
    const char *at = (skip_space(R), R->p);
    const char *a = expect_ident(R, "a buffer name");
    if (!a)
        return NULL;
    Named *nm = lookup(R, a);
    if (!nm || !nm->buf) {
        fail_at(R, at, "undefined buffer '%s'", a);
        return NULL;
    }
    return nm->buf;
}

/* `reduce RK into B[, A]:` and its body */
static Stmt *parse_reduce(Reader *R, int indent, bool *ok) {
    *ok = false;
    const char *at = (skip_space(R), R->p);
    const char *name = expect_ident(R, "a reduction (sum, max, min, argmax)");
    rv_reduce_kind rk;
    if (!name)
        return NULL;
    if (!ir_reduce_kind_of(name, &rk)) {
        fail_at(R, at, "unknown reduction '%s' (sum, max, min, argmax)", name);
        return NULL;
    }
    Buffer *buf = expect(R, "into") ? expect_buf(R) : NULL, *arg = NULL;
    if (!buf)
        return NULL;
    at = (skip_space(R), R->p);
    if (accept(R, ",") && !(arg = expect_buf(R)))
        return NULL;
    if ((rk == RV_REDUCE_ARGMAX) != (arg != NULL)) {
        fail_at(R, at,
                rk == RV_REDUCE_ARGMAX ? "argmax needs an index buffer: ', ARG'"
                                       : "only argmax takes an index buffer");
        return NULL;
    }
    R->saw_reduce = true;
    Stmt *body = nested_block(R, indent, ok);
    return *ok ? lower_reduce(R->m, rk, buf, arg, body) : NULL;
}

static Stmt *parse_call(Reader *R, bool *ok) {
    *ok = false;
    const char *kname = expect_ident(R, "a kernel name");
    if (!kname || !expect(R, "("))
        return NULL;
    Vec(Buffer *) args = {0};
    Stmt *r = NULL;
    do {
        Buffer *b = expect_buf(R);
        if (!b)
            goto out;
        vec_push(&args, b);
    } while (accept(R, ","));
    if (!expect(R, ")") || !expect_end(R))
        goto out;
    r = lower_call(R->m, kname, args.len, args.data, NULL);
    *ok = true;
    R->cur++;
out:
    vec_free(&args);
    return r;
}

static Stmt *parse_store(Reader *R, bool *ok) {
    *ok = false;
    const char *at = R->p;
    const char *name = expect_ident(R, "a statement");
    if (!name)
        return NULL;
    Named *nm = lookup(R, name);
    if (!nm || !nm->buf) {
        fail_at(R, at, "'%s' is not a statement or a buffer", name);
        return NULL;
    }
    if (!expect(R, "["))
        return NULL;
    Expr *idx = parse_index(R, "a store index");
    if (!idx || !expect(R, "]") || !expect(R, "="))
        return NULL;
    const char *vat = (skip_space(R), R->p);
    Expr *v = parse_expr(R, PREC_OR, nm->buf->dtype);
    if (!v || !expect_end(R))
        return NULL;
    if (v->dtype != nm->buf->dtype) {
        fail_at(R, vat, "storing %s into %s buffer '%s'", rv_dtype_name(v->dtype),
                rv_dtype_name(nm->buf->dtype), name);
        return NULL;
    }
    *ok = true;
    R->cur++;
    return lower_store(R->m, nm->buf, idx, v);
}

/* One statement starting at the current line; the lines it covers are
 * consumed. *ok is false on an error (a NULL statement is `nop`). */
static Stmt *parse_stmt(Reader *R, int indent, bool *ok) {
    R->p = line(R)->text;
    const char *save = R->p;
    const char *w = ident(R);
    *ok = false;
    if (w) {
        for (int k = 0; k < LOOP_COUNT; k++)
            if (strcmp(w, lower_loop_kind_name[k]) == 0 && k != LOOP_SERIAL) {
                return parse_loop(R, (LoopKind)k, ident(R), indent, ok);
            }
        if (strcmp(w, "for") == 0 || strcmp(w, "partition") == 0 ||
            strcmp(w, lower_gpu_batches_word[SCHED_GPU_LAUNCH]) == 0 ||
            strcmp(w, lower_gpu_batches_word[SCHED_GPU_PERSISTENT]) == 0)
            return parse_loop(R, LOOP_SERIAL, w, indent, ok);
        if (strcmp(w, "if") == 0)
            return parse_if(R, indent, ok);
        if (strcmp(w, "let") == 0)
            return parse_let(R, indent, ok);
        if (strcmp(w, "allocate") == 0)
            return parse_alloc(R, indent, ok);
        if (strcmp(w, "call") == 0)
            return parse_call(R, ok);
        if (strcmp(w, "reduce") == 0)
            return parse_reduce(R, indent, ok);
        if (strcmp(w, "nop") == 0 || strcmp(w, "barrier") == 0) {
            bool grid = w[0] == 'b' && accept(R, "grid");
            *ok = expect_end(R);
            R->cur += *ok;
            return w[0] != 'b' ? NULL : grid ? lower_grid_barrier(R->m) : lower_barrier(R->m);
        }
        if (strcmp(w, "fail") == 0) {
            skip_space(R);
            char *stop;
            long site = strtol(R->p, &stop, 10);
            if (stop == R->p || site < 0 || site > INT32_MAX) {
                fail_at(R, R->p, "expected a check site number");
                return NULL;
            }
            R->p = stop;
            *ok = expect_end(R);
            R->cur += *ok;
            if (site > R->max_site)
                R->max_site = (int)site;
            return lower_fail(R->m, (int)site);
        }
        if (strcmp(w, "else") == 0) {
            fail_at(R, save, "'else' without an 'if'");
            return NULL;
        }
    }
    R->p = save;
    return parse_store(R, ok);
}

/* The statements at `indent` from the current line on. */
static Stmt *parse_block(Reader *R, int indent) {
    Vec(Stmt *) stmts = {0};
    while (!R->failed && R->cur < R->lines.len && line(R)->indent >= indent) {
        if (line(R)->indent > indent) {
            fail_at(R, line(R)->text, "unexpected indentation (expected %d spaces)", indent);
            break;
        }
        bool ok;
        Stmt *s = parse_stmt(R, indent, &ok);
        if (!ok)
            break;
        vec_push(&stmts, s);
    }
    if (!R->failed && stmts.len == 0)
        fail_at(R, NULL, "expected a statement indented by %d", indent);
    Stmt *r = R->failed ? NULL : lower_seq(R->m, stmts.len, stmts.data);
    vec_free(&stmts);
    return r;
}

/* ---- declarations and kernels ---- */

/* `size N in LO..HI` */
static bool parse_size_decl(Reader *R) {
    const char *name = expect_ident(R, "a size name");
    if (!name || !expect(R, "in"))
        return false;
    skip_space(R);
    char *stop;
    long long lo = strtoll(R->p, &stop, 10);
    if (stop == R->p) {
        fail_at(R, R->p, "expected the size's lower bound");
        return false;
    }
    R->p = stop;
    if (!expect(R, ".."))
        return false;
    long long hi = strtoll(R->p, &stop, 10);
    if (stop == R->p) {
        fail_at(R, R->p, "expected the size's upper bound");
        return false;
    }
    R->p = stop;
    if (!expect_end(R))
        return false;
    if (!rv_size_new(R->m, name, lo, hi)) {
        fail_at(R, line(R)->text, "%s", rv_last_error());
        return false;
    }
    return true;
}

/* Sizes used by a declaration are in scope while it is read. */
static Expr *decl_expr(Reader *R) {
    return parse_expr(R, PREC_OR, RV_I64);
}

/* `uf NAME: DTYPE[EXT, ...] in LO..HI`, `aux NAME: DTYPE[SIZE]`,
 * `buffer NAME: DTYPE[SIZE]` */
static bool parse_buffer_decl(Reader *R, const char *what) {
    Module *m = R->m;
    const char *name = expect_ident(R, "a buffer name");
    if (!name || !expect(R, ":"))
        return false;
    rv_dtype t = expect_dtype(R);
    if (t == NO_DTYPE || !expect(R, "["))
        return false;
    Expr *ext[8];
    int n = 0;
    do {
        if (n == (int)RV_COUNT(ext)) {
            fail_at(R, R->p, "too many dimensions");
            return false;
        }
        ext[n] = decl_expr(R);
        if (!ext[n++])
            return false;
    } while (what[0] == 'u' && accept(R, ","));
    if (!expect(R, "]"))
        return false;
    Expr *size = ext[0];
    for (int i = 1; i < n; i++)
        size = ir_binary(m, EX_MUL, size, ext[i]);
    Buffer *b = NULL;
    if (what[0] != 'u')
        b = ir_buffer_new(m, name, t, size, what[0] == 'a' ? BUF_AUX : BUF_ARG);
    else {
        if (!expect(R, "in"))
            return false;
        Expr *lo = decl_expr(R);
        if (!lo || !expect(R, ".."))
            return false;
        Expr *hi = decl_expr(R);
        if (!hi)
            return false;
        const char *args[8];
        for (int i = 0; i < n; i++)
            args[i] = arena_printf(m->arena, "%s_a%d", name, i);
        Ufun *f = rv_ufun_begin(m, name, n, args);
        f = f ? rv_ufun_end(f, ext, lo, hi) : NULL;
        /* its storage order, for accesses f{...} (flatten.c) */
        Storage *st = arena_alloc(m->arena, sizeof(Storage));
        if (!f || ir_storage_init(m, st, name, n, f->args, NULL, t, BUF_ARG, NULL) != RV_OK) {
            fail_at(R, line(R)->text, "%s", rv_last_error());
            return false;
        }
        b = st->buf;
        b->uf = f;
    }
    if (!expect_end(R))
        return false;
    strmap_put(&R->decl_bufs, name, b);
    bind_buf(R, name, b); /* later declarations may load from it */
    return true;
}

/* The names of a declared tensor's dimensions, `b` and `l` of
 * `[b < B, l < len{b}]` (the cursor after '['): the tensor must exist
 * before its extents, which mention them, are read. */
static int dim_names(Reader *R, const char **names) {
    int n = 0, depth = 0;
    bool head = true;
    for (const char *p = R->p; p < line(R)->end && depth >= 0; p++) {
        if (head && is_ident_start(*p)) {
            if (n == RV_MAX_DIMS)
                return -1;
            const char *e = p;
            while (e < line(R)->end && is_ident_char(*e))
                e++;
            names[n++] = arena_strndup(R->m->arena, p, (size_t)(e - p));
            head = false;
        }
        if (*p == '(' || *p == '[' || *p == '{')
            depth++;
        else if (*p == ')' || *p == ']' || *p == '}')
            depth--;
        else if (*p == ',' && depth == 0)
            head = true;
    }
    return n;
}

/* `tensor NAME: DTYPE[AXIS < EXT [pad N], ...]`: an input tensor and its
 * storage order (ir_storage_init: buffer NAME, row starts NAME_startK). */
static bool parse_tensor_decl(Reader *R) {
    Module *m = R->m;
    const char *at = (skip_space(R), R->p);
    const char *name = expect_ident(R, "a tensor name");
    if (!name || !expect(R, ":"))
        return false;
    rv_dtype dt = expect_dtype(R);
    if (dt == NO_DTYPE || !expect(R, "["))
        return false;
    const char *names[RV_MAX_DIMS];
    int n = dim_names(R, names);
    if (n <= 0) {
        fail_at(R, R->p, n < 0 ? "too many dimensions" : "expected a dimension");
        return false;
    }
    Tensor *t = rv_input_begin(m, name, dt, n, names);
    if (!t) {
        fail_at(R, at, "%s", rv_last_error());
        return false;
    }
    Expr *ext[RV_MAX_DIMS];
    int pad[RV_MAX_DIMS];
    int outer = R->scope.len;
    for (int d = 0; d < n; d++) {
        if (d && !expect(R, ","))
            return false;
        if (!expect_ident(R, "a dimension name") || !expect(R, "<"))
            return false;
        if (!(ext[d] = decl_expr(R)))
            return false;
        pad[d] = 1;
        if (accept(R, "pad")) {
            skip_space(R);
            char *stop;
            long v = strtol(R->p, &stop, 10);
            if (stop == R->p || v < 1 || v > INT32_MAX) {
                fail_at(R, R->p, "expected a padding multiple");
                return false;
            }
            pad[d] = (int)v;
            R->p = stop;
        }
        bind_var(R, t->axes[d]); /* later extents may mention it */
    }
    R->scope.len = outer;
    if (!expect(R, "]") || !expect_end(R))
        return false;
    Storage *st = arena_alloc(m->arena, sizeof(Storage));
    if (!rv_input_end(t, ext, pad) ||
        ir_storage_init(m, st, name, n, t->axes, t->pad, dt, BUF_ARG, NULL) != RV_OK) {
        fail_at(R, at, "%s", rv_last_error());
        return false;
    }
    st->buf->tensor = t;
    strmap_put(&R->decl_bufs, st->buf->name, st->buf);
    for (int d = 0; d < n; d++)
        if (st->start[d])
            strmap_put(&R->decl_bufs, st->start[d]->name, st->start[d]);
    return true;
}

static bool parse_decls(Reader *R) {
    while (!R->failed && R->cur < R->lines.len) {
        R->p = line(R)->text;
        if (line(R)->indent != 0) {
            fail_at(R, line(R)->text, "unexpected indentation");
            return false;
        }
        const char *at = R->p;
        const char *w = ident(R);
        if (w && strcmp(w, "kernel") == 0) {
            R->p = at;
            return true;
        }
        if (w && strcmp(w, "size") == 0) {
            if (!parse_size_decl(R))
                return false;
        } else if (w &&
                   (strcmp(w, "uf") == 0 || strcmp(w, "aux") == 0 || strcmp(w, "buffer") == 0)) {
            if (!parse_buffer_decl(R, w))
                return false;
        } else if (w && strcmp(w, "tensor") == 0) {
            if (!parse_tensor_decl(R))
                return false;
        } else {
            fail_at(R, at, "expected a declaration (size, uf, aux, buffer, tensor) or 'kernel'");
            return false;
        }
        R->cur++;
    }
    return true;
}

typedef Vec(Param) ParamVec;

static bool parse_param(Reader *R, ParamVec *params) {
    const char *at = (skip_space(R), R->p);
    const char *name = expect_ident(R, "a parameter name");
    if (!name || !expect(R, ":"))
        return false;
    const char *tat = (skip_space(R), R->p);
    const char *w = expect_ident(R, "'size' or a dtype");
    if (!w)
        return false;
    if (strcmp(w, "size") == 0) {
        Size *s = size_named(R, name);
        if (!s && strmap_get(&R->m->by_name, name)) {
            fail_at(R, at, "'%s' is declared, but not as a size", name);
            return false;
        }
        if (!s)
            s = rv_size_new(R->m, name, 0, INT64_MAX);
        vec_push(params, ((Param){PARAM_SIZE, s, NULL}));
        return true;
    }
    rv_dtype t = dtype_named(w);
    if (t == NO_DTYPE || t == RV_BOOL) {
        fail_at(R, tat, "unknown dtype '%s'", w);
        return false;
    }
    if (!expect(R, "*"))
        return false;
    Buffer *b = strmap_get(&R->decl_bufs, name);
    if (b && b->dtype != t) {
        fail_at(R, tat, "'%s' is declared %s", name, rv_dtype_name(b->dtype));
        return false;
    }
    if (!b)
        b = ir_buffer_new(R->m, name, t, NULL, BUF_ARG);
    ParamKind k = b->uf ? PARAM_UF : b->scope == BUF_AUX ? PARAM_AUX : PARAM_TENSOR;
    vec_push(params, ((Param){k, NULL, b}));
    bind_buf(R, name, b);
    return true;
}

typedef struct Sites {
    PtrMap seen;
    Vec(CheckSrc) v;
} Sites;

static Expr *collect_site(StmtMutator *mu, Expr *e) {
    Sites *S = mu->ctx;
    if (ptrmap_has(&S->seen, e))
        return e;
    ptrmap_put(&S->seen, e, e);
    for (int i = 0; i < e->n; i++)
        collect_site(mu, e->args[i]);
    if (e->kind == EX_READ || e->kind == EX_UFCALL || lower_is_int_div(e))
        vec_push(&S->v, ((CheckSrc){e, e, false, false}));
    return e;
}

/* Before the checks pass, every access and integer division of the text
 * is a value's (Kernel.check_src), its own message. */
static void name_checks(Reader *R, Kernel *k) {
    Sites S = {0};
    StmtMutator mu = {collect_site, NULL, R->m, &S};
    lower_mutate(&mu, k->body);
    k->ncheck_src = S.v.len;
    k->check_src =
        S.v.len ? arena_memdup(R->m->arena, S.v.data, sizeof(CheckSrc) * (size_t)S.v.len) : NULL;
    ptrmap_free(&S.seen);
    vec_free(&S.v);
}

static Kernel *parse_kernel(Reader *R) {
    Module *m = R->m;
    R->p = line(R)->text;
    if (line(R)->indent != 0 || !expect(R, "kernel"))
        return NULL;
    const char *name = expect_ident(R, "a kernel name");
    if (!name || !expect(R, "("))
        return NULL;
    ParamVec params = {0};
    R->scope.len = 0;
    R->max_site = -1;
    if (!accept(R, ")")) {
        do {
            if (!parse_param(R, &params))
                goto fail;
        } while (accept(R, ","));
        if (!expect(R, ")"))
            goto fail;
    }
    if (!expect_end(R))
        goto fail;
    Kernel *k = arena_alloc(m->arena, sizeof(Kernel));
    k->name = name;
    k->m = m;
    k->nparams = params.len;
    k->params = arena_alloc(m->arena, sizeof(Param) * (size_t)(params.len ? params.len : 1));
    if (params.len)
        memcpy(k->params, params.data, sizeof(Param) * (size_t)params.len);
    vec_free(&params);
    R->cur++;
    if (R->cur < R->lines.len && line(R)->indent == 2) {
        R->p = line(R)->text;
        if (accept(R, "prelude:") && at_end(R)) {
            R->cur++;
            k->prelude = parse_block(R, 4);
            lower_prelude_fills(m, k);
        }
    }
    R->saw_access = R->saw_reduce = false;
    k->body = parse_block(R, 2);
    if (R->failed)
        return NULL;
    k->flat = !R->saw_access && !R->saw_reduce;
    name_checks(R, k);
    k->nsites = R->max_site + 1;
    k->sites = arena_alloc(m->arena, sizeof(char *) * (size_t)(k->nsites ? k->nsites : 1));
    for (int i = 0; i < k->nsites; i++)
        k->sites[i] = arena_printf(m->arena, "check %d", i);
    return k;
fail:
    vec_free(&params);
    return NULL;
}

static void split_lines(Reader *R, const char *text) {
    int no = 1;
    for (const char *p = text; *p; no++) {
        const char *e = strchr(p, '\n');
        if (!e)
            e = p + strlen(p);
        const char *t = p;
        while (t < e && *t == ' ')
            t++;
        if (t < e) /* blank lines separate kernels; they carry nothing */
            vec_push(&R->lines, ((Line){t, e, (int)(t - p), no}));
        p = *e ? e + 1 : e;
    }
}

rv_status lower_read_kernels(Module *m, const char *file, const char *text, Kernel ***out, int *n) {
    Reader R = {.m = m, .src = {file, text, strlen(text)}};
    split_lines(&R, text);
    Vec(Kernel *) ks = {0};
    if (parse_decls(&R)) {
        while (!R.failed && R.cur < R.lines.len) {
            Kernel *k = parse_kernel(&R);
            if (!k) {
                if (!R.failed)
                    fail_at(&R, R.p, "expected 'kernel'");
                break;
            }
            vec_push(&ks, k);
        }
    }
    if (!R.failed && ks.len == 0) {
        R.cur = R.lines.len;
        fail_at(&R, NULL, "expected 'kernel'");
    }
    vec_free(&R.lines);
    vec_free(&R.scope);
    strmap_free(&R.decl_bufs);
    if (R.failed) {
        vec_free(&ks);
        return RV_ERR_SYNTAX;
    }
    *out = arena_alloc(m->arena, sizeof(Kernel *) * (size_t)ks.len);
    memcpy(*out, ks.data, sizeof(Kernel *) * (size_t)ks.len);
    *n = ks.len;
    vec_free(&ks);
    return RV_OK;
}
