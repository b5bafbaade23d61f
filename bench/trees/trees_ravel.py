"""bench/trees/trees_ravel.py — ravel's side of the trees benchmark: the
model's program (models/<model>_h<H>.rv) compiled once, then per call what a
server does with a request: build the batch's structures (ravel.Structs,
every structure checked) and linearize them, in one call of the library
(Structs.build_linear: timed as "build", "linearize" 0), bind the
linearized batch, run. The weights are bound once (Program.bind), as a
server binds them: the packs the program keeps of its params are made at
the first call. Each part is timed; the call's time
is their sum. Outputs stay in the linearized numbering (MODELS.md: the
permutation back is not part of a call).

Uses the Python package of this source tree (python/ravel) over
build/libravel.so.0 (or $RAVEL_LIBRARY), and its compiled call path
ravel._fast from build/pyext/ where `make` built it ($RAVEL_PYTHON_EXT=0:
ctypes only; bench/README.md, "ravel from Python: the call path").
"""
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
import ravel  # noqa: E402

# the output names of each model's program -> MODELS.md's states
STATES = {"treelstm": {"h": "h", "C": "c"}, "lstm": {"h": "h", "C": "c"}, "mvrnn": {"h": "h", "A": "A"}}


def model_path(model, H):
    return os.path.join(REPO, "models", "%s_h%d.rv" % (model, H))


def structure_name(model):
    return "S" if model in ("lstm", "gru") else "T"


class Prepared:
    """A batch's structures as the int32 arrays Structs.add_many takes (each
    structure's compressed children rows, concatenated): what a request
    arrives as (made untimed, like the baselines' inputs)."""

    def __init__(self, structs):
        self.kind = structs[0].kind
        self.sizes = np.array([s.n for s in structs], np.int32)
        self.begin = np.concatenate([np.cumsum([0] + [len(c) for c in s.children]) for s in structs]
                                    ).astype(np.int32)
        self.child = np.array([c for s in structs for cs in s.children for c in cs], np.int32)
        self.word = np.concatenate([s.word for s in structs]).astype(np.int32)


class RavelModel:
    """One model compiled for one thread count (mode "compiled"), or the
    interpreter (mode "interp": checks the harness, far too slow to time)."""

    def __init__(self, model, H, W, threads, mode="compiled"):
        self.model, self.H, self.mode = model, H, mode
        self.module = ravel.load(model_path(model, H))
        t = time.perf_counter()
        self.prog = self.module.compile(threads=threads) if mode == "compiled" else None
        self.compile_s = time.perf_counter() - t
        # weights in ravel's layout (64-byte aligned) once, so binding borrows them
        self.W = {}
        for k, v in W.items():
            a = ravel.empty(v.shape, np.float32)
            a[...] = v
            self.W[k] = a
        # the weights bound once (Program.bind): the packs the program keeps
        # of its params are made at the first call, not on every call
        self.bound = self.prog.bind(self.W) if self.prog else None
        self.structs = {}  # kind -> the Structs its batches are built in, reused
        self.lin = ravel.Linear()
        self.structure = structure_name(model)

    def call(self, prep):
        """One call on a Prepared batch: the outputs (linearized numbering) and
        the times in seconds of build, linearize, run (bind + kernels) and total."""
        t0 = time.perf_counter()
        bs = self.structs.get(prep.kind)
        if bs is None:
            bs = self.structs[prep.kind] = ravel.Structs(prep.kind, 1 if prep.kind == "sequence" else 2, 1)
        # clear, add the request's structures (checked) and linearize: one
        # call of the library (rv_structs_build_linear), so "build" is both
        # and "linearize" 0 (from C they are timed apart: trees_ravel_c.c)
        lin = bs.build_linear(prep.sizes, prep.begin, prep.child, prep.word, out=self.lin)
        t1 = t2 = time.perf_counter()
        args = {self.structure: lin}
        out = self.bound(args) if self.bound else self.module.run_interp(args, **self.W)
        t3 = time.perf_counter()
        return out, {"total": t3 - t0, "build": t1 - t0, "linearize": t2 - t1, "run": t3 - t2}

    def states(self, structs):
        """MODELS.md's states of every node of `structs` in the batch's
        numbering (for the cross-check against the oracle)."""
        out, _ = self.call(Prepared(structs))
        return {STATES.get(self.model, {"h": "h"})[k]: self.lin.to_batch(v) for k, v in out.items()}
