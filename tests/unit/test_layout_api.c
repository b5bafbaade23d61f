/*
 * test_layout_api.c — rv_bindings_layout: a tensor's or UF domain's
 * canonical layout under bound sizes and UF arrays (the row starts of
 * ragged levels), and its errors.
 */
#include "harness.h"

static const char *SRC = "size B in 1..8\n"
                         "ufun len[b < B] in 0..5\n"
                         "input A : f32[b < B, h < 2, l < len[b] pad 4]\n"
                         "O[b, h, l] = 2 * A[b, h, l]\n";

static rv_module *load(void) {
    rv_module *m = NULL;
    if (rv_module_parse("layout.rv", SRC, &m) != RV_OK)
        fprintf(stderr, "%s\n", rv_last_error());
    return m;
}

static void test_ragged_levels(void) {
    rv_module *m = load();
    rv_bindings *b = rv_bindings_new(m);
    int64_t n = 3;
    rv_array *len = rv_array_new(RV_I32, 1, &n);
    int32_t lens[3] = {2, 0, 3};
    memcpy(rv_array_data(len), lens, sizeof lens);
    CHECK(rv_bindings_set_size(b, "B", 3) == RV_OK);
    CHECK(rv_bindings_set_array(b, "len", len) == RV_OK);
    /* the input need not be bound; the output's layout is the same */
    const char *names[2] = {"A", "O"};
    for (int t = 0; t < 2; t++) {
        rv_layout *l = NULL;
        CHECK(rv_bindings_layout(b, names[t], &l) == RV_OK);
        CHECK_EQ_INT(rv_layout_ndim(l), 3);
        CHECK(strcmp(rv_layout_dim_name(l, 2), "l") == 0);
        CHECK(rv_layout_dim_name(l, 3) == NULL);
        int64_t counts[4] = {1, 3, 6, 10};
        for (int k = 0; k <= 3; k++)
            CHECK_EQ_INT(rv_layout_count(l, k), counts[k]);
        CHECK_EQ_INT(rv_layout_extent(l, 0), 3);
        CHECK_EQ_INT(rv_layout_extent(l, 1), 2);
        CHECK_EQ_INT(rv_layout_extent(l, 2), -1);
        CHECK(rv_layout_starts(l, 0) == NULL && rv_layout_starts(l, 1) == NULL);
        /* canonical, so no storage padding: rows of 2, 2, 0, 0, 3, 3 */
        const int64_t *s = rv_layout_starts(l, 2);
        int64_t want[7] = {0, 2, 4, 4, 4, 7, 10};
        for (int r = 0; s && r < 7; r++)
            CHECK_EQ_INT(s[r], want[r]);
        rv_layout_free(l);
    }
    rv_layout *d = NULL;
    CHECK(rv_bindings_layout(b, "len", &d) == RV_OK); /* a UF's domain */
    CHECK_EQ_INT(rv_layout_ndim(d), 1);
    CHECK_EQ_INT(rv_layout_count(d, 1), 3);
    rv_layout_free(d);
    rv_bindings_free(b);
    rv_array_free(len);
    rv_module_free(m);
}

static void test_errors(void) {
    rv_module *m = load();
    rv_bindings *b = rv_bindings_new(m);
    rv_layout *l = (rv_layout *)&l;
    CHECK(rv_bindings_layout(b, "Q", &l) == RV_ERR_ARG && l == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "no tensor or ufun named 'Q'");
    CHECK(rv_bindings_layout(b, "A", &l) == RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "size B is not bound");
    CHECK(rv_bindings_set_size(b, "B", 2) == RV_OK);
    int64_t n = 2;
    rv_array *len = rv_array_new(RV_I64, 1, &n);
    rv_array_set_i64(len, 1, 6);
    CHECK(rv_bindings_set_array(b, "len", len) == RV_OK);
    CHECK(rv_bindings_layout(b, "A", &l) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "len[1] = 6 outside declared range 0..5");
    CHECK(rv_bindings_layout(NULL, "A", &l) == RV_ERR_ARG);
    rv_layout_free(NULL);
    CHECK_EQ_INT(rv_layout_ndim(NULL), 0);
    rv_bindings_free(b);
    rv_array_free(len);
    rv_module_free(m);
}

int main(void) {
    RUN(test_ragged_levels);
    RUN(test_errors);
    return harness_report();
}
