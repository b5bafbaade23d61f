/*
 * linearize.c — a batch of structures to the arrays recursive kernels read
 * (Cortex §4.2 and appendix B).
 *
 * The numbering. A node's level is 0 for a leaf and 1 + the largest level
 * of its children otherwise (a tree's height, a DAG's longest path from a
 * leaf); every node's children have lower levels, so the nodes of one level,
 * across all B structures, can be computed together once the levels below
 * are done: they are one dynamic batch. Appendix B numbers the nodes so that
 * the nodes of a batch are consecutive and higher than their parents. We
 * give the highest level the lowest numbers:
 *
 *     numbers:  0 ............................................. N-1
 *               [ level L ][ level L-1 ] ... [ level 1 ][ level 0 = leaves ]
 *     batches:   b = L       b = L-1            b = 1      b = 0
 *
 * so batch b (computation order, leaves first) is level b and starts at
 * batch_begin[b] = (nodes of levels > b); every child's number is higher
 * than its parent's; all leaves are numbered after all internal nodes, so
 * `n >= first_leaf` is the whole leaf test (one comparison, no load); and a
 * kernel walks b = 0, 1, ... with a parallel loop over batch_begin[b] ..
 * batch_begin[b] + batch_length[b] - 1 and one barrier per batch. Within a
 * batch, nodes keep the order (structure, node index): deterministic, and
 * a structure's nodes of one level stay together.
 *
 * The cost. Levels were computed when each structure was checked
 * (structs.c), with the number of nodes per level, so the batch offsets are
 * a prefix sum over levels, and the rest is two passes over the nodes: the
 * first hands out numbers level by level (a counting sort, stable, so the
 * within-batch order falls out) and permutes the data; the second renumbers
 * the children, which needs every child's new number, hence the second
 * pass. The unrolled partition (Cortex Fig. 3) is not computed here: only
 * a program with unroll_recursion() reads it, so rv_linear_unroll computes
 * it on request and a binding without it (rv_bindings_set_linear) leaves
 * it to the run of such a program (interp_bindings_unroll), from the bound
 * arrays, with rec_unroll_partition below.
 *
 * The output buffers belong to the caller's rv_linear and only grow,
 * so a server linearizing one request after another allocates nothing once
 * it has seen its largest batch.
 */
#include <stdlib.h>

#include "recursive/recursive.h"

/* Pass 3 (on request), when every node has at most one parent (trees,
 * sequences, a DAG batch that is a forest): the unrolled partition
 * (ravel.h; Cortex Fig. 3). Parents are numbered below their children, so
 * one pass up the numbers gives every node its depth's parity, and one
 * pass down gives every head its unrolled batch (its grandchildren's are
 * known by then); the heads are then counting-sorted by batch, as pass 1
 * sorts the nodes by level. s[n]: the parity (pass a), then the head's
 * batch or -1 (pass b); a root has no parent, -1, and depth 0. The batches
 * number at most the levels: a head's batch is at most half its height. */

/* Grows the arrays *ps[0..np) that share the capacity *cap to hold n int32
 * each; false when out of memory. */
static bool grow(int32_t **const *ps, int np, size_t *cap, size_t n) {
    if (n <= *cap)
        return true;
    size_t c = n > 2 * *cap ? n : 2 * *cap;
    for (int i = 0; i < np; i++) {
        int32_t *q = base_realloc(*ps[i], c * sizeof(int32_t));
        if (!q)
            return false;
        *ps[i] = q;
    }
    *cap = c;
    return true;
}

/* Makes room for n nodes with k children and w data each, b structures
 * and l levels. On failure frees everything: a half-grown rv_linear would
 * lie about its capacities. */
static rv_status reserve(rv_linear *out, size_t n, size_t k, size_t w, size_t b, size_t l) {
    int32_t **const nodes[] = {&out->nchild,      &out->node_of, &out->linear_of,
                               &out->unroll_node, &out->scratch};
    int32_t **const child[] = {&out->child}, **const data[] = {&out->data};
    int32_t **const roots[] = {&out->root};
    int32_t **const batches[] = {&out->batch_begin, &out->batch_length, &out->unroll_begin,
                                 &out->unroll_length};
    if (grow(nodes, 5, &out->cap_nodes, n) && grow(child, 1, &out->cap_child, n * k) &&
        grow(data, 1, &out->cap_data, n * w) && grow(roots, 1, &out->cap_structs, b) &&
        grow(batches, 4, &out->cap_batches, l))
        return RV_OK;
    rv_linear_free(out);
    return base_error(RV_ERR_OOM, "rv_linearize: out of memory for %zu nodes", n);
}

int32_t rec_unroll_partition(int32_t N, int32_t K, const int32_t *start, const int32_t *child,
                             const int32_t *nchild, int32_t *begin, int32_t *count,
                             int32_t *node, int32_t *s) {
#define REC_CHILD(n, k) child[(start ? (size_t)start[n] : (size_t)(n) * (size_t)K) + (size_t)(k)]
    memset(s, 0xff, sizeof(int32_t) * (size_t)N); /* -1: no parent (yet) */
    for (int32_t n = 0; n < N; n++)
        for (int32_t k = 0; k < nchild[n]; k++) {
            int32_t c = REC_CHILD(n, k);
            if (s[c] >= 0)
                return 0; /* two parents: a DAG has no unrolled partition */
            s[c] = s[n] != 1;
        }
    int32_t nu = 0;
    for (int32_t n = N - 1; n >= 0; n--) {
        if (nchild[n] == 0 || s[n] == 1) {
            s[n] = -1;
            continue;
        }
        int32_t u = 0;
        for (int32_t k = 0; k < nchild[n]; k++) {
            int32_t c = REC_CHILD(n, k);
            for (int32_t j = 0; j < nchild[c]; j++) {
                int32_t g = REC_CHILD(c, j);
                if (nchild[g] > 0 && s[g] + 1 > u)
                    u = s[g] + 1;
            }
        }
        for (; nu <= u; nu++)
            count[nu] = 0;
        count[u]++;
        s[n] = u;
    }
#undef REC_CHILD
    int32_t next = 0;
    for (int32_t u = 0; u < nu; u++) {
        begin[u] = next;
        next += count[u];
        count[u] = begin[u]; /* the cursor */
    }
    int32_t rest = next;
    for (int32_t n = 0; n < N; n++)
        node[s[n] >= 0 ? count[s[n]]++ : rest++] = n;
    for (int32_t u = 0; u < nu; u++)
        count[u] -= begin[u];
    return nu;
}

rv_status rv_linear_unroll(rv_linear *lin) {
    if (!lin || lin->num_nodes < 1 || !lin->child || !lin->nchild)
        return base_error(RV_ERR_ARG, "rv_linear_unroll: no linearized batch (rv_linearize fills "
                                      "an rv_linear)");
    /* rv_linearize grew the partition's arrays with the batch's */
    lin->num_unroll = rec_unroll_partition(lin->num_nodes, lin->max_children, NULL, lin->child,
                                           lin->nchild, lin->unroll_begin, lin->unroll_length,
                                           lin->unroll_node, lin->scratch);
    return RV_OK;
}

rv_status rv_linearize(const rv_structs *bs, rv_linear *out) {
    if (!bs || !out)
        return base_error(RV_ERR_ARG, "rv_linearize: no batch or no output (NULL)");
    int nstructs = bs->root.len;
    if (nstructs == 0)
        return base_error(RV_ERR_ARG, "rv_linearize: empty batch (no structures to linearize)");
    int32_t n = rv_structs_num_nodes(bs), nlevels = bs->level_count.len;
    size_t k = (size_t)bs->max_children, w = (size_t)bs->width;
    rv_status st = reserve(out, (size_t)n, k, w, (size_t)nstructs, (size_t)nlevels);
    if (st != RV_OK)
        return st;
    out->num_nodes = n;
    out->num_structs = nstructs;
    out->max_children = (int32_t)k;
    out->width = (int32_t)w;
    out->num_batches = nlevels;

    /* Batch offsets: the highest level first. batch_length doubles as the
     * cursor of the counting sort and is restored after it. */
    int32_t *begin = out->batch_begin, *cursor = out->batch_length;
    int32_t next = 0;
    for (int32_t l = nlevels - 1; l >= 0; l--) {
        begin[l] = next;
        cursor[l] = next;
        next += bs->level_count.data[l];
    }
    RV_ASSERT(next == n);
    out->first_leaf = begin[0];

    /* Pass 1: numbers, in (structure, node) order within each level. */
    const int32_t *level = bs->level.data, *in_data = bs->data.data;
    int32_t *node_of = out->node_of, *linear_of = out->linear_of, *data = out->data;
    /* The leaves' cursor lives in a register: cursor[0]++ per leaf would
     * be a chain of store-to-load forwards (most nodes are leaves). */
    int32_t leaf_cursor = cursor[0];
    for (int32_t g = 0; g < n; g++) {
        int32_t v = level[g] ? cursor[level[g]]++ : leaf_cursor++;
        node_of[v] = g;
        linear_of[g] = v;
    }
    cursor[0] = leaf_cursor;
    /* The data rows in a pass of their own: one word per node (a word id)
     * is one load and one store, without a loop of unknown count inside. */
    if (w == 1)
        for (int32_t v = 0; v < n; v++)
            data[v] = in_data[node_of[v]];
    else if (w > 1)
        for (int32_t v = 0; v < n; v++)
            memcpy(data + (size_t)v * w, in_data + (size_t)node_of[v] * w, sizeof(int32_t) * w);
    for (int32_t l = 0; l < nlevels; l++)
        out->batch_length[l] = cursor[l] - begin[l];

    /* Pass 2: children, renumbered; pad slots hold the node itself. */
    const int32_t *cb = bs->child_begin.data, *in_child = bs->child.data;
    int32_t *child = out->child, *nchild = out->nchild;
    for (int s = 0; s < nstructs; s++) {
        int32_t g0 = bs->node_begin.data[s], g1 = bs->node_begin.data[s + 1];
        const int32_t *local_to_linear = linear_of + g0;
        for (int32_t g = g0; g < g1; g++) {
            int32_t v = linear_of[g], nc = cb[g + 1] - cb[g];
            int32_t *row = child + (size_t)v * k;
            for (int32_t j = 0; j < nc; j++)
                row[j] = local_to_linear[in_child[cb[g] + j]];
            for (size_t j = (size_t)nc; j < k; j++)
                row[j] = v;
            nchild[v] = nc;
        }
        out->root[s] = local_to_linear[bs->root.data[s]];
    }
    out->num_unroll = 0; /* rv_linear_unroll, or the program that needs it */
    return RV_OK;
}

void rv_linear_free(rv_linear *lin) {
    if (!lin)
        return;
    base_free(lin->batch_begin);
    base_free(lin->batch_length);
    base_free(lin->child);
    base_free(lin->nchild);
    base_free(lin->data);
    base_free(lin->root);
    base_free(lin->node_of);
    base_free(lin->linear_of);
    base_free(lin->unroll_begin);
    base_free(lin->unroll_length);
    base_free(lin->unroll_node);
    base_free(lin->scratch);
    memset(lin, 0, sizeof *lin);
}
