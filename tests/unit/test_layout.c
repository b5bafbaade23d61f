/*
 * test_layout.c — the canonical storage order (src/ir/layout.h).
 *
 * Each test builds tensors through the public API, binds sizes and UF
 * arrays by hand in a LayoutEnv, and compares the layout with an
 * independent enumeration: nested loops over the valid index tuples in
 * lexicographic order, counting, so offset(t) must equal the count at t
 * and iteration must visit the same tuples in the same order.
 */
#include "harness.h"

#include "ir/layout.h"

/* A module with sizes and UFs bound by hand. */
typedef struct Fixture {
    rv_module *m;
    int64_t sizes[8];
    int64_t *uf_vals[4];
    Layout *uf_dom[4];
    LayoutEnv env;
} Fixture;

static void fx_init(Fixture *fx) {
    memset(fx, 0, sizeof *fx);
    fx->m = rv_module_new();
    fx->env =
        (LayoutEnv){.m = fx->m, .sizes = fx->sizes, .uf_vals = fx->uf_vals, .uf_dom = fx->uf_dom};
}

static void fx_free(Fixture *fx) {
    for (int i = 0; i < 4; i++)
        ir_layout_free(fx->uf_dom[i]);
    rv_module_free(fx->m);
}

/* Binds a UF's values (in its domain's canonical order). */
static rv_status fx_bind_ufun(Fixture *fx, rv_ufun *f, int64_t *vals) {
    fx->uf_vals[f->id] = vals;
    return ir_layout_ufun(&fx->env, f, &fx->uf_dom[f->id]);
}

/* A 1-argument UF `name[a < ext] in lo..hi`. */
static rv_ufun *ufun1(rv_module *m, const char *name, rv_expr *ext, int64_t lo, int64_t hi) {
    const char *args[1] = {"a"};
    rv_ufun *f = rv_ufun_begin(m, name, 1, args);
    rv_expr *exts[1] = {ext};
    return rv_ufun_end(f, exts, rv_expr_int(m, lo), rv_expr_int(m, hi));
}

/* Checks offsets and iteration against a list of the valid tuples in
 * lexicographic order (flat, ndim per tuple). */
static void check_against(const Layout *l, const int64_t *tuples, int64_t n) {
    CHECK_EQ_INT(l->numel, n);
    int bad;
    int64_t ext;
    for (int64_t i = 0; i < n; i++)
        CHECK_EQ_INT(ir_layout_offset(l, &tuples[i * l->ndim], &bad, &ext), i);
    LayoutIter it;
    int64_t i = 0;
    for (bool ok = ir_layout_iter_begin(l, &it); ok; ok = ir_layout_iter_next(l, &it), i++) {
        if (i >= n) {
            CHECK(!"iteration visits too many tuples");
            break;
        }
        CHECK_EQ_INT(it.rank[l->ndim], i);
        CHECK(memcmp(it.idx, &tuples[i * l->ndim], sizeof(int64_t) * (size_t)l->ndim) == 0);
    }
    CHECK_EQ_INT(i, n);
}

static void test_dense(void) {
    Fixture fx;
    fx_init(&fx);
    rv_module *m = fx.m;
    rv_size *T = rv_size_new(m, "T", 1, 128);
    rv_dimspec d[2] = {{"i", rv_expr_mul(m, rv_expr_int(m, 16), rv_expr_size(m, T)), 1},
                       {"k", rv_expr_int(m, 7), 1}};
    rv_tensor *X = rv_input_new(m, "X", RV_F32, 2, d);
    CHECK(X != NULL);
    fx.sizes[0] = 3;
    Layout *l;
    CHECK(ir_layout_tensor(&fx.env, "input X", X, &l) == RV_OK);
    CHECK(!l->ragged);
    CHECK_EQ_INT(l->shape[0], 48);
    CHECK_EQ_INT(l->shape[1], 7);
    CHECK_EQ_INT(l->numel, 48 * 7);
    CHECK(l->start[0] == NULL && l->start[1] == NULL);
    int64_t idx[2] = {5, 3}, ext;
    int bad;
    CHECK_EQ_INT(ir_layout_offset(l, idx, &bad, &ext), 5 * 7 + 3);
    idx[1] = 7;
    CHECK_EQ_INT(ir_layout_offset(l, idx, &bad, &ext), -1);
    CHECK_EQ_INT(bad, 1);
    CHECK_EQ_INT(ext, 7);
    idx[0] = -1;
    CHECK_EQ_INT(ir_layout_offset(l, idx, &bad, &ext), -1);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(ext, 48);
    Buf b = {0};
    ir_layout_describe_env(&b, &fx.env, l);
    CHECK_STR_CONTAINS(buf_str(&b), "T = 3");
    buf_free(&b);

    int64_t *tuples = malloc(sizeof(int64_t) * 2 * 48 * 7);
    int64_t n = 0;
    for (int64_t i = 0; i < 48; i++)
        for (int64_t k = 0; k < 7; k++) {
            tuples[2 * n] = i;
            tuples[2 * n + 1] = k;
            n++;
        }
    check_against(l, tuples, n);
    free(tuples);
    ir_layout_free(l);

    /* a zero extent: no elements, iteration is empty */
    rv_size *Z = rv_size_new(m, "Z", 0, 4);
    rv_dimspec dz[2] = {{"i", rv_expr_int(m, 5), 1}, {"j", rv_expr_size(m, Z), 1}};
    rv_tensor *E = rv_input_new(m, "E", RV_F32, 2, dz);
    fx.sizes[1] = 0;
    CHECK(ir_layout_tensor(&fx.env, "input E", E, &l) == RV_OK);
    CHECK_EQ_INT(l->numel, 0);
    check_against(l, NULL, 0);
    ir_layout_free(l);
    fx_free(&fx);
}

/* [b < B, l < len[b]]: one prefix-sum array over b. */
static void test_ragged_two_levels(void) {
    Fixture fx;
    fx_init(&fx);
    rv_module *m = fx.m;
    rv_size *B = rv_size_new(m, "B", 0, 64);
    rv_ufun *len = ufun1(m, "len", rv_expr_size(m, B), 0, 512);
    const char *names[2] = {"b", "l"};
    rv_tensor *A = rv_input_begin(m, "A", RV_F32, 2, names);
    rv_expr *ba[1] = {rv_input_var(A, 0)};
    rv_expr *exts[2] = {rv_expr_size(m, B), rv_expr_ufcall(m, len, 1, ba)};
    CHECK(rv_input_end(A, exts, NULL) != NULL);

    int64_t lens[5] = {3, 0, 5, 1, 2};
    fx.sizes[0] = 5;
    CHECK(fx_bind_ufun(&fx, len, lens) == RV_OK);
    Layout *l;
    CHECK(ir_layout_tensor(&fx.env, "input A", A, &l) == RV_OK);
    CHECK(l->ragged);
    CHECK_EQ_INT(l->numel, 11);
    CHECK_EQ_INT(l->shape[0], 5);
    CHECK_EQ_INT(l->shape[1], -1);
    CHECK_EQ_INT(l->maxext[1], 5);
    CHECK(l->start[0] == NULL && l->start[1] != NULL);
    int64_t want_start[6] = {0, 3, 3, 8, 9, 11};
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(l->start[1][i], want_start[i]);

    int64_t tuples[22], n = 0;
    for (int64_t b = 0; b < 5; b++)
        for (int64_t i = 0; i < lens[b]; i++) {
            tuples[2 * n] = b;
            tuples[2 * n + 1] = i;
            n++;
        }
    check_against(l, tuples, n);

    /* bounds: the extent is the one at that row */
    int bad;
    int64_t ext;
    int64_t idx[2] = {1, 0};
    CHECK_EQ_INT(ir_layout_offset(l, idx, &bad, &ext), -1);
    CHECK_EQ_INT(bad, 1);
    CHECK_EQ_INT(ext, 0);
    idx[0] = 2;
    idx[1] = 5;
    CHECK_EQ_INT(ir_layout_offset(l, idx, &bad, &ext), -1);
    CHECK_EQ_INT(ext, 5);
    idx[0] = 5;
    idx[1] = 0;
    CHECK_EQ_INT(ir_layout_offset(l, idx, &bad, &ext), -1);
    CHECK_EQ_INT(bad, 0);

    Buf b = {0};
    ir_layout_describe_env(&b, &fx.env, l);
    CHECK_STR_CONTAINS(buf_str(&b), "B = 5, len = [3, 0, 5, 1, 2]");
    buf_free(&b);
    ir_layout_free(l);

    /* B = 0: empty */
    fx.sizes[0] = 0;
    ir_layout_free(fx.uf_dom[len->id]);
    CHECK(fx_bind_ufun(&fx, len, lens) == RV_OK);
    CHECK(ir_layout_tensor(&fx.env, "input A", A, &l) == RV_OK);
    CHECK_EQ_INT(l->numel, 0);
    CHECK_EQ_INT(l->start[1][0], 0);
    check_against(l, NULL, 0);
    ir_layout_free(l);
    fx_free(&fx);
}

/* [b < B, h < 3, l < len[b], d < 4]: a ragged dimension under a dense one,
 * with a dense one inside. */
static void test_ragged_under_dense(void) {
    Fixture fx;
    fx_init(&fx);
    rv_module *m = fx.m;
    rv_size *B = rv_size_new(m, "B", 1, 64);
    rv_ufun *len = ufun1(m, "len", rv_expr_size(m, B), 0, 512);
    const char *names[4] = {"b", "h", "l", "d"};
    rv_tensor *Q = rv_input_begin(m, "Q", RV_F32, 4, names);
    rv_expr *ba[1] = {rv_input_var(Q, 0)};
    rv_expr *exts[4] = {rv_expr_size(m, B), rv_expr_int(m, 3), rv_expr_ufcall(m, len, 1, ba),
                        rv_expr_int(m, 4)};
    CHECK(rv_input_end(Q, exts, NULL) != NULL);
    int64_t lens[4] = {2, 7, 0, 3};
    fx.sizes[0] = 4;
    CHECK(fx_bind_ufun(&fx, len, lens) == RV_OK);
    Layout *l;
    CHECK(ir_layout_tensor(&fx.env, "input Q", Q, &l) == RV_OK);
    CHECK_EQ_INT(l->numel, 3 * 4 * (2 + 7 + 0 + 3));
    CHECK(l->start[0] == NULL && l->start[1] == NULL && l->start[2] != NULL && l->start[3] == NULL);
    CHECK_EQ_INT(l->count[2], 12); /* B * 3 prefixes at level 2 */

    int64_t *tuples = malloc(sizeof(int64_t) * 4 * (size_t)l->numel);
    int64_t n = 0, before = 0;
    for (int64_t b = 0; b < 4; b++) {
        for (int64_t h = 0; h < 3; h++)
            for (int64_t i = 0; i < lens[b]; i++)
                for (int64_t d = 0; d < 4; d++) {
                    int64_t *t = &tuples[4 * n];
                    t[0] = b, t[1] = h, t[2] = i, t[3] = d;
                    /* the closed form CoRa's prelude would use */
                    int bad;
                    int64_t ext;
                    CHECK_EQ_INT(ir_layout_offset(l, t, &bad, &ext),
                                 before * 3 * 4 + h * lens[b] * 4 + i * 4 + d);
                    n++;
                }
        before += lens[b];
    }
    check_against(l, tuples, n);
    free(tuples);
    ir_layout_free(l);
    fx_free(&fx);
}

/* [i < N, j < i + 1, k < w[i] + j]: extents that depend on two outer axes,
 * through arithmetic and a UF. */
static void test_two_outer_axes(void) {
    Fixture fx;
    fx_init(&fx);
    rv_module *m = fx.m;
    rv_size *N = rv_size_new(m, "N", 0, 64);
    rv_ufun *w = ufun1(m, "w", rv_expr_size(m, N), 0, 4);
    const char *names[3] = {"i", "j", "k"};
    rv_tensor *X = rv_input_begin(m, "X", RV_I32, 3, names);
    rv_expr *i = rv_input_var(X, 0), *j = rv_input_var(X, 1);
    rv_expr *wi[1] = {i};
    rv_expr *exts[3] = {rv_expr_size(m, N), rv_expr_add(m, i, rv_expr_int(m, 1)),
                        rv_expr_add(m, rv_expr_ufcall(m, w, 1, wi), j)};
    CHECK(rv_input_end(X, exts, NULL) != NULL);
    int64_t wv[6] = {2, 0, 1, 3, 0, 2};
    fx.sizes[0] = 6;
    CHECK(fx_bind_ufun(&fx, w, wv) == RV_OK);
    Layout *l;
    CHECK(ir_layout_tensor(&fx.env, "input X", X, &l) == RV_OK);
    CHECK(l->start[1] != NULL && l->start[2] != NULL);
    int64_t tuples[3 * 200], n = 0;
    for (int64_t a = 0; a < 6; a++)
        for (int64_t b = 0; b < a + 1; b++)
            for (int64_t c = 0; c < wv[a] + b; c++) {
                tuples[3 * n] = a, tuples[3 * n + 1] = b, tuples[3 * n + 2] = c;
                n++;
            }
    CHECK(n < 200);
    check_against(l, tuples, n);
    CHECK_EQ_INT(l->maxext[2], 2 + 5); /* i = 5, j = 5 */
    ir_layout_free(l);
    fx_free(&fx);
}

/* A UF whose domain is itself ragged: f[b < B, l < len[b]]. */
static void test_ragged_ufun_domain(void) {
    Fixture fx;
    fx_init(&fx);
    rv_module *m = fx.m;
    rv_size *B = rv_size_new(m, "B", 1, 8);
    rv_ufun *len = ufun1(m, "len", rv_expr_size(m, B), 0, 8);
    const char *args[2] = {"b", "l"};
    rv_ufun *f = rv_ufun_begin(m, "f", 2, args);
    rv_expr *ba[1] = {rv_ufun_arg(f, 0)};
    rv_expr *exts[2] = {rv_expr_size(m, B), rv_expr_ufcall(m, len, 1, ba)};
    CHECK(rv_ufun_end(f, exts, rv_expr_int(m, 0), rv_expr_int(m, 100)) != NULL);
    int64_t lens[3] = {2, 0, 3};
    int64_t fv[5] = {10, 11, 20, 21, 22};
    fx.sizes[0] = 3;
    CHECK(fx_bind_ufun(&fx, len, lens) == RV_OK);
    CHECK(fx_bind_ufun(&fx, f, fv) == RV_OK);
    CHECK_EQ_INT(fx.uf_dom[f->id]->numel, 5);
    int64_t at[2] = {2, 1}, v = -1;
    CHECK(ir_layout_ufun_value(&fx.env, f, at, &v) == RV_OK);
    CHECK_EQ_INT(v, 21);
    at[0] = 1;
    at[1] = 0;
    CHECK(ir_layout_ufun_value(&fx.env, f, at, &v) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(),
                       "f[1, 0]: index 0 out of bounds for dimension 1 (extent 0)");
    fx_free(&fx);
}

static void test_errors(void) {
    Fixture fx;
    fx_init(&fx);
    rv_module *m = fx.m;
    rv_size *N = rv_size_new(m, "N", 1, 64);
    rv_ufun *len = ufun1(m, "len", rv_expr_size(m, N), -4, 4);
    const char *names[2] = {"i", "j"};

    /* a negative extent at some prefix */
    rv_tensor *A = rv_input_begin(m, "A", RV_F32, 2, names);
    rv_expr *ia[1] = {rv_input_var(A, 0)};
    rv_expr *ea[2] = {rv_expr_size(m, N), rv_expr_ufcall(m, len, 1, ia)};
    CHECK(rv_input_end(A, ea, NULL) != NULL);
    int64_t lens[3] = {1, -2, 3};
    fx.sizes[0] = 3;
    Layout *l = NULL;
    /* the UF is not bound yet */
    CHECK(ir_layout_tensor(&fx.env, "input A", A, &l) == RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "input A: extent of dimension j at [i = 0]: ufun len is "
                                        "not bound");
    CHECK(fx_bind_ufun(&fx, len, lens) == RV_OK);
    CHECK(ir_layout_tensor(&fx.env, "input A", A, &l) == RV_ERR_BOUNDS);
    CHECK(l == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), "input A: dimension j has negative extent -2 at [i = 1]");

    /* a UF applied outside its domain inside an extent */
    rv_tensor *C = rv_input_begin(m, "C", RV_F32, 2, names);
    rv_expr *ic[1] = {rv_expr_add(m, rv_input_var(C, 0), rv_expr_int(m, 1))};
    rv_expr *ec[2] = {rv_expr_size(m, N), rv_expr_ufcall(m, len, 1, ic)};
    CHECK(rv_input_end(C, ec, NULL) != NULL);
    lens[1] = 2;
    CHECK(ir_layout_tensor(&fx.env, "input C", C, &l) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "input C: extent of dimension j at [i = 2]: len[3]: index "
                                        "3 out of bounds for dimension 0 (extent 3)");

    /* division by zero in a constant extent */
    rv_size *Z = rv_size_new(m, "Z", 0, 4);
    rv_dimspec dz[1] = {{"k", rv_expr_binop(m, "/", rv_expr_int(m, 8), rv_expr_size(m, Z)), 1}};
    rv_tensor *D = rv_input_new(m, "D", RV_F32, 1, dz);
    CHECK(D != NULL);
    fx.sizes[Z->id] = 0;
    CHECK(ir_layout_tensor(&fx.env, "input D", D, &l) == RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "input D: extent of dimension k: division by zero");
    fx_free(&fx);
}

static void test_int_arith(void) {
    int64_t r;
    CHECK(ir_int_arith(EX_DIV, -7, 2, &r) == IA_OK && r == -3);
    CHECK(ir_int_arith(EX_MOD, -7, 2, &r) == IA_OK && r == -1);
    CHECK(ir_int_arith(EX_FLOORDIV, -7, 2, &r) == IA_OK && r == -4);
    CHECK(ir_int_arith(EX_FLOORMOD, -7, 2, &r) == IA_OK && r == 1);
    CHECK(ir_int_arith(EX_FLOORMOD, 7, -2, &r) == IA_OK && r == -1);
    CHECK(ir_int_arith(EX_FLOORDIV, 6, -3, &r) == IA_OK && r == -2);
    CHECK(ir_int_arith(EX_DIV, 1, 0, &r) == IA_DIVZERO);
    CHECK(ir_int_arith(EX_FLOORMOD, 1, 0, &r) == IA_DIVZERO);
    CHECK(ir_int_arith(EX_DIV, INT64_MIN, -1, &r) == IA_OVERFLOW);
    CHECK(ir_int_arith(EX_MOD, INT64_MIN, -1, &r) == IA_OK && r == 0);
    CHECK(ir_int_arith(EX_ADD, INT64_MAX, 1, &r) == IA_OVERFLOW);
    CHECK(ir_int_arith(EX_MUL, INT64_MAX / 2 + 1, 2, &r) == IA_OVERFLOW);
    CHECK_EQ_INT(ir_int_convert(RV_I32, 4294967297LL), 1);
}

/* Ranges over axes whose extents may be empty for every binding: an
 * expression over an axis with no value is EMPTY, not UNKNOWN, so storage
 * bounds below an empty level are 0 rather than "no bound". */
static void test_int_range_empty(void) {
    rv_module *m = rv_module_new();
    const char *names[3] = {"a", "b", "c"};
    rv_tensor *X = rv_input_begin(m, "X", RV_F32, 3, names);
    rv_expr *a = rv_input_var(X, 0), *b = rv_input_var(X, 1);
    rv_expr *exts[3] = {rv_expr_int(m, 1), a, rv_expr_binop(m, "+", b, rv_expr_int(m, 1))};
    CHECK(rv_input_end(X, exts, NULL) != NULL);
    int64_t lo, hi;
    CHECK(ir_int_range(a, &lo, &hi) == IR_RANGE_KNOWN && lo == 0 && hi == 0);
    CHECK(ir_int_range(b, &lo, &hi) == IR_RANGE_EMPTY);               /* b < a, a < 1 */
    CHECK(ir_int_range(exts[2], &lo, &hi) == IR_RANGE_EMPTY);         /* b + 1 */
    CHECK(ir_int_range(X->axes[2]->var, &lo, &hi) == IR_RANGE_EMPTY); /* c < b + 1 */
    CHECK(!ir_int_bounds(exts[2], &lo, &hi));
    /* EMPTY wins over UNKNOWN: b * (6 / (a - 1)) is never evaluated either */
    rv_expr *unk = rv_expr_binop(m, "/", rv_expr_int(m, 6), rv_expr_sub(m, a, rv_expr_int(m, 1)));
    CHECK(ir_int_range(unk, &lo, &hi) == IR_RANGE_UNKNOWN);
    CHECK(ir_int_range(rv_expr_binop(m, "*", b, unk), &lo, &hi) == IR_RANGE_EMPTY);
    rv_module_free(m);
}

/* Storage padding outside a ragged level is rejected when the tensor is
 * built (every client: the checker, the interpreter, the JIT, ravel
 * build); padding on or inside the ragged level is not. */
static void test_pad_outside_ragged(void) {
    rv_module *m = rv_module_new();
    rv_size *B = rv_size_new(m, "B", 1, 4);
    rv_ufun *len = ufun1(m, "len", rv_expr_size(m, B), 0, 5);
    const char *names[3] = {"b", "l", "d"};
    int pads[3] = {4, 1, 1};
    for (int padded = 0; padded < 3; padded++) {
        rv_tensor *X = rv_input_begin(m,
                                      padded == 0   ? "X"
                                      : padded == 1 ? "Y"
                                                    : "Z",
                                      RV_F32, 3, names);
        rv_expr *b = rv_input_var(X, 0);
        rv_expr *exts[3] = {rv_expr_size(m, B), rv_expr_ufcall(m, len, 1, &b), rv_expr_int(m, 3)};
        for (int k = 0; k < 3; k++)
            pads[k] = k == padded ? 4 : 1;
        rv_tensor *r = rv_input_end(X, exts, pads);
        if (padded == 0) {
            CHECK(r == NULL);
            CHECK_STR_CONTAINS(rv_last_error(),
                               "dimension 'b' of 'X': storage padding outside a ragged dimension "
                               "is not supported ('l' inside it is ragged)");
        } else {
            CHECK(r != NULL);
        }
    }
    rv_module_free(m);
}

/* ---- the storage order (symbolic) ---- */

/* An independent walk over the storage tuples in lexicographic order (each
 * level's extent at its prefix, rounded up to its pad): the row starts of
 * the variable levels, the element count, and the storage offset of every
 * real tuple in canonical order. */
typedef struct Walk {
    const LayoutEnv *env;
    rv_tensor *t;
    const Storage *st;
    int64_t starts[RV_MAX_DIMS][64];
    int64_t nstart[RV_MAX_DIMS];
    int64_t count;     /* storage tuples so far */
    int64_t offs[256]; /* storage offsets of the real tuples */
    int64_t nreal;
} Walk;

static void walk(Walk *w, int k, int64_t *idx, bool real) {
    rv_tensor *t = w->t;
    if (k == t->ndim) {
        if (real)
            w->offs[w->nreal++] = w->count;
        w->count++;
        return;
    }
    int64_t e = 0;
    CHECK(ir_eval_index(w->env, t->axes[k]->extent, k, t->axes, idx, &e) == RV_OK);
    int64_t p = t->pad[k], padded = (e + p - 1) / p * p;
    bool variable = false;
    for (int j = 0; j < k; j++)
        variable |= ir_uses_axis(t->axes[k]->extent, t->axes[j]);
    if (variable) {
        int64_t *s = w->starts[k];
        if (w->nstart[k] == 0)
            s[w->nstart[k]++] = 0;
        s[w->nstart[k]] = s[w->nstart[k] - 1] + padded;
        w->nstart[k]++;
    }
    for (idx[k] = 0; idx[k] < padded; idx[k]++)
        walk(w, k + 1, idx, real && idx[k] < e);
}

/* Loads of the row-start buffers, from the walk. */
static rv_status walk_load(void *ctx, const Buffer *b, int64_t i, int64_t *out) {
    Walk *w = ctx;
    for (int k = 0; k < w->st->ndim; k++)
        if (w->st->start[k] == b) {
            CHECK(i >= 0 && i < w->nstart[k]);
            *out = i >= 0 && i < w->nstart[k] ? w->starts[k][i] : 0;
            return RV_OK;
        }
    CHECK(!"a load of a buffer that is no row-start array");
    return RV_ERR_ARG;
}

/* The value of a storage expression (sizes, UF applications, row-start
 * loads) with the layout's axes at idx. */
static int64_t eval_storage_expr(Walk *w, const Expr *e, const int64_t *idx) {
    LayoutEnv env = *w->env;
    env.load = walk_load;
    env.load_ctx = w;
    int64_t v = -1;
    CHECK(ir_eval_index(&env, e, w->st->ndim, (Axis *const *)w->st->axes, idx, &v) == RV_OK);
    return v;
}

/* Storage with padding on and inside a ragged level, and a dense padded
 * tensor: ir_storage_offset, numel and ir_storage_eval against the walk. */
static void test_storage_padded(void) {
    Fixture fx;
    fx_init(&fx);
    rv_module *m = fx.m;
    rv_size *B = rv_size_new(m, "B", 0, 8);
    rv_size *N = rv_size_new(m, "N", 0, 8);
    rv_ufun *len = ufun1(m, "len", rv_expr_size(m, B), 0, 6);
    const char *names[4] = {"b", "h", "l", "d"};
    rv_tensor *A = rv_input_begin(m, "A", RV_F32, 4, names);
    rv_expr *ba[1] = {rv_input_var(A, 0)};
    rv_expr *exts[4] = {rv_expr_size(m, B), rv_expr_int(m, 3), rv_expr_ufcall(m, len, 1, ba),
                        rv_expr_size(m, N)};
    int pads[4] = {1, 1, 4, 2};
    CHECK(rv_input_end(A, exts, pads) != NULL);
    rv_dimspec dd[2] = {{"i", rv_expr_size(m, N), 8}, {"j", rv_expr_int(m, 3), 4}};
    rv_tensor *D = rv_input_new(m, "D", RV_F32, 2, dd);
    CHECK(D != NULL);
    int64_t lens[4] = {3, 0, 5, 1};
    fx.sizes[B->id] = 4;
    fx.sizes[N->id] = 3;
    CHECK(fx_bind_ufun(&fx, len, lens) == RV_OK);

    rv_tensor *ts[2] = {A, D};
    for (int ti = 0; ti < 2; ti++) {
        rv_tensor *t = ts[ti];
        Storage st;
        CHECK(ir_storage_init(m, &st, t->name, t->ndim, t->axes, t->pad, RV_F32, BUF_ARG, NULL) ==
              RV_OK);
        CHECK(st.buf->storage == &st && ir_storage_padded(&st));
        Walk w = {.env = &fx.env, .t = t, .st = &st};
        int64_t idx[RV_MAX_DIMS] = {0};
        walk(&w, 0, idx, true);
        /* row-start arrays: allocated large enough before the prelude runs */
        int64_t *starts[RV_MAX_DIMS] = {0};
        for (int k = 0; k < t->ndim; k++) {
            CHECK(st.variable[k] == (w.nstart[k] > 0));
            if (!st.variable[k])
                continue;
            CHECK(eval_storage_expr(&w, st.start[k]->size, idx) >= w.nstart[k]);
            starts[k] = w.starts[k];
        }
        CHECK_EQ_INT(eval_storage_expr(&w, st.numel, idx), w.count);
        Layout *sl, *cl;
        CHECK(ir_storage_eval(&fx.env, &st, starts, w.nstart, &sl) == RV_OK);
        CHECK(ir_layout_tensor(&fx.env, "t", t, &cl) == RV_OK);
        CHECK_EQ_INT(sl->numel, w.count);
        CHECK_EQ_INT(cl->numel, w.nreal);
        /* every canonical tuple: the symbolic offset, the evaluated one and
         * the walk's agree */
        Expr *vars[RV_MAX_DIMS];
        for (int k = 0; k < t->ndim; k++)
            vars[k] = t->axes[k]->var;
        Expr *off = ir_storage_offset(m, &st, vars);
        LayoutIter it;
        for (bool ok = ir_layout_iter_begin(cl, &it); ok; ok = ir_layout_iter_next(cl, &it)) {
            int64_t want = w.offs[it.rank[t->ndim]];
            int bad;
            int64_t ext;
            CHECK_EQ_INT(ir_layout_offset(sl, it.idx, &bad, &ext), want);
            CHECK_EQ_INT(eval_storage_expr(&w, off, it.idx), want);
        }
        /* a row-start array that is not a prefix sum is refused */
        if (ti == 0) {
            int64_t saved = starts[2][1];
            starts[2][1] = -1;
            Layout *bad;
            CHECK(ir_storage_eval(&fx.env, &st, starts, w.nstart, &bad) == RV_ERR_UNSUPPORTED);
            CHECK(bad == NULL);
            CHECK_STR_CONTAINS(rv_last_error(), "A_start2 does not hold the prefix sums");
            starts[2][1] = saved;
        }
        ir_layout_free(sl);
        ir_layout_free(cl);
    }
    fx_free(&fx);
}

/* Storages laid out with one StorageShare share the row-start array of
 * every level whose padded extents (levels 0..k, axes renamed) are the
 * same: A and C ([b, h, l < len[b]] under other axis names) share start2;
 * P pads l (another pattern); E's level 2 is len[b] + 1 (another extent);
 * without a share nothing is shared. */
static void test_storage_share(void) {
    Fixture fx;
    fx_init(&fx);
    rv_module *m = fx.m;
    rv_size *B = rv_size_new(m, "B", 0, 8);
    rv_ufun *len = ufun1(m, "len", rv_expr_size(m, B), 0, 6);
    rv_tensor *ts[4];
    const char *const tnames[4] = {"A", "C", "P", "E"};
    const char *const anames[4][3] = {
        {"b", "h", "l"}, {"x", "y", "z"}, {"b", "h", "l"}, {"b", "h", "l"}};
    for (int i = 0; i < 4; i++) {
        ts[i] = rv_input_begin(m, tnames[i], RV_F32, 3, anames[i]);
        rv_expr *ba[1] = {rv_input_var(ts[i], 0)};
        rv_expr *l = rv_expr_ufcall(m, len, 1, ba);
        rv_expr *exts[3] = {rv_expr_size(m, B), rv_expr_int(m, 3),
                            i == 3 ? rv_expr_add(m, l, rv_expr_int(m, 1)) : l};
        int pads[3] = {1, 1, i == 2 ? 4 : 1};
        CHECK(rv_input_end(ts[i], exts, pads) != NULL);
    }
    StorageShare share = {0};
    Storage st[4], alone;
    for (int i = 0; i < 4; i++)
        CHECK(ir_storage_init(m, &st[i], ts[i]->name, 3, ts[i]->axes, ts[i]->pad, RV_F32, BUF_ARG,
                              &share) == RV_OK);
    CHECK(ir_storage_init(m, &alone, "Q", 3, ts[0]->axes, ts[0]->pad, RV_F32, BUF_ARG, NULL) ==
          RV_OK);
    CHECK(st[0].start[2] && st[0].start[2] == st[1].start[2]);
    CHECK(st[2].start[2] && st[2].start[2] != st[0].start[2]);
    CHECK(st[3].start[2] && st[3].start[2] != st[0].start[2] && st[3].start[2] != st[2].start[2]);
    CHECK(alone.start[2] != st[0].start[2]);
    CHECK_EQ_INT(share.entries.len, 3);
    /* the shared array's size and the element counts read the same array */
    CHECK(st[1].numel == st[0].numel);
    ir_storage_share_free(&share);
    fx_free(&fx);
}

/* Ranges through division and remainder by positive divisors, negation,
 * abs and select, checked against every value the operands take (so a
 * ragged extent like len[b] / 2 can size its row starts). */
static void test_int_range_ops(void) {
    rv_module *m = rv_module_new();
    rv_size *D = rv_size_new(m, "D", 2, 5);
    static const char *const ops[] = {"/", "%", "floordiv", "floormod"};
    for (int a0 = -7; a0 <= 7; a0 += 7)
        for (int w = 0; w <= 9; w += 3) {
            int a1 = a0 + w;
            char name[32];
            snprintf(name, sizeof name, "A%d_%d", a0 + 7, w);
            /* sizes are nonnegative: a0 + S with S in 0..w */
            rv_expr *A =
                rv_expr_add(m, rv_expr_int(m, a0), rv_expr_size(m, rv_size_new(m, name, 0, w)));
            for (int o = 0; o < 4; o++) {
                rv_expr *e = rv_expr_binop(m, ops[o], A, rv_expr_size(m, D));
                int64_t lo, hi;
                CHECK(ir_int_range(e, &lo, &hi) == IR_RANGE_KNOWN);
                for (int64_t a = a0; a <= a1; a++)
                    for (int64_t d = 2; d <= 5; d++) {
                        int64_t v;
                        CHECK(ir_int_arith(e->kind, a, d, &v) == IA_OK);
                        CHECK(v >= lo && v <= hi);
                    }
            }
            int64_t lo, hi;
            CHECK(ir_int_range(rv_expr_unop(m, "-", A), &lo, &hi) == IR_RANGE_KNOWN && lo == -a1 &&
                  hi == -a0);
            CHECK(ir_int_range(rv_expr_unop(m, "abs", A), &lo, &hi) == IR_RANGE_KNOWN);
            for (int64_t a = a0; a <= a1; a++)
                CHECK((a < 0 ? -a : a) >= lo && (a < 0 ? -a : a) <= hi);
        }
    int64_t lo, hi;
    rv_expr *c = rv_expr_binop(m, "<", rv_expr_size(m, D), rv_expr_int(m, 3));
    CHECK(ir_int_range(rv_expr_select(m, c, rv_expr_int(m, -2), rv_expr_size(m, D)), &lo, &hi) ==
              IR_RANGE_KNOWN &&
          lo == -2 && hi == 5);
    /* min(unknown, x) is bounded above by x */
    rv_expr *u = rv_expr_binop(m, "/", rv_expr_int(m, 8),
                               rv_expr_sub(m, rv_expr_size(m, D), rv_expr_int(m, 3)));
    CHECK(ir_int_range(u, &lo, &hi) == IR_RANGE_UNKNOWN);
    CHECK(ir_int_range(rv_expr_binop(m, "min", u, rv_expr_int(m, 9)), &lo, &hi) == IR_RANGE_KNOWN &&
          hi == 9);
    CHECK(ir_int_range(rv_expr_binop(m, "max", u, rv_expr_int(m, 9)), &lo, &hi) ==
          IR_RANGE_UNKNOWN);
    /* a divisor that may be 0 or negative: unknown */
    rv_expr *z = rv_expr_sub(m, rv_expr_size(m, rv_size_new(m, "Z", 0, 4)), rv_expr_int(m, 1));
    CHECK(ir_int_range(rv_expr_binop(m, "/", rv_expr_int(m, 8), z), &lo, &hi) == IR_RANGE_UNKNOWN);
    rv_module_free(m);
}

int main(void) {
    RUN(test_dense);
    RUN(test_ragged_two_levels);
    RUN(test_ragged_under_dense);
    RUN(test_two_outer_axes);
    RUN(test_ragged_ufun_domain);
    RUN(test_errors);
    RUN(test_int_arith);
    RUN(test_int_range_empty);
    RUN(test_int_range_ops);
    RUN(test_pad_outside_ragged);
    RUN(test_storage_padded);
    RUN(test_storage_share);
    return harness_report();
}
