"""Finding libravel and declaring the C functions the package calls.

The package is pure Python over the shared library (ctypes), so this is
the one place that knows the C signatures of include/ravel.h. The library
is looked for, in order:

1. ``$RAVEL_LIBRARY`` (a path to ``libravel.so``), when set;
2. next to the package (a copy installed with it) and in the build tree of
   a source checkout the package is used from (``build/libravel.so.0``);
3. the system's library path (``ctypes.util.find_library("ravel")``, then
   ``libravel.so.0``, the SONAME ``make install`` puts in ``$PREFIX/lib``).
"""

import ctypes
import ctypes.util
import os

__all__ = ["has", "lib", "library_path"]

SONAME = "libravel.so.0"

c_i64 = ctypes.c_int64
c_i64_p = ctypes.POINTER(ctypes.c_int64)
c_i32 = ctypes.c_int32
c_i32_p = ctypes.POINTER(ctypes.c_int32)
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_int = ctypes.c_int
c_size_t = ctypes.c_size_t


class CompileOptions(ctypes.Structure):
    """rv_compile_options."""

    _fields_ = [
        ("cc", c_char_p),
        ("cflags", c_char_p),
        ("cache_dir", c_char_p),
        ("serial", c_int),
        ("target", c_int),
        ("threads", c_int),
    ]


class ProgramCounters(ctypes.Structure):
    """rv_program_counters."""

    _fields_ = [
        ("runs", c_i64),
        ("kernel_calls", c_i64),
        ("compile_seconds", ctypes.c_double),
        ("cc_seconds", ctypes.c_double),
        ("prelude_seconds", ctypes.c_double),
        ("kernel_seconds", ctypes.c_double),
        ("prelude_runs", c_i64),
        ("aux_bytes", c_i64),
        ("pack_fills", c_i64),
    ]


class ArrayInfo(ctypes.Structure):
    """rv_array_info."""

    _fields_ = [
        ("data", c_void_p),
        ("shape", c_i64 * 8),  # RV_MAX_DIMS
        ("dtype", c_int),
        ("ndim", c_int),
    ]


def _candidates():
    env = os.environ.get("RAVEL_LIBRARY")
    if env:
        # an explicit choice is the only one: a wrong path is an error, not
        # a reason to pick some other library silently
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, SONAME)]
    # a source checkout: python/ravel/ -> ../../build/
    found.append(os.path.join(here, os.pardir, os.pardir, "build", SONAME))
    system = ctypes.util.find_library("ravel")
    if system:
        found.append(system)
    found.append(SONAME)
    return found, False


def _load():
    names, explicit = _candidates()
    errors = []
    for name in names:
        if os.sep in name and not os.path.exists(name) and not explicit:
            continue
        try:
            return ctypes.CDLL(name), name
        except OSError as e:
            errors.append("%s: %s" % (name, e))
    hint = (
        "RAVEL_LIBRARY=%s could not be loaded" % names[0]
        if explicit
        else "libravel was not found"
    )
    raise ImportError(
        "ravel: %s. Build it (`make` in the ravel source tree builds "
        "build/libravel.so), install it (`make install`), or point "
        "RAVEL_LIBRARY at libravel.so.\n  tried: %s" % (hint, "\n  tried: ".join(errors) or names)
    )


lib, library_path = _load()

# (name, result type, argument types) for every function the package calls
_PROTOTYPES = [
    ("rv_version", c_char_p, []),
    ("rv_last_error", c_char_p, []),
    ("rv_status_name", c_char_p, [c_int]),
    ("rv_free", None, [c_void_p]),
    # arrays
    ("rv_array_new", c_void_p, [c_int, c_int, c_i64_p]),
    ("rv_array_free", None, [c_void_p]),
    ("rv_array_dtype", c_int, [c_void_p]),
    ("rv_array_ndim", c_int, [c_void_p]),
    ("rv_array_shape", c_i64_p, [c_void_p]),
    ("rv_array_numel", c_i64, [c_void_p]),
    ("rv_array_data", c_void_p, [c_void_p]),
    ("rv_array_wrap", c_int, [c_int, c_int, c_i64_p, c_void_p, ctypes.POINTER(c_void_p)]),
    ("rv_array_from_dlpack", c_int, [c_void_p, ctypes.POINTER(c_void_p)]),
    ("rv_array_to_dlpack", c_void_p, [c_void_p]),
    # weights
    ("rv_weights_open", c_int, [c_char_p, ctypes.POINTER(c_void_p)]),
    ("rv_weights_close", None, [c_void_p]),
    ("rv_weights_count", c_int, [c_void_p]),
    ("rv_weights_name", c_char_p, [c_void_p, c_int]),
    ("rv_weights_load", c_int, [c_void_p, c_char_p, ctypes.POINTER(c_void_p)]),
    # modules
    ("rv_module_free", None, [c_void_p]),
    ("rv_module_load", c_int, [c_char_p, ctypes.POINTER(c_void_p)]),
    ("rv_module_parse", c_int, [c_char_p, c_char_p, ctypes.POINTER(c_void_p)]),
    ("rv_module_print", c_void_p, [c_void_p]),
    ("rv_module_schedule", c_int, [c_void_p, c_char_p, c_char_p]),
    ("rv_module_check_schedule", c_int, [c_void_p]),
    ("rv_module_num_tensors", c_int, [c_void_p]),
    ("rv_module_tensor_at", c_void_p, [c_void_p, c_int]),
    ("rv_tensor_name", c_char_p, [c_void_p]),
    ("rv_tensor_dtype", c_int, [c_void_p]),
    ("rv_tensor_ndim", c_int, [c_void_p]),
    ("rv_tensor_is_input", c_int, [c_void_p]),
    ("rv_tensor_is_output", c_int, [c_void_p, c_void_p]),
    ("rv_module_num_sizes", c_int, [c_void_p]),
    ("rv_module_size_at", c_void_p, [c_void_p, c_int]),
    ("rv_size_name", c_char_p, [c_void_p]),
    ("rv_module_num_ufuns", c_int, [c_void_p]),
    ("rv_module_ufun_at", c_void_p, [c_void_p, c_int]),
    ("rv_ufun_name", c_char_p, [c_void_p]),
    # bindings and the interpreter
    ("rv_bindings_new", c_void_p, [c_void_p]),
    ("rv_bindings_free", None, [c_void_p]),
    ("rv_bindings_set_size", c_int, [c_void_p, c_char_p, c_i64]),
    ("rv_bindings_set_array", c_int, [c_void_p, c_char_p, c_void_p]),
    ("rv_bindings_get_size", c_i64, [c_void_p, c_char_p]),
    ("rv_bindings_get_array", c_void_p, [c_void_p, c_char_p]),
    ("rv_bindings_randomize", c_int, [c_void_p, ctypes.c_uint64]),
    ("rv_bindings_load_weights", c_int, [c_void_p, c_char_p]),
    ("rv_bindings_layout", c_int, [c_void_p, c_char_p, ctypes.POINTER(c_void_p)]),
    ("rv_layout_ndim", c_int, [c_void_p]),
    ("rv_layout_dim_name", c_char_p, [c_void_p, c_int]),
    ("rv_layout_count", c_i64, [c_void_p, c_int]),
    ("rv_layout_extent", c_i64, [c_void_p, c_int]),
    ("rv_layout_starts", c_i64_p, [c_void_p, c_int]),
    ("rv_layout_free", None, [c_void_p]),
    ("rv_interp_run", c_int, [c_void_p, c_void_p]),
    # programs
    ("rv_program_compile", c_int, [c_void_p, ctypes.POINTER(CompileOptions), ctypes.POINTER(c_void_p)]),
    ("rv_program_run", c_int, [c_void_p, c_void_p]),
    ("rv_program_run_into", c_int, [c_void_p, c_void_p, ctypes.POINTER(c_void_p), c_int]),
    ("rv_program_source", c_char_p, [c_void_p]),
    ("rv_program_emit", c_int, [c_void_p, ctypes.POINTER(c_void_p)]),
    ("rv_program_free", None, [c_void_p]),
    ("rv_program_stats", None, [c_void_p, ctypes.POINTER(ProgramCounters)]),
    # recursive structures (python/ravel/structs.py)
    ("rv_module_structure", c_void_p, [c_void_p, c_char_p]),
    ("rv_bindings_set_linear", c_int, [c_void_p, c_char_p, c_void_p]),
    ("rv_structs_new", c_void_p, [c_int, c_int, c_int]),
    ("rv_structs_free", None, [c_void_p]),
    ("rv_structs_clear", None, [c_void_p]),
    ("rv_structs_count", c_int, [c_void_p]),
    ("rv_structs_num_nodes", c_i32, [c_void_p]),
    ("rv_structs_node_begin", c_i32, [c_void_p, c_int]),
    ("rv_structs_size", c_i32, [c_void_p, c_int]),
    ("rv_structs_children", c_int, [c_void_p, c_int, c_i32, ctypes.POINTER(c_i32_p)]),
    ("rv_structs_data", c_i32_p, [c_void_p, c_int, c_i32]),
    ("rv_structs_root", c_i32, [c_void_p, c_int]),
    # int32_t * arguments as addresses (c_void_p): NumPy's, without a ctypes object
    ("rv_structs_add_children", c_int, [c_void_p, c_i32, c_void_p, c_void_p, c_void_p]),
    ("rv_structs_add_parents", c_int, [c_void_p, c_i32, c_void_p, c_void_p]),
    ("rv_structs_add_sequence", c_int, [c_void_p, c_i32, c_void_p]),
    ("rv_structs_add_perfect_tree", c_int, [c_void_p, c_int, c_void_p]),
    ("rv_structs_add_grid", c_int, [c_void_p, c_int, c_int, c_void_p]),
    ("rv_structs_vocab_size", c_i32, [c_void_p]),
    ("rv_structs_word", c_char_p, [c_void_p, c_i32]),
    ("rv_structs_add_sexpr", c_int, [c_void_p, c_char_p, c_char_p]),
    ("rv_structs_read_sexpr_file", c_int, [c_void_p, c_char_p]),
    ("rv_structs_read_sst", c_int, [c_void_p, c_char_p, c_int]),
    ("rv_linearize", c_int, [c_void_p, c_void_p]),
    ("rv_linear_free", None, [c_void_p]),
]

# functions of newer libraries, used when the loaded one has them
_OPTIONAL = [
    ("rv_bindings_infer_sizes", c_int, [c_void_p]),
    ("rv_bindings_inherit", c_int, [c_void_p, c_void_p]),
    ("rv_program_invalidate", None, [c_void_p]),
    ("rv_struct_size", c_size_t, [c_char_p]),
    ("rv_bindings_reset", c_int, [c_void_p, c_void_p]),
    ("rv_structs_add_many", c_int, [c_void_p, c_int, c_void_p, c_void_p, c_i64, c_void_p,
                                    c_i64, c_void_p, c_i64]),
    ("rv_structs_build_linear", c_int, [c_void_p, c_int, c_void_p, c_void_p, c_i64, c_void_p,
                                        c_i64, c_void_p, c_i64, c_void_p]),
    # the rv_array_info * as an address: a byref costs as much again per call
    ("rv_bindings_get_info", c_int, [c_void_p, c_char_p, c_void_p]),
    # the rv_linear * and the rv_array_info array as addresses, likewise
    ("rv_program_run_linear", c_int, [c_void_p, c_void_p, c_void_p, c_char_p, c_void_p, c_void_p,
                                      c_int]),
]

for _name, _res, _args in _PROTOTYPES:
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

_present = set()
for _name, _res, _args in _OPTIONAL:
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        continue
    _f.restype = _res
    _f.argtypes = _args
    _present.add(_name)


def check_struct(name, mirror):
    """Raise ImportError unless ctypes struct ``mirror`` has the size of the
    loaded library's struct ``name`` (rv_struct_size): a field added on one
    side only would make the library write past the Python object. A
    library older than rv_struct_size is not checked."""
    if "rv_struct_size" not in _present:
        return
    size = lib.rv_struct_size(name.encode())
    if size != ctypes.sizeof(mirror):
        raise ImportError(
            "ravel: %s is %d bytes in %s but %d in the Python package's "
            "declaration (%s): the package and the library are from different "
            "versions, or the declaration was not updated with include/ravel.h"
            % (name, size, library_path, ctypes.sizeof(mirror), mirror.__qualname__)
        )


def has(name):
    """Whether the loaded library has optional function ``name``."""
    return name in _present


check_struct("rv_compile_options", CompileOptions)
check_struct("rv_program_counters", ProgramCounters)
if has("rv_bindings_get_info"):
    check_struct("rv_array_info", ArrayInfo)
