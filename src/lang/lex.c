/*
 * lex.c — the ravel lexer: source text to an array of tokens.
 *
 * The language is free-form: newlines are white space like any other, and
 * `#` starts a comment that runs to the end of the line. Tokens are
 *
 *   identifiers  [A-Za-z][A-Za-z0-9_]*   (names beginning with '_' are
 *                reserved for the compiler: unnamed dimensions are called
 *                `_0`, `_1`, ... so the user must not be able to write them)
 *   keywords     size ufun input in pad if then else extern schedule
 *                true false structure recurse over
 *   integers     [0-9]+, as int64 (an overflow is an error)
 *   floats       [0-9]+ '.' [0-9]* exponent? | [0-9]+ exponent, where
 *                exponent = [eE][+-]?[0-9]+. "1..128" is the integer 1
 *                followed by "..": a '.' directly followed by another '.'
 *                never belongs to a number.
 *   strings      "..." with the escapes \" \\ \n \t; no newline inside
 *   punctuators  .. == != <= >= && || + - * / % < > ! = ( ) [ ] { } , :
 *
 * A UTF-8 byte-order mark at the start of the file is skipped (editors
 * write one). A NUL byte before the end of the text is an error: C string
 * handling would otherwise silently cut the file there.
 *
 * The whole file is tokenized up front (chibicc does the same), so the
 * parser can look ahead freely — it needs two tokens of lookahead to tell
 * a reduction `max(k < K) ...` from a call `max(a, b)`.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lang/lang.h"

static const char *const keywords[] = {
    "size",   "ufun",     "input", "in",    "pad",       "if",      "then", "else",
    "extern", "schedule", "true",  "false", "structure", "recurse", "over",
};

/* Two-character punctuators first, so "<=" wins over "<". */
static const char *const puncts[] = {
    "..", "==", "!=", "<=", ">=", "&&", "||", "+", "-", "*", "/", "%",
    "<",  ">",  "!",  "=",  "(",  ")",  "[",  "]", "{", "}", ",", ":",
};

struct Lexer {
    const SrcFile *src;
    Arena *arena;
    const char *p;          /* current position */
    const char *line_start; /* start of the current line, for columns */
    int line;
    TokenVec *toks;   /* where lang_lex_next appends */
    StrMap spellings; /* one copy of each identifier and number in `arena` */
};

static SrcLoc loc_at(const Lexer *lx, const char *p) {
    SrcLoc loc = {lx->src->name, lx->line, (int)(p - lx->line_start) + 1};
    return loc;
}

static rv_status lex_error(const Lexer *lx, const char *p, const char *msg) {
    return base_diag(RV_ERR_SYNTAX, lx->src, loc_at(lx, p), "%s", msg);
}

/* Is p the terminating NUL (rather than a NUL byte inside the text)? */
static bool at_end(const Lexer *lx, const char *p) {
    return p == lx->src->text + lx->src->len;
}

static rv_status nul_error(const Lexer *lx, const char *p) {
    return lex_error(lx, p, "NUL byte in the source (not a text file?)");
}

static bool is_ident_char(char c) {
    return isalnum((unsigned char)c) || c == '_';
}

/* Appends a token spelled `text` (a static or arena string). */
static void push_text(Lexer *lx, TokenKind k, const char *text, const char *start) {
    Token t = {0};
    t.kind = k;
    t.text = text;
    t.loc = loc_at(lx, start);
    vec_push(lx->toks, t);
}

/* Appends a token spelled by source[start, end). A big program repeats
 * few spellings, so each is copied once: token texts cost memory in the
 * number of distinct names, not of tokens. */
static void push(Lexer *lx, TokenKind k, const char *start, const char *end) {
    size_t n = (size_t)(end - start);
    const char *text = strmap_key_n(&lx->spellings, start, n);
    if (!text) {
        char *copy = arena_strndup(lx->arena, start, n);
        strmap_put(&lx->spellings, copy, copy);
        text = copy;
    }
    push_text(lx, k, text, start);
}

/* Skips spaces, newlines and comments, keeping the line count. */
static void skip_space(Lexer *lx) {
    for (;;) {
        char c = *lx->p;
        if (c == '\n') {
            lx->p++;
            lx->line++;
            lx->line_start = lx->p;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            lx->p++;
        } else if (c == '#') {
            while (*lx->p && *lx->p != '\n')
                lx->p++;
        } else {
            return;
        }
    }
}

/* A number: an integer unless it has a fraction or an exponent. */
static rv_status lex_number(Lexer *lx) {
    const char *start = lx->p, *q = lx->p;
    bool is_float = false;
    while (isdigit((unsigned char)*q))
        q++;
    if (q[0] == '.' && q[1] != '.') {
        is_float = true;
        q++;
        while (isdigit((unsigned char)*q))
            q++;
    }
    if (*q == 'e' || *q == 'E') {
        const char *e = q + 1;
        if (*e == '+' || *e == '-')
            e++;
        if (!isdigit((unsigned char)*e))
            return lex_error(lx, start, "malformed number: exponent without digits");
        while (isdigit((unsigned char)*e))
            e++;
        q = e;
        is_float = true;
    }
    if (is_ident_char(*q))
        return lex_error(lx, start, "malformed number: a letter follows the digits");
    push(lx, is_float ? TK_FLOAT : TK_INT, start, q);
    Token *t = &vec_last(lx->toks);
    errno = 0;
    if (is_float) {
        t->fval = strtod(t->text, NULL);
    } else {
        unsigned long long v = strtoull(t->text, NULL, 10);
        if (errno == ERANGE || v > (unsigned long long)INT64_MAX)
            return lex_error(lx, start, "integer literal is too large");
        t->ival = (int64_t)v;
    }
    lx->p = q;
    return RV_OK;
}

/* A string literal; the token's text is the decoded contents. */
static rv_status lex_string(Lexer *lx) {
    const char *start = lx->p;
    Buf b = {0};
    const char *q = start + 1;
    for (; *q != '"'; q++) {
        if (*q == '\0' && !at_end(lx, q)) {
            buf_free(&b);
            return nul_error(lx, q);
        }
        if (*q == '\0' || *q == '\n') {
            buf_free(&b);
            return lex_error(lx, start, "unterminated string");
        }
        if (*q == '\\') {
            q++;
            switch (*q) {
            case '"':
            case '\\':
                buf_putc(&b, *q);
                continue;
            case 'n':
                buf_putc(&b, '\n');
                continue;
            case 't':
                buf_putc(&b, '\t');
                continue;
            default:
                buf_free(&b);
                return lex_error(lx, q - 1, "unknown escape sequence in string");
            }
        }
        buf_putc(&b, *q);
    }
    push_text(lx, TK_STRING, arena_strdup(lx->arena, buf_str(&b)), start);
    buf_free(&b);
    lx->p = q + 1;
    return RV_OK;
}

/* An identifier or keyword. */
static rv_status lex_word(Lexer *lx) {
    const char *start = lx->p, *q = lx->p;
    while (is_ident_char(*q))
        q++;
    if (*start == '_') {
        char *name = arena_strndup(lx->arena, start, (size_t)(q - start));
        return base_diag(RV_ERR_SYNTAX, lx->src, loc_at(lx, start),
                         "reserved identifier '%s': names beginning with '_' belong to the "
                         "compiler",
                         name);
    }
    size_t n = (size_t)(q - start);
    lx->p = q;
    for (int i = 0; i < RV_COUNT(keywords); i++)
        if (strlen(keywords[i]) == n && memcmp(start, keywords[i], n) == 0) {
            push_text(lx, TK_KEYWORD, keywords[i], start);
            return RV_OK;
        }
    push(lx, TK_IDENT, start, q);
    return RV_OK;
}

static rv_status lex_punct(Lexer *lx) {
    for (int i = 0; i < RV_COUNT(puncts); i++) {
        size_t n = strlen(puncts[i]);
        if (strncmp(lx->p, puncts[i], n) == 0) {
            push_text(lx, TK_PUNCT, puncts[i], lx->p);
            lx->p += n;
            return RV_OK;
        }
    }
    unsigned char c = (unsigned char)*lx->p;
    if (isprint(c))
        return base_diag(RV_ERR_SYNTAX, lx->src, loc_at(lx, lx->p), "unknown character '%c'", c);
    return base_diag(RV_ERR_SYNTAX, lx->src, loc_at(lx, lx->p), "unknown character 0x%02x", c);
}

Lexer *lang_lexer_new(const SrcFile *src, Arena *a) {
    Lexer *lx = base_xcalloc(1, sizeof *lx);
    lx->src = src;
    lx->arena = a;
    lx->p = lx->line_start = src->text;
    lx->line = 1;
    if (src->len >= 3 && memcmp(src->text, "\xEF\xBB\xBF", 3) == 0)
        lx->p = lx->line_start = src->text + 3;
    return lx;
}

rv_status lang_lex_next(Lexer *lx, TokenVec *out) {
    lx->toks = out;
    skip_space(lx);
    char c = *lx->p;
    if (c == '\0' && at_end(lx, lx->p)) {
        push_text(lx, TK_EOF, "", lx->p);
        return RV_OK;
    }
    if (c == '\0')
        return nul_error(lx, lx->p);
    if (isdigit((unsigned char)c))
        return lex_number(lx);
    if (c == '"')
        return lex_string(lx);
    if (isalpha((unsigned char)c) || c == '_')
        return lex_word(lx);
    return lex_punct(lx);
}

void lang_lexer_free(Lexer *lx) {
    if (!lx)
        return;
    strmap_free(&lx->spellings);
    base_free(lx);
}

rv_status lang_lex(const SrcFile *src, Arena *a, Token **out, int *ntok) {
    Lexer *lx = lang_lexer_new(src, a);
    TokenVec toks = {0};
    rv_status st;
    *out = NULL;
    *ntok = 0;
    do
        st = lang_lex_next(lx, &toks);
    while (st == RV_OK && vec_last(&toks).kind != TK_EOF);
    lang_lexer_free(lx);
    if (st != RV_OK) {
        vec_free(&toks);
        return st;
    }
    *ntok = toks.len;
    /* handed over, trimmed to size; the caller frees it once parsed */
    *out = base_xrealloc(toks.data, sizeof(Token) * (size_t)toks.len);
    return RV_OK;
}

const char *lang_token_desc(Arena *a, const Token *t) {
    switch (t->kind) {
    case TK_EOF:
        return "end of input";
    case TK_STRING:
        return arena_printf(a, "string \"%s\"", t->text);
    default:
        return arena_printf(a, "'%s'", t->text);
    }
}
