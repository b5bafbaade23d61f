/*
 * driver.h — the compile driver (DESIGN.md, "driver"): source or module ->
 * checks -> lowering -> codegen -> JIT -> rv_program. The public entry
 * points are rv_program_compile and rv_program_compile_variants
 * (ravel.h); the tools (`ravel emit`, `ravel build`) use the pieces below.
 */
#ifndef RAVEL_DRIVER_H
#define RAVEL_DRIVER_H

#include "plan/plan.h"

/* The kernels of nvariants variants of m, lowered into one list: variant
 * v's kernels start at first[v] (first has nvariants entries). Variant v
 * applies the schedule blocks of schedules[v] (`schedule Y { ... }` text,
 * named "<variant v>" in messages) in place of the module's own; a NULL
 * schedules or entry: the module's own; `at` (NULL: none) the sizes each
 * variant is lowered for, as constants. The module's blocks are as before
 * afterwards; what lowering made stays in m (or the caller's IR scope). */
rv_status driver_lower_variants(Module *m, int nvariants, const char *const *schedules,
                                const PlanAt *at, Kernel ***ks, int *n, int *first);
/* The public dispatch (NULL: always variant 0) as the plan's: size and
 * ufun names resolved, rules' variants checked (RV_ERR_ARG). Free
 * out->rules and out->sums with base_free. */
rv_status driver_dispatch(Module *m, int nvariants, const rv_dispatch *d, PlanDispatch *out);

#endif
