"""Weights from safetensors and .npz files, by name."""

import json
import struct

import numpy as np
import pytest

import ravel

SRC = "size T in 1..16\ninput X : f32[T, 4]\ninput W : f32[2, 4]\ninput b : f32[2]\n" \
      "Y[i, j] = sum(k < 4) X[i, k] * W[j, k] + b[j]\n"


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    codes = {np.float32: "F32", np.float64: "F64", np.int32: "I32", np.int64: "I64"}
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": codes[a.dtype.type], "shape": list(a.shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


@pytest.fixture()
def tensors():
    rng = np.random.default_rng(1)
    return {"W": rng.standard_normal((2, 4)).astype(np.float32),
            "b": rng.standard_normal(2).astype(np.float32),
            "unused": np.arange(3, dtype=np.int64)}


@pytest.fixture(params=["safetensors", "npz"])
def weights_file(request, tmp_path, tensors):
    if request.param == "npz":
        path = tmp_path / "w.npz"
        np.savez(path, **tensors)
    else:
        path = tmp_path / "w.safetensors"
        write_safetensors(path, tensors)
    return path


def test_load_weights(weights_file, tensors):
    got = ravel.load_weights(weights_file)
    assert set(got) == set(tensors)
    for name, a in tensors.items():
        np.testing.assert_array_equal(got[name], a)
        assert got[name].dtype == a.dtype


def test_call_with_weights(weights_file, tensors):
    m = ravel.parse(SRC)
    x = np.ones((3, 4), np.float32)
    want = x @ tensors["W"].T + tensors["b"]
    for run in (m.compile(), m.run_interp):
        y = run(X=x, T=3, weights=str(weights_file))["Y"]
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    # keyword arguments override the file's tensors
    y = m.run_interp(X=x, T=3, weights=weights_file, b=np.zeros(2, np.float32))["Y"]
    np.testing.assert_allclose(y, x @ tensors["W"].T, rtol=1e-5, atol=1e-5)
    # a dict of arrays works the same
    y = m.run_interp(X=x, T=3, weights=ravel.load_weights(weights_file))["Y"]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_missing_tensor(tmp_path, tensors):
    path = tmp_path / "w.npz"
    np.savez(path, W=tensors["W"])
    with pytest.raises(ravel.ArgumentError, match="input b is not bound"):
        ravel.parse(SRC).run_interp(X=np.ones((1, 4), np.float32), T=1, weights=path)


def test_wrong_dtype(tmp_path, tensors):
    path = tmp_path / "w.safetensors"
    write_safetensors(path, dict(tensors, W=tensors["W"].astype(np.float64)))
    with pytest.raises(ravel.ShapeError, match="W"):
        ravel.parse(SRC).run_interp(X=np.ones((1, 4), np.float32), T=1, weights=path)


def test_corrupt_and_truncated(tmp_path, weights_file):
    raw = weights_file.read_bytes()
    cut = tmp_path / ("cut" + weights_file.suffix)
    cut.write_bytes(raw[: len(raw) - 5])
    bad = tmp_path / ("bad" + weights_file.suffix)
    bad.write_bytes(b"\xff" * 64)
    for path in (cut, bad, tmp_path / "none.npz"):
        with pytest.raises(ravel.FileError) as e:
            ravel.load_weights(path)
        assert path.name in str(e.value)
