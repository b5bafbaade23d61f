/*
 * near.c — "did you mean": the known name nearest to a misspelt one.
 *
 * Every place that rejects an unknown name (the command line's commands,
 * options and --size/--input names, the checker's undefined names and
 * keywords, the schedule checker's primitives, loops and stages) offers
 * the nearest candidate through base_near_name, so they all agree on what
 * counts as near.
 *
 * The distance is the optimal string alignment distance (Levenshtein plus
 * the transposition of two adjacent characters, the commonest typo:
 * "szie" is one edit from "size"). A candidate is near when it is at most
 * two edits away and the edits change at most half of the longer name, so
 * one-letter names do not all suggest each other ('j' is not "near" 'i');
 * a name that differs only in case is nearest of all ('t' for 'T').
 */
#include <strings.h>

#include "base/base.h"

enum { NEAR_MAX = 63 }; /* longer names are never near anything */

int base_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > NEAR_MAX || lb > NEAR_MAX)
        return NEAR_MAX + 1;
    /* d[i][j]: distance of a's first i characters to b's first j */
    int d[NEAR_MAX + 1][NEAR_MAX + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

const char *base_near_name(const char *name, const char *const *cands, int n) {
    const char *near = NULL;
    int best = 3;
    size_t ln = strlen(name);
    for (int i = 0; i < n; i++) {
        if (!cands[i] || strcmp(cands[i], name) == 0)
            continue;
        if (strcasecmp(cands[i], name) == 0)
            return cands[i]; /* 't' for 'T' */
        int d = base_edit_distance(name, cands[i]);
        size_t lc = strlen(cands[i]), longer = ln > lc ? ln : lc;
        if (d < best && (size_t)d * 2 <= longer) {
            best = d;
            near = cands[i];
        }
    }
    return near;
}

void base_near_hint(Buf *b, const char *name, const char *const *cands, int n) {
    const char *near = base_near_name(name, cands, n);
    if (near)
        buf_printf(b, "; did you mean '%s'?", near);
}
