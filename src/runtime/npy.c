/*
 * npy.c — reading and writing NumPy .npy files.
 *
 * The format (numpy/lib/format.py, "NEP 1"): the magic "\x93NUMPY", a major
 * and minor version byte, the header length (2 bytes little-endian in
 * version 1.0, 4 bytes in 2.0 and 3.0), then the header: a Python dict
 * literal such as
 *
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 *
 * padded with spaces and ending in '\n', then the raw data. Version 3.0
 * only allows UTF-8 in the header, which changes nothing for the ASCII
 * headers of numeric arrays.
 *
 * The reader treats the file as untrusted input. It reads the header into
 * memory (bounded by NPY_MAX_HEADER and by the file's size), parses the
 * dict with a small recursive-descent parser that never looks past the
 * header's end, checks the shape against overflow and against the bytes
 * the file actually has, and only then allocates the array. Every failure
 * is RV_ERR_IO with a message naming the file and the problem. Data must be
 * little-endian f4/f8/i4/i8 in C order; anything else is refused, not
 * converted. Bytes after the data are ignored, as NumPy does.
 *
 * The writer produces version 1.0 exactly as NumPy 2 does, byte for byte:
 * the dict in that key order, spaces to leave room for the first axis to
 * grow in place, and padding so the data starts at a multiple of 64.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "npy.c reads and writes little-endian data in place; big-endian hosts need byte swapping"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_MAX_HEADER (1u << 20) /* far beyond any numeric header */
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21 /* numpy's GROWTH_AXIS_MAX_DIGITS */

// clang-format off
static const struct { const char *descr; rv_dtype dtype; } npy_dtypes[] = {
    {"<f4", RV_F32},
    {"<f8", RV_F64},
    {"<i4", RV_I32},
    {"<i8", RV_I64},
};
// clang-format on

/* ---- the header parser ---- */

typedef struct NpyHeader {
    char descr[32];
    int fortran; /* -1: key absent */
    int ndim;    /* -1: key absent */
    int64_t shape[RV_MAX_DIMS];
} NpyHeader;

typedef struct Parser {
    const char *path;
    const char *start, *p, *end;
} Parser;

static rv_status bad_header(Parser *ps, const char *what) {
    return base_error(RV_ERR_IO, "%s: malformed .npy header: %s at header byte %d", ps->path, what,
                      (int)(ps->p - ps->start));
}

static void skip_space(Parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* Consumes c (after optional space) if it is next. */
static bool accept(Parser *ps, char c) {
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes, into out[cap]. */
static rv_status parse_string(Parser *ps, char *out, size_t cap, const char *what) {
    skip_space(ps);
    if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"'))
        return bad_header(ps, what);
    char q = *ps->p++;
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != q) {
        if (*ps->p == '\\' || *ps->p == '\n')
            return bad_header(ps, "unsupported character in a string");
        if (n + 1 >= cap)
            return bad_header(ps, "string too long");
        out[n++] = *ps->p++;
    }
    if (ps->p >= ps->end)
        return bad_header(ps, "unterminated string");
    ps->p++;
    out[n] = '\0';
    return RV_OK;
}

/* True or False. */
static rv_status parse_bool(Parser *ps, int *out) {
    skip_space(ps);
    size_t left = (size_t)(ps->end - ps->p);
    if (left >= 4 && memcmp(ps->p, "True", 4) == 0) {
        ps->p += 4;
        *out = 1;
    } else if (left >= 5 && memcmp(ps->p, "False", 5) == 0) {
        ps->p += 5;
        *out = 0;
    } else {
        return bad_header(ps, "expected True or False for 'fortran_order'");
    }
    return RV_OK;
}

/* A non-negative decimal integer; Python 2's long suffix 'L' is allowed. */
static rv_status parse_dim(Parser *ps, int64_t *out) {
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == '-')
        return bad_header(ps, "negative dimension in 'shape'");
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
        return bad_header(ps, "expected a dimension in 'shape'");
    int64_t v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        int digit = *ps->p - '0';
        if (v > (INT64_MAX - digit) / 10)
            return bad_header(ps, "dimension too large in 'shape'");
        v = v * 10 + digit;
        ps->p++;
    }
    if (ps->p < ps->end && *ps->p == 'L')
        ps->p++;
    *out = v;
    return RV_OK;
}

/* A tuple of dimensions: (), (3,), (2, 3), with an optional trailing
 * comma. More than RV_MAX_DIMS dimensions are counted, not stored. */
static rv_status parse_shape(Parser *ps, NpyHeader *h) {
    if (!accept(ps, '('))
        return bad_header(ps, "expected '(' for 'shape'");
    int n = 0;
    rv_status st;
    while (!accept(ps, ')')) {
        int64_t d = 0;
        if ((st = parse_dim(ps, &d)) != RV_OK)
            return st;
        if (n < RV_MAX_DIMS)
            h->shape[n] = d;
        if (n == INT_MAX)
            return bad_header(ps, "too many dimensions");
        n++;
        if (accept(ps, ','))
            continue;
        if (accept(ps, ')'))
            break;
        return bad_header(ps, "expected ',' or ')' in 'shape'");
    }
    if (n > RV_MAX_DIMS)
        return base_error(RV_ERR_IO, "%s: the array has %d dimensions; at most %d are supported",
                          ps->path, n, RV_MAX_DIMS);
    h->ndim = n;
    return RV_OK;
}

/* The whole dict: each of 'descr', 'fortran_order' and 'shape' exactly
 * once, in any order, then only whitespace to the end of the header. */
static rv_status parse_header(Parser *ps, NpyHeader *h) {
    h->descr[0] = '\0';
    h->fortran = -1;
    h->ndim = -1;
    rv_status st;
    if (!accept(ps, '{'))
        return bad_header(ps, "expected '{'");
    while (!accept(ps, '}')) {
        char key[32];
        if ((st = parse_string(ps, key, sizeof key, "expected a quoted key")) != RV_OK)
            return st;
        if (!accept(ps, ':'))
            return bad_header(ps, "expected ':' after a key");
        bool dup;
        if (strcmp(key, "descr") == 0) {
            dup = h->descr[0] != '\0';
            st = parse_string(ps, h->descr, sizeof h->descr, "expected a string for 'descr'");
            if (st == RV_OK && !h->descr[0])
                return bad_header(ps, "empty 'descr'");
        } else if (strcmp(key, "fortran_order") == 0) {
            dup = h->fortran >= 0;
            st = parse_bool(ps, &h->fortran);
        } else if (strcmp(key, "shape") == 0) {
            dup = h->ndim >= 0;
            st = parse_shape(ps, h);
        } else {
            return base_error(RV_ERR_IO, "%s: malformed .npy header: unexpected key '%s'", ps->path,
                              key);
        }
        if (st != RV_OK)
            return st;
        if (dup)
            return base_error(RV_ERR_IO, "%s: malformed .npy header: key '%s' appears twice",
                              ps->path, key);
        if (!accept(ps, ',')) {
            if (accept(ps, '}'))
                break;
            return bad_header(ps, "expected ',' or '}' after a value");
        }
    }
    skip_space(ps);
    if (ps->p != ps->end)
        return bad_header(ps, "unexpected text after '}'");
    static const char *const keys[] = {"descr", "fortran_order", "shape"};
    bool has[] = {h->descr[0] != '\0', h->fortran >= 0, h->ndim >= 0};
    for (int i = 0; i < 3; i++)
        if (!has[i])
            return base_error(RV_ERR_IO, "%s: malformed .npy header: no '%s' key", ps->path,
                              keys[i]);
    return RV_OK;
}

/* ---- loading ---- */

rv_status rt_npy_read_header(FILE *f, const char *path, int64_t size, rv_array *hdr,
                             int64_t *data_off) {
    unsigned char pre[12];
    size_t got = fread(pre, 1, 8, f);
    if (ferror(f))
        return base_error(RV_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (got < NPY_MAGIC_LEN || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return base_error(RV_ERR_IO, "%s: not a .npy file (bad magic)", path);
    if (got < 8)
        return base_error(RV_ERR_IO, "%s: truncated .npy header (no version)", path);
    int major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0)
        return base_error(RV_ERR_IO, "%s: unsupported .npy format version %d.%d", path, major,
                          minor);
    int lenbytes = major == 1 ? 2 : 4;
    if (fread(pre + 8, 1, (size_t)lenbytes, f) != (size_t)lenbytes)
        return base_error(RV_ERR_IO, "%s: truncated .npy header (no header length)", path);
    uint32_t hlen = (uint32_t)hash_load_le(pre + 8, (size_t)lenbytes);
    int64_t start = 8 + lenbytes;
    if ((int64_t)hlen > size - start)
        return base_error(RV_ERR_IO,
                          "%s: truncated .npy header: header length %u exceeds the file size "
                          "(%lld bytes)",
                          path, hlen, (long long)size);
    if (hlen > NPY_MAX_HEADER)
        return base_error(RV_ERR_IO, "%s: .npy header length %u is implausibly large", path, hlen);

    char *text = base_malloc(hlen + 1);
    if (!text)
        return base_error(RV_ERR_OOM, "%s: out of memory reading the header", path);
    if (fread(text, 1, hlen, f) != hlen) {
        base_free(text);
        return base_error(RV_ERR_IO, "%s: truncated .npy header", path);
    }
    Parser ps = {path, text, text, text + hlen};
    NpyHeader h;
    rv_status st = parse_header(&ps, &h);
    base_free(text);
    if (st != RV_OK)
        return st;

    rv_dtype dtype = RV_DTYPE_COUNT;
    for (int i = 0; i < RV_COUNT(npy_dtypes); i++)
        if (strcmp(h.descr, npy_dtypes[i].descr) == 0)
            dtype = npy_dtypes[i].dtype;
    if (dtype == RV_DTYPE_COUNT)
        return base_error(RV_ERR_IO,
                          "%s: unsupported dtype '%s' (supported: '<f4', '<f8', '<i4', '<i8')",
                          path, h.descr);
    if (h.fortran)
        return base_error(RV_ERR_IO,
                          "%s: Fortran order not supported (save a C-contiguous array, e.g. "
                          "np.ascontiguousarray(a))",
                          path);

    if (ir_array_init(hdr, dtype, h.ndim, h.shape) != RV_OK)
        return base_error(RV_ERR_IO, "%s: the shape's size overflows", path);
    int64_t have = size - start - (int64_t)hlen;
    if ((uint64_t)have < hdr->nbytes)
        return base_error(RV_ERR_IO,
                          "%s: data is truncated: the shape needs %zu bytes but only %lld follow "
                          "the header",
                          path, hdr->nbytes, (long long)have);
    *data_off = start + hlen;
    return RV_OK;
}

/* The size of an open file, or -1. */
static int64_t file_size(FILE *f) {
    if (fseek(f, 0, SEEK_END) != 0)
        return -1;
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0)
        return -1;
    return n;
}

rv_status rv_npy_load(const char *path, rv_array **out) {
    if (!out)
        return base_error(RV_ERR_ARG, "rv_npy_load: out is NULL");
    *out = NULL;
    if (!path)
        return base_error(RV_ERR_ARG, "rv_npy_load: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f)
        return base_error(RV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    int64_t size = file_size(f);
    if (size < 0) {
        int e = errno;
        fclose(f);
        return base_error(RV_ERR_IO, "%s: cannot determine the file size: %s", path, strerror(e));
    }
    rv_array hdr, *a = NULL;
    int64_t off = 0;
    rv_status st = rt_npy_read_header(f, path, size, &hdr, &off);
    if (st == RV_OK && !(a = rv_array_new(hdr.dtype, hdr.ndim, hdr.shape)))
        st = base_error(base_error_status(), "%s: %s", path, rv_last_error());
    if (st == RV_OK && a->nbytes && fread(a->dl.data, 1, a->nbytes, f) != a->nbytes) {
        st = base_error(RV_ERR_IO, "%s: cannot read %zu bytes of data at offset %lld", path,
                        a->nbytes, (long long)off);
        rv_array_free(a);
    }
    fclose(f);
    if (st == RV_OK)
        *out = a;
    return st;
}

/* ---- saving ---- */

/* The version 1.0 preamble and header for `a`, as NumPy 2 writes it. */
static void format_header(Buf *b, const rv_array *a, const char *descr) {
    Buf dict = {0};
    buf_printf(&dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < a->ndim; d++)
        buf_printf(&dict, d ? ", %lld" : "%lld", (long long)a->shape[d]);
    buf_puts(&dict, a->ndim == 1 ? ",), }" : "), }");
    if (a->ndim > 0) {
        /* room to rewrite the first extent in place when appending rows */
        int digits = snprintf(NULL, 0, "%lld", (long long)a->shape[0]);
        buf_indent(&dict, NPY_GROWTH_DIGITS - digits);
    }
    size_t hlen = dict.len + 1; /* with the final '\n' */
    size_t pad = NPY_ALIGN - (NPY_MAGIC_LEN + 4 + hlen) % NPY_ALIGN;
    hlen += pad;
    RV_ASSERT(hlen <= 0xffff);
    buf_puts(b, NPY_MAGIC);
    buf_putc(b, 1);
    buf_putc(b, 0);
    buf_putc(b, (char)(hlen & 0xff));
    buf_putc(b, (char)(hlen >> 8));
    buf_puts(b, buf_str(&dict));
    buf_indent(b, (int)pad);
    buf_putc(b, '\n');
    buf_free(&dict);
}

rv_status rv_npy_save(const char *path, const rv_array *a) {
    if (!path || !a)
        return base_error(RV_ERR_ARG, "rv_npy_save: %s is NULL", path ? "the array" : "path");
    const char *descr = NULL;
    for (int i = 0; i < RV_COUNT(npy_dtypes); i++)
        if (npy_dtypes[i].dtype == a->dtype)
            descr = npy_dtypes[i].descr;
    if (!descr)
        return base_error(RV_ERR_ARG,
                          "%s: cannot save a %s array as .npy (f32, f64, i32, i64 only)", path,
                          rv_dtype_name(a->dtype));
    Buf head = {0};
    format_header(&head, a, descr);
    FilePiece pieces[2] = {{head.data, head.len}, {a->dl.data, a->nbytes}};
    rv_status st = base_write_pieces(path, 2, pieces);
    buf_free(&head);
    return st;
}
