/*
 * test_weights.c — unit tests for weights files (src/runtime/weights.c,
 * safetensors.c): listing and loading every supported dtype, unsupported
 * dtypes, one test per kind of corrupt header, the file cut at every byte,
 * and binding a file's tensors to a module's inputs.
 *
 * The files are written byte by byte here (an 8-byte length, the JSON, the
 * data), so the tests need neither Python nor the safetensors package.
 */
#include <math.h>
#include <unistd.h>

#include "harness.h"
#include "runtime/runtime.h"

static char tmpdir[64];

static const char *tmp_path(const char *name) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

/* A safetensors file: header `json`, then `ndata` bytes of `data`. */
static const char *write_st(const char *json, const void *data, size_t ndata) {
    const char *path = tmp_path("w.safetensors");
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(json);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)(n >> (8 * i));
    if (!f || fwrite(len8, 1, 8, f) != 8 || fwrite(json, 1, n, f) != n ||
        (ndata && fwrite(data, 1, ndata, f) != ndata))
        fprintf(stderr, "cannot write %s\n", path);
    if (f)
        fclose(f);
    return path;
}

/* W: f32[2, 3] = 0..5 / 2, idx: i64[2] = {-1, 1 << 40}, s: f64[] = 2.5,
 * h: i8[2], n: i32[0]; the JSON lists them out of offset order. */
static const char valid_json[] =
    "{\"idx\": {\"dtype\": \"I64\", \"shape\": [2], \"data_offsets\": [24, 40]},"
    " \"W\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
    " \"__metadata__\": {\"format\": \"pt\"},"
    " \"s\": {\"dtype\": \"F64\", \"shape\": [], \"data_offsets\": [40, 48]},"
    " \"n\": {\"dtype\": \"I32\", \"shape\": [0], \"data_offsets\": [48, 48]},"
    " \"h\": {\"dtype\": \"I8\", \"shape\": [2], \"data_offsets\": [48, 50]}}    ";

static size_t valid_data(unsigned char *buf) {
    float w[6];
    for (int i = 0; i < 6; i++)
        w[i] = (float)i / 2;
    int64_t idx[2] = {-1, (int64_t)1 << 40};
    double s = 2.5;
    memcpy(buf, w, 24);
    memcpy(buf + 24, idx, 16);
    memcpy(buf + 40, &s, 8);
    buf[48] = 1;
    buf[49] = 0xff;
    return 50;
}

static void test_st_load(void) {
    unsigned char data[64];
    size_t nd = valid_data(data);
    const char *path = write_st(valid_json, data, nd);
    rv_weights *w = NULL;
    CHECK(rv_weights_open(path, &w) == RV_OK);
    if (!w)
        return;
    CHECK_EQ_INT(rv_weights_count(w), 5);
    const char *names[] = {"W", "h", "idx", "n", "s"};
    for (int i = 0; i < 5; i++)
        CHECK(strcmp(rv_weights_name(w, i), names[i]) == 0);
    CHECK(rv_weights_name(w, 5) == NULL);

    rv_array *a = NULL;
    CHECK(rv_weights_load(w, "W", &a) == RV_OK);
    CHECK(a && rv_array_dtype(a) == RV_F32 && rv_array_ndim(a) == 2);
    CHECK(a && rv_array_shape(a)[0] == 2 && rv_array_shape(a)[1] == 3);
    for (int i = 0; a && i < 6; i++)
        CHECK(rv_array_get_f64(a, i) == i / 2.0);
    rv_array_free(a);
    CHECK(rv_weights_load(w, "idx", &a) == RV_OK);
    CHECK(a && rv_array_dtype(a) == RV_I64 && rv_array_get_i64(a, 0) == -1 &&
          rv_array_get_i64(a, 1) == (int64_t)1 << 40);
    rv_array_free(a);
    CHECK(rv_weights_load(w, "s", &a) == RV_OK);
    CHECK(a && rv_array_ndim(a) == 0 && rv_array_get_f64(a, 0) == 2.5);
    rv_array_free(a);
    CHECK(rv_weights_load(w, "n", &a) == RV_OK);
    CHECK(a && rv_array_dtype(a) == RV_I32 && rv_array_numel(a) == 0);
    rv_array_free(a);

    CHECK(rv_weights_load(w, "h", &a) == RV_ERR_UNSUPPORTED && !a);
    CHECK_STR_CONTAINS(rv_last_error(), "tensor 'h' has dtype I8");
    CHECK(rv_weights_load(w, "missing", &a) == RV_ERR_ARG && !a);
    CHECK_STR_CONTAINS(rv_last_error(), "no tensor named 'missing'");
    rv_weights_close(w);
}

/* F16 and BF16 are widened to f32 exactly: normal, subnormal, zero,
 * infinite and NaN values. */
static void test_st_widen(void) {
    static const uint16_t f16[] = {0x3c00, 0xc000, 0x0001, 0x8000, 0x7c00, 0x7e00, 0x7bff, 0x03ff};
    static const uint16_t bf16[] = {0x3f80, 0xc049, 0x0001, 0xff80};
    unsigned char data[24];
    for (int i = 0; i < 8; i++) {
        data[2 * i] = (unsigned char)f16[i];
        data[2 * i + 1] = (unsigned char)(f16[i] >> 8);
    }
    for (int i = 0; i < 4; i++) {
        data[16 + 2 * i] = (unsigned char)bf16[i];
        data[16 + 2 * i + 1] = (unsigned char)(bf16[i] >> 8);
    }
    const char *path =
        write_st("{\"h\": {\"dtype\": \"F16\", \"shape\": [2, 4], \"data_offsets\": [0, 16]},"
                 " \"b\": {\"dtype\": \"BF16\", \"shape\": [4], \"data_offsets\": [16, 24]}}",
                 data, 24);
    rv_weights *w = NULL;
    CHECK(rv_weights_open(path, &w) == RV_OK);
    rv_array *a = NULL;
    CHECK(w && rv_weights_load(w, "h", &a) == RV_OK);
    CHECK(a && rv_array_dtype(a) == RV_F32 && rv_array_ndim(a) == 2 && rv_array_shape(a)[1] == 4);
    if (a) {
        const float *f = rv_array_cdata(a);
        CHECK(f[0] == 1.0f && f[1] == -2.0f && f[2] == ldexpf(1, -24) && f[3] == 0 &&
              signbit(f[3]) && isinf(f[4]) && f[4] > 0 && isnan(f[5]) && f[6] == 65504.0f &&
              f[7] == ldexpf(1023, -24));
    }
    rv_array_free(a);
    CHECK(w && rv_weights_load(w, "b", &a) == RV_OK);
    if (a) {
        const float *f = rv_array_cdata(a);
        CHECK(f[0] == 1.0f && f[1] == -3.140625f && f[2] == ldexpf(1, -133) && isinf(f[3]) &&
              f[3] < 0);
    }
    rv_array_free(a);
    rv_weights_close(w);
}

/* Each header must be refused with a message containing `want` (and the
 * file's path). */
static void expect_corrupt(const char *json, size_t ndata, const char *want) {
    unsigned char data[256] = {0};
    const char *path = write_st(json, data, ndata);
    rv_weights *w = (rv_weights *)1;
    rv_status st = rv_weights_open(path, &w);
    CHECK(st == RV_ERR_IO && w == NULL);
    CHECK_STR_CONTAINS(rv_last_error(), path);
    CHECK_STR_CONTAINS(rv_last_error(), want);
}

#define T1(dt, shape, off)                                                                         \
    "{\"t\": {\"dtype\": \"" dt "\", \"shape\": " shape ", \"data_offsets\": " off "}}"

static void test_st_corrupt(void) {
    expect_corrupt("{\"t\": ", 0, "not valid JSON");
    expect_corrupt("{} x", 0, "unexpected bytes after");
    expect_corrupt("[1, 2]", 0, "not a JSON object");
    expect_corrupt("", 0, "header is empty");
    expect_corrupt("{\"t\": 3}", 0, "tensor 't': its description is not a JSON object");
    expect_corrupt(T1("F32", "[2]", "[0, 4]"), 4,
                   "tensor 't': data_offsets [0, 4] hold 4 bytes but F32");
    expect_corrupt(T1("F32", "[1]", "[4, 0]"), 4, "tensor 't': data_offsets [4, 0] end before");
    expect_corrupt(T1("F32", "[1]", "[0, 4]"), 2,
                   "tensor 't': data_offsets [0, 4] run past the end");
    expect_corrupt(T1("F32", "[1]", "[0]"), 4, "'data_offsets' is not a list of two");
    expect_corrupt(T1("F32", "[1]", "[0, -4]"), 4, "'data_offsets' is not a list of two");
    expect_corrupt(T1("F32", "[-1]", "[0, 4]"), 4, "dimension 0 of 'shape' is not a non-negative");
    expect_corrupt(T1("F32", "[1.5]", "[0, 4]"), 4, "dimension 0 of 'shape'");
    expect_corrupt(T1("F32", "3", "[0, 4]"), 4, "'shape' is not a list");
    expect_corrupt(T1("F32", "[1,1,1,1,1,1,1,1,1]", "[0, 4]"), 4, "tensor 't' has 9 dimensions");
    expect_corrupt(T1("F32", "[4294967296, 4294967296]", "[0, 4]"), 4,
                   "the shape's size overflows");
    expect_corrupt(T1("Q7", "[1]", "[0, 4]"), 4, "tensor 't': unknown dtype 'Q7'");
    expect_corrupt(T1("F32", "[1]", "[0, 4]"), 8, "4 bytes of trailing garbage");
    expect_corrupt("{\"t\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
                   "tensor 't': no 'dtype'");
    expect_corrupt("{\"t\": {\"dtype\": 1, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
                   "'dtype' is not a string");
    expect_corrupt("{\"t\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, "no 'shape'");
    expect_corrupt("{\"t\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, "no 'data_offsets'");
    expect_corrupt("{\"t\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [1], "
                   "\"data_offsets\": [0, 4]}}",
                   4, "key 'dtype' appears twice");
    expect_corrupt("{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], "
                   "\"x\": 1}}",
                   4, "tensor 't': unknown key 'x'");
    expect_corrupt("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                   " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
                   12, "tensors 'a' and 'b' overlap");
    expect_corrupt("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                   " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
                   12, "4 unused bytes before the data of tensor 'b'");
    expect_corrupt("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                   " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
                   8, "tensor 'a' appears twice");
    expect_corrupt("{\"__metadata__\": {\"k\": 1}}", 0, "'__metadata__' entry 'k' is not a string");
    expect_corrupt("{\"__metadata__\": []}", 0, "'__metadata__' is not a JSON object");

    /* a header length beyond the file, and files too short for one */
    const char *path = tmp_path("w.safetensors");
    FILE *f = fopen(path, "wb");
    fwrite("\xff\x00\x00\x00\x00\x00\x00\x00{}", 1, 10, f);
    fclose(f);
    rv_weights *w;
    CHECK(rv_weights_open(path, &w) == RV_ERR_IO);
    CHECK_STR_CONTAINS(rv_last_error(), "header length 255 exceeds the 2 bytes");
    f = fopen(path, "wb");
    fwrite("\x02\x00\x00", 1, 3, f);
    fclose(f);
    CHECK(rv_weights_open(path, &w) == RV_ERR_IO);
    CHECK_STR_CONTAINS(rv_last_error(), "too short for the header length");
    CHECK(rv_weights_open(tmp_path("absent"), &w) == RV_ERR_IO);
    CHECK_STR_CONTAINS(rv_last_error(), "cannot open");
    /* an empty file set is valid */
    write_st("{}", NULL, 0);
    CHECK(rv_weights_open(path, &w) == RV_OK && rv_weights_count(w) == 0);
    rv_weights_close(w);
}

/* The valid file cut at every length, and with every byte of the header
 * flipped: always an error or a consistent index, never a crash (the ASan
 * build runs this). */
static void test_st_truncated(void) {
    unsigned char data[64];
    size_t nd = valid_data(data);
    size_t nj = strlen(valid_json);
    size_t total = 8 + nj + nd;
    unsigned char *file = base_xmalloc(total);
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)((uint64_t)nj >> (8 * i));
    memcpy(file + 8, valid_json, nj);
    memcpy(file + 8 + nj, data, nd);
    const char *path = tmp_path("cut.safetensors");
    for (size_t cut = 0; cut < total; cut++) {
        FILE *f = fopen(path, "wb");
        if (cut)
            fwrite(file, 1, cut, f);
        fclose(f);
        rv_weights *w = (rv_weights *)1;
        CHECK(rv_weights_open(path, &w) == RV_ERR_IO && !w);
    }
    for (size_t i = 0; i < 8 + nj; i++) {
        unsigned char saved = file[i];
        file[i] ^= 0x5a;
        FILE *f = fopen(path, "wb");
        fwrite(file, 1, total, f);
        fclose(f);
        rv_weights *w = NULL;
        if (rv_weights_open(path, &w) == RV_OK) {
            for (int k = 0; k < rv_weights_count(w); k++) {
                rv_array *a = NULL;
                rv_weights_load(w, rv_weights_name(w, k), &a);
                rv_array_free(a);
            }
            rv_weights_close(w);
        }
        file[i] = saved;
    }
    base_free(file);
}

/* ---- .npz ---- */

typedef struct Zip {
    unsigned char b[8192];
    size_t n;
    unsigned char cd[2048];
    size_t ncd;
    int members;
} Zip;

static void put(unsigned char *b, size_t *n, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++)
        b[(*n)++] = (unsigned char)(v >> (8 * i));
}

/* Appends member `name` holding `len` bytes, as np.savez writes it: stored,
 * sizes 0xffffffff in the local header with the real ones in a zip64 extra
 * field. `method` 8 only labels it deflated. */
static void zip_add(Zip *z, const char *name, const void *data, size_t len, int method) {
    size_t nl = strlen(name), off = z->n;
    uint32_t crc = rt_crc32(0, data, len);
    put(z->b, &z->n, 0x04034b50, 4);
    put(z->b, &z->n, 45, 2);
    put(z->b, &z->n, 0, 2);
    put(z->b, &z->n, (uint64_t)method, 2);
    put(z->b, &z->n, 0, 4); /* time, date */
    put(z->b, &z->n, crc, 4);
    put(z->b, &z->n, 0xffffffff, 4);
    put(z->b, &z->n, 0xffffffff, 4);
    put(z->b, &z->n, nl, 2);
    put(z->b, &z->n, 20, 2);
    memcpy(z->b + z->n, name, nl);
    z->n += nl;
    put(z->b, &z->n, 1, 2);
    put(z->b, &z->n, 16, 2);
    put(z->b, &z->n, len, 8);
    put(z->b, &z->n, len, 8);
    memcpy(z->b + z->n, data, len);
    z->n += len;

    put(z->cd, &z->ncd, 0x02014b50, 4);
    put(z->cd, &z->ncd, 45, 2);
    put(z->cd, &z->ncd, 45, 2);
    put(z->cd, &z->ncd, 0, 2);
    put(z->cd, &z->ncd, (uint64_t)method, 2);
    put(z->cd, &z->ncd, 0, 4);
    put(z->cd, &z->ncd, crc, 4);
    put(z->cd, &z->ncd, len, 4);
    put(z->cd, &z->ncd, len, 4);
    put(z->cd, &z->ncd, nl, 2);
    put(z->cd, &z->ncd, 0, 2); /* extra */
    put(z->cd, &z->ncd, 0, 2); /* comment */
    put(z->cd, &z->ncd, 0, 2); /* disk */
    put(z->cd, &z->ncd, 0, 2);
    put(z->cd, &z->ncd, 0x80, 4);
    put(z->cd, &z->ncd, off, 4);
    memcpy(z->cd + z->ncd, name, nl);
    z->ncd += nl;
    z->members++;
}

/* Appends the central directory and end record; returns the length. */
static size_t zip_finish(Zip *z) {
    size_t cd_off = z->n;
    memcpy(z->b + z->n, z->cd, z->ncd);
    z->n += z->ncd;
    put(z->b, &z->n, 0x06054b50, 4);
    put(z->b, &z->n, 0, 4);
    put(z->b, &z->n, (uint64_t)z->members, 2);
    put(z->b, &z->n, (uint64_t)z->members, 2);
    put(z->b, &z->n, z->ncd, 4);
    put(z->b, &z->n, cd_off, 4);
    put(z->b, &z->n, 0, 2);
    return z->n;
}

/* The bytes of `a` as a .npy file (rv_npy_save's), into buf. */
static size_t npy_bytes(const rv_array *a, unsigned char *buf, size_t cap) {
    const char *path = tmp_path("a.npy");
    CHECK(rv_npy_save(path, a) == RV_OK);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap, f) : 0;
    if (f)
        fclose(f);
    return n;
}

static const char *write_file(const char *name, const void *data, size_t n) {
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n)
        fprintf(stderr, "cannot write %s\n", path);
    if (f)
        fclose(f);
    return path;
}

/* W: f32[2, 3] = 0..5, idx: i64[2] = {7, -7}. */
static size_t valid_npz(Zip *z) {
    memset(z, 0, sizeof *z);
    int64_t ws[2] = {2, 3}, is[1] = {2};
    rv_array *w = rv_array_new(RV_F32, 2, ws), *idx = rv_array_new(RV_I64, 1, is);
    for (int i = 0; i < 6; i++)
        rv_array_set_f64(w, i, i);
    rv_array_set_i64(idx, 0, 7);
    rv_array_set_i64(idx, 1, -7);
    unsigned char npy[512];
    size_t n = npy_bytes(w, npy, sizeof npy);
    zip_add(z, "W.npy", npy, n, 0);
    n = npy_bytes(idx, npy, sizeof npy);
    zip_add(z, "idx.npy", npy, n, 0);
    rv_array_free(w);
    rv_array_free(idx);
    return zip_finish(z);
}

static void test_npz_load(void) {
    static Zip z;
    size_t n = valid_npz(&z);
    const char *path = write_file("w.npz", z.b, n);
    rv_weights *w = NULL;
    CHECK(rv_weights_open(path, &w) == RV_OK);
    if (!w) {
        fprintf(stderr, "%s\n", rv_last_error());
        return;
    }
    CHECK_EQ_INT(rv_weights_count(w), 2);
    CHECK(strcmp(rv_weights_name(w, 0), "W") == 0 && strcmp(rv_weights_name(w, 1), "idx") == 0);
    rv_array *a = NULL;
    CHECK(rv_weights_load(w, "W", &a) == RV_OK);
    CHECK(a && rv_array_ndim(a) == 2 && rv_array_shape(a)[1] == 3 && rv_array_get_f64(a, 5) == 5);
    rv_array_free(a);
    CHECK(rv_weights_load(w, "idx", &a) == RV_OK);
    CHECK(a && rv_array_get_i64(a, 1) == -7);
    rv_array_free(a);
    rv_weights_close(w);

    /* a flipped data byte is found by the CRC when the tensor is loaded */
    z.b[n - z.ncd - 22 - 1] ^= 1;
    path = write_file("w.npz", z.b, n);
    CHECK(rv_weights_open(path, &w) == RV_OK);
    CHECK(w && rv_weights_load(w, "idx", &a) == RV_ERR_IO && !a);
    CHECK_STR_CONTAINS(rv_last_error(), "tensor 'idx': CRC-32 mismatch");
    CHECK(w && rv_weights_load(w, "W", &a) == RV_OK);
    rv_array_free(a);
    rv_weights_close(w);
}

static void expect_npz_error(const Zip *z, size_t n, rv_status want_st, const char *want) {
    const char *path = write_file("bad.npz", z->b, n);
    rv_weights *w = (rv_weights *)1;
    CHECK(rv_weights_open(path, &w) == want_st && !w);
    CHECK_STR_CONTAINS(rv_last_error(), path);
    CHECK_STR_CONTAINS(rv_last_error(), want);
}

static void test_npz_corrupt(void) {
    static Zip z;
    unsigned char npy[512];
    int64_t s1[1] = {1};
    rv_array *one = rv_array_new(RV_F32, 1, s1);
    size_t nn = npy_bytes(one, npy, sizeof npy);
    rv_array_free(one);

    memset(&z, 0, sizeof z);
    zip_add(&z, "W.npy", npy, nn, 8);
    expect_npz_error(&z, zip_finish(&z), RV_ERR_UNSUPPORTED, "np.savez_compressed");
    memset(&z, 0, sizeof z);
    zip_add(&z, "W.txt", npy, nn, 0);
    expect_npz_error(&z, zip_finish(&z), RV_ERR_IO, "member 'W.txt' is not a .npy file");
    memset(&z, 0, sizeof z);
    zip_add(&z, "W.npy", npy, nn - 2, 0);
    expect_npz_error(&z, zip_finish(&z), RV_ERR_IO, "W.npy: data is truncated");
    memset(&z, 0, sizeof z);
    zip_add(&z, "W.npy", "not npy at all", 14, 0);
    expect_npz_error(&z, zip_finish(&z), RV_ERR_IO, "W.npy: not a .npy file");
    /* two central entries for one local header */
    memset(&z, 0, sizeof z);
    zip_add(&z, "W.npy", npy, nn, 0);
    memcpy(z.cd + z.ncd, z.cd, z.ncd);
    z.ncd *= 2;
    z.members = 2;
    expect_npz_error(&z, zip_finish(&z), RV_ERR_IO, "members 'W' and 'W' overlap");
    /* the end record's directory offset off by one */
    size_t n = valid_npz(&z);
    z.b[n - 6]++;
    expect_npz_error(&z, n, RV_ERR_IO, "does not end where its end record starts");
    /* garbage after the end record */
    n = valid_npz(&z);
    expect_npz_error(&z, n + 3, RV_ERR_IO, "no end of central directory record");

    /* cut at every byte; every byte flipped: errors, never a crash */
    n = valid_npz(&z);
    for (size_t cut = 0; cut < n; cut++) {
        const char *path = write_file("cut.npz", z.b, cut);
        rv_weights *w = (rv_weights *)1;
        CHECK(rv_weights_open(path, &w) != RV_OK && !w);
    }
    for (size_t i = 0; i < n; i++) {
        z.b[i] ^= 0xa5;
        const char *path = write_file("cut.npz", z.b, n);
        rv_weights *w = NULL;
        if (rv_weights_open(path, &w) == RV_OK) {
            for (int k = 0; k < rv_weights_count(w); k++) {
                rv_array *a = NULL;
                rv_weights_load(w, rv_weights_name(w, k), &a);
                rv_array_free(a);
            }
            rv_weights_close(w);
        }
        z.b[i] ^= 0xa5;
    }
}

static const char module_src[] = "size T in 1..4\n"
                                 "ufun len[b < T] in 0..3\n"
                                 "input X : f32[T, 3]\n"
                                 "input W : f32[2, 3]\n"
                                 "Y[t, j] = sum(k < 3) X[t, k] * W[j, k]\n";

static void test_bind_weights(void) {
    rv_module *m = NULL;
    CHECK(rv_module_parse("w.rv", module_src, &m) == RV_OK);
    if (!m) {
        fprintf(stderr, "%s\n", rv_last_error());
        return;
    }
    float w[8] = {1, 2, 3, 4, 5, 6};
    const char *path =
        write_st("{\"W\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
                 " \"other\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [24, 28]}}",
                 w, 28);
    rv_bindings *b = rv_bindings_new(m);
    CHECK(rv_bindings_load_weights(b, path) == RV_OK);
    const rv_array *a = rv_bindings_get_array(b, "W");
    CHECK(a && rv_array_get_f64(a, 5) == 6);
    CHECK(rv_bindings_get_array(b, "X") == NULL);
    /* the file's W is owned by the bindings; a second load replaces it */
    CHECK(rv_bindings_load_weights(b, path) == RV_OK);
    CHECK(rv_bindings_set_size(b, "T", 2) == RV_OK);
    CHECK(rv_bindings_randomize(b, 1) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_OK);
    rv_bindings_free(b);

    /* a dtype that disagrees with the declaration names the input */
    path =
        write_st("{\"W\": {\"dtype\": \"F64\", \"shape\": [2], \"data_offsets\": [0, 16]}}", w, 16);
    b = rv_bindings_new(m);
    CHECK(rv_bindings_load_weights(b, path) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "input W is declared f32 but the file's tensor is f64");
    /* so does a ufun array of a float dtype */
    path =
        write_st("{\"len\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", w, 4);
    CHECK(rv_bindings_load_weights(b, path) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "ufun len");
    /* a rank or constant extent that disagrees, when the file is bound */
    path = write_st("{\"W\": {\"dtype\": \"F32\", \"shape\": [3, 2], \"data_offsets\": [0, 24]}}",
                    w, 24);
    CHECK(rv_bindings_load_weights(b, path) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(
        rv_last_error(),
        "input W is declared with extent 2 in dimension 0 but the file's tensor has 3");
    path =
        write_st("{\"W\": {\"dtype\": \"F32\", \"shape\": [6], \"data_offsets\": [0, 24]}}", w, 24);
    CHECK(rv_bindings_load_weights(b, path) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(),
                       "input W is declared with 2 dimensions but the file's tensor has 1");
    /* an extent of a size, when the run starts */
    path = write_st("{\"X\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}",
                    w, 24);
    CHECK(rv_bindings_load_weights(b, path) == RV_OK);
    CHECK(rv_bindings_set_size(b, "T", 1) == RV_OK);
    CHECK(rv_bindings_randomize(b, 1) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_ERR_SHAPE);
    CHECK_STR_CONTAINS(rv_last_error(), "expected shape [1, 3]");
    /* a file that matches nothing */
    path =
        write_st("{\"Q\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", w, 4);
    CHECK(rv_bindings_load_weights(b, path) == RV_ERR_ARG);
    CHECK_STR_CONTAINS(rv_last_error(), "none of its 1 tensors is named after an input");
    rv_bindings_free(b);

    /* an .npz binds alike; its i64 'idx' is named after nothing */
    static Zip z;
    size_t n = valid_npz(&z);
    path = write_file("w.npz", z.b, n);
    b = rv_bindings_new(m);
    CHECK(rv_bindings_load_weights(b, path) == RV_OK);
    a = rv_bindings_get_array(b, "W");
    CHECK(a && rv_array_get_f64(a, 4) == 4);
    CHECK(rv_bindings_set_size(b, "T", 2) == RV_OK);
    CHECK(rv_bindings_randomize(b, 1) == RV_OK);
    CHECK(rv_interp_run(m, b) == RV_OK);
    rv_bindings_free(b);
    rv_module_free(m);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ravel_test_weights_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_st_load);
    RUN(test_st_widen);
    RUN(test_st_corrupt);
    RUN(test_st_truncated);
    RUN(test_npz_load);
    RUN(test_npz_corrupt);
    RUN(test_bind_weights);
    static const char *const files[] = {"w.safetensors", "cut.safetensors", "a.npy",
                                        "w.npz",         "bad.npz",         "cut.npz"};
    for (int i = 0; i < 6; i++)
        unlink(tmp_path(files[i]));
    rmdir(tmpdir);
    return harness_report();
}
