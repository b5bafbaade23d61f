/*
 * api.c — the public entry points of schedules (include/ravel.h).
 *
 * The trace builds the module's schedule to print it and drops it: it
 * runs in an IR scope (src/ir/scope.c), so the stages and expressions it
 * builds are freed on return and the module is as it was, however often a
 * tuner or a fuzzer asks.
 */
#include "sched/sched.h"

/* rv_module_check_schedule: src/lower/check.c (it lowers the schedule) */

char *rv_module_schedule_trace(rv_module *m) {
    if (!m) {
        base_error(RV_ERR_ARG, "rv_module_schedule_trace: module is NULL");
        return NULL;
    }
    IrScope scope;
    ir_scope_begin(m, &scope);
    Schedule *s;
    char *trace = NULL;
    if (sched_from_module(m, &s) == RV_OK) {
        Buf b = {0};
        buf_puts(&b, buf_str(&s->trace));
        for (int i = 0; i < s->stages.len; i++) {
            buf_puts(&b, "# ");
            sched_print_stage(&b, s->stages.data[i]);
        }
        sched_free(s);
        trace = buf_take(&b);
    }
    ir_scope_end(&scope);
    return trace;
}
