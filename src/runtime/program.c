/*
 * program.c — running compiled programs on the same bindings as the
 * interpreter. The compile driver (src/driver/compile.c) makes the
 * program: its kernels' interfaces and loaded functions
 * (src/runtime/program.h); this file only runs it.
 *
 * rv_program_run interprets the program's host plan (src/plan/plan.h,
 * whose plan.c says the order of the steps): this file gives each step
 * its meaning on bindings. CHECK_ARGS checks them exactly as the
 * interpreter does (interp_prepare) and evaluates every computed tensor's
 * layout; PLACE_UF converts a UF array to its buffer's integer type;
 * ALLOC_AUX and PRELUDE make the AUX arrays; PLACE_TENSOR evaluates the
 * buffer's size (it may load AUX arrays: a ragged tensor's size is a
 * row-start array's last entry), compares it with the storage the runtime
 * expects and places the tensor: an unpadded tensor's storage *is* its
 * canonical array, so inputs are passed in place and results computed
 * straight into the arrays handed back; a padded one lives in a zeroed
 * buffer and is copied in or out. CALL runs a kernel with an rv_rt_ctx
 * holding the thread pool's parallel-for and a scratch allocator; RESULT
 * makes every computed tensor's canonical array (ragged: 1-D, packed, no
 * padding), as the interpreter does, so the two compare element by
 * element, and RETURN hands them to the bindings. A program with several
 * variants checks the arguments, asks the dispatch for a variant from the
 * sizes, and runs that variant's plan.
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
 * built, for its preludes. The plan has TO_DEVICE before the calls (every
 * slot, UF, AUX and tensor storage, copied to device memory) and
 * FROM_DEVICE after them (the computed tensors' storage copied back); a
 * CALL evaluates the kernel's grid and block extents from the sizes and
 * launches it; a recursion group's unit either launches its entry points
 * in order, those of its batch loop once per batch (launch_batches), or
 * its persistent kernel cooperatively (docs/recursion.md, "CUDA").
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
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
_Static_assert(RV_RT_ALIGN == IR_ARRAY_ALIGN, "kernels assume the alignment arrays have");

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

void rv_program_invalidate(rv_program *p) {
    if (p)
        rt_packs_forget(&p->packs);
}

int rv_program_last_variant(const rv_program *p) {
    return p ? p->last_variant : -1;
}

void rv_program_stats(const rv_program *p, rv_program_counters *out) {
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    if (!p)
        return;
    pthread_mutex_lock(&((rv_program *)p)->stats_mu);
    *out = p->stats;
    pthread_mutex_unlock(&((rv_program *)p)->stats_mu);
}

/* A run's counters into the program's: runs on several threads at once
 * count separately and add up here. */
static void add_counters(rv_program *p, const rv_program_counters *run) {
    pthread_mutex_lock(&p->stats_mu);
    p->stats.runs++;
    p->stats.kernel_calls += run->kernel_calls;
    p->stats.prelude_seconds += run->prelude_seconds;
    p->stats.kernel_seconds += run->kernel_seconds;
    p->stats.prelude_runs += run->prelude_runs;
    p->stats.aux_bytes += run->aux_bytes;
    p->stats.pack_fills += run->pack_fills;
    pthread_mutex_unlock(&p->stats_mu);
    if (run->prelude_runs && plan_debug())
        fprintf(stderr, "plan run: %lld preludes, %.6f s, %lld bytes of aux arrays\n",
                (long long)run->prelude_runs, run->prelude_seconds, (long long)run->aux_bytes);
}

/* ---- a run: the host plan interpreted ---- */

/* What the run holds for one slot of the plan. */
typedef struct Slot {
    void *data;    /* what kernels get */
    int64_t nelem; /* elements in data */
    void *owned;   /* rt_scratch_alloc'd storage to free, if any */
    rv_array *arr; /* a computed tensor's array (its storage when unpadded) */
    Layout *store; /* padded tensors: the storage order (ir_storage_eval) */
    RtPack *pack;  /* a param's pack: the copy this run reads or fills (packs.c) */
    int32_t *pack_flag; /* its fill flag (Buffer.pack_fill); NULL when it needs none read back */
} Slot;

#define RUN_ON_STACK 32
typedef struct Run {
    rv_program *p;
    const Plan *plan; /* the variant's */
    int first;        /* its first kernel in p->kernels */
    Interp in;
    Slot *slots;       /* per plan slot */
    JitDevPtr *dev;    /* RV_TARGET_CUDA: per plan slot, between TO_DEVICE and FROM_DEVICE */
    Host host;         /* the CPU kernels' context */
    rv_array **into;   /* rv_program_run_into: per tensor id, the caller's output array or NULL */
    /* per tensor id, the array the bindings held from their previous run,
     * reused when this run's has the same shape (run_array) */
    rv_array **spare;
    struct rv_rt_ctx ctx;
    rv_program_counters stats; /* this run's, added to the program's when it ends */
    bool check_failed; /* a kernel's run-time check failed (see run_failed) */
    /* slots, into and spare of a program of up to RUN_ON_STACK slots and
     * tensors (TreeLSTM's plan has 25 slots): a small run's host work is
     * counted in nanoseconds, an allocation in tens of them */
    Slot slots_stack[RUN_ON_STACK];
    rv_array *into_stack[RUN_ON_STACK];
    rv_array *spare_stack[RUN_ON_STACK];
} Run;

/* The run's state of a kernel's buffer. */
static Slot *slot_for(Run *r, const Buffer *b) {
    const PlanSlot *s = plan_slot_for(r->plan, b);
    return s ? &r->slots[plan_slot_index(r->plan, s)] : NULL;
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
    const PlanSlot *ps = plan_slot_for(r->plan, buf);
    Slot *s = slot_for(r, buf);
    if (!s || ps->kind != PLAN_SLOT_AUX || !s->data)
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

/* eval_int with variable `var` (an EX_VAR, or NULL) at value v: a launch
 * extent of a recursion's batch. */
static rv_status eval_int_at(Run *r, const Expr *e, const Expr *var, int64_t v, int64_t *out) {
    if (!var)
        return eval_int(r, e, out);
    LayoutEnv env = r->in.env;
    env.load = host_load;
    env.load_ctx = r;
    Axis *ax = var->u.axis;
    return ir_eval_index(&env, e, 1, &ax, &v, out);
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
        /* a kernel naming a buffer names its row starts */
        RV_ASSERT(s && plan_slot_for(r->plan, st->start[k])->kind == PLAN_SLOT_AUX);
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

static void free_device(Run *r) {
    for (int i = 0; r->dev && i < r->plan->slots.len; i++)
        jit_cuda_free(r->dev[i]);
    base_free(r->dev);
    r->dev = NULL;
}

/* ok: the run succeeded, so the packs it filled are kept (packs.c); a
 * pack that reports its fill (Buffer.pack_reports) only if its kernel
 * filled it (the loop around its copy may have run no iteration). */
static void run_release(Run *r, bool ok) {
    free_device(r);
    for (int i = 0; r->slots && i < r->plan->slots.len; i++) {
        Slot *s = &r->slots[i];
        if (s->pack)
            rt_pack_release(&r->p->packs, s->pack, ok && (!s->pack_flag || s->pack_flag[1]));
    }
    for (int i = 0; r->slots && i < r->plan->slots.len; i++) {
        Slot *s = &r->slots[i];
        rt_scratch_free(s->owned);
        rv_array_free(s->arr);
        ir_layout_free(s->store);
    }
    if (r->slots != r->slots_stack)
        base_free(r->slots);
    for (int i = 0; r->spare && i < r->p->ntensors; i++)
        rv_array_free(r->spare[i]);
    interp_release(&r->in);
}

void rt_program_name_objects(rv_program *p) {
    const Module *m = p->m;
    const char **t = arena_alloc(p->arena, sizeof(char *) * (size_t)(m->tensors.len + 1));
    const char **f = arena_alloc(p->arena, sizeof(char *) * (size_t)(m->ufuns.len + 1));
    for (int i = 0; i < m->tensors.len; i++) {
        const Tensor *x = m->tensors.data[i];
        t[x->id] = arena_printf(p->arena, "%s %s", x->op->kind == OP_INPUT ? "input" : "tensor",
                                x->name);
    }
    for (int i = 0; i < m->ufuns.len; i++)
        f[m->ufuns.data[i]->id] = arena_printf(p->arena, "ufun %s", m->ufuns.data[i]->name);
    p->names = (InterpNames){.tensor = t, .ufun = f};
}

static const InterpNames *program_names(const rv_program *p) {
    return &p->names;
}

/* CHECK_ARGS: the arguments exactly as the interpreter checks them, and
 * every computed tensor's layout (a negative extent is an error here,
 * not a crash later). */
static rv_status check_args(Run *r) {
    const Module *m = r->p->m;
    const InterpNames *names = program_names(r->p);
    rv_status st;
    if ((st = interp_prepare(&r->in, m, r->in.b, NULL, names)) != RV_OK)
        return st;
    for (int i = 0; i < m->tensors.len; i++) {
        const Tensor *t = m->tensors.data[i];
        if (t->op->kind == OP_INPUT)
            continue;
        if ((st = interp_tensor_layout(&r->in, names->tensor[t->id], t)) != RV_OK)
            return st;
    }
    return RV_OK;
}

/* PLACE_UF and ALLOC_AUX: a UF array in the buffer's integer type (its
 * domain's canonical layout, whose size the runtime knows; the caller's
 * array in place when it has that type), or a zeroed
 * AUX array (its size is over sizes alone). */
static rv_status place_uf_or_aux(Run *r, const PlanSlot *ps, Slot *s) {
    rv_status st;
    if (ps->kind == PLAN_SLOT_UF)
        s->nelem = r->in.ufl[ps->buf->uf->id]->numel;
    else if ((st = buffer_size(r, ps->buf, &s->nelem)) != RV_OK)
        return st;
    size_t es = rv_dtype_size(ps->buf->dtype);
    RV_ASSERT(ps->buf->dtype == RV_I32 || ps->buf->dtype == RV_I64);
    if (ps->kind == PLAN_SLOT_UF) {
        /* the caller's array itself when it already is the buffer (its
         * dtype, aligned; canonical, as interp_prepare checked), as inputs
         * are: kernels never store to UFs */
        const rv_array *a = r->in.b->uf_arr[ps->buf->uf->id];
        const void *data = rv_array_cdata(a);
        if (rv_array_dtype(a) == ps->buf->dtype && data && (uintptr_t)data % RV_RT_ALIGN == 0) {
            s->data = (void *)data;
            return RV_OK;
        }
    }
    if ((uint64_t)s->nelem > SIZE_MAX / es ||
        !(s->owned = s->data = rt_scratch_alloc((size_t)s->nelem * es)))
        return base_error(RV_ERR_OOM, "buffer %s: cannot allocate %lld elements", ps->buf->name,
                          (long long)s->nelem);
    if (ps->kind == PLAN_SLOT_AUX)
        r->stats.aux_bytes += s->nelem * (int64_t)es;
    if (ps->kind == PLAN_SLOT_UF) {
        const int64_t *v = r->in.ufv[ps->buf->uf->id];
        for (int64_t j = 0; j < s->nelem; j++) {
            if (ps->buf->dtype == RV_I32)
                ((int32_t *)s->data)[j] = (int32_t)v[j];
            else
                ((int64_t *)s->data)[j] = v[j];
        }
    }
    return RV_OK;
}

/* CHECK_UF_SIZE: the lowering's size of a UF array, once the preludes
 * have filled the row starts it may load, against the runtime's. */
static rv_status check_uf_size(Run *r, const PlanSlot *ps, const Slot *s) {
    int64_t lowered;
    rv_status st = buffer_size(r, ps->buf, &lowered);
    if (st != RV_OK)
        return st;
    if (lowered != s->nelem)
        return base_error(RV_ERR_UNSUPPORTED,
                          "ufun %s: the compiled code stores %lld values where the runtime "
                          "has %lld (storage layouts disagree)",
                          ps->buf->uf->name, (long long)lowered, (long long)s->nelem);
    return RV_OK;
}

/* A computed tensor's canonical array: the one the bindings held from
 * their previous run when its dtype is this run's and its memory holds
 * this run's shape (which it then takes: a batch smaller than an earlier
 * one, as calls of a recursive model on sentences of varying lengths
 * are, allocates nothing; the memory is the largest result's), else a
 * new one. Called where every element is then written (the tensor's kernels,
 * or the copy out of padded storage), so neither the old values nor a
 * new array need zeroing (ir_layout_array_new's shape, uninitialized); a
 * caller running a program again and again on bindings of one shape
 * (serving, benchmarks) thus allocates no intermediate, where a fresh
 * array of a large one cost its page faults on every call. */
static rv_array *run_array(Run *r, const Tensor *t, const Layout *l) {
    rv_array *old = r->spare[t->id];
    r->spare[t->id] = NULL;
    int64_t one[1] = {l->numel};
    int nd = l->ragged ? 1 : l->ndim;
    const int64_t *shape = l->ragged || !l->ndim ? one : l->shape;
    if (old) {
        if (ir_array_reshape_within(old, t->dtype, nd, shape))
            return old;
        rv_array_free(old); /* before the new one: not both at once */
    }
    return ir_array_new_uninit(t->dtype, nd, shape);
}

/* PLACE_TENSOR: a tensor's storage, checked against the lowering's size.
 * An unpadded tensor's storage *is* its canonical array, so inputs are
 * passed in place and results computed straight into the arrays handed
 * back; a padded one lives in a zeroed buffer and is copied in or out. */
static rv_status place_tensor(Run *r, const PlanSlot *ps, Slot *s) {
    const Tensor *t = ps->t;
    const TensorVal *tv = &r->in.tv[t->id];
    const Layout *l = tv->lay;
    RV_ASSERT(l);
    rv_status st;
    int64_t lowered;
    if ((st = buffer_size(r, ps->buf, &lowered)) != RV_OK)
        return st;
    int64_t need = l->numel;
    if (ir_storage_padded(ps->buf->storage)) {
        if ((st = store_build(r, ps->buf->storage, &s->store)) != RV_OK)
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
        return RV_OK;
    }
    rv_array *into = r->into ? r->into[t->id] : NULL;
    if (into && !s->store) {
        s->data = rv_array_data(into); /* the kernels compute in place */
        return RV_OK;
    }
    if (!s->store && !input) {
        if (!(s->arr = run_array(r, t, l)))
            return base_error(RV_ERR_OOM, "tensor %s: cannot allocate %lld elements", t->name,
                              (long long)need);
        s->data = rv_array_data(s->arr);
        return RV_OK;
    }
    if ((uint64_t)need > SIZE_MAX / es ||
        !(s->owned = s->data = rt_scratch_alloc((size_t)need * es)))
        return base_error(RV_ERR_OOM, "tensor %s: cannot allocate %lld elements", t->name,
                          (long long)need);
    if (input && s->store)
        store_copy(s->store, l, es, tv->data, s->data, true);
    else if (input)
        memcpy(s->data, tv->data, (size_t)need * es);
    return RV_OK;
}

/* A kernel's argument arrays: on the stack for the usual few parameters
 * (a small run's host work is counted in microseconds). */
#define ARGS_ON_STACK 32
typedef struct KernelArgs {
    int64_t *sizes;
    void **bufs;
    int64_t sizes_stack[ARGS_ON_STACK];
    void *bufs_stack[ARGS_ON_STACK];
} KernelArgs;

static void args_init(KernelArgs *a, int nparams) {
    bool small = nparams <= ARGS_ON_STACK;
    a->sizes = small ? a->sizes_stack : base_xcalloc((size_t)nparams, sizeof *a->sizes);
    a->bufs = small ? a->bufs_stack : base_xcalloc((size_t)nparams, sizeof *a->bufs);
}

static void args_free(KernelArgs *a) {
    if (a->sizes != a->sizes_stack)
        base_free(a->sizes);
    if (a->bufs != a->bufs_stack)
        base_free(a->bufs);
}

/* What a kernel gets for an empty buffer: zeroed bytes at its origin. A
 * guarded access loads at offset 0 where its guard fails (flatten.c), and
 * uses what it loaded: the children of a batch where no node has any
 * (`prev[select(0 < nprev[n], start, 0)]`) read element 0 of an empty UF
 * array, and index the states with it; here that is node 0, a real row,
 * where an empty array's own pointer holds no element to read. Read-only:
 * no kernel stores to an empty buffer. */
static _Alignas(RV_ARRAY_ALIGN) const unsigned char empty_origin[RV_ARRAY_ALIGN];

/* The argument list of kernel k of the plan: its sizes, and its buffers
 * as the slots hold them now (or their device copies), an empty one as
 * empty_origin. */
static void kernel_args(Run *r, int k, int64_t *sizes, void **bufs, JitDevPtr *dev) {
    const Kernel *kn = r->plan->ks[k];
    int ns = 0, nb = 0;
    for (int i = 0; i < kn->nparams; i++) {
        const Param *pa = &kn->params[i];
        if (pa->kind == PARAM_SIZE) {
            sizes[ns++] = r->in.sizes[pa->size->id];
        } else {
            int slot = plan_arg_slot(r->plan, k, i);
            if (dev)
                dev[nb++] = r->dev[slot];
            else
                bufs[nb++] = r->slots[slot].nelem > 0 ? r->slots[slot].data
                                                      : (void *)empty_origin;
        }
    }
}

static rv_status run_prelude(Run *r, int k) {
    const Kernel *kn = r->plan->ks[k];
    KernelArgs a;
    args_init(&a, kn->nparams);
    kernel_args(r, k, a.sizes, a.bufs, NULL);
    double t0 = rt_now_seconds();
    int32_t rc = r->p->preludes[r->first + k](a.sizes, (void *const *)a.bufs);
    r->stats.prelude_seconds += rt_now_seconds() - t0;
    r->stats.prelude_runs++;
    args_free(&a);
    if (rc != RV_RT_OK)
        return base_error(RV_ERR_BOUNDS, "the prelude of %s failed", kn->name);
    return RV_OK;
}

/* CALL on the CPU: the kernel with the run's rv_rt_ctx (the thread pool's
 * parallel-for and a scratch allocator). */
static rv_status call_kernel(Run *r, int k) {
    rv_program *p = r->p;
    const Kernel *kn = r->plan->ks[k];
    KernelArgs a;
    args_init(&a, kn->nparams);
    kernel_args(r, k, a.sizes, a.bufs, NULL);
    double t0 = rt_now_seconds();
    int32_t rc = p->fns[r->first + k](a.sizes, (void *const *)a.bufs, &r->ctx);
    r->stats.kernel_seconds += rt_now_seconds() - t0;
    r->stats.kernel_calls++;
    args_free(&a);
    if (atomic_load(&r->host.failed))
        return base_error(RV_ERR_OOM, "kernel %s: out of scratch memory", kn->name);
    if (rc != RV_RT_OK)
        return base_error(RV_ERR_BOUNDS, "kernel %s failed (code %d)", kn->name, (int)rc);
    /* its packs are filled: a later kernel sharing one (packs.c) reads it */
    for (int i = 0; i < kn->nparams; i++)
        if (kn->params[i].kind == PARAM_PACK && !kn->params[i].buf->pack_of)
            *(int32_t *)r->slots[plan_arg_slot(r->plan, k, i)].data = 0;
    if (r->ctx.error) {
        r->check_failed = true;
        return base_error(RV_ERR_BOUNDS, "kernel %s: %s", kn->name,
                          r->ctx.error <= kn->nsites ? kn->sites[r->ctx.error - 1]
                                                     : "a check failed");
    }
    return RV_OK;
}

/* RESULT: a computed tensor in canonical layout, as the interpreter
 * makes it (ragged: 1-D, packed, no padding), so the two can be compared
 * element by element. */
static rv_status result(Run *r, const PlanStep *step) {
    const Tensor *t = step->t;
    if (step->slot < 0)
        return base_error(RV_ERR_UNSUPPORTED, "tensor %s: no compiled kernel stores it", t->name);
    Slot *s = &r->slots[step->slot];
    rv_array *into = r->into ? r->into[t->id] : NULL;
    if (s->arr || (into && !s->store))
        return RV_OK;
    const Layout *l = r->in.tv[t->id].lay;
    if (into) {
        store_copy(s->store, l, rv_dtype_size(t->dtype), s->data, rv_array_data(into), false);
        return RV_OK;
    }
    if (!(s->arr = run_array(r, t, l)))
        return base_error(RV_ERR_OOM, "tensor %s: cannot allocate %lld elements", t->name,
                          (long long)l->numel);
    store_copy(s->store, l, rv_dtype_size(t->dtype), s->data, rv_array_data(s->arr), false);
    return RV_OK;
}

/* RETURN: the computed tensors into the bindings, only once all exist. */
static void hand_over(Run *r) {
    for (int i = 0; i < r->plan->steps.len; i++) {
        const PlanStep *step = &r->plan->steps.data[i];
        if (step->kind != PLAN_RESULT || step->slot < 0 || (r->into && r->into[step->t->id]))
            continue;
        interp_bindings_own_tensor(r->in.b, step->t, r->slots[step->slot].arr);
        r->slots[step->slot].arr = NULL;
    }
}

/* ---- CUDA: running ---- */

/* A launch's grid and block from their extents (NULL: 1) at batch
 * `bval` of `batch` (an EX_VAR, or NULL), at least 1 each (bound loops
 * guard their own extents), checked against CUDA's limits. */
static rv_status launch_extents(Run *r, const Kernel *kn, Expr *const *grid_e,
                                Expr *const *block_e, const Expr *batch, int64_t bval,
                                unsigned grid[3], unsigned block[3]) {
    static const int64_t limit[6] = {2147483647, 65535, 65535, 1024, 1024, 64};
    int64_t ext[6];
    rv_status st;
    for (int d = 0; d < 6; d++) {
        Expr *e = d < 3 ? grid_e[d] : block_e[d - 3];
        ext[d] = 1;
        if (e && (st = eval_int_at(r, e, batch, bval, &ext[d])) != RV_OK)
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
    return RV_OK;
}

/* The launches of a recursion group's unit with gpu_batches("launch"):
 * its entry points in order, those of the batch loop once per batch (the
 * batch an argument after the kernel's, each launch sized for its batch
 * from the UF arrays on the host), queued without waiting, then one wait. */
static rv_status launch_batches(Run *r, int k, void **args, int nargs) {
    rv_program *p = r->p;
    const Kernel *kn = r->plan->ks[k];
    const CgLaunch *l = &p->cuda_launch[r->first + k];
    int64_t bval = 0;
    args[nargs] = &bval;
    unsigned grid[3], block[3];
    rv_status st = RV_OK;
    for (int i = 0; st == RV_OK && i < l->nfns;) {
        int end = i + 1;
        int64_t count = 1;
        if (l->fns[i].batch) {
            while (end < l->nfns && l->fns[end].batch)
                end++;
            st = eval_int(r, l->fns[i].batches, &count);
        }
        for (bval = 0; st == RV_OK && bval < count; bval++)
            for (int f = i; st == RV_OK && f < end; f++) {
                const CgCudaFn *fn = &l->fns[f];
                st = launch_extents(r, kn, fn->grid, fn->block, fn->batch, bval, grid, block);
                if (st == RV_OK)
                    st = jit_cuda_launch_fn(p->cuda_fns[r->first + k], f, grid, block, args,
                                            JIT_CUDA_NO_WAIT);
                r->stats.kernel_calls++;
            }
        i = end;
    }
    rv_status done = jit_cuda_synchronize();
    return st != RV_OK ? st : done;
}

/* One kernel's launch: grid and block extents from the sizes, checked
 * against CUDA's limits; the arguments by value, buffers as the slots'
 * device pointers. A recursion group's unit: launch_batches, or one
 * cooperative launch of its persistent kernel over as many blocks as the
 * device holds at once. */
static rv_status cuda_launch_kernel(Run *r, int k) {
    rv_program *p = r->p;
    const Kernel *kn = r->plan->ks[k];
    const CgLaunch *l = &p->cuda_launch[r->first + k];
    JitCudaKernel *fn = p->cuda_fns[r->first + k];
    unsigned grid[3], block[3];
    rv_status st = l->nfns ? RV_OK /* per launch */
                           : launch_extents(r, kn, l->grid, l->block, NULL, 0, grid, block);
    if (st == RV_OK && l->persistent) {
        /* the grid's x is what the device holds at once beside its y and z
         * (constants: cuda.c), all of it resident; its bound loops stride */
        unsigned resident;
        st = jit_cuda_resident_blocks(fn, 0, (int)(block[0] * block[1] * block[2]), &resident);
        if (st == RV_OK && (uint64_t)grid[1] * grid[2] > resident)
            grid[1] = grid[2] = 1;
        grid[0] = st == RV_OK ? resident / (grid[1] * grid[2]) : 1;
    }
    if (st != RV_OK)
        return st;
    /* cuLaunchKernel takes a pointer to each argument's value */
    int64_t *sizes = base_xcalloc((size_t)kn->nparams + 1, sizeof *sizes);
    JitDevPtr *ptrs = base_xcalloc((size_t)kn->nparams + 1, sizeof *ptrs);
    void **args = base_xcalloc((size_t)kn->nparams + 2, sizeof *args);
    kernel_args(r, k, sizes, NULL, ptrs);
    for (int i = 0, ns = 0, nb = 0; i < kn->nparams; i++)
        args[i] = kn->params[i].kind == PARAM_SIZE ? (void *)&sizes[ns++] : (void *)&ptrs[nb++];
    double t0 = rt_now_seconds();
    if (l->nfns) {
        st = launch_batches(r, k, args, kn->nparams);
    } else {
        st = jit_cuda_launch_fn(fn, 0, grid, block, args,
                                l->persistent ? JIT_CUDA_COOPERATIVE : 0);
        r->stats.kernel_calls++;
    }
    r->stats.kernel_seconds += rt_now_seconds() - t0;
    if (st != RV_OK)
        st = base_error(st, "kernel %s: %s", kn->name, rv_last_error());
    base_free(args);
    base_free(ptrs);
    base_free(sizes);
    return st;
}

/* TO_DEVICE: every slot copied to device memory, which lives for this
 * call only. An empty slot gets device bytes holding empty_origin's zeros,
 * for the reason empty_origin gives (a guarded load reads the origin). */
static rv_status to_device(Run *r) {
    int ns = r->plan->slots.len;
    r->dev = base_xcalloc((size_t)ns + 1, sizeof *r->dev);
    rv_status st = RV_OK;
    for (int i = 0; st == RV_OK && i < ns; i++) {
        const Slot *s = &r->slots[i];
        size_t bytes = (size_t)s->nelem * rv_dtype_size(r->plan->slots.data[i].buf->dtype);
        const void *src = bytes ? s->data : (const void *)empty_origin;
        size_t dev_bytes = bytes ? bytes : sizeof empty_origin;
        st = jit_cuda_alloc(dev_bytes, &r->dev[i]);
        if (st == RV_OK)
            st = jit_cuda_to_device(r->dev[i], src, dev_bytes);
    }
    return st;
}

/* FROM_DEVICE: the computed tensors' storage back to the host buffers
 * RESULT reads. */
static rv_status from_device(Run *r) {
    rv_status st = RV_OK;
    for (int i = 0; st == RV_OK && i < r->plan->slots.len; i++) {
        const PlanSlot *ps = &r->plan->slots.data[i];
        if (ps->kind == PLAN_SLOT_TENSOR && ps->t->op->kind != OP_INPUT)
            st = jit_cuda_to_host(r->slots[i].data, r->dev[i],
                                  (size_t)r->slots[i].nelem * rv_dtype_size(ps->buf->dtype));
    }
    free_device(r);
    return st;
}

/* Does kernel kn take UF f's array? */
static bool reads_uf(const Kernel *kn, const Ufun *f) {
    for (int i = 0; f && i < kn->nparams; i++)
        if (kn->params[i].kind == PARAM_UF && kn->params[i].buf->uf == f)
            return true;
    return false;
}

/* CHECK_STRUCT: the numbering kernel k's recursion relies on, its
 * batches too when the kernel reads them, and its unrolled partition. */
static rv_status check_structure(Run *r, int k) {
    const Kernel *kn = r->p->kernels[r->first + k];
    bool batches = reads_uf(kn, kn->rec->st->batch_begin);
    bool unrolled = reads_uf(kn, kn->rec->st->unroll_node);
    /* the batch's bind checked it, in this call (Interp.numbered) */
    rv_status st = r->in.numbered[kn->rec->st->id]
                       ? RV_OK
                       : rt_check_numbering(kn->rec, r->in.sizes, r->in.ufv, batches);
    return st == RV_OK && unrolled ? rt_check_unroll(kn->rec, r->in.sizes, r->in.ufv) : st;
}

/* The unrolled partitions the program's unrolled recursions read, bound
 * by the batch's binding without them (rv_linearize leaves them out: only
 * these programs need them), computed before the arguments are checked. */
static rv_status bind_unrolled(rv_program *p, rv_bindings *b) {
    rv_status st = RV_OK;
    for (int k = 0; st == RV_OK && k < p->n; k++) {
        const Kernel *kn = p->kernels[k];
        if (kn->rec && reads_uf(kn, kn->rec->st->unroll_node))
            st = interp_bindings_unroll(b, kn->rec->st);
    }
    return st;
}

/* A pack placed before ps in this run whose contents are the same (the
 * layers of an encoder with tied weights: packs.c), or NULL. */
static const Slot *placed_same_pack(Run *r, const PlanSlot *ps, const Slot *s) {
    for (int i = 0; i < r->plan->slots.len; i++) {
        const Slot *o = &r->slots[i];
        if (o != s && o->pack && o->nelem == s->nelem &&
            rt_pack_same(rt_pack_buffer(o->pack), ps->buf))
            return o;
    }
    return NULL;
}

/* One step of the plan. */
/* PLACE_PACK: a param's pack (plan.h, PACKS) and its fill flag: the copy
 * kept from a run with the same binding of the param, flag 0, or a new
 * one for the kernel to fill, flag 1. On a device the kept copy would
 * have to live there: the CUDA target packs on every run. */
static rv_status place_pack(Run *r, const PlanSlot *ps, Slot *s) {
    const Buffer *b = ps->buf;
    Slot *flag = slot_for(r, b->pack_fill);
    RV_ASSERT(b->pack_of && flag);
    rv_status st = buffer_size(r, b, &s->nelem);
    if (st != RV_OK)
        return st;
    bool fill = true;
    const Slot *same = r->p->target == RV_TARGET_CUDA ? NULL : placed_same_pack(r, ps, s);
    if (same) {
        /* the copy another pack of this run fills, and its flag */
        s->pack = rt_pack_share(&r->p->packs, same->pack);
        s->data = same->data;
        *flag = *slot_for(r, rt_pack_buffer(same->pack)->pack_fill);
        flag->owned = NULL;
        return RV_OK;
    }
    if (r->p->target == RV_TARGET_CUDA) {
        s->owned = s->data = rt_scratch_alloc((size_t)s->nelem * rv_dtype_size(b->dtype));
    } else {
        uint64_t stamp = interp_bindings_stamp(r->in.b, b->pack_of);
        s->pack = rt_pack_acquire(&r->p->packs, b, stamp, s->nelem, &fill);
        s->data = s->pack ? rt_pack_data(s->pack) : NULL;
    }
    flag->nelem = 2;
    flag->owned = flag->data = rt_scratch_alloc(2 * sizeof(int32_t));
    if (!s->data || !flag->data)
        return base_error(RV_ERR_OOM, "pack %s: cannot allocate %lld elements", b->name,
                          (long long)s->nelem);
    *(int32_t *)flag->data = fill;
    s->pack_flag = fill && b->pack_reports ? flag->data : NULL;
    r->stats.pack_fills += fill;
    return RV_OK;
}

static rv_status run_step(Run *r, const PlanStep *step) {
    const PlanSlot *ps = step->slot >= 0 ? &r->plan->slots.data[step->slot] : NULL;
    Slot *s = step->slot >= 0 ? &r->slots[step->slot] : NULL;
    switch (step->kind) {
    case PLAN_CHECK_ARGS:
        return check_args(r);
    case PLAN_PLACE_UF:
    case PLAN_ALLOC_AUX:
        return place_uf_or_aux(r, ps, s);
    case PLAN_PRELUDE:
        return run_prelude(r, step->kernel);
    case PLAN_CHECK_UF_SIZE:
        return check_uf_size(r, ps, s);
    case PLAN_PLACE_TENSOR:
        return place_tensor(r, ps, s);
    case PLAN_PLACE_PACK:
        return place_pack(r, ps, s);
    case PLAN_CHECK_STRUCT:
        return check_structure(r, step->kernel);
    case PLAN_TO_DEVICE:
        return to_device(r);
    case PLAN_CALL:
        return r->p->target == RV_TARGET_CUDA ? cuda_launch_kernel(r, step->kernel)
                                              : call_kernel(r, step->kernel);
    case PLAN_FROM_DEVICE:
        return from_device(r);
    case PLAN_RESULT:
        return result(r, step);
    case PLAN_RETURN:
        hand_over(r);
        return RV_OK;
    case PLAN_STEP_COUNT:
        break;
    }
    RV_UNREACHABLE();
}

/* "[2, 3]" into buf (at least RV_MAX_DIMS * 22 + 3 bytes). */
static const char *shape_str(char *buf, int ndim, const int64_t *shape) {
    int n = sprintf(buf, "[");
    for (int d = 0; d < ndim; d++)
        n += sprintf(buf + n, "%s%lld", d ? ", " : "", (long long)shape[d]);
    sprintf(buf + n, "]");
    return buf;
}

/* Whether the caller's array a can receive output t of layout l: the
 * array the interpreter would make (ir_layout_array_new: a ragged tensor
 * 1-D and packed) in dtype and shape, and data aligned as kernels assume,
 * since an unpadded output is computed in place. */
static rv_status into_fits(const Tensor *t, const Layout *l, const rv_array *a) {
    if (!a)
        return base_error(RV_ERR_ARG, "rv_program_run_into: output %s: the array is NULL",
                          t->name);
    if (rv_array_dtype(a) != t->dtype)
        return base_error(RV_ERR_ARG, "rv_program_run_into: output %s is %s, the array is %s",
                          t->name, rv_dtype_name(t->dtype), rv_dtype_name(rv_array_dtype(a)));
    int64_t one[1] = {l->numel};
    int ndim = l->ragged ? 1 : l->ndim;
    const int64_t *shape = l->ragged ? one : l->shape;
    bool same = rv_array_ndim(a) == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = rv_array_shape(a)[d] == shape[d];
    char want[RV_MAX_DIMS * 22 + 3], got[RV_MAX_DIMS * 22 + 3];
    if (!same)
        return base_error(RV_ERR_ARG,
                          "rv_program_run_into: output %s needs shape %s%s, the array has %s",
                          t->name, shape_str(want, ndim, shape),
                          l->ragged ? " (ragged: its elements packed)" : "",
                          shape_str(got, rv_array_ndim(a), rv_array_shape(a)));
    if ((uintptr_t)rv_array_cdata(a) % IR_ARRAY_ALIGN != 0)
        return base_error(RV_ERR_ARG,
                          "rv_program_run_into: output %s: the array's data at %p is not "
                          "%d-byte aligned",
                          t->name, rv_array_cdata(a), IR_ARRAY_ALIGN);
    return RV_OK;
}

/* The caller's arrays of rv_program_run_into, by tensor id, once the
 * arguments are checked: each output's dtype and element count as the
 * interpreter would make its array. */
static rv_status check_into(Run *r, rv_array *const *outputs, int n) {
    const Module *m = r->p->m;
    int k = 0;
    for (int i = 0; i < m->tensors.len; i++) {
        const Tensor *t = m->tensors.data[i];
        if (!ir_tensor_is_output(m, t))
            continue;
        if (k >= n)
            return base_error(RV_ERR_ARG, "rv_program_run_into: %d output arrays for more outputs",
                              n);
        rv_array *a = outputs[k++];
        rv_status st = into_fits(t, r->in.tv[t->id].lay, a);
        if (st != RV_OK)
            return st;
        r->into[t->id] = a;
    }
    if (k != n)
        return base_error(RV_ERR_ARG, "rv_program_run_into: %d output arrays for %d outputs", n,
                          k);
    return RV_OK;
}

/* The variant of this run: the dispatch over its sizes (by Size.id). */
static rv_status pick_variant(Run *r, int *v) {
    rv_program *p = r->p;
    *v = 0;
    if (p->nvariants < 2)
        return RV_OK;
    const PlanDispatch *d = &p->dispatch;
    if (d->nsums == 0)
        return plan_dispatch_pick(d, r->in.sizes, v);
    /* the sizes, then the sums of the UFs it reads (plan.h) */
    int ns = p->m->sizes.len;
    int64_t stack[64];
    int64_t *x = ns + d->nsums <= 64 ? stack : base_xcalloc((size_t)(ns + d->nsums), sizeof *x);
    memcpy(x, r->in.sizes, sizeof *x * (size_t)ns);
    for (int q = 0; q < d->nsums; q++) {
        const Ufun *f = d->sums[q];
        x[ns + q] = 0;
        for (int64_t i = 0; i < r->in.ufl[f->id]->numel; i++)
            x[ns + q] += r->in.ufv[f->id][i];
    }
    rv_status st = plan_dispatch_pick(d, x, v);
    if (x != stack)
        base_free(x);
    return st;
}

/* The plan's steps in order; with variants, the first step (CHECK_ARGS,
 * the same in every variant) runs before the dispatch picks the variant
 * whose remaining steps run (plan.h). */
static rv_status run_steps(Run *r, rv_array *const *outputs, int noutputs) {
    rv_program *p = r->p;
    r->plan = &p->plans[0];
    rv_status st = run_step(r, &r->plan->steps.data[0]);
    if (st == RV_OK && r->into)
        st = check_into(r, outputs, noutputs);
    int v;
    if (st == RV_OK && (st = pick_variant(r, &v)) == RV_OK) {
        r->plan = &p->plans[v];
        r->first = p->variant_first[v];
        p->last_variant = v;
    }
    if (st != RV_OK)
        return st;
    r->slots = r->plan->slots.len <= RUN_ON_STACK
                   ? r->slots_stack
                   : base_xcalloc((size_t)r->plan->slots.len + 1, sizeof *r->slots);
    r->ctx = (struct rv_rt_ctx){.abi_version = RV_RT_ABI_VERSION,
                                .num_threads = p->serial ? 1
                                                         : tp_num_threads(p->pool ? p->pool
                                                                                  : tp_default()),
                                .parallel_for = p->serial ? serial_for : ravel_rt_parallel_for,
                                .alloc = host_alloc,
                                .free = host_free,
                                .host = &r->host};
    ThreadPool *caller_pool = tp_use(p->pool);
    for (int i = 1; st == RV_OK && i < r->plan->steps.len; i++)
        st = run_step(r, &r->plan->steps.data[i]);
    tp_use(caller_pool);
    return st;
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

static rv_status run_program(const char *fn, rv_program *p, rv_bindings *b,
                             rv_array *const *outputs, int noutputs) {
    if (!p || !b)
        return base_error(RV_ERR_ARG, "%s: no program or bindings", fn);
    if (b->m != p->m)
        return base_error(RV_ERR_ARG, "%s: the bindings belong to another module", fn);
    if (p->m->tensors.len != p->ntensors)
        return base_error(RV_ERR_ARG, "%s: the module gained tensors after it was "
                                      "compiled; compile it again", fn);
    interp_bindings_sync(b);
    rv_status st = bind_unrolled(p, b);
    if (st != RV_OK)
        return st;
    Run r = {.p = p};
    r.in.b = b;
    if (outputs)
        r.into = p->ntensors <= RUN_ON_STACK
                     ? r.into_stack
                     : base_xcalloc((size_t)p->ntensors + 1, sizeof *r.into);
    r.spare = p->ntensors <= RUN_ON_STACK ? r.spare_stack
                                          : base_xcalloc((size_t)p->ntensors + 1, sizeof *r.spare);
    for (int i = 0; i < p->ntensors; i++) {
        const Tensor *t = p->m->tensors.data[i];
        r.spare[i] = t->op->kind == OP_INPUT ? NULL : interp_bindings_take_tensor(b, t);
    }
    interp_bindings_clear_outputs(b);
    st = run_steps(&r, outputs, noutputs);
    run_release(&r, st == RV_OK && !r.check_failed);
    if (r.check_failed)
        st = run_failed(p, b);
    if (st != RV_OK)
        interp_bindings_clear_outputs(b);
    if (r.into != r.into_stack)
        base_free(r.into);
    if (r.spare != r.spare_stack)
        base_free(r.spare);
    add_counters(p, &r.stats);
    return st;
}

rv_status rv_program_run(rv_program *p, rv_bindings *b) {
    return run_program("rv_program_run", p, b, NULL, 0);
}

rv_status rv_program_run_into(rv_program *p, rv_bindings *b, rv_array *const *outputs,
                              int noutputs) {
    if (!outputs && noutputs)
        return base_error(RV_ERR_ARG, "rv_program_run_into: no output arrays");
    static rv_array *const none[1] = {NULL};
    return run_program("rv_program_run_into", p, b, outputs ? outputs : none, noutputs);
}
