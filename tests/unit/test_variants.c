/*
 * test_variants.c — programs with several variants (schedules of one
 * module) and a dispatch among them (rv_program_compile_variants): the
 * dispatch picks by size, by a rule table and by a C function, and every
 * variant's results match the interpreter's on both sides of the
 * threshold. The module's own schedule is left as it was. Errors: a rule
 * naming an unknown size or variant, a dispatch answering outside the
 * variants, an illegal step in a variant's schedule (located in it). A
 * variant compiled for constant sizes runs only at them.
 * tests/suite_aot.sh builds the same variants ahead of time.
 */
#include <unistd.h>

#include "harness.h"
#include "ir/ir.h"

static char cache_dir[64];

/* tests/variants/row_softmax.rv and its two .sched files */
static const char *const program = "size B in 1..64\n"
                                   "ufun len[b < B] in 1..40\n"
                                   "input S : f32[b < B, j < len[b]]\n"
                                   "M[b] = max(j < len[b]) S[b, j]\n"
                                   "E[b, j] = exp(S[b, j] - M[b])\n"
                                   "Z[b] = sum(j < len[b]) E[b, j]\n"
                                   "P[b, j pad 8] = E[b, j] / Z[b]\n"
                                   "schedule P { parallel(b) }\n";

static const char *const schedules[2] = {
    "schedule P { jo, jv = split(j, 4) }\n",
    "schedule M { jo, jv = split(j, 8)  vectorize(jv) }\n"
    "schedule Z { parallel(b) }\n"
    "schedule P { parallel(b)  jo, jv = split(j, 8)  vectorize(jv) }\n",
};

/* Runs p with B rows against the interpreter; the variant it ran. */
static int check_run(rv_module *m, rv_program *p, int64_t rows) {
    rv_bindings *b1 = rv_bindings_new(m), *b2 = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_size(b1, "B", rows), RV_OK);
    CHECK_EQ_INT(rv_bindings_set_size(b2, "B", rows), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(b1, (uint64_t)rows), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(b2, (uint64_t)rows), RV_OK);
    CHECK_EQ_INT(rv_interp_run(m, b1), RV_OK);
    rv_status st = rv_program_run(p, b2);
    CHECK_EQ_INT(st, RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "    %s\n", rv_last_error());
    CHECK_SAME_TENSOR(b1, b2, "P", 1e-5);
    rv_bindings_free(b1);
    rv_bindings_free(b2);
    return rv_program_last_variant(p);
}

static rv_module *parse(void) {
    rv_module *m = NULL;
    CHECK_EQ_INT(rv_module_parse("row_softmax.rv", program, &m), RV_OK);
    return m;
}

static void test_rules(void) {
    rv_module *m = parse();
    if (!m)
        return;
    rv_compile_options opt = {.cache_dir = cache_dir};
    rv_dispatch_rule large = {1, {{"B", 16, 64}}, 1};
    rv_dispatch d = {.nrules = 1, .rules = &large};
    int nscheds = m->scheds.len;
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, &d, &opt, &p), RV_OK);
    CHECK_EQ_INT(m->scheds.len, nscheds); /* the module's own blocks, back */
    if (!p) {
        fprintf(stderr, "    %s\n", rv_last_error());
        rv_module_free(m);
        return;
    }
    CHECK_EQ_INT(rv_program_last_variant(p), -1);
    CHECK_EQ_INT(check_run(m, p, 1), 0);
    CHECK_EQ_INT(check_run(m, p, 15), 0);
    CHECK_EQ_INT(check_run(m, p, 16), 1);
    CHECK_EQ_INT(check_run(m, p, 64), 1);
    CHECK_EQ_INT(check_run(m, p, 15), 0);
    /* the C unit holds both variants' kernels, named apart */
    CHECK_STR_CONTAINS(rv_program_source(p), "kernel_P_1");
    rv_program_free(p);
    /* without variants the module's own schedule compiles as before */
    CHECK_EQ_INT(rv_program_compile(m, &opt, &p), RV_OK);
    if (p)
        CHECK_EQ_INT(check_run(m, p, 20), 0);
    rv_program_free(p);
    rv_module_free(m);
}

/* A C dispatch (what a tuner's decision tree is): sizes in module order. */
static int pick_by_rows(const int64_t *sizes, void *user) {
    return sizes[0] >= *(const int64_t *)user;
}

static int out_of_range(const int64_t *sizes, void *user) {
    (void)sizes;
    (void)user;
    return 2;
}

static void test_function(void) {
    rv_module *m = parse();
    if (!m)
        return;
    rv_compile_options opt = {.cache_dir = cache_dir};
    int64_t threshold = 8;
    rv_dispatch d = {.fn = pick_by_rows, .user = &threshold};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, &d, &opt, &p), RV_OK);
    if (p) {
        CHECK_EQ_INT(check_run(m, p, 7), 0);
        CHECK_EQ_INT(check_run(m, p, 8), 1);
    }
    rv_program_free(p);
    /* a dispatch outside the variants fails the run, before any kernel */
    d = (rv_dispatch){.fn = out_of_range};
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, &d, &opt, &p), RV_OK);
    if (p) {
        rv_bindings *b = rv_bindings_new(m);
        CHECK_EQ_INT(rv_bindings_randomize(b, 1), RV_OK);
        CHECK_EQ_INT(rv_program_run(p, b), RV_ERR_ARG);
        CHECK_STR_CONTAINS(rv_last_error(), "chose variant 2 of 2");
        CHECK(!rv_bindings_has(b, "P"));
        rv_bindings_free(b);
    }
    rv_program_free(p);
    rv_module_free(m);
}

/* rv_program_run_into: the padded, ragged output P straight into the
 * caller's array (unpacked from its padded storage), the other computed
 * tensors in the bindings as usual; a wrong array fails before any
 * kernel. */
static void test_run_into(void) {
    rv_module *m = parse();
    if (!m)
        return;
    rv_compile_options opt = {.cache_dir = cache_dir};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, NULL, &opt, &p), RV_OK);
    if (!p) {
        rv_module_free(m);
        return;
    }
    rv_bindings *want = rv_bindings_new(m), *got = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_randomize(want, 5), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(got, 5), RV_OK);
    CHECK_EQ_INT(rv_interp_run(m, want), RV_OK);
    const rv_array *ref = rv_bindings_get_array(want, "P");
    int64_t n = ref ? rv_array_numel(ref) : 1;
    rv_array *out = rv_array_new(RV_F32, 1, &n);
    CHECK_EQ_INT(rv_program_run_into(p, got, &out, 1), RV_OK);
    CHECK(!rv_bindings_has(got, "P") || !rv_bindings_get_array(got, "P"));
    CHECK(rv_bindings_get_array(got, "Z") != NULL);
    int bad = 0;
    for (int64_t i = 0; ref && i < n; i++)
        bad += fabs(rv_array_get_f64(ref, i) - rv_array_get_f64(out, i)) > 1e-5;
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(rv_program_last_variant(p), 0);
    /* the wrong count, dtype or number of arrays */
    int64_t n1 = n + 1;
    rv_array *longer = rv_array_new(RV_F32, 1, &n1), *f64 = rv_array_new(RV_F64, 1, &n);
    CHECK_EQ_INT(rv_program_run_into(p, got, &longer, 1), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "output P needs");
    CHECK_EQ_INT(rv_program_run_into(p, got, &f64, 1), RV_ERR_ARG);
    CHECK_EQ_INT(rv_program_run_into(p, got, &out, 0), RV_ERR_ARG);
    CHECK_EQ_INT(rv_program_run_into(p, got, NULL, 1), RV_ERR_ARG);
    rv_array_free(longer);
    rv_array_free(f64);
    rv_array_free(out);
    rv_bindings_free(want);
    rv_bindings_free(got);
    rv_program_free(p);
    rv_module_free(m);
}

static void test_errors(void) {
    rv_module *m = parse();
    if (!m)
        return;
    rv_compile_options opt = {.cache_dir = cache_dir};
    rv_program *p = NULL;
    rv_dispatch_rule bad_size = {1, {{"T", 1, 2}}, 1};
    rv_dispatch d = {.nrules = 1, .rules = &bad_size};
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, &d, &opt, &p), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "no size named 'T'");
    rv_dispatch_rule bad_variant = {0, {{0}}, 2};
    d.rules = &bad_variant;
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, &d, &opt, &p), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "variant 2 of 2");
    CHECK_EQ_INT(rv_program_compile_variants(m, 0, schedules, NULL, &opt, &p), RV_ERR_ARG);
    /* an illegal step is reported in the variant's text */
    const char *bad[2] = {schedules[0], "schedule P {\n    vectorize(q)\n}\n"};
    int nscheds = m->scheds.len;
    CHECK(rv_program_compile_variants(m, 2, bad, NULL, &opt, &p) != RV_OK);
    CHECK_STR_CONTAINS(rv_last_error(), "<variant 1>:2:");
    CHECK(p == NULL);
    CHECK_EQ_INT(m->scheds.len, nscheds);
    const char *not_schedule[2] = {schedules[0], "Q[b] = M[b]\n"};
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, not_schedule, NULL, &opt, &p), RV_ERR_SYNTAX);
    CHECK_STR_CONTAINS(rv_last_error(), "expected schedule blocks only");
    rv_module_free(m);
}

static int always_one(const int64_t *sizes, void *user) {
    (void)sizes, (void)user;
    return 1;
}

/* A variant compiled for constant sizes (rv_dispatch.variant_sizes: a
 * tuner's specialized leaf): lowered with B = 16, so its code has the
 * constant where the generic variant reads B; taken exactly at B = 16 by
 * the rule and right there; a dispatch choosing it at another B fails the
 * run before any kernel, naming the sizes; a bad binding is refused. */
static void test_constant_sizes(void) {
    rv_module *m = parse();
    rv_dispatch_rule at16 = {1, {{"B", 16, 16}}, 1};
    rv_variant_sizes sizes[2] = {{0}, {1, {{"B", 16}}}};
    rv_dispatch d = {.nrules = 1, .rules = &at16, .variant_sizes = sizes};
    rv_program *p = NULL;
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, &d, NULL, &p), RV_OK);
    CHECK_EQ_INT(check_run(m, p, 15), 0);
    CHECK_EQ_INT(check_run(m, p, 16), 1);
    CHECK_EQ_INT(check_run(m, p, 17), 0);
    /* the specialized kernel's loop over b runs to the constant, the
     * generic one's to B */
    const char *src = rv_program_source(p);
    const char *v0 = strstr(src, "int32_t kernel_M("), *v1 = strstr(src, "int32_t kernel_M_1(");
    CHECK(v0 && v1);
    const char *end0 = v0 ? strstr(v0, "\n}\n") : NULL, *end1 = v1 ? strstr(v1, "\n}\n") : NULL;
    const char *loop0 = v0 ? strstr(v0, "for (int64_t b = 0; b < B; b++)") : NULL;
    const char *loop1 = v1 ? strstr(v1, "for (int64_t b = 0; b < 16; b++)") : NULL;
    CHECK(loop0 && loop0 < end0);
    CHECK(loop1 && loop1 < end1);
    rv_program_free(p);

    rv_dispatch wrong = {.fn = always_one, .variant_sizes = sizes};
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, &wrong, NULL, &p), RV_OK);
    CHECK_EQ_INT(check_run(m, p, 16), 1);
    rv_bindings *b = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_size(b, "B", 9), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(b, 9), RV_OK);
    CHECK_EQ_INT(rv_program_run(p, b), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(),
                       "the dispatch chose variant 1, compiled for B = 16, at B = 9");
    rv_bindings_free(b);
    rv_program_free(p);

    rv_variant_sizes bad[2] = {{0}, {1, {{"B", 65}}}};
    d.variant_sizes = bad;
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, &d, NULL, &p), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "variant 1: B = 65 is outside its range 1..64");
    bad[1].at[0].size = "Q";
    CHECK_EQ_INT(rv_program_compile_variants(m, 2, schedules, &d, NULL, &p), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "variant 1: no size named 'Q'");
    rv_module_free(m);
}

int main(void) {
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ravel-test-variants-%d", (int)getpid());
    RUN(test_rules);
    RUN(test_function);
    RUN(test_run_into);
    RUN(test_errors);
    RUN(test_constant_sizes);
    return harness_report();
}
