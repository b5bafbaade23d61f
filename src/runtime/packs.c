/*
 * packs.c — the packs of params a program keeps across runs.
 *
 * The lowering makes a schedule's packed copy of a param input (`param W`,
 * cache_read(W, layout=...)) a buffer whose contents depend on the bound
 * array alone (BUF_PACK, lower/attach.c). A program keeps one such copy
 * per pack buffer: the one derived from the binding whose stamp it holds
 * (rv_bindings.t_stamp, unique over every binding of the process, new
 * whenever an array is bound, even the same one again). A run whose
 * binding has that stamp reads the kept copy, and the kernel skips the
 * pack's nest; any other run gets a fresh buffer that its kernel fills,
 * and that becomes the kept copy when the run succeeds. So two bindings
 * objects used in turn re-pack in turn: neither ever reads the other's
 * copy, nor a copy of an array bound before.
 *
 * Runs may overlap (ravel.h: one program, several threads, each with its
 * own bindings): a copy is reference-counted, the program holding one
 * reference to its kept copy and each run one to the copy it reads or
 * fills, so replacing the kept copy never frees one a run still reads. The
 * lock is held only to look up, count and swap, never while packing.
 *
 * Packs of one program whose contents are the same (Buffer.pack_key: one
 * param, region and layout; the layers of an encoder with tied weights)
 * share one copy: the kept one across runs, and within a run the one the
 * first of them fills (program.c, place_pack), its fill flag shared too
 * and cleared once a kernel has run, so later kernels read the copy.
 */
#include <string.h>

#include "runtime/program.h"
#include "runtime/runtime.h"

struct RtPack {
    const Buffer *buf;
    uint64_t stamp;
    int64_t nelem;
    void *data;
    int refs;
};

static void unref(RtPack *k) {
    if (k && --k->refs == 0) {
        rt_aligned_free(k->data);
        base_free(k);
    }
}

void rt_packs_init(RtPacks *ps) {
    memset(ps, 0, sizeof *ps);
    pthread_mutex_init(&ps->mu, NULL);
}

void rt_packs_free(RtPacks *ps) {
    for (int i = 0; i < ps->kept.len; i++)
        unref(ps->kept.data[i]);
    vec_free(&ps->kept);
    pthread_mutex_destroy(&ps->mu);
}

bool rt_pack_same(const Buffer *a, const Buffer *b) {
    return a == b || (a->pack_key && b->pack_key && a->pack_of == b->pack_of &&
                      strcmp(a->pack_key, b->pack_key) == 0);
}

/* The kept copy of buf's pack (its index in kept), or -1. Under the lock. */
static int kept_index(const RtPacks *ps, const Buffer *buf) {
    for (int i = 0; i < ps->kept.len; i++)
        if (rt_pack_same(ps->kept.data[i]->buf, buf))
            return i;
    return -1;
}

RtPack *rt_pack_acquire(RtPacks *ps, const Buffer *buf, uint64_t stamp, int64_t nelem,
                        bool *fill) {
    pthread_mutex_lock(&ps->mu);
    int i = kept_index(ps, buf);
    RtPack *k = i >= 0 ? ps->kept.data[i] : NULL;
    bool hit = k && stamp && k->stamp == stamp && k->nelem == nelem;
    if (hit)
        k->refs++;
    pthread_mutex_unlock(&ps->mu);
    *fill = !hit;
    if (hit)
        return k;
    size_t es = rv_dtype_size(buf->dtype);
    if (nelem < 0 || (uint64_t)nelem > SIZE_MAX / es)
        return NULL;
    k = base_xcalloc(1, sizeof *k);
    *k = (RtPack){.buf = buf, .stamp = stamp, .nelem = nelem, .refs = 1};
    if (!(k->data = rt_aligned_zalloc((size_t)nelem * es))) {
        base_free(k);
        return NULL;
    }
    return k;
}

void *rt_pack_data(const RtPack *k) {
    return k->data;
}

RtPack *rt_pack_share(RtPacks *ps, RtPack *k) {
    pthread_mutex_lock(&ps->mu);
    k->refs++;
    pthread_mutex_unlock(&ps->mu);
    return k;
}

const Buffer *rt_pack_buffer(const RtPack *k) {
    return k->buf;
}

void rt_pack_release(RtPacks *ps, RtPack *k, bool keep) {
    if (!k)
        return;
    pthread_mutex_lock(&ps->mu);
    int i = kept_index(ps, k->buf);
    if (keep && k->stamp && (i < 0 || ps->kept.data[i] != k)) {
        k->refs++; /* the program's reference */
        if (i < 0) {
            vec_push(&ps->kept, k);
        } else {
            unref(ps->kept.data[i]);
            ps->kept.data[i] = k;
        }
    }
    unref(k);
    pthread_mutex_unlock(&ps->mu);
}

void rt_packs_forget(RtPacks *ps) {
    pthread_mutex_lock(&ps->mu);
    for (int i = 0; i < ps->kept.len; i++)
        unref(ps->kept.data[i]);
    ps->kept.len = 0;
    pthread_mutex_unlock(&ps->mu);
}
