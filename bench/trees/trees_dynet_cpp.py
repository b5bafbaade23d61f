"""bench/trees/trees_dynet_cpp.py — the `dynet_cpp` baseline: DyNet's C++
library with automatic batching (--dynet-autobatch 1), driven through
dynet_cpp/trees_dynet.cc, which builds the same graph as trees_dynet.py op for
op, so this side is DyNet without Python in the loop (issue 13).

The driver is one child process per (model, hidden), kept running: the
weights go to it once as .npy files (trees_ref.save_weights, the format of
make_reference.py), the batches once per workload as an int32 stream, and
then each call is one line on its stdin ("run I"), answered with the graph
and forward times the driver measured around its own work (a fresh
ComputationGraph per call; the pipe round trip is not timed). Python waits
blocked on the reply, so it takes no CPU from the call.

Built by dynet_cpp/setup.sh into bench/trees/.dynet/ (or $TREES_DYNET_CPP:
the driver's path).
"""
import atexit
import os
import shutil
import subprocess
import tempfile

import numpy as np

import trees_ref as tr

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.environ.get("TREES_DYNET_CPP") or os.path.join(HERE, ".dynet", "trees_dynet_cpp")
# the same configuration as trees_dynet.py's dynet_config.set
FLAGS = ["--dynet-mem", "1024,1,2048,1024", "--dynet-autobatch", "1", "--dynet-seed", "1"]


def available():
    """None when the driver is built, else why not (the line to print)."""
    if os.access(DRIVER, os.X_OK):
        return None
    return "no DyNet C++ driver at %s: run sh bench/trees/dynet_cpp/setup.sh" % DRIVER


def batch_stream(batches):
    """The driver's int32 stream of a list of batches (trees_dynet.cc's header)."""
    out = [len(batches)]
    for bt in batches:
        out.append(len(bt))
        for s in bt:
            out += [s.n, len(s.roots)] + list(s.roots)
            for v in range(s.n):
                out += [int(s.word[v]), len(s.children[v])] + list(s.children[v])
    return np.array(out, np.int32)


class CppModel:
    """One model's driver process, its weights loaded. trees_ravel_c.CModel
    drives ravel's C driver the same way: a subclass names its command
    (argv) and reads its reply to "run I" (call)."""

    NAME = "trees_dynet_cpp"

    def __init__(self, model, W):
        self.model = model
        self.H = W["Emb"].shape[1]
        self.dir = tempfile.mkdtemp(prefix=self.NAME + ".")
        wd = tr.save_weights(self.dir, model, self.H, W)
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = subprocess.Popen(self.argv(wd), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True, bufsize=1)
        atexit.register(self.close)  # also when the run stops early (sys.exit)
        self.ready = self._reply("ready")

    def argv(self, weights_dir):
        """The driver's command line."""
        return [DRIVER] + FLAGS + [self.model, str(self.H), weights_dir]

    def _reply(self, expect=None):
        ln = self.proc.stdout.readline()
        if not ln or (expect and not ln.startswith(expect)):
            self.err.seek(0)
            raise RuntimeError("%s (%s) failed: %s%s" % (self.NAME, self.model, ln, self.err.read()[-2000:]))
        return ln

    def _send(self, line, expect=None):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._reply(expect)

    def load(self, batches):
        """Hands the driver the batches later calls name by index."""
        path = os.path.join(self.dir, "batches.i32")
        batch_stream(batches).tofile(path)
        self._send("batches " + path, "ok %d" % len(batches))

    def call(self, i):
        """One call on batch i: {"total", "graph", "forward"} in seconds."""
        g, f = (float(x) for x in self._send("run %d" % i).split())
        return {"total": g + f, "graph": g, "forward": f}

    def states(self, structs):
        """MODELS.md's states of every node of `structs` (for the cross-check)."""
        self.load([structs])
        path = os.path.join(self.dir, "states.f32")
        self._send("dump 0 " + path, "ok")
        v = np.fromfile(path, np.float32)
        N, H = sum(s.n for s in structs), self.H
        out = {"h": v[:N * H].reshape(N, H)}
        if self.model in ("treelstm", "lstm"):
            out["c"] = v[N * H:].reshape(N, H)
        elif self.model == "mvrnn":
            out["A"] = v[N * H:].reshape(N, H, H)
        elif v.size != N * H:
            raise RuntimeError("%s: %d values for %d nodes" % (self.NAME, v.size, N))
        return out

    def close(self):
        """Ends the driver and removes its files (idempotent)."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
        if not self.err.closed:
            self.err.close()
        shutil.rmtree(self.dir, ignore_errors=True)
