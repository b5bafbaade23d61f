"""The arguments of one run (an rv_bindings) and its results.

Arguments are bound by name: sizes as integers, UF arrays and inputs as
arrays (NumPy, any ``__dlpack__`` producer, a Ragged, or a list of rows
for a ragged input), structures as linearized batches (ravel.Linear,
copied). Arrays are borrowed, never copied when their layout
is ravel's (compact, row-major, 64-byte aligned). A run's results stay in
the rv_bindings; the NumPy arrays returned are views of them that keep the
bindings alive (their ``base``), so nothing is copied out either.
"""

import ctypes
import os

import numpy as np

from . import _arrays, errors
from ._lib import ArrayInfo, has, lib
from .ragged import Layout, Ragged, flatten_rows
from .structs import Linear


class Bindings:
    """An rv_bindings with the Python objects its borrowed arrays need."""

    def __init__(self, module):
        self.module = module  # the module outlives the bindings
        self.ptr = lib.rv_bindings_new(module._ptr)
        if not self.ptr:
            raise errors.ArgumentError(errors.last_error())
        self._borrowed = []
        # where rv_bindings_get_info describes an array: a bindings object
        # serves one call at a time, so one buffer per object is enough
        self._info = ArrayInfo()
        self._info_addr = ctypes.addressof(self._info)
        self._infos = None  # run_linear's, one per output: made at its first call
        self.dirty = False  # a Bound's: a call bound arguments since the last reset

    def __del__(self):
        for b in self._borrowed:
            b.close()
        if self.ptr:
            lib.rv_bindings_free(self.ptr)
            self.ptr = None

    def reset(self, base=None):
        """Unbinds every argument (then binds ``base``'s again, when given),
        keeping the computed tensors' arrays for the next run
        (rv_bindings_reset), and releases the arrays borrowed for them."""
        errors.check(lib.rv_bindings_reset(self.ptr, base.ptr if base is not None else None))
        self.dirty = False
        if self._borrowed:
            for b in self._borrowed:
                b.close()
            self._borrowed = []

    # ---- binding

    def bind(self, args, weights=None, infer=True):
        """Binds ``weights`` (a safetensors or .npz file, or a dict of
        arrays: the inputs and ufuns among its tensors) and then the keyword
        arguments ``args``, which override the weights. ``infer``: bind the
        sizes the arrays' shapes determine now (a run infers them itself,
        so the calls that run next need not)."""
        if isinstance(weights, dict):
            # as from a file: tensors that are no input or ufun are ignored
            args = dict({k: v for k, v in weights.items()
                         if self.module._kind_of(k) in ("input", "ufun")}, **args)
        elif weights is not None:
            errors.check(lib.rv_bindings_load_weights(self.ptr, _path(weights)))
        # structures first (they bind their sizes and UFs, which explicit
        # ones then override), then sizes and UFs: they decide the layouts
        # of ragged inputs. One pass over the names (a server's call gives
        # only a structure); the others are bound after it, by kind.
        m = self.module
        rest = []
        for name, value in args.items():
            kind = m._kind_of(name)
            if kind == "structure":
                self.set_linear(name, value)
            elif kind in _ORDER:
                rest.append((_ORDER[kind], name, value))
            elif kind is None:
                raise errors.ArgumentError(_unknown(m, name))
            else:
                raise errors.ArgumentError(
                    "'%s' is computed by the program; only sizes, ufuns and inputs are "
                    "arguments" % name)
        rest.sort(key=_first)  # stable: in the order given within a kind
        for order, name, value in rest:
            if order == 0:
                self.set_size(name, value)
            elif order == 1:
                self._set_array(name, _index_array(name, value))
            else:
                self._set_array(name, self._input_array(name, value))
        if infer and has("rv_bindings_infer_sizes"):
            # sizes the arrays' shapes determine need not be given
            errors.check(lib.rv_bindings_infer_sizes(self.ptr))
        return self

    def _input_array(self, name, value):
        """An input's array: NumPy and DLPack producers as they are (ravel
        checks their dtype and shape), a Ragged's values, the rows of a
        ragged input flattened, other sequences and scalars converted to
        the input's dtype."""
        if isinstance(value, Ragged):
            return value.values
        if isinstance(value, np.ndarray) or hasattr(value, "__dlpack__"):
            return value
        dtype = self.module._dtype_of(name)
        if isinstance(value, (list, tuple)) and self._is_ragged(name):
            return flatten_rows(value, dtype)
        try:
            return np.asarray(value, dtype=dtype)
        except ValueError:  # rows of different lengths whose layout is not known yet
            return flatten_rows(value, dtype)

    def _is_ragged(self, name):
        try:
            return self.layout(name).ragged
        except errors.Error:
            return False  # sizes or UFs missing: the run will say which

    def set_size(self, name, value):
        errors.check(lib.rv_bindings_set_size(self.ptr, name.encode(), size_value(name, value)))

    def set_linear(self, name, value):
        """Binds structure ``name`` from a linearized batch: its size, UFs
        and dynamic batches (copied: the Linear may be reused at once)."""
        errors.check(lib.rv_bindings_set_linear(self.ptr, name.encode(),
                                                linear_value(name, value)._ref))

    def run_linear(self, program, name, value, specs, owner=None, base=None):
        """Resets these bindings to ``base`` (when given), binds structure
        ``name`` from a linearized batch, runs ``program`` and returns its
        outputs (``specs`` as for :meth:`results`), in one call of the
        library (rv_program_run_linear): a recursive model's call as a
        server makes it, the structure its only argument."""
        n = len(specs)
        if self._infos is None or len(self._infos) != n:
            self._infos = (ArrayInfo * max(n, 1))()
            self._infos_addr = ctypes.addressof(self._infos)
        if base is not None and self._borrowed:
            self.reset()  # the library's reset would leave them borrowed here
        st = _run_linear(program._ptr, self.ptr, base.ptr if base is not None else None,
                         name.encode(), linear_value(name, value)._ref, self._infos_addr, n)
        if st:
            raise errors.error_for(st)
        owner = self if owner is None else owner
        infos, view = self._infos, _arrays.view_info
        out = {}
        for k in range(n):
            oname, _, dtype, ndim = specs[k]
            info = infos[k]
            if info.ndim < 0:
                out[oname] = None
                continue
            a = view(info, owner, dtype)
            out[oname] = a if a.ndim == ndim else Ragged(a, self.layout(oname))
        return out

    def _ragged(self, name, flat):
        """A ragged output's Ragged over its flat array (ravel._fast.run_linear
        calls it)."""
        return Ragged(flat, self.layout(name))

    def _set_array(self, name, value):
        if isinstance(value, _arrays.Borrowed):
            arr = value
        elif isinstance(value, np.ndarray):
            arr = _arrays.wrap_numpy(value, _what(self.module, name))
        else:
            arr = _arrays.from_dlpack(value, _what(self.module, name))
        self._borrowed.append(arr)
        errors.check(lib.rv_bindings_set_array(self.ptr, name.encode(), arr.ptr))

    def randomize(self, seed):
        errors.check(lib.rv_bindings_randomize(self.ptr, seed))

    # ---- reading back

    def size(self, name):
        return int(lib.rv_bindings_get_size(self.ptr, name.encode()))

    def layout(self, name):
        """The canonical layout of tensor or ufun ``name`` under the bound
        sizes and UF arrays."""
        out = ctypes.c_void_p()
        errors.check(lib.rv_bindings_layout(self.ptr, name.encode(), ctypes.byref(out)))
        try:
            lp = out.value
            n = lib.rv_layout_ndim(lp)
            counts = [lib.rv_layout_count(lp, k) for k in range(n + 1)]
            starts = []
            for k in range(n):
                sp = lib.rv_layout_starts(lp, k)
                starts.append(np.ctypeslib.as_array(sp, (counts[k] + 1,)).copy() if sp else None)
            return Layout([lib.rv_layout_dim_name(lp, k).decode() for k in range(n)], counts,
                          [lib.rv_layout_extent(lp, k) for k in range(n)], starts)
        finally:
            lib.rv_layout_free(out.value)

    def array(self, name, ndim, dtype=None, owner=None):
        """The bound or computed array ``name`` as a NumPy view that keeps
        ``owner`` (default: these bindings; an object that keeps them
        alive) alive; a Ragged when the tensor is ragged (its array is 1-D
        while the tensor has more dimensions). ``dtype``: its NumPy dtype,
        when known."""
        owner = self if owner is None else owner
        if _HAS_INFO:  # one call of the library per array
            if not lib.rv_bindings_get_info(self.ptr, name.encode(), self._info_addr):
                return None
            a = _arrays.view_info(self._info, owner, dtype)
        else:
            ptr = lib.rv_bindings_get_array(self.ptr, name.encode())
            if not ptr:
                return None
            a = _arrays.view_array(ptr, owner, dtype)
        if a.ndim != ndim:
            return Ragged(a, self.layout(name))
        return a


    def results(self, specs, owner=None):
        """The outputs by name, as :meth:`array` gives each: ``specs`` holds
        (name, name encoded, NumPy dtype, ndim) per output (a module's
        ``_results``). One loop over the outputs, with one call of the
        library each where it has rv_bindings_get_info: this is the end of
        every call of a program."""
        owner = self if owner is None else owner
        if not _HAS_INFO:
            return {name: self.array(name, ndim, dtype, owner) for name, _, dtype, ndim in specs}
        ptr, info, addr = self.ptr, self._info, self._info_addr
        view = _arrays.view_info
        out = {}
        for name, cname, dtype, ndim in specs:
            if not _get_info(ptr, cname, addr):
                out[name] = None
                continue
            a = view(info, owner, dtype)
            out[name] = a if a.ndim == ndim else Ragged(a, self.layout(name))
        return out


_HAS_INFO = has("rv_bindings_get_info")
_get_info = lib.rv_bindings_get_info if _HAS_INFO else None
HAS_RUN_LINEAR = has("rv_program_run_linear")
_run_linear = lib.rv_program_run_linear if HAS_RUN_LINEAR else None


def linear_value(name, value):
    """``value`` when it is a linearized batch, the value of structure ``name``."""
    if not isinstance(value, Linear):
        raise errors.ArgumentError(
            "structure %s: expected a linearized batch (ravel.Structs(...).linearize()), "
            "got %s" % (name, type(value).__name__))
    return value

# the order in which bind binds the kinds of argument after structures
_ORDER = {"size": 0, "ufun": 1, "input": 2}


def _first(t):
    return t[0]


def size_value(name, value):
    """A size's value: an integer (not a bool, not a float)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise errors.ArgumentError("size %s: expected an integer, got %r" % (name, value))
    return int(value)


def _path(p):
    return os.fsencode(p)


def _what(m, name):
    return "%s %s" % (m._kind_of(name) or "argument", name)


def _unknown(m, name):
    names = m.sizes + m.ufuns + list(m.inputs)
    hint = errors.did_you_mean(name, names)
    return "the program has no size, ufun or input named '%s'%s; its arguments are: %s" % (
        name, hint, ", ".join(names) or "none")


def _index_array(name, value):
    """A UF array: integer (i32 or i64) values, lists taken as i64."""
    if isinstance(value, Ragged):
        return value.values
    if isinstance(value, np.ndarray) or hasattr(value, "__dlpack__"):
        return value
    try:
        a = np.asarray(value)
    except ValueError:  # rows of a ragged domain
        return flatten_rows(value, np.int64)
    if a.dtype.kind not in "iu":
        raise errors.ArgumentError("ufun %s: expected integers, got %s values" % (name, a.dtype))
    return a.astype(np.int64)
