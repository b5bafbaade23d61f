/*
 * weights.c — weights files: open, list, load by name, bind to a module.
 *
 * Opening a file reads and checks its whole index (safetensors.c, npz.c:
 * told apart by the zip signature) but no tensor data; loading reads one tensor's bytes into a new
 * array. The data is read with stdio, not mapped: an rv_array owns aligned memory (IR_ARRAY_ALIGN)
 * that the file's offsets need not respect, so a copy is made either way, and a read of a file
 * truncated after it was opened is an error message where a mapping would be SIGBUS.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "runtime/runtime.h"

static int by_name(const void *x, const void *y) {
    return strcmp(((const WeightEntry *)x)->name, ((const WeightEntry *)y)->name);
}

void rv_weights_close(rv_weights *w) {
    if (!w)
        return;
    for (int i = 0; i < w->entries.len; i++)
        base_free(w->entries.data[i].name);
    vec_free(&w->entries);
    if (w->f)
        fclose(w->f);
    base_free(w->path);
    base_free(w);
}

rv_status rv_weights_open(const char *path, rv_weights **out) {
    if (!out)
        return base_error(RV_ERR_ARG, "rv_weights_open: out is NULL");
    *out = NULL;
    if (!path)
        return base_error(RV_ERR_ARG, "rv_weights_open: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f)
        return base_error(RV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    rv_weights *w = base_xcalloc(1, sizeof *w);
    w->path = base_xstrdup(path);
    w->f = f;
    rv_status st = RV_OK;
    if (fseeko(f, 0, SEEK_END) != 0 || (w->size = ftello(f)) < 0 || fseeko(f, 0, SEEK_SET) != 0)
        st = base_error(RV_ERR_IO, "%s: cannot determine the file size: %s", path, strerror(errno));
    unsigned char magic[4] = {0};
    if (st == RV_OK) {
        /* a zip starts with a local header, or an empty one with its end record */
        bool zip = fread(magic, 1, 4, f) == 4 && magic[0] == 'P' && magic[1] == 'K' &&
                   ((magic[2] == 3 && magic[3] == 4) || (magic[2] == 5 && magic[3] == 6));
        st = fseeko(f, 0, SEEK_SET) != 0 ? base_error(RV_ERR_IO, "%s: cannot seek", path)
             : zip                       ? rt_npz_index(w)
                                         : rt_safetensors_index(w);
    }
    if (st == RV_OK && w->entries.len) {
        qsort(w->entries.data, (size_t)w->entries.len, sizeof *w->entries.data, by_name);
        for (int i = 1; i < w->entries.len; i++)
            if (strcmp(w->entries.data[i - 1].name, w->entries.data[i].name) == 0) {
                st = base_error(RV_ERR_IO, "%s: tensor '%s' appears twice", path,
                                w->entries.data[i].name);
                break;
            }
    }
    if (st != RV_OK) {
        rv_weights_close(w);
        return st;
    }
    *out = w;
    return RV_OK;
}

int rv_weights_count(const rv_weights *w) {
    return w ? w->entries.len : 0;
}

const char *rv_weights_name(const rv_weights *w, int i) {
    return w && i >= 0 && i < w->entries.len ? w->entries.data[i].name : NULL;
}

/* Reads the rest of an .npz member around the data just read and checks
 * the whole member's CRC-32. */
static rv_status check_crc(rv_weights *w, const WeightEntry *e, const void *data) {
    unsigned char chunk[4096];
    uint32_t crc = 0;
    int64_t pieces[2][2] = {{e->member, e->offset},
                            {e->offset + e->nbytes, e->member + e->member_len}};
    for (int k = 0; k < 2; k++) {
        if (k == 1)
            crc = rt_crc32(crc, data, (size_t)e->nbytes);
        for (int64_t at = pieces[k][0]; at < pieces[k][1];) {
            size_t n = (size_t)(pieces[k][1] - at < (int64_t)sizeof chunk ? pieces[k][1] - at
                                                                          : (int64_t)sizeof chunk);
            if (fseeko(w->f, at, SEEK_SET) != 0 || fread(chunk, 1, n, w->f) != n)
                return base_error(RV_ERR_IO, "%s: tensor '%s': cannot read its member", w->path,
                                  e->name);
            crc = rt_crc32(crc, chunk, n);
            at += (int64_t)n;
        }
    }
    if (crc != e->crc)
        return base_error(RV_ERR_IO,
                          "%s: tensor '%s': CRC-32 mismatch (0x%08x, the zip says 0x%08x): the "
                          "file is corrupt",
                          w->path, e->name, crc, e->crc);
    return RV_OK;
}

/* IEEE half to single, exactly (subnormals, infinities and NaNs too). */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        float f = ldexpf((float)mant, -24);
        return sign ? -f : f;
    }
    if (exp == 31)
        bits = sign | 0x7f800000u | mant << 13;
    else
        bits = sign | (exp + 112) << 23 | mant << 13;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Widens the n 2-byte elements at the start of data to f32 in place,
 * from the last, so each is read before its slot is written. */
static void widen(void *data, int64_t n, WeightWiden how) {
    unsigned char *p = data;
    for (int64_t i = n - 1; i >= 0; i--) {
        uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        float f;
        if (how == WIDEN_F16) {
            f = half_to_float(h);
        } else {
            uint32_t bits = (uint32_t)h << 16;
            memcpy(&f, &bits, 4);
        }
        memcpy(p + 4 * i, &f, 4);
    }
}

static const WeightEntry *find_entry(const rv_weights *w, const char *name) {
    WeightEntry key = {.name = (char *)name};
    if (!w->entries.len)
        return NULL;
    return bsearch(&key, w->entries.data, (size_t)w->entries.len, sizeof key, by_name);
}

rv_status rv_weights_load(rv_weights *w, const char *name, rv_array **out) {
    if (!out)
        return base_error(RV_ERR_ARG, "rv_weights_load: out is NULL");
    *out = NULL;
    if (!w || !name)
        return base_error(RV_ERR_ARG, "rv_weights_load: no weights or name");
    const WeightEntry *e = find_entry(w, name);
    if (!e)
        return base_error(RV_ERR_ARG, "%s: no tensor named '%s'", w->path, name);
    if (e->dtype == RV_DTYPE_COUNT)
        return base_error(RV_ERR_UNSUPPORTED,
                          "%s: tensor '%s' has dtype %s; only F32, F64, I32, I64, F16 and BF16 "
                          "(read as f32) are supported",
                          w->path, name, e->dtype_name);
    rv_array *a = rv_array_new(e->dtype, e->ndim, e->shape);
    if (!a)
        return base_error(base_error_status(), "%s: tensor '%s': %s", w->path, name,
                          rv_last_error());
    if (e->nbytes && (fseeko(w->f, e->offset, SEEK_SET) != 0 ||
                      fread(a->dl.data, 1, (size_t)e->nbytes, w->f) != (size_t)e->nbytes)) {
        rv_array_free(a);
        return base_error(RV_ERR_IO, "%s: tensor '%s': cannot read %lld bytes at offset %lld",
                          w->path, name, (long long)e->nbytes, (long long)e->offset);
    }
    rv_status st = e->member_len ? check_crc(w, e, a->dl.data) : RV_OK;
    if (e->widen)
        widen(a->dl.data, rv_array_numel(a), e->widen);
    if (st != RV_OK) {
        rv_array_free(a);
        return st;
    }
    *out = a;
    return RV_OK;
}

/* ---- binding to a module ---- */

/* Does e mention an axis variable (a ragged extent)? */
static bool mentions_axis(const Expr *e) {
    if (e->kind == EX_VAR)
        return true;
    for (int i = 0; i < e->n; i++)
        if (mentions_axis(e->args[i]))
            return true;
    return false;
}

/* Checks a file's tensor against the input or ufun `name` of the module:
 * the dtype, and for a dense input the rank and every constant extent
 * (extents of sizes and ragged shapes are checked when a run starts, as
 * for any bound array). *found: whether the module has such an input. */
static rv_status check_declared(const rv_module *m, const char *path, const WeightEntry *e,
                                bool *found) {
    const char *got =
        e->dtype == RV_DTYPE_COUNT || e->widen ? e->dtype_name : rv_dtype_name(e->dtype);
    *found = true;
    if (rv_module_ufun(m, e->name)) {
        if (e->dtype != RV_I32 && e->dtype != RV_I64)
            return base_error(RV_ERR_SHAPE,
                              "%s: ufun %s needs an i32 or i64 array, the file's is %s", path,
                              e->name, got);
        return RV_OK;
    }
    const rv_tensor *t = rv_module_tensor(m, e->name);
    if (!t || t->op->kind != OP_INPUT) {
        *found = false;
        return RV_OK;
    }
    if (e->dtype != t->dtype)
        return base_error(RV_ERR_SHAPE, "%s: input %s is declared %s but the file's tensor is %s",
                          path, e->name, rv_dtype_name(t->dtype), got);
    for (int d = 0; d < t->ndim; d++)
        if (mentions_axis(t->axes[d]->extent))
            return RV_OK;
    if (e->ndim != t->ndim)
        return base_error(
            RV_ERR_SHAPE,
            "%s: input %s is declared with %d dimensions but the file's tensor has %d", path,
            e->name, t->ndim, e->ndim);
    for (int d = 0; d < t->ndim; d++) {
        const Expr *x = t->axes[d]->extent;
        if (x->kind == EX_CONST_INT && x->u.ival != e->shape[d])
            return base_error(RV_ERR_SHAPE,
                              "%s: input %s is declared with extent %lld in dimension %d but the "
                              "file's tensor has %lld",
                              path, e->name, (long long)x->u.ival, d, (long long)e->shape[d]);
    }
    return RV_OK;
}

rv_status rv_bindings_load_weights(rv_bindings *b, const char *path) {
    if (!b || !path)
        return base_error(RV_ERR_ARG, "rv_bindings_load_weights: no bindings or path");
    rv_weights *w;
    rv_status st = rv_weights_open(path, &w);
    if (st != RV_OK)
        return st;
    int bound = 0;
    for (int i = 0; i < w->entries.len && st == RV_OK; i++) {
        const WeightEntry *e = &w->entries.data[i];
        bool found;
        if ((st = check_declared(b->m, path, e, &found)) != RV_OK)
            break;
        if (!found)
            continue;
        rv_array *a;
        if ((st = rv_weights_load(w, e->name, &a)) != RV_OK)
            break;
        if ((st = interp_bindings_adopt_array(b, e->name, a)) != RV_OK) {
            rv_array_free(a);
            st = base_error(st, "%s: %s", path, rv_last_error());
            break;
        }
        bound++;
    }
    if (st == RV_OK && !bound)
        st = base_error(RV_ERR_ARG,
                        "%s: none of its %d tensors is named after an input or ufun of the program",
                        path, w->entries.len);
    rv_weights_close(w);
    return st;
}
