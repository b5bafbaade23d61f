/*
 * random_structs.c — random batches of structures for rv_bindings_randomize.
 *
 * A structure's UFs cannot be drawn one by one like other UFs: child,
 * nchild, root and the dynamic batches must describe one valid batch of
 * structures together, numbered as the linearizer numbers it. So a
 * structure whose children are unbound gets a random batch of structures
 * of its kind, built with the runtime's builders (src/recursive: every
 * structure checked as it is added) and linearized, and is bound from it
 * as a caller's batch would be (interp_bindings_set_linear). Its data
 * columns are left to the ordinary UF draw (uniform in their declared
 * ranges, which may use sizes drawn later).
 *
 * The shape of the batch is picked by the seed, so that consecutive seeds
 * (a test's `--random 1` .. `--random 6`) go through the edge shapes:
 *   seed % 6 = 1  a single node (N and B as small as their ranges allow)
 *              2  one deep chain (200 nodes): a sequence, a tree of one
 *                 child per node, a DAG that is a path
 *              3  bushy: complete K-ary trees (DAGs: with extra edges that
 *                 keep the longest path the tree's height)
 *              4  many small structures (1 to 4 nodes each)
 *              0, 5  random shapes, small and larger
 * N and B keep their bound values when bound, else are drawn within their
 * declared ranges (B <= N), so a batch never breaks a declaration.
 *
 * Random shapes: node i > 0 of a structure takes a parent among the nodes
 * before it with room for a child, near i (deep) or anywhere (bushy) as
 * the structure's spread says; a DAG then gets extra edges from a node to
 * later nodes while it has room. Every edge goes from a lower index to a
 * higher one, so the graph is acyclic and node 0 is its only root.
 *
 * Full trees. A program that reads children at fixed positions
 * (`h[child[n, 1], j]`: a binary TreeRNN, TreeFC, MV-RNN) is defined only
 * where nodes have that many children, which the structure's declaration
 * (at most K) does not promise; the data it is written for (SST's binary
 * trees) has all K children at every internal node. For such a program the
 * batches are full K-ary trees (a DAG structure's too: a full tree has no
 * room for shared children), grown by giving a leaf K children at a time;
 * N - B is then a multiple of K.
 */
#include <string.h>

#include "interp/interp.h"

enum { PLAN_RANDOM, PLAN_SINGLE, PLAN_CHAIN, PLAN_BUSHY, PLAN_SMALL, PLAN_LARGE, PLAN_COUNT };

typedef enum Style { STYLE_CHAIN, STYLE_BUSHY, STYLE_RANDOM } Style;

typedef struct Draw {
    Rng r;
    rv_structs *bs;
    int K;
    bool dag;
    bool full; /* internal nodes have exactly K children (fixed_child_reads) */
    /* scratch for one structure */
    int32_t *parent, *depth, *nkids; /* the tree: node i's parent (i > 0), depth, children */
    int32_t *tbegin, *tchild; /* its children lists */
    int32_t *begin, *child;   /* the structure's (a DAG's with its extra edges) */
    int32_t *leaves;          /* full trees: the leaves that may still grow */
} Draw;

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* The tree of a structure of n nodes (parent, depth, nkids): node i > 0
 * takes a parent among the nodes before it that have room for a child. */
static void grow_tree(Draw *d, int32_t n, Style style) {
    int K = d->K;
    int64_t spread = style == STYLE_RANDOM ? interp_rng_int(&d->r, 1, 8) : 1;
    for (int32_t i = 1; i < n; i++) {
        int32_t p;
        if (style == STYLE_CHAIN)
            p = i - 1;
        else if (style == STYLE_BUSHY)
            p = (i - 1) / K; /* heap order: complete K-ary */
        else
            p = i - 1 - (int32_t)interp_rng_int(&d->r, 0, (spread < i ? spread : i) - 1);
        while (d->nkids[p] >= K) /* full: the next node with room (one before i has) */
            p = (p + 1) % i;
        d->parent[i] = p;
        d->depth[i] = d->depth[p] + 1;
        d->nkids[p]++;
    }
}

/* The same, every internal node with exactly K children (n = 1 + K m): m
 * times a leaf gets K new children, the latest leaf (a caterpillar, as
 * deep as it gets), the oldest (complete K-ary, heap order) or one of the
 * latest few. */
static void grow_full_tree(Draw *d, int32_t n, Style style) {
    int K = d->K;
    int64_t spread = style == STYLE_RANDOM ? interp_rng_int(&d->r, 1, 4) * K : 1;
    int32_t head = 0, count = 0, next = 1;
    d->leaves[count++] = 0;
    while (next + K <= n) {
        int32_t j = style == STYLE_BUSHY ? head
                    : style == STYLE_CHAIN
                        ? count - 1
                        : (int32_t)interp_rng_int(&d->r, count - spread > head ? count - spread : head,
                                                  count - 1);
        int32_t p = d->leaves[j];
        d->leaves[j] = d->leaves[head++]; /* the leaf grows: out of the list */
        for (int k = 0; k < K; k++, next++) {
            d->parent[next] = p;
            d->depth[next] = d->depth[p] + 1;
            d->leaves[count++] = next;
        }
        d->nkids[p] = K;
    }
    RV_ASSERT(next == n);
}

/* A structure of n nodes: a tree first (node i's parent before i), then
 * for a DAG extra edges, as children lists in compressed rows. */
static rv_status add_structure(Draw *d, int32_t n, Style style) {
    int K = d->K;
    if (K == 1)
        style = STYLE_CHAIN; /* the only shape; others would search for room */
    memset(d->nkids, 0, sizeof(int32_t) * (size_t)n);
    d->depth[0] = 0;
    if (d->full)
        grow_full_tree(d, n, style);
    else
        grow_tree(d, n, style);
    d->tbegin[0] = 0;
    for (int32_t p = 0; p < n; p++)
        d->tbegin[p + 1] = d->tbegin[p] + d->nkids[p];
    memset(d->nkids, 0, sizeof(int32_t) * (size_t)n);
    for (int32_t i = 1; i < n; i++) {
        int32_t p = d->parent[i];
        d->tchild[d->tbegin[p] + d->nkids[p]++] = i;
    }
    int32_t e = 0;
    for (int32_t p = 0; p < n; p++) {
        d->begin[p] = e;
        for (int32_t j = d->tbegin[p]; j < d->tbegin[p + 1]; j++)
            d->child[e++] = d->tchild[j];
        if (!d->dag || d->full || style == STYLE_CHAIN)
            continue; /* (a full tree has no room for more) */
        /* extra edges p -> c, c > p: acyclic, and node 0 stays the only
         * root; bushy: to the children of p + 1 when it is as deep as p, so
         * the longest path stays the tree's height */
        int64_t lo = p + 1, hi = n - 1;
        if (style == STYLE_BUSHY) {
            lo = K * (p + 1) + 1;
            hi = d->depth[p + 1 < n ? p + 1 : p] == d->depth[p] ? lo + K - 1 : lo - 1;
            hi = hi < n - 1 ? hi : n - 1;
        }
        int64_t tries = style == STYLE_BUSHY ? K : interp_rng_int(&d->r, 0, K);
        for (int64_t t = 0; t < tries && e - d->begin[p] < K && lo <= hi; t++) {
            int32_t c = (int32_t)interp_rng_int(&d->r, lo, hi);
            bool dup = false;
            for (int32_t j = d->begin[p]; j < e; j++)
                dup = dup || d->child[j] == c;
            if (!dup)
                d->child[e++] = c;
        }
    }
    d->begin[n] = e;
    return rv_structs_add_children(d->bs, n, d->begin, d->child, NULL);
}

/* The number of nodes and structures of the batch, within what is bound
 * or declared. */
static rv_status pick_sizes(const rv_bindings *b, const Structure *st, int plan, Draw *d,
                            int64_t *N, int64_t *B) {
    const Size *ns = st->nodes, *bs = st->root ? st->count : NULL;
    int64_t nlo = ns->lo, nhi = ns->hi, blo = 1, bhi = INT32_MAX;
    if (b->size_set[ns->id])
        nlo = nhi = b->size_val[ns->id];
    if (bs) {
        blo = bs->lo, bhi = bs->hi;
        if (b->size_set[bs->id])
            blo = bhi = b->size_val[bs->id];
    }
    nlo = nlo > 1 ? nlo : 1;
    nhi = nhi < INT32_MAX ? nhi : INT32_MAX;
    blo = blo > 1 ? blo : 1;
    if (nlo > nhi || blo > bhi || blo > nhi)
        return base_error(RV_ERR_BOUNDS,
                          "structure %s: cannot draw a batch of %lld..%lld structures with "
                          "%lld..%lld nodes",
                          st->name, (long long)blo, (long long)bhi, (long long)nlo,
                          (long long)nhi);
    int64_t n, nb;
    switch (plan) {
    case PLAN_SINGLE:
        n = 1, nb = 1;
        break;
    case PLAN_CHAIN:
        n = 200, nb = 1;
        break;
    case PLAN_BUSHY:
        n = interp_rng_int(&d->r, 30, 80), nb = interp_rng_int(&d->r, 1, 2);
        break;
    case PLAN_SMALL:
        nb = interp_rng_int(&d->r, 4, 12), n = nb * interp_rng_int(&d->r, 1, 4);
        break;
    case PLAN_LARGE:
        n = interp_rng_int(&d->r, 40, 120), nb = interp_rng_int(&d->r, 1, 4);
        break;
    default:
        n = interp_rng_int(&d->r, 1, 48), nb = interp_rng_int(&d->r, 1, 6);
        break;
    }
    *B = clamp(nb, blo, bhi < nhi ? bhi : nhi);
    *N = clamp(n, nlo > *B ? nlo : *B, nhi);
    if (!d->full || d->K == 1)
        return RV_OK;
    /* full K-ary trees: n = 1 + K m each, so N - B is a multiple of K:
     * move N by less than K, else B */
    int K = d->K;
    for (int64_t dn = 0; dn < K; dn++)
        for (int sign = 1; sign >= -1; sign -= 2) {
            int64_t n2 = *N + sign * dn;
            if (n2 >= nlo && n2 >= *B && n2 <= nhi && (n2 - *B) % K == 0) {
                *N = n2;
                return RV_OK;
            }
        }
    for (int64_t b2 = *B - K > blo ? *B - K : blo; b2 <= bhi && b2 <= *N && b2 <= *B + K; b2++)
        if ((*N - b2) % K == 0) {
            *B = b2;
            return RV_OK;
        }
    return base_error(RV_ERR_BOUNDS,
                      "structure %s: its children are read at fixed positions (%s[n, c], c a "
                      "constant), so a random batch holds full trees (every internal node with "
                      "%d children, N - B a multiple of %d), and N = %lld, B = %lld allow none",
                      st->name, st->child->name, K, K, (long long)*N, (long long)*B);
}

typedef struct FixedRead {
    const Ufun *child;
    bool found;
} FixedRead;

static void fixed_read_fn(const Expr *e, void *ctx) {
    FixedRead *f = ctx;
    int64_t c;
    if (e->kind == EX_UFCALL && e->u.uf == f->child) {
        const Expr *k = e->args[1];
        while (k->kind == EX_CAST)
            k = k->args[0];
        f->found = f->found || ir_is_const_int(k, &c);
    }
}

/* Does the program read st's children at a fixed position, child[n, c]
 * with c a constant (a binary TreeRNN's h[child[n, 1], j])? Then it is
 * defined only on nodes with more than c children wherever it reads
 * one: full trees, whose internal nodes all have K, are the batches it
 * is defined on whatever its conditions. */
static bool fixed_child_reads(const Module *m, const Structure *st) {
    FixedRead f = {st->child, false};
    for (int i = 0; i < m->tensors.len && !f.found; i++) {
        const Op *op = m->tensors.data[i]->op;
        const Expr *es[] = {op->pred, op->body, op->else_body};
        for (int j = 0; j < 3; j++)
            if (es[j])
                ir_visit(es[j], fixed_read_fn, &f);
    }
    return f.found;
}

/* Draws structure st's batch and binds it (not its data columns). */
static rv_status draw_structure(rv_bindings *b, const Structure *st, uint64_t seed) {
    int plan = (int)(seed % PLAN_COUNT);
    Draw d = {.r = interp_rng_for(seed, st->name), .K = st->max_children,
              .dag = st->kind == RV_STRUCT_DAG, .full = fixed_child_reads(b->m, st)};
    int64_t N = 0, B = 0;
    rv_status s = pick_sizes(b, st, plan, &d, &N, &B);
    if (s != RV_OK)
        return s;
    /* B sizes of at least 1 node each, the other N - B nodes spread among
     * them at random (the deep chain's all to one structure), K at a time
     * for full trees */
    int32_t *size = base_xmalloc(sizeof(int32_t) * (size_t)B);
    int unit = d.full ? d.K : 1;
    for (int64_t i = 0; i < B; i++)
        size[i] = 1;
    if (plan == PLAN_CHAIN || plan == PLAN_BUSHY)
        size[interp_rng_int(&d.r, 0, B - 1)] += (int32_t)(N - B);
    else
        for (int64_t i = B; i < N; i += unit)
            size[interp_rng_int(&d.r, 0, B - 1)] += unit;
    d.bs = rv_structs_new(st->kind, d.K, 0);
    d.parent = base_xmalloc(sizeof(int32_t) * (size_t)N);
    d.depth = base_xmalloc(sizeof(int32_t) * (size_t)N);
    d.nkids = base_xmalloc(sizeof(int32_t) * (size_t)N);
    d.tbegin = base_xmalloc(sizeof(int32_t) * (size_t)(N + 1));
    d.tchild = base_xmalloc(sizeof(int32_t) * (size_t)N);
    d.begin = base_xmalloc(sizeof(int32_t) * (size_t)(N + 1));
    d.child = base_xmalloc(sizeof(int32_t) * (size_t)N * (size_t)d.K);
    d.leaves = base_xmalloc(sizeof(int32_t) * (size_t)N);
    for (int64_t i = 0; s == RV_OK && i < B; i++) {
        Style style = plan == PLAN_CHAIN   ? STYLE_CHAIN
                      : plan == PLAN_BUSHY ? STYLE_BUSHY
                                           : (Style)interp_rng_int(&d.r, 0, 2);
        s = add_structure(&d, size[i], style);
    }
    rv_linear lin = {0};
    if (s == RV_OK)
        s = rv_linearize(d.bs, &lin);
    if (s == RV_OK)
        s = interp_bindings_set_linear(b, st, &lin, false);
    rv_linear_free(&lin);
    rv_structs_free(d.bs);
    base_free(d.parent);
    base_free(d.depth);
    base_free(d.nkids);
    base_free(d.tbegin);
    base_free(d.tchild);
    base_free(d.begin);
    base_free(d.child);
    base_free(d.leaves);
    base_free(size);
    return s;
}

rv_status interp_draw_structures(rv_bindings *b, uint64_t seed) {
    const Module *m = b->m;
    interp_bindings_sync(b);
    for (int i = 0; i < m->structures.len; i++) {
        const Structure *st = m->structures.data[i];
        if (b->uf_arr[st->child->id] || b->uf_arr[st->nchild->id])
            continue; /* bound by the caller (or drawn before) */
        rv_status s = draw_structure(b, st, seed);
        if (s != RV_OK)
            return s;
    }
    return RV_OK;
}
