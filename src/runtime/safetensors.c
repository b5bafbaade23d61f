/*
 * safetensors.c — the index of a safetensors file.
 *
 * The format (huggingface/safetensors): an 8-byte little-endian header
 * length N, N bytes of JSON
 *
 *     {"W": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
 *      ..., "__metadata__": {"key": "value", ...}}
 *
 * (possibly padded with spaces), then the data; each tensor's offsets are
 * relative to the data's start. The JSON is parsed with cJSON. The file is
 * untrusted: the header length is checked against the file's size before
 * anything is allocated, every field is checked for its type and range,
 * each tensor's byte count must equal its shape times its element size,
 * and the ranges, taken in offset order, must tile the data exactly from 0
 * to the file's end (as the reference implementation requires), so
 * overlaps, holes and trailing garbage are all errors, each naming the
 * file and the tensor.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

#define ST_MAX_HEADER (100 << 20) /* the reference implementation's limit */

/* Every dtype the format names, with its element size; those the library
 * holds map to an rv_dtype, the others are RV_DTYPE_COUNT. F16 and BF16,
 * the usual dtypes of published checkpoints, are widened to f32 on load
 * (exactly: every half and bfloat16 value is an f32 value). */
// clang-format off
static const struct { const char *name; int size; rv_dtype dtype; WeightWiden widen; } st_dtypes[] = {
    {"F32", 4, RV_F32, WIDEN_NONE}, {"F64", 8, RV_F64, WIDEN_NONE},
    {"I32", 4, RV_I32, WIDEN_NONE}, {"I64", 8, RV_I64, WIDEN_NONE},
    {"F16", 2, RV_F32, WIDEN_F16}, {"BF16", 2, RV_F32, WIDEN_BF16},
    {"F8_E4M3", 1, RV_DTYPE_COUNT, WIDEN_NONE}, {"F8_E5M2", 1, RV_DTYPE_COUNT, WIDEN_NONE},
    {"I8", 1, RV_DTYPE_COUNT, WIDEN_NONE}, {"U8", 1, RV_DTYPE_COUNT, WIDEN_NONE},
    {"I16", 2, RV_DTYPE_COUNT, WIDEN_NONE}, {"U16", 2, RV_DTYPE_COUNT, WIDEN_NONE},
    {"U32", 4, RV_DTYPE_COUNT, WIDEN_NONE}, {"U64", 8, RV_DTYPE_COUNT, WIDEN_NONE},
    {"BOOL", 1, RV_DTYPE_COUNT, WIDEN_NONE},
};
// clang-format on

/* A JSON number that is an exact non-negative integer below 2^53. */
static bool json_count(const cJSON *j, int64_t *out) {
    if (!cJSON_IsNumber(j))
        return false;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d))
        return false;
    *out = (int64_t)d;
    return true;
}

/* One tensor's description, into e (name already set). */
static rv_status parse_entry(const char *path, const cJSON *j, int64_t data_size, WeightEntry *e,
                             int64_t *begin) {
    const char *nm = e->name;
    if (!cJSON_IsObject(j))
        return base_error(RV_ERR_IO, "%s: tensor '%s': its description is not a JSON object", path,
                          nm);
    const cJSON *dt = NULL, *sh = NULL, *off = NULL, *c;
    cJSON_ArrayForEach(c, j) {
        const cJSON **slot = strcmp(c->string, "dtype") == 0          ? &dt
                             : strcmp(c->string, "shape") == 0        ? &sh
                             : strcmp(c->string, "data_offsets") == 0 ? &off
                                                                      : NULL;
        if (!slot)
            return base_error(RV_ERR_IO, "%s: tensor '%s': unknown key '%s'", path, nm, c->string);
        if (*slot)
            return base_error(RV_ERR_IO, "%s: tensor '%s': key '%s' appears twice", path, nm,
                              c->string);
        *slot = c;
    }
    if (!cJSON_IsString(dt) || !sh || !off)
        return base_error(RV_ERR_IO, "%s: tensor '%s': %s", path, nm,
                          !dt                   ? "no 'dtype'"
                          : !cJSON_IsString(dt) ? "'dtype' is not a string"
                          : !sh                 ? "no 'shape'"
                                                : "no 'data_offsets'");
    int esize = 0;
    for (int i = 0; i < RV_COUNT(st_dtypes); i++)
        if (strcmp(dt->valuestring, st_dtypes[i].name) == 0) {
            esize = st_dtypes[i].size;
            e->dtype = st_dtypes[i].dtype;
            e->widen = st_dtypes[i].widen;
            snprintf(e->dtype_name, sizeof e->dtype_name, "%s", st_dtypes[i].name);
        }
    if (!esize)
        return base_error(RV_ERR_IO, "%s: tensor '%s': unknown dtype '%.32s'", path, nm,
                          dt->valuestring);

    if (!cJSON_IsArray(sh))
        return base_error(RV_ERR_IO, "%s: tensor '%s': 'shape' is not a list", path, nm);
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > RV_MAX_DIMS)
        return base_error(RV_ERR_IO, "%s: tensor '%s' has %d dimensions; at most %d are supported",
                          path, nm, ndim, RV_MAX_DIMS);
    e->ndim = ndim;
    uint64_t numel = 1;
    bool overflow = false;
    int d = 0;
    cJSON_ArrayForEach(c, sh) {
        if (!json_count(c, &e->shape[d]))
            return base_error(RV_ERR_IO,
                              "%s: tensor '%s': dimension %d of 'shape' is not a non-negative "
                              "integer",
                              path, nm, d);
        if (e->shape[d] && numel > UINT64_MAX / (uint64_t)e->shape[d])
            overflow = true;
        numel *= (uint64_t)e->shape[d];
        d++;
    }
    if (overflow || numel > (uint64_t)INT64_MAX / (uint64_t)esize)
        return base_error(RV_ERR_IO, "%s: tensor '%s': the shape's size overflows", path, nm);

    int64_t b, en;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        !json_count(cJSON_GetArrayItem(off, 0), &b) || !json_count(cJSON_GetArrayItem(off, 1), &en))
        return base_error(RV_ERR_IO,
                          "%s: tensor '%s': 'data_offsets' is not a list of two non-negative "
                          "integers",
                          path, nm);
    if (en < b)
        return base_error(RV_ERR_IO,
                          "%s: tensor '%s': data_offsets [%lld, %lld] end before they begin", path,
                          nm, (long long)b, (long long)en);
    if ((uint64_t)(en - b) != numel * (uint64_t)esize)
        return base_error(RV_ERR_IO,
                          "%s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes but %s%s "
                          "needs %llu",
                          path, nm, (long long)b, (long long)en, (long long)(en - b), e->dtype_name,
                          ndim ? " of this shape" : "",
                          (unsigned long long)(numel * (uint64_t)esize));
    if (en > data_size)
        return base_error(RV_ERR_IO,
                          "%s: tensor '%s': data_offsets [%lld, %lld] run past the end of the "
                          "data (%lld bytes; the file is truncated?)",
                          path, nm, (long long)b, (long long)en, (long long)data_size);
    *begin = b;
    e->nbytes = en - b;
    return RV_OK;
}

static int by_offset(const void *x, const void *y) {
    const WeightEntry *a = x, *b = y;
    if (a->offset != b->offset)
        return a->offset < b->offset ? -1 : 1;
    return a->nbytes < b->nbytes ? -1 : a->nbytes > b->nbytes;
}

/* The ranges, sorted by offset, must follow each other without overlap or
 * hole and end at the end of the file. */
static rv_status check_tiling(rv_weights *w, int64_t data_start) {
    if (w->entries.len) /* qsort's base must not be NULL */
        qsort(w->entries.data, (size_t)w->entries.len, sizeof *w->entries.data, by_offset);
    int64_t at = data_start;
    const char *prev = NULL;
    for (int i = 0; i < w->entries.len; i++) {
        const WeightEntry *e = &w->entries.data[i];
        if (e->offset < at)
            return base_error(RV_ERR_IO, "%s: the data of tensors '%s' and '%s' overlap", w->path,
                              prev, e->name);
        if (e->offset > at)
            return base_error(RV_ERR_IO,
                              "%s: %lld unused bytes before the data of tensor '%s' (data_offsets "
                              "must tile the data)",
                              w->path, (long long)(e->offset - at), e->name);
        at = e->offset + e->nbytes;
        prev = e->name;
    }
    if (at != w->size)
        return base_error(RV_ERR_IO,
                          "%s: %lld bytes of trailing garbage after the last tensor's data",
                          w->path, (long long)(w->size - at));
    return RV_OK;
}

static rv_status index_json(rv_weights *w, const cJSON *root, int64_t data_start) {
    if (!cJSON_IsObject(root))
        return base_error(RV_ERR_IO, "%s: the safetensors header is not a JSON object", w->path);
    const cJSON *c;
    cJSON_ArrayForEach(c, root) {
        if (strcmp(c->string, "__metadata__") == 0) {
            const cJSON *kv;
            if (!cJSON_IsObject(c))
                return base_error(RV_ERR_IO, "%s: '__metadata__' is not a JSON object", w->path);
            cJSON_ArrayForEach(kv, c) if (!cJSON_IsString(kv)) return base_error(
                RV_ERR_IO, "%s: '__metadata__' entry '%s' is not a string", w->path, kv->string);
            continue;
        }
        WeightEntry e = {.name = base_xstrdup(c->string)};
        int64_t begin = 0;
        rv_status st = parse_entry(w->path, c, w->size - data_start, &e, &begin);
        if (st != RV_OK) {
            base_free(e.name);
            return st;
        }
        e.offset = data_start + begin;
        vec_push(&w->entries, e);
    }
    return check_tiling(w, data_start);
}

rv_status rt_safetensors_index(rv_weights *w) {
    unsigned char len8[8];
    if (w->size < 8 || fread(len8, 1, 8, w->f) != 8)
        return base_error(RV_ERR_IO,
                          "%s: not a safetensors file: %lld bytes, too short for the header length",
                          w->path, (long long)w->size);
    uint64_t n = hash_load_le(len8, 8);
    if (n > (uint64_t)(w->size - 8))
        return base_error(RV_ERR_IO,
                          "%s: truncated safetensors file: the header length %llu exceeds the "
                          "%lld bytes that follow it",
                          w->path, (unsigned long long)n, (long long)(w->size - 8));
    if (n > ST_MAX_HEADER)
        return base_error(RV_ERR_IO, "%s: safetensors header length %llu is implausibly large",
                          w->path, (unsigned long long)n);
    if (n < 2)
        return base_error(RV_ERR_IO, "%s: the safetensors header is empty", w->path);
    char *text = base_xmalloc(n + 1);
    if (fread(text, 1, n, w->f) != n) {
        base_free(text);
        return base_error(RV_ERR_IO, "%s: cannot read the safetensors header", w->path);
    }
    text[n] = '\0';
    rv_status st;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long pos = at && at >= text && at <= text + n ? (long)(at - text) : -1;
        st = base_error(RV_ERR_IO,
                        "%s: the safetensors header is not valid JSON (near header byte %ld)",
                        w->path, pos);
    } else {
        /* the reference writer pads the header with spaces to align the data */
        const char *p = end;
        while (p < text + n && *p == ' ')
            p++;
        if (p != text + n)
            st = base_error(RV_ERR_IO,
                            "%s: unexpected bytes after the safetensors header's JSON (header byte "
                            "%ld)",
                            w->path, (long)(p - text));
        else
            st = index_json(w, root, 8 + (int64_t)n);
    }
    cJSON_Delete(root);
    base_free(text);
    return st;
}
