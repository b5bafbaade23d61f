/*
 * bench/peak.c — the roofline of this machine: FP32 FMA throughput and
 * memory bandwidth, for 1 thread and for every core.
 *
 * FMA: each thread runs 16 independent chains acc = acc·x + y on full
 * vectors. An FMA has ~4 cycles of latency and a core issues up to two per
 * cycle, so 8 chains already hide the latency; 16 leaves margin and still fits
 * the 32 zmm registers. The AVX-512 path is chosen at run time; without it the
 * probe uses 12 ymm chains (AVX2+FMA). x and y keep the values bounded and
 * normal, so no denormal slow path is measured.
 *
 * Bandwidth: the STREAM triad a[i] = b[i] + s·c[i] on three arrays of 256 MiB
 * each (several times the last-level cache), split over the threads, each
 * thread touching its own part first. Bytes counted the STREAM way: 12 per
 * element (the write-allocate read of a[] is not counted). Then the same
 * triad on three arrays of 4 MiB (12 MiB: beyond the L2 of the cores, within
 * an L3), repeated many times: the rate for data that lives in L3, such as a
 * recurrent model's weights read once per level (bench/trees/roofline.py).
 *
 * Each probe is repeated and the best run reported: a peak is what the
 * hardware can do, and the other engineers' compiles only ever subtract.
 *
 * Output: one JSON line per probe and thread count, e.g.
 *   {"bench": "peak", "kind": "fma", "isa": "avx512", "threads": 1, "gflops": ...}
 *   {"bench": "peak", "kind": "triad", "threads": 1, "gb_s": ...}
 *   {"bench": "peak", "kind": "triad_l3", "threads": 1, "gb_s": ...}
 * Usage: peak [--threads 1,2] [--quick]
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define TRIAD_FLOATS (64L << 20)   /* 256 MiB per array */
#define TRIAD_L3_FLOATS (1L << 20) /* 4 MiB per array */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- FMA throughput ------------------------------------------------------ */

/* 16 chains × 16 lanes × 2 flops per iteration. Returns a value to keep. */
__attribute__((target("avx512f"))) static float fma_avx512(long iters) {
    __m512 acc[16];
    const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-6f);
    for (int j = 0; j < 16; j++)
        acc[j] = _mm512_set1_ps((float)j);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
            acc[j] = _mm512_fmadd_ps(acc[j], x, y);
    }
    __m512 s = acc[0];
    for (int j = 1; j < 16; j++)
        s = _mm512_add_ps(s, acc[j]);
    return _mm512_reduce_add_ps(s);
}

/* 12 chains × 8 lanes × 2 flops per iteration. */
__attribute__((target("avx2,fma"))) static float fma_avx2(long iters) {
    __m256 acc[12];
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-6f);
    for (int j = 0; j < 12; j++)
        acc[j] = _mm256_set1_ps((float)j);
    for (long i = 0; i < iters; i++) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; j++)
            acc[j] = _mm256_fmadd_ps(acc[j], x, y);
    }
    float out[8], s = 0;
    for (int j = 1; j < 12; j++)
        acc[0] = _mm256_add_ps(acc[0], acc[j]);
    _mm256_storeu_ps(out, acc[0]);
    for (int j = 0; j < 8; j++)
        s += out[j];
    return s;
}

typedef struct {
    int use_avx512;
    long iters;
    pthread_barrier_t *start;
    float sink;
} FmaJob;

static void *fma_thread(void *p) {
    FmaJob *job = p;
    pthread_barrier_wait(job->start);
    job->sink = job->use_avx512 ? fma_avx512(job->iters) : fma_avx2(job->iters);
    return NULL;
}

/* Runs `threads` copies of the FMA loop; returns GFLOP/s over the wall time. */
static double run_fma(int threads, int use_avx512, long iters) {
    pthread_t tid[MAX_THREADS];
    FmaJob job[MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++) {
        job[t] = (FmaJob){use_avx512, iters, &start, 0};
        pthread_create(&tid[t], NULL, fma_thread, &job[t]);
    }
    pthread_barrier_wait(&start);
    double t0 = now();
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    double dt = now() - t0;
    pthread_barrier_destroy(&start);
    double per_iter = use_avx512 ? 16 * 16 * 2 : 12 * 8 * 2;
    return per_iter * (double)iters * threads / dt * 1e-9;
}

/* ---- STREAM triad --------------------------------------------------------- */

typedef struct {
    float *a, *b, *c;
    long lo, hi;
    int reps;
    pthread_barrier_t *sync;
    double best; /* seconds, filled by thread 0 only */
    int first;
} TriadJob;

static void *triad_thread(void *p) {
    TriadJob *job = p;
    float *a = job->a, *b = job->b, *c = job->c;
    for (long i = job->lo; i < job->hi; i++) /* first touch by the owner */
        a[i] = 0, b[i] = 1, c[i] = 2;
    const float s = 3.0f;
    for (int r = 0; r < job->reps; r++) {
        pthread_barrier_wait(job->sync);
        double t0 = now();
        for (long i = job->lo; i < job->hi; i++)
            a[i] = b[i] + s * c[i];
        pthread_barrier_wait(job->sync);
        double dt = now() - t0;
        if (job->first && (r == 0 || dt < job->best))
            job->best = dt;
    }
    return NULL;
}

static double run_triad(int threads, long n, int reps) {
    float *a = aligned_alloc(64, (size_t)n * 4), *b = aligned_alloc(64, (size_t)n * 4);
    float *c = aligned_alloc(64, (size_t)n * 4);
    if (!a || !b || !c) {
        fprintf(stderr, "peak: out of memory\n");
        exit(1);
    }
    pthread_t tid[MAX_THREADS];
    TriadJob job[MAX_THREADS] = {{0}};
    pthread_barrier_t sync;
    pthread_barrier_init(&sync, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        job[t] =
            (TriadJob){a, b, c, n * t / threads, n * (t + 1) / threads, reps, &sync, 0, t == 0};
        pthread_create(&tid[t], NULL, triad_thread, &job[t]);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&sync);
    free(a), free(b), free(c);
    return 12.0 * (double)n / job[0].best * 1e-9;
}

int main(int argc, char **argv) {
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int list[16] = {1, ncpu}, nlist = ncpu > 1 ? 2 : 1, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nlist = 0;
            for (char *s = argv[++i]; *s && nlist < 16; s += *s == ',')
                list[nlist++] = (int)strtol(s, &s, 10);
        } else {
            fprintf(stderr, "usage: %s [--threads 1,2] [--quick]\n", argv[0]);
            return 2;
        }
    }
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f");
    if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
        fprintf(stderr, "peak: needs AVX2+FMA or AVX-512\n");
        return 1;
    }
    long iters = quick ? 20000000L : 100000000L; /* ~0.05 s / ~0.25 s per run at 200 GFLOP/s */
    int reps = quick ? 3 : 7;
    for (int li = 0; li < nlist; li++) {
        int threads = list[li] < 1 ? 1 : list[li] > MAX_THREADS ? MAX_THREADS : list[li];
        run_fma(threads, avx512, iters / 10); /* warm-up: wake the cores, settle the clock */
        double best = 0, worst = 0;
        for (int r = 0; r < reps; r++) {
            double g = run_fma(threads, avx512, iters);
            best = r == 0 || g > best ? g : best;
            worst = r == 0 || g < worst ? g : worst;
        }
        int per_cycle = avx512 ? 64 : 32; /* two FMA units × lanes × 2 flops */
        printf("{\"bench\": \"peak\", \"kind\": \"fma\", \"isa\": \"%s\", \"threads\": %d, "
               "\"gflops\": %.1f, \"gflops_worst\": %.1f, \"runs\": %d, "
               "\"ghz_if_2_fma_units\": %.2f}\n",
               avx512 ? "avx512" : "avx2", threads, best, worst, reps, best / threads / per_cycle);
        fflush(stdout);
    }
    for (int li = 0; li < nlist; li++) {
        int threads = list[li] < 1 ? 1 : list[li] > MAX_THREADS ? MAX_THREADS : list[li];
        double gbs = run_triad(threads, quick ? TRIAD_FLOATS / 4 : TRIAD_FLOATS, reps);
        printf("{\"bench\": \"peak\", \"kind\": \"triad\", \"threads\": %d, \"gb_s\": %.1f, "
               "\"array_mib\": %ld, \"runs\": %d}\n",
               threads, gbs, (quick ? TRIAD_FLOATS / 4 : TRIAD_FLOATS) * 4 >> 20, reps);
        fflush(stdout);
    }
    for (int li = 0; li < nlist; li++) {
        int threads = list[li] < 1 ? 1 : list[li] > MAX_THREADS ? MAX_THREADS : list[li];
        /* a pass is ~0.5 ms: many of them, the best one reported */
        double gbs = run_triad(threads, TRIAD_L3_FLOATS, quick ? 100 : 400);
        printf("{\"bench\": \"peak\", \"kind\": \"triad_l3\", \"threads\": %d, \"gb_s\": %.1f, "
               "\"array_mib\": %ld, \"runs\": %d}\n",
               threads, gbs, TRIAD_L3_FLOATS * 4 >> 20, quick ? 100 : 400);
        fflush(stdout);
    }
    return 0;
}
