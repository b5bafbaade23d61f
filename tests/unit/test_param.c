/*
 * test_param.c — inputs declared constant across runs (`param W : ...`,
 * rv_input_set_param): the flag survives the printer and the parser, the
 * verifier refuses it on a computed tensor, the C API sets it on inputs
 * only, and every binding of an input gets a stamp of its own (what a
 * program keeping data derived from a param compares before reusing it):
 * a new one when the same array is bound again, when another is, and in
 * another bindings object.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "interp/interp.h"
#include "ir/ir.h"

static const char *const program = "size N in 1..64\n"
                                   "param W : f32[4, N]\n"
                                   "input x : f32[N]\n"
                                   "Y[j < 4] = sum(l < N) W[j, l] * x[l]\n";

static void test_roundtrip(void) {
    rv_module *m = parse_ok(program);
    if (!m)
        return;
    CHECK(rv_tensor_is_param(rv_module_tensor(m, "W")));
    CHECK(!rv_tensor_is_param(rv_module_tensor(m, "x")));
    char *text = rv_module_print(m);
    CHECK_STR_CONTAINS(text, "param W : f32[4, N]");
    CHECK_STR_CONTAINS(text, "input x : f32[N]");
    rv_module *m2 = parse_ok(text);
    if (m2) {
        char *again = rv_module_print(m2);
        CHECK(strcmp(text, again) == 0);
        CHECK(rv_tensor_is_param(rv_module_tensor(m2, "W")));
        rv_free(again);
        rv_module_free(m2);
    }
    rv_free(text);
    rv_module_free(m);
}

/* `param` is a word, not a keyword: a tensor may still be named so. */
static void test_word(void) {
    rv_module *m = parse_ok("param[i < 4] = 1.0\noutput param\n");
    if (m) {
        CHECK(!rv_tensor_is_param(rv_module_tensor(m, "param")));
        rv_module_free(m);
    }
}

static void test_api(void) {
    rv_module *m = parse_ok(program);
    if (!m)
        return;
    rv_tensor *x = rv_module_tensor(m, "x"), *y = rv_module_tensor(m, "Y");
    CHECK_EQ_INT(rv_input_set_param(x, 1), RV_OK);
    CHECK(rv_tensor_is_param(x));
    CHECK_EQ_INT(rv_module_verify(m), RV_OK);
    CHECK_EQ_INT(rv_input_set_param(x, 0), RV_OK);
    CHECK(!rv_tensor_is_param(x));
    CHECK_EQ_INT(rv_input_set_param(y, 1), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "'Y' is not an input");
    /* the verifier catches the flag set behind the API's back */
    y->param = true;
    CHECK(rv_module_verify(m) != RV_OK);
    CHECK_STR_CONTAINS(rv_last_error(), "marked param");
    y->param = false;
    rv_module_free(m);
}

static void test_stamps(void) {
    rv_module *m = parse_ok(program);
    if (!m)
        return;
    const Tensor *w = rv_module_tensor(m, "W");
    rv_bindings *b1 = rv_bindings_new(m), *b2 = rv_bindings_new(m);
    CHECK(interp_bindings_stamp(b1, w) == 0); /* unbound */
    int64_t shape[2] = {4, 8};
    rv_array *a = rv_array_new(RV_F32, 2, shape), *c = rv_array_new(RV_F32, 2, shape);
    CHECK_EQ_INT(rv_bindings_set_array(b1, "W", a), RV_OK);
    uint64_t s1 = interp_bindings_stamp(b1, w);
    CHECK(s1 != 0);
    CHECK(interp_bindings_stamp(b1, w) == s1); /* reading keeps it */
    CHECK_EQ_INT(rv_bindings_set_array(b1, "W", a), RV_OK);
    uint64_t s2 = interp_bindings_stamp(b1, w);
    CHECK(s2 != 0 && s2 != s1); /* the same array, bound again */
    CHECK_EQ_INT(rv_bindings_set_array(b1, "W", c), RV_OK);
    uint64_t s3 = interp_bindings_stamp(b1, w);
    CHECK(s3 != s1 && s3 != s2);
    CHECK_EQ_INT(rv_bindings_set_array(b2, "W", c), RV_OK); /* another bindings object */
    uint64_t s4 = interp_bindings_stamp(b2, w);
    CHECK(s4 != s1 && s4 != s2 && s4 != s3);
    CHECK(interp_bindings_stamp(b1, w) == s3);
    /* a drawn input is a binding too */
    rv_bindings *b3 = rv_bindings_new(m);
    CHECK_EQ_INT(rv_bindings_set_size(b3, "N", 8), RV_OK);
    CHECK_EQ_INT(rv_bindings_randomize(b3, 1), RV_OK);
    uint64_t s5 = interp_bindings_stamp(b3, w);
    CHECK(s5 != 0 && s5 != s1 && s5 != s2 && s5 != s3 && s5 != s4);
    rv_bindings_free(b3);
    rv_bindings_free(b1);
    rv_bindings_free(b2);
    rv_array_free(a);
    rv_array_free(c);
    rv_module_free(m);
}

int main(void) {
    RUN(test_roundtrip);
    RUN(test_word);
    RUN(test_api);
    RUN(test_stamps);
    return harness_report();
}
