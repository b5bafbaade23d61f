/* test_tune_space.c — the tuner's search space (src/tune/space.c) and the
 * features of a candidate's loop IR (src/tune/features.c): the tunable
 * stage is found in dense and batch_matmul programs; the hand-written
 * schedules of bench/programs are in the space (a candidate lowers to the
 * same loop IR: equal features at every shape tried); every candidate
 * passes the schedule checker as `.rv` text; the knobs follow the
 * machine's vector width and registers; features have the values the
 * loop IR implies. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ir/ir.h"
#include "tune/tune.h"

/* A machine with AVX-512's vectors and registers and two cores, so the
 * space does not depend on the machine the test runs on. */
static const TuneHw avx512 = {.isa = TUNE_ISA_AVX512,
                              .vector_bytes = 64,
                              .vector_regs = 32,
                              .l1d_bytes = 48 << 10,
                              .l1d_ways = 12,
                              .l2_bytes = 2 << 20,
                              .usable_cores = 2};
static const TuneHw avx2 = {.isa = TUNE_ISA_AVX2,
                            .vector_bytes = 32,
                            .vector_regs = 16,
                            .l1d_bytes = 32 << 10,
                            .l2_bytes = 256 << 10,
                            .usable_cores = 2};

static const char *small_dense = "size M in 1..50\n"
                                 "input X : f32[M, 32]\n"
                                 "input W : f32[64, 32]\n"
                                 "input bias : f32[64]\n"
                                 "Y[i, j] = gelu(sum(k < 32) X[i, k] * W[j, k] + bias[j])\n";

static void test_analyze(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("dense.rv", small_dense, &m), RV_OK);
    TuneStage s;
    CHECK_EQ_INT(tune_space_analyze(m, &s), RV_OK);
    CHECK(strcmp(s.name, "Y") == 0 && strcmp(s.i, "i") == 0 && strcmp(s.j, "j") == 0 &&
          strcmp(s.k, "k") == 0);
    CHECK(strcmp(s.a, "X") == 0 && strcmp(s.b, "W") == 0);
    CHECK(s.a_k_inner && s.b_k_inner);
    CHECK_EQ_INT((int)s.n_extent, 64);
    CHECK_EQ_INT((int)s.k_extent, 32);
    CHECK_EQ_INT(s.nbatch, 0);
    TuneShape sh = {.v = {7}};
    double batch, rows, cols, red;
    tune_stage_extents(&s, &sh, &batch, &rows, &cols, &red);
    CHECK(batch == 1 && rows == 7 && cols == 64 && red == 32);
    rv_module_free(m);

    /* batch_matmul NN, operands written in the other order */
    CHECK_EQ_INT(rv_module_parse("bmm.rv",
                                 "size T in 1..64\ninput A : f32[12, T, 16]\n"
                                 "input B : f32[12, 16, 32]\n"
                                 "C[b, i, j] = sum(k < 16) B[b, k, j] * A[b, i, k]\n",
                                 &m),
                 RV_OK);
    CHECK_EQ_INT(tune_space_analyze(m, &s), RV_OK);
    CHECK_EQ_INT(s.nbatch, 1);
    CHECK(strcmp(s.batch[0], "b") == 0 && strcmp(s.a, "A") == 0 && strcmp(s.b, "B") == 0);
    CHECK(s.a_k_inner && !s.b_k_inner);
    rv_module_free(m);

    /* nothing to tune: said so */
    CHECK_EQ_INT(rv_module_parse("ew.rv", "size N in 1..8\ninput X : f32[N]\nY[i] = X[i] * 2.0\n",
                                 &m),
                 RV_OK);
    CHECK_EQ_INT(tune_space_analyze(m, &s), RV_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(rv_last_error(), "nothing to tune");
    rv_module_free(m);
}

/* The candidate with these knobs, or -1. */
/* The position k among the candidates idx[0..n) (idx NULL: 0..n-1) of
 * the one with these knobs; -1. */
static int find_in(const TuneSpace *sp, const int *idx, int n, const char *knobs) {
    for (int k = 0; k < n; k++) {
        Buf b = {0};
        tune_cand_describe(&sp->cands[idx ? idx[k] : k], &b);
        bool eq = strcmp(buf_str(&b), knobs) == 0;
        buf_free(&b);
        if (eq)
            return k;
    }
    return -1;
}

static int find_cand(const TuneSpace *sp, const char *knobs) {
    return find_in(sp, NULL, sp->len, knobs);
}

/* Each hand-written schedule of bench/programs that reaches the vendor
 * libraries is a candidate: the same loop IR, so the same features at
 * every shape; and each is a known-good sketch (seed), which the search
 * starts from and the dispatcher never falls below where measured. */
static void test_hand_written_in_space(void) {
    static const struct {
        const char *file, *knobs;
    } cases[] = {
        {"dense_packed.rv", "tile mr=6 nv=4 pack=1 pad=0 wide=0"},
        {"dense_kblock.rv", "kblock mr=6 nv=4 kc=256"},
        {"dense_stream.rv", "stream nj=24 ku=8"},
        {"dense_stream_k3072.rv", "stream nj=8 ku=8"},
        {"bmm_nt_dot.rv", "dot"},
        {"bmm_nn_bcast4x64.rv", "tile mr=4 nv=4 pack=0 pad=1 wide=1"},
        {"bmm_nt_bcast6x64_wt.rv", "tile mr=6 nv=4 pack=2 pad=1 wide=1"},
        {"sgemm.rv", "tile mr=6 nv=4 pack=0 pad=0 wide=1"},
    };
    TuneShape sh[3] = {{.v = {1}}, {.v = {7}}, {.v = {100}}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "bench/programs/%s", cases[i].file);
        rv_module *m = NULL;
        CHECK_EQ_INT(rv_module_load(path, &m), RV_OK);
        if (!m)
            continue;
        TuneSpace sp;
        CHECK_EQ_INT(tune_space_build(m, &avx512, &sp), RV_OK);
        int c = find_cand(&sp, cases[i].knobs);
        if (c < 0)
            printf("%s: no candidate '%s'\n", cases[i].file, cases[i].knobs);
        CHECK(c >= 0);
        /* and a known-good sketch the search starts from, among few */
        int nseeds = 0;
        for (int q = 0; q < sp.len; q++)
            nseeds += sp.cands[q].seed;
        CHECK(c < 0 || sp.cands[c].seed);
        CHECK(nseeds >= 1 && nseeds <= 24 && nseeds < sp.len / 4);
        float own[3 * TUNE_F_COUNT], cand[3 * TUNE_F_COUNT];
        CHECK_EQ_INT(tune_features(m, NULL, sh, 3, 16, 2, own), RV_OK);
        if (c >= 0) {
            CHECK_EQ_INT(tune_features(m, sp.cands[c].sched, sh, 3, 16, 2, cand), RV_OK);
            bool same = memcmp(own, cand, sizeof own) == 0;
            if (!same)
                printf("%s: '%s' lowers differently:\n%s", cases[i].file, cases[i].knobs,
                       sp.cands[c].sched);
            CHECK(same);
        }
        tune_space_free(&sp);
        rv_module_free(m);
    }
}

/* Every candidate, written into the program as text, passes `ravel
 * check`'s schedule checker; what the checker refuses never enters.
 * `defs` is `program` without its schedule blocks. */
static void check_all(const char *name, const char *program, const char *defs, const TuneHw *hw,
                      int *rejected) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse(name, program, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, hw, &sp), RV_OK);
    CHECK(sp.len > 0);
    for (int i = 0; i < sp.len; i++) {
        Buf b = {0};
        buf_printf(&b, "%s%s", defs, sp.cands[i].sched);
        rv_module *x = NULL;
        CHECK_EQ_INT(rv_module_parse(name, buf_str(&b), &x), RV_OK);
        rv_status st = x ? rv_module_check_schedule(x) : RV_ERR_ARG;
        if (st != RV_OK)
            printf("%s: candidate %d refused: %s\n%s", name, i, rv_last_error(),
                   sp.cands[i].sched);
        CHECK_EQ_INT(st, RV_OK);
        rv_module_free(x);
        buf_free(&b);
        /* a neighbour differs in exactly one knob, within its template */
        int n = tune_space_neighbour(&sp, i, (uint64_t)i * 7919u);
        if (n >= 0) {
            int diff = 0;
            for (int q = 0; q < TUNE_NPARAMS; q++)
                diff += sp.cands[n].p[q] != sp.cands[i].p[q];
            CHECK(sp.cands[n].tmpl == sp.cands[i].tmpl && diff == 1);
        }
    }
    *rejected = sp.rejected;
    tune_space_free(&sp);
    rv_module_free(m);
}

static void test_candidates_pass_checker(void) {
    int rejected = 0;
    check_all("dense.rv", small_dense, small_dense, &avx512, &rejected);
    /* a narrow bmm NT (N = 8 < 16 lanes): wide tiles and packings that the
     * checker refuses are dropped, not kept */
    const char *bmm = "size M in 1..20\ninput X : f32[4, M, 16]\ninput W : f32[4, 8, 16]\n"
                      "Y[b, i, j] = sum(k < 16) X[b, i, k] * W[b, j, k]\n";
    check_all("bmm.rv", bmm, bmm, &avx512, &rejected);
    CHECK(rejected > 0);
}

/* Tuning the last contraction keeps the program's schedule of the others:
 * every candidate starts with it (and passes the checker with it). */
static void test_other_stages_kept(void) {
    const char *defs = "size M in 1..20\ninput X : f32[M, 16]\ninput W : f32[32, 16]\n"
                       "input V : f32[16, 32]\n"
                       "Y[i, j] = sum(k < 16) X[i, k] * W[j, k]\n"
                       "Z[i, n] = sum(j < 32) Y[i, j] * V[n, j]\n";
    Buf two = {0};
    buf_printf(&two, "%s%s", defs,
               "schedule Y {\n    parallel(i)\n}\n"
               "schedule Z {\n    ZL = cache_write(Z)\n    compute_at(ZL, i)\n}\n"
               "schedule ZL {\n    vectorize(n)\n}\n");
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("two.rv", buf_str(&two), &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, &avx512, &sp), RV_OK);
    CHECK(strcmp(sp.stage.name, "Z") == 0);
    CHECK(sp.len > 0);
    for (int i = 0; i < sp.len; i++) {
        CHECK(strncmp(sp.cands[i].sched, "schedule Y {\n    parallel(i)\n}\n", 30) == 0);
        CHECK(strstr(sp.cands[i].sched, "schedule ZL {\n    vectorize(n)") == NULL);
    }
    tune_space_free(&sp);
    rv_module_free(m);
    int rejected = 0;
    check_all("two.rv", buf_str(&two), defs, &avx512, &rejected);
    buf_free(&two);
}

/* The knobs follow the machine: tiles in whole vectors of its width, and
 * register tiles (mr x nv accumulators, nv vectors of B, a broadcast)
 * within its registers. */
static void test_space_from_hw(void) {
    const TuneHw *hws[2] = {&avx512, &avx2};
    for (int h = 0; h < 2; h++) {
        rv_module *m = NULL;
        CHECK_EQ_INT(rv_module_parse("dense.rv", small_dense, &m), RV_OK);
        TuneSpace sp;
        CHECK_EQ_INT(tune_space_build(m, hws[h], &sp), RV_OK);
        int lanes = hws[h]->vector_bytes / 4, largest = 0;
        for (int i = 0; i < sp.len; i++) {
            const TuneCand *c = &sp.cands[i];
            if (c->tmpl != TUNE_T_TILE && c->tmpl != TUNE_T_KBLOCK)
                continue;
            CHECK_EQ_INT(c->tile_j % lanes, 0);
            CHECK(c->p[0] * c->p[1] + c->p[1] + 1 <= hws[h]->vector_regs);
            if (c->p[0] * c->p[1] > largest)
                largest = c->p[0] * c->p[1];
        }
        /* the largest register tile uses most of the registers */
        CHECK(largest + 4 >= hws[h]->vector_regs - 4);
        tune_space_free(&sp);
        rv_module_free(m);
    }
}

/* Features of a known loop nest: Y[i, j] = sum(k < 16) X[i, k] * W[j, k],
 * j in vectors of 16, i parallel. */
static void test_features(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("f.rv",
                                 "size M in 1..64\ninput X : f32[M, 16]\ninput W : f32[32, 16]\n"
                                 "Y[i, j] = sum(k < 16) X[i, k] * W[j, k]\n",
                                 &m),
                 RV_OK);
    const char *sched = "schedule Y {\n    reorder(i, k, j)\n    parallel(i)\n    vectorize(j)\n}\n";
    TuneShape sh[3] = {{.v = {3}}, {.v = {4}}, {.v = {8}}};
    float f[3 * TUNE_F_COUNT];
    CHECK_EQ_INT(tune_features(m, sched, sh, 3, 16, 2, f), RV_OK);
    for (int s = 0; s < 3; s++) {
        const float *x = &f[s * TUNE_F_COUNT];
        double M = (double)sh[s].v[0];
        CHECK_NEAR(x[TUNE_F_VECTOR], 32, 0);
        CHECK_NEAR(x[TUNE_F_LOG_TASKS], log2(1 + M), 1e-5);
        CHECK_NEAR(x[TUNE_F_LOG_OUTPUTS], log2(1 + M * 32), 1e-5);
        /* M tasks on 2 cores: ceil(M / 2) waves */
        CHECK_NEAR(x[TUNE_F_OCCUPANCY], M / (2 * ceil(M / 2)), 1e-6);
        /* at least a multiply and an add per lane of every k, i, j */
        CHECK(x[TUNE_F_LOG_FLOPS] >= log2(1 + 2 * M * 32 * 16) - 1e-4);
        CHECK(x[TUNE_F_VEC_FRAC] > 0.99);
        CHECK(x[TUNE_F_LOOPS] >= 3 && x[TUNE_F_DEPTH] >= 3);
    }
    /* work doubles with M */
    CHECK_NEAR(exp2(f[2 * TUNE_F_COUNT + TUNE_F_LOG_FLOPS]) - 1,
               2 * (exp2(f[1 * TUNE_F_COUNT + TUNE_F_LOG_FLOPS]) - 1), 1e-2);
    /* an illegal schedule is the checker's error */
    CHECK_EQ_INT(tune_features(m, "schedule Y { vectorize(q) }", sh, 1, 16, 2, f),
                 RV_ERR_SCHEDULE);
    rv_module_free(m);
}

/* A producer the program's schedule computes inside the tuned stage
 * (compute_at(P, io): TreeLSTM's child sums per tile of nodes) is
 * computed at every tiled candidate's tile of rows; the templates without
 * one (dot, kblock) leave it where its own schedule puts it. */
static void test_producers_inside(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("inside.rv",
                                 "size M in 1..50\ninput X : f32[M, 32]\n"
                                 "input W : f32[64, 32]\n"
                                 "P[i, k < 32] = X[i, k] * 2.0\n"
                                 "Y[i, j < 64] = sum(k < 32) P[i, k] * W[j, k]\n"
                                 "schedule Y {\n    io, ii = split(i, 4)\n"
                                 "    compute_at(P, io)\n}\n",
                                 &m),
                 RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, &avx512, &sp), RV_OK);
    CHECK_EQ_INT(sp.stage.ninside, 1);
    int tiled = 0;
    for (int c = 0; c < sp.len; c++) {
        bool at = strstr(sp.cands[c].sched, "compute_at(P, io)") != NULL;
        bool rows = sp.cands[c].tmpl == TUNE_T_TILE || sp.cands[c].tmpl == TUNE_T_STREAM;
        CHECK_EQ_INT(at, rows);
        tiled += at;
    }
    CHECK(tiled > 0);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* bench/tune/bmm_nt.rv and its space on the AVX-512 machine; false when
 * it does not load. */
static bool bmm_nt_space(rv_module **m, TuneSpace *sp) {
    *m = NULL;
    CHECK_EQ_INT(rv_module_load("bench/tune/bmm_nt.rv", m), RV_OK);
    if (!*m)
        return false;
    CHECK_EQ_INT(tune_space_build(*m, &avx512, sp), RV_OK);
    return true;
}

/* A kind of known-good sketch the checker refuses as written gets its
 * nearest legal form: bench/tune/bmm_nt.rv's rows of W are T, so the
 * padded tile over W transposed in blocks (bmm_nt_bcast6x64_wt.rv at
 * N = 64) would read the packed copy past its rows; the unpadded one is
 * the sketch of that kind. */
static void test_refused_sketch_unpadded(void) {
    rv_module *m = NULL;
    TuneSpace sp;
    if (!bmm_nt_space(&m, &sp))
        return;
    CHECK(find_cand(&sp, "tile mr=6 nv=4 pack=2 pad=1 wide=1") < 0);
    int c = find_cand(&sp, "tile mr=6 nv=4 pack=2 pad=0 wide=1");
    CHECK(c >= 0 && sp.cands[c].seed);
    int d = find_cand(&sp, "tile mr=6 nv=4 pack=2 pad=0 wide=0");
    CHECK(d >= 0 && !sp.cands[d].seed);
    tune_space_free(&sp);
    rv_module_free(m);
}

/* A leaf's space: at T = 64 (N = T a multiple of the 64-wide tile) the
 * padded tile over W transposed in blocks (bmm_nt_bcast6x64_wt.rv),
 * refused by the generic space, is legal and appended after it, marked
 * a leaf's; at T = 24 it is not (its padded tile would read past row 24
 * of the copy), but the 16-wide padded tile is not either, while at
 * T = 32 the 32-wide one is. A second leaf space at T = 64 adds nothing
 * new, returns the same candidates, and T's range is put back. */
static void test_leaf_space(void) {
    rv_module *m = NULL;
    TuneSpace sp;
    if (!bmm_nt_space(&m, &sp))
        return;
    int len = sp.len, out[1024];
    rv_variant_sizes at = {.nsizes = 1, .at = {{"T", 64}}};
    int n = tune_space_add_leaf(m, &avx512, &at, &sp, out, 1024);
    CHECK(n > 0 && sp.len == len && sp.nleaf == n);
    int k = find_in(&sp, out, n, "tile mr=6 nv=4 pack=2 pad=1 wide=1");
    CHECK(k >= 0 && out[k] >= len && sp.cands[out[k]].leaf);
    for (int q = 0; q < n; q++) /* none of them is in the generic space */
        for (int c = 0; c < len; c++)
            CHECK(strcmp(sp.cands[c].sched, sp.cands[out[q]].sched) != 0);
    int again[1024], nleaf = sp.nleaf;
    CHECK_EQ_INT(tune_space_add_leaf(m, &avx512, &at, &sp, again, 1024), n);
    CHECK(sp.nleaf == nleaf && memcmp(again, out, sizeof *out * (size_t)n) == 0);
    rv_size *T = rv_module_size(m, "T");
    CHECK(T && T->lo == 1 && T->hi == 128);

    at.at[0].value = 24;
    n = tune_space_add_leaf(m, &avx512, &at, &sp, out, 1024);
    CHECK(find_in(&sp, out, n, "tile mr=6 nv=4 pack=2 pad=1 wide=1") < 0);
    CHECK(find_in(&sp, out, n, "tile mr=6 nv=1 pack=2 pad=1 wide=1") < 0);
    at.at[0].value = 32;
    n = tune_space_add_leaf(m, &avx512, &at, &sp, out, 1024);
    CHECK(find_in(&sp, out, n, "tile mr=6 nv=2 pack=2 pad=1 wide=1") >= 0);
    CHECK(find_in(&sp, out, n, "tile mr=6 nv=4 pack=2 pad=1 wide=1") < 0);
    tune_space_free(&sp);
    rv_module_free(m);
}

static int picked;
static int pick_variant(const int64_t *sizes, void *user) {
    (void)sizes;
    return *(const int *)user;
}

/* pack=3 (B transposed in lanes x lanes blocks, lanes rows through all
 * of k at a time): the blocks in the other order from pack=2, whose text
 * (and so every recorded candidate's code) stays as it was; a seed for
 * the register-maximal unpadded tile; refused where pack=2 is (a padded
 * tile over bmm_nt's W, whose rows are T); and every pack=3 candidate of
 * a dense with ragged edges (N = 80, K = 40: a partial panel and a
 * partial block of k) matches the interpreter at M = 1, primes and 128. */
static void test_pack_rows_blocked(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("dense.rv", small_dense, &m), RV_OK);
    TuneSpace sp;
    CHECK_EQ_INT(tune_space_build(m, &avx512, &sp), RV_OK);
    int two = find_cand(&sp, "tile mr=6 nv=4 pack=2 pad=0 wide=0");
    int three = find_cand(&sp, "tile mr=6 nv=4 pack=3 pad=0 wide=0");
    CHECK(two >= 0 && three >= 0);
    if (two >= 0 && three >= 0) {
        /* pack=2's block as session 16 wrote it, byte for byte */
        CHECK(strstr(sp.cands[two].sched,
                     "schedule WL {\n    ko, ki = split(k, 16)\n    jo, jl = split(j, 16)\n"
                     "    reorder(ko, jo, ki, jl)\n    unroll(ki)\n    vectorize(jl)\n}\n") != NULL);
        CHECK(strstr(sp.cands[three].sched,
                     "schedule WL {\n    ko, ki = split(k, 16)\n    jo, jl = split(j, 16)\n"
                     "    reorder(jo, ko, ki, jl)\n    unroll(ki)\n    vectorize(jl)\n}\n") != NULL);
        CHECK(sp.cands[three].seed && sp.cands[three].sketch == 3);
        CHECK(sp.cands[three].kind != sp.cands[two].kind);
    }
    tune_space_free(&sp);
    rv_module_free(m);

    if (bmm_nt_space(&m, &sp)) {
        CHECK(find_cand(&sp, "tile mr=6 nv=4 pack=3 pad=1 wide=1") < 0);
        CHECK(find_cand(&sp, "tile mr=6 nv=4 pack=3 pad=0 wide=1") >= 0);
        tune_space_free(&sp);
        rv_module_free(m);
    }

    const char *ragged = "size M in 1..128\ninput X : f32[M, 40]\ninput W : f32[80, 40]\n"
                         "input bias : f32[80]\n"
                         "Y[i, j] = gelu(sum(k < 40) X[i, k] * W[j, k] + bias[j])\n";
    CHECK_EQ_INT(rv_module_parse("ragged.rv", ragged, &m), RV_OK);
    CHECK_EQ_INT(tune_space_build(m, &avx512, &sp), RV_OK);
    const char *scheds[64];
    int n = 0;
    for (int c = 0; c < sp.len && n < 64; c++)
        if (sp.cands[c].tmpl == TUNE_T_TILE && sp.cands[c].p[2] == 3 &&
            (sp.cands[c].p[1] == 4 || sp.cands[c].p[1] == 1))
            scheds[n++] = sp.cands[c].sched;
    CHECK(n >= 4);
    /* one compile: every candidate a variant, chosen by `pick` */
    static const int64_t ms[] = {1, 2, 7, 13, 31, 127, 128};
    rv_dispatch d = {.fn = pick_variant, .user = &picked};
    rv_compile_options co = {.threads = 1};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile_variants(m, n, scheds, &d, &co, &p), RV_OK);
    for (picked = 0; p && picked < n; picked++)
        for (size_t q = 0; q < sizeof ms / sizeof ms[0]; q++) {
            rv_bindings *want = rv_bindings_new(m), *got = rv_bindings_new(m);
            CHECK_EQ_INT(rv_bindings_set_size(want, "M", ms[q]), RV_OK);
            CHECK_EQ_INT(rv_bindings_set_size(got, "M", ms[q]), RV_OK);
            CHECK_EQ_INT(rv_bindings_randomize(want, (uint64_t)ms[q]), RV_OK);
            CHECK_EQ_INT(rv_bindings_randomize(got, (uint64_t)ms[q]), RV_OK);
            CHECK_EQ_INT(rv_interp_run(m, want), RV_OK);
            CHECK_EQ_INT(rv_program_run(p, got), RV_OK);
            CHECK_EQ_INT(rv_program_last_variant(p), picked);
            CHECK_SAME_TENSOR(want, got, "Y", 1e-4);
            rv_bindings_free(got);
            rv_bindings_free(want);
        }
    rv_program_free(p);
    tune_space_free(&sp);
    rv_module_free(m);
}

int main(void) {
    RUN(test_analyze);
    RUN(test_hand_written_in_space);
    RUN(test_candidates_pass_checker);
    RUN(test_other_stages_kept);
    RUN(test_space_from_hw);
    RUN(test_features);
    RUN(test_producers_inside);
    RUN(test_refused_sketch_unpadded);
    RUN(test_leaf_space);
    RUN(test_pack_rows_blocked);
    return harness_report();
}
