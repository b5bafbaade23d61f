/*
 * npz.c — the index of an .npz archive: a zip of .npy files, one per array
 * (np.savez writes "NAME.npy" for the array NAME).
 *
 * The zip is read from its end: the end-of-central-directory record gives
 * the central directory, whose headers give each member's name, method,
 * sizes, CRC-32 and local header; the local header gives where the data
 * starts (its own sizes may be 0xffffffff placeholders, since np.savez
 * writes with force_zip64, so the central ones are used). Only stored
 * members are read: np.savez_compressed deflates, and inflating would add
 * zlib for a format whose uncompressed twin is one call away, so a deflated
 * member is an error that says to use np.savez. Every member's .npy header
 * is checked when the archive is opened (npy.c); the CRC when a tensor is
 * loaded (weights.c), since that reads the bytes anyway. Members must lie
 * before the central directory without overlapping, and the directory
 * must end where its end record starts. Zip64 end records (archives over
 * 65535 members or 4 GiB) are refused.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

#define ZIP_EOCD_SIG 0x06054b50u
#define ZIP_CDH_SIG 0x02014b50u
#define ZIP_LFH_SIG 0x04034b50u
#define ZIP_EOCD_LEN 22
#define ZIP_CDH_LEN 46
#define ZIP_LFH_LEN 30
#define ZIP_MAX_COMMENT 0xffff

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t rt_crc32(uint32_t crc, const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static uint32_t le(const unsigned char *p, size_t n) {
    return (uint32_t)hash_load_le(p, n);
}

/* A member's local header start and data end, to check for overlaps. */
typedef struct Span {
    int64_t begin, end;
    const char *name;
} Span;

static int by_begin(const void *x, const void *y) {
    const Span *a = x, *b = y;
    return a->begin < b->begin ? -1 : a->begin > b->begin;
}

static bool read_at(FILE *f, int64_t off, void *buf, size_t n) {
    return fseeko(f, off, SEEK_SET) == 0 && fread(buf, 1, n, f) == n;
}

/* The sizes and offset a central header leaves as 0xffffffff are in its
 * zip64 extra field (id 1), in this order. */
static bool zip64_extra(const unsigned char *x, size_t n, uint64_t *usize, uint64_t *csize,
                        uint64_t *off) {
    uint64_t *fields[] = {usize, csize, off};
    while (n >= 4) {
        uint32_t id = le(x, 2), len = le(x + 2, 2);
        if (len > n - 4)
            return false;
        if (id == 1) {
            const unsigned char *q = x + 4;
            for (int i = 0; i < 3; i++) {
                if (*fields[i] != 0xffffffffu)
                    continue;
                if (q + 8 > x + 4 + len)
                    return false;
                *fields[i] = hash_load_le(q, 8);
                q += 8;
            }
            return true;
        }
        x += 4 + len;
        n -= 4 + len;
    }
    return true;
}

/* One member: its central header at cd[0..left) (length in *used). */
static rv_status index_member(rv_weights *w, const unsigned char *cd, size_t left,
                              int64_t cd_offset, size_t *used, Span *span) {
    const char *path = w->path;
    if (left < ZIP_CDH_LEN || le(cd, 4) != ZIP_CDH_SIG)
        return base_error(RV_ERR_IO, "%s: corrupt zip central directory", path);
    uint32_t flags = le(cd + 8, 2), method = le(cd + 10, 2), crc = le(cd + 16, 4);
    uint64_t csize = le(cd + 20, 4), usize = le(cd + 24, 4), off = le(cd + 42, 4);
    size_t nl = le(cd + 28, 2), xl = le(cd + 30, 2), cl = le(cd + 32, 2);
    if (ZIP_CDH_LEN + nl + xl + cl > left)
        return base_error(RV_ERR_IO, "%s: corrupt zip central directory", path);
    *used = ZIP_CDH_LEN + nl + xl + cl;
    char name[256];
    if (nl == 0 || nl >= sizeof name || memchr(cd + ZIP_CDH_LEN, 0, nl))
        return base_error(RV_ERR_IO, "%s: a member's name is empty, too long or holds a NUL", path);
    memcpy(name, cd + ZIP_CDH_LEN, nl);
    name[nl] = '\0';
    if (!zip64_extra(cd + ZIP_CDH_LEN + nl, xl, &usize, &csize, &off))
        return base_error(RV_ERR_IO, "%s: member '%s': corrupt zip64 extra field", path, name);
    if (nl < 5 || strcmp(name + nl - 4, ".npy") != 0)
        return base_error(RV_ERR_IO, "%s: member '%s' is not a .npy file", path, name);
    if (flags & 1)
        return base_error(RV_ERR_IO, "%s: member '%s' is encrypted", path, name);
    if (method == 8)
        return base_error(RV_ERR_UNSUPPORTED,
                          "%s: member '%s' is compressed (np.savez_compressed); only stored "
                          "members are read: save with np.savez",
                          path, name);
    if (method != 0)
        return base_error(RV_ERR_UNSUPPORTED, "%s: member '%s' uses zip compression method %u",
                          path, name, method);
    if (csize != usize)
        return base_error(RV_ERR_IO, "%s: member '%s' is stored but its sizes differ (%llu, %llu)",
                          path, name, (unsigned long long)csize, (unsigned long long)usize);

    unsigned char lfh[ZIP_LFH_LEN];
    if (off > (uint64_t)cd_offset || (uint64_t)cd_offset - off < ZIP_LFH_LEN ||
        !read_at(w->f, (int64_t)off, lfh, sizeof lfh) || le(lfh, 4) != ZIP_LFH_SIG)
        return base_error(RV_ERR_IO, "%s: member '%s': no local header at offset %llu", path, name,
                          (unsigned long long)off);
    size_t lnl = le(lfh + 26, 2), lxl = le(lfh + 28, 2);
    char lname[256];
    if (lnl != nl || !read_at(w->f, (int64_t)off + ZIP_LFH_LEN, lname, nl) ||
        memcmp(lname, name, nl) != 0 || le(lfh + 8, 2) != method)
        return base_error(RV_ERR_IO,
                          "%s: member '%s': the local header disagrees with the central directory",
                          path, name);
    int64_t start = (int64_t)off + ZIP_LFH_LEN + (int64_t)(lnl + lxl);
    if (start > cd_offset || csize > (uint64_t)(cd_offset - start))
        return base_error(RV_ERR_IO,
                          "%s: member '%s': its %llu bytes run into the central directory "
                          "(truncated?)",
                          path, name, (unsigned long long)csize);

    /* the member's .npy header, with errors naming "ARCHIVE: MEMBER" */
    char *what = base_xmalloc(strlen(path) + nl + 3);
    sprintf(what, "%s: %s", path, name);
    rv_array hdr;
    int64_t doff = 0;
    rv_status st = fseeko(w->f, start, SEEK_SET) == 0
                       ? rt_npy_read_header(w->f, what, (int64_t)csize, &hdr, &doff)
                       : base_error(RV_ERR_IO, "%s: cannot seek", what);
    base_free(what);
    if (st != RV_OK)
        return st;
    name[nl - 4] = '\0';
    WeightEntry e = {.name = base_xstrdup(name),
                     .dtype = hdr.dtype,
                     .ndim = hdr.ndim,
                     .offset = start + doff,
                     .nbytes = (int64_t)hdr.nbytes,
                     .member = start,
                     .member_len = (int64_t)csize,
                     .crc = crc};
    snprintf(e.dtype_name, sizeof e.dtype_name, "%s", rv_dtype_name(hdr.dtype));
    memcpy(e.shape, hdr.shape, sizeof e.shape);
    vec_push(&w->entries, e);
    *span = (Span){(int64_t)off, start + (int64_t)csize, e.name};
    return RV_OK;
}

rv_status rt_npz_index(rv_weights *w) {
    const char *path = w->path;
    if (w->size < ZIP_EOCD_LEN)
        return base_error(RV_ERR_IO, "%s: truncated zip: no end of central directory record", path);
    size_t tail =
        (size_t)(w->size < ZIP_EOCD_LEN + ZIP_MAX_COMMENT ? w->size
                                                          : ZIP_EOCD_LEN + ZIP_MAX_COMMENT);
    unsigned char *buf = base_xmalloc(tail);
    if (!read_at(w->f, w->size - (int64_t)tail, buf, tail)) {
        base_free(buf);
        return base_error(RV_ERR_IO, "%s: cannot read the zip directory", path);
    }
    /* the record whose comment ends the file */
    const unsigned char *eocd = NULL;
    for (size_t i = tail - ZIP_EOCD_LEN + 1; i-- > 0;)
        if (le(buf + i, 4) == ZIP_EOCD_SIG && i + ZIP_EOCD_LEN + le(buf + i + 20, 2) == tail) {
            eocd = buf + i;
            break;
        }
    if (!eocd) {
        base_free(buf);
        return base_error(RV_ERR_IO,
                          "%s: truncated or corrupt zip: no end of central directory record", path);
    }
    int64_t eocd_pos = w->size - (int64_t)tail + (eocd - buf);
    uint32_t disk = le(eocd + 4, 2), cd_disk = le(eocd + 6, 2), n_disk = le(eocd + 8, 2),
             n = le(eocd + 10, 2);
    int64_t cd_size = le(eocd + 12, 4), cd_offset = le(eocd + 16, 4);
    base_free(buf);
    if (n == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff)
        return base_error(RV_ERR_UNSUPPORTED,
                          "%s: zip64 archives (over 65535 members or 4 GiB) are not supported",
                          path);
    if (disk || cd_disk || n_disk != n)
        return base_error(RV_ERR_IO, "%s: multi-disk zip archives are not supported", path);
    if (cd_offset + cd_size != eocd_pos)
        return base_error(RV_ERR_IO,
                          "%s: corrupt zip: the central directory (%lld bytes at %lld) does not "
                          "end where its end record starts (%lld)",
                          path, (long long)cd_size, (long long)cd_offset, (long long)eocd_pos);
    unsigned char *cd = base_xmalloc((size_t)cd_size + 1);
    Span *spans = base_xcalloc(n + 1, sizeof *spans);
    rv_status st = read_at(w->f, cd_offset, cd, (size_t)cd_size)
                       ? RV_OK
                       : base_error(RV_ERR_IO, "%s: cannot read the zip central directory", path);
    size_t at = 0;
    for (uint32_t i = 0; i < n && st == RV_OK; i++) {
        size_t used = 0;
        st = index_member(w, cd + at, (size_t)cd_size - at, cd_offset, &used, &spans[i]);
        at += used;
    }
    if (st == RV_OK && at != (size_t)cd_size)
        st =
            base_error(RV_ERR_IO, "%s: corrupt zip: %zu unexplained bytes in the central directory",
                       path, (size_t)cd_size - at);
    if (st == RV_OK) {
        qsort(spans, n, sizeof *spans, by_begin);
        for (uint32_t i = 1; i < n; i++)
            if (spans[i].begin < spans[i - 1].end) {
                st = base_error(RV_ERR_IO, "%s: corrupt zip: members '%s' and '%s' overlap", path,
                                spans[i - 1].name, spans[i].name);
                break;
            }
    }
    base_free(spans);
    base_free(cd);
    return st;
}
