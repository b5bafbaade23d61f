/*
 * aot_driver.c — runs a model built by `ravel build ... -o DIR/model` and
 * compares its outputs with the reference interpreter's (tests/suite_aot.sh).
 *
 *     aot_driver REF OUT [--own-ctx] [--misalign] NAME=V...
 *
 * Compiled with -I DIR against DIR/model.c, it knows the model only through
 * model.h's field table, so one driver serves every example. Sizes come
 * from the command line (what `ravel eval --random` printed), UF arrays and
 * inputs from REF/NAME.npy (`ravel eval --save-inputs`); each output is
 * written to OUT/NAME.npy and compared with REF/NAME.npy (f32: 1e-4
 * relative to the magnitude, f64: 1e-10, ints exact, as `ravel run
 * --check`). --misalign places every array one element off 64-byte
 * alignment (model_run must copy; the element itself stays aligned, as C
 * requires of any array); --own-ctx passes a context of the driver's own
 * that runs parallel loops in two chunks and counts allocations (all must
 * be freed). Then a size out of every range must give RV_RT_ERR_BOUNDS
 * and a model_last_error naming it, and model_field_infos must agree with
 * the fields (each shape's product is the numel; sizes carry their range)
 * and model_args_size with sizeof(model_args). --threads N calls
 * model_set_num_threads(N) first and checks the count it reports (a
 * model built with `ravel build --threads`; others report 1).
 * Exit status 0 when all outputs match and the checks hold.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* ---- .npy ---- */

typedef struct Npy {
    char descr[8]; /* "<f4" */
    int64_t numel;
    void *data;
} Npy;

static int npy_load(const char *path, Npy *out) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 0;
    }
    unsigned char pre[10];
    int ok = fread(pre, 1, 8, f) == 8 && memcmp(pre, "\x93NUMPY", 6) == 0;
    size_t hlen = 0;
    if (ok && pre[6] == 1) {
        ok = fread(pre + 8, 1, 2, f) == 2;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (ok) {
        unsigned char l[4];
        ok = fread(l, 1, 4, f) == 4;
        hlen = (size_t)l[0] | (size_t)l[1] << 8 | (size_t)l[2] << 16 | (size_t)l[3] << 24;
    }
    char *h = ok ? calloc(1, hlen + 1) : NULL;
    ok = h && fread(h, 1, hlen, f) == hlen;
    const char *d = ok ? strstr(h, "'descr': '") : NULL;
    const char *s = ok ? strstr(h, "'shape': (") : NULL;
    ok = d && s && !strstr(h, "'fortran_order': True");
    if (ok) {
        d += 10;
        size_t n = strcspn(d, "'");
        ok = n < sizeof out->descr;
        if (ok) {
            memcpy(out->descr, d, n);
            out->descr[n] = '\0';
        }
        out->numel = 1;
        for (s += 10; ok && *s != ')';) {
            char *end;
            long long v = strtoll(s, &end, 10);
            if (end == s)
                break;
            out->numel *= v;
            s = end + strspn(end, ", ");
        }
    }
    size_t es = ok ? (size_t)(out->descr[2] - '0') : 0;
    ok = ok && es >= 1 && es <= 8;
    out->data = ok ? malloc(es * (size_t)out->numel + 1) : NULL;
    ok = out->data && fread(out->data, es, (size_t)out->numel, f) == (size_t)out->numel;
    if (!ok)
        fprintf(stderr, "%s: not a .npy file this driver reads\n", path);
    free(h);
    fclose(f);
    return ok;
}

static int npy_save(const char *path, const char *descr, const void *data, int64_t n, size_t es) {
    char h[128];
    int len = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%lld,), }",
                       descr, (long long)n);
    while ((10 + len + 1) % 64)
        h[len++] = ' ';
    h[len++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    unsigned char pre[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, (size_t)len, f) == (size_t)len &&
             fwrite(data, es, (size_t)n, f) == (size_t)n;
    return fclose(f) == 0 && ok;
}

/* Element access through memcpy: with --misalign an array of 8-byte
 * elements may start at an address that is only 4-aligned. */
static double npy_get(const Npy *a, int64_t i) {
    const char *p = a->data;
    if (strcmp(a->descr, "<f4") == 0) {
        float v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    if (strcmp(a->descr, "<f8") == 0) {
        double v;
        memcpy(&v, p + i * 8, 8);
        return v;
    }
    if (strcmp(a->descr, "<i4") == 0) {
        int32_t v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    if (strcmp(a->descr, "<i8") == 0) {
        int64_t v;
        memcpy(&v, p + i * 8, 8);
        return (double)v;
    }
    return NAN;
}

/* ---- dtypes ---- */

static size_t dtype_size(const char *t) {
    return strcmp(t, "f64") == 0 || strcmp(t, "i64") == 0 ? 8 : 4;
}

static const char *dtype_descr(const char *t) {
    return strcmp(t, "f32") == 0   ? "<f4"
           : strcmp(t, "f64") == 0 ? "<f8"
           : strcmp(t, "i32") == 0 ? "<i4"
                                   : "<i8";
}

static void put_elem(void *p, const char *t, int64_t i, double v) {
    char *q = p;
    if (strcmp(t, "f32") == 0) {
        float x = (float)v;
        memcpy(q + i * 4, &x, 4);
    } else if (strcmp(t, "f64") == 0) {
        memcpy(q + i * 8, &v, 8);
    } else if (strcmp(t, "i32") == 0) {
        int32_t x = (int32_t)v;
        memcpy(q + i * 4, &x, 4);
    } else {
        int64_t x = (int64_t)v;
        memcpy(q + i * 8, &x, 8);
    }
}

/* ---- the driver's own context ---- */

static int n_allocs, n_frees;

static void two_chunks(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *closure) {
    if (n <= 0)
        return;
    int64_t mid = n / 2;
    if (mid > 0)
        fn(closure, 0, mid, 0);
    fn(closure, mid, n, 1);
}

static void *counting_alloc(struct rv_rt_ctx *ctx, size_t bytes) {
    (void)ctx;
    n_allocs++;
    return aligned_alloc(RV_RT_ALIGN, (bytes + RV_RT_ALIGN) / RV_RT_ALIGN * RV_RT_ALIGN);
}

static void counting_free(struct rv_rt_ctx *ctx, void *p) {
    (void)ctx;
    if (p)
        n_frees++;
    free(p);
}

/* The threads of this process (Linux: /proc/self/status), 0 if unknown:
 * a pool of N threads must have started N - 1 workers. */
static int process_threads(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0)
            n = atoi(line + 8);
    if (f)
        fclose(f);
    return n;
}

/* ---- main ---- */

/* An array of n elements of es bytes, 64-byte aligned or one element off
 * (4 bytes off made i64 and f64 arrays misaligned for their own type: UB,
 * which the sanitizers report). */
static void *array_new(int64_t n, size_t es, int misalign, void **block) {
    size_t bytes = (size_t)(n > 0 ? n : 1) * es + 128;
    char *b = aligned_alloc(64, (bytes + 63) / 64 * 64);
    *block = b;
    return b ? b + (misalign ? es : 0) : NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: aot_driver REF OUT [--own-ctx] [--misalign] NAME=V...\n");
        return 2;
    }
    const char *ref = argv[1], *out = argv[2];
    int own_ctx = 0, misalign = 0;
    model_args a;
    memset(&a, 0, sizeof a);
    char *base = (char *)&a;
    void *blocks[64] = {0};
    int nblocks = 0, ok = 1;
    /* sizes */
    for (int i = 0; i < model_num_fields; i++) {
        const model_field *f = &model_fields[i];
        if (f->kind != model_FIELD_SIZE)
            continue;
        int found = 0;
        size_t n = strlen(f->name);
        for (int j = 3; j < argc; j++)
            if (strncmp(argv[j], f->name, n) == 0 && argv[j][n] == '=') {
                int64_t v = strtoll(argv[j] + n + 1, NULL, 10);
                memcpy(base + f->offset, &v, sizeof v);
                found = 1;
            }
        if (!found) {
            fprintf(stderr, "no value for size %s\n", f->name);
            return 2;
        }
    }
    for (int j = 3; j < argc; j++) {
        own_ctx |= strcmp(argv[j], "--own-ctx") == 0;
        misalign |= strcmp(argv[j], "--misalign") == 0;
        if (strcmp(argv[j], "--threads") == 0 && j + 1 < argc) {
            int want = atoi(argv[++j]), got = model_set_num_threads(want);
            if (got != want && got != 1) {
                fprintf(stderr, "model_set_num_threads(%d) returned %d\n", want, got);
                return 1;
            }
            if (model_num_threads() != got) {
                fprintf(stderr, "model_num_threads() is %d, not %d\n", model_num_threads(), got);
                return 1;
            }
            if (got > 1 && process_threads() < got) {
                fprintf(stderr, "model_set_num_threads(%d): the process has %d threads\n", want,
                        process_threads());
                return 1;
            }
        }
    }
    if (model_args_size != sizeof(model_args)) {
        fprintf(stderr, "model_args_size %zu, sizeof(model_args) %zu\n", model_args_size,
                sizeof(model_args));
        return 1;
    }
    /* UF arrays first (input counts may depend on them), then the rest */
    for (int pass = 0; pass < 2 && ok; pass++)
        for (int i = 0; i < model_num_fields && ok; i++) {
            const model_field *f = &model_fields[i];
            if (f->kind == model_FIELD_SIZE || (pass == 0) != (f->kind == model_FIELD_UFUN))
                continue;
            int64_t n = f->numel(&a);
            size_t es = dtype_size(f->dtype);
            if (nblocks == (int)(sizeof blocks / sizeof blocks[0])) {
                fprintf(stderr, "too many arrays for this driver\n");
                return 1;
            }
            void *p = array_new(n, es, misalign, &blocks[nblocks++]);
            if (f->kind != model_FIELD_OUTPUT) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s.npy", ref, f->name);
                Npy x;
                if (!npy_load(path, &x))
                    return 1;
                if (x.numel != n) {
                    fprintf(stderr, "%s: %lld elements in %s, model_numel_%s says %lld\n", f->name,
                            (long long)x.numel, path, f->name, (long long)n);
                    ok = 0;
                }
                for (int64_t k = 0; ok && k < n; k++)
                    put_elem(p, f->dtype, k, npy_get(&x, k));
                free(x.data);
            }
            memcpy(base + f->offset, &p, sizeof p);
        }
    if (!ok)
        return 1;
    struct rv_rt_ctx ctx = model_default_ctx();
    ctx.num_threads = 2;
    ctx.parallel_for = two_chunks;
    ctx.alloc = counting_alloc;
    ctx.free = counting_free;
    int32_t rc = model_run(&a, own_ctx ? &ctx : NULL);
    if (rc != RV_RT_OK) {
        const char *why = own_ctx ? model_check_message(ctx.error) : NULL;
        fprintf(stderr, "model_run returned %d%s%s\n", (int)rc, why ? ": " : "", why ? why : "");
        return 1;
    }
    if (own_ctx && n_allocs != n_frees) {
        fprintf(stderr, "model_run: %d allocations, %d frees\n", n_allocs, n_frees);
        ok = 0;
    }
    /* outputs: save and compare */
    for (int i = 0; i < model_num_fields; i++) {
        const model_field *f = &model_fields[i];
        if (f->kind != model_FIELD_OUTPUT)
            continue;
        int64_t n = f->numel(&a);
        void *p;
        memcpy(&p, base + f->offset, sizeof p);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.npy", out, f->name);
        if (!npy_save(path, dtype_descr(f->dtype), p, n, dtype_size(f->dtype))) {
            fprintf(stderr, "%s: cannot write\n", path);
            ok = 0;
            continue;
        }
        snprintf(path, sizeof path, "%s/%s.npy", ref, f->name);
        Npy want;
        if (!npy_load(path, &want))
            return 1;
        Npy got = {.numel = n, .data = p};
        snprintf(got.descr, sizeof got.descr, "%s", dtype_descr(f->dtype));
        double tol = f->dtype[0] != 'f' ? 0 : strcmp(f->dtype, "f32") == 0 ? 1e-4 : 1e-10;
        double max_abs = 0;
        int64_t bad = want.numel == n ? -1 : 0;
        for (int64_t k = 0; bad < 0 && k < n; k++) {
            double x = npy_get(&got, k), y = npy_get(&want, k);
            double d = isnan(x) != isnan(y) ? INFINITY : isnan(x) || x == y ? 0 : fabs(x - y);
            max_abs = d > max_abs ? d : max_abs;
            if (d > tol * (1.0 + fabs(y)))
                bad = k;
        }
        printf("%s: %lld elements, max abs error %.3g: %s\n", f->name, (long long)n, max_abs,
               bad < 0 ? "ok" : "MISMATCH");
        if (bad >= 0 && want.numel != n)
            printf("  the reference has %lld elements\n", (long long)want.numel);
        else if (bad >= 0)
            printf("  first mismatch at %lld: aot %.9g, interpreter %.9g\n", (long long)bad,
                   npy_get(&got, bad), npy_get(&want, bad));
        ok &= bad < 0;
        free(want.data);
    }
    /* the shapes: their product is the element count */
    for (int i = 0; i < model_num_fields; i++) {
        const model_field *f = &model_fields[i];
        const model_field_info *fi = &model_field_infos[i];
        if (f->kind == model_FIELD_SIZE) {
            int64_t v;
            memcpy(&v, base + f->offset, sizeof v);
            if (fi->ndim != 0 || fi->shape || v < fi->lo || v > fi->hi ||
                strncmp(fi->decl, "size ", 5) != 0) {
                printf("model_field_infos[%d] (size %s) is wrong\n", i, f->name);
                ok = 0;
            }
            continue;
        }
        int64_t dims[16], prod = 1;
        int nd = fi->ndim <= 16 && fi->shape ? fi->shape(&a, dims) : -2;
        for (int k = 0; k < nd; k++)
            prod *= dims[k];
        if (nd != fi->ndim || prod != f->numel(&a) || !strstr(fi->decl, f->name)) {
            printf("model_field_infos[%d] (%s): rank %d of %d, %lld elements of %lld\n", i,
                   f->name, nd, fi->ndim, (long long)prod, (long long)f->numel(&a));
            ok = 0;
        }
    }
    if (model_last_error()[0]) {
        printf("model_last_error() is '%s' after a success\n", model_last_error());
        ok = 0;
    }
    /* a size outside its range is refused, the message naming it */
    for (int i = 0; i < model_num_fields; i++) {
        const model_field *f = &model_fields[i];
        if (f->kind != model_FIELD_SIZE)
            continue;
        model_args b = a;
        int64_t v = INT64_MIN;
        memcpy((char *)&b + f->offset, &v, sizeof v);
        char want[128];
        snprintf(want, sizeof want, "size %s = %lld is outside its declared range", f->name,
                 (long long)v);
        if ((rc = model_run(&b, NULL)) != RV_RT_ERR_BOUNDS) {
            printf("size %s out of range: model_run returned %d, not RV_RT_ERR_BOUNDS\n", f->name,
                   (int)rc);
            ok = 0;
        } else if (!strstr(model_last_error(), want)) {
            printf("size %s out of range: model_last_error() is '%s'\n", f->name,
                   model_last_error());
            ok = 0;
        }
        break;
    }
    /* a NULL array that has elements is refused, the message naming it */
    for (int i = 0; i < model_num_fields; i++) {
        const model_field *f = &model_fields[i];
        if (f->kind != model_FIELD_INPUT || f->numel(&a) <= 0)
            continue;
        model_args b = a;
        void *null = NULL;
        memcpy((char *)&b + f->offset, &null, sizeof null);
        char want[128];
        snprintf(want, sizeof want, "input %s is NULL but has %lld elements", f->name,
                 (long long)f->numel(&a));
        if ((rc = model_run(&b, NULL)) != RV_RT_ERR_BOUNDS || !strstr(model_last_error(), want)) {
            printf("input %s NULL: model_run returned %d, model_last_error() '%s'\n", f->name,
                   (int)rc, model_last_error());
            ok = 0;
        }
        break;
    }
    for (int i = 0; i < nblocks; i++)
        free(blocks[i]);
    return ok ? 0 : 1;
}
