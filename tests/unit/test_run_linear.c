/*
 * test_run_linear.c — rv_program_run_linear, a recursive model's call in
 * one call of the library: the same outputs, as rv_array_infos in
 * definition order, as rv_bindings_set_linear + rv_program_run +
 * rv_bindings_get_info on other bindings, call after call on batches of
 * different sizes, on bindings reset to the weights' first (or not); a wrong count of output infos, an unknown structure and
 * a batch the structure refuses fail with the step's message, before any
 * run, and a batch the run refuses with the run's, leaving the infos
 * untouched.
 */
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char cache_dir[64];

/* A TreeRNN over a tree of at most 2 children, and a second output that
 * reads no structure (the infos follow definition order). */
static const char *const program = "size N in 1..1000\n"
                                   "structure T : tree(N, 2) {\n"
                                   "    children child, nchild\n"
                                   "    data word in -1..7\n"
                                   "}\n"
                                   "param Emb : f32[8, 4]\n"
                                   "recurse R over T {\n"
                                   "    h[n, i < 4] = if nchild[n] == 0 then Emb[word[n], i]\n"
                                   "                  else tanh(h[child[n, 0], i] + h[child[n, 1], i])\n"
                                   "}\n"
                                   "S[i < 4] = Emb[0, i] * 2.0\n"
                                   "schedule R {\n"
                                   "    dynamic_batch()\n"
                                   "}\n";

typedef struct Fixture {
    rv_module *m;
    rv_program *p;
    rv_array *emb;
    rv_array *zeros;             /* another Emb, bound in b to be reset away */
    rv_bindings *base, *b, *ref; /* the weights; run_linear's; the separate steps' */
} Fixture;

static Fixture setup(void) {
    Fixture f = {0};
    CHECK_EQ_INT(rv_module_parse("run_linear.rv", program, &f.m), RV_OK);
    rv_compile_options opt = {.cache_dir = cache_dir, .threads = 1};
    CHECK_EQ_INT(rv_program_compile(f.m, &opt, &f.p), RV_OK);
    int64_t shape[2] = {8, 4};
    f.emb = rv_array_new(RV_F32, 2, shape);
    for (int k = 0; k < 32; k++)
        rv_array_set_f64(f.emb, k, 0.1 * (k % 7) - 0.3);
    f.zeros = rv_array_new(RV_F32, 2, shape);
    f.base = rv_bindings_new(f.m);
    f.b = rv_bindings_new(f.m);
    f.ref = rv_bindings_new(f.m);
    CHECK_EQ_INT(rv_bindings_set_array(f.base, "Emb", f.emb), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(f.b, "Emb", f.zeros), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_array(f.ref, "Emb", f.emb), RV_OK);
    return f;
}

static void teardown(Fixture *f) {
    rv_bindings_free(f->b);
    rv_bindings_free(f->ref);
    rv_bindings_free(f->base);
    rv_array_free(f->emb);
    rv_array_free(f->zeros);
    rv_program_free(f->p);
    rv_module_free(f->m);
}

/* Outputs h and S of a batch of `count` perfect trees of heights 0..,
 * words cycling through the vocabulary, against the separate steps. */
static void check_batch(Fixture *f, rv_structs *bs, rv_linear *lin, int count,
                        const rv_bindings *base) {
    rv_structs_clear(bs);
    int32_t words[63];
    for (int k = 0; k < 63; k++)
        words[k] = (k * 3) % 8;
    for (int s = 0; s < count; s++)
        CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, s % 5, words), RV_OK);
    CHECK_EQ_INT(rv_linearize(bs, lin), RV_OK);
    rv_array_info got[2];
    CHECK_EQ_INT(rv_program_run_linear(f->p, f->b, base, "T", lin, got, 2), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_linear(f->ref, "T", lin), RV_OK);
    CHECK_EQ_INT(rv_program_run(f->p, f->ref), RV_OK);
    const char *names[2] = {"h", "S"};
    for (int k = 0; k < 2; k++) {
        rv_array_info want;
        CHECK(rv_bindings_get_info(f->ref, names[k], &want));
        CHECK_EQ_INT(got[k].dtype, RV_F32);
        CHECK_EQ_INT(got[k].ndim, want.ndim);
        int64_t n = 1;
        for (int d = 0; d < want.ndim; d++) {
            CHECK_EQ_INT(got[k].shape[d], want.shape[d]);
            n *= want.shape[d];
        }
        CHECK(got[k].data && memcmp(got[k].data, want.data, (size_t)n * sizeof(float)) == 0);
        /* the info describes the array the bindings hold */
        rv_array_info held;
        CHECK(rv_bindings_get_info(f->b, names[k], &held));
        CHECK(held.data == got[k].data);
    }
    CHECK_EQ_INT(got[0].shape[0], lin->num_nodes);
}

/* b starts with another Emb bound: each call's reset to base drops it
 * (and the previous batch) before binding the next batch. */
static void test_same_as_steps(void) {
    Fixture f = setup();
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    rv_linear lin = {0};
    int counts[] = {1, 10, 3, 7, 1};
    for (int k = 0; k < 5; k++)
        check_batch(&f, bs, &lin, counts[k], f.base);
    /* no base: b's own bindings, as bound by hand */
    CHECK_EQ_INT(rv_bindings_set_array(f.b, "Emb", f.emb), RV_OK);
    check_batch(&f, bs, &lin, 4, NULL);
    rv_linear_free(&lin);
    rv_structs_free(bs);
    teardown(&f);
}

static void test_refusals(void) {
    Fixture f = setup();
    rv_structs *bs = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    rv_linear lin = {0};
    int32_t words[7] = {0, 1, 2, 3, 4, 5, 6};
    CHECK_EQ_INT(rv_structs_add_perfect_tree(bs, 2, words), RV_OK);
    CHECK_EQ_INT(rv_linearize(bs, &lin), RV_OK);
    rv_array_info out[3];
    memset(out, 0x5a, sizeof out);
    rv_array_info untouched = out[0];
    CHECK_EQ_INT(rv_program_run_linear(f.p, f.b, f.base, "T", &lin, out, 1), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "1 output infos for 2 outputs");
    CHECK_EQ_INT(rv_program_run_linear(f.p, f.b, f.base, "T", &lin, out, 3), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "3 output infos for 2 outputs");
    CHECK_EQ_INT(rv_program_run_linear(f.p, f.b, f.base, "T", &lin, NULL, 2), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no program or output infos");
    CHECK_EQ_INT(rv_program_run_linear(f.p, f.b, f.base, "U", &lin, out, 2), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no structure named 'U'");
    /* a batch allowing 3 children per node: set_linear's refusal, no run */
    rv_structs *wide = rv_structs_new(RV_STRUCT_TREE, 3, 1);
    int32_t begin[5] = {0, 3, 3, 3, 3}, child[3] = {1, 2, 3};
    CHECK_EQ_INT(rv_structs_add_children(wide, 4, begin, child, NULL), RV_OK);
    rv_linear wl = {0};
    CHECK_EQ_INT(rv_linearize(wide, &wl), RV_OK);
    CHECK_EQ_INT(rv_program_run_linear(f.p, f.b, f.base, "T", &wl, out, 2), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "structure T");
    /* a batch the run refuses (a leaf's word -1 reads Emb out of range) */
    rv_structs *nowords = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    CHECK_EQ_INT(rv_structs_add_perfect_tree(nowords, 1, NULL), RV_OK);
    rv_linear nl = {0};
    CHECK_EQ_INT(rv_linearize(nowords, &nl), RV_OK);
    CHECK_EQ_INT(rv_program_run_linear(f.p, f.b, f.base, "T", &nl, out, 2), RV_ERR_BOUNDS);
    CHECK_STR_CONTAINS(rv_last_error(), "read Emb[-1, 0]: index -1 out of bounds");
    rv_linear_free(&nl);
    rv_structs_free(nowords);
    CHECK(memcmp(&out[0], &untouched, sizeof untouched) == 0);
    CHECK(memcmp(&out[1], &untouched, sizeof untouched) == 0);
    rv_program_counters c;
    rv_program_stats(f.p, &c);
    CHECK_EQ_INT(c.runs, 1); /* the refused batches never ran: only the last did */
    /* and the bindings still serve the next call */
    CHECK_EQ_INT(rv_program_run_linear(f.p, f.b, f.base, "T", &lin, out, 2), RV_OK);
    CHECK_EQ_INT(out[0].shape[0], 7);
    rv_linear_free(&wl);
    rv_structs_free(wide);
    rv_linear_free(&lin);
    rv_structs_free(bs);
    teardown(&f);
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-run-linear-%d", (int)getpid());
    RUN(test_same_as_steps);
    RUN(test_refusals);
    return harness_report();
}
