/*
 * test_ragged_place.c — ragged tensors computed at a loop of their
 * reader, cached in tiles and accumulated in tiles (issue 14; docs/
 * schedules.md, "Ragged tensors"), compiled and compared with the
 * interpreter on chosen row lengths: empty rows, rows of 1, rows equal to
 * the tile or pad multiple, all rows equal, the longest rows the UF's
 * range allows; and the code they lower to (a tile of the UF's declared
 * bound on the stack, one kernel where the schedule fuses, zeros past a
 * row's end in a padded copy).
 */
#include <stdint.h>

#include "harness.h"

static char cache_dir[] = "/tmp/ravel_test_ragged_place_XXXXXX";

/* Row lengths per case: B = n, len[b] = rows[b] (every UF below is in
 * 0..9, and 4 is each program's tile or pad multiple). */
typedef struct Rows {
    int n;
    int32_t rows[8];
} Rows;

static const Rows row_cases[] = {
    {1, {0}},                      /* one empty row */
    {3, {0, 0, 0}},                /* only empty rows */
    {1, {1}},                      /* one row of 1 */
    {4, {4, 4, 4, 4}},             /* all equal to the multiple */
    {3, {8, 8, 8}},                /* all equal, two multiples */
    {3, {9, 9, 9}},                /* the longest rows */
    {8, {0, 1, 4, 9, 3, 8, 5, 2}}, /* everything at once */
};

/* Compiles `text` and, for each row case, compares every output with the
 * interpreter's; returns the generated C (owned by the
 * caller) for the lowering checks. */
static char *check_rows(const char *name, const char *text) {
    rv_module *m = NULL;
    rv_status st = rv_module_parse(name, text, &m);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s: %s\n", name, rv_last_error());
        return NULL;
    }
    rv_compile_options opt = {.cache_dir = cache_dir};
    rv_program *p = NULL;
    st = rv_program_compile(m, &opt, &p);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "%s: %s\n", name, rv_last_error());
        rv_module_free(m);
        return NULL;
    }
    char *src = strdup(rv_program_source(p));
    for (size_t k = 0; k < sizeof row_cases / sizeof row_cases[0]; k++) {
        const Rows *c = &row_cases[k];
        int64_t shape[1] = {c->n};
        rv_array *len = rv_array_new(RV_I32, 1, shape);
        memcpy(rv_array_data(len), c->rows, sizeof(int32_t) * (size_t)c->n);
        rv_bindings *want = rv_bindings_new(m), *got = rv_bindings_new(m);
        rv_bindings *both[2] = {want, got};
        for (int i = 0; i < 2; i++) {
            CHECK_EQ_INT(rv_bindings_set_size(both[i], "B", c->n), RV_OK);
            CHECK_EQ_INT(rv_bindings_set_array(both[i], "len", len), RV_OK);
            CHECK_EQ_INT(rv_bindings_randomize(both[i], 7 + k), RV_OK);
        }
        CHECK_EQ_INT(rv_interp_run(m, want), RV_OK);
        st = rv_program_run(p, got);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK)
            fprintf(stderr, "%s, case %zu: %s\n", name, k, rv_last_error());
        for (int t = 0; t < rv_module_num_tensors(m); t++) {
            const rv_tensor *x = rv_module_tensor_at(m, t);
            if (rv_tensor_is_output(m, x))
                CHECK_SAME_TENSOR(want, got, rv_tensor_name(x), 1e-5);
        }
        if (harness_current_failed)
            fprintf(stderr, "    (%s, case %zu)\n", name, k);
        rv_bindings_free(want);
        rv_bindings_free(got);
        rv_array_free(len);
    }
    rv_program_free(p);
    rv_module_free(m);
    return src;
}

/* CoRa Fig. 3's softmax as one kernel: the rows of M, E and Z inside P's
 * row loop; E's row is a stack tile of len's bound (9), and P's padded
 * loop reads it (E is stored padded to cover that loop padding). */
static void test_softmax_fused(void) {
    char *src = check_rows("softmax_fused.rv",
                           "size B in 0..8\n"
                           "ufun len[b < B] in 0..9\n"
                           "input S : f32[b < B, h < 2, i < len[b], j < len[b] pad 4]\n"
                           "M[b, h, i] = max(j < len[b]) S[b, h, i, j]\n"
                           "E[b, h, i, j < len[b] pad 4] = exp(S[b, h, i, j] - M[b, h, i])\n"
                           "Z[b, h, i] = sum(j < len[b]) E[b, h, i, j]\n"
                           "P[b, h, i, j pad 4] = E[b, h, i, j] / Z[b, h, i]\n"
                           "schedule P {\n"
                           "    pad(j, 4)\n"
                           "    compute_at(Z, i)\n"
                           "    compute_at(E, i)\n"
                           "    compute_at(M, i)\n"
                           "}\n");
    CHECK_STR_CONTAINS(src, "float E[12]"); /* 9 rows padded to 12 */
    CHECK(src && !strstr(src, "kernel_E(") && !strstr(src, "kernel_M(") &&
          !strstr(src, "kernel_Z("));
    free(src);
}

/* A producer at a tile of 3 sequences: its rows run to their own ends. */
static void test_rows_tile(void) {
    char *src = check_rows("rows_tile.rv",
                           "size B in 0..8\n"
                           "ufun len[b < B] in 0..9\n"
                           "input A : f32[b < B, l < len[b], d < 4]\n"
                           "E[b, l, d] = exp(A[b, l, d]) + A[b, len[b] - 1 - l, 3 - d]\n"
                           "O[b, l < len[b], d] = E[b, l, d] * 2 + E[b, len[b] - 1 - l, d]\n"
                           "schedule O {\n"
                           "    bo, bi = split(b, 3)\n"
                           "    compute_at(E, bo)\n"
                           "}\n");
    CHECK_STR_CONTAINS(src, "float E[108]"); /* 3 rows x 9 x 4 */
    free(src);
}

/* A padded accumulator tile over 4 rows reading a padded copy of the
 * ragged input: zeros past the row's end, no check in the tile's loops. */
static void test_cache_tiles(void) {
    char *src = check_rows("cache_tiles.rv",
                           "size B in 0..8\n"
                           "ufun len[b < B] in 0..9\n"
                           "input X : f32[b < B, l < len[b], k < 8]\n"
                           "input W : f32[n < 6, k < 8]\n"
                           "Y[b, l < len[b], n] = sum(k < 8) X[b, l, k] * W[n, k] + 1.0\n"
                           "schedule Y {\n"
                           "    YL = cache_write(Y, pad=1)\n"
                           "    lo, li = split(l, 4)\n"
                           "    reorder(b, lo, n, li)\n"
                           "    compute_at(YL, lo)\n"
                           "}\n"
                           "schedule YL {\n"
                           "    XL = cache_read(X, pad=1)\n"
                           "    compute_at(XL, l)\n"
                           "}\n");
    CHECK_STR_CONTAINS(src, "float YL_1[24]"); /* the last tile: 4 x 6, whole */
    CHECK_STR_CONTAINS(src, "XL[k_1] = 0.0f;");
    free(src);
}

/* An accumulator tile of a whole sequence (cache_write at b) with an
 * epilogue, its input rows cached per pair of rows; and inlined ragged
 * producers (padding changes) next to one computed at the row loop. */
static void test_cache_write_inline(void) {
    free(check_rows("cache_write_rows.rv",
                    "size B in 0..8\n"
                    "ufun len[b < B] in 0..9\n"
                    "input X : f32[b < B, l < len[b], k < 8]\n"
                    "input W : f32[n < 6, k < 8]\n"
                    "Y[b, l < len[b], n] = max(sum(k < 8) X[b, l, k] * W[n, k], 0.0)\n"
                    "schedule Y {\n"
                    "    YL = cache_write(Y)\n"
                    "    compute_at(YL, b)\n"
                    "}\n"
                    "schedule YL {\n"
                    "    XL = cache_read(X)\n"
                    "    lo, li = split(l, 2)\n"
                    "    compute_at(XL, lo)\n"
                    "}\n"));
    free(check_rows("inline.rv", "size B in 0..8\n"
                                 "ufun len[b < B] in 0..9\n"
                                 "input A : f32[b < B, l < len[b] pad 4]\n"
                                 "Pad[b, l < len[b] pad 4] = A[b, l] * 2\n"
                                 "Unpad[b, l < len[b]] = Pad[b, l] + 1\n"
                                 "R[b, l < len[b]] = Unpad[b, l] * Unpad[b, len[b] - 1 - l]\n"
                                 "schedule R {\n"
                                 "    compute_inline(Pad)\n"
                                 "    compute_at(Unpad, b)\n"
                                 "}\n"));
}

int main(void) {
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_softmax_fused);
    RUN(test_rows_tile);
    RUN(test_cache_tiles);
    RUN(test_cache_write_inline);
    return harness_report();
}
