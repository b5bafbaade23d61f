/*
 * parse.c — the ravel parser: tokens to an AST (docs/language.md has the
 * grammar this file implements, in EBNF).
 *
 * Recursive descent over items, and precedence climbing over C's binary
 * operator levels for expressions:
 *
 *     ||   &&   == !=   < <= > >=   + -   * / %   unary - !
 *
 * Two constructs need more than the next token:
 *
 *   - A reduction `sum(k < K) body` is a prefix form whose body is a
 *     *multiplicative-level* expression, so `sum(k < K) a * b + c` reads
 *     as `(sum(k < K) a * b) + c`: reduce sits with the unary operators and
 *     parses its body with parse_mul.
 *   - `max(` and `min(` are either a reduction or the binary function. The
 *     rule (normative, docs/language.md) is: a reduction iff the token after
 *     `(` is an identifier *not in scope*, followed by `<`. So the parser
 *     keeps its own light scope — the item names declared so far and a
 *     stack of the local binders visible at this point — which is the same
 *     scope chain later parts of the language (let, function parameters,
 *     pattern variables) will push onto.
 *
 * The parser builds nodes only; names are resolved, arities and dtypes
 * checked by check.c. It stops at the first syntax error, reported as
 * "expected X, found Y" at the offending token.
 */
#include <string.h>

#include "lang/lang.h"

typedef struct Parser {
    const SrcFile *src;
    const Token *tok; /* current token */
    /* Streaming (lx set): tokens are lexed as the parser needs them into a
     * window holding the current item's tokens and the lookahead, so a big
     * program never holds all its tokens. Otherwise tok walks a whole
     * array. */
    Lexer *lx;
    TokenVec win;
    int pos; /* tok == &win.data[pos] */
    Arena *arena;
    StrMap globals;           /* item names declared so far */
    Vec(const char *) locals; /* visible binders, innermost last */
    int nesting;              /* active parse_unary calls (bounds the recursion) */
    rv_status st;             /* first error; parsing unwinds once set */
} Parser;

/* ---- tokens ---- */

static bool is_punct(const Token *t, const char *s) {
    return t->kind == TK_PUNCT && strcmp(t->text, s) == 0;
}

static bool is_keyword(const Token *t, const char *s) {
    return t->kind == TK_KEYWORD && strcmp(t->text, s) == 0;
}

/* Records "expected X, found Y" at the current token (first error wins). */
static void expected(Parser *p, const char *what) {
    if (p->st != RV_OK)
        return;
    p->st = base_diag(RV_ERR_SYNTAX, p->src, p->tok->loc, "expected %s, found %s", what,
                      lang_token_desc(p->arena, p->tok));
}

static bool failed(const Parser *p) {
    return p->st != RV_OK;
}

/* The parser looks at most this many tokens past the current one. */
#define LOOKAHEAD 3

/* Streaming: lexes until LOOKAHEAD tokens follow the current one (or the
 * end), then re-points tok, as the window may have moved. A lexical error
 * ends the window with TK_EOF, so parsing unwinds; once parsing failed,
 * nothing more is lexed (its diagnostic would replace the first one). */
static void fill(Parser *p) {
    while (p->win.len - p->pos <= LOOKAHEAD &&
           (p->win.len == 0 || vec_last(&p->win).kind != TK_EOF)) {
        rv_status st = p->st == RV_OK ? lang_lex_next(p->lx, &p->win) : p->st;
        if (st != RV_OK) {
            p->st = st;
            Token eof = {.kind = TK_EOF, .text = ""};
            vec_push(&p->win, eof);
        }
    }
    p->tok = &p->win.data[p->pos];
}

static void next(Parser *p) {
    if (p->tok->kind == TK_EOF)
        return;
    if (!p->lx) {
        p->tok++;
        return;
    }
    p->pos++;
    fill(p);
}

/* Consumes the punctuator `s` or reports it missing. */
static bool skip(Parser *p, const char *s) {
    if (failed(p))
        return false;
    if (!is_punct(p->tok, s)) {
        expected(p, arena_printf(p->arena, "'%s'", s));
        return false;
    }
    next(p);
    return true;
}

static bool skip_keyword(Parser *p, const char *s) {
    if (failed(p))
        return false;
    if (!is_keyword(p->tok, s)) {
        if (p->tok->kind == TK_IDENT && base_near_name(p->tok->text, &s, 1)) {
            p->st = base_diag(RV_ERR_SYNTAX, p->src, p->tok->loc,
                              "expected '%s', found '%s'; did you mean '%s'?", s, p->tok->text, s);
            return false;
        }
        expected(p, arena_printf(p->arena, "'%s'", s));
        return false;
    }
    next(p);
    return true;
}

static bool consume(Parser *p, const char *s) {
    if (!failed(p) && is_punct(p->tok, s)) {
        next(p);
        return true;
    }
    return false;
}

/* An identifier: returns its text and location, or NULL after an error. */
static const char *ident(Parser *p, const char *what, SrcLoc *loc) {
    if (failed(p))
        return NULL;
    if (p->tok->kind != TK_IDENT) {
        expected(p, what);
        return NULL;
    }
    if (loc)
        *loc = p->tok->loc;
    const char *s = p->tok->text;
    next(p);
    return s;
}

/* ---- the parser's scope (only to tell reductions from calls) ---- */

static bool in_scope(const Parser *p, const char *name) {
    for (int i = p->locals.len - 1; i >= 0; i--)
        if (strcmp(p->locals.data[i], name) == 0)
            return true;
    return strmap_has(&p->globals, name);
}

/* ---- expressions ---- */

static Node *parse_expr(Parser *p);
static Node *parse_mul(Parser *p);
static Node *parse_unary(Parser *p);

static Node *new_node(Parser *p, NodeKind k, SrcLoc loc) {
    Node *n = arena_alloc(p->arena, sizeof(Node));
    n->kind = k;
    n->loc = loc;
    n->depth = 1;
    return n;
}

/* Sets n's depth from its operands. Every later stage walks expressions
 * recursively, so a pathological depth is an error here rather than a
 * stack overflow there (LANG_MAX_DEPTH). Returns n, or NULL after the
 * error. */
static Node *deepen(Parser *p, Node *n) {
    if (!n || failed(p))
        return NULL;
    for (int i = 0; i < n->nargs; i++)
        if (n->args[i] && n->args[i]->depth + 1 > n->depth)
            n->depth = n->args[i]->depth + 1;
    for (int i = 0; i < n->nbinds; i++)
        if (n->binds[i].extent && n->binds[i].extent->depth + 1 > n->depth)
            n->depth = n->binds[i].extent->depth + 1;
    if (n->depth > LANG_MAX_DEPTH) {
        p->st = base_diag(RV_ERR_SYNTAX, p->src, n->loc,
                          "expression too deep (more than %d operators in a chain): split it "
                          "into several definitions",
                          LANG_MAX_DEPTH);
        return NULL;
    }
    return n;
}

static Node *new_binary(Parser *p, ExprKind op, SrcLoc loc, Node *a, Node *b) {
    Node *n = new_node(p, ND_BINARY, loc);
    n->op = op;
    n->nargs = 2;
    n->args = arena_alloc(p->arena, 2 * sizeof(Node *));
    n->args[0] = a;
    n->args[1] = b;
    return deepen(p, n);
}

/* A comma-separated expression list up to the closing bracket `close`. */
static void parse_args(Parser *p, const char *close, Node *n) {
    Vec(Node *) args = {0};
    if (!is_punct(p->tok, close)) {
        do {
            Node *a = parse_expr(p);
            if (!a)
                break;
            vec_push(&args, a);
        } while (consume(p, ","));
    }
    skip(p, close);
    n->nargs = args.len;
    n->args = arena_memdup(p->arena, args.data, sizeof(Node *) * (size_t)args.len);
    vec_free(&args);
}

/* `name < extent` inside a reduction; the binder enters scope afterwards
 * (the caller pops it), so a later binder's extent may use it. */
static bool parse_reduce_binder(Parser *p, Binder *b) {
    b->name = ident(p, "a reduction axis name", &b->loc);
    b->named = true;
    if (!skip(p, "<"))
        return false;
    b->extent = parse_expr(p);
    if (b->extent)
        vec_push(&p->locals, b->name);
    return b->extent != NULL;
}

/* sum(k < K, l < L) body: the current token is the reduction's name. */
static Node *parse_reduce(Parser *p) {
    Node *n = new_node(p, ND_REDUCE, p->tok->loc);
    n->name = p->tok->text;
    next(p);
    skip(p, "(");
    int mark = p->locals.len;
    Vec(Binder) binds = {0};
    do {
        Binder b = {0};
        if (!parse_reduce_binder(p, &b))
            break;
        vec_push(&binds, b);
    } while (consume(p, ","));
    if (skip(p, ")")) {
        n->nargs = 1;
        n->args = arena_alloc(p->arena, sizeof(Node *));
        n->args[0] = parse_mul(p);
    }
    p->locals.len = mark;
    n->nbinds = binds.len;
    n->binds = arena_memdup(p->arena, binds.data, sizeof(Binder) * (size_t)binds.len);
    vec_free(&binds);
    return deepen(p, n);
}

/* Does the current token start a reduction? (see the file comment) */
static bool at_reduce(const Parser *p) {
    const Token *t = p->tok;
    if (t->kind != TK_IDENT || !is_punct(&t[1], "("))
        return false;
    rv_reduce_kind rk;
    if (!ir_reduce_kind_of(t->text, &rk))
        return false;
    if (rk != RV_REDUCE_MAX && rk != RV_REDUCE_MIN) /* max(a, b) is also a call */
        return true;
    return t[2].kind == TK_IDENT && is_punct(&t[3], "<") && !in_scope(p, t[2].text);
}

/* if c then a else b */
static Node *parse_if(Parser *p) {
    Node *n = new_node(p, ND_IF, p->tok->loc);
    next(p);
    n->nargs = 3;
    n->args = arena_alloc(p->arena, 3 * sizeof(Node *));
    n->args[0] = parse_expr(p);
    if (skip_keyword(p, "then"))
        n->args[1] = parse_expr(p);
    if (skip_keyword(p, "else"))
        n->args[2] = parse_expr(p);
    return deepen(p, n);
}

static Node *parse_primary(Parser *p) {
    if (failed(p))
        return NULL;
    const Token *t = p->tok;
    Node *n;
    switch (t->kind) {
    case TK_INT:
        n = new_node(p, ND_INT, t->loc);
        n->ival = t->ival;
        next(p);
        return n;
    case TK_FLOAT:
        n = new_node(p, ND_FLOAT, t->loc);
        n->fval = t->fval;
        next(p);
        return n;
    case TK_KEYWORD:
        if (is_keyword(t, "true") || is_keyword(t, "false")) {
            n = new_node(p, ND_BOOL, t->loc);
            n->ival = is_keyword(t, "true");
            next(p);
            return n;
        }
        if (is_keyword(t, "if"))
            return parse_if(p);
        break;
    case TK_IDENT:
        if (at_reduce(p))
            return parse_reduce(p);
        n = new_node(p, ND_NAME, t->loc);
        n->name = t->text;
        next(p);
        if (consume(p, "[")) {
            n->kind = ND_INDEX;
            parse_args(p, "]", n);
        } else if (consume(p, "(")) {
            n->kind = ND_CALL;
            parse_args(p, ")", n);
        }
        return deepen(p, n);
    case TK_PUNCT:
        if (is_punct(t, "(")) {
            next(p);
            n = parse_expr(p);
            skip(p, ")");
            return failed(p) ? NULL : n;
        }
        break;
    default:
        break;
    }
    expected(p, "an expression");
    return NULL;
}

static Node *parse_unary_nested(Parser *p);

/* Every nested expression passes through here, so this bounds the
 * parser's own recursion. */
static Node *parse_unary(Parser *p) {
    if (failed(p))
        return NULL;
    if (p->nesting >= LANG_MAX_NESTING) {
        p->st = base_diag(RV_ERR_SYNTAX, p->src, p->tok->loc,
                          "expression nested too deeply (more than %d levels)", LANG_MAX_NESTING);
        return NULL;
    }
    p->nesting++;
    Node *n = parse_unary_nested(p);
    p->nesting--;
    return n;
}

static Node *parse_unary_nested(Parser *p) {
    if (is_punct(p->tok, "-") || is_punct(p->tok, "!")) {
        SrcLoc loc = p->tok->loc; /* the token may move while the operand is read */
        ExprKind op = is_punct(p->tok, "-") ? EX_NEG : EX_NOT;
        next(p);
        Node *a = parse_unary(p);
        if (!a)
            return NULL;
        Node *n = new_node(p, ND_UNARY, loc);
        n->op = op;
        n->nargs = 1;
        n->args = arena_alloc(p->arena, sizeof(Node *));
        n->args[0] = a;
        return deepen(p, n);
    }
    return parse_primary(p);
}

/* One binary precedence level: its operators and their IR kinds. */
typedef struct Level {
    const char *ops[4];
    ExprKind kinds[4];
} Level;

// clang-format off
static const Level levels[] = {
    {{"||"},                 {EX_OR}},
    {{"&&"},                 {EX_AND}},
    {{"==", "!="},           {EX_EQ, EX_NE}},
    {{"<", "<=", ">", ">="}, {EX_LT, EX_LE, EX_GT, EX_GE}},
    {{"+", "-"},             {EX_ADD, EX_SUB}},
    {{"*", "/", "%"},        {EX_MUL, EX_DIV, EX_MOD}},
};
// clang-format on
enum { LEVEL_MUL = RV_COUNT(levels) - 1 };

/* Precedence climbing: parses operators of level >= `lv`, left-assoc. */
static Node *parse_level(Parser *p, int lv) {
    if (lv > LEVEL_MUL)
        return parse_unary(p);
    Node *a = parse_level(p, lv + 1);
    for (;;) {
        if (!a)
            return NULL;
        int found = -1;
        for (int i = 0; i < 4 && levels[lv].ops[i]; i++)
            if (is_punct(p->tok, levels[lv].ops[i]))
                found = i;
        if (found < 0)
            return a;
        SrcLoc loc = p->tok->loc;
        next(p);
        Node *b = parse_level(p, lv + 1);
        if (!b)
            return NULL;
        a = new_binary(p, levels[lv].kinds[found], loc, a, b);
    }
}

static Node *parse_mul(Parser *p) {
    return parse_level(p, LEVEL_MUL);
}

static Node *parse_expr(Parser *p) {
    return parse_level(p, 0);
}

/* ---- binders and types ---- */

/* `pad K` after a dimension or axis, if present. */
static void parse_pad(Parser *p, Binder *b) {
    if (failed(p) || !is_keyword(p->tok, "pad"))
        return;
    b->pad_loc = p->tok->loc;
    next(p);
    if (p->tok->kind != TK_INT) {
        expected(p, "an integer padding multiple");
        return;
    }
    b->has_pad = true;
    b->pad = p->tok->ival;
    next(p);
}

/* A dimension `name < extent`, or an unnamed `extent` (named `_<pos>`),
 * optionally followed by `pad K`. The name enters the local scope so later
 * dimensions can use it (the caller pops). */
static bool parse_dim(Parser *p, Binder *b, int pos) {
    b->loc = p->tok->loc;
    if (p->tok->kind == TK_IDENT && is_punct(&p->tok[1], "<")) {
        b->name = p->tok->text;
        b->named = true;
        next(p);
        next(p);
    } else {
        b->name = arena_printf(p->arena, "_%d", pos);
    }
    b->extent = parse_expr(p);
    parse_pad(p, b);
    if (b->named)
        vec_push(&p->locals, b->name);
    return !failed(p);
}

/* `[d0, d1, ...]` of a type or a UF domain. */
static void parse_dims(Parser *p, int *n, Binder **out) {
    Vec(Binder) dims = {0};
    if (skip(p, "[") && !is_punct(p->tok, "]")) { /* f32[]: a scalar */
        do {
            Binder b = {0};
            if (!parse_dim(p, &b, dims.len))
                break;
            vec_push(&dims, b);
        } while (consume(p, ","));
    }
    skip(p, "]");
    *n = dims.len;
    *out = arena_memdup(p->arena, dims.data, sizeof(Binder) * (size_t)dims.len);
    vec_free(&dims);
}

/* `f32[dims]`; the dimension names stay local to the type. */
static void parse_type(Parser *p, TypeSpec *ty) {
    int mark = p->locals.len;
    ty->dtype = ident(p, "a dtype", &ty->loc);
    parse_dims(p, &ty->ndim, &ty->dims);
    p->locals.len = mark;
}

/* ---- items ---- */

static Item *new_item(Parser *p, ItemKind k) {
    Item *it = arena_alloc(p->arena, sizeof(Item));
    it->kind = k;
    it->loc = p->tok->loc;
    return it;
}

static void declare_name(Parser *p, const char *name) {
    if (name)
        strmap_put(&p->globals, name, (void *)name);
}

/* An item's names: its own, and the ufuns of a structure and the members
 * of a recursion, which are global too. */
static void declare(Parser *p, Item *it) {
    declare_name(p, it->name);
    declare_name(p, it->child);
    declare_name(p, it->nchild);
    declare_name(p, it->root);
    for (int i = 0; i < it->ndata; i++)
        declare_name(p, it->data[i].name);
    for (int i = 0; i < it->nmembers; i++)
        declare_name(p, it->members[i]->name);
}

/* A signed integer literal (size ranges). */
static int64_t parse_sint(Parser *p) {
    bool neg = consume(p, "-");
    if (failed(p))
        return 0;
    if (p->tok->kind != TK_INT) {
        expected(p, "an integer");
        return 0;
    }
    int64_t v = p->tok->ival;
    next(p);
    return neg ? -v : v;
}

/* size T in lo..hi */
static Item *parse_size(Parser *p) {
    Item *it = new_item(p, IT_SIZE);
    next(p);
    it->name = ident(p, "a size name", &it->name_loc);
    skip_keyword(p, "in");
    it->size_lo = parse_sint(p);
    skip(p, "..");
    it->size_hi = parse_sint(p);
    return it;
}

/* ufun f[a < A, ...] in lo..hi */
static Item *parse_ufun(Parser *p) {
    Item *it = new_item(p, IT_UFUN);
    next(p);
    it->name = ident(p, "a ufun name", &it->name_loc);
    int mark = p->locals.len;
    parse_dims(p, &it->nbinds, &it->binds);
    p->locals.len = mark;
    skip_keyword(p, "in");
    it->lo = parse_expr(p);
    skip(p, "..");
    it->hi = parse_expr(p);
    return it;
}

/* input X : f32[dims], or param X : f32[dims] (an input constant across
 * runs: a model's weights) */
static Item *parse_input(Parser *p) {
    Item *it = new_item(p, IT_INPUT);
    it->param = p->tok->kind == TK_IDENT; /* the word `param`: `input` is a keyword */
    next(p);
    it->name = ident(p, "an input name", &it->name_loc);
    skip(p, ":");
    parse_type(p, &it->type);
    return it;
}

/* A, B, C: tensor names into it->args / arg_locs (an extern's arguments,
 * the names an `output` declares). */
static void parse_names(Parser *p, Item *it) {
    Vec(const char *) args = {0};
    Vec(SrcLoc) locs = {0};
    do {
        SrcLoc loc;
        const char *a = ident(p, "a tensor name", &loc);
        if (!a)
            break;
        vec_push(&args, a);
        vec_push(&locs, loc);
    } while (consume(p, ","));
    it->nargs = args.len;
    it->args = arena_memdup(p->arena, args.data, sizeof(char *) * (size_t)args.len);
    it->arg_locs = arena_memdup(p->arena, locs.data, sizeof(SrcLoc) * (size_t)locs.len);
    vec_free(&args);
    vec_free(&locs);
}

/* P : f32[dims] = extern "kernel"(A, B); the name is already consumed. */
static Item *parse_extern(Parser *p, Item *it) {
    it->kind = IT_EXTERN;
    skip(p, ":");
    parse_type(p, &it->type);
    skip(p, "=");
    skip_keyword(p, "extern");
    if (failed(p))
        return it;
    if (p->tok->kind != TK_STRING) {
        expected(p, "a kernel name string");
        return it;
    }
    it->kernel = p->tok->text;
    it->kernel_loc = p->tok->loc;
    next(p);
    skip(p, "(");
    if (!failed(p) && !is_punct(p->tok, ")"))
        parse_names(p, it);
    skip(p, ")");
    return it;
}

/* output h, y: the names after the contextual word `output`. */
static Item *parse_output(Parser *p) {
    Item *it = new_item(p, IT_OUTPUT);
    next(p);
    parse_names(p, it);
    return it;
}

/* Y[i, j < E pad 4] (: dtype)? = body, or an extern; the name is consumed. */
static Item *parse_compute(Parser *p, Item *it) {
    it->kind = IT_COMPUTE;
    int mark = p->locals.len;
    Vec(Binder) binds = {0};
    if (skip(p, "[") && !is_punct(p->tok, "]")) { /* Y[] = ...: a scalar */
        do {
            Binder b = {0};
            b.name = ident(p, "an axis name", &b.loc);
            b.named = true;
            if (!b.name)
                break;
            if (consume(p, "<"))
                b.extent = parse_expr(p);
            parse_pad(p, &b);
            vec_push(&p->locals, b.name);
            vec_push(&binds, b);
        } while (consume(p, ","));
    }
    skip(p, "]");
    it->nbinds = binds.len;
    it->binds = arena_memdup(p->arena, binds.data, sizeof(Binder) * (size_t)binds.len);
    vec_free(&binds);
    if (consume(p, ":"))
        it->dtype = ident(p, "a dtype", &it->dtype_loc);
    if (skip(p, "="))
        it->body = parse_expr(p);
    p->locals.len = mark;
    return it;
}

/* One schedule argument: identifier, (negative) integer or string, with an
 * optional `key=` in front. */
static bool parse_sched_arg(Parser *p, SchedArg *a) {
    /* keys may be keywords too: cache_read(X, "local", pad=16) */
    if ((p->tok->kind == TK_IDENT || p->tok->kind == TK_KEYWORD) && is_punct(&p->tok[1], "=")) {
        a->key = p->tok->text;
        next(p);
        next(p);
    }
    a->loc = p->tok->loc;
    bool neg = is_punct(p->tok, "-");
    if (neg)
        next(p);
    const Token *t = p->tok;
    if (t->kind == TK_INT) {
        a->kind = SA_INT;
        a->i = neg ? -t->ival : t->ival;
    } else if (t->kind == TK_IDENT && !neg) {
        a->kind = SA_IDENT;
        a->s = t->text;
    } else if (t->kind == TK_STRING && !neg) {
        a->kind = SA_STRING;
        a->s = t->text;
    } else {
        expected(p, neg ? "an integer" : "a schedule argument");
        return false;
    }
    next(p);
    return true;
}

/* A primitive's name: an identifier or the keyword `pad`. */
static const char *sched_prim_name(Parser *p) {
    if (is_keyword(p->tok, "pad")) {
        const char *name = p->tok->text;
        next(p);
        return name;
    }
    return ident(p, "a schedule primitive", NULL);
}

/* io, ii = split(i, 32)   or   vectorize(ii) */
static bool parse_sched_step(Parser *p, SchedStep *s) {
    s->loc = p->tok->loc;
    Vec(const char *) outs = {0};
    Vec(SchedArg) args = {0};
    /* `pad` is a keyword of declarations and a schedule primitive too */
    const char *first = is_keyword(p->tok, "pad") ? sched_prim_name(p)
                                                  : ident(p, "a schedule primitive", NULL);
    if (first && (is_punct(p->tok, ",") || is_punct(p->tok, "="))) {
        vec_push(&outs, first);
        while (consume(p, ",")) {
            const char *o = ident(p, "a name", NULL);
            if (!o)
                break;
            vec_push(&outs, o);
        }
        skip(p, "=");
        s->loc = p->tok->loc;
        first = sched_prim_name(p);
    }
    s->prim = first;
    if (skip(p, "(") && !is_punct(p->tok, ")")) {
        do {
            SchedArg a = {0};
            if (!parse_sched_arg(p, &a))
                break;
            vec_push(&args, a);
        } while (consume(p, ","));
    }
    skip(p, ")");
    s->nout = outs.len;
    s->outs = arena_memdup(p->arena, outs.data, sizeof(char *) * (size_t)outs.len);
    s->nargs = args.len;
    s->args = arena_memdup(p->arena, args.data, sizeof(SchedArg) * (size_t)args.len);
    vec_free(&outs);
    vec_free(&args);
    return !failed(p);
}

/* schedule Y { steps } */
static Item *parse_schedule(Parser *p) {
    Item *it = new_item(p, IT_SCHEDULE);
    next(p);
    it->name = ident(p, "the name of the tensor to schedule", &it->name_loc);
    Vec(SchedStep) steps = {0};
    if (skip(p, "{")) {
        while (!failed(p) && !is_punct(p->tok, "}")) {
            SchedStep s = {0};
            if (!parse_sched_step(p, &s))
                break;
            vec_push(&steps, s);
        }
        skip(p, "}");
    }
    it->nsteps = steps.len;
    it->steps = arena_memdup(p->arena, steps.data, sizeof(SchedStep) * (size_t)steps.len);
    vec_free(&steps);
    return it;
}

/* A contextual keyword of a structure's body: an identifier spelled `s`. */
static bool is_word(const Token *t, const char *s) {
    return t->kind == TK_IDENT && strcmp(t->text, s) == 0;
}

/* word in lo..hi */
static void parse_data_col(Parser *p, DataCol *d) {
    d->name = ident(p, "a data column name", &d->loc);
    skip_keyword(p, "in");
    if (failed(p))
        return;
    d->lo = parse_expr(p);
    skip(p, "..");
    if (!failed(p))
        d->hi = parse_expr(p);
}

/* structure T : kind(N, K) {
 *     children child, nchild
 *     roots root[s < B]                  (optional)
 *     data word in lo..hi, label in ..   (zero or more lines)
 * } */
static Item *parse_structure(Parser *p) {
    Item *it = new_item(p, IT_STRUCTURE);
    next(p);
    it->name = ident(p, "a structure name", &it->name_loc);
    skip(p, ":");
    it->skind = ident(p, "a structure kind (sequence, tree or dag)", &it->skind_loc);
    Vec(Node *) kargs = {0};
    if (skip(p, "(")) {
        do {
            Node *a = parse_expr(p);
            if (!a)
                break;
            vec_push(&kargs, a);
        } while (consume(p, ","));
        skip(p, ")");
    }
    it->nkargs = kargs.len;
    it->kargs = arena_memdup(p->arena, kargs.data, sizeof(Node *) * (size_t)kargs.len);
    vec_free(&kargs);
    skip(p, "{");
    if (!failed(p) && !is_word(p->tok, "children"))
        expected(p, "'children'");
    if (failed(p))
        return it;
    next(p);
    it->child = ident(p, "the name of the children ufun", &it->child_loc);
    skip(p, ",");
    it->nchild = ident(p, "the name of the number-of-children ufun", &it->nchild_loc);
    if (!failed(p) && is_word(p->tok, "roots")) {
        next(p);
        it->root = ident(p, "the name of the roots ufun", &it->root_loc);
        int mark = p->locals.len;
        parse_dims(p, &it->nbinds, &it->binds);
        p->locals.len = mark;
    }
    Vec(DataCol) data = {0};
    while (!failed(p) && is_word(p->tok, "data")) {
        next(p);
        do {
            DataCol d = {0};
            parse_data_col(p, &d);
            vec_push(&data, d);
        } while (!failed(p) && consume(p, ","));
    }
    it->ndata = data.len;
    it->data = arena_memdup(p->arena, data.data, sizeof(DataCol) * (size_t)data.len);
    vec_free(&data);
    if (!failed(p) && !is_punct(p->tok, "}"))
        expected(p, it->root || it->ndata ? "'data' or '}'" : "'roots', 'data' or '}'");
    skip(p, "}");
    return it;
}

/* recurse R over T { definitions }: one item, so the checker can declare
 * every member before it checks any body. */
static Item *parse_recurse(Parser *p) {
    Item *it = new_item(p, IT_RECURSE);
    next(p);
    it->name = ident(p, "a recursion name", &it->name_loc);
    skip_keyword(p, "over");
    it->over = ident(p, "a structure name", &it->over_loc);
    Vec(Item *) members = {0};
    if (skip(p, "{")) {
        while (!failed(p) && !is_punct(p->tok, "}")) {
            Item *m = new_item(p, IT_COMPUTE);
            m->name = ident(p, "a definition or '}'", &m->name_loc);
            if (!m->name)
                break;
            parse_compute(p, m);
            vec_push(&members, m);
        }
        skip(p, "}");
    }
    it->nmembers = members.len;
    it->members = arena_memdup(p->arena, members.data, sizeof(Item *) * (size_t)members.len);
    vec_free(&members);
    return it;
}

static Item *parse_item(Parser *p) {
    const Token *t = p->tok;
    if (is_keyword(t, "structure"))
        return parse_structure(p);
    if (is_keyword(t, "recurse"))
        return parse_recurse(p);
    if (is_keyword(t, "size"))
        return parse_size(p);
    if (is_keyword(t, "ufun"))
        return parse_ufun(p);
    if (is_keyword(t, "input"))
        return parse_input(p);
    if (is_keyword(t, "schedule"))
        return parse_schedule(p);
    /* `output` is a word, not a keyword (a tensor may be named output):
     * a declaration when a name follows it, as no definition starts so */
    if (is_word(t, "output") && t[1].kind == TK_IDENT)
        return parse_output(p);
    /* `param` too: `param W : f32[..]`, an input constant across runs */
    if (is_word(t, "param") && t[1].kind == TK_IDENT)
        return parse_input(p);
    /* A definition never starts with two names: the first is a misspelt
     * keyword when it is near one (`szie T in 1..4`). */
    static const char *const item_keywords[] = {"size", "ufun", "input", "param", "schedule"};
    const char *near = t->kind == TK_IDENT && t[1].kind == TK_IDENT
                           ? base_near_name(t->text, item_keywords, RV_COUNT(item_keywords))
                           : NULL;
    if (near) {
        p->st = base_diag(RV_ERR_SYNTAX, p->src, t->loc, "unknown keyword '%s'; did you mean '%s'?",
                          t->text, near);
        return NULL;
    }
    if (t->kind == TK_IDENT) {
        Item *it = new_item(p, IT_COMPUTE);
        it->name = t->text;
        it->name_loc = t->loc;
        next(p);
        if (is_punct(p->tok, ":"))
            return parse_extern(p, it);
        return parse_compute(p, it);
    }
    expected(p, "a definition (size, ufun, input, param, structure, recurse, schedule, or a "
                "tensor name)");
    return NULL;
}

struct ItemParser {
    Parser p;
};

ItemParser *lang_item_parser_new(const SrcFile *src, const Token *toks) {
    ItemParser *ip = base_xcalloc(1, sizeof *ip);
    ip->p.src = src;
    ip->p.tok = toks;
    return ip;
}

ItemParser *lang_item_parser_lex(const SrcFile *src, Lexer *lx) {
    ItemParser *ip = base_xcalloc(1, sizeof *ip);
    ip->p.src = src;
    ip->p.lx = lx;
    fill(&ip->p);
    return ip;
}

rv_status lang_parse_item(ItemParser *ip, Arena *a, Item **out) {
    Parser *p = &ip->p;
    *out = NULL;
    if (p->lx) { /* drop the tokens of the items before */
        p->win.len -= p->pos;
        memmove(p->win.data, p->win.data + p->pos, sizeof(Token) * (size_t)p->win.len);
        p->pos = 0;
        fill(p);
    }
    if (p->st != RV_OK || p->tok->kind == TK_EOF)
        return p->st;
    p->arena = a;
    Item *it = parse_item(p);
    p->arena = NULL;
    if (failed(p))
        return p->st;
    /* only has() is asked of the names: the item itself may be freed */
    if (it->kind != IT_SCHEDULE)
        declare(p, it);
    *out = it;
    return RV_OK;
}

void lang_item_parser_free(ItemParser *ip) {
    if (!ip)
        return;
    vec_free(&ip->p.locals);
    vec_free(&ip->p.win);
    strmap_free(&ip->p.globals);
    base_free(ip);
}

rv_status lang_parse(const SrcFile *src, const Token *toks, Arena *a, Program **out) {
    ItemParser *ip = lang_item_parser_new(src, toks);
    Vec(Item *) items = {0};
    Item *it;
    rv_status st;
    while ((st = lang_parse_item(ip, a, &it)) == RV_OK && it)
        vec_push(&items, it);
    lang_item_parser_free(ip);
    Program *prog = arena_alloc(a, sizeof(Program));
    prog->nitems = items.len;
    prog->items = arena_memdup(a, items.data, sizeof(Item *) * (size_t)items.len);
    vec_free(&items);
    *out = st == RV_OK ? prog : NULL;
    return st;
}
