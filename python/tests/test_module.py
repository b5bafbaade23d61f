"""Loading and parsing: modules, their arguments, and located errors."""

import ctypes

import pytest

import ravel


def test_parse_and_introspect():
    m = ravel.parse("size T in 1..8\ninput X : f32[T, 4]\nY[i, j] = X[i, j] + 1\n")
    assert m.sizes == ["T"]
    assert m.ufuns == []
    assert list(m.inputs) == ["X"] and m.inputs["X"].ndim == 2
    assert m.inputs["X"].dtype.name == "float32"
    assert list(m.outputs) == ["Y"]
    again = ravel.parse(str(m))
    assert str(again) == str(m)


def test_load_example(repo):
    m = ravel.load(repo / "examples" / "embedding.rv")
    assert "Emb" in m.inputs or m.ufuns


def test_syntax_error_is_located():
    with pytest.raises(ravel.ParseError) as e:
        ravel.parse("size T in 1..8\ninput X : f32[T\n", name="bad.rv")
    err = e.value
    assert err.file == "bad.rv" and err.line in (2, 3)
    assert str(err).startswith("bad.rv:%d:%d: " % (err.line, err.col))
    assert err.status == "RV_ERR_SYNTAX"
    assert isinstance(err, ravel.Error) and isinstance(err, SyntaxError)
    assert (err.filename, err.lineno, err.offset) == (err.file, err.line, err.col)


def test_type_error_is_located():
    with pytest.raises(ravel.TypeCheckError) as e:
        ravel.parse("size T in 1..8\ninput X : f32[T]\nY[i] = X[i] + Z[i]\n", name="t.rv")
    assert (e.value.file, e.value.line) == ("t.rv", 3)
    assert "Z" in str(e.value)


def test_missing_file():
    with pytest.raises(ravel.FileError) as e:
        ravel.load("/nonexistent/m.rv")
    assert "/nonexistent/m.rv" in str(e.value)
    assert isinstance(e.value, OSError)


def test_schedule_error_is_located():
    m = ravel.parse("size N in 1..64\ninput X : f32[N]\nY[i] = X[i]\n"
                    "schedule Y { a, b = split(k, 4) }\n", name="s.rv")
    with pytest.raises(ravel.ScheduleError) as e:
        m.check_schedule()
    assert e.value.file == "s.rv" and e.value.line == 4


def test_emit_and_source():
    m = ravel.parse("size N in 1..64\ninput X : f32[N]\nY[i] = 2 * X[i]\n")
    assert "kernel_Y" in m.emit()
    assert "kernel_Y" in m.compile().source


def test_compiler_error(tmp_path):
    m = ravel.parse("size N in 1..64\ninput X : f32[N]\nY[i] = 3 * X[i]\n")
    with pytest.raises(ravel.CompilerError) as e:
        m.compile(cc="false", cache_dir=str(tmp_path))  # a fresh cache: the compiler runs
    assert isinstance(e.value, RuntimeError) and e.value.status == "RV_ERR_COMPILER"


def test_cuda_without_a_driver_is_unsupported():
    m = ravel.parse("size N in 1..64\ninput X : f32[N]\nY[i] = X[i]\n"
                    "schedule Y { bind(i, \"threadIdx.x\") }\n")
    try:
        m.compile(target="cuda")
    except ravel.UnsupportedError as e:
        assert isinstance(e, NotImplementedError)
    else:
        pytest.skip("this machine has a CUDA driver and device")
    with pytest.raises(ravel.ArgumentError, match="unknown target"):
        m.compile(target="tpu")


def run_python(code, **env):
    import os
    import subprocess
    import sys
    full = dict(os.environ)
    full.pop("RAVEL_LIBRARY", None)
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True)


def test_library_not_found():
    r = run_python("import ravel", RAVEL_LIBRARY="/nonexistent/libravel.so.0")
    assert r.returncode != 0 and "ImportError" in r.stderr
    assert "RAVEL_LIBRARY=/nonexistent/libravel.so.0 could not be loaded" in r.stderr


def test_library_of_the_source_tree():
    from conftest import REPO
    lib = REPO / "build" / "libravel.so.0"
    if not lib.exists() or "libasan" in __import__("os").environ.get("LD_PRELOAD", ""):
        pytest.skip("no plain build/ in this tree")
    r = run_python("import ravel; print(ravel.library_path)", PYTHONPATH=str(REPO / "python"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("build/libravel.so.0")


def test_struct_mirrors_match_the_library():
    # the import already checked them; a test says so where it can fail
    import importlib

    from ravel.structs import _CLinear

    _lib = importlib.import_module("ravel._lib")
    assert _lib.has("rv_struct_size")
    for name, mirror in [
        ("rv_compile_options", _lib.CompileOptions),
        ("rv_program_counters", _lib.ProgramCounters),
        ("rv_linear", _CLinear),
    ]:
        assert _lib.lib.rv_struct_size(name.encode()) == ctypes.sizeof(mirror), name
    assert _lib.lib.rv_struct_size(b"rv_no_such_struct") == 0
    # a declaration that lost (or never gained) a field is refused by name
    class Short(ctypes.Structure):
        _fields_ = [("runs", ctypes.c_int64)]

    with pytest.raises(ImportError, match="rv_program_counters is .* bytes"):
        _lib.check_struct("rv_program_counters", Short)
