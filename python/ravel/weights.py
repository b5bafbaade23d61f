"""Weights files (safetensors, .npz) read through libravel."""

import ctypes
import os

from . import _arrays, errors
from ._lib import lib

__all__ = ["load_weights"]


def load_weights(path):
    """Every tensor of the safetensors or .npz file at ``path``, by name,
    as NumPy arrays (F16/BF16 widened to float32). The arrays own ravel's
    memory (no copy). Corrupt or truncated files raise
    :class:`ravel.FileError` naming the file and the tensor.
    """
    w = ctypes.c_void_p()
    errors.check(lib.rv_weights_open(os.fsencode(path), ctypes.byref(w)))
    try:
        out = {}
        for i in range(lib.rv_weights_count(w)):
            name = lib.rv_weights_name(w, i)
            a = ctypes.c_void_p()
            errors.check(lib.rv_weights_load(w, name, ctypes.byref(a)))
            out[name.decode()] = _arrays.take_array(a.value)
        return out
    finally:
        lib.rv_weights_close(w)
