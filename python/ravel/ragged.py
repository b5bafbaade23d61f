"""Ragged tensors: flat values plus the row starts of each ragged level.

ravel exchanges a ragged tensor (``A : f32[b < B, l < len[b]]``) as a 1-D
array of its elements in canonical order: lexicographic over the valid
index tuples, without padding (docs/ir.md, "Ragged layouts and storage").
:class:`Ragged` keeps exactly that array (``values``, a view of the
result, not a copy) together with the layout, level by level as ravel
evaluated it: a level whose extent is the same everywhere has that extent,
a ragged level has CSR row starts (``starts(k)``), like the nested row
splits of other frameworks' ragged tensors.

Indexing the outermost dimension gives a row: a NumPy *view* of the
values, shaped, when every level inside the row is uniform (``A[b]`` of
the tensor above is a 1-D array of ``len[b]`` elements; a row of
``S : f32[b < B, h < 8, i < len[b], j < len[b]]`` is an ``8 x len[b] x
len[b]`` array), or else a list of its own rows, recursively.

As an input, a program takes a :class:`Ragged`, its 1-D ``values``, or a
list of rows (arrays or nested lists, flattened and concatenated in order:
a copy), since a row is always a contiguous run of the values.
"""

import numpy as np

__all__ = ["Ragged"]


class Layout:
    """A snapshot of an rv_layout: per level, a uniform extent or row starts."""

    __slots__ = ("dims", "counts", "extents", "_starts")

    def __init__(self, dims, counts, extents, starts):
        self.dims = tuple(dims)          # dimension names
        self.counts = tuple(counts)      # valid prefixes per level; counts[ndim] = numel
        self.extents = tuple(extents)    # uniform extent, or -1 for a ragged level
        self._starts = tuple(starts)     # int64 arrays of counts[k] + 1 entries, or None

    @property
    def ndim(self):
        return len(self.dims)

    @property
    def ragged(self):
        return any(s is not None for s in self._starts)

    def start(self, k, r):
        """Where prefix r (of length k) starts among the prefixes of length k + 1."""
        s = self._starts[k]
        return int(s[r]) if s is not None else r * self.extents[k]

    def span(self, k, lo, hi):
        """The elements under prefixes lo..hi-1 of length k: [first, end)."""
        for j in range(k, self.ndim):
            lo, hi = self.start(j, lo), self.start(j, hi)
        return lo, hi

    def uniform_shape(self, k, lo, hi):
        """The dense shape of the subtrees under prefixes lo..hi-1 of length
        k, when every level inside them has one extent; else None."""
        shape = []
        for j in range(k, self.ndim):
            s = self._starts[j]
            if s is None:
                e = self.extents[j]
            elif hi == lo:
                e = 0
            else:
                ext = np.diff(s[lo:hi + 1])
                e = int(ext[0])
                if (ext != e).any():
                    return None
            shape.append(e)
            lo, hi = self.start(j, lo), self.start(j, hi)
        return tuple(shape)


class Ragged:
    """A ragged tensor: its flat ``values`` in canonical order and its layout.

    ``len(r)`` is the extent of the outermost dimension, ``r[i]`` row i (a
    NumPy view when the row is dense, else a list of its rows), iteration
    goes over the rows, ``r.starts(k)`` are the row starts of level k (None
    for a uniform level), ``r.shape`` has the uniform extents and None at
    ragged levels, and ``r.tolist()`` is the rows as nested lists.
    """

    def __init__(self, values, layout):
        self.values = values
        self.layout = layout
        if layout.counts[-1] != values.shape[0]:
            raise ValueError("Ragged: %d values for a layout of %d elements"
                             % (values.shape[0], layout.counts[-1]))

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def ndim(self):
        return self.layout.ndim

    @property
    def dims(self):
        """The dimensions' names, outermost first."""
        return self.layout.dims

    @property
    def shape(self):
        return tuple(e if e >= 0 else None for e in self.layout.extents)

    def starts(self, k):
        """Level k's row starts: prefix r's children are the prefixes
        starts[r] .. starts[r+1]-1 one level deeper (None when uniform)."""
        return self.layout._starts[k]

    def _subtree(self, k, r):
        lay = self.layout
        shape = lay.uniform_shape(k, r, r + 1)
        if shape is not None:
            lo, hi = lay.span(k, r, r + 1)
            return self.values[lo:hi].reshape(shape)
        first, end = lay.start(k, r), lay.start(k, r + 1)
        return [self._subtree(k + 1, c) for c in range(first, end)]

    def __len__(self):
        return self.layout.extents[0]

    def __getitem__(self, i):
        n = len(self)
        if not isinstance(i, (int, np.integer)):
            raise TypeError("Ragged indices are integers (row numbers)")
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("row %d out of range for %d rows" % (i, n))
        return self._subtree(1, int(i)) if self.ndim > 1 else self.values[i]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def tolist(self):
        """The rows as nested Python lists."""
        return _tolist(list(self))

    def __repr__(self):
        dims = ", ".join("%s < %s" % (d, "*" if e < 0 else e)
                         for d, e in zip(self.layout.dims, self.layout.extents))
        return "Ragged(%s[%s], %d values)" % (self.values.dtype, dims, self.values.shape[0])


def _tolist(x):
    return x.tolist() if isinstance(x, np.ndarray) else [_tolist(y) for y in x]


def flatten_rows(rows, dtype):
    """The values of a ragged input given as a list of rows: each row
    flattened in C order, concatenated (rows are contiguous runs)."""
    parts = []

    def walk(x):
        if isinstance(x, (list, tuple)) and (not x or not np.isscalar(x[0])):
            for y in x:
                walk(y)
        else:
            parts.append(np.ravel(np.asarray(x, dtype=dtype)))

    walk(rows)
    return np.concatenate(parts) if parts else np.empty(0, dtype)
