/*
 * harness.h — the tiny unit-test harness. A test file defines
 * `static void test_x(void)` functions and a main that RUNs them:
 *
 *     int main(void) { RUN(test_x); RUN(test_y); return harness_report(); }
 *
 * CHECK prints the failing expression with file:line and counts a failure;
 * the test goes on, so one run shows every broken check. harness_report
 * prints "<suite>: N passed, N failed" (tests/run.sh sums these lines).
 */
#ifndef RAVEL_TEST_HARNESS_H
#define RAVEL_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ravel.h"

static int harness_passed, harness_failed, harness_current_failed;
static const char *harness_current = "";

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (x) {                                                                                   \
            harness_passed++;                                                                      \
        } else {                                                                                   \
            harness_failed++;                                                                      \
            harness_current_failed++;                                                              \
            fprintf(stderr, "%s:%d: %s: CHECK failed: %s\n", __FILE__, __LINE__, harness_current,  \
                    #x);                                                                           \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long ha_ = (long long)(a), hb_ = (long long)(b);                                      \
        CHECK(ha_ == hb_);                                                                         \
        if (ha_ != hb_)                                                                            \
            fprintf(stderr, "    %s = %lld, %s = %lld\n", #a, ha_, #b, hb_);                       \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double ha_ = (double)(a), hb_ = (double)(b);                                               \
        int ok_ = fabs(ha_ - hb_) <= (tol) * (1.0 + fabs(hb_));                                   \
        CHECK(ok_ && #a);                                                                          \
        if (!ok_)                                                                                  \
            fprintf(stderr, "    %s = %.9g, %s = %.9g\n", #a, ha_, #b, hb_);                       \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                            \
    do {                                                                                           \
        const char *hh_ = (hay), *hn_ = (needle);                                                  \
        int ok_ = hh_ && strstr(hh_, hn_) != NULL;                                                 \
        CHECK(ok_ && "string contains");                                                           \
        if (!ok_)                                                                                  \
            fprintf(stderr, "    expected to find \"%s\" in:\n%s\n", hn_, hh_ ? hh_ : "(null)");    \
    } while (0)

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        harness_current = #fn;                                                                     \
        harness_current_failed = 0;                                                                \
        fn();                                                                                      \
        if (harness_current_failed)                                                                \
            fprintf(stderr, "FAIL %s\n", #fn);                                                     \
    } while (0)

/* Checks that tensor `name` has the same elements in two bindings (the
 * interpreter's and a compiled program's), within tol each. */
#define CHECK_SAME_TENSOR(want, got, name, tol)                                                    \
    do {                                                                                           \
        const rv_array *hx_ = rv_bindings_get_array(want, name);                                   \
        const rv_array *hy_ = rv_bindings_get_array(got, name);                                    \
        CHECK(hx_ && hy_ && rv_array_numel(hx_) == rv_array_numel(hy_));                           \
        int64_t hbad_ = 0;                                                                         \
        for (int64_t hi_ = 0; hx_ && hy_ && hi_ < rv_array_numel(hx_) && hi_ < rv_array_numel(hy_); \
             hi_++)                                                                                \
            hbad_ += fabs(rv_array_get_f64(hx_, hi_) - rv_array_get_f64(hy_, hi_)) > (tol);        \
        CHECK_EQ_INT(hbad_, 0);                                                                    \
    } while (0)

/* The SST directory (tests that read the Stanford Sentiment Treebank):
 * $RAVEL_SST_DIR, else the project's shared data; NULL when absent (the
 * test is then skipped). */
static inline const char *harness_sst_dir(void) {
    const char *d = getenv("RAVEL_SST_DIR");
    if (d)
        return d;
    static const char *const candidates[] = {"../shared/data/sst", "../../shared/data/sst",
                                             "/work/shared/data/sst"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/STree.txt", candidates[i]);
        FILE *f = fopen(p, "r");
        if (f) {
            fclose(f);
            return candidates[i];
        }
    }
    return NULL;
}

/* Text parsed as module t.rv, which must succeed (a failed check and the
 * message otherwise; NULL then). */
static inline rv_module *parse_ok(const char *text) {
    rv_module *m = NULL;
    rv_status st = rv_module_parse("t.rv", text, &m);
    CHECK(st == RV_OK);
    if (st != RV_OK)
        fprintf(stderr, "    %s\n", rv_last_error());
    return m;
}

static inline int harness_report_named(const char *suite) {
    printf("%s: %d passed, %d failed\n", suite, harness_passed, harness_failed);
    return harness_failed ? 1 : 0;
}
#define harness_report() harness_report_named(__FILE__)

#endif
