"""Libraries built ahead of time (``ravel build --shared``), called through
their ``NAME_fields`` table.

``ravel build m.rv -o dir/NAME --shared`` writes libNAME.so exporting
``NAME_run(args, ctx)``, a ``NAME_args`` struct of sizes and array
pointers, and ``NAME_fields[NAME_num_fields]``, one entry per member: its
.rv name, kind (size, ufun, input, output), dtype, offset in NAME_args and
element-count function (src/codegen/c_aot.c). Nothing else about the model
is needed: this module fills a NAME_args from keyword arguments by that
table, allocates the outputs with NAME_numel_X and calls NAME_run.

Libraries of a newer ``ravel build`` say more, and what they say is used
when it is there: ``NAME_field_infos`` (each field's rank, a function
filling its shape, its declaration, a size's range) shapes the outputs and
checks the inputs' shapes, ``NAME_args_size`` sizes NAME_args,
``NAME_last_error()`` names the field a failed run rejected, and
``NAME_set_num_threads`` sizes the pool of a ``--threads`` build.
"""

import ctypes
import os
import re

import numpy as np

from . import _arrays, errors
from ._bindings import Bindings, size_value
from ._elf import symbol_sizes
from .ragged import Ragged, flatten_rows
from .weights import load_weights

__all__ = ["Library", "load_library"]

_KINDS = ("size", "ufun", "input", "output")
_RV_RT_ERRORS = {1: errors.OutOfMemoryError, 2: errors.BoundsError}


class _Field(ctypes.Structure):
    # NAME_field, as c_aot.c declares it in NAME.h
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("kind", ctypes.c_int),
        ("dtype", ctypes.c_char_p),
        ("offset", ctypes.c_size_t),
        ("numel", ctypes.c_void_p),
    ]


class _FieldInfo(ctypes.Structure):
    # NAME_field_info, where the library has one (NAME_field_infos)
    _fields_ = [
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_void_p),
        ("decl", ctypes.c_char_p),
        ("lo", ctypes.c_int64),
        ("hi", ctypes.c_int64),
    ]


_NUMEL = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
_SHAPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64))
_NP_DTYPES = {"i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}


class Field:
    """One member of NAME_args: name, kind ("size", "ufun", "input",
    "output"), NumPy dtype, offset and element count function; from a
    library with NAME_field_infos also ``decl`` (the declaration), ``ndim``
    (1 for a ragged array), ``range`` (a size's (lo, hi)) and a shape
    function (else these are None)."""

    def __init__(self, raw, info=None):
        self.name = raw.name.decode()
        self.kind = _KINDS[raw.kind] if 0 <= raw.kind < len(_KINDS) else str(raw.kind)
        self.dtype = np.dtype(_NP_DTYPES[raw.dtype.decode()])
        self.offset = raw.offset
        self._numel = _NUMEL(raw.numel) if raw.numel else None
        self.decl = info.decl.decode() if info is not None and info.decl else None
        self.ndim = info.ndim if info is not None else None
        self.range = (info.lo, info.hi) if info is not None and self.kind == "size" else None
        self._shape = _SHAPE(info.shape) if info is not None and info.shape else None

    def numel(self, args):
        return self._numel(ctypes.addressof(args)) if self._numel else None

    def shape(self, args):
        """The array's shape under the sizes and UF arrays in args (None
        without NAME_field_infos; raises BoundsError for bad UF values)."""
        if not self._shape:
            return None
        dims = (ctypes.c_int64 * 8)()
        nd = self._shape(ctypes.addressof(args), dims)
        if nd < 0:
            raise errors.BoundsError("the shape of %s cannot be computed (UF values out of "
                                     "range?)" % self.name)
        return tuple(dims[k] for k in range(nd))

    def __repr__(self):
        return "Field(%r, %s, %s)" % (self.name, self.kind, self.dtype)


def load_library(path, name=None, module=None, threads=None):
    """Opens an AOT library built by ``ravel build --shared``.

    name: the NAME its symbols start with (default: from the file name,
    libNAME.so). module: the :class:`ravel.Module` it was built from,
    optional: with it, outputs have their shapes and ragged ones are
    :class:`ravel.Ragged`; without it, outputs have the shapes the library
    describes (NAME_field_infos), else they are flat arrays in canonical
    order, as ``NAME_run`` writes them. threads: the threads of a library
    built with ``ravel build --threads`` (:meth:`Library.set_num_threads`).
    """
    lib = Library(path, name, module)
    if threads is not None:
        lib.set_num_threads(threads)
    return lib


class Library:
    """An AOT-compiled model; call it like a :class:`ravel.Program`."""

    def __init__(self, path, name=None, module=None):
        if name is None:
            m = re.match(r"(?:lib)?(.+?)\.(?:so|dylib)(?:\..*)?$", os.path.basename(path))
            if not m:
                raise errors.ArgumentError("load_library: cannot tell NAME from %r; pass name="
                                           % path)
            name = m.group(1)
        try:
            self._dll = ctypes.CDLL(os.path.abspath(path))
        except OSError as e:
            raise errors.FileError("load_library: %s" % e) from None
        self.name = name
        self.module = module
        try:
            count = ctypes.c_int.in_dll(self._dll, name + "_num_fields").value
            table = _Field.in_dll(self._dll, name + "_fields")
            self._run = getattr(self._dll, name + "_run")
        except (ValueError, AttributeError):
            raise errors.ArgumentError(
                "load_library: %s has no %s_fields/%s_run: not a library of `ravel build "
                "--shared`, or built under another NAME" % (path, name, name)) from None
        self._run.restype = ctypes.c_int32
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._message = self._optional("_check_message", ctypes.c_char_p, [ctypes.c_int32])
        self._last_error = self._optional("_last_error", ctypes.c_char_p, [])
        self._set_threads = self._optional("_set_num_threads", ctypes.c_int32, [ctypes.c_int32])
        self._get_threads = self._optional("_num_threads", ctypes.c_int32, [])
        # NAME_field may have grown members after the ones read here: its
        # true size is the table's symbol size over its count (the same for
        # NAME_field_infos)
        sizes = symbol_sizes(os.path.abspath(path),
                             [name + "_fields", name + "_field_infos", name + "_args_size"])
        raws = _table(table, _Field, sizes.get(name + "_fields"), count)
        try:
            first = _FieldInfo.in_dll(self._dll, name + "_field_infos")
            infos = _table(first, _FieldInfo, sizes.get(name + "_field_infos"), count)
        except ValueError:  # an older library
            infos = [None] * count
        self.fields = [Field(r, i) for r, i in zip(raws, infos)]
        # NAME_args: at least up to its last field (each 8 bytes, an int64_t
        # or a pointer), or NAME_args_size where the library exports it; the
        # bytes past that are zero, for members added that no field names
        end = max([f.offset + 8 for f in self.fields] + [8])
        width = sizes.get(name + "_args_size")
        if width in (4, 8):
            ctype = ctypes.c_uint32 if width == 4 else ctypes.c_uint64
            end = max(end, ctype.in_dll(self._dll, name + "_args_size").value)
        self._args_size = end + 64

    def _optional(self, suffix, restype, argtypes):
        f = getattr(self._dll, self.name + suffix, None)
        if f is not None:
            f.restype, f.argtypes = restype, argtypes
        return f

    @property
    def num_threads(self):
        """The threads NAME_run's parallel loops use (1: a serial build)."""
        return self._get_threads() if self._get_threads else 1

    def set_num_threads(self, n):
        """Sets the threads of a ``ravel build --threads`` library's pool (0:
        ``$RAVEL_NUM_THREADS``, else every CPU); returns the count now used,
        1 for a serial build. For the whole process: the pool is the
        library's."""
        if not isinstance(n, int) or n < 0:
            raise errors.ArgumentError("threads must be a non-negative integer, got %r" % (n,))
        if not self._set_threads:
            return 1
        return self._set_threads(n)

    def __repr__(self):
        return "<ravel.Library %s: %s>" % (self.name, ", ".join(
            "%s %s" % (f.kind, f.name) for f in self.fields))

    def __call__(self, args=None, /, *, weights=None, **kwargs):
        args = dict(args or {}, **kwargs)
        if weights is not None:
            loaded = load_weights(weights) if not isinstance(weights, dict) else weights
            names = {f.name for f in self.fields}
            args = dict({k: v for k, v in loaded.items() if k in names}, **args)
        known = {f.name: f for f in self.fields}
        for key in args:
            if key not in known or known[key].kind == "output":
                hint = errors.did_you_mean(key, [f.name for f in self.fields
                                                 if f.kind != "output"])
                raise errors.ArgumentError("%s has no size, ufun or input named '%s'%s" % (
                    self.name, key, hint))
        buf = (ctypes.c_byte * self._args_size)()
        keep = []
        # sizes, then UF arrays: the element counts of arrays depend on them
        for kind in ("size", "ufun", "input", "output"):
            for f in self.fields:
                if f.kind != kind:
                    continue
                if kind == "size":
                    if f.name not in args:
                        raise errors.ArgumentError("%s: size %s is not given" % (self.name, f.name))
                    ctypes.c_int64.from_buffer(buf, f.offset).value = size_value(f.name,
                                                                                args[f.name])
                    continue
                n = f.numel(buf)
                if n is not None and n < 0:
                    raise errors.BoundsError("%s: the element count of %s cannot be computed "
                                             "(UF values out of range?)" % (self.name, f.name))
                shape = f.shape(buf)
                if kind == "output":
                    a = _arrays.aligned_empty(shape if shape is not None else n, f.dtype)
                else:
                    if f.name not in args:
                        raise errors.ArgumentError("%s: %s %s is not given" % (self.name, kind,
                                                                               f.name))
                    a = self._flat(f, args[f.name], n, shape)
                keep.append((f, a))
                ctypes.c_void_p.from_buffer(buf, f.offset).value = a.ctypes.data if a.size else None
        rc = self._run(ctypes.addressof(buf), None)
        if rc != 0:
            msg = self._last_error() if self._last_error else None
            if not msg and self._message:
                msg = self._message(rc)
            text = msg.decode() if msg else (
                "a size or UF value is outside its declared range" if rc == 2 else "error %d" % rc)
            raise _RV_RT_ERRORS.get(rc, errors.Error)("%s_run: %s" % (self.name, text))
        outs = [(f, a) for f, a in keep if f.kind == "output"]
        if self.module is None:
            return {f.name: a for f, a in outs}
        # the module's layouts: ragged outputs become Ragged
        # shapes from the module's layouts under the same sizes and UFs
        b = Bindings(self.module).bind({k: v for k, v in args.items()
                                        if self.module._kind_of(k) in ("size", "ufun")})
        res = {}
        for f, a in outs:
            lay = b.layout(f.name)
            a = a.reshape(-1)
            res[f.name] = Ragged(a, lay) if lay.ragged else a.reshape(lay.extents)
        return res

    def _flat(self, f, value, n, shape=None):
        """The argument of field f as a flat, aligned array of n elements in
        its dtype (UF values of another integer width are converted), of
        the given shape where the library says it and the array has that
        rank."""
        if isinstance(value, Ragged):
            value = value.values
        elif isinstance(value, (list, tuple)):
            try:
                value = np.asarray(value, dtype=f.dtype)
            except ValueError:  # rows of different lengths
                value = flatten_rows(value, f.dtype)
        elif not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
            value = np.from_dlpack(value)
        a = np.asarray(value)
        if f.kind == "ufun" and a.dtype != f.dtype and a.dtype.kind in "iu":
            a = a.astype(f.dtype)
        if a.dtype != f.dtype:
            raise errors.ShapeError("%s %s: expected a %s array, got %s" % (
                f.kind, f.name, f.dtype, a.dtype))
        if shape is not None and a.ndim == len(shape) and a.shape != shape:
            raise errors.ShapeError("%s %s: expected shape %s, got %s" % (
                f.kind, f.name, shape, a.shape))
        if a.size != n:
            raise errors.ShapeError("%s %s: expected %d elements, got %d (shape %s)" % (
                f.kind, f.name, n, a.size, a.shape))
        return _arrays.as_aligned(a.reshape(-1))


def _table(first, cls, symbol_size, count):
    """The count entries of an array of cls structs starting at ``first``,
    whose real entry size (the symbol's size over count) may be larger
    than cls: a newer library's structs with members appended."""
    stride = (symbol_size or 0) // max(count, 1)
    stride = max(stride, ctypes.sizeof(cls))
    base = ctypes.addressof(first)
    return [cls.from_address(base + i * stride) for i in range(count)]
