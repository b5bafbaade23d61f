"""Moving arrays between NumPy, DLPack producers and rv_array, without
copies where the layout allows.

rv_array holds compact row-major data aligned to 64 bytes
(RV_ARRAY_ALIGN): kernels assume it. An input that already is such an
array (a C-contiguous NumPy array at an aligned address, or a DLPack
tensor of another framework, which rv_array_from_dlpack borrows when
aligned) is used in place; anything else is copied once into an aligned
NumPy buffer. Results are NumPy views of the rv_array's memory that keep
its owner alive through their ``base``.
"""

import ctypes

import numpy as np

from . import errors
from ._lib import lib

ALIGN = 64  # RV_ARRAY_ALIGN

# rv_dtype values (include/ravel.h) and their NumPy dtypes
RV_BOOL, RV_I32, RV_I64, RV_F32, RV_F64 = range(5)
_NP_OF = {RV_I32: np.dtype(np.int32), RV_I64: np.dtype(np.int64),
          RV_F32: np.dtype(np.float32), RV_F64: np.dtype(np.float64)}
_RV_OF = {v: k for k, v in _NP_OF.items()}
DTYPE_NAMES = {RV_BOOL: "bool", RV_I32: "i32", RV_I64: "i64", RV_F32: "f32", RV_F64: "f64"}


def np_dtype(rv_dtype):
    """The NumPy dtype of an rv_dtype value."""
    return _NP_OF[rv_dtype]


def rv_dtype(dtype):
    """The rv_dtype value of a NumPy dtype (native byte order), or None."""
    dtype = np.dtype(dtype)
    if not dtype.isnative:
        return None
    return _RV_OF.get(dtype.newbyteorder("="))


def aligned_empty(shape, dtype):
    """An uninitialized C-order NumPy array whose data is 64-byte aligned."""
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n + ALIGN, dtype=np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip:skip + n].view(dtype).reshape(shape)


def is_aligned(a):
    return a.ctypes.data % ALIGN == 0


def as_aligned(a):
    """``a`` itself when C-contiguous and aligned, else an aligned copy."""
    if a.flags.c_contiguous and is_aligned(a):
        return a
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def _shape_arg(shape):
    return (ctypes.c_int64 * max(len(shape), 1))(*shape)


class Borrowed:
    """An rv_array header over memory that Python keeps alive (``keep``);
    ``close`` frees the header (and, for a DLPack import, runs the
    producer's deleter)."""

    __slots__ = ("ptr", "keep")

    def __init__(self, ptr, keep):
        self.ptr = ptr
        self.keep = keep

    def close(self):
        if self.ptr:
            lib.rv_array_free(self.ptr)
            self.ptr = None
        self.keep = None

    def __del__(self):
        self.close()


def wrap_numpy(a, what):
    """An rv_array over NumPy array ``a`` (made aligned and contiguous first
    if needed: the copy is then the only one)."""
    t = rv_dtype(a.dtype)
    if t is None:
        raise errors.ArgumentError(
            "%s: NumPy dtype %s has no ravel dtype (use float32, float64, int32 or int64)"
            % (what, a.dtype))
    a = as_aligned(a)
    if a.ndim > 8:
        raise errors.ArgumentError("%s: %d dimensions, ravel arrays have at most 8" % (what, a.ndim))
    out = ctypes.c_void_p()
    errors.check(lib.rv_array_wrap(t, a.ndim, _shape_arg(a.shape), a.ctypes.data,
                                   ctypes.byref(out)))
    return Borrowed(out.value, a)


# ---- DLPack (dlpack/dlpack.h): capsules of DLManagedTensor

_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pyapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pyapi.PyCapsule_SetName.restype = ctypes.c_int
_pyapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pyapi.PyCapsule_IsValid.restype = ctypes.c_int
_pyapi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def from_dlpack(obj, what):
    """An rv_array over a ``__dlpack__`` producer's tensor: borrowed when it
    is a CPU, compact row-major tensor at an aligned address, else copied
    by rv_array_from_dlpack; a strided one is copied by NumPy first."""
    capsule = obj.__dlpack__()
    if not _pyapi.PyCapsule_IsValid(capsule, b"dltensor"):
        raise errors.ArgumentError("%s: __dlpack__ did not return a DLPack capsule" % what)
    mt = _pyapi.PyCapsule_GetPointer(capsule, b"dltensor")
    out = ctypes.c_void_p()
    st = lib.rv_array_from_dlpack(mt, ctypes.byref(out))
    if st == 0:
        # ravel owns the managed tensor now: the capsule must not delete it
        _pyapi.PyCapsule_SetName(capsule, b"used_dltensor")
        return Borrowed(out.value, None)
    err = errors.error_for(st)
    # the capsule still owns mt (its destructor deletes it). A tensor
    # rv_array_from_dlpack refuses for its layout (strides) NumPy can still
    # take; anything NumPy cannot read either (another device) is ravel's error.
    try:
        a = np.from_dlpack(obj)
    except Exception:
        raise err from None
    return wrap_numpy(np.asarray(a), what)


# A capsule handed out by rv_array_to_dlpack: its destructor deletes the
# managed tensor unless a consumer took it (renamed "used_dltensor").
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensorHead(ctypes.Structure):
    # DLManagedTensor: DLTensor dl_tensor (48 bytes on 64-bit), void *manager_ctx,
    # void (*deleter)(DLManagedTensor *)
    _fields_ = [("dl_tensor", ctypes.c_byte * 48), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


# The destructor gets the dying capsule as a raw pointer: it must not
# become a Python reference again, so these handles take void *.
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _pyapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _pyapi))


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    if _capsule_is_valid(capsule, b"dltensor"):
        mt = _capsule_pointer(capsule, b"dltensor")
        head = _DLManagedTensorHead.from_address(mt)
        if head.deleter:
            _DELETER(head.deleter)(mt)


class _DLPackOwner:
    """The minimal ``__dlpack__`` producer NumPy imports an owned rv_array
    through: one capsule, handed over once."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None, **kwargs):
        capsule, self._capsule = self._capsule, None
        return capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def take_array(ptr):
    """A NumPy array owning rv_array ``ptr`` (freed with the array), without
    a copy: the array goes through rv_array_to_dlpack to np.from_dlpack."""
    mt = lib.rv_array_to_dlpack(ptr)
    if not mt:
        lib.rv_array_free(ptr)
        raise errors.OutOfMemoryError("out of memory exporting an array")
    capsule = _pyapi.PyCapsule_New(mt, b"dltensor",
                                   ctypes.cast(_capsule_destructor, ctypes.c_void_p))
    return np.from_dlpack(_DLPackOwner(capsule))


def view_array(ptr, owner, dtype=None):
    """A read-write NumPy view of rv_array ``ptr`` that keeps ``owner`` (the
    object that frees the rv_array) alive through its base. ``dtype``: the
    array's NumPy dtype when the caller knows it (a result's: one query of
    the library less per call)."""
    if dtype is None:
        dtype = np_dtype(lib.rv_array_dtype(ptr))
    return view_memory(lib.rv_array_data(ptr), lib.rv_array_shape(ptr)[:lib.rv_array_ndim(ptr)],
                 dtype, owner)


def view_info(info, owner, dtype=None):
    """As view_array, from the rv_array_info of the array (read with one
    call of the library: rv_bindings_get_info)."""
    if dtype is None:
        dtype = np_dtype(info.dtype)
    return view_memory(info.data, info.shape[:info.ndim], dtype, owner)


class _Memory:
    """The base of a view: describes the memory to NumPy (the array
    interface) and keeps its owner alive. Not a ctypes array over the
    memory: ctypes makes a new array type per length, caches it only while
    it lives, and a type lives until the cyclic garbage collector frees
    it, so where anything else in the process makes garbage (another
    framework's graphs) every call paid for a new type (TreeRNN b1 from
    Python interleaved with DyNet: 11 us of a 24 us call)."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, data, shape, typestr, owner):
        self.__array_interface__ = {"data": (data, False), "shape": shape,
                                    "typestr": typestr, "version": 3}
        self.owner = owner


def view_memory(data, shape, dtype, owner):
    """A read-write NumPy view of ``shape`` elements of ``dtype`` at address
    ``data`` (C order) that keeps ``owner`` alive through its base."""
    shape = tuple(shape)
    for n in shape:
        if n == 0:
            return np.empty(shape, dtype)
    return np.asarray(_Memory(data, shape, dtype.str, owner))
