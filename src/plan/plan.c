/*
 * plan.c — building, printing and dispatching host plans (plan.h).
 *
 * The order of the steps is the contract both executors follow, with
 * nothing computed before everything is checked:
 *
 *   1. CHECK_ARGS: sizes bound and in range, UF arrays shaped by their
 *      domains with values in their ranges, inputs of the right dtype and
 *      (possibly ragged) shape;
 *   2. PLACE_UF per UF slot: the array in the buffer's integer type;
 *   3. ALLOC_AUX per AUX slot (AUX sizes are over sizes only), PRELUDE per
 *      kernel whose prelude fills an AUX slot no earlier one fills (each
 *      AUX array is computed once), then CHECK_UF_SIZE
 *      per UF slot: the lowering's size of a ragged-domain UF loads row
 *      starts, which exist only now;
 *   4. PLACE_TENSOR per tensor slot: its size (which may load AUX arrays)
 *      against the storage the executor expects, then the storage itself;
 *   5. CALL per kernel, in definition order (TO_DEVICE before and
 *      FROM_DEVICE after on a device);
 *   6. RESULT per computed tensor the kernels store (and per output they
 *      do not, with slot -1: an error), then RETURN.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "plan/plan.h"

static const char *const step_names[PLAN_STEP_COUNT] = {
#define PLAN_STEP_NAME(name, text) text,
    PLAN_STEPS(PLAN_STEP_NAME)
#undef PLAN_STEP_NAME
};

const char *plan_step_name(PlanStepKind k) {
    return k >= 0 && k < PLAN_STEP_COUNT ? step_names[k] : "?";
}

PlanSlot *plan_slot_for(const Plan *p, const Buffer *b) {
    const void *key = b->tensor ? (const void *)b->tensor : (const void *)b;
    intptr_t i = (intptr_t)ptrmap_get(&p->slot_of, key);
    return i ? &p->slots.data[i - 1] : NULL;
}

int plan_slot_index(const Plan *p, const PlanSlot *s) {
    return (int)(s - p->slots.data);
}

static void add_step(Plan *p, PlanStepKind k, int slot, int kernel) {
    PlanStep s = {.kind = k, .slot = slot, .kernel = kernel};
    vec_push(&p->steps, s);
}

/* One slot per distinct UF, AUX array and tensor, in kernel and parameter
 * order. */
static void gather_slots(Plan *p) {
    for (int k = 0; k < p->nk; k++) {
        const Kernel *kn = p->ks[k];
        for (int i = 0; i < kn->nparams; i++) {
            const Param *pa = &kn->params[i];
            if (pa->kind == PARAM_SIZE || plan_slot_for(p, pa->buf))
                continue;
            PlanSlot s = {.buf = pa->buf, .t = pa->buf->tensor};
            s.kind = pa->kind == PARAM_UF     ? PLAN_SLOT_UF
                     : pa->kind == PARAM_AUX  ? PLAN_SLOT_AUX
                     : pa->kind == PARAM_PACK ? PLAN_SLOT_PACK
                                              : PLAN_SLOT_TENSOR;
            RV_ASSERT(s.kind != PLAN_SLOT_UF || pa->buf->uf);
            RV_ASSERT(s.kind != PLAN_SLOT_TENSOR || s.t);
            vec_push(&p->slots, s);
            const void *key = s.t ? (const void *)s.t : (const void *)pa->buf;
            ptrmap_put(&p->slot_of, key, (void *)(intptr_t)p->slots.len);
        }
    }
}

/* Every kernel parameter's slot, by kernel and parameter (Plan.arg_slot). */
static void gather_arg_slots(Plan *p) {
    for (int k = 0; k < p->nk; k++) {
        const Kernel *kn = p->ks[k];
        vec_push(&p->arg_at, p->arg_slot.len);
        for (int i = 0; i < kn->nparams; i++) {
            const Param *pa = &kn->params[i];
            int slot = pa->kind == PARAM_SIZE ? -1 : plan_slot_index(p, plan_slot_for(p, pa->buf));
            vec_push(&p->arg_slot, slot);
        }
    }
}

/* Every kernel's prelude's AUX slots (Plan.fills, from Kernel.fills). */
static void gather_fills(Plan *p) {
    for (int k = 0; k < p->nk; k++) {
        const Kernel *kn = p->ks[k];
        vec_push(&p->fills_at, p->fills.len);
        for (int i = 0; i < kn->nfills; i++) {
            const PlanSlot *s = plan_slot_for(p, kn->fills[i]);
            if (s && s->kind == PLAN_SLOT_AUX)
                vec_push(&p->fills, plan_slot_index(p, s));
        }
    }
    vec_push(&p->fills_at, p->fills.len);
}

/* PRELUDE per kernel whose prelude fills an AUX slot no earlier one does:
 * shared row-start arrays are computed once. */
static void add_prelude_steps(Plan *p, const bool *prelude) {
    bool *done = base_xcalloc((size_t)p->slots.len + 1, sizeof *done);
    for (int k = 0; prelude && k < p->nk; k++) {
        bool fresh = false;
        for (int i = p->fills_at.data[k]; i < p->fills_at.data[k + 1]; i++) {
            fresh = fresh || !done[p->fills.data[i]];
            done[p->fills.data[i]] = true;
        }
        if (prelude[k] && fresh)
            add_step(p, PLAN_PRELUDE, -1, k);
    }
    base_free(done);
}

static void add_slot_steps(Plan *p, PlanSlotKind kind, PlanStepKind step) {
    for (int i = 0; i < p->slots.len; i++)
        if (p->slots.data[i].kind == kind)
            add_step(p, step, i, -1);
}

/* Does RAVEL_DEBUG (a comma- or space-separated list) name "plan"? */
bool plan_debug(void) {
    const char *env = getenv("RAVEL_DEBUG");
    for (const char *s = env; s && *s;) {
        size_t len = strcspn(s, ", \t");
        if ((len == 4 && strncmp(s, "plan", 4) == 0) || (len == 3 && strncmp(s, "all", 3) == 0))
            return true;
        s += len;
        s += strspn(s, ", \t");
    }
    return false;
}

void plan_build(Plan *p, Module *m, Kernel *const *ks, int n, const bool *prelude, bool device) {
    memset(p, 0, sizeof *p);
    p->m = m;
    p->ks = ks;
    p->nk = n;
    gather_slots(p);
    gather_arg_slots(p);
    gather_fills(p);
    add_step(p, PLAN_CHECK_ARGS, -1, -1);
    add_slot_steps(p, PLAN_SLOT_UF, PLAN_PLACE_UF);
    add_slot_steps(p, PLAN_SLOT_AUX, PLAN_ALLOC_AUX);
    add_prelude_steps(p, prelude);
    add_slot_steps(p, PLAN_SLOT_UF, PLAN_CHECK_UF_SIZE);
    add_slot_steps(p, PLAN_SLOT_TENSOR, PLAN_PLACE_TENSOR);
    for (int i = 0; i < p->slots.len; i++) /* a pack with its flag */
        if (p->slots.data[i].kind == PLAN_SLOT_PACK && p->slots.data[i].buf->pack_fill)
            add_step(p, PLAN_PLACE_PACK, i, -1);
    /* a recursion's loops rely on the numbering of its structure: checked
     * before any kernel runs, never a silently wrong result */
    for (int k = 0; k < n; k++)
        if (ks[k]->rec)
            add_step(p, PLAN_CHECK_STRUCT, -1, k);
    if (device)
        add_step(p, PLAN_TO_DEVICE, -1, -1);
    for (int k = 0; k < n; k++)
        add_step(p, PLAN_CALL, -1, k);
    if (device)
        add_step(p, PLAN_FROM_DEVICE, -1, -1);
    for (int i = 0; i < m->tensors.len; i++) {
        Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            continue;
        intptr_t j = (intptr_t)ptrmap_get(&p->slot_of, t);
        bool output = ir_tensor_is_output(m, t);
        /* intermediates computed inside another kernel or inlined have no
         * storage of their own; outputs always do */
        if (!j && !output)
            continue;
        PlanStep st = {
            .kind = PLAN_RESULT, .slot = (int)j - 1, .kernel = -1, .t = t, .output = output};
        vec_push(&p->steps, st);
    }
    add_step(p, PLAN_RETURN, -1, -1);
    if (plan_debug()) {
        Buf b = {0};
        plan_print(&b, p);
        fputs(buf_str(&b), stderr);
        buf_free(&b);
    }
}

void plan_free(Plan *p) {
    vec_free(&p->slots);
    vec_free(&p->steps);
    vec_free(&p->arg_slot);
    vec_free(&p->arg_at);
    vec_free(&p->fills);
    vec_free(&p->fills_at);
    ptrmap_free(&p->slot_of);
}

static const char *slot_kind_name(PlanSlotKind k) {
    return k == PLAN_SLOT_UF     ? "ufun"
           : k == PLAN_SLOT_AUX  ? "aux"
           : k == PLAN_SLOT_PACK ? "pack"
                                 : "tensor";
}

void plan_print(Buf *b, const Plan *p) {
    buf_printf(b, "== host plan: %d kernels, %d slots ==\n", p->nk, p->slots.len);
    for (int i = 0; i < p->slots.len; i++) {
        const PlanSlot *s = &p->slots.data[i];
        buf_printf(b, "slot %d: %s %s, buffer %s : %s[", i, slot_kind_name(s->kind),
                   s->t         ? s->t->name
                   : s->buf->uf ? s->buf->uf->name
                                : s->buf->name,
                   s->buf->name, rv_dtype_name(s->buf->dtype));
        ir_print_expr(b, s->buf->size);
        buf_puts(b, "]\n");
    }
    for (int i = 0; i < p->steps.len; i++) {
        const PlanStep *st = &p->steps.data[i];
        buf_printf(b, "%3d  %s", i, plan_step_name(st->kind));
        if (st->kernel >= 0)
            buf_printf(b, " %s", p->ks[st->kernel]->name);
        if (st->kind == PLAN_RESULT)
            buf_printf(b, " %s%s", st->t->name, st->output ? " (output)" : "");
        if (st->kind == PLAN_PRELUDE) {
            buf_puts(b, " -> slot");
            for (int j = p->fills_at.data[st->kernel]; j < p->fills_at.data[st->kernel + 1]; j++)
                buf_printf(b, "%s %d", j > p->fills_at.data[st->kernel] ? "," : "",
                           p->fills.data[j]);
        }
        if (st->slot >= 0)
            buf_printf(b, " <- slot %d", st->slot);
        else if (st->kind == PLAN_RESULT)
            buf_puts(b, " <- no storage");
        if (st->kind == PLAN_CALL) {
            const Kernel *kn = p->ks[st->kernel];
            buf_puts(b, " (");
            for (int j = 0; j < kn->nparams; j++) {
                const Param *pa = &kn->params[j];
                if (pa->kind == PARAM_SIZE)
                    buf_printf(b, "%s%s", j ? ", " : "", pa->size->name);
                else
                    buf_printf(b, "%sslot %d", j ? ", " : "",
                               plan_slot_index(p, plan_slot_for(p, pa->buf)));
            }
            buf_puts(b, ")");
        }
        buf_puts(b, "\n");
    }
}

/* ---- dispatch ---- */

rv_status plan_dispatch_pick(const PlanDispatch *d, const int64_t *sizes, int *variant) {
    int v = 0;
    if (d->fn) {
        v = d->fn(sizes, d->user);
    } else {
        for (int r = 0; r < d->nrules; r++) {
            const PlanRule *rule = &d->rules[r];
            bool holds = true;
            for (int i = 0; i < rule->nsizes; i++) {
                int64_t x = sizes[rule->size[i]->id];
                holds = holds && x >= rule->lo[i] && x <= rule->hi[i];
            }
            if (holds) {
                v = rule->variant;
                break;
            }
        }
    }
    if (v < 0 || v >= d->nvariants)
        return base_error(RV_ERR_ARG, "the dispatch function chose variant %d of %d", v,
                          d->nvariants);
    /* a variant lowered with a size constant is wrong at any other value */
    for (int i = 0; d->at && i < d->at[v].nsizes; i++) {
        const PlanAt *at = &d->at[v];
        if (sizes[at->size[i]->id] != at->value[i])
            return base_error(RV_ERR_ARG,
                              "the dispatch chose variant %d, compiled for %s = %lld, at %s = %lld",
                              v, at->size[i]->name, (long long)at->value[i], at->size[i]->name,
                              (long long)sizes[at->size[i]->id]);
    }
    *variant = v;
    return RV_OK;
}

void plan_dispatch_print(Buf *b, const PlanDispatch *d) {
    buf_printf(b, "== dispatch among %d variants: ", d->nvariants);
    if (d->fn) {
        buf_puts(b, "a C function");
        for (int q = 0; q < d->nsums; q++)
            buf_printf(b, "%s sum(%s)", q ? "," : " of the sizes and", d->sums[q]->name);
        buf_puts(b, " ==\n");
        return;
    }
    buf_printf(b, "%d rules, first match, else variant 0 ==\n", d->nrules);
    for (int r = 0; r < d->nrules; r++) {
        const PlanRule *rule = &d->rules[r];
        buf_puts(b, "  if");
        for (int i = 0; i < rule->nsizes; i++)
            buf_printf(b, "%s %lld <= %s <= %lld", i ? " and" : "", (long long)rule->lo[i],
                       rule->size[i]->name, (long long)rule->hi[i]);
        if (!rule->nsizes)
            buf_puts(b, " always");
        buf_printf(b, ": variant %d\n", rule->variant);
    }
}
