/*
 * bench/bench_call.c — the host cost of one whole call of a recursive
 * model from C, as a server pays it per request (issue 13): build the
 * batch's structures from its arrays (rv_structs_add_many), linearize
 * them (rv_linearize), bind the batch over the weights (rv_bindings_reset,
 * rv_bindings_set_linear) and run (rv_program_run). trees_ravel_c times
 * the same call over a pipe, batch by batch; this times it in a loop, for
 * a profiler (perf record -g) and for paired old/new runs of one binary
 * built from each branch.
 *
 *     bench_call [--sst DIR] [--models treernn,...] [--H 256] [--batch 1,10]
 *                [--threads 1] [--min-time S] [--calls N]
 *
 * Models: models/<model>_h<H>.rv under their own (tuned) schedule; H is
 * each model's own list when not given (MV-RNN 64, the others 256). The
 * SST test split's trees, consecutive ones forming a batch. Weights are
 * random (rv_bindings_randomize, x 0.1), bound once. Per model, H and
 * batch one JSON line: the medians of a call's parts (wall), of the
 * whole call's CPU time (the process's) and of its kernels' time
 * (kernel_us: rv_program_stats' kernel_seconds of the call; the run's
 * host work is run_us less that), in microseconds.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ravel.h"
#include "timing.h"

static void die(const char *what) {
    fprintf(stderr, "bench_call: %s: %s\n", what, rv_last_error());
    exit(1);
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return 1e6 * v[n / 2];
}

/* One batch as a request brings it: rv_structs_add_many's arrays, in
 * one block (mem). */
typedef struct Batch {
    int count;
    int32_t *mem, *sizes, *begin, *child, *data;
    int64_t nbegin, nchild, ndata;
} Batch;

/* Batches of `batch` consecutive structures of `all`. */
static Batch *make_batches(const rv_structs *all, int batch, int *nbatches) {
    int nb = rv_structs_count(all) / batch, K = rv_structs_max_children(all);
    Batch *out = calloc((size_t)nb, sizeof *out);
    for (int b = 0; b < nb; b++) {
        Batch *bt = &out[b];
        int32_t total = 0;
        for (int j = 0; j < batch; j++)
            total += rv_structs_size(all, b * batch + j);
        bt->count = batch;
        bt->mem = malloc(sizeof(int32_t) * (size_t)(batch + (total + batch) + total * K + total));
        bt->sizes = bt->mem;
        bt->begin = bt->sizes + batch;
        bt->child = bt->begin + total + batch;
        bt->data = bt->child + total * K;
        for (int j = 0; j < batch; j++) {
            int s = b * batch + j;
            int32_t n = bt->sizes[j] = rv_structs_size(all, s), at = 0;
            for (int32_t i = 0; i < n; i++) {
                const int32_t *ch;
                int nc = rv_structs_children(all, s, i, &ch);
                bt->begin[bt->nbegin++] = at;
                memcpy(bt->child + bt->nchild, ch, sizeof(int32_t) * (size_t)nc);
                bt->nchild += nc, at += nc;
                bt->data[bt->ndata++] = rv_structs_data(all, s, i)[0];
            }
            bt->begin[bt->nbegin++] = at;
        }
    }
    *nbatches = nb;
    return out;
}

static void free_batches(Batch *bt, int n) {
    for (int i = 0; i < n; i++)
        free(bt[i].mem);
    free(bt);
}

static int fixed_calls; /* --calls N: exactly N timed calls (0: --min-time) */

static void bench(const char *model, int H, int batch, int threads, const rv_structs *all,
                  double min_time) {
    char path[256];
    snprintf(path, sizeof path, "models/%s_h%d.rv", model, H);
    rv_module *m = NULL;
    if (rv_module_load(path, &m) != RV_OK)
        die(path);
    rv_compile_options opt = {.threads = threads};
    rv_program *p = NULL;
    if (rv_program_compile(m, &opt, &p) != RV_OK)
        die(path);
    int nb;
    Batch *bt = make_batches(all, batch, &nb);
    rv_structs *bs = rv_structs_new(rv_structs_kind(all), rv_structs_max_children(all), 1);
    rv_linear lin = {0};
    rv_bindings *weights = rv_bindings_new(m), *call = rv_bindings_new(m);
    /* the weights: random, over the first batch's sizes, then kept alone */
    if (rv_structs_add_many(bs, bt[0].count, bt[0].sizes, bt[0].begin, bt[0].nbegin, bt[0].child,
                            bt[0].nchild, bt[0].data, bt[0].ndata) != RV_OK ||
        rv_linearize(bs, &lin) != RV_OK || rv_bindings_set_linear(call, "T", &lin) != RV_OK ||
        rv_bindings_randomize(call, 1) != RV_OK)
        die("weights");
    int nt = rv_module_num_tensors(m), nw = 0;
    rv_array **ws = calloc((size_t)nt, sizeof *ws); /* borrowed by `weights` */
    for (int t = 0; t < nt; t++) {
        rv_tensor *x = rv_module_tensor_at(m, t);
        if (!rv_tensor_is_input(x))
            continue;
        const rv_array *a = rv_bindings_get_array(call, rv_tensor_name(x));
        rv_array *w = ws[nw++] = rv_array_new(rv_array_dtype(a), rv_array_ndim(a), rv_array_shape(a));
        const float *s = rv_array_cdata(a);
        float *d = rv_array_data(w);
        for (int64_t i = 0; i < rv_array_numel(a); i++)
            d[i] = 0.1f * s[i];
        if (rv_bindings_set_array(weights, rv_tensor_name(x), w) != RV_OK)
            die("weights");
    }
    int cap = 200000, n = 0, next = 0;
    double *t[6]; /* build, linearize, bind, run, CPU, kernels */
    for (int k = 0; k < 6; k++)
        t[k] = malloc(sizeof(double) * (size_t)cap);
    double start = bench_now();
    for (int warm = 3 * nb;
         n < cap && (warm > 0 || (fixed_calls ? n < fixed_calls
                                               : n < 10 || bench_now() - start < min_time));) {
        const Batch *b = &bt[next];
        next = (next + 1) % nb;
        double c0 = cpu_now(), t0 = bench_now();
        rv_structs_clear(bs);
        if (rv_structs_add_many(bs, b->count, b->sizes, b->begin, b->nbegin, b->child, b->nchild,
                                b->data, b->ndata) != RV_OK)
            die("rv_structs_add_many");
        double t1 = bench_now();
        if (rv_linearize(bs, &lin) != RV_OK)
            die("rv_linearize");
        double t2 = bench_now();
        if (rv_bindings_reset(call, weights) != RV_OK ||
            rv_bindings_set_linear(call, "T", &lin) != RV_OK)
            die("bind");
        double t3 = bench_now();
        rv_program_counters k0, k1;
        rv_program_stats(p, &k0);
        if (rv_program_run(p, call) != RV_OK)
            die("rv_program_run");
        double t4 = bench_now(), c1 = cpu_now();
        rv_program_stats(p, &k1);
        if (warm > 0) {
            if (--warm == 0)
                start = bench_now();
            continue;
        }
        t[0][n] = t1 - t0, t[1][n] = t2 - t1, t[2][n] = t3 - t2, t[3][n] = t4 - t3;
        t[5][n] = k1.kernel_seconds - k0.kernel_seconds;
        t[4][n++] = c1 - c0;
    }
    double kernel = median(t[5], n);
    double build = median(t[0], n), linz = median(t[1], n), bind = median(t[2], n),
           run = median(t[3], n), cpu = median(t[4], n);
    printf("{\"bench\": \"call\", \"config\": {\"model\": \"%s\", \"H\": %d, \"batch\": %d, "
           "\"threads\": %d}, \"build_us\": %.2f, \"linearize_us\": %.2f, \"bind_us\": %.2f, "
           "\"run_us\": %.2f, \"kernel_us\": %.2f, \"cpu_median_us\": %.2f, \"runs\": %d}\n",
           model, H, batch, threads, build, linz, bind, run, kernel, cpu, n);
    fflush(stdout);
    for (int k = 0; k < 6; k++)
        free(t[k]);
    rv_bindings_free(call);
    rv_bindings_free(weights);
    for (int k = 0; k < nw; k++)
        rv_array_free(ws[k]);
    free(ws);
    rv_linear_free(&lin);
    rv_structs_free(bs);
    free_batches(bt, nb);
    rv_program_free(p);
    rv_module_free(m);
}

int main(int argc, char **argv) {
    const char *sst = getenv("RAVEL_SST_DIR"), *models = "treernn,treelstm,mvrnn",
               *batches = "1,10";
    int H = 0, threads = 1;
    double min_time = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sst") && i + 1 < argc)
            sst = argv[++i];
        else if (!strcmp(argv[i], "--models") && i + 1 < argc)
            models = argv[++i];
        else if (!strcmp(argv[i], "--H") && i + 1 < argc)
            H = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batches = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            fixed_calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc)
            min_time = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_call [--sst DIR] [--models a,b] [--H N] "
                            "[--batch 1,10] [--threads T] [--min-time S] [--calls N]\n");
            return 2;
        }
    }
    if (!sst)
        sst = "../shared/data/sst";
    rv_structs *all = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    if (rv_structs_read_sst(all, sst, RV_SST_TEST) != RV_OK)
        die(sst);
    char *ms = strdup(models), *save = NULL;
    for (char *model = strtok_r(ms, ",", &save); model; model = strtok_r(NULL, ",", &save)) {
        int h = H ? H : !strcmp(model, "mvrnn") ? 64 : 256;
        char *bl = strdup(batches), *s2 = NULL;
        for (char *b = strtok_r(bl, ",", &s2); b; b = strtok_r(NULL, ",", &s2))
            bench(model, h, atoi(b), threads, all, min_time);
        free(bl);
    }
    free(ms);
    rv_structs_free(all);
    return 0;
}
