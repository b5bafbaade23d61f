#!/usr/bin/env python3
"""bench/encoder/summarize.py — the encoder baselines of a run as Markdown:
per layer, thread count, dataset and batch size, each system's median ms,
the fastest padded and nested PyTorch variant, and the time ravel must reach
for issue 14's targets (2.5× faster than nested and 4× than padded on the
short datasets mnli, xnli, mrpc, cola; 1.1× the packed C baseline).

Usage: summarize.py [--min] [results.jsonl]   (default: newest bench/encoder/out/results-*.jsonl)
  --min   tables of min_ms instead of median_ms (on a loaded machine the
          minimum is the better estimate of each system's own speed)
"""
import glob
import json
import os
import sys

ORDER = ["race", "wiki512", "squadv2", "wiki128", "mnli", "xnli", "mrpc", "cola"]
SHORT = {"mnli", "xnli", "mrpc", "cola"}
COLS = ["packed_c", "torch_padded", "torch_padded_sdpa", "torch_nested", "torch_jagged"]


def main():
    args = sys.argv[1:]
    stat = "min_ms" if "--min" in args else "median_ms"
    args = [a for a in args if a != "--min"]
    if args:
        path = args[0]
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        path = max(glob.glob(os.path.join(here, "out", "results-*.jsonl")), key=os.path.getmtime)
    rows = {}
    for line in open(path):
        r = json.loads(line)
        key = (r["layer"], r["threads"], r["dataset"], r["batch"])
        rows.setdefault(key, {})[r["baseline"]] = r[stat]
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
                    pad = [m[c] for c in ("torch_padded", "torch_padded_sdpa") if c in m]
                    nest = [m[c] for c in ("torch_nested", "torch_jagged") if c in m]
                    if pad:
                        targets.append(min(pad) / 4)
                    if nest:
                        targets.append(min(nest) / 2.5)
                cells = ["%.2f" % m[c] if c in m else "—" for c in COLS]
                tgt = "%.2f" % min(targets) if targets else "—"
                print("| %s | %d | %s | %s |" % (k[2], k[3], " | ".join(cells), tgt))


if __name__ == "__main__":
    main()
