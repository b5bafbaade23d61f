/* python/ravel/_fast.c — the hot path of a recursive model's call from
 * Python, as a CPython extension module (ravel._fast).
 *
 * A server calls a recursive model once per request: build the batch's
 * structures and linearize them (rv_structs_build_linear), then bind the
 * batch, run and describe the outputs (rv_program_run_linear). Through
 * ctypes each of those calls costs a microsecond of argument conversion,
 * and making NumPy views of the outputs through __array_interface__ more
 * again: at batch 1 the Python side of a TreeRNN H256 call was half of
 * it. This module does the same two calls with the arguments read
 * directly: int32 arrays through the buffer protocol, handles as
 * integers, the outputs as NumPy arrays over a small buffer exporter.
 *
 * It calls the library the ctypes side loaded (ravel._lib: $RAVEL_LIBRARY,
 * the build tree, the system's), through function pointers given once
 * by setup(), so it has no link-time dependency on libravel and can never
 * use a second copy of it. Errors come back as the package's exceptions:
 * setup() also takes ravel.errors.error_for, which makes the exception of
 * a status from the library's message (rv_last_error is per thread, and
 * it is read on the thread of the failed call).
 *
 * A Bound's structure-only calls go through a Pool, which also keeps
 * the Bound's bindings from call to call (below, "a Bound's pool"): the
 * Python side of such a call is then the Bound's __call__ and pool.call.
 *
 * Where its arguments are anything else than the fast path takes (a list,
 * another dtype, an empty array), build_linear and pool.call return
 * NotImplemented and the Python code converts and checks them as it
 * always did. The package
 * works without this module (the ctypes path); ravel.fast_path says which
 * one is used. Built by `make` (build/pyext/) and by `pip install
 * ./python` (optional: skipped where no compiler or Python headers).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <string.h>

#include "ravel.h"

/* Python 3.8's API lacks these (pyproject.toml: Python >= 3.8) */
#if PY_VERSION_HEX < 0x03090000
#define PyObject_CallNoArgs(f) PyObject_CallFunctionObjArgs((f), NULL)
#define PyObject_CallOneArg(f, a) PyObject_CallFunctionObjArgs((f), (a), NULL)
#endif
#if PY_VERSION_HEX < 0x030A0000
static PyObject *Py_NewRef(PyObject *o) {
    Py_INCREF(o);
    return o;
}
#endif

typedef rv_status (*BuildLinearFn)(rv_structs *, int, const int32_t *, const int32_t *, int64_t,
                                   const int32_t *, int64_t, const int32_t *, int64_t,
                                   rv_linear *);
typedef rv_status (*RunLinearFn)(rv_program *, rv_bindings *, const rv_bindings *, const char *,
                                 const rv_linear *, rv_array_info *, int);

static BuildLinearFn build_linear_fn;
static RunLinearFn run_linear_fn;
static PyObject *error_for; /* ravel.errors.error_for(status) -> exception */
static PyObject *asarray;   /* numpy.asarray */

/* The most outputs a call describes on the stack (more: malloc). */
#define STACK_OUTPUTS 8

/* ---- handles given as integers (ctypes addresses) */

static void *handle_of(PyObject *o) {
    if (o == Py_None)
        return NULL;
    return PyLong_AsVoidPtr(o);
}

/* Raises the package's exception for a failed call's status. */
static PyObject *raise_status(int status) {
    PyObject *exc = PyObject_CallFunction(error_for, "i", status);
    if (exc) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* ---- int32 arguments through the buffer protocol */

/* Whether a buffer format is one int32 (NumPy's int32 is "i"; "l" where
 * long is 32 bits; '=', '<' or '@' prefixes as NumPy may write them). */
static int is_int32_format(const char *f, Py_ssize_t itemsize) {
    if (itemsize != 4 || f == NULL)
        return 0;
    if (*f == '=' || *f == '@' || (*f == '<' && PY_LITTLE_ENDIAN))
        f++;
    return (f[0] == 'i' || (f[0] == 'l' && sizeof(long) == 4)) && f[1] == '\0';
}

/* Gets a non-empty, C-contiguous int32 buffer of `o`: 1 on success, 0 when
 * `o` is anything else (nothing held), -1 with an exception set only for
 * errors that are not "another kind of value". */
static int get_int32(PyObject *o, Py_buffer *view) {
    if (!PyObject_CheckBuffer(o))
        return 0;
    if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear(); /* not contiguous: the Python side copies it */
        return 0;
    }
    if (!is_int32_format(view->format, view->itemsize) || view->len == 0) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* build_linear(structs, sizes, child_begin, child, data, linear): one
 * rv_structs_build_linear with the arrays as they are; structs and linear
 * are addresses, data may be None. Returns None, or NotImplemented when an
 * array is not a non-empty C-contiguous int32 buffer (the caller then
 * converts them). The GIL is released around the library's call. */
static PyObject *fast_build_linear(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "build_linear takes 6 arguments");
        return NULL;
    }
    rv_structs *bs = handle_of(args[0]);
    rv_linear *lin = handle_of(args[5]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer v[4];
    int got = 0, have_data = args[4] != Py_None;
    for (; got < 3 + have_data; got++) {
        int r = get_int32(args[1 + got], &v[got]);
        if (r <= 0)
            break;
    }
    if (got < 3 + have_data) {
        for (int k = 0; k < got; k++)
            PyBuffer_Release(&v[k]);
        Py_RETURN_NOTIMPLEMENTED;
    }
    Py_ssize_t nsizes = v[0].len / 4;
    rv_status st = RV_OK;
    if (nsizes <= INT_MAX) {
        Py_BEGIN_ALLOW_THREADS
        st = build_linear_fn(bs, (int)nsizes, v[0].buf, v[1].buf, v[1].len / 4, v[2].buf,
                             v[2].len / 4, have_data ? v[3].buf : NULL,
                             have_data ? v[3].len / 4 : 0, lin);
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&v[k]);
    if (nsizes > INT_MAX)
        Py_RETURN_NOTIMPLEMENTED; /* the Python side says why */
    if (st != RV_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

/* ---- outputs: NumPy arrays over the bindings' memory */

/* A buffer exporter over memory that `owner` keeps alive: what NumPy
 * imports an output from (np.asarray; the array's base is a memoryview of
 * it). Cheaper than __array_interface__, which NumPy reads as a dict. */
typedef struct {
    PyObject_HEAD
    PyObject *owner;
    void *data;
    int ndim;
    char format[2];
    Py_ssize_t itemsize;
    Py_ssize_t shape[RV_MAX_DIMS];
    Py_ssize_t strides[RV_MAX_DIMS];
} Memory;

static int memory_getbuffer(PyObject *o, Py_buffer *view, int flags) {
    Memory *m = (Memory *)o;
    Py_ssize_t n = 1;
    for (int k = 0; k < m->ndim; k++)
        n *= m->shape[k];
    Py_INCREF(o);
    view->obj = o;
    view->buf = m->data;
    view->len = n * m->itemsize;
    view->readonly = 0;
    view->itemsize = m->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? m->format : NULL;
    view->ndim = m->ndim;
    view->shape = (flags & PyBUF_ND) ? m->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? m->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static PyBufferProcs memory_as_buffer = {memory_getbuffer, NULL};

static int memory_traverse(PyObject *o, visitproc visit, void *arg) {
    Py_VISIT(((Memory *)o)->owner);
    return 0;
}

static int memory_clear(PyObject *o) {
    Py_CLEAR(((Memory *)o)->owner);
    return 0;
}

static void memory_dealloc(PyObject *o) {
    PyObject_GC_UnTrack(o);
    memory_clear(o);
    Py_TYPE(o)->tp_free(o);
}

static PyTypeObject MemoryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ravel._fast.Memory",
    .tp_basicsize = sizeof(Memory),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The memory of a result: NumPy's view of it keeps its owner alive.",
    .tp_dealloc = memory_dealloc,
    .tp_traverse = memory_traverse,
    .tp_clear = memory_clear,
    .tp_as_buffer = &memory_as_buffer,
};

/* The buffer format and item size of an rv_dtype ('\0' for none). */
static char format_of(rv_dtype t, Py_ssize_t *itemsize) {
    switch (t) {
    case RV_BOOL: *itemsize = 1; return '?';
    case RV_I32: *itemsize = 4; return 'i';
    case RV_I64: *itemsize = 8; return 'q';
    case RV_F32: *itemsize = 4; return 'f';
    case RV_F64: *itemsize = 8; return 'd';
    default: *itemsize = 1; return '\0';
    }
}

/* A NumPy array over an output's memory keeping `owner` alive. */
static PyObject *view_of(const rv_array_info *info, PyObject *owner) {
    static char empty[8]; /* the address of a zero-size result */
    Memory *m = PyObject_GC_New(Memory, &MemoryType);
    if (m == NULL)
        return NULL;
    Py_INCREF(owner);
    m->owner = owner;
    m->data = info->data ? info->data : empty;
    m->ndim = info->ndim;
    m->format[0] = format_of(info->dtype, &m->itemsize);
    m->format[1] = '\0';
    Py_ssize_t stride = m->itemsize;
    for (int k = info->ndim - 1; k >= 0; k--) {
        m->shape[k] = (Py_ssize_t)info->shape[k];
        m->strides[k] = stride;
        stride *= m->shape[k] > 0 ? m->shape[k] : 1;
    }
    PyObject_GC_Track((PyObject *)m);
    if (m->format[0] == '\0' || info->ndim > RV_MAX_DIMS) {
        Py_DECREF(m);
        PyErr_Format(PyExc_SystemError, "ravel._fast: an output of rv_dtype %d, rank %d",
                     (int)info->dtype, info->ndim);
        return NULL;
    }
    PyObject *a = PyObject_CallOneArg(asarray, (PyObject *)m);
    Py_DECREF(m);
    return a;
}

/* The outputs of a run that succeeded as a dict: specs holds (name, name
 * encoded, dtype, ndim) per output (a module's _results), each a NumPy
 * view keeping owner alive, None for an output the run left without an
 * array, and ragged(name, flat array) for one whose array's rank is not
 * the tensor's (a ragged output). */
static PyObject *outputs_of(const rv_array_info *infos, PyObject *specs, PyObject *owner,
                            PyObject *ragged) {
    PyObject *out = PyDict_New();
    if (out == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *spec = PyTuple_GET_ITEM(specs, k);
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 4) {
            PyErr_SetString(PyExc_TypeError, "run_linear: a spec is (name, cname, dtype, ndim)");
            goto fail;
        }
        PyObject *name = PyTuple_GET_ITEM(spec, 0), *a;
        if (infos[k].ndim < 0) {
            Py_INCREF(Py_None);
            a = Py_None;
        } else {
            long ndim = PyLong_AsLong(PyTuple_GET_ITEM(spec, 3));
            if (ndim == -1 && PyErr_Occurred())
                goto fail;
            if ((a = view_of(&infos[k], owner)) == NULL)
                goto fail;
            if (ndim != infos[k].ndim) {
                PyObject *r = PyObject_CallFunctionObjArgs(ragged, name, a, NULL);
                Py_DECREF(a);
                if ((a = r) == NULL)
                    goto fail;
            }
        }
        int bad = PyDict_SetItem(out, name, a);
        Py_DECREF(a);
        if (bad)
            goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* The output descriptions of a run: on the stack for up to STACK_OUTPUTS. */
typedef struct {
    rv_array_info stack[STACK_OUTPUTS];
    rv_array_info *infos;
} Infos;

static int infos_init(Infos *in, PyObject *specs) {
    if (!PyTuple_Check(specs)) {
        PyErr_SetString(PyExc_TypeError, "run_linear: specs must be a tuple");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "run_linear: too many outputs");
        return -1;
    }
    in->infos = in->stack;
    if (n > STACK_OUTPUTS && (in->infos = PyMem_Malloc(n * sizeof *in->infos)) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void infos_free(Infos *in) {
    if (in->infos != in->stack)
        PyMem_Free(in->infos);
}

/* run_linear(program, bindings, base, structure, linear, specs, owner,
 * ragged): one rv_program_run_linear (program, bindings, base and linear
 * as addresses, base None for NULL; structure a str), then the outputs
 * as a dict (outputs_of). The bindings are the caller's: a Bound's calls
 * go through a Pool (below), which takes and gives them here. */
static PyObject *fast_run_linear(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "run_linear takes 8 arguments");
        return NULL;
    }
    rv_program *p = handle_of(args[0]);
    rv_bindings *b = handle_of(args[1]);
    const rv_bindings *base = handle_of(args[2]);
    const rv_linear *lin = handle_of(args[4]);
    if (PyErr_Occurred())
        return NULL;
    const char *structure = PyUnicode_AsUTF8(args[3]);
    PyObject *specs = args[5], *owner = args[6], *ragged = args[7];
    Infos in;
    if (structure == NULL || infos_init(&in, specs) < 0)
        return NULL;
    rv_status st;
    Py_BEGIN_ALLOW_THREADS
    st = run_linear_fn(p, b, base, structure, lin, in.infos, (int)PyTuple_GET_SIZE(specs));
    Py_END_ALLOW_THREADS
    PyObject *out = st != RV_OK ? raise_status(st) : outputs_of(in.infos, specs, owner, ragged);
    infos_free(&in);
    return out;
}

/* ---- a Bound's pool of bindings for its structure-only calls
 *
 * A Bound (python/ravel/module.py) serves calls from several threads and
 * reuses, from call to call, bindings whose results are all gone (their
 * arrays are computed into again). Its Python pool did that with a lock,
 * a lease object and a weak reference to it per call, about 2 us of a
 * TreeRNN batch-1 call; this one makes no Python object per call but the
 * results themselves:
 *
 * - Each pooled bindings object has one Held for its life, the owner of
 *   every result view of it (a result's base chain is ndarray ->
 *   memoryview -> Memory -> Held -> Bindings). Nothing else refers to a
 *   Held, so the pool's own reference being the only one (a reference
 *   count of 1) means that no result of its last call is alive: what the
 *   weak reference to the lease told before, with the same answer.
 * - The GIL is the lock: taking (scan + remove) and giving (append +
 *   trim) run no Python code between their steps, so no other thread
 *   runs inside them; the run itself releases the GIL with the bindings
 *   taken out of the pool, owned by this call alone. A Held dropped by
 *   the trim is released after the pool is consistent again (its
 *   Bindings' __del__ is Python code, which may let other threads in).
 *   This module is single-phase initialized, so a free-threaded CPython
 *   turns the GIL on when it imports it.
 */

/* One pooled bindings object: the Python Bindings (it owns the
 * rv_bindings and keeps the bound arguments alive), its address, and its
 * _ragged method (the Ragged of a ragged output). */
typedef struct {
    PyObject_HEAD
    PyObject *bindings;
    rv_bindings *ptr;
    PyObject *ragged;
} Held;

static int held_traverse(PyObject *o, visitproc visit, void *arg) {
    Py_VISIT(((Held *)o)->bindings);
    Py_VISIT(((Held *)o)->ragged);
    return 0;
}

static int held_clear(PyObject *o) {
    Py_CLEAR(((Held *)o)->ragged);
    Py_CLEAR(((Held *)o)->bindings);
    return 0;
}

static void held_dealloc(PyObject *o) {
    PyObject_GC_UnTrack(o);
    held_clear(o);
    Py_TYPE(o)->tp_free(o);
}

static PyTypeObject HeldType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ravel._fast.Held",
    .tp_basicsize = sizeof(Held),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A pooled bindings object; its results keep it (and so their memory) alive.",
    .tp_dealloc = held_dealloc,
    .tp_traverse = held_traverse,
    .tp_clear = held_clear,
};

/* Wraps a new Bindings object (its .ptr, its ._ragged). */
static Held *held_new(PyObject *bindings) {
    PyObject *ptr = PyObject_GetAttrString(bindings, "ptr");
    if (ptr == NULL)
        return NULL;
    void *b = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (b == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "Pool: new bindings without an rv_bindings");
        return NULL;
    }
    PyObject *ragged = PyObject_GetAttrString(bindings, "_ragged");
    if (ragged == NULL)
        return NULL;
    Held *h = PyObject_GC_New(Held, &HeldType);
    if (h == NULL) {
        Py_DECREF(ragged);
        return NULL;
    }
    Py_INCREF(bindings);
    h->bindings = bindings;
    h->ptr = b;
    h->ragged = ragged;
    PyObject_GC_Track((PyObject *)h);
    return h;
}

/* Whether nothing but the pool refers to a pooled Held: no result of its
 * last call (nor any view of one) is alive. */
static int held_is_free(PyObject *h) {
    return Py_REFCNT(h) == 1;
}

typedef struct {
    PyObject_HEAD
    Held **idle;          /* the pooled ones, oldest first: capacity + 1 places */
    Py_ssize_t nidle;
    Py_ssize_t capacity;  /* the most kept between calls */
    PyObject *program;    /* the Program (its _ptr stays valid while it lives) */
    rv_program *program_ptr;
    PyObject *base;       /* the bound arguments' Bindings */
    rv_bindings *base_ptr;
    PyObject *specs;      /* the module's _results */
    PyObject *make;       /* make() -> new Bindings inheriting base */
    PyObject *kind_of;    /* the module's _kind_of(name) */
    PyObject *linear_type;/* ravel.Linear */
    PyObject *linear_of;  /* linear_value(name, value): the value, or raises */
    PyObject *is_structure; /* name -> bool, kind_of's answers (they never change) */
} Pool;

static int pool_traverse(PyObject *o, visitproc visit, void *arg) {
    Pool *p = (Pool *)o;
    for (Py_ssize_t i = 0; i < p->nidle; i++)
        Py_VISIT(p->idle[i]);
    Py_VISIT(p->program);
    Py_VISIT(p->base);
    Py_VISIT(p->specs);
    Py_VISIT(p->make);
    Py_VISIT(p->kind_of);
    Py_VISIT(p->linear_type);
    Py_VISIT(p->linear_of);
    Py_VISIT(p->is_structure);
    return 0;
}

static int pool_clear(PyObject *o) {
    Pool *p = (Pool *)o;
    while (p->nidle > 0) { /* one at a time: each may run Bindings.__del__ */
        Held *h = p->idle[--p->nidle];
        Py_DECREF(h);
    }
    Py_CLEAR(p->program);
    Py_CLEAR(p->base);
    Py_CLEAR(p->specs);
    Py_CLEAR(p->make);
    Py_CLEAR(p->kind_of);
    Py_CLEAR(p->linear_type);
    Py_CLEAR(p->linear_of);
    Py_CLEAR(p->is_structure);
    return 0;
}

static void pool_dealloc(PyObject *o) {
    PyObject_GC_UnTrack(o);
    pool_clear(o);
    PyMem_Free(((Pool *)o)->idle);
    Py_TYPE(o)->tp_free(o);
}

static PyObject *str_addr, *str_ptr, *str__ptr; /* "_addr", "ptr", "_ptr", interned */

/* The address in attribute `name` of o (a ctypes address, an int). */
static void *address_at(PyObject *o, PyObject *name) {
    PyObject *a = PyObject_GetAttr(o, name);
    if (a == NULL)
        return NULL;
    void *p = a == Py_None ? NULL : PyLong_AsVoidPtr(a);
    Py_DECREF(a);
    if (p == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "Pool: %U is NULL", name);
    return p;
}

/* Pool(program, base, specs, make, kind_of, linear_type, linear_of,
 * capacity): program and base as Python objects with their ._ptr / .ptr. */
static PyObject *pool_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *program, *base, *specs, *make, *kind_of, *linear_type, *linear_of;
    Py_ssize_t capacity;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "Pool takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOO!OOOOn:Pool", &program, &base, &PyTuple_Type, &specs, &make,
                          &kind_of, &linear_type, &linear_of, &capacity))
        return NULL;
    if (!PyCallable_Check(make) || !PyCallable_Check(kind_of) || !PyType_Check(linear_type) ||
        !PyCallable_Check(linear_of) || capacity < 1) {
        PyErr_SetString(PyExc_TypeError, "Pool: make, kind_of and linear_of callables, "
                                         "linear_type a type, capacity >= 1");
        return NULL;
    }
    rv_program *pp = address_at(program, str__ptr);
    rv_bindings *bp = pp ? address_at(base, str_ptr) : NULL;
    if (bp == NULL)
        return NULL;
    Pool *p = (Pool *)type->tp_alloc(type, 0);
    if (p == NULL)
        return NULL;
    if ((p->idle = PyMem_Calloc(capacity + 1, sizeof *p->idle)) == NULL) {
        Py_DECREF(p);
        return PyErr_NoMemory();
    }
    if ((p->is_structure = PyDict_New()) == NULL) {
        Py_DECREF(p);
        return NULL;
    }
    p->capacity = capacity;
    p->program_ptr = pp;
    p->base_ptr = bp;
    PyObject **slots[] = {&p->program, &p->base, &p->specs, &p->make, &p->kind_of,
                          &p->linear_type, &p->linear_of};
    PyObject *vals[] = {program, base, specs, make, kind_of, linear_type, linear_of};
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        Py_INCREF(vals[k]);
        *slots[k] = vals[k];
    }
    return (PyObject *)p;
}

/* Bindings for one call: a pooled Held whose last call's results are all
 * gone (taken out of the pool), else a new one. New reference. */
static Held *pool_take(Pool *p) {
    for (Py_ssize_t i = 0; i < p->nidle; i++) {
        Held *h = p->idle[i];
        if (held_is_free((PyObject *)h)) {
            memmove(&p->idle[i], &p->idle[i + 1], (p->nidle - i - 1) * sizeof *p->idle);
            p->nidle--;
            return h; /* the pool's reference, now this call's */
        }
    }
    PyObject *b = PyObject_CallNoArgs(p->make); /* none free: new bindings */
    if (b == NULL)
        return NULL;
    Held *h = held_new(b);
    Py_DECREF(b);
    return h;
}

/* Gives h back (its reference is the pool's now). Over capacity, drops
 * one: the first whose results are alive (they keep it alive), else the
 * oldest, released once the pool is consistent. Allocates nothing; keeps
 * an exception set by the call. */
static void pool_give(Pool *p, Held *h) {
    p->idle[p->nidle++] = h; /* capacity + 1 places */
    if (p->nidle <= p->capacity)
        return;
    Py_ssize_t drop = 0;
    for (Py_ssize_t i = 0; i < p->nidle; i++) {
        if (!held_is_free((PyObject *)p->idle[i])) {
            drop = i;
            break;
        }
    }
    Held *dropped = p->idle[drop];
    memmove(&p->idle[drop], &p->idle[drop + 1], (p->nidle - drop - 1) * sizeof *p->idle);
    p->nidle--;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    Py_DECREF(dropped); /* may run Bindings.__del__, and other threads */
    PyErr_Restore(type, value, tb);
}

/* pool.call(args, kwargs): a Bound's call when it binds one structure and
 * nothing else (args a dict of one item and no keywords, or keywords
 * only, of one item): reset pooled bindings to the bound arguments, bind
 * the batch, run and describe the outputs in one rv_program_run_linear,
 * the outputs as a dict of NumPy views that keep the bindings alive.
 * NotImplemented for any other call (the Python code binds it). */
static PyObject *pool_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Pool *p = (Pool *)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "call takes 2 arguments");
        return NULL;
    }
    if (!PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "call: kwargs must be a dict");
        return NULL;
    }
    PyObject *one = PyDict_GET_SIZE(args[1]) != 0
                        ? (args[0] == Py_None ? args[1] : NULL)
                        : args[0];
    if (one == NULL || !PyDict_CheckExact(one) || PyDict_GET_SIZE(one) != 1)
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t pos = 0;
    PyObject *name, *value;
    PyDict_Next(one, &pos, &name, &value);
    Py_INCREF(name);
    Py_INCREF(value);
    PyObject *out = NULL, *known = PyDict_GetItemWithError(p->is_structure, name), *lin = NULL;
    if (known == NULL) {
        if (PyErr_Occurred())
            goto done;
        PyObject *kind = PyObject_CallOneArg(p->kind_of, name);
        if (kind == NULL)
            goto done;
        int is = PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "structure") == 0;
        Py_DECREF(kind);
        known = is ? Py_True : Py_False;
        if (PyDict_SetItem(p->is_structure, name, known) < 0)
            goto done;
    }
    if (known != Py_True) {
        out = Py_NewRef(Py_NotImplemented);
        goto done;
    }
    const char *structure = PyUnicode_AsUTF8(name);
    if (structure == NULL)
        goto done;
    if ((PyObject *)Py_TYPE(value) == p->linear_type) {
        lin = Py_NewRef(value);
    } else if ((lin = PyObject_CallFunctionObjArgs(p->linear_of, name, value, NULL)) == NULL) {
        goto done; /* not a batch: linear_value says so */
    }
    const rv_linear *lp = address_at(lin, str_addr);
    if (lp == NULL)
        goto done;
    Infos in;
    if (infos_init(&in, p->specs) < 0)
        goto done;
    Held *h = pool_take(p);
    if (h != NULL) {
        rv_status st;
        Py_INCREF(self); /* the program and base stay while the GIL is out */
        Py_BEGIN_ALLOW_THREADS
        st = run_linear_fn(p->program_ptr, h->ptr, p->base_ptr, structure, lp, in.infos,
                           (int)PyTuple_GET_SIZE(p->specs));
        Py_END_ALLOW_THREADS
        /* the exception first: it reads this thread's last error */
        out = st == RV_OK ? outputs_of(in.infos, p->specs, (PyObject *)h, h->ragged)
                          : raise_status(st);
        pool_give(p, h);
        Py_DECREF(self);
    }
    infos_free(&in);
done:
    Py_XDECREF(lin);
    Py_DECREF(name);
    Py_DECREF(value);
    return out;
}

/* pool.bindings(): the pooled Bindings objects, oldest first (for tests). */
static PyObject *pool_bindings(PyObject *self, PyObject *unused) {
    (void)unused;
    Pool *p = (Pool *)self;
    PyObject *out = PyList_New(p->nidle);
    for (Py_ssize_t i = 0; out != NULL && i < p->nidle; i++) {
        PyObject *b = p->idle[i]->bindings;
        Py_INCREF(b);
        PyList_SET_ITEM(out, i, b);
    }
    return out;
}

static PyMethodDef pool_methods[] = {
    {"call", (PyCFunction)(void (*)(void))pool_call, METH_FASTCALL,
     "call(args, kwargs) -> the outputs, or NotImplemented when not a structure-only call"},
    {"bindings", pool_bindings, METH_NOARGS, "bindings() -> the pooled Bindings, oldest first"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PoolType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ravel._fast.Pool",
    .tp_basicsize = sizeof(Pool),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Pool(program, base, specs, make, kind_of, linear_type, linear_of, capacity): "
              "a Bound's bindings for its structure-only calls.",
    .tp_new = pool_new,
    .tp_dealloc = pool_dealloc,
    .tp_traverse = pool_traverse,
    .tp_clear = pool_clear,
    .tp_methods = pool_methods,
};

/* setup(build_linear, run_linear, error_for, asarray): the library's two
 * functions (addresses, as ctypes gives them), the function that makes an
 * exception of a status, and numpy.asarray. Called once, by ravel._lib. */
static PyObject *fast_setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "setup takes 4 arguments");
        return NULL;
    }
    void *bl = PyLong_AsVoidPtr(args[0]), *rl = PyLong_AsVoidPtr(args[1]);
    if (PyErr_Occurred())
        return NULL;
    if (bl == NULL || rl == NULL || !PyCallable_Check(args[2]) || !PyCallable_Check(args[3])) {
        PyErr_SetString(PyExc_ValueError, "setup: two function addresses and two callables");
        return NULL;
    }
    /* a function pointer from an object pointer: POSIX (dlsym) guarantees it */
    memcpy(&build_linear_fn, &bl, sizeof bl);
    memcpy(&run_linear_fn, &rl, sizeof rl);
    Py_INCREF(args[2]);
    Py_XSETREF(error_for, args[2]);
    Py_INCREF(args[3]);
    Py_XSETREF(asarray, args[3]);
    Py_RETURN_NONE;
}

/* struct_size(name): sizeof the struct this module was compiled with, for
 * the check against the loaded library's rv_struct_size. */
static PyObject *fast_struct_size(PyObject *self, PyObject *name) {
    (void)self;
    const char *s = PyUnicode_AsUTF8(name);
    if (s == NULL)
        return NULL;
    if (strcmp(s, "rv_linear") == 0)
        return PyLong_FromSize_t(sizeof(rv_linear));
    if (strcmp(s, "rv_array_info") == 0)
        return PyLong_FromSize_t(sizeof(rv_array_info));
    return PyLong_FromLong(0);
}

static PyMethodDef fast_methods[] = {
    {"setup", (PyCFunction)(void (*)(void))fast_setup, METH_FASTCALL,
     "setup(build_linear, run_linear, error_for, asarray)"},
    {"build_linear", (PyCFunction)(void (*)(void))fast_build_linear, METH_FASTCALL,
     "build_linear(structs, sizes, child_begin, child, data, linear) -> None or NotImplemented"},
    {"run_linear", (PyCFunction)(void (*)(void))fast_run_linear, METH_FASTCALL,
     "run_linear(program, bindings, base, structure, linear, specs, owner, ragged) -> dict"},
    {"struct_size", fast_struct_size, METH_O, "struct_size(name) -> sizeof the struct here"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fast_module = {
    PyModuleDef_HEAD_INIT, "ravel._fast",
    "The hot path of a recursive model's call (python/ravel/_fast.c).", -1, fast_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fast(void);
PyMODINIT_FUNC PyInit__fast(void) {
    if (PyType_Ready(&MemoryType) < 0 || PyType_Ready(&HeldType) < 0 ||
        PyType_Ready(&PoolType) < 0)
        return NULL;
    if ((str_addr = PyUnicode_InternFromString("_addr")) == NULL ||
        (str_ptr = PyUnicode_InternFromString("ptr")) == NULL ||
        (str__ptr = PyUnicode_InternFromString("_ptr")) == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&fast_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&PoolType);
    if (PyModule_AddObject(m, "Pool", (PyObject *)&PoolType) < 0) {
        Py_DECREF(&PoolType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
