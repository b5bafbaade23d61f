"""bench/trees/trees_ravel_c.py — the `ravel_c` side of the trees benchmark:
ravel through its C API, as a server written in C calls it, with no Python
in the loop (issue 13). trees_ravel_c.c compiles models/<model>_h<H>.rv,
binds the weights once (the .npy files of trees_ref.save_weights) and per
call builds the batch's structures (rv_structs_add_many), linearizes them
(rv_linearize), binds the linearized batch and runs, timing each part
itself: the same call as trees_ravel.py's, the same driver protocol as
trees_dynet_cpp.py's (whose CppModel this extends: weights once, batches
once as batch_stream's int32 stream, then "run I" per call; Python waits
blocked on the reply, so it takes no CPU from the call).

The driver is $TREES_RAVEL_C, else trees_ravel_c in $RAVEL_BENCH_DIR (what
`ravel bench trees` sets: the bench drivers of its build), else
build/bench/; `make bench-build` (or `make build/bench/trees_ravel_c`)
makes it.
"""
import os

import trees_dynet_cpp as tdc
import trees_ravel as trv

DRIVER = os.environ.get("TREES_RAVEL_C") or os.path.join(
    os.environ.get("RAVEL_BENCH_DIR") or os.path.join(trv.REPO, "build", "bench"), "trees_ravel_c")


def available():
    """None when the driver is built, else why not (the line to print)."""
    if os.access(DRIVER, os.X_OK):
        return None
    return "no ravel C driver at %s: run make bench-build" % DRIVER


class CModel(tdc.CppModel):
    """One model compiled for one thread count in its driver process."""

    NAME = "trees_ravel_c"

    def __init__(self, model, W, threads):
        self.threads = threads
        super().__init__(model, W)
        self.compile_s = float(self.ready.split()[1])

    def argv(self, weights_dir):
        # the program's outputs in MODELS.md's order: h, then c or A (dump's layout)
        states = ",".join(trv.STATES.get(self.model, {"h": "h"}))
        return [DRIVER, "--threads", str(self.threads), "--states", states, trv.model_path(self.model, self.H),
                trv.structure_name(self.model), weights_dir]

    def call(self, i):
        """One call on batch i: {"total", "build", "linearize", "run"} in seconds."""
        b, lz, r = (float(x) for x in self._send("run %d" % i).split())
        return {"total": b + lz + r, "build": b, "linearize": lz, "run": r}
