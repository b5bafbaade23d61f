"""The ravel_c side of `ravel bench trees` (bench/trees/trees_ravel_c.c,
driven by trees_ravel_c.py): its states on bench.py's cross-check batch
against the float64 oracle (bench.py's tolerance), for a binary tree
model, a model with two states and a sequence model; and its refusals of
bad input (a missing, mis-typed or mis-shaped weight, a bad batch stream,
a structure the library refuses, an unknown batch), each exit status 1
with a message, never a crash.

The driver is built here (make $BUILD/bench/trees_ravel_c: seconds; the
bench drivers are not part of `make test`), with the build's sanitizers.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import BUILD, REPO, SST_DIR

TREES = REPO / "bench" / "trees"
TOL = 1e-4  # bench.py's

if not SST_DIR:
    pytest.skip("no SST data (the models' vocabulary; set RAVEL_SST_DIR)", allow_module_level=True)
os.environ.setdefault("SST_DIR", SST_DIR)
sys.path.insert(0, str(TREES))
import trees_data as td  # noqa: E402
import trees_dynet_cpp as tdc  # noqa: E402
import trees_ravel_c as trc  # noqa: E402
import trees_ref as tr  # noqa: E402


@pytest.fixture(scope="module")
def driver():
    path = BUILD / "bench" / "trees_ravel_c"
    make = subprocess.run(["make", "-C", str(REPO), "BUILD=" + os.path.relpath(BUILD, REPO),
                           "SAN=" + os.environ.get("SAN", "0"), str(path.relative_to(REPO))],
                          capture_output=True, text=True)
    assert make.returncode == 0, make.stdout + make.stderr
    trc.DRIVER = str(path)
    return str(path)


@pytest.mark.parametrize("model", ["treernn", "treelstm", "lstm"])
def test_states_match_the_oracle(driver, model):
    H = tr.HIDDEN[model][0]
    W = tr.weights(model, H)
    cm = trc.CModel(model, W, 1)
    try:
        sb = td.small_batch(model)
        ref = tr.reference(model, W, sb)
        got = cm.states(sb)
        assert set(got) == set(ref)
        for k in ref:
            assert np.abs(got[k] - ref[k]).max() <= TOL, k
        t = cm.call(0)  # the check's batch is loaded: one timed call
        assert t["total"] > 0 and min(t["build"], t["linearize"], t["run"]) >= 0
    finally:
        cm.close()


def weights_dir(tmp_path, **change):
    """treernn H=256's weights (Emb) as .npy files, with `change` applied
    (name -> array, or None to leave the file out)."""
    W = dict(tr.weights("treernn", 256), **change)
    for k, v in W.items():
        if v is not None:
            np.save(tmp_path / (k + ".npy"), v)
    return str(tmp_path)


def drive(driver, wd, commands):
    return subprocess.run([driver, str(REPO / "models" / "treernn_h256.rv"), "T", wd],
                          input=commands, capture_output=True, text=True, timeout=120)


def refused(p, *words):
    """The driver stopped with status 1 and a message with `words`."""
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert p.stderr.startswith("trees_ravel_c: "), p.stderr
    for w in words:
        assert w in p.stderr, p.stderr


def test_missing_weight(driver, tmp_path):
    refused(drive(driver, weights_dir(tmp_path, Emb=None), ""), "weight Emb", "Emb.npy")


def test_weight_of_another_dtype_or_rank(driver, tmp_path):
    V = len(td.vocabulary())
    refused(drive(driver, weights_dir(tmp_path, Emb=np.zeros((V, 256))), ""), "weight Emb", "f64", "f32")
    refused(drive(driver, weights_dir(tmp_path, Emb=np.zeros(V * 256, np.float32)), ""),
            "weight Emb", "1 dimensions", "declares 2")


def test_weight_of_another_shape(driver, tmp_path):
    """Extents are checked by the first run, which names the input."""
    V = len(td.vocabulary())
    stream = tmp_path / "b.i32"
    tdc.batch_stream([td.small_batch("treernn")]).tofile(stream)
    p = drive(driver, weights_dir(tmp_path, Emb=np.zeros((V, 128), np.float32)),
              "batches %s\nrun 0\n" % stream)
    refused(p, "Emb")
    assert p.stdout.startswith("ready ") and "ok 1" in p.stdout


def test_bad_batches(driver, tmp_path):
    wd = weights_dir(tmp_path)
    good = tdc.batch_stream([td.small_batch("treernn")])
    path = tmp_path / "b.i32"
    good[:-3].tofile(path)
    refused(drive(driver, wd, "batches %s\n" % path), "truncated")
    np.concatenate([good, [7]]).astype(np.int32).tofile(path)
    refused(drive(driver, wd, "batches %s\n" % path), "trailing data")
    # one structure, a leaf and a node whose child is itself (a cycle): the
    # library refuses it when the call builds the batch
    np.array([1, 1, 2, 1, 1, 5, 0, -1, 1, 1], np.int32).tofile(path)
    refused(drive(driver, wd, "batches %s\nrun 0\n" % path), "rv_structs_add_many")
    good.tofile(path)
    refused(drive(driver, wd, "batches %s\nrun 3\n" % path), "no batch 3")
    refused(drive(driver, wd, "jump 0\n"), "unknown command")
