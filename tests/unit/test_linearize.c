/*
 * test_linearize.c — unit tests for src/recursive: building batches of
 * structures (children lists, parent arrays, generators, s-expressions, the
 * SST files), the refusal of every kind of bad structure, and the
 * linearizer's numbering (Cortex appendix B).
 *
 * check_linear() checks a linearization against the batch it came from,
 * from first principles: the permutation is a bijection; batches are
 * consecutive and cover 0..N-1 with the highest level first; a node's batch
 * is its level (0 without children, else 1 + its children's largest), so
 * every child is computed in an earlier batch and numbered higher; leaves
 * are exactly the numbers >= first_leaf; children, data and roots are the
 * original ones renumbered; the unrolled partition (check_unroll_props). It
 * runs on random structures of every kind and size and on batches mixing
 * them.
 */
#include <stdlib.h>
#include <unistd.h>

#include "base/base.h"
#include "harness.h"

/* ---- a small deterministic generator ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return n ? (uint32_t)(rng_state % n) : 0;
}

/* ---- the property check ---- */

/* The unrolled batch of head v (include/ravel.h): 0 when none of its
 * grandchildren is internal, else 1 + the largest batch of those. */
static int32_t unroll_batch_of(const rv_linear *lin, int32_t v, int32_t *memo) {
    if (memo[v] >= 0)
        return memo[v];
    int32_t K = lin->max_children, u = 0;
    for (int32_t k = 0; k < lin->nchild[v]; k++) {
        int32_t c = lin->child[(size_t)v * K + k];
        for (int32_t j = 0; j < lin->nchild[c]; j++) {
            int32_t g = lin->child[(size_t)c * K + j];
            if (lin->nchild[g] > 0 && unroll_batch_of(lin, g, memo) + 1 > u)
                u = unroll_batch_of(lin, g, memo) + 1;
        }
    }
    return memo[v] = u;
}

/* The unrolled partition from first principles: none when some node has
 * two parents; else the heads (internal nodes at even depth, depth from
 * the parents) in batch order, each in its batch, then every other node in
 * increasing order; and every internal node is a head or the child of
 * exactly one head. */
static void check_unroll_props(const rv_linear *lin) {
    int32_t n = lin->num_nodes, K = lin->max_children;
    int32_t *parent = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *memo = malloc(sizeof(int32_t) * (size_t)n);
    bool forest = true;
    for (int32_t v = 0; v < n; v++)
        parent[v] = -1, memo[v] = -1;
    for (int32_t v = 0; v < n; v++)
        for (int32_t k = 0; k < lin->nchild[v]; k++) {
            int32_t c = lin->child[(size_t)v * K + k];
            forest &= parent[c] < 0;
            parent[c] = v;
        }
    if (!forest) {
        CHECK_EQ_INT(lin->num_unroll, 0);
        free(parent);
        free(memo);
        return;
    }
    int32_t at = 0;
    for (int32_t u = 0; u < lin->num_unroll; u++) {
        CHECK_EQ_INT(lin->unroll_begin[u], at);
        CHECK(lin->unroll_length[u] > 0);
        for (int32_t j = at; j < at + lin->unroll_length[u] && j < n; j++) {
            int32_t v = lin->unroll_node[j], d = 0;
            for (int32_t p = parent[v]; p >= 0; p = parent[p])
                d++;
            CHECK(lin->nchild[v] > 0 && d % 2 == 0);
            CHECK_EQ_INT(unroll_batch_of(lin, v, memo), u);
            CHECK(j == at || lin->unroll_node[j - 1] < v);
        }
        at += lin->unroll_length[u];
    }
    int32_t heads = at;
    char *seen = calloc((size_t)n, 1); /* unroll_node is a permutation */
    for (int32_t v = 0; v < n; v++) {
        int32_t d = 0;
        for (int32_t p = parent[v]; p >= 0; p = parent[p])
            d++;
        heads -= lin->nchild[v] > 0 && d % 2 == 0; /* each listed above */
        int32_t x = lin->unroll_node[v];
        CHECK(x >= 0 && x < n && !seen[x]);
        if (x >= 0 && x < n)
            seen[x] = 1;
    }
    free(seen);
    CHECK_EQ_INT(heads, 0);
    for (int32_t j = at + 1; j < n; j++)
        CHECK(lin->unroll_node[j - 1] < lin->unroll_node[j]);
    for (int32_t j = at; j < n; j++) { /* the others: leaves, or a head's child */
        int32_t v = lin->unroll_node[j];
        CHECK(lin->nchild[v] == 0 || (parent[v] >= 0 && memo[parent[v]] >= 0));
    }
    free(parent);
    free(memo);
}

static int check_linear_props(const rv_structs *bs, rv_linear *lin) {
    int before = harness_failed;
    int32_t n = rv_structs_num_nodes(bs);
    int k = rv_structs_max_children(bs), w = rv_structs_width(bs), B = rv_structs_count(bs);
    CHECK_EQ_INT(lin->num_nodes, n);
    CHECK_EQ_INT(lin->num_structs, B);
    CHECK_EQ_INT(lin->max_children, k);
    CHECK_EQ_INT(lin->width, w);
    if (harness_failed != before)
        return 0;

    /* Bijection. */
    char *seen = calloc((size_t)n, 1);
    for (int32_t v = 0; v < n; v++) {
        int32_t g = lin->node_of[v];
        CHECK(g >= 0 && g < n);
        if (g < 0 || g >= n)
            break;
        CHECK(!seen[g]);
        seen[g] = 1;
        CHECK_EQ_INT(lin->linear_of[g], v);
    }
    free(seen);

    /* Batches: consecutive, nonempty, highest first, leaves last. */
    int32_t *batch = malloc(sizeof(int32_t) * (size_t)n);
    int32_t next = 0;
    for (int32_t b = lin->num_batches - 1; b >= 0; b--) {
        CHECK_EQ_INT(lin->batch_begin[b], next);
        CHECK(lin->batch_length[b] > 0);
        for (int32_t v = next; v < next + lin->batch_length[b] && v < n; v++)
            batch[v] = b;
        next += lin->batch_length[b];
    }
    CHECK_EQ_INT(next, n);
    CHECK_EQ_INT(lin->first_leaf, lin->num_batches ? lin->batch_begin[0] : 0);
    if (harness_failed != before) {
        free(batch);
        return 0;
    }

    /* Every node against its original. */
    for (int s = 0; s < B; s++) {
        int32_t g0 = rv_structs_node_begin(bs, s), size = rv_structs_size(bs, s);
        char *has_parent = calloc((size_t)size, 1);
        for (int32_t i = 0; i < size; i++) {
            int32_t v = lin->linear_of[g0 + i];
            const int32_t *ch;
            int nc = rv_structs_children(bs, s, i, &ch);
            CHECK_EQ_INT(lin->nchild[v], nc);
            CHECK_EQ_INT(v >= lin->first_leaf, nc == 0);
            int32_t level = 0;
            for (int j = 0; j < nc; j++) {
                has_parent[ch[j]] = 1;
                int32_t c = lin->child[(size_t)v * (size_t)k + (size_t)j];
                CHECK_EQ_INT(c, lin->linear_of[g0 + ch[j]]);
                CHECK(c > v);
                CHECK(batch[c] < batch[v]);
                if (batch[c] + 1 > level)
                    level = batch[c] + 1;
            }
            CHECK_EQ_INT(batch[v], level);
            for (int j = nc; j < k; j++)
                CHECK_EQ_INT(lin->child[(size_t)v * (size_t)k + (size_t)j], v);
            const int32_t *d = rv_structs_data(bs, s, i);
            for (int c = 0; c < w; c++)
                CHECK_EQ_INT(lin->data[(size_t)v * (size_t)w + (size_t)c], d[c]);
        }
        int roots = 0;
        for (int32_t i = 0; i < size; i++)
            if (!has_parent[i]) {
                roots++;
                CHECK_EQ_INT(lin->root[s], lin->linear_of[g0 + i]);
                CHECK_EQ_INT(rv_structs_root(bs, s), i);
            }
        CHECK_EQ_INT(roots, 1);
        free(has_parent);
        /* Within a batch, a structure's nodes keep their order. */
        for (int32_t i = 1; i < size; i++)
            for (int32_t j = 0; j < i && size <= 64; j++)
                if (batch[lin->linear_of[g0 + i]] == batch[lin->linear_of[g0 + j]])
                    CHECK(lin->linear_of[g0 + j] < lin->linear_of[g0 + i]);
    }
    free(batch);
    /* rv_linearize leaves the partition to rv_linear_unroll */
    CHECK_EQ_INT(lin->num_unroll, 0);
    CHECK_EQ_INT(rv_linear_unroll(lin), RV_OK);
    check_unroll_props(lin);
    return harness_failed == before;
}

/* The property check of one linearization counts as one check (its
 * per-node checks would count millions over the SST), and failures are
 * still reported one by one. */
static int check_linear(const rv_structs *bs, rv_linear *lin) {
    int passed = harness_passed;
    int ok = check_linear_props(bs, lin);
    harness_passed = passed + ok;
    return ok;
}

static void linearize_and_check(const rv_structs *bs) {
    rv_linear lin = {0};
    rv_status st = rv_linearize(bs, &lin);
    CHECK_EQ_INT(st, RV_OK);
    if (st == RV_OK)
        check_linear(bs, &lin);
    rv_linear_free(&lin);
}

/* ---- random structures ---- */

/* Random data rows. */
static int32_t *random_data(int32_t n, int w) {
    int32_t *d = malloc(sizeof(int32_t) * (size_t)(n * w + 1));
    for (int32_t i = 0; i < n * w; i++)
        d[i] = (int32_t)rnd(1000);
    return d;
}

/* A random tree of n nodes with at most k children, from a parent array
 * with node labels shuffled (so the parent is not always the lower index).
 * shape 0: random, 1: a chain, 2: as wide as k allows. */
static rv_status add_random_tree(rv_structs *bs, int32_t n, int k, int shape) {
    int32_t *par = malloc(sizeof(int32_t) * (size_t)n), *nch = calloc((size_t)n, sizeof(int32_t));
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)n), *out = malloc(sizeof(int32_t) * (size_t)n);
    par[0] = -1;
    for (int32_t i = 1; i < n; i++) {
        int32_t p;
        if (shape == 1)
            p = i - 1;
        else if (shape == 2)
            p = (i - 1) / k;
        else
            do
                p = (int32_t)rnd((uint32_t)i);
            while (nch[p] >= k);
        par[i] = p;
        nch[p]++;
    }
    for (int32_t i = 0; i < n; i++)
        perm[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)rnd((uint32_t)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int32_t i = 0; i < n; i++)
        out[perm[i]] = par[i] < 0 ? -1 : perm[par[i]];
    int32_t *d = random_data(n, rv_structs_width(bs));
    rv_status st = rv_structs_add_parents(bs, n, out, d);
    free(par);
    free(nch);
    free(perm);
    free(out);
    free(d);
    return st;
}

/* A random connected single-root DAG: a random tree (parent < child in
 * creation order) plus extra edges from lower to higher creation index
 * (acyclic), at most k children each, labels shuffled. */
static rv_status add_random_dag(rv_structs *bs, int32_t n, int k) {
    int32_t *begin = malloc(sizeof(int32_t) * (size_t)(n + 1));
    int32_t *child = malloc(sizeof(int32_t) * (size_t)n * (size_t)k + 1);
    int32_t *nch = calloc((size_t)n, sizeof(int32_t)), *perm = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *tmp = malloc(sizeof(int32_t) * (size_t)n * (size_t)k + 1);
    for (int32_t i = 1; i < n; i++) {
        int32_t p;
        do
            p = (int32_t)rnd((uint32_t)i);
        while (nch[p] >= k);
        tmp[(size_t)p * (size_t)k + (size_t)nch[p]++] = i;
    }
    for (int32_t e = 0; e < n; e++) { /* extra edges */
        int32_t p = (int32_t)rnd((uint32_t)n), c = (int32_t)rnd((uint32_t)n);
        if (p >= c || nch[p] >= k)
            continue;
        bool dup = false;
        for (int j = 0; j < nch[p]; j++)
            dup |= tmp[(size_t)p * (size_t)k + (size_t)j] == c;
        if (!dup)
            tmp[(size_t)p * (size_t)k + (size_t)nch[p]++] = c;
    }
    for (int32_t i = 0; i < n; i++)
        perm[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = (int32_t)rnd((uint32_t)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    /* new label perm[i] for old node i: build children lists by new label */
    int32_t *inv = malloc(sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < n; i++)
        inv[perm[i]] = i;
    begin[0] = 0;
    for (int32_t v = 0; v < n; v++) {
        int32_t old = inv[v];
        begin[v + 1] = begin[v] + nch[old];
        for (int j = 0; j < nch[old]; j++)
            child[begin[v] + j] = perm[tmp[(size_t)old * (size_t)k + (size_t)j]];
    }
    int32_t *d = random_data(n, rv_structs_width(bs));
    rv_status st = rv_structs_add_children(bs, n, begin, child, d);
    free(begin);
    free(child);
    free(nch);
    free(perm);
    free(tmp);
    free(inv);
    free(d);
    return st;
}

/* ---- tests: the linearizer's properties ---- */

static void test_single_nodes(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    int32_t data = 7, parent = -1;
    CHECK_EQ_INT(rv_structs_add_parents(bs, 1, &parent, &data), RV_OK);
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(lin.num_batches, 1);
    CHECK_EQ_INT(lin.first_leaf, 0);
    CHECK_EQ_INT(lin.root[0], 0);
    CHECK_EQ_INT(lin.data[0], 7);
    CHECK_EQ_INT(lin.child[0], 0); /* the pad slot holds the node itself */
    check_linear(bs, &lin);
    /* two nodes: the root before its leaf */
    int32_t par2[2] = {1, -1}, d2[2] = {10, 20};
    CHECK_EQ_INT(rv_structs_add_parents(bs, 2, par2, d2), RV_OK);
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(lin.num_batches, 2);
    CHECK_EQ_INT(lin.first_leaf, 1);
    CHECK_EQ_INT(lin.batch_begin[0], 1); /* leaves: the single node, then node 0 of structure 1 */
    CHECK_EQ_INT(lin.batch_length[0], 2);
    CHECK_EQ_INT(lin.root[1], 0);
    CHECK_EQ_INT(lin.data[0], 20);
    CHECK_EQ_INT(lin.data[1], 7);
    CHECK_EQ_INT(lin.data[2], 10);
    CHECK_EQ_INT(lin.child[0], 2);
    check_linear(bs, &lin);
    rv_linear_free(&lin);
    rv_structs_free(bs);
}

/* The example of docs/recursion.md: node numbers worked out by hand. */
static void test_numbering_by_hand(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_add_sexpr(bs, "ex", "(3 (2 It) (4 (2 's) (3 fine)))"), RV_OK);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 1, NULL), RV_OK);
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    /* levels: s0: root 2, node 2 (4) 1, leaves It 's fine; s1: root 1, two leaves */
    CHECK_EQ_INT(lin.num_batches, 3);
    CHECK_EQ_INT(lin.batch_begin[2], 0);
    CHECK_EQ_INT(lin.batch_length[2], 1);
    CHECK_EQ_INT(lin.batch_begin[1], 1);
    CHECK_EQ_INT(lin.batch_length[1], 2);
    CHECK_EQ_INT(lin.first_leaf, 3);
    CHECK_EQ_INT(lin.batch_length[0], 5);
    int32_t want_node_of[8] = {0, 2, 5, 1, 3, 4, 6, 7};
    for (int v = 0; v < 8; v++)
        CHECK_EQ_INT(lin.node_of[v], want_node_of[v]);
    CHECK_EQ_INT(lin.child[0 * 2 + 0], 3); /* It */
    CHECK_EQ_INT(lin.child[0 * 2 + 1], 1); /* (4 ...) */
    CHECK_EQ_INT(lin.child[1 * 2 + 0], 4);
    CHECK_EQ_INT(lin.child[1 * 2 + 1], 5);
    CHECK_EQ_INT(lin.root[0], 0);
    CHECK_EQ_INT(lin.root[1], 2);
    CHECK_EQ_INT(lin.data[3], 0); /* It: word 0 */
    CHECK(lin.data[0] == -1 && lin.data[1] == -1 && lin.data[2] == -1);
    check_linear(bs, &lin);
    rv_linear_free(&lin);
    rv_structs_free(bs);
}

static void test_random_trees(void) {
    static const int32_t sizes[] = {1, 2, 3, 5, 17, 100, 1000};
    rv_linear lin = {0}; /* reused across all batches: grows and shrinks */
    for (int k = 1; k <= 5; k++)
        for (int shape = 0; shape < 3; shape++)
            for (int z = 0; z < RV_COUNT(sizes); z++) {
                rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, k, 2);
                for (int s = 0; s < 1 + (int)rnd(6); s++)
                    CHECK_EQ_INT(
                        add_random_tree(bs, 1 + (int32_t)rnd((uint32_t)sizes[z]), k, shape), RV_OK);
                CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
                check_linear(bs, &lin);
                rv_structs_free(bs);
            }
    rv_linear_free(&lin);
}

static void test_deep_and_wide(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 200, 0);
    CHECK_EQ_INT(add_random_tree(bs, 100000, 1, 1), RV_OK); /* a chain: 100000 levels */
    CHECK_EQ_INT(add_random_tree(bs, 201, 200, 2), RV_OK);  /* a star */
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(lin.num_batches, 100000);
    CHECK_EQ_INT(lin.batch_length[0], 201);
    CHECK_EQ_INT(lin.batch_length[1], 2);
    check_linear(bs, &lin);
    rv_linear_free(&lin);
    rv_structs_free(bs);

    rv_structs *seq = rv_structs_new(RV_STRUCT_SEQUENCE, 1, 1);
    for (int32_t len = 1; len <= 40; len += 13)
        CHECK_EQ_INT(rv_structs_add_sequence(seq, len, NULL), RV_OK);
    linearize_and_check(seq);
    rv_structs_free(seq);
}

static void test_perfect_trees(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    for (int h = 0; h <= 7; h++) {
        CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, h, NULL), RV_OK);
        CHECK_EQ_INT(rv_structs_size(bs, h), (1 << (h + 1)) - 1);
    }
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(lin.num_batches, 8);
    CHECK_EQ_INT(lin.batch_length[7], 1);
    CHECK_EQ_INT(lin.batch_length[0], 255); /* 1 + 2 + 4 + ... + 128 leaves */
    check_linear(bs, &lin);
    rv_linear_free(&lin);
    rv_structs_free(bs);
}

static void test_grid_dags(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_DAG, 2, 1);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 10, 10, NULL), RV_OK);
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(lin.num_batches, 19); /* node (i, j) is on level i + j */
    CHECK_EQ_INT(lin.first_leaf, 99);  /* only (0, 0) is a leaf */
    CHECK_EQ_INT(lin.root[0], 0);
    for (int b = 0; b < 19; b++)
        CHECK_EQ_INT(lin.batch_length[b], b < 10 ? b + 1 : 19 - b);
    check_linear(bs, &lin);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 1, 7, NULL), RV_OK);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 3, 1, NULL), RV_OK);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 4, 9, NULL), RV_OK);
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    check_linear(bs, &lin);
    rv_linear_free(&lin);
    rv_structs_free(bs);
}

static void test_random_dags(void) {
    for (int k = 1; k <= 4; k++)
        for (int rep = 0; rep < 6; rep++) {
            rv_structs *bs = rv_structs_new(RV_STRUCT_DAG, k, 1);
            for (int s = 0; s < 1 + (int)rnd(5); s++)
                CHECK_EQ_INT(add_random_dag(bs, 1 + (int32_t)rnd(rep < 3 ? 8 : 400), k), RV_OK);
            linearize_and_check(bs);
            rv_structs_free(bs);
        }
}

/* Trees, chains, perfect trees, s-expressions and (in DAG batches) grids
 * and random DAGs in one batch. */
static void test_mixed_batches(void) {
    for (int rep = 0; rep < 20; rep++) {
        bool dag = rep % 2;
        rv_structs *bs = rv_structs_new(dag ? RV_STRUCT_DAG : RV_STRUCT_TREE, 3, 2);
        for (int s = 0; s < 12; s++) {
            rv_status st = RV_OK;
            uint32_t pick = rnd(6);
            if (!dag && (pick == 3 || pick == 4))
                pick = 5;
            switch (pick) {
            case 0:
                st = add_random_tree(bs, 1 + (int32_t)rnd(60), 3, (int)rnd(3));
                break;
            case 1:
                st = rv_structs_add_sequence(bs, 1 + (int32_t)rnd(30), NULL);
                break;
            case 2:
                st = rv_structs_add_perfect_tree(bs, (int)rnd(6), NULL);
                break;
            case 3:
                st = rv_structs_add_grid(bs, 1 + (int)rnd(10), 1 + (int)rnd(10), NULL);
                break;
            case 4:
                st = add_random_dag(bs, 1 + (int32_t)rnd(80), 3);
                break;
            default:
                st = rv_structs_add_sexpr(bs, "mixed", "(1 (2 a) (3 (4 b)) (5 c))");
                break;
            }
            CHECK_EQ_INT(st, RV_OK);
        }
        linearize_and_check(bs);
        rv_structs_free(bs);
    }
}

/* ---- the readers ---- */

static void test_sexpr(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 2);
    CHECK_EQ_INT(rv_structs_add_sexpr(bs, "ex", " (3 (2 It)\n (4 (2 's) (3 fine))) \n"), RV_OK);
    CHECK_EQ_INT(rv_structs_size(bs, 0), 5);
    CHECK_EQ_INT(rv_structs_root(bs, 0), 0);
    const int32_t *ch;
    CHECK_EQ_INT(rv_structs_children(bs, 0, 0, &ch), 2);
    CHECK(ch[0] == 1 && ch[1] == 2);
    CHECK_EQ_INT(rv_structs_children(bs, 0, 2, &ch), 2);
    CHECK(ch[0] == 3 && ch[1] == 4);
    CHECK_EQ_INT(rv_structs_vocab_size(bs), 3);
    CHECK(strcmp(rv_structs_word(bs, rv_structs_data(bs, 0, 3)[0]), "'s") == 0);
    CHECK_EQ_INT(rv_structs_data(bs, 0, 2)[0], -1);
    CHECK_EQ_INT(rv_structs_data(bs, 0, 2)[1], 4);
    CHECK_EQ_INT(rv_structs_data(bs, 0, 4)[1], 3);
    CHECK(rv_structs_word(bs, 3) == NULL);
    /* the same word again: the same id */
    CHECK_EQ_INT(rv_structs_add_sexpr(bs, "ex", "(1 fine)"), RV_OK);
    CHECK_EQ_INT(rv_structs_data(bs, 1, 0)[0], 2);
    /* a unary chain and a deep tree (the parser keeps its own stack) */
    CHECK_EQ_INT(rv_structs_add_sexpr(bs, "ex", "(0 (1 (2 x)))"), RV_OK);
    Buf deep = {0};
    for (int i = 0; i < 20000; i++)
        buf_puts(&deep, "(1 ");
    buf_puts(&deep, "(2 leaf)");
    for (int i = 0; i < 20000; i++)
        buf_putc(&deep, ')');
    CHECK_EQ_INT(rv_structs_add_sexpr(bs, "deep", buf_str(&deep)), RV_OK);
    buf_free(&deep);
    linearize_and_check(bs);
    rv_structs_free(bs);
}

static void expect_sexpr_error(const char *text, const char *msg) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    rv_status st = rv_structs_add_sexpr(bs, "t.txt", text);
    CHECK(st != RV_OK);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    CHECK_EQ_INT(rv_structs_count(bs), 0);
    rv_structs_free(bs);
}

static void test_sexpr_errors(void) {
    expect_sexpr_error("", "t.txt:1:1: expected '(' to begin a tree, found the end");
    expect_sexpr_error("(3 (2 a) (2 b)", "t.txt:1:15: the text ends inside a tree");
    expect_sexpr_error("(x (2 a))", "t.txt:1:2: the label is not an integer");
    expect_sexpr_error("(3)", "t.txt:1:3: a node needs a word or subtrees");
    expect_sexpr_error("(3 (2 a) b)", "t.txt:1:10: a word after subtrees");
    expect_sexpr_error("(3 a b)", "t.txt:1:6: expected ')' after the word of a leaf");
    expect_sexpr_error("(3 a))", "t.txt:1:6: text after the end of the tree");
    expect_sexpr_error("(3 a) (4 b)", "t.txt:1:7: text after the end");
    expect_sexpr_error("\n\n  )", "t.txt:3:3: ')' without a matching '('");
    expect_sexpr_error("word", "t.txt:1:1: expected '(' to begin a tree");
    expect_sexpr_error("(3 (", "t.txt:1:5: expected a label");
    expect_sexpr_error("(3 (1 a) (1 b) (1 c))",
                       "t.txt:1: structure 0: node 0 has 3 children, more than the 2 declared");
}

static void test_sexpr_file(void) {
    char dir[] = "/tmp/rv_linearize_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/trees.txt", dir);
    const char *good = "(1 (2 a) (3 b))\n\n(4 c)\n";
    CHECK_EQ_INT(base_write_file(path, good, strlen(good)), RV_OK);
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_read_sexpr_file(bs, path), RV_OK);
    CHECK_EQ_INT(rv_structs_count(bs), 2);
    const char *bad = "(1 (2 a) (3 b))\n(4 c\n";
    CHECK_EQ_INT(base_write_file(path, bad, strlen(bad)), RV_OK);
    CHECK_EQ_INT(rv_structs_read_sexpr_file(bs, path), RV_ERR_SYNTAX);
    CHECK_STR_CONTAINS(rv_last_error(), "trees.txt:2:5: expected ')' after the word of a leaf");
    CHECK_EQ_INT(rv_structs_count(bs), 2); /* the file's first tree was taken back */
    linearize_and_check(bs);
    unlink(path);
    CHECK_EQ_INT(rv_structs_read_sexpr_file(bs, path), RV_ERR_IO);
    rmdir(dir);
    rv_structs_free(bs);
}

static void test_sst(void) {
    const char *dir = harness_sst_dir();
    if (!dir) {
        printf("test_sst: skipped (no SST data; set RAVEL_SST_DIR)\n");
        return;
    }
    rv_structs *test = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_read_sst(test, dir, RV_SST_TEST), RV_OK);
    CHECK_EQ_INT(rv_structs_count(test), 2210);
    rv_structs *all = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_read_sst(all, dir, RV_SST_ALL), RV_OK);
    CHECK_EQ_INT(rv_structs_count(all), 11855);
    CHECK_EQ_INT(rv_structs_vocab_size(all), rv_structs_vocab_size(test));
    /* sentence 1 ("The Rock is destined ...", train): 36 tokens, 71 nodes */
    CHECK_EQ_INT(rv_structs_size(all, 0), 71);
    CHECK(strcmp(rv_structs_word(all, rv_structs_data(all, 0, 0)[0]), "The") == 0);
    CHECK(strcmp(rv_structs_word(all, rv_structs_data(all, 0, 1)[0]), "Rock") == 0);
    CHECK_EQ_INT(rv_structs_data(all, 0, 36)[0], -1);
    CHECK_EQ_INT(rv_structs_root(all, 0), 70);
    /* leaves are exactly the tokens: a node without children has a word */
    int not_token = 0;
    for (int s = 0; s < rv_structs_count(test); s++)
        for (int32_t i = 0; i < rv_structs_size(test, s); i++) {
            const int32_t *ch;
            not_token += (rv_structs_children(test, s, i, &ch) == 0) !=
                         (rv_structs_data(test, s, i)[0] >= 0);
        }
    CHECK_EQ_INT(not_token, 0);
    linearize_and_check(test);
    /* batch sizes 1 and 10, as the benchmark runs them */
    rv_structs *small = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    for (int s = 0; s < 10; s++) {
        int32_t n = rv_structs_size(test, s), *par = malloc(sizeof(int32_t) * (size_t)n);
        for (int32_t i = 0; i < n; i++)
            par[i] = -1;
        for (int32_t i = 0; i < n; i++) {
            const int32_t *ch;
            int nc = rv_structs_children(test, s, i, &ch);
            for (int j = 0; j < nc; j++)
                par[ch[j]] = i;
        }
        CHECK_EQ_INT(rv_structs_add_parents(small, n, par, rv_structs_data(test, s, 0)), RV_OK);
        free(par);
        if (s == 0 || s == 9)
            linearize_and_check(small);
    }
    rv_structs_free(small);
    rv_structs_free(test);
    rv_structs_free(all);
}

/* Writes the three SST files into dir. */
static void write_sst(const char *dir, const char *tree, const char *tokens, const char *split) {
    char p[256];
    snprintf(p, sizeof p, "%s/STree.txt", dir);
    CHECK_EQ_INT(base_write_file(p, tree, strlen(tree)), RV_OK);
    snprintf(p, sizeof p, "%s/SOStr.txt", dir);
    CHECK_EQ_INT(base_write_file(p, tokens, strlen(tokens)), RV_OK);
    snprintf(p, sizeof p, "%s/datasetSplit.txt", dir);
    CHECK_EQ_INT(base_write_file(p, split, strlen(split)), RV_OK);
}

/* Removes write_sst's files and dir. */
static void remove_sst(const char *dir) {
    char p[256];
    const char *names[] = {"STree.txt", "SOStr.txt", "datasetSplit.txt"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

static void expect_sst(const char *dir, const char *tree, const char *tokens, const char *split,
                       rv_status want, const char *msg) {
    write_sst(dir, tree, tokens, split);
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_read_sst(bs, dir, RV_SST_ALL), want);
    if (want != RV_OK) {
        CHECK_STR_CONTAINS(rv_last_error(), msg);
        CHECK_EQ_INT(rv_structs_count(bs), 0);
    } else {
        CHECK_EQ_INT(rv_structs_count(bs), 2);
    }
    rv_structs_free(bs);
}

static void test_sst_errors(void) {
    char dir[] = "/tmp/rv_sst_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *split = "sentence_index,splitset_label\n1,1\n2,2\n";
    expect_sst(dir, "3|3|0\n0\n", "a|b\nc\n", split, RV_OK, "");
    expect_sst(dir, "3|3|0\n0\n", "a|b\nc\n", "sentence_index,splitset_label\n1,1\n3,2\n",
               RV_ERR_IO, "datasetSplit.txt:3: expected 'sentence,split' with sentence 2");
    expect_sst(dir, "3|3|0\n", "a|b\nc\n", split, RV_ERR_IO, "disagree on the number of sentences");
    expect_sst(dir, "3|3|0\n0\n", "a|b|c|d\nc\n", split, RV_ERR_IO,
               "STree.txt:1: 3 nodes for the 4 tokens");
    expect_sst(dir, "3|3|0\n0|x\n", "a|b\nc\n", split, RV_ERR_IO,
               "STree.txt:2: expected parent pointers");
    expect_sst(dir, "2|3|0\n0\n", "a|b\nc\n", split, RV_ERR_IO,
               "STree.txt:1: node 1's parent is node 2, a token");
    expect_sst(dir, "3|3|0\n0\n", "a||b\nc\n", split, RV_ERR_IO, "SOStr.txt:1: an empty token");
    expect_sst(dir, "3|3|0\n2|3|2\n", "a|b\nc\n", split, RV_ERR_ARG,
               "STree.txt:2: structure 1: cycle through nodes 1 -> 2 -> 1");
    expect_sst(dir, "3|3|0|0\n0\n", "a|b\nc\n", split, RV_ERR_ARG,
               "STree.txt:1: structure 0 has several roots (nodes 2 and 3");
    expect_sst(dir, "4|4|4|0\n0\n", "a|b|c\nc\n", split, RV_ERR_ARG,
               "STree.txt:1: structure 0: node 3 has 3 children, more than the 2 declared");
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_read_sst(bs, "/nonexistent", RV_SST_TEST), RV_ERR_IO);
    CHECK_EQ_INT(rv_structs_read_sst(bs, dir, (rv_sst_split)7), RV_ERR_ARG);
    rv_structs_free(bs);
    remove_sst(dir);
}

/* ---- refusals: one test per kind of bad structure ---- */

/* Adds children lists (n nodes) to a fresh batch holding one good
 * structure first, expects `msg`, and checks the batch did not change. */
static void expect_refused(rv_struct_kind kind, int k, int32_t n, const int32_t *begin,
                           const int32_t *child, const char *msg) {
    rv_structs *bs = rv_structs_new(kind, k, 1);
    CHECK_EQ_INT(rv_structs_add_sequence(bs, 1, NULL), RV_OK);
    rv_status st = rv_structs_add_children(bs, n, begin, child, NULL);
    CHECK_EQ_INT(st, RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    CHECK_EQ_INT(rv_structs_count(bs), 1);
    CHECK_EQ_INT(rv_structs_num_nodes(bs), 1);
    linearize_and_check(bs); /* and the batch still works */
    rv_structs_free(bs);
}

static void test_error_cycle(void) {
    int32_t begin[4] = {0, 1, 2, 3}, child[3] = {1, 2, 0};
    expect_refused(RV_STRUCT_DAG, 2, 3, begin, child,
                   "structure 1: cycle through nodes 0 -> 1 -> 2 -> 0");
    expect_refused(RV_STRUCT_TREE, 2, 3, begin, child, "structure 1: cycle through nodes");
    int32_t b2[2] = {0, 1}, self[1] = {0};
    expect_refused(RV_STRUCT_DAG, 2, 1, b2, self, "structure 1: cycle through nodes 0 -> 0");
    /* a cycle beside a proper root: 0 -> 1, 2 <-> 3 */
    int32_t b3[5] = {0, 1, 1, 2, 3}, c3[3] = {1, 3, 2};
    expect_refused(RV_STRUCT_DAG, 2, 4, b3, c3, "structure 1: cycle through nodes 2 -> 3 -> 2");
    /* parent arrays: 1 <-> 2 under no root */
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 0);
    int32_t par[3] = {-1, 2, 1};
    CHECK_EQ_INT(rv_structs_add_parents(bs, 3, par, NULL), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure 0: cycle through nodes 1 -> 2 -> 1");
    rv_structs_free(bs);
}

static void test_error_child_out_of_range(void) {
    int32_t begin[3] = {0, 1, 1}, child[1] = {2};
    expect_refused(RV_STRUCT_TREE, 2, 2, begin, child,
                   "structure 1: node 0: child 0 is node 2, outside 0..1");
    int32_t neg[1] = {-1};
    expect_refused(RV_STRUCT_DAG, 2, 2, begin, neg, "structure 1: node 0: child 0 is node -1");
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 0);
    int32_t par[2] = {-1, 5};
    CHECK_EQ_INT(rv_structs_add_parents(bs, 2, par, NULL), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure 0: node 1: parent 5 is outside 0..1");
    rv_structs_free(bs);
}

static void test_error_too_many_children(void) {
    int32_t begin[5] = {0, 3, 3, 3, 3}, child[3] = {1, 2, 3};
    expect_refused(RV_STRUCT_TREE, 2, 4, begin, child,
                   "structure 1: node 0 has 3 children, more than the 2 declared");
    rv_structs *bs = rv_structs_new(RV_STRUCT_DAG, 1, 0);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 2, 2, NULL), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure 0: node 3 has 2 children, more than the 1");
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 1, NULL), RV_ERR_ARG);
    rv_structs_free(bs);
    /* a sequence batch takes chains only */
    int32_t b2[4] = {0, 2, 2, 2}, c2[2] = {1, 2};
    expect_refused(RV_STRUCT_SEQUENCE, 1, 3, b2, c2, "node 0 has 2 children, more than the 1");
}

static void test_error_two_parents(void) {
    /* 0 -> 1, 0 -> 2, 1 -> 3, 2 -> 3: fine as a DAG, not as a tree */
    int32_t begin[5] = {0, 2, 3, 4, 4}, child[4] = {1, 2, 3, 3};
    expect_refused(RV_STRUCT_TREE, 2, 4, begin, child,
                   "structure 1: node 3 has two parents (nodes 1 and 2); in a tree");
    expect_refused(RV_STRUCT_SEQUENCE, 1, 4, begin, child, "node 0 has 2 children");
    rv_structs *bs = rv_structs_new(RV_STRUCT_DAG, 2, 0);
    CHECK_EQ_INT(rv_structs_add_children(bs, 4, begin, child, NULL), RV_OK);
    linearize_and_check(bs);
    rv_structs_free(bs);
    /* a child listed twice by one node */
    int32_t b2[3] = {0, 2, 2}, c2[2] = {1, 1};
    expect_refused(RV_STRUCT_DAG, 2, 2, b2, c2, "structure 1: node 0 lists node 1 twice");
    expect_refused(RV_STRUCT_TREE, 2, 2, b2, c2, "structure 1: node 0 lists node 1 twice");
}

static void test_error_roots(void) {
    int32_t begin[4] = {0, 1, 1, 1}, child[1] = {1};
    expect_refused(RV_STRUCT_TREE, 2, 3, begin, child,
                   "structure 1 has several roots (nodes 0 and 2 have no parent); a tree has one");
    /* a disconnected DAG: two grids side by side */
    int32_t b2[5] = {0, 1, 1, 2, 2}, c2[2] = {1, 3};
    expect_refused(RV_STRUCT_DAG, 2, 4, b2, c2,
                   "structure 1 has several roots (nodes 0 and 2 have no parent); a DAG has one "
                   "root (add each part");
    /* connected, but two outputs: 0 -> 2, 1 -> 2 */
    int32_t b3[4] = {0, 1, 2, 2}, c3[2] = {2, 2};
    expect_refused(RV_STRUCT_DAG, 2, 3, b3, c3, "structure 1 has several roots (nodes 0 and 1");
    /* no root at all: 0 <-> 1 (the cycle is what is reported) */
    int32_t b4[3] = {0, 1, 2}, c4[2] = {1, 0};
    expect_refused(RV_STRUCT_TREE, 2, 2, b4, c4, "structure 1: cycle through nodes 0 -> 1 -> 0");
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 0);
    int32_t par[3] = {-1, 0, -1};
    CHECK_EQ_INT(rv_structs_add_parents(bs, 3, par, NULL), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure 0 has several roots (nodes 0 and 2");
    rv_structs_free(bs);
}

static void test_error_empty(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "empty batch");
    int32_t begin[1] = {0};
    CHECK_EQ_INT(rv_structs_add_children(bs, 0, begin, NULL, NULL), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure 0 has no nodes");
    CHECK_EQ_INT(rv_structs_add_sequence(bs, 0, NULL), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_add_parents(bs, -3, NULL, NULL), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_add_grid(bs, 0, 5, NULL), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, -1, NULL), RV_ERR_ARG);
    int32_t bad[3] = {0, 2, 1}, child[2] = {1, 0};
    CHECK_EQ_INT(rv_structs_add_children(bs, 2, bad, child, NULL), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure 0: node 1: its children list ends (1) before");
    /* a batch emptied by clear is empty again */
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 2, NULL), RV_OK);
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    rv_structs_clear(bs);
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_add_sequence(bs, 3, NULL), RV_OK);
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    check_linear(bs, &lin);
    rv_linear_free(&lin);
    rv_structs_free(bs);
    /* no batch: an error, not a crash */
    CHECK_EQ_INT(rv_structs_add_sequence(NULL, 3, NULL), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "rv_structs_add_sequence: no batch");
    CHECK_EQ_INT(rv_structs_add_children(NULL, 1, begin, NULL, NULL), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_add_parents(NULL, 1, begin, NULL), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(NULL, 1, NULL), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_add_grid(NULL, 2, 2, NULL), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_add_sexpr(NULL, "x", "(1 a)"), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_read_sexpr_file(NULL, "x"), RV_ERR_ARG);
    CHECK_EQ_INT(rv_structs_read_sst(NULL, "x", RV_SST_ALL), RV_ERR_ARG);
    CHECK_EQ_INT(rv_linearize(NULL, &lin), RV_ERR_ARG);
    rv_structs_free(NULL);
    rv_linear_free(NULL);
    /* bad batch arguments */
    CHECK(rv_structs_new(RV_STRUCT_SEQUENCE, 2, 1) == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "a sequence has K = 1");
    CHECK(rv_structs_new(RV_STRUCT_TREE, 0, 1) == NULL);
    CHECK(rv_structs_new(RV_STRUCT_TREE, 2, -1) == NULL);
    CHECK(rv_structs_new(RV_STRUCT_KIND_COUNT, 2, 1) == NULL);
}

/* Out of memory in the linearizer: an error, an empty rv_linear, no leak. */
static void test_linearize_oom(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 5, NULL), RV_OK);
    for (long fail = 1; fail <= 13; fail++) {
        rv_linear lin = {0};
        base_alloc_fail_after(fail);
        rv_status st = rv_linearize(bs, &lin);
        base_alloc_fail_after(0);
        if (fail <= 12) {
            CHECK_EQ_INT(st, RV_ERR_OOM);
            CHECK(lin.child == NULL && lin.cap_nodes == 0);
        } else {
            CHECK_EQ_INT(st, RV_OK);
        }
        rv_linear_free(&lin);
    }
    rv_structs_free(bs);
}

/* SST's children are left before right, whatever their numbers: the
 * sentence "a b c" as ((a b) c), the internal node (a b) numbered 4 after
 * the token c (3; 1-based), and ((a b) (c d)) whose right child is numbered
 * before its left one. The parent pointers alone would list c first. */
static void test_sst_child_order(void) {
    char dir[] = "/tmp/rv_sst_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    write_sst(dir, "4|4|5|5|0\n6|6|5|5|7|7|0\n", "a|b|c\na|b|c|d\n",
              "sentence_index,splitset_label\n1,2\n2,2\n");
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_read_sst(bs, dir, RV_SST_TEST), RV_OK);
    const int32_t *ch;
    CHECK_EQ_INT(rv_structs_children(bs, 0, 4, &ch), 2);
    CHECK_EQ_INT(ch[0], 3); /* (a b) */
    CHECK_EQ_INT(ch[1], 2); /* c */
    CHECK_EQ_INT(rv_structs_children(bs, 0, 3, &ch), 2);
    CHECK_EQ_INT(ch[0], 0);
    CHECK_EQ_INT(ch[1], 1);
    CHECK_EQ_INT(rv_structs_children(bs, 1, 6, &ch), 2);
    CHECK_EQ_INT(ch[0], 5); /* (a b) */
    CHECK_EQ_INT(ch[1], 4); /* (c d) */
    rv_structs_free(bs);
    remove_sst(dir);
}

/* The unrolled partition of a chain of 5 (node t's child t - 1), numbered
 * 0 (t = 4, the root) .. 4 (the leaf): heads 2 (with its child 3, whose
 * child is the leaf) in batch 0 and 0 (with 1, whose child is head 2) in
 * batch 1; and a DAG batch whose node has two parents has none. */
static void test_unroll_partition(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_SEQUENCE, 1, 0);
    CHECK_EQ_INT(rv_structs_add_sequence(bs, 5, NULL), RV_OK);
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(lin.num_unroll, 0); /* only on request */
    CHECK_EQ_INT(rv_linear_unroll(&lin), RV_OK);
    CHECK_EQ_INT(lin.num_unroll, 2);
    const int32_t node[] = {2, 0, 1, 3, 4};
    for (int j = 0; j < 5; j++)
        CHECK_EQ_INT(lin.unroll_node[j], node[j]);
    CHECK(lin.unroll_begin[0] == 0 && lin.unroll_length[0] == 1);
    CHECK(lin.unroll_begin[1] == 1 && lin.unroll_length[1] == 1);
    rv_structs_free(bs);
    /* a diamond: 3 -> {1, 2} -> 0 */
    bs = rv_structs_new(RV_STRUCT_DAG, 2, 0);
    const int32_t begin[] = {0, 0, 1, 2, 4}, child[] = {0, 0, 1, 2};
    CHECK_EQ_INT(rv_structs_add_children(bs, 4, begin, child, NULL), RV_OK);
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(rv_linear_unroll(&lin), RV_OK);
    CHECK_EQ_INT(lin.num_unroll, 0);
    rv_structs_free(bs);
    rv_linear_free(&lin);
    rv_linear none = {0};
    CHECK_EQ_INT(rv_linear_unroll(&none), RV_ERR_ARG);
    CHECK_EQ_INT(rv_linear_unroll(NULL), RV_ERR_ARG);
}

/* One rv_linear reused across batches of different sizes, larger, then
 * smaller, then larger again (its buffers only grow): every linearization
 * and its partition are those of a fresh rv_linear, so nothing of an
 * earlier, larger batch shows through. */
static void test_reuse_across_sizes(void) {
    const int heights[] = {7, 2, 9, 1, 6};
    rv_linear lin = {0};
    for (int r = 0; r < 5; r++) {
        rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
        int32_t n = (1 << (heights[r] + 1)) - 1;
        int32_t *words = calloc((size_t)n, sizeof(int32_t));
        for (int32_t i = 0; i < n; i++)
            words[i] = (int32_t)rnd(1000);
        CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, heights[r], words), RV_OK);
        CHECK_EQ_INT(rv_structs_add_sequence(bs, 3 + r, NULL), RV_OK);
        rv_linear fresh = {0};
        CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
        CHECK_EQ_INT(rv_linearize(bs, &fresh), RV_OK);
        check_linear_props(bs, &lin); /* rv_linear_unroll(&lin) too */
        CHECK_EQ_INT(rv_linear_unroll(&fresh), RV_OK);
        int32_t N = fresh.num_nodes, K = fresh.max_children;
        CHECK(lin.num_nodes == N && lin.num_batches == fresh.num_batches &&
              lin.num_unroll == fresh.num_unroll && lin.first_leaf == fresh.first_leaf);
        CHECK(!memcmp(lin.child, fresh.child, sizeof(int32_t) * (size_t)N * (size_t)K));
        CHECK(!memcmp(lin.nchild, fresh.nchild, sizeof(int32_t) * (size_t)N));
        CHECK(!memcmp(lin.data, fresh.data, sizeof(int32_t) * (size_t)N));
        CHECK(!memcmp(lin.batch_begin, fresh.batch_begin,
                      sizeof(int32_t) * (size_t)fresh.num_batches));
        CHECK(!memcmp(lin.batch_length, fresh.batch_length,
                      sizeof(int32_t) * (size_t)fresh.num_batches));
        CHECK(!memcmp(lin.unroll_node, fresh.unroll_node, sizeof(int32_t) * (size_t)N));
        CHECK(!memcmp(lin.unroll_begin, fresh.unroll_begin,
                      sizeof(int32_t) * (size_t)fresh.num_unroll));
        CHECK(!memcmp(lin.unroll_length, fresh.unroll_length,
                      sizeof(int32_t) * (size_t)fresh.num_unroll));
        rv_linear_free(&fresh);
        free(words);
        rv_structs_free(bs);
    }
    rv_linear_free(&lin);
}

/* rv_structs_add_many: one call adds what add_children adds one by one,
 * checks each array against its length (nothing read past one), and on
 * any error adds nothing, naming the structure and node. */
static void expect_many_refused(int count, const int32_t *sizes, const int32_t *begin,
                                int64_t nbegin, const int32_t *child, int64_t nchild,
                                const int32_t *data, int64_t ndata, const char *msg) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_add_sequence(bs, 1, NULL), RV_OK);
    CHECK_EQ_INT(rv_structs_add_many(bs, count, sizes, begin, nbegin, child, nchild, data, ndata),
                 RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    CHECK_EQ_INT(rv_structs_count(bs), 1);
    CHECK_EQ_INT(rv_structs_num_nodes(bs), 1);
    linearize_and_check(bs);
    rv_structs_free(bs);
}

static void test_add_many(void) {
    /* (0: 1 2) (1) (0: 1, 1: 2) */
    int32_t sizes[3] = {3, 1, 3}, begin[10] = {0, 2, 2, 2, 0, 0, 0, 1, 2, 2};
    int32_t child[4] = {1, 2, 1, 2}, data[7] = {-1, 4, 5, 6, -1, -1, 7};
    rv_structs *one = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    rv_structs *many = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_add_children(one, 3, begin, child, data), RV_OK);
    CHECK_EQ_INT(rv_structs_add_children(one, 1, begin + 4, NULL, data + 3), RV_OK);
    CHECK_EQ_INT(rv_structs_add_children(one, 3, begin + 6, child + 2, data + 4), RV_OK);
    CHECK_EQ_INT(rv_structs_add_many(many, 3, sizes, begin, 10, child, 4, data, 7), RV_OK);
    CHECK_EQ_INT(rv_structs_count(many), 3);
    rv_linear a = {0}, b = {0};
    CHECK_EQ_INT(rv_linearize(one, &a), RV_OK);
    CHECK_EQ_INT(rv_linearize(many, &b), RV_OK);
    CHECK(a.num_nodes == 7 && b.num_nodes == 7 && a.num_batches == b.num_batches);
    CHECK(!memcmp(a.child, b.child, sizeof(int32_t) * 14));
    CHECK(!memcmp(a.data, b.data, sizeof(int32_t) * 7));
    CHECK(!memcmp(a.node_of, b.node_of, sizeof(int32_t) * 7));
    rv_linear_free(&a);
    rv_linear_free(&b);
    rv_structs_free(one);
    rv_structs_free(many);
    /* lengths: child_begin, child and data each used up exactly */
    expect_many_refused(3, sizes, begin, 9, child, 4, data, 7,
                        "structure 3: its 3 nodes need 4 values of child_begin, 3 are left of 9");
    expect_many_refused(3, sizes, begin, 11, child, 4, data, 7,
                        "have 10 offsets, 4 children and 7 data values, but child_begin has 11");
    expect_many_refused(3, sizes, begin, 10, child, 3, data, 7,
                        "structure 3: node 2: child_begin is 2, outside 0..1");
    expect_many_refused(3, sizes, begin, 10, child, 5, data, 7, "4 children and 7 data values, "
                                                                "but child_begin has 10, child 5");
    expect_many_refused(3, sizes, begin, 10, child, 4, data, 6,
                        "structure 3: its 3 nodes need 3 values of data, 2 are left of 6");
    /* the structures' own checks, the bad one named by its index in the batch */
    int32_t twice[4] = {1, 1, 1, 2}, cyc[4] = {1, 2, 2, 1};
    expect_many_refused(3, sizes, begin, 10, twice, 4, NULL, 0,
                        "structure 1: node 0 lists node 1 twice");
    expect_many_refused(3, sizes, begin, 10, cyc, 4, NULL, 0,
                        "structure 3: cycle through nodes 1 -> 1");
    int32_t zero[2] = {3, 0};
    expect_many_refused(2, zero, begin, 10, child, 4, NULL, 0, "structure 2 has no nodes (n = 0)");
    int32_t out[4] = {1, 2, 1, 9};
    expect_many_refused(3, sizes, begin, 10, out, 4, NULL, 0,
                        "structure 3: node 1: child 0 is node 9, outside 0..2");
    expect_many_refused(0, sizes, begin, 10, child, 4, NULL, 0, "no structures (count = 0)");
    expect_many_refused(3, sizes, NULL, 10, child, 4, NULL, 0, "an array is NULL");
}

/* Offsets that go down again end the children lists before any is read:
 * `child` holds child_begin[n] values, and node 0's list (0..5) would read
 * past the 2 given here (an exact heap block, so ASan sees any overread)
 * had node 1's offset not been checked first. */
static void test_offsets_checked_before_reads(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 8, 1);
    int32_t begin[3] = {0, 5, 2};
    int32_t *child = malloc(2 * sizeof *child);
    child[0] = 1;
    child[1] = 1;
    CHECK_EQ_INT(rv_structs_add_children(bs, 2, begin, child, NULL), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure 0: node 1: its children list ends (2) before "
                                        "it begins (5)");
    CHECK_EQ_INT(rv_structs_count(bs), 0);
    free(child);
    rv_structs_free(bs);
}

/* compute_levels tries children-before-parents, then parents-first, each
 * stopping at its first edge the wrong way, and only then the traversal:
 * a structure ordered for a while and then not must still have its cycle
 * found (after an ordered prefix in either direction), and its levels
 * computed whole (not left from the ordered pass that stopped). */
static void test_levels_ordered_prefix(void) {
    /* children first up to node 3, then 4 <-> 5 */
    int32_t b1[7] = {0, 0, 1, 2, 4, 5, 6}, c1[6] = {0, 1, 2, 4, 5, 4};
    expect_refused(RV_STRUCT_DAG, 2, 6, b1, c1, "structure 1: cycle through nodes 4 -> 5 -> 4");
    /* parents first from node 5 down to 3, then 1 <-> 2 under the root 0 */
    int32_t b2[7] = {0, 2, 3, 4, 5, 6, 6}, c2[6] = {1, 3, 2, 1, 4, 5};
    expect_refused(RV_STRUCT_DAG, 2, 6, b2, c2, "structure 1: cycle through nodes 1 -> 2 -> 1");
    expect_refused(RV_STRUCT_TREE, 2, 6, b2, c2, "structure 1: node 1 has two parents");
    /* heap order but for one node listed by two parents: refused as a tree */
    int32_t b3[6] = {0, 2, 3, 4, 4, 4}, c3[4] = {1, 2, 3, 3};
    expect_refused(RV_STRUCT_TREE, 2, 5, b3, c3,
                   "structure 1: node 3 has two parents (nodes 1 and 2); in a tree");
    /* no cycle: 1 -> 0 in order, then the root 2 -> 3 -> 1 against it; and
     * parents first from 4 down to 3, then the root 0 -> 2 -> 1 -> 3 -> 4 */
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 0);
    int32_t b4[5] = {0, 0, 1, 2, 3}, c4[3] = {0, 3, 1};
    CHECK_EQ_INT(rv_structs_add_children(bs, 4, b4, c4, NULL), RV_OK);
    int32_t b5[6] = {0, 1, 2, 3, 4, 4}, c5[4] = {2, 3, 1, 4};
    CHECK_EQ_INT(rv_structs_add_children(bs, 5, b5, c5, NULL), RV_OK);
    CHECK_EQ_INT(rv_structs_root(bs, 0), 2);
    CHECK_EQ_INT(rv_structs_root(bs, 1), 0);
    linearize_and_check(bs); /* levels checked against the children */
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(lin.num_batches, 5); /* the chain of 5: levels 0..4 */
    rv_linear_free(&lin);
    rv_structs_free(bs);
}

/* ---- every small structure against the rules, from first principles ---- */

/* The rules of rv_structs_add_children, checked the slow way: every list
 * in range and at most K long, no child listed twice by one node, one
 * parent per node outside DAGs, no cycle (a node's level, by fixpoint,
 * settles below n), exactly one root. True and the levels and root when
 * the structure is acceptable. */
static bool reference_accepts(rv_struct_kind kind, int K, int32_t n, const int32_t *begin,
                              const int32_t *child, int32_t *level, int32_t *root) {
    int32_t parents[16] = {0};
    for (int32_t v = 0; v < n; v++) {
        if (begin[v + 1] < begin[v] || begin[v + 1] - begin[v] > K)
            return false;
        for (int32_t e = begin[v]; e < begin[v + 1]; e++) {
            if (child[e] < 0 || child[e] >= n)
                return false;
            for (int32_t f = begin[v]; f < e; f++)
                if (child[f] == child[e])
                    return false;
            parents[child[e]]++;
        }
    }
    int32_t roots = 0;
    for (int32_t v = 0; v < n; v++) {
        if (parents[v] > 1 && kind != RV_STRUCT_DAG)
            return false;
        if (parents[v] == 0)
            *root = v, roots++;
        level[v] = 0;
    }
    /* levels by relaxation: n rounds settle an acyclic structure; a change
     * in round n+1 is a cycle */
    for (int32_t round = 0; round <= n; round++) {
        bool changed = false;
        for (int32_t v = 0; v < n; v++)
            for (int32_t e = begin[v]; e < begin[v + 1]; e++)
                if (level[child[e]] + 1 > level[v])
                    level[v] = level[child[e]] + 1, changed = true;
        if (!changed)
            return roots == 1;
    }
    return false;
}

/* Random structures of up to 8 nodes, most of them acceptable and in one
 * of the two orders the checks take in one pass (children before parents,
 * parents first; else a random topological order), a quarter with one
 * child disturbed and some wider than K, so the one-pass checks meet every
 * error in their own order as well as inputs they must hand on to the
 * general checks: add_children agrees with the reference on every one,
 * accepted or refused, and on the root of those it accepts (their levels:
 * linearize_and_check). */
static void test_orders_against_reference(void) {
    static const rv_struct_kind kinds[] = {RV_STRUCT_TREE, RV_STRUCT_DAG, RV_STRUCT_SEQUENCE};
    int agreed = 0, accepted = 0, trials = 6000;
    for (int trial = 0; trial < trials; trial++) {
        rv_struct_kind kind = kinds[rnd(3)];
        int K = kind == RV_STRUCT_SEQUENCE ? 1 : 1 + (int)rnd(3);
        int32_t n = 1 + (int32_t)rnd(8), pos[8];
        /* pos: the topological order, the root first */
        int order = (int)rnd(3); /* 0: children first, 1: parents first, 2: any */
        for (int32_t v = 0; v < n; v++)
            pos[v] = order == 0 ? n - 1 - v : v;
        for (int32_t v = n - 1; order == 2 && v > 0; v--) {
            int32_t j = (int32_t)rnd((uint32_t)v + 1), t = pos[v];
            pos[v] = pos[j], pos[j] = t;
        }
        /* edges[u][.]: a parent before each node in pos, a sequence's the
         * one just before; a DAG's extra edges also go down the order */
        int32_t edges[8][8], ne[8] = {0};
        for (int32_t i = 1; i < n; i++) {
            int32_t p = kind == RV_STRUCT_SEQUENCE ? i - 1 : (int32_t)rnd((uint32_t)i);
            edges[pos[p]][ne[pos[p]]++] = pos[i];
            if (kind == RV_STRUCT_DAG && i > 1 && rnd(3) == 0) {
                int32_t q = (int32_t)rnd((uint32_t)i);
                if (q != p)
                    edges[pos[q]][ne[pos[q]]++] = pos[i];
            }
        }
        int32_t begin[9] = {0}, child[64];
        for (int32_t v = 0; v < n; v++) {
            begin[v + 1] = begin[v];
            for (int32_t j = 0; j < ne[v]; j++)
                child[begin[v + 1]++] = edges[v][j];
        }
        if (rnd(4) == 0 && begin[n] > 0) /* one child anywhere, or out of range */
            child[rnd((uint32_t)begin[n])] = (int32_t)rnd((uint32_t)n + 2) - 1;
        int32_t level[8], root = -1;
        bool want = reference_accepts(kind, K, n, begin, child, level, &root);
        rv_structs *bs = rv_structs_new(kind, K, 1);
        int32_t data[8] = {0};
        bool got = rv_structs_add_children(bs, n, begin, child, data) == RV_OK;
        CHECK_EQ_INT(got, want);
        if (got && want) {
            accepted++;
            CHECK_EQ_INT(rv_structs_root(bs, 0), root);
            linearize_and_check(bs); /* levels from the children, first principles */
        }
        agreed += got == want;
        rv_structs_free(bs);
    }
    CHECK(accepted > trials / 4 && accepted < trials * 3 / 4); /* both outcomes well represented */
    CHECK_EQ_INT(agreed, trials);
}

int main(void) {
    RUN(test_single_nodes);
    RUN(test_numbering_by_hand);
    RUN(test_random_trees);
    RUN(test_deep_and_wide);
    RUN(test_perfect_trees);
    RUN(test_grid_dags);
    RUN(test_random_dags);
    RUN(test_mixed_batches);
    RUN(test_sexpr);
    RUN(test_sexpr_errors);
    RUN(test_sexpr_file);
    RUN(test_sst);
    RUN(test_sst_errors);
    RUN(test_error_cycle);
    RUN(test_error_child_out_of_range);
    RUN(test_error_too_many_children);
    RUN(test_error_two_parents);
    RUN(test_error_roots);
    RUN(test_error_empty);
    RUN(test_linearize_oom);
    RUN(test_sst_child_order);
    RUN(test_unroll_partition);
    RUN(test_reuse_across_sizes);
    RUN(test_add_many);
    RUN(test_offsets_checked_before_reads);
    RUN(test_levels_ordered_prefix);
    RUN(test_orders_against_reference);
    return harness_report();
}
