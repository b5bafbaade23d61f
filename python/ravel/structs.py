"""Batches of recursive data structures and their linearization.

A recursive model (TreeLSTM, DAG-RNN, a sequential LSTM: docs/recursion.md)
reads a batch of pointer-linked structures. :class:`Structs` builds one
(an rv_structs: children lists, parent arrays, generators, PTB
s-expressions, the SST files), each structure checked as it is added;
:meth:`Structs.linearize` numbers its nodes level by level (rv_linearize,
Cortex appendix B) into a :class:`Linear`, the arrays the kernels read.
A Linear is the value of a structure argument: ``prog(T=lin, Emb=...)``
binds T's size, UFs and dynamic batches from it (rv_bindings_set_linear).
Results over T's nodes come back in the linearized numbering;
:meth:`Linear.to_batch` puts them back in the batch's.
"""

import ctypes
import os

import numpy as np

from . import _arrays, _fastpath, errors
from ._lib import check_struct, has, lib

__all__ = ["Linear", "Structs", "KINDS", "SST_SPLITS"]

KINDS = {"sequence": 0, "tree": 1, "dag": 2}
"""Structure kinds by name (rv_struct_kind)."""

SST_SPLITS = {"all": 0, "train": 1, "test": 2, "dev": 3}
"""The Stanford Sentiment Treebank's splits by name (rv_sst_split)."""

_I32 = np.int32
_I32_DTYPE = np.dtype(_I32)


def _i32(name, a, n=None):
    """``a`` as a C-contiguous int32 array (checked to fit), of length n when given."""
    if isinstance(a, np.ndarray) and a.dtype is _I32_DTYPE and a.flags.c_contiguous:
        # the fast path: a server's arrays, as they are (identity: NumPy's
        # dtype comparison costs a fifth of a server's call of add_many)
        arr = a if a.ndim == 1 else a.reshape(-1)
        if n is not None and arr.size != n:
            raise errors.ArgumentError("%s: expected %d values, got %d" % (name, n, arr.size))
        return arr
    arr = np.asarray(a)
    if arr.size and arr.dtype.kind not in "iu":
        raise errors.ArgumentError("%s: expected integers, got %s values" % (name, arr.dtype))
    if arr.size and (arr.min() < np.iinfo(_I32).min or arr.max() > np.iinfo(_I32).max):
        raise errors.ArgumentError("%s: a value does not fit in int32" % name)
    arr = np.ascontiguousarray(arr, dtype=_I32).reshape(-1)
    if n is not None and arr.size != n:
        raise errors.ArgumentError("%s: expected %d values, got %d" % (name, n, arr.size))
    return arr


_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _ptr(a):
    """The address of an int32 array (the C functions take int32_t *), None
    for NULL or an empty one. A writeable array's through ctypes' buffer
    protocol: a third of the cost of NumPy's ``a.ctypes`` object, and a
    server's batch passes four arrays per call."""
    if a is None or a.size == 0:
        return None
    try:
        return _addressof(_from_buffer(a))
    except TypeError:  # read-only
        return a.ctypes.data


def _many_args(what, sizes, child_begin, child, data):
    """rv_structs_add_many's arguments after the batch (count, sizes,
    child_begin, num_begin, child, num_child, data, num_data: addresses and
    lengths), and the converted arrays they point into, to keep until the
    call."""
    try:
        # the fast path: a server's int32 arrays as they are, one look at
        # each (ctypes' from_buffer refuses an empty, read-only or
        # non-contiguous buffer: those are converted below); the other
        # checks (counts, lengths, the structures) are the library's
        if (sizes.dtype is _I32_DTYPE and child_begin.dtype is _I32_DTYPE
                and child.dtype is _I32_DTYPE):
            if data is None:
                rows, nrows = None, 0
            elif data.dtype is _I32_DTYPE:
                rows, nrows = _addressof(_from_buffer(data)), data.size
            else:
                raise TypeError
            return (sizes.size, _addressof(_from_buffer(sizes)),
                    _addressof(_from_buffer(child_begin)), child_begin.size,
                    _addressof(_from_buffer(child)), child.size, rows, nrows), None
    except (AttributeError, TypeError, ValueError):
        pass
    sizes = _i32("sizes", sizes)
    if sizes.size == 0:
        raise errors.ArgumentError("%s: no structures (sizes is empty)" % what)
    begin = _i32("child_begin", child_begin)
    flat = _i32("child", child)
    rows = None if data is None else _i32("data", data)
    # begin and flat may be empty (NULL: the library says what is missing)
    return (sizes.size, _ptr(sizes), _ptr(begin), begin.size, _ptr(flat), flat.size,
            _ptr(rows), 0 if rows is None else rows.size), (sizes, begin, flat, rows)


class Structs:
    """A batch of structures of one kind (``"sequence"``, ``"tree"`` or
    ``"dag"``) whose nodes have at most ``max_children`` children and
    ``width`` integers of data each (a word id, a label).

    Every ``add_*`` checks the structure completely and raises
    :class:`ravel.ArgumentError` (readers: :class:`ravel.ParseError`,
    :class:`ravel.FileError`) naming the structure and the node when it is
    not one (a cycle, a child out of range, two parents in a tree, more
    than ``max_children`` children, several roots, ...); the batch is then
    left as it was. Node ``i`` of structure ``s`` is node
    ``node_begin(s) + i`` of the batch. ``data`` arguments are ``n x
    width`` integers (row per node), None for -1 everywhere.
    """

    def __init__(self, kind="tree", max_children=2, width=1):
        if kind not in KINDS:
            raise errors.ArgumentError("unknown structure kind %r (expected %s)"
                                       % (kind, ", ".join(KINDS)))
        self._ptr = lib.rv_structs_new(KINDS[kind], max_children, width)
        if not self._ptr:
            raise errors.ArgumentError(errors.last_error())
        self.kind = kind
        self.max_children = max_children
        self.width = width

    def __del__(self):
        if getattr(self, "_ptr", None):
            lib.rv_structs_free(self._ptr)
            self._ptr = None

    def __len__(self):
        return lib.rv_structs_count(self._ptr)

    def __repr__(self):
        return "<ravel.Structs %s K=%d width=%d: %d structures, %d nodes>" % (
            self.kind, self.max_children, self.width, len(self), self.num_nodes)

    def clear(self):
        """Drops every structure (keeps the vocabulary and the buffers)."""
        _clear(self._ptr)

    # ---- adding structures (each returns self, so calls chain)

    def _data(self, n, data):
        if data is None:
            return None
        return _i32("data", data, n * self.width)

    def add_children(self, children=None, data=None, *, child_begin=None, child=None):
        """A structure given by its nodes' children lists: ``children[i]``
        is the list of node i's children (in order), e.g. ``[[1, 2], [], []]``;
        or in compressed rows, ``child_begin`` (n + 1 offsets) and ``child``."""
        if (children is None) == (child_begin is None):
            raise errors.ArgumentError("add_children: give either children lists or "
                                       "child_begin and child")
        if children is not None:
            rows = [list(r) for r in children]
            begin = _i32("child_begin", np.cumsum([0] + [len(r) for r in rows]))
            flat = _i32("child", [c for r in rows for c in r])
        else:
            begin = _i32("child_begin", child_begin)
            flat = _i32("child", child if child is not None else [])
        n = begin.size - 1
        if n >= 1 and flat.size != begin[n]:
            raise errors.ArgumentError("child: expected child_begin[n] = %d values, got %d"
                                       % (begin[n], flat.size))
        errors.check(lib.rv_structs_add_children(self._ptr, n, _ptr(begin), _ptr(flat),
                                                 _ptr(self._data(n, data))))
        return self

    def add_many(self, sizes, child_begin, child, data=None):
        """Several structures from one set of arrays, as a server receives a
        batch, in one call of the library (rv_structs_add_many): structure j
        has ``sizes[j]`` nodes; ``child_begin`` holds each structure's
        ``sizes[j] + 1`` offsets (starting at 0) one structure after the
        other, ``child`` their children (structure-local indices) likewise,
        ``data`` the nodes' rows. Each structure is checked as by
        :meth:`add_children`; all or nothing: on an error none is added
        (the message names the bad one's index in the batch and its node)."""
        if _add_many is None:
            raise errors.ArgumentError("Structs.add_many: the loaded libravel has no "
                                       "rv_structs_add_many")
        args, _alive = _many_args("add_many", sizes, child_begin, child, data)
        st = _add_many(self._ptr, *args)
        if st:
            raise errors.error_for(st)
        return self

    def build_linear(self, sizes, child_begin, child, data=None, out=None):
        """A server's batch in one call of the library
        (rv_structs_build_linear): :meth:`clear`, :meth:`add_many` (the
        same arguments, checks and errors) and :meth:`linearize` into
        ``out`` (a :class:`Linear`, reused as by linearize; a new one when
        None). Returns the Linear. int32 arrays that are C-contiguous and
        writeable are passed as they are, anything else converted as by
        add_many. On an error the batch is empty and ``out`` as it was."""
        lin = out if out is not None else Linear()
        fast = _fastpath.fast
        if fast is not None and fast.build_linear(self._ptr, sizes, child_begin, child, data,
                                                  lin._addr) is None:
            return lin  # ravel._fast took the arrays as they are
        st = None
        try:
            # _many_args' fast path written out (a server's call with data:
            # a function call and a tuple cost a microsecond with the
            # caches cold from the model's run, a tenth of the call)
            if (sizes.dtype is _I32_DTYPE and child_begin.dtype is _I32_DTYPE
                    and child.dtype is _I32_DTYPE and data.dtype is _I32_DTYPE):
                st = _build_linear(self._ptr, sizes.size, _addressof(_from_buffer(sizes)),
                                   _addressof(_from_buffer(child_begin)), child_begin.size,
                                   _addressof(_from_buffer(child)), child.size,
                                   _addressof(_from_buffer(data)), data.size, lin._ref)
        except (AttributeError, TypeError, ValueError):
            pass  # not int32 arrays as they are (or no rv_structs_build_linear)
        if st is None:
            if _build_linear is None:
                raise errors.ArgumentError("Structs.build_linear: the loaded libravel has no "
                                           "rv_structs_build_linear")
            try:
                args, _alive = _many_args("build_linear", sizes, child_begin, child, data)
            except errors.ArgumentError:
                _clear(self._ptr)  # empty on every error, as on the library's
                raise
            st = _build_linear(self._ptr, *args, lin._ref)
        if st:
            raise errors.error_for(st)
        return lin

    def add_parents(self, parent, data=None):
        """A structure given by its parent array: ``parent[i]`` is node i's
        parent, -1 for the root."""
        p = _i32("parent", parent)
        errors.check(lib.rv_structs_add_parents(self._ptr, p.size, _ptr(p),
                                                _ptr(self._data(p.size, data))))
        return self

    def add_sequence(self, n, data=None):
        """A chain of n nodes: node t's child is t-1, the root is n-1."""
        errors.check(lib.rv_structs_add_sequence(self._ptr, n, _ptr(self._data(n, data))))
        return self

    def add_perfect_tree(self, height, data=None):
        """A perfect binary tree of ``height`` (2^(height+1) - 1 nodes) in heap
        order: node i's children are 2i+1 and 2i+2."""
        n = (1 << (height + 1)) - 1 if 0 <= height < 31 else 0
        errors.check(lib.rv_structs_add_perfect_tree(self._ptr, height,
                                                     _ptr(self._data(n, data))))
        return self

    def add_grid(self, w, h, data=None):
        """The w x h grid DAG of DAG-RNN: node (i, j) = i*h + j has the
        children (i-1, j) and (i, j-1) where they exist."""
        n = w * h if w > 0 and h > 0 else 0
        errors.check(lib.rv_structs_add_grid(self._ptr, w, h, _ptr(self._data(n, data))))
        return self

    def add_sexpr(self, text, name="<sexpr>"):
        """A PTB-style s-expression, ``(3 (2 It) (4 (2 's) (3 fine)))``:
        nodes in preorder, data column 0 the word id (-1 for internal
        nodes), column 1 (width >= 2) the label. ``name`` locates errors."""
        errors.check(lib.rv_structs_add_sexpr(self._ptr, name.encode(), text.encode()))
        return self

    def read_sexpr_file(self, path):
        """Every non-blank line of a file as one s-expression."""
        errors.check(lib.rv_structs_read_sexpr_file(self._ptr, os.fsencode(path)))
        return self

    def read_sst(self, directory, split="test"):
        """The Stanford Sentiment Treebank's sentences of one split
        (``"train"``, ``"test"``, ``"dev"`` or ``"all"``) in file order."""
        if split not in SST_SPLITS:
            raise errors.ArgumentError("unknown SST split %r (expected %s)"
                                       % (split, ", ".join(SST_SPLITS)))
        errors.check(lib.rv_structs_read_sst(self._ptr, os.fsencode(directory),
                                             SST_SPLITS[split]))
        return self

    # ---- reading back

    @property
    def num_nodes(self):
        return lib.rv_structs_num_nodes(self._ptr)

    def _index(self, s):
        if not 0 <= s < len(self):
            raise IndexError("structure %d of a batch of %d" % (s, len(self)))

    def node_begin(self, s):
        self._index(s)
        return lib.rv_structs_node_begin(self._ptr, s)

    def size(self, s):
        """Nodes of structure s."""
        self._index(s)
        return lib.rv_structs_size(self._ptr, s)

    def root(self, s):
        self._index(s)
        return lib.rv_structs_root(self._ptr, s)

    def _node(self, s, i):
        if not 0 <= i < self.size(s):
            raise IndexError("node %d of structure %d (%d nodes)" % (i, s, self.size(s)))

    def children(self, s, i):
        """Node i of structure s: its children (structure-local indices)."""
        self._node(s, i)
        p = ctypes.POINTER(ctypes.c_int32)()
        k = lib.rv_structs_children(self._ptr, s, i, ctypes.byref(p))
        return [p[j] for j in range(k)]

    def data(self, s, i):
        """Node i of structure s: its ``width`` integers of data."""
        self._node(s, i)
        p = lib.rv_structs_data(self._ptr, s, i)
        return [p[j] for j in range(self.width)]

    @property
    def vocab_size(self):
        return lib.rv_structs_vocab_size(self._ptr)

    def word(self, i):
        """The word of id i in the batch's vocabulary (readers number words
        in order of first appearance)."""
        w = lib.rv_structs_word(self._ptr, i)
        if w is None:
            raise IndexError("word id %d of a vocabulary of %d" % (i, self.vocab_size))
        return w.decode()

    def linearize(self, out=None):
        """The batch numbered level by level (rv_linearize): a
        :class:`Linear`. ``out`` (a Linear) is reused: its buffers grow only
        when this batch is larger than any before, and arrays read from it
        earlier then show this batch."""
        lin = out if out is not None else Linear()
        st = _linearize(self._ptr, lin._ref)
        if st:
            raise errors.error_for(st)
        return lin


# the functions a server's call runs, looked up once (an attribute of the
# library object is a dictionary lookup and a method call per use)
_add_many = lib.rv_structs_add_many if has("rv_structs_add_many") else None
_build_linear = lib.rv_structs_build_linear if has("rv_structs_build_linear") else None
_clear = lib.rv_structs_clear
_linearize = lib.rv_linearize


class _CLinear(ctypes.Structure):
    """struct rv_linear (include/ravel.h)."""

    _i32p = ctypes.POINTER(ctypes.c_int32)
    _fields_ = [
        ("num_nodes", ctypes.c_int32), ("num_structs", ctypes.c_int32),
        ("max_children", ctypes.c_int32), ("width", ctypes.c_int32),
        ("first_leaf", ctypes.c_int32), ("num_batches", ctypes.c_int32),
        ("batch_begin", _i32p), ("batch_length", _i32p), ("child", _i32p),
        ("nchild", _i32p), ("data", _i32p), ("root", _i32p),
        ("node_of", _i32p), ("linear_of", _i32p),
        ("cap_nodes", ctypes.c_size_t), ("cap_child", ctypes.c_size_t),
        ("cap_data", ctypes.c_size_t), ("cap_batches", ctypes.c_size_t),
        ("cap_structs", ctypes.c_size_t),
        ("num_unroll", ctypes.c_int32), ("unroll_begin", _i32p),
        ("unroll_length", _i32p), ("unroll_node", _i32p), ("scratch", _i32p),
    ]


check_struct("rv_linear", _CLinear)


class Linear:
    """A linearized batch (rv_linear): N nodes of B structures, numbered so
    that each level (dynamic batch) is consecutive, higher levels first,
    leaves last. The arrays are NumPy int32 views of its buffers (valid
    until the Linear is linearized into again):

    ``batch_begin``, ``batch_length`` [num_batches] (batch 0: the leaves),
    ``child`` [N, K] (pads hold the node itself), ``nchild`` [N], ``data``
    [N, width], ``root`` [B], ``node_of`` [N] (linear number -> batch
    node) and ``linear_of`` [N] (its inverse); ``first_leaf``.
    """

    def __init__(self):
        self._c = _CLinear()
        self._ref = ctypes.byref(self._c)  # made once: every call passes it twice
        self._addr = ctypes.addressof(self._c)  # what ravel._fast takes

    def __del__(self):
        if getattr(self, "_c", None) is not None:
            lib.rv_linear_free(ctypes.byref(self._c))
            self._c = None

    def __repr__(self):
        return "<ravel.Linear %d structures, %d nodes, %d batches>" % (
            self.num_structs, self.num_nodes, self.num_batches)

    num_nodes = property(lambda self: self._c.num_nodes)
    num_structs = property(lambda self: self._c.num_structs)
    max_children = property(lambda self: self._c.max_children)
    width = property(lambda self: self._c.width)
    first_leaf = property(lambda self: self._c.first_leaf)
    num_batches = property(lambda self: self._c.num_batches)

    def _view(self, field, shape):
        n = int(np.prod(shape))
        if n == 0:
            return np.zeros(shape, _I32)
        # as a result is viewed (not np.ctypeslib.as_array: a ctypes type
        # per length, made again whenever the GC freed it), keeping the
        # Linear alive
        addr = ctypes.cast(getattr(self._c, field), ctypes.c_void_p).value
        a = _arrays.view_memory(addr, shape, _I32_DTYPE, self)
        a.flags.writeable = False
        return a

    batch_begin = property(lambda self: self._view("batch_begin", (self.num_batches,)))
    batch_length = property(lambda self: self._view("batch_length", (self.num_batches,)))
    child = property(lambda self: self._view("child", (self.num_nodes, self.max_children)))
    nchild = property(lambda self: self._view("nchild", (self.num_nodes,)))
    data = property(lambda self: self._view("data", (self.num_nodes, self.width)))
    root = property(lambda self: self._view("root", (self.num_structs,)))
    node_of = property(lambda self: self._view("node_of", (self.num_nodes,)))
    linear_of = property(lambda self: self._view("linear_of", (self.num_nodes,)))

    def to_batch(self, a):
        """A result over the nodes (first axis, linearized numbering) in the
        batch's numbering: row ``node_begin(s) + i`` is node i of structure s."""
        a = np.asarray(a)
        if a.shape[:1] != (self.num_nodes,):
            raise errors.ArgumentError("to_batch: expected %d rows (one per node), got shape %s"
                                       % (self.num_nodes, a.shape))
        return a[self.linear_of]
