"""bench/trees/bench_pycall.py — where a recursive model's call from Python
spends its time: trees_ravel.py's call sequence (Structs.build_linear, then
the Bound called with the structure only), TreeRNN H256 by default, batch 1,
cycling the SST test trees, each part timed alone in process CPU time
(time.process_time: what this process ran, not what the load took).

    bench_pycall.py [--repo DIR] [--model treernn] [--hidden 256] [--batch 1]
                    [--calls 3000] [--rounds 3]

--repo: the source tree whose python/ravel, build/libravel.so.0 and
build/pyext/ are used (default: this one), so two trees' call paths can be
timed in alternating runs (bench/README.md, "ravel from Python: the call
path"). Prints one JSON line per round, microseconds per call:

  call     trees_ravel.RavelModel.call (the harness, with its timers)
  both     build_linear + the Bound's call, no timers
  build    Structs.build_linear alone
  bound    the Bound's call alone (batches linearized beforehand)
  raw      ravel._fast.run_linear on one bindings object, no pool (absent
           without ravel._fast); bound - raw is the pool's cost
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--model", default="treernn")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    repo = os.path.abspath(a.repo)
    os.environ.setdefault("RAVEL_LIBRARY", os.path.join(repo, "build", "libravel.so.0"))
    sys.path.insert(0, os.path.join(repo, "python"))
    import ravel  # the chosen tree's package, before trees_ravel inserts this one's
    sys.path.insert(1, HERE)
    import numpy as np
    import trees_data as td
    import trees_ravel as trv
    import trees_ref as tr
    from ravel import _fastpath

    W = tr.weights(a.model, a.hidden)
    rm = trv.RavelModel(a.model, a.hidden, W, 1)
    preps = [trv.Prepared(b) for b in td.workload(a.model, a.batch)]
    bs = ravel.Structs(preps[0].kind, 2, 1)
    lins = []
    for p in preps:
        lins.append(bs.build_linear(p.sizes, p.begin, p.child, p.word, out=ravel.Linear()))
    name, bound, n = rm.structure, rm.bound, a.calls
    fast = _fastpath.fast

    def per_call(fn):
        fn(min(n, 300))  # warm
        t = time.process_time()
        fn(n)
        return round((time.process_time() - t) / n * 1e6, 3)

    def call(k):
        for i in range(k):
            rm.call(preps[i % len(preps)])

    def both(k):
        lin = rm.lin
        for i in range(k):
            p = preps[i % len(preps)]
            bs.build_linear(p.sizes, p.begin, p.child, p.word, out=lin)
            bound({name: lin})

    def build(k):
        lin = rm.lin
        for i in range(k):
            p = preps[i % len(preps)]
            bs.build_linear(p.sizes, p.begin, p.child, p.word, out=lin)

    def bound_only(k):
        for i in range(k):
            bound({name: lins[i % len(lins)]})

    parts = {"call": call, "both": both, "build": build, "bound": bound_only}
    if fast is not None and hasattr(fast, "run_linear"):
        from ravel._bindings import Bindings
        from ravel._lib import lib
        b = Bindings(rm.module)
        b.inherited = bound._base
        ravel.errors.check(lib.rv_bindings_inherit(b.ptr, bound._base.ptr))
        prog, base, specs = rm.prog._ptr, bound._base.ptr, rm.module._results

        def raw(k):
            for i in range(k):
                fast.run_linear(prog, b.ptr, base, name, lins[i % len(lins)]._addr, specs, b,
                                b._ragged)

        parts["raw"] = raw
    for r in range(a.rounds):
        out = {"repo": repo, "round": r, "fast": ravel.fast_path is not None,
               "loadavg": round(os.getloadavg()[0], 2)}
        out.update({k: per_call(fn) for k, fn in parts.items()})
        print(json.dumps(out), flush=True)
    np.asarray(0)


if __name__ == "__main__":
    main()
