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
 * Where its arguments are anything else than the fast path takes (a list,
 * another dtype, an empty array), build_linear returns NotImplemented and
 * the Python code converts and checks them as it always did. The package
 * works without this module (the ctypes path); ravel.fast_path says which
 * one is used. Built by `make` (build/pyext/) and by `pip install
 * ./python` (optional: skipped where no compiler or Python headers).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <string.h>

#include "ravel.h"

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
    #if PY_VERSION_HEX >= 0x03090000
    PyObject *a = PyObject_CallOneArg(asarray, (PyObject *)m);
#else
    PyObject *a = PyObject_CallFunctionObjArgs(asarray, (PyObject *)m, NULL);
#endif
    Py_DECREF(m);
    return a;
}

/* run_linear(program, bindings, base, structure, linear, specs, owner,
 * ragged): one rv_program_run_linear (program, bindings, base and linear
 * as addresses, base None for NULL; structure a str), then the outputs
 * as a dict: specs holds (name, name encoded, dtype, ndim) per output (a
 * module's _results), each a NumPy view keeping owner alive, None for an
 * output the run left without an array, and ragged(name, flat array) for
 * one whose array's rank is not the tensor's (a ragged output). */
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
    if (structure == NULL)
        return NULL;
    if (!PyTuple_Check(specs)) {
        PyErr_SetString(PyExc_TypeError, "run_linear: specs must be a tuple");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(specs);
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "run_linear: too many outputs");
        return NULL;
    }
    rv_array_info stack[STACK_OUTPUTS], *infos = stack;
    if (n > STACK_OUTPUTS && (infos = PyMem_Malloc(n * sizeof *infos)) == NULL)
        return PyErr_NoMemory();
    rv_status st;
    Py_BEGIN_ALLOW_THREADS
    st = run_linear_fn(p, b, base, structure, lin, infos, (int)n);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (st != RV_OK) {
        raise_status(st);
        goto done;
    }
    if ((out = PyDict_New()) == NULL)
        goto done;
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
    goto done;
fail:
    Py_CLEAR(out);
done:
    if (infos != stack)
        PyMem_Free(infos);
    return out;
}

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
    if (PyType_Ready(&MemoryType) < 0)
        return NULL;
    return PyModule_Create(&fast_module);
}
