/*
 * check.c — rv_module_check_schedule: what `ravel check` says about the
 * schedule of a program.
 *
 * The primitives check each step as it is applied, and the placements once
 * every block is (src/sched). What depends on bounds inference is known
 * only when the schedule is lowered: whether the tile of a stage computed
 * at a loop can be bounded, whether a padded stage (pad=1) would read
 * outside a tensor. So the check lowers the schedule too (no passes, no
 * code) and reports a schedule error of the lowering, located at the step
 * that placed the stage concerned: a schedule that `ravel check` accepts
 * is not rejected as a schedule when it is compiled. Errors of other kinds
 * (what the compiler does not support yet, such as recursive operations)
 * are left to compilation: the interpreter runs such programs.
 *
 * The check runs in an IR scope (src/ir/scope.c): the stages and loop IR
 * it builds are freed on return and the module is as it was.
 *
 * A program without schedule steps is not lowered: the default schedule
 * (every stage at the top level, loops in definition order) always lowers,
 * and lowering a big program's every kernel at once would make its memory,
 * not the source's size, the cost of `ravel check`.
 */
#include "lower/lower.h"

rv_status rv_module_check_schedule(rv_module *m) {
    if (!m)
        return base_error(RV_ERR_ARG, "rv_module_check_schedule: module is NULL");
    IrScope scope;
    ir_scope_begin(m, &scope);
    Schedule *s;
    rv_status st = sched_from_module(m, &s);
    if (st == RV_OK) {
        Kernel **ks = NULL;
        int n = 0;
        if (s->nsteps > 0)
            st = lower_schedule(s, &ks, &n);
        base_free(ks);
        sched_free(s);
        if (st != RV_ERR_SCHEDULE)
            st = RV_OK;
    }
    ir_scope_end(&scope);
    return st;
}
