/*
 * numbering.c — the host plan's check that a bound structure obeys the
 * numbering a recursion group's loops rely on (plan.h: CHECK_STRUCT).
 *
 * The loops of src/lower/recurse.c run node N-1 first and node 0 last,
 * or batch 0 first, so a child must be computed before its parent reads
 * it: numbered above it (serial nodes), or in an earlier batch (dynamic
 * batches, whose nodes run at once). Specialized nests take batch 0 for
 * exactly the leaves. The linearizer (src/recursive/linearize.c) numbers
 * this way; arrays bound by hand may not, and a run on them would read
 * states not yet computed, silently. The arguments are checked already
 * (each value within its UF's range), so only the order is checked here.
 */
#include "runtime/runtime.h"

rv_status rt_check_numbering(const Recurse *g, const int64_t *sizes, int64_t *const *ufv,
                             bool batches) {
    const Structure *T = g->st;
    int64_t N = sizes[T->nodes->id];
    const int64_t *nchild = ufv[T->nchild->id], *child = ufv[T->child->id];
    /* the dynamic batches: consecutive, from the top down, batch 0 the
     * leaves; first_done[b] is where batch b ends */
    int64_t nb = batches ? sizes[T->nbatch->id] : 0;
    const int64_t *begin = batches ? ufv[T->batch_begin->id] : NULL;
    const int64_t *len = batches ? ufv[T->batch_length->id] : NULL;
    int64_t top = 0;
    for (int64_t b = nb - 1; b >= 0; b--) {
        if (begin[b] != top)
            return base_error(RV_ERR_ARG,
                              "structure %s: batch %lld begins at node %lld, not %lld: recursion "
                              "%s needs the batches consecutive from node 0 (the last batch) "
                              "to node N-1 (batch 0, the leaves), as rv_linearize numbers them",
                              T->name, (long long)b, (long long)begin[b], (long long)top, g->name);
        top += len[b];
    }
    if (batches && top != N)
        return base_error(RV_ERR_ARG,
                          "structure %s: the batches cover %lld nodes, not N = %lld (recursion %s)",
                          T->name, (long long)top, (long long)N, g->name);
    int64_t at = 0, b = nb - 1;
    for (int64_t n = 0; n < N; n++) {
        while (batches && n >= begin[b] + len[b])
            b--;
        if (batches && (nchild[n] == 0) != (b == 0))
            return base_error(RV_ERR_ARG,
                              "structure %s: node %lld %s but is in batch %lld: recursion %s "
                              "needs batch 0 to hold exactly the leaves",
                              T->name, (long long)n, nchild[n] ? "has children" : "is a leaf",
                              (long long)b, g->name);
        for (int64_t k = 0; k < nchild[n]; k++, at++) {
            int64_t c = child[at];
            if (c <= n)
                return base_error(RV_ERR_ARG,
                                  "structure %s: child %lld of node %lld is node %lld, not "
                                  "numbered above it: recursion %s computes children before "
                                  "their parents, so every child must be numbered above its "
                                  "parent (as rv_linearize numbers them)",
                                  T->name, (long long)k, (long long)n, (long long)c, g->name);
            if (batches && c < begin[b] + len[b])
                return base_error(RV_ERR_ARG,
                                  "structure %s: child %lld of node %lld (batch %lld) is node "
                                  "%lld, in the same batch: recursion %s computes a batch's "
                                  "nodes at once, so a child must be in an earlier batch",
                                  T->name, (long long)k, (long long)n, (long long)b, (long long)c,
                                  g->name);
        }
    }
    return RV_OK;
}

/* Replays the unrolled iterations (src/lower/unroll.c) over the bound
 * arrays: the leaves are done first (batch 0, checked above); then, batch
 * u by batch u, each head (internal, not done yet) computes its internal
 * children (not done yet: one parent, computed once), each of which reads
 * its own children, done in an earlier batch (or leaves), and then the
 * head itself. done[n]: 0 not yet, 1 a leaf, u + 2 computed in batch u.
 * At the end every node is done. */
rv_status rt_check_unroll(const Recurse *g, const int64_t *sizes, int64_t *const *ufv) {
    const Structure *T = g->st;
    int64_t N = sizes[T->nodes->id], NU = sizes[T->nunroll->id];
    const int64_t *nchild = ufv[T->nchild->id], *child = ufv[T->child->id];
    const int64_t *begin = ufv[T->unroll_begin->id], *len = ufv[T->unroll_length->id];
    const int64_t *node = ufv[T->unroll_node->id];
    int64_t *start = base_xmalloc(sizeof(int64_t) * (size_t)(N + 1));
    int64_t *done = base_xcalloc((size_t)(N > 0 ? N : 1), sizeof(int64_t));
    rv_status st = RV_OK;
    start[0] = 0;
    for (int64_t n = 0; n < N; n++) {
        start[n + 1] = start[n] + nchild[n];
        done[n] = nchild[n] == 0;
    }
    int64_t top = 0;
    for (int64_t u = 0; u < NU && st == RV_OK; u++) {
        if (begin[u] != top || top + len[u] > N) {
            st = base_error(RV_ERR_ARG,
                            "structure %s: unrolled batch %lld begins at %lld, not %lld, or ends "
                            "past N = %lld: recursion %s needs the unrolled batches consecutive "
                            "in _%s_unroll_node, as rv_linearize lists them",
                            T->name, (long long)u, (long long)begin[u], (long long)top,
                            (long long)N, g->name, T->name);
            break;
        }
        for (int64_t j = top; j < top + len[u] && st == RV_OK; j++) {
            int64_t n = node[j];
            const char *bad = nchild[n] == 0 ? "is a leaf" : done[n] ? "is computed twice" : NULL;
            for (int64_t e = start[n]; !bad && e < start[n + 1]; e++) {
                int64_t c = child[e];
                if (nchild[c] == 0)
                    continue;
                if (done[c]) {
                    bad = "has an internal child computed before (it has two parents, or is a "
                          "head itself)";
                    break;
                }
                for (int64_t f = start[c]; !bad && f < start[c + 1]; f++)
                    if (!done[child[f]] || done[child[f]] == u + 2)
                        bad = "has a grandchild not computed in an earlier batch";
                done[c] = u + 2;
            }
            if (bad)
                st = base_error(RV_ERR_ARG,
                                "structure %s: head node %lld of unrolled batch %lld %s: "
                                "recursion %s computes a head with its internal children, "
                                "after the batches that compute their children (as "
                                "rv_linearize partitions the nodes)",
                                T->name, (long long)n, (long long)u, bad, g->name);
            done[n] = u + 2;
        }
        top += len[u];
    }
    for (int64_t n = 0; n < N && st == RV_OK; n++)
        if (!done[n])
            st = base_error(RV_ERR_ARG,
                            "structure %s: node %lld is in no unrolled iteration: recursion %s "
                            "would not compute it (rv_linearize gives every node of a tree or "
                            "sequence batch one)",
                            T->name, (long long)n, g->name);
    base_free(start);
    base_free(done);
    return st;
}
