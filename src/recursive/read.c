/*
 * read.c — structures from text: PTB-style s-expressions and the Stanford
 * Sentiment Treebank's parent-pointer files.
 *
 * Both readers turn text into a parent array and per-node data and hand it
 * to rec_add_parents (rv_structs_add_parents with the children's order:
 * preorder for s-expressions, by first token for SST), so a tree from a
 * file goes through the same checks as one built through the API; their
 * errors get the file and line in front. Words become ids through the batch's vocabulary (structs.c).
 *
 * The s-expression parser keeps its own stack of open nodes instead of
 * recursing: a tree read from a file may be a chain thousands of nodes deep,
 * and the C stack is not the place to find that out.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "recursive/recursive.h"

/* A parse position: the text, where we are, and the line for messages. */
typedef struct {
    const char *name;
    const char *p, *end, *line_start;
    int line;
} Lex;

static void skip_space(Lex *lx) {
    while (lx->p < lx->end && isspace((unsigned char)*lx->p)) {
        if (*lx->p == '\n') {
            lx->line++;
            lx->line_start = lx->p + 1;
        }
        lx->p++;
    }
}

static rv_status lex_error(const Lex *lx, const char *what) {
    return base_error(RV_ERR_SYNTAX, "%s:%d:%d: %s", lx->name, lx->line,
                      (int)(lx->p - lx->line_start) + 1, what);
}

/* An atom: a run of characters that are neither space nor parentheses. */
static size_t atom_length(const Lex *lx) {
    const char *q = lx->p;
    while (q < lx->end && !isspace((unsigned char)*q) && *q != '(' && *q != ')')
        q++;
    return (size_t)(q - lx->p);
}

/* Scratch of one tree: parent, label and word id per node in preorder
 * (s-expressions) or in the file's numbering (SST; with `first` and
 * `order`, below). */
typedef struct {
    Vec(int32_t) parent, label, word, open, data, first, order;
} Tree;

static void tree_free(Tree *t) {
    vec_free(&t->parent);
    vec_free(&t->label);
    vec_free(&t->word);
    vec_free(&t->open);
    vec_free(&t->data);
    vec_free(&t->first);
    vec_free(&t->order);
}

/* Data rows: column 0 the word id (-1 inside), column 1 the label (-1
 * where absent), the rest -1. */
static const int32_t *tree_data(Tree *t, int width, const int32_t *label) {
    int32_t n = t->parent.len;
    t->data.len = 0;
    for (int32_t i = 0; i < n; i++)
        for (int c = 0; c < width; c++)
            vec_push(&t->data, c == 0 ? t->word.data[i] : c == 1 && label ? label[i] : -1);
    return t->data.data;
}

/* Adds the structure, each node's children in `order` (NULL: index
 * order), and puts "name:line: " before a refusal. */
static rv_status add_tree(rv_structs *bs, Tree *t, const int32_t *label, const int32_t *order,
                          const char *name, int line) {
    const int32_t *data = tree_data(t, bs->width, label);
    rv_status st = rec_add_parents(bs, t->parent.len, t->parent.data, order, data);
    if (st != RV_OK)
        return base_error(st, "%s:%d: %s", name, line, rv_last_error());
    return RV_OK;
}

/* One s-expression from lx->p; `(LABEL WORD)` or `(LABEL TREE...)`. */
static rv_status parse_sexpr(rv_structs *bs, Lex *lx, Tree *t) {
    int first_line = lx->line;
    t->parent.len = t->label.len = t->word.len = t->open.len = 0;
    skip_space(lx);
    if (lx->p == lx->end)
        return lex_error(lx, "expected '(' to begin a tree, found the end of the text");
    do {
        if (*lx->p == '(') {
            lx->p++;
            skip_space(lx);
            size_t n = atom_length(lx);
            if (n == 0)
                return lex_error(lx, "expected a label (an integer) after '('");
            char *endp;
            errno = 0;
            long v = strtol(lx->p, &endp, 10);
            if (endp != lx->p + n || errno || v < INT32_MIN || v > INT32_MAX)
                return lex_error(lx, "the label is not an integer");
            if (t->parent.len == INT32_MAX - 1)
                return lex_error(lx, "too many nodes");
            vec_push(&t->parent, t->open.len ? vec_last(&t->open) : -1);
            vec_push(&t->label, (int32_t)v);
            vec_push(&t->word, -1);
            vec_push(&t->open, t->parent.len - 1);
            lx->p += n;
            skip_space(lx);
            n = atom_length(lx);
            if (n > 0) { /* a leaf: (LABEL WORD) */
                vec_last(&t->word) = rec_word_id(bs, lx->p, n);
                lx->p += n;
                skip_space(lx);
                if (lx->p == lx->end || *lx->p != ')')
                    return lex_error(lx, "expected ')' after the word of a leaf");
            } else if (lx->p < lx->end && *lx->p == ')') {
                return lex_error(lx, "a node needs a word or subtrees");
            }
        } else if (*lx->p == ')') {
            if (!t->open.len)
                return lex_error(lx, "')' without a matching '('");
            t->open.len--;
            lx->p++;
        } else {
            return lex_error(lx, t->open.len ? "a word after subtrees (a leaf is (LABEL WORD))"
                                             : "expected '(' to begin a tree");
        }
        skip_space(lx);
        if (t->open.len && lx->p == lx->end)
            return lex_error(lx, "the text ends inside a tree (missing ')')");
    } while (t->open.len);
    if (lx->p != lx->end)
        return lex_error(lx, "text after the end of the tree");
    return add_tree(bs, t, t->label.data, NULL, lx->name, first_line); /* preorder: left first */
}

rv_status rv_structs_add_sexpr(rv_structs *bs, const char *name, const char *text) {
    if (!bs || !text)
        return base_error(RV_ERR_ARG, "%s: no batch or no text (NULL)", __func__);
    Lex lx = {name ? name : "<sexpr>", text, text + strlen(text), text, 1};
    Tree t = {0};
    rv_status st = parse_sexpr(bs, &lx, &t);
    tree_free(&t);
    return st;
}

rv_status rv_structs_read_sexpr_file(rv_structs *bs, const char *path) {
    if (!bs || !path)
        return base_error(RV_ERR_ARG, "%s: no batch or no path (NULL)", __func__);
    char *text;
    size_t len;
    rv_status st = base_read_file(path, &text, &len);
    if (st != RV_OK)
        return st;
    Tree t = {0};
    int count = rv_structs_count(bs);
    const char *p = text, *end = text + len;
    for (int line = 1; p < end && st == RV_OK; line++) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        const char *q = p;
        while (q < eol && isspace((unsigned char)*q))
            q++;
        if (q < eol) {
            Lex lx = {path, p, eol, p, line};
            st = parse_sexpr(bs, &lx, &t);
        }
        p = eol + 1;
    }
    if (st != RV_OK)
        rec_truncate(bs, count);
    tree_free(&t);
    base_free(text);
    return st;
}

/* The next line of a file's text, without its newline (and '\r'); false
 * at the end. */
static bool next_line(const char **p, const char *end, const char **s, size_t *n) {
    if (*p >= end)
        return false;
    const char *eol = memchr(*p, '\n', (size_t)(end - *p));
    if (!eol)
        eol = end;
    *s = *p;
    *n = (size_t)(eol - *p);
    if (*n && (*s)[*n - 1] == '\r')
        (*n)--;
    *p = eol + 1;
    return true;
}

/* The three files of the treebank, read whole. */
typedef struct {
    char *tree, *tokens, *split;
    size_t tree_len, tokens_len, split_len;
    char tree_path[4096], tokens_path[4096], split_path[4096];
} SstFiles;

static rv_status sst_open(SstFiles *f, const char *dir) {
    snprintf(f->tree_path, sizeof f->tree_path, "%s/STree.txt", dir);
    snprintf(f->tokens_path, sizeof f->tokens_path, "%s/SOStr.txt", dir);
    snprintf(f->split_path, sizeof f->split_path, "%s/datasetSplit.txt", dir);
    rv_status st = base_read_file(f->tree_path, &f->tree, &f->tree_len);
    if (st == RV_OK)
        st = base_read_file(f->tokens_path, &f->tokens, &f->tokens_len);
    if (st == RV_OK)
        st = base_read_file(f->split_path, &f->split, &f->split_len);
    return st;
}

typedef Vec(int8_t) SplitVec;

/* The split of each sentence, in order, from "index,label" lines after a
 * header; indices must run 1, 2, ... */
static rv_status sst_splits(const SstFiles *f, SplitVec *out) {
    const char *p = f->split, *end = f->split + f->split_len, *s;
    size_t n;
    if (!next_line(&p, end, &s, &n))
        return base_error(RV_ERR_IO, "%s: empty file", f->split_path);
    for (int line = 2; next_line(&p, end, &s, &n); line++) {
        if (n == 0)
            continue;
        long idx, label;
        char tail;
        char buf[64];
        if (n >= sizeof buf ||
            (memcpy(buf, s, n), buf[n] = 0, sscanf(buf, "%ld,%ld%c", &idx, &label, &tail) != 2) ||
            idx != out->len + 1 || label < 1 || label > 3)
            return base_error(RV_ERR_IO,
                              "%s:%d: expected 'sentence,split' with sentence %d and split 1, 2 "
                              "or 3",
                              f->split_path, line, out->len + 1);
        vec_push(out, (int8_t)label);
    }
    return RV_OK;
}

/* The nodes of an SST tree in the order of the first token each covers
 * (ties: index order), so that a node's children, listed in this order, are
 * left before right. Parent pointers alone do not say it, and the numbering
 * of internal nodes does not follow the text: a node's right child may be a
 * token numbered below its left child, an internal node (most trees of the
 * test split have such a node). Only MV-RNN and TreeFC tell the two apart,
 * but every tree must mean the sentence. Parents outside the tree and
 * cycles are left to the checks of rec_add_parents: here they only stop
 * a walk. */
static const int32_t *sst_order(Tree *t, int32_t ntok) {
    int32_t n = t->parent.len;
    t->first.len = t->order.len = 0;
    for (int32_t i = 0; i < n; i++)
        vec_push(&t->first, ntok); /* covers no token: last */
    /* Tokens in sentence order, each walking up until a node an earlier
     * token reached: every node is visited once, with its first token. */
    for (int32_t k = 0; k < ntok; k++)
        for (int32_t v = k, steps = 0; v >= 0 && v < n && t->first.data[v] == ntok && steps <= n;
             v = t->parent.data[v], steps++)
            t->first.data[v] = k;
    /* Counting sort by first token, stable. */
    Vec(int32_t) count = {0};
    for (int32_t k = 0; k <= ntok + 1; k++)
        vec_push(&count, 0);
    for (int32_t i = 0; i < n; i++)
        count.data[t->first.data[i] + 1]++;
    for (int32_t k = 0; k <= ntok; k++)
        count.data[k + 1] += count.data[k];
    for (int32_t i = 0; i < n; i++)
        vec_push(&t->order, 0);
    for (int32_t i = 0; i < n; i++)
        t->order.data[count.data[t->first.data[i]]++] = i;
    vec_free(&count);
    return t->order.data;
}

/* One sentence: its tokens (interned whether or not the sentence is kept)
 * and, when kept, its tree. */
static rv_status sst_sentence(rv_structs *bs, const SstFiles *f, int line, const char *tok,
                              size_t tok_len, const char *tree, size_t tree_len, bool keep,
                              Tree *t) {
    t->word.len = 0;
    for (size_t i = 0, b = 0; i <= tok_len; i++)
        if (i == tok_len || tok[i] == '|') {
            if (i == b)
                return base_error(RV_ERR_IO, "%s:%d: an empty token", f->tokens_path, line);
            vec_push(&t->word, rec_word_id(bs, tok + b, i - b));
            b = i + 1;
        }
    if (!keep)
        return RV_OK;
    int32_t ntok = t->word.len;
    t->parent.len = 0;
    const char *p = tree, *end = tree + tree_len;
    while (p < end) {
        char *endp;
        errno = 0;
        long v = strtol(p, &endp, 10);
        if (endp == p || errno || v < 0 || v > INT32_MAX - 1 || (endp < end && *endp != '|'))
            return base_error(RV_ERR_IO,
                              "%s:%d: expected parent pointers (integers >= 0) separated by '|'",
                              f->tree_path, line);
        vec_push(&t->parent, (int32_t)v - 1);
        p = endp + 1;
    }
    int32_t n = t->parent.len;
    if (n < ntok)
        return base_error(RV_ERR_IO, "%s:%d: %d nodes for the %d tokens of %s:%d", f->tree_path,
                          line, (int)n, (int)ntok, f->tokens_path, line);
    for (int32_t i = 0; i < n; i++)
        if (t->parent.data[i] >= 0 && t->parent.data[i] < ntok)
            return base_error(RV_ERR_IO,
                              "%s:%d: node %d's parent is node %d, a token (tokens are the "
                              "leaves 1..%d)",
                              f->tree_path, line, (int)i + 1, (int)t->parent.data[i] + 1,
                              (int)ntok);
    while (t->word.len < n) /* internal nodes have no word */
        vec_push(&t->word, -1);
    return add_tree(bs, t, NULL, sst_order(t, ntok), f->tree_path, line);
}

rv_status rv_structs_read_sst(rv_structs *bs, const char *dir, rv_sst_split split) {
    if (!bs || !dir)
        return base_error(RV_ERR_ARG, "%s: no batch or no dir (NULL)", __func__);
    if ((int)split < RV_SST_ALL || split > RV_SST_DEV)
        return base_error(RV_ERR_ARG, "rv_structs_read_sst: unknown split %d", (int)split);
    SstFiles f = {0};
    SplitVec splits = {0};
    int count = rv_structs_count(bs);
    Tree t = {0};
    rv_status st = sst_open(&f, dir);
    if (st == RV_OK)
        st = sst_splits(&f, &splits);
    const char *tp = f.tree, *tend = f.tree + f.tree_len, *kp = f.tokens,
               *kend = f.tokens + f.tokens_len;
    int line = 1;
    for (; st == RV_OK; line++) {
        const char *ts, *ks;
        size_t tn, kn;
        bool more_tree = next_line(&tp, tend, &ts, &tn), more_tok = next_line(&kp, kend, &ks, &kn);
        if (!more_tree && !more_tok)
            break;
        if (more_tree != more_tok || line > splits.len)
            st = base_error(RV_ERR_IO, "%s, %s and %s disagree on the number of sentences (at %d)",
                            f.tree_path, f.tokens_path, f.split_path, line);
        else
            st = sst_sentence(bs, &f, line, ks, kn, ts, tn,
                              split == RV_SST_ALL || splits.data[line - 1] == (int8_t)split, &t);
    }
    if (st == RV_OK && line - 1 != splits.len)
        st = base_error(RV_ERR_IO, "%s lists %d sentences, %s has %d", f.split_path, splits.len,
                        f.tree_path, line - 1);
    if (st != RV_OK)
        rec_truncate(bs, count);
    tree_free(&t);
    vec_free(&splits);
    base_free(f.tree);
    base_free(f.tokens);
    base_free(f.split);
    return st;
}
