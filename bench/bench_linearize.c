/*
 * bench/bench_linearize.c — the cost of the data structure linearizer
 * (Cortex §7.5 reports 1.3–95 µs per batch).
 *
 *     bench_linearize [--sst DIR] [--min-time S] [--max-runs N] [--quick]
 *
 * The SST directory: --sst, else $RAVEL_SST_DIR, else ../shared/data/sst.
 *
 * Workloads, each at batch sizes 1 and 10: the SST test split (2210
 * sentences, as listed in datasetSplit.txt; consecutive sentences form a
 * batch), perfect binary trees of height 7 (255 nodes), 10x10 grid DAGs
 * (Cortex's DAG-RNN input) and sequences of the SST test sentences' words
 * (an LSTM's input: (n + 1) / 2 nodes for a binary tree of n). Two sides per workload, timed with the
 * benchmarks' method (timing.h), each call on the next batch in turn:
 *
 *   - linearize: rv_linearize of a batch already built, into one reused
 *     rv_linear (what a server pays per request once its buffers have
 *     grown);
 *   - build: rv_structs_clear and adding the batch's structures from
 *     children lists in memory, which checks them (ranges, K, parents,
 *     cycles, one root) and computes every node's level.
 *
 * build + linearize is the whole host cost of turning a request into the
 * kernels' arrays. One JSON line per workload and batch size:
 *
 *   {"bench": "linearize", "config": {"workload": "sst_test", "batch": 10, "batches": 221,
 *    "nodes_per_batch": 184.2}, "linearize_us": ..., "linearize_min_us": ...,
 *    "linearize_max_us": ..., "build_us": ..., "total_us": ..., "runs": ...}
 *
 * `*_us` are medians over calls (each call one batch; the batches cycle),
 * so for SST they are the time of a typical batch; total_us = build_us +
 * linearize_us.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ravel.h"
#include "timing.h"

/* One batch as children lists in memory: what a request would carry. */
typedef struct {
    int count;
    int32_t *size; /* [count] */
    int32_t **begin, **child, **data;
} Input;

typedef struct {
    rv_struct_kind kind;
    int k, width;
    int nbatches, next_lin, next_build;
    rv_structs **built; /* [nbatches] */
    Input *inputs;      /* [nbatches] */
    rv_structs *scratch;
    rv_linear lin;
} Work;

static void die(const char *what) {
    fprintf(stderr, "bench_linearize: %s: %s\n", what, rv_last_error());
    exit(1);
}

static void run_linearize(void *ctx) {
    Work *w = ctx;
    if (rv_linearize(w->built[w->next_lin], &w->lin) != RV_OK)
        die("rv_linearize");
    w->next_lin = (w->next_lin + 1) % w->nbatches;
}

static void run_build(void *ctx) {
    Work *w = ctx;
    const Input *in = &w->inputs[w->next_build];
    rv_structs_clear(w->scratch);
    for (int s = 0; s < in->count; s++)
        if (rv_structs_add_children(w->scratch, in->size[s], in->begin[s], in->child[s],
                                    in->data[s]) != RV_OK)
            die("rv_structs_add_children");
    w->next_build = (w->next_build + 1) % w->nbatches;
}

/* Copies structure s of `src` out as children lists. */
static void copy_out(const rv_structs *src, int s, Input *in, int j) {
    int32_t n = rv_structs_size(src, s), width = rv_structs_width(src);
    in->size[j] = n;
    in->begin[j] = malloc(sizeof(int32_t) * (size_t)(n + 1));
    in->data[j] = malloc(sizeof(int32_t) * (size_t)(n * width + 1));
    int32_t edges = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t *ch;
        edges += rv_structs_children(src, s, i, &ch);
    }
    in->child[j] = malloc(sizeof(int32_t) * (size_t)(edges + 1));
    in->begin[j][0] = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t *ch;
        int nc = rv_structs_children(src, s, i, &ch);
        memcpy(in->child[j] + in->begin[j][i], ch, sizeof(int32_t) * (size_t)nc);
        in->begin[j][i + 1] = in->begin[j][i] + nc;
        memcpy(in->data[j] + (size_t)i * (size_t)width, rv_structs_data(src, s, i),
               sizeof(int32_t) * (size_t)width);
    }
}

/* Splits `all` into batches of `batch` consecutive structures. */
static Work make_work(const rv_structs *all, int batch) {
    Work w = {0};
    w.kind = rv_structs_kind(all);
    w.k = rv_structs_max_children(all);
    w.width = rv_structs_width(all);
    w.nbatches = rv_structs_count(all) / batch;
    w.built = calloc((size_t)w.nbatches, sizeof *w.built);
    w.inputs = calloc((size_t)w.nbatches, sizeof *w.inputs);
    for (int b = 0; b < w.nbatches; b++) {
        Input *in = &w.inputs[b];
        in->count = batch;
        in->size = malloc(sizeof(int32_t) * (size_t)batch);
        in->begin = malloc(sizeof(int32_t *) * (size_t)batch);
        in->child = malloc(sizeof(int32_t *) * (size_t)batch);
        in->data = malloc(sizeof(int32_t *) * (size_t)batch);
        w.built[b] = rv_structs_new(w.kind, w.k, w.width);
        for (int j = 0; j < batch; j++) {
            copy_out(all, b * batch + j, in, j);
            if (rv_structs_add_children(w.built[b], in->size[j], in->begin[j], in->child[j],
                                        in->data[j]) != RV_OK)
                die("rv_structs_add_children");
        }
    }
    w.scratch = rv_structs_new(w.kind, w.k, w.width);
    return w;
}

static void free_work(Work *w) {
    for (int b = 0; b < w->nbatches; b++) {
        Input *in = &w->inputs[b];
        for (int j = 0; j < in->count; j++) {
            free(in->begin[j]);
            free(in->child[j]);
            free(in->data[j]);
        }
        free(in->size);
        free(in->begin);
        free(in->child);
        free(in->data);
        rv_structs_free(w->built[b]);
    }
    free(w->built);
    free(w->inputs);
    rv_structs_free(w->scratch);
    rv_linear_free(&w->lin);
}

static void bench(const BenchOpts *o, const char *name, const rv_structs *all, int batch) {
    Work w = make_work(all, batch);
    double nodes = 0;
    for (int b = 0; b < w.nbatches; b++)
        nodes += rv_structs_num_nodes(w.built[b]);
    BenchSide sides[2] = {{.fn = run_linearize, .ctx = &w}, {.fn = run_build, .ctx = &w}};
    bench_sides(o, sides, 2);
    const BenchStats *l = &sides[0].stats, *b = &sides[1].stats;
    printf("{\"bench\": \"linearize\", \"config\": {\"workload\": \"%s\", \"batch\": %d, "
           "\"batches\": %d, \"nodes_per_batch\": %.1f}, \"linearize_us\": %.3f, "
           "\"linearize_min_us\": %.3f, \"linearize_max_us\": %.3f, \"build_us\": %.3f, "
           "\"total_us\": %.3f, \"runs\": %d}\n",
           name, batch, w.nbatches, nodes / w.nbatches, 1e3 * l->median_ms, 1e3 * l->min_ms,
           1e3 * l->max_ms, 1e3 * b->median_ms, 1e3 * (l->median_ms + b->median_ms), l->runs);
    fflush(stdout);
    free_work(&w);
}

int main(int argc, char **argv) {
    BenchOpts o = bench_default_opts();
    const char *sst = getenv("RAVEL_SST_DIR"); /* else ../shared/data/sst, as the issue names it */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sst") && i + 1 < argc)
            sst = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc)
            o.min_time_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-runs") && i + 1 < argc)
            o.max_runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            o.min_time_s = 0.02;
        else {
            fprintf(stderr, "usage: bench_linearize [--sst DIR] [--min-time S] [--max-runs N] "
                            "[--quick]\n");
            return 2;
        }
    }
    o.max_runs = o.max_runs < 100000 ? 100000 : o.max_runs; /* calls of microseconds */

    rv_structs *trees = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    if (rv_structs_read_sst(trees, sst ? sst : "../shared/data/sst", RV_SST_TEST) != RV_OK)
        die("reading SST (--sst DIR)");
    rv_structs *perfect = rv_structs_new(RV_STRUCT_TREE, 2, 1);
    rv_structs *grids = rv_structs_new(RV_STRUCT_DAG, 2, 1);
    for (int i = 0; i < 100; i++) {
        if (rv_structs_add_perfect_tree(perfect, 7, NULL) != RV_OK)
            die("perfect tree");
        if (rv_structs_add_grid(grids, 10, 10, NULL) != RV_OK)
            die("grid");
    }
    rv_structs *seqs = rv_structs_new(RV_STRUCT_SEQUENCE, 1, 1);
    for (int s = 0; s < rv_structs_count(trees); s++)
        if (rv_structs_add_sequence(seqs, (rv_structs_size(trees, s) + 1) / 2, NULL) != RV_OK)
            die("sequence");
    static const int batches[] = {1, 10};
    for (int i = 0; i < 2; i++) {
        bench(&o, "sst_test", trees, batches[i]);
        bench(&o, "perfect_tree_h7", perfect, batches[i]);
        bench(&o, "grid_10x10", grids, batches[i]);
        bench(&o, "sst_test_sequences", seqs, batches[i]);
    }
    rv_structs_free(trees);
    rv_structs_free(perfect);
    rv_structs_free(grids);
    rv_structs_free(seqs);
    return 0;
}
