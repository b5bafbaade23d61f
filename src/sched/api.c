/*
 * api.c — the public entry points of schedules (include/ravel.h).
 */
#include "sched/sched.h"

/* rv_module_check_schedule: src/lower/check.c (it lowers the schedule) */

char *rv_module_schedule_trace(rv_module *m) {
    if (!m) {
        base_error(RV_ERR_ARG, "rv_module_schedule_trace: module is NULL");
        return NULL;
    }
    Schedule *s;
    if (sched_from_module(m, &s) != RV_OK)
        return NULL;
    Buf b = {0};
    buf_puts(&b, buf_str(&s->trace));
    for (int i = 0; i < s->stages.len; i++) {
        buf_puts(&b, "# ");
        sched_print_stage(&b, s->stages.data[i]);
    }
    sched_free(s);
    return buf_take(&b);
}
