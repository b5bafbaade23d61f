#!/usr/bin/env python3
"""bench/trees/bench.py — the recursive-model benchmark (MODELS.md): ravel
(models/*.rv compiled; called from Python, trees_ravel.py, and from C,
trees_ravel_c.py) against PyTorch eager per node,
PyTorch batched level by level by hand and DyNet with autobatching (from
Python, and from C++: trees_dynet_cpp.py). Run it
with the venv of setup.sh (`ravel bench trees [ARGS]` does):

  bench/trees/.venv/bin/python bench/trees/bench.py [--models treelstm,gru]
      [--hidden 256] [--batch 1,10] [--threads 1,2]
      [--baselines pytorch_eager,pytorch_batched,dynet_autobatch,dynet_cpp|none]
      [--ravel compiled,c|compiled|c|interp|none] [--peak PATH]
      [--min-time S] [--max-runs N] [--weights DIR] [--check-only] [--quick]

First the machine's roofline (bench/peak.c's driver, --peak: FP32 FMA peak
and STREAM triad bandwidth from DRAM and from L3, per thread count), one
line {"bench": "peak", ...} per probe. Then per (model, hidden), a cross-check on the fixed small
batch (trees_data.small_batch): every baseline and ravel against the
float64 NumPy oracle, one line {"bench": "trees_check", ...,
"max_abs_err": {...}}; a side off by more than 1e-4 stops the run. Then
one line per (model, hidden, batch, threads, side):

  {"bench": "trees", "config": {"model", "hidden", "batch", "threads",
   "workload", "nodes_per_batch"}, "baseline", "median_ms", "min_ms",
   "max_ms", "runs", "ravel_ms" (the median of ravel called from Python in
   the same run, null without that side), "ratio" (median_ms / ravel_ms:
   how many times faster ravel is), "ravel_c_ms" and "ratio_c" (the same
   for ravel called from C, null without that side), "loadavg" (1-minute,
   after the line),
   "gflops" (median over the calls of the call's batch's matrix FLOPs,
   trees_ref.flops, over its time), "peak_frac" (gflops over the FP32 peak
   of that many threads),
   + pytorch_batched: "linearize_ms" (host-side level numbering, not in median_ms)
   + dynet_autobatch, dynet_cpp: "graph_ms", "forward_ms" (medians of the
     two parts; median_ms is the median of their per-call sum)
   + ravel ("baseline": "ravel": from Python; "ravel_c": from C, the
     same call timed inside trees_ravel_c.c): "build_ms", "linearize_ms", "run_ms"
     (medians of the parts of a call: adding the batch's structures, checked;
     rv_linearize; binding and the kernels; from Python the first two are
     one call of the library, rv_structs_build_linear, in build_ms with
     linearize_ms 0; median_ms is the median of
     their per-call sum), "linearize_frac" (build + linearize over the
     total, medians), "compile_s", "bound_ms" (roofline.py's bound of the
     median batch) and "bound_frac" (median over the calls of the call's
     batch's bound over its time: the fraction of the roofline reached)}

dynet_cpp needs the driver dynet_cpp/setup.sh builds; without it the
baseline is left out (trees_env's "dynet_cpp" is null, stderr says why).
Likewise ravel_c (--ravel's "c": the driver `make bench-build` makes,
trees_ravel_c.py; trees_env's "ravel_c" is its path or null). --ravel
names the ravel sides: "compiled" (from Python) or "interp" (the
interpreter from Python: checks the harness; slow), and "c" (compiled,
from C); "compiled,c" by default; "none" for neither.

A model whose program does not compile yet prints {"bench": "trees_ravel",
"model", "hidden", "error"} and runs without ravel.

The baselines of one (model, hidden, batch, threads) are timed together,
their calls interleaved (time_sides: bench/timing.c's method), so load from
other processes hits all of them alike: compare ratios within a run. A
baseline's j-th call takes batch j of the workload (cycling), so a line's
median is over different batches of the split, the same sequence for every
baseline. Warm-up: 3 calls per baseline, not counted, the last two
estimating its cost; runs: --min-time seconds' worth, at least 10, at most
--max-runs.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))
# bench/torch_bench.py's environment fix-up (GOMP_SPINCOUNT=1000: without it
# libgomp's idle workers spin ~16 ms after every parallel op, and per-node
# ops with 2 threads on this shared 2-core machine wait out whole scheduler
# slices: TreeFC eager 3 ms -> 43 ms) re-executes this script once on import.
import torch_bench  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import roofline  # noqa: E402
import trees_data as td  # noqa: E402
import trees_ref as tr  # noqa: E402
import trees_torch as tt  # noqa: E402
import trees_ravel as trv  # noqa: E402

BASELINES = ["pytorch_eager", "pytorch_batched", "dynet_autobatch", "dynet_cpp"]
WORKLOAD = {"treefc": "perfect-h7", "dagrnn": "grid-10x10", "lstm": "sst-test-seq", "gru": "sst-test-seq"}
TOL = 1e-4


def time_sides(fns, n_items, min_time, max_runs, warmup=3):
    """bench/timing.c's method, in Python: fns[k](i) runs side k on item i (mod
    n_items) and returns its named parts in seconds ("total" at least). Each side
    is warmed up (warmup calls; the last ones estimate its cost, which sets its
    run count: min_time worth, >= 10, <= max_runs); then the calls are
    interleaved, the next one always going to the side that has done the
    smallest fraction of its runs, so load from other processes hits all sides
    alike. Side k's j-th timed call takes item j (mod n_items): every side sees
    the same sequence of batches. Returns one list of results per side."""
    runs = []
    for fn in fns:
        est = min([fn(i % n_items)["total"] for i in range(warmup)][1:] or [0])
        runs.append(max(10, min(max_runs, int(min_time / est) if est > 0 else max_runs)))
    res = [[] for _ in fns]
    while True:
        k = min(range(len(fns)), key=lambda k: len(res[k]) / runs[k])
        if len(res[k]) >= runs[k]:
            return res
        res[k].append(fns[k](len(res[k]) % n_items))


def med_ms(xs):
    return round(statistics.median(xs) * 1e3, 4)


def cross_check(model, H, W, P, dm, cm, baselines, rm, rc=None):
    sb = td.small_batch(model)
    ref = tr.reference(model, W, sb)
    got = {}
    if rm is not None:
        got["ravel"] = rm.states(sb)
    if "pytorch_eager" in baselines:
        got["pytorch_eager"] = {k: v.numpy() for k, v in tt.eager_stack(tt.eager(model, P, sb), sb).items()}
    if "pytorch_batched" in baselines:
        lin = tt.Linearized(sb)
        got["pytorch_batched"] = {k: v.numpy() for k, v in lin.unpermute(tt.batched(model, P, lin)).items()}
    if dm is not None:
        import trees_dynet
        outs, f = dm.graph(sb)
        trees_dynet.forward(f)
        got["dynet_autobatch"] = trees_dynet.stack(outs, sb)
    if cm is not None:
        got["dynet_cpp"] = cm.states(sb)
    if rc is not None:
        got["ravel_c"] = rc.states(sb)
    err = {b: max(float(np.abs(g[k] - ref[k]).max()) for k in ref) for b, g in got.items()}
    names = list(got)
    pair = {"%s~%s" % (a, b): max(float(np.abs(got[a][k] - got[b][k]).max()) for k in ref)
            for i, a in enumerate(names) for b in names[i + 1:]}
    print(json.dumps({"bench": "trees_check", "model": model, "hidden": H,
                      "nodes": int(sum(s.n for s in sb)), "max_abs_err": err, "pairwise": pair}), flush=True)
    bad = {b: e for b, e in err.items() if not e <= TOL}
    if bad:
        sys.exit("bench.py: %s H=%d disagrees with the reference: %s" % (model, H, bad))


def build_peak(path):
    """Makes bench/peak.c's driver where it is missing, when `path` is the
    <BUILD>/bench/peak of a build directory of this tree (it needs no
    library, only a C compiler: seconds); elsewhere the caller says how."""
    import subprocess
    rel = os.path.relpath(os.path.abspath(path), trv.REPO)
    parts = rel.split(os.sep)
    if rel.startswith("..") or len(parts) < 3 or parts[-2:] != ["bench", "peak"]:
        return
    print("bench.py: making %s for the roofline" % rel, file=sys.stderr, flush=True)
    subprocess.run(["make", "-C", trv.REPO, "BUILD=" + os.path.join(*parts[:-2]), rel],
                   stdout=sys.stderr, check=False)


def measure_peak(path, threads):
    """bench/peak.c's lines for these thread counts: {threads: (gflops, gb_s,
    gb_s in L3)}, each the best over the thread counts up to it (a shared
    machine's noise only ever subtracts); {} without the driver."""
    import subprocess
    if path and not os.access(path, os.X_OK):
        build_peak(path)
    if not path or not os.access(path, os.X_OK):
        print("bench.py: no peak driver at %s (make %s): no roofline" % (path, path or "build/bench/peak"),
              file=sys.stderr)
        return {}
    lines = subprocess.run([path, "--quick", "--threads", ",".join(map(str, threads))], check=True,
                           capture_output=True, text=True).stdout.splitlines()
    kinds = {"fma": {}, "triad": {}, "triad_l3": {}}
    for ln in lines:
        print(ln, flush=True)
        d = json.loads(ln)
        kinds[d["kind"]][d["threads"]] = d.get("gflops") or d.get("gb_s")

    def best(kind, t):  # None where an older driver has no such probe
        return max((v for k, v in kinds[kind].items() if k <= t), default=None)
    return {t: (best("fma", t), best("triad", t), best("triad_l3", t))
            for t in threads if t in kinds["fma"] and t in kinds["triad"]}


def cache_bytes(index, default):
    """The size of cpu0's cache `index` (sysfs: 2 is L2, 3 is L3), default if unknown."""
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index%d/size" % index) as f:
            v = f.read().strip()
        return int(v[:-1]) * {"K": 1 << 10, "M": 1 << 20}[v[-1]] if v[-1] in "KM" else int(v)
    except (OSError, ValueError, KeyError):
        return default


def l2_bytes():
    """One core's L2, 1 MiB if unknown."""
    return cache_bytes(2, 1 << 20)


def ravel_model(model, H, W, threads, mode, rc=None):
    """trees_ravel's model (rc: trees_ravel_c's module, for that side's),
    or None (with a line saying why) where it does not compile."""
    if mode == "none":
        return None
    try:
        return rc.CModel(model, W, threads) if rc else trv.RavelModel(model, H, W, threads, mode)
    except (trv.ravel.Error, RuntimeError) as e:
        print(json.dumps({"bench": "trees_ravel", "side": "ravel_c" if rc else "ravel", "model": model,
                          "hidden": H, "threads": threads, "error": str(e)}), flush=True)
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(tr.MODELS))
    ap.add_argument("--hidden", default="", help="hidden sizes (default: both of each model)")
    ap.add_argument("--batch", default="1,10")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--baselines", default=",".join(BASELINES))
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--max-runs", type=int, default=2000)
    ap.add_argument("--weights", default="", help="load weights from DIR/<model>_h<H>/ (default: draw seed 0)")
    ap.add_argument("--split", default="test")
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--quick", action="store_true", help="min-time 0.1, max 20 runs")
    ap.add_argument("--ravel", default="compiled,c",
                    help="ravel's sides, comma-separated: compiled (programs called from Python) or "
                         "interp (the interpreter: checks the harness; slow), and c (programs called "
                         "from C: trees_ravel_c); or none")
    ap.add_argument("--peak", default=os.environ.get("RAVEL_PEAK", os.path.join(
        os.environ.get("RAVEL_BENCH_DIR") or os.path.join(trv.REPO, "build", "bench"), "peak")),
        help="bench/peak.c's driver (default: build/bench/peak)")
    a = ap.parse_args()
    if a.quick:
        a.min_time, a.max_runs = 0.1, 20
    baselines = [] if a.baselines == "none" else a.baselines.split(",")  # none: ravel alone
    for b in baselines:
        if b not in BASELINES:
            sys.exit("bench.py: unknown baseline " + b)
    sides = [] if a.ravel == "none" else a.ravel.split(",")
    if any(x not in ("compiled", "interp", "c") for x in sides) or ("compiled" in sides and "interp" in sides):
        sys.exit("bench.py: --ravel takes compiled or interp, and c (comma-separated), or none")
    a.ravel = "compiled" if "compiled" in sides else "interp" if "interp" in sides else "none"
    trc = None
    if "c" in sides:
        import trees_ravel_c as trc
        why = trc.available()
        if why:
            print("bench.py: %s; the ravel_c side is left out" % why, file=sys.stderr, flush=True)
            trc = None
    dyn = None
    if "dynet_autobatch" in baselines:
        import trees_dynet as dyn
    dcpp, cm = None, None
    if "dynet_cpp" in baselines:
        import trees_dynet_cpp as dcpp
        why = dcpp.available()
        if why:
            print("bench.py: %s; the dynet_cpp baseline is left out" % why, file=sys.stderr, flush=True)
            dcpp = None
    print(json.dumps({"bench": "trees_env", "torch": torch.__version__, "numpy": np.__version__,
                      "dynet": "dynet38" if dyn else None,
                      "dynet_cpp": dcpp.DRIVER if dcpp else None, "ravel": trv.ravel.version,
                      "libravel": trv.ravel.library_path, "ravel_side": a.ravel,
                      "ravel_c": trc.DRIVER if trc else None, "cpus": os.cpu_count(),
                      "loadavg": os.getloadavg(), "min_time": a.min_time, "max_runs": a.max_runs}), flush=True)
    threads = [int(t) for t in a.threads.split(",")]
    peak = {} if a.check_only else measure_peak(a.peak, threads)
    l2, l3 = l2_bytes(), cache_bytes(3, 8 << 20)
    rcs = {}
    for model in a.models.split(","):
        hs = [int(h) for h in a.hidden.split(",")] if a.hidden else tr.HIDDEN[model]
        for H in hs:
            W = tr.load_weights(a.weights, model, H) if a.weights else tr.weights(model, H)
            P = tt.torch_params(model, W)
            dm = dyn.DyModel(model, W) if dyn else None
            if cm is not None:
                cm.close()
            cm = dcpp.CppModel(model, W) if dcpp else None
            for c in rcs.values():
                if c is not None:
                    c.close()
            # ravel_c's drivers, one per thread count, made when first needed
            rcs = {1: ravel_model(model, H, W, 1, "compiled", trc)} if trc else {}
            torch.set_num_threads(1)
            cross_check(model, H, W, P, dm, cm, baselines, ravel_model(model, H, W, 1, a.ravel), rcs.get(1))
            if a.check_only:
                continue
            for B in [int(b) for b in a.batch.split(",")]:
                batches = td.workload(model, B, split=a.split)
                t0 = time.perf_counter()
                lins = [tt.Linearized(bt) for bt in batches]
                preps = [trv.Prepared(bt) for bt in batches]
                lin_ms = round((time.perf_counter() - t0) / len(batches) * 1e3, 4)
                cfg0 = {"model": model, "hidden": H, "batch": B, "workload": WORKLOAD.get(model, "sst-" + a.split),
                        "nodes_per_batch": round(sum(s.n for bt in batches for s in bt) / len(batches), 2)}
                fl = [tr.flops(model, H, bt) for bt in batches]
                if cm is not None:
                    cm.load(batches)
                for T in threads:
                    torch_bench.set_threads(T)
                    fns = {}
                    rm = ravel_model(model, H, W, T, a.ravel)
                    if rm is not None:
                        fns["ravel"] = lambda i: rm.call(preps[i])[1]
                    if trc and T not in rcs:
                        rcs[T] = ravel_model(model, H, W, T, "compiled", trc)
                    rc = rcs.get(T)
                    if rc is not None:
                        rc.load(batches)
                        fns["ravel_c"] = rc.call
                    if "pytorch_eager" in baselines:
                        def eager_call(i):
                            t = time.perf_counter()
                            tt.eager(model, P, batches[i])
                            return {"total": time.perf_counter() - t}
                        fns["pytorch_eager"] = eager_call
                    if "pytorch_batched" in baselines:
                        def batched_call(i):
                            t = time.perf_counter()
                            tt.batched(model, P, lins[i])
                            return {"total": time.perf_counter() - t}
                        fns["pytorch_batched"] = batched_call
                    if dm is not None:
                        def dynet_call(i):
                            t = time.perf_counter()
                            _, f = dm.graph(batches[i])
                            t1 = time.perf_counter()
                            dyn.forward(f)
                            t2 = time.perf_counter()
                            return {"total": t2 - t, "graph": t1 - t, "forward": t2 - t1}
                        fns["dynet_autobatch"] = dynet_call
                    if cm is not None:
                        fns["dynet_cpp"] = cm.call
                    allres = time_sides(list(fns.values()), len(batches), a.min_time, a.max_runs)
                    meds = {b: med_ms([r["total"] for r in res]) for b, res in zip(fns, allres)}
                    rv_ms, rvc_ms = meds.get("ravel"), meds.get("ravel_c")
                    pk = peak.get(T)
                    for b, res in zip(fns, allres):
                        tot = [r["total"] for r in res]
                        line = {"bench": "trees", "config": dict(cfg0, threads=T), "baseline": b,
                                "median_ms": med_ms(tot), "min_ms": round(min(tot) * 1e3, 4),
                                "max_ms": round(max(tot) * 1e3, 4), "runs": len(res),
                                "ravel_ms": rv_ms, "ratio": round(med_ms(tot) / rv_ms, 3) if rv_ms and b != "ravel" else None,
                                "ravel_c_ms": rvc_ms,
                                "ratio_c": round(med_ms(tot) / rvc_ms, 3) if rvc_ms and b != "ravel_c" else None,
                                "loadavg": round(os.getloadavg()[0], 2)}
                        # GFLOP/s of each call's own batch, median over the calls
                        line["gflops"] = round(statistics.median(
                            fl[j % len(batches)] / r["total"] * 1e-9 for j, r in enumerate(res)), 3)
                        line["peak_frac"] = round(line["gflops"] / pk[0], 4) if pk else None
                        if b in ("ravel", "ravel_c"):
                            for part in ("build", "linearize", "run"):
                                line[part + "_ms"] = med_ms([r[part] for r in res])
                            line["linearize_frac"] = round(
                                (line["build_ms"] + line["linearize_ms"]) / line["median_ms"], 4)
                            line["compile_s"] = round((rm if b == "ravel" else rc).compile_s, 3)
                            if pk:
                                bounds = [roofline.bound_ms(model, H, bt, T, pk[0], pk[1], l2, pk[2], l3) for bt in batches]
                                line["bound_ms"] = round(statistics.median(bounds), 4)
                                line["bound_frac"] = round(statistics.median(
                                    bounds[j % len(batches)] / (r["total"] * 1e3) for j, r in enumerate(res)), 4)
                        if b == "pytorch_batched":
                            line["linearize_ms"] = lin_ms
                        if b in ("dynet_autobatch", "dynet_cpp"):
                            line["graph_ms"] = med_ms([r["graph"] for r in res])
                            line["forward_ms"] = med_ms([r["forward"] for r in res])
                        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
