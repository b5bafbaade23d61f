"""bench/trees/summarize.py — a bench.py run as a Markdown table, one row
per (model, hidden, batch, threads): each baseline's median (and min) in ms,
DyNet's graph/forward split, the time ravel must reach on that row for the
issue-13 targets (5x DyNet, 2x hand-batched PyTorch: target_ms = min(dynet
/ 5, batched / 2)) and, where ravel ran, its median, the share of building
and linearizing the batch in it, its fraction of the FP32 peak and of the
roofline bound (bench/trees/roofline.py), and the ratios ravel vs DyNet
autobatch, vs DyNet autobatch from C++ (dynet_cpp, where it ran), vs
PyTorch batched and vs PyTorch eager (how many times faster ravel is) with
their geometric means, and the targets' verdicts.

ravel has two sides (bench.py's --ravel): called from Python ("ravel",
trees_ravel.py) and from C ("ravel_c", trees_ravel_c.c; its own column).
Each ratio pairs sides called from the same language: ×DyNet C++ uses
ravel from C (marked "py" where only ravel from Python ran); ×DyNet,
×batched and ×eager, whose baselines are Python, use ravel from Python
(ravel from C where only it ran, marked "C"). Stdlib only.

Several files (e.g. a --threads 1 run and a --threads 2 run) make one
table. Where rows have more than one thread count, it also prints the
geomeans against each baseline's best thread count (a baseline slower
with more threads, as PyTorch's small operators are on few cores, is
compared at the count it does best with; ravel at every count).

  python3 bench/trees/summarize.py [bench/trees/out/results-full.jsonl ...]
"""
import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    paths = sys.argv[1:] or [os.path.join(HERE, "out", "results-full.jsonl")]
    rows, order, skipped = {}, [], []
    for path in paths:
        with open(path) as f:
            for ln in f:
                d = json.loads(ln)
                if d.get("bench") == "trees_ravel":
                    skipped.append(d)
                if d.get("bench") != "trees":
                    continue
                c = d["config"]
                key = (c["model"], c["hidden"], c["batch"], c["threads"])
                if key not in rows:
                    rows[key] = {"nodes": c["nodes_per_batch"]}
                    order.append(key)
                rows[key][d["baseline"]] = d
    fmt = lambda x: "%.3g" % x if x is not None else "–"  # noqa: E731
    pct = lambda x: "%.0f%%" % (100 * x) if x is not None else "–"  # noqa: E731
    print("| model | H | B | thr | nodes | PyTorch eager | PyTorch batched [lin.] | DyNet autobatch "
          "(graph + fwd) | DyNet C++ (graph + fwd) | target ms | ravel ms [build+lin.] | peak | bound "
          "| ravel C ms [build+lin.] | ×DyNet | ×DyNet C++ | ×batched | ×eager |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = {"dynet_autobatch": [], "dynet_cpp": [], "pytorch_batched": [], "pytorch_eager": []}
    lin_frac_b10, lin_c_b10, roof = [], [], []
    for k in order:
        r = rows[k]
        e, b, y, yc, rp, rcs = (r.get(n) for n in ("pytorch_eager", "pytorch_batched", "dynet_autobatch",
                                                   "dynet_cpp", "ravel", "ravel_c"))
        rv = rp or rcs  # the Python baselines' pairing (and the targets' columns)
        cell = lambda d: "%s (min %s)" % (fmt(d["median_ms"]), fmt(d["min_ms"])) if d else "–"  # noqa: E731
        bc = cell(b) + (" [%s]" % fmt(b["linearize_ms"]) if b else "")
        dyn = lambda d: cell(d) + (" = %s + %s" % (fmt(d["graph_ms"]), fmt(d["forward_ms"])) if d else "")  # noqa: E731
        tg = [x for x in (y and y["median_ms"] / 5, b and b["median_ms"] / 2) if x]
        rc = "–"
        side = lambda d: cell(d) + " [%s]" % pct(d.get("linearize_frac")) if d else "–"  # noqa: E731
        if rv:
            rc = side(rp)
            if k[2] == 10:
                lin_frac_b10.append(rv.get("linearize_frac"))
                if rcs and rcs.get("linearize_ms") is not None:  # the linearizer alone, timed in C
                    lin_c_b10.append((rcs["linearize_ms"] / rcs["median_ms"], rcs.get("linearize_frac")))
            if (k[0], k[1], k[2]) == ("treelstm", 512, 10):
                roof.append((k[3], rv))
        x = {n: (d["median_ms"] / rv["median_ms"] if rv and d else None)
             for n, d in (("dynet_autobatch", y), ("pytorch_batched", b), ("pytorch_eager", e))}
        rcpp = rcs or rp
        x["dynet_cpp"] = yc["median_ms"] / rcpp["median_ms"] if rcpp and yc else None
        for n, v in x.items():
            ratios[n].append(v)
        mark = lambda v, m: fmt(v) + (" " + m if m and v is not None else "")  # noqa: E731
        py = "C" if rv is rcs else ""
        print("| %s | %d | %d | %d | %g | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            k[0], k[1], k[2], k[3], r["nodes"], cell(e), bc, dyn(y), dyn(yc), fmt(min(tg) if tg else None), rc,
            pct(rv and rv.get("peak_frac")), pct(rv and rv.get("bound_frac")), side(rcs),
            mark(x["dynet_autobatch"], py), mark(x["dynet_cpp"], "" if rcpp is rcs else "py"),
            mark(x["pytorch_batched"], py), mark(x["pytorch_eager"], py)))
    g = {n: geomean(v) for n, v in ratios.items()}
    print("\ngeomean of ravel's speedup over models × sizes × batch sizes × threads: "
          "×DyNet autobatch %s (target ≥ 5; from C++: %s), ×PyTorch batched %s (target ≥ 2), "
          "×PyTorch eager %s (ravel from Python against the Python baselines, from C against DyNet "
          "C++)" % (fmt(g["dynet_autobatch"]), fmt(g["dynet_cpp"]), fmt(g["pytorch_batched"]),
                    fmt(g["pytorch_eager"])))
    best_thread_counts(rows, order, fmt)
    pc = geomean([rows[k]["ravel"]["median_ms"] / rows[k]["ravel_c"]["median_ms"] for k in order
                  if "ravel" in rows[k] and "ravel_c" in rows[k]])
    if pc:
        print("ravel from C is %s× ravel from Python (geomean of the rows with both)" % fmt(pc))
    if lin_c_b10:
        print("linearizing alone at batch 10 (ravel from C, median linearize over median call): at most %s "
              "of a call (target < 5%%); with building the structures (their checks): at most %s"
              % (pct(max(v for v, _ in lin_c_b10)), pct(max((w for _, w in lin_c_b10 if w is not None),
                                                            default=None))))
    if lin_frac_b10:
        worst = max(v for v in lin_frac_b10 if v is not None)
        print("building + linearizing at batch 10, from Python: at most %s of a call" % pct(worst))
    for T, rv in roof:
        print("TreeLSTM H=512 batch 10, %d thread(s): %s ms, roofline bound %s ms: %s of the bound "
              "(target ≥ 60%%), %s of FP32 peak" % (T, fmt(rv["median_ms"]), fmt(rv.get("bound_ms")),
                                                   pct(rv.get("bound_frac")), pct(rv.get("peak_frac"))))
    for d in skipped:
        print("%s did not run %s H=%d (%d threads): %s" % (
            "ravel from C" if d.get("side") == "ravel_c" else "ravel", d["model"], d["hidden"],
            d.get("threads", 0), d["error"]))


def best_thread_counts(rows, order, fmt):
    """The geomeans against each baseline at its best thread count, where
    the rows have several (ravel's pairing as in the table's ratios)."""
    if len({k[3] for k in order}) < 2:
        return
    best = {}
    for k in order:
        for n, d in rows[k].items():
            if isinstance(d, dict) and "median_ms" in d:
                w = best.setdefault(k[:3], {})
                w[n] = min(w.get(n, d["median_ms"]), d["median_ms"])
    ratios = {"dynet_autobatch": [], "dynet_cpp": [], "pytorch_batched": [], "pytorch_eager": []}
    for k in order:
        rp, rcs = rows[k].get("ravel"), rows[k].get("ravel_c")
        for n in ratios:
            rv = (rcs or rp) if n == "dynet_cpp" else (rp or rcs)
            if rv and n in best[k[:3]]:
                ratios[n].append(best[k[:3]][n] / rv["median_ms"])
    g = {n: geomean(v) for n, v in ratios.items()}
    print("against each baseline's best thread count (ravel at every count): ×DyNet autobatch %s "
          "(from C++: %s), ×PyTorch batched %s, ×PyTorch eager %s" % (
              fmt(g["dynet_autobatch"]), fmt(g["dynet_cpp"]), fmt(g["pytorch_batched"]),
              fmt(g["pytorch_eager"])))


if __name__ == "__main__":
    main()
