#!/usr/bin/env python3
"""bench/trees/summarize.py — the baselines of a bench.py run as a Markdown
table, one row per (model, hidden, batch, threads): each baseline's median
(and min) in ms, DyNet's graph/forward split, and the time ravel must reach
on that row for the issue-13 targets (5x DyNet, 2x hand-batched PyTorch):
target_ms = min(dynet / 5, batched / 2). When ravel_ms is present, the
ratios and their geometric means too. Stdlib only.

  python3 bench/trees/summarize.py [bench/trees/out/results-full.jsonl]
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
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "out", "results-full.jsonl")
    rows, order = {}, []
    with open(path) as f:
        for ln in f:
            d = json.loads(ln)
            if d.get("bench") != "trees":
                continue
            c = d["config"]
            key = (c["model"], c["hidden"], c["batch"], c["threads"])
            if key not in rows:
                rows[key] = {"nodes": c["nodes_per_batch"]}
                order.append(key)
            rows[key][d["baseline"]] = d
    fmt = lambda x: "%.3g" % x if x is not None else "–"  # noqa: E731
    print("| model | H | B | thr | nodes | PyTorch eager | PyTorch batched (lin.) | DyNet autobatch "
          "(graph + fwd) | target ms | ravel ms | ×DyNet | ×batched |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rd, rb = [], []
    for k in order:
        r = rows[k]
        e, b, y = r.get("pytorch_eager"), r.get("pytorch_batched"), r.get("dynet_autobatch")
        cell = lambda d: "%s (min %s)" % (fmt(d["median_ms"]), fmt(d["min_ms"])) if d else "–"  # noqa: E731
        bc = cell(b) + (" [%s]" % fmt(b["linearize_ms"]) if b else "")
        yc = cell(y) + (" = %s + %s" % (fmt(y["graph_ms"]), fmt(y["forward_ms"])) if y else "")
        tg = [x for x in (y and y["median_ms"] / 5, b and b["median_ms"] / 2) if x]
        rv = next((d["ravel_ms"] for d in (e, b, y) if d and d.get("ravel_ms")), None)
        xd = y["median_ms"] / rv if rv and y else None
        xb = b["median_ms"] / rv if rv and b else None
        rd.append(xd)
        rb.append(xb)
        print("| %s | %d | %d | %d | %g | %s | %s | %s | %s | %s | %s | %s |" % (
            k[0], k[1], k[2], k[3], r["nodes"], cell(e), bc, yc, fmt(min(tg) if tg else None),
            fmt(rv), fmt(xd), fmt(xb)))
    print("\ngeomean ×DyNet: %s, ×batched: %s" % (fmt(geomean(rd)), fmt(geomean(rb))))


if __name__ == "__main__":
    main()
