/*
 * structs.c — batches of pointer-linked structures, checked on the way in.
 *
 * A recursive kernel trusts the arrays it reads: a child index out of range
 * is an out-of-bounds read, a cycle a read of a state never computed, a
 * second parent in a tree a state counted twice. So every structure is
 * checked completely when it is added, and refused with a message naming
 * the structure (its index in the batch) and the offending node; the batch
 * is left exactly as it was. A structure listed in a topological order
 * (children before parents, or parents first: nearly every input) is
 * checked and given its levels (0 for a leaf, else 1 + the largest level of
 * its children; all the linearizer needs, linearize.c) in one pass over
 * its children lists (check_in_order); any other, and any with an error,
 * then goes through the general checks, which name the error: one pass
 * over the lists (ranges, K, duplicates, parents) and one iterative
 * depth-first traversal (cycles), whose postorder gives the levels.
 *
 * Every structure has exactly one root: the node no other node lists as a
 * child, whose state is the structure's result. A DAG with several roots is
 * refused like a forest: each part has its own result, so each part is its
 * own structure. That covers disconnected DAGs (every part has a root).
 *
 * All structures share one array of nodes ("batch nodes", in structure
 * order) and one compressed array of children (structure-local indices),
 * so adding a structure appends to a few arrays and allocates nothing once
 * they have grown; the scratch arrays of the checks are kept for the same
 * reason (a server builds a batch per request).
 */
#include <limits.h>
#include <stdlib.h>

#include "recursive/recursive.h"

rv_structs *rv_structs_new(rv_struct_kind kind, int max_children, int width) {
    if ((int)kind < 0 || kind >= RV_STRUCT_KIND_COUNT) {
        base_error(RV_ERR_ARG, "rv_structs_new: unknown structure kind %d", (int)kind);
        return NULL;
    }
    if (max_children < 1 || max_children > 1 << 16) {
        base_error(RV_ERR_ARG, "rv_structs_new: the number of children K = %d is outside 1..65536",
                   max_children);
        return NULL;
    }
    if (kind == RV_STRUCT_SEQUENCE && max_children != 1) {
        base_error(RV_ERR_ARG, "rv_structs_new: a sequence has K = 1 child per node, not %d",
                   max_children);
        return NULL;
    }
    if (width < 0 || width > 1 << 16) {
        base_error(RV_ERR_ARG, "rv_structs_new: the data width %d is outside 0..65536", width);
        return NULL;
    }
    rv_structs *bs = base_xcalloc(1, sizeof *bs);
    bs->kind = kind;
    bs->max_children = max_children;
    bs->width = width;
    interner_init(&bs->words);
    vec_push(&bs->node_begin, 0);
    vec_push(&bs->child_begin, 0);
    /* never NULL, so the accessors' pointer arithmetic is defined even for
     * a batch without edges or data */
    rec_vec_reserve(&bs->child, 8);
    rec_vec_reserve(&bs->data, 8);
    return bs;
}

void rv_structs_free(rv_structs *bs) {
    if (!bs)
        return;
    vec_free(&bs->node_begin);
    vec_free(&bs->root);
    vec_free(&bs->child_begin);
    vec_free(&bs->child);
    vec_free(&bs->data);
    vec_free(&bs->level);
    vec_free(&bs->level_count);
    interner_free(&bs->words);
    strmap_free(&bs->word_id);
    vec_free(&bs->word);
    vec_free(&bs->parent);
    vec_free(&bs->stack_node);
    vec_free(&bs->stack_next);
    vec_free(&bs->tmp_begin);
    vec_free(&bs->tmp_child);
    vec_free(&bs->state);
    base_free(bs);
}

void rec_truncate(rv_structs *bs, int count) {
    RV_ASSERT(count >= 0 && count <= bs->root.len);
    int32_t nodes = bs->node_begin.data[count];
    for (int32_t g = nodes; g < bs->level.len; g++)
        bs->level_count.data[bs->level.data[g]]--;
    while (bs->level_count.len && vec_last(&bs->level_count) == 0)
        bs->level_count.len--;
    bs->node_begin.len = count + 1;
    bs->root.len = count;
    bs->child_begin.len = nodes + 1;
    bs->child.len = bs->child_begin.data[nodes];
    bs->data.len = nodes * bs->width;
    bs->level.len = nodes;
}

/* rec_truncate(bs, 0) without its walk over the nodes to take them off
 * the level counts: none is left (a server clears per request). */
void rv_structs_clear(rv_structs *bs) {
    bs->node_begin.len = bs->child_begin.len = 1;
    bs->root.len = bs->child.len = bs->data.len = 0;
    bs->level.len = bs->level_count.len = 0;
}

rv_struct_kind rv_structs_kind(const rv_structs *bs) {
    return bs->kind;
}
int rv_structs_max_children(const rv_structs *bs) {
    return bs->max_children;
}
int rv_structs_width(const rv_structs *bs) {
    return bs->width;
}
int rv_structs_count(const rv_structs *bs) {
    return bs->root.len;
}
int32_t rv_structs_num_nodes(const rv_structs *bs) {
    return vec_last(&bs->node_begin);
}

int32_t rv_structs_node_begin(const rv_structs *bs, int s) {
    RV_ASSERT(s >= 0 && s <= bs->root.len);
    return bs->node_begin.data[s];
}

int32_t rv_structs_size(const rv_structs *bs, int s) {
    RV_ASSERT(s >= 0 && s < bs->root.len);
    return bs->node_begin.data[s + 1] - bs->node_begin.data[s];
}

int rv_structs_children(const rv_structs *bs, int s, int32_t i, const int32_t **child) {
    RV_ASSERT(i >= 0 && i < rv_structs_size(bs, s));
    int32_t g = bs->node_begin.data[s] + i;
    *child = bs->child.data + bs->child_begin.data[g];
    return bs->child_begin.data[g + 1] - bs->child_begin.data[g];
}

const int32_t *rv_structs_data(const rv_structs *bs, int s, int32_t i) {
    RV_ASSERT(i >= 0 && i < rv_structs_size(bs, s));
    return bs->data.data + (size_t)(bs->node_begin.data[s] + i) * (size_t)bs->width;
}

int32_t rv_structs_root(const rv_structs *bs, int s) {
    RV_ASSERT(s >= 0 && s < bs->root.len);
    return bs->root.data[s];
}

int32_t rv_structs_vocab_size(const rv_structs *bs) {
    return bs->word.len;
}

const char *rv_structs_word(const rv_structs *bs, int32_t id) {
    return id >= 0 && id < bs->word.len ? bs->word.data[id] : NULL;
}

int32_t rec_word_id(rv_structs *bs, const char *s, size_t n) {
    const char *w = intern_n(&bs->words, s, n);
    intptr_t id = (intptr_t)strmap_get(&bs->word_id, w);
    if (id)
        return (int32_t)(id - 1);
    vec_push(&bs->word, w);
    strmap_put(&bs->word_id, w, (void *)(intptr_t)bs->word.len);
    return bs->word.len - 1;
}

/* A cycle found by the traversal: the nodes on the stack from `c` up to
 * the top, then `c` again ("3 -> 7 -> 3"), at most 8 of them. */
static rv_status cycle_error(const rv_structs *bs, int s, int32_t c) {
    int depth = bs->stack_node.len, from = depth - 1;
    while (from > 0 && bs->stack_node.data[from] != c)
        from--;
    Buf b = {0};
    for (int i = from; i < depth; i++) {
        if (i - from == 8) {
            buf_puts(&b, "... -> ");
            break;
        }
        buf_printf(&b, "%d -> ", (int)bs->stack_node.data[i]);
    }
    buf_printf(&b, "%d", (int)c);
    rv_status st = base_error(RV_ERR_ARG, "structure %d: cycle through nodes %s", s, buf_str(&b));
    buf_free(&b);
    return st;
}

/* The per-node checks: child ranges, K, duplicates and (trees) second
 * parents. Fills bs->parent (a parent of each node, -1 for none). */
static rv_status check_children(rv_structs *bs, int s, int32_t n, const int32_t *begin,
                                const int32_t *child) {
    /* The offsets first, all of them: child has begin[n] values, and only
     * non-decreasing offsets keep every node's list inside it. */
    for (int32_t i = 0; i < n; i++)
        if (begin[i + 1] < begin[i])
            return base_error(RV_ERR_ARG,
                              "structure %d: node %d: its children list ends (%d) before it "
                              "begins (%d)",
                              s, (int)i, (int)begin[i + 1], (int)begin[i]);
    int32_t *parent = bs->parent.data;
    for (int32_t i = 0; i < n; i++)
        parent[i] = -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t nc = begin[i + 1] - begin[i];
        if (nc > bs->max_children)
            return base_error(RV_ERR_ARG,
                              "structure %d: node %d has %d children, more than the %d declared", s,
                              (int)i, (int)nc, bs->max_children);
        for (int32_t k = 0; k < nc; k++) {
            int32_t c = child[begin[i] + k];
            if (c < 0 || c >= n)
                return base_error(RV_ERR_ARG,
                                  "structure %d: node %d: child %d is node %d, outside 0..%d", s,
                                  (int)i, (int)k, (int)c, (int)n - 1);
            if (parent[c] == i)
                return base_error(RV_ERR_ARG,
                                  "structure %d: node %d lists node %d twice among its children", s,
                                  (int)i, (int)c);
            if (parent[c] >= 0 && bs->kind != RV_STRUCT_DAG)
                return base_error(RV_ERR_ARG,
                                  "structure %d: node %d has two parents (nodes %d and %d); in a "
                                  "%s every node but the root has one",
                                  s, (int)c, (int)parent[c], (int)i,
                                  bs->kind == RV_STRUCT_TREE ? "tree" : "sequence");
            parent[c] = i;
        }
    }
    return RV_OK;
}

/* The level of node v from its children's (0 without children). */
static int32_t node_level(int32_t v, const int32_t *begin, const int32_t *child,
                          const int32_t *level) {
    int32_t lv = 0;
    for (int32_t e = begin[v]; e < begin[v + 1]; e++)
        if (level[child[e]] + 1 > lv)
            lv = level[child[e]] + 1;
    return lv;
}

/* Levels in index order, or -1 at the first node with a child not below
 * it (check_children has checked every child is in 0..n-1). Children
 * before parents (SST, grids, sequences) is a topological order: every
 * child's level is known when its parent's is computed, and every edge
 * going down proves there is no cycle. The test and the levels are one
 * pass, so an input in this order pays for one look at each edge. */
static int32_t levels_down(int32_t n, const int32_t *begin, const int32_t *child,
                           int32_t *level) {
    for (int32_t v = 0; v < n; v++) {
        int32_t lv = 0;
        for (int32_t e = begin[v]; e < begin[v + 1]; e++) {
            int32_t c = child[e];
            if (c >= v)
                return v;
            if (level[c] >= lv)
                lv = level[c] + 1;
        }
        level[v] = lv;
    }
    return -1;
}

/* The same for parents first (heap-ordered trees): every child above its
 * parent, levels from the last node down. -1, or the first node (from the
 * top) with a child not above it. */
static int32_t levels_up(int32_t n, const int32_t *begin, const int32_t *child, int32_t *level) {
    for (int32_t v = n - 1; v >= 0; v--) {
        int32_t lv = 0;
        for (int32_t e = begin[v]; e < begin[v + 1]; e++) {
            int32_t c = child[e];
            if (c <= v)
                return v;
            if (level[c] >= lv)
                lv = level[c] + 1;
        }
        level[v] = lv;
    }
    return -1;
}

/* Levels, and the proof there is no cycle. Most inputs list nodes in a
 * topological order (SST and grids: children before parents; heap-ordered
 * trees: parents first), and then one loop in that order does both
 * (levels_down, levels_up). An input in neither order stops each at its
 * first edge the wrong way, and gets an iterative depth-first traversal
 * from every node not yet visited: a child found on the stack closes a
 * cycle; a node leaving the stack has all its children done and gets its
 * level. `level` has n entries. */
static rv_status compute_levels(rv_structs *bs, int s, int32_t n, const int32_t *begin,
                                const int32_t *child, int32_t *level) {
    if (levels_down(n, begin, child, level) < 0 || levels_up(n, begin, child, level) < 0)
        return RV_OK;
    enum { NEW, ON_STACK, DONE };
    uint8_t *state = bs->state.data;
    memset(state, NEW, (size_t)n);
    for (int32_t r = 0; r < n; r++) {
        if (state[r] != NEW)
            continue;
        bs->stack_node.len = bs->stack_next.len = 0;
        vec_push(&bs->stack_node, r);
        vec_push(&bs->stack_next, begin[r]);
        state[r] = ON_STACK;
        while (bs->stack_node.len) {
            int top = bs->stack_node.len - 1;
            int32_t v = bs->stack_node.data[top], e = bs->stack_next.data[top];
            if (e < begin[v + 1]) {
                int32_t c = child[e];
                bs->stack_next.data[top] = e + 1;
                if (state[c] == ON_STACK)
                    return cycle_error(bs, s, c);
                if (state[c] == NEW) {
                    state[c] = ON_STACK;
                    vec_push(&bs->stack_node, c);
                    vec_push(&bs->stack_next, begin[c]);
                }
                continue;
            }
            level[v] = node_level(v, begin, child, level);
            state[v] = DONE;
            bs->stack_node.len--;
            bs->stack_next.len--;
        }
    }
    return RV_OK;
}

/* The checks and the levels of a structure in the orders most inputs
 * come in, in one pass over the children lists: children before parents
 * (SST, grids, sequences; `up` false) or parents first (preorder: the
 * s-expression reader, heap-ordered trees; `up` true, nodes visited from
 * the last). A child on the far side of its parent in that order (one
 * unsigned comparison checks range and order together) proves no cycle
 * through that edge, and its level is known when the parent's is
 * computed. True when the structure passed every check this way, with its
 * levels in `level` and its root in *root; false at the first thing it
 * does not prove (an error, or just another order), and the general checks
 * then run from the start and name the error or accept the structure.
 * They accept exactly what this accepts: every test here is one of
 * theirs, or implies one (an edge in order never closes a cycle; the first
 * node of the order, n-1 or 0, has no parent, so n-1 edges and no second
 * parent leave it the only root). Half the general path's cost on SST
 * batches (bench_linearize). */
static bool check_in_order(rv_structs *bs, int32_t n, const int32_t *begin, const int32_t *child,
                           bool up, int32_t *level, int32_t *root) {
    int32_t *parent = bs->parent.data;
    memset(parent, 0xff, sizeof(int32_t) * (size_t)n);
    uint32_t k = (uint32_t)bs->max_children;
    bool dag = bs->kind == RV_STRUCT_DAG;
    for (int32_t i = 0; i < n; i++) {
        int32_t v = up ? n - 1 - i : i, e0 = begin[v], e1 = begin[v + 1], lv = 0;
        if ((uint32_t)(e1 - e0) > k) /* also a list ending before it begins */
            return false;
        /* children in v+1..n-1 (up) or 0..v-1 */
        uint32_t lo = up ? (uint32_t)v + 1 : 0, span = up ? (uint32_t)(n - 1 - v) : (uint32_t)v;
        for (int32_t e = e0; e < e1; e++) {
            int32_t c = child[e];
            if ((uint32_t)c - lo >= span)
                return false;
            int32_t p = parent[c];
            if (p == v || (p >= 0 && !dag))
                return false;
            parent[c] = v;
            lv = level[c] >= lv ? level[c] + 1 : lv;
        }
        level[v] = lv;
    }
    int32_t r = up ? 0 : n - 1;
    if (!dag && begin[n] != n - 1)
        return false;
    for (int32_t v = 0; dag && v < n; v++)
        if (parent[v] < 0 && v != r)
            return false;
    *root = r;
    return true;
}

/* The single node without a parent, or an error for none or several. */
static rv_status find_root(const rv_structs *bs, int s, int32_t n, int32_t *root) {
    int32_t first = -1;
    for (int32_t i = 0; i < n; i++) {
        if (bs->parent.data[i] >= 0)
            continue;
        if (first >= 0)
            return base_error(RV_ERR_ARG,
                              "structure %d has several roots (nodes %d and %d have no parent); "
                              "a %s has one root%s",
                              s, (int)first, (int)i,
                              bs->kind == RV_STRUCT_DAG    ? "DAG"
                              : bs->kind == RV_STRUCT_TREE ? "tree"
                                                           : "sequence",
                              bs->kind == RV_STRUCT_DAG ? " (add each part of a disconnected or "
                                                          "multi-output DAG as its own structure)"
                                                        : "");
        first = i;
    }
    if (first < 0) /* every node has a parent: the traversal found the cycle already */
        return base_error(RV_ERR_ARG, "structure %d has no root (every node has a parent)", s);
    *root = first;
    return RV_OK;
}

rv_status rv_structs_add_children(rv_structs *bs, int32_t n, const int32_t *child_begin,
                                  const int32_t *child, const int32_t *data) {
    if (!bs)
        return base_error(RV_ERR_ARG, "%s: no batch (NULL)", __func__);
    int s = bs->root.len;
    if (n < 1)
        return base_error(RV_ERR_ARG, "structure %d has no nodes (n = %d)", s, (int)n);
    if (!child_begin || (!child && child_begin[n] > 0))
        return base_error(RV_ERR_ARG, "structure %d: no children arrays given", s);
    if (child_begin[0] != 0)
        return base_error(RV_ERR_ARG, "structure %d: child_begin[0] is %d, not 0", s,
                          (int)child_begin[0]);
    int32_t nodes = rv_structs_num_nodes(bs);
    if (n > INT32_MAX - 1 - nodes || child_begin[n] > INT32_MAX - bs->child.len ||
        (int64_t)(nodes + n) * bs->max_children > INT32_MAX ||
        (int64_t)(nodes + n) * bs->width > INT32_MAX)
        return base_error(RV_ERR_ARG,
                          "structure %d: %d nodes would make the batch too large (its arrays "
                          "are indexed by int32)",
                          s, (int)n);
    rec_vec_reserve(&bs->parent, n);
    rec_vec_reserve(&bs->state, n);
    rec_vec_reserve(&bs->level, nodes + n);
    int32_t root = -1;
    int32_t *level_out = bs->level.data + nodes;
    if (!check_in_order(bs, n, child_begin, child, false, level_out, &root) &&
        !check_in_order(bs, n, child_begin, child, true, level_out, &root)) {
        rv_status st = check_children(bs, s, n, child_begin, child);
        if (st == RV_OK)
            st = compute_levels(bs, s, n, child_begin, child, level_out);
        if (st == RV_OK)
            st = find_root(bs, s, n, &root);
        if (st != RV_OK)
            return st;
    }

    /* Accepted: append. */
    /* The root's level is the structure's highest: every node is below
     * the root (one root, no cycle), so level_count grows once, and the
     * loop below writes without a capacity test per node. */
    bs->level.len = nodes + n;
    const int32_t *level = bs->level.data + nodes;
    while (bs->level_count.len <= level[root])
        vec_push(&bs->level_count, 0);
    rec_vec_reserve(&bs->child_begin, nodes + n + 1);
    int32_t e0 = bs->child.len, *cb = bs->child_begin.data + nodes + 1,
            *count = bs->level_count.data;
    /* Leaves counted in a register: count[0]++ per leaf would be a chain
     * of store-to-load forwards, one per node (most nodes are leaves). */
    int32_t leaves = 0;
    for (int32_t i = 0; i < n; i++) {
        cb[i] = e0 + child_begin[i + 1];
        if (level[i])
            count[level[i]]++;
        else
            leaves++;
    }
    count[0] += leaves;
    bs->child_begin.len = nodes + n + 1;
    rec_vec_reserve(&bs->child, e0 + child_begin[n]);
    if (child_begin[n] > 0)
        memcpy(bs->child.data + e0, child, sizeof(int32_t) * (size_t)child_begin[n]);
    bs->child.len = e0 + child_begin[n];
    size_t w = (size_t)bs->width, d0 = (size_t)bs->data.len;
    rec_vec_reserve(&bs->data, (int)(d0 + (size_t)n * w));
    if (data) {
        if (w)
            memcpy(bs->data.data + d0, data, sizeof(int32_t) * (size_t)n * w);
    } else {
        for (size_t j = 0; j < (size_t)n * w; j++)
            bs->data.data[d0 + j] = -1;
    }
    bs->data.len = (int)(d0 + (size_t)n * w);
    vec_push(&bs->node_begin, nodes + n);
    vec_push(&bs->root, root);
    return RV_OK;
}

/* The children offsets of one structure of an rv_structs_add_many batch,
 * checked to stay within the `left` values of `child` still unread, so no
 * read of the structure's children runs past the caller's array (the
 * other checks are rv_structs_add_children's). */
static rv_status check_offsets(int s, int32_t n, const int32_t *begin, int64_t left) {
    for (int32_t i = 0; i <= n; i++)
        if (begin[i] < 0 || begin[i] > left)
            return base_error(RV_ERR_ARG,
                              "structure %d: node %d: child_begin is %d, outside 0..%lld (the "
                              "values of child left for it)",
                              s, (int)(i < n ? i : n - 1), (int)begin[i], (long long)left);
    return RV_OK;
}

rv_status rv_structs_add_many(rv_structs *bs, int count, const int32_t *sizes,
                              const int32_t *child_begin, int64_t num_begin,
                              const int32_t *child, int64_t num_child, const int32_t *data,
                              int64_t num_data) {
    if (!bs)
        return base_error(RV_ERR_ARG, "%s: no batch (NULL)", __func__);
    if (count < 1 || !sizes)
        return base_error(RV_ERR_ARG, "%s: no structures (count = %d)", __func__, count);
    if (num_begin < 0 || num_child < 0 || num_data < 0 || (num_begin > 0 && !child_begin) ||
        (num_child > 0 && !child) || (num_data > 0 && !data))
        return base_error(RV_ERR_ARG, "%s: an array is NULL or has a negative length", __func__);
    int first = bs->root.len;
    int64_t b = 0, e = 0, node = 0;
    rv_status st = RV_OK;
    for (int j = 0; j < count && st == RV_OK; j++) {
        int32_t n = sizes[j];
        if (n < 1) {
            st = base_error(RV_ERR_ARG, "structure %d has no nodes (n = %d)", first + j, (int)n);
            break;
        }
        if (n + 1 > num_begin - b) {
            st = base_error(RV_ERR_ARG,
                            "structure %d: its %d nodes need %lld values of child_begin, %lld are "
                            "left of %lld",
                            first + j, (int)n, (long long)n + 1, (long long)(num_begin - b),
                            (long long)num_begin);
            break;
        }
        if (data && (int64_t)n * bs->width > num_data - node * bs->width) {
            st = base_error(RV_ERR_ARG,
                            "structure %d: its %d nodes need %lld values of data, %lld are left "
                            "of %lld",
                            first + j, (int)n, (long long)n * bs->width,
                            (long long)(num_data - node * bs->width), (long long)num_data);
            break;
        }
        if ((st = check_offsets(first + j, n, child_begin + b, num_child - e)) != RV_OK)
            break;
        st = rv_structs_add_children(bs, n, child_begin + b, child ? child + e : NULL,
                                     data ? data + node * bs->width : NULL);
        e += child_begin[b + n];
        b += n + 1;
        node += n;
    }
    if (st == RV_OK && (b != num_begin || e != num_child || (data && node * bs->width != num_data)))
        st = base_error(RV_ERR_ARG,
                        "%s: the %d structures (%lld nodes) have %lld offsets, %lld children and "
                        "%lld data values, but child_begin has %lld, child %lld and data %lld",
                        __func__, count, (long long)node, (long long)b, (long long)e,
                        (long long)(data ? node * bs->width : 0), (long long)num_begin,
                        (long long)num_child, (long long)num_data);
    if (st != RV_OK)
        rec_truncate(bs, first); /* all or nothing */
    return st;
}

/* Scratch children lists for a structure of n nodes and `edges` children,
 * built by the generators below and handed to rv_structs_add_children
 * (which checks them like any other). */
static rv_status scratch_lists(rv_structs *bs, int32_t n, int64_t edges, int32_t **begin,
                               int32_t **child) {
    if (n < 1)
        return base_error(RV_ERR_ARG, "structure %d has no nodes (n = %d)", bs->root.len, (int)n);
    rec_vec_reserve(&bs->tmp_begin, n + 1);
    rec_vec_reserve(&bs->tmp_child, (int)(edges + 1));
    *begin = bs->tmp_begin.data;
    *child = bs->tmp_child.data;
    return RV_OK;
}

rv_status rv_structs_add_parents(rv_structs *bs, int32_t n, const int32_t *parent,
                                 const int32_t *data) {
    return rec_add_parents(bs, n, parent, NULL, data);
}

rv_status rec_add_parents(rv_structs *bs, int32_t n, const int32_t *parent, const int32_t *order,
                          const int32_t *data) {
    if (!bs || !parent)
        return base_error(RV_ERR_ARG, "%s: no batch or no parent array (NULL)", __func__);
    /* Counting sort of the nodes by parent gives the children lists, each
     * in the order the nodes are visited: index order, or `order`'s. */
    int s = bs->root.len;
    int32_t *begin, *child;
    rv_status st = scratch_lists(bs, n, n, &begin, &child);
    if (st != RV_OK)
        return st;
    memset(begin, 0, sizeof(int32_t) * (size_t)(n + 1));
    for (int32_t i = 0; i < n; i++) {
        if (parent[i] < -1 || parent[i] >= n)
            return base_error(RV_ERR_ARG,
                              "structure %d: node %d: parent %d is outside 0..%d (-1 for the root)",
                              s, (int)i, (int)parent[i], (int)n - 1);
        if (parent[i] >= 0)
            begin[parent[i] + 1]++;
    }
    for (int32_t i = 0; i < n; i++)
        begin[i + 1] += begin[i];
    for (int32_t j = 0; j < n; j++) {
        int32_t i = order ? order[j] : j;
        if (parent[i] >= 0)
            child[begin[parent[i]]++] = i;
    }
    for (int32_t i = n; i > 0; i--) /* undo the cursor advance: begin[i] = old begin[i] */
        begin[i] = begin[i - 1];
    begin[0] = 0;
    return rv_structs_add_children(bs, n, begin, child, data);
}

rv_status rv_structs_add_sequence(rv_structs *bs, int32_t n, const int32_t *data) {
    if (!bs)
        return base_error(RV_ERR_ARG, "%s: no batch (NULL)", __func__);
    int32_t *begin, *child;
    rv_status st = scratch_lists(bs, n, n, &begin, &child);
    if (st != RV_OK)
        return st;
    begin[0] = begin[1] = 0;
    for (int32_t t = 1; t < n; t++) {
        child[t - 1] = t - 1;
        begin[t + 1] = t;
    }
    return rv_structs_add_children(bs, n, begin, child, data);
}

rv_status rv_structs_add_perfect_tree(rv_structs *bs, int height, const int32_t *data) {
    if (!bs)
        return base_error(RV_ERR_ARG, "%s: no batch (NULL)", __func__);
    int s = bs->root.len;
    if (height < 0 || height > 29)
        return base_error(RV_ERR_ARG, "structure %d: perfect tree height %d is outside 0..29", s,
                          height);
    int32_t n = (int32_t)((1L << (height + 1)) - 1), inner = (n - 1) / 2, *begin, *child;
    scratch_lists(bs, n, n, &begin, &child);
    begin[0] = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t nc = i < inner ? 2 : 0;
        if (nc) {
            child[begin[i]] = 2 * i + 1;
            child[begin[i] + 1] = 2 * i + 2;
        }
        begin[i + 1] = begin[i] + nc;
    }
    return rv_structs_add_children(bs, n, begin, child, data);
}

rv_status rv_structs_add_grid(rv_structs *bs, int w, int h, const int32_t *data) {
    if (!bs)
        return base_error(RV_ERR_ARG, "%s: no batch (NULL)", __func__);
    int s = bs->root.len;
    if (w < 1 || h < 1 || (int64_t)w * h > INT32_MAX / 2)
        return base_error(RV_ERR_ARG, "structure %d: a %d x %d grid has no nodes or too many", s, w,
                          h);
    int32_t n = w * h, *begin, *child;
    scratch_lists(bs, n, 2 * (int64_t)n, &begin, &child);
    begin[0] = 0;
    for (int32_t i = 0; i < w; i++)
        for (int32_t j = 0; j < h; j++) {
            int32_t v = i * h + j, e = begin[v];
            if (i > 0)
                child[e++] = (i - 1) * h + j;
            if (j > 0)
                child[e++] = i * h + j - 1;
            begin[v + 1] = e;
        }
    return rv_structs_add_children(bs, n, begin, child, data);
}
