/*
 * bench/bench_vgemm.c — variable-size batched GEMM (CoRa's vgemm): a batch
 * of G products C_g[M_g, N_g] = A_g[M_g, K_g] · B_g[K_g, N_g] with
 * per-problem sizes, the first G shapes of a CoRa shape file (one `M N K`
 * per line, ../shared/data/vbatch_gemm/: data_small.txt, sizes 64..384,
 * the default; data.txt, 512..1408).
 *
 * ravel runs bench/ragged/vgemm.rv (M, N, K are UFs; A, B and C ragged,
 * the problems' matrices back to back): rv_program_run as a user calls it,
 * preludes and the runtime's checks included. Baselines, one JSON line
 * each per batch size and thread count:
 *   openblas_padded  every problem padded to the largest M, N, K of the
 *                    batch, one cblas_sgemm per problem (the padded copies
 *                    are made outside the timed region, as a framework
 *                    storing padded tensors has them)
 *   onednn_padded    the same padded batch as one 3-D oneDNN matmul
 *   openblas_loop    cblas_sgemm per problem on the unpadded matrices
 * "gflops" counts useful work only (Σ 2·M·N·K).
 *
 *   bench_vgemm [--T 8,32,128] [--data FILE] [--threads 1,2] [--verify]
 *
 * --T lists the batch sizes G; the shape file is --data, else
 * $RAVEL_VGEMM_DATA, else ../shared/data/vbatch_gemm/data_small.txt; the
 * program is $RAVEL_VGEMM_PROGRAM, else bench/ragged/vgemm.rv (run from
 * the repository root).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baselines.h"
#include "common.h"
#include "ravel.h"

#define DEFAULT_T "8,32,128"
#define DEFAULT_DATA "../shared/data/vbatch_gemm/data_small.txt"
#define MAX_G 512

typedef struct {
    int g, m[MAX_G], n[MAX_G], k[MAX_G];
    int mmax, nmax, kmax;
    size_t a_at[MAX_G + 1], b_at[MAX_G + 1], c_at[MAX_G + 1]; /* packed offsets */
} Shapes;

static void read_shapes(const char *path, int g, Shapes *s) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_vgemm: cannot open %s (--data FILE)\n", path);
        exit(1);
    }
    memset(s, 0, sizeof *s);
    s->g = g;
    for (int i = 0; i < g; i++) {
        if (fscanf(f, "%d %d %d", &s->m[i], &s->n[i], &s->k[i]) != 3) {
            fprintf(stderr, "bench_vgemm: %s has fewer than %d shapes\n", path, g);
            exit(1);
        }
        s->mmax = s->m[i] > s->mmax ? s->m[i] : s->mmax;
        s->nmax = s->n[i] > s->nmax ? s->n[i] : s->nmax;
        s->kmax = s->k[i] > s->kmax ? s->k[i] : s->kmax;
        s->a_at[i + 1] = s->a_at[i] + (size_t)s->m[i] * s->k[i];
        s->b_at[i + 1] = s->b_at[i] + (size_t)s->k[i] * s->n[i];
        s->c_at[i + 1] = s->c_at[i] + (size_t)s->m[i] * s->n[i];
    }
    fclose(f);
}

/* ---- ravel ---- */

typedef struct {
    rv_module *m;
    rv_program *p;
    rv_bindings *b;
    rv_array *in[5]; /* M, N, K, A, Bm: borrowed by the bindings */
    rv_array *c;     /* the output, written in place */
} Ravel;

static rv_array *wrap(rv_dtype t, int64_t n, void *data) {
    rv_array *a;
    if (rv_array_wrap(t, 1, &n, data, &a) != RV_OK) {
        fprintf(stderr, "bench_vgemm: %s\n", rv_last_error());
        exit(1);
    }
    return a;
}

static void ravel_setup(Ravel *r, const Shapes *s, int threads, int64_t *ufs, float *a, float *b,
                        float *c) {
    const char *path = getenv("RAVEL_VGEMM_PROGRAM");
    path = path ? path : "bench/ragged/vgemm.rv";
    rv_compile_options opt = {.serial = threads == 1, .threads = threads};
    if (rv_module_load(path, &r->m) != RV_OK || rv_program_compile(r->m, &opt, &r->p) != RV_OK) {
        fprintf(stderr, "bench_vgemm: %s\n", rv_last_error());
        exit(1);
    }
    r->b = rv_bindings_new(r->m);
    const char *names[3] = {"M", "N", "K"};
    const int *v[3] = {s->m, s->n, s->k};
    rv_status st = rv_bindings_set_size(r->b, "G", s->g);
    for (int u = 0; u < 3; u++) {
        for (int i = 0; i < s->g; i++)
            ufs[u * MAX_G + i] = v[u][i];
        r->in[u] = wrap(RV_I64, s->g, ufs + u * MAX_G);
        st = st != RV_OK ? st : rv_bindings_set_array(r->b, names[u], r->in[u]);
    }
    r->in[3] = wrap(RV_F32, (int64_t)s->a_at[s->g], a);
    r->in[4] = wrap(RV_F32, (int64_t)s->b_at[s->g], b);
    st = st != RV_OK ? st : rv_bindings_set_array(r->b, "A", r->in[3]);
    st = st != RV_OK ? st : rv_bindings_set_array(r->b, "Bm", r->in[4]);
    r->c = wrap(RV_F32, (int64_t)s->c_at[s->g], c);
    if (st != RV_OK) {
        fprintf(stderr, "bench_vgemm: %s\n", rv_last_error());
        exit(1);
    }
}

static void ravel_run(void *ctx) {
    Ravel *r = ctx;
    if (rv_program_run_into(r->p, r->b, &r->c, 1) != RV_OK) {
        fprintf(stderr, "bench_vgemm: %s\n", rv_last_error());
        exit(1);
    }
}

static void ravel_free(Ravel *r) {
    rv_bindings_free(r->b);
    rv_array_free(r->c);
    for (int i = 0; i < 5; i++)
        rv_array_free(r->in[i]);
    rv_program_free(r->p);
    rv_module_free(r->m);
}

/* ---- baselines ---- */

enum { BASE_OPENBLAS_PADDED, BASE_ONEDNN_PADDED, BASE_OPENBLAS_LOOP, BASE_COUNT };
static const char *const base_names[BASE_COUNT] = {"openblas_padded", "onednn_padded",
                                                   "openblas_loop"};

typedef struct {
    const Shapes *s;
    const float *a, *b; /* packed */
    float *c;
    const float *ap, *bp; /* padded [G, mmax, kmax], [G, kmax, nmax] */
    float *cp;
    BlDnnl *dnnl;
} Base;

static void run_openblas_loop(void *ctx) {
    Base *x = ctx;
    const Shapes *s = x->s;
    for (int i = 0; i < s->g; i++)
        bl_openblas_sgemm(s->m[i], s->n[i], s->k[i], x->a + s->a_at[i], x->b + s->b_at[i],
                          x->c + s->c_at[i]);
}

static void run_openblas_padded(void *ctx) {
    Base *x = ctx;
    bl_openblas_batch(x->s->g, x->s->mmax, x->s->nmax, x->s->kmax, 0, x->ap, x->bp, x->cp);
}

static void run_onednn_padded(void *ctx) {
    bl_dnnl_run(((Base *)ctx)->dnnl);
}

/* The padded copies of the packed problems (zeros around each). */
static void pad_batch(const Shapes *s, const float *a, const float *b, float *ap, float *bp) {
    for (int i = 0; i < s->g; i++) {
        for (int r = 0; r < s->m[i]; r++)
            memcpy(ap + ((size_t)i * s->mmax + r) * s->kmax, a + s->a_at[i] + (size_t)r * s->k[i],
                   sizeof(float) * (size_t)s->k[i]);
        for (int r = 0; r < s->k[i]; r++)
            memcpy(bp + ((size_t)i * s->kmax + r) * s->nmax, b + s->b_at[i] + (size_t)r * s->n[i],
                   sizeof(float) * (size_t)s->n[i]);
    }
}

/* ravel and the OpenBLAS loop against a naive loop, per problem. */
static int verify(const BenchArgs *args) {
    Shapes *s = calloc(1, sizeof *s);
    /* small problems, sizes 0 and 1 included */
    static const int small[6][3] = {{3, 5, 2},  {0, 4, 3}, {1, 1, 1},
                                    {7, 33, 9}, {4, 0, 5}, {2, 17, 0}};
    s->g = 6;
    for (int i = 0; i < 6; i++) {
        s->m[i] = small[i][0], s->n[i] = small[i][1], s->k[i] = small[i][2];
        s->a_at[i + 1] = s->a_at[i] + (size_t)s->m[i] * s->k[i];
        s->b_at[i + 1] = s->b_at[i] + (size_t)s->k[i] * s->n[i];
        s->c_at[i + 1] = s->c_at[i] + (size_t)s->m[i] * s->n[i];
    }
    float *a = bench_alloc(s->a_at[6] + 1), *b = bench_alloc(s->b_at[6] + 1);
    float *c = bench_alloc(s->c_at[6] + 1);
    double *ref = calloc(s->c_at[6] + 1, sizeof(double)),
           *absref = calloc(s->c_at[6] + 1, sizeof(double));
    bench_fill(a, s->a_at[6], 4), bench_fill(b, s->b_at[6], 5);
    for (int i = 0; i < 6; i++)
        bench_ref(0, s->m[i], s->n[i], s->k[i], 0, a + s->a_at[i], b + s->b_at[i], NULL, 0,
                  ref + s->c_at[i], absref + s->c_at[i]);
    int ok = 1;
    int64_t *ufs = aligned_alloc(64, sizeof(int64_t) * 3 * MAX_G);
    for (int ti = 0; ti < args->nthreads; ti++) {
        char what[64];
        bl_set_threads(args->threads[ti]);
        Ravel r;
        ravel_setup(&r, s, args->threads[ti], ufs, a, b, c);
        memset(c, 0xff, sizeof(float) * s->c_at[6]);
        ravel_run(&r);
        snprintf(what, sizeof what, "vgemm ravel t%d", args->threads[ti]);
        ok &= bench_check(what, s->c_at[6], c, ref, absref);
        ravel_free(&r);
        Base x = {.s = s, .a = a, .b = b, .c = c};
        memset(c, 0xff, sizeof(float) * s->c_at[6]);
        run_openblas_loop(&x);
        snprintf(what, sizeof what, "vgemm openblas_loop t%d", args->threads[ti]);
        ok &= bench_check(what, s->c_at[6], c, ref, absref);
    }
    free(a), free(b), free(c), free(ref), free(absref), free(s), free(ufs);
    return ok;
}

int main(int argc, char **argv) {
    bl_init(argc, argv);
    BenchArgs args;
    bench_parse_args(argc, argv, DEFAULT_T, "--data", &args);
    const char *data = args.extra ? args.extra : getenv("RAVEL_VGEMM_DATA");
    data = data ? data : DEFAULT_DATA;
    if (args.verify)
        return verify(&args) ? 0 : 1;
    if (args.quick)
        args.nt = bench_parse_list("8", args.t);
    fprintf(stderr, "bench_vgemm: %s\n", bl_describe());
    Shapes *s = malloc(sizeof *s);
    int64_t *ufs = aligned_alloc(64, sizeof(int64_t) * 3 * MAX_G);
    for (int i = 0; i < args.nt; i++) {
        int g = args.t[i] < MAX_G ? args.t[i] : MAX_G;
        read_shapes(data, g, s);
        size_t na = (size_t)g * s->mmax * s->kmax, nb = (size_t)g * s->kmax * s->nmax;
        size_t nc = (size_t)g * s->mmax * s->nmax;
        float *a = bench_alloc(s->a_at[g]), *b = bench_alloc(s->b_at[g]);
        float *c_rv = bench_alloc(s->c_at[g]), *c_bl = bench_alloc(s->c_at[g]);
        float *ap = bench_alloc(na), *bp = bench_alloc(nb), *cp = bench_alloc(nc);
        bench_fill(a, s->a_at[g], 4), bench_fill(b, s->b_at[g], 5);
        pad_batch(s, a, b, ap, bp);
        double flops = 0, padded = 2.0 * s->mmax * s->nmax * s->kmax * g;
        for (int p = 0; p < g; p++)
            flops += 2.0 * s->m[p] * s->n[p] * s->k[p];
        for (int ti = 0; ti < args.nthreads; ti++) {
            int threads = args.threads[ti];
            bl_set_threads(threads);
            Ravel r;
            ravel_setup(&r, s, threads, ufs, a, b, c_rv);
            Base x = {.s = s, .a = a, .b = b, .c = c_bl, .ap = ap, .bp = bp, .cp = cp};
            Base xs[BASE_COUNT] = {x, x, x};
            BlDnnlSpec spec = {.batch = g, .m = s->mmax, .n = s->nmax, .k = s->kmax};
            if (bench_want(&args, base_names[BASE_ONEDNN_PADDED]))
                xs[BASE_ONEDNN_PADDED].dnnl = bl_dnnl_new(&spec, ap, bp, NULL, cp);
            BenchSide sides[1 + BASE_COUNT] = {{.fn = ravel_run, .ctx = &r}};
            BenchFn fns[BASE_COUNT] = {run_openblas_padded, run_onednn_padded, run_openblas_loop};
            for (int base = 0; base < BASE_COUNT; base++)
                if (bench_want(&args, base_names[base]))
                    sides[1 + base] = (BenchSide){.fn = fns[base], .ctx = &xs[base]};
            bench_sides(&args.timing, sides, 1 + BASE_COUNT);
            rv_program_counters pc;
            rv_program_stats(r.p, &pc);
            char cfg[320];
            snprintf(cfg, sizeof cfg,
                     "{\"G\": %d, \"data\": \"%s\", \"Mmax\": %d, \"Nmax\": %d, \"Kmax\": %d, "
                     "\"padded_flop_ratio\": %.3f, \"prelude_ms\": %.4f, \"threads\": %d}",
                     g, strrchr(data, '/') ? strrchr(data, '/') + 1 : data, s->mmax, s->nmax,
                     s->kmax, padded / flops, pc.runs ? 1e3 * pc.prelude_seconds / pc.runs : 0.0,
                     threads);
            for (int base = 0; base < BASE_COUNT; base++)
                if (sides[1 + base].stats.runs)
                    bench_print_line("vgemm", cfg, base_names[base], flops, &sides[0].stats,
                                     &sides[1 + base].stats, pc.cc_seconds);
            bl_dnnl_free(xs[BASE_ONEDNN_PADDED].dnnl);
            ravel_free(&r);
        }
        free(a), free(b), free(c_rv), free(c_bl), free(ap), free(bp), free(cp);
    }
    free(ufs);
    free(s);
    return 0;
}
