/*
 * lang.h — the ravel language front end: the map of src/lang.
 *
 * Source text goes through three stages, one file each:
 *
 *   lex.c    text -> tokens (a flat array ending in TK_EOF), each with its
 *            file:line:col; comments and white space are dropped.
 *   parse.c  tokens -> AST: a Program is a list of Items (size, ufun,
 *            input, compute, extern, structure, recurse, schedule,
 *            output),
 *            expressions are Nodes.
 *            Recursive descent with precedence climbing for operators.
 *   check.c  AST -> IR: resolves names through a scope chain, reports
 *            user errors at the offending node, and builds the module
 *            through the ir.h constructors (which do the typing). The
 *            public entry points rv_module_parse / rv_module_load live
 *            there too.
 *
 * The front end stops at the first error (like chibicc): each stage
 * returns a status and leaves one located diagnostic in the last error.
 *
 * The AST is deliberately general so later parts of the language
 * (functions, algebraic data types, pattern matching, recursion, control
 * flow: ACROBAT's language) extend it rather than replace it: a program is
 * an item list, expressions are one Node type with a kind, binders
 * (`name < extent`) are one shape wherever they occur, and both the parser
 * and the checker keep a chain of local scopes.
 *
 * Memory: the driver (lang_parse_text) lexes, parses and checks one item
 * at a time — tokens are lexed into a window as the parser needs them,
 * and each item's AST lives in an arena freed once the item is checked —
 * so a big program holds its IR plus one item. Token texts (one copy per
 * distinct spelling), which AST names point to, live in an arena freed at
 * the end. The IR lives in the module's own arena. lang_lex and lang_parse
 * (whole arrays, whole programs) remain for tests and schedule text.
 */
#ifndef RAVEL_LANG_H
#define RAVEL_LANG_H

#include "ir/ir.h"

/* ---- lex.c ---- */

typedef enum TokenKind {
    TK_IDENT,   /* a name: [A-Za-z][A-Za-z0-9_]* (a leading '_' is reserved) */
    TK_KEYWORD, /* size ufun input in pad if then else extern schedule true false
                 * structure recurse over */
    TK_INT,     /* 123 */
    TK_FLOAT,   /* 1.5  2.  1e-3 */
    TK_STRING,  /* "matmul_nt" (text holds the decoded contents) */
    TK_PUNCT,   /* operators and brackets, text holds the spelling */
    TK_EOF,     /* end of input */
    TK_COUNT
} TokenKind;

typedef struct Token {
    TokenKind kind;
    const char *text; /* spelling (IDENT, KEYWORD, PUNCT, numbers), contents (STRING) */
    union {
        int64_t ival; /* INT */
        double fval;  /* FLOAT */
    };
    SrcLoc loc;
} Token;

typedef Vec(Token) TokenVec;

/* The lexer as a stream: each call appends the next token to *out (TK_EOF
 * at the end, again on every later call). Token texts as for lang_lex. */
typedef struct Lexer Lexer;
Lexer *lang_lexer_new(const SrcFile *src, Arena *a);
rv_status lang_lex_next(Lexer *lx, TokenVec *out);
void lang_lexer_free(Lexer *lx);

/* Splits src into tokens: the array (ending with TK_EOF) is the caller's
 * to base_free once parsed; the token texts, which the AST keeps, are
 * allocated in `a` (one copy per distinct spelling).
 * RV_ERR_SYNTAX with a located diagnostic on an unknown character, an
 * unterminated string, a reserved identifier or a malformed number. */
rv_status lang_lex(const SrcFile *src, Arena *a, Token **out, int *ntok);
/* How a token reads in "expected X, found Y" messages ("'['", "end of input"). */
const char *lang_token_desc(Arena *a, const Token *t);

/* ---- parse.c: the AST ---- */

typedef struct Node Node;

/* `name < extent pad K`: a tensor dimension, compute axis, reduce axis or
 * UF argument. Unnamed tensor dimensions get the reserved name `_<pos>`;
 * an omitted extent (compute axes only) is NULL. */
typedef struct Binder {
    const char *name;
    SrcLoc loc;
    Node *extent;
    bool has_pad; /* `pad K` was written */
    int64_t pad;
    SrcLoc pad_loc;
    bool named; /* false: the user wrote only the extent */
} Binder;

typedef enum NodeKind {
    ND_INT,    /* integer literal: ival */
    ND_FLOAT,  /* float literal: fval */
    ND_BOOL,   /* true / false: ival */
    ND_NAME,   /* a name in scope: size or axis variable */
    ND_INDEX,  /* name[args]: tensor read or UF application */
    ND_CALL,   /* name(args): math function, cast, min/max, select, ... */
    ND_UNARY,  /* op args[0] */
    ND_BINARY, /* args[0] op args[1] */
    ND_REDUCE, /* name(binds) args[0]: sum, max, min, argmax */
    ND_IF,     /* if args[0] then args[1] else args[2] */
    ND_COUNT
} NodeKind;

/* A big program is mostly Nodes, so the fields are packed (72 bytes). */
struct Node {
    NodeKind kind;
    ExprKind op;      /* UNARY, BINARY */
    SrcLoc loc;       /* the operator for UNARY/BINARY, else the first token */
    const char *name; /* NAME, INDEX, CALL, REDUCE */
    union {
        int64_t ival; /* INT, BOOL */
        double fval;  /* FLOAT */
    };
    Node **args;
    Binder *binds; /* REDUCE */
    int nargs;
    int nbinds;
    int depth; /* 1 + the deepest operand (bounded by LANG_MAX_DEPTH) */
};

/* Two bounds keep every recursive walk of an expression (the parser's
 * own, the checker's, the IR passes', the C compiler's) within its stack:
 * NESTING counts brackets, unary operators and prefix forms, the parser's
 * recursion; DEPTH counts the levels of the expression tree, which a flat
 * left-associative chain `a + b + ... + z` deepens without nesting. */
#define LANG_MAX_NESTING 1000
#define LANG_MAX_DEPTH 5000

/* A data column of a structure: `word in lo..hi`. */
typedef struct DataCol {
    const char *name;
    SrcLoc loc;
    Node *lo, *hi;
} DataCol;

/* `f32[d0, d1, ...]` */
typedef struct TypeSpec {
    const char *dtype;
    SrcLoc loc;
    int ndim;
    Binder *dims;
} TypeSpec;

typedef enum ItemKind {
    IT_SIZE,      /* size T in lo..hi */
    IT_UFUN,      /* ufun f[binds] in lo..hi */
    IT_INPUT,     /* input X : type, or param X : type (param set) */
    IT_COMPUTE,   /* Y[binds] (: dtype)? = body */
    IT_EXTERN,    /* P : type = extern "kernel"(args) */
    IT_SCHEDULE,  /* schedule Y { steps } */
    IT_STRUCTURE, /* structure T : kind(N, K) { children .. roots .. data .. } */
    IT_RECURSE,   /* recurse R over T { definitions } */
    IT_OUTPUT,    /* output h, y (names in args, arg_locs) */
    IT_COUNT
} ItemKind;

typedef struct Item {
    ItemKind kind;
    SrcLoc loc; /* the first token */
    const char *name;
    SrcLoc name_loc;
    /* SIZE */
    int64_t size_lo, size_hi;
    /* UFUN: range; UFUN, COMPUTE: binders */
    Node *lo, *hi;
    int nbinds;
    Binder *binds;
    /* INPUT, EXTERN: declared type */
    TypeSpec type;
    /* INPUT: declared with `param` (constant across runs) */
    bool param;
    /* COMPUTE: optional dtype annotation, body */
    const char *dtype;
    SrcLoc dtype_loc;
    Node *body;
    /* EXTERN: kernel and tensor arguments; OUTPUT: the names (args) */
    const char *kernel;
    SrcLoc kernel_loc;
    int nargs;
    const char **args;
    SrcLoc *arg_locs;
    /* SCHEDULE: steps as written (strings in the AST arena) */
    int nsteps;
    SchedStep *steps;
    /* STRUCTURE: kind(kargs), children, roots (binds[0] its dimension,
     * nbinds 1 when written), data columns */
    const char *skind;
    SrcLoc skind_loc;
    int nkargs;
    Node **kargs;
    const char *child, *nchild, *root;
    SrcLoc child_loc, nchild_loc, root_loc;
    int ndata;
    DataCol *data;
    /* RECURSE: the structure, the members (IT_COMPUTE items) */
    const char *over;
    SrcLoc over_loc;
    int nmembers;
    struct Item **members;
} Item;

typedef struct Program {
    int nitems;
    Item **items;
} Program;

/* Parses the tokens into a Program allocated in `a`. RV_ERR_SYNTAX with a
 * located "expected X, found Y" diagnostic on malformed input. */
rv_status lang_parse(const SrcFile *src, const Token *toks, Arena *a, Program **out);

/* The same, one item at a time: the driver checks each item and frees its
 * AST before the next is parsed, so a big program never holds more than
 * one item's AST. *out is NULL at the end of the input. */
typedef struct ItemParser ItemParser;
ItemParser *lang_item_parser_new(const SrcFile *src, const Token *toks);
/* Tokens from the lexer, as the parser needs them (the caller frees lx). */
ItemParser *lang_item_parser_lex(const SrcFile *src, Lexer *lx);
rv_status lang_parse_item(ItemParser *ip, Arena *a, Item **out);
void lang_item_parser_free(ItemParser *ip);

/* ---- check.c ---- */

/* Elaborates the program into `m` (names, arities, extents, dtypes, UF
 * domains); RV_ERR_TYPE with a located diagnostic on the first error. */
rv_status lang_check(const SrcFile *src, const Program *p, Module *m);

/* The same, one item at a time, in program order (the item may be freed
 * once checked); lang_checker_free returns the final status. */
typedef struct Checker Checker;
Checker *lang_checker_new(const SrcFile *src, Module *m);
rv_status lang_check_item(Checker *c, const Item *it);
rv_status lang_checker_free(Checker *c);
/* Lexes, parses and checks text[0..len) into a new module (rv_module_parse
 * without the C string: text[len] must be NUL, and a NUL before it is a
 * located lexical error, not the end of the program). */
rv_status lang_parse_text(const char *name, const char *text, size_t len, Module **out);
/* Appends the schedule blocks of `text` (`schedule Y { ... }`, any number,
 * nothing else), named `name` in messages, to m's schedule: a variant's
 * schedule (the compile driver). Syntax and targets are checked now, the
 * steps when the schedule is applied. */
rv_status lang_parse_schedules(Module *m, const char *name, const char *text);

/* ---- ranges.c: reads provably out of range ---- */

/* The smallest value of a - b over the declared ranges of the sizes;
 * false when a - b is not linear in sizes. */
bool lang_min_difference(const Expr *a, const Expr *b, int64_t *out);
/* May the branch of `if cond` where cond == holds skip every element at
 * which `e` (an index or extent of a read in that branch) is out of range?
 * False only when cond == holds at some element for every size value and
 * that element can be chosen apart from e's axes (ranges.c, "Conditions
 * narrow"); true when unsure. */
bool lang_guard_hides(const Expr *cond, bool holds, const Expr *e);
/* Rejects a read or UF application of compute `t` that is out of range at
 * some element for every value of the sizes (locs: Expr* -> SrcLoc* of
 * the reads, from the checker). */
rv_status lang_check_ranges(const SrcFile *src, Module *m, const Tensor *t, const PtrMap *locs);

#endif
