/*
 * pipeline.c — the lowering pipeline: schedule -> kernels -> loop-IR passes.
 *
 * lower_pipeline is what every client of the lowering calls (compiled
 * programs, `ravel emit`, `ravel build`): lower_module applies the
 * module's schedule, runs the passes of the list below that are over the
 * schedule (bounds), and turns the schedule into kernels; then each
 * kernel body goes through the other passes of the list, in order.
 *
 * lower_module's steps, one file each (its comment states its contract),
 * run interleaved in one walk over each stage's nest (docs/pipeline.md
 * says why they are not yet separate passes):
 *
 *     nest      nest.c: loop nests, tails of splits guarded and marked
 *               for the partition pass (or partitioned, with stages
 *               computed or accumulators allocated inside)
 *     attach    attach.c: computed-at stages in buffers for their regions,
 *               each the bounds pass's box for that copy, instantiated
 *     bounds    bounds.c: region inference (interval arithmetic), called
 *               by the bounds pass on the host's nest at the attach point
 *     reduce    reduce.c: reductions' updates, in a local accumulator or
 *               in place, in `reduce RK into B:` (initialised by the
 *               reduce pass)
 *     expr      expr.c: tensor-level expressions -> loop IR, reads in
 *               values as multi-dimensional accesses X{i, j}; what the
 *               schedule evaluates flat, with safe offsets (rtcheck.c)
 *     storage   storage.c: the prelude filling ragged layouts' AUX arrays
 *
 * The passes, in order (the table below; docs/pipeline.md has their
 * contracts): over the schedule, before the nests are built, bounds
 * (regions.c: the region of every computed-at stage at its attach point
 * as a symbolic box, and one per last tile of a constant extent, TVM's
 * InferBound; the walk's placement takes each copy's region from it;
 * printed for RAVEL_DEBUG=bounds and tested on tests/bounds); then on
 * each kernel reduce (place.c: each reduction's initialisation where it
 * starts), partition, checks, flatten, simplify, forward, promote, hoist,
 * simplify.
 *
 * Each pass is one file and one function `Stmt *pass(Module *, Stmt *)`
 * that returns the same pointer when it changes nothing (QBE's
 * main.c:func(), Halide's Lower.cpp), or `rv_status pass(Kernel *)` when
 * it needs the kernel (partition: check_src for its copies; checks: its
 * sites; flatten: its parameters' storage orders), or `rv_status
 * pass(Schedule *, RegionTable *)` over the schedule (the table the walk
 * reads).
 *
 * After lower_module and after every pass, the loop-IR verifier
 * (verify.c) checks the kernel; a violation is reported as an internal
 * error naming the pass, never a crash. It is linear in the kernel's size,
 * so it always runs.
 *
 * RAVEL_DEBUG dumps kernels to stderr: a comma- or space-separated list
 * of names, where `lower` (or `all`) dumps the kernel after lower_module
 * and after every pass, and a pass name (`hoist`, or `lower.hoist`) the
 * kernel after each run of that pass (`bounds`: the region table, and
 * at each placement whether its region is the inference on the copy). Each
 * dump starts with a header line `== KERNEL after PASS ==`; read.c reads
 * the kernel text back, so a pass can be tested alone on it (tests/lower,
 * test_lower_passes.c).
 */
#include <stdlib.h>
#include <string.h>

#include "lang/lang.h"
#include "lower/lower.h"

typedef struct LowerPassInfo {
    const char *name;
    LowerPass run;                      /* a pass over the body, or */
    rv_status (*run_kernel)(Kernel *k); /* one over the kernel (its parameters), or */
    rv_status (*run_schedule)(Schedule *s, RegionTable *t); /* one over the schedule, before the nests */
} LowerPassInfo;

/* The passes, in order: those over the schedule run in lower_module
 * before the walk builds the nests, the others on each kernel after it. */
static const LowerPassInfo passes[] = {
    {"bounds", NULL, NULL, lower_infer_bounds},          /* regions of computed-at stages, for the walk */
    {"reduce", lower_place_reductions, NULL, NULL},      /* reductions initialised where they start */
    {"partition", NULL, lower_partition, NULL},          /* full tiles without guards, the last tile */
    {"checks", NULL, lower_checks, NULL},                /* `if !ok: fail N`, safe indices and divisors */
    {"flatten", NULL, lower_flatten, NULL},              /* multi-dim accesses -> flat offsets */
    {"simplify", lower_simplify, NULL, NULL},            /* canonical index arithmetic, proven guards removed */
    {"forward", lower_forward_copies, NULL, NULL},       /* whole tiles read a padded copy's source */
    {"promote", lower_promote_accumulators, NULL, NULL}, /* in-place accumulations in a local tile */
    {"registers", lower_register_tiles, NULL, NULL},     /* a register tile as a local per vector */
    {"hoist", lower_hoist, NULL, NULL},                  /* loop-invariant UF/AUX loads and index arithmetic */
    {"simplify", lower_simplify, NULL, NULL},            /* what hoisting exposed */
};

static rv_status run_pass(const LowerPassInfo *p, Kernel *k) {
    if (p->run_schedule)
        return base_error(RV_ERR_ARG, "'%s' is a pass over the schedule, not a kernel", p->name);
    if (p->run_kernel)
        return p->run_kernel(k);
    k->body = p->run(k->m, k->body);
    return RV_OK;
}

rv_status lower_run_schedule_passes(Schedule *s, RegionTable *t) {
    memset(t, 0, sizeof *t);
    for (int i = 0; i < (int)RV_COUNT(passes); i++) {
        if (!passes[i].run_schedule)
            continue;
        rv_status st = passes[i].run_schedule(s, t);
        if (st != RV_OK)
            return st;
        lower_dump_regions(t);
    }
    return RV_OK;
}

bool lower_has_pass(const char *name) {
    for (int i = 0; i < (int)RV_COUNT(passes); i++)
        if (strcmp(passes[i].name, name) == 0)
            return true;
    return false;
}

rv_status lower_run_pass(Kernel *k, const char *name) {
    for (int i = 0; i < (int)RV_COUNT(passes); i++)
        if (strcmp(passes[i].name, name) == 0)
            return run_pass(&passes[i], k);
    return base_error(RV_ERR_ARG, "no lowering pass named '%s'", name);
}

bool lower_debug_wants(const char *pass) {
    const char *env = getenv("RAVEL_DEBUG");
    if (!env)
        return false;
    size_t n = strlen(pass);
    for (const char *p = env; *p;) {
        size_t len = strcspn(p, ", \t");
        if ((len == 5 && strncmp(p, "lower", 5) == 0) || (len == 3 && strncmp(p, "all", 3) == 0) ||
            (len == n && strncmp(p, pass, n) == 0) ||
            (len == n + 6 && strncmp(p, "lower.", 6) == 0 && strncmp(p + 6, pass, n) == 0))
            return true;
        p += len;
        p += strspn(p, ", \t");
    }
    return false;
}

static void debug_dump(const Kernel *k, const char *pass) {
    if (!lower_debug_wants(pass))
        return;
    Buf b = {0};
    buf_printf(&b, "== %s after %s ==\n", k->name, pass);
    lower_print_kernel(&b, k);
    fputs(buf_str(&b), stderr);
    buf_free(&b);
}

rv_status lower_run_passes(Kernel *k) {
    debug_dump(k, "lower");
    rv_status st = lower_verify_kernel(k, "lower");
    for (int i = 0; st == RV_OK && i < (int)RV_COUNT(passes); i++) {
        if (passes[i].run_schedule)
            continue;
        if ((st = run_pass(&passes[i], k)) != RV_OK)
            break;
        debug_dump(k, passes[i].name);
        st = lower_verify_kernel(k, passes[i].name);
    }
    return st;
}

rv_status lower_pipeline(Module *m, Kernel ***out, int *n) {
    Kernel **ks = NULL;
    int nk = 0;
    rv_status st = lower_module(m, &ks, &nk);
    if (st != RV_OK)
        return st;
    for (int i = 0; i < nk && st == RV_OK; i++)
        st = lower_run_passes(ks[i]);
    if (st != RV_OK) {
        base_free(ks);
        return st;
    }
    *out = ks;
    *n = nk;
    return RV_OK;
}

rv_status lower_pipeline_scheduled(Module *m, const char *name, const char *schedule,
                                   Kernel ***out, int *n) {
    if (!schedule)
        return lower_pipeline(m, out, n);
    /* the variant's blocks are parsed into the current scope, in place of
     * the module's own, which are put back whatever happens */
    SchedBlock *own = m->scheds.data;
    int own_len = m->scheds.len, own_cap = m->scheds.cap;
    memset(&m->scheds, 0, sizeof m->scheds);
    rv_status st = lang_parse_schedules(m, name, schedule);
    if (st == RV_OK)
        st = lower_pipeline(m, out, n);
    vec_free(&m->scheds);
    m->scheds.data = own;
    m->scheds.len = own_len;
    m->scheds.cap = own_cap;
    return st;
}
