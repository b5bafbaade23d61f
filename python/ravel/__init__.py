"""ravel: a compiler and runtime for dynamic neural networks, from Python.

    >>> import ravel, numpy as np
    >>> m = ravel.parse("size N in 1..64\\ninput X : f32[N]\\nY[i] = 2 * X[i]")
    >>> prog = m.compile()
    >>> prog(X=np.arange(4, dtype=np.float32), N=4)["Y"]
    array([0., 2., 4., 6.], dtype=float32)

See python/README.md for the tutorial. The package is Python over libravel
(ctypes), with an optional compiled module for a recursive model's call
(ravel._fast); ``ravel.library_path`` says which library it loaded,
``ravel.fast_path`` which ravel._fast (None: ctypes only).
"""

from ._arrays import aligned_empty as empty
from ._fastpath import path as fast_path
from ._lib import library_path, lib as _lib
from .aot import Library, load_library
from .errors import (ArgumentError, BoundsError, CompilerError, Error, FileError,
                     OutOfMemoryError, ParseError, ScheduleError, ShapeError, TypeCheckError,
                     UnsupportedError)
from .module import Bound, Module, Program, TensorInfo, load, parse
from .ragged import Ragged
from .structs import Linear, Structs
from .weights import load_weights

__version__ = "0.1.0"
version = _lib.rv_version().decode()
"""The version of the libravel loaded (``__version__`` is the package's)."""

__all__ = [
    "ArgumentError", "Bound", "BoundsError", "CompilerError", "Error", "FileError", "Library",
    "Linear", "Module", "OutOfMemoryError", "ParseError", "Program", "Ragged", "ScheduleError",
    "ShapeError", "Structs", "TensorInfo", "TypeCheckError", "UnsupportedError", "empty",
    "fast_path", "library_path", "load", "load_library", "load_weights", "parse", "version",
]
