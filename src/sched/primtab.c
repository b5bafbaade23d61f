/*
 * primtab.c — the table of schedule primitives (prims.def): finding a
 * primitive by name, checking a step's shape and argument kinds against
 * its row, and the texts made from the table (a primitive's usage, the
 * list in "unknown primitive" messages, `ravel help schedules`).
 *
 * Checking here, once, gives every primitive the same located messages
 * for a wrong argument count, a missing `o, i =`, an integer where a loop
 * belongs or an unknown keyword; the handlers in prims.c check values.
 */
#include <string.h>

#include "sched/sched.h"

const SchedPrim sched_prims[] = {
#define PRIM(name, handler, results, params, keys, flags, doc)                                     \
    {#name, results, params, keys, flags, doc},
#include "sched/prims.def"
#undef PRIM
};
const int sched_nprims = (int)(sizeof sched_prims / sizeof sched_prims[0]);

const SchedPrim *sched_prim_find(const char *name) {
    for (int i = 0; i < sched_nprims; i++)
        if (strcmp(sched_prims[i].name, name) == 0)
            return &sched_prims[i];
    return NULL;
}

/* ---- signatures ---- */

static const char *const kind_names[PK_COUNT] = {"loop", "stage", "tensor", "int", "str"};

/* The entries of a params or keys string of the table. A malformed row is
 * a bug in prims.def (tests/unit/test_sched.c parses every row). */
int sched_prim_params(const char *sig, SchedParam *out, int max) {
    int n = 0;
    const char *p = sig;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        RV_ASSERT(n < max);
        SchedParam *q = &out[n++];
        memset(q, 0, sizeof *q);
        q->optional = *p == '[';
        p += q->optional;
        size_t k = strcspn(p, ":");
        RV_ASSERT(p[k] == ':' && k > 0 && k < sizeof q->name);
        memcpy(q->name, p, k);
        p += k + 1;
        size_t kl = strcspn(p, "]., ");
        q->kind = PK_COUNT;
        for (int i = 0; i < PK_COUNT; i++)
            if (strlen(kind_names[i]) == kl && strncmp(p, kind_names[i], kl) == 0)
                q->kind = (SchedParamKind)i;
        RV_ASSERT(q->kind != PK_COUNT);
        p += kl;
        if (q->optional) {
            RV_ASSERT(*p == ']');
            p++;
        }
        if (strncmp(p, "...", 3) == 0) {
            q->repeated = true;
            p += 3;
        }
    }
    return n;
}

static int count_results(const char *results) {
    if (!*results)
        return 0;
    int n = 1;
    for (const char *p = results; *p; p++)
        n += *p == ',';
    return n;
}

static void put_param(Buf *b, const SchedParam *q) {
    if (q->kind == PK_STR)
        buf_printf(b, "\"%s\"", q->name);
    else
        buf_puts(b, q->name);
}

void sched_prim_usage(Buf *b, const SchedPrim *p) {
    SchedParam ps[SCHED_MAX_PARAMS], ks[SCHED_MAX_PARAMS];
    int np = sched_prim_params(p->params, ps, SCHED_MAX_PARAMS);
    int nk = sched_prim_params(p->keys, ks, SCHED_MAX_PARAMS);
    if (*p->results)
        buf_printf(b, "%s = ", p->results);
    buf_printf(b, "%s(", p->name);
    int written = 0;
    for (int i = 0; i < np; i++) {
        const char *sep = written ? ", " : "";
        if (ps[i].optional) {
            buf_printf(b, "%s[%s", written ? " " : "", sep);
            put_param(b, &ps[i]);
            buf_puts(b, "]");
        } else {
            buf_puts(b, sep);
            put_param(b, &ps[i]);
            if (ps[i].repeated)
                buf_puts(b, ", ...");
        }
        written++;
    }
    for (int i = 0; i < nk; i++)
        buf_printf(b, "%s[%s%s=%s]", written++ ? " " : "", np ? ", " : "", ks[i].name,
                   ks[i].kind == PK_STR ? "\"...\"" : "N");
    buf_puts(b, ")");
}

void sched_prims_help(Buf *b) {
    buf_puts(b, "Schedule primitives: the steps of a `schedule NAME { ... }` block of a .rv file\n"
                "(or of rv_module_schedule(m, NAME, STEPS)), applied to stage NAME in order.\n"
                "A loop argument names a current loop of NAME: its axes, then its reduction's,\n"
                "and the parts that split and fuse give. [...] is optional, `...` repeats.\n\n");
    for (int i = 0; i < sched_nprims; i++) {
        const SchedPrim *p = &sched_prims[i];
        buf_puts(b, "  ");
        sched_prim_usage(b, p);
        buf_printf(b, "\n      %s\n", p->doc);
        SchedParam ps[2 * SCHED_MAX_PARAMS];
        int n = sched_prim_params(p->params, ps, SCHED_MAX_PARAMS);
        n += sched_prim_params(p->keys, ps + n, SCHED_MAX_PARAMS);
        for (int k = 0; k < n; k++)
            buf_printf(b, "%s%s: %s", k ? ", " : "      (", ps[k].name, kind_names[ps[k].kind]);
        buf_puts(b, n ? ")\n" : "");
    }
    buf_puts(b, "\nsrc/sched/prims.def is the table these lines come from; docs/schedules.md\n"
                "describes each primitive in full.\n");
}

/* ---- checking a step ---- */

rv_status sched_step_vfail(const SchedStep *step, const SrcFile *src, SrcLoc loc, const char *fmt,
                           va_list ap) {
    Buf b = {0};
    buf_vprintf(&b, fmt, ap);
    rv_status r = base_diag(RV_ERR_SCHEDULE, src, loc, "%s: %s", step->prim, buf_str(&b));
    buf_free(&b);
    return r;
}

static rv_status prim_fail(const SchedStep *step, const SrcFile *src, SrcLoc loc, const char *fmt,
                           ...) RV_PRINTF(4, 5);
static rv_status prim_fail(const SchedStep *step, const SrcFile *src, SrcLoc loc, const char *fmt,
                           ...) {
    va_list ap;
    va_start(ap, fmt);
    rv_status r = sched_step_vfail(step, src, loc, fmt, ap);
    va_end(ap);
    return r;
}

static SchedArgKind arg_kind_of(SchedParamKind k) {
    return k == PK_INT ? SA_INT : k == PK_STR ? SA_STRING : SA_IDENT;
}

static const char *wanted(SchedParamKind k, const char *stage, Buf *b) {
    switch (k) {
    case PK_LOOP:
        buf_printf(b, "a loop of %s", stage);
        break;
    case PK_STAGE:
        buf_puts(b, "the name of a stage");
        break;
    case PK_TENSOR:
        buf_puts(b, "the name of a tensor");
        break;
    case PK_INT:
        buf_puts(b, "an integer");
        break;
    default:
        buf_puts(b, "a quoted string");
        break;
    }
    return buf_str(b);
}

static const char *given(SchedArgKind k) {
    return k == SA_INT ? "an integer" : k == SA_STRING ? "a string" : "a name";
}

static rv_status check_kind(const SchedStep *step, const SrcFile *src, const char *stage,
                            const SchedArg *a, const SchedParam *q, int pos) {
    if (a->kind == arg_kind_of(q->kind))
        return RV_OK;
    Buf w = {0};
    rv_status r;
    if (pos > 0)
        r = prim_fail(step, src, a->loc, "argument %d (%s) must be %s, not %s", pos, q->name,
                      wanted(q->kind, stage, &w), given(a->kind));
    else
        r = prim_fail(step, src, a->loc, "%s= must be %s, not %s", q->name,
                      wanted(q->kind, stage, &w), given(a->kind));
    buf_free(&w);
    return r;
}

static rv_status fail_usage(const SchedStep *step, const SrcFile *src, const SchedPrim *p,
                            const char *what) {
    Buf u = {0};
    sched_prim_usage(&u, p);
    rv_status r = prim_fail(step, src, step->loc, "%s (usage: %s)", what, buf_str(&u));
    buf_free(&u);
    return r;
}

rv_status sched_prim_check(const SchedPrim *p, const SchedStep *step, const SrcFile *src,
                           const char *stage) {
    SchedParam ps[SCHED_MAX_PARAMS], ks[SCHED_MAX_PARAMS];
    int np = sched_prim_params(p->params, ps, SCHED_MAX_PARAMS);
    int nk = sched_prim_params(p->keys, ks, SCHED_MAX_PARAMS);
    int lo = 0, hi = np;
    for (int i = 0; i < np; i++) {
        lo += !ps[i].optional;
        if (ps[i].repeated)
            hi = -1;
    }
    int n = 0;
    for (int i = 0; i < step->nargs; i++)
        n += step->args[i].key == NULL;
    char what[128];
    if (n < lo || (hi >= 0 && n > hi)) {
        if (hi < 0)
            snprintf(what, sizeof what, "takes at least %d argument%s, got %d", lo,
                     lo == 1 ? "" : "s", n);
        else if (lo == hi)
            snprintf(what, sizeof what, "takes %d argument%s, got %d", lo, lo == 1 ? "" : "s", n);
        else
            snprintf(what, sizeof what, "takes %d to %d arguments, got %d", lo, hi, n);
        return fail_usage(step, src, p, what);
    }
    int nout = count_results(p->results);
    if (step->nout != nout) {
        if (nout == 0)
            return fail_usage(step, src, p, "gives no names; write it without `... =`");
        snprintf(what, sizeof what, "names %d result%s, got %d", nout, nout == 1 ? "" : "s",
                 step->nout);
        return fail_usage(step, src, p, what);
    }
    int pos = 0;
    for (int i = 0; i < step->nargs; i++) {
        const SchedArg *a = &step->args[i];
        rv_status r;
        if (!a->key) {
            const SchedParam *q = &ps[pos < np ? pos : np - 1]; /* the last one repeats */
            if ((r = check_kind(step, src, stage, a, q, ++pos)) != RV_OK)
                return r;
            continue;
        }
        int k = 0;
        while (k < nk && strcmp(ks[k].name, a->key) != 0)
            k++;
        if (k == nk) {
            const char *names[SCHED_MAX_PARAMS];
            for (int j = 0; j < nk; j++)
                names[j] = ks[j].name;
            Buf u = {0};
            base_near_hint(&u, a->key, names, nk);
            buf_puts(&u, " (usage: ");
            sched_prim_usage(&u, p);
            r = prim_fail(step, src, a->loc, "unknown keyword argument '%s'%s)", a->key,
                          buf_str(&u));
            buf_free(&u);
            return r;
        }
        for (int j = 0; j < i; j++)
            if (step->args[j].key && strcmp(step->args[j].key, a->key) == 0)
                return prim_fail(step, src, a->loc, "keyword '%s' given twice", a->key);
        if ((r = check_kind(step, src, stage, a, &ks[k], 0)) != RV_OK)
            return r;
    }
    return RV_OK;
}

rv_status sched_prim_unknown(const SchedStep *step, const SrcFile *src) {
    Buf names = {0}, hint = {0};
    const char *cands[64];
    RV_ASSERT(sched_nprims <= 64);
    for (int i = 0; i < sched_nprims; i++) {
        buf_printf(&names, "%s%s", i ? ", " : "", sched_prims[i].name);
        cands[i] = sched_prims[i].name;
    }
    base_near_hint(&hint, step->prim, cands, sched_nprims);
    rv_status r =
        base_diag(RV_ERR_SCHEDULE, src, step->loc, "unknown schedule primitive '%s'%s (known: %s)",
                  step->prim, buf_str(&hint), buf_str(&names));
    buf_free(&hint);
    buf_free(&names);
    return r;
}
