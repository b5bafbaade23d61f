/*
 * test_build_linear.c — rv_structs_build_linear, a server's batch from its
 * request's arrays to a linearized batch in one call of the library: the
 * same rv_linear as rv_structs_clear + rv_structs_add_many + rv_linearize,
 * call after call on batches of changing sizes into one rv_linear (the
 * batch cleared first each time); a batch add_many refuses fails with its
 * message, leaves the batch empty and the rv_linear as it was; NULL
 * arguments are refused.
 */
#include <string.h>

#include "harness.h"

/* A batch of `count` trees as a request carries it: tree j a left comb of
 * 2 * (j % 5) + 1 nodes (node i's children i+1 and i+2 for even i), word
 * of node i (i * 3 + j) % 11. Returns the nodes. */
static int32_t request(int count, int32_t *sizes, int32_t *begin, int64_t *nbegin, int32_t *child,
                       int64_t *nchild, int32_t *word) {
    int64_t b = 0, c = 0, node = 0;
    for (int j = 0; j < count; j++) {
        int32_t n = 2 * (j % 5) + 1;
        sizes[j] = n;
        int32_t k = 0;
        for (int32_t i = 0; i < n; i++) {
            begin[b++] = k;
            if (i % 2 == 0 && i + 2 < n) {
                child[c++] = i + 1;
                child[c++] = i + 2;
                k += 2;
            }
            word[node++] = (i * 3 + j) % 11;
        }
        begin[b++] = k;
    }
    *nbegin = b;
    *nchild = c;
    return (int32_t)node;
}

static void check_same_linear(const rv_linear *a, const rv_linear *b) {
    CHECK_EQ_INT(a->num_nodes, b->num_nodes);
    CHECK_EQ_INT(a->num_structs, b->num_structs);
    CHECK_EQ_INT(a->first_leaf, b->first_leaf);
    CHECK_EQ_INT(a->num_batches, b->num_batches);
    if (a->num_nodes != b->num_nodes || a->num_batches != b->num_batches ||
        a->num_structs != b->num_structs)
        return;
    size_t n = (size_t)a->num_nodes * sizeof(int32_t);
    CHECK(memcmp(a->batch_begin, b->batch_begin, (size_t)a->num_batches * sizeof(int32_t)) == 0);
    CHECK(memcmp(a->batch_length, b->batch_length, (size_t)a->num_batches * sizeof(int32_t)) == 0);
    CHECK(memcmp(a->child, b->child, n * (size_t)a->max_children) == 0);
    CHECK(memcmp(a->nchild, b->nchild, n) == 0);
    CHECK(memcmp(a->data, b->data, n * (size_t)a->width) == 0);
    CHECK(memcmp(a->root, b->root, (size_t)a->num_structs * sizeof(int32_t)) == 0);
    CHECK(memcmp(a->node_of, b->node_of, n) == 0);
    CHECK(memcmp(a->linear_of, b->linear_of, n) == 0);
}

static void test_same_as_steps(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1), *ref = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    rv_linear lin = {0}, want = {0};
    static int32_t sizes[40], begin[400], child[400], word[400];
    const int counts[] = {1, 10, 3, 40, 2, 40, 1};
    for (size_t t = 0; t < sizeof counts / sizeof counts[0]; t++) {
        int count = counts[t];
        int64_t nb, nc;
        int32_t n = request(count, sizes, begin, &nb, child, &nc, word);
        CHECK_EQ_INT(rv_structs_build_linear(bs, count, sizes, begin, nb, child, nc, word, n, &lin),
                     RV_OK);
        rv_structs_clear(ref);
        CHECK_EQ_INT(rv_structs_add_many(ref, count, sizes, begin, nb, child, nc, word, n), RV_OK);
        CHECK_EQ_INT(rv_linearize(ref, &want), RV_OK);
        CHECK_EQ_INT(rv_structs_count(bs), count); /* cleared first: only this request's */
        CHECK_EQ_INT(lin.num_nodes, n);
        check_same_linear(&lin, &want);
    }
    /* no data: -1 everywhere, as add_many */
    int64_t nb, nc;
    request(3, sizes, begin, &nb, child, &nc, word);
    CHECK_EQ_INT(rv_structs_build_linear(bs, 3, sizes, begin, nb, child, nc, NULL, 0, &lin), RV_OK);
    for (int32_t i = 0; i < lin.num_nodes; i++)
        CHECK_EQ_INT(lin.data[i], -1);
    rv_linear_free(&lin);
    rv_linear_free(&want);
    rv_structs_free(bs);
    rv_structs_free(ref);
}

static void test_refusals(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1), *ref = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    rv_linear lin = {0}, want = {0};
    static int32_t sizes[10], begin[100], child[100], word[100];
    int64_t nb, nc;
    int32_t n = request(10, sizes, begin, &nb, child, &nc, word);
    CHECK_EQ_INT(rv_structs_build_linear(bs, 10, sizes, begin, nb, child, nc, word, n, &lin), RV_OK);
    CHECK_EQ_INT(rv_structs_add_many(ref, 10, sizes, begin, nb, child, nc, word, n), RV_OK);
    CHECK_EQ_INT(rv_linearize(ref, &want), RV_OK);
    rv_linear before = lin;

    /* a cycle in structure 1 (its 3 nodes: 0 -> 1, 2; node 2's child 0) */
    int32_t s2[] = {1, 3}, b2[] = {0, 0, 0, 2, 2, 3}, c2[] = {1, 2, 0};
    CHECK_EQ_INT(rv_structs_build_linear(bs, 2, s2, b2, 6, c2, 3, NULL, 0, &lin), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure 1");
    CHECK_EQ_INT(rv_structs_count(bs), 0); /* cleared, none added */
    CHECK(memcmp(&lin, &before, sizeof lin) == 0);
    check_same_linear(&lin, &want);

    /* wrong lengths: one offset too many, data short of a node */
    CHECK_EQ_INT(rv_structs_build_linear(bs, 10, sizes, begin, nb + 1, child, nc, word, n, &lin),
                 RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "but child_begin has");
    CHECK_EQ_INT(rv_structs_build_linear(bs, 10, sizes, begin, nb, child, nc, word, n - 1, &lin),
                 RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "values of data");
    CHECK_EQ_INT(rv_structs_build_linear(bs, 0, sizes, begin, nb, child, nc, word, n, &lin),
                 RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no structures");
    CHECK(memcmp(&lin, &before, sizeof lin) == 0);
    check_same_linear(&lin, &want);

    /* NULL batch or rv_linear */
    CHECK_EQ_INT(rv_structs_build_linear(NULL, 10, sizes, begin, nb, child, nc, word, n, &lin),
                 RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no batch or no rv_linear");
    CHECK_EQ_INT(rv_structs_build_linear(bs, 10, sizes, begin, nb, child, nc, word, n, NULL),
                 RV_ERR_ARG);
    /* and the batch still serves the next request */
    CHECK_EQ_INT(rv_structs_build_linear(bs, 10, sizes, begin, nb, child, nc, word, n, &lin), RV_OK);
    check_same_linear(&lin, &want);
    rv_linear_free(&lin);
    rv_linear_free(&want);
    rv_structs_free(bs);
    rv_structs_free(ref);
}

int main(void) {
    RUN(test_same_as_steps);
    RUN(test_refusals);
    return harness_report();
}
