/*
 * dispatch_sum.c — a dispatch on a quantity of the UF arrays
 * (`ravel build --dispatch extern --dispatch-sum len`, tests/suite_aot.sh):
 * sizes[1] is the sum of len (row_softmax.rv's rows' lengths, each 1..40),
 * after the only size B. Variant 1 from 41 elements on, so B = 1 always
 * takes variant 0 and B = 64 variant 1; the sum goes to stderr too.
 */
#include <stdint.h>
#include <stdio.h>

int model_dispatch(const int64_t *sizes, void *user);

int model_dispatch(const int64_t *sizes, void *user) {
    (void)user;
    int v = sizes[1] >= 41;
    fprintf(stderr, "dispatch: sum %lld, variant %d\n", (long long)sizes[1], v);
    return v;
}
