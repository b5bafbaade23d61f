/*
 * bench/bench_trees.c — the recursive models (models/<model>_h<H>.rv) on the Cortex
 * workloads, ravel alone: how much each level of scheduling buys.
 *
 *     bench_trees [--sst DIR] [--models a,b,...] [--threads 1,2] [--batch 1,10]
 *                 [--variants default,dynamic,tuned] [--min-time S] [--quick]
 *                 [--records FILE]
 *
 * The SST directory: --sst, else $RAVEL_SST_DIR, else ../shared/data/sst.
 * Workloads (bench/trees/MODELS.md): the SST test split's trees (TreeRNN,
 * TreeGRU, TreeLSTM, MV-RNN), their words as sequences (LSTM, GRU),
 * perfect binary trees of height 7 (TreeFC) and 10x10 grid DAGs
 * (DAG-RNN); consecutive structures form a batch of 1 or 10.
 *
 * Every model at both hidden sizes, compiled three ways from its file:
 *   default  the file's schedule blocks left out: one node at a time;
 *   dynamic  plus `schedule R { dynamic_batch() specialize() }` only:
 *            level by level, the leaves apart, every nest as written;
 *   unrolled (asked for with --variants; not for DAG-RNN) dynamic's
 *            schedule plus unroll_recursion(): a node computed with its
 *            internal children in one iteration (docs/recursion.md,
 *            "Recursive unrolling"), every nest as written;
 *   tuned    the file's own schedule (models/gen.py: register-tiled
 *            products over tiles of nodes, packed weights, parallel
 *            output columns);
 *   autotuned
 *            what `ravel tune models/<model>_h<H>.rv --records FILE`
 *            found for the per-level product (--records FILE, at the
 *            run's thread count; docs/tuning.md, "What is tunable"): its
 *            variants in place of that product's schedule, the rest of
 *            the file's, dispatched per call on N / _T_nbatch;
 *   cuda_launch, cuda_persistent
 *            on the GPU (--target cuda), the two ways of separating the
 *            levels (docs/recursion.md, "CUDA"): `schedule R {
 *            dynamic_batch() specialize() gpu_batches("launch") }` (a
 *            launch per level, the level loop on the host) or
 *            gpu_batches("persistent") (one cooperative kernel, a grid
 *            barrier per level); every computed tensor (members too) its
 *            first loop over blocks (a node per block), its last one in
 *            blocks of 128 threads (gpu_schedule below). Not run with 2
 *            threads (the host runs no kernel). Their JSON adds
 *            "kernel_us": the mean time of a call's launches until the GPU
 *            is done, without the copies to and from the device that
 *            every call makes today (the weights included).
 * Without the SST files (a machine without ../shared), the tree models
 * run on SST-like random binary trees (5 to 45 words, as most SST
 * sentences), workload "sst_like_random".
 * A call is what a server pays per request once the structures are
 * linearized: binding the batch's arrays (rv_bindings_set_linear) and
 * running the program; each call takes the next batch in turn, so the
 * median is that of a typical batch. The linearization (rv_linearize of a
 * built batch) is timed apart, once per workload and batch size.
 * The weights are random, scaled as a trained model's (x 0.1).
 *
 * One JSON line per model, size, batch, threads and variant:
 *   {"bench": "trees", "config": {"model": "treelstm", "H": 512, "batch": 10,
 *    "threads": 2, "variant": "tuned", "workload": "sst_test"},
 *    "median_us": ..., "mean_us": ..., "min_us": ..., "runs": ...,
 *    "mflop_per_call": ..., "gflops": ..., "linearize_us": ...,
 *    "linearize_frac": ..., "compile_s": ..., "cpu_median_us": ...}
 * gflops is the model's useful work (its matrix products, counted from
 * each batch's nodes: MODELS.md's equations) over the mean time of a call;
 * linearize_frac the linearization's share of a call that linearizes its
 * batch first (linearize_us over linearize_us + median_us);
 * cpu_median_us the median CPU time of a call, all threads' together (with
 * one thread, the call's work without the waits for a core that other
 * jobs on a shared machine cause).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ravel.h"
#include "tune/tune.h"
#include "timing.h"

static void die(const char *what) {
    fprintf(stderr, "bench_trees: %s: %s\n", what, rv_last_error());
    exit(1);
}

static const char *const MODELS[] = {"treefc", "treernn", "treegru", "treelstm",
                                     "mvrnn",  "dagrnn",  "lstm",    "gru"};
enum { NMODELS = 8 };

/* The useful FLOPs of one call of `model` on batch lin (MODELS.md): I
 * internal nodes, L leaves, N nodes, B structures. Elementwise work is
 * left out (the products dominate at these sizes). */
static double model_flops(const char *model, int H, const rv_linear *lin) {
    double N = lin->num_nodes, L = N - lin->first_leaf, I = lin->first_leaf,
           B = lin->num_structs, h2 = 2.0 * H * H;
    if (!strcmp(model, "treefc"))
        return I * 2 * h2;
    if (!strcmp(model, "treernn"))
        return I * 2.0 * H;
    if (!strcmp(model, "treegru")) /* W_z, W_h x at words; U_z, U_h; U_r h per child */
        return L * 2 * h2 + I * 2 * h2 + (N - B) * h2;
    if (!strcmp(model, "treelstm")) /* W_iou x at words; U_iou; U_f h per child */
        return L * 3 * h2 + I * 3 * h2 + (N - B) * h2;
    if (!strcmp(model, "mvrnn")) /* A h per child, W [;], WM [A_l; A_r] */
        return I * (2 * h2 + 2 * h2 + 4.0 * H * H * H);
    if (!strcmp(model, "dagrnn")) /* U x everywhere, W hs where there are predecessors */
        return N * h2 + I * h2;
    if (!strcmp(model, "lstm"))
        return N * 4 * h2 + I * 4 * h2;
    if (!strcmp(model, "gru"))
        return N * 3 * h2 + I * 3 * h2;
    return 0;
}

/* ---- workloads ---- */

/* Nodes first .. of a random full binary tree over `leaves` words, built
 * by splitting the span at random: parent[] of each, words at leaves. */
static int32_t sst_like_span(int32_t leaves, int32_t parent_of, int32_t *parent, int32_t *words,
                             int32_t *n, unsigned *seed) {
    int32_t me = (*n)++;
    parent[me] = parent_of;
    *seed = *seed * 1103515245u + 12345u;
    if (leaves == 1) {
        words[me] = (int32_t)((*seed >> 8) % 21702);
        return me;
    }
    words[me] = -1;
    int32_t left = 1 + (int32_t)((*seed >> 8) % (unsigned)(leaves - 1));
    sst_like_span(left, me, parent, words, n, seed);
    sst_like_span(leaves - left, me, parent, words, n, seed);
    return me;
}

/* `count` SST-like trees: full binary trees over 5 to 45 words. */
static void sst_like_trees(rv_structs *t, int count) {
    unsigned seed = 1;
    int32_t parent[2 * 45], words[2 * 45];
    for (int s = 0; s < count; s++) {
        seed = seed * 1103515245u + 12345u;
        int32_t leaves = 5 + (int32_t)((seed >> 8) % 41), n = 0;
        sst_like_span(leaves, -1, parent, words, &n, &seed);
        if (rv_structs_add_parents(t, n, parent, words) != RV_OK)
            die("SST-like tree");
    }
}

typedef struct {
    const char *name;
    int nbatches;
    rv_structs **built; /* [nbatches] */
    rv_linear *lin;     /* [nbatches] */
    double linearize_us;
} Work;

/* The leaves of tree s of `t` left to right (their words: a sentence). */
static int32_t leaf_words(const rv_structs *t, int s, int32_t i, int32_t *out, int32_t n) {
    const int32_t *ch;
    int nc = rv_structs_children(t, s, i, &ch);
    if (nc == 0) {
        out[n] = rv_structs_data(t, s, i)[0];
        return n + 1;
    }
    for (int k = 0; k < nc; k++)
        n = leaf_words(t, s, ch[k], out, n);
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void time_linearize(Work *w, double min_time) {
    rv_linear lin = {0};
    int cap = 1 << 16, n = 0;
    double *t = malloc(sizeof(double) * (size_t)cap), start = bench_now();
    while (n < cap && (n < 2 * w->nbatches || bench_now() - start < min_time)) {
        double t0 = bench_now();
        if (rv_linearize(w->built[n % w->nbatches], &lin) != RV_OK)
            die("rv_linearize");
        t[n++] = bench_now() - t0;
    }
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    w->linearize_us = 1e6 * t[n / 2];
    free(t);
    rv_linear_free(&lin);
}

/* Batches of `batch` consecutive structures of `all` (at most max). */
static Work make_work(const char *name, const rv_structs *all, int batch, int max,
                      double min_time) {
    Work w = {name, rv_structs_count(all) / batch, NULL, NULL, 0};
    if (w.nbatches > max)
        w.nbatches = max;
    w.built = calloc((size_t)w.nbatches, sizeof *w.built);
    w.lin = calloc((size_t)w.nbatches, sizeof *w.lin);
    rv_struct_kind kind = rv_structs_kind(all);
    int K = rv_structs_max_children(all), width = rv_structs_width(all);
    for (int b = 0; b < w.nbatches; b++) {
        rv_structs *bs = w.built[b] = rv_structs_new(kind, K, width);
        for (int j = 0; j < batch; j++) {
            int s = b * batch + j;
            int32_t n = rv_structs_size(all, s);
            int32_t *begin = malloc(sizeof(int32_t) * (size_t)(n + 1));
            int32_t *child = malloc(sizeof(int32_t) * (size_t)(n * K + 1));
            int32_t *data = malloc(sizeof(int32_t) * (size_t)(n * width + 1));
            begin[0] = 0;
            for (int32_t i = 0; i < n; i++) {
                const int32_t *ch;
                int nc = rv_structs_children(all, s, i, &ch);
                memcpy(child + begin[i], ch, sizeof(int32_t) * (size_t)nc);
                begin[i + 1] = begin[i] + nc;
                memcpy(data + (size_t)i * (size_t)width, rv_structs_data(all, s, i),
                       sizeof(int32_t) * (size_t)width);
            }
            if (rv_structs_add_children(bs, n, begin, child, data) != RV_OK)
                die("rv_structs_add_children");
            free(begin);
            free(child);
            free(data);
        }
        if (rv_linearize(bs, &w.lin[b]) != RV_OK)
            die("rv_linearize");
    }
    time_linearize(&w, min_time);
    return w;
}

static void free_work(Work *w) {
    for (int b = 0; b < w->nbatches; b++) {
        rv_structs_free(w->built[b]);
        rv_linear_free(&w->lin[b]);
    }
    free(w->built);
    free(w->lin);
}

/* ---- the programs ---- */

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_trees: cannot open %s (run from the repository root)\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n)
        die(path);
    s[n] = 0;
    fclose(f);
    return s;
}

/* The cuda_* variants' schedule: the group's batches as `mode` says; in
 * every computed tensor's own kernel or member nest, its first spatial
 * loop over blocks (x), its last in blocks of 128 threads (the blocks
 * along y). */
static void gpu_schedule(rv_module *m, const char *mode) {
    char steps[512];
    snprintf(steps, sizeof steps, "dynamic_batch()\nspecialize()\ngpu_batches(\"%s\")", mode);
    if (rv_module_schedule(m, "R", steps) != RV_OK)
        die("gpu_batches");
    rv_schedule_info *si = rv_module_schedule_info(m);
    if (!si)
        die("schedule info");
    for (int i = 0; i < rv_schedule_info_num_stages(si); i++) {
        const rv_stage_info *st = rv_schedule_info_stage(si, i);
        if (st->kind != RV_STAGE_TENSOR || st->attach != RV_ATTACH_ROOT)
            continue;
        const char *first = NULL, *last = NULL;
        for (int l = 0; l < st->nloops; l++)
            if (!st->loops[l].reduce) {
                first = first ? first : st->loops[l].name;
                last = st->loops[l].name;
            }
        if (!first)
            continue;
        if (last == first)
            snprintf(steps, sizeof steps, "bind(%s, \"blockIdx.x\")", first);
        else
            snprintf(steps, sizeof steps,
                     "bind(%s, \"blockIdx.x\")\ngy, gt = split(%s, 128)\n"
                     "bind(gy, \"blockIdx.y\")\nbind(gt, \"threadIdx.x\")",
                     first, last);
        if (rv_module_schedule(m, st->name, steps) != RV_OK)
            die(st->name);
    }
    rv_schedule_info_free(si);
}

/* Seconds of CPU time of the whole process (every thread's): on a machine
 * shared with other jobs, with one thread, the call's own work without the
 * time it waited for a core. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The module of models/<model>_h<H>.rv under `variant`. */
static rv_module *load_variant(const char *model, int H, const char *variant) {
    char path[256];
    snprintf(path, sizeof path, "models/%s_h%d.rv", model, H);
    char *text = read_text(path);
    if (strcmp(variant, "tuned") != 0) {
        char *sched = strstr(text, "\nschedule ");
        if (sched)
            sched[1] = 0;
    }
    rv_module *m = NULL;
    if (rv_module_parse(path, text, &m) != RV_OK)
        die(path);
    free(text);
    if (!strcmp(variant, "dynamic") &&
        rv_module_schedule(m, "R", "dynamic_batch()\nspecialize()") != RV_OK)
        die("dynamic_batch");
    if (!strcmp(variant, "unrolled") &&
        rv_module_schedule(m, "R", "dynamic_batch()\nspecialize()\nunroll_recursion()") != RV_OK)
        die("unroll_recursion");
    if (!strncmp(variant, "cuda_", 5))
        gpu_schedule(m, !strcmp(variant, "cuda_launch") ? "launch" : "persistent");
    return m;
}

typedef struct {
    rv_program *p;
    rv_bindings *b;
    const Work *w;
    const char *structure;
    int next;
} Call;

static void run_call(Call *c) {
    if (rv_bindings_set_linear(c->b, c->structure, &c->w->lin[c->next]) != RV_OK)
        die("rv_bindings_set_linear");
    if (rv_program_run(c->p, c->b) != RV_OK)
        die("rv_program_run");
    c->next = (c->next + 1) % c->w->nbatches;
}

static const char *records; /* --records FILE: the autotuned variant's */

static int pick_tuned(const int64_t *sizes, void *user) {
    const TuneResult *r = user;
    return tune_result_pick(r, sizes, r->level_nodes >= 0 ? 3 : 0);
}

/* The autotuned program of m (whose text is the tuned file's): the
 * records' variants behind their tree, replayed as `ravel build
 * --records` does. */
static rv_status compile_autotuned(rv_module *m, const char *model, int H,
                                   const rv_compile_options *opt, TuneResult *r, rv_program **p) {
    char path[256];
    snprintf(path, sizeof path, "models/%s_h%d.rv", model, H);
    char *text = read_text(path);
    TuneOptions o = {.records = records, .replay = true, .quiet = true, .threads = opt->threads};
    rv_status st = tune_run(m, text, &o, r);
    free(text);
    rv_dispatch d = {.fn = pick_tuned, .user = r};
    if (st == RV_OK)
        st = rv_program_compile_variants(m, r->nvariants, (const char *const *)r->variant_sched,
                                         &d, opt, p);
    return st;
}

static void bench_one(const char *model, int H, const char *variant, int threads, int batch,
                      const Work *w, double min_time) {
    int autotuned = !strcmp(variant, "autotuned");
    rv_module *m = load_variant(model, H, autotuned ? "tuned" : variant);
    int cuda = !strncmp(variant, "cuda_", 5);
    rv_compile_options opt = {.threads = threads, .target = cuda ? RV_TARGET_CUDA : RV_TARGET_CPU};
    rv_program *p = NULL;
    TuneResult tr = {0};
    double t0 = bench_now();
    if ((autotuned ? compile_autotuned(m, model, H, &opt, &tr, &p) : rv_program_compile(m, &opt, &p)) !=
        RV_OK)
        die(model);
    double compile_s = bench_now() - t0;
    Call c = {p, rv_bindings_new(m), w, "T", 0};
    if (!strcmp(model, "lstm") || !strcmp(model, "gru"))
        c.structure = "S";
    if (rv_bindings_set_linear(c.b, c.structure, &w->lin[0]) != RV_OK ||
        rv_bindings_randomize(c.b, 1) != RV_OK)
        die("bindings");
    for (int t = 0; t < rv_module_num_tensors(m); t++) {
        rv_tensor *x = rv_module_tensor_at(m, t);
        if (!rv_tensor_is_input(x))
            continue;
        rv_array *a = (rv_array *)rv_bindings_get_array(c.b, rv_tensor_name(x));
        float *d = a ? rv_array_data(a) : NULL;
        for (int64_t i = 0; d && i < rv_array_numel(a); i++)
            d[i] *= 0.1f;
    }
    for (int i = 0; i < 3; i++) /* warm up */
        run_call(&c);
    int cap = 100000, n = 0;
    double *t = malloc(sizeof(double) * (size_t)cap), flops = 0, total = 0;
    rv_program_counters before, after;
    rv_program_stats(p, &before);
    double *cpu = malloc(sizeof(double) * (size_t)cap);
    double start = bench_now();
    while (n < cap && (n < 10 || bench_now() - start < min_time)) {
        flops += model_flops(model, H, &w->lin[c.next]);
        double a = bench_now(), ca = cpu_now();
        run_call(&c);
        cpu[n] = cpu_now() - ca;
        total += t[n++] = bench_now() - a;
    }
    rv_program_stats(p, &after);
    if (autotuned)
        fprintf(stderr, "bench_trees: autotuned: the last call ran variant %d of %d\n",
                rv_program_last_variant(p), tr.nvariants);
    char kernel[64] = "";
    if (cuda)
        snprintf(kernel, sizeof kernel, ", \"kernel_us\": %.2f",
                 1e6 * (after.kernel_seconds - before.kernel_seconds) / n);
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    qsort(cpu, (size_t)n, sizeof(double), cmp_double);
    printf("{\"bench\": \"trees\", \"config\": {\"model\": \"%s\", \"H\": %d, \"batch\": %d, "
           "\"threads\": %d, \"variant\": \"%s\", \"workload\": \"%s\"}, \"median_us\": %.2f, "
           "\"mean_us\": %.2f, \"min_us\": %.2f, \"runs\": %d, \"mflop_per_call\": %.3f, "
           "\"gflops\": %.2f, \"linearize_us\": %.2f, \"linearize_frac\": %.4f, "
           "\"compile_s\": %.2f, \"cpu_median_us\": %.2f%s}\n",
           model, H, batch, threads, variant, w->name, 1e6 * t[n / 2], 1e6 * total / n,
           1e6 * t[0], n, flops / n / 1e6, flops / total / 1e9, w->linearize_us,
           w->linearize_us / (w->linearize_us + 1e6 * t[n / 2]), compile_s, 1e6 * cpu[n / 2],
           kernel);
    fflush(stdout);
    free(t);
    free(cpu);
    rv_bindings_free(c.b);
    rv_program_free(p);
    tune_result_free(&tr);
    rv_module_free(m);
}

/* Is `name` in the comma-separated `list` (NULL: every name)? */
static int listed(const char *list, const char *name) {
    if (!list)
        return 1;
    size_t n = strlen(name);
    for (const char *s = list; (s = strstr(s, name)) != NULL; s += n)
        if ((s == list || s[-1] == ',') && (s[n] == ',' || s[n] == 0))
            return 1;
    return 0;
}

int main(int argc, char **argv) {
    const char *sst = getenv("RAVEL_SST_DIR"), *models = NULL, *threads = "1,2",
               *batches = "1,10", *variants = "default,dynamic,tuned";
    double min_time = 0.5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sst") && i + 1 < argc)
            sst = argv[++i];
        else if (!strcmp(argv[i], "--models") && i + 1 < argc)
            models = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batches = argv[++i];
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc)
            variants = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc)
            min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            min_time = 0.1;
        else if (!strcmp(argv[i], "--records") && i + 1 < argc)
            records = argv[++i];
        else {
            fprintf(stderr, "usage: bench_trees [--sst DIR] [--models a,b] [--threads 1,2] "
                            "[--batch 1,10] [--variants default,dynamic,tuned] "
                            "[--min-time S] [--quick] [--records FILE]\n");
            return 2;
        }
    }
    rv_structs *trees = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    const char *tree_work = "sst_test";
    if (rv_structs_read_sst(trees, sst ? sst : "../shared/data/sst", RV_SST_TEST) != RV_OK) {
        if (sst)
            die("reading SST (--sst DIR)");
        fprintf(stderr, "bench_trees: no SST files (%s): SST-like random trees instead\n",
                rv_last_error());
        sst_like_trees(trees, 1000);
        tree_work = "sst_like_random";
    }
    rv_structs *seqs = rv_structs_new(RV_STRUCT_SEQUENCE, 1, 1);
    int32_t *words = malloc(sizeof(int32_t) * (size_t)(rv_structs_num_nodes(trees) + 1));
    for (int s = 0; s < rv_structs_count(trees); s++) {
        int32_t n = leaf_words(trees, s, rv_structs_root(trees, s), words, 0);
        if (rv_structs_add_sequence(seqs, n, words) != RV_OK)
            die("sequence");
    }
    free(words);
    rv_structs *perfect = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    rv_structs *grids = rv_structs_new(RV_STRUCT_DAG, 2, 1);
    /* words for every node (the models read them at the leaves, DAG-RNN
     * at every node), spread over the vocabulary */
    int32_t ids[255];
    for (int i = 0; i < 100; i++) {
        for (int k = 0; k < 255; k++)
            ids[k] = (int32_t)(((int64_t)i * 255 + k) * 7919 % 21702);
        if (rv_structs_add_perfect_tree(perfect, 7, ids) != RV_OK ||
            rv_structs_add_grid(grids, 10, 10, ids) != RV_OK)
            die("perfect tree or grid");
    }
    const char *const variant_names[] = {"default",     "dynamic",         "tuned",   "autotuned",
                                         "cuda_launch", "cuda_persistent", "unrolled"};
    for (int bi = 0; bi < 2; bi++) {
        int batch = bi ? 10 : 1;
        if (!listed(batches, bi ? "10" : "1"))
            continue;
        /* at most 100 batches each: SST's variety */
        Work sst_w = make_work(tree_work, trees, batch, 100, min_time);
        Work seq_w = make_work("sst_test_seq", seqs, batch, 100, min_time);
        Work perf_w = make_work("perfect_h7", perfect, batch, 10, min_time);
        Work grid_w = make_work("grid_10x10", grids, batch, 10, min_time);
        for (int mi = 0; mi < NMODELS; mi++) {
            const char *model = MODELS[mi];
            if (!listed(models, model))
                continue;
            const Work *w = !strcmp(model, "treefc")   ? &perf_w
                            : !strcmp(model, "dagrnn") ? &grid_w
                            : !strcmp(model, "lstm") || !strcmp(model, "gru") ? &seq_w
                                                                               : &sst_w;
            int small = !strcmp(model, "mvrnn");
            for (int hi = 0; hi < 2; hi++)
                for (int th = 1; th <= 2; th++)
                    for (int v = 0; v < 7; v++)
                        if (listed(threads, th == 1 ? "1" : "2") &&
                            listed(variants, variant_names[v]) &&
                            (v < 4 || th == 1 || v == 6) && (v != 6 || strcmp(model, "dagrnn")))
                            bench_one(model, small ? 64 << hi : 256 << hi, variant_names[v], th,
                                      batch, w, min_time);
        }
        free_work(&sst_w);
        free_work(&seq_w);
        free_work(&perf_w);
        free_work(&grid_w);
    }
    rv_structs_free(trees);
    rv_structs_free(seqs);
    rv_structs_free(perfect);
    rv_structs_free(grids);
    return 0;
}
