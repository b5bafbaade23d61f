/*
 * program.c — running compiled programs on the same bindings as the
 * interpreter. The compile driver (src/driver/compile.c) makes the
 * program: its kernels' interfaces and loaded functions
 * (src/runtime/program.h); this file only runs it.
 *
 * rv_program_run does, in order, with nothing computed before everything
 * is checked:
 *
 *   1. check the arguments exactly as the interpreter does (interp_prepare:
 *      sizes bound and in range, UF arrays shaped by their domains with
 *      values in their declared ranges, inputs with the right dtype and
 *      (possibly ragged) shape), and evaluate every computed tensor's
 *      layout (a negative extent is an error here, not a crash later);
 *   2. gather the buffers the kernels take: one per UF (converted to the
 *      buffer's integer type), per AUX array and per tensor, shared by all
 *      kernels that name the same object;
 *   3. allocate the AUX arrays (their sizes depend on sizes and UFs only)
 *      and run every prelude, which fills them;
 *   4. evaluate each tensor buffer's size (it may load AUX arrays: the size
 *      of a ragged tensor is a row-start array's last entry) and compare it
 *      with the storage the runtime expects, then place the tensors: an
 *      unpadded tensor's storage *is* its canonical array, so inputs are
 *      passed in place and results computed straight into the arrays handed
 *      back; a padded one lives in a zeroed buffer and is copied in or out;
 *   5. call the kernels in order, with an rv_rt_ctx holding the thread
 *      pool's parallel-for and a scratch allocator;
 *   6. store every computed tensor in the bindings, in canonical layout
 *      (ragged: 1-D, packed, no padding), as the interpreter does, so the
 *      two can be compared element by element.
 *
 * STORAGE WITH PADDING. The storage order (Storage, src/ir/layout.h) is
 * the canonical order with each level's extent rounded up to its pad; a
 * variable level's row starts are prefix sums over *storage* prefixes,
 * padded ones included. For a padded tensor this file evaluates that
 * description on the host (ir_storage_eval: the constant levels' padded
 * extents, and the row-start arrays the preludes filled) and copies
 * between canonical arrays and storage through it.
 *
 * Buffers given to kernels are 64-byte aligned and never NULL (ravel_rt.h).
 * Counters accumulate per program (rv_program_stats).
 *
 * THE CUDA TARGET (rv_compile_options.target = RV_TARGET_CUDA; the
 * functions under "CUDA" below). The driver also compiles each kernel as
 * CUDA C for device 0 and keeps its launch extents; the C unit is still
 * built, for its preludes. A run does steps 1-4 and 6 as above,
 * on the host; step 5 copies every slot (UF, AUX and tensor storage) to
 * device memory, evaluates each kernel's grid and block extents from the
 * sizes, launches the kernels in order, and copies the computed tensors'
 * storage back before step 6.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "interp/interp.h"
#include "runtime/program.h"
#include "runtime/runtime.h"
#include "runtime/threadpool.h"

/* ---- the ABI's tensor descriptor is DLPack's DLTensor ---- */

_Static_assert(sizeof(rv_rt_device) == sizeof(DLDevice), "rv_rt_device is not DLDevice");
_Static_assert(offsetof(rv_rt_device, device_id) == offsetof(DLDevice, device_id),
               "rv_rt_device.device_id");
_Static_assert(sizeof(rv_rt_dtype) == sizeof(DLDataType), "rv_rt_dtype is not DLDataType");
_Static_assert(offsetof(rv_rt_dtype, code) == offsetof(DLDataType, code), "rv_rt_dtype.code");
_Static_assert(offsetof(rv_rt_dtype, bits) == offsetof(DLDataType, bits), "rv_rt_dtype.bits");
_Static_assert(offsetof(rv_rt_dtype, lanes) == offsetof(DLDataType, lanes), "rv_rt_dtype.lanes");
_Static_assert(sizeof(rv_rt_tensor) == sizeof(DLTensor), "rv_rt_tensor is not DLTensor");
_Static_assert(offsetof(rv_rt_tensor, data) == offsetof(DLTensor, data), "rv_rt_tensor.data");
_Static_assert(offsetof(rv_rt_tensor, device) == offsetof(DLTensor, device), "rv_rt_tensor.device");
_Static_assert(offsetof(rv_rt_tensor, ndim) == offsetof(DLTensor, ndim), "rv_rt_tensor.ndim");
_Static_assert(offsetof(rv_rt_tensor, dtype) == offsetof(DLTensor, dtype), "rv_rt_tensor.dtype");
_Static_assert(offsetof(rv_rt_tensor, shape) == offsetof(DLTensor, shape), "rv_rt_tensor.shape");
_Static_assert(offsetof(rv_rt_tensor, strides) == offsetof(DLTensor, strides),
               "rv_rt_tensor.strides");
_Static_assert(offsetof(rv_rt_tensor, byte_offset) == offsetof(DLTensor, byte_offset),
               "rv_rt_tensor.byte_offset");
_Static_assert(RV_RT_ALIGN == RT_ARRAY_ALIGN, "kernels assume the alignment arrays have");

double rt_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The host side of rv_rt_ctx: scratch memory that remembers failures. */
typedef struct Host {
    atomic_int failed;
} Host;

static void *host_alloc(struct rv_rt_ctx *ctx, size_t n) {
    void *p = rt_scratch_alloc(n);
    if (!p)
        atomic_store(&((Host *)ctx->host)->failed, 1);
    return p;
}

static void host_free(struct rv_rt_ctx *ctx, void *p) {
    (void)ctx;
    rt_scratch_free(p);
}

static void serial_for(int64_t n, void (*fn)(void *, int64_t, int64_t, int), void *closure) {
    if (n > 0)
        fn(closure, 0, n, 0);
}

void rv_program_stats(const rv_program *p, rv_program_counters *out) {
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (p)
        *out = p->stats;
}

/* ---- a run ---- */

typedef enum SlotKind { SLOT_UF, SLOT_AUX, SLOT_TENSOR } SlotKind;

/* One buffer of the run, shared by every kernel naming the same object. */
typedef struct Slot {
    SlotKind kind;
    const Buffer *buf; /* the first buffer seen for it */
    const Tensor *t;   /* TENSOR */
    void *data;        /* what kernels get */
    int64_t nelem;     /* elements in data */
    void *owned;       /* rt_aligned_zalloc'd storage to free, if any */
    rv_array *arr;     /* a computed tensor's array (its storage when unpadded) */
    Layout *store;     /* padded tensors: the storage order (ir_storage_eval) */
} Slot;

typedef struct Run {
    rv_program *p;
    Interp in;
    Vec(Slot) slots;
    PtrMap slot_of;  /* Tensor* (tensors) or Buffer* (UF, AUX) -> 1 + slot index */
    int64_t **sizes; /* per kernel: its sizes array */
    void ***bufs;    /* per kernel: its buffers array */
    bool check_failed; /* a kernel's run-time check failed (see run_failed) */
} Run;

/* The slot of a tensor, or of a UF or AUX buffer. */
static Slot *slot_of(Run *r, const void *key) {
    intptr_t i = (intptr_t)ptrmap_get(&r->slot_of, key);
    return i ? &r->slots.data[i - 1] : NULL;
}

static Slot *slot_for(Run *r, const Buffer *b) {
    return slot_of(r, b->tensor ? (const void *)b->tensor : (const void *)b);
}

/* A load on the host: of a UF array (in its canonical layout) or of an
 * AUX array once allocated (sizes of ragged tensors read row starts). */
static rv_status host_load(void *ctx, const Buffer *buf, int64_t i, int64_t *out) {
    Run *r = ctx;
    if (buf->uf) {
        const Layout *dom = r->in.ufl[buf->uf->id];
        if (i < 0 || i >= dom->numel)
            return base_error(RV_ERR_BOUNDS, "ufun %s: element %lld read outside its %lld values",
                              buf->uf->name, (long long)i, (long long)dom->numel);
        *out = r->in.ufv[buf->uf->id][i];
        return RV_OK;
    }
    Slot *s = slot_for(r, buf);
    if (!s || s->kind != SLOT_AUX || !s->data)
        return base_error(RV_ERR_UNSUPPORTED, "%s is not available on the host", buf->name);
    if (i < 0 || i >= s->nelem)
        return base_error(RV_ERR_BOUNDS,
                          "aux array %s: element %lld read outside its %lld elements", buf->name,
                          (long long)i, (long long)s->nelem);
    *out = ((const int64_t *)s->data)[i];
    return RV_OK;
}

/* The value of an integer expression over sizes, UF values and AUX arrays
 * (buffer sizes, launch extents): ir_eval_index with host_load. */
static rv_status eval_int(Run *r, const Expr *e, int64_t *out) {
    LayoutEnv env = r->in.env;
    env.load = host_load;
    env.load_ctx = r;
    return ir_eval_index(&env, e, 0, NULL, NULL, out);
}

/* A buffer's size in elements. */
static rv_status buffer_size(Run *r, const Buffer *b, int64_t *n) {
    rv_status st = eval_int(r, b->size, n);
    if (st != RV_OK) {
        char *prev = base_xstrdup(rv_last_error());
        base_error(st, "buffer %s: %s", b->name, prev);
        base_free(prev);
        return st;
    }
    if (*n < 0)
        return base_error(RV_ERR_BOUNDS, "buffer %s: negative size %lld", b->name, (long long)*n);
    return RV_OK;
}

/* A padded tensor's storage order, from its Storage and the row-start
 * arrays the preludes filled. */
static rv_status store_build(Run *r, const Storage *st, Layout **out) {
    int64_t *start[RV_MAX_DIMS] = {0};
    int64_t len[RV_MAX_DIMS] = {0};
    for (int k = 0; k < st->ndim; k++) {
        if (!st->variable[k])
            continue;
        Slot *s = slot_for(r, st->start[k]);
        RV_ASSERT(s && s->kind == SLOT_AUX); /* a kernel naming a buffer names its row starts */
        start[k] = s->data;
        len[k] = s->nelem;
    }
    return ir_storage_eval(&r->in.env, st, start, len, out);
}

/* Copies between a canonical array and padded storage. */
static void store_copy(const Layout *s, const Layout *l, size_t esize, const void *from, void *to,
                       bool to_storage) {
    LayoutIter it;
    for (bool ok = ir_layout_iter_begin(l, &it); ok; ok = ir_layout_iter_next(l, &it)) {
        int bad_dim;
        int64_t bad_ext, c = it.rank[l->ndim], st = ir_layout_offset(s, it.idx, &bad_dim, &bad_ext);
        RV_ASSERT(st >= 0); /* storage extents are padded canonical ones */
        if (to_storage)
            memcpy((char *)to + st * (int64_t)esize, (const char *)from + c * (int64_t)esize,
                   esize);
        else
            memcpy((char *)to + c * (int64_t)esize, (const char *)from + st * (int64_t)esize,
                   esize);
    }
}

static void run_release(Run *r) {
    for (int i = 0; i < r->slots.len; i++) {
        Slot *s = &r->slots.data[i];
        rt_aligned_free(s->owned);
        rv_array_free(s->arr);
        ir_layout_free(s->store);
    }
    for (int k = 0; r->sizes && k < r->p->n; k++) {
        base_free(r->sizes[k]);
        base_free(r->bufs[k]);
    }
    base_free(r->sizes);
    base_free(r->bufs);
    vec_free(&r->slots);
    ptrmap_free(&r->slot_of);
    interp_release(&r->in);
}

/* Step 2: one slot per distinct UF, AUX array and tensor. */
static void gather_slots(Run *r) {
    rv_program *p = r->p;
    for (int k = 0; k < p->n; k++) {
        const Kernel *kn = p->kernels[k];
        for (int i = 0; i < kn->nparams; i++) {
            const Param *pa = &kn->params[i];
            if (pa->kind == PARAM_SIZE || slot_for(r, pa->buf))
                continue;
            Slot s = {.buf = pa->buf, .t = pa->buf->tensor};
            s.kind = pa->kind == PARAM_UF    ? SLOT_UF
                     : pa->kind == PARAM_AUX ? SLOT_AUX
                                             : SLOT_TENSOR;
            RV_ASSERT(s.kind != SLOT_UF || pa->buf->uf);
            RV_ASSERT(s.kind != SLOT_TENSOR || s.t);
            vec_push(&r->slots, s);
            const void *key = s.t ? (const void *)s.t : (const void *)pa->buf;
            ptrmap_put(&r->slot_of, key, (void *)(intptr_t)r->slots.len);
        }
    }
}

/* Step 3a: UF arrays in the buffers' integer types, and zeroed AUX arrays.
 * A UF array holds its domain's canonical layout, whose size the runtime
 * knows; the lowering's size expression of a ragged domain loads the
 * domain's row starts, which only the preludes fill (check_uf_sizes
 * compares the two after them). AUX sizes are over sizes alone. */
static rv_status place_ufs_and_aux(Run *r) {
    for (int i = 0; i < r->slots.len; i++) {
        Slot *s = &r->slots.data[i];
        if (s->kind == SLOT_TENSOR)
            continue;
        rv_status st;
        if (s->kind == SLOT_UF)
            s->nelem = r->in.ufl[s->buf->uf->id]->numel;
        else if ((st = buffer_size(r, s->buf, &s->nelem)) != RV_OK)
            return st;
        size_t es = rv_dtype_size(s->buf->dtype);
        RV_ASSERT(s->buf->dtype == RV_I32 || s->buf->dtype == RV_I64);
        if ((uint64_t)s->nelem > SIZE_MAX / es ||
            !(s->owned = s->data = rt_aligned_zalloc((size_t)s->nelem * es)))
            return base_error(RV_ERR_OOM, "buffer %s: cannot allocate %lld elements", s->buf->name,
                              (long long)s->nelem);
        if (s->kind == SLOT_UF) {
            const int64_t *v = r->in.ufv[s->buf->uf->id];
            for (int64_t j = 0; j < s->nelem; j++) {
                if (s->buf->dtype == RV_I32)
                    ((int32_t *)s->data)[j] = (int32_t)v[j];
                else
                    ((int64_t *)s->data)[j] = v[j];
            }
        }
    }
    return RV_OK;
}

/* Step 3c: the lowering's size of each UF array, once the preludes have
 * filled the row starts it may load, against the runtime's. */
static rv_status check_uf_sizes(Run *r) {
    for (int i = 0; i < r->slots.len; i++) {
        Slot *s = &r->slots.data[i];
        if (s->kind != SLOT_UF)
            continue;
        int64_t lowered;
        rv_status st = buffer_size(r, s->buf, &lowered);
        if (st != RV_OK)
            return st;
        if (lowered != s->nelem)
            return base_error(RV_ERR_UNSUPPORTED,
                              "ufun %s: the compiled code stores %lld values where the runtime "
                              "has %lld (storage layouts disagree)",
                              s->buf->uf->name, (long long)lowered, (long long)s->nelem);
    }
    return RV_OK;
}

/* The sizes and buffers arrays of every kernel (tensor entries are filled
 * in once the tensors are placed). */
static void build_args(Run *r) {
    rv_program *p = r->p;
    r->sizes = base_xcalloc((size_t)p->n + 1, sizeof *r->sizes);
    r->bufs = base_xcalloc((size_t)p->n + 1, sizeof *r->bufs);
    for (int k = 0; k < p->n; k++) {
        const Kernel *kn = p->kernels[k];
        r->sizes[k] = base_xcalloc((size_t)kn->nparams + 1, sizeof(int64_t));
        r->bufs[k] = base_xcalloc((size_t)kn->nparams + 1, sizeof(void *));
        int ns = 0, nb = 0;
        for (int i = 0; i < kn->nparams; i++) {
            const Param *pa = &kn->params[i];
            if (pa->kind == PARAM_SIZE)
                r->sizes[k][ns++] = r->in.sizes[pa->size->id];
            else
                r->bufs[k][nb++] = slot_for(r, pa->buf)->data;
        }
    }
}

static void refresh_bufs(Run *r) {
    rv_program *p = r->p;
    for (int k = 0; k < p->n; k++) {
        const Kernel *kn = p->kernels[k];
        int nb = 0;
        for (int i = 0; i < kn->nparams; i++)
            if (kn->params[i].kind != PARAM_SIZE)
                r->bufs[k][nb++] = slot_for(r, kn->params[i].buf)->data;
    }
}

/* The array the interpreter would make for a layout. */
static rv_array *array_for(rv_dtype t, const Layout *l) {
    int64_t one[1] = {l->numel};
    if (l->ragged)
        return rv_array_new(t, 1, one);
    return rv_array_new(t, l->ndim, l->ndim ? l->shape : one);
}

/* Step 4: every tensor's storage, checked against the lowering's size. */
static rv_status place_tensors(Run *r) {
    for (int i = 0; i < r->slots.len; i++) {
        Slot *s = &r->slots.data[i];
        if (s->kind != SLOT_TENSOR)
            continue;
        const Tensor *t = s->t;
        const TensorVal *tv = &r->in.tv[t->id];
        const Layout *l = tv->lay;
        RV_ASSERT(l);
        rv_status st;
        int64_t lowered;
        if ((st = buffer_size(r, s->buf, &lowered)) != RV_OK)
            return st;
        int64_t need = l->numel;
        if (ir_storage_padded(s->buf->storage)) {
            if ((st = store_build(r, s->buf->storage, &s->store)) != RV_OK)
                return st;
            need = s->store->numel;
        }
        if (lowered != need)
            return base_error(RV_ERR_UNSUPPORTED,
                              "tensor %s: the compiled code stores %lld elements where the "
                              "runtime expects %lld (storage layouts disagree)",
                              t->name, (long long)lowered, (long long)need);
        s->nelem = need;
        size_t es = rv_dtype_size(t->dtype);
        bool input = t->op->kind == OP_INPUT;
        if (!s->store && input && ((uintptr_t)tv->data % RV_RT_ALIGN) == 0) {
            s->data = (void *)tv->data; /* kernels never store to inputs */
            continue;
        }
        if (!s->store && !input) {
            if (!(s->arr = array_for(t->dtype, l)))
                return base_error(RV_ERR_OOM, "tensor %s: cannot allocate %lld elements", t->name,
                                  (long long)need);
            s->data = rv_array_data(s->arr);
            continue;
        }
        if ((uint64_t)need > SIZE_MAX / es ||
            !(s->owned = s->data = rt_aligned_zalloc((size_t)need * es)))
            return base_error(RV_ERR_OOM, "tensor %s: cannot allocate %lld elements", t->name,
                              (long long)need);
        if (input && s->store)
            store_copy(s->store, l, es, tv->data, s->data, true);
        else if (input)
            memcpy(s->data, tv->data, (size_t)need * es);
    }
    return RV_OK;
}

/* Step 6: computed tensors into the bindings, canonical. */
static rv_status store_results(Run *r) {
    const Module *m = r->p->m;
    for (int i = 0; i < m->tensors.len; i++) {
        const Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            continue;
        Slot *s = slot_of(r, t);
        /* intermediates computed inside another kernel or inlined have no
         * storage of their own; outputs always do */
        if (!s && !ir_tensor_is_output(m, t))
            continue;
        if (!s)
            return base_error(RV_ERR_UNSUPPORTED, "tensor %s: no compiled kernel stores it",
                              t->name);
        if (!s->arr) {
            const Layout *l = r->in.tv[t->id].lay;
            if (!(s->arr = array_for(t->dtype, l)))
                return base_error(RV_ERR_OOM, "tensor %s: cannot allocate %lld elements", t->name,
                                  (long long)l->numel);
            store_copy(s->store, l, rv_dtype_size(t->dtype), s->data, rv_array_data(s->arr), false);
        }
    }
    /* hand the arrays over only once all exist */
    for (int i = 0; i < m->tensors.len; i++) {
        const Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            continue;
        Slot *s = slot_of(r, t);
        if (!s)
            continue;
        interp_bindings_own_tensor(r->in.b, t, s->arr);
        s->arr = NULL;
    }
    return RV_OK;
}

/* ---- CUDA: running ---- */

/* One kernel's launch: grid and block extents from the sizes (at least 1
 * each: bound loops guard their own extents), checked against CUDA's
 * limits; the arguments by value, buffers as the slots' device pointers. */
static rv_status cuda_launch_kernel(Run *r, int k, const JitDevPtr *dev) {
    rv_program *p = r->p;
    const Kernel *kn = p->kernels[k];
    const CgLaunch *l = &p->cuda_launch[k];
    static const int64_t limit[6] = {2147483647, 65535, 65535, 1024, 1024, 64};
    int64_t ext[6];
    unsigned grid[3], block[3];
    rv_status st;
    for (int d = 0; d < 6; d++) {
        Expr *e = d < 3 ? l->grid[d] : l->block[d - 3];
        ext[d] = 1;
        if (e && (st = eval_int(r, e, &ext[d])) != RV_OK)
            return st;
        if (ext[d] < 1)
            ext[d] = 1;
    }
    bool ok = ext[3] * ext[4] * ext[5] <= 1024;
    for (int d = 0; d < 6; d++)
        ok &= ext[d] <= limit[d];
    if (!ok)
        return base_error(RV_ERR_UNSUPPORTED,
                          "kernel %s: launch grid (%lld, %lld, %lld), block (%lld, %lld, %lld) is "
                          "beyond CUDA's limits (grid y, z <= 65535; at most 1024 threads per "
                          "block): bind smaller loops",
                          kn->name, (long long)ext[0], (long long)ext[1], (long long)ext[2],
                          (long long)ext[3], (long long)ext[4], (long long)ext[5]);
    for (int d = 0; d < 3; d++) {
        grid[d] = (unsigned)ext[d];
        block[d] = (unsigned)ext[3 + d];
    }
    /* cuLaunchKernel takes a pointer to each argument's value */
    int64_t *vals = base_xcalloc((size_t)kn->nparams + 1, sizeof *vals);
    JitDevPtr *ptrs = base_xcalloc((size_t)kn->nparams + 1, sizeof *ptrs);
    void **args = base_xcalloc((size_t)kn->nparams + 1, sizeof *args);
    for (int i = 0; i < kn->nparams; i++) {
        const Param *pa = &kn->params[i];
        if (pa->kind == PARAM_SIZE) {
            vals[i] = r->in.sizes[pa->size->id];
            args[i] = &vals[i];
        } else {
            ptrs[i] = dev[slot_for(r, pa->buf) - r->slots.data];
            args[i] = &ptrs[i];
        }
    }
    st = jit_cuda_launch(p->cuda_fns[k], grid, block, args);
    if (st != RV_OK)
        st = base_error(st, "kernel %s: %s", kn->name, rv_last_error());
    p->stats.kernel_calls++;
    base_free(args);
    base_free(ptrs);
    base_free(vals);
    return st;
}

/* Step 5 on the device: every slot copied to device memory, the kernels
 * launched in order, the computed tensors' storage copied back to the
 * host buffers step 6 reads. Device memory lives for this call only. */
static rv_status cuda_run_kernels(Run *r) {
    rv_program *p = r->p;
    int ns = r->slots.len;
    JitDevPtr *dev = base_xcalloc((size_t)ns + 1, sizeof *dev);
    rv_status st = RV_OK;
    for (int i = 0; st == RV_OK && i < ns; i++) {
        const Slot *s = &r->slots.data[i];
        size_t bytes = (size_t)s->nelem * rv_dtype_size(s->buf->dtype);
        st = jit_cuda_alloc(bytes, &dev[i]);
        if (st == RV_OK)
            st = jit_cuda_to_device(dev[i], s->data, bytes);
    }
    double t0 = rt_now_seconds();
    for (int k = 0; st == RV_OK && k < p->n; k++)
        st = cuda_launch_kernel(r, k, dev);
    p->stats.kernel_seconds += rt_now_seconds() - t0;
    for (int i = 0; st == RV_OK && i < ns; i++) {
        const Slot *s = &r->slots.data[i];
        if (s->kind == SLOT_TENSOR && s->t->op->kind != OP_INPUT)
            st = jit_cuda_to_host(s->data, dev[i], (size_t)s->nelem * rv_dtype_size(s->buf->dtype));
    }
    for (int i = 0; i < ns; i++)
        jit_cuda_free(dev[i]);
    base_free(dev);
    return st;
}

static rv_status run_steps(Run *r) {
    rv_program *p = r->p;
    const Module *m = p->m;
    rv_status st;
    /* 1. arguments and layouts */
    if ((st = interp_prepare(&r->in, m, r->in.b, NULL)) != RV_OK)
        return st;
    for (int i = 0; i < m->tensors.len; i++) {
        const Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            continue;
        char what[300];
        snprintf(what, sizeof what, "tensor %s", t->name);
        if ((st = ir_layout_tensor(&r->in.env, what, t, &r->in.tv[t->id].lay)) != RV_OK)
            return st;
    }
    /* 2, 3. buffers, AUX arrays, preludes */
    gather_slots(r);
    if ((st = place_ufs_and_aux(r)) != RV_OK)
        return st;
    build_args(r);
    double t0 = rt_now_seconds();
    for (int k = 0; k < p->n; k++)
        if (p->preludes[k] && p->preludes[k](r->sizes[k], (void *const *)r->bufs[k]) != RV_RT_OK)
            return base_error(RV_ERR_BOUNDS, "the prelude of %s failed", p->kernels[k]->name);
    p->stats.prelude_seconds += rt_now_seconds() - t0;
    if ((st = check_uf_sizes(r)) != RV_OK)
        return st;
    /* 4. tensors */
    if ((st = place_tensors(r)) != RV_OK)
        return st;
    refresh_bufs(r);
    /* 5. kernels */
    if (p->target == RV_TARGET_CUDA) {
        if ((st = cuda_run_kernels(r)) != RV_OK)
            return st;
        return store_results(r);
    }
    Host host = {0};
    struct rv_rt_ctx ctx = {.abi_version = RV_RT_ABI_VERSION,
                            .num_threads = p->serial ? 1 : tp_num_threads(tp_default()),
                            .parallel_for = p->serial ? serial_for : ravel_rt_parallel_for,
                            .alloc = host_alloc,
                            .free = host_free,
                            .host = &host};
    t0 = rt_now_seconds();
    for (int k = 0; k < p->n; k++) {
        int32_t rc = p->fns[k](r->sizes[k], (void *const *)r->bufs[k], &ctx);
        p->stats.kernel_calls++;
        if (atomic_load(&host.failed))
            return base_error(RV_ERR_OOM, "kernel %s: out of scratch memory", p->kernels[k]->name);
        if (rc != RV_RT_OK)
            return base_error(RV_ERR_BOUNDS, "kernel %s failed (code %d)", p->kernels[k]->name,
                              (int)rc);
        if (ctx.error) {
            const Kernel *kn = p->kernels[k];
            r->check_failed = true;
            return base_error(RV_ERR_BOUNDS, "kernel %s: %s", kn->name,
                              ctx.error <= kn->nsites ? kn->sites[ctx.error - 1] : "a check failed");
        }
    }
    p->stats.kernel_seconds += rt_now_seconds() - t0;
    /* 6. results */
    return store_results(r);
}

/* A run-time check of compiled code failed (an index out of range, a
 * division by zero): the interpreter, run on the same arguments, names the
 * first failing element in the definition's order, with the message it
 * gives for the program. Its message replaces the kernel's own, which is
 * kept when the interpreter finds nothing (it evaluates in double and may
 * not reach the same element). Only failing runs pay for this. */
static rv_status run_failed(rv_program *p, rv_bindings *b) {
    char *kernel_msg = base_xstrdup(rv_last_error());
    rv_status st = rv_interp_run(p->m, b);
    if (st == RV_OK)
        st = base_error(RV_ERR_BOUNDS, "%s", kernel_msg);
    base_free(kernel_msg);
    return st;
}

rv_status rv_program_run(rv_program *p, rv_bindings *b) {
    if (!p || !b)
        return base_error(RV_ERR_ARG, "rv_program_run: no program or bindings");
    if (b->m != p->m)
        return base_error(RV_ERR_ARG, "rv_program_run: the bindings belong to another module");
    if (p->m->tensors.len != p->ntensors)
        return base_error(RV_ERR_ARG, "rv_program_run: the module gained tensors after it was "
                                      "compiled; compile it again");
    interp_bindings_sync(b);
    interp_bindings_clear_outputs(b);
    Run r = {.p = p};
    r.in.b = b;
    rv_status st = run_steps(&r);
    run_release(&r);
    if (r.check_failed)
        st = run_failed(p, b);
    if (st != RV_OK)
        interp_bindings_clear_outputs(b);
    p->stats.runs++;
    return st;
}
