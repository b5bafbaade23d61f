/*
 * api.c — the public entry points of schedules (include/ravel.h).
 *
 * The trace and the query build the module's schedule to print it or
 * copy it out, and drop it: it runs in an IR scope (src/ir/scope.c), so
 * the stages and expressions it builds are freed on return and the module
 * is as it was, however often a tuner or a fuzzer asks.
 */
#include "sched/sched.h"

/* rv_module_check_schedule: src/lower/check.c (it lowers the schedule) */

/* Builds m's schedule in an IR scope, passes it to fn, and drops it;
 * false (the error set) when a step is illegal. */
static bool with_schedule(rv_module *m, const char *who, void (*fn)(Schedule *s, void *ctx),
                          void *ctx) {
    if (!m) {
        base_error(RV_ERR_ARG, "%s: module is NULL", who);
        return false;
    }
    IrScope scope;
    ir_scope_begin(m, &scope);
    Schedule *s;
    bool ok = sched_from_module(m, &s) == RV_OK;
    if (ok) {
        fn(s, ctx);
        sched_free(s);
    }
    ir_scope_end(&scope);
    return ok;
}

static void print_trace(Schedule *s, void *ctx) {
    Buf b = {0};
    buf_puts(&b, buf_str(&s->trace));
    for (int i = 0; i < s->stages.len; i++) {
        buf_puts(&b, "# ");
        sched_print_stage(&b, s->stages.data[i]);
    }
    *(char **)ctx = buf_take(&b);
}

char *rv_module_schedule_trace(rv_module *m) {
    char *trace = NULL;
    with_schedule(m, "rv_module_schedule_trace", print_trace, &trace);
    return trace;
}

static void take_query(Schedule *s, void *ctx) {
    *(rv_schedule_info **)ctx = sched_query(s);
}

rv_schedule_info *rv_module_schedule_info(rv_module *m) {
    rv_schedule_info *q = NULL;
    with_schedule(m, "rv_module_schedule_info", take_query, &q);
    return q;
}
