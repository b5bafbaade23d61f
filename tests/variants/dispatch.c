/*
 * dispatch.c — the user's dispatch of a `ravel build --dispatch extern`
 * program (tests/suite_aot.sh): variant 1 (row_softmax_large.sched) from
 * 16 rows on, and which one it picked on stderr for the suite to check.
 */
#include <stdint.h>
#include <stdio.h>

int model_dispatch(const int64_t *sizes, void *user);

int model_dispatch(const int64_t *sizes, void *user) {
    (void)user;
    int v = sizes[0] >= 16; /* B, the program's only size */
    fprintf(stderr, "dispatch: variant %d\n", v);
    return v;
}
