/*
 * compile.c — the compile driver: a module checked (ir_verify), lowered
 * (lower_pipeline: one kernel per computed tensor, in definition order),
 * emitted as one C translation unit (cg_c_module), compiled by the system
 * C compiler through the JIT's on-disk cache (jit_compile) and, for
 * RV_TARGET_CUDA, each kernel as CUDA C through NVRTC; the result is an
 * rv_program the runtime runs (src/runtime/program.c).
 *
 * WHY A LAYER OF ITS OWN. The driver sits above the runtime (DESIGN.md,
 * "driver"): it uses every layer below it, and the runtime uses none of
 * the lowering, code generation or compiling. Recursion lowering, batching
 * analyses and tuning records join here, between the checks and the
 * lowering, without the runtime calling back up into them; a tuner that
 * compiles thousands of candidates calls this file, not the runtime.
 *
 * Sizes stay symbolic, so one program serves every binding. A compilation
 * runs in its own IR scope (src/ir/scope.c): the schedule's stages, the
 * loop IR, its buffers and expressions are freed when it ends, and the
 * module is as it was before; the program keeps what its runs read
 * (keep_kernels), in its own arena.
 */
#include <stdio.h>
#include <string.h>

#include "driver/driver.h"
#include "lang/lang.h"
#include "runtime/program.h"
#include "runtime/threadpool.h"

typedef Vec(const char *) StrVec;

/* Appends the words of s (split on spaces) to argv. */
static void split_flags(const char *s, StrVec *argv, Arena *a) {
    while (s && *s) {
        while (*s == ' ')
            s++;
        const char *e = s;
        while (*e && *e != ' ')
            e++;
        if (e > s) {
            const char *w = arena_strndup(a, s, (size_t)(e - s));
            vec_push(argv, w);
        }
        s = e;
    }
}

void rv_program_free(rv_program *p) {
    if (!p)
        return;
    jit_close(p->lib);
    cg_unit_free(&p->unit);
    base_free(p->kernels);
    base_free(p->fns);
    base_free(p->preludes);
    for (int i = 0; p->cuda_fns && i < p->n; i++)
        jit_cuda_unload(p->cuda_fns[i]);
    for (int i = 0; p->cuda_launch && i < p->n; i++)
        cg_cuda_launch_free(&p->cuda_launch[i]);
    base_free(p->cuda_fns);
    base_free(p->cuda_launch);
    for (int v = 0; p->plans && v < p->nvariants; v++)
        plan_free(&p->plans[v]);
    base_free(p->plans);
    base_free(p->variant_first);
    base_free(p->dispatch.rules);
    base_free(p->dispatch.sums);
    base_free(p->dispatch.at);
    tp_free(p->pool);
    pthread_mutex_destroy(&p->stats_mu);
    rt_packs_free(&p->packs);
    arena_free(p->arena);
    base_free(p);
}

/* ---- CUDA: compiling ---- */

/* Every kernel as CUDA C, PTX (NVRTC, for device 0) and a loaded
 * function, with its launch extents. */
static rv_status cuda_compile(rv_program *p) {
    char arch[32];
    rv_status st = jit_cuda_arch(arch);
    p->cuda_fns = base_xcalloc((size_t)p->n + 1, sizeof *p->cuda_fns);
    p->cuda_launch = base_xcalloc((size_t)p->n + 1, sizeof *p->cuda_launch);
    for (int k = 0; st == RV_OK && k < p->n; k++) {
        char *src = NULL, *sym = NULL, *ptx = NULL;
        st = cg_cuda_kernel(p->kernels[k], &src, &sym, &p->cuda_launch[k]);
        if (st == RV_OK)
            st = jit_nvrtc_compile(src, arch, &ptx);
        const CgLaunch *l = &p->cuda_launch[k];
        if (st == RV_OK && l->nfns) { /* a recursion's entry points, one module */
            const char **syms = base_xcalloc((size_t)l->nfns, sizeof *syms);
            for (int i = 0; i < l->nfns; i++)
                syms[i] = l->fns[i].sym;
            st = jit_cuda_load_fns(ptx, syms, l->nfns, &p->cuda_fns[k]);
            base_free(syms);
        } else if (st == RV_OK) {
            st = jit_cuda_load(ptx, sym, &p->cuda_fns[k]);
        }
        base_free(ptx);
        base_free(sym);
        base_free(src);
    }
    return st;
}

typedef Vec(Kernel *) KernelVec;

/* Lowers variant v with the schedule blocks of `schedule` in place of the
 * module's own (NULL: the module's own), appending its kernels. The
 * variant's blocks are made in the compile scope and the module's are put
 * back whatever happens. */
static rv_status lower_variant(Module *m, int v, const char *schedule, const PlanAt *at,
                               KernelVec *all, int *first) {
    /* Sizes the variant is compiled for: each range narrowed to its value
     * while it is lowered, so the simplifier folds the size to a constant
     * wherever it appears (loop extents, tails, offsets), as if the program
     * had been written for it; the ranges are put back after. */
    int64_t lo[RV_DISPATCH_MAX_CONDS], hi[RV_DISPATCH_MAX_CONDS];
    int nat = at ? at->nsizes : 0;
    for (int i = 0; i < nat; i++) {
        Size *z = at->size[i];
        lo[i] = z->lo, hi[i] = z->hi;
        z->lo = z->hi = at->value[i];
    }
    char name[32];
    snprintf(name, sizeof name, "<variant %d>", v);
    Kernel **ks = NULL;
    int n = 0;
    rv_status st = lower_pipeline_scheduled(m, name, schedule, &ks, &n);
    for (int i = nat - 1; i >= 0; i--) /* in reverse: a size named twice gets its own back */
        at->size[i]->lo = lo[i], at->size[i]->hi = hi[i];
    first[v] = all->len;
    for (int i = 0; i < n; i++)
        vec_push(all, ks[i]);
    base_free(ks);
    return st;
}

rv_status driver_lower_variants(Module *m, int nvariants, const char *const *schedules,
                                const PlanAt *at, Kernel ***ks, int *n, int *first) {
    KernelVec all = {0};
    rv_status st = RV_OK;
    for (int v = 0; st == RV_OK && v < nvariants; v++)
        st = lower_variant(m, v, schedules ? schedules[v] : NULL, at ? &at[v] : NULL, &all, first);
    *ks = all.data;
    *n = all.len;
    return st;
}

/* The JIT's options for opt: its compiler and cache, and -fopenmp-simd
 * and opt->cflags (their words in `flags`, allocated in `a`). One place,
 * so rv_program_code_key hashes the flags a compile passes. */
static JitOptions jit_options(const rv_compile_options *opt, StrVec *flags, Arena *a) {
    vec_push(flags, "-fopenmp-simd");
    split_flags(opt->cflags, flags, a);
    return (JitOptions){.cc = opt->cc,
                        .cache_dir = opt->cache_dir,
                        .extra_flags = flags->data,
                        .n_extra_flags = flags->len};
}

/* Lowering (every variant: one kernel list, one C unit, whose code
 * generator names a variant's kernel_Y apart from another's), C, the JIT
 * and (CUDA) the device kernels, inside the compile scope: p->kernels are
 * the scope's until keep_kernels. */
static rv_status compile_in_scope(rv_program *p, const char *const *schedules,
                                  const rv_compile_options *opt) {
    rv_status st = driver_lower_variants(p->m, p->nvariants, schedules, p->dispatch.at, &p->kernels,
                                         &p->n, p->variant_first);
    if (st != RV_OK)
        return st;
    cg_c_module(p->kernels, p->n, &p->unit);
    p->fns = base_xcalloc((size_t)p->n + 1, sizeof *p->fns);
    p->preludes = base_xcalloc((size_t)p->n + 1, sizeof *p->preludes);
    if (p->n == 0)
        return RV_OK;
    Arena *a = arena_new();
    StrVec flags = {0};
    JitOptions jo = jit_options(opt, &flags, a);
    double cc0 = jit_stats().compile_seconds;
    st = jit_compile(p->unit.source, &jo, &p->lib);
    p->stats.cc_seconds = jit_stats().compile_seconds - cc0;
    vec_free(&flags);
    arena_free(a);
    for (int i = 0; st == RV_OK && i < p->n; i++) {
        p->fns[i] = (rv_rt_kernel_fn)jit_fn(p->lib, p->unit.kernel_syms[i]);
        if (p->unit.prelude_syms[i])
            p->preludes[i] = (rv_rt_prelude_fn)jit_fn(p->lib, p->unit.prelude_syms[i]);
        if (!p->fns[i] || (p->unit.prelude_syms[i] && !p->preludes[i]))
            st = base_error(RV_ERR_COMPILER, "compiled program lacks %s: %s",
                            p->unit.kernel_syms[i], rv_last_error());
    }
    if (st == RV_OK && p->target == RV_TARGET_CUDA)
        st = cuda_compile(p);
    return st;
}

/* What runs read of the kernels, copied out of the compile scope into the
 * program's arena: each kernel's name, parameters (buffers with their
 * sizes and storage orders) and check sites, and the CUDA launch extents.
 * The loop IR stays behind and is freed with the scope. */
static void keep_kernels(rv_program *p, const IrScope *scope) {
    IrKeep keep;
    ir_keep_init(&keep, scope, p->arena);
    for (int k = 0; k < p->n; k++) {
        const Kernel *kn = p->kernels[k];
        Kernel *c = arena_alloc(p->arena, sizeof *c);
        c->name = arena_strdup(p->arena, kn->name);
        c->m = kn->m;
        c->nparams = kn->nparams;
        c->params = arena_memdup(p->arena, kn->params, sizeof(Param) * (size_t)kn->nparams);
        for (int i = 0; i < kn->nparams; i++)
            c->params[i].buf = ir_keep_buffer(&keep, kn->params[i].buf);
        c->rec = kn->rec; /* the module's, like c->m */
        c->nfills = kn->nfills;
        c->fills = arena_alloc(p->arena, sizeof(Buffer *) * (size_t)(kn->nfills + 1));
        for (int i = 0; i < kn->nfills; i++)
            c->fills[i] = ir_keep_buffer(&keep, kn->fills[i]);
        c->nsites = kn->nsites;
        c->sites = arena_alloc(p->arena, sizeof(const char *) * (size_t)(kn->nsites + 1));
        for (int i = 0; i < kn->nsites; i++)
            c->sites[i] = arena_strdup(p->arena, kn->sites[i]);
        p->kernels[k] = c;
        for (int d = 0; p->cuda_launch && d < 3; d++) {
            p->cuda_launch[k].grid[d] = ir_keep_expr(&keep, p->cuda_launch[k].grid[d]);
            p->cuda_launch[k].block[d] = ir_keep_expr(&keep, p->cuda_launch[k].block[d]);
        }
        for (int i = 0; p->cuda_launch && i < p->cuda_launch[k].nfns; i++) {
            CgCudaFn *f = &p->cuda_launch[k].fns[i];
            for (int d = 0; d < 3; d++) {
                f->grid[d] = ir_keep_expr(&keep, f->grid[d]);
                f->block[d] = ir_keep_expr(&keep, f->block[d]);
            }
            f->batch = ir_keep_expr(&keep, f->batch);
            f->batches = ir_keep_expr(&keep, f->batches);
        }
    }
    ir_keep_free(&keep);
}

/* The host plan of each variant, over the kept kernels (a kernel has a
 * prelude when the JIT found one). */
static void build_plans(rv_program *p) {
    p->plans = base_xcalloc((size_t)p->nvariants, sizeof *p->plans);
    bool *prelude = base_xcalloc((size_t)p->n + 1, sizeof *prelude);
    for (int k = 0; k < p->n; k++)
        prelude[k] = p->preludes[k] != NULL;
    for (int v = 0; v < p->nvariants; v++) {
        int first = p->variant_first[v];
        int end = v + 1 < p->nvariants ? p->variant_first[v + 1] : p->n;
        plan_build(&p->plans[v], p->m, p->kernels + first, end - first, prelude + first,
                   p->target == RV_TARGET_CUDA);
    }
    base_free(prelude);
    if (p->nvariants > 1 && plan_debug()) {
        Buf b = {0};
        plan_dispatch_print(&b, &p->dispatch);
        fputs(buf_str(&b), stderr);
        buf_free(&b);
    }
}

/* Does e read nothing but sizes and constants? */
static bool sizes_only(const Expr *e) {
    if (e->kind == EX_UFCALL || e->kind == EX_VAR || e->kind == EX_READ || e->kind == EX_LOAD ||
        e->kind == EX_REDUCE)
        return false;
    for (int i = 0; i < e->n; i++)
        if (!sizes_only(e->args[i]))
            return false;
    return true;
}

/* rv_dispatch.sums resolved into pd (RV_ERR_ARG naming a bad one). */
static rv_status dispatch_sums(Module *m, int nsums, const char *const *names, PlanDispatch *pd) {
    if (nsums <= 0)
        return RV_OK;
    if (!names)
        return base_error(RV_ERR_ARG, "rv_program_compile_variants: %d sums and no names", nsums);
    pd->sums = base_xcalloc((size_t)nsums, sizeof *pd->sums);
    pd->nsums = nsums;
    for (int q = 0; q < nsums; q++) {
        Ufun *f = names[q] ? rv_module_ufun(m, names[q]) : NULL;
        if (!f)
            return base_error(RV_ERR_ARG, "dispatch sum %d: no ufun named '%s'", q,
                              names[q] ? names[q] : "(null)");
        /* one argument over sizes: the AOT output sums it in one loop */
        if (f->nargs != 1 || !sizes_only(f->args[0]->extent))
            return base_error(RV_ERR_ARG,
                              "dispatch sum %d: ufun %s is not of one argument over sizes", q,
                              f->name);
        pd->sums[q] = f;
    }
    return RV_OK;
}

/* rv_dispatch.variant_sizes resolved into pd->at (RV_ERR_ARG naming an
 * unknown size or a value outside its range). */
static rv_status dispatch_at(Module *m, int nvariants, const rv_variant_sizes *vs,
                             PlanDispatch *pd) {
    if (!vs)
        return RV_OK;
    pd->at = base_xcalloc((size_t)nvariants, sizeof *pd->at);
    for (int v = 0; v < nvariants; v++) {
        if (vs[v].nsizes < 0 || vs[v].nsizes > RV_DISPATCH_MAX_CONDS)
            return base_error(RV_ERR_ARG, "variant %d: %d constant sizes (at most %d)", v,
                              vs[v].nsizes, RV_DISPATCH_MAX_CONDS);
        for (int i = 0; i < vs[v].nsizes; i++) {
            const char *name = vs[v].at[i].size;
            Size *z = name ? rv_module_size(m, name) : NULL;
            int64_t x = vs[v].at[i].value;
            if (!z)
                return base_error(RV_ERR_ARG, "variant %d: no size named '%s'", v,
                                  name ? name : "(null)");
            if (x < z->lo || x > z->hi)
                return base_error(RV_ERR_ARG,
                                  "variant %d: %s = %lld is outside its range %lld..%lld", v,
                                  z->name, (long long)x, (long long)z->lo, (long long)z->hi);
            pd->at[v].size[i] = z;
            pd->at[v].value[i] = x;
        }
        pd->at[v].nsizes = vs[v].nsizes;
    }
    return RV_OK;
}

rv_status driver_dispatch(Module *m, int nvariants, const rv_dispatch *d, PlanDispatch *pd) {
    memset(pd, 0, sizeof *pd);
    pd->nvariants = nvariants;
    if (!d)
        return RV_OK;
    pd->fn = d->fn;
    pd->user = d->user;
    rv_status st = dispatch_sums(m, d->nsums, d->sums, pd);
    if (st == RV_OK)
        st = dispatch_at(m, nvariants, d->variant_sizes, pd);
    if (st != RV_OK || d->fn || d->nrules <= 0)
        return st;
    if (!d->rules)
        return base_error(RV_ERR_ARG, "rv_program_compile_variants: %d rules and no table",
                          d->nrules);
    pd->rules = base_xcalloc((size_t)d->nrules, sizeof *pd->rules);
    pd->nrules = d->nrules;
    for (int r = 0; r < d->nrules; r++) {
        const rv_dispatch_rule *in = &d->rules[r];
        PlanRule *out = &pd->rules[r];
        if (in->variant < 0 || in->variant >= nvariants)
            return base_error(RV_ERR_ARG, "dispatch rule %d: variant %d of %d", r, in->variant,
                              nvariants);
        if (in->nconds < 0 || in->nconds > RV_DISPATCH_MAX_CONDS)
            return base_error(RV_ERR_ARG, "dispatch rule %d: %d conditions (at most %d)", r,
                              in->nconds, RV_DISPATCH_MAX_CONDS);
        out->variant = in->variant;
        out->nsizes = in->nconds;
        for (int i = 0; i < in->nconds; i++) {
            const char *name = in->conds[i].size;
            if (!name || !(out->size[i] = rv_module_size(m, name)))
                return base_error(RV_ERR_ARG, "dispatch rule %d: no size named '%s'", r,
                                  name ? name : "(null)");
            out->lo[i] = in->conds[i].lo;
            out->hi[i] = in->conds[i].hi;
        }
    }
    return RV_OK;
}

/* A compilation runs in its own IR scope (src/ir/scope.c): the schedule's
 * stages, the loop IR, its buffers and expressions are freed when it ends,
 * and the module is as it was before. The program keeps what its runs
 * read (keep_kernels), in its own arena. */
static rv_status compile_program(const char *fn, rv_module *m, int nvariants,
                                 const char *const *schedules, const rv_dispatch *d,
                                 const rv_compile_options *opt, rv_program **out) {
    if (!out)
        return base_error(RV_ERR_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!m)
        return base_error(RV_ERR_ARG, "%s: no module", fn);
    if (nvariants < 1)
        return base_error(RV_ERR_ARG, "%s: %d variants", fn, nvariants);
    rv_compile_options none = {0};
    if (!opt)
        opt = &none;
    if (opt->target != RV_TARGET_CPU && opt->target != RV_TARGET_CUDA)
        return base_error(RV_ERR_ARG, "%s: unknown target %d", fn, (int)opt->target);
    /* without a driver, say so before any work */
    if (opt->target == RV_TARGET_CUDA && jit_cuda_init() != RV_OK)
        return RV_ERR_UNSUPPORTED;
    if (opt->threads < 0)
        return base_error(RV_ERR_ARG, "%s: %d threads (0 means the shared pool)", fn,
                          opt->threads);
    double t0 = rt_now_seconds();
    rv_status st = ir_verify(m);
    if (st != RV_OK)
        return st;
    rv_program *p = base_xcalloc(1, sizeof *p);
    p->m = m;
    p->arena = arena_new();
    p->ntensors = m->tensors.len;
    p->serial = opt->serial != 0 || opt->threads == 1;
    p->target = opt->target;
    p->nvariants = nvariants;
    p->variant_first = base_xcalloc((size_t)nvariants + 1, sizeof *p->variant_first);
    p->last_variant = -1;
    pthread_mutex_init(&p->stats_mu, NULL);
    rt_packs_init(&p->packs);
    st = driver_dispatch(m, nvariants, d, &p->dispatch);
    if (st == RV_OK) {
        IrScope scope;
        ir_scope_begin(m, &scope);
        st = compile_in_scope(p, schedules, opt);
        if (st == RV_OK)
            keep_kernels(p, &scope);
        ir_scope_end(&scope);
    }
    if (st != RV_OK) {
        rv_program_free(p);
        return st;
    }
    build_plans(p);
    rt_program_name_objects(p); /* before any run: runs may overlap */
    if (opt->threads > 1 && !p->serial)
        p->pool = tp_new(opt->threads);
    p->stats.compile_seconds = rt_now_seconds() - t0;
    *out = p;
    return RV_OK;
}

rv_status rv_program_compile(rv_module *m, const rv_compile_options *opt, rv_program **out) {
    return compile_program("rv_program_compile", m, 1, NULL, NULL, opt, out);
}

rv_status rv_program_compile_variants(rv_module *m, int nvariants, const char *const *schedules,
                                      const rv_dispatch *dispatch, const rv_compile_options *opt,
                                      rv_program **out) {
    return compile_program("rv_program_compile_variants", m, nvariants, schedules, dispatch, opt,
                           out);
}

rv_status rv_program_emit(rv_module *m, char **source) {
    if (!source)
        return base_error(RV_ERR_ARG, "rv_program_emit: source is NULL");
    *source = NULL;
    if (!m)
        return base_error(RV_ERR_ARG, "rv_program_emit: no module");
    rv_status st = ir_verify(m);
    if (st != RV_OK)
        return st;
    /* the lowering and the C unit, in a scope: the module is left as it was */
    IrScope scope;
    ir_scope_begin(m, &scope);
    Kernel **ks = NULL;
    int n = 0, first = 0;
    st = driver_lower_variants(m, 1, NULL, NULL, &ks, &n, &first);
    if (st == RV_OK) {
        CgUnit unit = {0};
        cg_c_module(ks, n, &unit);
        *source = unit.source;
        unit.source = NULL;
        cg_unit_free(&unit);
    }
    base_free(ks);
    ir_scope_end(&scope);
    return st;
}

rv_status rv_program_code_key(rv_module *m, const char *schedule, const rv_variant_sizes *at,
                              const rv_compile_options *opt, char key[33]) {
    if (!key)
        return base_error(RV_ERR_ARG, "rv_program_code_key: key is NULL");
    key[0] = 0;
    if (!m)
        return base_error(RV_ERR_ARG, "rv_program_code_key: no module");
    rv_compile_options none = {0};
    if (!opt)
        opt = &none;
    PlanDispatch pd = {0};
    rv_dispatch d = {.variant_sizes = at};
    rv_status st = driver_dispatch(m, 1, at ? &d : NULL, &pd);
    IrScope scope;
    ir_scope_begin(m, &scope);
    Kernel **ks = NULL;
    int n = 0, first = 0;
    if (st == RV_OK)
        st = driver_lower_variants(m, 1, &schedule, pd.at, &ks, &n, &first);
    if (st == RV_OK) {
        CgUnit unit = {0};
        cg_c_module(ks, n, &unit);
        Arena *a = arena_new();
        StrVec flags = {0};
        JitOptions jo = jit_options(opt, &flags, a);
        st = jit_source_key(unit.source, &jo, key);
        vec_free(&flags);
        arena_free(a);
        cg_unit_free(&unit);
    }
    base_free(ks);
    ir_scope_end(&scope);
    base_free(pd.rules);
    base_free(pd.sums);
    base_free(pd.at);
    return st;
}

const char *rv_program_source(const rv_program *p) {
    return p && p->unit.source ? p->unit.source : "";
}
