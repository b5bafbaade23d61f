/* test_tune_dtree.c — the dispatcher's decision tree (src/tune/dtree.c):
 * training reproduces every label the labels allow, the depth limit and the
 * weights steer it, and the emitted C, compiled by the system compiler,
 * answers as tune_dtree_eval does over every shape of a range. */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "jit/jit.h"
#include "tune/tune.h"

typedef int (*DispatchFn)(const int64_t *);

static int bert_label(int64_t t) {
    return t <= 16 ? 0 : t <= 64 ? 1 : 2;
}

/* One variable, three intervals: three leaves, depth 2, readable C. */
static void test_intervals(void) {
    int64_t sizes[128];
    int labels[128];
    for (int i = 0; i < 128; i++) {
        sizes[i] = i + 1;
        labels[i] = bert_label(i + 1);
    }
    DTree t;
    CHECK_EQ_INT(tune_dtree_train(sizes, labels, NULL, 128, 1, 0, &t), RV_OK);
    CHECK_EQ_INT(tune_dtree_leaves(&t), 3);
    CHECK_EQ_INT(tune_dtree_depth(&t), 2);
    for (int i = 0; i < 128; i++)
        CHECK_EQ_INT(tune_dtree_eval(&t, &sizes[i]), labels[i]);
    static const char *const vars[] = {"T"};
    static const char *const kernels[] = {"small_t", "mid_t", "large_t"};
    Buf b = {0};
    tune_dtree_emit_c(&t, "dense", vars, kernels, &b);
    CHECK_STR_CONTAINS(buf_str(&b), "int dense_dispatch(const int64_t *sizes) {\n");
    CHECK_STR_CONTAINS(buf_str(&b), "if (sizes[0] <= 16) { /* T <= 16 */\n");
    CHECK_STR_CONTAINS(buf_str(&b), "return 0; /* small_t */");
    CHECK_STR_CONTAINS(buf_str(&b), "} else { /* T > 64 */\n");
    printf("%s", buf_str(&b));
    buf_free(&b);
    tune_dtree_free(&t);
}

/* Labels no single split separates well: XOR of parities, and an
 * arbitrary function of two variables. Unlimited depth gives every shape
 * its label back. */
static int label2(int64_t t, int64_t n, int kind) {
    if (kind == 0)
        return (int)((t & 1) ^ (n & 1));
    return (int)((t * 7 + n * 13) % 5 == 0) + 2 * (n > t) + (t % 9 == 4);
}

static void train_grid(int kind, int nt, int nn, DTree *t) {
    int n = nt * nn;
    int64_t *sizes = malloc(sizeof *sizes * 2 * (size_t)n);
    int *labels = malloc(sizeof *labels * (size_t)n);
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < nn; j++) {
            int k = i * nn + j;
            sizes[2 * k] = i + 1;
            sizes[2 * k + 1] = 8 * (j + 1);
            labels[k] = label2(i + 1, 8 * (j + 1), kind);
        }
    CHECK_EQ_INT(tune_dtree_train(sizes, labels, NULL, n, 2, 0, t), RV_OK);
    int wrong = 0;
    for (int k = 0; k < n; k++)
        wrong += tune_dtree_eval(t, &sizes[2 * k]) != labels[k];
    CHECK_EQ_INT(wrong, 0);
    free(sizes);
    free(labels);
}

static void test_reproduces_labels(void) {
    DTree t;
    train_grid(0, 16, 8, &t);
    tune_dtree_free(&t);
    train_grid(1, 64, 16, &t);
    tune_dtree_free(&t);
}

/* Identical shapes with different labels: the weighted majority. */
static void test_conflicting_labels(void) {
    int64_t sizes[] = {4, 4, 4, 9};
    int labels[] = {0, 1, 1, 2};
    double weights[] = {5, 1, 1, 1};
    DTree t;
    CHECK_EQ_INT(tune_dtree_train(sizes, labels, weights, 4, 1, 0, &t), RV_OK);
    CHECK_EQ_INT(tune_dtree_eval(&t, &sizes[0]), 0);
    CHECK_EQ_INT(tune_dtree_eval(&t, &sizes[3]), 2);
    tune_dtree_free(&t);
    CHECK_EQ_INT(tune_dtree_train(sizes, labels, NULL, 4, 1, 0, &t), RV_OK);
    CHECK_EQ_INT(tune_dtree_eval(&t, &sizes[0]), 1);
    tune_dtree_free(&t);
}

/* Depth 1 allows one split of three intervals: the frequent shapes keep
 * their label, the rare ones give way. */
static void test_depth_and_weights(void) {
    int64_t sizes[30];
    int labels[30];
    double weights[30];
    for (int i = 0; i < 30; i++) {
        sizes[i] = i + 1;
        labels[i] = i / 10;
        weights[i] = i < 10 || i >= 20 ? 100.0 : 1.0;
    }
    DTree t;
    CHECK_EQ_INT(tune_dtree_train(sizes, labels, weights, 30, 1, 1, &t), RV_OK);
    CHECK_EQ_INT(tune_dtree_depth(&t), 1);
    for (int i = 0; i < 30; i++)
        if (weights[i] > 1)
            CHECK_EQ_INT(tune_dtree_eval(&t, &sizes[i]), labels[i]);
    tune_dtree_free(&t);
}

/* Thresholds between extreme and negative values neither overflow nor
 * misplace a shape. */
static void test_extreme_values(void) {
    int64_t sizes[] = {INT64_MIN, -3, -1, 0, INT64_MAX};
    int labels[] = {0, 1, 0, 1, 0};
    DTree t;
    CHECK_EQ_INT(tune_dtree_train(sizes, labels, NULL, 5, 1, 0, &t), RV_OK);
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(tune_dtree_eval(&t, &sizes[i]), labels[i]);
    tune_dtree_free(&t);
    int64_t ends[] = {INT64_MAX, INT64_MIN};
    CHECK_EQ_INT(tune_dtree_train(ends, labels, NULL, 2, 1, 0, &t), RV_OK);
    CHECK_EQ_INT(tune_dtree_eval(&t, &ends[0]), 0);
    CHECK_EQ_INT(tune_dtree_eval(&t, &ends[1]), 1);
    tune_dtree_free(&t);
}

static void test_bad_arguments(void) {
    int64_t sizes[] = {1, 2};
    int labels[] = {0, -1};
    double weights[] = {1, 0};
    int ok_labels[] = {0, 1};
    DTree t;
    CHECK_EQ_INT(tune_dtree_train(sizes, labels, NULL, 2, 1, 0, &t), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "negative label");
    CHECK_EQ_INT(tune_dtree_train(sizes, ok_labels, weights, 2, 1, 0, &t), RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "weight 0");
    CHECK_EQ_INT(tune_dtree_train(sizes, ok_labels, NULL, 0, 1, 0, &t), RV_ERR_ARG);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The emitted C compiled by the system compiler answers as the tree does,
 * on the training grid and on every shape around and between it. */
static void test_emitted_c_matches(void) {
    DTree t;
    train_grid(1, 64, 16, &t);
    Buf b = {0};
    buf_puts(&b, "#include <stdint.h>\n");
    static const char *const vars[] = {"T", "N"};
    tune_dtree_emit_c(&t, "grid", vars, NULL, &b);
    char dir[] = "/tmp/ravel_test_dtree_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    JitOptions opt = {.cache_dir = dir};
    JitLib *lib = NULL;
    CHECK_EQ_INT(jit_compile(buf_str(&b), &opt, &lib), RV_OK);
    DispatchFn fn = lib ? (DispatchFn)jit_fn(lib, "grid_dispatch") : NULL;
    CHECK(fn != NULL);
    if (fn) {
        int wrong = 0, shapes = 0;
        for (int64_t tt = -2; tt <= 80; tt++)
            for (int64_t nn = -1; nn <= 140; nn++) {
                int64_t s[2] = {tt, nn};
                wrong += fn(s) != tune_dtree_eval(&t, s);
                shapes++;
            }
        CHECK_EQ_INT(wrong, 0);
        /* Cost per call, reported (not asserted: the machine is shared). */
        enum { REPS = 2000000 };
        int64_t s[2];
        volatile int sink = 0;
        double t0 = now_s();
        for (int r = 0; r < REPS; r++) {
            s[0] = 1 + r % 64;
            s[1] = 8 * (1 + (r >> 6) % 16);
            sink += fn(s);
        }
        double t1 = now_s();
        for (int r = 0; r < REPS; r++) {
            s[0] = 1 + r % 64;
            s[1] = 8 * (1 + (r >> 6) % 16);
            sink += tune_dtree_eval(&t, s);
        }
        double t2 = now_s();
        (void)sink;
        printf(
            "dispatch over %d shapes agrees; tree of %d leaves, depth %d: emitted C %.1f ns/call, "
            "tune_dtree_eval %.1f ns/call\n",
            shapes, tune_dtree_leaves(&t), tune_dtree_depth(&t), 1e9 * (t1 - t0) / REPS,
            1e9 * (t2 - t1) / REPS);
    }
    jit_close(lib);
    buf_free(&b);
    tune_dtree_free(&t);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

int main(void) {
    RUN(test_intervals);
    RUN(test_reproduces_labels);
    RUN(test_conflicting_labels);
    RUN(test_depth_and_weights);
    RUN(test_extreme_values);
    RUN(test_bad_arguments);
    RUN(test_emitted_c_matches);
    return harness_report();
}
