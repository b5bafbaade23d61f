"""Modules (parsed .rv programs) and the programs compiled from them."""

import ctypes
import functools
import os
import threading
import weakref
from collections import namedtuple

import numpy as np

from . import _arrays, _bindings, _fastpath, errors
from ._bindings import Bindings
from ._lib import CompileOptions, ProgramCounters, has, lib
from .structs import Linear

__all__ = ["Bound", "Module", "Program", "TensorInfo", "load", "parse"]

TensorInfo = namedtuple("TensorInfo", "name dtype ndim")
TensorInfo.__doc__ = "An input or output of a module: its name, NumPy dtype and rank."

_TARGETS = {"cpu": 0, "cuda": 1}


def load(path):
    """Loads (parses and checks) the .rv file at ``path``.

    Raises :class:`ravel.ParseError`, :class:`ravel.TypeCheckError`, ...
    with ravel's message, located ``path:line:col``.
    """
    out = ctypes.c_void_p()
    errors.check(lib.rv_module_load(os.fsencode(path), ctypes.byref(out)))
    return Module(out.value)


def parse(text, name="<string>"):
    """Parses and checks ravel source ``text``; ``name`` locates its errors."""
    out = ctypes.c_void_p()
    errors.check(lib.rv_module_parse(name.encode(), text.encode(), ctypes.byref(out)))
    return Module(out.value)


class Module:
    """A ravel program: sizes, ufuns, inputs, compute definitions, schedules.

    Make one with :func:`ravel.load` or :func:`ravel.parse`. ``str(m)`` is
    its source as ravel prints it. Compile it with :meth:`compile`, or run
    the reference interpreter (double precision, the oracle of every
    compiled kernel) with :meth:`run_interp`.

    Threads: programs of a module may run at once, but compiling the
    module or adding schedules to it must not overlap a run of its
    programs (include/ravel.h, "Thread safety").
    """

    def __init__(self, ptr):
        self._ptr = ptr
        self._kinds = {}  # _kind_of's answers: a module's names do not change
        self._index()

    def __del__(self):
        if getattr(self, "_ptr", None):
            lib.rv_module_free(self._ptr)
            self._ptr = None

    def _index(self):
        p = self._ptr
        self.sizes = [lib.rv_size_name(lib.rv_module_size_at(p, i)).decode()
                      for i in range(lib.rv_module_num_sizes(p))]
        self.ufuns = [lib.rv_ufun_name(lib.rv_module_ufun_at(p, i)).decode()
                      for i in range(lib.rv_module_num_ufuns(p))]
        self.inputs, self.outputs, self._computed = {}, {}, set()
        for i in range(lib.rv_module_num_tensors(p)):
            t = lib.rv_module_tensor_at(p, i)
            info = TensorInfo(lib.rv_tensor_name(t).decode(),
                              _arrays.np_dtype(lib.rv_tensor_dtype(t)), lib.rv_tensor_ndim(t))
            if lib.rv_tensor_is_input(t):
                self.inputs[info.name] = info
            else:
                self._computed.add(info.name)
                if lib.rv_tensor_is_output(p, t):
                    self.outputs[info.name] = info
        # what each call reads its outputs with (Bindings.results)
        self._results = tuple((i.name, i.name.encode(), i.dtype, i.ndim)
                              for i in self.outputs.values())

    sizes = ()
    """Names of the size variables, in declaration order."""
    ufuns = ()
    """Names of the uninterpreted functions (integer arrays given per run)."""
    inputs = {}
    """Inputs by name (:class:`TensorInfo`), in definition order."""
    outputs = {}
    """Outputs (computed tensors no other definition reads) by name."""

    def _kind_of(self, name):
        kind = self._kinds.get(name)
        if kind is None:
            kind = self._kinds[name] = self._find_kind(name)
        return kind

    def _find_kind(self, name):
        if name in self.inputs:
            return "input"
        if name in self.sizes:
            return "size"
        if name in self.ufuns:
            return "ufun"
        if name in self._computed:
            return "output"
        if lib.rv_module_structure(self._ptr, name.encode()):
            return "structure"
        return None

    def _dtype_of(self, name):
        return self.inputs[name].dtype

    def __str__(self):
        p = lib.rv_module_print(self._ptr)
        try:
            return ctypes.string_at(p).decode()
        finally:
            lib.rv_free(p)

    def __repr__(self):
        return "<ravel.Module sizes=%s ufuns=%s inputs=%s outputs=%s>" % (
            self.sizes, self.ufuns, list(self.inputs), list(self.outputs))

    def schedule(self, target, steps):
        """Appends a schedule block for tensor ``target`` (``steps`` as in a
        ``schedule target { ... }`` block); its syntax is checked now, its
        steps when the module is checked or compiled."""
        errors.check(lib.rv_module_schedule(self._ptr, target.encode(), steps.encode()))
        return self

    def check_schedule(self):
        """Applies every schedule block; raises :class:`ravel.ScheduleError`
        located at the first illegal step."""
        errors.check(lib.rv_module_check_schedule(self._ptr))

    def emit(self):
        """The C source that :meth:`compile` would compile (CPU)."""
        out = ctypes.c_void_p()
        errors.check(lib.rv_program_emit(self._ptr, ctypes.byref(out)))
        try:
            return ctypes.string_at(out.value).decode()
        finally:
            lib.rv_free(out.value)

    def compile(self, threads=None, serial=False, target="cpu", cc=None, cflags=None,
                cache_dir=None):
        """Compiles the module to native code (through the JIT's cache).

        threads: the threads of parallel loops, counting the caller: None
        (the process's shared pool: ``$RAVEL_NUM_THREADS``, else every CPU
        it may use), 1 (the calling thread only), N (a pool of N owned by
        the program). serial: run parallel loops on the calling thread.
        target: "cpu" or "cuda". cc, cflags, cache_dir: the C compiler,
        extra flags and the kernel cache (default: ``$RAVEL_CC`` or cc,
        none, ``$RAVEL_CACHE_DIR`` or ~/.cache/ravel).
        """
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise errors.ArgumentError("threads must be a positive integer or None, got %r"
                                       % (threads,))
        if target not in _TARGETS:
            raise errors.ArgumentError("unknown target %r (expected 'cpu' or 'cuda')" % (target,))
        opt = CompileOptions(
            cc=cc.encode() if cc else None,
            cflags=cflags.encode() if cflags else None,
            cache_dir=os.fsencode(cache_dir) if cache_dir else None,
            serial=1 if serial else 0,
            target=_TARGETS[target],
            threads=threads or 0,
        )
        out = ctypes.c_void_p()
        errors.check(lib.rv_program_compile(self._ptr, ctypes.byref(opt), ctypes.byref(out)))
        return Program(self, out.value, threads)

    def run_interp(self, args=None, /, *, weights=None, **kwargs):
        """Runs the reference interpreter and returns the outputs by name.

        Arguments as for calling a :class:`Program`.
        """
        b = Bindings(self).bind(_merge(args, kwargs), weights, infer=False)
        errors.check(lib.rv_interp_run(self._ptr, b.ptr))
        return _outputs(self, b)

    def random_args(self, seed=1, **fixed):
        """Arguments drawn reproducibly from ``seed`` within their declared
        ranges (sizes, UF arrays, inputs), except those given in ``fixed``:
        a dict to call a program or the interpreter with."""
        b = Bindings(self).bind(fixed)
        b.randomize(seed)
        out = {name: b.size(name) for name in self.sizes}
        for name in self.ufuns:
            out[name] = b.array(name, b.layout(name).ndim)
        for name, info in self.inputs.items():
            out[name] = b.array(name, info.ndim)
        return out

    def layout(self, name, **args):
        """The layout of tensor or ufun ``name`` under the sizes and UF
        arrays in ``args`` (a :class:`ravel.ragged.Layout`: its dimensions,
        their uniform extents, the row starts of its ragged ones)."""
        return Bindings(self).bind(args).layout(name)


def _merge(args, kwargs):
    """The arguments of a call: a mapping given first (for names that are
    not Python identifiers, or are ``weights`` or ``out``), then keywords."""
    if args is None:
        return kwargs
    if not kwargs and isinstance(args, dict):
        return args  # read only: a server's call passes its dict as it is
    merged = dict(args)
    merged.update(kwargs)
    return merged


def _outputs(m, b, owner=None):
    return b.results(m._results, owner)


class Program:
    """A module compiled to native code. Call it with the arguments by name:

        prog(X=x, W=w, T=16)  ->  {"Y": array}

    The arguments may also come as a dict, first (``prog(args)``), which
    is how an input named ``weights`` or ``out`` is passed.
    Sizes are integers (those the arrays' shapes determine may be left
    out where libravel infers them: rv_bindings_infer_sizes); UF arrays
    integer arrays (or lists); inputs NumPy
    arrays, ``__dlpack__`` tensors (PyTorch's, ...), or for a ragged input
    a :class:`ravel.Ragged` or a list of rows. ``weights`` binds the inputs
    of a safetensors or .npz file by name first (or a dict of arrays).
    Results are NumPy arrays that share the run's memory (no copy) and a
    :class:`ravel.Ragged` for a ragged output. ``out`` (a dict of
    aligned, C-contiguous NumPy arrays, one per output) makes the run write
    the outputs into the caller's arrays instead, which are then returned.

    One program may be called from several threads at once.
    """

    def __init__(self, module, ptr, threads):
        self.module = module  # programs need their module alive
        self._ptr = ptr
        self.threads = threads

    def __del__(self):
        if getattr(self, "_ptr", None):
            lib.rv_program_free(self._ptr)
            self._ptr = None

    def __call__(self, args=None, /, *, weights=None, out=None, **kwargs):
        return self._run(Bindings(self.module).bind(_merge(args, kwargs), weights, infer=False), out)

    def bind(self, args=None, /, *, weights=None, **kwargs):
        """The program with ``weights`` and these arguments bound once: a
        :class:`Bound`, called with the rest of each call's arguments.

        Calling the program itself binds every argument anew on each call,
        so what it keeps derived from its ``param`` inputs (their packed
        layouts) is derived again every call; a Bound's calls share one
        binding of the weights and reuse it.
        """
        for fn in ("rv_bindings_inherit", "rv_program_invalidate"):
            if not has(fn):
                raise errors.ArgumentError("Program.bind: the loaded libravel has no %s" % fn)
        return Bound(self, Bindings(self.module).bind(_merge(args, kwargs), weights))

    def invalidate(self):
        """Drops what the program derived from its ``param`` inputs: for a
        caller that wrote into a bound param's array in place (see
        :class:`Bound`)."""
        lib.rv_program_invalidate(self._ptr)

    def _run(self, b, out, owner=None):
        """Runs on bindings b: the outputs as views that keep ``owner``
        (default: b) alive, or written into ``out``."""
        if out is None:
            errors.check(lib.rv_program_run(self._ptr, b.ptr))
            return _outputs(self.module, b, owner)
        names = list(self.module.outputs)
        missing = [n for n in names if n not in out]
        extra = [n for n in out if n not in names]
        if missing or extra:
            raise errors.ArgumentError(
                "out: expected one array per output (%s)%s%s" % (
                    ", ".join(names), "; missing: " + ", ".join(missing) if missing else "",
                    "; not outputs: " + ", ".join(extra) if extra else ""))
        arrays = []
        for n in names:
            a = out[n]
            if not (isinstance(a, np.ndarray) and a.flags.c_contiguous and
                    _arrays.is_aligned(a) and a.flags.writeable):
                raise errors.ArgumentError(
                    "out %s: expected a writeable, C-contiguous NumPy array aligned to %d bytes "
                    "(ravel.empty makes one)" % (n, _arrays.ALIGN))
            arrays.append(_arrays.wrap_numpy(a, "output " + n))
        ptrs = (ctypes.c_void_p * len(arrays))(*[a.ptr for a in arrays])
        try:
            errors.check(lib.rv_program_run_into(self._ptr, b.ptr, ptrs, len(arrays)))
        finally:
            for a in arrays:
                a.close()
        return {n: out[n] for n in names}

    @property
    def source(self):
        """The generated C translation unit."""
        return lib.rv_program_source(self._ptr).decode()

    def stats(self):
        """Counters over the program's life: runs, kernel_calls,
        compile_seconds, cc_seconds, prelude_seconds, kernel_seconds,
        prelude_runs, aux_bytes, pack_fills."""
        c = ProgramCounters()
        lib.rv_program_stats(self._ptr, ctypes.byref(c))
        return {name: getattr(c, name) for name, _ in c._fields_}


class Bound:
    """A :class:`Program` with some arguments bound once (``prog.bind(...)``,
    typically the weights), called with the rest of each call's arguments:

        model = prog.bind(weights="w.safetensors")
        for x in requests:
            y = model(X=x)["Y"]

    Each call binds its own arguments over the bound ones (overriding them
    where a call gives an argument again) and returns the outputs as
    calling the program does. Nothing bound for one call stays for the
    next: an argument a call leaves out is unbound (or the bound one), and
    sizes are inferred from each call's arrays again.

    Calls reuse memory: the bindings of a call (rv_bindings_reset) and the
    arrays of its results, which the next call computes into where their
    shapes are unchanged, so a serving loop allocates no result arrays.
    A call's results are NumPy views of those arrays, and they are reused
    only once no result of the call (nor any view of one) is alive: the
    results a call returns never change under the caller, and results
    alive at the same time never share memory. So keep results as long as
    needed; drop them (or copy what you keep) before the next call to let
    it reuse their memory (a loop that rebinds ``y`` keeps one call's
    results alive during the next: the Bound then alternates between two
    sets of arrays). Results written into ``out=`` arrays are the caller's.

    Threads: calls may run from several threads at once. Each call takes
    bindings of its own from the Bound's pool (under a lock, or new ones
    when every pooled one is in use or its results are alive) and gives
    them back when it returns, so concurrent calls never share bindings or
    result arrays. A call with the structure only, through ravel._fast,
    takes them from a pool of its own kept in C (ravel._fast.Pool: the
    GIL is its lock, and a reference count says whether results are
    alive), so a Bound that serves both kinds of call keeps up to twice
    _POOL bindings.

    The bound ones stay one binding for every call: what the program
    derives from a ``param`` input (a packed layout of a weight matrix) is
    made at the first call and reused by the next ones. NumPy arrays are
    mutable and are bound without a copy (when 64-byte aligned and
    C-contiguous; other arrays are copied when bound), so the rule is:
    after writing into a bound param's array in place, call
    :meth:`invalidate` (or bind again with ``prog.bind``) before the next
    call, or calls may go on using what was derived from the old values.
    Non-param arrays are read by every call, so writes to them are seen.
    """

    _POOL = 4  # idle bindings kept: a few threads' calls, each with a live result

    def __init__(self, program, base):
        self.program = program
        self._base = base
        self._lock = threading.Lock()
        self._idle = []  # (Bindings, a weak reference to its last call's _Lease)
        self._reuse = has("rv_bindings_reset")
        self._fast = None  # ravel._fast's pool, made at the first call through it

    def __call__(self, args=None, /, *, out=None, **kwargs):
        if out is None and _fastpath.fast is not None:
            # a recursive model's call as a server makes it, the batch's
            # structure its only argument: through ravel._fast's pool
            # (NotImplemented for any other call)
            pool = self._fast or self._fast_pool()
            if pool is not None:
                got = pool.call(args, kwargs)
                if got is not NotImplemented:
                    return got
        args = _merge(args, kwargs)
        b = self._take()
        lease = _Lease(b)
        try:
            if out is None and len(args) == 1 and _bindings.HAS_RUN_LINEAR:
                # a recursive model's call as a server makes it: the batch's
                # structure is the only argument; reset to the bound
                # arguments, bound, run and read in one call of the library
                # (rv_program_run_linear), the bindings pooled as they are
                for name, value in args.items():
                    m = self.program.module
                    if m._kind_of(name) == "structure":
                        b.dirty = True
                        return b.run_linear(self.program, name, value, m._results, lease,
                                            self._base)
            if b.dirty:
                b.reset(self._base)
            b.dirty = True
            return self.program._run(b.bind(args, infer=False), out, lease)
        finally:
            self._give(b, lease)

    def _fast_pool(self):
        """The pool of this Bound's structure-only calls through ravel._fast
        (python/ravel/_fast.c, "a Bound's pool"), made at the first: taking
        and giving its bindings, and knowing when their results are gone,
        without a lock or a Python object per call. None where those calls
        cannot be pooled (no rv_bindings_reset or rv_program_run_linear).
        Bindings stay in the pool they came from: the other calls have the
        Python pool below (_idle)."""
        if not (self._reuse and _bindings.HAS_RUN_LINEAR):
            return None
        m, base = self.program.module, self._base
        with self._lock:  # one pool, whichever thread calls first
            if self._fast is None:
                self._fast = _fastpath.fast.Pool(
                    self.program, base, m._results, functools.partial(_inheriting, m, base),
                    m._kind_of, Linear, _bindings.linear_value, self._POOL)
        return self._fast

    def _pooled(self):
        """The pooled Bindings of both pools (for tests)."""
        return [b for b, _ in self._idle] + (self._fast.bindings() if self._fast else [])

    def _take(self):
        """Bindings for one call: a pooled one whose last call's results
        are all gone (they were reset to the bound arguments when pooled),
        else new ones."""
        if self._reuse:
            with self._lock:
                idle = self._idle
                for i in range(len(idle)):
                    if idle[i][1]() is None:
                        return idle.pop(i)[0]
        return _inheriting(self.program.module, self._base)

    def _give(self, b, lease):
        """Pools b after a call with a weak reference to the call's lease (a
        result alive keeps b's arrays from reuse), reset to the bound
        arguments when the call borrowed the caller's arrays (it holds
        nothing of the caller's while pooled; a structure's batch is the
        bindings' own copy, and the next call resets b first: b.dirty)."""
        if not self._reuse:
            return
        if b._borrowed:
            b.reset(self._base)
        with self._lock:
            self._idle.append((b, weakref.ref(lease)))
            if len(self._idle) > self._POOL:
                self._trim()

    def _trim(self):
        """Drops one pooled bindings object (the lock held): one whose
        results are alive (they keep it alive), else the oldest."""
        busy = [i for i, (_, r) in enumerate(self._idle) if r() is not None]
        del self._idle[busy[0] if busy else 0]

    def invalidate(self):
        """Says that a bound param's array was written in place: the next
        call derives the program's data from it again (rv_program_invalidate;
        this drops what the program keeps for every binding)."""
        self.program.invalidate()


def _inheriting(module, base):
    """New bindings of ``module`` that inherit ``base``'s arguments (a
    Bound's, for its pools; no reference to the Bound, so a pool holding
    this function makes no cycle)."""
    b = Bindings(module)
    b.inherited = base  # borrows its arrays: keep it alive with the results
    errors.check(lib.rv_bindings_inherit(b.ptr, base.ptr))
    return b


class _Lease:
    """One Bound call's hold on its bindings: the call's results (their
    buffers, the base of every view of them) keep it, and so the bindings,
    alive; the pool reuses the bindings once it is gone. One object per
    call, whatever the number of outputs, so checking a pooled bindings
    object is one weak reference."""

    __slots__ = ("bindings", "__weakref__")

    def __init__(self, bindings):
        self.bindings = bindings
