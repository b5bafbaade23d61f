/*
 * test_lang.c — the ravel language front end and the IR printer.
 *
 * Lexer: token kinds, values and locations, numbers next to "..", the
 * lexical errors. Parser: operator precedence and associativity, the
 * extent of a reduction's body, `max(` as reduction or call, schedule
 * blocks (checked through a small s-expression rendering of the AST).
 * Checker: the IR it builds (node kinds and dtypes, literal adaptation,
 * casts, conditional operations, inferred and explicit extents, UF
 * domains) and that errors come back located with a NULL module. Printer:
 * minimal parentheses, floats, constants of narrow dtypes, and the round
 * trip print(parse(print(parse(src)))) == print(parse(src)) on every
 * example in examples/ (the tests run from the repository root).
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "lang/lang.h"

/* ---- helpers ---- */

typedef struct Lexed {
    Arena *arena;
    SrcFile src;
    Token *toks;
    int n;
    rv_status st;
} Lexed;

static Lexed lex(const char *text) {
    Lexed l = {arena_new(), {"t.rv", text, strlen(text)}, NULL, 0, RV_OK};
    l.st = lang_lex(&l.src, l.arena, &l.toks, &l.n);
    return l;
}

/* Renders an expression as an s-expression: (+ a (* b c)). */
static void sexpr(Buf *b, const Node *n) {
    switch (n->kind) {
    case ND_INT:
        buf_printf(b, "%lld", (long long)n->ival);
        return;
    case ND_FLOAT:
        buf_printf(b, "%g", n->fval);
        return;
    case ND_BOOL:
        buf_puts(b, n->ival ? "true" : "false");
        return;
    case ND_NAME:
        buf_puts(b, n->name);
        return;
    case ND_UNARY:
    case ND_BINARY:
        buf_printf(b, "(%s", ir_expr_info[n->op].text);
        break;
    case ND_INDEX:
        buf_printf(b, "([%s", n->name);
        break;
    case ND_CALL:
        buf_printf(b, "(%s", n->name);
        break;
    case ND_REDUCE:
        buf_printf(b, "(%s", n->name);
        for (int i = 0; i < n->nbinds; i++) {
            buf_printf(b, " %s<", n->binds[i].name);
            sexpr(b, n->binds[i].extent);
        }
        break;
    case ND_IF:
        buf_puts(b, "(if");
        break;
    default:
        buf_puts(b, "?");
        return;
    }
    for (int i = 0; i < n->nargs; i++) {
        buf_putc(b, ' ');
        sexpr(b, n->args[i]);
    }
    buf_putc(b, ')');
}

/* Parses "Y[...] = <expr>" and returns the body as an s-expression
 * (caller frees), or the error message prefixed with "ERR ". */
static char *parse_body(const char *expr) {
    char text[512];
    snprintf(text, sizeof text, "size K in 1..4\nY[i] = %s\n", expr);
    Lexed l = lex(text);
    Buf b = {0};
    Program *p = NULL;
    if (l.st == RV_OK)
        l.st = lang_parse(&l.src, l.toks, l.arena, &p);
    if (l.st != RV_OK)
        buf_printf(&b, "ERR %s", rv_last_error());
    else
        sexpr(&b, p->items[p->nitems - 1]->body);
    base_free(l.toks);
    arena_free(l.arena);
    return buf_take(&b);
}

static void check_body_parse(const char *expr, const char *want) {
    char *got = parse_body(expr);
    CHECK(strcmp(got, want) == 0);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "    %s\n    parsed: %s\n    wanted: %s\n", expr, got, want);
    base_free(got);
}

/* The module printed, parsed and printed again must not change. */
static char *print_stable(const rv_module *m) {
    char *a = rv_module_print(m);
    rv_module *m2 = NULL;
    rv_status st = rv_module_parse("printed.rv", a, &m2);
    CHECK(st == RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "    %s\n    in:\n%s\n", rv_last_error(), a);
        return a;
    }
    char *b = rv_module_print(m2);
    CHECK(strcmp(a, b) == 0);
    if (strcmp(a, b) != 0)
        fprintf(stderr, "    first:\n%s\n    second:\n%s\n", a, b);
    rv_free(b);
    rv_module_free(m2);
    return a;
}

/* The printed body of tensor `name` in a module parsed from text. */
static char *printed_body(const char *text, const char *name) {
    rv_module *m = parse_ok(text);
    if (!m)
        return base_xstrdup("(error)");
    Tensor *t = rv_module_tensor(m, name);
    char *s = ir_expr_str(t->op->body);
    char *whole = print_stable(m);
    rv_free(whole);
    rv_module_free(m);
    return s;
}

static void check_printed(const char *text, const char *name, const char *want) {
    char *got = printed_body(text, name);
    CHECK(strcmp(got, want) == 0);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "    printed: %s\n    wanted:  %s\n", got, want);
    base_free(got);
}

static void check_error(const char *text, const char *want) {
    rv_module *m = (rv_module *)1;
    rv_status st = rv_module_parse("e.rv", text, &m);
    CHECK(st != RV_OK);
    CHECK(m == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), want);
}

/* ---- lexer ---- */

static void test_lex_tokens(void) {
    Lexed l = lex("size T in 1..128 # comment\n X[i] <= 1.5 2. 1e-3 \"a\\\"b\" && 7");
    CHECK(l.st == RV_OK);
    TokenKind kinds[] = {TK_KEYWORD, TK_IDENT, TK_KEYWORD, TK_INT,   TK_PUNCT, TK_INT,
                         TK_IDENT,   TK_PUNCT, TK_IDENT,   TK_PUNCT, TK_PUNCT, TK_FLOAT,
                         TK_FLOAT,   TK_FLOAT, TK_STRING,  TK_PUNCT, TK_INT,   TK_EOF};
    CHECK_EQ_INT(l.n, RV_COUNT(kinds));
    for (int i = 0; i < l.n && i < RV_COUNT(kinds); i++)
        CHECK_EQ_INT(l.toks[i].kind, kinds[i]);
    if (l.n == RV_COUNT(kinds)) {
        CHECK_EQ_INT(l.toks[3].ival, 1);
        CHECK(strcmp(l.toks[4].text, "..") == 0);
        CHECK_EQ_INT(l.toks[5].ival, 128);
        CHECK(strcmp(l.toks[10].text, "<=") == 0);
        CHECK(l.toks[11].fval == 1.5);
        CHECK(l.toks[12].fval == 2.0);
        CHECK(l.toks[13].fval == 1e-3);
        CHECK(strcmp(l.toks[14].text, "a\"b") == 0);
        /* X on line 2, column 2 */
        CHECK_EQ_INT(l.toks[6].loc.line, 2);
        CHECK_EQ_INT(l.toks[6].loc.col, 2);
        CHECK(strcmp(l.toks[6].loc.file, "t.rv") == 0);
    }
    base_free(l.toks);
    arena_free(l.arena);
}

static void test_lex_errors(void) {
    struct {
        const char *text, *msg;
    } cases[] = {
        {"size T in 1..4 $", "1:16: error: unknown character '$'"},
        {"P : f32[4] = extern \"matmul", "1:21: error: unterminated string"},
        {"input _X : f32[4]", "1:7: error: reserved identifier '_X'"},
        {"size T in 1..4\nx = 12ab", "2:5: error: malformed number"},
        {"size T in 1..99999999999999999999", "integer literal is too large"},
    };
    for (int i = 0; i < RV_COUNT(cases); i++) {
        Lexed l = lex(cases[i].text);
        CHECK(l.st == RV_ERR_SYNTAX);
        CHECK_STR_CONTAINS(rv_last_error(), cases[i].msg);
        base_free(l.toks);
        arena_free(l.arena);
    }
}

/* ---- parser ---- */

static void test_parse_precedence(void) {
    check_body_parse("a + b * c", "(+ a (* b c))");
    check_body_parse("a - b - c", "(- (- a b) c)");
    check_body_parse("a / b * c % d", "(% (* (/ a b) c) d)");
    check_body_parse("-a * b", "(* (- a) b)");
    check_body_parse("!a && b || c && d", "(|| (&& (! a) b) (&& c d))");
    check_body_parse("a < b == c >= d", "(== (< a b) (>= c d))");
    check_body_parse("a + b < c * d", "(< (+ a b) (* c d))");
    check_body_parse("(a + b) * c", "(* (+ a b) c)");
    check_body_parse("X[i, j + 1] * len[i]", "(* ([X i (+ j 1)) ([len i))");
    check_body_parse("exp(-x) + f32(2)", "(+ (exp (- x)) (f32 2))");
    check_body_parse("if a == 1 then b else c + d", "(if (== a 1) b (+ c d))");
    check_body_parse("true || false", "(|| true false)");
}

static void test_parse_reduce(void) {
    /* the body is a multiplicative-level expression */
    check_body_parse("sum(k < K) a * b + c", "(+ (sum k<K (* a b)) c)");
    check_body_parse("sum(k < K, l < k + 1) a", "(sum k<K l<(+ k 1) a)");
    check_body_parse("a * sum(k < K) b * c", "(* a (sum k<K (* b c)))");
    check_body_parse("-sum(k < K) b * c", "(- (sum k<K (* b c)))");
    check_body_parse("sum(k < K) sum(l < K) a * b", "(sum k<K (sum l<K (* a b)))");
    check_body_parse("(sum(k < K) a) * b", "(* (sum k<K a) b)");
    check_body_parse("argmax(k < 8) X[i, k]", "(argmax k<8 ([X i k))");
    /* max( is a reduction iff an unscoped name and '<' follow */
    check_body_parse("max(k < 4) a", "(max k<4 a)");
    check_body_parse("max(a, b)", "(max a b)");
    check_body_parse("max(i < 4, b)", "(max (< i 4) b)"); /* i is the axis in scope */
    check_body_parse("min(K < 4, b)", "(min (< K 4) b)"); /* K is a size in scope */
}

static void test_parse_errors(void) {
    char *e = parse_body("X[i, j");
    CHECK_STR_CONTAINS(e, "3:1: error: expected ']', found end of input");
    base_free(e);
    e = parse_body("a + * b");
    CHECK_STR_CONTAINS(e, "2:12: error: expected an expression, found '*'");
    base_free(e);
    e = parse_body("sum(k) a");
    CHECK_STR_CONTAINS(e, "expected '<', found ')'");
    base_free(e);
    check_error("size T in 1..4 4", "1:16: error: expected a definition");
    check_error("size T 1..4", "1:8: error: expected 'in', found '1'");
}

static void test_parse_schedule(void) {
    rv_module *m = parse_ok("input X : f32[8, 8]\nY[i, j] = X[i, j]\n"
                            "schedule Y {\n io, ii = split(i, -4)\n cache_read(X, \"local\", "
                            "pad=16)\n}\n");
    if (!m)
        return;
    CHECK_EQ_INT(m->scheds.len, 1);
    SchedBlock *blk = &m->scheds.data[0];
    CHECK(blk->target == rv_module_tensor(m, "Y"));
    CHECK_EQ_INT(blk->nsteps, 2);
    SchedStep *s = &blk->steps[0];
    CHECK(strcmp(s->prim, "split") == 0);
    CHECK_EQ_INT(s->nout, 2);
    CHECK(strcmp(s->outs[1], "ii") == 0);
    CHECK_EQ_INT(s->nargs, 2);
    CHECK(s->args[0].kind == SA_IDENT && strcmp(s->args[0].s, "i") == 0);
    CHECK(s->args[1].kind == SA_INT && s->args[1].i == -4);
    CHECK_EQ_INT(s->loc.line, 4);
    s = &blk->steps[1];
    CHECK(s->nout == 0 && s->nargs == 3);
    CHECK(s->args[1].kind == SA_STRING && strcmp(s->args[1].s, "local") == 0);
    CHECK(s->args[2].key && strcmp(s->args[2].key, "pad") == 0 && s->args[2].i == 16);
    rv_free(print_stable(m));
    rv_module_free(m);
}

/* ---- checker: the IR it builds ---- */

static void test_elab_dense(void) {
    rv_module *m = parse_ok("size T in 1..128\n"
                            "input X : f32[16*T, 768]\ninput W : f32[2304, 768]\n"
                            "input b : f32[2304]\n"
                            "Y[i, j] = gelu(sum(k < 768) X[i, k] * W[j, k] + b[j])\n");
    if (!m)
        return;
    CHECK(m->src && strcmp(m->src->name, "t.rv") == 0);
    Tensor *x = rv_module_tensor(m, "X"), *y = rv_module_tensor(m, "Y");
    CHECK(x->op->kind == OP_INPUT && x->ndim == 2 && x->dtype == RV_F32);
    CHECK(x->axes[0]->extent->kind == EX_MUL);
    CHECK(strcmp(x->axes[0]->name, "_0") == 0);
    CHECK_EQ_INT(x->loc.line, 2);
    CHECK(y->op->kind == OP_COMPUTE && y->dtype == RV_F32);
    Expr *body = y->op->body;
    CHECK(body->kind == EX_GELU && body->dtype == RV_F32);
    CHECK(body->args[0]->kind == EX_ADD);
    Expr *red = body->args[0]->args[0];
    CHECK(red->kind == EX_REDUCE && red->u.red.rk == RV_REDUCE_SUM && red->u.red.naxes == 1);
    CHECK(red->args[0]->kind == EX_MUL);
    CHECK(red->u.red.axes[0]->kind == AX_REDUCE);
    /* inferred extents: i from X's first dimension, j from W's */
    CHECK(y->axes[0]->extent == x->axes[0]->extent);
    int64_t v = 0;
    CHECK(ir_is_const_int(y->axes[1]->extent, &v) && v == 2304);
    CHECK(rv_module_verify(m) == RV_OK);
    rv_module_free(m);
}

static void test_elab_typing(void) {
    rv_module *m = parse_ok("size B in 1..16\nufun len[b < B] in 1..64\n"
                            "input A : f32[b < B, l < len[b] pad 4]\n"
                            "input N : i32[B]\n"
                            "O[b, l < len[b]] = 2 * A[b, l]\n"
                            "Z[b] : f64 = A[b, 0] * 0.5\n"
                            "C[b] = N[b] + 1\n"
                            "F[b < B] = f32(b) + 1.5\n"
                            "R[b, l] = if l < 2 then A[b, l] else -A[b, l]\n"
                            "M[b] = argmax(l < len[b]) A[b, l]\n");
    if (!m)
        return;
    Tensor *a = rv_module_tensor(m, "A");
    CHECK(a->pad[1] == 4 && a->pad[0] == 1);
    CHECK(a->axes[1]->extent->kind == EX_UFCALL);
    /* the literal 2 adapts to the f32 read: no widening */
    Tensor *o = rv_module_tensor(m, "O");
    CHECK(o->dtype == RV_F32 && o->op->body->kind == EX_MUL);
    CHECK(o->op->body->args[0]->kind == EX_CONST_FLOAT && o->op->body->args[0]->dtype == RV_F32);
    CHECK(o->axes[1]->extent->kind == EX_UFCALL);
    CHECK(o->axes[1]->extent->args[0] == o->axes[0]->var);
    /* the dtype annotation casts the body */
    Tensor *z = rv_module_tensor(m, "Z");
    CHECK(z->dtype == RV_F64 && z->op->body->kind == EX_CAST);
    Tensor *c = rv_module_tensor(m, "C");
    CHECK(c->dtype == RV_I32 && c->op->body->args[1]->dtype == RV_I32);
    Tensor *f = rv_module_tensor(m, "F");
    CHECK(f->dtype == RV_F32 && f->op->body->args[0]->kind == EX_CAST);
    Tensor *r = rv_module_tensor(m, "R");
    CHECK(r->op->kind == OP_COND && r->op->pred->kind == EX_LT);
    CHECK(r->op->else_body->kind == EX_NEG && r->dtype == RV_F32);
    Tensor *mx = rv_module_tensor(m, "M");
    CHECK(mx->dtype == RV_I64 && mx->op->body->u.red.rk == RV_REDUCE_ARGMAX);
    CHECK(rv_module_verify(m) == RV_OK);
    rv_free(print_stable(m));
    rv_module_free(m);
}

static void test_elab_ufun_domain(void) {
    /* provably inside or unknown: accepted */
    rv_module *m = parse_ok("size B in 1..16\nufun len[b < B] in 1..64\n"
                            "ufun off[b < B, l < len[b]] in 0..1000\n"
                            "input X : f32[B, 8]\nY[i, j] = X[i, j] * f32(len[i])\n"
                            "input Q : f32[2 * B]\nZ[i] = Q[i] * f32(len[i / 2])\n");
    rv_module_free(m);
    check_error("size B in 1..16\nufun len[b < B] in 1..64\ninput X : f32[2 * B]\n"
                "Y[i] = X[i] + f32(len[i])",
                "4:23: error: ufun 'len' used outside its domain: 'i' < 2 * B exceeds the "
                "domain b < B");
    check_error("ufun len[b < 8] in 1..64\nY[i < 4] = len[8]",
                "2:16: error: argument 8 is out of range");
    check_error("size B in 1..16\nufun len[b < B] in 1..64\nY[i < 4] = len[-1]",
                "argument -1 is out of range");
}

static void test_errors_located(void) {
    check_error("input X : f32[4]\nY[i] = Xq[i]", "e.rv:2:8: error: undefined name 'Xq'");
    check_error("input X : f32[4]\nY[i] = X[i] +\n", "e.rv:3:1: error: expected an expression");
    check_error("input X : f32[4, 4]\nY[i] = X[i]", "tensor 'X' has 2 dimensions, given 1");
    check_error("input X : f32[4]\nY[i] = X[i] && X[i]", "2:13: error: operator '&&' needs bools");
    check_error("input X : f32[4]\nY[i] = sum(i < 4) X[i]",
                "2:12: error: reduction axis 'i' shadows");
    check_error("input X : f32[4]\nY[i] = 1 + if i < 2 then X[i] else 0",
                "2:12: error: 'if' may only be the whole body");
    check_error("size T in 5..2", "1:6: error: size 'T' has an empty range 5..2");
    check_error("input X : f32[4, 768]\nY[i] = X[i, 768]",
                "2:13: error: index 768 is out of range");
    check_error("input X : f32[4]\nY[i, j] = X[i]",
                "2:6: error: cannot infer the extent of axis 'j'");
}

/* ---- printer ---- */

static void test_print_parens(void) {
    const char *decl = "size K in 1..8\ninput X : f32[K, 8]\ninput V : f32[8]\n";
    char text[512];
    struct {
        const char *body, *want;
    } cases[] = {
        {"X[i, 0] + X[i, 1] * V[0]", "X[i, 0] + X[i, 1] * V[0]"},
        {"(X[i, 0] + X[i, 1]) * V[0]", "(X[i, 0] + X[i, 1]) * V[0]"},
        {"X[i, 0] - (X[i, 1] - V[0])", "X[i, 0] - (X[i, 1] - V[0])"},
        {"(X[i, 0] - X[i, 1]) - V[0]", "X[i, 0] - X[i, 1] - V[0]"},
        {"(sum(k < 8) X[i, k]) * 2", "(sum(k < 8) X[i, k]) * 2."},
        {"sum(k < 8) X[i, k] * 2", "sum(k < 8) X[i, k] * 2."},
        {"sum(k < 8) (X[i, k] + 1)", "sum(k < 8) (X[i, k] + 1.)"},
        {"2 * (sum(k < 8) X[i, k]) * 3", "2. * (sum(k < 8) X[i, k]) * 3."},
        {"-(sum(k < 8) X[i, k]) / 3", "-(sum(k < 8) X[i, k]) / 3."},
        {"sum(k < 8) X[i, k] + V[0]", "sum(k < 8) X[i, k] + V[0]"},
        {"- -X[i, 0]", "- -X[i, 0]"},
        {"select(X[i, 0] > 0 && i < 3, X[i, 0], 0.1)",
         "select(X[i, 0] > 0. && i < 3, X[i, 0], 0.1)"},
        {"max(X[i, 0], 1) + pow(V[0], 2)", "max(X[i, 0], 1.) + pow(V[0], 2.)"},
        {"exp(f32(1.5)) * f32(i % 3 + floordiv(i, 2))",
         "exp(f32(1.5)) * f32(i % 3 + floordiv(i, 2))"},
    };
    for (int i = 0; i < RV_COUNT(cases); i++) {
        snprintf(text, sizeof text, "%sY[i < K] = %s\n", decl, cases[i].body);
        check_printed(text, "Y", cases[i].want);
    }
}

static void test_print_constants(void) {
    const char *decl = "input X : f32[4]\ninput D : f64[4]\ninput N : i32[4]\n";
    char text[512];
    struct {
        const char *body, *want;
    } cases[] = {
        {"D[i] * 0.1", "D[i] * 0.1"},
        {"X[i] * 0.1", "X[i] * 0.1"},
        {"D[i] + 1e-20", "D[i] + 1e-20"},
        {"D[i] * 0.30000000000000004", "D[i] * 0.30000000000000004"},
        {"D[i] * 2", "D[i] * 2."},
        {"D[i] + f64(X[i]) * 3.25", "D[i] + f64(X[i]) * 3.25"},
        {"N[i] * 3 + i32(7)", "N[i] * 3 + 7"},
        {"f32(0.1) + f32(2)", "f32(0.1) + f32(2.)"},
        {"f64(i) - 1.5", "f64(i) - 1.5"},
        {"D[i] * -2.5", "D[i] * -2.5"},
        {"select(true, D[i], 1e300)", "select(true, D[i], 1e+300)"},
    };
    for (int i = 0; i < RV_COUNT(cases); i++) {
        snprintf(text, sizeof text, "%sY[i < 4] = %s\n", decl, cases[i].body);
        check_printed(text, "Y", cases[i].want);
    }
}

static void test_print_module(void) {
    rv_module *m = parse_ok("size M in 1..64\nsize N in 1..64\nsize K in 1..64\n"
                            "input A : f32[M, K]\ninput Bm : f32[N, K]\n"
                            "P : f32[m < M, N] = extern \"matmul_nt\"(A, Bm)\n"
                            "ufun len[b < M] in 1..K\n"
                            "T2[i, j pad 8] = P[i, j] * 2\n"
                            "T3[i < M, j < i + 1] = P[i, j]\n");
    if (!m)
        return;
    char *s = print_stable(m);
    CHECK_STR_CONTAINS(s, "size M in 1..64\n");
    CHECK_STR_CONTAINS(s, "ufun len[b < M] in 1..K\n");
    CHECK_STR_CONTAINS(s, "P : f32[m < M, N] = extern \"matmul_nt\"(A, Bm)\n");
    CHECK_STR_CONTAINS(s, "T2[i, j pad 8] = P[i, j] * 2.\n");
    CHECK_STR_CONTAINS(s, "T3[i, j < i + 1] = P[i, j]\n");
    rv_free(s);
    rv_module_free(m);
}

/* Every example parses, checks, verifies and round-trips. */
static void test_examples_roundtrip(void) {
    DIR *d = opendir("examples");
    CHECK(d != NULL);
    if (!d)
        return;
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        size_t len = strlen(ent->d_name);
        if (len < 4 || strcmp(ent->d_name + len - 3, ".rv") != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "examples/%s", ent->d_name);
        rv_module *m = NULL;
        rv_status st = rv_module_load(path, &m);
        CHECK(st == RV_OK);
        if (st != RV_OK) {
            fprintf(stderr, "    %s\n", rv_last_error());
            continue;
        }
        CHECK(rv_module_verify(m) == RV_OK);
        rv_free(print_stable(m));
        rv_module_free(m);
        n++;
    }
    closedir(d);
    CHECK(n >= 10);
}

static void test_load_errors(void) {
    rv_module *m = (rv_module *)1;
    CHECK(rv_module_load("tests/does/not/exist.rv", &m) == RV_ERR_IO);
    CHECK(m == NULL);
    m = (rv_module *)1;
    CHECK(rv_module_parse("x.rv", "size T in 1..", &m) == RV_ERR_SYNTAX);
    CHECK(m == NULL);
    CHECK(rv_module_parse("x.rv", "Y[i] = q[i]", &m) == RV_ERR_TYPE);
    /* an empty program is a valid, empty module */
    m = parse_ok("# nothing\n");
    if (m) {
        char *s = rv_module_print(m);
        CHECK(strcmp(s, "") == 0);
        rv_free(s);
    }
    rv_module_free(m);
}

/* A byte-order mark at the start is skipped (columns count from after it);
 * a NUL byte inside the text is located, not the end of the program. */
static void test_lex_bom_nul(void) {
    Lexed l = lex("\xEF\xBB\xBFsize T in 1..4");
    CHECK(l.st == RV_OK);
    CHECK_EQ_INT(l.n, 7);
    if (l.n == 7) {
        CHECK_EQ_INT(l.toks[0].kind, TK_KEYWORD);
        CHECK_EQ_INT(l.toks[0].loc.col, 1);
    }
    base_free(l.toks);
    arena_free(l.arena);
    l = lex("size T in 1..4 \xEF\xBB\xBF"); /* elsewhere it is no character */
    CHECK(l.st == RV_ERR_SYNTAX);
    base_free(l.toks);
    arena_free(l.arena);
    static const char with_nul[] = "size T in 1..4\nsize\0 U in 1..4";
    static const char in_string[] = "P : f32[4] = extern \"a\0b\"()";
    static const char in_comment[] = "size T in 1..4 # a\0b\n";
    const char *texts[] = {with_nul, in_string, in_comment};
    size_t lens[] = {sizeof with_nul - 1, sizeof in_string - 1, sizeof in_comment - 1};
    const char *where[] = {"t.rv:2:5: error: NUL byte", "t.rv:1:23: error: NUL byte",
                           "t.rv:1:19: error: NUL byte"};
    for (int i = 0; i < 3; i++) {
        Arena *a = arena_new();
        SrcFile src = {"t.rv", texts[i], lens[i]};
        Token *toks;
        int n;
        CHECK(lang_lex(&src, a, &toks, &n) == RV_ERR_SYNTAX);
        CHECK_STR_CONTAINS(rv_last_error(), where[i]);
        arena_free(a);
    }
}

/* rv_module_schedule resolves its target as a source block does: a size,
 * ufun or input (even with blanks around the name) is no stage name, and
 * an accepted block round-trips. */
static void test_module_schedule_target(void) {
    rv_module *m = parse_ok("size N in 1..8\nufun f[n < N] in 0..N - 1\ninput X : f32[N]\n"
                            "Y[i] = X[i] * 2\n");
    if (!m)
        return;
    const char *bad[] = {" N ", "f", " f", "X ", "N"};
    for (int i = 0; i < RV_COUNT(bad); i++) {
        CHECK(rv_module_schedule(m, bad[i], "") == RV_ERR_TYPE);
        CHECK_STR_CONTAINS(rv_last_error(), "schedule");
    }
    CHECK(rv_module_schedule(m, " Y ", "vectorize(i)") == RV_OK);
    char *s = print_stable(m);
    CHECK_STR_CONTAINS(s, "schedule Y {\n    vectorize(i)\n}\n");
    CHECK(strstr(s, "schedule N") == NULL && strstr(s, "schedule f") == NULL);
    rv_free(s);
    rv_module_free(m);
}

/* Constants without a plain literal print as forms that parse back to the
 * same constant: infinities as an overflowing literal (not an unfolded
 * 1. / 0.), INT64_MIN as a folded subtraction. An i32 never holds a
 * constant outside its range: adapting one is an error, and folding that
 * would leave the range is not done. */
static void test_print_extreme_constants(void) {
    const char *decl = "input X : f32[4]\ninput D : f64[4]\ninput N : i32[4]\n";
    char text[512];
    struct {
        const char *body, *want;
    } cases[] = {
        {"D[i] + 1e999", "D[i] + 1e999"},
        {"X[i] * f32(1e300)", "X[i] * 1e999"},
        {"select(true, f32(-1e300), X[i])", "select(true, -1e999, X[i])"},
        {"select(i < 2, f32(1e300), f32(1.5))", "select(i < 2, f32(1e999), f32(1.5))"},
        {"D[i] + f64(-9223372036854775807 - 1)", "D[i] + -9.223372036854776e+18"},
        {"f64(i + (-9223372036854775807 - 1))", "f64(i + (-9223372036854775807 - 1))"},
        {"f64(-(-9223372036854775807 - 1) * i)", "f64(- (-9223372036854775807 - 1) * i)"},
        {"f32(N[i] + i32(2147483647) + i32(1))", "f32(N[i] + 2147483647 + 1)"},
        {"f32(i32(2147483647) + i32(1))", "f32(i32(2147483647) + i32(1))"},
        {"f32(-i32(-2147483647 - 1))", "f32(- i32(-2147483648))"},
    };
    for (int i = 0; i < RV_COUNT(cases); i++) {
        snprintf(text, sizeof text, "%sY[i < 4] = %s\n", decl, cases[i].body);
        check_printed(text, "Y", cases[i].want);
    }
    check_error("input N : i32[4]\nY[i] = N[i] + 2147483648",
                "2:13: error: the constant 2147483648 does not fit the i32");
    check_error("input N : i32[4]\nY[i] = select(i < 2, -2147483649, N[i])",
                "does not fit the i32");
}

/* "Y[i < 4] = " + n operands `i` joined by " + ", or n '(' + "i" + n ')'. */
static char *generated(int n, bool parens) {
    Buf b = {0};
    buf_puts(&b, "Y[i < 4] = ");
    for (int k = 0; k < n; k++)
        buf_puts(&b, parens ? "(" : k ? " + i" : "i");
    if (parens) {
        buf_putc(&b, 'i');
        for (int k = 0; k < n; k++)
            buf_putc(&b, ')');
    }
    buf_putc(&b, '\n');
    return buf_take(&b);
}

/* A flat chain is no nesting: 1,000 (and up to LANG_MAX_DEPTH) operands
 * check and round-trip; the tree depth stays bounded, as does the
 * parser's recursion on 100,000 nested parentheses. */
static void test_depth_and_nesting(void) {
    char *text = generated(LANG_MAX_DEPTH, false);
    rv_module *m = parse_ok(text);
    if (m)
        rv_free(print_stable(m));
    rv_module_free(m);
    base_free(text);
    text = generated(LANG_MAX_DEPTH + 1, false);
    check_error(text, "expression too deep (more than 5000 operators in a chain)");
    base_free(text);
    text = generated(LANG_MAX_NESTING - 1, true);
    m = parse_ok(text);
    rv_module_free(m);
    base_free(text);
    text = generated(100000, true);
    check_error(text, "e.rv:1:1012: error: expression nested too deeply (more than 1000 levels)");
    base_free(text);
}

/* A UF's value range may use the UF's arguments; its bounds over the
 * whole domain (what lowering assumes) are over sizes only, symbolic where
 * the range is linear. */
static void test_ufun_range_own_args(void) {
    rv_module *m = parse_ok("size N in 2..16\nsize B in 1..4\nufun len[b < B] in 1..N\n"
                            "ufun pred[n < N] in 0..n - 1\n"
                            "ufun back[n < N] in max(n - 3, 0)..min(n, 5)\n"
                            "ufun col[b < B, l < len[b]] in 2 * l..2 * l + 1\n");
    if (!m)
        return;
    struct {
        const char *uf, *lo, *hi;
    } cases[] = {
        {"pred", "0", "N - 1 - 1"},
        {"back", "0", "min(N - 1, 5)"},
        {"col", "0", "2 * (N - 1) + 1"},
    };
    for (int i = 0; i < RV_COUNT(cases); i++) {
        const Ufun *f = rv_module_ufun(m, cases[i].uf);
        char *lo = ir_expr_str(f->lo_dom), *hi = ir_expr_str(f->hi_dom);
        CHECK(strcmp(lo, cases[i].lo) == 0 && strcmp(hi, cases[i].hi) == 0);
        if (strcmp(lo, cases[i].lo) != 0 || strcmp(hi, cases[i].hi) != 0)
            fprintf(stderr, "    %s over its domain: %s..%s\n", cases[i].uf, lo, hi);
        base_free(lo);
        base_free(hi);
    }
    CHECK(rv_module_verify(m) == RV_OK);
    char *s = print_stable(m);
    CHECK_STR_CONTAINS(s, "ufun pred[n < N] in 0..n - 1\n");
    CHECK_STR_CONTAINS(s, "ufun col[b < B, l < len[b]] in 2 * l..2 * l + 1\n");
    rv_free(s);
    rv_module_free(m);
    check_error("size N in 1..4\nufun f[n < N] in 0..m", "2:21: error: undefined name 'm'");
    check_error("size N in 1..4\nufun f[n < N] in 0..f[n]", "2:21: error: undefined name 'f'");
}

/* A read in a branch of `if` is provably out of range only at an element
 * where the branch runs: a guard sharing an axis with the read (directly
 * or through an extent) or one the checker cannot decide keeps it from
 * being judged; an independent guard that holds somewhere does not. */
static void test_guarded_reads(void) {
    static const char *const ok[] = {
        /* the guard names the UF's argument */
        "size N in 1..4\nufun len[a < N] in 0..3\nT[i < 6] = if i < N then len[i] else 0",
        /* and in the else-branch */
        "size N in 1..4\nufun len[a < N] in 0..3\nT[i < 6] = if i >= N then 0 else len[i]",
        /* ... with an inferred extent (the check is postponed) */
        "size N in 1..4\nufun len[a < N] in 0..3\ninput Z : f32[6]\n"
        "T[i] = if i < N then Z[i] * f32(len[i]) else 0.0",
        /* the guard bounds an axis that the read's axis extent uses */
        "size L in 1..1\ninput X : f32[L]\nT[i < 6, j < i + 1] = if i < 1 then X[j] else 0.0",
        /* ... or a reduction's */
        "size L in 1..1\ninput X : f32[L]\nT[i < 6] = if i < 1 then sum(k < i + 1) X[k] else 0.0",
        /* a conjunction, a negation, a guard on an expression */
        "size N in 1..8\ninput X : f32[N]\nT[i < N, j < 3] = if j < 2 && i + j < N then X[i + j] "
        "else 0.0",
        "size N in 1..8\ninput X : f32[N]\nT[i < N, j < 3] = if !(i + j >= N) then X[i + j] else "
        "0.0",
        /* a guard that may never hold (M = 0): the branch may never run */
        "size N in 1..4\nsize M in 0..4\ninput X : f32[N]\n"
        "T[i < N, k < 5] = if k < M then X[i + 1] else 0.0",
        /* a guard the checker cannot decide (a UF value) */
        "size N in 1..4\nufun f[a < 5] in 0..1\ninput X : f32[N]\n"
        "T[i < N, k < 5] = if f[k] == 1 then X[i + 1] else 0.0",
    };
    for (int i = 0; i < RV_COUNT(ok); i++) {
        rv_module *m = parse_ok(ok[i]);
        if (!m)
            fprintf(stderr, "    case %d\n", i);
        rv_module_free(m);
    }
    /* an independent guard that holds at some element for every size */
    check_error("size N in 1..4\ninput X : f32[N]\nT[i < N, k < 5] = if k < 3 then X[i + 1] "
                "else 0.0",
                "3:33: error: index i + 1 of 'X' is out of range");
    check_error("size N in 1..4\ninput X : f32[N]\nT[i < N, k < 5] = if k < 3 then 0.0 "
                "else X[i + 1]",
                "3:42: error: index i + 1 of 'X' is out of range");
    check_error("size N in 1..4\nufun len[a < N] in 0..3\nT[i < 6, k < 2] = if k == 0 || k > 0 "
                "then len[i] else 0",
                "3:47: error: ufun 'len' used outside its domain");
    /* select evaluates both arms: it does not narrow */
    check_error("size N in 1..4\nufun len[a < N] in 0..3\nT[i < 6] = select(i < N, len[i], 0)",
                "3:30: error: ufun 'len' used outside its domain");
}

/* ---- recursion: structures and recursion groups ---- */

static const char *const rec_prog =
    "size N in 1..100\nsize B in 1..10\n"
    "structure T : tree(N, 3) {\n"
    "    children child, nchild\n"
    "    roots root[b < B]\n"
    "    data word in 0..99, label in 0..N - 1\n"
    "    data pos in -1..1\n"
    "}\n"
    "input Emb : f32[100, 4]\n"
    "recurse R over T {\n"
    "    hs[n < N, i < 4] = sum(k < nchild[n]) h[child[n, k], i]\n"
    "    cnt[n] : i32 = if nchild[n] == 0 then 1 else sum(k < nchild[n]) cnt[child[n, k]] + 1\n"
    "    h[n, i < 4] = tanh(Emb[word[n], i] + hs[n, i]) * f32(cnt[n])\n"
    "}\n"
    "Out[s, i] = h[root[s], i]\n";

/* A structure and a group with forward reads, a conditional member and a
 * dtype: the IR they build, and the canonical print. */
static void test_recurse_parse(void) {
    rv_module *m = parse_ok(rec_prog);
    if (!m)
        return;
    CHECK(rv_module_verify(m) == RV_OK);
    Structure *st = rv_module_structure(m, "T");
    CHECK(st && st->kind == RV_STRUCT_TREE && st->max_children == 3);
    CHECK(st && st->root == rv_module_ufun(m, "root") && st->ndata == 3);
    CHECK(st && st->data[2] == rv_module_ufun(m, "pos") && st->data[2]->lo->u.ival == -1);
    CHECK(m->recurses.len == 1 && m->recurses.data[0]->members.len == 3);
    Tensor *cnt = rv_module_tensor(m, "cnt");
    CHECK(cnt && cnt->op->kind == OP_RECURSE && cnt->dtype == RV_I32 && cnt->op->pred);
    char *s = print_stable(m);
    CHECK_STR_CONTAINS(s, "size N in 1..100\nsize B in 1..10\n\nstructure T : tree(N, 3) {\n"
                          "    children child, nchild\n    roots root[s < B]\n"
                          "    data word in 0..99, label in 0..N - 1, pos in -1..1\n}\n\n"
                          "input Emb");
    CHECK_STR_CONTAINS(s, "recurse R over T {\n"
                          "    hs[n, i < 4] = sum(k < nchild[n]) h[child[n, k], i]\n"
                          "    cnt[n] : i32 = if nchild[n] == 0 then i32(1) else ");
    CHECK_STR_CONTAINS(s, "}\n\nOut[s, i] = h[root[s], i]\n");
    /* the structure's own ufuns and hidden batches never print as items */
    CHECK(strstr(s, "ufun") == NULL && strstr(s, "_T_") == NULL);
    rv_free(s);
    rv_module_free(m);
    /* sequences and DAGs; no roots, no data */
    m = parse_ok(
        "size N in 1..8\nstructure S : sequence(N) { children p, np }\n"
        "structure D : dag(N, 2) { children c, nc }\n"
        "ufun f[n < N] in 0..np[n]\n"
        "recurse R over S { x[n, j < 2] = sum(k < np[n]) x[p[n, k], j] + f32(f[n]) }\n"
        "recurse Q over D { y[n pad 4, j < 8 pad 8] : f64 = sum(k < nc[n]) y[c[n, k], j] }\n");
    if (!m)
        return;
    s = print_stable(m);
    CHECK_STR_CONTAINS(s, "recurse Q over D {\n    y[n pad 4, j < 8 pad 8] : f64 = ");
    CHECK_STR_CONTAINS(s, "structure S : sequence(N) {\n    children p, np\n}\n\n"
                          "structure D : dag(N, 2) {\n    children c, nc\n}\n\n"
                          "ufun f[n < N] in 0..np[n]\n");
    rv_free(s);
    rv_module_free(m);
}

/* The keywords are reserved; the contextual words of a structure are not. */
static void test_recurse_keywords(void) {
    Lexed l = lex("structure recurse over children roots data");
    CHECK(l.st == RV_OK && l.n == 7);
    for (int i = 0; i < 3 && l.n == 7; i++)
        CHECK(l.toks[i].kind == TK_KEYWORD);
    for (int i = 3; i < 6 && l.n == 7; i++)
        CHECK(l.toks[i].kind == TK_IDENT);
    base_free(l.toks);
    arena_free(l.arena);
    check_error("size over in 1..2\n", "expected a size name, found 'over'");
    rv_module *m = parse_ok("size N in 1..8\nstructure T : tree(N, 2) { children data, roots }\n"
                            "ufun children[n < N] in 0..1\n");
    rv_module_free(m);
}

static void test_recurse_errors(void) {
    const char *pre = "size N in 1..8\nsize B in 1..4\n"
                      "structure T : tree(N, 2) { children child, nchild  roots root[s < B] }\n"
                      "input X : f32[N, 4]\n";
    struct {
        const char *body, *msg;
    } cases[] = {
        {"recurse R over T { h[n, i < 4] = h[n, i] }", "reads itself at its own node"},
        {"recurse R over T { h[n, i < 4] = h[root[0], i] }", "neither 'n' nor one of its children"},
        {"recurse R over T { h[n, i < 4] = h[child[n, i32(X[n, 0])], i] }", "Cortex P.1"},
        {"recurse R over T { a[n, i < 4] = b[n, i]  b[n, i < 4] = 1. }", "defined after it"},
        {"recurse R over T { h[n, i] = 1. }", "axis 'i' of 'h' needs an extent"},
        {"recurse R over T { h[n < B, i < 4] = 1. }", "ranges over the nodes of 'T'"},
        {"recurse R over T { h[n, i < n] = 1. }", "uses the axis 'n'"},
        {"recurse R over T { h[] = 1. }", "is indexed by its node first"},
        {"recurse R over T { h[n] : f16 = 1. }", "unknown dtype 'f16'"},
        {"recurse R over T { }", "defines no tensor"},
        {"recurse R over U { h[n] = 1. }", "undefined structure 'U'"},
        {"recurse R over X { h[n] = 1. }", "'X' is a tensor, not a structure"},
        {"recurse T over T { h[n] = 1. }", "redefinition of 'T'"},
        {"recurse R over T { X[n] = 1. }", "redefinition of 'X'"},
        {"recurse R over T { h[n] = if X[n, 0] > 0. then 1. else 0. }", "no tensor reads"},
        {"Y[n, i] = Y[n, i]", "recursion group (recurse R over T"},
        {"structure U : forest(N, 2) { children c, nc }", "unknown structure kind 'forest'"},
        {"structure U : sequence(N, 1) { children c, nc }", "write sequence(N)"},
        {"structure U : tree(N) { children c, nc }", "tree(N, K)"},
        {"structure U : tree(M, 2) { children c, nc }", "undefined size 'M'"},
        {"structure U : tree(X, 2) { children c, nc }", "'X' is a tensor, not a size"},
        {"structure U : tree(N + 1, 2) { children c, nc }", "is a declared size"},
        {"structure U : tree(N, 0) { children c, nc }", "must be in 1..64, got 0"},
        {"structure U : tree(N, B) { children c, nc }", "is an integer literal"},
        {"structure U : tree(N, 2) { children c, c }", "redefinition of 'c'"},
        {"structure U : tree(N, 2) { children c, child }", "redefinition of 'child'"},
        {"structure U : tree(N, 2) { children c, nc  roots r[s < Q] }", "undefined size 'Q'"},
        {"structure U : tree(N, 2) { children c, nc  roots r[s < 3] }", "is a declared size"},
        {"structure U : tree(N, 2) { children c, nc  roots r[B, B] }", "takes one argument"},
        {"structure U : tree(N, 2) { children c, nc  data w in 0..child[0, 0] }",
         "uses the ufun 'child'"},
        {"structure U : tree(N, 2) { children c, nc  data w in 3..1 }", "empty range"},
        {"structure U : tree(N, 2) { roots r[B] children c, nc }", "expected 'children'"},
        {"structure U : tree(N, 2) { children c, nc  data w in 0..1  roots r[B] }",
         "expected 'data' or '}'"},
        {"schedule R { dynamic_batch() }\nrecurse R over T { h[n] = 1. }",
         "must follow the definition of its recursion group"},
        {"Z[i] = sum(child2 < 2) X[0, i]\nstructure U : tree(N, 2) { children child2, nc }",
         "reduction axis 'child2' has the name of the ufun"},
        {"recurse R over T { h[n] = 1.", "expected a definition or '}', found end of input"},
        {"recurse R T { h[n] = 1. }", "expected 'over', found 'T'"},
        {"structure U : tree(N, 2) { children c }", "expected ',', found '}'"},
    };
    for (int i = 0; i < RV_COUNT(cases); i++) {
        char *text = base_xstrdup(pre);
        size_t len = strlen(pre) + strlen(cases[i].body) + 2;
        text = base_xrealloc(text, len);
        strcat(text, cases[i].body);
        strcat(text, "\n");
        check_error(text, cases[i].msg);
        if (!strstr(rv_last_error(), cases[i].msg))
            fprintf(stderr, "    case %d: %s\n", i, cases[i].body);
        base_free(text);
    }
}

/* `schedule R` names a group: stored with the group, printed back. */
static void test_recurse_schedule_block(void) {
    char *text = base_xstrdup(rec_prog);
    rv_module *m = parse_ok(text);
    base_free(text);
    if (!m)
        return;
    CHECK(rv_module_schedule(m, "R", "dynamic_batch()") == RV_OK);
    CHECK(m->scheds.len == 1 && m->scheds.data[0].group == m->recurses.data[0] &&
          !m->scheds.data[0].target);
    char *s = print_stable(m);
    CHECK_STR_CONTAINS(s, "\nschedule R {\n    dynamic_batch()\n}\n");
    rv_free(s);
    CHECK(rv_module_schedule(m, "T", "") == RV_ERR_TYPE);
    rv_module_free(m);
}

/* A group built through the C API (not the front end) prints as source
 * that parses back to the same text: the printer's contract holds for
 * every module, not only parsed ones. */
static void test_recurse_print_api(void) {
    rv_module *m = rv_module_new();
    rv_size *N = rv_size_new(m, "N", 1, 50);
    rv_size *B = rv_size_new(m, "B", 1, 5);
    rv_structure *st = rv_structure_new(m, "T", RV_STRUCT_DAG, N, 4, "kid", "nkid");
    CHECK(st && rv_structure_set_roots(st, "top", B));
    rv_ufun *w = rv_structure_add_data(st, "w", rv_expr_int(m, 0),
                                       rv_expr_sub(m, rv_expr_size(m, N), rv_expr_int(m, 1)));
    rv_recurse *r = rv_recurse_begin(m, "R", st);
    const char *ax[] = {"v", "j"};
    rv_expr *ext[] = {NULL, rv_expr_int(m, 3)};
    rv_compute *x = rv_recurse_add(r, "x", RV_F64, 2, ax, ext);
    CHECK(w && x);
    if (!w || !x) {
        rv_module_free(m);
        return;
    }
    rv_expr *v = rv_compute_var(x, 0), *j = rv_compute_var(x, 1);
    rv_axis *k = rv_reduce_axis_new(m, "k", rv_expr_ufcall(m, st->nchild, 1, &v));
    rv_expr *kid = rv_expr_ufcall(m, st->child, 2, (rv_expr *[]){v, rv_expr_axis(m, k)});
    rv_expr *rd = rv_expr_read(m, rv_module_tensor(m, "x"), 2, (rv_expr *[]){kid, j});
    rv_expr *body = rv_expr_add(m, rv_expr_reduce(m, RV_REDUCE_SUM, 1, &k, rd),
                                rv_expr_cast(m, RV_F64, rv_expr_ufcall(m, w, 1, &v)));
    CHECK(rv_recurse_define(x, NULL, body, NULL) != NULL);
    CHECK_EQ_INT(rv_recurse_end(r), RV_OK);
    char *s = print_stable(m);
    CHECK_STR_CONTAINS(s, "structure T : dag(N, 4) {\n    children kid, nkid\n"
                          "    roots top[s < B]\n    data w in 0..N - 1\n}\n\n"
                          "recurse R over T {\n    x[v, j < 3] : f64 = sum(k < nkid[v]) "
                          "x[kid[v, k], j] + f64(w[v])\n}\n");
    rv_free(s);
    rv_module_free(m);
}

/* `output h, y` names the outputs: exactly those (a member read only by
 * later members, a tensor no one reads), printed back after every
 * definition; the names are checked where they are written. */
static void test_output_declaration(void) {
    char *text = base_xstrdup(rec_prog);
    text = base_xrealloc(text, strlen(text) + 64);
    strcat(text, "Dead[s] = Out[s, 0]\noutput hs, Out\n");
    rv_module *m = parse_ok(text);
    base_free(text);
    if (!m)
        return;
    const char *outs[] = {"hs", "Out"}, *not_outs[] = {"cnt", "h", "Dead", "Emb"};
    for (int i = 0; i < RV_COUNT(outs); i++)
        CHECK(rv_tensor_is_output(m, rv_module_tensor(m, outs[i])));
    for (int i = 0; i < RV_COUNT(not_outs); i++)
        CHECK(!rv_tensor_is_output(m, rv_module_tensor(m, not_outs[i])));
    CHECK(ir_verify(m) == RV_OK);
    char *s = print_stable(m);
    CHECK_STR_CONTAINS(s, "Dead[s] = Out[s, 0]\n\noutput hs, Out\n");
    rv_free(s);
    /* the C API shares the rule: inputs and names given twice refused */
    CHECK_EQ_INT(rv_module_add_output(m, rv_module_tensor(m, "Emb")), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "'Emb' is an input");
    CHECK_EQ_INT(rv_module_add_output(m, rv_module_tensor(m, "hs")), RV_ERR_ARG);
    CHECK_EQ_INT(rv_module_add_output(m, rv_module_tensor(m, "h")), RV_OK);
    CHECK(rv_tensor_is_output(m, rv_module_tensor(m, "h")));
    /* the verifier rechecks what passes may have rebuilt */
    vec_push(&m->outputs, m->outputs.data[0]);
    CHECK(ir_verify(m) != RV_OK);
    CHECK_STR_CONTAINS(rv_last_error(), "output 'hs' is named twice");
    m->outputs.len--;
    rv_module_free(m);
    /* without a declaration, the rule: Out alone (nothing reads it) */
    m = parse_ok(rec_prog);
    CHECK(m && rv_tensor_is_output(m, rv_module_tensor(m, "Out")) &&
          !rv_tensor_is_output(m, rv_module_tensor(m, "h")));
    rv_module_free(m);
    /* `output` stays usable as a tensor name */
    m = parse_ok("size N in 1..4\ninput X : f32[N]\noutput[i] = X[i]\noutput output\n");
    CHECK(m && rv_tensor_is_output(m, rv_module_tensor(m, "output")));
    rv_module_free(m);
    const char *pre = "size N in 1..4\ninput X : f32[N]\nY[i] = X[i]\n";
    const struct {
        const char *body, *msg;
    } cases[] = {
        {"output Z", "4:8: error: undefined name 'Z'"},
        {"output Y, X", "4:11: error: 'X' is an input; an output is a computed tensor"},
        {"output Y, Y", "4:11: error: 'Y' is named twice among the outputs"},
        {"output N", "4:8: error: outputs are tensors; 'N' is a size"},
        {"output Y\noutput Y", "5:1: error: a second 'output' declaration"},
        {"output Y,", "expected a tensor name, found end of input"},
        {"output Z\nZ[i] = Y[i]", "4:8: error: undefined name 'Z'"},
    };
    for (int i = 0; i < RV_COUNT(cases); i++) {
        char *t = base_xmalloc(strlen(pre) + strlen(cases[i].body) + 2);
        sprintf(t, "%s%s\n", pre, cases[i].body);
        check_error(t, cases[i].msg);
        base_free(t);
    }
}

int main(void) {
    RUN(test_lex_tokens);
    RUN(test_lex_errors);
    RUN(test_parse_precedence);
    RUN(test_parse_reduce);
    RUN(test_parse_errors);
    RUN(test_parse_schedule);
    RUN(test_elab_dense);
    RUN(test_elab_typing);
    RUN(test_elab_ufun_domain);
    RUN(test_errors_located);
    RUN(test_print_parens);
    RUN(test_print_constants);
    RUN(test_print_module);
    RUN(test_examples_roundtrip);
    RUN(test_load_errors);
    RUN(test_lex_bom_nul);
    RUN(test_module_schedule_target);
    RUN(test_print_extreme_constants);
    RUN(test_depth_and_nesting);
    RUN(test_ufun_range_own_args);
    RUN(test_guarded_reads);
    RUN(test_recurse_parse);
    RUN(test_recurse_keywords);
    RUN(test_recurse_errors);
    RUN(test_recurse_schedule_block);
    RUN(test_recurse_print_api);
    RUN(test_output_declaration);
    return harness_report();
}
