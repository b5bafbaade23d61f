/*
 * test_recurse_lower.c — recursion groups compiled to loops
 * (src/lower/recurse.c, src/sched/recurse.c): a TreeRNN and a child-sum
 * TreeLSTM built with the C API, compiled under the default, dynamic_batch
 * and specialize schedules (with member schedules on top), run on
 * linearized batches of random structures (1 node, chains, perfect trees,
 * 10x10 grid DAGs, and batches mixing them) bound by
 * rv_bindings_set_linear, and compared with a
 * memoized node-by-node evaluation written here in C (children first,
 * independent of the numbering); the .rv examples and models compiled
 * against the interpreter's naive recursion; the schedule rules' located
 * errors, the host plan's numbering check, CUDA C and AOT output.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "harness.h"
#include "jit/jit.h"
#include "lang/lang.h"

static char cache_dir[PATH_MAX];

#if defined(__SANITIZE_ADDRESS__)
#define PROGRAM_CFLAGS "-fsanitize=address,undefined -fno-omit-frame-pointer"
#else
#define PROGRAM_CFLAGS NULL
#endif

enum { H = 8, V = 13, K = 2 };

/* ---- the models ---- */

typedef struct Model {
    rv_module *m;
    rv_ufun *child, *nchild, *word, *root;
    bool lstm;
} Model;

static rv_expr *I(rv_module *m, int64_t v) {
    return rv_expr_int(m, v);
}

static rv_expr *rd(rv_module *m, rv_tensor *t, rv_expr *a, rv_expr *b) {
    rv_expr *idx[] = {a, b};
    return rv_expr_read(m, t, 2, idx);
}

static rv_expr *uf1(rv_module *m, rv_ufun *f, rv_expr *a) {
    return rv_expr_ufcall(m, f, 1, &a);
}

static rv_expr *uf2(rv_module *m, rv_ufun *f, rv_expr *a, rv_expr *b) {
    rv_expr *x[] = {a, b};
    return rv_expr_ufcall(m, f, 2, x);
}

static rv_tensor *input2(rv_module *m, const char *name, int64_t a, int64_t b) {
    rv_dimspec d[] = {{NULL, I(m, a), 1}, {NULL, I(m, b), 1}};
    return rv_input_new(m, name, RV_F32, 2, d);
}

/* N, B, structure T : dag(N, 2) { children child, nchild  roots root[s < B]
 * data word in 0..V-1 } */
static Model model_base(void) {
    Model md = {0};
    rv_module *m = md.m = rv_module_new();
    rv_size *N = rv_size_new(m, "N", 1, 100000);
    rv_size *B = rv_size_new(m, "B", 1, 1000);
    rv_structure *st = rv_structure_new(m, "T", RV_STRUCT_DAG, N, K, "child", "nchild");
    md.root = rv_structure_set_roots(st, "root", B);
    md.word = rv_structure_add_data(st, "word", I(m, 0), I(m, V - 1));
    md.child = rv_module_ufun(m, "child");
    md.nchild = rv_module_ufun(m, "nchild");
    return md;
}

/* recurse R over T {
 *   h[n, i < H] = if nchild[n] == 0 then Emb[word[n], i]
 *                 else tanh(sum(j < H) W[i, j] * h[child[n, 0], j]
 *                           + sum(j < H) W[i, H + j] * h[child[n, nchild[n] - 1], j]) } */
static Model tree_rnn(void) {
    Model md = model_base();
    rv_module *m = md.m;
    rv_tensor *emb = input2(m, "Emb", V, H), *w = input2(m, "W", H, 2 * H);
    rv_recurse *r = rv_recurse_begin(m, "R", rv_module_structure(m, "T"));
    const char *ax[] = {"n", "i"};
    rv_expr *ext[] = {NULL, I(m, H)};
    rv_compute *h = rv_recurse_add(r, "h", RV_F32, 2, ax, ext);
    rv_tensor *ht = rv_module_tensor(m, "h");
    rv_expr *n = rv_compute_var(h, 0), *i = rv_compute_var(h, 1);
    rv_expr *nc = uf1(m, md.nchild, n);
    rv_axis *j0 = rv_reduce_axis_new(m, "j", I(m, H)), *j1 = rv_reduce_axis_new(m, "j", I(m, H));
    rv_expr *a =
        rv_expr_reduce(m, RV_REDUCE_SUM, 1, &j0,
                       rv_expr_mul(m, rd(m, w, i, rv_expr_axis(m, j0)),
                                   rd(m, ht, uf2(m, md.child, n, I(m, 0)), rv_expr_axis(m, j0))));
    rv_expr *last = uf2(m, md.child, n, rv_expr_sub(m, nc, I(m, 1)));
    rv_expr *b =
        rv_expr_reduce(m, RV_REDUCE_SUM, 1, &j1,
                       rv_expr_mul(m, rd(m, w, i, rv_expr_add(m, I(m, H), rv_expr_axis(m, j1))),
                                   rd(m, ht, last, rv_expr_axis(m, j1))));
    rv_expr *leaf = rv_expr_binop(m, "==", nc, I(m, 0));
    CHECK(rv_recurse_define(h, leaf, rd(m, emb, uf1(m, md.word, n), i),
                            rv_expr_unop(m, "tanh", rv_expr_add(m, a, b))) != NULL);
    CHECK_EQ_INT(rv_recurse_end(r), RV_OK);
    return md;
}

/* A child-sum TreeLSTM (Tai et al.), gates stacked in iou:
 * recurse R over T {
 *   hs[n, i < H]      = sum(k < nchild[n]) h[child[n, k], i]
 *   iou[n, i < 3H]    = sum(j < H) U[i, j] * hs[n, j] + X[word[n], i]
 *   c[n, i < H]       = sigmoid(iou[n, i]) * tanh(iou[n, 2H + i])
 *                       + sum(k < nchild[n]) sigmoid(sum(j < H) Uf[i, j] * h[child[n, k], j]
 *                                                  + XF[word[n], i]) * c[child[n, k], i]
 *   h[n, i < H]       = sigmoid(iou[n, H + i]) * tanh(c[n, i]) }
 * Out[s, i < H] = h[root[s], i] */
static Model tree_lstm(void) {
    Model md = model_base();
    md.lstm = true;
    rv_module *m = md.m;
    rv_tensor *u = input2(m, "U", 3 * H, H), *x = input2(m, "X", V, 3 * H);
    rv_tensor *uf = input2(m, "Uf", H, H), *xf = input2(m, "XF", V, H);
    rv_recurse *r = rv_recurse_begin(m, "R", rv_module_structure(m, "T"));
    const char *ax[] = {"n", "i"};
    rv_expr *eh[] = {NULL, I(m, H)}, *e3[] = {NULL, I(m, 3 * H)};
    rv_compute *hs = rv_recurse_add(r, "hs", RV_F32, 2, ax, eh);
    rv_compute *iou = rv_recurse_add(r, "iou", RV_F32, 2, ax, e3);
    rv_compute *c = rv_recurse_add(r, "c", RV_F32, 2, ax, eh);
    rv_compute *h = rv_recurse_add(r, "h", RV_F32, 2, ax, eh);
    rv_tensor *hst = rv_module_tensor(m, "hs"), *iout = rv_module_tensor(m, "iou");
    rv_tensor *ct = rv_module_tensor(m, "c"), *ht = rv_module_tensor(m, "h");

    rv_expr *n = rv_compute_var(hs, 0), *i = rv_compute_var(hs, 1);
    rv_axis *k = rv_reduce_axis_new(m, "k", uf1(m, md.nchild, n));
    CHECK(rv_recurse_define(hs, NULL,
                            rv_expr_reduce(m, RV_REDUCE_SUM, 1, &k,
                                           rd(m, ht, uf2(m, md.child, n, rv_expr_axis(m, k)), i)),
                            NULL) != NULL);

    n = rv_compute_var(iou, 0);
    i = rv_compute_var(iou, 1);
    rv_axis *j = rv_reduce_axis_new(m, "j", I(m, H));
    rv_expr *uh = rv_expr_reduce(
        m, RV_REDUCE_SUM, 1, &j,
        rv_expr_mul(m, rd(m, u, i, rv_expr_axis(m, j)), rd(m, hst, n, rv_expr_axis(m, j))));
    CHECK(rv_recurse_define(iou, NULL, rv_expr_add(m, uh, rd(m, x, uf1(m, md.word, n), i)), NULL) !=
          NULL);

    n = rv_compute_var(c, 0);
    i = rv_compute_var(c, 1);
    k = rv_reduce_axis_new(m, "k", uf1(m, md.nchild, n));
    j = rv_reduce_axis_new(m, "j", I(m, H));
    rv_expr *ch = uf2(m, md.child, n, rv_expr_axis(m, k));
    rv_expr *fpre = rv_expr_add(m,
                                rv_expr_reduce(m, RV_REDUCE_SUM, 1, &j,
                                               rv_expr_mul(m, rd(m, uf, i, rv_expr_axis(m, j)),
                                                           rd(m, ht, ch, rv_expr_axis(m, j)))),
                                rd(m, xf, uf1(m, md.word, n), i));
    rv_expr *fc =
        rv_expr_reduce(m, RV_REDUCE_SUM, 1, &k,
                       rv_expr_mul(m, rv_expr_unop(m, "sigmoid", fpre), rd(m, ct, ch, i)));
    rv_expr *ig =
        rv_expr_mul(m, rv_expr_unop(m, "sigmoid", rd(m, iout, n, i)),
                    rv_expr_unop(m, "tanh", rd(m, iout, n, rv_expr_add(m, I(m, 2 * H), i))));
    CHECK(rv_recurse_define(c, NULL, rv_expr_add(m, ig, fc), NULL) != NULL);

    n = rv_compute_var(h, 0);
    i = rv_compute_var(h, 1);
    CHECK(rv_recurse_define(
              h, NULL,
              rv_expr_mul(m, rv_expr_unop(m, "sigmoid", rd(m, iout, n, rv_expr_add(m, I(m, H), i))),
                          rv_expr_unop(m, "tanh", rd(m, ct, n, i))),
              NULL) != NULL);
    CHECK_EQ_INT(rv_recurse_end(r), RV_OK);

    const char *oax[] = {"s", "i"};
    rv_expr *oext[] = {rv_expr_size(m, rv_module_size(m, "B")), I(m, H)};
    rv_compute *out = rv_compute_begin(m, "Out", 2, oax, oext);
    rv_expr *s = rv_compute_var(out, 0);
    CHECK(rv_compute_end(out, rd(m, ht, uf1(m, md.root, s), rv_compute_var(out, 1))) != NULL);
    return md;
}

/* ---- batches and bindings ---- */

/* Batch kinds: 0 one node, 1 a chain of 7, 2 a perfect tree of height 3,
 * 3 a 10x10 grid, 4 a random binary tree of 1..40 nodes. */
static void add_structure(rv_structs *bs, int kind, uint64_t *rng) {
    int32_t data[400];
    for (int i = 0; i < 400; i++) {
        *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
        data[i] = (int32_t)((*rng >> 33) % V);
    }
    switch (kind) {
    case 0:
        CHECK_EQ_INT(rv_structs_add_sequence(bs, 1, data), RV_OK);
        break;
    case 1:
        CHECK_EQ_INT(rv_structs_add_sequence(bs, 7, data), RV_OK);
        break;
    case 2:
        CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 3, data), RV_OK);
        break;
    case 3:
        CHECK_EQ_INT(rv_structs_add_grid(bs, 10, 10, data), RV_OK);
        break;
    default: {
        /* a random tree: node i > 0 hangs under a node before it with room */
        int32_t parent[40], nch[40] = {0};
        int n = 1 + (int)((*rng >> 20) % 40);
        parent[0] = -1;
        for (int i = 1; i < n; i++) {
            *rng = *rng * 6364136223846793005ULL + 1442695040888963407ULL;
            int p = (int)((*rng >> 33) % (uint64_t)i);
            while (nch[p] >= K)
                p = (p + 1) % i;
            parent[i] = p;
            nch[p]++;
        }
        CHECK_EQ_INT(rv_structs_add_parents(bs, n, parent, data), RV_OK);
    }
    }
}

static rv_array *arr_i32(int64_t n, const int32_t *v) {
    int64_t shape[] = {n};
    rv_array *a = rv_array_new(RV_I32, 1, shape);
    memcpy(rv_array_data(a), v, sizeof(int32_t) * (size_t)n);
    return a;
}

static rv_array *arr_f32(int64_t r, int64_t c, uint64_t seed) {
    int64_t shape[] = {r, c};
    rv_array *a = rv_array_new(RV_F32, 2, shape);
    float *d = rv_array_data(a);
    for (int64_t i = 0; i < r * c; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        d[i] = (float)((double)(seed >> 40) / (double)(1ULL << 24) - 0.5);
    }
    return a;
}

/* What one test run binds; the arrays are freed with it. */
typedef struct Run {
    rv_bindings *b;
    rv_array *arrs[16];
    int narrs;
    rv_linear lin;
} Run;

static void bind(Run *r, const char *name, rv_array *a) {
    r->arrs[r->narrs++] = a;
    CHECK_EQ_INT(rv_bindings_set_array(r->b, name, a), RV_OK);
}

static void run_free(Run *r) {
    for (int i = 0; i < r->narrs; i++)
        rv_array_free(r->arrs[i]);
    rv_bindings_free(r->b);
    rv_linear_free(&r->lin);
}

/* ---- the reference: memoized recursion, children first ---- */

typedef struct Ref {
    const Model *md;
    const rv_linear *lin;
    const float *w[8];
    double *h, *c;
    bool *done;
} Ref;

static double sigm(double x) {
    return 1.0 / (1.0 + exp(-x));
}

static void ref_node(Ref *R, int32_t n) {
    if (R->done[n])
        return;
    const rv_linear *lin = R->lin;
    int nc = lin->nchild[n];
    const int32_t *ch = &lin->child[n * lin->max_children];
    for (int k = 0; k < nc; k++)
        ref_node(R, ch[k]);
    int word = lin->data[n];
    double *h = &R->h[n * H], *c = &R->c[n * H];
    if (!R->md->lstm) {
        const float *emb = R->w[0], *W = R->w[1];
        for (int i = 0; i < H; i++) {
            if (nc == 0) {
                h[i] = emb[word * H + i];
                continue;
            }
            double a = 0, b = 0;
            for (int j = 0; j < H; j++) {
                a += W[i * 2 * H + j] * R->h[ch[0] * H + j];
                b += W[i * 2 * H + H + j] * R->h[ch[nc - 1] * H + j];
            }
            h[i] = tanh(a + b);
        }
    } else {
        const float *U = R->w[0], *X = R->w[1], *Uf = R->w[2], *XF = R->w[3];
        double hs[H] = {0}, iou[3 * H];
        for (int k = 0; k < nc; k++)
            for (int i = 0; i < H; i++)
                hs[i] += R->h[ch[k] * H + i];
        for (int i = 0; i < 3 * H; i++) {
            double s = 0;
            for (int j = 0; j < H; j++)
                s += U[i * H + j] * hs[j];
            iou[i] = s + X[word * 3 * H + i];
        }
        for (int i = 0; i < H; i++) {
            double fc = 0;
            for (int k = 0; k < nc; k++) {
                double f = 0;
                for (int j = 0; j < H; j++)
                    f += Uf[i * H + j] * R->h[ch[k] * H + j];
                fc += sigm(f + XF[word * H + i]) * R->c[ch[k] * H + i];
            }
            c[i] = sigm(iou[i]) * tanh(iou[2 * H + i]) + fc;
            h[i] = sigm(iou[H + i]) * tanh(c[i]);
        }
    }
    R->done[n] = true;
}

/* ---- compile, run, compare ---- */

static int64_t n_compared;

static void check_run(const Model *md, rv_program *p, int kinds_mask, int count, uint64_t seed) {
    Run r = {0};
    r.b = rv_bindings_new(md->m);
    rv_structs *bs = rv_structs_new(RV_STRUCT_DAG, K, 1);
    uint64_t rng = seed;
    int kinds[5], nk = 0;
    for (int k = 0; k < 5; k++)
        if (kinds_mask & (1 << k))
            kinds[nk++] = k;
    for (int s = 0; s < count; s++)
        add_structure(bs, kinds[s % nk], &rng);
    CHECK_EQ_INT(rv_linearize(bs, &r.lin), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_linear(r.b, "T", &r.lin), RV_OK);
    Ref R = {md, &r.lin, {0}, NULL, NULL, NULL};
    if (!md->lstm) {
        bind(&r, "Emb", arr_f32(V, H, seed + 1));
        bind(&r, "W", arr_f32(H, 2 * H, seed + 2));
    } else {
        bind(&r, "U", arr_f32(3 * H, H, seed + 1));
        bind(&r, "X", arr_f32(V, 3 * H, seed + 2));
        bind(&r, "Uf", arr_f32(H, H, seed + 3));
        bind(&r, "XF", arr_f32(V, H, seed + 4));
    }
    for (int i = 0; i < r.narrs; i++)
        R.w[i] = rv_array_data(r.arrs[i]);
    int32_t N = r.lin.num_nodes;
    R.h = calloc((size_t)N * H, sizeof(double));
    R.c = calloc((size_t)N * H, sizeof(double));
    R.done = calloc((size_t)N, sizeof(bool));
    rv_status st = rv_program_run(p, r.b);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "    %s\n", rv_last_error());
    const rv_array *out = rv_bindings_get_array(r.b, md->lstm ? "Out" : "h");
    CHECK(out != NULL);
    if (st == RV_OK && out) {
        const float *o = rv_array_data((rv_array *)out);
        for (int32_t s = 0; s < r.lin.num_structs; s++)
            ref_node(&R, r.lin.root[s]);
        int bad = 0;
        if (md->lstm) {
            for (int32_t s = 0; s < r.lin.num_structs && bad < 3; s++)
                for (int i = 0; i < H; i++) {
                    double want = R.h[r.lin.root[s] * H + i];
                    if (fabs(o[s * H + i] - want) > 1e-4 * (1 + fabs(want)) && bad++ < 3)
                        fprintf(stderr, "    Out[%d, %d] = %g, want %g\n", s, i, o[s * H + i],
                                want);
                    n_compared++;
                }
        } else {
            for (int32_t n = 0; n < N; n++)
                for (int i = 0; i < H; i++) {
                    double want = R.h[n * H + i];
                    if (fabs(o[n * H + i] - want) > 1e-4 * (1 + fabs(want)) && bad++ < 3)
                        fprintf(stderr, "    h[%d, %d] = %g, want %g\n", n, i, o[n * H + i], want);
                    n_compared++;
                }
        }
        CHECK_EQ_INT(bad, 0);
    }
    free(R.h);
    free(R.c);
    free(R.done);
    rv_structs_free(bs);
    run_free(&r);
}

/* The batches every schedule runs on: each kind alone, then mixes. */
static void check_batches(const Model *md, rv_program *p) {
    for (int k = 0; k < 5; k++)
        check_run(md, p, 1 << k, k == 3 ? 2 : 3, 100 + (uint64_t)k);
    check_run(md, p, 0x1f, 10, 7);
    check_run(md, p, 0x15, 7, 8);
    check_run(md, p, 0x10, 25, 9);
}

/* Compiles md under `sched` (pairs of target and steps, NULL-ended) and
 * checks it on every batch. */
static void check_schedule(Model (*make)(void), const char *const *sched) {
    Model md = make();
    for (int i = 0; sched && sched[i]; i += 2) {
        rv_status s = rv_module_schedule(md.m, sched[i], sched[i + 1]);
        CHECK_EQ_INT(s, RV_OK);
        if (s != RV_OK)
            fprintf(stderr, "    %s\n", rv_last_error());
    }
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS, .threads = 2};
    rv_program *p = NULL;
    rv_status st = rv_program_compile(md.m, &opt, &p);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "    %s\n", rv_last_error());
    else
        check_batches(&md, p);
    rv_program_free(p);
    rv_module_free(md.m);
}

static void test_tree_rnn_default(void) {
    check_schedule(tree_rnn, NULL);
}

static void test_tree_lstm_default(void) {
    check_schedule(tree_lstm, NULL);
}

static void test_tree_rnn_dynamic_batch(void) {
    const char *dyn[] = {"R", "dynamic_batch()", NULL};
    check_schedule(tree_rnn, dyn);
    const char *spec[] = {"R", "specialize()", NULL};
    check_schedule(tree_rnn, spec);
    const char *both[] = {"R", "dynamic_batch()\nspecialize()", "h",
                          "parallel(n)\nio, ii = split(i, 4)\nvectorize(ii)", NULL};
    check_schedule(tree_rnn, both);
}

static void test_tree_lstm_schedules(void) {
    const char *dyn[] = {"R", "dynamic_batch()", "iou", "parallel(n)", "c", "parallel(n)", NULL};
    check_schedule(tree_lstm, dyn);
    const char *spec[] = {"R", "specialize()", NULL};
    check_schedule(tree_lstm, spec);
    /* hs computed per node inside iou, U packed, split and vectorized */
    const char *all[] = {"R",
                         "specialize()\ndynamic_batch()",
                         "iou",
                         "compute_at(hs, n)\nUL = cache_read(U)\nio, ii = split(i, 8)\n"
                         "vectorize(ii)\nparallel(n)",
                         "h",
                         "parallel(n)\nunroll(i)",
                         NULL};
    check_schedule(tree_lstm, all);
    /* non-dividing splits (partitioned and guarded tails) in members */
    const char *tails[] = {"R", "dynamic_batch()", "iou", "io, ii = split(i, 5)", "c",
                           "co, ci = split(i, 3, tail=\"guard\")\nparallel(n)", NULL};
    check_schedule(tree_lstm, tails);
    /* hs's reduction in a cache stage at the top of its nest, per node */
    const char *cw[] = {"R", "specialize()", "hs", "HL = cache_write(hs)\nunroll(i)", NULL};
    check_schedule(tree_lstm, cw);
}

/* Under dynamic_batch a member's node loop is over a batch's nodes: split
 * into tiles of nodes (tails guarded or partitioned at the batch's end),
 * moved inside a parallel loop over output columns (each thread its slice
 * of the weight), the product register-tiled with the packed weight
 * k-major and the reduction outside the tile; hs computed at each tile. */
static void test_node_tiles(void) {
    const char *tiles[] = {"R",
                           "dynamic_batch()\nspecialize()",
                           "iou",
                           "UL = cache_read(U, layout=\"j, i\")\nIL = cache_write(iou)\n"
                           "no, ni = split(n, 3)\nio, ii = split(i, 8)\n"
                           "reorder(io, no, ni, ii)\nparallel(io)\nvectorize(ii)\n"
                           "compute_at(IL, no)\ncompute_at(hs, no)",
                           "IL",
                           "reorder(j, n, i)\nunroll(n)\nvectorize(i)",
                           "h",
                           "no, ni = split(n, 5, tail=\"guard\")\nreorder(i, no, ni)\n"
                           "parallel(i)",
                           "c",
                           "f = fuse(n, i)\nparallel(f)",
                           NULL};
    check_schedule(tree_lstm, tiles);
    /* the cache_write of a tile of nodes: its sums in registers */
    const char *cw[] = {"R",
                        "dynamic_batch()",
                        "iou",
                        "IL = cache_write(iou)\nno, ni = split(n, 4)\nio, ii = split(i, 8)\n"
                        "reorder(no, io, ni, ii)\nvectorize(ii)\ncompute_at(IL, io)",
                        NULL};
    check_schedule(tree_lstm, cw);
}

/* The group's block replays from the trace, and its notes are on every
 * member's stage. */
static void test_trace(void) {
    Model md = tree_lstm();
    CHECK_EQ_INT(rv_module_schedule(md.m, "R", "dynamic_batch()\nspecialize()"), RV_OK);
    char *trace = rv_module_schedule_trace(md.m);
    CHECK_STR_CONTAINS(trace, "schedule R {\n    dynamic_batch()\n    specialize()\n}");
    CHECK_STR_CONTAINS(trace, "# stage hs (root, dynamic_batch=0, specialize=0): n i k(r)");
    CHECK_STR_CONTAINS(trace, "# stage h (root, dynamic_batch=0, specialize=0): n i");
    Model again = tree_lstm();
    CHECK_EQ_INT(lang_parse_schedules(again.m, "trace", trace), RV_OK);
    char *trace2 = rv_module_schedule_trace(again.m);
    CHECK(trace && trace2 && strcmp(trace, trace2) == 0);
    rv_free(trace);
    rv_free(trace2);
    rv_module_free(md.m);
    rv_module_free(again.m);
}

/* Arrays bound by hand that break the numbering the loops rely on: the
 * run fails before any kernel, naming the structure and the node. Bound
 * one by one, and as a batch built by hand (rv_linear, K 2, one data
 * integer per node) bound by rv_bindings_set_linear, which checks the
 * numbering as it copies the batch but leaves refusing it to the run
 * (the interpreter takes any numbering). */
static void expect_bad_numbering(const char *sched, int32_t N, const int32_t *nchild,
                                 const int32_t *child, int32_t nchildren, int32_t nbatch,
                                 const int32_t *begin, const int32_t *len, const char *msg) {
    Model md = tree_rnn();
    if (sched)
        CHECK_EQ_INT(rv_module_schedule(md.m, "R", sched), RV_OK);
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile(md.m, &opt, &p), RV_OK);
    int32_t word[8] = {0}, root[1] = {0}, rows[16] = {0};
    for (int32_t n = 0, e = 0; n < N; n++)
        for (int32_t k = 0; k < nchild[n]; k++)
            rows[2 * n + k] = child[e++];
    rv_linear lin = {.num_nodes = N, .num_structs = 1, .max_children = 2, .width = 1,
                     .num_batches = nbatch, .batch_begin = (int32_t *)begin,
                     .batch_length = (int32_t *)len, .child = rows,
                     .nchild = (int32_t *)nchild, .data = word, .root = root};
    for (int linear = 0; linear < 2; linear++) {
        Run r = {0};
        r.b = rv_bindings_new(md.m);
        if (linear) {
            CHECK_EQ_INT(rv_bindings_set_linear(r.b, "T", &lin), RV_OK);
        } else {
            rv_bindings_set_size(r.b, "N", N);
            rv_bindings_set_size(r.b, "B", 1);
            rv_bindings_set_size(r.b, "_T_nbatch", nbatch);
            bind(&r, "child", arr_i32(nchildren, child));
            bind(&r, "nchild", arr_i32(N, nchild));
            bind(&r, "root", arr_i32(1, root));
            bind(&r, "word", arr_i32(N, word));
            bind(&r, "_T_batch_begin", arr_i32(nbatch, begin));
            bind(&r, "_T_batch_length", arr_i32(nbatch, len));
        }
        bind(&r, "Emb", arr_f32(V, H, 1));
        bind(&r, "W", arr_f32(H, 2 * H, 2));
        CHECK_EQ_INT(rv_program_run(p, r.b), RV_ERR_ARG);
        CHECK_STR_CONTAINS(rv_last_error(), msg);
        run_free(&r);
    }
    rv_program_free(p);
    rv_module_free(md.m);
}

static void test_plan_checks_numbering(void) {
    /* node 1's child is node 0: numbered below its parent */
    const int32_t nc2[] = {0, 1}, ch2[] = {0}, b2[] = {1, 0}, l2[] = {1, 1};
    expect_bad_numbering(NULL, 2, nc2, ch2, 1, 2, b2, l2,
                         "structure T: child 0 of node 1 is node 0, not numbered above it");
    /* the chain 0 <- 1 <- 2 numbered right, but nodes 0 and 1 in one batch */
    const int32_t nc3[] = {1, 1, 0}, ch3[] = {1, 2}, b3[] = {2, 0}, l3[] = {1, 2};
    expect_bad_numbering("dynamic_batch()", 3, nc3, ch3, 2, 2, b3, l3,
                         "structure T: child 0 of node 0 (batch 1) is node 1, in the same batch");
    /* without dynamic batches the same arrays are fine for the node loop,
     * but specialize takes batch 0 for the leaves */
    const int32_t b3b[] = {1, 0}, l3b[] = {2, 1};
    expect_bad_numbering("specialize()", 3, nc3, ch3, 2, 2, b3b, l3b,
                         "structure T: node 1 has children but is in batch 0");
    /* batches that leave a gap */
    const int32_t b3c[] = {2, 1, 0}, l3c[] = {1, 1, 2};
    expect_bad_numbering("dynamic_batch()", 3, nc3, ch3, 2, 3, b3c, l3c,
                         "structure T: batch 1 begins at node 1, not 2");
}

/* A weight packed by a member's cache_read is packed once per call,
 * above the loop over batches, not once per level; a member computed at
 * another member's node loop stays inside it. */
static void test_hoisted_weights(void) {
    Model md = tree_lstm();
    CHECK_EQ_INT(rv_module_schedule(md.m, "R", "dynamic_batch()"), RV_OK);
    CHECK_EQ_INT(rv_module_schedule(md.m, "iou", "compute_at(hs, n)\nUL = cache_read(U)"), RV_OK);
    Kernel **ks = NULL;
    int n = 0;
    CHECK_EQ_INT(lower_module(md.m, &ks, &n), RV_OK);
    for (int k = 0; k < n; k++) {
        if (strcmp(ks[k]->name, "R") != 0)
            continue;
        Buf b = {0};
        lower_print_kernel(&b, ks[k]);
        const char *txt = buf_str(&b), *ul = strstr(txt, "allocate UL"),
                   *loop = strstr(txt, "for b in"), *hs = strstr(txt, "allocate hs");
        CHECK(ul && loop && hs && ul < loop && loop < hs);
        if (!(ul && loop && hs && ul < loop && loop < hs))
            fprintf(stderr, "%s\n", txt);
        buf_free(&b);
    }
    base_free(ks);
    rv_module_free(md.m);
}

/* The group's kernel through the CUDA back end: CUDA C, and PTX where
 * NVRTC is present (every loop serial in the thread: binds are refused). */
static void test_cuda_source(void) {
    Model md = tree_lstm();
    CHECK_EQ_INT(rv_module_schedule(md.m, "R", "dynamic_batch()\nspecialize()"), RV_OK);
    Kernel **ks = NULL;
    int n = 0;
    rv_status st = lower_module(md.m, &ks, &n);
    CHECK_EQ_INT(st, RV_OK);
    bool nvrtc = jit_nvrtc_available();
    if (!nvrtc)
        printf("skipped NVRTC compiles: %s\n", rv_last_error());
    int found = 0;
    for (int k = 0; st == RV_OK && k < n; k++) {
        if (strcmp(ks[k]->name, "R") != 0)
            continue;
        found++;
        CHECK_EQ_INT(lower_run_pass(ks[k], "reduce"), RV_OK);
        CHECK_EQ_INT(lower_run_pass(ks[k], "checks"), RV_OK);
        CHECK_EQ_INT(lower_run_pass(ks[k], "flatten"), RV_OK);
        char *src = NULL, *sym = NULL, *ptx = NULL;
        CgLaunch l;
        CHECK_EQ_INT(cg_cuda_kernel(ks[k], &src, &sym, &l), RV_OK);
        CHECK_STR_CONTAINS(src, "_T_batch_begin");
        if (nvrtc && src) {
            CHECK_EQ_INT(jit_nvrtc_compile(src, NULL, &ptx), RV_OK);
            CHECK_STR_CONTAINS(ptx, ".entry");
        }
        base_free(ptx);
        base_free(src);
        base_free(sym);
    }
    CHECK_EQ_INT(found, 1);
    base_free(ks);
    rv_module_free(md.m);
}

/* The AOT output checks the numbering too: the check as C, which the
 * system compiler accepts. */
static void test_aot_check(void) {
    Model md = tree_rnn();
    CHECK_EQ_INT(rv_module_schedule(md.m, "R", "dynamic_batch()"), RV_OK);
    Kernel **ks = NULL;
    int n = 0;
    CHECK_EQ_INT(lower_pipeline(md.m, &ks, &n), RV_OK);
    CgUnit unit = {0};
    CgAot aot = {0};
    PlanDispatch pd = {0};
    int first[] = {0};
    cg_c_module(ks, n, &unit);
    rv_status st = cg_c_aot(md.m, ks, n, 1, first, &pd, &unit, "rnn", "test", 1, &aot);
    CHECK_EQ_INT(st, RV_OK);
    if (st == RV_OK) {
        CHECK_STR_CONTAINS(aot.source, "/* structure T, as recursion R numbers it */");
        CHECK_STR_CONTAINS(aot.source, "rv_ch[rv_at] <= rv_n || rv_ch[rv_at] < rv_bb[rv_b]");
        char path[PATH_MAX + 32], cmd[3 * PATH_MAX];
        snprintf(path, sizeof path, "%s/rnn.c", cache_dir);
        FILE *f = fopen(path, "w");
        fputs(aot.source, f);
        fclose(f);
        snprintf(path, sizeof path, "%s/rnn.h", cache_dir);
        f = fopen(path, "w");
        fputs(aot.header, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "cc -std=c11 -fsyntax-only -Wall -Werror -Iinclude -I'%s' '%s/rnn.c'",
                 cache_dir, cache_dir);
        CHECK_EQ_INT(system(cmd), 0);
    }
    cg_aot_free(&aot);
    cg_unit_free(&unit);
    base_free(ks);
    rv_module_free(md.m);
}

/* ---- the .rv examples and models against the interpreter ---- */

/* A batch of structures that `st` accepts: sequences, and for trees and
 * DAGs perfect and random trees too (grids for DAGs), with data in 0..12;
 * `full`: single nodes and perfect trees only (a model that reads two
 * children at every internal node). */
/* The kinds of batch add_batch draws: every kind of structure, or only
 * chains and perfect trees (full), or only single nodes (no node has a
 * child: every children array is empty). */
enum { BATCH_MIXED, BATCH_FULL, BATCH_SINGLES };

static void add_batch(rv_structs *bs, const rv_structure *st, int mode, uint64_t seed) {
    uint64_t rng = seed;
    int kinds = st->kind == RV_STRUCT_SEQUENCE ? 2 : st->kind == RV_STRUCT_TREE ? 5 : 6;
    for (int s = 0; s < 9; s++) {
        int k = mode == BATCH_SINGLES ? 0 : mode == BATCH_FULL ? (s % 2) * 2 : s % kinds;
        int32_t data[400];
        for (int i = 0; i < 400; i++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            data[i] = (int32_t)((rng >> 33) % V);
        }
        if (k == 0 || k == 1) {
            CHECK_EQ_INT(rv_structs_add_sequence(bs, k == 0 ? 1 : 9, data), RV_OK);
        } else if (k == 5) {
            CHECK_EQ_INT(rv_structs_add_grid(bs, 4, 5, data), RV_OK);
        } else if (k == 2) {
            CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 3, data), RV_OK);
        } else {
            add_structure(bs, 4, &rng); /* a random binary tree */
        }
    }
}

/* Every output of the module, compiled under `sched` (target, steps
 * pairs), equals the interpreter's on linearized batches. */
static void check_file(const char *path, const char *const *sched, int mode) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_load(path, &m), RV_OK);
    if (!m) {
        fprintf(stderr, "    %s: %s\n", path, rv_last_error());
        return;
    }
    for (int i = 0; sched && sched[i]; i += 2)
        CHECK_EQ_INT(rv_module_schedule(m, sched[i], sched[i + 1]), RV_OK);
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS, .threads = 2};
    rv_program *p = NULL;
    rv_status st = rv_program_compile(m, &opt, &p);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK) {
        fprintf(stderr, "    %s: %s\n", path, rv_last_error());
        rv_module_free(m);
        return;
    }
    const rv_structure *T = m->structures.data[0];
    for (uint64_t seed = 1; seed <= 2; seed++) {
        rv_structs *bs = rv_structs_new(T->kind, T->max_children, T->ndata);
        add_batch(bs, T, mode, seed);
        rv_linear lin = {0};
        CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
        rv_bindings *bi = rv_bindings_new(m), *bc = rv_bindings_new(m);
        CHECK_EQ_INT(rv_bindings_set_linear(bi, T->name, &lin), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_linear(bc, T->name, &lin), RV_OK);
        CHECK_EQ_INT(rv_bindings_randomize(bi, seed), RV_OK);
        CHECK_EQ_INT(rv_bindings_randomize(bc, seed), RV_OK);
        /* weights scaled as a trained model's are (products over 256 terms
         * of unit-range values saturate every gate and amplify f32
         * rounding through the levels) */
        for (int t = 0; t < m->tensors.len; t++) {
            rv_tensor *x = m->tensors.data[t];
            if (x->op->kind != OP_INPUT || x->dtype != RV_F32)
                continue;
            rv_bindings *both[] = {bi, bc};
            for (int k = 0; k < 2; k++) {
                rv_array *a = (rv_array *)rv_bindings_get_array(both[k], x->name);
                float *d = rv_array_data(a);
                for (int64_t i = 0; i < rv_array_numel(a); i++)
                    d[i] *= 0.1f;
            }
        }
        CHECK_EQ_INT(rv_interp_run(m, bi), RV_OK);
        st = rv_program_run(p, bc);
        CHECK_EQ_INT(st, RV_OK);
        if (st != RV_OK)
            fprintf(stderr, "    %s: %s\n", path, rv_last_error());
        for (int t = 0; st == RV_OK && t < m->tensors.len; t++) {
            rv_tensor *x = m->tensors.data[t];
            if (!rv_tensor_is_output(m, x))
                continue;
            const rv_array *a = rv_bindings_get_array(bi, x->name);
            const rv_array *b = rv_bindings_get_array(bc, x->name);
            CHECK(a && b && rv_array_numel(a) == rv_array_numel(b));
            if (!a || !b || rv_array_numel(a) != rv_array_numel(b))
                continue;
            const float *fa = rv_array_data((rv_array *)a), *fb = rv_array_data((rv_array *)b);
            int bad = 0;
            for (int64_t i = 0; i < rv_array_numel(a); i++, n_compared++)
                if (fabs(fa[i] - fb[i]) > 1e-4 * (1 + fabs(fa[i])) && bad++ < 3)
                    fprintf(stderr, "    %s: %s[%lld] = %g compiled, %g interpreted\n", path,
                            x->name, (long long)i, fb[i], fa[i]);
            CHECK_EQ_INT(bad, 0);
        }
        rv_bindings_free(bi);
        rv_bindings_free(bc);
        rv_linear_free(&lin);
        rv_structs_free(bs);
    }
    rv_program_free(p);
    rv_module_free(m);
}

static void test_examples_vs_interpreter(void) {
    const char *dyn[] = {"R", "dynamic_batch()", NULL};
    const char *spec[] = {"R", "dynamic_batch()\nspecialize()", NULL};
    const char *files[] = {"examples/tree_rnn_rec.rv", "examples/tree_lstm.rv",
                           "examples/seq_rnn.rv"};
    for (int f = 0; f < 3; f++) {
        check_file(files[f], NULL, f == 0 ? BATCH_FULL : BATCH_MIXED);
        check_file(files[f], dyn, f == 0 ? BATCH_FULL : BATCH_MIXED);
        check_file(files[f], spec, f == 0 ? BATCH_FULL : BATCH_MIXED);
    }
    /* leaf values independent of the node: propagated, hoisted, dropped
     * (the example's own schedule specializes) */
    const char *s0_par[] = {"s0", "parallel(n)", NULL};
    check_file("examples/tree_rnn_init.rv", NULL, BATCH_MIXED);
    check_file("examples/tree_rnn_init.rv", s0_par, BATCH_MIXED);
    check_file("models/treelstm_h256.rv", spec, BATCH_MIXED);
}

/* A copy of a child's state (cache_read of a member read at its
 * children) is made before the member's guard, at the child a failing
 * guard stands in for: the children array's element 0. In a batch of
 * single nodes that array is empty, and the kernel gets zeroed bytes at
 * its origin (program.c, empty_origin), so the copy reads node 0's row;
 * fuzz_sched segfaulted here when it read past the empty array. */
static void test_empty_children(void) {
    const char *copy[] = {"h", "L = cache_read(h, \"local\", pad=1)", NULL};
    const char *dyn_copy[] = {"R", "dynamic_batch()", "h", "L = cache_read(h, \"local\", pad=1)",
                              NULL};
    check_file("examples/seq_rnn.rv", copy, BATCH_SINGLES);
    check_file("examples/seq_rnn.rv", dyn_copy, BATCH_SINGLES);
    check_file("examples/seq_rnn.rv", copy, BATCH_MIXED);
}

/* ---- leaf computations (src/lower/leaf.c) ---- */

/* The lowered text of group R's kernel for m under `sched` (target, steps
 * pairs); with `leaves`, only up to its loop over the internal nodes (the
 * leaves' nests of a specialized group). */
static char *kernel_text(rv_module *m, const char *const *sched, bool leaves) {
    for (int i = 0; sched[i]; i += 2)
        CHECK_EQ_INT(rv_module_schedule(m, sched[i], sched[i + 1]), RV_OK);
    Kernel **ks = NULL;
    int n = 0;
    char *out = NULL;
    CHECK_EQ_INT(lower_module(m, &ks, &n), RV_OK);
    for (int k = 0; k < n; k++) {
        if (strcmp(ks[k]->name, "R") != 0)
            continue;
        Buf b = {0};
        lower_print_kernel(&b, ks[k]);
        const char *txt = buf_str(&b), *end = strstr(txt, "for b in");
        if (!end)
            end = strstr(txt, "for r in");
        CHECK(end != NULL);
        if (!leaves)
            end = NULL;
        out = base_xstrdup(txt);
        if (end)
            out[end - txt] = '\0';
        buf_free(&b);
    }
    base_free(ks);
    return out;
}

/* TreeLSTM's hs is 0 at the leaves: its store there goes (nothing reads
 * it at children) and U·hs vanishes from iou; a learned initial state is
 * computed once, at the first leaf, and a constant leaf value (z = bias)
 * is propagated into h with its store dropped. */
static void test_leaf_fold(void) {
    Model md = tree_lstm();
    const char *sched[] = {"R", "dynamic_batch()\nspecialize()", "iou", "parallel(n)", NULL};
    char *t = kernel_text(md.m, sched, true);
    CHECK(t && !strstr(t, "hs[") && !strstr(t, "U{") && strstr(t, "iou[") && strstr(t, "c[") &&
          strstr(t, "h["));
    if (t && (strstr(t, "hs[") || strstr(t, "U{")))
        fprintf(stderr, "%s\n", t);
    base_free(t);
    rv_module_free(md.m);

    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_load("examples/tree_rnn_init.rv", &m), RV_OK);
    const char *own[] = {NULL}; /* the example's schedule: dynamic_batch, specialize */
    t = m ? kernel_text(m, own, true) : NULL;
    CHECK(t && strstr(t, "for n in 0..1:") && strstr(t, "s0[") && strstr(t, "W0{") &&
          !strstr(t, "z[") && strstr(t, "bias{") && strstr(t, "s0{_T_batch_begin{0}, i}"));
    if (t && !strstr(t, "for n in 0..1:"))
        fprintf(stderr, "%s\n", t);
    base_free(t);
    rv_module_free(m);
}

/* A node of a batch, batch_begin[b] + m with m < batch_length[b], is
 * below N by the host plan's check of the batches (numbering.c): the
 * lowering states it in the node loop's extent and the simplifier proves
 * every read at a node in range, so no run-time check is left in the
 * members' nests (it blocked their vectorization), in the leaves' nests,
 * the batches' or the tiles of nodes of a split node loop. */
static void test_node_reads_proven(void) {
    const char *sched[][9] = {
        {"R", "dynamic_batch()\nspecialize()", "iou", "parallel(n)", NULL},
        {"R", "dynamic_batch()", "h", "parallel(n)", NULL},
        {"R", "dynamic_batch()\nspecialize()", "iou",
         "UL = cache_read(U, layout=\"j, i\")\nIL = cache_write(iou)\n"
         "no, ni = split(n, 3)\nio, ii = split(i, 8)\n"
         "reorder(io, no, ni, ii)\nparallel(io)\nvectorize(ii)\n"
         "compute_at(IL, no)\ncompute_at(hs, no)",
         "IL", "reorder(j, n, i)\nunroll(n)\nvectorize(i)", NULL},
    };
    for (int i = 0; i < RV_COUNT(sched); i++) {
        Model md = tree_lstm();
        char *t = kernel_text(md.m, sched[i], false);
        CHECK(t && !strstr(t, "fail "));
        if (t && strstr(t, "fail "))
            fprintf(stderr, "schedule %d:\n%s\n", i, t);
        base_free(t);
        rv_module_free(md.m);
    }
}

static int count_of(const char *s, const char *what) {
    int n = 0;
    for (; s && (s = strstr(s, what)) != NULL; s += strlen(what))
        n++;
    return n;
}

/* A register tile at the leaves: hs is 0 there, computed at the tile of
 * nodes that reads it (compute_at), and iou's product with it is in a
 * cache_write stage inside iou. The leaf value propagates into the cache
 * stage as into an untiled member: U·hs vanishes (UL is read only where
 * it is packed, above the leaves), and hs, which nothing reads any more,
 * is not computed at the leaves (it was, over a region of N rows). The
 * internal nodes keep both. */
static void test_leaf_fold_tiles(void) {
    const char *sched[] = {"R",
                           "dynamic_batch()\nspecialize()",
                           "iou",
                           "UL = cache_read(U, layout=\"j, i\")\nIL = cache_write(iou)\n"
                           "no, ni = split(n, 4)\nio, ii = split(i, 8)\n"
                           "reorder(io, no, ni, ii)\nparallel(io)\nvectorize(ii)\n"
                           "compute_at(IL, no)\ncompute_at(hs, no)",
                           "IL",
                           "reorder(j, n, i)\nunroll(n)\nvectorize(i)",
                           NULL};
    Model md = tree_lstm();
    char *t = kernel_text(md.m, sched, true);
    CHECK(t && !strstr(t, "hs[") && count_of(t, "UL[") == 1 && strstr(t, "IL[") &&
          strstr(t, "iou["));
    if (t && (strstr(t, "hs[") || count_of(t, "UL[") != 1))
        fprintf(stderr, "%s\n", t);
    base_free(t);
    rv_module_free(md.m);
    md = tree_lstm();
    t = kernel_text(md.m, sched, false);
    CHECK(t && strstr(t, "hs[") && count_of(t, "UL[") > 1);
    base_free(t);
    rv_module_free(md.m);
    check_schedule(tree_lstm, sched);
}

/* The last, partial tile of a split node loop holds len - len/4*4 <= 3
 * nodes of a level (len a UF value): the stages computed at the tile (hs,
 * the register tile IL) get buffers of 3 rows there, on the stack, not N
 * rows from the heap per tile and level. */
static void test_tail_tile_rows(void) {
    const char *sched[] = {"R",
                           "dynamic_batch()\nspecialize()",
                           "iou",
                           "IL = cache_write(iou)\nno, ni = split(n, 4)\nio, ii = split(i, 8)\n"
                           "reorder(io, no, ni, ii)\nvectorize(ii)\n"
                           "compute_at(IL, no)\ncompute_at(hs, no)",
                           NULL};
    Model md = tree_lstm();
    char *t = kernel_text(md.m, sched, false);
    char tile[64], tail[64];
    snprintf(tile, sizeof tile, "allocate hs: f32[%d] local", 4 * H);
    snprintf(tail, sizeof tail, "allocate hs: f32[%d] local", 3 * H);
    CHECK(t && strstr(t, tile) && strstr(t, tail) && !strstr(t, "global"));
    if (t && (!strstr(t, tail) || strstr(t, "global")))
        fprintf(stderr, "%s\n", t);
    base_free(t);
    rv_module_free(md.m);
    check_schedule(tree_lstm, sched);
}

/* A weight packed at the top of a member that is itself computed inside
 * another member (rh, a product of each child's state alone, computed at
 * the tile of nodes of uh that reads it, packs U) is packed once, above
 * the batches, not once per tile of every level. */
static void test_hoisted_weights_nested(void) {
    static const char text[] =
        "size N in 1..100\nsize B in 1..10\n"
        "structure T : tree(N, 2) {\n    children child, nchild\n    roots root[s < B]\n"
        "    data word in 0..99\n}\n"
        "input Emb : f32[100, 32]\ninput U : f32[32, 32]\ninput W : f32[32, 32]\n"
        "recurse R over T {\n"
        "    rh[n, k < 2, i < 32] = if k < nchild[n]\n"
        "        then sigmoid(sum(j < 32) U[i, j] * h[child[n, k], j]) * h[child[n, k], i]\n"
        "        else 0.0\n"
        "    uh[n, i < 32] = sum(j < 32) W[i, j] * (rh[n, 0, j] + rh[n, 1, j])\n"
        "    h[n, i < 32] = if nchild[n] == 0 then Emb[word[n], i] else tanh(uh[n, i])\n"
        "}\n";
    const char *sched[] = {"R", "dynamic_batch()\nspecialize()",
                           "rh", "U_pk = cache_read(U, layout=\"j, i\")\nparallel(n)",
                           "uh", "no, ni = split(n, 4)\nparallel(no)\ncompute_at(rh, no)",
                           NULL};
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("nested.rv", text, &m), RV_OK);
    char *t = m ? kernel_text(m, sched, false) : NULL;
    const char *pk = t ? strstr(t, "allocate U_pk") : NULL;
    const char *loop = t ? strstr(t, "for b in") : NULL;
    CHECK(pk && loop && pk < loop && count_of(t, "allocate U_pk") == 1);
    if (!(pk && loop && pk < loop))
        fprintf(stderr, "%s\n", t ? t : "");
    base_free(t);
    rv_module_free(m);
}

/* A conditional member whose register tile holds its internal nodes' sum
 * (cache_write of the then-branch) and whose leaves copy an input (MV-RNN's
 * A) computes no tile at the leaves: their body does not read it, and a
 * tile nothing reads has no bounded region (it ran over all N nodes at
 * every leaf); values: check_schedule. */
static void test_leaf_unread_tile(void) {
    static const char text[] =
        "size N in 1..100\nsize B in 1..10\n"
        "structure T : tree(N, 2) {\n    children child, nchild\n    roots root[s < B]\n"
        "    data word in 0..99\n}\n"
        "input Mat : f32[100, 32]\ninput W : f32[32, 32]\n"
        "recurse R over T {\n"
        "    A[n, j < 32] = if nchild[n] > 0\n"
        "        then sum(k < nchild[n], m < 32) W[j, m] * A[child[n, k], m] / 32.0\n"
        "        else Mat[word[n], j]\n"
        "}\n";
    const char *sched[] = {"R", "dynamic_batch()\nspecialize()",
                           "A", "A_acc = cache_write(A)\njo, ji = split(j, 16)\n"
                                "reorder(n, jo, ji)\nparallel(n)\ncompute_at(A_acc, jo)",
                           NULL};
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("tile.rv", text, &m), RV_OK);
    char *t = m ? kernel_text(m, sched, true) : NULL;
    CHECK(t && strstr(t, "Mat") && !strstr(t, "A_acc"));
    if (t && strstr(t, "A_acc"))
        fprintf(stderr, "%s\n", t);
    base_free(t);
    rv_module_free(m);
    m = NULL;
    CHECK_EQ_INT(rv_module_parse("tile.rv", text, &m), RV_OK);
    t = m ? kernel_text(m, sched, false) : NULL;
    CHECK(t && strstr(t, "allocate A_acc: f32[16] local")); /* the internal nodes' tile */
    base_free(t);
    rv_module_free(m);
}

/* A member read only at its own node and computed at another member's
 * tile of nodes (TreeFC's children's states hc, at the tile of h, whose
 * register tile holds tanh's sum) is not computed at the leaves, whose
 * body does not read it: nothing bounds its region there, and it was
 * copied for all N nodes at every leaf tile (a call at batch 10 ran 100x
 * longer); at the internal nodes it is the tile's local buffer. */
static void test_leaf_unread_member(void) {
    static const char text[] =
        "size N in 1..100\nsize B in 1..10\n"
        "structure T : tree(N, 2) {\n    children child, nchild\n    roots root[s < B]\n"
        "    data word in 0..99\n}\n"
        "input E : f32[100, 32]\ninput W : f32[32, 64]\n"
        "recurse R over T {\n"
        "    hc[n, j < 64] = if j / 32 < nchild[n] then h[child[n, j / 32], j % 32] else 0.0\n"
        "    h[n, i < 32] = if nchild[n] > 0 then tanh(sum(j < 64) W[i, j] * hc[n, j])\n"
        "        else E[word[n], i]\n"
        "}\n";
    const char *sched[] = {"R", "dynamic_batch()\nspecialize()",
                           "h", "h_acc = cache_write(h)\nno, ni = split(n, 4)\n"
                                "io, ii = split(i, 16)\nreorder(io, no, ni, ii)\n"
                                "compute_at(h_acc, no)\ncompute_at(hc, no)",
                           NULL};
    for (int leaves = 1; leaves >= 0; leaves--) {
        rv_module *m = NULL;
        CHECK_EQ_INT(rv_module_parse("member.rv", text, &m), RV_OK);
        char *t = m ? kernel_text(m, sched, leaves) : NULL;
        const char *inner = t ? strstr(t, "for b in") : NULL;
        bool ok = leaves ? t && strstr(t, "E{") && !strstr(t, "hc")
                         : inner && strstr(inner, "allocate hc") && strstr(inner, "h_acc");
        CHECK(ok);
        if (t && !ok)
            fprintf(stderr, "%s\n", t);
        base_free(t);
        rv_module_free(m);
    }
}

/* The register tile of a conditional member (cache_write moves the sum of
 * its then-branch, added under the member's condition) is specialized with
 * its member: at the leaves a leaf-only input product (TreeLSTM's W_iou x)
 * and at the internal nodes a children's product (MV-RNN's A) test no
 * nchild[n] in the tile, and a member that only the leaves read (X) is
 * not stored at the internal nodes, nor one only they read (P) at the
 * leaves; values:
 * tests/regress/rec_tile_condition_specialize.rv. */
static void test_tile_condition_specialized(void) {
    static const char text[] =
        "size N in 1..100\nsize B in 1..10\n"
        "structure T : tree(N, 2) {\n    children child, nchild\n    roots root[s < B]\n"
        "    data word in 0..99\n}\n"
        "input E : f32[100, 32]\ninput W : f32[32, 32]\n"
        "recurse R over T {\n"
        "    X[n, j < 32] = if nchild[n] == 0 then sum(l < 32) W[j, l] * E[word[n], l] else 0.0\n"
        "    A[n, j < 32] = if nchild[n] > 0\n"
        "        then sum(k < nchild[n], m < 32) W[j, m] * A[child[n, k], m] / 32.0\n"
        "        else X[n, j]\n"
        "    P[n, j < 32] = if nchild[n] > 0 then sum(m < 32) W[j, m] * A[n, m] else 0.0\n"
        "    Q[n, j < 32] = if nchild[n] > 0 then P[n, j] else X[n, j]\n"
        "}\n"
        "output A, Q\n";
    const char *sched[] = {"R", "dynamic_batch()\nspecialize()",
                           "X", "X_acc = cache_write(X)\nparallel(n)\ncompute_at(X_acc, n)",
                           "A", "A_acc = cache_write(A)\nparallel(n)\ncompute_at(A_acc, n)",
                           "P", "P_acc = cache_write(P)\nparallel(n)\ncompute_at(P_acc, n)",
                           NULL};
    for (int leaves = 1; leaves >= 0; leaves--) {
        rv_module *m = NULL;
        CHECK_EQ_INT(rv_module_parse("tile.rv", text, &m), RV_OK);
        char *t = m ? kernel_text(m, sched, leaves) : NULL;
        /* the internal nodes' text starts at their loop over levels */
        const char *body = t ? (leaves ? t : strstr(t, "for b in")) : NULL;
        const char *tile = body ? strstr(body, leaves ? "X_acc[" : "A_acc[") : NULL;
        /* X, 0 at the internal nodes where A no longer reads it, is not
         * stored there; nor P, 0 at the leaves where Q does not read it */
        bool dead = body && strstr(body, leaves ? "P[" : "X[");
        CHECK(tile && !strstr(body, "if ") && !dead);
        if (!tile || strstr(body, "if ") || dead)
            fprintf(stderr, "%s\n", t ? t : "");
        base_free(t);
        rv_module_free(m);
    }
}

/* Every model under its own schedule (models/gen.py: level by level,
 * leaves specialized, products register-tiled over tiles of nodes with
 * packed weights, parallel over output columns) against the interpreter;
 * TreeFC, TreeRNN and MV-RNN read two children at every internal node. */
static void test_models_scheduled(void) {
    const char *models[] = {"treefc", "treernn", "treegru", "treelstm",
                            "mvrnn",  "dagrnn",  "lstm",    "gru"};
    for (int i = 0; i < 8; i++) {
        char path[64];
        snprintf(path, sizeof path, "models/%s_h%d.rv", models[i], i == 4 ? 64 : 256);
        check_file(path, NULL, i < 2 || i == 4);
    }
}

/* A schedule the rules refuse, with a message located at its step. */
static void expect_refused(Model (*make)(void), const char *target, const char *steps,
                           const char *msg) {
    Model md = make();
    CHECK_EQ_INT(rv_module_schedule(md.m, target, steps), RV_OK);
    char *trace = rv_module_schedule_trace(md.m);
    CHECK(trace == NULL);
    rv_free(trace);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    rv_module_free(md.m);
}

static void test_refused_schedules(void) {
    /* nodes depend on their children: no parallel node loop without
     * dynamic batches */
    expect_refused(tree_rnn, "h", "parallel(n)",
                   ":2:1: error: parallel: the node loop n of h "
                   "cannot be parallel");
    /* the group's loop binds the node loop: it stays outermost, whole */
    expect_refused(tree_rnn, "h", "no, ni = split(n, 4)", "split: the node loop n of h must stay");
    expect_refused(tree_rnn, "h", "reorder(i, n)", "reorder: the node loop n of h must stay");
    expect_refused(tree_lstm, "iou", "f = fuse(n, i)", "fuse: the node loop n of iou must stay");
    /* a member computed outside its group, or inlined */
    expect_refused(tree_lstm, "Out", "compute_at(h, s)",
                   "compute_at: h is a member of recursion R: it can be computed only inside "
                   "another member of R");
    expect_refused(tree_lstm, "h", "compute_inline(iou)",
                   "iou is a member of recursion R: members are computed node by node");
    /* group primitives in a member's block and the other way round */
    expect_refused(tree_rnn, "h", "dynamic_batch()",
                   "dynamic_batch schedules a recursion group, not one member: write it in "
                   "`schedule R { ... }`");
    expect_refused(tree_rnn, "R", "io, ii = split(i, 2)",
                   "split schedules the loops of a stage; R is a recursion group (members h)");
    expect_refused(tree_lstm, "Out", "specialize()",
                   "specialize schedules a recursion group; Out "
                   "is not one");
    /* c is read at children (by c): inside h it would hold one node */
    expect_refused(tree_lstm, "h", "compute_at(c, n)",
                   "compute_at: c is read at the children of a node (by c)");
    /* no barrier between batches or members on a GPU yet */
    expect_refused(tree_rnn, "h", "bind(i, \"threadIdx.x\")",
                   "bind: loop i of h cannot be bound to threadIdx.x: the batches of recursion R "
                   "need a grid-wide barrier");
    /* gpu_batches separates dynamic batches, and names one of two ways */
    expect_refused(tree_rnn, "R", "gpu_batches(\"launch\")",
                   "gpu_batches() separates the dynamic batches of recursion R, which has none");
    expect_refused(tree_rnn, "R", "dynamic_batch()\ngpu_batches(\"fast\")",
                   "expected \"launch\" (a kernel launch per batch) or \"persistent\"");
}

/* refactor(msg): msg computed where its parents read it, under the
 * default, batched and specialized schedules, against the interpreter;
 * its nest gone; refused over a DAG. */
static void test_refactor(void) {
    const char *plain[] = {"R", "refactor(msg)", NULL};
    const char *all[] = {"R",
                         "dynamic_batch()\nspecialize()\nrefactor(msg)",
                         "h",
                         "parallel(n)",
                         "y",
                         "parallel(n)\nio, ii = split(i, 4)\nvectorize(ii)",
                         NULL};
    const char *cw[] = {"R", "refactor(msg)", "y", "YL = cache_write(y)", NULL};
    check_file("tests/fuzz/rec_msg.rv", plain, false);
    check_file("tests/fuzz/rec_msg.rv", all, false);
    check_file("tests/fuzz/rec_msg.rv", cw, false);
    for (int k = 0; k < 2; k++) {
        rv_module *m = NULL;
        CHECK_EQ_INT(rv_module_load("tests/fuzz/rec_msg.rv", &m), RV_OK);
        char *t = m ? kernel_text(m, k ? all : plain, false) : NULL;
        CHECK(t && !strstr(t, "msg[") && strstr(t, "G{word{child{") && strstr(t, "y["));
        if (t && strstr(t, "msg["))
            fprintf(stderr, "%s\n", t);
        base_free(t);
        rv_module_free(m);
    }
    expect_refused(tree_lstm, "R", "refactor(hs)",
                   "refactor: refactor(hs): recursion R is over DAG structure T");
}

/* The plan of an unrolled recursion replays its partition before the
 * kernel runs: on a perfect tree of height 3 (heads: the 4 nodes at depth
 * 2 in unrolled batch 0, the root in batch 1), the root moved into batch 0
 * reads grandchildren not computed yet, and a partition without the
 * root's batch computes no root: both fail naming the structure. The
 * linearizer's own partition runs and matches the interpreter. */
static const char *const unrolled_rnn =
    "size N in 1..100\nsize B in 1..10\n"
    "structure T : tree(N, 2) {\n children child, nchild\n roots root[s < B]\n"
    " data word in 0..12\n}\n"
    "input Emb : f32[13, 8]\ninput W : f32[8, 16]\n"
    "recurse R over T {\n"
    " h[n, i < 8] = if nchild[n] == 0 then Emb[word[n], i]\n"
    "   else tanh(sum(k < nchild[n], j < 8) W[i, 8 * k + j] * h[child[n, k], j] / 4.0)\n}\n"
    "Out[s, i] = h[root[s], i]\n"
    "schedule R { dynamic_batch() unroll_recursion() }\n";

/* unrolled_rnn parsed (NULL on failure) and compiled into *p. */
static rv_module *compile_unrolled(rv_program **p) {
    rv_module *m = parse_ok(unrolled_rnn);
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS};
    if (m)
        CHECK_EQ_INT(rv_program_compile(m, &opt, p), RV_OK);
    return m;
}

static void expect_bad_unroll(const rv_linear *lin, int32_t nu, const int32_t *begin,
                              const int32_t *len, const int32_t *node, const char *msg) {
    rv_program *p = NULL;
    rv_module *m = compile_unrolled(&p);
    if (!m)
        return;
    Run r = {0}, ref = {0};
    r.b = rv_bindings_new(m);
    ref.b = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_linear(r.b, "T", lin), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_linear(ref.b, "T", lin), RV_OK);
    bind(&r, "Emb", arr_f32(V, H, 1));
    bind(&r, "W", arr_f32(H, 2 * H, 2));
    bind(&ref, "Emb", arr_f32(V, H, 1));
    bind(&ref, "W", arr_f32(H, 2 * H, 2));
    if (!msg) {
        CHECK_EQ_INT(rv_program_run(p, r.b), RV_OK);
        CHECK_EQ_INT(rv_interp_run(m, ref.b), RV_OK);
        const rv_array *a = rv_bindings_get_array(r.b, "Out"), *e = rv_bindings_get_array(ref.b, "Out");
        CHECK(a && e && rv_array_numel(a) == rv_array_numel(e));
        for (int64_t i = 0; a && e && i < rv_array_numel(a); i++)
            CHECK(fabsf(((const float *)rv_array_cdata(a))[i] -
                        ((const float *)rv_array_cdata(e))[i]) < 1e-5f);
    } else {
        rv_bindings_set_size(r.b, "_T_nunroll", nu);
        bind(&r, "_T_unroll_begin", arr_i32(nu, begin));
        bind(&r, "_T_unroll_length", arr_i32(nu, len));
        bind(&r, "_T_unroll_node", arr_i32(lin->num_nodes, node));
        CHECK_EQ_INT(rv_program_run(p, r.b), RV_ERR_ARG);
        CHECK_STR_CONTAINS(rv_last_error(), msg);
    }
    run_free(&r);
    run_free(&ref);
    rv_program_free(p);
    rv_module_free(m);
}

/* unroll_recursion() on the examples, with and without specialize() and
 * parallel iterations, against the interpreter on batches mixing single
 * nodes, chains, perfect and random trees. */
static void test_unroll_vs_interpreter(void) {
    const char *unr[] = {"R", "dynamic_batch()\nunroll_recursion()", NULL};
    const char *spec[] = {"R", "dynamic_batch()\nspecialize()\nunroll_recursion()", "h",
                          "parallel(n)", NULL};
    const char *files[] = {"examples/tree_rnn_rec.rv", "examples/tree_lstm.rv",
                           "examples/seq_rnn.rv"};
    for (int f = 0; f < 3; f++) {
        check_file(files[f], unr, f == 0);
        check_file(files[f], spec, f == 0);
    }
}

static void test_plan_checks_unroll(void) {
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    int32_t words[15] = {0};
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 3, words), RV_OK);
    rv_linear lin = {0};
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(lin.num_unroll, 0);
    expect_bad_unroll(&lin, 0, NULL, NULL, NULL, NULL); /* the run computes it */
    CHECK_EQ_INT(rv_linear_unroll(&lin), RV_OK);
    CHECK_EQ_INT(lin.num_unroll, 2);
    CHECK(lin.unroll_length[0] == 4 && lin.unroll_length[1] == 1 && lin.unroll_node[4] == 0);
    expect_bad_unroll(&lin, 0, NULL, NULL, NULL, NULL);
    int32_t node[15], begin[] = {0, 1}, len[] = {1, 4};
    memcpy(node, lin.unroll_node, sizeof node);
    node[0] = 0; /* the root first, alone in batch 0 */
    for (int j = 1; j < 5; j++)
        node[j] = lin.unroll_node[j - 1];
    expect_bad_unroll(&lin, 2, begin, len, node,
                      "structure T: head node 0 of unrolled batch 0 has a grandchild not "
                      "computed in an earlier batch");
    const int32_t len1[] = {4};
    expect_bad_unroll(&lin, 1, begin, len1, lin.unroll_node,
                      "structure T: node 0 is in no unrolled iteration");
    rv_linear_free(&lin);
    rv_structs_free(bs);
}

/* Out of `p`'s run on b against the interpreter's on the same batch. */
static void expect_out_as_interp(rv_module *m, rv_program *p, rv_bindings *b,
                                 const rv_linear *lin, const rv_bindings *w) {
    rv_bindings *ref = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_inherit(ref, w), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_linear(ref, "T", lin), RV_OK);
    CHECK_EQ_INT(rv_program_run(p, b), RV_OK);
    CHECK_EQ_INT(rv_interp_run(m, ref), RV_OK);
    const rv_array *a = rv_bindings_get_array(b, "Out"), *e = rv_bindings_get_array(ref, "Out");
    CHECK(a && e && rv_array_numel(a) == rv_array_numel(e));
    for (int64_t i = 0; a && e && i < rv_array_numel(a); i++)
        CHECK(fabsf(((const float *)rv_array_cdata(a))[i] -
                    ((const float *)rv_array_cdata(e))[i]) < 1e-5f);
    rv_bindings_free(ref);
}

/* rv_linearize leaves the unrolled partition out; the run of an unrolled
 * recursion computes it from the bound batch: on one bindings object
 * rebound to batches larger, then smaller, then larger again, on fresh
 * bindings inheriting the weights (as the Python package's calls do), and
 * never in place of a partition bound by hand after the batch. */
static void test_unroll_computed_by_the_run(void) {
    rv_program *p = NULL;
    rv_module *m = compile_unrolled(&p);
    if (!m)
        return;
    Run w = {.b = rv_bindings_new(m)}, same = {.b = rv_bindings_new(m)};
    bind(&w, "Emb", arr_f32(V, H, 1));
    bind(&w, "W", arr_f32(H, 2 * H, 2));
    CHECK_EQ_INT(rv_bindings_inherit(same.b, w.b), RV_OK);
    const int heights[] = {4, 1, 3, 0, 5}; /* N in 1..100 */
    rv_linear lin = {0};
    for (int r = 0; r < 5; r++) {
        rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
        int32_t words[127] = {0};
        for (int i = 0; i < 127; i++)
            words[i] = (i * 7 + r) % V;
        CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, heights[r], words), RV_OK);
        CHECK_EQ_INT(rv_structs_add_sequence(bs, 2 + 3 * r, words), RV_OK);
        CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_linear(same.b, "T", &lin), RV_OK);
        expect_out_as_interp(m, p, same.b, &lin, w.b);
        rv_bindings *fresh = rv_bindings_new(m);
        CHECK_EQ_INT(rv_bindings_inherit(fresh, w.b), RV_OK);
        CHECK_EQ_INT(rv_bindings_set_linear(fresh, "T", &lin), RV_OK);
        expect_out_as_interp(m, p, fresh, &lin, w.b);
        /* the partition the run computed is rv_linear_unroll's */
        CHECK_EQ_INT(rv_linear_unroll(&lin), RV_OK);
        CHECK_EQ_INT(rv_bindings_get_size(fresh, "_T_nunroll"), lin.num_unroll);
        const rv_array *un = rv_bindings_get_array(fresh, "_T_unroll_node");
        CHECK(un && rv_array_numel(un) == lin.num_nodes);
        for (int32_t j = 0; un && j < lin.num_nodes; j++)
            CHECK_EQ_INT(((const int32_t *)rv_array_cdata(un))[j], lin.unroll_node[j]);
        rv_bindings_free(fresh);
        /* read before any run (a copy of the bindings reads them) */
        rv_bindings *read = rv_bindings_new(m);
        CHECK_EQ_INT(rv_bindings_set_linear(read, "T", &lin), RV_OK);
        const rv_array *ub = rv_bindings_get_array(read, "_T_unroll_begin");
        CHECK(ub && rv_array_numel(ub) == lin.num_unroll);
        CHECK_EQ_INT(rv_bindings_get_size(read, "_T_nunroll"), lin.num_unroll);
        for (int32_t u = 0; ub && u < lin.num_unroll; u++)
            CHECK_EQ_INT(((const int32_t *)rv_array_cdata(ub))[u], lin.unroll_begin[u]);
        rv_bindings_free(read);
        rv_structs_free(bs);
    }
    /* a partition bound by hand after the batch is the one the run checks */
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    int32_t words[15] = {0};
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 3, words), RV_OK);
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_linear(same.b, "T", &lin), RV_OK);
    int32_t none[15];
    for (int j = 0; j < 15; j++)
        none[j] = j;
    bind(&same, "_T_unroll_node", arr_i32(15, none));
    CHECK_EQ_INT(rv_program_run(p, same.b), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure T");
    rv_structs_free(bs);
    rv_linear_free(&lin);
    run_free(&same);
    run_free(&w);
    rv_program_free(p);
    rv_module_free(m);
}

/* What rv_bindings_set_linear checked is not checked again by the run of
 * the same call, and only by it: a UF rebound after the bind, or the
 * bound batch's memory written after the run of its call, is checked by
 * the next run (the chain 0 <- 1 <- 2, numbered and batched right, then
 * node 1's child made node 0). */
static void test_linear_checks_once(void) {
    Model md = tree_rnn();
    CHECK_EQ_INT(rv_module_schedule(md.m, "R", "dynamic_batch()\nspecialize()"), RV_OK);
    rv_compile_options opt = {.cache_dir = cache_dir, .cflags = PROGRAM_CFLAGS};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile(md.m, &opt, &p), RV_OK);
    int32_t nchild[] = {1, 1, 0}, child[] = {1, 0, 2, 0, 0, 0}, word[3] = {0}, root[1] = {0};
    int32_t begin[] = {2, 1, 0}, len[] = {1, 1, 1}, bad[] = {1, 0};
    rv_linear lin = {.num_nodes = 3, .num_structs = 1, .max_children = 2, .width = 1,
                     .num_batches = 3, .batch_begin = begin, .batch_length = len,
                     .child = child, .nchild = nchild, .data = word, .root = root};
    const char *msg = "structure T: child 0 of node 1 is node 0, not numbered above it";
    Run r = {0};
    r.b = rv_bindings_new(md.m);
    bind(&r, "Emb", arr_f32(V, H, 1));
    bind(&r, "W", arr_f32(H, 2 * H, 2));
    CHECK_EQ_INT(rv_bindings_set_linear(r.b, "T", &lin), RV_OK);
    CHECK_EQ_INT(rv_program_run(p, r.b), RV_OK);
    bind(&r, "child", arr_i32(2, bad));
    CHECK_EQ_INT(rv_program_run(p, r.b), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    CHECK_EQ_INT(rv_bindings_set_linear(r.b, "T", &lin), RV_OK);
    CHECK_EQ_INT(rv_program_run(p, r.b), RV_OK);
    /* outside the API (its arrays are read-only), but never silently
     * wrong in a later call */
    rv_array *ch = (rv_array *)rv_bindings_get_array(r.b, "child");
    CHECK(ch && rv_array_dtype(ch) == RV_I32);
    if (ch && rv_array_dtype(ch) == RV_I32)
        ((int32_t *)rv_array_data(ch))[1] = 0;
    CHECK_EQ_INT(rv_program_run(p, r.b), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), msg);
    run_free(&r);
    rv_program_free(p);
    rv_module_free(md.m);
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-recurse-XXXXXX");
    if (!mkdtemp(cache_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_tree_rnn_default);
    RUN(test_tree_lstm_default);
    RUN(test_tree_rnn_dynamic_batch);
    RUN(test_tree_lstm_schedules);
    RUN(test_refused_schedules);
    RUN(test_plan_checks_numbering);
    RUN(test_cuda_source);
    RUN(test_hoisted_weights);
    RUN(test_trace);
    RUN(test_aot_check);
    RUN(test_examples_vs_interpreter);
    RUN(test_leaf_fold);
    RUN(test_refactor);
    RUN(test_node_tiles);
    RUN(test_models_scheduled);
    RUN(test_node_reads_proven);
    RUN(test_leaf_fold_tiles);
    RUN(test_tail_tile_rows);
    RUN(test_hoisted_weights_nested);
    RUN(test_plan_checks_unroll);
    RUN(test_unroll_vs_interpreter);
    RUN(test_empty_children);
    RUN(test_leaf_unread_tile);
    RUN(test_tile_condition_specialized);
    RUN(test_unroll_computed_by_the_run);
    RUN(test_linear_checks_once);
    RUN(test_leaf_unread_member);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache_dir);
    fprintf(stderr, "test_recurse_lower: %lld values compared\n", (long long)n_compared);
    return harness_report();
}
