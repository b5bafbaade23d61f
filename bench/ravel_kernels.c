/*
 * bench/ravel_kernels.c — ravel's kernels for the benchmark drivers,
 * through ravel's public API only (ravel.h).
 *
 * For each request, the .rv programs of the workload (kernel_sources.c:
 * the definition with M symbolic, N, K and the batch literal, and one
 * schedule per variant) become one program, compiled once, outside the
 * timed region: rv_program_compile_variants with every variant some M can
 * pick (the schedule blocks of each variant's text) and a dispatch,
 * rk_dispatch, which the program calls on every run to pick the variant
 * for that run's M (kernel_sources.h: the rule per T). The timed run() is
 * rv_program_run_into: the program checks the sizes and arrays (the
 * interpreter's checks), picks the variant, and its kernels compute Y
 * straight into the caller's buffer; X, W and bias are the caller's
 * buffers too (row-major float32, 64-byte aligned by bench_alloc, so
 * rv_array_from_dlpack borrows them), wrapped again only when a pointer
 * or M changes. No copy, and no allocation but the kernels' scratch.
 *
 * Threads: threads == 1 compiles a serial program (every chunk on the
 * caller); threads > 1 runs on ravel's thread pool, whose size is
 * RAVEL_NUM_THREADS or the machine's cores (a mismatch is reported).
 *
 * A program that fails to compile makes ravel_kernel_for print
 * rv_last_error() and answer NULL: never a fake. RAVEL_BENCH_VARIANT=NAME
 * (stream, packed, dot, bcast6x64, ...) compiles only the variant of that
 * name where the kind has one (to verify each on the drivers' small
 * shapes); RAVEL_BENCH_SHOW prints the generated C; RAVEL_BENCH_CFLAGS
 * adds C compiler flags.
 */
#include "ravel_kernels.h"

#include "kernel_sources.h"

#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ravel.h"

#define MAX_VARIANTS 3

/* One compiled program: the module its variants were parsed from (it
 * outlives the program), the program and its dispatch. */
typedef struct Compiled {
    int kind, batch, n, k, forced, serial;
    const char *size; /* the size variable bound per run: M, or T = M / size_div */
    int size_div;
    bool wrapped;     /* ravel_kernel_wrap's: m and p are the caller's, c the kernel's */
    rv_module *m;
    rv_program *p;
    RkDispatch dispatch;
    char desc[64]; /* the variants, "stream|kblock|packed" */
    double compile_seconds; /* the C compiler's time (0: a JIT cache hit) */
    struct Compiled *next;
} Compiled;

static Compiled *g_cache; /* process lifetime */

static const char *kind_name(int kind) {
    static const char *const names[RK_COUNT] = {"dense", "dense_bias_gelu", "bmm_nt", "bmm_nn",
                                                "sgemm"};
    return kind >= 0 && kind < RK_COUNT ? names[kind] : "?";
}

/* ---- compile ---- */

/* The schedule blocks of a program's text: everything from its first
 * `schedule` block on (kernel_sources.c writes definitions first). */
static const char *schedule_part(const char *text) {
    const char *s = strstr(text, "\nschedule ");
    return s ? s + 1 : "";
}

/* The program of variants `reachable` of one shape: the definitions and
 * variant 0's schedule parsed into the module, each variant's schedule
 * blocks given to rv_program_compile_variants. */
static Compiled *compile_program(int kind, int batch, int n, int k, int forced, int serial,
                                 const bool *reachable) {
    for (Compiled *c = g_cache; c; c = c->next)
        if (c->kind == kind && c->batch == batch && c->n == n && c->k == k &&
            c->forced == forced && c->serial == serial)
            return c;
    static char text[MAX_VARIANTS][16384];
    const char *scheds[MAX_VARIANTS];
    Compiled *c = calloc(1, sizeof *c);
    c->kind = kind, c->batch = batch, c->n = n, c->k = k, c->forced = forced, c->serial = serial;
    c->size = "M", c->size_div = 1;
    c->dispatch = (RkDispatch){.kind = kind, .n = n, .k = k, .program_variant = {-1, -1, -1}};
    int nv = 0;
    for (int v = 0; v < rk_variant_count(kind); v++) {
        if (!reachable[v])
            continue;
        if (!rk_source(kind, batch, n, k, v, text[nv], sizeof text[nv])) {
            fprintf(stderr, "ravel_kernels: no source for %s (n %d, k %d, variant %d)\n",
                    kind_name(kind), n, k, v);
            free(c);
            return NULL;
        }
        scheds[nv] = schedule_part(text[nv]);
        c->dispatch.program_variant[v] = nv++;
        snprintf(c->desc + strlen(c->desc), sizeof c->desc - strlen(c->desc), "%s%s",
                 *c->desc ? "|" : "", rk_variant_name(kind, v));
    }
    char name[96];
    snprintf(name, sizeof name, "%s_b%d_n%d_k%d.rv", kind_name(kind), batch, n, k);
    rv_compile_options opt = {.serial = serial, .cflags = getenv("RAVEL_BENCH_CFLAGS")};
    rv_dispatch d = {.fn = rk_dispatch, .user = &c->dispatch};
    rv_status st = rv_module_parse(name, text[0], &c->m);
    if (st == RV_OK)
        st = rv_program_compile_variants(c->m, nv, scheds, forced >= 0 ? NULL : &d, &opt, &c->p);
    if (st != RV_OK) {
        fprintf(stderr, "ravel_kernels: %s (%s): %s\n--- source of the first ---\n%s", name,
                c->desc, rv_last_error(), text[0]);
        rv_module_free(c->m);
        free(c);
        return NULL;
    }
    rv_program_counters pc;
    rv_program_stats(c->p, &pc);
    c->compile_seconds = pc.cc_seconds;
    if (getenv("RAVEL_BENCH_SHOW"))
        fprintf(stderr, "--- %s ---\n%s\n", name, rv_program_source(c->p));
    c->next = g_cache;
    g_cache = c;
    return c;
}

/* ---- the caller's buffers as arrays ---- */

/* A DLPack tensor over the caller's float32 buffer: rv_array_from_dlpack
 * borrows aligned data, and its deleter frees only this wrapper. */
typedef struct Wrap {
    DLManagedTensor mt;
    int64_t shape[3];
} Wrap;

static void wrap_delete(DLManagedTensor *mt) {
    free(mt->manager_ctx);
}

static rv_array *wrap(const float *data, int ndim, const int64_t *shape) {
    Wrap *w = calloc(1, sizeof *w);
    memcpy(w->shape, shape, sizeof(int64_t) * (size_t)ndim);
    w->mt.dl_tensor = (DLTensor){.data = (void *)data,
                                 .device = {kDLCPU, 0},
                                 .ndim = ndim,
                                 .dtype = {kDLFloat, 32, 1},
                                 .shape = w->shape};
    w->mt.manager_ctx = w;
    w->mt.deleter = wrap_delete;
    rv_array *a = NULL;
    if (rv_array_from_dlpack(&w->mt, &a) != RV_OK) {
        free(w);
        return NULL;
    }
    return a;
}

enum { ROLE_X, ROLE_W, ROLE_BIAS, ROLE_Y, ROLE_COUNT };

/* Each buffer's shape (ravel_kernels.h): batched kinds have the batch
 * first; W is [N, K] for dense and NT, [K, N] for NN and SGEMM. */
static int role_shape(int kind, int role, int batch, int m, int n, int k, int64_t *shape) {
    int nd = 0;
    if (batch && role != ROLE_BIAS)
        shape[nd++] = batch;
    bool wt = kind == RK_DENSE || kind == RK_DENSE_BIAS_GELU || kind == RK_BMM_NT;
    int64_t dims[ROLE_COUNT][2] = {{m, k}, {wt ? n : k, wt ? k : n}, {n, 0}, {m, n}};
    shape[nd++] = dims[role][0];
    if (role != ROLE_BIAS)
        shape[nd++] = dims[role][1];
    return nd;
}

/* ---- the kernel ---- */

typedef struct State {
    Compiled *c;
    rv_bindings *b;
    const void *ptr[ROLE_COUNT]; /* what the arrays wrap */
    int m;
    rv_array *arr[ROLE_COUNT];
} State;

static void release_arrays(State *s) {
    for (int r = 0; r < ROLE_COUNT; r++) {
        rv_array_free(s->arr[r]);
        s->arr[r] = NULL;
        s->ptr[r] = NULL;
    }
}

/* The arrays of this call's buffers, bound (again only when a buffer or
 * M changed). false with a message when one cannot be wrapped. */
static bool bind(State *s, const RavelKernelArgs *args) {
    const void *ptr[ROLE_COUNT] = {args->a, args->b, args->bias, args->c};
    const char *name[ROLE_COUNT] = {"X", "W", "bias", "Y"};
    if (s->m == args->m && !memcmp(ptr, s->ptr, sizeof ptr))
        return true;
    release_arrays(s);
    const Compiled *c = s->c;
    for (int r = 0; r < ROLE_COUNT; r++) {
        if (!ptr[r])
            continue;
        int64_t shape[3];
        int nd = role_shape(c->kind, r, c->batch, args->m, args->n, args->k, shape);
        if (!(s->arr[r] = wrap(ptr[r], nd, shape)) ||
            (r != ROLE_Y && rv_bindings_set_array(s->b, name[r], s->arr[r]) != RV_OK)) {
            fprintf(stderr, "ravel_kernels: %s: %s\n", name[r], rv_last_error());
            release_arrays(s);
            return false;
        }
        s->ptr[r] = ptr[r];
    }
    s->m = args->m;
    return rv_bindings_set_size(s->b, c->size, args->m / c->size_div) == RV_OK;
}

static void ravel_run(void *state, const RavelKernelArgs *args) {
    State *s = state;
    if (!bind(s, args) ||
        rv_program_run_into(s->c->p, s->b, &s->arr[ROLE_Y], 1) != RV_OK)
        fprintf(stderr, "ravel_kernels: run: %s\n", rv_last_error());
}

static void ravel_state_free(void *state) {
    State *s = state;
    release_arrays(s);
    rv_bindings_free(s->b);
    if (s->c->wrapped)
        free(s->c);
    free(s); /* the compiled programs live for the process */
}

/* The threads ravel's pool runs parallel loops on (src/runtime/threadpool.c). */
static int pool_threads(void) {
    const char *env = getenv("RAVEL_NUM_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

RavelKernel *ravel_kernel_for(const RavelKernelShape *shape) {
    if (!shape || shape->kind < 0 || shape->kind >= RK_COUNT || shape->threads < 1 ||
        shape->threads > 256)
        return NULL;
    int kind = shape->kind, batch = kind == RK_SGEMM ? 0 : shape->batch, n = shape->n,
        k = shape->k;
    const char *force = getenv("RAVEL_BENCH_VARIANT");
    int count = rk_variant_count(kind), forced = -1;
    for (int v = 0; force && v < count; v++)
        if (strcmp(force, rk_variant_name(kind, v)) == 0)
            forced = v;
    /* compile the variants some M can pick (NT's depends on N alone) */
    bool reachable[MAX_VARIANTS] = {false, false, false};
    for (int m = 1; m <= RK_MAX_M && forced < 0; m++)
        reachable[rk_variant_rule(kind, m, n, k)] = true;
    if (forced >= 0)
        reachable[forced] = true;
    if (shape->threads > 1 && pool_threads() != shape->threads)
        fprintf(stderr, "ravel_kernels: asked for %d threads, ravel's pool has %d "
                        "(RAVEL_NUM_THREADS)\n",
                shape->threads, pool_threads());
    Compiled *c = compile_program(kind, batch, n, k, forced, shape->threads == 1, reachable);
    if (!c)
        return NULL;
    State *s = calloc(1, sizeof *s);
    s->c = c;
    s->b = rv_bindings_new(c->m);
    RavelKernel *rk = calloc(1, sizeof *rk);
    static char names[RK_COUNT][96];
    snprintf(names[kind], sizeof names[kind], "%s:%s", kind_name(kind), c->desc);
    rk->name = names[kind];
    rk->compile_seconds = c->compile_seconds;
    rk->state = s;
    rk->run = ravel_run;
    rk->free = ravel_state_free;
    return rk;
}

RavelKernel *ravel_kernel_wrap(rv_module *m, rv_program *p, const RavelKernelShape *shape,
                               const char *size, int size_div, const char *name) {
    Compiled *c = calloc(1, sizeof *c);
    c->kind = shape->kind, c->batch = shape->kind == RK_SGEMM ? 0 : shape->batch;
    c->n = shape->n, c->k = shape->k, c->forced = -1, c->serial = shape->threads == 1;
    c->size = size, c->size_div = size_div > 0 ? size_div : 1, c->wrapped = true;
    c->m = m, c->p = p;
    rv_program_counters pc;
    rv_program_stats(p, &pc);
    c->compile_seconds = pc.cc_seconds;
    State *s = calloc(1, sizeof *s);
    s->c = c;
    s->b = rv_bindings_new(m);
    RavelKernel *rk = calloc(1, sizeof *rk);
    rk->name = name;
    rk->compile_seconds = c->compile_seconds;
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
