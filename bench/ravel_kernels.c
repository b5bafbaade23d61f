/*
 * bench/ravel_kernels.c — ravel's kernels for the benchmark drivers.
 *
 * For each request, the .rv program of the workload (kernel_sources.c:
 * the definition with M symbolic, N, K and the batch literal, and its
 * schedule) is compiled once, outside the timed region, the way
 * rv_program_compile does it: parse, lower (lower_pipeline), emit C
 * (cg_c_module), JIT (jit_compile, through the on-disk cache), look up each
 * kernel (jit_fn). The timed run() then calls the kernel symbols directly,
 * as an AOT user would: a sizes array, the caller's own buffers (row-major
 * float32, 64-byte aligned by bench_alloc) and an rv_rt_ctx whose
 * parallel_for runs on a thread pool of exactly `threads` threads
 * (threads == 1: every chunk on the caller). There is no per-call copy,
 * check or allocation, unlike rv_program_run.
 *
 * THE RULE PER T. Some kinds have two schedules (kernel_sources.h); both
 * are compiled by ravel_kernel_for and cached for the process, and run()
 * picks one by M, N and K with rk_variant_for, so run() never compiles. A
 * schedule that fails to compile makes ravel_kernel_for print
 * rv_last_error() and answer NULL: never a fake.
 *
 * RAVEL_BENCH_VARIANT=NAME (stream, packed, dot, bcast6x64, ...) forces
 * the variant of that name where the kind has one (to verify each on the
 * drivers' small shapes).
 */
#include "ravel_kernels.h"

#include "kernel_sources.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/ir.h"
#include "jit/jit.h"
#include "lower/lower.h"
#include "ravel.h"
#include "ravel_rt.h"
#include "runtime/runtime.h"
#include "runtime/threadpool.h"

enum { ROLE_A, ROLE_B, ROLE_BIAS, ROLE_C, ROLE_COUNT };
#define MAX_KERNELS 4
#define MAX_PARAMS 8

/* One compiled program: its kernels and how their parameters map. */
typedef struct Compiled {
    int kind, batch, n, k, variant;
    rv_module *m;
    Kernel **ks;
    int nk;
    CgUnit unit;
    JitLib *lib;
    double compile_seconds; /* the C compiler's time (0: a JIT cache hit) */
    rv_rt_kernel_fn fns[MAX_KERNELS];
    int nsizes[MAX_KERNELS];         /* every size param is M */
    int nbufs[MAX_KERNELS];
    int role[MAX_KERNELS][MAX_PARAMS]; /* buffer i -> ROLE_* */
    struct Compiled *next;
} Compiled;

static Compiled *g_cache; /* process lifetime */

/* ---- the context: a pool of exactly `threads` threads ---- */

static ThreadPool *g_pools[257];
static ThreadPool *g_cur_pool; /* set by run() before calling the kernels */

static void pool_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *closure) {
    tp_parallel_for(g_cur_pool, n, fn, closure);
}

static void serial_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *closure) {
    if (n > 0)
        fn(closure, 0, n, 0);
}

typedef struct Host {
    atomic_int failed;
} Host;

/* The runtime's scratch allocator (src/runtime/scratch.c), as
 * rv_program_run uses it. */
static void *host_alloc(struct rv_rt_ctx *ctx, size_t n) {
    void *p = rt_scratch_alloc(n);
    if (!p)
        atomic_store(&((Host *)ctx->host)->failed, 1);
    return p;
}

static void host_free(struct rv_rt_ctx *ctx, void *p) {
    (void)ctx;
    rt_scratch_free(p);
}

/* ---- compile ---- */

static const char *kind_name(int kind) {
    static const char *const names[RK_COUNT] = {"dense", "dense_bias_gelu", "bmm_nt", "bmm_nn",
                                                "sgemm"};
    return kind >= 0 && kind < RK_COUNT ? names[kind] : "?";
}

static int role_of(const char *tensor) {
    static const char *const names[ROLE_COUNT] = {"X", "W", "bias", "Y"};
    for (int r = 0; r < ROLE_COUNT; r++)
        if (!strcmp(tensor, names[r]))
            return r;
    return -1;
}

static void compiled_free(Compiled *c) {
    if (!c)
        return;
    jit_close(c->lib);
    cg_unit_free(&c->unit);
    base_free(c->ks);
    rv_module_free(c->m);
    free(c);
}

static Compiled *compile_variant(int kind, int batch, int n, int k, int variant) {
    for (Compiled *c = g_cache; c; c = c->next)
        if (c->kind == kind && c->batch == batch && c->n == n && c->k == k &&
            c->variant == variant)
            return c;
    static char text[16384];
    if (!rk_source(kind, batch, n, k, variant, text, sizeof text)) {
        fprintf(stderr, "ravel_kernels: no source for %s (n %d, k %d, variant %d)\n",
                kind_name(kind), n, k, variant);
        return NULL;
    }
    char name[96];
    snprintf(name, sizeof name, "%s_b%d_n%d_k%d_v%d.rv", kind_name(kind), batch, n, k, variant);
    Compiled *c = calloc(1, sizeof *c);
    c->kind = kind, c->batch = batch, c->n = n, c->k = k, c->variant = variant;
    const char *stage = "parse";
    rv_status st = rv_module_parse(name, text, &c->m);
    if (st == RV_OK && (stage = "verify", st = ir_verify(c->m)) == RV_OK &&
        (stage = "lower", st = lower_pipeline(c->m, &c->ks, &c->nk)) == RV_OK) {
        if (c->nk < 1 || c->nk > MAX_KERNELS) {
            fprintf(stderr, "ravel_kernels: %s: %d kernels (want 1..%d)\n", name, c->nk,
                    MAX_KERNELS);
            goto fail;
        }
        cg_c_module(c->ks, c->nk, &c->unit);
        /* RAVEL_BENCH_CFLAGS: more C compiler flags (one word each), to
         * compare flag sets with the same driver */
        const char *flags[16] = {"-fopenmp-simd"};
        int nflags = 1;
        static char extra[512];
        const char *env = getenv("RAVEL_BENCH_CFLAGS");
        snprintf(extra, sizeof extra, "%s", env ? env : "");
        for (char *save, *w = strtok_r(extra, " ", &save); w && nflags < 16;
             w = strtok_r(NULL, " ", &save))
            flags[nflags++] = w;
        JitOptions jo = {.extra_flags = flags, .n_extra_flags = nflags};
        stage = "jit";
        double before = jit_stats().compile_seconds;
        st = jit_compile(c->unit.source, &jo, &c->lib);
        c->compile_seconds = jit_stats().compile_seconds - before;
    }
    if (st != RV_OK) {
        fprintf(stderr, "ravel_kernels: %s: %s failed: %s\n--- source ---\n%s", name, stage,
                rv_last_error(), text);
        goto fail;
    }
    for (int i = 0; i < c->nk; i++) {
        const Kernel *kn = c->ks[i];
        c->fns[i] = (rv_rt_kernel_fn)jit_fn(c->lib, c->unit.kernel_syms[i]);
        if (!c->fns[i] || kn->prelude || c->unit.prelude_syms[i]) {
            fprintf(stderr, "ravel_kernels: %s: kernel %s %s\n", name, c->unit.kernel_syms[i],
                    c->fns[i] ? "has a prelude (unexpected)" : "missing");
            goto fail;
        }
        if (kn->nparams > MAX_PARAMS) {
            fprintf(stderr, "ravel_kernels: %s: %d params\n", name, kn->nparams);
            goto fail;
        }
        for (int p = 0; p < kn->nparams; p++) {
            const Param *pa = &kn->params[p];
            if (pa->kind == PARAM_SIZE) {
                if (strcmp(pa->size->name, "M") != 0) {
                    fprintf(stderr, "ravel_kernels: %s: unexpected size param %s\n", name,
                            pa->size->name);
                    goto fail;
                }
                c->nsizes[i]++;
                continue;
            }
            int r = pa->kind == PARAM_TENSOR && pa->buf->tensor ? role_of(pa->buf->tensor->name)
                                                                : -1;
            if (r < 0) {
                fprintf(stderr,
                        "ravel_kernels: %s: kernel %s has a %s parameter %s (AUX/UF/temporary "
                        "buffers are not supported here)\n",
                        name, c->unit.kernel_syms[i],
                        pa->kind == PARAM_AUX  ? "AUX"
                        : pa->kind == PARAM_UF ? "UF"
                                               : "tensor",
                        pa->buf->name);
                goto fail;
            }
            c->role[i][c->nbufs[i]++] = r;
        }
    }
    if (getenv("RAVEL_BENCH_SHOW"))
        fprintf(stderr, "--- %s ---\n%s\n", name, c->unit.source);
    c->next = g_cache;
    g_cache = c;
    return c;
fail:
    compiled_free(c);
    return NULL;
}

/* ---- the kernel ---- */

typedef struct State {
    Compiled *v[3]; /* by variant (kernel_sources.h) */
    int kind, n, k;
    int forced; /* the variant RAVEL_BENCH_VARIANT names, or -1 */
    int threads;
    Host host;
    struct rv_rt_ctx ctx;
} State;

static void ravel_run(void *state, const RavelKernelArgs *args) {
    State *s = state;
    const Compiled *c = s->v[s->forced >= 0 ? s->forced : rk_variant_for(s->kind, args->m, s->n, s->k)];
    const void *ptr[ROLE_COUNT] = {args->a, args->b, args->bias, args->c};
    int64_t sizes[MAX_PARAMS];
    void *bufs[MAX_PARAMS];
    g_cur_pool = s->threads > 1 ? g_pools[s->threads] : NULL;
    for (int i = 0; i < c->nk; i++) {
        for (int j = 0; j < c->nsizes[i]; j++)
            sizes[j] = args->m;
        for (int j = 0; j < c->nbufs[i]; j++)
            bufs[j] = (void *)ptr[c->role[i][j]];
        c->fns[i](sizes, bufs, &s->ctx);
    }
}

static void ravel_state_free(void *state) {
    free(state); /* the compiled programs and pools live for the process */
}

RavelKernel *ravel_kernel_for(const RavelKernelShape *shape) {
    if (!shape || shape->kind < 0 || shape->kind >= RK_COUNT || shape->threads < 1 ||
        shape->threads > 256)
        return NULL;
    State *s = calloc(1, sizeof *s);
    s->threads = shape->threads;
    int kind = shape->kind, batch = shape->batch, n = shape->n, k = shape->k;
    const char *force = getenv("RAVEL_BENCH_VARIANT");
    int count = rk_variant_count(kind);
    s->kind = kind, s->n = n, s->k = k, s->forced = -1;
    for (int v = 0; force && v < count; v++)
        if (strcmp(force, rk_variant_name(kind, v)) == 0)
            s->forced = v;
    /* compile the variants some M can pick (NT's depends on N alone) */
    bool reachable[3] = {false, false, false};
    for (int m = 1; m <= RK_MAX_M && s->forced < 0; m++)
        reachable[rk_variant_for(kind, m, n, k)] = true;
    if (s->forced >= 0)
        reachable[s->forced] = true;
    char desc[64] = "";
    double compile_seconds = 0;
    for (int v = 0; v < count; v++) {
        if (!reachable[v])
            continue;
        s->v[v] = compile_variant(kind, kind == RK_SGEMM ? 0 : batch, n, k, v);
        if (!s->v[v]) {
            free(s);
            return NULL;
        }
        compile_seconds += s->v[v]->compile_seconds;
        snprintf(desc + strlen(desc), sizeof desc - strlen(desc), "%s%s", *desc ? "|" : "",
                 rk_variant_name(kind, v));
    }
    if (s->threads > 1 && !g_pools[s->threads]) {
        g_pools[s->threads] = tp_new(s->threads);
        if (tp_num_threads(g_pools[s->threads]) != s->threads)
            fprintf(stderr, "ravel_kernels: asked for %d threads, the pool has %d\n", s->threads,
                    tp_num_threads(g_pools[s->threads]));
    }
    s->ctx = (struct rv_rt_ctx){.abi_version = RV_RT_ABI_VERSION,
                                .num_threads = s->threads > 1 ? tp_num_threads(g_pools[s->threads])
                                                              : 1,
                                .parallel_for = s->threads > 1 ? pool_for : serial_for,
                                .alloc = host_alloc,
                                .free = host_free,
                                .host = &s->host};
    RavelKernel *rk = calloc(1, sizeof *rk);
    static char names[RK_COUNT][64];
    snprintf(names[kind], sizeof names[kind], "%s:%s", kind_name(kind), desc);
    rk->name = names[kind];
    rk->compile_seconds = compile_seconds;
    rk->state = s;
    rk->run = ravel_run;
    rk->free = ravel_state_free;
    return rk;
}

void ravel_kernel_free(RavelKernel *k) {
    if (!k)
        return;
    if (k->free)
        k->free(k->state);
    free(k);
}
