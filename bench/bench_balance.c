/*
 * bench/bench_balance.c — the load balancing of ragged parallel loops: one
 * program compiled twice, its parallel loops split into chunks of equal
 * work (the default, src/codegen/c_balance.c) and into chunks of equal row
 * count ($RAVEL_NO_BALANCE=1, the thread pool's plain split).
 *
 * The program is examples/ragged_softmax.rv (the softmax of attention
 * scores, sentence b an 8 x len[b] x len[b] block, each kernel parallel
 * over the fused (b, head) loop: a row costs len[b]^2). The B lengths are
 * sampled with a fixed seed from a length file of ../shared/data/
 * (default RACE, whose lengths run up to 512), in two orders: "sampled"
 * and "sorted" (longest first, as length-bucketing batchers hand them
 * over, where an even split gives thread 0 the long sentences). One JSON
 * line per batch size, order and thread count: "ravel" is the work
 * partition, "baseline" the even one; config has "even_share", the
 * largest fraction of the work one thread gets under the even split
 * (0.5 is balanced at 2 threads). "gflops" counts 5 flops per score
 * element (max, subtract, exp, sum, divide). Times are the kernels' own
 * (rv_program_stats' kernel_seconds, as time_rv), leaving out the host's
 * checks and copies, which are the same for both partitions.
 *
 *   bench_balance [--T 16,32,64] [--threads 1,2] [--data FILE] [--min-time S]
 *
 * --T lists the batch sizes B (the program allows 1..64).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ravel.h"

#define DEFAULT_T "16,32,64"
#define DEFAULT_DATA "../shared/data/race/train_lengths.txt" /* or $RAVEL_BALANCE_DATA */
#define MAX_LEN 512 /* the program's range of len */
#define MAX_B 512

static void die(const char *what) {
    fprintf(stderr, "bench_balance: %s: %s\n", what, rv_last_error());
    exit(1);
}

/* Every length of the file, clamped to the program's range. */
static int *read_lengths(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_balance: cannot open %s (--data FILE)\n", path);
        exit(1);
    }
    int cap = 1024, v;
    int *out = malloc(sizeof *out * (size_t)cap);
    *n = 0;
    while (fscanf(f, "%d", &v) == 1) {
        if (*n == cap)
            out = realloc(out, sizeof *out * (size_t)(cap *= 2));
        out[(*n)++] = v < 1 ? 1 : v > MAX_LEN ? MAX_LEN : v;
    }
    fclose(f);
    if (*n == 0) {
        fprintf(stderr, "bench_balance: %s holds no lengths\n", path);
        exit(1);
    }
    return out;
}

static int longest_first(const void *a, const void *b) {
    return *(const int64_t *)b < *(const int64_t *)a ? -1 : *(const int64_t *)b > *(const int64_t *)a;
}

/* The program with its bindings: len bound, the scores drawn. */
typedef struct {
    rv_module *m;
    rv_program *p;
    rv_bindings *b;
    rv_array *len;
} Run;

static void run_setup(Run *r, const char *path, int threads, int balanced, const int64_t *lens,
                      int B) {
    if (!balanced)
        setenv("RAVEL_NO_BALANCE", "1", 1);
    rv_compile_options opt = {.serial = threads == 1, .threads = threads};
    if (rv_module_load(path, &r->m) != RV_OK || rv_program_compile(r->m, &opt, &r->p) != RV_OK)
        die(path);
    unsetenv("RAVEL_NO_BALANCE");
    int64_t n = B;
    r->len = rv_array_new(RV_I64, 1, &n);
    memcpy(rv_array_data(r->len), lens, sizeof(int64_t) * (size_t)B);
    r->b = rv_bindings_new(r->m);
    if (rv_bindings_set_size(r->b, "B", B) != RV_OK ||
        rv_bindings_set_array(r->b, "len", r->len) != RV_OK || rv_bindings_randomize(r->b, 7) != RV_OK)
        die("bindings");
}

static void run_call(void *ctx) {
    Run *r = ctx;
    if (rv_program_run(r->p, r->b) != RV_OK)
        die("run");
}

static double kernel_seconds(void *ctx) {
    rv_program_counters c;
    rv_program_stats(((Run *)ctx)->p, &c);
    return c.kernel_seconds;
}

static void run_free(Run *r) {
    rv_bindings_free(r->b);
    rv_array_free(r->len);
    rv_program_free(r->p);
    rv_module_free(r->m);
}

/* The largest share of the work a thread gets when the pool splits the
 * B * 8 rows into `threads` equal counts (threadpool.c's run_chunk). */
static double even_share(const int64_t *lens, int B, int threads) {
    int64_t rows = (int64_t)B * 8, total = 0, worst = 0;
    for (int b = 0; b < B; b++)
        total += 8 * lens[b] * lens[b];
    for (int t = 0; t < threads; t++) {
        int64_t q = rows / threads, r = rows % threads;
        int64_t begin = q * t + (t < r ? t : r), end = begin + q + (t < r), w = 0;
        for (int64_t row = begin; row < end; row++)
            w += lens[row / 8] * lens[row / 8];
        worst = w > worst ? w : worst;
    }
    return total ? (double)worst / (double)total : 0;
}

int main(int argc, char **argv) {
    BenchArgs args;
    bench_parse_args(argc, argv, DEFAULT_T, "--data", &args);
    const char *data = args.extra ? args.extra : getenv("RAVEL_BALANCE_DATA");
    data = data ? data : DEFAULT_DATA;
    const char *path = getenv("RAVEL_BALANCE_PROGRAM");
    path = path ? path : "examples/ragged_softmax.rv";
    if (args.quick)
        args.nt = bench_parse_list("32", args.t);
    int nall;
    int *all = read_lengths(data, &nall);
    char label[64]; /* the data set: the file's directory (race/train_lengths.txt: race) */
    const char *slash = strrchr(data, '/');
    int dlen = slash ? (int)(slash - data) : 0;
    const char *dir = data;
    for (int c = 0; c < dlen; c++)
        if (data[c] == '/')
            dir = data + c + 1;
    snprintf(label, sizeof label, "%.*s", dlen ? (int)(data + dlen - dir) : 4, dlen ? dir : "file");
    int64_t lens[MAX_B];
    for (int i = 0; i < args.nt; i++) {
        int B = args.t[i] < MAX_B ? args.t[i] : MAX_B;
        unsigned seed = 12345;
        for (int b = 0; b < B; b++) {
            seed = seed * 1103515245u + 12345u;
            lens[b] = all[(seed >> 8) % (unsigned)nall];
        }
        for (int order = 0; order < 2; order++) {
            if (order == 1)
                qsort(lens, (size_t)B, sizeof lens[0], longest_first);
            double flops = 0;
            for (int b = 0; b < B; b++)
                flops += 5.0 * 8 * (double)lens[b] * (double)lens[b];
            for (int ti = 0; ti < args.nthreads; ti++) {
                int threads = args.threads[ti];
                Run work, even;
                run_setup(&work, path, threads, 1, lens, B);
                run_setup(&even, path, threads, 0, lens, B);
                BenchSide sides[2] = {{.fn = run_call, .ctx = &work, .clock = kernel_seconds},
                                      {.fn = run_call, .ctx = &even, .clock = kernel_seconds}};
                bench_sides(&args.timing, sides, 2);
                char cfg[320];
                snprintf(cfg, sizeof cfg,
                         "{\"B\": %d, \"data\": \"%s\", \"order\": \"%s\", \"even_share\": %.3f, "
                         "\"threads\": %d}",
                         B, label, order ? "sorted" : "sampled", even_share(lens, B, threads),
                         threads);
                bench_print_line("balance", cfg, "even_rows", flops, &sides[0].stats,
                                 &sides[1].stats, 0);
                run_free(&work);
                run_free(&even);
            }
        }
    }
    free(all);
    return 0;
}
