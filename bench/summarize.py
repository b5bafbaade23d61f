#!/usr/bin/env python3
"""bench/summarize.py — the ratio tables of a benchmark run, as Markdown.

    python3 bench/summarize.py [results.jsonl]    (default: newest bench/out/results-*.jsonl)

For every workload, thread count and size it prints ravel's time and, per
baseline, ratio = baseline_ms / ravel_ms (> 1: ravel is faster), then the
geometric mean of each ratio column and of "best": the ratio against the
fastest baseline timed in the same process (PyTorch runs in its own, so
its column compares against ravel's time from another run and is left out
of "best"). Square SGEMM also shows GFLOP/s and the
fraction of the measured single- or two-thread FP32 peak (bench/peak).
Standard library only.
"""
import glob
import json
import math
import os
import sys
from collections import defaultdict


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def group_key(d):
    c = d["config"]
    if d["bench"] == "dense":
        return (f"dense {c['N']}x{c['K']} {c['epilogue']}", c["threads"]), c["T"]
    if d["bench"] == "bmm":
        return (f"bmm {c['layout']}", c["threads"]), c["T"]
    if d["bench"] == "sgemm":
        return ("sgemm", c["threads"]), c["M"]
    return None, None


def main():
    paths = sys.argv[1:] or sorted(glob.glob("bench/out/results-*.jsonl"), key=os.path.getmtime)[-1:]
    if not paths:
        sys.exit("summarize.py: no results; run bench/run.sh first")
    rows = [r for p in paths for r in load(p)]
    peak = {r["threads"]: r["gflops"] for r in rows if r.get("bench") == "peak" and r.get("kind") == "fma"}
    table = defaultdict(lambda: defaultdict(dict))  # group -> x -> baseline -> row
    for r in rows:
        if r.get("bench") not in ("dense", "bmm", "sgemm") or "baseline" not in r:
            continue
        g, x = group_key(r)
        table[g][x][r["baseline"]] = r
    for g in sorted(table, key=lambda k: (k[0], k[1])):
        xs = sorted(table[g])
        bases = sorted({b for x in xs for b in table[g][x]})
        print(f"\n### {g[0]}, {g[1]} thread{'s' if g[1] > 1 else ''}\n")
        head = ["size", "ravel ms"] + bases + ["best"]
        if g[0] == "sgemm":
            head += ["GFLOP/s", "of peak"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        cols = defaultdict(list)
        for x in xs:
            line = table[g][x]
            ravel = next((r["ravel_ms"] for r in line.values() if r.get("ravel_ms")), None)
            cells = [str(x), f"{ravel:.3f}" if ravel else "-"]
            best = None
            for b in bases:
                r = line.get(b)
                ratio = r["baseline_ms"] / ravel if r and ravel and r.get("baseline_ms") else None
                cells.append(f"{ratio:.2f}" if ratio else "-")
                if ratio:
                    cols[b].append(ratio)
                    if b != "pytorch":  # timed in another process: not interleaved
                        best = ratio if best is None else min(best, ratio)
            cells.append(f"{best:.2f}" if best else "-")
            if best:
                cols["best"].append(best)
            if g[0] == "sgemm":
                gf = next((r.get("gflops") for r in line.values() if r.get("gflops")), None)
                pk = peak.get(1 if g[1] == 1 else g[1])
                cells += [f"{gf:.1f}" if gf else "-", f"{gf / pk:.0%}" if gf and pk else "-"]
            print("| " + " | ".join(cells) + " |")
        gm = ["geomean", ""] + [f"{geomean(cols[b]):.2f}" for b in bases] + [f"{geomean(cols['best']):.2f}"]
        if g[0] == "sgemm":
            gm += ["", ""]
        print("| " + " | ".join(gm) + " |")
        low = [(x, r) for x, r in zip(xs, cols["best"]) if r < 0.7]
        if low:
            print(f"\nbelow 0.7 against the fastest baseline: {', '.join(f'{x} ({r:.2f})' for x, r in low)}")


if __name__ == "__main__":
    main()
