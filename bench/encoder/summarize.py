#!/usr/bin/env python3
"""bench/encoder/summarize.py — the encoder systems of a run as Markdown:
per layer, thread count, dataset and batch size, each system's median ms,
the time ravel must reach for issue 14's targets (2.5× faster than nested
and 4× than padded on the short datasets mnli, xnli, mrpc, cola; 1.1× the
packed C baseline); then the ratio table (how many times faster ravel is
than packed C, the fastest padded and the fastest nested PyTorch variant),
ravel's useful GFLOP/s and fraction of the FMA peak of its thread count
(the run's `peak` lines), its prelude's share, and the geomeans against the
targets.

Usage: summarize.py [--min] [results.jsonl]   (default: newest bench/encoder/out/results-*.jsonl)
  --min   tables of min_ms instead of median_ms (on a loaded machine the
          minimum is the better estimate of each system's own speed)
"""
import glob
import json
import math
import os
import sys

ORDER = ["race", "wiki512", "squadv2", "wiki128", "mnli", "xnli", "mrpc", "cola"]
SHORT = {"mnli", "xnli", "mrpc", "cola"}
COLS = ["ravel", "packed_c", "torch_padded", "torch_padded_sdpa", "torch_nested", "torch_jagged"]
PADDED = ("torch_padded", "torch_padded_sdpa")
NESTED = ("torch_nested", "torch_jagged")


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def ratios(rows, full, peak, layer, th, keys):
    """ravel's speedups over each baseline, its useful GFLOP/s, peak share."""
    print("\n#### ravel speedup (baseline ms / ravel ms), %s, %d thread%s\n"
          % (layer, th, "" if th == 1 else "s"))
    print("| dataset | batch | vs packed_c | vs padded | vs nested | ravel GFLOP/s | of peak "
          "| prelude % | ravel vs packed_c max abs |")
    print("|---" * 9 + "|")
    geo = {"packed_c": [], "padded": [], "nested": [], "packed_c_short": []}
    for k in keys:
        m, f = rows[k], full[k]
        if "ravel" not in m:
            continue
        rv = m["ravel"]
        cells = []
        for name, cols in (("packed_c", ("packed_c",)), ("padded", PADDED), ("nested", NESTED)):
            have = [m[c] for c in cols if c in m]
            if have:
                r = min(have) / rv
                cells.append("%.2f" % r)
                if name == "packed_c":
                    geo[name].append(r)
                elif k[2] in SHORT:
                    geo[name].append(r)
            else:
                cells.append("—")
        fr = f["ravel"]
        pk = peak.get(th)
        cells.append("%.1f" % fr["useful_gflops"])
        cells.append("%.2f" % (fr["useful_gflops"] / pk) if pk else "—")
        cells.append("%.2f" % (100 * fr.get("prelude_ms", 0) / rv))
        cells.append("%.2g" % fr["max_abs_vs_packed_c"] if "max_abs_vs_packed_c" in fr else "—")
        print("| %s | %d | %s |" % (k[2], k[3], " | ".join(cells)))
    print()
    for name, target, what in (("packed_c", 1.1, "all rows"), ("padded", 4.0, "mnli, xnli, mrpc, cola"),
                               ("nested", 2.5, "mnli, xnli, mrpc, cola")):
        if geo[name]:
            g = geomean(geo[name])
            print("- geomean speedup vs %s (%s, %d rows): %.2f (target %.1f: %s)"
                  % (name, what, len(geo[name]), g, target, "met" if g >= target else "not met"))


def main():
    args = sys.argv[1:]
    stat = "min_ms" if "--min" in args else "median_ms"
    args = [a for a in args if a != "--min"]
    if args:
        path = args[0]
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        path = max(glob.glob(os.path.join(here, "out", "results-*.jsonl")), key=os.path.getmtime)
    rows, full, peak = {}, {}, {}
    for line in open(path):
        r = json.loads(line)
        if r.get("bench") == "peak":
            if r.get("kind") == "fma":
                peak[r["threads"]] = r["gflops"]
            continue
        key = (r["layer"], r["threads"], r["dataset"], r["batch"])
        rows.setdefault(key, {})[r["baseline"]] = r[stat]
        full.setdefault(key, {})[r["baseline"]] = r
    for layer in sorted({k[0] for k in rows}):
        for th in sorted({k[1] for k in rows if k[0] == layer}):
            print("\n### %s, %d thread%s (%s ms per layer)\n"
                  % (layer, th, "" if th == 1 else "s", stat.split("_")[0]))
            print("| dataset | batch | " + " | ".join(COLS) + " | ravel target |")
            print("|---" * (len(COLS) + 3) + "|")
            keys = sorted((k for k in rows if k[0] == layer and k[1] == th),
                          key=lambda k: (ORDER.index(k[2]) if k[2] in ORDER else 99, k[3]))
            for k in keys:
                m = rows[k]
                targets = []
                if "packed_c" in m:
                    targets.append(m["packed_c"] / 1.1)
                if k[2] in SHORT:
                    pad = [m[c] for c in PADDED if c in m]
                    nest = [m[c] for c in NESTED if c in m]
                    if pad:
                        targets.append(min(pad) / 4)
                    if nest:
                        targets.append(min(nest) / 2.5)
                cells = ["%.2f" % m[c] if c in m else "—" for c in COLS]
                tgt = "%.2f" % min(targets) if targets else "—"
                print("| %s | %d | %s | %s |" % (k[2], k[3], " | ".join(cells), tgt))
            ratios(rows, full, peak, layer, th, keys)


if __name__ == "__main__":
    main()
