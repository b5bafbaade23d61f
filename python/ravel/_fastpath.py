"""The compiled hot path (ravel._fast, python/ravel/_fast.c), when present.

A recursive model's call from a server is two calls of the library
(rv_structs_build_linear, rv_program_run_linear) and NumPy views of the
outputs; through ctypes their Python side costs as much as a small
model's kernels. ravel._fast makes the same two calls from C. It is
optional: ``pip install ./python`` builds it where a C compiler and
Python's headers are found, ``make`` builds it into ``build/pyext/`` for
the source tree, and without it the package uses ctypes for everything
(silently: the results and errors are the same, only slower).
``ravel.fast_path`` is the file loaded, or None.

Looked for: installed with the package (``ravel._fast``), then
``pyext/`` next to the loaded libravel (a build tree:
``build/libravel.so.0`` -> ``build/pyext/``), then the build tree of the
source checkout the package is imported from. ``RAVEL_PYTHON_EXT=0``
turns it off. A module compiled against another version of
include/ravel.h (its structs' sizes differ from the library's) is not
used, with a warning.
"""

import ctypes
import importlib.machinery
import importlib.util
import os
import warnings

import numpy as np

from . import errors
from ._lib import has, lib, library_path

__all__ = ["fast", "path"]


def _find():
    """The ravel._fast module and its file, or (None, None)."""
    try:
        from . import _fast  # installed with the package
        return _fast, _fast.__file__
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [os.path.join(here, os.pardir, os.pardir, "build", "pyext")]
    if os.sep in library_path:
        dirs.insert(0, os.path.join(os.path.dirname(os.path.abspath(library_path)), "pyext"))
    for d in dirs:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(d, "_fast" + suffix)
            if not os.path.exists(path):
                continue
            spec = importlib.util.spec_from_file_location("ravel._fast", path)
            try:
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
            except ImportError:
                continue  # built for another Python
            return mod, path
    return None, None


def _load():
    if os.environ.get("RAVEL_PYTHON_EXT", "1") == "0":
        return None, None
    if not all(has(f) for f in ("rv_structs_build_linear", "rv_program_run_linear",
                                "rv_struct_size")):
        return None, None  # an older library: the ctypes path says what it lacks
    mod, path = _find()
    if mod is None:
        return None, None
    for name in ("rv_linear", "rv_array_info"):
        if mod.struct_size(name) != lib.rv_struct_size(name.encode()):
            warnings.warn("ravel: %s was compiled against another include/ravel.h than %s "
                          "(%s differs); using ctypes instead (rebuild it: make, or pip "
                          "install ./python)" % (path, library_path, name), RuntimeWarning)
            return None, None
    if not hasattr(mod, "Pool"):
        warnings.warn("ravel: %s is of an older ravel package (no Pool); using ctypes "
                      "instead (rebuild it: make, or pip install ./python)" % path,
                      RuntimeWarning)
        return None, None
    addr = ctypes.cast  # the library's functions as addresses, for C to call
    mod.setup(addr(lib.rv_structs_build_linear, ctypes.c_void_p).value,
              addr(lib.rv_program_run_linear, ctypes.c_void_p).value,
              errors.error_for, np.asarray)
    return mod, path


fast, path = _load()
"""ravel._fast set up over the loaded library, or None (the ctypes path).
Read at each call, so a test may set it to None to take the ctypes path."""
