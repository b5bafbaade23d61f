#!/usr/bin/env python3
"""bench/summarize_tune.py — the tables of a `ravel bench tune` run, as Markdown.

    python3 bench/summarize_tune.py [results.jsonl] [--records DIR]

(default: the newest bench/out/tune-*.jsonl or results-*.jsonl, as bench/run.sh
writes them; DIR: bench/records.)

Ratios are times, other / tuned (> 1: the tuned kernel is faster):
- per operator and thread count, every T: the tuned+dispatched kernel
  against the fastest vendor (OpenBLAS, oneDNN, oneDNN prepacked), the
  hand-written schedules and, at the sampled T, per-shape tuning;
- a summary: geomean and minimum against the vendor, minimum against the
  hand-written schedules;
- tuning time: the joint run that made the committed records
  (DIR/OP.tune.json, bench/tune/tune.sh) against per-shape tuning, whose
  mean time per T is extrapolated to every T of the range (128), and how
  close the tuned kernel comes to each per-shape kernel;
- the dispatcher's cost per call.
Standard library only.
"""
import glob
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarize import geomean, load  # noqa: E402  (the run's JSON lines, as summarize.py reads them)


def ratio(other, tuned):
    return other / tuned if other and tuned else None


def fmt(x, f="{:.2f}"):
    return f.format(x) if x is not None else "-"


def main():
    args = sys.argv[1:]
    records = "bench/records"
    if "--records" in args:
        i = args.index("--records")
        records = args[i + 1]
        del args[i:i + 2]
    paths = args or sorted(glob.glob("bench/out/tune-*.jsonl") + glob.glob("bench/out/results-*.jsonl"),
                           key=os.path.getmtime)[-1:]
    if not paths:
        sys.exit("summarize_tune.py: no results; run `ravel bench tune > bench/out/tune-DATE.jsonl`")
    rows = [r for p in paths for r in load(p)]
    runs = defaultdict(dict)  # (op, threads) -> T -> row
    ops, per_shape = {}, defaultdict(list)
    for r in rows:
        if r.get("bench") == "tune":
            c = r["config"]
            runs[(c["op"], c["threads"])][c["T"]] = r
        elif r.get("bench") == "tune_op":
            ops[(r["op"], r.get("threads", 0))] = r
        elif r.get("bench") == "tune_per_shape":
            per_shape[(r["op"], r.get("threads", 0))].append(r)

    summary = []
    for key in sorted(runs):
        op, th = key
        print(f"\n### {op}, {th} thread{'s' if th > 1 else ''}\n")
        print("| T | tuned ms | GFLOP/s | vendor | vendor ms | vs vendor | vs hand-written | vs per-shape | kernel |")
        print("|---|---|---|---|---|---|---|---|---|")
        vv, vh = [], []
        low = None
        for t in sorted(runs[key]):
            r = runs[key][t]
            tu = r.get("tuned_ms")
            rv, rh = ratio(r.get("vendor_ms"), tu), ratio(r.get("handwritten_ms"), tu)
            rp = ratio(r.get("per_shape_ms"), tu)
            if rv:
                vv.append(rv)
                low = (t, rv) if low is None or rv < low[1] else low
            if rh:
                vh.append((t, rh))
            print(f"| {t} | {fmt(tu, '{:.3f}')} | {fmt(r.get('tuned_gflops'), '{:.1f}')} | {r.get('vendor', '')} "
                  f"| {fmt(r.get('vendor_ms'), '{:.3f}')} | {fmt(rv)} | {fmt(rh)} | {fmt(rp)} | {r.get('tuned_variant', '')} |")
        gv, gh = geomean(vv), geomean([x for _, x in vh])
        mh = min(vh, key=lambda p: p[1]) if vh else None
        print(f"\ngeomean vs vendor {gv:.2f}, min {fmt(low[1]) if low else '-'} (T={low[0] if low else '-'}); "
              f"vs hand-written geomean {gh:.2f}, min {fmt(mh[1]) if mh else '-'} (T={mh[0] if mh else '-'})")
        summary.append((op, th, gv, low, gh, mh, len(runs[key])))

    if summary:
        print("\n### Summary (time ratios, > 1: tuned is faster)\n")
        print("| operator | threads | T values | geomean vs vendor | min vs vendor (T) | geomean vs hand-written | min vs hand-written (T) |")
        print("|---|---|---|---|---|---|---|")
        for op, th, gv, low, gh, mh, n in summary:
            print(f"| {op} | {th} | {n} | {gv:.2f} | {fmt(low[1]) if low else '-'} ({low[0] if low else '-'}) "
                  f"| {gh:.2f} | {fmt(mh[1]) if mh else '-'} ({mh[0] if mh else '-'}) |")
        allv = [runs[k][t]["vendor_ms"] / runs[k][t]["tuned_ms"] for k in runs for t in runs[k]
                if runs[k][t].get("tuned_ms") and runs[k][t].get("vendor_ms")]
        print(f"\nall operators: geomean vs vendor {geomean(allv):.2f}, min {min(allv) if allv else float('nan'):.2f}")

    print("\n### Tuning time: joint (all T) vs per-shape\n")
    print("| operator | threads | joint trials | joint wall s (compile, measure) | per-shape T | per-shape trials/T | per-shape s/T | per-shape x 128 T | joint saves | tuned vs per-shape kernel at sampled T |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for op, th in sorted(set(ops) | set(per_shape)):
        joint = joint_run(records, op, th)
        ps = per_shape.get((op, th), [])
        mean = sum(p["wall_s"] for p in ps) / len(ps) if ps else None
        whole = mean * 128 if mean else None
        saves = whole / joint["wall_s"] if whole and joint and joint.get("wall_s") else None
        close = []
        for p in ps:
            row = runs.get((op, th), {}).get(p["T"])
            rp = ratio(row.get("per_shape_ms"), row.get("tuned_ms")) if row else None
            if rp:
                close.append(f"T={p['T']} {rp:.2f}")
        jt = (f"{joint['wall_s']:.1f} ({joint['compile_s']:.1f}, {joint['measure_s']:.1f})" if joint else "-")
        print(f"| {op} | {th} | {joint['trials'] if joint else '-'} | {jt} | {','.join(str(p['T']) for p in ps) or '-'} "
              f"| {ps[0]['trials'] if ps else '-'} | {fmt(mean, '{:.1f}')} | {fmt(whole, '{:.0f}')} | {fmt(saves, '{:.1f}x')} "
              f"| {', '.join(close) or '-'} |")

    if ops:
        print("\n### Dispatcher\n")
        print("| operator | threads | records | variants | tree leaves | ns per call |")
        print("|---|---|---|---|---|---|")
        for op, th in sorted(ops):
            o = ops[(op, th)]
            print(f"| {op} | {th} | {o['records']} | {len(o['variants'])} | {o['tree_leaves']} | {fmt(o.get('dispatch_ns'), '{:.1f}')} |")


def joint_run(records, op, threads):
    """The joint tuning run of `threads` threads that made DIR/OP.jsonl (bench/tune/tune.sh
    writes DIR/OP.tune.json: {"runs": {"1": {...}, "2": {...}}}); None when absent."""
    side = os.path.join(records, op + ".tune.json")
    if not os.path.exists(side):
        return None
    j = json.load(open(side))
    return j.get("runs", {}).get(str(threads))

if __name__ == "__main__":
    main()
