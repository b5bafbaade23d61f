/*
 * recursive.h — the recursive layer's map (Cortex): pointer-linked inputs
 * (sequences, trees, DAGs) and the linearizer that turns a batch of them
 * into the integer arrays recursive kernels read. It uses base only; the
 * public side is the rv_structs / rv_linear part of ravel.h.
 */
#ifndef RAVEL_RECURSIVE_H
#define RAVEL_RECURSIVE_H

#include "base/base.h"

/* A batch of structures. Nodes of all structures are stored once, in
 * structure order ("batch nodes"); children lists are compressed rows of
 * structure-local indices. Each node's level (0 for a leaf, else 1 + the
 * largest of its children's) is computed when the structure is checked, so
 * the linearizer needs no traversal of its own. */
struct rv_structs {
    rv_struct_kind kind;
    int max_children, width;
    Vec(int32_t) node_begin;  /* [B + 1]: structure s is nodes node_begin[s] .. node_begin[s+1]-1 */
    Vec(int32_t) root;        /* [B]: structure-local index of the root */
    Vec(int32_t) child_begin; /* [N + 1]: node g's children are child[child_begin[g] ..] */
    Vec(int32_t) child;       /* structure-local child indices */
    Vec(int32_t) data;        /* [N * width] */
    Vec(int32_t) level;       /* [N] */
    Vec(int32_t) level_count; /* nodes of each level over the whole batch */
    /* vocabulary of the readers: interned word -> id + 1 */
    Interner words;
    StrMap word_id;
    Vec(const char *) word;
    /* scratch of the checks, reused across structures */
    Vec(int32_t) parent, stack_node, stack_next, tmp_begin, tmp_child;
    Vec(uint8_t) state;
};

/* Grows v's capacity to at least n elements (len unchanged). */
#define rec_vec_reserve(v, n)                                                                      \
    do {                                                                                           \
        if ((v)->cap < (n)) {                                                                      \
            (v)->cap = (n) > 2 * (v)->cap ? (n) : 2 * (v)->cap;                                    \
            (v)->data = base_xrealloc((v)->data, sizeof(*(v)->data) * (size_t)(v)->cap);           \
        }                                                                                          \
    } while (0)

/* structs.c */
/* The id of the word s[0..n), added to the vocabulary if new. */
int32_t rec_word_id(rv_structs *bs, const char *s, size_t n);
/* Drops the structures from `count` on (a reader undoing a partial file). */
void rec_truncate(rv_structs *bs, int count);
/* rv_structs_add_parents with each node's children in the order the nodes
 * appear in `order` (a permutation of 0..n-1; NULL: index order). */
rv_status rec_add_parents(rv_structs *bs, int32_t n, const int32_t *parent, const int32_t *order,
                          const int32_t *data);

/* linearize.c */
/* The unrolled partition (ravel.h, rv_linear) of N linearized nodes:
 * node n's children are child[start[n] + k] (start NULL: child[n * K + k]),
 * k < nchild[n]. Writes begin and count (the batches' lengths; room for
 * the levels' count), node [N] and uses s [N] as scratch; returns the
 * number of unrolled batches, 0 when a node has two parents (a DAG). */
int32_t rec_unroll_partition(int32_t N, int32_t K, const int32_t *start, const int32_t *child,
                             const int32_t *nchild, int32_t *begin, int32_t *count,
                             int32_t *node, int32_t *s);

#endif
