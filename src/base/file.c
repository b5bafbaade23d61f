/*
 * file.c — whole-file reads and writes.
 *
 * Source files, generated code and test fixtures are small enough to hold
 * in memory, so reading is all at once. The reader loops on fread instead
 * of trusting a size from fseek/ftell, which keeps it correct for pipes
 * and /proc files. Failures are environment errors: RV_ERR_IO with the path
 * and strerror, or RV_ERR_OOM.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"

rv_status base_read_file(const char *path, char **out, size_t *len) {
    *out = NULL;
    if (len)
        *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return base_error(RV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *data = base_malloc(cap);
    for (;;) {
        if (!data) {
            fclose(f);
            return base_error(RV_ERR_OOM, "%s: out of memory reading the file", path);
        }
        n += fread(data + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *bigger = cap <= SIZE_MAX / 2 ? base_realloc(data, cap * 2) : NULL;
        if (!bigger)
            base_free(data);
        data = bigger;
        cap *= 2;
    }
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        base_free(data);
        return base_error(RV_ERR_IO, "%s: cannot read: %s", path, strerror(e));
    }
    fclose(f);
    data[n] = '\0';
    *out = data;
    if (len)
        *len = n;
    return RV_OK;
}

/* Writes the whole file, replacing it; a failed write leaves no partial
 * file behind. */
rv_status base_write_file(const char *path, const void *data, size_t len) {
    FilePiece one = {data, len};
    return base_write_pieces(path, 1, &one);
}

rv_status base_write_pieces(const char *path, int n, const FilePiece *pieces) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return base_error(RV_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        ok = pieces[i].len == 0 || fwrite(pieces[i].data, 1, pieces[i].len, f) == pieces[i].len;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        remove(path);
        return base_error(RV_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    return RV_OK;
}
